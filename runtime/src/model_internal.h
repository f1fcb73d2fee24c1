/* model_internal.h: what session.c needs to see of a loaded model: the GGUF
 * tensor of every weight, by role. Private to the runtime. */
#ifndef GT_MODEL_INTERNAL_H
#define GT_MODEL_INTERNAL_H

#include "gt/model.h"

typedef struct gt_layer_weights {
    const gt_gguf_tensor *attn_norm; /* (n_embd) */
    const gt_gguf_tensor *wq;        /* (n_embd rows of n_embd)... see model.c */
    const gt_gguf_tensor *wk;
    const gt_gguf_tensor *wv;
    const gt_gguf_tensor *wo;
    const gt_gguf_tensor *ffn_norm;  /* (n_embd) */
    const gt_gguf_tensor *w_gate;    /* (n_ff rows of n_embd) */
    const gt_gguf_tensor *w_up;      /* (n_ff rows of n_embd) */
    const gt_gguf_tensor *w_down;    /* (n_embd rows of n_ff) */
    /* gemma3 only (NULL otherwise) */
    const gt_gguf_tensor *q_norm, *k_norm;                /* (head_dim) */
    const gt_gguf_tensor *post_attn_norm, *post_ffn_norm; /* (n_embd) */
} gt_layer_weights;

struct gt_model {
    gt_gguf *gguf;
    gt_tokenizer *tok;
    gt_hparams hp;
    const gt_gguf_tensor *tok_embd;  /* (n_vocab rows of n_embd) */
    const gt_gguf_tensor *out_norm;  /* (n_embd) */
    const gt_gguf_tensor *output;    /* (n_vocab rows of n_embd); == tok_embd when tied */
    gt_layer_weights *layers;        /* (n_layer) */
};

#endif
