/* unicode.c: UTF-8 decoding and code point classes (see unicode.h).
 *
 * The class table is generated (gen_unicode.py -> unicode_data.h) as sorted
 * ranges, about 800 of them, searched by bisection; ASCII, which is most
 * text the tokenizers see, takes a table lookup instead. */
#include "unicode.h"

#include "unicode_data.h"

size_t gt_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
    unsigned c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t len;
    uint32_t v, min;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2, v = c & 0x1F, min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3, v = c & 0x0F, min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4, v = c & 0x07, min = 0x10000;
    } else {
        *cp = GT_UNI_INVALID; /* continuation byte, C0/C1 or F5..FF */
        return 1;
    }
    if (len > n) {
        *cp = GT_UNI_INVALID;
        return 1;
    }
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) {
            *cp = GT_UNI_INVALID;
            return 1;
        }
        v = (v << 6) | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) {
        *cp = GT_UNI_INVALID;
        return 1;
    }
    *cp = v;
    return len;
}

size_t gt_utf8_encode(uint32_t cp, char out[4])
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

static int bisect_class(uint32_t cp)
{
    size_t lo = 0, hi = sizeof gt_uni_ranges / sizeof gt_uni_ranges[0];
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cp < gt_uni_ranges[mid].first)
            hi = mid;
        else if (cp > gt_uni_ranges[mid].last)
            lo = mid + 1;
        else
            return gt_uni_ranges[mid].cls;
    }
    return GT_UNI_OTHER;
}

int gt_unicode_class(uint32_t cp)
{
    if (cp < 128) {
        /* Same answer as the table (a unit test checks), without the search. */
        if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z')
            return GT_UNI_LETTER;
        if (cp >= '0' && cp <= '9')
            return GT_UNI_NUMBER;
        if (cp == ' ' || (cp >= '\t' && cp <= '\r'))
            return GT_UNI_SPACE;
        return GT_UNI_OTHER;
    }
    if (cp >= GT_UNI_INVALID)
        return GT_UNI_OTHER;
    return bisect_class(cp);
}

/* For the test that the ASCII shortcut agrees with the table. */
int gt_unicode_class_slow(uint32_t cp)
{
    return cp >= GT_UNI_INVALID ? GT_UNI_OTHER : bisect_class(cp);
}

const char *gt_unicode_version(void)
{
    return GT_UNICODE_VERSION;
}
