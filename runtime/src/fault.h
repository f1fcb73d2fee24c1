/* fault.h: applying GT_FAULT's runtime faults (gt/fault.h lists them):
 * output faults on the logits eval returns, graph faults in the graph
 * builders, node faults around one node. Private to the runtime. */
#ifndef GT_FAULT_H
#define GT_FAULT_H

#include <stdbool.h>

#include "gt/backend.h"
#include "gt/fault.h"
#include "gt/session.h"

/* The output and graph faults that apply on one backend. */
typedef struct gt_fault_set {
    bool scale, quant, noise;
    double scale_x, quant_x, noise_x; /* logit-scale, logit-scale-quant, logit-noise */
    int swap_a, swap_b;               /* token-swap; -1: none */
    int const_token;                  /* -1: none */
    int nan_at;                       /* -1: none */
    bool drop_last;                   /* graph-drop-last */
    int kv_drop_at;                   /* kv-decode-drop@N; -1: none */
    int attn_window;                  /* attn-window=N; 0: none */
    int pos_wrap;                     /* pos-wrap@N; 0: none */
    int batch_split_at;               /* batch-split@L; -1: none */
    int seq_bleed_at;                 /* seq-bleed@L; -1: none */
    bool thread_race;                 /* thread-race */
} gt_fault_set;

/* Those faults on backend, or NULL when none applies. */
const gt_fault_set *gt_fault_get(const char *backend);
/* A session's checks: GT_FAULT is well-formed, its token ids are inside
 * the vocabulary; prints the one "GT_FAULT active" line. */
int gt_fault_session_check(const char *backend, int n_vocab, gt_err *err);
/* Whether eval must run the graph one segment at a time for backend (a
 * node fault, or logit-scale-quant, which rescales matmul outputs). */
bool gt_fault_any(const char *backend);
/* The output faults on rows of logits at positions pos0, pos0 + 1, ... */
void gt_fault_logits(const gt_fault_set *f, float *logits, int rows, int n_vocab, int pos0);
/* Corrupts the node's parameters before it is computed. */
void gt_fault_before(const char *kind, gt_tensor *t);
/* Corrupts the node's output after it is computed (matmul-short). */
int gt_fault_after(const char *kind, gt_tensor *t, gt_err *err);
/* logit-scale-quant on a computed node: a MUL_MAT on quantized weights has
 * its output scaled; any other node is left alone. */
int gt_fault_quant_scale(const gt_fault_set *f, gt_tensor *t, gt_err *err);

#endif
