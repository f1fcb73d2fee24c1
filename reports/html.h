/* html.h: what the HTML report's files share (private to reports/).
 *
 * html.c writes the document, its header, baseline changes, limitations
 * and environment; html_grid.c badges, links and the legend; html_charts.c
 * the placeholders of the metric tables and charts; html_long.c the long
 * suite's passkeys, drift curve and K/V memory; html_structured.c the
 * structured suite's validity, agreement and refusals; html_data.c the data
 * block; html_lazy.c the script that draws from it; html_provenance.c the
 * provenance and history sections; html_assets.c the CSS. */
#ifndef GT_HTML_H
#define GT_HTML_H

#include <stdio.h>

#include "report.h"

/* <a class="st st-fail" href="#c12">✗ fail</a> (href NULL: a <span>). */
void gt_html_badge(FILE *f, const char *status, const char *href, const char *extra_class);
/* The anchor of a cell's details: "c<cells.id>". */
void gt_html_cell_href(char *out, size_t cap, const gt_rep_cell *c);
/* A link to a cell's details, its text the cell id. */
void gt_html_cell_link(FILE *f, const gt_rep_cell *c);

void gt_html_legend(FILE *f);
/* The data block the script builds the grid, tables and details from. */
int gt_html_data(FILE *f, const gt_rep_run *r, const gt_rep_diff *d, gt_err *err);
/* The provenance section, and the history's "changed since" section. */
void gt_html_provenance(FILE *f, const gt_rep_run *r);
void gt_html_history(FILE *f, const gt_rep_run *r);
void gt_html_accuracy(FILE *f, const gt_rep_run *r);
void gt_html_performance(FILE *f, const gt_rep_run *r);
/* The "Long context" section (html_long.c): one part per cell that ran the
 * long suite, id "long-c<cells.id>"; nothing when no cell did. */
void gt_html_long(FILE *f, const gt_rep_run *r);
bool gt_html_any_long(const gt_rep_run *r);
/* The "Structured output" section (html_structured.c): a row per cell that
 * ran the structured suite, id "sc-c<cells.id>"; nothing when no cell did. */
void gt_html_structured(FILE *f, const gt_rep_run *r);
bool gt_html_any_structured(const gt_rep_run *r);
/* The headroom section's table (headroom.c). */
void gt_html_headroom(FILE *f, const gt_rep_run *r);

#endif
