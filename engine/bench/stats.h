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
#pragma once

typedef struct bench_stats {
    int n;
    double median, q1, q3, min, max;
    double mean, stddev, cv, mad;
    int outliers;
} bench_stats;

// 0 on success; -1 when n < 1 (st is zeroed) or memory runs out.
int bench_stats_compute(const double *x, int n, bench_stats *st);
// Quantile p in [0, 1] of sorted[0..n-1], by the rule above.
double bench_quantile_sorted(const double *sorted, int n, double p);
