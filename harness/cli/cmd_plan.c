/* cmd_plan.c: `gauntlet plan MATRIX`: what qualify would do, without doing it.
 *
 * Prints every cell of the tier in expansion order with its expected
 * status, whether it is required by the gate, its timeout and what it will
 * run, or why it will be skipped: an exclusion by expectation, a missing
 * artifact, or a backend/driver profile that the probe says is not
 * available here. Nothing is written: quants that do not exist yet are
 * shown as "will quantize". Probing loads backend plugins in this process;
 * --no-probe leaves that to the workers. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "run.h"
#include "commands.h"
#include "gt/backend.h"
#include "matrix.h"
#include "base.h"

static void help(FILE *f)
{
    fprintf(f, "usage: gauntlet plan MATRIX.json [--tier T] [--no-probe] [--cache-dir DIR]\n"
               "                    [--tol-baseline FILE]\n"
               "  prints the cells the tier expands to: id, expected status, gate, timeout,\n"
               "  and what each will run (or why it will be skipped). Runs nothing.\n"
               "  Every bound is first checked against the matrix's baseline (FILE, default\n"
               "  baselines/<name>.json beside the matrix): one more than 100x looser than\n"
               "  measured is an error unless its note says \"loose: why\"; bounds with no\n"
               "  measurement are listed.\n");
}

/* "" when the backend/profile is available, else why not. */
static void probe(const gt_mx_backend *b, const gt_mx_driver *d, char *why, size_t cap)
{
    why[0] = '\0';
    if (b->is_http) /* a server: the worker finds out whether it answers */
        return;
    const gt_backend_entry *e = gt_backend_find(b->id);
    bool is_skip;
    if (!e || !e->reg) {
        const char *msg = e ? e->why : "unknown backend";
        const char *what = gt_open_failure_category(msg, true, &is_skip);
        snprintf(why, cap, "%s%s: %s", is_skip ? "" : "error: ", what, msg);
        return;
    }
    gt_device_info devs[8];
    gt_err err = {{0}};
    int n = e->reg->probe ? e->reg->probe(devs, 8, d->driver, &err) : 1;
    if (n <= 0) {
        const char *msg = err.msg[0] ? err.msg : "no device: the backend found none";
        const char *what = gt_open_failure_category(msg, false, &is_skip);
        if (strncmp(msg, "no device: ", 11) == 0)
            msg += 11;
        snprintf(why, cap, "%s%s: %s", is_skip ? "" : "error: ", what, msg);
    } else if (b->device >= n)
        snprintf(why, cap, "error: bad driver setting: device %d requested, %d found", b->device,
                 n);
    else if (d->version) {
        const char *v = devs[b->device].driver_version[0] ? devs[b->device].driver_version
                                                          : devs[b->device].driver;
        if (!gt_version_satisfies(v, d->version))
            snprintf(why, cap, "driver profile %s needs version %s; found %s", d->id,
                     d->version, v[0] ? v : "no version");
    }
}

int cmd_plan(int argc, char **argv)
{
    static const struct option OPTS[] = {{"tier", required_argument, NULL, 't'},
                                         {"no-probe", no_argument, NULL, 'n'},
                                         {"cache-dir", required_argument, NULL, 'c'},
                                         {"tol-baseline", required_argument, NULL, 'b'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char *tier_name = NULL, *cache_dir = NULL, *tol_baseline = NULL;
    bool do_probe = true;
    int opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", OPTS, NULL)) != -1) {
        switch (opt) {
        case 't': tier_name = optarg; break;
        case 'n': do_probe = false; break;
        case 'c': cache_dir = optarg; break;
        case 'b': tol_baseline = optarg; break;
        case 'h': help(stdout); return GT_EXIT_OK;
        default: help(stderr); return GT_EXIT_USAGE;
        }
    }
    if (optind != argc - 1) {
        help(stderr);
        return GT_EXIT_USAGE;
    }
    gt_err err = {{0}};
    gt_matrix *m;
    if (gt_matrix_load(argv[optind], &m, &err) != 0) {
        fprintf(stderr, "gauntlet plan: %s\n", err.msg);
        return GT_EXIT_USAGE;
    }
    if (gt_anchors_check_all(m, &err) != 0 ||
        gt_matrix_validate_baseline(m, tol_baseline, stdout, &err) != 0) {
        fprintf(stderr, "gauntlet plan: %s\n", err.msg);
        gt_matrix_free(m);
        return GT_EXIT_USAGE;
    }
    const gt_mx_tier *tier = gt_matrix_tier(m, tier_name, &err);
    gt_cell *cells = NULL;
    int n = 0;
    gt_artifacts arts;
    if (!tier || gt_matrix_expand(m, tier, &cells, &n, &err) != 0 ||
        gt_artifacts_init(&arts, m, cache_dir, true, &err) != 0) {
        fprintf(stderr, "gauntlet plan: %s\n", err.msg);
        gt_cells_free(cells, n);
        gt_matrix_free(m);
        return GT_EXIT_USAGE;
    }
    char suites[256] = "";
    for (int i = 0; i < tier->n_suites; i++) {
        size_t len = strlen(suites);
        snprintf(suites + len, sizeof suites - len, "%s%s", i ? ", " : "", tier->suites[i]);
    }
    printf("matrix %s (%s, sha256 %.16s...), tier %s: %d cells; suites: %s\n", m->name, m->file,
           m->sha256, tier->name, n, suites);
    printf("%4s  %-44s %-6s %-8s %8s  %s\n", "#", "cell", "expect", "gate", "timeout", "plan");
    int will_run = 0, will_skip = 0;
    for (int i = 0; i < n; i++) {
        const gt_cell *c = &cells[i];
        char plan[1400], why[700] = "";
        const gt_artifact *art = gt_artifacts_quant(&arts, c->model, c->quant);
        if (c->expected == GT_ST_SKIP)
            snprintf(why, sizeof why, GT_SKIP_MATRIX ": %s", c->expect_reason);
        else if (art->state == GT_ART_UNSUPPORTED)
            snprintf(why, sizeof why, "%s", art->reason);
        else if (art->state == GT_ART_MISSING || art->state == GT_ART_ERROR)
            snprintf(why, sizeof why, "%s: %s", art->state == GT_ART_MISSING ? "skip" : "error",
                     art->reason);
        else if (do_probe)
            probe(c->backend, c->driver, why, sizeof why);
        if (why[0]) {
            snprintf(plan, sizeof plan, "%s%s", strncmp(why, "error", 5) ? "skip: " : "", why);
            will_skip++;
        } else {
            snprintf(plan, sizeof plan, "run %s%s%s%s%s", suites,
                     c->driver->driver ? " with driver \"" : "",
                     c->driver->driver ? c->driver->driver : "", c->driver->driver ? "\"" : "",
                     art->state == GT_ART_TO_MAKE ? "" : "");
            char set[160];
            gt_setting_describe(c->setting, set, sizeof set);
            if (set[0]) {
                size_t len = strlen(plan);
                snprintf(plan + len, sizeof plan - len, " with %s", set);
            }
            if (c->backend->is_http) {
                char cmd[400] = "";
                const cJSON *a = c->backend->http.start ? c->backend->http.start->child : NULL;
                for (; a; a = a->next) {
                    size_t n = strlen(cmd);
                    snprintf(cmd + n, sizeof cmd - n, "%s%s", n ? " " : "", a->valuestring);
                }
                size_t len = strlen(plan);
                snprintf(plan + len, sizeof plan - len, " over HTTP at %s (%s%s)",
                         c->backend->http.endpoint,
                         cmd[0] ? "the harness starts: " : "an external server", cmd);
            }
            if (art->state == GT_ART_TO_MAKE) {
                size_t len = strlen(plan);
                snprintf(plan + len, sizeof plan - len, " (first: %s)", art->reason);
            }
            will_run++;
        }
        printf("%4d  %-44s %-6s %-8s %7.0fs  %s\n", c->index, c->id, gt_status_name(c->expected),
               c->required ? "required" : "optional", c->timeout_s, plan);
        if (c->expected == GT_ST_XFAIL)
            printf("%4s  %-44s expected to fail: %s\n", "", "", c->expect_reason);
    }
    printf("%d cells: %d to run, %d to skip or error%s\n", n, will_run, will_skip,
           do_probe ? "" : " (backends not probed)");
    gt_artifacts_free(&arts);
    gt_cells_free(cells, n);
    gt_matrix_free(m);
    return GT_EXIT_OK;
}
