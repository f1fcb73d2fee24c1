/* reference.h: what the reference backend's files share (private to
 * backends/reference): its thread pool (reference_pool.c).
 *
 * The pool only ever splits a node's OUTPUTS (rows of a matrix product,
 * (row, head) pairs of attention, rows of an element-wise op) between
 * threads. Which thread computes an output never changes how it is
 * computed, so the reference gives the same bits at any thread count. */
#ifndef GT_REFERENCE_H
#define GT_REFERENCE_H

#include <stdint.h>

#include "gt/error.h"

typedef struct ref_pool ref_pool;

/* Computes items [begin, end) of a job on thread `thread` (0 = the caller). */
typedef void (*ref_task_fn)(void *arg, int64_t begin, int64_t end, int thread);

/* n_threads >= 1 threads in all: the caller and n_threads - 1 workers. */
int ref_pool_new(int n_threads, ref_pool **out, gt_err *err);
void ref_pool_free(ref_pool *p);
int ref_pool_threads(const ref_pool *p);

/* Runs fn over items [0, n) in chunks of `chunk` items, handed out to the
 * threads as they ask for them, and returns when every item is done. A job
 * of one chunk or less runs on the caller alone. */
void ref_pool_for(ref_pool *p, int64_t n, int64_t chunk, ref_task_fn fn, void *arg);

struct gt_tensor;
/* TOPK, MOE_WEIGHTS, MUL_MAT_ID and MOE_SUM (reference_moe.c). */
int ref_moe_compute(ref_pool *pool, struct gt_tensor *t, gt_err *err);

#endif
