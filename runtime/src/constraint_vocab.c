/* constraint_vocab.c: a model's vocabulary as constrained decoding sees it,
 * built once per model (on the first constraint) and freed with it.
 *
 * Each token's bytes (gt_token_to_bytes, what a caller prints) are taken
 * once, sorted, and laid out as a trie in preorder: node i holds one byte,
 * its depth, the index just past its subtree, and the tokens whose bytes
 * end there, so a mask (constraint.c) walks it once and skips a whole
 * subtree at the first impossible byte. Tokens never inside a document:
 * special ones (control, unknown, the names llama.cpp makes control),
 * unused ones and those that decode to no bytes. End tokens: the
 * vocabulary's EOS and, where special, the end-of-turn markers chat
 * templates end with.
 *
 * Inside a string, past any escape or partial character, a "plain" token
 * (one the string takes whole: no quote, backslash or control byte, whole
 * UTF-8 characters; decided by running the automaton itself) is allowed
 * exactly when its characters fit maxLength; plain holds those tokens by
 * character count, and the trie "other" the rest, so such a mask walks only
 * a small part of a large vocabulary. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "constraint_impl.h"
#include "model_internal.h"
#include "tokenizer_impl.h"

static const gt_cn_schema no_schema; /* a string frame consults no node */

/* Markers chat templates end a turn with; end generation when special. */
static const char *const END_NAMES[] = {"<end_of_turn>", "<|im_end|>", "<|eot_id|>", "<|end|>",
                                        "<|endoftext|>", NULL};

static int cmp_bytes(const void *pa, const void *pb, void *user)
{
    const gt_cn_vocab *c = user;
    const int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
    const uint32_t la = c->len[a], lb = c->len[b];
    int r = memcmp(c->bytes + c->off[a], c->bytes + c->off[b], la < lb ? la : lb);
    if (r)
        return r;
    if (la != lb)
        return la < lb ? -1 : 1;
    return (a > b) - (a < b);
}

static int build_tries(gt_cn_vocab *c, int32_t *ids, int32_t k, gt_err *err);

static int build_vocab(gt_cn_vocab *c, const gt_tokenizer *t, gt_err *err)
{
    const int32_t V = gt_tokenizer_n_vocab(t);
    c->n_vocab = V;
    c->off = calloc((size_t)V, sizeof *c->off);
    c->len = calloc((size_t)V, sizeof *c->len);
    c->is_end = calloc((size_t)V, 1);
    if (!c->off || !c->len || !c->is_end)
        return gt_err_set(err, "out of memory for the vocabulary's bytes");
    size_t total = 0;
    int32_t n_in = 0;
    for (int32_t id = 0; id < V; id++) {
        const int ty = t->types[id];
        if (gt_token_is_special(t, id)) {
            for (int k = 0; END_NAMES[k]; k++)
                if (strcmp(gt_token_piece(t, id), END_NAMES[k]) == 0)
                    c->is_end[id] = 1;
            continue;
        }
        if (ty == GT_TT_CONTROL || ty == GT_TT_UNKNOWN || ty == GT_TT_UNUSED)
            continue;
        int n = gt_token_to_bytes(t, id, NULL, 0);
        if (n <= 0)
            continue;
        c->off[id] = (uint32_t)total;
        c->len[id] = (uint32_t)n;
        total += (size_t)n;
        n_in++;
    }
    if (gt_tokenizer_eos(t) >= 0) {
        c->is_end[gt_tokenizer_eos(t)] = 1;
        if (c->len[gt_tokenizer_eos(t)])
            n_in--;
        c->len[gt_tokenizer_eos(t)] = 0;
    }
    c->bytes = malloc(total ? total : 1);
    int32_t *ids = malloc(sizeof *ids * (size_t)(n_in ? n_in : 1));
    if (!c->bytes || !ids) {
        free(ids);
        return gt_err_set(err, "out of memory for the vocabulary's bytes");
    }
    int32_t k = 0;
    for (int32_t id = 0; id < V; id++) {
        if (!c->len[id])
            continue;
        gt_token_to_bytes(t, id, c->bytes + c->off[id], c->len[id]);
        ids[k++] = id;
        if ((int)c->len[id] > c->max_len)
            c->max_len = (int)c->len[id];
    }
    if (c->max_len > UINT16_MAX) {
        free(ids);
        return gt_err_set(err, "a token of %d bytes is too long", c->max_len);
    }
    return build_tries(c, ids, k, err);
}

static void trie_free(gt_cn_trie *t)
{
    free(t->byte);
    free(t->depth);
    free(t->next);
    free(t->tok_first);
    free(t->tok_n);
    free(t->sorted);
}

/* The trie of the n tokens ids (taken over, sorted here). */
static int trie_build(gt_cn_vocab *c, gt_cn_trie *t, int32_t *ids, int32_t n_ids, gt_err *err)
{
    t->sorted = ids;
    qsort_r(ids, (size_t)n_ids, sizeof *ids, cmp_bytes, c);
    size_t total = 1;
    for (int32_t i = 0; i < n_ids; i++)
        total += c->len[ids[i]];
    t->byte = malloc(total);
    t->depth = malloc(sizeof *t->depth * total);
    t->next = malloc(sizeof *t->next * total);
    t->tok_first = malloc(sizeof *t->tok_first * total);
    t->tok_n = malloc(sizeof *t->tok_n * total);
    uint32_t *path = malloc(sizeof *path * (size_t)(c->max_len + 1));
    if (!t->byte || !t->depth || !t->next || !t->tok_first || !t->tok_n || !path) {
        free(path);
        return gt_err_set(err, "out of memory for the vocabulary's trie");
    }
    uint32_t n = 0;
    int open = 0; /* depth of the current path */
    for (int32_t i = 0; i < n_ids; i++) {
        const int32_t id = ids[i];
        const uint8_t *s = (const uint8_t *)c->bytes + c->off[id];
        const int len = (int)c->len[id];
        int l = 0;
        if (i > 0) {
            const int32_t p = ids[i - 1];
            const uint8_t *ps = (const uint8_t *)c->bytes + c->off[p];
            const int pl = (int)c->len[p];
            while (l < pl && l < len && ps[l] == s[l])
                l++;
        }
        for (; open > l; open--)
            t->next[path[open]] = n;
        if (l == len) { /* the same bytes as the previous token */
            t->tok_n[path[len]]++;
            continue;
        }
        for (int d = l + 1; d <= len; d++) {
            t->byte[n] = s[d - 1];
            t->depth[n] = (uint16_t)d;
            t->tok_first[n] = (uint32_t)i;
            t->tok_n[n] = 0;
            path[d] = n++;
        }
        t->tok_n[n - 1] = 1;
        open = len;
    }
    for (; open > 0; open--)
        t->next[path[open]] = n;
    free(path);
    t->n_nodes = n;
    return 0;
}

static int cmp_chars(const void *pa, const void *pb, void *user)
{
    const uint32_t *chars = user;
    const int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
    if (chars[a] != chars[b])
        return chars[a] < chars[b] ? -1 : 1;
    return (a > b) - (a < b);
}

/* Splits the tokens into plain ones (by the automaton itself: a string
 * frame takes the token whole and is still inside the string, past any
 * escape or partial character) and the others, and builds the tries. */
static int build_tries(gt_cn_vocab *c, int32_t *ids, int32_t k, gt_err *err)
{
    uint32_t *chars = calloc((size_t)c->n_vocab, sizeof *chars);
    int32_t *plain = malloc(sizeof *plain * (size_t)(k ? k : 1));
    int32_t *other = malloc(sizeof *other * (size_t)(k ? k : 1));
    int32_t *all = malloc(sizeof *all * (size_t)(k ? k : 1));
    gt_cn_frame *fr = malloc(sizeof *fr * 64);
    if (!chars || !plain || !other || !all || !fr) {
        free(chars), free(plain), free(other), free(all), free(fr), free(ids);
        return gt_err_set(err, "out of memory for the vocabulary's trie");
    }
    gt_cn_frame root, str0, str;
    memset(&root, 0, sizeof root);
    root.kind = GT_FR_ROOT;
    root.d = 1;
    memset(&str0, 0, sizeof str0);
    str0.up = &root;
    str0.kind = GT_FR_STR;
    str0.node = -1;
    str0.d = 2;
    str0.b = (uint64_t)(int64_t)-1; /* no maxLength: count the characters */
    int32_t np = 0, no = 0;
    for (int32_t i = 0; i < k; i++) {
        const int32_t id = ids[i];
        str = str0;
        gt_cn_arena a = {fr, 0, 64, 0};
        gt_cn_set set = {.s = {&str}, .n = 1}, next;
        for (uint32_t j = 0; j < c->len[id] && set.n; j++) {
            a.n = 0;
            gt_cn_step(&no_schema, &a, &set, (uint8_t)c->bytes[c->off[id] + j], &next);
            if (next.n == 1 && next.s[0]->kind == GT_FR_STR) {
                str = *next.s[0]; /* keep it out of the rewound arena */
                str.up = &root;
                set.s[0] = &str;
            } else {
                set.n = 0;
            }
        }
        if (set.n == 1 && str.x == 0 && str.y == 0) {
            chars[id] = (uint32_t)str.n;
            plain[np++] = id;
        } else {
            other[no++] = id;
        }
        all[i] = id;
    }
    free(fr);
    free(ids);
    qsort_r(plain, (size_t)np, sizeof *plain, cmp_chars, chars);
    c->plain = plain;
    c->n_plain = np;
    c->plain_chars = malloc(sizeof *c->plain_chars * (size_t)(np ? np : 1));
    if (!c->plain_chars) {
        free(chars), free(other), free(all);
        return gt_err_set(err, "out of memory for the vocabulary's trie");
    }
    for (int32_t i = 0; i < np; i++)
        c->plain_chars[i] = chars[plain[i]];
    free(chars);
    if (trie_build(c, &c->all, all, k, err) != 0) {
        free(other);
        return -1;
    }
    return trie_build(c, &c->other, other, no, err);
}

void gt_cn_vocab_free(gt_cn_vocab *v)
{
    if (!v)
        return;
    trie_free(&v->all);
    trie_free(&v->other);
    free(v->plain);
    free(v->plain_chars);
    free(v->bytes);
    free(v->off);
    free(v->len);
    free(v->is_end);
    free(v);
}

/* Serializes the first build of any model's vocabulary (a serve request
 * thread may be the first). */
static pthread_mutex_t build_lock = PTHREAD_MUTEX_INITIALIZER;

const gt_cn_vocab *gt_cn_vocab_of(const gt_model *m, gt_err *err)
{
    gt_model *mm = (gt_model *)m; /* a cache: the model is otherwise unchanged */
    pthread_mutex_lock(&build_lock);
    if (!mm->cn_vocab) {
        gt_cn_vocab *v = calloc(1, sizeof *v);
        if (!v) {
            gt_err_set(err, "out of memory");
        } else if (build_vocab(v, m->tok, err) != 0) {
            gt_cn_vocab_free(v);
        } else {
            mm->cn_vocab = v;
        }
    }
    const gt_cn_vocab *v = mm->cn_vocab;
    pthread_mutex_unlock(&build_lock);
    return v;
}
