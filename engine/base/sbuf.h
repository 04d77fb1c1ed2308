// sbuf: a growing string (generated source, report text).
//
//   sbuf b = {0};
//   sbuf_printf(&b, "int x = %d;\n", 3);
//   puts(b.s); free(b.s);
#pragma once
#include <stdbool.h>
#include <stddef.h>

typedef struct sbuf {
    char *s;
    size_t len, cap;
    bool oom; // an append failed; the text is incomplete
} sbuf;

void sbuf_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sbuf_puts(sbuf *b, const char *s);
void sbuf_reset(sbuf *b); // empty, keeps the memory
