/* cmd_report.c: `gauntlet report`: HTML / JUnit / Markdown / JSON from a
 * results database (see reports/report.h for what each holds).
 *
 * The run is an id or a run key (default: the newest run). The baseline is
 * a run id or key in the same file, or another database file, whose newest
 * run of the same matrix and tier is taken (a previous release's DB kept as
 * a CI artifact is the common case). Several outputs can be written in one
 * call; the run is loaded once. --history N reads the previous runs of the
 * same matrix and tier from the same file (reports/history.c). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base.h"
#include "commands.h"
#include "store.h"
#include "report.h"

static void help(FILE *f)
{
    fprintf(f,
            "usage: gauntlet report --db FILE [--run ID] [--baseline ID|DBFILE] [--history N]\n"
            "                       [--group-by model|quant|backend|driver|settings]\n"
            "                       (--html OUT | --junit OUT | --markdown OUT | --json OUT)...\n"
            "  --db FILE         the results database\n"
            "  --run ID          run id or run key (default: the newest run)\n"
            "  --baseline B      a run id/key in the same file, or another database file\n"
            "                    (its newest run of the same matrix and tier)\n"
            "  --threshold PCT   performance change that counts as a regression/improvement\n"
            "                    (default: the gate's perf_regression_pct, else 5)\n"
            "  --history N       each cell's status in the last N runs (2..60) of the same\n"
            "                    matrix and tier in this file (merged runs count), sparklines\n"
            "                    of decode t/s, drift KLD and top-1, and a \"changed since\"\n"
            "                    list: status flips and metrics that left the spread of the\n"
            "                    earlier runs, each with the run where it happened\n"
            "  --group-by AXIS   the Markdown adds status counts per model, quant, backend,\n"
            "                    driver profile or settings variant (nb7-np4-t2); every\n"
            "                    output carries each cell's axes, settings included\n"
            "  --html OUT        self-contained HTML compatibility report\n"
            "  --junit OUT       JUnit XML (one testsuite per cell)\n"
            "  --markdown OUT    summary for a pull-request comment\n"
            "  --json OUT        everything, for other tools\n"
            "  OUT may be - for stdout.\n"
            "The HTML report paints the verdict, gate reasons and summary first; the grid,\n"
            "metric tables and cell details are drawn from a data block embedded in the\n"
            "same file, a page at a time (one file, no network). Every output lists the\n"
            "run's artifacts: sha256, size, source, license and how each was derived.\n");
}

/* Resolves an id or run key to runs.id. 0 ok, -1 (printed). */
static int resolve_run(gt_db *db, const char *spec, int64_t *id)
{
    char *end;
    errno = 0;
    long long v = strtoll(spec, &end, 10);
    if (!errno && end != spec && !*end && v > 0) {
        *id = v;
        return 0;
    }
    gt_db_run r;
    gt_err err = {{0}};
    int rc = gt_db_run_get(db, spec, &r, &err);
    if (rc == 0) {
        *id = r.id;
        return 0;
    }
    fprintf(stderr, "gauntlet report: %s\n",
            rc < 0 ? err.msg : "no run with that id or key (gauntlet db check lists runs)");
    return -1;
}

/* The newest run, or the given one, as a gt_db_run (for matrix/tier). */
static int run_row(gt_db *db, int64_t id, gt_db_run *out)
{
    sqlite3_stmt *st;
    const char *sql = id > 0 ? "SELECT run_key FROM runs WHERE id = ?"
                             : "SELECT run_key FROM runs ORDER BY started_at DESC, id DESC LIMIT 1";
    if (sqlite3_prepare_v2(gt_db_sqlite(db), sql, -1, &st, NULL) != SQLITE_OK)
        return -1;
    if (id > 0)
        sqlite3_bind_int64(st, 1, id);
    int rc = -1;
    if (sqlite3_step(st) == SQLITE_ROW) {
        char key[200];
        snprintf(key, sizeof key, "%s", (const char *)sqlite3_column_text(st, 0));
        gt_err err = {{0}};
        rc = gt_db_run_get(db, key, out, &err) == 0 ? 0 : -1;
    }
    sqlite3_finalize(st);
    return rc;
}

int cmd_report(int argc, char **argv)
{
    const char *db_path = NULL, *run_spec = NULL, *base_spec = NULL;
    gt_report_outputs o = {.threshold_pct = -1};
    static const struct option opts[] = {
        {"db", required_argument, 0, 'd'},        {"run", required_argument, 0, 'r'},
        {"baseline", required_argument, 0, 'b'},  {"threshold", required_argument, 0, 't'},
        {"html", required_argument, 0, 'H'},      {"junit", required_argument, 0, 'J'},
        {"markdown", required_argument, 0, 'M'},  {"json", required_argument, 0, 'j'},
        {"history", required_argument, 0, 'n'},   {"help", no_argument, 0, 'h'},
        {"group-by", required_argument, 0, 'g'},
        {0, 0, 0, 0}};
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'd': db_path = optarg; break;
        case 'r': run_spec = optarg; break;
        case 'b': base_spec = optarg; break;
        case 't':
            if (gt_cli_double("report", "--threshold", optarg, &o.threshold_pct) ||
                o.threshold_pct < 0) {
                fprintf(stderr, "gauntlet report: --threshold expects a percentage >= 0\n");
                return GT_EXIT_USAGE;
            }
            break;
        case 'n': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (*end || end == optarg || v < 2 || v > 60) {
                fprintf(stderr, "gauntlet report: --history expects a number of runs, 2 to 60\n");
                return GT_EXIT_USAGE;
            }
            o.history = (int)v;
            break;
        }
        case 'g':
            if (gt_report_axis_from_name(optarg) < 0) {
                fprintf(stderr, "gauntlet report: --group-by expects model, quant, backend, "
                                "driver or settings, got \"%s\"\n", optarg);
                return GT_EXIT_USAGE;
            }
            o.group_by = optarg;
            break;
        case 'H': o.html = optarg; break;
        case 'J': o.junit = optarg; break;
        case 'M': o.markdown = optarg; break;
        case 'j': o.json = optarg; break;
        case 'h': help(stdout); return GT_EXIT_OK;
        default: help(stderr); return GT_EXIT_USAGE;
        }
    }
    if (!db_path || optind < argc || !(o.html || o.junit || o.markdown || o.json)) {
        fprintf(stderr, "gauntlet report: --db FILE and at least one of --html, --junit, "
                        "--markdown, --json are required\n");
        help(stderr);
        return GT_EXIT_USAGE;
    }
    gt_err err = {{0}};
    gt_db *db = NULL, *other = NULL;
    int rc = GT_EXIT_USAGE;
    if (gt_db_open(db_path, true, &db, &err) != 0) {
        fprintf(stderr, "gauntlet report: %s\n", err.msg);
        return GT_EXIT_USAGE;
    }
    int64_t run_id = 0;
    if (run_spec && resolve_run(db, run_spec, &run_id) != 0)
        goto done;
    if (base_spec) {
        struct stat sb;
        if (stat(base_spec, &sb) == 0 && S_ISREG(sb.st_mode)) {
            gt_db_run cur, base;
            if (gt_db_open(base_spec, true, &other, &err) != 0) {
                fprintf(stderr, "gauntlet report: baseline: %s\n", err.msg);
                goto done;
            }
            if (run_row(db, run_id, &cur) != 0) {
                fprintf(stderr, "gauntlet report: %s: no run to report\n", db_path);
                goto done;
            }
            int lr = gt_db_run_latest(other, cur.matrix_name, cur.tier, NULL, &base, &err);
            if (lr != 0 && run_row(other, 0, &base) != 0) {
                fprintf(stderr, "gauntlet report: baseline %s holds no runs\n", base_spec);
                goto done;
            }
            o.base_db = other;
            o.base_run_id = base.id;
        } else {
            if (resolve_run(db, base_spec, &o.base_run_id) != 0)
                goto done;
            o.base_db = db;
        }
    }
    if (gt_report_write(db, run_id, &o, &err) != 0) {
        fprintf(stderr, "gauntlet report: %s\n", err.msg);
        goto done;
    }
    rc = GT_EXIT_OK;
done:
    gt_db_close(other);
    gt_db_close(db);
    return rc;
}
