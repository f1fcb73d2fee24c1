/* bench.h: the face of harness/bench: the machine measurements behind
 * `gauntlet bench` (read bandwidth, BLAS sgemm rate on a model's shapes) and
 * the helper that runs a measurement in a child process, so its memory,
 * threads and crashes stay out of the caller.
 *
 * May use: base, the cpu backend's face (backends/cpu/cpu_blas.h: the same
 * BLAS the backend would load), the runtime's public headers. */
#ifndef GT_BENCH_H
#define GT_BENCH_H

#include <stddef.h>

#include "gt/model.h"

/* Runs fn(arg, out) in a forked child and copies its *out (size bytes) back
 * over a pipe. Returns 0, or -1 with why (fork failed, child crashed). */
int bench_in_child(void (*fn)(const void *, void *), const void *arg, void *out, size_t size,
                   char *why, size_t why_len);

/* GFLOP/s of the driver profile's BLAS (driver as for the cpu backend,
 * NULL = libopenblas.so.0) on one layer's matrix shapes of hp at M = m rows,
 * on nt BLAS threads (best of three after a warm-up). Fills name with the
 * library's description; 0 when no BLAS can be loaded. */
double bench_sgemm_rate(const char *driver, const gt_hparams *hp, int m, int nt, char *name,
                        size_t name_len);

/* One run of llama.cpp's llama-bench (the peer of `gauntlet bench --peer`):
 * the binary at path on model with -p pp -n tg -t threads -r 1 -o json.
 * Fills the t/s of its pp and tg tests (0 when not run) and its build
 * ("b<number>-<commit>"). Returns 0, or -1 with why (could not run, exited
 * nonzero: its last output line, printed no JSON). */
typedef struct bench_peer_run {
    double pp_tps, tg_tps;
    char build[64];
} bench_peer_run;

int bench_peer_llamabench(const char *path, const char *model, long pp, long tg, int threads,
                          bench_peer_run *out, char *why, size_t why_len);

#endif
