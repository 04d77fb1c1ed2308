// charts_int: what the chart writers share (charts.c: the study's charts
// and the plumbing; charts_model.c: the per-model bar charts). Not for
// other modules: report_int.h has charts_write.
//
//   chart c;
//   chart_init(&c, "speedup-compiled-fp32-infer-cpu", caption, 720, 480);
//   chart_gp(&c, "set title %s\n", title);      // every string escaped
//   sbuf_printf(&c.dat, "%d %.6g\n", i, x);     // numbers only
//   return chart_end(&c, dir, out, err, cap);   // STEM.gp, STEM.dat
#pragma once
#include "escape.h"
#include "report_internal.h"

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
// "speedup-compiled-fp32-infer-cpu"
void chart_group_stem(char *buf, size_t cap, const char *kind, const rp_sel *s);
// "inference", "training"
const char *chart_workload(const char *w);
// A dashed line at y = 1.
void chart_one_line(chart *c);

// The per-model bar charts of one group (charts_model.c).
int chart_speedup(const rp_set *set, const rp_sel *s, const char *dir, rp_charts *out, char *err,
                  size_t cap);
int chart_compile(const rp_set *set, const rp_sel *s, const char *dir, rp_charts *out, char *err,
                  size_t cap);
int chart_breakeven(const rp_set *set, const rp_sel *s, const char *dir, rp_charts *out, char *err,
                    size_t cap);
int chart_memory(const rp_set *set, const rp_sel *s, const char *dir, rp_charts *out, char *err,
                 size_t cap);
