/* greedy.c: see greedy.h. */
#include "greedy.h"

#include <string.h>

int gt_greedy_tokenize(const gt_model *m, const char *text, int32_t *ids, int max, gt_err *err)
{
    const gt_tokenizer *t = gt_model_tokenizer(m);
    return gt_tokenize(t, text, strlen(text), gt_tokenizer_adds_bos(t), ids, max, err);
}

int gt_greedy_continue(gt_session *s, gt_sampler *sampler, int n_gen, int32_t *out,
                       float *logits, gt_err *err)
{
    int n_vocab = gt_model_hparams(gt_session_model(s))->n_vocab;
    for (int i = 0; i < n_gen; i++) {
        int32_t next = sampler ? gt_sampler_sample(sampler, logits) : gt_argmax(logits, n_vocab);
        out[i] = next;
        if (gt_session_eval(s, &next, 1, false, logits, err) != 0)
            return gt_err_wrap(err, "generating token %d", i + 1);
    }
    return 0;
}

int gt_greedy_run(gt_session *s, const int32_t *prompt, int n_prompt, int n_gen, int32_t *out,
                  float *logits, gt_err *err)
{
    if (gt_session_truncate(s, 0, err) != 0 ||
        gt_session_eval(s, prompt, n_prompt, false, logits, err) != 0)
        return -1;
    return gt_greedy_continue(s, NULL, n_gen, out, logits, err);
}
