/* tolerance.c: see tolerance.h. */
#include "tolerance.h"

#include <math.h>
#include <string.h>

static const char *const KEYS[] = {"max", "min", "eq", "note", NULL};

int gt_tol_validate(const gt_jv *v, const cJSON *spec, const char *path)
{
    if (gt_jv_object(v, spec, path, KEYS) != 0)
        return -1;
    int bounds = 0;
    double d;
    const char *note;
    for (int i = 0; i < 3; i++) {
        if (cJSON_GetObjectItemCaseSensitive(spec, KEYS[i])) {
            if (gt_jv_num(v, spec, path, KEYS[i], true, -HUGE_VAL, HUGE_VAL, &d) != 0)
                return -1;
            bounds++;
        }
    }
    if (gt_jv_str(v, spec, path, "note", false, &note) != 0)
        return -1;
    if (bounds != 1)
        return gt_jv_fail(v, path, "expected exactly one of \"max\", \"min\", \"eq\" (got %d)",
                          bounds);
    return 0;
}

gt_status gt_tol_eval(const cJSON *spec, double value, const char **comparator, double *tol)
{
    *comparator = "";
    *tol = NAN;
    if (!spec)
        return GT_ST_PENDING;
    const cJSON *n;
    if ((n = cJSON_GetObjectItemCaseSensitive(spec, "max"))) {
        *comparator = "<=";
        *tol = n->valuedouble;
        return value <= *tol ? GT_ST_PASS : GT_ST_FAIL;
    }
    if ((n = cJSON_GetObjectItemCaseSensitive(spec, "min"))) {
        *comparator = ">=";
        *tol = n->valuedouble;
        return value >= *tol ? GT_ST_PASS : GT_ST_FAIL;
    }
    if ((n = cJSON_GetObjectItemCaseSensitive(spec, "eq"))) {
        *comparator = "==";
        *tol = n->valuedouble;
        return value == *tol ? GT_ST_PASS : GT_ST_FAIL;
    }
    return GT_ST_PENDING;
}

double gt_tol_slack(const char *comparator, double bound, double worst, bool ratio_unit)
{
    if (strcmp(comparator, "<=") == 0)
        return bound / fmax(worst, GT_TOL_FLOOR);
    if (strcmp(comparator, ">=") == 0) {
        if (ratio_unit && bound <= 1)
            return (1 - bound) / fmax(1 - worst, GT_TOL_RATIO_FLOOR);
        return bound > 0 ? worst / bound : INFINITY;
    }
    return 1;
}

bool gt_tol_loose_noted(const cJSON *spec)
{
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(spec, "note");
    return cJSON_IsString(n) && strstr(n->valuestring, GT_TOL_LOOSE_MARKER) != NULL;
}
