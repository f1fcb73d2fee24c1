/* model.c: reading a llama-family model out of a GGUF artifact.
 *
 * Hyper-parameters come from "<arch>.*" metadata, weights are looked up by
 * their llama.cpp names and checked against the shapes the hyper-parameters
 * imply, so that a wrong or truncated artifact fails here, with the tensor's
 * name, rather than as garbage logits later. Weights are not copied: the
 * tensors point into the GGUF mmap. */
#include "model_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Architectures that share the llama graph (RMSNorm, RoPE, GQA, SwiGLU). */
static const char *const LLAMA_LIKE[] = {"llama", "mistral"};

static int arch_int(const gt_gguf *g, const char *arch, const char *key, int64_t def,
                    int64_t *out, gt_err *err)
{
    char full[128];
    snprintf(full, sizeof full, "%s.%s", arch, key);
    int64_t i = gt_gguf_find_key(g, full);
    if (i < 0) {
        if (def < 0)
            return gt_err_set(err, "metadata key %s is missing", full);
        *out = def;
        return 0;
    }
    if (!gt_gguf_kv_int(g, i, out))
        return gt_err_set(err, "metadata key %s is a %s, expected an integer", full,
                          gt_gguf_vtype_name(gt_gguf_kv_type(g, i)));
    if (*out <= 0 || *out > (1 << 24))
        return gt_err_set(err, "metadata key %s = %lld is out of range", full, (long long)*out);
    return 0;
}

static int arch_float(const gt_gguf *g, const char *arch, const char *key, double def,
                      double *out, gt_err *err)
{
    char full[128];
    snprintf(full, sizeof full, "%s.%s", arch, key);
    int64_t i = gt_gguf_find_key(g, full);
    if (i < 0) {
        *out = def;
        return 0;
    }
    if (!gt_gguf_kv_float(g, i, out))
        return gt_err_set(err, "metadata key %s is a %s, expected a number", full,
                          gt_gguf_vtype_name(gt_gguf_kv_type(g, i)));
    return 0;
}

static int read_hparams(const gt_gguf *g, gt_hparams *hp, gt_err *err)
{
    memset(hp, 0, sizeof *hp);
    const char *arch = gt_gguf_get_str(g, "general.architecture");
    if (!arch)
        return gt_err_set(err, "metadata key general.architecture is missing");
    bool known = false;
    for (size_t i = 0; i < sizeof LLAMA_LIKE / sizeof LLAMA_LIKE[0]; i++)
        known |= strcmp(arch, LLAMA_LIKE[i]) == 0;
    if (!known)
        return gt_err_set(err, "architecture '%s' is not supported (supported: llama, mistral)",
                          arch);
    snprintf(hp->arch, sizeof hp->arch, "%s", arch);
    const char *name = gt_gguf_get_str(g, "general.name");
    snprintf(hp->name, sizeof hp->name, "%s", name ? name : "(unnamed)");

    int64_t v;
    double f;
    if (arch_int(g, arch, "block_count", -1, &v, err)) return -1;
    hp->n_layer = (int)v;
    if (arch_int(g, arch, "embedding_length", -1, &v, err)) return -1;
    hp->n_embd = (int)v;
    if (arch_int(g, arch, "feed_forward_length", -1, &v, err)) return -1;
    hp->n_ff = (int)v;
    if (arch_int(g, arch, "attention.head_count", -1, &v, err)) return -1;
    hp->n_head = (int)v;
    if (arch_int(g, arch, "attention.head_count_kv", hp->n_head, &v, err)) return -1;
    hp->n_head_kv = (int)v;
    if (arch_int(g, arch, "context_length", 2048, &v, err)) return -1;
    hp->n_ctx_train = (int)v;
    if (hp->n_embd % hp->n_head != 0)
        return gt_err_set(err, "embedding_length %d is not a multiple of head_count %d",
                          hp->n_embd, hp->n_head);
    if (hp->n_head % hp->n_head_kv != 0)
        return gt_err_set(err, "head_count %d is not a multiple of head_count_kv %d",
                          hp->n_head, hp->n_head_kv);
    hp->head_dim = hp->n_embd / hp->n_head;
    if (arch_int(g, arch, "rope.dimension_count", hp->head_dim, &v, err)) return -1;
    hp->rope_dim = (int)v;
    if (hp->rope_dim > hp->head_dim || hp->rope_dim % 2 != 0)
        return gt_err_set(err, "rope.dimension_count %d does not fit head size %d",
                          hp->rope_dim, hp->head_dim);
    if (arch_float(g, arch, "rope.freq_base", 10000.0, &f, err)) return -1;
    hp->rope_base = (float)f;
    if (arch_float(g, arch, "attention.layer_norm_rms_epsilon", 1e-5, &f, err)) return -1;
    hp->rms_eps = (float)f;
    hp->rope_mode = 0; /* llama.cpp's llama GGUFs store Q/K permuted for adjacent pairs */
    return 0;
}

/* Finds a weight and checks it is [rows x cols] (ne[0] = cols). */
static int weight(const gt_gguf *g, const char *name, int64_t cols, int64_t rows,
                  const gt_gguf_tensor **out, gt_err *err)
{
    const gt_gguf_tensor *t = gt_gguf_find_tensor(g, name);
    if (!t)
        return gt_err_set(err, "tensor %s is missing", name);
    int64_t want_dims = rows == 1 ? 1 : 2;
    if (t->ne[0] != cols || t->ne[1] != rows || t->ne[2] != 1 || t->ne[3] != 1 ||
        (t->n_dims != want_dims && !(rows == 1 && t->n_dims == 2)))
        return gt_err_set(err, "tensor %s has shape %lld x %lld x %lld x %lld, expected %lld x %lld",
                          name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                          (long long)t->ne[3], (long long)cols, (long long)rows);
    if (rows == 1 && t->type != GT_TYPE_F32)
        return gt_err_set(err, "tensor %s is %s; norm weights must be f32", name,
                          gt_type_name(t->type));
    *out = t;
    return 0;
}

static int find_weights(gt_model *m, gt_err *err)
{
    const gt_gguf *g = m->gguf;
    const gt_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, KV = (int64_t)hp->n_head_kv * hp->head_dim;
    if (weight(g, "token_embd.weight", E, hp->n_vocab, &m->tok_embd, err)) return -1;
    if (weight(g, "output_norm.weight", E, 1, &m->out_norm, err)) return -1;
    if (gt_gguf_find_tensor(g, "output.weight")) {
        if (weight(g, "output.weight", E, hp->n_vocab, &m->output, err)) return -1;
    } else {
        m->output = m->tok_embd;
        m->hp.tied_output = true;
    }
    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers)
        return gt_err_set(err, "out of memory");
    for (int l = 0; l < hp->n_layer; l++) {
        gt_layer_weights *w = &m->layers[l];
        char n[96];
#define W(field, suffix, cols, rows)                                   \
    snprintf(n, sizeof n, "blk.%d.%s.weight", l, suffix);              \
    if (weight(g, n, cols, rows, &w->field, err)) return -1;
        W(attn_norm, "attn_norm", E, 1)
        W(wq, "attn_q", E, E)
        W(wk, "attn_k", E, KV)
        W(wv, "attn_v", E, KV)
        W(wo, "attn_output", E, E)
        W(ffn_norm, "ffn_norm", E, 1)
        W(w_gate, "ffn_gate", E, hp->n_ff)
        W(w_up, "ffn_up", E, hp->n_ff)
        W(w_down, "ffn_down", hp->n_ff, E)
#undef W
    }
    return 0;
}

int gt_model_load(const char *path, gt_model **out, gt_err *err)
{
    *out = NULL;
    gt_model *m = calloc(1, sizeof *m);
    if (!m)
        return gt_err_set(err, "out of memory");
    if (gt_gguf_open(path, &m->gguf, err) != 0 || read_hparams(m->gguf, &m->hp, err) != 0 ||
        gt_tokenizer_from_gguf(m->gguf, &m->tok, err) != 0)
        goto fail;
    m->hp.n_vocab = gt_tokenizer_n_vocab(m->tok);
    if (find_weights(m, err) != 0)
        goto fail;
    *out = m;
    return 0;
fail:
    gt_err_wrap(err, "%s", path);
    gt_model_free(m);
    return -1;
}

void gt_model_free(gt_model *m)
{
    if (!m)
        return;
    free(m->layers);
    gt_tokenizer_free(m->tok);
    gt_gguf_close(m->gguf);
    free(m);
}

const gt_hparams *gt_model_hparams(const gt_model *m) { return &m->hp; }
const gt_tokenizer *gt_model_tokenizer(const gt_model *m) { return m->tok; }
const gt_gguf *gt_model_gguf(const gt_model *m) { return m->gguf; }

uint64_t gt_model_weight_bytes_per_token(const gt_model *m)
{
    uint64_t bytes = gt_row_size(m->tok_embd->type, m->hp.n_embd) + m->output->nbytes +
                     m->out_norm->nbytes;
    for (int l = 0; l < m->hp.n_layer; l++) {
        const gt_layer_weights *w = &m->layers[l];
        bytes += w->attn_norm->nbytes + w->wq->nbytes + w->wk->nbytes + w->wv->nbytes +
                 w->wo->nbytes + w->ffn_norm->nbytes + w->w_gate->nbytes + w->w_up->nbytes +
                 w->w_down->nbytes;
    }
    return bytes;
}

gt_type gt_model_main_type(const gt_model *m)
{
    return m->hp.n_layer > 0 ? m->layers[0].w_gate->type : m->output->type;
}

uint64_t gt_model_matrix_params(const gt_model *m)
{
    uint64_t n = (uint64_t)m->output->n_elements;
    for (int l = 0; l < m->hp.n_layer; l++) {
        const gt_layer_weights *w = &m->layers[l];
        n += (uint64_t)(w->wq->n_elements + w->wk->n_elements + w->wv->n_elements +
                        w->wo->n_elements + w->w_gate->n_elements + w->w_up->n_elements +
                        w->w_down->n_elements);
    }
    return n;
}
