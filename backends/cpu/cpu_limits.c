/* cpu_limits.c: the int8 product peak (cpu_limits.h).
 *
 * Each thread runs CHAINS independent accumulator chains: enough to cover
 * the instruction's latency (4-5 cycles) times the ports that issue it, so
 * the loop is bound by throughput alone. All threads start together on one
 * flag and the wall time from the flag to the last join is what is divided
 * by, so a thread that did not get its core shows in the result. */
#include "cpu_limits.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define CHAINS 12
#define ITERS 2000000L
#define MAX_THREADS 256

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct peak_job {
    atomic_int *go;
    int vnni;
    volatile int32_t sink;
} peak_job;

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

/* MACs per iteration: CHAINS x 64 (one zmm vpdpbusd: 16 lanes x 4 bytes). */
__attribute__((target("avx512f,avx512bw,avx512vnni"))) static int32_t loop_vnni(long iters)
{
    __m512i acc[CHAINS];
#pragma GCC unroll 16
    for (int j = 0; j < CHAINS; j++)
        acc[j] = _mm512_set1_epi32(j);
    const __m512i a = _mm512_set1_epi32(0x01020304), b = _mm512_set1_epi32(0x05060708);
    for (long i = 0; i < iters; i++) {
#pragma GCC unroll 16 /* the accumulators must live in registers */
        for (int j = 0; j < CHAINS; j++)
            acc[j] = _mm512_dpbusd_epi32(acc[j], a, b);
    }
    /* xor, not a sum: the int32 lanes have wrapped, and a C sum of them
     * would overflow (UB); any use of every chain keeps the loop alive */
    __m512i s = acc[0];
    for (int j = 1; j < CHAINS; j++)
        s = _mm512_xor_si512(s, acc[j]);
    return _mm_cvtsi128_si32(_mm512_castsi512_si128(s));
}

/* MACs per iteration: CHAINS x 32 (one ymm vpmaddubsw: 32 byte products,
 * summed by vpmaddwd and accumulated by vpaddd, the integer GEMM's AVX2 step). */
__attribute__((target("avx2"))) static int32_t loop_avx2(long iters)
{
    __m256i acc[CHAINS];
#pragma GCC unroll 16
    for (int j = 0; j < CHAINS; j++)
        acc[j] = _mm256_set1_epi32(j);
    __m256i a = _mm256_set1_epi32(0x01020304);
    const __m256i b = _mm256_set1_epi32(0x05060708), ones = _mm256_set1_epi16(1);
    for (long i = 0; i < iters; i++)
#pragma GCC unroll 16 /* the accumulators must live in registers */
        for (int j = 0; j < CHAINS; j++) {
            /* a made opaque before each product: otherwise the products of
             * two constants are computed once and only the adds are timed */
            __asm__ volatile("" : "+x"(a));
            acc[j] = _mm256_add_epi32(acc[j], _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), ones));
        }
    __m256i s = acc[0];
    for (int j = 1; j < CHAINS; j++)
        s = _mm256_xor_si256(s, acc[j]);
    return _mm_cvtsi128_si32(_mm256_castsi256_si128(s));
}

static void *run(void *arg)
{
    peak_job *j = arg;
    while (!atomic_load_explicit(j->go, memory_order_acquire))
        ;
    j->sink = j->vnni ? loop_vnni(ITERS) : loop_avx2(ITERS);
    return NULL;
}

double gt_cpu_int8_peak_gops(int nt, char *isa, size_t isa_len)
{
    __builtin_cpu_init();
    const int vnni = __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw");
    if (!vnni && !__builtin_cpu_supports("avx2")) {
        snprintf(isa, isa_len, "none (no AVX2: the integer GEMM runs its scalar loop)");
        return 0.0;
    }
    snprintf(isa, isa_len, "%s", vnni ? "avx512-vnni" : "avx2");
    nt = nt < 1 ? 1 : nt > MAX_THREADS ? MAX_THREADS : nt;
    const double macs = (double)nt * ITERS * CHAINS * (vnni ? 64 : 32);
    double best = 0.0;
    for (int rep = 0; rep < 3; rep++) {
        atomic_int go = 0;
        static peak_job jobs[MAX_THREADS];
        pthread_t th[MAX_THREADS];
        int started = 0;
        for (int t = 0; t < nt; t++) {
            jobs[t] = (peak_job){.go = &go, .vnni = vnni};
            if (pthread_create(&th[t], NULL, run, &jobs[t]) != 0)
                break;
            started++;
        }
        const double t0 = now_s();
        atomic_store_explicit(&go, 1, memory_order_release);
        for (int t = 0; t < started; t++)
            pthread_join(th[t], NULL);
        if (started < nt) {
            snprintf(isa, isa_len, "none (could not start %d threads)", nt);
            return 0.0;
        }
        const double rate = 2.0 * macs / (now_s() - t0) / 1e9;
        best = rate > best ? rate : best;
    }
    return best;
}

#else

double gt_cpu_int8_peak_gops(int nt, char *isa, size_t isa_len)
{
    (void)nt;
    snprintf(isa, isa_len, "none (not x86: no integer GEMM kernel here)");
    return 0.0;
}

#endif
