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
    int n_ctx;    /* KV positions; 0 = min(model's trained context, 2048) */
    int n_batch;  /* tokens per graph; longer evals are split; 0 = 512 */
    /* Sliding-window layers keep window - 1 + n_batch positions (all that a
     * batch can read), not n_ctx; true keeps n_ctx there too (tests compare
     * the two). */
    bool swa_full;
} gt_session_params;

typedef struct gt_session gt_session;

int gt_session_new(const gt_model *m, gt_backend *b, const gt_session_params *p,
                   gt_session **out, gt_err *err);
void gt_session_free(gt_session *s);

/* Evaluates n tokens at positions n_past..n_past+n-1. logits receives
 * n_vocab floats per token when all_logits, else n_vocab floats for the last
 * token; it may be NULL. Fails (leaving the session unchanged) when the
 * tokens do not fit in the context or an id is out of range. */
int gt_session_eval(gt_session *s, const int32_t *tokens, int n, bool all_logits,
                    float *logits, gt_err *err);

int gt_session_n_past(const gt_session *s);
int gt_session_n_ctx(const gt_session *s);
const gt_model *gt_session_model(const gt_session *s);
gt_backend *gt_session_backend(const gt_session *s);
/* Forget positions >= n_past (0 <= n_past <= current). With a bounded
 * sliding-window cache, fails when positions the next token would attend to
 * in a window layer were already dropped. */
int gt_session_truncate(gt_session *s, int n_past, gt_err *err);

/* Serialized state: n_past plus the used part of the KV cache. */
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
uint64_t gt_kv_cache_bytes(const gt_hparams *hp, int n_ctx, int n_batch, bool swa_full);
/* The positions each sliding-window layer would hold (n_ctx when bounded
 * holding is off or would not save anything). */
int gt_kv_window_rows(const gt_hparams *hp, int n_ctx, int n_batch, bool swa_full);

/* Bytes of backend memory the session holds (weights uploaded, KV, scratch). */
uint64_t gt_session_device_bytes(const gt_session *s);

#endif
