// Accuracy against the fp64 reference (accuracy.h).
#include "accuracy.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>

void bench_accuracy_compare(const tensor *x, const double *ref, bench_accuracy_out *o) {
    int64_t n = tensor_numel(x);
    bool fast = x->dtype == DT_F32 && tensor_is_contiguous(x);
    const float *xf = fast ? tensor_f32(x) : NULL;
    double d2 = 0, r2 = 0, x2 = 0, xr = 0, maxabs = 0;
    bool nan = false;
    for (int64_t i = 0; i < n; i++) {
        double v = fast ? (double)xf[i] : tensor_get_flat(x, i);
        double d = v - ref[i];
        nan |= isnan(d);
        d2 += d * d;
        r2 += ref[i] * ref[i];
        x2 += v * v;
        xr += v * ref[i];
        if (fabs(d) > maxabs)
            maxabs = fabs(d);
    }
    o->base_rmse = NAN;
    if (nan) {
        o->rel_l2 = o->max_abs = o->rmse = o->cosine = NAN;
        return;
    }
    o->cosine = x2 > 0 && r2 > 0 ? xr / sqrt(x2 * r2) : x2 == r2 ? 1 : 0;
    o->max_abs = maxabs;
    o->rmse = n > 0 ? sqrt(d2 / (double)n) : 0;
    if (r2 > 0)
        o->rel_l2 = sqrt(d2) / sqrt(r2);
    else
        o->rel_l2 = x2 > 0 ? INFINITY : 0;
}

// NaN is worse than any number.
static double worst(double a, double b) { return isnan(a) || isnan(b) ? NAN : fmax(a, b); }

// The lower of two cosines, NaN the lowest.
static double lowest(double a, double b) { return isnan(a) || isnan(b) ? NAN : fmin(a, b); }

void bench_accuracy_merge(bench_accuracy *acc, const bench_accuracy_out *o) {
    bool ok = o->rel_l2 <= acc->tol ||
              (acc->cosine_fallback && (o->cosine >= BENCH_COSINE_MIN ||
                                        o->rmse <= 2 * o->base_rmse + acc->tol / 10)) ||
              (acc->baseline_fallback && o->rmse <= 2 * o->base_rmse + acc->tol / 10);
    acc->failed_items += !ok;
    if (acc->noutputs == 0) {
        acc->rel_l2 = o->rel_l2;
        acc->max_abs = o->max_abs;
        acc->rmse = o->rmse;
        acc->cosine = o->cosine;
    } else {
        acc->rel_l2 = worst(acc->rel_l2, o->rel_l2);
        acc->max_abs = worst(acc->max_abs, o->max_abs);
        acc->rmse = worst(acc->rmse, o->rmse);
        acc->cosine = lowest(acc->cosine, o->cosine);
    }
    if (acc->noutputs < BENCH_MAX_OUTPUTS)
        acc->outputs[acc->noutputs++] = *o;
}

bool bench_accuracy_passes(const bench_accuracy *acc, double tol) {
    if (!acc->checked || acc->rel_l2 <= tol)
        return true;
    // merge judged each output by acc->tol, which callers set to tol
    return (acc->cosine_fallback || acc->baseline_fallback) && acc->failed_items == 0 &&
           acc->tol == tol;
}

static const double tolerance[BENCH_PREC_COUNT][BENCH_WL_COUNT] = {
    // generate: each step's last-position logits (generate.h: gen_check)
    [BENCH_PREC_FP32] = {[BENCH_WL_INFER] = BENCH_TOL_FP32, [BENCH_WL_TRAIN] = 1e-2,
                         [BENCH_WL_GENERATE] = BENCH_TOL_FP32, [BENCH_WL_CHAT] = BENCH_TOL_FP32},
    [BENCH_PREC_AMP] = {[BENCH_WL_INFER] = 1e-3, [BENCH_WL_TRAIN] = 1e-2,
                        [BENCH_WL_GENERATE] = 1e-3, [BENCH_WL_CHAT] = 1e-3},
};
static_assert(BENCH_PREC_COUNT == 2 && BENCH_WL_COUNT == 4, "a tolerance for every pair");

double bench_tolerance(enum bench_precision p, enum bench_workload w) { return tolerance[p][w]; }

void bench_accuracy_vs_eager(const tensor *x, const tensor *eager, double tol, bench_vs_eager *o) {
    int64_t n = tensor_numel(x);
    double d2 = 0, e2 = 0, x2 = 0, xe = 0, maxabs = 0;
    bool close = true, nan = false;
    for (int64_t i = 0; i < n; i++) {
        double v = tensor_get_flat(x, i), e = tensor_get_flat(eager, i), d = fabs(v - e);
        nan |= isnan(d);
        close &= d <= tol + tol * fabs(e);
        d2 += d * d;
        e2 += e * e;
        x2 += v * v;
        xe += v * e;
        maxabs = fmax(maxabs, d);
    }
    o->numel = n;
    o->allclose = close && !nan;
    if (nan) {
        o->max_abs = o->rel_l2 = o->cosine = NAN;
        return;
    }
    o->max_abs = maxabs;
    o->rel_l2 = e2 > 0 ? sqrt(d2 / e2) : x2 > 0 ? INFINITY : 0;
    // two zero vectors agree perfectly; one zero vector not at all
    o->cosine = e2 > 0 && x2 > 0 ? xe / sqrt(e2 * x2) : e2 == x2 ? 1 : 0;
}

enum bench_rule bench_rule_apply(const bench_vs_eager *o, double rmse, double eager_rmse,
                                 double tol, char *why, size_t cap) {
    if (o->allclose)
        return BENCH_RULE_ALLCLOSE;
    if (isnan(rmse) && isnan(eager_rmse)) {
        if (o->cosine >= 0.99)
            return BENCH_RULE_COSINE;
        snprintf(why, cap,
                 "not allclose to eager (max abs %.3g, tol %.0e) and cosine %.6g < 0.99 "
                 "(no fp64 reference)",
                 o->max_abs, tol, o->cosine);
        return BENCH_RULE_FAILED;
    }
    double k = o->numel < 10 ? 3 : 2;
    if (rmse <= k * eager_rmse + tol / 10)
        return BENCH_RULE_RMSE;
    snprintf(why, cap,
             "not allclose to eager (max abs %.3g, tol %.0e) and RMSE vs fp64 %.3g > %g x "
             "eager's %.3g + %.0e",
             o->max_abs, tol, rmse, k, eager_rmse, tol / 10);
    return BENCH_RULE_FAILED;
}

const char *bench_rule_name(enum bench_rule r) {
    static const char *const names[] = {"allclose", "rmse", "cosine", "failed"};
    return names[r];
}
