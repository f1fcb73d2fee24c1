/* suite_table.c: which suites exist, in the order a tier usually runs them,
 * and which of them can also judge a server through its API. The only file
 * that names every suite; the matrix parser and the worker find suites here. */
#include "suite.h"

#include <string.h>

#include "http_common.h"

extern const gt_suite gt_suite_anchor;
extern const gt_suite gt_suite_smoke;
extern const gt_suite gt_suite_functional;
extern const gt_suite gt_suite_accuracy;
extern const gt_suite gt_suite_performance;
extern const gt_suite gt_suite_soak;
extern const gt_suite gt_suite_long;
extern const gt_suite gt_suite_structured;

/* Every suite the harness knows, in the order a tier usually runs them. */
static const gt_suite *const SUITES[] = {
    &gt_suite_anchor,
    &gt_suite_smoke,
    &gt_suite_functional,
    &gt_suite_accuracy,
    &gt_suite_performance,
    &gt_suite_soak,
    &gt_suite_long,
    &gt_suite_structured,
};

/* The http variant of each suite that has one (suites/http_<suite>.c). It is
 * bound here rather than in the suite's definition so that calls run one
 * way: table -> http_<suite>.c -> <suite>.c's shared rules -> suite.c. */
static const struct {
    const gt_suite *suite;
    gt_suite_run_fn run_http;
} HTTP_VARIANTS[] = {
    {&gt_suite_anchor, gt_anchor_run_http},
    {&gt_suite_smoke, gt_smoke_run_http},
    {&gt_suite_functional, gt_functional_run_http},
    {&gt_suite_accuracy, gt_accuracy_run_http},
    {&gt_suite_performance, gt_performance_run_http},
    {&gt_suite_structured, gt_structured_run_http},
};

gt_suite_run_fn gt_suite_http_run(const gt_suite *s)
{
    for (size_t i = 0; i < sizeof HTTP_VARIANTS / sizeof HTTP_VARIANTS[0]; i++)
        if (HTTP_VARIANTS[i].suite == s)
            return HTTP_VARIANTS[i].run_http;
    return NULL;
}

int gt_suite_all(const gt_suite *const **out)
{
    *out = SUITES;
    return (int)(sizeof SUITES / sizeof SUITES[0]);
}

const gt_suite *gt_suite_find(const char *name)
{
    for (size_t i = 0; i < sizeof SUITES / sizeof SUITES[0]; i++)
        if (strcmp(SUITES[i]->name, name) == 0)
            return SUITES[i];
    return NULL;
}
