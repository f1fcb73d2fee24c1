/* refdist.h: one reference next-token distribution as the accuracy suite's
 * cache keeps it, and KL divergence against it with a bound on what the
 * summary leaves out.
 *
 * Full 49,152-wide logits are 196 KB per position, too much to keep for the
 * thousands of positions a release tier scores. Most positions are peaked:
 * a few dozen tokens hold all but 1e-6 of the mass. So a summary keeps the
 * reference's tokens in decreasing order of probability until what is left
 * (the tail) is at most tail_eps, between k_min and k_max entries (k_max =
 * n_vocab makes every position exact), each as its id and its f32 logit
 * (f16 would add a rounding of ~1e-3 nats per logit, far above the 1e-12
 * drift a correct backend shows). With the entries, the summary records the
 * exact tail mass P_T (summed over the left-out tokens in double, not
 * 1 - the kept mass) and p_min, the smallest kept probability, which bounds
 * every left-out one.
 *
 * KL(P || Q) with Q full: the kept entries contribute exactly; the tail
 * T = sum_{i in tail} p_i log(p_i / q_i) is not known, but
 *   lower:  T >= P_T log(P_T / Q_T)        (log-sum inequality; Q_T is the
 *           cell's mass on the same tokens, known exactly), the value
 *           reported, equal to the full KL when P_T = 0;
 *   upper:  T <= max sum p_i log(p_i / q_i) over 0 <= p_i <= p_min,
 *           sum p_i = P_T: a convex function is largest at a vertex of that
 *           polytope, i.e. p_min on each of the tail tokens with the smallest
 *           q_i in turn and the remainder on the next one. Computed exactly.
 * The gap upper - lower is at most P_T (log(p_min / q_min) - log(P_T / Q_T)),
 * so tail_eps = 1e-6 bounds it by ~2e-5 nats per position when Q's smallest
 * probabilities are ~1e-15 (logits 35 below the top).
 *
 * Record layout (all native-endian, the cache is per machine architecture
 * only by accident: keys hold the numerics version, see numerics.h): a
 * gt_refdist_pos per scored position, then the entries of all positions,
 * ids (int32) and logits (f32) interleaved as gt_refdist_entry. */
#ifndef GT_SUITE_REFDIST_H
#define GT_SUITE_REFDIST_H

#include <stddef.h>
#include <stdint.h>

/* The accuracy suite's defaults (settings tail_eps, top_k): chosen by
 * tests/test_refdist.c's measurement on SmolLM2 (see matrices/README.md). */
#define GT_REFDIST_TAIL_EPS 1e-4
#define GT_REFDIST_K_MAX 8192

typedef struct gt_refdist_pos {
    int32_t argmax;
    int32_t k;            /* entries kept */
    float logit_correct;  /* the reference's logit of the text's next token */
    float pad;
    double lse;           /* logsumexp of the full logits, in double */
    double tail;          /* P_T: reference probability of every token not kept */
    double p_min;         /* smallest kept probability (>= any tail one) */
    uint64_t first;       /* index of this position's first entry */
} gt_refdist_pos;

typedef struct gt_refdist_entry {
    int32_t id;
    float logit;
} gt_refdist_entry;

/* Scratch for n_vocab-wide work; one per thread, reused across positions. */
typedef struct gt_refdist_scratch {
    int n;
    gt_refdist_entry *sorted;
    double *tailq;
    unsigned char *kept;
} gt_refdist_scratch;

int gt_refdist_scratch_init(gt_refdist_scratch *s, int n);
void gt_refdist_scratch_free(gt_refdist_scratch *s);

/* Summarizes logits x (n of them): fills *h (all but .first) and writes h->k
 * entries (capacity n) in decreasing order of logit, ties to the lower id.
 * k_min/k_max are clamped to 1..n. Returns h->k. */
int gt_refdist_summarize(const float *x, int n, int32_t correct, double tail_eps, int k_min,
                         int k_max, gt_refdist_scratch *s, gt_refdist_pos *h,
                         gt_refdist_entry *out);

/* KL(P || Q) of the summary (h, e) against Q's log-probabilities logq (n of
 * them): the lower bound above (the full KL when h->tail is 0); *gap gets
 * upper - lower (0 when exact). */
double gt_refdist_kl(const gt_refdist_pos *h, const gt_refdist_entry *e, const double *logq,
                     gt_refdist_scratch *s, double *gap);

#endif
