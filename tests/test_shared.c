// A shared repeat (`shared: true`, docs/yaml.md): one set of parameters for
// every repetition, as ALBERT's encoder. The graph holds each weight once,
// named without a repetition index, and counted once; its gradient is the
// sum of what each use contributes, checked against the same stack with
// its own copy of the weights per repetition; and a few training steps
// update it alike in eager, compiled and the fp64 reference, in fp32 and
// under AMP.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h> // after the headers it needs

#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "compile/compile.h"
#include "eager/eager.h"
#include "model/model_prepare.h"
#include "model/modeldef.h"
#include "ref/ref.h"

enum { REPS = 3, D = 8 };

static char tmpdir[256];

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *f) {
    (void)st, (void)f;
    return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static int setup(void **state) {
    (void)state;
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/tcbench_shared_XXXXXX", t && *t ? t : "/tmp");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    return nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

// REPS post-norm blocks of width D (a linear, gelu_tanh, a residual and a
// LayerNorm), shared or each with its own weights, under an mse loss.
static modeldef *load_stack(bool shared) {
    char path[400], text[1024];
    snprintf(path, sizeof path, "%s/stack_%d.yaml", tmpdir, shared);
    snprintf(text, sizeof text,
             "name: stack\n"
             "params: {layers: %d}\n"
             "inputs:\n"
             "  x: {shape: [$batch, 5, %d]}\n"
             "  y: {shape: [$batch, 5, %d]}\n"
             "body:\n"
             "  - repeat: $layers\n"
             "    shared: %s\n"
             "    body:\n"
             "      - residual:\n"
             "          - linear: {out: %d}\n"
             "          - gelu_tanh\n"
             "      - layer_norm: {}\n"
             "loss: {mse: {target: y}}\n",
             REPS, D, D, shared ? "true" : "false", D);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_true(fputs(text, f) >= 0);
    assert_int_equal(fclose(f), 0);
    modeldef *md;
    diag d;
    if (modeldef_load(path, &md, &d) < 0)
        fail_msg("%s:%d:%d: %s", path, d.line, d.col, d.msg);
    return md;
}

static model *prepare_amp(const modeldef *md, const train_opts *o, bool keep_grads,
                          enum dtype amp) {
    model *m;
    char err[600];
    enum model_prep_step s = model_prepare(
        md, NULL, 0, 2, &(model_prep){.amp = amp, .train = o, .keep_grads = keep_grads, .seed = 5},
        &m, err, sizeof err);
    if (s != MODEL_PREP_DONE)
        fail_msg("%s: %s", model_prep_step_name(s), err);
    return m;
}

static model *prepare(const modeldef *md, const train_opts *o, bool keep_grads) {
    return prepare_amp(md, o, keep_grads, DT_F32);
}

static int node_named(const model *m, enum op op, const char *name) {
    for (int i = 0; i < m->g->n; i++)
        if (m->g->nodes[i].op == op && m->g->nodes[i].name && !strcmp(m->g->nodes[i].name, name))
            return i;
    return -1;
}

static int uses(const model *m, int id, enum op op) {
    int n = 0;
    for (int i = 0; i < m->g->n; i++)
        for (int k = 0; k < m->g->nodes[i].nsrc; k++)
            n += m->g->nodes[i].op == op && m->g->nodes[i].src[k] == id;
    return n;
}

static int64_t numel(const model *m, int id) { return graph_node_numel(graph_at(m->g, id)); }

static const char *const roles[] = {"residual.linear.weight", "residual.linear.bias",
                                    "layer_norm.weight", "layer_norm.bias"};
enum { NROLES = 4 };

// One set of parameters, named layers.*, each used by every repetition.
static void test_one_set(void **state) {
    (void)state;
    modeldef *ms = load_stack(true), *mp = load_stack(false);
    model *s = prepare(ms, NULL, false), *p = prepare(mp, NULL, false);
    assert_int_equal(graph_param_count(p->g), REPS * graph_param_count(s->g));
    assert_int_equal(graph_param_count(s->g), D * D + 3 * D);
    int w = node_named(s, OP_PARAM, "layers.residual.linear.weight");
    assert_true(w >= 0);
    assert_int_equal(uses(s, w, OP_LINEAR), REPS);
    assert_int_equal(node_named(s, OP_PARAM, "layers.0.residual.linear.weight"), -1);
    assert_true(node_named(p, OP_PARAM, "layers.2.residual.linear.weight") >= 0);
    model_free(s);
    model_free(p);
    modeldef_free(ms);
    modeldef_free(mp);
}

// The shared weight's gradient is the sum of the gradients of the
// per-repetition copies, given the same values and batch (fp64 reference).
static void test_gradient_sums_uses(void **state) {
    (void)state;
    modeldef *ms = load_stack(true), *mp = load_stack(false);
    train_opts o = train_opts_sgd();
    model *s = prepare(ms, &o, true), *p = prepare(mp, &o, true);
    const char *inputs[] = {"x", "y"};
    for (int k = 0; k < 2; k++) {
        int a = node_named(s, OP_INPUT, inputs[k]), b = node_named(p, OP_INPUT, inputs[k]);
        memcpy(tensor_f32(p->values[b]), tensor_f32(s->values[a]),
               (size_t)numel(s, a) * sizeof(float));
    }
    for (int r = 0; r < NROLES; r++) {
        char name[128];
        snprintf(name, sizeof name, "layers.%s", roles[r]);
        int a = node_named(s, OP_PARAM, name);
        assert_true(a >= 0);
        for (int rep = 0; rep < REPS; rep++) {
            snprintf(name, sizeof name, "layers.%d.%s", rep, roles[r]);
            int b = node_named(p, OP_PARAM, name);
            assert_true(b >= 0);
            memcpy(tensor_f32(p->values[b]), tensor_f32(s->values[a]),
                   (size_t)numel(s, a) * sizeof(float));
        }
    }
    double *os[GRAPH_MAX_OUTPUTS] = {0}, *op[GRAPH_MAX_OUTPUTS] = {0};
    char err[600];
    if (ref_run(s, os, err, sizeof err) < 0 || ref_run(p, op, err, sizeof err) < 0)
        fail_msg("ref_run: %s", err);
    assert_true(fabs(os[0][0] - op[0][0]) <= 1e-12 * fabs(op[0][0]));
    // outputs: the loss, then one gradient per parameter in graph order
    int gs = 1;
    for (int i = 0; i < s->g->n; i++) {
        if (s->g->nodes[i].op != OP_PARAM)
            continue;
        const char *role = s->g->nodes[i].name + strlen("layers.");
        double big = 0;
        for (int64_t j = 0; j < numel(s, i); j++) {
            double sum = 0;
            int gp = 1;
            for (int b = 0; b < p->g->n; b++) {
                const graph_node *n = &p->g->nodes[b];
                if (n->op != OP_PARAM)
                    continue;
                if (!strcmp(strchr(n->name + strlen("layers."), '.') + 1, role))
                    sum += op[gp][j];
                gp++;
            }
            if (fabs(os[gs][j] - sum) > 1e-9 * (1 + fabs(sum)))
                fail_msg("%s[%lld]: shared gradient %.12g, the uses' sum %.12g",
                         s->g->nodes[i].name, (long long)j, os[gs][j], sum);
            big = fmax(big, fabs(sum));
        }
        assert_true(big > 0); // each use contributes: not a zero gradient
        gs++;
    }
    for (int k = 0; k < s->g->noutputs; k++)
        free(os[k]);
    for (int k = 0; k < p->g->noutputs; k++)
        free(op[k]);
    model_free(s);
    model_free(p);
    modeldef_free(ms);
    modeldef_free(mp);
}

// Three SGD steps from the same start: the shared weight moves, and eager
// and compiled leave it where the fp64 reference does; under AMP (f16, the
// weight cast once a step and its 3 uses' gradients summed in f16, as
// PyTorch's autocast cache does) within f16's rounding.
static void training_updates(enum dtype amp, double rtol) {
    enum { STEPS = 3 };
    modeldef *md = load_stack(true);
    train_opts o = train_opts_sgd();
    o.lr = 0.1;
    model *me = prepare_amp(md, &o, false, amp), *mc = prepare_amp(md, &o, false, amp),
          *mr = prepare_amp(md, &o, false, amp);
    int w = node_named(me, OP_PARAM, "layers.residual.linear.weight");
    assert_true(w >= 0);
    if (amp != DT_F32) // one cast of the weight a step, read by every use
        assert_int_equal(uses(me, w, OP_CAST), 1);
    int64_t n = numel(me, w);
    float *start = malloc((size_t)n * sizeof *start);
    assert_non_null(start);
    memcpy(start, tensor_f32(me->values[w]), (size_t)n * sizeof *start);
    char err[600];
    ref_session *rs = ref_session_new(mr, err, sizeof err);
    if (!rs)
        fail_msg("ref_session_new: %s", err);
    eager *e = eager_new(me);
    char cache[300];
    snprintf(cache, sizeof cache, "%s/cache_%d", tmpdir, (int)amp);
    assert_int_equal(mkdir(cache, 0700), 0);
    compile_opts co = compile_opts_default();
    co.cache_dir = cache;
    compiled *c;
    if (compile_model(mc, &co, &c, err, sizeof err) < 0)
        fail_msg("compile: %s", err);
    for (int t = 1; t <= STEPS; t++) {
        double *ro[1];
        tensor *eo[1], *co_out[1];
        if (ref_session_run(rs, (uint64_t)t, ro, err, sizeof err) < 0)
            fail_msg("reference: %s", err);
        eager_set_step(e, (uint64_t)t);
        if (eager_run(e, eo, NULL) < 0)
            fail_msg("eager: %s", eager_error(e));
        compiled_set_step(c, (uint64_t)t);
        if (compiled_run(c, co_out, NULL) < 0)
            fail_msg("compiled: %s", compiled_error(c));
        free(ro[0]);
        tensor_free(eo[0]);
        tensor_free(co_out[0]);
    }
    const double *ref = ref_session_source(rs, w);
    const float *we = tensor_f32(me->values[w]), *wc = tensor_f32(mc->values[w]);
    double moved = 0;
    for (int64_t j = 0; j < n; j++) {
        moved = fmax(moved, fabs(ref[j] - start[j]));
        double tol = rtol * (1 + fabs(ref[j]));
        if (fabs(we[j] - ref[j]) > tol || fabs(wc[j] - ref[j]) > tol)
            fail_msg("weight[%lld] after %d steps: fp64 %.8g, eager %.8g, compiled %.8g",
                     (long long)j, STEPS, ref[j], we[j], wc[j]);
    }
    if (!(moved > 1e-3))
        fail_msg("the shared weight moved by %g in %d steps: training did not update it", moved,
                 STEPS);
    compiled_free(c);
    eager_free(e);
    ref_session_free(rs);
    free(start);
    model_free(me);
    model_free(mc);
    model_free(mr);
    modeldef_free(md);
}

static void test_training_updates(void **state) {
    (void)state;
    training_updates(DT_F32, 1e-4);
}

static void test_training_updates_amp(void **state) {
    (void)state;
    training_updates(DT_F16, 1e-2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_set),
        cmocka_unit_test(test_gradient_sums_uses),
        cmocka_unit_test(test_training_updates),
        cmocka_unit_test(test_training_updates_amp),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
