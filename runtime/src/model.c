/* model.c: reading a model out of a GGUF artifact: the llama family,
 * Gemma 3, Qwen 2/3 (their own parts in model_qwen.c) and Phi-3 (model_phi3.c).
 *
 * Hyper-parameters come from "<arch>.*" metadata, weights are looked up by
 * their llama.cpp names and checked against the shapes the hyper-parameters
 * imply, so that a wrong or truncated artifact fails here, with the tensor's
 * name, rather than as garbage logits later. Weights are not copied: the
 * tensors point into the GGUF mmap.
 *
 * Gemma 3 files carry no key for some values every Gemma 3 has (the local
 * layers' rope base, which layers are global, the attention scale); those
 * are named defaults below, a key overrides them when a file has one, and
 * hp->defaulted lists what was defaulted (gauntlet inspect shows it).
 *
 * What is not understood is refused. The metadata and weight readers
 * (model_read.c, for every architecture file) record every key and
 * tensor they return in the load running on this thread. After the
 * architecture has found its weights, a tensor nobody looked up, or a key
 * nobody read that model_keys.c does not list as harmless, fails the load
 * with "unsupported: ..." naming them all (GT_MODEL_UNSUPPORTED): a file
 * whose extra tensor or scaling key we ignored would otherwise run wrong
 * and agree with itself on every backend. */
#include "model_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Architectures that share the llama graph (RMSNorm, RoPE, GQA, SwiGLU). */
static const char *const LLAMA_LIKE[] = {"llama", "mistral"};

/* The short names this file has always used. */
#define arch_int gt_model_arch_int
#define arch_float gt_model_arch_float

/* Gemma 3's published values for what its GGUF files do not store. */
#define GEMMA3_ROPE_BASE_LOCAL 10000.0 /* local (sliding-window) layers */
#define GEMMA3_SWA_PERIOD 6            /* every 6th layer is global */

static void note_default(gt_hparams *hp, const gt_gguf *g, const char *key, const char *value)
{
    char full[128];
    snprintf(full, sizeof full, "%s.%s", hp->arch, key);
    if (gt_gguf_find_key(g, full) >= 0)
        return;
    size_t n = strlen(hp->defaulted);
    snprintf(hp->defaulted + n, sizeof hp->defaulted - n, "%s%s=%s", n ? ", " : "", full, value);
}

/* The gemma3 values on top of the common ones. */
static int read_gemma3(const gt_gguf *g, gt_hparams *hp, gt_err *err)
{
    const char *arch = hp->arch;
    int64_t v;
    double f;
    hp->arch_id = GT_ARCH_GEMMA3;
    if (arch_int(g, arch, "attention.key_length", -1, &v, err)) return -1;
    hp->head_dim = (int)v;
    if (arch_int(g, arch, "attention.value_length", hp->head_dim, &v, err)) return -1;
    if (v != hp->head_dim)
        return gt_err_set(err, "%s.attention.value_length %lld differs from key_length %d", arch,
                          (long long)v, hp->head_dim);
    hp->q_dim = hp->n_head * hp->head_dim;
    hp->rope_dim = hp->head_dim;
    hp->rope_mode = 1; /* NeoX halves, as Gemma is trained */
    if (arch_int(g, arch, "attention.sliding_window", -1, &v, err)) return -1;
    hp->swa_window = (int)v;
    note_default(hp, g, "attention.sliding_window_pattern", "6");
    if (arch_int(g, arch, "attention.sliding_window_pattern", GEMMA3_SWA_PERIOD, &v, err))
        return -1;
    hp->swa_period = (int)v;
    note_default(hp, g, "rope.freq_base_swa", "10000");
    if (arch_float(g, arch, "rope.freq_base_swa", GEMMA3_ROPE_BASE_LOCAL, &f, err)) return -1;
    hp->rope_base_local = (float)f;
    note_default(hp, g, "attention.scale", "1/sqrt(key_length)");
    if (arch_float(g, arch, "attention.scale", 1.0 / sqrt((double)hp->head_dim), &f, err))
        return -1;
    hp->attn_scale = (float)f;
    hp->embd_scale = sqrtf((float)hp->n_embd);
    return 0;
}

static int read_hparams(const gt_gguf *g, gt_hparams *hp, gt_err *err)
{
    memset(hp, 0, sizeof *hp);
    const char *arch = gt_gguf_get_str(g, "general.architecture");
    if (!arch)
        return gt_err_set(err, "metadata key general.architecture is missing");
    bool llama = false;
    for (size_t i = 0; i < sizeof LLAMA_LIKE / sizeof LLAMA_LIKE[0]; i++)
        llama |= strcmp(arch, LLAMA_LIKE[i]) == 0;
    const bool gemma3 = strcmp(arch, "gemma3") == 0, phi3 = strcmp(arch, "phi3") == 0;
    const bool qwen3moe = strcmp(arch, "qwen3moe") == 0;
    const bool qwen = strcmp(arch, "qwen2") == 0 || strcmp(arch, "qwen3") == 0;
    if (!llama && !gemma3 && !qwen && !phi3 && !qwen3moe)
        return gt_err_set(err, "unsupported: architecture '%s' is not implemented (implemented: "
                               "llama, mistral, gemma3, qwen2, qwen3, phi3, qwen3moe)", arch);
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
    if (hp->n_head % hp->n_head_kv != 0)
        return gt_err_set(err, "head_count %d is not a multiple of head_count_kv %d",
                          hp->n_head, hp->n_head_kv);
    if (arch_float(g, arch, "rope.freq_base", 10000.0, &f, err)) return -1;
    hp->rope_base = (float)f;
    if (arch_float(g, arch, "attention.layer_norm_rms_epsilon", 1e-5, &f, err)) return -1;
    hp->rms_eps = (float)f;
    hp->rope_freq_scale = hp->rope_attn_factor = 1.0f;
    hp->n_ctx_orig = hp->n_ctx_train;
    if (gemma3)
        return read_gemma3(g, hp, err);
    if (phi3)
        return gt_model_read_phi3(g, hp, err);
    if (qwen3moe)
        return gt_qwen3moe_hparams(g, hp, err);
    if (qwen)
        return gt_model_read_qwen(g, hp, err);
    hp->arch_id = GT_ARCH_LLAMA;
    if (gt_model_head_shape(g, hp, GT_HEAD_FIXED, err)) return -1;
    hp->rope_mode = 0; /* llama.cpp's llama GGUFs store Q/K permuted for adjacent pairs */
    return gt_model_rope_scaling(g, hp, err);
}

#define weight gt_model_weight

static int find_weights(gt_model *m, gt_err *err)
{
    const gt_gguf *g = m->gguf;
    const gt_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, KV = (int64_t)hp->n_head_kv * hp->head_dim, QD = hp->q_dim;
    const bool gemma3 = hp->arch_id == GT_ARCH_GEMMA3;
    if (weight(g, "token_embd.weight", E, hp->n_vocab, &m->tok_embd, err)) return -1;
    if (weight(g, "output_norm.weight", E, 1, &m->out_norm, err)) return -1;
    if (gt_model_weight_opt(g, "output.weight", E, hp->n_vocab, &m->output, err)) return -1;
    if (!m->output) {
        m->output = m->tok_embd;
        m->hp.tied_output = true;
    }
    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers)
        return gt_err_set(err, "out of memory");
    if (hp->arch_id == GT_ARCH_QWEN3MOE)
        return gt_qwen3moe_weights(m, err);
    if (hp->arch_id == GT_ARCH_PHI3)
        return gt_model_find_phi3(m, err);
    /* Llama 3.x: frequency factors for every layer's Q and K */
    if (gt_model_weight_opt(g, "rope_freqs.weight", hp->rope_dim / 2, 1, &m->rope_freqs, err))
        return -1;
    for (int l = 0; l < hp->n_layer; l++) {
        gt_layer_weights *w = &m->layers[l];
        char n[96];
#define W(field, suffix, cols, rows)                                   \
    snprintf(n, sizeof n, "blk.%d.%s.weight", l, suffix);              \
    if (weight(g, n, cols, rows, &w->field, err)) return -1;
        W(attn_norm, "attn_norm", E, 1)
        W(wq, "attn_q", E, QD)
        W(wk, "attn_k", E, KV)
        W(wv, "attn_v", E, KV)
        W(wo, "attn_output", QD, E)
        W(ffn_norm, "ffn_norm", E, 1)
        W(w_gate, "ffn_gate", E, hp->n_ff)
        W(w_up, "ffn_up", E, hp->n_ff)
        W(w_down, "ffn_down", hp->n_ff, E)
        if (gemma3) {
            W(q_norm, "attn_q_norm", hp->head_dim, 1)
            W(k_norm, "attn_k_norm", hp->head_dim, 1)
            W(post_attn_norm, "post_attention_norm", E, 1)
            W(post_ffn_norm, "post_ffw_norm", E, 1)
        }
#undef W
        if ((hp->arch_id == GT_ARCH_QWEN2 || hp->arch_id == GT_ARCH_QWEN3) &&
            gt_model_qwen_layer(m, l, err) != 0)
            return -1;
    }
    return 0;
}

/* Lists up to SHOWN names of the tensors no reader looked up into buf;
 * returns how many there are. */
#define SHOWN 6
static int unused_tensors(const gt_gguf *g, const uint8_t *used, char *buf, size_t cap)
{
    int n = 0;
    size_t k = 0;
    buf[0] = '\0';
    for (int64_t i = 0; i < gt_gguf_n_tensors(g); i++) {
        if (used[i])
            continue;
        if (n < SHOWN && k < cap)
            k += (size_t)snprintf(buf + k, cap - k, "%s%s", n ? ", " : "",
                                  gt_gguf_tensor_at(g, i)->name);
        n++;
    }
    if (n > SHOWN && k < cap)
        snprintf(buf + k, cap - k, " and %d more", n - SHOWN);
    return n;
}

/* The refusal: every tensor and key the architecture left alone. */
static int check_all_used(const gt_model *m, const gt_load_use *use, gt_err *err)
{
    char tensors[400], keys[600];
    int nt = unused_tensors(m->gguf, use->tensor_used, tensors, sizeof tensors);
    int nk = gt_model_unread_keys(m->gguf, m->hp.arch, use->key_read, keys, sizeof keys);
    if (!nt && !nk)
        return 0;
    char tpart[512] = "", kpart[700] = "";
    if (nt)
        snprintf(tpart, sizeof tpart, "tensor%s %s %s not used by the %s graph", nt > 1 ? "s" : "",
                 tensors, nt > 1 ? "are" : "is", m->hp.arch);
    if (nk)
        snprintf(kpart, sizeof kpart, "metadata key%s %s %s not implemented", nk > 1 ? "s" : "",
                 keys, nk > 1 ? "are" : "is");
    return gt_err_set(err, "unsupported: %s%s%s", tpart, nt && nk ? "; " : "", kpart);
}

/* A refusal (ours, or the tokenizer's) rather than a broken file. */
static bool is_unsupported(const char *msg)
{
    return strncmp(msg, "unsupported", 11) == 0 || strncmp(msg, "tokenizer: unsupported", 22) == 0;
}

int gt_model_load(const char *path, gt_model **out, gt_err *err)
{
    gt_err local = {{0}};
    if (!err)
        err = &local;
    *out = NULL;
    gt_model *m = calloc(1, sizeof *m);
    gt_load_use use = {0};
    if (!m)
        return gt_err_set(err, "out of memory");
    if (gt_gguf_open(path, &m->gguf, err) != 0) {
        gt_err_wrap(err, "%s", path);
        gt_model_free(m);
        return -1;
    }
    use.g = m->gguf;
    use.key_read = calloc((size_t)gt_gguf_n_kv(m->gguf) + 1, 1);
    use.tensor_used = calloc((size_t)gt_gguf_n_tensors(m->gguf) + 1, 1);
    if (!use.key_read || !use.tensor_used) {
        gt_err_set(err, "out of memory");
        goto fail;
    }
    gt_model_use_set(&use);
    if (read_hparams(m->gguf, &m->hp, err) != 0 ||
        gt_tokenizer_from_gguf(m->gguf, &m->tok, err) != 0)
        goto fail;
    m->hp.n_vocab = gt_tokenizer_n_vocab(m->tok);
    int64_t nv;
    if (arch_int(m->gguf, m->hp.arch, "vocab_size", m->hp.n_vocab, &nv, err) != 0)
        goto fail;
    if (nv != m->hp.n_vocab) {
        gt_err_set(err, "metadata key %s.vocab_size = %lld differs from the tokenizer's %d tokens",
                   m->hp.arch, (long long)nv, m->hp.n_vocab);
        goto fail;
    }
    if (find_weights(m, err) != 0 || check_all_used(m, &use, err) != 0)
        goto fail;
    gt_model_use_set(NULL);
    free(use.key_read);
    free(use.tensor_used);
    *out = m;
    return 0;
fail:
    gt_model_use_set(NULL);
    free(use.key_read);
    free(use.tensor_used);
    const int rc = is_unsupported(err->msg) ? GT_MODEL_UNSUPPORTED : -1;
    gt_err_wrap(err, "%s", path);
    gt_model_free(m);
    return rc;
}

void gt_model_free(gt_model *m)
{
    if (!m)
        return;
    free(m->layers);
    gt_cn_vocab_free(m->cn_vocab);
    gt_tokenizer_free(m->tok);
    gt_gguf_close(m->gguf);
    free(m);
}

const gt_hparams *gt_model_hparams(const gt_model *m) { return &m->hp; }
const gt_tokenizer *gt_model_tokenizer(const gt_model *m) { return m->tok; }
const gt_gguf *gt_model_gguf(const gt_model *m) { return m->gguf; }

/* A weight's bytes and elements, 0 for one the architecture does not have
 * (phi3's fused wqkv stands for wq, wk, wv). */
#define NB(w) ((w) ? (w)->nbytes : 0)
#define NE(w) ((w) ? (uint64_t)(w)->n_elements : 0)

uint64_t gt_model_weight_bytes_per_token(const gt_model *m)
{
    uint64_t bytes = gt_row_size(m->tok_embd->type, m->hp.n_embd) + m->output->nbytes +
                     m->out_norm->nbytes;
    for (int l = 0; l < m->hp.n_layer; l++) {
        const gt_layer_weights *w = &m->layers[l];
        bytes += w->attn_norm->nbytes + NB(w->wq) + NB(w->wk) + NB(w->wv) + NB(w->wqkv) +
                 w->wo->nbytes + w->ffn_norm->nbytes;
        if (w->ffn_gate_inp) /* the router, and the k experts a token runs */
            bytes += w->ffn_gate_inp->nbytes +
                     (w->ffn_gate_exps->nbytes + w->ffn_up_exps->nbytes +
                      w->ffn_down_exps->nbytes) / (uint64_t)m->hp.n_expert *
                         (uint64_t)m->hp.n_expert_used;
        else
            bytes += NB(w->w_gate) + w->w_up->nbytes + w->w_down->nbytes;
        const gt_gguf_tensor *opt[] = {w->q_norm, w->k_norm, w->post_attn_norm,
                                       w->post_ffn_norm, w->bq, w->bk, w->bv};
        for (size_t i = 0; i < sizeof opt / sizeof opt[0]; i++)
            bytes += opt[i] ? opt[i]->nbytes : 0;
    }
    return bytes;
}

gt_type gt_model_main_type(const gt_model *m)
{
    if (m->hp.n_layer == 0)
        return m->output->type;
    const gt_layer_weights *l0 = &m->layers[0];
    return l0->ffn_gate_exps ? l0->ffn_gate_exps->type
         : l0->w_gate        ? l0->w_gate->type
                             : l0->w_up->type; /* phi3: gate and up fused */
}

uint64_t gt_model_matrix_params(const gt_model *m)
{
    uint64_t n = (uint64_t)m->output->n_elements;
    for (int l = 0; l < m->hp.n_layer; l++) {
        const gt_layer_weights *w = &m->layers[l];
        n += NE(w->wq) + NE(w->wk) + NE(w->wv) + NE(w->wqkv) + NE(w->wo);
        if (w->ffn_gate_inp) /* what one token multiplies: the router and k experts */
            n += (uint64_t)w->ffn_gate_inp->n_elements +
                 (uint64_t)(w->ffn_gate_exps->n_elements + w->ffn_up_exps->n_elements +
                            w->ffn_down_exps->n_elements) /
                     (uint64_t)m->hp.n_expert * (uint64_t)m->hp.n_expert_used;
        else
            n += NE(w->w_gate) + NE(w->w_up) + NE(w->w_down);
    }
    return n;
}
