/* bench.h: the face of harness/bench: the machine measurements behind
 * `gauntlet bench` (read bandwidth, BLAS sgemm rate on a model's shapes, the
 * int8 multiply-accumulate peak) and the helper that runs a measurement in a
 * child process, so its memory, threads and crashes stay out of the caller.
 *
 * May use: base, the cpu backend's faces (backends/cpu/cpu_blas.h: the same
 * BLAS the backend would load; cpu_limits.h: the int8 peak its integer GEMM
 * is judged against), the runtime's public headers. */
#ifndef GT_BENCH_H
#define GT_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "gt/model.h"

/* Runs fn(arg, out) in a forked child and copies its *out (size bytes) back
 * over a pipe. Returns 0, or -1 with why (fork failed, child crashed). */
int bench_in_child(void (*fn)(const void *, void *), const void *arg, void *out, size_t size,
                   char *why, size_t why_len);

/* GFLOP/s of the driver profile's BLAS (driver as for the cpu backend,
 * NULL = libopenblas.so.0) on one layer's matrix shapes of hp at M = m rows,
 * on nt BLAS threads (best of three after a warm-up). Fills name with the
 * library's description; 0 when no BLAS can be loaded. */
/* The cpu backend's int8 multiply-accumulate peak on nt threads, GOP/s
 * (cpu_limits.h); 0 with isa saying why where it has no integer kernel. */
double bench_int8_peak(int nt, char *isa, size_t isa_len);
double bench_sgemm_rate(const char *driver, const gt_hparams *hp, int m, int nt, char *name,
                        size_t name_len);

enum { BENCH_MAX_REPS = 100, BENCH_MAX_DEPTHS = 8 };

/* One backend's measurement (bench_run.c), run by bench_in_child: the
 * model on backend in one session of max(depth) + max(pp, tg) positions;
 * at each depth (tokens already in the cache, filled by one untimed
 * prefill) a warm-up and reps repetitions of a pp-token prefill and of tg
 * single-token decodes (either 0 = skipped). */
typedef struct bench_backend_arg {
    const char *backend, *driver, *model;
    long pp, tg, reps, threads;
    int n_depth;
    long depth[BENCH_MAX_DEPTHS];
} bench_backend_arg;

typedef struct bench_res {
    int ok;
    char err[600];
    char backend[32], device[128], driver[128], driver_version[64], extra[256];
    int threads;
    double load_s;
    int n_depth;
    long depth[BENCH_MAX_DEPTHS];
    int n_pp[BENCH_MAX_DEPTHS], n_tg[BENCH_MAX_DEPTHS];
    double pp[BENCH_MAX_DEPTHS][BENCH_MAX_REPS], tg[BENCH_MAX_DEPTHS][BENCH_MAX_REPS];
    uint64_t peak_rss, kv_bytes;
} bench_res;

void bench_backend_child(const void *arg, void *out);

/* One run of llama.cpp's llama-bench (the peer of `gauntlet bench --peer`):
 * the binary at path on model with -p pp -n tg -d depths -t threads -r 1
 * -o json. Fills the t/s of its pp and tg tests at each depth (index as in
 * depth; 0 when not run) and its build ("b<number>-<commit>"). Returns 0,
 * or -1 with why (could not run, exited nonzero: its last output line,
 * printed no JSON, a result missing). */
typedef struct bench_peer_run {
    double pp_tps[BENCH_MAX_DEPTHS], tg_tps[BENCH_MAX_DEPTHS];
    char build[64];
} bench_peer_run;

int bench_peer_llamabench(const char *path, const char *model, long pp, long tg, int n_depth,
                          const long *depth, int threads, bench_peer_run *out, char *why,
                          size_t why_len);

#endif
