// report: results files to the study's tables and charts (docs/reports.md).
//
//   resfile *files[2];                      // resfile_load each (resfile.h)
//   report_options o = {.outdir = "report", .gnuplot = "gnuplot", .warn = stderr};
//   char err[512];
//   if (report_write(files, 2, &o, err, sizeof err) < 0) { fprintf(stderr, "%s\n", err); ... }
//
// writes, under outdir:
//   summary.md   the executive summary per suite x precision x workload (pass
//                rate "87%, 47/54", geomean speedup over the stable entries
//                that passed, unclipped, with the others listed; mean compile
//                time; memory compression), the headline 0.75 x AMP + 0.25 x
//                fp32 over the models that have both, the kill switches,
//                warnings (failed and unstable entries by name), the ablation
//                split, per-model tables with noise and compile break-even,
//                sweeps; beside PyTorch's entries (torch-eager, torch-compile:
//                scripts/torch_side_by_side.py), both speedups, the time
//                ratios to PyTorch and both compile times
//   results.csv  one row per entry, PyTorch's column names where it has one
//   index.html   the same document as one self-contained page, charts inline
//   charts/      NAME.gp and NAME.dat per chart, and NAME.png / NAME.svg
//                when gnuplot ran (fork + execvp, never a shell)
//
// Without gnuplot on PATH the tables are still written and the scripts
// kept: one warning line goes to o->warn and report_write returns 0.
// Several files are merged; the same entry (resfile_entry_same) in two of
// them is an error, as the report could not say which to believe.
#pragma once
#include "resfile.h"

#include <stdio.h>

typedef struct report_options {
    const char *outdir;
    const char *gnuplot; // the program, looked up on PATH; NULL: "gnuplot"
    FILE *warn;          // the warning line; NULL: stderr
} report_options;

// 0, or -1 with err (bad input, or a write that failed, naming the call).
int report_write(resfile *const *files, int nfiles, const report_options *o, char *err, size_t cap);

// The dashboard's figures, exposed for tests.
// "87%, 47/54": the percentage rounded half to even, as PyTorch's Python did.
void report_pass_rate(int passed, int total, char *buf, size_t cap);
// PyTorch 2.0's headline: 0.75 x AMP + 0.25 x fp32 geomean speedups.
double report_headline(double amp, double fp32);
// Compile break-even: the steps after which a cold compile has paid for
// itself, cold_s / (eager_s - mode_s), rounded up; INFINITY ("never") when
// the mode is not faster than eager; NAN when a figure is missing.
double report_breakeven(double cold_s, double eager_s, double mode_s);
