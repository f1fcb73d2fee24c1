/* model.h: a llama-family model read from a GGUF artifact.
 *
 * Hyper-parameters come from metadata ("<arch>.block_count", ...); weights
 * stay in the mmapped file (no dequantized copy). The model knows how to
 * build the graph of one evaluation step; a session runs it on a backend. */
#ifndef GT_MODEL_H
#define GT_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "gt/error.h"
#include "gt/gguf.h"
#include "gt/tokenizer.h"

typedef struct gt_hparams {
    char arch[32];
    char name[128];
    int n_vocab;
    int n_ctx_train;
    int n_embd;
    int n_layer;
    int n_head;
    int n_head_kv;
    int n_ff;
    int head_dim;
    int rope_dim;      /* dims rotated per head */
    int rope_mode;     /* 0 = adjacent pairs (llama), 1 = NeoX halves */
    float rope_base;
    float rms_eps;
    bool tied_output;  /* output projection shares token_embd.weight */
} gt_hparams;

typedef struct gt_model gt_model;

int gt_model_load(const char *path, gt_model **out, gt_err *err);
void gt_model_free(gt_model *m);

const gt_hparams *gt_model_hparams(const gt_model *m);
const gt_tokenizer *gt_model_tokenizer(const gt_model *m);
const gt_gguf *gt_model_gguf(const gt_model *m);
/* Bytes of weights read for one decoded token (all matrices once, plus one
 * embedding row): what "effective bandwidth" in benchmarks is based on. */
uint64_t gt_model_weight_bytes_per_token(const gt_model *m);
/* The weight type of the largest matrices (what "Q8_0 model" means). */
gt_type gt_model_main_type(const gt_model *m);
/* Number of parameters in the 2-D weight matrices (for FLOP counts). */
uint64_t gt_model_matrix_params(const gt_model *m);

#endif
