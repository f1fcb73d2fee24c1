/* http_anchor.c: the anchor suite against a server (anchor.c). Over the API
 * a server returns text and a few log-probabilities, not every position's
 * logits, so llama-perplexity's perplexity cannot be recomputed: that check
 * is reported as a skip saying so, and the greedy anchors are checked on the
 * completions endpoint (raw text, temperature 0), the way llama.cpp's were
 * measured, also for a chat cell: the anchor is about the model served. */
#include <stdio.h>
#include <string.h>

#include "http_common.h"

int gt_anchor_run_http(gt_suite_ctx *c, gt_err *err)
{
    gt_hc t;
    gt_model *m;
    if (!c->anchor)
        return gt_err_set(err, "the anchor suite runs only for a model with anchors");
    if (gt_hc_open_model(c, &t, &m, err) != 0)
        return -1;
    t.chat = false;
    gt_suite_result(c, "ppl", GT_ST_SKIP,
                    "unsupported: perplexity needs every position's logits, which the API does "
                    "not return; the greedy anchors are checked");
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(c->anchor, "greedy");
    int idx = 0, n_ok = 0, n_tokens = 0;
    char bad[512] = "";
    for (const cJSON *g = list ? list->child : NULL; g; g = g->next, idx++) {
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(g, "prompt");
        const cJSON *want = cJSON_GetObjectItemCaseSensitive(g, "tokens");
        int n = cJSON_GetArraySize(want);
        int32_t ids[128];
        if (!cJSON_IsString(p) || !cJSON_IsArray(want) || n > 128)
            return gt_err_set(err, "greedy anchor %d lacks prompt or tokens (at most 128)", idx);
        if (n == 0) {
            n_ok++;
            continue;
        }
        int k = 0;
        for (const cJSON *w = want->child; w; w = w->next)
            ids[k++] = (int32_t)w->valuedouble;
        cJSON *req = gt_hc_request(&t, p->valuestring, n, 0.0);
        gt_hc_completion r;
        if (gt_hc_complete(&t, req, &r, err) != 0) {
            cJSON_Delete(req);
            return -1;
        }
        cJSON_Delete(req);
        int agree = gt_hc_agreement(&t, m, ids, n, r.text, r.finish);
        n_tokens += n;
        if (agree == n) {
            n_ok++;
        } else if (!bad[0]) {
            char got[160], exp[160];
            gt_hc_quote(r.text, got, sizeof got);
            const cJSON *txt = cJSON_GetObjectItemCaseSensitive(g, "text");
            gt_hc_quote(cJSON_IsString(txt) ? txt->valuestring : "?", exp, sizeof exp);
            snprintf(bad, sizeof bad, "prompt %d (\"%.40s\"): \"%s\" parts from llama.cpp's \"%s\" "
                                      "after %d of %d tokens",
                     idx, p->valuestring, got, exp, agree, n);
        }
        gt_hc_completion_free(&r);
    }
    if (bad[0])
        gt_suite_check(c, "greedy", false, "%d of %d prompts as llama.cpp; first miss: %s", n_ok,
                       idx, bad);
    else
        gt_suite_check(c, "greedy", idx > 0, "%d prompts, %d tokens, all as llama.cpp's greedy",
                       idx, n_tokens);
    return 0;
}
