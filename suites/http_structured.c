/* http_structured.c: the structured suite against a server (structured.h).
 *
 * Each case goes out as OpenAI's response_format {"type": "json_schema",
 * "json_schema": {"name", "strict": true, "schema"}} with temperature 0 and
 * max_tokens, on the cell's API (completions, or chat: the prompt as one
 * user turn). The answer must
 *   valid_<case>  end with finish_reason "stop" and validate (jsonschema);
 *   agreement     be the reference backend's constrained greedy answer on
 *                 the same prompt tokens (gt_hc_prompt_ids), byte for byte;
 *   stream        streamed, give the same text as without stream (first case).
 * Each malformed schema must be answered with a 4xx naming the problem
 * within the deadline (refuse_<case>); one that is only outside gauntlet's
 * subset may be followed instead (the answer validates). A server that
 * answers 200 with text the schema does not hold has ignored it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_common.h"
#include "structured.h"

/* A request's time limit for answers; refusals get refusal_deadline_ms. */
#define ANSWER_TIMEOUT_S GT_HC_TIMEOUT_S

static cJSON *request(const gt_hc *t, const gt_sc_case *k, int max_tokens, const char *prompt,
                      bool stream)
{
    cJSON *req = gt_hc_request(t, prompt, max_tokens, 0.0);
    cJSON *schema = cJSON_Parse(k->schema);
    if (!req || !schema) {
        cJSON_Delete(req);
        cJSON_Delete(schema);
        return NULL;
    }
    cJSON_AddNumberToObject(req, "seed", 1);
    if (stream)
        cJSON_AddBoolToObject(req, "stream", true);
    cJSON *rf = cJSON_AddObjectToObject(req, "response_format");
    cJSON_AddStringToObject(rf, "type", "json_schema");
    cJSON *js = cJSON_AddObjectToObject(rf, "json_schema");
    cJSON_AddStringToObject(js, "name", k->name);
    cJSON_AddBoolToObject(js, "strict", true);
    cJSON_AddItemToObject(js, "schema", schema);
    return req;
}

/* The text of a streamed answer (the events' text or delta.content joined);
 * malloc'ed, or NULL with why. */
static char *stream_text(const gt_hc *t, const gt_sc_case *k, int max_tokens, char *why,
                         size_t cap)
{
    cJSON *req = request(t, k, max_tokens, k->prompt, true);
    if (!req)
        return snprintf(why, cap, "out of memory"), NULL;
    char url[600];
    gt_hc_generate_url(t, url, sizeof url);
    gt_http_reply r;
    gt_err e = {{0}};
    const int rc = gt_http_post_json(url, req, 1, ANSWER_TIMEOUT_S, &r, &e);
    cJSON_Delete(req);
    if (rc != 0)
        return snprintf(why, cap, "%s", e.msg), NULL;
    char *text = NULL;
    size_t len = 0;
    if (r.status != 200) {
        snprintf(why, cap, "HTTP %ld: %.200s", r.status, r.body);
        goto out;
    }
    if (!r.done) {
        snprintf(why, cap, "the stream ended without [DONE] after %d events", r.n_events);
        goto out;
    }
    text = calloc(1, r.size + 1);
    for (char *line = r.body, *nl; text && line && *line; line = nl ? nl + 1 : NULL) {
        nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        cJSON *o = cJSON_Parse(line);
        const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(o, "choices"), 0);
        const cJSON *tx = cJSON_GetObjectItemCaseSensitive(
            t->chat ? cJSON_GetObjectItemCaseSensitive(ch, "delta") : ch,
            t->chat ? "content" : "text");
        if (!o || cJSON_GetObjectItemCaseSensitive(o, "error")) {
            snprintf(why, cap, "%s: %.160s", o ? "an error event" : "an event is not JSON", line);
            free(text);
            text = NULL;
        } else if (cJSON_IsString(tx)) {
            const size_t n = strlen(tx->valuestring);
            memcpy(text + len, tx->valuestring, n < r.size - len ? n : r.size - len);
            len += n < r.size - len ? n : r.size - len;
        }
        cJSON_Delete(o);
    }
out:
    gt_http_reply_free(&r);
    return text;
}

/* Each malformed schema: a 4xx naming the problem within the deadline; an
 * unsupported one (valid JSON Schema outside gauntlet's subset) may instead
 * be followed: a 200 whose answer is complete and validates. What no
 * server may do is answer 200 with text the schema does not hold. */
static int check_refusals(gt_suite_ctx *c, const gt_hc *t, const gt_sc_set *s, int max_tokens)
{
    const double deadline_ms = gt_suite_num(c, "refusal_deadline_ms", 2000);
    char url[600];
    gt_hc_generate_url(t, url, sizeof url);
    int refused = 0;
    for (int i = 0; i < s->n_malformed; i++) {
        const gt_sc_case *k = &s->malformed[i];
        char name[96];
        snprintf(name, sizeof name, "refuse_%s", k->name);
        cJSON *req = request(t, k, max_tokens, "Answer as JSON.\n", false);
        gt_http_reply r;
        gt_err e = {{0}};
        /* a server following an unsupported keyword needs the time of an answer */
        const double limit_s = k->unsupported ? ANSWER_TIMEOUT_S : deadline_ms / 1e3;
        const int rc = req ? gt_http_post_json(url, req, 0, limit_s, &r, &e)
                           : gt_err_set(&e, "out of memory");
        cJSON_Delete(req);
        if (rc != 0) {
            gt_suite_check(c, name, false, "no answer within %.0f ms: %s", limit_s * 1e3, e.msg);
            continue;
        }
        bool ok = false;
        char how[400];
        if (r.status >= 400 && r.status < 500) {
            const bool named = strstr(r.body, k->mentions) != NULL;
            ok = named && r.total_s * 1e3 <= deadline_ms;
            snprintf(how, sizeof how,
                     "HTTP %ld in %.0f ms (deadline %.0f), %snaming \"%s\": %.200s", r.status,
                     r.total_s * 1e3, deadline_ms, named ? "" : "NOT ", k->mentions, r.body);
        } else if (r.status == 200 && k->unsupported) {
            cJSON *o = cJSON_Parse(r.body);
            const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(o, "choices"), 0);
            const cJSON *msg = cJSON_GetObjectItemCaseSensitive(ch, "message");
            const cJSON *tx = t->chat ? cJSON_GetObjectItemCaseSensitive(msg, "content")
                                      : cJSON_GetObjectItemCaseSensitive(ch, "text");
            const cJSON *fr = cJSON_GetObjectItemCaseSensitive(ch, "finish_reason");
            char *doc = cJSON_IsString(tx) ? tx->valuestring : "";
            bool valid = false;
            char why[1][256];
            gt_err ve = {{0}};
            const bool stop = cJSON_IsString(fr) && !strcmp(fr->valuestring, "stop");
            if (stop && gt_sc_validate(c, k, 1, &doc, &valid, why, &ve) != 0)
                snprintf(why[0], sizeof why[0], "%s", ve.msg);
            ok = stop && valid;
            snprintf(how, sizeof how, "HTTP 200: %s: %.200s",
                     !stop ? "the answer did not end with finish_reason stop"
                     : valid ? "followed (the answer validates)"
                             : why[0],
                     doc);
            cJSON_Delete(o);
        } else {
            snprintf(how, sizeof how, "HTTP %ld (a 4xx naming \"%s\" expected)%s: %.200s", r.status,
                     k->mentions, r.status == 200 ? ", answered a schema no one can follow" : "",
                     r.body);
        }
        refused += ok;
        gt_suite_check(c, name, ok, "%s", how);
        gt_http_reply_free(&r);
    }
    return refused;
}

int gt_structured_run_http(gt_suite_ctx *c, gt_err *err)
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
    gt_hc t;
    gt_model *m = NULL;
    if (gt_hc_open_model(c, &t, &m, err) != 0)
        return -1;
    gt_sc_set s;
    if (gt_sc_load(c, &s, err) != 0)
        return -1;
    const int n = s.n_cases;
    int32_t *ids[GT_SC_MAX_CASES] = {0};
    int n_ids[GT_SC_MAX_CASES] = {0};
    gt_sc_answer ref[GT_SC_MAX_CASES] = {0};
    char *docs[GT_SC_MAX_CASES] = {0};
    bool complete[GT_SC_MAX_CASES] = {0};
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        n_ids[i] = gt_hc_prompt_ids(&t, m, s.cases[i].prompt, NULL, 0, err);
        if (n_ids[i] < 1 || !(ids[i] = malloc((size_t)n_ids[i] * sizeof *ids[i])))
            rc = n_ids[i] < 0 ? -1 : gt_err_set(err, "case %s: no prompt tokens", s.cases[i].name);
        else if (gt_hc_prompt_ids(&t, m, s.cases[i].prompt, ids[i], n_ids[i], err) < 0)
            rc = -1;
    }
    char url[600];
    gt_hc_generate_url(&t, url, sizeof url);
    for (int i = 0; i < n && rc == 0; i++) {
        cJSON *req = request(&t, &s.cases[i], max_tokens, s.cases[i].prompt, false);
        gt_hc_completion r = {0};
        gt_err e = {{0}};
        if (!req) {
            rc = gt_err_set(err, "out of memory");
        } else if (gt_hc_complete(&t, req, &r, &e) != 0) {
            /* the server's failure is this case's verdict, not the suite's */
            docs[i] = strdup("");
            char name[96];
            snprintf(name, sizeof name, "answer_%s", s.cases[i].name);
            gt_suite_check(c, name, false, "%s", e.msg);
        } else {
            docs[i] = strdup(r.text);
            complete[i] = strcmp(r.finish, "stop") == 0;
        }
        cJSON_Delete(req);
        gt_hc_completion_free(&r);
        if (rc == 0 && !docs[i])
            rc = gt_err_set(err, "out of memory");
    }
    bool cached = false;
    if (rc == 0)
        rc = gt_sc_reference(c, m, &s, ids, n_ids, max_tokens, NULL, ref, &cached, err);
    gt_sc_tally tally;
    if (rc == 0 && gt_sc_judge(c, m, &s, docs, complete, NULL, ref, &tally, err) != 0)
        rc = -1;
    if (rc == 0) {
        char swhy[300] = "";
        char *streamed = stream_text(&t, &s.cases[0], max_tokens, swhy, sizeof swhy);
        if (!streamed)
            gt_suite_check(c, "stream", false, "case %s streamed: %s", s.cases[0].name, swhy);
        else
            gt_suite_check(c, "stream", strcmp(streamed, docs[0]) == 0,
                           "case %s streamed: %.120s%s%.120s", s.cases[0].name, streamed,
                           strcmp(streamed, docs[0]) == 0 ? "" : " | without stream: ",
                           strcmp(streamed, docs[0]) == 0 ? "" : docs[0]);
        free(streamed);
        gt_suite_log(c, "structured: %d cases, reference %s", n, cached ? "cached" : "computed");
        const int n_refused = check_refusals(c, &t, &s, max_tokens);
        gt_sc_report_totals(c, n, &tally, s.n_malformed, n_refused);
    }
    for (int i = 0; i < n; i++) {
        free(ids[i]);
        free(docs[i]);
        free(ref[i].tokens);
    }
    gt_sc_free(&s);
    return rc;
}
