/* test_json_valid.h: a JSON Schema validator for the subset gt/constraint.h
 * supports, written from the specification independently of the
 * constraint's compiler, for tests to check generated documents with.
 * Stricter than the specification where the generator is documented to be:
 * an object whose schema lists properties or required names holds no
 * other key, and no key twice. */
#ifndef GT_TEST_JSON_VALID_H
#define GT_TEST_JSON_VALID_H

#include <cjson/cJSON.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static const cJSON *gt_test_json_ref(const cJSON *root, const char *ref)
{
    if (ref[0] != '#')
        return NULL;
    const cJSON *cur = root;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", ref + 1);
    for (char *save = NULL, *tok = strtok_r(buf, "/", &save); tok && cur;
         tok = strtok_r(NULL, "/", &save))
        cur = cJSON_GetObjectItemCaseSensitive(cur, tok);
    return cur;
}

static bool gt_test_json_type(const cJSON *v, const char *t)
{
    if (!strcmp(t, "object"))
        return cJSON_IsObject(v);
    if (!strcmp(t, "array"))
        return cJSON_IsArray(v);
    if (!strcmp(t, "string"))
        return cJSON_IsString(v);
    if (!strcmp(t, "number"))
        return cJSON_IsNumber(v);
    if (!strcmp(t, "integer"))
        return cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble);
    if (!strcmp(t, "boolean"))
        return cJSON_IsBool(v);
    if (!strcmp(t, "null"))
        return cJSON_IsNull(v);
    return false;
}

#define GT_TJ_FAIL(...) (snprintf(why, cap, __VA_ARGS__), false)

static bool gt_test_json_valid(const cJSON *v, const cJSON *s, const cJSON *root, char *why,
                               size_t cap)
{
    if (!s || cJSON_IsTrue(s))
        return true;
    if (!cJSON_IsObject(s))
        return GT_TJ_FAIL("schema is not an object");
    const cJSON *k;
    if ((k = cJSON_GetObjectItemCaseSensitive(s, "$ref")))
        return gt_test_json_valid(v, gt_test_json_ref(root, k->valuestring), root, why, cap);
    if ((k = cJSON_GetObjectItemCaseSensitive(s, "anyOf"))) {
        for (const cJSON *a = k->child; a; a = a->next)
            if (gt_test_json_valid(v, a, root, why, cap))
                return true;
        return GT_TJ_FAIL("no anyOf alternative holds");
    }
    if ((k = cJSON_GetObjectItemCaseSensitive(s, "type"))) {
        bool ok = false;
        if (cJSON_IsString(k))
            ok = gt_test_json_type(v, k->valuestring);
        for (const cJSON *t = cJSON_IsArray(k) ? k->child : NULL; t && !ok; t = t->next)
            ok = gt_test_json_type(v, t->valuestring);
        if (!ok)
            return GT_TJ_FAIL("wrong type");
    }
    if ((k = cJSON_GetObjectItemCaseSensitive(s, "enum"))) {
        bool ok = false;
        for (const cJSON *e = k->child; e && !ok; e = e->next)
            ok = cJSON_Compare(v, e, true);
        if (!ok)
            return GT_TJ_FAIL("not in enum");
    }
    if ((k = cJSON_GetObjectItemCaseSensitive(s, "const")) && !cJSON_Compare(v, k, true))
        return GT_TJ_FAIL("not the const");
    if (cJSON_IsObject(v)) {
        const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
        const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
        for (const cJSON *m = v->child; m; m = m->next) {
            for (const cJSON *o = v->child; o != m; o = o->next)
                if (!strcmp(o->string, m->string))
                    return GT_TJ_FAIL("key \"%s\" twice", m->string);
            const cJSON *ps = props ? cJSON_GetObjectItemCaseSensitive(props, m->string) : NULL;
            bool listed = ps != NULL;
            for (const cJSON *r = req ? req->child : NULL; r && !listed; r = r->next)
                listed = !strcmp(r->valuestring, m->string);
            if ((props || req) && !listed)
                return GT_TJ_FAIL("key \"%s\" not in properties", m->string);
            if (ps && !gt_test_json_valid(m, ps, root, why, cap))
                return false;
        }
        for (const cJSON *r = req ? req->child : NULL; r; r = r->next)
            if (!cJSON_GetObjectItemCaseSensitive(v, r->valuestring))
                return GT_TJ_FAIL("required \"%s\" missing", r->valuestring);
    }
    if (cJSON_IsArray(v)) {
        const int n = cJSON_GetArraySize(v);
        if ((k = cJSON_GetObjectItemCaseSensitive(s, "minItems")) && n < k->valueint)
            return GT_TJ_FAIL("fewer than minItems");
        if ((k = cJSON_GetObjectItemCaseSensitive(s, "maxItems")) && n > k->valueint)
            return GT_TJ_FAIL("more than maxItems");
        const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
        for (const cJSON *e = v->child; e && items; e = e->next)
            if (!gt_test_json_valid(e, items, root, why, cap))
                return false;
    }
    if (cJSON_IsString(v) && (k = cJSON_GetObjectItemCaseSensitive(s, "maxLength"))) {
        int chars = 0;
        for (const unsigned char *c = (const unsigned char *)v->valuestring; *c; c++)
            chars += (*c & 0xC0) != 0x80;
        if (chars > k->valueint)
            return GT_TJ_FAIL("%d characters, maxLength %d", chars, k->valueint);
    }
    if (cJSON_IsNumber(v)) {
        if ((k = cJSON_GetObjectItemCaseSensitive(s, "minimum")) && v->valuedouble < k->valuedouble)
            return GT_TJ_FAIL("under minimum");
        if ((k = cJSON_GetObjectItemCaseSensitive(s, "maximum")) && v->valuedouble > k->valuedouble)
            return GT_TJ_FAIL("over maximum");
    }
    return true;
}

#endif
