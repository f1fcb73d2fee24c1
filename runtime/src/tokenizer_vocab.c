/* tokenizer_vocab.c: the lookups that loading and encoding share.
 *
 * They are hash tables built once at load (open addressing, linear probing,
 * at most half full): piece text -> id, for gpt2 (left id, right id) ->
 * (rank, id) for the merges, and for llama the set of character pairs that
 * occur inside pieces. Encoding never scans the vocabulary. */
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
