/* fault.h: the runtime's GT_FAULT faults (tests and scripts only), which
 * break a build on purpose so that tests can show the gate kills it.
 *
 * GT_FAULT is a comma-separated list shared with the harness. An entry's
 * kind (its text up to the first '=', '@' or ':') decides whose it is:
 *   - the runtime's kinds below are applied inside gt_session_eval, on
 *     every backend, or only on the one GT_FAULT_BACKEND names. They take no
 *     cell glob: a runtime kind's argument may itself hold a ':'
 *     (token-swap=A:B), so "token-swap=3:5" is the runtime's, whole;
 *   - any other kind is the harness's and must carry ":cell-glob"
 *     (harness/run/worker.c: segv, hang, perturb-logits=X, ...); the runtime
 *     leaves those entries alone and the harness refuses kinds it does not
 *     know either.
 * An entry with neither a runtime kind nor a ':' is refused by name
 * (gt_fault_check; gt_session_new fails with it), never ignored.
 *
 * Output faults, on the logits eval hands back (position = the row's
 * absolute position in the session):
 *   logit-scale=X        every logit times (1 + X)
 *   logit-noise=X        plus Gaussian noise of X times the row's range
 *                        (max - min), seeded by position: deterministic
 *   token-swap=A:B       the logits of tokens A and B exchanged
 *   const-token=T        token T made the argmax by the row's range + 1
 *   nan-at=I             every logit at position I becomes NaN
 * Graph faults, in the graph the runtime builds (so the reference has them):
 *   logit-scale-quant=X  the output projection (node "logits") times (1 + X)
 *                        where its weight is quantized (not F32/F16/BF16)
 *   graph-drop-last      the last layer is skipped
 *   kv-decode-drop@N     a batch of one token (decode) at position >= N does
 *                        not write its K and V into the cache
 *   attn-window=N        attention sees only the last N positions
 *   pos-wrap@N           RoPE (Q and K, every layer) rotates position p >= N
 *                        as p mod N: a model exact below N tokens and wrong
 *                        past them, which only a long-context test sees
 * Setting faults, graph faults that show only under an execution setting
 * (gt_exec_settings; a matrix cell's "settings"):
 *   batch-split@L        layer L's RoPE of a micro-batch that continues an
 *                        eval (the prompt split at n_batch) is one position
 *                        off: only cells whose n_batch splits a prompt
 *   seq-bleed@L          with more than two sequences in the session
 *                        (n_parallel > 2), layer L's attention reads the
 *                        next sequence's K/V instead of its own
 *   thread-race          with a thread setting other than 1, layer 0's
 *                        attn_out matmul loses its last partial sum
 * Node faults (session.h, gt_node_fault): rope-mode@L, matmul-short@L,
 * attn-overread@L, norm-eps@L; they need GT_FAULT_BACKEND (unset: none).
 *
 * The first session that sees an active fault prints one stderr line
 * naming it ("gauntlet: GT_FAULT active on cpu: logit-scale=0.01"). */
#ifndef GT_FAULT_PUBLIC_H
#define GT_FAULT_PUBLIC_H

#include <stdbool.h>

#include "gt/error.h"

/* 0 when every entry of GT_FAULT is the runtime's and well-formed, or
 * carries a ":cell-glob" (the harness's); -1 naming the first that is not. */
int gt_fault_check(gt_err *err);
/* Whether the entry ("kind[=arg]...") is one of the runtime's kinds. */
bool gt_fault_is_runtime(const char *entry);
/* The runtime faults (output, graph and node) that apply on backend, as
 * "logit-scale=0.01,graph-drop-last", or "" when none: the reference cache
 * keys on it, so a faulted reference never serves a clean run. */
const char *gt_fault_active(const char *backend);

#endif
