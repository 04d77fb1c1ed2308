// The measuring loop (timing.h).
#include "timing.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

// regroupings before a short sample is kept as it is
#define MAX_REGROUPS 8

double bench_now(void) {
    struct timespec ts;
    // CLOCK_MONOTONIC cannot fail on Linux with a valid pointer; a zero
    // clock would show as zero durations, never as a crash.
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
        return 0;
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// Warm-up of one step; sets its iterations per sample. -1 when it fails.
static int warm_up(const bench_step *s, int iters, double secs, double min_s, bench_timing *t) {
    double start = bench_now(), fastest = INFINITY;
    for (;;) {
        double t0 = bench_now();
        if (s->fn(s->ctx) < 0)
            return -1;
        double dt = bench_now() - t0;
        if (dt < fastest)
            fastest = dt;
        t->warmup_iters++;
        t->warmup_s = bench_now() - start;
        if (t->warmup_iters >= iters && t->warmup_s >= secs)
            break;
    }
    // A step faster than the clock's resolution reads as 0: count it as 1 ns.
    if (fastest < 1e-9)
        fastest = 1e-9;
    t->iters_per_sample = (int64_t)ceil(min_s / fastest);
    if (t->iters_per_sample < 1)
        t->iters_per_sample = 1;
    return 0;
}

int bench_time_interleaved(const bench_step *steps, int n, const bench_timing_opts *opts,
                           bench_timing *t, int *failed) {
    memset(t, 0, (size_t)n * sizeof *t);
    *failed = -1;
    int repeat = opts && opts->repeat > 0 ? opts->repeat : BENCH_DEFAULT_REPEAT;
    int wu_iters = opts && opts->warmup_iters > 0 ? opts->warmup_iters : BENCH_DEFAULT_WARMUP_ITERS;
    double wu_s = opts && opts->warmup_s > 0 ? opts->warmup_s : BENCH_DEFAULT_WARMUP_S;
    double min_s = opts && opts->sample_min_s > 0 ? opts->sample_min_s : BENCH_DEFAULT_SAMPLE_MIN_S;

    for (int k = 0; k < n; k++)
        if (warm_up(&steps[k], wu_iters, wu_s, min_s, &t[k]) < 0) {
            *failed = k;
            return -1;
        }
    for (int k = 0; k < n; k++)
        if (!(t[k].samples = malloc((size_t)repeat * sizeof *t[k].samples)))
            return -1;
    // A step that got faster after warm-up can leave a sample short of
    // min_s: regroup it with more iterations and start the samples over, so
    // every sample kept is at least min_s (a few rounds at most).
    int regroups = 0;
    for (int round = 0; round < repeat; round++) {
        for (int k = 0; k < n; k++) {
            double t0 = bench_now();
            for (int64_t i = 0; i < t[k].iters_per_sample; i++)
                if (steps[k].fn(steps[k].ctx) < 0) {
                    *failed = k;
                    return -1;
                }
            double dt = bench_now() - t0;
            if (dt < min_s && regroups < MAX_REGROUPS) {
                double grow = dt > 0 ? 1.1 * min_s / dt : 2;
                t[k].iters_per_sample =
                    (int64_t)ceil((double)t[k].iters_per_sample * (grow > 2 ? grow : 2));
                regroups++;
                for (int j = 0; j < n; j++)
                    t[j].nsamples = 0;
                round = -1;
                break;
            }
            t[k].samples[t[k].nsamples++] = dt / (double)t[k].iters_per_sample;
        }
    }
    return 0;
}

int bench_time(bench_step_fn step, void *ctx, const bench_timing_opts *opts, bench_timing *t) {
    int failed;
    return bench_time_interleaved(&(bench_step){step, ctx}, 1, opts, t, &failed);
}

void bench_timing_free(bench_timing *t) {
    free(t->samples);
    t->samples = NULL;
    t->nsamples = 0;
}
