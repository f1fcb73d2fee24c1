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
};

_Static_assert(sizeof(gt_block_q8_0) == 34, "Q8_0 block is 34 bytes in GGML");
_Static_assert(sizeof(gt_block_q4_0) == 18, "Q4_0 block is 18 bytes in GGML");
_Static_assert(sizeof(gt_block_q4_1) == 20, "Q4_1 block is 20 bytes in GGML");

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
