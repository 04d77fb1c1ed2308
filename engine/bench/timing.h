// timing: the measuring loop around one step of a model, or several
// interleaved.
//
//   static int step(void *ctx) { return eager_run(ctx, ...); }   // 0 ok, -1 failed
//   bench_timing t;
//   if (bench_time(step, e, &(bench_timing_opts){.repeat = 10}, &t) < 0) ...
//   // t.samples[0..t.nsamples-1]: seconds per iteration, one per sample
//   bench_timing_free(&t);
//
//   bench_step steps[] = {{eager_step, e}, {compiled_step, c}};
//   bench_timing ts[2];
//   int bad;
//   if (bench_time_interleaved(steps, 2, &opts, ts, &bad) < 0) ...   // bad: which step failed
//
// Warm-up runs until at least warmup_iters iterations AND warmup_s seconds
// have passed (caches, page faults, thread pools and BLAS buffers settle).
// The fastest warm-up iteration then sets how many iterations make one
// sample, so that each sample is at least sample_min_s of work: short steps
// are timed in groups, as clock and loop overheads would otherwise dominate.
// Should a sample still come out short (the step sped up after warm-up),
// the group grows and sampling starts over. A sample's value is its time
// divided by its iterations. Time is CLOCK_MONOTONIC. Zero fields in the
// options take the defaults below.
//
// Interleaved, as PyTorch's harness does "to handle frequency scaling and
// load changes": every step is warmed up in turn and gets its own
// iterations per sample; then each of `repeat` rounds takes one sample of
// every step, in order. A short sample regroups that step and starts every
// step's samples over, so the rounds stay aligned. bench_time is the case of
// one step.
//
// A step may bring its own clock (a GPU's: a CUDA event pair on its stream,
// since a GPU step only enqueues work). Its start is called before a
// sample's first iteration and its stop after the last (stop waits for the
// work); the clock's seconds are then the sample, for warm-up (each warm-up
// iteration is one clocked sample) and grouping alike, and the host's
// seconds over the same span go to host_samples beside them. With
// one_step_samples every sample is one iteration and nothing is grouped:
// for a clock that resolves a single step and a start that prepares it (an
// L2 flush before each step).
#pragma once
#include <stdbool.h>
#include <stdint.h>

#define BENCH_DEFAULT_REPEAT       10
#define BENCH_DEFAULT_WARMUP_ITERS 3
#define BENCH_DEFAULT_WARMUP_S     0.2
#define BENCH_DEFAULT_SAMPLE_MIN_S 1e-3

typedef int (*bench_step_fn)(void *ctx);

// A step's own clock; both get the step's ctx and return 0, or -1 when the
// step's executor failed (its own error stands).
typedef struct bench_clock {
    int (*start)(void *ctx);
    int (*stop)(void *ctx, double *seconds); // waits; seconds since start
} bench_clock;

typedef struct bench_step {
    bench_step_fn fn;
    void *ctx;
    const bench_clock *clock; // NULL: the host's clock alone
} bench_step;

typedef struct bench_timing_opts {
    int repeat;            // samples to take
    int warmup_iters;      // at least this many warm-up iterations
    double warmup_s;       // and at least this long
    double sample_min_s;   // each sample at least this much work
    bool one_step_samples; // every sample one iteration, never grouped
} bench_timing_opts;

typedef struct bench_timing {
    double *samples;      // seconds per iteration (the step's clock when it has one)
    double *host_samples; // with a step clock: the host's seconds per iteration, else NULL
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
// n steps into t[0..n-1]. -1 as above; *failed is the index of the step that
// failed, or -1 when memory ran out. Free each t[i].
int bench_time_interleaved(const bench_step *steps, int n, const bench_timing_opts *opts,
                           bench_timing *t, int *failed);
void bench_timing_free(bench_timing *t);
