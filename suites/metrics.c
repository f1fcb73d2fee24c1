/* metrics.c: see metrics.h. Everything accumulates in double: the sums run
 * over tens of thousands of terms whose sizes differ by e^40. */
#include "metrics.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

double gt_log_softmax(const float *x, int n, double *logp)
{
    double mx = -INFINITY;
    for (int i = 0; i < n; i++)
        if (x[i] > mx)
            mx = x[i];
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += exp((double)x[i] - mx);
    double lse = mx + log(sum);
    if (logp)
        for (int i = 0; i < n; i++)
            logp[i] = (double)x[i] - lse;
    return lse;
}

double gt_kl_div(const double *logp, const double *logq, int n)
{
    double kl = 0;
    for (int i = 0; i < n; i++) {
        double p = exp(logp[i]);
        if (p > 0)
            kl += p * (logp[i] - logq[i]);
    }
    return kl > 0 ? kl : 0;
}

double gt_kl_div_topk(const int32_t *ids, const double *logp, int k, double p_tail,
                      const double *logq)
{
    double kl = 0, qk = 0;
    for (int j = 0; j < k; j++) {
        double p = exp(logp[j]);
        qk += exp(logq[ids[j]]);
        if (p > 0)
            kl += p * (logp[j] - logq[ids[j]]);
    }
    if (p_tail > 1e-12) {
        double qt = 1 - qk;
        if (qt < 1e-300) /* Q put (numerically) everything on P's top k */
            qt = 1e-300;
        kl += p_tail * (log(p_tail) - log(qt));
    }
    return kl > 0 ? kl : 0;
}

double gt_nmse(const float *ref, const float *x, int n)
{
    double num = 0, den = 0;
    for (int i = 0; i < n; i++) {
        double d = (double)x[i] - ref[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    if (den == 0)
        return num == 0 ? 0 : INFINITY;
    return num / den;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double gt_percentile(double *v, int n, double q)
{
    if (n <= 0)
        return NAN;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    if (q <= 0)
        return v[0];
    if (q >= 1)
        return v[n - 1];
    double pos = q * (n - 1);
    int lo = (int)floor(pos);
    double f = pos - lo;
    return lo + 1 < n ? v[lo] + f * (v[lo + 1] - v[lo]) : v[lo];
}

double gt_median(double *v, int n) { return gt_percentile(v, n, 0.5); }

double gt_rel_spread(double *v, int n)
{
    if (n <= 0)
        return NAN;
    double med = gt_median(v, n); /* sorted now */
    double iqr = gt_percentile(v, n, 0.75) - gt_percentile(v, n, 0.25);
    return med != 0 ? iqr / fabs(med) : 0;
}

void gt_top_k(const float *x, int n, int k, int32_t *ids)
{
    /* Insertion into a sorted list of k: k is small (<= a few hundred)
     * against n, and most candidates fail the first comparison. */
    int have = 0;
    for (int i = 0; i < n; i++) {
        if (have == k && !(x[i] > x[ids[k - 1]]))
            continue;
        int j = have < k ? have++ : k - 1;
        while (j > 0 && x[i] > x[ids[j - 1]]) {
            ids[j] = ids[j - 1];
            j--;
        }
        ids[j] = i;
    }
}

uint64_t gt_rng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double gt_rng_uniform(uint64_t *state) { return (double)(gt_rng_next(state) >> 11) * 0x1.0p-53; }
