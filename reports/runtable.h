// runtable: the table `tcbench run` prints when it ends, from the entries
// it measured, with one summary line per compiled-family mode x precision x
// workload (x device): pass rate and geomean speedup.
//
//   runtable_row rows[n];    // one per entry, in run order
//   rows[i] = (runtable_row){.label = "mlp", .long_label = "mlp [eager]",
//                            .id = &id, .r = &result};   // results.h
//   runtable t = {.rows = rows, .n = n, .green = "", .red = "", .reset = "",
//                 .wall_s = 12.5, .output = "results/x.json"};
//   runtable_print(stdout, &t);
//
// The geomean is taken over the entries that passed and are not unstable,
// slowdowns included as they are (stats.h's bench_geomean, as every report
// table); a blend over precisions or workloads would mix unlike figures.
#pragma once
#include "results/results.h"

#include <stdbool.h>
#include <stdio.h>

typedef struct runtable_row {
    const char *label;      // the case column: "bert_tiny", "bert_tiny [fp32 infer]"
    const char *long_label; // the same with the mode, for the lines under the table
    const results_case *id; // mode, precision, workload and device name the summary line
    const bench_result *r;
} runtable_row;

typedef struct runtable {
    const runtable_row *rows;
    int n;
    bool by_device;                  // the summary lines name the device (the run has several)
    const char *green, *red, *reset; // the status column's colour sequences, "" for none
    double wall_s;                   // the whole run
    const char *output;              // the results file; NULL: no last line
} runtable;

// The table, the summary lines, the failures and the unstable entries with
// their reasons, then the wall time and the results path (when output).
void runtable_print(FILE *out, const runtable *t);
// The summary lines alone.
void runtable_summary(FILE *out, const runtable *t);
