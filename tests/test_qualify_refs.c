/* test_qualify_refs.c: the reference outputs of a cell that does not
 * finish (`gauntlet qualify`, the built binary).
 *
 * The long suite on a synthetic model of stories260K's shape, reference
 * backend only, at 256 and 512 tokens with passkeys at two depths: the
 * reference cell puts 6 outputs, in order 4 passkey answers (L256 d10, d90,
 * L512 d10, d90), then the drift summaries at 256 and 512. GT_FAULT
 * after-put=N (worker.c) makes the cell hang or die right after its Nth put:
 *   - a cell killed at its timeout keeps its N outputs in ref_cache (its
 *     checks are dropped as before), and the next run computes only the
 *     rest;
 *   - a cell left running at SIGTERM stays pending, keeps its N outputs,
 *     and --resume computes only the rest;
 *   - a cell that crashes (SIGSEGV) or exits with an error keeps none.
 * What a run computed rather than reused shows in the cell: the drift logs
 * "reference at L tokens" only when it computes, and the reference cell's
 * passkey check says "[this cell is the reference: its answer is now the
 * cached one]" only when no answer was cached. */
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

static char g_dir[4096];
static char g_out[65536];

#define run(...) gt_test_run_in(g_dir, g_out, sizeof g_out, __VA_ARGS__)
#define BIN "'" GT_BINARY_DIR "/gauntlet'"
#define path_in(name) gt_test_join(g_dir, name)
#define db_open(name) gt_test_db_open(path_in(name))
#define q_int(...) gt_test_q_int(__VA_ARGS__)
#define q_text(...) gt_test_q_text(__VA_ARGS__)

#define CELL "synth-stories/f16/reference/default"
/* The worker's scratch folders go under TMPDIR (qualify's mkdtemp). */
#define TMPDIR_ENV "TMPDIR='%s/tmp' "

static const char *matrix(const char *name, int timeout_s)
{
    char text[2048];
    snprintf(text, sizeof text,
             "{\"name\": \"refs-test\",\n"
             " \"models\": [{\"id\": \"synth-stories\", \"synth\": {\"preset\": \"stories260k\","
             " \"seed\": 3}}],\n"
             " \"quants\": [\"f16\"],\n"
             " \"backends\": [\"reference\"],\n"
             " \"defaults\": {\"timeout_s\": %d, \"threads\": 1},\n"
             " \"tiers\": {\"long\": {\"suites\": [\"long\"], \"settings\": {\"long\":\n"
             "     {\"lengths\": [256, 512], \"n_scored\": 32, \"depths\": [10, 90]}}}},\n"
             " \"gate\": {\"allowed\": [\"pass\"]}}\n",
             timeout_s);
    static char path[4200];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    gt_test_write_file(path, text, strlen(text));
    return path;
}

/* The cell's log in the run whose key ends with suffix. */
static const char *cell_log(sqlite3 *h, const char *suffix)
{
    return q_text(h, "SELECT c.log FROM cells c JOIN runs r ON r.id = c.run_id WHERE"
                     " r.run_key LIKE '%%/%s'", suffix);
}

/* Passkey checks of the run whose key ends with suffix that computed their
 * answer (none was cached). */
static long long passkeys_computed(sqlite3 *h, const char *suffix)
{
    return q_int(h, "SELECT COUNT(*) FROM results s JOIN cells c ON c.id = s.cell JOIN runs r"
                    " ON r.id = c.run_id WHERE r.run_key LIKE '%%/%s' AND s.check_name LIKE"
                    " 'passkey_L%%' AND s.status = 'pass' AND s.message LIKE"
                    " '%%now the cached one]'", suffix);
}

START_TEST(timed_out_cell_keeps_its_finished_reference_outputs)
{
    /* 0.3 s of work on one core; 10 s leaves room for a loaded machine
     * (under ASan beside a compile job, 3 s saw only 4 of the 5 outputs). */
    const char *m = matrix("t.json", 10);
    int rc = run(TMPDIR_ENV "GT_FAULT='hang:*/reference/*,after-put=5:*/reference/*' " BIN
                 " qualify '%s' --tier long --db t.sqlite --run-id one",
                 g_dir, m);
    ck_assert_msg(rc == 1, "exit %d:\n%.3000s", rc, g_out);
    ck_assert_msg(strstr(g_out, CELL ": kept 5 reference outputs for the next run of this cell"),
                  "%.3000s", g_out);
    sqlite3 *h = db_open("t.sqlite");
    ck_assert_str_eq(q_text(h, "SELECT status FROM cells"), "timeout\n");
    /* the timed-out cell's own checks are still dropped */
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM results"), 0);
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM metrics"), 0);
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM ref_cache WHERE cell_id = '" CELL "' AND"
                              " run_key = 'refs-test/long/one' AND length(data) = size AND"
                              " size > 0"),
                     5);
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM ref_cache WHERE meta ="
                              " 'long passkey answer'"),
                     4);
    sqlite3_close(h);

    /* The next run computes only the drift at 512. */
    rc = run(TMPDIR_ENV BIN " qualify '%s' --tier long --db t.sqlite --run-id two", g_dir, m);
    ck_assert_msg(rc == 0, "exit %d:\n%.3000s", rc, g_out);
    ck_assert_ptr_null(strstr(g_out, "kept"));
    h = db_open("t.sqlite");
    const char *log = cell_log(h, "two");
    ck_assert_msg(strstr(log, "reference at 512 tokens") && !strstr(log, "reference at 256"),
                  "%s", log);
    ck_assert_int_eq(passkeys_computed(h, "two"), 0);
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM ref_cache"), 6);
    ck_assert_str_eq(q_text(h, "SELECT meta FROM ref_cache WHERE run_key ="
                               " 'refs-test/long/two'"),
                     "long drift summaries\n");
    sqlite3_close(h);
}
END_TEST

/* Files in the test's TMPDIR whose path matches the shell glob. */
static int count_files(const char *glob)
{
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "ls %s/tmp/%s 2>/dev/null | wc -l", g_dir, glob);
    FILE *p = popen(cmd, "r");
    int n = 0;
    if (p) {
        if (fscanf(p, "%d", &n) != 1)
            n = 0;
        pclose(p);
    }
    return n;
}

START_TEST(interrupted_cell_keeps_them_for_resume)
{
    const char *m = matrix("i.json", 300);
    pid_t pid = fork();
    if (pid == 0) {
        char cmd[8192];
        snprintf(cmd, sizeof cmd,
                 "cd '%s' && exec env XDG_CACHE_HOME='%s/cache' TMPDIR='%s/tmp' "
                 "GT_FAULT='hang:*/reference/*,after-put=3:*/reference/*' " BIN
                 " qualify '%s' --tier long --db i.sqlite --run-id one >i.log 2>&1",
                 g_dir, g_dir, g_dir, m);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    /* The third put's file is there; its "ref" line follows within
     * microseconds (emitted after the file is closed), then the hang. */
    int files = 0;
    for (int i = 0; i < 600 && files < 3; i++) {
        usleep(100000);
        files = count_files("gauntlet-*/ref-*");
    }
    ck_assert_int_eq(files, 3);
    sleep(1);
    ck_assert_int_eq(kill(pid, SIGTERM), 0);
    int st;
    waitpid(pid, &st, 0);
    char *out = gt_test_slurp(path_in("i.log"));
    ck_assert_ptr_nonnull(out);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 1, "status %d:\n%s", st, out);
    ck_assert_msg(strstr(out, CELL ": kept 3 reference outputs for --resume"), "%s", out);
    free(out);
    ck_assert_int_eq(count_files("gauntlet-*"), 0); /* scratch removed */
    sqlite3 *h = db_open("i.sqlite");
    ck_assert_str_eq(q_text(h, "SELECT status FROM runs"), "interrupted\n");
    ck_assert_str_eq(q_text(h, "SELECT status FROM cells"), "pending\n");
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM results"), 0);
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM ref_cache WHERE cell_id = '" CELL "' AND"
                              " run_key = 'refs-test/long/one' AND meta = 'long passkey answer'"
                              " AND length(data) = size AND size > 0"),
                     3);
    sqlite3_close(h);

    /* --resume computes the fourth passkey answer and the drift only. */
    int rc = run(TMPDIR_ENV BIN " qualify '%s' --db i.sqlite --resume refs-test/long/one", g_dir,
                 m);
    ck_assert_msg(rc == 0, "exit %d:\n%.3000s", rc, g_out);
    h = db_open("i.sqlite");
    ck_assert_str_eq(q_text(h, "SELECT status FROM cells"), "pass\n");
    ck_assert_int_eq(passkeys_computed(h, "one"), 1);
    ck_assert_str_eq(q_text(h, "SELECT s.check_name FROM results s WHERE s.message LIKE"
                               " '%%now the cached one]'"),
                     "passkey_L512_d90\n");
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM ref_cache"), 6);
    sqlite3_close(h);
}
END_TEST

START_TEST(crashed_cell_keeps_none)
{
    /* A crash may come from memory corruption that reached what the cell
     * wrote before it: neither a signal of its own nor an error exit keeps
     * anything, though both put 2 outputs first. */
    static const struct {
        const char *fault, *db, *status;
    } CASES[] = {{"segv", "s.sqlite", "crash\n"}, {"exit=3", "e.sqlite", "error\n"}};
    const char *m = matrix("c.json", 60);
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) {
        int rc = run(TMPDIR_ENV "GT_FAULT='%s:*/reference/*,after-put=2:*/reference/*' " BIN
                     " qualify '%s' --tier long --db %s",
                     g_dir, CASES[i].fault, m, CASES[i].db);
        ck_assert_msg(rc == 1, "%s: exit %d:\n%.3000s", CASES[i].fault, rc, g_out);
        ck_assert_ptr_null(strstr(g_out, "kept"));
        sqlite3 *h = db_open(CASES[i].db);
        ck_assert_str_eq(q_text(h, "SELECT status FROM cells"), CASES[i].status);
        ck_assert_ptr_nonnull(strstr(q_text(h, "SELECT log FROM cells"),
                                     "injecting fault"));
        ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM ref_cache"), 0);
        sqlite3_close(h);
    }
}
END_TEST

int main(void)
{
    gt_test_require_gauntlet();
    snprintf(g_dir, sizeof g_dir, "%s", gt_test_tmp("refs"));
    mkdir(g_dir, 0755);
    mkdir(gt_test_join(g_dir, "tmp"), 0755);
    Suite *s = suite_create("qualify_refs");
    TCase *tc = tcase_create("qualify_refs");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, timed_out_cell_keeps_its_finished_reference_outputs);
    tcase_add_test(tc, interrupted_cell_keeps_them_for_resume);
    tcase_add_test(tc, crashed_cell_keeps_none);
    suite_add_tcase(s, tc);
    return gt_test_run(s);
}
