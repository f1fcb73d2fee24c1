/* model_rope.c: the RoPE and head-size keys the llama-like architectures
 * share (llama with Llama 3's factors, phi3): read through model_read.c's
 * recording readers, each value either implemented or refused by name.
 * Its own file so that model.c and the architecture files that call it
 * form no call loop. */
#include "model_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define arch_int gt_model_arch_int
#define arch_float gt_model_arch_float

/* Llama 3.x and Phi-3 converts may state the head size
 * (attention.key_length / value_length); llama.cpp lets these differ from
 * n_embd / n_head, the llama and phi3 graphs do not. */
int gt_model_head_dim_keys(const gt_gguf *g, const gt_hparams *hp, gt_err *err)
{
    int64_t kl, vl;
    if (arch_int(g, hp->arch, "attention.key_length", hp->head_dim, &kl, err) ||
        arch_int(g, hp->arch, "attention.value_length", hp->head_dim, &vl, err))
        return -1;
    if (kl != hp->head_dim || vl != hp->head_dim)
        return gt_err_set(err, "unsupported: metadata key %s.attention.%s = %lld is not "
                               "implemented (the %s graph's head size is n_embd / "
                               "head_count = %d)", hp->arch,
                          kl != hp->head_dim ? "key_length" : "value_length",
                          (long long)(kl != hp->head_dim ? kl : vl), hp->arch, hp->head_dim);
    return 0;
}

/* As llama.cpp reads them: original_context_length defaults to the
 * training context; a missing type is linear, a missing or zero
 * factor (rope.scaling.factor, else its older name rope.scale_linear) is 1;
 * "none" never scales; rope.scaling.attn_factor multiplies cos and sin
 * (1 when absent). YaRN and LongRoPE-by-key change the angles in ways the
 * ROPE op does not implement, so they are refused by name. */
int gt_model_rope_scaling(const gt_gguf *g, gt_hparams *hp, gt_err *err)
{
    const char *type;
    double factor, attn;
    int64_t orig;
    if (arch_int(g, hp->arch, "rope.scaling.original_context_length", hp->n_ctx_train, &orig,
                 err))
        return -1;
    hp->n_ctx_orig = (int)orig; /* phi3's long/short rule; YaRN's, which is refused */
    if (gt_model_arch_str(g, hp->arch, "rope.scaling.type", NULL, &type, err) ||
        arch_float(g, hp->arch, "rope.scaling.factor", 0.0, &factor, err) ||
        (factor == 0.0 && arch_float(g, hp->arch, "rope.scale_linear", 0.0, &factor, err)) ||
        arch_float(g, hp->arch, "rope.scaling.attn_factor", 1.0, &attn, err))
        return -1;
    hp->rope_freq_scale = 1.0f;
    hp->rope_attn_factor = (float)attn;
    if (!isfinite(attn) || attn <= 0.0)
        return gt_err_set(err, "%s.rope.scaling.attn_factor %g is out of range", hp->arch, attn);
    if (type && strcmp(type, "none") == 0)
        return 0;
    if (type && strcmp(type, "linear") != 0)
        return gt_err_set(err, "unsupported: metadata key %s.rope.scaling.type = \"%s\" is not "
                               "implemented (implemented: none, linear)", hp->arch, type);
    if (factor < 0.0 || !isfinite(factor))
        return gt_err_set(err, "%s.rope.scaling.factor %g is out of range", hp->arch, factor);
    if (factor != 0.0)
        hp->rope_freq_scale = (float)(1.0 / factor);
    return 0;
}
