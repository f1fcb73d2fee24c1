/* kv_drift.h: the functional suite's kv_f16_drift metric (kv_drift.c), the
 * numerical sensitivity of an F16 K/V cache (the matrices' kv_type f16).
 *
 * On the cell's backend, the prompt with all logits and 8 greedy decode
 * steps run twice in fresh one-sequence sessions: with an F32 cache and
 * with an F16 one (the decode tokens the F32 run chose, replayed, so both
 * see the same history). The metric is the largest |logit difference|
 * over the range of the F32 logits (max - min), like the invariance
 * metrics, so one bound fits every model. It runs in every cell, whatever
 * its own kv_type: it is what rounding K and V to F16 costs on that
 * backend. A backend without F16 caches (supports(KV_STORE or ATTENTION,
 * F16) false) is a skip that gives its reason.
 *
 * Measured 2026-12-07 (37 tokens + 8 steps). tests/test_kv_f16.c's
 * prompt (GT_KV_F16_MEASURE=1), reference / cpu / opencl (PoCL):
 * stories260K 6.0e-4 / 5.9e-4 / 6.0e-4, SmolLM2 q4_1 2.6e-4 / 3.0e-4 /
 * 2.7e-4, Gemma 3 q4_k_m 5.4e-4 / 4.8e-4 / 4.3e-4; the suite's own prompt
 * (functional, every kv_type f32 and f16 cell alike): stories260k f32
 * 3.8e-4, synth-phi3-tiny 2.2e-4, synth-qwen3moe-tiny 2.0e-4, synth-tiny
 * q8_0 1.0e-4. The bound is ~10x the worst (6.0e-4); a cache that
 * truncates instead of rounding, or reads a wrong row, is far beyond it. */
#ifndef GT_SUITE_KV_DRIFT_H
#define GT_SUITE_KV_DRIFT_H

#include <stdint.h>

#include "gt/error.h"
#include "gt/model.h"
#include "suite.h"

/* The default bound: ~10x the worst drift measured (6.0e-4). */
#define GT_KV_F16_DRIFT_MAX 6e-3
#define GT_KV_F16_DRIFT_MAX_JSON "{\"max\": 6e-3}"

#define GT_KV_DRIFT_METRIC                                                                     \
    {"kv_f16_drift", "of range", -1, false, GT_KV_F16_DRIFT_MAX_JSON,                          \
     "max |logit difference| between an F16 and an F32 K/V cache on the cell's backend (the "  \
     "prompt and 8 decode steps), over the logit range"}

/* Runs the check on tokens[0..n) with sessions of n_ctx positions (n + 8
 * at most) on the cell's backend. Returns -1 only when it could not run
 * (out of memory); a session or eval that fails is a failed check. */
int gt_kv_drift_run(gt_suite_ctx *c, const gt_model *m, const int32_t *tokens, int n, int n_ctx,
                    gt_err *err);

#endif
