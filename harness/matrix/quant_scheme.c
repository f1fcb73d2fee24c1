/* quant_scheme.c: the quant schemes and llama-quantize's per-tensor rules.
 *
 * The rules (llama.cpp's src/llama-quant.cpp, llama_tensor_get_type, read
 * for the facts and written here for the schemes this project offers):
 *   - norms and 1-D tensors: f32 (what the runtime computes norms in);
 *   - the output projection (output.weight, or token_embd.weight when the
 *     embeddings are tied): Q6_K, or Q8_0 when its rows are not whole
 *     blocks of the base type; a Q8_0 scheme keeps Q8_0;
 *   - attn_v (counted in file order, i of n):
 *       Q2_K: Q4_K when n_gqa >= 4, else Q3_K;  Q3_K_M: Q5_K for i < 2, else
 *       Q4_K;  Q3_K_L: Q5_K;  Q4_K_S: Q5_K for i < 4;  Q4_K_M, Q5_K_M: Q6_K
 *       where use_more_bits(i, n);  IQ4_NL: Q5_K when n_gqa >= 4;
 *   - ffn_down (layer i of n_layer):
 *       Q2_K: Q3_K;  Q3_K_M: Q5_K for i < n/16, else Q4_K;  Q3_K_L: Q5_K;
 *       Q4_K_S, IQ4_NL: Q5_K for i < n/8;  Q4_K_M, Q5_K_M: Q6_K where
 *       use_more_bits(i, n);
 *   - attn_output: Q2_K: Q3_K;  Q3_K_M: Q4_K;  Q3_K_L: Q5_K;
 *   - attn_qkv (fused): Q3_K_M/L: Q4_K;  Q4_K_M: Q5_K;  Q5_K_M: Q6_K;
 *   where use_more_bits(i, n) = i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2
 *   (the first and last eighth of the layers and every third between).
 * Then the fallback when a row is not a whole number of the chosen type's
 * blocks (a 576- or 640-wide row for the 256-element K-quants): Q2_K and
 * Q3_K -> IQ4_NL, Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, and f16 when
 * even that does not divide (llama-quantize refuses such a row for a plain
 * type; we write f16 and say so). --pure skips the rules: every matrix
 * gets the base type, f16 where the row is not whole blocks.
 *
 * Checked on the real Gemma 3 270M Q4_K_M release: requantizing its f32
 * dequantization to q4_k_m gives every tensor the type the release has
 * (tests/test_quantize_mix.c). */
#include "quant_scheme.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

static const gt_quant_scheme SCHEMES[] = {
    {"f32", GT_TYPE_F32, 0, GT_MIX_PLAIN},
    {"f16", GT_TYPE_F16, 1, GT_MIX_PLAIN},
    {"bf16", GT_TYPE_BF16, 32, GT_MIX_PLAIN},
    {"q8_0", GT_TYPE_Q8_0, 7, GT_MIX_PLAIN},
    {"q4_0", GT_TYPE_Q4_0, 2, GT_MIX_PLAIN},
    {"q4_1", GT_TYPE_Q4_1, 3, GT_MIX_PLAIN},
    {"q5_0", GT_TYPE_Q5_0, 8, GT_MIX_PLAIN},
    {"q5_1", GT_TYPE_Q5_1, 9, GT_MIX_PLAIN},
    {"iq4_nl", GT_TYPE_IQ4_NL, 25, GT_MIX_IQ4_NL},
    {"q2_k", GT_TYPE_Q2_K, 10, GT_MIX_Q2_K},
    {"q3_k_s", GT_TYPE_Q3_K, 11, GT_MIX_Q3_K_S},
    {"q3_k_m", GT_TYPE_Q3_K, 12, GT_MIX_Q3_K_M},
    {"q3_k_l", GT_TYPE_Q3_K, 13, GT_MIX_Q3_K_L},
    {"q4_k_s", GT_TYPE_Q4_K, 14, GT_MIX_Q4_K_S},
    {"q4_k_m", GT_TYPE_Q4_K, 15, GT_MIX_Q4_K_M},
    {"q5_k_s", GT_TYPE_Q5_K, 16, GT_MIX_Q5_K_S},
    {"q5_k_m", GT_TYPE_Q5_K, 17, GT_MIX_Q5_K_M},
    {"q6_k", GT_TYPE_Q6_K, 18, GT_MIX_PLAIN},
};
#define N_SCHEMES (sizeof SCHEMES / sizeof SCHEMES[0])

static const struct { const char *alias, *name; } ALIASES[] = {
    {"q3_k", "q3_k_m"}, {"q4_k", "q4_k_m"}, {"q5_k", "q5_k_m"}};

const gt_quant_scheme *gt_quant_scheme_find(const char *name)
{
    for (size_t i = 0; i < sizeof ALIASES / sizeof ALIASES[0]; i++)
        if (strcasecmp(name, ALIASES[i].alias) == 0)
            name = ALIASES[i].name;
    for (size_t i = 0; i < N_SCHEMES; i++)
        if (strcasecmp(name, SCHEMES[i].name) == 0)
            return &SCHEMES[i];
    return NULL;
}

const char *gt_quant_scheme_names(void)
{
    static char buf[512];
    if (!buf[0]) {
        size_t n = 0;
        for (size_t i = 0; i < N_SCHEMES && n < sizeof buf; i++)
            n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s", i ? ", " : "",
                                  SCHEMES[i].name);
    }
    return buf;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static bool whole_blocks(gt_type t, int64_t ne0)
{
    return ne0 % gt_type_info(t)->block_size == 0;
}

static bool use_more_bits(int i, int n)
{
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

/* The rules before the fallback; advances st's counters. */
static gt_type mix_rule(const gt_quant_scheme *s, gt_quant_state *st, const char *name,
                        int64_t ne0, bool is_output, const char **why)
{
    const gt_quant_mix m = s->mix;
    gt_type t = s->base;
    if (is_output) {
        if (!whole_blocks(s->base, ne0)) {
            t = GT_TYPE_Q8_0;
            *why = "output projection: q8_0 (its rows are not whole blocks of the base type)";
        } else if (s->base != GT_TYPE_Q8_0) {
            t = GT_TYPE_Q6_K;
            *why = "output projection: q6_k";
        }
        return t;
    }
    if (strstr(name, "attn_v.weight")) {
        const int i = st->i_attn_v++, n = st->n_attn_v;
        if (m == GT_MIX_Q2_K)
            t = st->n_gqa >= 4 ? GT_TYPE_Q4_K : GT_TYPE_Q3_K;
        else if (m == GT_MIX_Q3_K_M)
            t = i < 2 ? GT_TYPE_Q5_K : GT_TYPE_Q4_K;
        else if (m == GT_MIX_Q3_K_L)
            t = GT_TYPE_Q5_K;
        else if (m == GT_MIX_IQ4_NL && st->n_gqa >= 4)
            t = GT_TYPE_Q5_K;
        else if ((m == GT_MIX_Q4_K_M || m == GT_MIX_Q5_K_M) && use_more_bits(i, n))
            t = GT_TYPE_Q6_K;
        else if (m == GT_MIX_Q4_K_S && i < 4)
            t = GT_TYPE_Q5_K;
        if (t != s->base)
            *why = "attn_v promoted by the mix";
    } else if (strstr(name, "ffn_down")) {
        const int i = st->i_ffn_down++, n = st->n_layer;
        if (m == GT_MIX_Q2_K)
            t = GT_TYPE_Q3_K;
        else if (m == GT_MIX_Q3_K_M)
            t = i < n / 16 ? GT_TYPE_Q5_K : GT_TYPE_Q4_K;
        else if (m == GT_MIX_Q3_K_L)
            t = GT_TYPE_Q5_K;
        else if ((m == GT_MIX_Q4_K_M || m == GT_MIX_Q5_K_M) && use_more_bits(i, n))
            t = GT_TYPE_Q6_K;
        else if ((m == GT_MIX_Q4_K_S || m == GT_MIX_IQ4_NL) && i < n / 8)
            t = GT_TYPE_Q5_K;
        if (t != s->base)
            *why = "ffn_down promoted by the mix";
    } else if (strstr(name, "attn_output.weight")) {
        if (m == GT_MIX_Q2_K)
            t = GT_TYPE_Q3_K;
        else if (m == GT_MIX_Q3_K_M)
            t = GT_TYPE_Q4_K;
        else if (m == GT_MIX_Q3_K_L)
            t = GT_TYPE_Q5_K;
        if (t != s->base)
            *why = "attn_output promoted by the mix";
    } else if (strstr(name, "attn_qkv.weight")) {
        if (m == GT_MIX_Q3_K_M || m == GT_MIX_Q3_K_L)
            t = GT_TYPE_Q4_K;
        else if (m == GT_MIX_Q4_K_M)
            t = GT_TYPE_Q5_K;
        else if (m == GT_MIX_Q5_K_M)
            t = GT_TYPE_Q6_K;
        if (t != s->base)
            *why = "attn_qkv promoted by the mix";
    }
    return t;
}

static gt_type fallback(gt_type t)
{
    switch (t) {
    case GT_TYPE_Q2_K:
    case GT_TYPE_Q3_K: return GT_TYPE_IQ4_NL;
    case GT_TYPE_Q4_K: return GT_TYPE_Q5_0;
    case GT_TYPE_Q5_K: return GT_TYPE_Q5_1;
    case GT_TYPE_Q6_K: return GT_TYPE_Q8_0;
    default: return GT_TYPE_F16;
    }
}

gt_type gt_quant_tensor_type(const gt_quant_scheme *s, gt_quant_state *st, const char *name,
                             int n_dims, int64_t ne0, int64_t n_elements, bool pure,
                             const char **why)
{
    *why = NULL;
    if (ends_with(name, "_norm.weight")) {
        *why = "norm weight";
        return GT_TYPE_F32;
    }
    if (n_dims < 2 || n_elements == ne0) {
        *why = "1-D";
        return GT_TYPE_F32;
    }
    if (ends_with(name, "ffn_gate_inp.weight")) {
        *why = "expert router (llama-quantize keeps it f32)";
        return GT_TYPE_F32;
    }
    if (!gt_type_info(s->base)->quantized)
        return s->base;
    if (pure) {
        if (whole_blocks(s->base, ne0))
            return s->base;
        *why = "row length is not a multiple of the block size (f16)";
        return GT_TYPE_F16;
    }
    const bool is_output = strcmp(name, "output.weight") == 0 ||
                           (!st->has_output && strcmp(name, "token_embd.weight") == 0);
    const gt_type t = mix_rule(s, st, name, ne0, is_output, why);
    if (whole_blocks(t, ne0))
        return t;
    gt_type f = fallback(t);
    if (!whole_blocks(f, ne0))
        f = GT_TYPE_F16;
    static char text[160];
    snprintf(text, sizeof text, "%s%srows of %lld are not whole %s blocks: fallback %s",
             *why ? *why : "", *why ? "; " : "", (long long)ne0, gt_type_name(t),
             gt_type_name(f));
    *why = text;
    return f;
}

bool gt_quant_scheme_ok(const char *name, gt_type *type)
{
    const gt_quant_scheme *s = gt_quant_scheme_find(name);
    if (s && type)
        *type = s->base;
    return s != NULL;
}
