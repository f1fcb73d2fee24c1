/* numerics.h: the version of the reference backend's numbers, part of every
 * reference-cache key (suite.c's gt_suite_ref_key).
 *
 * The reference cache in the results database keeps the reference backend's
 * outputs (logits summaries, greedy tokens) and reuses them across runs. A
 * database kept across a change of the reference's arithmetic would then
 * serve numbers the current oracle no longer computes, and every cell would
 * be judged against a stale oracle. The key therefore holds the gauntlet
 * version and this constant.
 *
 * Bump GT_NUMERICS_VERSION in the same commit as any change that alters what
 * the reference backend or the cached summary computes, even in the last
 * bit: backends/reference (accumulation order, double vs float), the
 * dequantization or quantization rules in runtime/src/quant.c, model.c's
 * graph (RoPE, norms, attention), the tokenizers, the eval texts' treatment
 * (chunking, BOS), or the layout of a cached blob (suites/refdist.h). A
 * change that leaves every output bit-identical needs no bump. */
#ifndef GT_SUITE_NUMERICS_H
#define GT_SUITE_NUMERICS_H

/* 2: the accuracy cache keeps the reference distribution up to a tail mass
 *    (suites/refdist.h) instead of a fixed top-256. */
#define GT_NUMERICS_VERSION 2

#endif
