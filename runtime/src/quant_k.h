/* quant_k.h: the row conversions of quant_k.c (Q5_0, Q5_1, K-quants, IQ4_NL), used by
 * quant.c's gt_dequantize_row / gt_quantize_row; nb is the block count. */
#ifndef GT_QUANT_K_H
#define GT_QUANT_K_H

#include <stdint.h>

#include "gt/quant.h"

void gt_dequantize_q5_0(const gt_block_q5_0 *x, float *y, int64_t nb);
void gt_dequantize_q5_1(const gt_block_q5_1 *x, float *y, int64_t nb);
void gt_dequantize_q2_K(const gt_block_q2_K *x, float *y, int64_t nb);
void gt_dequantize_q3_K(const gt_block_q3_K *x, float *y, int64_t nb);
void gt_dequantize_q4_K(const gt_block_q4_K *x, float *y, int64_t nb);
void gt_dequantize_q5_K(const gt_block_q5_K *x, float *y, int64_t nb);
void gt_dequantize_q6_K(const gt_block_q6_K *x, float *y, int64_t nb);
void gt_dequantize_q8_K(const gt_block_q8_K *x, float *y, int64_t nb);
void gt_dequantize_iq4_nl(const gt_block_iq4_nl *x, float *y, int64_t nb);

void gt_quantize_q5_0(const float *x, gt_block_q5_0 *y, int64_t nb);
void gt_quantize_q5_1(const float *x, gt_block_q5_1 *y, int64_t nb);
void gt_quantize_q2_K(const float *x, gt_block_q2_K *y, int64_t nb);
void gt_quantize_q3_K(const float *x, gt_block_q3_K *y, int64_t nb);
void gt_quantize_q4_K(const float *x, gt_block_q4_K *y, int64_t nb);
void gt_quantize_q5_K(const float *x, gt_block_q5_K *y, int64_t nb);
void gt_quantize_q6_K(const float *x, gt_block_q6_K *y, int64_t nb);
void gt_quantize_q8_K(const float *x, gt_block_q8_K *y, int64_t nb);
void gt_quantize_iq4_nl(const float *x, gt_block_iq4_nl *y, int64_t nb);

#endif
