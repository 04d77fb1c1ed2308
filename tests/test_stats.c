// Statistics and accuracy figures on samples with hand-computed answers.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

// after the four above, which it needs
#include <cmocka.h>

#include <math.h>

#include "bench/accuracy.h"
#include "bench/stats.h"

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
    bench_accuracy_out tiny = {1e-7, 1e-7, 1e-7};
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
    bench_accuracy_merge(&acc, &(bench_accuracy_out){0, 0, 0});
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_odd_count),      cmocka_unit_test(test_even_count_with_outlier),
        cmocka_unit_test(test_even_six),       cmocka_unit_test(test_single_sample),
        cmocka_unit_test(test_no_samples),     cmocka_unit_test(test_outliers_both_sides),
        cmocka_unit_test(test_quantile),       cmocka_unit_test(test_accuracy_figures),
        cmocka_unit_test(test_accuracy_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
