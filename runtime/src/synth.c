/* synth.c: synthetic models (llama, phi3, qwen2, qwen3, qwen3moe) with seeded
 * weights and a working SentencePiece-style tokenizer (see gt/synth.h).
 *
 * Design choices:
 *  - Determinism across machines. Each tensor draws from its own splitmix64
 *    stream, seeded by the model seed and a hash of the tensor's name, so a
 *    tensor's values do not depend on the order of the others or on the
 *    preset. A value is a sum of four 22-bit uniforms (an integer, exact in
 *    f32) times one float scale: one correctly rounded multiply, which no
 *    compiler can contract or reorder. Quantized types are then made with the
 *    reference quantizers of quant.c, which are deterministic too, so
 *    `synth --type q8_0` has the same tensor bytes as `synth --type f32`
 *    followed by `quantize ... q8_0`.
 *  - Scale like a trained model: matrices are ~normal(0, 0.5/sqrt(fan_in))
 *    (0.02 at SmolLM2's width), the separate output matrix a bit larger so
 *    logits have a spread of a couple of units and greedy decoding is not a
 *    coin toss; norm weights are 1 +- 1/16.
 *  - Tokenizer: <unk>, <s>, </s>, 256 byte tokens, "▁", printable ASCII,
 *    frequent pairs, "▁word" pieces and then filler letter strings until the
 *    vocabulary is full. Every multi-character piece is added after all of
 *    its prefixes, so each one is reachable by SentencePiece's pairwise
 *    merges (prefix + last character); scores fall with the index, so
 *    earlier (shorter, more common) pieces merge first.
 *  - Memory: the writer needs tensor data until it writes, so every tensor
 *    is kept, already in its final type (a 135M model is ~540 MB in f32,
 *    ~145 MB in q8_0). */
#include "gt/synth.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gt/gguf.h"

static const gt_synth_shape PRESETS[] = {
    /* name, n_embd, n_layer, n_head, n_head_kv, n_ff, n_vocab, n_ctx, rope base, eps,
     * tied, arch (NULL: llama), head_dim (0: n_embd / n_head) */
    {"tiny", 64, 2, 4, 2, 160, 512, 256, 10000.0f, 1e-5f, false, NULL, 0, 0, 0, 0, 0},
    /* SmolLM2-135M's shape; its real context is 8192, 2048 keeps the KV
     * cache of a default session small. */
    {"smollm2-135m", 576, 30, 9, 3, 1536, 49152, 2048, 100000.0f, 1e-5f, true, NULL, 0, 0, 0, 0, 0},
    /* stories260K's shape (ff 172 is not a multiple of the 32-wide quant
     * blocks, as in the real one): the tests' stand-in when ../shared is
     * absent. */
    {"stories260k", 64, 5, 8, 4, 172, 512, 2048, 10000.0f, 1e-5f, false, NULL, 0, 0, 0, 0, 0},
    /* Qwen: rope base 1e6, eps 1e-6, tied output, as the published small
     * models. The tiny ones are for tests (qwen3-tiny's head_dim 32 is not
     * n_embd / n_head, as in Qwen3); the real-shaped ones have the published
     * head counts, head size, ff and vocabulary, with 2 layers. */
    {"qwen2-tiny", 64, 2, 4, 2, 160, 512, 256, 1e6f, 1e-6f, true, "qwen2", 0, 0, 0, 0, 0},
    {"qwen3-tiny", 64, 2, 4, 2, 160, 512, 256, 1e6f, 1e-6f, true, "qwen3", 32, 0, 0, 0, 0},
    {"qwen2.5-0.5b", 896, 2, 14, 2, 4864, 151936, 32768, 1e6f, 1e-6f, true, "qwen2", 0, 0, 0, 0, 0},
    {"qwen3-0.6b", 1024, 2, 16, 8, 3072, 151936, 40960, 1e6f, 1e-6f, true, "qwen3", 128, 0, 0, 0, 0},
    /* qwen3moe (a mixture of experts): heads wider than n_embd / n_head as in
     * Qwen3, 8 experts of which 2 run per token; fast on the reference. */
    {"qwen3moe-tiny", 64, 2, 4, 2, 64, 512, 256, 1000000.0f, 1e-6f, false, .arch = "qwen3moe",
     .head_dim = 32, .n_expert = 8, .n_expert_used = 2, .n_ff_exp = 32},
    /* Qwen3-30B-A3B's shape with 2 of its 48 layers: ~1.9 G parameters
     * (7.5 GB in f32, 2 GB in q8_0), so for the nightly matrix, not CI. Its
     * real context is 40960. */
    {"qwen3moe-a3b", 2048, 2, 32, 4, 6144, 151936, 4096, 1000000.0f, 1e-6f, false,
     .arch = "qwen3moe", .head_dim = 128, .n_expert = 128, .n_expert_used = 8, .n_ff_exp = 768},
    /* Llama 3 with rope_freqs: the rule at a tiny original context (64), so
     * the factors (1 .. 32) change a short prompt's logits. */
    {"llama3-tiny", 128, 2, 8, 2, 320, 512, 256, 500000.0f, 1e-5f, false, .arch = "llama",
     .rope_orig_ctx = 64},
    /* Llama 3.2 1B's shape (2 of its 16 layers; its context is 131072). */
    {"llama3.2-1b", 2048, 2, 32, 8, 8192, 128256, 2048, 500000.0f, 1e-5f, true, .arch = "llama",
     .rope_orig_ctx = 8192},
    /* Phi-3 with long/short factors (original context 64: llama.cpp, which
     * rounds a context up to 256, always picks the long ones). */
    {"phi3-tiny", 128, 2, 4, 2, 256, 512, 256, 10000.0f, 1e-5f, false, .arch = "phi3",
     .rope_orig_ctx = 64},
    /* Phi-3-mini-128k's shape (2 of its 32 layers; context 131072, original 4096). */
    {"phi3-mini", 3072, 2, 32, 32, 8192, 32064, 131072, 10000.0f, 1e-5f, false, .arch = "phi3",
     .rope_orig_ctx = 4096},
};
#define N_PRESETS (int)(sizeof PRESETS / sizeof PRESETS[0])

const gt_synth_shape *gt_synth_preset(const char *name)
{
    for (int i = 0; name && i < N_PRESETS; i++)
        if (strcmp(PRESETS[i].name, name) == 0)
            return &PRESETS[i];
    return NULL;
}

const gt_synth_shape *gt_synth_preset_at(int i)
{
    return i >= 0 && i < N_PRESETS ? &PRESETS[i] : NULL;
}

const char *gt_synth_arch(const gt_synth_shape *p)
{
    return p->arch ? p->arch : "llama";
}

static int head_dim_of(const gt_synth_shape *m)
{
    return m->head_dim ? m->head_dim : m->n_embd / m->n_head;
}

/* ---- random numbers ----------------------------------------------------- */

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

/* Centered Irwin-Hall(4) over 22-bit uniforms, times 2: an even integer in
 * (-2^24, 2^24), exact as a float, with standard deviation 2^23/sqrt(3). */
static float centered_sum(uint64_t *s)
{
    int64_t acc = 0;
    for (int k = 0; k < 4; k++)
        acc += (int64_t)(splitmix64(s) >> 42);
    return (float)(2 * acc - 4 * ((INT64_C(1) << 22) - 1));
}

/* The float that turns centered_sum() into standard deviation std. */
static float normal_scale(double std)
{
    return (float)(std * sqrt(3.0) / 8388608.0);
}

/* ---- tokenizer ---------------------------------------------------------- */

#define PIECE_CAP 24 /* longest piece: "▁" (3 bytes) + a 12-letter word + NUL */

enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_BYTE = 6 };

typedef struct vocab {
    int n, cap;
    char (*piece)[PIECE_CAP];
    float *score;
    int32_t *type;
    const char **ptr;   /* into piece[], for the string-array writer */
    uint32_t *slot;     /* open-addressing set of ids + 1, for distinctness */
    uint32_t slot_mask;
    int first_normal;
} vocab;

static void vocab_free(vocab *v)
{
    free(v->piece);
    free(v->score);
    free(v->type);
    free(v->ptr);
    free(v->slot);
}

static int vocab_init(vocab *v, int cap)
{
    memset(v, 0, sizeof *v);
    uint32_t slots = 1;
    while (slots < 2u * (uint32_t)cap)
        slots <<= 1;
    v->cap = cap;
    v->slot_mask = slots - 1;
    v->piece = calloc((size_t)cap, sizeof *v->piece);
    v->score = calloc((size_t)cap, sizeof *v->score);
    v->type = calloc((size_t)cap, sizeof *v->type);
    v->ptr = calloc((size_t)cap, sizeof *v->ptr);
    v->slot = calloc(slots, sizeof *v->slot);
    if (!v->piece || !v->score || !v->type || !v->ptr || !v->slot) {
        vocab_free(v);
        return -1;
    }
    return 0;
}

static uint32_t *vocab_find(vocab *v, const char *p)
{
    for (uint32_t h = (uint32_t)fnv1a(p) & v->slot_mask;; h = (h + 1) & v->slot_mask) {
        uint32_t id = v->slot[h];
        if (id == 0 || strcmp(v->piece[id - 1], p) == 0)
            return &v->slot[h];
    }
}

/* Adds p unless present or the vocabulary is full. */
static void vocab_add(vocab *v, const char *p, int type)
{
    size_t len = strlen(p);
    if (v->n >= v->cap || len == 0 || len >= PIECE_CAP)
        return;
    uint32_t *slot = vocab_find(v, p);
    if (*slot)
        return;
    int id = v->n++;
    memcpy(v->piece[id], p, len + 1);
    v->ptr[id] = v->piece[id];
    v->type[id] = type;
    /* Specials and bytes score 0, as in SentencePiece exports; normal pieces
     * count down so that earlier ones win merges. */
    v->score[id] = type == TT_NORMAL ? -(float)(id - v->first_normal) : 0.0f;
    *slot = (uint32_t)id + 1;
}

/* Adds every prefix of p that ends on a UTF-8 character boundary, then p. */
static void vocab_add_closed(vocab *v, const char *p)
{
    char buf[PIECE_CAP];
    size_t len = strlen(p);
    if (len >= PIECE_CAP)
        return;
    for (size_t k = 1; k <= len; k++) {
        if (k < len && ((uint8_t)p[k] & 0xc0) == 0x80)
            continue; /* inside a multi-byte character */
        memcpy(buf, p, k);
        buf[k] = '\0';
        vocab_add(v, buf, TT_NORMAL);
    }
}

#define SPACE "\xe2\x96\x81" /* U+2581, SentencePiece's visible space */

static const char *const PAIRS[] = {
    "th", "he", "in", "er", "an", "re", "on", "at", "en", "nd", "ti", "es", "or", "te",
    "of", "ed", "is", "it", "al", "ar", "st", "to", "nt", "ng", "se", "ha", "as", "ou",
    "io", "le", "ve", "co", "me", "de", "hi", "ri", "ro", "ic", "ne", "ea", "ra", "ce",
    "li", "ch", "ll", "be", "ma", "si", "om", "ur", "ing", "ion", "ent", "ly", "ed"};

static const char *const WORDS[] = {
    "the", "of", "and", "to", "in", "is", "you", "that", "it", "he", "was", "for", "on",
    "are", "as", "with", "his", "they", "I", "at", "be", "this", "have", "from", "or",
    "one", "had", "by", "but", "not", "what", "all", "were", "we", "when", "your", "can",
    "said", "there", "an", "each", "which", "she", "do", "how", "their", "if", "will",
    "up", "other", "about", "out", "many", "then", "them", "so", "some", "her", "would",
    "make", "like", "him", "into", "time", "has", "look", "two", "more", "go", "see",
    "no", "way", "could", "people", "my", "than", "first", "water", "been", "who", "now",
    "find", "long", "down", "day", "did", "get", "come", "made", "may", "part", "The",
    "Once", "upon", "a", "There", "She", "He", "It", "They", "One", "little", "girl",
    "boy", "named", "Lily", "Tom", "happy", "play", "loved", "friend", "big", "very",
    "saw", "went", "tree", "sun", "dog", "cat", "mom", "ball", "fun", "together",
    "world", "hello", "Hello", "quick", "brown", "fox", "jumps", "over", "lazy",
    "model", "test", "data", "number", "between", "because", "where", "good", "new",
    "just", "know", "take", "year", "only", "back", "after", "work", "over", "think"};

/* phi3: Phi-3's <|endoftext|> too (llama.cpp looks it up by name in a model
 * named phi3 and fails to load one without it). */
static int build_vocab(vocab *v, int n_vocab, bool phi3)
{
    if (vocab_init(v, n_vocab) != 0)
        return -1;
    vocab_add(v, "<unk>", TT_UNKNOWN);
    vocab_add(v, "<s>", TT_CONTROL);
    vocab_add(v, "</s>", TT_CONTROL);
    if (phi3)
        vocab_add(v, "<|endoftext|>", TT_CONTROL);
    for (int b = 0; b < 256; b++) {
        char p[8];
        snprintf(p, sizeof p, "<0x%02X>", b);
        vocab_add(v, p, TT_BYTE);
    }
    v->first_normal = v->n;
    vocab_add(v, SPACE, TT_NORMAL);
    for (int c = 33; c < 127; c++) {
        char p[2] = {(char)c, 0};
        vocab_add(v, p, TT_NORMAL);
    }
    for (size_t i = 0; i < sizeof PAIRS / sizeof PAIRS[0]; i++)
        vocab_add_closed(v, PAIRS[i]);
    for (size_t i = 0; i < sizeof WORDS / sizeof WORDS[0]; i++) {
        char p[PIECE_CAP];
        snprintf(p, sizeof p, SPACE "%s", WORDS[i]);
        vocab_add_closed(v, p);
    }
    /* Filler: all lowercase strings of length 1, 2, 3, ... with and without
     * the space marker, in lexical order, until full. */
    for (int len = 1; v->n < v->cap && len <= 12; len++) {
        int idx[12] = {0};
        for (;;) {
            char p[PIECE_CAP];
            memcpy(p, SPACE, 3);
            for (int k = 0; k < len; k++)
                p[3 + k] = (char)('a' + idx[k]);
            p[3 + len] = '\0';
            vocab_add_closed(v, p + 3);
            vocab_add_closed(v, p);
            if (v->n >= v->cap)
                break;
            int k = len - 1;
            while (k >= 0 && ++idx[k] == 26)
                idx[k--] = 0;
            if (k < 0)
                break;
        }
    }
    if (v->n != n_vocab) {
        vocab_free(v);
        return -1;
    }
    return 0;
}

/* ---- weights ------------------------------------------------------------ */

typedef struct synth {
    gt_gguf_writer *w;
    uint64_t seed;
    gt_type type;
    void **bufs; /* tensor data, kept until the writer has written */
    int n_bufs, cap_bufs;
    float *row;  /* one f32 row, for quantized matrices */
    gt_err *err;
} synth;

static int keep(synth *s, void *p)
{
    if (s->n_bufs == s->cap_bufs) {
        int cap = s->cap_bufs ? 2 * s->cap_bufs : 64;
        void **nb = realloc(s->bufs, (size_t)cap * sizeof *nb);
        if (!nb) {
            free(p);
            return -1;
        }
        s->bufs = nb;
        s->cap_bufs = cap;
    }
    s->bufs[s->n_bufs++] = p;
    return 0;
}

static int add_norm(synth *s, const char *name, int64_t n)
{
    float *x = malloc((size_t)n * sizeof *x);
    if (!x || keep(s, x) != 0)
        return gt_err_set(s->err, "out of memory for tensor %s", name);
    uint64_t st = s->seed ^ fnv1a(name);
    for (int64_t i = 0; i < n; i++) /* 1 + k/1024, k in [-64, 63]: exact */
        x[i] = 1.0f + (float)((int)(splitmix64(&st) >> 57) - 64) * (1.0f / 1024.0f);
    gt_gguf_writer_add_tensor(s->w, name, GT_TYPE_F32, 1, &n, x, (size_t)n * sizeof *x);
    return 0;
}

/* A one-row f32 weight of normal(0, std) (a bias). */
static int add_bias(synth *s, const char *name, int64_t n, double std)
{
    float *x = malloc((size_t)n * sizeof *x);
    if (!x || keep(s, x) != 0)
        return gt_err_set(s->err, "out of memory for tensor %s", name);
    const float scale = normal_scale(std);
    uint64_t st = s->seed ^ fnv1a(name);
    for (int64_t i = 0; i < n; i++)
        x[i] = centered_sum(&st) * scale;
    gt_gguf_writer_add_tensor(s->w, name, GT_TYPE_F32, 1, &n, x, (size_t)n * sizeof *x);
    return 0;
}

/* planes of a [rows x cols] matrix (ne[0] = cols; planes 1: a 2-D matrix)
 * of normal(0, std) in the model's type. */
static int add_tensor(synth *s, const char *name, int64_t cols, int64_t rows, int64_t planes,
                      double std)
{
    size_t row_bytes = gt_row_size(s->type, cols);
    if (row_bytes == 0)
        return gt_err_set(s->err, "tensor %s: row length %lld is not a multiple of %s's block",
                          name, (long long)cols, gt_type_name(s->type));
    size_t nbytes = row_bytes * (size_t)rows * (size_t)planes;
    uint8_t *data = malloc(nbytes);
    if (!data || keep(s, data) != 0)
        return gt_err_set(s->err, "out of memory for tensor %s (%zu bytes)", name, nbytes);
    const float scale = normal_scale(std);
    uint64_t st = s->seed ^ fnv1a(name);
    for (int64_t r = 0; r < rows * planes; r++) {
        float *x = s->type == GT_TYPE_F32 ? (float *)(data + (size_t)r * row_bytes) : s->row;
        for (int64_t c = 0; c < cols; c++)
            x[c] = centered_sum(&st) * scale;
        if (s->type != GT_TYPE_F32)
            gt_quantize_row(s->type, x, data + (size_t)r * row_bytes, cols);
    }
    const int64_t ne[3] = {cols, rows, planes};
    gt_gguf_writer_add_tensor(s->w, name, s->type, planes > 1 ? 3 : 2, ne, data, nbytes);
    return 0;
}

static int add_matrix(synth *s, const char *name, int64_t cols, int64_t rows, double std)
{
    return add_tensor(s, name, cols, rows, 1, std);
}

/* qwen3moe's layer l: Qwen 3 attention (per-head q/k norms) and experts. */
static int add_moe_layer(synth *s, const gt_synth_shape *m, int l)
{
    const int64_t E = m->n_embd, HD = m->head_dim, QD = (int64_t)m->n_head * HD;
    const int64_t KV = (int64_t)m->n_head_kv * HD, X = m->n_expert, F = m->n_ff_exp;
    const double sE = 0.5 / sqrt((double)E), sQ = 0.5 / sqrt((double)QD),
                 sF = 0.5 / sqrt((double)F);
    char n[64];
#define NAME(suffix) (snprintf(n, sizeof n, "blk.%d.%s.weight", l, suffix), n)
    if (add_norm(s, NAME("attn_norm"), E) || add_matrix(s, NAME("attn_q"), E, QD, sE) ||
        add_matrix(s, NAME("attn_k"), E, KV, sE) || add_matrix(s, NAME("attn_v"), E, KV, sE) ||
        add_matrix(s, NAME("attn_output"), QD, E, sQ) || add_norm(s, NAME("attn_q_norm"), HD) ||
        add_norm(s, NAME("attn_k_norm"), HD) || add_norm(s, NAME("ffn_norm"), E))
        return -1;
    /* The router stays f32 in every type, as llama-quantize leaves it; its
     * logits get a spread of ~2 so that the top-k is rarely a near-tie. */
    const gt_type type = s->type;
    s->type = GT_TYPE_F32;
    int rc = add_matrix(s, NAME("ffn_gate_inp"), E, X, 2.0 / sqrt((double)E));
    s->type = type;
    if (rc || add_tensor(s, NAME("ffn_gate_exps"), E, F, X, sE) ||
        add_tensor(s, NAME("ffn_up_exps"), E, F, X, sE) ||
        add_tensor(s, NAME("ffn_down_exps"), F, E, X, sF))
        return -1;
#undef NAME
    return 0;
}

/* A 1-D f32 vector of given values (RoPE factors). */
static int add_vector(synth *s, const char *name, const float *v, int64_t n)
{
    float *x = malloc((size_t)n * sizeof *x);
    if (!x || keep(s, x) != 0)
        return gt_err_set(s->err, "out of memory for tensor %s", name);
    memcpy(x, v, (size_t)n * sizeof *x);
    gt_gguf_writer_add_tensor(s->w, name, GT_TYPE_F32, 1, &n, x, (size_t)n * sizeof *x);
    return 0;
}

static bool is_phi3(const gt_synth_shape *m) { return m->arch && strcmp(m->arch, "phi3") == 0; }

#define MAX_PAIRS 256

/* The RoPE factor tensors of presets with rope_orig_ctx (gt/synth.h).
 * Llama 3: llama.cpp's converter rule (wavelengths under orig/4 keep 1,
 * over orig get the factor 32, a smooth blend between). Phi-3: short
 * factors 1 .. 1.1 and long 1 .. 32, growing with the wavelength as the
 * published ones do. */
static int add_rope_factors(synth *s, const gt_synth_shape *m)
{
    const int half = m->n_embd / m->n_head / 2;
    float f[MAX_PAIRS], g[MAX_PAIRS];
    if (m->rope_orig_ctx <= 0)
        return 0;
    if (half > MAX_PAIRS)
        return gt_err_set(s->err, "rope dims %d exceed %d", 2 * half, 2 * MAX_PAIRS);
    for (int j = 0; j < half; j++) {
        const double t = half > 1 ? (double)j / (half - 1) : 0.0;
        const double wavelen = 2.0 * M_PI * pow(m->rope_base, 2.0 * j / (2.0 * half));
        const double factor = 32.0, low = 1.0, high = 4.0, orig = m->rope_orig_ctx;
        if (wavelen < orig / high)
            f[j] = 1.0f;
        else if (wavelen > orig / low)
            f[j] = (float)factor;
        else {
            const double smooth = (orig / wavelen - low) / (high - low);
            f[j] = (float)(1.0 / ((1.0 - smooth) / factor + smooth));
        }
        g[j] = (float)(1.0 + 0.1 * t); /* phi3 short */
        if (is_phi3(m))
            f[j] = (float)(1.0 + 31.0 * t * t); /* phi3 long */
    }
    if (!is_phi3(m))
        return add_vector(s, "rope_freqs.weight", f, half);
    return add_vector(s, "rope_factors_long.weight", f, half) ||
           add_vector(s, "rope_factors_short.weight", g, half);
}

static int add_weights(synth *s, const gt_synth_shape *m)
{
    const int64_t E = m->n_embd, F = m->n_ff, V = m->n_vocab, HD = head_dim_of(m);
    const int64_t KV = (int64_t)m->n_head_kv * HD, QD = (int64_t)m->n_head * HD;
    const double sE = 0.5 / sqrt((double)E), sF = 0.5 / sqrt((double)F);
    const char *arch = gt_synth_arch(m);
    const bool qwen2 = strcmp(arch, "qwen2") == 0, qwen3 = strcmp(arch, "qwen3") == 0;
    /* A tied embedding is also the output: the qwen presets give it the
     * output matrix's scale so that their logits are not flat (the llama
     * presets keep theirs, and their files' bytes). */
    const double sEmb = m->tied_output && (qwen2 || qwen3) ? 1.0 / sqrt((double)E) : sE;
    /* and a larger attention output, so that attention moves the logits */
    const double sO = qwen2 || qwen3 ? 1.0 / sqrt((double)QD) : sE;
    if (add_matrix(s, "token_embd.weight", E, V, sEmb) || add_rope_factors(s, m))
        return -1;
    for (int l = 0; l < m->n_layer; l++) {
        if (m->n_expert > 0) {
            if (add_moe_layer(s, m, l))
                return -1;
            continue;
        }
        char n[64];
#define NAME(suffix) (snprintf(n, sizeof n, "blk.%d.%s.weight", l, suffix), n)
        if (is_phi3(m)) { /* fused: Q, K, V rows stacked; gate rows then up rows */
            if (add_norm(s, NAME("attn_norm"), E) ||
                add_matrix(s, NAME("attn_qkv"), E, E + 2 * KV, sE) ||
                add_matrix(s, NAME("attn_output"), E, E, sE) || add_norm(s, NAME("ffn_norm"), E) ||
                add_matrix(s, NAME("ffn_up"), E, 2 * F, sE) ||
                add_matrix(s, NAME("ffn_down"), F, E, sF))
                return -1;
            continue;
        }
        if (add_norm(s, NAME("attn_norm"), E) || add_matrix(s, NAME("attn_q"), E, QD, sE) ||
            add_matrix(s, NAME("attn_k"), E, KV, sE) ||
            add_matrix(s, NAME("attn_v"), E, KV, sE) ||
            add_matrix(s, NAME("attn_output"), QD, E, sO) ||
            add_norm(s, NAME("ffn_norm"), E) ||
            add_matrix(s, NAME("ffn_gate"), E, F, sE) || add_matrix(s, NAME("ffn_up"), E, F, sE) ||
            add_matrix(s, NAME("ffn_down"), F, E, sF))
            return -1;
#undef NAME
#define NAME(suffix) (snprintf(n, sizeof n, "blk.%d.%s", l, suffix), n)
        if (qwen2 && (add_bias(s, NAME("attn_q.bias"), QD, 0.25) ||
                      add_bias(s, NAME("attn_k.bias"), KV, 0.25) ||
                      add_bias(s, NAME("attn_v.bias"), KV, 0.25)))
            return -1;
        if (qwen3 && (add_norm(s, NAME("attn_q_norm.weight"), HD) ||
                      add_norm(s, NAME("attn_k_norm.weight"), HD)))
            return -1;
#undef NAME
    }
    if (add_norm(s, "output_norm.weight", E))
        return -1;
    if (!m->tied_output && add_matrix(s, "output.weight", E, V, 1.5 / sqrt((double)E)))
        return -1;
    return 0;
}

/* ---- metadata ----------------------------------------------------------- */

static int file_type_of(gt_type t)
{
    switch (t) {
    case GT_TYPE_F32: return 0;
    case GT_TYPE_F16: return 1;
    case GT_TYPE_Q4_0: return 2;
    case GT_TYPE_Q4_1: return 3;
    case GT_TYPE_Q8_0: return 7;
    case GT_TYPE_BF16: return 32;
    default: return -1;
    }
}

/* Setter failures (out of memory) are not checked one by one: the writer
 * remembers the first and gt_gguf_writer_write reports it. */
static void add_metadata(gt_gguf_writer *w, const gt_synth_shape *m, uint64_t seed, gt_type type,
                         const vocab *v)
{
    char name[64], key[96];
    const char *arch = gt_synth_arch(m);
    snprintf(name, sizeof name, "synth-%s", m->name);
#define KEY(suffix) (snprintf(key, sizeof key, "%s.%s", arch, suffix), key)
    gt_gguf_writer_set_str(w, "general.architecture", arch);
    gt_gguf_writer_set_str(w, "general.name", name);
    gt_gguf_writer_set_u32(w, "general.file_type", (uint32_t)file_type_of(type));
    gt_gguf_writer_set_str(w, "gauntlet.synth.preset", m->name);
    gt_gguf_writer_set_scalar(w, "gauntlet.synth.seed", GT_GGUF_UINT64, &seed);
#define AK(suffix) (snprintf(key, sizeof key, "%s.%s", arch, suffix), key)
    gt_gguf_writer_set_u32(w, AK("vocab_size"), (uint32_t)m->n_vocab);
    gt_gguf_writer_set_u32(w, AK("context_length"), (uint32_t)m->n_ctx);
    gt_gguf_writer_set_u32(w, AK("embedding_length"), (uint32_t)m->n_embd);
    gt_gguf_writer_set_u32(w, AK("block_count"), (uint32_t)m->n_layer);
    gt_gguf_writer_set_u32(w, AK("feed_forward_length"), (uint32_t)m->n_ff);
    gt_gguf_writer_set_u32(w, AK("attention.head_count"), (uint32_t)m->n_head);
    gt_gguf_writer_set_u32(w, AK("attention.head_count_kv"), (uint32_t)m->n_head_kv);
    if (m->head_dim) {
        gt_gguf_writer_set_u32(w, AK("attention.key_length"), (uint32_t)m->head_dim);
        gt_gguf_writer_set_u32(w, AK("attention.value_length"), (uint32_t)m->head_dim);
    }
    gt_gguf_writer_set_u32(w, AK("rope.dimension_count"), (uint32_t)head_dim_of(m));
    gt_gguf_writer_set_f32(w, AK("rope.freq_base"), m->rope_base);
    gt_gguf_writer_set_f32(w, AK("attention.layer_norm_rms_epsilon"), m->rms_eps);
    if (m->n_expert > 0) {
        gt_gguf_writer_set_u32(w, AK("expert_count"), (uint32_t)m->n_expert);
        gt_gguf_writer_set_u32(w, AK("expert_used_count"), (uint32_t)m->n_expert_used);
        gt_gguf_writer_set_u32(w, AK("expert_feed_forward_length"), (uint32_t)m->n_ff_exp);
    }
#undef AK
    if (is_phi3(m) && m->rope_orig_ctx > 0) { /* as llama.cpp's converter writes LongRoPE */
        const double scale = (double)m->n_ctx / m->rope_orig_ctx;
        gt_gguf_writer_set_u32(w, KEY("rope.scaling.original_context_length"),
                               (uint32_t)m->rope_orig_ctx);
        gt_gguf_writer_set_f32(w, KEY("rope.scaling.attn_factor"),
                               (float)sqrt(1.0 + log(scale) / log((double)m->rope_orig_ctx)));
    }
#undef KEY
    gt_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
    gt_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", v->ptr, (uint64_t)v->n);
    gt_gguf_writer_set_arr(w, "tokenizer.ggml.scores", GT_GGUF_FLOAT32, v->score, (uint64_t)v->n);
    gt_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GT_GGUF_INT32, v->type, (uint64_t)v->n);
    gt_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
    gt_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2);
    gt_gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    gt_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", true);
    gt_gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", false);
    gt_gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", true);
    /* Last, where `gauntlet quantize` appends it to files that lack it, so
     * that synth --type T and synth + quantize T give identical files. */
    gt_gguf_writer_set_u32(w, "general.quantization_version", 2);
}

int gt_synth_write(const char *path, const char *preset, uint64_t seed, gt_type type,
                   gt_err *err)
{
    const gt_synth_shape *m = gt_synth_preset(preset);
    if (!m) {
        char list[256] = "";
        for (int i = 0; i < N_PRESETS; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                     PRESETS[i].name);
        return gt_err_set(err, "unknown synth preset '%s' (known: %s)", preset ? preset : "",
                          list);
    }
    if (file_type_of(type) < 0)
        return gt_err_set(err, "synth cannot write weights of type %s "
                               "(f32, f16, bf16, q8_0, q4_0, q4_1)", gt_type_name(type));

    vocab v;
    synth s = {.seed = seed, .type = type, .err = err};
    int rc = -1;
    if (build_vocab(&v, m->n_vocab, is_phi3(m)) != 0) {
        gt_err_set(err, "cannot build a %d-token vocabulary", m->n_vocab);
        return -1; /* build_vocab has freed v */
    }
    s.w = gt_gguf_writer_new();
    int row_max = m->n_ff > m->n_embd ? m->n_ff : m->n_embd;
    if (m->n_head * head_dim_of(m) > row_max)
        row_max = m->n_head * head_dim_of(m);
    s.row = malloc((size_t)row_max * sizeof *s.row);
    if (!s.w || !s.row) {
        gt_err_set(err, "out of memory");
        goto done;
    }
    add_metadata(s.w, m, seed, type, &v);
    if (add_weights(&s, m) != 0)
        goto done;
    rc = gt_gguf_writer_write(s.w, path, err);
done:
    if (rc != 0)
        gt_err_wrap(err, "synth %s", path);
    gt_gguf_writer_free(s.w);
    for (int i = 0; i < s.n_bufs; i++)
        free(s.bufs[i]);
    free(s.bufs);
    free(s.row);
    vocab_free(&v);
    return rc;
}
