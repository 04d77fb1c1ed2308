// stats: summary statistics of timing samples.
//
//   double s[] = {1.0e-3, 1.1e-3, 0.9e-3, 5.0e-3};
//   bench_stats st;
//   bench_stats_compute(s, 4, &st);   // st.median, st.q1, st.q3, st.outliers, ...
//
// Quantiles interpolate linearly between order statistics at position
// p * (n - 1) (numpy's default, R type 7), so a single sample is its own
// median and quartiles. stddev is the sample standard deviation (n - 1; 0
// for n = 1); cv = stddev / mean; mad is the unscaled median absolute
// deviation from the median; an outlier lies outside [q1 - 1.5 IQR,
// q3 + 1.5 IQR] (Tukey's fences).
//
//   bench_speedup sp;
//   bench_speedup_bootstrap(eager_s, ne, compiled_s, nc, &sp);   // sp.median, sp.ci95_lo, ...
//
// The speedup is median(base) / median(x). Its 95% interval is a
// percentile bootstrap: both sides resampled with replacement 2000 times
// from a fixed seed (the same samples always give the same interval), the
// ratio of the resampled medians taken each time, and the 2.5th and 97.5th
// percentiles of those ratios kept.
#pragma once
#include <stdint.h>

typedef struct bench_stats {
    int n;
    double median, q1, q3, min, max;
    double mean, stddev, cv, mad;
    int outliers;
} bench_stats;

// 0 on success; -1 when n < 1 (st is zeroed) or memory runs out.
int bench_stats_compute(const double *x, int n, bench_stats *st);
#define BENCH_BOOTSTRAP_RESAMPLES 2000
#define BENCH_BOOTSTRAP_SEED      0x7463626542ull

typedef struct bench_speedup {
    double median, ci95_lo, ci95_hi;
} bench_speedup;

// 0 on success; -1 when a side has no samples or memory runs out (sp NaN).
int bench_speedup_bootstrap(const double *base, int nb, const double *x, int nx, bench_speedup *sp);
// The same interval, paired: the samples were taken in n interleaved rounds
// (base[i] and x[i] in round i), so a resample draws rounds, and both
// sides keep the round's conditions (a load spike slows both). -1 when n < 1
// or memory runs out (sp NaN).
int bench_speedup_paired(const double *base, const double *x, int n, bench_speedup *sp);

// Robust relative dispersion of a sample: 1.4826 * MAD / median, which
// estimates stddev / mean for normal samples but does not move when one
// sample in twenty is wild (cv does). 0 for n < 2; infinity when the
// median is 0 and the samples differ.
#define BENCH_MAD_SCALE 1.4826
double bench_stats_noise(const bench_stats *st);

// Samples x[0 .. n - 1] pooled from np processes, counts[i] samples each
// in order (their sum must be n): *noise, the mean of each process's
// bench_stats_noise weighted by its samples (dispersion within a process);
// *spread, the standard deviation (n - 1) of the log of the processes'
// medians, NaN below two processes; medians[i] (may be NULL) each
// process's median. -1 when the counts do not add up to n or memory runs
// out.
int bench_stats_processes(const double *x, int n, const int *counts, int np, double *noise,
                          double *spread, double *medians);

// The geometric mean of speedups, accumulated one value at a time (every
// summary line and report table computes it this way):
//
//   bench_geomean g = {0};
//   bench_geomean_add(&g, 0.5);
//   bench_geomean_add(&g, 8);
//   bench_geomean_value(&g);   // 2; NaN before the first value
//
// The caller leaves out what must not count (unstable, failed, not > 0).
typedef struct bench_geomean {
    double logsum; // the sum of the logs
    int n;         // values added
} bench_geomean;
void bench_geomean_add(bench_geomean *g, double x);
double bench_geomean_value(const bench_geomean *g);

// Quantile p in [0, 1] of sorted[0..n-1], by the rule above.
double bench_quantile_sorted(const double *sorted, int n, double p);
