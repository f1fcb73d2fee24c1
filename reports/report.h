/* report.h: reports over a recorded qualification run (HTML, JUnit XML,
 * Markdown, JSON), and the run-to-run diff they share with `gauntlet compare`.
 *
 * The writers never query SQLite themselves: gt_report_load reads one run
 * (cells, checks, metrics, devices, the gate's verdict) into plain structs
 * with a handful of queries, so a 10,000-cell run costs four table scans,
 * and every writer formats the same data. gt_report_diff matches two loaded
 * runs cell by cell (cell_id) and classifies what changed.
 *
 * What the harness calls: gt_report_write() with the output paths it wants
 * (any subset), e.g. after `qualify --junit OUT --html OUT`. Each output is
 * written to OUT.tmp and renamed, so a reader never sees half a report.
 *
 * This is the face of reports/. May use: store (the database and the gate,
 * through store.h), base, SQLite, cJSON. */
#ifndef GT_REPORT_H
#define GT_REPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "store.h"
#include "gt/error.h"

typedef struct gt_rep_check {
    const char *suite, *name, *status, *message;
} gt_rep_check;

typedef struct gt_rep_metric {
    const char *suite, *name, *unit, *comparator, *verdict;
    double value, tolerance;
    bool has_value, has_tol;
    bool noted; /* its bound's note says it is loose on purpose (gt_db_loose_noted) */
    int better, regress;
} gt_rep_metric;

/* One point of a cell's series (the series table: gt_suite_point). A NULL
 * coordinate in the database reads as NaN. */
typedef struct gt_rep_point {
    const char *suite, *series;
    double x, y;
} gt_rep_point;

typedef struct gt_rep_cell {
    int64_t id; /* cells.id: anchors and JUnit ids */
    int idx;
    const char *cell_id, *model, *quant, *backend, *driver;
    const char *settings; /* the execution-settings variant ("nb7-np4-t2"), "" none */
    const char *column;   /* the grid column under the backend: driver, or
                           * "driver/settings" for a settings variant */
    const char *expected, *expect_reason, *status, *raw_status, *reason, *host, *log;
    const char *device; /* "name (driver driver_version)" or "" */
    const char *model_sha256, *artifact_sha256; /* "" when not recorded */
    int artifact;       /* index into run->artifacts of the file it ran, -1 unknown */
    bool required;
    int attempts;
    double started_at, finished_at, duration_s;
    gt_rep_check *checks;
    int n_checks;
    gt_rep_metric *metrics;
    int n_metrics;
    gt_rep_point *points; /* in the order the suite sent them */
    int n_points;
} gt_rep_cell;

typedef struct gt_rep_device {
    const char *host, *backend, *driver_profile, *name, *kind, *driver, *driver_version, *extra;
    int64_t memory;
} gt_rep_device;

typedef struct gt_rep_part { /* one harness invocation: a shard, a resume */
    const char *host, *tool_version, *git_sha, *argv, *status;
    int shard_index, shard_count;
    double started_at, finished_at;
} gt_rep_part;

/* One file a run used: the model as fetched or found, or a quant derived
 * from it (see reports/provenance.c for where each field comes from). */
typedef struct gt_rep_artifact {
    const char *sha256, *file, *path, *kind, *model, *quant, *source_sha256;
    const char *arch;       /* the model's general.architecture; "" when not recorded */
    const char *source;     /* URL, PyPI package and member, or the path it was found at */
    const char *license;    /* as the matrix states it, or "" */
    const char *derivation; /* "as distributed", "gauntlet quantize q4_0 from <sha256>", ... */
    int64_t size;           /* bytes, -1 unknown */
    int parent;             /* index of the artifact it was derived from, -1 none */
} gt_rep_artifact;

typedef struct gt_rep_history gt_rep_history;

typedef struct gt_rep_run {
    int64_t id;
    const char *db_path, *run_key, *matrix_name, *matrix_sha256, *tier, *tool_version, *git_sha;
    const char *host, *status;
    int n_cells; /* as planned (runs.n_cells) */
    double started_at, finished_at;
    double perf_pct; /* the gate's perf_regression_pct, or -1 */
    int gate;        /* 0 pass, 1 fail, -1 not evaluated */
    const char *gate_text; /* what the gate printed: its verdict and reasons */
    const char *notes_unread; /* why the bounds' notes could not be read, or NULL */
    gt_rep_cell *cells;    /* in expansion order */
    int n;
    gt_rep_device *devices;
    int n_devices;
    gt_rep_part *parts;
    int n_parts;
    gt_rep_artifact *artifacts; /* every file the run's cells ran, sources first */
    int n_artifacts;
    gt_rep_history *hist;  /* NULL unless asked for (gt_report_history) */
    int counts[16];        /* per gt_status; index from gt_status_from_name */
    int group_by;          /* a gt_rep_axis the Markdown adds a summary by, or -1 */
    struct gt_rep_arena *arena; /* owns every string */
    void *checks_block, *metrics_block, *points_block;
} gt_rep_run;

/* Loads run_id (<= 0: the newest run in the file). With gate true, the gate
 * is evaluated (against base/base_run_id when base is not NULL) and its
 * verdict and printed reasons kept. 0 ok, -1 error. */
int gt_report_load(gt_db *db, int64_t run_id, bool gate, gt_db *base, int64_t base_run_id,
                   gt_rep_run **out, gt_err *err);
void gt_report_free(gt_rep_run *r);
const gt_rep_cell *gt_report_find(const gt_rep_run *r, const char *cell_id);

/* Fills each cell's points from the series table (one scan, ordered as
 * r->cells). A database without series rows yields none. 0, or -1. */
int gt_report_series(gt_rep_run *r, sqlite3 *h, gt_err *err);
/* The cell's metric suite.name, or NULL. */
const gt_rep_metric *gt_report_metric(const gt_rep_cell *c, const char *suite, const char *name);

/* ---- the long suite's checks, read back from their messages (long.c) ---- */
/* passkey_L<L>_d<pct>: `key 48213; cell: "<answer>" (found|missed);
 * reference: "<answer>" (found|missed)`, answers JSON-escaped. */
typedef struct gt_rep_passkey {
    int length, depth_pct;
    char key[16];
    char cell[256], ref[256]; /* the answers, unescaped (truncated to fit) */
    bool cell_found, ref_found;
} gt_rep_passkey;
/* kv_L<L>: `kv B bytes, plan P (ratio R); peak RSS M MiB`. */
typedef struct gt_rep_kv {
    int length;
    double bytes, plan, ratio, rss_mib;
} gt_rep_kv;
/* drift_L<L>: `kld_mean A kld_max B top1 C over positions P0..P1`. */
typedef struct gt_rep_drift {
    int length, from, to;
    double kld_mean, kld_max, top1;
} gt_rep_drift;
/* 0 when the check is of that kind and its name and message parse; -1 not. */
int gt_report_passkey(const gt_rep_check *k, gt_rep_passkey *out);
int gt_report_kv(const gt_rep_check *k, gt_rep_kv *out);
int gt_report_drift(const gt_rep_check *k, gt_rep_drift *out);
/* Whether the cell ran the long suite (any check or point of suite "long"). */
bool gt_report_has_long(const gt_rep_cell *c);

/* ---- the structured suite's checks, summed up (structured.c) ---- */
typedef struct gt_rep_structured {
    int n_cases, n_valid;             /* valid_<case> checks, and those that passed */
    char invalid[256];                /* the cases that did not validate, "a, b" */
    const gt_rep_check *first_invalid; /* the first of them, or NULL */
    const gt_rep_check *agreement;    /* the check "agreement", or NULL */
    int n_agree, n_answers;           /* from its message; n_answers -1: it did not parse */
    const char *divergence;           /* the first case that parted from the reference
                                       * ("<case> parts at byte K: cell ... | reference ..."),
                                       * divergence_len bytes of it; NULL when none did */
    size_t divergence_len;
    int n_malformed, n_refused;       /* refuse_<case> checks, and those that passed */
    const gt_rep_check *first_unrefused; /* the first that did not pass, or NULL */
    const gt_rep_check *stream;       /* http: the check "stream", or NULL */
    const gt_rep_check *other_bad;    /* another failing check (answer_<case>, a suite error) */
    const gt_rep_metric *valid_rate, *ref_agreement, *refused; /* NULL when not recorded */
    int n_failed;                     /* structured checks that failed or errored */
    bool known;  /* the cell is xfail or xpass: its failing structured checks were
                  * expected to fail (structured.c says why) */
} gt_rep_structured;
/* 0 when the cell ran the structured suite (a structured check other than
 * the skip of a cell the tier leaves out), -1 when not. */
int gt_report_structured(const gt_rep_cell *c, gt_rep_structured *out);
bool gt_report_has_structured(const gt_rep_cell *c);
/* A column's verdict: "pass" when nothing in it failed, else "xfail" for a
 * known deviation (s->known), else "fail". */
const char *gt_report_structured_verdict(const gt_rep_structured *s, bool failed);

/* Fills r->artifacts from the artifacts table (the files the run's cells
 * name by sha256) and the run's stored matrix (source, license). A database
 * without artifact rows yields none. 0, or -1 on a SQLite error. */
int gt_report_provenance(gt_rep_run *r, sqlite3 *h, gt_err *err);

/* ---- history: the same cells over the last runs of a matrix and tier ---- */

enum { GT_HIST_DECODE, GT_HIST_KLD, GT_HIST_TOP1, GT_HIST_NSERIES };

typedef struct gt_rep_hist_change {
    int cell;       /* index into run->cells */
    int series;     /* -1: a status flip; else GT_HIST_* */
    int at;         /* index into hist->runs where it happened */
    const char *from, *to; /* statuses (series -1) */
    double before, after;  /* the earlier runs' median and the value at `at` */
} gt_rep_hist_change;

struct gt_rep_history {
    int n_runs;                  /* oldest first; the last is the reported run */
    int64_t *run_ids;
    const char **run_keys;
    double *started_at;
    signed char *status;         /* [cell * n_runs + k]: gt_status, -1 not in that run */
    double *series;              /* [(cell * GT_HIST_NSERIES + s) * n_runs + k], NaN = none */
    gt_rep_hist_change *changes; /* newest first */
    int n_changes;
};

/* The last n runs (the reported one included) of r's matrix and tier, by
 * start time, no later than r; fills r->hist. 0, or -1 (err set). */
int gt_report_history(gt_db *db, gt_rep_run *r, int n, gt_err *err);
void gt_report_history_free(gt_rep_history *h);
const char *gt_report_hist_series_name(int s); /* "decode t/s", "drift KLD", "top-1" */

/* ---- run-to-run diff ---- */

typedef enum gt_rep_change {
    GT_CH_NEW_FAILURE, /* was ok (pass/xfail/skip) or absent, now fail/error/crash/timeout/xpass */
    GT_CH_FIX,         /* was failing, now pass (or xfail) */
    GT_CH_STATUS,      /* any other status change */
    GT_CH_ADDED,       /* cell only in the current run */
    GT_CH_REMOVED,     /* cell only in the baseline */
} gt_rep_change;

typedef struct gt_rep_status_delta {
    gt_rep_change kind;
    const gt_rep_cell *cur, *base; /* either may be NULL (added/removed) */
} gt_rep_status_delta;

typedef struct gt_rep_metric_delta {
    const gt_rep_cell *cur;
    const gt_rep_metric *m, *bm;
    double change_pct; /* (cur - base) / |base| * 100 */
    double worse_pct;  /* change oriented so that > 0 is worse */
    bool regression;   /* worse by more than the threshold */
} gt_rep_metric_delta;

typedef struct gt_rep_diff {
    const gt_rep_run *cur, *base;
    double threshold_pct;
    gt_rep_status_delta *status;
    int n_status;
    gt_rep_metric_delta *perf; /* directional metrics beyond the threshold, worst first */
    int n_perf;
    gt_rep_metric_delta *all; /* every metric present in both (for compare) */
    int n_all;
    int n_new_fail, n_fix, n_regress, n_improve;
} gt_rep_diff;

/* threshold_pct < 0: the current run's gate threshold, or 5%. */
int gt_report_diff(const gt_rep_run *cur, const gt_rep_run *base, double threshold_pct,
                   gt_rep_diff **out, gt_err *err);
void gt_report_diff_free(gt_rep_diff *d);
const char *gt_report_change_name(gt_rep_change k);

/* ---- the axes of a cell, for grouping (gauntlet report --group-by) ---- */
typedef enum gt_rep_axis {
    GT_AXIS_MODEL, GT_AXIS_QUANT, GT_AXIS_BACKEND, GT_AXIS_DRIVER, GT_AXIS_SETTINGS, GT_AXIS_COUNT
} gt_rep_axis;
/* "model", "quant", "backend", "driver", "settings"; -1 for another name. */
int gt_report_axis_from_name(const char *name);
const char *gt_report_axis_name(int axis);
/* The cell's value on that axis ("" for a cell without settings). */
const char *gt_report_axis_value(const gt_rep_cell *c, int axis);

/* ---- the grid: rows model x quant, columns backend x driver (x settings:
 * a backend's settings variants are adjacent columns "driver/nb7-np4") ---- */
typedef struct gt_rep_grid {
    int n_rows, n_cols;
    const gt_rep_cell **row_first; /* a cell of each row (its model, quant) */
    const gt_rep_cell **col_first; /* a cell of each column (its backend, driver) */
    int *at; /* n_rows * n_cols indexes into run->cells, -1 = no cell */
} gt_rep_grid;
/* Rows and columns in order of first appearance (expansion order). */
int gt_report_grid(const gt_rep_run *r, gt_rep_grid *g, gt_err *err);
void gt_report_grid_free(gt_rep_grid *g);

/* ---- writers (diff may be NULL) ---- */
int gt_report_html(const gt_rep_run *r, const gt_rep_diff *d, FILE *f, gt_err *err);
int gt_report_junit(const gt_rep_run *r, FILE *f, gt_err *err);
int gt_report_markdown(const gt_rep_run *r, const gt_rep_diff *d, FILE *f, gt_err *err);
int gt_report_json(const gt_rep_run *r, const gt_rep_diff *d, FILE *f, gt_err *err);

/* ---- what the harness calls ---- */
typedef struct gt_report_outputs {
    const char *html, *junit, *markdown, *json; /* NULL = not wanted */
    gt_db *base_db;        /* NULL: no baseline */
    int64_t base_run_id;   /* in base_db */
    double threshold_pct;  /* < 0: the gate's, or 5% */
    int history;           /* > 1: the last `history` runs of the matrix and tier */
    const char *group_by;  /* an axis name (gt_report_axis_from_name): Markdown adds
                            * status counts by it; NULL none */
} gt_report_outputs;

/* Loads run_id (<= 0: newest) once and writes every output asked for. */
int gt_report_write(gt_db *db, int64_t run_id, const gt_report_outputs *o, gt_err *err);

/* ---- helpers shared by the writers ---- */
/* Copies into the run's arena (freed with it); *oom set on failure. */
const char *gt_report_strdup(gt_rep_run *r, const char *s, bool *oom);
const char *gt_report_dup_col(gt_rep_run *r, sqlite3_stmt *st, int i, bool *oom);
void gt_report_arena_free(gt_rep_run *r);
/* Severity order for sorting and "worst of": crash > timeout > error > fail >
 * xpass > pending > xfail > skip > pass. */
int gt_report_severity(const char *status);
bool gt_report_is_bad(const char *status); /* fail error crash timeout xpass */
/* A symbol per status, so that the status never rests on colour alone. */
const char *gt_report_icon(const char *status);
/* "suite.name" unless name already carries its suite. */
void gt_report_metric_label(const gt_rep_metric *m, char *out, size_t cap);
/* "2026-12-02 13:18:43 UTC" (or "-" for 0). */
void gt_report_time(double t, char *out, size_t cap);
/* Value formatting that keeps 4 significant digits and never prints -0. */
void gt_report_num(double v, char *out, size_t cap);
/* Classifications by metric name (suites are tolerant of renames). */
bool gt_report_is_accuracy(const gt_rep_metric *m);
int gt_report_perf_kind(const gt_rep_metric *m); /* 1 prefill tok/s, 2 decode tok/s, 0 */
bool gt_report_is_latency(const gt_rep_metric *m);
/* Writes s escaped for HTML/XML text and attribute values: & < > " ' become
 * entities, invalid UTF-8 and control characters (other than tab, newline)
 * become U+FFFD, so a log line can neither inject markup nor make the
 * XML ill-formed. */
void gt_report_esc(FILE *f, const char *s);
/* s as a JSON string literal safe inside an HTML/XML script element: < > &
 * and control characters as \u escapes, invalid UTF-8 as U+FFFD. */
void gt_report_json_str(FILE *f, const char *s);
/* Same, at most n bytes of s. */
void gt_report_esc_n(FILE *f, const char *s, size_t n);

/* The HTML report's stylesheet and script, which other pages of the tool
 * (gauntlet compare --html) reuse so they look and behave alike. */
extern const char gt_html_css[];
extern const char gt_html_js[];

/* ---- headroom (headroom.c): how far each bound of a run is from what the run measured.
 *
 * A tolerance far looser than the numbers it judges cannot catch a bug: a
 * KL bound of 5e-3 over a measured 1.6e-12 would pass a backend that is a
 * billion times worse. For each distinct bound of a loaded run (metric,
 * comparator, value: cells of different quants have different bounds) this
 * finds the worst value measured under it and the headroom ratio:
 *   "<=" bound / max(worst, floor)                  (worst = the largest);
 *   ">=" on a 0..1 ratio: (1 - bound) / max(1 - worst, ratio floor), how
 *        many times the measured shortfall the bound allows (top-1 >= 0.95
 *        over a measured 1.000: 0.05 / 0.01 = 5); on other units
 *        worst / bound;
 *   "==" 1 (an exact bound has no slack).
 * floor = GT_HEADROOM_FLOOR (1e-9): values below it are rounding noise, not a
 * measurement to size a bound by (KL of two f32 pipelines is ~1e-12).
 * ratio floor = GT_HEADROOM_RATIO_FLOOR (0.01): agreement fractions are
 * counted over 32 to a few thousand items, so a shortfall under one in a
 * hundred is below what a CI tier resolves. A ratio above GT_HEADROOM_LOOSE
 * (100) is flagged, unless the bound's note says why ("loose:", read from
 * the run's stored matrix: gt_db_loose_noted), which is listed as such.
 * Used by `gauntlet db headroom` and the HTML report's headroom section. */
#define GT_HEADROOM_FLOOR 1e-9       /* = GT_TOL_FLOOR (base/tolerance.h) */
#define GT_HEADROOM_RATIO_FLOOR 0.01 /* = GT_TOL_RATIO_FLOOR */
#define GT_HEADROOM_LOOSE 100.0      /* = GT_TOL_LOOSE */

typedef struct gt_headroom_row {
    const char *suite, *name, *unit, *comparator;
    double bound, worst, ratio;
    const gt_rep_cell *worst_cell;
    int n_cells, n_fail;
    bool loose; /* ratio above GT_HEADROOM_LOOSE and not noted */
    bool noted; /* its note says it is loose on purpose ("loose:", gt_rep_metric.noted) */
} gt_headroom_row;

/* The rows of r (malloc'ed, *n of them), ordered by metric then bound.
 * 0, or -1 when out of memory. */
int gt_headroom_rows(const gt_rep_run *r, gt_headroom_row **rows, int *n);

/* Text table (for `gauntlet db headroom`); returns the loose count (a
 * bound whose note says it is loose on purpose is listed, not counted).
 * notes_unread: the run's gt_rep_run.notes_unread, said when not NULL. */
int gt_headroom_print(FILE *f, const gt_headroom_row *rows, int n, const char *notes_unread);

#endif
