// output: a run's results file and its journal, from a plan's results
// (results.h writes each entry; this adds what the plan and config know).
//
//   bench_report *r; char err[512];
//   if (bench_report_open(p, &r, err, sizeof err) < 0) ...   // output path, journal, host
//   bench_run(p, r, &hooks);                                 // runner.h
//   if (bench_report_write(r, err, sizeof err) < 0) ...      // atomic results JSON
//   ... r->results[i].status ...
//   bench_report_free(r);
//
// Each finished task is appended to OUTPUT.jsonl at once (flushed and
// fsync'd), so a killed run loses nothing already measured.
#pragma once
#include "calibrate.h"
#include "plan.h"
#include "results/results.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

typedef struct bench_report {
    const bench_plan *plan;
    bench_result *results; // one per task, in order; nresults so far
    int nresults;
    char output[4096];  // results JSON path
    char journal[4104]; // output + ".jsonl"
    char timestamp[32]; // start of the run, ISO 8601 UTC
    double wall_s;      // whole run
    json_t *host;
    FILE *journal_file;
    bench_calibration calib; // `tcbench calibrate`'s, when has_calib
    bool has_calib;
    char lock[4112]; // output + ".lock", held on lock_fd for the run ("" none)
    int lock_fd;
} bench_report;

// Resolves the output path (creating its directory), opens the journal,
// reads the host description and loads the calibration (host.calibration,
// null when there is none for this CPU and thread count). -1 with a message naming the failed call.
// Before anything is measured it refuses an output that is a directory, a
// file it cannot replace, in a directory that takes no new file, or that
// another run writes (it holds OUTPUT.lock, which this run then holds
// until bench_report_free), and removes the OUTPUT.tmp.PID a killed
// writer left.
int bench_report_open(const bench_plan *p, bench_report **out, char *err, size_t cap);
// Writes OUTPUT.tmp.PID, fsyncs it and renames it over OUTPUT.
int bench_report_write(const bench_report *r, char *err, size_t cap);
void bench_report_free(bench_report *r);
// The whole document / one case object, as in docs/results-schema.md; calib
// may be NULL (the roofline then has no ceilings).
json_t *bench_report_json(const bench_report *r);
json_t *bench_result_json(const bench_plan *p, const bench_result *r,
                          const bench_calibration *calib);
// What identifies task's entry, from the plan (strings are the plan's).
void bench_result_case(const bench_plan *p, int task, results_case *id);
