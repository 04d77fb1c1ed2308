// The report document and its Markdown and HTML renderings (rdoc.h).
#include "rdoc.h"

#include "escape.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static char *vformat(const char *fmt, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s)
        vsnprintf(s, (size_t)n + 1, fmt, ap);
    return s;
}

static rdoc_block *push(rdoc *d, rdoc_kind kind) {
    if (d->n == d->cap) {
        int cap = d->cap ? 2 * d->cap : 64;
        rdoc_block *b = realloc(d->b, (size_t)cap * sizeof *b);
        if (!b) {
            d->oom = true;
            return NULL;
        }
        d->b = b;
        d->cap = cap;
    }
    rdoc_block *b = &d->b[d->n++];
    memset(b, 0, sizeof *b);
    b->kind = kind;
    return b;
}

static void push_text(rdoc *d, rdoc_kind kind, int level, const char *fmt, va_list ap) {
    rdoc_block *b = push(d, kind);
    if (!b)
        return;
    b->level = level;
    if (!(b->text = vformat(fmt, ap)))
        d->oom = true;
}

void rdoc_heading(rdoc *d, int level, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    push_text(d, RDOC_HEADING, level, fmt, ap);
    va_end(ap);
}

void rdoc_para(rdoc *d, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    push_text(d, RDOC_PARA, 0, fmt, ap);
    va_end(ap);
}

void rdoc_item(rdoc *d, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    push_text(d, RDOC_ITEM, 0, fmt, ap);
    va_end(ap);
}

// The last table, or NULL (and the document marked incomplete).
static rdoc_block *last_table(rdoc *d) {
    rdoc_block *t = d->n ? &d->b[d->n - 1] : NULL;
    if (!t || t->kind != RDOC_TABLE) {
        d->oom = true;
        return NULL;
    }
    return t;
}

// Room for n more bytes of cells in t.
static bool cells_reserve(rdoc *d, rdoc_block *t, size_t n) {
    if (t->size - t->len >= n)
        return true;
    size_t size = t->size ? 2 * t->size : 256;
    while (size - t->len < n)
        size *= 2;
    char *c = realloc(t->cells, size);
    if (!c) {
        d->oom = true;
        return false;
    }
    t->cells = c;
    t->size = size;
    return true;
}

static void add_cell(rdoc *d, const char *s) {
    rdoc_block *t = last_table(d);
    size_t n = strlen(s) + 1;
    if (!t || !cells_reserve(d, t, n))
        return;
    memcpy(t->cells + t->len, s, n);
    t->len += n;
    t->ncells++;
}

void rdoc_table_open(rdoc *d, int ncols) {
    rdoc_block *b = push(d, RDOC_TABLE);
    if (b)
        b->ncols = ncols;
}

void rdoc_table(rdoc *d, int ncols, ...) {
    rdoc_table_open(d, ncols);
    va_list ap;
    va_start(ap, ncols);
    for (int i = 0; i < ncols; i++)
        add_cell(d, va_arg(ap, const char *));
    va_end(ap);
}

void rdoc_cell(rdoc *d, const char *fmt, ...) {
    rdoc_block *t = last_table(d);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (!t || n < 0 || !cells_reserve(d, t, (size_t)n + 1)) {
        d->oom = true;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(t->cells + t->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    t->len += (size_t)n + 1;
    t->ncells++;
}

void rdoc_chart(rdoc *d, const char *stem, const char *caption, bool drawn) {
    rdoc_block *b = push(d, RDOC_CHART);
    if (!b)
        return;
    b->drawn = drawn;
    if (!(b->chart = strdup(stem)) || !(b->text = strdup(caption)))
        d->oom = true;
}

void rdoc_free(rdoc *d) {
    for (int i = 0; i < d->n; i++) {
        free(d->b[i].text);
        free(d->b[i].chart);
        free(d->b[i].cells);
    }
    free(d->b);
    memset(d, 0, sizeof *d);
}

// A cell reads as a figure when it starts with a number ("1.28x",
// "0.2134", "100%, 8/8", "1.26x [1.11, 1.34]", "0.30 / 0.00"), not with a
// word that strtod would take ("inference" starts like "inf").
static bool numeric_cell(const char *s) {
    const char *p = s + (*s == '-' || *s == '+');
    if (!(p[0] >= '0' && p[0] <= '9') && !(p[0] == '.' && p[1] >= '0' && p[1] <= '9'))
        return false;
    char *end;
    strtod(s, &end);
    if (*end == 'x' || *end == '%')
        end++;
    return *end == '\0' || *end == ' ' || *end == ',';
}

// Columns of figures are right-aligned; "-" (no figure) fits either.
// num[col] for each of t's columns, in one pass over the cells.
static bool *numeric_columns(const rdoc_block *t) {
    bool *num = calloc((size_t)t->ncols + 1, sizeof *num);
    bool *other = calloc((size_t)t->ncols + 1, sizeof *other);
    if (!num || !other) {
        free(num);
        free(other);
        return NULL;
    }
    const char *s = t->cells;
    for (int c = 0; c < t->ncells; c++, s += strlen(s) + 1) {
        int col = c % t->ncols;
        if (c < t->ncols || other[col] || !strcmp(s, "-") || !*s)
            continue;
        if (numeric_cell(s))
            num[col] = true;
        else
            other[col] = true;
    }
    for (int col = 0; col < t->ncols; col++)
        num[col] &= !other[col];
    free(other);
    return num;
}

// Writes what b holds once it passes a block's worth, so a table of a
// million rows never sits whole in memory; a failed write is kept in b.
static void spill(FILE *f, sbuf *b, int *werr) {
    if (b->len < (1 << 16) || b->oom || *werr)
        return;
    if (fwrite(b->s, 1, b->len, f) != b->len)
        *werr = errno ? errno : EIO;
    sbuf_reset(b);
}

static int finish(FILE *f, sbuf *b, int werr, const char *what, char *err, size_t cap) {
    int rc = 0;
    if (b->oom) {
        snprintf(err, cap, "%s: out of memory", what);
        rc = -1;
    } else if (werr || (b->len && fwrite(b->s, 1, b->len, f) != b->len)) {
        snprintf(err, cap, "fwrite %s: %s", what, strerror(werr ? werr : errno));
        rc = -1;
    }
    free(b->s);
    return rc;
}

int rdoc_write_md(const rdoc *d, FILE *f, char *err, size_t cap) {
    sbuf b = {0};
    int werr = 0;
    for (int i = 0; i < d->n; i++) {
        const rdoc_block *k = &d->b[i];
        bool list_end = k->kind == RDOC_ITEM && (i + 1 == d->n || d->b[i + 1].kind != RDOC_ITEM);
        switch (k->kind) {
        case RDOC_HEADING:
            sbuf_printf(&b, "%.*s ", k->level, "####");
            esc_md(&b, k->text);
            sbuf_puts(&b, "\n\n");
            break;
        case RDOC_PARA:
            esc_md(&b, k->text);
            sbuf_puts(&b, "\n\n");
            break;
        case RDOC_ITEM:
            sbuf_puts(&b, "- ");
            esc_md(&b, k->text);
            sbuf_puts(&b, list_end ? "\n\n" : "\n");
            break;
        case RDOC_TABLE: {
            const char *s = k->cells;
            for (int c = 0; c < k->ncells; c++, s += strlen(s) + 1) {
                int col = c % k->ncols;
                sbuf_puts(&b, col == 0 ? "| " : " | ");
                esc_md(&b, s);
                if (col == k->ncols - 1) {
                    sbuf_puts(&b, " |\n");
                    if (c == k->ncols - 1) { // under the header
                        bool *num = numeric_columns(k);
                        if (!num)
                            b.oom = true;
                        for (int h = 0; num && h < k->ncols; h++)
                            sbuf_puts(&b, num[h] ? "| ---: " : "| --- ");
                        sbuf_puts(&b, "|\n");
                        free(num);
                    }
                    spill(f, &b, &werr);
                }
            }
            sbuf_puts(&b, "\n");
            break;
        }
        case RDOC_CHART:
            if (k->drawn) {
                sbuf_puts(&b, "![");
                esc_md(&b, k->text);
                sbuf_printf(&b, "](charts/%s.png)\n\n", k->chart);
            } else {
                esc_md(&b, k->text);
                sbuf_printf(&b, ": not drawn (no gnuplot); charts/%s.gp and its .dat are kept\n\n",
                            k->chart);
            }
            break;
        }
    }
    return finish(f, &b, werr, "summary.md", err, cap);
}

static const char html_head[] =
    "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
    "<title>%s</title>\n<style>\n"
    "body{font-family:system-ui,sans-serif;max-width:1200px;margin:1em auto;padding:0 1em;"
    "color:#222}\n"
    "table{border-collapse:collapse;margin:0.5em 0 1.5em}\n"
    "th,td{border:1px solid #ccc;padding:2px 8px;text-align:left}\n"
    "th{background:#f0f0f0}\ntd.num{text-align:right;font-variant-numeric:tabular-nums}\n"
    "img{max-width:100%%;height:auto}\nfigure{margin:1em 0}\n"
    "figcaption{font-size:90%%;color:#555}\n"
    "</style>\n</head>\n<body>\n";

// The whole of a file into *data (malloc'd); 1 when it does not exist.
static int slurp(const char *path, unsigned char **data, size_t *len, char *err, size_t cap) {
    *data = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (errno == ENOENT)
            return 1;
        snprintf(err, cap, "fopen %s: %s", path, strerror(errno));
        return -1;
    }
    size_t have = 0;
    for (;;) {
        if (*len == have) {
            have = have ? 2 * have : 65536;
            unsigned char *p = realloc(*data, have);
            if (!p) {
                snprintf(err, cap, "realloc: out of memory reading %s", path);
                break;
            }
            *data = p;
        }
        size_t n = fread(*data + *len, 1, have - *len, f);
        *len += n;
        if (n == 0) {
            if (!ferror(f)) {
                fclose(f);
                return 0;
            }
            snprintf(err, cap, "fread %s: %s", path, strerror(errno));
            break;
        }
    }
    fclose(f);
    free(*data);
    *data = NULL;
    return -1;
}

// A chart as a data: URI, its SVG preferred; 1 when neither image exists.
static int chart_uri(sbuf *b, const char *dir, const char *stem, char *err, size_t cap) {
    static const char *const kinds[][2] = {{"svg", "image/svg+xml"}, {"png", "image/png"}};
    for (int k = 0; k < 2; k++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s.%s", dir, stem, kinds[k][0]);
        unsigned char *data;
        size_t len;
        int rc = slurp(path, &data, &len, err, cap);
        if (rc == 1)
            continue;
        if (rc < 0)
            return -1;
        sbuf_printf(b, "data:%s;base64,", kinds[k][1]);
        esc_base64(b, data, len);
        free(data);
        return 0;
    }
    return 1;
}

int rdoc_write_html(const rdoc *d, const char *title, const char *chart_dir, FILE *f, char *err,
                    size_t cap) {
    sbuf b = {0}, t = {0};
    int werr = 0;
    esc_html(&t, title);
    sbuf_printf(&b, html_head, t.s ? t.s : "");
    free(t.s);
    for (int i = 0; i < d->n; i++) {
        const rdoc_block *k = &d->b[i];
        bool list_start = k->kind == RDOC_ITEM && (i == 0 || d->b[i - 1].kind != RDOC_ITEM);
        bool list_end = k->kind == RDOC_ITEM && (i + 1 == d->n || d->b[i + 1].kind != RDOC_ITEM);
        switch (k->kind) {
        case RDOC_HEADING:
            sbuf_printf(&b, "<h%d>", k->level);
            esc_html(&b, k->text);
            sbuf_printf(&b, "</h%d>\n", k->level);
            break;
        case RDOC_PARA:
            sbuf_puts(&b, "<p>");
            esc_html(&b, k->text);
            sbuf_puts(&b, "</p>\n");
            break;
        case RDOC_ITEM:
            sbuf_puts(&b, list_start ? "<ul>\n<li>" : "<li>");
            esc_html(&b, k->text);
            sbuf_puts(&b, list_end ? "</li>\n</ul>\n" : "</li>\n");
            break;
        case RDOC_TABLE: {
            // each column's alignment once, not per cell: a table can have a million rows
            bool *num = numeric_columns(k);
            if (!num)
                b.oom = true;
            sbuf_puts(&b, "<table>\n");
            const char *s = k->cells;
            for (int c = 0; num && c < k->ncells; c++, s += strlen(s) + 1) {
                int col = c % k->ncols;
                bool head = c < k->ncols;
                if (col == 0)
                    sbuf_puts(&b, "<tr>");
                sbuf_puts(&b, head ? "<th>" : num[col] ? "<td class=\"num\">" : "<td>");
                esc_html(&b, s);
                sbuf_puts(&b, head ? "</th>" : "</td>");
                if (col == k->ncols - 1) {
                    sbuf_puts(&b, "</tr>\n");
                    spill(f, &b, &werr);
                }
            }
            sbuf_puts(&b, "</table>\n");
            free(num);
            break;
        }
        case RDOC_CHART: {
            sbuf uri = {0};
            int rc = k->drawn ? chart_uri(&uri, chart_dir, k->chart, err, cap) : 1;
            if (rc < 0) {
                free(b.s);
                return -1;
            }
            sbuf_puts(&b, "<figure>");
            if (rc == 0) {
                sbuf_puts(&b, "<img alt=\"");
                esc_html(&b, k->text);
                sbuf_printf(&b, "\" src=\"%s\">", uri.s ? uri.s : "");
            }
            b.oom |= uri.oom;
            free(uri.s);
            sbuf_puts(&b, "<figcaption>");
            esc_html(&b, k->text);
            if (rc != 0)
                sbuf_printf(&b, " (not drawn: no gnuplot; charts/%s.gp and its .dat are kept)",
                            k->chart);
            sbuf_puts(&b, "</figcaption></figure>\n");
            break;
        }
        }
    }
    sbuf_puts(&b, "</body>\n</html>\n");
    return finish(f, &b, werr, "index.html", err, cap);
}
