/* utf8.h: making a model's bytes fit for JSON, which needs valid UTF-8.
 *
 * Tokens are bytes, not characters: a piece can be half a character, or
 * not UTF-8 at all. `gauntlet serve` cleans every string it sends out this
 * way, and the suites' http variants clean the reference's text the same
 * way before comparing it with what a server sent. */
#ifndef GT_UTF8_H
#define GT_UTF8_H

#include <stdbool.h>
#include <stddef.h>

/* Length of the valid UTF-8 sequence at s (n > 0 bytes left): 0 when it is
 * invalid (or a NUL, which cannot go through C strings), -1 when it is a
 * valid start cut short by the end of the buffer. */
int gt_utf8_seq(const unsigned char *s, size_t n);

/* A malloc'ed NUL-terminated UTF-8 copy of s[0..n) with each invalid byte
 * replaced by U+FFFD. With drop_tail, a valid but unfinished sequence at the
 * end is dropped instead (a prefix of a longer text). NULL when out of
 * memory. */
char *gt_utf8_clean(const char *s, size_t n, bool drop_tail);

#endif
