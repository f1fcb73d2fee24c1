/* cmd_bench_schema.c: `gauntlet bench --json-schema FILE` (or --json-object):
 * the cost of constrained decoding (gt/constraint.h) set beside the decode
 * it constrains. A greedy generation under the constraint runs once to warm
 * up, then -r times; each step times the backend's decode (one token's
 * eval), the mask over the whole vocabulary, and the accept of the chosen
 * token. The table gives the per-token means, the slowest mask, the
 * constraint's build time (schema compile + the vocabulary's byte trie, on
 * the model's first constraint), a second constraint's (the schema alone:
 * the vocabulary's side is kept on the model) and the overhead in % of
 * decode. In-process and single-threaded on the
 * constraint's side: the mask runs on the calling thread. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "gt/sampler.h"

typedef struct sums {
    double decode, mask, accept, mask_max;
    long tokens, masks;
    bool complete;
} sums;

/* One constrained greedy generation from a fresh session state. */
static int run_once(gt_cli_run *run, gt_constraint *con, const int32_t *ids, int n_ids, long n_gen,
                    float *logits, sums *s, gt_err *err)
{
    const int nv = gt_model_hparams(run->model)->n_vocab;
    gt_constraint_reset(con);
    if (gt_session_truncate(run->session, 0, err) != 0 ||
        gt_session_eval(run->session, ids, n_ids, false, logits, err) != 0)
        return -1;
    for (long i = 0; i < n_gen; i++) {
        double t0 = gt_now();
        if (gt_constraint_mask(con, logits) == 0)
            return gt_err_set(err, "the constraint allows no token");
        const double dm = gt_now() - t0;
        s->mask += dm;
        s->mask_max = dm > s->mask_max ? dm : s->mask_max;
        s->masks++;
        int32_t t = gt_argmax(logits, nv);
        if (gt_constraint_is_end(con, t))
            break;
        t0 = gt_now();
        if (gt_constraint_accept(con, t, err) != 0)
            return -1;
        s->accept += gt_now() - t0;
        t0 = gt_now();
        if (gt_session_eval(run->session, &t, 1, false, logits, err) != 0)
            return -1;
        s->decode += gt_now() - t0;
        s->tokens++;
    }
    s->complete = gt_constraint_done(con);
    return 0;
}

int gt_bench_schema(const char *model, const char *backend, int threads, const char *driver,
                    const char *schema, bool json_object, const char *prompt, long n_gen,
                    long reps)
{
    gt_cli_run run;
    if (gt_cli_open("bench", model, backend, threads, driver, 0, &run) != 0)
        return GT_EXIT_USAGE;
    int rc = GT_EXIT_OK, n_ids = 0;
    gt_constraint *con = NULL;
    const double t0 = gt_now();
    if (gt_cli_constraint("bench", run.model, schema, json_object, &con) != 0) {
        gt_cli_close(&run);
        return GT_EXIT_USAGE;
    }
    const double t_build = gt_now() - t0;
    /* again: the vocabulary's side is kept on the model, so a second
     * constraint (serve's next request) pays only the schema */
    gt_constraint *again = NULL;
    const double t1 = gt_now();
    if (gt_cli_constraint("bench", run.model, schema, json_object, &again) != 0) {
        gt_constraint_free(con);
        gt_cli_close(&run);
        return GT_EXIT_USAGE;
    }
    const double t_again = gt_now() - t1;
    gt_constraint_free(again);
    const int nv = gt_model_hparams(run.model)->n_vocab;
    float *logits = malloc(sizeof(float) * (size_t)nv);
    int32_t *ids = gt_cli_tokenize("bench", run.model, prompt, false, &n_ids);
    gt_err err = {{0}};
    sums warm = {0}, s = {0};
    if (!logits || !ids || n_ids == 0) {
        rc = GT_EXIT_USAGE;
        goto done;
    }
    if (run_once(&run, con, ids, n_ids, n_gen, logits, &warm, &err) != 0) {
        fprintf(stderr, "gauntlet bench: %s\n", err.msg);
        rc = GT_EXIT_FAIL;
        goto done;
    }
    for (long r = 0; r < reps; r++) {
        if (run_once(&run, con, ids, n_ids, n_gen, logits, &s, &err) != 0) {
            fprintf(stderr, "gauntlet bench: %s\n", err.msg);
            rc = GT_EXIT_FAIL;
            goto done;
        }
    }
    const double tok = s.tokens > 0 ? (double)s.tokens : 1, msk = s.masks > 0 ? (double)s.masks : 1;
    const double dec = 1e3 * s.decode / tok, mk = 1e3 * s.mask / msk, ac = 1e3 * s.accept / tok;
    printf("| model | backend | vocab | tokens | decode ms/tok | mask ms/tok | accept ms/tok | "
           "overhead | mask max ms | build ms | again ms | complete |\n"
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
    printf("| %s | %s | %d | %ld | %.3f | %.3f | %.4f | %.1f%% | %.3f | %.1f | %.2f | %s |\n",
           gt_model_hparams(run.model)->name[0] ? gt_model_hparams(run.model)->name : model,
           backend, nv, s.tokens / reps, dec, mk, ac, dec > 0 ? 100.0 * (mk + ac) / dec : 0.0,
           1e3 * s.mask_max, 1e3 * t_build, 1e3 * t_again, s.complete ? "yes" : "no (raise -n)");
done:
    free(ids);
    free(logits);
    gt_constraint_free(con);
    gt_cli_close(&run);
    return rc;
}
