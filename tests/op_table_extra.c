// The tests of tests/test_op_table.c that are not rows of the op table:
// eager and reference errors (bad data, unsupported dtypes, a model with no
// values), dropout's rate and masks, noise's draws, training ops over
// several steps against a reference session, and on a GPU the CUDA eager executor's
// device-side errors, TF32 GEMMs and every smoke model (eager_cuda against
// the CPU, the compiled mode and its ablations against eager_cuda, a
// training step in f32 and under AMP).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff/autograd.h"
#include "bench/train_check.h"
#include "eager/eager.h"
#include "tcbench_config.h"
#if TCBENCH_HAVE_CUDA
#include "compile/cuda_program.h"
#include "eager/eager_cuda.h"
#endif
#include "model/model_prepare.h"
#include "model/modeldef.h"
#include "model/suite.h"
#include "op_table.h"
#include "ref/ref.h"
#include "test_util.h"

#define S1(a)          .nd = 1, .shape = {a}
#define S2(a, b)       .nd = 2, .shape = {a, b}
#define S4(a, b, c, d) .nd = 4, .shape = {a, b, c, d}
#define T1(a)          .nd2 = 1, .shape2 = {a}
#define T2(a, b)       .nd2 = 2, .shape2 = {a, b}
#define IA(...)        .ia = {__VA_ARGS__}
#define S(...)         ((int64_t[]){__VA_ARGS__})

// The kept fraction of dropout is 1 - p, and kept values are scaled.
static void test_dropout_rate(void **state) {
    (void)state;
    const op_case tc = {"dropout_rate", b_unary, OP_DROPOUT, S2(256, 400), .fa = {0.25}, IA(11)};
    model *m = op_case_model(&tc);
    eager *e = eager_new(m);
    tensor *y;
    assert_int_equal(eager_run(e, &y, NULL), 0);
    const tensor *x = m->values[0];
    int64_t kept = 0, n = tensor_numel(y);
    for (int64_t i = 0; i < n; i++) {
        double v = tensor_get_flat(y, i);
        if (v != 0) {
            kept++;
            assert_true(fabs(v - tensor_get_flat(x, i) / 0.75) <= 1e-6 * fabs(v));
        }
    }
    double frac = (double)kept / (double)n; // binomial sd ~0.0014
    if (fabs(frac - 0.75) > 0.01)
        fail_msg("dropout kept %.4f of elements, expected 0.75", frac);
    tensor_free(y);
    eager_free(e);
    model_free(m);
}

// Bad data and unsupported dtypes are errors with a message, not crashes,
// and the step leaves nothing allocated.
static void expect_error(const op_case *tc, const char *eager_says, bool ref_fails) {
    model *m = op_case_model(tc);
    size_t live = tensor_mem_live();
    eager *e = eager_new(m);
    tensor *y[8];
    assert_int_equal(eager_run(e, y, NULL), -1);
    if (!strstr(eager_error(e), eager_says))
        fail_msg("%s: eager error \"%s\" does not say \"%s\"", tc->name, eager_error(e),
                 eager_says);
    assert_null(y[0]);
    assert_int_equal(tensor_mem_live(), live);
    char err[256] = "";
    double **ref = ref_run_all(m, err, sizeof err);
    if (ref_fails) {
        assert_null(ref);
        assert_non_null(strstr(err, eager_says));
    } else {
        assert_non_null(ref);
        for (int i = 0; i < m->g->n; i++)
            free(ref[i]);
        free(ref);
    }
    eager_free(e);
    model_free(m);
}

static void test_errors(void **state) {
    (void)state;
    const op_case emb = {"embedding_bad", b_embedding_bad, OP_EMBEDDING, S2(5, 4), T1(200)};
    expect_error(&emb, "outside [0, 5)", true);
    const op_case ce = {"ce_bad",  b_cross_entropy, OP_CROSS_ENTROPY,
                        S2(50, 4), .dt = DT_I32,    IA(-100, 1)};
    expect_error(&ce, "outside [0, 4)", true);
    const op_case mm = {"matmul_i32", b_matmul, OP_MATMUL, S2(4, 5), T2(5, 3), .dt = DT_I32};
    expect_error(&mm, "i32", false);
    // f16 runs everywhere (the 16-bit rows of the op table); integers in a float kernel do not
    const op_case cv = {"pool_i32",     b_pool_perm,          OP_MAX_POOL2D,
                        S4(1, 2, 4, 4), IA(1, 1, 0, 0, 2, 2), .dt = DT_I32};
    expect_error(&cv, "max_pool2d: dtype i32 is not supported", false);
    const op_case dv = {"div_i32", b_binary_int, OP_DIV, S2(3, 4), T2(3, 4), .dt = DT_I32};
    expect_error(&dv, "i32", false);
    // ids drawn from [0, 5 + 4): some fall outside the (5, 3) table
    const op_case eg = {
        "embedding_grad_bad", b_embedding_grad, OP_EMBEDDING_GRAD, S2(5, 3), T1(100), IA(0, 4)};
    expect_error(&eg, "outside [0, 5)", true);
    const op_case ag = {"act_grad_cast", b_act_grad, OP_ACT_GRAD, S2(3, 4), IA(OP_CAST)};
    expect_error(&ag, "no derivative for cast", true);
    const op_case sg = {"sgd_no_buffer", b_binary, OP_SGD, S2(3, 4), T2(3, 4), .fa = {0.1, 0.9}};
    expect_error(&sg, "momentum buffer", true);
    const op_case bn = {"bn_train_one", b_channel_norm, OP_BATCH_NORM,
                        S2(1, 4),       IA(1),          .fa = {1e-5, 0.1}};
    expect_error(&bn, "more than one value per channel", true);
    const op_case gg = {"group_norm_grad_groups", b_norm_grad, OP_GROUP_NORM_GRAD, S4(2, 6, 2, 2),
                        IA(4)};
    expect_error(&gg, "groups do not divide", true);
}

// A model whose values were never set up is refused, not dereferenced.
static void test_no_values(void **state) {
    (void)state;
    graph *g = graph_new();
    int x = graph_input(g, "x", DT_F32, 1, (int64_t[]){4});
    graph_output(g, graph_unary(g, OP_EXP, x));
    model *m = model_new(g, "novalues", "test", 1);
    eager *e = eager_new(m);
    tensor *y;
    assert_int_equal(eager_run(e, &y, NULL), -1);
    assert_non_null(strstr(eager_error(e), "model_init_values"));
    char err[256];
    double *r;
    assert_int_equal(ref_run(m, &r, err, sizeof err), -1);
    assert_non_null(strstr(err, "model_init_values"));
    eager_free(e);
    model_free(m);
}

// ref_run returns copies of the outputs only (a node output twice gets two).
static void test_ref_run_outputs(void **state) {
    (void)state;
    const op_case tc = {"ref_run", b_unary, OP_TANH, S2(3, 4)};
    model *m = op_case_model(&tc);
    graph_output(m->g, m->g->outputs[0]);
    double *r[8];
    char err[256];
    assert_int_equal(ref_run(m, r, err, sizeof err), 0);
    for (int i = 0; i < 12; i++) {
        assert_true(r[0][i] == tanh(tensor_get_flat(m->values[0], i)));
        assert_true(r[1][i] == r[0][i]);
    }
    assert_ptr_not_equal(r[0], r[1]);
    free(r[0]);
    free(r[1]);
    model_free(m);
}

// ---- training over several steps -------------------------------------------------

// Every element of t against n doubles: |t - r| <= atol + rtol |r|.
static void expect_close(const char *what, int step, const tensor *t, const double *r, double rtol,
                         double atol) {
    for (int64_t i = 0; i < tensor_numel(t); i++) {
        double e = tensor_get_flat(t, i);
        if (!(fabs(e - r[i]) <= atol + rtol * fabs(r[i])))
            fail_msg("%s, step %d, element %lld: eager %.9g, reference %.9g", what, step,
                     (long long)i, e, r[i]);
    }
}

// Runs m for `steps` steps in eager and in a reference session, redrawing
// the inputs each step; after each, every output and every PARAM and BUFFER
// (the updated state) must agree.
static void train_steps(model *m, int steps, double rtol, double atol) {
    const graph *g = m->g;
    char err[256];
    ref_session *rs = ref_session_new(m, err, sizeof err);
    if (!rs)
        fail_msg("ref_session_new: %s", err);
    eager *e = eager_new(m);
    assert_non_null(e);
    for (int step = 1; step <= steps; step++) {
        assert_int_equal(model_init_inputs(m, 99, (uint64_t)step), 0);
        tensor *outs[8];
        double *ref[8];
        eager_set_step(e, (uint64_t)step);
        if (eager_run(e, outs, NULL) < 0)
            fail_msg("step %d: eager_run: %s", step, eager_error(e));
        if (ref_session_run(rs, (uint64_t)step, ref, err, sizeof err) < 0)
            fail_msg("step %d: ref_session_run: %s", step, err);
        for (int k = 0; k < g->noutputs; k++) {
            expect_close(op_name(g->nodes[g->outputs[k]].op), step, outs[k], ref[k], rtol, atol);
            tensor_free(outs[k]);
            free(ref[k]);
        }
        for (int i = 0; i < g->n; i++)
            if (g->nodes[i].op == OP_PARAM || g->nodes[i].op == OP_BUFFER)
                expect_close(g->nodes[i].name, step, m->values[i], ref_session_source(rs, i), rtol,
                             atol);
    }
    assert_null(ref_session_source(rs, g->outputs[0])); // not a source
    eager_free(e);
    ref_session_free(rs);
}

// SGD (plain; momentum with nesterov), AdamW and a running statistic over
// three steps, with gradients that depend on the parameters (p * x), so
// each step's state feeds the next.
static void test_updates_steps(void **state) {
    (void)state;
    graph *g = graph_new();
    int64_t s2[] = {5, 7}, s1[] = {13};
    int p1 = graph_param(g, "p1", 2, s2, INIT_NORMAL, 1.0);
    int g1 = graph_binary(g, OP_MUL, p1, graph_input(g, "x1", DT_F32, 2, s2));
    int buf = graph_buffer(g, "buf", DT_F32, 2, s2, INIT_ZEROS, 0);
    int64_t nesterov[GRAPH_MAX_IA] = {1};
    graph_output(g, graph_op(g, OP_SGD, 3, (int[]){p1, g1, buf}, nesterov,
                             (double[GRAPH_MAX_FA]){0.1, 0.9, 0.01, 0.1}));
    int p2 = graph_param(g, "p2", 1, s1, INIT_NORMAL, 1.0);
    int g2 = graph_binary(g, OP_MUL, p2, graph_input(g, "x2", DT_F32, 1, s1));
    int m2 = graph_buffer(g, "m2", DT_F32, 1, s1, INIT_ZEROS, 0);
    int v2 = graph_buffer(g, "v2", DT_F32, 1, s1, INIT_ZEROS, 0);
    graph_output(g, graph_op(g, OP_ADAMW, 4, (int[]){p2, g2, m2, v2}, NULL,
                             (double[GRAPH_MAX_FA]){1e-2, 0.9, 0.999, 1e-8, 0.01}));
    int p3 = graph_param(g, "p3", 1, s1, INIT_NORMAL, 1.0);
    int g3 = graph_input(g, "g3", DT_F32, 1, s1);
    graph_output(
        g, graph_op(g, OP_SGD, 2, (int[]){p3, g3}, NULL, (double[GRAPH_MAX_FA]){0.05, 0, 0.1, 0}));
    int rs = graph_buffer(g, "rs", DT_F32, 1, s1, INIT_ONES, 0);
    int y = graph_op(g, OP_RUNNING_STAT, 2, (int[]){rs, graph_input(g, "st", DT_F32, 1, s1)}, NULL,
                     (double[GRAPH_MAX_FA]){0.1, 2.0});
    if (y < 0)
        fail_msg("%s", graph_error(g));
    graph_output(g, y);
    model *m = model_new(g, "updates", "test", 1);
    assert_int_equal(model_init_values(m, 5), 0);
    tensor *p0 = tensor_contiguous(m->values[p1]);
    train_steps(m, 3, 1e-5, 1e-6);
    // the model's own tensors moved (eager wrote them in place)
    assert_true(tensor_get_flat(m->values[p1], 0) != tensor_get_flat(p0, 0));
    tensor_free(p0);
    model_free(m);
}

// Training batch_norm normalizes with the batch's statistics and moves the
// running mean and (unbiased) variance, in the model's buffers, each step.
static void test_batch_norm_training_steps(void **state) {
    (void)state;
    graph *g = graph_new();
    int64_t C = 3;
    int x = graph_input(g, "x", DT_F32, 4, (int64_t[]){4, C, 5, 5});
    int w = graph_param(g, "w", 1, &C, INIT_NORMAL, 1.0);
    int b = graph_param(g, "b", 1, &C, INIT_NORMAL, 1.0);
    int rm = graph_buffer(g, "running_mean", DT_F32, 1, &C, INIT_ZEROS, 0);
    int rv = graph_buffer(g, "running_var", DT_F32, 1, &C, INIT_ONES, 0);
    int64_t train[GRAPH_MAX_IA] = {1};
    graph_output(g, graph_op(g, OP_BATCH_NORM, 5, (int[]){x, w, b, rm, rv}, train,
                             (double[GRAPH_MAX_FA]){1e-5, 0.1}));
    model *m = model_new(g, "bn_train", "test", 1);
    assert_int_equal(model_init_values(m, 5), 0);
    train_steps(m, 3, 1e-4, 1e-5);
    // after three steps of momentum 0.1 the mean is about 0.271 of the batch's
    assert_true(tensor_get_flat(m->values[rm], 0) != 0);
    assert_true(tensor_get_flat(m->values[rv], 0) != 1);
    model_free(m);
}

// A dropout mask and a noise draw are functions of (stream, step, element):
// the same pair gives the same values in eager and in the reference, another
// step or another stream different ones.
static int64_t values_diff(const tensor *a, const tensor *b) {
    int64_t d = 0;
    for (int64_t i = 0; i < tensor_numel(a); i++)
        d += tensor_get_flat(a, i) != tensor_get_flat(b, i);
    return d;
}

static void check_steps(enum op op, double fa0) {
    graph *g = graph_new();
    int64_t shape[] = {64, 100};
    int x = graph_input(g, "x", DT_F32, 2, shape);
    int64_t s5[GRAPH_MAX_IA] = {5}, s6[GRAPH_MAX_IA] = {6};
    double p[GRAPH_MAX_FA] = {fa0};
    graph_output(g, graph_op(g, op, 1, &x, s5, p));
    graph_output(g, graph_op(g, op, 1, &x, s6, p));
    model *m = model_new(g, op_name(op), "test", 1);
    assert_int_equal(model_init_values(m, 5), 0);
    eager *e = eager_new(m);
    char err[256];
    ref_session *rs = ref_session_new(m, err, sizeof err);
    assert_non_null(rs);
    tensor *a[2], *b[2], *c[2];
    double *r[2];
    assert_int_equal(eager_run(e, a, NULL), 0); // step 1 by default
    eager_set_step(e, 1);
    assert_int_equal(eager_run(e, b, NULL), 0);
    eager_set_step(e, 2);
    assert_int_equal(eager_run(e, c, NULL), 0);
    assert_int_equal(ref_session_run(rs, 2, r, err, sizeof err), 0);
    int64_t n = tensor_numel(a[0]);
    assert_int_equal(values_diff(a[0], b[0]), 0);
    assert_int_equal(values_diff(a[1], b[1]), 0);
    // independent masks of p = 0.5 differ in about half the places, draws in all
    assert_true(values_diff(a[0], c[0]) > n / 3);
    assert_true(values_diff(a[0], a[1]) > n / 3);
    assert_true(values_diff(c[0], c[1]) > n / 3);
    for (int k = 0; k < 2; k++) {
        for (int64_t i = 0; i < n; i++) // f32 rounding of x + std z at most
            assert_true(fabs(tensor_get_flat(c[k], i) - r[k][i]) <= 1e-6 * (1 + fabs(r[k][i])));
        tensor_free(a[k]);
        tensor_free(b[k]);
        tensor_free(c[k]);
        free(r[k]);
    }
    ref_session_free(rs);
    eager_free(e);
    model_free(m);
}

static void test_dropout_steps(void **state) {
    (void)state;
    check_steps(OP_DROPOUT, 0.5);
}

static void test_noise_steps(void **state) {
    (void)state;
    check_steps(OP_NOISE, 1.0);
}

// Rows named by several positions get the sum of those positions' rows;
// rows named by none are zero.
static void test_embedding_grad_repeats(void **state) {
    (void)state;
    graph *g = graph_new();
    int64_t V = 4, D = 3, N = 6;
    int idx = graph_input(g, "idx", DT_I64, 1, &N);
    int dy = graph_input(g, "dy", DT_F32, 2, (int64_t[]){N, D});
    graph_output(g, graph_op_shaped(g, OP_EMBEDDING_GRAD, 2, (int[]){dy, idx}, NULL, NULL, 2,
                                    (int64_t[]){V, D}));
    model *m = model_new(g, "embedding_grad_repeats", "test", 1);
    assert_int_equal(model_init_values(m, 5), 0);
    const int64_t ids[] = {2, 0, 2, 2, 3, 0};
    for (int64_t i = 0; i < N; i++) {
        tensor_set(m->values[idx], (int64_t[]){i}, (double)ids[i]);
        for (int64_t d = 0; d < D; d++)
            tensor_set(m->values[dy], (int64_t[]){i, d}, (double)(i * 10 + d));
    }
    eager *e = eager_new(m);
    tensor *y;
    assert_int_equal(eager_run(e, &y, NULL), 0);
    for (int64_t v = 0; v < V; v++)
        for (int64_t d = 0; d < D; d++) {
            double want = 0;
            for (int64_t i = 0; i < N; i++)
                want += ids[i] == v ? (double)(i * 10 + d) : 0;
            assert_true(tensor_get(y, (int64_t[]){v, d}) == want);
        }
    tensor_free(y);
    eager_free(e);
    model_free(m);
}

#if TCBENCH_HAVE_CUDA
// ---- the CUDA eager executor ----

// A bad index or target is found on the device and reported by the sync
// (eager_cuda_outputs), with the position, and the executor stays usable.
static void test_bad_indices(void **state) {
    (void)state;
    if (!op_have_gpu())
        skip();
    int64_t ignore[GRAPH_MAX_IA] = {-100};
    static const char *said[] = {"embedding: index", "cross_entropy: target",
                                 "embedding_grad: index", "cross_entropy_grad: target"};
    for (int which = 0; which < 4; which++) {
        graph *g = graph_new();
        int idx = graph_input(g, "idx", DT_I32, 1, S(50));
        g->nodes[idx].ia[0] = 0; // integers drawn from [0, 13): some beyond 10
        g->nodes[idx].ia[1] = 13;
        g->nodes[idx].ia[2] = 1;
        if (which == 0) {
            int t = graph_buffer(g, "table", DT_F32, 2, S(10, 4), INIT_NORMAL, 1.0);
            graph_output(g, graph_op(g, OP_EMBEDDING, 2, (int[]){t, idx}, NULL, NULL));
        } else if (which == 1) {
            int x = graph_input(g, "x", DT_F32, 2, S(50, 10));
            graph_output(g, graph_op(g, OP_CROSS_ENTROPY, 2, (int[]){x, idx}, ignore, NULL));
        } else if (which == 2) {
            int dy = graph_input(g, "dy", DT_F32, 2, S(50, 4));
            graph_output(g, graph_op_shaped(g, OP_EMBEDDING_GRAD, 2, (int[]){dy, idx}, NULL, NULL,
                                            2, S(10, 4)));
        } else {
            int dl = graph_input(g, "dl", DT_F32, 0, NULL);
            int x = graph_input(g, "x", DT_F32, 2, S(50, 10));
            graph_output(g,
                         graph_op(g, OP_CROSS_ENTROPY_GRAD, 3, (int[]){dl, x, idx}, ignore, NULL));
        }
        model *m = model_new(g, "bad", "test", 1);
        assert_int_equal(model_init_values(m, 9), 0);
        eager_cuda *e;
        char err[512];
        if (eager_cuda_new(m, NULL, &e, err, sizeof err) < 0)
            fail_msg("eager_cuda_new: %s", err);
        tensor *y = NULL;
        assert_int_equal(eager_cuda_run(e, NULL), 0); // enqueued: found later
        assert_int_equal(eager_cuda_outputs(e, &y), -1);
        assert_null(y);
        print_message("%s\n", eager_cuda_error(e));
        assert_non_null(strstr(eager_cuda_error(e), said[which]));
        assert_non_null(strstr(eager_cuda_error(e), "outside [0, 10)"));
        eager_cuda_free(e);
        model_free(m);
    }
}

// With TF32 allowed the f32 GEMM still runs (and is close, not exact).
static void test_tf32(void **state) {
    (void)state;
    if (!op_have_gpu())
        skip();
    graph *g = graph_new();
    g_matmul(g, &(op_case){.dt = DT_F32});
    model *m = model_new(g, "tf32", "test", 1);
    assert_int_equal(model_init_values(m, 3), 0);
    eager_cuda *e;
    char err[512];
    if (eager_cuda_new(m, &(eager_cuda_opts){.allow_tf32 = true}, &e, err, sizeof err) < 0)
        fail_msg("%s", err);
    tensor *outs[8];
    assert_int_equal(eager_cuda_run(e, NULL), 0);
    assert_int_equal(eager_cuda_outputs(e, outs), 0);
    double **ref = ref_run_all(m, err, sizeof err);
    assert_non_null(ref);
    for (int k = 0; k < g->noutputs; k++) {
        const double *r = ref[g->outputs[k]];
        for (int64_t i = 0; i < tensor_numel(outs[k]); i++)
            if (!(fabs(tensor_get_flat(outs[k], i) - r[i]) <= 5e-2 + 5e-3 * fabs(r[i])))
                fail_msg("tf32: output %d element %lld: %.9g, reference %.9g", k, (long long)i,
                         tensor_get_flat(outs[k], i), r[i]);
        tensor_free(outs[k]);
    }
    for (int i = 0; i < g->n; i++)
        free(ref[i]);
    free(ref);
    eager_cuda_free(e);
    model_free(m);
}

static int close_to(const char *what, const tensor *a, const tensor *b, double rtol, double atol) {
    int bad = 0;
    for (int64_t i = 0; i < tensor_numel(a); i++) {
        double x = tensor_get_flat(a, i), y = tensor_get_flat(b, i);
        if ((isnan(x) && isnan(y)) || fabs(x - y) <= atol + rtol * fabs(y))
            continue;
        if (bad++ < 3)
            print_error("%s: element %lld: %.9g, expected %.9g\n", what, (long long)i, x, y);
    }
    return bad;
}

// Every smoke model on the GPU: eager_cuda against the CPU eager executor,
// and the compiled mode (with its fused and captured ablations) against
// eager_cuda, with the kernels per step of each.
static void test_smoke_models(void **state) {
    (void)state;
    if (!op_have_gpu())
        skip();
    char err[600];
    suite *s = load_smoke_suite();
    diag d;
    int failures = 0;
    for (int ci = 0; ci < s->ncases; ci++) {
        const suite_case *sc = &s->cases[ci];
        modeldef *md = NULL;
        model *m = NULL;
        if (modeldef_load(sc->model_path, &md, &d) < 0 ||
            modeldef_build(md, sc->overrides, sc->noverrides, sc->batch, &(modeldef_opts){0}, &m,
                           &d) < 0)
            fail_msg("%s: %d:%d: %s", sc->name, d.line, d.col, d.msg);
        assert_int_equal(model_init_values(m, 17), 0);
        int no = m->g->noutputs;
        tensor *cpu[8], *gpu[8];
        eager *e = eager_new(m);
        assert_int_equal(eager_run(e, cpu, NULL), 0);
        eager_free(e);
        eager_cuda *ec;
        if (eager_cuda_new(m, NULL, &ec, err, sizeof err) < 0)
            fail_msg("%s: %s", sc->name, err);
        eager_stats est;
        if (eager_cuda_run(ec, &est) < 0 || eager_cuda_outputs(ec, gpu) < 0)
            fail_msg("%s: eager_cuda: %s", sc->name, eager_cuda_error(ec));
        eager_cuda_free(ec);
        for (int k = 0; k < no; k++)
            failures += close_to(sc->name, gpu[k], cpu[k], 1e-3, 1e-4) > 0;
        static const struct {
            const char *name;
            bool fusion, capture;
        } modes[] = {{"compiled", true, true}, {"fused", true, false}, {"captured", false, true}};
        char line[300];
        int o = snprintf(line, sizeof line, "%-14s eager %3lld kernels", sc->name,
                         (long long)est.kernels);
        for (int mi = 0; mi < 3; mi++) {
            compile_opts co = {.fusion = modes[mi].fusion, .capture = modes[mi].capture};
            cuda_program *cp;
            if (cuda_program_new(m, &co, false, &cp, err, sizeof err) < 0)
                fail_msg("%s %s: %s", sc->name, modes[mi].name, err);
            compiled_stats st;
            tensor *out[8];
            for (int rep = 0; rep < 2; rep++) // the second: a graph replay
                if (cuda_program_run(cp, &st) < 0)
                    fail_msg("%s %s: %s", sc->name, modes[mi].name, cuda_program_error(cp));
            if (cuda_program_outputs(cp, out) < 0)
                fail_msg("%s %s: %s", sc->name, modes[mi].name, cuda_program_error(cp));
            for (int k = 0; k < no; k++) {
                failures += close_to(modes[mi].name, out[k], gpu[k], 1e-3, 1e-4) > 0;
                tensor_free(out[k]);
            }
            o += snprintf(line + o, sizeof line - (size_t)o, ", %s %3lld", modes[mi].name,
                          (long long)st.kernels);
            cuda_program_free(cp);
        }
        print_message("%s\n", line);
        for (int k = 0; k < no; k++) {
            tensor_free(cpu[k]);
            tensor_free(gpu[k]);
        }
        model_free(m);
        modeldef_free(md);
    }
    suite_free(s);
    assert_int_equal(failures, 0);
}

// A smoke model's training step (autograd.h: the loss, then each
// parameter's gradient, then the updates), in f32 with SGD, or under AMP
// (f16) with AdamW and the grad scaler.
static model *train_model(const suite_case *sc, bool amp) {
    modeldef *md = NULL;
    diag d;
    if (modeldef_load(sc->model_path, &md, &d) < 0)
        fail_msg("%s: %d:%d: %s", sc->name, d.line, d.col, d.msg);
    train_opts o = amp ? train_opts_default() : train_opts_sgd();
    o.grad_scaler = amp;
    o.init_scale = 256; // no f16 overflow on a first step: no step skipped by one executor only
    model *m;
    char err[600];
    enum model_prep_step s = model_prepare(
        md, sc->overrides, sc->noverrides, sc->batch,
        &(model_prep){.amp = amp ? DT_F16 : DT_F32, .train = &o, .keep_grads = true, .seed = 17},
        &m, err, sizeof err);
    modeldef_free(md);
    if (s != MODEL_PREP_DONE)
        fail_msg("%s: %s: %s", sc->name, model_prep_step_name(s), err);
    return m;
}

// Every smoke model's training step, eager_cuda against the CPU eager
// executor from the same values: the loss, every gradient, and the loss of
// a second step (which the first step's updates moved). In f32 (SGD) for
// every model, and under AMP with AdamW and the grad scaler for mlp and
// resnet. Both count steps 1 and 2 (Adam's bias correction, dropout masks).
static void test_smoke_training(void **state) {
    (void)state;
    if (!op_have_gpu())
        skip();
    char err[600];
    suite *s = load_smoke_suite();
    int failures = 0;
    for (int ci = 0; ci < s->ncases; ci++) {
        const suite_case *sc = &s->cases[ci];
        for (int amp = 0; amp < 2; amp++) {
            if (amp && strcmp(sc->name, "mlp") != 0 && strcmp(sc->name, "resnet") != 0)
                continue;
            model *m = train_model(sc, amp);
            const char *v = amp ? "amp" : "fp32";
            int no = m->g->noutputs;
            // the device copies first: the CPU's updates write m->values
            eager_cuda *ec;
            if (eager_cuda_new(m, NULL, &ec, err, sizeof err) < 0)
                fail_msg("%s %s: %s", sc->name, v, err);
            // the fp64 step from the starting values (the CPU's updates move them)
            int ni = train_check_items(m);
            double **ref = calloc((size_t)ni, sizeof *ref);
            assert_non_null(ref);
            if (train_reference(m, 1, ref, err, sizeof err) < 0)
                fail_msg("%s %s: fp64 reference: %s", sc->name, v, err);
            tensor **c1 = calloc((size_t)no, sizeof *c1), **c2 = calloc((size_t)no, sizeof *c2);
            tensor **g1 = calloc((size_t)no, sizeof *g1), **g2 = calloc((size_t)no, sizeof *g2);
            assert_true(c1 && c2 && g1 && g2);
            eager *e = eager_new(m);
            assert_non_null(e);
            eager_set_step(e, 1);
            bool ok = eager_run(e, c1, NULL) == 0;
            eager_set_step(e, 2);
            if (!ok || eager_run(e, c2, NULL) < 0)
                fail_msg("%s %s: CPU eager: %s", sc->name, v, eager_error(e));
            eager_free(e);
            eager_stats est;
            eager_cuda_set_step(ec, 1);
            ok = eager_cuda_run(ec, &est) == 0 && eager_cuda_outputs(ec, g1) == 0;
            eager_cuda_set_step(ec, 2);
            if (!ok || eager_cuda_run(ec, NULL) < 0 || eager_cuda_outputs(ec, g2) < 0)
                fail_msg("%s %s: eager_cuda: %s", sc->name, v, eager_cuda_error(ec));
            double l1 = tensor_get_flat(g1[0], 0), r1 = tensor_get_flat(c1[0], 0);
            double l2 = tensor_get_flat(g2[0], 0), r2 = tensor_get_flat(c2[0], 0);
            if (!(fabs(l1 - r1) <= 1e-3 * fabs(r1) + 1e-4)) {
                print_error("%s %s: loss %.9g, CPU %.9g\n", sc->name, v, l1, r1);
                failures++;
            }
            // Each gradient against fp64, as the runner's training check
            // judges it (train_check.h: relative L2 with a floor, so that a
            // gradient that is zero in exact arithmetic, a key bias under
            // softmax or a bias before a batch norm, is rounding noise on
            // both sides and not O(1) apart). The GPU may be 3 times as far
            // as the CPU, plus a slack: a wrong kernel is off by O(1), while
            // summation orders that differ (cuDNN against oneDNN) move an
            // ill-conditioned model's gradients by up to a few percent, and
            // a deep net's f16 ones by tens (test_autograd.c).
            double tl = amp ? 1e-3 : 1e-5, worst = -1, eg_at = 0, ec_at = 0;
            int at = 0;
            for (int k = 1; k < no; k++) {
                double eg = train_item_error(g1[k], ref[k], tl);
                double ec = train_item_error(c1[k], ref[k], tl), over = eg - 3 * ec;
                if (!(over <= worst))
                    worst = over, at = k, eg_at = eg, ec_at = ec;
                if (isnan(worst))
                    break;
            }
            if (!(worst <= (amp ? 5e-2 : 3e-2))) {
                print_error("%s %s: gradient %d (parameter %%%d) is %.3g from fp64, the CPU's "
                            "%.3g (relative L2)\n",
                            sc->name, v, at, autograd_param_of_output(m->g, at), eg_at, ec_at);
                failures++;
            }
            if (!(fabs(l2 - r2) <= (amp ? 3e-2 : 1e-2) * fabs(r2) + 1e-4)) {
                print_error("%s %s: second step's loss %.9g, CPU %.9g\n", sc->name, v, l2, r2);
                failures++;
            }
            print_message("%-14s %-4s training: %3lld kernels, loss %.6f -> %.6f (CPU %.6f -> "
                          "%.6f), worst gradient %.2g from fp64 (CPU %.2g)\n",
                          sc->name, v, (long long)est.kernels, l1, l2, r1, r2, eg_at, ec_at);
            for (int k = 0; k < ni; k++)
                free(ref[k]);
            free(ref);
            for (int k = 0; k < no; k++) {
                tensor_free(c1[k]);
                tensor_free(c2[k]);
                tensor_free(g1[k]);
                tensor_free(g2[k]);
            }
            free(c1);
            free(c2);
            free(g1);
            free(g2);
            eager_cuda_free(ec);
            model_free(m);
        }
    }
    suite_free(s);
    assert_int_equal(failures, 0);
}
#else
// A build without the CUDA backend has no CUDA executors to test.
static void test_bad_indices(void **state) { (void)state; skip(); }
static void test_tf32(void **state) { (void)state; skip(); }
static void test_smoke_models(void **state) { (void)state; skip(); }
static void test_smoke_training(void **state) { (void)state; skip(); }
#endif

static const struct CMUnitTest extra[] = {
    cmocka_unit_test(test_dropout_rate),  cmocka_unit_test(test_errors),
    cmocka_unit_test(test_no_values),     cmocka_unit_test(test_ref_run_outputs),
    cmocka_unit_test(test_updates_steps), cmocka_unit_test(test_batch_norm_training_steps),
    cmocka_unit_test(test_dropout_steps), cmocka_unit_test(test_embedding_grad_repeats),
    cmocka_unit_test(test_bad_indices),   cmocka_unit_test(test_tf32),
    cmocka_unit_test(test_smoke_models),  cmocka_unit_test(test_smoke_training),
    cmocka_unit_test(test_noise_steps),
};

const struct CMUnitTest *const op_extra_tests = extra;
const int op_nextra_tests = (int)(sizeof extra / sizeof extra[0]);
