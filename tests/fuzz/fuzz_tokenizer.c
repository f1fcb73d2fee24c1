/* fuzz_tokenizer.c: libFuzzer target for both tokenizer models on real
 * vocabularies: stories260K (SentencePiece, "llama") and GPT-2 (byte-level
 * BPE, "gpt2"), from ../shared/models (or $GT_FUZZ_MODELS).
 *
 * Arbitrary bytes go in; the properties checked are the ones tokenizer.h
 * documents, the same as tests/test_tokenizer.c:
 *   - every id is in range and the count does not depend on the buffer size;
 *   - decode(encode(s)) == s, except (a) SentencePiece reads a literal U+2581
 *     as a space, so inputs holding one are not compared, and (b) a byte the
 *     vocabulary has no token for is dropped (GPT-2 has all 256);
 *   - concatenating gt_token_to_bytes gives the same bytes, but for the
 *     prefix space SentencePiece adds and only gt_detokenize removes.
 * With parse_special (template markup) only the count and range hold.
 * The vocabularies load once, lazily, so the same file serves libFuzzer and
 * the plain replay driver; missing models exit 77 (CTest's skip). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../runtime/src/tokenizer_impl.h"
#include "gt/gguf.h"
#include "gt/tokenizer.h"

#ifndef GT_SHARED_DIR
#define GT_SHARED_DIR "../shared"
#endif

typedef struct vocab {
    const char *file;
    gt_gguf *g;
    gt_tokenizer *t;
} vocab;

static vocab vocabs[] = {
    {"stories260K.gguf", NULL, NULL},
    {"vocab/ggml-vocab-gpt-2.gguf", NULL, NULL},
};
#define N_VOCABS (int)(sizeof vocabs / sizeof vocabs[0])

static void load(void)
{
    static int loaded;
    if (loaded)
        return;
    loaded = 1;
    const char *dir = getenv("GT_FUZZ_MODELS");
    char path[4096];
    for (int i = 0; i < N_VOCABS; i++) {
        gt_err err;
        if (dir)
            snprintf(path, sizeof path, "%s/%s", dir, vocabs[i].file);
        else
            snprintf(path, sizeof path, "%s/models/%s", GT_SHARED_DIR, vocabs[i].file);
        if (gt_gguf_open(path, &vocabs[i].g, &err) != 0 ||
            gt_tokenizer_from_gguf(vocabs[i].g, &vocabs[i].t, &err) != 0) {
            fprintf(stderr, "fuzz_tokenizer: SKIP: %s (set GT_FUZZ_MODELS to the models folder)\n",
                    err.msg);
            exit(77);
        }
    }
}

static void check(const gt_tokenizer *t, const uint8_t *data, size_t size, bool bos)
{
    gt_err err;
    int32_t small[4];
    int n = gt_tokenize(t, (const char *)data, size, bos, small, 4, &err);
    if (n < 0)
        __builtin_trap(); /* valid arguments: encoding cannot fail */
    int32_t *ids = malloc(sizeof *ids * (size_t)(n + 1));
    if (!ids)
        return;
    if (gt_tokenize(t, (const char *)data, size, bos, ids, n + 1, &err) != n)
        __builtin_trap(); /* the count must not depend on the buffer */
    if (memcmp(small, ids, sizeof *ids * (size_t)(n < 4 ? n : 4)) != 0)
        __builtin_trap();
    int32_t nv = gt_tokenizer_n_vocab(t);
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= nv)
            __builtin_trap();

    /* What decoding must give back. */
    bool llama = gt_tokenizer_kind_of(t) == GT_TOK_LLAMA;
    char *want = malloc(size + 1);
    size_t wl = 0;
    for (size_t i = 0; want && i < size; i++)
        if (llama || t->byte_fallback[data[i]] >= 0)
            want[wl++] = (char)data[i];
    bool has_sp = false;
    for (size_t i = 0; i + 2 < size; i++)
        if (data[i] == 0xE2 && data[i + 1] == 0x96 && data[i + 2] == 0x81)
            has_sp = true;

    int dl = gt_detokenize(t, ids, n, NULL, 0);
    if (dl < 0)
        __builtin_trap();
    char *d = malloc((size_t)dl + 1);
    if (want && d) {
        if (gt_detokenize(t, ids, n, d, (size_t)dl + 1) != dl)
            __builtin_trap();
        if (!(llama && has_sp) && ((size_t)dl != wl || memcmp(d, want, wl) != 0)) {
            fprintf(stderr, "round trip (%s, bos %d) of %zu bytes gave %d bytes\n",
                    llama ? "llama" : "gpt2", bos, size, dl);
            __builtin_trap();
        }
        /* Streaming: the sum of token byte lengths, less the prefix space. */
        size_t cat = 0;
        for (int i = 0; i < n; i++) {
            int b = gt_token_to_bytes(t, ids[i], NULL, 0);
            if (b < 0)
                __builtin_trap();
            cat += (size_t)b;
        }
        size_t prefix = llama && size > 0 && cat == (size_t)dl + 1;
        if (cat - prefix != (size_t)dl)
            __builtin_trap();
    }
    free(d);
    free(want);
    free(ids);
}

/* parse_special true: control tokens' text becomes those tokens, which
 * decode to nothing, so only the count and the ids' range are checked. */
static void check_special(const gt_tokenizer *t, const uint8_t *data, size_t size)
{
    gt_err err;
    int32_t small[4];
    int n = gt_tokenize_special(t, (const char *)data, size, false, true, small, 4, &err);
    if (n < 0)
        __builtin_trap();
    int32_t *ids = malloc(sizeof *ids * (size_t)(n + 1));
    if (!ids)
        return;
    if (gt_tokenize_special(t, (const char *)data, size, false, true, ids, n + 1, &err) != n)
        __builtin_trap();
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= gt_tokenizer_n_vocab(t))
            __builtin_trap();
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* BPE merging is quadratic in a word's length; long inputs only slow
     * the search without reaching new code. */
    if (size > 4096)
        return 0;
    load();
    for (int i = 0; i < N_VOCABS; i++) {
        check(vocabs[i].t, data, size, false);
        check(vocabs[i].t, data, size, true);
        check_special(vocabs[i].t, data, size);
    }
    return 0;
}
