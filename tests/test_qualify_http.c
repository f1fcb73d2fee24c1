/* test_qualify_http.c: "http" backend entries end to end, running the built
 * binary.
 *
 * A matrix entry {"backend": "http", ...} qualifies an OpenAI-compatible
 * server through the suites' HTTP variants; with "start" the harness starts
 * the server per cell on a port it picks, waits for its health URL and stops
 * it. Checked here: bad entries are refused naming the JSON path (exit 2);
 * matrices/serve.json (gauntlet serve on a synthetic tiny llama, reference and cpu)
 * qualifies; a server that never gets healthy, one that exits at once and a
 * program that does not exist each fail their cell with the reason and the
 * server's last output, within start_timeout_s, and leave no process behind;
 * an external endpoint that does not answer makes its cell skip; a worker
 * that crashes takes its server with it; --backends runs only the cells of
 * the backends it names. Every server is one this test starts on 127.0.0.1. */
#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

static char g_dir[4096];
static char g_out[65536];
static const char *g_stories;

#define BIN "'" GT_BINARY_DIR "/gauntlet'"

/* Runs a shell command line in g_dir with the shared cache; stdout+stderr in g_out. */
#define run(...) gt_test_run_in(g_dir, g_out, sizeof g_out, __VA_ARGS__)

/* The shared helpers (testutil.h) under this file's short names: paths
 * and databases are in g_dir. */
#define path_in(name) gt_test_join(g_dir, name)
#define db_open(name) gt_test_db_open(path_in(name))
#define q_int(...) gt_test_q_int(__VA_ARGS__)
#define q_text(...) gt_test_q_text(__VA_ARGS__)
#define now() gt_test_now()
#define KNOWN(check)                                                                      \
    "{\"backend\": \"deviant\", \"check\": \"functional." check "\", \"status\": \"xfail\", " \
    "\"reason\": \"deviant: functional." check "\"}"

/* A matrix on stories260K (or its stand-in, gt_test_llama) f32 with the given backends and a smoke tier. */
static const char *matrix(const char *name, const char *backends, const char *extra)
{
    char text[8192];
    snprintf(text, sizeof text,
             "{\"name\": \"http\",\n"
             " \"models\": [{\"id\": \"stories260k\", \"path\": \"%s\"}],\n"
             " \"quants\": [\"f32\"],\n"
             " \"backends\": [%s],\n"
             " \"defaults\": {\"timeout_s\": 60, \"threads\": 1},\n"
             " \"tiers\": {\"smoke\": {\"suites\": [\"smoke\"],\n"
             "   \"settings\": {\"smoke\": {\"n_tokens\": 8}}}}%s}\n",
             g_stories, backends, extra);
    const char *p = path_in(name);
    static char keep[8][4200];
    static int k;
    char *out = keep[k++ % 8];
    snprintf(out, 4200, "%s", p);
    gt_test_write_file(out, text, strlen(text));
    return out;
}

/* gt_test_live() after giving exiting processes up to a second. */
static int live_after(const char *tag, const char *word)
{
    int n = 0;
    for (int i = 0; i < 20 && (n = gt_test_live(tag, word)) > 0; i++)
        usleep(50000);
    return n;
}

/* A port on 127.0.0.1 nobody listens on (bound, then released). */
static int dead_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

#define SERVE_REF                                                                          \
    "{\"id\": \"serve-reference\", \"backend\": \"http\","                                 \
    " \"endpoint\": \"http://127.0.0.1:{port}/v1\", \"start\": [\"{gauntlet}\", \"serve\","   \
    " \"-m\", \"{model_path}\", \"-b\", \"reference\", \"--port\", \"{port}\", \"-t\","       \
    " \"{threads}\"], \"start_timeout_s\": 20}"

/* Bad http entries: the backends array, the JSON path and a word of the message. */
typedef struct bad_case {
    const char *name, *backends, *path, *what;
} bad_case;

static const bad_case BAD[] = {
    {"no endpoint", "{\"id\": \"s\", \"backend\": \"http\"}", "backends[0].endpoint",
     "required key is missing"},
    {"unknown api", "{\"id\": \"s\", \"backend\": \"http\", \"endpoint\": \"http://x/v1\", "
     "\"api\": \"rest\"}", "backends[0].api", "expected \"completions\""},
    {"unknown start placeholder", "{\"id\": \"s\", \"backend\": \"http\", \"endpoint\": "
     "\"http://x/v1\", \"start\": [\"{rooot}/x\"]}", "backends[0].start[0]",
     "unknown placeholder {rooot} (known here: {gauntlet}, {model_path}, {port}, {threads}, {root})"},
    {"https endpoint", "{\"id\": \"s\", \"backend\": \"http\", \"endpoint\": \"https://x/v1\"}",
     "backends[0].endpoint", "https is not supported"},
    {"not a URL", "{\"id\": \"s\", \"backend\": \"http\", \"endpoint\": \"127.0.0.1:8080/v1\"}",
     "backends[0].endpoint", "expected an http:// URL"},
    {"no host", "{\"id\": \"s\", \"backend\": \"http\", \"endpoint\": \"http:///v1\"}",
     "backends[0].endpoint", "expected a host"},
    {"port in start only",
     "{\"id\": \"s\", \"backend\": \"http\", \"endpoint\": \"http://127.0.0.1:8080/v1\","
     " \"start\": [\"srv\", \"--port\", \"{port}\"]}",
     "backends[0].start[2]", "uses {port} but \"endpoint\" does not"},
    {"port in endpoint only",
     "{\"id\": \"s\", \"backend\": \"http\", \"endpoint\": \"http://127.0.0.1:{port}/v1\","
     " \"start\": [\"srv\", \"--port\", \"8080\"]}",
     "backends[0].start", "does not pass it to the server"},
    {"port in health only",
     "{\"id\": \"s\", \"backend\": \"http\", \"endpoint\": \"http://127.0.0.1:8080/v1\","
     " \"health\": \"http://127.0.0.1:{port}/health\", \"start\": [\"srv\"]}",
     "backends[0].health", "uses {port} but \"endpoint\" does not"},
    {"port without start",
     "{\"id\": \"s\", \"backend\": \"http\", \"endpoint\": \"http://127.0.0.1:{port}/v1\"}",
     "backends[0].endpoint", "needs a \"start\" command"},
    {"unknown placeholder",
     "{\"id\": \"s\", \"backend\": \"http\", \"endpoint\": \"http://127.0.0.1:{port}/v1\","
     " \"start\": [\"srv\", \"{modelpath}\", \"{port}\"]}",
     "backends[0].start[1]", "unknown placeholder {modelpath}"},
    {"placeholder in endpoint",
     "{\"id\": \"s\", \"backend\": \"http\", \"endpoint\": \"http://{host}:8080/v1\"}",
     "backends[0].endpoint", "unknown placeholder {host}"},
    {"start not an array",
     "{\"id\": \"s\", \"backend\": \"http\", \"endpoint\": \"http://127.0.0.1:8080/v1\","
     " \"start\": \"srv --port 8080\"}",
     "backends[0].start", "expected an array"},
    {"empty start",
     "{\"id\": \"s\", \"backend\": \"http\", \"endpoint\": \"http://127.0.0.1:8080/v1\","
     " \"start\": []}",
     "backends[0].start", "non-empty"},
    {"start element type",
     "{\"id\": \"s\", \"backend\": \"http\", \"endpoint\": \"http://127.0.0.1:8080/v1\","
     " \"start\": [\"srv\", 8080]}",
     "backends[0].start[1]", "expected a string"},
    {"unknown key",
     "{\"id\": \"s\", \"backend\": \"http\", \"endpoint\": \"http://127.0.0.1:8080/v1\","
     " \"strat\": [\"srv\"]}",
     "backends[0].strat", "unknown key"},
    {"drivers on http",
     "{\"id\": \"s\", \"backend\": \"http\", \"endpoint\": \"http://127.0.0.1:8080/v1\","
     " \"drivers\": [{\"id\": \"d\"}]}",
     "backends[0].drivers", "unknown key"},
    {"endpoint without backend http", "{\"id\": \"cpu\", \"endpoint\": \"http://127.0.0.1:1/v1\"}",
     "backends[0].endpoint", "unknown key"},
    {"other backend kind",
     "{\"id\": \"s\", \"backend\": \"grpc\", \"endpoint\": \"http://127.0.0.1:8080/v1\"}",
     "backends[0].backend", "expected \"http\""},
    {"built-in id", "{\"id\": \"cpu\", \"backend\": \"http\", \"endpoint\": \"http://127.0.0.1:8080/v1\"}",
     "backends[0].id", "built-in backend"},
    {"bad start_timeout_s",
     "{\"id\": \"s\", \"backend\": \"http\", \"endpoint\": \"http://127.0.0.1:8080/v1\","
     " \"start_timeout_s\": 0}",
     "backends[0].start_timeout_s", "expected a number in"},
    {"bad health",
     "{\"id\": \"s\", \"backend\": \"http\", \"endpoint\": \"http://127.0.0.1:8080/v1\","
     " \"health\": \"health\"}",
     "backends[0].health", "a path"},
    {"empty model",
     "{\"id\": \"s\", \"backend\": \"http\", \"endpoint\": \"http://127.0.0.1:8080/v1\","
     " \"model\": \"\"}",
     "backends[0].model", "non-empty string"},
    {"duplicate id",
     "{\"id\": \"s\", \"backend\": \"http\", \"endpoint\": \"http://127.0.0.1:8080/v1\"},"
     " {\"id\": \"s\", \"backend\": \"http\", \"endpoint\": \"http://127.0.0.1:8081/v1\"}",
     "backends[1]", "duplicate backend"},
};
#define N_BAD ((int)(sizeof BAD / sizeof BAD[0]))

START_TEST(bad_http_entries_exit_2_naming_the_path)
{
    const bad_case *b = &BAD[_i];
    char name[64];
    snprintf(name, sizeof name, "bad%d.json", _i);
    const char *m = matrix(name, b->backends, "");
    int rc = run(BIN " plan --no-probe '%s'", m);
    ck_assert_msg(rc == 2, "case '%s': exit %d: %s", b->name, rc, g_out);
    char want[300];
    snprintf(want, sizeof want, "%s: %s", name, b->path);
    ck_assert_msg(strstr(g_out, want) != NULL, "case '%s': no '%s' in: %s", b->name, want, g_out);
    ck_assert_msg(strstr(g_out, b->what) != NULL, "case '%s': no '%s' in: %s", b->name, b->what,
                  g_out);
    /* qualify refuses it the same way, before running anything */
    rc = run(BIN " qualify '%s' --db bad%d.sqlite -q", m, _i);
    ck_assert_msg(rc == 2 && strstr(g_out, want), "case '%s': qualify exit %d: %s", b->name, rc,
                  g_out);
}
END_TEST

/* Good entries: ids on the backend axis, an external endpoint, a health URL. */
START_TEST(good_http_entries_expand)
{
    const char *m = matrix("good.json",
                           "\"reference\", " SERVE_REF ", {\"id\": \"external\", \"backend\":"
                           " \"http\", \"endpoint\": \"http://127.0.0.1:8080/v1/\", \"model\":"
                           " \"stories\", \"health\": \"/v1/models\", \"start_timeout_s\": 1.5,"
                           " \"timeout_s\": 30, \"description\": \"already running\"}",
                           ", \"gate\": {\"optional\": [{\"backend\": \"external\"}]}");
    int rc = run(BIN " plan --no-probe '%s'", m);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, g_out);
    ck_assert_msg(strstr(g_out, "stories260k/f32/reference/default") &&
                      strstr(g_out, "stories260k/f32/serve-reference/default") &&
                      strstr(g_out, "stories260k/f32/external/default"),
                  "%s", g_out);
    ck_assert_ptr_nonnull(strstr(g_out, "3 cells"));
}
END_TEST

/* The shipped serve matrix: gauntlet serve started per cell, suites over HTTP. */
START_TEST(serve_matrix_qualifies)
{
    double t0 = now();
    int rc = run("env GT_TEST_TAG=serve-matrix " BIN
                 " qualify '%s/matrices/serve.json' --db serve.sqlite --run-id one",
                 GT_SOURCE_DIR);
    double took = now() - t0;
    printf("matrices/serve.json: %.1f s\n", took);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, g_out);
    ck_assert_msg(took < 180, "matrices/serve.json took %.0f s", took);
    ck_assert_ptr_nonnull(strstr(g_out, "gate: PASS"));
    sqlite3 *h = db_open("serve.sqlite");
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM cells"), 4);
    /* Every cell started its server, saw it healthy and stopped it cleanly. */
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM results WHERE suite = 'server' AND"
                              " check_name = 'start' AND status = 'pass'"),
                     4);
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM cells WHERE log LIKE"
                              " '%%worker: the server exited with code 0 after SIGTERM%%'"),
                     4);
    /* one device per server as it names itself (gauntlet serve with the
     * reference and the cpu backend), never the endpoint template */
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM devices WHERE backend = 'http' AND"
                              " name = 'gauntlet serve' AND driver LIKE 'gauntlet %% backend %%'"
                              " AND driver_version <> ''"),
                     2);
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM devices WHERE name LIKE '%%{port}%%'"), 0);
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM cells c JOIN devices d ON d.id = c.device_id"
                              " WHERE d.backend = 'http'"),
                     4);
    /* Every cell passed, each of the four suites with real checks. */
    ck_assert_msg(q_int(h, "SELECT COUNT(*) FROM cells WHERE status = 'pass'") == 4, "%s",
                  q_text(h, "SELECT cell_id || ' ' || status || ' ' || reason FROM cells"));
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM (SELECT DISTINCT r.cell, r.suite FROM"
                              " results r WHERE r.status = 'pass' AND r.suite IN ('smoke',"
                              " 'functional', 'accuracy', 'performance'))"),
                     16);
    /* The anchors: llama.cpp's greedy tokens checked through the API; the
     * perplexity anchor needs logits an API does not return, and says so. */
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM results WHERE suite = 'anchor' AND"
                              " check_name = 'greedy' AND status = 'pass'"),
                     4);
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM results WHERE suite = 'anchor' AND"
                              " check_name = 'ppl' AND status = 'skip' AND message LIKE"
                              " 'unsupported: perplexity needs every position''s logits%%'"),
                     4);
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM results WHERE status <> 'pass' AND NOT"
                              " (suite = 'anchor' AND check_name = 'ppl')"),
                     0);
    /* the server's answers agree with the reference backend on the artifact */
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM metrics WHERE name = 'drift_top1' AND"
                              " verdict = 'pass' AND value >= 0.9"),
                     4);
    sqlite3_close(h);
    ck_assert_int_eq(live_after("GT_TEST_TAG=serve-matrix", "serve"), 0);
}
END_TEST

/* Servers that never become healthy, exit at once, cannot be executed, or
 * are a wrapper that exits leaving the real server behind (stopped too). */
START_TEST(server_that_never_gets_healthy_fails_its_cell)
{
    const char *m = matrix(
        "never.json",
        "{\"id\": \"sleeper\", \"backend\": \"http\", \"endpoint\": \"http://127.0.0.1:{port}/v1\","
        " \"start\": [\"sh\", \"-c\", \"echo sleeper starting on port $0; exec sleep 100\","
        " \"{port}\"], \"start_timeout_s\": 2},"
        " {\"id\": \"quitter\", \"backend\": \"http\", \"endpoint\": \"http://127.0.0.1:{port}/v1\","
        " \"start\": [\"sh\", \"-c\", \"echo cannot load the model >&2; exit 3\", \"{port}\"],"
        " \"start_timeout_s\": 30},"
        " {\"id\": \"missing\", \"backend\": \"http\", \"endpoint\": \"http://127.0.0.1:{port}/v1\","
        " \"start\": [\"/nonexistent/server\", \"--port\", \"{port}\"], \"start_timeout_s\": 30},"
        /* a wrapper that leaves its real server running in the background */
        " {\"id\": \"wrapper\", \"backend\": \"http\", \"endpoint\": \"http://127.0.0.1:{port}/v1\","
        " \"start\": [\"sh\", \"-c\", \"\\\"$0\\\" serve -m \\\"$1\\\" --port $2 & exit 5\", \"{gauntlet}\","
        " \"{model_path}\", \"{port}\"], \"start_timeout_s\": 30}",
        "");
    double t0 = now();
    int rc = run("env GT_TEST_TAG=never " BIN " qualify '%s' --db never.sqlite", m);
    double took = now() - t0;
    ck_assert_msg(rc == 1, "exit %d:\n%s", rc, g_out);
    /* 2 s for the sleeper, the others at once (their 30 s never waited) */
    ck_assert_msg(took < 15, "took %.1f s:\n%s", took, g_out);
    ck_assert_ptr_nonnull(strstr(g_out, "gate: FAIL"));
    sqlite3 *h = db_open("never.sqlite");
    ck_assert_str_eq(q_text(h, "SELECT status FROM cells ORDER BY idx"),
                     "fail\nfail\nfail\nfail\n");
    const char *r = q_text(h, "SELECT reason FROM cells WHERE backend = 'sleeper'");
    ck_assert_msg(strstr(r, "server.start: http://127.0.0.1:") && strstr(r, "/health did not answer"
                                                                            " 200 within 2 s") &&
                      strstr(r, "sleeper starting on port"),
                  "%s", r);
    ck_assert_int_le(q_int(h, "SELECT duration_s FROM cells WHERE backend = 'sleeper'"), 13);
    r = q_text(h, "SELECT reason FROM cells WHERE backend = 'quitter'");
    ck_assert_msg(strstr(r, "the server exited with code 3 before") &&
                      strstr(r, "cannot load the model"),
                  "%s", r);
    r = q_text(h, "SELECT reason FROM cells WHERE backend = 'missing'");
    ck_assert_msg(strstr(r, "exited with code 127") &&
                      strstr(r, "cannot execute /nonexistent/server"),
                  "%s", r);
    /* server.start or server.exit, by whether its child answered first */
    r = q_text(h, "SELECT reason FROM cells WHERE backend = 'wrapper'");
    ck_assert_msg(strstr(r, "the server exited with code 5"), "%s", r);
    ck_assert_int_lt(q_int(h, "SELECT MAX(duration_s) FROM cells WHERE backend <> 'sleeper'"), 5);
    /* the sleeper got SIGTERM and went: killed by it, nothing left */
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM cells WHERE backend = 'sleeper' AND log LIKE"
                              " '%%the server was killed by SIGTERM%%'"),
                     1);
    sqlite3_close(h);
    ck_assert_int_eq(live_after("GT_TEST_TAG=never", "sleep"), 0);
    ck_assert_int_eq(live_after("GT_TEST_TAG=never", "serve"), 0); /* the wrapper's */
}
END_TEST

/* An endpoint the harness did not start and that does not answer: skip
 * (allowed by default; a run of that cell alone ran nothing and fails). */
START_TEST(unreachable_external_endpoint_skips)
{
    char be[512];
    snprintf(be, sizeof be,
             "{\"id\": \"external\", \"backend\": \"http\", \"endpoint\":"
             " \"http://127.0.0.1:%d/v1\", \"start_timeout_s\": 1}",
             dead_port());
    const char *m = matrix("ext.json", be, "");
    double t0 = now();
    int rc = run(BIN " qualify '%s' --db ext.sqlite", m);
    /* The skip is allowed by default, but the run qualified nothing. */
    ck_assert_msg(rc == 1 && strstr(g_out, "FAIL run: 0 cells ran: all 1 cells were skipped") &&
                      !strstr(g_out, "not in allowed_skips"),
                  "exit %d:\n%s", rc, g_out);
    ck_assert_msg(now() - t0 < 10, "took %.1f s", now() - t0);
    sqlite3 *h = db_open("ext.sqlite");
    const char *r = q_text(h, "SELECT status || ': ' || reason FROM cells");
    ck_assert_msg(strncmp(r, "skip: no device: endpoint not reachable: http://127.0.0.1:", 58) == 0 &&
                      strstr(r, "/health did not answer 200 within 1 s"),
                  "%s", r);
    sqlite3_close(h);
}
END_TEST

/* A worker that dies or is killed takes its server with it (PR_SET_PDEATHSIG). */
START_TEST(crashed_worker_leaves_no_server)
{
    const char *m = matrix("crash.json", SERVE_REF, "");
    int rc = run("env GT_TEST_TAG=crash GT_FAULT='segv:*/serve-reference/*' " BIN
                 " qualify '%s' --db crash.sqlite",
                 m);
    ck_assert_msg(rc == 1, "exit %d:\n%s", rc, g_out);
    sqlite3 *h = db_open("crash.sqlite");
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM cells WHERE status = 'crash' AND reason LIKE"
                              " 'SIGSEGV%%' AND log LIKE '%%listening on http://127.0.0.1:%%'"),
                     1);
    sqlite3_close(h);
    ck_assert_int_eq(live_after("GT_TEST_TAG=crash", "serve"), 0);

    /* The same when the runner kills a hung worker at the cell's timeout. */
    m = matrix("hang.json",
               "{\"id\": \"serve-reference\", \"backend\": \"http\", \"timeout_s\": 3,"
               " \"endpoint\": \"http://127.0.0.1:{port}/v1\", \"start\": [\"{gauntlet}\","
               " \"serve\", \"-m\", \"{model_path}\", \"--port\", \"{port}\"]}",
               "");
    rc = run("env GT_TEST_TAG=hang GT_FAULT='hang:*/serve-reference/*' " BIN
             " qualify '%s' --db hang.sqlite",
             m);
    ck_assert_msg(rc == 1, "exit %d:\n%s", rc, g_out);
    h = db_open("hang.sqlite");
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM cells WHERE status = 'timeout' AND log LIKE"
                              " '%%listening on http://127.0.0.1:%%'"),
                     1);
    sqlite3_close(h);
    ck_assert_int_eq(live_after("GT_TEST_TAG=hang", "serve"), 0);
}
END_TEST

/* A suite without an HTTP variant (soak: a server's memory is not the
 * client's to watch) is reported as skipped; a cell where no suite can run
 * over HTTP is a skip saying so, after its server was started and stopped.
 * The run then qualified nothing: its gate fails, "0 cells ran". */
START_TEST(suite_without_http_variant_skips)
{
    char text[4096];
    snprintf(text, sizeof text,
             "{\"name\": \"nohttp\", \"models\": [{\"id\": \"stories260k\", \"path\": \"%s\"}],"
             " \"quants\": [\"f32\"], \"backends\": [" SERVE_REF "],"
             " \"tiers\": {\"soak\": {\"suites\": [\"soak\"],"
             " \"settings\": {\"soak\": {\"duration_s\": 1}}}}}",
             g_stories);
    const char *m = path_in("nohttp.json");
    gt_test_write_file(m, text, strlen(text));
    int rc = run(BIN " qualify '%s' --db nohttp.sqlite", m);
    ck_assert_msg(rc == 1 && strstr(g_out, "FAIL run: 0 cells ran: all 1 cells were skipped") &&
                      !strstr(g_out, "not in allowed_skips"),
                  "exit %d:\n%s", rc, g_out);
    sqlite3 *h = db_open("nohttp.sqlite");
    ck_assert_str_eq(q_text(h, "SELECT status || ': ' || reason FROM cells"),
                     "skip: unsupported: no suite of tier soak runs over HTTP\n");
    ck_assert_str_eq(q_text(h, "SELECT suite || '.' || check_name || ' ' || status || ': ' ||"
                               " message FROM results WHERE suite <> 'server'"),
                     "soak.run skip: suite soak does not run over HTTP\n");
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM cells WHERE log LIKE"
                              " '%%the server exited with code 0 after SIGTERM%%'"),
                     1);
    sqlite3_close(h);
}
END_TEST

/* --backends: only the named backends' cells run; an unknown id is exit 2. */
START_TEST(backends_option_filters_cells)
{
    const char *m = matrix("pick.json", "\"reference\", \"cpu\", " SERVE_REF, "");
    int rc = run(BIN " qualify '%s' --db pick.sqlite --backends reference,serve-reference", m);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, g_out);
    ck_assert_ptr_nonnull(strstr(g_out, "backends reference,serve-reference: 2)"));
    sqlite3 *h = db_open("pick.sqlite");
    ck_assert_str_eq(q_text(h, "SELECT cell_id FROM cells ORDER BY idx"),
                     "stories260k/f32/reference/default\n"
                     "stories260k/f32/serve-reference/default\n");
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM cells WHERE status = 'pending'"), 0);
    sqlite3_close(h);

    /* With --shard, the cells both select: of indexes 0 reference, 1 cpu,
     * 2 serve-reference, shard 2/2 holds only 1. */
    rc = run(BIN " qualify '%s' --db pick2.sqlite --backends cpu --shard 2/2 -q", m);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, g_out);
    h = db_open("pick2.sqlite");
    ck_assert_str_eq(q_text(h, "SELECT cell_id || ' ' || status FROM cells"),
                     "stories260k/f32/cpu/default pass\n");
    sqlite3_close(h);

    /* A runner's slice can be empty (cpu has index 1: nothing in 1/2):
     * nothing ran, nothing failed, and it says so instead of gating. */
    rc = run(BIN " qualify '%s' --db pick4.sqlite --backends cpu --shard 1/2", m);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, g_out);
    ck_assert_msg(strstr(g_out, "gate: nothing to judge: shard 1/2 with backends cpu"), "%s",
                  g_out);

    rc = run(BIN " qualify '%s' --db pick3.sqlite --backends reference,vulkan", m);
    ck_assert_int_eq(rc, 2);
    ck_assert_msg(strstr(g_out, "no backend \"vulkan\"") &&
                      strstr(g_out, "reference, cpu, serve-reference"),
                  "%s", g_out);
    ck_assert_int_eq(run(BIN " qualify '%s' --db pick3.sqlite --backends ,", m), 2);
    ck_assert_int_eq(run(BIN " qualify --help"), 0);
    ck_assert_ptr_nonnull(strstr(g_out, "--backends LIST"));
}
END_TEST

/* A backend's known deviations, marked in the matrix as xfail checks with
 * a reason, make its cell xfail (a documented limitation the gate allows)
 * and name them; without the marks it fails; a marked check that passes
 * makes it xpass, which the gate refuses. The server is
 * tests/py/deviant_server.py. */
START_TEST(known_deviations_are_xfail_checks)
{
    char cmd[1024], line[256] = "";
    snprintf(cmd, sizeof cmd, "exec python3 '%s/tests/py/deviant_server.py'", GT_SOURCE_DIR);
    FILE *srv = popen(cmd, "r");
    ck_assert_ptr_nonnull(srv);
    int port = 0, pid = 0;
    ck_assert_msg(fgets(line, sizeof line, srv) &&
                      sscanf(line, "listening on http://127.0.0.1:%d pid %d", &port, &pid) == 2,
                  "deviant_server.py did not start: %s", line);
    static const char *const marks[] = {
        "",
        ", \"expect\": [" KNOWN("bad_request") ", " KNOWN("negative_temperature") ", "
        KNOWN("unknown_model") "]",
        ", \"expect\": [" KNOWN("bad_request") ", " KNOWN("negative_temperature") ", "
        KNOWN("unknown_model") ", " KNOWN("bad_json") "]",
    };
    static const char *const want_status[] = {"fail\n", "xfail\n", "xpass\n"}; /* q_text: a line per row */
    static const int want_rc[] = {1, 0, 1};
    for (int i = 0; i < 3; i++) {
        char text[4096], name[32], db[32];
        snprintf(text, sizeof text,
                 "{\"name\": \"deviant\", \"models\": [{\"id\": \"stories260k\", \"path\": \"%s\"}],"
                 " \"quants\": [\"f32\"], \"backends\": [{\"id\": \"deviant\", \"backend\": \"http\","
                 " \"endpoint\": \"http://127.0.0.1:%d/v1\"}], \"defaults\": {\"timeout_s\": 60,"
                 " \"threads\": 1}, \"tiers\": {\"functional\": {\"suites\": [\"functional\"]}}%s}",
                 g_stories, port, marks[i]);
        snprintf(name, sizeof name, "deviant%d.json", i);
        snprintf(db, sizeof db, "deviant%d.sqlite", i);
        gt_test_write_file(path_in(name), text, strlen(text));
        int rc = run(BIN " qualify '%s' --db %s", path_in(name), db);
        ck_assert_msg(rc == want_rc[i], "case %d: exit %d:\n%s", i, rc, g_out);
        sqlite3 *h = db_open(db);
        const char *st = q_text(h, "SELECT status FROM cells");
        ck_assert_msg(!strcmp(st, want_status[i]), "case %d: %s:\n%s", i, st, g_out);
        const char *r = q_text(h, "SELECT reason FROM cells");
        if (i == 1)
            ck_assert_msg(strstr(r, "known limitation (deviant: functional.bad_request): "
                                    "functional.bad_request: max_tokens -1 was not refused "
                                    "within 5 s") &&
                              strstr(r, "[+2 more known-failing checks]"),
                          "%s", r);
        if (i == 2)
            ck_assert_msg(strstr(r, "functional.bad_json was expected to fail (deviant: "
                                    "functional.bad_json) but passed"),
                          "%s", r);
        /* The checks keep what they measured, marked or not. */
        ck_assert_str_eq(q_text(h, "SELECT status FROM results WHERE check_name = 'unknown_model'"),
                         "fail\n");
        sqlite3_close(h);
    }
    kill(pid, SIGTERM);
    pclose(srv);
}
END_TEST

/* A start command that exits 77 before it is healthy says the cell cannot
 * run here (ci/peer-llamacpp.sh --exec without the peer): a skip of the
 * harness's category "not built", its last line only the reason's text,
 * which allowed_skips can allow by that category. The {root} placeholder
 * is the matrix's root folder. A command that prints a category the gate
 * would allow ("skipped by the matrix: ...") gets "not built" all the same,
 * which a gate with allowed_skips [] does not allow (issue 34, finding 6). */
START_TEST(start_exit_77_is_a_skip)
{
    const char *m = matrix(
        "skipper.json",
        "{\"id\": \"skipper\", \"backend\": \"http\", \"endpoint\": \"http://127.0.0.1:{port}/v1\","
        " \"start\": [\"sh\", \"-c\", \"echo starting in $1; echo peer not built: none in $1 >&2;"
        " exit 77\", \"{port}\", \"{root}\"], \"start_timeout_s\": 30}",
        ", \"gate\": {\"allowed\": [\"pass\", \"skip\"], \"allowed_skips\": [\"not built\"]}");
    double t0 = now();
    int rc = run(BIN " qualify '%s' --db skipper.sqlite", m);
    /* allowed_skips allows it; the run, which qualified nothing, fails */
    ck_assert_msg(rc == 1 && strstr(g_out, "FAIL run: 0 cells ran: all 1 cells were skipped") &&
                      !strstr(g_out, "not in allowed_skips"),
                  "exit %d:\n%s", rc, g_out);
    ck_assert_msg(now() - t0 < 10, "took %.1f s", now() - t0);
    sqlite3 *h = db_open("skipper.sqlite");
    ck_assert_str_eq(q_text(h, "SELECT status FROM cells"), "skip\n");
    char want[4400];
    snprintf(want, sizeof want,
             "not built: the start command exited with code 77: peer not built: none in %s\n",
             g_dir);
    ck_assert_str_eq(q_text(h, "SELECT reason FROM cells"), want);
    sqlite3_close(h);

    /* The spoof: a server that claims the matrix skipped it, next to a
     * cell that passes, under serve.json's gate (allowed_skips []). */
    char backends[2048];
    snprintf(backends, sizeof backends,
             "\"reference\", {\"id\": \"spoof\", \"backend\": \"http\","
             " \"endpoint\": \"http://127.0.0.1:{port}/v1\", \"start\": [\"sh\", \"-c\","
             " \"echo skipped by the matrix: server crashed while loading; exit 77\", \"{port}\"],"
             " \"start_timeout_s\": 30}");
    m = matrix("spoof.json", backends,
               ", \"gate\": {\"allowed\": [\"pass\", \"xfail\", \"skip\"],"
               " \"allowed_skips\": []}");
    rc = run(BIN " qualify '%s' --db spoof.sqlite", m);
    ck_assert_msg(rc == 1 && strstr(g_out, "not in allowed_skips: none") &&
                      strstr(g_out, "skip: not built: the start command exited with code 77:"
                                    " skipped by the matrix: server crashed while loading"),
                  "exit %d:\n%s", rc, g_out);
    h = db_open("spoof.sqlite");
    ck_assert_str_eq(q_text(h, "SELECT status FROM cells ORDER BY idx"), "pass\nskip\n");
    sqlite3_close(h);
}
END_TEST

/* Every bound written is judged over HTTP too, even one equal to the
 * suite's default: the HTTP smoke reports no NaN count, so a written
 * smoke.nonfinite {"eq": 0} (its default) fails the cell, naming it
 * (issue 34, finding 8). */
START_TEST(written_bound_unreported_over_http_fails)
{
    const char *m = matrix("unreported.json", SERVE_REF,
                           ", \"tolerances\": {\"default\": {\"smoke.nonfinite\": {\"eq\": 0}}}");
    int rc = run(BIN " qualify '%s' --db unreported.sqlite", m);
    ck_assert_msg(rc == 1 && strstr(g_out, "FAIL stories260k/f32/serve-reference/default: fail:"
                                           " smoke.tolerances: tolerance set for smoke.nonfinite,"
                                           " metric not reported"),
                  "exit %d:\n%s", rc, g_out);
}
END_TEST

/* "api": "chat": gauntlet serve on SmolLM2 (its ChatML template) qualified
 * through /v1/chat/completions, every suite: the usage counts and the
 * reference come from the user turn rendered locally with the same
 * template, accuracy by next-token requests on chat logprobs. */
START_TEST(chat_api_cell_qualifies)
{
    char text[4096];
    snprintf(text, sizeof text,
             "{\"name\": \"chat\",\n"
             " \"models\": [{\"id\": \"smollm2\", \"path\": \"%s\", \"quants\": [\"q4_1\"]}],\n"
             " \"quants\": [\"q4_1\"],\n"
             " \"backends\": [{\"id\": \"serve-chat\", \"backend\": \"http\", \"api\": \"chat\","
             " \"endpoint\": \"http://127.0.0.1:{port}/v1\", \"start\": [\"{gauntlet}\", \"serve\","
             " \"-m\", \"{model_path}\", \"-b\", \"cpu\", \"--port\", \"{port}\", \"-t\", \"2\", \"-q\"]}],\n"
             " \"defaults\": {\"timeout_s\": 900, \"threads\": 2},\n"
             " \"tolerances\": {\"default\": {\"accuracy.drift_top1\": {\"min\": 0.98},"
             " \"accuracy.drift_kld_topn_mean\": {\"max\": 1e-6}}},\n"
             " \"tiers\": {\"t\": {\"suites\": [\"smoke\", \"functional\", \"accuracy\", \"performance\"],"
             " \"settings\": {\"smoke\": {\"n_tokens\": 8}, \"functional\": {\"n_tokens\": 4},"
             " \"accuracy\": {\"max_scored\": 12, \"max_prompts\": 2, \"n_gen\": 4},"
             " \"performance\": {\"n_prompt\": 16, \"n_gen\": 8, \"n_clients\": 1, \"requests\": 2}}}}}\n",
             gt_test_smollm2());
    const char *m = path_in("chat.json");
    gt_test_write_file(m, text, strlen(text));
    int rc = run(BIN " qualify '%s' --db chat.sqlite", m);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, g_out);
    sqlite3 *h = db_open("chat.sqlite");
    ck_assert_str_eq(q_text(h, "SELECT status FROM cells"), "pass\n");
    ck_assert_int_eq(q_int(h, "SELECT COUNT(DISTINCT suite) FROM results WHERE status = 'pass' AND"
                              " suite IN ('smoke', 'functional', 'accuracy', 'performance')"),
                     4);
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM results WHERE status <> 'pass'"), 0);
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM metrics WHERE name = 'echo_method' AND"
                              " value = 0"),
                     1);
    ck_assert_int_eq(q_int(h, "SELECT COUNT(*) FROM metrics WHERE name = 'scored_tokens' AND"
                              " value = 12"),
                     1);
    /* the rendered turn: the default system prompt and the markers count */
    ck_assert_msg(q_int(h, "SELECT COUNT(*) FROM results WHERE check_name = 'usage' AND message"
                           " LIKE 'usage matches: %% prompt tokens%%'") == 1,
                  "%s", q_text(h, "SELECT message FROM results WHERE check_name = 'usage'"));
    sqlite3_close(h);
}
END_TEST

int main(void)
{
    gt_test_require_gauntlet();
    g_stories = gt_test_llama(); /* written once here, before the cases fork */
    snprintf(g_dir, sizeof g_dir, "%s", gt_test_tmp("qh"));
    mkdir(g_dir, 0755);
    Suite *s = suite_create("qualify_http");
    TCase *tc = tcase_create("qualify_http");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, bad_http_entries_exit_2_naming_the_path, 0, N_BAD);
    tcase_add_test(tc, good_http_entries_expand);
    tcase_add_test(tc, serve_matrix_qualifies);
    tcase_add_test(tc, server_that_never_gets_healthy_fails_its_cell);
    tcase_add_test(tc, unreachable_external_endpoint_skips);
    tcase_add_test(tc, crashed_worker_leaves_no_server);
    tcase_add_test(tc, suite_without_http_variant_skips);
    tcase_add_test(tc, backends_option_filters_cells);
    tcase_add_test(tc, known_deviations_are_xfail_checks);
    tcase_add_test(tc, start_exit_77_is_a_skip);
    tcase_add_test(tc, written_bound_unreported_over_http_fails);
    gt_test_add_if(tc, chat_api_cell_qualifies, gt_test_smollm2() != NULL && !gt_test_sanitized(),
                   gt_test_sanitized()
                       ? "a chat cell (SmolLM2, every suite) takes many minutes instrumented; "
                         "it runs in the plain build (ci/sanitize.sh lists it)"
                       : "a chat cell needs a model with a chat template: SmolLM2, which was not "
                         "found (ci/fetch-smollm2.sh or GT_SMOLLM2)");
    suite_add_tcase(s, tc);
    return gt_test_run(s);
}
