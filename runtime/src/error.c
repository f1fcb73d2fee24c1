/* error.c: formatting of gt_err messages (see gt/error.h). */
#include "gt/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int gt_err_set(gt_err *err, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return -1;
}

int gt_err_wrap(gt_err *err, const char *fmt, ...)
{
    if (err) {
        char prefix[512];
        char old[sizeof err->msg];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(prefix, sizeof prefix, fmt, ap);
        va_end(ap);
        memcpy(old, err->msg, sizeof old);
        /* Built by hand: a truncated message is fine, a warning is not. */
        size_t np = strlen(prefix), no = strnlen(old, sizeof old - 1);
        size_t cap = sizeof err->msg - 1, k = 0;
        for (size_t i = 0; i < np && k < cap; i++)
            err->msg[k++] = prefix[i];
        for (const char *sep = ": "; *sep && k < cap; sep++)
            err->msg[k++] = *sep;
        for (size_t i = 0; i < no && k < cap; i++)
            err->msg[k++] = old[i];
        err->msg[k] = '\0';
    }
    return -1;
}
