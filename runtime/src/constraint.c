/* constraint.c: gt/constraint.h: a compiled schema (constraint_schema.c)
 * run against the model's vocabulary (constraint_vocab.c).
 *
 * A mask walks the vocabulary's byte trie once, stepping the automaton
 * (constraint_pda.c) by each node's byte from the states of its parent,
 * and skips a whole subtree at the first byte no state takes: a token
 * costs nothing unless its first bytes are possible, and bytes shared by
 * many tokens are stepped once. The walk's frames come from an arena
 * rewound to its mark at the parent's depth, so a mask allocates nothing.
 * Inside a string (one state, past any escape or partial character) the
 * plain tokens are allowed by their character count and only the others
 * are walked. End tokens are allowed exactly when the document is
 * complete; once it is, nothing else is. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "constraint_impl.h"

struct gt_constraint {
    gt_cn_schema s;
    const gt_cn_vocab *v; /* the model's (constraint_vocab.c) */
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
    if (!(c->v = gt_cn_vocab_of(m, err))) {
        gt_constraint_free(c);
        return -1;
    }
    const size_t per_depth = GT_CN_MAX_STATES * 8;
    const size_t commit = GT_CN_MAX_STATES * GT_CN_MAX_DEPTH;
    c->allowed = calloc((size_t)c->v->n_vocab, 1);
    c->sets = malloc(sizeof *c->sets * (size_t)(c->v->max_len + 1));
    c->marks = malloc(sizeof *c->marks * (size_t)(c->v->max_len + 1));
    if (!c->allowed || !c->sets || !c->marks || arena_init(&c->commit[0], commit) != 0 ||
        arena_init(&c->commit[1], commit) != 0 ||
        arena_init(&c->walk, per_depth * (size_t)(c->v->max_len + 2)) != 0) {
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
    return token >= 0 && token < c->v->n_vocab && c->v->is_end[token];
}

/* Marks the tokens of t that some state of c->state takes whole. */
static void walk(gt_constraint *c, const gt_cn_trie *t)
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
    memset(c->allowed, 0, (size_t)c->v->n_vocab);
    const gt_cn_frame *top = c->state.n == 1 ? c->state.s[0] : NULL;
    if (top && top->kind == GT_FR_STR && top->x == 0 && top->y == 0) {
        /* inside a string: the plain tokens whose characters fit, then the rest */
        const int64_t max = (int64_t)top->b;
        const int64_t room = max < 0 ? INT64_MAX : max - top->n;
        for (int32_t i = 0; i < c->v->n_plain && (int64_t)c->v->plain_chars[i] <= room; i++)
            c->allowed[c->v->plain[i]] = 1;
        walk(c, &c->v->other);
    } else {
        walk(c, &c->v->all);
    }
    const bool done = gt_constraint_done(c);
    int n = 0;
    for (int32_t id = 0; id < c->v->n_vocab; id++) {
        if (c->allowed[id] || (done && c->v->is_end[id]))
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
    if (token < 0 || token >= c->v->n_vocab)
        return gt_err_set(err, "token %d is out of range", (int)token);
    if (c->v->is_end[token]) {
        if (!gt_constraint_done(c))
            return gt_err_set(err, "end token %d before the document is complete", (int)token);
        return 0;
    }
    if (!c->v->len[token])
        return gt_err_set(err, "token %d (special, or no text) cannot be part of the document",
                          (int)token);
    gt_cn_set sets[2];
    sets[0] = c->state;
    c->walk.n = 0;
    const uint8_t *b = (const uint8_t *)c->v->bytes + c->v->off[token];
    int cur = 0;
    for (uint32_t i = 0; i < c->v->len[token]; i++, cur ^= 1) {
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
