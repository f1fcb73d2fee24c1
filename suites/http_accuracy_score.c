/* http_accuracy_score.c: one scored position of the http accuracy suite,
 * a server's alternatives against the reference's (see http_accuracy.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "http_accuracy.h"

/* Below this the tail is rounding of the listed probabilities, not mass. */
#define TAIL_EPS 1e-9

void gt_ha_sum_init(gt_ha_sum *s)
{
    memset(s, 0, sizeof *s);
    s->alt_min = -1;
}

static void note_diff(gt_ha_sum *s, double d)
{
    if (!(d <= s->lp_max)) /* a NaN (no logprob) makes it NaN for good */
        s->lp_max = isnan(s->lp_max) ? s->lp_max : d;
}

void gt_ha_sum_add(gt_ha_sum *s, const gt_model *m, const gt_ha_ref *r, const gt_hc_alt *alt,
                   int n_alt, double correct_lp, int chunk, int pos)
{
    char piece[256];
    gt_hc_piece(m, r->argmax, piece, sizeof piece);
    bool same = n_alt > 0 && strcmp(alt[0].text, piece) == 0;
    s->agree += same;
    if (!same && !s->dis_msg[0]) {
        char qk[80], qp[80];
        gt_hc_quote(n_alt > 0 ? alt[0].text : "(none)", qk, sizeof qk);
        gt_hc_quote(piece, qp, sizeof qp);
        snprintf(s->dis_msg, sizeof s->dis_msg,
                 "; first disagreement at chunk %d position %d: server \"%s\", reference \"%s\"",
                 chunk, pos, qk, qp);
    }
    s->scored++;
    s->alt_min = s->alt_min < 0 || n_alt < s->alt_min ? n_alt : s->alt_min;
    s->alt_max = n_alt > s->alt_max ? n_alt : s->alt_max;

    /* Each server alternative matches at most one reference token. */
    bool used[64] = {false};
    int n_use = n_alt < 64 ? n_alt : 64;
    double p_in = 0, q_in = 0, kl = 0;
    for (int k = 0; k < GT_HA_TOPN && r->top_id[k] >= 0; k++) {
        gt_hc_piece(m, r->top_id[k], piece, sizeof piece);
        int a = -1;
        for (int i = 0; i < n_use && a < 0; i++)
            if (!used[i] && strcmp(alt[i].text, piece) == 0)
                a = i;
        if (a < 0)
            continue;
        used[a] = true;
        double lp = r->top_lp[k], lq = alt[a].lp;
        p_in += exp(lp);
        q_in += exp(lq);
        kl += exp(lp) * (lp - lq);
        note_diff(s, fabs(lp - lq));
        if (r->correct >= 0 && r->top_id[k] == r->correct && isnan(correct_lp))
            correct_lp = lq;
    }
    double p_tail = 1.0 - p_in, q_tail = 1.0 - q_in;
    if (p_tail > TAIL_EPS)
        kl += p_tail * log(p_tail / (q_tail > TAIL_EPS ? q_tail : TAIL_EPS));
    kl = kl > 0 ? kl : 0;
    s->kld_sum += kl;
    s->kld_max = kl > s->kld_max ? kl : s->kld_max;

    if (r->correct < 0) /* a chat cell's reference: no eval token */
        return;
    if (isnan(correct_lp)) {
        gt_hc_piece(m, r->correct, piece, sizeof piece);
        for (int i = 0; i < n_use && isnan(correct_lp); i++)
            if (strcmp(alt[i].text, piece) == 0)
                correct_lp = alt[i].lp;
    }
    if (!isnan(correct_lp)) {
        s->nll_n++;
        s->nll_srv -= correct_lp;
        s->nll_ref -= r->lp;
        note_diff(s, fabs(correct_lp - r->lp));
    }
}
