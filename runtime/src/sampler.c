/* sampler.c: greedy and seeded stochastic sampling (see gt/sampler.h).
 *
 * The RNG is splitmix64, written out here, so that a seed means the same
 * sequence on every platform and libc. Candidates are sorted by logit with
 * ties broken by id, which keeps top-k/top-p deterministic too. */
#include "gt/sampler.h"

#include <math.h>
#include <stdlib.h>

typedef struct cand {
    int32_t id;
    float logit;
    double p;
} cand;

struct gt_sampler {
    gt_sampler_params p;
    int n_vocab;
    uint64_t state;
    cand *c; /* (n_vocab) */
};

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

gt_sampler *gt_sampler_new(const gt_sampler_params *p, int n_vocab)
{
    gt_sampler *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->p = *p;
    s->n_vocab = n_vocab;
    s->state = p->seed;
    s->c = malloc(sizeof *s->c * (size_t)n_vocab);
    if (!s->c) {
        free(s);
        return NULL;
    }
    return s;
}

void gt_sampler_free(gt_sampler *s)
{
    if (!s)
        return;
    free(s->c);
    free(s);
}

int32_t gt_argmax(const float *logits, int n)
{
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (logits[i] > logits[best])
            best = i;
    return best;
}

static int by_logit_desc(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->logit != y->logit)
        return x->logit > y->logit ? -1 : 1;
    return x->id < y->id ? -1 : 1;
}

int32_t gt_sampler_sample(gt_sampler *s, const float *logits)
{
    if (s->p.temperature <= 0.0f)
        return gt_argmax(logits, s->n_vocab);
    int n = s->n_vocab;
    for (int i = 0; i < n; i++)
        s->c[i] = (cand){i, logits[i], 0.0};
    qsort(s->c, (size_t)n, sizeof *s->c, by_logit_desc);
    if (s->p.top_k > 0 && s->p.top_k < n)
        n = s->p.top_k;
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        s->c[i].p = exp(((double)s->c[i].logit - s->c[0].logit) / s->p.temperature);
        sum += s->c[i].p;
    }
    if (s->p.top_p > 0.0f && s->p.top_p < 1.0f) {
        double acc = 0.0;
        int keep = n;
        for (int i = 0; i < n; i++) {
            acc += s->c[i].p / sum;
            if (acc >= s->p.top_p) {
                keep = i + 1;
                break;
            }
        }
        sum = 0.0;
        for (int i = 0; i < keep; i++)
            sum += s->c[i].p;
        n = keep;
    }
    /* 53 random bits -> uniform in [0, 1) */
    const double r = (double)(splitmix64(&s->state) >> 11) * (1.0 / 9007199254740992.0) * sum;
    double acc = 0.0;
    for (int i = 0; i < n; i++) {
        acc += s->c[i].p;
        if (r < acc)
            return s->c[i].id;
    }
    return s->c[n - 1].id;
}
