// report_int: what the parts of `tcbench report` share (report.c, summary.c,
// csv.c, charts.c). Not for other modules: use report.h.
#pragma once
#include "base/sbuf.h"
#include "chart.h"
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
    bool *at_batch;      // per entry: at its case's suite batch (rp_case_batch), so it counts
    // The indexes that keep a row's look-ups from walking every entry:
    int *pos;        // sorted position of files[k]->entries[i] at pos[first[k] + i]
    int *first;      // per file
    int *case_end;   // per sorted position: one past the last entry of its case (same
    int *case_start; // suite, name, precision, workload, device: adjacent once sorted)
    resfile_index ids; // every entry by identity
    bool several_suites;
    bool foreign; // another harness's entries (torch-eager, torch-compile) are in the set
} rp_set;

// A selection: NULL matches anything; study: only the study's own cases
// (`study: true` in their suite).
typedef struct rp_sel {
    const char *v[RP_FIELD_COUNT];
    bool study;
} rp_sel;

const char *rp_get(const resfile_entry *e, enum rp_field f);
bool rp_match(const resfile_entry *e, const rp_sel *s);
// The distinct values of f among the entries s selects, in the schema's
// order; returns how many (at most cap).
int rp_values(const rp_set *set, const rp_sel *s, enum rp_field f, const char **out, int cap);
#define RP_MAX_VALUES 64

// The dashboard's aggregates over the compiled-family entries s selects, at
// their case's suite batch (a sweep's other batches are left out, so each
// model counts once).
typedef struct rp_agg {
    int total, passed;
    double geomean; // of the speedups of the stable entries that passed; NAN when none
    int ngeo;
    int unstable;     // passed, but unstable: left out of the geomean
    double compile_s; // mean cold compile time of those (PyTorch: over passing models)
    int ncompile;
    double compression; // mean compression ratio of those
    int ncompression;
} rp_agg;
void rp_agg_compute(const rp_set *set, const rp_sel *s, rp_agg *a);

// Whether set->e[i] counts in the geomeans: compiled-family, passed, a
// speedup, stable, and at its case's suite batch.
bool rp_in_geomean(const rp_set *set, int i);
// Why set->e[i] is not in the geomeans ("fail_accuracy", "unstable: noise
// 31% > 10%", "batch 16 of a sweep: counted at batch 4"), or NULL when it is.
const char *rp_left_out(const rp_set *set, int i, char *buf, size_t cap);
// The batch at which a case counts in the dashboards: the suite's own batch
// (suite_batch) when the results record it, the nearest swept batch when the
// sweep missed it, and the smallest batch when the results do not say.
int64_t rp_case_batch(const rp_set *set, const resfile_entry *e);

// PyTorch's headline over the same models: fp32 and AMP geomeans of the
// primary mode over the models (suite, name, batch) where both count, in
// the group s selects (device, workload, suite; precision is ignored).
typedef struct rp_headline {
    double fp32, amp, value; // NAN when no model has both
    int nboth, nfp32, namp;  // models with both, with fp32, with AMP in the geomeans
} rp_headline;
void rp_headline_compute(const rp_set *set, const rp_sel *s, rp_headline *h);

// Compile break-even of a compiled-family entry, in steps (report_breakeven).
double rp_breakeven(const rp_set *set, const resfile_entry *e);
// "1234", "never", or "" when unknown.
void rp_fmt_steps(char *buf, size_t cap, double steps);

// The eager entry that e's speedup is measured against, or NULL.
const resfile_entry *rp_eager_of(const rp_set *set, const resfile_entry *e);
// Whether e's case was run at several batch sizes (a sweep).
bool rp_swept(const rp_set *set, const resfile_entry *e);
// A short label for charts and tables: "name", "suite/name" when the set
// has several suites, with " b=N" when the case was swept.
void rp_label(const rp_set *set, const resfile_entry *e, char *buf, size_t cap);

// Writes STEM.gp and STEM.dat of every chart the data allows into dir.
int charts_write(const rp_set *set, const char *dir, rp_charts *out, char *err, size_t cap);

// Writes dir/name with fn(ctx, f, ...); 0, or -1 with err naming the failed call.
typedef int (*rp_writer_fn)(const void *ctx, FILE *f, char *err, size_t cap);
int rp_write_file(const char *dir, const char *name, rp_writer_fn fn, const void *ctx, char *err,
                  size_t cap);

// Writes what b holds to f (name: for messages) and frees it; 0, or -1 with
// err when b ran out of memory or fwrite failed.
int rp_sbuf_flush(sbuf *b, FILE *f, const char *name, char *err, size_t cap);

// Side by side with PyTorch (side_by_side.c), where set->foreign: e's peer
// (bench_mode_peer: torch-eager for eager, torch-compile for compiled, and
// back) of the same case and batch, or NULL.
const resfile_entry *rp_peer_of(const rp_set *set, const resfile_entry *e);
// A tcbench entry's median step over its peer's (below 1: tcbench is
// faster); NAN unless both are ok or pass, timed, and stable when stable.
double rp_peer_ratio(const rp_set *set, const resfile_entry *e, bool stable);
// The summary's section: per suite x precision x workload x device with
// PyTorch's entries, both speedups, both time ratios and both compile times.
void side_summary(const rp_set *set, rdoc *d);
// Per such group, the two speedups and the two time ratios per model.
int side_charts(const rp_set *set, const char *dir, rp_charts *out, char *err, size_t cap);

int csv_write(const rp_set *set, FILE *f, char *err, size_t cap);
void summary_build(const rp_set *set, const rp_charts *charts, rdoc *d);

// Numbers as the tables print them; blank for NAN.
void rp_fmt(char *buf, size_t cap, const char *fmt, double v);
