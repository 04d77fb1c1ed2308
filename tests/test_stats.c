// Statistics and accuracy figures on samples with hand-computed answers.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

// after the four above, which it needs
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "bench/accuracy.h"
#include "results/stats.h"

#define EPS 1e-12

// cmocka 1.1 compares floats only; doubles need their own check.
static void near_check(double a, double b, double eps, const char *expr, const char *file,
                       int line) {
    if (!(fabs(a - b) <= eps)) {
        print_error("%s is %.17g, expected %.17g\n", expr, a, b);
        _fail(file, line);
    }
}
#define assert_near(a, b, eps) near_check((a), (b), (eps), #a, __FILE__, __LINE__)

static void test_odd_count(void **state) {
    (void)state;
    // sorted 1 2 3 4 5: quartiles sit on samples (positions 1 and 3)
    double x[] = {5, 1, 3, 2, 4};
    bench_stats s;
    assert_int_equal(bench_stats_compute(x, 5, &s), 0);
    assert_int_equal(s.n, 5);
    assert_near(s.median, 3, EPS);
    assert_near(s.q1, 2, EPS);
    assert_near(s.q3, 4, EPS);
    assert_near(s.min, 1, EPS);
    assert_near(s.max, 5, EPS);
    assert_near(s.mean, 3, EPS);
    // sample variance (4 + 1 + 0 + 1 + 4) / 4 = 2.5
    assert_near(s.stddev, sqrt(2.5), EPS);
    assert_near(s.cv, sqrt(2.5) / 3, EPS);
    // |x - 3| = 2 1 0 1 2 -> median 1
    assert_near(s.mad, 1, EPS);
    assert_int_equal(s.outliers, 0);
    // the input is left as it was
    assert_near(x[0], 5, EPS);
}

static void test_even_count_with_outlier(void **state) {
    (void)state;
    // sorted 1 2 3 10: median between 2 and 3; q1 at position 0.75, q3 at 2.25
    double x[] = {10, 2, 1, 3};
    bench_stats s;
    assert_int_equal(bench_stats_compute(x, 4, &s), 0);
    assert_near(s.median, 2.5, EPS);
    assert_near(s.q1, 1.75, EPS);
    assert_near(s.q3, 4.75, EPS);
    assert_near(s.mean, 4, EPS);
    // (9 + 4 + 1 + 36) / 3
    assert_near(s.stddev, sqrt(50.0 / 3), EPS);
    // |x - 2.5| = 0.5 0.5 1.5 7.5 -> median 1
    assert_near(s.mad, 1, EPS);
    // IQR 3: fences -2.75 and 9.25; 10 is out
    assert_int_equal(s.outliers, 1);
}

static void test_even_six(void **state) {
    (void)state;
    double x[] = {6, 1, 5, 2, 4, 3};
    bench_stats s;
    assert_int_equal(bench_stats_compute(x, 6, &s), 0);
    assert_near(s.median, 3.5, EPS);
    assert_near(s.q1, 2.25, EPS);
    assert_near(s.q3, 4.75, EPS);
    // |x - 3.5| = 0.5 0.5 1.5 1.5 2.5 2.5 -> median 1.5
    assert_near(s.mad, 1.5, EPS);
    assert_near(s.stddev, sqrt(17.5 / 5), EPS);
}

static void test_single_sample(void **state) {
    (void)state;
    double x[] = {7};
    bench_stats s;
    assert_int_equal(bench_stats_compute(x, 1, &s), 0);
    assert_int_equal(s.n, 1);
    assert_near(s.median, 7, EPS);
    assert_near(s.q1, 7, EPS);
    assert_near(s.q3, 7, EPS);
    assert_near(s.min, 7, EPS);
    assert_near(s.max, 7, EPS);
    assert_near(s.mean, 7, EPS);
    assert_near(s.stddev, 0, EPS);
    assert_near(s.cv, 0, EPS);
    assert_near(s.mad, 0, EPS);
    assert_int_equal(s.outliers, 0);
}

static void test_no_samples(void **state) {
    (void)state;
    bench_stats s;
    s.n = 42;
    assert_int_equal(bench_stats_compute(NULL, 0, &s), -1);
    assert_int_equal(s.n, 0);
}

static void test_outliers_both_sides(void **state) {
    (void)state;
    // six equal samples make IQR 0: anything else is an outlier
    double x[] = {10, 1, 10, 10, 100, 10, 10, 10};
    bench_stats s;
    assert_int_equal(bench_stats_compute(x, 8, &s), 0);
    assert_near(s.median, 10, EPS);
    assert_near(s.q1, 10, EPS);
    assert_near(s.q3, 10, EPS);
    assert_int_equal(s.outliers, 2);
    // deviations 0 x6, 9, 90 -> median 0
    assert_near(s.mad, 0, EPS);
}

static void test_quantile(void **state) {
    (void)state;
    double s[] = {0, 10, 20, 30};
    assert_near(bench_quantile_sorted(s, 4, 0), 0, EPS);
    assert_near(bench_quantile_sorted(s, 4, 1), 30, EPS);
    assert_near(bench_quantile_sorted(s, 4, 0.5), 15, EPS);
    assert_near(bench_quantile_sorted(s, 4, 0.9), 27, EPS);
}

static tensor *vec(int n, const float *v) {
    tensor *t = tensor_new(DT_F32, 1, (int64_t[]){n});
    for (int i = 0; i < n; i++)
        tensor_f32(t)[i] = v[i];
    return t;
}

static void test_accuracy_figures(void **state) {
    (void)state;
    tensor *x = vec(3, (float[]){1, 2, 2});
    double ref[] = {1, 2, 3};
    bench_accuracy_out o;
    bench_accuracy_compare(x, ref, &o);
    // difference (0, 0, -1): ||d|| = 1, ||ref|| = sqrt(14)
    assert_near(o.rel_l2, 1 / sqrt(14), EPS);
    assert_near(o.max_abs, 1, EPS);
    assert_near(o.rmse, sqrt(1.0 / 3), EPS);

    bench_accuracy acc = {.checked = true};
    bench_accuracy_merge(&acc, &o);
    assert_false(bench_accuracy_passes(&acc, BENCH_TOL_FP32));
    bench_accuracy_out tiny = {1e-7, 1e-7, 1e-7, 1, NAN};
    bench_accuracy tight = {.checked = true};
    bench_accuracy_merge(&tight, &tiny);
    assert_true(bench_accuracy_passes(&tight, BENCH_TOL_FP32));
    // the merge keeps the worst output
    bench_accuracy_merge(&tight, &o);
    assert_int_equal(tight.noutputs, 2);
    assert_near(tight.rel_l2, 1 / sqrt(14), EPS);
    assert_false(bench_accuracy_passes(&tight, BENCH_TOL_FP32));
    tensor_free(x);
}

// Mixed precision: an output above tol passes by its cosine with fp64
// (>= 0.99), every output by one rule or the other.
static void test_accuracy_cosine_fallback(void **state) {
    (void)state;
    double ref[] = {1, 2, 3, 4};
    tensor *x = vec(4, (float[]){1.02f, 2.05f, 2.96f, 4.03f}); // rel_l2 ~1.2e-2, cosine ~0.9999
    bench_accuracy_out o;
    bench_accuracy_compare(x, ref, &o);
    assert_true(o.rel_l2 > 1e-3);
    assert_true(o.cosine > 0.999 && o.cosine < 1);
    bench_accuracy plain = {.checked = true, .tol = 1e-3};
    bench_accuracy_merge(&plain, &o);
    assert_false(bench_accuracy_passes(&plain, 1e-3));
    bench_accuracy amp = {.checked = true, .tol = 1e-3, .cosine_fallback = true};
    bench_accuracy_merge(&amp, &o);
    assert_true(bench_accuracy_passes(&amp, 1e-3));
    assert_near(amp.cosine, o.cosine, EPS);
    // a second output pointing elsewhere fails both rules, and the whole
    tensor *y = vec(4, (float[]){4, 3, 2, 1});
    bench_accuracy_out p;
    bench_accuracy_compare(y, ref, &p);
    assert_true(p.cosine < BENCH_COSINE_MIN);
    bench_accuracy_merge(&amp, &p);
    assert_int_equal(amp.failed_items, 1);
    assert_false(bench_accuracy_passes(&amp, 1e-3));
    // zeros against zeros: cosine 1
    double zeros[] = {0, 0, 0, 0};
    tensor *z = vec(4, (float[]){0, 0, 0, 0});
    bench_accuracy_compare(z, zeros, &p);
    assert_near(p.cosine, 1, EPS);
    tensor_free(x);
    tensor_free(y);
    tensor_free(z);
}

static void test_accuracy_edges(void **state) {
    (void)state;
    double zeros[] = {0, 0};
    tensor *z = vec(2, (float[]){0, 0});
    bench_accuracy_out o;
    bench_accuracy_compare(z, zeros, &o);
    assert_near(o.rel_l2, 0, EPS);
    tensor *one = vec(2, (float[]){0, 1});
    bench_accuracy_compare(one, zeros, &o);
    assert_true(isinf(o.rel_l2));
    tensor *nan = vec(2, (float[]){NAN, 1});
    double ref[] = {1, 1};
    bench_accuracy_compare(nan, ref, &o);
    assert_true(isnan(o.rel_l2));
    bench_accuracy acc = {.checked = true};
    bench_accuracy_merge(&acc, &(bench_accuracy_out){0, 0, 0, 1, NAN});
    bench_accuracy_merge(&acc, &o);
    assert_true(isnan(acc.rel_l2));
    assert_false(bench_accuracy_passes(&acc, BENCH_TOL_FP32));
    // an unchecked result is not failed by the check it did not have
    bench_accuracy none = {.checked = false};
    assert_true(bench_accuracy_passes(&none, BENCH_TOL_FP32));
    // a strided (non-contiguous) view compares in logical order
    tensor *m = tensor_new(DT_F32, 2, (int64_t[]){2, 2});
    float *p = tensor_f32(m);
    p[0] = 1, p[1] = 2, p[2] = 3, p[3] = 4;
    tensor *mt = tensor_permute(m, (int[]){1, 0});
    bench_accuracy_compare(mt, (double[]){1, 3, 2, 4}, &o);
    assert_near(o.max_abs, 0, EPS);
    tensor_free(mt);
    tensor_free(m);
    tensor_free(z);
    tensor_free(one);
    tensor_free(nan);
}

static void test_bootstrap_constant(void **state) {
    (void)state;
    // no spread: every resample gives the same ratio
    double base[] = {2, 2, 2, 2}, x[] = {0.5, 0.5, 0.5};
    bench_speedup sp;
    assert_int_equal(bench_speedup_bootstrap(base, 4, x, 3, &sp), 0);
    assert_near(sp.median, 4, EPS);
    assert_near(sp.ci95_lo, 4, EPS);
    assert_near(sp.ci95_hi, 4, EPS);
    // one sample each is its own median
    assert_int_equal(bench_speedup_bootstrap((double[]){3}, 1, (double[]){2}, 1, &sp), 0);
    assert_near(sp.median, 1.5, EPS);
    assert_near(sp.ci95_lo, 1.5, EPS);
    assert_int_equal(bench_speedup_bootstrap(base, 0, x, 3, &sp), -1);
    assert_true(isnan(sp.median) && isnan(sp.ci95_lo) && isnan(sp.ci95_hi));
}

static void test_bootstrap_spread(void **state) {
    (void)state;
    // base 10 exactly; x 1..9: medians of resamples lie in 1..9, so the
    // ratios lie in [10/9, 10]; the point estimate is 10 / 5
    double base[] = {10, 10, 10, 10, 10}, x[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    bench_speedup sp, again;
    assert_int_equal(bench_speedup_bootstrap(base, 5, x, 9, &sp), 0);
    assert_near(sp.median, 2, EPS);
    assert_true(sp.ci95_lo >= 10.0 / 9 && sp.ci95_lo < 2);
    assert_true(sp.ci95_hi > 2 && sp.ci95_hi <= 10);
    // a fixed seed: the same samples give the same interval
    assert_int_equal(bench_speedup_bootstrap(base, 5, x, 9, &again), 0);
    assert_true(sp.ci95_lo == again.ci95_lo && sp.ci95_hi == again.ci95_hi);
    // more samples of the same spread narrow the interval
    double many[90];
    for (int i = 0; i < 90; i++)
        many[i] = 1 + i % 9;
    assert_int_equal(bench_speedup_bootstrap(base, 5, many, 90, &again), 0);
    assert_near(again.median, 2, EPS);
    assert_true(again.ci95_hi - again.ci95_lo < sp.ci95_hi - sp.ci95_lo);
}

// A load spike that slows both sides of the same rounds leaves the paired
// interval tight, where the unpaired one widens; one wild sample does not
// move the robust noise figure, where cv jumps.
static void test_paired_and_noise(void **state) {
    (void)state;
    double base[20], x[20];
    for (int i = 0; i < 20; i++) {
        double load = i % 5 < 2 ? 1.5 : 1.0;
        base[i] = 2.0 * load * (1 + 0.001 * (i % 3));
        x[i] = 1.0 * load * (1 + 0.001 * (i % 4));
    }
    bench_speedup paired, unpaired;
    assert_int_equal(bench_speedup_paired(base, x, 20, &paired), 0);
    assert_int_equal(bench_speedup_bootstrap(base, 20, x, 20, &unpaired), 0);
    assert_true(fabs(paired.median - 2.0) < 0.01);
    assert_true(paired.ci95_lo > 1.98 && paired.ci95_hi < 2.02);
    assert_true(unpaired.ci95_hi - unpaired.ci95_lo > 5 * (paired.ci95_hi - paired.ci95_lo));
    assert_int_equal(bench_speedup_paired(base, x, 0, &paired), -1);
    assert_true(isnan(paired.median));

    double s[20];
    for (int i = 0; i < 20; i++)
        s[i] = 1.0 + 0.01 * (i % 5);
    bench_stats st;
    assert_int_equal(bench_stats_compute(s, 20, &st), 0);
    double quiet = bench_stats_noise(&st);
    s[7] *= 50;
    assert_int_equal(bench_stats_compute(s, 20, &st), 0);
    assert_true(st.cv > 1.0);
    assert_true(fabs(bench_stats_noise(&st) - quiet) < 0.01);
    assert_true(quiet > 0.005 && quiet < 0.05);
}

static void test_tolerance_table(void **state) {
    (void)state;
    assert_near(bench_tolerance(BENCH_PREC_FP32, BENCH_WL_INFER), 1e-4, 0);
    assert_near(bench_tolerance(BENCH_PREC_FP32, BENCH_WL_TRAIN), 1e-2, 0);
    assert_near(bench_tolerance(BENCH_PREC_AMP, BENCH_WL_INFER), 1e-3, 0);
    assert_near(bench_tolerance(BENCH_PREC_AMP, BENCH_WL_TRAIN), 1e-2, 0);
}

static void test_vs_eager_rule(void **state) {
    (void)state;
    char why[200] = "";
    double tol = 1e-4;
    // |x - e| <= tol + tol |e|: 1e-4 + 1e-4 * 100 = 0.0101 at e = 100
    tensor *e = vec(2, (float[]){100, 0});
    tensor *x = vec(2, (float[]){100.01f, 0});
    bench_vs_eager o;
    bench_accuracy_vs_eager(x, e, tol, &o);
    assert_true(o.allclose);
    assert_int_equal(o.numel, 2);
    assert_near(o.max_abs, 0.01, 1e-5);
    assert_near(o.rel_l2, 0.01 / 100, 1e-7);
    assert_near(o.cosine, 1, 1e-12);
    assert_int_equal(bench_rule_apply(&o, NAN, NAN, tol, why, sizeof why), BENCH_RULE_ALLCLOSE);
    tensor *far = vec(2, (float[]){100.03f, 0});
    bench_accuracy_vs_eager(far, e, tol, &o);
    assert_false(o.allclose);
    // 2 elements: k = 3. RMSE 1e-3 passes against eager's 4e-4 (3 x 4e-4 + 1e-5) ...
    assert_int_equal(bench_rule_apply(&o, 1e-3, 4e-4, tol, why, sizeof why), BENCH_RULE_RMSE);
    // ... and fails against eager's 3e-4 (9.1e-4)
    assert_int_equal(bench_rule_apply(&o, 1e-3, 3e-4, tol, why, sizeof why), BENCH_RULE_FAILED);
    assert_non_null(strstr(why, "RMSE"));
    assert_string_equal(bench_rule_name(BENCH_RULE_FAILED), "failed");
    // 10 elements or more: k = 2, so 3e-4 x 3 would pass but 3e-4 x 2 + 1e-5 does not
    o.numel = 10;
    assert_int_equal(bench_rule_apply(&o, 7e-4, 3e-4, tol, why, sizeof why), BENCH_RULE_FAILED);
    assert_int_equal(bench_rule_apply(&o, 6e-4, 3e-4, tol, why, sizeof why), BENCH_RULE_RMSE);
    // no fp64 reference: cosine similarity against eager, at least 0.99
    assert_int_equal(bench_rule_apply(&o, NAN, NAN, tol, why, sizeof why), BENCH_RULE_COSINE);
    tensor *flip = vec(2, (float[]){0, 100});
    bench_accuracy_vs_eager(flip, e, tol, &o);
    assert_near(o.cosine, 0, 1e-12);
    assert_int_equal(bench_rule_apply(&o, NAN, NAN, tol, why, sizeof why), BENCH_RULE_FAILED);
    assert_non_null(strstr(why, "cosine"));
    // NaN never passes
    tensor *nan = vec(2, (float[]){NAN, 0});
    bench_accuracy_vs_eager(nan, e, tol, &o);
    assert_false(o.allclose);
    assert_int_equal(bench_rule_apply(&o, NAN, 1e-3, tol, why, sizeof why), BENCH_RULE_FAILED);
    tensor_free(e);
    tensor_free(x);
    tensor_free(far);
    tensor_free(flip);
    tensor_free(nan);
}

// Pooled processes: the noise within each, weighted by samples; the spread
// of the log of their medians; counts that do not add up are refused.
static void test_processes(void **state) {
    (void)state;
    // process 1: 1, 1, 1, 1 (no noise); process 2: 2, 2, 3, 3, 2, 2 (median 2)
    double x[] = {1, 1, 1, 1, 2, 2, 3, 3, 2, 2};
    int counts[] = {4, 6};
    double noise, spread, med[2];
    assert_int_equal(bench_stats_processes(x, 10, counts, 2, &noise, &spread, med), 0);
    bench_stats st;
    bench_stats_compute(x + 4, 6, &st);
    assert_true(fabs(noise - bench_stats_noise(&st) * 6 / 10) < 1e-15);
    assert_true(med[0] == 1 && med[1] == 2);
    assert_true(fabs(spread - log(2) / sqrt(2)) < 1e-15); // sd of {0, log 2}
    int one = 10;
    assert_int_equal(bench_stats_processes(x, 10, &one, 1, &noise, &spread, NULL), 0);
    assert_true(isnan(spread));
    bench_stats_compute(x, 10, &st);
    assert_true(fabs(noise - bench_stats_noise(&st)) < 1e-15);
    int bad[] = {4, 5};
    assert_int_equal(bench_stats_processes(x, 10, bad, 2, &noise, &spread, NULL), -1);
    int zero[] = {10, 0};
    assert_int_equal(bench_stats_processes(x, 10, zero, 2, &noise, &spread, NULL), -1);
}

// The geometric mean: exp(mean(log x)), NaN before the first value.
static void test_geomean(void **state) {
    (void)state;
    bench_geomean g = {0};
    assert_true(isnan(bench_geomean_value(&g)));
    double x[] = {1, 4, 0.5, 8};
    for (int i = 0; i < 4; i++)
        bench_geomean_add(&g, x[i]);
    assert_int_equal(g.n, 4);
    assert_near(bench_geomean_value(&g), 2, EPS);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_odd_count),
        cmocka_unit_test(test_even_count_with_outlier),
        cmocka_unit_test(test_even_six),
        cmocka_unit_test(test_single_sample),
        cmocka_unit_test(test_no_samples),
        cmocka_unit_test(test_outliers_both_sides),
        cmocka_unit_test(test_quantile),
        cmocka_unit_test(test_accuracy_figures),
        cmocka_unit_test(test_accuracy_edges),
        cmocka_unit_test(test_accuracy_cosine_fallback),
        cmocka_unit_test(test_bootstrap_constant),
        cmocka_unit_test(test_bootstrap_spread),
        cmocka_unit_test(test_paired_and_noise),
        cmocka_unit_test(test_tolerance_table),
        cmocka_unit_test(test_vs_eager_rule),
        cmocka_unit_test(test_processes),
        cmocka_unit_test(test_geomean),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
