/* cmd_quantize.c: `gauntlet quantize IN OUT SCHEME`: make a model's quant
 * variant from a source artifact, as llama-quantize does without an
 * importance matrix, so that our variants and llama.cpp's agree tensor by
 * tensor (tests compare against files llama.cpp wrote and against the
 * Gemma 3 Q4_K_M release).
 *
 * Which type each tensor gets is quant_scheme.c's job (plain types and the
 * K-quant mixes, with llama-quantize's promotions and fallbacks). A tensor
 * whose type we cannot dequantize (an integer tensor) is copied byte for
 * byte. Every tensor that does not get the scheme's base type is listed on
 * stderr with the reason, then a summary.
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

#include "base.h"
#include "commands.h"
#include "gt/gguf.h"
#include "gt/quant.h"
#include "matrix.h"

static void help(FILE *f)
{
    fprintf(f, "usage: gauntlet quantize [--pure] [--quiet] IN OUT SCHEME\n"
               "  converts IN's weight matrices and writes OUT (one file, even when IN is\n"
               "  split). SCHEME is a type or one of llama-quantize's K-quant mixes:\n"
               "    %s\n"
               "  (q3_k, q4_k, q5_k mean their _m mixes). The rules are llama-quantize's:\n"
               "  norms and 1-D tensors become f32; the output projection q6_k (q8_0 when\n"
               "  its rows are not whole blocks); the mixes promote attn_v, ffn_down and\n"
               "  attn_output in some layers; a row that is not whole blocks of its type\n"
               "  falls back (q2_k/q3_k -> iq4_nl, q4_k -> q5_0, q5_k -> q5_1, q6_k -> q8_0,\n"
               "  else f16). Tensors that do not get the base type are listed on stderr.\n"
               "  --pure   no promotions: every matrix gets the base type (f16 where its\n"
               "           rows are not whole blocks)\n"
               "  --quiet  only print errors and the summary\n",
            gt_quant_scheme_names());
}

/* Types this verb converts from: every weight type the runtime dequantizes
 * (Q8_K is an activation format and I32 not a weight). */
static bool convertible(gt_type t)
{
    return gt_type_info(t) && t != GT_TYPE_I32 && t != GT_TYPE_Q8_K;
}

/* The model facts the mix rules use (quant_scheme.h). */
static void scheme_state(const gt_gguf *g, gt_quant_state *st)
{
    memset(st, 0, sizeof *st);
    const char *arch = gt_gguf_get_str(g, "general.architecture");
    char key[160];
    snprintf(key, sizeof key, "%s.block_count", arch ? arch : "llama");
    st->n_layer = (int)gt_gguf_get_int(g, key, 0);
    snprintf(key, sizeof key, "%s.attention.head_count", arch ? arch : "llama");
    const int64_t n_head = gt_gguf_get_int(g, key, 1);
    snprintf(key, sizeof key, "%s.attention.head_count_kv", arch ? arch : "llama");
    const int64_t n_kv = gt_gguf_get_int(g, key, n_head);
    st->n_gqa = n_kv > 0 ? (int)(n_head / n_kv) : 1;
    for (int64_t i = 0; i < gt_gguf_n_tensors(g); i++) {
        const char *name = gt_gguf_tensor_at(g, i)->name;
        if (strstr(name, "attn_v.weight") || strstr(name, "attn_qkv.weight"))
            st->n_attn_v++;
        if (strcmp(name, "output.weight") == 0)
            st->has_output = true;
    }
}

/* What happens to one tensor: its output type, and why when it is not the
 * scheme's base type (NULL when it is). */
static gt_type plan_tensor(const gt_gguf_tensor *t, const gt_quant_scheme *s,
                           gt_quant_state *st, bool pure, const char **why)
{
    if (!convertible(t->type)) {
        *why = "no converter for its type, copied";
        return t->type;
    }
    return gt_quant_tensor_type(s, st, t->name, t->n_dims, t->ne[0], t->n_elements, pure, why);
}

/* llama-quantize visits tensors by layer number, then name (its weight map's
 * order), and the mix rules count attn_v and ffn_down in that order; a file
 * may list them otherwise (SmolLM2's: blk.0, blk.1, blk.10, ...). */
static int layer_of(const char *name)
{
    int l = -1;
    return sscanf(name, "blk.%d.", &l) == 1 ? l : -1;
}

static const gt_gguf *g_sort_src;
static int by_layer_then_name(const void *pa, const void *pb)
{
    const char *a = gt_gguf_tensor_at(g_sort_src, *(const int64_t *)pa)->name;
    const char *b = gt_gguf_tensor_at(g_sort_src, *(const int64_t *)pb)->name;
    const int la = layer_of(a), lb = layer_of(b);
    return la != lb ? (la < lb ? -1 : 1) : strcmp(a, b);
}

typedef struct plan {
    gt_type to;
    char why[192]; /* empty when the tensor gets the base type */
} plan;

/* Every tensor's output type, decided in llama-quantize's visiting order. */
static plan *plan_all(const gt_gguf *g, const gt_quant_scheme *s, bool pure)
{
    const int64_t n = gt_gguf_n_tensors(g);
    plan *p = calloc((size_t)(n ? n : 1), sizeof *p);
    int64_t *order = malloc((size_t)(n ? n : 1) * sizeof *order);
    if (!p || !order) {
        free(p);
        free(order);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++)
        order[i] = i;
    g_sort_src = g;
    qsort(order, (size_t)n, sizeof *order, by_layer_then_name);
    gt_quant_state st;
    scheme_state(g, &st);
    for (int64_t k = 0; k < n; k++) {
        const int64_t i = order[k];
        const char *why = NULL;
        p[i].to = plan_tensor(gt_gguf_tensor_at(g, i), s, &st, pure, &why);
        snprintf(p[i].why, sizeof p[i].why, "%s", why ? why : "");
    }
    free(order);
    return p;
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
        fprintf(stderr, "gauntlet quantize: expected IN OUT SCHEME\n");
        help(stderr);
        return GT_EXIT_USAGE;
    }
    const char *in = argv[optind], *outp = argv[optind + 1], *tname = argv[optind + 2];
    const gt_quant_scheme *scheme = gt_quant_scheme_find(tname);
    if (!scheme) {
        fprintf(stderr, "gauntlet quantize: SCHEME must be one of %s; got '%s'\n",
                gt_quant_scheme_names(), tname);
        return GT_EXIT_USAGE;
    }
    const gt_type want = scheme->base;

    gt_err err = {{0}};
    gt_gguf *g = NULL;
    if (gt_gguf_open(in, &g, &err) != 0) {
        fprintf(stderr, "gauntlet quantize: %s\n", err.msg);
        return GT_EXIT_USAGE;
    }
    const int64_t n_t = gt_gguf_n_tensors(g);
    int rc = GT_EXIT_USAGE;
    job j = {calloc((size_t)(n_t ? n_t : 1), sizeof(void *)), 0, NULL};
    plan *plans = NULL;
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
    gt_gguf_writer_set_u32(w, "general.file_type", scheme->file_type);

    plans = plan_all(g, scheme, pure);
    if (!plans) {
        fprintf(stderr, "gauntlet quantize: out of memory\n");
        goto done;
    }
    const bool tty = !quiet && isatty(STDERR_FILENO);
    const double t0 = gt_now();
    uint64_t before = 0, after = 0;
    int64_t n_conv = 0, n_same = 0, n_kept = 0;
    for (int64_t i = 0; i < n_t; i++) {
        const gt_gguf_tensor *t = gt_gguf_tensor_at(g, i);
        const char *why = plans[i].why[0] ? plans[i].why : NULL;
        const gt_type to = plans[i].to;
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
            "quantize %s: %lld tensors converted to %s, %lld already %s, %lld as listed; "
            "tensor data %.2f MiB -> %.2f MiB (%.1f s)\n",
            scheme->name, (long long)n_conv, gt_type_name(want), (long long)n_same,
            gt_type_name(want), (long long)n_kept, before / 1048576.0, after / 1048576.0, gt_now() - t0);
    rc = GT_EXIT_OK;
done:
    gt_gguf_writer_free(w);
    for (int64_t i = 0; i < j.n_bufs; i++)
        free(j.bufs[i]);
    free(j.bufs);
    free(j.row);
    free(plans);
    gt_gguf_close(g);
    return rc;
}
