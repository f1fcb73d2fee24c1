/* tokenizer_load.c: building a tokenizer from GGUF metadata.
 *
 * Everything the tokenizer needs is copied out of the GGUF (pieces, scores,
 * types), so the artifact may be closed afterwards, and checked on the way:
 * array types and lengths, token types, special ids in range, merge syntax,
 * and a tokenizer.ggml.pre we implement exactly (refusing the others, since
 * a wrong pre-tokenizer gives wrong ids silently). Then the lookup tables
 * and decoded pieces are built; loading a 50k vocabulary with 50k merges
 * takes milliseconds. */
#include "gt/tokenizer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_impl.h"
#include "unicode.h"

/* Keeps ids and arena offsets in 32 bits and gpt2 ranks exact as floats. */
#define MAX_VOCAB (1 << 24)
#define MAX_MERGES (1 << 24)

#define KEY_PREFIX "tokenizer.ggml."

/* A power of two at least twice n, so probes stay short. */
static uint32_t table_size(uint64_t n)
{
    uint32_t size = 16;
    while (size < 2 * n)
        size *= 2;
    return size;
}

/* Later duplicates replace earlier ones, as in llama.cpp's token_to_id. */
static void map_insert(gt_tokenizer *t, int32_t id)
{
    const char *s = gt_tok_piece_at(t, id);
    size_t n = t->piece_len[id];
    for (uint32_t h = (uint32_t)gt_tok_hash_bytes(s, n) & t->map_mask;; h = (h + 1) & t->map_mask) {
        int32_t old = t->map[h];
        if (old < 0 || (t->piece_len[old] == n && memcmp(gt_tok_piece_at(t, old), s, n) == 0)) {
            t->map[h] = id;
            return;
        }
    }
}

/* The first rule for a pair wins: lower rank is higher priority. */
static void merge_insert(gt_tokenizer *t, int32_t l, int32_t r, int32_t rank, int32_t id)
{
    uint64_t key = gt_tok_pair_key((uint32_t)l, (uint32_t)r);
    uint32_t mask = t->merge_mask;
    for (uint32_t h = (uint32_t)gt_tok_hash_u64(key) & mask;; h = (h + 1) & mask) {
        gt_tok_merge *m = &t->merges[h];
        if (m->key == key)
            return;
        if (m->key == UINT64_MAX) {
            m->key = key;
            m->rank = rank;
            m->id = id;
            return;
        }
    }
}

/* ---- reading metadata --------------------------------------------------- */

/* Index of the array kv key with elements of one of the two given types and
 * n elements (n == 0: any length >= 1, stored to *n). -1 when absent and not
 * required; -2 on error. */
static int64_t find_array(const gt_gguf *g, const char *key, gt_gguf_vtype e1, gt_gguf_vtype e2,
                          bool required, uint64_t *n, gt_err *err)
{
    int64_t i = gt_gguf_find_key(g, key);
    if (i < 0) {
        if (required)
            gt_err_set(err, "missing %s", key);
        return required ? -2 : -1;
    }
    if (gt_gguf_kv_type(g, i) != GT_GGUF_ARRAY) {
        gt_err_set(err, "%s is a %s, expected an array of %s", key,
                   gt_gguf_vtype_name(gt_gguf_kv_type(g, i)), gt_gguf_vtype_name(e1));
        return -2;
    }
    gt_gguf_vtype et = gt_gguf_arr_type(g, i);
    if (et != e1 && et != e2) {
        gt_err_set(err, "%s is an array of %s, expected %s", key, gt_gguf_vtype_name(et),
                   gt_gguf_vtype_name(e1));
        return -2;
    }
    uint64_t len = gt_gguf_arr_len(g, i);
    if (*n != 0 && len != *n) {
        gt_err_set(err, "%s has %llu elements but tokenizer.ggml.tokens has %llu", key,
                   (unsigned long long)len, (unsigned long long)*n);
        return -2;
    }
    if (len > 0 && !gt_gguf_arr_data(g, i) && et != GT_GGUF_STRING) {
        gt_err_set(err, "%s: array data unreadable", key);
        return -2;
    }
    *n = len;
    return i;
}

/* A special token id: -1 when the key is absent or holds -1 / UINT32_MAX
 * (how converters write "none"); an error when present but out of range. */
static int special_id(const gt_gguf *g, const char *key, int32_t def, int32_t n_vocab,
                      int32_t *out, gt_err *err)
{
    int64_t i = gt_gguf_find_key(g, key);
    if (i < 0) {
        *out = def < n_vocab ? def : -1;
        return 0;
    }
    int64_t v;
    if (!gt_gguf_kv_int(g, i, &v))
        return gt_err_set(err, "%s is a %s, expected an integer", key,
                          gt_gguf_vtype_name(gt_gguf_kv_type(g, i)));
    if (v == -1 || v == (int64_t)UINT32_MAX) {
        *out = -1;
        return 0;
    }
    if (v < 0 || v >= n_vocab)
        return gt_err_set(err, "%s = %lld is out of range (vocabulary has %d tokens)", key,
                          (long long)v, (int)n_vocab);
    *out = (int32_t)v;
    return 0;
}

static int flag(const gt_gguf *g, const char *key, bool def, bool *out, gt_err *err)
{
    int64_t i = gt_gguf_find_key(g, key);
    *out = def;
    if (i >= 0 && !gt_gguf_kv_bool(g, i, out))
        return gt_err_set(err, "%s is a %s, expected a bool", key,
                          gt_gguf_vtype_name(gt_gguf_kv_type(g, i)));
    return 0;
}

/* Accepts exactly "<0xNN>" (either case of hex digit). */
static int parse_byte_piece(const char *s, size_t n)
{
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>')
        return -1;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0'
              : c >= 'A' && c <= 'F' ? c - 'A' + 10
              : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

static int load_pieces(gt_tokenizer *t, const gt_gguf *g, int64_t ki, gt_err *err)
{
    size_t total = 0;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        size_t n = 0;
        if (!gt_gguf_arr_str(g, ki, (uint64_t)id, &n))
            return gt_err_set(err, "token %d: string unreadable", (int)id);
        total += n + 1;
        if (total > UINT32_MAX)
            return gt_err_set(err, "token pieces exceed 4 GiB");
    }
    t->pieces = malloc(total);
    t->piece_off = malloc(sizeof *t->piece_off * (size_t)t->n_vocab);
    t->piece_len = malloc(sizeof *t->piece_len * (size_t)t->n_vocab);
    if (!t->pieces || !t->piece_off || !t->piece_len)
        return gt_err_set(err, "out of memory for %d token pieces", (int)t->n_vocab);
    size_t off = 0;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        size_t n = 0;
        const char *s = gt_gguf_arr_str(g, ki, (uint64_t)id, &n);
        memcpy(t->pieces + off, s, n);
        t->pieces[off + n] = '\0';
        t->piece_off[id] = (uint32_t)off;
        t->piece_len[id] = (uint32_t)n;
        off += n + 1;
    }
    return 0;
}

static int load_types_scores(gt_tokenizer *t, const gt_gguf *g, gt_err *err)
{
    uint64_t n = (uint64_t)t->n_vocab;
    t->types = malloc((size_t)t->n_vocab);
    if (!t->types)
        return gt_err_set(err, "out of memory for token types");
    int64_t ti = find_array(g, KEY_PREFIX "token_type", GT_GGUF_INT32, GT_GGUF_UINT32, false,
                            &n, err);
    if (ti == -2)
        return -1;
    if (ti >= 0) {
        const unsigned char *raw = gt_gguf_arr_data(g, ti);
        for (int32_t id = 0; id < t->n_vocab; id++) {
            int32_t v;
            memcpy(&v, raw + 4 * (size_t)id, 4);
            if (v < GT_TT_UNDEFINED || v > GT_TT_BYTE)
                return gt_err_set(err, "token %d ('%s') has unknown token_type %d", (int)id,
                                  gt_tok_piece_at(t, id), (int)v);
            t->types[id] = (uint8_t)v;
        }
    } else {
        /* No types: guess the conventional ones rather than let "<0x41>" or
         * "<s>" be matched as text. bos/eos/unk are fixed up by the caller. */
        for (int32_t id = 0; id < t->n_vocab; id++) {
            bool byte = t->kind == GT_TOK_LLAMA &&
                        parse_byte_piece(gt_tok_piece_at(t, id), t->piece_len[id]) >= 0;
            t->types[id] = byte ? GT_TT_BYTE : GT_TT_NORMAL;
        }
    }
    if (t->kind != GT_TOK_LLAMA)
        return 0;
    t->scores = calloc((size_t)t->n_vocab, sizeof *t->scores);
    if (!t->scores)
        return gt_err_set(err, "out of memory for token scores");
    int64_t si = find_array(g, KEY_PREFIX "scores", GT_GGUF_FLOAT32, GT_GGUF_FLOAT32, false, &n,
                            err);
    if (si == -2)
        return -1;
    if (si >= 0) {
        memcpy(t->scores, gt_gguf_arr_data(g, si), sizeof *t->scores * (size_t)t->n_vocab);
        for (int32_t id = 0; id < t->n_vocab; id++) {
            if (isnan(t->scores[id]))
                return gt_err_set(err, "token %d ('%s') has a NaN score", (int)id,
                                  gt_tok_piece_at(t, id));
        }
    }
    return 0;
}

static bool producible(const gt_tokenizer *t, int32_t id)
{
    int ty = t->types[id];
    if (ty == GT_TT_CONTROL || t->piece_len[id] == 0)
        return false;
    /* SentencePiece never matches byte or unknown pieces as text. */
    return t->kind != GT_TOK_LLAMA || (ty != GT_TT_BYTE && ty != GT_TT_UNKNOWN);
}

static int build_map(gt_tokenizer *t, gt_err *err)
{
    uint32_t size = table_size((uint64_t)t->n_vocab);
    t->map = malloc(sizeof *t->map * size);
    if (!t->map)
        return gt_err_set(err, "out of memory for the vocabulary table");
    memset(t->map, 0xff, sizeof *t->map * size);
    t->map_mask = size - 1;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        if (producible(t, id) && t->piece_len[id] > t->max_piece_len)
            t->max_piece_len = t->piece_len[id];
    }
    for (int32_t id = 0; id < t->n_vocab; id++) {
        if (producible(t, id))
            map_insert(t, id);
    }
    return 0;
}

/* Grows by doubling (the count is far below the pieces' total length). */
static int pair_insert(gt_tokenizer *t, uint64_t key)
{
    if (2 * (t->n_pairs + 1) > t->pair_mask + 1) {
        uint32_t size = 2 * (t->pair_mask + 1);
        uint64_t *old = t->pairs, *p = malloc(sizeof *p * size);
        if (!p)
            return -1;
        memset(p, 0xff, sizeof *p * size);
        uint32_t old_size = t->pair_mask + 1;
        t->pairs = p;
        t->pair_mask = size - 1;
        t->n_pairs = 0;
        for (uint32_t i = 0; i < old_size; i++) {
            if (old[i] != UINT64_MAX)
                pair_insert(t, old[i]); /* cannot grow again */
        }
        free(old);
    }
    for (uint32_t h = (uint32_t)gt_tok_hash_u64(key) & t->pair_mask;; h = (h + 1) & t->pair_mask) {
        if (t->pairs[h] == key)
            return 0;
        if (t->pairs[h] == UINT64_MAX) {
            t->pairs[h] = key;
            t->n_pairs++;
            return 0;
        }
    }
}

static int build_pairs(gt_tokenizer *t, gt_err *err)
{
    t->pair_mask = 1023;
    t->pairs = malloc(sizeof *t->pairs * (t->pair_mask + 1));
    if (!t->pairs)
        return gt_err_set(err, "out of memory for the character pair table");
    memset(t->pairs, 0xff, sizeof *t->pairs * (t->pair_mask + 1));
    for (int32_t id = 0; id < t->n_vocab; id++) {
        if (!producible(t, id))
            continue;
        const char *s = gt_tok_piece_at(t, id);
        size_t n = t->piece_len[id], len;
        uint32_t prev = gt_tok_char_key(s, n, &len);
        for (size_t i = len; i < n; i += len) {
            uint32_t cur = gt_tok_char_key(s + i, n - i, &len);
            if (pair_insert(t, gt_tok_pair_key(prev, cur)))
                return gt_err_set(err, "out of memory for the character pair table");
            prev = cur;
        }
    }
    return 0;
}

static void build_byte_tables(gt_tokenizer *t)
{
    for (int b = 0; b < 256; b++)
        t->byte_sym[b] = t->byte_fallback[b] = -1;
    if (t->kind == GT_TOK_LLAMA) {
        for (int32_t id = t->n_vocab - 1; id >= 0; id--) {
            if (t->types[id] != GT_TT_BYTE)
                continue;
            int b = parse_byte_piece(gt_tok_piece_at(t, id), t->piece_len[id]);
            if (b >= 0)
                t->byte_fallback[b] = id; /* the lowest id wins */
        }
        for (int b = 0; b < 256; b++) {
            char c = (char)b;
            if (t->byte_fallback[b] < 0)
                t->byte_fallback[b] = gt_tok_find(t, &c, 1);
        }
    } else {
        for (int b = 0; b < 256; b++) {
            char u[4];
            size_t n = gt_utf8_encode(gt_tok_byte_to_cp((unsigned)b), u);
            t->byte_sym[b] = t->byte_fallback[b] = gt_tok_find(t, u, n);
        }
    }
    /* SentencePiece without byte pieces substitutes the unknown token. BPE
     * does not (llama.cpp drops the byte), and neither may a CONTROL token
     * stand in: SmolLM2's unknown_token_id is <|endoftext|>. */
    bool unk_ok = t->kind == GT_TOK_LLAMA && t->unk >= 0 && t->types[t->unk] != GT_TT_CONTROL;
    for (int b = 0; b < 256; b++) {
        if (t->byte_fallback[b] < 0 && unk_ok)
            t->byte_fallback[b] = t->unk;
    }
}

/* Merges whose halves or result are not producible tokens can never apply
 * (the symbols they would join never exist), so they are left out. */
static int load_merges(gt_tokenizer *t, const gt_gguf *g, gt_err *err)
{
    uint64_t n = 0;
    int64_t mi = find_array(g, KEY_PREFIX "merges", GT_GGUF_STRING, GT_GGUF_STRING, true, &n, err);
    if (mi < 0)
        return -1;
    if (n > MAX_MERGES)
        return gt_err_set(err, KEY_PREFIX "merges has %llu rules (limit %d)",
                          (unsigned long long)n, MAX_MERGES);
    uint32_t size = table_size(n);
    t->merges = malloc(sizeof *t->merges * size);
    char *buf = malloc((size_t)t->max_piece_len + 1);
    if (!t->merges || !buf) {
        free(buf);
        return gt_err_set(err, "out of memory for %llu merges", (unsigned long long)n);
    }
    for (uint32_t i = 0; i < size; i++)
        t->merges[i].key = UINT64_MAX;
    t->merge_mask = size - 1;
    for (uint64_t i = 0; i < n; i++) {
        size_t len = 0;
        const char *s = gt_gguf_arr_str(g, mi, i, &len);
        if (!s) {
            free(buf);
            return gt_err_set(err, "merge %llu: string unreadable", (unsigned long long)i);
        }
        /* Split at the first space after the first byte, like llama.cpp. */
        const char *sp = len > 1 ? memchr(s + 1, ' ', len - 1) : NULL;
        if (!sp || sp + 1 == s + len) {
            free(buf);
            return gt_err_set(err, "merge %llu ('%.*s') is not two pieces separated by a space",
                              (unsigned long long)i, (int)(len < 64 ? len : 64), s);
        }
        size_t nl = (size_t)(sp - s), nr = len - nl - 1;
        if (nl + nr > t->max_piece_len)
            continue;
        memcpy(buf, s, nl);
        memcpy(buf + nl, sp + 1, nr);
        int32_t l = gt_tok_find(t, s, nl), r = gt_tok_find(t, sp + 1, nr);
        int32_t m = gt_tok_find(t, buf, nl + nr);
        if (l >= 0 && r >= 0 && m >= 0)
            merge_insert(t, l, r, (int32_t)i, m);
    }
    free(buf);
    return 0;
}

/* What id stands for in text; written to out (at most piece length bytes). */
static size_t decode_one(const gt_tokenizer *t, int32_t id, char *out)
{
    const char *s = gt_tok_piece_at(t, id);
    size_t n = t->piece_len[id];
    int ty = t->types[id];
    if (ty == GT_TT_CONTROL || ty == GT_TT_UNUSED)
        return 0;
    if (ty == GT_TT_USER_DEFINED || ty == GT_TT_UNKNOWN) {
        memcpy(out, s, n);
        return n;
    }
    size_t k = 0;
    if (t->kind == GT_TOK_LLAMA) {
        if (ty == GT_TT_BYTE) {
            int b = parse_byte_piece(s, n);
            if (b >= 0) {
                out[0] = (char)b;
                return 1;
            }
        }
        for (size_t i = 0; i < n; i++) {
            if (i + 3 <= n && memcmp(s + i, "\xe2\x96\x81", 3) == 0) {
                out[k++] = ' ';
                i += 2;
            } else {
                out[k++] = s[i];
            }
        }
        return k;
    }
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t cl = gt_utf8_decode((const unsigned char *)s + i, n - i, &cp);
        int b = gt_tok_cp_to_byte(cp);
        if (b >= 0) {
            out[k++] = (char)b;
        } else {
            memcpy(out + k, s + i, cl); /* not a mapped byte: keep as written */
            k += cl;
        }
        i += cl;
    }
    return k;
}

static int build_decoded(gt_tokenizer *t, gt_err *err)
{
    size_t total = t->piece_off[t->n_vocab - 1] + t->piece_len[t->n_vocab - 1] + 1;
    t->decoded = malloc(total);
    t->dec_off = malloc(sizeof *t->dec_off * (size_t)t->n_vocab);
    t->dec_len = malloc(sizeof *t->dec_len * (size_t)t->n_vocab);
    if (!t->decoded || !t->dec_off || !t->dec_len)
        return gt_err_set(err, "out of memory for decoded pieces");
    size_t off = 0;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        size_t n = decode_one(t, id, t->decoded + off);
        t->dec_off[id] = (uint32_t)off;
        t->dec_len[id] = (uint32_t)n;
        off += n;
    }
    return 0;
}

static int load(gt_tokenizer *t, const gt_gguf *g, gt_err *err)
{
    int64_t mk = gt_gguf_find_key(g, KEY_PREFIX "model");
    const char *model = mk >= 0 ? gt_gguf_kv_str(g, mk, NULL) : NULL;
    if (mk < 0)
        return gt_err_set(err, "missing " KEY_PREFIX "model");
    if (!model)
        return gt_err_set(err, KEY_PREFIX "model is a %s, expected a string",
                          gt_gguf_vtype_name(gt_gguf_kv_type(g, mk)));
    if (strcmp(model, "llama") == 0)
        t->kind = GT_TOK_LLAMA;
    else if (strcmp(model, "gpt2") == 0)
        t->kind = GT_TOK_GPT2;
    else
        return gt_err_set(err, "unsupported " KEY_PREFIX "model '%s' (supported: llama, gpt2)",
                          model);

    t->pre = GT_PRE_GPT2;
    if (t->kind == GT_TOK_GPT2) {
        int64_t pk = gt_gguf_find_key(g, KEY_PREFIX "pre");
        const char *pre = pk >= 0 ? gt_gguf_kv_str(g, pk, NULL) : NULL;
        if (pk >= 0 && !pre)
            return gt_err_set(err, KEY_PREFIX "pre is a %s, expected a string",
                              gt_gguf_vtype_name(gt_gguf_kv_type(g, pk)));
        /* Names llama.cpp maps to the same regexes as these two. Absent
         * means a file older than the key: GPT-2 itself. */
        static const char *const gpt2_like[] = {"gpt-2", "gpt2", "mpt", "olmo", "jais", NULL};
        static const char *const smollm_like[] = {"smollm", "starcoder", "refact", "command-r",
                                                  "codeshell", "exaone", "minerva", NULL};
        /* llama.cpp also emits a pre-token that is itself a token whole
         * (ignore_merges) for the llama3 family. */
        static const char *const llama3_like[] = {"llama3", "llama-v3", "llama-bpe", "falcon3",
                                                  "falcon-h1", "pixtral", "midm-2.0", "lfm2",
                                                  "jina-v5-nano", NULL};
        static const char *const qwen2_like[] = {"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2",
                                                 "megrez", NULL};
        bool ok = !pre || !pre[0];
        for (int i = 0; !ok && gpt2_like[i]; i++)
            ok = strcmp(pre, gpt2_like[i]) == 0;
        for (int i = 0; !ok && smollm_like[i]; i++) {
            if (strcmp(pre, smollm_like[i]) == 0)
                ok = true, t->pre = GT_PRE_SMOLLM;
        }
        for (int i = 0; !ok && llama3_like[i]; i++) {
            if (strcmp(pre, llama3_like[i]) == 0)
                ok = true, t->pre = GT_PRE_LLAMA3, t->ignore_merges = true;
        }
        for (int i = 0; !ok && qwen2_like[i]; i++) {
            if (strcmp(pre, qwen2_like[i]) == 0)
                ok = true, t->pre = GT_PRE_QWEN2;
        }
        if (!ok)
            return gt_err_set(err, "unsupported " KEY_PREFIX "pre '%s' for gpt2 (supported: "
                              "gpt-2, smollm, llama-bpe, qwen2 and the pre-tokenizers identical "
                              "to them)", pre);
    }

    uint64_t n = 0;
    int64_t ki = find_array(g, KEY_PREFIX "tokens", GT_GGUF_STRING, GT_GGUF_STRING, true, &n, err);
    if (ki < 0)
        return -1;
    if (n == 0 || n > MAX_VOCAB)
        return gt_err_set(err, KEY_PREFIX "tokens has %llu entries (expected 1..%d)",
                          (unsigned long long)n, MAX_VOCAB);
    t->n_vocab = (int32_t)n;
    if (load_pieces(t, g, ki, err) || load_types_scores(t, g, err))
        return -1;

    bool llama = t->kind == GT_TOK_LLAMA;
    if (special_id(g, KEY_PREFIX "bos_token_id", llama ? 1 : -1, t->n_vocab, &t->bos, err) ||
        special_id(g, KEY_PREFIX "eos_token_id", llama ? 2 : -1, t->n_vocab, &t->eos, err) ||
        special_id(g, KEY_PREFIX "unknown_token_id", llama ? 0 : -1, t->n_vocab, &t->unk, err))
        return -1;
    if (gt_gguf_find_key(g, KEY_PREFIX "token_type") < 0) {
        if (t->bos >= 0)
            t->types[t->bos] = GT_TT_CONTROL;
        if (t->eos >= 0)
            t->types[t->eos] = GT_TT_CONTROL;
        if (t->unk >= 0)
            t->types[t->unk] = GT_TT_UNKNOWN;
    }
    if (flag(g, KEY_PREFIX "add_bos_token", llama || t->pre == GT_PRE_LLAMA3, &t->add_bos,
             err) ||
        flag(g, KEY_PREFIX "add_space_prefix", true, &t->add_space_prefix, err))
        return -1;
    if (!llama)
        t->add_space_prefix = false;

    if (build_map(t, err) || (llama && build_pairs(t, err)) || gt_tok_special_init(t, g, err))
        return -1;
    build_byte_tables(t);
    if (!llama && load_merges(t, g, err))
        return -1;
    return build_decoded(t, err);
}

int gt_tokenizer_from_gguf(const gt_gguf *g, gt_tokenizer **out, gt_err *err)
{
    if (!out)
        return gt_err_set(err, "gt_tokenizer_from_gguf: out is NULL");
    *out = NULL;
    if (!g)
        return gt_err_set(err, "gt_tokenizer_from_gguf: no GGUF");
    gt_tokenizer *t = calloc(1, sizeof *t);
    if (!t)
        return gt_err_set(err, "out of memory for the tokenizer");
    if (load(t, g, err)) {
        gt_tokenizer_free(t);
        return gt_err_wrap(err, "tokenizer");
    }
    *out = t;
    return 0;
}

