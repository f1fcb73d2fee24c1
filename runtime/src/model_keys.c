/* model_keys.c: which metadata keys a model may carry that its
 * architecture's code did not read.
 *
 * A key that changes the math and is ignored is a model run wrong without a
 * word (a soft-capping value, a YaRN scaling, an expert count). So after a
 * load, every key nobody read through model.c's helpers must be listed here
 * as harmless, under a condition on its value where only some values are;
 * anything else makes the model "unsupported", naming the key and its value.
 * Each entry says why it is harmless. Adding a key here is a claim that the
 * runtime's output does not depend on it: when in doubt, leave it out (the
 * model is refused, visibly) rather than in (the model runs, maybe wrong).
 *
 * Namespaces other than "<arch>.":
 *   general.*    names, licenses, tags, sizes, file_type, quantization_version,
 *                sampling hints: llama.cpp computes nothing from them (it reads
 *                general.architecture, which model.c dispatches on, and
 *                general.alignment, which the reader applies). general.type,
 *                when present, must be "model": an "adapter" (LoRA) or an
 *                "mmproj" file is not a model to run on its own.
 *   tokenizer.*  the tokenizer's: tokenizer_load.c reads them and refuses what
 *                it does not implement (a tokenizer.ggml.model or .pre it does
 *                not know); tokenizer.chat_template is serve's, not the graph's.
 *   split.*      the reader joins shards by them.
 *   quantize.*   how the file was quantized (imatrix file, dataset, chunks).
 *   gauntlet.*   our synthetic writer's preset and seed.
 * Any other namespace is refused: nobody here knows what it means. */
#include "model_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

typedef enum when {
    ALWAYS,       /* harmless whatever its value */
    IF_ZERO,      /* harmless when the number (or bool) is 0 / false */
    IF_ONE,       /* harmless when the number is 1 */
    IF_ONE_OR_0,  /* harmless when 1, or 0 (llama.cpp reads 0 as "unset": 1) */
    IF_TRUE,      /* harmless when the bool (or number) is true / nonzero */
    IF_FALSE,     /* harmless when the bool is false */
    IF_NONE,      /* harmless when the string is "none" */
    IF_NO_SCALING /* harmless when <arch>.rope.scaling.type is absent or "none" */
} when;

typedef struct harmless {
    const char *suffix; /* after "<arch>." */
    when when;
    const char *why;
} harmless;

static const harmless HARMLESS[] = {
    {"context_length", ALWAYS, "the length trained on: no computation depends on it (a "
                               "session's context size comes from its caller)"},
    {"rope.scaling.type", IF_NONE, "\"none\" is what every graph here does"},
    {"rope.scaling.factor", IF_ONE_OR_0, "1 scales nothing (0 is unset, read as 1 by llama.cpp)"},
    {"rope.scale_linear", IF_ONE_OR_0, "the older name of rope.scaling.factor"},
    {"rope.scaling.attn_factor", IF_ONE, "it multiplies the attention logits: 1 is none"},
    {"rope.scaling.original_context_length", IF_NO_SCALING,
     "only YaRN-style scaling computes with it: harmless while there is no scaling"},
    {"rope.scaling.finetuned", ALWAYS, "a note on how the model was trained, used by nothing"},
    {"expert_count", IF_ZERO, "0 experts: a dense model, which is what the graph runs"},
    {"expert_used_count", IF_ZERO, "0: a dense model"},
    {"expert_shared_count", IF_ZERO, "0: no shared experts"},
    {"leading_dense_block_count", IF_ZERO, "0: no special leading blocks"},
    {"nextn_predict_layers", IF_ZERO, "0: no multi-token-prediction layers"},
    {"attention.causal", IF_TRUE, "causal masking is what every graph here does"},
    {"attention.clamp_kqv", IF_ZERO, "0 clamps nothing"},
    {"pooling_type", IF_ZERO, "0 (none): no pooled embedding is made"},
    {"logit_scale", IF_ONE, "1 scales nothing"},
    {"embedding_scale", IF_ONE, "1 scales nothing"},
    {"residual_scale", IF_ONE, "1 scales nothing"},
    {"use_parallel_residual", IF_FALSE, "false: the sequential residual every graph here has"},
};

#define SHOWN 6 /* keys named in the message; the rest are counted */

/* Namespaces that are not the graph's (see the top of the file). */
static const char *const OTHER_OWNERS[] = {"general.", "tokenizer.", "split.", "quantize.",
                                           "gauntlet."};

/* A scalar's value as a number (bools as 0/1); false for strings, arrays. */
static bool number(const gt_gguf *g, int64_t i, double *v)
{
    bool b;
    if (gt_gguf_kv_float(g, i, v))
        return true;
    if (gt_gguf_kv_bool(g, i, &b)) {
        *v = b ? 1.0 : 0.0;
        return true;
    }
    return false;
}

static bool scaling_off(const gt_gguf *g, const char *arch)
{
    char key[160];
    snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
    int64_t i = gt_gguf_find_key(g, key);
    const char *s = i >= 0 ? gt_gguf_kv_str(g, i, NULL) : NULL;
    return i < 0 || (s && strcmp(s, "none") == 0);
}

static bool value_ok(const gt_gguf *g, int64_t i, const char *arch, when w)
{
    double v;
    const char *s;
    switch (w) {
    case ALWAYS: return true;
    case IF_ZERO: return number(g, i, &v) && v == 0.0;
    case IF_ONE: return number(g, i, &v) && v == 1.0;
    case IF_ONE_OR_0: return number(g, i, &v) && (v == 1.0 || v == 0.0);
    case IF_TRUE: return number(g, i, &v) && v != 0.0;
    case IF_FALSE: return number(g, i, &v) && v == 0.0;
    case IF_NONE: return (s = gt_gguf_kv_str(g, i, NULL)) != NULL && strcmp(s, "none") == 0;
    case IF_NO_SCALING: return scaling_off(g, arch);
    }
    return false;
}

/* Whether kv i, which no reader looked at, may be left alone. */
static bool harmless_key(const gt_gguf *g, int64_t i, const char *arch)
{
    const char *key = gt_gguf_key(g, i);
    size_t al = strlen(arch);
    if (strncmp(key, arch, al) == 0 && key[al] == '.') {
        for (size_t k = 0; k < sizeof HARMLESS / sizeof *HARMLESS; k++)
            if (strcmp(key + al + 1, HARMLESS[k].suffix) == 0)
                return value_ok(g, i, arch, HARMLESS[k].when);
        return false;
    }
    if (strcmp(key, "general.type") == 0) {
        const char *s = gt_gguf_kv_str(g, i, NULL);
        return s && strcmp(s, "model") == 0;
    }
    for (size_t k = 0; k < sizeof OTHER_OWNERS / sizeof *OTHER_OWNERS; k++)
        if (strncmp(key, OTHER_OWNERS[k], strlen(OTHER_OWNERS[k])) == 0)
            return true;
    return false;
}

/* kv i's value, short: a number, a quoted string (cut), or "[N items]". */
static void show_value(const gt_gguf *g, int64_t i, char *buf, size_t cap)
{
    size_t len;
    int64_t iv;
    double dv;
    bool bv;
    gt_gguf_vtype t = gt_gguf_kv_type(g, i);
    const char *s = gt_gguf_kv_str(g, i, &len);
    if (s)
        snprintf(buf, cap, "\"%.*s%s\"", len > 40 ? 40 : (int)len, s, len > 40 ? "..." : "");
    else if (t == GT_GGUF_ARRAY)
        snprintf(buf, cap, "[%" PRIu64 " items]", gt_gguf_arr_len(g, i));
    else if (gt_gguf_kv_bool(g, i, &bv))
        snprintf(buf, cap, "%s", bv ? "true" : "false");
    else if ((t == GT_GGUF_FLOAT32 || t == GT_GGUF_FLOAT64) && gt_gguf_kv_float(g, i, &dv))
        snprintf(buf, cap, "%g", dv);
    else if (gt_gguf_kv_int(g, i, &iv))
        snprintf(buf, cap, "%" PRId64, iv);
    else
        snprintf(buf, cap, "(a %s)", gt_gguf_vtype_name(t));
}

int gt_model_unread_keys(const gt_gguf *g, const char *arch, const uint8_t *key_read,
                         char *buf, size_t cap)
{
    int n = 0;
    size_t k = 0;
    buf[0] = '\0';
    for (int64_t i = 0; i < gt_gguf_n_kv(g); i++) {
        if (key_read[i] || harmless_key(g, i, arch))
            continue;
        char v[64];
        show_value(g, i, v, sizeof v);
        if (n < SHOWN && k < cap)
            k += (size_t)snprintf(buf + k, cap - k, "%s%s = %s", n ? ", " : "",
                                  gt_gguf_key(g, i), v);
        n++;
    }
    if (n > SHOWN && k < cap)
        snprintf(buf + k, cap - k, " and %d more", n - SHOWN);
    return n;
}
