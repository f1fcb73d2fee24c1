/* chat_template.h: chat templates, for `gauntlet serve`'s POST
 * /v1/chat/completions and for the http suites, which render a chat cell's
 * prompts the same way for the reference backend.
 *
 * No Jinja engine: the GGUF's tokenizer.chat_template is recognized by the
 * markers that identify its family, and the family is rendered in C. The
 * rendering is a token sequence, not text: the turn markers are put in as
 * their ids, and the text between them (roles, messages) is tokenized as
 * prompt text, parse_special false, so a message that contains a marker's
 * text ("<end_of_turn>") cannot end its turn early. */
#ifndef GT_CHAT_TEMPLATE_H
#define GT_CHAT_TEMPLATE_H

#include <stddef.h>
#include <stdint.h>

#include "gt/tokenizer.h"

typedef enum gt_chat_family {
    GT_CHAT_NONE = 0, /* no usable template: chat requests get a 400 */
    GT_CHAT_CHATML,   /* <|im_start|>role\n...<|im_end|>\n  (SmolLM2, Qwen) */
    GT_CHAT_GEMMA,    /* <start_of_turn>user\n...<end_of_turn>\n, assistant = "model" */
    GT_CHAT_LLAMA3,   /* <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|> */
    GT_CHAT_PHI3,     /* <|user|>\n...<|end|>\n<|assistant|>\n (Phi-3, Phi-3.5) */
} gt_chat_family;

typedef struct gt_chat_template {
    gt_chat_family family;
    char why[256];          /* for GT_CHAT_NONE: what a chat request is told */
    int32_t turn_start;     /* <|im_start|>, <start_of_turn>, <|start_header_id|> */
    int32_t turn_end;       /* <|im_end|>, <end_of_turn>, <|eot_id|>: ends generation */
    int32_t header_end;     /* Llama 3's <|end_header_id|>, Phi-3's <|assistant|>; else -1 */
    int32_t system_start;   /* Phi-3.5's <|system|>; -1 otherwise (Phi-3 drops system) */
    char *default_system;   /* ChatML: the system turn the template adds when none is
                             * given (SmolLM2 has one); NULL when none */
} gt_chat_template;

typedef struct gt_chat_msg {
    char *role;    /* "system", "user" or "assistant" */
    char *content;
} gt_chat_msg;

/* The family's name ("chatml", "gemma", "llama3", "phi3"), or "none". */
const char *gt_chat_family_name(gt_chat_family f);

/* Sets up t for this model. forced (a --chat-template NAME) overrides the
 * GGUF's template; NULL reads tokenizer.chat_template. A model without one,
 * a template of no known family, or a vocabulary that lacks the family's
 * control tokens gives family GT_CHAT_NONE with t->why saying which.
 * Returns -1 only for a forced name that is not a family (why says so). */
int gt_chat_template_init(gt_chat_template *t, const char *tmpl_text, const char *forced,
                          const gt_tokenizer *tok);
void gt_chat_template_free(gt_chat_template *t);

/* Renders the conversation with the generation prompt for the assistant's
 * turn. Returns a malloc'ed id array (BOS first when the tokenizer adds
 * one) and its length in *n, or NULL with a message in why (a role the
 * family cannot express, Gemma's turns not alternating). */
int32_t *gt_chat_render(const gt_chat_template *t, const gt_tokenizer *tok,
                        const gt_chat_msg *msgs, int n_msgs, int *n, char *why, size_t why_cap);

#endif
