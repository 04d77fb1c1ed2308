// runner: runs the groups of a plan (plan.h), each in its own child
// process, into a report (output.h).
//
//   bench_report *r; char err[512];
//   if (bench_report_open(p, &r, err, sizeof err) < 0) ...   // output.h
//   bench_run(p, r, &(bench_hooks){.on_done = show});        // one child per group
//   if (bench_report_write(r, err, sizeof err) < 0) ...
//
// Running forks one child per group; the child measures the group
// (measure.h) and sends a JSON array, one case object per task
// (results.h), back through a pipe. The parent enforces the time limit and
// turns a signal, a timeout or an out-of-memory exit into the status of
// every task of the group; the run always goes on with the next group.
// With --processes N (default BENCH_DEFAULT_PROCESSES) the group then runs
// in N - 1 more children, one after the other, each building the model
// anew, loading the first child's programs from a kernel cache the group's
// children share, and timing again; their samples are pooled into the
// first child's results (bench_group_pool), and the spread of the
// processes' medians is recorded beside the noise. A crash or timeout in a
// later child fails the entry as in the first. Each finished task is
// appended to the journal at once (output.h).
//
// A cuda group's executors are made in its child: a CUDA context does not
// survive fork(), so the parent never makes one (bench_report_open
// describes the GPU for host.gpus in a forked child of its own).
//
// The parent must not have run an OpenMP parallel region with more than one
// thread before bench_run: libgomp's thread pool does not survive fork, and
// a child that needs it would hang until its timeout. (The CLI's parent only
// loads and builds; bench_group_measure in-process is fine with threads = 1.)
//
// Test-only faults and noise: faults.h.
#pragma once
#include "output.h"
#include "plan.h"
#include "results/results.h"

#include <signal.h>

// A child that runs out of memory exits with this code.
#define BENCH_EXIT_OOM 99
// The run's exit status when an interrupt stops it (128 + SIGINT).
#define BENCH_EXIT_INTERRUPTED 130

// Set to stop the run (bench_catch_interrupt's handler sets it on
// SIGINT): bench_run kills the running child, drops its group's results
// unjournaled and starts no other; r->interrupted then says so.
extern volatile sig_atomic_t bench_stop;
// Installs the SIGINT handler (sigaction, no SA_RESTART) that sets
// bench_stop; a second SIGINT kills the running child and _exits with
// BENCH_EXIT_INTERRUPTED. -1 with err naming the call.
int bench_catch_interrupt(char *err, size_t cap);

typedef struct bench_hooks {
    void (*on_start)(const bench_plan *p, int group, void *user);
    // about every 0.25 s while a group's child runs
    void (*on_tick)(const bench_plan *p, int group, double elapsed_s, void *user);
    // once per task, in order, when its group's child has ended
    void (*on_done)(const bench_plan *p, const bench_result *r, void *user);
    void *user;
} bench_hooks;

// Runs every group of p into r, once per report (hooks may be NULL), but
// those r already holds (done: a resumed run's). Returns the number of
// tasks that did not end ok or pass, resumed ones included; a journal line
// that cannot be written is reported once on stderr (r->journal_err) and
// the run goes on, journaling no more.
int bench_run(const bench_plan *p, bench_report *r, const bench_hooks *hooks);
// Fills rs[0 .. n - 1] from the JSON array the child sent; -1 (every
// result error) when it is not an array of n case objects.
int bench_results_from_child(const char *text, size_t len, bench_result *rs, int n);
