/* loose_notes.c: which bounds of a recorded run were written loose on
 * purpose (see db.h, gt_db_loose_noted).
 *
 * The metrics table keeps each bound's value and comparator, not its note,
 * so `gauntlet db headroom` would call every deliberately loose bound (load
 * time, RSS; note "loose: why") LOOSE like a forgotten one. The run keeps
 * the matrix's text and tier, which is all it takes to resolve each cell's
 * tolerances again exactly as the run did (gt_matrix_expand) and read their
 * notes; nothing about this machine is consulted (gt_matrix_parse_stored). */
#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "db_internal.h"
#include "matrix.h"
#include "base.h"

static int stored_texts(gt_db *db, int64_t run_id, char **text, char **tier, gt_err *err)
{
    sqlite3_stmt *st;
    *text = *tier = NULL;
    if (sqlite3_prepare_v2(db->h, "SELECT matrix_json, tier FROM runs WHERE id = ?", -1, &st,
                           NULL) != SQLITE_OK)
        return gt_dbi_sqlerr(db, err, "reading a run");
    sqlite3_bind_int64(st, 1, run_id);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        const char *m = (const char *)sqlite3_column_text(st, 0);
        const char *t = (const char *)sqlite3_column_text(st, 1);
        *text = strdup(m ? m : "");
        *tier = strdup(t ? t : "");
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW)
        return gt_err_set(err, "%s: run %lld not found", db->path, (long long)run_id);
    if (!*text || !*tier) {
        free(*text);
        free(*tier);
        return gt_err_set(err, "out of memory");
    }
    return 0;
}

int gt_db_loose_noted(gt_db *db, int64_t run_id, gt_db_noted_fn fn, void *ctx, gt_err *err)
{
    char *text, *tier;
    if (stored_texts(db, run_id, &text, &tier, err) != 0)
        return -1;
    gt_matrix *m = NULL;
    gt_cell *cells = NULL;
    int n = 0, rc = 1;
    const gt_mx_tier *t = NULL;
    if (gt_matrix_parse_stored("the run's stored matrix", text, strlen(text), &m, err) == 0 &&
        (t = gt_matrix_tier(m, tier, err)) && gt_matrix_expand(m, t, &cells, &n, err) == 0) {
        rc = 0;
        for (int i = 0; i < n; i++)
            for (const cJSON *s = cells[i].tolerances->child; s; s = s->next)
                if (gt_tol_loose_noted(s))
                    fn(ctx, cells[i].id, s->string);
    }
    gt_cells_free(cells, n);
    gt_matrix_free(m);
    free(text);
    free(tier);
    return rc;
}
