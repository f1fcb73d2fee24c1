/* test_db.c: the results database, merge, check and the gate, in-process.
 *
 * Builds small databases through the same functions qualify uses and checks
 * what lands in the tables: one transaction per cell (a failed record leaves
 * nothing), reruns replace rather than duplicate (series points too), merges
 * carry each cell's points, the reference cache round
 * trip, schema versioning, `db check` catching damage, merges that are
 * idempotent and join shards into one run, and the gate's verdicts and
 * messages (cell, metric, value, tolerance; regressions against a baseline);
 * a merged run missing a shard fails naming it, while one shard's own
 * database is judged on its own cells. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#include "../harness/store/db.c"
#include "../harness/store/db_check.c"
#include "../harness/store/db_merge.c"
#include "../harness/store/db_record.c"
#include "../harness/store/gate.c"
#include "../harness/base/sha256.c"
#include "../harness/base/status.c"

static gt_db *fresh(const char *name)
{
    const char *path = gt_test_tmp(name);
    char buf[4200];
    unlink(path);
    snprintf(buf, sizeof buf, "%s-wal", path);
    unlink(buf);
    snprintf(buf, sizeof buf, "%s-shm", path);
    unlink(buf);
    gt_db *db;
    gt_err err = {{0}};
    ck_assert_msg(gt_db_open(path, false, &db, &err) == 0, "%s", err.msg);
    return db;
}

static int64_t q_int(gt_db *db, const char *sql)
{
    sqlite3_stmt *st;
    ck_assert_msg(sqlite3_prepare_v2(gt_db_sqlite(db), sql, -1, &st, NULL) == SQLITE_OK, "%s: %s",
                  sql, sqlite3_errmsg(gt_db_sqlite(db)));
    int64_t v = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
    sqlite3_finalize(st);
    return v;
}

static const char *CELLS[] = {"m/f32/cpu/default", "m/q8_0/cpu/default", "m/q4_0/cpu/default",
                              "m/f32/reference/default"};

/* A run with the four cells above, pending; gate policy as given. */
static int64_t make_run(gt_db *db, const char *key, const char *sha, const char *gate, int from,
                        int to)
{
    gt_err err = {{0}};
    int64_t id;
    gt_db_run_new nr = {key, "m", sha, "{}", "m.json", "ci", gate, 4};
    gt_db_run r;
    if (gt_db_run_get(db, key, &r, &err) == 0)
        id = r.id;
    else
        ck_assert_msg(gt_db_run_create(db, &nr, &id, &err) == 0, "%s", err.msg);
    gt_db_cell_new cells[4];
    for (int i = from; i < to; i++)
        cells[i - from] = (gt_db_cell_new){.cell_id = CELLS[i], .model = "m", .quant = "q",
                                           .backend = "cpu", .driver = "default", .idx = i,
                                           .required = i != 2, .expected = "pass"};
    ck_assert_msg(gt_db_cells_add(db, id, cells, to - from, &err) == 0, "%s", err.msg);
    return id;
}

/* Records a cell as a worker would have reported it. */
static int record(gt_db *db, int64_t run, const char *cell, const char *status, double tps,
                  const char *verdict, const char *ref_file, gt_err *err)
{
    char text[2048];
    snprintf(text, sizeof text,
             "{\"results\": [{\"suite\": \"smoke\", \"check\": \"load\", \"status\": \"pass\","
             " \"message\": \"ok\"}, {\"suite\": \"smoke\", \"check\": \"generate\", \"status\": "
             "\"%s\", \"message\": \"m\"}],"
             " \"metrics\": [{\"suite\": \"smoke\", \"name\": \"decode_tps\", \"value\": %g,"
             " \"unit\": \"tok/s\", \"tolerance\": 100, \"comparator\": \">=\", \"verdict\": \"%s\","
             " \"better\": 1, \"regress\": true}, {\"suite\": \"smoke\", \"name\": \"nan\","
             " \"value\": null, \"unit\": \"\", \"tolerance\": null, \"comparator\": \"\","
             " \"verdict\": \"info\", \"better\": 0, \"regress\": false}],"
             " \"devices\": [{\"backend\": \"cpu\", \"driver_profile\": \"default\", \"name\": \"x\","
             " \"driver\": \"OpenBLAS\", \"driver_version\": \"0.3\", \"memory\": 1024}],"
             " \"refs\": [%s%s%s],"
             " \"artifacts\": [{\"sha256\": \"ab\", \"path\": \"/m.gguf\", \"size\": 3, \"kind\":"
             " \"model\", \"model\": \"m\"}],"
             " \"points\": [{\"suite\": \"long\", \"series\": \"drift_kld\", \"x\": 4095,"
             " \"y\": 1.5e-7}, {\"suite\": \"long\", \"series\": \"drift_kld\", \"x\": 8191,"
             " \"y\": null}, {\"suite\": \"long\", \"series\": \"kv_bytes\", \"x\": 8192,"
             " \"y\": %g}]}",
             !strcmp(status, "fail") ? "fail" : "pass", tps, verdict,
             ref_file ? "{\"key\": \"k1\", \"meta\": \"greedy\", \"file\": \"" : "",
             ref_file ? ref_file : "", ref_file ? "\"}" : "", tps * 1000);
    cJSON *j = cJSON_Parse(text);
    ck_assert_ptr_nonnull(j);
    gt_db_record rec = {
        .cell_id = cell, .status = status, .raw_status = status,
        .reason = strcmp(status, "skip") ? "why" : "no device: why", /* a category the gate allows */
        .model_sha256 = "ab", .artifact_sha256 = "cd", .log = "log line\n", .started_at = 1,
        .finished_at = 2, .duration_s = 1, .worker_s = 0.9, .overhead_ms = 10,
        .results = cJSON_GetObjectItem(j, "results"), .metrics = cJSON_GetObjectItem(j, "metrics"),
        .devices = cJSON_GetObjectItem(j, "devices"), .refs = cJSON_GetObjectItem(j, "refs"),
        .artifacts = cJSON_GetObjectItem(j, "artifacts"),
        .points = cJSON_GetObjectItem(j, "points")};
    double ms;
    int rc = gt_db_cell_record(db, run, &rec, &ms, err);
    cJSON_Delete(j);
    return rc;
}

START_TEST(schema_and_versions)
{
    gt_db *db = fresh("v.sqlite");
    ck_assert_int_eq(q_int(db, "PRAGMA user_version"), GT_DB_SCHEMA_VERSION);
    ck_assert_int_eq(q_int(db, "SELECT COUNT(*) FROM sqlite_master WHERE name = 'ref_cache'"), 1);
    ck_assert_int_eq(q_int(db, "SELECT COUNT(*) FROM meta"), 1);
    gt_err err = {{0}};
    gt_db_exec(db, "PRAGMA user_version = 99", &err);
    gt_db_close(db);
    gt_db *again;
    ck_assert_int_ne(gt_db_open(gt_test_tmp("v.sqlite"), false, &again, &err), 0);
    ck_assert_ptr_nonnull(strstr(err.msg, "newer"));
    ck_assert_int_ne(gt_db_open(gt_test_tmp("missing.sqlite"), true, &again, &err), 0);
    ck_assert_ptr_nonnull(strstr(err.msg, "missing.sqlite"));
}
END_TEST

START_TEST(cells_are_recorded_whole)
{
    gt_db *db = fresh("r.sqlite");
    gt_err err = {{0}};
    int64_t run = make_run(db, "m/ci/1", "s1", NULL, 0, 4);
    make_run(db, "m/ci/1", "s1", NULL, 0, 4); /* adding again keeps one row each */
    ck_assert_int_eq(q_int(db, "SELECT COUNT(*) FROM cells"), 4);
    char **pending;
    int n;
    ck_assert_int_eq(gt_db_cells_pending(db, run, &pending, &n, &err), 0);
    ck_assert_int_eq(n, 4);
    ck_assert_str_eq(pending[0], CELLS[0]);
    gt_db_strings_free(pending, n);

    const char *blob = gt_test_tmp("ref.bin");
    gt_test_write_file(blob, "\x01\x02\x03\x04", 4);
    ck_assert_msg(record(db, run, CELLS[0], "pass", 500, "pass", blob, &err) == 0, "%s", err.msg);
    ck_assert_int_ne(access(blob, F_OK), 0); /* moved into the DB after the commit */
    ck_assert_int_eq(q_int(db, "SELECT COUNT(*) FROM results"), 2);
    ck_assert_int_eq(q_int(db, "SELECT COUNT(*) FROM metrics"), 2);
    ck_assert_int_eq(q_int(db, "SELECT COUNT(*) FROM metrics WHERE value IS NULL"), 1);
    /* Series points, in the order sent; a NaN (null) y is stored as NULL. */
    ck_assert_int_eq(q_int(db, "SELECT COUNT(*) FROM series"), 3);
    ck_assert_int_eq(q_int(db, "SELECT COUNT(*) FROM series WHERE y IS NULL"), 1);
    ck_assert_int_eq(q_int(db, "SELECT x FROM series WHERE seq = 0"), 4095);
    ck_assert_int_eq(q_int(db, "SELECT x FROM series WHERE seq = 1"), 8191);
    ck_assert_int_eq(q_int(db, "SELECT y FROM series WHERE name = 'kv_bytes'"), 500000);
    ck_assert_int_eq(q_int(db, "SELECT y * 1e10 FROM series WHERE x = 4095"), 1500);
    ck_assert_int_eq(q_int(db, "SELECT attempts FROM cells WHERE cell_id = 'm/f32/cpu/default'"), 1);
    ck_assert_int_eq(q_int(db, "SELECT COUNT(*) FROM cells WHERE device_id IS NOT NULL"), 1);
    void *data;
    size_t size;
    ck_assert_int_eq(gt_db_ref_get(db, "k1", &data, &size, &err), 0);
    ck_assert_uint_eq(size, 4);
    ck_assert_int_eq(memcmp(data, "\x01\x02\x03\x04", 4), 0);
    free(data);
    ck_assert_int_eq(gt_db_ref_get(db, "nope", &data, &size, &err), 1);

    /* Recording again replaces the results and points; the device row is shared. */
    ck_assert_int_eq(record(db, run, CELLS[0], "fail", 50, "fail", NULL, &err), 0);
    ck_assert_int_eq(q_int(db, "SELECT COUNT(*) FROM results"), 2);
    ck_assert_int_eq(q_int(db, "SELECT COUNT(*) FROM series"), 3);
    ck_assert_int_eq(q_int(db, "SELECT y FROM series WHERE name = 'kv_bytes'"), 50000);
    ck_assert_int_eq(q_int(db, "SELECT COUNT(*) FROM devices"), 1);
    ck_assert_int_eq(q_int(db, "SELECT attempts FROM cells WHERE cell_id = 'm/f32/cpu/default'"), 2);

    /* A failure in the middle (a missing reference file) leaves nothing. */
    ck_assert_int_ne(record(db, run, CELLS[1], "pass", 500, "pass", "/nonexistent/ref", &err), 0);
    ck_assert_int_eq(q_int(db, "SELECT COUNT(*) FROM results"), 2);
    ck_assert_int_eq(q_int(db, "SELECT COUNT(*) FROM series"), 3);
    ck_assert_int_eq(q_int(db, "SELECT COUNT(*) FROM cells WHERE status = 'pending'"), 3);
    /* An unknown cell is an error, not a new row. */
    ck_assert_int_ne(record(db, run, "x/y/z/w", "pass", 1, "pass", NULL, &err), 0);
    ck_assert_ptr_nonnull(strstr(err.msg, "x/y/z/w"));
    ck_assert_int_eq(gt_db_check(db, stdout, &err), 0);
    gt_db_close(db);
}
END_TEST

START_TEST(check_finds_damage)
{
    gt_db *db = fresh("c.sqlite");
    gt_err err = {{0}};
    int64_t run = make_run(db, "m/ci/1", "s1", NULL, 0, 4);
    ck_assert_int_eq(record(db, run, CELLS[0], "pass", 500, "pass", NULL, &err), 0);
    FILE *out = tmpfile();
    ck_assert_int_eq(gt_db_check(db, out, &err), 0);
    /* A result for a pending cell: what a half-written cell would look like. */
    ck_assert_int_eq(gt_db_exec(db, "INSERT INTO results (cell, seq, suite, check_name, status)"
                                    " SELECT id, 0, 's', 'c', 'pass' FROM cells WHERE status ="
                                    " 'pending' LIMIT 1", &err), 0);
    ck_assert_int_eq(gt_db_check(db, out, &err), 1);
    gt_db_exec(db, "DELETE FROM results WHERE suite = 's'", &err);
    /* A series point of a pending cell is the same damage. */
    ck_assert_int_eq(gt_db_exec(db, "INSERT INTO series (cell, seq, suite, name, x, y)"
                                    " SELECT id, 0, 's', 'p', 1, 2 FROM cells WHERE status ="
                                    " 'pending' LIMIT 1", &err), 0);
    ck_assert_int_eq(gt_db_check(db, out, &err), 1);
    gt_db_exec(db, "DELETE FROM series WHERE suite = 's'", &err);
    gt_db_exec(db, "UPDATE runs SET status = 'complete'", &err);
    ck_assert_int_eq(gt_db_check(db, out, &err), 1); /* complete with pending cells */
    gt_db_exec(db, "UPDATE runs SET status = 'running'", &err);
    ck_assert_int_eq(gt_db_check(db, out, &err), 0);
    gt_db_exec(db, "UPDATE ref_cache SET size = 1", &err);
    gt_db_exec(db, "ALTER TABLE cells ADD COLUMN extra TEXT", &err);
    ck_assert_int_eq(gt_db_check(db, out, &err), 1);
    rewind(out);
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, out);
    buf[n] = '\0';
    ck_assert_ptr_nonnull(strstr(buf, "FAIL schema"));
    ck_assert_ptr_nonnull(strstr(buf, "extra"));
    fclose(out);
    gt_db_close(db);
}
END_TEST

START_TEST(merge_joins_shards)
{
    gt_err err = {{0}};
    gt_db *a = fresh("a.sqlite"), *b = fresh("b.sqlite"), *m = fresh("m.sqlite");
    int64_t ra = make_run(a, "m/ci/7", "s1", NULL, 0, 2); /* shard 1: cells 0, 1 */
    int64_t rb = make_run(b, "m/ci/7", "s1", NULL, 2, 4); /* shard 2: cells 2, 3 */
    ck_assert_int_eq(record(a, ra, CELLS[0], "pass", 500, "pass", NULL, &err), 0);
    ck_assert_int_eq(record(a, ra, CELLS[1], "pass", 500, "pass", NULL, &err), 0);
    ck_assert_int_eq(record(b, rb, CELLS[2], "fail", 5, "fail", NULL, &err), 0);
    /* b's cell 3 stays pending; a copy of it finished elsewhere comes later. */
    gt_db_close(a);
    gt_db_close(b);
    gt_db_merge_stats st;
    ck_assert_msg(gt_db_merge(m, gt_test_tmp("a.sqlite"), &st, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(st.runs_added, 1);
    ck_assert_int_eq(st.cells_added, 2);
    ck_assert_msg(gt_db_merge(m, gt_test_tmp("b.sqlite"), &st, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(st.runs_merged, 1);
    ck_assert_int_eq(st.cells_added, 2);
    ck_assert_int_eq(q_int(m, "SELECT COUNT(*) FROM runs"), 1);
    ck_assert_int_eq(q_int(m, "SELECT COUNT(*) FROM cells"), 4);
    ck_assert_int_eq(q_int(m, "SELECT COUNT(*) FROM results"), 6);
    ck_assert_int_eq(q_int(m, "SELECT COUNT(*) FROM series"), 9);
    /* Each cell keeps its own points (b's failing cell: decode 5, kv 5000). */
    ck_assert_int_eq(q_int(m, "SELECT s.y FROM series s JOIN cells c ON c.id = s.cell"
                              " WHERE c.cell_id = 'm/q4_0/cpu/default' AND s.name = 'kv_bytes'"),
                     5000);
    ck_assert_int_eq(q_int(m, "SELECT COUNT(*) FROM series s JOIN cells c ON c.id = s.cell"
                              " WHERE c.cell_id = 'm/q4_0/cpu/default' AND s.y IS NULL"
                              " AND s.x = 8191 AND s.seq = 1"),
                     1);
    ck_assert_int_eq(q_int(m, "SELECT COUNT(*) FROM devices"), 1);
    ck_assert_int_eq(q_int(m, "SELECT COUNT(*) FROM cells WHERE device_id IS NOT NULL"), 3);
    ck_assert_int_eq(q_int(m, "SELECT COUNT(*) FROM runs WHERE status = 'interrupted'") +
                         q_int(m, "SELECT COUNT(*) FROM runs WHERE status = 'running'"),
                     1);
    /* Idempotent. */
    ck_assert_int_eq(gt_db_merge(m, gt_test_tmp("a.sqlite"), &st, &err), 0);
    ck_assert_int_eq(st.cells_added + st.cells_replaced, 0);
    ck_assert_int_eq(st.cells_kept, 2);
    ck_assert_int_eq(q_int(m, "SELECT COUNT(*) FROM results"), 6);
    ck_assert_int_eq(q_int(m, "SELECT COUNT(*) FROM series"), 9);

    /* A finished copy replaces the pending cell; the run becomes complete. */
    gt_db *c = fresh("c2.sqlite");
    int64_t rc = make_run(c, "m/ci/7", "s1", NULL, 3, 4);
    ck_assert_int_eq(record(c, rc, CELLS[3], "pass", 500, "pass", NULL, &err), 0);
    gt_db_close(c);
    ck_assert_int_eq(gt_db_merge(m, gt_test_tmp("c2.sqlite"), &st, &err), 0);
    ck_assert_int_eq(st.cells_replaced, 1);
    ck_assert_int_eq(q_int(m, "SELECT COUNT(*) FROM cells WHERE status = 'pending'"), 0);
    ck_assert_int_eq(q_int(m, "SELECT COUNT(*) FROM runs WHERE status = 'complete'"), 1);
    ck_assert_int_eq(q_int(m, "SELECT COUNT(*) FROM results"), 8);
    ck_assert_int_eq(q_int(m, "SELECT COUNT(*) FROM series"), 12);
    ck_assert_int_eq(gt_db_check(m, stdout, &err), 0);

    /* Same run key from another matrix: refused, nothing changes. */
    gt_db *d = fresh("d.sqlite");
    make_run(d, "m/ci/7", "OTHER", NULL, 0, 1);
    gt_db_close(d);
    ck_assert_int_ne(gt_db_merge(m, gt_test_tmp("d.sqlite"), &st, &err), 0);
    ck_assert_ptr_nonnull(strstr(err.msg, "different matrices"));
    ck_assert_int_eq(q_int(m, "SELECT COUNT(*) FROM cells"), 4);
    gt_db_close(m);
}
END_TEST

static int gate_text(gt_db *db, int64_t run, gt_db *base, int64_t brun, char *buf, size_t cap)
{
    FILE *f = tmpfile();
    gt_err err = {{0}};
    int rc = gt_gate_eval(db, run, base, brun, f, &err);
    rewind(f);
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = '\0';
    fclose(f);
    ck_assert_msg(rc >= 0, "%s", err.msg);
    return rc;
}

START_TEST(gate_verdicts)
{
    gt_err err = {{0}};
    char out[8192];
    gt_db *db = fresh("g.sqlite");
    int64_t run = make_run(db, "m/ci/1", "s1", "{\"perf_regression_pct\": 10}", 0, 4);
    ck_assert_int_eq(record(db, run, CELLS[0], "pass", 500, "pass", NULL, &err), 0);
    ck_assert_int_eq(record(db, run, CELLS[1], "xfail", 500, "pass", NULL, &err), 0);
    ck_assert_int_eq(record(db, run, CELLS[3], "skip", 500, "pass", NULL, &err), 0);
    /* Cell 2 (optional) fails: the gate does not mind. */
    ck_assert_int_eq(record(db, run, CELLS[2], "fail", 5, "fail", NULL, &err), 0);
    ck_assert_int_eq(gate_text(db, run, NULL, 0, out, sizeof out), 0);
    ck_assert_ptr_nonnull(strstr(out, "gate: PASS"));
    ck_assert_ptr_nonnull(strstr(out, "1 optional"));

    /* A required cell failing names the cell, the check and the metric. */
    ck_assert_int_eq(record(db, run, CELLS[0], "fail", 42, "fail", NULL, &err), 0);
    ck_assert_int_eq(gate_text(db, run, NULL, 0, out, sizeof out), 1);
    ck_assert_ptr_nonnull(strstr(out, "FAIL m/f32/cpu/default: fail"));
    ck_assert_ptr_nonnull(strstr(out, "smoke.generate"));
    ck_assert_ptr_nonnull(strstr(out, "smoke.decode_tps = 42 tok/s, tolerance >= 100"));

    /* A baseline that was faster: a regression (here 500 -> 400 = 20% > 10%). */
    ck_assert_int_eq(record(db, run, CELLS[0], "pass", 400, "pass", NULL, &err), 0);
    gt_db *base = fresh("gb.sqlite");
    int64_t brun = make_run(base, "m/ci/0", "s1", NULL, 0, 4);
    ck_assert_int_eq(record(base, brun, CELLS[0], "pass", 500, "pass", NULL, &err), 0);
    ck_assert_int_eq(gate_text(db, run, base, brun, out, sizeof out), 1);
    ck_assert_ptr_nonnull(strstr(out, "REGRESSION m/f32/cpu/default: smoke.decode_tps = 400"));
    ck_assert_ptr_nonnull(strstr(out, "20.0% worse"));
    ck_assert_int_eq(record(base, brun, CELLS[0], "pass", 420, "pass", NULL, &err), 0);
    ck_assert_int_eq(gate_text(db, run, base, brun, out, sizeof out), 0); /* 4.8%: fine */

    /* A pending required cell is "not run". */
    gt_db *p = fresh("gp.sqlite");
    int64_t prun = make_run(p, "m/ci/2", "s1", "{\"allowed\": [\"pass\"]}", 0, 1);
    ck_assert_int_eq(gate_text(p, prun, NULL, 0, out, sizeof out), 1);
    ck_assert_ptr_nonnull(strstr(out, "not run"));
    ck_assert_ptr_nonnull(strstr(out, "allowed: pass)"));
    gt_db_close(p);

    /* Zero coverage: a run whose every cell skipped (allowed skips all) ran
     * nothing and fails, "0 cells ran"; one cell run beside them passes. */
    gt_db *z = fresh("gz.sqlite");
    int64_t zrun = make_run(z, "m/ci/3", "s1", NULL, 0, 2);
    ck_assert_int_eq(record(z, zrun, CELLS[0], "skip", 500, "pass", NULL, &err), 0);
    ck_assert_int_eq(record(z, zrun, CELLS[1], "skip", 500, "pass", NULL, &err), 0);
    ck_assert_int_eq(gate_text(z, zrun, NULL, 0, out, sizeof out), 1);
    ck_assert_msg(strstr(out, "FAIL run: 0 cells ran: all 2 cells were skipped (first:"
                              " m/f32/cpu/default: no device: why)"), "%s", out);
    ck_assert_msg(strstr(out, "gate: FAIL (2 cells: 2 skip; 0 cells ran)"), "%s", out);
    ck_assert_ptr_null(strstr(out, "not in allowed_skips"));
    ck_assert_int_eq(record(z, zrun, CELLS[1], "pass", 500, "pass", NULL, &err), 0);
    ck_assert_int_eq(gate_text(z, zrun, NULL, 0, out, sizeof out), 0);
    ck_assert_msg(strstr(out, "gate: PASS (2 cells: 1 pass, 1 skip)"), "%s", out);
    gt_db_close(z);
    gt_db_close(base);
    gt_db_close(db);
}
END_TEST

/* Shard k/2 of run "m/ci/9" (4 cells: shard 1 has indexes 0, 2; shard 2
 * has 1, 3) in its own file, every cell recorded as status. */
static void make_shard(const char *name, int k, const char *status)
{
    gt_err err = {{0}};
    gt_db *db = fresh(name);
    gt_db_run_new nr = {"m/ci/9", "m", "s1", "{}", "m.json", "ci", NULL, 4};
    int64_t run, part;
    ck_assert_msg(gt_db_run_create(db, &nr, &run, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(gt_db_part_begin(db, run, k, 2, "qualify --shard", &part, &err), 0);
    gt_db_cell_new cells[2];
    int n = 0;
    for (int i = k - 1; i < 4; i += 2)
        cells[n++] = (gt_db_cell_new){.cell_id = CELLS[i], .model = "m", .quant = "q",
                                      .backend = "cpu", .driver = "default", .idx = i,
                                      .required = true, .expected = "pass"};
    ck_assert_int_eq(gt_db_cells_add(db, run, cells, n, &err), 0);
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(record(db, run, cells[i].cell_id, status, 500, "pass", NULL, &err), 0);
    char sql[96]; /* as qualify records them: each cell names its part */
    snprintf(sql, sizeof sql, "UPDATE cells SET part_id = %lld", (long long)part);
    ck_assert_int_eq(gt_db_exec(db, sql, &err), 0);
    ck_assert_int_eq(gt_db_part_end(db, part, "complete", &err), 0);
    gt_db_close(db);
}

static int64_t run_id(gt_db *db)
{
    return q_int(db, "SELECT id FROM runs WHERE run_key = 'm/ci/9'");
}

START_TEST(gate_merged_shards)
{
    gt_err err = {{0}};
    char out[8192];
    gt_db_merge_stats st;
    make_shard("s1.sqlite", 1, "pass");
    make_shard("s2.sqlite", 2, "pass");

    /* Each shard's own database, gated alone (as `qualify --shard` does), is
     * judged on its own cells: it passes, saying so. */
    gt_db *s1;
    ck_assert_int_eq(gt_db_open(gt_test_tmp("s1.sqlite"), true, &s1, &err), 0);
    ck_assert_int_eq(gate_text(s1, run_id(s1), NULL, 0, out, sizeof out), 0);
    ck_assert_ptr_nonnull(strstr(out, "gate: PASS (2 cells"));
    ck_assert_ptr_nonnull(strstr(out, "shard 1/2 alone"));
    gt_db_close(s1);

    /* Both shards merged: the whole run, every cell there: pass. */
    gt_db *m = fresh("gm.sqlite");
    ck_assert_int_eq(gt_db_merge(m, gt_test_tmp("s1.sqlite"), &st, &err), 0);
    ck_assert_int_eq(gt_db_merge(m, gt_test_tmp("s2.sqlite"), &st, &err), 0);
    ck_assert_int_eq(gate_text(m, run_id(m), NULL, 0, out, sizeof out), 0);
    ck_assert_ptr_nonnull(strstr(out, "gate: PASS (4 cells: 4 pass)"));
    ck_assert_ptr_null(strstr(out, "never ran"));
    ck_assert_int_eq(q_int(m, "SELECT COUNT(*) FROM run_merges"), 2);
    /* Merging again adds no merge record; merging the merged file again
     * elsewhere keeps it whole. */
    ck_assert_int_eq(gt_db_merge(m, gt_test_tmp("s1.sqlite"), &st, &err), 0);
    ck_assert_int_eq(q_int(m, "SELECT COUNT(*) FROM run_merges"), 2);
    ck_assert_int_eq(gt_db_check(m, stdout, &err), 0);
    gt_db_close(m);
    gt_db *m2 = fresh("gm2.sqlite");
    ck_assert_int_eq(gt_db_merge(m2, gt_test_tmp("gm.sqlite"), &st, &err), 0);
    ck_assert_int_eq(gate_text(m2, run_id(m2), NULL, 0, out, sizeof out), 0);
    gt_db_close(m2);

    /* Shard 2's database never arrived: the merged run fails, naming the
     * shard and the cells that never ran, though every cell it has passed. */
    gt_db *p = fresh("gpart.sqlite");
    ck_assert_int_eq(gt_db_merge(p, gt_test_tmp("s1.sqlite"), &st, &err), 0);
    ck_assert_int_eq(gate_text(p, run_id(p), NULL, 0, out, sizeof out), 1);
    ck_assert_msg(strstr(out, "FAIL shard 2/2 missing") != NULL, "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "its 2 cells never ran (expansion indexes 1, 3)"));
    ck_assert_ptr_nonnull(strstr(out, "gate: FAIL (2 cells: 2 pass"));
    ck_assert_ptr_nonnull(strstr(out, "2 cells of the run's 4 never ran: shard 2/2"));
    ck_assert_ptr_null(strstr(out, "shard 1/2"));
    gt_db_close(p);

    /* A shard that arrived short of a cell: incomplete, that index named. */
    gt_db *s2;
    ck_assert_int_eq(gt_db_open(gt_test_tmp("s2.sqlite"), false, &s2, &err), 0);
    ck_assert_int_eq(gt_db_exec(s2, "DELETE FROM cells WHERE idx = 3", &err), 0);
    gt_db_close(s2);
    gt_db *q = fresh("gq.sqlite");
    ck_assert_int_eq(gt_db_merge(q, gt_test_tmp("s1.sqlite"), &st, &err), 0);
    ck_assert_int_eq(gt_db_merge(q, gt_test_tmp("s2.sqlite"), &st, &err), 0);
    ck_assert_int_eq(gate_text(q, run_id(q), NULL, 0, out, sizeof out), 1);
    ck_assert_msg(strstr(out, "FAIL shard 2/2 incomplete: 1 of its 2 cells never ran"
                              " (expansion indexes 3)") != NULL, "%s", out);
    gt_db_close(q);

    /* A failing cell in a shard alone still fails that shard's gate. */
    make_shard("s1f.sqlite", 1, "fail");
    ck_assert_int_eq(gt_db_open(gt_test_tmp("s1f.sqlite"), true, &s1, &err), 0);
    ck_assert_int_eq(gate_text(s1, run_id(s1), NULL, 0, out, sizeof out), 1);
    ck_assert_ptr_nonnull(strstr(out, "FAIL m/f32/cpu/default: fail"));
    gt_db_close(s1);
}
END_TEST

/* Shard 1 run twice under one run id, clean and with a fault, plus shard
 * 2: the merged run fails naming the conflicting cells in either order,
 * and `db check` reports them (issue 34, finding 3). */
START_TEST(merge_conflict_fails_either_order)
{
    gt_err err = {{0}};
    char out[8192];
    gt_db_merge_stats st;
    make_shard("c1.sqlite", 1, "pass");
    make_shard("c1f.sqlite", 1, "fail");
    make_shard("c2.sqlite", 2, "pass");
    static const char *const ORDERS[2][3] = {{"c1.sqlite", "c1f.sqlite", "c2.sqlite"},
                                             {"c1f.sqlite", "c1.sqlite", "c2.sqlite"}};
    for (int o = 0; o < 2; o++) {
        gt_db *m = fresh(o ? "call2.sqlite" : "call1.sqlite");
        int conflicts = 0;
        for (int i = 0; i < 3; i++) {
            ck_assert_msg(gt_db_merge(m, gt_test_tmp(ORDERS[o][i]), &st, &err) == 0, "%s",
                          err.msg);
            conflicts += st.conflicts;
        }
        ck_assert_int_eq(conflicts, 2);
        ck_assert_int_eq(q_int(m, "SELECT COUNT(*) FROM cells WHERE status = 'fail' AND reason"
                                  " LIKE 'conflict: %(flaky?)'"),
                         2);
        /* The worse side's failing check survives, whichever came first. */
        ck_assert_int_eq(q_int(m, "SELECT COUNT(*) FROM results WHERE check_name = 'generate'"
                                  " AND status = 'fail'"),
                         2);
        ck_assert_int_eq(gate_text(m, run_id(m), NULL, 0, out, sizeof out), 1);
        ck_assert_msg(strstr(out, "FAIL m/f32/cpu/default: conflict: ") != NULL, "%s", out);
        ck_assert_msg(strstr(out, "FAIL m/q4_0/cpu/default: conflict: ") != NULL, "%s", out);
        ck_assert_msg(strstr(out, o ? "fail in shard 1/2" : "pass in shard 1/2") != NULL, "%s",
                      out);
        ck_assert_msg(strstr(out, o ? "pass in " : "fail in ") != NULL, "%s", out);
        ck_assert_msg(strstr(out, gt_test_tmp(ORDERS[o][1])) != NULL, "%s", out);
        ck_assert_ptr_nonnull(strstr(out, "merge.conflict"));
        ck_assert_ptr_nonnull(strstr(out, "gate: FAIL (4 cells"));
        FILE *f = tmpfile();
        ck_assert_int_eq(gt_db_check(m, f, &err), 1);
        rewind(f);
        size_t n = fread(out, 1, sizeof out - 1, f);
        out[n] = '\0';
        fclose(f);
        ck_assert_msg(strstr(out, "FAIL no merge conflicts") != NULL, "%s", out);
        ck_assert_ptr_nonnull(strstr(out, "m/f32/cpu/default conflict: "));
        /* Merging a side again leaves the conflict as it was. */
        ck_assert_int_eq(gt_db_merge(m, gt_test_tmp(ORDERS[o][0]), &st, &err), 0);
        ck_assert_int_eq(q_int(m, "SELECT COUNT(*) FROM cells WHERE reason LIKE 'conflict: %'"),
                         2);
        ck_assert_int_eq(q_int(m, "SELECT COUNT(*) FROM results WHERE suite = 'merge'"), 2);
        gt_db_close(m);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("db");
    TCase *tc = tcase_create("db");
    tcase_add_test(tc, schema_and_versions);
    tcase_add_test(tc, cells_are_recorded_whole);
    tcase_add_test(tc, check_finds_damage);
    tcase_add_test(tc, merge_joins_shards);
    tcase_add_test(tc, gate_verdicts);
    tcase_add_test(tc, gate_merged_shards);
    tcase_add_test(tc, merge_conflict_fails_either_order);
    suite_add_tcase(s, tc);
    return gt_test_run(s);
}
