/* tokenizer.h: text <-> token ids, built from GGUF metadata.
 *
 * Two models, chosen by tokenizer.ggml.model:
 *   "llama": SentencePiece-style. Spaces become U+2581, a space is prepended
 *            (tokenizer.ggml.add_space_prefix, default true), pieces are merged
 *            by best score, and bytes with no piece fall back to <0xNN> tokens.
 *   "gpt2":  byte-level BPE with tokenizer.ggml.merges and the pre-tokenizer
 *            named by tokenizer.ggml.pre (gpt2 default; smollm splits digits).
 * Parse modes, as llama.cpp's parse_special: before encoding, the text is
 * cut at special tokens, longest first. USER_DEFINED tokens are always cut
 * out; CONTROL and UNKNOWN ones (and tokens llama.cpp makes CONTROL by
 * name, such as "</s>" or "<end_of_turn>") only when parse_special is
 * true. Prompt text uses false, so "<|im_end|>" typed by a user stays text;
 * only a chat template's own markup uses true.
 * A byte the vocabulary has no token for (no byte piece, and no usable
 * unknown token) is dropped, as llama.cpp does. */
#ifndef GT_TOKENIZER_H
#define GT_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gt/error.h"
#include "gt/gguf.h"

typedef struct gt_tokenizer gt_tokenizer;

typedef enum gt_tokenizer_kind { GT_TOK_LLAMA, GT_TOK_GPT2 } gt_tokenizer_kind;

int gt_tokenizer_from_gguf(const gt_gguf *g, gt_tokenizer **out, gt_err *err);
void gt_tokenizer_free(gt_tokenizer *t);

gt_tokenizer_kind gt_tokenizer_kind_of(const gt_tokenizer *t);
int32_t gt_tokenizer_n_vocab(const gt_tokenizer *t);
int32_t gt_tokenizer_bos(const gt_tokenizer *t); /* -1 when none */
int32_t gt_tokenizer_eos(const gt_tokenizer *t); /* -1 when none */
/* tokenizer.ggml.add_bos_token; default true for llama, false for gpt2. */
bool gt_tokenizer_adds_bos(const gt_tokenizer *t);

/* Encodes len bytes of text. Writes at most max ids to out and returns how
 * many the full encoding has (so a caller can retry with a larger buffer),
 * or -1 with err filled (e.g. invalid arguments). BOS is prepended when
 * add_bos is true and the vocabulary has one. */
int gt_tokenize(const gt_tokenizer *t, const char *text, size_t len, bool add_bos,
                int32_t *out, int max, gt_err *err);
/* The same with the parse mode explicit: gt_tokenize is parse_special false. */
int gt_tokenize_special(const gt_tokenizer *t, const char *text, size_t len, bool add_bos,
                        bool parse_special, int32_t *out, int max, gt_err *err);

/* Whether id is a special token that only parse_special turns text into
 * (CONTROL, UNKNOWN, or made CONTROL by name). */
bool gt_token_is_special(const gt_tokenizer *t, int32_t id);
/* Whether whitespace after id is dropped when text is split at it
 * (llama.cpp's rstrip: Phi-3's special tokens). */
bool gt_token_strips_right(const gt_tokenizer *t, int32_t id);

/* The vocabulary's piece for id, as stored (e.g. "\xe2\x96\x81the", "Ġthe"). */
const char *gt_token_piece(const gt_tokenizer *t, int32_t id);

/* The bytes token id stands for in decoded text (spaces restored, byte
 * tokens turned into their byte, control tokens empty, the unknown token its
 * piece). Writes at most cap bytes, returns the full length, or -1 when id
 * is out of range. A streaming caller just concatenates. */
int gt_token_to_bytes(const gt_tokenizer *t, int32_t id, char *out, size_t cap);

/* Decodes n ids to text (NUL-terminated when cap > 0). For llama, the space
 * added as prefix by encoding is removed from the first token that yields
 * text (so after a BOS too), so that decode(encode(s)) == s. Returns the
 * full length, or -1 when an id is out of range. */
int gt_detokenize(const gt_tokenizer *t, const int32_t *ids, int n, char *out, size_t cap);

#endif
