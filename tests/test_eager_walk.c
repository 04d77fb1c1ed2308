// The eager executors' one graph walk (engine/eager/eager_internal.h), on
// a counting device that computes nothing: what the walk reports is what
// the device launched, the same on every device. Every smoke model, fp32
// and AMP, inference and training:
// - kernels is the device's count, cast_kernels the casts it launched, and
//   both CPU eager and the counting device report the same cast_kernels
//   (the CUDA eager once reported none: it had its own copy of the walk);
// - one kernel per computing op, none for sources and views;
// - an op's inputs are live when it runs, every intermediate is released
//   as CPU eager releases them (the same peak, but for its kernels'
//   scratch), nothing is left after the step;
// - a failing kernel or a missing source fails the step with the node
//   named, and releases everything.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eager/eager.h"
#include "eager/eager_internal.h"
#include "model/model_prepare.h"
#include "model/modeldef.h"
#include "model/suite.h"
#include "test_util.h"

// ---- the counting device ---------------------------------------------------------

typedef struct counter {
    int64_t launched;        // the walk resets it and reports it
    int64_t calls[OP_COUNT]; // kernel calls by op
    int64_t casts;           // cast kernels called
    int64_t copies;          // eager_device.copy calls (reshapes that cannot be views)
    int fail_at;             // the call (from 1) that fails; 0: none
    size_t live, peak;       // bytes of the tensors allocated here and still referenced
    char err[128];
} counter;

static int count_kernel(void *ctx, const graph_node *n, tensor *const *s, tensor *y) {
    counter *c = ctx;
    c->launched++;
    c->calls[n->op]++;
    c->casts += n->op == OP_CAST;
    // an update writes its sources in place and gets no output
    if ((op_kind(n->op) == OPK_UPDATE) != (y == NULL))
        fail_msg("%s: output %p", op_name(n->op), (void *)y);
    for (int j = 0; j < n->nsrc; j++)
        if (!s[j])
            fail_msg("%s: input %d is not live", op_name(n->op), j);
    if (y && (y->dtype != n->dtype || tensor_numel(y) != graph_node_numel(n)))
        fail_msg("%s: the output is not the node's dtype and shape", op_name(n->op));
    if (c->fail_at && c->launched == c->fail_at) {
        snprintf(c->err, sizeof c->err, "told to fail");
        return -1;
    }
    return 0;
}

static tensor *count_alloc(void *ctx, const graph_node *n, int ndim, const int64_t *shape) {
    counter *c = ctx;
    tensor *t = tensor_new_empty(n->dtype, ndim, shape);
    if (!t) {
        snprintf(c->err, sizeof c->err, "out of memory");
        return NULL;
    }
    c->live += t->storage->bytes;
    if (c->live > c->peak)
        c->peak = c->live;
    return t;
}

// The sources' storage is the model's: never the last reference here.
static void count_free(void *ctx, tensor *t) {
    counter *c = ctx;
    if (t && t->storage->refs == 1) {
        assert_true(c->live >= t->storage->bytes);
        c->live -= t->storage->bytes;
    }
    tensor_free(t);
}

static int count_copy(void *ctx, const tensor *x, tensor *y) {
    counter *c = ctx;
    assert_int_equal(tensor_numel(x), tensor_numel(y));
    c->launched++;
    c->copies++;
    return 0;
}

static void count_reset_peak(void *ctx) { ((counter *)ctx)->peak = ((counter *)ctx)->live; }
static size_t count_peak(void *ctx) { return ((counter *)ctx)->peak; }

static eager_kernel_fn count_table[OP_COUNT];

static eager_device count_device(counter *c) {
#define OP(U, l, k, a0, a1) count_table[OP_##U] = EAGER_ENTRY(k, count_kernel);
#include "core/ops.def"
#undef OP
    return (eager_device){.name = "counting",
                          .ctx = c,
                          .kernels = count_table,
                          .alloc = count_alloc,
                          .free = count_free,
                          .copy = count_copy,
                          .reset_peak = count_reset_peak,
                          .peak_bytes = count_peak,
                          .launched = &c->launched,
                          .err = c->err};
}

// ---- the smoke models --------------------------------------------------------------

static model *case_model(const suite_case *sc, const modeldef *md, bool amp, bool train) {
    train_opts o = train_opts_default();
    model_prep mp = {.amp = amp ? DT_F16 : DT_F32, .train = train ? &o : NULL, .seed = 3};
    model *m;
    char err[600];
    enum model_prep_step st =
        model_prepare(md, sc->overrides, sc->noverrides, sc->batch, &mp, &m, err, sizeof err);
    if (st != MODEL_PREP_DONE)
        fail_msg("%s: %s: %s", sc->name, model_prep_step_name(st), err);
    return m;
}

// One CPU eager step of m.
static eager_stats cpu_step(model *m, const char *what) {
    eager *e = eager_new(m);
    assert_non_null(e);
    tensor *o[512];
    assert_true(m->g->noutputs <= 512);
    eager_stats st;
    if (eager_run(e, o, &st) < 0)
        fail_msg("%s: CPU eager: %s", what, eager_error(e));
    for (int k = 0; k < m->g->noutputs; k++)
        tensor_free(o[k]);
    eager_free(e);
    return st;
}

// One step of m on the counting device; the walk's return code.
static int count_step(model *m, counter *c, tensor *const *sources, eager_stats *st, char *err,
                      size_t cap) {
    eager_device d = count_device(c);
    eager_walk w;
    assert_int_equal(eager_walk_init(&w, m->g, false), 0);
    tensor *o[512];
    assert_true(m->g->noutputs <= 512);
    int rc = eager_walk_step(&w, &d, sources, o, st, err, cap);
    for (int k = 0; k < m->g->noutputs; k++) {
        if (rc < 0)
            assert_null(o[k]);
        count_free(c, o[k]);
    }
    eager_walk_free(&w);
    return rc;
}

static void check_model(model *m, const char *what, bool amp, bool train) {
    const graph *g = m->g;
    int64_t nodes[OP_COUNT] = {0};
    for (int i = 0; i < g->n; i++)
        nodes[g->nodes[i].op]++;

    eager_stats cpu = cpu_step(m, what);
    size_t params = tensor_mem_live(); // the model's values: CPU eager counts them in its peak
    counter c = {0};
    eager_stats st = {-1, -1, 0};
    char err[400];
    if (count_step(m, &c, m->values, &st, err, sizeof err) < 0)
        fail_msg("%s: counting device: %s", what, err);
    if (c.live != 0 || tensor_mem_live() != params)
        fail_msg("%s: %zu bytes left after the step", what, c.live);

    // the walk reports what the device launched, casts included
    assert_int_equal(st.kernels, c.launched);
    assert_int_equal(st.cast_kernels, c.casts);
    if (st.cast_kernels != cpu.cast_kernels)
        fail_msg("%s: %lld cast kernels, CPU eager %lld", what, (long long)st.cast_kernels,
                 (long long)cpu.cast_kernels);
    if (amp ? st.cast_kernels == 0 : st.cast_kernels != 0)
        fail_msg("%s: %lld cast kernels", what, (long long)st.cast_kernels);
    // one kernel per computing op; sources and views launch none
    // (contiguous: only on a strided input)
    for (int o = 0; o < OP_COUNT; o++) {
        enum op_kind k = op_kind((enum op)o);
        int64_t want = k == OPK_SOURCE || k == OPK_VIEW ? 0 : nodes[o];
        if (o == OP_CONTIGUOUS ? c.calls[o] > want : c.calls[o] != want)
            fail_msg("%s: %s: %lld kernels for %lld nodes", what, op_name((enum op)o),
                     (long long)c.calls[o], (long long)nodes[o]);
    }
    assert_true(c.copies <= nodes[OP_RESHAPE]);
    // the same allocations, released at the same points, as CPU eager, whose
    // kernels may add scratch (AMP's f16 GEMMs, some backward ones) but
    // none in fp32 inference
    size_t peak = params + st.peak_bytes;
    if (train || amp ? peak > cpu.peak_bytes : peak != cpu.peak_bytes)
        fail_msg("%s: peak %zu bytes over the model's %zu, CPU eager %zu", what, st.peak_bytes,
                 params, cpu.peak_bytes);
}

static void test_walk_counts(void **state) {
    (void)state;
    suite *s = load_smoke_suite();
    for (int ci = 0; ci < s->ncases; ci++) {
        const suite_case *sc = &s->cases[ci];
        modeldef *md;
        diag d;
        if (modeldef_load(sc->model_path, &md, &d) < 0)
            fail_msg("%s: %s", sc->name, d.msg);
        for (int amp = 0; amp <= 1; amp++)
            for (int train = 0; train <= 1; train++) {
                model *m = case_model(sc, md, amp, train);
                char what[128];
                snprintf(what, sizeof what, "%s %s %s", sc->name, amp ? "amp" : "fp32",
                         train ? "train" : "infer");
                check_model(m, what, amp, train);
                model_free(m);
            }
        modeldef_free(md);
    }
    suite_free(s);
}

// A kernel that fails, or a source without a value: -1, the node named,
// everything released.
static void test_walk_failures(void **state) {
    (void)state;
    suite *s = load_smoke_suite();
    modeldef *md;
    diag d;
    if (modeldef_load(s->cases[0].model_path, &md, &d) < 0)
        fail_msg("%s: %s", s->cases[0].name, d.msg);
    model *m = case_model(&s->cases[0], md, true, true);
    size_t live = tensor_mem_live();
    char err[400];
    for (int64_t at = 1; at <= 40; at += 13) {
        counter c = {.fail_at = (int)at};
        assert_int_equal(count_step(m, &c, m->values, NULL, err, sizeof err), -1);
        if (!strstr(err, ": told to fail") || err[0] != '%')
            fail_msg("kernel %lld failing: %s", (long long)at, err);
        assert_int_equal(c.launched, at);
        assert_int_equal(c.live, 0);
        assert_int_equal(tensor_mem_live(), live);
    }
    counter c = {0};
    assert_int_equal(count_step(m, &c, NULL, NULL, err, sizeof err), -1);
    if (!strstr(err, "has no value: call model_init_values first"))
        fail_msg("no sources: %s", err);
    assert_int_equal(c.launched, 0);
    assert_int_equal(tensor_mem_live(), live);
    model_free(m);
    modeldef_free(md);
    suite_free(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_walk_counts),
        cmocka_unit_test(test_walk_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
