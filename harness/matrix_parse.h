/* matrix_parse.h: what the files of the matrix parser share (matrix.c,
 * matrix_http.c, matrix_expand.c); not for other users of matrix.h. */
#ifndef GT_MATRIX_PARSE_H
#define GT_MATRIX_PARSE_H

#include <cjson/cJSON.h>

#include "jsonv.h"
#include "matrix.h"

/* obj[key] as an identifier of 1-64 characters from [A-Za-z0-9._+-]. */
int gt_matrix_ident(const gt_jv *v, const cJSON *obj, const char *path, const char *key,
                    char out[65]);
/* {"backend": "http", ...} into b (matrix_http.c). */
int gt_matrix_parse_http(const gt_jv *v, const cJSON *node, const char *path, gt_mx_backend *b);
/* Every rule that names cells must match one (matrix_expand.c). */
int gt_matrix_check_rules(gt_matrix *m, const gt_jv *v);

#endif
