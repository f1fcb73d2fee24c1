/* session.h: one conversation's state on one backend.
 *
 * A session uploads (or, on host backends, maps) the model weights once,
 * owns a KV cache of n_ctx positions, and evaluates tokens appended after
 * the n_past already seen. State can be saved and restored (resume and
 * rollback tests) and truncated back to an earlier position. */
#ifndef GT_SESSION_H
#define GT_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gt/backend.h"
#include "gt/error.h"
#include "gt/model.h"

typedef struct gt_session_params {
    int n_ctx;    /* KV positions per sequence; 0 = min(trained context, 2048) */
    /* Tokens per graph (a micro-batch; longer evals are split); 0 = the
     * backend's exec.n_batch, else 512. */
    int n_batch;
    /* Sequences the cache holds, each its own n_ctx positions (a slot):
     * 0 = one, plus the backend's companions (exec.n_parallel - 1, below);
     * N >= 1 = N sequences the caller drives with gt_session_eval_seqs and
     * no companions. */
    int n_seq_max;
    /* Sliding-window layers keep window - 1 + n_batch positions (all that a
     * batch can read), not n_ctx; true keeps n_ctx there too (tests compare
     * the two). */
    bool swa_full;
    /* K/V cache rows: GT_TYPE_F16 (half the bytes; KV_STORE rounds to
     * nearest even; refused by name on a backend whose supports() says no
     * for KV_STORE or ATTENTION on F16), or 0 (= GT_TYPE_F32): the
     * backend's exec.kv_type, which is F32 unless the backend was opened
     * with F16 (a matrix's kv_type f16 cell). An F32 session on such a
     * backend takes another instance opened with kv_type 0. */
    gt_type kv_type;
} gt_session_params;

typedef struct gt_session gt_session;

int gt_session_new(const gt_model *m, gt_backend *b, const gt_session_params *p,
                   gt_session **out, gt_err *err);
void gt_session_free(gt_session *s);

/* Several sequences in one batch. Each entry appends n tokens to sequence
 * seq (0 <= seq < gt_session_n_seq, each seq at most once per call) at its
 * positions n_past(seq).., with its own causal mask (and sliding window)
 * over its own positions only. The tokens of all entries are packed in
 * entry order into micro-batches of at most n_batch tokens, a sequence's
 * tokens in order, so sequences share batches and a long entry is split.
 * logits as gt_session_eval, per entry. A sequence's logits do not depend
 * on what else is in its batches, nor on the split (bit-identical on the
 * reference backend; within op tolerances elsewhere). Fails, leaving every
 * sequence unchanged, when an entry does not fit or an id is out of
 * range; fails part-way only on a backend error. */
typedef struct gt_seq_eval {
    int seq;
    const int32_t *tokens;
    int n;
    bool all_logits;
    float *logits;
} gt_seq_eval;
int gt_session_eval_seqs(gt_session *s, const gt_seq_eval *e, int n_e, gt_err *err);
/* Sequences this session holds (companions not counted), and one's length. */
int gt_session_n_seq(const gt_session *s);
int gt_session_seq_n_past(const gt_session *s, int seq);
/* Forget sequence seq's positions >= n_past (0 removes it); others keep
 * theirs. Fails like gt_session_truncate. */
int gt_session_seq_truncate(gt_session *s, int seq, int n_past, gt_err *err);
/* Companion sequences run beside sequence 0 (exec.n_parallel - 1 when the
 * session was made with n_seq_max 0, else 0). Every gt_session_eval then
 * also appends a few seeded filler tokens to each companion in the same
 * micro-batches (ragged: 1 to 4 tokens each, and one companion restarts
 * from empty every third eval); their logits are never computed. */
int gt_session_n_companions(const gt_session *s);

/* Evaluates n tokens of sequence 0 at positions n_past..n_past+n-1. logits receives
 * n_vocab floats per token when all_logits, else n_vocab floats for the last
 * token; it may be NULL. Fails (leaving the session unchanged) when the
 * tokens do not fit in the context or an id is out of range. */
int gt_session_eval(gt_session *s, const int32_t *tokens, int n, bool all_logits,
                    float *logits, gt_err *err);

int gt_session_n_past(const gt_session *s); /* sequence 0's */
int gt_session_n_ctx(const gt_session *s);
const gt_model *gt_session_model(const gt_session *s);
gt_backend *gt_session_backend(const gt_session *s);
/* Sequence 0: forget positions >= n_past (0 <= n_past <= current). With a bounded
 * sliding-window cache, fails when positions the next token would attend to
 * in a window layer were already dropped. */
int gt_session_truncate(gt_session *s, int n_past, gt_err *err);

/* Serialized state: n_past plus the used part of the KV cache, of
 * sequence 0 of a one-sequence session (companions keep theirs; save and
 * load refuse a session of several sequences). */
size_t gt_session_state_size(const gt_session *s);
int gt_session_state_save(const gt_session *s, void *buf, size_t size, gt_err *err);
int gt_session_state_load(gt_session *s, const void *buf, size_t size, gt_err *err);

/* Positions layer's KV cache holds (n_ctx, or fewer in a sliding-window
 * layer), -1 for a layer the model does not have. */
int gt_session_kv_rows(const gt_session *s, int layer);
/* Bytes of the KV cache, all layers. */
uint64_t gt_session_kv_bytes(const gt_session *s);
/* What a session's KV cache would take with these parameters (n_batch 0 =
 * the default), without making one: for reports at long contexts. */
uint64_t gt_kv_cache_bytes(const gt_hparams *hp, int n_ctx, int n_batch, bool swa_full,
                           gt_type kv_type);
/* The positions each sliding-window layer would hold (n_ctx when bounded
 * holding is off or would not save anything). */
int gt_kv_window_rows(const gt_hparams *hp, int n_ctx, int n_batch, bool swa_full);

/* Bytes of backend memory the session holds (weights uploaded, KV, scratch). */
uint64_t gt_session_device_bytes(const gt_session *s);

/* --- node observation (gauntlet compare --localize) -----------------------
 * Graph nodes carry stable names: "inp_embd", "blk.L.<what>" inside layer L
 * (attn_norm, q, k, v, q_rope, k_rope, kqv, attn_out, attn_res, ffn_norm,
 * ffn_gate, ffn_up, ffn_act, ffn_out, ffn_res, and Gemma 3's q_norm,
 * k_norm, attn_post_norm, ffn_post_norm; qwen3moe's q_norm, k_norm,
 * ffn_moe_logits, ffn_moe_topk, ffn_moe_weights, ffn_moe_gate, ffn_moe_up,
 * ffn_moe_act, ffn_moe_down, ffn_moe_out), "result_norm", "logits". An RMS
 * norm's own node is "<what>_rms"; it and the MUL by its weight that
 * follows form one segment, since backends may fuse the two (nothing can
 * read the norm between them there).
 *
 * With an observer set, eval computes the graph one segment at a time and
 * calls before() and after() around each: before may overwrite the
 * segment's inputs (gt_session_write_tensor), after may read its output
 * (nodes[last], gt_session_read_tensor). The nodes, their order and the
 * backend's fusion decisions are the same as without; with no observer
 * (and no GT_FAULT node fault) eval hands the backend the whole graph in
 * one call, as always. */
typedef struct gt_node_observer {
    int (*before)(void *user, gt_session *s, const gt_graph *g, int first, int last, gt_err *err);
    int (*after)(void *user, gt_session *s, const gt_graph *g, int first, int last, gt_err *err);
    void *user;
} gt_node_observer;

/* NULL turns observation off. The observer must outlive its use. */
void gt_session_observe(gt_session *s, const gt_node_observer *o);
/* gt_tensor_bytes(t) bytes of a node's storage, to or from host memory. */
int gt_session_read_tensor(gt_session *s, const gt_tensor *t, void *dst, gt_err *err);
int gt_session_write_tensor(gt_session *s, const gt_tensor *t, const void *src, gt_err *err);
/* Index one past the segment that starts at node first (first + 1 or + 2). */
int gt_graph_segment_end(const gt_graph *g, int first);

/* Node faults, for proving the localizer (tests and scripts only):
 * GT_FAULT="rope-mode@2,matmul-short@3,attn-overread@1,norm-eps@4" corrupts
 * one node per entry on the backend GT_FAULT_BACKEND names (cpu, opencl,
 * cuda, ...; unset: none). The runtime hands that backend the node with
 * the fault applied, so every backend gets the same faults:
 *   rope-mode@L      blk.L.q_rope rotates with the other pair layout
 *   matmul-short@L   blk.L.ffn_out drops the last block (>= 32 values) of K
 *   attn-overread@L  blk.L.kqv lets row p attend to position p + 1
 *   norm-eps@L       blk.L.attn_norm_rms uses eps 1 instead of the model's
 * gt/fault.h has GT_FAULT's other runtime kinds (logit-scale=X,
 * graph-drop-last, kv-decode-drop@N, ...), its grammar, and the checks.
 * Returns the fault kind's name for a node on backend, or NULL. */
const char *gt_node_fault(const char *backend, const char *node);

#endif
