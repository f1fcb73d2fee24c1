/* soak.c: does the cell stay healthy when used for a long time?
 *
 * For duration_s seconds (the tier decides: 30 in CI, 600 nightly, 3600+
 * for a release) it repeats: create a session, generate n_gen sampled
 * tokens from the next prompt of the set with a fixed seed per prompt,
 * free the session. Sampling (temperature 0.8, top-k 40, top-p 0.95) rather
 * than greedy, so the sampler and its RNG are exercised too; the seed makes
 * it reproducible, so every later output for a prompt must equal the first
 * one. RSS (VmRSS) is sampled after every iteration.
 *
 * Fails when: any iteration errors; any output differs from that prompt's
 * first one; RSS grows by more than rss_growth_mib (default tolerance 2 MiB)
 * between the end of the warm-up and the end. The warm-up is warmup_cycles
 * passes over the prompts and at least the first 20% of the duration:
 * allocator pools, backend caches and lazily built kernels settle there
 * (measured: the reference backend's RSS rises ~0.7 MiB over its first
 * ~30 iterations and then stays flat for hundreds). The final sample is compared, not the maximum: a transient
 * peak is not a leak, a level that stays up is.
 *
 * GT_FAULT=leak=N leaks N bytes (suffixes KiB, MiB accepted: "leak=1MiB")
 * per iteration, touched so they count in RSS; the suite must then fail. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "greedy.h"
#include "gt/sampler.h"
#include "gt/session.h"
#include "promptset.h"
#include "suite.h"

static const gt_metric_def METRICS[] = {
    {"iterations", "count", +1, false, NULL, "session create/generate/free cycles run"},
    {"errors", "count", -1, false, "{\"eq\": 0}", "iterations that failed"},
    {"output_mismatches", "count", -1, false, "{\"eq\": 0}",
     "outputs different from the first one for the same prompt and seed"},
    {"rss_growth_mib", "MiB", -1, false, "{\"max\": 2, \"note\": \"loose: RSS moves in pages and a correct run measures 0.00; a leak of a few KiB per iteration must still fail it\"}",
     "resident memory at the end minus at the end of the warm-up"},
    {"rss_peak_mib", "MiB", -1, false, NULL, "largest resident memory sampled"},
    {"duration_s", "s", 0, false, NULL, "time soaked"},
    {NULL},
};

static const gt_setting_def SETTINGS[] = {
    {"duration_s", GT_SET_NUM, "how long to soak (default 30)"},
    {"n_gen", GT_SET_INT, "tokens per iteration (default 16)"},
    {"n_ctx", GT_SET_INT, "session context (default 256)"},
    {"max_prompts", GT_SET_INT, "prompts cycled through (default 4)"},
    {"warmup_cycles", GT_SET_INT, "passes over the prompts before RSS counts (default 2)"},
    {"prompts", GT_SET_STR, "prompt set file (default by model)"},
    {"cells", GT_SET_STRINGS, "cell-id globs soaked (default all): soak time is per cell"},
    {NULL},
};

static double rss_mib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    char line[256];
    double mib = -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0) {
            mib = atol(line + 6) / 1024.0;
            break;
        }
    fclose(f);
    return mib;
}

/* "1MiB" / "64KiB" / "1048576": the leak fault's argument, from GT_FAULT. */
static size_t leak_bytes(const gt_suite_ctx *c)
{
    const char *p = c->faults ? strstr(c->faults, "leak=") : NULL;
    if (!p)
        return 0;
    char *end;
    double v = strtod(p + 5, &end);
    if (strncmp(end, "MiB", 3) == 0 || strncmp(end, "M", 1) == 0)
        v *= 1024 * 1024;
    else if (strncmp(end, "KiB", 3) == 0 || strncmp(end, "K", 1) == 0)
        v *= 1024;
    return v > 0 ? (size_t)v : 0;
}

static int one_iteration(gt_suite_ctx *c, const gt_model *m, const gt_prompt *p, int n_gen,
                         int n_ctx, uint64_t seed, int32_t *out, float *logits, gt_err *err)
{
    gt_session *s = NULL;
    gt_session_params sp = {.n_ctx = n_ctx};
    int32_t *ids = malloc((size_t)n_ctx * sizeof *ids);
    gt_sampler_params smp = {.temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .seed = seed};
    gt_sampler *sm = gt_sampler_new(&smp, gt_model_hparams(m)->n_vocab);
    int rc = -1;
    if (!ids || !sm) {
        gt_err_set(err, "out of memory");
        goto out;
    }
    int np = gt_greedy_tokenize(m, p->text, ids, n_ctx, err);
    if (np < 0)
        goto out;
    if (np < 1 || np + n_gen > n_ctx) {
        gt_err_set(err, "prompt %s has %d tokens; with %d generated it does not fit %d", p->id,
                   np, n_gen, n_ctx);
        goto out;
    }
    if (gt_session_new(m, c->backend, &sp, &s, err) != 0 ||
        gt_session_eval(s, ids, np, false, logits, err) != 0 ||
        gt_greedy_continue(s, sm, n_gen, out, logits, err) != 0)
        goto out;
    rc = 0;
out:
    gt_session_free(s);
    gt_sampler_free(sm);
    free(ids);
    return rc;
}

static int soak_run(gt_suite_ctx *c, gt_err *err)
{
    double duration = gt_suite_num(c, "duration_s", 30);
    int n_gen = (int)gt_suite_int(c, "n_gen", 16);
    int n_ctx = (int)gt_suite_int(c, "n_ctx", 256);
    int warm_cycles = (int)gt_suite_int(c, "warmup_cycles", 2);
    if (duration <= 0 || n_gen < 1 || n_ctx < 8 || warm_cycles < 0)
        return gt_err_set(err, "soak settings: duration_s > 0, n_gen >= 1, n_ctx >= 8");
    if (!gt_suite_cell_selected(c)) {
        gt_suite_result(c, "soak", GT_ST_SKIP,
                        GT_SKIP_MATRIX ": cell %s is not in this tier's soak cells", c->cell_id);
        return 0;
    }
    gt_model *m;
    if (gt_suite_model(c, &m, err) != 0)
        return -1;
    int n_vocab = gt_model_hparams(m)->n_vocab;
    gt_promptset ps;
    if (gt_promptset_load(c, n_vocab, (int)gt_suite_int(c, "max_prompts", 4), &ps, err) != 0)
        return -1;
    /* Prompts that cannot fit are dropped here, once, not counted as errors. */
    int kept = 0;
    for (int i = 0; i < ps.n; i++) {
        int32_t tmp[8];
        int np = gt_greedy_tokenize(m, ps.p[i].text, tmp, 8, NULL);
        if (np >= 1 && np + n_gen <= n_ctx)
            ps.p[kept++] = ps.p[i];
        else
            free(ps.p[i].text);
    }
    ps.n = kept;
    int32_t *first = calloc((size_t)(ps.n ? ps.n : 1) * n_gen, sizeof *first);
    int32_t *out = malloc((size_t)n_gen * sizeof *out);
    float *logits = malloc((size_t)n_vocab * sizeof *logits);
    bool *have = calloc((size_t)(ps.n ? ps.n : 1), sizeof *have);
    int rc = -1;
    if (!first || !out || !logits || !have) {
        gt_err_set(err, "out of memory");
        goto out;
    }
    if (ps.n == 0) {
        gt_err_set(err, "no prompt of %s fits %d tokens with %d generated", ps.path, n_ctx, n_gen);
        goto out;
    }
    size_t leak = leak_bytes(c);
    long iters = 0, errors = 0, mismatches = 0;
    char first_error[512] = "", first_mismatch[256] = "";
    double rss_warm = -1, rss_peak = 0, rss_end = 0;
    int warm_iters = warm_cycles * ps.n, warm_done = 0;
    const double warm_frac = 0.2;
    double t0 = gt_suite_now(), now = t0;
    /* At least the warm-up plus one more cycle, so growth is always measured. */
    while (now - t0 < duration || rss_warm < 0 || iters < warm_done + ps.n) {
        int pi = (int)(iters % ps.n);
        gt_err e = {{0}};
        if (one_iteration(c, m, &ps.p[pi], n_gen, n_ctx, c->seed + (uint64_t)pi, out, logits,
                          &e) != 0) {
            if (!errors++)
                snprintf(first_error, sizeof first_error, "iteration %ld (%s): %s", iters,
                         ps.p[pi].id, e.msg);
        } else if (!have[pi]) {
            memcpy(first + (size_t)pi * n_gen, out, (size_t)n_gen * sizeof *out);
            have[pi] = true;
        } else if (memcmp(first + (size_t)pi * n_gen, out, (size_t)n_gen * sizeof *out) != 0) {
            if (!mismatches++)
                snprintf(first_mismatch, sizeof first_mismatch,
                         "iteration %ld: prompt %s (seed %llu) gave other tokens than its first "
                         "run",
                         iters, ps.p[pi].id, (unsigned long long)(c->seed + (uint64_t)pi));
        }
        if (leak >= sizeof(void *)) {
            /* Deliberately never freed (the fault), but kept reachable from
             * a static list so that LeakSanitizer runs of the tests do not
             * turn the injected leak into a crashed worker. */
            static void *leaked;
            char *lost = malloc(leak);
            if (lost) {
                memset(lost, (int)(iters & 0xff) | 1, leak);
                memcpy(lost, &leaked, sizeof leaked);
                leaked = lost;
            }
        }
        iters++;
        double r = rss_mib();
        if (r > rss_peak)
            rss_peak = r;
        rss_end = r;
        now = gt_suite_now();
        if (rss_warm < 0 && iters >= warm_iters && now - t0 >= warm_frac * duration) {
            rss_warm = r;
            warm_done = iters;
        }
        /* A hard stop well past the duration, whatever the warm-up needs. */
        if (now - t0 > 4 * duration + 60)
            break;
    }
    double growth = rss_warm >= 0 ? rss_end - rss_warm : 0;
    gt_suite_check(c, "errors", errors == 0, "%ld of %ld iterations failed%s%s", errors, iters,
                   errors ? "; first: " : "", first_error);
    gt_suite_check(c, "outputs", mismatches == 0,
                   "%ld of %ld outputs differ from the first for their prompt and seed%s%s",
                   mismatches, iters, mismatches ? "; first: " : "", first_mismatch);
    gt_suite_result(c, "rss", GT_ST_PASS,
                    "RSS %.1f MiB after %d warm-up iterations, %.1f MiB at the end (%+.2f MiB), "
                    "peak %.1f MiB; %ld iterations in %.1f s",
                    rss_warm, warm_done, rss_end, growth, rss_peak, iters, now - t0);
    gt_suite_metric(c, "iterations", (double)iters);
    gt_suite_metric(c, "errors", (double)errors);
    gt_suite_metric(c, "output_mismatches", (double)mismatches);
    gt_suite_metric(c, "rss_growth_mib", growth);
    gt_suite_metric(c, "rss_peak_mib", rss_peak);
    gt_suite_metric(c, "duration_s", now - t0);
    rc = 0;
out:
    free(first);
    free(out);
    free(logits);
    free(have);
    gt_promptset_free(&ps);
    return rc;
}

const gt_suite gt_suite_soak = {
    .name = "soak",
    .description = "repeated session create/generate/free for a bounded time: errors, output "
                   "drift and RSS growth",
    .metrics = METRICS,
    .settings = SETTINGS,
    .run = soak_run,
};
