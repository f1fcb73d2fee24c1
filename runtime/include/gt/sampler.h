/* sampler.h: picking the next token from logits.
 *
 * temperature <= 0 is greedy (ties go to the lowest id). Otherwise: top-k
 * (0 = off), then temperature softmax, then top-p (1 = off), then a draw
 * from a seeded RNG, so the same seed and logits give the same token on
 * every machine. */
#ifndef GT_SAMPLER_H
#define GT_SAMPLER_H

#include <stdint.h>

typedef struct gt_sampler_params {
    float temperature;
    int top_k;
    float top_p;
    uint64_t seed;
} gt_sampler_params;

typedef struct gt_sampler gt_sampler;

gt_sampler *gt_sampler_new(const gt_sampler_params *p, int n_vocab);
void gt_sampler_free(gt_sampler *s);
int32_t gt_sampler_sample(gt_sampler *s, const float *logits);

/* The argmax with ties to the lowest id; used by greedy and by checks. */
int32_t gt_argmax(const float *logits, int n);

#endif
