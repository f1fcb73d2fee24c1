/* tokenizer_encode.c: text -> ids for both tokenizer models.
 *
 * Both are the same greedy loop over a linked list of symbols: every pair of
 * neighbours that may merge sits in a binary heap keyed by priority; the best
 * pair is popped, merged, and the new symbol's two pairs are pushed. Pairs
 * made stale by an earlier merge are recognised on pop (their combined length
 * no longer matches) and dropped. That is O(n log n) in the symbols of a
 * run, where the textbook "scan for the best pair, merge, rescan" is O(n^2)
 * and takes seconds on a long run of one repeated character.
 *
 *   llama (SentencePiece): symbols start as UTF-8 characters of the whole
 *     normalized text; a pair may merge when its concatenation is a piece,
 *     and the higher the piece's score the sooner. Ties go to the leftmost.
 *   gpt2 (byte-level BPE): symbols start as bytes of one pre-token; a pair
 *     may merge when tokenizer.ggml.merges has a rule for it, lower rank
 *     first (the rank is negated into the same "higher is better" score,
 *     exact in a float below 2^24). Ties go to the leftmost.
 *
 * A symbol left with no token falls back to one token per byte: <0xNN> (or
 * the one-byte piece, or the unknown token) for llama, the byte's mapped
 * character for gpt2; a byte with none of these is dropped. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_impl.h"
#include "unicode.h"

typedef struct tok_sym {
    int32_t prev, next; /* neighbours in the list; -1 at the ends */
    int32_t start, len; /* byte range in the text; len 0 once merged away */
    int32_t id;         /* token of this range, or -1 */
} tok_sym;

typedef struct tok_pair {
    float score;  /* higher merges first */
    int32_t left; /* symbol indices; right is left's next when still valid */
    int32_t right;
    int32_t len; /* combined length when pushed, to detect staleness */
    int32_t id;  /* token of the merged range */
} tok_pair;

typedef struct tok_work {
    const gt_tokenizer *t;
    const char *text;
    tok_sym *syms;
    size_t sym_cap;
    tok_pair *heap;
    size_t heap_n, heap_cap;
    gt_tok_out *out;
    gt_err *err;
} tok_work;

static bool better(const tok_pair *a, const tok_pair *b)
{
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static int heap_push(tok_work *w, tok_pair p)
{
    if (w->heap_n == w->heap_cap) {
        size_t cap = w->heap_cap ? 2 * w->heap_cap : 256;
        tok_pair *h = realloc(w->heap, cap * sizeof *h);
        if (!h)
            return gt_err_set(w->err, "out of memory for %zu merge candidates", cap);
        w->heap = h;
        w->heap_cap = cap;
    }
    size_t i = w->heap_n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!better(&p, &w->heap[parent]))
            break;
        w->heap[i] = w->heap[parent];
        i = parent;
    }
    w->heap[i] = p;
    return 0;
}

static tok_pair heap_pop(tok_work *w)
{
    tok_pair top = w->heap[0];
    tok_pair last = w->heap[--w->heap_n];
    size_t n = w->heap_n, i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && better(&w->heap[c + 1], &w->heap[c]))
            c++;
        if (!better(&w->heap[c], &last))
            break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (n > 0)
        w->heap[i] = last;
    return top;
}

/* Pushes the pair (l, r) when the two symbols may merge. */
static int try_pair(tok_work *w, int32_t l, int32_t r)
{
    if (l < 0 || r < 0)
        return 0;
    const gt_tokenizer *t = w->t;
    const tok_sym *a = &w->syms[l], *b = &w->syms[r];
    float score;
    int32_t id;
    if (t->kind == GT_TOK_LLAMA) {
        id = gt_tok_find(t, w->text + a->start, (size_t)a->len + (size_t)b->len);
        if (id < 0)
            return 0;
        score = t->scores[id];
    } else {
        int32_t rank;
        if (a->id < 0 || b->id < 0 || !gt_tok_merge_find(t, a->id, b->id, &rank, &id))
            return 0;
        score = -(float)rank;
    }
    return heap_push(w, (tok_pair){score, l, r, a->len + b->len, id});
}

/* A symbol with no token becomes one token per byte; a byte with no token
 * at all is dropped (llama.cpp does the same for BPE; see build_byte_tables
 * for why the unknown token is not always a substitute). */
static void emit_symbol(tok_work *w, const tok_sym *s)
{
    if (s->id >= 0) {
        gt_tok_emit(w->out, s->id);
        return;
    }
    for (int32_t i = 0; i < s->len; i++) {
        int32_t id = w->t->byte_fallback[(unsigned char)w->text[s->start + i]];
        if (id >= 0)
            gt_tok_emit(w->out, id);
    }
}

/* Encodes text[begin, end): symbols start as bytes (gpt2) or UTF-8
 * characters (llama), merge as far as they can, and are emitted in order. */
static int merge_run(tok_work *w, size_t begin, size_t end)
{
    const gt_tokenizer *t = w->t;
    bool by_byte = t->kind == GT_TOK_GPT2;
    size_t need = end - begin;
    if (need > w->sym_cap) {
        tok_sym *s = realloc(w->syms, need * sizeof *s);
        if (!s)
            return gt_err_set(w->err, "out of memory for %zu symbols", need);
        w->syms = s;
        w->sym_cap = need;
    }
    const unsigned char *u = (const unsigned char *)w->text;
    int32_t n = 0;
    for (size_t i = begin; i < end;) {
        uint32_t cp;
        size_t cl = by_byte ? 1 : gt_utf8_decode(u + i, end - i, &cp);
        tok_sym *s = &w->syms[n];
        s->prev = n - 1;
        s->next = i + cl < end ? n + 1 : -1;
        s->start = (int32_t)i;
        s->len = (int32_t)cl;
        s->id = by_byte ? t->byte_sym[u[i]] : gt_tok_find(t, w->text + i, cl);
        n++;
        i += cl;
    }
    w->heap_n = 0;
    for (int32_t i = 0; i + 1 < n; i++) {
        if (try_pair(w, i, i + 1))
            return -1;
    }
    while (w->heap_n > 0) {
        tok_pair p = heap_pop(w);
        tok_sym *l = &w->syms[p.left], *r = &w->syms[p.right];
        if (l->len == 0 || r->len == 0 || l->next != p.right || l->len + r->len != p.len)
            continue; /* stale: one side has merged since */
        l->len += r->len;
        l->id = p.id;
        l->next = r->next;
        if (r->next >= 0)
            w->syms[r->next].prev = p.left;
        r->len = 0;
        if (try_pair(w, l->prev, p.left) || try_pair(w, p.left, l->next))
            return -1;
    }
    for (int32_t i = n > 0 ? 0 : -1; i >= 0; i = w->syms[i].next)
        emit_symbol(w, &w->syms[i]);
    return 0;
}

static void work_free(tok_work *w)
{
    free(w->syms);
    free(w->heap);
}

int gt_tok_encode_spm(const gt_tokenizer *t, const char *text, size_t len, bool space_prefix,
                      gt_tok_out *o, gt_err *err)
{
    /* Normalization: a space is U+2581 (3 bytes), plus one as prefix. */
    char *norm = malloc(3 * len + 3);
    if (!norm)
        return gt_err_set(err, "out of memory normalizing %zu bytes of text", len);
    size_t k = 0;
    if (space_prefix) {
        memcpy(norm, "\xe2\x96\x81", 3);
        k = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(norm + k, "\xe2\x96\x81", 3);
            k += 3;
        } else {
            norm[k++] = text[i];
        }
    }
    /* Cut where no piece spans the two neighbouring characters: the two
     * sides cannot interact, and short runs keep the heap small. */
    tok_work w = {.t = t, .text = norm, .out = o, .err = err};
    int rc = 0;
    size_t run = 0, cl;
    uint32_t prev = 0;
    for (size_t i = 0; i < k && rc == 0; i += cl) {
        uint32_t cur = gt_tok_char_key(norm + i, k - i, &cl);
        if (i > run && !gt_tok_pair_joinable(t, prev, cur)) {
            rc = merge_run(&w, run, i);
            run = i;
        }
        prev = cur;
    }
    if (rc == 0)
        rc = merge_run(&w, run, k);
    work_free(&w);
    free(norm);
    return rc;
}

/* ignore_merges: the id of the pre-token as one whole token, or -1. Its
 * bytes are written as the vocabulary writes them (GPT-2's mapping, at most
 * 2 UTF-8 bytes each) and looked up. */
static int32_t whole_word(const tok_work *w, size_t begin, size_t end)
{
    char buf[512];
    size_t k = 0;
    for (size_t i = begin; i < end; i++) {
        if (k + 4 > sizeof buf || k > w->t->max_piece_len)
            return -1;
        k += gt_utf8_encode(gt_tok_byte_to_cp((unsigned char)w->text[i]), buf + k);
    }
    return gt_tok_find(w->t, buf, k);
}

static int bpe_word(void *ctx, size_t begin, size_t end)
{
    tok_work *w = ctx;
    if (w->t->ignore_merges) {
        int32_t id = whole_word(w, begin, end);
        if (id >= 0) {
            gt_tok_emit(w->out, id);
            return 0;
        }
    }
    return merge_run(w, begin, end);
}

int gt_tok_encode_bpe(const gt_tokenizer *t, const char *text, size_t len, gt_tok_out *o,
                      gt_err *err)
{
    tok_work w = {.t = t, .text = text, .out = o, .err = err};
    int rc = gt_tok_pretokenize(t->pre, text, len, bpe_word, &w, err);
    work_free(&w);
    return rc ? -1 : 0;
}
