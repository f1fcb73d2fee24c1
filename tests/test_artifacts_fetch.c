/* test_artifacts_fetch.c: `gauntlet qualify` downloads a model that the
 * matrix gives only as url + sha256 + size (artifacts.c calling gt_fetch),
 * from an HTTP server this test starts on 127.0.0.1.
 *
 * The model is a `gauntlet synth` tiny file served at /ok/<name>. Checked:
 * the cell passes with the file fetched into --cache-dir/models (and, with
 * no --cache-dir, into $XDG_CACHE_HOME/gauntlet/models), a second run uses
 * the cached copy without asking the server; a wrong sha256 in the matrix,
 * a 404 and GT_NO_FETCH=1 each leave the cell "skip: artifact missing"
 * with the reason (both hashes for the wrong one), the default gate fails
 * on that skip (a matrix that never ran is not evidence; exit 1) and
 * nothing unverified stays in the cache. */
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../harness/base/sha256.c"
#include "testutil.h"

#define BIN "'" GT_BINARY_DIR "/gauntlet'"

static char g_dir[4096];
static char g_out[65536];
static char *g_model; /* the served bytes */
static size_t g_model_len;
static char g_sha[65];

static gt_test_http srv;
static volatile int g_hits; /* requests for /ok/... */

/* GET /ok/<anything>: the model (200, whole; fetch.c resumes only after a
 * cut, which test_fetch.c covers); any other path: 404. */
static void handle(int fd, const char *req, void *user)
{
    (void)user;
    char path[256] = "", head[256];
    if (sscanf(req, "GET %255s", path) != 1)
        return;
    int n;
    if (strncmp(path, "/ok/", 4) != 0) {
        n = snprintf(head, sizeof head, "HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n"
                                        "Connection: close\r\n\r\nnot found");
        gt_test_send_all(fd, head, (size_t)n);
        return;
    }
    g_hits++;
    n = snprintf(head, sizeof head, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n"
                                    "Connection: close\r\n\r\n", g_model_len);
    gt_test_send_all(fd, head, (size_t)n);
    gt_test_send_all(fd, g_model, g_model_len);
}

/* Per test (CK_FORK runs each in its own process): the server, and a folder
 * with the served model made by `gauntlet synth`. */
static void setup(void)
{
    g_hits = 0;
    snprintf(g_dir, sizeof g_dir, "%s", gt_test_tmp("artfetch-XXXXXX"));
    ck_assert_ptr_nonnull(mkdtemp(g_dir));
    int rc = gt_test_run_in(g_dir, g_out, sizeof g_out,
                            BIN " synth served.gguf --preset tiny --seed 1");
    ck_assert_msg(rc == 0, "synth: exit %d: %s", rc, g_out);
    char p[4200];
    snprintf(p, sizeof p, "%s/served.gguf", g_dir);
    g_model = gt_test_slurp(p);
    ck_assert_ptr_nonnull(g_model);
    struct stat st;
    ck_assert_int_eq(stat(p, &st), 0);
    g_model_len = (size_t)st.st_size;
    uint64_t size;
    gt_err err = {{0}};
    ck_assert_msg(gt_sha256_file(p, g_sha, &size, &err) == 0, "%s", err.msg);
    unlink(p); /* only the server has it now */
    gt_test_http_start(&srv, handle, NULL);
}

static void teardown(void)
{
    gt_test_http_stop(&srv);
    free(g_model);
    gt_test_sh("rm -rf '%s'", g_dir);
}

/* A one-cell matrix (reference backend, f32) whose model has only a url. */
static const char *matrix(const char *name, const char *route, const char *file,
                          const char *sha)
{
    char text[4096];
    snprintf(text, sizeof text,
             "{\"name\": \"fetched\",\n"
             " \"models\": [{\"id\": \"tiny\", \"url\": \"http://127.0.0.1:%d/%s/%s\",\n"
             "   \"sha256\": \"%s\", \"size\": %zu}],\n"
             " \"quants\": [\"f32\"],\n"
             " \"backends\": [\"reference\"],\n"
             " \"defaults\": {\"timeout_s\": 60, \"threads\": 1},\n"
             " \"tiers\": {\"smoke\": {\"suites\": [\"smoke\"],\n"
             "   \"settings\": {\"smoke\": {\"n_tokens\": 4}}}}}\n",
             srv.port, route, file, sha, g_model_len);
    static char p[4200];
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    gt_test_write_file(p, text, strlen(text));
    return p;
}

static char *cell_text(const char *db, const char *col)
{
    static char out[4096];
    char path[4200], sql[256];
    snprintf(path, sizeof path, "%s/%s", g_dir, db);
    snprintf(sql, sizeof sql, "SELECT %s FROM cells WHERE cell_id = 'tiny/f32/reference/default'",
             col);
    sqlite3 *h;
    ck_assert_int_eq(sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *st;
    ck_assert_int_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
    out[0] = '\0';
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
        snprintf(out, sizeof out, "%s", sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    sqlite3_close(h);
    return out;
}

/* `gauntlet qualify MATRIX --db DB OPTS` (ENV: assignments put before the
 * binary); it must exit 0 (gate PASS). */
static void qualify(const char *env, const char *m, const char *db, const char *opts)
{
    int rc = gt_test_run_in(g_dir, g_out, sizeof g_out, "%s " BIN " qualify '%s' --db %s %s"
                            " --no-progress", env, m, db, opts);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, g_out);
}

/* The same, for a run whose one cell is skipped "artifact missing": the
 * default gate allows only "no device" and "unsupported" skips, so it must
 * say FAIL and exit 1, with the cell still recorded. */
static void qualify_missing(const char *env, const char *m, const char *db, const char *opts)
{
    int rc = gt_test_run_in(g_dir, g_out, sizeof g_out, "%s " BIN " qualify '%s' --db %s %s"
                            " --no-progress", env, m, db, opts);
    ck_assert_msg(rc == 1, "exit %d (want 1, gate FAIL):\n%s", rc, g_out);
    ck_assert_msg(strstr(g_out, "gate: FAIL") != NULL, "%s", g_out);
    ck_assert_msg(strstr(g_out, "not in allowed_skips") != NULL, "%s", g_out);
}

static bool exists_in(const char *rel)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", g_dir, rel);
    return access(p, F_OK) == 0;
}

START_TEST(fetched_into_cache_dir_and_reused)
{
    const char *m = matrix("m.json", "ok", "tiny.gguf", g_sha);
    qualify("", m, "a.sqlite", "--cache-dir c1");
    ck_assert_msg(strstr(g_out, "gate: PASS (1 cells: 1 pass)") != NULL, "%s", g_out);
    ck_assert_str_eq(cell_text("a.sqlite", "status"), "pass");
    ck_assert_str_eq(cell_text("a.sqlite", "model_sha256"), g_sha);
    ck_assert(exists_in("c1/models/tiny.gguf"));
    ck_assert(!exists_in("c1/models/tiny.gguf.part"));
    ck_assert_int_eq(g_hits, 1);

    /* Cached now: the next run does not ask the server. */
    qualify("", m, "b.sqlite", "--cache-dir c1");
    ck_assert_str_eq(cell_text("b.sqlite", "status"), "pass");
    ck_assert_int_eq(g_hits, 1);
}
END_TEST

START_TEST(fetched_into_xdg_cache)
{
    const char *m = matrix("m.json", "ok", "tiny.gguf", g_sha);
    /* gt_test_run_in sets XDG_CACHE_HOME=<dir>/cache. */
    qualify("", m, "x.sqlite", "");
    ck_assert_str_eq(cell_text("x.sqlite", "status"), "pass");
    ck_assert(exists_in("cache/gauntlet/models/tiny.gguf"));
}
END_TEST

START_TEST(wrong_sha256_skips_naming_both)
{
    const char *wrong = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    const char *m = matrix("m.json", "ok", "tiny.gguf", wrong);
    qualify_missing("", m, "w.sqlite", "--cache-dir c1");
    ck_assert_str_eq(cell_text("w.sqlite", "status"), "skip");
    const char *why = cell_text("w.sqlite", "reason");
    ck_assert_msg(strstr(why, "artifact missing") != NULL, "%s", why);
    ck_assert_msg(strstr(why, wrong) != NULL, "%s", why);
    ck_assert_msg(strstr(why, g_sha) != NULL, "%s", why);
    ck_assert(!exists_in("c1/models/tiny.gguf"));
    ck_assert(!exists_in("c1/models/tiny.gguf.part"));
    ck_assert_int_ge(g_hits, 1);
}
END_TEST

START_TEST(not_found_and_no_fetch_skip)
{
    const char *m = matrix("m.json", "gone", "tiny.gguf", g_sha);
    qualify_missing("", m, "n.sqlite", "--cache-dir c1");
    ck_assert_str_eq(cell_text("n.sqlite", "status"), "skip");
    const char *why = cell_text("n.sqlite", "reason");
    ck_assert_msg(strstr(why, "artifact missing") && strstr(why, "404"), "%s", why);

    /* GT_NO_FETCH=1: the server is not asked; the reason says where it looked. */
    m = matrix("m2.json", "ok", "tiny.gguf", g_sha);
    qualify_missing("GT_NO_FETCH=1", m, "o.sqlite", "--cache-dir c1");
    ck_assert_str_eq(cell_text("o.sqlite", "status"), "skip");
    why = cell_text("o.sqlite", "reason");
    ck_assert_msg(strstr(why, "artifact missing: model tiny not found") != NULL, "%s", why);
    ck_assert_int_eq(g_hits, 0);
    ck_assert(!exists_in("c1/models/tiny.gguf"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("artifacts_fetch");
    TCase *tc = tcase_create("fetch");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, fetched_into_cache_dir_and_reused);
    tcase_add_test(tc, fetched_into_xdg_cache);
    tcase_add_test(tc, wrong_sha256_skips_naming_both);
    tcase_add_test(tc, not_found_and_no_fetch_skip);
    suite_add_tcase(s, tc);
    return gt_test_run(s);
}
