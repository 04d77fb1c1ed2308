// Tests for model_prepare (engine/model/model_prepare.h): models/mlp.yaml made
// ready as the runner makes it (AMP training: casts, gradients, optimizer
// state, values), and each step that can fail named with its words.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_prepare.h"

static modeldef *mlp_def(void) {
    const char *src = getenv("TCBENCH_SOURCE_DIR");
    if (!src)
        fail_msg("TCBENCH_SOURCE_DIR is not set (meson test sets it)");
    char path[600];
    snprintf(path, sizeof path, "%s/models/mlp.yaml", src);
    modeldef *md;
    diag d;
    if (modeldef_load(path, &md, &d) < 0)
        fail_msg("%s: %d:%d: %s", path, d.line, d.col, d.msg);
    return md;
}

static const modeldef_override small[] = {{"features", "8", "test", 1, 1},
                                          {"hidden", "16", "test", 1, 1}};

static int count_op(const graph *g, enum op op) {
    int n = 0;
    for (int i = 0; i < g->n; i++)
        n += g->nodes[i].op == op;
    return n;
}

// AMP training with every gradient kept: the casts come before the backward
// (one per weight and input), the outputs are the loss and one gradient per
// parameter, and every source, the optimizer's state included, has values.
static void test_amp_training(void **state) {
    (void)state;
    modeldef *md = mlp_def();
    train_opts o = train_opts_default();
    model_prep mp = {.amp = DT_F16, .train = &o, .keep_grads = true, .seed = 3};
    model *m;
    char err[300];
    enum model_prep_step s = model_prepare(md, small, 2, 4, &mp, &m, err, sizeof err);
    if (s != MODEL_PREP_DONE)
        fail_msg("%s: %s", model_prep_step_name(s), err);
    const graph *g = m->g;
    int params = 0, sources = 0;
    for (int i = 0; i < g->n; i++) {
        params += g->nodes[i].op == OP_PARAM;
        if (op_kind(g->nodes[i].op) == OPK_SOURCE) {
            sources++;
            assert_non_null(m->values[i]);
        }
    }
    assert_int_equal(params, 8); // four linear layers, weight and bias
    assert_int_equal(g->noutputs, 1 + params);
    assert_true(count_op(g, OP_CAST) > 0);
    assert_true(sources > params); // Adam's state buffers
    model_free(m);
    // inference in fp32: the forward alone, no cast, one output
    s = model_prepare(md, small, 2, 4, &(model_prep){.seed = 3}, &m, err, sizeof err);
    assert_int_equal(s, MODEL_PREP_DONE);
    assert_int_equal(count_op(m->g, OP_CAST), 0);
    assert_int_equal(m->g->noutputs, 1);
    assert_int_equal(m->g->loss, -1);
    model_free(m);
    modeldef_free(md);
}

// Each failing step by name, with its own words; no model comes back.
static void test_failures(void **state) {
    (void)state;
    modeldef *md = mlp_def();
    char err[300];
    model none, *m = &none; // NULL on failure
    const modeldef_override bad[] = {{"width", "8", "suite.yaml", 7, 12}};
    assert_int_equal(model_prepare(md, bad, 1, 4, &(model_prep){0}, &m, err, sizeof err),
                     MODEL_PREP_BUILD);
    assert_null(m);
    assert_non_null(strstr(err, "suite.yaml:7:12"));
    assert_non_null(strstr(err, "width"));
    assert_string_equal(model_prep_step_name(MODEL_PREP_BUILD), "build");
    assert_int_equal(
        model_prepare(md, small, 2, 4, &(model_prep){.amp = DT_I32}, &m, err, sizeof err),
        MODEL_PREP_AUTOCAST);
    assert_null(m);
    assert_non_null(strstr(err, "i32"));
    modeldef_free(md);
    // a graph built by hand without a loss cannot be trained
    graph *g = graph_new();
    int x = graph_input(g, "x", DT_F32, 2, (int64_t[]){2, 4});
    int w = graph_param(g, "w", 2, (int64_t[]){3, 4}, INIT_NORMAL, 0.1);
    graph_output(g, graph_op(g, OP_LINEAR, 2, (int[]){x, w}, NULL, NULL));
    m = model_new(g, "t", "test", 2);
    assert_non_null(m);
    train_opts o = train_opts_sgd();
    assert_int_equal(model_prepare_built(m, &(model_prep){.train = &o}, err, sizeof err),
                     MODEL_PREP_AUTOGRAD);
    assert_non_null(strstr(err, "no loss"));
    assert_string_equal(model_prep_step_name(MODEL_PREP_AUTOGRAD), "autograd");
    model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_amp_training),
        cmocka_unit_test(test_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
