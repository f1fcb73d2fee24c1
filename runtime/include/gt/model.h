/* model.h: a model read from a GGUF artifact: the llama family (llama,
 * mistral), Gemma 3 (gemma3), Qwen 2 (qwen2), Qwen 3 (qwen3) or Phi-3 (phi3),
 * each with its own graph.
 *
 * Hyper-parameters come from metadata ("<arch>.block_count", ...); weights
 * stay in the mmapped file (no dequantized copy). The model knows how to
 * build the graph of one evaluation step; a session runs it on a backend. */
#ifndef GT_MODEL_H
#define GT_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "gt/error.h"
#include "gt/gguf.h"
#include "gt/tokenizer.h"

typedef enum gt_arch {
    GT_ARCH_LLAMA,  /* RMSNorm, RoPE, GQA, SwiGLU (llama, mistral) */
    GT_ARCH_GEMMA3, /* + QK-norm, post-norms, GELU FFN, scaled embeddings, sliding window */
    GT_ARCH_PHI3,   /* llama with fused QKV and gate/up, NeoX RoPE, long/short RoPE factors */
    GT_ARCH_QWEN3MOE, /* llama attention + QK-norm, NeoX RoPE; FFN = softmax-routed experts */
    GT_ARCH_QWEN2,  /* llama + q/k/v biases, NeoX RoPE */
    GT_ARCH_QWEN3,  /* llama + per-head q/k RMS norm, NeoX RoPE, head_dim from key_length */
} gt_arch;

typedef struct gt_hparams {
    char arch[32];
    gt_arch arch_id;   /* which graph the session builds */
    char name[128];
    int n_vocab;
    int n_ctx_train;
    int n_embd;
    int n_layer;
    int n_head;
    int n_head_kv;
    int n_ff;
    int head_dim;
    int rope_dim;      /* dims rotated per head */
    int rope_mode;     /* 0 = adjacent pairs (llama), 1 = NeoX halves */
    float rope_base;
    float rms_eps;
    bool tied_output;  /* output projection shares token_embd.weight */
    int q_dim;         /* n_head * head_dim (gemma3: 1024, not n_embd) */
    float attn_scale;  /* softmax scale of q.k (1/sqrt(head_dim)) */
    float embd_scale;  /* token embeddings are multiplied by it (1; gemma3: sqrt(n_embd)) */
    int swa_window;    /* sliding window of the local layers (0: every layer is global) */
    int swa_period;    /* with a window: layer l is global when (l+1) % swa_period == 0 */
    float rope_base_local; /* rope base of the local layers */
    float rope_freq_scale; /* rope.scaling linear: 1/factor (1: none) */
    float rope_attn_factor; /* cos/sin magnitude (phi3 long-rope; 1: none) */
    int n_ctx_orig;    /* rope.scaling.original_context_length (phi3: long factors past it) */
    /* mixture of experts (qwen3moe; 0 otherwise) */
    int n_expert;      /* experts per layer */
    int n_expert_used; /* experts each token runs (top-k of the router) */
    int n_ff_exp;      /* one expert's feed-forward width */
    bool expert_norm;  /* the k router weights are renormalized to sum to 1 */
    /* Hyper-parameters the file has no key for, taken from the architecture's
     * published defaults ("key=value, ..."; empty when none). */
    char defaulted[256];
} gt_hparams;

/* Layer l attends only to the last swa_window positions. */
static inline bool gt_hparams_layer_local(const gt_hparams *hp, int l)
{
    return hp->swa_window > 0 && (hp->swa_period <= 0 || (l + 1) % hp->swa_period != 0);
}

typedef struct gt_model gt_model;

/* 0, or -1 for a file that is not a valid model. GT_MODEL_UNSUPPORTED for a
 * valid one this runtime does not understand: an architecture, a tensor its
 * graph does not use, or a metadata key (or a key's value) it does not
 * implement; err then reads "PATH: unsupported: ..." naming every such
 * thing (the tokenizer's refusals read "PATH: tokenizer: unsupported ..."). */
#define GT_MODEL_UNSUPPORTED (-2)
int gt_model_load(const char *path, gt_model **out, gt_err *err);
void gt_model_free(gt_model *m);

const gt_hparams *gt_model_hparams(const gt_model *m);
const gt_tokenizer *gt_model_tokenizer(const gt_model *m);
const gt_gguf *gt_model_gguf(const gt_model *m);
/* Bytes of weights read for one decoded token (all matrices once, plus one
 * embedding row; of a mixture of experts, the router and k experts): what
 * "effective bandwidth" in benchmarks is based on. */
uint64_t gt_model_weight_bytes_per_token(const gt_model *m);
/* The weight type of the largest matrices (what "Q8_0 model" means). */
gt_type gt_model_main_type(const gt_model *m);
/* Number of parameters in the weight matrices one token multiplies (for
 * FLOP counts; a mixture of experts counts its router and k experts). */
uint64_t gt_model_matrix_params(const gt_model *m);

#endif
