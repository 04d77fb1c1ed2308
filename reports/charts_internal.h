// charts_int: what the chart writers share (charts.c: the study's charts
// and the plumbing; charts_model.c: the per-model bar charts). Not for
// other modules: report_int.h has charts_write.
//
// The chart plumbing itself (chart_init, chart_end, charts_draw) is chart.h.
#pragma once
#include "escape.h"
#include "report_internal.h"

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
