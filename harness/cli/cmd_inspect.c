/* cmd_inspect.c: `gauntlet inspect FILE [--json] [--no-tensors]`.
 *
 * Shows what a GGUF artifact holds, through the public reader only: header
 * facts, every metadata key with its type and value, the tensor table and
 * totals by type. A split model is shown as one artifact from any shard.
 *
 * Text output is for people, so it abbreviates: arrays show their first
 * HEAD_ELEMS elements, long strings are cut at a character boundary with
 * their length shown, control bytes are escaped. JSON output is for programs,
 * so it abbreviates only arrays (length + head); strings are complete, with
 * invalid UTF-8 and NUL bytes replaced by U+FFFD so the document stays valid,
 * and 64-bit integers beyond 2^53 (which a JSON number cannot hold exactly)
 * are given as decimal strings.
 *
 * A tensor whose type this runtime does not know does not stop the listing
 * (gt_gguf_open_lenient): it is shown as "type N" without its data, and the
 * exit code is 1. A valid model the runtime refuses (gt_model_load's
 * GT_MODEL_UNSUPPORTED: an architecture, a tensor its graph does not use, a
 * metadata key or value it does not implement) is listed in full too, then
 * "model: unsupported: ..." names every such thing, and the exit code is 1:
 * the file is fine, running it here is not. Exit codes: 0 ok (a GGUF that
 * is not a model at all, such as a vocabulary file, is ok); 1 unknown tensor
 * types or an unsupported model; 2 for bad usage and for a file that cannot
 * be opened or fails validation. JSON output carries the same verdict as
 * "model": {"status": "ok" | "unsupported" | "not loadable" | "none",
 * "reason", "architecture"}. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "commands.h"
#include "gt/gguf.h"
#include "gt/model.h"

#define HEAD_ELEMS 8     /* array elements shown */
#define STR_SHOW 64      /* bytes of a string value shown in text */
#define ELEM_STR_SHOW 24 /* bytes of a string array element shown in text */
#define ELLIPSIS "\xe2\x80\xa6"
#define REPLACEMENT "\xef\xbf\xbd"

static void usage(FILE *f)
{
    fputs("usage: gauntlet inspect FILE [--json] [--no-tensors]\n"
          "\n"
          "Print a GGUF file's version, alignment, shards, size, every metadata key\n"
          "(type and value), and its tensors (name, type, shape, bytes, offset) with\n"
          "totals by type. For a split model pass any shard: all are opened.\n"
          "\n"
          "  --json        print the same as a JSON document\n"
          "  --no-tensors  leave out the per-tensor table (totals are kept)\n"
          "  --help        show this help\n"
          "\n"
          "Exit status: 0 ok, 1 a tensor has a type this runtime does not know (all\n"
          "metadata and tensors are still listed, the unknown type by its number) or\n"
          "the model is unsupported (a tensor its graph does not use, a metadata key\n"
          "or value the runtime does not implement: all are named), 2 bad usage or a\n"
          "file that cannot be read or validated.\n",
          f);
}

/* Length of the well-formed UTF-8 sequence at u (rem bytes left), 0 if none.
 * Overlong forms, surrogates and code points past U+10FFFF are not well formed. */
static size_t utf8_seq(const unsigned char *u, size_t rem)
{
    static const uint32_t min[] = {0, 0x80, 0x800, 0x10000};
    size_t need = u[0] < 0x80 ? 0 : u[0] >= 0xC2 && u[0] <= 0xDF ? 1
                : u[0] >= 0xE0 && u[0] <= 0xEF ? 2 : u[0] >= 0xF0 && u[0] <= 0xF4 ? 3 : 9;
    if (need > 3 || need >= rem)
        return 0;
    uint32_t cp = u[0] & (0x7F >> need);
    for (size_t j = 1; j <= need; j++) {
        if ((u[j] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (u[j] & 0x3F);
    }
    if (cp < min[need] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return need + 1;
}

/* ---- text ---- */

static void print_str(const char *s, size_t len, size_t max)
{
    size_t n = len;
    if (n > max) {
        n = max;
        while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
            n--; /* do not cut a UTF-8 sequence */
    }
    putchar('"');
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t q = utf8_seq((const unsigned char *)s + i, n - i);
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c == '\n')
            fputs("\\n", stdout);
        else if (c == '\t')
            fputs("\\t", stdout);
        else if (q == 0 || c < 0x20 || c == 0x7f)
            printf("\\x%02x", c);
        else
            fwrite(s + i, 1, q, stdout);
        i += q ? q : 1;
    }
    putchar('"');
    if (n < len)
        printf(ELLIPSIS " (%zu bytes)", len);
}

/* The shortest %g form that reads back as the same value. */
static void print_float(double v, bool single)
{
    char buf[40];
    for (int p = single ? 6 : 15; p <= (single ? 9 : 17); p++) {
        snprintf(buf, sizeof buf, "%.*g", p, v);
        if (single ? strtof(buf, NULL) == (float)v : strtod(buf, NULL) == v)
            break;
    }
    fputs(buf, stdout);
}

/* One scalar from its little-endian bytes. */
static void print_num(gt_gguf_vtype t, const void *p)
{
    union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
            uint64_t u64; int64_t i64; float f32; double f64; } x;
    memset(&x, 0, sizeof x);
    memcpy(&x, p, gt_gguf_vtype_size(t));
    switch (t) {
    case GT_GGUF_UINT8: printf("%u", x.u8); break;
    case GT_GGUF_INT8: printf("%d", x.i8); break;
    case GT_GGUF_UINT16: printf("%u", x.u16); break;
    case GT_GGUF_INT16: printf("%d", x.i16); break;
    case GT_GGUF_UINT32: printf("%" PRIu32, x.u32); break;
    case GT_GGUF_INT32: printf("%" PRId32, x.i32); break;
    case GT_GGUF_UINT64: printf("%" PRIu64, x.u64); break;
    case GT_GGUF_INT64: printf("%" PRId64, x.i64); break;
    case GT_GGUF_FLOAT32: print_float(x.f32, true); break;
    case GT_GGUF_FLOAT64: print_float(x.f64, false); break;
    case GT_GGUF_BOOL: fputs(x.u8 ? "true" : "false", stdout); break;
    default: fputs("?", stdout); break;
    }
}

static void print_value(const gt_gguf *g, int64_t i)
{
    gt_gguf_vtype t = gt_gguf_kv_type(g, i);
    size_t len;
    if (t == GT_GGUF_STRING) {
        const char *s = gt_gguf_kv_str(g, i, &len);
        print_str(s, len, STR_SHOW);
    } else if (t != GT_GGUF_ARRAY) {
        print_num(t, gt_gguf_kv_raw(g, i, &len));
    } else {
        gt_gguf_vtype et = gt_gguf_arr_type(g, i);
        uint64_t n = gt_gguf_arr_len(g, i), shown = n < HEAD_ELEMS ? n : HEAD_ELEMS;
        const uint8_t *d = gt_gguf_arr_data(g, i);
        printf("%" PRIu64 " item%s: [", n, n == 1 ? "" : "s");
        for (uint64_t j = 0; j < shown && et != GT_GGUF_ARRAY; j++) {
            if (j)
                fputs(", ", stdout);
            if (et == GT_GGUF_STRING) {
                const char *s = gt_gguf_arr_str(g, i, j, &len);
                print_str(s, len, ELEM_STR_SHOW);
            } else {
                print_num(et, d + j * gt_gguf_vtype_size(et));
            }
        }
        if (et == GT_GGUF_ARRAY)
            fputs("(nested arrays are not shown)", stdout);
        else if (shown < n)
            fputs(", " ELLIPSIS, stdout);
        putchar(']');
    }
}

static void human(uint64_t n, char *buf, size_t size)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)n;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, size, "%" PRIu64 " B", n);
    else
        snprintf(buf, size, "%.2f %s", v, units[u]);
}

static void shape_str(const gt_gguf_tensor *t, char *buf, size_t size)
{
    size_t k = 0;
    buf[0] = '\0';
    for (int d = 0; d < t->n_dims && k < size; d++)
        k += (size_t)snprintf(buf + k, size - k, "%s%" PRId64, d ? " x " : "", t->ne[d]);
}

typedef struct totals {
    int64_t count[GT_TYPE_COUNT];
    uint64_t bytes[GT_TYPE_COUNT];
    uint64_t all_bytes;
    int64_t unknown;     /* tensors of a type this runtime does not know */
    int first_unknown;   /* the type id of the first of them */
} totals;

static void count_types(const gt_gguf *g, totals *tt)
{
    memset(tt, 0, sizeof *tt);
    for (int64_t i = 0; i < gt_gguf_n_tensors(g); i++) {
        const gt_gguf_tensor *t = gt_gguf_tensor_at(g, i);
        if (!gt_type_info(t->type)) {
            if (!tt->unknown++)
                tt->first_unknown = (int)t->type;
            continue;
        }
        tt->count[t->type]++;
        tt->bytes[t->type] += t->nbytes;
        tt->all_bytes += t->nbytes;
    }
}

/* The type's name, or "type N" for an id this runtime does not know. */
static const char *type_label(int type)
{
    static char buf[8][24];
    static int k;
    if (gt_type_info(type))
        return gt_type_name(type);
    char *b = buf[k++ % 8];
    snprintf(b, sizeof buf[0], "type %d", type);
    return b;
}

/* Whether the runtime runs the file: 0 (and *out the model) when it loads,
 * 1 when it refuses it (why: "unsupported: ..."), 2 when it is not a model
 * it can load for another reason (why: the error). */
static int load_status(const char *path, gt_model **out, char *why, size_t cap)
{
    gt_err err = {{0}};
    *out = NULL;
    int rc = gt_model_load(path, out, &err);
    /* The message is "PATH: ..."; the path is shown already. */
    size_t n = strlen(path);
    const char *w = strncmp(err.msg, path, n) == 0 && err.msg[n] == ':' ? err.msg + n + 2
                                                                       : err.msg;
    snprintf(why, cap, "%s", rc ? w : "");
    return rc == 0 ? 0 : rc == GT_MODEL_UNSUPPORTED ? 1 : 2;
}

/* The hyper-parameters the runtime reads from the file, and which of them
 * came from the architecture's defaults because the file has no key. A
 * file that is not a loadable model (a tokenizer-only GGUF) says why; that
 * is not an inspect failure. An unsupported model is: returns 1. */
static int print_model(const char *path)
{
    gt_model *m;
    char why[1100];
    int st = load_status(path, &m, why, sizeof why);
    if (st == 1) {
        printf("\nmodel: %s\n", why);
        return 1;
    }
    if (st == 2) {
        printf("\nmodel: not loadable by the runtime: %s\n", why);
        return 0;
    }
    const gt_hparams *hp = gt_model_hparams(m);
    printf("\nmodel (as the runtime reads it):\n");
    printf("  architecture  %s\n", hp->arch);
    printf("  layers %d, n_embd %d, heads %d (kv %d), head_dim %d, q width %d, ffn %d, vocab %d\n",
           hp->n_layer, hp->n_embd, hp->n_head, hp->n_head_kv, hp->head_dim, hp->q_dim, hp->n_ff,
           hp->n_vocab);
    printf("  rope %s, base %g", hp->rope_mode ? "neox" : "adjacent pairs", hp->rope_base);
    if (hp->swa_window > 0)
        printf(" (local layers %g)", hp->rope_base_local);
    printf("; attention scale %g; rms eps %g\n", hp->attn_scale, hp->rms_eps);
    if (hp->swa_window > 0)
        printf("  sliding window %d on local layers; layer l is global when (l+1) %% %d == 0\n",
               hp->swa_window, hp->swa_period);
    if (hp->n_expert > 0)
        printf("  experts %d per layer, %d used per token (softmax, top-k%s), expert ffn %d\n",
               hp->n_expert, hp->n_expert_used, hp->expert_norm ? ", renormalized" : "",
               hp->n_ff_exp);
    const gt_gguf *g = gt_model_gguf(m);
    if (gt_gguf_find_tensor(g, "rope_freqs.weight"))
        printf("  rope factors  rope_freqs.weight on Q and K at every layer\n");
    if (gt_gguf_find_tensor(g, "rope_factors_long.weight"))
        printf("  rope factors  rope_factors_long.weight when the context (rounded up to 256, "
               "as llama.cpp) exceeds %d, else rope_factors_short.weight\n", hp->n_ctx_orig);
    if (hp->rope_freq_scale != 1.0f || hp->rope_attn_factor != 1.0f)
        printf("  rope scaling  linear freq_scale %g; attn_factor %g\n", hp->rope_freq_scale,
               hp->rope_attn_factor);
    printf("  defaulted     %s\n",
           hp->defaulted[0] ? hp->defaulted : "(none: every value is in the file)");
    gt_model_free(m);
    return 0;
}

static void print_text(const char *path, const gt_gguf *g, bool tensors)
{
    char h[32];
    int ns = gt_gguf_n_shards(g);
    human(gt_gguf_file_size(g), h, sizeof h);
    printf("file        %s\n", path);
    printf("version     %" PRIu32 "\n", gt_gguf_version(g));
    printf("alignment   %" PRIu32 "\n", gt_gguf_alignment(g));
    printf("shards      %d\n", ns);
    for (int s = 0; ns > 1 && s < ns; s++)
        printf("  %d  %s\n", s, gt_gguf_shard_path(g, s));
    printf("file size   %" PRIu64 " bytes (%s)\n", gt_gguf_file_size(g), h);
    printf("metadata    %" PRId64 " keys\n", gt_gguf_n_kv(g));
    printf("tensors     %" PRId64 "\n", gt_gguf_n_tensors(g));

    int kw = 0;
    for (int64_t i = 0; i < gt_gguf_n_kv(g); i++) {
        int l = (int)strlen(gt_gguf_key(g, i));
        kw = l > kw ? (l < 48 ? l : 48) : kw;
    }
    printf("\nmetadata:\n");
    for (int64_t i = 0; i < gt_gguf_n_kv(g); i++) {
        char type[32];
        gt_gguf_vtype t = gt_gguf_kv_type(g, i);
        if (t == GT_GGUF_ARRAY)
            snprintf(type, sizeof type, "array[%s]", gt_gguf_vtype_name(gt_gguf_arr_type(g, i)));
        else
            snprintf(type, sizeof type, "%s", gt_gguf_vtype_name(t));
        printf("  %-*s  %-14s ", kw, gt_gguf_key(g, i), type);
        print_value(g, i);
        putchar('\n');
    }

    if (tensors && gt_gguf_n_tensors(g) > 0) {
        int nw = 4;
        for (int64_t i = 0; i < gt_gguf_n_tensors(g); i++) {
            int l = (int)strlen(gt_gguf_tensor_at(g, i)->name);
            nw = l > nw ? (l < 48 ? l : 48) : nw;
        }
        printf("\ntensors:\n  %-*s  %-5s  %-20s %12s %12s%s\n", nw, "name", "type", "shape",
               "bytes", "offset", ns > 1 ? "  shard" : "");
        for (int64_t i = 0; i < gt_gguf_n_tensors(g); i++) {
            const gt_gguf_tensor *t = gt_gguf_tensor_at(g, i);
            char shape[96];
            shape_str(t, shape, sizeof shape);
            if (gt_type_info(t->type))
                printf("  %-*s  %-5s  %-20s %12zu %12" PRIu64, nw, t->name, type_label(t->type),
                       shape, t->nbytes, t->offset);
            else
                printf("  %-*s  %-5s  %-20s %12s %12" PRIu64, nw, t->name, type_label(t->type),
                       shape, "?", t->offset);
            if (ns > 1)
                printf("  %5d", t->shard);
            putchar('\n');
        }
    }

    totals tt;
    count_types(g, &tt);
    printf("\ntotals by type:\n");
    for (int ty = 0; ty < GT_TYPE_COUNT; ty++) {
        if (!tt.count[ty])
            continue;
        human(tt.bytes[ty], h, sizeof h);
        printf("  %-6s %6" PRId64 " tensors %14" PRIu64 " bytes  (%s)\n", gt_type_name(ty),
               tt.count[ty], tt.bytes[ty], h);
    }
    if (tt.unknown)
        printf("  %-6s %6" PRId64 " tensors %14s bytes  (a type this runtime does not know)\n",
               "?", tt.unknown, "?");
    human(tt.all_bytes, h, sizeof h);
    printf("  %-6s %6" PRId64 " tensors %14" PRIu64 " bytes  (%s%s)\n", "all",
           gt_gguf_n_tensors(g), tt.all_bytes, h, tt.unknown ? " + the unknown ones" : "");
}

/* ---- JSON ---- */

/* Valid UTF-8 copy of s: NUL and bytes that do not start a well-formed
 * sequence become U+FFFD. */
static char *utf8_clean(const char *s, size_t len)
{
    if (len > (SIZE_MAX - 1) / 3)
        return NULL;
    char *o = malloc(3 * len + 1);
    if (!o)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < len;) {
        const unsigned char *u = (const unsigned char *)s + i;
        size_t q = u[0] ? utf8_seq(u, len - i) : 0;
        if (q) {
            memcpy(o + k, u, q);
            k += q;
            i += q;
        } else {
            memcpy(o + k, REPLACEMENT, 3);
            k += 3;
            i++;
        }
    }
    o[k] = '\0';
    return o;
}

static cJSON *json_str(const char *s, size_t len)
{
    char *c = utf8_clean(s, len);
    cJSON *j = c ? cJSON_CreateString(c) : NULL;
    free(c);
    return j;
}

static cJSON *json_num(gt_gguf_vtype t, const void *p)
{
    union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
            uint64_t u64; int64_t i64; float f32; double f64; } x;
    const double exact = 9007199254740992.0; /* 2^53 */
    char buf[32];
    memset(&x, 0, sizeof x);
    memcpy(&x, p, gt_gguf_vtype_size(t));
    switch (t) {
    case GT_GGUF_UINT8: return cJSON_CreateNumber(x.u8);
    case GT_GGUF_INT8: return cJSON_CreateNumber(x.i8);
    case GT_GGUF_UINT16: return cJSON_CreateNumber(x.u16);
    case GT_GGUF_INT16: return cJSON_CreateNumber(x.i16);
    case GT_GGUF_UINT32: return cJSON_CreateNumber(x.u32);
    case GT_GGUF_INT32: return cJSON_CreateNumber(x.i32);
    case GT_GGUF_FLOAT32: return cJSON_CreateNumber(x.f32);
    case GT_GGUF_FLOAT64: return cJSON_CreateNumber(x.f64);
    case GT_GGUF_BOOL: return cJSON_CreateBool(x.u8 != 0);
    case GT_GGUF_UINT64:
        if ((double)x.u64 < exact)
            return cJSON_CreateNumber((double)x.u64);
        snprintf(buf, sizeof buf, "%" PRIu64, x.u64);
        return cJSON_CreateString(buf);
    case GT_GGUF_INT64:
        if ((double)x.i64 < exact && (double)x.i64 > -exact)
            return cJSON_CreateNumber((double)x.i64);
        snprintf(buf, sizeof buf, "%" PRId64, x.i64);
        return cJSON_CreateString(buf);
    default: return cJSON_CreateNull();
    }
}

static cJSON *json_kv(const gt_gguf *g, int64_t i)
{
    cJSON *o = cJSON_CreateObject();
    gt_gguf_vtype t = gt_gguf_kv_type(g, i);
    size_t len;
    const char *key = gt_gguf_key(g, i);
    cJSON_AddItemToObject(o, "key", json_str(key, strlen(key)));
    cJSON_AddStringToObject(o, "type", gt_gguf_vtype_name(t));
    if (t == GT_GGUF_STRING) {
        const char *s = gt_gguf_kv_str(g, i, &len);
        cJSON_AddNumberToObject(o, "length", (double)len);
        cJSON_AddItemToObject(o, "value", json_str(s, len));
    } else if (t != GT_GGUF_ARRAY) {
        cJSON_AddItemToObject(o, "value", json_num(t, gt_gguf_kv_raw(g, i, &len)));
    } else {
        gt_gguf_vtype et = gt_gguf_arr_type(g, i);
        uint64_t n = gt_gguf_arr_len(g, i), shown = n < HEAD_ELEMS ? n : HEAD_ELEMS;
        const uint8_t *d = gt_gguf_arr_data(g, i);
        cJSON_AddStringToObject(o, "elem_type", gt_gguf_vtype_name(et));
        cJSON_AddNumberToObject(o, "length", (double)n);
        cJSON *head = cJSON_AddArrayToObject(o, "head");
        for (uint64_t j = 0; j < shown && et != GT_GGUF_ARRAY; j++) {
            if (et == GT_GGUF_STRING) {
                const char *s = gt_gguf_arr_str(g, i, j, &len);
                cJSON_AddItemToArray(head, json_str(s, len));
            } else {
                cJSON_AddItemToArray(head, json_num(et, d + j * gt_gguf_vtype_size(et)));
            }
        }
        cJSON_AddBoolToObject(o, "truncated", et == GT_GGUF_ARRAY ? n > 0 : shown < n);
    }
    return o;
}

static int print_json(const char *path, const gt_gguf *g, bool tensors, bool *unsupported)
{
    cJSON *root = cJSON_CreateObject();
    if (!root)
        return -1;
    cJSON_AddStringToObject(root, "file", path);
    cJSON_AddNumberToObject(root, "version", gt_gguf_version(g));
    cJSON_AddNumberToObject(root, "alignment", gt_gguf_alignment(g));
    cJSON *sh = cJSON_AddArrayToObject(root, "shards");
    for (int s = 0; s < gt_gguf_n_shards(g); s++)
        cJSON_AddItemToArray(sh, cJSON_CreateString(gt_gguf_shard_path(g, s)));
    cJSON_AddNumberToObject(root, "file_size", (double)gt_gguf_file_size(g));
    cJSON_AddNumberToObject(root, "n_kv", (double)gt_gguf_n_kv(g));
    cJSON_AddNumberToObject(root, "n_tensors", (double)gt_gguf_n_tensors(g));
    cJSON *md = cJSON_AddArrayToObject(root, "metadata");
    for (int64_t i = 0; i < gt_gguf_n_kv(g); i++)
        cJSON_AddItemToArray(md, json_kv(g, i));
    if (tensors) {
        cJSON *ts = cJSON_AddArrayToObject(root, "tensors");
        for (int64_t i = 0; i < gt_gguf_n_tensors(g); i++) {
            const gt_gguf_tensor *t = gt_gguf_tensor_at(g, i);
            cJSON *o = cJSON_CreateObject();
            cJSON_AddItemToObject(o, "name", json_str(t->name, strlen(t->name)));
            cJSON_AddStringToObject(o, "type", gt_type_info(t->type) ? gt_type_name(t->type)
                                                                     : "unknown");
            cJSON_AddNumberToObject(o, "type_id", (double)t->type);
            cJSON *shape = cJSON_AddArrayToObject(o, "shape");
            for (int d = 0; d < t->n_dims; d++)
                cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->ne[d]));
            cJSON_AddNumberToObject(o, "n_elements", (double)t->n_elements);
            cJSON_AddNumberToObject(o, "bytes", (double)t->nbytes);
            cJSON_AddNumberToObject(o, "offset", (double)t->offset);
            cJSON_AddNumberToObject(o, "shard", t->shard);
            cJSON_AddItemToArray(ts, o);
        }
    }
    totals tt;
    count_types(g, &tt);
    cJSON *tot = cJSON_AddArrayToObject(root, "totals");
    for (int ty = 0; ty < GT_TYPE_COUNT; ty++) {
        if (!tt.count[ty])
            continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "type", gt_type_name(ty));
        cJSON_AddNumberToObject(o, "count", (double)tt.count[ty]);
        cJSON_AddNumberToObject(o, "bytes", (double)tt.bytes[ty]);
        cJSON_AddItemToArray(tot, o);
    }
    cJSON_AddNumberToObject(root, "total_bytes", (double)tt.all_bytes);
    cJSON_AddNumberToObject(root, "unknown_type_tensors", (double)tt.unknown);
    /* "model": whether the runtime runs it ("ok", "unsupported" with why,
     * "not loadable" with why, "none" for a file without tensors). */
    cJSON *mo = cJSON_AddObjectToObject(root, "model");
    int st = 3;
    char why[1100] = "";
    if (!tt.unknown && gt_gguf_n_tensors(g) > 0) {
        gt_model *m;
        st = load_status(path, &m, why, sizeof why);
        if (m)
            cJSON_AddStringToObject(mo, "architecture", gt_model_hparams(m)->arch);
        gt_model_free(m);
    }
    static const char *const NAMES[] = {"ok", "unsupported", "not loadable", "none"};
    cJSON_AddStringToObject(mo, "status", NAMES[st]);
    if (why[0])
        cJSON_AddStringToObject(mo, "reason", why);
    *unsupported = st == 1;
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text)
        return -1;
    puts(text);
    cJSON_free(text);
    return 0;
}

int cmd_inspect(int argc, char **argv)
{
    const char *path = NULL;
    bool json = false, tensors = true;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return GT_EXIT_OK;
        } else if (strcmp(a, "--json") == 0) {
            json = true;
        } else if (strcmp(a, "--no-tensors") == 0) {
            tensors = false;
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "gauntlet inspect: unknown option '%s' (see gauntlet inspect --help)\n", a);
            return GT_EXIT_USAGE;
        } else if (path) {
            fprintf(stderr, "gauntlet inspect: one FILE expected, got '%s' and '%s'\n", path, a);
            return GT_EXIT_USAGE;
        } else {
            path = a;
        }
    }
    if (!path) {
        fprintf(stderr, "gauntlet inspect: missing FILE\n");
        usage(stderr);
        return GT_EXIT_USAGE;
    }
    gt_gguf *g;
    gt_err err;
    /* Lenient: a file with a tensor type we do not know is still listed in
     * full (that is when someone most needs to see it), then exits 1. */
    if (gt_gguf_open_lenient(path, &g, &err) != 0) {
        fprintf(stderr, "gauntlet inspect: %s\n", err.msg);
        return GT_EXIT_USAGE;
    }
    int rc = GT_EXIT_OK;
    bool unsupported = false;
    if (json) {
        if (print_json(path, g, tensors, &unsupported) != 0) {
            fprintf(stderr, "gauntlet inspect: out of memory building the JSON output\n");
            rc = GT_EXIT_USAGE;
        }
    } else {
        print_text(path, g, tensors);
    }
    totals tt;
    count_types(g, &tt);
    /* A file with no tensors (a vocabulary GGUF) is no model to refuse. */
    if (!json && !tt.unknown && gt_gguf_n_tensors(g) > 0)
        unsupported = print_model(path) != 0;
    if (!json && gt_gguf_n_tensors(g) == 0)
        printf("\nmodel: none (no tensors: a vocabulary or metadata-only file)\n");
    gt_gguf_close(g);
    if (unsupported) {
        fflush(stdout); /* after the listing, also where both go to one pipe */
        fprintf(stderr, "gauntlet inspect: %s: the runtime does not support this model (see "
                        "\"model\" above)\n", path);
        rc = rc == GT_EXIT_OK ? GT_EXIT_FAIL : rc;
    }
    if (tt.unknown) {
        fprintf(stderr, "gauntlet inspect: %s: %" PRId64 " tensor(s) have a type this runtime does"
                        " not know (the first: type %d); listed above without their data\n",
                path, tt.unknown, tt.first_unknown);
        rc = rc == GT_EXIT_OK ? GT_EXIT_FAIL : rc;
    }
    if (fflush(stdout) != 0) {
        perror("gauntlet inspect: writing output");
        rc = GT_EXIT_USAGE;
    }
    return rc;
}
