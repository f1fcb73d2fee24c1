/* report_data.c: reads one recorded run into the structs of report.h.
 *
 * Design choices:
 * - Four scans (cells, results, metrics, series: report_series.c), each
 *   ordered by cell so that a cell's checks, metrics and points are one
 *   contiguous slice of a single array;
 *   no per-cell query, so a 10,000-cell run loads in milliseconds.
 * - Every string lives in one arena freed with the run (report_arena.c): the
 *   writers hold const char * and never free anything. The helpers the
 *   writers share are report_fmt.c.
 * - The gate is the harness's own (gt_gate_eval), run on the same database,
 *   its printed lines captured with open_memstream: the report shows exactly
 *   the verdict and reasons CI saw, not a re-implementation of the policy. */
#include "report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "store.h"
#include "base.h"

static int sqlfail(sqlite3 *h, gt_err *err, const char *what)
{
    return gt_err_set(err, "reading the run's %s: %s", what, sqlite3_errmsg(h));
}

static int load_run_row(gt_rep_run *r, sqlite3 *h, int64_t run_id, gt_err *err)
{
    sqlite3_stmt *st;
    const char *sql =
        run_id > 0
            ? "SELECT id, run_key, matrix_name, matrix_sha256, tier, tool_version, git_sha, host,"
              " status, n_cells, started_at, finished_at, gate_json FROM runs WHERE id = ?"
            : "SELECT id, run_key, matrix_name, matrix_sha256, tier, tool_version, git_sha, host,"
              " status, n_cells, started_at, finished_at, gate_json FROM runs"
              " ORDER BY started_at DESC, id DESC LIMIT 1";
    if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) != SQLITE_OK)
        return sqlfail(h, err, "row");
    if (run_id > 0)
        sqlite3_bind_int64(st, 1, run_id);
    int rc = sqlite3_step(st);
    if (rc != SQLITE_ROW) {
        sqlite3_finalize(st);
        if (rc != SQLITE_DONE)
            return sqlfail(h, err, "row");
        return run_id > 0 ? gt_err_set(err, "no run with id %lld", (long long)run_id)
                          : gt_err_set(err, "the database holds no runs");
    }
    bool oom = false;
    r->id = sqlite3_column_int64(st, 0);
    r->run_key = gt_report_dup_col(r, st, 1, &oom);
    r->matrix_name = gt_report_dup_col(r, st, 2, &oom);
    r->matrix_sha256 = gt_report_dup_col(r, st, 3, &oom);
    r->tier = gt_report_dup_col(r, st, 4, &oom);
    r->tool_version = gt_report_dup_col(r, st, 5, &oom);
    r->git_sha = gt_report_dup_col(r, st, 6, &oom);
    r->host = gt_report_dup_col(r, st, 7, &oom);
    r->status = gt_report_dup_col(r, st, 8, &oom);
    r->n_cells = sqlite3_column_int(st, 9);
    r->started_at = sqlite3_column_double(st, 10);
    r->finished_at = sqlite3_column_double(st, 11);
    r->perf_pct = -1;
    const char *gj = (const char *)sqlite3_column_text(st, 12);
    cJSON *g = gj ? cJSON_Parse(gj) : NULL;
    const cJSON *pct = cJSON_GetObjectItemCaseSensitive(g, "perf_regression_pct");
    if (cJSON_IsNumber(pct))
        r->perf_pct = pct->valuedouble;
    cJSON_Delete(g);
    sqlite3_finalize(st);
    return oom ? gt_err_set(err, "out of memory") : 0;
}

static int load_devices(gt_rep_run *r, sqlite3 *h, gt_err *err)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(h,
                           "SELECT host, backend, driver_profile, name, kind, driver,"
                           " driver_version, extra, memory FROM devices WHERE run_id = ?"
                           " ORDER BY backend, driver_profile, name, host",
                           -1, &st, NULL) != SQLITE_OK)
        return sqlfail(h, err, "devices");
    sqlite3_bind_int64(st, 1, r->id);
    int cap = 0, rc;
    bool oom = false;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (r->n_devices == cap) {
            gt_rep_device *nd = realloc(r->devices, (size_t)(cap = cap * 2 + 8) * sizeof *nd);
            if (!nd) {
                oom = true;
                break;
            }
            r->devices = nd;
        }
        gt_rep_device *d = &r->devices[r->n_devices++];
        d->host = gt_report_dup_col(r, st, 0, &oom);
        d->backend = gt_report_dup_col(r, st, 1, &oom);
        d->driver_profile = gt_report_dup_col(r, st, 2, &oom);
        d->name = gt_report_dup_col(r, st, 3, &oom);
        d->kind = gt_report_dup_col(r, st, 4, &oom);
        d->driver = gt_report_dup_col(r, st, 5, &oom);
        d->driver_version = gt_report_dup_col(r, st, 6, &oom);
        d->extra = gt_report_dup_col(r, st, 7, &oom);
        d->memory = sqlite3_column_type(st, 8) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 8);
    }
    sqlite3_finalize(st);
    if (oom)
        return gt_err_set(err, "out of memory");
    return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : sqlfail(h, err, "devices");
}

static int load_parts(gt_rep_run *r, sqlite3 *h, gt_err *err)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(h,
                           "SELECT host, tool_version, git_sha, argv, status, shard_index,"
                           " shard_count, started_at, finished_at FROM run_parts WHERE run_id = ?"
                           " ORDER BY started_at, id",
                           -1, &st, NULL) != SQLITE_OK)
        return sqlfail(h, err, "parts");
    sqlite3_bind_int64(st, 1, r->id);
    int cap = 0, rc;
    bool oom = false;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (r->n_parts == cap) {
            gt_rep_part *np = realloc(r->parts, (size_t)(cap = cap * 2 + 4) * sizeof *np);
            if (!np) {
                oom = true;
                break;
            }
            r->parts = np;
        }
        gt_rep_part *p = &r->parts[r->n_parts++];
        p->host = gt_report_dup_col(r, st, 0, &oom);
        p->tool_version = gt_report_dup_col(r, st, 1, &oom);
        p->git_sha = gt_report_dup_col(r, st, 2, &oom);
        p->argv = gt_report_dup_col(r, st, 3, &oom);
        p->status = gt_report_dup_col(r, st, 4, &oom);
        p->shard_index = sqlite3_column_int(st, 5);
        p->shard_count = sqlite3_column_int(st, 6);
        p->started_at = sqlite3_column_double(st, 7);
        p->finished_at = sqlite3_column_double(st, 8);
    }
    sqlite3_finalize(st);
    if (oom)
        return gt_err_set(err, "out of memory");
    return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : sqlfail(h, err, "parts");
}

static int load_cells(gt_rep_run *r, sqlite3 *h, gt_err *err)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(
            h,
            "SELECT c.id, c.idx, c.cell_id, c.model, c.quant, c.backend, c.driver, c.expected,"
            " c.expect_reason, c.status, c.raw_status, c.reason, c.host, c.log, c.required,"
            " c.attempts, c.started_at, c.finished_at, c.duration_s,"
            " CASE WHEN d.id IS NULL THEN '' ELSE d.name ||"
            "  CASE WHEN d.driver != '' THEN ' (' || d.driver ||"
            "   CASE WHEN d.driver_version != '' THEN ' ' || d.driver_version ELSE '' END"
            "   || ')' ELSE '' END END"
            " , COALESCE(c.model_sha256, ''), COALESCE(c.artifact_sha256, ''),"
            " c.settings, CASE WHEN c.settings = '' THEN c.driver"
            "  ELSE c.driver || '/' || c.settings END"
            " FROM cells c LEFT JOIN devices d ON d.id = c.device_id"
            " WHERE c.run_id = ? ORDER BY c.idx, c.id",
            -1, &st, NULL) != SQLITE_OK)
        return sqlfail(h, err, "cells");
    sqlite3_bind_int64(st, 1, r->id);
    int cap = 0, rc;
    bool oom = false;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (r->n == cap) {
            gt_rep_cell *nc = realloc(r->cells, (size_t)(cap = cap * 2 + 64) * sizeof *nc);
            if (!nc) {
                oom = true;
                break;
            }
            r->cells = nc;
        }
        gt_rep_cell *c = &r->cells[r->n++];
        memset(c, 0, sizeof *c);
        c->id = sqlite3_column_int64(st, 0);
        c->idx = sqlite3_column_int(st, 1);
        c->cell_id = gt_report_dup_col(r, st, 2, &oom);
        c->model = gt_report_dup_col(r, st, 3, &oom);
        c->quant = gt_report_dup_col(r, st, 4, &oom);
        c->backend = gt_report_dup_col(r, st, 5, &oom);
        c->driver = gt_report_dup_col(r, st, 6, &oom);
        c->expected = gt_report_dup_col(r, st, 7, &oom);
        c->expect_reason = gt_report_dup_col(r, st, 8, &oom);
        c->status = gt_report_dup_col(r, st, 9, &oom);
        c->raw_status = gt_report_dup_col(r, st, 10, &oom);
        c->reason = gt_report_dup_col(r, st, 11, &oom);
        c->host = gt_report_dup_col(r, st, 12, &oom);
        c->log = gt_report_dup_col(r, st, 13, &oom);
        c->required = sqlite3_column_int(st, 14) != 0;
        c->attempts = sqlite3_column_int(st, 15);
        c->started_at = sqlite3_column_double(st, 16);
        c->finished_at = sqlite3_column_double(st, 17);
        c->duration_s = sqlite3_column_double(st, 18);
        c->device = gt_report_dup_col(r, st, 19, &oom);
        c->model_sha256 = gt_report_dup_col(r, st, 20, &oom);
        c->artifact_sha256 = gt_report_dup_col(r, st, 21, &oom);
        c->settings = gt_report_dup_col(r, st, 22, &oom);
        c->column = gt_report_dup_col(r, st, 23, &oom);
        c->artifact = -1;
        gt_status s;
        if (gt_status_from_name(c->status, &s) == 0)
            r->counts[s]++;
    }
    sqlite3_finalize(st);
    if (oom)
        return gt_err_set(err, "out of memory");
    return rc == SQLITE_DONE ? 0 : sqlfail(h, err, "cells");
}

typedef struct id_ix {
    int64_t id;
    int ix;
} id_ix;

static int cmp_id(const void *a, const void *b)
{
    int64_t x = ((const id_ix *)a)->id, y = ((const id_ix *)b)->id;
    return x < y ? -1 : x > y;
}

static int find_ix(const id_ix *map, int n, int64_t id)
{
    id_ix key = {id, 0};
    const id_ix *p = bsearch(&key, map, (size_t)n, sizeof *map, cmp_id);
    return p ? p->ix : -1;
}

/* Checks and metrics come ordered by cells.id while r->cells is in idx
 * order, so each row is placed through an id -> index map; rows arrive
 * grouped by cell, so a cell's rows are contiguous in the big array. */
static int load_rows(gt_rep_run *r, sqlite3 *h, const id_ix *map, bool metrics, gt_err *err)
{
    sqlite3_stmt *st;
    const char *sql =
        metrics ? "SELECT m.cell, m.suite, m.name, m.unit, m.comparator, m.verdict, m.value,"
                  " m.tolerance, m.better, m.regress FROM metrics m JOIN cells c ON c.id = m.cell"
                  " WHERE c.run_id = ? ORDER BY m.cell, m.seq, m.id"
                : "SELECT r.cell, r.suite, r.check_name, r.status, r.message FROM results r"
                  " JOIN cells c ON c.id = r.cell WHERE c.run_id = ? ORDER BY r.cell, r.seq, r.id";
    if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) != SQLITE_OK)
        return sqlfail(h, err, metrics ? "metrics" : "checks");
    sqlite3_bind_int64(st, 1, r->id);
    size_t esz = metrics ? sizeof(gt_rep_metric) : sizeof(gt_rep_check);
    char *all = NULL;
    int *owner = NULL;
    int n = 0, cap = 0, rc;
    bool oom = false;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int ix = find_ix(map, r->n, sqlite3_column_int64(st, 0));
        if (ix < 0)
            continue;
        if (n == cap) {
            cap = cap * 2 + 256;
            char *na = realloc(all, (size_t)cap * esz);
            int *no = na ? realloc(owner, (size_t)cap * sizeof *no) : NULL;
            if (na)
                all = na;
            if (!no) {
                oom = true;
                break;
            }
            owner = no;
        }
        owner[n] = ix;
        if (metrics) {
            gt_rep_metric *m = (gt_rep_metric *)(all + (size_t)n * esz);
            m->suite = gt_report_dup_col(r, st, 1, &oom);
            m->name = gt_report_dup_col(r, st, 2, &oom);
            m->unit = gt_report_dup_col(r, st, 3, &oom);
            m->comparator = gt_report_dup_col(r, st, 4, &oom);
            m->verdict = gt_report_dup_col(r, st, 5, &oom);
            m->has_value = sqlite3_column_type(st, 6) != SQLITE_NULL;
            m->value = m->has_value ? sqlite3_column_double(st, 6) : NAN;
            m->has_tol = sqlite3_column_type(st, 7) != SQLITE_NULL && m->comparator[0];
            m->tolerance = m->has_tol ? sqlite3_column_double(st, 7) : NAN;
            m->better = sqlite3_column_int(st, 8);
            m->regress = sqlite3_column_int(st, 9);
            m->noted = false; /* load_notes sets it */
        } else {
            gt_rep_check *k = (gt_rep_check *)(all + (size_t)n * esz);
            k->suite = gt_report_dup_col(r, st, 1, &oom);
            k->name = gt_report_dup_col(r, st, 2, &oom);
            k->status = gt_report_dup_col(r, st, 3, &oom);
            k->message = gt_report_dup_col(r, st, 4, &oom);
        }
        n++;
    }
    sqlite3_finalize(st);
    if (oom || (rc != SQLITE_DONE && rc != SQLITE_ROW)) {
        free(all);
        free(owner);
        return oom ? gt_err_set(err, "out of memory") : sqlfail(h, err, "rows");
    }
    for (int i = 0; i < n;) {
        int j = i;
        while (j < n && owner[j] == owner[i])
            j++;
        gt_rep_cell *c = &r->cells[owner[i]];
        if (metrics) {
            c->metrics = (gt_rep_metric *)(all + (size_t)i * esz);
            c->n_metrics = j - i;
        } else {
            c->checks = (gt_rep_check *)(all + (size_t)i * esz);
            c->n_checks = j - i;
        }
        i = j;
    }
    free(owner);
    if (metrics)
        r->metrics_block = all;
    else
        r->checks_block = all;
    return 0;
}

static void run_gate(gt_rep_run *r, gt_db *db, gt_db *base, int64_t base_run_id)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    gt_err gerr = {{0}};
    bool oom = false;
    if (!mem) {
        r->gate = -1;
        r->gate_text = "the gate was not evaluated (out of memory)";
        return;
    }
    int rc = gt_gate_eval(db, r->id, base, base ? base_run_id : -1, mem, &gerr);
    fclose(mem);
    r->gate = rc < 0 ? -1 : rc;
    if (rc < 0) {
        char line[1200];
        snprintf(line, sizeof line, "the gate could not be evaluated: %s", gerr.msg);
        r->gate_text = gt_report_strdup(r, line, &oom);
    } else {
        r->gate_text = gt_report_strdup(r, buf ? buf : "", &oom);
    }
    free(buf);
}

static void mark_noted(void *ctx, const char *cell_id, const char *metric)
{
    const gt_rep_cell *c = gt_report_find(ctx, cell_id);
    const char *dot = strchr(metric, '.');
    if (!c || !dot)
        return;
    size_t ls = (size_t)(dot - metric);
    for (int j = 0; j < c->n_metrics; j++) {
        gt_rep_metric *m = &c->metrics[j];
        if (strlen(m->suite) == ls && strncmp(m->suite, metric, ls) == 0 &&
            strcmp(m->name, dot + 1) == 0)
            m->noted = true;
    }
}

/* Which bounds were written loose on purpose, from the run's stored matrix:
 * headroom does not flag those. A matrix that cannot be read again leaves
 * every bound unnoted and says why. */
static int load_notes(gt_rep_run *r, gt_db *db, gt_err *err)
{
    gt_err nerr = {{0}};
    int rc = gt_db_loose_noted(db, r->id, mark_noted, r, &nerr);
    if (rc < 0)
        return gt_err_set(err, "%s", nerr.msg);
    bool oom = false;
    if (rc > 0)
        r->notes_unread = gt_report_strdup(r, nerr.msg, &oom);
    return oom ? gt_err_set(err, "out of memory") : 0;
}

int gt_report_load(gt_db *db, int64_t run_id, bool gate, gt_db *base, int64_t base_run_id,
                   gt_rep_run **out, gt_err *err)
{
    *out = NULL;
    gt_rep_run *r = calloc(1, sizeof *r);
    if (!r)
        return gt_err_set(err, "out of memory");
    r->group_by = -1;
    sqlite3 *h = gt_db_sqlite(db);
    bool oom = false;
    r->gate = -1;
    r->gate_text = "";
    r->db_path = gt_report_strdup(r, gt_db_path(db), &oom);
    id_ix *map = NULL;
    if (load_run_row(r, h, run_id, err) != 0 || load_devices(r, h, err) != 0 ||
        load_parts(r, h, err) != 0 || load_cells(r, h, err) != 0)
        goto fail;
    map = malloc(sizeof *map * (size_t)(r->n ? r->n : 1));
    if (!map) {
        gt_err_set(err, "out of memory");
        goto fail;
    }
    for (int i = 0; i < r->n; i++)
        map[i] = (id_ix){r->cells[i].id, i};
    qsort(map, (size_t)r->n, sizeof *map, cmp_id);
    if (load_rows(r, h, map, false, err) != 0 || load_rows(r, h, map, true, err) != 0 ||
        gt_report_series(r, h, err) != 0 || gt_report_provenance(r, h, err) != 0 ||
        load_notes(r, db, err) != 0)
        goto fail;
    free(map);
    if (gate)
        run_gate(r, db, base, base_run_id);
    *out = r;
    return 0;
fail:
    free(map);
    gt_err_wrap(err, "%s", gt_db_path(db));
    gt_report_free(r);
    return -1;
}

void gt_report_free(gt_rep_run *r)
{
    if (!r)
        return;
    free(r->cells);
    free(r->devices);
    free(r->parts);
    free(r->artifacts);
    gt_report_history_free(r->hist);
    free(r->checks_block);
    free(r->metrics_block);
    free(r->points_block);
    gt_report_arena_free(r);
    free(r);
}

const gt_rep_cell *gt_report_find(const gt_rep_run *r, const char *cell_id)
{
    for (int i = 0; i < r->n; i++)
        if (strcmp(r->cells[i].cell_id, cell_id) == 0)
            return &r->cells[i];
    return NULL;
}
