/* suite.h: the interface between the harness and a test suite.
 *
 * A suite is a table entry (gt_suite) with a run function. The worker process
 * of one matrix cell calls run() with a context describing the cell (model
 * artifact, quant, backend, driver string, threads, seed), this tier's
 * settings for the suite and the cell's resolved tolerances. The suite
 * reports through the gt_suite_* helpers below; the worker turns each report
 * into a JSON line on its result pipe and the parent process records it, so a
 * suite never touches the database and never prints results to stdout. The
 * parent records a cell in one transaction, all or nothing: a cell that
 * crashes keeps its status (crash, with the signal and the last log lines),
 * not a half of its checks.
 *
 * Adding a suite (functional, accuracy, performance, soak):
 *   1. write suites/<name>.c defining `const gt_suite gt_suite_<name>`;
 *   2. add it to the table in suites/suite_table.c (and its http variant,
 *      suites/http_<name>.c, when it can judge a server);
 *   3. list its metrics (gt_metric_def) and settings (gt_setting_def) so that
 *      matrices naming them are validated, and tolerances can be set on them;
 *   4. name it in a tier's "suites" in the matrix files (matrices/).
 *
 * Checks and metrics:
 *   gt_suite_check(ctx, "finite", ok, "3 NaN in logits at step %d", i)
 *       a named assertion: pass/fail with a message (why, with numbers).
 *   gt_suite_metric(ctx, "load_ms", 12.5)
 *       a measured value; its unit, direction and default tolerance come from
 *       the suite's gt_metric_def; the matrix may override the tolerance per
 *       quant or per cell ("smoke.load_ms": {"max": 5000}). The verdict is
 *       pass/fail against the tolerance, or "info" when there is none.
 * Any failed check or metric makes the cell fail; gt_suite_result(...,
 * GT_ST_ERROR, ...) or returning -1 from run() makes it an error (the suite
 * could not judge: missing data, harness trouble), which is not a verdict on
 * the backend.
 *
 * The reference cache: outputs of the reference backend (logits over eval
 * text, greedy continuations of a prompt set) are computed once per (model
 * artifact sha256, quant, data hash, settings, gauntlet and numerics
 * version: suites/refkey.h) and stored in the run
 * database's ref_cache table, shared by all cells and runs:
 *     char key[65];
 *     gt_suite_ref_key(ctx, "greedy", data_hash, settings_json, key);
 *     if (gt_suite_ref_get(ctx, key, &buf, &n) == 1) {   // absent
 *         ... compute with gt_backend_open("reference", ...) ...
 *         gt_suite_ref_put(ctx, key, "greedy tokens", buf, n);
 *     }
 * A put becomes visible to cells that start after this cell is recorded,
 * or after it ends unfinished: a cell killed at its timeout, or left
 * running when qualify is interrupted, keeps each output it finished (the
 * worker announces a put only once its file is whole), so its next run or
 * --resume computes only the rest; a crashed cell keeps none.
 *
 * Fault injection (tests only): GT_FAULT="kind[=arg]:cell-glob,..." in the
 * environment. The worker itself handles segv, abort, hang and exit; a
 * suite asks gt_suite_fault(ctx, "perturb-logits", &arg) for its own kinds
 * (GT_SUITE_FAULT_KINDS); after-put=N holds the worker's kinds back until
 * the Nth put. The runtime's kinds (gt/fault.h: logit-scale=X,
 * graph-drop-last, ...) take no cell glob and apply inside the runtime. *
 * This is the face of suites/: the harness sees suites only through it, and
 * the suites see nothing of the harness but base (statuses, tolerances,
 * hashes) and net (the HTTP client the http variants speak through).
 * suite_table.c lists the suites; suite.c holds the helpers above. */
#ifndef GT_SUITE_H
#define GT_SUITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "gt/backend.h"
#include "gt/error.h"
#include "gt/model.h"
#include "base.h"

/* A metric a suite may report. Stored as "<suite>.<name>". */
typedef struct gt_metric_def {
    const char *name;      /* "load_ms" */
    const char *unit;      /* "ms", "tok/s", "count", "ratio", ... */
    int better;            /* +1 higher is better, -1 lower is better, 0 neither */
    bool regress;          /* the gate compares it against a baseline run */
    const char *tolerance; /* default tolerance as JSON, e.g. "{\"eq\": 0}", or NULL */
    const char *doc;
} gt_metric_def;

typedef enum gt_setting_type {
    GT_SET_INT,
    GT_SET_NUM,
    GT_SET_BOOL,
    GT_SET_STR,
    GT_SET_STRINGS, /* array of strings */
    GT_SET_INTS,    /* array of integers, or an object: model id (or "*") -> array of integers */
} gt_setting_type;

/* A tier setting a suite reads ("settings": {"smoke": {"n_tokens": 16}}). */
typedef struct gt_setting_def {
    const char *name;
    gt_setting_type type;
    const char *doc;
} gt_setting_def;

typedef struct gt_suite_ctx gt_suite_ctx;
typedef int (*gt_suite_run_fn)(gt_suite_ctx *ctx, gt_err *err);

#define GT_SUITE_NEEDS_F32 1u /* wants ctx->f32_path (reference on f32 weights) */

typedef struct gt_suite {
    const char *name;
    const char *description;
    unsigned needs;
    const gt_metric_def *metrics; /* terminated by {NULL} */
    const gt_setting_def *settings; /* terminated by {NULL} */
    /* Returns 0 when it ran to the end (checks may have failed), -1 when it
     * could not (err filled; the cell becomes an error). */
    gt_suite_run_fn run;
} gt_suite;

/* The same suite against an OpenAI-compatible server (an "http" backend
 * entry: ctx->endpoint set, ctx->backend NULL), from suite_table.c. NULL: the
 * suite cannot judge a server through its API; the worker reports it as a
 * skip. */
gt_suite_run_fn gt_suite_http_run(const gt_suite *s);

/* What the worker provides; a suite uses the helpers below, not these. */
typedef struct gt_suite_host {
    void (*result)(void *hd, const char *suite, const char *check, gt_status st,
                   const char *msg);
    void (*metric)(void *hd, const char *suite, const gt_metric_def *def, double value,
                   const char *comparator, double tolerance, gt_status verdict);
    /* 0 = found (*data malloc'ed), 1 = absent, -1 = error */
    int (*ref_get)(void *hd, const char *key, void **data, size_t *size, gt_err *err);
    int (*ref_put)(void *hd, const char *key, const char *meta, const void *data, size_t size,
                   gt_err *err);
    /* One point of a named series of this cell (gt_suite_point). */
    void (*point)(void *hd, const char *suite, const char *series, double x, double y);
} gt_suite_host;

#define GT_SUITE_LOC_TOKENS 64

struct gt_suite_ctx {
    /* The cell. */
    const char *cell_id;       /* "stories260k/q8_0/cpu/default" */
    const char *tier;
    const char *model_id, *quant, *backend_name, *driver_id;
    const char *driver;        /* driver-profile setting string, NULL = default */
    const char *model_path;    /* the artifact this cell runs (already quantized) */
    const char *model_sha256;  /* of model_path */
    const char *source_sha256; /* of the model file the matrix lists */
    const char *f32_path;      /* f32 variant (GT_SUITE_NEEDS_F32), else NULL */
    int device, n_threads;
    uint64_t seed;
    const char *data_dir;      /* suites/data */
    /* This suite's tier settings (an object, maybe empty) and the cell's
     * tolerances ({"smoke.load_ms": {"max": 5000}, ...}). */
    const cJSON *settings;
    const cJSON *tolerances;
    const char *faults;        /* this cell's GT_FAULT entries, "kind[=arg],...", or "" */
    /* The cell's anchor (harness/matrix/anchors.h: the file's keys with its
     * quant's entry merged in), or NULL when the model has none. */
    const cJSON *anchor;

    /* Set by the worker. */
    const gt_suite *suite;
    const gt_suite_host *host;
    void *host_data;
    gt_backend *backend;       /* the cell's backend, opened once; NULL for http */
    /* http cells: the API base URL ("http://127.0.0.1:8080/v1") and the model
     * name to send in requests (NULL: the first id of GET /v1/models). The
     * matrix model (model_path, model_sha256) is what the server is expected
     * to serve: suites compare the server with the reference backend on it. */
    const char *endpoint;
    const char *served_model;
    const char *http_api;      /* "chat": the suites speak /chat/completions; else completions */
    gt_model *model;           /* shared model, loaded on first gt_suite_model */
    int n_failed;              /* failed checks/metrics so far in this cell */

    /* Set by the accuracy suite for the worker's localizer (worker.c): the
     * tokens of the first prompt whose greedy continuation left the
     * reference's (through the diverging step), else of the first prompt;
     * loc_what says which. */
    int32_t loc_tokens[GT_SUITE_LOC_TOKENS];
    int n_loc_tokens;
    char loc_what[96];
    /* Set by the long suite when a checkpoint fails: the text's tokens up to
     * that checkpoint (malloc'ed; the worker frees them) and the first
     * position the localizer compares node by node (the ones before it only
     * fill the KV cache). Used instead of loc_tokens when n_loc_long > 0. */
    int32_t *loc_long;
    int n_loc_long;
    int loc_long_from;
};

/* The suite table. */
const gt_suite *gt_suite_find(const char *name);
int gt_suite_all(const gt_suite *const **out); /* returns the count */
const gt_metric_def *gt_suite_metric_def(const gt_suite *s, const char *name);
const gt_setting_def *gt_suite_setting_def(const gt_suite *s, const char *name);

/* Reporting. */
void gt_suite_result(gt_suite_ctx *c, const char *check, gt_status st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* pass/fail by ok; returns ok. */
bool gt_suite_check(gt_suite_ctx *c, const char *check, bool ok, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Judges value against the cell's tolerance for "<suite>.<name>" and reports
 * it; returns the verdict (GT_ST_PASS, GT_ST_FAIL, or GT_ST_PENDING for
 * "info": no tolerance). The name must be in the suite's metric table. */
gt_status gt_suite_metric(gt_suite_ctx *c, const char *name, double value);
/* Whether the suite's "cells" setting (globs on the cell id) selects this
 * cell; absent means every cell. A suite run on a cell it leaves out
 * reports one skip in the category GT_SKIP_MATRIX: the matrix chose it, so
 * the verdict does not count the silence as zero coverage (verdict.h), and
 * the worker asks none of the suite's bounds there (soak, performance,
 * long). */
bool gt_suite_cell_selected(const gt_suite_ctx *c);
/* One point (x, y) of the cell's series `series` (the long suite's drift
 * against depth: x a position, y a KL): stored with the cell, drawn by the
 * report's details. Not a verdict: the checks judge; a series shows. */
void gt_suite_point(gt_suite_ctx *c, const char *series, double x, double y);
/* Diagnostics to the cell's log (stderr of the worker, kept by the runner). */
void gt_suite_log(gt_suite_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Settings of this tier for this suite, with defaults. */
const cJSON *gt_suite_setting(const gt_suite_ctx *c, const char *name);
int64_t gt_suite_int(const gt_suite_ctx *c, const char *name, int64_t def);
double gt_suite_num(const gt_suite_ctx *c, const char *name, double def);
/* A GT_SET_INTS setting for this cell's model: the array itself, or the
 * object's entry for ctx->model_id, else its "*". Writes at most max values
 * and returns how many; 0 when the setting is absent, -1 (err) when the
 * object names neither the model nor "*". */
int gt_suite_ints(const gt_suite_ctx *c, const char *name, int64_t *out, int max, gt_err *err);
bool gt_suite_bool(const gt_suite_ctx *c, const char *name, bool def);
const char *gt_suite_str(const gt_suite_ctx *c, const char *name, const char *def);

/* The kinds suites ask gt_suite_fault for (NULL-terminated), and the same
 * as one line for messages: a GT_FAULT kind nobody knows is refused. */
extern const char *const GT_SUITE_FAULT_KINDS[];
#define GT_SUITE_FAULT_LIST "perturb-logits=X, nan-logits=STEP, nondeterministic, leak=N"
/* Whether GT_FAULT asks for kind in this cell; *arg gets "=X" (0 if none). */
bool gt_suite_fault(const gt_suite_ctx *c, const char *kind, double *arg);

/* The cell's model, loaded once per worker and shared by its suites. */
int gt_suite_model(gt_suite_ctx *c, gt_model **out, gt_err *err);

/* Reference cache (see above). data_hash identifies the input data (e.g.
 * the sha256 of the prompt file); settings anything else that changes the
 * outputs (n_tokens, n_ctx). */
void gt_suite_ref_key(const gt_suite_ctx *c, const char *kind, const char *data_hash,
                      const char *settings, char key[65]);
int gt_suite_ref_get(gt_suite_ctx *c, const char *key, void **data, size_t *size, gt_err *err);
int gt_suite_ref_put(gt_suite_ctx *c, const char *key, const char *meta, const void *data,
                     size_t size, gt_err *err);

/* Seconds on a monotonic clock. */
double gt_suite_now(void);

#endif
