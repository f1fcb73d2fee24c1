/* model_read.c: the readers every architecture's loader shares (model.c,
 * model_qwen3moe.c, ...): "<arch>.<key>" metadata and weights found by
 * name with their shape checked. Kept apart from model.c so that the
 * per-architecture files and model.c, which calls them, form no loop. */
#include "model_internal.h"

#include <stdio.h>

int gt_model_arch_int(const gt_gguf *g, const char *arch, const char *key, int64_t def,
                      int64_t *out, gt_err *err)
{
    char full[128];
    snprintf(full, sizeof full, "%s.%s", arch, key);
    int64_t i = gt_gguf_find_key(g, full);
    if (i < 0) {
        if (def < 0)
            return gt_err_set(err, "metadata key %s is missing", full);
        *out = def;
        return 0;
    }
    if (!gt_gguf_kv_int(g, i, out))
        return gt_err_set(err, "metadata key %s is a %s, expected an integer", full,
                          gt_gguf_vtype_name(gt_gguf_kv_type(g, i)));
    if (*out <= 0 || *out > (1 << 24))
        return gt_err_set(err, "metadata key %s = %lld is out of range", full, (long long)*out);
    return 0;
}

int gt_model_arch_float(const gt_gguf *g, const char *arch, const char *key, double def,
                        double *out, gt_err *err)
{
    char full[128];
    snprintf(full, sizeof full, "%s.%s", arch, key);
    int64_t i = gt_gguf_find_key(g, full);
    if (i < 0) {
        *out = def;
        return 0;
    }
    if (!gt_gguf_kv_float(g, i, out))
        return gt_err_set(err, "metadata key %s is a %s, expected a number", full,
                          gt_gguf_vtype_name(gt_gguf_kv_type(g, i)));
    return 0;
}

int gt_model_weight(const gt_gguf *g, const char *name, int64_t cols, int64_t rows,
                    int64_t planes, const gt_gguf_tensor **out, gt_err *err)
{
    const gt_gguf_tensor *t = gt_gguf_find_tensor(g, name);
    if (!t)
        return gt_err_set(err, "tensor %s is missing", name);
    int64_t want_dims = planes > 1 ? 3 : rows == 1 ? 1 : 2;
    if (t->ne[0] != cols || t->ne[1] != rows || t->ne[2] != planes || t->ne[3] != 1 ||
        (t->n_dims != want_dims && !(rows == 1 && planes == 1 && t->n_dims == 2)))
        return gt_err_set(err, "tensor %s has shape %lld x %lld x %lld x %lld, expected %lld x %lld x %lld",
                          name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                          (long long)t->ne[3], (long long)cols, (long long)rows,
                          (long long)planes);
    if (rows == 1 && planes == 1 && t->type != GT_TYPE_F32)
        return gt_err_set(err, "tensor %s is %s; norm weights must be f32", name,
                          gt_type_name(t->type));
    *out = t;
    return 0;
}

