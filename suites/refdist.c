/* refdist.c: see refdist.h. Sums run in double and, where many small terms
 * are added, from the smallest up, so a 1e-6 tail is not lost in rounding. */
#include "refdist.h"

#include "metrics.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int gt_refdist_scratch_init(gt_refdist_scratch *s, int n)
{
    s->n = n;
    s->sorted = malloc((size_t)n * sizeof *s->sorted);
    s->tailq = malloc((size_t)n * sizeof *s->tailq);
    s->kept = calloc((size_t)n, 1);
    if (s->sorted && s->tailq && s->kept)
        return 0;
    gt_refdist_scratch_free(s);
    return -1;
}

void gt_refdist_scratch_free(gt_refdist_scratch *s)
{
    free(s->sorted);
    free(s->tailq);
    free(s->kept);
    memset(s, 0, sizeof *s);
}

static int by_logit_desc(const void *a, const void *b)
{
    const gt_refdist_entry *x = a, *y = b;
    if (x->logit != y->logit)
        return x->logit > y->logit ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static int by_value_asc(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int gt_refdist_summarize(const float *x, int n, int32_t correct, double tail_eps, int k_min,
                         int k_max, gt_refdist_scratch *s, gt_refdist_pos *h,
                         gt_refdist_entry *out)
{
    k_max = k_max < 1 ? 1 : k_max > n ? n : k_max;
    k_min = k_min < 1 ? 1 : k_min > k_max ? k_max : k_min;
    gt_refdist_entry *srt = s->sorted;
    for (int i = 0; i < n; i++)
        srt[i] = (gt_refdist_entry){i, x[i]};
    qsort(srt, (size_t)n, sizeof *srt, by_logit_desc);
    /* The same logsumexp the cell's log-probabilities get: the reference
     * scored against its own logits must give exactly 0. */
    double lse = gt_log_softmax(x, n, NULL);
    /* Keep tokens while the mass left out would exceed tail_eps; the kept
     * mass is summed from the top, which is fine for deciding where to cut
     * (the exact tail is summed afterwards, from the bottom). */
    int k = 0;
    double kept = 0;
    while (k < k_max && (k < k_min || 1 - kept > tail_eps)) {
        kept += exp((double)srt[k].logit - lse);
        k++;
    }
    double tail = 0;
    for (int i = n - 1; i >= k; i--)
        tail += exp((double)srt[i].logit - lse);
    memcpy(out, srt, (size_t)k * sizeof *out);
    *h = (gt_refdist_pos){.argmax = srt[0].id, .k = k, .logit_correct = x[correct], .lse = lse,
                          .tail = tail, .p_min = exp((double)srt[k - 1].logit - lse)};
    return k;
}

double gt_refdist_kl(const gt_refdist_pos *h, const gt_refdist_entry *e, const double *logq,
                     gt_refdist_scratch *s, double *gap)
{
    double kl = 0;
    for (int j = h->k - 1; j >= 0; j--) {
        double lp = (double)e[j].logit - h->lse;
        kl += exp(lp) * (lp - logq[e[j].id]);
    }
    *gap = 0;
    if (h->tail > 0 && h->k < s->n) {
        for (int j = 0; j < h->k; j++)
            s->kept[e[j].id] = 1;
        int m = 0;
        for (int i = 0; i < s->n; i++)
            if (!s->kept[i])
                s->tailq[m++] = logq[i];
        for (int j = 0; j < h->k; j++)
            s->kept[e[j].id] = 0;
        qsort(s->tailq, (size_t)m, sizeof *s->tailq, by_value_asc);
        double qt = 0;
        for (int i = 0; i < m; i++)
            qt += exp(s->tailq[i]);
        double lqt = qt > 1e-300 ? log(qt) : log(1e-300); /* Q put everything on the kept */
        double lower = h->tail * (log(h->tail) - lqt);
        /* The vertex: p_min on the least likely tail tokens under Q. */
        double upper = 0, left = h->tail;
        for (int i = 0; i < m && left > 0; i++) {
            double a = left < h->p_min ? left : h->p_min;
            upper += a * (log(a) - s->tailq[i]);
            left -= a;
        }
        kl += lower;
        *gap = upper > lower ? upper - lower : 0;
    }
    return kl > 0 ? kl : 0;
}
