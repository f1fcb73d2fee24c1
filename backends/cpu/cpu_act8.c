/* cpu_act8.c: the activations of a product quantized to 8-bit blocks
 * (gt_cpu_act8 in cpu.h), shared by every act=q8 path: the dot path
 * (cpu_matmul.c), the packed path (cpu_packed.c) and the integer GEMM
 * (cpu_igemm.c), so that consecutive products of one input reuse one copy
 * whichever path each takes. */
#include "cpu.h"

#include "gt/quant.h"

size_t gt_cpu_act_row_bytes(int64_t k)
{
    return (size_t)k + (3 * sizeof(float) + sizeof(int32_t)) * (size_t)(k / GT_CPU_QK);
}

void gt_cpu_quantize_rows(gt_cpu_ctx *c, const float *x, int64_t n, int64_t k, bool reuse,
                          gt_cpu_act8 *a, int ith, int nth)
{
    /* Layout: all q rows, then d, s, s1 and c, each n*nb. */
    const int64_t nb = k / GT_CPU_QK;
    int8_t *q = c->act;
    float *d = (float *)(q + (size_t)n * (size_t)k), *s = d + n * nb, *s1 = s + n * nb;
    int32_t *cs = (int32_t *)(s1 + n * nb);
    *a = (gt_cpu_act8){q, d, s, s1, cs, k, nb};
    if (reuse)
        return;
    int64_t i0, i1;
    gt_cpu_split(n, ith, nth, &i0, &i1);
    for (int64_t i = i0; i < i1; i++) {
        c->k.quantize_act(x + i * k, k, q + i * k, d + i * nb);
        for (int64_t b = i * nb; b < (i + 1) * nb; b++) {
            const int8_t *qb = q + b * GT_CPU_QK;
            int32_t sum = 0;
            for (int j = 0; j < GT_CPU_QK; j++)
                sum += qb[j];
            /* llama.cpp stores amax/127 as F16 but rounds q with the F32
             * value, and Q8_1's sum is the F32 scale times sum q, rounded
             * to F16 in its turn. A NaN scale stays NaN in all three. */
            const float d32 = d[b];
            d[b] = gt_f16_to_f32(gt_f32_to_f16(d32));
            s[b] = d[b] * (float)sum;
            s1[b] = gt_f16_to_f32(gt_f32_to_f16(d32 * (float)sum));
            cs[b] = -128 * sum;
        }
    }
    gt_cpu_barrier(c->pool);
}
