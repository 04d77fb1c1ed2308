// Tests for the autocast pass (engine/autodiff/autocast.h): PyTorch's CUDA autocast
// policy on a graph with every kind of op, casts exactly where the table
// says and nowhere else, each value cast once.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "autodiff/autocast.h"

// The rule of every op in ops.def, by kind: a new op must be placed.
static void test_rules(void **state) {
    (void)state;
    for (int o = 0; o < OP_COUNT; o++) {
        enum op op = (enum op)o;
        autocast_rule_kind r = autocast_rule(op), want = AC_KEEP;
        switch (op_kind(op)) {
        case OPK_GEMM:
        case OPK_CONV:
        case OPK_ATTENTION:
        case OPK_RNN: want = AC_LOW; break;
        case OPK_NORM:
        case OPK_LOSS: want = AC_F32; break;
        case OPK_BINARY:
        case OPK_WHERE: want = AC_PROMOTE; break;
        default: break;
        }
        if (op == OP_EXP || op == OP_LOG || op == OP_RSQRT || op == OP_RECIP || op == OP_SUM ||
            op == OP_MEAN || op == OP_SOFTPLUS || op == OP_FFT2_REAL || op == OP_GRID_SAMPLE)
            want = AC_F32;
        if (op == OP_CONCAT)
            want = AC_PROMOTE;
        if (r != want)
            fail_msg("%s: rule %s, expected %s", op_name(op), autocast_rule_name(r),
                     autocast_rule_name(want));
    }
}

static int count_op(const graph *g, enum op op) {
    int n = 0;
    for (int i = 0; i < g->n; i++)
        n += g->nodes[i].op == op;
    return n;
}

// The first node of op after node `after`.
static const graph_node *find(const graph *g, enum op op, int *after) {
    for (int i = *after + 1; i < g->n; i++)
        if (g->nodes[i].op == op) {
            *after = i;
            return &g->nodes[i];
        }
    fail_msg("no %s after %%%d", op_name(op), *after);
    return NULL;
}

static enum dtype src_dtype(const graph *g, const graph_node *n, int k) {
    return g->nodes[n->src[k]].dtype;
}

static void test_policy(void **state) {
    (void)state;
    graph *g = graph_new();
    int x = graph_input(g, "x", DT_F32, 2, (int64_t[]){4, 8});
    int idx = graph_input(g, "idx", DT_I32, 1, (int64_t[]){4});
    int w = graph_param(g, "w", 2, (int64_t[]){8, 8}, INIT_NORMAL, 0.1);
    int b = graph_param(g, "b", 1, (int64_t[]){8}, INIT_ZEROS, 0);
    int table = graph_param(g, "table", 2, (int64_t[]){10, 8}, INIT_NORMAL, 0.1);
    int lw = graph_param(g, "ln.w", 1, (int64_t[]){8}, INIT_ONES, 0);
    int lb = graph_param(g, "ln.b", 1, (int64_t[]){8}, INIT_ZEROS, 0);
    int e = graph_op(g, OP_EMBEDDING, 2, (int[]){table, idx}, NULL, NULL); // keep: f32
    int h = graph_op(g, OP_LINEAR, 3, (int[]){x, w, b}, NULL, NULL);     // low: 3 casts
    int r = graph_unary(g, OP_RELU, h);                                    // keep: f16
    int s = graph_binary(g, OP_ADD, r, e);                                 // promote: r -> f32
    int m = graph_binary(g, OP_MATMUL, r, graph_permute(g, w, (int[]){1, 0})); // w^T -> f16
    int sm = graph_unary(g, OP_SOFTMAX, m);                                // f32: m -> f32
    double fa[GRAPH_MAX_FA] = {1e-5};
    int ln = graph_op(g, OP_LAYER_NORM, 3, (int[]){s, lw, lb}, NULL, fa); // f32 already
    int ex = graph_unary(g, OP_EXP, r);                     // f32: r's f32 copy, shared
    int l2 = graph_op(g, OP_LINEAR, 2, (int[]){r, w}, NULL, NULL); // w's f16 copy, shared
    int ce = graph_op(g, OP_CROSS_ENTROPY, 2, (int[]){m, idx}, NULL, NULL); // m's f32 copy
    int rx = graph_unary(g, OP_RELU, x);                     // keep: f32, no cast
    int cat = graph_op(g, OP_CONCAT, 2, (int[]){l2, rx}, NULL, NULL); // promote: l2 -> f32
    assert_true(e >= 0 && h >= 0 && r >= 0 && s >= 0 && m >= 0 && sm >= 0 && ln >= 0 &&
                ex >= 0 && l2 >= 0 && ce >= 0 && rx >= 0 && cat >= 0);
    graph_output(g, sm);
    graph_output(g, ln);
    graph_output(g, ex);
    graph_output(g, cat);
    g->loss = ce;
    assert_int_equal(count_op(g, OP_CAST), 0);

    graph *a;
    char err[200];
    if (autocast_build(g, DT_F16, &a, err, sizeof err) < 0)
        fail_msg("%s", err);
    // x, w, b to f16 for the first linear; r to f32 (add, exp); w^T to f16;
    // m to f32 (softmax, cross entropy); l2 to f32 (concat): 7, each once
    assert_int_equal(count_op(a, OP_CAST), 7);
    int at = -1;
    const graph_node *n = find(a, OP_EMBEDDING, &at);
    assert_int_equal(n->dtype, DT_F32);
    n = find(a, OP_LINEAR, &at);
    for (int k = 0; k < 3; k++)
        assert_int_equal(src_dtype(a, n, k), DT_F16);
    assert_int_equal(n->dtype, DT_F16);
    int lin1 = at;
    n = find(a, OP_RELU, &at);
    assert_int_equal(n->dtype, DT_F16);
    n = find(a, OP_ADD, &at);
    assert_int_equal(src_dtype(a, n, 0), DT_F32);
    assert_int_equal(src_dtype(a, n, 1), DT_F32);
    n = find(a, OP_MATMUL, &at);
    assert_int_equal(src_dtype(a, n, 0), DT_F16);
    assert_int_equal(src_dtype(a, n, 1), DT_F16);
    n = find(a, OP_SOFTMAX, &at);
    assert_int_equal(src_dtype(a, n, 0), DT_F32);
    int sm_src = n->src[0];
    n = find(a, OP_LAYER_NORM, &at);
    for (int k = 0; k < 3; k++)
        assert_int_equal(src_dtype(a, n, k), DT_F32);
    n = find(a, OP_EXP, &at);
    assert_int_equal(src_dtype(a, n, 0), DT_F32);
    n = find(a, OP_LINEAR, &at);
    assert_int_equal(src_dtype(a, n, 0), DT_F16);
    assert_int_equal(n->src[1], a->nodes[lin1].src[1]); // the same f16 copy of w
    n = find(a, OP_CROSS_ENTROPY, &at);
    assert_int_equal(n->src[0], sm_src); // the same f32 copy of m
    assert_int_equal(src_dtype(a, n, 1), DT_I32);
    assert_int_equal(a->nodes[a->loss].op, OP_CROSS_ENTROPY);
    n = find(a, OP_CONCAT, &at);
    assert_int_equal(src_dtype(a, n, 0), DT_F32);
    assert_int_equal(src_dtype(a, n, 1), DT_F32);
    // sources keep their names, dtypes and initializers
    assert_int_equal(count_op(a, OP_PARAM), 5);
    for (int i = 0; i < a->n; i++)
        if (a->nodes[i].op == OP_PARAM)
            assert_int_equal(a->nodes[i].dtype, DT_F32);
    assert_int_equal(a->noutputs, 4);
    graph_free(a);
    graph_free(g);
}

// An all-f32 graph of keep and f32 ops gets no cast at all.
static void test_nothing_to_cast(void **state) {
    (void)state;
    graph *g = graph_new();
    int x = graph_input(g, "x", DT_F32, 2, (int64_t[]){3, 5});
    int y = graph_unary(g, OP_TANH, graph_unary(g, OP_SOFTMAX, graph_unary(g, OP_GELU, x)));
    graph_output(g, graph_binary(g, OP_MUL, y, x));
    graph *a;
    char err[200];
    assert_int_equal(autocast_build(g, DT_F16, &a, err, sizeof err), 0);
    assert_int_equal(count_op(a, OP_CAST), 0);
    assert_int_equal(a->n, g->n);
    graph_free(a);
    graph_free(g);
}

// Refusals: a graph with a backward, a dtype the pass does not support.
static void test_refusals(void **state) {
    (void)state;
    graph *g = graph_new();
    int p = graph_param(g, "p", 1, (int64_t[]){4}, INIT_ZEROS, 0);
    int d = graph_full(g, 1, DT_F32, 1, (int64_t[]){4});
    graph_op(g, OP_SGD, 2, (int[]){p, d}, NULL, (double[GRAPH_MAX_FA]){0.1});
    graph *a;
    char err[200];
    assert_int_equal(autocast_build(g, DT_F16, &a, err, sizeof err), -1);
    assert_non_null(strstr(err, "before autograd"));
    assert_int_equal(autocast_build(g, DT_I32, &a, err, sizeof err), -1);
    assert_non_null(strstr(err, "i32"));
    graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rules),
        cmocka_unit_test(test_policy),
        cmocka_unit_test(test_nothing_to_cast),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
