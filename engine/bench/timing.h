// timing: the measuring loop around one step of a model.
//
//   static int step(void *ctx) { return eager_run(ctx, ...); }   // 0 ok, -1 failed
//   bench_timing t;
//   if (bench_time(step, e, &(bench_timing_opts){.repeat = 10}, &t) < 0) ...
//   // t.samples[0..t.nsamples-1]: seconds per iteration, one per sample
//   bench_timing_free(&t);
//
// Warm-up runs until at least warmup_iters iterations AND warmup_s seconds
// have passed (caches, page faults, thread pools and BLAS buffers settle).
// The fastest warm-up iteration then sets how many iterations make one
// sample, so that each sample is at least sample_min_s of work: short steps
// are timed in groups, as clock and loop overheads would otherwise dominate.
// Should a sample still come out short (the step sped up after warm-up),
// the group grows and sampling starts over. A sample's value is its time
// divided by its iterations. Time is
// CLOCK_MONOTONIC. Zero fields in the options take the defaults below.
#pragma once
#include <stdint.h>

#define BENCH_DEFAULT_REPEAT       10
#define BENCH_DEFAULT_WARMUP_ITERS 3
#define BENCH_DEFAULT_WARMUP_S     0.2
#define BENCH_DEFAULT_SAMPLE_MIN_S 1e-3

typedef int (*bench_step_fn)(void *ctx);

typedef struct bench_timing_opts {
    int repeat;          // samples to take
    int warmup_iters;    // at least this many warm-up iterations
    double warmup_s;     // and at least this long
    double sample_min_s; // each sample at least this much work
} bench_timing_opts;

typedef struct bench_timing {
    double *samples; // seconds per iteration
    int nsamples;
    int64_t iters_per_sample;
    int64_t warmup_iters;
    double warmup_s;
} bench_timing;

// Monotonic seconds since an arbitrary origin.
double bench_now(void);
// 0 on success; -1 when the step fails (its own error stands) or memory runs
// out (t->samples is NULL then).
int bench_time(bench_step_fn step, void *ctx, const bench_timing_opts *opts, bench_timing *t);
void bench_timing_free(bench_timing *t);
