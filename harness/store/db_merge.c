/* db_merge.c: `gauntlet merge` (gt_db_merge in db.h).
 *
 * Identity is by natural keys, never by row ids (which differ per file):
 * runs by run_key, run parts by part_key, devices by their unique columns,
 * cells by (run_key, cell_id), artifacts by (sha256, path), reference
 * outputs by key. The source is ATTACHed and copied with INSERT ... SELECT
 * inside one transaction per source file, so a failed merge changes nothing
 * and merging a file twice is a no-op.
 *
 * A run that exists on both sides (shards of one CI run share a run key)
 * becomes one run: the earliest start, the latest finish, and status
 * complete once no cell is pending. Each merged source is noted in
 * run_merges: a run that was merged is judged by the gate as the whole run
 * (every shard present), not as the shard it may have come from.
 *
 * A cell that two sources finished with different statuses is a conflict,
 * never settled by which file came first: the merged cell becomes `fail`
 * with a reason naming both sides (GT_MERGE_CONFLICT), so a flaky pass
 * cannot hide a fail in either merge order. */
#include "db.h"

#include <string.h>

#include "db_internal.h"

#define CELL_COLS                                                                             \
    "cell_id, idx, model, quant, backend, driver, required, expected, expect_reason, status," \
    " raw_status, reason, model_sha256, artifact_sha256, host, attempts, started_at,"         \
    " finished_at, duration_s, worker_s, overhead_ms, log, settings, n_batch, n_parallel,"     \
    " threads, kv_type"

static int run_sql(gt_db *db, const char *sql, int64_t a, int64_t b, int64_t c, gt_err *err)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(gt_db_sqlite(db), sql, -1, &st, NULL) != SQLITE_OK)
        return gt_dbi_sqlerr(db, err, "merging");
    int n = sqlite3_bind_parameter_count(st);
    if (n >= 1)
        sqlite3_bind_int64(st, 1, a);
    if (n >= 2)
        sqlite3_bind_int64(st, 2, b);
    if (n >= 3)
        sqlite3_bind_int64(st, 3, c);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : gt_dbi_sqlerr(db, err, "merging");
}

/* Copies one source cell (src id) into the destination run, with its
 * results, metrics and series, mapping device and part ids by natural key. */
static int copy_cell(gt_db *db, int64_t src_cell, int64_t dst_run, int64_t *new_id, gt_err *err)
{
    if (run_sql(db,
                "INSERT INTO main.cells (run_id, " CELL_COLS ", device_id, part_id)"
                " SELECT ?2, " CELL_COLS ","
                " (SELECT md.id FROM main.devices md JOIN src.devices sd ON sd.id = c.device_id"
                "   WHERE md.run_id = ?2 AND md.host = sd.host AND md.backend = sd.backend"
                "   AND md.driver_profile = sd.driver_profile AND md.name = sd.name"
                "   AND md.driver = sd.driver AND md.driver_version = sd.driver_version),"
                " (SELECT mp.id FROM main.run_parts mp JOIN src.run_parts sp ON sp.id = c.part_id"
                "   WHERE mp.part_key = sp.part_key)"
                " FROM src.cells c WHERE c.id = ?1",
                src_cell, dst_run, 0, err) != 0)
        return -1;
    int64_t dst_cell = sqlite3_last_insert_rowid(gt_db_sqlite(db));
    if (new_id)
        *new_id = dst_cell;
    if (run_sql(db,
                "INSERT INTO main.results (cell, seq, suite, check_name, status, message)"
                " SELECT ?2, seq, suite, check_name, status, message FROM src.results"
                " WHERE cell = ?1",
                src_cell, dst_cell, 0, err) != 0 ||
        run_sql(db,
                "INSERT INTO main.metrics (cell, seq, suite, name, value, unit, tolerance,"
                " comparator, verdict, better, regress) SELECT ?2, seq, suite, name, value, unit,"
                " tolerance, comparator, verdict, better, regress FROM src.metrics WHERE cell = ?1",
                src_cell, dst_cell, 0, err) != 0 ||
        run_sql(db,
                "INSERT INTO main.series (cell, seq, suite, name, x, y)"
                " SELECT ?2, seq, suite, name, x, y FROM src.series WHERE cell = ?1",
                src_cell, dst_cell, 0, err) != 0)
        return -1;
    return 0;
}

/* Remembers that src_path's part of the run was merged in (and what its
 * source had merged, when it is itself a merged file): the gate then
 * expects the whole run. */
static int record_merge(gt_db *db, int64_t src_run, int64_t dst_run, const char *src_path,
                        gt_err *err)
{
    if (run_sql(db,
                "INSERT OR IGNORE INTO main.run_merges (run_id, source, shards, merged_at)"
                " SELECT ?2, source, shards, merged_at FROM src.run_merges WHERE run_id = ?1",
                src_run, dst_run, 0, err) != 0)
        return -1;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(gt_db_sqlite(db),
                           "INSERT OR IGNORE INTO main.run_merges (run_id, source, shards,"
                           " merged_at) VALUES (?2, ?3, COALESCE((SELECT group_concat(s, ',')"
                           " FROM (SELECT DISTINCT shard_index || '/' || shard_count AS s"
                           " FROM src.run_parts WHERE run_id = ?1 ORDER BY shard_index)), ''),"
                           " ?4)",
                           -1, &st, NULL) != SQLITE_OK)
        return gt_dbi_sqlerr(db, err, "recording the merge");
    sqlite3_bind_int64(st, 1, src_run);
    sqlite3_bind_int64(st, 2, dst_run);
    gt_dbi_bind_text(st, 3, src_path);
    sqlite3_bind_double(st, 4, gt_db_now());
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : gt_dbi_sqlerr(db, err, "recording the merge");
}

/* How bad a finished status is, for keeping the worse side of a conflict. */
static int status_rank(const char *s)
{
    static const char *const ORDER[] = {"pass", "xfail", "skip", "xpass"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(s, ORDER[i]))
            return i;
    return 4; /* fail, error, crash, timeout */
}

/* "shard K/N (part KEY)" for cell `id` of schema `schema` ("main" or "src"),
 * or "" when the cell has no part. */
static void cell_origin(gt_db *db, const char *schema, int64_t id, char *out, size_t cap)
{
    char sql[300];
    snprintf(sql, sizeof sql,
             "SELECT p.shard_index, p.shard_count, p.part_key FROM %s.cells c JOIN %s.run_parts p"
             " ON p.id = c.part_id WHERE c.id = ?",
             schema, schema);
    out[0] = '\0';
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(gt_db_sqlite(db), sql, -1, &st, NULL) != SQLITE_OK)
        return;
    sqlite3_bind_int64(st, 1, id);
    if (sqlite3_step(st) == SQLITE_ROW)
        snprintf(out, cap, "shard %d/%d (part %s)", sqlite3_column_int(st, 0),
                 sqlite3_column_int(st, 1), sqlite3_column_text(st, 2));
    sqlite3_finalize(st);
}

/* Two sources finished one cell with different statuses: the merged cell
 * (main id did, status dst_status) becomes fail, naming both sides, with
 * the worse side's results kept and a merge.conflict check added. */
static int mark_conflict(gt_db *db, int64_t did, const char *dst_status, int64_t sid,
                         const char *src_status, int64_t dst_run, const char *src_path,
                         gt_err *err)
{
    char here[300], there[300], reason[1200];
    cell_origin(db, "main", did, here, sizeof here);
    cell_origin(db, "src", sid, there, sizeof there);
    snprintf(reason, sizeof reason, GT_MERGE_CONFLICT "%s in %s, %s in %s%s%s (flaky?)",
             dst_status, here[0] ? here : gt_db_path(db), src_status, src_path,
             there[0] ? ": " : "", there);
    if (status_rank(src_status) > status_rank(dst_status)) {
        if (run_sql(db, "DELETE FROM main.results WHERE cell = ?1", did, 0, 0, err) ||
            run_sql(db, "DELETE FROM main.metrics WHERE cell = ?1", did, 0, 0, err) ||
            run_sql(db, "DELETE FROM main.series WHERE cell = ?1", did, 0, 0, err) ||
            run_sql(db, "DELETE FROM main.cells WHERE id = ?1", did, 0, 0, err) ||
            copy_cell(db, sid, dst_run, &did, err))
            return -1;
    }
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(gt_db_sqlite(db),
                           "UPDATE main.cells SET status = 'fail', reason = ?2 WHERE id = ?1;",
                           -1, &st, NULL) != SQLITE_OK)
        return gt_dbi_sqlerr(db, err, "recording a merge conflict");
    sqlite3_bind_int64(st, 1, did);
    gt_dbi_bind_text(st, 2, reason);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE ||
        sqlite3_prepare_v2(gt_db_sqlite(db),
                           "INSERT INTO main.results (cell, seq, suite, check_name, status,"
                           " message) VALUES (?1, COALESCE((SELECT MAX(seq) + 1 FROM main.results"
                           " WHERE cell = ?1), 0), 'merge', 'conflict', 'fail', ?2)",
                           -1, &st, NULL) != SQLITE_OK)
        return gt_dbi_sqlerr(db, err, "recording a merge conflict");
    sqlite3_bind_int64(st, 1, did);
    gt_dbi_bind_text(st, 2, reason);
    rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : gt_dbi_sqlerr(db, err, "recording a merge conflict");
}

static int merge_run(gt_db *db, int64_t src_run, const char *run_key, const char *src_path,
                     gt_db_merge_stats *stats, gt_err *err)
{
    sqlite3 *h = gt_db_sqlite(db);
    gt_db_run dst;
    int found = gt_db_run_get(db, run_key, &dst, err);
    if (found < 0)
        return -1;
    if (found == 1) {
        if (run_sql(db,
                    "INSERT INTO main.runs (run_key, matrix_name, matrix_sha256, matrix_json,"
                    " matrix_path, tier, gate_json, tool_version, git_sha, host, n_cells,"
                    " started_at, finished_at, status) SELECT run_key, matrix_name, matrix_sha256,"
                    " matrix_json, matrix_path, tier, gate_json, tool_version, git_sha, host,"
                    " n_cells, started_at, finished_at, status FROM src.runs WHERE id = ?1",
                    src_run, 0, 0, err) != 0)
            return -1;
        dst.id = sqlite3_last_insert_rowid(h);
        stats->runs_added++;
    } else {
        /* Shards of one run must be of one matrix and tier. */
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(h, "SELECT matrix_sha256, tier FROM src.runs WHERE id = ?", -1, &st,
                               NULL) != SQLITE_OK)
            return gt_dbi_sqlerr(db, err, "merging");
        sqlite3_bind_int64(st, 1, src_run);
        bool same = sqlite3_step(st) == SQLITE_ROW &&
                    !strcmp((const char *)sqlite3_column_text(st, 0), dst.matrix_sha256) &&
                    !strcmp((const char *)sqlite3_column_text(st, 1), dst.tier);
        sqlite3_finalize(st);
        if (!same)
            return gt_err_set(err, "run %s: the two databases hold it for different matrices or "
                                   "tiers; not merging",
                              run_key);
        stats->runs_merged++;
    }
    if (run_sql(db,
                "INSERT OR IGNORE INTO main.run_parts (run_id, part_key, shard_index, shard_count,"
                " host, tool_version, git_sha, argv, started_at, finished_at, status)"
                " SELECT ?2, part_key, shard_index, shard_count, host, tool_version, git_sha, argv,"
                " started_at, finished_at, status FROM src.run_parts WHERE run_id = ?1",
                src_run, dst.id, 0, err) != 0 ||
        run_sql(db,
                "INSERT OR IGNORE INTO main.devices (run_id, host, backend, driver_profile, name,"
                " kind, driver, driver_version, memory, extra) SELECT ?2, host, backend,"
                " driver_profile, name, kind, driver, driver_version, memory, extra"
                " FROM src.devices WHERE run_id = ?1",
                src_run, dst.id, 0, err) != 0 ||
        record_merge(db, src_run, dst.id, src_path, err) != 0)
        return -1;

    sqlite3_stmt *cells, *mine;
    if (sqlite3_prepare_v2(h, "SELECT id, cell_id, status FROM src.cells WHERE run_id = ?", -1,
                           &cells, NULL) != SQLITE_OK)
        return gt_dbi_sqlerr(db, err, "merging");
    if (sqlite3_prepare_v2(h,
                           "SELECT id, status, COALESCE(reason, '') FROM main.cells"
                           " WHERE run_id = ? AND cell_id = ?",
                           -1, &mine, NULL) != SQLITE_OK) {
        sqlite3_finalize(cells);
        return gt_dbi_sqlerr(db, err, "merging");
    }
    sqlite3_bind_int64(cells, 1, src_run);
    int rc = 0;
    while (rc == 0 && sqlite3_step(cells) == SQLITE_ROW) {
        int64_t sid = sqlite3_column_int64(cells, 0);
        const char *cid = (const char *)sqlite3_column_text(cells, 1);
        bool src_pending = !strcmp((const char *)sqlite3_column_text(cells, 2), "pending");
        char src_status[24];
        snprintf(src_status, sizeof src_status, "%s", sqlite3_column_text(cells, 2));
        sqlite3_reset(mine);
        sqlite3_bind_int64(mine, 1, dst.id);
        sqlite3_bind_text(mine, 2, cid, -1, SQLITE_TRANSIENT);
        if (sqlite3_step(mine) != SQLITE_ROW) {
            rc = copy_cell(db, sid, dst.id, NULL, err);
            stats->cells_added++;
            continue;
        }
        int64_t did = sqlite3_column_int64(mine, 0);
        char dst_status[24];
        snprintf(dst_status, sizeof dst_status, "%s", sqlite3_column_text(mine, 1));
        bool dst_conflict = !strncmp((const char *)sqlite3_column_text(mine, 2), GT_MERGE_CONFLICT,
                                     strlen(GT_MERGE_CONFLICT));
        if (!strcmp(dst_status, "pending") && !src_pending) {
            sqlite3_reset(mine); /* release the row before deleting it */
            rc = run_sql(db, "DELETE FROM main.results WHERE cell = ?1", did, 0, 0, err) ||
                 run_sql(db, "DELETE FROM main.metrics WHERE cell = ?1", did, 0, 0, err) ||
                 run_sql(db, "DELETE FROM main.series WHERE cell = ?1", did, 0, 0, err) ||
                 run_sql(db, "DELETE FROM main.cells WHERE id = ?1", did, 0, 0, err) ||
                 copy_cell(db, sid, dst.id, NULL, err);
            stats->cells_replaced++;
        } else if (!src_pending && strcmp(dst_status, "pending") &&
                   strcmp(dst_status, src_status)) {
            /* Already a conflict (this file merged before, or a third
             * side): it stays fail, naming the first two sides. */
            sqlite3_reset(mine);
            stats->conflicts++;
            if (!dst_conflict)
                rc = mark_conflict(db, did, dst_status, sid, src_status, dst.id, src_path, err);
        } else {
            stats->cells_kept++;
        }
    }
    sqlite3_finalize(cells);
    sqlite3_finalize(mine);
    if (rc)
        return -1;
    return run_sql(db,
                   "UPDATE main.runs SET"
                   " started_at = MIN(started_at, (SELECT started_at FROM src.runs WHERE id = ?1)),"
                   " finished_at = CASE WHEN finished_at IS NULL THEN (SELECT finished_at FROM"
                   "   src.runs WHERE id = ?1) ELSE MAX(finished_at, COALESCE((SELECT finished_at"
                   "   FROM src.runs WHERE id = ?1), finished_at)) END,"
                   " status = CASE WHEN EXISTS (SELECT 1 FROM main.cells WHERE run_id = ?2 AND"
                   "   status = 'pending') THEN (CASE WHEN status = 'running' AND (SELECT status"
                   "   FROM src.runs WHERE id = ?1) = 'running' THEN 'running' ELSE 'interrupted'"
                   "   END) ELSE 'complete' END WHERE id = ?2",
                   src_run, dst.id, 0, err);
}

int gt_db_merge(gt_db *dst, const char *src_path, gt_db_merge_stats *st, gt_err *err)
{
    memset(st, 0, sizeof *st);
    /* Opening it first checks its schema version (and says how to fix it). */
    gt_db *src;
    if (gt_db_open(src_path, true, &src, err) != 0)
        return -1;
    gt_db_close(src);
    sqlite3 *h = gt_db_sqlite(dst);
    sqlite3_stmt *at;
    if (sqlite3_prepare_v2(h, "ATTACH DATABASE ? AS src", -1, &at, NULL) != SQLITE_OK)
        return gt_dbi_sqlerr(dst, err, "attaching");
    sqlite3_bind_text(at, 1, src_path, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(at);
    sqlite3_finalize(at);
    if (rc != SQLITE_DONE)
        return gt_dbi_sqlerr(dst, err, "attaching");
    rc = gt_db_begin(dst, err);
    if (rc == 0) {
        sqlite3_stmt *runs;
        if (sqlite3_prepare_v2(h, "SELECT id, run_key FROM src.runs ORDER BY started_at", -1,
                               &runs, NULL) != SQLITE_OK) {
            rc = gt_dbi_sqlerr(dst, err, "merging");
        } else {
            while (rc == 0 && sqlite3_step(runs) == SQLITE_ROW) {
                char key[160];
                snprintf(key, sizeof key, "%s", sqlite3_column_text(runs, 1));
                rc = merge_run(dst, sqlite3_column_int64(runs, 0), key, src_path, st, err);
            }
            sqlite3_finalize(runs);
        }
        if (rc == 0)
            rc = gt_db_exec(dst,
                            "INSERT OR IGNORE INTO main.artifacts (sha256, path, size, kind, model,"
                            " quant, source_sha256, created_at, arch) SELECT sha256, path, size,"
                            " kind, model, quant, source_sha256, created_at, arch"
                            " FROM src.artifacts;"
                            "INSERT OR IGNORE INTO main.ref_cache SELECT * FROM src.ref_cache",
                            err);
        if (rc == 0)
            rc = gt_db_commit(dst, err);
        if (rc != 0)
            gt_db_rollback(dst);
    }
    gt_db_exec(dst, "DETACH DATABASE src", NULL);
    return rc == 0 ? 0 : gt_err_wrap(err, "merging %s", src_path);
}
