/* cmd_quantize.c: `gauntlet quantize IN OUT TYPE`: make a model's quant
 * variant from a source artifact, as llama-quantize does without an
 * importance matrix, so that our variants and llama.cpp's agree tensor by
 * tensor (tests compare against files llama.cpp wrote).
 *
 * Per-tensor types follow llama-quantize (and ../shared/models/
 * llamacpp-quants/README.md): weight matrices (2+ dimensions) get TYPE,
 * token_embd.weight included; norm weights and 1-D tensors become f32 (what
 * the runtime computes norms in); a matrix whose row length is not a
 * multiple of TYPE's block becomes f16, llama.cpp's fallback; for q4_0/q4_1
 * the output projection (output.weight, or token_embd.weight when tied) is
 * promoted to q8_0 (llama.cpp asks for Q6_K and falls back to Q8_0 when
 * rows are not a multiple of 256; we have no Q6_K). --pure turns the
 * promotion off. A tensor whose type we cannot dequantize (a k-quant, an
 * integer tensor) is copied byte for byte. Every tensor that does not get
 * TYPE is listed on stderr with the reason, then a summary.
 *
 * Conversion goes through f32 one row at a time (dequantize, then the
 * reference quantizer), so the result is bit-identical to quantizing the f32
 * weights directly. A tensor already in the type it would get is copied
 * (re-quantizing would give the same bytes anyway, see test_quant). All
 * metadata is copied, general.quantization_version and general.file_type are
 * set as llama-quantize sets them, and split.* keys are dropped because the
 * output is always one file. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "gt/gguf.h"
#include "gt/quant.h"

static void help(FILE *f)
{
    fprintf(f, "usage: gauntlet quantize [--pure] [--quiet] IN OUT TYPE\n"
               "  converts IN's weight matrices to TYPE (f32, f16, bf16, q8_0, q4_0, q4_1)\n"
               "  and writes OUT (one file, even when IN is split), with llama-quantize's\n"
               "  rules: norms and 1-D tensors become f32, matrices whose rows are not a\n"
               "  multiple of TYPE's block f16, the output projection q8_0 when TYPE is\n"
               "  q4_0/q4_1; types with no converter are copied. Tensors that do not get\n"
               "  TYPE are listed on stderr with the reason.\n"
               "  --pure   give the output projection TYPE too\n"
               "  --quiet  only print errors and the summary\n");
}

/* Types this verb converts from and to: every weight type the runtime
 * dequantizes (Q8_K is an activation format and I32 not a weight). */
static bool convertible(gt_type t)
{
    return gt_type_info(t) && t != GT_TYPE_I32 && t != GT_TYPE_Q8_K;
}

/* GGML's llama_ftype ids ("mostly TYPE"). */
static uint32_t file_type_of(gt_type t)
{
    switch (t) {
    case GT_TYPE_F16: return 1;
    case GT_TYPE_Q4_0: return 2;
    case GT_TYPE_Q4_1: return 3;
    case GT_TYPE_Q8_0: return 7;
    case GT_TYPE_Q5_0: return 8;
    case GT_TYPE_Q5_1: return 9;
    case GT_TYPE_Q2_K: return 10;
    case GT_TYPE_Q3_K: return 11; /* Q3_K_S: every matrix q3_k */
    case GT_TYPE_Q4_K: return 14; /* Q4_K_S */
    case GT_TYPE_Q5_K: return 16; /* Q5_K_S */
    case GT_TYPE_Q6_K: return 18;
    case GT_TYPE_BF16: return 32;
    default: return 0; /* ALL_F32 */
    }
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* What happens to one tensor: its output type, and why when it is not TYPE
 * (NULL when it is). is_output: this is the output projection (output.weight,
 * or token_embd.weight when the embeddings are tied). */
static gt_type plan_tensor(const gt_gguf_tensor *t, gt_type want, bool is_output, bool pure,
                           const char **why)
{
    *why = NULL;
    if (!convertible(t->type)) {
        *why = "no converter for its type, copied";
        return t->type;
    }
    if (ends_with(t->name, "_norm.weight")) {
        *why = "norm weight";
        return GT_TYPE_F32;
    }
    if (t->n_dims < 2 || t->n_elements == t->ne[0]) {
        *why = "1-D";
        return GT_TYPE_F32;
    }
    const gt_type_traits *tt = gt_type_info(want);
    if (t->ne[0] % tt->block_size != 0) {
        *why = "row length is not a multiple of the block size (f16, as llama.cpp)";
        return GT_TYPE_F16;
    }
    if (is_output && !pure && (want == GT_TYPE_Q4_0 || want == GT_TYPE_Q4_1)) {
        /* llama.cpp asks for Q6_K here and takes Q8_0 when rows are not a
         * multiple of 256; we have no Q6_K, so always Q8_0. */
        *why = "output projection, kept at q8_0 as llama.cpp does (--pure: no)";
        return GT_TYPE_Q8_0;
    }
    return want;
}

typedef struct job {
    void **bufs; /* converted tensor data, alive until the writer has written */
    int64_t n_bufs;
    float *row;
} job;

/* Converts t to type `to`; *data and *nbytes describe the result (into the
 * source mmap when no conversion is needed). */
static int convert(job *j, const gt_gguf_tensor *t, gt_type to, const void **data,
                   size_t *nbytes)
{
    if (to == t->type) {
        *data = t->data;
        *nbytes = t->nbytes;
        return 0;
    }
    const int64_t cols = t->ne[0], rows = t->n_elements / cols;
    const size_t in_row = gt_row_size(t->type, cols), out_row = gt_row_size(to, cols);
    uint8_t *out = malloc(out_row * (size_t)rows);
    float *row = realloc(j->row, (size_t)cols * sizeof *row);
    if (row)
        j->row = row;
    if (!out || !row) {
        free(out);
        return -1;
    }
    j->bufs[j->n_bufs++] = out;
    const uint8_t *in = t->data;
    for (int64_t r = 0; r < rows; r++) {
        gt_dequantize_row(t->type, in + (size_t)r * in_row, row, cols);
        gt_quantize_row(to, row, out + (size_t)r * out_row, cols);
    }
    *data = out;
    *nbytes = out_row * (size_t)rows;
    return 0;
}

static void progress(bool tty, int64_t i, int64_t n, const char *name)
{
    if (tty)
        fprintf(stderr, "\r\033[K[%lld/%lld] %s", (long long)i + 1, (long long)n, name);
}

int cmd_quantize(int argc, char **argv)
{
    bool quiet = false, pure = false;
    static const struct option opts[] = {{"quiet", no_argument, 0, 'q'},
                                         {"pure", no_argument, 0, 'P'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "qh", opts, NULL)) != -1) {
        switch (c) {
        case 'q': quiet = true; break;
        case 'P': pure = true; break;
        case 'h': help(stdout); return GT_EXIT_OK;
        default: help(stderr); return GT_EXIT_USAGE;
        }
    }
    if (argc - optind != 3) {
        fprintf(stderr, "gauntlet quantize: expected IN OUT TYPE\n");
        help(stderr);
        return GT_EXIT_USAGE;
    }
    const char *in = argv[optind], *outp = argv[optind + 1], *tname = argv[optind + 2];
    gt_type want;
    if (gt_type_from_name(tname, &want) != 0 || !convertible(want)) {
        fprintf(stderr, "gauntlet quantize: TYPE must be one of f32, f16, bf16, q8_0, q4_0, "
                        "q4_1, got '%s'\n", tname);
        return GT_EXIT_USAGE;
    }

    gt_err err = {{0}};
    gt_gguf *g = NULL;
    if (gt_gguf_open(in, &g, &err) != 0) {
        fprintf(stderr, "gauntlet quantize: %s\n", err.msg);
        return GT_EXIT_USAGE;
    }
    const int64_t n_t = gt_gguf_n_tensors(g);
    int rc = GT_EXIT_USAGE;
    job j = {calloc((size_t)(n_t ? n_t : 1), sizeof(void *)), 0, NULL};
    gt_gguf_writer *w = gt_gguf_writer_new();
    if (!j.bufs || !w) {
        fprintf(stderr, "gauntlet quantize: out of memory\n");
        goto done;
    }

    for (int64_t i = 0; i < gt_gguf_n_kv(g); i++)
        if (strncmp(gt_gguf_key(g, i), "split.", 6) != 0)
            gt_gguf_writer_copy_kv(w, g, i);
    /* As llama-quantize: both keys, whatever TYPE, in this order, so new keys
     * land where its files have them. */
    gt_gguf_writer_set_u32(w, "general.quantization_version", 2);
    gt_gguf_writer_set_u32(w, "general.file_type", file_type_of(want));

    const bool tied = gt_gguf_find_tensor(g, "output.weight") == NULL;
    const bool tty = !quiet && isatty(STDERR_FILENO);
    const double t0 = gt_now();
    uint64_t before = 0, after = 0;
    int64_t n_conv = 0, n_same = 0, n_kept = 0;
    for (int64_t i = 0; i < n_t; i++) {
        const gt_gguf_tensor *t = gt_gguf_tensor_at(g, i);
        const char *why;
        const bool is_output = strcmp(t->name, "output.weight") == 0 ||
                               (tied && strcmp(t->name, "token_embd.weight") == 0);
        gt_type to = plan_tensor(t, want, is_output, pure, &why);
        progress(tty, i, n_t, t->name);
        const void *data;
        size_t nbytes;
        if (convert(&j, t, to, &data, &nbytes) != 0) {
            fprintf(stderr, "%sgauntlet quantize: out of memory converting %s\n",
                    tty ? "\n" : "", t->name);
            goto done;
        }
        gt_gguf_writer_add_tensor(w, t->name, to, t->n_dims, t->ne, data, nbytes);
        before += t->nbytes;
        after += nbytes;
        if (why && to != want) {
            n_kept++;
            if (!quiet)
                fprintf(stderr, "%s%-28s %s -> %s: %s\n", tty ? "\r\033[K" : "", t->name,
                        gt_type_name(t->type), gt_type_name(to), why);
        } else if (to == t->type) {
            n_same++;
        } else {
            n_conv++;
        }
    }
    if (tty)
        fprintf(stderr, "\r\033[Kwriting %s\n", outp);
    if (gt_gguf_writer_write(w, outp, &err) != 0) {
        fprintf(stderr, "gauntlet quantize: %s\n", err.msg);
        goto done;
    }
    fprintf(stderr,
            "quantize: %lld tensors converted to %s, %lld already %s, %lld kept as listed; "
            "tensor data %.2f MiB -> %.2f MiB (%.1f s)\n",
            (long long)n_conv, gt_type_name(want), (long long)n_same, gt_type_name(want),
            (long long)n_kept, before / 1048576.0, after / 1048576.0, gt_now() - t0);
    rc = GT_EXIT_OK;
done:
    gt_gguf_writer_free(w);
    for (int64_t i = 0; i < j.n_bufs; i++)
        free(j.bufs[i]);
    free(j.bufs);
    free(j.row);
    gt_gguf_close(g);
    return rc;
}
