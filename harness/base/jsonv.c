/* jsonv.c: see jsonv.h. */
#include "jsonv.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int gt_jv_parse(const char *file, const char *text, size_t len, cJSON **out, gt_err *err)
{
    const char *end = NULL;
    *out = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (*out) {
        /* One document only: whitespace may follow it, nothing else. */
        while (end && end < text + len && strchr(" \t\r\n", *end) && *end)
            end++;
        if (!end || end >= text + len)
            return 0;
        cJSON_Delete(*out);
        *out = NULL;
    }
    /* cJSON leaves end at the first byte it could not use. */
    if (!end || end < text || end > text + len)
        end = text + len;
    int line = 1, col = 1;
    for (const char *p = text; p < end; p++) {
        if (*p == '\n')
            line++, col = 1;
        else
            col++;
    }
    char near[24] = "";
    size_t k = 0;
    for (const char *p = end; p < text + len && *p != '\n' && k < sizeof near - 1; p++)
        near[k++] = *p;
    near[k] = '\0';
    if (end >= text + len)
        return gt_err_set(err, "%s:%d:%d: JSON syntax error: unexpected end of input", file,
                          line, col);
    return gt_err_set(err, "%s:%d:%d: JSON syntax error near '%s'", file, line, col, near);
}

int gt_jv_fail(const gt_jv *v, const char *path, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return gt_err_set(v->err, "%s: %s: %s", v->file, path && path[0] ? path : "(top level)",
                      msg);
}

static bool plain_key(const char *k)
{
    if (!k[0] || isdigit((unsigned char)k[0]))
        return false;
    for (const char *p = k; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '_')
            return false;
    return true;
}

const char *gt_jv_key(char buf[GT_JV_PATH], const char *path, const char *key)
{
    if (plain_key(key))
        snprintf(buf, GT_JV_PATH, "%s%s%s", path, path[0] ? "." : "", key);
    else
        snprintf(buf, GT_JV_PATH, "%s[\"%s\"]", path, key);
    return buf;
}

const char *gt_jv_index(char buf[GT_JV_PATH], const char *path, int i)
{
    snprintf(buf, GT_JV_PATH, "%s[%d]", path, i);
    return buf;
}

const char *gt_jv_type_name(const cJSON *n)
{
    if (!n)
        return "nothing";
    if (cJSON_IsString(n))
        return "a string";
    if (cJSON_IsNumber(n))
        return "a number";
    if (cJSON_IsBool(n))
        return "a boolean";
    if (cJSON_IsNull(n))
        return "null";
    if (cJSON_IsArray(n))
        return "an array";
    if (cJSON_IsObject(n))
        return "an object";
    return "an invalid value";
}

int gt_jv_object(const gt_jv *v, const cJSON *node, const char *path,
                 const char *const *allowed)
{
    if (!cJSON_IsObject(node))
        return gt_jv_fail(v, path, "expected an object, got %s", gt_jv_type_name(node));
    char p[GT_JV_PATH];
    for (const cJSON *c = node->child; c; c = c->next) {
        for (const cJSON *d = node->child; d != c; d = d->next)
            if (strcmp(d->string, c->string) == 0)
                return gt_jv_fail(v, gt_jv_key(p, path, c->string), "duplicate key");
        if (!allowed)
            continue;
        bool ok = false;
        for (int i = 0; allowed[i]; i++)
            ok |= strcmp(allowed[i], c->string) == 0;
        if (!ok) {
            char list[400] = "";
            for (int i = 0; allowed[i]; i++) {
                strncat(list, i ? ", " : "", sizeof list - strlen(list) - 1);
                strncat(list, allowed[i], sizeof list - strlen(list) - 1);
            }
            return gt_jv_fail(v, gt_jv_key(p, path, c->string),
                              "unknown key (expected one of: %s)", list);
        }
    }
    return 0;
}

static const cJSON *member(const gt_jv *v, const cJSON *obj, const char *path, const char *key,
                           bool required, int *rc)
{
    *rc = 0;
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!n && required) {
        char p[GT_JV_PATH];
        *rc = gt_jv_fail(v, gt_jv_key(p, path, key), "required key is missing");
    }
    return n;
}

int gt_jv_str(const gt_jv *v, const cJSON *obj, const char *path, const char *key,
              bool required, const char **out)
{
    int rc;
    const cJSON *n = member(v, obj, path, key, required, &rc);
    if (!n)
        return rc;
    char p[GT_JV_PATH];
    if (!cJSON_IsString(n))
        return gt_jv_fail(v, gt_jv_key(p, path, key), "expected a string, got %s",
                          gt_jv_type_name(n));
    if (!n->valuestring[0])
        return gt_jv_fail(v, gt_jv_key(p, path, key), "expected a non-empty string");
    *out = n->valuestring;
    return 0;
}

int gt_jv_num(const gt_jv *v, const cJSON *obj, const char *path, const char *key,
              bool required, double min, double max, double *out)
{
    int rc;
    const cJSON *n = member(v, obj, path, key, required, &rc);
    if (!n)
        return rc;
    char p[GT_JV_PATH];
    if (!cJSON_IsNumber(n))
        return gt_jv_fail(v, gt_jv_key(p, path, key), "expected a number, got %s",
                          gt_jv_type_name(n));
    if (!(n->valuedouble >= min && n->valuedouble <= max))
        return gt_jv_fail(v, gt_jv_key(p, path, key), "expected a number in [%g, %g], got %g",
                          min, max, n->valuedouble);
    *out = n->valuedouble;
    return 0;
}

int gt_jv_int(const gt_jv *v, const cJSON *obj, const char *path, const char *key,
              bool required, int64_t min, int64_t max, int64_t *out)
{
    int rc;
    const cJSON *n = member(v, obj, path, key, required, &rc);
    if (!n)
        return rc;
    char p[GT_JV_PATH];
    double d = n->valuedouble;
    if (!cJSON_IsNumber(n) || d != floor(d))
        return gt_jv_fail(v, gt_jv_key(p, path, key), "expected an integer, got %s",
                          cJSON_IsNumber(n) ? "a fraction" : gt_jv_type_name(n));
    if (d < (double)min || d > (double)max)
        return gt_jv_fail(v, gt_jv_key(p, path, key),
                          "expected an integer in [%lld, %lld], got %.0f", (long long)min,
                          (long long)max, d);
    *out = (int64_t)d;
    return 0;
}

int gt_jv_bool(const gt_jv *v, const cJSON *obj, const char *path, const char *key,
               bool required, bool *out)
{
    int rc;
    const cJSON *n = member(v, obj, path, key, required, &rc);
    if (!n)
        return rc;
    char p[GT_JV_PATH];
    if (!cJSON_IsBool(n))
        return gt_jv_fail(v, gt_jv_key(p, path, key), "expected true or false, got %s",
                          gt_jv_type_name(n));
    *out = cJSON_IsTrue(n);
    return 0;
}

int gt_jv_arr(const gt_jv *v, const cJSON *obj, const char *path, const char *key,
              bool required, bool nonempty, const cJSON **out)
{
    int rc;
    const cJSON *n = member(v, obj, path, key, required, &rc);
    if (!n)
        return rc;
    char p[GT_JV_PATH];
    if (!cJSON_IsArray(n))
        return gt_jv_fail(v, gt_jv_key(p, path, key), "expected an array, got %s",
                          gt_jv_type_name(n));
    if (nonempty && !n->child)
        return gt_jv_fail(v, gt_jv_key(p, path, key), "expected a non-empty array");
    *out = n;
    return 0;
}

int gt_jv_obj(const gt_jv *v, const cJSON *obj, const char *path, const char *key,
              bool required, const cJSON **out)
{
    int rc;
    const cJSON *n = member(v, obj, path, key, required, &rc);
    if (!n)
        return rc;
    char p[GT_JV_PATH];
    if (!cJSON_IsObject(n))
        return gt_jv_fail(v, gt_jv_key(p, path, key), "expected an object, got %s",
                          gt_jv_type_name(n));
    *out = n;
    return 0;
}

bool gt_jv_is_ident(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 64)
        return false;
    for (const char *p = s; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("._+-", *p))
            return false;
    return true;
}

int gt_jv_ident(const gt_jv *v, const cJSON *obj, const char *path, const char *key,
                    char out[65])
{
    const char *s = NULL;
    char p[GT_JV_PATH];
    if (gt_jv_str(v, obj, path, key, true, &s) != 0)
        return -1;
    if (!gt_jv_is_ident(s))
        return gt_jv_fail(v, gt_jv_key(p, path, key),
                          "expected an identifier of 1-64 characters from [A-Za-z0-9._+-], "
                          "got \"%s\"",
                          s);
    snprintf(out, 65, "%s", s);
    return 0;
}
