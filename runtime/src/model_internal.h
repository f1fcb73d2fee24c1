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
    /* gemma3 and qwen3 (NULL otherwise) */
    const gt_gguf_tensor *q_norm, *k_norm;                /* (head_dim) */
    /* gemma3 only (NULL otherwise) */
    const gt_gguf_tensor *post_attn_norm, *post_ffn_norm; /* (n_embd) */
    /* qwen2: q/k/v biases, each optional as in llama.cpp (NULL when absent) */
    const gt_gguf_tensor *bq, *bk, *bv; /* (q_dim), (kv_dim), (kv_dim) */
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

/* model.c's readers, for the per-architecture files (model_qwen.c): the
 * only way to read "<arch>.*" metadata and to find a weight ([rows x cols],
 * rows == 1 for a one-row f32 weight). */
int gt_model_arch_int(const gt_gguf *g, const char *arch, const char *key, int64_t def,
                      int64_t *out, gt_err *err);
int gt_model_arch_float(const gt_gguf *g, const char *arch, const char *key, double def,
                        double *out, gt_err *err);
int gt_model_weight(const gt_gguf *g, const char *name, int64_t cols, int64_t rows,
                    const gt_gguf_tensor **out, gt_err *err);

/* model_qwen.c: qwen2/qwen3 hyper-parameters past the common ones, and
 * layer l's weights past the llama ones. */
int gt_model_read_qwen(const gt_gguf *g, gt_hparams *hp, gt_err *err);
int gt_model_qwen_layer(gt_model *m, int l, gt_err *err);

#endif
