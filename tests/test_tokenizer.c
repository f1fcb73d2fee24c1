/* test_tokenizer.c: the tokenizers against llama.cpp's test vectors
 * (../shared/models/vocab; a printed SKIP without them), on the real
 * vocabularies of stories260K (or its synthetic stand-in) and SmolLM2, and on small synthetic vocabularies written with the GGUF writer
 * to pin down merge priority, byte fallback, decoding and every load error.
 * Also the pieces underneath: UTF-8 decoding, code point classes, the GPT-2
 * byte mapping and pre-tokenizer, and speed on long and degenerate input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../runtime/src/tokenizer_impl.h"
#include "../runtime/src/unicode.h"
#include "gt/gguf.h"
#include "gt/tokenizer.h"
#include "testutil.h"

/* ---- helpers ------------------------------------------------------------ */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Opens path and builds its tokenizer; the GGUF is closed at once, which
 * also checks that the tokenizer keeps nothing pointing into it. */
static gt_tokenizer *load_tok(const char *path)
{
    gt_err err = {{0}};
    gt_gguf *g = NULL;
    gt_tokenizer *t = NULL;
    ck_assert_msg(path != NULL, "model file missing");
    ck_assert_msg(gt_gguf_open(path, &g, &err) == 0, "%s: %s", path, err.msg);
    ck_assert_msg(gt_tokenizer_from_gguf(g, &t, &err) == 0, "%s: %s", path, err.msg);
    gt_gguf_close(g);
    return t;
}

/* Encodes with the size-query-then-fill protocol; *n gets the count. */
static int32_t *encode(const gt_tokenizer *t, const char *s, size_t len, bool bos, int *n)
{
    gt_err err = {{0}};
    int need = gt_tokenize(t, s, len, bos, NULL, 0, &err);
    ck_assert_msg(need >= 0, "tokenize: %s", err.msg);
    int32_t *ids = malloc(sizeof *ids * (size_t)(need + 1));
    ck_assert_ptr_nonnull(ids);
    int got = gt_tokenize(t, s, len, bos, ids, need, &err);
    ck_assert_int_eq(got, need);
    *n = need;
    return ids;
}

static char *decode(const gt_tokenizer *t, const int32_t *ids, int n, int *len)
{
    int need = gt_detokenize(t, ids, n, NULL, 0);
    ck_assert_int_ge(need, 0);
    char *s = malloc((size_t)need + 1);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(gt_detokenize(t, ids, n, s, (size_t)need + 1), need);
    ck_assert_int_eq(s[need], '\0');
    *len = need;
    return s;
}

static char *ids_str(const int32_t *ids, int n)
{
    static char buf[8192];
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && k + 16 < sizeof buf; i++)
        k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%d", i ? " " : "", (int)ids[i]);
    return buf;
}

/* decode(encode(s)) == s, except that bytes the vocabulary has no token
 * for at all are dropped (SmolLM2 lacks 21 of the 256, e.g. 0xFF). */
static void check_roundtrip(const gt_tokenizer *t, const char *s, size_t len)
{
    char *want = malloc(len + 1);
    ck_assert_ptr_nonnull(want);
    size_t wl = 0;
    for (size_t i = 0; i < len; i++) {
        if (t->byte_fallback[(unsigned char)s[i]] >= 0 || gt_tokenizer_kind_of(t) == GT_TOK_LLAMA)
            want[wl++] = s[i];
    }
    for (int bos = 0; bos < 2; bos++) {
        int n, dl;
        int32_t *ids = encode(t, s, len, bos, &n);
        char *d = decode(t, ids, n, &dl);
        ck_assert_msg((size_t)dl == wl && memcmp(d, want, wl) == 0,
                      "round trip (bos %d) of '%.*s' gave '%s' (ids %s)", bos, (int)len, s, d,
                      ids_str(ids, n));
        /* Streaming: concatenating token bytes gives the same text, except
         * the llama prefix space, which only gt_detokenize removes. */
        size_t cat = 0;
        for (int i = 0; i < n; i++)
            cat += (size_t)gt_token_to_bytes(t, ids[i], NULL, 0);
        size_t prefix = gt_tokenizer_kind_of(t) == GT_TOK_LLAMA && len > 0;
        ck_assert_uint_eq(cat, wl + prefix);
        free(d);
        free(ids);
    }
    free(want);
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    buf[n] = '\0';
    *len = (size_t)n;
    return buf;
}

/* ---- UTF-8 and code point classes ---------------------------------------- */

START_TEST(utf8_decode_valid_and_invalid)
{
    static const struct {
        const char *s;
        size_t n;
        uint32_t cp;
        size_t len;
    } cases[] = {
        {"A", 1, 'A', 1},
        {"\xc3\xa9", 2, 0xE9, 2},
        {"\xe2\x96\x81", 3, 0x2581, 3},
        {"\xf0\x9f\xa6\x99", 4, 0x1F999, 4},
        {"\xf4\x8f\xbf\xbf", 4, 0x10FFFF, 4},
        {"\x80", 1, GT_UNI_INVALID, 1},             /* lone continuation */
        {"\xc0\xaf", 2, GT_UNI_INVALID, 1},         /* overlong '/' */
        {"\xe0\x80\xaf", 3, GT_UNI_INVALID, 1},     /* overlong */
        {"\xed\xa0\x80", 3, GT_UNI_INVALID, 1},     /* surrogate */
        {"\xf4\x90\x80\x80", 4, GT_UNI_INVALID, 1}, /* > U+10FFFF */
        {"\xe2\x96", 2, GT_UNI_INVALID, 1},         /* truncated */
        {"\xc3(", 2, GT_UNI_INVALID, 1},            /* bad continuation */
        {"\xff", 1, GT_UNI_INVALID, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint32_t cp = 0;
        size_t len = gt_utf8_decode((const unsigned char *)cases[i].s, cases[i].n, &cp);
        ck_assert_msg(len == cases[i].len && cp == cases[i].cp, "case %zu: len %zu cp %X", i, len,
                      (unsigned)cp);
        if (cp != GT_UNI_INVALID) {
            char out[4];
            ck_assert_uint_eq(gt_utf8_encode(cp, out), len);
            ck_assert(memcmp(out, cases[i].s, len) == 0);
        }
    }
}
END_TEST

START_TEST(unicode_classes)
{
    for (uint32_t c = 0; c < 128; c++)
        ck_assert_int_eq(gt_unicode_class(c), gt_unicode_class_slow(c));
    ck_assert_int_eq(gt_unicode_class('a'), GT_UNI_LETTER);
    ck_assert_int_eq(gt_unicode_class('7'), GT_UNI_NUMBER);
    ck_assert_int_eq(gt_unicode_class('\n'), GT_UNI_SPACE);
    ck_assert_int_eq(gt_unicode_class('\''), GT_UNI_OTHER);
    ck_assert_int_eq(gt_unicode_class(0x1C), GT_UNI_OTHER); /* isspace() in Python, not \s */
    ck_assert_int_eq(gt_unicode_class(0xE9), GT_UNI_LETTER);   /* é */
    ck_assert_int_eq(gt_unicode_class(0x65E5), GT_UNI_LETTER); /* 日 */
    ck_assert_int_eq(gt_unicode_class(0x0663), GT_UNI_NUMBER); /* Arabic-Indic 3 */
    ck_assert_int_eq(gt_unicode_class(0xBD), GT_UNI_NUMBER);   /* ½ (No) */
    ck_assert_int_eq(gt_unicode_class(0x2167), GT_UNI_NUMBER); /* Ⅷ (Nl) */
    ck_assert_int_eq(gt_unicode_class(0x3000), GT_UNI_SPACE);
    ck_assert_int_eq(gt_unicode_class(0xA0), GT_UNI_SPACE);
    ck_assert_int_eq(gt_unicode_class(0x1F999), GT_UNI_OTHER); /* emoji */
    ck_assert_int_eq(gt_unicode_class(0x0301), GT_UNI_OTHER);  /* combining accent (Mn) */
    ck_assert_int_eq(gt_unicode_class(GT_UNI_INVALID), GT_UNI_OTHER);
    ck_assert_ptr_nonnull(gt_unicode_version());
}
END_TEST

START_TEST(gpt2_byte_mapping)
{
    bool seen[0x200] = {false};
    for (unsigned b = 0; b < 256; b++) {
        uint32_t cp = gt_tok_byte_to_cp(b);
        ck_assert_uint_lt(cp, 0x200);
        ck_assert_msg(!seen[cp], "byte %u maps to a taken code point", b);
        seen[cp] = true;
        ck_assert_int_eq(gt_tok_cp_to_byte(cp), (int)b);
    }
    ck_assert_uint_eq(gt_tok_byte_to_cp(' '), 0x120);  /* Ġ */
    ck_assert_uint_eq(gt_tok_byte_to_cp('\n'), 0x10A); /* Ċ */
    ck_assert_uint_eq(gt_tok_byte_to_cp('A'), 'A');
    ck_assert_uint_eq(gt_tok_byte_to_cp(0xAD), 0x143);
    ck_assert_int_eq(gt_tok_cp_to_byte(0x144), -1);
    ck_assert_int_eq(gt_tok_cp_to_byte(0x20), -1);
}
END_TEST

/* ---- pre-tokenizer ------------------------------------------------------ */

typedef struct words {
    char buf[1024];
    const char *text;
} words;

/* Joins the pre-tokens with '|' for easy comparison. */
static int collect(void *ctx, size_t begin, size_t end)
{
    words *w = ctx;
    size_t k = strlen(w->buf);
    if (k)
        w->buf[k++] = '|';
    memcpy(w->buf + k, w->text + begin, end - begin);
    w->buf[k + end - begin] = '\0';
    return 0;
}

static void check_split(gt_tok_pre pre, const char *text, const char *want)
{
    words w = {.text = text};
    gt_err err = {{0}};
    ck_assert_int_eq(gt_tok_pretokenize(pre, text, strlen(text), collect, &w, &err), 0);
    ck_assert_msg(strcmp(w.buf, want) == 0, "split '%s': got '%s' want '%s'", text, w.buf, want);
}

START_TEST(pretokenizer_gpt2)
{
    check_split(GT_PRE_GPT2, "Hello world", "Hello| world");
    check_split(GT_PRE_GPT2, "  Hello", " | Hello");
    check_split(GT_PRE_GPT2, "a   ", "a|   ");
    check_split(GT_PRE_GPT2, "a\n\n b", "a|\n\n| b");
    check_split(GT_PRE_GPT2, "\tHi", "\t|Hi");
    check_split(GT_PRE_GPT2, "I'm he's we'll they're 've 'd 'D", "I|'m| he|'s| we|'ll| they|'re| "
                "'|ve| '|d| '|D"); /* " 've": " ?[^\s\p{L}\p{N}]+" wins at the space */
    check_split(GT_PRE_GPT2, "x=12345, y !!", "x|=|12345|,| y| !!");
    check_split(GT_PRE_GPT2, "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac 3\xc2\xbd",
                "caf\xc3\xa9| \xe6\x97\xa5\xe6\x9c\xac| 3\xc2\xbd");
    check_split(GT_PRE_GPT2, "a\xff\xfe b", "a|\xff\xfe| b");
    check_split(GT_PRE_GPT2, "", "");
}
END_TEST

START_TEST(pretokenizer_smollm)
{
    check_split(GT_PRE_SMOLLM, "12345", "1|2|3|4|5");
    check_split(GT_PRE_SMOLLM, "a 1", "a| |1");
    check_split(GT_PRE_SMOLLM, "year 2024!", "year| |2|0|2|4|!");
    check_split(GT_PRE_SMOLLM, "x\xc2\xbd", "x|\xc2\xbd");
    check_split(GT_PRE_SMOLLM, "Hello world", "Hello| world");
}
END_TEST

/* Llama 3's pattern: one non-letter may lead a word, digits go in threes,
 * punctuation keeps its trailing newlines, and a whitespace run that holds
 * newlines ends at the last one. Qwen2's differs only in single digits. */
START_TEST(pretokenizer_llama3_qwen2)
{
    check_split(GT_PRE_LLAMA3, "Hello world", "Hello| world");
    check_split(GT_PRE_LLAMA3, "12345 1234567", "123|45| |123|456|7");
    check_split(GT_PRE_QWEN2, "12345 12", "1|2|3|4|5| |1|2");
    check_split(GT_PRE_LLAMA3, "I'M WE'LL it's", "I|'M| WE|'LL| it|'s");
    check_split(GT_PRE_LLAMA3, "x=12, y!!\n\nz", "x|=|12|,| y|!!\n\n|z");
    check_split(GT_PRE_LLAMA3, "a  \n\n  b", "a|  \n\n| | b");
    check_split(GT_PRE_LLAMA3, "\tHi (x)", "\tHi| (|x|)");
    check_split(GT_PRE_QWEN2, "\r\nA\n", "\r\n|A|\n");
    check_split(GT_PRE_LLAMA3, "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac 3\xc2\xbd",
                "caf\xc3\xa9| \xe6\x97\xa5\xe6\x9c\xac| |3\xc2\xbd");
    check_split(GT_PRE_LLAMA3, "a ", "a| ");
    check_split(GT_PRE_LLAMA3, "", "");
}
END_TEST

/* ---- synthetic vocabularies --------------------------------------------- */

#define SP "\xe2\x96\x81" /* U+2581, SentencePiece's space */

typedef struct spm_def {
    const char *pieces[64];
    float scores[64];
    int32_t types[64];
    int n;
} spm_def;

static gt_gguf_writer *spm_writer(const spm_def *d)
{
    gt_gguf_writer *w = gt_gguf_writer_new();
    ck_assert_ptr_nonnull(w);
    ck_assert_int_eq(gt_gguf_writer_set_str(w, "general.architecture", "llama"), 0);
    ck_assert_int_eq(gt_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama"), 0);
    ck_assert_int_eq(gt_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", d->pieces,
                                                (uint64_t)d->n), 0);
    ck_assert_int_eq(gt_gguf_writer_set_arr(w, "tokenizer.ggml.scores", GT_GGUF_FLOAT32, d->scores,
                                            (uint64_t)d->n), 0);
    ck_assert_int_eq(gt_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GT_GGUF_INT32,
                                            d->types, (uint64_t)d->n), 0);
    return w;
}

static void spm_add(spm_def *d, const char *piece, float score, int32_t type)
{
    d->pieces[d->n] = piece;
    d->scores[d->n] = score;
    d->types[d->n] = type;
    d->n++;
}

/* <unk> <s> </s> then the given normal pieces. */
static spm_def spm_base(void)
{
    spm_def d = {.n = 0};
    spm_add(&d, "<unk>", 0, GT_TT_UNKNOWN);
    spm_add(&d, "<s>", 0, GT_TT_CONTROL);
    spm_add(&d, "</s>", 0, GT_TT_CONTROL);
    return d;
}

/* Writes w to a temporary file and loads it; returns the load's result. */
static int write_load(gt_gguf_writer *w, const char *name, gt_tokenizer **t, gt_err *err)
{
    const char *path = gt_test_tmp(name);
    ck_assert_msg(gt_gguf_writer_write(w, path, err) == 0, "%s", err->msg);
    gt_gguf_writer_free(w);
    gt_gguf *g = NULL;
    ck_assert_msg(gt_gguf_open(path, &g, err) == 0, "%s", err->msg);
    *t = NULL;
    int rc = gt_tokenizer_from_gguf(g, t, err);
    gt_gguf_close(g);
    return rc;
}

static gt_tokenizer *write_load_ok(gt_gguf_writer *w, const char *name)
{
    gt_err err = {{0}};
    gt_tokenizer *t = NULL;
    ck_assert_msg(write_load(w, name, &t, &err) == 0, "%s", err.msg);
    return t;
}

static void expect_ids(const gt_tokenizer *t, const char *s, const char *want)
{
    int n;
    int32_t *ids = encode(t, s, strlen(s), false, &n);
    ck_assert_msg(strcmp(ids_str(ids, n), want) == 0, "'%s': got [%s] want [%s]", s,
                  ids_str(ids, n), want);
    free(ids);
}

START_TEST(spm_score_order_and_ties)
{
    /* ids: 3 a, 4 b, 5 c, 6 ab, 7 bc, 8 SP */
    spm_def d = spm_base();
    spm_add(&d, "a", -1, GT_TT_NORMAL);
    spm_add(&d, "b", -1, GT_TT_NORMAL);
    spm_add(&d, "c", -1, GT_TT_NORMAL);
    spm_add(&d, "ab", -5, GT_TT_NORMAL);
    spm_add(&d, "bc", -2, GT_TT_NORMAL);
    spm_add(&d, SP, -1, GT_TT_NORMAL);
    gt_gguf_writer *w = spm_writer(&d);
    gt_gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", false);
    gt_tokenizer *t = write_load_ok(w, "spm1.gguf");
    ck_assert_int_eq(gt_tokenizer_kind_of(t), GT_TOK_LLAMA);
    expect_ids(t, "abc", "3 7"); /* "bc" scores higher than "ab" */
    expect_ids(t, "ab c", "6 8 5");
    gt_tokenizer_free(t);

    d.scores[6] = d.scores[7] = -3; /* a tie: the leftmost pair merges */
    t = write_load_ok(spm_writer(&d), "spm2.gguf");
    ck_assert(gt_tokenizer_adds_bos(t));
    ck_assert_int_eq(gt_tokenizer_bos(t), 1);
    ck_assert_int_eq(gt_tokenizer_eos(t), 2);
    expect_ids(t, "abc", "8 6 5"); /* prefix space by default */
    int n, len;
    int32_t *ids = encode(t, "abc", 3, true, &n);
    ck_assert_str_eq(ids_str(ids, n), "1 8 6 5");
    char *s = decode(t, ids, n, &len);
    ck_assert_str_eq(s, "abc");
    free(s);
    free(ids);
    /* Control pieces are never matched in text. */
    expect_ids(t, "<s>", "8 0 0 0");
    gt_tokenizer_free(t);
}
END_TEST

START_TEST(spm_byte_fallback_and_unk)
{
    static char hex[256][7];
    spm_def d = spm_base();
    spm_add(&d, "a", -1, GT_TT_NORMAL);  /* 3 */
    spm_add(&d, SP, -1, GT_TT_NORMAL);   /* 4 */
    for (int b = 0xC3; b <= 0xC4; b++) { /* 5, 6: only two byte tokens */
        snprintf(hex[b], sizeof hex[b], "<0x%02X>", b);
        spm_add(&d, hex[b], 0, GT_TT_BYTE);
    }
    gt_tokenizer *t = write_load_ok(spm_writer(&d), "spm3.gguf");
    expect_ids(t, "a\xc3\xa9", "4 3 5 0"); /* é = C3 A9: 0xA9 has no token -> unk */
    int n, len;
    int32_t *ids = encode(t, "\xc3\xc4", 2, false, &n);
    char *s = decode(t, ids, n, &len);
    ck_assert_int_eq(len, 2);
    ck_assert(memcmp(s, "\xc3\xc4", 2) == 0);
    free(s);
    free(ids);
    /* Decoding: byte -> byte, SP -> space, control -> nothing, unk -> its piece. */
    char buf[16];
    ck_assert_int_eq(gt_token_to_bytes(t, 5, buf, sizeof buf), 1);
    ck_assert_int_eq((unsigned char)buf[0], 0xC3);
    ck_assert_int_eq(gt_token_to_bytes(t, 4, buf, sizeof buf), 1);
    ck_assert_int_eq(buf[0], ' ');
    ck_assert_int_eq(gt_token_to_bytes(t, 1, buf, sizeof buf), 0);
    ck_assert_int_eq(gt_token_to_bytes(t, 0, buf, sizeof buf), 5);
    ck_assert_int_eq(gt_token_to_bytes(t, 99, buf, sizeof buf), -1);
    ck_assert_int_eq(gt_token_to_bytes(t, -1, buf, sizeof buf), -1);
    ck_assert_str_eq(gt_token_piece(t, 5), "<0xC3>");
    ck_assert_ptr_null(gt_token_piece(t, 7));
    gt_tokenizer_free(t);

    /* No unknown token and no byte token: the byte is dropped. */
    gt_gguf_writer *w = spm_writer(&d);
    gt_gguf_writer_set_i32(w, "tokenizer.ggml.unknown_token_id", -1);
    t = write_load_ok(w, "spm4.gguf");
    expect_ids(t, "\xa9" "a", "4 3");
    gt_tokenizer_free(t);
    /* Nor may a control token stand in for it. */
    d.types[0] = GT_TT_CONTROL;
    t = write_load_ok(spm_writer(&d), "spm5.gguf");
    expect_ids(t, "\xa9" "a", "4 3");
    gt_tokenizer_free(t);
}
END_TEST

/* A byte-level BPE vocabulary: the 256 mapped bytes, then extra pieces. */
static gt_gguf_writer *bpe_writer(const char *const *extra, int n_extra,
                                  const char *const *merges, int n_merges, const char *pre)
{
    static char bytes[256][4];
    const char *pieces[300];
    int n = 0;
    for (unsigned b = 0; b < 256; b++) {
        size_t k = gt_utf8_encode(gt_tok_byte_to_cp(b), bytes[b]);
        bytes[b][k] = '\0';
        pieces[n++] = bytes[b];
    }
    for (int i = 0; i < n_extra; i++)
        pieces[n++] = extra[i];
    gt_gguf_writer *w = gt_gguf_writer_new();
    ck_assert_ptr_nonnull(w);
    gt_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
    if (pre)
        gt_gguf_writer_set_str(w, "tokenizer.ggml.pre", pre);
    gt_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", pieces, (uint64_t)n);
    gt_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", merges, (uint64_t)n_merges);
    return w;
}

START_TEST(bpe_merge_ranks)
{
    static const char *const extra[] = {"<|end|>", "he", "ll", "hell", "hello", "lo", "\xc4\xa0w"};
    static const char *const merges[] = {"h e", "l l", "he ll", "l o", "hell o", "\xc4\xa0 w"};
    gt_tokenizer *t = write_load_ok(bpe_writer(extra, 7, merges, 6, "gpt-2"), "bpe1.gguf");
    ck_assert_int_eq(gt_tokenizer_kind_of(t), GT_TOK_GPT2);
    ck_assert(!gt_tokenizer_adds_bos(t));
    ck_assert_int_eq(gt_tokenizer_bos(t), -1);
    /* ids: bytes are their own id; 256 <|end|>, 257 he, 258 ll, 259 hell,
     * 260 hello, 261 lo, 262 " w" */
    expect_ids(t, "hello", "260");    /* h e, l l, he ll, then hell o ("l o" went stale) */
    expect_ids(t, "helo", "257 261"); /* he, lo */
    expect_ids(t, "hello w", "260 262");
    expect_ids(t, "lll", "258 108"); /* leftmost "l l" first */
    expect_ids(t, "<|end|>", "60 124 101 110 100 124 62"); /* no merges reach it */
    ck_assert_int_eq(gt_tokenizer_n_vocab(t), 263);
    int n, len;
    int32_t *ids = encode(t, "hello w\xff", 8, false, &n);
    char *s = decode(t, ids, n, &len);
    ck_assert_str_eq(s, "hello w\xff");
    free(s);
    free(ids);
    gt_tokenizer_free(t);
}
END_TEST

typedef void (*mutate_fn)(gt_gguf_writer *w);

static void expect_load_error(gt_gguf_writer *w, const char *name, const char *want)
{
    gt_err err = {{0}};
    gt_tokenizer *t = (gt_tokenizer *)1;
    ck_assert_int_eq(write_load(w, name, &t, &err), -1);
    ck_assert_ptr_null(t);
    ck_assert_msg(strstr(err.msg, want) != NULL, "error '%s' lacks '%s'", err.msg, want);
}

START_TEST(load_errors)
{
    spm_def d = spm_base();
    spm_add(&d, "a", -1, GT_TT_NORMAL);
    static const char *const m_ok[] = {"a b"};
    static const char *const m_bad[] = {"ab"};
    float two[2] = {0, 0};
    int32_t big = 7;
    gt_gguf_writer *w;

    w = gt_gguf_writer_new();
    gt_gguf_writer_set_str(w, "general.architecture", "llama");
    expect_load_error(w, "e1.gguf", "missing tokenizer.ggml.model");

    w = spm_writer(&d);
    gt_gguf_writer_set_str(w, "tokenizer.ggml.model", "bert");
    expect_load_error(w, "e2.gguf", "unsupported tokenizer.ggml.model 'bert'");

    w = spm_writer(&d);
    gt_gguf_writer_set_u32(w, "tokenizer.ggml.tokens", 5);
    expect_load_error(w, "e3.gguf", "tokenizer.ggml.tokens is a uint32");

    w = spm_writer(&d);
    gt_gguf_writer_set_arr(w, "tokenizer.ggml.scores", GT_GGUF_FLOAT32, two, 2);
    expect_load_error(w, "e4.gguf", "tokenizer.ggml.scores has 2 elements");

    w = spm_writer(&d);
    gt_gguf_writer_set_arr(w, "tokenizer.ggml.scores", GT_GGUF_INT32, d.types, (uint64_t)d.n);
    expect_load_error(w, "e5.gguf", "tokenizer.ggml.scores is an array of int32");

    d.types[3] = 9;
    expect_load_error(spm_writer(&d), "e6.gguf", "unknown token_type 9");
    d.types[3] = GT_TT_NORMAL;

    w = spm_writer(&d);
    gt_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 4);
    expect_load_error(w, "e7.gguf", "bos_token_id = 4 is out of range");

    w = spm_writer(&d);
    gt_gguf_writer_set_str(w, "tokenizer.ggml.eos_token_id", "2");
    expect_load_error(w, "e8.gguf", "eos_token_id is a string");

    w = spm_writer(&d);
    gt_gguf_writer_set_u32(w, "tokenizer.ggml.add_bos_token", 1);
    expect_load_error(w, "e9.gguf", "add_bos_token is a uint32, expected a bool");

    expect_load_error(bpe_writer(NULL, 0, m_ok, 1, "qwen35"), "e10.gguf",
                      "unsupported tokenizer.ggml.pre 'qwen35'");
    expect_load_error(bpe_writer(NULL, 0, m_bad, 1, NULL), "e11.gguf",
                      "merge 0 ('ab') is not two pieces");

    w = bpe_writer(NULL, 0, m_ok, 1, NULL);
    gt_gguf_writer_set_arr(w, "tokenizer.ggml.merges", GT_GGUF_INT32, &big, 1);
    expect_load_error(w, "e12.gguf", "tokenizer.ggml.merges is an array of int32");

    w = gt_gguf_writer_new();
    gt_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
    gt_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", d.pieces, (uint64_t)d.n);
    expect_load_error(w, "e13.gguf", "missing tokenizer.ggml.merges");

    /* Every message says where it comes from. */
    w = spm_writer(&d);
    gt_gguf_writer_set_str(w, "tokenizer.ggml.model", "bert");
    gt_err err = {{0}};
    gt_tokenizer *t;
    ck_assert_int_eq(write_load(w, "e14.gguf", &t, &err), -1);
    ck_assert_msg(strncmp(err.msg, "tokenizer: ", 11) == 0, "%s", err.msg);
    ck_assert_int_eq(gt_tokenizer_from_gguf(NULL, &t, &err), -1);
}
END_TEST

START_TEST(api_misuse)
{
    gt_tokenizer *t = load_tok(gt_test_llama());
    gt_err err = {{0}};
    int32_t ids[4];
    ck_assert_int_eq(gt_tokenize(NULL, "a", 1, false, ids, 4, &err), -1);
    ck_assert_int_eq(gt_tokenize(t, NULL, 1, false, ids, 4, &err), -1);
    ck_assert_int_eq(gt_tokenize(t, "a", 1, false, ids, -1, &err), -1);
    ck_assert_int_eq(gt_tokenize(t, "a", 1, false, NULL, 4, &err), -1);
    ck_assert_int_eq(gt_tokenize(t, NULL, 0, true, ids, 4, &err), 1);
    ck_assert_int_eq(ids[0], 1);
    /* A short buffer gets the first ids and the full count. */
    const char *s = "Once upon a time there was a little girl";
    int n;
    int32_t *all = encode(t, s, strlen(s), true, &n);
    ck_assert_int_gt(n, 4);
    ck_assert_int_eq(gt_tokenize(t, s, strlen(s), true, ids, 4, &err), n);
    ck_assert(memcmp(ids, all, sizeof ids) == 0);
    /* Short decode buffers truncate and stay NUL-terminated. */
    char buf[5];
    ck_assert_int_eq(gt_detokenize(t, all, n, buf, sizeof buf), (int)strlen(s));
    ck_assert_str_eq(buf, "Once");
    ck_assert_int_eq(gt_detokenize(t, all, n, buf, 0), (int)strlen(s));
    int32_t bad[2] = {all[1], 512};
    ck_assert_int_eq(gt_detokenize(t, bad, 2, buf, sizeof buf), -1);
    ck_assert_int_eq(gt_detokenize(t, NULL, 1, buf, sizeof buf), -1);
    ck_assert_int_eq(gt_detokenize(t, NULL, 0, buf, sizeof buf), 0);
    ck_assert_str_eq(buf, "");
    free(all);
    gt_tokenizer_free(t);
    gt_tokenizer_free(NULL);
}
END_TEST

/* ---- llama.cpp's vectors ------------------------------------------------- */

/* Runs every string of NAME.inp through the tokenizer and compares with
 * NAME.out. The .inp format: each string is followed by
 * "\n__ggml_vocab_test__\n" (so the newline before a separator line is not
 * part of the string); .out has one line of space-separated ids per string. */
static void run_vectors(const char *name)
{
    char rel[256];
    snprintf(rel, sizeof rel, "vocab/%s", name);
    gt_tokenizer *t = load_tok(gt_test_model(rel));
    snprintf(rel, sizeof rel, "vocab/%s.inp", name);
    size_t ilen, olen;
    char *inp = read_file(gt_test_model(rel), &ilen);
    snprintf(rel, sizeof rel, "vocab/%s.out", name);
    char *outp = read_file(gt_test_model(rel), &olen);

    static const char sep[] = "\n__ggml_vocab_test__\n";
    char *s = inp, *line = outp;
    int n_strings = 0, n_exact = 0;
    for (char *e; (e = strstr(s, sep)) != NULL; s = e + strlen(sep)) {
        size_t len = (size_t)(e - s);
        char *nl = strchr(line, '\n');
        ck_assert_msg(nl != NULL, "%s: fewer result lines than strings", name);
        *nl = '\0';
        int32_t want[256];
        int nw = 0;
        for (char *p = line, *q; *p; p = q) {
            long v = strtol(p, &q, 10);
            if (q == p)
                break;
            want[nw++] = (int32_t)v;
        }
        line = nl + 1;
        int n;
        int32_t *ids = encode(t, s, len, false, &n);
        bool exact = n == nw && memcmp(ids, want, sizeof *ids * (size_t)n) == 0;
        if (!exact) {
            char got[4096];
            snprintf(got, sizeof got, "%s", ids_str(ids, n));
            fprintf(stderr, "%s string %d '%.*s':\n  got  %s\n  want %s\n", name, n_strings,
                    (int)len, s, got, ids_str(want, nw));
        }
        n_exact += exact;
        n_strings++;
        check_roundtrip(t, s, len);
        free(ids);
    }
    printf("%s: %d/%d strings exact\n", name, n_exact, n_strings);
    ck_assert_int_eq(n_strings, 46);
    ck_assert_int_eq(n_exact, n_strings);
    ck_assert_msg(*line == '\0', "%s: more result lines than strings", name);
    free(inp);
    free(outp);
    gt_tokenizer_free(t);
}

START_TEST(vectors_llama_spm)
{
    run_vectors("ggml-vocab-llama-spm.gguf");
}
END_TEST

START_TEST(vectors_gpt2)
{
    run_vectors("ggml-vocab-gpt-2.gguf");
}
END_TEST

/* ---- real vocabularies ---------------------------------------------------- */

static const char *const ROUNDTRIP[] = {
    "",
    " ",
    "   ",
    "\t\n \n\n",
    "Hello world",
    " Hello  world ",
    "The capital of France is Paris.",
    "caf\xc3\xa9 na\xc3\xafve r\xc3\xa9sum\xc3\xa9 \xc3\x85ngstr\xc3\xb6m",
    "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xae"
    "\xe3\x83\x86\xe3\x82\xad\xe3\x82\xb9\xe3\x83\x88",
    "emoji \xf0\x9f\xa6\x99\xf0\x9f\x9a\x80 "
    "\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7!",
    "invalid \xff\xfe bytes \xc3( and \xe2\x82 truncated \xed\xa0\x80",
    "numbers 12345 3.14159 \xc2\xbd \xd9\xa3",
    "it's we'll they're I'M",
    "literal <0x41> and <s> and <|endoftext|>",
};

static void check_battery(const gt_tokenizer *t)
{
    for (size_t i = 0; i < sizeof ROUNDTRIP / sizeof ROUNDTRIP[0]; i++)
        check_roundtrip(t, ROUNDTRIP[i], strlen(ROUNDTRIP[i]));
    check_roundtrip(t, "a\0b", 3); /* embedded NUL */
    char all[256];
    for (int b = 0; b < 256; b++)
        all[b] = (char)b;
    check_roundtrip(t, all, sizeof all);
    /* Random bytes, mostly fragments of UTF-8, spaces and ASCII. */
    static const unsigned char alphabet[] = {' ', ' ', 'a', 'Z', '1', '\'', '\n', 0x80, 0xA9,
                                             0xBF, 0xC3, 0xE2, 0x96, 0x81, 0xF0, 0x9F, 0xFF};
    uint32_t seed = 12345;
    for (int i = 0; i < 200; i++) {
        char buf[64];
        seed = seed * 1103515245u + 12345u;
        size_t len = (seed >> 16) % sizeof buf;
        for (size_t j = 0; j < len; j++) {
            seed = seed * 1103515245u + 12345u;
            buf[j] = (char)alphabet[(seed >> 16) % sizeof alphabet];
        }
        check_roundtrip(t, buf, len);
    }
}

/* stories260K's SentencePiece vocabulary, or the stand-in's, which has its
 * size, special ids and the U+2581 space convention. */
START_TEST(stories260k)
{
    gt_tokenizer *t = load_tok(gt_test_llama());
    ck_assert_int_eq(gt_tokenizer_kind_of(t), GT_TOK_LLAMA);
    ck_assert_int_eq(gt_tokenizer_n_vocab(t), 512);
    ck_assert_int_eq(gt_tokenizer_bos(t), 1);
    ck_assert_int_eq(gt_tokenizer_eos(t), 2);
    ck_assert(gt_tokenizer_adds_bos(t));
    int n;
    int32_t *ids = encode(t, "Zoo", 3, true, &n);
    ck_assert_int_ge(n, 2);
    ck_assert_int_eq(ids[0], 1);
    /* The prefix space is on the first piece. */
    ck_assert_msg(strncmp(gt_token_piece(t, ids[1]), SP, 3) == 0, "%s", gt_token_piece(t, ids[1]));
    free(ids);
    /* SentencePiece reads a literal U+2581 as a space: the one input that
     * does not round-trip, by design (llama.cpp does the same). */
    ids = encode(t, SP "x", 4, false, &n);
    int len;
    char *d = decode(t, ids, n, &len);
    ck_assert_str_eq(d, " x");
    free(d);
    free(ids);
    ck_assert_str_eq(gt_token_piece(t, 1), "<s>");
    check_battery(t);
    const char *story = "Once upon a time, there was a little girl named Lily. She loved to "
                        "play outside in the park.";
    check_roundtrip(t, story, strlen(story));
    gt_tokenizer_free(t);
}
END_TEST

START_TEST(vocab_battery)
{
    gt_tokenizer *t = load_tok(gt_test_model("vocab/ggml-vocab-llama-spm.gguf"));
    check_battery(t);
    expect_ids(t, "Hello world", "15043 3186");
    gt_tokenizer_free(t);
    t = load_tok(gt_test_model("vocab/ggml-vocab-gpt-2.gguf"));
    check_battery(t);
    ck_assert_int_eq(gt_tokenizer_bos(t), 50256);
    ck_assert(!gt_tokenizer_adds_bos(t));
    expect_ids(t, "<|endoftext|>", "27 91 437 1659 5239 91 29"); /* never the special */
    check_roundtrip(t, SP " U+2581 is just bytes here", strlen(SP " U+2581 is just bytes here"));
    gt_tokenizer_free(t);
}
END_TEST

START_TEST(smollm2)
{
    const char *path = gt_test_smollm2();
    ck_assert_msg(path != NULL, "SmolLM2 absent (main() checked it)");
    double t0 = now_s();
    gt_tokenizer *t = load_tok(path);
    double dt = now_s() - t0;
    printf("smollm2: open + tokenizer load %.1f ms\n", dt * 1e3);
    ck_assert_msg(dt < 2.0, "loading took %.2f s", dt);
    ck_assert_int_eq(gt_tokenizer_kind_of(t), GT_TOK_GPT2);
    ck_assert_int_eq(gt_tokenizer_n_vocab(t), 49152);
    ck_assert(!gt_tokenizer_adds_bos(t));

    int n;
    const char *s = "The capital of France is";
    int32_t *ids = encode(t, s, strlen(s), false, &n);
    ck_assert_int_eq(n, 5);
    const char *want[] = {"The", "\xc4\xa0" "capital", "\xc4\xa0" "of", "\xc4\xa0" "France",
                          "\xc4\xa0" "is"};
    for (int i = 0; i < n; i++)
        ck_assert_str_eq(gt_token_piece(t, ids[i]), want[i]);
    free(ids);

    ids = encode(t, "12345", 5, false, &n);
    ck_assert_int_eq(n, 5);
    for (int i = 0; i < 5; i++) {
        char digit[2] = {(char)('1' + i), '\0'};
        ck_assert_str_eq(gt_token_piece(t, ids[i]), digit);
    }
    free(ids);
    ids = encode(t, " 2024", 5, false, &n);
    ck_assert_int_eq(n, 5); /* Ġ on its own, then one token per digit */
    ck_assert_str_eq(gt_token_piece(t, ids[0]), "\xc4\xa0");
    free(ids);
    /* Chat markers are control tokens: plain text never produces them. */
    ids = encode(t, "<|im_start|>", 12, false, &n);
    ck_assert_int_gt(n, 1);
    for (int i = 0; i < n; i++)
        ck_assert_int_ne(ids[i], 1);
    free(ids);
    char buf[8];
    ck_assert_int_eq(gt_token_to_bytes(t, 1, buf, sizeof buf), 0);
    /* 0xFF has no token, and unknown_token_id is <|endoftext|>, a control
     * token, so the byte is dropped, as llama.cpp does. */
    ids = encode(t, "a\xff", 2, false, &n);
    ck_assert_int_eq(n, 1);
    ck_assert_str_eq(gt_token_piece(t, ids[0]), "a");
    free(ids);
    check_battery(t);
    gt_tokenizer_free(t);
}
END_TEST

/* ---- speed ---------------------------------------------------------------- */

static double encode_seconds(const gt_tokenizer *t, const char *s, size_t len, int *n)
{
    double t0 = now_s();
    int32_t *ids = encode(t, s, len, false, n);
    double dt = now_s() - t0;
    int dl;
    char *d = decode(t, ids, *n, &dl);
    ck_assert_msg((size_t)dl == len && memcmp(d, s, len) == 0, "long text did not round-trip");
    free(d);
    free(ids);
    return dt;
}

static void check_speed(const char *path, const char *what)
{
    gt_tokenizer *t = load_tok(path);
    size_t len = 100 * 1000;
    char *s = malloc(len);
    ck_assert_ptr_nonnull(s);
    const char *fills = "a 1\n";
    for (const char *f = fills; *f; f++) {
        memset(s, *f, len);
        int n;
        double dt = encode_seconds(t, s, len, &n);
        printf("%s: 100 KB of '%s' -> %d tokens in %.3f s\n", what,
               *f == '\n' ? "\\n" : (char[]){*f, 0}, n, dt);
        /* Generous for sanitizer builds; quadratic merging takes far longer. */
        ck_assert_msg(dt < 2.0, "%s: 100 KB of one character took %.2f s", what, dt);
    }
    free(s);

    /* About 1 MB of ordinary text. */
    static const char para[] =
        "Once upon a time, there was a little girl named Lily. She loved to play outside in "
        "the park with her friends, and in 2024 she counted 1,234 birds! \"Wow,\" she said. "
        "Caf\xc3\xa9s, na\xc3\xafvet\xc3\xa9 and \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e too.\n";
    size_t plen = sizeof para - 1, reps = (1 << 20) / plen;
    s = malloc(plen * reps);
    ck_assert_ptr_nonnull(s);
    for (size_t i = 0; i < reps; i++)
        memcpy(s + i * plen, para, plen);
    int n;
    double dt = encode_seconds(t, s, plen * reps, &n);
    printf("%s: %.2f MB of text -> %d tokens in %.3f s (%.1f MB/s)\n", what,
           (double)(plen * reps) / 1e6, n, dt, (double)(plen * reps) / 1e6 / dt);
    ck_assert_msg(dt < 10.0, "%s: 1 MB took %.2f s", what, dt);
    free(s);
    gt_tokenizer_free(t);
}

START_TEST(speed_spm)
{
    check_speed(gt_test_model("vocab/ggml-vocab-llama-spm.gguf"), "llama-spm");
}
END_TEST

START_TEST(speed_gpt2)
{
    check_speed(gt_test_model("vocab/ggml-vocab-gpt-2.gguf"), "gpt-2");
}
END_TEST

int main(void)
{
    gt_test_llama(); /* written once here, before the cases fork */
    static const char *const need[] = {
        "vocab/ggml-vocab-llama-spm.gguf", "vocab/ggml-vocab-llama-spm.gguf.inp",
        "vocab/ggml-vocab-llama-spm.gguf.out", "vocab/ggml-vocab-gpt-2.gguf",
        "vocab/ggml-vocab-gpt-2.gguf.inp", "vocab/ggml-vocab-gpt-2.gguf.out"};
    bool vocab = true;
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        vocab = vocab && gt_test_model(need[i]) != NULL;
    const char *no_vocab = "llama.cpp's vocab files and vectors not found (../shared/models/vocab)";
    Suite *s = suite_create("tokenizer");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, utf8_decode_valid_and_invalid);
    tcase_add_test(tc, unicode_classes);
    tcase_add_test(tc, gpt2_byte_mapping);
    tcase_add_test(tc, pretokenizer_gpt2);
    tcase_add_test(tc, pretokenizer_smollm);
    tcase_add_test(tc, pretokenizer_llama3_qwen2);
    tcase_add_test(tc, spm_score_order_and_ties);
    tcase_add_test(tc, spm_byte_fallback_and_unk);
    tcase_add_test(tc, bpe_merge_ranks);
    tcase_add_test(tc, load_errors);
    tcase_add_test(tc, api_misuse);
    gt_test_add_if(tc, vectors_llama_spm, vocab, no_vocab);
    gt_test_add_if(tc, vectors_gpt2, vocab, no_vocab);
    tcase_add_test(tc, stories260k);
    gt_test_add_if(tc, vocab_battery, vocab, no_vocab);
    gt_test_add_if(tc, smollm2, gt_test_smollm2() != NULL,
                   "SmolLM2 not found (ci/fetch-smollm2.sh or GT_SMOLLM2)");
    gt_test_add_if(tc, speed_spm, vocab, no_vocab);
    gt_test_add_if(tc, speed_gpt2, vocab, no_vocab);
    suite_add_tcase(s, tc);
    return gt_test_run(s);
}
