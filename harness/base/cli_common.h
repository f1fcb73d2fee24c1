/* cli_common.h: what the verbs, and the libraries that serve them, share:
 * number parsing with clear errors, and opening a model + backend + session
 * from the common options (-m -b -t --driver -c). */
#ifndef GT_CLI_COMMON_H
#define GT_CLI_COMMON_H

#include <stdbool.h>
#include <stdint.h>

#include "gt/backend.h"
#include "gt/constraint.h"
#include "gt/model.h"
#include "gt/session.h"

/* Process exit codes, of the verbs and of the worker: 0 ok, 1 a check
 * failed, 2 usage or configuration error. */
#define GT_EXIT_OK 0
#define GT_EXIT_FAIL 1
#define GT_EXIT_USAGE 2
/* A server start command that exits with this before it is healthy says the
 * cell cannot run here (automake's skip code): the cell is a skip whose
 * reason is the command's last output line (e.g. ci/peer-llamacpp.sh
 * --exec without the peer built). */
#define GT_EXIT_SKIP 77

typedef struct gt_cli_run {
    gt_model *model;
    gt_backend *backend;
    gt_session *session;
    double load_seconds; /* model open + session creation */
} gt_cli_run;

/* Opens everything; on failure prints "gauntlet VERB: message" to stderr and
 * returns -1 (callers exit 2). driver and n_ctx may be NULL/0. */
int gt_cli_open(const char *verb, const char *model_path, const char *backend, int n_threads,
                const char *driver, int n_ctx, gt_cli_run *run);
/* The same with a session of n_seq_max sequences (gt_session_params; 0 is
 * gt_cli_open's one). */
int gt_cli_open_seqs(const char *verb, const char *model_path, const char *backend, int n_threads,
                     const char *driver, int n_ctx, int n_seq_max, gt_cli_run *run);
void gt_cli_close(gt_cli_run *run);

/* Parse helpers: print "gauntlet VERB: --opt expects ..." and return -1. */
int gt_cli_int(const char *verb, const char *opt, const char *s, long min, long max, long *out);
int gt_cli_double(const char *verb, const char *opt, const char *s, double *out);
int gt_cli_u64(const char *verb, const char *opt, const char *s, uint64_t *out);

/* Monotonic seconds. */
double gt_now(void);

/* The constraint of --json-schema FILE (schema_path) or --json-object
 * (json_object; schema_path NULL), or NULL in *out when neither is given.
 * On failure (unreadable file, a schema the subset refuses) prints
 * "gauntlet VERB: FILE: message" and returns -1 (callers exit 2). */
int gt_cli_constraint(const char *verb, const gt_model *m, const char *schema_path,
                      bool json_object, gt_constraint **out);

/* Tokenizes with the model's BOS rule (or none when no_bos); returns a
 * malloc'ed array and its length in *n, or NULL after printing an error. */
int32_t *gt_cli_tokenize(const char *verb, const gt_model *m, const char *text, bool no_bos,
                         int *n);

#endif
