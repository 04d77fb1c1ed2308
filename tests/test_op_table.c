// The op table (op_table.h) on every executor against the fp64 reference,
// as ggml's test-backend-ops: each row of op_cases, and each of its f16 and
// bf16 variants, runs in
//   CPU eager         one case a graph: every output element within the
//                     case's tolerance (|got - ref| <= atol + rtol |ref|),
//                     the kernels launched (exactly, where the row counts
//                     them), peak bytes, the same bits from a second step;
//                     a 16-bit variant also against the f32 step rounded
//   CPU compiled, fused, captured (compile.h through bench/exec.h)
//                     the cases batched into a few graphs, so the C compiler
//                     runs a few times, not once a case; a batch that fails
//                     to compile or run is retried case by case to name the
//                     culprit
//   CUDA eager and compiled, fused, captured, where the registry's CUDA probe finds a GPU
//   NVRTC             without a GPU too: the generated CUDA of every batch,
//                     fused (compiled, fused) and not (captured), compiled
//                     for sm_80 (the CUDA modes take f32 and f16, no bf16)
// A row's known_fail leaves it out of a mode, with the reason by the row. A
// last check fails when an op of ops.def has no case (ops_uncovered, itself
// tested on a made-up coverage). The tests that are not rows follow:
// op_table_extra.c (eager and reference errors, several steps of training
// ops, the GPU's smoke models) and op_table_half.c (16-bit conversions,
// oneDNN's bf16 paths, an AMP training step).
#include "tcbench_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "base/clock.h"
#include "bench/exec.h"
#include "compile/codegen_cuda.h"
#include "eager/eager.h"
#include "op_table.h"
#include "ref/ref.h"
#if TCBENCH_HAVE_CUDA
#include "backend/cuda/cuda_nvrtc.h"
#endif

// ---- models of cases ----------------------------------------------------------

void op_values_shape(model *m) {
    const graph *g = m->g;
    for (int i = 0; i < g->n; i++) {
        const graph_node *n = &g->nodes[i];
        if (n->op != OP_INPUT || !n->name)
            continue;
        bool pos = strcmp(n->name, "pos") == 0, wide = strcmp(n->name, "wide") == 0;
        if (!pos && !wide)
            continue;
        tensor *t = m->values[i];
        int64_t idx[TENSOR_MAX_DIMS] = {0};
        for (int64_t k = 0; k < tensor_numel(t); k++) {
            double v = tensor_get(t, idx);
            tensor_set(t, idx, pos ? fabs(v) + 0.1 : 4 * v);
            for (int d = t->ndim - 1; d >= 0 && ++idx[d] == t->shape[d]; d--)
                idx[d] = 0;
        }
    }
}

// m of g with the values every case draws
static model *values_model(graph *g, const char *name) {
    model *m = model_new(g, name, "test", 1);
    assert_non_null(m);
    assert_int_equal(model_init_values(m, 1234), 0);
    op_values_shape(m);
    return m;
}

model *op_case_model(const op_case *tc) {
    graph *g = graph_new();
    assert_non_null(g);
    if (tc->build(g, tc) < 0)
        fail_msg("%s: building the graph failed: %s", tc->name, graph_error(g));
    return values_model(g, tc->name);
}

bool op_have_gpu(void) {
    static int have = -1;
    if (have < 0) {
        char why[512];
        have = exec_device_probe("cuda", why, sizeof why) == 0;
        if (!have)
            printf("no GPU, the CUDA executors are skipped: %s\n", why);
    }
    return have;
}

// ---- runs: a case in one dtype ------------------------------------------------

typedef struct op_run {
    op_case c;      // the row, dt set to the variant's
    bool half;      // a 16-bit variant of a row with .half
    unsigned known; // modes it is known to fail in
    char name[96];
} op_run;

static op_run *runs;
static int nruns;

typedef struct tol {
    double rtol, atol;
    bool scaled; // atol times max(1, max |ref|) over the output
} tol;

static tol run_tol(const op_run *r) {
    if (r->half && (r->c.rtol16 || r->c.atol16))
        return (tol){r->c.rtol16, r->c.atol16, false};
    if (r->half && r->c.kernels == 1) { // f16's rounding is 2^-11 relative, bf16's 2^-8
        double u = r->c.dt == DT_BF16 ? 8e-3 : 1e-3;
        return (tol){2 * u, u, true};
    }
    if (r->half)
        return (tol){2e-3, 2e-3, false};
    bool low = dtype_is_half(r->c.dt);
    return (tol){r->c.rtol ? r->c.rtol
                 : low     ? 2e-3
                           : 1e-5,
                 r->c.atol ? r->c.atol
                 : low     ? 2e-3
                           : 1e-6,
                 false};
}

// Every element: |got - ref| <= atol + rtol |ref| (both NaN counts as
// equal). Returns how many are not.
static int compare(const char *what, const char *mode, int k, const tensor *t, const double *ref,
                   tol tl) {
    int64_t n = tensor_numel(t);
    double scale = 1;
    for (int64_t i = 0; tl.scaled && i < n; i++)
        scale = fmax(scale, fabs(ref[i]));
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = tensor_get_flat(t, i), r = ref[i];
        if ((isnan(e) && isnan(r)) || fabs(e - r) <= tl.atol * scale + tl.rtol * fabs(r))
            continue;
        if (bad++ < 5)
            print_error("%s (%s): output %d element %lld: %.9g, reference %.9g (diff %.3g)\n", what,
                        mode, k, (long long)i, e, r, fabs(e - r));
    }
    return bad;
}

static void free_ref(const graph *g, double **ref) {
    for (int i = 0; i < g->n; i++)
        free(ref[i]);
    free(ref);
}

static double **reference(const model *m, const char *name) {
    char err[256];
    double **ref = ref_run_all(m, err, sizeof err);
    if (!ref)
        fail_msg("%s: ref_run_all failed: %s", name, err);
    return ref;
}

// Updates and batch norm in training write their sources: a second step
// starts from other values.
static bool writes_sources(const graph *g) {
    for (int i = 0; i < g->n; i++) {
        const graph_node *n = &g->nodes[i];
        if (op_kind(n->op) == OPK_UPDATE || (n->op == OP_BATCH_NORM && n->ia[0]))
            return true;
    }
    return false;
}

// The CUDA kernels of these scatter their gradient with f32 atomics, as
// PyTorch's do (cuda_grid_sample.cu): two steps agree within the tolerance,
// not bit for bit.
static bool cuda_atomic_sums(const graph *g) {
    for (int i = 0; i < g->n; i++)
        if (g->nodes[i].op == OP_GRID_SAMPLE_GRAD || g->nodes[i].op == OP_UPSAMPLE_BILINEAR_GRAD)
            return true;
    return false;
}

static size_t padded(size_t bytes) { return (bytes + 63) & ~(size_t)63; }

// The step's peak holds the sources and each computed output at least, and
// never more than every node's buffer twice over (internal copies); an f16
// GEMM (qlinear too) also holds f32 copies of its operands and result (twice
// their f16 bytes, each rounded up to the 64-byte allocation), as does the
// CPU's 16-bit unfold and fold (they run on f32 copies).
static void check_peak(const op_run *r, const graph *g, tensor **outs, size_t live, size_t peak) {
    size_t out_bytes = 0, all_bytes = 0;
    for (int i = 0; i < g->n; i++)
        if (op_kind(g->nodes[i].op) != OPK_SOURCE)
            all_bytes += padded(graph_node_bytes(&g->nodes[i]));
    for (int k = 0; k < g->noutputs; k++) {
        const graph_node *n = &g->nodes[g->outputs[k]];
        if (op_kind(n->op) != OPK_VIEW && op_kind(n->op) != OPK_SOURCE && n->op != OP_CONTIGUOUS &&
            op_kind(n->op) != OPK_UPDATE) // an update's value is its parameter
            out_bytes += tensor_nbytes(outs[k]);
    }
    bool gemm = op_kind(r->c.op) == OPK_GEMM || r->c.op == OP_QLINEAR || r->c.op == OP_UNFOLD ||
                r->c.op == OP_FOLD;
    size_t scratch = dtype_is_half(r->c.dt) && gemm ? 2 * live + 2 * all_bytes + 4 * 64 : 0;
    if (peak < live + out_bytes || peak > live + 2 * all_bytes + scratch)
        fail_msg("%s: peak %zu bytes; live before %zu, outputs %zu, all nodes %zu", r->name, peak,
                 live, out_bytes, all_bytes);
}

// dst's sources take src's values: the same values, widened where src
// holds a 16-bit float and dst f32
static void copy_values(const model *src, model *dst) {
    for (int i = 0; i < src->g->n; i++) {
        const tensor *a = src->values[i];
        tensor *b = dst->values[i];
        if (!a)
            continue;
        assert_non_null(b);
        assert_int_equal(tensor_numel(a), tensor_numel(b));
        if (a->dtype == b->dtype) {
            memcpy(tensor_data(b), tensor_data(a), tensor_nbytes(a));
            continue;
        }
        assert_true(dtype_is_half(a->dtype) && b->dtype == DT_F32);
        const uint16_t *h = tensor_data(a);
        for (int64_t k = 0; k < tensor_numel(a); k++)
            tensor_f32(b)[k] = dtype_half_to_f32(a->dtype, h[k]);
    }
}

// A 16-bit variant against the same graph in f32 on the same values: a
// kernel that converts to f32, runs its f32 loop and rounds once gives the
// rounded f32 result exactly; one with its own 16-bit loop (own, and bf16
// GEMMs and convolutions, which may run in oneDNN's bf16 primitives) within
// the format's rounding.
static void check_against_f32(const op_run *r, const model *m16, tensor **y16) {
    op_case c32 = r->c;
    c32.dt = DT_F32;
    model *m32 = op_case_model(&c32);
    copy_values(m16, m32);
    eager *e32 = eager_new(m32);
    assert_non_null(e32);
    tensor **y32 = calloc((size_t)m32->g->noutputs, sizeof *y32);
    assert_non_null(y32);
    if (eager_run(e32, y32, NULL) < 0)
        fail_msg("%s: f32 eager_run failed: %s", r->name, eager_error(e32));
    enum dtype dt = r->c.dt;
    double u = dt == DT_BF16 ? 8e-3 : 1e-3;
    enum op o = r->c.op;
    bool own = r->c.own || (dt == DT_BF16 && (o == OP_MATMUL || o == OP_LINEAR || o == OP_CONV2D ||
                                              o == OP_CONV_TRANSPOSE2D));
    int bad = 0;
    for (int k = 0; k < m32->g->noutputs; k++) {
        assert_true(tensor_is_contiguous(y16[k]) && tensor_is_contiguous(y32[k]));
        double scale = 1;
        for (int64_t i = 0; i < tensor_numel(y32[k]); i++)
            scale = fmax(scale, fabs(tensor_get_flat(y32[k], i)));
        for (int64_t i = 0; i < tensor_numel(y16[k]); i++) {
            float v = tensor_f32(y32[k])[i];
            double want =
                dtype_is_half(y16[k]->dtype)
                    ? dtype_half_to_f32(y16[k]->dtype, dtype_f32_to_half(y16[k]->dtype, v))
                    : v;
            double got = tensor_get_flat(y16[k], i);
            bool same = own ? fabs(got - want) <= u * (fabs(want) + scale)
                            : got == want || (isnan(got) && isnan(want));
            if (!same && bad++ < 5)
                print_error("%s: element %lld: %.9g, the f32 step rounded %.9g\n", r->name,
                            (long long)i, got, want);
        }
        tensor_free(y32[k]);
    }
    free(y32);
    eager_free(e32);
    model_free(m32);
    if (bad)
        fail_msg("%s: %d elements off the f32 step", r->name, bad);
}

// ---- eager: one case a graph ----------------------------------------------------

static void run_cpu_eager(const op_run *r) {
    model *m = op_case_model(&r->c);
    const graph *g = m->g;
    eager *e = eager_new(m);
    assert_non_null(e);
    int no = g->noutputs;
    tensor **outs = calloc((size_t)no, sizeof *outs), **again = calloc((size_t)no, sizeof *again);
    assert_true(outs && again);
    eager_stats st, st2;
    // live before the step: the sources (and whatever an earlier failed
    // case leaked when its assertion jumped out)
    size_t live = tensor_mem_live();
    // the reference first: update ops change the model's values in eager
    double **ref = reference(m, r->name);
    if (eager_run(e, outs, &st) < 0)
        fail_msg("%s: eager_run failed: %s", r->name, eager_error(e));
    int bad = 0;
    for (int k = 0; k < no; k++) {
        const graph_node *n = &g->nodes[g->outputs[k]];
        assert_int_equal(outs[k]->dtype, n->dtype);
        assert_int_equal(outs[k]->ndim, n->ndim);
        assert_memory_equal(outs[k]->shape, n->shape, (size_t)n->ndim * sizeof n->shape[0]);
        bad += compare(r->name, "eager", k, outs[k], ref[g->outputs[k]], run_tol(r));
    }
    if (bad)
        fail_msg("%s: %d elements differ from the reference", r->name, bad);
    if (r->c.kernels >= 0 ? st.kernels != r->c.kernels : st.kernels <= 0)
        fail_msg("%s: %lld kernels launched, expected %d", r->name, (long long)st.kernels,
                 r->c.kernels);
    // (a 16-bit kernel may widen its operands into f32 scratch)
    if (r->c.kernels >= 0 && !r->half)
        check_peak(r, g, outs, live, st.peak_bytes);
    if (r->half && r->c.kernels == 1)
        check_against_f32(r, m, outs);
    // a second step: same kernels, same bits (cached primitives, no state),
    // unless the first moved the sources
    if (eager_run(e, again, &st2) < 0)
        fail_msg("%s: second eager_run failed: %s", r->name, eager_error(e));
    assert_int_equal(st2.kernels, st.kernels);
    bool moved = writes_sources(g);
    for (int k = 0; k < no; k++) {
        for (int64_t i = 0; !moved && i < tensor_numel(outs[k]); i++) {
            double a = tensor_get_flat(outs[k], i), b = tensor_get_flat(again[k], i);
            if (!(a == b || (isnan(a) && isnan(b))))
                fail_msg("%s: output %d element %lld changed between steps", r->name, k,
                         (long long)i);
        }
        tensor_free(outs[k]);
        tensor_free(again[k]);
    }
    free(outs);
    free(again);
    free_ref(g, ref);
    eager_free(e);
    model_free(m);
}

// One step of x; outputs host tensors (caller frees).
static int exec_step(bench_exec *x, tensor **outs, bench_exec_stats *st, char *err, size_t cap) {
    bench_exec_set_step(x, 1);
    if (bench_exec_run(x, outs, st) == 0)
        return 0;
    snprintf(err, cap, "%s: %s", bench_exec_what(x), bench_exec_error(x));
    return -1;
}

// The GPU's eager executor: the outputs, kernels counted, peak bytes
// reported, a second step the same (unless the first moved the sources).
static void run_cuda_eager(const op_run *r) {
    model *m = op_case_model(&r->c);
    const graph *g = m->g;
    char err[600];
    double **ref = reference(m, r->name);
    bench_exec *x;
    bench_exec_opts o = {.device = BENCH_DEV_CUDA};
    if (bench_exec_eager(m, &o, &x, err, sizeof err) < 0)
        fail_msg("%s: bench_exec_eager (cuda): %s", r->name, err);
    int no = g->noutputs;
    tensor **outs = calloc((size_t)no, sizeof *outs), **again = calloc((size_t)no, sizeof *again);
    assert_true(outs && again);
    bench_exec_stats st, st2;
    if (exec_step(x, outs, &st, err, sizeof err) < 0 ||
        exec_step(x, again, &st2, err, sizeof err) < 0)
        fail_msg("%s (cuda eager): %s", r->name, err);
    int bad = 0;
    bool moved = writes_sources(g), atomic = cuda_atomic_sums(g);
    tol tl = run_tol(r);
    for (int k = 0; k < no; k++) {
        bad += compare(r->name, "cuda eager", k, outs[k], ref[g->outputs[k]], tl);
        for (int64_t i = 0; !moved && i < tensor_numel(outs[k]); i++) {
            double a = tensor_get_flat(outs[k], i), b = tensor_get_flat(again[k], i);
            bool same = a == b || (isnan(a) && isnan(b)) ||
                        (atomic && fabs(a - b) <= tl.atol + tl.rtol * fabs(b));
            if (!same && bad < 5)
                print_error("%s (cuda eager): output %d element %lld: %.9g, then %.9g\n", r->name,
                            k, (long long)i, a, b);
            bad += !same;
        }
        tensor_free(outs[k]);
        tensor_free(again[k]);
    }
    if (bad)
        fail_msg("%s: %d elements differ from the reference or between steps (cuda eager)", r->name,
                 bad);
    // views launch none here too; other counts are the GPU's own
    if (r->c.kernels == 0 ? st.kernels != 0 : st.kernels <= 0)
        fail_msg("%s: %lld kernels launched (cuda eager)", r->name, (long long)st.kernels);
    assert_int_equal(st2.kernels, st.kernels);
    assert_true(st.peak_bytes > 0);
    free(outs);
    free(again);
    free_ref(g, ref);
    bench_exec_free(x);
    model_free(m);
}

// TCBENCH_OP_TABLE_CUDA_ONLY=1: the CUDA executors alone (a GPU check with
// little device time; the CPU modes run on every machine anyway)
static bool cuda_only(void) {
    const char *e = getenv("TCBENCH_OP_TABLE_CUDA_ONLY");
    return e && strcmp(e, "1") == 0;
}

static void test_run(void **state) {
    const op_run *r = *state;
    bool cpu = !(r->known & OPM_BIT(OPM_EAGER)) && !cuda_only();
    bool gpu = op_have_gpu() && !(r->known & OPM_BIT(OPM_CUDA_EAGER));
    if (cpu)
        run_cpu_eager(r);
    if (gpu)
        run_cuda_eager(r);
    if (!cpu && !gpu)
        skip();
}

// ---- batches: many cases a graph, for the modes that compile ------------------------

// runs a graph: a few compiles for the whole table (NVRTC's units can be
// larger: what it costs is the kernels, not the unit)
enum { BATCH = 48, NVRTC_BATCH = 240 };

typedef struct batch_model {
    model *m;
    int *first; // runs[idx[i]]'s outputs are [first[i], first[i + 1])
} batch_model;

static batch_model batch_build(const int *idx, int n) {
    graph *g = graph_new();
    assert_non_null(g);
    batch_model b = {.first = calloc((size_t)n + 1, sizeof *b.first)};
    assert_non_null(b.first);
    for (int i = 0; i < n; i++) {
        b.first[i] = g->noutputs;
        if (runs[idx[i]].c.build(g, &runs[idx[i]].c) < 0)
            fail_msg("%s: building the graph failed: %s", runs[idx[i]].name, graph_error(g));
    }
    b.first[n] = g->noutputs;
    b.m = values_model(g, n == 1 ? runs[idx[0]].name : "batch");
    return b;
}

static void batch_free(batch_model *b) {
    model_free(b->m);
    free(b->first);
}

static const char *const mode_names[OPM_COUNT] = {"eager",      "compiled",      "fused",
                                                  "captured",   "cuda eager",    "cuda compiled",
                                                  "cuda fused", "cuda captured", "nvrtc"};

// Runs idx[0..n) as one graph in mode; each run that fails is named in
// failed (its flag set). -1 when the batch as a whole did not compile or
// run (err says why), else the number of runs that failed.
static int batch_run(enum op_mode mode, const int *idx, int n, bool *failed, char *err,
                     size_t cap) {
    batch_model b = batch_build(idx, n);
    const graph *g = b.m->g;
    double **ref = reference(b.m, "batch");
    compile_opts co = compile_opts_default();
    co.fusion = mode == OPM_COMPILED || mode == OPM_FUSED || mode == OPM_CUDA_COMPILED ||
                mode == OPM_CUDA_FUSED;
    co.capture = mode != OPM_FUSED && mode != OPM_CUDA_FUSED;
    bench_exec_opts eo = {.device = mode >= OPM_CUDA_EAGER ? BENCH_DEV_CUDA : BENCH_DEV_CPU};
    bench_exec *x = NULL;
    tensor **outs = calloc((size_t)g->noutputs, sizeof *outs);
    assert_non_null(outs);
    int nbad = -1;
    if (bench_exec_compile(b.m, &co, &eo, &x, err, cap) == 0 &&
        exec_step(x, outs, NULL, err, cap) == 0) {
        nbad = 0;
        for (int i = 0; i < n; i++) {
            const op_run *r = &runs[idx[i]];
            int bad = 0;
            for (int k = b.first[i]; k < b.first[i + 1]; k++)
                bad += compare(r->name, mode_names[mode], k - b.first[i], outs[k],
                               ref[g->outputs[k]], run_tol(r));
            failed[i] = bad > 0;
            nbad += bad > 0;
        }
        for (int k = 0; k < g->noutputs; k++)
            tensor_free(outs[k]);
    }
    free(outs);
    bench_exec_free(x);
    free_ref(g, ref);
    batch_free(&b);
    return nbad;
}

// Every run not known to fail in mode, BATCH a graph; a batch that fails
// as a whole is run again case by case to find the ones that fail.
static void run_mode(enum op_mode mode) {
    int *idx = malloc((size_t)nruns * sizeof *idx);
    bool *failed = calloc((size_t)nruns, sizeof *failed);
    assert_true(idx && failed);
    int n = 0;
    for (int i = 0; i < nruns; i++)
        if (!(runs[i].known & OPM_BIT(mode)))
            idx[n++] = i;
    int nfail = 0;
    char err[1024];
    double t0 = base_now();
    for (int at = 0; at < n; at += BATCH) {
        int k = n - at < BATCH ? n - at : BATCH;
        if (batch_run(mode, idx + at, k, failed + at, err, sizeof err) >= 0)
            continue;
        print_message("%s: a batch of %d failed (%s); case by case\n", mode_names[mode], k, err);
        for (int i = at; i < at + k; i++)
            if (batch_run(mode, idx + i, 1, failed + i, err, sizeof err) < 0) {
                print_error("%s (%s): %s\n", runs[idx[i]].name, mode_names[mode], err);
                failed[i] = true;
            }
    }
    for (int i = 0; i < n; i++)
        if (failed[i]) {
            print_error("%s fails in %s\n", runs[idx[i]].name, mode_names[mode]);
            nfail++;
        }
    print_message("%s: %d runs in %d batches, %.1f s\n", mode_names[mode], n,
                  (n + BATCH - 1) / BATCH, base_now() - t0);
    free(idx);
    free(failed);
    if (nfail)
        fail_msg("%d cases fail in %s", nfail, mode_names[mode]);
}

static void test_mode(void **state) {
    enum op_mode mode = (enum op_mode)(intptr_t)*state;
    if ((mode >= OPM_CUDA_EAGER && !op_have_gpu()) || (mode < OPM_CUDA_EAGER && cuda_only()))
        skip();
    run_mode(mode);
}

// ---- NVRTC: the generated CUDA of every batch, no GPU needed ------------------------

#if TCBENCH_HAVE_CUDA
static void cprog_release(cprog *p) {
    compile_prog_free(p);
}

// The batch lowered as the compiled mode lowers it (fused or not) and
// generated as CUDA (*src, caller frees); every launch well formed. 0, or
// -1 with err.
static int nvrtc_source(const int *idx, int n, bool fusion, char **src, char *err, size_t cap) {
    batch_model b = batch_build(idx, n);
    cprog p = {0};
    int rc = -1;
    *src = NULL;
    if (compile_cuda_passes(&p, b.m, fusion, NULL) < 0 || !(*src = compile_codegen_cuda(&p))) {
        snprintf(err, cap, "compiler: %s", p.err);
        goto done;
    }
    for (int gi = 0; gi < p.ngroups; gi++) {
        cuda_launch l;
        if (compile_cuda_launch(&p, gi, &l) < 0) {
            snprintf(err, cap, "compile_cuda_launch: %s", p.err);
            goto done;
        }
        if (l.kernel >= 0 &&
            !(l.grid >= 1 && l.block >= 32 && l.block <= 1024 && l.block % 32 == 0)) {
            snprintf(err, cap, "group %d: a launch of %u blocks of %u threads", gi, l.grid,
                     l.block);
            goto done;
        }
    }
    rc = 0;
done:
    if (rc < 0) {
        free(*src);
        *src = NULL;
    }
    cprog_release(&p);
    batch_free(&b);
    return rc;
}

// src compiled by NVRTC for sm_80 (thread-safe: no cmocka calls). 0, or -1
// with err and NVRTC's log on stderr.
static int nvrtc_compile(const char *src, double *seconds, char *err, size_t cap) {
    cuda_nvrtc_result r;
    int rc = cuda_nvrtc_compile(src, "op_table.cu", 80, &r, err, cap);
    if (rc < 0)
        fprintf(stderr, "NVRTC log:\n%s\n", r.log);
    *seconds = r.seconds;
    cuda_nvrtc_result_free(&r);
    return rc;
}

// One run alone, to name a culprit: 0, or -1 with err.
static int nvrtc_one(int i, bool fusion, char *err, size_t cap) {
    char *src;
    double s;
    int rc = nvrtc_source(&i, 1, fusion, &src, err, cap);
    if (rc == 0)
        rc = nvrtc_compile(src, &s, err, cap);
    free(src);
    return rc;
}

static void test_nvrtc(void **state) {
    (void)state;
    if (cuda_only()) // the GPU's own compiles are the check there
        skip();
    int *idx = malloc((size_t)nruns * sizeof *idx);
    assert_non_null(idx);
    int n = 0, nfail = 0;
    for (int i = 0; i < nruns; i++)
        if (!(runs[i].known & OPM_BIT(OPM_NVRTC)))
            idx[n++] = i;
    double total = 0, t0 = base_now();
    for (int at = 0; at < n; at += NVRTC_BATCH) {
        int k = n - at < NVRTC_BATCH ? n - at : NVRTC_BATCH;
        // fused (compiled, fused) and not (captured): two units, compiled at once
        char *src[2], err[2][1024];
        int rc[2];
        double s[2] = {0, 0};
        for (int f = 0; f < 2; f++)
            rc[f] = nvrtc_source(idx + at, k, f, &src[f], err[f], sizeof err[f]);
#pragma omp parallel for num_threads(2)
        for (int f = 0; f < 2; f++)
            if (rc[f] == 0)
                rc[f] = nvrtc_compile(src[f], &s[f], err[f], sizeof err[f]);
        for (int f = 0; f < 2; f++) {
            free(src[f]);
            total += s[f];
            if (rc[f] == 0)
                continue;
            print_message("nvrtc: a batch of %d failed (%s); case by case\n", k, err[f]);
            for (int i = at; i < at + k; i++)
                if (nvrtc_one(idx[i], f, err[f], sizeof err[f]) < 0) {
                    print_error("%s (nvrtc, fusion %s): %s\n", runs[idx[i]].name, f ? "on" : "off",
                                err[f]);
                    nfail++;
                }
        }
    }
    print_message("nvrtc: %d runs in %d batches, fused and not, %.1f s (%.1f s in NVRTC)\n", n,
                  (n + NVRTC_BATCH - 1) / NVRTC_BATCH, base_now() - t0, total);
    free(idx);
    if (nfail)
        fail_msg("%d cases' generated CUDA does not compile", nfail);
}
#else
static void test_nvrtc(void **state) {
    (void)state;
    skip(); // the CUDA backend is not built
}
#endif

// ---- coverage ----------------------------------------------------------------------

// The ops of [0, nops) that seen does not mark, named in list; how many.
static int ops_uncovered(int nops, const bool *seen, char *list, size_t cap) {
    int missing = 0;
    size_t used = 0;
    if (cap)
        list[0] = 0;
    for (int o = 0; o < nops; o++) {
        if (seen[o])
            continue;
        missing++;
        int w = snprintf(list + used, cap - used, "%s%s", used ? " " : "", op_name((enum op)o));
        if (w > 0 && (size_t)w < cap - used)
            used += (size_t)w;
    }
    return missing;
}

// Every op in ops.def appears in some case's graph.
static void test_every_op_covered(void **state) {
    (void)state;
    bool seen[OP_COUNT] = {0};
    for (int i = 0; i < nruns; i++) {
        graph *g = graph_new();
        assert_non_null(g);
        if (runs[i].c.build(g, &runs[i].c) < 0)
            fail_msg("%s: %s", runs[i].name, graph_error(g));
        for (int k = 0; k < g->n; k++)
            seen[g->nodes[k].op] = true;
        graph_free(g);
    }
    char list[2048];
    int missing = ops_uncovered(OP_COUNT, seen, list, sizeof list);
    if (missing)
        fail_msg("%d ops of ops.def have no case in tests/op_table_cases.c: %s", missing, list);
}

// The guard fails on a table that leaves ops out, and names them.
static void test_coverage_guard(void **state) {
    (void)state;
    bool seen[OP_COUNT];
    for (int o = 0; o < OP_COUNT; o++)
        seen[o] = true;
    char list[256];
    assert_int_equal(ops_uncovered(OP_COUNT, seen, list, sizeof list), 0);
    assert_string_equal(list, "");
    seen[OP_GELU] = seen[OP_COUNT - 1] = false;
    assert_int_equal(ops_uncovered(OP_COUNT, seen, list, sizeof list), 2);
    char want[128];
    snprintf(want, sizeof want, "gelu %s", op_name((enum op)(OP_COUNT - 1)));
    assert_string_equal(list, want);
}

// ---- the table's runs and the test list ------------------------------------------

static void make_runs(void) {
    runs = calloc((size_t)op_ncases * 3, sizeof *runs);
    assert_non_null(runs);
    for (int i = 0; i < op_ncases; i++) {
        const op_case *tc = &op_cases[i];
        op_run *r = &runs[nruns++];
        r->c = *tc;
        r->known = tc->known_fail;
        snprintf(r->name, sizeof r->name, "%s", tc->name);
        static const struct {
            unsigned bit;
            enum dtype dt;
        } halves[] = {{HALF_F16, DT_F16}, {HALF_BF16, DT_BF16}};
        for (int h = 0; h < 2; h++) {
            if (!(tc->half & halves[h].bit))
                continue;
            r = &runs[nruns++];
            r->c = *tc;
            r->c.dt = halves[h].dt;
            r->half = true;
            r->known = tc->known_fail16;
            // the CUDA backend has f32 and f16 only (docs/cuda.md), not a bug
            if (halves[h].dt == DT_BF16)
                r->known |= OPM_BIT(OPM_CUDA_EAGER) | OPM_BIT(OPM_CUDA_COMPILED) |
                            OPM_BIT(OPM_CUDA_FUSED) | OPM_BIT(OPM_CUDA_CAPTURED) |
                            OPM_BIT(OPM_NVRTC);
            snprintf(r->name, sizeof r->name, "%s/%s", tc->name, dtype_name(halves[h].dt));
        }
    }
}

int main(void) {
    make_runs();
    int nrows_half = 0;
    for (int i = 0; i < op_ncases; i++)
        nrows_half += op_cases[i].half != 0;
    printf("op table: %d rows, %d runs (f16 and bf16 variants of %d rows); cuda: %s\n", op_ncases,
           nruns, nrows_half, op_have_gpu() ? "a GPU" : "NVRTC only");
    enum { NMODES = 6 };
    static const enum op_mode modes[NMODES] = {OPM_COMPILED,   OPM_FUSED,
                                               OPM_CAPTURED,   OPM_CUDA_COMPILED,
                                               OPM_CUDA_FUSED, OPM_CUDA_CAPTURED};
    int cap = nruns + NMODES + 3 + op_nextra_tests + op_nhalf_tests, n = 0;
    struct CMUnitTest *tests = calloc((size_t)cap, sizeof *tests);
    if (!tests)
        return 1;
    for (int i = 0; i < nruns; i++)
        tests[n++] = (struct CMUnitTest){runs[i].name, test_run, NULL, NULL, &runs[i]};
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_every_op_covered);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_coverage_guard);
    for (int i = 0; i < NMODES; i++)
        tests[n++] = (struct CMUnitTest){mode_names[modes[i]], test_mode, NULL, NULL,
                                         (void *)(intptr_t)modes[i]};
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_nvrtc);
    for (int i = 0; i < op_nextra_tests; i++)
        tests[n++] = op_extra_tests[i];
    for (int i = 0; i < op_nhalf_tests; i++)
        tests[n++] = op_half_tests[i];
    int rc = _cmocka_run_group_tests("op_table", tests, (size_t)n, NULL, NULL);
    free(tests);
    free(runs);
    return rc;
}
