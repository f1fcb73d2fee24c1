/* zero_blas.c: a BLAS that answers every sgemm with zeros, for test_gate.
 *
 * The cpu backend dlopens the library named by its driver profile
 * ("blas=PATH") and needs only cblas_sgemm (backends/cpu/cpu_blas.c). This
 * one exports that symbol and writes C = 0 whatever A and B are: a broken
 * BLAS that loads, runs and returns finite numbers, which only a comparison
 * with the reference backend can catch. */
#include <stddef.h>

enum { ROW_MAJOR = 101 }; /* CblasRowMajor; 102 is column-major */

void cblas_sgemm(int order, int trans_a, int trans_b, int m, int n, int k, float alpha,
                 const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);

void cblas_sgemm(int order, int trans_a, int trans_b, int m, int n, int k, float alpha,
                 const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    (void)trans_a, (void)trans_b, (void)k, (void)alpha, (void)a, (void)lda, (void)b, (void)ldb,
        (void)beta;
    int rows = order == ROW_MAJOR ? m : n, cols = order == ROW_MAJOR ? n : m;
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++)
            c[(size_t)i * (size_t)ldc + (size_t)j] = 0.0f;
}
