#include "diag.h"

#include <stdarg.h>
#include <string.h>

int diag_set(diag *d, const char *file, int line, int col, const char *fmt, ...) {
    if (!d)
        return -1;
    snprintf(d->file, sizeof d->file, "%s", file ? file : "");
    d->line = line;
    d->col = col;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->msg, sizeof d->msg, fmt, ap);
    va_end(ap);
    // one line: fold any newline a library put into its message
    for (char *p = d->msg; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    return -1;
}

void diag_format(const diag *d, char *buf, size_t cap) {
    if (d->line > 0 && d->col > 0)
        snprintf(buf, cap, "%s:%d:%d: %s", d->file, d->line, d->col, d->msg);
    else if (d->line > 0)
        snprintf(buf, cap, "%s:%d: %s", d->file, d->line, d->msg);
    else if (d->file[0])
        snprintf(buf, cap, "%s: %s", d->file, d->msg);
    else
        snprintf(buf, cap, "%s", d->msg);
}

void diag_print(const diag *d, FILE *f) {
    char buf[1100];
    diag_format(d, buf, sizeof buf);
    fprintf(f, "%s\n", buf);
}
