/* constraint_text.c: the texts constrained decoding matches exactly, and
 * numbers as it counts them: keys as JSON string literals, enum/const
 * values as compact JSON (our own writer, so that the automaton's bytes
 * and the compiler's agree), and bounds turned into millionths such that a
 * decimal is accepted exactly when a double comparison of its value, as
 * validators make it, accepts it. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "constraint_impl.h"

/* A JSON string literal of s (minimal escapes, UTF-8 as is). */
char *gt_cn_json_str(const char *s)
{
    size_t n = strlen(s);
    char *o = malloc(n * 6 + 3), *p = o;
    if (!o)
        return NULL;
    *p++ = '"';
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\') {
            *p++ = '\\';
            *p++ = (char)*c;
        } else if (*c < 0x20) {
            p += sprintf(p, "\\u%04x", *c);
        } else {
            *p++ = (char)*c;
        }
    }
    *p++ = '"';
    *p = '\0';
    return o;
}

/* Shortest text that reads back as v. */
static void num_text(double v, char *out, size_t cap)
{
    if (v == floor(v) && fabs(v) < 1e15) {
        snprintf(out, cap, "%.0f", v);
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(out, cap, "%.*g", prec, v);
        if (strtod(out, NULL) == v)
            return;
    }
}

/* A growing text buffer; oom is sticky. */
typedef struct sbuf {
    char *p;
    size_t n, cap;
    bool oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = (b->n + n + 1) * 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void sb_str(sbuf *b, const char *s)
{
    char *q = gt_cn_json_str(s);
    if (!q) {
        b->oom = true;
        return;
    }
    sb_put(b, q, strlen(q));
    free(q);
}

/* Compact JSON text of a value (our own writer: the automaton matches these
 * bytes exactly). */
static void lit_text(const cJSON *v, sbuf *b)
{
    if (cJSON_IsObject(v) || cJSON_IsArray(v)) {
        const bool obj = cJSON_IsObject(v);
        sb_put(b, obj ? "{" : "[", 1);
        for (const cJSON *c = v->child; c; c = c->next) {
            if (c != v->child)
                sb_put(b, ",", 1);
            if (obj) {
                sb_str(b, c->string);
                sb_put(b, ":", 1);
            }
            lit_text(c, b);
        }
        sb_put(b, obj ? "}" : "]", 1);
    } else if (cJSON_IsString(v)) {
        sb_str(b, v->valuestring);
    } else if (cJSON_IsNumber(v)) {
        char tmp[64];
        num_text(v->valuedouble, tmp, sizeof tmp);
        sb_put(b, tmp, strlen(tmp));
    } else if (cJSON_IsBool(v)) {
        sb_put(b, cJSON_IsTrue(v) ? "true" : "false", cJSON_IsTrue(v) ? 4 : 5);
    } else {
        sb_put(b, "null", 4);
    }
}

/* The decimal text of u units, read as a double (what a validator sees). */
double gt_cn_units_value(int64_t u)
{
    char b[48];
    uint64_t m = u < 0 ? (uint64_t)(-u) : (uint64_t)u;
    snprintf(b, sizeof b, "%s%llu.%06llu", u < 0 ? "-" : "", (unsigned long long)(m / GT_CN_UNIT),
             (unsigned long long)(m % GT_CN_UNIT));
    return strtod(b, NULL);
}

/* The smallest unit count whose value is >= v (lower) or the largest <= v. */
int64_t gt_cn_bound_units(double v, bool lower)
{
    if (v <= -1e12)
        return lower ? -GT_CN_MAXU : -GT_CN_MAXU - 1;
    if (v >= 1e12)
        return lower ? GT_CN_MAXU + 1 : GT_CN_MAXU;
    long double x = (long double)v * 1e6L;
    int64_t u = (int64_t)(lower ? ceill(x) : floorl(x));
    if (lower) {
        while (gt_cn_units_value(u - 1) >= v)
            u--;
        while (gt_cn_units_value(u) < v)
            u++;
    } else {
        while (gt_cn_units_value(u + 1) <= v)
            u++;
        while (gt_cn_units_value(u) > v)
            u--;
    }
    return u;
}

char *gt_cn_value_text(const void *json_value)
{
    sbuf b = {0};
    lit_text(json_value, &b);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}
