/* cmd_bench.c: `gauntlet bench`: prefill (ppN) and decode (tgN) speed of a
 * backend on a model, set against what this machine can do, measured in the
 * same run:
 *   - read bandwidth: a streaming sum over a >= 1 GiB buffer on all threads;
 *     decode is judged as effective bandwidth (weight bytes per token x
 *     tokens/s) in % of it;
 *   - sgemm GFLOP/s of the driver's BLAS on the model's own matrix shapes
 *     at M = pp (q, k, v, o, gate, up, down of one layer); prefill is judged
 *     as GFLOP/s in % of it;
 *   - the int8 multiply-accumulate peak (bench_machine.c, from
 *     backends/cpu/cpu_limits.h): a cpu
 *     backend with act=q8 multiplies in 8-bit integers (its integer GEMM),
 *     so its prefill is judged in % of that instead, the same operation
 *     count as GOP/s. Prefill FLOPs are what the graph computes:
 *     2 x (matrix params - output head) per token, the output head once
 *     (only the last row's logits are asked for), and causal attention
 *     (4 x n_head x head_dim x keys seen, per layer and token).
 * Each backend runs in its own child process (and so does the machine
 * measurement), so model load time and peak RSS (VmHWM) are that backend's
 * alone and a crash is reported, not inherited. Repetitions come after one
 * warm-up of each test; the median and the sample standard deviation are
 * reported. --compare B2 benches a second backend in the same run and
 * prints the speed ratios. --peer llama-bench=PATH runs llama.cpp's
 * llama-bench on the same file with the same -p/-n/-t, one repetition of
 * each side in turn (gauntlet's child, then the peer, -r times), so both see
 * the same machine state, and prints the peer's median t/s and the ratio
 * gauntlet/peer beside each row. -d LIST runs every test at each depth
 * (tokens already in the cache, filled untimed; bench_run.c), one row per
 * depth, and passes the same -d to the peer. --json-schema FILE /
 * --json-object measure constrained decoding instead (cmd_bench_schema.c). */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"
#include "base.h"
#include "commands.h"

#define MAX_REPS BENCH_MAX_REPS

typedef struct model_facts {
    char file[256];
    char type[16];
    uint64_t file_bytes, bytes_per_token, matrix_params;
    gt_hparams hp;
} model_facts;

typedef struct machine_res {
    int ok;
    char why[256];
    double read_gbs;
    int bw_threads;
    size_t bw_mib;
    double sgemm_gflops; /* 0 when no BLAS */
    char blas[160];
    double int8_gops; /* 0 when no int8 kernel */
    char int8_isa[96];
} machine_res;

/* The peer's repetitions (--peer). */
typedef struct peer_res {
    const char *path;
    int n;
    double pp[BENCH_MAX_DEPTHS][MAX_REPS], tg[BENCH_MAX_DEPTHS][MAX_REPS];
    char build[64], err[600];
} peer_res;

typedef struct bench_opts {
    const char *model, *backend, *driver, *compare, *peer;
    long pp, tg, reps, threads, cpp, ctg, creps;
    long bw_mib;
    bool machine;
    int n_depth;
    long depth[BENCH_MAX_DEPTHS];
    enum { OUT_MD, OUT_CSV, OUT_JSON, OUT_JSONL } out;
} bench_opts;

static void help(FILE *f)
{
    fprintf(f,
            "usage: gauntlet bench -m MODEL [-b BACKEND] [-p 512] [-n 128] [-d 0,...] [-r 5] [-t N]\n"
            "                      [-o md|csv|json|jsonl] [--driver D] [--compare B2]\n"
            "  -m, --model FILE       GGUF model\n"
            "  -b, --backend NAME     backend to measure (default cpu)\n"
            "  -p, --prompt N         prefill test: N tokens in one eval (default 512, 0 = skip)\n"
            "  -n, --gen N            decode test: N single-token evals (default 128, 0 = skip)\n"
            "  -d, --depth LIST       tokens already in the cache when each test starts, e.g.\n"
            "                         0,4096,16384 (default 0; up to %d depths): one untimed\n"
            "                         prefill fills the cache, then -p and -n are timed after it,\n"
            "                         one row per depth (llama-bench's -d); the session holds\n"
            "                         the deepest plus max(-p, -n) positions\n"
            "  -r, --reps N           repetitions after the warm-up (default 5)\n"
            "  -t, --threads N        backend and machine-measurement threads (default: all cores)\n"
            "  -o, --output FMT       md (default), csv, json, jsonl\n"
            "      --driver D         driver profile setting, e.g. blas=/path/libblas.so.3\n"
            "      --compare B2       also bench backend B2 and print the ratios\n"
            "      --compare-p N      prefill tokens for B2 (default: -p)\n"
            "      --compare-n N      decode tokens for B2 (default: -n)\n"
            "      --compare-r N      repetitions for B2 (default: -r)\n"
            "      --peer llama-bench=PATH\n"
            "                         also run llama.cpp's llama-bench at PATH on the same file,\n"
            "                         -p/-n/-d/-t, repetitions interleaved with this backend's;\n"
            "                         prints its t/s and the ratio gauntlet/peer per depth\n"
            "                         (ci/peer-llamacpp.sh builds one)\n"
            "      --bw-mib N         bandwidth buffer in MiB (default 1024)\n"
            "      --no-machine       skip the bandwidth and sgemm measurements\n"
            "      --json-schema FILE constrained decoding instead: the per-token time of the\n"
            "                         constraint's mask + accept beside decode over a greedy\n"
            "                         generation of up to -n tokens under FILE's JSON Schema\n"
            "                         (-r repetitions after a warm-up; in-process)\n"
            "      --json-object      the same for any JSON object\n"
            "      --json-prompt TEXT the prompt of that generation (default: a person's\n"
            "                         description, asked for as JSON)\n",
            BENCH_MAX_DEPTHS);
}

/* ---- statistics ------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(const double *v, int n)
{
    if (n <= 0)
        return 0.0;
    double s[MAX_REPS];
    memcpy(s, v, sizeof(double) * (size_t)n);
    qsort(s, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

static double stddev(const double *v, int n)
{
    if (n < 2)
        return 0.0;
    double m = 0.0, ss = 0.0;
    for (int i = 0; i < n; i++)
        m += v[i];
    m /= n;
    for (int i = 0; i < n; i++)
        ss += (v[i] - m) * (v[i] - m);
    return sqrt(ss / (n - 1));
}

/* ---- child processes ---------------------------------------------------------- */

/* ---- the machine ------------------------------------------------------------- */

typedef struct machine_arg {
    const bench_opts *o;
    const model_facts *mf;
    int nt;
} machine_arg;

static void machine_child(const void *varg, void *vout)
{
    const machine_arg *ma = varg;
    machine_res *r = vout;
    memset(r, 0, sizeof *r);
    r->bw_threads = ma->nt;
    r->bw_mib = (size_t)ma->o->bw_mib;
    r->read_gbs = gt_read_bandwidth(r->bw_mib << 20, ma->nt, r->why, sizeof r->why);
    r->sgemm_gflops = bench_sgemm_rate(ma->o->driver, &ma->mf->hp, (int)ma->o->pp, ma->nt, r->blas,
                                       sizeof r->blas);
    r->int8_gops = bench_int8_peak(ma->nt, r->int8_isa, sizeof r->int8_isa);
    r->ok = r->read_gbs > 0;
}

/* ---- reporting ------------------------------------------------------------------ */

/* Prefill FLOPs of pp tokens after depth already in the cache. */
static double prefill_flops(const model_facts *mf, long pp, long depth)
{
    const gt_hparams *hp = &mf->hp;
    const double head = (double)hp->n_vocab * hp->n_embd;
    const double per_tok = 2.0 * ((double)mf->matrix_params - head);
    /* sum over rows i of (depth + i + 1) keys: pp x depth + pp(pp+1)/2 */
    const double keys = (double)pp * depth + pp * (pp + 1) / 2.0;
    const double attn = 4.0 * hp->n_layer * (double)hp->n_head * hp->head_dim * keys;
    return per_tok * pp + 2.0 * head + attn;
}

/* K/V bytes (F32, bench's sessions) a decode token at position pos reads:
 * every cached position of a global layer, the window of a local one. At
 * depth this adds to the weights each token reads. */
static double kv_read_bytes(const model_facts *mf, double pos)
{
    const gt_hparams *hp = &mf->hp;
    const double row = 2.0 * hp->n_head_kv * hp->head_dim * sizeof(float);
    double rows = 0;
    for (int l = 0; l < hp->n_layer; l++)
        rows += hp->swa_window > 0 && gt_hparams_layer_local(hp, l) && pos > hp->swa_window
                    ? hp->swa_window
                    : pos;
    return rows * row;
}

typedef struct row {
    const bench_res *r;
    char test[16];
    long depth;
    double tps, sd, metric, pct, ratio, peer_tps, peer_ratio;
    const char *metric_unit, *pct_of;
} row;

/* Per depth: the prefill row, then the decode row. */
static int make_rows(const bench_res *r, const model_facts *mf, const machine_res *mach, long pp,
                     long tg, row *out)
{
    int n = 0;
    for (int k = 0; k < r->n_depth; k++) {
        const long d = r->depth[k];
        if (r->n_pp[k]) {
            row *w = &out[n++];
            memset(w, 0, sizeof *w);
            w->r = r;
            w->depth = d;
            snprintf(w->test, sizeof w->test, "pp%ld", pp);
            w->tps = median(r->pp[k], r->n_pp[k]);
            w->sd = stddev(r->pp[k], r->n_pp[k]);
            w->metric = prefill_flops(mf, pp, d) / (pp / w->tps) / 1e9;
            w->metric_unit = "GFLOP/s";
            /* act=q8 on quantized weights multiplies in int8 (float weights
             * never take the integer GEMM): that limit applies instead */
            const bool float_weights = !strcmp(mf->type, "f32") || !strcmp(mf->type, "f16") ||
                                       !strcmp(mf->type, "bf16");
            if (strstr(r->extra, "act=q8") && !float_weights) {
                w->metric_unit = "GOP/s";
                w->pct = mach && mach->int8_gops > 0 ? 100.0 * w->metric / mach->int8_gops : NAN;
                w->pct_of = "int8 peak";
            } else {
                w->pct = mach && mach->sgemm_gflops > 0 ? 100.0 * w->metric / mach->sgemm_gflops : NAN;
                w->pct_of = "sgemm";
            }
        }
        if (r->n_tg[k]) {
            row *w = &out[n++];
            memset(w, 0, sizeof *w);
            w->r = r;
            w->depth = d;
            snprintf(w->test, sizeof w->test, "tg%ld", tg);
            w->tps = median(r->tg[k], r->n_tg[k]);
            w->sd = stddev(r->tg[k], r->n_tg[k]);
            /* weights, plus the K/V read at the mean position of the test */
            const double bytes = (double)mf->bytes_per_token + kv_read_bytes(mf, d + tg / 2.0);
            w->metric = bytes * w->tps / 1e9;
            w->metric_unit = "GB/s";
            w->pct = mach && mach->read_gbs > 0 ? 100.0 * w->metric / mach->read_gbs : NAN;
            w->pct_of = "read bandwidth";
        }
    }
    for (int i = 0; i < n; i++)
        out[i].ratio = out[i].peer_tps = out[i].peer_ratio = NAN;
    return n;
}

static cJSON *row_json(const row *w, const model_facts *mf)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddStringToObject(o, "kind", "result");
    cJSON_AddStringToObject(o, "model", mf->file);
    cJSON_AddStringToObject(o, "type", mf->type);
    cJSON_AddStringToObject(o, "backend", w->r->backend);
    cJSON_AddStringToObject(o, "device", w->r->device);
    cJSON_AddStringToObject(o, "driver", w->r->driver);
    cJSON_AddStringToObject(o, "driver_version", w->r->driver_version);
    cJSON_AddStringToObject(o, "extra", w->r->extra);
    cJSON_AddStringToObject(o, "test", w->test);
    cJSON_AddNumberToObject(o, "depth", (double)w->depth);
    cJSON_AddNumberToObject(o, "tokens_per_s", w->tps);
    cJSON_AddNumberToObject(o, "stddev", w->sd);
    const bool gops = !strcmp(w->metric_unit, "GOP/s"), prefill = gops || w->metric_unit[1] == 'F';
    cJSON_AddNumberToObject(o, gops ? "gops" : prefill ? "gflops" : "effective_gbs", w->metric);
    if (!isnan(w->pct))
        cJSON_AddNumberToObject(o, gops ? "pct_of_int8_peak" : prefill ? "pct_of_sgemm" : "pct_of_read_bw",
                                w->pct);
    if (!isnan(w->ratio))
        cJSON_AddNumberToObject(o, "ratio_vs_compare", w->ratio);
    if (!isnan(w->peer_tps)) {
        cJSON_AddNumberToObject(o, "peer_tokens_per_s", w->peer_tps);
        cJSON_AddNumberToObject(o, "ratio_vs_peer", w->peer_ratio);
    }
    cJSON_AddNumberToObject(o, "load_s", w->r->load_s);
    cJSON_AddNumberToObject(o, "peak_rss", (double)w->r->peak_rss);
    cJSON_AddNumberToObject(o, "rss_budget", (double)(mf->file_bytes + w->r->kv_bytes + (64u << 20)));
    return o;
}

static cJSON *machine_json(const machine_res *m)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddStringToObject(o, "kind", "machine");
    cJSON_AddNumberToObject(o, "read_gbs", m->read_gbs);
    cJSON_AddNumberToObject(o, "bw_threads", m->bw_threads);
    cJSON_AddNumberToObject(o, "bw_mib", (double)m->bw_mib);
    cJSON_AddNumberToObject(o, "sgemm_gflops", m->sgemm_gflops);
    cJSON_AddStringToObject(o, "blas", m->blas);
    cJSON_AddNumberToObject(o, "int8_gops", m->int8_gops);
    cJSON_AddStringToObject(o, "int8_isa", m->int8_isa);
    return o;
}

static void print_jsonl(cJSON *o)
{
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    if (s)
        printf("%s\n", s);
    free(s);
    cJSON_Delete(o);
}

/* The KV cache this run held, and at the model's trained context, where a
 * bounded sliding-window cache is what makes long contexts affordable. */
static void print_kv_memory(const model_facts *mf, uint64_t run_bytes)
{
    const gt_hparams *hp = &mf->hp;
    const int ctx = hp->n_ctx_train > 0 ? hp->n_ctx_train : 2048;
    const double mib = 1048576.0;
    const double at_ctx = gt_kv_cache_bytes(hp, ctx, 0, false, GT_TYPE_F32) / mib;
    printf("kv cache (f32): %.1f MiB in this run; %.1f MiB at the trained context of %d", run_bytes / mib,
           at_ctx, ctx);
    if (hp->swa_window > 0) {
        int n_local = 0;
        for (int l = 0; l < hp->n_layer; l++)
            n_local += gt_hparams_layer_local(hp, l);
        const int batch = ctx < 512 ? ctx : 512; /* the session default */
        printf(", where %d sliding-window layers hold %d positions each (window %d + batch %d - 1)"
               " and %d global layers all %d (%.1f MiB if every layer held all)",
               n_local, gt_kv_window_rows(hp, ctx, 0, false), hp->swa_window, batch,
               hp->n_layer - n_local, ctx,
               gt_kv_cache_bytes(hp, ctx, 0, true, GT_TYPE_F32) / mib);
    }
    printf("\n");
}

/* The peer's median beside each row of the first backend. */
static void add_peer(row *rows, int n, const peer_res *pr)
{
    for (int i = 0; pr && pr->n > 0 && i < n; i++) {
        int k = 0;
        while (k < rows[i].r->n_depth && rows[i].r->depth[k] != rows[i].depth)
            k++;
        const double v = k == rows[i].r->n_depth ? NAN
                         : rows[i].test[0] == 'p' ? median(pr->pp[k], pr->n)
                                                  : median(pr->tg[k], pr->n);
        rows[i].peer_tps = v;
        rows[i].peer_ratio = v > 0 ? rows[i].tps / v : NAN;
    }
}

static void print_peer(const bench_opts *o, const row *rows, int n, const peer_res *pr, int nt)
{
    if (!pr)
        return;
    if (pr->n == 0) {
        printf("\npeer llama-bench: failed: %s\n", pr->err);
        return;
    }
    printf("\npeer: llama-bench at %s (llama.cpp %s), same file, -t %d, %d repetitions of each "
           "side interleaved%s%s\n",
           pr->path, pr->build[0] ? pr->build : "build unknown", nt, pr->n,
           pr->err[0] ? "; then failed: " : "", pr->err);
    printf("\n| test | depth | %s t/s | llama.cpp t/s | %s / llama.cpp |\n"
           "|---|---:|---:|---:|---:|\n", o->backend, o->backend);
    for (int i = 0; i < n; i++)
        if (!isnan(rows[i].peer_tps))
            printf("| %s | %ld | %.2f | %.2f | %.2fx |\n", rows[i].test, rows[i].depth,
                   rows[i].tps, rows[i].peer_tps, rows[i].peer_ratio);
}

static void report(const bench_opts *o, const model_facts *mf, const machine_res *mach,
                   bench_res *const res[2], const long pps[2], const long tgs[2],
                   const peer_res *pr, int nt)
{
    row rows[4 * BENCH_MAX_DEPTHS];
    int nr = 0;
    int first[2] = {0, 0}, count[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        if (!res[i] || !res[i]->ok)
            continue;
        first[i] = nr;
        count[i] = make_rows(res[i], mf, mach, pps[i], tgs[i], rows + nr);
        nr += count[i];
    }
    /* ratios: same test name on both backends */
    if (res[1] && res[1]->ok && res[0]->ok)
        for (int a = first[0]; a < first[0] + count[0]; a++)
            for (int b = first[1]; b < first[1] + count[1]; b++)
                if (rows[a].test[0] == rows[b].test[0] && rows[a].depth == rows[b].depth &&
                    rows[b].tps > 0)
                    rows[a].ratio = rows[a].tps / rows[b].tps;
    if (res[0]->ok)
        add_peer(rows + first[0], count[0], pr);

    if (o->out == OUT_JSON || o->out == OUT_JSONL) {
        cJSON *arr = cJSON_CreateArray();
        if (mach)
            cJSON_AddItemToArray(arr, machine_json(mach));
        for (int i = 0; i < nr; i++)
            cJSON_AddItemToArray(arr, row_json(&rows[i], mf));
        if (pr && pr->n == 0) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "kind", "error");
            cJSON_AddStringToObject(e, "backend", "peer");
            cJSON_AddStringToObject(e, "error", pr->err);
            cJSON_AddItemToArray(arr, e);
        }
        for (int i = 0; i < 2; i++)
            if (res[i] && !res[i]->ok) {
                cJSON *e = cJSON_CreateObject();
                cJSON_AddStringToObject(e, "kind", "error");
                cJSON_AddStringToObject(e, "backend", res[i]->backend);
                cJSON_AddStringToObject(e, "error", res[i]->err);
                cJSON_AddItemToArray(arr, e);
            }
        if (o->out == OUT_JSON) {
            char *s = cJSON_Print(arr);
            if (s)
                printf("%s\n", s);
            free(s);
            cJSON_Delete(arr);
        } else {
            cJSON *it;
            while ((it = cJSON_DetachItemFromArray(arr, 0)))
                print_jsonl(it);
            cJSON_Delete(arr);
        }
        return;
    }
    if (o->out == OUT_CSV) {
        /* depth last: scripts read the columns before it by number */
        printf("model,type,backend,threads,driver,driver_version,test,tokens_per_s,stddev,metric,unit,"
               "pct_of_machine,machine_ref,ratio_vs_compare,load_s,peak_rss_mib,rss_budget_mib,"
               "read_gbs,sgemm_gflops,peer_tokens_per_s,ratio_vs_peer,int8_gops,depth\n");
        for (int i = 0; i < nr; i++) {
            const row *w = &rows[i];
            printf("%s,%s,%s,%d,\"%s\",%s,%s,%.2f,%.2f,%.2f,%s,%.1f,%s,%.2f,%.3f,%.1f,%.1f,%.2f,%.1f,"
                   "%.2f,%.3f,%.1f,%ld\n",
                   mf->file, mf->type, w->r->backend, w->r->threads, w->r->driver,
                   w->r->driver_version, w->test, w->tps, w->sd, w->metric, w->metric_unit, w->pct,
                   w->pct_of, w->ratio, w->r->load_s, w->r->peak_rss / 1048576.0,
                   (mf->file_bytes + w->r->kv_bytes + (64u << 20)) / 1048576.0,
                   mach ? mach->read_gbs : NAN, mach ? mach->sgemm_gflops : NAN, w->peer_tps,
                   w->peer_ratio, mach ? mach->int8_gops : NAN, w->depth);
        }
        return;
    }
    printf("model: %s (%s, %.1f MiB file, %.1fM matrix params, %.1f MiB weights read per token)\n",
           mf->file, mf->type, mf->file_bytes / 1048576.0, mf->matrix_params / 1e6,
           mf->bytes_per_token / 1048576.0);
    print_kv_memory(mf, nr > 0 ? rows[0].r->kv_bytes : 0);
    if (mach)
        printf("machine: read bandwidth %.2f GB/s (%zu MiB streaming sum, %d threads); "
               "sgemm %.1f GFLOP/s (%s, this model's layer shapes at M=%ld, %d threads)\n",
               mach->read_gbs, mach->bw_mib, mach->bw_threads, mach->sgemm_gflops,
               mach->sgemm_gflops > 0 ? mach->blas : "no BLAS", o->pp > 0 ? o->pp : 512,
               mach->bw_threads);
    if (mach)
        printf("machine: int8 multiply-accumulate peak %.1f GOP/s (%s, registers only, %d threads)\n",
               mach->int8_gops, mach->int8_isa, mach->bw_threads);
    printf("\n| backend | threads | driver | test | depth | t/s | stddev | throughput | %% of machine | "
           "ratio | load s | peak RSS MiB (budget) |\n");
    printf("|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int i = 0; i < nr; i++) {
        const row *w = &rows[i];
        char pct[48] = "-", ratio[24] = "-";
        if (!isnan(w->pct)) /* over 100% of a measured limit: the measurement is wrong */
            snprintf(pct, sizeof pct, "%.1f%% of %s%s", w->pct, w->pct_of,
                     w->pct > 100.0 ? " (OVER: a measurement bug)" : "");
        if (!isnan(w->ratio))
            snprintf(ratio, sizeof ratio, "%.1fx", w->ratio);
        const uint64_t budget = mf->file_bytes + w->r->kv_bytes + (64u << 20);
        printf("| %s | %d | %s %s | %s | %ld | %.2f | %.2f | %.1f %s | %s | %s | %.3f | %.1f (%.1f%s) |\n",
               w->r->backend, w->r->threads, w->r->driver, w->r->driver_version, w->test, w->depth,
               w->tps,
               w->sd, w->metric, w->metric_unit, pct, ratio, w->r->load_s,
               w->r->peak_rss / 1048576.0, budget / 1048576.0,
               w->r->peak_rss <= budget ? "" : ", OVER");
    }
    for (int i = 0; i < 2; i++)
        if (res[i] && !res[i]->ok)
            printf("\n%s: failed: %s\n", res[i]->backend, res[i]->err);
    if (res[1] && res[1]->ok && res[0]->ok)
        printf("\nratio column: %s / %s in this run\n", res[0]->backend, res[1]->backend);
    if (res[0]->ok)
        printf("%s: %s\n", res[0]->backend, res[0]->extra);
    if (res[0]->ok)
        print_peer(o, rows + first[0], count[0], pr, nt);
}

/* --peer: reps rounds of one gauntlet repetition (its own child, after its
 * warm-up) then one llama-bench run; res gathers gauntlet's repetitions.
 * Returns -1 when a side failed (its error set; what was measured before
 * stays). */
static int run_interleaved(const bench_backend_arg *ba, const char *model, int nt, bench_res *res,
                           peer_res *pr)
{
    bench_backend_arg one = *ba;
    one.reps = 1;
    bench_res *r = malloc(sizeof *r);
    if (!r) {
        snprintf(res->err, sizeof res->err, "out of memory");
        return -1;
    }
    char why[256];
    int rc = 0;
    for (long k = 0; k < ba->reps; k++) {
        why[0] = '\0';
        fprintf(stderr, "gauntlet bench: round %ld/%ld: %s, then llama-bench\n", k + 1, ba->reps,
                ba->backend);
        if (bench_in_child(bench_backend_child, &one, r, sizeof *r, why, sizeof why) != 0 || !r->ok) {
            if (!r->ok && !why[0])
                snprintf(why, sizeof why, "%s", r->err);
            snprintf(res->err, sizeof res->err, "%s", why);
            res->ok = 0;
            rc = -1;
            break;
        }
        /* this round's facts, the repetitions of all rounds, the largest RSS */
        bench_res all = *res;
        uint64_t rss = res->peak_rss > r->peak_rss ? res->peak_rss : r->peak_rss;
        *res = *r;
        memcpy(res->pp, all.pp, sizeof res->pp);
        memcpy(res->tg, all.tg, sizeof res->tg);
        memcpy(res->n_pp, all.n_pp, sizeof res->n_pp);
        memcpy(res->n_tg, all.n_tg, sizeof res->n_tg);
        res->peak_rss = rss;
        for (int d = 0; d < r->n_depth; d++) {
            if (r->n_pp[d])
                res->pp[d][res->n_pp[d]++] = r->pp[d][0];
            if (r->n_tg[d])
                res->tg[d][res->n_tg[d]++] = r->tg[d][0];
        }
        bench_peer_run pe;
        char pwhy[600];
        if (bench_peer_llamabench(pr->path, model, ba->pp, ba->tg, ba->n_depth, ba->depth, nt, &pe,
                                  pwhy, sizeof pwhy) != 0) {
            snprintf(pr->err, sizeof pr->err, "%s", pwhy);
            rc = -1;
            break;
        }
        for (int d = 0; d < ba->n_depth; d++) {
            pr->pp[d][pr->n] = pe.pp_tps[d];
            pr->tg[d][pr->n] = pe.tg_tps[d];
        }
        pr->n++;
        snprintf(pr->build, sizeof pr->build, "%s", pe.build);
    }
    free(r);
    return rc;
}

/* -d LIST: comma-separated depths, each 0..1M, no repeats. */
static int parse_depths(const char *arg, bench_opts *o)
{
    o->n_depth = 0;
    const char *p = arg;
    for (;;) {
        char *end = NULL;
        const long v = *p >= '0' && *p <= '9' ? strtol(p, &end, 10) : -1;
        if (v < 0 || v > (1 << 20) || (*end != ',' && *end != '\0')) {
            fprintf(stderr, "gauntlet bench: -d %s: expected a comma-separated list of depths "
                            "(tokens already in the cache, 0 to %d), e.g. 0,4096,16384\n",
                    arg, 1 << 20);
            return -1;
        }
        for (int k = 0; k < o->n_depth; k++)
            if (o->depth[k] == v) {
                fprintf(stderr, "gauntlet bench: -d %s: depth %ld is listed twice\n", arg, v);
                return -1;
            }
        if (o->n_depth == BENCH_MAX_DEPTHS) {
            fprintf(stderr, "gauntlet bench: -d %s: at most %d depths\n", arg, BENCH_MAX_DEPTHS);
            return -1;
        }
        o->depth[o->n_depth++] = v;
        if (*end == '\0')
            return 0;
        p = end + 1;
    }
}

/* ---- the verb ------------------------------------------------------------------------ */

static int model_facts_load(const char *path, model_facts *mf)
{
    gt_err err = {{0}};
    gt_model *m = NULL;
    if (gt_model_load(path, &m, &err) != 0) {
        fprintf(stderr, "gauntlet bench: %s\n", err.msg);
        return -1;
    }
    const char *base = strrchr(path, '/');
    snprintf(mf->file, sizeof mf->file, "%s", base ? base + 1 : path);
    snprintf(mf->type, sizeof mf->type, "%s", gt_type_name(gt_model_main_type(m)));
    mf->bytes_per_token = gt_model_weight_bytes_per_token(m);
    mf->matrix_params = gt_model_matrix_params(m);
    mf->hp = *gt_model_hparams(m);
    gt_model_free(m);
    struct stat st;
    mf->file_bytes = stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
    return 0;
}

int cmd_bench(int argc, char **argv)
{
    bench_opts o = {.backend = "cpu", .pp = 512, .tg = 128, .reps = 5, .cpp = -1, .ctg = -1,
                    .creps = -1, .bw_mib = 1024, .machine = true, .n_depth = 1, .out = OUT_MD};
    enum { O_DRIVER = 256, O_CMP, O_CPP, O_CTG, O_CREPS, O_BW, O_NOMACH, O_PEER, O_SCHEMA,
           O_JSONOBJ, O_JPROMPT };
    const char *schema = NULL, *jprompt = NULL;
    bool json_object = false;
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'},    {"backend", required_argument, 0, 'b'},
        {"prompt", required_argument, 0, 'p'},   {"gen", required_argument, 0, 'n'},
        {"reps", required_argument, 0, 'r'},     {"threads", required_argument, 0, 't'},
        {"depth", required_argument, 0, 'd'},
        {"output", required_argument, 0, 'o'},   {"driver", required_argument, 0, O_DRIVER},
        {"compare", required_argument, 0, O_CMP}, {"compare-p", required_argument, 0, O_CPP},
        {"compare-n", required_argument, 0, O_CTG}, {"compare-r", required_argument, 0, O_CREPS},
        {"bw-mib", required_argument, 0, O_BW},  {"no-machine", no_argument, 0, O_NOMACH},
        {"peer", required_argument, 0, O_PEER},
        {"json-schema", required_argument, 0, O_SCHEMA}, {"json-object", no_argument, 0, O_JSONOBJ},
        {"json-prompt", required_argument, 0, O_JPROMPT},
        {"help", no_argument, 0, 'h'},           {0, 0, 0, 0}};
    optind = 1;
    int c;
    const char *V = "bench";
    while ((c = getopt_long(argc, argv, "m:b:p:n:d:r:t:o:h", opts, NULL)) != -1) {
        int bad = 0;
        switch (c) {
        case 'm': o.model = optarg; break;
        case 'b': o.backend = optarg; break;
        case 'p': bad = gt_cli_int(V, "-p", optarg, 0, 1 << 16, &o.pp); break;
        case 'n': bad = gt_cli_int(V, "-n", optarg, 0, 1 << 16, &o.tg); break;
        case 'd': bad = parse_depths(optarg, &o); break;
        case 'r': bad = gt_cli_int(V, "-r", optarg, 1, MAX_REPS, &o.reps); break;
        case 't': bad = gt_cli_int(V, "-t", optarg, 0, 256, &o.threads); break;
        case 'o':
            if (strcmp(optarg, "md") == 0) o.out = OUT_MD;
            else if (strcmp(optarg, "csv") == 0) o.out = OUT_CSV;
            else if (strcmp(optarg, "json") == 0) o.out = OUT_JSON;
            else if (strcmp(optarg, "jsonl") == 0) o.out = OUT_JSONL;
            else {
                fprintf(stderr, "gauntlet bench: -o %s: expected md, csv, json or jsonl\n", optarg);
                bad = 1;
            }
            break;
        case O_DRIVER: o.driver = optarg; break;
        case O_CMP: o.compare = optarg; break;
        case O_CPP: bad = gt_cli_int(V, "--compare-p", optarg, 0, 1 << 16, &o.cpp); break;
        case O_CTG: bad = gt_cli_int(V, "--compare-n", optarg, 0, 1 << 16, &o.ctg); break;
        case O_CREPS: bad = gt_cli_int(V, "--compare-r", optarg, 1, MAX_REPS, &o.creps); break;
        case O_BW: bad = gt_cli_int(V, "--bw-mib", optarg, 16, 1 << 20, &o.bw_mib); break;
        case O_NOMACH: o.machine = false; break;
        case O_SCHEMA: schema = optarg; break;
        case O_JSONOBJ: json_object = true; break;
        case O_JPROMPT: jprompt = optarg; break;
        case O_PEER:
            if (strncmp(optarg, "llama-bench=", 12) != 0 || !optarg[12]) {
                fprintf(stderr, "gauntlet bench: --peer %s: expected llama-bench=PATH (the only "
                                "peer it knows)\n", optarg);
                bad = 1;
            } else if (access(optarg + 12, X_OK) != 0) {
                fprintf(stderr, "gauntlet bench: --peer: %s is not an executable file (bash "
                                "ci/peer-llamacpp.sh builds one)\n", optarg + 12);
                bad = 1;
            } else {
                o.peer = optarg + 12;
            }
            break;
        case 'h': help(stdout); return GT_EXIT_OK;
        default: help(stderr); return GT_EXIT_USAGE;
        }
        if (bad)
            return GT_EXIT_USAGE;
    }
    if (optind < argc || !o.model) {
        if (optind < argc)
            fprintf(stderr, "gauntlet bench: unexpected argument '%s'\n", argv[optind]);
        else
            fprintf(stderr, "gauntlet bench: -m MODEL is required\n");
        help(stderr);
        return GT_EXIT_USAGE;
    }
    if (schema || json_object) {
        if (o.tg == 0) {
            fprintf(stderr, "gauntlet bench: --json-schema/--json-object need -n > 0\n");
            return GT_EXIT_USAGE;
        }
        return gt_bench_schema(o.model, o.backend, (int)o.threads, o.driver, schema, json_object,
                               jprompt ? jprompt
                                       : "Alice Smith is 34 years old, her email is "
                                         "alice@example.com, and she is a friend and a "
                                         "neighbour. The same as JSON:",
                               o.tg, o.reps);
    }
    if (o.pp == 0 && o.tg == 0) {
        fprintf(stderr, "gauntlet bench: nothing to do with -p 0 -n 0\n");
        return GT_EXIT_USAGE;
    }
    const gt_backend_entry *be = gt_backend_find(o.backend);
    const gt_backend_entry *ce = o.compare ? gt_backend_find(o.compare) : NULL;
    if (!be || !be->reg || (o.compare && (!ce || !ce->reg))) {
        const char *name = !be || !be->reg ? o.backend : o.compare;
        const gt_backend_entry *e = !be || !be->reg ? be : ce;
        fprintf(stderr, "gauntlet bench: backend %s %s%s\n", name,
                e ? "not available: " : "unknown", e ? e->why : "");
        return GT_EXIT_USAGE;
    }

    model_facts mf;
    if (model_facts_load(o.model, &mf) != 0)
        return GT_EXIT_USAGE;
    long deepest = 0;
    for (int k = 0; k < o.n_depth; k++)
        deepest = o.depth[k] > deepest ? o.depth[k] : deepest;
    const long need = deepest + (o.pp > o.tg ? o.pp : o.tg);
    if (mf.hp.n_ctx_train > 0 && need > mf.hp.n_ctx_train)
        fprintf(stderr, "gauntlet bench: note: depth %ld + %ld tokens passes the model's trained "
                        "context of %d; speed is measured all the same\n",
                deepest, o.pp > o.tg ? o.pp : o.tg, mf.hp.n_ctx_train);
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    const int nt = o.threads > 0 ? (int)o.threads : cores > 0 ? (int)(cores > 256 ? 256 : cores) : 1;

    machine_res mach;
    char why[256] = "";
    bool have_machine = false;
    if (o.machine) {
        const machine_arg ma = {&o, &mf, nt};
        if (bench_in_child(machine_child, &ma, &mach, sizeof mach, why, sizeof why) != 0 || !mach.ok)
            fprintf(stderr, "gauntlet bench: machine measurement failed: %s\n",
                    why[0] ? why : mach.why);
        else
            have_machine = true;
    }

    bench_res *res[2] = {NULL, NULL};
    const long pps[2] = {o.pp, o.cpp >= 0 ? o.cpp : o.pp};
    const long tgs[2] = {o.tg, o.ctg >= 0 ? o.ctg : o.tg};
    const long reps[2] = {o.reps, o.creps > 0 ? o.creps : o.reps};
    const char *names[2] = {o.backend, o.compare};
    int rc = GT_EXIT_OK;
    peer_res *pr = o.peer ? calloc(1, sizeof *pr) : NULL;
    if (pr)
        pr->path = o.peer;
    for (int i = 0; i < (o.compare ? 2 : 1); i++) {
        res[i] = calloc(1, sizeof *res[i]);
        if (!res[i] || (o.peer && !pr)) {
            fprintf(stderr, "gauntlet bench: out of memory\n");
            rc = GT_EXIT_FAIL;
            break;
        }
        bench_backend_arg ba = {names[i], i == 0 ? o.driver : NULL, o.model, pps[i], tgs[i],
                                reps[i], nt, o.n_depth, {0}};
        memcpy(ba.depth, o.depth, sizeof ba.depth);
        if (i == 0 && pr) {
            if (run_interleaved(&ba, o.model, nt, res[0], pr) != 0)
                rc = GT_EXIT_FAIL;
        } else if (bench_in_child(bench_backend_child, &ba, res[i], sizeof *res[i], why, sizeof why) !=
                   0) {
            snprintf(res[i]->backend, sizeof res[i]->backend, "%s", names[i]);
            snprintf(res[i]->err, sizeof res[i]->err, "%s", why);
            res[i]->ok = 0;
        }
        if (!res[i]->ok)
            rc = GT_EXIT_FAIL;
    }
    if (res[0])
        report(&o, &mf, have_machine ? &mach : NULL, res, pps, tgs, pr, nt);
    free(res[0]);
    free(res[1]);
    free(pr);
    return rc;
}
