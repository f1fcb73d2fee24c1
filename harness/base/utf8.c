/* utf8.c: see utf8.h. */
#include "utf8.h"

#include <stdlib.h>
#include <string.h>

int gt_utf8_seq(const unsigned char *s, size_t n)
{
    int len;
    unsigned min;
    if (s[0] < 0x80)
        return s[0] ? 1 : 0;
    if ((s[0] & 0xe0) == 0xc0)
        len = 2, min = 0x80;
    else if ((s[0] & 0xf0) == 0xe0)
        len = 3, min = 0x800;
    else if ((s[0] & 0xf8) == 0xf0)
        len = 4, min = 0x10000;
    else
        return 0;
    unsigned cp = s[0] & (0x7fu >> len);
    for (int i = 1; i < len; i++) {
        if ((size_t)i >= n)
            return -1;
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

char *gt_utf8_clean(const char *s, size_t n, bool drop_tail)
{
    char *out = malloc(n * 3 + 1), *o = out;
    if (!out)
        return NULL;
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        int l = gt_utf8_seq(u + i, n - i);
        if (l < 0 && drop_tail)
            break;
        if (l > 0) {
            memcpy(o, u + i, (size_t)l);
            o += l;
            i += (size_t)l;
        } else {
            memcpy(o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        }
    }
    *o = '\0';
    return out;
}
