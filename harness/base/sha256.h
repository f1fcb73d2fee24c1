/* sha256.h: SHA-256 (FIPS 180-4) for artifact identity.
 *
 * The harness names every artifact by its SHA-256: models are verified
 * against the matrix, derived quants are cached under their source's hash,
 * and reference outputs are keyed by it. Streaming, so a multi-gigabyte
 * model is hashed in fixed memory. */
#ifndef GT_SHA256_H
#define GT_SHA256_H

#include <stddef.h>
#include <stdint.h>

#include "gt/error.h"

typedef struct gt_sha256 {
    uint32_t h[8];
    uint64_t n_bytes;
    uint8_t block[64];
    size_t fill;
} gt_sha256;

void gt_sha256_init(gt_sha256 *s);
void gt_sha256_update(gt_sha256 *s, const void *data, size_t n);
void gt_sha256_final(gt_sha256 *s, uint8_t digest[32]);
/* Lower-case hex of the digest, NUL-terminated. */
void gt_sha256_final_hex(gt_sha256 *s, char hex[65]);

void gt_sha256_hex(const void *data, size_t n, char hex[65]);
/* Hashes a file; *size (may be NULL) receives its length. */
int gt_sha256_file(const char *path, char hex[65], uint64_t *size, gt_err *err);

#endif
