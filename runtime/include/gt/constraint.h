/* constraint.h: constrained decoding: which tokens may come next so that
 * the text generated so far stays a prefix of a document the constraint
 * accepts (JSON that a JSON Schema validates, or any JSON object).
 *
 * Backend-independent: it acts on the logits a backend hands back, so the
 * same schema gives the same constrained greedy output on every backend
 * whose logits agree.
 *
 * The JSON-Schema subset: object (properties, required,
 * additionalProperties false only), type, enum, const, array (items,
 * minItems, maxItems), string (maxLength), number and integer (minimum,
 * maximum), anyOf, $ref within the document ("#/$defs/..." and
 * "#/definitions/..."), plus the annotations title, description, $schema,
 * $id, examples, default. Any other keyword is refused by name
 * ("unsupported JSON Schema keyword \"pattern\" at /properties/x"), never
 * ignored.
 *
 * How the document may be written (so generation cannot run away and every
 * state can still be finished): at most one space after ':' and ',' and
 * before the document, no other whitespace; an object with properties or
 * required is closed (absent additionalProperties reads as false), each key
 * at most once; numbers without exponent, at most 12 integer and 6
 * fraction digits, bounds checked exactly; strings in valid UTF-8 with the
 * JSON escapes (no lone surrogate), maxLength in characters. Special tokens
 * never appear inside the document.
 *
 * A constraint is used by one thread at a time; constraints of the same
 * model may run on different threads (they share the model's vocabulary
 * index, built by the first one and freed with the model). */
#ifndef GT_CONSTRAINT_H
#define GT_CONSTRAINT_H

#include <stdbool.h>
#include <stdint.h>

#include "gt/error.h"
#include "gt/model.h"

typedef struct gt_constraint gt_constraint;

/* Compiles schema (JSON text) for m's tokenizer. */
int gt_constraint_from_schema(const gt_model *m, const char *schema_json, gt_constraint **out,
                              gt_err *err);
/* Any JSON object ({"type": "json_object"} of OpenAI's response_format). */
int gt_constraint_json_object(const gt_model *m, gt_constraint **out, gt_err *err);
void gt_constraint_free(gt_constraint *c);

/* Back to the start (nothing generated yet). */
void gt_constraint_reset(gt_constraint *c);
/* Sets every logit of a token that cannot come next to -INFINITY; the
 * end-of-generation token stays allowed only when the document is complete.
 * Returns how many tokens stay allowed (0: a dead end, which compilation
 * rules out for the supported subset). */
int gt_constraint_mask(gt_constraint *c, float *logits);
/* Advances past token (one the last mask allowed); -1 with err otherwise. */
int gt_constraint_accept(gt_constraint *c, int32_t token, gt_err *err);
/* Whether the text so far is a complete document. */
bool gt_constraint_done(const gt_constraint *c);
/* Whether token ends generation: the vocabulary's EOS, and the special
 * end-of-turn markers chat templates end with (<end_of_turn>, <|im_end|>,
 * <|eot_id|>, <|end|>, <|endoftext|>). mask allows these only once the
 * document is complete, and then nothing else; a caller stops at one. */
bool gt_constraint_is_end(const gt_constraint *c, int32_t token);

#endif
