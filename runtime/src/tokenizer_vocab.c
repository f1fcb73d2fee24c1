/* tokenizer_vocab.c: the lookups that loading and encoding share.
 *
 * They are hash tables built once at load (open addressing, linear probing,
 * at most half full): piece text -> id, for gpt2 (left id, right id) ->
 * (rank, id) for the merges, and for llama the set of character pairs that
 * occur inside pieces. Encoding never scans the vocabulary. And GPT-2's
 * byte <-> code point mapping, which loading (byte tables, decoding) and
 * encoding (ignore_merges' whole-word lookup) both use. */
#include <string.h>

#include "tokenizer_impl.h"

int32_t gt_tok_find(const gt_tokenizer *t, const char *s, size_t n)
{
    if (n == 0 || n > t->max_piece_len)
        return -1;
    for (uint32_t h = (uint32_t)gt_tok_hash_bytes(s, n) & t->map_mask;; h = (h + 1) & t->map_mask) {
        int32_t id = t->map[h];
        if (id < 0)
            return -1;
        if (t->piece_len[id] == n && memcmp(gt_tok_piece_at(t, id), s, n) == 0)
            return id;
    }
}

bool gt_tok_merge_find(const gt_tokenizer *t, int32_t l, int32_t r, int32_t *rank, int32_t *id)
{
    if (!t->merges)
        return false;
    uint64_t key = gt_tok_pair_key((uint32_t)l, (uint32_t)r);
    uint32_t mask = t->merge_mask;
    for (uint32_t h = (uint32_t)gt_tok_hash_u64(key) & mask;; h = (h + 1) & mask) {
        const gt_tok_merge *m = &t->merges[h];
        if (m->key == UINT64_MAX)
            return false;
        if (m->key == key) {
            *rank = m->rank;
            *id = m->id;
            return true;
        }
    }
}

bool gt_tok_pair_joinable(const gt_tokenizer *t, uint32_t a, uint32_t b)
{
    uint64_t key = gt_tok_pair_key(a, b);
    for (uint32_t h = (uint32_t)gt_tok_hash_u64(key) & t->pair_mask;; h = (h + 1) & t->pair_mask) {
        if (t->pairs[h] == key)
            return true;
        if (t->pairs[h] == UINT64_MAX)
            return false;
    }
}

/* ---- GPT-2 byte <-> code point mapping ---------------------------------- */

/* Printable Latin-1 bytes stand for themselves; the other 68 (0x00-0x20,
 * 0x7F-0xA0, 0xAD) are numbered from U+0100 up, in byte order. */
static bool byte_is_printable(unsigned b)
{
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

uint32_t gt_tok_byte_to_cp(unsigned b)
{
    if (byte_is_printable(b))
        return b;
    if (b <= 0x20)
        return 0x100 + b;
    if (b >= 0x7F && b <= 0xA0)
        return 0x121 + (b - 0x7F);
    return 0x143; /* 0xAD, soft hyphen */
}

int gt_tok_cp_to_byte(uint32_t cp)
{
    if (cp < 0x100)
        return byte_is_printable(cp) ? (int)cp : -1;
    if (cp <= 0x120)
        return (int)(cp - 0x100);
    if (cp <= 0x142)
        return (int)(0x7F + cp - 0x121);
    return cp == 0x143 ? 0xAD : -1;
}
