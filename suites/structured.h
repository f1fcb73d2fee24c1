/* structured.h: what the structured suite's two variants share
 * (structured.c on a backend, http_structured.c on a server).
 *
 * The cases come from suites/data/structured.json (or the tier's "cases"
 * file): JSON Schemas written for gauntlet, each with a prompt, and
 * malformed schemas that must be refused, each with the word the refusal
 * must name. For every case the cell's constrained greedy answer must
 *   - be a complete document that a validator we did not write accepts
 *     (the jsonschema package, through suites/data/jsonschema_validate.py:
 *     our own constraint code cannot be its own judge), and
 *   - be the reference backend's constrained greedy answer, token for token
 *     (the constraint acts on logits only, so backends whose logits agree
 *     write the same bytes).
 * The reference's answers are cached by (prompt tokens, schema, max_tokens). */
#ifndef GT_SUITE_STRUCTURED_H
#define GT_SUITE_STRUCTURED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gt/constraint.h"
#include "gt/model.h"
#include "gt/session.h"
#include "suite.h"

#define GT_SC_MAX_CASES 16

typedef struct gt_sc_case {
    const char *name;   /* into the set's cJSON */
    const char *prompt;
    char *schema;       /* the schema as JSON text (malloc'ed) */
    const char *mentions; /* malformed only: what the refusal must name */
    bool unsupported;     /* malformed only: valid JSON Schema outside gauntlet's subset
                           * (a server may follow it instead of refusing) */
} gt_sc_case;

typedef struct gt_sc_set {
    cJSON *root;
    gt_sc_case cases[GT_SC_MAX_CASES], malformed[GT_SC_MAX_CASES];
    int n_cases, n_malformed;
    char path[1024];
} gt_sc_set;

/* One constrained greedy answer. */
typedef struct gt_sc_answer {
    int32_t *tokens;    /* max_tokens slots */
    int n;
    bool complete;      /* the document was complete when generation ended */
} gt_sc_answer;

/* Loads the tier's "cases" file or suites/data/structured.json. */
int gt_sc_load(const gt_suite_ctx *c, gt_sc_set *s, gt_err *err);
void gt_sc_free(gt_sc_set *s);

/* Constrained greedy from prompt ids on s (truncated to 0 first): mask,
 * argmax, stop at an end token the constraint allows, at most max_tokens. */
int gt_sc_generate(gt_session *s, gt_constraint *con, const int32_t *ids, int n_ids,
                   int max_tokens, gt_sc_answer *out, gt_err *err);

/* The answer's bytes (the tokens' pieces), NUL-terminated, malloc'ed. */
char *gt_sc_text(const gt_model *m, const int32_t *tokens, int n);

/* The reference backend's answers for every case (ids[i] of n_ids[i] tokens:
 * the prompt as the cell sees it), from the cache or computed now (own, when
 * non-NULL, is this cell's when it is the reference itself). out[i].tokens
 * is malloc'ed. */
int gt_sc_reference(gt_suite_ctx *c, const gt_model *m, const gt_sc_set *s,
                    int32_t *const *ids, const int *n_ids, int max_tokens,
                    const gt_sc_answer *own, gt_sc_answer *out, bool *cached, gt_err *err);

/* Runs the validator (the tier's "validator" argv, default python3
 * suites/data/jsonschema_validate.py with PYTHONPATH $GT_PYORACLE or the
 * cache's pyoracle) on docs[i] against cases[i]'s schema: valid[i], and
 * why[i] for an invalid one. -1 with err when the validator itself cannot run (no python,
 * no jsonschema): the suite reports an error, never a pass. */
int gt_sc_validate(const gt_suite_ctx *c, const gt_sc_case *cases, int n, char *const *docs,
                   bool *valid, char (*why)[256], gt_err *err);

typedef struct gt_sc_tally {
    int n_valid, n_agree;
    char divergences[1500]; /* where answers parted from the reference's */
} gt_sc_tally;

/* Judges every case's answer: validity (the validator, on docs[i] and
 * complete[i]) and agreement with ref (by tokens when own is given, else
 * by bytes), reporting valid_<case> and tallying both. -1 with err when
 * the validator could not judge. */
int gt_sc_judge(gt_suite_ctx *c, const gt_model *m, const gt_sc_set *s, char *const *docs,
                const bool *complete, const gt_sc_answer *own, const gt_sc_answer *ref,
                gt_sc_tally *out, gt_err *err);
/* At the end: valid_rate, ref_agreement with its check "agreement" (the
 * metric's verdict, naming where answers parted), and refused. */
void gt_sc_report_totals(gt_suite_ctx *c, int n_cases, const gt_sc_tally *t, int n_malformed,
                         int n_refused);

#endif
