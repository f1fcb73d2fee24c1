/* bench_machine.c: what `gauntlet bench` measures about the machine itself,
 * so a backend's speed can be put against it in the same run (see
 * bench_machine.h), and the child-process helper the bench runs everything
 * in. */
#include "bench.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base.h"
#include "cpu_blas.h"
#include "cpu_limits.h"

/* Runs fn(arg, out) in a child and copies *out back (size bytes). */
int bench_in_child(void (*fn)(const void *, void *), const void *arg, void *out, size_t size,
                    char *why, size_t why_len)
{
    int fd[2];
    if (pipe(fd) != 0) {
        snprintf(why, why_len, "pipe failed");
        return -1;
    }
    fflush(NULL);
    const pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]);
        close(fd[1]);
        snprintf(why, why_len, "fork failed");
        return -1;
    }
    if (pid == 0) {
        close(fd[0]);
        fn(arg, out);
        const char *p = out;
        size_t left = size;
        while (left) {
            const ssize_t w = write(fd[1], p, left);
            if (w <= 0)
                break;
            p += w, left -= (size_t)w;
        }
        close(fd[1]);
        _exit(0);
    }
    close(fd[1]);
    char *p = out;
    size_t got = 0;
    while (got < size) {
        const ssize_t r = read(fd[0], p + got, size - got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (got != size) {
        if (WIFSIGNALED(status))
            snprintf(why, why_len, "child died with signal %d", WTERMSIG(status));
        else
            snprintf(why, why_len, "child exited (status %d) without a result", WEXITSTATUS(status));
        return -1;
    }
    return 0;
}

/* One thread's share of sgemm_rate: its column tile of every layer shape. */
typedef struct sgemm_part {
    gt_cpu_sgemm_fn sgemm;
    const float *a, *b;
    float *c;
    int m, t, nt;
    const int (*shapes)[3];
    size_t n_shapes;
} sgemm_part;

static void *sgemm_part_run(void *arg)
{
    const sgemm_part *p = arg;
    for (size_t s = 0; s < p->n_shapes; s++) {
        const int n = p->shapes[s][0], k = p->shapes[s][1];
        const int n0 = (int)((long)n * p->t / p->nt), n1 = (int)((long)n * (p->t + 1) / p->nt);
        for (int r = 0; r < p->shapes[s][2] && n1 > n0; r++)
            p->sgemm(101, 111, 112, p->m, n1 - n0, k, 1.0f, p->a, k, p->b + (size_t)n0 * k, k, 0.0f,
                     p->c + n0, n);
    }
    return NULL;
}

/* The rate the cpu backend gets from this BLAS: as cpu_matmul.c does, the
 * BLAS runs single-threaded and each of nt threads multiplies its own tile
 * of weight rows (one call per tile) against all M activation rows. (One
 * multi-threaded call per shape measured ~10% below what the backend
 * reached, and the f32 prefill showed as 111% of it.) */
static double sgemm_rate(const gt_cpu_blas *blas, const gt_hparams *hp, int pp, int nt)
{
    if (blas->set_num_threads)
        blas->set_num_threads(1);
    nt = nt < 1 ? 1 : nt > 256 ? 256 : nt;
    const int E = hp->n_embd, KV = hp->n_head_kv * hp->head_dim, Q = hp->n_head * hp->head_dim;
    const int FF = hp->n_ff, M = pp > 0 ? pp : 512;
    /* one layer: (N, K, count) */
    const int shapes[][3] = {{Q, E, 1}, {KV, E, 2}, {E, Q, 1}, {FF, E, 2}, {E, FF, 1}};
    const size_t n_shapes = sizeof shapes / sizeof shapes[0];
    int maxk = E > FF ? E : FF, maxn = E > FF ? E : FF;
    maxk = maxk > Q ? maxk : Q, maxn = maxn > Q ? maxn : Q;
    float *a = malloc(sizeof(float) * (size_t)M * maxk);
    float *b = malloc(sizeof(float) * (size_t)maxn * maxk);
    float *c = malloc(sizeof(float) * (size_t)M * maxn);
    double best = 0.0, flops = 0.0;
    for (size_t s = 0; s < n_shapes; s++)
        flops += 2.0 * M * shapes[s][0] * shapes[s][1] * shapes[s][2];
    if (a && b && c) {
        for (size_t i = 0; i < (size_t)M * maxk; i++)
            a[i] = (float)(i % 97) * 0.01f;
        for (size_t i = 0; i < (size_t)maxn * maxk; i++)
            b[i] = (float)(i % 89) * 0.01f;
        sgemm_part parts[256];
        pthread_t th[256];
        for (int rep = 0; rep < 4; rep++) { /* the first is the warm-up */
            const double t0 = gt_now();
            int started = 0;
            for (int t = 0; t < nt; t++) {
                parts[t] = (sgemm_part){blas->sgemm, a, b, c, M, t, nt, shapes, n_shapes};
                if (t > 0 && pthread_create(&th[t], NULL, sgemm_part_run, &parts[t]) != 0)
                    break;
                started = t + 1;
            }
            sgemm_part_run(&parts[0]);
            for (int t = 1; t < started; t++)
                pthread_join(th[t], NULL);
            const double dt = gt_now() - t0;
            if (started < nt)
                break; /* a thread that did not start: no rate for nt threads */
            if (rep > 0 && flops / dt / 1e9 > best)
                best = flops / dt / 1e9;
        }
    }
    free(a);
    free(b);
    free(c);
    return best;
}

double bench_sgemm_rate(const char *driver, const gt_hparams *hp, int m, int nt, char *name,
                        size_t name_len)
{
    /* The cpu backend's own loader: the same library, and the same
     * OPENBLAS_CORETYPE rule (an OpenBLAS that does not know the CPU model
     * falls back to slow SSE3 kernels), so the rate is the one it gets. */
    gt_cpu_blas blas;
    gt_cpu_blas_load(driver, &blas);
    if (!blas.sgemm) {
        snprintf(name, name_len, "%s", blas.why[0] ? blas.why : blas.path);
        return 0.0;
    }
    snprintf(name, name_len, "%s %s%s%s", blas.driver, blas.version, blas.core[0] ? ", core " : "",
             blas.core);
    return sgemm_rate(&blas, hp, m, nt);
}

double bench_int8_peak(int nt, char *isa, size_t isa_len)
{
    return gt_cpu_int8_peak_gops(nt, isa, isa_len);
}
