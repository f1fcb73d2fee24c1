/* gguf.c: the GGUF v2/v3 artifact reader (the writer is in gguf_write.c).
 *
 * A file is mmapped read-only and parsed once, front to back, by a cursor that
 * checks every read against the bytes that remain. Nothing is allocated from a
 * count in the file before that count has been checked against the file size,
 * and arrays grow by doubling as entries are actually parsed, so a hostile
 * header cannot make us allocate much more than the file itself.
 *
 * What is kept after parsing:
 *   - keys, tensor names and string values are copied, NUL-terminated, into
 *     one arena owned by the artifact (callers get C strings);
 *   - numeric arrays are copied into the arena too, so arr_data is aligned for
 *     its element type (the mmap gives no such guarantee);
 *   - string arrays become one blob plus an offset table (O(1) element access);
 *   - nested arrays are validated but only their element type and length are
 *     exposed; every value also keeps its raw byte span in the mmap, which is
 *     what gt_gguf_writer_copy_kv copies byte for byte;
 *   - tensor data stays in the mmap.
 *
 * Split files: the path given may be any shard. Its split.count / split.no and
 * file name (NAME-0000K-of-0000N.gguf, split.no is 0-based, names 1-based)
 * give every other shard's name. Each shard is parsed and validated on its own
 * (it has its own alignment and data section); metadata comes from shard 0;
 * tensors from all, in shard order; tensor names must be unique across shards.
 *
 * Every error says what is wrong and the byte offset it was found at, and is
 * prefixed with the file's path. A file that shrinks while mapped can still
 * raise SIGBUS; that is outside what a reader can validate. */
#include "gt/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gguf.c assumes a little-endian host, as GGUF and GGML tensor data are"
#endif

#define GGUF_MAGIC 0x46554747u /* "GGUF" read as a little-endian u32 */
#define DEFAULT_ALIGNMENT 32u
#define MAX_NEST 8             /* arrays of arrays deeper than this are refused */
#define MAX_SHARDS 99999       /* five digits in the file name */
#define MIN_KV_BYTES 13        /* key length, type, one-byte value */
#define MIN_TENSOR_BYTES 32    /* name length, n_dims, one dim, type, offset */

/* ---- arena: all copies of strings and arrays, freed at once ---- */

typedef struct chunk {
    struct chunk *next;
    size_t used, cap;
    max_align_t mem[];
} chunk;

typedef struct arena {
    chunk *head;
} arena;

static void *arena_alloc(arena *a, size_t n)
{
    if (n > SIZE_MAX - 64)
        return NULL;
    n = (n + 15) & ~(size_t)15;
    chunk *c = a->head;
    if (c && c->cap - c->used >= n) {
        void *p = (char *)c->mem + c->used;
        c->used += n;
        return p;
    }
    /* A big request gets a chunk of its own behind the head, so the head's
     * free space stays usable for the many small strings that follow. */
    size_t cap = n > 65536 ? n : 65536;
    chunk *nc = malloc(sizeof *nc + cap);
    if (!nc)
        return NULL;
    nc->used = n;
    nc->cap = cap;
    if (c && cap == n) {
        nc->next = c->next;
        c->next = nc;
    } else {
        nc->next = c;
        a->head = nc;
    }
    return nc->mem;
}

static void arena_free(arena *a)
{
    for (chunk *c = a->head, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    a->head = NULL;
}

/* ---- string → index map (open addressing, grows at half load) ---- */

typedef struct slot {
    const char *s;
    int64_t idx;
} slot;

typedef struct strmap {
    slot *v;
    size_t cap, n;
} strmap;

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603u; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

static int64_t map_get(const strmap *m, const char *s)
{
    if (!m->cap)
        return -1;
    for (size_t i = hash_str(s) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (!m->v[i].s)
            return -1;
        if (strcmp(m->v[i].s, s) == 0)
            return m->v[i].idx;
    }
}

/* The caller has checked that s is absent. */
static int map_put(strmap *m, const char *s, int64_t idx)
{
    if (2 * (m->n + 1) > m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 64;
        slot *v = calloc(cap, sizeof *v);
        if (!v)
            return -1;
        for (size_t j = 0; j < m->cap; j++) {
            if (!m->v[j].s)
                continue;
            size_t i = hash_str(m->v[j].s) & (cap - 1);
            while (v[i].s)
                i = (i + 1) & (cap - 1);
            v[i] = m->v[j];
        }
        free(m->v);
        m->v = v;
        m->cap = cap;
    }
    size_t i = hash_str(s) & (m->cap - 1);
    while (m->v[i].s)
        i = (i + 1) & (m->cap - 1);
    m->v[i].s = s;
    m->v[i].idx = idx;
    m->n++;
    return 0;
}

/* Grows *p (of *cap elements of size sz) so that index n fits. */
static int grow(void **p, int64_t *cap, int64_t n, size_t sz)
{
    if (n < *cap)
        return 0;
    int64_t nc = *cap ? 2 * *cap : 16;
    void *q = realloc(*p, (size_t)nc * sz);
    if (!q)
        return -1;
    *p = q;
    *cap = nc;
    return 0;
}

/* ---- the artifact ---- */

typedef struct kv {
    const char *key;
    uint64_t key_off, val_off;  /* where the key and its value start */
    gt_gguf_vtype type;
    union {
        uint64_t u;
        int64_t i;
        double f;
    } num;                      /* scalars; BOOL is 0/1 in u */
    const char *str;            /* STRING */
    uint64_t len;
    gt_gguf_vtype arr_type;     /* ARRAY */
    uint64_t arr_len;
    const void *arr;            /* numeric: aligned copy; NULL otherwise */
    const uint64_t *str_off;    /* string arrays: arr_len + 1 offsets into str_blob */
    const char *str_blob;
    const uint8_t *raw;         /* the value's bytes (after the type) in the mmap */
    uint64_t raw_len;
} kv;

typedef struct shard {
    char *path;
    const uint8_t *map;
    uint64_t size;
    uint32_t version, alignment;
    uint64_t data_off, data_size;
    kv *kvs;
    int64_t n_kv, cap_kv;
    strmap keys;
    gt_gguf_tensor *t;
    uint64_t *t_info;           /* where each tensor's info starts */
    int64_t n_t, cap_t, cap_info;
    bool lenient;               /* unknown tensor types listed, not fatal */
} shard;

struct gt_gguf {
    arena a;
    shard *shards;
    int n_shards;
    gt_gguf_tensor *tensors;
    int64_t n_tensors;
    strmap names;
    bool lenient;
};

/* ---- the cursor ---- */

typedef struct parser {
    arena *a;
    shard *s;
    const uint8_t *p;
    uint64_t size, pos;
    gt_err *err;
    char ctx[160];              /* "key 'x'" or "tensor 'y'": what is being read */
} parser;

static int fail(parser *P, uint64_t off, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(parser *P, uint64_t off, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return gt_err_set(P->err, "%s%s%s at offset %" PRIu64, P->ctx, P->ctx[0] ? ": " : "",
                      msg, off);
}

static int need(parser *P, uint64_t n, const char *what)
{
    if (P->size - P->pos >= n)
        return 0;
    return fail(P, P->pos,
                "truncated file: %s needs %" PRIu64 " bytes but only %" PRIu64
                " remain (file size %" PRIu64 ")",
                what, n, P->size - P->pos, P->size);
}

static uint32_t get_u32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static int rd_u32(parser *P, uint32_t *v, const char *what)
{
    if (need(P, 4, what))
        return -1;
    *v = get_u32(P->p + P->pos);
    P->pos += 4;
    return 0;
}

static int rd_u64(parser *P, uint64_t *v, const char *what)
{
    if (need(P, 8, what))
        return -1;
    *v = get_u64(P->p + P->pos);
    P->pos += 8;
    return 0;
}

/* A GGUF string (u64 length + bytes), copied NUL-terminated into the arena. */
static int rd_str(parser *P, const char *what, const char **out, uint64_t *len)
{
    uint64_t at = P->pos, n;
    if (rd_u64(P, &n, what))
        return -1;
    if (n > P->size - P->pos)
        return fail(P, at, "%s length %" PRIu64 " runs past end of file (%" PRIu64 " bytes remain)",
                    what, n, P->size - P->pos);
    char *s = arena_alloc(P->a, (size_t)n + 1);
    if (!s)
        return fail(P, at, "out of memory copying %s (%" PRIu64 " bytes)", what, n);
    memcpy(s, P->p + P->pos, (size_t)n);
    s[n] = '\0';
    P->pos += n;
    *out = s;
    if (len)
        *len = n;
    return 0;
}

size_t gt_gguf_vtype_size(gt_gguf_vtype t)
{
    switch (t) {
    case GT_GGUF_UINT8: case GT_GGUF_INT8: case GT_GGUF_BOOL: return 1;
    case GT_GGUF_UINT16: case GT_GGUF_INT16: return 2;
    case GT_GGUF_UINT32: case GT_GGUF_INT32: case GT_GGUF_FLOAT32: return 4;
    case GT_GGUF_UINT64: case GT_GGUF_INT64: case GT_GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

const char *gt_gguf_vtype_name(gt_gguf_vtype t)
{
    static const char *const names[] = {
        "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
        "bool", "string", "array", "uint64", "int64", "float64",
    };
    return (unsigned)t <= GT_GGUF_FLOAT64 ? names[t] : "unknown";
}

/* Validates an array (element type, length, elements) and moves past it.
 * Used both for top-level arrays and, recursively, for nested ones. */
static int scan_array(parser *P, int depth, uint32_t *etype, uint64_t *count)
{
    uint64_t at = P->pos, n;
    uint32_t et = 0;
    if (rd_u32(P, &et, "array element type"))
        return -1;
    if (et > GT_GGUF_FLOAT64)
        return fail(P, at, "unknown array element type %" PRIu32, et);
    if (rd_u64(P, &n, "array length"))
        return -1;
    uint64_t rem = P->size - P->pos;
    size_t es = gt_gguf_vtype_size((gt_gguf_vtype)et);
    if (es) {
        if (n > rem / es)
            return fail(P, at + 4, "array of %" PRIu64 " %s runs past end of file (%" PRIu64
                        " bytes remain)", n, gt_gguf_vtype_name(et), rem);
        if (et == GT_GGUF_BOOL)
            for (uint64_t j = 0; j < n; j++)
                if (P->p[P->pos + j] > 1)
                    return fail(P, P->pos + j, "bool array element %" PRIu64 " is %u, not 0 or 1",
                                j, P->p[P->pos + j]);
        P->pos += n * es;
    } else if (et == GT_GGUF_STRING) {
        if (n > rem / 8)
            return fail(P, at + 4, "array of %" PRIu64 " strings runs past end of file (%" PRIu64
                        " bytes remain)", n, rem);
        for (uint64_t j = 0; j < n; j++) {
            uint64_t sat = P->pos, len;
            if (rd_u64(P, &len, "array string"))
                return -1;
            if (len > P->size - P->pos)
                return fail(P, sat, "array string %" PRIu64 " length %" PRIu64
                            " runs past end of file (%" PRIu64 " bytes remain)",
                            j, len, P->size - P->pos);
            P->pos += len;
        }
    } else {
        if (depth >= MAX_NEST)
            return fail(P, at, "arrays nested more than %d deep", MAX_NEST);
        if (n > rem / 12)
            return fail(P, at + 4, "array of %" PRIu64 " arrays runs past end of file (%" PRIu64
                        " bytes remain)", n, rem);
        for (uint64_t j = 0; j < n; j++) {
            uint32_t e2;
            uint64_t n2;
            if (scan_array(P, depth + 1, &e2, &n2))
                return -1;
        }
    }
    *etype = et;
    *count = n;
    return 0;
}

/* Copies an already validated top-level array (elements start at `at`). */
static int store_array(parser *P, kv *k, uint64_t at)
{
    size_t es = gt_gguf_vtype_size(k->arr_type);
    if (es) {
        void *d = arena_alloc(P->a, (size_t)(k->arr_len * es));
        if (!d)
            return fail(P, at, "out of memory copying an array of %" PRIu64 " elements", k->arr_len);
        memcpy(d, P->p + at, (size_t)(k->arr_len * es));
        k->arr = d;
    } else if (k->arr_type == GT_GGUF_STRING) {
        uint64_t total = 0, pos = at;
        for (uint64_t j = 0; j < k->arr_len; j++) {
            uint64_t len = get_u64(P->p + pos);
            total += len + 1;
            pos += 8 + len;
        }
        uint64_t *off = arena_alloc(P->a, (size_t)(k->arr_len + 1) * sizeof *off);
        char *blob = arena_alloc(P->a, (size_t)total);
        if (!off || !blob)
            return fail(P, at, "out of memory copying an array of %" PRIu64 " strings", k->arr_len);
        pos = at;
        uint64_t o = 0;
        for (uint64_t j = 0; j < k->arr_len; j++) {
            uint64_t len = get_u64(P->p + pos);
            off[j] = o;
            memcpy(blob + o, P->p + pos + 8, (size_t)len);
            blob[o + len] = '\0';
            o += len + 1;
            pos += 8 + len;
        }
        off[k->arr_len] = o;
        k->str_off = off;
        k->str_blob = blob;
    }
    return 0;
}

static int parse_value(parser *P, kv *k)
{
    uint64_t at = P->pos;
    uint32_t t;
    if (rd_u32(P, &t, "value type"))
        return -1;
    if (t > GT_GGUF_FLOAT64)
        return fail(P, at, "unknown metadata value type %" PRIu32, t);
    k->type = (gt_gguf_vtype)t;
    k->val_off = P->pos;
    size_t es = gt_gguf_vtype_size((gt_gguf_vtype)t);
    if (es) {
        if (need(P, es, "value"))
            return -1;
        const uint8_t *v = P->p + P->pos;
        union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
                uint64_t u64; int64_t i64; float f32; double f64; } x;
        memcpy(&x, v, es);
        switch (t) {
        case GT_GGUF_UINT8: k->num.u = x.u8; break;
        case GT_GGUF_INT8: k->num.i = x.i8; break;
        case GT_GGUF_UINT16: k->num.u = x.u16; break;
        case GT_GGUF_INT16: k->num.i = x.i16; break;
        case GT_GGUF_UINT32: k->num.u = x.u32; break;
        case GT_GGUF_INT32: k->num.i = x.i32; break;
        case GT_GGUF_UINT64: k->num.u = x.u64; break;
        case GT_GGUF_INT64: k->num.i = x.i64; break;
        case GT_GGUF_FLOAT32: k->num.f = x.f32; break;
        case GT_GGUF_FLOAT64: k->num.f = x.f64; break;
        case GT_GGUF_BOOL:
            if (x.u8 > 1)
                return fail(P, P->pos, "bool value is %u, not 0 or 1", x.u8);
            k->num.u = x.u8;
            break;
        }
        P->pos += es;
    } else if (t == GT_GGUF_STRING) {
        if (rd_str(P, "string value", &k->str, &k->len))
            return -1;
    } else {
        uint32_t et = 0;
        if (scan_array(P, 0, &et, &k->arr_len))
            return -1;
        k->arr_type = (gt_gguf_vtype)et;
        if (store_array(P, k, k->val_off + 12))
            return -1;
    }
    k->raw = P->p + k->val_off;
    k->raw_len = P->pos - k->val_off;
    return 0;
}

static bool is_int_type(gt_gguf_vtype t)
{
    return t == GT_GGUF_UINT8 || t == GT_GGUF_INT8 || t == GT_GGUF_UINT16 ||
           t == GT_GGUF_INT16 || t == GT_GGUF_UINT32 || t == GT_GGUF_INT32 ||
           t == GT_GGUF_UINT64 || t == GT_GGUF_INT64;
}

static bool is_signed_type(gt_gguf_vtype t)
{
    return t == GT_GGUF_INT8 || t == GT_GGUF_INT16 || t == GT_GGUF_INT32 || t == GT_GGUF_INT64;
}

static int parse_kvs(parser *P, uint64_t n_kv)
{
    shard *s = P->s;
    for (uint64_t i = 0; i < n_kv; i++) {
        kv k = {0};
        uint64_t klen;
        k.key_off = P->pos;
        snprintf(P->ctx, sizeof P->ctx, "key/value %" PRIu64, i);
        if (rd_str(P, "key", &k.key, &klen))
            return -1;
        if (memchr(k.key, '\0', (size_t)klen))
            return fail(P, k.key_off, "key contains a NUL byte");
        snprintf(P->ctx, sizeof P->ctx, "key '%.100s'", k.key);
        int64_t dup = map_get(&s->keys, k.key);
        if (dup >= 0)
            return fail(P, k.key_off, "duplicate key (first defined at offset %" PRIu64 ")",
                        s->kvs[dup].key_off);
        if (parse_value(P, &k))
            return -1;
        if (grow((void **)&s->kvs, &s->cap_kv, s->n_kv, sizeof *s->kvs) ||
            map_put(&s->keys, k.key, s->n_kv))
            return fail(P, k.key_off, "out of memory");
        s->kvs[s->n_kv++] = k;
    }
    P->ctx[0] = '\0';
    return 0;
}

static int parse_alignment(parser *P)
{
    shard *s = P->s;
    s->alignment = DEFAULT_ALIGNMENT;
    int64_t ai = map_get(&s->keys, "general.alignment");
    if (ai < 0)
        return 0;
    const kv *k = &s->kvs[ai];
    snprintf(P->ctx, sizeof P->ctx, "general.alignment");
    if (!is_int_type(k->type))
        return fail(P, k->val_off, "has type %s; it must be an unsigned integer",
                    gt_gguf_vtype_name(k->type));
    if (is_signed_type(k->type) && k->num.i < 0)
        return fail(P, k->val_off, "%" PRId64 " is not a power of two", k->num.i);
    uint64_t a = k->num.u;
    if (a == 0 || (a & (a - 1)) != 0)
        return fail(P, k->val_off, "%" PRIu64 " is not a power of two", a);
    if (a > (1u << 31))
        return fail(P, k->val_off, "%" PRIu64 " is too large (at most 2^31)", a);
    s->alignment = (uint32_t)a;
    P->ctx[0] = '\0';
    return 0;
}

static int parse_tensor_info(parser *P, uint64_t i, gt_gguf_tensor *t)
{
    uint64_t at = P->pos, v;
    uint32_t n_dims, type;
    snprintf(P->ctx, sizeof P->ctx, "tensor %" PRIu64, i);
    if (rd_str(P, "tensor name", &t->name, &v))
        return -1;
    if (memchr(t->name, '\0', (size_t)v))
        return fail(P, at, "tensor name contains a NUL byte");
    snprintf(P->ctx, sizeof P->ctx, "tensor '%.100s'", t->name);
    at = P->pos;
    if (rd_u32(P, &n_dims, "n_dims"))
        return -1;
    if (n_dims == 0 || n_dims > GT_GGUF_MAX_DIMS)
        return fail(P, at, "n_dims %" PRIu32 " is out of range (1 to %d)", n_dims, GT_GGUF_MAX_DIMS);
    t->n_dims = (int)n_dims;
    int64_t n_el = 1;
    uint64_t ne0_at = P->pos;
    for (int d = 0; d < GT_GGUF_MAX_DIMS; d++) {
        t->ne[d] = 1;
        if (d >= t->n_dims)
            continue;
        at = P->pos;
        if (rd_u64(P, &v, "dimension"))
            return -1;
        if (v == 0)
            return fail(P, at, "dimension %d is 0", d);
        if (v > INT64_MAX)
            return fail(P, at, "dimension %d (%" PRIu64 ") is too large", d, v);
        if (n_el > INT64_MAX / (int64_t)v)
            return fail(P, at, "element count overflows: %" PRId64 " x %" PRIu64, n_el, v);
        n_el *= (int64_t)v;
        t->ne[d] = (int64_t)v;
    }
    at = P->pos;
    if (rd_u32(P, &type, "tensor type"))
        return -1;
    const gt_type_traits *ti = gt_type_info((int)type);
    if (!ti && P->s->lenient && type < 1000000) {
        /* Size unknown: listed with no data, so the bounds checks below
         * and in parse_shard hold trivially. */
        t->type = (gt_type)type;
        t->n_elements = n_el;
        t->nbytes = 0;
        at = P->pos;
        if (rd_u64(P, &t->offset, "tensor data offset"))
            return -1;
        return 0;
    }
    if (!ti)
        return fail(P, at, "unknown tensor type %" PRIu32, type);
    if (t->ne[0] % ti->block_size != 0)
        return fail(P, ne0_at, "row length %" PRId64 " is not a multiple of the %s block size %d",
                    t->ne[0], ti->name, ti->block_size);
    int64_t blocks = n_el / ti->block_size;
    if ((uint64_t)blocks > (uint64_t)INT64_MAX / ti->block_bytes ||
        (uint64_t)blocks > SIZE_MAX / ti->block_bytes)
        return fail(P, at, "size overflows: %" PRId64 " elements of %s", n_el, ti->name);
    t->type = (gt_type)type;
    t->n_elements = n_el;
    t->nbytes = (size_t)blocks * ti->block_bytes;
    at = P->pos;
    if (rd_u64(P, &t->offset, "tensor data offset"))
        return -1;
    if (t->offset % P->s->alignment != 0)
        return fail(P, at, "data offset %" PRIu64 " is not a multiple of the alignment %" PRIu32,
                    t->offset, P->s->alignment);
    return 0;
}

static int parse_shard(arena *a, shard *s, gt_err *err)
{
    parser P = {.a = a, .s = s, .p = s->map, .size = s->size, .err = err};
    uint32_t magic, version;
    uint64_t n_t, n_kv;
    if (rd_u32(&P, &magic, "magic"))
        return -1;
    if (magic != GGUF_MAGIC)
        return fail(&P, 0, "bad magic 0x%08" PRIx32 " (expected 0x%08x, \"GGUF\"): not a GGUF file",
                    magic, GGUF_MAGIC);
    if (rd_u32(&P, &version, "version"))
        return -1;
    if (version == 1)
        return fail(&P, 4, "unsupported GGUF version 1 (v1 is not supported, only v2 and v3; "
                    "re-convert the model)");
    if (version == 0x02000000u || version == 0x03000000u)
        return fail(&P, 4, "unsupported GGUF version 0x%08" PRIx32 " (a big-endian file; only "
                    "little-endian v2 and v3 are supported)", version);
    if (version != 2 && version != 3)
        return fail(&P, 4, "unsupported GGUF version %" PRIu32 " (only v2 and v3 are supported)",
                    version);
    s->version = version;
    if (rd_u64(&P, &n_t, "tensor_count") || rd_u64(&P, &n_kv, "kv_count"))
        return -1;
    uint64_t rem = P.size - P.pos;
    if (n_kv > rem / MIN_KV_BYTES)
        return fail(&P, 16, "kv_count %" PRIu64 " runs past end of file: the %" PRIu64
                    " bytes after the header hold at most %" PRIu64 " key/values",
                    n_kv, rem, rem / MIN_KV_BYTES);
    if (n_t > rem / MIN_TENSOR_BYTES)
        return fail(&P, 8, "tensor_count %" PRIu64 " runs past end of file: the %" PRIu64
                    " bytes after the header hold at most %" PRIu64 " tensor infos",
                    n_t, rem, rem / MIN_TENSOR_BYTES);
    if (parse_kvs(&P, n_kv) || parse_alignment(&P))
        return -1;
    rem = P.size - P.pos;
    if (n_t > rem / MIN_TENSOR_BYTES)
        return fail(&P, 8, "tensor_count %" PRIu64 " runs past end of file: the %" PRIu64
                    " bytes after the metadata (which ends at offset %" PRIu64 ") hold at most %"
                    PRIu64 " tensor infos", n_t, rem, P.pos, rem / MIN_TENSOR_BYTES);
    for (uint64_t i = 0; i < n_t; i++) {
        gt_gguf_tensor t = {0};
        uint64_t at = P.pos;
        if (parse_tensor_info(&P, i, &t))
            return -1;
        if (grow((void **)&s->t, &s->cap_t, s->n_t, sizeof *s->t) ||
            grow((void **)&s->t_info, &s->cap_info, s->n_t, sizeof *s->t_info))
            return fail(&P, at, "out of memory");
        s->t_info[s->n_t] = at;
        s->t[s->n_t++] = t;
    }
    P.ctx[0] = '\0';
    uint64_t pad = (s->alignment - P.pos % s->alignment) % s->alignment;
    s->data_off = P.pos + pad;
    if (s->data_off > P.size) {
        /* Tokenizer-only files end right after their metadata, unpadded. */
        if (n_t > 0)
            return fail(&P, P.pos, "truncated file: the data section should start at offset %"
                        PRIu64 " (aligned to %" PRIu32 ") but the file has %" PRIu64 " bytes",
                        s->data_off, s->alignment, P.size);
        s->data_off = P.size;
    }
    s->data_size = P.size - s->data_off;
    for (int64_t i = 0; i < s->n_t; i++) {
        gt_gguf_tensor *t = &s->t[i];
        snprintf(P.ctx, sizeof P.ctx, "tensor '%.100s'", t->name);
        if (t->offset > s->data_size || t->nbytes > s->data_size - t->offset)
            return fail(&P, s->t_info[i],
                        "data (%zu bytes at data-section offset %" PRIu64 ", the data section "
                        "starting at file offset %" PRIu64 ") runs past end of file (size %"
                        PRIu64 "); tensor info", t->nbytes, t->offset, s->data_off, P.size);
        t->data = gt_type_info(t->type) ? s->map + s->data_off + t->offset : NULL;
    }
    return 0;
}

static void shard_free(shard *s)
{
    if (s->map)
        munmap((void *)s->map, (size_t)s->size);
    free(s->path);
    free(s->kvs);
    free(s->keys.v);
    free(s->t);
    free(s->t_info);
    memset(s, 0, sizeof *s);
}

static int load_shard(arena *a, const char *path, shard *s, bool lenient, gt_err *err)
{
    s->lenient = lenient;
    s->path = strdup(path);
    if (!s->path)
        return gt_err_set(err, "%s: out of memory", path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return gt_err_set(err, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return gt_err_set(err, "cannot stat %s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return gt_err_set(err, "%s: not a regular file", path);
    }
    s->size = (uint64_t)st.st_size;
    if ((uint64_t)st.st_size > SIZE_MAX) {
        close(fd);
        return gt_err_set(err, "%s: too large to map (%" PRIu64 " bytes)", path, s->size);
    }
    if (s->size > 0) {
        void *m = mmap(NULL, (size_t)s->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            int e = errno;
            close(fd);
            return gt_err_set(err, "cannot mmap %s: %s", path, strerror(e));
        }
        s->map = m;
    }
    close(fd);
    if (parse_shard(a, s, err))
        return gt_err_wrap(err, "%s", path);
    return 0;
}

/* 1 and *v set when key is an integer, 0 when absent, -1 when another type. */
static int shard_int(const shard *s, const char *key, int64_t *v, uint64_t *off)
{
    int64_t i = map_get(&s->keys, key);
    if (i < 0)
        return 0;
    const kv *k = &s->kvs[i];
    *off = k->val_off;
    if (!is_int_type(k->type) || (k->type == GT_GGUF_UINT64 && k->num.u > INT64_MAX))
        return -1;
    *v = k->num.i; /* same bits as num.u for values that fit */
    return 1;
}

/* Reads split.count and split.no; *count is 1 for a file that is not split. */
static int split_info(const shard *s, int64_t *count, int64_t *no, gt_err *err)
{
    uint64_t off = 0;
    *count = 1;
    *no = 0;
    int r = shard_int(s, "split.count", count, &off);
    if (r < 0 || (r > 0 && (*count < 1 || *count > MAX_SHARDS)))
        return gt_err_set(err, "%s: split.count at offset %" PRIu64
                          " must be an integer from 1 to %d", s->path, off, MAX_SHARDS);
    if (*count == 1)
        return 0;
    r = shard_int(s, "split.no", no, &off);
    if (r == 0)
        return gt_err_set(err, "%s: split.count is %" PRId64 " but split.no is missing",
                          s->path, *count);
    if (r < 0 || *no < 0 || *no >= *count)
        return gt_err_set(err, "%s: split.no at offset %" PRIu64 " must be an integer from 0 to %"
                          PRId64, s->path, off, *count - 1);
    return 0;
}

/* NAME-0000K-of-0000N.gguf: sets *prefix_len (the length of NAME) when the
 * path matches shard `no` of `count`. */
static int split_prefix(const char *path, int64_t no, int64_t count, size_t *prefix_len,
                        gt_err *err)
{
    static const char pat[] = "-#####-of-#####.gguf";
    size_t n = strlen(path), m = sizeof pat - 1;
    char want[32];
    snprintf(want, sizeof want, "-%05d-of-%05d.gguf", (int)(no + 1), (int)count);
    if (n < m || strcmp(path + n - m, want) != 0)
        return gt_err_set(err, "%s: split.no %" PRId64 " / split.count %" PRId64
                          " but the name does not end in \"%s\", so the other shards cannot be found",
                          path, no, count, want);
    *prefix_len = n - m;
    return 0;
}

static int load_split(gt_gguf *g, shard *first, int64_t count, int64_t no, gt_err *err)
{
    size_t plen = 0;
    if (split_prefix(first->path, no, count, &plen, err))
        return -1;
    g->shards = calloc((size_t)count, sizeof *g->shards);
    if (!g->shards)
        return gt_err_set(err, "%s: out of memory", first->path);
    g->n_shards = (int)count;
    g->shards[no] = *first;
    memset(first, 0, sizeof *first);
    for (int64_t i = 0; i < count; i++) {
        if (i == no)
            continue;
        size_t len = plen + 32;
        char *name = malloc(len);
        if (!name)
            return gt_err_set(err, "out of memory");
        snprintf(name, len, "%.*s-%05d-of-%05d.gguf", (int)plen, g->shards[no].path,
                 (int)(i + 1), (int)count);
        if (access(name, F_OK) != 0) {
            gt_err_set(err, "missing shard %d of %d: %s (%s, split.count = %" PRId64 ")",
                       (int)(i + 1), (int)count, name, strerror(errno), count);
            free(name);
            return -1;
        }
        int r = load_shard(&g->a, name, &g->shards[i], g->lenient, err);
        free(name);
        if (r)
            return -1;
        int64_t c2, n2;
        if (split_info(&g->shards[i], &c2, &n2, err))
            return -1;
        if (c2 != count || n2 != i)
            return gt_err_set(err, "%s: says it is shard %" PRId64 " of %" PRId64
                              " (split.no / split.count), expected shard %" PRId64 " of %" PRId64,
                              g->shards[i].path, n2, c2, i, count);
    }
    return 0;
}

/* Joins the shards' tensors into one table with unique names. */
static int merge_tensors(gt_gguf *g, gt_err *err)
{
    int64_t n = 0;
    for (int s = 0; s < g->n_shards; s++)
        n += g->shards[s].n_t;
    g->tensors = malloc((size_t)(n ? n : 1) * sizeof *g->tensors);
    int *first_shard = malloc((size_t)(n ? n : 1) * sizeof *first_shard);
    uint64_t *first_off = malloc((size_t)(n ? n : 1) * sizeof *first_off);
    int rc = 0;
    if (!g->tensors || !first_shard || !first_off) {
        rc = gt_err_set(err, "out of memory");
        goto done;
    }
    for (int s = 0; s < g->n_shards && rc == 0; s++) {
        shard *sh = &g->shards[s];
        for (int64_t i = 0; i < sh->n_t; i++) {
            gt_gguf_tensor *t = &sh->t[i];
            int64_t dup = map_get(&g->names, t->name);
            if (dup >= 0) {
                rc = gt_err_set(err, "%s: tensor '%.100s': duplicate tensor name at offset %" PRIu64
                                " (first in %s at offset %" PRIu64 ")", sh->path, t->name,
                                sh->t_info[i], g->shards[first_shard[dup]].path, first_off[dup]);
                break;
            }
            if (map_put(&g->names, t->name, g->n_tensors)) {
                rc = gt_err_set(err, "out of memory");
                break;
            }
            t->shard = s;
            first_shard[g->n_tensors] = s;
            first_off[g->n_tensors] = sh->t_info[i];
            g->tensors[g->n_tensors++] = *t;
        }
    }
done:
    free(first_shard);
    free(first_off);
    return rc;
}

static int open_gguf(const char *path, bool lenient, gt_gguf **out, gt_err *err)
{
    if (!out || !path)
        return gt_err_set(err, "gt_gguf_open: NULL argument");
    *out = NULL;
    gt_gguf *g = calloc(1, sizeof *g);
    shard first = {0};
    int64_t count, no, want;
    uint64_t off;
    if (!g)
        return gt_err_set(err, "%s: out of memory", path);
    g->lenient = lenient;
    if (load_shard(&g->a, path, &first, lenient, err) || split_info(&first, &count, &no, err))
        goto fail;
    if (count == 1) {
        g->shards = malloc(sizeof *g->shards);
        if (!g->shards) {
            gt_err_set(err, "%s: out of memory", path);
            goto fail;
        }
        g->shards[0] = first;
        g->n_shards = 1;
        memset(&first, 0, sizeof first);
    } else if (load_split(g, &first, count, no, err)) {
        goto fail;
    }
    if (merge_tensors(g, err))
        goto fail;
    int r = shard_int(&g->shards[0], "split.tensors.count", &want, &off);
    if (r < 0 || (r > 0 && want != g->n_tensors)) {
        gt_err_set(err, "%s: split.tensors.count at offset %" PRIu64 " is not %" PRId64
                   ", the number of tensors in the %d shard(s)", g->shards[0].path, off,
                   g->n_tensors, g->n_shards);
        goto fail;
    }
    for (int s = 0; s < g->n_shards; s++) {
        free(g->shards[s].t); /* copied into g->tensors */
        g->shards[s].t = NULL;
        free(g->shards[s].t_info);
        g->shards[s].t_info = NULL;
    }
    *out = g;
    return 0;
fail:
    shard_free(&first);
    gt_gguf_close(g);
    return -1;
}

int gt_gguf_open(const char *path, gt_gguf **out, gt_err *err)
{
    return open_gguf(path, false, out, err);
}

int gt_gguf_open_lenient(const char *path, gt_gguf **out, gt_err *err)
{
    return open_gguf(path, true, out, err);
}

void gt_gguf_close(gt_gguf *g)
{
    if (!g)
        return;
    for (int s = 0; s < g->n_shards; s++)
        shard_free(&g->shards[s]);
    free(g->shards);
    free(g->tensors);
    free(g->names.v);
    arena_free(&g->a);
    free(g);
}

/* ---- accessors ---- */

uint32_t gt_gguf_version(const gt_gguf *g) { return g->shards[0].version; }
uint32_t gt_gguf_alignment(const gt_gguf *g) { return g->shards[0].alignment; }
int gt_gguf_n_shards(const gt_gguf *g) { return g->n_shards; }

const char *gt_gguf_shard_path(const gt_gguf *g, int shard)
{
    return shard >= 0 && shard < g->n_shards ? g->shards[shard].path : NULL;
}

const void *gt_gguf_data(const gt_gguf *g, int shard, size_t *size)
{
    if (shard < 0 || shard >= g->n_shards) {
        if (size)
            *size = 0;
        return NULL;
    }
    const struct shard *s = &g->shards[shard];
    if (size)
        *size = (size_t)s->data_size;
    return s->map ? s->map + s->data_off : NULL;
}

uint64_t gt_gguf_file_size(const gt_gguf *g)
{
    uint64_t n = 0;
    for (int s = 0; s < g->n_shards; s++)
        n += g->shards[s].size;
    return n;
}

static const kv *kv_at(const gt_gguf *g, int64_t i)
{
    return i >= 0 && i < g->shards[0].n_kv ? &g->shards[0].kvs[i] : NULL;
}

int64_t gt_gguf_n_kv(const gt_gguf *g) { return g->shards[0].n_kv; }

int64_t gt_gguf_find_key(const gt_gguf *g, const char *key)
{
    return key ? map_get(&g->shards[0].keys, key) : -1;
}

const char *gt_gguf_key(const gt_gguf *g, int64_t i)
{
    const kv *k = kv_at(g, i);
    return k ? k->key : NULL;
}

gt_gguf_vtype gt_gguf_kv_type(const gt_gguf *g, int64_t i)
{
    const kv *k = kv_at(g, i);
    return k ? k->type : (gt_gguf_vtype)-1;
}

bool gt_gguf_kv_int(const gt_gguf *g, int64_t i, int64_t *out)
{
    const kv *k = kv_at(g, i);
    if (!k || !is_int_type(k->type) || (k->type == GT_GGUF_UINT64 && k->num.u > INT64_MAX))
        return false;
    *out = k->num.i;
    return true;
}

bool gt_gguf_kv_float(const gt_gguf *g, int64_t i, double *out)
{
    const kv *k = kv_at(g, i);
    if (!k)
        return false;
    if (k->type == GT_GGUF_FLOAT32 || k->type == GT_GGUF_FLOAT64)
        *out = k->num.f;
    else if (is_signed_type(k->type))
        *out = (double)k->num.i;
    else if (is_int_type(k->type))
        *out = (double)k->num.u;
    else
        return false;
    return true;
}

bool gt_gguf_kv_bool(const gt_gguf *g, int64_t i, bool *out)
{
    const kv *k = kv_at(g, i);
    if (!k || k->type != GT_GGUF_BOOL)
        return false;
    *out = k->num.u != 0;
    return true;
}

const char *gt_gguf_kv_str(const gt_gguf *g, int64_t i, size_t *len)
{
    const kv *k = kv_at(g, i);
    if (!k || k->type != GT_GGUF_STRING)
        return NULL;
    if (len)
        *len = (size_t)k->len;
    return k->str;
}

const void *gt_gguf_kv_raw(const gt_gguf *g, int64_t i, size_t *len)
{
    const kv *k = kv_at(g, i);
    if (len)
        *len = k ? (size_t)k->raw_len : 0;
    return k ? k->raw : NULL;
}

gt_gguf_vtype gt_gguf_arr_type(const gt_gguf *g, int64_t i)
{
    const kv *k = kv_at(g, i);
    return k && k->type == GT_GGUF_ARRAY ? k->arr_type : (gt_gguf_vtype)-1;
}

uint64_t gt_gguf_arr_len(const gt_gguf *g, int64_t i)
{
    const kv *k = kv_at(g, i);
    return k && k->type == GT_GGUF_ARRAY ? k->arr_len : 0;
}

const void *gt_gguf_arr_data(const gt_gguf *g, int64_t i)
{
    const kv *k = kv_at(g, i);
    return k && k->type == GT_GGUF_ARRAY ? k->arr : NULL;
}

const char *gt_gguf_arr_str(const gt_gguf *g, int64_t i, uint64_t j, size_t *len)
{
    const kv *k = kv_at(g, i);
    if (!k || k->type != GT_GGUF_ARRAY || k->arr_type != GT_GGUF_STRING || j >= k->arr_len)
        return NULL;
    if (len)
        *len = (size_t)(k->str_off[j + 1] - k->str_off[j] - 1);
    return k->str_blob + k->str_off[j];
}

int64_t gt_gguf_get_int(const gt_gguf *g, const char *key, int64_t def)
{
    int64_t v;
    return gt_gguf_kv_int(g, gt_gguf_find_key(g, key), &v) ? v : def;
}

double gt_gguf_get_float(const gt_gguf *g, const char *key, double def)
{
    double v;
    return gt_gguf_kv_float(g, gt_gguf_find_key(g, key), &v) ? v : def;
}

bool gt_gguf_get_bool(const gt_gguf *g, const char *key, bool def)
{
    bool v;
    return gt_gguf_kv_bool(g, gt_gguf_find_key(g, key), &v) ? v : def;
}

const char *gt_gguf_get_str(const gt_gguf *g, const char *key)
{
    return gt_gguf_kv_str(g, gt_gguf_find_key(g, key), NULL);
}

int64_t gt_gguf_n_tensors(const gt_gguf *g) { return g->n_tensors; }

const gt_gguf_tensor *gt_gguf_tensor_at(const gt_gguf *g, int64_t i)
{
    return i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}

const gt_gguf_tensor *gt_gguf_find_tensor(const gt_gguf *g, const char *name)
{
    int64_t i = name ? map_get(&g->names, name) : -1;
    return i >= 0 ? &g->tensors[i] : NULL;
}
