// The measuring loop (timing.h).
#include "timing.h"

#include "base/clock.h"
#include "results/stats.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

// regroupings before a short sample is kept as it is
#define MAX_REGROUPS 8

static bench_timing_opts with_defaults(const bench_timing_opts *opts) {
    bench_timing_opts o = opts ? *opts : (bench_timing_opts){0};
    if (o.repeat <= 0)
        o.repeat = BENCH_DEFAULT_REPEAT;
    if (o.warmup_iters <= 0)
        o.warmup_iters = BENCH_DEFAULT_WARMUP_ITERS;
    if (o.warmup_s <= 0)
        o.warmup_s = BENCH_DEFAULT_WARMUP_S;
    if (o.warmup_max_s <= 0)
        o.warmup_max_s = BENCH_DEFAULT_WARMUP_MAX_S;
    if (o.sample_min_s <= 0)
        o.sample_min_s = BENCH_DEFAULT_SAMPLE_MIN_S;
    return o;
}

// One sample of `iters` iterations of s: *secs by the step's clock (the
// host's without one), *host_secs by the host's. -1 when the step fails.
static int sample(const bench_step *s, int64_t iters, double *secs, double *host_secs) {
    double t0 = base_now();
    if (s->clock && s->clock->start(s->ctx) < 0)
        return -1;
    for (int64_t i = 0; i < iters; i++)
        if (s->fn(s->ctx) < 0)
            return -1;
    double dev = 0;
    if (s->clock && s->clock->stop(s->ctx, &dev) < 0)
        return -1;
    *host_secs = base_now() - t0;
    *secs = s->clock ? dev : *host_secs;
    return 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// Median of x[0..n-1], sorting it in place.
static double median_inplace(double *x, int n) {
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    return bench_quantile_sorted(x, n, 0.5);
}

// Warm-up of one step (the rule in timing.h); sets its iterations per
// sample. -1 when it fails.
static int warm_up(const bench_step *s, const bench_timing_opts *o, bench_timing *t) {
    double start = base_now(), fastest = INFINITY, prev = NAN;
    double window[BENCH_WARMUP_WINDOW_MAX];
    int nw = 0;
    double window_t0 = start;
    for (;;) {
        double dt, host;
        if (sample(s, 1, &dt, &host) < 0)
            return -1;
        if (dt < fastest)
            fastest = dt;
        t->warmup_iters++;
        double now = base_now();
        t->warmup_s = now - start;
        if (o->warmup_fixed > 0) {
            if (t->warmup_iters >= o->warmup_fixed)
                break;
            continue;
        }
        window[nw++] = dt;
        bool window_full =
            nw >= BENCH_WARMUP_WINDOW_ITERS &&
            (now - window_t0 >= BENCH_WARMUP_WINDOW_S || nw == BENCH_WARMUP_WINDOW_MAX);
        bool minimum = t->warmup_iters >= o->warmup_iters && t->warmup_s >= o->warmup_s;
        if (window_full) {
            double med = median_inplace(window, nw);
            // settled: this window is not more than a few percent faster than the last
            if (minimum && isfinite(prev) && med >= (1 - BENCH_WARMUP_SETTLE) * prev) {
                t->warmup_settled = true;
                break;
            }
            prev = med;
            nw = 0;
            window_t0 = now;
        }
        if (minimum && t->warmup_s >= o->warmup_max_s)
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

int bench_time_warm_up(const bench_step *steps, int n, const bench_timing_opts *opts,
                       bench_timing *t, int *failed) {
    memset(t, 0, (size_t)n * sizeof *t);
    *failed = -1;
    bench_timing_opts o = with_defaults(opts);
    for (int k = 0; k < n; k++)
        if (warm_up(&steps[k], &o, &t[k]) < 0) {
            *failed = k;
            return -1;
        }
    return 0;
}

// Room for one more sample in t; -1 when memory runs out.
static int make_room(bench_timing *t, bool host) {
    if (t->nsamples < t->cap)
        return 0;
    int cap = t->cap ? 2 * t->cap : 16;
    double *s = realloc(t->samples, (size_t)cap * sizeof *s);
    if (!s)
        return -1;
    t->samples = s;
    if (host) {
        double *h = realloc(t->host_samples, (size_t)cap * sizeof *h);
        if (!h)
            return -1;
        t->host_samples = h;
    }
    t->cap = cap;
    return 0;
}

// Whether some step's speedup over step 0 (its paired interval) is wider
// than the target, over the rounds so far. Out of memory counts as narrow:
// the rounds then stop at their minimum rather than run blind.
static bool interval_wide(const bench_timing *t, int n, double target) {
    for (int k = 1; k < n; k++) {
        bench_speedup sp;
        if (bench_speedup_paired(t[0].samples, t[k].samples, t[0].nsamples, &sp) < 0)
            return false;
        if (!((sp.ci95_hi - sp.ci95_lo) / sp.median <= target)) // NaN counts as wide
            return true;
    }
    return false;
}

// Whether round `round` (0-based, the rounds before it taken) should be
// taken: the rule in timing.h. *next_check and *wide carry the interval's
// last verdict between calls.
static bool want_round(const bench_timing *t, int n, const bench_timing_opts *o, int round,
                       int *next_check, bool *wide) {
    if (round < o->repeat)
        return true;
    if (round >= BENCH_MAX_ROUNDS)
        return false;
    for (int k = 0; k < n; k++)
        if (o->max_time_s > 0 && t[k].timed_s >= o->max_time_s)
            return false;
    for (int k = 0; k < n; k++)
        if (t[k].timed_s < o->min_time_s)
            return true;
    if (!(o->ci_target > 0) || n < 2)
        return false;
    if (round >= *next_check) {
        *wide = interval_wide(t, n, o->ci_target);
        *next_check = round + (round / 2 > 1 ? round / 2 : 1);
    }
    return *wide;
}

int bench_time_rounds(const bench_step *steps, int n, const bench_timing_opts *opts,
                      bench_timing *t, int *failed) {
    *failed = -1;
    bench_timing_opts o = with_defaults(opts);
    // A step that got faster after warm-up can leave a sample short of
    // min_s: regroup it with more iterations and start the samples over, so
    // every sample kept is at least min_s (a few rounds at most).
    int regroups = 0, next_check = o.repeat;
    bool wide = true;
    for (int round = 0; want_round(t, n, &o, round, &next_check, &wide); round++) {
        for (int j = 0; j < n; j++) {
            int k = (round + j) % n; // the order rotates: timing.h
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
                for (int i = 0; i < n; i++) {
                    t[i].nsamples = 0;
                    t[i].timed_s = 0;
                }
                next_check = o.repeat;
                wide = true;
                round = -1;
                break;
            }
            if (make_room(&t[k], steps[k].clock != NULL) < 0)
                return -1;
            double iters = (double)t[k].iters_per_sample;
            if (steps[k].clock)
                t[k].host_samples[t[k].nsamples] = host / iters;
            t[k].samples[t[k].nsamples++] = dt / iters;
            t[k].timed_s += host;
        }
    }
    return 0;
}

int bench_time_interleaved(const bench_step *steps, int n, const bench_timing_opts *opts,
                           bench_timing *t, int *failed) {
    if (bench_time_warm_up(steps, n, opts, t, failed) < 0)
        return -1;
    return bench_time_rounds(steps, n, opts, t, failed);
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
    t->cap = 0;
}
