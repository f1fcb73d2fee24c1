/* types.c: the table of element types this runtime knows (ids are GGML's).
 * The conversions between them live in quant.c. */
#include "gt/quant.h"

#include <strings.h>

static const gt_type_traits TYPES[GT_TYPE_COUNT] = {
    [GT_TYPE_F32] = {"f32", 1, 4, false},
    [GT_TYPE_F16] = {"f16", 1, 2, false},
    [GT_TYPE_BF16] = {"bf16", 1, 2, false},
    [GT_TYPE_I32] = {"i32", 1, 4, false},
    [GT_TYPE_Q8_0] = {"q8_0", GT_QK8_0, sizeof(gt_block_q8_0), true},
    [GT_TYPE_Q4_0] = {"q4_0", GT_QK4_0, sizeof(gt_block_q4_0), true},
    [GT_TYPE_Q4_1] = {"q4_1", GT_QK4_1, sizeof(gt_block_q4_1), true},
    [GT_TYPE_Q5_0] = {"q5_0", GT_QK5_0, sizeof(gt_block_q5_0), true},
    [GT_TYPE_Q5_1] = {"q5_1", GT_QK5_1, sizeof(gt_block_q5_1), true},
    [GT_TYPE_Q2_K] = {"q2_k", GT_QK_K, sizeof(gt_block_q2_K), true},
    [GT_TYPE_Q3_K] = {"q3_k", GT_QK_K, sizeof(gt_block_q3_K), true},
    [GT_TYPE_Q4_K] = {"q4_k", GT_QK_K, sizeof(gt_block_q4_K), true},
    [GT_TYPE_Q5_K] = {"q5_k", GT_QK_K, sizeof(gt_block_q5_K), true},
    [GT_TYPE_Q6_K] = {"q6_k", GT_QK_K, sizeof(gt_block_q6_K), true},
    [GT_TYPE_Q8_K] = {"q8_k", GT_QK_K, sizeof(gt_block_q8_K), true},
    [GT_TYPE_IQ4_NL] = {"iq4_nl", GT_QK4_NL, sizeof(gt_block_iq4_nl), true},
};

_Static_assert(sizeof(gt_block_q8_0) == 34, "Q8_0 block is 34 bytes in GGML");
_Static_assert(sizeof(gt_block_q4_0) == 18, "Q4_0 block is 18 bytes in GGML");
_Static_assert(sizeof(gt_block_q4_1) == 20, "Q4_1 block is 20 bytes in GGML");
_Static_assert(sizeof(gt_block_q5_0) == 22, "Q5_0 block is 22 bytes in GGML");
_Static_assert(sizeof(gt_block_q5_1) == 24, "Q5_1 block is 24 bytes in GGML");
_Static_assert(sizeof(gt_block_q2_K) == 84, "Q2_K block is 84 bytes in GGML");
_Static_assert(sizeof(gt_block_q3_K) == 110, "Q3_K block is 110 bytes in GGML");
_Static_assert(sizeof(gt_block_q4_K) == 144, "Q4_K block is 144 bytes in GGML");
_Static_assert(sizeof(gt_block_q5_K) == 176, "Q5_K block is 176 bytes in GGML");
_Static_assert(sizeof(gt_block_q6_K) == 210, "Q6_K block is 210 bytes in GGML");
_Static_assert(sizeof(gt_block_q8_K) == 292, "Q8_K block is 292 bytes in GGML");
_Static_assert(sizeof(gt_block_iq4_nl) == 18, "IQ4_NL block is 18 bytes in GGML");

const gt_type_traits *gt_type_info(int type)
{
    if (type < 0 || type >= GT_TYPE_COUNT || !TYPES[type].name)
        return NULL;
    return &TYPES[type];
}

const char *gt_type_name(int type)
{
    const gt_type_traits *t = gt_type_info(type);
    return t ? t->name : "unknown";
}

int gt_type_from_name(const char *name, gt_type *out)
{
    for (int i = 0; i < GT_TYPE_COUNT; i++) {
        if (TYPES[i].name && strcasecmp(TYPES[i].name, name) == 0) {
            *out = (gt_type)i;
            return 0;
        }
    }
    return -1;
}

size_t gt_row_size(gt_type type, int64_t n)
{
    const gt_type_traits *t = gt_type_info(type);
    if (!t || n < 0 || n % t->block_size != 0)
        return 0;
    return (size_t)(n / t->block_size) * t->block_bytes;
}
