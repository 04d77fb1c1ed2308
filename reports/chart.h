// chart: one gnuplot chart as a script and its numbers (STEM.gp, STEM.dat),
// and gnuplot run on a list of them. tcbench report and tcbench history
// report draw with it.
//
//   rp_charts list = {0};
//   chart c;
//   chart_init(&c, "speedup-compiled-fp32-infer-cpu", caption, 720, 480);
//   chart_gp(&c, "set title %s\n", title);      // every string escaped
//   sbuf_printf(&c.dat, "%d %.6g\n", i, x);     // numbers only
//   if (chart_end(&c, dir, &list, err, cap) < 0) ...       // STEM.gp, STEM.dat
//   if (charts_draw(&list, dir, "gnuplot", "tcbench report", stderr, err, cap) < 0) ...  //
//   STEM.png, STEM.svg free(list.c);
#pragma once
#include "base/sbuf.h"

#include <stdbool.h>
#include <stdio.h>

typedef struct rp_chart {
    char stem[160];
    char caption[400];
    bool drawn; // gnuplot made STEM.png
} rp_chart;

typedef struct rp_charts {
    rp_chart *c;
    int n, cap;
} rp_charts;

typedef struct chart {
    char stem[160];
    char caption[400];
    sbuf body, dat; // the drawing commands (run once per terminal) and the numbers
    int w, h;
} chart;

void chart_init(chart *c, const char *stem, const char *caption, int w, int h);
// body text with one escaped string: chart_gp(c, "set title %s\n", title)
void chart_gp(chart *c, const char *fmt, const char *s);
// Writes STEM.gp and STEM.dat and adds the chart to the list; frees c's buffers.
int chart_end(chart *c, const char *dir, rp_charts *out, char *err, size_t cap);
// A chart with nothing to draw: frees c's buffers and returns 0.
int chart_drop(chart *c);
// Runs gnuplot on each; without gnuplot, one line on warn ("WHO: warning:
// ...", who: "tcbench report") and nothing drawn.
int charts_draw(rp_charts *c, const char *dir, const char *gnuplot, const char *who, FILE *warn,
                char *err, size_t cap);
