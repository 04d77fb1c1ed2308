// The fused attention op (ops.def ATTENTION): the CPU kernel (eager, one
// kernel per call) and the compiled mode against the fp64 reference on
// shapes chosen to hit its edges (ragged tiles, split-K decoding, causal
// with T < S, bias with -inf, per-row valid lengths down to zero, GQA, MQA,
// f16, a permuted view); the graph builder's refusals; the compiler's
// pattern pass on gpt2 and llama (GQA) from the smoke suite; --attention
// sdpa's graphs; the backward against the unfused chain's; the fused
// backward (ATTENTION_GRAD) against fp64 gradients on the same shapes; the
// pass in training graphs (gpt2, llama: forward and backward fused, loss and
// gradients as eager's); and the CUDA kernels' texts through NVRTC for sm_80
// and sm_90 (no GPU needed).
#include "tcbench_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>
#include <unistd.h>

#include "autodiff/autograd.h"
#include "compile/compile.h"
#include "eager/eager.h"
#include "model/model_prepare.h"
#include "model/modeldef.h"
#include "ref/ref.h"
#include "test_util.h"

#if TCBENCH_HAVE_CUDA
#include "backend/cuda/cuda_nvrtc.h"
extern const char cuda_prelude_text[];
extern const char cuda_attention_text[];
extern const char cuda_attention_grad_text[];
#endif

typedef struct att_case {
    const char *name;
    int64_t B, H, KVH, T, S, D, Dv;
    bool causal;
    int bias;      // 0 none; 1 (B, 1, 1, S) with -inf entries; 2 (T, S) finite
    int lens;      // 0 none; 1 (B) with a 0 and a short row; 2 () one length
    bool strided;  // q from a (B, T, H, D) input through a permute view
    enum dtype dt; // q, k, v
} att_case;

// A graph with inputs for q, k, v (and bias, lengths) and one ATTENTION as
// its output; with grad, an input dy too and the ATTENTION_GRAD of the
// attention as the output instead. *len_id the length input or -1.
static graph *att_graph_of(const att_case *c, bool grad, int *len_id) {
    graph *g = graph_new();
    assert_non_null(g);
    int q;
    if (c->strided) {
        q = graph_input(g, "q", c->dt, 4, (int64_t[]){c->B, c->T, c->H, c->D});
        q = graph_permute(g, q, (int[]){0, 2, 1, 3});
    } else {
        q = graph_input(g, "q", c->dt, 4, (int64_t[]){c->B, c->H, c->T, c->D});
    }
    int k = graph_input(g, "k", c->dt, 4, (int64_t[]){c->B, c->KVH, c->S, c->D});
    int v = graph_input(g, "v", c->dt, 4, (int64_t[]){c->B, c->KVH, c->S, c->Dv});
    int src[5] = {q, k, v}, n = 3;
    int64_t ia[GRAPH_MAX_IA] = {c->causal};
    if (c->bias) {
        int b = c->bias == 1 ? graph_input(g, "bias", DT_F32, 4, (int64_t[]){c->B, 1, 1, c->S})
                             : graph_input(g, "bias", DT_F32, 2, (int64_t[]){c->T, c->S});
        ia[1] = n;
        src[n++] = b;
    }
    *len_id = -1;
    if (c->lens) {
        *len_id = c->lens == 1 ? graph_input(g, "len", DT_I64, 1, (int64_t[]){c->B})
                               : graph_input(g, "len", DT_I32, 0, NULL);
        ia[2] = n;
        src[n++] = *len_id;
    }
    double fa[GRAPH_MAX_FA] = {1.0 / sqrt((double)c->D)};
    int y = graph_op(g, OP_ATTENTION, n, src, ia, fa);
    if (y < 0)
        fail_msg("%s: %s", c->name, graph_error(g));
    if (grad) { // dy, q, k, v, y, then the bias and length after them
        int dy = graph_input(g, "dy", c->dt, 4, (int64_t[]){c->B, c->H, c->T, c->Dv});
        int gs[7] = {dy, q, k, v, y}, gn = 5;
        for (int i = 1; i <= 2; i++)
            if (ia[i]) {
                gs[gn] = src[ia[i]];
                ia[i] = gn++;
            }
        y = graph_op(g, OP_ATTENTION_GRAD, gn, gs, ia, fa);
        if (y < 0)
            fail_msg("%s: %s", c->name, graph_error(g));
    }
    graph_output(g, y);
    return g;
}

static graph *att_graph(const att_case *c, int *len_id) { return att_graph_of(c, false, len_id); }

// Element i of t made NaN.
static void poison(tensor *t, int64_t i) {
    if (t->dtype == DT_F32)
        ((float *)tensor_data(t))[i] = NAN;
    else
        ((uint16_t *)tensor_data(t))[i] = t->dtype == DT_BF16 ? 0x7fc0 : 0x7e00;
}

// Inputs drawn from the seed, then the special values the case asks for.
static model *att_model_of(const att_case *c, bool grad) {
    int len;
    graph *g = att_graph_of(c, grad, &len);
    model *m = model_new(g, c->name, "test", c->B);
    assert_non_null(m);
    assert_int_equal(model_init_values(m, 5), 0);
    for (int i = 0; i < g->n; i++) {
        const graph_node *n = &g->nodes[i];
        if (n->op != OP_INPUT || !n->name || strcmp(n->name, "bias") || c->bias != 1)
            continue;
        float *b = tensor_f32(m->values[i]);
        for (int64_t r = 0; r < c->B; r++)
            for (int64_t s = 0; s < c->S; s++)
                if (s % 3 == 1 || r == c->B - 1) // the last row: every key masked
                    b[r * c->S + s] = -INFINITY;
    }
    if (len >= 0) {
        tensor *t = m->values[len];
        if (c->lens == 1) {
            int64_t *l = tensor_data(t);
            for (int64_t b = 0; b < c->B; b++)
                l[b] = b == 0 ? c->S : b == 1 ? 0 : (c->S * 2) / 5 + b;
        } else {
            *(int32_t *)tensor_data(t) = (int32_t)(c->S - 3);
        }
        // keys and values past each row's length are NaN (a static cache's
        // unwritten rows): no kernel may let them reach a visible row, not
        // even as 0 x NaN
        for (int i = 0; i < g->n; i++) {
            const graph_node *n = &g->nodes[i];
            if (n->op != OP_INPUT || !n->name || (strcmp(n->name, "k") && strcmp(n->name, "v")))
                continue;
            tensor *kv = m->values[i];
            int64_t rows = n->shape[1] * n->shape[2], w = n->shape[3];
            for (int64_t b = 0; b < c->B; b++) {
                int64_t L = c->lens == 1 ? ((int64_t *)tensor_data(t))[b] : c->S - 3;
                for (int64_t r = 0; r < rows; r++)
                    for (int64_t e = r % c->S >= L ? 0 : w; e < w; e++)
                        poison(kv, (b * rows + r) * w + e);
            }
        }
    }
    return m;
}


static double value_at(const tensor *t, int64_t i) {
    if (t->dtype == DT_F32)
        return ((const float *)tensor_data(t))[i];
    return dtype_half_to_f32(t->dtype, ((const uint16_t *)tensor_data(t))[i]);
}

// Largest |got - want| over the output, against 1 + |want|.
static double max_err(const tensor *got, const double *want) {
    double e = 0;
    for (int64_t i = 0; i < tensor_numel(got); i++) {
        double d = fabs(value_at(got, i) - want[i]) / (1 + fabs(want[i]));
        e = d > e || d != d ? d : e;
    }
    return e;
}

static const att_case cases[] = {
    {"ragged", 2, 3, 3, 37, 70, 20, 12, false, 0, 0, false, DT_F32},
    {"causal_t_lt_s", 1, 2, 2, 19, 83, 16, 16, true, 0, 0, false, DT_F32},
    {"causal_square", 2, 2, 2, 65, 65, 8, 8, true, 0, 0, false, DT_F32},
    {"decode_split_k", 1, 4, 2, 1, 1500, 32, 32, false, 0, 0, false, DT_F32},
    {"decode_split_k_len", 2, 4, 4, 3, 900, 16, 24, true, 0, 1, false, DT_F32},
    {"bias_inf", 3, 2, 1, 9, 40, 8, 8, false, 1, 0, false, DT_F32},
    {"bias_2d_causal", 1, 2, 2, 12, 12, 8, 8, true, 2, 0, false, DT_F32},
    {"lens_per_row", 3, 2, 2, 4, 50, 8, 8, true, 0, 1, false, DT_F32},
    {"len_scalar", 2, 2, 2, 5, 30, 8, 8, false, 0, 2, false, DT_F32},
    {"gqa", 2, 6, 2, 33, 33, 16, 16, true, 0, 0, false, DT_F32},
    {"mqa", 1, 4, 1, 20, 97, 16, 16, false, 0, 0, false, DT_F32},
    {"f16", 2, 4, 2, 40, 70, 16, 16, true, 0, 0, false, DT_F16},
    {"f16_decode", 1, 4, 1, 1, 600, 32, 32, false, 0, 0, false, DT_F16},
    // a tile of one key/value head's query heads (T * heads per group at
    // most AT_TQ rows): causal rows of several queries, a bias, lengths
    {"gqa_decode_rows", 2, 8, 2, 3, 77, 16, 12, true, 2, 0, false, DT_F32},
    {"mqa_decode_lens", 3, 6, 1, 2, 130, 8, 20, true, 0, 1, true, DT_F32},
    // one query row alone (multi-head decoding): values past 64 columns and
    // not a multiple of 16, a -inf bias, lengths
    {"mha_decode_row", 2, 3, 3, 1, 150, 24, 70, false, 1, 1, false, DT_F32},
    {"mha_decode_causal", 1, 2, 2, 1, 64, 16, 16, true, 0, 0, false, DT_F32},
    {"f16_mha_decode", 1, 3, 3, 1, 100, 16, 40, true, 0, 0, false, DT_F16}, // k packed
    {"strided_q", 2, 3, 3, 21, 21, 8, 8, true, 0, 0, true, DT_F32},
    // bf16: on a CPU with AVX512-BF16 the pair kernels (odd D, Dv past a
    // 64-column block and not a multiple of 16, odd S, split-K, lengths)
    {"bf16_ragged", 2, 3, 3, 37, 71, 21, 76, false, 0, 0, false, DT_BF16},
    {"bf16_causal_gqa", 2, 6, 2, 45, 45, 16, 16, true, 0, 0, false, DT_BF16},
    {"bf16_bias_inf", 3, 2, 1, 9, 40, 8, 8, false, 1, 0, false, DT_BF16},
    {"bf16_decode_len", 3, 4, 4, 3, 903, 16, 24, true, 0, 1, false, DT_BF16},
    {"bf16_decode_split_k", 1, 2, 1, 1, 1000, 32, 32, false, 0, 2, false, DT_BF16},
    {"bf16_strided_q", 2, 3, 3, 21, 21, 8, 8, true, 0, 0, true, DT_BF16},
};

// The case's model (its gradient with grad) run by the reference and
// eager: ref[0] and out[0] its one output, *st eager's figures.
static model *run_case(const att_case *c, bool grad, double **ref, tensor **out,
                       eager_stats *st) {
    model *m = att_model_of(c, grad);
    char err[300];
    if (ref_run(m, ref, err, sizeof err) < 0)
        fail_msg("%s: reference: %s", c->name, err);
    eager *e = eager_new(m);
    assert_non_null(e);
    if (eager_run(e, out, st) < 0)
        fail_msg("%s: eager: %s", c->name, eager_error(e));
    eager_free(e);
    return m;
}

static void test_kernel_vs_reference(void **state) {
    (void)state;
#if defined(__AVX512BF16__) && defined(__AVX512BW__) // the engine's AT_BF16 (same flags)
    print_message("bf16 cases: the pair kernels (AVX512-BF16)\n");
#else
    print_message("bf16 cases: the f32 kernels (no AVX512-BF16 on this build)\n");
#endif
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const att_case *c = &cases[i];
        double *ref[1];
        tensor *out[1];
        eager_stats st;
        model *m = run_case(c, false, ref, out, &st);
        // bf16: 8 significant bits, and the pair kernels round q and the
        // probabilities to them as well
        double tol = c->dt == DT_F32 ? 2e-5 : c->dt == DT_F16 ? 4e-3 : 1.2e-2;
        double got = max_err(out[0], ref[0]);
        print_message("%-20s eager %lld kernel(s), max error %.2g\n", c->name,
                      (long long)st.kernels, got);
        if (!(got <= tol))
            fail_msg("%s: error %g over %g", c->name, got, tol);
        // one kernel for the op (a permuted q is read in place, not copied)
        assert_int_equal(st.kernels, 1);
        if (c->lens == 1) { // batch row 1 sees no key: zeros
            int64_t row = c->H * c->T * c->Dv;
            for (int64_t j = row; j < 2 * row; j++)
                assert_true(value_at(out[0], j) == 0);
        }
        tensor_free(out[0]);
        free(ref[0]);
        model_free(m);
    }
}

// ATTENTION_GRAD's CPU kernel against the fp64 reference's gradients on
// every shape above (ragged tiles, causal with T < S, -inf bias rows, zero
// valid lengths, GQA, MQA, f16, a permuted q), eager (one kernel) and as an
// extern call of a compiled program.
static void test_grad_vs_reference(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const att_case *c = &cases[i];
        double *ref[1];
        tensor *out[1];
        eager_stats st;
        char err[300];
        model *m = run_case(c, true, ref, out, &st);
        double tol = c->dt == DT_F32 ? 1e-4 : c->dt == DT_F16 ? 2e-2 : 5e-2;
        double got = max_err(out[0], ref[0]);
        double big = 0; // the gradients are not all zeros
        for (int64_t j = 0; j < tensor_numel(out[0]); j++)
            big = fmax(big, fabs(ref[0][j]));
        print_message("%-20s grad: eager %lld kernel(s), max error %.2g (largest %.2g)\n",
                      c->name, (long long)st.kernels, got, big);
        if (!(got <= tol))
            fail_msg("%s: gradient error %g over %g", c->name, got, tol);
        assert_true(big > 1e-3);
        assert_int_equal(st.kernels, 2); // the forward's and the backward's
        tensor_free(out[0]);
        if (i % 4 == 0) { // the compiled mode's extern call of the same kernel
            compile_opts o = compile_opts_default();
            compiled *cp;
            if (compile_model(m, &o, &cp, err, sizeof err) < 0)
                fail_msg("%s: compile_model: %s", c->name, err);
            compiled_stats cs;
            if (compiled_run(cp, out, &cs) < 0)
                fail_msg("%s: compiled_run: %s", c->name, compiled_error(cp));
            got = max_err(out[0], ref[0]);
            if (!(got <= tol))
                fail_msg("%s: compiled gradient error %g over %g", c->name, got, tol);
            tensor_free(out[0]);
            compiled_free(cp);
        }
        free(ref[0]);
        model_free(m);
    }
}

// ATTENTION in a compiled program (an extern kernel between generated ones).
static void test_compiled(void **state) {
    (void)state;
    const att_case c = {"compiled", 2, 4, 2, 17, 40, 8, 8, true, 0, 1, false, DT_F32};
    int len;
    graph *g = att_graph(&c, &len);
    // an epilogue the program generates around it
    int y = graph_unary(g, OP_GELU, g->outputs[0]);
    g->noutputs = 0;
    graph_output(g, y);
    model *m = model_new(g, c.name, "test", c.B);
    assert_int_equal(model_init_values(m, 9), 0);
    int64_t *l = tensor_data(m->values[len]);
    l[0] = 40, l[1] = 23;
    double *ref[1];
    char err[600];
    assert_int_equal(ref_run(m, ref, err, sizeof err), 0);
    compile_opts o = compile_opts_default();
    compiled *cp;
    if (compile_model(m, &o, &cp, err, sizeof err) < 0)
        fail_msg("compile_model: %s", err);
    tensor *out[1];
    compiled_stats st;
    if (compiled_run(cp, out, &st) < 0)
        fail_msg("compiled_run: %s", compiled_error(cp));
    double e = max_err(out[0], ref[0]);
    print_message("compiled: max error %.2g\n", e);
    assert_true(e < 2e-5);
    tensor_free(out[0]);
    compiled_free(cp);
    free(ref[0]);
    model_free(m);
}

// Every shape rule of the builder refuses in words.
static void test_builder_checks(void **state) {
    (void)state;
    graph *g = graph_new();
    int q = graph_input(g, "q", DT_F32, 4, (int64_t[]){1, 6, 5, 8});
    int k = graph_input(g, "k", DT_F32, 4, (int64_t[]){1, 4, 7, 8});
    int v = graph_input(g, "v", DT_F32, 4, (int64_t[]){1, 4, 7, 8});
    int k2 = graph_input(g, "k2", DT_F32, 4, (int64_t[]){1, 2, 7, 8});
    int v2 = graph_input(g, "v2", DT_F32, 4, (int64_t[]){1, 2, 7, 8});
    int kd = graph_input(g, "kd", DT_F32, 4, (int64_t[]){1, 2, 7, 4});
    int vs = graph_input(g, "vs", DT_F32, 4, (int64_t[]){1, 2, 6, 8});
    int h = graph_input(g, "h", DT_F16, 4, (int64_t[]){1, 2, 7, 8});
    int b3 = graph_input(g, "b", DT_F32, 2, (int64_t[]){5, 6});
    int len = graph_input(g, "len", DT_F32, 1, (int64_t[]){1});
    int q3 = graph_input(g, "q3", DT_F32, 3, (int64_t[]){6, 5, 8});
    struct {
        int src[5], n;
        int64_t ia[3];
        const char *said;
    } bad[] = {
        {{q, k, v}, 3, {0}, "not a multiple of 4 kv heads"},
        {{q3, k2, v2}, 3, {0}, "q must be 4-d"},
        {{q, kd, v2}, 3, {0}, "differ in head dim"},
        {{q, k2, vs}, 3, {0}, "must share batch, kv heads and length"},
        {{q, h, v2}, 3, {0}, "all f32 or all one 16-bit float"},
        {{q, k2, v2, b3}, 4, {0, 3}, "does not broadcast"},
        {{q, k2, v2, len}, 4, {0, 0, 3}, "valid length must be i32 or i64"},
        {{q, k2, v2, b3}, 4, {0}, "must name the inputs after q, k, v"},
        {{q, k2, v2}, 3, {2}, "causal) must be 0 or 1"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t ia[GRAPH_MAX_IA] = {bad[i].ia[0], bad[i].ia[1], bad[i].ia[2]};
        assert_int_equal(graph_op(g, OP_ATTENTION, bad[i].n, bad[i].src, ia, NULL), -1);
        if (!strstr(graph_error(g), bad[i].said))
            fail_msg("case %zu: '%s' does not say '%s'", i, graph_error(g), bad[i].said);
    }
    int y = graph_op(g, OP_ATTENTION, 3, (int[]){q, k2, v2}, NULL, NULL);
    assert_true(y >= 0);
    assert_int_equal(g->nodes[y].shape[1], 6);
    assert_int_equal(g->nodes[y].shape[3], 8);
    graph_free(g);
}

static const suite_case *smoke_case(const suite *s, const char *name) {
    for (int i = 0; i < s->ncases; i++)
        if (!strcmp(s->cases[i].name, name))
            return &s->cases[i];
    fail_msg("no smoke case %s", name);
    return NULL;
}

static int count_op(const graph *g, enum op op) {
    int c = 0;
    for (int i = 0; i < g->n; i++)
        c += g->nodes[i].op == op;
    return c;
}

// A smoke model (its kv_heads overridden when kvh > 0) prepared as mp says.
static model *build_prep(const suite_case *sc, int64_t kvh, const model_prep *mp) {
    diag d;
    modeldef *md;
    if (modeldef_load(sc->model_path, &md, &d) < 0)
        fail_msg("%s: %d:%d: %s", sc->name, d.line, d.col, d.msg);
    modeldef_override ov[16];
    int nov = sc->noverrides;
    assert_true(nov < 15);
    memcpy(ov, sc->overrides, (size_t)nov * sizeof *ov);
    char kv[16];
    snprintf(kv, sizeof kv, "%lld", (long long)kvh);
    if (kvh > 0)
        ov[nov++] = (modeldef_override){.key = "kv_heads", .expr = kv, .file = "test"};
    model *m;
    char err[600];
    enum model_prep_step s = model_prepare(md, ov, nov, sc->batch, mp, &m, err, sizeof err);
    if (s != MODEL_PREP_DONE)
        fail_msg("%s: %s: %s", sc->name, model_prep_step_name(s), err);
    modeldef_free(md);
    return m;
}

// ... built as the runner builds it for inference.
static model *build(const suite_case *sc, int64_t kvh, bool sdpa, enum dtype amp) {
    return build_prep(sc, kvh, &(model_prep){.amp = amp, .seed = 3, .fused_attention = sdpa});
}

// The compiled program of m against the reference; the log's replacements
// counted in *found.
static double program_error(model *m, int *found) {
    double *ref[8];
    char err[600];
    if (ref_run(m, ref, err, sizeof err) < 0)
        fail_msg("reference: %s", err);
    char *logbuf = NULL;
    size_t loglen = 0;
    FILE *log = open_memstream(&logbuf, &loglen);
    assert_non_null(log);
    compile_opts o = compile_opts_default();
    o.log = log;
    compiled *c;
    if (compile_model(m, &o, &c, err, sizeof err) < 0)
        fail_msg("compile_model: %s", err);
    fclose(log);
    *found = 0;
    for (const char *p = logbuf; (p = strstr(p, "-> attention")); p++)
        (*found)++;
    free(logbuf);
    tensor *out[8];
    compiled_stats st;
    if (compiled_run(c, out, &st) < 0)
        fail_msg("compiled_run: %s", compiled_error(c));
    double e = 0;
    for (int i = 0; i < m->g->noutputs; i++) {
        double ei = max_err(out[i], ref[i]);
        e = ei > e ? ei : e;
        tensor_free(out[i]);
        free(ref[i]);
    }
    compiled_free(c);
    return e;
}

// The pass replaces each layer's chain (gpt2: causal MHA; llama with 2 kv
// heads: causal GQA through repeat_kv; bert: no mask), the outputs stay
// within fp32's tolerance of the reference, and the kill switch keeps the
// chain.
static void test_pattern_pass(void **state) {
    (void)state;
    suite *s = load_smoke_suite();
    const struct {
        const char *name;
        int64_t kvh;
    } models[] = {{"gpt2", 0}, {"llama", 2}, {"bert", 0}};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        model *m = build(smoke_case(s, models[i].name), models[i].kvh, false, DT_F32);
        assert_int_equal(count_op(m->g, OP_ATTENTION), 0);
        int found;
        double e = program_error(m, &found);
        print_message("%-6s fused %d attention chains, max error %.2g\n", models[i].name, found, e);
        assert_int_equal(found, 2); // two layers each
        assert_true(e < 1e-4);
        setenv("TCBENCH_DISABLE_FUSED_ATTENTION", "1", 1);
        e = program_error(m, &found);
        unsetenv("TCBENCH_DISABLE_FUSED_ATTENTION");
        assert_int_equal(found, 0);
        assert_true(e < 1e-4);
        model_free(m);
    }
    suite_free(s);
}

// Under autocast the chain has casts between its links: still found, and
// the f16 program stays close to the reference.
static void test_pattern_pass_amp(void **state) {
    (void)state;
    suite *s = load_smoke_suite();
    model *m = build(smoke_case(s, "gpt2"), 0, false, DT_F16);
    int found;
    double e = program_error(m, &found);
    print_message("gpt2 amp: fused %d, max error %.2g\n", found, e);
    assert_int_equal(found, 2);
    assert_true(e < 3e-2);
    model_free(m);
    suite_free(s);
}

// --attention sdpa: one ATTENTION per layer, no softmax left; eager and
// compiled agree with the reference.
static void test_sdpa_graphs(void **state) {
    (void)state;
    suite *s = load_smoke_suite();
    const char *names[] = {"gpt2", "llama", "t5", "vit"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        model *m = build(smoke_case(s, names[i]), 0, true, DT_F32);
        assert_true(count_op(m->g, OP_ATTENTION) >= 2);
        assert_int_equal(count_op(m->g, OP_SOFTMAX), 0);
        double *ref[8];
        char err[600];
        assert_int_equal(ref_run(m, ref, err, sizeof err), 0);
        eager *e = eager_new(m);
        tensor *out[8];
        eager_stats st;
        if (eager_run(e, out, &st) < 0)
            fail_msg("%s: eager: %s", names[i], eager_error(e));
        for (int k = 0; k < m->g->noutputs; k++) {
            assert_true(max_err(out[k], ref[k]) < 1e-4);
            tensor_free(out[k]);
            free(ref[k]);
        }
        eager_free(e);
        int found;
        double ce = program_error(m, &found);
        print_message("%-6s sdpa: eager %lld kernels, compiled max error %.2g\n", names[i],
                      (long long)st.kernels, ce);
        assert_true(ce < 1e-4);
        model_free(m);
    }
    suite_free(s);
}

// The backward (autograd.c back_attention) gives the gradients of the
// unfused chain: the same parameters (same node ids, same values) through
// ATTENTION and through matmul, scale, where, softmax, matmul.
// A bias that is an input needs no gradient: the fused ATTENTION then
// takes ATTENTION_GRAD as its backward; a trained bias keeps the primitives.
static graph *grad_graph(bool fused, bool causal, bool bias_param) {
    graph *g = graph_new();
    int64_t B = 2, H = 4, KVH = 2, T = 6, S = 6, D = 4;
    int q = graph_param(g, "q", 4, (int64_t[]){B, H, T, D}, INIT_NORMAL, 1);
    int k = graph_param(g, "k", 4, (int64_t[]){B, KVH, S, D}, INIT_NORMAL, 1);
    int v = graph_param(g, "v", 4, (int64_t[]){B, KVH, S, D}, INIT_NORMAL, 1);
    int bias = bias_param ? graph_param(g, "bias", 2, (int64_t[]){T, S}, INIT_NORMAL, 1)
                          : graph_input(g, "bias", DT_F32, 2, (int64_t[]){T, S});
    int target = graph_input(g, "target", DT_F32, 4, (int64_t[]){B, H, T, D});
    double sc = 0.37;
    int y;
    if (fused) {
        y = graph_op(g, OP_ATTENTION, 4, (int[]){q, k, v, bias}, (int64_t[GRAPH_MAX_IA]){causal, 3},
                     (double[GRAPH_MAX_FA]){sc});
    } else {
        int rep[2];
        for (int i = 0; i < 2; i++) {
            int r = graph_reshape(g, i ? v : k, 5, (int64_t[]){B, KVH, 1, S, D});
            r = graph_op_shaped(g, OP_EXPAND, 1, &r, NULL, NULL, 5,
                                (int64_t[]){B, KVH, H / KVH, S, D});
            rep[i] = graph_reshape(g, r, 4, (int64_t[]){B, H, S, D});
        }
        int s = graph_binary(g, OP_MATMUL, q, graph_permute(g, rep[0], (int[]){0, 1, 3, 2}));
        s = graph_binary(g, OP_ADD, graph_scale(g, s, sc, 0), bias);
        if (causal) {
            int mask = graph_buffer(g, "causal_mask.6x6", DT_BOOL, 2, (int64_t[]){T, S},
                                    INIT_CAUSAL_MASK, 0);
            int low = graph_full(g, -FLT_MAX, DT_F32, 0, NULL);
            s = graph_op(g, OP_WHERE, 3, (int[]){mask, s, low}, NULL, NULL);
        }
        y = graph_binary(g, OP_MATMUL, graph_unary(g, OP_SOFTMAX, s), rep[1]);
    }
    g->loss = graph_op(g, OP_MSE_LOSS, 2, (int[]){y, target}, NULL, NULL);
    assert_true(g->loss >= 0);
    graph_output(g, g->loss);
    return g;
}

static void test_backward(void **state) {
    (void)state;
    for (int variant = 0; variant < 4; variant++) {
        int causal = variant & 1;
        bool bias_param = variant < 2;
        double *grads[2][8];
        int64_t size[8];
        int nout = 0;
        for (int fused = 0; fused < 2; fused++) {
            graph *g = grad_graph(fused, causal, bias_param);
            model *m = model_new(g, "grad", "test", 2);
            train_opts o = train_opts_sgd();
            char err[600];
            enum model_prep_step s = model_prepare_built(
                m, &(model_prep){.train = &o, .keep_grads = true, .seed = 11}, err, sizeof err);
            if (s != MODEL_PREP_DONE)
                fail_msg("%s: %s", model_prep_step_name(s), err);
            nout = m->g->noutputs;
            assert_true(nout == (bias_param ? 5 : 4)); // the loss, then the gradients
            if (fused)
                assert_int_equal(count_op(m->g, OP_ATTENTION_GRAD), bias_param ? 0 : 1);
            for (int k = 0; k < nout; k++)
                size[k] = graph_node_numel(&m->g->nodes[m->g->outputs[k]]);
            if (ref_run(m, grads[fused], err, sizeof err) < 0)
                fail_msg("reference: %s", err);
            if (fused) { // its eager step runs too (the recomputed chain's kernels)
                eager *e = eager_new(m);
                tensor *out[8];
                eager_stats st;
                if (eager_run(e, out, &st) < 0)
                    fail_msg("eager: %s", eager_error(e));
                for (int k = 0; k < nout; k++) {
                    assert_true(max_err(out[k], grads[1][k]) < 1e-4);
                    tensor_free(out[k]);
                }
                eager_free(e);
            }
            model_free(m);
        }
        for (int k = 0; k < nout; k++) {
            double e = 0;
            for (int64_t j = 0; j < size[k]; j++)
                e = fmax(e, fabs(grads[0][k][j] - grads[1][k][j]));
            print_message("causal %d, bias %s, output %d: fused vs chain %.2g\n", causal,
                          bias_param ? "trained" : "input", k, e);
            assert_true(e < 1e-9);
            free(grads[0][k]);
            free(grads[1][k]);
        }
    }
}

// The score bias (attention's third input) through models/hf/t5.yaml at a
// tiny size: two biased self-attentions (bidirectional, causal) and a
// cross-attention without one. The compiler's pass folds each biased chain
// into ATTENTION with its bias source, within fp32's tolerance of the
// reference; --attention sdpa builds those ATTENTION nodes itself, and its
// training step's gradients (the relative position tables' among them,
// through the primitive backward a trained bias keeps) equal the unfused
// chain's in fp64.
static const suite_case *t5_tiny(void) {
    static char path[512];
    static modeldef_override ov[] = {
        {"vocab", "64", "test", 1, 1},  {"seq", "12", "test", 1, 1},
        {"d_model", "16", "test", 1, 1}, {"d_kv", "4", "test", 1, 1},
        {"ffn", "32", "test", 1, 1},    {"layers", "1", "test", 1, 1},
        {"heads", "4", "test", 1, 1},   {"buckets", "8", "test", 1, 1},
        {"max_distance", "8", "test", 1, 1}, {"dropout", "0", "test", 1, 1}};
    static suite_case sc = {.name = "t5_tiny", .batch = 2, .overrides = ov,
                            .noverrides = sizeof ov / sizeof ov[0]};
    const char *src = getenv("TCBENCH_SOURCE_DIR");
    snprintf(path, sizeof path, "%s/models/hf/t5.yaml", src ? src : ".");
    sc.model_path = path;
    return &sc;
}

static void test_score_bias(void **state) {
    (void)state;
    model *m = build(t5_tiny(), 0, false, DT_F32);
    assert_int_equal(count_op(m->g, OP_ATTENTION), 0);
    int found;
    double e = program_error(m, &found);
    print_message("t5 tiny: fused %d attention chains, max error %.2g\n", found, e);
    assert_int_equal(found, 3);
    assert_true(e < 1e-4);
    model_free(m);

    m = build(t5_tiny(), 0, true, DT_F32);
    int biased = 0;
    for (int i = 0; i < m->g->n; i++) {
        const graph_node *n = &m->g->nodes[i];
        if (n->op == OP_ATTENTION && n->nsrc == 4 && n->ia[1] == 3)
            biased++;
    }
    assert_int_equal(count_op(m->g, OP_ATTENTION), 3);
    assert_int_equal(biased, 2);
    model_free(m);

    // the sdpa model takes the chain model's parameters by name (its node
    // ids differ, and values are drawn by id); the inputs come first in both
    double *grads[2][GRAPH_MAX_OUTPUTS];
    model *ms[2];
    char err[600];
    for (int sdpa = 0; sdpa < 2; sdpa++) {
        train_opts o = train_opts_sgd();
        ms[sdpa] = build_prep(t5_tiny(), 0,
                              &(model_prep){.train = &o, .keep_grads = true, .seed = 5,
                                            .fused_attention = sdpa, .no_values = sdpa});
        if (sdpa)
            assert_int_equal(model_init_values_from(ms[1], 5, ms[0]), 0);
        if (ref_run(ms[sdpa], grads[sdpa], err, sizeof err) < 0)
            fail_msg("reference: %s", err);
    }
    assert_int_equal(ms[0]->g->noutputs, ms[1]->g->noutputs);
    int rel = 0;
    for (int k = 0; k < ms[1]->g->noutputs; k++) {
        const graph_node *n = &ms[1]->g->nodes[ms[1]->g->outputs[k]];
        double d = 0;
        for (int64_t j = 0; j < graph_node_numel(n); j++)
            d = fmax(d, fabs(grads[0][k][j] - grads[1][k][j]));
        rel += n->ndim == 2 && n->shape[0] == 8 && n->shape[1] == 4;
        if (d > 1e-9)
            fail_msg("output %d: sdpa vs chain %.2g", k, d);
        free(grads[0][k]);
        free(grads[1][k]);
    }
    assert_int_equal(rel, 2); // both stacks' (buckets, heads) gradients
    model_free(ms[1]); // its values are views of ms[0]'s
    model_free(ms[0]);
}

// A smoke model's training step (SGD, every gradient an output).
static model *train_build(const suite_case *sc, int64_t kvh) {
    train_opts o = train_opts_sgd();
    return build_prep(sc, kvh, &(model_prep){.train = &o, .keep_grads = true, .seed = 23});
}

// ||got - want|| / max(||want||, tol sqrt(n)): the training check's relative
// error with its floor (docs/training.md, "The check"), for the gradients
// that are zero in exact arithmetic (attention's key bias) where both
// executors leave rounding noise of 1e-9.
static double rel_l2(const tensor *got, const tensor *want, double tol) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < tensor_numel(got); i++) {
        double a = value_at(got, i), b = value_at(want, i);
        num += (a - b) * (a - b);
        den += b * b;
    }
    return sqrt(num) / fmax(sqrt(den), tol * sqrt((double)tensor_numel(got)));
}

// The dumped program's extern kernels (dir/name.graph.txt) of ATTENTION
// (*fwd) and ATTENTION_GRAD (*bwd); the dump is removed.
static void count_externs(const char *dir, const char *name, int *fwd, int *bwd) {
    char path[400], line[4096];
    snprintf(path, sizeof path, "%s/%s.graph.txt", dir, name);
    FILE *f = fopen(path, "r");
    if (!f)
        fail_msg("no dumped graph %s", path);
    *fwd = *bwd = 0;
    while (fgets(line, sizeof line, f)) { // "group 7 (extern, kernel k5): attention%36*"
        if (!strstr(line, "(extern,"))
            continue;
        *fwd += strstr(line, " attention%") != NULL;
        *bwd += strstr(line, " attention_grad%") != NULL;
    }
    fclose(f);
    remove(path);
    snprintf(path, sizeof path, "%s/%s.c", dir, name);
    remove(path);
}

// m compiled with its graph and source dumped into dir (count_externs reads them).
static compiled *compile_dumped(model *m, const char *dir, const char *what) {
    compile_opts o = compile_opts_default();
    o.dump_dir = dir;
    compiled *c;
    char err[600];
    if (compile_model(m, &o, &c, err, sizeof err) < 0)
        fail_msg("%s: compile_model: %s", what, err);
    return c;
}

// Compiled training (two SGD steps) of gpt2 (causal MHA) and llama (causal
// GQA, 2 kv heads) from the smoke suite: each layer's chain becomes one
// ATTENTION and its backward one ATTENTION_GRAD (counted in the compiled
// program's extern kernels), and the loss and every gradient of both steps
// agree with eager's (relative L2 with the training check's floor, 1e-4);
// with TCBENCH_DISABLE_FUSED_ATTENTION=1 neither op is left, and the arena
// is larger (the probabilities kept for the backward).
static void test_train_pattern(void **state) {
    (void)state;
    // the smoke models' chains (T = S = 32) are below the length where a
    // training chain fuses by default: fuse every one here
    setenv("TCBENCH_ATTENTION_TRAIN_MIN_TS", "0", 1);
    suite *s = load_smoke_suite();
    char dir[256];
    const char *t = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/tcbench-test-attention-XXXXXX", t && *t ? t : "/tmp");
    assert_non_null(mkdtemp(dir));
    const struct {
        const char *name;
        int64_t kvh;
    } models[] = {{"gpt2", 0}, {"llama", 2}};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        const suite_case *sc = smoke_case(s, models[i].name);
        model *em = train_build(sc, models[i].kvh);
        int nout = em->g->noutputs;
        tensor **want = calloc((size_t)nout * 2, sizeof *want), **got = want + nout;
        assert_non_null(want);
        eager *e = eager_new(em);
        tensor *out[64];
        assert_true(nout <= 64);
        for (int step = 1; step <= 2; step++) {
            eager_set_step(e, (uint64_t)step);
            if (eager_run(e, out, NULL) < 0)
                fail_msg("%s: eager: %s", sc->name, eager_error(e));
            for (int k = 0; k < nout; k++) {
                tensor_free(want[k]);
                want[k] = out[k];
            }
        }
        eager_free(e);
        size_t arena[2];
        for (int off = 0; off < 2; off++) {
            if (off)
                setenv("TCBENCH_DISABLE_FUSED_ATTENTION", "1", 1);
            model *m = train_build(sc, models[i].kvh);
            compiled *c = compile_dumped(m, dir, sc->name);
            unsetenv("TCBENCH_DISABLE_FUSED_ATTENTION");
            for (int step = 1; step <= 2; step++) {
                compiled_set_step(c, (uint64_t)step);
                if (compiled_run(c, out, NULL) < 0)
                    fail_msg("%s: compiled: %s", sc->name, compiled_error(c));
                for (int k = 0; k < nout; k++) {
                    tensor_free(got[k]);
                    got[k] = out[k];
                }
            }
            double worst = 0;
            for (int k = 0; k < nout; k++) {
                double er = rel_l2(got[k], want[k], 1e-4);
                if (!(er < 1e-4))
                    fail_msg("%s%s: output %d: relative L2 error %g against eager", sc->name,
                             off ? " (unfused)" : "", k, er);
                worst = fmax(worst, er);
            }
            int fwd, bwd;
            count_externs(dir, m->name, &fwd, &bwd);
            compiled_stats cs;
            compiled_info(c, &cs);
            arena[off] = cs.arena_bytes;
            print_message("%-6s training%s: %d attention, %d attention_grad kernels, arena %zu "
                          "bytes; loss and %d gradients within %.2g of eager\n",
                          sc->name, off ? " (fusion off)" : "", fwd, bwd, cs.arena_bytes, nout - 1,
                          worst);
            assert_int_equal(fwd, off ? 0 : 2);
            assert_int_equal(bwd, off ? 0 : 2);
            compiled_free(c);
            model_free(m);
        }
        // no (B, H, T, S) probabilities kept from the forward for the backward
        assert_true(arena[0] < arena[1]);
        for (int k = 0; k < 2 * nout; k++)
            tensor_free(want[k]);
        free(want);
        model_free(em);
    }
    // the default: gpt2's chains (T x S = 32 x 32) stay unfused in training,
    // and the threshold is "above": at 1024 elements unfused, at 1023 fused
    const struct {
        const char *min;
        int want;
    } rule[] = {{NULL, 0}, {"1024", 0}, {"1023", 2}};
    const suite_case *sc = smoke_case(s, "gpt2");
    for (size_t i = 0; i < sizeof rule / sizeof rule[0]; i++) {
        if (rule[i].min)
            setenv("TCBENCH_ATTENTION_TRAIN_MIN_TS", rule[i].min, 1);
        else
            unsetenv("TCBENCH_ATTENTION_TRAIN_MIN_TS");
        model *m = train_build(sc, 0);
        compiled *c = compile_dumped(m, dir, "gpt2");
        int fwd, bwd;
        count_externs(dir, m->name, &fwd, &bwd);
        print_message("gpt2 training, TCBENCH_ATTENTION_TRAIN_MIN_TS=%s: %d attention, %d "
                      "attention_grad\n",
                      rule[i].min ? rule[i].min : "(default)", fwd, bwd);
        assert_int_equal(fwd, rule[i].want);
        assert_int_equal(bwd, rule[i].want);
        compiled_free(c);
        model_free(m);
    }
    unsetenv("TCBENCH_ATTENTION_TRAIN_MIN_TS");
    rmdir(dir);
    suite_free(s);
}

// attention's window (nn_attention.c visible_mask): a causal window (the
// last w keys, GPT-Neo's local layers) and a band (w / 2 either side,
// Longformer) as shared bool buffers holding exactly those keys, applied by
// where in the math form and as a float bias of ATTENTION with --attention
// sdpa; both forms agree with the fp64 reference. A window covering every
// key is the plain mask.
static const uint8_t *mask_of(const model *m, const char *name) {
    for (int i = 0; i < m->g->n; i++)
        if (m->g->nodes[i].op == OP_BUFFER && !strcmp(m->g->nodes[i].name, name))
            return tensor_data(m->values[i]);
    fail_msg("no buffer %s", name);
    return NULL;
}

static void test_window(void **state) {
    (void)state;
    char path[300];
    const char *t = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/tcbench-test-window-XXXXXX", t && *t ? t : "/tmp");
    assert_non_null(mkdtemp(path));
    strcat(path, "/w.yaml");
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("name: w\ninputs: {x: {shape: [$batch, 7, 8]}}\nbody:\n"
          "  - attention: {heads: 2, causal: true, window: 3}\n"
          "  - attention: {heads: 2, window: 4}\n"
          "  - attention: {heads: 2, causal: true, window: 7}\n",
          f);
    assert_int_equal(fclose(f), 0);
    diag d;
    modeldef *md;
    if (modeldef_load(path, &md, &d) < 0)
        fail_msg("%d:%d: %s", d.line, d.col, d.msg);
    for (int sdpa = 0; sdpa < 2; sdpa++) {
        model *m;
        char err[600];
        model_prep mp = {.seed = 5, .fused_attention = sdpa};
        if (model_prepare(md, NULL, 0, 2, &mp, &m, err, sizeof err) != MODEL_PREP_DONE)
            fail_msg("%s", err);
        const uint8_t *win = mask_of(m, "window_mask.7x7.3"), *band = mask_of(m, "band_mask.7x7.4");
        for (int r = 0; r < 7; r++)
            for (int c = 0; c < 7; c++) {
                assert_int_equal(win[r * 7 + c], c <= r && r - c < 3);
                assert_int_equal(band[r * 7 + c], abs(r - c) <= 2);
            }
        // the window of 7 covers all 7 keys: the causal mask (by the flag with sdpa)
        assert_int_equal(count_op(m->g, OP_WHERE), sdpa ? 2 : 3);
        assert_int_equal(count_op(m->g, OP_ATTENTION), sdpa ? 3 : 0);
        double *ref[8];
        assert_int_equal(ref_run(m, ref, err, sizeof err), 0);
        eager *e = eager_new(m);
        tensor *out[8];
        eager_stats st;
        if (eager_run(e, out, &st) < 0)
            fail_msg("eager: %s", eager_error(e));
        assert_true(max_err(out[0], ref[0]) < 1e-4);
        tensor_free(out[0]);
        free(ref[0]);
        eager_free(e);
        model_free(m);
    }
    modeldef_free(md);
    remove(path);
    *strrchr(path, '/') = 0;
    rmdir(path);
}

// The CUDA kernels' texts compile with NVRTC after the prelude's.
static void test_nvrtc(void **state) {
    (void)state;
#if TCBENCH_HAVE_CUDA
    size_t a = strlen(cuda_prelude_text), b = strlen(cuda_attention_text),
           c = strlen(cuda_attention_grad_text);
    char *src = malloc(a + b + c + 3);
    assert_non_null(src);
    memcpy(src, cuda_prelude_text, a);
    src[a] = '\n';
    memcpy(src + a + 1, cuda_attention_text, b);
    src[a + 1 + b] = '\n';
    memcpy(src + a + b + 2, cuda_attention_grad_text, c + 1);
    for (int arch = 80; arch <= 90; arch += 10) {
        cuda_nvrtc_result r;
        char err[600];
        if (cuda_nvrtc_compile(src, "attention.cu", arch, &r, err, sizeof err) < 0)
            fail_msg("sm_%d: %s\n%s", arch, err, r.log);
        assert_true(r.cubin_size > 0);
        const char *names[] = {"tc_attention_f32", "tc_attention_f16", "tc_attg_rows_f32",
                               "tc_attg_keys_f16", "tc_attg_queries_f32", "tc_attg_queries_f16"};
        for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
            bool seen = false;
            size_t len = strlen(names[k]);
            for (size_t i = 0; i + len <= r.cubin_size && !seen; i++)
                seen = !memcmp(r.cubin + i, names[k], len);
            if (!seen)
                fail_msg("sm_%d: no %s in the cubin", arch, names[k]);
        }
        print_message("sm_%d: %zu bytes of cubin in %.1f s\n", arch, r.cubin_size, r.seconds);
        cuda_nvrtc_result_free(&r);
    }
    free(src);
#else
    skip();
#endif
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builder_checks),   cmocka_unit_test(test_kernel_vs_reference),
        cmocka_unit_test(test_compiled),         cmocka_unit_test(test_pattern_pass),
        cmocka_unit_test(test_pattern_pass_amp), cmocka_unit_test(test_sdpa_graphs),
        cmocka_unit_test(test_backward),         cmocka_unit_test(test_grad_vs_reference),
        cmocka_unit_test(test_train_pattern),    cmocka_unit_test(test_nvrtc),
        cmocka_unit_test(test_window),
        cmocka_unit_test(test_score_bias),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
