// Escaping for HTML, Markdown, CSV, gnuplot and data: URIs (escape.h).
#include "escape.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static void putc_b(sbuf *b, char c) {
    char s[2] = {c, '\0'};
    sbuf_puts(b, s);
}

void esc_html(sbuf *b, const char *s) {
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        switch (c) {
        case '&': sbuf_puts(b, "&amp;"); break;
        case '<': sbuf_puts(b, "&lt;"); break;
        case '>': sbuf_puts(b, "&gt;"); break;
        case '"': sbuf_puts(b, "&quot;"); break;
        case '\'': sbuf_puts(b, "&#39;"); break;
        default: putc_b(b, c < 0x20 && c != '\t' && c != '\n' && c != '\r' ? '?' : (char)c);
        }
    }
}

static bool word_char(char c) { return c && (isalnum((unsigned char)c) || (c & 0x80)); }

void esc_md(sbuf *b, const char *s) {
    for (const char *p = s; *p; p++) {
        char c = *p;
        if (c == '&')
            sbuf_puts(b, "&amp;");
        else if (c == '<')
            sbuf_puts(b, "&lt;");
        else if (c == '>')
            sbuf_puts(b, "&gt;");
        else if (c == '\n' || c == '\r' || c == '\t')
            putc_b(b, ' ');
        else if ((unsigned char)c < 0x20)
            putc_b(b, '?');
        // GitHub does not take an underscore inside a word for emphasis:
        // mobilenet_v2 stays readable in the raw file
        else if (c == '_' && p > s && word_char(p[-1]) && word_char(p[1]))
            putc_b(b, c);
        // "](" "][" "]:" would close a link, a reference or a definition
        else if (strchr("\\`*_|~#", c) || (c == ']' && p[1] && strchr("([:", p[1]))) {
            putc_b(b, '\\');
            putc_b(b, c);
        } else
            putc_b(b, c);
    }
}

void esc_csv(sbuf *b, const char *s) {
    size_t n = strlen(s);
    bool quote = strpbrk(s, ",\"\r\n") != NULL || (n && (s[0] == ' ' || s[n - 1] == ' '));
    if (!quote) {
        sbuf_puts(b, s);
        return;
    }
    putc_b(b, '"');
    for (; *s; s++) {
        if (*s == '"')
            putc_b(b, '"');
        putc_b(b, *s);
    }
    putc_b(b, '"');
}

void esc_gnuplot(sbuf *b, const char *s) {
    putc_b(b, '\'');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '\'')
            sbuf_puts(b, "''");
        else
            putc_b(b, c < 0x20 || c == 0x7f ? ' ' : (char)c);
    }
    putc_b(b, '\'');
}

void esc_base64(sbuf *b, const unsigned char *d, size_t n) {
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char q[5] = {0};
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)d[i] << 16;
        if (i + 1 < n)
            v |= (unsigned)d[i + 1] << 8;
        if (i + 2 < n)
            v |= d[i + 2];
        q[0] = tab[v >> 18 & 63];
        q[1] = tab[v >> 12 & 63];
        q[2] = i + 1 < n ? tab[v >> 6 & 63] : '=';
        q[3] = i + 2 < n ? tab[v & 63] : '=';
        sbuf_puts(b, q);
    }
}

void esc_filename(char *buf, size_t cap, const char *s) {
    size_t i = 0;
    for (; *s && i + 1 < cap; s++, i++)
        buf[i] = isalnum((unsigned char)*s) || strchr(".-_", *s) ? *s : '_';
    if (cap)
        buf[i] = '\0';
}
