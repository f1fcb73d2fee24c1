/* anchors.c: reading and checking a model's anchors file (matrix.h, "Anchors"). */
#include "matrix.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int read_file(const char *path, char **out, gt_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return gt_err_set(err, "cannot open anchors file %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        fclose(f);
        return gt_err_set(err, "cannot read anchors file %s", path);
    }
    fclose(f);
    buf[n] = '\0';
    *out = buf;
    return 0;
}

static bool has_num(const cJSON *o, const char *k, double lo)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) && v->valuedouble >= lo;
}

static bool has_str(const cJSON *o, const char *k)
{
    return cJSON_IsString(cJSON_GetObjectItemCaseSensitive(o, k));
}

static int check_quant(const char *path, const char *q, const cJSON *e, gt_err *err)
{
    if (!cJSON_IsObject(e) || !has_num(e, "ppl", 1.0) || !has_str(e, "artifact_sha256"))
        return gt_err_set(err, "%s: quants.%s needs \"ppl\" (>= 1) and \"artifact_sha256\"", path,
                          q);
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(e, "greedy");
    if (g && !cJSON_IsArray(g))
        return gt_err_set(err, "%s: quants.%s.greedy must be an array", path, q);
    int i = 0;
    for (const cJSON *x = g ? g->child : NULL; x; x = x->next, i++) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(x, "tokens");
        if (!has_str(x, "prompt") || !cJSON_IsArray(t) || cJSON_GetArraySize(t) > 128)
            return gt_err_set(err, "%s: quants.%s.greedy[%d] needs \"prompt\" and \"tokens\" "
                                   "(at most 128)",
                              path, q, i);
        for (const cJSON *k = t->child; k; k = k->next)
            if (!cJSON_IsNumber(k) || k->valuedouble < 0)
                return gt_err_set(err, "%s: quants.%s.greedy[%d].tokens: not a token id", path,
                                  q, i);
    }
    return 0;
}

int gt_anchors_load(const gt_matrix *m, const gt_mx_model *md, cJSON **out, gt_err *err)
{
    *out = NULL;
    if (!md->anchors)
        return 0;
    char path[4096], *text = NULL;
    gt_matrix_resolve(m, md->anchors, path, sizeof path);
    if (read_file(path, &text, err) != 0)
        return gt_err_wrap(err, "model %s", md->id);
    cJSON *doc = cJSON_Parse(text);
    free(text);
    if (!cJSON_IsObject(doc)) {
        cJSON_Delete(doc);
        return gt_err_set(err, "model %s: %s is not a JSON object", md->id, path);
    }
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(doc, "model");
    const cJSON *quants = cJSON_GetObjectItemCaseSensitive(doc, "quants");
    int rc = -1;
    if (!cJSON_IsString(model) || strcmp(model->valuestring, md->id) != 0) {
        gt_err_set(err, "%s: \"model\" must be \"%s\", the matrix model naming it", path, md->id);
    } else if (!has_str(doc, "source") || !has_str(doc, "text") || !has_num(doc, "n_ctx", 8) ||
               !has_num(doc, "chunks", 1) || !has_num(doc, "ppl_rel_tol", 0) ||
               !cJSON_IsObject(quants)) {
        gt_err_set(err, "%s: needs \"source\", \"text\", \"n_ctx\" (>= 8), \"chunks\" (>= 1), "
                        "\"ppl_rel_tol\" and \"quants\"",
                   path);
    } else {
        rc = 0;
        for (const cJSON *e = quants->child; e && rc == 0; e = e->next)
            rc = check_quant(path, e->string, e, err);
        /* Every quant the matrix runs this model at must be anchored. */
        const cJSON *mq = md->quants ? md->quants->child : NULL;
        int nq = md->quants ? cJSON_GetArraySize(md->quants) : m->n_quants;
        for (int i = 0; i < nq && rc == 0; i++, mq = mq ? mq->next : NULL) {
            const char *q = md->quants ? mq->valuestring : m->quants[i];
            if (!cJSON_GetObjectItemCaseSensitive(quants, q))
                rc = gt_err_set(err, "%s has no anchor for quant %s, which the matrix runs %s at "
                                     "(measure it: gauntlet anchors MATRIX %s --peer ...)",
                                path, q, md->id, md->id);
        }
    }
    if (rc != 0) {
        cJSON_Delete(doc);
        return -1;
    }
    *out = doc;
    return 0;
}

cJSON *gt_anchors_cell(const cJSON *file, const char *quant, gt_err *err)
{
    const cJSON *e =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(file, "quants"), quant);
    if (!e) {
        gt_err_set(err, "no anchor for quant %s", quant);
        return NULL;
    }
    cJSON *o = cJSON_CreateObject();
    for (const cJSON *k = file->child; k; k = k->next)
        if (strcmp(k->string, "quants") != 0)
            cJSON_AddItemToObject(o, k->string, cJSON_Duplicate(k, 1));
    for (const cJSON *k = e->child; k; k = k->next) {
        cJSON_DeleteItemFromObjectCaseSensitive(o, k->string);
        cJSON_AddItemToObject(o, k->string, cJSON_Duplicate(k, 1));
    }
    cJSON_AddStringToObject(o, "quant", quant);
    return o;
}

int gt_anchors_check_all(const gt_matrix *m, gt_err *err)
{
    for (int i = 0; i < m->n_models; i++) {
        cJSON *a;
        if (gt_anchors_load(m, &m->models[i], &a, err) != 0)
            return -1;
        cJSON_Delete(a);
    }
    return 0;
}
