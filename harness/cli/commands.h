/* commands.h: the face of harness/cli, the gauntlet verbs. Each lives in
 * harness/cli/cmd_<verb>.c, takes argv with argv[0] = the verb, handles its
 * own --help, and returns the process exit code: 0 ok, 1 check failed, 2
 * usage or configuration error. Diagnostics go to stderr; results to stdout.
 *
 * May use: every other folder of the harness, suites, reports, the runtime's
 * public headers. Nothing uses cli. */
#ifndef GT_COMMANDS_H
#define GT_COMMANDS_H

#include "base.h" /* GT_EXIT_OK, GT_EXIT_FAIL, GT_EXIT_USAGE */

int cmd_inspect(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_anchors(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_logits(int argc, char **argv);
int cmd_devices(int argc, char **argv);
int cmd_test_ops(int argc, char **argv);
int cmd_bench(int argc, char **argv);
/* `bench --json-schema/--json-object` (cmd_bench_schema.c): constrained
 * decoding's per-token cost beside decode. */
int gt_bench_schema(const char *model, const char *backend, int threads, const char *driver,
                    const char *schema, bool json_object, const char *prompt, long n_gen,
                    long reps);
int cmd_qualify(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_worker(int argc, char **argv);
int cmd_db(int argc, char **argv);
int cmd_merge(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_fetch(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_tolerances(int argc, char **argv);

#endif
