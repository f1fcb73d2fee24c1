/* json.c: the run as JSON for other tools (cJSON).
 *
 * Shape (stable; add keys, never rename):
 *   {"format": "gauntlet-report", "version": 1,
 *    "run": {id, run_key, matrix_name, matrix_sha256, tier, tool_version, git_sha,
 *            host, status, n_cells, started_at, finished_at,
 *            gate: {verdict: "pass"|"fail"|null, text}},
 *    "counts": {status: n},
 *    "devices": [{host, backend, driver_profile, name, kind, driver, driver_version,
 *                 memory, extra}],
 *    "parts": [{shard_index, shard_count, host, tool_version, git_sha, argv, status,
 *               started_at, finished_at}],
 *    "artifacts": [{id, model, quant, kind, arch, file, path, sha256, size, source,
 *                   license, derivation, parent (an id or null)}],
 *    "cells": [{cell_id, artifact (an artifacts id or null), model, quant, backend, driver, required, expected,
 *               expect_reason, status, raw_status, reason, device, host, attempts,
 *               started_at, finished_at, duration_s, log,
 *               checks: [{suite, name, status, message}],
 *               metrics: [{suite, name, value, unit, tolerance, comparator,
 *                          verdict, better, regress}],
 *               series: [{suite, name, x, y}] (gt_suite_point's, in the order sent;
 *                        the long suite's drift_kld, kv_bytes, ...)}],
 *    "baseline": {run_id, threshold_pct, changes: [{cell_id, kind, from, to}],
 *                 metrics: [{cell_id, suite, name, baseline, value, change_pct,
 *                            regression}]},       (only with a baseline)
 *    "history": {runs: [{id, run_key, started_at}] (oldest first),
 *                changed_since: [{cell_id, what, run_key, run_id, from, to}]}}
 *                                                 (only with --history; each cell
 *    then also has history: {statuses, decode_tps, drift_kld, top1}, one entry per run)
 * A NaN or missing value is null (JSON has no NaN). */
#include "report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "base.h"

static void num(cJSON *o, const char *k, double v, bool present)
{
    if (present && isfinite(v))
        cJSON_AddNumberToObject(o, k, v);
    else
        cJSON_AddNullToObject(o, k);
}

static cJSON *cell_json(const gt_rep_cell *c)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "cell_id", c->cell_id);
    cJSON_AddStringToObject(o, "model", c->model);
    cJSON_AddStringToObject(o, "quant", c->quant);
    cJSON_AddStringToObject(o, "backend", c->backend);
    cJSON_AddStringToObject(o, "driver", c->driver);
    cJSON_AddStringToObject(o, "settings", c->settings);
    cJSON_AddBoolToObject(o, "required", c->required);
    cJSON_AddStringToObject(o, "expected", c->expected);
    cJSON_AddStringToObject(o, "expect_reason", c->expect_reason);
    cJSON_AddStringToObject(o, "status", c->status);
    cJSON_AddStringToObject(o, "raw_status", c->raw_status);
    cJSON_AddStringToObject(o, "reason", c->reason);
    cJSON_AddStringToObject(o, "device", c->device);
    cJSON_AddStringToObject(o, "host", c->host);
    cJSON_AddNumberToObject(o, "attempts", c->attempts);
    num(o, "started_at", c->started_at, c->started_at > 0);
    num(o, "finished_at", c->finished_at, c->finished_at > 0);
    num(o, "duration_s", c->duration_s, true);
    cJSON_AddStringToObject(o, "log", c->log);
    cJSON *checks = cJSON_AddArrayToObject(o, "checks");
    for (int k = 0; k < c->n_checks; k++) {
        const gt_rep_check *x = &c->checks[k];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "suite", x->suite);
        cJSON_AddStringToObject(e, "name", x->name);
        cJSON_AddStringToObject(e, "status", x->status);
        cJSON_AddStringToObject(e, "message", x->message);
        cJSON_AddItemToArray(checks, e);
    }
    cJSON *metrics = cJSON_AddArrayToObject(o, "metrics");
    for (int k = 0; k < c->n_metrics; k++) {
        const gt_rep_metric *m = &c->metrics[k];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "suite", m->suite);
        cJSON_AddStringToObject(e, "name", m->name);
        num(e, "value", m->value, m->has_value);
        cJSON_AddStringToObject(e, "unit", m->unit);
        num(e, "tolerance", m->tolerance, m->has_tol);
        if (m->comparator[0])
            cJSON_AddStringToObject(e, "comparator", m->comparator);
        else
            cJSON_AddNullToObject(e, "comparator");
        cJSON_AddStringToObject(e, "verdict", m->verdict);
        cJSON_AddNumberToObject(e, "better", m->better);
        cJSON_AddBoolToObject(e, "regress", m->regress != 0);
        cJSON_AddItemToArray(metrics, e);
    }
    cJSON *series = cJSON_AddArrayToObject(o, "series");
    for (int k = 0; k < c->n_points; k++) {
        const gt_rep_point *p = &c->points[k];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "suite", p->suite);
        cJSON_AddStringToObject(e, "name", p->series);
        num(e, "x", p->x, true);
        num(e, "y", p->y, true);
        cJSON_AddItemToArray(series, e);
    }
    return o;
}

int gt_report_json(const gt_rep_run *r, const gt_rep_diff *d, FILE *f, gt_err *err)
{
    cJSON *root = cJSON_CreateObject();
    if (!root)
        return gt_err_set(err, "out of memory");
    cJSON_AddStringToObject(root, "format", "gauntlet-report");
    cJSON_AddNumberToObject(root, "version", 1);
    cJSON *run = cJSON_AddObjectToObject(root, "run");
    cJSON_AddNumberToObject(run, "id", (double)r->id);
    cJSON_AddStringToObject(run, "run_key", r->run_key);
    cJSON_AddStringToObject(run, "matrix_name", r->matrix_name);
    cJSON_AddStringToObject(run, "matrix_sha256", r->matrix_sha256);
    cJSON_AddStringToObject(run, "tier", r->tier);
    cJSON_AddStringToObject(run, "tool_version", r->tool_version);
    cJSON_AddStringToObject(run, "git_sha", r->git_sha);
    cJSON_AddStringToObject(run, "host", r->host);
    cJSON_AddStringToObject(run, "status", r->status);
    cJSON_AddNumberToObject(run, "n_cells", r->n_cells);
    num(run, "started_at", r->started_at, r->started_at > 0);
    num(run, "finished_at", r->finished_at, r->finished_at > 0);
    cJSON *gate = cJSON_AddObjectToObject(run, "gate");
    if (r->gate < 0)
        cJSON_AddNullToObject(gate, "verdict");
    else
        cJSON_AddStringToObject(gate, "verdict", r->gate == 0 ? "pass" : "fail");
    cJSON_AddStringToObject(gate, "text", r->gate_text);
    cJSON *counts = cJSON_AddObjectToObject(root, "counts");
    for (int s = 0; s < GT_ST_COUNT; s++)
        cJSON_AddNumberToObject(counts, gt_status_name(s), r->counts[s]);
    cJSON *devs = cJSON_AddArrayToObject(root, "devices");
    for (int i = 0; i < r->n_devices; i++) {
        const gt_rep_device *v = &r->devices[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "host", v->host);
        cJSON_AddStringToObject(e, "backend", v->backend);
        cJSON_AddStringToObject(e, "driver_profile", v->driver_profile);
        cJSON_AddStringToObject(e, "name", v->name);
        cJSON_AddStringToObject(e, "kind", v->kind);
        cJSON_AddStringToObject(e, "driver", v->driver);
        cJSON_AddStringToObject(e, "driver_version", v->driver_version);
        num(e, "memory", (double)v->memory, v->memory >= 0);
        cJSON_AddStringToObject(e, "extra", v->extra);
        cJSON_AddItemToArray(devs, e);
    }
    cJSON *parts = cJSON_AddArrayToObject(root, "parts");
    for (int i = 0; i < r->n_parts; i++) {
        const gt_rep_part *p = &r->parts[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "shard_index", p->shard_index);
        cJSON_AddNumberToObject(e, "shard_count", p->shard_count);
        cJSON_AddStringToObject(e, "host", p->host);
        cJSON_AddStringToObject(e, "tool_version", p->tool_version);
        cJSON_AddStringToObject(e, "git_sha", p->git_sha);
        cJSON_AddStringToObject(e, "argv", p->argv);
        cJSON_AddStringToObject(e, "status", p->status);
        num(e, "started_at", p->started_at, p->started_at > 0);
        num(e, "finished_at", p->finished_at, p->finished_at > 0);
        cJSON_AddItemToArray(parts, e);
    }
    cJSON *arts = cJSON_AddArrayToObject(root, "artifacts");
    for (int i = 0; i < r->n_artifacts; i++) {
        const gt_rep_artifact *a = &r->artifacts[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "id", i);
        cJSON_AddStringToObject(e, "model", a->model);
        cJSON_AddStringToObject(e, "quant", a->quant);
        cJSON_AddStringToObject(e, "kind", a->kind);
        cJSON_AddStringToObject(e, "arch", a->arch);
        cJSON_AddStringToObject(e, "file", a->file);
        cJSON_AddStringToObject(e, "path", a->path);
        cJSON_AddStringToObject(e, "sha256", a->sha256);
        num(e, "size", (double)a->size, a->size >= 0);
        cJSON_AddStringToObject(e, "source", a->source);
        cJSON_AddStringToObject(e, "license", a->license);
        cJSON_AddStringToObject(e, "derivation", a->derivation);
        if (a->parent >= 0)
            cJSON_AddNumberToObject(e, "parent", a->parent);
        else
            cJSON_AddNullToObject(e, "parent");
        cJSON_AddItemToArray(arts, e);
    }
    const gt_rep_history *h = r->hist;
    cJSON *cells = cJSON_AddArrayToObject(root, "cells");
    for (int i = 0; i < r->n; i++) {
        cJSON *c = cell_json(&r->cells[i]);
        if (r->cells[i].artifact >= 0)
            cJSON_AddNumberToObject(c, "artifact", r->cells[i].artifact);
        else
            cJSON_AddNullToObject(c, "artifact");
        if (h) {
            cJSON *o = cJSON_AddObjectToObject(c, "history");
            cJSON *sts = cJSON_AddArrayToObject(o, "statuses");
            for (int k = 0; k < h->n_runs; k++) {
                int st = h->status[(size_t)i * h->n_runs + k];
                cJSON_AddItemToArray(sts, st < 0 ? cJSON_CreateNull()
                                                 : cJSON_CreateString(gt_status_name(st)));
            }
            static const char *const keys[GT_HIST_NSERIES] = {"decode_tps", "drift_kld", "top1"};
            for (int s = 0; s < GT_HIST_NSERIES; s++) {
                cJSON *a = cJSON_AddArrayToObject(o, keys[s]);
                for (int k = 0; k < h->n_runs; k++) {
                    double v = h->series[((size_t)i * GT_HIST_NSERIES + s) * h->n_runs + k];
                    cJSON_AddItemToArray(a, isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull());
                }
            }
        }
        cJSON_AddItemToArray(cells, c);
    }
    if (h) {
        cJSON *o = cJSON_AddObjectToObject(root, "history");
        cJSON *runs = cJSON_AddArrayToObject(o, "runs");
        for (int k = 0; k < h->n_runs; k++) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddNumberToObject(e, "id", (double)h->run_ids[k]);
            cJSON_AddStringToObject(e, "run_key", h->run_keys[k]);
            num(e, "started_at", h->started_at[k], h->started_at[k] > 0);
            cJSON_AddItemToArray(runs, e);
        }
        cJSON *ch = cJSON_AddArrayToObject(o, "changed_since");
        for (int i = 0; i < h->n_changes; i++) {
            const gt_rep_hist_change *x = &h->changes[i];
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "cell_id", r->cells[x->cell].cell_id);
            cJSON_AddStringToObject(e, "what", x->series < 0 ? "status"
                                                             : gt_report_hist_series_name(x->series));
            cJSON_AddStringToObject(e, "run_key", h->run_keys[x->at]);
            cJSON_AddNumberToObject(e, "run_id", (double)h->run_ids[x->at]);
            if (x->series < 0) {
                cJSON_AddStringToObject(e, "from", x->from);
                cJSON_AddStringToObject(e, "to", x->to);
            } else {
                num(e, "from", x->before, true);
                num(e, "to", x->after, true);
            }
            cJSON_AddItemToArray(ch, e);
        }
    }
    if (d) {
        cJSON *b = cJSON_AddObjectToObject(root, "baseline");
        cJSON_AddNumberToObject(b, "run_id", (double)d->base->id);
        cJSON_AddStringToObject(b, "run_key", d->base->run_key);
        cJSON_AddNumberToObject(b, "threshold_pct", d->threshold_pct);
        cJSON *ch = cJSON_AddArrayToObject(b, "changes");
        for (int i = 0; i < d->n_status; i++) {
            const gt_rep_status_delta *s = &d->status[i];
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "cell_id", (s->cur ? s->cur : s->base)->cell_id);
            cJSON_AddStringToObject(e, "kind", gt_report_change_name(s->kind));
            if (s->base)
                cJSON_AddStringToObject(e, "from", s->base->status);
            else
                cJSON_AddNullToObject(e, "from");
            if (s->cur)
                cJSON_AddStringToObject(e, "to", s->cur->status);
            else
                cJSON_AddNullToObject(e, "to");
            cJSON_AddItemToArray(ch, e);
        }
        cJSON *ms = cJSON_AddArrayToObject(b, "metrics");
        for (int i = 0; i < d->n_perf; i++) {
            const gt_rep_metric_delta *m = &d->perf[i];
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "cell_id", m->cur->cell_id);
            cJSON_AddStringToObject(e, "suite", m->m->suite);
            cJSON_AddStringToObject(e, "name", m->m->name);
            cJSON_AddNumberToObject(e, "baseline", m->bm->value);
            cJSON_AddNumberToObject(e, "value", m->m->value);
            num(e, "change_pct", m->change_pct, true);
            cJSON_AddBoolToObject(e, "regression", m->regression);
            cJSON_AddItemToArray(ms, e);
        }
    }
    char *text = cJSON_PrintBuffered(root, 1 << 20, 1);
    cJSON_Delete(root);
    if (!text)
        return gt_err_set(err, "out of memory writing JSON");
    fputs(text, f);
    fputc('\n', f);
    free(text);
    return 0;
}
