/* model_read.c: the readers every architecture's loader uses (model.c,
 * model_qwen3moe.c, ...): "<arch>.<key>" metadata and weights found by
 * name with their shape checked, each recorded as used in the load running
 * on this thread (model.c then refuses what no reader used). They live apart
 * from model.c, which calls the architecture files, so that those files and
 * model.c form no call loop. */
#include "model_internal.h"

#include <stdio.h>

/* What the load running on this thread has read of its file. Loads are
 * synchronous, so a thread-local record reaches every reader without
 * changing their signatures; a reader called outside a load (or on another
 * file) records nothing. */
static _Thread_local gt_load_use *t_use;

void gt_model_use_set(gt_load_use *use) { t_use = use; }

static void note_key(const gt_gguf *g, int64_t i)
{
    if (t_use && t_use->g == g && i >= 0 && i < gt_gguf_n_kv(g))
        t_use->key_read[i] = 1;
}

static void note_tensor(const gt_gguf *g, const gt_gguf_tensor *t)
{
    if (t_use && t_use->g == g && t)
        t_use->tensor_used[t - gt_gguf_tensor_at(g, 0)] = 1;
}

/* The index of "<arch>.<key>" (-1 if absent), recorded as read. */
static int64_t arch_key(const gt_gguf *g, const char *arch, const char *key, char *full,
                        size_t cap)
{
    snprintf(full, cap, "%s.%s", arch, key);
    int64_t i = gt_gguf_find_key(g, full);
    note_key(g, i);
    return i;
}

int gt_model_arch_int(const gt_gguf *g, const char *arch, const char *key, int64_t def,
                      int64_t *out, gt_err *err)
{
    char full[128];
    int64_t i = arch_key(g, arch, key, full, sizeof full);
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
    int64_t i = arch_key(g, arch, key, full, sizeof full);
    if (i < 0) {
        *out = def;
        return 0;
    }
    if (!gt_gguf_kv_float(g, i, out))
        return gt_err_set(err, "metadata key %s is a %s, expected a number", full,
                          gt_gguf_vtype_name(gt_gguf_kv_type(g, i)));
    return 0;
}

int gt_model_arch_str(const gt_gguf *g, const char *arch, const char *key, const char *def,
                      const char **out, gt_err *err)
{
    char full[128];
    int64_t i = arch_key(g, arch, key, full, sizeof full);
    if (i < 0) {
        *out = def;
        return 0;
    }
    if (!(*out = gt_gguf_kv_str(g, i, NULL)))
        return gt_err_set(err, "metadata key %s is a %s, expected a string", full,
                          gt_gguf_vtype_name(gt_gguf_kv_type(g, i)));
    return 0;
}

/* Checks that t is planes of [rows x cols] (ne[0] = cols, ne[2] = planes;
 * planes 1: a 2-D matrix, or with rows 1 a 1-D f32 vector). */
static int check_shape(const gt_gguf_tensor *t, int64_t cols, int64_t rows, int64_t planes,
                       gt_err *err)
{
    int64_t want_dims = planes > 1 ? 3 : rows == 1 ? 1 : 2;
    if (t->ne[0] != cols || t->ne[1] != rows || t->ne[2] != planes || t->ne[3] != 1 ||
        (t->n_dims != want_dims && !(rows == 1 && planes == 1 && t->n_dims == 2))) {
        if (planes > 1)
            return gt_err_set(err, "tensor %s has shape %lld x %lld x %lld x %lld, expected "
                              "%lld x %lld x %lld", t->name, (long long)t->ne[0],
                              (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3],
                              (long long)cols, (long long)rows, (long long)planes);
        return gt_err_set(err, "tensor %s has shape %lld x %lld x %lld x %lld, expected %lld x %lld",
                          t->name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                          (long long)t->ne[3], (long long)cols, (long long)rows);
    }
    if (rows == 1 && planes == 1 && t->type != GT_TYPE_F32)
        return gt_err_set(err, "tensor %s is %s; norm weights must be f32", t->name,
                          gt_type_name(t->type));
    return 0;
}

int gt_model_weight_opt(const gt_gguf *g, const char *name, int64_t cols, int64_t rows,
                        const gt_gguf_tensor **out, gt_err *err)
{
    const gt_gguf_tensor *t = gt_gguf_find_tensor(g, name);
    *out = NULL;
    if (!t)
        return 0;
    if (check_shape(t, cols, rows, 1, err))
        return -1;
    note_tensor(g, t);
    *out = t;
    return 0;
}

int gt_model_weight(const gt_gguf *g, const char *name, int64_t cols, int64_t rows,
                    const gt_gguf_tensor **out, gt_err *err)
{
    if (gt_model_weight_opt(g, name, cols, rows, out, err))
        return -1;
    if (!*out)
        return gt_err_set(err, "tensor %s is missing", name);
    return 0;
}

int gt_model_weight3(const gt_gguf *g, const char *name, int64_t cols, int64_t rows,
                     int64_t planes, const gt_gguf_tensor **out, gt_err *err)
{
    const gt_gguf_tensor *t = gt_gguf_find_tensor(g, name);
    *out = NULL;
    if (!t)
        return gt_err_set(err, "tensor %s is missing", name);
    if (check_shape(t, cols, rows, planes, err))
        return -1;
    note_tensor(g, t);
    *out = t;
    return 0;
}
