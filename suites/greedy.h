/* greedy.h: the generation loop the suites share.
 *
 * Every suite that compares generated tokens must generate them the same
 * way, or a difference in the loop would look like a backend difference:
 * tokenize with the model's BOS rule, truncate the session to 0, evaluate
 * the prompt as one batch, then argmax, append, evaluate each new token. The
 * loop evaluates the last generated token too, so after it the session's
 * logits (in the caller's buffer) predict the token after out[n-1]; that is
 * what lets the functional suite save the state mid-generation and continue
 * in another session. */
#ifndef GT_SUITE_GREEDY_H
#define GT_SUITE_GREEDY_H

#include <stdint.h>

#include "gt/error.h"
#include "gt/model.h"
#include "gt/sampler.h"
#include "gt/session.h"

/* Tokens of text with the model's BOS rule into ids (at most max); returns
 * the count (which may exceed max: the caller checks), -1 with err. */
int gt_greedy_tokenize(const gt_model *m, const char *text, int32_t *ids, int max, gt_err *err);

/* Resets s, evaluates prompt, then continues n_gen tokens (see below). */
int gt_greedy_run(gt_session *s, const int32_t *prompt, int n_prompt, int n_gen, int32_t *out,
                  float *logits, gt_err *err);

/* From logits (the prediction for the next position), n_gen steps of
 * argmax + eval; logits is updated in place. With sampler non-NULL it
 * samples instead of taking the argmax. */
int gt_greedy_continue(gt_session *s, gt_sampler *sampler, int n_gen, int32_t *out,
                       float *logits, gt_err *err);

#endif
