/* passkey.h: the long-context prompt of the long suite and of compare
 * --localize --passkey: a 5-digit key hidden at a depth of seeded filler,
 * asked for at the end.
 *
 * The prompt is built from tokens, not from one string, so that its length
 * is exactly what was asked for whatever the tokenizer: an instruction, the
 * filler sentences (drawn by a seeded generator from a fixed list, each
 * tokenized alone), the key sentence at depth * length, more filler, and
 * the question, whose answer the model must complete ("The pass key is").
 * The key and the filler depend only on (seed, length, depth), so a cell
 * and its reference see the same tokens. */
#ifndef GT_BASE_PASSKEY_H
#define GT_BASE_PASSKEY_H

#include <stdint.h>

#include "gt/error.h"
#include "gt/model.h"

typedef struct gt_passkey {
    int32_t *tokens; /* length tokens (BOS first when the model adds one) */
    int n;
    char key[8];     /* the 5 digits */
    int key_pos;     /* token index where the key sentence starts */
} gt_passkey;

/* Builds the prompt of exactly `length` tokens with the key sentence at
 * depth (0..1) of the filler. Fails when length is too short to hold the
 * instruction, the key and the question (about 80 tokens). */
int gt_passkey_build(const gt_model *m, int length, double depth, uint64_t seed, gt_passkey *out,
                     gt_err *err);
void gt_passkey_free(gt_passkey *p);
/* Whether the text of a greedy answer holds the key (its 5 digits in a row). */
int gt_passkey_found(const gt_passkey *p, const char *answer);

#endif
