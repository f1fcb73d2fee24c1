/* test_qualify.c: `gauntlet qualify` end to end, running the built binary.
 *
 * Each test writes a small matrix (stories260K from ../shared/models, or
 * its synthetic stand-in without it, gt_test_llama, and a synthetic tiny
 * model, reference and cpu backends) or uses the shipped quickstart matrix
 * (gt_test_quickstart), runs the real program in a temporary folder and then
 * reads the results database with SQLite to check what was recorded: every
 * cell with its metrics, crashes and timeouts recorded as such while the run
 * goes on, a SIGKILLed harness resumed without redoing finished cells, shards
 * merged into exactly the cells of an unsharded run, and the gate's exit
 * codes and messages; zero coverage failing (a test-ops filter that runs no
 * case, a cell in which no check ran, a run in which no cell ran). All share
 * one artifact cache (quants are made once). */
#include <dirent.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

static char g_dir[4096];   /* shared by all tests (made before forking) */
static char g_out[65536];  /* output of the last run() */
static const char *g_stories;

/* Runs a shell command line (env assignments allowed) with the shared cache;
 * returns its exit code and keeps stdout+stderr in g_out. */
#define run(...) gt_test_run_in(g_dir, g_out, sizeof g_out, __VA_ARGS__)

#define BIN "'" GT_BINARY_DIR "/gauntlet'"

/* The shared helpers (testutil.h) under this file's short names: paths
 * and databases are in g_dir. */
#define path_in(name) gt_test_join(g_dir, name)
#define db_open(name) gt_test_db_open(path_in(name))
#define q_int(...) gt_test_q_int(__VA_ARGS__)
#define q_text(...) gt_test_q_text(__VA_ARGS__)
#define now() gt_test_now()

/* A small matrix: 2 models x 2 quants x (reference, cpu) = 8 cells. */
static const char *small_matrix(const char *name, const char *cpu_timeout, const char *extra)
{
    char text[8192];
    snprintf(text, sizeof text,
             "{\"name\": \"small\",\n"
             " \"models\": [{\"id\": \"stories260k\", \"path\": \"%s\"},\n"
             "   {\"id\": \"synth-tiny\", \"synth\": {\"preset\": \"tiny\", \"seed\": 1}}],\n"
             " \"quants\": [\"f32\", \"q8_0\"],\n"
             " \"backends\": [\"reference\", {\"id\": \"cpu\", \"timeout_s\": %s}],\n"
             " \"defaults\": {\"timeout_s\": 60, \"threads\": 1},\n"
             " \"tiers\": {\"smoke\": {\"suites\": [\"smoke\"],\n"
             "   \"settings\": {\"smoke\": {\"n_tokens\": 8, \"reference\": true}}}}%s}\n",
             g_stories, cpu_timeout, extra);
    static char paths[8][4200]; /* callers keep these across path_in() calls */
    static int k;
    char *p = paths[k++ % 8];
    snprintf(p, 4200, "%s/%s", g_dir, name);
    gt_test_write_file(p, text, strlen(text));
    return p;
}

START_TEST(quickstart_passes_and_records_everything)
{
    double t0 = now();
    const char *quickstart = gt_test_quickstart();
    int rc = run(BIN " qualify '%s' --db qs.sqlite --run-id one -j 2"
                     " --junit qs.xml --html qs.html",
                 quickstart);
    double took = now() - t0;
    ck_assert_msg(rc == 0, "exit %d:\n%.3000s", rc, g_out);
    printf("quickstart took %.0f s (speed is bench's business, not a test's)\n", took);
    ck_assert_ptr_nonnull(strstr(g_out, "gate: PASS"));
    ck_assert_ptr_nonnull(strstr(g_out, "harness overhead per cell"));
    /* qualify's own reports: JUnit valid against our XSD (and the shared
     * one where present), HTML there */
    gt_test_assert_junit(path_in("qs.xml"));
    ck_assert_msg(run("grep -c 'synth-tiny/q8_0/cpu/default' qs.html") == 0, "%s", g_out);
    sqlite3 *h = db_open("qs.sqlite");
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM runs WHERE status = 'complete'"), 1);
    ck_assert_int_eq(q_int(h, "SELECT n_cells FROM runs"), 24);
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM cells"), 24);
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM cells WHERE status NOT IN ('pass', 'skip')"),
                     0);
    /* Reference and cpu exist on every machine: those 12 cells ran (OpenCL
     * and CUDA cells run where their drivers are, else skip with why). */
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM cells WHERE status = 'pass' AND backend IN"
                              " ('reference', 'cpu')"),
                     12);
    /* Every passing cell has its checks and metrics; every skip a reason. */
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM cells c WHERE status = 'pass' AND"
                              " ((SELECT COUNT(*) FROM metrics m WHERE m.cell = c.id) < 5 OR"
                              "  (SELECT COUNT(*) FROM results r WHERE r.cell = c.id) < 4)"),
                     0);
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM cells WHERE status = 'skip' AND"
                              " (reason IS NULL OR reason = '')"),
                     0);
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM metrics m JOIN cells c ON c.id = m.cell"
                              " WHERE m.name = 'nonfinite' AND m.value = 0 AND m.verdict = 'pass'"),
                     q_int(h, "SELECT COUNT(*) FROM cells WHERE status = 'pass'"));
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM metrics WHERE name = 'load_ms' AND"
                              " verdict = 'pass' AND comparator = '<=' AND tolerance = 10000"),
                     q_int(h, "SELECT COUNT(*) FROM cells WHERE status = 'pass'"));
    /* The reference backend agrees with itself; cpu cells compared with it. */
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM metrics m JOIN cells c ON c.id = m.cell"
                              " WHERE c.backend = 'reference' AND m.name = 'ref_agreement'"
                              " AND m.value = 1"),
                     6);
    /* Every cpu cell (2 models x 3 quants) agrees with the reference's
     * greedy tokens within the smoke tolerance (>= 0.9), judged and passed. */
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM metrics m JOIN cells c ON c.id = m.cell"
                              " WHERE c.backend = 'cpu' AND c.status = 'pass'"
                              " AND m.name = 'ref_agreement' AND m.value >= 0.9"
                              " AND m.comparator = '>=' AND m.verdict = 'pass'"),
                     6);
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM ref_cache"), 6);
    ck_assert_int_ge(q_int(h, "SELECT COUNT(*) FROM devices"), 2);
    ck_assert_int_ge(q_int(h, "SELECT COUNT(*) FROM artifacts"), 6);
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM cells WHERE status = 'pass' AND"
                              " (artifact_sha256 IS NULL OR overhead_ms IS NULL OR device_id IS NULL)"),
                     0);
    sqlite3_close(h);
    ck_assert_int_eq(run(BIN " db check qs.sqlite"), 0);

    /* A second run reuses the reference outputs and the quants. */
    rc = run(BIN " qualify '%s' --db qs.sqlite --run-id two -q", quickstart);
    ck_assert_msg(rc == 0, "%s", g_out);
    h = db_open("qs.sqlite");
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM ref_cache"), 6);
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM results r JOIN cells c ON c.id = r.cell"
                              " JOIN runs u ON u.id = c.run_id WHERE u.run_key LIKE '%%/two'"
                              " AND r.check_name = 'reference' AND r.message LIKE '%%: cached reference%%'"),
                     q_int(h, "SELECT COUNT(*) FROM cells c JOIN runs u ON u.id = c.run_id"
                              " WHERE u.run_key LIKE '%%/two' AND c.status = 'pass'"));
    sqlite3_close(h);
}
END_TEST

START_TEST(impossible_tolerance_fails_naming_cell_and_metric)
{
    const char *m = small_matrix("tol.json", "60",
                                 ",\n \"tolerances\": {\"cells\": [{\"cell\": \"stories260k/q8_0/cpu/*\","
                                 " \"metrics\": {\"smoke.decode_tps\": {\"min\": 1e12}}}]}");
    int rc = run(BIN " qualify '%s' --db tol.sqlite", m);
    ck_assert_msg(rc == 1, "exit %d:\n%s", rc, g_out);
    ck_assert_ptr_nonnull(strstr(g_out, "FAIL stories260k/q8_0/cpu/default: fail"));
    ck_assert_msg(strstr(g_out, "metric smoke.decode_tps = ") != NULL, "%s", g_out);
    ck_assert_ptr_nonnull(strstr(g_out, "tolerance >= 1e+12"));
    ck_assert_ptr_nonnull(strstr(g_out, "gate: FAIL"));
    sqlite3 *h = db_open("tol.sqlite");
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM cells WHERE status = 'fail'"), 1);
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM cells WHERE status = 'pass'"), 7);
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM metrics WHERE verdict = 'fail' AND"
                              " name = 'decode_tps' AND tolerance = 1e12 AND comparator = '>='"),
                     1);
    sqlite3_close(h);
}
END_TEST

START_TEST(segfault_is_a_crash_and_the_run_goes_on)
{
    const char *m = small_matrix("segv.json", "60", "");
    int rc = run("GT_FAULT='segv:stories260k/q8_0/cpu/default' " BIN
                 " qualify '%s' --db segv.sqlite",
                 m);
    ck_assert_msg(rc == 1, "exit %d:\n%s", rc, g_out);
    ck_assert_ptr_nonnull(strstr(g_out, "FAIL stories260k/q8_0/cpu/default: crash: SIGSEGV"));
    sqlite3 *h = db_open("segv.sqlite");
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM cells WHERE status = 'crash' AND reason LIKE"
                              " 'SIGSEGV%%' AND log LIKE '%%injecting fault%%'"),
                     1);
    /* Cells after it ran and passed; the crashed one kept no partial results. */
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM cells WHERE status = 'pass'"), 7);
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM results r JOIN cells c ON c.id = r.cell"
                              " WHERE c.status = 'crash'"),
                     0);
    sqlite3_close(h);

    /* The same crash expected (xfail) passes the gate; an xfail on a cell
     * that passes is an xpass, which fails it. */
    m = small_matrix("xfail.json", "60",
                     ",\n \"expect\": [{\"cell\": \"stories260k/q8_0/cpu/*\", \"status\": \"xfail\","
                     " \"reason\": \"known crash\"},\n {\"cell\": \"synth-tiny/f32/cpu/*\","
                     " \"status\": \"xfail\", \"reason\": \"stale\"}],\n"
                     " \"gate\": {\"optional\": [\"synth-tiny/*\"]}");
    rc = run("GT_FAULT='segv:stories260k/q8_0/cpu/default' " BIN " qualify '%s' --db xf.sqlite",
             m);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, g_out);
    h = db_open("xf.sqlite");
    ck_assert_str_eq(q_text(h, "SELECT status || ' ' || raw_status FROM cells WHERE status"
                               " IN ('xfail', 'xpass') ORDER BY idx"),
                     "xfail crash\nxpass pass\n");
    sqlite3_close(h);
}
END_TEST

START_TEST(hang_is_killed_at_the_timeout)
{
    const char *m = small_matrix("hang.json", "2", "");
    double t0 = now();
    int rc = run("GT_FAULT='hang:synth-tiny/f32/cpu/*' " BIN " qualify '%s' --db hang.sqlite", m);
    double took = now() - t0;
    ck_assert_msg(rc == 1, "exit %d:\n%s", rc, g_out);
    ck_assert_msg(took < 40, "took %.1fs", took);
    sqlite3 *h = db_open("hang.sqlite");
    ck_assert_str_eq(q_text(h, "SELECT cell_id FROM cells WHERE status = 'timeout'"),
                     "synth-tiny/f32/cpu/default\n");
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM cells WHERE status = 'timeout' AND"
                              " duration_s >= 2 AND duration_s < 10 AND reason LIKE 'killed after%%'"),
                     1);
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM cells WHERE status = 'pass'"), 7);
    sqlite3_close(h);
}
END_TEST

/* Worker processes of this test still alive (tagged through the environment). */
static int live_workers(const char *tag) { return gt_test_live(tag, "worker"); }

/* Starts `gauntlet qualify` on matrix m in the background (tagged, with a
 * hang in cell synth-tiny/f32/reference) and waits until the four
 * stories260k cells are recorded and the hung one is running. */
static pid_t start_hung_run(const char *m, const char *db, const char *tag)
{
    pid_t pid = fork();
    if (pid == 0) {
        char cmd[8192];
        snprintf(cmd, sizeof cmd,
                 "cd '%s' && exec env %s XDG_CACHE_HOME='%s/cache' "
                 "GT_FAULT='hang:synth-tiny/f32/reference/*' " BIN
                 " qualify '%s' --db %s --run-id k >%s.log 2>&1",
                 g_dir, tag, g_dir, m, db, db);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    long long done = 0;
    for (int i = 0; i < 600 && done < 4; i++) {
        usleep(100000);
        sqlite3 *h;
        if (sqlite3_open_v2(path_in(db), &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
            sqlite3_stmt *st;
            if (sqlite3_prepare_v2(h, "SELECT COUNT(*) FROM cells WHERE status != 'pending'", -1,
                                   &st, NULL) == SQLITE_OK) {
                if (sqlite3_step(st) == SQLITE_ROW)
                    done = sqlite3_column_int64(st, 0);
                sqlite3_finalize(st);
            }
        }
        sqlite3_close(h);
    }
    ck_assert_int_eq(done, 4);
    usleep(300000);
    return pid;
}

START_TEST(sigterm_marks_the_run_interrupted)
{
    const char *m = small_matrix("term.json", "60", "");
    char tag[64];
    snprintf(tag, sizeof tag, "GT_TEST_TAG=term-%d", (int)getpid());
    pid_t pid = start_hung_run(m, "term.sqlite", tag);
    ck_assert_int_eq(kill(pid, SIGTERM), 0);
    int st;
    waitpid(pid, &st, 0);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 1, "status %d", st);
    ck_assert_int_eq(live_workers(tag), 0);
    sqlite3 *h = db_open("term.sqlite");
    ck_assert_str_eq(q_text(h, "SELECT status FROM runs"), "interrupted\n");
    ck_assert_str_eq(q_text(h, "SELECT status FROM run_parts"), "interrupted\n");
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM cells WHERE status = 'pending'"), 4);
    sqlite3_close(h);
    FILE *f = fopen(path_in("term.sqlite.log"), "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(g_out, 1, sizeof g_out - 1, f);
    g_out[n] = '\0';
    fclose(f);
    ck_assert_ptr_nonnull(strstr(g_out, "--resume 'small/smoke/k'"));
    ck_assert_int_eq(run(BIN " db check term.sqlite"), 0);
    /* Running again with the same key (no --resume) continues it too. */
    ck_assert_msg(run(BIN " qualify '%s' --db term.sqlite --run-id k -q", m) == 0, "%s", g_out);
    h = db_open("term.sqlite");
    ck_assert_str_eq(q_text(h, "SELECT status FROM runs"), "complete\n");
    ck_assert_int_eq(q_int(h, "SELECT MAX(attempts) FROM cells"), 1);
    sqlite3_close(h);
}
END_TEST

START_TEST(sigkill_then_resume_reruns_only_unfinished_cells)
{
    const char *m = small_matrix("kill.json", "60", "");
    char tag[64];
    snprintf(tag, sizeof tag, "GT_TEST_TAG=kill-%d", (int)getpid());
    pid_t pid = start_hung_run(m, "kill.sqlite", tag);
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    int st;
    waitpid(pid, &st, 0);
    ck_assert(WIFSIGNALED(st));
    for (int i = 0; i < 50 && live_workers(tag) > 0; i++)
        usleep(100000);
    ck_assert_int_eq(live_workers(tag), 0); /* PR_SET_PDEATHSIG took the worker along */

    sqlite3 *h = db_open("kill.sqlite");
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM cells WHERE status = 'pending'"), 4);
    ck_assert_str_eq(q_text(h, "SELECT status FROM runs"), "running\n");
    char before[8192];
    snprintf(before, sizeof before, "%s",
             q_text(h, "SELECT cell_id || ' ' || finished_at FROM cells WHERE status != 'pending'"
                       " ORDER BY idx"));
    sqlite3_close(h);
    ck_assert_int_eq(run(BIN " db check kill.sqlite"), 0);

    int rc = run(BIN " qualify '%s' --db kill.sqlite --resume small/smoke/k", m);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, g_out);
    ck_assert_ptr_null(strstr(g_out, "stories260k/f32/reference/default"));
    ck_assert_ptr_nonnull(strstr(g_out, "synth-tiny/f32/reference/default"));
    h = db_open("kill.sqlite");
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM cells"), 8);
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM cells WHERE status = 'pass'"), 8);
    ck_assert_int_eq(q_int(h, "SELECT MAX(attempts) FROM cells"), 1);
    ck_assert_str_eq(q_text(h, "SELECT cell_id || ' ' || finished_at FROM cells WHERE idx < 4"
                               " ORDER BY idx"),
                     before);
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM (SELECT cell, seq FROM results GROUP BY"
                              " cell, seq HAVING COUNT(*) > 1)"),
                     0);
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM results"), 8 * 4);
    ck_assert_str_eq(q_text(h, "SELECT status FROM runs"), "complete\n");
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM run_parts"), 2);
    sqlite3_close(h);
    ck_assert_msg(run(BIN " db check kill.sqlite") == 0, "%s", g_out);
}
END_TEST

START_TEST(shards_merge_into_the_unsharded_run)
{
    const char *m = small_matrix("shard.json", "60", "");
    ck_assert_msg(run(BIN " qualify '%s' --db full.sqlite --run-id full -q", m) == 0, "%s", g_out);
    ck_assert_msg(run("GT_RUN_ID=ci-9 " BIN " qualify '%s' --db s1.sqlite --shard 1/2 -q", m) == 0,
                  "%s", g_out);
    ck_assert_msg(run("GT_RUN_ID=ci-9 " BIN " qualify '%s' --db s2.sqlite --shard 2/2 -q", m) == 0,
                  "%s", g_out);
    sqlite3 *h = db_open("s1.sqlite");
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM cells"), 4);
    sqlite3_close(h);
    /* Continuing shard 1's run without --shard does not pull in shard 2. */
    ck_assert_msg(run("GT_RUN_ID=ci-9 " BIN " qualify '%s' --db s1.sqlite -q", m) == 0, "%s", g_out);
    h = db_open("s1.sqlite");
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM cells"), 4);
    ck_assert_int_eq(q_int(h, "SELECT MAX(attempts) FROM cells"), 1);
    sqlite3_close(h);
    ck_assert_msg(run(BIN " merge merged.sqlite s1.sqlite s2.sqlite s2.sqlite") == 0, "%s", g_out);
    h = db_open("merged.sqlite");
    ck_assert_str_eq(q_text(h, "SELECT run_key || ' ' || status FROM runs"),
                     "small/smoke/ci-9 complete\n");
    char merged[8192];
    snprintf(merged, sizeof merged, "%s",
             q_text(h, "SELECT cell_id || ' ' || idx || ' ' || status FROM cells ORDER BY cell_id"));
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM run_parts"), 3);
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM results"), 8 * 4);
    sqlite3_close(h);
    h = db_open("full.sqlite");
    ck_assert_str_eq(
        q_text(h, "SELECT cell_id || ' ' || idx || ' ' || status FROM cells ORDER BY cell_id"),
        merged);
    sqlite3_close(h);
    ck_assert_msg(run(BIN " db check merged.sqlite") == 0, "%s", g_out);
    ck_assert_msg(run(BIN " db gate merged.sqlite") == 0, "%s", g_out);
    ck_assert_ptr_nonnull(strstr(g_out, "gate: PASS (8 cells"));
}
END_TEST

START_TEST(usage_and_config_errors_exit_2)
{
    const char *m = small_matrix("u.json", "60", "");
    /* a report that cannot be written is a configuration error, not a pass */
    ck_assert_int_eq(run(BIN " qualify '%s' --db u.sqlite --junit /nonexistent-dir/x.xml", m), 2);
    ck_assert_ptr_nonnull(strstr(g_out, "/nonexistent-dir/x.xml"));
    ck_assert_int_eq(run(BIN " qualify '%s' --shard 3/2", m), 2);
    ck_assert_int_eq(run(BIN " qualify '%s' --tier nightly --db u.sqlite", m), 2);
    ck_assert_int_eq(run(BIN " qualify '%s' --resume nope --db u.sqlite", m), 2);
    ck_assert_int_eq(run(BIN " qualify '%s' --baseline nope --db u.sqlite -q", m), 2);
    ck_assert_ptr_nonnull(strstr(g_out, "baseline nope"));
    const char *bad = path_in("bad.json");
    const char *bad_text = "{\"name\": \"x\", \"models\": 3}";
    gt_test_write_file(bad, bad_text, strlen(bad_text));
    ck_assert_int_eq(run(BIN " qualify '%s' --db u.sqlite", bad), 2);
    ck_assert_ptr_nonnull(strstr(g_out, "bad.json: models: expected an array"));
    /* Changing the matrix under an existing run key is refused. */
    ck_assert_int_eq(run(BIN " qualify '%s' --db u.sqlite --run-id r -q", m), 0);
    small_matrix("u.json", "61", "");
    ck_assert_int_eq(run(BIN " qualify '%s' --db u.sqlite --run-id r -q", m), 2);
    ck_assert_ptr_nonnull(strstr(g_out, "different version"));
    /* A baseline run key and a baseline file are both accepted. */
    ck_assert_int_eq(run(BIN " qualify '%s' --db u.sqlite --run-id r2 -q --baseline"
                         " 'small/smoke/r2'", m), 2); /* itself: does not exist yet */
    ck_assert_msg(run(BIN " qualify '%s' --db u2.sqlite --run-id r3 -q --baseline u.sqlite", m) == 0,
                  "%s", g_out);
}
END_TEST

START_TEST(plan_runs_nothing)
{
    const char *m = small_matrix("plan.json", "60", "");
    char cache[4200];
    snprintf(cache, sizeof cache, "%s/plan-cache", g_dir);
    ck_assert_int_eq(run(BIN " plan '%s' --cache-dir '%s'", m, cache), 0);
    ck_assert_ptr_nonnull(strstr(g_out, "stories260k/q8_0/cpu/default"));
    ck_assert_ptr_nonnull(strstr(g_out, "8 cells: 8 to run"));
    ck_assert_ptr_nonnull(strstr(g_out, "quantize"));
    struct stat sb;
    ck_assert_int_ne(stat(cache, &sb), 0); /* nothing made */
}
END_TEST

/* A one-cell-per-backend matrix of stories260k f32 on the given backends
 * (JSON array items), tier "t" running suites (a JSON array) with settings
 * (a JSON object), plus extra top-level members. */
static const char *tier_matrix(const char *name, const char *backends, const char *suites,
                               const char *settings, const char *extra)
{
    char text[8192];
    snprintf(text, sizeof text,
             "{\"name\": \"zero\",\n"
             " \"models\": [{\"id\": \"stories260k\", \"path\": \"%s\"}],\n"
             " \"quants\": [\"f32\"], \"backends\": [%s],\n"
             " \"defaults\": {\"timeout_s\": 60, \"threads\": 1},\n"
             " \"tiers\": {\"t\": {\"suites\": %s, \"settings\": %s}}%s}\n",
             g_stories, backends, suites, settings, extra);
    const char *p = path_in(name);
    gt_test_write_file(p, text, strlen(text));
    return p;
}

/* Zero coverage is a failure: a filter of test-ops that selects no case
 * (ADD takes no weight type) ran nothing and exits 1 saying so; the
 * control, the same op without --type, runs its cases and exits 0. */
START_TEST(test_ops_running_no_case_fails)
{
    int rc = run(BIN " test-ops -b cpu --op ADD --type q4_k");
    ck_assert_msg(rc == 1, "exit %d:\n%s", rc, g_out);
    ck_assert_msg(strstr(g_out, "FAIL: 0 cases ran: no case matches the --op/--type filter"),
                  "%s", g_out);
    rc = run(BIN " test-ops -b cpu --op ADD");
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, g_out);
    ck_assert_msg(strstr(g_out, "0 cases ran") == NULL && strstr(g_out, "0 failed"), "%s", g_out);
    ck_assert_int_eq(run(BIN " test-ops --help"), 0);
    ck_assert_ptr_nonnull(strstr(g_out, "1 a case failed or none ran (\"0 cases"));
}
END_TEST

/* A suite the tier's settings leave out for the cell ("skipped by the
 * matrix") is no zero coverage beside a suite that ran; a cell in which it
 * is all that ran qualified nothing and fails "no coverage". */
START_TEST(cell_where_no_check_ran_fails)
{
    const char *perf = "\"performance\": {\"n_prompt\": 4, \"n_gen\": 2, \"reps\": 1,"
                       " \"max_reps\": 1, \"cells\": [\"*/cpu/*\"]}";
    char settings[512];
    snprintf(settings, sizeof settings, "{\"smoke\": {\"n_tokens\": 4}, %s}", perf);
    const char *m = tier_matrix("cover-ok.json", "\"reference\"", "[\"smoke\", \"performance\"]",
                                settings, "");
    int rc = run(BIN " qualify '%s' --db cover-ok.sqlite", m);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, g_out);
    sqlite3 *h = db_open("cover-ok.sqlite");
    ck_assert_str_eq(q_text(h, "SELECT status FROM cells"), "pass\n");
    ck_assert_str_eq(q_text(h, "SELECT status || ': ' || message FROM results WHERE suite ="
                               " 'performance'"),
                     "skip: skipped by the matrix: cell stories260k/f32/reference/default is"
                     " not in this tier's performance cells\n");
    sqlite3_close(h);

    snprintf(settings, sizeof settings, "{%s}", perf);
    m = tier_matrix("cover-none.json", "\"reference\"", "[\"performance\"]", settings, "");
    rc = run(BIN " qualify '%s' --db cover-none.sqlite", m);
    ck_assert_msg(rc == 1, "exit %d:\n%s", rc, g_out);
    ck_assert_msg(strstr(g_out, "FAIL stories260k/f32/reference/default: fail: no coverage: no"
                                " check ran in any suite (performance.measured: skipped by the"
                                " matrix: "),
                  "%s", g_out);
}
END_TEST

/* A run in which no cell ran fails the gate ("0 cells ran"), even where
 * every skip is allowed; the control skips one of two cells and passes.
 * A matrix whose exclude leaves no cell is refused before anything runs,
 * as any bad matrix is (exit 2). */
START_TEST(run_where_no_cell_ran_fails)
{
    const char *smoke = "{\"smoke\": {\"n_tokens\": 4}}";
    const char *m = tier_matrix("skip-all.json", "\"reference\", \"cpu\"", "[\"smoke\"]", smoke,
                                ",\n \"expect\": [{\"cell\": \"*\", \"status\": \"skip\","
                                " \"reason\": \"not this release\"}]");
    int rc = run(BIN " qualify '%s' --db skip-all.sqlite", m);
    ck_assert_msg(rc == 1, "exit %d:\n%s", rc, g_out);
    ck_assert_msg(strstr(g_out, "FAIL run: 0 cells ran: all 2 cells were skipped (first:"
                                " stories260k/f32/reference/default: skipped by the matrix: not"
                                " this release)"),
                  "%s", g_out);
    ck_assert_msg(strstr(g_out, "gate: FAIL (2 cells: 2 skip; 0 cells ran"), "%s", g_out);

    m = tier_matrix("skip-one.json", "\"reference\", \"cpu\"", "[\"smoke\"]", smoke,
                    ",\n \"expect\": [{\"backend\": \"cpu\", \"status\": \"skip\","
                    " \"reason\": \"not this release\"}]");
    rc = run(BIN " qualify '%s' --db skip-one.sqlite", m);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, g_out);
    ck_assert_msg(strstr(g_out, "gate: PASS (2 cells: 1 pass, 1 skip"), "%s", g_out);

    m = tier_matrix("excluded.json", "\"reference\", \"cpu\"", "[\"smoke\"]", smoke,
                    ",\n \"exclude\": [{\"model\": \"stories260k\", \"reason\": \"gone\"}]");
    rc = run(BIN " qualify '%s' --db excluded.sqlite", m);
    ck_assert_msg(rc == 2, "exit %d:\n%s", rc, g_out);
    ck_assert_msg(strstr(g_out, "excluded.json: exclude: the matrix has no cells left after"
                                " exclusions"),
                  "%s", g_out);
}
END_TEST

int main(void)
{
    gt_test_require_gauntlet();
    g_stories = gt_test_llama(); /* written once here, before the cases fork */
    /* Each test gets its own gauntlet cache (XDG_CACHE_HOME), but keeps the
     * OpenCL compilers' caches (content-keyed): a cold PoCL build of every
     * kernel would otherwise dominate the quickstart run. */
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char base[4096];
    snprintf(base, sizeof base, "%s", xdg && xdg[0] ? xdg : home ? home : "/tmp");
    if (!(xdg && xdg[0]))
        strncat(base, "/.cache", sizeof base - strlen(base) - 1);
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/gauntlet/opencl", base);
    setenv("GT_OPENCL_CACHE", dir, 0);
    snprintf(dir, sizeof dir, "%s/pocl/kcache", base);
    setenv("POCL_CACHE_DIR", dir, 0);
    snprintf(g_dir, sizeof g_dir, "%s", gt_test_tmp("q"));
    mkdir(g_dir, 0755);
    Suite *s = suite_create("qualify");
    TCase *tc = tcase_create("qualify");
    tcase_set_timeout(tc, 300);
    gt_test_add_if(tc, quickstart_passes_and_records_everything, !gt_test_sanitized(),
                   "a full quickstart qualification (24 cells, SmolLM2 among them) takes many minutes " \
                   "instrumented; the plain build runs it, ci/sanitize.sh runs one cell per backend");
    tcase_add_test(tc, impossible_tolerance_fails_naming_cell_and_metric);
    tcase_add_test(tc, segfault_is_a_crash_and_the_run_goes_on);
    tcase_add_test(tc, hang_is_killed_at_the_timeout);
    tcase_add_test(tc, sigterm_marks_the_run_interrupted);
    tcase_add_test(tc, sigkill_then_resume_reruns_only_unfinished_cells);
    tcase_add_test(tc, shards_merge_into_the_unsharded_run);
    tcase_add_test(tc, usage_and_config_errors_exit_2);
    tcase_add_test(tc, plan_runs_nothing);
    tcase_add_test(tc, test_ops_running_no_case_fails);
    tcase_add_test(tc, cell_where_no_check_ran_fails);
    tcase_add_test(tc, run_where_no_cell_ran_fails);
    suite_add_tcase(s, tc);
    return gt_test_run(s);
}
