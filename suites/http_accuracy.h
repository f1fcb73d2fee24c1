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
 * The score (http_accuracy_score.c) is the same for both, and for the
 * decode path (http_accuracy_decode.c), where the server generates and the
 * reference is teacher-forced on what it generated. Every logprobs reply
 * is checked for being a distribution over the vocabulary
 * (http_wellformed.c). */
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
 * Every reply's logprobs go through gt_ha_wf_check (v, wf, below).
 * Server failures are reported as failed checks ("logprobs", "token_count")
 * and set *failed; -1 with err only for the harness's own failures. */
typedef struct gt_ha_vocab gt_ha_vocab;
typedef struct gt_ha_wf gt_ha_wf;
int gt_ha_next_token(gt_suite_ctx *c, const gt_hc *t, const gt_model *m, const gt_ha_chunk *ch,
                     int n_chunks, const gt_ha_ref *ref, int n_top, int n_conc, gt_ha_sum *s,
                     int *n_top_used, bool *failed, const gt_ha_vocab *v, gt_ha_wf *wf,
                     gt_err *err);

/* The vocabulary as a server names tokens: each token's text (its bytes
 * cleaned to UTF-8, gt_hc_piece) and its raw bytes, plus, for a control
 * token (no bytes in decoded text), its stored piece ("<|endoftext|>"), which
 * some servers send instead. Sorted, for lookups by text or bytes
 * (suites/http_wellformed.c). */
int gt_ha_vocab_open(const gt_model *m, gt_ha_vocab **out, gt_err *err);
void gt_ha_vocab_free(gt_ha_vocab *v);

/* The ids whose name is the alternative's: by its bytes when the reply gave
 * them, else by its text. Up to cap into ids; returns how many there are
 * (0: no token of the vocabulary; -1: its bytes are not a byte array). */
int gt_ha_vocab_ids(const gt_ha_vocab *v, const gt_hc_alt *a, int32_t *ids, int cap);

/* Whether two alternatives name the same token text (bytes when both have
 * them). */
bool gt_ha_same_token(const gt_hc_alt *a, const gt_hc_alt *b);

/* The check logprobs_wellformed: at every position a reply gave
 * alternatives for, each alternative is a token of the vocabulary, their
 * probabilities sum to at most 1 + GT_HA_WF_SUM_EPS, and, for a token the
 * server generated at temperature 0, that token is the top alternative (or
 * tied with it within GT_HA_WF_TIE). The first bad position is kept. */
#define GT_HA_WF_SUM_EPS 1e-3
#define GT_HA_WF_TIE 1e-4

struct gt_ha_wf {
    long positions, bad;
    char first[480]; /* the first bad position and why, "" when none */
};

/* Checks position i of logprobs; sampled: a token generated at temperature
 * 0. where names the reply ("chunk 3 (echo)"), for the message. */
void gt_ha_wf_check(gt_ha_wf *wf, const gt_ha_vocab *v, const cJSON *logprobs, int i,
                    bool sampled, const char *where);

/* The check's result line. */
void gt_ha_wf_result(gt_suite_ctx *c, const gt_ha_wf *wf);

/* The decode path (suites/http_accuracy_decode.c): greedy generations of
 * the prompt set compared with the reference's, and the logprobs the server
 * returned for its own tokens scored against the reference teacher-forced
 * on them. Reports the check "decode" and the decode_* metrics; server
 * failures are failed checks; -1 with err for the harness's own. */
int gt_ha_decode(gt_suite_ctx *c, const gt_hc *t, const gt_model *m, const gt_ha_vocab *v,
                 int n_top, gt_ha_wf *wf, gt_err *err);

#endif
