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
    case GT_CHAT_PHI3: return "phi3";
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
 * carry it as a literal, '<|im_start|>system\n...<|im_end|>', the newline
 * written either as itself or as Jinja's escape "\n", under a test of the
 * first message's role ("!= 'system'", or Qwen 2.5's "== 'system'" with an
 * else). The first such literal whose text is plain (no quote, brace or
 * escape in it) is the default; a literal that computes its text is not. */
static char *chatml_default_system(const char *tmpl)
{
    static const char open[] = "'<|im_start|>system";
    if (!strstr(tmpl, "!= 'system'") && !strstr(tmpl, "!= \"system\"") &&
        !strstr(tmpl, "== 'system'") && !strstr(tmpl, "== \"system\""))
        return NULL;
    for (const char *a = strstr(tmpl, open); a; a = strstr(a, open)) {
        a += strlen(open);
        if (*a == '\n')
            a++;
        else if (a[0] == '\\' && a[1] == 'n')
            a += 2;
        else
            continue;
        const char *b = strstr(a, "<|im_end|>");
        if (!b)
            return NULL;
        if (b > a && strcspn(a, "'{\\") >= (size_t)(b - a))
            return strndup(a, (size_t)(b - a));
    }
    return NULL;
}

int gt_chat_template_init(gt_chat_template *t, const char *tmpl, const char *forced,
                          const gt_tokenizer *tok)
{
    memset(t, 0, sizeof *t);
    t->turn_start = t->turn_end = t->header_end = t->system_start = -1;
    gt_chat_family f = GT_CHAT_NONE;
    if (forced) {
        if (!strcmp(forced, "chatml"))
            f = GT_CHAT_CHATML;
        else if (!strcmp(forced, "gemma"))
            f = GT_CHAT_GEMMA;
        else if (!strcmp(forced, "llama3"))
            f = GT_CHAT_LLAMA3;
        else if (!strcmp(forced, "phi3"))
            f = GT_CHAT_PHI3;
        else {
            snprintf(t->why, sizeof t->why,
                     "unknown chat template '%s' (known: chatml, gemma, llama3, phi3)", forced);
            return -1;
        }
    } else if (!tmpl) {
        snprintf(t->why, sizeof t->why,
                 "this model has no tokenizer.chat_template, so it has no chat format; use "
                 "/v1/completions, or start the server with --chat-template chatml|gemma|llama3|phi3");
        return 0;
    } else if (strstr(tmpl, "<|im_start|>")) {
        f = GT_CHAT_CHATML;
    } else if (strstr(tmpl, "<start_of_turn>")) {
        f = GT_CHAT_GEMMA;
    } else if (strstr(tmpl, "<|start_header_id|>")) {
        f = GT_CHAT_LLAMA3;
    } else if (strstr(tmpl, "<|user|>") && strstr(tmpl, "<|assistant|>") &&
               strstr(tmpl, "<|end|>")) {
        f = GT_CHAT_PHI3;
    } else {
        snprintf(t->why, sizeof t->why,
                 "this model's tokenizer.chat_template is of no family gauntlet renders (no "
                 "ChatML, Gemma, Llama 3 or Phi-3 turn markers); start the server with "
                 "--chat-template chatml|gemma|llama3|phi3");
        return 0;
    }
    /* Phi-3: turn_start is <|user|>, header_end <|assistant|>, role_extra
     * <|system|> (only Phi-3.5's template has a system turn). */
    static const char *const marks[][4] = {
        [GT_CHAT_CHATML] = {"<|im_start|>", "<|im_end|>", NULL, NULL},
        [GT_CHAT_GEMMA] = {"<start_of_turn>", "<end_of_turn>", NULL, NULL},
        [GT_CHAT_LLAMA3] = {"<|start_header_id|>", "<|eot_id|>", "<|end_header_id|>", NULL},
        [GT_CHAT_PHI3] = {"<|user|>", "<|end|>", "<|assistant|>", "<|system|>"},
    };
    const bool phi3_system = f == GT_CHAT_PHI3 && (forced || strstr(tmpl, "<|system|>"));
    int32_t ids[4] = {-1, -1, -1, -1};
    for (int k = 0; k < 4; k++) {
        if (k == 3 && !phi3_system)
            continue;
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
    t->system_start = ids[3];
    if (f == GT_CHAT_CHATML && tmpl && !forced)
        t->default_system = chatml_default_system(tmpl);
    return 0;
}

void gt_chat_template_free(gt_chat_template *t)
{
    free(t->default_system);
    t->default_system = NULL;
}

/* The rendering: ids so far, and the text since the last marker. Text is
 * held until the next marker so that what lies between two markers is
 * tokenized as one piece, as a tokenizer splitting the rendered text at its
 * special tokens does. */
typedef struct ids_buf {
    int32_t *p;
    int n, cap;
    bool failed;
    char *text;
    size_t len, text_cap;
    bool strip; /* the last marker drops the whitespace after it (Phi-3) */
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

/* Tokenizes the held text as prompt text (parse_special false: a user's
 * "<end_of_turn>" stays text). */
static void flush_text(ids_buf *b, const gt_tokenizer *tok)
{
    const char *s = b->text;
    size_t len = b->len;
    b->len = 0;
    if (b->strip)
        while (len > 0 && isspace((unsigned char)*s))
            s++, len--;
    if (b->failed || len == 0)
        return;
    gt_err err = {{0}};
    const int need = gt_tokenize(tok, s, len, false, NULL, 0, &err);
    if (need < 0)
        b->failed = true;
    else if (need && reserve(b, need))
        b->n += gt_tokenize(tok, s, len, false, b->p + b->n, need, &err);
}

static void add_id(ids_buf *b, const gt_tokenizer *tok, int32_t id)
{
    flush_text(b, tok);
    if (reserve(b, 1))
        b->p[b->n++] = id;
    b->strip = gt_token_strips_right(tok, id);
}

/* Appends up to three strings to the held text. */
static void add_text(ids_buf *b, const char *a, const char *m, const char *z)
{
    const char *parts[3] = {a, m, z};
    for (int i = 0; i < 3 && !b->failed; i++) {
        size_t l = parts[i] ? strlen(parts[i]) : 0;
        if (b->len + l + 1 > b->text_cap) {
            size_t cap = 2 * (b->len + l + 1);
            char *t = realloc(b->text, cap);
            if (!t) {
                b->failed = true;
                return;
            }
            b->text = t;
            b->text_cap = cap;
        }
        memcpy(b->text + b->len, parts[i] ? parts[i] : "", l);
        b->len += l;
    }
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

/* Phi-3's templates. Phi-3.5's (it has <|system|>) gives every message its
 * own turn, "<|role|>\ncontent<|end|>\n", an empty system message none,
 * and ends with the generation prompt "<|assistant|>\n". Phi-3's drops
 * system messages, follows each user turn with "<|assistant|>\n" and writes
 * an assistant message as "content<|end|>\n". The tokenizer strips the
 * newline after each marker (llama.cpp's rstrip for Phi-3). */
static void render_phi3(ids_buf *b, const gt_chat_template *t, const gt_tokenizer *tok,
                        const gt_chat_msg *m, int n)
{
    const bool v35 = t->system_start >= 0;
    for (int i = 0; i < n; i++) {
        const bool user = !strcmp(m[i].role, "user"), system = !strcmp(m[i].role, "system");
        if (system && (!v35 || !m[i].content[0]))
            continue;
        if (user || v35) {
            add_id(b, tok, user ? t->turn_start : system ? t->system_start : t->header_end);
            add_text(b, "\n", NULL, NULL);
        }
        add_text(b, m[i].content, NULL, NULL);
        add_id(b, tok, t->turn_end);
        add_text(b, "\n", NULL, NULL);
        if (user && !v35) {
            add_id(b, tok, t->header_end);
            add_text(b, "\n", NULL, NULL);
        }
    }
    if (v35) {
        add_id(b, tok, t->header_end);
        add_text(b, "\n", NULL, NULL);
    }
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
        add_id(&b, tok, gt_tokenizer_bos(tok));
    switch (t->family) {
    case GT_CHAT_CHATML:
        if (t->default_system && (n == 0 || strcmp(m[0].role, "system"))) {
            add_id(&b, tok, t->turn_start);
            add_text(&b, "system\n", t->default_system, NULL);
            add_id(&b, tok, t->turn_end);
            add_text(&b, "\n", NULL, NULL);
        }
        for (int i = 0; i < n; i++) {
            add_id(&b, tok, t->turn_start);
            add_text(&b, m[i].role, "\n", m[i].content);
            add_id(&b, tok, t->turn_end);
            add_text(&b, "\n", NULL, NULL);
        }
        add_id(&b, tok, t->turn_start);
        add_text(&b, "assistant\n", NULL, NULL);
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
                free(b.text);
                return NULL;
            }
            char *c = trimmed(m[i].content);
            add_id(&b, tok, t->turn_start);
            add_text(&b, want_user ? "user\n" : "model\n",
                     i == first && prefix ? prefix : "", c ? c : "");
            add_id(&b, tok, t->turn_end);
            add_text(&b, "\n", NULL, NULL);
            free(c);
        }
        free(prefix);
        add_id(&b, tok, t->turn_start);
        add_text(&b, "model\n", NULL, NULL);
        break;
    }
    case GT_CHAT_LLAMA3:
        for (int i = 0; i < n; i++) {
            char *c = trimmed(m[i].content);
            add_id(&b, tok, t->turn_start);
            add_text(&b, m[i].role, NULL, NULL);
            add_id(&b, tok, t->header_end);
            add_text(&b, "\n\n", c ? c : "", NULL);
            add_id(&b, tok, t->turn_end);
            free(c);
        }
        add_id(&b, tok, t->turn_start);
        add_text(&b, "assistant", NULL, NULL);
        add_id(&b, tok, t->header_end);
        add_text(&b, "\n\n", NULL, NULL);
        break;
    case GT_CHAT_PHI3:
        render_phi3(&b, t, tok, m, n);
        break;
    case GT_CHAT_NONE:
        break;
    }
    flush_text(&b, tok);
    free(b.text);
    if (b.failed) {
        snprintf(why, cap, "rendering the conversation failed (out of memory, or text the "
                           "tokenizer cannot encode)");
        free(b.p);
        return NULL;
    }
    *n_out = b.n;
    return b.p;
}
