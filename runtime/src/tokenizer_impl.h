/* tokenizer_impl.h: what tokenizer.c (loading, lookups, decoding) and
 * tokenizer_encode.c / tokenizer_pretok.c (encoding) share. Private to
 * libgtrt. */
#ifndef GT_TOKENIZER_IMPL_H
#define GT_TOKENIZER_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gt/error.h"
#include "gt/tokenizer.h"
#include "unicode.h"

/* tokenizer.ggml.token_type values (llama.cpp's llama_token_type). */
enum {
    GT_TT_UNDEFINED = 0, /* treated as NORMAL */
    GT_TT_NORMAL = 1,
    GT_TT_UNKNOWN = 2,
    GT_TT_CONTROL = 3,
    GT_TT_USER_DEFINED = 4,
    GT_TT_UNUSED = 5,
    GT_TT_BYTE = 6,
};

/* tokenizer.ggml.pre variants we implement; anything else is refused at
 * load, because a wrong pre-tokenizer silently gives wrong ids. */
typedef enum gt_tok_pre {
    GT_PRE_GPT2,   /* the GPT-2 regex alone */
    GT_PRE_SMOLLM, /* \p{N} split off one by one first, then the GPT-2 regex */
    GT_PRE_LLAMA3, /* Llama 3's regex: digits in runs of up to three */
    GT_PRE_QWEN2,  /* Llama 3's regex with digits one by one */
} gt_tok_pre;

/* How a token takes part in the split of raw text by special tokens
 * (bits of gt_tokenizer.sattr). */
enum {
    GT_SA_SPECIAL = 1, /* cut out of raw text before encoding */
    GT_SA_PARSE = 2,   /* ... only when the caller asks (parse_special) */
    GT_SA_LSTRIP = 4,  /* whitespace before it is dropped */
    GT_SA_RSTRIP = 8,  /* whitespace after it is dropped */
};

/* One merge rule, keyed by the ids of its two halves. */
typedef struct gt_tok_merge {
    uint64_t key; /* left id << 32 | right id; UINT64_MAX marks an empty slot */
    int32_t rank; /* index in tokenizer.ggml.merges: lower merges first */
    int32_t id;   /* token of the concatenation */
} gt_tok_merge;

struct gt_tokenizer {
    gt_tokenizer_kind kind;
    gt_tok_pre pre;
    int32_t n_vocab;
    int32_t bos, eos, unk; /* -1 when none */
    bool add_bos;
    bool add_space_prefix; /* llama only */
    bool ignore_merges;    /* gpt2: a pre-token that is a whole token is emitted as is */

    /* Pieces as stored, NUL-terminated, in one arena (the GGUF may be
     * closed once the tokenizer is built). */
    char *pieces;
    uint32_t *piece_off, *piece_len; /* (n_vocab) */
    uint32_t max_piece_len;
    float *scores;  /* (n_vocab), llama only */
    uint8_t *types; /* (n_vocab), GT_TT_* */

    /* What each token decodes to (spaces restored, bytes mapped back). */
    char *decoded;
    uint32_t *dec_off, *dec_len; /* (n_vocab) */

    /* Piece text -> id over the tokens plain text may produce (not CONTROL,
     * and for llama not BYTE or UNKNOWN either). Open addressing. */
    int32_t *map; /* (map_mask + 1), -1 empty */
    uint32_t map_mask;

    /* gpt2: merges by (left id, right id). Open addressing. */
    gt_tok_merge *merges; /* (merge_mask + 1) */
    uint32_t merge_mask;

    /* llama: every pair of adjacent characters that occurs inside some
     * producible piece (keys from gt_tok_char_key, a << 32 | b). Where the
     * text has a pair not in this set no merge can ever cross, so the
     * encoder handles the two sides separately. UINT64_MAX marks empty. */
    uint64_t *pairs;
    uint32_t pair_mask, n_pairs;

    /* The initial symbol id of each byte (gpt2: its mapped character; -1
     * when absent), and the id a byte falls back to when a symbol has no
     * token (llama: <0xNN>, else the one-byte piece, else unk; -1 when none). */
    int32_t byte_sym[256];
    int32_t byte_fallback[256];

    /* Special tokens (tokenizer_special.c), longest piece first: as
     * llama.cpp does, the raw text is cut at their occurrences before any
     * encoder runs, and each becomes its own token. USER_DEFINED ones
     * ("\n", "  ", "<s>" in Gemma's vocabulary) always are; CONTROL and
     * UNKNOWN ones only with parse_special. */
    int32_t *special_ids;
    int32_t n_special;
    uint8_t *sattr; /* (n_vocab) GT_SA_* bits */
};

/* Builds special_ids and sattr from the token types, llama.cpp's overrides
 * by piece text and its per-model strip flags (tokenizer_special.c). */
int gt_tok_special_init(gt_tokenizer *t, const gt_gguf *g, gt_err *err);

/* Where encoded ids go: at most max are stored, n counts them all. */
typedef struct gt_tok_out {
    int32_t *ids;
    int max;
    int n;
} gt_tok_out;

static inline void gt_tok_emit(gt_tok_out *o, int32_t id)
{
    if (o->n < o->max)
        o->ids[o->n] = id;
    o->n++;
}

/* Hashes for the lookup tables: FNV-1a for piece text, a 64-bit finalizer
 * (MurmurHash3's) for integer keys. */
static inline uint64_t gt_tok_hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return h;
}

static inline uint64_t gt_tok_hash_u64(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ull;
    return k ^ (k >> 33);
}

/* Two 32-bit values (ids, or character keys) as one table key. */
static inline uint64_t gt_tok_pair_key(uint32_t a, uint32_t b)
{
    return (uint64_t)a << 32 | b;
}

static inline const char *gt_tok_piece_at(const gt_tokenizer *t, int32_t id)
{
    return t->pieces + t->piece_off[id];
}

/* Id of a plain-text piece, or -1. */
int32_t gt_tok_find(const gt_tokenizer *t, const char *s, size_t n);

/* A character's identity for the pair set: its code point, or for a byte
 * that is not valid UTF-8, 0x110000 + the byte. */
static inline uint32_t gt_tok_char_key(const char *s, size_t n, size_t *len)
{
    uint32_t cp;
    *len = gt_utf8_decode((const unsigned char *)s, n, &cp);
    return cp == GT_UNI_INVALID ? GT_UNI_INVALID + (unsigned char)s[0] : cp;
}

/* Whether characters a and b (keys) occur next to each other in a piece. */
bool gt_tok_pair_joinable(const gt_tokenizer *t, uint32_t a, uint32_t b);

/* The merge of tokens l and r: true with its rank and result id. */
bool gt_tok_merge_find(const gt_tokenizer *t, int32_t l, int32_t r, int32_t *rank, int32_t *id);

/* Encoders (tokenizer_encode.c): append the ids of len bytes of text.
 * space_prefix: SPM adds its "\xe2\x96\x81" prefix (with add_space_prefix,
 * llama.cpp prefixes the text's first fragment and every fragment that
 * follows a user-defined token). */
int gt_tok_encode_spm(const gt_tokenizer *t, const char *text, size_t len, bool space_prefix,
                      gt_tok_out *o, gt_err *err);
int gt_tok_encode_bpe(const gt_tokenizer *t, const char *text, size_t len, gt_tok_out *o,
                      gt_err *err);

/* GPT-2 pre-tokenizer (tokenizer_pretok.c): calls word() with the byte range
 * of every pre-token of text, in order; the ranges tile the text. Stops at
 * and returns the first nonzero word() result, else 0; -1 on allocation
 * failure (with err). */
typedef int (*gt_tok_word_fn)(void *ctx, size_t begin, size_t end);
int gt_tok_pretokenize(gt_tok_pre pre, const char *text, size_t len, gt_tok_word_fn word,
                       void *ctx, gt_err *err);

/* GPT-2 bytes_to_unicode: the code point byte b is written as in pieces,
 * and the inverse (-1 for code points no byte maps to). */
uint32_t gt_tok_byte_to_cp(unsigned b);
int gt_tok_cp_to_byte(uint32_t cp);

#endif
