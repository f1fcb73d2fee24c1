/* matrix_settings.c: the execution-settings axis of a matrix.
 *
 * A backend entry, or the matrix's "defaults", may list
 *   "settings": {"n_batch": [1, 7, 512], "n_parallel": [1, 4],
 *                "threads": [1, 2], "kv_type": ["f32", "f16"]}
 * (every key optional). They expand like driver profiles: each backend's
 * cells are the cross product of its settings, in the fixed key order
 * n_batch, n_parallel, threads, kv_type (the last varying fastest, values in
 * the order written), and each variant gets an id made of the keys the
 * matrix names, in that order: "nb7-np4-t2-kvf16". The id is the cell id's
 * fifth part, so it must be the same on every machine: it depends only on
 * the values written, never on what a machine defaults to.
 *
 * Values are checked here (positive integers, kv_type f32 or f16, no value
 * twice, no unknown key); whether a backend can run a variant is the
 * worker's question (kv_type f16 on a backend whose supports() says no for
 * an F16 cache is a skip, "unsupported", with its reason). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "matrix.h"
#include "matrix_parse.h"

/* The keys in id order: the id's prefix for each, and the largest value
 * that makes sense (a bound, so a typo like 5120000 is caught). */
static const struct {
    const char *key, *tag;
    int64_t max;
} SETTING_KEYS[] = {
    {"n_batch", "nb", 1 << 20},
    {"n_parallel", "np", 256},
    {"threads", "t", 1024},
    {"kv_type", "kv", 0},
};
enum { N_SETTING_KEYS = 4, SETTING_KV = 3 };
static const char *const SETTING_KV_TYPES[] = {"f32", "f16"};

int gt_matrix_no_settings(gt_mx_setting **out, int *n)
{
    *out = calloc(1, sizeof **out);
    *n = *out ? 1 : 0;
    return *out ? 0 : -1;
}

/* One key's array: ints in [1, max] or kv type names, no duplicates. */
static int values(const gt_jv *v, const cJSON *arr, const char *path, int k, int *count)
{
    char p[GT_JV_PATH];
    if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) == 0)
        return gt_jv_fail(v, path, "expected a non-empty array of %s, got %s",
                          k == SETTING_KV ? "K/V types (\"f32\", \"f16\")" : "positive integers",
                          gt_jv_type_name(arr));
    int i = 0;
    for (const cJSON *c = arr->child; c; c = c->next, i++) {
        gt_jv_index(p, path, i);
        if (k == SETTING_KV) {
            if (!cJSON_IsString(c) ||
                (strcmp(c->valuestring, SETTING_KV_TYPES[0]) && strcmp(c->valuestring, SETTING_KV_TYPES[1])))
                return gt_jv_fail(v, p, "expected a K/V type, \"f32\" or \"f16\", got %s%s%s",
                                  cJSON_IsString(c) ? "\"" : gt_jv_type_name(c),
                                  cJSON_IsString(c) ? c->valuestring : "",
                                  cJSON_IsString(c) ? "\"" : "");
        } else if (!cJSON_IsNumber(c) || c->valuedouble != (double)(int64_t)c->valuedouble ||
                   c->valuedouble < 1 || c->valuedouble > (double)SETTING_KEYS[k].max) {
            if (cJSON_IsNumber(c))
                return gt_jv_fail(v, p, "expected an integer from 1 to %lld, got %g",
                                  (long long)SETTING_KEYS[k].max, c->valuedouble);
            return gt_jv_fail(v, p, "expected an integer from 1 to %lld, got %s",
                              (long long)SETTING_KEYS[k].max, gt_jv_type_name(c));
        }
        for (const cJSON *d = arr->child; d != c; d = d->next)
            if (cJSON_Compare(c, d, true))
                return gt_jv_fail(v, p, "duplicate value");
    }
    *count = i;
    return 0;
}

int gt_matrix_parse_settings(const gt_jv *v, const cJSON *node, const char *path,
                             gt_mx_setting **out, int *n)
{
    static const char *const SETTING_NAMES[] = {"n_batch", "n_parallel", "threads", "kv_type", NULL};
    char p[GT_JV_PATH];
    *out = NULL;
    *n = 0;
    if (!cJSON_IsObject(node))
        return gt_jv_fail(v, path, "expected an object {\"n_batch\": [...], \"n_parallel\": "
                                   "[...], \"threads\": [...], \"kv_type\": [...]}, got %s",
                          gt_jv_type_name(node));
    for (const cJSON *c = node->child; c; c = c->next) {
        bool known = false;
        for (int k = 0; SETTING_NAMES[k] && !known; k++)
            known = strcmp(c->string, SETTING_NAMES[k]) == 0;
        if (!known)
            return gt_jv_fail(v, gt_jv_key(p, path, c->string),
                              "unknown setting \"%s\" (settings are n_batch, n_parallel, "
                              "threads, kv_type)",
                              c->string);
    }
    if (gt_jv_object(v, node, path, SETTING_NAMES) != 0) /* duplicate keys */
        return -1;
    const cJSON *arr[N_SETTING_KEYS];
    int cnt[N_SETTING_KEYS], total = 1;
    for (int k = 0; k < N_SETTING_KEYS; k++) {
        arr[k] = cJSON_GetObjectItemCaseSensitive(node, SETTING_KEYS[k].key);
        cnt[k] = 1;
        if (arr[k] && values(v, arr[k], gt_jv_key(p, path, SETTING_KEYS[k].key), k, &cnt[k]) != 0)
            return -1;
        total *= cnt[k];
        if (total > 4096)
            return gt_jv_fail(v, path, "more than 4096 settings variants");
    }
    gt_mx_setting *list = calloc((size_t)total, sizeof *list);
    if (!list)
        return gt_jv_fail(v, path, "out of memory");
    /* Mixed-radix count over the keys, the last key fastest. */
    for (int i = 0; i < total; i++) {
        gt_mx_setting *s = &list[i];
        int rest = i, pick[N_SETTING_KEYS];
        for (int k = N_SETTING_KEYS - 1; k >= 0; k--) {
            pick[k] = rest % cnt[k];
            rest /= cnt[k];
        }
        size_t len = 0;
        for (int k = 0; k < N_SETTING_KEYS; k++) {
            if (!arr[k])
                continue;
            const cJSON *c = cJSON_GetArrayItem(arr[k], pick[k]);
            char val[24];
            if (k == SETTING_KV) {
                s->kv_type = c->valuestring;
                snprintf(val, sizeof val, "%s", c->valuestring);
            } else {
                int x = (int)c->valuedouble;
                *(k == 0 ? &s->n_batch : k == 1 ? &s->n_parallel : &s->threads) = x;
                snprintf(val, sizeof val, "%d", x);
            }
            len += (size_t)snprintf(s->id + len, sizeof s->id - len, "%s%s%s", len ? "-" : "",
                                    SETTING_KEYS[k].tag, val);
        }
    }
    *out = list;
    *n = total;
    return 0;
}

void gt_setting_describe(const gt_mx_setting *s, char *out, size_t cap)
{
    size_t len = 0;
    out[0] = '\0';
    const int vals[3] = {s->n_batch, s->n_parallel, s->threads};
    for (int k = 0; k < 3 && len < cap; k++)
        if (vals[k])
            len += (size_t)snprintf(out + len, cap - len, "%s%s %d", len ? ", " : "",
                                    SETTING_KEYS[k].key, vals[k]);
    if (s->kv_type && len < cap)
        snprintf(out + len, cap - len, "%skv_type %s", len ? ", " : "", s->kv_type);
}
