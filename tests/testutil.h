/* testutil.h: what every Check test here shares: locating test models,
 * temporary files, and running a suite with CTest's skip convention. */
#ifndef GT_TESTUTIL_H
#define GT_TESTUTIL_H

#include <check.h>
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

/* Runs the suite (CK_ENV-controlled verbosity), returns the process exit code. */
int gt_test_run(Suite *s);

/* For main(): print why and exit with the skip code when a model is absent. */
void gt_test_require(const char *path, const char *what);

#endif
