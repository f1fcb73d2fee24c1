/* synth.h: synthetic models (llama, phi3, qwen2, qwen3, qwen3moe), written as GGUF.
 *
 * A synthetic model has a real model's shape, metadata and tokenizer but
 * seeded random weights, so tests and CI have artifacts of any size and any
 * quantization without downloading anything. The same (preset, seed, type)
 * gives the same file bytes on every machine: weights come from our own
 * splitmix64 stream per tensor, turned into floats with exact integer
 * arithmetic and one correctly rounded multiply. */
#ifndef GT_SYNTH_H
#define GT_SYNTH_H

#include <stdbool.h>
#include <stdint.h>

#include "gt/error.h"
#include "gt/quant.h"

typedef struct gt_synth_shape {
    const char *name; /* preset name: "tiny", "smollm2-135m" */
    int n_embd, n_layer, n_head, n_head_kv, n_ff, n_vocab, n_ctx;
    float rope_base, rms_eps;
    bool tied_output; /* no output.weight: token_embd doubles as the output */
    const char *arch; /* general.architecture; NULL means "llama" */
    /* head width (0: n_embd / n_head; else written as attention.key_length);
     * qwen3moe: experts per layer, experts used per token, one expert's
     * feed-forward width */
    int head_dim, n_expert, n_expert_used, n_ff_exp;
    /* RoPE factors' original context (0: none). llama: rope_freqs.weight by
     * Llama 3's rule (factor 32, low 1, high 4, this as the original
     * context); phi3: rope_factors_long/short and the LongRoPE attn_factor,
     * with this as rope.scaling.original_context_length. */
    int rope_orig_ctx;
} gt_synth_shape;

/* The preset's architecture ("llama" when it names none). */
const char *gt_synth_arch(const gt_synth_shape *p);

/* The preset called name, or NULL. */
const gt_synth_shape *gt_synth_preset(const char *name);
/* Presets by index for listing; NULL past the last. */
const gt_synth_shape *gt_synth_preset_at(int i);

/* Writes the model to path (atomically, through the GGUF writer). type is
 * the type of every 2-D weight matrix and 3-D expert tensor (f32, f16,
 * bf16, q8_0, q4_0, q4_1); norm weights and a MoE router (ffn_gate_inp,
 * which llama-quantize never quantizes) are always f32. The preset and seed are recorded as
 * "gauntlet.synth.preset" (string) and "gauntlet.synth.seed" (uint64). */
int gt_synth_write(const char *path, const char *preset, uint64_t seed, gt_type type,
                   gt_err *err);

#endif
