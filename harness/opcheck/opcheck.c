/* opcheck.c: the op-conformance engine (see opcheck.h).
 *
 * A case is one node with up to three leaf inputs. Its inputs are generated
 * once from (seed, case number), so the target and the reference see the
 * same bytes, then the case is run on each backend through the vtable only:
 *   - every buffer has GUARD bytes of a known pattern before and after the
 *     tensor (which therefore also sits at a non-zero offset); afterwards
 *     the guards must be intact and inputs that are not outputs unchanged;
 *   - weights (src0 of MUL_MAT and GET_ROWS) come in through
 *     buffer_from_host, the way a session maps them; everything else through
 *     buffer_alloc + upload;
 *   - outputs are pre-filled with NaN bytes, so an element a backend forgets
 *     to write shows up as non-finite; KV cache rows past the filled part
 *     are NaN too, so attention that reads beyond its rows is caught;
 *   - in-place forms (output = src0's storage) are run for the ops that
 *     allow them.
 * The metric is NMSE = sum (a-b)^2 / sum b^2 with b the reference output;
 * any NaN/Inf in a is a failure regardless.
 *
 * Thresholds (why each value):
 *   KV_STORE          0      a copy: must be bit exact; into an F16 cache
 *                            (kv_type f16) a round to nearest even, the
 *                            same bits everywhere.
 *   GET_ROWS          1e-12  dequantization of one value is one or two
 *                            float roundings (an FMA may differ by 1 ulp).
 *   ADD, MUL          1e-12  one float rounding vs the double reference
 *                            (ADD also with a one-row b, a bias):
 *                            NMSE <= eps^2 ~ 4e-15.
 *   RMS_NORM, ROPE,   1e-10  a few roundings plus sin/cos/exp/sqrt of a
 *   SILU_MUL                 few ulp (fast vector exp approximations).
 *   ATTENTION         1e-8   float dot products, softmax and a weighted sum
 *                            over up to ~600 keys: relative error ~sqrt(n)*eps;
 *                            the same over F16 caches, whose values widen
 *                            exactly (the case's type is f16).
 *   MUL_MAT f32/f16/  1e-8   float accumulation over K <= 1536 (the weight
 *           bf16             values themselves convert exactly): ~sqrt(K)*eps.
 *   MUL_MAT q8_0/     5e-4   backends may quantize activations to 8-bit
 *           q4_0/q4_1,       blocks of 32 (GGML-style integer dots; Q8_K's
 *           q5_*, K-quants,  256-element blocks for the K-quants). That
 *                            rounding is uniform with step amax/127, variance
 *                            step^2/12 ~ 3e-5 of the signal for Gaussian
 *                            blocks, which is the NMSE it causes; 5e-4 leaves
 *                            >10x margin while a real bug (wrong scale,
 *                            nibble order, block offset) gives >= 1e-2.
 *                            The error is measured against the products'
 *                            scale, sum over outputs and k of (w*x)^2, where
 *                            that exceeds sum ref^2: the 8-bit rounding
 *                            error of a dot is ~ sum w^2 dx^2 whatever its
 *                            value, and one output that happens to cancel
 *                            (k=32, one row) read ~5.5e-4 against its own
 *                            small square with nothing wrong.
 *   TOPK              0      expert ids: exact (inputs have no ties).
 *   MOE_WEIGHTS,      1e-10  a softmax over the experts (float exp on some
 *   MOE_SUM                  devices) and a sum of k <= 8 products.
 *   MUL_MAT_ID        as MUL_MAT: each output is one weight row's dot product.
 * Rows are whole blocks of the weight type: K-quant cases use the shapes
 * with K a multiple of 256 (256, 512, 1536, 2048). */
#include "opcheck.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GUARD 64
#define GUARD_BYTE(i) ((unsigned char)(0xA5 ^ (i)))
#define MAX_CASES 2048

enum { FILL_GAUSS, FILL_SMALL, FILL_WEIGHT, FILL_IDS, FILL_NORMW, FILL_CACHE, FILL_FACTORS,
       FILL_SLOTS };
enum { ALIAS_NONE, ALIAS_SRC0, ALIAS_CACHE };

typedef struct oc_src {
    gt_type type;
    int64_t ne0, ne1;
    int fill;
    int64_t param; /* FILL_IDS: table rows; FILL_CACHE: rows filled (rest NaN);
                      FILL_SLOTS: rows per slot */
    int32_t filled[4]; /* FILL_SLOTS: rows filled in each slot (rest NaN) */
} oc_src;

typedef struct oc_case {
    gt_op op;
    gt_type type; /* what the case is "for": the weight type, or f32 */
    int n_src;
    oc_src src[3];
    int64_t out_ne0, out_ne1;
    int alias;
    int32_t ip[6];
    float fp[4];
    double threshold;
    char desc[96];
    /* Several sequences (ATTENTION): q's rows are n_seq runs of seq_rows,
     * run j attends slot j of the caches (param rows each) at seq_pos0[j]
     * with window seq_window[j]; one node per run, in one graph. */
    int n_seq;
    int32_t seq_rows[4], seq_pos0[4], seq_window[4];
} oc_case;

typedef struct oc_list {
    oc_case *c;
    int n;
    int op_filter, type_filter;
} oc_list;

/* ---- cases ------------------------------------------------------------------ */

/* The first six types' cases come first and keep the case numbers (so the
 * inputs) they had before the K-quant family was added; the later types'
 * cases are appended after every other op's. */
static const gt_type WEIGHT_TYPES[] = {GT_TYPE_F32, GT_TYPE_F16, GT_TYPE_BF16,
                                       GT_TYPE_Q8_0, GT_TYPE_Q4_0, GT_TYPE_Q4_1};
static const gt_type LATER_TYPES[] = {GT_TYPE_Q5_0, GT_TYPE_Q5_1, GT_TYPE_IQ4_NL, GT_TYPE_Q2_K,
                                      GT_TYPE_Q3_K, GT_TYPE_Q4_K, GT_TYPE_Q5_K, GT_TYPE_Q6_K};
#define N_OF(a) (int)(sizeof a / sizeof a[0])

static bool quantized(gt_type t)
{
    const gt_type_traits *tr = gt_type_info(t);
    return tr && tr->block_size > 1;
}

/* Rows of k elements are whole blocks of t (32, or 256 for the K-quants). */
static bool fits(gt_type t, int64_t k)
{
    return k % gt_type_info(t)->block_size == 0;
}

static oc_case *add(oc_list *l, gt_op op, gt_type type)
{
    if ((l->op_filter >= 0 && l->op_filter != (int)op) ||
        (l->type_filter >= 0 && l->type_filter != (int)type) || l->n >= MAX_CASES)
        return NULL;
    oc_case *c = &l->c[l->n++];
    memset(c, 0, sizeof *c);
    c->op = op;
    c->type = type;
    return c;
}

static oc_src S(gt_type type, int64_t ne0, int64_t ne1, int fill, int64_t param)
{
    return (oc_src){type, ne0, ne1, fill, param, {0}};
}

static void cases_get_rows(oc_list *l, const gt_type *types, int n_types)
{
    static const int64_t ks[] = {37, 64, 1024}, ids[] = {1, 7, 64};
    for (int ti = 0; ti < n_types; ti++)
        for (int ki = 0; ki < 3; ki++)
            for (int ii = 0; ii < 3; ii++) {
                const gt_type t = types[ti];
                if (!fits(t, ks[ki]))
                    continue;
                oc_case *c = add(l, GT_OP_GET_ROWS, t);
                if (!c)
                    continue;
                c->n_src = 2;
                c->src[0] = S(t, ks[ki], 100, FILL_WEIGHT, 0);
                c->src[1] = S(GT_TYPE_I32, 1, ids[ii], FILL_IDS, 100);
                c->out_ne0 = ks[ki], c->out_ne1 = ids[ii];
                c->threshold = 1e-12;
                snprintf(c->desc, sizeof c->desc, "k=%lld,rows=100,ids=%lld", (long long)ks[ki],
                         (long long)ids[ii]);
            }
}

/* One MUL_MAT case: t weights of k x n against m f32 activation rows. */
static void mul_mat_case(oc_list *l, gt_type t, int64_t k, int64_t n, int64_t m)
{
    oc_case *c = add(l, GT_OP_MUL_MAT, t);
    if (!c)
        return;
    c->n_src = 2;
    c->src[0] = S(t, k, n, FILL_WEIGHT, 0);
    c->src[1] = S(GT_TYPE_F32, k, m, FILL_GAUSS, 0);
    c->out_ne0 = n, c->out_ne1 = m;
    c->threshold = quantized(t) ? 5e-4 : 1e-8;
    snprintf(c->desc, sizeof c->desc, "k=%lld,n_out=%lld,batch=%lld", (long long)k, (long long)n,
             (long long)m);
}

/* later: the K-quant shapes (K = 512, 2048) are for the later types only. */
static void cases_mul_mat(oc_list *l, const gt_type *types, int n_types, bool later)
{
    static const int64_t shapes[][2] = {{32, 1},    {64, 33},   {96, 67},  {256, 1000},
                                        {576, 129}, {1536, 96}, {37, 19},  {100, 65},
                                        {512, 7},   {2048, 40}};
    static const int64_t batches[] = {1, 2, 7, 64, 512};
    const size_t n_shapes = sizeof shapes / sizeof shapes[0] - (later ? 0 : 2);
    for (int ti = 0; ti < n_types; ti++)
        for (size_t si = 0; si < n_shapes; si++)
            for (size_t bi = 0; bi < sizeof batches / sizeof batches[0]; bi++) {
                const gt_type t = types[ti];
                const int64_t k = shapes[si][0], n = shapes[si][1], m = batches[bi];
                if (!fits(t, k))
                    continue;
                mul_mat_case(l, t, k, n, m);
            }
}

/* Batches that are not a whole number of the integer GEMM's activation row
 * tiles (8 on avx512, 4 on avx2) nor n_out of its 16-row panels (cpu
 * backend, act=q8). Listed last, so the cases before keep their seeds. */
static void cases_mul_mat_ragged(oc_list *l)
{
    static const int64_t shapes[][2] = {{96, 67}, {576, 129}, {512, 7}, {1536, 40}};
    static const int64_t batches[] = {21, 37};
    for (int ti = 0; ti < N_OF(WEIGHT_TYPES) + N_OF(LATER_TYPES); ti++)
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
            for (size_t bi = 0; bi < sizeof batches / sizeof batches[0]; bi++) {
                const gt_type t = ti < N_OF(WEIGHT_TYPES) ? WEIGHT_TYPES[ti]
                                                          : LATER_TYPES[ti - N_OF(WEIGHT_TYPES)];
                const int64_t k = shapes[si][0], n = shapes[si][1], m = batches[bi];
                if (!fits(t, k))
                    continue;
                mul_mat_case(l, t, k, n, m);
            }
}

/* ADD, MUL, SILU_MUL, RMS_NORM: rows x cols, each also in place. */
static void cases_elementwise(oc_list *l)
{
    static const int64_t shapes[][2] = {{37, 1}, {576, 2}, {1000, 7}, {100, 64}};
    static const gt_op ops[] = {GT_OP_ADD, GT_OP_MUL, GT_OP_SILU_MUL, GT_OP_RMS_NORM};
    for (size_t oi = 0; oi < sizeof ops / sizeof ops[0]; oi++)
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
            for (int inplace = 0; inplace < 2; inplace++) {
                const int64_t n = shapes[si][0], rows = shapes[si][1];
                oc_case *c = add(l, ops[oi], GT_TYPE_F32);
                if (!c)
                    continue;
                c->src[0] = S(GT_TYPE_F32, n, rows, FILL_GAUSS, 0);
                c->n_src = ops[oi] == GT_OP_RMS_NORM ? 1 : 2;
                if (ops[oi] == GT_OP_MUL)
                    c->src[1] = S(GT_TYPE_F32, n, 1, FILL_NORMW, 0);
                else
                    c->src[1] = S(GT_TYPE_F32, n, rows, FILL_GAUSS, 0);
                c->out_ne0 = n, c->out_ne1 = rows;
                c->alias = inplace ? ALIAS_SRC0 : ALIAS_NONE;
                c->fp[0] = 1e-5f;
                c->threshold = ops[oi] == GT_OP_ADD || ops[oi] == GT_OP_MUL ? 1e-12 : 1e-10;
                snprintf(c->desc, sizeof c->desc, "n=%lld,rows=%lld%s", (long long)n,
                         (long long)rows, inplace ? ",in-place" : "");
            }
}

/* ADD with a one-row b (a bias, as qwen2's q/k/v biases): the row is added
 * to every row of a; one token, a batch, thread-split rows, each in place. */
static void cases_add_row(oc_list *l)
{
    static const int64_t shapes[][2] = {{37, 1}, {896, 2}, {1000, 7}, {128, 64}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (int inplace = 0; inplace < 2; inplace++) {
            const int64_t n = shapes[si][0], rows = shapes[si][1];
            oc_case *c = add(l, GT_OP_ADD, GT_TYPE_F32);
            if (!c)
                continue;
            c->n_src = 2;
            c->src[0] = S(GT_TYPE_F32, n, rows, FILL_GAUSS, 0);
            c->src[1] = S(GT_TYPE_F32, n, 1, FILL_GAUSS, 0);
            c->out_ne0 = n, c->out_ne1 = rows;
            c->alias = inplace ? ALIAS_SRC0 : ALIAS_NONE;
            c->threshold = 1e-12; /* one float rounding, as ADD */
            snprintf(c->desc, sizeof c->desc, "n=%lld,rows=%lld,b=one row%s", (long long)n,
                     (long long)rows, inplace ? ",in-place" : "");
        }
}

/* Inputs of mean square 1e-6 against eps = 1e-5: a backend that drops or
 * misplaces eps is off by a factor of ~3 here, not by 5e-6 as with unit data. */
static void cases_rms_small(oc_list *l)
{
    oc_case *c = add(l, GT_OP_RMS_NORM, GT_TYPE_F32);
    if (!c)
        return;
    c->n_src = 1;
    c->src[0] = S(GT_TYPE_F32, 576, 3, FILL_SMALL, 0);
    c->out_ne0 = 576, c->out_ne1 = 3;
    c->fp[0] = 1e-5f;
    c->threshold = 1e-10;
    snprintf(c->desc, sizeof c->desc, "n=576,rows=3,tiny inputs");
}

static void cases_rope(oc_list *l)
{
    /* n_heads, head_dim, rope_dim, pos0, mode, rows, base */
    static const struct { int nh, hd, rd, pos0, mode, rows; float base; } r[] = {
        {4, 64, 64, 0, 0, 1, 10000.0f},   {3, 64, 32, 17, 1, 7, 10000.0f},
        {9, 64, 64, 1000, 1, 64, 100000.0f}, {2, 48, 48, 5, 0, 2, 10000.0f},
        {3, 64, 64, 2040, 0, 7, 1000000.0f}, {1, 18, 10, 3, 1, 512, 10000.0f},
    };
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++)
        for (int inplace = 0; inplace < 2; inplace++) {
            oc_case *c = add(l, GT_OP_ROPE, GT_TYPE_F32);
            if (!c)
                continue;
            const int64_t n = (int64_t)r[i].nh * r[i].hd;
            c->n_src = 1;
            c->src[0] = S(GT_TYPE_F32, n, r[i].rows, FILL_GAUSS, 0);
            c->out_ne0 = n, c->out_ne1 = r[i].rows;
            c->alias = inplace ? ALIAS_SRC0 : ALIAS_NONE;
            const int32_t ip[6] = {r[i].nh, r[i].hd, r[i].rd, r[i].pos0, r[i].mode, 0};
            memcpy(c->ip, ip, sizeof ip);
            c->fp[0] = r[i].base;
            c->threshold = 1e-10;
            snprintf(c->desc, sizeof c->desc, "heads=%d,hd=%d,rot=%d,pos0=%d,%s,rows=%d,base=%g%s",
                     r[i].nh, r[i].hd, r[i].rd, r[i].pos0, r[i].mode ? "neox" : "norm", r[i].rows,
                     (double)r[i].base, inplace ? ",in-place" : "");
        }
}

static void cases_kv_store(oc_list *l)
{
    static const int64_t dims[] = {192, 37};
    static const int64_t at[][2] = {{0, 1}, {17, 7}, {100, 64}, {88, 512}};
    for (int di = 0; di < 2; di++)
        for (int ai = 0; ai < 4; ai++) {
            oc_case *c = add(l, GT_OP_KV_STORE, GT_TYPE_F32);
            if (!c)
                continue;
            const int64_t n_ctx = 600;
            c->n_src = 2;
            c->src[0] = S(GT_TYPE_F32, dims[di], at[ai][1], FILL_GAUSS, 0);
            c->src[1] = S(GT_TYPE_F32, dims[di], n_ctx, FILL_GAUSS, 0);
            c->out_ne0 = dims[di], c->out_ne1 = at[ai][1];
            c->alias = ALIAS_CACHE;
            c->ip[0] = (int32_t)at[ai][0];
            c->threshold = 0.0;
            snprintf(c->desc, sizeof c->desc, "kv_dim=%lld,pos0=%lld,rows=%lld,n_ctx=%lld",
                     (long long)dims[di], (long long)at[ai][0], (long long)at[ai][1],
                     (long long)n_ctx);
        }
}

/* What every attention case shares: q of rows x (nh * hd), the output
 * alike, GQA heads and the 1/sqrt(hd) scale, judged at 1e-8. */
static void attention_q(oc_case *c, int nh, int nkv, int hd, int64_t rows)
{
    c->n_src = 3;
    c->src[0] = S(GT_TYPE_F32, (int64_t)nh * hd, rows, FILL_GAUSS, 0);
    c->out_ne0 = (int64_t)nh * hd, c->out_ne1 = rows;
    const int32_t ip[6] = {nh, nkv, hd, 0, 0, 0};
    memcpy(c->ip, ip, sizeof ip);
    c->fp[0] = 1.0f / sqrtf((float)hd);
    c->threshold = 1e-8;
}

typedef struct attn_shape { int nh, nkv, hd, pos0, rows, window; } attn_shape;

/* One sequence's attention over caches of type cache (rows filled up to
 * pos0 + rows, NaN in the 5 after); desc: prefix, the shape, the window
 * when shown. */
static void attention_case(oc_list *l, const attn_shape *a, gt_type cache, const char *prefix,
                           bool show_window)
{
    oc_case *c = add(l, GT_OP_ATTENTION, cache);
    if (!c)
        return;
    attention_q(c, a->nh, a->nkv, a->hd, a->rows);
    const int64_t kvd = (int64_t)a->nkv * a->hd, filled = a->pos0 + a->rows, n_ctx = filled + 5;
    c->src[1] = S(cache, kvd, n_ctx, FILL_CACHE, filled);
    c->src[2] = c->src[1];
    c->ip[3] = a->pos0;
    c->ip[4] = a->window;
    int len = snprintf(c->desc, sizeof c->desc, "%sheads=%d,kv_heads=%d,hd=%d,pos0=%d,rows=%d",
                       prefix, a->nh, a->nkv, a->hd, a->pos0, a->rows);
    if (show_window && len > 0 && (size_t)len < sizeof c->desc)
        snprintf(c->desc + len, sizeof c->desc - (size_t)len, ",window=%d", a->window);
}

static void cases_attention(oc_list *l)
{
    static const attn_shape a[] = {
        {4, 4, 64, 0, 1, 0},  {9, 3, 64, 0, 1, 0},  {9, 3, 64, 100, 1, 0}, {8, 2, 64, 5, 7, 0},
        {4, 2, 17, 0, 64, 0}, {6, 2, 40, 30, 64, 0}, {9, 3, 64, 0, 512, 0}, {4, 1, 64, 200, 16, 0},
        {2, 2, 32, 0, 2, 0},  {3, 3, 64, 37, 100, 0},
    };
    for (size_t i = 0; i < sizeof a / sizeof a[0]; i++)
        attention_case(l, &a[i], GT_TYPE_F32, "", false);
}

/* Gemma 3's ops, appended after every older case (their inputs unchanged):
 * GELU_MUL and SCALE elementwise (also in place), and windowed attention
 * (the sliding window of the local layers) where the window is shorter
 * than, equal to and longer than what the rows see. */
static void cases_gemma(oc_list *l)
{
    static const int64_t shapes[][2] = {{37, 1}, {576, 2}, {2048, 7}, {100, 64}};
    for (int op = 0; op < 2; op++)
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
            for (int inplace = 0; inplace < 2; inplace++) {
                const int64_t n = shapes[si][0], rows = shapes[si][1];
                oc_case *c = add(l, op ? GT_OP_SCALE : GT_OP_GELU_MUL, GT_TYPE_F32);
                if (!c)
                    continue;
                c->n_src = op ? 1 : 2;
                c->src[0] = S(GT_TYPE_F32, n, rows, FILL_GAUSS, 0);
                c->src[1] = S(GT_TYPE_F32, n, rows, FILL_GAUSS, 0);
                c->out_ne0 = n, c->out_ne1 = rows;
                c->alias = inplace ? ALIAS_SRC0 : ALIAS_NONE;
                c->fp[0] = 25.298221f; /* sqrt(640), Gemma 3 270M's embedding scale */
                c->threshold = op ? 1e-12 : 1e-10;
                snprintf(c->desc, sizeof c->desc, "n=%lld,rows=%lld%s", (long long)n,
                         (long long)rows, inplace ? ",in-place" : "");
            }
    static const attn_shape a[] = {
        {4, 1, 64, 600, 1, 512}, {4, 1, 64, 40, 16, 8},  {4, 1, 64, 0, 100, 32},
        {2, 2, 32, 3, 2, 512},   {9, 3, 64, 90, 64, 48}, {4, 1, 256, 10, 7, 1},
    };
    for (size_t i = 0; i < sizeof a / sizeof a[0]; i++)
        attention_case(l, &a[i], GT_TYPE_F32, "", true);
}

/* Several sequences in one graph (gt_session_eval_seqs): ragged runs of q
 * rows, each attending its own slot of one K and V cache at its own
 * position, with and without a sliding window; slots are NaN past what
 * each holds, so reading a neighbour's rows or past a slot shows. */
static void cases_sequences(oc_list *l)
{
    static const struct { int nh, nkv, hd, n; int32_t rows[4], pos0[4], window[4]; } a[] = {
        {4, 2, 32, 4, {1, 1, 1, 1}, {0, 5, 17, 40}, {0, 0, 0, 0}},
        {9, 3, 64, 3, {7, 1, 20}, {0, 30, 3}, {0, 0, 0}},
        {4, 1, 64, 4, {5, 2, 1, 9}, {10, 0, 60, 33}, {8, 8, 32, 0}},
        {2, 2, 32, 2, {33, 4}, {0, 61}, {16, 0}},
    };
    for (size_t i = 0; i < sizeof a / sizeof a[0]; i++) {
        oc_case *c = add(l, GT_OP_ATTENTION, GT_TYPE_F32);
        if (!c)
            continue;
        const int64_t kvd = (int64_t)a[i].nkv * a[i].hd, slot = 72;
        int64_t rows = 0;
        c->n_seq = a[i].n;
        c->src[1] = S(GT_TYPE_F32, kvd, slot * a[i].n, FILL_SLOTS, slot);
        for (int j = 0; j < a[i].n; j++) {
            rows += a[i].rows[j];
            c->seq_rows[j] = a[i].rows[j];
            c->seq_pos0[j] = a[i].pos0[j];
            c->seq_window[j] = a[i].window[j];
            c->src[1].filled[j] = a[i].pos0[j] + a[i].rows[j];
        }
        attention_q(c, a[i].nh, a[i].nkv, a[i].hd, rows);
        c->src[2] = c->src[1];
        snprintf(c->desc, sizeof c->desc, "heads=%d,kv_heads=%d,hd=%d,sequences=%d,rows=%lld",
                 a[i].nh, a[i].nkv, a[i].hd, a[i].n, (long long)rows);
    }
}

/* F16 K/V caches (kv_type f16), appended after every older case: KV_STORE
 * rounding F32 rows into an F16 cache, and ATTENTION reading F16 K and V
 * (with GQA, a window, several sequences' shapes, an odd head size). The
 * case's type is f16, what supports() is asked. */
static void cases_kv_f16(oc_list *l)
{
    static const int64_t at[][3] = {{192, 0, 1}, {192, 17, 7}, {37, 100, 64}, {64, 88, 512}};
    for (int ai = 0; ai < 4; ai++) {
        oc_case *c = add(l, GT_OP_KV_STORE, GT_TYPE_F16);
        if (!c)
            continue;
        const int64_t n_ctx = 600, kvd = at[ai][0];
        c->n_src = 2;
        c->src[0] = S(GT_TYPE_F32, kvd, at[ai][2], FILL_GAUSS, 0);
        c->src[1] = S(GT_TYPE_F16, kvd, n_ctx, FILL_GAUSS, 0);
        c->out_ne0 = kvd, c->out_ne1 = at[ai][2];
        c->alias = ALIAS_CACHE;
        c->ip[0] = (int32_t)at[ai][1];
        c->threshold = 0.0;
        snprintf(c->desc, sizeof c->desc, "f16 cache,kv_dim=%lld,pos0=%lld,rows=%lld,n_ctx=%lld",
                 (long long)kvd, (long long)at[ai][1], (long long)at[ai][2], (long long)n_ctx);
    }
    static const attn_shape a[] = {
        {4, 4, 64, 0, 1, 0},   {9, 3, 64, 100, 1, 0}, {8, 2, 64, 5, 7, 0}, {4, 2, 17, 0, 64, 0},
        {9, 3, 64, 0, 300, 0}, {4, 1, 64, 40, 16, 8}, {4, 1, 256, 10, 7, 1}, {8, 4, 8, 30, 37, 0},
    };
    for (size_t i = 0; i < sizeof a / sizeof a[0]; i++)
        attention_case(l, &a[i], GT_TYPE_F16, "f16 caches,", true);
}

/* Mixture-of-experts ops (qwen3moe), appended after every older case:
 * router top-k and weights over 8..128 experts, the gather-by-expert
 * matmul in every weight type (shared input rows as for gate/up, one row
 * per slot as for down), and the weighted sum over the slots. */
static void cases_moe(oc_list *l)
{
    static const int64_t routers[][3] = {{8, 2, 1}, {8, 2, 33}, {128, 8, 1}, {128, 8, 64}};
    for (int op = 0; op < 2; op++)
        for (int ri = 0; ri < 4; ri++) {
            const int64_t n_exp = routers[ri][0], k = routers[ri][1], rows = routers[ri][2];
            for (int norm = 0; norm < (op ? 2 : 1); norm++) {
                oc_case *c = add(l, op ? GT_OP_MOE_WEIGHTS : GT_OP_TOPK, GT_TYPE_F32);
                if (!c)
                    continue;
                c->n_src = op ? 2 : 1;
                c->src[0] = S(GT_TYPE_F32, n_exp, rows, FILL_GAUSS, 0);
                c->src[1] = S(GT_TYPE_I32, k, rows, FILL_IDS, n_exp);
                c->out_ne0 = k, c->out_ne1 = rows;
                c->ip[0] = norm;
                c->threshold = op ? 1e-10 : 0.0; /* ids: exact */
                snprintf(c->desc, sizeof c->desc, "experts=%lld,k=%lld,rows=%lld%s",
                         (long long)n_exp, (long long)k, (long long)rows,
                         op ? (norm ? ",renormalized" : ",softmax") : "");
            }
        }
    static const int64_t mm[][5] = {/* K, n_out, n_exp, k, rows */
                                    {64, 32, 8, 2, 1}, {256, 96, 8, 2, 7}, {32, 64, 8, 2, 33},
                                    {512, 48, 16, 4, 5}};
    for (int pass = 0; pass < 2; pass++) {
        const gt_type *types = pass ? LATER_TYPES : WEIGHT_TYPES;
        for (int ti = 0; ti < (pass ? N_OF(LATER_TYPES) : N_OF(WEIGHT_TYPES)); ti++)
            for (int mi = 0; mi < 4; mi++)
                for (int per_slot = 0; per_slot < 2; per_slot++) {
                    const gt_type t = types[ti];
                    const int64_t K = mm[mi][0], n_out = mm[mi][1], n_exp = mm[mi][2];
                    const int64_t k = mm[mi][3], rows = mm[mi][4];
                    if (!fits(t, K))
                        continue;
                    oc_case *c = add(l, GT_OP_MUL_MAT_ID, t);
                    if (!c)
                        continue;
                    c->n_src = 3;
                    c->src[0] = S(t, K, n_exp * n_out, FILL_WEIGHT, 0);
                    c->src[1] = S(GT_TYPE_F32, K, per_slot ? rows * k : rows, FILL_GAUSS, 0);
                    c->src[2] = S(GT_TYPE_I32, k, rows, FILL_IDS, n_exp);
                    c->out_ne0 = n_out, c->out_ne1 = rows * k;
                    c->ip[0] = (int32_t)n_out, c->ip[1] = per_slot;
                    c->threshold = quantized(t) ? 5e-4 : 1e-8;
                    snprintf(c->desc, sizeof c->desc, "k=%lld,n_out=%lld,experts=%lld,used=%lld,"
                             "rows=%lld%s", (long long)K, (long long)n_out, (long long)n_exp,
                             (long long)k, (long long)rows, per_slot ? ",per-slot" : "");
                }
    }
    static const int64_t sums[][3] = {{64, 2, 1}, {2048, 8, 1}, {576, 8, 33}};
    for (int si = 0; si < 3; si++) {
        oc_case *c = add(l, GT_OP_MOE_SUM, GT_TYPE_F32);
        if (!c)
            continue;
        const int64_t n = sums[si][0], k = sums[si][1], rows = sums[si][2];
        c->n_src = 2;
        c->src[0] = S(GT_TYPE_F32, n, rows * k, FILL_GAUSS, 0);
        c->src[1] = S(GT_TYPE_F32, k, rows, FILL_GAUSS, 0);
        c->out_ne0 = n, c->out_ne1 = rows;
        c->threshold = 1e-10;
        snprintf(c->desc, sizeof c->desc, "n=%lld,k=%lld,rows=%lld", (long long)n, (long long)k,
                 (long long)rows);
    }
}

/* ROPE with frequency factors (Llama 3's rope_freqs, Phi-3's long/short
 * factors), a linear freq_scale and an attention factor (Phi-3's long-rope
 * magnitude), appended after every older case; the same 1e-10 as ROPE: the
 * factors change only the angle and one more multiply. */
static void cases_rope_factors(oc_list *l)
{
    /* n_heads, head_dim, rope_dim, pos0, mode, rows, base, freq_scale, attn_factor */
    static const struct { int nh, hd, rd, pos0, mode, rows; float base, fs, af; } r[] = {
        {4, 64, 64, 0, 0, 7, 500000.0f, 0.0f, 0.0f},     {8, 64, 64, 1000, 0, 1, 500000.0f, 0.0f, 0.0f},
        {3, 96, 96, 17, 1, 64, 10000.0f, 0.0f, 1.19f},   {2, 96, 64, 3, 1, 5, 10000.0f, 0.25f, 0.0f},
        {5, 32, 32, 2040, 0, 3, 10000.0f, 0.5f, 1.07f},
    };
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++)
        for (int inplace = 0; inplace < 2; inplace++) {
            oc_case *c = add(l, GT_OP_ROPE, GT_TYPE_F32);
            if (!c)
                continue;
            const int64_t n = (int64_t)r[i].nh * r[i].hd;
            c->n_src = 2;
            c->src[0] = S(GT_TYPE_F32, n, r[i].rows, FILL_GAUSS, 0);
            c->src[1] = S(GT_TYPE_F32, r[i].rd / 2, 1, FILL_FACTORS, 0);
            c->out_ne0 = n, c->out_ne1 = r[i].rows;
            c->alias = inplace ? ALIAS_SRC0 : ALIAS_NONE;
            const int32_t ip[6] = {r[i].nh, r[i].hd, r[i].rd, r[i].pos0, r[i].mode, 0};
            memcpy(c->ip, ip, sizeof ip);
            c->fp[0] = r[i].base, c->fp[1] = r[i].fs, c->fp[2] = r[i].af;
            c->threshold = 1e-10;
            snprintf(c->desc, sizeof c->desc,
                     "factors,heads=%d,hd=%d,rot=%d,pos0=%d,%s,rows=%d,scale=%g,attn=%g%s", r[i].nh,
                     r[i].hd, r[i].rd, r[i].pos0, r[i].mode ? "neox" : "norm", r[i].rows,
                     (double)r[i].fs, (double)r[i].af, inplace ? ",in-place" : "");
        }
}

/* ---- inputs ----------------------------------------------------------------- */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double uniform(uint64_t *s) { return ((double)(splitmix(s) >> 11) + 0.5) / 9007199254740992.0; }

static float gauss(uint64_t *s)
{
    return (float)(sqrt(-2.0 * log(uniform(s))) * cos(6.283185307179586 * uniform(s)));
}

static size_t src_bytes(const oc_src *s) { return gt_row_size(s->type, s->ne0) * (size_t)s->ne1; }

/* Fills one input; returns NULL when out of memory. */
static void *make_input(const oc_src *s, uint64_t seed)
{
    const size_t bytes = src_bytes(s);
    void *p = malloc(bytes ? bytes : 1);
    if (!p)
        return NULL;
    const int64_t n = s->ne0 * s->ne1;
    if (s->fill == FILL_IDS) {
        int32_t *ids = p;
        for (int64_t i = 0; i < n; i++)
            ids[i] = (int32_t)(splitmix(&seed) % (uint64_t)s->param);
        return p;
    }
    float *f = s->type == GT_TYPE_F32 ? p : malloc(sizeof(float) * (size_t)n);
    if (!f) {
        free(p);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++) {
        const int64_t row = i / s->ne0;
        f[i] = s->fill == FILL_NORMW ? 1.0f + 0.25f * gauss(&seed)
             : s->fill == FILL_FACTORS ? (float)(1.0 + 7.0 * uniform(&seed)) /* Llama 3's 1..8 */
             : s->fill == FILL_SMALL ? 1e-3f * gauss(&seed)
             : s->fill == FILL_CACHE && row >= s->param ? NAN
             : s->fill == FILL_SLOTS && row % s->param >= s->filled[row / s->param] ? NAN
                                                        : gauss(&seed);
    }
    if (f != p) {
        const size_t rb = gt_row_size(s->type, s->ne0);
        for (int64_t r = 0; r < s->ne1; r++)
            gt_quantize_row(s->type, f + r * s->ne0, (char *)p + (size_t)r * rb, s->ne0);
        free(f);
    }
    return p;
}

/* ---- running one case on one backend ------------------------------------------ */

typedef struct oc_run {
    gt_buffer *buf[4];   /* src0..2, output (NULL when aliased) */
    unsigned char *wrap; /* host bytes behind a buffer_from_host weight */
    size_t size[4];
} oc_run;

static void fill_guards(unsigned char *p, size_t body)
{
    for (size_t i = 0; i < GUARD; i++) {
        p[i] = GUARD_BYTE(i);
        p[GUARD + body + i] = GUARD_BYTE(i);
    }
}

static bool guards_ok(const unsigned char *p, size_t body)
{
    for (size_t i = 0; i < GUARD; i++)
        if (p[i] != GUARD_BYTE(i) || p[GUARD + body + i] != GUARD_BYTE(i))
            return false;
    return true;
}

static void run_free(gt_backend *be, oc_run *r)
{
    for (int i = 0; i < 4; i++)
        if (r->buf[i])
            be->iface->buffer_free(r->buf[i]);
    free(r->wrap);
    memset(r, 0, sizeof *r);
}

/* A buffer of GUARD + body + GUARD bytes holding `body` (NULL: NaN bytes). */
static int make_buffer(gt_backend *be, const void *body, size_t n, bool wrap, oc_run *r, int slot,
                       gt_err *err)
{
    const size_t total = n + 2 * GUARD;
    unsigned char *stage = malloc(total);
    if (!stage)
        return gt_err_set(err, "out of memory staging %zu bytes", total);
    fill_guards(stage, n);
    if (body)
        memcpy(stage + GUARD, body, n);
    else
        memset(stage + GUARD, 0xFF, n); /* all-ones floats are NaN */
    r->size[slot] = total;
    if (wrap) {
        r->wrap = stage;
        return be->iface->buffer_from_host(be, stage, total, &r->buf[slot], err);
    }
    int rc = be->iface->buffer_alloc(be, total, &r->buf[slot], err);
    if (rc == 0)
        rc = be->iface->upload(r->buf[slot], 0, stage, total, err);
    free(stage);
    return rc;
}

/* 0: ran, *out holds the compared floats; 1: failed (why); -1: error. */
static int run_case(gt_backend *be, const oc_case *c, void *const in[3], float **out,
                    size_t *out_n, char *why, size_t why_len, gt_err *err)
{
    oc_run r = {0};
    gt_tensor src[3], t;
    unsigned char *back = NULL;
    int rc = -1;
    *out = NULL;
    memset(src, 0, sizeof src);
    memset(&t, 0, sizeof t);
    for (int i = 0; i < c->n_src; i++) {
        const bool wrap = (i == 0 && (c->op == GT_OP_MUL_MAT || c->op == GT_OP_GET_ROWS ||
                                      c->op == GT_OP_MUL_MAT_ID)) ||
                          (i == 1 && c->op == GT_OP_ROPE); /* factors are a weight */
        if (make_buffer(be, in[i], src_bytes(&c->src[i]), wrap, &r, i, err) != 0)
            goto done;
        snprintf(src[i].name, sizeof src[i].name, "src%d", i);
        src[i].type = c->src[i].type;
        src[i].ne[0] = c->src[i].ne0, src[i].ne[1] = c->src[i].ne1;
        src[i].buf = r.buf[i];
        src[i].offset = GUARD;
        t.src[i] = &src[i];
    }
    snprintf(t.name, sizeof t.name, "out");
    t.type = c->op == GT_OP_TOPK       ? GT_TYPE_I32
           : c->op == GT_OP_KV_STORE ? c->src[1].type /* the rows written of the cache */
                                     : GT_TYPE_F32;
    t.ne[0] = c->out_ne0, t.ne[1] = c->out_ne1;
    t.op = c->op;
    memcpy(t.iparams, c->ip, sizeof t.iparams);
    memcpy(t.fparams, c->fp, sizeof t.fparams);
    if (c->alias == ALIAS_SRC0) {
        t.buf = r.buf[0], t.offset = GUARD;
    } else if (c->alias == ALIAS_CACHE) {
        t.buf = r.buf[1];
        t.offset = GUARD + (size_t)c->ip[0] * gt_row_size(c->src[1].type, c->src[1].ne0);
    } else {
        if (make_buffer(be, NULL, gt_tensor_bytes(&t), false, &r, 3, err) != 0)
            goto done;
        t.buf = r.buf[3], t.offset = GUARD;
    }
    gt_tensor *node = &t;
    gt_graph g = {&node, 1};
    /* Several sequences: one ATTENTION per run, on views of q, the caches
     * and the output. */
    gt_tensor seq[4][4], *seq_nodes[4];
    for (int j = 0, r0 = 0; j < c->n_seq; r0 += c->seq_rows[j], j++) {
        for (int k = 0; k < 4; k++) {
            gt_tensor *v = &seq[j][k], *whole = k < 3 ? &src[k] : &t;
            *v = *whole;
            const int64_t first = k == 0 || k == 3 ? r0 : (int64_t)j * c->src[1].param;
            v->ne[1] = k == 0 || k == 3 ? c->seq_rows[j] : c->src[1].param;
            v->offset += (size_t)first * gt_tensor_row_bytes(whole);
        }
        for (int k = 0; k < 3; k++)
            seq[j][3].src[k] = &seq[j][k];
        seq[j][3].iparams[3] = c->seq_pos0[j];
        seq[j][3].iparams[4] = c->seq_window[j];
        seq_nodes[j] = &seq[j][3];
    }
    if (c->n_seq > 0)
        g = (gt_graph){seq_nodes, c->n_seq};
    gt_err cerr = {{0}};
    if (be->iface->compute(be, &g, &cerr) != 0) {
        snprintf(why, why_len, "compute failed: %s", cerr.msg);
        rc = 1;
        goto done;
    }
    /* Every buffer: guards intact; pure inputs unchanged. */
    const int result_slot = c->alias == ALIAS_SRC0 ? 0 : c->alias == ALIAS_CACHE ? 1 : 3;
    for (int i = 0; i < 4; i++) {
        if (!r.buf[i])
            continue;
        free(back);
        back = malloc(r.size[i]);
        if (!back) {
            gt_err_set(err, "out of memory");
            goto done;
        }
        if (be->iface->download(r.buf[i], 0, back, r.size[i], err) != 0)
            goto done;
        const size_t body = r.size[i] - 2 * GUARD;
        if (!guards_ok(back, body)) {
            snprintf(why, why_len, "guard bytes around %s overwritten", i == 3 ? "the output" : src[i].name);
            rc = 1;
            goto done;
        }
        if (i != result_slot && memcmp(back + GUARD, in[i], body) != 0) {
            snprintf(why, why_len, "input %s was modified", src[i].name);
            rc = 1;
            goto done;
        }
        if (i == result_slot && i == 1 && src[1].type == GT_TYPE_F16) {
            /* an F16 cache, compared as the values it holds */
            *out_n = body / sizeof(uint16_t);
            *out = malloc(*out_n ? *out_n * sizeof(float) : 1);
            if (!*out) {
                gt_err_set(err, "out of memory");
                goto done;
            }
            for (size_t e = 0; e < *out_n; e++) {
                uint16_t h;
                memcpy(&h, back + GUARD + e * sizeof h, sizeof h);
                (*out)[e] = gt_f16_to_f32(h);
            }
        } else if (i == result_slot) {
            *out_n = body / sizeof(float);
            *out = malloc(body ? body : 1);
            if (!*out) {
                gt_err_set(err, "out of memory");
                goto done;
            }
            memcpy(*out, back + GUARD, body);
            if (t.type == GT_TYPE_I32) /* ids, compared as the numbers they are */
                for (size_t e = 0; e < *out_n; e++)
                    (*out)[e] = (float)((const int32_t *)(back + GUARD))[e];
        }
    }
    rc = 0;
done:
    free(back);
    run_free(be, &r);
    return rc;
}

/* ---- judging ------------------------------------------------------------------- */

/* A MUL_MAT case's sum over outputs of sum_k (w*x)^2 (the header: the
 * scale its activations' rounding error has), from the weights as the
 * reference sees them (dequantized). */
static double products_scale(const oc_case *c, const void *w, const float *x)
{
    const int64_t k = c->src[0].ne0, n = c->src[0].ne1, m = c->src[1].ne1;
    const size_t rb = gt_row_size(c->src[0].type, k);
    float *row = malloc(sizeof(float) * (size_t)k);
    if (!row)
        return 0.0;
    double s = 0.0;
    for (int64_t r = 0; r < n; r++) {
        gt_dequantize_row(c->src[0].type, (const char *)w + (size_t)r * rb, row, k);
        for (int64_t i = 0; i < m; i++)
            for (int64_t e = 0; e < k; e++) {
                const double p = (double)row[e] * x[i * k + e];
                s += p * p;
            }
    }
    free(row);
    return s;
}

static int judge(const oc_case *c, gt_backend *target, gt_backend *ref, uint64_t seed,
                 char *line, size_t line_len, double sums[2], gt_err *err)
{
    void *in[3] = {NULL, NULL, NULL};
    float *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    char why[1200] = "";
    int verdict = -1; /* -1 error, 0 ok, 1 fail */
    for (int i = 0; i < c->n_src; i++) {
        uint64_t s = seed * 0x100000001B3ull + (uint64_t)i * 0x9E37u + 1;
        in[i] = make_input(&c->src[i], s);
        if (!in[i]) {
            gt_err_set(err, "out of memory generating inputs");
            goto done;
        }
    }
    gt_err rerr = {{0}};
    char rwhy[1200] = "";
    const int rr = run_case(ref, c, in, &b, &nb, rwhy, sizeof rwhy, &rerr);
    if (rr != 0) {
        gt_err_set(err, "reference backend on %s(%s): %s", gt_op_name(c->op), c->desc,
                   rr < 0 ? rerr.msg : rwhy);
        goto done;
    }
    const int tr = run_case(target, c, in, &a, &na, why, sizeof why, err);
    if (tr < 0)
        goto done;
    if (tr == 1) {
        snprintf(line, line_len, "FAIL (%s)", why);
        verdict = 1;
        goto done;
    }
    if (na != nb) {
        snprintf(line, line_len, "FAIL (%zu values vs %zu)", na, nb);
        verdict = 1;
        goto done;
    }
    /* Caches hold NaN rows on purpose; compare only what the reference has finite. */
    double se = 0.0, sb = 0.0;
    for (size_t i = 0; i < na; i++) {
        if (!isfinite(b[i]))
            continue;
        if (!isfinite(a[i])) {
            snprintf(line, line_len, "FAIL (non-finite %g at element %zu, reference %g)", (double)a[i], i,
                     (double)b[i]);
            verdict = 1;
            goto done;
        }
        const double d = (double)a[i] - b[i];
        se += d * d;
        sb += (double)b[i] * b[i];
    }
    if (c->op == GT_OP_MUL_MAT && quantized(c->src[0].type)) {
        const double sp = products_scale(c, in[0], in[1]);
        sb = sp > sb ? sp : sb;
    }
    const double nmse = sb > 0 ? se / sb : se;
    sums[0] = se, sums[1] = sb;
    if (nmse <= c->threshold) {
        snprintf(line, line_len, "OK %.2e", nmse);
        verdict = 0;
    } else {
        snprintf(line, line_len, "FAIL (nmse %.3e vs threshold %.1e)", nmse, c->threshold);
        verdict = 1;
    }
done:
    for (int i = 0; i < 3; i++)
        free(in[i]);
    free(a);
    free(b);
    return verdict;
}

int opcheck_run(gt_backend *target, gt_backend *ref, const opcheck_opts *o,
                opcheck_counts *counts, gt_err *err)
{
    oc_list l = {calloc(MAX_CASES, sizeof(oc_case)), 0, o->op, o->type};
    if (!l.c)
        return gt_err_set(err, "out of memory");
    cases_get_rows(&l, WEIGHT_TYPES, N_OF(WEIGHT_TYPES));
    cases_elementwise(&l);
    cases_add_row(&l);
    cases_rms_small(&l);
    cases_mul_mat(&l, WEIGHT_TYPES, N_OF(WEIGHT_TYPES), false);
    cases_rope(&l);
    cases_kv_store(&l);
    cases_attention(&l);
    cases_get_rows(&l, LATER_TYPES, N_OF(LATER_TYPES));
    cases_mul_mat(&l, LATER_TYPES, N_OF(LATER_TYPES), true);
    cases_gemma(&l);
    cases_moe(&l);
    cases_rope_factors(&l);
    cases_sequences(&l);
    cases_kv_f16(&l);
    cases_mul_mat_ragged(&l);
    int rc = 0;
    for (int i = 0; i < l.n; i++) {
        const oc_case *c = &l.c[i];
        char line[1400], why[512] = "";
        int verdict;
        if (!target->iface->supports(target, c->op, c->type, why, sizeof why)) {
            snprintf(line, sizeof line, "unsupported (%s)", why[0] ? why : "no reason given");
            counts->unsupported++;
            verdict = 2;
        } else if (!ref->iface->supports(ref, c->op, c->type, why, sizeof why)) {
            snprintf(line, sizeof line, "unsupported by the reference (%s)", why);
            counts->unsupported++;
            verdict = 2;
        } else {
            double sums[2] = {0.0, 0.0};
            verdict = judge(c, target, ref, o->seed * 7919u + (uint64_t)i, line, sizeof line,
                            sums, err);
            if (verdict < 0) {
                rc = -1;
                break;
            }
            if (verdict == 0)
                counts->sum_se += sums[0], counts->sum_ref += sums[1];
            if (verdict == 0)
                counts->ok++;
            else
                counts->fail++;
        }
        if (o->out && (!o->failures_only || verdict == 1)) {
            char name[160];
            snprintf(name, sizeof name, "%s(%s)", gt_op_name(c->op), c->desc);
            fprintf(o->out, "  %-58s %-5s %s\n", name, gt_type_name(c->type), line);
            fflush(o->out);
        }
    }
    free(l.c);
    return rc;
}

double opcheck_threshold(gt_op op, gt_type weight)
{
    switch (op) {
    case GT_OP_KV_STORE:
    case GT_OP_TOPK:
        return 0.0;
    case GT_OP_GET_ROWS:
    case GT_OP_ADD:
    case GT_OP_MUL:
    case GT_OP_SCALE:
        return 1e-12;
    case GT_OP_ATTENTION:
        return 1e-8;
    case GT_OP_MUL_MAT:
    case GT_OP_MUL_MAT_ID:
        return quantized(weight) ? 5e-4 : 1e-8;
    default: /* RMS_NORM, ROPE, SILU_MUL, GELU_MUL, MOE_WEIGHTS, MOE_SUM */
        return 1e-10;
    }
}
