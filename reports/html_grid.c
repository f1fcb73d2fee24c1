/* html_grid.c: status badges, links to cells, and the grid's legend.
 *
 * The grid itself is drawn by the script from the data block (html_lazy.c:
 * rows model x quant, columns backend x driver, a page of models at a
 * time); its legend and the badges of the static sections are written here,
 * the same markup the script writes, so a status looks the same
 * everywhere: symbol + word on the status colour. */
#include <string.h>

#include "html.h"

static const struct {
    const char *st, *doc;
} LEGEND[] = {
    {"pass", "every check passed, every metric in tolerance"},
    {"fail", "a check failed or a metric is out of tolerance"},
    {"xfail", "failed as documented (known limitation)"},
    {"xpass", "expected to fail but passed (stale expectation)"},
    {"skip", "not run, with a reason"},
    {"error", "the harness could not judge the cell"},
    {"crash", "the worker died on a signal"},
    {"timeout", "killed at the cell's deadline"},
    {"pending", "not run yet (interrupted run)"},
};

void gt_html_badge(FILE *f, const char *status, const char *href, const char *extra_class)
{
    const char *tag = href ? "a" : "span";
    fprintf(f, "<%s class=\"st st-", tag);
    gt_report_esc(f, status);
    if (extra_class) {
        fputc(' ', f);
        fputs(extra_class, f);
    }
    fputc('"', f);
    if (href)
        fprintf(f, " href=\"%s\"", href);
    fprintf(f, ">%s ", gt_report_icon(status));
    gt_report_esc(f, status);
    fprintf(f, "</%s>", tag);
}

void gt_html_cell_href(char *out, size_t cap, const gt_rep_cell *c)
{
    snprintf(out, cap, "#c%lld", (long long)c->id);
}

void gt_html_cell_link(FILE *f, const gt_rep_cell *c)
{
    fprintf(f, "<a class=\"mono\" href=\"#c%lld\">", (long long)c->id);
    gt_report_esc(f, c->cell_id);
    fputs("</a>", f);
}

void gt_html_legend(FILE *f)
{
    fputs("<div class=\"legend\">", f);
    for (size_t i = 0; i < sizeof LEGEND / sizeof LEGEND[0]; i++) {
        fputs("<span>", f);
        gt_html_badge(f, LEGEND[i].st, NULL, NULL);
        fprintf(f, " <span class=\"d\">%s</span></span>", LEGEND[i].doc);
    }
    fputs("</div>\n", f);
}
