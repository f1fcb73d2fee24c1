/* cmd_qualify.c: `gauntlet qualify MATRIX`: run a matrix tier, record it, gate it.
 *
 * The flow: load and validate the matrix (exit 2 on any problem), expand the
 * tier into cells, pick this shard's cells (index % N == I-1), find or create
 * the run in the database, add the shard's cells as pending, prepare the
 * artifacts of the cells still pending (find, verify, quantize once), then
 * hand one job per cell to the runner; each finished cell is judged
 * (verdict.c) and recorded in its own transaction. Finally the gate reads the
 * run back from the database and decides the exit code.
 *
 * Run identity: the run key is "<matrix name>/<tier>/<id>", where id is
 * --run-id, else $GT_RUN_ID, else the CI system's run id ($GITHUB_RUN_ID
 * with $GITHUB_RUN_ATTEMPT, $CI_PIPELINE_ID, $BUILDKITE_BUILD_ID), else a
 * fresh timestamp-host-pid. Shards given the same id write the same run key,
 * so `gauntlet merge` joins them into one logical run; running again with an
 * existing key continues that run (only its pending cells run), which is
 * also what --resume KEY does explicitly. */
#include <errno.h>
#include <ftw.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "run.h"
#include "commands.h"
#include "store.h"
#include "report.h"
#include "matrix.h"
#include "suite.h"

typedef struct cell_job {
    const gt_cell *cell;
    bool preset;          /* not run: status decided here */
    gt_status preset_status;
    char preset_reason[1024];
    char model_sha[65], artifact_sha[65];
    cJSON *artifacts;     /* rows for the artifacts table */
} cell_job;

typedef struct qualify {
    gt_db *db;
    int64_t run_id, part_id;
    int n_spawned;
    double overhead_sum, overhead_max, commit_sum, teardown_sum;
    int n_overhead;
    bool quiet, progress;
} qualify;

static void help(FILE *f)
{
    fprintf(f,
            "usage: gauntlet qualify MATRIX.json [options]\n"
            "  runs the matrix tier's suites on every cell, records results in a SQLite\n"
            "  database and applies the release gate.\n"
            "  --db FILE          results database (default gauntlet.sqlite)\n"
            "  --tier T           tier to run (default: the matrix's default_tier)\n"
            "  --baseline X       compare performance with run key X in the database, or with\n"
            "                     the newest other run of this matrix/tier in database file X\n"
            "  --tol-baseline F   the measured worst values the matrix's bounds are checked\n"
            "                     against (default baselines/<name>.json beside the matrix;\n"
            "                     a bound >100x looser than measured is an error, exit 2)\n"
            "  --resume KEY       continue run KEY: only its unfinished cells run\n"
            "  --run-id ID        run id (default $GT_RUN_ID or the CI run id; shards of one\n"
            "                     run must share it to merge)\n"
            "  --shard I/N        run only cells with index %% N == I-1\n"
            "  --backends LIST    run only the cells of these backend ids (comma-separated, as\n"
            "                     in the cell ids: reference,cpu,serve-cpu); with --shard, the\n"
            "                     cells of both; CI runs one list per hardware runner\n"
            "  -j, --jobs N       cells at once (default 1)\n"
            "  --cache-dir DIR    artifact cache (default $XDG_CACHE_HOME/gauntlet)\n"
            "  --junit FILE       write a JUnit XML report of the run (for CI test UIs)\n"
            "  --html FILE        write the HTML compatibility report\n"
            "  --markdown FILE    write a Markdown summary (for a pull-request comment)\n"
            "  --no-progress      no progress line even on a terminal\n"
            "  --no-localize      a cell that fails accuracy is not followed by the localizer\n"
            "                     (by default it names the first node where the backend\n"
            "                     parts from the reference: check accuracy.localize)\n"
            "  -q, --quiet        only the gate's output\n"
            "exit: 0 gate passed, 1 gate failed (or interrupted), 2 usage/config error\n");
}

static int usage_err(const char *fmt, const char *arg)
{
    fprintf(stderr, "gauntlet qualify: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(gauntlet qualify --help for usage)\n");
    return GT_EXIT_USAGE;
}

static void run_id_default(char *out, size_t cap)
{
    const char *v;
    if ((v = getenv("GT_RUN_ID")) && v[0]) {
        snprintf(out, cap, "%s", v);
    } else if ((v = getenv("GITHUB_RUN_ID")) && v[0]) {
        const char *att = getenv("GITHUB_RUN_ATTEMPT");
        snprintf(out, cap, "gh-%s-%s", v, att && att[0] ? att : "1");
    } else if ((v = getenv("CI_PIPELINE_ID")) && v[0]) {
        snprintf(out, cap, "gl-%s", v);
    } else if ((v = getenv("BUILDKITE_BUILD_ID")) && v[0]) {
        snprintf(out, cap, "bk-%s", v);
    } else {
        char host[64] = "host";
        gethostname(host, sizeof host - 1);
        host[sizeof host - 1] = '\0';
        time_t t = time(NULL);
        struct tm tm;
        gmtime_r(&t, &tm);
        char ts[32];
        strftime(ts, sizeof ts, "%Y%m%dT%H%M%SZ", &tm);
        snprintf(out, cap, "%s-%s-%d", ts, host, (int)getpid());
    }
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

/* The run's scratch folder and whatever is left in it. */
static void remove_tree(const char *dir)
{
    nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static bool needs_f32(const gt_mx_tier *t)
{
    for (int i = 0; i < t->n_suites; i++) {
        const gt_suite *s = gt_suite_find(t->suites[i]);
        if (s && (s->needs & GT_SUITE_NEEDS_F32))
            return true;
    }
    return false;
}

/* --no-localize: failed accuracy cells are not followed by the localizer. */
static bool localize_failures = true;

/* Whether the matrix itself wrote a bound for this metric on the cell. */
static bool matrix_wrote(const cJSON *written, const char *metric)
{
    const cJSON *w;
    cJSON_ArrayForEach(w, written)
        if (cJSON_IsString(w) && !strcmp(w->valuestring, metric))
            return true;
    return false;
}

/* A model with anchors (matrix.h): the anchor suite first, the cell's quant's
 * anchor in the spec, and its relative tolerance as the bound of
 * anchor.ppl_rel_err, unless the matrix wrote one for the cell (a driver
 * whose arithmetic is not the reference's, as 8-bit activations: its own
 * measured bound, with its note). The files were checked when the run
 * started. */
static int add_anchor(const gt_matrix *m, const gt_cell *c, cJSON *spec, cJSON *suites,
                      cJSON *tols, cJSON *written)
{
    cJSON *file;
    gt_err err = {{0}};
    if (gt_anchors_load(m, c->model, &file, &err) != 0)
        return -1;
    if (!file)
        return 0;
    cJSON *a = gt_anchors_cell(file, c->quant, &err);
    cJSON_Delete(file);
    if (!a)
        return -1;
    cJSON_AddItemToArray(suites, cJSON_CreateString("anchor"));
    cJSON_AddItemToObject(spec, "anchor", a);
    if (c->backend->is_http)
        return 0; /* no perplexity over an API: http_anchor.c */
    if (matrix_wrote(written, "anchor.ppl_rel_err"))
        return 0;
    const cJSON *tol = cJSON_GetObjectItemCaseSensitive(a, "ppl_rel_tol");
    const cJSON *note = cJSON_GetObjectItemCaseSensitive(a, "tolerance_note");
    cJSON *bound = cJSON_CreateObject();
    cJSON_AddNumberToObject(bound, "max", tol->valuedouble);
    cJSON_AddStringToObject(bound, "note",
                            cJSON_IsString(note) ? note->valuestring : "the anchors file's ppl_rel_tol");
    cJSON_DeleteItemFromObjectCaseSensitive(tols, "anchor.ppl_rel_err");
    cJSON_AddItemToObject(tols, "anchor.ppl_rel_err", bound);
    if (cJSON_IsArray(written))
        cJSON_AddItemToArray(written, cJSON_CreateString("anchor.ppl_rel_err"));
    return 0;
}

/* The worker's spec for one cell (see worker.c). */
static char *make_spec(const gt_matrix *m, const gt_mx_tier *t, const gt_cell *c,
                       const gt_artifact *art, const gt_artifact *src, const gt_artifact *f32,
                       const char *db_path, const char *scratch, const char *self_exe)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "cell", c->id);
    cJSON_AddStringToObject(o, "tier", t->name);
    cJSON_AddStringToObject(o, "model", c->model->id);
    cJSON_AddStringToObject(o, "quant", c->quant);
    cJSON_AddStringToObject(o, "backend", c->backend->id);
    cJSON_AddStringToObject(o, "driver_id", c->driver->id);
    if (c->driver->driver)
        cJSON_AddStringToObject(o, "driver", c->driver->driver);
    if (c->driver->version)
        cJSON_AddStringToObject(o, "version", c->driver->version);
    cJSON_AddNumberToObject(o, "device", c->backend->device);
    cJSON_AddNumberToObject(o, "threads", c->threads);
    if (c->setting->n_batch)
        cJSON_AddNumberToObject(o, "n_batch", c->setting->n_batch);
    if (c->setting->n_parallel)
        cJSON_AddNumberToObject(o, "n_parallel", c->setting->n_parallel);
    if (c->setting->kv_type)
        cJSON_AddStringToObject(o, "kv_type", c->setting->kv_type);
    if (c->setting->id[0]) { /* the settings the matrix names (the sweep of a failed cell) */
        cJSON *set = cJSON_AddObjectToObject(o, "exec");
        cJSON_AddStringToObject(set, "id", c->setting->id);
        cJSON_AddNumberToObject(set, "n_batch", c->setting->n_batch);
        cJSON_AddNumberToObject(set, "n_parallel", c->setting->n_parallel);
        cJSON_AddNumberToObject(set, "threads", c->setting->threads);
    }
    cJSON_AddNumberToObject(o, "seed", (double)m->seed);
    cJSON_AddNumberToObject(o, "timeout_s", c->timeout_s);
    cJSON_AddBoolToObject(o, "localize", localize_failures);
    cJSON_AddStringToObject(o, "artifact", art->path);
    cJSON_AddStringToObject(o, "artifact_sha256", art->sha256);
    cJSON_AddStringToObject(o, "source_sha256", src->sha256);
    if (f32 && f32->state == GT_ART_OK)
        cJSON_AddStringToObject(o, "f32_path", f32->path);
    if (c->backend->is_http) { /* templates: the worker fills in port, paths, threads */
        const gt_mx_http *h = &c->backend->http;
        cJSON *http = cJSON_AddObjectToObject(o, "http");
        cJSON_AddStringToObject(http, "endpoint", h->endpoint);
        cJSON_AddStringToObject(http, "health", h->health);
        if (h->start)
            cJSON_AddItemToObject(http, "start", cJSON_Duplicate(h->start, 1));
        if (h->model)
            cJSON_AddStringToObject(http, "model", h->model);
        if (h->api)
            cJSON_AddStringToObject(http, "api", h->api);
        cJSON_AddNumberToObject(http, "start_timeout_s", h->start_timeout_s);
        cJSON_AddStringToObject(http, "gauntlet", self_exe);
        cJSON_AddStringToObject(http, "root", m->base);
    }
    cJSON *suites = cJSON_AddArrayToObject(o, "suites");
    cJSON *tols = cJSON_Duplicate(c->tolerances, 1), *written = cJSON_Duplicate(c->tol_written, 1);
    if (add_anchor(m, c, o, suites, tols, written) != 0) {
        cJSON_Delete(tols);
        cJSON_Delete(written);
        cJSON_Delete(o);
        return NULL;
    }
    for (int i = 0; i < t->n_suites; i++)
        if (strcmp(t->suites[i], "anchor") != 0)
            cJSON_AddItemToArray(suites, cJSON_CreateString(t->suites[i]));
    cJSON *settings = t->settings ? cJSON_Duplicate(t->settings, 1) : cJSON_CreateObject();
    /* smoke's "reference" default is the matrix's (gt_matrix_smoke_reference). */
    bool runs_smoke = false;
    for (int i = 0; i < t->n_suites; i++)
        runs_smoke |= strcmp(t->suites[i], "smoke") == 0;
    cJSON *smoke = cJSON_GetObjectItemCaseSensitive(settings, "smoke");
    if (!smoke && runs_smoke)
        smoke = cJSON_AddObjectToObject(settings, "smoke");
    if (smoke && !cJSON_GetObjectItemCaseSensitive(smoke, "reference") &&
        gt_matrix_smoke_reference(m, t))
        cJSON_AddTrueToObject(smoke, "reference"); /* unset: the suite's (http: on) */
    cJSON_AddItemToObject(o, "settings", settings);
    cJSON_AddItemToObject(o, "tolerances", tols);
    cJSON_AddItemToObject(o, "tolerances_written", written);
    cJSON_AddStringToObject(o, "db", db_path);
    cJSON_AddStringToObject(o, "scratch", scratch);
    const char *data = getenv("GT_DATA_DIR");
#ifdef GT_SOURCE_DIR
    if (!data)
        data = GT_SOURCE_DIR "/suites/data";
#endif
    if (data)
        cJSON_AddStringToObject(o, "data_dir", data);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

static void preset(cell_job *cj, gt_status st, const char *reason)
{
    cj->preset = true;
    cj->preset_status = st;
    snprintf(cj->preset_reason, sizeof cj->preset_reason, "%s", reason);
}

/* Whether the reference outputs a cell announced may be kept. A "ref" line
 * comes only after its file was written and closed, so a cell the runner
 * killed (at its deadline, or when qualify was interrupted) leaves whole
 * files: hours of reference work on a long cell, which its next run reuses.
 * A crash (a signal of its own, an error exit) keeps none: the memory
 * corruption that ended it may have reached what it wrote before. */
static bool refs_trusted(const gt_outcome *o, bool abandoned)
{
    switch (o->end) {
    case GT_END_EXITED: return o->code == 0;
    case GT_END_TIMEOUT: return true;
    case GT_END_SIGNALED: return abandoned && o->sig == SIGKILL; /* the runner's kill */
    default: return false;
    }
}

static void say_kept(const qualify *q, const char *cell, int n, const char *what)
{
    if (q->quiet || n <= 0)
        return;
    if (q->progress)
        fputs("\r\033[K", stderr);
    fprintf(stderr, "%s: kept %d reference output%s for %s\n", cell, n, n == 1 ? "" : "s",
            what);
}

static int on_done(void *user, const gt_job *job, const gt_outcome *o, gt_report *rep,
                   gt_err *err)
{
    qualify *q = user;
    cell_job *cj = job->user;
    const gt_cell *c = cj->cell;
    gt_status raw, final;
    char reason[2048];
    if (cj->preset) {
        raw = final = cj->preset_status;
        snprintf(reason, sizeof reason, "%s", cj->preset_reason);
    } else {
        gt_verdict_judge_cell(o, c, &raw, &final, reason, sizeof reason);
    }
    cJSON *results = cJSON_CreateArray(), *metrics = cJSON_CreateArray();
    cJSON *devices = cJSON_CreateArray(), *refs = cJSON_CreateArray();
    cJSON *points = cJSON_CreateArray();
    const cJSON *l;
    cJSON_ArrayForEach(l, o->lines)
    {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(l, "t");
        const char *ty = cJSON_IsString(t) ? t->valuestring : "";
        cJSON *dst = !strcmp(ty, "result")   ? results
                     : !strcmp(ty, "metric") ? metrics
                     : !strcmp(ty, "device") ? devices
                     : !strcmp(ty, "ref")    ? refs
                     : !strcmp(ty, "point")  ? points
                                             : NULL;
        if (dst)
            cJSON_AddItemReferenceToArray(dst, (cJSON *)l);
    }
    /* A crashed or timed-out cell keeps only its status and log: its
     * partial checks would read as a verdict on a run that did not finish.
     * A timed-out cell's finished reference outputs are kept all the same
     * (refs_trusted), so the next run does not compute them again. */
    bool complete = !cj->preset && o->end == GT_END_EXITED;
    bool keep_refs = !cj->preset && refs_trusted(o, false);
    gt_db_record rec = {
        .cell_id = c->id, .status = gt_status_name(final), .raw_status = gt_status_name(raw),
        .reason = reason, .model_sha256 = cj->model_sha, .artifact_sha256 = cj->artifact_sha,
        .log = o->log, .started_at = o->started_at, .finished_at = o->finished_at,
        .duration_s = o->wall_s, .worker_s = o->worker_s, .overhead_ms = -1,
        .part_id = q->part_id, .results = complete ? results : NULL,
        .metrics = complete ? metrics : NULL, .devices = devices,
        .refs = keep_refs ? refs : NULL, .artifacts = cj->artifacts,
        .points = complete ? points : NULL,
    };
    /* The harness's cost: starting the process until its first line, plus
     * the commit below (added after it). What the worker spends tearing
     * down its libraries after its last line is reported apart. */
    if (o->worker_s >= 0 && o->hello_ms >= 0)
        rec.overhead_ms = o->hello_ms;
    double commit_ms = 0;
    int rc = gt_db_cell_record(q->db, q->run_id, &rec, &commit_ms, err);
    if (rc == 0 && keep_refs && o->end == GT_END_TIMEOUT)
        say_kept(q, c->id, cJSON_GetArraySize(refs), "the next run of this cell");
    cJSON_Delete(results);
    cJSON_Delete(metrics);
    cJSON_Delete(devices);
    cJSON_Delete(refs);
    cJSON_Delete(points);
    rep->status = final;
    snprintf(rep->reason, sizeof rep->reason, "%s", final == GT_ST_PASS ? "" : reason);
    rep->commit_ms = commit_ms;
    if (rec.overhead_ms >= 0) {
        rep->overhead_ms = rec.overhead_ms + commit_ms;
        rep->teardown_ms = (o->wall_s - o->worker_s) * 1e3 - o->hello_ms;
        if (rep->teardown_ms < 0)
            rep->teardown_ms = 0;
        q->teardown_sum += rep->teardown_ms;
        q->overhead_sum += rep->overhead_ms;
        q->commit_sum += commit_ms;
        if (rep->overhead_ms > q->overhead_max)
            q->overhead_max = rep->overhead_ms;
        q->n_overhead++;
    }
    return rc;
}

/* A cell left running when qualify was interrupted stays pending; the
 * reference outputs it finished go into ref_cache now, so that --resume
 * runs it again without computing them again. */
static void on_abandoned(void *user, const gt_job *job, const gt_outcome *o)
{
    qualify *q = user;
    cell_job *cj = job->user;
    if (cj->preset || !refs_trusted(o, true))
        return;
    cJSON *refs = cJSON_CreateArray();
    const cJSON *l;
    cJSON_ArrayForEach(l, o->lines)
    {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(l, "t");
        if (refs && cJSON_IsString(t) && strcmp(t->valuestring, "ref") == 0)
            cJSON_AddItemReferenceToArray(refs, (cJSON *)l);
    }
    gt_err err = {{0}};
    int n = gt_db_refs_keep(q->db, q->run_id, cj->cell->id, cj->artifact_sha, refs, &err);
    if (n < 0)
        fprintf(stderr, "gauntlet qualify: %s\n", err.msg);
    say_kept(q, cj->cell->id, n, "--resume");
    cJSON_Delete(refs);
}

/* --baseline X: a database file (newest other run of this matrix/tier) or a
 * run key in db. */
static int open_baseline(const char *arg, gt_db *db, const char *matrix, const char *tier,
                         const char *key, gt_db **bdb, int64_t *brun, gt_err *err)
{
    struct stat st;
    gt_db_run b;
    *bdb = NULL;
    *brun = 0;
    if (stat(arg, &st) == 0 && S_ISREG(st.st_mode)) {
        if (gt_db_open(arg, true, bdb, err) != 0)
            return -1;
        int r = gt_db_run_latest(*bdb, matrix, tier, key, &b, err);
        if (r != 0) {
            gt_db_close(*bdb);
            *bdb = NULL;
            return r < 0 ? -1
                         : gt_err_set(err, "baseline %s has no other run of matrix %s tier %s",
                                      arg, matrix, tier);
        }
        *brun = b.id;
        return 0;
    }
    if (strcmp(arg, key) == 0)
        return gt_err_set(err, "baseline %s is this run", arg);
    int r = gt_db_run_get(db, arg, &b, err);
    if (r != 0)
        return r < 0 ? -1
                     : gt_err_set(err, "baseline %s is neither a database file nor a run key in "
                                       "%s",
                                  arg, gt_db_path(db));
    *bdb = db;
    *brun = b.id;
    return 0;
}

/* --backends LIST against the matrix: 0, or -1 with err naming the known ids. */
static int check_backends(const gt_matrix *m, const char *list, gt_err *err)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", list);
    char *save = NULL;
    int n = 0;
    for (char *b = strtok_r(buf, ",", &save); b; b = strtok_r(NULL, ",", &save), n++) {
        bool known = false;
        for (int i = 0; i < m->n_backends && !known; i++)
            known = strcmp(m->backends[i].id, b) == 0;
        if (!known) {
            char names[512] = "";
            for (int i = 0; i < m->n_backends; i++) {
                size_t len = strlen(names);
                snprintf(names + len, sizeof names - len, "%s%s", i ? ", " : "",
                         m->backends[i].id);
            }
            return gt_err_set(err, "--backends: %s has no backend \"%s\" (its backends: %s)",
                              m->file, b, names);
        }
    }
    if (n == 0)
        return gt_err_set(err, "--backends expects a comma-separated list of backend ids");
    return 0;
}

/* Whether backend id is in the comma-separated list (NULL = every backend). */
static bool backend_selected(const char *list, const char *id)
{
    if (!list)
        return true;
    size_t n = strlen(id);
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && strncmp(p, id, n) == 0)
            return true;
        p += len;
        if (*p)
            p++;
    }
    return false;
}

static int parse_shard(const char *s, int *i, int *n)
{
    char extra;
    return sscanf(s, "%d/%d%c", i, n, &extra) == 2 && *n >= 1 && *i >= 1 && *i <= *n ? 0 : -1;
}

int cmd_qualify(int argc, char **argv)
{
    static const struct option OPTS[] = {
        {"db", required_argument, NULL, 'd'},       {"tier", required_argument, NULL, 't'},
        {"baseline", required_argument, NULL, 'b'}, {"resume", required_argument, NULL, 'r'},
        {"run-id", required_argument, NULL, 'i'},   {"shard", required_argument, NULL, 's'},
        {"jobs", required_argument, NULL, 'j'},     {"cache-dir", required_argument, NULL, 'c'},
        {"junit", required_argument, NULL, 'J'},    {"html", required_argument, NULL, 'H'},
        {"markdown", required_argument, NULL, 'M'}, {"backends", required_argument, NULL, 'B'},
        {"no-progress", no_argument, NULL, 'P'},    {"quiet", no_argument, NULL, 'q'},
        {"no-localize", no_argument, NULL, 'L'},
        {"tol-baseline", required_argument, NULL, 'T'},
        {"help", no_argument, NULL, 'h'},           {NULL, 0, NULL, 0}};
    const char *db_path = "gauntlet.sqlite", *tier_name = NULL, *baseline = NULL;
    const char *resume = NULL, *run_id_arg = NULL, *cache_dir = NULL, *backends = NULL;
    const char *tol_baseline = NULL;
    gt_report_outputs reports = {.threshold_pct = -1};
    int shard_i = 1, shard_n = 1, jobs = 1, opt;
    bool no_progress = false, quiet = false, shard_given = false;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "j:qh", OPTS, NULL)) != -1) {
        switch (opt) {
        case 'd': db_path = optarg; break;
        case 't': tier_name = optarg; break;
        case 'b': baseline = optarg; break;
        case 'r': resume = optarg; break;
        case 'i': run_id_arg = optarg; break;
        case 'c': cache_dir = optarg; break;
        case 'B': backends = optarg; break;
        case 'T': tol_baseline = optarg; break;
        case 'P': no_progress = true; break;
        case 'L': localize_failures = false; break;
        case 'q': quiet = true; break;
        case 's':
            if (parse_shard(optarg, &shard_i, &shard_n) != 0)
                return usage_err("--shard expects I/N with 1 <= I <= N, got '%s'", optarg);
            shard_given = true;
            break;
        case 'j': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (*end || v < 1 || v > 256)
                return usage_err("-j expects a number of jobs from 1 to 256, got '%s'", optarg);
            jobs = (int)v;
            break;
        }
        case 'J': reports.junit = optarg; break;
        case 'H': reports.html = optarg; break;
        case 'M': reports.markdown = optarg; break;
        case 'h': help(stdout); return GT_EXIT_OK;
        default: help(stderr); return GT_EXIT_USAGE;
        }
    }
    if (optind != argc - 1)
        return usage_err("expected one matrix file%s", "");

    gt_err err = {{0}};
    gt_matrix *m = NULL;
    gt_db *db = NULL, *bdb = NULL;
    gt_cell *cells = NULL;
    int n_cells = 0, rc = GT_EXIT_USAGE;
    cell_job *cjs = NULL;
    gt_job *jv = NULL;
    char scratch[PATH_MAX] = "";
    gt_artifacts arts = {0};
    if (gt_fault_env_check(&err) != 0 || gt_matrix_load(argv[optind], &m, &err) != 0 ||
        gt_anchors_check_all(m, &err) != 0)
        goto fail;
    /* A bound far looser than measured is a configuration error (matrix.h). */
    if (gt_matrix_validate_baseline(m, tol_baseline, quiet ? NULL : stderr, &err) != 0)
        goto fail;
    if (backends && check_backends(m, backends, &err) != 0)
        goto fail;
    if (gt_db_open(db_path, false, &db, &err) != 0)
        goto fail;

    gt_db_run run;
    char key[160];
    if (resume) {
        int r = gt_db_run_get(db, resume, &run, &err);
        if (r != 0) {
            if (r > 0)
                gt_err_set(&err, "%s: no run %s to resume", db_path, resume);
            goto fail;
        }
        if (tier_name && strcmp(tier_name, run.tier) != 0) {
            gt_err_set(&err, "run %s is of tier %s, not %s", resume, run.tier, tier_name);
            goto fail;
        }
        tier_name = run.tier;
        snprintf(key, sizeof key, "%s", resume);
    }
    const gt_mx_tier *tier = gt_matrix_tier(m, tier_name, &err);
    if (!tier || gt_matrix_expand(m, tier, &cells, &n_cells, &err) != 0)
        goto fail;
    if (!resume) {
        char id[96];
        if (run_id_arg)
            snprintf(id, sizeof id, "%s", run_id_arg);
        else
            run_id_default(id, sizeof id);
        snprintf(key, sizeof key, "%s/%s/%s", m->name, tier->name, id);
    }
    int found = gt_db_run_get(db, key, &run, &err);
    if (found < 0)
        goto fail;
    if (found == 0 && strcmp(run.matrix_sha256, m->sha256) != 0) {
        gt_err_set(&err, "run %s was made from a different version of %s (sha256 %.12s..., now "
                         "%.12s...); use a new --run-id",
                   key, argv[optind], run.matrix_sha256, m->sha256);
        goto fail;
    }
    /* Resolve the baseline before spending hours on a run it cannot gate. */
    int64_t brun = 0;
    if (baseline && open_baseline(baseline, db, m->name, tier->name, key, &bdb, &brun, &err) != 0)
        goto fail;
    qualify q = {.db = db, .quiet = quiet, .progress = !no_progress && !quiet && isatty(2)};
    if (found == 1) {
        char *gate = tier->gate.json ? cJSON_PrintUnformatted(tier->gate.json) : NULL;
        gt_db_run_new nr = {key, m->name, m->sha256, m->text, argv[optind], tier->name, gate,
                            n_cells};
        int r = gt_db_run_create(db, &nr, &q.run_id, &err);
        free(gate);
        if (r != 0 || gt_db_run_get(db, key, &run, &err) != 0)
            goto fail;
    }
    q.run_id = run.id;
    char argline[1024] = "";
    for (int i = 0; i < argc; i++) {
        size_t len = strlen(argline);
        snprintf(argline + len, sizeof argline - len, "%s%s", i ? " " : "", argv[i]);
    }
    gt_db_cell_new *nc = calloc((size_t)n_cells + 1, sizeof *nc);
    cjs = calloc((size_t)n_cells + 1, sizeof *cjs);
    jv = calloc((size_t)n_cells + 1, sizeof *jv);
    if (!nc || !cjs || !jv) {
        free(nc);
        gt_err_set(&err, "out of memory");
        goto fail;
    }
    int n_shard = 0;
    for (int i = 0; i < n_cells; i++) {
        const gt_cell *c = &cells[i];
        if (c->index % shard_n != shard_i - 1 || !backend_selected(backends, c->backend->id))
            continue;
        const gt_mx_setting *s = c->setting;
        nc[n_shard++] = (gt_db_cell_new){c->id,         c->model->id,  c->quant,
                                         c->backend->id, c->driver->id, c->index,
                                         c->required,    gt_status_name(c->expected),
                                         c->expect_reason, s->id,       s->n_batch,
                                         s->n_parallel,  s->threads,    s->kv_type};
    }
    int r = gt_db_part_begin(db, q.run_id, shard_i, shard_n, argline, &q.part_id, &err);
    /* Continuing a run without --shard means "finish what this database
     * holds of it": its pending cells, whichever shard added them. */
    bool continuing = found == 0 && !shard_given && !backends;
    if (r == 0 && !continuing)
        r = gt_db_cells_add(db, q.run_id, nc, n_shard, &err);
    free(nc);
    int in_db = 0, n_todo = 0;
    if (r == 0)
        r = gt_db_run_counts(db, q.run_id, &in_db, &n_todo, &err);
    if (continuing)
        n_shard = in_db;
    char **pending = NULL;
    int n_pending = 0;
    if (r != 0 || gt_db_cells_pending(db, q.run_id, &pending, &n_pending, &err) != 0)
        goto fail;

    char db_abs[PATH_MAX];
    if (!realpath(db_path, db_abs))
        snprintf(db_abs, sizeof db_abs, "%s", db_path);
    const char *tmp = getenv("TMPDIR");
    snprintf(scratch, sizeof scratch, "%s/gauntlet-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(scratch)) {
        gt_err_set(&err, "cannot create a scratch folder %s: %s", scratch, strerror(errno));
        scratch[0] = '\0';
        gt_db_strings_free(pending, n_pending);
        goto fail;
    }
    if (gt_artifacts_init(&arts, m, cache_dir, false, &err) != 0) {
        gt_db_strings_free(pending, n_pending);
        goto fail;
    }
    if (!quiet)
        printf("qualify %s tier %s: %d cells (shard %d/%d%s%s: %d), run %s; db %s\n", m->name,
               tier->name, n_cells, shard_i, shard_n, backends ? ", backends " : "",
               backends ? backends : "", n_shard, key, db_path);
    int n_jobs = 0;
    bool f32 = needs_f32(tier);
    for (int i = 0; i < n_cells; i++) {
        const gt_cell *c = &cells[i];
        bool todo = false;
        for (int k = 0; k < n_pending && !todo; k++)
            todo = strcmp(pending[k], c->id) == 0;
        if (!todo || c->index % shard_n != shard_i - 1 ||
            !backend_selected(backends, c->backend->id))
            continue;
        cell_job *cj = &cjs[n_jobs];
        gt_job *job = &jv[n_jobs++];
        cj->cell = c;
        cj->artifacts = cJSON_CreateArray();
        *job = (gt_job){.cell_id = c->id, .timeout_s = c->timeout_s, .memory_mb = c->memory_mb,
                        .after = -1, .user = cj};
        /* Cells after their reference cell (same model and quant): suites
         * comparing with the reference then find its outputs cached. */
        for (int k = 0; k < n_jobs - 1 && strcmp(c->backend->id, "reference") != 0; k++)
            if (cjs[k].cell->model == c->model && !strcmp(cjs[k].cell->quant, c->quant) &&
                !strcmp(cjs[k].cell->backend->id, "reference"))
                job->after = k;
        if (c->expected == GT_ST_SKIP) {
            char why[1100];
            snprintf(why, sizeof why, GT_SKIP_MATRIX ": %s", c->expect_reason);
            preset(cj, GT_ST_SKIP, why);
            continue;
        }
        const gt_artifact *src = gt_artifacts_source(&arts, c->model);
        const gt_artifact *art = gt_artifacts_quant(&arts, c->model, c->quant);
        const gt_artifact *f = f32 ? gt_artifacts_quant(&arts, c->model, "f32") : NULL;
        if (art->state != GT_ART_OK) {
            preset(cj, art->state == GT_ART_MISSING || art->state == GT_ART_UNSUPPORTED
                           ? GT_ST_SKIP : GT_ST_ERROR, art->reason);
            continue;
        }
        snprintf(cj->model_sha, sizeof cj->model_sha, "%s", src->sha256);
        snprintf(cj->artifact_sha, sizeof cj->artifact_sha, "%s", art->sha256);
        cJSON *a1 = gt_artifact_json(src, c->model->id, NULL, NULL);
        cJSON *a2 = art != src ? gt_artifact_json(art, c->model->id, c->quant, src->sha256) : NULL;
        if (a1)
            cJSON_AddItemToArray(cj->artifacts, a1);
        if (a2)
            cJSON_AddItemToArray(cj->artifacts, a2);
        job->spec = make_spec(m, tier, c, art, src, f, db_abs, scratch, arts.self_exe);
        if (!job->spec)
            preset(cj, GT_ST_ERROR, "out of memory building the cell spec");
    }
    gt_db_strings_free(pending, n_pending);

    gt_runner_opts ro = {.self_exe = arts.self_exe, .jobs = jobs,
                         .progress = q.progress, .quiet = quiet, .out = stdout,
                         .total = n_shard, .already_done = n_shard - n_jobs, .done = on_done,
                         .abandoned = on_abandoned, .user = &q};
    int ran = gt_runner_run(&ro, jv, n_jobs, &err);
    if (ran < 0) {
        gt_db_part_end(db, q.part_id, "error", NULL);
        gt_db_run_finish(db, q.run_id, "interrupted", NULL);
        goto fail;
    }
    char **left = NULL;
    int n_left = 0;
    gt_db_cells_pending(db, q.run_id, &left, &n_left, NULL);
    gt_db_strings_free(left, n_left);
    if (ran == 1) {
        gt_db_part_end(db, q.part_id, "interrupted", NULL);
        gt_db_run_finish(db, q.run_id, "interrupted", NULL);
        fprintf(stderr, "gauntlet qualify: interrupted; %d cells not finished. Resume with:\n"
                        "  gauntlet qualify %s --db %s --resume '%s'\n",
                n_left, argv[optind], db_path, key);
        rc = GT_EXIT_FAIL;
        goto out;
    }
    gt_db_part_end(db, q.part_id, "complete", NULL);
    gt_db_run_finish(db, q.run_id, n_left ? "running" : "complete", NULL);
    if (q.n_overhead && !quiet)
        printf("harness overhead per cell: mean %.1f ms, max %.1f ms (process start to first "
               "result line, plus DB commit: mean %.1f ms) over %d cells; worker exit after its "
               "last line: mean %.1f ms\n",
               q.overhead_sum / q.n_overhead, q.overhead_max, q.commit_sum / q.n_overhead,
               q.n_overhead, q.teardown_sum / q.n_overhead);
    int g = 0;
    if (n_shard == 0 && (shard_given || backends)) {
        /* A hardware runner's slice of a fan-out can be empty (its backends
         * have no cell in this shard). Nothing ran, so nothing failed; the
         * merged run's gate still expects every cell of the tier. */
        if (!quiet)
            printf("gate: nothing to judge: shard %d/%d%s%s selects no cell of tier %s; the "
                   "merged run's gate judges the whole run\n",
                   shard_i, shard_n, backends ? " with backends " : "", backends ? backends : "",
                   tier->name);
    } else if ((g = gt_gate_eval(db, q.run_id, bdb, brun, stdout, &err)) < 0) {
        goto fail;
    }
    if (reports.junit || reports.html || reports.markdown) {
        /* The gate's verdict is the exit code; a report that cannot be
         * written is a configuration error and must not hide it. */
        reports.base_db = bdb;
        reports.base_run_id = brun;
        if (gt_report_write(db, q.run_id, &reports, &err) != 0)
            goto fail;
        if (!quiet)
            printf("reports:%s%s%s%s%s%s\n", reports.junit ? " junit " : "",
                   reports.junit ? reports.junit : "", reports.html ? " html " : "",
                   reports.html ? reports.html : "", reports.markdown ? " markdown " : "",
                   reports.markdown ? reports.markdown : "");
    }
    rc = g == 0 ? GT_EXIT_OK : GT_EXIT_FAIL;
    goto out;
fail:
    fprintf(stderr, "gauntlet qualify: %s\n", err.msg);
    rc = GT_EXIT_USAGE;
out:
    for (int i = 0; jv && i < n_cells; i++) {
        free((char *)jv[i].spec);
        cJSON_Delete(cjs[i].artifacts);
    }
    free(jv);
    free(cjs);
    if (scratch[0]) /* reference files are removed as they are recorded; a */
        remove_tree(scratch); /* worker that crashed may have left its own */
    gt_artifacts_free(&arts);
    if (bdb && bdb != db)
        gt_db_close(bdb);
    gt_db_close(db);
    gt_cells_free(cells, n_cells);
    gt_matrix_free(m);
    return rc;
}
