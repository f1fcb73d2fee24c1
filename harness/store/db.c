/* db.c: the qualification database (schema and its meaning: see db.h).
 *
 * Design choices:
 * - The schema is a list of migrations, each one transaction moving
 *   PRAGMA user_version up by one; opening an older file migrates it, a newer
 *   file is refused (an old gauntlet must not write what it does not know).
 * - WAL + busy_timeout + BEGIN IMMEDIATE: the writer takes the write lock at
 *   the start of a transaction rather than upgrading mid-way (which can fail
 *   with SQLITE_BUSY and no retry), and readers never block it.
 * - synchronous=NORMAL: in WAL mode a committed transaction survives the
 *   process being killed; only a power cut can lose the last commits, never
 *   corrupt the file. A qualification run can be resumed, so that is the
 *   right trade against an fsync per cell.
 * - Cell status strings are constrained by CHECK so a bug cannot store a
 *   status the gate and reports do not know. */
#include "db.h"

#include "db_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef GT_VERSION
#define GT_VERSION "0.0.0"
#endif
#ifndef GT_GIT_SHA
#define GT_GIT_SHA "unknown"
#endif


#define STATUSES "'pending','pass','fail','xfail','xpass','skip','error','crash','timeout'"

static const char *const MIGRATIONS[] = {
    /* 1: initial schema */
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    "CREATE TABLE runs ("
    " id INTEGER PRIMARY KEY, run_key TEXT NOT NULL UNIQUE,"
    " matrix_name TEXT NOT NULL, matrix_sha256 TEXT NOT NULL, matrix_json TEXT NOT NULL,"
    " matrix_path TEXT, tier TEXT NOT NULL, gate_json TEXT,"
    " tool_version TEXT NOT NULL, git_sha TEXT NOT NULL, host TEXT NOT NULL,"
    " n_cells INTEGER NOT NULL, started_at REAL NOT NULL, finished_at REAL,"
    " status TEXT NOT NULL CHECK (status IN ('running','complete','interrupted')));"
    "CREATE TABLE run_parts ("
    " id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
    " part_key TEXT NOT NULL UNIQUE, shard_index INTEGER NOT NULL, shard_count INTEGER NOT NULL,"
    " host TEXT NOT NULL, tool_version TEXT NOT NULL, git_sha TEXT NOT NULL, argv TEXT,"
    " started_at REAL NOT NULL, finished_at REAL, status TEXT NOT NULL);"
    "CREATE TABLE devices ("
    " id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
    " host TEXT NOT NULL, backend TEXT NOT NULL, driver_profile TEXT NOT NULL,"
    " name TEXT NOT NULL, kind TEXT, driver TEXT NOT NULL DEFAULT '',"
    " driver_version TEXT NOT NULL DEFAULT '', memory INTEGER, extra TEXT,"
    " UNIQUE (run_id, host, backend, driver_profile, name, driver, driver_version));"
    "CREATE TABLE cells ("
    " id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
    " cell_id TEXT NOT NULL, idx INTEGER NOT NULL,"
    " model TEXT NOT NULL, quant TEXT NOT NULL, backend TEXT NOT NULL, driver TEXT NOT NULL,"
    " required INTEGER NOT NULL, expected TEXT NOT NULL, expect_reason TEXT,"
    " status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN (" STATUSES ")),"
    " raw_status TEXT, reason TEXT, device_id INTEGER REFERENCES devices(id),"
    " model_sha256 TEXT, artifact_sha256 TEXT, host TEXT,"
    " part_id INTEGER REFERENCES run_parts(id), attempts INTEGER NOT NULL DEFAULT 0,"
    " started_at REAL, finished_at REAL, duration_s REAL, worker_s REAL, overhead_ms REAL,"
    " log TEXT, UNIQUE (run_id, cell_id));"
    "CREATE TABLE results ("
    " id INTEGER PRIMARY KEY, cell INTEGER NOT NULL REFERENCES cells(id) ON DELETE CASCADE,"
    " seq INTEGER NOT NULL, suite TEXT NOT NULL, check_name TEXT NOT NULL,"
    " status TEXT NOT NULL CHECK (status IN ('pass','fail','skip','error')), message TEXT);"
    "CREATE TABLE metrics ("
    " id INTEGER PRIMARY KEY, cell INTEGER NOT NULL REFERENCES cells(id) ON DELETE CASCADE,"
    " seq INTEGER NOT NULL, suite TEXT NOT NULL, name TEXT NOT NULL, value REAL, unit TEXT,"
    " tolerance REAL, comparator TEXT, verdict TEXT NOT NULL"
    " CHECK (verdict IN ('pass','fail','info')), better INTEGER NOT NULL DEFAULT 0,"
    " regress INTEGER NOT NULL DEFAULT 0);"
    "CREATE TABLE artifacts ("
    " id INTEGER PRIMARY KEY, sha256 TEXT NOT NULL, path TEXT NOT NULL, size INTEGER,"
    " kind TEXT, model TEXT, quant TEXT, source_sha256 TEXT, created_at REAL,"
    " UNIQUE (sha256, path));"
    "CREATE TABLE ref_cache ("
    " key TEXT PRIMARY KEY, model_sha256 TEXT, quant TEXT, meta TEXT, size INTEGER NOT NULL,"
    " sha256 TEXT NOT NULL, data BLOB NOT NULL, created_at REAL, run_key TEXT, cell_id TEXT);"
    "CREATE INDEX results_cell ON results(cell);"
    "CREATE INDEX metrics_cell ON metrics(cell);"
    "CREATE INDEX cells_status ON cells(run_id, status);"
    "CREATE INDEX runs_matrix ON runs(matrix_name, tier, started_at);",
    /* 2: a merged run remembers what was merged into it, so the gate can
     * tell "one shard's database" (judged on its own cells) from "the whole
     * run, missing a shard" (which must fail). */
    "CREATE TABLE run_merges ("
    " id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
    " source TEXT NOT NULL, shards TEXT NOT NULL, merged_at REAL NOT NULL,"
    " UNIQUE (run_id, source, shards));",
    /* 3: each file's architecture, which the report's environment names. */
    "ALTER TABLE artifacts ADD COLUMN arch TEXT;",
    /* 4: a cell's execution settings (the matrix's settings axis), so that
     * reports and SQL can group by them without parsing the id. Cells of
     * older runs had none: '' and NULLs. */
    "ALTER TABLE cells ADD COLUMN settings TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE cells ADD COLUMN n_batch INTEGER;"
    "ALTER TABLE cells ADD COLUMN n_parallel INTEGER;"
    "ALTER TABLE cells ADD COLUMN threads INTEGER;"
    "ALTER TABLE cells ADD COLUMN kv_type TEXT;",
    /* 5: a cell's series (gt_suite_point: the long suite's drift against
     * position), which the report draws as curves. Rows, not a JSON blob,
     * so SQL can read them and merge copies them like metrics. */
    "CREATE TABLE series ("
    " id INTEGER PRIMARY KEY, cell INTEGER NOT NULL REFERENCES cells(id) ON DELETE CASCADE,"
    " seq INTEGER NOT NULL, suite TEXT NOT NULL, name TEXT NOT NULL, x REAL, y REAL);"
    "CREATE INDEX series_cell ON series(cell);",
};
#define N_MIGRATIONS ((int)(sizeof MIGRATIONS / sizeof MIGRATIONS[0]))

const char *gt_dbi_migration(int i) { return i >= 0 && i < N_MIGRATIONS ? MIGRATIONS[i] : NULL; }
_Static_assert(N_MIGRATIONS == GT_DB_SCHEMA_VERSION, "one migration per schema version");

int gt_dbi_sqlerr(gt_db *db, gt_err *err, const char *what)
{
    return gt_err_set(err, "%s: %s: %s", db->path, what, sqlite3_errmsg(db->h));
}

double gt_db_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int gt_db_exec(gt_db *db, const char *sql, gt_err *err)
{
    char *msg = NULL;
    if (sqlite3_exec(db->h, sql, NULL, NULL, &msg) != SQLITE_OK) {
        gt_err_set(err, "%s: %s", db->path, msg ? msg : sqlite3_errmsg(db->h));
        sqlite3_free(msg);
        return -1;
    }
    return 0;
}

int gt_db_begin(gt_db *db, gt_err *err) { return gt_db_exec(db, "BEGIN IMMEDIATE", err); }
int gt_db_commit(gt_db *db, gt_err *err) { return gt_db_exec(db, "COMMIT", err); }
void gt_db_rollback(gt_db *db)
{
    if (!sqlite3_get_autocommit(db->h))
        sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
}

static int user_version(gt_db *db, int *v, gt_err *err)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db->h, "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK)
        return gt_dbi_sqlerr(db, err, "reading the schema version");
    *v = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : 0;
    sqlite3_finalize(st);
    return 0;
}

static int migrate(gt_db *db, gt_err *err)
{
    int v = 0;
    if (user_version(db, &v, err) != 0)
        return -1;
    if (v > GT_DB_SCHEMA_VERSION)
        return gt_err_set(err, "%s: schema version %d is newer than this gauntlet's (%d); "
                               "use a newer gauntlet",
                          db->path, v, GT_DB_SCHEMA_VERSION);
    if (v == GT_DB_SCHEMA_VERSION)
        return 0;
    if (db->readonly)
        return gt_err_set(err, "%s: schema version %d is older than %d; open it writable "
                               "(any gauntlet command that writes) to migrate it",
                          db->path, v, GT_DB_SCHEMA_VERSION);
    for (; v < GT_DB_SCHEMA_VERSION; v++) {
        char set[64];
        snprintf(set, sizeof set, "PRAGMA user_version = %d", v + 1);
        if (gt_db_begin(db, err) != 0)
            return -1;
        /* Another process may have migrated while we waited for the lock. */
        int now = 0;
        if (user_version(db, &now, err) != 0 || now > v) {
            gt_db_rollback(db);
            if (now > v) {
                v = now - 1;
                continue;
            }
            return -1;
        }
        if (gt_db_exec(db, MIGRATIONS[v], err) != 0 || gt_db_exec(db, set, err) != 0 ||
            (v == 0 && gt_db_exec(db, "INSERT INTO meta VALUES ('created_by', 'gauntlet "
                                      GT_VERSION "')", err) != 0) ||
            gt_db_commit(db, err) != 0) {
            gt_db_rollback(db);
            return gt_err_wrap(err, "migrating to schema version %d", v + 1);
        }
    }
    return 0;
}

int gt_db_open(const char *path, bool readonly, gt_db **out, gt_err *err)
{
    *out = NULL;
    gt_db *db = calloc(1, sizeof *db);
    if (!db || !(db->path = strdup(path))) {
        free(db);
        return gt_err_set(err, "out of memory");
    }
    db->readonly = readonly;
    if (readonly) {
        struct stat sb;
        if (stat(path, &sb) != 0) {
            gt_err_set(err, "cannot open database %s: %s", path, strerror(errno));
            gt_db_close(db);
            return -1;
        }
    }
    int flags = readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    if (sqlite3_open_v2(path, &db->h, flags | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
        gt_err_set(err, "cannot open database %s: %s", path,
                   db->h ? sqlite3_errmsg(db->h) : "out of memory");
        gt_db_close(db);
        return -1;
    }
    sqlite3_busy_timeout(db->h, 30000);
    sqlite3_extended_result_codes(db->h, 1);
    if ((!readonly && gt_db_exec(db, "PRAGMA journal_mode=WAL", err) != 0) ||
        gt_db_exec(db, "PRAGMA foreign_keys=ON; PRAGMA synchronous=NORMAL", err) != 0 ||
        migrate(db, err) != 0) {
        gt_db_close(db);
        return -1;
    }
    *out = db;
    return 0;
}

void gt_db_close(gt_db *db)
{
    if (!db)
        return;
    sqlite3_close_v2(db->h);
    free(db->path);
    free(db);
}

sqlite3 *gt_db_sqlite(gt_db *db) { return db->h; }
const char *gt_db_path(const gt_db *db) { return db->path; }

/* Binds a NULL for a NULL string, so optional columns stay NULL. */
void gt_dbi_bind_text(sqlite3_stmt *st, int i, const char *s)
{
    if (s)
        sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(st, i);
}

void gt_dbi_col_copy(sqlite3_stmt *st, int i, char *out, size_t cap)
{
    const unsigned char *s = sqlite3_column_text(st, i);
    snprintf(out, cap, "%s", s ? (const char *)s : "");
}

void gt_dbi_host(char *out, size_t cap)
{
    if (gethostname(out, cap) != 0)
        snprintf(out, cap, "unknown");
    out[cap - 1] = '\0';
}

#define RUN_COLS                                                                              \
    "id, run_key, matrix_name, matrix_sha256, tier, status, host, tool_version, git_sha,"    \
    " n_cells, started_at, COALESCE(finished_at, 0)"

static void read_run(sqlite3_stmt *st, gt_db_run *r)
{
    r->id = sqlite3_column_int64(st, 0);
    gt_dbi_col_copy(st, 1, r->run_key, sizeof r->run_key);
    gt_dbi_col_copy(st, 2, r->matrix_name, sizeof r->matrix_name);
    gt_dbi_col_copy(st, 3, r->matrix_sha256, sizeof r->matrix_sha256);
    gt_dbi_col_copy(st, 4, r->tier, sizeof r->tier);
    gt_dbi_col_copy(st, 5, r->status, sizeof r->status);
    gt_dbi_col_copy(st, 6, r->host, sizeof r->host);
    gt_dbi_col_copy(st, 7, r->tool_version, sizeof r->tool_version);
    gt_dbi_col_copy(st, 8, r->git_sha, sizeof r->git_sha);
    r->n_cells = sqlite3_column_int(st, 9);
    r->started_at = sqlite3_column_double(st, 10);
    r->finished_at = sqlite3_column_double(st, 11);
}

int gt_db_run_get(gt_db *db, const char *run_key, gt_db_run *out, gt_err *err)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db->h, "SELECT " RUN_COLS " FROM runs WHERE run_key = ?", -1, &st,
                           NULL) != SQLITE_OK)
        return gt_dbi_sqlerr(db, err, "looking up a run");
    gt_dbi_bind_text(st, 1, run_key);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        read_run(st, out);
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return gt_dbi_sqlerr(db, err, "looking up a run");
    return rc == SQLITE_ROW ? 0 : 1;
}

int gt_db_run_latest(gt_db *db, const char *matrix_name, const char *tier,
                     const char *except_key, gt_db_run *out, gt_err *err)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db->h,
                           "SELECT " RUN_COLS " FROM runs WHERE matrix_name = ? AND tier = ?"
                           " AND run_key IS NOT ? ORDER BY status = 'complete' DESC,"
                           " started_at DESC LIMIT 1",
                           -1, &st, NULL) != SQLITE_OK)
        return gt_dbi_sqlerr(db, err, "looking up a baseline run");
    gt_dbi_bind_text(st, 1, matrix_name);
    gt_dbi_bind_text(st, 2, tier);
    gt_dbi_bind_text(st, 3, except_key);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        read_run(st, out);
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return gt_dbi_sqlerr(db, err, "looking up a baseline run");
    return rc == SQLITE_ROW ? 0 : 1;
}

int gt_db_run_create(gt_db *db, const gt_db_run_new *r, int64_t *id, gt_err *err)
{
    char host[128];
    gt_dbi_host(host, sizeof host);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db->h,
                           "INSERT INTO runs (run_key, matrix_name, matrix_sha256, matrix_json,"
                           " matrix_path, tier, gate_json, tool_version, git_sha, host, n_cells,"
                           " started_at, status) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,'running')",
                           -1, &st, NULL) != SQLITE_OK)
        return gt_dbi_sqlerr(db, err, "creating a run");
    gt_dbi_bind_text(st, 1, r->run_key);
    gt_dbi_bind_text(st, 2, r->matrix_name);
    gt_dbi_bind_text(st, 3, r->matrix_sha256);
    gt_dbi_bind_text(st, 4, r->matrix_json);
    gt_dbi_bind_text(st, 5, r->matrix_path);
    gt_dbi_bind_text(st, 6, r->tier);
    gt_dbi_bind_text(st, 7, r->gate_json);
    gt_dbi_bind_text(st, 8, GT_VERSION);
    gt_dbi_bind_text(st, 9, GT_GIT_SHA);
    gt_dbi_bind_text(st, 10, host);
    sqlite3_bind_int(st, 11, r->n_cells);
    sqlite3_bind_double(st, 12, gt_db_now());
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return gt_dbi_sqlerr(db, err, "creating a run");
    *id = sqlite3_last_insert_rowid(db->h);
    return 0;
}

int gt_db_run_texts(gt_db *db, int64_t run_id, char **matrix_json, char **gate_json,
                    gt_err *err)
{
    sqlite3_stmt *st;
    *matrix_json = *gate_json = NULL;
    if (sqlite3_prepare_v2(db->h, "SELECT matrix_json, gate_json FROM runs WHERE id = ?", -1,
                           &st, NULL) != SQLITE_OK)
        return gt_dbi_sqlerr(db, err, "reading a run");
    sqlite3_bind_int64(st, 1, run_id);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        const char *m = (const char *)sqlite3_column_text(st, 0);
        const char *g = (const char *)sqlite3_column_text(st, 1);
        *matrix_json = strdup(m ? m : "");
        *gate_json = g ? strdup(g) : NULL;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW)
        return gt_err_set(err, "%s: run %lld not found", db->path, (long long)run_id);
    return 0;
}

static int exec_bound(gt_db *db, const char *sql, int64_t id, const char *text, gt_err *err)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db->h, sql, -1, &st, NULL) != SQLITE_OK)
        return gt_dbi_sqlerr(db, err, "updating");
    gt_dbi_bind_text(st, 1, text);
    sqlite3_bind_double(st, 2, gt_db_now());
    sqlite3_bind_int64(st, 3, id);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : gt_dbi_sqlerr(db, err, "updating");
}

int gt_db_run_finish(gt_db *db, int64_t run_id, const char *status, gt_err *err)
{
    return exec_bound(db, "UPDATE runs SET status = ?, finished_at = ? WHERE id = ?", run_id,
                      status, err);
}

int gt_db_part_begin(gt_db *db, int64_t run_id, int shard_index, int shard_count,
                     const char *argv, int64_t *part_id, gt_err *err)
{
    char host[128], key[256];
    gt_dbi_host(host, sizeof host);
    double now = gt_db_now();
    snprintf(key, sizeof key, "%lld/%s/%d/%.6f", (long long)run_id, host, (int)getpid(), now);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db->h,
                           "INSERT INTO run_parts (run_id, part_key, shard_index, shard_count,"
                           " host, tool_version, git_sha, argv, started_at, status)"
                           " VALUES (?,?,?,?,?,?,?,?,?,'running')",
                           -1, &st, NULL) != SQLITE_OK)
        return gt_dbi_sqlerr(db, err, "recording a run part");
    sqlite3_bind_int64(st, 1, run_id);
    gt_dbi_bind_text(st, 2, key);
    sqlite3_bind_int(st, 3, shard_index);
    sqlite3_bind_int(st, 4, shard_count);
    gt_dbi_bind_text(st, 5, host);
    gt_dbi_bind_text(st, 6, GT_VERSION);
    gt_dbi_bind_text(st, 7, GT_GIT_SHA);
    gt_dbi_bind_text(st, 8, argv);
    sqlite3_bind_double(st, 9, now);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return gt_dbi_sqlerr(db, err, "recording a run part");
    *part_id = sqlite3_last_insert_rowid(db->h);
    /* A resumed run is running again until this part ends. */
    return exec_bound(db, "UPDATE runs SET status = ?1, finished_at = NULL WHERE id = ?3", run_id,
                      "running", err);
}

int gt_db_run_counts(gt_db *db, int64_t run_id, int *total, int *pending, gt_err *err)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db->h,
                           "SELECT COUNT(*), COALESCE(SUM(status = 'pending'), 0) FROM cells"
                           " WHERE run_id = ?",
                           -1, &st, NULL) != SQLITE_OK)
        return gt_dbi_sqlerr(db, err, "counting cells");
    sqlite3_bind_int64(st, 1, run_id);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *total = sqlite3_column_int(st, 0);
        *pending = sqlite3_column_int(st, 1);
    }
    sqlite3_finalize(st);
    return rc == SQLITE_ROW ? 0 : gt_dbi_sqlerr(db, err, "counting cells");
}

int gt_db_part_end(gt_db *db, int64_t part_id, const char *status, gt_err *err)
{
    return exec_bound(db, "UPDATE run_parts SET status = ?, finished_at = ? WHERE id = ?",
                      part_id, status, err);
}

int gt_db_cells_add(gt_db *db, int64_t run_id, const gt_db_cell_new *cells, int n,
                    gt_err *err)
{
    sqlite3_stmt *st;
    if (gt_db_begin(db, err) != 0)
        return -1;
    if (sqlite3_prepare_v2(db->h,
                           "INSERT OR IGNORE INTO cells (run_id, cell_id, idx, model, quant,"
                           " backend, driver, required, expected, expect_reason, settings,"
                           " n_batch, n_parallel, threads, kv_type)"
                           " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                           -1, &st, NULL) != SQLITE_OK) {
        gt_db_rollback(db);
        return gt_dbi_sqlerr(db, err, "adding cells");
    }
    for (int i = 0; i < n; i++) {
        const gt_db_cell_new *c = &cells[i];
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, run_id);
        gt_dbi_bind_text(st, 2, c->cell_id);
        sqlite3_bind_int(st, 3, c->idx);
        gt_dbi_bind_text(st, 4, c->model);
        gt_dbi_bind_text(st, 5, c->quant);
        gt_dbi_bind_text(st, 6, c->backend);
        gt_dbi_bind_text(st, 7, c->driver);
        sqlite3_bind_int(st, 8, c->required);
        gt_dbi_bind_text(st, 9, c->expected);
        gt_dbi_bind_text(st, 10, c->expect_reason);
        gt_dbi_bind_text(st, 11, c->settings ? c->settings : "");
        const int set[3] = {c->n_batch, c->n_parallel, c->threads};
        for (int k = 0; k < 3; k++)
            if (set[k] > 0)
                sqlite3_bind_int(st, 12 + k, set[k]);
            else
                sqlite3_bind_null(st, 12 + k);
        gt_dbi_bind_text(st, 15, c->kv_type);
        if (sqlite3_step(st) != SQLITE_DONE) {
            gt_dbi_sqlerr(db, err, "adding cells");
            sqlite3_finalize(st);
            gt_db_rollback(db);
            return -1;
        }
    }
    sqlite3_finalize(st);
    return gt_db_commit(db, err);
}

void gt_db_strings_free(char **s, int n)
{
    for (int i = 0; s && i < n; i++)
        free(s[i]);
    free(s);
}

int gt_db_cells_pending(gt_db *db, int64_t run_id, char ***ids, int *n, gt_err *err)
{
    sqlite3_stmt *st;
    *ids = NULL;
    *n = 0;
    if (sqlite3_prepare_v2(db->h,
                           "SELECT cell_id FROM cells WHERE run_id = ? AND status = 'pending'"
                           " ORDER BY idx",
                           -1, &st, NULL) != SQLITE_OK)
        return gt_dbi_sqlerr(db, err, "listing pending cells");
    sqlite3_bind_int64(st, 1, run_id);
    int cap = 0, rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (*n == cap) {
            char **nl = realloc(*ids, (size_t)(cap = cap * 2 + 16) * sizeof *nl);
            if (!nl)
                break;
            *ids = nl;
        }
        (*ids)[(*n)++] = strdup((const char *)sqlite3_column_text(st, 0));
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        gt_db_strings_free(*ids, *n);
        *ids = NULL;
        *n = 0;
        return rc == SQLITE_ROW ? gt_err_set(err, "out of memory")
                                : gt_dbi_sqlerr(db, err, "listing pending cells");
    }
    return 0;
}

int gt_db_ref_get(gt_db *db, const char *key, void **data, size_t *size, gt_err *err)
{
    sqlite3_stmt *st;
    *data = NULL;
    *size = 0;
    if (sqlite3_prepare_v2(db->h, "SELECT data FROM ref_cache WHERE key = ?", -1, &st, NULL) !=
        SQLITE_OK)
        return gt_dbi_sqlerr(db, err, "reading the reference cache");
    gt_dbi_bind_text(st, 1, key);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        int n = sqlite3_column_bytes(st, 0);
        const void *p = sqlite3_column_blob(st, 0);
        *data = malloc(n ? (size_t)n : 1);
        if (!*data) {
            sqlite3_finalize(st);
            return gt_err_set(err, "out of memory reading a %d-byte reference", n);
        }
        if (n)
            memcpy(*data, p, (size_t)n);
        *size = (size_t)n;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return gt_dbi_sqlerr(db, err, "reading the reference cache");
    return rc == SQLITE_ROW ? 0 : 1;
}

