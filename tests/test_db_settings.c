/* test_db_settings.c: a cell's execution settings in the results database
 * (schema 4).
 *
 * A schema-3 file (built from the first three migrations, with a cell in
 * it) is migrated on open (through schema 5, which adds the empty series
 * table): its cell keeps its row and reads settings '' and
 * NULL values, and `db check` finds the migrated schema equal to a fresh
 * one. Cells added with settings store the variant id and each value (NULL
 * for what the matrix did not set), and a merge carries them. The gate's
 * own patterns (must_pass, allowed_skips) read the settings part: an axis
 * "settings" narrows to variants, a four-part id covers them. */
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

static void text_eq(gt_db *db, const char *sql, const char *want)
{
    sqlite3_stmt *st;
    ck_assert_msg(sqlite3_prepare_v2(gt_db_sqlite(db), sql, -1, &st, NULL) == SQLITE_OK, "%s: %s",
                  sql, sqlite3_errmsg(gt_db_sqlite(db)));
    ck_assert_msg(sqlite3_step(st) == SQLITE_ROW, "%s: no row", sql);
    const char *got = (const char *)sqlite3_column_text(st, 0);
    ck_assert_msg(got && !strcmp(got, want), "%s: got \"%s\", want \"%s\"", sql,
                  got ? got : "NULL", want);
    sqlite3_finalize(st);
}

static gt_db *open_rw(const char *path)
{
    gt_db *db;
    gt_err err = {{0}};
    ck_assert_msg(gt_db_open(path, false, &db, &err) == 0, "%s", err.msg);
    return db;
}

START_TEST(schema_3_migrates)
{
    const char *path = gt_test_tmp("v3.sqlite");
    unlink(path);
    sqlite3 *h;
    ck_assert_int_eq(sqlite3_open(path, &h), SQLITE_OK);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(sqlite3_exec(h, gt_dbi_migration(i), NULL, NULL, NULL), SQLITE_OK);
    ck_assert_int_eq(
        sqlite3_exec(h,
                     "PRAGMA user_version = 3;"
                     "INSERT INTO meta VALUES ('created_by', 'gauntlet old');"
                     "INSERT INTO runs (run_key, matrix_name, matrix_sha256, matrix_json, tier,"
                     " tool_version, git_sha, host, n_cells, started_at, status) VALUES"
                     " ('k', 'm', 's', '{}', 't', 'v', 'g', 'h', 1, 1, 'complete');"
                     "INSERT INTO cells (run_id, cell_id, idx, model, quant, backend, driver,"
                     " required, expected, status, started_at, finished_at, duration_s)"
                     " VALUES (1, 'm/q/cpu/default', 0, 'm', 'q', 'cpu', 'default', 1, 'pass',"
                     " 'pass', 1, 2, 1);",
                     NULL, NULL, NULL),
        SQLITE_OK);
    sqlite3_close(h);

    gt_db *db = open_rw(path);
    text_eq(db, "PRAGMA user_version", "5");
    text_eq(db, "SELECT COUNT(*) FROM series", "0"); /* schema 5: the series table, empty */
    text_eq(db, "SELECT cell_id || '|' || settings || '|' || quote(n_batch) || quote(n_parallel)"
                " || quote(threads) || quote(kv_type) FROM cells",
            "m/q/cpu/default||NULLNULLNULLNULL");
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    gt_err err = {{0}};
    int rc = gt_db_check(db, out, &err);
    fclose(out);
    ck_assert_msg(rc == 0, "db check after migration: %d %s\n%s", rc, err.msg, buf);
    free(buf);
    gt_db_close(db);
}
END_TEST

START_TEST(settings_recorded_and_merged)
{
    const char *a = gt_test_tmp("sa.sqlite"), *b = gt_test_tmp("sb.sqlite");
    unlink(a);
    unlink(b);
    gt_db *db = open_rw(a);
    gt_err err = {{0}};
    gt_db_run_new nr = {"m/t/1", "m", "s", "{}", "m.json", "t", NULL, 3};
    int64_t run;
    ck_assert_msg(gt_db_run_create(db, &nr, &run, &err) == 0, "%s", err.msg);
    const gt_db_cell_new cells[] = {
        {.cell_id = "m/q/cpu/default", .model = "m", .quant = "q", .backend = "cpu",
         .driver = "default", .idx = 0, .required = true, .expected = "pass"},
        {.cell_id = "m/q/cpu/default/nb7-np4-t2", .model = "m", .quant = "q", .backend = "cpu",
         .driver = "default", .idx = 1, .required = true, .expected = "pass",
         .settings = "nb7-np4-t2", .n_batch = 7, .n_parallel = 4, .threads = 2},
        {.cell_id = "m/q/cpu/default/np2-kvf16", .model = "m", .quant = "q", .backend = "cpu",
         .driver = "default", .idx = 2, .required = true, .expected = "pass",
         .settings = "np2-kvf16", .n_parallel = 2, .kv_type = "f16"},
    };
    ck_assert_msg(gt_db_cells_add(db, run, cells, 3, &err) == 0, "%s", err.msg);
    static const char *const want[] = {"|NULLNULLNULLNULL", "nb7-np4-t2|742NULL",
                                       "np2-kvf16|NULL2NULL'f16'"};
    for (int i = 0; i < 3; i++) {
        char sql[256];
        snprintf(sql, sizeof sql,
                 "SELECT settings || '|' || quote(n_batch) || quote(n_parallel) ||"
                 " quote(threads) || quote(kv_type) FROM cells WHERE idx = %d", i);
        text_eq(db, sql, want[i]);
    }
    gt_db_close(db);

    gt_db *dst = open_rw(b);
    gt_db_merge_stats ms = {0};
    ck_assert_msg(gt_db_merge(dst, a, &ms, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(ms.cells_added, 3);
    text_eq(dst,
            "SELECT settings || '|' || quote(n_batch) || quote(n_parallel) || quote(threads)"
            " FROM cells WHERE cell_id = 'm/q/cpu/default/nb7-np4-t2'",
            "nb7-np4-t2|742");
    gt_db_close(dst);
}
END_TEST

/* Cells recorded with the given status and skip reason (no checks). */
static void finish(gt_db *db, int64_t run, const char *cell, const char *status,
                   const char *reason)
{
    gt_err err = {{0}};
    gt_db_record rec = {.cell_id = cell, .status = status, .raw_status = status,
                        .reason = reason, .log = "", .started_at = 1, .finished_at = 2,
                        .duration_s = 1};
    ck_assert_msg(gt_db_cell_record(db, run, &rec, NULL, &err) == 0, "%s", err.msg);
}

START_TEST(gate_patterns_read_settings)
{
    static const char *const GATES[][2] = {
        /* must_pass by the settings axis: the nb7 cell skipped, so FAIL. */
        {"{\"must_pass\": [{\"settings\": \"nb7-*\"}]}", "1"},
        /* must_pass naming another variant: the skip is allowed. */
        {"{\"must_pass\": [{\"settings\": \"nb1-*\"}]}", "0"},
        /* A four-part id covers its variants. */
        {"{\"must_pass\": [\"m/q/cpu/default\"]}", "1"},
        /* The skip's category allowed for the variant's four-part id only. */
        {"{\"allowed_skips\": [{\"category\": \"unsupported\", \"cell\": \"m/q/cpu/default\"}]}",
         "0"},
        {"{\"allowed_skips\": [{\"category\": \"unsupported\", \"settings\": \"nb1-*\"}]}",
         "1"},
    };
    for (size_t g = 0; g < sizeof GATES / sizeof GATES[0]; g++) {
        char name[32], key[32];
        snprintf(name, sizeof name, "gate%zu.sqlite", g);
        snprintf(key, sizeof key, "m/t/%zu", g);
        const char *path = gt_test_tmp(name);
        unlink(path);
        gt_db *db = open_rw(path);
        gt_err err = {{0}};
        gt_db_run_new nr = {key, "m", "s", "{}", "m.json", "t", GATES[g][0], 2};
        int64_t run;
        ck_assert_msg(gt_db_run_create(db, &nr, &run, &err) == 0, "%s", err.msg);
        const gt_db_cell_new cells[] = {
            {.cell_id = "m/q/cpu/default/nb1-np4", .model = "m", .quant = "q", .backend = "cpu",
             .driver = "default", .idx = 0, .required = true, .expected = "pass",
             .settings = "nb1-np4", .n_batch = 1, .n_parallel = 4},
            {.cell_id = "m/q/cpu/default/nb7-np4", .model = "m", .quant = "q", .backend = "cpu",
             .driver = "default", .idx = 1, .required = true, .expected = "pass",
             .settings = "nb7-np4", .n_batch = 7, .n_parallel = 4},
        };
        ck_assert_msg(gt_db_cells_add(db, run, cells, 2, &err) == 0, "%s", err.msg);
        finish(db, run, cells[0].cell_id, "pass", NULL);
        finish(db, run, cells[1].cell_id, "skip", "unsupported: kv_type f16: test");
        char *buf = NULL;
        size_t len = 0;
        FILE *out = open_memstream(&buf, &len);
        int rc = gt_gate_eval(db, run, NULL, 0, out, &err);
        fclose(out);
        ck_assert_msg(rc == atoi(GATES[g][1]), "gate %zu (%s): %d, want %s\n%s%s", g,
                      GATES[g][0], rc, GATES[g][1], buf, err.msg);
        free(buf);
        gt_db_close(db);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("db_settings");
    TCase *tc = tcase_create("db_settings");
    tcase_add_test(tc, schema_3_migrates);
    tcase_add_test(tc, settings_recorded_and_merged);
    tcase_add_test(tc, gate_patterns_read_settings);
    suite_add_tcase(s, tc);
    return gt_test_run(s);
}
