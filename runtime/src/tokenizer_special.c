/* tokenizer_special.c: which tokens are cut out of raw text before encoding,
 * and when.
 *
 * llama.cpp splits the text at every occurrence of a "special" token (type
 * CONTROL, USER_DEFINED or UNKNOWN), longest piece first, before its
 * encoders run. With parse_special false (prompt text) it skips the CONTROL
 * and UNKNOWN ones, so that text such as "<|im_end|>" stays text; the
 * USER_DEFINED ones are cut in both modes. A chat template's markup is
 * tokenized with parse_special true.
 *
 * The token types in a GGUF are not the whole story: llama.cpp overrides
 * some of them by piece text at load, and those overrides change ids.
 *   - A token named like an end of generation ("</s>", "<end_of_turn>",
 *     "<|im_end|>", ...) becomes CONTROL. Gemma 3's "</s>" is USER_DEFINED
 *     in the file, so without this "</s>" in a prompt would be cut out as
 *     token 212, where llama.cpp gives "</", "s", ">".
 *   - Tokens named like an end of turn / message or a fill-in-the-middle
 *     marker become CONTROL when the file does not name that role's token
 *     by id. llama.cpp takes the first such name its hash map yields; this
 *     file marks every one, which differs only for a vocabulary holding two
 *     names for the same role.
 *   - Models whose general.name contains "phi-3" / "phi3" strip the
 *     whitespace after every special token but <unk>, <s>, <|endoftext|>.
 * The overrides for vocabularies no supported architecture has (gpt-oss's
 * harmony markers, Gemma 4's normal "</s>") are left out. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_impl.h"

/* Names llama.cpp treats as ending generation: always CONTROL. */
static const char *const EOG_NAMES[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>",
    "<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>",
    "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>",
    "<|tool_response>", "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
    "[e~[", NULL};

/* Roles found by name when the file gives no id for them: CONTROL. */
typedef struct named_role {
    const char *keys[2]; /* tokenizer.ggml.* keys naming the role's id */
    const char *names[10];
} named_role;

static const named_role ROLES[] = {
    {{"eot_token_id", NULL},
     {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
      "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", "<end_of_utterance>"}},
    {{"eom_token_id", NULL}, {"<|eom_id|>"}},
    {{"fim_pre_token_id", "prefix_token_id"},
     {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<PRE>", "\xe2\x96\x81<PRE>",
      "<|code_prefix|>", "<|prefix|>"}},
    {{"fim_suf_token_id", "suffix_token_id"},
     {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<SUF>", "\xe2\x96\x81<SUF>",
      "<|code_suffix|>", "<|suffix|>"}},
    {{"fim_mid_token_id", "middle_token_id"},
     {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<MID>", "\xe2\x96\x81<MID>",
      "<|code_middle|>", "<|middle|>"}},
    {{"fim_pad_token_id", NULL}, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}},
    {{"fim_rep_token_id", NULL},
     {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}},
    {{"fim_sep_token_id", NULL}, {"<|file_sep|>"}},
};

static bool piece_is(const gt_tokenizer *t, int32_t id, const char *name)
{
    size_t n = strlen(name);
    return t->piece_len[id] == n && memcmp(gt_tok_piece_at(t, id), name, n) == 0;
}

static bool in_list(const gt_tokenizer *t, int32_t id, const char *const *names, size_t max)
{
    for (size_t i = 0; i < max && names[i]; i++)
        if (piece_is(t, id, names[i]))
            return true;
    return false;
}

/* Whether the file names the role's token by an id in range. */
static bool role_given(const gt_tokenizer *t, const gt_gguf *g, const named_role *r)
{
    for (int k = 0; k < 2 && r->keys[k]; k++) {
        char key[64];
        snprintf(key, sizeof key, "tokenizer.ggml.%s", r->keys[k]);
        int64_t i = gt_gguf_find_key(g, key);
        int64_t v;
        if (i >= 0 && gt_gguf_kv_int(g, i, &v) && v >= 0 && v < t->n_vocab)
            return true;
    }
    return false;
}

/* llama.cpp's per-model rule, keyed on general.name. */
static bool is_phi3(const gt_gguf *g)
{
    int64_t i = gt_gguf_find_key(g, "general.name");
    const char *name = i >= 0 ? gt_gguf_kv_str(g, i, NULL) : NULL;
    if (!name)
        return false;
    char low[256];
    size_t n = 0;
    for (; name[n] && n + 1 < sizeof low; n++)
        low[n] = (char)tolower((unsigned char)name[n]);
    low[n] = '\0';
    return strstr(low, "phi-3") || strstr(low, "phi3");
}

static int u64_cmp(const void *pa, const void *pb)
{
    const uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
    return (a > b) - (a < b);
}

int gt_tok_special_init(gt_tokenizer *t, const gt_gguf *g, gt_err *err)
{
    t->sattr = calloc((size_t)t->n_vocab, 1);
    if (!t->sattr)
        return gt_err_set(err, "out of memory for special token flags");
    bool given[sizeof ROLES / sizeof ROLES[0]];
    for (size_t r = 0; r < sizeof ROLES / sizeof ROLES[0]; r++)
        given[r] = role_given(t, g, &ROLES[r]);
    int32_t n = 0;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        const int ty = t->types[id];
        bool control = ty == GT_TT_CONTROL || ty == GT_TT_UNKNOWN;
        bool special = control || ty == GT_TT_USER_DEFINED;
        bool forced = in_list(t, id, EOG_NAMES, SIZE_MAX);
        for (size_t r = 0; !forced && r < sizeof ROLES / sizeof ROLES[0]; r++)
            forced = !given[r] && in_list(t, id, ROLES[r].names, 10);
        if (forced)
            control = special = true;
        if (!special || t->piece_len[id] == 0)
            continue;
        t->sattr[id] = (uint8_t)(GT_SA_SPECIAL | (control ? GT_SA_PARSE : 0));
        n++;
    }
    if (is_phi3(g)) {
        for (int32_t id = 0; id < t->n_vocab; id++) {
            if (t->sattr[id] && !piece_is(t, id, "<unk>") && !piece_is(t, id, "<s>") &&
                !piece_is(t, id, "<|endoftext|>"))
                t->sattr[id] |= GT_SA_RSTRIP;
        }
    }
    t->n_special = 0;
    if (n == 0)
        return 0;
    t->special_ids = malloc((size_t)n * sizeof *t->special_ids);
    uint64_t *keys = malloc((size_t)n * sizeof *keys);
    if (!t->special_ids || !keys) {
        free(keys);
        return gt_err_set(err, "out of memory for %d special tokens", (int)n);
    }
    /* Longest first, ties by id (llama.cpp's sort leaves ties unspecified;
     * they matter only for two equally long pieces that overlap in a text). */
    for (int32_t id = 0; id < t->n_vocab; id++)
        if (t->sattr[id])
            keys[t->n_special++] = (uint64_t)(UINT32_MAX - t->piece_len[id]) << 32 | (uint32_t)id;
    qsort(keys, (size_t)t->n_special, sizeof *keys, u64_cmp);
    for (int32_t i = 0; i < t->n_special; i++)
        t->special_ids[i] = (int32_t)(keys[i] & UINT32_MAX);
    free(keys);
    return 0;
}
