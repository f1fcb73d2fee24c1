/* tokenizer.c: the tokenizer's public face: encoding entry point (the split
 * of the text at special tokens, by parse mode), decoding. Building one from
 * GGUF metadata is tokenizer_load.c, which special tokens and when is
 * tokenizer_special.c; the merge loop is tokenizer_encode.c, the GPT-2-style
 * pre-tokenizers tokenizer_pretok.c and the hash lookups and byte mapping
 * that load and encode share tokenizer_vocab.c. Calls run one way: this
 * file -> load -> special; this file -> encode -> pretok; all -> vocab.
 *
 * What each token decodes to is precomputed at load, so streaming decode is
 * a memcpy. */
#include "gt/tokenizer.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_impl.h"

/* Keeps every count in an int: llama may emit three byte tokens per byte. */
#define MAX_TEXT ((size_t)1 << 28)

void gt_tokenizer_free(gt_tokenizer *t)
{
    if (!t)
        return;
    free(t->pieces);
    free(t->piece_off);
    free(t->piece_len);
    free(t->scores);
    free(t->types);
    free(t->decoded);
    free(t->dec_off);
    free(t->dec_len);
    free(t->map);
    free(t->merges);
    free(t->pairs);
    free(t->special_ids);
    free(t->sattr);
    free(t);
}

gt_tokenizer_kind gt_tokenizer_kind_of(const gt_tokenizer *t)
{
    return t->kind;
}

int32_t gt_tokenizer_n_vocab(const gt_tokenizer *t)
{
    return t->n_vocab;
}

int32_t gt_tokenizer_bos(const gt_tokenizer *t)
{
    return t->bos;
}

int32_t gt_tokenizer_eos(const gt_tokenizer *t)
{
    return t->eos;
}

bool gt_tokenizer_adds_bos(const gt_tokenizer *t)
{
    return t->add_bos;
}

/* A piece of the text: raw bytes for an encoder, or one user-defined token. */
typedef struct tok_frag {
    size_t off, len;
    int32_t id; /* -1: raw text */
} tok_frag;

static int frag_push(tok_frag **v, size_t *n, size_t *cap, tok_frag f)
{
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 16;
        tok_frag *g = realloc(*v, c * sizeof *g);
        if (!g)
            return -1;
        *v = g, *cap = c;
    }
    (*v)[(*n)++] = f;
    return 0;
}

/* Pushes the raw fragment [off, off + len) when it is not empty. */
static int push_raw(tok_frag **v, size_t *n, size_t *cap, size_t off, size_t len)
{
    return len > 0 ? frag_push(v, n, cap, (tok_frag){off, len, -1}) : 0;
}

/* llama.cpp's partition of the text by special tokens: for each token,
 * longest first, every raw fragment is cut at each of its occurrences (left
 * to right), whitespace beside it dropped where the token strips; then the
 * raw fragments are encoded in order. CONTROL and UNKNOWN tokens take part
 * only with parse_special. */
static int encode_partitioned(const gt_tokenizer *t, const char *text, size_t len,
                              bool parse_special, gt_tok_out *o, gt_err *err)
{
    tok_frag *v = NULL, *w = NULL;
    size_t n = 0, cap = 0, wn = 0, wcap = 0;
    int rc = -1;
    if (frag_push(&v, &n, &cap, (tok_frag){0, len, -1}) != 0)
        goto oom;
    for (int32_t u = 0; u < t->n_special; u++) {
        const int32_t id = t->special_ids[u];
        const uint8_t sa = t->sattr[id];
        if ((sa & GT_SA_PARSE) && !parse_special)
            continue;
        const char *piece = gt_tok_piece_at(t, id);
        const size_t pl = t->piece_len[id];
        wn = 0;
        for (size_t i = 0; i < n; i++) {
            tok_frag f = v[i];
            while (f.id < 0 && f.len >= pl) {
                const char *hit = memmem(text + f.off, f.len, piece, pl);
                if (!hit)
                    break;
                const size_t at = (size_t)(hit - text);
                size_t left = at - f.off;
                while ((sa & GT_SA_LSTRIP) && left > 0 &&
                       isspace((unsigned char)text[f.off + left - 1]))
                    left--;
                if (push_raw(&w, &wn, &wcap, f.off, left) ||
                    frag_push(&w, &wn, &wcap, (tok_frag){at, pl, id}))
                    goto oom;
                f.len -= at + pl - f.off;
                f.off = at + pl;
                while ((sa & GT_SA_RSTRIP) && f.len > 0 && isspace((unsigned char)text[f.off]))
                    f.off++, f.len--;
            }
            if ((f.id >= 0 || f.len > 0) && frag_push(&w, &wn, &wcap, f))
                goto oom;
        }
        tok_frag *tv = v;
        v = w, w = tv;
        size_t tc = cap;
        cap = wcap, wcap = tc;
        n = wn;
    }
    bool prev_token = true; /* the text's start counts as after a token */
    for (size_t i = 0; i < n; i++) {
        if (v[i].id >= 0) {
            gt_tok_emit(o, v[i].id);
            prev_token = true;
            continue;
        }
        const bool prefix = t->add_space_prefix && prev_token;
        if (t->kind == GT_TOK_LLAMA
                ? gt_tok_encode_spm(t, text + v[i].off, v[i].len, prefix, o, err)
                : gt_tok_encode_bpe(t, text + v[i].off, v[i].len, o, err))
            goto done;
        prev_token = false;
    }
    rc = 0;
    goto done;
oom:
    gt_err_set(err, "out of memory partitioning %zu bytes of text", len);
done:
    free(v);
    free(w);
    return rc;
}

int gt_tokenize_special(const gt_tokenizer *t, const char *text, size_t len, bool add_bos,
                        bool parse_special, int32_t *out, int max, gt_err *err)
{
    if (!t)
        return gt_err_set(err, "gt_tokenize: no tokenizer");
    if (!text && len > 0)
        return gt_err_set(err, "gt_tokenize: text is NULL");
    if (max < 0 || (max > 0 && !out))
        return gt_err_set(err, "gt_tokenize: invalid output buffer (max %d)", max);
    if (len > MAX_TEXT)
        return gt_err_set(err, "gt_tokenize: text of %zu bytes is over the %zu-byte limit", len,
                          MAX_TEXT);
    gt_tok_out o = {out, max, 0};
    if (add_bos && t->bos >= 0)
        gt_tok_emit(&o, t->bos);
    if (len > 0 && encode_partitioned(t, text, len, parse_special, &o, err) != 0)
        return -1;
    return o.n;
}

int gt_tokenize(const gt_tokenizer *t, const char *text, size_t len, bool add_bos,
                int32_t *out, int max, gt_err *err)
{
    return gt_tokenize_special(t, text, len, add_bos, false, out, max, err);
}

bool gt_token_is_special(const gt_tokenizer *t, int32_t id)
{
    return t && id >= 0 && id < t->n_vocab && (t->sattr[id] & GT_SA_PARSE);
}

bool gt_token_strips_right(const gt_tokenizer *t, int32_t id)
{
    return t && id >= 0 && id < t->n_vocab && (t->sattr[id] & GT_SA_RSTRIP);
}

const char *gt_token_piece(const gt_tokenizer *t, int32_t id)
{
    if (!t || id < 0 || id >= t->n_vocab)
        return NULL;
    return gt_tok_piece_at(t, id);
}

int gt_token_to_bytes(const gt_tokenizer *t, int32_t id, char *out, size_t cap)
{
    if (!t || id < 0 || id >= t->n_vocab)
        return -1;
    size_t n = t->dec_len[id];
    if (out)
        memcpy(out, t->decoded + t->dec_off[id], n < cap ? n : cap);
    return (int)n;
}

int gt_detokenize(const gt_tokenizer *t, const int32_t *ids, int n, char *out, size_t cap)
{
    if (!t || n < 0 || (n > 0 && !ids))
        return -1;
    /* Only the first token that yields text can carry the prefix space;
     * leading control tokens (BOS) yield none. */
    bool strip = t->add_space_prefix;
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->n_vocab)
            return -1;
        const char *s = t->decoded + t->dec_off[ids[i]];
        size_t len = t->dec_len[ids[i]];
        if (len == 0)
            continue;
        if (strip && s[0] == ' ' && t->types[ids[i]] != GT_TT_BYTE)
            s++, len--;
        strip = false;
        if (out && total < cap) {
            size_t room = cap - total;
            memcpy(out + total, s, len < room ? len : room);
        }
        total += len;
        if (total > INT32_MAX)
            return -1;
    }
    if (out && cap > 0)
        out[total < cap ? total : cap - 1] = '\0';
    return (int)total;
}
