/* escape.c: text into HTML and XML safely.
 *
 * One escaper serves both formats: the five XML-special characters become
 * entities (valid in HTML too), and anything that would make an XML 1.0
 * document ill-formed (control characters, invalid or overlong UTF-8,
 * surrogates) becomes U+FFFD. Worker logs are arbitrary bytes, so this is
 * the one place that stands between a log line and the report's markup. */
#include "report.h"

#include <string.h>

/* Length of the valid UTF-8 sequence at s (n bytes left), or 0. */
static int utf8_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    int len;
    unsigned min;
    if (c < 0x80)
        return 1;
    if ((c & 0xE0) == 0xC0)
        len = 2, min = 0x80, c &= 0x1F;
    else if ((c & 0xF0) == 0xE0)
        len = 3, min = 0x800, c &= 0x0F;
    else if ((c & 0xF8) == 0xF0)
        len = 4, min = 0x10000, c &= 0x07;
    else
        return 0;
    if ((size_t)len > n)
        return 0;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        c = (c << 6) | (s[i] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF) || c == 0xFFFE || c == 0xFFFF)
        return 0;
    return len;
}

void gt_report_esc_n(FILE *f, const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0, run = 0; /* run: bytes at s+i-run.. that need no escaping */
    while (i < n && s[i]) {
        unsigned char c = s[i];
        const char *rep = NULL;
        int len = 1;
        switch (c) {
        case '&': rep = "&amp;"; break;
        case '<': rep = "&lt;"; break;
        case '>': rep = "&gt;"; break;
        case '"': rep = "&quot;"; break;
        case '\'': rep = "&#39;"; break;
        case '\t': case '\n': break;
        case '\r': rep = ""; break;
        default:
            if (c < 0x20 || c == 0x7F) {
                rep = "\xEF\xBF\xBD";
            } else if (c >= 0x80) {
                len = utf8_len(s + i, n - i);
                if (len == 0) {
                    rep = "\xEF\xBF\xBD";
                    len = 1;
                }
            }
        }
        if (rep) {
            if (run)
                fwrite(s + i - run, 1, run, f);
            run = 0;
            fputs(rep, f);
            i += (size_t)len;
        } else {
            run += (size_t)len;
            i += (size_t)len;
        }
    }
    if (run)
        fwrite(s + i - run, 1, run, f);
}

void gt_report_esc(FILE *f, const char *s) { gt_report_esc_n(f, s ? s : "", s ? strlen(s) : 0); }

void gt_report_json_str(FILE *f, const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t n = strlen(str);
    fputc('"', f);
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        if (c == '"' || c == '\\') {
            fputc('\\', f);
            fputc(c, f);
        } else if (c == '<' || c == '>' || c == '&' || c < 0x20 || c == 0x7F) {
            /* Markup characters as \u escapes: the block then holds no '<'
             * or '&' at all, so it can end neither the script element nor
             * the document's well-formedness. */
            fprintf(f, "\\u%04x", c);
        } else if (c >= 0x80) {
            int len = utf8_len(s + i, n - i);
            if (len == 0) {
                fputs("\\ufffd", f);
                i++;
                continue;
            }
            fwrite(s + i, 1, (size_t)len, f);
            i += (size_t)len;
            continue;
        } else {
            fputc(c, f);
        }
        i++;
    }
    fputc('"', f);
}
