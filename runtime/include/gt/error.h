/* error.h: how the runtime reports failure.
 *
 * Every public function that can fail returns 0 on success and -1 on failure,
 * and fills a gt_err with a message a user can act on ("tensor 'blk.0.attn_q'
 * data at offset 1234 runs past end of file (size 1000)"). Callers may pass
 * NULL when they do not want the message. */
#ifndef GT_ERROR_H
#define GT_ERROR_H

#include <stddef.h>

typedef struct gt_err {
    char msg[1024];
} gt_err;

/* printf-style; returns -1 so callers can write `return gt_err_set(...)`. */
int gt_err_set(gt_err *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Prefixes the current message with context: "loading X: <old message>". */
int gt_err_wrap(gt_err *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
