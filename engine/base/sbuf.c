#include "sbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool grow(sbuf *b, size_t need) {
    if (b->len + need + 1 <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + need + 1)
        cap *= 2;
    char *s = realloc(b->s, cap);
    if (!s) {
        b->oom = true;
        return false;
    }
    b->s = s;
    b->cap = cap;
    return true;
}

void sbuf_printf(sbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !grow(b, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void sbuf_puts(sbuf *b, const char *s) {
    size_t n = strlen(s);
    if (!grow(b, n))
        return;
    memcpy(b->s + b->len, s, n + 1);
    b->len += n;
}

void sbuf_reset(sbuf *b) {
    b->len = 0;
    if (b->s)
        b->s[0] = 0;
}
