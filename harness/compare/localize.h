/* localize.h: where two backends part ways, node by node (gauntlet compare
 * --localize, and the worker after a failed accuracy cell).
 *
 * Three runs of one prompt; the tokens from position `from` on in one batch
 * (those before it evaluated first, unobserved, to fill the KV cache: a
 * long context costs the memory of its last positions only):
 *   1. A with every node's output captured (gt_session_observe);
 *   2. B the same way: per node NMSE = sum (b-a)^2 / sum a^2, max |b-a| and
 *      the cosine, which is the difference that has reached this node;
 *   3. B again, each node fed A's captured outputs as its inputs (every
 *      input whose storage an earlier node wrote): the NMSE there is the
 *      difference the node itself adds on identical inputs. With from > 0
 *      attention is fed A's K/V cache as well (positions before the batch
 *      are in it, written by B's own prefill), so its inputs are identical
 *      too.
 * The node that the report names is the first whose added NMSE exceeds its
 * op's test-ops threshold (opcheck_threshold, matrices/README.md): it is
 * wrong on the very inputs the other backend computed right. The first node
 * where the reached difference is beyond the threshold is reported too, but
 * float differences grow through a model on healthy backends, so that one
 * alone is not a verdict. Nodes are segments (session.h): an RMS norm and
 * the weight MUL a backend may fuse with it count as one, named after the
 * MUL. */
#ifndef GT_LOCALIZE_H
#define GT_LOCALIZE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "gt/backend.h"
#include "gt/error.h"
#include "gt/model.h"

typedef struct gt_loc_node {
    char name[64];      /* "blk.2.q_rope" */
    int layer;          /* -1 outside the layers */
    char op[32];        /* "ROPE", "RMS_NORM+MUL" */
    char types[48];     /* input types, "q8_0 x f32" */
    int64_t ne0, ne1;   /* output shape */
    double nmse, max_abs, cosine; /* B vs A, what reached this node */
    double added_nmse;  /* B vs A with B fed A's inputs */
    double tolerance;   /* the op's test-ops threshold */
} gt_loc_node;

typedef struct gt_loc_result {
    gt_loc_node *nodes;
    int n;
    int n_tokens;
    int from;           /* the first position compared */
    int first_added;    /* index of the first node beyond tolerance on identical inputs, -1 */
    int first_reached;  /* first node whose reached NMSE is beyond tolerance, -1 */
    int max_at;         /* the node with the largest reached NMSE */
    double seconds;
} gt_loc_result;

/* Runs the three passes on tokens[0..n) (1 <= n; the sessions get n + 8
 * positions), comparing positions from..n-1 (0 <= from < n; 0 = all of
 * them in one batch, as it always was). ma/mb may be the same model. */
int gt_loc_run(const gt_model *ma, gt_backend *a, const gt_model *mb, gt_backend *b,
               const int32_t *tokens, int n, int from, gt_loc_result *out, gt_err *err);
void gt_loc_result_free(gt_loc_result *r);

/* One line for a cell's detail: "diverges at blk.2.q_rope (ROPE, f32): NMSE
 * 0.31 on identical inputs (tolerance 1e-10)" or "no node beyond tolerance
 * (largest NMSE 2e-9 at blk.29.ffn_out)". */
void gt_loc_summary(const gt_loc_result *r, const char *b_label, char *out, size_t cap);

/* localize_out.c: the per-node table, JSON and HTML. */
void gt_loc_print_table(const gt_loc_result *r, const char *a_label, const char *b_label, FILE *f);
int gt_loc_write_json(const gt_loc_result *r, const char *model, const char *a_label,
                      const char *b_label, FILE *f, gt_err *err);
int gt_loc_write_html(const gt_loc_result *r, const char *model, const char *a_label,
                      const char *b_label, FILE *f, gt_err *err);

#endif
