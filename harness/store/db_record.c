/* db_record.c: writing one finished cell (see gt_db_cell_record in db.h),
 * and the reference outputs of one that did not finish (gt_db_refs_keep).
 *
 * Everything a worker reported goes in with the cell's final status in one
 * BEGIN IMMEDIATE transaction: devices (deduplicated per run and host),
 * results, metrics and series points (replacing any from an earlier
 * attempt), reference
 * outputs (moved from the worker's scratch files into ref_cache; the files
 * are removed only after the commit), artifacts. A failure rolls all of it
 * back, so the cell stays pending and a resume re-runs it. */
#include "db.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "db_internal.h"
#include "base.h"

static const char *jstr(const cJSON *o, const char *k)
{
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(n) ? n->valuestring : NULL;
}

/* Numbers that may be null (NaN in the worker) bind as NULL. */
static void bind_jnum(sqlite3_stmt *st, int i, const cJSON *o, const char *k)
{
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(o, k);
    if (cJSON_IsNumber(n) && n->valuedouble == n->valuedouble)
        sqlite3_bind_double(st, i, n->valuedouble);
    else
        sqlite3_bind_null(st, i);
}

/* A worker's word is data: a value outside what the schema allows is
 * stored as the fallback rather than failing the cell's transaction (and
 * with it the run). */
static const char *const CHECK_STATUSES[] = {"pass", "fail", "skip", "error", NULL};
static const char *const VERDICTS[] = {"pass", "fail", "info", NULL};

static const char *one_of(const char *v, const char *const *allowed, const char *fallback)
{
    for (int i = 0; v && allowed[i]; i++)
        if (!strcmp(v, allowed[i]))
            return v;
    return fallback;
}

static int step_done(gt_db *db, sqlite3_stmt *st, gt_err *err, const char *what)
{
    int rc = sqlite3_step(st);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW)
        return gt_dbi_sqlerr(db, err, what);
    return 0;
}

static int record_device(gt_db *db, int64_t run_id, const char *host, const cJSON *d,
                         int64_t *id, gt_err *err)
{
    static const char *const K[] = {"backend", "driver_profile", "name", "driver",
                                    "driver_version"};
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db->h,
                           "INSERT OR IGNORE INTO devices (run_id, host, backend, driver_profile,"
                           " name, driver, driver_version, kind, memory, extra)"
                           " VALUES (?,?,?,?,?,?,?,?,?,?)",
                           -1, &st, NULL) != SQLITE_OK)
        return gt_dbi_sqlerr(db, err, "recording a device");
    sqlite3_bind_int64(st, 1, run_id);
    gt_dbi_bind_text(st, 2, host);
    for (int i = 0; i < 5; i++)
        gt_dbi_bind_text(st, 3 + i, jstr(d, K[i]) ? jstr(d, K[i]) : "");
    gt_dbi_bind_text(st, 8, jstr(d, "kind"));
    bind_jnum(st, 9, d, "memory");
    gt_dbi_bind_text(st, 10, jstr(d, "extra"));
    int rc = step_done(db, st, err, "recording a device");
    sqlite3_finalize(st);
    if (rc)
        return -1;
    if (sqlite3_prepare_v2(db->h,
                           "SELECT id FROM devices WHERE run_id = ? AND host = ? AND backend = ?"
                           " AND driver_profile = ? AND name = ? AND driver = ?"
                           " AND driver_version = ?",
                           -1, &st, NULL) != SQLITE_OK)
        return gt_dbi_sqlerr(db, err, "recording a device");
    sqlite3_bind_int64(st, 1, run_id);
    gt_dbi_bind_text(st, 2, host);
    for (int i = 0; i < 5; i++)
        gt_dbi_bind_text(st, 3 + i, jstr(d, K[i]) ? jstr(d, K[i]) : "");
    *id = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    sqlite3_finalize(st);
    return 0;
}

static int record_ref(gt_db *db, const cJSON *r, const char *artifact_sha, const char *quant,
                      const char *run_key, const char *cell_id, gt_err *err)
{
    const char *file = jstr(r, "file"), *key = jstr(r, "key");
    if (!file || !key)
        return gt_err_set(err, "reference line lacks key or file");
    FILE *f = fopen(file, "rb");
    if (!f)
        return gt_err_set(err, "reference output %s: %s", file, strerror(errno));
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *data = malloc(n > 0 ? (size_t)n : 1);
    if (!data || (n > 0 && fread(data, 1, (size_t)n, f) != (size_t)n)) {
        fclose(f);
        free(data);
        return gt_err_set(err, "cannot read reference output %s", file);
    }
    fclose(f);
    char sha[65];
    gt_sha256_hex(data, (size_t)n, sha);
    sqlite3_stmt *st;
    int rc = -1;
    if (sqlite3_prepare_v2(db->h,
                           "INSERT OR IGNORE INTO ref_cache (key, model_sha256, quant, meta, size,"
                           " sha256, data, created_at, run_key, cell_id)"
                           " VALUES (?,?,?,?,?,?,?,?,?,?)",
                           -1, &st, NULL) == SQLITE_OK) {
        gt_dbi_bind_text(st, 1, key);
        gt_dbi_bind_text(st, 2, artifact_sha);
        gt_dbi_bind_text(st, 3, quant);
        gt_dbi_bind_text(st, 4, jstr(r, "meta"));
        sqlite3_bind_int64(st, 5, n);
        gt_dbi_bind_text(st, 6, sha);
        sqlite3_bind_blob(st, 7, data, (int)n, SQLITE_STATIC);
        sqlite3_bind_double(st, 8, gt_db_now());
        gt_dbi_bind_text(st, 9, run_key);
        gt_dbi_bind_text(st, 10, cell_id);
        rc = step_done(db, st, err, "storing a reference output");
        sqlite3_finalize(st);
    } else {
        gt_dbi_sqlerr(db, err, "storing a reference output");
    }
    free(data);
    return rc;
}

static int record_artifact(gt_db *db, const cJSON *a, gt_err *err)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db->h,
                           "INSERT OR IGNORE INTO artifacts (sha256, path, size, kind, model,"
                           " quant, source_sha256, created_at, arch) VALUES (?,?,?,?,?,?,?,?,?)",
                           -1, &st, NULL) != SQLITE_OK)
        return gt_dbi_sqlerr(db, err, "recording an artifact");
    gt_dbi_bind_text(st, 1, jstr(a, "sha256"));
    gt_dbi_bind_text(st, 2, jstr(a, "path"));
    bind_jnum(st, 3, a, "size");
    gt_dbi_bind_text(st, 4, jstr(a, "kind"));
    gt_dbi_bind_text(st, 5, jstr(a, "model"));
    gt_dbi_bind_text(st, 6, jstr(a, "quant"));
    gt_dbi_bind_text(st, 7, jstr(a, "source_sha256"));
    sqlite3_bind_double(st, 8, gt_db_now());
    gt_dbi_bind_text(st, 9, jstr(a, "arch"));
    int rc = step_done(db, st, err, "recording an artifact");
    sqlite3_finalize(st);
    return rc;
}

/* The series points, in the order the worker sent them (seq). */
static int record_points(gt_db *db, int64_t cell, const cJSON *points, gt_err *err)
{
    if (!cJSON_GetArraySize(points))
        return 0;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db->h,
                           "INSERT INTO series (cell, seq, suite, name, x, y) VALUES (?,?,?,?,?,?)",
                           -1, &st, NULL) != SQLITE_OK)
        return gt_dbi_sqlerr(db, err, "recording series");
    int seq = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, points)
    {
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, cell);
        sqlite3_bind_int(st, 2, seq++);
        gt_dbi_bind_text(st, 3, jstr(p, "suite") ? jstr(p, "suite") : "");
        gt_dbi_bind_text(st, 4, jstr(p, "series") ? jstr(p, "series") : "");
        bind_jnum(st, 5, p, "x");
        bind_jnum(st, 6, p, "y");
        if (step_done(db, st, err, "recording series") != 0) {
            sqlite3_finalize(st);
            return -1;
        }
    }
    sqlite3_finalize(st);
    return 0;
}

/* The cell's row id, quant and run key (what a ref_cache row names). */
static int cell_lookup(gt_db *db, int64_t run_id, const char *cell_id, int64_t *cell,
                       char quant[32], char run_key[160], gt_err *err)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db->h,
                           "SELECT c.id, c.quant, r.run_key FROM cells c JOIN runs r"
                           " ON r.id = c.run_id WHERE c.run_id = ? AND c.cell_id = ?",
                           -1, &st, NULL) != SQLITE_OK)
        return gt_dbi_sqlerr(db, err, "looking up a cell");
    sqlite3_bind_int64(st, 1, run_id);
    gt_dbi_bind_text(st, 2, cell_id);
    *cell = 0;
    if (sqlite3_step(st) == SQLITE_ROW) {
        *cell = sqlite3_column_int64(st, 0);
        gt_dbi_col_copy(st, 1, quant, 32);
        gt_dbi_col_copy(st, 2, run_key, 160);
    }
    sqlite3_finalize(st);
    if (!*cell)
        return gt_err_set(err, "%s: cell %s is not in run %lld", db->path, cell_id,
                          (long long)run_id);
    return 0;
}

static int record_body(gt_db *db, int64_t run_id, const gt_db_record *rec, gt_err *err)
{
    sqlite3_stmt *st;
    char host[128], quant[32] = "", run_key[160] = "";
    gt_dbi_host(host, sizeof host);
    int64_t cell = 0;
    if (cell_lookup(db, run_id, rec->cell_id, &cell, quant, run_key, err) != 0)
        return -1;

    int64_t device = 0;
    const cJSON *d;
    cJSON_ArrayForEach(d, rec->devices)
    {
        int64_t id = 0;
        if (record_device(db, run_id, host, d, &id, err) != 0)
            return -1;
        if (!device)
            device = id;
    }
    char del[96];
    snprintf(del, sizeof del, "DELETE FROM results WHERE cell = %lld", (long long)cell);
    if (gt_db_exec(db, del, err) != 0)
        return -1;
    snprintf(del, sizeof del, "DELETE FROM metrics WHERE cell = %lld", (long long)cell);
    if (gt_db_exec(db, del, err) != 0)
        return -1;
    snprintf(del, sizeof del, "DELETE FROM series WHERE cell = %lld", (long long)cell);
    if (gt_db_exec(db, del, err) != 0)
        return -1;

    if (sqlite3_prepare_v2(db->h,
                           "INSERT INTO results (cell, seq, suite, check_name, status, message)"
                           " VALUES (?,?,?,?,?,?)",
                           -1, &st, NULL) != SQLITE_OK)
        return gt_dbi_sqlerr(db, err, "recording results");
    int seq = 0;
    const cJSON *r;
    cJSON_ArrayForEach(r, rec->results)
    {
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, cell);
        sqlite3_bind_int(st, 2, seq++);
        gt_dbi_bind_text(st, 3, jstr(r, "suite") ? jstr(r, "suite") : "");
        gt_dbi_bind_text(st, 4, jstr(r, "check") ? jstr(r, "check") : "");
        gt_dbi_bind_text(st, 5, one_of(jstr(r, "status"), CHECK_STATUSES, "error"));
        gt_dbi_bind_text(st, 6, jstr(r, "message"));
        if (step_done(db, st, err, "recording results") != 0) {
            sqlite3_finalize(st);
            return -1;
        }
    }
    sqlite3_finalize(st);

    if (sqlite3_prepare_v2(db->h,
                           "INSERT INTO metrics (cell, seq, suite, name, value, unit, tolerance,"
                           " comparator, verdict, better, regress) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                           -1, &st, NULL) != SQLITE_OK)
        return gt_dbi_sqlerr(db, err, "recording metrics");
    seq = 0;
    cJSON_ArrayForEach(r, rec->metrics)
    {
        const char *cmp = jstr(r, "comparator");
        const cJSON *better = cJSON_GetObjectItemCaseSensitive(r, "better");
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, cell);
        sqlite3_bind_int(st, 2, seq++);
        gt_dbi_bind_text(st, 3, jstr(r, "suite") ? jstr(r, "suite") : "");
        gt_dbi_bind_text(st, 4, jstr(r, "name") ? jstr(r, "name") : "");
        bind_jnum(st, 5, r, "value");
        gt_dbi_bind_text(st, 6, jstr(r, "unit"));
        bind_jnum(st, 7, r, "tolerance");
        gt_dbi_bind_text(st, 8, cmp && cmp[0] ? cmp : NULL);
        gt_dbi_bind_text(st, 9, one_of(jstr(r, "verdict"), VERDICTS, "info"));
        sqlite3_bind_int(st, 10, cJSON_IsNumber(better) ? better->valueint : 0);
        sqlite3_bind_int(st, 11, cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "regress")));
        if (step_done(db, st, err, "recording metrics") != 0) {
            sqlite3_finalize(st);
            return -1;
        }
    }
    sqlite3_finalize(st);

    if (record_points(db, cell, rec->points, err) != 0)
        return -1;

    cJSON_ArrayForEach(r, rec->refs)
    if (record_ref(db, r, rec->artifact_sha256, quant, run_key, rec->cell_id, err) != 0)
        return -1;
    cJSON_ArrayForEach(r, rec->artifacts)
    if (record_artifact(db, r, err) != 0)
        return -1;

    if (sqlite3_prepare_v2(db->h,
                           "UPDATE cells SET status = ?, raw_status = ?, reason = ?, device_id = ?,"
                           " model_sha256 = ?, artifact_sha256 = ?, host = ?, part_id = ?,"
                           " attempts = attempts + 1, started_at = ?, finished_at = ?,"
                           " duration_s = ?, worker_s = ?, overhead_ms = ?, log = ? WHERE id = ?",
                           -1, &st, NULL) != SQLITE_OK)
        return gt_dbi_sqlerr(db, err, "recording a cell");
    gt_dbi_bind_text(st, 1, rec->status);
    gt_dbi_bind_text(st, 2, rec->raw_status);
    gt_dbi_bind_text(st, 3, rec->reason && rec->reason[0] ? rec->reason : NULL);
    if (device)
        sqlite3_bind_int64(st, 4, device);
    else
        sqlite3_bind_null(st, 4);
    gt_dbi_bind_text(st, 5, rec->model_sha256 && rec->model_sha256[0] ? rec->model_sha256 : NULL);
    gt_dbi_bind_text(st, 6, rec->artifact_sha256 && rec->artifact_sha256[0] ? rec->artifact_sha256 : NULL);
    gt_dbi_bind_text(st, 7, host);
    if (rec->part_id)
        sqlite3_bind_int64(st, 8, rec->part_id);
    else
        sqlite3_bind_null(st, 8);
    sqlite3_bind_double(st, 9, rec->started_at);
    sqlite3_bind_double(st, 10, rec->finished_at);
    sqlite3_bind_double(st, 11, rec->duration_s);
    if (rec->worker_s >= 0)
        sqlite3_bind_double(st, 12, rec->worker_s);
    else
        sqlite3_bind_null(st, 12);
    if (rec->overhead_ms >= 0)
        sqlite3_bind_double(st, 13, rec->overhead_ms);
    else
        sqlite3_bind_null(st, 13);
    gt_dbi_bind_text(st, 14, rec->log && rec->log[0] ? rec->log : NULL);
    sqlite3_bind_int64(st, 15, cell);
    int rc = step_done(db, st, err, "recording a cell");
    sqlite3_finalize(st);
    return rc;
}

int gt_db_cell_record(gt_db *db, int64_t run_id, const gt_db_record *rec, double *commit_ms,
                      gt_err *err)
{
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    if (gt_db_begin(db, err) != 0)
        return -1;
    if (record_body(db, run_id, rec, err) != 0 || gt_db_commit(db, err) != 0) {
        gt_db_rollback(db);
        return gt_err_wrap(err, "recording cell %s", rec->cell_id);
    }
    const cJSON *r;
    cJSON_ArrayForEach(r, rec->refs)
    if (jstr(r, "file"))
        unlink(jstr(r, "file"));
    clock_gettime(CLOCK_MONOTONIC, &b);
    if (commit_ms)
        *commit_ms = (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) * 1e-6;
    return 0;
}

int gt_db_refs_keep(gt_db *db, int64_t run_id, const char *cell_id, const char *artifact_sha256,
                    const cJSON *refs, gt_err *err)
{
    if (!cJSON_GetArraySize(refs))
        return 0;
    char quant[32] = "", run_key[160] = "";
    int64_t cell = 0;
    if (gt_db_begin(db, err) != 0)
        return -1;
    int rc = cell_lookup(db, run_id, cell_id, &cell, quant, run_key, err);
    const cJSON *r;
    cJSON_ArrayForEach(r, refs)
    if (rc == 0)
        rc = record_ref(db, r, artifact_sha256, quant, run_key, cell_id, err);
    if (rc != 0 || gt_db_commit(db, err) != 0) {
        gt_db_rollback(db);
        return gt_err_wrap(err, "keeping the reference outputs of cell %s", cell_id);
    }
    cJSON_ArrayForEach(r, refs)
    if (jstr(r, "file"))
        unlink(jstr(r, "file"));
    return cJSON_GetArraySize(refs);
}
