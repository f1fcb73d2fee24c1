/* headroom.h: how far each bound of a run is from what the run measured.
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
 * (100) is flagged.
 * Used by `gauntlet db headroom` and the HTML report's headroom section. */
#ifndef GT_REPORT_HEADROOM_H
#define GT_REPORT_HEADROOM_H

#include <stdbool.h>
#include <stdio.h>

#include "report.h"

#define GT_HEADROOM_FLOOR 1e-9
#define GT_HEADROOM_RATIO_FLOOR 0.01
#define GT_HEADROOM_LOOSE 100.0

typedef struct gt_headroom_row {
    const char *suite, *name, *unit, *comparator;
    double bound, worst, ratio;
    const gt_rep_cell *worst_cell;
    int n_cells, n_fail;
    bool loose;
} gt_headroom_row;

/* The rows of r (malloc'ed, *n of them), ordered by metric then bound.
 * 0, or -1 when out of memory. */
int gt_headroom_rows(const gt_rep_run *r, gt_headroom_row **rows, int *n);

/* Text table (for `gauntlet db headroom`); returns the loose count. */
int gt_headroom_print(FILE *f, const gt_headroom_row *rows, int n);

/* The HTML section's table. */
void gt_html_headroom(FILE *f, const gt_rep_run *r);

#endif
