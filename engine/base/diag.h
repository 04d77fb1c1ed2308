// diag: a located error for bad input, printed as one line
//   file:line:col: message
// and answered with exit status 2 by the CLI. Lines and columns are 1-based;
// 0 means unknown (then they are left out of the line).
//
//   diag d = {0};
//   if (suite_load(path, NULL, &s, &d) < 0) { diag_print(&d, stderr); return 2; }
#pragma once
#include <stdio.h>

typedef struct diag {
    char file[512];
    int line, col;
    char msg[512];
} diag;

// Fill d (printf-style message); returns -1 so callers can `return diag_set(...)`.
int diag_set(diag *d, const char *file, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
void diag_print(const diag *d, FILE *f);
// The same text into buf.
void diag_format(const diag *d, char *buf, size_t cap);
