/* testutil.h: what every Check test here shares: locating test models,
 * temporary files, reading files and running commands, and running a suite
 * with CTest's skip convention. */
#ifndef GT_TESTUTIL_H
#define GT_TESTUTIL_H

#include <check.h>
#include <pthread.h>
#include <stddef.h>

#define GT_TEST_SKIP 77 /* CTest SKIP_RETURN_CODE */

/* Path of a file under ../shared/models (e.g. "stories260K.gguf"), or under
 * $GT_MODEL_DIR when set; NULL when absent. Static storage. */
const char *gt_test_model(const char *relpath);

/* The SmolLM2-135M Q4_1 file fetched by ci/fetch-smollm2.sh, or NULL. */
const char *gt_test_smollm2(void);

/* A fresh path in a per-process temporary folder, e.g. gt_test_tmp("bad.gguf"). */
const char *gt_test_tmp(const char *name);

/* Writes n bytes to path; fails the current test on error. */
void gt_test_write_file(const char *path, const void *data, size_t n);

/* The whole file, NUL-terminated (malloc'ed), or NULL when unreadable. */
char *gt_test_slurp(const char *path);

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

/* Runs the suite (CK_ENV-controlled verbosity), returns the process exit code. */
int gt_test_run(Suite *s);

/* For main(): print why and exit with the skip code when a model is absent. */
void gt_test_require(const char *path, const char *what);

#endif
