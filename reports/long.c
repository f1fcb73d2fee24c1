/* long.c: the long suite's checks read back from what it recorded.
 *
 * The long suite (suites/long.c) reports each passkey, drift checkpoint and
 * K/V measurement as a check whose message has a fixed format (below, and
 * in report.h). The report shows them as tables, so it parses them here,
 * in one place, rather than storing a second copy of the same facts. A
 * message that does not parse is not an error: the cell's plain check table
 * still shows it verbatim, and the long part leaves that row out.
 *
 *   passkey_L<L>_d<pct>  key 48213; cell: "<answer>" (found|missed);
 *                        reference: "<answer>" (found|missed)
 *   drift_L<L>           kld_mean 1.2e-06 kld_max 3.4e-05 top1 1.000 over
 *                        positions 3968..4095
 *   kv_L<L>              kv 12345678 bytes, plan 12345678 (ratio 1.000);
 *                        peak RSS 345.6 MiB
 * Answers are JSON string literals (the model's text may hold quotes,
 * newlines, anything). */
#include "report.h"

#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

/* The JSON string literal at p (p[0] == '"'), unescaped into out; returns
 * the character after its closing quote, or NULL. */
static const char *literal(const char *p, char *out, size_t cap)
{
    if (*p != '"')
        return NULL;
    const char *q = p + 1;
    while (*q && *q != '"')
        q += q[0] == '\\' && q[1] ? 2 : 1;
    if (*q != '"')
        return NULL;
    cJSON *s = cJSON_ParseWithLength(p, (size_t)(q + 1 - p));
    if (!cJSON_IsString(s)) {
        cJSON_Delete(s);
        return NULL;
    }
    snprintf(out, cap, "%s", s->valuestring);
    cJSON_Delete(s);
    return q + 1;
}

/* " (found)" or " (missed)" at p; returns what follows, or NULL. */
static const char *found(const char *p, bool *out)
{
    if (!strncmp(p, " (found)", 8)) {
        *out = true;
        return p + 8;
    }
    if (!strncmp(p, " (missed)", 9)) {
        *out = false;
        return p + 9;
    }
    return NULL;
}

static bool is_long(const gt_rep_check *k) { return k->suite && !strcmp(k->suite, "long"); }

int gt_report_passkey(const gt_rep_check *k, gt_rep_passkey *o)
{
    memset(o, 0, sizeof *o);
    int n = 0;
    if (!is_long(k) || !k->message ||
        sscanf(k->name, "passkey_L%d_d%d%n", &o->length, &o->depth_pct, &n) != 2 ||
        k->name[n] || sscanf(k->message, "key %15[^;]%n", o->key, &n) != 1)
        return -1;
    const char *p = k->message + n;
    if (strncmp(p, "; cell: ", 8) || !(p = literal(p + 8, o->cell, sizeof o->cell)) ||
        !(p = found(p, &o->cell_found)) || strncmp(p, "; reference: ", 13) ||
        !(p = literal(p + 13, o->ref, sizeof o->ref)) || !(p = found(p, &o->ref_found)))
        return -1;
    return 0;
}

int gt_report_kv(const gt_rep_check *k, gt_rep_kv *o)
{
    memset(o, 0, sizeof *o);
    int n = 0;
    if (!is_long(k) || !k->message || sscanf(k->name, "kv_L%d%n", &o->length, &n) != 1 ||
        k->name[n] ||
        sscanf(k->message, "kv %lf bytes, plan %lf (ratio %lf); peak RSS %lf MiB", &o->bytes,
               &o->plan, &o->ratio, &o->rss_mib) != 4)
        return -1;
    return 0;
}

int gt_report_drift(const gt_rep_check *k, gt_rep_drift *o)
{
    memset(o, 0, sizeof *o);
    int n = 0;
    if (!is_long(k) || !k->message || sscanf(k->name, "drift_L%d%n", &o->length, &n) != 1 ||
        k->name[n] ||
        sscanf(k->message, "kld_mean %lf kld_max %lf top1 %lf over positions %d..%d",
               &o->kld_mean, &o->kld_max, &o->top1, &o->from, &o->to) != 5)
        return -1;
    return 0;
}

bool gt_report_has_long(const gt_rep_cell *c)
{
    for (int i = 0; i < c->n_checks; i++)
        if (is_long(&c->checks[i]))
            return true;
    for (int i = 0; i < c->n_points; i++)
        if (!strcmp(c->points[i].suite, "long"))
            return true;
    return false;
}
