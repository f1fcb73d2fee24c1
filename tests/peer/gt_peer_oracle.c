/* gt_peer_oracle.c: llama.cpp as an oracle, for goldens only (never linked
 * into gauntlet). Built by ci/peer-llamacpp.sh against the pinned peer's
 * libllama; its output is committed under tests/vectors/ by the scripts that
 * call it (ci/arch-goldens.sh, the tokenizer vectors), with the peer commit.
 *
 *   gt-peer-oracle logits MODEL --tokens 1,2,3 [--top 40] [--greedy 32]
 *       One batch over the tokens with every position's logits, K/V in F32
 *       and flash attention off (the most exact path llama.cpp has), then
 *       greedy decoding one token at a time. Prints JSON: per position the
 *       top logits (id, logit), and each greedy token with the gap between
 *       its logit and the runner-up (a near-tie makes a mismatch there a
 *       fact about rounding, not about the architecture).
 *   gt-peer-oracle tokenize MODEL [--special] [--add-special]
 *       Tokenizes stdin (all of it, bytes as given) with parse_special and
 *       add_special as asked; prints the ids as a JSON array. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml.h"
#include "llama.h"

static void quiet(enum ggml_log_level level, const char *text, void *user)
{
    (void)user;
    if (level >= GGML_LOG_LEVEL_ERROR)
        fputs(text, stderr);
}

static int usage(void)
{
    fputs("usage: gt-peer-oracle logits MODEL --tokens IDS [--top N] [--greedy N]\n"
          "       gt-peer-oracle tokenize MODEL [--special] [--add-special] < TEXT\n",
          stderr);
    return 2;
}

static int parse_ids(const char *s, llama_token **out)
{
    int cap = 16, n = 0;
    llama_token *ids = malloc(sizeof *ids * (size_t)cap);
    while (ids && *s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 0) {
            free(ids);
            return -1;
        }
        if (n == cap)
            ids = realloc(ids, sizeof *ids * (size_t)(cap *= 2));
        if (!ids)
            return -1;
        ids[n++] = (llama_token)v;
        s = *end == ',' ? end + 1 : end;
    }
    *out = ids;
    return ids ? n : -1;
}

/* The indices of the top n logits, best first (ties: lower id first). */
static void top_n(const float *logits, int n_vocab, int n, int *idx)
{
    for (int k = 0; k < n; k++)
        idx[k] = -1;
    for (int v = 0; v < n_vocab; v++) {
        int k = n;
        while (k > 0 && (idx[k - 1] < 0 || logits[v] > logits[idx[k - 1]]))
            k--;
        if (k >= n)
            continue;
        memmove(idx + k + 1, idx + k, sizeof *idx * (size_t)(n - k - 1));
        idx[k] = v;
    }
}

static int cmd_logits(struct llama_model *model, const llama_token *toks, int n_tok, int top,
                      int greedy)
{
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)(n_tok + greedy + 16);
    cp.n_batch = cp.n_ubatch = (uint32_t)(n_tok > 0 ? n_tok : 1);
    cp.n_threads = cp.n_threads_batch = 2;
    cp.type_k = cp.type_v = GGML_TYPE_F32;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fputs("gt-peer-oracle: cannot create a context\n", stderr);
        return 1;
    }
    struct llama_batch b = llama_batch_init(n_tok, 0, 1);
    for (int i = 0; i < n_tok; i++) {
        b.token[i] = toks[i];
        b.pos[i] = i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = 1;
    }
    b.n_tokens = n_tok;
    if (llama_decode(ctx, b) != 0) {
        fputs("gt-peer-oracle: llama_decode failed on the prompt\n", stderr);
        return 1;
    }
    int *idx = malloc(sizeof *idx * (size_t)(top > 2 ? top : 2));
    printf("{\"n_vocab\": %d, \"tokens\": [", n_vocab);
    for (int i = 0; i < n_tok; i++)
        printf("%s%d", i ? ", " : "", toks[i]);
    printf("],\n \"positions\": [\n");
    for (int i = 0; i < n_tok; i++) {
        const float *lg = llama_get_logits_ith(ctx, i);
        top_n(lg, n_vocab, top, idx);
        printf("  {\"top\": [");
        for (int k = 0; k < top; k++)
            printf("%s[%d, %.9g]", k ? ", " : "", idx[k], (double)lg[idx[k]]);
        printf("]}%s\n", i + 1 < n_tok ? "," : "");
    }
    printf(" ],\n \"greedy\": [");
    const float *lg = llama_get_logits_ith(ctx, n_tok - 1);
    for (int step = 0; step < greedy; step++) {
        top_n(lg, n_vocab, 2, idx);
        llama_token t = idx[0];
        printf("%s{\"id\": %d, \"gap\": %.6g}", step ? ", " : "", t,
               (double)(lg[idx[0]] - lg[idx[1]]));
        if (step + 1 == greedy)
            break;
        struct llama_batch one = llama_batch_get_one(&t, 1);
        if (llama_decode(ctx, one) != 0) {
            fputs("\ngt-peer-oracle: llama_decode failed while decoding\n", stderr);
            return 1;
        }
        lg = llama_get_logits_ith(ctx, -1);
    }
    printf("]}\n");
    free(idx);
    llama_batch_free(b);
    llama_free(ctx);
    return 0;
}

static int cmd_tokenize(struct llama_model *model, bool special, bool add_special)
{
    size_t cap = 1 << 16, n = 0;
    char *text = malloc(cap);
    size_t got;
    while (text && (got = fread(text + n, 1, cap - n, stdin)) > 0)
        if ((n += got) == cap)
            text = realloc(text, cap *= 2);
    if (!text)
        return 1;
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    int max = (int)n + 16;
    llama_token *ids = malloc(sizeof *ids * (size_t)max);
    int k = llama_tokenize(vocab, text, (int32_t)n, ids, max, add_special, special);
    if (k < 0) {
        fputs("gt-peer-oracle: llama_tokenize failed\n", stderr);
        return 1;
    }
    printf("[");
    for (int i = 0; i < k; i++)
        printf("%s%d", i ? ", " : "", ids[i]);
    printf("]\n");
    free(ids);
    free(text);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return usage();
    const char *verb = argv[1], *path = argv[2];
    const char *tokens = NULL;
    int top = 40, greedy = 32;
    bool special = false, add_special = false;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--tokens") && i + 1 < argc) tokens = argv[++i];
        else if (!strcmp(argv[i], "--top") && i + 1 < argc) top = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--greedy") && i + 1 < argc) greedy = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--special")) special = true;
        else if (!strcmp(argv[i], "--add-special")) add_special = true;
        else return usage();
    }
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    struct llama_model *model = llama_model_load_from_file(path, mp);
    if (!model) {
        fprintf(stderr, "gt-peer-oracle: llama.cpp cannot load %s\n", path);
        return 1;
    }
    int rc;
    if (!strcmp(verb, "logits")) {
        llama_token *toks = NULL;
        int n = tokens ? parse_ids(tokens, &toks) : -1;
        if (n <= 0 || top < 2 || greedy < 1)
            return usage();
        rc = cmd_logits(model, toks, n, top, greedy);
        free(toks);
    } else if (!strcmp(verb, "tokenize")) {
        rc = cmd_tokenize(model, special, add_special);
    } else {
        rc = usage();
    }
    llama_model_free(model);
    llama_backend_free();
    return rc;
}
