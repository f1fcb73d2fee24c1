/* test_swa_cache.c: Gemma 3's sliding-window layers keep a bounded KV cache
 * (window - 1 + n_batch positions, runtime/src/session.c), and the window
 * is real.
 *
 * On the real Gemma 3 270M Q4_K_M file, with a window of 512:
 * 1. A session with the bounded cache and one that keeps every position
 *    (swa_full) read the same 600 tokens of suites/data/eval.txt in
 *    batches of 32, then decode 8 more one at a time. The bounded cache
 *    has moved its window down 3 times by then, overwriting what lay
 *    before it, so the local layers cannot have read anything outside
 *    their window; the logits must still be the same bytes as the full
 *    cache's (reference and cpu). Its local layers hold 543 positions
 *    (512 - 1 + 32), the global ones 1024, and the KV bytes say so.
 * 2. Truncating the bounded session to a position whose window was
 *    dropped fails with a reason; the full session allows it. A saved
 *    state restores the bounded session to the same logits.
 * Skips with its reason without the model ($GT_GEMMA3) and under
 * sanitizers (600 tokens of a 262,144-token model take many minutes). */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gt/backend.h"
#include "gt/model.h"
#include "gt/session.h"
#include "gt/tokenizer.h"

enum { N_CTX = 1024, N_BATCH = 32, N_PROMPT = 600, N_DECODE = 8 };

static gt_model *model;
static int32_t ids[N_PROMPT + N_DECODE + 1];

static void setup(void)
{
    gt_err err = {{0}};
    ck_assert_msg(gt_model_load(gt_test_gemma3(), &model, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(gt_model_hparams(model)->swa_window, 512);
    char *text = gt_test_slurp(GT_SOURCE_DIR "/suites/data/eval.txt");
    ck_assert_ptr_nonnull(text);
    enum { CAP = 16384 };
    int32_t *all = malloc(sizeof(int32_t) * CAP);
    ck_assert_ptr_nonnull(all);
    const int n = gt_tokenize(gt_model_tokenizer(model), text, strlen(text), true, all, CAP, &err);
    ck_assert_msg(n >= (int)(sizeof ids / sizeof ids[0]), "eval.txt: %d tokens (%s)", n, err.msg);
    memcpy(ids, all, sizeof ids);
    free(all);
    free(text);
}

static void teardown(void)
{
    gt_model_free(model);
}

static gt_session *open_session(gt_backend *b, bool full)
{
    gt_session *s = NULL;
    gt_err err = {{0}};
    const gt_session_params sp = {.n_ctx = N_CTX, .n_batch = N_BATCH, .swa_full = full};
    ck_assert_msg(gt_session_new(model, b, &sp, &s, &err) == 0, "%s", err.msg);
    return s;
}

/* The prompt, then N_DECODE single-token evals; the logits of the last
 * prompt token and of every decoded one, (1 + N_DECODE) x n_vocab. */
static float *run(gt_session *s)
{
    const int nv = gt_model_hparams(model)->n_vocab;
    float *out = malloc(sizeof(float) * (size_t)nv * (1 + N_DECODE));
    ck_assert_ptr_nonnull(out);
    gt_err err = {{0}};
    ck_assert_msg(gt_session_eval(s, ids, N_PROMPT, false, out, &err) == 0, "%s", err.msg);
    for (int i = 0; i < N_DECODE; i++)
        ck_assert_msg(gt_session_eval(s, ids + N_PROMPT + i, 1, false, out + (size_t)(i + 1) * nv,
                                      &err) == 0,
                      "%s", err.msg);
    return out;
}

static void bounded_equals_full(const char *backend)
{
    gt_backend *b = NULL;
    gt_err err = {{0}};
    const gt_backend_config cfg = {.device = 0, .n_threads = 2, .driver = NULL};
    ck_assert_msg(gt_backend_open(backend, &cfg, &b, &err) == 0, "%s", err.msg);
    const gt_hparams *hp = gt_model_hparams(model);
    gt_session *bounded = open_session(b, false), *full = open_session(b, true);

    ck_assert(gt_hparams_layer_local(hp, 0) && !gt_hparams_layer_local(hp, 5));
    ck_assert_int_eq(gt_session_kv_rows(bounded, 0), 512 - 1 + N_BATCH);
    ck_assert_int_eq(gt_session_kv_rows(bounded, 5), N_CTX);
    ck_assert_int_eq(gt_session_kv_rows(full, 0), N_CTX);
    const uint64_t per_pos = 2ull * hp->n_head_kv * hp->head_dim * sizeof(float);
    ck_assert_uint_eq(gt_session_kv_bytes(full), per_pos * hp->n_layer * N_CTX);
    ck_assert_uint_eq(gt_session_kv_bytes(bounded),
                      per_pos * (15ull * (512 - 1 + N_BATCH) + 3ull * N_CTX));
    ck_assert_uint_eq(gt_kv_cache_bytes(hp, N_CTX, N_BATCH, false, GT_TYPE_F32), gt_session_kv_bytes(bounded));

    float *want = run(full), *got = run(bounded);
    const size_t bytes = sizeof(float) * (size_t)hp->n_vocab * (1 + N_DECODE);
    if (memcmp(got, want, bytes) != 0) {
        size_t i = 0;
        while (memcmp(got + i, want + i, sizeof(float)) == 0)
            i++;
        ck_abort_msg("%s: bounded cache logit %zu (eval %zu) is %.9g, the full cache's %.9g", backend,
                     i, i / (size_t)hp->n_vocab, got[i], want[i]);
    }
    printf("%s: %d + %d tokens, bounded (%.1f MiB KV) == full (%.1f MiB KV), same bytes\n", backend,
           N_PROMPT, N_DECODE, gt_session_kv_bytes(bounded) / 1048576.0,
           gt_session_kv_bytes(full) / 1048576.0);

    /* Saved and restored: the same next logits. */
    const int nv = hp->n_vocab;
    const size_t st_size = gt_session_state_size(bounded);
    void *st = malloc(st_size);
    float *a = malloc(sizeof(float) * (size_t)nv), *c = malloc(sizeof(float) * (size_t)nv);
    ck_assert(st && a && c);
    ck_assert_msg(gt_session_state_save(bounded, st, st_size, &err) == 0, "%s", err.msg);
    const int32_t next = ids[N_PROMPT + N_DECODE];
    ck_assert_msg(gt_session_eval(bounded, &next, 1, false, a, &err) == 0, "%s", err.msg);
    ck_assert_msg(gt_session_state_load(bounded, st, st_size, &err) == 0, "%s", err.msg);
    ck_assert_msg(gt_session_eval(bounded, &next, 1, false, c, &err) == 0, "%s", err.msg);
    ck_assert_msg(memcmp(a, c, sizeof(float) * (size_t)nv) == 0, "restored state: other logits");

    /* Position 100's window (0..99) was overwritten long ago. */
    ck_assert_int_ne(gt_session_truncate(bounded, 100, &err), 0);
    ck_assert_msg(strstr(err.msg, "sliding-window") != NULL, "%s", err.msg);
    ck_assert_msg(gt_session_truncate(full, 100, &err) == 0, "%s", err.msg);
    /* The last batch moved the window down to 97..608 (base = 608 - 511):
     * dropping the newest token keeps what position 608 reads, one more
     * does not. */
    const int n_past = gt_session_n_past(bounded);
    ck_assert_int_eq(n_past, N_PROMPT + N_DECODE + 1);
    ck_assert_msg(gt_session_truncate(bounded, n_past - 1, &err) == 0, "%s", err.msg);
    ck_assert_int_ne(gt_session_truncate(bounded, n_past - 2, &err), 0);

    free(st);
    free(a);
    free(c);
    free(want);
    free(got);
    gt_session_free(bounded);
    gt_session_free(full);
    gt_backend_close(b);
}

START_TEST(reference_bounded_equals_full)
{
    bounded_equals_full("reference");
}
END_TEST

START_TEST(cpu_bounded_equals_full)
{
    bounded_equals_full("cpu");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("swa_cache");
    TCase *tc = tcase_create("gemma3");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 900);
    const bool have = gt_test_gemma3() != NULL;
    const bool san = gt_test_sanitized();
    const char *why = san ? "sanitized build: 600 tokens of a 262,144-token model take many minutes "
                            "under ASan; the plain build runs this case"
                          : "Gemma 3 270M Q4_K_M not fetched ($GT_GEMMA3; ci/fetch-models.sh "
                            "gemma3-270m-q4_k_m)";
    gt_test_add_if(tc, reference_bounded_equals_full, have && !san, why);
    gt_test_add_if(tc, cpu_bounded_equals_full, have && !san, why);
    suite_add_tcase(s, tc);
    return gt_test_run(s);
}
