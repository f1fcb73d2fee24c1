/* sweep.h: which execution setting breaks a backend (gauntlet compare
 * --sweep n_batch,n_parallel,threads).
 *
 * One prompt runs on the reference side once, alone, with default settings;
 * then on the backend under test once per cell of the settings grid (every
 * combination of the swept axes' values), each cell a fresh backend
 * instance opened with gt_backend_config {.n_threads, .n_batch,
 * .n_parallel}: the runtime applies them to the session (micro-batches of
 * n_batch tokens; n_parallel - 1 companion sequences sharing every batch).
 * Per cell: KL(reference || cell) averaged over the prompt's positions
 * (teacher-forced: every position's logits from one eval of the prompt) and
 * top-1 agreement. A cell agrees when its KL mean is within max_kld and its
 * top-1 at least min_top1.
 *
 * Naming (gt_sweep_name, pure, so tests can drive it with synthetic grids):
 * the base cell is the least demanding setting on each axis (the largest
 * n_batch, which splits least; the fewest sequences; the fewest threads).
 * Each swept axis is then changed alone from the base: the values that
 * break agreement name the axis and its threshold ("diverges when the
 * prompt (37 tokens) is split: n_batch < 37", "diverges when threads > 1");
 * an axis whose changes all agree "has no effect". When no single change
 * breaks but some combination does, the combination with the fewest changes
 * is named; when the base itself disagrees the backend is wrong apart from
 * the settings and nothing is named but that. */
#ifndef GT_SWEEP_H
#define GT_SWEEP_H

#include <stdbool.h>
#include <stdio.h>

#include "gt/error.h"

typedef enum gt_sweep_axis {
    GT_SW_N_BATCH,
    GT_SW_N_PARALLEL,
    GT_SW_THREADS,
    GT_SW_N_AXES
} gt_sweep_axis;

#define GT_SW_MAX_VALUES 16
/* The prompt a sweep runs when none is given: about 37 tokens on
 * stories260K's and SmolLM2's vocabularies, longer than 7 (so n_batch 7
 * splits it several times), shorter than 512. */
#define GT_SWEEP_PROMPT                                                                       \
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the " \
    "park with her friends. One day, she saw a big red ball"
/* An n_batch value standing for the prompt's length (resolved once the
 * prompt is tokenized): the largest split that is no split. */
#define GT_SW_PROMPT_LEN (-1)

typedef struct gt_sweep_spec {
    const char *model_path;
    const char *ref_backend, *ref_driver; /* side A: "reference", NULL */
    const char *backend, *driver;         /* the backend swept */
    const char *prompt;
    bool swept[GT_SW_N_AXES];
    int values[GT_SW_N_AXES][GT_SW_MAX_VALUES]; /* as given (n_batch may hold GT_SW_PROMPT_LEN) */
    int n_values[GT_SW_N_AXES];
    int n_threads; /* threads when that axis is not swept (0: the backend's default) */
    double max_kld, min_top1;
} gt_sweep_spec;

/* The defaults: A = reference, every axis unswept; n_batch {1, 7, prompt
 * length, 512}, n_parallel {1, 2, 4}, threads {1, 2}; max_kld 1e-9 and
 * min_top1 0.95 (matrices/ci.json's accuracy.drift_kld_mean and drift_top1
 * bounds). */
void gt_sweep_defaults(gt_sweep_spec *s);
/* "n_batch,n_parallel,threads" (any non-empty subset, any order) into swept. */
int gt_sweep_axes_parse(const char *list, bool swept[GT_SW_N_AXES], gt_err *err);
/* "1,7,512" into values (n_batch also takes "prompt" for the prompt's
 * length); each >= 1, at most GT_SW_MAX_VALUES. */
int gt_sweep_values_parse(gt_sweep_axis a, const char *list, int *values, int *n, gt_err *err);
const char *gt_sweep_axis_name(gt_sweep_axis a);

typedef struct gt_sweep_cell {
    int v[GT_SW_N_AXES]; /* the setting on each axis (n_batch 0: the session's default) */
    double kld_mean, kld_max, top1;
    bool agrees;
    char error[256]; /* non-empty: the cell could not run (it counts as diverging) */
} gt_sweep_cell;

typedef struct gt_sweep_grid {
    bool swept[GT_SW_N_AXES];
    int values[GT_SW_N_AXES][GT_SW_MAX_VALUES]; /* resolved, ascending, unique */
    int n_values[GT_SW_N_AXES];
    gt_sweep_cell *cells; /* n_batch outermost, threads innermost (gt_sweep_index) */
    int n_cells;
    int n_prompt; /* the prompt's tokens */
    double max_kld, min_top1;
    double seconds;
} gt_sweep_grid;

/* The cell with value index i[axis] on each axis. */
int gt_sweep_index(const gt_sweep_grid *g, const int i[GT_SW_N_AXES]);
/* Fills g's values from spec (unswept axes: one value, n_batch 0 = the
 * session's default, n_parallel 1, threads spec->n_threads) for a prompt of
 * n_prompt tokens, and allocates the cells with their settings. */
int gt_sweep_grid_init(const gt_sweep_spec *spec, int n_prompt, gt_sweep_grid *g, gt_err *err);
/* Runs the whole sweep (prints progress to stderr). -1 with err only when
 * nothing could be compared (model, reference, prompt); a cell that fails
 * keeps its error and counts as diverging. */
int gt_sweep_run(const gt_sweep_spec *spec, gt_sweep_grid *out, gt_err *err);
void gt_sweep_grid_free(gt_sweep_grid *g);

typedef struct gt_sweep_verdict {
    bool agrees;                    /* every cell agrees */
    int base;                       /* the least demanding cell */
    bool breaks[GT_SW_N_AXES];      /* changing this axis alone breaks agreement */
    char axis_text[GT_SW_N_AXES][200]; /* per swept axis: what it does */
    int combo;                      /* the named combination's cell, -1 */
    char text[768];                 /* the whole finding, one line */
} gt_sweep_verdict;

/* The naming described above; reads only the cells' agrees flags. */
void gt_sweep_name(const gt_sweep_grid *g, gt_sweep_verdict *v);

/* sweep_out.c: the grid on a terminal, and JSON:
 * {"model", "a": {"backend", "driver"}, "b": {...}, "prompt", "n_prompt",
 *  "max_kld", "min_top1", "axes": [{"name", "values"}],
 *  "cells": [{"n_batch", "n_parallel", "threads", "kld_mean", "kld_max",
 *             "top1", "agrees", "error"?}],
 *  "agrees", "finding", "axis_findings": {"n_batch": {"breaks", "text"}, ...},
 *  "base": {"n_batch", ...}, "combination": {...} or null} */
void gt_sweep_print(const gt_sweep_spec *s, const gt_sweep_grid *g, const gt_sweep_verdict *v,
                    bool color, FILE *f);
int gt_sweep_write_json(const gt_sweep_spec *s, const gt_sweep_grid *g,
                        const gt_sweep_verdict *v, FILE *f, gt_err *err);

#endif
