/* db.h: the qualification database (SQLite), its schema and its writers.
 *
 * One file holds any number of runs. The qualify parent process is its only
 * writer while a run is in progress (workers only read the reference cache),
 * and records each finished cell in one BEGIN IMMEDIATE transaction, so a
 * killed harness leaves every cell either fully recorded or still pending.
 * WAL mode lets readers (workers, reports) read while the parent writes.
 *
 * Schema (version GT_DB_SCHEMA_VERSION, in PRAGMA user_version; times are
 * unix seconds as REAL):
 *
 *   runs        one logical run: run_key (unique; shards of one CI run share
 *               it, see cmd_qualify.c), matrix_name, matrix_sha256,
 *               matrix_json (the file's text), matrix_path, tier, gate_json
 *               (the tier's gate policy as written, NULL = defaults),
 *               tool_version, git_sha, host (first part's), n_cells (in the
 *               tier, all shards), started_at, finished_at, status
 *               ('running' | 'complete' | 'interrupted')
 *   run_parts   one harness invocation within a run (a shard, a resume):
 *               run_id, part_key (unique), shard_index (1-based), shard_count,
 *               host, tool_version, git_sha, argv, started_at, finished_at,
 *               status
 *   run_merges  what `gauntlet merge` put into a run (schema 2): run_id,
 *               source (the merged file, or the source row's own source when
 *               a merged file is merged again), shards (the source's parts as
 *               "I/N" list, comma-separated), merged_at. A run with rows here
 *               is a whole run: the gate expects all n_cells of it, from
 *               every shard 1..N; a run without is one invocation's database
 *               (a shard is judged on its own cells).
 *   devices     what a worker saw: run_id, host, backend, driver_profile,
 *               name, kind, driver, driver_version, memory (bytes), extra
 *   cells       run_id, cell_id ("model/quant/backend/driver", unique per
 *               run), idx (expansion order, the shard key), model, quant,
 *               backend, driver, required (0/1), expected ('pass' | 'xfail' |
 *               'skip'), expect_reason, status (a gt_status name; 'pending'
 *               until recorded), raw_status (before expectations applied),
 *               reason, device_id, model_sha256 (the matrix's model file),
 *               artifact_sha256 (the quant run), host, part_id, attempts,
 *               started_at, finished_at, duration_s (wall, parent's view),
 *               worker_s (the worker's own time), overhead_ms (the harness's
 *               process-start cost: fork to the worker's first line), log
 *               (tail of the worker's stderr); schema 4: settings (the
 *               id's fifth part, "nb7-np4-t2", '' when the backend has
 *               none), n_batch, n_parallel, threads, kv_type (what the
 *               matrix's settings set; NULL when they do not)
 *   results     cell (-> cells.id), seq, suite, check_name, status ('pass' |
 *               'fail' | 'skip' | 'error'), message
 *   metrics     cell (-> cells.id), seq, suite, name, value, unit, tolerance,
 *               comparator ('<=' | '>=' | '==' | NULL), verdict ('pass' |
 *               'fail' | 'info'), better (+1/-1/0), regress (0/1: the gate
 *               compares it to a baseline)
 *   artifacts   sha256, path, size, kind ('model' | 'quant' | 'synth'),
 *               model, quant, source_sha256, created_at, arch (the model's
 *               general.architecture; NULL before schema 3); unique (sha256, path)
 *   ref_cache   key (sha256 of kind, artifact sha256, quant, data hash,
 *               settings), model_sha256, quant, meta, size, sha256, data,
 *               created_at, run_key, cell_id (who computed it)
 *   series      (schema 5) cell (-> cells.id), seq, suite, name, x, y: the
 *               points a suite reported with gt_suite_point (the long
 *               suite's drift_kld against position, kv_bytes, kv_plan,
 *               peak_rss_mib against length), in the order sent; a few
 *               hundred per cell at most. NULL x or y: the suite sent NaN
 *
 * Reports read the tables with plain SQL; the functions below are what the
 * harness needs to write them. */
#ifndef GT_DB_H
#define GT_DB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>
#include <sqlite3.h>

#include "gt/error.h"

#define GT_DB_SCHEMA_VERSION 5

typedef struct gt_db gt_db;

/* Opens (creating and migrating when writable) a database file. */
int gt_db_open(const char *path, bool readonly, gt_db **out, gt_err *err);
void gt_db_close(gt_db *db);
sqlite3 *gt_db_sqlite(gt_db *db);
const char *gt_db_path(const gt_db *db);

int gt_db_exec(gt_db *db, const char *sql, gt_err *err);
int gt_db_begin(gt_db *db, gt_err *err); /* BEGIN IMMEDIATE */
int gt_db_commit(gt_db *db, gt_err *err);
void gt_db_rollback(gt_db *db);

double gt_db_now(void); /* unix seconds */

typedef struct gt_db_run {
    int64_t id;
    char run_key[160];
    char matrix_name[72], matrix_sha256[72], tier[72];
    char status[24], host[128], tool_version[40], git_sha[48];
    int n_cells;
    double started_at, finished_at;
} gt_db_run;

typedef struct gt_db_run_new {
    const char *run_key, *matrix_name, *matrix_sha256, *matrix_json, *matrix_path, *tier;
    const char *gate_json; /* may be NULL */
    int n_cells;
} gt_db_run_new;

/* 0 found, 1 absent, -1 error. */
int gt_db_run_get(gt_db *db, const char *run_key, gt_db_run *out, gt_err *err);
/* The newest run of matrix_name/tier other than except_key (may be NULL),
 * preferring complete runs. 0 found, 1 none, -1 error. */
int gt_db_run_latest(gt_db *db, const char *matrix_name, const char *tier,
                     const char *except_key, gt_db_run *out, gt_err *err);
int gt_db_run_create(gt_db *db, const gt_db_run_new *r, int64_t *id, gt_err *err);
/* Reads the stored matrix text and gate policy (malloc'ed; gate may be NULL). */
int gt_db_run_texts(gt_db *db, int64_t run_id, char **matrix_json, char **gate_json,
                    gt_err *err);
int gt_db_run_finish(gt_db *db, int64_t run_id, const char *status, gt_err *err);

/* The bounds of run_id whose note says they are loose on purpose (the
 * "loose:" marker, base/tolerance.h): fn(ctx, cell_id, "suite.metric") for
 * each cell and bound, resolved from the run's stored matrix text and tier
 * as the run resolved them (loose_notes.c). 0 ok; 1 when the stored matrix
 * cannot be read again (err says why; no bound is known noted then); -1 on
 * a database error. */
typedef void (*gt_db_noted_fn)(void *ctx, const char *cell_id, const char *metric);
int gt_db_loose_noted(gt_db *db, int64_t run_id, gt_db_noted_fn fn, void *ctx, gt_err *err);

/* Cells of the run in this database, and how many are pending. */
int gt_db_run_counts(gt_db *db, int64_t run_id, int *total, int *pending, gt_err *err);

/* Records an invocation (a shard, a resume) and marks the run running. */
int gt_db_part_begin(gt_db *db, int64_t run_id, int shard_index, int shard_count,
                     const char *argv, int64_t *part_id, gt_err *err);
int gt_db_part_end(gt_db *db, int64_t part_id, const char *status, gt_err *err);

typedef struct gt_db_cell_new {
    const char *cell_id, *model, *quant, *backend, *driver;
    int idx;
    bool required;
    const char *expected, *expect_reason;
    /* The execution settings (matrix settings axis): the variant's id
     * (NULL or "" = none) and values, 0 / NULL = not set by the matrix. */
    const char *settings;
    int n_batch, n_parallel, threads;
    const char *kv_type;
} gt_db_cell_new;

/* Adds cells as pending, keeping any already there (resume), in one
 * transaction. */
int gt_db_cells_add(gt_db *db, int64_t run_id, const gt_db_cell_new *cells, int n,
                    gt_err *err);
/* Cell ids of the run that are still pending (malloc'ed array of strdup'ed
 * strings; free with gt_db_strings_free). */
int gt_db_cells_pending(gt_db *db, int64_t run_id, char ***ids, int *n, gt_err *err);
void gt_db_strings_free(char **s, int n);

/* One finished cell. The JSON arrays hold the worker's lines as parsed:
 *   results:   {"suite","check","status","message"}
 *   metrics:   {"suite","name","value","unit","tolerance","comparator",
 *               "verdict","better","regress"}
 *   devices:   {"backend","driver_profile","name","kind","driver",
 *               "driver_version","memory","extra"} (the first is the cell's)
 *   refs:      {"key","meta","file"}: blob files to move into ref_cache
 *   artifacts: {"sha256","path","size","kind","model","quant","source_sha256","arch"}
 *   points:    {"suite","series","x","y"} (series rows; NULL: none) */
typedef struct gt_db_record {
    const char *cell_id, *status, *raw_status, *reason;
    const char *model_sha256, *artifact_sha256, *log;
    double started_at, finished_at, duration_s, worker_s, overhead_ms;
    int64_t part_id;
    const cJSON *results, *metrics, *devices, *refs, *artifacts, *points;
} gt_db_record;

/* Writes the record in one transaction; *commit_ms (may be NULL) receives
 * the transaction's time. */
int gt_db_cell_record(gt_db *db, int64_t run_id, const gt_db_record *rec, double *commit_ms,
                      gt_err *err);

/* The reference outputs of a cell that did not finish (interrupted: it
 * stays pending and is not recorded), for the cell that runs it again: each
 * of refs ({"key","meta","file"}, as in gt_db_record) goes into ref_cache
 * (INSERT OR IGNORE), all in one transaction; the files are removed after
 * the commit. Returns how many were given (0 for none), or -1. The caller
 * decides which outputs are whole (cmd_qualify.c: never a crashed cell's). */
int gt_db_refs_keep(gt_db *db, int64_t run_id, const char *cell_id, const char *artifact_sha256,
                    const cJSON *refs, gt_err *err);

/* Reference cache lookup: 0 found (*data malloc'ed), 1 absent, -1 error. */
int gt_db_ref_get(gt_db *db, const char *key, void **data, size_t *size, gt_err *err);

/* `gauntlet db check`: integrity, foreign keys, schema, and invariants
 * (no duplicate cells, complete runs have no pending cells). Prints one line
 * per check to out. 0 all good, 1 problems found, -1 could not check. */
int gt_db_check(gt_db *db, FILE *out, gt_err *err);

typedef struct gt_db_merge_stats {
    int runs_added, runs_merged, cells_added, cells_replaced, cells_kept, conflicts;
} gt_db_merge_stats;

/* The reason a merged cell carries when two shards finished it with
 * different statuses; `db check` and the gate look for it. */
#define GT_MERGE_CONFLICT "conflict: "

/* Merges the database at src_path into dst: runs by run_key, cells by
 * (run_key, cell_id). A finished cell replaces a pending one. When both are
 * finished with different statuses the merged cell becomes `fail` with
 * reason "conflict: S1 in A, S2 in B (flaky?)", keeping the worse side's
 * results plus a merge.conflict check, whichever order the files come in
 * (counted in conflicts). Idempotent: merging the same file twice adds
 * nothing. */
int gt_db_merge(gt_db *dst, const char *src_path, gt_db_merge_stats *st, gt_err *err);

#endif
