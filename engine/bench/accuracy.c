// Accuracy against the fp64 reference (accuracy.h).
#include "accuracy.h"

#include <math.h>

void bench_accuracy_compare(const tensor *x, const double *ref, bench_accuracy_out *o) {
    int64_t n = tensor_numel(x);
    bool fast = x->dtype == DT_F32 && tensor_is_contiguous(x);
    const float *xf = fast ? tensor_f32(x) : NULL;
    double d2 = 0, r2 = 0, x2 = 0, maxabs = 0;
    bool nan = false;
    for (int64_t i = 0; i < n; i++) {
        double v = fast ? (double)xf[i] : tensor_get_flat(x, i);
        double d = v - ref[i];
        nan |= isnan(d);
        d2 += d * d;
        r2 += ref[i] * ref[i];
        x2 += v * v;
        if (fabs(d) > maxabs)
            maxabs = fabs(d);
    }
    if (nan) {
        o->rel_l2 = o->max_abs = o->rmse = NAN;
        return;
    }
    o->max_abs = maxabs;
    o->rmse = n > 0 ? sqrt(d2 / (double)n) : 0;
    if (r2 > 0)
        o->rel_l2 = sqrt(d2) / sqrt(r2);
    else
        o->rel_l2 = x2 > 0 ? INFINITY : 0;
}

// NaN is worse than any number.
static double worst(double a, double b) { return isnan(a) || isnan(b) ? NAN : fmax(a, b); }

void bench_accuracy_merge(bench_accuracy *acc, const bench_accuracy_out *o) {
    if (acc->noutputs == 0) {
        acc->rel_l2 = o->rel_l2;
        acc->max_abs = o->max_abs;
        acc->rmse = o->rmse;
    } else {
        acc->rel_l2 = worst(acc->rel_l2, o->rel_l2);
        acc->max_abs = worst(acc->max_abs, o->max_abs);
        acc->rmse = worst(acc->rmse, o->rmse);
    }
    if (acc->noutputs < BENCH_MAX_OUTPUTS)
        acc->outputs[acc->noutputs++] = *o;
}

bool bench_accuracy_passes(const bench_accuracy *acc, double tol) {
    return !acc->checked || acc->rel_l2 <= tol;
}
