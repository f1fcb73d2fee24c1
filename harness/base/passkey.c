/* passkey.c: the passkey-retrieval prompt (see passkey.h). */
#include "passkey.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gt/tokenizer.h"

/* Neutral sentences that say nothing about keys or numbers, so that the
 * only number in the prompt is the key. */
static const char *const FILLER[] = {
    " The grass is green.",
    " The sky is blue.",
    " The sun is yellow.",
    " Here we go.",
    " There and back again.",
    " The river runs slowly past the old mill.",
    " A cat sleeps on the warm stones of the wall.",
    " The wind moves the tall trees at the edge of the field.",
    " Clouds gather over the hills in the afternoon.",
    " The baker opens the shop before the town wakes up.",
    " Children walk along the road to the school by the bridge.",
    " The lamp in the window burns until late at night.",
};
#define N_FILLER (int)(sizeof FILLER / sizeof FILLER[0])

static const char INTRO[] =
    "There is an important pass key hidden inside a lot of irrelevant text. Find it and "
    "memorize it. I will quiz you about the pass key.";
static const char QUESTION[] = " What is the pass key? The pass key is";

/* splitmix64: the same sequence on every machine. */
static uint64_t next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

typedef struct piece {
    int32_t *ids;
    int n;
} piece;

static int encode(const gt_tokenizer *t, const char *text, bool bos, piece *p, gt_err *err)
{
    int n = gt_tokenize(t, text, strlen(text), bos, NULL, 0, err);
    if (n < 0)
        return -1;
    p->ids = malloc(((size_t)n + 1) * sizeof *p->ids);
    if (!p->ids)
        return gt_err_set(err, "out of memory");
    p->n = gt_tokenize(t, text, strlen(text), bos, p->ids, n, err);
    return p->n < 0 ? -1 : 0;
}

/* Appends filler sentences (drawn from *rng) to out until it holds `until`
 * tokens; the last sentence is cut to fit. */
static void fill(int32_t *out, int *n, int until, const piece *fl, uint64_t *rng)
{
    while (*n < until) {
        const piece *p = &fl[next(rng) % N_FILLER];
        for (int i = 0; i < p->n && *n < until; i++)
            out[(*n)++] = p->ids[i];
    }
}

int gt_passkey_build(const gt_model *m, int length, double depth, uint64_t seed, gt_passkey *out,
                     gt_err *err)
{
    memset(out, 0, sizeof *out);
    if (depth < 0 || depth > 1)
        return gt_err_set(err, "passkey depth %g is outside 0..1", depth);
    const gt_tokenizer *t = gt_model_tokenizer(m);
    uint64_t rng = seed ^ ((uint64_t)length << 20) ^ (uint64_t)(depth * 1000.0 + 0.5);
    snprintf(out->key, sizeof out->key, "%05u", (unsigned)(10000 + next(&rng) % 90000));
    char key_text[128];
    snprintf(key_text, sizeof key_text, " The pass key is %s. Remember it. %s is the pass key.",
             out->key, out->key);

    piece intro = {0}, key = {0}, question = {0}, fl[N_FILLER] = {{0}};
    int rc = -1;
    if (encode(t, INTRO, gt_tokenizer_adds_bos(t), &intro, err) != 0 ||
        encode(t, key_text, false, &key, err) != 0 ||
        encode(t, QUESTION, false, &question, err) != 0)
        goto done;
    for (int i = 0; i < N_FILLER; i++)
        if (encode(t, FILLER[i], false, &fl[i], err) != 0)
            goto done;
    const int fixed = intro.n + key.n + question.n;
    if (length < fixed + 16) {
        gt_err_set(err, "a passkey prompt of %d tokens cannot hold its %d fixed tokens and "
                        "filler (at least %d)", length, fixed, fixed + 16);
        goto done;
    }
    out->tokens = malloc((size_t)length * sizeof *out->tokens);
    if (!out->tokens) {
        gt_err_set(err, "out of memory");
        goto done;
    }
    int n = 0;
    memcpy(out->tokens, intro.ids, (size_t)intro.n * sizeof *intro.ids);
    n = intro.n;
    const int filler = length - fixed;
    fill(out->tokens, &n, intro.n + (int)(depth * filler + 0.5), fl, &rng);
    out->key_pos = n;
    memcpy(out->tokens + n, key.ids, (size_t)key.n * sizeof *key.ids);
    n += key.n;
    fill(out->tokens, &n, length - question.n, fl, &rng);
    memcpy(out->tokens + n, question.ids, (size_t)question.n * sizeof *question.ids);
    out->n = n + question.n;
    rc = 0;
done:
    free(intro.ids);
    free(key.ids);
    free(question.ids);
    for (int i = 0; i < N_FILLER; i++)
        free(fl[i].ids);
    if (rc != 0)
        gt_passkey_free(out);
    return rc;
}

void gt_passkey_free(gt_passkey *p)
{
    free(p->tokens);
    p->tokens = NULL;
    p->n = 0;
}

int gt_passkey_found(const gt_passkey *p, const char *answer)
{
    return answer && strstr(answer, p->key) != NULL;
}
