/* cpu_blas.h: the cpu backend's face outside itself: finding cblas_sgemm
 * with dlopen and naming the library. `gauntlet bench` measures the roofline
 * of the same BLAS the backend would use, so it reads this header (and only
 * this one) of the backend. */
#ifndef GT_CPU_BLAS_H
#define GT_CPU_BLAS_H

enum { GT_CPU_ROW_MAJOR = 101, GT_CPU_NO_TRANS = 111, GT_CPU_TRANS = 112 };
typedef void (*gt_cpu_sgemm_fn)(int order, int ta, int tb, int m, int n, int k, float alpha,
                                const float *a, int lda, const float *b, int ldb, float beta,
                                float *c, int ldc);

typedef struct gt_cpu_blas {
    gt_cpu_sgemm_fn sgemm;           /* NULL: not loaded, own kernels are used */
    void (*set_num_threads)(int);    /* OpenBLAS only, else NULL */
    char path[256];                  /* what was asked for */
    char driver[128];                /* "OpenBLAS (pthread)", "BLAS (libblas.so.3)", "none ..." */
    char version[64];
    char core[64];                   /* OpenBLAS kernel set in use ("SkylakeX"), else "" */
    char why[192];                   /* why it is not loaded */
} gt_cpu_blas;

/* Loads the BLAS a driver string names ("blas=PATH", "blas=none", NULL for
 * libopenblas.so.0). Never fails: on error blas->sgemm is NULL and why says
 * why. Libraries stay loaded for the life of the process (unloading OpenBLAS
 * under its own worker threads is not safe). Sets OPENBLAS_CORETYPE first
 * when the user has not (see cpu_blas.c). */
void gt_cpu_blas_load(const char *driver, gt_cpu_blas *blas);

#endif
