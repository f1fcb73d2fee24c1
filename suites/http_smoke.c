/* http_smoke.c: the smoke suite against an OpenAI-compatible server.
 *
 * Does the server answer at all, and does it serve the matrix's model?
 *   health     GET {root}/health answers 200;
 *   models     GET {endpoint}/models lists a model (the served_model when
 *              the matrix names one);
 *   generate   a temperature-0 completion of n_tokens for each smoke prompt
 *              answers 200 with text (or stops at once with "stop");
 *   usage      usage.prompt_tokens equals the prompt's token count with the
 *              artifact's tokenizer (BOS included), and completion_tokens is
 *              max_tokens when finish_reason is "length", at most that when
 *              "stop";
 *   reference  the server's text against the reference backend's greedy
 *              tokens on the artifact (the smoke suite's cache entry): the
 *              fraction of tokens reproduced before the first divergence is
 *              metric ref_agreement (tolerance from the matrix, like the
 *              normal suite's), and the check fails below the setting
 *              min_ref_agreement (default 0.5): a server serving another
 *              model diverges at once. Setting "reference": false skips it.
 * The comparison is on text (see gt_hc_agreement), so servers that do not
 * return token ids are judged the same way. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gt/tokenizer.h"
#include "http_common.h"
#include "base.h"
#include "suite.h"

#define MAX_PROMPTS 64

int gt_smoke_run_http(gt_suite_ctx *c, gt_err *err)
{
    int n_tokens = (int)gt_suite_int(c, "n_tokens", 16);
    int n_ctx = (int)gt_suite_int(c, "n_ctx", 256);
    double min_agree = gt_suite_num(c, "min_ref_agreement", 0.5);
    if (n_tokens < 1 || n_tokens > 4096 || n_ctx < 8)
        return gt_err_set(err, "smoke settings: n_tokens must be 1..4096 and n_ctx >= 8");
    const char *prompts[MAX_PROMPTS];
    int n_prompts = gt_smoke_prompts(c, prompts, MAX_PROMPTS);
    if (n_prompts == 0)
        return gt_err_set(err, "smoke settings: prompts is empty");

    gt_hc t;
    if (gt_hc_open(c, false, &t, err) != 0)
        return -1;
    char url[600];
    snprintf(url, sizeof url, "%s/health", t.root);
    gt_http_reply r;
    gt_err e = {{0}};
    if (gt_http_get(url, 30, &r, &e) != 0) {
        gt_suite_check(c, "health", false, "%s", e.msg);
        return 0; /* nothing later can mean anything */
    }
    gt_suite_check(c, "health", r.status == 200, "GET %s: HTTP %ld", url, r.status);
    gt_http_reply_free(&r);

    gt_hc_url(&t, "/models", url, sizeof url);
    if (gt_http_get(url, 30, &r, &e) != 0) {
        gt_suite_check(c, "models", false, "%s", e.msg);
        return 0;
    }
    cJSON *mj = r.status == 200 ? cJSON_Parse(r.body) : NULL;
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(mj, "data"), *it;
    char ids[512] = "";
    bool listed = false;
    cJSON_ArrayForEach(it, data)
    {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "id");
        if (!cJSON_IsString(id))
            continue;
        if (!t.model[0])
            snprintf(t.model, sizeof t.model, "%s", id->valuestring);
        listed = listed || strcmp(t.model, id->valuestring) == 0;
        if (strlen(ids) + strlen(id->valuestring) + 4 < sizeof ids)
            snprintf(ids + strlen(ids), sizeof ids - strlen(ids), "%s%s", ids[0] ? ", " : "",
                     id->valuestring);
    }
    bool models_ok = r.status == 200 && listed;
    if (r.status != 200)
        gt_suite_check(c, "models", false, "GET %s: HTTP %ld: %.200s", url, r.status, r.body);
    else
        gt_suite_check(c, "models", models_ok, "GET %s lists [%s]; requests name \"%s\"%s", url,
                       ids, t.model, listed ? "" : ", which is not listed");
    cJSON_Delete(mj);
    gt_http_reply_free(&r);
    if (!models_ok)
        return 0;

    gt_model *m;
    gt_err lerr = {{0}};
    if (!gt_suite_check(c, "load", gt_suite_model(c, &m, &lerr) == 0, "%s",
                        lerr.msg[0] ? lerr.msg : c->model_path))
        return 0;

    char **texts = calloc((size_t)n_prompts, sizeof *texts);
    char (*finish)[32] = calloc((size_t)n_prompts, sizeof *finish);
    if (!texts || !finish) {
        free(texts);
        free(finish);
        return gt_err_set(err, "out of memory");
    }
    int done = 0, bad_usage = 0;
    char usage_msg[512] = "", gen_msg[600] = "";
    long n_prompt_tok = 0, n_gen_tok = 0;
    double t_total = 0;
    for (; done < n_prompts; done++) {
        cJSON *req = gt_hc_request(&t, prompts[done], n_tokens, 0);
        gt_hc_completion cr;
        int rc = req ? gt_hc_complete(&t, req, &cr, &e) : gt_err_set(&e, "out of memory");
        cJSON_Delete(req);
        if (rc != 0) {
            snprintf(gen_msg, sizeof gen_msg, "prompt %d: %s", done + 1, e.msg);
            break;
        }
        bool stopped = strcmp(cr.finish, "stop") == 0;
        if (!cr.text[0] && !stopped) {
            snprintf(gen_msg, sizeof gen_msg, "prompt %d: empty text, finish_reason \"%s\"",
                     done + 1, cr.finish);
            gt_hc_completion_free(&cr);
            break;
        }
        texts[done] = strdup(cr.text);
        snprintf(finish[done], sizeof finish[done], "%s", cr.finish);
        int local = gt_hc_prompt_ids(&t, m, prompts[done], NULL, 0, &lerr);
        bool ok_prompt = cr.prompt_tokens == local;
        bool ok_comp = stopped ? cr.completion_tokens >= 0 && cr.completion_tokens <= n_tokens
                               : cr.completion_tokens == n_tokens;
        if ((!ok_prompt || !ok_comp) && !bad_usage++)
            snprintf(usage_msg, sizeof usage_msg,
                     "prompt %d: usage prompt_tokens %d (the artifact's tokenizer: %d), "
                     "completion_tokens %d with finish_reason \"%s\" (max_tokens %d)",
                     done + 1, cr.prompt_tokens, local, cr.completion_tokens, cr.finish,
                     n_tokens);
        n_prompt_tok += cr.prompt_tokens > 0 ? cr.prompt_tokens : 0;
        n_gen_tok += cr.completion_tokens > 0 ? cr.completion_tokens : 0;
        t_total += cr.total_s;
        gt_hc_completion_free(&cr);
        if (!texts[done]) {
            free(texts);
            free(finish);
            return gt_err_set(err, "out of memory");
        }
    }
    if (done == n_prompts) {
        char q[200];
        gt_hc_quote(texts[0], q, sizeof q);
        gt_suite_check(c, "generate", true,
                       "%d prompts x %d tokens at temperature 0 in %.2f s; first: \"%s\"",
                       n_prompts, n_tokens, t_total, q);
        if (bad_usage)
            gt_suite_check(c, "usage", false, "%d of %d replies: %s", bad_usage, n_prompts,
                           usage_msg);
        else
            gt_suite_check(c, "usage", true,
                           "usage matches: %ld prompt tokens (as the artifact's tokenizer "
                           "counts), %ld completion tokens",
                           n_prompt_tok, n_gen_tok);
    } else {
        gt_suite_check(c, "generate", false, "%s", gen_msg);
    }

    if (done == n_prompts && gt_suite_bool(c, "reference", true)) {
        gt_sha256 h;
        gt_sha256_init(&h);
        for (int i = 0; i < n_prompts; i++)
            gt_sha256_update(&h, prompts[i], strlen(prompts[i]) + 1);
        char data_hash[65], settings[64];
        gt_sha256_final_hex(&h, data_hash);
        snprintf(settings, sizeof settings, "n_tokens=%d", n_tokens); /* as smoke.c */
        int32_t *ref = NULL;
        bool cached = false;
        if (gt_hc_ref_greedy(c, &t, m, "smoke-greedy", data_hash, settings, prompts, n_prompts,
                             n_tokens, n_ctx, &ref, &cached, &lerr) != 0) {
            gt_suite_result(c, "reference", GT_ST_ERROR, "%s", lerr.msg);
        } else {
            long same = 0, total = (long)n_prompts * n_tokens;
            int div_p = -1, div_k = 0;
            for (int p = 0; p < n_prompts; p++) {
                int k = gt_hc_agreement(&t, m, ref + (size_t)p * n_tokens, n_tokens, texts[p],
                                        finish[p]);
                same += k;
                if (k < n_tokens && div_p < 0)
                    div_p = p, div_k = k;
            }
            double agree = (double)same / (double)total;
            char detail[600] = "";
            if (div_p >= 0) {
                char piece[64], q[200], pq[80];
                gt_hc_piece(m, ref[(size_t)div_p * n_tokens + div_k], piece, sizeof piece);
                gt_hc_quote(piece, pq, sizeof pq);
                gt_hc_quote(texts[div_p], q, sizeof q);
                snprintf(detail, sizeof detail,
                         "; first divergence: prompt %d at token %d, where the reference "
                         "continues with \"%s\"; server text \"%s\"",
                         div_p + 1, div_k, pq, q);
            }
            gt_suite_check(c, "reference", agree >= min_agree,
                           "%s reference; %ld/%ld tokens agree (ref_agreement %.3f, "
                           "min_ref_agreement %.3g)%s",
                           cached ? "cached" : "computed", same, total, agree, min_agree, detail);
            gt_suite_metric(c, "ref_agreement", agree);
            free(ref);
        }
    }
    for (int i = 0; i < n_prompts; i++)
        free(texts[i]);
    free(texts);
    free(finish);
    return 0;
}
