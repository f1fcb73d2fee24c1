/* cmd_db.c: `gauntlet db check FILE`, `gauntlet db runs FILE`,
 * `gauntlet db gate FILE [RUN]`: look after a results database.
 *
 * check: integrity, schema and harness invariants (exit 1 on a problem).
 * runs:  the runs it holds, newest first, with cell counts by status.
 * gate:  re-applies a run's stored gate policy (e.g. after merging shards);
 *        the newest run by default.
 * headroom: for each bound the run's metrics were judged by, the worst
 *        value measured under it and the ratio between them; flags bounds
 *        more than 100x looser than measured (reports/report.h, headroom). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "store.h"
#include "report.h"

static void help(FILE *f)
{
    fprintf(f, "usage: gauntlet db check FILE\n"
               "       gauntlet db runs FILE\n"
               "       gauntlet db gate FILE [RUN_KEY]\n"
               "       gauntlet db headroom FILE [RUN_KEY] [--strict]\n"
               "  check: SQLite integrity, schema version and layout, harness invariants\n"
               "  runs:  list runs with cell counts by status\n"
               "  gate:  apply a run's recorded gate policy again (default: newest run)\n"
               "  headroom: each bound, the worst value measured under it and their ratio;\n"
               "         flags bounds more than 100x looser than measured (values below 1e-9\n"
               "         count as 1e-9, agreement shortfalls below 0.01 as 0.01); --strict\n"
               "         exits 1 when one is flagged\n");
}

static int runs(gt_db *db)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(gt_db_sqlite(db),
                           "SELECT r.run_key, r.status, r.n_cells, r.host, datetime(r.started_at,"
                           " 'unixepoch'), (SELECT group_concat(s, ', ') FROM (SELECT"
                           " COUNT(*) || ' ' || status AS s FROM cells WHERE run_id = r.id"
                           " GROUP BY status)) FROM runs r ORDER BY r.started_at DESC",
                           -1, &st, NULL) != SQLITE_OK) {
        fprintf(stderr, "gauntlet db: %s\n", sqlite3_errmsg(gt_db_sqlite(db)));
        return GT_EXIT_USAGE;
    }
    while (sqlite3_step(st) == SQLITE_ROW)
        printf("%s  %s  %s  %d cells: %s  (%s)\n", sqlite3_column_text(st, 4),
               sqlite3_column_text(st, 0), sqlite3_column_text(st, 1), sqlite3_column_int(st, 2),
               sqlite3_column_text(st, 5) ? (const char *)sqlite3_column_text(st, 5) : "none",
               sqlite3_column_text(st, 3));
    sqlite3_finalize(st);
    return GT_EXIT_OK;
}

/* The run to look at: key, or the newest. 0, 1 none, -1 error. */
static int pick_run(gt_db *db, const char *key, gt_db_run *run, gt_err *err)
{
    if (key)
        return gt_db_run_get(db, key, run, err);
    sqlite3_stmt *st;
    int r = 1;
    if (sqlite3_prepare_v2(gt_db_sqlite(db),
                           "SELECT run_key FROM runs ORDER BY started_at DESC LIMIT 1", -1, &st,
                           NULL) == SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW) {
            char k[160];
            snprintf(k, sizeof k, "%s", sqlite3_column_text(st, 0));
            r = gt_db_run_get(db, k, run, err);
        }
        sqlite3_finalize(st);
    }
    return r;
}

static int headroom(gt_db *db, const char *key, bool strict)
{
    gt_err err = {{0}};
    gt_db_run run;
    int r = pick_run(db, key, &run, &err);
    if (r != 0) {
        fprintf(stderr, "gauntlet db headroom: %s\n", r < 0 ? err.msg : "no such run");
        return GT_EXIT_USAGE;
    }
    gt_rep_run *rep;
    if (gt_report_load(db, run.id, false, NULL, 0, &rep, &err) != 0) {
        fprintf(stderr, "gauntlet db headroom: %s\n", err.msg);
        return GT_EXIT_USAGE;
    }
    gt_headroom_row *rows;
    int n;
    if (gt_headroom_rows(rep, &rows, &n) != 0) {
        gt_report_free(rep);
        fprintf(stderr, "gauntlet db headroom: out of memory\n");
        return GT_EXIT_USAGE;
    }
    printf("run %s (%s), %d cells\n", run.run_key, run.status, rep->n);
    int loose = gt_headroom_print(stdout, rows, n, rep->notes_unread);
    free(rows);
    gt_report_free(rep);
    return strict && loose ? GT_EXIT_FAIL : GT_EXIT_OK;
}

int cmd_db(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        help(stdout);
        return GT_EXIT_OK;
    }
    bool gate = argc >= 3 && !strcmp(argv[1], "gate");
    bool room = argc >= 3 && !strcmp(argv[1], "headroom");
    bool strict = room && !strcmp(argv[argc - 1], "--strict");
    if (!(argc == 3 && (!strcmp(argv[1], "check") || !strcmp(argv[1], "runs"))) &&
        !(gate && argc <= 4) && !(room && argc - strict <= 4)) {
        help(stderr);
        return GT_EXIT_USAGE;
    }
    gt_err err = {{0}};
    gt_db *db;
    if (gt_db_open(argv[2], true, &db, &err) != 0) {
        fprintf(stderr, "gauntlet db: %s\n", err.msg);
        return GT_EXIT_USAGE;
    }
    int rc;
    if (!strcmp(argv[1], "check")) {
        int r = gt_db_check(db, stdout, &err);
        if (r < 0)
            fprintf(stderr, "gauntlet db check: %s\n", err.msg);
        rc = r < 0 ? GT_EXIT_USAGE : r ? GT_EXIT_FAIL : GT_EXIT_OK;
    } else if (room) {
        rc = headroom(db, argc - strict == 4 ? argv[3] : NULL, strict);
    } else if (!gate) {
        rc = runs(db);
    } else {
        gt_db_run run;
        int r;
        if (argc == 4) {
            r = gt_db_run_get(db, argv[3], &run, &err);
        } else {
            sqlite3_stmt *st;
            r = 1;
            if (sqlite3_prepare_v2(gt_db_sqlite(db),
                                   "SELECT run_key FROM runs ORDER BY started_at DESC LIMIT 1",
                                   -1, &st, NULL) == SQLITE_OK) {
                if (sqlite3_step(st) == SQLITE_ROW) {
                    char key[160];
                    snprintf(key, sizeof key, "%s", sqlite3_column_text(st, 0));
                    r = gt_db_run_get(db, key, &run, &err);
                }
                sqlite3_finalize(st);
            }
        }
        if (r != 0) {
            fprintf(stderr, "gauntlet db gate: %s\n", r < 0 ? err.msg : "no such run");
            rc = GT_EXIT_USAGE;
        } else {
            printf("run %s (%s)\n", run.run_key, run.status);
            int g = gt_gate_eval(db, run.id, NULL, 0, stdout, &err);
            if (g < 0)
                fprintf(stderr, "gauntlet db gate: %s\n", err.msg);
            rc = g < 0 ? GT_EXIT_USAGE : g ? GT_EXIT_FAIL : GT_EXIT_OK;
        }
    }
    gt_db_close(db);
    return rc;
}
