// rdoc: a report as a list of blocks (headings, paragraphs, list items,
// tables, charts), built once and rendered twice, as Markdown (summary.md)
// and as one self-contained HTML page (index.html), so the two always say
// the same thing. Text goes in plain; each renderer escapes it.
//
//   rdoc d = {0};
//   rdoc_heading(&d, 2, "Executive summary");
//   rdoc_table(&d, 2, "metric", "smoke");       // the header row
//   rdoc_cell(&d, "Pass rate");                 // then cells, row by row
//   rdoc_cell(&d, "%s", "100%, 8/8");
//   rdoc_chart(&d, "geomean", "Geomean speedup per suite", true);
//   rdoc_write_md(&d, f, err, sizeof err);
//   rdoc_write_html(&d, "tcbench report", "out/charts", f, err, sizeof err);
//   rdoc_free(&d);
//
// A chart is a stem under the charts directory: Markdown links STEM.png;
// HTML embeds STEM.svg (else STEM.png) as a base64 data: URI, so the page
// needs no other file and no script inside the SVG can run.
#pragma once
#include <stdbool.h>
#include <stdio.h>

typedef enum { RDOC_HEADING, RDOC_PARA, RDOC_ITEM, RDOC_TABLE, RDOC_CHART } rdoc_kind;

typedef struct rdoc_block {
    rdoc_kind kind;
    int level;    // heading: 1 to 4
    char *text;   // heading, paragraph, item; chart: its caption
    char *chart;  // chart: file stem
    bool drawn;   // chart: gnuplot made the images
    int ncols; // table
    // table: the header row, then the rows, row-major, each cell's text
    // after the last's NUL (a cell costs its text, not a pointer and an
    // allocation: a report of a million entries has millions)
    char *cells;
    size_t len, size; // bytes of cells used, allocated
    int ncells;
} rdoc_block;

typedef struct rdoc {
    rdoc_block *b;
    int n, cap;
    bool oom; // an append failed: the document is incomplete
} rdoc;

void rdoc_heading(rdoc *d, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void rdoc_para(rdoc *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void rdoc_item(rdoc *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// A table of ncols columns; the header cells follow as const char *.
void rdoc_table(rdoc *d, int ncols, ...);
// A table whose header row comes as the first ncols rdoc_cell calls.
void rdoc_table_open(rdoc *d, int ncols);
// The next cell of the last table.
void rdoc_cell(rdoc *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void rdoc_chart(rdoc *d, const char *stem, const char *caption, bool drawn);
void rdoc_free(rdoc *d);

// 0, or -1 with err naming the failed call.
int rdoc_write_md(const rdoc *d, FILE *f, char *err, size_t cap);
int rdoc_write_html(const rdoc *d, const char *title, const char *chart_dir, FILE *f, char *err,
                    size_t cap);
