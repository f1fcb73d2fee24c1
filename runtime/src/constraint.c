/* constraint.c: gt/constraint.h: a compiled schema (constraint_schema.c)
 * run against a model's vocabulary.
 *
 * Each token's bytes (gt_token_to_bytes, what a caller prints) are taken
 * once, sorted, and laid out as a trie in preorder: node i holds one byte,
 * its depth, the index just past its subtree, and the tokens whose bytes
 * end there. A mask walks the trie once, stepping the automaton
 * (constraint_pda.c) by each node's byte from the states of its parent,
 * and skips a whole subtree at the first byte no state takes: a token
 * costs nothing unless its first bytes are possible, and the bytes shared
 * by many tokens are stepped once. The walk's frames come from an arena
 * rewound to its mark at the parent's depth, so a mask allocates nothing.
 *
 * Tokens that never appear inside the document: special ones (control,
 * unknown, the names llama.cpp makes control), unused ones and those that
 * decode to no bytes. Tokens that end generation (the vocabulary's EOS
 * and, where special, the end-of-turn markers chat templates end with)
 * are allowed exactly when the document is complete; once it is, nothing
 * else is. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "constraint_impl.h"
#include "tokenizer_impl.h"
#include <stdint.h>

/* A byte trie of some tokens, in preorder. */
typedef struct trie {
    uint32_t n_nodes;
    uint8_t *byte;
    uint16_t *depth;
    uint32_t *next, *tok_first, *tok_n;
    int32_t *sorted; /* the tokens by bytes; node i's are sorted[tok_first[i]..] */
} trie;

struct gt_constraint {
    gt_cn_schema s;
    int32_t n_vocab;
    /* token bytes */
    char *bytes;
    uint32_t *off, *len; /* (n_vocab); len 0: never inside the document */
    uint8_t *is_end;     /* (n_vocab) */
    int max_len;
    trie all;   /* every token that may appear inside the document */
    /* Inside a string, past any escape or partial character, a "plain"
     * token (one that the string takes whole: no quote, backslash or
     * control byte, whole UTF-8 characters) is allowed exactly when its
     * characters fit maxLength. Such states take the plain tokens by their
     * character count (plain, ascending: a prefix of it) and walk only the
     * trie of the others, which skips most of a large vocabulary. */
    trie other;
    int32_t *plain; /* plain token ids by character count */
    uint32_t *plain_chars;
    int32_t n_plain;
    /* the committed states (two arenas: the new states are copied out of
     * the old before the old is rewound) */
    gt_cn_arena commit[2];
    int cur;
    gt_cn_set state;
    /* the mask walk */
    gt_cn_arena walk;
    gt_cn_set *sets; /* (max_len + 1) */
    size_t *marks;   /* (max_len + 1) */
    uint8_t *allowed; /* (n_vocab) */
};

/* Markers chat templates end a turn with; end generation when special. */
static const char *const END_NAMES[] = {"<end_of_turn>", "<|im_end|>", "<|eot_id|>", "<|end|>",
                                        "<|endoftext|>", NULL};

static int cmp_bytes(const void *pa, const void *pb, void *user)
{
    const gt_constraint *c = user;
    const int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
    const uint32_t la = c->len[a], lb = c->len[b];
    int r = memcmp(c->bytes + c->off[a], c->bytes + c->off[b], la < lb ? la : lb);
    if (r)
        return r;
    if (la != lb)
        return la < lb ? -1 : 1;
    return (a > b) - (a < b);
}

static int build_tries(gt_constraint *c, int32_t *ids, int32_t k, gt_err *err);

static int build_vocab(gt_constraint *c, const gt_tokenizer *t, gt_err *err)
{
    const int32_t V = gt_tokenizer_n_vocab(t);
    c->n_vocab = V;
    c->off = calloc((size_t)V, sizeof *c->off);
    c->len = calloc((size_t)V, sizeof *c->len);
    c->is_end = calloc((size_t)V, 1);
    c->allowed = calloc((size_t)V, 1);
    if (!c->off || !c->len || !c->is_end || !c->allowed)
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

static void trie_free(trie *t)
{
    free(t->byte);
    free(t->depth);
    free(t->next);
    free(t->tok_first);
    free(t->tok_n);
    free(t->sorted);
}

/* The trie of the n tokens ids (taken over, sorted here). */
static int trie_build(gt_constraint *c, trie *t, int32_t *ids, int32_t n_ids, gt_err *err)
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
static int build_tries(gt_constraint *c, int32_t *ids, int32_t k, gt_err *err)
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
            gt_cn_step(&c->s, &a, &set, (uint8_t)c->bytes[c->off[id] + j], &next);
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

static int arena_init(gt_cn_arena *a, size_t cap)
{
    a->f = malloc(sizeof *a->f * cap);
    a->cap = cap;
    a->n = 0;
    return a->f ? 0 : -1;
}

static int make(const gt_model *m, const char *schema, gt_constraint **out, gt_err *err)
{
    *out = NULL;
    gt_constraint *c = calloc(1, sizeof *c);
    if (!c)
        return gt_err_set(err, "out of memory");
    if (gt_cn_compile(schema, &c->s, err) != 0) {
        free(c);
        return -1;
    }
    if (build_vocab(c, gt_model_tokenizer(m), err) != 0) {
        gt_constraint_free(c);
        return -1;
    }
    const size_t per_depth = GT_CN_MAX_STATES * 8;
    const size_t commit = GT_CN_MAX_STATES * GT_CN_MAX_DEPTH;
    c->sets = malloc(sizeof *c->sets * (size_t)(c->max_len + 1));
    c->marks = malloc(sizeof *c->marks * (size_t)(c->max_len + 1));
    if (!c->sets || !c->marks || arena_init(&c->commit[0], commit) != 0 ||
        arena_init(&c->commit[1], commit) != 0 ||
        arena_init(&c->walk, per_depth * (size_t)(c->max_len + 2)) != 0) {
        gt_constraint_free(c);
        return gt_err_set(err, "out of memory for the constraint's states");
    }
    gt_constraint_reset(c);
    *out = c;
    return 0;
}

int gt_constraint_from_schema(const gt_model *m, const char *schema_json, gt_constraint **out,
                              gt_err *err)
{
    if (!schema_json)
        return gt_err_set(err, "no schema given");
    return make(m, schema_json, out, err);
}

int gt_constraint_json_object(const gt_model *m, gt_constraint **out, gt_err *err)
{
    return make(m, NULL, out, err);
}

void gt_constraint_free(gt_constraint *c)
{
    if (!c)
        return;
    gt_cn_schema_free(&c->s);
    free(c->bytes);
    free(c->off);
    free(c->len);
    free(c->is_end);
    trie_free(&c->all);
    trie_free(&c->other);
    free(c->plain);
    free(c->plain_chars);
    free(c->commit[0].f);
    free(c->commit[1].f);
    free(c->walk.f);
    free(c->sets);
    free(c->marks);
    free(c->allowed);
    free(c);
}

void gt_constraint_reset(gt_constraint *c)
{
    c->cur = 0;
    c->commit[0].n = 0;
    gt_cn_start(&c->s, &c->commit[0], &c->state);
}

bool gt_constraint_done(const gt_constraint *c) { return gt_cn_done(&c->s, &c->state); }

bool gt_constraint_is_end(const gt_constraint *c, int32_t token)
{
    return token >= 0 && token < c->n_vocab && c->is_end[token];
}

/* Marks the tokens of t that some state of c->state takes whole. */
static void walk(gt_constraint *c, const trie *t)
{
    c->sets[0] = c->state;
    c->walk.n = 0;
    c->marks[0] = 0;
    for (uint32_t i = 0; i < t->n_nodes;) {
        const int d = t->depth[i];
        c->walk.n = c->marks[d - 1];
        gt_cn_step(&c->s, &c->walk, &c->sets[d - 1], t->byte[i], &c->sets[d]);
        if (c->sets[d].n == 0) {
            i = t->next[i];
            continue;
        }
        c->marks[d] = c->walk.n;
        for (uint32_t k = 0; k < t->tok_n[i]; k++)
            c->allowed[t->sorted[t->tok_first[i] + k]] = 1;
        i++;
    }
}

int gt_constraint_mask(gt_constraint *c, float *logits)
{
    memset(c->allowed, 0, (size_t)c->n_vocab);
    const gt_cn_frame *top = c->state.n == 1 ? c->state.s[0] : NULL;
    if (top && top->kind == GT_FR_STR && top->x == 0 && top->y == 0) {
        /* inside a string: the plain tokens whose characters fit, then the rest */
        const int64_t max = (int64_t)top->b;
        const int64_t room = max < 0 ? INT64_MAX : max - top->n;
        for (int32_t i = 0; i < c->n_plain && (int64_t)c->plain_chars[i] <= room; i++)
            c->allowed[c->plain[i]] = 1;
        walk(c, &c->other);
    } else {
        walk(c, &c->all);
    }
    const bool done = gt_constraint_done(c);
    int n = 0;
    for (int32_t id = 0; id < c->n_vocab; id++) {
        if (c->allowed[id] || (done && c->is_end[id]))
            n++;
        else
            logits[id] = -INFINITY;
    }
    return n;
}

static const gt_cn_frame *copy_chain(gt_cn_arena *a, const gt_cn_frame *f)
{
    if (!f)
        return NULL;
    const gt_cn_frame *up = copy_chain(a, f->up);
    if (a->n == a->cap)
        return NULL;
    gt_cn_frame *g = &a->f[a->n++];
    *g = *f;
    g->up = up;
    return g;
}

int gt_constraint_accept(gt_constraint *c, int32_t token, gt_err *err)
{
    if (token < 0 || token >= c->n_vocab)
        return gt_err_set(err, "token %d is out of range", (int)token);
    if (c->is_end[token]) {
        if (!gt_constraint_done(c))
            return gt_err_set(err, "end token %d before the document is complete", (int)token);
        return 0;
    }
    if (!c->len[token])
        return gt_err_set(err, "token %d (special, or no text) cannot be part of the document",
                          (int)token);
    gt_cn_set sets[2];
    sets[0] = c->state;
    c->walk.n = 0;
    const uint8_t *b = (const uint8_t *)c->bytes + c->off[token];
    int cur = 0;
    for (uint32_t i = 0; i < c->len[token]; i++, cur ^= 1) {
        gt_cn_step(&c->s, &c->walk, &sets[cur], b[i], &sets[cur ^ 1]);
        if (sets[cur ^ 1].n == 0)
            return gt_err_set(err, "token %d breaks the constraint at its byte %u", (int)token,
                              (unsigned)i);
    }
    gt_cn_arena *dst = &c->commit[c->cur ^ 1];
    dst->n = 0;
    gt_cn_set next = {.n = 0};
    for (int i = 0; i < sets[cur].n; i++) {
        const gt_cn_frame *f = copy_chain(dst, sets[cur].s[i]);
        if (f)
            next.s[next.n++] = f;
    }
    if (next.n == 0)
        return gt_err_set(err, "out of room for the constraint's states");
    c->state = next;
    c->cur ^= 1;
    return 0;
}
