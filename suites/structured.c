/* structured.c: the structured suite: does schema-constrained decoding
 * work on this cell, and write what the reference writes?
 *
 * For each committed case (structured.h): compile the schema for the
 * model's vocabulary, generate the constrained greedy answer on the cell's
 * backend from the prompt (the model's BOS rule, no chat template), then
 *   valid_<case>  the document is complete and the validator accepts it;
 * and the answers' tokens must be the reference backend's, one for one
 * (metric ref_agreement, check "agreement" naming where they parted).
 * And for each malformed schema, refuse_<case>: compiling it fails, the
 * message names what is wrong, and the refusal comes back within the
 * deadline (a compiler that loops on a bad schema is as broken as one that
 * accepts it). Metrics valid_rate, ref_agreement and refused judge the
 * totals. The http variant (http_structured.c) asks a server the same. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "greedy.h"
#include "gt/constraint.h"
#include "gt/session.h"
#include "structured.h"

static const gt_metric_def METRICS[] = {
    {"valid_rate", "ratio", +1, false, "{\"min\": 1}",
     "cases whose constrained answer is complete and validates (jsonschema)"},
    {"ref_agreement", "ratio", +1, false, "{\"min\": 1}",
     "cases whose constrained greedy answer is the reference backend's, byte for byte"},
    {"refused", "ratio", +1, false, "{\"min\": 1}",
     "malformed schemas refused within the deadline, naming the problem (http: or, for a "
     "keyword outside gauntlet's subset, followed)"},
    {NULL},
};

static const gt_setting_def SETTINGS[] = {
    {"cells", GT_SET_STRINGS, "cell-id globs that run it (default all)"},
    {"cases", GT_SET_STR, "the cases file (default suites/data/structured.json)"},
    {"max_tokens", GT_SET_INT, "tokens an answer may take at most (default 320: the committed "
                               "cases complete within it even at a character per token)"},
    {"validator", GT_SET_STRINGS, "the validator's argv, given SCHEMA DOC pairs (default python3 "
                                  "suites/data/jsonschema_validate.py: the jsonschema package)"},
    {"refusal_deadline_ms", GT_SET_NUM, "a malformed schema is refused within this (default "
                                        "2000; http: the request's whole time)"},
    {NULL},
};

static void free_answers(gt_sc_answer *a, int n)
{
    for (int i = 0; i < n; i++)
        free(a[i].tokens);
}

/* The malformed schemas: each must fail to compile, naming what is wrong,
 * within the deadline. Returns how many were refused so. */
static int check_refusals(gt_suite_ctx *c, const gt_model *m, const gt_sc_set *s)
{
    const double deadline_ms = gt_suite_num(c, "refusal_deadline_ms", 2000);
    int refused = 0;
    for (int i = 0; i < s->n_malformed; i++) {
        const gt_sc_case *k = &s->malformed[i];
        gt_constraint *con = NULL;
        gt_err e = {{0}};
        const double t0 = gt_suite_now();
        const int rc = gt_constraint_from_schema(m, k->schema, &con, &e);
        const double ms = (gt_suite_now() - t0) * 1e3;
        gt_constraint_free(con);
        char name[96];
        snprintf(name, sizeof name, "refuse_%s", k->name);
        bool ok = rc != 0 && strstr(e.msg, k->mentions) && ms <= deadline_ms;
        refused += ok;
        if (rc == 0)
            gt_suite_check(c, name, false, "compiled a malformed schema (%s expected): %.160s",
                           k->mentions, k->schema);
        else
            gt_suite_check(c, name, ok, "refused in %.1f ms (deadline %.0f), naming \"%s\"%s: %s",
                           ms, deadline_ms, k->mentions,
                           strstr(e.msg, k->mentions) ? "" : " NOT", e.msg);
    }
    return refused;
}

static int structured_run(gt_suite_ctx *c, gt_err *err)
{
    if (!gt_suite_cell_selected(c)) {
        gt_suite_result(c, "structured", GT_ST_SKIP,
                        GT_SKIP_MATRIX ": cell %s is not in this tier's structured cells",
                        c->cell_id);
        return 0;
    }
    const int max_tokens = (int)gt_suite_int(c, "max_tokens", 320);
    if (max_tokens < 8 || max_tokens > 4096)
        return gt_err_set(err, "structured settings: max_tokens must be 8..4096");
    gt_model *m = NULL;
    if (gt_suite_model(c, &m, err) != 0)
        return -1;
    gt_sc_set s;
    if (gt_sc_load(c, &s, err) != 0)
        return -1;
    const int n = s.n_cases;
    int32_t *ids[GT_SC_MAX_CASES] = {0};
    int n_ids[GT_SC_MAX_CASES] = {0}, longest = 0;
    gt_sc_answer own[GT_SC_MAX_CASES] = {0}, ref[GT_SC_MAX_CASES] = {0};
    char *docs[GT_SC_MAX_CASES] = {0};
    gt_session *sess = NULL;
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        own[i].tokens = malloc((size_t)max_tokens * sizeof *own[i].tokens);
        ids[i] = malloc(1024 * sizeof *ids[i]);
        if (!own[i].tokens || !ids[i]) {
            rc = gt_err_set(err, "out of memory");
            break;
        }
        n_ids[i] = gt_greedy_tokenize(m, s.cases[i].prompt, ids[i], 1024, err);
        if (n_ids[i] < 1 || n_ids[i] > 1024)
            rc = n_ids[i] < 0 ? -1
                              : gt_err_set(err, "case %s: the prompt has %d tokens (1..1024)",
                                           s.cases[i].name, n_ids[i]);
        longest = n_ids[i] > longest ? n_ids[i] : longest;
    }
    gt_session_params sp = {.n_ctx = longest + max_tokens + 1};
    if (rc == 0 && gt_session_new(m, c->backend, &sp, &sess, err) != 0)
        rc = gt_err_wrap(err, "session on the cell's backend");
    for (int i = 0; i < n && rc == 0; i++) {
        gt_constraint *con = NULL;
        rc = gt_constraint_from_schema(m, s.cases[i].schema, &con, err);
        if (rc != 0)
            gt_err_wrap(err, "case %s (%s): the committed schema does not compile",
                        s.cases[i].name, s.path);
        else if ((rc = gt_sc_generate(sess, con, ids[i], n_ids[i], max_tokens, &own[i], err)))
            gt_err_wrap(err, "case %s", s.cases[i].name);
        gt_constraint_free(con);
        if (rc == 0 && !(docs[i] = gt_sc_text(m, own[i].tokens, own[i].n)))
            rc = gt_err_set(err, "out of memory");
    }
    gt_session_free(sess);
    bool cached = false;
    const bool is_ref = strcmp(c->backend_name, "reference") == 0;
    if (rc == 0)
        rc = gt_sc_reference(c, m, &s, ids, n_ids, max_tokens, is_ref ? own : NULL, ref,
                             &cached, err);
    bool complete[GT_SC_MAX_CASES] = {0};
    for (int i = 0; i < n; i++)
        complete[i] = own[i].complete;
    gt_sc_tally tally;
    if (rc == 0 && gt_sc_judge(c, m, &s, docs, complete, own, ref, &tally, err) != 0)
        rc = -1;
    if (rc == 0) {
        gt_suite_log(c, "structured: %d cases, reference %s", n, cached ? "cached" : "computed");
        const int n_refused = check_refusals(c, m, &s);
        gt_sc_report_totals(c, n, &tally, s.n_malformed, n_refused);
    }
    for (int i = 0; i < n; i++) {
        free(ids[i]);
        free(docs[i]);
    }
    free_answers(own, n);
    free_answers(ref, n);
    gt_sc_free(&s);
    return rc;
}

const gt_suite gt_suite_structured = {
    .name = "structured",
    .description = "schema-constrained greedy answers: complete, valid (jsonschema), the "
                   "reference's bytes; malformed schemas refused by name",
    .metrics = METRICS,
    .settings = SETTINGS,
    .run = structured_run,
};
