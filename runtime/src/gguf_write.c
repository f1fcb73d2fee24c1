/* gguf_write.c: the GGUF writer (the reader is in gguf.c).
 *
 * Metadata is serialised as soon as it is set: each key keeps its value type
 * and the exact bytes that follow the type in a file. That makes every setter,
 * and copy_kv (which takes the reader's raw bytes, nested arrays included),
 * the same operation, and writing is a matter of concatenation.
 *
 * Tensors are only described; their data is read from the caller's pointers
 * while writing. Setters and add_tensor validate what they are given and, on
 * a problem, return -1 and remember the first message, which
 * gt_gguf_writer_write then reports (the setters have no gt_err argument).
 *
 * Output is always v3 with the alignment from general.alignment (32 when
 * absent). Every tensor's data is padded to the alignment, the last one too,
 * as GGML's writer does. The file is written to PATH.tmp, flushed, fsynced and
 * then renamed over PATH, so a reader never sees half a file and a failed
 * write (disk full, ...) leaves PATH as it was. */
#include "gt/gguf.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GGUF_MAGIC 0x46554747u
#define DEFAULT_ALIGNMENT 32u

typedef struct wkv {
    char *key;
    gt_gguf_vtype type;
    uint8_t *val; /* serialised value, as in the file after the type */
    size_t len;
} wkv;

typedef struct wtensor {
    char *name;
    gt_type type;
    int n_dims;
    int64_t ne[GT_GGUF_MAX_DIMS];
    const void *data;
    size_t nbytes;
} wtensor;

struct gt_gguf_writer {
    wkv *kv;
    size_t n_kv, cap_kv;
    wtensor *t;
    size_t n_t, cap_t;
    char err[512]; /* first problem seen by a setter; empty when none */
};

static int wfail(gt_gguf_writer *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int wfail(gt_gguf_writer *w, const char *fmt, ...)
{
    if (!w->err[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(w->err, sizeof w->err, fmt, ap);
        va_end(ap);
    }
    return -1;
}

gt_gguf_writer *gt_gguf_writer_new(void)
{
    return calloc(1, sizeof(gt_gguf_writer));
}

void gt_gguf_writer_free(gt_gguf_writer *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        free(w->kv[i].val);
    }
    for (size_t i = 0; i < w->n_t; i++)
        free(w->t[i].name);
    free(w->kv);
    free(w->t);
    free(w);
}

static int reserve(void **p, size_t *cap, size_t n, size_t sz)
{
    if (n < *cap)
        return 0;
    size_t nc = *cap ? 2 * *cap : 16;
    void *q = realloc(*p, nc * sz);
    if (!q)
        return -1;
    *p = q;
    *cap = nc;
    return 0;
}

/* Takes ownership of val (malloc'ed, len bytes) in every case. */
static int put_kv(gt_gguf_writer *w, const char *key, gt_gguf_vtype type, uint8_t *val, size_t len)
{
    if (!key) {
        free(val);
        return wfail(w, "metadata key is NULL");
    }
    if (!val && len > 0)
        return wfail(w, "key '%s': out of memory", key);
    for (size_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kv[i].key, key) == 0) {
            free(w->kv[i].val);
            w->kv[i].type = type;
            w->kv[i].val = val;
            w->kv[i].len = len;
            return 0;
        }
    }
    char *k = strdup(key);
    if (!k || reserve((void **)&w->kv, &w->cap_kv, w->n_kv, sizeof *w->kv)) {
        free(k);
        free(val);
        return wfail(w, "key '%s': out of memory", key);
    }
    w->kv[w->n_kv++] = (wkv){k, type, val, len};
    return 0;
}

static int put_raw(gt_gguf_writer *w, const char *key, gt_gguf_vtype type, const void *v, size_t n)
{
    uint8_t *val = malloc(n ? n : 1);
    if (val)
        memcpy(val, v, n);
    return put_kv(w, key, type, val, n);
}

int gt_gguf_writer_set_scalar(gt_gguf_writer *w, const char *key, gt_gguf_vtype type,
                              const void *value)
{
    size_t n = gt_gguf_vtype_size(type);
    if (!n)
        return wfail(w, "key '%s': %s is not a scalar type", key ? key : "(null)",
                     gt_gguf_vtype_name(type));
    if (type == GT_GGUF_BOOL) {
        uint8_t b = *(const bool *)value ? 1 : 0;
        return put_raw(w, key, type, &b, 1);
    }
    return put_raw(w, key, type, value, n);
}

int gt_gguf_writer_set_u32(gt_gguf_writer *w, const char *key, uint32_t v)
{
    return put_raw(w, key, GT_GGUF_UINT32, &v, sizeof v);
}

int gt_gguf_writer_set_i32(gt_gguf_writer *w, const char *key, int32_t v)
{
    return put_raw(w, key, GT_GGUF_INT32, &v, sizeof v);
}

int gt_gguf_writer_set_f32(gt_gguf_writer *w, const char *key, float v)
{
    return put_raw(w, key, GT_GGUF_FLOAT32, &v, sizeof v);
}

int gt_gguf_writer_set_bool(gt_gguf_writer *w, const char *key, bool v)
{
    return gt_gguf_writer_set_scalar(w, key, GT_GGUF_BOOL, &v);
}

int gt_gguf_writer_set_str(gt_gguf_writer *w, const char *key, const char *v)
{
    if (!v)
        return wfail(w, "key '%s': string value is NULL", key ? key : "(null)");
    uint64_t n = strlen(v);
    uint8_t *val = malloc(8 + n);
    if (val) {
        memcpy(val, &n, 8);
        memcpy(val + 8, v, n);
    }
    return put_kv(w, key, GT_GGUF_STRING, val, 8 + n);
}

int gt_gguf_writer_set_arr(gt_gguf_writer *w, const char *key, gt_gguf_vtype elem_type,
                           const void *data, uint64_t n)
{
    size_t es = gt_gguf_vtype_size(elem_type);
    if (!es)
        return wfail(w, "key '%s': arrays of %s need their own setter", key ? key : "(null)",
                     gt_gguf_vtype_name(elem_type));
    if (n > (SIZE_MAX - 12) / es || (n > 0 && !data))
        return wfail(w, "key '%s': bad array (%" PRIu64 " elements)", key ? key : "(null)", n);
    size_t len = 12 + (size_t)n * es;
    uint8_t *val = malloc(len);
    if (val) {
        uint32_t t = elem_type;
        memcpy(val, &t, 4);
        memcpy(val + 4, &n, 8);
        if (n)
            memcpy(val + 12, data, (size_t)n * es);
    }
    return put_kv(w, key, GT_GGUF_ARRAY, val, len);
}

int gt_gguf_writer_set_arr_str(gt_gguf_writer *w, const char *key, const char *const *strs,
                               uint64_t n)
{
    size_t len = 12;
    for (uint64_t j = 0; j < n; j++) {
        if (!strs[j])
            return wfail(w, "key '%s': string %" PRIu64 " is NULL", key ? key : "(null)", j);
        len += 8 + strlen(strs[j]);
    }
    uint8_t *val = malloc(len);
    if (val) {
        uint32_t t = GT_GGUF_STRING;
        size_t o = 12;
        memcpy(val, &t, 4);
        memcpy(val + 4, &n, 8);
        for (uint64_t j = 0; j < n; j++) {
            uint64_t sl = strlen(strs[j]);
            memcpy(val + o, &sl, 8);
            memcpy(val + o + 8, strs[j], sl);
            o += 8 + sl;
        }
    }
    return put_kv(w, key, GT_GGUF_ARRAY, val, len);
}

int gt_gguf_writer_copy_kv(gt_gguf_writer *w, const gt_gguf *src, int64_t i)
{
    const char *key = gt_gguf_key(src, i);
    size_t len;
    const void *raw = gt_gguf_kv_raw(src, i, &len);
    if (!key || !raw)
        return wfail(w, "copy_kv: no key/value %" PRId64 " in the source", i);
    return put_raw(w, key, gt_gguf_kv_type(src, i), raw, len);
}

int gt_gguf_writer_add_tensor(gt_gguf_writer *w, const char *name, gt_type type, int n_dims,
                              const int64_t *ne, const void *data, size_t nbytes)
{
    if (!name)
        return wfail(w, "tensor name is NULL");
    const gt_type_traits *ti = gt_type_info((int)type);
    if (!ti)
        return wfail(w, "tensor '%s': unknown type %d", name, (int)type);
    if (n_dims < 1 || n_dims > GT_GGUF_MAX_DIMS || !ne)
        return wfail(w, "tensor '%s': n_dims %d is out of range (1 to %d)", name, n_dims,
                     GT_GGUF_MAX_DIMS);
    int64_t n_el = 1;
    for (int d = 0; d < n_dims; d++) {
        if (ne[d] <= 0)
            return wfail(w, "tensor '%s': dimension %d is %" PRId64, name, d, ne[d]);
        if (n_el > INT64_MAX / ne[d])
            return wfail(w, "tensor '%s': element count overflows", name);
        n_el *= ne[d];
    }
    if (ne[0] % ti->block_size != 0)
        return wfail(w, "tensor '%s': row length %" PRId64 " is not a multiple of the %s block "
                     "size %d", name, ne[0], ti->name, ti->block_size);
    uint64_t blocks = (uint64_t)(n_el / ti->block_size);
    if (blocks > SIZE_MAX / ti->block_bytes || blocks * ti->block_bytes != nbytes)
        return wfail(w, "tensor '%s': %zu data bytes given, %" PRId64 " elements of %s need %"
                     PRIu64, name, nbytes, n_el, ti->name, blocks * (uint64_t)ti->block_bytes);
    if (!data)
        return wfail(w, "tensor '%s': data is NULL", name);
    for (size_t i = 0; i < w->n_t; i++)
        if (strcmp(w->t[i].name, name) == 0)
            return wfail(w, "duplicate tensor name '%s'", name);
    char *nm = strdup(name);
    if (!nm || reserve((void **)&w->t, &w->cap_t, w->n_t, sizeof *w->t)) {
        free(nm);
        return wfail(w, "tensor '%s': out of memory", name);
    }
    wtensor t = {nm, type, n_dims, {1, 1, 1, 1}, data, nbytes};
    for (int d = 0; d < n_dims; d++)
        t.ne[d] = ne[d];
    w->t[w->n_t++] = t;
    return 0;
}

/* The alignment the file will use, from general.alignment if set. */
static int writer_alignment(const gt_gguf_writer *w, uint64_t *out, gt_err *err)
{
    *out = DEFAULT_ALIGNMENT;
    for (size_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kv[i].key, "general.alignment") != 0)
            continue;
        const wkv *k = &w->kv[i];
        uint64_t a = 0;
        if (k->type == GT_GGUF_UINT8 || k->type == GT_GGUF_UINT16 || k->type == GT_GGUF_UINT32 ||
            k->type == GT_GGUF_UINT64)
            memcpy(&a, k->val, k->len); /* little-endian: the low bytes come first */
        else
            return gt_err_set(err, "general.alignment must be an unsigned integer, not %s",
                              gt_gguf_vtype_name(k->type));
        if (a == 0 || (a & (a - 1)) != 0 || a > (1u << 31))
            return gt_err_set(err, "general.alignment %" PRIu64 " is not a power of two up to 2^31",
                              a);
        *out = a;
    }
    return 0;
}

typedef struct out {
    FILE *f;
    uint64_t pos;
    int failed;
} out;

static void put(out *o, const void *p, size_t n)
{
    if (o->failed || n == 0)
        return;
    if (fwrite(p, 1, n, o->f) != n)
        o->failed = errno ? errno : EIO;
    o->pos += n;
}

static void put_u32(out *o, uint32_t v) { put(o, &v, 4); }
static void put_u64(out *o, uint64_t v) { put(o, &v, 8); }

static void put_str(out *o, const char *s)
{
    put_u64(o, strlen(s));
    put(o, s, strlen(s));
}

static void pad_to(out *o, uint64_t align)
{
    static const uint8_t zeros[256];
    uint64_t n = (align - o->pos % align) % align;
    while (n > 0) {
        size_t k = n > sizeof zeros ? sizeof zeros : (size_t)n;
        put(o, zeros, k);
        n -= k;
    }
}

static void write_body(const gt_gguf_writer *w, uint64_t align, out *o)
{
    put_u32(o, GGUF_MAGIC);
    put_u32(o, 3);
    put_u64(o, w->n_t);
    put_u64(o, w->n_kv);
    for (size_t i = 0; i < w->n_kv; i++) {
        put_str(o, w->kv[i].key);
        put_u32(o, w->kv[i].type);
        put(o, w->kv[i].val, w->kv[i].len);
    }
    uint64_t off = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        put_str(o, t->name);
        put_u32(o, (uint32_t)t->n_dims);
        for (int d = 0; d < t->n_dims; d++)
            put_u64(o, (uint64_t)t->ne[d]);
        put_u32(o, (uint32_t)t->type);
        put_u64(o, off);
        off += t->nbytes + (align - t->nbytes % align) % align;
    }
    pad_to(o, align);
    for (size_t i = 0; i < w->n_t; i++) {
        put(o, w->t[i].data, w->t[i].nbytes);
        pad_to(o, align);
    }
}

int gt_gguf_writer_write(gt_gguf_writer *w, const char *path, gt_err *err)
{
    uint64_t align;
    if (!w || !path)
        return gt_err_set(err, "gt_gguf_writer_write: NULL argument");
    if (w->err[0])
        return gt_err_set(err, "cannot write %s: %s", path, w->err);
    if (writer_alignment(w, &align, err))
        return gt_err_wrap(err, "cannot write %s", path);
    size_t n = strlen(path) + 5;
    char *tmp = malloc(n);
    if (!tmp)
        return gt_err_set(err, "cannot write %s: out of memory", path);
    snprintf(tmp, n, "%s.tmp", path);
    out o = {fopen(tmp, "wb"), 0, 0};
    if (!o.f) {
        gt_err_set(err, "cannot create %s: %s", tmp, strerror(errno));
        free(tmp);
        return -1;
    }
    errno = 0;
    write_body(w, align, &o);
    /* Disk-full errors often surface only at flush, sync or close. */
    if (!o.failed && fflush(o.f) != 0)
        o.failed = errno ? errno : EIO;
    if (!o.failed && fsync(fileno(o.f)) != 0)
        o.failed = errno;
    if (fclose(o.f) != 0 && !o.failed)
        o.failed = errno ? errno : EIO;
    if (!o.failed && rename(tmp, path) != 0) {
        gt_err_set(err, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
        unlink(tmp);
        free(tmp);
        return -1;
    }
    if (o.failed) {
        gt_err_set(err, "cannot write %s: %s (after %" PRIu64 " bytes)", tmp, strerror(o.failed),
                   o.pos);
        unlink(tmp);
        free(tmp);
        return -1;
    }
    free(tmp);
    return 0;
}
