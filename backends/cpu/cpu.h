/* cpu.h: private interface between the files of the fast CPU backend.
 *
 * The backend is split by concept:
 *   cpu_backend.c    registration, probe, init, supports, graph validation
 *                    and the per-graph driver that walks nodes on all threads
 *   cpu_threads.c    the thread pool: one wake-up per graph, a spin-then-wait
 *                    barrier between nodes
 *   cpu_kernels_*.c  one kernel table per ISA (scalar, avx2, avx512), chosen
 *                    once at init by runtime CPU feature detection
 *   cpu_kquants_*.c  the K-quant (Q2_K..Q6_K) kernels of the avx2 and
 *                    avx512 tables; cpu_x86.h the helpers they share
 *   cpu_matmul.c     MUL_MAT: quantized dot products for small batches,
 *                    dequantized tiles + BLAS sgemm for large ones
 *   cpu_igemm.c      MUL_MAT of large batches with act=q8: weight panels
 *                    repacked on the fly, 8-bit integer GEMM; the repacking,
 *                    the driver and the scalar kernel (cpu_igemm_avx2.c,
 *                    cpu_igemm_avx512.c: the SIMD kernels)
 *   cpu_act8.c       the activations quantized to 8-bit blocks, shared by
 *                    every act=q8 path
 *   cpu_packed.c     MUL_MAT of few rows with act=q8 on Q4_0/Q8_0 weights
 *                    mapped from the file: 8-row panels repacked once and
 *                    kept, the cache, the driver and the scalar kernels
 *                    (cpu_packed_simd.h: the SIMD kernels, compiled into
 *                    the avx2 and avx512 tables)
 *   cpu_attention.c  ATTENTION, parallel over heads (and query blocks)
 *   cpu_ops.c        the cheap ops: GET_ROWS, RMS_NORM, ADD, MUL, ROPE,
 *                    KV_STORE, SILU_MUL
 *   cpu_blas.c       finding cblas_sgemm with dlopen, naming the library
 *
 * Every node kernel has the signature of gt_cpu_node_fn: it is called on all
 * n threads with its thread index; it may call gt_cpu_barrier() inside, as
 * long as every thread calls it the same number of times. Validation happens
 * before any thread starts, so node kernels cannot fail. */
#ifndef GT_CPU_H
#define GT_CPU_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gt/backend.h"
#include "cpu_blas.h"

/* ---- kernel tables (cpu_kernels_*.c) ------------------------------------ */

/* Two dot paths for quantized weights, chosen at init by GT_CPU_ACT
 * (cpu_backend.c):
 *   f32 (default)  fdot[type]: weights widened in registers and multiplied
 *                  with the F32 activations; as accurate as the BLAS path.
 *                  Every weight type has one.
 *   q8             qdot[type]: activations quantized as below, integer dots.
 *                  Q8_0/Q4_0/Q4_1/Q5_0/Q4_K/Q6_K have one; the other types
 *                  take fdot on this path too (cpu_matmul.c, act_qdot).
 *
 * For qdot, activations are quantized per row to blocks of 32 int8, with
 * the numbers llama.cpp's Q8_0 and Q8_1 blocks hold (kept as separate
 * arrays so the int8 part is contiguous and aligned; gt_cpu_act8 below):
 * q = round-to-even(x * 127/amax), and the block scale as an F16 value, so
 * the integer products are llama.cpp's to the bit and act=q8 reproduces
 * its numbers rather than a second, different 8-bit rounding
 * (cpu_act8.c, gt_cpu_quantize_rows). The quant kernel writes q and the
 * F32 scale amax/127 (NaN for a block holding NaN or inf); the shared code
 * derives the rest. Sums let Q4_0 (offset 8) and Q4_1 (offset m) weights
 * use unsigned nibbles directly: dot = sum_b dw*(d*sum(qw*qa)) +
 * offset_b * sums[b], where sums is s for Q4_0 and s1 (Q8_1's rounded
 * sum) for Q4_1 and Q5_1. */
#define GT_CPU_QK 32
#define GT_CPU_GELU_K 0.7978845608028654f /* sqrt(2/pi) */

typedef void (*gt_cpu_quant_fn)(const float *x, int64_t n, int8_t *q, float *d);
/* Dot of one quantized weight row (nb blocks) with one quantized activation row. */
typedef float (*gt_cpu_qdot_fn)(const void *w, const int8_t *q, const float *d, const float *s,
                                int64_t nb);
/* qdot of one weight row with 4 activation rows at once (out[j] = qdot(w,
 * q[j], d[j], s[j], nb), the same bytes, as fdot4 below). */
typedef void (*gt_cpu_qdot4_fn)(const void *w, const int8_t *const q[4], const float *const d[4],
                                const float *const s[4], int64_t nb, float out[4]);
/* Dot of one weight row of n elements with an F32 row: F32/F16/BF16, and
 * the quantized types dequantized in registers (n a multiple of the
 * type's block: 32, or 256 for the K-quants). */
typedef float (*gt_cpu_fdot_fn)(const void *w, const float *x, int64_t n);
/* fdot of one weight row with 4 F32 rows at once (out[j] = fdot(w, x[j],
 * n), the same bytes: the same operations per row in the same order, the
 * weights widened once instead of four times). Decode of several sequences
 * (gt_session_eval_seqs) reads each weight once for all of them. */
typedef void (*gt_cpu_fdot4_fn)(const void *w, const float *const x[4], int64_t n, float out[4]);
typedef void (*gt_cpu_dequant_fn)(const void *src, float *dst, int64_t n);

/* Integer GEMM (cpu_igemm.c). A panel block is 16 weight rows x one
 * 32-element block column, repacked so that one 64-byte load holds 4
 * consecutive weights of each of the 16 rows (VNNI's operand shape):
 *   q[g][r][j] = weight 4g+j of row r, plus 128 (so every type's weights
 *                are unsigned bytes; the kernels take the 128 off again)
 *   w(r, e)    = d[r] * (q - 128) - m[r]  (m: the K-quants' mins, minus
 *                Q4_1/Q5_1's offsets, 0 for the types without)
 * Rows past the matrix's end are zero (q = 128, d = m = 0). */
#define GT_CPU_IG_ROWS 16
typedef struct gt_cpu_ig_block {
    uint8_t q[8][GT_CPU_IG_ROWS][4];
    float d[GT_CPU_IG_ROWS];
    float m[GT_CPU_IG_ROWS];
} gt_cpu_ig_block;

/* The quantized activations of a batch (the dot path's layout, cpu.h
 * above): row i is q + i*k; per block (at + i*nb):
 *   d   the scale, amax/127 rounded to F16 (Q8_0's and Q8_1's d)
 *   s   d * sum q, in F32 (the offset of Q4_0-style weights, exact)
 *   s1  amax/127 * sum q rounded to F16 (Q8_1's s: what llama.cpp
 *       multiplies Q4_1/Q5_1's m with)
 *   c   -128 * sum q (VNNI's correction for the +128 weight bias). */
typedef struct gt_cpu_act8 {
    const int8_t *q;
    const float *d, *s, *s1;
    const int32_t *c;
    int64_t k, nb;
} gt_cpu_act8;

/* The sums a weight type's offset or min multiplies (see gt_cpu_act8). */
static inline const float *gt_cpu_act_sums(const gt_cpu_act8 *a, gt_type t)
{
    return t == GT_TYPE_Q4_1 || t == GT_TYPE_Q5_1 ? a->s1 : a->s;
}

/* out[i*ldo + r] = sum over the nb panel blocks of row r and activation
 * row i, for rows r < n_rows of the panel and activation rows [i0, i1). */
typedef void (*gt_cpu_igemm_fn)(const gt_cpu_ig_block *w, const gt_cpu_act8 *a, int64_t i0,
                                int64_t i1, float *out, int64_t ldo, int n_rows);

/* Q4_0, Q5_0 and Q8_0 weights repacked once for the few-row act=q8 products
 * (cpu_packed.c): 8 weight rows x one 32-element block column in the bytes
 * of 8 blocks, laid out so one 32-byte load holds 4 quant bytes of each of
 * the 8 rows (VNNI's operand shape):
 *   d[r]        row r's f16 scale
 *   Q4_0: q[g][r][j]  byte 4g+j of row r's qs: its low nibble is weight
 *                     4g+j, its high nibble weight 16+4g+j
 *   Q8_0: q[g][r][j]  weight 4g+j of row r plus 128 (unsigned; the
 *                     activations' -128 * sum q takes it off again)
 *   Q5_0: q as Q4_0's (the low 4 bits), and h[g][0] bit 4r+j = the
 *         fifth bit of weight 4g+j of row r, h[g][1] that of weight
 *         16+4g+j: the bytes of the 8 blocks, in the order one 32-byte
 *         load of q needs them
 * Rows past the matrix's end are zero (d = 0). */
#define GT_CPU_PK_ROWS 8
typedef struct gt_cpu_pk_q4_0 {
    uint16_t d[GT_CPU_PK_ROWS];
    uint8_t q[4][GT_CPU_PK_ROWS][4];
} gt_cpu_pk_q4_0;
typedef struct gt_cpu_pk_q5_0 {
    uint16_t d[GT_CPU_PK_ROWS];
    uint8_t q[4][GT_CPU_PK_ROWS][4];
    uint32_t h[4][2];
} gt_cpu_pk_q5_0;
typedef struct gt_cpu_pk_q8_0 {
    uint16_t d[GT_CPU_PK_ROWS];
    uint8_t q[8][GT_CPU_PK_ROWS][4];
} gt_cpu_pk_q8_0;

/* out[i*ldo + r] for activation rows [i0, i1) and the n_rows (<= 8) rows
 * of one panel of nb packed blocks (gt_cpu_pk_q4_0, _q5_0 or _q8_0): per
 * row and block, the exact integer sum of w * q, times d_w, then
 * fused-multiply-added with d_a into the row's sum, the same operations
 * whatever the number of rows. */
typedef void (*gt_cpu_pk_fn)(const void *w, int64_t nb, const gt_cpu_act8 *a, int64_t i0,
                             int64_t i1, float *out, int64_t ldo, int n_rows);

typedef struct gt_cpu_kernels {
    const char *name;            /* "scalar", "avx2", "avx512" */
    gt_cpu_quant_fn quantize_act;
    gt_cpu_qdot_fn qdot[GT_TYPE_COUNT];       /* Q8_0 Q4_0 Q4_1 Q5_0 Q4_K Q6_K, others NULL */
    gt_cpu_qdot4_fn qdot4[GT_TYPE_COUNT];     /* the same types on avx2/avx512, else NULL */
    gt_cpu_fdot_fn fdot[GT_TYPE_COUNT];       /* every weight type */
    gt_cpu_fdot4_fn fdot4[GT_TYPE_COUNT];     /* where written (Q8_0 on avx2/avx512), else NULL */
    gt_cpu_dequant_fn dequant[GT_TYPE_COUNT]; /* every weight type; bit-exact */
    float (*dot_f32)(const float *a, const float *b, int64_t n);
    void (*axpy)(float a, const float *x, float *y, int64_t n);    /* y += a*x */
    void (*scale)(const float *x, float a, float *y, int64_t n);   /* y = a*x */
    float (*sum_sq)(const float *x, int64_t n);
    /* x[j] = exp(x[j] - m); returns the sum (softmax numerator). */
    float (*exp_sub_sum)(float *x, int64_t n, float m);
    void (*silu_mul)(const float *a, const float *b, float *t, int64_t n);
    /* t = gelu(a) * b, gelu's tanh form written as a * sigmoid(2u),
     * u = sqrt(2/pi) (a + 0.044715 a^3): 0.5 (1 + tanh u) = 1 / (1 + e^-2u)
     * exactly, so one exp and a division, and no cancellation near 0. */
    void (*gelu_mul)(const float *a, const float *b, float *t, int64_t n);
    gt_cpu_igemm_fn igemm;       /* every table has one */
    gt_cpu_pk_fn pk[GT_TYPE_COUNT]; /* Q4_0, Q5_0 and Q8_0 in every table */
} gt_cpu_kernels;

void gt_cpu_kernels_scalar(gt_cpu_kernels *k);
/* Fill k with the ISA's kernels; return false when not compiled for this
 * architecture (the caller then has checked CPU support already). */
bool gt_cpu_kernels_avx2(gt_cpu_kernels *k);
bool gt_cpu_kernels_avx512(gt_cpu_kernels *k);
/* The K-quants' entries of those two tables (cpu_kquants_avx2.c,
 * cpu_kquants_avx512.c), installed by the functions above; x86 only. */
void gt_cpu_kquants_avx2(gt_cpu_kernels *k);
void gt_cpu_kquants_avx512(gt_cpu_kernels *k);
/* The integer GEMM kernels (cpu_igemm*.c). */
void gt_cpu_igemm_scalar(const gt_cpu_ig_block *w, const gt_cpu_act8 *a, int64_t i0, int64_t i1,
                         float *out, int64_t ldo, int n_rows);
void gt_cpu_igemm_avx2(const gt_cpu_ig_block *w, const gt_cpu_act8 *a, int64_t i0, int64_t i1,
                       float *out, int64_t ldo, int n_rows);
void gt_cpu_pk_q4_0_scalar(const void *w, int64_t nb, const gt_cpu_act8 *a, int64_t i0, int64_t i1,
                           float *out, int64_t ldo, int n_rows);
void gt_cpu_pk_q5_0_scalar(const void *w, int64_t nb, const gt_cpu_act8 *a, int64_t i0, int64_t i1,
                           float *out, int64_t ldo, int n_rows);
void gt_cpu_pk_q8_0_scalar(const void *w, int64_t nb, const gt_cpu_act8 *a, int64_t i0, int64_t i1,
                           float *out, int64_t ldo, int n_rows);
void gt_cpu_igemm_avx512(const gt_cpu_ig_block *w, const gt_cpu_act8 *a, int64_t i0, int64_t i1,
                         float *out, int64_t ldo, int n_rows);

/* ---- thread pool (cpu_threads.c) ---------------------------------------- */

typedef struct gt_cpu_pool gt_cpu_pool;
typedef void (*gt_cpu_task_fn)(void *arg, int ith, int nth);

int gt_cpu_pool_new(int n_threads, gt_cpu_pool **out, gt_err *err);
void gt_cpu_pool_free(gt_cpu_pool *p);
/* Runs fn on every thread (the caller is thread 0) and returns when all are done. */
void gt_cpu_pool_run(gt_cpu_pool *p, gt_cpu_task_fn fn, void *arg);
/* Inside fn only: returns once all threads have arrived. */
void gt_cpu_barrier(gt_cpu_pool *p);

/* ---- BLAS (cpu_blas.c): see cpu_blas.h ------------------------------------ */

/* ---- backend context ----------------------------------------------------- */

typedef struct gt_cpu_ctx {
    pthread_mutex_t mu;  /* one graph at a time: scratch and pool are shared */
    bool mu_ok;
    gt_cpu_kernels k;
    gt_cpu_blas blas;
    gt_cpu_pool *pool;
    int n_threads;
    int blas_min_batch;  /* MUL_MAT/ATTENTION rows from which BLAS is used */
    bool act_q8;         /* GT_CPU_ACT=q8: quantized weights use qdot, not fdot */

    /* Scratch, grown at validation time, reused across graphs. */
    void *act;           /* quantized activations shared by all threads */
    size_t act_size;
    float **tscratch;    /* (n_threads) per-thread scratch */
    size_t tscratch_floats;
    atomic_int *counters; /* (n_nodes) work-stealing counters, zeroed per graph */
    int n_counters;
    uint8_t *plan;       /* (n_nodes) GT_CPU_PLAN_* flags, computed per graph */

    /* Weights repacked for the few-row products (cpu_packed.c), made on
     * first use and kept until their buffer is freed. */
    struct gt_cpu_packed *packed;
    int n_packed, cap_packed, packed_hint;
} gt_cpu_ctx;

/* Per-node plan flags (cpu_backend.c): wait for all threads before the node;
 * reuse the activations the previous MUL_MAT quantized (same input). */
enum { GT_CPU_PLAN_BARRIER = 1, GT_CPU_PLAN_REUSE_ACT = 2 };

typedef struct gt_cpu_job {
    gt_cpu_ctx *ctx;
    const gt_graph *g;
    int node;            /* index of the node being run */
} gt_cpu_job;

/* Scratch a node needs: shared activation bytes, per-thread floats. */
void gt_cpu_mul_mat_scratch(const gt_cpu_ctx *c, const gt_tensor *t, size_t *act_bytes,
                            size_t *thread_floats);
void gt_cpu_attention_scratch(const gt_cpu_ctx *c, const gt_tensor *t, size_t *thread_floats);

/* True when the node quantizes its activations into c->act (the dot path
 * with act=q8, or the integer GEMM). */
bool gt_cpu_mul_mat_quantizes(const gt_cpu_ctx *c, const gt_tensor *t);
/* cpu_act8.c: the size of one activation row quantized into c->act (q, d,
 * s, s1, c). */
size_t gt_cpu_act_row_bytes(int64_t k);
/* Quantizes the n rows of x (k each) into c->act, split over the threads,
 * then waits for all; *a describes the result. */
void gt_cpu_quantize_rows(gt_cpu_ctx *c, const float *x, int64_t n, int64_t k, bool reuse,
                          gt_cpu_act8 *a, int ith, int nth);
/* cpu_igemm.c: whether the node takes the integer GEMM, its scratch, and
 * the node kernel. */
bool gt_cpu_igemm_takes(const gt_cpu_ctx *c, const gt_tensor *t);
size_t gt_cpu_igemm_thread_floats(const gt_tensor *t);
void gt_cpu_igemm(gt_cpu_ctx *c, const gt_tensor *t, atomic_int *counter, bool reuse_act, int ith,
                  int nth);
/* cpu_packed.c: whether the node takes the packed few-row product, the
 * packing (before the graph runs, one thread: fails only out of memory),
 * the node kernel, and dropping a freed buffer's packs. */
bool gt_cpu_packed_takes(const gt_cpu_ctx *c, const gt_tensor *t);
bool gt_cpu_packed_ready(gt_cpu_ctx *c, const gt_tensor *w);
int gt_cpu_packed_prepare(gt_cpu_ctx *c, const gt_tensor *t, bool pageout, gt_err *err);
/* The packed copy of weight w, or NULL; blocks [b0, b0+n) of a row from it
 * as the integer GEMM's repackers give them (u[b] = the 32 weights plus
 * 128, d[b] the block scale). */
const void *gt_cpu_packed_data(const gt_cpu_ctx *c, const gt_tensor *w);
void gt_cpu_packed_row_range(gt_type t, const void *data, int64_t nb, int64_t row, int64_t b0,
                             int64_t n, uint8_t (*u)[32], float *d);
void gt_cpu_mul_mat_packed(gt_cpu_ctx *c, const gt_tensor *t, atomic_int *counter, bool reuse_act,
                           int ith, int nth);
void gt_cpu_packed_drop(gt_cpu_ctx *c, const gt_buffer *buf);
void gt_cpu_mul_mat(gt_cpu_ctx *c, const gt_tensor *t, atomic_int *counter, bool reuse_act, int ith,
                    int nth);
void gt_cpu_attention(gt_cpu_ctx *c, const gt_tensor *t, atomic_int *counter, int ith, int nth);
void gt_cpu_get_rows(gt_cpu_ctx *c, const gt_tensor *t, int ith, int nth);
void gt_cpu_rms_norm(gt_cpu_ctx *c, const gt_tensor *t, int ith, int nth);
void gt_cpu_add(gt_cpu_ctx *c, const gt_tensor *t, int ith, int nth);
void gt_cpu_mul(gt_cpu_ctx *c, const gt_tensor *t, int ith, int nth);
void gt_cpu_rope(gt_cpu_ctx *c, const gt_tensor *t, int ith, int nth);
void gt_cpu_kv_store(gt_cpu_ctx *c, const gt_tensor *t, int ith, int nth);
void gt_cpu_gelu_mul(gt_cpu_ctx *c, const gt_tensor *t, int ith, int nth);
void gt_cpu_scale(gt_cpu_ctx *c, const gt_tensor *t, int ith, int nth);
void gt_cpu_silu_mul(gt_cpu_ctx *c, const gt_tensor *t, int ith, int nth);
/* cpu_moe.c: the mixture-of-experts ops */
void gt_cpu_topk(gt_cpu_ctx *c, const gt_tensor *t, int ith, int nth);
void gt_cpu_moe_weights(gt_cpu_ctx *c, const gt_tensor *t, int ith, int nth);
void gt_cpu_mul_mat_id(gt_cpu_ctx *c, const gt_tensor *t, int ith, int nth);
void gt_cpu_moe_sum(gt_cpu_ctx *c, const gt_tensor *t, int ith, int nth);

#define GT_CPU_MAX_ROPE_PAIRS 512

/* Rows [*r0, *r1) of n that thread ith of nth handles (contiguous split). */
static inline void gt_cpu_split(int64_t n, int ith, int nth, int64_t *r0, int64_t *r1)
{
    const int64_t per = (n + nth - 1) / nth;
    *r0 = per * ith < n ? per * ith : n;
    *r1 = *r0 + per < n ? *r0 + per : n;
}

static inline float *gt_cpu_f32(const gt_tensor *t) { return (float *)gt_tensor_host(t); }

/* ---- registration (cpu_backend.c) ---------------------------------------- */

/* The entry function of the built-in table (the plugins' signature). */
const gt_backend_reg *gt_backend_cpu_reg(void);

#endif
