/* fuzz_constraint.c: libFuzzer target for constrained decoding's schema
 * compiler and byte automaton (runtime/src/constraint_*.c), white-box, with
 * no model: the input is a schema, a NUL, then a document.
 *
 * Properties checked:
 *   - compilation succeeds or fails with a message; it never crashes;
 *   - the document is fed byte by byte while some state takes it; after
 *     every byte taken, the states are not a dead end: the document is
 *     complete, or some next byte is taken (every supported schema can
 *     always be finished, which is what lets a mask never come up empty);
 *   - the empty document is not complete (a value has at least one byte). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../runtime/src/constraint_impl.h"

#define SCRATCH (1 << 15)
#define COMMIT (GT_CN_MAX_STATES * GT_CN_MAX_DEPTH)

static gt_cn_frame scratch_f[SCRATCH], commit_f[2][COMMIT];

static const gt_cn_frame *copy_chain(gt_cn_arena *a, const gt_cn_frame *f)
{
    if (!f)
        return NULL;
    const gt_cn_frame *up = copy_chain(a, f->up);
    if (a->n == a->cap)
        __builtin_trap(); /* a state is never deeper than GT_CN_MAX_DEPTH */
    gt_cn_frame *g = &a->f[a->n++];
    *g = *f;
    g->up = up;
    return g;
}

/* Whether some byte takes the states further (the scratch arena from mark). */
static int can_go_on(const gt_cn_schema *s, gt_cn_arena *scratch, const gt_cn_set *set)
{
    const size_t mark = scratch->n;
    for (int b = 0; b < 256; b++) {
        gt_cn_set next;
        scratch->n = mark;
        gt_cn_step(s, scratch, set, (uint8_t)b, &next);
        if (next.n)
            return 1;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    const size_t schema_len = nul ? (size_t)(nul - data) : size;
    char *schema = malloc(schema_len + 1);
    if (!schema)
        return 0;
    memcpy(schema, data, schema_len);
    schema[schema_len] = '\0';
    gt_cn_schema s;
    gt_err err;
    err.msg[0] = '\0';
    const int rc = gt_cn_compile(schema, &s, &err);
    free(schema);
    if (rc != 0) {
        if (!err.msg[0])
            __builtin_trap(); /* a refusal says why */
        return 0;
    }
    gt_cn_arena commit[2] = {{commit_f[0], 0, COMMIT, 0}, {commit_f[1], 0, COMMIT, 0}};
    gt_cn_arena scratch = {scratch_f, 0, SCRATCH, 0};
    gt_cn_set set;
    gt_cn_start(&s, &commit[0], &set);
    if (set.n == 0 || gt_cn_done(&s, &set))
        __builtin_trap();
    int cur = 0;
    const uint8_t *doc = nul ? nul + 1 : data + size;
    const size_t doc_len = nul ? size - schema_len - 1 : 0;
    for (size_t i = 0; i < doc_len && i < 4096; i++) {
        gt_cn_set next;
        scratch.n = 0;
        gt_cn_step(&s, &scratch, &set, doc[i], &next);
        if (next.n == 0)
            break;
        gt_cn_arena *dst = &commit[cur ^ 1];
        dst->n = 0;
        set.n = 0;
        for (int k = 0; k < next.n; k++)
            set.s[set.n++] = copy_chain(dst, next.s[k]);
        cur ^= 1;
        scratch.n = 0;
        if (!gt_cn_done(&s, &set) && !can_go_on(&s, &scratch, &set))
            __builtin_trap(); /* a dead end */
    }
    gt_cn_schema_free(&s);
    return 0;
}
