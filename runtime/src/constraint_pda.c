/* constraint_pda.c: the byte automaton of a compiled schema: for a set of
 * states (stacks of frames, constraint_impl.h), the states after one more
 * byte. A byte no state can take leaves the set empty.
 *
 * The JSON it accepts is the schema's values written one way:
 *   - Whitespace: none, except one optional space after ':' and ',' and
 *     before the document, so generation cannot run away in whitespace and
 *     the compact and the "a": 1, "b": 2 styles both fit.
 *   - Strings: any UTF-8 (validated: no overlong forms, no surrogates) and
 *     the escapes \" \\ \/ \b \f \n \r \t \uXXXX (no lone surrogate half:
 *     \uD800-\uDFFF is refused); maxLength counts characters (code points),
 *     an escape being one.
 *   - Numbers: no exponent, at most 12 integer and 6 fraction digits; a
 *     digit is taken only when some completion of the number still lies
 *     within minimum/maximum, so a bounded number never dead-ends and never
 *     ends out of range. Integers have no fraction.
 *   - Objects: keys of a closed object from its properties, each once; '}'
 *     only once every required key is there; ',' only while an unused key
 *     is left. Arrays: between minItems and maxItems items.
 *   - Nesting stops at GT_CN_MAX_DEPTH frames: a value is opened only when
 *     its smallest completion fits (node min depths), so no state is a dead
 *     end.
 * Numbers and literals (enum/const, true/false/null) have no closing byte:
 * they end when the next byte does not extend them and their value is
 * complete, and that byte goes to the frame below. */
#include <string.h>

#include "constraint_impl.h"

enum { O_FIRST, O_AFTER, O_KEY, O_COLON };  /* object phases */
enum { A_FIRST, A_AFTER };                  /* array phases */
enum { P_MINUS, P_ZERO, P_INT, P_DOT, P_FRAC }; /* number phases */

static gt_cn_frame *alloc(gt_cn_arena *a, const gt_cn_frame *proto)
{
    if (a->n == a->cap) {
        a->overflow++;
        return NULL;
    }
    gt_cn_frame *f = &a->f[a->n++];
    *f = *proto;
    return f;
}

/* A fresh frame of kind above up. */
static gt_cn_frame *push(gt_cn_arena *a, const gt_cn_frame *up, int kind, int node)
{
    gt_cn_frame p;
    memset(&p, 0, sizeof p);
    p.up = up;
    p.kind = (uint8_t)kind;
    p.node = node;
    p.d = (uint8_t)(up ? up->d + 1 : 1);
    return alloc(a, &p);
}

static void emit(gt_cn_set *out, const gt_cn_frame *f)
{
    if (!f)
        return;
    for (int i = 0; i < out->n; i++)
        if (out->s[i] == f || memcmp(out->s[i], f, sizeof *f) == 0)
            return;
    if (out->n < GT_CN_MAX_STATES)
        out->s[out->n++] = f;
}

static bool fits(const gt_cn_schema *s, int depth_below, int node)
{
    return depth_below + s->nodes[node].md <= GT_CN_MAX_DEPTH;
}

/* The states of a value of node about to start above up. */
static void push_value(const gt_cn_schema *s, gt_cn_arena *a, const gt_cn_frame *up, int node,
                       bool ws, gt_cn_set *out)
{
    const gt_cn_node *n = &s->nodes[node];
    if (n->type == GT_CN_ANYOF) {
        for (int i = 0; i < n->count; i++)
            push_value(s, a, up, s->alts[n->first + i], ws, out);
        return;
    }
    if (!fits(s, up->d, node))
        return;
    gt_cn_frame *f = push(a, up, GT_FR_VAL, node);
    if (f)
        f->ws = ws;
    emit(out, f);
}

static void step_one(const gt_cn_schema *s, gt_cn_arena *a, const gt_cn_frame *f, uint8_t b,
                     gt_cn_set *out);

/* ---- numbers ---- */

static int64_t imin64(int64_t x, int64_t y) { return x < y ? x : y; }
static int64_t imax64(int64_t x, int64_t y) { return x > y ? x : y; }

/* Whether magnitudes [lo, hi] (units) with the sign hold a value of the
 * node's range on its grid (integer nodes' bounds are whole units). */
static bool meets(const gt_cn_node *n, bool neg, int64_t lo, int64_t hi)
{
    const int64_t s_lo = neg ? -hi : lo, s_hi = neg ? -lo : hi;
    return imax64(s_lo, n->lo) <= imin64(s_hi, n->hi);
}

static int64_t pow10i(int k)
{
    int64_t p = 1;
    while (k-- > 0)
        p *= 10;
    return p;
}

/* Whether some completion of the number so far lies in the node's range. */
static bool num_feasible(const gt_cn_node *n, const gt_cn_frame *f)
{
    const bool int_only = !(n->kinds & GT_CK_NUM);
    const int64_t frac_max = int_only ? 0 : GT_CN_UNIT - 1;
    const bool neg = f->x;
    const int64_t iv = (int64_t)f->a;
    switch (f->phase) {
    case P_MINUS:
        return meets(n, true, 0, int_only ? GT_CN_MAXU - frac_max - (GT_CN_UNIT - 1) : GT_CN_MAXU);
    case P_ZERO:
        return meets(n, neg, 0, frac_max);
    case P_INT:
        for (int j = 0; f->y + j <= GT_CN_INT_DIGITS; j++) {
            const int64_t p = pow10i(j);
            if (meets(n, neg, iv * p * GT_CN_UNIT, ((iv + 1) * p - 1) * GT_CN_UNIT + frac_max))
                return true;
        }
        return false;
    case P_DOT:
        return meets(n, neg, iv * GT_CN_UNIT, iv * GT_CN_UNIT + GT_CN_UNIT - 1);
    default: { /* P_FRAC */
        const int64_t step = pow10i(GT_CN_FRAC_DIGITS - f->z);
        const int64_t base = iv * GT_CN_UNIT + (int64_t)f->b * step;
        return meets(n, neg, base, base + step - 1);
    }
    }
}

static bool num_can_end(const gt_cn_node *n, const gt_cn_frame *f)
{
    if (f->phase == P_MINUS || f->phase == P_DOT)
        return false;
    int64_t v = (int64_t)f->a * GT_CN_UNIT;
    if (f->phase == P_FRAC)
        v += (int64_t)f->b * pow10i(GT_CN_FRAC_DIGITS - f->z);
    if (f->x)
        v = -v;
    return v >= n->lo && v <= n->hi;
}

/* A number frame f' = f after b, when b extends it feasibly. */
static void num_extend(const gt_cn_schema *s, gt_cn_arena *a, const gt_cn_frame *f, uint8_t b,
                       gt_cn_set *out)
{
    const gt_cn_node *n = &s->nodes[f->node];
    gt_cn_frame g = *f;
    const bool digit = b >= '0' && b <= '9';
    const bool dot_ok = (n->kinds & GT_CK_NUM) != 0;
    switch (f->phase) {
    case P_MINUS:
        if (!digit)
            return;
        g.phase = b == '0' ? P_ZERO : P_INT;
        g.a = (uint64_t)(b - '0');
        g.y = 1;
        break;
    case P_ZERO:
        if (b != '.' || !dot_ok)
            return;
        g.phase = P_DOT;
        break;
    case P_INT:
        if (b == '.' && dot_ok) {
            g.phase = P_DOT;
        } else if (digit && f->y < GT_CN_INT_DIGITS) {
            g.a = f->a * 10 + (uint64_t)(b - '0');
            g.y++;
        } else {
            return;
        }
        break;
    case P_DOT:
        if (!digit)
            return;
        g.phase = P_FRAC;
        g.b = (uint64_t)(b - '0');
        g.z = 1;
        break;
    default:
        if (!digit || f->z >= GT_CN_FRAC_DIGITS)
            return;
        g.b = f->b * 10 + (uint64_t)(b - '0');
        g.z++;
        break;
    }
    if (num_feasible(n, &g))
        emit(out, alloc(a, &g));
}

static void num_start(const gt_cn_schema *s, gt_cn_arena *a, const gt_cn_frame *val, uint8_t b,
                      gt_cn_set *out)
{
    gt_cn_frame g;
    memset(&g, 0, sizeof g);
    g.up = val->up;
    g.kind = GT_FR_NUM;
    g.node = val->node;
    g.d = val->d;
    if (b == '-') {
        g.x = 1;
        g.phase = P_MINUS;
        if (num_feasible(&s->nodes[val->node], &g))
            emit(out, alloc(a, &g));
        return;
    }
    g.phase = P_MINUS; /* a sign-less start is "-" without the sign */
    num_extend(s, a, &g, b, out);
}

/* ---- literals ---- */

static bool lit_can_end(const gt_cn_schema *s, const gt_cn_frame *f)
{
    for (int k = 0; k < GT_CN_MAX_SET; k++)
        if ((f->a >> k & 1) && s->lit_len[f->node + k] == f->n)
            return true;
    return false;
}

static void lit_step(const gt_cn_schema *s, gt_cn_arena *a, const gt_cn_frame *f, uint8_t b,
                     gt_cn_set *out)
{
    uint64_t keep = 0;
    for (int k = 0; k < GT_CN_MAX_SET; k++)
        if ((f->a >> k & 1) && s->lit_len[f->node + k] > f->n &&
            (uint8_t)s->lit_txt[f->node + k][f->n] == b)
            keep |= 1ull << k;
    if (keep) {
        gt_cn_frame g = *f;
        g.a = keep;
        g.n++;
        emit(out, alloc(a, &g));
    }
}

/* A literal starting with b, candidates first..first+count-1. */
static void lit_start(const gt_cn_schema *s, gt_cn_arena *a, const gt_cn_frame *val, int first,
                      int count, uint8_t b, gt_cn_set *out)
{
    gt_cn_frame g;
    memset(&g, 0, sizeof g);
    g.up = val->up;
    g.kind = GT_FR_LIT;
    g.node = first;
    g.d = val->d;
    g.a = count >= 64 ? ~0ull : (1ull << count) - 1;
    lit_step(s, a, &g, b, out);
}

/* ---- strings ---- */

static void str_step(gt_cn_arena *a, const gt_cn_frame *f, uint8_t b, gt_cn_set *out)
{
    gt_cn_frame g = *f;
    const int64_t max = (int64_t)f->b;
    const bool room = max < 0 || f->n < max;
    if (f->x == 1) { /* after a backslash */
        if (b == 'u') {
            g.x = 2;
        } else if (b && strchr("\"\\/bfnrt", b)) {
            g.x = 0;
        } else {
            return;
        }
    } else if (f->x >= 2) { /* \u and x-2 hex digits */
        const bool hex = (b >= '0' && b <= '9') || (b >= 'a' && b <= 'f') || (b >= 'A' && b <= 'F');
        if (!hex)
            return;
        if (f->x == 2)
            g.a = b == 'd' || b == 'D';
        else if (f->x == 3 && f->a && !(b >= '0' && b <= '7'))
            return; /* \uD800-\uDFFF: a surrogate half */
        g.x = f->x == 5 ? 0 : (uint8_t)(f->x + 1);
    } else if (f->y) { /* continuation bytes owed */
        if (b < f->z || b > f->w)
            return;
        g.y--;
        g.z = 0x80;
        g.w = 0xBF;
    } else if (b == '"') {
        emit(out, f->up); /* a key's close returns to its object, in phase O_COLON */
        return;
    } else if (b < 0x20 || !room) {
        return;
    } else if (b == '\\') {
        g.x = 1;
        g.n++;
    } else if (b < 0x80) {
        g.n++;
    } else {
        uint8_t need, lo = 0x80, hi = 0xBF;
        if (b >= 0xC2 && b <= 0xDF)
            need = 1;
        else if (b >= 0xE0 && b <= 0xEF)
            need = 2, lo = b == 0xE0 ? 0xA0 : 0x80, hi = b == 0xED ? 0x9F : 0xBF;
        else if (b >= 0xF0 && b <= 0xF4)
            need = 3, lo = b == 0xF0 ? 0x90 : 0x80, hi = b == 0xF4 ? 0x8F : 0xBF;
        else
            return;
        g.y = need;
        g.z = lo;
        g.w = hi;
        g.n++;
    }
    emit(out, alloc(a, &g));
}

static gt_cn_frame *str_push(gt_cn_arena *a, const gt_cn_frame *up, int max_len, uint8_t d)
{
    gt_cn_frame g;
    memset(&g, 0, sizeof g);
    g.up = up;
    g.kind = GT_FR_STR;
    g.node = -1;
    g.d = d;
    g.b = (uint64_t)(int64_t)max_len;
    return alloc(a, &g);
}

/* ---- objects ---- */

/* Keys of a closed object (frame o) that may still come. */
static uint64_t open_keys(const gt_cn_schema *s, const gt_cn_frame *o)
{
    const gt_cn_node *n = &s->nodes[o->node];
    uint64_t m = 0;
    for (int k = 0; k < n->n_props; k++)
        if (!(o->a >> k & 1) && fits(s, o->d, s->props[n->prop_first + k].node))
            m |= 1ull << k;
    return m;
}

static void key_start(const gt_cn_schema *s, gt_cn_arena *a, const gt_cn_frame *o,
                      gt_cn_set *out)
{
    const gt_cn_node *n = &s->nodes[o->node];
    gt_cn_frame *obj = alloc(a, o);
    if (!obj)
        return;
    obj->phase = O_COLON;
    obj->ws = 0;
    if (!n->closed) {
        emit(out, str_push(a, obj, -1, (uint8_t)(o->d + 1)));
        return;
    }
    const uint64_t keys = open_keys(s, o);
    if (!keys)
        return;
    gt_cn_frame *k = push(a, obj, GT_FR_KEY, -1);
    if (k) {
        k->a = keys;
        k->n = 1; /* the opening quote */
    }
    emit(out, k);
}

static void obj_step(const gt_cn_schema *s, gt_cn_arena *a, const gt_cn_frame *f, uint8_t b,
                     gt_cn_set *out)
{
    const gt_cn_node *n = &s->nodes[f->node];
    switch (f->phase) {
    case O_FIRST:
    case O_AFTER:
        if (b == '}' && (!n->closed || (f->a & n->required) == n->required)) {
            emit(out, f->up);
        } else if (f->phase == O_FIRST && b == '"') {
            key_start(s, a, f, out);
        } else if (f->phase == O_AFTER && b == ',' && (!n->closed || open_keys(s, f))) {
            gt_cn_frame *g = alloc(a, f);
            if (g) {
                g->phase = O_KEY;
                g->ws = 1;
            }
            emit(out, g);
        }
        return;
    case O_KEY:
        if (b == ' ' && f->ws) {
            gt_cn_frame *g = alloc(a, f);
            if (g)
                g->ws = 0;
            emit(out, g);
        } else if (b == '"') {
            key_start(s, a, f, out);
        }
        return;
    default: { /* O_COLON */
        if (b != ':')
            return;
        gt_cn_frame *g = alloc(a, f);
        if (!g)
            return;
        g->phase = O_AFTER;
        int child = s->any;
        if (n->closed) {
            g->a |= 1ull << f->n;
            child = s->props[n->prop_first + f->n].node;
        }
        push_value(s, a, g, child, true, out);
        return;
    }
    }
}

static void key_step(const gt_cn_schema *s, gt_cn_arena *a, const gt_cn_frame *f, uint8_t b,
                     gt_cn_set *out)
{
    const gt_cn_frame *o = f->up;
    const gt_cn_node *n = &s->nodes[o->node];
    uint64_t keep = 0;
    for (int k = 0; k < n->n_props; k++) {
        const gt_cn_prop *p = &s->props[n->prop_first + k];
        if (!(f->a >> k & 1) || p->len <= f->n || (uint8_t)p->key[f->n] != b)
            continue;
        if (p->len == f->n + 1) { /* the closing quote: this key */
            gt_cn_frame *g = alloc(a, o);
            if (g)
                g->n = k;
            emit(out, g);
            return;
        }
        keep |= 1ull << k;
    }
    if (keep) {
        gt_cn_frame *g = alloc(a, f);
        if (g) {
            g->a = keep;
            g->n++;
        }
        emit(out, g);
    }
}

/* ---- arrays ---- */

static void arr_step(const gt_cn_schema *s, gt_cn_arena *a, const gt_cn_frame *f, uint8_t b,
                     gt_cn_set *out)
{
    const gt_cn_node *n = &s->nodes[f->node];
    const bool more = (n->max_items < 0 || f->n < n->max_items) && fits(s, f->d, n->items);
    if (b == ']' && f->n >= n->min_items) {
        emit(out, f->up);
        return;
    }
    if (f->phase == A_FIRST) { /* b starts the first item */
        if (!more)
            return;
        gt_cn_frame *g = alloc(a, f);
        if (!g)
            return;
        g->phase = A_AFTER;
        g->n = 1;
        gt_cn_set vals = {.n = 0};
        push_value(s, a, g, n->items, false, &vals);
        for (int i = 0; i < vals.n; i++)
            step_one(s, a, vals.s[i], b, out);
        return;
    }
    if (b == ',' && more) {
        gt_cn_frame *g = alloc(a, f);
        if (!g)
            return;
        g->n++;
        push_value(s, a, g, n->items, true, out);
    }
}

/* ---- values ---- */

static void val_step(const gt_cn_schema *s, gt_cn_arena *a, const gt_cn_frame *f, uint8_t b,
                     gt_cn_set *out)
{
    const gt_cn_node *n = &s->nodes[f->node];
    if (b == ' ' && f->ws) {
        gt_cn_frame *g = alloc(a, f);
        if (g)
            g->ws = 0;
        emit(out, g);
        return;
    }
    if (n->type == GT_CN_LIT) {
        lit_start(s, a, f, n->first, n->count, b, out);
        return;
    }
    const unsigned k = n->kinds;
    const int below = f->d - 1;
    gt_cn_frame *g;
    switch (b) {
    case '{':
        if ((k & GT_CK_OBJ) && below + n->md_obj <= GT_CN_MAX_DEPTH &&
            (g = push(a, f->up, GT_FR_OBJ, f->node)))
            g->phase = O_FIRST, emit(out, g);
        return;
    case '[':
        if ((k & GT_CK_ARR) && below + n->md_arr <= GT_CN_MAX_DEPTH &&
            (g = push(a, f->up, GT_FR_ARR, f->node)))
            g->phase = A_FIRST, emit(out, g);
        return;
    case '"':
        if (k & GT_CK_STR)
            emit(out, str_push(a, f->up, n->max_len, f->d));
        return;
    case 't':
    case 'f':
        if (k & GT_CK_BOOL)
            lit_start(s, a, f, s->lit_bool, 2, b, out);
        return;
    case 'n':
        if (k & GT_CK_NULL)
            lit_start(s, a, f, s->lit_null, 1, b, out);
        return;
    default:
        if ((k & GT_CK_INT) && (b == '-' || (b >= '0' && b <= '9')))
            num_start(s, a, f, b, out);
        return;
    }
}

static void step_one(const gt_cn_schema *s, gt_cn_arena *a, const gt_cn_frame *f, uint8_t b,
                     gt_cn_set *out)
{
    switch (f->kind) {
    case GT_FR_VAL: val_step(s, a, f, b, out); return;
    case GT_FR_OBJ: obj_step(s, a, f, b, out); return;
    case GT_FR_KEY: key_step(s, a, f, b, out); return;
    case GT_FR_ARR: arr_step(s, a, f, b, out); return;
    case GT_FR_STR: str_step(a, f, b, out); return;
    case GT_FR_NUM:
        num_extend(s, a, f, b, out);
        if (num_can_end(&s->nodes[f->node], f))
            step_one(s, a, f->up, b, out); /* b follows the number */
        return;
    case GT_FR_LIT:
        lit_step(s, a, f, b, out);
        if (lit_can_end(s, f))
            step_one(s, a, f->up, b, out);
        return;
    default: /* ROOT on top: the document is complete, nothing may follow */
        return;
    }
}

void gt_cn_start(const gt_cn_schema *s, gt_cn_arena *a, gt_cn_set *out)
{
    out->n = 0;
    gt_cn_frame *root = push(a, NULL, GT_FR_ROOT, -1);
    if (root)
        push_value(s, a, root, s->root, true, out);
}

void gt_cn_step(const gt_cn_schema *s, gt_cn_arena *a, const gt_cn_set *in, uint8_t b,
                gt_cn_set *out)
{
    out->n = 0;
    for (int i = 0; i < in->n; i++)
        step_one(s, a, in->s[i], b, out);
}

bool gt_cn_done(const gt_cn_schema *s, const gt_cn_set *in)
{
    for (int i = 0; i < in->n; i++) {
        const gt_cn_frame *f = in->s[i];
        if (f->kind == GT_FR_ROOT)
            return true;
        if (f->up && f->up->kind == GT_FR_ROOT &&
            ((f->kind == GT_FR_NUM && num_can_end(&s->nodes[f->node], f)) ||
             (f->kind == GT_FR_LIT && lit_can_end(s, f))))
            return true;
    }
    return false;
}
