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
// OUTPUT.jsonl, the journal (results/journal.h): a header line, then each
// finished task's case object appended at once (flushed and fsync'd), so a
// killed run loses nothing already measured and can go on (resume.h).
#pragma once
#include "calibrate.h"
#include "plan.h"
#include "results/results.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

typedef struct bench_report {
    const bench_plan *plan;
    bench_result *results; // one per task, at its index in the plan; done[task] when filled
    bool *done;
    int nresults;       // tasks done
    char output[4096];  // results JSON path
    char journal[4104]; // output + ".jsonl"
    char timestamp[32]; // start of the run, ISO 8601 UTC
    double wall_s;      // whole run
    json_t *host;
    json_t *command_line; // NULL: the plan's cfg.argv (a resumed run: the journal's)
    FILE *journal_file;
    int journaled;           // case lines the journal holds for this run's entries
    int resumed;             // of which taken from an earlier run's journal (--resume)
    bool journal_failed;     // a journal write failed: journaled stops there
    char journal_err[4400];  // what failed ("write results/x.json.jsonl: No space left ...")
    bool interrupted;        // bench_run stopped at bench_stop (runner.h)
    bench_calibration calib; // `tcbench calibrate`'s, when has_calib
    bool has_calib;
    char lock[4112]; // output + ".lock", held on lock_fd for the run ("" none)
    int lock_fd;
} bench_report;

// Resolves the output path (creating its directory), reads the host
// description, loads the calibration (host.calibration, null when there is
// none for this CPU and thread count), opens the journal and writes its
// header line. -1 with a message naming the failed call; -2 when the output
// is refused before anything is measured: a directory, a file it cannot
// replace, a directory that takes no new file, or one another run writes
// (it holds OUTPUT.lock, which this run then holds until
// bench_report_free). It removes the OUTPUT.tmp.PID a killed writer left.
// A header that cannot be written is not fatal: journal_failed says so (as
// bench_report_journal, with a line on stderr).
int bench_report_open(const bench_plan *p, bench_report **out, char *err, size_t cap);
// bench_report_open's first part, for resume.h: the report, its paths (the
// output claimed: -2 when refused), timestamp, host and calibration, with
// no journal opened.
int bench_report_new(const bench_plan *p, bench_report **out, char *err, size_t cap);
// Appends results[task]'s case object to the journal and counts it; after
// a failed write nothing more is appended. 0, or -1 the first time a write
// fails (journal_err says what failed, and a line on stderr says it with
// how many entries the journal holds).
int bench_report_journal(bench_report *r, int task);
// Writes the entries done, in plan order, to OUTPUT.tmp.PID, fsyncs it and
// renames it over OUTPUT.
int bench_report_write(const bench_report *r, char *err, size_t cap);
void bench_report_free(bench_report *r);
// The whole document / one case object, as in docs/results-schema.md; calib
// may be NULL (the roofline then has no ceilings).
json_t *bench_report_json(const bench_report *r);
json_t *bench_result_json(const bench_plan *p, const bench_result *r,
                          const bench_calibration *calib);
// The document's "config" object for p (NULL when memory runs out).
json_t *bench_config_json(const bench_plan *p);
// What identifies task's entry, from the plan (strings are the plan's).
void bench_result_case(const bench_plan *p, int task, results_case *id);
