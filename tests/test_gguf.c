/* test_gguf.c: the GGUF reader and writer.
 *
 * Three kinds of test: round trips through the writer (every value type, every
 * tensor type, split files), real files from ../shared/models (written by
 * other implementations), and malformed files built byte by byte in memory,
 * one per rejection rule, each checking that the message names the problem
 * and the byte offset. A truncation sweep and a seeded byte-flip loop check
 * that no input crashes the reader. */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include "gt/gguf.h"
#include "testutil.h"

/* ---- a byte builder for hand-made files ---- */

typedef struct buf {
    uint8_t *p;
    size_t n, cap;
} buf;

static void b_put(buf *b, const void *d, size_t n)
{
    if (b->n + n > b->cap || !b->p) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n)
            cap *= 2;
        b->p = realloc(b->p, cap);
        ck_assert_ptr_nonnull(b->p);
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->n, d, n);
    b->n += n;
}

static void b_u8(buf *b, uint8_t v) { b_put(b, &v, 1); }
static void b_u32(buf *b, uint32_t v) { b_put(b, &v, 4); }
static void b_u64(buf *b, uint64_t v) { b_put(b, &v, 8); }

static void b_str(buf *b, const char *s)
{
    b_u64(b, strlen(s));
    b_put(b, s, strlen(s));
}

static void b_zeros(buf *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        b_u8(b, 0);
}

static void b_pad(buf *b, size_t align)
{
    while (b->n % align)
        b_u8(b, 0);
}

static void b_header(buf *b, uint32_t version, uint64_t n_t, uint64_t n_kv)
{
    b_u32(b, 0x46554747u);
    b_u32(b, version);
    b_u64(b, n_t);
    b_u64(b, n_kv);
}

static void b_kv_u32(buf *b, const char *key, uint32_t v)
{
    b_str(b, key);
    b_u32(b, GT_GGUF_UINT32);
    b_u32(b, v);
}

static void b_tensor(buf *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type,
                     uint64_t off)
{
    b_str(b, name);
    b_u32(b, n_dims);
    for (uint32_t d = 0; d < n_dims; d++)
        b_u64(b, ne[d]);
    b_u32(b, type);
    b_u64(b, off);
}

/* One tensor described by (n_dims, ne, type, offset), after one kv, followed
 * by `data` bytes of data. Returns the offset of the tensor info. */
static size_t b_one_tensor(buf *b, uint32_t n_dims, const uint64_t *ne, uint32_t type,
                           uint64_t off, size_t data)
{
    b_header(b, 3, 1, 1);
    b_kv_u32(b, "a", 7);
    size_t at = b->n;
    b_tensor(b, "t", n_dims, ne, type, off);
    b_pad(b, 32);
    b_zeros(b, data);
    return at;
}

static char *fmt(const char *f, uint64_t v)
{
    static char s[8][64];
    static int k;
    char *o = s[k++ % 8];
    snprintf(o, 64, f, v);
    return o;
}

/* Opens the bytes as a file, expects failure with every word in the message. */
static void expect_fail(const buf *b, const char *const *words)
{
    const char *path = gt_test_tmp("bad.gguf");
    gt_test_write_file(path, b->p, b->n);
    gt_gguf *g = (gt_gguf *)&g;
    gt_err err = {{0}};
    int rc = gt_gguf_open(path, &g, &err);
    if (rc == 0)
        gt_gguf_close(g);
    ck_assert_msg(rc == -1, "opened a malformed file");
    ck_assert_ptr_null(g);
    ck_assert_msg(strstr(err.msg, path) != NULL, "message '%s' lacks the path", err.msg);
    for (; *words; words++)
        ck_assert_msg(strstr(err.msg, *words) != NULL, "message '%s' lacks '%s'", err.msg, *words);
    free(b->p);
}
#define EXPECT_FAIL(b, ...) expect_fail((b), (const char *const[]){__VA_ARGS__, NULL})

static gt_gguf *open_ok(const char *path)
{
    gt_gguf *g = NULL;
    gt_err err = {{0}};
    int rc = gt_gguf_open(path, &g, &err);
    ck_assert_msg(rc == 0, "open %s: %s", path, err.msg);
    ck_assert_ptr_nonnull(g);
    return g;
}

static gt_gguf *open_bytes(buf *b)
{
    const char *path = gt_test_tmp("ok.gguf");
    gt_test_write_file(path, b->p, b->n);
    free(b->p);
    return open_ok(path);
}

static void write_ok(gt_gguf_writer *w, const char *path)
{
    gt_err err = {{0}};
    ck_assert_msg(gt_gguf_writer_write(w, path, &err) == 0, "write %s: %s", path, err.msg);
}

static uint32_t rng_state;
static uint32_t rnd(void)
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return rng_state >> 8;
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
    rng_state = seed;
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)rnd();
}

/* ---- round trips ---- */

static const char *const STRS[] = {"", "hello", "naïve ünïcode", "tab\there"};

START_TEST(t_roundtrip)
{
    const char *path = gt_test_tmp("rt.gguf");
    gt_gguf_writer *w = gt_gguf_writer_new();
    ck_assert_ptr_nonnull(w);
    uint8_t u8 = 250; int8_t i8 = -100; uint16_t u16 = 65000; int16_t i16 = -30000;
    uint64_t u64 = UINT64_MAX - 5; int64_t i64 = INT64_MIN + 7; double f64 = 3.141592653589793;
    bool bf = false;
    ck_assert_int_eq(gt_gguf_writer_set_scalar(w, "s.u8", GT_GGUF_UINT8, &u8), 0);
    ck_assert_int_eq(gt_gguf_writer_set_scalar(w, "s.i8", GT_GGUF_INT8, &i8), 0);
    ck_assert_int_eq(gt_gguf_writer_set_scalar(w, "s.u16", GT_GGUF_UINT16, &u16), 0);
    ck_assert_int_eq(gt_gguf_writer_set_scalar(w, "s.i16", GT_GGUF_INT16, &i16), 0);
    ck_assert_int_eq(gt_gguf_writer_set_u32(w, "s.u32", 4000000000u), 0);
    ck_assert_int_eq(gt_gguf_writer_set_i32(w, "s.i32", -2000000000), 0);
    ck_assert_int_eq(gt_gguf_writer_set_f32(w, "s.f32", 1.5e-5f), 0);
    ck_assert_int_eq(gt_gguf_writer_set_bool(w, "s.bool", true), 0);
    ck_assert_int_eq(gt_gguf_writer_set_scalar(w, "s.bool2", GT_GGUF_BOOL, &bf), 0);
    ck_assert_int_eq(gt_gguf_writer_set_scalar(w, "s.u64", GT_GGUF_UINT64, &u64), 0);
    ck_assert_int_eq(gt_gguf_writer_set_scalar(w, "s.i64", GT_GGUF_INT64, &i64), 0);
    ck_assert_int_eq(gt_gguf_writer_set_scalar(w, "s.f64", GT_GGUF_FLOAT64, &f64), 0);
    ck_assert_int_eq(gt_gguf_writer_set_str(w, "s.str", "a string"), 0);
    ck_assert_int_eq(gt_gguf_writer_set_str(w, "s.empty", ""), 0);
    int32_t ai[5] = {1, -2, 3, -4, 5};
    float af[3] = {0.5f, -1.25f, 1e30f};
    double ad[2] = {1e-300, -2.5};
    uint8_t ab[4] = {1, 0, 0, 1};
    ck_assert_int_eq(gt_gguf_writer_set_arr(w, "a.i32", GT_GGUF_INT32, ai, 5), 0);
    ck_assert_int_eq(gt_gguf_writer_set_arr(w, "a.f32", GT_GGUF_FLOAT32, af, 3), 0);
    ck_assert_int_eq(gt_gguf_writer_set_arr(w, "a.f64", GT_GGUF_FLOAT64, ad, 2), 0);
    ck_assert_int_eq(gt_gguf_writer_set_arr(w, "a.bool", GT_GGUF_BOOL, ab, 4), 0);
    ck_assert_int_eq(gt_gguf_writer_set_arr(w, "a.empty", GT_GGUF_UINT16, NULL, 0), 0);
    ck_assert_int_eq(gt_gguf_writer_set_arr_str(w, "a.str", STRS, 4), 0);

    /* (name, type, n_dims, ne, bytes) */
    static const struct { const char *name; gt_type type; int n_dims; int64_t ne[4]; size_t nb; } T[] = {
        {"f32.2d", GT_TYPE_F32, 2, {3, 5}, 60},
        {"f16.1d", GT_TYPE_F16, 1, {7}, 14},
        {"q8_0", GT_TYPE_Q8_0, 2, {64, 3}, 6 * 34},
        {"q4_0", GT_TYPE_Q4_0, 3, {32, 2, 2}, 4 * 18},
        {"q4_1", GT_TYPE_Q4_1, 4, {32, 1, 1, 2}, 2 * 20},
        {"i32", GT_TYPE_I32, 1, {9}, 36},
        {"bf16", GT_TYPE_BF16, 2, {4, 4}, 32},
    };
    enum { NT = sizeof T / sizeof T[0] };
    uint8_t *data[NT];
    for (int i = 0; i < NT; i++) {
        data[i] = malloc(T[i].nb);
        fill(data[i], T[i].nb, 100 + (uint32_t)i);
        ck_assert_int_eq(gt_gguf_writer_add_tensor(w, T[i].name, T[i].type, T[i].n_dims, T[i].ne,
                                                   data[i], T[i].nb), 0);
    }
    write_ok(w, path);
    gt_gguf_writer_free(w);
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    ck_assert_int_ne(access(tmp, F_OK), 0); /* renamed away */

    gt_gguf *g = open_ok(path);
    ck_assert_uint_eq(gt_gguf_version(g), 3);
    ck_assert_uint_eq(gt_gguf_alignment(g), 32);
    ck_assert_int_eq(gt_gguf_n_shards(g), 1);
    ck_assert_str_eq(gt_gguf_shard_path(g, 0), path);
    ck_assert_int_eq(gt_gguf_n_kv(g), 20);
    int64_t iv; double dv; bool bv; size_t len;
    ck_assert(gt_gguf_kv_int(g, gt_gguf_find_key(g, "s.u8"), &iv) && iv == 250);
    ck_assert(gt_gguf_kv_int(g, gt_gguf_find_key(g, "s.i8"), &iv) && iv == -100);
    ck_assert(gt_gguf_kv_int(g, gt_gguf_find_key(g, "s.u16"), &iv) && iv == 65000);
    ck_assert(gt_gguf_kv_int(g, gt_gguf_find_key(g, "s.i16"), &iv) && iv == -30000);
    ck_assert_int_eq(gt_gguf_get_int(g, "s.u32", 0), 4000000000);
    ck_assert_int_eq(gt_gguf_get_int(g, "s.i32", 0), -2000000000);
    ck_assert(gt_gguf_get_float(g, "s.f32", 0) == (double)1.5e-5f);
    ck_assert(gt_gguf_get_bool(g, "s.bool", false) == true);
    ck_assert(gt_gguf_get_bool(g, "s.bool2", true) == false);
    /* u64 above INT64_MAX: not an int64, but a number. */
    ck_assert(!gt_gguf_kv_int(g, gt_gguf_find_key(g, "s.u64"), &iv));
    ck_assert(gt_gguf_kv_float(g, gt_gguf_find_key(g, "s.u64"), &dv) && dv == (double)u64);
    ck_assert_int_eq(gt_gguf_get_int(g, "s.i64", 0), INT64_MIN + 7);
    ck_assert(gt_gguf_get_float(g, "s.f64", 0) == f64);
    ck_assert(gt_gguf_get_float(g, "s.i32", 0) == -2000000000.0);
    ck_assert_str_eq(gt_gguf_get_str(g, "s.str"), "a string");
    ck_assert_str_eq(gt_gguf_kv_str(g, gt_gguf_find_key(g, "s.empty"), &len), "");
    ck_assert_uint_eq(len, 0);
    static const gt_gguf_vtype want_types[] = {
        GT_GGUF_UINT8, GT_GGUF_INT8, GT_GGUF_UINT16, GT_GGUF_INT16, GT_GGUF_UINT32,
        GT_GGUF_INT32, GT_GGUF_FLOAT32, GT_GGUF_BOOL, GT_GGUF_BOOL, GT_GGUF_UINT64,
        GT_GGUF_INT64, GT_GGUF_FLOAT64, GT_GGUF_STRING, GT_GGUF_STRING};
    for (int i = 0; i < 14; i++)
        ck_assert_int_eq(gt_gguf_kv_type(g, i), want_types[i]);
    ck_assert_str_eq(gt_gguf_key(g, 0), "s.u8");

    /* Wrong kinds and absent keys. */
    ck_assert(!gt_gguf_kv_int(g, gt_gguf_find_key(g, "s.str"), &iv));
    ck_assert(!gt_gguf_kv_int(g, gt_gguf_find_key(g, "s.f32"), &iv));
    ck_assert(!gt_gguf_kv_bool(g, gt_gguf_find_key(g, "s.u8"), &bv));
    ck_assert(!gt_gguf_kv_float(g, gt_gguf_find_key(g, "s.bool"), &dv));
    ck_assert_ptr_null(gt_gguf_kv_str(g, gt_gguf_find_key(g, "s.u8"), NULL));
    ck_assert_int_eq(gt_gguf_find_key(g, "nope"), -1);
    ck_assert_int_eq(gt_gguf_get_int(g, "nope", 42), 42);
    ck_assert_ptr_null(gt_gguf_get_str(g, "nope"));
    ck_assert_ptr_null(gt_gguf_key(g, 1000));
    ck_assert(!gt_gguf_kv_int(g, -1, &iv));

    int64_t k = gt_gguf_find_key(g, "a.i32");
    ck_assert_int_eq(gt_gguf_kv_type(g, k), GT_GGUF_ARRAY);
    ck_assert_int_eq(gt_gguf_arr_type(g, k), GT_GGUF_INT32);
    ck_assert_uint_eq(gt_gguf_arr_len(g, k), 5);
    ck_assert_mem_eq(gt_gguf_arr_data(g, k), ai, sizeof ai);
    k = gt_gguf_find_key(g, "a.f32");
    ck_assert_mem_eq(gt_gguf_arr_data(g, k), af, sizeof af);
    k = gt_gguf_find_key(g, "a.f64");
    ck_assert(((const double *)gt_gguf_arr_data(g, k))[0] == 1e-300);
    k = gt_gguf_find_key(g, "a.bool");
    ck_assert_int_eq(gt_gguf_arr_type(g, k), GT_GGUF_BOOL);
    ck_assert_mem_eq(gt_gguf_arr_data(g, k), ab, 4);
    k = gt_gguf_find_key(g, "a.empty");
    ck_assert_uint_eq(gt_gguf_arr_len(g, k), 0);
    k = gt_gguf_find_key(g, "a.str");
    ck_assert_int_eq(gt_gguf_arr_type(g, k), GT_GGUF_STRING);
    ck_assert_uint_eq(gt_gguf_arr_len(g, k), 4);
    ck_assert_ptr_null(gt_gguf_arr_data(g, k));
    for (uint64_t j = 0; j < 4; j++) {
        ck_assert_str_eq(gt_gguf_arr_str(g, k, j, &len), STRS[j]);
        ck_assert_uint_eq(len, strlen(STRS[j]));
    }
    ck_assert_ptr_null(gt_gguf_arr_str(g, k, 4, NULL));

    ck_assert_int_eq(gt_gguf_n_tensors(g), NT);
    size_t data_size;
    const uint8_t *base = gt_gguf_data(g, 0, &data_size);
    for (int i = 0; i < NT; i++) {
        const gt_gguf_tensor *t = gt_gguf_tensor_at(g, i);
        ck_assert_ptr_eq(t, gt_gguf_find_tensor(g, T[i].name));
        ck_assert_str_eq(t->name, T[i].name);
        ck_assert_int_eq(t->type, T[i].type);
        ck_assert_int_eq(t->n_dims, T[i].n_dims);
        int64_t n_el = 1;
        for (int d = 0; d < 4; d++) {
            ck_assert_int_eq(t->ne[d], d < T[i].n_dims ? T[i].ne[d] : 1);
            n_el *= t->ne[d];
        }
        ck_assert_int_eq(t->n_elements, n_el);
        ck_assert_uint_eq(t->nbytes, T[i].nb);
        ck_assert_uint_eq(t->offset % 32, 0);
        ck_assert_int_eq(t->shard, 0);
        ck_assert_ptr_eq(t->data, base + t->offset);
        ck_assert_uint_le(t->offset + t->nbytes, data_size);
        ck_assert_mem_eq(t->data, data[i], T[i].nb);
        free(data[i]);
    }
    ck_assert_ptr_null(gt_gguf_tensor_at(g, NT));
    ck_assert_ptr_null(gt_gguf_find_tensor(g, "nope"));
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    ck_assert_uint_eq(gt_gguf_file_size(g), (uint64_t)ftell(f));
    fclose(f);
    gt_gguf_close(g);
}
END_TEST

START_TEST(t_writer_replace_and_alignment)
{
    const char *path = gt_test_tmp("al.gguf");
    gt_gguf_writer *w = gt_gguf_writer_new();
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int64_t ne[1] = {3};
    gt_gguf_writer_set_str(w, "k", "first");
    gt_gguf_writer_set_u32(w, "general.alignment", 64);
    gt_gguf_writer_set_u32(w, "k", 9); /* replaces, with another type */
    ck_assert_int_eq(gt_gguf_writer_add_tensor(w, "a", GT_TYPE_F32, 1, ne, x, 12), 0);
    ck_assert_int_eq(gt_gguf_writer_add_tensor(w, "b", GT_TYPE_F32, 1, ne, x + 3, 12), 0);
    write_ok(w, path);
    gt_gguf_writer_free(w);
    gt_gguf *g = open_ok(path);
    ck_assert_int_eq(gt_gguf_n_kv(g), 2);
    ck_assert_int_eq(gt_gguf_get_int(g, "k", 0), 9);
    ck_assert_uint_eq(gt_gguf_alignment(g), 64);
    ck_assert_uint_eq(gt_gguf_tensor_at(g, 1)->offset, 64);
    ck_assert(((const float *)gt_gguf_find_tensor(g, "b")->data)[2] == 6.0f);
    gt_gguf_close(g);
}
END_TEST

START_TEST(t_writer_errors)
{
    gt_err err = {{0}};
    float x[4] = {0};
    int64_t ne[2] = {4, 1}, bad[1] = {33};
    /* Bad general.alignment. */
    gt_gguf_writer *w = gt_gguf_writer_new();
    gt_gguf_writer_set_u32(w, "general.alignment", 48);
    ck_assert_int_eq(gt_gguf_writer_write(w, gt_test_tmp("w1.gguf"), &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "power of two"));
    gt_gguf_writer_free(w);
    /* Bad tensors: remembered and reported at write time. */
    w = gt_gguf_writer_new();
    ck_assert_int_eq(gt_gguf_writer_add_tensor(w, "t", GT_TYPE_F32, 2, ne, x, 8), -1);
    ck_assert_int_eq(gt_gguf_writer_add_tensor(w, "q", GT_TYPE_Q8_0, 1, bad, x, 34), -1);
    ck_assert_int_eq(gt_gguf_writer_add_tensor(w, "u", (gt_type)99, 1, ne, x, 16), -1);
    ck_assert_int_eq(gt_gguf_writer_add_tensor(w, "z", GT_TYPE_F32, 5, ne, x, 16), -1);
    ck_assert_int_eq(gt_gguf_writer_write(w, gt_test_tmp("w2.gguf"), &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "'t'"));
    ck_assert_ptr_nonnull(strstr(err.msg, "16"));
    ck_assert_int_ne(access(gt_test_tmp("w2.gguf"), F_OK), 0);
    gt_gguf_writer_free(w);
    /* Duplicate tensor names. */
    w = gt_gguf_writer_new();
    ck_assert_int_eq(gt_gguf_writer_add_tensor(w, "t", GT_TYPE_F32, 2, ne, x, 16), 0);
    ck_assert_int_eq(gt_gguf_writer_add_tensor(w, "t", GT_TYPE_F32, 2, ne, x, 16), -1);
    ck_assert_int_eq(gt_gguf_writer_write(w, gt_test_tmp("w3.gguf"), &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "duplicate"));
    gt_gguf_writer_free(w);
    /* A folder that does not exist. */
    w = gt_gguf_writer_new();
    ck_assert_int_eq(gt_gguf_writer_write(w, "/nonexistent-dir/x.gguf", &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "/nonexistent-dir/x.gguf.tmp"));
    ck_assert_ptr_nonnull(strstr(err.msg, "No such file"));
    gt_gguf_writer_free(w);
}
END_TEST

START_TEST(t_writer_io_error)
{
    /* A file-size limit stands in for a full disk: the write fails with the
     * system's reason, leaves neither PATH nor PATH.tmp, and an older PATH
     * stays as it was. */
    static uint8_t big[8192];
    int64_t ne[1] = {2048};
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s", gt_test_tmp("full.gguf"));
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    gt_test_write_file(path, "old", 3);
    gt_gguf_writer *w = gt_gguf_writer_new();
    gt_gguf_writer_add_tensor(w, "big", GT_TYPE_F32, 1, ne, big, sizeof big);
    struct rlimit old, lim;
    ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = 1000;
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    gt_err err = {{0}};
    int rc = gt_gguf_writer_write(w, path, &err);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, prev);
    gt_gguf_writer_free(w);
    ck_assert_int_eq(rc, -1);
    ck_assert_msg(strstr(err.msg, "cannot write") && strstr(err.msg, "File too large"), "%s", err.msg);
    ck_assert_int_ne(access(tmp, F_OK), 0);
    FILE *f = fopen(path, "rb");
    char got[8] = {0};
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fread(got, 1, sizeof got, f), 3);
    fclose(f);
    ck_assert_str_eq(got, "old");
}
END_TEST

START_TEST(t_copy_kv_nested)
{
    /* A file with a nested array (which our writer cannot make directly). */
    buf b = {0};
    b_header(&b, 3, 0, 2);
    b_str(&b, "nest");
    b_u32(&b, GT_GGUF_ARRAY);
    b_u32(&b, GT_GGUF_ARRAY);
    b_u64(&b, 2);
    b_u32(&b, GT_GGUF_UINT8);
    b_u64(&b, 3);
    b_u8(&b, 1); b_u8(&b, 2); b_u8(&b, 3);
    b_u32(&b, GT_GGUF_STRING);
    b_u64(&b, 1);
    b_str(&b, "x");
    b_kv_u32(&b, "n", 5);
    gt_gguf *g = open_bytes(&b);
    int64_t k = gt_gguf_find_key(g, "nest");
    ck_assert_int_eq(gt_gguf_arr_type(g, k), GT_GGUF_ARRAY);
    ck_assert_uint_eq(gt_gguf_arr_len(g, k), 2);
    ck_assert_int_eq(gt_gguf_n_tensors(g), 0);

    gt_gguf_writer *w = gt_gguf_writer_new();
    for (int64_t i = 0; i < gt_gguf_n_kv(g); i++)
        ck_assert_int_eq(gt_gguf_writer_copy_kv(w, g, i), 0);
    ck_assert_int_eq(gt_gguf_writer_copy_kv(w, g, 99), -1);
    gt_gguf_writer_free(w);
    w = gt_gguf_writer_new();
    for (int64_t i = 0; i < gt_gguf_n_kv(g); i++)
        gt_gguf_writer_copy_kv(w, g, i);
    size_t l1, l2;
    const void *r1 = gt_gguf_kv_raw(g, k, &l1);
    uint8_t saved[64];
    ck_assert_uint_le(l1, sizeof saved);
    memcpy(saved, r1, l1);
    gt_gguf_close(g);
    const char *path = gt_test_tmp("copy.gguf");
    write_ok(w, path);
    gt_gguf_writer_free(w);
    g = open_ok(path);
    k = gt_gguf_find_key(g, "nest");
    const void *r2 = gt_gguf_kv_raw(g, k, &l2);
    ck_assert_uint_eq(l1, l2);
    ck_assert_mem_eq(r2, saved, l1);
    ck_assert_int_eq(gt_gguf_get_int(g, "n", 0), 5);
    gt_gguf_close(g);
}
END_TEST

START_TEST(t_v2_and_unpadded)
{
    /* v2 has the same layout as v3 here; a tokenizer-only file may end right
     * after its metadata, with no padding to the alignment. */
    buf b = {0};
    b_header(&b, 2, 0, 1);
    b_kv_u32(&b, "x", 1);
    gt_gguf *g = open_bytes(&b);
    ck_assert_uint_eq(gt_gguf_version(g), 2);
    ck_assert_int_eq(gt_gguf_n_tensors(g), 0);
    size_t n = 1;
    gt_gguf_data(g, 0, &n);
    ck_assert_uint_eq(n, 0);
    gt_gguf_close(g);
}
END_TEST

/* ---- real files ---- */

START_TEST(t_stories260k)
{
    const char *path = gt_test_model("stories260K.gguf");
    ck_assert_msg(path != NULL, "stories260K.gguf absent (main() checked it)");
    gt_gguf *g = open_ok(path);
    ck_assert_uint_eq(gt_gguf_version(g), 3);
    ck_assert_int_eq(gt_gguf_n_tensors(g), 48);
    ck_assert_uint_eq(gt_gguf_file_size(g), 1185376);
    ck_assert_str_eq(gt_gguf_get_str(g, "general.architecture"), "llama");
    ck_assert_int_eq(gt_gguf_get_int(g, "llama.embedding_length", 0), 64);
    ck_assert_int_eq(gt_gguf_get_int(g, "llama.block_count", 0), 5);
    ck_assert_int_eq(gt_gguf_get_int(g, "llama.attention.head_count_kv", 0), 4);
    ck_assert(gt_gguf_get_float(g, "llama.attention.layer_norm_rms_epsilon", 0) > 0);
    int64_t k = gt_gguf_find_key(g, "tokenizer.ggml.tokens");
    ck_assert_int_eq(gt_gguf_arr_type(g, k), GT_GGUF_STRING);
    ck_assert_uint_eq(gt_gguf_arr_len(g, k), 512);
    ck_assert_str_eq(gt_gguf_arr_str(g, k, 1, NULL), "<s>");
    k = gt_gguf_find_key(g, "tokenizer.ggml.scores");
    ck_assert_int_eq(gt_gguf_arr_type(g, k), GT_GGUF_FLOAT32);
    const gt_gguf_tensor *t = gt_gguf_find_tensor(g, "token_embd.weight");
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->n_dims, 2);
    ck_assert_int_eq(t->ne[0], 64);
    ck_assert_int_eq(t->ne[1], 512);
    ck_assert_uint_eq(t->nbytes, 64 * 512 * 4);
    for (int64_t i = 0; i < gt_gguf_n_tensors(g); i++)
        ck_assert_int_eq(gt_gguf_tensor_at(g, i)->type, GT_TYPE_F32);
    ck_assert_ptr_nonnull(gt_gguf_find_tensor(g, "output.weight"));
    gt_gguf_close(g);
}
END_TEST

START_TEST(t_llamacpp_quants)
{
    static const struct { const char *file; gt_type out, down, qkv; } F[] = {
        {"llamacpp-quants/stories260K-f16.gguf", GT_TYPE_F16, GT_TYPE_F16, GT_TYPE_F16},
        {"llamacpp-quants/stories260K-q8_0.gguf", GT_TYPE_Q8_0, GT_TYPE_F16, GT_TYPE_Q8_0},
        {"llamacpp-quants/stories260K-q4_0.gguf", GT_TYPE_Q8_0, GT_TYPE_F16, GT_TYPE_Q4_0},
        {"llamacpp-quants/stories260K-q4_1.gguf", GT_TYPE_Q8_0, GT_TYPE_F16, GT_TYPE_Q4_1},
    };
    for (size_t i = 0; i < sizeof F / sizeof F[0]; i++) {
        const char *path = gt_test_model(F[i].file);
        ck_assert_msg(path != NULL, "%s absent (main() checked it)", F[i].file);
        gt_gguf *g = open_ok(path);
        ck_assert_int_eq(gt_gguf_n_tensors(g), 48);
        ck_assert_int_eq(gt_gguf_find_tensor(g, "output.weight")->type, F[i].out);
        ck_assert_int_eq(gt_gguf_find_tensor(g, "blk.0.ffn_down.weight")->type, F[i].down);
        ck_assert_int_eq(gt_gguf_find_tensor(g, "blk.0.attn_q.weight")->type, F[i].qkv);
        ck_assert_int_eq(gt_gguf_find_tensor(g, "blk.0.attn_norm.weight")->type, GT_TYPE_F32);
        gt_gguf_close(g);
    }
}
END_TEST

START_TEST(t_vocab_files)
{
    static const char *const V[] = {"vocab/ggml-vocab-gpt-2.gguf", "vocab/ggml-vocab-llama-spm.gguf"};
    for (int i = 0; i < 2; i++) {
        const char *path = gt_test_model(V[i]);
        ck_assert_msg(path != NULL, "%s absent (main() checked it)", V[i]);
        gt_gguf *g = open_ok(path);
        ck_assert_int_eq(gt_gguf_n_tensors(g), 0);
        ck_assert_uint_gt(gt_gguf_arr_len(g, gt_gguf_find_key(g, "tokenizer.ggml.tokens")), 1000);
        gt_gguf_close(g);
    }
}
END_TEST

/* GT_SMOLLM2 / the fetch cache, else a copy among the shared models. */
static const char *smollm2_path(void)
{
    const char *path = gt_test_smollm2();
    return path ? path : gt_test_model("SmolLM2-135M-Instruct.Q4_1.gguf");
}

START_TEST(t_smollm2)
{
    const char *path = smollm2_path();
    ck_assert_msg(path != NULL, "SmolLM2 absent (main() checked it)");
    gt_gguf *g = NULL;
    gt_err err = {{0}};
    /* Every tensor type in it is one this runtime knows: it must load. */
    ck_assert_msg(gt_gguf_open(path, &g, &err) == 0, "%s: %s", path, err.msg);
    ck_assert_int_gt(gt_gguf_n_tensors(g), 100);
    const gt_gguf_tensor *t = gt_gguf_find_tensor(g, "token_embd.weight");
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->ne[0], 576);
    ck_assert_int_eq(t->ne[1], 49152);
    gt_gguf_close(g);
}
END_TEST

/* ---- malformed files, one rule each ---- */

START_TEST(t_bad_magic)
{
    buf b = {0};
    b_u32(&b, 0x46554746u);
    b_u32(&b, 3);
    b_u64(&b, 0);
    b_u64(&b, 0);
    EXPECT_FAIL(&b, "magic", "GGUF", "offset 0");
}
END_TEST

START_TEST(t_version1)
{
    buf b = {0};
    b_header(&b, 1, 0, 0);
    EXPECT_FAIL(&b, "version 1", "v1", "offset 4");
}
END_TEST

START_TEST(t_version_unknown)
{
    buf b = {0};
    b_header(&b, 7, 0, 0);
    EXPECT_FAIL(&b, "unsupported GGUF version 7", "offset 4");
}
END_TEST

START_TEST(t_empty_file)
{
    buf b = {0};
    b_put(&b, "", 0);
    EXPECT_FAIL(&b, "truncated", "magic", "offset 0");
}
END_TEST

START_TEST(t_truncated_header)
{
    buf b = {0};
    b_u32(&b, 0x46554747u);
    b_u32(&b, 3);
    b_u32(&b, 0);
    EXPECT_FAIL(&b, "truncated", "tensor_count", "offset 8");
}
END_TEST

START_TEST(t_kv_count_huge)
{
    buf b = {0};
    b_header(&b, 3, 0, (uint64_t)1 << 40);
    b_kv_u32(&b, "a", 1);
    EXPECT_FAIL(&b, "kv_count 1099511627776", "past end", "offset 16");
}
END_TEST

START_TEST(t_tensor_count_huge)
{
    buf b = {0};
    b_header(&b, 3, UINT64_MAX, 0);
    EXPECT_FAIL(&b, "tensor_count", "past end", "offset 8");
}
END_TEST

START_TEST(t_tensor_count_after_kv)
{
    /* Plausible against the whole file, impossible after the metadata. */
    buf b = {0};
    b_header(&b, 3, 2, 1);
    b_str(&b, "pad");
    b_u32(&b, GT_GGUF_STRING);
    b_u64(&b, 60);
    b_zeros(&b, 60);
    b_zeros(&b, 8);
    EXPECT_FAIL(&b, "tensor_count 2", "after the metadata", "offset 8");
}
END_TEST

START_TEST(t_key_length_past_end)
{
    buf b = {0};
    b_header(&b, 3, 0, 1);
    b_u64(&b, 1000);
    b_put(&b, "abcdefghijklmnopq", 17);
    EXPECT_FAIL(&b, "key length 1000", "past end", "offset 24");
}
END_TEST

START_TEST(t_string_value_past_end)
{
    buf b = {0};
    b_header(&b, 3, 0, 1);
    b_str(&b, "a");
    b_u32(&b, GT_GGUF_STRING);
    b_u64(&b, (uint64_t)1 << 62);
    b_zeros(&b, 16);
    EXPECT_FAIL(&b, "key 'a'", "string value length", "past end", "offset 37");
}
END_TEST

START_TEST(t_array_past_end)
{
    buf b = {0};
    b_header(&b, 3, 0, 1);
    b_str(&b, "a");
    b_u32(&b, GT_GGUF_ARRAY);
    b_u32(&b, GT_GGUF_UINT32);
    b_u64(&b, (uint64_t)1 << 61); /* × 4 bytes would wrap a naive product */
    b_zeros(&b, 16);
    EXPECT_FAIL(&b, "array of 2305843009213693952 uint32", "past end", "offset 41");
}
END_TEST

START_TEST(t_string_array_past_end)
{
    buf b = {0};
    b_header(&b, 3, 0, 1);
    b_str(&b, "a");
    b_u32(&b, GT_GGUF_ARRAY);
    b_u32(&b, GT_GGUF_STRING);
    b_u64(&b, 3);
    b_str(&b, "one");
    b_u64(&b, 500); /* string 1 claims more than remains */
    b_zeros(&b, 20);
    EXPECT_FAIL(&b, "array string 1 length 500", "past end", "offset 60");
}
END_TEST

START_TEST(t_string_array_count_huge)
{
    buf b = {0};
    b_header(&b, 3, 0, 1);
    b_str(&b, "a");
    b_u32(&b, GT_GGUF_ARRAY);
    b_u32(&b, GT_GGUF_STRING);
    b_u64(&b, UINT64_MAX / 2);
    b_zeros(&b, 64);
    EXPECT_FAIL(&b, "strings", "past end", "offset 41");
}
END_TEST

START_TEST(t_unknown_value_type)
{
    buf b = {0};
    b_header(&b, 3, 0, 1);
    b_str(&b, "a");
    b_u32(&b, 13);
    b_u32(&b, 0);
    EXPECT_FAIL(&b, "unknown metadata value type 13", "key 'a'", "offset 33");
}
END_TEST

START_TEST(t_unknown_array_type)
{
    buf b = {0};
    b_header(&b, 3, 0, 1);
    b_str(&b, "a");
    b_u32(&b, GT_GGUF_ARRAY);
    b_u32(&b, 42);
    b_u64(&b, 0);
    EXPECT_FAIL(&b, "unknown array element type 42", "offset 37");
}
END_TEST

START_TEST(t_nested_too_deep)
{
    buf b = {0};
    b_header(&b, 3, 0, 1);
    b_str(&b, "a");
    b_u32(&b, GT_GGUF_ARRAY);
    for (int i = 0; i < 20; i++) {
        b_u32(&b, GT_GGUF_ARRAY);
        b_u64(&b, 1);
    }
    b_u32(&b, GT_GGUF_UINT8);
    b_u64(&b, 0);
    EXPECT_FAIL(&b, "nested", "offset");
}
END_TEST

START_TEST(t_bad_bool)
{
    buf b = {0};
    b_header(&b, 3, 0, 1);
    b_str(&b, "a");
    b_u32(&b, GT_GGUF_BOOL);
    b_u8(&b, 2);
    EXPECT_FAIL(&b, "bool value is 2", "offset 37");
}
END_TEST

START_TEST(t_truncated_value)
{
    buf b = {0};
    b_header(&b, 3, 0, 1);
    b_str(&b, "a");
    b_u32(&b, GT_GGUF_UINT64);
    b_u32(&b, 0); /* 4 of the 8 bytes */
    EXPECT_FAIL(&b, "truncated", "value", "offset 37");
}
END_TEST

START_TEST(t_duplicate_key)
{
    buf b = {0};
    b_header(&b, 3, 0, 2);
    b_kv_u32(&b, "dup", 1);
    b_kv_u32(&b, "dup", 2);
    EXPECT_FAIL(&b, "key 'dup'", "duplicate key", "offset 43", "offset 24");
}
END_TEST

START_TEST(t_key_with_nul)
{
    buf b = {0};
    b_header(&b, 3, 0, 1);
    b_u64(&b, 3);
    b_put(&b, "a\0b", 3);
    b_u32(&b, GT_GGUF_UINT8);
    b_u8(&b, 1);
    EXPECT_FAIL(&b, "NUL", "offset 24");
}
END_TEST

START_TEST(t_duplicate_tensor)
{
    uint64_t ne[1] = {8};
    buf b = {0};
    b_header(&b, 3, 2, 0);
    b_tensor(&b, "w", 1, ne, GT_TYPE_F32, 0);
    size_t second = b.n;
    b_tensor(&b, "w", 1, ne, GT_TYPE_F32, 32);
    b_pad(&b, 32);
    b_zeros(&b, 64);
    EXPECT_FAIL(&b, "duplicate tensor name", "'w'", fmt("offset %" PRIu64, second), "offset 24");
}
END_TEST

static void alignment_case(uint32_t type, uint32_t value, const char *w1, const char *w2)
{
    buf b = {0};
    b_header(&b, 3, 0, 1);
    b_str(&b, "general.alignment");
    b_u32(&b, type);
    b_u32(&b, value);
    EXPECT_FAIL(&b, "general.alignment", w1, w2, "offset 53");
}

START_TEST(t_alignment_not_pow2)
{
    alignment_case(GT_GGUF_UINT32, 48, "48 is not a power of two", "offset");
}
END_TEST

START_TEST(t_alignment_zero)
{
    alignment_case(GT_GGUF_UINT32, 0, "0 is not a power of two", "offset");
}
END_TEST

START_TEST(t_alignment_wrong_type)
{
    alignment_case(GT_GGUF_FLOAT32, 0x42000000, "float32", "unsigned integer");
}
END_TEST

START_TEST(t_ndims_too_many)
{
    uint64_t ne[5] = {1, 1, 1, 1, 1};
    buf b = {0};
    size_t at = b_one_tensor(&b, 5, ne, GT_TYPE_F32, 0, 32);
    EXPECT_FAIL(&b, "tensor 't'", "n_dims 5", fmt("offset %" PRIu64, at + 9));
}
END_TEST

START_TEST(t_ndims_zero)
{
    buf b = {0};
    size_t at = b_one_tensor(&b, 0, NULL, GT_TYPE_F32, 0, 32);
    EXPECT_FAIL(&b, "n_dims 0", fmt("offset %" PRIu64, at + 9));
}
END_TEST

START_TEST(t_zero_dim)
{
    uint64_t ne[2] = {4, 0};
    buf b = {0};
    size_t at = b_one_tensor(&b, 2, ne, GT_TYPE_F32, 0, 32);
    EXPECT_FAIL(&b, "dimension 1 is 0", fmt("offset %" PRIu64, at + 21));
}
END_TEST

START_TEST(t_dim_too_large)
{
    uint64_t ne[1] = {UINT64_MAX};
    buf b = {0};
    size_t at = b_one_tensor(&b, 1, ne, GT_TYPE_F32, 0, 32);
    EXPECT_FAIL(&b, "dimension 0", "too large", fmt("offset %" PRIu64, at + 13));
}
END_TEST

START_TEST(t_unknown_tensor_type)
{
    uint64_t ne[1] = {8};
    buf b = {0};
    size_t at = b_one_tensor(&b, 1, ne, 99, 0, 32);
    EXPECT_FAIL(&b, "unknown tensor type 99", fmt("offset %" PRIu64, at + 21));
}
END_TEST

START_TEST(t_element_overflow)
{
    uint64_t ne[3] = {(uint64_t)1 << 32, (uint64_t)1 << 32, 4};
    buf b = {0};
    size_t at = b_one_tensor(&b, 3, ne, GT_TYPE_F32, 0, 32);
    EXPECT_FAIL(&b, "element count overflows", fmt("offset %" PRIu64, at + 21));
}
END_TEST

START_TEST(t_size_overflow)
{
    /* 2^61 elements fit an int64; 2^61 × 4 bytes do not. */
    uint64_t ne[2] = {(uint64_t)1 << 40, (uint64_t)1 << 21};
    buf b = {0};
    size_t at = b_one_tensor(&b, 2, ne, GT_TYPE_F32, 0, 32);
    EXPECT_FAIL(&b, "size overflows", fmt("offset %" PRIu64, at + 29));
}
END_TEST

START_TEST(t_row_not_block_multiple)
{
    uint64_t ne[2] = {33, 2};
    buf b = {0};
    size_t at = b_one_tensor(&b, 2, ne, GT_TYPE_Q8_0, 0, 128);
    EXPECT_FAIL(&b, "row length 33", "q8_0 block size 32", fmt("offset %" PRIu64, at + 13));
}
END_TEST

START_TEST(t_misaligned_offset)
{
    uint64_t ne[1] = {4};
    buf b = {0};
    size_t at = b_one_tensor(&b, 1, ne, GT_TYPE_F32, 4, 64);
    EXPECT_FAIL(&b, "data offset 4", "alignment 32", fmt("offset %" PRIu64, at + 25));
}
END_TEST

START_TEST(t_data_out_of_bounds)
{
    uint64_t ne[1] = {16}; /* 64 bytes at offset 32 of a 64-byte data section */
    buf b = {0};
    size_t at = b_one_tensor(&b, 1, ne, GT_TYPE_F32, 32, 64);
    EXPECT_FAIL(&b, "tensor 't'", "runs past end of file", fmt("offset %" PRIu64, at));
}
END_TEST

START_TEST(t_data_offset_huge)
{
    uint64_t ne[1] = {16};
    buf b = {0};
    b_one_tensor(&b, 1, ne, GT_TYPE_F32, UINT64_MAX - 31, 64);
    EXPECT_FAIL(&b, "runs past end of file", "offset");
}
END_TEST

START_TEST(t_no_data_section)
{
    uint64_t ne[1] = {16};
    buf b = {0};
    b_header(&b, 3, 1, 0);
    b_tensor(&b, "t", 1, ne, GT_TYPE_F32, 0); /* ends at 57, the data would start at 64 */
    EXPECT_FAIL(&b, "truncated", "data section", "offset 57");
}
END_TEST

/* ---- split files ---- */

static float SPLIT_DATA[3][8];

/* Writes prefix-0000K-of-0000N.gguf for k in `which` (a bit mask), with
 * tensors t0..t(n_shards) spread one or two per shard. */
static void write_split(const char *prefix, int n, unsigned which, int64_t tensors_count)
{
    int64_t ne[1] = {8};
    for (int s = 0; s < n; s++) {
        if (!(which & (1u << s)))
            continue;
        gt_gguf_writer *w = gt_gguf_writer_new();
        uint16_t count = (uint16_t)n, no = (uint16_t)s;
        gt_gguf_writer_set_scalar(w, "split.count", GT_GGUF_UINT16, &count);
        gt_gguf_writer_set_scalar(w, "split.no", GT_GGUF_UINT16, &no);
        if (s == 0) {
            gt_gguf_writer_set_i32(w, "split.tensors.count", (int32_t)tensors_count);
            gt_gguf_writer_set_str(w, "general.name", "split-test");
        }
        char name[16];
        for (int t = 0; t < 3; t++) {
            int owner = n == 2 ? (t < 2 ? 0 : 1) : t % n;
            if (owner != s)
                continue;
            snprintf(name, sizeof name, "t%d", t);
            for (int j = 0; j < 8; j++)
                SPLIT_DATA[t][j] = (float)(t * 10 + j);
            ck_assert_int_eq(gt_gguf_writer_add_tensor(w, name, GT_TYPE_F32, 1, ne, SPLIT_DATA[t],
                                                       32), 0);
        }
        char path[4200];
        snprintf(path, sizeof path, "%s-%05d-of-%05d.gguf", prefix, s + 1, n);
        write_ok(w, path);
        gt_gguf_writer_free(w);
    }
}

START_TEST(t_split_two)
{
    char prefix[4096], p1[4200], p2[4200];
    snprintf(prefix, sizeof prefix, "%s", gt_test_tmp("model"));
    write_split(prefix, 2, 3, 3); /* shard 1: t0 t1; shard 2: t2 */
    snprintf(p1, sizeof p1, "%s-00001-of-00002.gguf", prefix);
    snprintf(p2, sizeof p2, "%s-00002-of-00002.gguf", prefix);
    const char *paths[2] = {p2, p1};
    for (int i = 0; i < 2; i++) {
        gt_gguf *g = open_ok(paths[i]);
        ck_assert_int_eq(gt_gguf_n_shards(g), 2);
        ck_assert_str_eq(gt_gguf_shard_path(g, 0), p1);
        ck_assert_str_eq(gt_gguf_shard_path(g, 1), p2);
        ck_assert_ptr_null(gt_gguf_shard_path(g, 2));
        ck_assert_str_eq(gt_gguf_get_str(g, "general.name"), "split-test"); /* from shard 0 */
        ck_assert_int_eq(gt_gguf_get_int(g, "split.no", -1), 0);
        ck_assert_int_eq(gt_gguf_n_tensors(g), 3);
        for (int t = 0; t < 3; t++) {
            const gt_gguf_tensor *x = gt_gguf_tensor_at(g, t);
            char name[8];
            snprintf(name, sizeof name, "t%d", t);
            ck_assert_str_eq(x->name, name);
            ck_assert_int_eq(x->shard, t < 2 ? 0 : 1);
            ck_assert_mem_eq(x->data, SPLIT_DATA[t], 32);
            size_t n;
            const uint8_t *d = gt_gguf_data(g, x->shard, &n);
            ck_assert_ptr_eq(x->data, d + x->offset);
        }
        ck_assert_uint_gt(gt_gguf_file_size(g), 2 * 100);
        gt_gguf_close(g);
    }
}
END_TEST

START_TEST(t_split_missing_shard)
{
    char prefix[4096], p3[4200];
    snprintf(prefix, sizeof prefix, "%s", gt_test_tmp("miss"));
    write_split(prefix, 3, 1u | 4u, 3); /* shards 1 and 3, not 2 */
    snprintf(p3, sizeof p3, "%s-00003-of-00003.gguf", prefix);
    gt_gguf *g = NULL;
    gt_err err = {{0}};
    ck_assert_int_eq(gt_gguf_open(p3, &g, &err), -1);
    ck_assert_ptr_null(g);
    ck_assert_msg(strstr(err.msg, "missing shard 2 of 3") && strstr(err.msg, "miss-00002-of-00003.gguf"),
                  "%s", err.msg);
}
END_TEST

START_TEST(t_split_bad_count)
{
    char prefix[4096], p1[4200];
    snprintf(prefix, sizeof prefix, "%s", gt_test_tmp("cnt"));
    write_split(prefix, 2, 3, 5); /* split.tensors.count says 5, there are 3 */
    snprintf(p1, sizeof p1, "%s-00001-of-00002.gguf", prefix);
    gt_gguf *g = NULL;
    gt_err err = {{0}};
    ck_assert_int_eq(gt_gguf_open(p1, &g, &err), -1);
    ck_assert_msg(strstr(err.msg, "split.tensors.count") && strstr(err.msg, "offset"), "%s", err.msg);
}
END_TEST

START_TEST(t_split_bad_names)
{
    /* A shard renamed away from the pattern cannot find its siblings; a shard
     * whose split.no disagrees with its name is refused. */
    char prefix[4096], p1[4200], other[4200];
    snprintf(prefix, sizeof prefix, "%s", gt_test_tmp("nm"));
    write_split(prefix, 2, 3, 3);
    snprintf(p1, sizeof p1, "%s-00001-of-00002.gguf", prefix);
    snprintf(other, sizeof other, "%s-renamed.gguf", prefix);
    ck_assert_int_eq(rename(p1, other), 0);
    gt_gguf *g = NULL;
    gt_err err = {{0}};
    ck_assert_int_eq(gt_gguf_open(other, &g, &err), -1);
    ck_assert_msg(strstr(err.msg, "-00001-of-00002.gguf"), "%s", err.msg);
    /* Now shard 2's file where shard 1's should be. */
    snprintf(other, sizeof other, "%s-00002-of-00002.gguf", prefix);
    ck_assert_int_eq(link(other, p1), 0);
    ck_assert_int_eq(gt_gguf_open(other, &g, &err), -1);
    ck_assert_msg(strstr(err.msg, "expected shard 0 of 2"), "%s", err.msg);
}
END_TEST

START_TEST(t_split_duplicate_across)
{
    char prefix[4096], p1[4200], p2[4200];
    int64_t ne[1] = {8};
    float x[8] = {0};
    snprintf(prefix, sizeof prefix, "%s", gt_test_tmp("dupx"));
    for (int s = 0; s < 2; s++) {
        gt_gguf_writer *w = gt_gguf_writer_new();
        gt_gguf_writer_set_u32(w, "split.count", 2);
        gt_gguf_writer_set_u32(w, "split.no", (uint32_t)s);
        gt_gguf_writer_add_tensor(w, "same", GT_TYPE_F32, 1, ne, x, 32);
        snprintf(s ? p2 : p1, 4200, "%s-%05d-of-00002.gguf", prefix, s + 1);
        write_ok(w, s ? p2 : p1);
        gt_gguf_writer_free(w);
    }
    gt_gguf *g = NULL;
    gt_err err = {{0}};
    ck_assert_int_eq(gt_gguf_open(p1, &g, &err), -1);
    ck_assert_msg(strstr(err.msg, "duplicate tensor name") && strstr(err.msg, p1) &&
                  strstr(err.msg, p2) && strstr(err.msg, "offset"), "%s", err.msg);
}
END_TEST

/* ---- no input crashes the reader ---- */

/* A small valid file whose last tensor ends exactly at the end of the file, so
 * that every shorter prefix is missing something the reader needs. */
static size_t small_file(uint8_t **out)
{
    static float a[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    static uint8_t q[34 * 2];
    int64_t ne_a[1] = {8}, ne_q[2] = {32, 2};
    const char *path = gt_test_tmp("small.gguf");
    gt_gguf_writer *w = gt_gguf_writer_new();
    gt_gguf_writer_set_str(w, "general.architecture", "llama");
    gt_gguf_writer_set_u32(w, "llama.block_count", 1);
    gt_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", STRS, 4);
    int32_t ints[3] = {1, 2, 3};
    gt_gguf_writer_set_arr(w, "ints", GT_GGUF_INT32, ints, 3);
    gt_gguf_writer_set_bool(w, "b", true);
    gt_gguf_writer_add_tensor(w, "q", GT_TYPE_Q8_0, 2, ne_q, q, sizeof q);
    gt_gguf_writer_add_tensor(w, "a", GT_TYPE_F32, 1, ne_a, a, 32);
    write_ok(w, path);
    gt_gguf_writer_free(w);
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    size_t n = (size_t)ftell(f);
    rewind(f);
    *out = malloc(n);
    ck_assert_uint_eq(fread(*out, 1, n, f), n);
    fclose(f);
    return n;
}

START_TEST(t_truncation_sweep)
{
    uint8_t *bytes;
    size_t n = small_file(&bytes);
    const char *path = gt_test_tmp("trunc.gguf");
    for (size_t len = 0; len <= n; len++) {
        gt_test_write_file(path, bytes, len);
        gt_gguf *g = NULL;
        gt_err err = {{0}};
        int rc = gt_gguf_open(path, &g, &err);
        if (len < n) {
            ck_assert_msg(rc == -1, "prefix of %zu of %zu bytes opened", len, n);
            ck_assert_ptr_nonnull(strstr(err.msg, "offset"));
        } else {
            ck_assert_msg(rc == 0, "%s", err.msg);
            gt_gguf_close(g);
        }
    }
    free(bytes);
}
END_TEST

START_TEST(t_byte_flips)
{
    uint8_t *bytes;
    size_t n = small_file(&bytes);
    uint8_t *m = malloc(n);
    const char *path = gt_test_tmp("flip.gguf");
    gt_gguf *orig = open_ok(gt_test_tmp("small.gguf"));
    size_t data_size;
    gt_gguf_data(orig, 0, &data_size);
    gt_gguf_close(orig);
    size_t header = n - data_size; /* everything before the tensor data */
    int opened = 0;
    rng_state = 12345;
    for (int it = 0; it < 3000; it++) {
        memcpy(m, bytes, n);
        int flips = 1 + (int)(rnd() % 4);
        for (int k = 0; k < flips; k++) {
            uint32_t r = rnd();
            m[r % header] ^= (uint8_t)(1u << (rnd() % 8));
            if (rnd() % 4 == 0)
                m[rnd() % header] = (uint8_t)rnd();
        }
        gt_test_write_file(path, m, n);
        gt_gguf *g = NULL;
        gt_err err = {{0}};
        if (gt_gguf_open(path, &g, &err) == 0) {
            opened++;
            /* Whatever was accepted must describe data inside the file. */
            for (int64_t i = 0; i < gt_gguf_n_tensors(g); i++) {
                const gt_gguf_tensor *t = gt_gguf_tensor_at(g, i);
                size_t size;
                const uint8_t *d = gt_gguf_data(g, t->shard, &size);
                ck_assert((const uint8_t *)t->data >= d);
                ck_assert_uint_le(t->offset + t->nbytes, size);
                volatile uint8_t sink = ((const uint8_t *)t->data)[t->nbytes - 1];
                (void)sink;
            }
            for (int64_t i = 0; i < gt_gguf_n_kv(g); i++)
                ck_assert_ptr_nonnull(gt_gguf_key(g, i));
            gt_gguf_close(g);
        } else {
            ck_assert_ptr_nonnull(strstr(err.msg, path));
        }
    }
    ck_assert_int_gt(opened, 0); /* flips inside string bytes are harmless */
    free(m);
    free(bytes);
}
END_TEST

START_TEST(t_not_a_file)
{
    gt_gguf *g = NULL;
    gt_err err = {{0}};
    ck_assert_int_eq(gt_gguf_open("/nonexistent/x.gguf", &g, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "No such file"));
    ck_assert_int_eq(gt_gguf_open("/tmp", &g, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "not a regular file"));
    ck_assert_int_eq(gt_gguf_open("/nonexistent/x.gguf", &g, NULL), -1);
    gt_gguf_close(NULL);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("gguf");
    TCase *tc = tcase_create("writer");
    tcase_add_test(tc, t_roundtrip);
    tcase_add_test(tc, t_writer_replace_and_alignment);
    tcase_add_test(tc, t_writer_errors);
    tcase_add_test(tc, t_writer_io_error);
    tcase_add_test(tc, t_copy_kv_nested);
    tcase_add_test(tc, t_v2_and_unpadded);
    suite_add_tcase(s, tc);

    /* Tests of real files run only when the files are there; otherwise they
     * are not registered (so not counted as passed) and say why. */
    tc = tcase_create("real");
    const bool quants = gt_test_model("llamacpp-quants/stories260K-f16.gguf") &&
                        gt_test_model("llamacpp-quants/stories260K-q8_0.gguf") &&
                        gt_test_model("llamacpp-quants/stories260K-q4_0.gguf") &&
                        gt_test_model("llamacpp-quants/stories260K-q4_1.gguf");
    const bool vocab = gt_test_model("vocab/ggml-vocab-gpt-2.gguf") &&
                       gt_test_model("vocab/ggml-vocab-llama-spm.gguf");
    gt_test_add_if(tc, t_stories260k, gt_test_model("stories260K.gguf") != NULL,
                   "stories260K.gguf not found (../shared/models or $GT_MODEL_DIR)");
    gt_test_add_if(tc, t_llamacpp_quants, quants,
                   "llama.cpp quants of stories260K not found (../shared/models/llamacpp-quants)");
    gt_test_add_if(tc, t_vocab_files, vocab, "llama.cpp vocab files not found (../shared/models/vocab)");
    gt_test_add_if(tc, t_smollm2, smollm2_path() != NULL,
                   "SmolLM2 not found (ci/fetch-smollm2.sh or GT_SMOLLM2)");
    suite_add_tcase(s, tc);

    tc = tcase_create("malformed");
    tcase_add_test(tc, t_bad_magic);
    tcase_add_test(tc, t_version1);
    tcase_add_test(tc, t_version_unknown);
    tcase_add_test(tc, t_empty_file);
    tcase_add_test(tc, t_truncated_header);
    tcase_add_test(tc, t_kv_count_huge);
    tcase_add_test(tc, t_tensor_count_huge);
    tcase_add_test(tc, t_tensor_count_after_kv);
    tcase_add_test(tc, t_key_length_past_end);
    tcase_add_test(tc, t_string_value_past_end);
    tcase_add_test(tc, t_array_past_end);
    tcase_add_test(tc, t_string_array_past_end);
    tcase_add_test(tc, t_string_array_count_huge);
    tcase_add_test(tc, t_unknown_value_type);
    tcase_add_test(tc, t_unknown_array_type);
    tcase_add_test(tc, t_nested_too_deep);
    tcase_add_test(tc, t_bad_bool);
    tcase_add_test(tc, t_truncated_value);
    tcase_add_test(tc, t_duplicate_key);
    tcase_add_test(tc, t_key_with_nul);
    tcase_add_test(tc, t_duplicate_tensor);
    tcase_add_test(tc, t_alignment_not_pow2);
    tcase_add_test(tc, t_alignment_zero);
    tcase_add_test(tc, t_alignment_wrong_type);
    tcase_add_test(tc, t_ndims_too_many);
    tcase_add_test(tc, t_ndims_zero);
    tcase_add_test(tc, t_zero_dim);
    tcase_add_test(tc, t_dim_too_large);
    tcase_add_test(tc, t_unknown_tensor_type);
    tcase_add_test(tc, t_element_overflow);
    tcase_add_test(tc, t_size_overflow);
    tcase_add_test(tc, t_row_not_block_multiple);
    tcase_add_test(tc, t_misaligned_offset);
    tcase_add_test(tc, t_data_out_of_bounds);
    tcase_add_test(tc, t_data_offset_huge);
    tcase_add_test(tc, t_no_data_section);
    tcase_add_test(tc, t_not_a_file);
    suite_add_tcase(s, tc);

    tc = tcase_create("split");
    tcase_add_test(tc, t_split_two);
    tcase_add_test(tc, t_split_missing_shard);
    tcase_add_test(tc, t_split_bad_count);
    tcase_add_test(tc, t_split_bad_names);
    tcase_add_test(tc, t_split_duplicate_across);
    suite_add_tcase(s, tc);

    tc = tcase_create("robustness");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, t_truncation_sweep);
    tcase_add_test(tc, t_byte_flips);
    suite_add_tcase(s, tc);
    return s;
}

/* Only the real-file tests need ../shared/models; they skip themselves, so the
 * synthetic tests still run where the models are absent. */
int main(void)
{
    return gt_test_run(suite());
}
