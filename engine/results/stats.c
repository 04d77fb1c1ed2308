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

// splitmix64: small, fast, and the same sequence everywhere
static uint64_t next_random(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// Median of n draws with replacement from x, into scratch.
static double resampled_median(const double *x, int n, double *scratch, uint64_t *state) {
    for (int i = 0; i < n; i++)
        scratch[i] = x[(next_random(state) >> 32) * (uint64_t)n >> 32];
    qsort(scratch, (size_t)n, sizeof *scratch, cmp_double);
    return bench_quantile_sorted(scratch, n, 0.5);
}

static double median_of(const double *x, int n, double *scratch) {
    memcpy(scratch, x, (size_t)n * sizeof *scratch);
    qsort(scratch, (size_t)n, sizeof *scratch, cmp_double);
    return bench_quantile_sorted(scratch, n, 0.5);
}

int bench_speedup_bootstrap(const double *base, int nb, const double *x, int nx,
                            bench_speedup *sp) {
    sp->median = sp->ci95_lo = sp->ci95_hi = NAN;
    if (nb < 1 || nx < 1)
        return -1;
    double *scratch = malloc((size_t)(nb > nx ? nb : nx) * sizeof *scratch);
    double *ratios = malloc(BENCH_BOOTSTRAP_RESAMPLES * sizeof *ratios);
    if (!scratch || !ratios) {
        free(scratch);
        free(ratios);
        return -1;
    }
    sp->median = median_of(base, nb, scratch) / median_of(x, nx, scratch);
    uint64_t state = BENCH_BOOTSTRAP_SEED;
    for (int r = 0; r < BENCH_BOOTSTRAP_RESAMPLES; r++) {
        double mb = resampled_median(base, nb, scratch, &state);
        ratios[r] = mb / resampled_median(x, nx, scratch, &state);
    }
    qsort(ratios, BENCH_BOOTSTRAP_RESAMPLES, sizeof *ratios, cmp_double);
    sp->ci95_lo = bench_quantile_sorted(ratios, BENCH_BOOTSTRAP_RESAMPLES, 0.025);
    sp->ci95_hi = bench_quantile_sorted(ratios, BENCH_BOOTSTRAP_RESAMPLES, 0.975);
    free(scratch);
    free(ratios);
    return 0;
}

int bench_speedup_paired(const double *base, const double *x, int n, bench_speedup *sp) {
    sp->median = sp->ci95_lo = sp->ci95_hi = NAN;
    if (n < 1)
        return -1;
    double *sb = malloc((size_t)n * sizeof *sb), *sx = malloc((size_t)n * sizeof *sx);
    double *ratios = malloc(BENCH_BOOTSTRAP_RESAMPLES * sizeof *ratios);
    if (!sb || !sx || !ratios) {
        free(sb);
        free(sx);
        free(ratios);
        return -1;
    }
    sp->median = median_of(base, n, sb) / median_of(x, n, sx);
    uint64_t state = BENCH_BOOTSTRAP_SEED;
    for (int r = 0; r < BENCH_BOOTSTRAP_RESAMPLES; r++) {
        for (int i = 0; i < n; i++) {
            uint64_t k = (next_random(&state) >> 32) * (uint64_t)n >> 32;
            sb[i] = base[k];
            sx[i] = x[k];
        }
        qsort(sb, (size_t)n, sizeof *sb, cmp_double);
        qsort(sx, (size_t)n, sizeof *sx, cmp_double);
        ratios[r] = bench_quantile_sorted(sb, n, 0.5) / bench_quantile_sorted(sx, n, 0.5);
    }
    qsort(ratios, BENCH_BOOTSTRAP_RESAMPLES, sizeof *ratios, cmp_double);
    sp->ci95_lo = bench_quantile_sorted(ratios, BENCH_BOOTSTRAP_RESAMPLES, 0.025);
    sp->ci95_hi = bench_quantile_sorted(ratios, BENCH_BOOTSTRAP_RESAMPLES, 0.975);
    free(sb);
    free(sx);
    free(ratios);
    return 0;
}

double bench_stats_noise(const bench_stats *st) {
    if (st->n < 2)
        return 0;
    if (st->median == 0)
        return st->mad == 0 ? 0 : INFINITY;
    return BENCH_MAD_SCALE * st->mad / fabs(st->median);
}

int bench_stats_processes(const double *x, int n, const int *counts, int np, double *noise,
                          double *spread, double *medians) {
    *noise = *spread = NAN;
    int sum = 0;
    for (int i = 0; i < np; i++) {
        if (counts[i] < 1)
            return -1;
        sum += counts[i];
    }
    double *logs = np >= 1 && sum == n ? malloc((size_t)np * sizeof *logs) : NULL;
    if (!logs)
        return -1;
    double wsum = 0, lsum = 0;
    for (int i = 0, at = 0; i < np; at += counts[i++]) {
        bench_stats st;
        if (bench_stats_compute(x + at, counts[i], &st) < 0) {
            free(logs);
            return -1;
        }
        wsum += bench_stats_noise(&st) * counts[i];
        lsum += logs[i] = log(st.median);
        if (medians)
            medians[i] = st.median;
    }
    *noise = wsum / n;
    if (np >= 2) {
        double mean = lsum / np, sq = 0;
        for (int i = 0; i < np; i++)
            sq += (logs[i] - mean) * (logs[i] - mean);
        *spread = sqrt(sq / (np - 1));
    }
    free(logs);
    return 0;
}

void bench_geomean_add(bench_geomean *g, double x) {
    g->logsum += log(x);
    g->n++;
}

double bench_geomean_value(const bench_geomean *g) { return g->n ? exp(g->logsum / g->n) : NAN; }
