// Steps in a series of medians (history.h: history_steps): binary
// segmentation on the squared error, as asv finds its steps.
#include "history.h"

#include <math.h>
#include <stdlib.h>

typedef struct seg_sums {
    const double *s, *s2; // prefix sums of y and y^2: s[i] = y[0] + ... + y[i - 1]
} seg_sums;

// Squared error of y[a .. b) about its mean.
static double sse(const seg_sums *p, int a, int b) {
    double n = b - a, s = p->s[b] - p->s[a], s2 = p->s2[b] - p->s2[a];
    return fmax(0, s2 - s * s / n);
}

static double mean(const seg_sums *p, int a, int b) { return (p->s[b] - p->s[a]) / (b - a); }

// Steps of y[a .. b) into out (at most cap; *n of them so far).
static void split(const seg_sums *p, int a, int b, history_step *out, int cap, int *n) {
    if (b - a < 2 * HISTORY_STEP_MINSEG || *n >= cap)
        return;
    int best = -1;
    double best_sse = INFINITY;
    for (int k = a + HISTORY_STEP_MINSEG; k <= b - HISTORY_STEP_MINSEG; k++) {
        double e = sse(p, a, k) + sse(p, k, b);
        if (e < best_sse) {
            best_sse = e;
            best = k;
        }
    }
    double before = mean(p, a, best), after = mean(p, best, b);
    if (!(before > 0))
        return;
    double change = after / before - 1;
    // the segments' scatter about their means, pooled; the step is
    // significant when it is HISTORY_STEP_Z standard errors of the
    // difference of the two means
    double s = b - a > 2 ? sqrt(best_sse / (b - a - 2)) : 0;
    double se = s * sqrt(1.0 / (best - a) + 1.0 / (b - best));
    if (fabs(change) < HISTORY_STEP_MIN || fabs(after - before) <= HISTORY_STEP_Z * se)
        return;
    out[(*n)++] = (history_step){.at = best, .before = before, .after = after, .change = change};
    split(p, a, best, out, cap, n);
    split(p, best, b, out, cap, n);
}

static int step_cmp(const void *x, const void *y) {
    return ((const history_step *)x)->at - ((const history_step *)y)->at;
}

int history_steps(const double *y, int n, history_step *out, int cap) {
    if (n < 2 * HISTORY_STEP_MINSEG || cap <= 0)
        return 0;
    double *s = calloc(2 * ((size_t)n + 1), sizeof *s);
    if (!s)
        return -1;
    seg_sums p = {s, s + n + 1};
    for (int i = 0; i < n; i++) {
        s[i + 1] = s[i] + y[i];
        s[n + 1 + i + 1] = s[n + 1 + i] + y[i] * y[i];
    }
    int found = 0;
    split(&p, 0, n, out, cap, &found);
    qsort(out, (size_t)found, sizeof *out, step_cmp);
    // each step between the final segments beside it (the split that
    // found it may have seen a wider one)
    for (int k = 0; k < found; k++) {
        int a = k ? out[k - 1].at : 0, b = k + 1 < found ? out[k + 1].at : n;
        out[k].before = mean(&p, a, out[k].at);
        out[k].after = mean(&p, out[k].at, b);
        out[k].change = out[k].after / out[k].before - 1;
    }
    free(s);
    return found;
}
