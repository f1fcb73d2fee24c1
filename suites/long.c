/* long.c: the long suite: does the cell stay right at long contexts?
 *
 * For each length L of the tier (set per model: "lengths": {"gemma3-270m":
 * [4096, 16384, 32768], "*": [2048]}):
 *   - passkey retrieval: a 5-digit key hidden at depths (default 10%, 50%,
 *     90%) of seeded filler, asked for at the end (base/passkey.h). The
 *     greedy answer is judged against the reference backend's on the same
 *     prompt (check passkey_L<L>_d<pct>: the same tokens); whether it holds
 *     the key is the model's ability, recorded (passkey_score), not judged;
 *   - memory: the K/V bytes the session allocated against the plan
 *     (gt_kv_cache_bytes with the session's n_ctx, n_batch, K/V type and
 *     sequences; check kv_L<L>, metric kv_ratio), and the peak RSS so far;
 *   - drift against depth (long_drift.c).
 * The reference's answers are cached by prompt, so a second run costs the
 * cell only. A length past the model's trained context is refused by name:
 * what the model was never trained for is not a portability question. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "greedy.h"
#include "gt/session.h"
#include "gt/tokenizer.h"
#include "long.h"
#include "refdist.h"

static const gt_metric_def METRICS[] = {
    {"drift_kld_mean", "nats", -1, false, "{\"max\": 1e-6}",
     "mean KL(ref || cell) over the scored positions before the deepest checkpoint, the cell "
     "decoding token by token (each checkpoint's drift_L<L> check uses the same bound)"},
    {"drift_kld_max", "nats", -1, false, NULL,
     "largest KL of any position scored before the deepest checkpoint"},
    {"drift_top1", "ratio", +1, false, NULL,
     "scored positions before the deepest checkpoint where cell and reference argmax agree"},
    {"passkey_score", "ratio", +1, false, NULL,
     "passkey prompts whose greedy answer holds the key: the model's ability, recorded"},
    {"passkey_agreement", "ratio", +1, false, "{\"min\": 1}",
     "passkey prompts whose greedy answer is the reference's, token for token"},
    {"kv_ratio", "ratio", -1, false, "{\"max\": 1.05}",
     "largest K/V bytes allocated / planned (gt_kv_cache_bytes) over the lengths"},
    {"peak_rss_mib", "MiB", -1, false, NULL, "the worker's peak resident memory after the suite"},
    {NULL},
};

static const gt_setting_def SETTINGS[] = {
    {"cells", GT_SET_STRINGS, "cell-id globs that run it (default all): long contexts take "
                              "minutes per cell"},
    {"lengths", GT_SET_INTS, "context lengths L (checkpoints), ascending; per model id or \"*\" "
                             "(default [2048])"},
    {"depths", GT_SET_INTS, "passkey depths in % of the filler (default [10, 50, 90]; [] = "
                            "no passkey)"},
    {"n_scored", GT_SET_INT, "positions scored before each checkpoint (default 128)"},
    {"n_answer", GT_SET_INT, "greedy tokens of each passkey answer (default 12)"},
    {"drift", GT_SET_BOOL, "run the drift against depth (default true)"},
    {"text", GT_SET_STR, "the drift's text file, repeated to the longest length (default by "
                         "model: see promptset.h)"},
    {"top_k", GT_SET_INT, "reference logits kept per scored position at most (default 8192)"},
    {"tail_eps", GT_SET_NUM, "reference mass left out per scored position at most (default "
                             "1e-4)"},
    {NULL},
};

static double peak_rss_mib(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss / 1024.0 : 0;
}

/* The answer's text, JSON-escaped (the report parses the check message),
 * bytes that are not UTF-8 as U+FFFD (a token can be half a character). */
static void answer_text(const gt_model *m, const int32_t *ids, int n, char *out, size_t cap)
{
    char raw[512];
    int k = gt_detokenize(gt_model_tokenizer(m), ids, n, raw, sizeof raw);
    k = k < 0 ? 0 : (k < (int)sizeof raw ? k : (int)sizeof raw - 1);
    char *clean = gt_utf8_clean(raw, (size_t)k, false);
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)(clean ? clean : ""); *p && o + 8 < cap;
         p++) {
        if (*p == '"' || *p == '\\')
            o += (size_t)snprintf(out + o, cap - o, "\\%c", *p);
        else if (*p < 0x20)
            o += (size_t)snprintf(out + o, cap - o, "\\u%04x", *p);
        else
            out[o++] = (char)*p;
    }
    out[o] = 0;
    free(clean);
}

typedef struct passkey_totals {
    int n, found, agreed;
} passkey_totals;

/* One passkey prompt on the cell's session s (and the reference's, when
 * its answer is not cached). */
static int passkey_one(gt_suite_ctx *c, const gt_model *m, gt_session *s, int L, int depth,
                       int n_answer, bool is_reference, passkey_totals *t, gt_err *err)
{
    gt_passkey pk;
    const int n_prompt = L - n_answer - 1;
    if (gt_passkey_build(m, n_prompt, depth / 100.0, c->seed, &pk, err) != 0)
        return -1;
    const size_t V = (size_t)gt_model_hparams(m)->n_vocab;
    float *logits = malloc(V * sizeof *logits);
    int32_t *cell = calloc((size_t)n_answer, sizeof *cell), *ref = NULL;
    int rc = logits && cell ? 0 : gt_err_set(err, "out of memory");
    char hash[65], key[65], settings[96];
    gt_sha256_hex(pk.tokens, (size_t)pk.n * sizeof *pk.tokens, hash);
    snprintf(settings, sizeof settings, "n_answer=%d;v1", n_answer);
    gt_suite_ref_key(c, "long-passkey", hash, settings, key);
    void *data = NULL;
    size_t size = 0;
    const int got = rc == 0 ? gt_suite_ref_get(c, key, &data, &size, err) : -1;
    if (got < 0)
        rc = -1;
    if (rc == 0)
        rc = gt_greedy_run(s, pk.tokens, pk.n, n_answer, cell, logits, err);
    bool computed_here = false;
    if (rc == 0 && got == 0 && size == (size_t)n_answer * sizeof *ref) {
        ref = data;
        data = NULL;
    } else if (rc == 0) {
        if (is_reference) {
            ref = malloc((size_t)n_answer * sizeof *ref);
            if (ref)
                memcpy(ref, cell, (size_t)n_answer * sizeof *ref);
        } else {
            gt_backend *rb = NULL;
            gt_session *rs = NULL;
            ref = calloc((size_t)n_answer, sizeof *ref);
            rc = ref ? gt_long_reference_session(c, m, L, &rb, &rs, err) : -1;
            if (rc == 0)
                rc = gt_greedy_run(rs, pk.tokens, pk.n, n_answer, ref, logits, err);
            gt_session_free(rs);
            gt_backend_close(rb);
        }
        computed_here = true;
        if (rc == 0 && ref)
            rc = gt_suite_ref_put(c, key, "long passkey answer", ref,
                                  (size_t)n_answer * sizeof *ref, err);
    }
    if (rc == 0 && ref) {
        char a_cell[256], a_ref[256], name[48];
        answer_text(m, cell, n_answer, a_cell, sizeof a_cell);
        answer_text(m, ref, n_answer, a_ref, sizeof a_ref);
        const bool same = memcmp(cell, ref, (size_t)n_answer * sizeof *ref) == 0;
        const bool found = gt_passkey_found(&pk, a_cell), rfound = gt_passkey_found(&pk, a_ref);
        snprintf(name, sizeof name, "passkey_L%d_d%d", L, depth);
        gt_suite_check(c, name, same, "key %s; cell: \"%s\" (%s); reference: \"%s\" (%s)%s",
                       pk.key, a_cell, found ? "found" : "missed", a_ref,
                       rfound ? "found" : "missed",
                       computed_here && is_reference ? " [this cell is the reference: its "
                                                       "answer is now the cached one]"
                                                     : "");
        t->n++;
        t->found += found;
        t->agreed += same;
    }
    free(data);
    free(ref);
    free(cell);
    free(logits);
    gt_passkey_free(&pk);
    return rc;
}

/* The K/V bytes of a session of n_ctx L on the cell's backend against the
 * plan; then the passkey prompts on it. */
static int length_run(gt_suite_ctx *c, const gt_model *m, int L, const int64_t *depths,
                      int n_depths, int n_answer, bool is_reference, passkey_totals *t,
                      double *kv_ratio, gt_err *err)
{
    const gt_session_params sp = {.n_ctx = L};
    gt_session *s = NULL;
    if (gt_session_new(m, c->backend, &sp, &s, err) != 0)
        return gt_err_wrap(err, "a session of %d positions", L);
    const gt_exec_settings *x = &c->backend->exec;
    const gt_type kv_type = x->kv_type ? x->kv_type : GT_TYPE_F32;
    const uint64_t have = gt_session_kv_bytes(s);
    const uint64_t plan = gt_kv_cache_bytes(gt_model_hparams(m), L, x->n_batch, false, kv_type) *
                          (uint64_t)gt_session_n_seq(s);
    const double ratio = plan ? (double)have / (double)plan : 0;
    char name[48];
    snprintf(name, sizeof name, "kv_L%d", L);
    int rc = 0;
    for (int i = 0; i < n_depths && rc == 0; i++)
        rc = passkey_one(c, m, s, L, (int)depths[i], n_answer, is_reference, t, err);
    gt_session_free(s);
    const double rss = peak_rss_mib();
    gt_suite_check(c, name, plan > 0 && ratio <= 1.05,
                   "kv %llu bytes, plan %llu (ratio %.3f); peak RSS %.1f MiB",
                   (unsigned long long)have, (unsigned long long)plan, ratio, rss);
    gt_suite_point(c, "kv_bytes", L, (double)have);
    gt_suite_point(c, "kv_plan", L, (double)plan);
    gt_suite_point(c, "peak_rss_mib", L, rss);
    if (ratio > *kv_ratio)
        *kv_ratio = ratio;
    return rc;
}

static int long_run(gt_suite_ctx *c, gt_err *err)
{
    if (!gt_suite_cell_selected(c)) {
        gt_suite_result(c, "long", GT_ST_SKIP,
                        GT_SKIP_MATRIX ": cell %s is not in this tier's long cells", c->cell_id);
        return 0;
    }
    gt_model *m;
    if (gt_suite_model(c, &m, err) != 0)
        return -1;
    gt_long_plan p = {.n_scored = (int)gt_suite_int(c, "n_scored", 128),
                      .k_max = (int)gt_suite_int(c, "top_k", GT_REFDIST_K_MAX),
                      .tail_eps = gt_suite_num(c, "tail_eps", GT_REFDIST_TAIL_EPS),
                      .is_reference = strcmp(c->backend_name, "reference") == 0};
    int64_t lengths[GT_LONG_MAX_LENGTHS], depths[16] = {10, 50, 90};
    int n = gt_suite_ints(c, "lengths", lengths, GT_LONG_MAX_LENGTHS, err);
    if (n < 0)
        return -1;
    if (n == 0)
        lengths[n++] = 2048;
    int n_depths = gt_suite_setting(c, "depths") ? gt_suite_ints(c, "depths", depths, 16, err) : 3;
    if (n_depths < 0)
        return -1;
    const int n_answer = (int)gt_suite_int(c, "n_answer", 12);
    const int V = gt_model_hparams(m)->n_vocab, trained = gt_model_hparams(m)->n_ctx_train;
    if (p.k_max > V)
        p.k_max = V;
    for (int i = 0; i < n; i++) {
        if (lengths[i] <= p.n_scored + 64 || (i > 0 && lengths[i] <= lengths[i - 1]))
            return gt_err_set(err, "lengths must ascend, each above n_scored + 64 (%d): %lld",
                              p.n_scored + 64, (long long)lengths[i]);
        if (trained > 0 && lengths[i] > trained)
            return gt_err_set(err, "length %lld is past %s's trained context (%d)",
                              (long long)lengths[i], c->model_id, trained);
        p.lengths[p.n_lengths++] = (int)lengths[i];
    }
    for (int i = 0; i < n_depths; i++)
        if (depths[i] < 0 || depths[i] > 100)
            return gt_err_set(err, "depth %lld%% is outside 0..100", (long long)depths[i]);
    if (n_answer < 1 || n_answer > 64)
        return gt_err_set(err, "n_answer %d is outside 1..64", n_answer);

    passkey_totals t = {0};
    double kv_ratio = 0;
    for (int i = 0; i < p.n_lengths; i++) {
        const double t0 = gt_suite_now();
        if (length_run(c, m, p.lengths[i], depths, n_depths, n_answer, p.is_reference, &t,
                       &kv_ratio, err) != 0)
            return -1;
        gt_suite_log(c, "%d tokens: %d passkey prompts in %.1f s", p.lengths[i], n_depths,
                     gt_suite_now() - t0);
    }
    if (t.n) {
        gt_suite_metric(c, "passkey_score", (double)t.found / t.n);
        gt_suite_metric(c, "passkey_agreement", (double)t.agreed / t.n);
    }
    gt_suite_metric(c, "kv_ratio", kv_ratio);
    if (gt_suite_bool(c, "drift", true) && gt_long_drift_run(c, m, &p, err) != 0)
        return -1;
    gt_suite_metric(c, "peak_rss_mib", peak_rss_mib());
    return 0;
}

const gt_suite gt_suite_long = {
    .name = "long",
    .description = "long contexts: passkey retrieval against the reference, drift against "
                   "depth, K/V memory against its plan",
    .metrics = METRICS,
    .settings = SETTINGS,
    .run = long_run,
};
