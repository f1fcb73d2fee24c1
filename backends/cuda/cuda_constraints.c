/* cuda_constraints.c: parsing and checking the CUDA driver profile (the
 * grammar is in cuda_constraints.h).
 *
 * Strict on purpose: a typo in a matrix ("drvier>=12.4", "cc>=8.x") is a
 * configuration error with the item quoted, never a constraint silently
 * dropped, because a dropped constraint would let a cell "pass" on a machine
 * it was meant to exclude. */
#include "cuda_constraints.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    gt_cuda_key key;
} KEYS[] = {
    {"driver", GT_CUDA_KEY_DRIVER},
    {"runtime", GT_CUDA_KEY_RUNTIME},
    {"compute_capability", GT_CUDA_KEY_CC},
    {"cc", GT_CUDA_KEY_CC},
};

/* Two-character operators first so that ">=" is not read as ">". */
static const struct {
    const char *text;
    gt_cuda_cmp cmp;
} OPS[] = {
    {">=", GT_CUDA_GE}, {"<=", GT_CUDA_LE}, {"==", GT_CUDA_EQ}, {"!=", GT_CUDA_NE},
    {">", GT_CUDA_GT},  {"<", GT_CUDA_LT},  {"=", GT_CUDA_EQ},
};

const char *gt_cuda_key_name(gt_cuda_key k)
{
    switch (k) {
    case GT_CUDA_KEY_DRIVER: return "driver";
    case GT_CUDA_KEY_RUNTIME: return "runtime";
    case GT_CUDA_KEY_CC: return "compute_capability";
    }
    return "?";
}

const char *gt_cuda_cmp_name(gt_cuda_cmp c)
{
    switch (c) {
    case GT_CUDA_GE: return ">=";
    case GT_CUDA_LE: return "<=";
    case GT_CUDA_GT: return ">";
    case GT_CUDA_LT: return "<";
    case GT_CUDA_EQ: return "==";
    case GT_CUDA_NE: return "!=";
    }
    return "?";
}

gt_cuda_version gt_cuda_version_from_int(int v)
{
    gt_cuda_version r = {{v / 1000, (v % 1000) / 10, 0}};
    return r;
}

const char *gt_cuda_version_str(gt_cuda_version v, char *buf, size_t n)
{
    if (v.v[2])
        snprintf(buf, n, "%d.%d.%d", v.v[0], v.v[1], v.v[2]);
    else
        snprintf(buf, n, "%d.%d", v.v[0], v.v[1]);
    return buf;
}

/* N, N.N or N.N.N and nothing else; each part below a million. */
static int parse_version(const char *s, gt_cuda_version *out)
{
    memset(out, 0, sizeof *out);
    int part = 0;
    for (;;) {
        if (!isdigit((unsigned char)*s))
            return -1;
        long v = 0;
        while (isdigit((unsigned char)*s)) {
            v = v * 10 + (*s++ - '0');
            if (v >= 1000000)
                return -1;
        }
        out->v[part++] = (int)v;
        if (*s == '\0')
            return 0;
        if (*s != '.' || part == 3)
            return -1;
        s++;
    }
}

static int version_cmp(gt_cuda_version a, gt_cuda_version b)
{
    for (int i = 0; i < 3; i++)
        if (a.v[i] != b.v[i])
            return a.v[i] < b.v[i] ? -1 : 1;
    return 0;
}

static int holds(gt_cuda_cmp c, int order)
{
    switch (c) {
    case GT_CUDA_GE: return order >= 0;
    case GT_CUDA_LE: return order <= 0;
    case GT_CUDA_GT: return order > 0;
    case GT_CUDA_LT: return order < 0;
    case GT_CUDA_EQ: return order == 0;
    case GT_CUDA_NE: return order != 0;
    }
    return 0;
}

/* Copies s[0..n) into buf without surrounding whitespace. */
static void trim_copy(char *buf, size_t cap, const char *s, size_t n)
{
    while (n && isspace((unsigned char)*s))
        s++, n--;
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    if (n >= cap)
        n = cap - 1;
    memcpy(buf, s, n);
    buf[n] = '\0';
}

static int parse_item(const char *item, gt_cuda_profile *out, gt_err *err)
{
    const char *p = item;
    char key[32];
    size_t kn = 0;
    while ((isalpha((unsigned char)*p) || *p == '_') && kn < sizeof key - 1)
        key[kn++] = (char)tolower((unsigned char)*p++);
    key[kn] = '\0';
    while (isspace((unsigned char)*p))
        p++;
    int op = -1;
    for (size_t i = 0; i < sizeof OPS / sizeof OPS[0]; i++) {
        size_t len = strlen(OPS[i].text);
        if (strncmp(p, OPS[i].text, len) == 0) {
            op = (int)i;
            p += len;
            break;
        }
    }
    char value[64];
    trim_copy(value, sizeof value, p, strlen(p));

    if (strcmp(key, "gemm") == 0) {
        if (op < 0 || OPS[op].cmp != GT_CUDA_EQ)
            return gt_err_set(err, "item '%s': a setting is written gemm=f32 or gemm=tf32", item);
        if (strcmp(value, "f32") == 0)
            out->gemm = GT_CUDA_GEMM_F32;
        else if (strcmp(value, "tf32") == 0)
            out->gemm = GT_CUDA_GEMM_TF32;
        else
            return gt_err_set(err, "item '%s': gemm is f32 or tf32, not '%s'", item, value);
        return 0;
    }
    if (strcmp(key, "graphs") == 0) {
        if (op < 0 || OPS[op].cmp != GT_CUDA_EQ || (strcmp(value, "on") && strcmp(value, "off")))
            return gt_err_set(err, "item '%s': a setting is written graphs=on or graphs=off", item);
        out->graphs = strcmp(value, "on") == 0;
        return 0;
    }
    int k = -1;
    for (size_t i = 0; i < sizeof KEYS / sizeof KEYS[0]; i++)
        if (strcmp(key, KEYS[i].name) == 0)
            k = (int)i;
    if (k < 0)
        return gt_err_set(err,
                          "item '%s': unknown key '%s' (known: driver, runtime, "
                          "compute_capability (or cc); settings gemm, graphs)",
                          item, key);
    if (op < 0)
        return gt_err_set(err, "item '%s': expected an operator (>=, <=, >, <, ==, !=) after '%s'",
                          item, key);
    gt_cuda_constraint c = {.key = KEYS[k].key, .cmp = OPS[op].cmp};
    if (parse_version(value, &c.want) != 0)
        return gt_err_set(err, "item '%s': '%s' is not a version (expected N, N.N or N.N.N)", item,
                          value);
    if (out->n >= GT_CUDA_MAX_CONSTRAINTS)
        return gt_err_set(err, "more than %d constraints", GT_CUDA_MAX_CONSTRAINTS);
    out->c[out->n++] = c;
    return 0;
}

int gt_cuda_profile_parse(const char *text, gt_cuda_profile *out, gt_err *err)
{
    memset(out, 0, sizeof *out);
    out->gemm = GT_CUDA_GEMM_F32;
    if (!text)
        return 0;
    char all[512];
    if (strlen(text) >= sizeof all)
        return gt_err_set(err, "cuda driver profile is longer than %zu characters", sizeof all - 1);
    trim_copy(all, sizeof all, text, strlen(text));
    if (all[0] == '\0')
        return 0;
    for (const char *s = all;;) {
        const char *comma = strchr(s, ',');
        size_t n = comma ? (size_t)(comma - s) : strlen(s);
        char item[128];
        trim_copy(item, sizeof item, s, n);
        if (item[0] == '\0') {
            gt_err_set(err, "empty item");
        } else if (parse_item(item, out, err) == 0) {
            if (!comma)
                return 0;
            s = comma + 1;
            continue;
        }
        return gt_err_wrap(err,
                           "cuda driver profile '%s' (items: KEY OP VERSION with KEY driver, "
                           "runtime or compute_capability, or gemm=f32|tf32, graphs=on|off, "
                           "comma-separated)",
                           text);
    }
}

int gt_cuda_profile_check(const gt_cuda_profile *p, const gt_cuda_found *found, gt_err *err)
{
    char msg[768] = "";
    int failed = 0;
    for (int i = 0; i < p->n; i++) {
        const gt_cuda_constraint *c = &p->c[i];
        gt_cuda_version have = c->key == GT_CUDA_KEY_DRIVER    ? found->driver
                               : c->key == GT_CUDA_KEY_RUNTIME ? found->runtime
                                                               : found->cc;
        if (holds(c->cmp, version_cmp(have, c->want)))
            continue;
        char h[32], w[32];
        size_t len = strlen(msg);
        snprintf(msg + len, sizeof msg - len, "%s%s %s found, %s%s required", failed ? "; " : "",
                 gt_cuda_key_name(c->key), gt_cuda_version_str(have, h, sizeof h),
                 gt_cuda_cmp_name(c->cmp), gt_cuda_version_str(c->want, w, sizeof w));
        failed++;
    }
    if (failed)
        return gt_err_set(err, "driver profile not met: %s", msg);
    return 0;
}
