/* db_check.c: `gauntlet db check` (gt_db_check in db.h).
 *
 * Beyond SQLite's own integrity_check and foreign_key_check, it compares
 * the file's schema with the one this gauntlet creates (by building that
 * schema in a scratch in-memory database, so there is no second copy of it
 * to drift), and checks the invariants the harness relies on: one row per
 * (run, cell), no results for a cell that is still pending (a half-written
 * cell), complete runs have no pending cells, reference blobs match their
 * recorded size and sha256, and no cell is a merge conflict (two shards
 * that finished it with different statuses: a flaky or faulted run). */
#include "db.h"

#include <string.h>

#include "db_internal.h"
#include "base.h"

typedef struct checker {
    gt_db *db;
    FILE *out;
    int problems;
} checker;

static void report(checker *c, bool ok, const char *what, const char *detail)
{
    fprintf(c->out, "%-4s %s%s%s\n", ok ? "ok" : "FAIL", what, detail && detail[0] ? ": " : "",
            detail ? detail : "");
    if (!ok)
        c->problems++;
}

/* Runs a query whose rows are problems; prints up to 5 of them. */
static int rows_are_problems(checker *c, const char *what, const char *sql, gt_err *err)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(gt_db_sqlite(c->db), sql, -1, &st, NULL) != SQLITE_OK)
        return gt_dbi_sqlerr(c->db, err, what);
    int n = 0, rc;
    char detail[1024] = "";
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (n++ < 5) {
            size_t len = strlen(detail);
            snprintf(detail + len, sizeof detail - len, "%s", len ? "; " : "");
            for (int i = 0; i < sqlite3_column_count(st); i++) {
                const unsigned char *v = sqlite3_column_text(st, i);
                len = strlen(detail);
                snprintf(detail + len, sizeof detail - len, "%s%s", i ? " " : "",
                         v ? (const char *)v : "NULL");
            }
        }
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return gt_dbi_sqlerr(c->db, err, what);
    if (n > 5) {
        size_t len = strlen(detail);
        snprintf(detail + len, sizeof detail - len, "; and %d more", n - 5);
    }
    report(c, n == 0, what, detail);
    return 0;
}

static int integrity(checker *c, gt_err *err)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(gt_db_sqlite(c->db), "PRAGMA integrity_check", -1, &st, NULL) !=
        SQLITE_OK)
        return gt_dbi_sqlerr(c->db, err, "integrity_check");
    char detail[1024] = "";
    bool ok = true;
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *v = (const char *)sqlite3_column_text(st, 0);
        if (v && strcmp(v, "ok") != 0) {
            ok = false;
            size_t len = strlen(detail);
            snprintf(detail + len, sizeof detail - len, "%s%s", len ? "; " : "", v);
        }
    }
    sqlite3_finalize(st);
    report(c, ok, "integrity_check", detail);
    return 0;
}

/* "name type notnull pk" for every column of every table and every index
 * name, as one sorted-by-SQLite text, for the file and for a fresh schema. */
static int schema_text(sqlite3 *h, char *out, size_t cap)
{
    out[0] = '\0';
    sqlite3_stmt *t;
    if (sqlite3_prepare_v2(h,
                           "SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"
                           " ORDER BY type, name",
                           -1, &t, NULL) != SQLITE_OK)
        return -1;
    while (sqlite3_step(t) == SQLITE_ROW) {
        const char *type = (const char *)sqlite3_column_text(t, 0);
        const char *name = (const char *)sqlite3_column_text(t, 1);
        size_t len = strlen(out);
        snprintf(out + len, cap - len, "%s %s\n", type, name);
        if (strcmp(type, "table") != 0)
            continue;
        char sql[256];
        snprintf(sql, sizeof sql, "PRAGMA table_info(\"%s\")", name);
        sqlite3_stmt *c;
        if (sqlite3_prepare_v2(h, sql, -1, &c, NULL) != SQLITE_OK)
            continue;
        while (sqlite3_step(c) == SQLITE_ROW) {
            len = strlen(out);
            snprintf(out + len, cap - len, "  %s %s %d %d\n", sqlite3_column_text(c, 1),
                     sqlite3_column_text(c, 2), sqlite3_column_int(c, 3),
                     sqlite3_column_int(c, 5));
        }
        sqlite3_finalize(c);
    }
    sqlite3_finalize(t);
    return 0;
}

static int schema(checker *c, gt_err *err)
{
    sqlite3_stmt *st;
    int v = -1;
    if (sqlite3_prepare_v2(gt_db_sqlite(c->db), "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW)
            v = sqlite3_column_int(st, 0);
        sqlite3_finalize(st);
    }
    char detail[128];
    snprintf(detail, sizeof detail, "version %d (this gauntlet: %d)", v, GT_DB_SCHEMA_VERSION);
    report(c, v == GT_DB_SCHEMA_VERSION, "schema version", detail);

    sqlite3 *ref;
    if (sqlite3_open(":memory:", &ref) != SQLITE_OK)
        return gt_err_set(err, "cannot open a scratch database");
    for (int i = 0; gt_dbi_migration(i); i++)
        if (sqlite3_exec(ref, gt_dbi_migration(i), NULL, NULL, NULL) != SQLITE_OK) {
            gt_err_set(err, "building the reference schema: %s", sqlite3_errmsg(ref));
            sqlite3_close(ref);
            return -1;
        }
    static char want[32768], have[32768];
    schema_text(ref, want, sizeof want);
    sqlite3_close(ref);
    schema_text(gt_db_sqlite(c->db), have, sizeof have);
    if (strcmp(want, have) == 0) {
        report(c, true, "schema", "tables, columns and indexes as expected");
        return 0;
    }
    /* Name the first line that differs. */
    const char *w = want, *h = have;
    while (*w && *w == *h)
        w++, h++;
    while (w > want && w[-1] != '\n')
        w--, h--;
    char d[300];
    snprintf(d, sizeof d, "expected \"%.*s\", found \"%.*s\"", (int)strcspn(w, "\n"), w,
             (int)strcspn(h, "\n"), h);
    report(c, false, "schema", d);
    return 0;
}

static int ref_blobs(checker *c, gt_err *err)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(gt_db_sqlite(c->db), "SELECT key, size, sha256, data FROM ref_cache",
                           -1, &st, NULL) != SQLITE_OK)
        return gt_dbi_sqlerr(c->db, err, "reference cache");
    int n = 0, bad = 0;
    char detail[300] = "";
    while (sqlite3_step(st) == SQLITE_ROW) {
        n++;
        int len = sqlite3_column_bytes(st, 3);
        char sha[65];
        gt_sha256_hex(sqlite3_column_blob(st, 3), (size_t)len, sha);
        const char *want = (const char *)sqlite3_column_text(st, 2);
        if (len != sqlite3_column_int(st, 1) || !want || strcmp(sha, want) != 0) {
            if (!bad++)
                snprintf(detail, sizeof detail, "entry %s: %d bytes, sha256 %.16s... does not "
                         "match its record", sqlite3_column_text(st, 0), len, sha);
        }
    }
    sqlite3_finalize(st);
    if (!bad)
        snprintf(detail, sizeof detail, "%d entries", n);
    report(c, bad == 0, "reference cache blobs", detail);
    return 0;
}

int gt_db_check(gt_db *db, FILE *out, gt_err *err)
{
    checker c = {db, out, 0};
    if (integrity(&c, err) ||
        rows_are_problems(&c, "foreign keys", "PRAGMA foreign_key_check", err) ||
        schema(&c, err) ||
        rows_are_problems(&c, "one row per (run, cell)",
                          "SELECT run_id, cell_id, COUNT(*) FROM cells GROUP BY run_id, cell_id"
                          " HAVING COUNT(*) > 1",
                          err) ||
        rows_are_problems(&c, "no results for pending cells",
                          "SELECT c.cell_id FROM cells c WHERE c.status = 'pending' AND"
                          " (EXISTS (SELECT 1 FROM results r WHERE r.cell = c.id) OR"
                          "  EXISTS (SELECT 1 FROM metrics m WHERE m.cell = c.id) OR"
                          "  EXISTS (SELECT 1 FROM series s WHERE s.cell = c.id))",
                          err) ||
        rows_are_problems(&c, "finished cells have times",
                          "SELECT cell_id, status FROM cells WHERE status != 'pending' AND"
                          " (finished_at IS NULL OR started_at IS NULL)",
                          err) ||
        rows_are_problems(&c, "complete runs have no pending cells",
                          "SELECT r.run_key, COUNT(*) FROM runs r JOIN cells c ON c.run_id = r.id"
                          " WHERE r.status = 'complete' AND c.status = 'pending' GROUP BY r.id",
                          err) ||
        rows_are_problems(&c, "no merge conflicts (shards that disagree on a cell)",
                          "SELECT r.run_key, c.cell_id, c.reason FROM cells c JOIN runs r"
                          " ON r.id = c.run_id WHERE c.reason LIKE '" GT_MERGE_CONFLICT "%'",
                          err) ||
        rows_are_problems(&c, "one run per run key",
                          "SELECT run_key, COUNT(*) FROM runs GROUP BY run_key HAVING COUNT(*) > 1",
                          err) ||
        ref_blobs(&c, err))
        return -1;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(gt_db_sqlite(db),
                           "SELECT (SELECT COUNT(*) FROM runs), (SELECT COUNT(*) FROM cells),"
                           " (SELECT COUNT(*) FROM results), (SELECT COUNT(*) FROM metrics)",
                           -1, &st, NULL) == SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW)
            fprintf(out, "%s: %d runs, %d cells, %d results, %d metrics; %s\n", gt_db_path(db),
                    sqlite3_column_int(st, 0), sqlite3_column_int(st, 1),
                    sqlite3_column_int(st, 2), sqlite3_column_int(st, 3),
                    c.problems ? "PROBLEMS FOUND" : "all checks passed");
        sqlite3_finalize(st);
    }
    return c.problems ? 1 : 0;
}
