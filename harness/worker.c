/* worker.c: `gauntlet worker`, one matrix cell in its own process.
 *
 * The qualify parent (runner.c) starts this verb once per cell, writes the
 * cell's spec (a JSON object, below) to its stdin, and reads JSON lines from
 * file descriptor 3; stdout and stderr are the cell's log. The worker:
 *   1. opens the backend with the driver profile; unavailable -> skip;
 *      a device driver version outside the profile's constraint -> skip;
 *   2. checks gt_backend_supports for every (op, type) the model's tensors
 *      need -> skip listing what is unsupported;
 *   3. runs the tier's suites in order; a failing smoke suite skips the rest
 *      (nothing later would mean anything);
 *   4. prints {"t":"done"} and exits 0.
 * Anything else (a signal, an exit without "done") is judged by the parent.
 *
 * Lines (one JSON object each, "t" says which):
 *   hello  {pid}                        device {backend, driver_profile, name, ...}
 *   skip   {reason}                     result {suite, check, status, message}
 *   metric {suite, name, value, unit, tolerance, comparator, verdict, better, regress}
 *   ref    {key, meta, file}            done   {worker_s}
 *
 * Spec keys: cell, tier, model, quant, backend, driver_id, driver, version,
 * device, threads, seed, artifact, artifact_sha256, source_sha256, f32_path,
 * suites, settings, tolerances, db, scratch, data_dir.
 * For debugging: `gauntlet worker --spec FILE` reads the spec from FILE and
 * prints the lines on stdout.
 *
 * GT_FAULT (tests only): "kind[=arg]:cell-glob,...". Handled here, just before
 * the suites run: segv, abort (die on that signal), hang (sleep until
 * killed), exit=N (exit with N, no "done"). Other kinds are passed to suites
 * (gt_suite_fault). */
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

#include "commands.h"
#include "db.h"
#include "gt/backend.h"
#include "gt/gguf.h"
#include "matrix.h"
#include "suite.h"

typedef struct worker {
    FILE *out;
    const cJSON *spec;
    const char *cell, *scratch, *db_path;
    gt_db *db;
    cJSON *puts; /* {key: file} written by this worker, not yet in the DB */
    int n_put;
} worker;

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
    return 0;
}

static const gt_suite_host HOST = {host_result, host_metric, host_ref_get, host_ref_put};

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
        if (!colon)
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
    static const gt_op F32_OPS[] = {GT_OP_RMS_NORM, GT_OP_ADD,       GT_OP_ROPE,
                                    GT_OP_KV_STORE, GT_OP_ATTENTION, GT_OP_SILU_MUL};
    for (size_t i = 0; i < sizeof F32_OPS / sizeof *F32_OPS; i++)
        need[F32_OPS[i]][GT_TYPE_F32] = true;
    bool has_output = gt_gguf_find_tensor(g, "output.weight") != NULL;
    for (int64_t i = 0; i < gt_gguf_n_tensors(g); i++) {
        const gt_gguf_tensor *t = gt_gguf_tensor_at(g, i);
        if (t->type < 0 || t->type >= GT_TYPE_COUNT)
            continue;
        if (strcmp(t->name, "token_embd.weight") == 0) {
            need[GT_OP_GET_ROWS][t->type] = true;
            if (!has_output) /* tied: the embedding is also the output projection */
                need[GT_OP_MUL_MAT][t->type] = true;
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
        skip(w, "unsupported op/type on %s: %s", b->info.backend, missing);
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

static void inject(const char *faults)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", faults);
    char *save = NULL;
    for (char *f = strtok_r(buf, ",", &save); f; f = strtok_r(NULL, ",", &save)) {
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

static int run_cell(worker *w, double t0)
{
    const cJSON *spec = w->spec;
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
        skip(w, "backend not available: %s", e ? e->why : "unknown backend");
        return 0;
    }
    gt_backend_config cfg = {.device = (int)nget(spec, "device", 0),
                             .n_threads = (int)nget(spec, "threads", 0),
                             .driver = driver};
    gt_backend *b = NULL;
    gt_err err = {{0}};
    if (gt_backend_open(backend, &cfg, &b, &err) != 0) {
        skip(w, "backend not available: %s", err.msg);
        return 0;
    }
    emit_device(w, &b->info, profile);
    const char *dv = b->info.driver_version[0] ? b->info.driver_version : b->info.driver;
    if (version && !gt_version_satisfies(dv, version)) {
        skip(w, "driver profile %s needs version %s; %s has %s", profile, version,
             b->info.name, dv[0] ? dv : "no version");
        gt_backend_close(b);
        return 0;
    }
    if (check_support(w, b, artifact) != 0) {
        gt_backend_close(b);
        return 0;
    }

    char faults[512];
    faults_for(w->cell, faults, sizeof faults);
    inject(faults);

    gt_suite_ctx ctx = {
        .cell_id = w->cell, .tier = sget(spec, "tier"), .model_id = sget(spec, "model"),
        .quant = sget(spec, "quant"), .backend_name = backend, .driver_id = profile,
        .driver = driver, .model_path = artifact, .model_sha256 = sget(spec, "artifact_sha256"),
        .source_sha256 = sget(spec, "source_sha256"), .f32_path = sget(spec, "f32_path"),
        .device = cfg.device, .n_threads = cfg.n_threads,
        .seed = (uint64_t)nget(spec, "seed", 1), .data_dir = sget(spec, "data_dir"),
        .tolerances = cJSON_GetObjectItemCaseSensitive(spec, "tolerances"), .faults = faults,
        .host = &HOST, .host_data = w, .backend = b,
    };
    const cJSON *suites = cJSON_GetObjectItemCaseSensitive(spec, "suites");
    const cJSON *settings = cJSON_GetObjectItemCaseSensitive(spec, "settings");
    const char *stopped = NULL;
    for (const cJSON *s = suites ? suites->child : NULL; s; s = s->next) {
        const gt_suite *su = cJSON_IsString(s) ? gt_suite_find(s->valuestring) : NULL;
        if (!su) {
            host_result(w, "worker", "suite", GT_ST_ERROR, "unknown suite in spec");
            continue;
        }
        ctx.suite = su;
        if (stopped) {
            host_result(w, su->name, "run", GT_ST_SKIP, stopped);
            continue;
        }
        ctx.settings = settings ? cJSON_GetObjectItemCaseSensitive(settings, su->name) : NULL;
        int failed_before = ctx.n_failed;
        gt_err serr = {{0}};
        if (su->run(&ctx, &serr) != 0) {
            gt_suite_result(&ctx, "run", GT_ST_ERROR, "%s", serr.msg[0] ? serr.msg : "suite failed");
            stopped = "not run: an earlier suite could not run";
        } else if (strcmp(su->name, "smoke") == 0 && ctx.n_failed > failed_before) {
            stopped = "not run: smoke failed";
        }
    }
    gt_model_free(ctx.model);
    gt_backend_close(b);
    cJSON *done = line("done");
    cJSON_AddNumberToObject(done, "worker_s", gt_suite_now() - t0);
    emit(w, done);
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

int cmd_worker(int argc, char **argv)
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
    int rc = run_cell(&w, t0);
    gt_db_close(w.db);
    cJSON_Delete(w.puts);
    cJSON_Delete(spec);
    if (w.out != stdout)
        fclose(w.out);
    return rc == 0 ? GT_EXIT_OK : GT_EXIT_FAIL;
}
