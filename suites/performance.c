/* performance.c: how fast this cell is, and whether it got slower.
 *
 * llama-bench style: pp (prefill n_prompt tokens as one batch, tokens/s)
 * and tg (n_gen single-token decode steps, tokens/s), plus time to first
 * token (the prefill call that returns the first next-token logits), the
 * per-token decode latency distribution (p50/p90/p99 over every step of
 * every repetition), load time (model load + session creation, i.e. weight
 * upload), peak RSS (VmHWM) and the session's device memory.
 *
 * After one warm-up repetition (page faults, lazy kernel compilation, BLAS
 * thread start-up), at least `reps` repetitions run; while the relative
 * spread (interquartile range / median) of pp or tg exceeds spread_pct,
 * more run, up to max_reps. Medians are reported, with the spreads and the
 * number of repetitions, so a noisy machine is visible in the record rather
 * than hidden in a lucky run.
 *
 * Regression: pp_tps, tg_tps, ttft_ms, tok_p50_ms and load_ms carry
 * regress=true; given a baseline run (qualify --baseline, report
 * --baseline), the gate compares them with the same cell id in it and fails
 * a required cell one of them is worse than the matrix's
 * gate.perf_regression_pct (ci 25%, nightly 15%, release 10%), printing
 * both numbers. Absolute bounds are "info" unless a matrix sets them: speed
 * depends on the machine, a baseline from the same machine does not.
 *
 * The "measured" check judges the measurement itself: every median finite
 * and positive, and, when the tier sets max_spread, both spreads within it
 * (a comparison with a baseline means nothing under more noise than the
 * regression it is to catch). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gt/sampler.h"
#include "gt/session.h"
#include "http_common.h"
#include "metrics.h"
#include "suite.h"

static const gt_metric_def METRICS[] = {
    {"pp_tps", "tok/s", +1, true, NULL, "prefill tokens per second (median)"},
    {"tg_tps", "tok/s", +1, true, NULL, "decode tokens per second (median)"},
    {"ttft_ms", "ms", -1, true, NULL, "time to first token: prefill of the prompt (median)"},
    {"tok_p50_ms", "ms", -1, true, NULL, "decode latency per token, median"},
    {"tok_p90_ms", "ms", -1, false, NULL, "decode latency per token, 90th percentile"},
    {"tok_p99_ms", "ms", -1, false, NULL, "decode latency per token, 99th percentile"},
    {"load_ms", "ms", -1, true, NULL, "model load + session creation (weight upload)"},
    {"peak_rss_mib", "MiB", -1, false, NULL, "peak resident memory of the worker (VmHWM)"},
    {"device_mib", "MiB", -1, false, NULL, "backend memory held by the session"},
    {"pp_spread", "ratio", -1, false, NULL, "interquartile range / median of pp_tps"},
    {"tg_spread", "ratio", -1, false, NULL, "interquartile range / median of tg_tps"},
    {"reps", "count", 0, false, NULL, "measured repetitions (after one warm-up)"},
    {"read_gbs", "GB/s", +1, false, NULL,
     "this machine's read bandwidth, measured in the cell (cpu-kind devices only)"},
    {"tg_bw_pct", "%", +1, false, NULL,
     "decode: weight bytes read per second (weights per token x tg_tps) as % of read_gbs "
     "(cpu-kind devices only: a GPU reads its own memory)"},
    {"http_tps", "tok/s", +1, true, NULL,
     "http cells: generated tokens per second over all clients (server throughput)"},
    {"latency_p50_ms", "ms", -1, true, NULL, "http cells: request latency, median"},
    {"latency_p99_ms", "ms", -1, false, NULL, "http cells: request latency, 99th percentile"},
    {"requests", "count", 0, false, NULL, "http cells: requests sent (after one warm-up)"},
    {"errors", "count", -1, false, "{\"eq\": 0}",
     "http cells: requests that failed (transport, status, error event, no [DONE])"},
    {NULL},
};

static const gt_setting_def SETTINGS[] = {
    {"n_prompt", GT_SET_INT, "prefill tokens (default 64)"},
    {"n_gen", GT_SET_INT, "decode tokens (default 32)"},
    {"reps", GT_SET_INT, "repetitions at least (default 3)"},
    {"max_reps", GT_SET_INT, "repetitions at most while the spread is high (default 10)"},
    {"spread_pct", GT_SET_NUM, "spread above which repetitions are added (default 5)"},
    {"max_spread", GT_SET_NUM, "relative spread (IQR / median) of pp or tg above which the "
                               "measurement fails (default 0: not judged)"},
    {"cells", GT_SET_STRINGS, "cell-id globs measured (default all; e.g. leave out reference)"},
    {"n_clients", GT_SET_INT, "http cells: concurrent clients (default 4)"},
    {"requests", GT_SET_INT, "http cells: requests per client (default 4)"},
    {"duration_s", GT_SET_NUM, "http cells: send for this long instead of `requests` (default 0)"},
    {NULL},
};

/* A /proc/self/status field in kB ("VmHWM:"), or -1. */
static long proc_status_kb(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    char line[256];
    long kb = -1;
    size_t n = strlen(field);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0) {
            kb = atol(line + n);
            break;
        }
    fclose(f);
    return kb;
}


typedef struct rep {
    double pp_s, tg_s;
} rep;

/* One repetition; step latencies appended to lat (n_gen of them). */
static int measure(gt_session *s, const int32_t *prompt, int n_prompt, int n_gen, float *logits,
                   rep *r, double *lat, gt_err *err)
{
    int n_vocab = gt_model_hparams(gt_session_model(s))->n_vocab;
    if (gt_session_truncate(s, 0, err) != 0)
        return -1;
    double t0 = gt_suite_now();
    if (gt_session_eval(s, prompt, n_prompt, false, logits, err) != 0)
        return -1;
    double t1 = gt_suite_now();
    r->pp_s = t1 - t0;
    for (int i = 0; i < n_gen; i++) {
        int32_t next = gt_argmax(logits, n_vocab);
        double a = gt_suite_now();
        if (gt_session_eval(s, &next, 1, false, logits, err) != 0)
            return -1;
        lat[i] = gt_suite_now() - a;
    }
    r->tg_s = gt_suite_now() - t1;
    return 0;
}

static int performance_run(gt_suite_ctx *c, gt_err *err)
{
    int n_prompt = (int)gt_suite_int(c, "n_prompt", 64);
    int n_gen = (int)gt_suite_int(c, "n_gen", 32);
    int min_reps = (int)gt_suite_int(c, "reps", 3);
    int max_reps = (int)gt_suite_int(c, "max_reps", 10);
    double spread_pct = gt_suite_num(c, "spread_pct", 5);
    if (n_prompt < 1 || n_gen < 1 || min_reps < 1 || max_reps < min_reps || max_reps > 1000)
        return gt_err_set(err, "performance settings: n_prompt, n_gen, reps >= 1 and "
                               "reps <= max_reps <= 1000");
    if (!gt_suite_cell_selected(c)) {
        gt_suite_result(c, "measured", GT_ST_SKIP,
                        GT_SKIP_MATRIX ": cell %s is not in this tier's performance cells",
                        c->cell_id);
        return 0;
    }
    gt_model *shared;
    if (gt_suite_model(c, &shared, err) != 0)
        return -1;
    int n_vocab = gt_model_hparams(shared)->n_vocab;

    /* Load time on a fresh model: the shared one is already mapped. */
    gt_model *m = NULL;
    gt_session *s = NULL;
    gt_session_params sp = {.n_ctx = n_prompt + n_gen + 1};
    double t0 = gt_suite_now();
    if (gt_model_load(c->model_path, &m, err) != 0 ||
        gt_session_new(m, c->backend, &sp, &s, err) != 0) {
        gt_model_free(m);
        return -1;
    }
    double load_ms = (gt_suite_now() - t0) * 1e3;

    int32_t *prompt = malloc((size_t)n_prompt * sizeof *prompt);
    float *logits = malloc((size_t)n_vocab * sizeof *logits);
    rep *reps = calloc((size_t)max_reps, sizeof *reps);
    double *lat = malloc((size_t)(max_reps + 1) * n_gen * sizeof *lat);
    double *pp = malloc((size_t)max_reps * sizeof *pp), *tg = malloc((size_t)max_reps * sizeof *tg);
    double *tt = malloc((size_t)max_reps * sizeof *tt);
    int rc = -1, n = 0;
    if (!prompt || !logits || !reps || !lat || !pp || !tg || !tt) {
        gt_err_set(err, "out of memory");
        goto out;
    }
    /* Token ids spread over the vocabulary, deterministic: speed must not
     * depend on which text happens to be in a file. */
    const gt_tokenizer *tk = gt_model_tokenizer(m);
    int o = 0;
    if (gt_tokenizer_adds_bos(tk) && gt_tokenizer_bos(tk) >= 0)
        prompt[o++] = gt_tokenizer_bos(tk);
    uint64_t rng = c->seed;
    for (; o < n_prompt; o++)
        prompt[o] = (int32_t)(gt_rng_next(&rng) % (uint64_t)n_vocab);
    rep warm;
    if (measure(s, prompt, n_prompt, n_gen, logits, &warm, lat, err) != 0)
        goto out;
    double pp_spread = 0, tg_spread = 0;
    while (n < max_reps) {
        if (measure(s, prompt, n_prompt, n_gen, logits, &reps[n], lat + (size_t)n * n_gen, err))
            goto out;
        n++;
        if (n < min_reps)
            continue;
        for (int i = 0; i < n; i++) {
            pp[i] = n_prompt / reps[i].pp_s;
            tg[i] = n_gen / reps[i].tg_s;
        }
        pp_spread = gt_rel_spread(pp, n);
        tg_spread = gt_rel_spread(tg, n);
        if (pp_spread * 100 <= spread_pct && tg_spread * 100 <= spread_pct)
            break;
    }
    for (int i = 0; i < n; i++) {
        pp[i] = n_prompt / reps[i].pp_s;
        tg[i] = n_gen / reps[i].tg_s;
        tt[i] = reps[i].pp_s * 1e3;
    }
    double pp_med = gt_median(pp, n), tg_med = gt_median(tg, n), tt_med = gt_median(tt, n);
    int nl = n * n_gen;
    for (int i = 0; i < nl; i++)
        lat[i] *= 1e3;
    double p50 = gt_percentile(lat, nl, 0.5), p90 = gt_percentile(lat, nl, 0.9);
    double p99 = gt_percentile(lat, nl, 0.99);
    long hwm = proc_status_kb("VmHWM:");
    double max_spread = gt_suite_num(c, "max_spread", 0);
    bool sane = isfinite(pp_med) && pp_med > 0 && isfinite(tg_med) && tg_med > 0 &&
                isfinite(p50) && p50 > 0 && isfinite(load_ms) && load_ms >= 0;
    bool quiet = max_spread <= 0 || (pp_spread <= max_spread && tg_spread <= max_spread);
    char limit[64] = "";
    if (max_spread > 0)
        snprintf(limit, sizeof limit, ", limit %.0f%%", max_spread * 100);
    gt_suite_check(c, "measured", sane && quiet,
                   "pp%d %.1f tok/s, tg%d %.1f tok/s (medians of %d repetitions after a "
                   "warm-up; spread %.1f%% / %.1f%%%s%s); latency p50 %.2f ms p99 %.2f ms%s",
                   n_prompt, pp_med, n_gen, tg_med, n, pp_spread * 100, tg_spread * 100, limit,
                   (pp_spread * 100 > spread_pct || tg_spread * 100 > spread_pct)
                       ? ", above the target: repetitions capped"
                       : "",
                   p50, p99,
                   !sane    ? "; a median is not a positive finite number"
                   : !quiet ? "; too noisy to compare with a baseline"
                            : "");
    gt_suite_metric(c, "pp_tps", pp_med);
    gt_suite_metric(c, "tg_tps", tg_med);
    gt_suite_metric(c, "ttft_ms", tt_med);
    gt_suite_metric(c, "tok_p50_ms", p50);
    gt_suite_metric(c, "tok_p90_ms", p90);
    gt_suite_metric(c, "tok_p99_ms", p99);
    gt_suite_metric(c, "load_ms", load_ms);
    if (hwm >= 0)
        gt_suite_metric(c, "peak_rss_mib", hwm / 1024.0);
    gt_suite_metric(c, "device_mib", (double)gt_session_device_bytes(s) / (1024.0 * 1024.0));
    gt_suite_metric(c, "pp_spread", pp_spread);
    gt_suite_metric(c, "tg_spread", tg_spread);
    gt_suite_metric(c, "reps", n);
    /* Decode reads every weight once per token: tokens/s x weight bytes is
     * the bandwidth it used, put against what this machine can stream (the
     * same probe as `gauntlet bench`). Only where the weights live in host
     * memory. */
    if (strcmp(c->backend->info.kind, "cpu") == 0) {
        char why[160] = "";
        const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        const int nt = c->n_threads > 0 ? c->n_threads : ncpu > 0 ? (int)ncpu : 1;
        const double gbs = gt_read_bandwidth((size_t)256 << 20, nt, why, sizeof why);
        if (gbs > 0) {
            const double bytes = (double)gt_model_weight_bytes_per_token(m);
            gt_suite_metric(c, "read_gbs", gbs);
            gt_suite_metric(c, "tg_bw_pct", bytes * tg_med / (gbs * 1e9) * 100);
        } else {
            gt_suite_result(c, "bandwidth", GT_ST_SKIP, "read bandwidth not measured: %s", why);
        }
    }
    rc = 0;
out:
    gt_session_free(s);
    gt_model_free(m);
    free(prompt);
    free(logits);
    free(reps);
    free(lat);
    free(pp);
    free(tg);
    free(tt);
    return rc;
}

const gt_suite gt_suite_performance = {
    .name = "performance",
    .description = "prefill/decode tokens/s, time to first token, latency percentiles, load "
                   "time, peak RSS and device memory; regressions vs a baseline run",
    .metrics = METRICS,
    .settings = SETTINGS,
    .run = performance_run,
};
