// Summary statistics (stats.h).
#include "stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_quantile_sorted(const double *sorted, int n, double p) {
    double pos = p * (double)(n - 1);
    int lo = (int)floor(pos);
    if (lo >= n - 1)
        return sorted[n - 1];
    double frac = pos - (double)lo;
    return sorted[lo] + frac * (sorted[lo + 1] - sorted[lo]);
}

int bench_stats_compute(const double *x, int n, bench_stats *st) {
    memset(st, 0, sizeof *st);
    if (n < 1)
        return -1;
    double *s = malloc((size_t)n * sizeof *s);
    if (!s)
        return -1;
    memcpy(s, x, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);

    st->n = n;
    st->min = s[0];
    st->max = s[n - 1];
    st->median = bench_quantile_sorted(s, n, 0.5);
    st->q1 = bench_quantile_sorted(s, n, 0.25);
    st->q3 = bench_quantile_sorted(s, n, 0.75);

    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += s[i];
    st->mean = sum / n;
    double ss = 0;
    for (int i = 0; i < n; i++)
        ss += (s[i] - st->mean) * (s[i] - st->mean);
    st->stddev = n > 1 ? sqrt(ss / (n - 1)) : 0;
    st->cv = st->mean != 0 ? st->stddev / st->mean : 0;

    double iqr = st->q3 - st->q1;
    double lo = st->q1 - 1.5 * iqr, hi = st->q3 + 1.5 * iqr;
    for (int i = 0; i < n; i++)
        st->outliers += s[i] < lo || s[i] > hi;

    // s is free to reuse for the absolute deviations.
    for (int i = 0; i < n; i++)
        s[i] = fabs(s[i] - st->median);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    st->mad = bench_quantile_sorted(s, n, 0.5);
    free(s);
    return 0;
}
