/* promptset.h: the suites' input data: prompt sets (JSONL) and eval texts.
 *
 * A prompt set is suites/prompts/<name>.jsonl, one object per line:
 *     {"id": "p01", "kind": "continuation", "prompt": "..."}
 * kind is free text for people (continuation, question, list, code,
 * non-ascii, short, long). Blank lines are skipped; anything else that is not
 * such an object is an error naming the line, so a typo cannot silently
 * shrink a qualification. Each set carries the sha256 of its bytes: that is
 * the data hash reference outputs are cached under.
 *
 * Which set a cell uses: the suite's "prompts" / "text" setting when given
 * (a file name relative to suites/prompts or suites/data, or an absolute
 * path), else by model size: a vocabulary of at most 1024 tokens means a
 * TinyStories-class model (stories.jsonl, stories.txt), anything larger the
 * general set (basic.jsonl, eval.txt). */
#ifndef GT_SUITE_PROMPTSET_H
#define GT_SUITE_PROMPTSET_H

#include <stddef.h>

#include "gt/error.h"
#include "suite.h"

typedef struct gt_prompt {
    char id[32];
    char kind[32];
    char *text;
} gt_prompt;

typedef struct gt_promptset {
    gt_prompt *p;
    int n;
    char path[1024];
    char sha256[65];
} gt_promptset;

/* The cell's prompt set (see above), at most max prompts (0 = all). */
int gt_promptset_load(const gt_suite_ctx *c, int n_vocab, int max, gt_promptset *out,
                      gt_err *err);
void gt_promptset_free(gt_promptset *ps);

/* The cell's eval text, NUL-terminated and malloc'ed; *len its bytes and
 * sha256 of them. */
int gt_evaltext_load(const gt_suite_ctx *c, int n_vocab, char **text, size_t *len,
                     char sha256[65], char *path, size_t path_cap, gt_err *err);

#endif
