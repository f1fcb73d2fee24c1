/* smoke.c: the first suite of every tier: does this cell work at all?
 *
 * Loads the model (timed), opens a session on the cell's backend, and
 * generates n_tokens greedy tokens from each of a few prompts, counting
 * non-finite logits and token ids outside the vocabulary at every step. It
 * judges nothing about accuracy: a backend that produces garbage passes
 * smoke as long as the garbage is finite and in range. That is the accuracy
 * suite's job; smoke is what makes the later suites' failures meaningful.
 *
 * With "reference": true it also compares its greedy tokens with the
 * reference backend's on the same weights (from the reference cache, computed
 * once per model artifact, prompt set and settings) and reports the fraction
 * of tokens generated before the first divergence. That comparison is always
 * judged: ref_agreement must be >= 0.9 (same weights, same greedy decoding:
 * a backend computing the same function agrees token for token; 0.9 leaves
 * room for one near-tie flip late in a prompt), and a matrix may set another
 * bound per quant or cell (4-bit quants diverge earlier on near-ties). The
 * check "reference" fails with the value and the bound when it is outside,
 * e.g. a BLAS that returns zeros: "ref_agreement 0.000 < 0.9". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gt/backend.h"
#include "gt/model.h"
#include "gt/sampler.h"
#include "gt/session.h"
#include "gt/tokenizer.h"
#include "http_common.h"
#include "base.h"
#include "suite.h"

static const char *const DEFAULT_PROMPTS[] = {
    "Once upon a time",
    "The little dog",
    "Zoo",
};

static const gt_metric_def METRICS[] = {
    {"load_ms", "ms", -1, false, NULL, "time to load the model artifact"},
    {"prefill_tps", "tok/s", +1, false, NULL, "prompt tokens per second (all prompts)"},
    {"decode_tps", "tok/s", +1, true, NULL, "generated tokens per second"},
    {"nonfinite", "count", -1, false, "{\"eq\": 0}", "NaN/Inf values seen in logits"},
    {"out_of_range", "count", -1, false, "{\"eq\": 0}", "token ids outside the vocabulary"},
    {"ref_agreement", "ratio", +1, false, "{\"min\": 0.9}",
     "greedy tokens equal to the reference backend's before the first divergence"},
    {NULL},
};

static const gt_setting_def SETTINGS[] = {
    {"n_tokens", GT_SET_INT, "tokens to generate per prompt (default 16)"},
    {"prompts", GT_SET_STRINGS, "prompts (default: three short story openings)"},
    {"n_ctx", GT_SET_INT, "session context (default 256)"},
    {"reference", GT_SET_BOOL, "compare greedy tokens with the reference backend (http cells: "
                               "default true)"},
    {"min_ref_agreement", GT_SET_NUM, "http cells: check reference fails below this "
                                      "ref_agreement (default 0.5)"},
    {NULL},
};

typedef struct gen_stats {
    long nonfinite, out_of_range, n_prompt, n_gen;
    double t_prefill, t_decode;
} gen_stats;

static long count_nonfinite(const float *x, int n)
{
    long bad = 0;
    for (int i = 0; i < n; i++)
        bad += !isfinite(x[i]);
    return bad;
}

/* Greedy continuation of one prompt into out[n_tokens]; -1 with err on a
 * runtime failure. Counters go to st. */
static int generate(gt_suite_ctx *c, gt_session *s, const gt_model *m, const char *prompt,
                    int n_tokens, int32_t *out, gen_stats *st, gt_err *err)
{
    const gt_tokenizer *tok = gt_model_tokenizer(m);
    int n_vocab = gt_model_hparams(m)->n_vocab;
    int n_tok_vocab = gt_tokenizer_n_vocab(tok);
    int32_t ids[512];
    int n = gt_tokenize(tok, prompt, strlen(prompt), gt_tokenizer_adds_bos(tok), ids, 512, err);
    if (n < 0)
        return -1;
    if (n > 512 || n == 0)
        return gt_err_set(err, "prompt \"%s\" has %d tokens (1..512 supported)", prompt, n);
    float *logits = malloc((size_t)n_vocab * sizeof *logits);
    if (!logits)
        return gt_err_set(err, "out of memory");
    double nan_at = -1;
    bool inject_nan = gt_suite_fault(c, "nan-logits", &nan_at);
    int rc = -1;
    if (gt_session_truncate(s, 0, err) != 0)
        goto out;
    double t0 = gt_suite_now();
    if (gt_session_eval(s, ids, n, false, logits, err) != 0)
        goto out;
    st->t_prefill += gt_suite_now() - t0;
    st->n_prompt += n;
    t0 = gt_suite_now();
    for (int i = 0; i < n_tokens; i++) {
        if (inject_nan && i == (int)nan_at)
            logits[i % n_vocab] = NAN;
        st->nonfinite += count_nonfinite(logits, n_vocab);
        int32_t next = gt_argmax(logits, n_vocab);
        out[i] = next;
        if (next < 0 || next >= n_tok_vocab) {
            st->out_of_range++;
            next = 0; /* keep going: one bad id should not hide later NaNs */
        }
        st->n_gen++;
        if (i + 1 < n_tokens && gt_session_eval(s, &next, 1, false, logits, err) != 0)
            goto out;
    }
    st->t_decode += gt_suite_now() - t0;
    rc = 0;
out:
    free(logits);
    return rc;
}

/* The reference backend's greedy tokens for the same prompts, from the cache
 * or computed (and stored) now. */
static int reference_tokens(gt_suite_ctx *c, const gt_model *m, const char **prompts,
                            int n_prompts, int n_tokens, int n_ctx, const int32_t *own,
                            int32_t **out, bool *cached, gt_err *err)
{
    gt_sha256 h;
    gt_sha256_init(&h);
    for (int i = 0; i < n_prompts; i++)
        gt_sha256_update(&h, prompts[i], strlen(prompts[i]) + 1);
    char data_hash[65], settings[64], key[65];
    gt_sha256_final_hex(&h, data_hash);
    snprintf(settings, sizeof settings, "n_tokens=%d", n_tokens);
    gt_suite_ref_key(c, "smoke-greedy", data_hash, settings, key);
    size_t want = (size_t)n_prompts * (size_t)n_tokens * sizeof(int32_t);
    void *data = NULL;
    size_t size = 0;
    int r = gt_suite_ref_get(c, key, &data, &size, err);
    if (r < 0)
        return -1;
    if (r == 0 && size == want) {
        *out = data;
        *cached = true;
        return 0;
    }
    free(data);
    *cached = false;
    int32_t *toks = malloc(want);
    if (!toks)
        return gt_err_set(err, "out of memory");
    if (strcmp(c->backend_name, "reference") == 0) {
        memcpy(toks, own, want); /* this cell is the reference */
    } else {
        gt_backend *ref = NULL;
        gt_session *s = NULL;
        gt_backend_config cfg = {0};
        gt_session_params sp = {.n_ctx = n_ctx};
        gen_stats st = {0};
        if (gt_backend_open("reference", &cfg, &ref, err) != 0 ||
            gt_session_new(m, ref, &sp, &s, err) != 0) {
            gt_backend_close(ref);
            free(toks);
            return gt_err_wrap(err, "reference backend");
        }
        for (int i = 0; i < n_prompts; i++) {
            if (generate(c, s, m, prompts[i], n_tokens, toks + (size_t)i * n_tokens, &st, err)) {
                gt_session_free(s);
                gt_backend_close(ref);
                free(toks);
                return gt_err_wrap(err, "reference backend");
            }
        }
        gt_session_free(s);
        gt_backend_close(ref);
    }
    if (gt_suite_ref_put(c, key, "smoke greedy tokens (int32 per prompt x n_tokens)", toks, want,
                         err) != 0) {
        free(toks);
        return -1;
    }
    *out = toks;
    return 0;
}

/* The reference check's verdict: the cell's tolerance for ref_agreement,
 * or this suite's default bound when the context carries none (a suite run
 * outside a matrix): never an unjudged pass. */
static gt_status judge_agreement(const gt_suite_ctx *c, double agree, const char **cmp,
                                 double *bound)
{
    const cJSON *spec = c->tolerances
                            ? cJSON_GetObjectItemCaseSensitive(c->tolerances, "smoke.ref_agreement")
                            : NULL;
    cJSON *def = NULL;
    if (!spec) {
        const gt_metric_def *d = gt_suite_metric_def(c->suite, "ref_agreement");
        spec = def = cJSON_Parse(d && d->tolerance ? d->tolerance : "{\"min\": 0.9}");
    }
    gt_status v = gt_tol_eval(spec, agree, cmp, bound);
    cJSON_Delete(def);
    return v == GT_ST_FAIL ? GT_ST_FAIL : GT_ST_PASS;
}

/* The prompts setting or the defaults (shared with http_smoke.c, whose
 * reference greedy tokens share this suite's cache entry). */
int gt_smoke_prompts(const gt_suite_ctx *c, const char **out, int cap)
{
    int n = 0;
    const cJSON *pl = gt_suite_setting(c, "prompts");
    for (const cJSON *p = pl ? pl->child : NULL; p && n < cap; p = p->next)
        if (cJSON_IsString(p))
            out[n++] = p->valuestring;
    if (!pl)
        for (size_t i = 0; i < sizeof DEFAULT_PROMPTS / sizeof *DEFAULT_PROMPTS && n < cap; i++)
            out[n++] = DEFAULT_PROMPTS[i];
    return n;
}

static int smoke_run(gt_suite_ctx *c, gt_err *err)
{
    int n_tokens = (int)gt_suite_int(c, "n_tokens", 16);
    int n_ctx = (int)gt_suite_int(c, "n_ctx", 256);
    if (n_tokens < 1 || n_tokens > 4096 || n_ctx < 8)
        return gt_err_set(err, "smoke settings: n_tokens must be 1..4096 and n_ctx >= 8");
    const char *prompts[64];
    int n_prompts = 0;
    const cJSON *pl = gt_suite_setting(c, "prompts");
    for (const cJSON *p = pl ? pl->child : NULL; p && n_prompts < 64; p = p->next)
        prompts[n_prompts++] = p->valuestring;
    if (!pl)
        for (size_t i = 0; i < sizeof DEFAULT_PROMPTS / sizeof *DEFAULT_PROMPTS; i++)
            prompts[n_prompts++] = DEFAULT_PROMPTS[i];
    if (n_prompts == 0)
        return gt_err_set(err, "smoke settings: prompts is empty");

    gt_model *m = NULL;
    gt_err lerr = {{0}};
    double t0 = gt_suite_now();
    int loaded = c->model ? 0 : gt_model_load(c->model_path, &m, &lerr);
    double load_ms = (gt_suite_now() - t0) * 1e3;
    if (!gt_suite_check(c, "load", loaded == 0, "%s", loaded == 0 ? c->model_path : lerr.msg))
        return 0;
    if (m)
        c->model = m; /* shared with later suites; the worker frees it */
    m = c->model;
    gt_suite_metric(c, "load_ms", load_ms);

    gt_session *s = NULL;
    gt_session_params sp = {.n_ctx = n_ctx};
    if (!gt_suite_check(c, "session", gt_session_new(m, c->backend, &sp, &s, &lerr) == 0, "%s",
                        lerr.msg[0] ? lerr.msg : "session on the cell's backend"))
        return 0;

    int32_t *toks = calloc((size_t)n_prompts * (size_t)n_tokens, sizeof *toks);
    if (!toks) {
        gt_session_free(s);
        return gt_err_set(err, "out of memory");
    }
    gen_stats st = {0};
    int done = 0;
    for (; done < n_prompts; done++)
        if (generate(c, s, m, prompts[done], n_tokens, toks + (size_t)done * n_tokens, &st,
                     &lerr) != 0)
            break;
    gt_session_free(s);
    char first[256] = "";
    for (int i = 0; i < n_tokens && strlen(first) < sizeof first - 12; i++)
        snprintf(first + strlen(first), sizeof first - strlen(first), "%s%d", i ? " " : "",
                 toks[i]);
    if (done == n_prompts)
        gt_suite_check(c, "generate", true, "%d prompts x %d tokens; first: [%s]", n_prompts,
                       n_tokens, first);
    else
        gt_suite_check(c, "generate", false, "prompt %d: %s", done + 1, lerr.msg);
    gt_suite_metric(c, "nonfinite", (double)st.nonfinite);
    gt_suite_metric(c, "out_of_range", (double)st.out_of_range);
    if (st.t_prefill > 0)
        gt_suite_metric(c, "prefill_tps", (double)st.n_prompt / st.t_prefill);
    if (st.t_decode > 0 && st.n_gen > n_prompts)
        gt_suite_metric(c, "decode_tps", (double)(st.n_gen - n_prompts) / st.t_decode);

    if (done == n_prompts && gt_suite_bool(c, "reference", false)) {
        int32_t *ref = NULL;
        bool cached = false;
        if (reference_tokens(c, m, prompts, n_prompts, n_tokens, n_ctx, toks, &ref, &cached,
                             &lerr) != 0) {
            gt_suite_result(c, "reference", GT_ST_ERROR, "%s", lerr.msg);
        } else {
            long same = 0;
            int first_div = -1;
            for (int p = 0; p < n_prompts; p++) {
                int k = 0;
                while (k < n_tokens && toks[p * n_tokens + k] == ref[p * n_tokens + k])
                    k++;
                same += k;
                if (k < n_tokens && first_div < 0)
                    first_div = p;
            }
            double agree = (double)same / ((double)n_prompts * n_tokens);
            const char *cmp;
            double bound;
            gt_status v = judge_agreement(c, agree, &cmp, &bound);
            gt_suite_result(c, "reference", v,
                            "ref_agreement %.3f %s %.3g: %s reference; %ld/%ld tokens agree%s",
                            agree, v == GT_ST_PASS    ? cmp
                                   : cmp[0] == '>' ? "<"
                                   : cmp[0] == '<' ? ">"
                                                   : "!=",
                            bound,
                            cached ? "cached" : "computed", same, (long)n_prompts * n_tokens,
                            first_div >= 0 ? " (diverged)" : "");
            /* judged above; metric line without a second failure count */
            int before = c->n_failed;
            gt_suite_metric(c, "ref_agreement", agree);
            c->n_failed = before;
            free(ref);
        }
    }
    free(toks);
    return 0;
}

const gt_suite gt_suite_smoke = {
    .name = "smoke",
    .description = "load, generate greedy tokens, no NaN/Inf, token ids in range",
    .metrics = METRICS,
    .settings = SETTINGS,
    .run = smoke_run,
};
