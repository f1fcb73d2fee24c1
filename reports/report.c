/* report.c: gt_report_write, the one call the harness makes: load the run
 * once (and the baseline, and the gate), then write each output asked for.
 * Each file is written beside its destination as OUT.tmp and renamed, so a
 * CI step or a browser never reads half a report, and a failed write leaves
 * the previous report in place. */
#include "report.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef enum { F_HTML, F_JUNIT, F_MD, F_JSON } fmt;

static int write_one(const char *path, fmt k, const gt_rep_run *r, const gt_rep_diff *d,
                     gt_err *err)
{
    char tmp[4200];
    bool to_stdout = strcmp(path, "-") == 0;
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = to_stdout ? stdout : fopen(tmp, "w");
    if (!f)
        return gt_err_set(err, "cannot write %s: %s", tmp, strerror(errno));
    /* Reports are written in many small pieces; a large buffer makes that
     * one write(2) per 256 KiB. */
    static char buf[1 << 18];
    if (!to_stdout)
        setvbuf(f, buf, _IOFBF, sizeof buf);
    int rc = k == F_HTML    ? gt_report_html(r, d, f, err)
             : k == F_JUNIT ? gt_report_junit(r, f, err)
             : k == F_MD    ? gt_report_markdown(r, d, f, err)
                            : gt_report_json(r, d, f, err);
    if (to_stdout)
        return fflush(f) == 0 ? rc : gt_err_set(err, "writing to stdout: %s", strerror(errno));
    if (ferror(f) && rc == 0)
        rc = gt_err_set(err, "writing %s: %s", tmp, strerror(errno));
    if (fclose(f) != 0 && rc == 0)
        rc = gt_err_set(err, "writing %s: %s", tmp, strerror(errno));
    if (rc == 0 && rename(tmp, path) != 0)
        rc = gt_err_set(err, "renaming %s to %s: %s", tmp, path, strerror(errno));
    if (rc != 0)
        unlink(tmp);
    return rc;
}

int gt_report_write(gt_db *db, int64_t run_id, const gt_report_outputs *o, gt_err *err)
{
    gt_rep_run *r = NULL, *b = NULL;
    gt_rep_diff *d = NULL;
    int rc = -1;
    if (gt_report_load(db, run_id, true, o->base_db, o->base_run_id, &r, err) != 0)
        return -1;
    r->group_by = o->group_by ? gt_report_axis_from_name(o->group_by) : -1;
    if (o->history > 0 && gt_report_history(db, r, o->history, err) != 0)
        goto done;
    if (o->base_db && (gt_report_load(o->base_db, o->base_run_id, false, NULL, 0, &b, err) != 0 ||
                       gt_report_diff(r, b, o->threshold_pct, &d, err) != 0))
        goto done;
    const struct {
        const char *path;
        fmt k;
    } outs[] = {{o->junit, F_JUNIT}, {o->markdown, F_MD}, {o->json, F_JSON}, {o->html, F_HTML}};
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++)
        if (outs[i].path && write_one(outs[i].path, outs[i].k, r, d, err) != 0)
            goto done;
    rc = 0;
done:
    gt_report_diff_free(d);
    gt_report_free(b);
    gt_report_free(r);
    return rc;
}
