/* bench_run.c: one backend's measurement for `gauntlet bench` (see
 * bench.h), run in its own child process so its load time and peak RSS are
 * its own. At each depth d the cache is first filled with d seeded tokens
 * by an untimed prefill, as llama-bench's -d does (extending the previous
 * depth's fill, the same tokens); each timed repetition then starts from
 * position d (truncated back to it; refilled when a sliding-window cache
 * no longer holds what position d attends to). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "bench.h"
#include "base.h"
#include "gt/sampler.h"
#include "gt/session.h"

static uint64_t peak_rss(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    uint64_t kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %lu kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    if (!kb) {
        struct rusage ru;
        if (getrusage(RUSAGE_SELF, &ru) == 0)
            kb = (uint64_t)ru.ru_maxrss;
    }
    return kb * 1024;
}

/* Back to depth d. *filled counts the cache's leading positions that hold
 * fill[] (the same prefix at every depth, so a deeper depth extends the
 * last one's). A truncation when they reach d, else an untimed prefill of
 * the rest; from empty when a bounded sliding-window cache no longer holds
 * what position d attends to. */
static int to_depth(gt_session *s, const int32_t *fill, int d, int *filled, gt_err *err)
{
    if (*filled >= d && gt_session_n_past(s) == d)
        return 0;
    const int keep = *filled < d ? *filled : d;
    if (gt_session_truncate(s, keep, err) != 0) {
        *filled = 0;
        if (gt_session_truncate(s, 0, err) != 0)
            return -1;
    } else {
        *filled = keep;
    }
    if (*filled < d && gt_session_eval(s, fill + *filled, d - *filled, false, NULL, err) != 0) {
        *filled = 0;
        return -1;
    }
    *filled = d > *filled ? d : *filled;
    return 0;
}

static int time_pp(gt_session *s, const int32_t *fill, int d, int *filled, const int32_t *toks,
                   int n, double *tps, gt_err *err)
{
    if (to_depth(s, fill, d, filled, err) != 0)
        return -1;
    const double t0 = gt_now();
    if (gt_session_eval(s, toks, n, false, NULL, err) != 0)
        return -1;
    *tps = n / (gt_now() - t0);
    return 0;
}

static int time_tg(gt_session *s, const int32_t *fill, int d, int *filled, int n, int n_vocab,
                   float *logits, double *tps, gt_err *err)
{
    if (to_depth(s, fill, d, filled, err) != 0)
        return -1;
    int32_t tok = 1 % n_vocab;
    const double t0 = gt_now();
    for (int i = 0; i < n; i++) {
        if (gt_session_eval(s, &tok, 1, false, logits, err) != 0)
            return -1;
        tok = gt_argmax(logits, n_vocab);
    }
    *tps = n / (gt_now() - t0);
    return 0;
}

/* n seeded token ids below n_vocab. */
static void seeded(int32_t *toks, long n, int n_vocab, uint64_t seed)
{
    for (long i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        toks[i] = (int32_t)((seed >> 33) % (uint64_t)n_vocab);
    }
}

void bench_backend_child(const void *varg, void *vout)
{
    const bench_backend_arg *a = varg;
    bench_res *r = vout;
    memset(r, 0, sizeof *r);
    snprintf(r->backend, sizeof r->backend, "%s", a->backend);
    gt_err err = {{0}};
    gt_model *m = NULL;
    gt_backend *b = NULL;
    gt_session *s = NULL;
    float *logits = NULL;
    int32_t *toks = NULL, *fill = NULL;
    long max_d = 0;
    for (int k = 0; k < a->n_depth; k++)
        max_d = a->depth[k] > max_d ? a->depth[k] : max_d;
    const double t0 = gt_now();
    if (gt_model_load(a->model, &m, &err) != 0)
        goto fail;
    const gt_backend_config cfg = {.device = 0, .n_threads = (int)a->threads, .driver = a->driver};
    if (gt_backend_open(a->backend, &cfg, &b, &err) != 0)
        goto fail;
    const gt_hparams *hp = gt_model_hparams(m);
    /* the deepest fill plus the longer test must fit */
    const long ctx = max_d + (a->pp > a->tg ? a->pp : a->tg);
    const gt_session_params sp = {.n_ctx = (int)(ctx > 16 ? ctx : 16)};
    if (gt_session_new(m, b, &sp, &s, &err) != 0)
        goto fail;
    r->load_s = gt_now() - t0;
    snprintf(r->device, sizeof r->device, "%s", b->info.name);
    snprintf(r->driver, sizeof r->driver, "%s", b->info.driver);
    snprintf(r->driver_version, sizeof r->driver_version, "%s", b->info.driver_version);
    snprintf(r->extra, sizeof r->extra, "%s", b->info.extra);
    r->threads = (int)a->threads;
    r->kv_bytes = gt_session_kv_bytes(s);
    logits = malloc(sizeof(float) * (size_t)hp->n_vocab);
    toks = malloc(sizeof(int32_t) * (size_t)(a->pp > 0 ? a->pp : 1));
    fill = malloc(sizeof(int32_t) * (size_t)(max_d > 0 ? max_d : 1));
    if (!logits || !toks || !fill) {
        gt_err_set(&err, "out of memory");
        goto fail;
    }
    seeded(toks, a->pp, hp->n_vocab, 12345);
    seeded(fill, max_d, hp->n_vocab, 54321);
    r->n_depth = a->n_depth;
    int filled = 0;
    for (int k = 0; k < a->n_depth; k++) {
        const int d = (int)a->depth[k];
        r->depth[k] = d;
        double warm;
        if (a->pp > 0) {
            if (time_pp(s, fill, d, &filled, toks, (int)a->pp, &warm, &err) != 0)
                goto fail;
            for (long i = 0; i < a->reps; i++)
                if (time_pp(s, fill, d, &filled, toks, (int)a->pp, &r->pp[k][r->n_pp[k]++], &err) != 0)
                    goto fail;
        }
        if (a->tg > 0) {
            if (time_tg(s, fill, d, &filled, a->tg < 16 ? (int)a->tg : 16, hp->n_vocab, logits, &warm,
                        &err) != 0)
                goto fail;
            for (long i = 0; i < a->reps; i++)
                if (time_tg(s, fill, d, &filled, (int)a->tg, hp->n_vocab, logits,
                            &r->tg[k][r->n_tg[k]++], &err) != 0)
                    goto fail;
        }
    }
    r->peak_rss = peak_rss();
    r->ok = 1;
    goto done;
fail:
    snprintf(r->err, sizeof r->err, "%s", err.msg);
done:
    free(logits);
    free(toks);
    free(fill);
    gt_session_free(s);
    gt_backend_close(b);
    gt_model_free(m);
}
