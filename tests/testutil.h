/* testutil.h: what every Check test here shares: locating test models,
 * temporary files, reading files and running commands, querying a results
 * database, a test HTTP server, a `gauntlet serve` started for the test,
 * and running a suite with CTest's skip convention. */
#ifndef GT_TESTUTIL_H
#define GT_TESTUTIL_H

#include <check.h>
#include <pthread.h>
#include <stdbool.h>
#include <sqlite3.h>
#include <stddef.h>
#include <sys/types.h>

#define GT_TEST_SKIP 77 /* CTest SKIP_RETURN_CODE */

/* GT_TEST_NO_SHARED=1: every test behaves as if ../shared (and
 * $GT_MODEL_DIR) did not exist, as in a fresh clone. */
bool gt_test_no_shared(void);

/* This build is instrumented (GT_SANITIZE: ASan/UBSan, 3-5x slower). The few
 * cases that run a real model at length print a skip there instead: the
 * plain build runs them, and under ASan they would hold the CI step for
 * tens of minutes without exercising any code the other cases do not. */
static inline bool gt_test_sanitized(void)
{
#if defined(GT_TEST_SANITIZED) && GT_TEST_SANITIZED
    return true;
#else
    return false;
#endif
}

/* Path of a file under ../shared/models (e.g. "stories260K.gguf"), or under
 * $GT_MODEL_DIR when set; NULL when absent. Static storage. A "vocab/..."
 * file not found there is looked up in the fetch cache's models folder,
 * where ci/fetch-vocabs.sh puts llama.cpp's vocabularies (so a fresh clone
 * has them too). */
const char *gt_test_model(const char *relpath);

/* Path of a file under ../shared itself (e.g. "schemas/junit.xsd"); NULL
 * when absent. Static storage. */
const char *gt_test_shared(const char *relpath);

/* A llama-family model that is always there: stories260K.gguf when
 * gt_test_model finds it, otherwise a synthetic stand-in of the same shape
 * (preset "stories260k", fixed seed, f32; the output rows of its special
 * and byte tokens zeroed so that greedy text is plain pieces, as a trained
 * model's is), written once per process into the test's temporary folder. Call it from main() first so forked test cases
 * share the one file. Fails (exits 1) only when the stand-in cannot be
 * written. */
const char *gt_test_llama(void);
/* Whether gt_test_llama() is the real stories260K (whose golden numbers
 * and vocabulary some cases check). */
bool gt_test_llama_is_stories(void);

/* matrices/quickstart.json rewritten into the test's temporary folder with
 * its root at the source tree and its stories260k model, if it has one, at
 * gt_test_llama() (url and checksum dropped when that is the stand-in), so
 * a quickstart qualifies without ../shared too. Fails the test when it
 * cannot. */
const char *gt_test_quickstart(void);

/* Asserts that the JUnit file xml validates (xmllint --schema) against
 * reports/junit.xsd, and against ../shared/schemas/junit.xsd when that
 * exists (gt_test_shared). */
void gt_test_assert_junit(const char *xml);

/* Adds tf to tc when ok; otherwise prints "SKIP <case>: <why>" and counts
 * the skip. gt_test_run exits with the skip code when no case was added. */
#define gt_test_add_if(tc, tf, ok, why) gt_test_add_if_(tc, tf, #tf, ok, why)
void gt_test_add_if_(TCase *tc, const TTest *tf, const char *name, bool ok, const char *why);

/* The SmolLM2-135M Q4_1 file fetched by ci/fetch-smollm2.sh, or NULL. */
const char *gt_test_smollm2(void);
/* Gemma 3 270M Q4_K_M ($GT_GEMMA3, or the models cache ci/fetch-models.sh
 * fills), or NULL. */
const char *gt_test_gemma3(void);

/* The test oracle we did not write (gguf-py + numpy, installed by
 * ci/test.sh): its PYTHONPATH ($GT_PYORACLE, else the cache's
 * gauntlet/pyoracle), and whether it imports. */
const char *gt_test_pyoracle(void);
/* Whether the opencl backend opens here, asked in a forked child (PoCL's
 * threads must not be inherited by forked cases, and a driver that crashes
 * on probe must not take the test with it); why gets its error. */
bool gt_test_opencl_opens(char *why, size_t cap);
bool gt_test_have_pyoracle(void);

/* A fetched model: the file $env_name names, else FILE in the fetch cache
 * (ci/fetch-models.sh); NULL when neither exists. Static storage. */
const char *gt_test_fetched(const char *env_name, const char *file);

/* A fresh path in a per-process temporary folder, e.g. gt_test_tmp("bad.gguf"). */
const char *gt_test_tmp(const char *name);

/* Writes n bytes to path; fails the current test on error. */
void gt_test_write_file(const char *path, const void *data, size_t n);

/* The whole file, NUL-terminated (malloc'ed), or NULL when unreadable. */
char *gt_test_slurp(const char *path);

/* dir/name in one of 8 rotating static buffers. */
const char *gt_test_join(const char *dir, const char *name);

/* Seconds on the monotonic clock. */
double gt_test_now(void);

/* A results database opened read-only (busy timeout 5 s); fails the test
 * when it cannot be opened. */
sqlite3 *gt_test_db_open(const char *path);
/* The first column of the first row of a printf-formatted query, -1 when
 * there is none; fails the test when the query does not prepare. */
long long gt_test_q_int(sqlite3 *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The first column of every row, each followed by '\n' ("NULL" for null),
 * in a static buffer. */
const char *gt_test_q_text(sqlite3 *h, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* system() on a printf-formatted command line: its exit code, -1 when it
 * did not exit normally. */
int gt_test_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Runs a shell command line (env assignments allowed) in dir with
 * XDG_CACHE_HOME=<dir>/cache; keeps stdout+stderr (truncated to cap) in out.
 * Returns its exit code, or 128 + the signal that killed it. */
int gt_test_run_in(const char *dir, char *out, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* A one-thread HTTP server on 127.0.0.1 (an ephemeral port) for tests that
 * fetch: each connection's request head (up to the blank line) is handed to
 * fn, which writes the whole answer to fd; the connection is then closed
 * ("Connection: close" answers). */
typedef void (*gt_test_http_fn)(int fd, const char *request, void *user);
typedef struct gt_test_http {
    int fd, port;
    pthread_t th;
    volatile int stop;
    gt_test_http_fn fn;
    void *user;
} gt_test_http;
void gt_test_http_start(gt_test_http *s, gt_test_http_fn fn, void *user);
void gt_test_http_stop(gt_test_http *s);
/* Writes all n bytes to a socket (stops quietly when the peer went away). */
void gt_test_send_all(int fd, const void *p, size_t n);

/* A `gauntlet serve` (this build's) that the test started on 127.0.0.1. */
typedef struct gt_test_server {
    pid_t pid; /* 0 when not running */
    int port;
    char log[4200]; /* its stderr, in the test folder */
} gt_test_server;
/* Starts `gauntlet serve -m model -b reference --port 0 -t 1` and the
 * arguments in extra (NULL-terminated; may be NULL), reads the port from its
 * "listening on" line and waits for GET /health to answer 200 (10 s each).
 * 0, or -1 when it exited or did not come up in time. */
int gt_test_serve_start(gt_test_server *s, const char *model, const char *const *extra);
/* SIGTERM, then its exit status (128 + the signal that ended it), its log
 * removed; -1 when it was not running, or did not exit within 20 s (then
 * it is SIGKILLed). */
int gt_test_serve_stop(gt_test_server *s);

/* Processes whose environment holds tag ("NAME=value") and whose command
 * line contains word: what a run tagged with tag left behind. */
int gt_test_live(const char *tag, const char *word);

/* Runs the suite (CK_ENV-controlled verbosity), returns the process exit
 * code: 0 or 1, or GT_TEST_SKIP (saying so) when the suite holds no case
 * because every one was skipped with its reason (gt_test_add_if). No case
 * run and none skipped with a reason (a CK_RUN_SUITE/CK_RUN_CASE filter
 * that matches nothing) is 1, "FAIL: 0 cases ran": zero coverage is a
 * failure, never a skip. */
int gt_test_run(Suite *s);

/* For main(): print why and exit with the skip code when a model is absent. */
void gt_test_require(const char *path, const char *what);
/* The same for this build's gauntlet program (tests that run it). */
void gt_test_require_gauntlet(void);

#endif
