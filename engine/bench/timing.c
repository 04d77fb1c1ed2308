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

// One sample of `iters` iterations of s: *secs by the step's clock (the
// host's without one), *host_secs by the host's. -1 when the step fails.
static int sample(const bench_step *s, int64_t iters, double *secs, double *host_secs) {
    double t0 = bench_now();
    if (s->clock && s->clock->start(s->ctx) < 0)
        return -1;
    for (int64_t i = 0; i < iters; i++)
        if (s->fn(s->ctx) < 0)
            return -1;
    double dev = 0;
    if (s->clock && s->clock->stop(s->ctx, &dev) < 0)
        return -1;
    *host_secs = bench_now() - t0;
    *secs = s->clock ? dev : *host_secs;
    return 0;
}

// Warm-up of one step; sets its iterations per sample. -1 when it fails.
static int warm_up(const bench_step *s, const bench_timing_opts *o, bench_timing *t) {
    double start = bench_now(), fastest = INFINITY;
    for (;;) {
        double dt, host;
        if (sample(s, 1, &dt, &host) < 0)
            return -1;
        if (dt < fastest)
            fastest = dt;
        t->warmup_iters++;
        t->warmup_s = bench_now() - start;
        if (t->warmup_iters >= o->warmup_iters && t->warmup_s >= o->warmup_s)
            break;
    }
    // A step faster than the clock's resolution reads as 0: count it as 1 ns.
    if (fastest < 1e-9)
        fastest = 1e-9;
    t->iters_per_sample = o->one_step_samples ? 1 : (int64_t)ceil(o->sample_min_s / fastest);
    if (t->iters_per_sample < 1)
        t->iters_per_sample = 1;
    return 0;
}

int bench_time_interleaved(const bench_step *steps, int n, const bench_timing_opts *opts,
                           bench_timing *t, int *failed) {
    memset(t, 0, (size_t)n * sizeof *t);
    *failed = -1;
    bench_timing_opts o = {
        .repeat = opts && opts->repeat > 0 ? opts->repeat : BENCH_DEFAULT_REPEAT,
        .warmup_iters =
            opts && opts->warmup_iters > 0 ? opts->warmup_iters : BENCH_DEFAULT_WARMUP_ITERS,
        .warmup_s = opts && opts->warmup_s > 0 ? opts->warmup_s : BENCH_DEFAULT_WARMUP_S,
        .sample_min_s =
            opts && opts->sample_min_s > 0 ? opts->sample_min_s : BENCH_DEFAULT_SAMPLE_MIN_S,
        .one_step_samples = opts && opts->one_step_samples,
    };

    for (int k = 0; k < n; k++)
        if (warm_up(&steps[k], &o, &t[k]) < 0) {
            *failed = k;
            return -1;
        }
    for (int k = 0; k < n; k++) {
        if (!(t[k].samples = malloc((size_t)o.repeat * sizeof *t[k].samples)))
            return -1;
        if (steps[k].clock &&
            !(t[k].host_samples = malloc((size_t)o.repeat * sizeof *t[k].host_samples)))
            return -1;
    }
    // A step that got faster after warm-up can leave a sample short of
    // min_s: regroup it with more iterations and start the samples over, so
    // every sample kept is at least min_s (a few rounds at most).
    int regroups = 0;
    for (int round = 0; round < o.repeat; round++) {
        for (int k = 0; k < n; k++) {
            double dt, host;
            if (sample(&steps[k], t[k].iters_per_sample, &dt, &host) < 0) {
                *failed = k;
                return -1;
            }
            if (dt < o.sample_min_s && !o.one_step_samples && regroups < MAX_REGROUPS) {
                double grow = dt > 0 ? 1.1 * o.sample_min_s / dt : 2;
                t[k].iters_per_sample =
                    (int64_t)ceil((double)t[k].iters_per_sample * (grow > 2 ? grow : 2));
                regroups++;
                for (int j = 0; j < n; j++)
                    t[j].nsamples = 0;
                round = -1;
                break;
            }
            double iters = (double)t[k].iters_per_sample;
            if (t[k].host_samples)
                t[k].host_samples[t[k].nsamples] = host / iters;
            t[k].samples[t[k].nsamples++] = dt / iters;
        }
    }
    return 0;
}

int bench_time(bench_step_fn step, void *ctx, const bench_timing_opts *opts, bench_timing *t) {
    int failed;
    return bench_time_interleaved(&(bench_step){.fn = step, .ctx = ctx}, 1, opts, t, &failed);
}

void bench_timing_free(bench_timing *t) {
    free(t->samples);
    free(t->host_samples);
    t->samples = NULL;
    t->host_samples = NULL;
    t->nsamples = 0;
}
