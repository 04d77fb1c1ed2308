// stability: whether an entry's timing can be trusted (the stability
// object of docs/results-schema.md).
//
//   bench_stability s = {.rounds = 10, .noise = 0.15, .threads = 2, .cpus = 2};
//   bench_stability_judge(&s);   // s.unstable, s.reasons[0] = "noise 15.0% > 10%"
//
// Every entry with samples carries its stability: its noise, its speedup
// interval's width, and what the machine did during the timed rounds
// (involuntary context switches of the child, steal time, load).
// bench_stability_judge calls it unstable past the caps below; an unstable
// entry keeps its status and is left out of every geomean.
#pragma once
#include "results/results.h"

#include <stdbool.h>

// An entry is unstable above these: its noise (bench_stats_noise), its
// speedup's 95% interval relative to the speedup, involuntary context
// switches per second of timed rounds and per measuring thread, the
// measuring threads' time waiting for a CPU as a fraction of theirs, steal
// time as a fraction of the CPUs' time.
#define BENCH_NOISE_CAP        0.10
#define BENCH_CI_CAP           0.25
#define BENCH_NIVCSW_CAP_PER_S 50.0
#define BENCH_RUN_DELAY_CAP    0.05
#define BENCH_STEAL_CAP        0.05
// Eager on the run's threads slower than this times eager on one thread:
// a threading stall, not the workload (every entry of the case unstable).
#define BENCH_THREAD_STALL 1.5

// Sets s->unstable and s->reasons from its figures (the caps above).
void bench_stability_judge(bench_stability *s);
// Adds a reason (at most BENCH_MAX_REASONS kept); the entry is then unstable.
void bench_stability_add(bench_stability *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
// Eager's median on `threads` threads against its median on one: above
// BENCH_THREAD_STALL, adds the reason (the entry is then unstable) and
// returns true.
bool bench_thread_stall_judge(bench_stability *s, double eager_s, double one_thread_s, int threads);
