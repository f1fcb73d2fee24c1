/* worker.c: `gauntlet worker`, one matrix cell in its own process.
 *
 * The qualify parent (runner.c) starts this verb once per cell, writes the
 * cell's spec (a JSON object, below) to its stdin, and reads JSON lines from
 * file descriptor 3; stdout and stderr are the cell's log. The worker:
 *   1. opens the backend with the driver profile. Only what this machine
 *      cannot have is a skip, and its reason starts with a category word the
 *      gate's allowed_skips names (open_failed below): "no device: ..."
 *      (no GPU, no driver, no platform), "not built: ..." (plugin absent),
 *      "driver version: ..." (a device driver outside the profile's
 *      constraint). Any other open failure is an error check backend.open
 *      saying why: "bad driver setting: ..." (GT_CPU_ISA=sse9, a bad profile
 *      string), "out of memory: ...", "plugin ABI mismatch: ...", "kernel
 *      build failed: ...", "backend failed to open: ..." (anything else);
 *   2. checks gt_backend_supports for every (op, type) the model's tensors
 *      need -> skip "unsupported: ..." listing what is unsupported;
 *   3. runs the tier's suites in order; a failing smoke suite skips the rest
 *      (nothing later would mean anything). A suite that ran to the end must
 *      have reported every metric the cell has a tolerance for: one it did
 *      not report fails check <suite>.tolerances ("tolerance set for X,
 *      metric not reported"), since a bound nobody checks is no bound
 *      (every tolerance the matrix wrote, even one equal to the suite's
 *      default; http cells too: see run_suites);
 *   4. prints {"t":"done"} and exits 0.
 * Anything else (a signal, an exit without "done") is judged by the parent.
 *
 * An http cell (the spec has "http": an OpenAI-compatible server, see
 * matrices/README.md) opens no backend and checks no support. Instead:
 *   1. with "start": picks a free port when the templates use {port}, fills
 *      the placeholders and starts the server (server_proc.c: own process
 *      group, dies with this worker, output into the cell's log);
 *   2. polls the health URL until it answers 200, for start_timeout_s. A
 *      server it started that exits or never gets healthy is a failed check
 *      server.start quoting the server's last output lines (the thing under
 *      test does not come up); an external endpoint that does not answer
 *      makes the cell skip ("no device: endpoint not reachable: ...");
 *   3. records a device line (backend "http", name = the endpoint as the
 *      matrix writes it, driver = the model id the server lists at
 *      GET {endpoint}/models);
 *   4. runs each suite's http variant (gt_suite_http_run; none: that suite is reported as skipped;
 *      no suite at all: the cell skips, "unsupported: ...");
 *   5. stops the server: SIGTERM, up to 10 s, SIGKILL. A server that died
 *      during the suites fails check server.exit; a nonzero exit after
 *      SIGTERM is only logged.
 *
 * Lines (one JSON object each, "t" says which):
 *   hello  {pid}                        device {backend, driver_profile, name, ...}
 *   skip   {reason}                     result {suite, check, status, message}
 *   metric {suite, name, value, unit, tolerance, comparator, verdict, better, regress}
 *   ref    {key, meta, file}            done   {worker_s}
 *   point  {suite, series, x, y}        (gt_suite_point; at most
 *          GT_WORKER_MAX_POINTS a cell: past it a series error check says
 *          the rest were dropped, so a runaway suite cannot grow the
 *          parent's memory, which holds a cell's lines until it records them)
 *
 * Spec keys: cell, tier, model, quant, backend, driver_id, driver, version,
 * device, threads, seed, artifact, artifact_sha256, source_sha256, f32_path,
 * suites, settings, tolerances, db, scratch, data_dir, timeout_s, localize;
 * the cell's execution settings when its matrix names them: n_batch,
 * n_parallel (the backend is opened with them, so every session on it
 * starts with them), kv_type ("f32" or "f16": the K/V cache type every
 * session on the backend gets; a backend whose supports() says no for
 * KV_STORE/ATTENTION on F16 makes an f16 cell a skip, "unsupported", with
 * its reason); for http cells also
 * http {endpoint, health, start, model, start_timeout_s, gauntlet}.
 * For debugging: `gauntlet worker --spec FILE` reads the spec from FILE and
 * prints the lines on stdout.
 *
 * GT_FAULT (tests only): "kind[=arg]:cell-glob,...". Handled here, just before
 * the suites run: segv, abort (die on that signal), hang (sleep until
 * killed), exit=N (exit with N, no "done"). after-put=N moves the cell's
 * segv, abort, hang and exit to just after its Nth reference output was put
 * (its "ref" line sent): a cell that dies or hangs with reference outputs
 * finished, which qualify keeps or drops (cmd_qualify.c refs_trusted).
 * Other kinds are passed to suites (gt_suite_fault). */
#include <errno.h>
#include <fnmatch.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "run.h"
#include "store.h"
#include "sweep_cell.h"
#include "gt/backend.h"
#include "gt/fault.h"
#include "gt/gguf.h"
#include "net.h"
#include "compare.h"
#include "matrix.h"
#include "server_proc.h"
#include "suite.h"

#define SERVER_STOP_GRACE_S 10

typedef struct worker {
    FILE *out;
    const cJSON *spec;
    const char *cell, *scratch, *db_path;
    gt_db *db;
    cJSON *puts; /* {key: file} written by this worker, not yet in the DB */
    int n_put;
    cJSON *reported; /* {"suite.metric": true} for every metric line sent */
    int n_points;    /* point lines sent (GT_WORKER_MAX_POINTS) */
    int fault_after_put;  /* GT_FAULT after-put=N: inject these at the Nth put */
    char fault_deferred[512];
    bool matrix_skipped; /* the running suite reported a GT_SKIP_MATRIX skip */
} worker;

/* A long cell sends 16 drift points per checkpoint plus a few per length:
 * under a hundred at 3 lengths, a few hundred at most. */
#define GT_WORKER_MAX_POINTS 4096

static void emit(worker *w, cJSON *o)
{
    char *s = cJSON_PrintUnformatted(o);
    if (s) {
        fputs(s, w->out);
        fputc('\n', w->out);
        fflush(w->out);
        free(s);
    }
    cJSON_Delete(o);
}

static cJSON *line(const char *type)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "t", type);
    return o;
}

static const char *sget(const cJSON *o, const char *k)
{
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(n) ? n->valuestring : NULL;
}

static double nget(const cJSON *o, const char *k, double def)
{
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(n) ? n->valuedouble : def;
}

static void host_result(void *hd, const char *suite, const char *check, gt_status st,
                        const char *msg)
{
    worker *w = hd;
    if (st == GT_ST_SKIP && msg && strncmp(msg, GT_SKIP_MATRIX, strlen(GT_SKIP_MATRIX)) == 0)
        w->matrix_skipped = true;
    cJSON *o = line("result");
    cJSON_AddStringToObject(o, "suite", suite);
    cJSON_AddStringToObject(o, "check", check);
    cJSON_AddStringToObject(o, "status", gt_status_name(st));
    cJSON_AddStringToObject(o, "message", msg ? msg : "");
    emit(hd, o);
}

static void host_metric(void *hd, const char *suite, const gt_metric_def *d, double value,
                        const char *comparator, double tol, gt_status verdict)
{
    worker *w = hd;
    char key[160];
    snprintf(key, sizeof key, "%s.%s", suite, d->name);
    if (w->reported && !cJSON_GetObjectItemCaseSensitive(w->reported, key))
        cJSON_AddTrueToObject(w->reported, key);
    cJSON *o = line("metric");
    cJSON_AddStringToObject(o, "suite", suite);
    cJSON_AddStringToObject(o, "name", d->name);
    cJSON_AddNumberToObject(o, "value", value); /* NaN prints as null */
    cJSON_AddStringToObject(o, "unit", d->unit ? d->unit : "");
    cJSON_AddNumberToObject(o, "tolerance", tol);
    cJSON_AddStringToObject(o, "comparator", comparator);
    cJSON_AddStringToObject(o, "verdict", verdict == GT_ST_PASS   ? "pass"
                                          : verdict == GT_ST_FAIL ? "fail"
                                                                  : "info");
    cJSON_AddNumberToObject(o, "better", d->better);
    cJSON_AddBoolToObject(o, "regress", d->regress);
    emit(hd, o);
}

static int read_file(const char *path, void **data, size_t *size, gt_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return gt_err_set(err, "cannot open %s: %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    *data = malloc(n > 0 ? (size_t)n : 1);
    if (!*data || (n > 0 && fread(*data, 1, (size_t)n, f) != (size_t)n)) {
        fclose(f);
        free(*data);
        *data = NULL;
        return gt_err_set(err, "cannot read %s", path);
    }
    fclose(f);
    *size = (size_t)n;
    return 0;
}

static int host_ref_get(void *hd, const char *key, void **data, size_t *size, gt_err *err)
{
    worker *w = hd;
    const char *mine = sget(w->puts, key);
    if (mine)
        return read_file(mine, data, size, err);
    if (!w->db_path)
        return 1;
    if (!w->db && gt_db_open(w->db_path, true, &w->db, err) != 0)
        return -1;
    return gt_db_ref_get(w->db, key, data, size, err);
}

static void inject(worker *w, const char *faults);

static int host_ref_put(void *hd, const char *key, const char *meta, const void *data,
                        size_t size, gt_err *err)
{
    worker *w = hd;
    if (!w->scratch)
        return gt_err_set(err, "no scratch folder for reference outputs");
    char path[4096];
    snprintf(path, sizeof path, "%s/ref-%d-%d-%.16s.bin", w->scratch, (int)getpid(), w->n_put++,
             key);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0) {
        if (f)
            fclose(f);
        return gt_err_set(err, "writing %s: %s", path, strerror(errno));
    }
    cJSON_AddStringToObject(w->puts, key, path);
    cJSON *o = line("ref");
    cJSON_AddStringToObject(o, "key", key);
    cJSON_AddStringToObject(o, "meta", meta ? meta : "");
    cJSON_AddStringToObject(o, "file", path);
    emit(w, o);
    if (w->fault_after_put && w->n_put == w->fault_after_put)
        inject(w, w->fault_deferred);
    return 0;
}

static void host_point(void *hd, const char *suite, const char *series, double x, double y)
{
    worker *w = hd;
    if (w->n_points++ >= GT_WORKER_MAX_POINTS) {
        if (w->n_points == GT_WORKER_MAX_POINTS + 1) {
            char msg[160];
            snprintf(msg, sizeof msg, "more than %d series points in one cell; the rest were "
                     "dropped", GT_WORKER_MAX_POINTS);
            host_result(hd, suite, "series", GT_ST_ERROR, msg);
        }
        return;
    }
    cJSON *o = line("point");
    cJSON_AddStringToObject(o, "suite", suite);
    cJSON_AddStringToObject(o, "series", series);
    cJSON_AddNumberToObject(o, "x", x); /* NaN prints as null, stored as NULL */
    cJSON_AddNumberToObject(o, "y", y);
    emit(hd, o);
}

static const gt_suite_host HOST = {host_result, host_metric, host_ref_get, host_ref_put,
                                   host_point};

static void skip(worker *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void skip(worker *w, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cJSON *o = line("skip");
    cJSON_AddStringToObject(o, "reason", msg);
    emit(w, o);
}

/* What a backend that would not open means for the cell. The backend
 * contract (gt/backend.h) returns only a message, so the worker reads it:
 * a message starting "no device: ", or one of the backends' own words for
 * absent hardware or drivers (NO_DEVICE), is a skip "no device: ..."; a
 * plugin that is not there is a skip "not built: ..." (not_built); anything
 * else stops a backend that this machine does have, which is an error the
 * gate sees: a bad setting, memory, a broken plugin, a kernel build. */
static void open_failed(worker *w, const char *msg, bool not_built)
{
    bool is_skip;
    const char *what = gt_open_failure_category(msg, not_built, &is_skip);
    if (is_skip) {
        if (strncmp(msg, "no device: ", 11) == 0)
            msg += 11; /* said outright: not twice */
        skip(w, "%s: %s", what, msg);
        return;
    }
    char full[1200];
    snprintf(full, sizeof full, "%s: %s", what, msg);
    host_result(w, "backend", "open", GT_ST_ERROR, full);
}

/* The harness's GT_FAULT kinds: the worker's own (inject) and the suites'. */
static const char *const WORKER_FAULTS[] = {"segv", "abort", "hang", "exit", "after-put", NULL};

int gt_fault_env_check(gt_err *err)
{
    if (gt_fault_check(err) != 0)
        return -1;
    const char *env = getenv("GT_FAULT");
    char buf[2048];
    snprintf(buf, sizeof buf, "%s", env ? env : "");
    char *save = NULL;
    for (char *e = strtok_r(buf, ",", &save); e; e = strtok_r(NULL, ",", &save)) {
        if (gt_fault_is_runtime(e))
            continue;
        const size_t kl = strcspn(e, "=:");
        bool known = false;
        for (const char *const *k = WORKER_FAULTS; *k && !known; k++)
            known = strlen(*k) == kl && strncmp(e, *k, kl) == 0;
        for (const char *const *k = GT_SUITE_FAULT_KINDS; *k && !known; k++)
            known = strlen(*k) == kl && strncmp(e, *k, kl) == 0;
        if (!known)
            return gt_err_set(err, "GT_FAULT entry '%s': no such fault kind (the harness's: segv, "
                                   "abort, hang, exit=N, after-put=N, %s; the runtime's: see "
                                   "gt/fault.h)",
                              e, GT_SUITE_FAULT_LIST);
        if (strncmp(e, "after-put", kl) == 0 && kl == 9 && (e[kl] != '=' || atoi(e + kl + 1) < 1))
            return gt_err_set(err, "GT_FAULT entry '%s': after-put=N needs N >= 1", e);
    }
    return 0;
}

/* This cell's entries of GT_FAULT, as "kind[=arg],..." in out. */
static void faults_for(const char *cell, char *out, size_t cap)
{
    out[0] = '\0';
    const char *env = getenv("GT_FAULT");
    if (!env)
        return;
    char buf[2048];
    snprintf(buf, sizeof buf, "%s", env);
    char *save = NULL;
    for (char *e = strtok_r(buf, ",", &save); e; e = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(e, ':');
        if (!colon || gt_fault_is_runtime(e)) /* the runtime's apply per backend */
            continue;
        *colon = '\0';
        if (fnmatch(colon + 1, cell, 0) == 0) {
            size_t len = strlen(out);
            snprintf(out + len, cap - len, "%s%s", len ? "," : "", e);
        }
    }
}

/* Every (op, type) the model's tensors need; reports the unsupported ones. */
static int check_support(worker *w, gt_backend *b, const char *artifact)
{
    gt_gguf *g;
    gt_err err = {{0}};
    if (gt_gguf_open(artifact, &g, &err) != 0) {
        host_result(w, "worker", "artifact", GT_ST_ERROR, err.msg);
        return -1;
    }
    bool need[GT_OP_COUNT][GT_TYPE_COUNT] = {{false}};
    /* Activation ops: always f32 (backend.h); weights come from the scan. */
    static const gt_op F32_OPS[] = {GT_OP_RMS_NORM, GT_OP_ADD, GT_OP_ROPE, GT_OP_KV_STORE,
                                    GT_OP_ATTENTION};
    for (size_t i = 0; i < sizeof F32_OPS / sizeof *F32_OPS; i++)
        need[F32_OPS[i]][GT_TYPE_F32] = true;
    /* The FFN's activation: gated GELU and the embedding scale for Gemma 3,
     * SwiGLU for the llama family. */
    const char *arch = gt_gguf_get_str(g, "general.architecture");
    if (arch && strcmp(arch, "gemma3") == 0)
        need[GT_OP_GELU_MUL][GT_TYPE_F32] = need[GT_OP_SCALE][GT_TYPE_F32] = true;
    else
        need[GT_OP_SILU_MUL][GT_TYPE_F32] = true;
    /* A mixture of experts routes with these; its 3-D expert tensors are
     * multiplied by MUL_MAT_ID (below). */
    if (arch && strcmp(arch, "qwen3moe") == 0)
        need[GT_OP_TOPK][GT_TYPE_F32] = need[GT_OP_MOE_WEIGHTS][GT_TYPE_F32] =
            need[GT_OP_MOE_SUM][GT_TYPE_F32] = true;
    bool has_output = gt_gguf_find_tensor(g, "output.weight") != NULL;
    for (int64_t i = 0; i < gt_gguf_n_tensors(g); i++) {
        const gt_gguf_tensor *t = gt_gguf_tensor_at(g, i);
        if (t->type < 0 || t->type >= GT_TYPE_COUNT)
            continue;
        if (strcmp(t->name, "token_embd.weight") == 0) {
            need[GT_OP_GET_ROWS][t->type] = true;
            if (!has_output) /* tied: the embedding is also the output projection */
                need[GT_OP_MUL_MAT][t->type] = true;
        } else if (t->n_dims >= 3) {
            need[GT_OP_MUL_MAT_ID][t->type] = true;
        } else if (t->n_dims >= 2) {
            need[GT_OP_MUL_MAT][t->type] = true;
        } else {
            need[GT_OP_MUL][t->type] = true;
        }
    }
    gt_gguf_close(g);
    char missing[1500] = "";
    for (int op = 1; op < GT_OP_COUNT; op++) {
        for (int ty = 0; ty < GT_TYPE_COUNT; ty++) {
            char why[256] = "";
            if (!need[op][ty] || gt_backend_supports(b, (gt_op)op, (gt_type)ty, why, sizeof why))
                continue;
            size_t len = strlen(missing);
            snprintf(missing + len, sizeof missing - len, "%s%s/%s%s%s%s", len ? ", " : "",
                     gt_op_name((gt_op)op), gt_type_name(ty), why[0] ? " (" : "", why,
                     why[0] ? ")" : "");
        }
    }
    if (missing[0]) {
        skip(w, "unsupported: op/type on %s: %s", b->info.backend, missing);
        return 1;
    }
    return 0;
}

static void emit_device(worker *w, const gt_device_info *d, const char *profile)
{
    cJSON *o = line("device");
    cJSON_AddStringToObject(o, "backend", d->backend);
    cJSON_AddStringToObject(o, "driver_profile", profile);
    cJSON_AddStringToObject(o, "name", d->name);
    cJSON_AddStringToObject(o, "kind", d->kind);
    cJSON_AddStringToObject(o, "driver", d->driver);
    cJSON_AddStringToObject(o, "driver_version", d->driver_version);
    cJSON_AddNumberToObject(o, "memory", (double)d->memory);
    cJSON_AddStringToObject(o, "extra", d->extra);
    emit(w, o);
}

/* The cell's faults (faults_for), now; with after-put=N in them, at the
 * Nth reference put instead (host_ref_put calls this again then). */
static void inject(worker *w, const char *faults)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", faults);
    const char *after = strstr(buf, "after-put=");
    if (after && (after == buf || after[-1] == ',') && w->n_put < atoi(after + 10)) {
        w->fault_after_put = atoi(after + 10);
        snprintf(w->fault_deferred, sizeof w->fault_deferred, "%s", faults);
        return;
    }
    char *save = NULL;
    for (char *f = strtok_r(buf, ",", &save); f; f = strtok_r(NULL, ",", &save)) {
        if (strncmp(f, "after-put=", 10) == 0)
            continue;
        fprintf(stderr, "worker: injecting fault '%s' (GT_FAULT)\n", f);
        fflush(stderr);
        if (strcmp(f, "segv") == 0) {
            signal(SIGSEGV, SIG_DFL); /* a sanitizer's handler would turn it into exit(1) */
            raise(SIGSEGV);
        } else if (strcmp(f, "abort") == 0) {
            abort();
        } else if (strcmp(f, "hang") == 0) {
            for (;;)
                pause();
        } else if (strncmp(f, "exit=", 5) == 0) {
            _exit(atoi(f + 5));
        }
    }
}

/* Fails check <suite>.tolerances for each tolerance the matrix wrote
 * (spec "tolerances_written") on a metric of the suite that just ran that
 * the suite never reported: the matrix asked for a bound that nothing
 * checked. A bound written equal to the suite's default is requested all
 * the same; a suite default nobody wrote (smoke.ref_agreement's, when smoke
 * does not compare) is not. In-process and HTTP cells alike. */
static void unreported_tolerances(worker *w, gt_suite_ctx *ctx)
{
    const cJSON *written = cJSON_GetObjectItemCaseSensitive(w->spec, "tolerances_written");
    size_t n = strlen(ctx->suite->name);
    char missing[1500] = "";
    for (const cJSON *t = written ? written->child : NULL; t; t = t->next) {
        const char *name = cJSON_IsString(t) ? t->valuestring : "";
        if (strncmp(name, ctx->suite->name, n) != 0 || name[n] != '.' ||
            cJSON_GetObjectItemCaseSensitive(w->reported, name))
            continue;
        size_t len = strlen(missing);
        snprintf(missing + len, sizeof missing - len, "%s%s", len ? ", " : "", name);
    }
    if (missing[0])
        gt_suite_result(ctx, "tolerances", GT_ST_FAIL, "tolerance set for %s, metric not reported",
                        missing);
}

/* After a failed accuracy or long suite: where this backend parts from the
 * reference (localize.h), on the tokens the suite left in ctx, recorded as
 * check <suite>.localize (accuracy.localize, long.localize). The long
 * suite's tokens (lng) are its failed checkpoint's text, compared from
 * loc_long_from on (the positions before only fill the cache; none when
 * what failed was not a checkpoint's drift); they are freed here, run or
 * not, and at the cell's end. Not for the reference itself, not when the spec
 * says "localize": false (qualify --no-localize), and not with less than a
 * quarter of the cell's deadline left (a skip that says so): the cell's
 * verdict is already made, this only names a suspect. */
static void localize_cell(worker *w, gt_suite_ctx *ctx, bool lng, double t0)
{
    const int32_t *tokens = lng ? ctx->loc_long : ctx->loc_tokens;
    const int n = lng ? ctx->n_loc_long : ctx->n_loc_tokens, from = lng ? ctx->loc_long_from : 0;
    if (cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(w->spec, "localize")) ||
        strcmp(ctx->backend_name, "reference") == 0 || n == 0)
        goto done;
    const double timeout = nget(w->spec, "timeout_s", 0), left = timeout - (gt_suite_now() - t0);
    if (timeout > 0 && left < timeout / 4) {
        gt_suite_result(ctx, "localize", GT_ST_SKIP,
                        "not run: %.0f s of the cell's %.0f s deadline left", left, timeout);
        goto done;
    }
    gt_err err = {{0}};
    gt_model *m;
    gt_backend *rb = NULL;
    /* The reference keeps the cell's K/V cache type, so an f16 cell's
     * k_store nodes are compared with F16 rows, not blamed for rounding. */
    gt_backend_config cfg = {.n_threads = ctx->n_threads, .kv_type = ctx->backend->exec.kv_type};
    gt_loc_result r = {0};
    if (gt_suite_model(ctx, &m, &err) != 0 || gt_backend_open("reference", &cfg, &rb, &err) != 0 ||
        gt_loc_run(m, rb, m, ctx->backend, tokens, n, from, &r, &err) != 0) {
        gt_suite_result(ctx, "localize", GT_ST_ERROR, "the localizer could not run: %s", err.msg);
        gt_backend_close(rb);
        goto done;
    }
    char line[512], what[160];
    gt_loc_summary(&r, ctx->backend_name, line, sizeof line);
    if (lng)
        snprintf(what, sizeof what, "positions %d..%d of the %d-token text", from, n - 1, n);
    else
        snprintf(what, sizeof what, "%s, %d tokens", ctx->loc_what, r.n_tokens);
    gt_suite_result(ctx, "localize", r.first_added >= 0 ? GT_ST_FAIL : GT_ST_PASS,
                    "%s [%s, %d nodes, %.1f s]", line, what, r.n, r.seconds);
    gt_loc_result_free(&r);
    gt_backend_close(rb);
done:
    free(ctx->loc_long);
    ctx->loc_long = NULL;
    ctx->n_loc_long = 0;
}

/* After a failed settings cell: the setting that breaks its backend
 * (sweep_cell.h), recorded as check settings.sweep; skipped like the
 * localizer with less than a quarter of the deadline left. */
static void sweep_cell(worker *w, gt_suite_ctx *ctx, double t0)
{
    const double timeout = nget(w->spec, "timeout_s", 0), left = timeout - (gt_suite_now() - t0);
    if (timeout > 0 && left < timeout / 4) {
        char why[160];
        snprintf(why, sizeof why, "not run: %.0f s of the cell's %.0f s deadline left", left,
                 timeout);
        host_result(w, "settings", "sweep", GT_ST_SKIP, why);
        return;
    }
    char msg[1024];
    const gt_status st = gt_sweep_cell_run(w->spec, ctx, msg, sizeof msg);
    host_result(w, "settings", "sweep", st, msg);
}

/* The tier's suites in order (run, or the http variant for an http cell); returns
 * how many ran. A failed accuracy or long suite is followed by the
 * localizer, a failed settings cell by the sweep. */
static int run_suites(worker *w, gt_suite_ctx *ctx, bool http, double t0)
{
    const cJSON *suites = cJSON_GetObjectItemCaseSensitive(w->spec, "suites");
    const cJSON *settings = cJSON_GetObjectItemCaseSensitive(w->spec, "settings");
    const char *stopped = NULL;
    int ran = 0;
    for (const cJSON *s = suites ? suites->child : NULL; s; s = s->next) {
        const gt_suite *su = cJSON_IsString(s) ? gt_suite_find(s->valuestring) : NULL;
        if (!su) {
            host_result(w, "worker", "suite", GT_ST_ERROR, "unknown suite in spec");
            continue;
        }
        ctx->suite = su;
        gt_suite_run_fn run = http ? gt_suite_http_run(su) : su->run;
        if (!run) {
            char why[160];
            snprintf(why, sizeof why, "suite %s does not run over HTTP", su->name);
            host_result(w, su->name, "run", GT_ST_SKIP, why);
            continue;
        }
        if (stopped) {
            host_result(w, su->name, "run", GT_ST_SKIP, stopped);
            continue;
        }
        ctx->settings = settings ? cJSON_GetObjectItemCaseSensitive(settings, su->name) : NULL;
        int failed_before = ctx->n_failed;
        gt_err serr = {{0}};
        ran++;
        w->matrix_skipped = false;
        if (run(ctx, &serr) != 0) {
            gt_suite_result(ctx, "run", GT_ST_ERROR, "%s", serr.msg[0] ? serr.msg : "suite failed");
            stopped = "not run: an earlier suite could not run";
            continue;
        }
        bool smoke_failed = strcmp(su->name, "smoke") == 0 && ctx->n_failed > failed_before;
        /* A failed smoke stops early: its metrics may be missing. An HTTP
         * variant reports a subset of the in-process metrics (no load_ms, no
         * KL divergence from logprobs: matrices/README.md); a bound written
         * for one it does not report is a bound nobody judges, so it fails
         * there too (write it for the in-process cells only). A suite the
         * matrix's own "cells" setting left out for this cell (a
         * GT_SKIP_MATRIX skip: soak, performance, long) reports nothing by
         * design, so its bounds are not asked for there. */
        if (!smoke_failed && !w->matrix_skipped)
            unreported_tolerances(w, ctx);
        if (smoke_failed)
            stopped = "not run: smoke failed";
        const bool lng = strcmp(su->name, "long") == 0;
        if (!http && ctx->n_failed > failed_before && (lng || strcmp(su->name, "accuracy") == 0))
            localize_cell(w, ctx, lng, t0);
    }
    if (!http && gt_sweep_cell_wanted(w->spec, ctx))
        sweep_cell(w, ctx, t0);
    return ran;
}

static void emit_done(worker *w, double t0)
{
    cJSON *done = line("done");
    cJSON_AddNumberToObject(done, "worker_s", gt_suite_now() - t0);
    emit(w, done);
}

/* tmpl with each "{key}" replaced by its value (matrix.c checked the names;
 * an unknown one is left as written). */
static void fill(const char *tmpl, const char *const *keys, const char *const *vals, char *out,
                 size_t cap)
{
    size_t n = 0;
    for (const char *p = tmpl; *p && n + 1 < cap;) {
        bool done = false;
        for (int k = 0; *p == '{' && keys[k] && !done; k++) {
            size_t kl = strlen(keys[k]);
            if (!strncmp(p + 1, keys[k], kl) && p[1 + kl] == '}') {
                n += (size_t)snprintf(out + n, cap - n, "%s", vals[k]);
                if (n >= cap)
                    n = cap - 1;
                p += kl + 2;
                done = true;
            }
        }
        if (!done)
            out[n++] = *p++;
    }
    out[n] = '\0';
}

/* Polls url until it answers 200; watches srv (may be NULL) meanwhile, so a
 * server that exits is reported at once rather than at the deadline. */
static int wait_healthy(gt_server_proc *srv, const char *url, double timeout_s, char *why,
                        size_t cap)
{
    double end = gt_suite_now() + timeout_s;
    gt_err err = {{0}};
    snprintf(err.msg, sizeof err.msg, "no attempt");
    for (;;) {
        char how[160];
        if (srv && gt_server_proc_exited(srv, how, sizeof how)) {
            snprintf(why, cap, "the server %s before %s answered", how, url);
            return -1;
        }
        double left = end - gt_suite_now();
        if (left <= 0) {
            const char *last = strstr(err.msg, "last attempt: ");
            snprintf(why, cap, "%s did not answer 200 within %.3g s (last attempt: %s)", url,
                     timeout_s, last ? last + 14 : err.msg);
            return -1;
        }
        if (gt_http_wait_healthy(url, left < 0.5 ? left : 0.5, &err) == 0)
            return 0;
    }
}

/* The device line of an http cell: the endpoint as the matrix writes it
 * (one device, not one per port; the URL a cell used is in its log) and what
 * the server says it serves. */
/* GET url as JSON (NULL when unreachable, not 200 or not JSON). */
static cJSON *get_json(const char *url, char *why, size_t cap)
{
    gt_http_reply r = {0};
    gt_err err = {{0}};
    if (gt_http_get(url, 10, &r, &err) != 0) {
        snprintf(why, cap, "%s", err.msg);
        return NULL;
    }
    cJSON *o = r.status == 200 && r.body ? cJSON_Parse(r.body) : NULL;
    if (!o)
        snprintf(why, cap, "GET %s: HTTP %ld", url, r.status);
    gt_http_reply_free(&r);
    return o;
}

/* The server's identity for the environment table: what it says it is
 * (llama.cpp's /props build_info, gauntlet serve's /v1/models "server"
 * object, else the model list's owned_by), never the endpoint template or
 * the model's path. */
static void emit_http_device(worker *w, const char *endpoint_t, const char *endpoint,
                             const char *root, const char *profile)
{
    gt_device_info d = {0};
    snprintf(d.backend, sizeof d.backend, "http");
    snprintf(d.kind, sizeof d.kind, "server");
    char url[1200], why[512] = "";
    snprintf(url, sizeof url, "%s/models", endpoint);
    cJSON *models = get_json(url, why, sizeof why);
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(models, "data");
    const cJSON *first = cJSON_IsArray(data) ? data->child : NULL;
    const char *owner = sget(first, "owned_by");
    const cJSON *who = cJSON_GetObjectItemCaseSensitive(first, "server");
    snprintf(url, sizeof url, "%s/props", root);
    char why_props[512];
    cJSON *props = who ? NULL : get_json(url, why_props, sizeof why_props);
    const char *build = sget(props, "build_info");
    if (who) {
        snprintf(d.name, sizeof d.name, "%s", sget(who, "name") ? sget(who, "name") : "?");
        snprintf(d.driver, sizeof d.driver, "gauntlet %s, backend %s",
                 sget(who, "version") ? sget(who, "version") : "?",
                 sget(who, "backend") ? sget(who, "backend") : "?");
        snprintf(d.driver_version, sizeof d.driver_version, "%s",
                 sget(who, "commit") ? sget(who, "commit") : "");
    } else if (build) {
        snprintf(d.name, sizeof d.name, "llama.cpp llama-server");
        snprintf(d.driver, sizeof d.driver, "llama.cpp");
        const char *dash = strrchr(build, '-'); /* "b<number>-<commit>" */
        snprintf(d.driver_version, sizeof d.driver_version, "%s%s", build,
                 dash ? "" : " (no commit)");
    } else {
        snprintf(d.name, sizeof d.name, "%s", owner ? owner : "OpenAI-compatible server");
        snprintf(d.driver, sizeof d.driver, "%s", owner ? owner : "unknown (no /props, no "
                                                               "owned_by)");
    }
    /* One row per server kind and version: the port and the model differ per cell. */
    if (strstr(endpoint_t, "{port}"))
        snprintf(d.extra, sizeof d.extra, "started by the harness on a port it picks%s%s",
                 models ? "" : "; ", models ? "" : why);
    else
        snprintf(d.extra, sizeof d.extra, "endpoint %s%s%s", endpoint, models ? "" : "; ",
                 models ? "" : why);
    cJSON_Delete(models);
    cJSON_Delete(props);
    emit_device(w, &d, profile);
}

/* An http cell: start (or find) the server, run the suites over its API,
 * stop it. See the top of this file. */
/* What a cell's suites see, from its spec: the fields an http cell and a
 * backend cell share (each then sets its own). */
static gt_suite_ctx suite_ctx(worker *w, const char *backend, const char *profile,
                              const char *artifact, int n_threads, const char *faults)
{
    const cJSON *spec = w->spec;
    gt_suite_ctx ctx = {
        .cell_id = w->cell, .tier = sget(spec, "tier"), .model_id = sget(spec, "model"),
        .quant = sget(spec, "quant"), .backend_name = backend, .driver_id = profile,
        .model_path = artifact, .model_sha256 = sget(spec, "artifact_sha256"),
        .source_sha256 = sget(spec, "source_sha256"), .f32_path = sget(spec, "f32_path"),
        .n_threads = n_threads, .seed = (uint64_t)nget(spec, "seed", 1),
        .data_dir = sget(spec, "data_dir"),
        .tolerances = cJSON_GetObjectItemCaseSensitive(spec, "tolerances"), .faults = faults,
        .anchor = cJSON_GetObjectItemCaseSensitive(spec, "anchor"),
        .host = &HOST, .host_data = w,
    };
    return ctx;
}

static int run_http_cell(worker *w, const cJSON *http, double t0)
{
    const cJSON *spec = w->spec;
    const char *backend = sget(spec, "backend"), *artifact = sget(spec, "artifact");
    const char *profile = sget(spec, "driver_id");
    const char *endpoint_t = sget(http, "endpoint"), *health_t = sget(http, "health");
    const cJSON *start = cJSON_GetObjectItemCaseSensitive(http, "start");
    if (!backend || !artifact || !profile || !endpoint_t || !health_t) {
        host_result(w, "worker", "spec", GT_ST_ERROR,
                    "spec lacks backend, artifact, driver_id or http.endpoint/health");
        return 1;
    }
    cJSON *hello = line("hello");
    cJSON_AddNumberToObject(hello, "pid", getpid());
    emit(w, hello);
    gt_err err = {{0}};
    if (gt_http_global_init(&err) != 0) {
        host_result(w, "worker", "http", GT_ST_ERROR, err.msg);
        return 1;
    }
    /* {port}: only a started server gets one (matrix.c requires that). */
    char port[16] = "", threads[16], gauntlet[4096];
    int n_threads = (int)nget(spec, "threads", 0);
    snprintf(threads, sizeof threads, "%d", n_threads);
    const char *self = sget(http, "gauntlet");
    snprintf(gauntlet, sizeof gauntlet, "%s", self ? self : "/proc/self/exe");
    if (!strcmp(gauntlet, "/proc/self/exe")) { /* the file's name, for the log */
        ssize_t n = readlink("/proc/self/exe", gauntlet, sizeof gauntlet - 1);
        if (n > 0)
            gauntlet[n] = '\0';
        else
            snprintf(gauntlet, sizeof gauntlet, "/proc/self/exe");
    }
    if (start && (strstr(endpoint_t, "{port}") || strstr(health_t, "{port}"))) {
        int p = gt_server_proc_free_port(&err);
        if (p < 0) {
            host_result(w, "worker", "port", GT_ST_ERROR, err.msg);
            return 1;
        }
        snprintf(port, sizeof port, "%d", p);
    }
    static const char *const KEYS[] = {"gauntlet", "model_path", "port", "threads", "root", NULL};
    const char *root = sget(http, "root");
    const char *const vals[] = {gauntlet, artifact, port, threads, root ? root : ".", NULL};
    char endpoint[1024], health[1024];
    fill(endpoint_t, KEYS + 2, vals + 2, endpoint, sizeof endpoint); /* {port} only */
    fill(health_t, KEYS + 2, vals + 2, health, sizeof health);
    size_t el = strlen(endpoint);
    while (el > 7 && endpoint[el - 1] == '/')
        endpoint[--el] = '\0';

    gt_server_proc *srv = NULL;
    double timeout_s = nget(http, "start_timeout_s", 60);
    if (cJSON_IsArray(start)) {
        int argc = cJSON_GetArraySize(start);
        char **argv = calloc((size_t)argc + 1, sizeof *argv);
        char cmdline[2048] = "";
        int i = 0;
        for (const cJSON *a = start->child; argv && a; a = a->next, i++) {
            char buf[4096];
            fill(cJSON_IsString(a) ? a->valuestring : "", KEYS, vals, buf, sizeof buf);
            argv[i] = strdup(buf);
            size_t len = strlen(cmdline);
            snprintf(cmdline + len, sizeof cmdline - len, "%s%s", i ? " " : "", buf);
        }
        int rc = -1;
        bool ok = argv != NULL;
        for (int k = 0; ok && k < argc; k++)
            ok = argv[k] != NULL;
        if (ok) {
            fprintf(stderr, "worker: starting the server: %s\n", cmdline);
            rc = gt_server_proc_start(argv, &srv, &err);
        } else {
            gt_err_set(&err, "out of memory");
        }
        for (int k = 0; argv && k < argc; k++)
            free(argv[k]);
        free(argv);
        if (rc != 0) {
            host_result(w, "server", "start", GT_ST_ERROR, err.msg);
            emit_done(w, t0);
            return 0;
        }
        fprintf(stderr, "worker: server pid %d; waiting up to %.3g s for %s\n",
                (int)gt_server_proc_pid(srv), timeout_s, health);
    }
    double t_wait = gt_suite_now();
    char why[1500];
    if (wait_healthy(srv, health, timeout_s, why, sizeof why) != 0) {
        if (!srv) {
            skip(w, "no device: endpoint not reachable: %s", why);
            emit_done(w, t0);
            return 0;
        }
        char how[200], tail[700], msg[2400];
        gt_server_proc_stop(srv, SERVER_STOP_GRACE_S, how, sizeof how);
        fprintf(stderr, "worker: the server %s\n", how);
        /* After the stop: its output is all in by then. */
        /* Exit 77 says the server cannot run here (a peer not built). The
         * category is ours, "not built": the server's output is only the
         * reason's text, so a server cannot name a category the gate
         * allows (its line may say anything, "skipped by the matrix: ..."
         * included). */
        if (gt_server_proc_exit_code(srv) == GT_EXIT_SKIP) {
            gt_server_proc_tail(srv, 1, tail, sizeof tail);
            gt_server_proc_free(srv);
            skip(w, "not built: the start command exited with code 77: %s",
                 tail[0] ? tail : "(no output)");
            emit_done(w, t0);
            return 0;
        }
        gt_server_proc_tail(srv, 3, tail, sizeof tail);
        gt_server_proc_free(srv);
        snprintf(msg, sizeof msg, "%s; the server's last output: %s", why,
                 tail[0] ? tail : "(none)");
        host_result(w, "server", "start", GT_ST_FAIL, msg);
        emit_done(w, t0);
        return 0;
    }
    if (srv) {
        char msg[1200];
        snprintf(msg, sizeof msg, "%s answered 200 after %.2f s", health, gt_suite_now() - t_wait);
        host_result(w, "server", "start", GT_ST_PASS, msg);
    }
    char root_url[1200];
    snprintf(root_url, sizeof root_url, "%s", endpoint);
    size_t rl = strlen(root_url);
    if (rl >= 3 && !strcmp(root_url + rl - 3, "/v1"))
        root_url[rl - 3] = '\0';
    emit_http_device(w, endpoint_t, endpoint, root_url, profile);

    char faults[512];
    faults_for(w->cell, faults, sizeof faults);
    inject(w, faults);

    gt_suite_ctx ctx = suite_ctx(w, backend, profile, artifact, n_threads, faults);
    ctx.endpoint = endpoint;
    ctx.served_model = sget(http, "model");
    ctx.http_api = sget(http, "api");
    int ran = run_suites(w, &ctx, true, t0);
    free(ctx.loc_long);
    gt_model_free(ctx.model);
    if (ran == 0)
        skip(w, "unsupported: no suite of tier %s runs over HTTP", ctx.tier ? ctx.tier : "?");
    if (srv) {
        char how[200], early[200];
        bool died = gt_server_proc_exited(srv, early, sizeof early);
        int rc = gt_server_proc_stop(srv, SERVER_STOP_GRACE_S, how, sizeof how);
        fprintf(stderr, "worker: the server %s\n", how);
        if (died) {
            char msg[1200], tail[700];
            gt_server_proc_tail(srv, 3, tail, sizeof tail);
            snprintf(msg, sizeof msg, "the server %s during the suites; its last output: %s",
                     early, tail[0] ? tail : "(none)");
            host_result(w, "server", "exit", GT_ST_FAIL, msg);
        } else if (rc != 0) {
            fprintf(stderr, "worker: note: the server did not exit cleanly on SIGTERM (%s)\n",
                    how);
        }
        gt_server_proc_free(srv);
    }
    emit_done(w, t0);
    return 0;
}

static int run_cell(worker *w, double t0)
{
    const cJSON *spec = w->spec;
    gt_err ferr = {{0}};
    if (gt_fault_env_check(&ferr) != 0) {
        host_result(w, "worker", "fault", GT_ST_ERROR, ferr.msg);
        return 1;
    }
    const cJSON *http = cJSON_GetObjectItemCaseSensitive(spec, "http");
    if (cJSON_IsObject(http))
        return run_http_cell(w, http, t0);
    const char *backend = sget(spec, "backend"), *artifact = sget(spec, "artifact");
    const char *driver = sget(spec, "driver"), *profile = sget(spec, "driver_id");
    const char *version = sget(spec, "version");
    if (!backend || !artifact || !profile) {
        host_result(w, "worker", "spec", GT_ST_ERROR, "spec lacks backend, artifact or driver_id");
        return 1;
    }
    cJSON *hello = line("hello");
    cJSON_AddNumberToObject(hello, "pid", getpid());
    emit(w, hello);

    const gt_backend_entry *e = gt_backend_find(backend);
    if (!e || !e->reg) {
        open_failed(w, e ? e->why : "unknown backend", !e || strstr(e->why, "not found"));
        return 0;
    }
    gt_backend_config cfg = {.device = (int)nget(spec, "device", 0),
                             .n_threads = (int)nget(spec, "threads", 0),
                             .driver = driver,
                             .n_batch = (int)nget(spec, "n_batch", 0),
                             .n_parallel = (int)nget(spec, "n_parallel", 0)};
    const char *kv = sget(spec, "kv_type");
    if (kv && strcmp(kv, "f16") == 0)
        cfg.kv_type = GT_TYPE_F16;
    else if (kv && strcmp(kv, "f32") != 0) { /* the matrix allows only these two */
        host_result(w, "worker", "spec", GT_ST_ERROR, "kv_type must be f32 or f16");
        return 0;
    }
    gt_backend *b = NULL;
    gt_err err = {{0}};
    if (gt_backend_open(backend, &cfg, &b, &err) != 0) {
        open_failed(w, err.msg, false);
        return 0;
    }
    emit_device(w, &b->info, profile);
    const char *dv = b->info.driver_version[0] ? b->info.driver_version : b->info.driver;
    if (version && !gt_version_satisfies(dv, version)) {
        skip(w, "driver version: profile %s needs version %s; %s has %s", profile, version,
             b->info.name, dv[0] ? dv : "no version");
        gt_backend_close(b);
        return 0;
    }
    /* An F16 cache is written by KV_STORE and read by ATTENTION. */
    for (gt_op op = GT_OP_KV_STORE; cfg.kv_type == GT_TYPE_F16 && op <= GT_OP_ATTENTION; op++) {
        char why[256] = "";
        if (!gt_backend_supports(b, op, GT_TYPE_F16, why, sizeof why)) {
            skip(w, "unsupported: kv_type f16 on %s: %s/f16%s%s", b->info.backend,
                 gt_op_name(op), why[0] ? ": " : "", why);
            gt_backend_close(b);
            return 0;
        }
    }
    if (check_support(w, b, artifact) != 0) {
        gt_backend_close(b);
        return 0;
    }

    char faults[512];
    faults_for(w->cell, faults, sizeof faults);
    inject(w, faults);

    gt_suite_ctx ctx = suite_ctx(w, backend, profile, artifact, cfg.n_threads, faults);
    ctx.driver = driver;
    ctx.device = cfg.device;
    ctx.backend = b;
    run_suites(w, &ctx, false, t0);
    free(ctx.loc_long);
    gt_model_free(ctx.model);
    gt_backend_close(b);
    emit_done(w, t0);
    return 0;
}

static char *slurp(FILE *f)
{
    size_t cap = 65536, len = 0, n;
    char *buf = malloc(cap);
    while (buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (len + 1 == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) {
                free(buf);
                return NULL;
            }
            buf = nb;
        }
    }
    if (buf)
        buf[len] = '\0';
    return buf;
}

int gt_worker_main(int argc, char **argv)
{
    double t0 = gt_suite_now();
    const char *spec_file = NULL;
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: gauntlet worker [--spec FILE]\n"
               "  internal: runs one matrix cell (the spec on stdin or in FILE) and prints\n"
               "  JSON lines on fd 3 (stdout with --spec). `gauntlet qualify` starts it.\n");
        return GT_EXIT_OK;
    }
    if (argc == 3 && !strcmp(argv[1], "--spec"))
        spec_file = argv[2];
    else if (argc != 1) {
        fprintf(stderr, "usage: gauntlet worker [--spec FILE]\n");
        return GT_EXIT_USAGE;
    }
    worker w = {0};
    if (spec_file) {
        w.out = stdout;
    } else {
        w.out = fdopen(3, "w");
        if (!w.out) {
            fprintf(stderr, "gauntlet worker: fd 3 is not open (run by gauntlet qualify, or "
                            "use --spec FILE)\n");
            return GT_EXIT_USAGE;
        }
    }
    /* A crash dump per injected fault would fill disks; the parent records
     * the signal and the log instead. */
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    FILE *in = spec_file ? fopen(spec_file, "rb") : stdin;
    char *text = in ? slurp(in) : NULL;
    if (spec_file && in)
        fclose(in);
    cJSON *spec = text ? cJSON_Parse(text) : NULL;
    free(text);
    if (!spec || !sget(spec, "cell")) {
        fprintf(stderr, "gauntlet worker: cannot read the cell spec\n");
        cJSON_Delete(spec);
        return GT_EXIT_USAGE;
    }
    w.spec = spec;
    w.cell = sget(spec, "cell");
    w.scratch = sget(spec, "scratch");
    w.db_path = sget(spec, "db");
    w.puts = cJSON_CreateObject();
    w.reported = cJSON_CreateObject();
    int rc = run_cell(&w, t0);
    gt_db_close(w.db);
    cJSON_Delete(w.puts);
    cJSON_Delete(w.reported);
    cJSON_Delete(spec);
    if (w.out != stdout)
        fclose(w.out);
    return rc == 0 ? GT_EXIT_OK : GT_EXIT_FAIL;
}
