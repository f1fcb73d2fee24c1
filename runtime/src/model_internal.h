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
    /* qwen3moe only (NULL otherwise; w_gate, w_up, w_down are NULL there) */
    const gt_gguf_tensor *ffn_gate_inp;  /* (n_expert rows of n_embd): the router */
    const gt_gguf_tensor *ffn_gate_exps; /* (n_expert, n_ff_exp rows of n_embd) */
    const gt_gguf_tensor *ffn_up_exps;   /* (n_expert, n_ff_exp rows of n_embd) */
    const gt_gguf_tensor *ffn_down_exps; /* (n_expert, n_embd rows of n_ff_exp) */
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

/* Metadata "<arch>.<key>" (model.c): an integer in 1..2^24 (def < 0: the
 * key is required) or a number; err names the key. */
int gt_model_arch_int(const gt_gguf *g, const char *arch, const char *key, int64_t def,
                      int64_t *out, gt_err *err);
int gt_model_arch_float(const gt_gguf *g, const char *arch, const char *key, double def,
                        double *out, gt_err *err);
/* Finds a weight and checks its shape: planes of [rows x cols] (ne[0] =
 * cols, ne[1] = rows, ne[2] = planes; planes 1 = a 2-D matrix, rows 1 = a
 * 1-D f32 vector). A 3-D tensor (planes > 1, the experts of a layer) is
 * seen by the graph as planes * rows rows. */
int gt_model_weight(const gt_gguf *g, const char *name, int64_t cols, int64_t rows,
                    int64_t planes, const gt_gguf_tensor **out, gt_err *err);

/* qwen3moe (model_qwen3moe.c): its hyper-parameters on top of the common
 * ones read_hparams has read, and its layers' weights. */
int gt_qwen3moe_hparams(const gt_gguf *g, gt_hparams *hp, gt_err *err);
int gt_qwen3moe_weights(gt_model *m, gt_err *err);

#endif
