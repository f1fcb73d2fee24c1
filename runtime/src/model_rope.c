/* model_rope.c: the attention-shape and RoPE keys the llama-family
 * architectures share (llama with Llama 3's factors, phi3, qwen2, qwen3,
 * qwen3moe): read through model_read.c's
 * recording readers, each value either implemented or refused by name.
 * Its own file so that model.c and the architecture files that call it
 * form no call loop. */
#include "model_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define arch_int gt_model_arch_int
#define arch_float gt_model_arch_float

/* The attention shape every llama-family architecture states the same way,
 * as llama.cpp reads it: the head size is attention.key_length (default
 * n_embd / n_head), value_length must equal it, q is n_head heads wide;
 * rope.dimension_count (default the head size) is even and fits a head.
 * GT_HEAD_FIXED: this architecture's graph has heads of n_embd / n_head
 * (llama, phi3, qwen2), so another key_length is refused by name.
 * GT_ROPE_WHOLE: it rotates whole heads (the Qwen family), so another
 * rope.dimension_count is refused. */
int gt_model_head_shape(const gt_gguf *g, gt_hparams *hp, unsigned rules, gt_err *err)
{
    const char *arch = hp->arch;
    const bool even = hp->n_embd % hp->n_head == 0;
    if ((rules & GT_HEAD_FIXED) && !even)
        return gt_err_set(err, "embedding_length %d is not a multiple of head_count %d",
                          hp->n_embd, hp->n_head);
    int64_t kl, vl, rd;
    if (arch_int(g, arch, "attention.key_length", even ? hp->n_embd / hp->n_head : -1, &kl, err) ||
        arch_int(g, arch, "attention.value_length", kl, &vl, err))
        return -1;
    if ((rules & GT_HEAD_FIXED) && (kl != hp->n_embd / hp->n_head || vl != kl))
        return gt_err_set(err, "unsupported: metadata key %s.attention.%s = %lld is not "
                               "implemented (the %s graph's head size is n_embd / "
                               "head_count = %d)", arch,
                          kl != hp->n_embd / hp->n_head ? "key_length" : "value_length",
                          (long long)(kl != hp->n_embd / hp->n_head ? kl : vl), arch,
                          hp->n_embd / hp->n_head);
    if (vl != kl)
        return gt_err_set(err, "%s.attention.value_length %lld differs from key_length %lld", arch,
                          (long long)vl, (long long)kl);
    hp->head_dim = (int)kl;
    hp->q_dim = hp->n_head * hp->head_dim;
    if (arch_int(g, arch, "rope.dimension_count", hp->head_dim, &rd, err))
        return -1;
    if ((rules & GT_ROPE_WHOLE) && rd != hp->head_dim)
        return gt_err_set(err, "%s.rope.dimension_count %lld is not the head size %d (%s rotates "
                               "whole heads)", arch, (long long)rd, hp->head_dim, arch);
    if (rd > hp->head_dim || rd % 2 != 0)
        return gt_err_set(err, "rope.dimension_count %lld does not fit head size %d",
                          (long long)rd, hp->head_dim);
    hp->rope_dim = (int)rd;
    hp->rope_base_local = hp->rope_base;
    hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim);
    hp->embd_scale = 1.0f;
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
