/* test_synth.c: synthetic models (synth.c) as artifacts the rest of the
 * runtime can trust: deterministic bytes, llama.cpp's metadata keys and
 * tensor names with the right shapes, weights at the promised scale, a
 * vocabulary the SentencePiece tokenizer can use, and quantized variants
 * that are exactly the reference quantization of the f32 weights.
 *
 * The second test case drives the `gauntlet quantize` verb (the built
 * binary) and holds it to files written by llama.cpp's quantizer: every
 * tensor must come out with the same type and the same bytes. */
#include "testutil.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gt/gguf.h"
#include "gt/quant.h"
#include "gt/synth.h"
#include "gt/tokenizer.h"

static void *read_all(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    long len = ftell(f);
    ck_assert_int_ge(len, 0);
    rewind(f);
    void *p = malloc((size_t)len + 1);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(fread(p, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return p;
}

static const char *synth(const char *name, const char *preset, uint64_t seed, gt_type type)
{
    const char *path = gt_test_tmp(name);
    gt_err err = {{0}};
    ck_assert_msg(gt_synth_write(path, preset, seed, type, &err) == 0, "%s", err.msg);
    return path;
}

static gt_gguf *open_ok(const char *path)
{
    gt_gguf *g = NULL;
    gt_err err = {{0}};
    ck_assert_msg(gt_gguf_open(path, &g, &err) == 0, "%s", err.msg);
    return g;
}

START_TEST(test_deterministic)
{
    size_t na, nb, nc;
    void *a = read_all(synth("a.gguf", "tiny", 1, GT_TYPE_F32), &na);
    void *b = read_all(synth("b.gguf", "tiny", 1, GT_TYPE_F32), &nb);
    void *c = read_all(synth("c.gguf", "tiny", 2, GT_TYPE_F32), &nc);
    ck_assert_uint_eq(na, nb);
    ck_assert_int_eq(memcmp(a, b, na), 0);
    ck_assert_uint_eq(na, nc); /* same shape, so the same size ... */
    ck_assert_int_ne(memcmp(a, c, na), 0); /* ... but other weights */
    free(a);
    free(b);
    free(c);

    /* Pin the stream itself: a change to the generator (or a platform that
     * computes it differently) must show up here, not as drift elsewhere. */
    gt_gguf *g = open_ok(gt_test_tmp("a.gguf"));
    const gt_gguf_tensor *t = gt_gguf_find_tensor(g, "token_embd.weight");
    ck_assert_ptr_nonnull(t);
    const float *x = t->data;
    /* splitmix64(1 ^ fnv1a("token_embd.weight")), Irwin-Hall(4), times
     * 0.5/sqrt(64)*sqrt(3)/2^23 as a float. */
    ck_assert_float_eq(x[0], 0x1.d591ap-6f);
    ck_assert_float_eq(x[1], -0x1.63bcbep-6f);
    ck_assert_float_eq(x[2], 0x1.4c6ceep-4f);
    ck_assert_float_eq(x[3], 0x1.1e428p-4f);
    const float *nw = gt_gguf_find_tensor(g, "blk.0.attn_norm.weight")->data;
    ck_assert_float_eq(nw[0], 1.0498046875f); /* 1 + 51/1024 */
    ck_assert_float_eq(nw[1], 1.001953125f);
    gt_gguf *g2 = open_ok(gt_test_tmp("c.gguf"));
    const float *y = gt_gguf_find_tensor(g2, "token_embd.weight")->data;
    ck_assert(x[0] != y[0]);
    gt_gguf_close(g2);
    gt_gguf_close(g);
}
END_TEST

START_TEST(test_metadata_and_shapes)
{
    gt_gguf *g = open_ok(synth("m.gguf", "tiny", 42, GT_TYPE_F32));
    const gt_synth_shape *p = gt_synth_preset("tiny");
    ck_assert_ptr_nonnull(p);
    ck_assert_str_eq(gt_gguf_get_str(g, "general.architecture"), "llama");
    ck_assert_str_eq(gt_gguf_get_str(g, "general.name"), "synth-tiny");
    ck_assert_int_eq(gt_gguf_get_int(g, "general.file_type", -1), 0);
    ck_assert_int_eq(gt_gguf_get_int(g, "gauntlet.synth.seed", -1), 42);
    ck_assert_int_eq(gt_gguf_get_int(g, "llama.block_count", -1), p->n_layer);
    ck_assert_int_eq(gt_gguf_get_int(g, "llama.context_length", -1), p->n_ctx);
    ck_assert_int_eq(gt_gguf_get_int(g, "llama.embedding_length", -1), 64);
    ck_assert_int_eq(gt_gguf_get_int(g, "llama.feed_forward_length", -1), 160);
    ck_assert_int_eq(gt_gguf_get_int(g, "llama.attention.head_count", -1), 4);
    ck_assert_int_eq(gt_gguf_get_int(g, "llama.attention.head_count_kv", -1), 2);
    ck_assert_int_eq(gt_gguf_get_int(g, "llama.rope.dimension_count", -1), 16);
    ck_assert_int_eq(gt_gguf_get_int(g, "llama.vocab_size", -1), p->n_vocab);
    ck_assert_double_eq_tol(gt_gguf_get_float(g, "llama.rope.freq_base", 0), 10000.0, 1e-3);
    ck_assert_double_eq_tol(gt_gguf_get_float(g, "llama.attention.layer_norm_rms_epsilon", 0),
                            1e-5, 1e-9);

    /* 3 global tensors (tiny has its own output) + 9 per layer. */
    ck_assert_int_eq(gt_gguf_n_tensors(g), 3 + 9 * p->n_layer);
    struct { const char *name; int64_t ne0, ne1; } want[] = {
        {"token_embd.weight", 64, 512}, {"output.weight", 64, 512},
        {"output_norm.weight", 64, 1},  {"blk.1.attn_norm.weight", 64, 1},
        {"blk.1.attn_q.weight", 64, 64}, {"blk.1.attn_k.weight", 64, 32},
        {"blk.1.attn_v.weight", 64, 32}, {"blk.1.attn_output.weight", 64, 64},
        {"blk.0.ffn_norm.weight", 64, 1}, {"blk.0.ffn_gate.weight", 64, 160},
        {"blk.0.ffn_up.weight", 64, 160}, {"blk.0.ffn_down.weight", 160, 64},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const gt_gguf_tensor *t = gt_gguf_find_tensor(g, want[i].name);
        ck_assert_msg(t != NULL, "%s missing", want[i].name);
        ck_assert_int_eq(t->ne[0], want[i].ne0);
        ck_assert_int_eq(t->ne[1], want[i].ne1);
        ck_assert_int_eq(t->n_dims, want[i].ne1 == 1 ? 1 : 2);
        ck_assert_int_eq(t->type, GT_TYPE_F32);
    }

    /* Scale: matrices ~ normal(0, 0.5/sqrt(fan_in)), norms 1 +- 1/16. */
    const gt_gguf_tensor *q = gt_gguf_find_tensor(g, "blk.0.attn_q.weight");
    const float *x = q->data;
    double sum = 0, sq = 0, amax = 0;
    for (int64_t i = 0; i < q->n_elements; i++) {
        sum += x[i];
        sq += (double)x[i] * x[i];
        amax = fmax(amax, fabs(x[i]));
    }
    double mean = sum / (double)q->n_elements;
    double sd = sqrt(sq / (double)q->n_elements - mean * mean);
    ck_assert_double_le(fabs(mean), 0.005);
    ck_assert_double_eq_tol(sd, 0.0625, 0.0625 * 0.05);
    ck_assert_double_le(amax, 0.0625 * 2 * sqrt(3.0)); /* Irwin-Hall(4) range */
    const gt_gguf_tensor *nw = gt_gguf_find_tensor(g, "blk.1.ffn_norm.weight");
    const float *n = nw->data;
    for (int i = 0; i < 64; i++)
        ck_assert(n[i] >= 1.0f - 1.0f / 16 && n[i] < 1.0f + 1.0f / 16);
    gt_gguf_close(g);
}
END_TEST

START_TEST(test_vocab)
{
    gt_gguf *g = open_ok(synth("v.gguf", "tiny", 1, GT_TYPE_F32));
    int64_t kt = gt_gguf_find_key(g, "tokenizer.ggml.tokens");
    int64_t ks = gt_gguf_find_key(g, "tokenizer.ggml.scores");
    int64_t ky = gt_gguf_find_key(g, "tokenizer.ggml.token_type");
    ck_assert(kt >= 0 && ks >= 0 && ky >= 0);
    ck_assert_str_eq(gt_gguf_get_str(g, "tokenizer.ggml.model"), "llama");
    ck_assert_int_eq(gt_gguf_arr_len(g, kt), 512);
    ck_assert_int_eq(gt_gguf_arr_len(g, ks), 512);
    ck_assert_int_eq(gt_gguf_arr_len(g, ky), 512);
    ck_assert_int_eq(gt_gguf_arr_type(g, ks), GT_GGUF_FLOAT32);
    ck_assert_int_eq(gt_gguf_arr_type(g, ky), GT_GGUF_INT32);
    ck_assert_int_eq(gt_gguf_get_int(g, "tokenizer.ggml.bos_token_id", -1), 1);
    ck_assert_int_eq(gt_gguf_get_int(g, "tokenizer.ggml.eos_token_id", -1), 2);
    ck_assert_int_eq(gt_gguf_get_int(g, "tokenizer.ggml.unknown_token_id", -1), 0);
    ck_assert(gt_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", false));
    ck_assert(gt_gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", false));

    const float *score = gt_gguf_arr_data(g, ks);
    const int32_t *type = gt_gguf_arr_data(g, ky);
    ck_assert_str_eq(gt_gguf_arr_str(g, kt, 0, NULL), "<unk>");
    ck_assert_str_eq(gt_gguf_arr_str(g, kt, 1, NULL), "<s>");
    ck_assert_str_eq(gt_gguf_arr_str(g, kt, 2, NULL), "</s>");
    ck_assert_int_eq(type[0], 2);
    ck_assert_int_eq(type[1], 3);
    ck_assert_int_eq(type[2], 3);
    for (int b = 0; b < 256; b++) {
        char want[8];
        snprintf(want, sizeof want, "<0x%02X>", b);
        ck_assert_str_eq(gt_gguf_arr_str(g, kt, 3 + (uint64_t)b, NULL), want);
        ck_assert_int_eq(type[3 + b], 6);
    }
    ck_assert_str_eq(gt_gguf_arr_str(g, kt, 259, NULL), "\xe2\x96\x81");

    /* Normal pieces: distinct, scores strictly falling, and each one's
     * prefix (one UTF-8 character shorter) is in the vocabulary, which is
     * what makes it reachable by pairwise merges. Quadratic, 512 is small. */
    for (uint64_t i = 259; i < 512; i++) {
        size_t len;
        const char *p = gt_gguf_arr_str(g, kt, i, &len);
        ck_assert_int_eq(type[i], 1);
        if (i > 259)
            ck_assert_float_lt(score[i], score[i - 1]);
        size_t k = len - 1;
        while (k > 0 && ((unsigned char)p[k] & 0xc0) == 0x80)
            k--;
        bool found_prefix = k == 0;
        for (uint64_t j = 0; j < 512; j++) {
            size_t lj;
            const char *q = gt_gguf_arr_str(g, kt, j, &lj);
            if (j != i)
                ck_assert_msg(lj != len || memcmp(p, q, len) != 0, "duplicate piece %s", p);
            if (lj == k && memcmp(p, q, k) == 0)
                found_prefix = true;
        }
        ck_assert_msg(found_prefix, "piece '%s' has no prefix piece", p);
    }

    /* The runtime's tokenizer takes it and round-trips text through it. */
    gt_tokenizer *tok = NULL;
    gt_err err = {{0}};
    ck_assert_msg(gt_tokenizer_from_gguf(g, &tok, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(gt_tokenizer_n_vocab(tok), 512);
    ck_assert_int_eq(gt_tokenizer_bos(tok), 1);
    ck_assert_int_eq(gt_tokenizer_eos(tok), 2);
    const char *text = "Once upon a time, the little girl said: \"hello\"\n\xc3\xa9!";
    int32_t ids[256];
    int n = gt_tokenize(tok, text, strlen(text), true, ids, 256, &err);
    ck_assert_msg(n > 0, "%s", err.msg);
    ck_assert_int_eq(ids[0], 1);
    ck_assert_int_lt(n, (int)strlen(text)); /* merges happened */
    char back[512];
    gt_detokenize(tok, ids + 1, n - 1, back, sizeof back);
    ck_assert_str_eq(back, text);
    gt_tokenizer_free(tok);
    gt_gguf_close(g);
}
END_TEST

START_TEST(test_quantized_variants)
{
    /* synth --type T writes, for every matrix, exactly the reference
     * quantization of the f32 weights of the same seed, row by row; norms
     * stay f32 and identical. That is the `gauntlet quantize` contract too. */
    const gt_type types[] = {GT_TYPE_F16, GT_TYPE_BF16, GT_TYPE_Q8_0, GT_TYPE_Q4_0,
                             GT_TYPE_Q4_1};
    static const int file_type[] = {1, 32, 7, 2, 3};
    gt_gguf *f = open_ok(synth("f32.gguf", "tiny", 9, GT_TYPE_F32));
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        char name[32];
        snprintf(name, sizeof name, "%s.gguf", gt_type_name(types[k]));
        gt_gguf *q = open_ok(synth(name, "tiny", 9, types[k]));
        ck_assert_int_eq(gt_gguf_get_int(q, "general.file_type", -1), file_type[k]);
        ck_assert_int_eq(gt_gguf_n_tensors(q), gt_gguf_n_tensors(f));
        for (int64_t i = 0; i < gt_gguf_n_tensors(f); i++) {
            const gt_gguf_tensor *a = gt_gguf_tensor_at(f, i);
            const gt_gguf_tensor *b = gt_gguf_find_tensor(q, a->name);
            ck_assert_ptr_nonnull(b);
            ck_assert_int_eq(b->ne[0], a->ne[0]);
            ck_assert_int_eq(b->ne[1], a->ne[1]);
            if (a->n_dims == 1) {
                ck_assert_int_eq(b->type, GT_TYPE_F32);
                ck_assert_mem_eq(a->data, b->data, a->nbytes);
                continue;
            }
            ck_assert_int_eq(b->type, types[k]);
            size_t row = gt_row_size(types[k], a->ne[0]);
            ck_assert_uint_eq(b->nbytes, row * (size_t)a->ne[1]);
            void *buf = malloc(b->nbytes);
            ck_assert_ptr_nonnull(buf);
            for (int64_t r = 0; r < a->ne[1]; r++)
                gt_quantize_row(types[k], (const float *)a->data + r * a->ne[0],
                                (char *)buf + (size_t)r * row, a->ne[0]);
            ck_assert_msg(memcmp(buf, b->data, b->nbytes) == 0, "%s: %s differs", name,
                          a->name);
            free(buf);
        }
        gt_gguf_close(q);
    }
    gt_gguf_close(f);
}
END_TEST

START_TEST(test_smollm2_shape)
{
    const gt_synth_shape *p = gt_synth_preset("smollm2-135m");
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(p->n_embd, 576);
    ck_assert_int_eq(p->n_layer, 30);
    ck_assert_int_eq(p->n_head, 9);
    ck_assert_int_eq(p->n_head_kv, 3);
    ck_assert_int_eq(p->n_ff, 1536);
    ck_assert_int_eq(p->n_vocab, 49152);
    ck_assert(p->tied_output);
    ck_assert_float_eq(p->rope_base, 100000.0f);

    /* Written once in the smallest type: tied (no output.weight), 2 + 9*30
     * tensors, kv width 3*64, and a full, distinct vocabulary. */
    const char *path = synth("smol.gguf", "smollm2-135m", 1, GT_TYPE_Q4_0);
    gt_gguf *g = open_ok(path);
    ck_assert_int_eq(gt_gguf_n_tensors(g), 2 + 9 * 30);
    ck_assert_ptr_null(gt_gguf_find_tensor(g, "output.weight"));
    const gt_gguf_tensor *k = gt_gguf_find_tensor(g, "blk.29.attn_k.weight");
    ck_assert_ptr_nonnull(k);
    ck_assert_int_eq(k->ne[0], 576);
    ck_assert_int_eq(k->ne[1], 192);
    ck_assert_int_eq(k->type, GT_TYPE_Q4_0);
    const gt_gguf_tensor *e = gt_gguf_find_tensor(g, "token_embd.weight");
    ck_assert_int_eq(e->ne[1], 49152);
    ck_assert_int_eq(gt_gguf_get_int(g, "llama.rope.dimension_count", -1), 64);
    ck_assert_str_eq(gt_gguf_get_str(g, "general.name"), "synth-smollm2-135m");
    gt_tokenizer *tok = NULL;
    gt_err err = {{0}};
    ck_assert_msg(gt_tokenizer_from_gguf(g, &tok, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(gt_tokenizer_n_vocab(tok), 49152);
    gt_tokenizer_free(tok);
    gt_gguf_close(g);
    unlink(path);
}
END_TEST

START_TEST(test_errors)
{
    gt_err err = {{0}};
    ck_assert_int_eq(gt_synth_write(gt_test_tmp("x.gguf"), "huge", 1, GT_TYPE_F32, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "unknown synth preset 'huge'"));
    ck_assert_ptr_nonnull(strstr(err.msg, "smollm2-135m"));
    ck_assert_int_eq(gt_synth_write(gt_test_tmp("x.gguf"), "tiny", 1, GT_TYPE_I32, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "i32"));
    ck_assert_int_eq(
        gt_synth_write("/nonexistent-dir/x.gguf", "tiny", 1, GT_TYPE_F32, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "/nonexistent-dir/x.gguf"));
    ck_assert_int_eq(access(gt_test_tmp("x.gguf"), F_OK), -1);
}
END_TEST

/* ---- gauntlet quantize, against llama.cpp's files ------------------------ */

static const char *gauntlet_bin(void)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/gauntlet", GT_BINARY_DIR);
    return access(path, X_OK) == 0 ? path : NULL;
}

/* Runs the gauntlet binary with args (no shell quoting needed for our
 * paths); returns its exit code. */
static int run_gauntlet(const char *args)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s %s >/dev/null 2>&1", gauntlet_bin(), args);
    int st = system(cmd);
    ck_assert_msg(st != -1 && WIFEXITED(st), "could not run: %s", cmd);
    return WEXITSTATUS(st);
}

/* Tensor by tensor (names, not order: llama.cpp reorders them). */
static void assert_same_tensors(const char *want_path, const char *got_path)
{
    gt_gguf *a = open_ok(want_path), *b = open_ok(got_path);
    ck_assert_int_eq(gt_gguf_n_tensors(a), gt_gguf_n_tensors(b));
    for (int64_t i = 0; i < gt_gguf_n_tensors(a); i++) {
        const gt_gguf_tensor *x = gt_gguf_tensor_at(a, i);
        const gt_gguf_tensor *y = gt_gguf_find_tensor(b, x->name);
        ck_assert_msg(y != NULL, "%s: %s missing", got_path, x->name);
        ck_assert_msg(x->type == y->type, "%s: %s is %s, llama.cpp has %s", got_path, x->name,
                      gt_type_name(y->type), gt_type_name(x->type));
        for (int d = 0; d < GT_GGUF_MAX_DIMS; d++)
            ck_assert_int_eq(x->ne[d], y->ne[d]);
        ck_assert_uint_eq(x->nbytes, y->nbytes);
        ck_assert_msg(memcmp(x->data, y->data, x->nbytes) == 0, "%s: %s bytes differ",
                      got_path, x->name);
    }
    ck_assert_int_eq(gt_gguf_get_int(b, "general.file_type", -1),
                     gt_gguf_get_int(a, "general.file_type", -2));
    ck_assert_int_eq(gt_gguf_get_int(b, "general.quantization_version", -1), 2);
    ck_assert_int_eq(gt_gguf_n_kv(b), gt_gguf_n_kv(a));
    gt_gguf_close(a);
    gt_gguf_close(b);
}

START_TEST(test_quantize_matches_llamacpp)
{
    const char *src = gt_test_model("stories260K.gguf");
    /* CTest builds every target first, so a missing binary is a broken
     * setup, reported as a failure rather than a silent pass; main() only
     * registers this case when the model files are there. */
    ck_assert_msg(gauntlet_bin() != NULL, "gauntlet binary not found in %s", GT_BINARY_DIR);
    ck_assert_msg(src != NULL, "stories260K.gguf not found under ../shared/models");
    const char *types[] = {"f16", "q8_0", "q4_0", "q4_1"};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        char rel[128], out[64], args[8192];
        snprintf(rel, sizeof rel, "llamacpp-quants/stories260K-%s.gguf", types[i]);
        const char *want = gt_test_model(rel);
        ck_assert_msg(want != NULL, "%s missing", rel);
        snprintf(out, sizeof out, "st-%s.gguf", types[i]);
        const char *got = gt_test_tmp(out);
        snprintf(args, sizeof args, "quantize --quiet %s %s %s", src, got, types[i]);
        ck_assert_int_eq(run_gauntlet(args), 0);
        assert_same_tensors(want, got);
    }
}
END_TEST

START_TEST(test_quantize_cli)
{
    ck_assert_msg(gauntlet_bin() != NULL, "gauntlet binary not found in %s", GT_BINARY_DIR);
    /* synth f32 + quantize --pure T is byte for byte synth --type T (synth
     * gives every matrix T; without --pure, quantize keeps the output
     * projection at q8_0 for q4_x). */
    const char *f32 = synth("cli-f32.gguf", "tiny", 3, GT_TYPE_F32);
    const char *direct = synth("cli-q41.gguf", "tiny", 3, GT_TYPE_Q4_1);
    const char *via = gt_test_tmp("cli-via.gguf");
    char args[8192];
    snprintf(args, sizeof args, "quantize --quiet --pure %s %s q4_1", f32, via);
    ck_assert_int_eq(run_gauntlet(args), 0);
    size_t na, nb;
    void *a = read_all(direct, &na), *b = read_all(via, &nb);
    ck_assert_uint_eq(na, nb);
    ck_assert_int_eq(memcmp(a, b, na), 0);
    free(a);
    free(b);

    /* Back to f32: matrices become the dequantized values. */
    const char *back = gt_test_tmp("cli-back.gguf");
    snprintf(args, sizeof args, "quantize --quiet %s %s F32", via, back);
    ck_assert_int_eq(run_gauntlet(args), 0);
    gt_gguf *q = open_ok(via), *f = open_ok(back);
    const gt_gguf_tensor *tq = gt_gguf_find_tensor(q, "blk.0.ffn_down.weight");
    const gt_gguf_tensor *tf = gt_gguf_find_tensor(f, "blk.0.ffn_down.weight");
    ck_assert_int_eq(tf->type, GT_TYPE_F32);
    float *row = malloc(sizeof(float) * (size_t)tq->ne[0]);
    ck_assert_ptr_nonnull(row);
    gt_dequantize_row(GT_TYPE_Q4_1, tq->data, row, tq->ne[0]);
    ck_assert_mem_eq(row, tf->data, sizeof(float) * (size_t)tq->ne[0]);
    free(row);
    ck_assert_int_eq(gt_gguf_get_int(f, "general.file_type", -1), 0);
    gt_gguf_close(q);
    gt_gguf_close(f);

    /* Usage and input errors exit 2 and write nothing. */
    ck_assert_int_eq(run_gauntlet("quantize"), 2);
    snprintf(args, sizeof args, "quantize %s %s iq2_xs", f32, gt_test_tmp("no1.gguf"));
    ck_assert_int_eq(run_gauntlet(args), 2);
    snprintf(args, sizeof args, "quantize /nonexistent.gguf %s q8_0", gt_test_tmp("no2.gguf"));
    ck_assert_int_eq(run_gauntlet(args), 2);
    const char *junk = gt_test_tmp("junk.gguf");
    gt_test_write_file(junk, "GGUF\3\0\0\0garbage", 16);
    snprintf(args, sizeof args, "quantize %s %s q8_0", junk, gt_test_tmp("no3.gguf"));
    ck_assert_int_eq(run_gauntlet(args), 2);
    ck_assert_int_eq(access(gt_test_tmp("no1.gguf"), F_OK), -1);
    ck_assert_int_eq(access(gt_test_tmp("no3.gguf"), F_OK), -1);
    ck_assert_int_eq(run_gauntlet("quantize --help"), 0);
    ck_assert_int_eq(run_gauntlet("synth --help"), 0);
    ck_assert_int_eq(run_gauntlet("synth"), 2);
    snprintf(args, sizeof args, "synth %s --type q6_k", gt_test_tmp("no4.gguf"));
    ck_assert_int_eq(run_gauntlet(args), 2);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("synth");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_deterministic);
    tcase_add_test(tc, test_metadata_and_shapes);
    tcase_add_test(tc, test_vocab);
    tcase_add_test(tc, test_quantized_variants);
    tcase_add_test(tc, test_smollm2_shape);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    TCase *cli = tcase_create("quantize");
    tcase_set_timeout(cli, 300);
    bool llamacpp = gt_test_model("stories260K.gguf") != NULL;
    static const char *const quants[] = {"f16", "q8_0", "q4_0", "q4_1"};
    for (int i = 0; i < 4; i++) {
        char rel[128];
        snprintf(rel, sizeof rel, "llamacpp-quants/stories260K-%s.gguf", quants[i]);
        llamacpp = llamacpp && gt_test_model(rel) != NULL;
    }
    gt_test_add_if(cli, test_quantize_matches_llamacpp, llamacpp,
                   "stories260K.gguf and its llama.cpp quants not found (../shared/models): "
                   "the comparison is with llama.cpp's own files");
    tcase_add_test(cli, test_quantize_cli);
    suite_add_tcase(s, cli);
    return gt_test_run(s);
}
