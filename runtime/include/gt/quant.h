/* quant.h: tensor element types and their block formats.
 *
 * Type ids are GGML's, so a gt_type is what a GGUF file stores. Quantized
 * types are bit-compatible with GGML's block layouts:
 *   Q8_0: 32 elements = f16 scale d, int8 q[32];             x = d*q
 *   Q4_0: 32 elements = f16 d, 16 bytes of nibbles;          x = d*(q-8)
 *   Q4_1: 32 elements = f16 d, f16 m, 16 bytes of nibbles;   x = d*q + m
 * Nibble order: byte j holds element j (low nibble) and j+16 (high nibble).
 *   Q5_0, Q5_1: Q4_0/Q4_1 with a fifth bit per element in qh (bit j of the
 *         little-endian u32 for element j); x = d*(q-16), x = d*q + m.
 * K-quants: 256-element super-blocks with f16 scales of quantized scales:
 *   Q2_K: 16 sub-blocks of 16, 4-bit scale and min each; x = d*sc*q - dmin*m, q in 0..3
 *   Q3_K: 16 sub-blocks of 16, 6-bit scales (offset 32); x = d*(sc-32)*q, q in -4..3
 *   Q4_K: 8 sub-blocks of 32, 6-bit scale and min; x = d*sc*q - dmin*m, q in 0..15
 *   Q5_K: Q4_K with a fifth bit per element in qh; q in 0..31
 *   Q6_K: 16 sub-blocks of 16, int8 scales; x = d*sc*(q-32), q in 0..63
 *   Q8_K: f32 d, int8 q, and the sums of each 16 q (activations only)
 *   IQ4_NL: Q4_0's layout, but each nibble indexes a fixed non-linear table
 *         of 16 int8 levels (gt_iq4nl_levels); x = d*levels[q]. llama-quantize
 *         falls back to it for Q2_K/Q3_K tensors whose rows are not a
 *         multiple of 256.
 * Where each element's bits live is spelled out in quant_k.c. */
#ifndef GT_QUANT_H
#define GT_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum gt_type {
    GT_TYPE_F32 = 0,
    GT_TYPE_F16 = 1,
    GT_TYPE_Q4_0 = 2,
    GT_TYPE_Q4_1 = 3,
    GT_TYPE_Q5_0 = 6,
    GT_TYPE_Q5_1 = 7,
    GT_TYPE_Q8_0 = 8,
    GT_TYPE_Q2_K = 10,
    GT_TYPE_Q3_K = 11,
    GT_TYPE_Q4_K = 12,
    GT_TYPE_Q5_K = 13,
    GT_TYPE_Q6_K = 14,
    GT_TYPE_Q8_K = 15,
    GT_TYPE_IQ4_NL = 20,
    GT_TYPE_I32 = 26,
    GT_TYPE_BF16 = 30,
    GT_TYPE_COUNT = 40 /* upper bound on GGML ids we might see */
} gt_type;

#define GT_QK8_0 32
#define GT_QK4_0 32
#define GT_QK4_1 32

typedef struct { uint16_t d; int8_t qs[GT_QK8_0]; } gt_block_q8_0;
typedef struct { uint16_t d; uint8_t qs[GT_QK4_0 / 2]; } gt_block_q4_0;
typedef struct { uint16_t d, m; uint8_t qs[GT_QK4_1 / 2]; } gt_block_q4_1;

#define GT_QK5_0 32
#define GT_QK5_1 32
#define GT_QK_K 256

typedef struct { uint16_t d; uint8_t qh[4]; uint8_t qs[GT_QK5_0 / 2]; } gt_block_q5_0;
typedef struct { uint16_t d, m; uint8_t qh[4]; uint8_t qs[GT_QK5_1 / 2]; } gt_block_q5_1;
typedef struct {
    uint8_t scales[GT_QK_K / 16]; /* low nibble scale, high nibble min */
    uint8_t qs[GT_QK_K / 4];
    uint16_t d, dmin;
} gt_block_q2_K;
typedef struct {
    uint8_t hmask[GT_QK_K / 8];
    uint8_t qs[GT_QK_K / 4];
    uint8_t scales[12]; /* 16 x 6 bits */
    uint16_t d;
} gt_block_q3_K;
typedef struct {
    uint16_t d, dmin;
    uint8_t scales[12]; /* 8 scales and 8 mins, 6 bits each */
    uint8_t qs[GT_QK_K / 2];
} gt_block_q4_K;
typedef struct {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qh[GT_QK_K / 8];
    uint8_t qs[GT_QK_K / 2];
} gt_block_q5_K;
typedef struct {
    uint8_t ql[GT_QK_K / 2];
    uint8_t qh[GT_QK_K / 4];
    int8_t scales[GT_QK_K / 16];
    uint16_t d;
} gt_block_q6_K;
#define GT_QK4_NL 32
typedef struct { uint16_t d; uint8_t qs[GT_QK4_NL / 2]; } gt_block_iq4_nl;
extern const int8_t gt_iq4nl_levels[16];

typedef struct {
    float d;
    int8_t qs[GT_QK_K];
    int16_t bsums[GT_QK_K / 16];
} gt_block_q8_K;

/* The 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K block. */
void gt_k_scale_min(const uint8_t scales[12], int j, uint8_t *sc, uint8_t *m);

typedef struct gt_type_traits {
    const char *name;   /* "f32", "q8_0", ... (lower case, as on the CLI) */
    int block_size;     /* elements per block (1 for plain types) */
    size_t block_bytes; /* bytes per block */
    bool quantized;
} gt_type_traits;

/* NULL for ids this runtime does not know (the GGUF reader rejects those). */
const gt_type_traits *gt_type_info(int type);
const char *gt_type_name(int type); /* "unknown" for unknown ids */
/* Case-insensitive ("Q8_0", "q8_0"); returns 0 and sets *out, or -1. */
int gt_type_from_name(const char *name, gt_type *out);

/* Bytes for n elements of type; n must be a multiple of the block size.
 * Returns 0 for an unknown type or a bad n. */
size_t gt_row_size(gt_type type, int64_t n);

/* Bumped whenever a quantizer's output changes (a better scale search, a
 * new rule): cached quant artifacts carry it in their name, so a cache made
 * by an older gauntlet is not mistaken for this one's output. */
#define GT_QUANTIZER_VERSION 2

/* Row conversions; n is a multiple of the type's block size. */
void gt_dequantize_row(gt_type type, const void *src, float *dst, int64_t n);
void gt_quantize_row(gt_type type, const float *src, void *dst, int64_t n);

/* Scalar conversions (round to nearest even, as GGML does). */
float gt_f16_to_f32(uint16_t h);
uint16_t gt_f32_to_f16(float f);
float gt_bf16_to_f32(uint16_t h);
uint16_t gt_f32_to_bf16(float f);

#endif
