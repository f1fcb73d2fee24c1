/* gate.c: see gate.h. */
#include "gate.h"

#include <fnmatch.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "matrix.h"
#include "base.h"

/* Skip categories allowed when the gate names none: what a machine may
 * lack without the run saying anything about the software. */
static const char *const DEFAULT_SKIPS = "[\"no device\", \"unsupported\"]";

typedef struct policy {
    unsigned allowed;
    double perf_pct;       /* <0 off */
    cJSON *skips;          /* allowed_skips: "category" or {"category", axis globs} */
    cJSON *matrix;         /* the run's matrix: models[]/backends[] "required" */
    cJSON *must;           /* gate.must_pass: patterns of cells that must pass */
    char skip_names[200];  /* for messages */
} policy;

static void free_policy(policy *p)
{
    cJSON_Delete(p->skips);
    cJSON_Delete(p->matrix);
    cJSON_Delete(p->must);
}

static void list_skips(policy *p)
{
    p->skip_names[0] = '\0';
    const cJSON *e;
    cJSON_ArrayForEach(e, p->skips)
    {
        const cJSON *c = cJSON_IsString(e) ? e : cJSON_GetObjectItemCaseSensitive(e, "category");
        size_t len = strlen(p->skip_names);
        if (cJSON_IsString(c))
            snprintf(p->skip_names + len, sizeof p->skip_names - len, "%s%s%s", len ? ", " : "",
                     c->valuestring, cJSON_IsString(e) ? "" : " (some cells)");
    }
    if (!p->skip_names[0])
        snprintf(p->skip_names, sizeof p->skip_names, "none");
}

static int read_policy(gt_db *db, int64_t run_id, policy *p, gt_err *err)
{
    p->allowed = GT_ST_BIT(GT_ST_PASS) | GT_ST_BIT(GT_ST_XFAIL) | GT_ST_BIT(GT_ST_SKIP);
    p->perf_pct = -1;
    p->skips = p->matrix = p->must = NULL;
    char *mj, *gj;
    if (gt_db_run_texts(db, run_id, &mj, &gj, err) != 0)
        return -1;
    p->matrix = mj ? cJSON_Parse(mj) : NULL;
    free(mj);
    cJSON *g = gj ? cJSON_Parse(gj) : NULL;
    free(gj);
    const cJSON *skips = cJSON_GetObjectItemCaseSensitive(g, "allowed_skips");
    p->skips = cJSON_IsArray(skips) ? cJSON_Duplicate(skips, true) : cJSON_Parse(DEFAULT_SKIPS);
    list_skips(p);
    const cJSON *must = cJSON_GetObjectItemCaseSensitive(g, "must_pass");
    p->must = cJSON_IsArray(must) ? cJSON_Duplicate(must, true) : NULL;
    const cJSON *allowed = cJSON_GetObjectItemCaseSensitive(g, "allowed");
    if (cJSON_IsArray(allowed)) {
        p->allowed = 0;
        const cJSON *a;
        cJSON_ArrayForEach(a, allowed)
        {
            gt_status st;
            if (cJSON_IsString(a) && gt_status_from_name(a->valuestring, &st) == 0)
                p->allowed |= GT_ST_BIT(st);
        }
    }
    const cJSON *pct = cJSON_GetObjectItemCaseSensitive(g, "perf_regression_pct");
    if (cJSON_IsNumber(pct))
        p->perf_pct = pct->valuedouble;
    cJSON_Delete(g);
    return 0;
}

/* The parts of a cell id model/quant/backend/driver[/settings], in buf
 * ("" for a part the id lacks). */
static void split_id(const char *id, char *buf, size_t cap, const char *parts[5])
{
    snprintf(buf, cap, "%s", id);
    char *save = NULL, *t = strtok_r(buf, "/", &save);
    for (int i = 0; i < 5; i++, t = t ? strtok_r(NULL, "/", &save) : NULL)
        parts[i] = t ? t : "";
}

/* A glob on the whole id; one written for a four-part id also matches
 * that cell's settings variants (as gt_rule_match does). */
static bool id_glob(const char *glob, const char *id)
{
    if (fnmatch(glob, id, 0) == 0)
        return true;
    char four[GT_CELL_ID_MAX];
    snprintf(four, sizeof four, "%s", id);
    char *s = four;
    for (int slashes = 0; *s && slashes < 4; s++)
        slashes += *s == '/';
    if (!*s)
        return false;
    s[-1] = '\0';
    return fnmatch(glob, four, 0) == 0;
}

static bool glob_ok(const cJSON *o, const char *key, const char *value)
{
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(o, key);
    if (cJSON_IsString(g) && strcmp(key, "cell") == 0)
        return id_glob(g->valuestring, value);
    return !cJSON_IsString(g) || fnmatch(g->valuestring, value, 0) == 0;
}

/* Whether a skip reason's category (the words before its first ':') is one
 * the policy allows for this cell. */
static bool skip_allowed(const policy *p, const char *id, const char *reason)
{
    if (strncmp(reason, GT_SKIP_MATRIX, strlen(GT_SKIP_MATRIX)) == 0)
        return true;
    size_t n = strcspn(reason, ":");
    if (!reason[n])
        return false; /* no category: nothing allows it */
    char buf[GT_CELL_ID_MAX];
    const char *parts[5];
    split_id(id, buf, sizeof buf, parts);
    const cJSON *e;
    cJSON_ArrayForEach(e, p->skips)
    {
        const cJSON *c = cJSON_IsString(e) ? e : cJSON_GetObjectItemCaseSensitive(e, "category");
        if (!cJSON_IsString(c) || strlen(c->valuestring) != n ||
            strncmp(c->valuestring, reason, n) != 0)
            continue;
        if (cJSON_IsString(e) ||
            (glob_ok(e, "model", parts[0]) && glob_ok(e, "quant", parts[1]) &&
             glob_ok(e, "backend", parts[2]) && glob_ok(e, "driver", parts[3]) &&
             glob_ok(e, "settings", parts[4]) && glob_ok(e, "cell", id)))
            return true;
    }
    return false;
}

/* Whether the matrix marks the cell's model or backend "required": true, or
 * a gate.must_pass pattern matches it (it must pass, whatever the allowed
 * statuses); *why names which. */
static bool must_pass(const policy *p, const char *id, char *why, size_t cap)
{
    char buf[GT_CELL_ID_MAX];
    const char *parts[5];
    split_id(id, buf, sizeof buf, parts);
    const cJSON *r;
    int i = 0;
    cJSON_ArrayForEach(r, p->must)
    {
        if (cJSON_IsString(r) ? id_glob(r->valuestring, id)
                              : cJSON_IsObject(r) && glob_ok(r, "model", parts[0]) &&
                                    glob_ok(r, "quant", parts[1]) &&
                                    glob_ok(r, "backend", parts[2]) &&
                                    glob_ok(r, "driver", parts[3]) &&
                                    glob_ok(r, "settings", parts[4]) && glob_ok(r, "cell", id)) {
            snprintf(why, cap, "gate.must_pass[%d] matches it: it must pass", i);
            return true;
        }
        i++;
    }
    static const char *const AXES[] = {"models", "backends"};
    static const int PART[] = {0, 2};
    for (int a = 0; a < 2; a++) {
        const cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(p->matrix, AXES[a]))
        {
            const cJSON *eid = cJSON_GetObjectItemCaseSensitive(e, "id");
            if (cJSON_IsString(eid) && strcmp(eid->valuestring, parts[PART[a]]) == 0 &&
                cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "required"))) {
                snprintf(why, cap, "%s %s is required: its cells must pass",
                         a ? "backend" : "model", eid->valuestring);
                return true;
            }
        }
    }
    return false;
}

static void allowed_list(unsigned mask, char *out, size_t cap)
{
    out[0] = '\0';
    for (int s = GT_ST_PASS; s < GT_ST_COUNT; s++)
        if (mask & GT_ST_BIT(s)) {
            size_t len = strlen(out);
            snprintf(out + len, cap - len, "%s%s", len ? ", " : "", gt_status_name(s));
        }
}

static const char *col(sqlite3_stmt *st, int i)
{
    const unsigned char *s = sqlite3_column_text(st, i);
    return s ? (const char *)s : "";
}

/* Prints the failing checks and out-of-tolerance metrics of one cell. */
static void explain(gt_db *db, int64_t cell, FILE *out)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(gt_db_sqlite(db),
                           "SELECT suite, check_name, status, message FROM results WHERE cell = ?"
                           " AND status IN ('fail','error') ORDER BY seq",
                           -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, cell);
        while (sqlite3_step(st) == SQLITE_ROW)
            fprintf(out, "    check  %s.%s: %s: %s\n", col(st, 0), col(st, 1), col(st, 2),
                    col(st, 3));
        sqlite3_finalize(st);
    }
    if (sqlite3_prepare_v2(gt_db_sqlite(db),
                           "SELECT suite, name, value, unit, comparator, tolerance FROM metrics"
                           " WHERE cell = ? AND verdict = 'fail' ORDER BY seq",
                           -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, cell);
        while (sqlite3_step(st) == SQLITE_ROW)
            fprintf(out, "    metric %s.%s = %.6g %s, tolerance %s %.6g\n", col(st, 0),
                    col(st, 1), sqlite3_column_double(st, 2), col(st, 3), col(st, 4),
                    sqlite3_column_double(st, 5));
        sqlite3_finalize(st);
    }
}

/* Regressions of one cell's regress-flagged metrics against the baseline. */
static int regressions(gt_db *db, int64_t cell, const char *cell_id, gt_db *base,
                       int64_t base_run, double pct, bool required, FILE *out)
{
    sqlite3_stmt *cur, *bst;
    int n = 0;
    if (sqlite3_prepare_v2(gt_db_sqlite(db),
                           "SELECT suite, name, value, unit, better FROM metrics WHERE cell = ?"
                           " AND regress = 1 AND better != 0 AND value IS NOT NULL",
                           -1, &cur, NULL) != SQLITE_OK)
        return 0;
    if (sqlite3_prepare_v2(gt_db_sqlite(base),
                           "SELECT m.value FROM metrics m JOIN cells c ON m.cell = c.id"
                           " WHERE c.run_id = ? AND c.cell_id = ? AND m.suite = ? AND m.name = ?"
                           " AND m.value IS NOT NULL",
                           -1, &bst, NULL) != SQLITE_OK) {
        sqlite3_finalize(cur);
        return 0;
    }
    sqlite3_bind_int64(cur, 1, cell);
    while (sqlite3_step(cur) == SQLITE_ROW) {
        double v = sqlite3_column_double(cur, 2);
        int better = sqlite3_column_int(cur, 4);
        sqlite3_reset(bst);
        sqlite3_bind_int64(bst, 1, base_run);
        sqlite3_bind_text(bst, 2, cell_id, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(bst, 3, col(cur, 0), -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(bst, 4, col(cur, 1), -1, SQLITE_TRANSIENT);
        if (sqlite3_step(bst) != SQLITE_ROW)
            continue;
        double b = sqlite3_column_double(bst, 0);
        if (b == 0)
            continue;
        double change = (v - b) / fabs(b) * 100.0; /* + = higher */
        double worse = better > 0 ? -change : change;
        if (worse > pct) {
            fprintf(out, "%s %s: %s.%s = %.6g %s, baseline %.6g (%.1f%% worse, limit %.1f%%)\n",
                    required ? "REGRESSION" : "regression (optional cell)", cell_id, col(cur, 0),
                    col(cur, 1), v, col(cur, 3), b, worse, pct);
            n += required;
        }
    }
    sqlite3_finalize(cur);
    sqlite3_finalize(bst);
    return n;
}

/* Cells of shard k (1-based) of n among a tier's n_cells: those with
 * index % n == k - 1 (cmd_qualify.c's split). */
static int shard_cells(int n_cells, int k, int n)
{
    return n_cells / n + (k - 1 < n_cells % n ? 1 : 0);
}

/* One integer from sql with up to three int parameters (?1..?3); -1 when
 * it cannot be read. */
static int64_t run_int(gt_db *db, const char *sql, int64_t a, int64_t b, int64_t c)
{
    sqlite3_stmt *st;
    int64_t v = -1;
    if (sqlite3_prepare_v2(gt_db_sqlite(db), sql, -1, &st, NULL) == SQLITE_OK) {
        const int64_t args[3] = {a, b, c};
        for (int i = 0; i < sqlite3_bind_parameter_count(st) && i < 3; i++)
            sqlite3_bind_int64(st, i + 1, args[i]);
        if (sqlite3_step(st) == SQLITE_ROW)
            v = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
    return v;
}

/* Prints, capped, the expansion indexes of shard k/n (all cells for n = 1)
 * that have no row in the run. */
static void absent_indexes(gt_db *db, int64_t run_id, int n_cells, int k, int n, FILE *out)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(gt_db_sqlite(db), "SELECT 1 FROM cells WHERE run_id = ? AND idx = ?",
                           -1, &st, NULL) != SQLITE_OK)
        return;
    int shown = 0, more = 0;
    for (int i = k - 1; i < n_cells; i += n) {
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, run_id);
        sqlite3_bind_int(st, 2, i);
        if (sqlite3_step(st) == SQLITE_ROW)
            continue;
        if (shown < 16)
            fprintf(out, "%s%d", shown++ ? ", " : "", i);
        else
            more++;
    }
    sqlite3_finalize(st);
    if (more)
        fprintf(out, " and %d more", more);
}

/* Whether the run holds every cell it was planned with. Only a merged run
 * (run_merges has rows) is held to that: it stands for the whole run, so
 * a shard whose database never arrived leaves its cells out and must fail
 * the gate. A database that was not merged is one invocation's (a shard,
 * or an unsharded run whose cells were all added as pending) and is judged
 * on the cells it has. Prints a FAIL line per incomplete shard and returns
 * how many cells never ran; *note receives the summary's remark. */
static int coverage(gt_db *db, int64_t run_id, FILE *out, char *note, size_t cap,
                    bool *shard_alone)
{
    note[0] = '\0';
    *shard_alone = false;
    int64_t n_cells = run_int(db, "SELECT n_cells FROM runs WHERE id = ?", run_id, 0, 0);
    int64_t shards = run_int(db, "SELECT COALESCE(MAX(shard_count), 1) FROM run_parts"
                                 " WHERE run_id = ?", run_id, 0, 0);
    int64_t merged = run_int(db, "SELECT COUNT(*) FROM run_merges WHERE run_id = ?", run_id, 0, 0);
    if (n_cells <= 0 || shards < 1 || shards > 1000000)
        return 0;
    int n = (int)shards;
    if (merged <= 0) {
        int64_t k = run_int(db, "SELECT MIN(shard_index) FROM run_parts WHERE run_id = ?"
                                " AND shard_count > 1", run_id, 0, 0);
        int64_t k2 = run_int(db, "SELECT MAX(shard_index) FROM run_parts WHERE run_id = ?"
                                 " AND shard_count > 1", run_id, 0, 0);
        *shard_alone = n > 1 && k >= 1 && k == k2;
        if (*shard_alone)
            snprintf(note, cap, "; shard %d/%d alone, judged on its own %d of the run's %d"
                                " cells (merge the shards to gate the whole run)",
                     (int)k, n, shard_cells((int)n_cells, (int)k, n), (int)n_cells);
        return 0;
    }
    int absent = 0, missing_shards = 0;
    char which[160] = "";
    for (int k = 1; k <= n; k++) {
        int want = shard_cells((int)n_cells, k, n);
        int64_t have = run_int(db, "SELECT COUNT(*) FROM cells WHERE run_id = ?1 AND idx >= 0"
                                   " AND idx < (SELECT n_cells FROM runs WHERE id = ?1)"
                                   " AND idx % ?2 = ?3", run_id, n, k - 1);
        if (have >= want)
            continue;
        have = have < 0 ? 0 : have;
        absent += want - (int)have;
        bool part = run_int(db, "SELECT COUNT(*) FROM run_parts WHERE run_id = ?1"
                                " AND shard_index = ?2 AND shard_count = ?3", run_id, k, n) > 0;
        if (n == 1)
            fprintf(out, "FAIL run: %d of its %d cells never ran (not in the database;"
                         " expansion indexes ",
                    want - (int)have, want);
        else if (!part && have == 0)
            fprintf(out, "FAIL shard %d/%d missing: no database of it was merged; its %d"
                         " cells never ran (expansion indexes ",
                    k, n, want);
        else
            fprintf(out, "FAIL shard %d/%d incomplete: %d of its %d cells never ran"
                         " (expansion indexes ",
                    k, n, want - (int)have, want);
        absent_indexes(db, run_id, (int)n_cells, k, n, out);
        fprintf(out, ")\n");
        if (n > 1) {
            size_t len = strlen(which);
            if (len < sizeof which - 16)
                snprintf(which + len, sizeof which - len, "%s%d/%d", missing_shards ? ", " : "",
                         k, n);
            missing_shards++;
        }
    }
    if (absent && missing_shards)
        snprintf(note, cap, "; %d cells of the run's %d never ran: shard%s %s", absent,
                 (int)n_cells, missing_shards > 1 ? "s" : "", which);
    else if (absent)
        snprintf(note, cap, "; %d cells of the run's %d never ran", absent, (int)n_cells);
    return absent;
}

int gt_gate_eval(gt_db *db, int64_t run_id, gt_db *base_db, int64_t base_run_id, FILE *out,
                 gt_err *err)
{
    policy p;
    if (read_policy(db, run_id, &p, err) != 0)
        return -1;
    char cover[400];
    bool shard_alone;
    int absent = coverage(db, run_id, out, cover, sizeof cover, &shard_alone);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(gt_db_sqlite(db),
                           "SELECT id, cell_id, status, required, COALESCE(reason, '')"
                           " FROM cells WHERE run_id = ? ORDER BY idx",
                           -1, &st, NULL) != SQLITE_OK) {
        free_policy(&p);
        return gt_err_set(err, "%s: %s", gt_db_path(db), sqlite3_errmsg(gt_db_sqlite(db)));
    }
    sqlite3_bind_int64(st, 1, run_id);
    int counts[GT_ST_COUNT] = {0}, n = 0, bad = 0, regress = 0, optional_bad = 0;
    char first_skip[GT_CELL_ID_MAX + 400] = "";
    char allowed[200];
    allowed_list(p.allowed, allowed, sizeof allowed);
    while (sqlite3_step(st) == SQLITE_ROW) {
        n++;
        int64_t cell = sqlite3_column_int64(st, 0);
        const char *id = col(st, 1);
        gt_status s = GT_ST_PENDING;
        gt_status_from_name(col(st, 2), &s);
        bool required = sqlite3_column_int(st, 3) != 0;
        const char *reason = col(st, 4);
        counts[s]++;
        if (s == GT_ST_SKIP && !first_skip[0])
            snprintf(first_skip, sizeof first_skip, "%s: %.380s", id, reason);
        char must[200];
        if (!strncmp(reason, GT_MERGE_CONFLICT, strlen(GT_MERGE_CONFLICT))) {
            /* Shards disagree: whatever the policy allows, the run did not
             * give one answer for this cell, required or not. */
            bad++;
            fprintf(out, "FAIL %s: %s (merged shards disagree)\n", id, reason);
            explain(db, cell, out);
        } else if (s != GT_ST_PASS && must_pass(&p, id, must, sizeof must)) {
            bad++;
            fprintf(out, "FAIL %s: %s%s%s (%s)\n", id,
                    s == GT_ST_PENDING ? "not run" : gt_status_name(s), reason[0] ? ": " : "",
                    reason, must);
            explain(db, cell, out);
        } else if (s == GT_ST_SKIP && (p.allowed & GT_ST_BIT(s)) &&
                   !skip_allowed(&p, id, reason)) {
            if (required) {
                bad++;
                fprintf(out, "FAIL %s: skip: %s (this skip's category is not in allowed_skips:"
                             " %s)\n", id, reason, p.skip_names);
            } else {
                optional_bad++;
            }
        } else if (!(p.allowed & GT_ST_BIT(s))) {
            if (required) {
                bad++;
                fprintf(out, "FAIL %s: %s%s%s (allowed: %s)\n", id,
                        s == GT_ST_PENDING ? "not run" : gt_status_name(s),
                        col(st, 4)[0] ? ": " : "", col(st, 4), allowed);
                explain(db, cell, out);
            } else {
                optional_bad++;
            }
        }
        if (base_db && base_run_id > 0 && p.perf_pct >= 0 &&
            (s == GT_ST_PASS || s == GT_ST_XPASS))
            regress += regressions(db, cell, id, base_db, base_run_id, p.perf_pct, required, out);
    }
    sqlite3_finalize(st);
    /* Zero coverage is a failure: a run none of whose cells ran (each one
     * skipped, or none at all) qualified nothing, whatever skips the
     * policy allows. Not so one index shard judged alone: which cells land
     * in it is arithmetic (all the cuda cells of a matrix may), and the
     * merged run's gate applies the rule to the whole run. A --backends
     * slice is a choice, and is held to it. */
    const int ran = n - counts[GT_ST_SKIP] - counts[GT_ST_PENDING];
    const bool zero = ran <= 0 && !(shard_alone && n > 0);
    if (ran <= 0 && !zero)
        fprintf(out, "note: 0 cells ran in this shard (%d skipped); the merged run's gate judges"
                     " the run as a whole\n", n);
    if (zero) {
        if (n == 0)
            fprintf(out, "FAIL run: 0 cells ran: the run has no cell\n");
        else if (counts[GT_ST_SKIP] == n)
            fprintf(out, "FAIL run: 0 cells ran: all %d cells were skipped (first: %s)\n", n,
                    first_skip);
        else
            fprintf(out, "FAIL run: 0 cells ran: %d of its %d cells were skipped, the rest never"
                         " finished\n", counts[GT_ST_SKIP], n);
    }
    char summary[400] = "";
    for (int s = 0; s < GT_ST_COUNT; s++)
        if (counts[s]) {
            size_t len = strlen(summary);
            snprintf(summary + len, sizeof summary - len, "%s%d %s", len ? ", " : "", counts[s],
                     gt_status_name(s));
        }
    bool pass = bad == 0 && regress == 0 && absent == 0 && !zero;
    fprintf(out, "gate: %s (%d cells: %s", pass ? "PASS" : "FAIL", n, n ? summary : "none");
    if (optional_bad)
        fprintf(out, "; %d optional cells not passing", optional_bad);
    if (bad)
        fprintf(out, "; %d required cells not passing the policy", bad);
    if (regress)
        fprintf(out, "; %d performance regressions", regress);
    if (zero)
        fprintf(out, "; 0 cells ran");
    fputs(cover, out);
    if (!base_db && p.perf_pct >= 0)
        fprintf(out, "; no baseline, performance not compared");
    fprintf(out, ")\n");
    free_policy(&p);
    return pass ? 0 : 1;
}
