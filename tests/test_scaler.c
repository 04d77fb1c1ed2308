// Tests for dynamic loss scaling (autograd_build with train_opts.grad_scaler,
// PyTorch's GradScaler): the graph it builds; a step with an inf or NaN
// gradient skips every update (parameters, Adam's moments, SGD's momentum
// and the step count untouched), halves the scale and resets the growth
// count, in eager, in each compiled mode and in the fp64 reference; 2000
// good steps double the scale and 1999 do not; without overflow a scaled
// run matches the unscaled one; a scale that makes f32 gradients overflow
// backs off step by step, the same in every executor; the CUDA paths refuse
// the scaler's ops by name. Models are tiny so every test stays fast.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "autodiff/autograd.h"
#include "compile/codegen_cuda.h"
#include "compile/compile_internal.h"
#include "eager/eager.h"
#include "eager/eager_cuda.h"
#include "model/model_prepare.h"
#include "ref/ref.h"
#include "tcbench_config.h"

// ---- models --------------------------------------------------------------------

enum { ROWS = 4, WIDTH = 3, LAYERS = 5 };

static int node_named(const graph *g, const char *name) {
    for (int i = 0; i < g->n; i++)
        if (g->nodes[i].name && !strcmp(g->nodes[i].name, name))
            return i;
    fail_msg("no node named %s", name);
    return -1;
}

static int input(graph *g, const char *name) {
    return graph_input(g, name, DT_F32, 2, (int64_t[]){ROWS, WIDTH});
}

// x (4, 3) through LAYERS linear layers with bias, tanh between, MSE against
// t: ten parameters, so the check over the gradients is two chained
// found_inf nodes.
static void build_mlp(graph *g) {
    int h = input(g, "x"), t = input(g, "t");
    for (int l = 0; l < LAYERS; l++) {
        char w[32], b[32];
        snprintf(w, sizeof w, "l%d.weight", l);
        snprintf(b, sizeof b, "l%d.bias", l);
        int wi = graph_param(g, w, 2, (int64_t[]){WIDTH, WIDTH}, INIT_NORMAL, 0.5);
        int bi = graph_param(g, b, 1, (int64_t[]){WIDTH}, INIT_NORMAL, 0.1);
        h = graph_op(g, OP_LINEAR, 3, (int[]){h, wi, bi}, NULL, NULL);
        if (l + 1 < LAYERS)
            h = graph_unary(g, OP_TANH, h);
    }
    g->loss = graph_op(g, OP_MSE_LOSS, 2, (int[]){h, t}, NULL, NULL);
}

// loss = sum(x * w * r): the gradient of w is r * x (times the scale),
// whatever w is, so a large x makes the scaled gradient overflow f32 while
// the loss and the unscaled gradient stay finite.
static void build_product(graph *g) {
    int x = input(g, "x");
    int w = graph_param(g, "w", 2, (int64_t[]){ROWS, WIDTH}, INIT_NORMAL, 0.5);
    int r = graph_buffer(g, "r", DT_F32, 2, (int64_t[]){ROWS, WIDTH}, INIT_NORMAL, 1.0);
    int p = graph_binary(g, OP_MUL, graph_binary(g, OP_MUL, x, w), r);
    int f = graph_reshape(g, p, 1, (int64_t[]){ROWS * WIDTH});
    g->loss = graph_reshape(g, graph_reduce(g, OP_SUM, f, 0), 0, NULL);
}

static model *train_model(void (*build)(graph *), const train_opts *o, bool keep_grads) {
    graph *g = graph_new();
    assert_non_null(g);
    build(g);
    if (g->loss < 0)
        fail_msg("build: %s", graph_error(g));
    model *m = model_new(g, "scaler", "test", ROWS);
    assert_non_null(m);
    char err[400];
    enum model_prep_step s = model_prepare_built(
        m, &(model_prep){.train = o, .keep_grads = keep_grads, .seed = 7}, err, sizeof err);
    if (s != MODEL_PREP_DONE)
        fail_msg("%s: %s", model_prep_step_name(s), err);
    return m;
}

static train_opts opts(optim_kind k, bool scaler) {
    train_opts o = k == OPTIM_SGD ? train_opts_sgd() : train_opts_default();
    o.grad_scaler = scaler;
    if (k == OPTIM_SGD)
        o.weight_decay = 0.01; // the decay reads the parameter: a skipped step must not decay it
    return o;
}

// ---- executors -----------------------------------------------------------------

typedef enum { EX_EAGER, EX_COMPILED, EX_CAPTURED, EX_FUSED, EX_REF, EX_COUNT } exec_kind;
static const char *const exec_names[] = {"eager", "compiled", "captured", "fused", "reference"};

static char cache[600]; // the kernel cache of this test program, removed at the end

typedef struct exec {
    exec_kind kind;
    model *m;
    eager *e;
    compiled *c;
    ref_session *r;
} exec;

static exec exec_new(exec_kind kind, model *m) {
    exec x = {.kind = kind, .m = m};
    char err[600];
    if (kind == EX_EAGER) {
        assert_non_null(x.e = eager_new(m));
    } else if (kind == EX_REF) {
        if (!(x.r = ref_session_new(m, err, sizeof err)))
            fail_msg("reference: %s", err);
    } else {
        compile_opts o = compile_opts_default();
        o.cache_dir = cache;
        o.fusion = kind != EX_CAPTURED;
        o.capture = kind != EX_FUSED;
        if (compile_model(m, &o, &x.c, err, sizeof err) < 0)
            fail_msg("%s: compile: %s", exec_names[kind], err);
    }
    return x;
}

static void exec_free(exec *x) {
    eager_free(x->e);
    compiled_free(x->c);
    ref_session_free(x->r);
}

// One step t; returns the loss, stores the outputs' values in grads (when
// not NULL: every element of outputs 1 .. noutputs - 1 in order).
static double exec_step(exec *x, uint64_t t, double *grads) {
    const graph *g = x->m->g;
    int nout = g->noutputs;
    double loss;
    char err[600];
    int64_t at = 0;
    if (x->r) {
        double *o[GRAPH_MAX_OUTPUTS];
        if (ref_session_run(x->r, t, o, err, sizeof err) < 0)
            fail_msg("reference step %d: %s", (int)t, err);
        loss = o[0][0];
        for (int k = 0; k < nout; k++) {
            int64_t n = graph_node_numel(&g->nodes[g->outputs[k]]);
            for (int64_t i = 0; grads && k > 0 && i < n; i++)
                grads[at++] = o[k][i];
            free(o[k]);
        }
        return loss;
    }
    tensor *o[GRAPH_MAX_OUTPUTS];
    if (x->e) {
        eager_set_step(x->e, t);
        if (eager_run(x->e, o, NULL) < 0)
            fail_msg("eager step %d: %s", (int)t, eager_error(x->e));
    } else {
        compiled_set_step(x->c, t);
        if (compiled_run(x->c, o, NULL) < 0)
            fail_msg("%s step %d: %s", exec_names[x->kind], (int)t, compiled_error(x->c));
    }
    loss = tensor_get_flat(o[0], 0);
    for (int k = 0; k < nout; k++) {
        for (int64_t i = 0; grads && k > 0 && i < tensor_numel(o[k]); i++)
            grads[at++] = tensor_get_flat(o[k], i);
        tensor_free(o[k]);
    }
    return loss;
}

// Element i of source node v as the executor holds it now.
static double exec_value(const exec *x, int v, int64_t i) {
    if (x->r)
        return ref_session_source(x->r, v)[i];
    return tensor_get_flat(x->m->values[v], i);
}

static double scaler_value(const exec *x, const char *name) {
    int v = autograd_scaler_state(x->m->g, name);
    assert_true(v >= 0);
    return exec_value(x, v, 0);
}

static void expect_scaler(const exec *x, double scale, double tracker, double step,
                          const char *when) {
    double s = scaler_value(x, "grad_scaler.scale"),
           g = scaler_value(x, "grad_scaler.growth_tracker");
    double n = scaler_value(x, "optimizer.step");
    if (s != scale || g != tracker || n != step)
        fail_msg("%s, %s: scale %g, growth tracker %g, optimizer steps %g; expected %g, %g, %g",
                 exec_names[x->kind], when, s, g, n, scale, tracker, step);
}

// Every parameter and optimizer state (the sources the updates write) of m,
// flattened, as x holds them.
static int64_t trained_values(const exec *x, double *out) {
    const graph *g = x->m->g;
    int64_t at = 0;
    for (int v = 0; v < g->n; v++) {
        const graph_node *n = &g->nodes[v];
        bool state = n->op == OP_BUFFER && n->name && strchr(n->name, '.') &&
                     strncmp(n->name, "grad_scaler.", 12) && strcmp(n->name, "optimizer.step");
        if (n->op != OP_PARAM && !state)
            continue;
        for (int64_t i = 0; i < graph_node_numel(n); i++, at++)
            if (out)
                out[at] = exec_value(x, v, i);
    }
    return at;
}

static void expect_close(const char *what, const double *a, const double *b, int64_t n,
                         double tol) {
    for (int64_t i = 0; i < n; i++)
        if (!(fabs(a[i] - b[i]) <= tol * fmax(1, fabs(b[i]))))
            fail_msg("%s: element %lld: %.9g, expected %.9g", what, (long long)i, a[i], b[i]);
}

// ---- the graph -----------------------------------------------------------------

static void test_graph(void **state) {
    (void)state;
    train_opts o = opts(OPTIM_ADAMW, true);
    model *m = train_model(build_mlp, &o, true);
    const graph *g = m->g;
    int found = 0, updates = 0, scaler_updates = 0;
    for (int i = 0; i < g->n; i++) {
        const graph_node *n = &g->nodes[i];
        found += n->op == OP_FOUND_INF;
        scaler_updates += n->op == OP_SCALER_UPDATE;
        if (n->op == OP_ADAMW) {
            updates++;
            assert_int_equal(n->nsrc, 7);
            assert_int_equal(graph_scaler_src(n), 4);
            assert_int_equal(g->nodes[n->src[5]].op, OP_FOUND_INF);
        }
    }
    assert_int_equal(found, 2); // 10 gradients: 7, then the flag and 3 more
    assert_int_equal(updates, 2 * LAYERS);
    assert_int_equal(scaler_updates, 1);
    // the state starts as PyTorch's: scale 2^16, no good steps, no optimizer steps
    assert_true(tensor_get_flat(m->values[autograd_scaler_state(g, "grad_scaler.scale")], 0) ==
                65536.0);
    assert_true(
        tensor_get_flat(m->values[autograd_scaler_state(g, "grad_scaler.growth_tracker")], 0) == 0);
    assert_true(tensor_get_flat(m->values[autograd_scaler_state(g, "optimizer.step")], 0) == 0);
    assert_int_equal(autograd_scaler_state(g, "nosuch"), -1);
    // the gradient outputs are unscaled, and still name their parameters
    assert_int_equal(g->noutputs, 1 + 2 * LAYERS);
    for (int k = 1; k < g->noutputs; k++) {
        int p = autograd_param_of_output(g, k);
        assert_true(p >= 0 && g->nodes[p].op == OP_PARAM);
        assert_int_equal(g->nodes[g->outputs[k]].op, OP_MUL);
    }
    model_free(m);

    // without the scaler nothing of it is there
    o.grad_scaler = false;
    m = train_model(build_mlp, &o, false);
    assert_int_equal(autograd_scaler_state(m->g, "grad_scaler.scale"), -1);
    for (int i = 0; i < m->g->n; i++) {
        assert_int_not_equal(m->g->nodes[i].op, OP_FOUND_INF);
        assert_int_equal(graph_scaler_src(&m->g->nodes[i]), -1);
    }
    model_free(m);

    // bad settings are refused with PyTorch's defaults named
    train_opts bad[4];
    for (int i = 0; i < 4; i++)
        bad[i] = opts(OPTIM_ADAMW, true);
    bad[0].init_scale = 0, bad[1].growth_factor = 1, bad[2].backoff_factor = 1;
    bad[3].growth_interval = 0;
    for (int i = 0; i < 4; i++) {
        graph *g2 = graph_new();
        build_mlp(g2);
        char err[400];
        assert_int_equal(autograd_build(g2, &bad[i], false, err, sizeof err), -1);
        if (!strstr(err, "grad scaler") || !strstr(err, "65536, 2, 0.5, 2000"))
            fail_msg("bad setting %d: %s", i, err);
        graph_free(g2);
    }

    // an update with ia1 needs the scaler's three scalar inputs after its state
    graph *g3 = graph_new();
    int p = graph_param(g3, "p", 1, (int64_t[]){4}, INIT_NORMAL, 1);
    int gr = graph_input(g3, "g", DT_F32, 1, (int64_t[]){4});
    int sc = graph_buffer(g3, "s", DT_F32, 0, NULL, INIT_CONSTANT, 65536);
    assert_int_equal(graph_op(g3, OP_SGD, 2, (int[]){p, gr}, (int64_t[GRAPH_MAX_IA]){0, 1}, NULL),
                     -1);
    assert_int_equal(
        graph_op(g3, OP_SGD, 5, (int[]){p, gr, sc, sc, gr}, (int64_t[GRAPH_MAX_IA]){0, 1}, NULL),
        -1);
    assert_non_null(strstr(graph_error(g3), "f32 scalar"));
    assert_true(graph_op(g3, OP_SGD, 5, (int[]){p, gr, sc, sc, sc}, (int64_t[GRAPH_MAX_IA]){0, 1},
                         NULL) >= 0);
    graph_free(g3);
}

// ---- a step with an inf or NaN gradient ----------------------------------------

// Step 1 sees an inf in the input (its gradients are NaN or inf): nothing the
// optimizer owns moves, the scale halves, the growth count restarts, the step
// count stays 0. Step 2, on the finite batch, is the optimizer's first: the
// parameters come out as an unscaled run's after its step 1.
static void skip_case(exec_kind kind, optim_kind optim) {
    train_opts o = opts(optim, true), plain = opts(optim, false);
    model *m = train_model(build_mlp, &o, false), *ref = train_model(build_mlp, &plain, false);
    int x = node_named(m->g, "x");
    float *xv = tensor_f32(m->values[x]), x0 = xv[0];
    exec ex = exec_new(kind, m), er = exec_new(EX_EAGER, ref);
    int64_t n = trained_values(&ex, NULL);
    double *before = malloc((size_t)n * sizeof *before), *after = malloc((size_t)n * sizeof *after);
    double *want = malloc((size_t)n * sizeof *want);
    assert_non_null(before), assert_non_null(after), assert_non_null(want);
    trained_values(&ex, before);

    xv[0] = INFINITY;
    exec_step(&ex, 1, NULL);
    trained_values(&ex, after);
    for (int64_t i = 0; i < n; i++)
        if (memcmp(&before[i], &after[i], sizeof before[i]))
            fail_msg("%s, %s: value %lld moved in a skipped step: %.9g -> %.9g", exec_names[kind],
                     optim_name(optim), (long long)i, before[i], after[i]);
    expect_scaler(&ex, 32768, 0, 0, "after an inf");

    xv[0] = x0;
    exec_step(&ex, 2, NULL);
    expect_scaler(&ex, 32768, 1, 1, "after a good step");
    exec_step(&er, 1, NULL);
    trained_values(&ex, after);
    trained_values(&er, want);
    expect_close(exec_names[kind], after, want, n, 1e-6);

    exec_free(&ex);
    exec_free(&er);
    free(before), free(after), free(want);
    model_free(m);
    model_free(ref);
}

static void test_skip_eager(void **state) {
    (void)state;
    skip_case(EX_EAGER, OPTIM_ADAMW);
    skip_case(EX_EAGER, OPTIM_SGD);
}

static void test_skip_reference(void **state) {
    (void)state;
    skip_case(EX_REF, OPTIM_ADAMW);
    skip_case(EX_REF, OPTIM_SGD);
}

// the generated multi-tensor updates read found_inf inside the captured
// step; without fusion each update is its own generated kernel; without
// capture the runtime loop calls them
static void test_skip_compiled(void **state) {
    (void)state;
    skip_case(EX_COMPILED, OPTIM_ADAMW);
    skip_case(EX_COMPILED, OPTIM_SGD);
    skip_case(EX_CAPTURED, OPTIM_ADAMW);
    skip_case(EX_FUSED, OPTIM_SGD);
}

// ---- growth --------------------------------------------------------------------

// 1999 good steps leave the scale; the 2000th doubles it and restarts the count.
static void growth_case(exec_kind kind) {
    train_opts o = opts(OPTIM_ADAMW, true);
    model *m = train_model(build_product, &o, false);
    exec ex = exec_new(kind, m);
    for (uint64_t t = 1; t <= 1999; t++)
        exec_step(&ex, t, NULL);
    expect_scaler(&ex, 65536, 1999, 1999, "after 1999 good steps");
    exec_step(&ex, 2000, NULL);
    expect_scaler(&ex, 131072, 0, 2000, "after 2000 good steps");
    exec_step(&ex, 2001, NULL);
    expect_scaler(&ex, 131072, 1, 2001, "after 2001 good steps");
    exec_free(&ex);
    model_free(m);
}

static void test_growth(void **state) {
    (void)state;
    growth_case(EX_EAGER);
    growth_case(EX_COMPILED);
}

// ---- without overflow, the scaler changes nothing -------------------------------

static void same_case(exec_kind kind, optim_kind optim) {
    enum { STEPS = 5 };
    train_opts o = opts(optim, true), plain = opts(optim, false);
    model *ms = train_model(build_mlp, &o, true), *mp = train_model(build_mlp, &plain, true);
    exec xs = exec_new(kind, ms), xp = exec_new(kind, mp);
    int64_t n = trained_values(&xs, NULL), ng = 0;
    for (int k = 1; k < mp->g->noutputs; k++)
        ng += graph_node_numel(&mp->g->nodes[mp->g->outputs[k]]);
    assert_int_equal(n, trained_values(&xp, NULL));
    double *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
    double *ga = malloc((size_t)ng * sizeof *ga), *gb = malloc((size_t)ng * sizeof *gb);
    assert_non_null(a), assert_non_null(b), assert_non_null(ga), assert_non_null(gb);
    char what[96];
    for (uint64_t t = 1; t <= STEPS; t++) {
        double ls = exec_step(&xs, t, ga), lp = exec_step(&xp, t, gb);
        snprintf(what, sizeof what, "%s %s step %d", exec_names[kind], optim_name(optim), (int)t);
        expect_close(what, &ls, &lp, 1, 1e-6); // the loss is reported unscaled
        expect_close(what, ga, gb, ng, 1e-6);  // and so are the gradients
    }
    trained_values(&xs, a);
    trained_values(&xp, b);
    snprintf(what, sizeof what, "%s %s after %d steps", exec_names[kind], optim_name(optim), STEPS);
    expect_close(what, a, b, n, 1e-6);
    expect_scaler(&xs, 65536, STEPS, STEPS, "after good steps");
    exec_free(&xs);
    exec_free(&xp);
    free(a), free(b), free(ga), free(gb);
    model_free(ms);
    model_free(mp);
}

static void test_same_as_unscaled(void **state) {
    (void)state;
    same_case(EX_EAGER, OPTIM_ADAMW);
    same_case(EX_EAGER, OPTIM_SGD);
    same_case(EX_COMPILED, OPTIM_ADAMW);
    same_case(EX_COMPILED, OPTIM_SGD);
}

// ---- overflow from the scale itself, the same everywhere ------------------------

// x = 1e18 everywhere and a scale that starts at 2^70: the gradient of w,
// r * x * scale, passes FLT_MAX while the scale is large (its square, in
// Adam, stays finite unscaled), so the scale backs off step by step until the
// scaled gradient fits, grows again after growth_interval (3 here) good
// steps, overflows again... Eager, compiled and the fp64 reference (which
// rounds the gradient it checks to f32) take and skip the same steps.
static void test_backoff_agrees(void **state) {
    (void)state;
    enum { STEPS = 10 };
    train_opts o = opts(OPTIM_ADAMW, true);
    o.growth_interval = 3;
    o.init_scale = 0x1p70;
    model *m[3];
    exec x[3];
    const exec_kind kinds[3] = {EX_REF, EX_EAGER, EX_COMPILED};
    for (int k = 0; k < 3; k++) {
        m[k] = train_model(build_product, &o, false);
        float *xv = tensor_f32(m[k]->values[node_named(m[k]->g, "x")]);
        for (int i = 0; i < ROWS * WIDTH; i++)
            xv[i] = 1e18f;
        x[k] = exec_new(kinds[k], m[k]);
    }
    int64_t n = trained_values(&x[0], NULL);
    double *want = malloc((size_t)n * sizeof *want), *got = malloc((size_t)n * sizeof *got);
    assert_non_null(want), assert_non_null(got);
    int skips = 0, growths = 0;
    double prev = o.init_scale;
    for (uint64_t t = 1; t <= STEPS; t++) {
        double lr = exec_step(&x[0], t, NULL);
        double scale = scaler_value(&x[0], "grad_scaler.scale");
        skips += scale < prev;
        growths += scale > prev;
        prev = scale;
        trained_values(&x[0], want);
        for (int k = 1; k < 3; k++) {
            double l = exec_step(&x[k], t, NULL);
            char when[64];
            snprintf(when, sizeof when, "step %d", (int)t);
            expect_scaler(&x[k], scale, scaler_value(&x[0], "grad_scaler.growth_tracker"),
                          scaler_value(&x[0], "optimizer.step"), when);
            trained_values(&x[k], got);
            snprintf(when, sizeof when, "%s step %d", exec_names[kinds[k]], (int)t);
            expect_close(when, &l, &lr, 1, 1e-5);
            expect_close(when, got, want, n, 1e-5);
        }
    }
    // both ways were taken: backed off from 2^16, grown back, backed off again
    assert_true(skips >= 3);
    assert_true(growths >= 1);
    for (int k = 0; k < 3; k++) {
        exec_free(&x[k]);
        model_free(m[k]);
    }
    free(want), free(got);
}

// ---- CUDA ----------------------------------------------------------------------

// found_inf and scaler_update alone: the CUDA generator lowers them as
// library calls (the eager CUDA kernels, run in order after the flag), and
// on a GPU the CUDA eager executor gives the CPU's flag.
static void test_cuda_lowers(void **state) {
    (void)state;
    graph *g = graph_new();
    int s = graph_buffer(g, "grad_scaler.scale", DT_F32, 0, NULL, INIT_CONSTANT, 65536);
    int tr = graph_buffer(g, "grad_scaler.growth_tracker", DT_F32, 0, NULL, INIT_ZEROS, 0);
    int st = graph_buffer(g, "optimizer.step", DT_F32, 0, NULL, INIT_ZEROS, 0);
    int x = graph_input(g, "g", DT_F32, 1, (int64_t[]){8});
    int f = graph_op(g, OP_FOUND_INF, 2, (int[]){s, x}, NULL, NULL);
    assert_true(f >= 0);
    assert_true(graph_op(g, OP_SCALER_UPDATE, 4, (int[]){s, tr, st, f},
                         (int64_t[GRAPH_MAX_IA]){2000}, (double[GRAPH_MAX_FA]){2, 0.5}) >= 0);
    graph_output(g, f);
    model *m = model_new(g, "scaler_ops", "test", 1);
    assert_int_equal(model_init_values(m, 1), 0);

    cprog p = {0};
    if (compile_cuda_passes(&p, m, false, NULL) < 0)
        fail_msg("passes: %s", p.err);
    char *cu = compile_codegen_cuda(&p);
    if (!cu)
        fail_msg("codegen_cuda: %s", p.err);
    int externs = 0; // the launch list: "//   <group> - extern"
    for (const char *at = cu; (at = strstr(at, " - extern\n")); at++)
        externs++;
    assert_int_equal(externs, 2);
    free(cu);
    for (int gi = 0; gi < p.ngroups; gi++)
        free(p.groups[gi].nodes);
    free(p.groups), free(p.info), free(p.origin), free(p.src_of);
    graph_free(p.g);

    // eager on the CPU runs them (the flag is 0 for the finite normal input)
    eager *e = eager_new(m);
    tensor *out[1];
    assert_int_equal(eager_run(e, out, NULL), 0);
    assert_true(tensor_f32(out[0])[0] == 0);
    tensor_free(out[0]);
    eager_free(e);

#if TCBENCH_HAVE_CUDA // the CUDA executor exists only with the backend
    eager_cuda *ec;
    char err[400];
    if (eager_cuda_new(m, &(eager_cuda_opts){0}, &ec, err, sizeof err) == 0) { // a GPU
        tensor *gout[1];
        if (eager_cuda_run(ec, NULL) < 0 || eager_cuda_outputs(ec, gout) < 0)
            fail_msg("eager_cuda: %s", eager_cuda_error(ec));
        assert_true(tensor_f32(gout[0])[0] == 0);
        tensor_free(gout[0]);
        eager_cuda_free(ec);
    }
#endif
    model_free(m);
}

// ---- main ----------------------------------------------------------------------

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *f) {
    (void)st, (void)f;
    return flag == FTW_DP ? rmdir(path) : unlink(path);
}

int main(void) {
    const char *t = getenv("TMPDIR");
    snprintf(cache, sizeof cache, "%s/tcbench-test-scaler-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(cache))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_graph),          cmocka_unit_test(test_skip_eager),
        cmocka_unit_test(test_skip_reference), cmocka_unit_test(test_skip_compiled),
        cmocka_unit_test(test_growth),         cmocka_unit_test(test_same_as_unscaled),
        cmocka_unit_test(test_backoff_agrees), cmocka_unit_test(test_cuda_lowers),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    nftw(cache, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return rc;
}
