/* cpu_limits.h: the cpu backend's second face outside itself: what this CPU
 * can do at the integer products its act=q8 path is built on. `gauntlet
 * bench` puts that path's prefill against it, as it puts the f32 path's
 * against the BLAS's sgemm rate (cpu_blas.h). */
#ifndef GT_CPU_LIMITS_H
#define GT_CPU_LIMITS_H

#include <stddef.h>

/* Peak int8 multiply-accumulate rate in GOP/s (one product and one add are
 * two operations, as FLOPs count them) on nt threads at once: independent
 * chains of the instruction the integer GEMM's kernel uses (AVX-512 VNNI
 * vpdpbusd, else AVX2 vpmaddubsw + vpmaddwd + vpaddd), registers only, so
 * no memory limit enters. isa names the kernel ("avx512-vnni", "avx2");
 * returns 0 with isa saying why where neither exists. */
double gt_cpu_int8_peak_gops(int nt, char *isa, size_t isa_len);

#endif
