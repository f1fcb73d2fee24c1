/* backend.h: the whole contract between the runtime and an execution backend.
 *
 * The runtime turns a model into a graph of a few ops over 2-D tensors; a
 * backend owns buffers (host memory, device memory) and computes graphs. It
 * never sees a model, a tokenizer or a session. Backends are either built in
 * (reference, cpu) or plugins (libgt-backend-<name>.so) found beside the
 * executable or in $GT_BACKEND_PATH, loaded with dlopen; a plugin exports
 *     const gt_backend_reg *gt_backend_plugin_entry(void);
 *
 * Tensors are row-major 2-D: ne[0] elements per row (contiguous, stored with
 * gt_row_size(type, ne[0]) bytes), ne[1] rows. A view is a tensor pointing at
 * an offset inside another tensor's buffer. Activations are F32; token ids I32.
 *
 * Op semantics (t = this node; a, b, c = src[0..2]; "row" = one token):
 *   GET_ROWS  t[i,:] = dequant(a[b[i], :])        a: any weight type, b: I32 ids
 *   RMS_NORM  t[i,:] = a[i,:] / sqrt(mean(a[i,:]^2) + eps)   fparams[0] = eps
 *   MUL_MAT   t[i,j] = sum_k a[j,k] * b[i,k]      a: weight [n_out rows of K],
 *             b: F32 [n_tok rows of K]  ->  t: F32 [n_tok rows of n_out]
 *   ADD       t = a + b                            same shapes, or b one row:
 *             t[i,:] = a[i,:] + b[0,:] (a bias added to every row), F32
 *   MUL       t[i,:] = a[i,:] * b[0,:]             b is one row (a norm weight), F32
 *   ROPE      rotate pairs of each head of a in place-compatible fashion:
 *             iparams: [0]=n_heads in the row, [1]=head_dim, [2]=rope_dim
 *             (rotated dims; the rest pass through), [3]=pos0 (row i has
 *             position pos0+i), [4]=mode (0 = adjacent pairs (x0,x1),
 *             1 = NeoX halves (x_j, x_{j+d/2})); fparams[0]=freq_base,
 *             [1]=freq_scale, [2]=attn_factor (0 in either means 1);
 *             b (optional, NULL = all ones) = F32 frequency factors, rope_dim/2
 *             values (Llama 3's rope_freqs, Phi-3's long/short factors):
 *             theta_j = freq_scale * pos * base^(-2j/rope_dim) / b[j]
 *             and the rotated pair is (x0 c - x1 s, x0 s + x1 c) with
 *             c = attn_factor cos(theta_j), s = attn_factor sin(theta_j)
 *             (llama.cpp's ggml_rope_ext without YaRN: ext_factor 0);
 *             dims past rope_dim pass through unscaled.
 *   KV_STORE  copy a (F32 [n_tok rows of kv_dim]) into rows pos0.. of the
 *             cache tensor b (F32 or F16 [n_ctx rows of kv_dim]; F16 rounds
 *             to nearest even as gt_f32_to_f16); iparams[0]=pos0.
 *             t is a view of b (the rows written, b's type); nothing else
 *             is produced. supports(KV_STORE, F16) says whether F16 caches
 *             can be written (a session with kv_type F16 checks it).
 *   ATTENTION causal multi-head attention with GQA:
 *             a = q F32 [n_tok rows of n_head*head_dim], b = K cache,
 *             c = V cache (F32 [n_ctx rows of n_kv*head_dim]; b and c
 *             may be F16, both the same type, read as gt_f16_to_f32 and
 *             computed in F32: supports(ATTENTION, F16));
 *             iparams: [0]=n_head, [1]=n_kv_head, [2]=head_dim, [3]=pos0,
 *             [4]=window (0 = none); fparams[0]=scale. Row i (position
 *             p = pos0+i) attends cache rows 0..p, or with a window w only
 *             rows max(0, p-w+1)..p (a sliding-window layer).
 *             t: F32 [n_tok rows of n_head*head_dim]
 *   SILU_MUL  t = silu(a) * b                      same shapes
 *   GELU_MUL  t = gelu(a) * b, gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
 *             (the tanh form Gemma is trained with)  same shapes
 *   SCALE     t = a * fparams[0]                   (Gemma's embedding scale)
 * Mixture-of-experts ops (qwen3moe). n_exp = experts, k = experts used per
 * token; an expert weight is a 3-D GGUF tensor seen as n_exp * n_out rows
 * (expert e's rows are e*n_out .. e*n_out + n_out - 1):
 *   TOPK      t = I32 [n_tok rows of k]: the indices of a's k largest values
 *             in row i, largest first; equal values: the lower index first.
 *             a = F32 router logits [n_tok rows of n_exp]; k = t->ne[0].
 *   MOE_WEIGHTS  t = F32 [n_tok rows of k]: p = softmax(a[i,:]) (max
 *             subtracted, exp, divided by the sum over all n_exp);
 *             t[i,s] = p[b[i,s]]; with iparams[0] = 1 each row is then
 *             divided by max(sum over s of t[i,s], 6.103515625e-5) (llama.cpp's
 *             norm_w). a = router logits, b = TOPK's ids.
 *   MUL_MAT_ID t[i*k+s, j] = sum_c a[c_e*n_out + j, c] * b[r, c] with
 *             e = c[i,s] (the expert), r = i when iparams[1] = 0 (one input
 *             row per token, shared by its k slots) or r = i*k+s when
 *             iparams[1] = 1 (one input row per slot); iparams[0] = n_out.
 *             a: expert weights [n_exp*n_out rows of K] (any weight type),
 *             b: F32, c: I32 ids [n_tok rows of k]
 *             ->  t: F32 [n_tok*k rows of n_out]
 *   MOE_SUM   t[i,:] = sum over s = 0..k-1 in order of b[i,s] * a[i*k+s, :]
 *             a = F32 [n_tok*k rows of n], b = F32 weights [n_tok rows of k]
 *             ->  t: F32 [n_tok rows of n]
 * In-place nodes (t shares a's storage) are allowed for ADD, MUL, RMS_NORM,
 * ROPE, SILU_MUL, GELU_MUL and SCALE; backends must handle that. A backend
 * says which ops it computes in supports(); a session checks every op its
 * model's graph uses before it runs anything. */
#ifndef GT_BACKEND_H
#define GT_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gt/error.h"
#include "gt/quant.h"

typedef enum gt_op {
    GT_OP_NONE = 0, /* a leaf: weights, inputs, caches */
    GT_OP_GET_ROWS,
    GT_OP_RMS_NORM,
    GT_OP_MUL_MAT,
    GT_OP_ADD,
    GT_OP_MUL,
    GT_OP_ROPE,
    GT_OP_KV_STORE,
    GT_OP_ATTENTION,
    GT_OP_SILU_MUL,
    GT_OP_GELU_MUL,
    GT_OP_SCALE,
    GT_OP_TOPK,
    GT_OP_MOE_WEIGHTS,
    GT_OP_MUL_MAT_ID,
    GT_OP_MOE_SUM,
    GT_OP_COUNT
} gt_op;

const char *gt_op_name(gt_op op);
int gt_op_from_name(const char *name, gt_op *out);

typedef struct gt_backend gt_backend;

/* A region of backend memory. `host` is non-NULL when the CPU can address it
 * directly (reference, cpu, and zero-copy wraps); device backends keep their
 * handle in `impl`. */
typedef struct gt_buffer {
    gt_backend *backend;
    size_t size;
    void *host;
    void *impl;
} gt_buffer;

typedef struct gt_tensor {
    char name[64];
    gt_type type;
    int64_t ne[2];          /* ne[0] elements per row, ne[1] rows */
    gt_buffer *buf;
    size_t offset;          /* bytes into buf */
    gt_op op;
    struct gt_tensor *src[3];
    int32_t iparams[6];
    float fparams[4];
} gt_tensor;

static inline size_t gt_tensor_row_bytes(const gt_tensor *t)
{
    return gt_row_size(t->type, t->ne[0]);
}
static inline size_t gt_tensor_bytes(const gt_tensor *t)
{
    return gt_tensor_row_bytes(t) * (size_t)t->ne[1];
}
/* Host address of a tensor's data (NULL on device-only buffers). */
static inline void *gt_tensor_host(const gt_tensor *t)
{
    return t->buf && t->buf->host ? (char *)t->buf->host + t->offset : NULL;
}

/* Nodes in execution order; leaves are reached through src pointers. */
typedef struct gt_graph {
    gt_tensor **nodes;
    int n_nodes;
} gt_graph;

typedef struct gt_device_info {
    char backend[32];        /* "cpu", "opencl", ... */
    char name[128];          /* device name */
    char kind[16];           /* "cpu", "gpu", "accelerator" */
    uint64_t memory;         /* bytes usable by the backend, 0 if unknown */
    char driver[128];        /* e.g. "OpenBLAS 0.3.21 (pthread)", "PoCL 3.1", "CUDA driver" */
    char driver_version[64];
    char extra[256];         /* backend-specific facts: ISA, compute capability, ... */
} gt_device_info;

/* How to open a backend. `driver` is the driver-profile setting string for
 * that backend (e.g. "blas=/usr/lib/.../libblas.so.3", "platform=Portable"),
 * NULL for its default. */
typedef struct gt_backend_config {
    int device;      /* index among the backend's devices */
    int n_threads;   /* 0 = backend default */
    const char *driver;
    /* Execution settings every session on this backend starts with (a
     * matrix cell's "settings"; gt_exec_settings); 0 = the session's own. */
    int n_batch;
    int n_parallel;
    gt_type kv_type; /* K/V cache type: 0 (= F32) or GT_TYPE_F16 */
} gt_backend_config;

/* The execution settings a backend instance was opened with (a matrix
 * cell's settings axis), kept by gt_backend_open for the sessions on it:
 *   n_threads   as the backend was asked (0 = its default)
 *   n_batch     tokens per micro-batch of a session that names none
 *   n_parallel  sequences sharing each batch: a session that asks for one
 *               sequence runs n_parallel - 1 seeded companion sequences
 *               beside it (session.h), so every check of a cell runs with
 *               others in its batches; 0 or 1 = alone
 *   kv_type     the K/V cache type of a session that names none (0 = F32,
 *               GT_TYPE_F16) */
typedef struct gt_exec_settings {
    int n_threads, n_batch, n_parallel;
    gt_type kv_type;
} gt_exec_settings;

typedef struct gt_backend_iface {
    void (*free)(gt_backend *b);
    /* Whether op can run with weight/src type; fills why when not. */
    bool (*supports)(gt_backend *b, gt_op op, gt_type type, char *why, size_t why_len);
    int (*buffer_alloc)(gt_backend *b, size_t size, gt_buffer **out, gt_err *err);
    /* A buffer holding the bytes at host (e.g. mmapped weights). Host
     * backends may point at them without copying; the bytes stay valid and
     * unchanged for the buffer's life. */
    int (*buffer_from_host)(gt_backend *b, const void *host, size_t size, gt_buffer **out,
                            gt_err *err);
    void (*buffer_free)(gt_buffer *buf);
    int (*upload)(gt_buffer *buf, size_t offset, const void *src, size_t n, gt_err *err);
    int (*download)(gt_buffer *buf, size_t offset, void *dst, size_t n, gt_err *err);
    int (*compute)(gt_backend *b, const gt_graph *g, gt_err *err);
} gt_backend_iface;

struct gt_backend {
    const gt_backend_iface *iface;
    gt_device_info info;  /* the device this instance runs on */
    void *ctx;
    gt_exec_settings exec; /* set by gt_backend_open */
};

/* A backend kind, as the registry lists it. probe fills up to max devices and
 * returns how many (0 with err filled = unavailable, and why). */
typedef struct gt_backend_reg {
    const char *name;
    const char *description;
    int (*probe)(gt_device_info *devs, int max, const char *driver, gt_err *err);
    int (*init)(const gt_backend_config *cfg, gt_backend **out, gt_err *err);
} gt_backend_reg;

typedef const gt_backend_reg *(*gt_backend_plugin_entry_fn)(void);

/* Registry: built-ins first, then plugins. Each entry either has a reg or an
 * unavailable reason (plugin missing, dlopen failed, symbol missing). */
typedef struct gt_backend_entry {
    const char *name;
    const gt_backend_reg *reg;  /* NULL when unavailable */
    char why[512];              /* reason when reg is NULL */
} gt_backend_entry;

int gt_backend_registry(const gt_backend_entry **out); /* returns count */
const gt_backend_entry *gt_backend_find(const char *name);
int gt_backend_open(const char *name, const gt_backend_config *cfg, gt_backend **out,
                    gt_err *err);
void gt_backend_close(gt_backend *b);

/* Convenience wrappers over the vtable. */
int gt_backend_compute(gt_backend *b, const gt_graph *g, gt_err *err);
bool gt_backend_supports(gt_backend *b, gt_op op, gt_type type, char *why, size_t why_len);

/* Host buffer helpers shared by backends that compute in host memory. */
int gt_host_buffer_alloc(gt_backend *b, size_t size, gt_buffer **out, gt_err *err);
int gt_host_buffer_from_host(gt_backend *b, const void *host, size_t size, gt_buffer **out,
                             gt_err *err);
void gt_host_buffer_free(gt_buffer *buf);
int gt_host_upload(gt_buffer *buf, size_t offset, const void *src, size_t n, gt_err *err);
int gt_host_download(gt_buffer *buf, size_t offset, void *dst, size_t n, gt_err *err);

#endif
