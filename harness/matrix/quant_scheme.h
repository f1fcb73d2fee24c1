/* quant_scheme.h: what a quant name means for a whole model file.
 *
 * A scheme is what `gauntlet quantize IN OUT NAME` and a matrix's "quants"
 * entry name: a plain type ("q8_0": every weight matrix in it) or one of
 * llama-quantize's K-quant mixes ("q4_k_m": mostly Q4_K, some tensors
 * promoted, fallbacks where rows are not a multiple of 256). Both follow
 * llama-quantize's published per-tensor rules, so a file we write has the
 * same tensor types as llama.cpp's for the same model (quant_scheme.c). */
#ifndef GT_QUANT_SCHEME_H
#define GT_QUANT_SCHEME_H

#include <stdbool.h>
#include <stdint.h>

#include "gt/quant.h"

typedef enum gt_quant_mix {
    GT_MIX_PLAIN, /* one type; only the output projection is promoted */
    GT_MIX_Q2_K,
    GT_MIX_Q3_K_S,
    GT_MIX_Q3_K_M,
    GT_MIX_Q3_K_L,
    GT_MIX_Q4_K_S,
    GT_MIX_Q4_K_M,
    GT_MIX_Q5_K_S,
    GT_MIX_Q5_K_M,
    GT_MIX_IQ4_NL,
} gt_quant_mix;

typedef struct gt_quant_scheme {
    const char *name;   /* lower case, as on the CLI */
    gt_type base;       /* the type most weight matrices get */
    uint32_t file_type; /* general.file_type (llama_ftype) it writes */
    gt_quant_mix mix;
} gt_quant_scheme;

/* NULL for a name that is no scheme (case-insensitive; "q4_k", "q5_k" and
 * "q3_k" mean their _M mixes, as llama-quantize takes them). Q8_K and I32
 * are not weight formats and have no scheme. */
const gt_quant_scheme *gt_quant_scheme_find(const char *name);
/* Every scheme name, comma separated, for help and error text. */
const char *gt_quant_scheme_names(void);

/* What the per-tensor rules need to know about the model, counted once
 * before the first tensor (gt_quant_state_init), and the counters the rules
 * advance tensor by tensor, in file order (as llama-quantize does). */
typedef struct gt_quant_state {
    int n_layer;     /* block_count */
    int n_gqa;       /* head_count / head_count_kv */
    int n_attn_v;    /* attn_v tensors in the file */
    bool has_output; /* output.weight present (else tied embeddings) */
    int i_attn_v, i_ffn_down;
} gt_quant_state;

/* The output type of one tensor and, when it is not the scheme's base type,
 * why (*why static text, NULL otherwise). pure: every weight matrix gets
 * the base type (f16 where its rows are not whole blocks). ne0 is the row
 * length, n_dims the tensor's dimensions. */
gt_type gt_quant_tensor_type(const gt_quant_scheme *s, gt_quant_state *st, const char *name,
                             int n_dims, int64_t ne0, int64_t n_elements, bool pure,
                             const char **why);

/* Whether name is a quant scheme; *type (when given) its base type. */
bool gt_quant_scheme_ok(const char *name, gt_type *type);

#endif
