/* constraint_schema.c: a JSON Schema (the subset gt/constraint.h lists)
 * compiled into the nodes the byte automaton runs (constraint_impl.h).
 *
 * Every keyword is checked against the subset; anything else is refused by
 * name with the JSON pointer of the schema that holds it, never ignored.
 * Choices a generator needs that the specification leaves open:
 *   - An object with "properties" or "required" is closed: keys come only
 *     from properties (a required name without a property schema takes any
 *     value), each at most once. additionalProperties may only be false
 *     (absent reads as false). An object with neither is free: any keys,
 *     any values.
 *   - "$ref" and "anyOf" stand alone: other assertions beside them would
 *     mean an intersection, which is refused rather than half applied.
 *   - enum/const values must satisfy the schema's other keywords (checked
 *     for type, bounds and maxLength; an object or array value beside
 *     properties/items is refused). They are written as compact JSON.
 *   - Numbers have no exponent, at most 12 integer and 6 fraction digits
 *     (constraint_impl.h); bounds are turned into millionths so that a value
 *     is accepted exactly when a double comparison, as validators make it,
 *     accepts its decimal text. */
#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "constraint_impl.h"

typedef struct memo {
    const cJSON *json;
    int node;
} memo;

typedef struct cctx {
    gt_cn_schema *s;
    const cJSON *doc;
    memo *memo;
    int n_memo, cap_memo;
    gt_err *err;
} cctx;

#define GROW(p, n, cap)                                                                 \
    ((n) < (cap) ? 0                                                                    \
                 : ((cap) = (cap) ? (cap) * 2 : 16,                                     \
                    (p) = realloc((p), sizeof *(p) * (size_t)(cap)), (p) ? 0 : -1))

static int new_node(cctx *x)
{
    gt_cn_schema *s = x->s;
    if (GROW(s->nodes, s->n_nodes, s->cap_nodes) != 0)
        return gt_err_set(x->err, "out of memory compiling the schema");
    gt_cn_node *n = &s->nodes[s->n_nodes];
    *n = (gt_cn_node){.type = GT_CN_TYPED, .kinds = GT_CK_ALL, .ref = -1, .items = -1,
                      .max_items = -1, .max_len = -1, .lo = -GT_CN_MAXU, .hi = GT_CN_MAXU};
    return s->n_nodes++;
}

static int add_lit(cctx *x, const char *txt)
{
    gt_cn_schema *s = x->s;
    int cap = s->cap_lits;
    if (GROW(s->lit_txt, s->n_lits, cap) != 0 || GROW(s->lit_len, s->n_lits, s->cap_lits) != 0)
        return gt_err_set(x->err, "out of memory compiling the schema");
    s->lit_txt[s->n_lits] = strdup(txt);
    if (!s->lit_txt[s->n_lits])
        return gt_err_set(x->err, "out of memory compiling the schema");
    s->lit_len[s->n_lits] = (int)strlen(txt);
    return s->n_lits++;
}

/* ptr + "/" + key with ~ and / escaped (RFC 6901). */
static void ptr_key(char *out, size_t cap, const char *ptr, const char *key)
{
    size_t n = (size_t)snprintf(out, cap, "%s/", ptr);
    for (const char *k = key; *k && n + 3 < cap; k++) {
        if (*k == '~' || *k == '/') {
            out[n++] = '~';
            out[n++] = *k == '~' ? '0' : '1';
        } else {
            out[n++] = *k;
        }
    }
    out[n < cap ? n : cap - 1] = '\0';
}

static const char *where(const char *ptr) { return *ptr ? ptr : "/ (the root)"; }

static int64_t floor_div(int64_t a, int64_t b) { return a / b - (a % b != 0 && a < 0); }

static int compile(cctx *x, const cJSON *j, const char *ptr);

/* Keywords of the subset; annotations are accepted and have no effect. */
static const char *const KNOWN[] = {
    "type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems",
    "maxLength", "minimum", "maximum", "enum", "const", "anyOf", "$ref", "$defs", "definitions",
    "title", "description", "$schema", "$id", "examples", "default", NULL};
static const char *const NOT_ASSERTIONS[] = {"$defs", "definitions", "title", "description",
                                             "$schema", "$id", "examples", "default", NULL};

static bool in(const char *k, const char *const *list)
{
    for (int i = 0; list[i]; i++)
        if (strcmp(k, list[i]) == 0)
            return true;
    return false;
}

static const cJSON *resolve(cctx *x, const char *ref, const char *ptr)
{
    if (ref[0] != '#')
        return gt_err_set(x->err, "unsupported $ref \"%s\" at %s: only references within the "
                                  "document (\"#/...\") are supported", ref, where(ptr)),
               NULL;
    const cJSON *cur = x->doc;
    const char *p = ref + 1;
    while (*p) {
        if (*p != '/')
            return gt_err_set(x->err, "$ref \"%s\" at %s is not a JSON pointer", ref, where(ptr)),
                   NULL;
        p++;
        char tok[256];
        size_t n = 0;
        while (*p && *p != '/' && n + 1 < sizeof tok) {
            if (p[0] == '~' && (p[1] == '0' || p[1] == '1')) {
                tok[n++] = p[1] == '0' ? '~' : '/';
                p += 2;
            } else {
                tok[n++] = *p++;
            }
        }
        tok[n] = '\0';
        const cJSON *next = NULL;
        if (cJSON_IsObject(cur)) {
            next = cJSON_GetObjectItemCaseSensitive(cur, tok);
        } else if (cJSON_IsArray(cur)) {
            char *end;
            long i = strtol(tok, &end, 10);
            next = *tok && !*end ? cJSON_GetArrayItem(cur, (int)i) : NULL;
        }
        if (!next)
            return gt_err_set(x->err, "$ref \"%s\" at %s points at nothing", ref, where(ptr)),
                   NULL;
        cur = next;
    }
    return cur;
}

static int nonneg_int(cctx *x, const cJSON *v, const char *kw, const char *ptr, int *out)
{
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble != floor(v->valuedouble) ||
        v->valuedouble > INT_MAX / 2)
        return gt_err_set(x->err, "%s at %s must be a non-negative integer", kw, where(ptr));
    *out = (int)v->valuedouble;
    return 0;
}

static unsigned kind_of_value(const cJSON *v)
{
    if (cJSON_IsObject(v))
        return GT_CK_OBJ;
    if (cJSON_IsArray(v))
        return GT_CK_ARR;
    if (cJSON_IsString(v))
        return GT_CK_STR;
    if (cJSON_IsNumber(v))
        return v->valuedouble == floor(v->valuedouble) ? GT_CK_INT : GT_CK_NUM;
    if (cJSON_IsBool(v))
        return GT_CK_BOOL;
    return GT_CK_NULL;
}

/* Characters (code points) of a UTF-8 string. */
static int utf8_chars(const char *s)
{
    int n = 0;
    for (const unsigned char *c = (const unsigned char *)s; *c; c++)
        n += (*c & 0xC0) != 0x80;
    return n;
}

static bool lit_fits(const gt_cn_node *n, const cJSON *v)
{
    const unsigned k = kind_of_value(v);
    if (!(n->kinds & k) && !(k == GT_CK_INT && (n->kinds & GT_CK_NUM)))
        return false;
    if (k == GT_CK_STR && n->max_len >= 0 && utf8_chars(v->valuestring) > n->max_len)
        return false;
    if (k & (GT_CK_INT | GT_CK_NUM)) {
        const double d = v->valuedouble;
        if (d < gt_cn_units_value(n->lo) || d > gt_cn_units_value(n->hi))
            return false;
    }
    return true;
}

static int compile_lits(cctx *x, int idx, const cJSON *j, const char *ptr)
{
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(j, "enum");
    const cJSON *co = cJSON_GetObjectItemCaseSensitive(j, "const");
    if (en && (!cJSON_IsArray(en) || !en->child))
        return gt_err_set(x->err, "enum at %s must be a non-empty array", where(ptr));
    const bool containers_checked = cJSON_GetObjectItemCaseSensitive(j, "properties") ||
                                    cJSON_GetObjectItemCaseSensitive(j, "required") ||
                                    cJSON_GetObjectItemCaseSensitive(j, "items") ||
                                    cJSON_GetObjectItemCaseSensitive(j, "minItems") ||
                                    cJSON_GetObjectItemCaseSensitive(j, "maxItems");
    const gt_cn_node shape = x->s->nodes[idx];
    const int first = x->s->n_lits;
    int count = 0;
    for (const cJSON *v = en ? en->child : co; v; v = en ? v->next : NULL) {
        if (en && co && !cJSON_Compare(v, co, true))
            continue;
        if ((cJSON_IsObject(v) || cJSON_IsArray(v)) && containers_checked)
            return gt_err_set(x->err, "enum/const with an object or array value beside "
                                      "properties/required/items/minItems/maxItems at %s "
                                      "is not supported", where(ptr));
        if (!lit_fits(&shape, v))
            continue;
        if (count == GT_CN_MAX_SET)
            return gt_err_set(x->err, "enum at %s has more than %d values", where(ptr),
                              GT_CN_MAX_SET);
        char *txt = gt_cn_value_text(v);
        if (!txt)
            return gt_err_set(x->err, "out of memory compiling the schema");
        int rc = add_lit(x, txt);
        free(txt);
        if (rc < 0)
            return -1;
        count++;
    }
    if (count == 0)
        return gt_err_set(x->err, "no enum/const value at %s satisfies the schema's other "
                                  "keywords", where(ptr));
    gt_cn_node *n = &x->s->nodes[idx];
    n->type = GT_CN_LIT;
    n->first = first;
    n->count = count;
    return 0;
}

static int compile_object(cctx *x, int idx, const cJSON *j, const char *ptr)
{
    const cJSON *pr = cJSON_GetObjectItemCaseSensitive(j, "properties");
    const cJSON *rq = cJSON_GetObjectItemCaseSensitive(j, "required");
    const cJSON *ap = cJSON_GetObjectItemCaseSensitive(j, "additionalProperties");
    char sub[1024];
    if (ap && !cJSON_IsFalse(ap))
        return gt_err_set(x->err, "unsupported JSON Schema keyword \"additionalProperties\" at %s: "
                                  "only false is supported (absent reads as false)", where(ptr));
    if (pr && !cJSON_IsObject(pr))
        return gt_err_set(x->err, "properties at %s must be an object", where(ptr));
    if (rq && !cJSON_IsArray(rq))
        return gt_err_set(x->err, "required at %s must be an array", where(ptr));
    if (!pr && !rq)
        return 0; /* free object */
    gt_cn_schema *s = x->s;
    /* Children first: they add their own properties, and an object's must
     * lie together. */
    int child[GT_CN_MAX_SET];
    int n = 0;
    for (const cJSON *p = pr ? pr->child : NULL; p; p = p->next, n++) {
        if (n == GT_CN_MAX_SET)
            return gt_err_set(x->err, "more than %d properties at %s", GT_CN_MAX_SET, where(ptr));
        char pp[1024];
        ptr_key(pp, sizeof pp, ptr, "properties");
        ptr_key(sub, sizeof sub, pp, p->string);
        if ((child[n] = compile(x, p, sub)) < 0)
            return -1;
    }
    const int first = s->n_props;
    n = 0;
    for (const cJSON *p = pr ? pr->child : NULL; p; p = p->next, n++) {
        if (GROW(s->props, s->n_props, s->cap_props) != 0)
            return gt_err_set(x->err, "out of memory compiling the schema");
        char *key = gt_cn_json_str(p->string);
        if (!key)
            return gt_err_set(x->err, "out of memory compiling the schema");
        s->props[s->n_props++] = (gt_cn_prop){key, (int)strlen(key), child[n]};
    }
    uint64_t req = 0;
    for (const cJSON *r = rq ? rq->child : NULL; r; r = r->next) {
        if (!cJSON_IsString(r))
            return gt_err_set(x->err, "required at %s must list strings", where(ptr));
        char *lit = gt_cn_json_str(r->valuestring);
        if (!lit)
            return gt_err_set(x->err, "out of memory compiling the schema");
        int k = 0;
        while (k < n && strcmp(s->props[first + k].key, lit) != 0)
            k++;
        free(lit);
        if (k == n) { /* required without a property schema: any value */
            if (n == GT_CN_MAX_SET)
                return gt_err_set(x->err, "more than %d properties at %s", GT_CN_MAX_SET,
                                  where(ptr));
            if (GROW(s->props, s->n_props, s->cap_props) != 0)
                return gt_err_set(x->err, "out of memory compiling the schema");
            char *key = gt_cn_json_str(r->valuestring);
            if (!key)
                return gt_err_set(x->err, "out of memory compiling the schema");
            s->props[s->n_props++] = (gt_cn_prop){key, (int)strlen(key), s->any};
            n++;
        }
        req |= 1ull << k;
    }
    gt_cn_node *node = &s->nodes[idx];
    node->closed = true;
    node->prop_first = first;
    node->n_props = n;
    node->required = req;
    return 0;
}

static int compile_typed(cctx *x, int idx, const cJSON *j, const char *ptr)
{
    gt_cn_node *n = &x->s->nodes[idx];
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(j, "type");
    if (ty) {
        static const char *const NAMES[] = {"object", "array", "string", "integer", "number",
                                            "boolean", "null"};
        static const unsigned BITS[] = {GT_CK_OBJ, GT_CK_ARR, GT_CK_STR, GT_CK_INT,
                                        GT_CK_INT | GT_CK_NUM, GT_CK_BOOL, GT_CK_NULL};
        unsigned k = 0;
        const cJSON *one = cJSON_IsArray(ty) ? ty->child : ty;
        for (; one; one = cJSON_IsArray(ty) ? one->next : NULL) {
            int i = 0;
            while (i < 7 && !(cJSON_IsString(one) && strcmp(one->valuestring, NAMES[i]) == 0))
                i++;
            if (i == 7)
                return gt_err_set(x->err, "unknown type %s%s%s at %s (expected object, array, "
                                          "string, integer, number, boolean or null)",
                                  cJSON_IsString(one) ? "\"" : "",
                                  cJSON_IsString(one) ? one->valuestring : "(not a string)",
                                  cJSON_IsString(one) ? "\"" : "", where(ptr));
            k |= BITS[i];
        }
        if (!k)
            return gt_err_set(x->err, "empty type list at %s", where(ptr));
        n->kinds = k;
    }
    const cJSON *v;
    if ((v = cJSON_GetObjectItemCaseSensitive(j, "maxLength")) &&
        nonneg_int(x, v, "maxLength", ptr, &n->max_len) != 0)
        return -1;
    if ((v = cJSON_GetObjectItemCaseSensitive(j, "minItems")) &&
        nonneg_int(x, v, "minItems", ptr, &n->min_items) != 0)
        return -1;
    if ((v = cJSON_GetObjectItemCaseSensitive(j, "maxItems")) &&
        nonneg_int(x, v, "maxItems", ptr, &n->max_items) != 0)
        return -1;
    if (n->max_items >= 0 && n->min_items > n->max_items)
        return gt_err_set(x->err, "minItems > maxItems at %s", where(ptr));
    const cJSON *mn = cJSON_GetObjectItemCaseSensitive(j, "minimum");
    const cJSON *mx = cJSON_GetObjectItemCaseSensitive(j, "maximum");
    if ((mn && !cJSON_IsNumber(mn)) || (mx && !cJSON_IsNumber(mx)))
        return gt_err_set(x->err, "minimum/maximum at %s must be numbers", where(ptr));
    if (mn)
        n->lo = gt_cn_bound_units(mn->valuedouble, true);
    if (mx)
        n->hi = gt_cn_bound_units(mx->valuedouble, false);
    if (!(n->kinds & GT_CK_NUM)) { /* integers: whole units of 1e6 */
        n->lo = -floor_div(-n->lo, GT_CN_UNIT) * GT_CN_UNIT;
        n->hi = floor_div(n->hi, GT_CN_UNIT) * GT_CN_UNIT;
    }
    if (n->lo > n->hi) /* no number fits: the number kinds go */
        n->kinds &= ~(unsigned)(GT_CK_INT | GT_CK_NUM);
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(j, "items");
    if (it) {
        if (cJSON_IsArray(it))
            return gt_err_set(x->err, "unsupported JSON Schema keyword \"items\" as an array "
                                      "(tuple) at %s", where(ptr));
        char sub[1024];
        ptr_key(sub, sizeof sub, ptr, "items");
        int child = compile(x, it, sub);
        if (child < 0)
            return -1;
        x->s->nodes[idx].items = child;
    } else {
        x->s->nodes[idx].items = x->s->any;
    }
    return compile_object(x, idx, j, ptr);
}

static int compile_defs(cctx *x, const cJSON *j, const char *ptr)
{
    static const char *const DEFS[] = {"$defs", "definitions"};
    for (int d = 0; d < 2; d++) {
        const cJSON *defs = cJSON_GetObjectItemCaseSensitive(j, DEFS[d]);
        if (!defs)
            continue;
        if (!cJSON_IsObject(defs))
            return gt_err_set(x->err, "%s at %s must be an object", DEFS[d], where(ptr));
        char dp[1024], sub[1024];
        ptr_key(dp, sizeof dp, ptr, DEFS[d]);
        for (const cJSON *e = defs->child; e; e = e->next) {
            ptr_key(sub, sizeof sub, dp, e->string);
            if (compile(x, e, sub) < 0)
                return -1;
        }
    }
    return 0;
}

static int compile(cctx *x, const cJSON *j, const char *ptr)
{
    if (cJSON_IsTrue(j))
        return x->s->any;
    if (cJSON_IsFalse(j))
        return gt_err_set(x->err, "the schema false at %s is not supported", where(ptr));
    if (!cJSON_IsObject(j))
        return gt_err_set(x->err, "the schema at %s must be an object or a boolean", where(ptr));
    for (int i = 0; i < x->n_memo; i++)
        if (x->memo[i].json == j)
            return x->memo[i].node;
    for (const cJSON *k = j->child; k; k = k->next)
        if (!in(k->string, KNOWN))
            return gt_err_set(x->err, "unsupported JSON Schema keyword \"%s\" at %s", k->string,
                              where(ptr));
    const int idx = new_node(x);
    if (idx < 0)
        return -1;
    if (GROW(x->memo, x->n_memo, x->cap_memo) != 0)
        return gt_err_set(x->err, "out of memory compiling the schema");
    x->memo[x->n_memo++] = (memo){j, idx};
    if (compile_defs(x, j, ptr) != 0)
        return -1;
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(j, "$ref");
    const cJSON *any = cJSON_GetObjectItemCaseSensitive(j, "anyOf");
    if (ref || any) {
        const char *kw = ref ? "$ref" : "anyOf";
        for (const cJSON *k = j->child; k; k = k->next)
            if (!in(k->string, NOT_ASSERTIONS) && strcmp(k->string, kw) != 0)
                return gt_err_set(x->err, "\"%s\" beside \"%s\" at %s is not supported (%s must "
                                          "stand alone)", k->string, kw, where(ptr), kw);
    }
    if (ref) {
        if (!cJSON_IsString(ref))
            return gt_err_set(x->err, "$ref at %s must be a string", where(ptr));
        const cJSON *target = resolve(x, ref->valuestring, ptr);
        if (!target)
            return -1;
        int t = compile(x, target, ref->valuestring + 1);
        if (t < 0)
            return -1;
        x->s->nodes[idx].type = GT_CN_REF;
        x->s->nodes[idx].ref = t;
        return idx;
    }
    if (any) {
        if (!cJSON_IsArray(any) || !any->child)
            return gt_err_set(x->err, "anyOf at %s must be a non-empty array", where(ptr));
        int alts[GT_CN_MAX_STATES], n = 0;
        char ap[1024], sub[1024];
        ptr_key(ap, sizeof ap, ptr, "anyOf");
        for (const cJSON *a = any->child; a; a = a->next, n++) {
            if (n == GT_CN_MAX_STATES)
                return gt_err_set(x->err, "anyOf at %s has more than %d schemas", where(ptr),
                                  GT_CN_MAX_STATES);
            snprintf(sub, sizeof sub, "%s/%d", ap, n);
            if ((alts[n] = compile(x, a, sub)) < 0)
                return -1;
        }
        gt_cn_schema *s = x->s;
        const int first = s->n_alts;
        for (int i = 0; i < n; i++) {
            if (GROW(s->alts, s->n_alts, s->cap_alts) != 0)
                return gt_err_set(x->err, "out of memory compiling the schema");
            s->alts[s->n_alts++] = alts[i];
        }
        s->nodes[idx].type = GT_CN_ANYOF;
        s->nodes[idx].first = first;
        s->nodes[idx].count = n;
        return idx;
    }
    if (compile_typed(x, idx, j, ptr) != 0)
        return -1;
    if ((cJSON_GetObjectItemCaseSensitive(j, "enum") ||
         cJSON_GetObjectItemCaseSensitive(j, "const")) &&
        compile_lits(x, idx, j, ptr) != 0)
        return -1;
    return idx;
}

/* Follows $ref chains; -1 on a cycle of bare references. */
static int target(const gt_cn_schema *s, int n)
{
    for (int hops = 0; n >= 0 && s->nodes[n].type == GT_CN_REF; hops++) {
        if (hops > s->n_nodes)
            return -1;
        n = s->nodes[n].ref;
    }
    return n;
}

static int resolve_refs(gt_cn_schema *s, gt_err *err)
{
    int *slots[] = {&s->root};
    for (int i = 0; i < 1; i++)
        if ((*slots[i] = target(s, *slots[i])) < 0)
            return gt_err_set(err, "a cycle of $ref that never reaches a schema");
    for (int i = 0; i < s->n_nodes; i++) {
        gt_cn_node *n = &s->nodes[i];
        if (n->items >= 0 && (n->items = target(s, n->items)) < 0)
            return gt_err_set(err, "a cycle of $ref that never reaches a schema");
    }
    for (int i = 0; i < s->n_props; i++)
        if ((s->props[i].node = target(s, s->props[i].node)) < 0)
            return gt_err_set(err, "a cycle of $ref that never reaches a schema");
    for (int i = 0; i < s->n_alts; i++)
        if ((s->alts[i] = target(s, s->alts[i])) < 0)
            return gt_err_set(err, "a cycle of $ref that never reaches a schema");
    return 0;
}

static int imin(int a, int b) { return a < b ? a : b; }
static int imax(int a, int b) { return a > b ? a : b; }

/* The fewest frames a value of each node needs, by fixpoint (recursive
 * schemas): GT_CN_INF where no finite value exists. */
static void min_depths(gt_cn_schema *s)
{
    for (int i = 0; i < s->n_nodes; i++)
        s->nodes[i].md = s->nodes[i].md_obj = s->nodes[i].md_arr = GT_CN_INF;
    for (bool changed = true; changed;) {
        changed = false;
        for (int i = 0; i < s->n_nodes; i++) {
            gt_cn_node *n = &s->nodes[i];
            int md = GT_CN_INF, mo = GT_CN_INF, ma = GT_CN_INF;
            if (n->type == GT_CN_LIT) {
                md = 1;
            } else if (n->type == GT_CN_ANYOF) {
                for (int a = 0; a < n->count; a++)
                    md = imin(md, s->nodes[s->alts[n->first + a]].md);
            } else if (n->type == GT_CN_TYPED) {
                if (n->kinds & (GT_CK_STR | GT_CK_INT | GT_CK_NUM | GT_CK_BOOL | GT_CK_NULL))
                    md = 1;
                if (n->kinds & GT_CK_OBJ) {
                    int need = 1; /* a key's frame */
                    for (int p = 0; n->closed && p < n->n_props; p++)
                        if (n->required >> p & 1)
                            need = imax(need, s->nodes[s->props[n->prop_first + p].node].md);
                    mo = need >= GT_CN_INF ? GT_CN_INF : 1 + need;
                }
                if ((n->kinds & GT_CK_ARR) &&
                    (n->max_items < 0 || n->max_items >= n->min_items)) {
                    const int it = n->min_items > 0 ? s->nodes[n->items].md : 0;
                    ma = it >= GT_CN_INF ? GT_CN_INF : 1 + it;
                }
                md = imin(md, imin(mo, ma));
            }
            if (md != n->md || mo != n->md_obj || ma != n->md_arr) {
                n->md = md;
                n->md_obj = mo;
                n->md_arr = ma;
                changed = true;
            }
        }
    }
}

void gt_cn_schema_free(gt_cn_schema *s)
{
    for (int i = 0; i < s->n_props; i++)
        free(s->props[i].key);
    for (int i = 0; i < s->n_lits; i++)
        free(s->lit_txt[i]);
    free(s->nodes);
    free(s->props);
    free(s->alts);
    free(s->lit_txt);
    free(s->lit_len);
    memset(s, 0, sizeof *s);
}

int gt_cn_compile(const char *schema_json, gt_cn_schema *s, gt_err *err)
{
    memset(s, 0, sizeof *s);
    cctx x = {.s = s, .err = err};
    int rc = -1;
    cJSON *doc = NULL;
    if ((s->any = new_node(&x)) < 0) /* any value: free object, any items */
        goto out;
    s->nodes[s->any].items = s->any;
    if ((s->lit_bool = add_lit(&x, "true")) < 0 || add_lit(&x, "false") < 0 ||
        (s->lit_null = add_lit(&x, "null")) < 0)
        goto out;
    if (!schema_json) { /* any JSON object */
        if ((s->root = new_node(&x)) < 0)
            goto out;
        s->nodes[s->root].kinds = GT_CK_OBJ;
        s->nodes[s->root].items = s->any;
    } else {
        const char *end = NULL;
        doc = cJSON_ParseWithOpts(schema_json, &end, true);
        if (!doc) {
            gt_err_set(err, "the schema is not valid JSON (near byte %ld)",
                       end ? (long)(end - schema_json) : 0L);
            goto out;
        }
        x.doc = doc;
        if ((s->root = compile(&x, doc, "")) < 0)
            goto out;
    }
    if (resolve_refs(s, err) != 0)
        goto out;
    min_depths(s);
    if (s->nodes[s->root].md + 1 > GT_CN_MAX_DEPTH) {
        gt_err_set(err, "the schema admits no value that can be generated (unsatisfiable, or "
                        "nested deeper than %d)", GT_CN_MAX_DEPTH - 1);
        goto out;
    }
    rc = 0;
out:
    cJSON_Delete(doc);
    free(x.memo);
    if (rc != 0)
        gt_cn_schema_free(s);
    return rc;
}
