// report_int: what the parts of `tcbench report` share (report.c, summary.c,
// csv.c, charts.c). Not for other modules: use report.h.
#pragma once
#include "rdoc.h"
#include "report.h"

#include <stdbool.h>

// The axes an entry is grouped by, and the columns of the executive summary.
enum rp_field { RP_SUITE, RP_MODE, RP_PRECISION, RP_WORKLOAD, RP_DEVICE, RP_FIELD_COUNT };

// Every entry of every file, sorted by device, precision, workload, suite,
// name, batch and mode (each axis in the schema's order).
typedef struct rp_set {
    const resfile_entry **e;
    int n;
    resfile *const *files;
    int nfiles;
    const char *primary; // the mode the headline and the study's chart use: "compiled" if any
} rp_set;

// A selection: NULL matches anything.
typedef struct rp_sel {
    const char *v[RP_FIELD_COUNT];
} rp_sel;

const char *rp_get(const resfile_entry *e, enum rp_field f);
bool rp_match(const resfile_entry *e, const rp_sel *s);
// The distinct values of f among the entries s selects, in the schema's
// order; returns how many (at most cap).
int rp_values(const rp_set *set, const rp_sel *s, enum rp_field f, const char **out, int cap);
#define RP_MAX_VALUES 64

// The dashboard's aggregates over the compiled-family entries s selects.
typedef struct rp_agg {
    int total, passed;
    double geomean; // of the speedups of entries that passed; NAN when none
    int ngeo;
    double compile_s; // mean cold compile time of those (PyTorch: over passing models)
    int ncompile;
    double compression; // mean compression ratio of those
    int ncompression;
} rp_agg;
void rp_agg_compute(const rp_set *set, const rp_sel *s, rp_agg *a);

// The eager entry that e's speedup is measured against, or NULL.
const resfile_entry *rp_eager_of(const rp_set *set, const resfile_entry *e);
// Whether e's case was run at several batch sizes (a sweep).
bool rp_swept(const rp_set *set, const resfile_entry *e);
// A short label for charts and tables: "name", "suite/name" when the set
// has several suites, with " b=N" when the case was swept.
void rp_label(const rp_set *set, const resfile_entry *e, char *buf, size_t cap);

typedef struct rp_chart {
    char stem[160];
    char caption[400];
    bool drawn; // gnuplot made STEM.png
} rp_chart;

typedef struct rp_charts {
    rp_chart *c;
    int n, cap;
} rp_charts;

// Writes STEM.gp and STEM.dat of every chart the data allows into dir.
int charts_write(const rp_set *set, const char *dir, rp_charts *out, char *err, size_t cap);
// Runs gnuplot on each; without gnuplot, one line on warn and nothing drawn.
int charts_draw(rp_charts *c, const char *dir, const char *gnuplot, FILE *warn, char *err,
                size_t cap);

int csv_write(const rp_set *set, FILE *f, char *err, size_t cap);
void summary_build(const rp_set *set, const rp_charts *charts, rdoc *d);

// Numbers as the tables print them; "-" for NAN.
void rp_fmt(char *buf, size_t cap, const char *fmt, double v);
