/* chat_template.c: recognize a GGUF chat template's family and render a
 * conversation to tokens, the way the template would.
 *
 * Text between two control tokens is tokenized as one piece with no BOS,
 * which is what a tokenizer that splits the rendered text on its special
 * tokens does, so the ids match the template's own rendering. */
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_template.h"

const char *gt_chat_family_name(gt_chat_family f)
{
    switch (f) {
    case GT_CHAT_CHATML: return "chatml";
    case GT_CHAT_GEMMA: return "gemma";
    case GT_CHAT_LLAMA3: return "llama3";
    case GT_CHAT_NONE: break;
    }
    return "none";
}

static int32_t find_piece(const gt_tokenizer *tok, const char *piece)
{
    const int32_t n = gt_tokenizer_n_vocab(tok);
    for (int32_t id = 0; id < n; id++) {
        const char *p = gt_token_piece(tok, id);
        if (p && !strcmp(p, piece))
            return id;
    }
    return -1;
}

/* ChatML templates that add a system turn when the conversation has none
 * carry it as a literal: '<|im_start|>system\n...<|im_end|>'. */
static char *chatml_default_system(const char *tmpl)
{
    static const char open[] = "'<|im_start|>system\n";
    if (!strstr(tmpl, "!= 'system'") && !strstr(tmpl, "!= \"system\""))
        return NULL;
    const char *a = strstr(tmpl, open);
    if (!a)
        return NULL;
    a += strlen(open);
    const char *b = strstr(a, "<|im_end|>");
    const char *q = strchr(a, '\''), *brace = strchr(a, '{');
    if (!b || (q && q < b) || (brace && brace < b))
        return NULL; /* not a plain literal: something is computed in it */
    return strndup(a, (size_t)(b - a));
}

int gt_chat_template_init(gt_chat_template *t, const char *tmpl, const char *forced,
                          const gt_tokenizer *tok)
{
    memset(t, 0, sizeof *t);
    t->turn_start = t->turn_end = t->header_end = -1;
    gt_chat_family f = GT_CHAT_NONE;
    if (forced) {
        if (!strcmp(forced, "chatml"))
            f = GT_CHAT_CHATML;
        else if (!strcmp(forced, "gemma"))
            f = GT_CHAT_GEMMA;
        else if (!strcmp(forced, "llama3"))
            f = GT_CHAT_LLAMA3;
        else {
            snprintf(t->why, sizeof t->why,
                     "unknown chat template '%s' (known: chatml, gemma, llama3)", forced);
            return -1;
        }
    } else if (!tmpl) {
        snprintf(t->why, sizeof t->why,
                 "this model has no tokenizer.chat_template, so it has no chat format; use "
                 "/v1/completions, or start the server with --chat-template chatml|gemma|llama3");
        return 0;
    } else if (strstr(tmpl, "<|im_start|>")) {
        f = GT_CHAT_CHATML;
    } else if (strstr(tmpl, "<start_of_turn>")) {
        f = GT_CHAT_GEMMA;
    } else if (strstr(tmpl, "<|start_header_id|>")) {
        f = GT_CHAT_LLAMA3;
    } else {
        snprintf(t->why, sizeof t->why,
                 "this model's tokenizer.chat_template is of no family gauntlet renders (no "
                 "ChatML, Gemma or Llama 3 turn markers); start the server with "
                 "--chat-template chatml|gemma|llama3");
        return 0;
    }
    static const char *const marks[][3] = {
        [GT_CHAT_CHATML] = {"<|im_start|>", "<|im_end|>", NULL},
        [GT_CHAT_GEMMA] = {"<start_of_turn>", "<end_of_turn>", NULL},
        [GT_CHAT_LLAMA3] = {"<|start_header_id|>", "<|eot_id|>", "<|end_header_id|>"},
    };
    int32_t ids[3] = {-1, -1, -1};
    for (int k = 0; k < 3; k++) {
        if (!marks[f][k])
            continue;
        ids[k] = find_piece(tok, marks[f][k]);
        if (ids[k] < 0) {
            snprintf(t->why, sizeof t->why,
                     "chat template %s needs the token %s, which this model's vocabulary does "
                     "not have", gt_chat_family_name(f), marks[f][k]);
            return forced ? -1 : 0;
        }
    }
    t->family = f;
    t->turn_start = ids[0];
    t->turn_end = ids[1];
    t->header_end = ids[2];
    if (f == GT_CHAT_CHATML && tmpl && !forced)
        t->default_system = chatml_default_system(tmpl);
    return 0;
}

void gt_chat_template_free(gt_chat_template *t)
{
    free(t->default_system);
    t->default_system = NULL;
}

typedef struct ids_buf {
    int32_t *p;
    int n, cap;
    bool failed;
} ids_buf;

/* Room for k more ids. */
static bool reserve(ids_buf *b, int k)
{
    if (b->failed)
        return false;
    if (b->n + k > b->cap) {
        int cap = b->cap ? b->cap : 256;
        while (cap < b->n + k)
            cap *= 2;
        int32_t *p = realloc(b->p, sizeof *p * (size_t)cap);
        if (!p) {
            b->failed = true;
            return false;
        }
        b->p = p;
        b->cap = cap;
    }
    return true;
}

static void add_id(ids_buf *b, int32_t id)
{
    if (reserve(b, 1))
        b->p[b->n++] = id;
}

/* The concatenation of up to three strings, tokenized as one piece. */
static void add_text(ids_buf *b, const gt_tokenizer *tok, const char *a, const char *m,
                     const char *z)
{
    if (b->failed)
        return;
    size_t la = strlen(a), lm = m ? strlen(m) : 0, lz = z ? strlen(z) : 0;
    char *s = malloc(la + lm + lz + 1);
    if (!s) {
        b->failed = true;
        return;
    }
    memcpy(s, a, la);
    if (m)
        memcpy(s + la, m, lm);
    if (z)
        memcpy(s + la + lm, z, lz);
    s[la + lm + lz] = '\0';
    gt_err err = {{0}};
    const size_t len = la + lm + lz;
    const int need = len ? gt_tokenize(tok, s, len, false, NULL, 0, &err) : 0;
    if (need < 0)
        b->failed = true;
    else if (need && reserve(b, need))
        b->n += gt_tokenize(tok, s, len, false, b->p + b->n, need, &err);
    free(s);
}

/* Jinja's trim: leading and trailing whitespace removed (a copy). */
static char *trimmed(const char *s)
{
    while (*s && isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    return strndup(s, n);
}

int32_t *gt_chat_render(const gt_chat_template *t, const gt_tokenizer *tok,
                        const gt_chat_msg *m, int n, int *n_out, char *why, size_t cap)
{
    ids_buf b = {0};
    if (t->family == GT_CHAT_NONE) {
        snprintf(why, cap, "%s", t->why);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        if (strcmp(m[i].role, "system") && strcmp(m[i].role, "user") &&
            strcmp(m[i].role, "assistant")) {
            snprintf(why, cap, "messages[%d]: role '%.64s' is not one of system, user, assistant",
                     i, m[i].role);
            return NULL;
        }
    if (gt_tokenizer_adds_bos(tok) && gt_tokenizer_bos(tok) >= 0)
        add_id(&b, gt_tokenizer_bos(tok));
    switch (t->family) {
    case GT_CHAT_CHATML:
        if (t->default_system && (n == 0 || strcmp(m[0].role, "system"))) {
            add_id(&b, t->turn_start);
            add_text(&b, tok, "system\n", t->default_system, NULL);
            add_id(&b, t->turn_end);
            add_text(&b, tok, "\n", NULL, NULL);
        }
        for (int i = 0; i < n; i++) {
            add_id(&b, t->turn_start);
            add_text(&b, tok, m[i].role, "\n", m[i].content);
            add_id(&b, t->turn_end);
            add_text(&b, tok, "\n", NULL, NULL);
        }
        add_id(&b, t->turn_start);
        add_text(&b, tok, "assistant\n", NULL, NULL);
        break;
    case GT_CHAT_GEMMA: {
        /* A system message has no turn of its own: it opens the first user
         * turn, and the turns must then alternate user / model. */
        int first = 0;
        char *prefix = NULL;
        if (n > 0 && !strcmp(m[0].role, "system")) {
            char *c = trimmed(m[0].content);
            if (c && asprintf(&prefix, "%s\n\n", c) < 0)
                prefix = NULL;
            free(c);
            first = 1;
        }
        for (int i = first; i < n; i++) {
            const bool want_user = (i - first) % 2 == 0;
            if (want_user != !strcmp(m[i].role, "user")) {
                snprintf(why, cap,
                         "messages[%d]: this model's chat format (gemma) needs the turns to "
                         "alternate user, assistant, user, ... after an optional system message; "
                         "got '%s'", i, m[i].role);
                free(prefix);
                free(b.p);
                return NULL;
            }
            char *c = trimmed(m[i].content);
            add_id(&b, t->turn_start);
            add_text(&b, tok, want_user ? "user\n" : "model\n",
                     i == first && prefix ? prefix : "", c ? c : "");
            add_id(&b, t->turn_end);
            add_text(&b, tok, "\n", NULL, NULL);
            free(c);
        }
        free(prefix);
        add_id(&b, t->turn_start);
        add_text(&b, tok, "model\n", NULL, NULL);
        break;
    }
    case GT_CHAT_LLAMA3:
        for (int i = 0; i < n; i++) {
            char *c = trimmed(m[i].content);
            add_id(&b, t->turn_start);
            add_text(&b, tok, m[i].role, NULL, NULL);
            add_id(&b, t->header_end);
            add_text(&b, tok, "\n\n", c ? c : "", NULL);
            add_id(&b, t->turn_end);
            free(c);
        }
        add_id(&b, t->turn_start);
        add_text(&b, tok, "assistant", NULL, NULL);
        add_id(&b, t->header_end);
        add_text(&b, tok, "\n\n", NULL, NULL);
        break;
    case GT_CHAT_NONE:
        break;
    }
    if (b.failed) {
        snprintf(why, cap, "rendering the conversation failed (out of memory, or text the "
                           "tokenizer cannot encode)");
        free(b.p);
        return NULL;
    }
    *n_out = b.n;
    return b.p;
}
