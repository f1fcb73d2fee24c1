/* report_fmt.c: what every writer shares: status order and icons, metric
 * labels and kinds (accuracy, throughput, latency), times and numbers as
 * the reports print them. */
#include "report.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

int gt_report_severity(const char *status)
{
    static const char *const order[] = {"pass", "skip", "xfail", "pending", "xpass",
                                        "fail", "error", "timeout", "crash"};
    for (int i = 0; i < (int)(sizeof order / sizeof order[0]); i++)
        if (strcmp(status, order[i]) == 0)
            return i;
    return 3;
}

bool gt_report_is_bad(const char *s)
{
    return !strcmp(s, "fail") || !strcmp(s, "error") || !strcmp(s, "crash") ||
           !strcmp(s, "timeout") || !strcmp(s, "xpass");
}

const char *gt_report_icon(const char *s)
{
    static const char *const map[][2] = {
        {"pass", "\u2713"},    {"fail", "\u2717"},    {"xfail", "\u2298"},
        {"xpass", "\u203C"},   {"skip", "\u2013"},    {"error", "!"},
        {"crash", "\u2620"},   {"timeout", "\u25F7"}, {"pending", "\u2026"}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(s, map[i][0]))
            return map[i][1];
    return "?";
}

void gt_report_metric_label(const gt_rep_metric *m, char *out, size_t cap)
{
    size_t n = strlen(m->suite);
    if (!m->suite[0] || (strncmp(m->name, m->suite, n) == 0 && m->name[n] == '.'))
        snprintf(out, cap, "%s", m->name);
    else
        snprintf(out, cap, "%s.%s", m->suite, m->name);
}

void gt_report_time(double t, char *out, size_t cap)
{
    if (t <= 0) {
        snprintf(out, cap, "-");
        return;
    }
    time_t s = (time_t)t;
    struct tm tm;
    gmtime_r(&s, &tm);
    strftime(out, cap, "%Y-%m-%d %H:%M:%S UTC", &tm);
}

void gt_report_num(double v, char *out, size_t cap)
{
    if (isnan(v))
        snprintf(out, cap, "NaN");
    else if (isinf(v))
        snprintf(out, cap, v > 0 ? "inf" : "-inf");
    else if (v == 0)
        snprintf(out, cap, "0");
    else if (v == floor(v) && fabs(v) < 1e9)
        snprintf(out, cap, "%.0f", v); /* counts, token positions, bytes */
    else if (fabs(v) >= 1e6 || fabs(v) < 1e-3)
        snprintf(out, cap, "%.4g", v);
    else if (fabs(v) >= 10)
        snprintf(out, cap, "%.1f", v);
    else if (fabs(v) >= 1)
        snprintf(out, cap, "%.2f", v);
    else
        snprintf(out, cap, "%.4g", v);
}

static bool has(const char *s, const char *needle) { return strstr(s, needle) != NULL; }

bool gt_report_is_accuracy(const gt_rep_metric *m)
{
    char l[256];
    gt_report_metric_label(m, l, sizeof l);
    return !strcmp(m->suite, "accuracy") || has(l, "kld") || has(l, "kl_") ||
           has(l, "top1") || has(l, "agreement") || has(l, "nmse") || has(l, "ppl");
}

int gt_report_perf_kind(const gt_rep_metric *m)
{
    const char *n = m->name;
    bool tps = has(n, "tps") || has(n, "tok_s") || has(m->unit, "tok/s");
    if (!tps)
        return 0;
    if (has(n, "prefill") || has(n, "pp"))
        return 1;
    if (has(n, "decode") || has(n, "tg") || has(n, "gen"))
        return 2;
    return 0;
}

bool gt_report_is_latency(const gt_rep_metric *m)
{
    const char *n = m->name;
    if (gt_report_is_accuracy(m))
        return false; /* kld_p99 is a percentile, not a latency */
    return has(n, "latency") || has(n, "ttft") || has(n, "first_token") ||
           ((has(n, "_p50") || has(n, "_p90") || has(n, "_p99")) &&
            (has(m->unit, "ms") || has(m->unit, "s")));
}
