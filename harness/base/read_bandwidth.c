/* read_bandwidth.c: how fast this machine streams memory, the ceiling a
 * decode step that reads every weight once per token is held to. bench
 * prints a backend's speed against it; the performance suite reports
 * decode as a share of it. */
#include "read_bandwidth.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli_common.h"

typedef struct bw_arg {
    const uint64_t *p;
    size_t n;
    uint64_t sum;
} bw_arg;

static void *bw_thread(void *v)
{
    bw_arg *a = v;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    size_t i = 0;
    for (; i + 4 <= a->n; i += 4) {
        s0 += a->p[i];
        s1 += a->p[i + 1];
        s2 += a->p[i + 2];
        s3 += a->p[i + 3];
    }
    for (; i < a->n; i++)
        s0 += a->p[i];
    a->sum = s0 + s1 + s2 + s3;
    return NULL;
}

double gt_read_bandwidth(size_t bytes, int nt, char *why, size_t why_len)
{
    uint64_t *buf = malloc(bytes);
    if (!buf) {
        snprintf(why, why_len, "cannot allocate %zu bytes for the bandwidth test", bytes);
        return 0.0;
    }
    const size_t n = bytes / sizeof(uint64_t);
    for (size_t i = 0; i < n; i++)
        buf[i] = i;
    pthread_t th[256];
    bw_arg args[256];
    double best = 0.0;
    for (int rep = 0; rep < 4; rep++) { /* the first pass also warms the TLB */
        const double t0 = gt_now();
        int started = 0;
        for (int t = 0; t < nt; t++) {
            args[t] = (bw_arg){buf + n / nt * t, t == nt - 1 ? n - n / nt * t : n / nt, 0};
            if (pthread_create(&th[t], NULL, bw_thread, &args[t]) != 0)
                break;
            started++;
        }
        for (int t = 0; t < started; t++)
            pthread_join(th[t], NULL);
        const double dt = gt_now() - t0;
        if (started == nt && rep > 0 && bytes / dt / 1e9 > best)
            best = bytes / dt / 1e9;
    }
    free(buf);
    return best;
}

