/* opencl_internal.h: what the OpenCL backend's files share.
 *
 * The backend is split by concept:
 *   opencl_backend.c  probe, driver profiles, init/free, buffers, supports()
 *   opencl_program.c  building the embedded kernels; work sizes per device
 *   opencl_cache.c    the on-disk cache of built program binaries
 *   opencl_ops.c      compute(): one enqueue per graph node, one clFinish
 *   opencl_status.c   status names and the error messages every call uses
 *   opencl_tensor.c   a tensor's type index and (chunk, offset) on the device
 *
 * Buffers: a gt_buffer's impl is an ocl_buf. Most hold one cl_mem. A
 * weight buffer larger than CL_DEVICE_MAX_MEM_ALLOC_SIZE is split into
 * overlapping chunks, so that every tensor no larger than the overlap lies
 * wholly inside one chunk (tensors are addressed as cl_mem + byte offset, so
 * a tensor may not straddle two allocations). Tensors are always passed to
 * kernels as (cl_mem, byte offset) pairs, never as sub-buffers: sub-buffer
 * origins must be aligned to CL_DEVICE_MEM_BASE_ADDR_ALIGN, which GGUF
 * tensor offsets are not. */
#ifndef GT_OPENCL_INTERNAL_H
#define GT_OPENCL_INTERNAL_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gt/backend.h"

/* Weight types the kernels handle, in the order of the per-type kernels. */
enum {
    OT_F32, OT_F16, OT_BF16, OT_Q8_0, OT_Q4_0, OT_Q4_1,                    /* common.cl */
    OT_Q5_0, OT_Q5_1, OT_IQ4_NL, OT_Q2_K, OT_Q3_K, OT_Q4_K, OT_Q5_K, OT_Q6_K, /* quants.cl */
    OT_COUNT
};

/* Kernels, by index into ocl_ctx.k; names are in opencl_program.c. */
enum {
    K_GET_ROWS, /* + OT_* */
    K_MATVEC = K_GET_ROWS + OT_COUNT,
    K_MATMUL = K_MATVEC + OT_COUNT,
    K_RMS_NORM = K_MATMUL + OT_COUNT,
    K_ADD,
    K_MUL,
    K_ADD_ROW,
    K_SILU_MUL,
    K_GELU_MUL,
    K_SCALE,
    K_ROPE,
    K_ATTENTION,
    K_ATTENTION_F16,  /* over F16 caches (kv_type f16) */
    K_KV_STORE_F16,
    K_TOPK,
    K_MOE_WEIGHTS,
    K_MOE_SUM,
    K_MUL_MAT_ID, /* + OT_* */
    K_COUNT = K_MUL_MAT_ID + OT_COUNT
};

/* Work sizes baked into the program (as -D options, so part of the cache
 * key), chosen per device kind in opencl_program.c. */
typedef struct ocl_tuning {
    int ew_width;     /* floats per work-item in elementwise kernels (4 or 16) */
    int ew_lws;       /* elementwise work-group size */
    int norm_lws;     /* RMS_NORM: work-items per row */
    int mv_lws;       /* matvec: work-items per row group (local reduction) */
    int mv_rows;      /* matvec: output rows per work-group */
    int mv_max_tok;   /* batches up to this many tokens use the matvec kernel */
    int mm_rn, mm_rm; /* matmul: rows x tokens computed per work-item */
    int mm_lx, mm_ly; /* matmul work-group shape */
    int att_lws;      /* attention: work-items per (token, head) */
    int att_vw;       /* attention: floats per vector op (4, 8 or 16) */
    int att_chunk;    /* attention: cache rows scored per pass (local memory) */
    int att_hd_max;   /* largest head size the attention kernel takes */
} ocl_tuning;

typedef struct ocl_ctx {
    cl_platform_id platform;
    cl_device_id device;
    cl_device_id sub_device; /* when n_threads partitions the device; owned */
    cl_uint compute_units;
    cl_context context;
    cl_command_queue queue;
    cl_program program;
    cl_kernel k[K_COUNT];

    /* device facts */
    size_t max_wg;        /* CL_DEVICE_MAX_WORK_GROUP_SIZE */
    cl_ulong local_mem;   /* CL_DEVICE_LOCAL_MEM_SIZE */
    cl_ulong max_alloc;   /* CL_DEVICE_MAX_MEM_ALLOC_SIZE (or GT_OPENCL_MAX_ALLOC) */
    cl_ulong global_mem;
    bool is_cpu, has_fp64, has_fma;
    ocl_tuning tune;
    char cache_status[64]; /* "hit", "miss (stored)", "off", ... */

    /* GET_ROWS reports an out-of-range id here (the kernel cannot fail). */
    cl_mem flag;
    bool flag_dirty;
    /* cos/sin of every (position, pair) the graph's ROPE nodes use. */
    cl_mem rope_tab;
    size_t rope_tab_bytes;
    float *rope_host;
    size_t rope_host_cap;

    /* GT_OPENCL_PROFILE=1: every command gets an event; after each graph
     * the device-side times are added up per op (printed to stderr when
     * the backend is freed), next to the graphs' wall time. */
    bool profile;
    double prof_s[GT_OP_COUNT], prof_wall;
    long prof_n[GT_OP_COUNT], prof_graphs;
    cl_event *prof_ev;
    int *prof_op, prof_cap, prof_count, cur_op;

    /* live allocations, for the leak tests and gt_device_info */
    long n_live_mem;
    uint64_t live_bytes;
} ocl_ctx;

typedef struct ocl_buf {
    int n_chunks;
    size_t stride;  /* chunk i starts at i * stride */
    size_t chunk;   /* and holds up to this many bytes */
    cl_mem mem[];   /* (n_chunks) */
} ocl_buf;

/* The length of chunk i of a (possibly split) buffer. */
static inline size_t gt_ocl_chunk_len(const ocl_buf *ob, const gt_buffer *buf, int i)
{
    size_t start = (size_t)i * ob->stride;
    return buf->size - start < ob->chunk ? buf->size - start : ob->chunk;
}

static inline ocl_ctx *ocl_of(gt_backend *b) { return (ocl_ctx *)b->ctx; }

/* opencl_status.c */
const char *gt_ocl_status_name(cl_int status);
/* "clXxx(what) failed: CL_NAME (-n)", returns -1. */
int gt_ocl_fail(gt_err *err, const char *call, cl_int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Device/platform string queries into a fixed buffer ("?" on failure). */
void gt_ocl_device_str(cl_device_id d, cl_device_info what, char *out, size_t cap);
void gt_ocl_platform_str(cl_platform_id p, cl_platform_info what, char *out, size_t cap);

/* opencl_program.c */
void gt_ocl_choose_tuning(ocl_ctx *c);
/* Builds (or loads from the cache) the program and creates every kernel. */
int gt_ocl_program_init(ocl_ctx *c, gt_err *err);
void gt_ocl_program_free(ocl_ctx *c);
const char *gt_ocl_kernel_name(int k);

/* opencl_tensor.c */
int gt_ocl_type_index(gt_type t); /* OT_* or -1 */
/* The allocation and offset inside it that hold [offset, offset+n) of buf. */
int gt_ocl_resolve(const gt_buffer *buf, size_t offset, size_t n, cl_mem *mem, size_t *off,
                   gt_err *err);

/* opencl_ops.c */
int gt_ocl_compute(gt_backend *b, const gt_graph *g, gt_err *err);
void gt_ocl_profile_report(ocl_ctx *c);
/* Where the next command's event goes when profiling (NULL otherwise). */
cl_event *gt_ocl_event(ocl_ctx *c);
bool gt_ocl_supports(gt_backend *b, gt_op op, gt_type type, char *why, size_t why_len);

#endif
