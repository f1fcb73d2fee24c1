/* matrix_parse.h: what the files of the matrix parser share (matrix.c,
 * matrix_http.c, matrix_expand.c); not for other users of matrix.h. */
#ifndef GT_MATRIX_PARSE_H
#define GT_MATRIX_PARSE_H

#include <cjson/cJSON.h>

#include "base.h"
#include "matrix.h"

/* {"backend": "http", ...} into b (matrix_http.c). */
int gt_matrix_parse_http(const gt_jv *v, const cJSON *node, const char *path, gt_mx_backend *b);
/* A "settings" object at path ({"n_batch": [...], "n_parallel": [...],
 * "threads": [...], "kv_type": [...]}, each key optional) into its cross
 * product of variants (matrix_settings.c); {} gives the one variant "". */
int gt_matrix_parse_settings(const gt_jv *v, const cJSON *node, const char *path,
                             gt_mx_setting **out, int *n);
/* The single variant of a backend without settings (id "", nothing set). */
int gt_matrix_no_settings(gt_mx_setting **out, int *n);

/* Every rule that names cells must match one (matrix_expand.c). */
int gt_matrix_check_rules(gt_matrix *m, const gt_jv *v);

#endif
