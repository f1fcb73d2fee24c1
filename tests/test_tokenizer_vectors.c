/* test_tokenizer_vectors.c: gauntlet's tokenizer against llama.cpp's ids,
 * and the parse modes.
 *
 * tests/vectors/tokenizer/NAME.json (written by ci/tokenizer-vectors.sh
 * with the pinned peer's gt-peer-oracle) holds llama.cpp's ids for 27
 * strings, each with parse_special false and true, no BOS, for the Llama 3
 * (llama-bpe), Qwen 2 (qwen2), Phi-3 (SentencePiece), Gemma 3 and
 * Qwen2.5-Coder 0.5B (a real qwen2 GGUF) vocabularies. Every case must give exactly those ids. The vocabularies
 * are llama.cpp's models/ggml-vocab-*.gguf (../shared/models/vocab, or
 * GT_MODEL_DIR/vocab) and Gemma 3 270M; a missing one skips its case,
 * saying which. The parse-mode cases also run on small vocabularies written
 * here, so they never skip. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "gt/gguf.h"
#include "gt/tokenizer.h"
#include "testutil.h"

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = '\0';
    fclose(f);
    return s;
}

static gt_tokenizer *load(const char *path)
{
    gt_err err = {{0}};
    gt_gguf *g = NULL;
    gt_tokenizer *t = NULL;
    ck_assert_msg(gt_gguf_open(path, &g, &err) == 0, "%s: %s", path, err.msg);
    ck_assert_msg(gt_tokenizer_from_gguf(g, &t, &err) == 0, "%s: %s", path, err.msg);
    gt_gguf_close(g);
    return t;
}

static int32_t *encode(const gt_tokenizer *t, const char *s, bool special, int *n)
{
    gt_err err = {{0}};
    size_t len = strlen(s);
    int need = gt_tokenize_special(t, s, len, false, special, NULL, 0, &err);
    ck_assert_msg(need >= 0, "%s", err.msg);
    int32_t *ids = malloc(sizeof *ids * (size_t)(need + 1));
    ck_assert_ptr_nonnull(ids);
    *n = gt_tokenize_special(t, s, len, false, special, ids, need, &err);
    ck_assert_int_eq(*n, need);
    return ids;
}

static void print_ids(const char *what, const int32_t *ids, int n)
{
    fprintf(stderr, "  %s", what);
    for (int i = 0; i < n; i++)
        fprintf(stderr, " %d", (int)ids[i]);
    fprintf(stderr, "\n");
}

/* Every case of tests/vectors/tokenizer/NAME.json against the vocabulary
 * at path; returns the number of cases (all must match). */
static int run_file(const char *name, const char *path)
{
    char vec[4096];
    snprintf(vec, sizeof vec, "%s/tests/vectors/tokenizer/%s.json", GT_SOURCE_DIR, name);
    char *text = slurp(vec);
    cJSON *doc = cJSON_Parse(text);
    ck_assert_msg(doc != NULL, "%s: not JSON", vec);
    const cJSON *cases = cJSON_GetObjectItem(doc, "cases");
    ck_assert_msg(cJSON_IsArray(cases), "%s: no cases", vec);
    gt_tokenizer *t = load(path);
    int n_cases = 0, n_exact = 0, n_special = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cases) {
        const char *s = cJSON_GetStringValue(cJSON_GetObjectItem(c, "text"));
        const cJSON *ps = cJSON_GetObjectItem(c, "parse_special");
        const cJSON *want = cJSON_GetObjectItem(c, "ids");
        ck_assert_msg(s && cJSON_IsBool(ps) && cJSON_IsArray(want), "%s: case %d malformed", vec,
                      n_cases);
        const bool special = cJSON_IsTrue(ps);
        int n;
        int32_t *ids = encode(t, s, special, &n);
        bool exact = n == cJSON_GetArraySize(want);
        for (int i = 0; exact && i < n; i++)
            exact = ids[i] == (int32_t)cJSON_GetArrayItem(want, i)->valuedouble;
        if (!exact) {
            fprintf(stderr, "%s case %d (parse_special %d) '%s':\n", name, n_cases, special, s);
            print_ids("got ", ids, n);
            int32_t w[1024];
            int nw = 0;
            const cJSON *x;
            cJSON_ArrayForEach(x, want) if (nw < 1024) w[nw++] = (int32_t)x->valuedouble;
            print_ids("want", w, nw);
        }
        n_exact += exact;
        n_special += special;
        n_cases++;
        free(ids);
    }
    printf("%s: %d/%d cases equal llama.cpp's ids (%d with parse_special)\n", name, n_exact,
           n_cases, n_special);
    ck_assert_int_ge(n_cases, 40);
    ck_assert_int_eq(n_exact, n_cases);
    gt_tokenizer_free(t);
    cJSON_Delete(doc);
    free(text);
    return n_cases;
}

/* llama.cpp's own vectors beside the vocabulary (VOCAB.inp / VOCAB.out: 46
 * strings, each followed by "\n__ggml_vocab_test__\n"; one line of ids
 * each), when the mirror has them: prompt text, no BOS. */
static void run_upstream(const char *vocab)
{
    char rel[256];
    snprintf(rel, sizeof rel, "vocab/%s.inp", vocab);
    const char *pi = gt_test_model(rel);
    snprintf(rel, sizeof rel, "vocab/%s.out", vocab);
    const char *po = gt_test_model(rel);
    if (!pi || !po) {
        printf("%s: no .inp/.out beside it; llama.cpp's own vectors not run\n", vocab);
        return;
    }
    char *inp = slurp(pi), *outp = slurp(po);
    snprintf(rel, sizeof rel, "vocab/%s", vocab);
    gt_tokenizer *t = load(gt_test_model(rel));
    static const char sep[] = "\n__ggml_vocab_test__\n";
    char *s = inp, *line = outp;
    int n_strings = 0, n_exact = 0;
    for (char *e; (e = strstr(s, sep)) != NULL; s = e + strlen(sep)) {
        *e = '\0';
        char *nl = strchr(line, '\n');
        ck_assert_msg(nl != NULL, "%s: fewer result lines than strings", vocab);
        *nl = '\0';
        int n;
        int32_t *ids = encode(t, s, false, &n);
        char *p = line;
        bool exact = true;
        for (int i = 0; i < n && exact; i++) {
            char *q;
            long v = strtol(p, &q, 10);
            exact = q != p && v == ids[i];
            p = q;
        }
        while (*p == ' ')
            p++;
        exact = exact && *p == '\0';
        if (!exact) {
            fprintf(stderr, "%s upstream string %d '%s':\n  want %s\n", vocab, n_strings, s, line);
            print_ids("got ", ids, n);
        }
        n_exact += exact;
        n_strings++;
        line = nl + 1;
        free(ids);
    }
    printf("%s: %d/%d of llama.cpp's own strings exact\n", vocab, n_exact, n_strings);
    ck_assert_int_eq(n_strings, 46);
    ck_assert_int_eq(n_exact, n_strings);
    gt_tokenizer_free(t);
    free(inp);
    free(outp);
}

START_TEST(vectors_llama_bpe)
{
    run_file("llama-bpe", gt_test_model("vocab/ggml-vocab-llama-bpe.gguf"));
    run_upstream("ggml-vocab-llama-bpe.gguf");
}
END_TEST

START_TEST(vectors_qwen2)
{
    run_file("qwen2", gt_test_model("vocab/ggml-vocab-qwen2.gguf"));
    run_upstream("ggml-vocab-qwen2.gguf");
}
END_TEST

START_TEST(vectors_phi3)
{
    run_file("phi-3", gt_test_model("vocab/ggml-vocab-phi-3.gguf"));
    run_upstream("ggml-vocab-phi-3.gguf");
}
END_TEST

START_TEST(vectors_gemma3)
{
    run_file("gemma3", gt_test_gemma3());
}
END_TEST

#define QWEN25_FILE "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"

/* A real Qwen 2.5 GGUF (qwen2 pre-tokenizer, its own added tokens). */
START_TEST(vectors_qwen25)
{
    run_file("qwen2.5-coder", gt_test_fetched("GT_QWEN25", QWEN25_FILE));
}
END_TEST

/* The case: Gemma 3 stores "</s>" (212) as USER_DEFINED, but
 * llama.cpp makes it CONTROL by name, so prompt text "</s>" is three text
 * tokens, while "<s>" (203, USER_DEFINED) stays whole. */
START_TEST(gemma3_eos_text)
{
    gt_tokenizer *t = load(gt_test_gemma3());
    int n;
    int32_t *ids = encode(t, "</s><s>", false, &n);
    ck_assert_int_eq(n, 4);
    ck_assert_int_eq(ids[0], 954);
    ck_assert_int_eq(ids[1], 236751);
    ck_assert_int_eq(ids[2], 236813);
    ck_assert_int_eq(ids[3], 203);
    free(ids);
    ids = encode(t, "</s><s>", true, &n);
    ck_assert_int_eq(n, 2);
    ck_assert_int_eq(ids[0], 212);
    ck_assert_int_eq(ids[1], 203);
    free(ids);
    gt_tokenizer_free(t);
}
END_TEST

/* ---- parse modes on a vocabulary written here ---------------------------- */

/* A byte-level BPE vocabulary: the 256 byte tokens, "ab" by one merge,
 * special pieces of each type, and "abc" (262), which no merge reaches. */
static gt_tokenizer *small_bpe(const char *pre, const char *name)
{
    const char *extra[] = {"ab", "<|im_end|>", "<|mine|>", "</s>", "<|end|>", "<|user|>", "abc"};
    const int32_t extra_type[] = {1, 3, 4, 4, 3, 3, 1};
    const int n_extra = (int)(sizeof extra / sizeof extra[0]);
    const int n = 256 + n_extra;
    char **tokens = calloc((size_t)n, sizeof *tokens);
    int32_t *types = calloc((size_t)n, sizeof *types);
    ck_assert_ptr_nonnull(tokens);
    ck_assert_ptr_nonnull(types);
    int k = 0;
    for (unsigned b = 0; b < 256; b++, k++) {
        /* GPT-2's byte-to-code-point mapping, as in the vocabularies. */
        unsigned cp = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE ? b
                    : b <= 0x20 ? 0x100 + b
                    : b <= 0xA0 ? 0x121 + (b - 0x7F) : 0x143;
        char *u = calloc(4, 1);
        ck_assert_ptr_nonnull(u);
        if (cp < 0x80)
            u[0] = (char)cp;
        else
            u[0] = (char)(0xC0 | cp >> 6), u[1] = (char)(0x80 | (cp & 0x3F));
        tokens[k] = u;
        types[k] = 1;
    }
    for (int i = 0; i < n_extra; i++, k++) {
        tokens[k] = strdup(extra[i]);
        types[k] = extra_type[i];
    }
    gt_gguf_writer *w = gt_gguf_writer_new();
    ck_assert_ptr_nonnull(w);
    gt_gguf_writer_set_str(w, "general.architecture", "llama");
    if (name)
        gt_gguf_writer_set_str(w, "general.name", name);
    gt_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
    gt_gguf_writer_set_str(w, "tokenizer.ggml.pre", pre);
    gt_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)tokens,
                               (uint64_t)n);
    gt_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GT_GGUF_INT32, types, (uint64_t)n);
    const char *merges[] = {"a b"};
    gt_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", merges, 1);
    char path[4096];
    snprintf(path, sizeof path, "%s", gt_test_tmp("small.gguf"));
    gt_err err = {{0}};
    ck_assert_msg(gt_gguf_writer_write(w, path, &err) == 0, "%s", err.msg);
    gt_gguf_writer_free(w);
    for (int i = 0; i < n; i++)
        free(tokens[i]);
    free(tokens);
    free(types);
    gt_tokenizer *t = load(path);
    remove(path);
    return t;
}

/* ids of s as a space-separated string, for short comparisons */
static const char *ids_of(const gt_tokenizer *t, const char *s, bool special)
{
    static char buf[1024];
    int n;
    int32_t *ids = encode(t, s, special, &n);
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && k + 16 < sizeof buf; i++)
        k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%d", i ? " " : "", (int)ids[i]);
    free(ids);
    return buf;
}

START_TEST(parse_modes)
{
    gt_tokenizer *t = small_bpe("llama-bpe", NULL);
    /* "<|im_end|>" (CONTROL, 257) is text unless asked; "<|mine|>"
     * (USER_DEFINED, 258) is cut out in both modes; "</s>" (USER_DEFINED in
     * the file) is made CONTROL by its name, as llama.cpp does. */
    ck_assert_str_eq(ids_of(t, "ab<|im_end|>", true), "256 257");
    ck_assert_str_ne(ids_of(t, "ab<|im_end|>", false), "256 257");
    ck_assert_str_eq(ids_of(t, "<|mine|>", false), "258");
    ck_assert_str_eq(ids_of(t, "<|mine|>", true), "258");
    ck_assert_str_eq(ids_of(t, "</s>", true), "259");
    int n;
    int32_t *ids = encode(t, "</s>", false, &n);
    for (int i = 0; i < n; i++)
        ck_assert_int_lt(ids[i], 256); /* bytes only: no special token */
    free(ids);
    ck_assert(gt_token_is_special(t, 257));
    ck_assert(gt_token_is_special(t, 259));
    ck_assert(!gt_token_is_special(t, 258));
    /* The default entry point is prompt text: parse_special false. */
    gt_err err = {{0}};
    int32_t one[8];
    ck_assert_int_eq(gt_tokenize(t, "<|end|>", 7, false, one, 8, &err), 7);
    gt_tokenizer_free(t);
}
END_TEST

/* llama.cpp strips the whitespace after Phi-3's special tokens, keyed on
 * general.name; other models keep it. */
START_TEST(phi3_rstrip)
{
    gt_tokenizer *t = small_bpe("gpt-2", "Phi-3 mini");
    ck_assert_str_eq(ids_of(t, "<|user|>\n  ab<|end|>\n", true), "261 256 260");
    ck_assert(gt_token_strips_right(t, 261));
    gt_tokenizer_free(t);
    t = small_bpe("gpt-2", "not that model");
    ck_assert_str_ne(ids_of(t, "<|user|>\n  ab<|end|>\n", true), "261 256 260");
    ck_assert(!gt_token_strips_right(t, 261));
    gt_tokenizer_free(t);
}
END_TEST

/* Llama 3's pre-tokenizer takes a pre-token that is a token whole, merges
 * or not (llama.cpp's ignore_merges); GPT-2's merges. */
START_TEST(llama3_ignore_merges)
{
    gt_tokenizer *t = small_bpe("llama-bpe", NULL);
    ck_assert_str_eq(ids_of(t, "abc", false), "262");
    gt_tokenizer_free(t);
    t = small_bpe("gpt-2", NULL);
    ck_assert_str_eq(ids_of(t, "abc", false), "256 99");
    gt_tokenizer_free(t);
}
END_TEST

/* An unknown tokenizer.ggml.pre is refused by name, never defaulted. */
START_TEST(unknown_pre_refused)
{
    gt_err err = {{0}};
    gt_gguf_writer *w = gt_gguf_writer_new();
    const char *tokens[] = {"a", "b"};
    const char *merges[] = {"a b"};
    gt_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
    gt_gguf_writer_set_str(w, "tokenizer.ggml.pre", "qwen35");
    gt_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", tokens, 2);
    gt_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", merges, 1);
    char path[4096];
    snprintf(path, sizeof path, "%s", gt_test_tmp("pre.gguf"));
    ck_assert_int_eq(gt_gguf_writer_write(w, path, &err), 0);
    gt_gguf_writer_free(w);
    gt_gguf *g = NULL;
    gt_tokenizer *t = NULL;
    ck_assert_int_eq(gt_gguf_open(path, &g, &err), 0);
    ck_assert_int_ne(gt_tokenizer_from_gguf(g, &t, &err), 0);
    ck_assert_ptr_null(t);
    ck_assert_msg(strstr(err.msg, "'qwen35'") != NULL, "%s", err.msg);
    gt_gguf_close(g);
    remove(path);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tokenizer_vectors");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    const char *no_vocab = "llama.cpp's vocab file not found (../shared/models/vocab or "
                           "GT_MODEL_DIR/vocab; it ships in the llama-cpp-python 0.3.36 sdist)";
    tcase_add_test(tc, parse_modes);
    tcase_add_test(tc, phi3_rstrip);
    tcase_add_test(tc, unknown_pre_refused);
    tcase_add_test(tc, llama3_ignore_merges);
    gt_test_add_if(tc, vectors_llama_bpe, gt_test_model("vocab/ggml-vocab-llama-bpe.gguf"),
                   no_vocab);
    gt_test_add_if(tc, vectors_qwen2, gt_test_model("vocab/ggml-vocab-qwen2.gguf"), no_vocab);
    gt_test_add_if(tc, vectors_phi3, gt_test_model("vocab/ggml-vocab-phi-3.gguf"), no_vocab);
    const char *no_gemma = "Gemma 3 270M not found (ci/fetch-models.sh or GT_GEMMA3)";
    gt_test_add_if(tc, vectors_gemma3, gt_test_gemma3() != NULL, no_gemma);
    gt_test_add_if(tc, gemma3_eos_text, gt_test_gemma3() != NULL, no_gemma);
    gt_test_add_if(tc, vectors_qwen25, gt_test_fetched("GT_QWEN25", QWEN25_FILE) != NULL,
                   "Qwen2.5-Coder 0.5B not found (ci/fetch-models.sh or GT_QWEN25)");
    suite_add_tcase(s, tc);
    return gt_test_run(s);
}
