/* metrics.h: the numbers the qualification suites compare outputs with.
 *
 * Pure functions over arrays, no runtime types, so tests can check them on
 * hand-made examples and every suite computes a metric the same way:
 *   - log-softmax in double (logits of a 49152-token vocabulary span ~40
 *     nats; float exp() sums lose the tail that KL divergence is about);
 *   - KL(P || Q) over a full vocabulary, and over a "top-k + tail" summary of
 *     P (the accuracy suite's cached reference: see accuracy.c);
 *   - NMSE, percentiles, median and relative spread of repeated timings. */
#ifndef GT_SUITE_METRICS_H
#define GT_SUITE_METRICS_H

#include <stddef.h>
#include <stdint.h>

/* logp[i] = x[i] - logsumexp(x); returns logsumexp(x). */
double gt_log_softmax(const float *x, int n, double *logp);

/* KL(P || Q) = sum p_i (log p_i - log q_i), from log-probabilities; terms with
 * p_i == 0 contribute 0. Clamped at 0 against rounding. */
double gt_kl_div(const double *logp, const double *logq, int n);

/* KL over a summary of P: k entries (ids[j], logp[j]) plus the tail bucket
 * (every other outcome merged, total mass p_tail); Q is full (logq over the
 * whole vocabulary). Equals the full KL when p_tail is 0, and is a lower
 * bound otherwise (merging outcomes never increases KL). A p_tail below
 * 1e-12 is rounding, not information, and is ignored. */
double gt_kl_div_topk(const int32_t *ids, const double *logp, int k, double p_tail,
                      const double *logq);

/* sum (x - ref)^2 / sum ref^2; 0 when both are zero, +inf when only ref is. */
double gt_nmse(const float *ref, const float *x, int n);

/* The q-quantile (0..1) of v by linear interpolation between order
 * statistics; sorts v in place. NaN for n == 0. */
double gt_percentile(double *v, int n, double q);

/* Median of v (sorts in place) and the relative spread (q75 - q25) / median:
 * the interquartile range, unlike max - min, does not grow with every
 * repetition added, so "repeat until the spread is small" can terminate. */
double gt_median(double *v, int n);
double gt_rel_spread(double *v, int n);

/* Indices of the k largest x (ties to the lower index), in decreasing order
 * of x; k <= n. */
void gt_top_k(const float *x, int n, int k, int32_t *ids);

/* A small deterministic RNG (splitmix64) for fault injection and seeds:
 * next value, and a uniform double in [0, 1). */
uint64_t gt_rng_next(uint64_t *state);
double gt_rng_uniform(uint64_t *state);

#endif
