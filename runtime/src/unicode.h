/* unicode.h: the little Unicode the tokenizers need (private to libgtrt).
 *
 * UTF-8 decoding that never fails: an invalid, overlong, surrogate or
 * truncated sequence yields one byte of GT_UNI_INVALID, so callers can keep
 * the original bytes (byte-level BPE and byte fallback must round-trip any
 * input, valid UTF-8 or not). And a code point classifier with exactly the
 * classes the GPT-2 pre-tokenizer regex distinguishes: \p{L}, \p{N}, \s and
 * everything else. */
#ifndef GT_UNICODE_H
#define GT_UNICODE_H

#include <stddef.h>
#include <stdint.h>

/* Code point classes; an assigned or unassigned code point is in exactly one. */
enum {
    GT_UNI_OTHER = 0,
    GT_UNI_LETTER = 1, /* general category L* */
    GT_UNI_NUMBER = 2, /* general category N* */
    GT_UNI_SPACE = 3,  /* White_Space property */
};

/* Stands for a byte that does not start a valid UTF-8 sequence; classed OTHER. */
#define GT_UNI_INVALID 0x110000u

/* Decodes the sequence starting at s (n >= 1 bytes available): sets *cp and
 * returns its length 1..4; an invalid sequence gives 1 and GT_UNI_INVALID. */
size_t gt_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);

/* Writes cp (<= 0x10FFFF) as UTF-8 to out, returns the length 1..4. */
size_t gt_utf8_encode(uint32_t cp, char out[4]);

/* GT_UNI_* class of a code point (GT_UNI_INVALID is OTHER). */
int gt_unicode_class(uint32_t cp);

/* The same by table search only (tests compare the two). */
int gt_unicode_class_slow(uint32_t cp);

/* The Unicode version the class table was generated from. */
const char *gt_unicode_version(void);

#endif
