// The generated CUDA compiles: for every model of suites/smoke.yaml, in every
// variant (fp32 and AMP f16, inference and training, AMP training also with
// the grad scaler), the graph is built as the runner builds it, the
// compiler's passes run as compile_model runs them, codegen_cuda writes the
// translation unit, and NVRTC compiles it to a cubin for sm_80 and for
// sm_90. No GPU is needed. A failure prints NVRTC's log and keeps the
// source under $TMPDIR for a look. Also checked: every generated kernel is
// in both cubins, identical kernels are emitted once (the second layer of a
// model adds none), every launch is well formed, and in training the update
// buckets and dropout are generated kernels (the ones that read the step
// from device memory). The generate workload's decode step on the GPU is
// checked too: the llama case of suites/generate.yaml at --size cpu, fp32
// and int4 weights, built as the compiled mode builds its one decode step
// (a static cache, the position and the cache's valid length inputs), its
// position still a runtime value after the passes, its source compiled for
// both architectures. Without the CUDA backend the test is skipped (exit
// 77).
#include "tcbench_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff/autograd.h"
#include "compile/codegen_cuda.h"
#include "model/model_prepare.h"
#include "model/modeldef.h"
#include "model/quantize.h"
#include "model/suite.h"

#if TCBENCH_HAVE_CUDA
#include "backend/cuda/cuda_nvrtc.h"

// A variant of each model whose graph the compiler lowers. Adding one that
// needs builder options is a row here.
typedef struct variant {
    const char *name;
    modeldef_opts opts; // .training: the step with its backward and the case's optimizer
    enum dtype amp;     // DT_F32, or the low dtype of the autocast pass (AMP)
    bool grad_scaler;   // training: dynamic loss scaling (found_inf, scaler_update)
} variant;

static const variant variants[] = {
    {"fp32-infer", {.training = false}, DT_F32, false},
    {"amp-infer", {.training = false}, DT_F16, false},
    {"fp32-train", {.training = true}, DT_F32, false},
    {"amp-train", {.training = true}, DT_F16, false},
    {"amp-train-scaler", {.training = true}, DT_F16, true},
};

static const int archs[] = {80, 90};
#define NARCH ((int)(sizeof archs / sizeof archs[0]))

typedef struct model_case {
    const suite_case *sc;
    const variant *v;
    char name[160];
} model_case;

static void cprog_release(cprog *p) {
    compile_prog_free(p);
}

typedef struct arch_job {
    const char *src, *name;
    int arch;
    cuda_nvrtc_result r;
    int rc;
    char err[600];
} arch_job;

static bool has_bytes(const char *hay, size_t n, const char *needle) {
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(hay + i, needle, k) == 0 && (i + k == n || hay[i + k] == 0))
            return true;
    return false;
}

static void keep_source(const char *name, const char *src, char *path, size_t cap) {
    const char *tmp = getenv("TMPDIR");
    snprintf(path, cap, "%s/tcbench-nvrtc-%s.cu", tmp && *tmp ? tmp : "/tmp", name);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(src, f);
        fclose(f);
    }
}

// Launches are well formed; the distinct kernels counted. In training, an
// update bucket takes its operands from a pointer table, and dropout is
// generated (both read the step from device memory, so a captured step
// serves every step).
static int check_launches(const cprog *p) {
    int nkernels = 0, ngen = 0;
    for (int gi = 0; gi < p->ngroups; gi++) {
        cuda_launch l;
        const kgroup *k = &p->groups[gi];
        assert_int_equal(compile_cuda_launch((cprog *)p, gi, &l), 0);
        assert_int_equal(l.table, k->kind == KG_UPDATE);
        if (k->kind == KG_UPDATE || (k->anchor >= 0 && p->g->nodes[k->anchor].op == OP_DROPOUT))
            assert_true(l.kernel >= 0 && l.lib == CUDA_LIB_NONE);
        if (l.kernel < 0) {
            assert_int_not_equal(l.lib, CUDA_LIB_NONE); // a group does something
            continue;
        }
        ngen++;
        assert_true(l.grid >= 1 && l.block >= 32 && l.block <= 1024 && l.block % 32 == 0);
        if (l.kernel + 1 > nkernels)
            nkernels = l.kernel + 1;
        if (l.lib == CUDA_LIB_GEMM)
            assert_true(l.gemm.M > 0 && l.gemm.N > 0 && l.gemm.K > 0 && l.gemm.lda > 0 &&
                        l.gemm.ldb > 0);
    }
    assert_true(nkernels <= ngen);
    return nkernels;
}

// NVRTC for every architecture at once (it is thread-safe); every kernel
// in each cubin. false, with NVRTC's log and the source kept, on a failure.
static bool nvrtc_both(const char *name, const char *src, const cprog *p, int nkernels) {
    arch_job jobs[NARCH];
    char uname[200];
    snprintf(uname, sizeof uname, "%s.cu", name);
#pragma omp parallel for num_threads(NARCH)
    for (int a = 0; a < NARCH; a++) {
        jobs[a] = (arch_job){.src = src, .name = uname, .arch = archs[a]};
        jobs[a].rc =
            cuda_nvrtc_compile(src, uname, archs[a], &jobs[a].r, jobs[a].err, sizeof jobs[a].err);
    }
    bool failed = false;
    for (int a = 0; a < NARCH; a++) {
        arch_job *j = &jobs[a];
        if (j->rc < 0) {
            char path[512];
            keep_source(name, src, path, sizeof path);
            fprintf(stderr, "%s sm_%d: %s\nNVRTC log:\n%s\n(source kept in %s)\n", name, j->arch,
                    j->err, j->r.log, path);
            failed = true;
            continue;
        }
        print_message("%s sm_%d: %d groups, %d kernels, %zu-byte cubin in %.2f s\n", name, j->arch,
                      p->ngroups, nkernels, j->r.cubin_size, j->r.seconds);
        for (int k = 0; k < nkernels; k++) {
            char kn[32];
            snprintf(kn, sizeof kn, "tk%d", k);
            if (!has_bytes(j->r.cubin, j->r.cubin_size, kn)) {
                fprintf(stderr, "%s sm_%d: kernel %s is not in the cubin\n", name, j->arch, kn);
                failed = true;
            }
        }
    }
    for (int a = 0; a < NARCH; a++)
        cuda_nvrtc_result_free(&jobs[a].r);
    return !failed;
}

static void test_model(void **state) {
    const model_case *mc = *state;
    diag d;
    modeldef *md = NULL;
    if (modeldef_load(mc->sc->model_path, &md, &d) < 0)
        fail_msg("%s: %d:%d: %s", mc->name, d.line, d.col, d.msg);
    // the runner's model: AMP's autocast; training's step, every gradient an output
    train_opts o = mc->sc->optim;
    o.grad_scaler = mc->v->grad_scaler;
    model_prep prep = {
        .amp = mc->v->amp, .train = mc->v->opts.training ? &o : NULL, .keep_grads = true};
    model *m;
    char err[600];
    enum model_prep_step s = model_prepare(md, mc->sc->overrides, mc->sc->noverrides, mc->sc->batch,
                                           &prep, &m, err, sizeof err);
    if (s != MODEL_PREP_DONE)
        fail_msg("%s: %s: %s", mc->name, model_prep_step_name(s), err);
    cprog p = {0};
    if (compile_cuda_passes(&p, m, true, NULL) < 0)
        fail_msg("%s: compiler: %s", mc->name, p.err);
    char *src = compile_codegen_cuda(&p);
    if (!src)
        fail_msg("%s: codegen_cuda: %s", mc->name, p.err);

    int nkernels = check_launches(&p);
    bool failed = !nvrtc_both(mc->name, src, &p, nkernels);
    free(src);
    cprog_release(&p);
    model_free(m);
    modeldef_free(md);
    if (failed)
        fail_msg("%s: the generated CUDA did not compile for every architecture", mc->name);
}

// The generate workload's compiled decode step (generate.c's build_step
// for GEN_COMPILED): the llama case of suites/generate.yaml at --size cpu,
// one token over a static cache of prompt + new tokens - 1 rows; state:
// its weight bits (0: f32; 4: int4, its linears the W4A16 kernel).
static void test_generate_step(void **state) {
    int bits = (int)(intptr_t)*state;
    const char *root = getenv("TCBENCH_SOURCE_DIR");
    char path[600], name[64], err[600];
    snprintf(path, sizeof path, "%s/suites/generate.yaml", root);
    snprintf(name, sizeof name, "llama-decode-step-%s", bits ? "int4" : "fp32");
    suite *su;
    diag d;
    if (suite_load(path, "cpu", &su, &d) < 0)
        fail_msg("%s:%d:%d: %s", path, d.line, d.col, d.msg);
    const suite_case *sc = NULL;
    for (int i = 0; i < su->ncases && !sc; i++)
        if (!strcmp(su->cases[i].name, "llama"))
            sc = &su->cases[i];
    assert_non_null(sc);
    modeldef *md = NULL;
    if (modeldef_load(sc->model_path, &md, &d) < 0)
        fail_msg("%s: %d:%d: %s", name, d.line, d.col, d.msg);
    nn_gen gen = {.kv = NN_KV_STATIC, .max_len = sc->prompt_len + sc->new_tokens - 1};
    modeldef_opts mo = {.gen = &gen, .gen_tokens = 1, .graph_only = true};
    model *m;
    if (modeldef_build(md, sc->overrides, sc->noverrides, sc->batch, &mo, &m, &d) < 0)
        fail_msg("%s: %d:%d: %s", name, d.line, d.col, d.msg);
    assert_true(gen.nlayers > 0 && gen.cache_pos >= 0 && gen.kv_len >= 0);
    char cache_pos[64], kv_len[64]; // by name: quantization renumbers the graph
    snprintf(cache_pos, sizeof cache_pos, "%s", m->g->nodes[gen.cache_pos].name);
    snprintf(kv_len, sizeof kv_len, "%s", m->g->nodes[gen.kv_len].name);
    if (bits && model_quantize_weights(m, bits, 32, DT_F32, NULL, err, sizeof err) < 0)
        fail_msg("%s: %s", name, err);
    cprog p = {0};
    if (compile_cuda_passes(&p, m, true, NULL) < 0)
        fail_msg("%s: compiler: %s", name, p.err);
    // one program for every position: the position and the valid length
    // stay inputs the kernels read at run time, never folded into constants
    int runtime = 0, writes = 0, attention = 0, qlinear = 0;
    for (int i = 0; i < m->g->n; i++) {
        const graph_node *n = &m->g->nodes[i];
        bool pos = n->name && (!strcmp(n->name, cache_pos) || !strcmp(n->name, kv_len));
        if (pos && n->op == OP_INPUT && p.src_of[i] >= 0 && p.info[p.src_of[i]].store == CS_SOURCE)
            runtime++;
    }
    for (int gi = 0; gi < p.ngroups; gi++) {
        int a = p.groups[gi].anchor;
        enum op op = a >= 0 ? p.g->nodes[a].op : OP_COUNT;
        writes += op == OP_KV_WRITE;
        attention += op == OP_ATTENTION;
        qlinear += op == OP_QLINEAR;
    }
    print_message("%s: %d groups: %d cache writes, %d attentions, %d quantized linears\n", name,
                  p.ngroups, writes, attention, qlinear);
    assert_int_equal(runtime, 2);
    assert_int_equal(writes, 2 * gen.nlayers); // keys and values, each layer
    assert_int_equal(attention, gen.nlayers);
    assert_true(bits ? qlinear > 0 : qlinear == 0);
    char *src = compile_codegen_cuda(&p);
    if (!src)
        fail_msg("%s: codegen_cuda: %s", name, p.err);
    int nkernels = check_launches(&p);
    assert_true(nkernels > 0);
    bool ok = nvrtc_both(name, src, &p, nkernels);
    free(src);
    cprog_release(&p);
    model_free(m);
    modeldef_free(md);
    suite_free(su);
    if (!ok)
        fail_msg("%s: the generated CUDA did not compile for every architecture", name);
}

// Kernels are keyed by text: a model with more layers of the same shape
// needs no more kernels.
static void test_layers_share_kernels(void **state) {
    (void)state;
    int counts[2];
    for (int i = 0; i < 2; i++) {
        graph *g = graph_new();
        int x = graph_input(g, "x", DT_F32, 2, (int64_t[]){16, 64});
        for (int l = 0; l < 2 + 2 * i; l++) {
            char name[32];
            snprintf(name, sizeof name, "fc%d.weight", l);
            int w = graph_param(g, name, 2, (int64_t[]){64, 64}, INIT_NORMAL, 0.02);
            x = graph_op(g, OP_LINEAR, 2, (int[]){x, w}, NULL, NULL);
            x = graph_unary(g, OP_GELU, x);
            x = graph_op(g, OP_SOFTMAX, 1, &x, NULL, NULL);
        }
        graph_output(g, x);
        model *m = model_new(g, "layers", "mlp", 16);
        assert_non_null(m);
        cprog p = {.m = m, .fusion = true};
        assert_int_equal(compile_decompose(&p), 0);
        assert_int_equal(compile_simplify(&p), 0);
        assert_int_equal(compile_fuse(&p), 0);
        assert_int_equal(compile_plan(&p), 0);
        char *src = compile_codegen_cuda(&p);
        assert_non_null(src);
        counts[i] = 0;
        for (const char *s = src; (s = strstr(s, "__global__ void")); s++)
            counts[i]++;
        free(src);
        cprog_release(&p);
        model_free(m);
    }
    assert_true(counts[0] > 0);
    assert_int_equal(counts[0], counts[1]);
}

int main(void) {
    const char *root = getenv("TCBENCH_SOURCE_DIR");
    if (!root) {
        fprintf(stderr, "TCBENCH_SOURCE_DIR is not set (meson test sets it)\n");
        return 1;
    }
    char path[600];
    snprintf(path, sizeof path, "%s/suites/smoke.yaml", root);
    suite *s;
    diag d;
    if (suite_load(path, NULL, &s, &d) < 0) {
        fprintf(stderr, "%s:%d:%d: %s\n", path, d.line, d.col, d.msg);
        return 1;
    }
    int nv = (int)(sizeof variants / sizeof variants[0]), n = 0;
    model_case *cases = calloc((size_t)(s->ncases * nv), sizeof *cases);
    struct CMUnitTest *tests = calloc((size_t)(s->ncases * nv + 3), sizeof *tests);
    if (!cases || !tests)
        return 1;
    for (int v = 0; v < nv; v++) {
        for (int ci = 0; ci < s->ncases; ci++, n++) {
            cases[n] = (model_case){&s->cases[ci], &variants[v], ""};
            snprintf(cases[n].name, sizeof cases[n].name, "%s-%s", s->cases[ci].name,
                     variants[v].name);
            tests[n] = (struct CMUnitTest){cases[n].name, test_model, NULL, NULL, &cases[n]};
        }
    }
    tests[n++] =
        (struct CMUnitTest){"layers_share_kernels", test_layers_share_kernels, NULL, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"generate_step_fp32", test_generate_step, NULL, NULL,
                                     (void *)(intptr_t)0};
    tests[n++] = (struct CMUnitTest){"generate_step_int4", test_generate_step, NULL, NULL,
                                     (void *)(intptr_t)4};
    int rc = _cmocka_run_group_tests("nvrtc", tests, (size_t)n, NULL, NULL);
    free(tests);
    free(cases);
    suite_free(s);
    return rc;
}

#else

int main(void) {
    puts("skipped: CUDA backend not built");
    return 77;
}

#endif
