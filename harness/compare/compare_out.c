/* compare_out.c: `gauntlet compare` results as JSON (for tools and tests)
 * and as a self-contained HTML page (the report's CSS, inline SVG).
 *
 * JSON: {"model", "model_name", "quant", "n_tokens", "seed",
 *        "a": {"backend", "driver"}, "b": {...},
 *        "prompts": [{"id", "prompt", "n_prompt_tokens",
 *                     "a": {"tokens", "text", "prefill_tps", "decode_tps"}, "b": {...},
 *                     "diverge_index" (-1 = identical), "diverge_a", "diverge_b"
 *                     (the token ids there, -1 = that side had ended),
 *                     "diverge_piece_a", "diverge_piece_b",
 *                     "kld" [per token of A], "kld_mean", "kld_max", "top1"}],
 *        "summary": {"prompts", "identical", "kld_mean", "kld_max", "top1",
 *                    "a_decode_tps", "b_decode_tps"}} */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "compare.h"
#include "report.h"

static cJSON *side(const gt_cmp_side_out *s)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *t = cJSON_AddArrayToObject(o, "tokens");
    for (int i = 0; i < s->n_tokens; i++)
        cJSON_AddItemToArray(t, cJSON_CreateNumber(s->tokens[i]));
    cJSON_AddStringToObject(o, "text", s->text ? s->text : "");
    cJSON_AddNumberToObject(o, "prefill_tps", s->prefill_tps);
    cJSON_AddNumberToObject(o, "decode_tps", s->decode_tps);
    return o;
}

typedef struct totals {
    int identical;
    double kld_sum, kld_max, top1_sum, a_tps, b_tps;
    int n_tok;
} totals;

static totals sum(const gt_cmp_report *r)
{
    totals t = {0};
    for (int i = 0; i < r->n; i++) {
        const gt_cmp_result *x = &r->results[i];
        t.identical += x->diverge < 0;
        for (int k = 0; k < x->a.n_tokens; k++)
            t.kld_sum += x->kld[k];
        t.n_tok += x->a.n_tokens;
        if (x->kld_max > t.kld_max)
            t.kld_max = x->kld_max;
        t.top1_sum += x->top1 * x->a.n_tokens;
        t.a_tps += x->a.decode_tps / r->n;
        t.b_tps += x->b.decode_tps / r->n;
    }
    return t;
}

int gt_cmp_write_json(const gt_cmp_report *r, FILE *f, gt_err *err)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "model", r->spec->model_path);
    cJSON_AddStringToObject(root, "model_name", gt_cmp_model_name(r->cmp));
    if (r->quant)
        cJSON_AddStringToObject(root, "quant", r->quant);
    else
        cJSON_AddNullToObject(root, "quant");
    cJSON_AddNumberToObject(root, "n_tokens", r->spec->n_tokens);
    cJSON_AddNumberToObject(root, "seed", (double)r->spec->seed);
    const char *bk[2] = {r->spec->backend_a, r->spec->backend_b};
    const char *dr[2] = {r->spec->driver_a, r->spec->driver_b};
    for (int s = 0; s < 2; s++) {
        cJSON *o = cJSON_AddObjectToObject(root, s ? "b" : "a");
        cJSON_AddStringToObject(o, "backend", bk[s]);
        if (dr[s])
            cJSON_AddStringToObject(o, "driver", dr[s]);
        else
            cJSON_AddNullToObject(o, "driver");
    }
    cJSON *ps = cJSON_AddArrayToObject(root, "prompts");
    char piece[256];
    for (int i = 0; i < r->n; i++) {
        const gt_cmp_result *x = &r->results[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "id", x->prompt->id);
        cJSON_AddStringToObject(o, "prompt", x->prompt->text);
        cJSON_AddNumberToObject(o, "n_prompt_tokens", x->n_prompt_tokens);
        cJSON_AddItemToObject(o, "a", side(&x->a));
        cJSON_AddItemToObject(o, "b", side(&x->b));
        cJSON_AddNumberToObject(o, "diverge_index", x->diverge);
        cJSON_AddNumberToObject(o, "diverge_a", x->diverge >= 0 ? x->div_a : -1);
        cJSON_AddNumberToObject(o, "diverge_b", x->diverge >= 0 ? x->div_b : -1);
        if (x->diverge >= 0) {
            gt_cmp_piece(r->cmp, x->div_a, piece, sizeof piece);
            cJSON_AddStringToObject(o, "diverge_piece_a", piece);
            gt_cmp_piece(r->cmp, x->div_b, piece, sizeof piece);
            cJSON_AddStringToObject(o, "diverge_piece_b", piece);
        }
        cJSON *k = cJSON_AddArrayToObject(o, "kld");
        for (int j = 0; j < x->a.n_tokens; j++)
            cJSON_AddItemToArray(k, cJSON_CreateNumber(x->kld[j]));
        cJSON_AddNumberToObject(o, "kld_mean", x->kld_mean);
        cJSON_AddNumberToObject(o, "kld_max", x->kld_max);
        cJSON_AddNumberToObject(o, "top1", x->top1);
        cJSON_AddItemToArray(ps, o);
    }
    totals t = sum(r);
    cJSON *s = cJSON_AddObjectToObject(root, "summary");
    cJSON_AddNumberToObject(s, "prompts", r->n);
    cJSON_AddNumberToObject(s, "identical", t.identical);
    cJSON_AddNumberToObject(s, "kld_mean", t.n_tok ? t.kld_sum / t.n_tok : 0);
    cJSON_AddNumberToObject(s, "kld_max", t.kld_max);
    cJSON_AddNumberToObject(s, "top1", t.n_tok ? t.top1_sum / t.n_tok : 0);
    cJSON_AddNumberToObject(s, "a_decode_tps", t.a_tps);
    cJSON_AddNumberToObject(s, "b_decode_tps", t.b_tps);
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text)
        return gt_err_set(err, "out of memory writing JSON");
    fputs(text, f);
    fputc('\n', f);
    free(text);
    return 0;
}

/* The generated text with the tokens from the divergence on marked. */
static void html_text(FILE *f, gt_cmp *c, const gt_cmp_side_out *s, int diverge)
{
    char piece[256];
    fputs("<pre>", f);
    for (int i = 0; i < s->n_tokens; i++) {
        if (i == diverge)
            fputs("<mark>", f);
        gt_cmp_piece(c, s->tokens[i], piece, sizeof piece);
        gt_report_esc(f, piece);
    }
    if (diverge >= 0 && diverge < s->n_tokens)
        fputs("</mark>", f);
    fputs("</pre>", f);
}

/* Per-token KL as a bar strip: one bar per token of A, the divergence
 * marked with a line. Log scale would hide the zeros that matter; linear to
 * the run's max with the max printed. */
static void kld_strip(FILE *f, const gt_cmp_result *x, double max)
{
    const int bw = 8, h = 40, n = x->a.n_tokens, w = n * bw + 2;
    fprintf(f, "<svg class=\"chart\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "xmlns=\"http://www.w3.org/2000/svg\" role=\"img\"><title>per-token KL(A||B)"
               "</title><line class=\"axis\" x1=\"0\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>",
            w, h + 2, w, h + 2, h, w, h);
    for (int i = 0; i < n; i++) {
        double frac = max > 0 ? x->kld[i] / max : 0;
        fprintf(f, "<rect class=\"bar2\" x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%.1f\">"
                   "<title>token %d: %.3g nats</title></rect>",
                i * bw + 1, h - frac * (h - 2), bw - 2, frac * (h - 2), i, x->kld[i]);
    }
    if (x->diverge >= 0 && x->diverge < n)
        fprintf(f, "<line x1=\"%d\" y1=\"0\" x2=\"%d\" y2=\"%d\" style=\"stroke:#D55E00;"
                   "stroke-width:2\"/>",
                x->diverge * bw, x->diverge * bw, h);
    fputs("</svg>", f);
}

int gt_cmp_write_html(const gt_cmp_report *r, FILE *f, gt_err *err)
{
    (void)err;
    totals t = sum(r);
    fputs("<!DOCTYPE html>\n<html lang=\"en\" xmlns=\"http://www.w3.org/1999/xhtml\"><head>"
          "<meta charset=\"utf-8\"/><title>gauntlet compare</title><style>\n",
          f);
    fputs(gt_html_css, f);
    fputs("mark{background:#fadac6;outline:1px solid #D55E00}table.side td{width:50%}"
          "</style></head><body>\n<header class=\"top\"><div class=\"title\"><h1>Compare: ",
          f);
    gt_report_esc(f, r->label_a);
    fputs(" vs ", f);
    gt_report_esc(f, r->label_b);
    fputs("</h1><div class=\"sub\">model <span class=\"mono\">", f);
    gt_report_esc(f, r->spec->model_path);
    fputs("</span> (", f);
    gt_report_esc(f, gt_cmp_model_name(r->cmp));
    fprintf(f, ")%s", r->quant ? ", quantized to " : "");
    if (r->quant)
        gt_report_esc(f, r->quant);
    fprintf(f, " &#183; greedy, %d tokens per prompt &#183; %d prompts, %d identical</div></div>"
               "</header>\n",
            r->spec->n_tokens, r->n, t.identical);
    char piece_a[256], piece_b[256];
    for (int i = 0; i < r->n; i++) {
        const gt_cmp_result *x = &r->results[i];
        fputs("<section><h2 class=\"mono\">", f);
        gt_report_esc(f, x->prompt->id);
        fputs("</h2><p><b>Prompt:</b> ", f);
        gt_report_esc(f, x->prompt->text);
        fputs("</p>", f);
        if (x->diverge < 0) {
            fprintf(f, "<p class=\"callout good\">Identical over %d tokens.</p>", x->a.n_tokens);
        } else {
            gt_cmp_piece(r->cmp, x->div_a, piece_a, sizeof piece_a);
            gt_cmp_piece(r->cmp, x->div_b, piece_b, sizeof piece_b);
            fprintf(f, "<p class=\"callout\">First divergence at generated token %d: A %d "
                       "<code>",
                    x->diverge, x->div_a);
            gt_report_esc(f, piece_a);
            fprintf(f, "</code> vs B %d <code>", x->div_b);
            gt_report_esc(f, piece_b);
            fputs("</code></p>", f);
        }
        fputs("<table class=\"side\"><thead><tr><th>A: ", f);
        gt_report_esc(f, r->label_a);
        fprintf(f, " (%.1f tok/s)</th><th>B: ", x->a.decode_tps);
        gt_report_esc(f, r->label_b);
        fprintf(f, " (%.1f tok/s)</th></tr></thead><tbody><tr><td>", x->b.decode_tps);
        html_text(f, r->cmp, &x->a, x->diverge);
        fputs("</td><td>", f);
        html_text(f, r->cmp, &x->b, x->diverge);
        fprintf(f, "</td></tr></tbody></table><p>KL(A&#8214;B) per token of A, teacher-forced: "
                   "mean %.3g, max %.3g nats (token %d); top-1 agreement %.1f%%.</p>",
                x->kld_mean, x->kld_max, x->kld_argmax, 100 * x->top1);
        kld_strip(f, x, t.kld_max);
        fputs("</section>\n", f);
    }
    fputs("<section><h2>Summary</h2><table class=\"sortable\"><thead><tr><th>prompt</th>"
          "<th class=\"num\">diverges at</th><th class=\"num\">KL mean</th>"
          "<th class=\"num\">KL max</th><th class=\"num\">top-1</th>"
          "<th class=\"num\">A tok/s</th><th class=\"num\">B tok/s</th></tr></thead><tbody>\n",
          f);
    for (int i = 0; i < r->n; i++) {
        const gt_cmp_result *x = &r->results[i];
        fputs("<tr><td class=\"mono\">", f);
        gt_report_esc(f, x->prompt->id);
        if (x->diverge >= 0)
            fprintf(f, "</td><td class=\"num\">%d</td>", x->diverge);
        else
            fputs("</td><td class=\"num\" data-v=\"1e9\">identical</td>", f);
        fprintf(f, "<td class=\"num\">%.3g</td><td class=\"num\">%.3g</td><td class=\"num\">"
                   "%.1f%%</td><td class=\"num\">%.1f</td><td class=\"num\">%.1f</td></tr>\n",
                x->kld_mean, x->kld_max, 100 * x->top1, x->a.decode_tps, x->b.decode_tps);
    }
    fprintf(f, "</tbody></table><p>All prompts: KL mean %.3g, max %.3g nats; top-1 agreement "
               "%.1f%%; %d of %d identical.</p></section>\n<script>//<![CDATA[\n",
            t.n_tok ? t.kld_sum / t.n_tok : 0, t.kld_max, t.n_tok ? 100 * t.top1_sum / t.n_tok : 0,
            t.identical, r->n);
    fputs(gt_html_js, f);
    fputs("//]]></script>\n</body></html>\n", f);
    return 0;
}
