// The memory planners (eager_plan_peak in engine/eager/eager.h,
// compile_plan_memory in engine/compile/compile.h) against what a real step
// measures, and the allocator's cap (tensor_mem_set_limit) they predict:
// - eager, every smoke model: the planned peak is the peak a real CPU eager
//   step reports, byte for byte where its kernels allocate no scratch of
//   their own (fp32 inference); elsewhere never above it, and the gap is
//   the kernels' scratch (AMP's f32 copies of f16 GEMM operands, a
//   backward GEMM's contiguous copy of a strided operand);
// - compiled: the planned arena and peak are the real program's;
// - a cap one byte below the planned peak fails eager's step at the node the
//   plan names, a cap at the peak lets it run; the compiled mode refuses an
//   arena that does not fit beside the sources before compiling anything;
// - a full-size llama (seq 2048) plans both modes from the graph alone.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/files.h"
#include "bench/measure.h"
#include "compile/compile.h"
#include "eager/eager.h"
#include "model/model_prepare.h"
#include "model/modeldef.h"
#include "model/suite.h"
#include "test_util.h"

static const char *const planned_cases[] = {"mlp", "gpt2", "llama"};

static const suite_case *find_case(const suite *s, const char *name) {
    for (int i = 0; i < s->ncases; i++)
        if (strcmp(s->cases[i].name, name) == 0)
            return &s->cases[i];
    fail_msg("no case %s in the smoke suite", name);
    return NULL;
}

// The smoke case `name` prepared; values drawn unless no_values.
static model *case_model(const suite *s, const char *name, bool amp, bool train, bool no_values) {
    const suite_case *sc = find_case(s, name);
    modeldef *md;
    diag d;
    if (modeldef_load(sc->model_path, &md, &d) < 0)
        fail_msg("%s: %s", sc->name, d.msg);
    train_opts o = train_opts_default();
    model_prep mp = {.amp = amp ? DT_F16 : DT_F32,
                     .train = train ? &o : NULL,
                     .seed = 5,
                     .no_values = no_values};
    model *m;
    char err[600];
    enum model_prep_step st =
        model_prepare(md, sc->overrides, sc->noverrides, sc->batch, &mp, &m, err, sizeof err);
    modeldef_free(md);
    if (st != MODEL_PREP_DONE)
        fail_msg("%s: %s: %s", sc->name, model_prep_step_name(st), err);
    return m;
}

static eager_plan_figures eager_plan(const model *m, const char *what) {
    eager_plan_figures f;
    char err[400];
    if (eager_plan_peak(m->g, &f, err, sizeof err) < 0)
        fail_msg("%s: eager plan: %s", what, err);
    return f;
}

// One CPU eager step: 0 with st set, or -1 with err; outputs dropped.
static int eager_step(const model *m, eager_stats *st, char *err, size_t cap) {
    eager *e = eager_new(m);
    assert_non_null(e);
    tensor *o[512];
    assert_true(m->g->noutputs <= 512);
    int rc = eager_run(e, o, st);
    if (rc < 0)
        snprintf(err, cap, "%s", eager_error(e));
    for (int k = 0; rc == 0 && k < m->g->noutputs; k++)
        tensor_free(o[k]);
    eager_free(e);
    return rc;
}

static void test_eager_planned(void **state) {
    (void)state;
    suite *s = load_smoke_suite();
    for (int ci = 0; ci < s->ncases; ci++)
        for (int amp = 0; amp <= 1; amp++)
            for (int train = 0; train <= 1; train++) {
                const char *name = s->cases[ci].name;
                char what[96];
                snprintf(what, sizeof what, "%s %s %s", name, amp ? "amp" : "fp32",
                         train ? "train" : "infer");
                model *m = case_model(s, name, amp, train, false);
                eager_plan_figures f = eager_plan(m, what);
                // the model's values are all that is live: the planned sources
                if (f.sources_bytes != tensor_mem_live())
                    fail_msg("%s: sources planned %zu bytes, %zu live", what, f.sources_bytes,
                             tensor_mem_live());
                eager_stats st;
                char err[400];
                if (eager_step(m, &st, err, sizeof err) < 0)
                    fail_msg("%s: eager: %s", what, err);
                print_message("%-18s eager planned %9zu measured %9zu (%+zd) at %%%d\n", what,
                              f.peak_bytes, st.peak_bytes, (ssize_t)(st.peak_bytes - f.peak_bytes),
                              f.peak_node);
                // AMP's kernels add f32 scratch, and in the backward a GEMM
                // copies a strided operand (one more kernel and its bytes)
                bool exact = !amp && !train;
                if ((exact ? f.peak_bytes != st.peak_bytes : f.peak_bytes > st.peak_bytes) ||
                    (exact ? f.kernels != st.kernels : f.kernels > st.kernels))
                    fail_msg("%s: planned peak %zu bytes and %lld kernels, measured %zu and %lld",
                             what, f.peak_bytes, (long long)f.kernels, st.peak_bytes,
                             (long long)st.kernels);
                assert_true(f.peak_node >= 0 && f.peak_node < m->g->n);
                assert_int_equal(f.activation_bytes, f.peak_bytes - f.sources_bytes);
                model_free(m);
            }
    suite_free(s);
}

static size_t round_4k(size_t bytes) { return (bytes / 4096 + 1) * 4096; }

// Another allocator's rounding: every tensor counts for its rounded size.
static void test_eager_rounding(void **state) {
    (void)state;
    suite *s = load_smoke_suite();
    model *m = case_model(s, "gpt2", false, true, true);
    eager_plan_figures f = eager_plan(m, "gpt2"), r;
    char err[400];
    if (eager_plan_peak_rounded(m->g, round_4k, &r, err, sizeof err) < 0)
        fail_msg("gpt2 rounded to 4 KiB: %s", err);
    size_t sources = 0;
    for (int i = 0; i < m->g->n; i++)
        if (op_kind(m->g->nodes[i].op) == OPK_SOURCE)
            sources += round_4k(graph_node_bytes(&m->g->nodes[i]));
    assert_int_equal(r.sources_bytes, sources);
    assert_true(r.peak_bytes > f.peak_bytes && r.peak_bytes % 4096 == 0);
    assert_int_equal(r.kernels, f.kernels);
    model_free(m);
    suite_free(s);
}

// A cap one byte below the planned peak fails the step where the plan puts
// the peak, named in the message; the cap at the peak lets it run.
static void test_eager_cap(void **state) {
    (void)state;
    suite *s = load_smoke_suite();
    model *m = case_model(s, "llama", false, false, false);
    eager_plan_figures f = eager_plan(m, "llama");
    eager_stats st;
    char err[400], at[32];
    // what is live now (the model's values, and anything a failed test left)
    // and the step's planned activations
    size_t peak = tensor_mem_live() + f.activation_bytes, live = tensor_mem_live();
    tensor_mem_set_limit(peak - 1);
    int rc = eager_step(m, &st, err, sizeof err);
    int64_t refused = tensor_mem_refusals();
    tensor_mem_set_limit(0);
    assert_int_equal(rc, -1);
    assert_int_equal(refused, 1);
    snprintf(at, sizeof at, "%%%d %s: ", f.peak_node, op_name(m->g->nodes[f.peak_node].op));
    if (strncmp(err, at, strlen(at)) != 0 || !strstr(err, "out of memory: needs ") ||
        !strstr(err, "live (--memory-limit)"))
        fail_msg("a cap below the peak at %s: %s", at, err);
    assert_int_equal(tensor_mem_live(), live); // nothing left behind

    tensor_mem_set_limit(peak);
    rc = eager_step(m, &st, err, sizeof err);
    refused = tensor_mem_refusals();
    tensor_mem_set_limit(0);
    if (rc < 0)
        fail_msg("a cap at the planned peak: %s", err);
    assert_int_equal(st.peak_bytes, peak);
    assert_int_equal(refused, 0);
    model_free(m);
    suite_free(s);
}

// *state: a fresh kernel cache directory.
static int cache_setup(void **state) {
    char *d = malloc(600), err[200];
    if (!d || base_mkdtemp("tcbench-test-memplan", d, 600, err, sizeof err) < 0) {
        free(d);
        return -1;
    }
    *state = d;
    return 0;
}

static int cache_teardown(void **state) {
    bench_remove_tree(*state);
    free(*state);
    return 0;
}

static compile_memory_figures compiled_plan(const model *m, const compile_opts *o,
                                            const char *what) {
    compile_memory_figures f;
    char err[600];
    if (compile_plan_memory(m, o, &f, err, sizeof err) < 0)
        fail_msg("%s: compiled plan: %s", what, err);
    return f;
}

// Planned against a real program.
static void test_compiled_planned(void **state) {
    suite *s = load_smoke_suite();
    compile_opts o = compile_opts_default();
    o.fusion = o.capture = true;
    o.cache_dir = *state;
    for (size_t ci = 0; ci < sizeof planned_cases / sizeof *planned_cases; ci++)
        for (int train = 0; train <= 1; train++) {
            char what[96];
            snprintf(what, sizeof what, "%s fp32 %s", planned_cases[ci], train ? "train" : "infer");
            model *m = case_model(s, planned_cases[ci], false, train, false);
            compile_memory_figures f = compiled_plan(m, &o, what);
            assert_int_equal(f.peak_bytes, f.sources_bytes + f.arena_bytes);
            compiled *c;
            char err[600];
            if (compile_model(m, &o, &c, err, sizeof err) < 0)
                fail_msg("%s: compile_model: %s", what, err);
            tensor *out[512];
            compiled_stats st;
            if (compiled_run(c, out, &st) < 0)
                fail_msg("%s: compiled_run: %s", what, compiled_error(c));
            for (int k = 0; k < m->g->noutputs; k++)
                tensor_free(out[k]);
            print_message("%-18s compiled planned arena %8zu peak %9zu, measured %8zu %9zu\n", what,
                          f.arena_bytes, f.peak_bytes, st.arena_bytes, st.peak_bytes);
            assert_int_equal(f.arena_bytes, st.arena_bytes);
            assert_int_equal(f.peak_bytes, st.peak_bytes);
            assert_int_equal(f.kernels, st.kernels);
            compiled_free(c);
            model_free(m);
        }
    suite_free(s);
}

// An arena that does not fit beside the sources: refused before anything
// is generated, in one line naming the cap; one that fits compiles. Fused
// mode's step fails at the first kernel output past the cap.
static void test_compiled_cap(void **state) {
    suite *s = load_smoke_suite();
    model *m = case_model(s, "gpt2", false, false, false);
    compile_opts o = compile_opts_default();
    o.fusion = o.capture = true;
    o.cache_dir = *state;
    compile_memory_figures f = compiled_plan(m, &o, "gpt2");
    tensor_mem_set_limit(f.peak_bytes - 1);
    compiled *c = NULL;
    char err[600];
    int rc = compile_model(m, &o, &c, err, sizeof err);
    int64_t refused = tensor_mem_refusals();
    tensor_mem_set_limit(0);
    assert_int_equal(rc, -1);
    assert_int_equal(refused, 1);
    assert_null(c);
    if (strncmp(err, "out of memory: the arena needs ", 31) != 0 ||
        !strstr(err, "(--memory-limit)") || strchr(err, '\n'))
        fail_msg("refused arena: %s", err);
    // at the peak it fits (the program's constants come from the allocator:
    // the values, rounded, leave them room under a cap this close)
    tensor_mem_set_limit(f.peak_bytes);
    rc = compile_model(m, &o, &c, err, sizeof err);
    refused = tensor_mem_refusals();
    tensor_mem_set_limit(0);
    if (rc < 0)
        fail_msg("gpt2 under a cap at its planned peak: %s", err);
    assert_int_equal(refused, 0);
    compiled_free(c);

    // fused mode allocates each kernel's output: the cap fails the step
    o.capture = false;
    if (compile_model(m, &o, &c, err, sizeof err) < 0)
        fail_msg("gpt2 fused: %s", err);
    tensor_mem_set_limit(tensor_mem_live() + 1);
    tensor *out[64];
    assert_true(m->g->noutputs <= 64);
    rc = compiled_run(c, out, NULL);
    refused = tensor_mem_refusals();
    tensor_mem_set_limit(0);
    assert_int_equal(rc, -1);
    assert_int_equal(refused, 1);
    if (strncmp(compiled_error(c), "out of memory: %", 16) != 0 ||
        !strstr(compiled_error(c), "(--memory-limit)"))
        fail_msg("gpt2 fused under a cap: %s", compiled_error(c));
    compiled_free(c);
    model_free(m);
    suite_free(s);
}

// models/llama.yaml at its defaults (TinyLlama-1.1B, seq 2048), batch 1,
// planned without values in both modes: its parameters at 4 bytes each in
// the sources, and seconds at most.
static void test_full_size(void **state) {
    (void)state;
    const char *root = getenv("TCBENCH_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/models/llama.yaml", root ? root : ".");
    modeldef *md;
    diag d;
    if (modeldef_load(path, &md, &d) < 0)
        fail_msg("%s: %s", path, d.msg);
    model_prep mp = {.amp = DT_F32, .no_values = true};
    model *m;
    char err[600];
    double t0 = base_now();
    if (model_prepare(md, NULL, 0, 1, &mp, &m, err, sizeof err) != MODEL_PREP_DONE)
        fail_msg("llama: %s", err);
    modeldef_free(md);
    double t1 = base_now();
    size_t live = tensor_mem_live();
    eager_plan_figures e = eager_plan(m, "llama full size");
    double t2 = base_now();
    compile_opts o = compile_opts_default();
    o.fusion = o.capture = true;
    compile_memory_figures c = compiled_plan(m, &o, "llama full size");
    double t3 = base_now();
    assert_int_equal(tensor_mem_live(), live); // nothing allocated for the graph's tensors
    int64_t params = 0, inputs = 0;
    for (int i = 0; i < m->g->n; i++) {
        const graph_node *n = &m->g->nodes[i];
        if (n->op == OP_PARAM)
            params += graph_node_numel(n);
        else if (op_kind(n->op) == OPK_SOURCE)
            inputs += (int64_t)graph_node_bytes(n);
    }
    assert_true(params > 1000000000); // TinyLlama-1.1B
    assert_int_equal(c.sources_bytes, (size_t)params * 4 + (size_t)inputs);
    assert_true(e.sources_bytes >= c.sources_bytes);
    assert_true(e.peak_bytes > e.sources_bytes && c.peak_bytes > c.sources_bytes);
    print_message(
        "llama full size: %lld parameters; build %.2f s; eager plan %.2f s: peak %.3f "
        "GiB at %%%d; compiled plan %.2f s: arena %.3f GiB, peak %.3f GiB (%zu, %zu bytes)\n",
        (long long)params, t1 - t0, t2 - t1, (double)e.peak_bytes / (1 << 30), e.peak_node, t3 - t2,
        (double)c.arena_bytes / (1 << 30), (double)c.peak_bytes / (1 << 30), e.peak_bytes,
        c.peak_bytes);
    assert_true(t3 - t1 < 30); // seconds, with room for a loaded machine
    model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_eager_planned),
        cmocka_unit_test(test_eager_rounding),
        cmocka_unit_test(test_eager_cap),
        cmocka_unit_test_setup_teardown(test_compiled_planned, cache_setup, cache_teardown),
        cmocka_unit_test_setup_teardown(test_compiled_cap, cache_setup, cache_teardown),
        cmocka_unit_test(test_full_size),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
