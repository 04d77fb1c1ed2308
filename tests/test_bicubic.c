// torch's bicubic resize weights (model_bicubic_weight, INIT_BICUBIC, the
// interpolate layer) against F.interpolate(eye, size=(out, in),
// mode='bicubic', align_corners=False) (torch 2, float32): a downsample
// 5 -> 3, an upsample 4 -> 7 (edge taps clamped and summed), rows of
// CrossViT's 240 -> 224; and a built interpolate layer's ops.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdlib.h>

#include "model/model.h"
#include "model/modeldef.h"
#include "test_util.h"

static void check_matrix(int64_t n_out, int64_t n_in, const double *want) {
    for (int64_t o = 0; o < n_out; o++)
        for (int64_t i = 0; i < n_in; i++) {
            double got = model_bicubic_weight(o, i, n_out, n_in);
            if (fabs(got - want[o * n_in + i]) > 2e-6)
                fail_msg("%lld -> %lld: weight (%lld, %lld) is %.9g, torch's %.9g", (long long)n_in,
                         (long long)n_out, (long long)o, (long long)i, got, want[o * n_in + i]);
        }
}

static void test_small(void **state) {
    (void)state;
    static const double down[] = {
        0.685185134, 0.370370388, -0.0555553436, 0,           0,           0, 0, 1, 0, 0,
        0,           0,           -0.0555558205, 0.370370567, 0.685184956,
    };
    static const double up[] = {
        1.09921694,
        -0.0992164612,
        0,
        0,
        0.659256756,
        0.402241349,
        -0.0614981651,
        0,
        0.0572158694,
        0.988975942,
        -0.0461919308,
        0,
        -0.09375,
        0.593749881,
        0.593750119,
        -0.09375,
        0,
        -0.0461919308,
        0.988975883,
        0.0572162271,
        0,
        -0.0614976883,
        0.402241051,
        0.659256518,
        0,
        0,
        -0.0992164612,
        1.09921646,
    };
    check_matrix(3, 5, down);
    check_matrix(7, 4, up);
}

static void test_crossvit_rows(void **state) {
    (void)state;
    static const struct {
        int64_t row, first;
        double w[4];
        int n;
    } rows[] = {
        {0, 0, {0.97228038, 0.028642058, -0.00092291832}, 3},
        {1, 0, {-0.064060211, 0.97570837, 0.096038997, -0.0076873302}, 4},
        {100, 106, {-0.090366125, 0.93537408, 0.17463607, -0.019644022}, 4},
        {223, 237, {-0.00092291832, 0.028647661, 0.97227508}, 3},
    };
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        double sum = 0;
        for (int64_t i = 0; i < 240; i++) {
            double got = model_bicubic_weight(rows[r].row, i, 224, 240), want = 0;
            int64_t k = i - rows[r].first;
            if (k >= 0 && k < rows[r].n)
                want = rows[r].w[k];
            assert_true(fabs(got - want) < 2e-6);
            sum += got;
        }
        assert_true(fabs(sum - 1) < 1e-9); // every row keeps a constant image constant
    }
}

static void test_layer(void **state) {
    (void)state;
    // one GEMM per axis that changes size: 6x8 -> 4x8 is one, 6x8 -> 4x5 two
    static const char *text = "name: r\n"
                              "inputs: {x: {shape: [2, 3, 6, 8]}}\n"
                              "body:\n"
                              "  - interpolate: {size: [4, 8]}\n"
                              "  - interpolate: {size: [4, 5]}\n"
                              "  - interpolate: {size: [4, 5]}\n";
    model *m = build_model_text(text, 2);
    assert_non_null(m);
    int gemms = 0, out = m->g->n - 1;
    for (int i = 0; i < m->g->n; i++)
        gemms += m->g->nodes[i].op == OP_MATMUL;
    assert_int_equal(gemms, 2);
    assert_int_equal(m->g->nodes[out].shape[2], 4);
    assert_int_equal(m->g->nodes[out].shape[3], 5);
    model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small),
        cmocka_unit_test(test_crossvit_rows),
        cmocka_unit_test(test_layer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
