/* tokenizer_pretok.c: the GPT-2-style pre-tokenizers, written out by hand.
 *
 * The pattern is
 *     's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * and a regex library with \p{} classes is more dependency than this needs:
 * the alternatives are tried in order at each position, which a few lines
 * per alternative express exactly. The "(?!\S)" lookahead means: a run of
 * whitespace followed by something else gives up its last character, so
 * that " word" keeps its space.
 *
 * SmolLM2 (tokenizer.ggml.pre = "smollm", and the pre-tokenizers llama.cpp
 * treats the same) first cuts out every \p{N} code point as a piece of its
 * own, then runs the pattern inside each piece separately: lookaheads do not
 * see across the cuts, so "a 1" gives "a", " ", "1", and "12" gives "1", "2".
 *
 * Llama 3 (tokenizer.ggml.pre = "llama-bpe") and Qwen2 ("qwen2") use a
 * later pattern of the same kind (llama3_match): contractions in either
 * case, letters with one leading non-letter, digits in runs of at most 3
 * (Qwen2: 1), punctuation taking trailing newlines, and whitespace runs
 * that end at their last newline.
 *
 * Text is decoded once into per-code-point class and ASCII arrays. Bytes
 * that are not valid UTF-8 count as one "other" code point each (llama.cpp
 * turns them into U+FFFD, which is "other" too, but loses the bytes; keeping
 * them lets byte-level BPE round-trip any input). */
#include <stdlib.h>

#include "tokenizer_impl.h"
#include "unicode.h"

#define CLS_OUT 0xFF /* past the end of the piece being split */

typedef struct pretok {
    uint8_t *cls;  /* (n) GT_UNI_* of each code point */
    uint8_t *asc;  /* (n) the code point when ASCII, else 0 */
    uint32_t *off; /* (n + 1) byte offset of each code point */
    size_t n;
} pretok;

static int cls_at(const pretok *p, size_t pos, size_t end)
{
    return pos < end ? p->cls[pos] : CLS_OUT;
}

/* End of the pattern's match at pos, within the piece [.., end). */
static size_t gpt2_match(const pretok *p, size_t pos, size_t end)
{
    unsigned c = p->asc[pos];
    if (c == '\'' && pos + 1 < end) {
        unsigned n1 = p->asc[pos + 1];
        if (n1 == 's' || n1 == 't' || n1 == 'm' || n1 == 'd')
            return pos + 2;
        if (pos + 2 < end) {
            unsigned n2 = p->asc[pos + 2];
            if ((n1 == 'r' && n2 == 'e') || (n1 == 'v' && n2 == 'e') || (n1 == 'l' && n2 == 'l'))
                return pos + 3;
        }
    }
    /* " ?X+" for the three classes X: letters, numbers, and the rest. */
    int run = c == ' ' ? cls_at(p, pos + 1, end) : p->cls[pos];
    if (run == GT_UNI_LETTER || run == GT_UNI_NUMBER || run == GT_UNI_OTHER) {
        pos += c == ' ';
        while (cls_at(p, pos, end) == run)
            pos++;
        return pos;
    }
    size_t n = 0;
    while (cls_at(p, pos + n, end) == GT_UNI_SPACE)
        n++;
    if (n > 1 && pos + n < end)
        return pos + n - 1; /* \s+(?!\S) */
    return pos + (n > 0 ? n : 1); /* \s+; the last case cannot happen */
}

static bool is_crlf(unsigned c)
{
    return c == '\r' || c == '\n';
}

/* End of the Llama 3 / Qwen2 pattern's match at pos, within [.., end):
 *     (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,D}
 *     | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * with D = 3 for Llama 3 and 1 for Qwen2. */
static size_t llama3_match(const pretok *p, size_t pos, size_t end, size_t max_digits)
{
    unsigned c = p->asc[pos];
    if (c == '\'' && pos + 1 < end) {
        unsigned n1 = p->asc[pos + 1] | 0x20; /* ASCII lower case; 0 stays non-letter */
        if (n1 == 's' || n1 == 't' || n1 == 'm' || n1 == 'd')
            return pos + 2;
        if (pos + 2 < end) {
            unsigned n2 = p->asc[pos + 2] | 0x20;
            if ((n1 == 'r' && n2 == 'e') || (n1 == 'v' && n2 == 'e') || (n1 == 'l' && n2 == 'l'))
                return pos + 3;
        }
    }
    const int cls = p->cls[pos];
    /* [^\r\n\p{L}\p{N}]?\p{L}+ */
    if (!is_crlf(c) && cls != GT_UNI_NUMBER &&
        (cls == GT_UNI_LETTER || cls_at(p, pos + 1, end) == GT_UNI_LETTER)) {
        pos++;
        while (cls_at(p, pos, end) == GT_UNI_LETTER)
            pos++;
        return pos;
    }
    if (cls == GT_UNI_NUMBER) {
        size_t n = 1;
        while (n < max_digits && cls_at(p, pos + n, end) == GT_UNI_NUMBER)
            n++;
        return pos + n;
    }
    /* ' ?[^\s\p{L}\p{N}]+[\r\n]*' */
    if (cls_at(p, pos + (c == ' '), end) == GT_UNI_OTHER) {
        pos += c == ' ';
        while (cls_at(p, pos, end) == GT_UNI_OTHER)
            pos++;
        while (pos < end && is_crlf(p->asc[pos]))
            pos++;
        return pos;
    }
    size_t n = 0, last_crlf = 0;
    while (cls_at(p, pos + n, end) == GT_UNI_SPACE) {
        if (is_crlf(p->asc[pos + n]))
            last_crlf = pos + n + 1;
        n++;
    }
    if (last_crlf > 0)
        return last_crlf; /* \s*[\r\n]+ */
    if (n > 1 && pos + n < end)
        return pos + n - 1; /* \s+(?!\S) */
    return pos + (n > 0 ? n : 1); /* \s+; the last case cannot happen */
}

static int split_gpt2(const pretok *p, gt_tok_pre pre, size_t begin, size_t end,
                      gt_tok_word_fn word, void *ctx)
{
    for (size_t pos = begin; pos < end;) {
        size_t next = pre == GT_PRE_LLAMA3 ? llama3_match(p, pos, end, 3)
                    : pre == GT_PRE_QWEN2  ? llama3_match(p, pos, end, 1)
                                           : gpt2_match(p, pos, end);
        int rc = word(ctx, p->off[pos], p->off[next]);
        if (rc)
            return rc;
        pos = next;
    }
    return 0;
}

int gt_tok_pretokenize(gt_tok_pre pre, const char *text, size_t len, gt_tok_word_fn word,
                       void *ctx, gt_err *err)
{
    pretok p = {0};
    p.cls = malloc(len + 1);
    p.asc = malloc(len + 1);
    p.off = malloc((len + 1) * sizeof *p.off);
    int rc = 0;
    if (!p.cls || !p.asc || !p.off) {
        rc = gt_err_set(err, "out of memory pre-tokenizing %zu bytes", len);
        goto done;
    }
    const unsigned char *u = (const unsigned char *)text;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t cl = gt_utf8_decode(u + i, len - i, &cp);
        p.cls[p.n] = (uint8_t)gt_unicode_class(cp);
        p.asc[p.n] = cp < 128 ? (uint8_t)cp : 0;
        p.off[p.n] = (uint32_t)i;
        p.n++;
        i += cl;
    }
    p.off[p.n] = (uint32_t)len;

    if (pre == GT_PRE_SMOLLM) {
        for (size_t i = 0; i < p.n && rc == 0;) {
            size_t j = i + 1;
            if (p.cls[i] != GT_UNI_NUMBER) {
                while (j < p.n && p.cls[j] != GT_UNI_NUMBER)
                    j++;
            }
            rc = split_gpt2(&p, pre, i, j, word, ctx);
            i = j;
        }
    } else {
        rc = split_gpt2(&p, pre, 0, p.n, word, ctx);
    }
done:
    free(p.cls);
    free(p.asc);
    free(p.off);
    return rc;
}
