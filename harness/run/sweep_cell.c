/* sweep_cell.c: a failed settings cell runs the sweep by itself, as a
 * failed accuracy cell runs the localizer: the cell's verdict is made, this
 * names the setting to suspect (matrices/README.md, "Settings"). */
#include "sweep_cell.h"

#include <stdio.h>
#include <string.h>

#include "compare.h"

/* The cell's value of a setting its matrix names (spec "exec"), 0: none. */
static int setting(const cJSON *spec, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(spec, "exec"), key);
    return cJSON_IsNumber(v) ? (int)v->valuedouble : 0;
}

static const char *const KEYS[GT_SW_N_AXES] = {"n_batch", "n_parallel", "threads"};

bool gt_sweep_cell_wanted(const cJSON *spec, const gt_suite_ctx *ctx)
{
    if (ctx->n_failed == 0 || !ctx->backend || strcmp(ctx->backend_name, "reference") == 0 ||
        cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(spec, "localize")))
        return false;
    for (int a = 0; a < GT_SW_N_AXES; a++)
        if (setting(spec, KEYS[a]) > 0)
            return true;
    return false;
}

gt_status gt_sweep_cell_run(const cJSON *spec, gt_suite_ctx *ctx, char *msg, size_t cap)
{
    gt_sweep_spec sp;
    gt_sweep_defaults(&sp);
    for (int a = 0; a < GT_SW_N_AXES; a++) {
        const int own = setting(spec, KEYS[a]);
        if (own <= 0)
            continue;
        sp.swept[a] = true;
        bool have = false;
        for (int j = 0; j < sp.n_values[a]; j++)
            have |= sp.values[a][j] == own;
        if (!have && sp.n_values[a] < GT_SW_MAX_VALUES)
            sp.values[a][sp.n_values[a]++] = own;
    }
    sp.model_path = ctx->model_path;
    sp.backend = ctx->backend_name;
    sp.driver = ctx->driver;
    sp.prompt = GT_SWEEP_PROMPT;
    gt_sweep_grid g;
    gt_err err = {{0}};
    if (gt_sweep_run(&sp, &g, &err) != 0) {
        snprintf(msg, cap, "the sweep could not run: %s", err.msg);
        return GT_ST_ERROR;
    }
    gt_sweep_verdict v;
    gt_sweep_name(&g, &v);
    snprintf(msg, cap, "%s [gauntlet compare --sweep: %d settings, %d-token prompt, %.1f s]",
             v.text, g.n_cells, g.n_prompt, g.seconds);
    gt_sweep_grid_free(&g);
    return v.agrees ? GT_ST_PASS : GT_ST_FAIL;
}
