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
    /* phi3 only (NULL otherwise): Q, K, V rows stacked (n_embd + 2 kv_dim rows
     * of n_embd; wq/wk/wv are NULL then); w_up then holds 2 n_ff rows, the
     * gate's first and the up projection's after them (w_gate is NULL). */
    const gt_gguf_tensor *wqkv;
    /* gemma3 and qwen3 (NULL otherwise) */
    const gt_gguf_tensor *q_norm, *k_norm;                /* (head_dim) */
    /* gemma3 only (NULL otherwise) */
    const gt_gguf_tensor *post_attn_norm, *post_ffn_norm; /* (n_embd) */
    /* qwen3moe only (NULL otherwise; w_gate, w_up, w_down are NULL there) */
    const gt_gguf_tensor *ffn_gate_inp;  /* (n_expert rows of n_embd): the router */
    const gt_gguf_tensor *ffn_gate_exps; /* (n_expert, n_ff_exp rows of n_embd) */
    const gt_gguf_tensor *ffn_up_exps;   /* (n_expert, n_ff_exp rows of n_embd) */
    const gt_gguf_tensor *ffn_down_exps; /* (n_expert, n_embd rows of n_ff_exp) */
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
    /* RoPE frequency factors (rope_dim/2, f32), NULL when the file has none:
     * Llama 3's rope_freqs; Phi-3's long and short (graph_llama.c picks one). */
    const gt_gguf_tensor *rope_freqs, *rope_long, *rope_short;
    /* constrained decoding's view of the vocabulary (constraint_vocab.c),
     * built by the first constraint; NULL until then */
    struct gt_cn_vocab *cn_vocab;
};
void gt_cn_vocab_free(struct gt_cn_vocab *v);

/* model_read.c's readers: the only way an architecture reads "<arch>.*"
 * metadata or finds a weight, because each records what it returned in the
 * load running on this thread. After the architecture's weights are found,
 * a tensor no reader returned, or a key no reader read that model_keys.c
 * does not list as harmless, makes the load fail "unsupported: ..."
 * (GT_MODEL_UNSUPPORTED). Reading a key is a promise to implement each of
 * its values or refuse it ("unsupported: metadata key K = V is not
 * implemented").
 *
 * gt_model_arch_int: an integer in 1..2^24 (def < 0: the key is required);
 * _float: any number; _str: a string (def, possibly NULL, when absent).
 * Errors name the key. */
int gt_model_arch_int(const gt_gguf *g, const char *arch, const char *key, int64_t def,
                      int64_t *out, gt_err *err);
int gt_model_arch_float(const gt_gguf *g, const char *arch, const char *key, double def,
                        double *out, gt_err *err);
int gt_model_arch_str(const gt_gguf *g, const char *arch, const char *key, const char *def,
                      const char **out, gt_err *err);
/* Finds a weight and checks it is [rows x cols] (ne[0] = cols; rows 1: a
 * 1-D f32 vector). _opt: an absent tensor is not an error (*out = NULL),
 * a present one is checked and recorded the same. */
int gt_model_weight(const gt_gguf *g, const char *name, int64_t cols, int64_t rows,
                    const gt_gguf_tensor **out, gt_err *err);
int gt_model_weight_opt(const gt_gguf *g, const char *name, int64_t cols, int64_t rows,
                        const gt_gguf_tensor **out, gt_err *err);
/* A 3-D weight: planes of [rows x cols] (ne[2] = planes; the experts of a
 * layer), which the graph sees as planes * rows rows. */
int gt_model_weight3(const gt_gguf *g, const char *name, int64_t cols, int64_t rows,
                     int64_t planes, const gt_gguf_tensor **out, gt_err *err);

/* What the load running on this thread has read of its file: the readers
 * mark key_read[i] / tensor_used[i] while gt_model_use_set has one set
 * (model.c sets it for a load, NULL after). */
typedef struct gt_load_use {
    const gt_gguf *g;
    uint8_t *key_read;    /* (n_kv) */
    uint8_t *tensor_used; /* (n_tensors) */
} gt_load_use;
void gt_model_use_set(gt_load_use *use);

/* qwen3moe (model_qwen3moe.c): its hyper-parameters on top of the common
 * ones read_hparams has read, and its layers' weights. */
int gt_qwen3moe_hparams(const gt_gguf *g, gt_hparams *hp, gt_err *err);
int gt_qwen3moe_weights(gt_model *m, gt_err *err);

/* model_keys.c: of the keys whose key_read[i] is 0, lists those not known to
 * be harmless ("K = V, ...", the first six, then "and N more") into buf and
 * returns how many there are. */
int gt_model_unread_keys(const gt_gguf *g, const char *arch, const uint8_t *key_read,
                         char *buf, size_t cap);
/* model_rope.c: head size, q width, rope.dimension_count, attention scale
 * (see there for the rules); and RoPE scaling. */
#define GT_HEAD_FIXED 1u /* heads of n_embd / n_head only */
#define GT_ROPE_WHOLE 2u /* RoPE over whole heads only */
int gt_model_head_shape(const gt_gguf *g, gt_hparams *hp, unsigned rules, gt_err *err);
/* "<arch>.rope.scaling.*": none or linear (freq_scale = 1/factor) and
 * attn_factor; any other type is refused by name. */
int gt_model_rope_scaling(const gt_gguf *g, gt_hparams *hp, gt_err *err);

/* phi3 (model_phi3.c): the hyper-parameters after the common ones, and the
 * weights. */
int gt_model_read_phi3(const gt_gguf *g, gt_hparams *hp, gt_err *err);
int gt_model_find_phi3(gt_model *m, gt_err *err);

/* model_qwen.c: qwen2/qwen3 hyper-parameters past the common ones, and
 * layer l's weights past the llama ones. */
int gt_model_read_qwen(const gt_gguf *g, gt_hparams *hp, gt_err *err);
int gt_model_qwen_layer(gt_model *m, int l, gt_err *err);

#endif
