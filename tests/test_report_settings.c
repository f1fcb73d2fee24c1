/* test_report_settings.c: a run's settings variants in the reports.
 *
 * A small run (cells added as qualify adds them, with settings) is loaded:
 * each cell carries its variant, the grid puts a backend's variants in
 * adjacent columns "driver/<settings>" next to its plain column even when
 * they were expanded after other backends (includes), Markdown groups by
 * any axis (--group-by), and JSON and JUnit name the settings. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#include "report.h"

static char *render(const gt_rep_run *r, int (*fn)(const gt_rep_run *, FILE *, gt_err *))
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    gt_err err = {{0}};
    ck_assert_msg(fn(r, f, &err) == 0, "%s", err.msg);
    fclose(f);
    return buf;
}

static int md(const gt_rep_run *r, FILE *f, gt_err *err) { return gt_report_markdown(r, NULL, f, err); }
static int js(const gt_rep_run *r, FILE *f, gt_err *err) { return gt_report_json(r, NULL, f, err); }

START_TEST(settings_in_every_output)
{
    const char *path = gt_test_tmp("rs.sqlite");
    unlink(path);
    gt_db *db;
    gt_err err = {{0}};
    ck_assert_msg(gt_db_open(path, false, &db, &err) == 0, "%s", err.msg);
    gt_db_run_new nr = {"m/t/1", "m", "s", "{}", "m.json", "t", NULL, 5};
    int64_t run;
    ck_assert_msg(gt_db_run_create(db, &nr, &run, &err) == 0, "%s", err.msg);
#define CELL(id, be, set, nb, np)                                                              \
    {.cell_id = id, .model = "m", .quant = "q8_0", .backend = be, .driver = "default",         \
     .idx = __COUNTER__, .required = true, .expected = "pass", .settings = set, .n_batch = nb,  \
     .n_parallel = np}
    /* Expansion order as an include would give it: cpu's variants after
     * reference's plain cell. */
    const gt_db_cell_new cells[] = {
        CELL("m/q8_0/cpu/default", "cpu", NULL, 0, 0),
        CELL("m/q8_0/reference/default", "reference", NULL, 0, 0),
        CELL("m/q8_0/cpu/default/nb1-np4", "cpu", "nb1-np4", 1, 4),
        CELL("m/q8_0/cpu/default/nb7-np4", "cpu", "nb7-np4", 7, 4),
        CELL("m/q8_0/reference/default/nb7-np4", "reference", "nb7-np4", 7, 4),
    };
    ck_assert_msg(gt_db_cells_add(db, run, cells, 5, &err) == 0, "%s", err.msg);
    gt_rep_run *r;
    ck_assert_msg(gt_report_load(db, run, false, NULL, 0, &r, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(r->n, 5);
    ck_assert_str_eq(r->cells[0].settings, "");
    ck_assert_str_eq(r->cells[0].column, "default");
    ck_assert_str_eq(r->cells[3].settings, "nb7-np4");
    ck_assert_str_eq(r->cells[3].column, "default/nb7-np4");

    gt_rep_grid g;
    ck_assert_msg(gt_report_grid(r, &g, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(g.n_rows, 1);
    ck_assert_int_eq(g.n_cols, 5);
    static const char *const cols[] = {"cpu default", "cpu default/nb1-np4",
                                       "cpu default/nb7-np4", "reference default",
                                       "reference default/nb7-np4"};
    for (int j = 0; j < 5; j++) {
        char got[128];
        snprintf(got, sizeof got, "%s %s", g.col_first[j]->backend, g.col_first[j]->column);
        ck_assert_str_eq(got, cols[j]);
    }
    gt_report_grid_free(&g);

    ck_assert_int_eq(gt_report_axis_from_name("settings"), GT_AXIS_SETTINGS);
    ck_assert_int_eq(gt_report_axis_from_name("nope"), -1);
    char *out = render(r, md);
    ck_assert_ptr_null(strstr(out, "### By"));
    free(out);
    r->group_by = GT_AXIS_SETTINGS;
    out = render(r, md);
    ck_assert_msg(strstr(out, "### By settings\n"), "%s", out);
    ck_assert_msg(strstr(out, "| (none) | 2 | 0 | 0 | 2 |"), "%s", out);
    ck_assert_msg(strstr(out, "| nb7-np4 | 2 | 0 | 0 | 2 |"), "%s", out);
    ck_assert_msg(strstr(out, "| nb1-np4 | 1 | 0 | 0 | 1 |"), "%s", out);
    free(out);
    r->group_by = GT_AXIS_BACKEND;
    out = render(r, md);
    ck_assert_msg(strstr(out, "| cpu | 3 |") && strstr(out, "| reference | 2 |"), "%s", out);
    free(out);

    out = render(r, js);
    ck_assert_msg(strstr(out, "\"settings\":\t\"nb1-np4\"") || strstr(out, "\"settings\":\"nb1-np4\""),
                  "%s", out);
    free(out);
    out = render(r, gt_report_junit);
    ck_assert_msg(strstr(out, "name=\"m/q8_0/cpu/default/nb7-np4\""), "%s", out);
    ck_assert_msg(strstr(out, "<property name=\"settings\" value=\"nb7-np4\"/>"), "%s", out);
    free(out);
    gt_report_free(r);
    gt_db_close(db);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("report_settings");
    TCase *tc = tcase_create("report_settings");
    tcase_add_test(tc, settings_in_every_output);
    suite_add_tcase(s, tc);
    return gt_test_run(s);
}
