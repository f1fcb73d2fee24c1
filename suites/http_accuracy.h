/* http_accuracy.h: what the http accuracy suite's two scoring methods share
 * (private to suites/http_accuracy*.c).
 *
 * Both compare, at each scored position of the eval window, what a server
 * says the next token could be (its top alternatives, as text) with the
 * reference backend's distribution on the artifact (its top GT_HA_TOPN):
 *   echo        one request per chunk, the prompt logprobs of the echo
 *               (http_accuracy.c);
 *   next-token  no echo: one request per position, max_tokens 1 on the
 *               prefix, the alternatives of the generated token
 *               (http_accuracy_next.c). Servers without echo (llama-server,
 *               every chat endpoint) can be scored only this way.
 * The score (http_accuracy_score.c) is the same for both. */
#ifndef GT_SUITE_HTTP_ACCURACY_H
#define GT_SUITE_HTTP_ACCURACY_H

#include <stdbool.h>
#include <stdint.h>

#include "http_common.h"

/* Reference alternatives kept per position: the most a server is asked for
 * (OpenAI's own limit on top_logprobs is 20). */
#define GT_HA_TOPN 20

/* One chunk of the window. */
typedef struct gt_ha_chunk {
    char *text;   /* the chunk's tokens, decoded */
    int32_t *ids; /* the artifact's tokenization of text (BOS rule) */
    int n;
    int first;    /* first scored position j (predicting ids[j+1]) */
    int n_scored;
} gt_ha_chunk;

/* The reference at one scored position. */
typedef struct gt_ha_ref {
    int32_t argmax, correct;
    float lp;                    /* logprob of the correct token */
    int32_t top_id[GT_HA_TOPN];  /* largest first */
    float top_lp[GT_HA_TOPN];
} gt_ha_ref;

/* Running sums over the scored positions. */
typedef struct gt_ha_sum {
    long scored, agree;
    char dis_msg[400];           /* the first disagreement, "" when none */
    long nll_n;                  /* positions where the correct token's logprob is known */
    double nll_srv, nll_ref;
    double lp_max;               /* NaN once a compared logprob was missing */
    double kld_sum, kld_max;
    int alt_min, alt_max;        /* alternatives the server gave per position */
} gt_ha_sum;

void gt_ha_sum_init(gt_ha_sum *s);

/* Scores one position: alt[0..n_alt) the server's alternatives (largest
 * first), correct_lp its logprob of the correct token (NaN when the reply
 * has none: then looked up among the alternatives). chunk and pos name the
 * position in the first-disagreement message.
 *   top1   alt[0] is the text of the reference's argmax;
 *   KL     KL(ref || server) over the partition {each token in both top
 *          lists} + {everything else}: a lower bound on the full KL (merging
 *          outcomes never increases it), exact in what both sides reported;
 *   lp_max max |server - reference| logprob over the same shared tokens and
 *          the correct token. */
void gt_ha_sum_add(gt_ha_sum *s, const gt_model *m, const gt_ha_ref *r, const gt_hc_alt *alt,
                   int n_alt, double correct_lp, int chunk, int pos);

/* The next-token method over every planned position of ch[0..n_chunks)
 * (ref in the same order), n_conc requests in flight, asking for n_top
 * alternatives (fewer when the server refuses that many: *n_top_used).
 * Server failures are reported as failed checks ("logprobs", "token_count")
 * and set *failed; -1 with err only for the harness's own failures. */
int gt_ha_next_token(gt_suite_ctx *c, const gt_hc *t, const gt_model *m, const gt_ha_chunk *ch,
                     int n_chunks, const gt_ha_ref *ref, int n_top, int n_conc, gt_ha_sum *s,
                     int *n_top_used, bool *failed, gt_err *err);

#endif
