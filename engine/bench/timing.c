// The measuring loop (timing.h).
#include "timing.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double bench_now(void) {
    struct timespec ts;
    // CLOCK_MONOTONIC cannot fail on Linux with a valid pointer; a zero
    // clock would show as zero durations, never as a crash.
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
        return 0;
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int bench_time(bench_step_fn step, void *ctx, const bench_timing_opts *opts, bench_timing *t) {
    memset(t, 0, sizeof *t);
    int repeat = opts && opts->repeat > 0 ? opts->repeat : BENCH_DEFAULT_REPEAT;
    int wu_iters = opts && opts->warmup_iters > 0 ? opts->warmup_iters : BENCH_DEFAULT_WARMUP_ITERS;
    double wu_s = opts && opts->warmup_s > 0 ? opts->warmup_s : BENCH_DEFAULT_WARMUP_S;
    double min_s = opts && opts->sample_min_s > 0 ? opts->sample_min_s : BENCH_DEFAULT_SAMPLE_MIN_S;

    double start = bench_now(), fastest = INFINITY;
    for (;;) {
        double t0 = bench_now();
        if (step(ctx) < 0)
            return -1;
        double dt = bench_now() - t0;
        if (dt < fastest)
            fastest = dt;
        t->warmup_iters++;
        t->warmup_s = bench_now() - start;
        if (t->warmup_iters >= wu_iters && t->warmup_s >= wu_s)
            break;
    }

    // A step faster than the clock's resolution reads as 0: count it as 1 ns.
    if (fastest < 1e-9)
        fastest = 1e-9;
    t->iters_per_sample = (int64_t)ceil(min_s / fastest);
    if (t->iters_per_sample < 1)
        t->iters_per_sample = 1;

    t->samples = malloc((size_t)repeat * sizeof *t->samples);
    if (!t->samples)
        return -1;
    // A step that got faster after warm-up can leave a sample short of
    // min_s: regroup with more iterations and start the samples over, so
    // every sample kept is at least min_s (a few rounds at most).
    for (int round = 0; t->nsamples < repeat;) {
        double t0 = bench_now();
        for (int64_t i = 0; i < t->iters_per_sample; i++)
            if (step(ctx) < 0)
                return -1;
        double dt = bench_now() - t0;
        if (dt < min_s && round < 8) {
            double grow = dt > 0 ? 1.1 * min_s / dt : 2;
            t->iters_per_sample =
                (int64_t)ceil((double)t->iters_per_sample * (grow > 2 ? grow : 2));
            t->nsamples = 0;
            round++;
            continue;
        }
        t->samples[t->nsamples++] = dt / (double)t->iters_per_sample;
    }
    return 0;
}

void bench_timing_free(bench_timing *t) {
    free(t->samples);
    t->samples = NULL;
    t->nsamples = 0;
}
