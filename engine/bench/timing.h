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
//   // or in two parts, to look at the machine around the timed rounds alone:
//   bench_time_warm_up(steps, 2, &opts, ts, &bad);  ...  bench_time_rounds(steps, 2, &opts, ts,
//   &bad);
//
// Warm-up, until the step time settles: it runs in windows (a window is at
// least 3 iterations and ends once it has lasted 20 ms or holds 256
// iterations) and ends at the end of a window once it has run at least
// warmup_iters iterations and warmup_s seconds, and the median iteration of
// its last window is no more than 3% below the median of the window before
// (the step stopped getting faster: caches, page faults, thread pools, the
// allocator and BLAS buffers have settled), or once it has run warmup_max_s
// (the cap; never before the minimum). warmup_fixed > 0 replaces the rule:
// exactly that many iterations (`--warmup N`). The fastest warm-up
// iteration then sets how many iterations make one sample, so that each
// sample is at least sample_min_s of work: short steps are timed in groups,
// as clock and loop overheads would otherwise dominate. Should a sample
// still come out short (the step sped up after warm-up), the group grows and
// sampling starts over. A sample's value is its time divided by its
// iterations. Time is CLOCK_MONOTONIC. Zero fields in the options take the
// defaults below, except min_time_s, max_time_s and ci_target (zero: off).
//
// Interleaved, as PyTorch's harness does "to handle frequency scaling and
// load changes": every step is warmed up in turn and gets its own
// iterations per sample; then each round takes one sample of every step.
// The order rotates: round r starts with step r mod n (with two steps:
// a b, b a, a b, ...), so no step always runs first, right after the
// previous round's last step, or always last. A short sample regroups that
// step and starts every step's samples over (round 0 again), so sample i of
// every step comes from round i: the rounds stay aligned, which the paired
// bootstrap of a speedup relies on. bench_time is the case of one step.
//
// How many rounds: at least `repeat`, and then more while any step's
// samples add up to less than min_time_s (its timed seconds, by the host's
// clock), or, with ci_target > 0 and two steps or more, while the paired
// 95% interval (stats.h) of some step's speedup over step 0 (median step 0
// / median step k) is wider than ci_target of that speedup: measure until
// the figure is known. The interval is looked at after `repeat` rounds and
// then each time the rounds have grown by half. No extra round starts once
// some step's samples add up to max_time_s (the budget; it wins over
// min_time_s but never cuts the `repeat` rounds), nor past
// BENCH_MAX_ROUNDS rounds (unless `repeat` asks for more).
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
#define BENCH_DEFAULT_WARMUP_MAX_S 1.0
#define BENCH_DEFAULT_SAMPLE_MIN_S 1e-3
// the settling rule's window and how much faster a window may be and still count as settled
#define BENCH_WARMUP_WINDOW_ITERS 3
#define BENCH_WARMUP_WINDOW_S     0.02
#define BENCH_WARMUP_WINDOW_MAX   256
#define BENCH_WARMUP_SETTLE       0.03
// extra rounds never go past this, whatever the budget
#define BENCH_MAX_ROUNDS 10000

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
    int repeat;            // rounds at least
    int warmup_iters;      // at least this many warm-up iterations
    double warmup_s;       // and at least this long
    double warmup_max_s;   // the settling rule's cap
    int warmup_fixed;      // > 0: exactly this many warm-up iterations, no settling
    double sample_min_s;   // each sample at least this much work
    bool one_step_samples; // every sample one iteration, never grouped
    double min_time_s;     // rounds until every step's samples add up to this (0: off)
    double max_time_s;     // no extra round once a step's samples add up to this (0: off)
    double ci_target; // extra rounds while a speedup's 95% interval is wider, relative (0: off)
} bench_timing_opts;

typedef struct bench_timing {
    double *samples;      // seconds per iteration (the step's clock when it has one)
    double *host_samples; // with a step clock: the host's seconds per iteration, else NULL
    int nsamples;         // one per round
    int cap;              // room in samples (and host_samples)
    int64_t iters_per_sample;
    int64_t warmup_iters;
    double warmup_s;
    bool warmup_settled; // the settling rule ended the warm-up (false: the cap or --warmup N)
    double timed_s;      // host seconds of the kept samples, all iterations
} bench_timing;

// 0 on success; -1 when the step fails (its own error stands) or memory runs
// out (t->samples is NULL then).
int bench_time(bench_step_fn step, void *ctx, const bench_timing_opts *opts, bench_timing *t);
// n steps into t[0..n-1]: warm-up then rounds. -1 as above; *failed is the
// index of the step that failed, or -1 when memory ran out. Free each t[i].
int bench_time_interleaved(const bench_step *steps, int n, const bench_timing_opts *opts,
                           bench_timing *t, int *failed);
// The two halves of bench_time_interleaved: warm-up (zeroes t first), then
// the rounds on the warmed-up t. Same returns.
int bench_time_warm_up(const bench_step *steps, int n, const bench_timing_opts *opts,
                       bench_timing *t, int *failed);
int bench_time_rounds(const bench_step *steps, int n, const bench_timing_opts *opts,
                      bench_timing *t, int *failed);
void bench_timing_free(bench_timing *t);
