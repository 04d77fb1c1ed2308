// Tests for greedy generation with a KV cache (engine/bench/generate.h):
// each mode's decode of gpt2 (learned positions, MHA) and llama (rotary,
// GQA) at a tiny size against the fp64 reference's, in fp32 and in AMP (and
// the ChatGLMs, at the generation suite's cpu size in AMP), the cache's
// shapes and the bad inputs.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff/autocast.h"
#include "bench/accuracy.h"
#include "bench/axes.h"
#include "bench/generate.h"
#include "core/tensor.h"
#include "model/suite.h"
#include "ref/ref.h"

#include <math.h>

static const char *source_dir(void) {
    const char *src = getenv("TCBENCH_SOURCE_DIR");
    if (!src)
        fail_msg("TCBENCH_SOURCE_DIR is not set (meson test sets it)");
    return src;
}

static modeldef *load_path(const char *path) {
    modeldef *md;
    diag d;
    if (modeldef_load(path, &md, &d) < 0)
        fail_msg("%s: %d:%d: %s", path, d.line, d.col, d.msg);
    return md;
}

static modeldef *load(const char *name) {
    char path[600];
    snprintf(path, sizeof path, "%s/models/%s.yaml", source_dir(), name);
    return load_path(path);
}

#define OV(k, v) {k, v, "test", 1, 1}
static const modeldef_override gpt2_tiny[] = {OV("vocab", "97"), OV("seq", "64"),
                                              OV("d_model", "32"), OV("layers", "2"),
                                              OV("heads", "4")};
static const modeldef_override llama_tiny[] = {
    OV("vocab", "89"), OV("seq", "64"),     OV("d_model", "32"),
    OV("layers", "2"), OV("heads", "4"),    OV("kv_heads", "2"),
    OV("ffn", "48")};

// ChatGLM-6B (MHA, 2-D rotary, GLM's residual scaling, tied head) and
// ChatGLM2-6B (MQA of 2 groups, half-rotated interleaved heads)
static const modeldef_override glm_tiny[] = {OV("vocab", "83"), OV("seq", "64"),
                                             OV("d_model", "32"), OV("layers", "2"),
                                             OV("heads", "4"), OV("alpha", "2")};
static const modeldef_override glm2_tiny[] = {
    OV("vocab", "79"), OV("seq", "64"), OV("d_model", "32"), OV("layers", "2"),
    OV("heads", "4"),  OV("kv_heads", "2"), OV("ffn", "48")};

typedef struct tcase {
    const char *model;
    const modeldef_override *ov;
    int nov;
} tcase;

static const tcase cases[] = {{"gpt2", gpt2_tiny, 5}, {"llama", llama_tiny, 7}};
static const tcase glm_cases[] = {{"chatglm", glm_tiny, 6}, {"chatglm2", glm2_tiny, 7}};

// The caches of a mode's prefill are held in o->amp's dtype (f32 in fp32)
// and kv_bytes_per_token is what they hold a token: eager's grown caches
// (the prefill's outputs after the logits), compiled's static buffers.
static void check_caches(const gen_mode *g, const gen_opts *o, const gen_out *r, bool eager,
                         const char *name) {
    enum dtype want = o->amp;
    const graph *gr = gen_weights(g)->g;
    size_t bytes = 0;
    int64_t rows = 0;
    for (int i = 0; i < gr->n; i++) {
        const graph_node *n = &gr->nodes[i];
        bool cache = false;
        for (int k = 1; eager && k < gr->noutputs; k++)
            cache |= gr->outputs[k] == i;
        cache |= !eager && n->op == OP_BUFFER && n->name && strstr(n->name, "_cache");
        if (!cache)
            continue;
        if (n->dtype != want)
            fail_msg("%s: cache %%%d %s is %s, not %s", name, i, n->name ? n->name : "",
                     dtype_name(n->dtype), dtype_name(want));
        bytes += graph_node_bytes(n);
        rows = n->shape[0] * n->shape[2]; // (B, KVH, rows, hd)
    }
    assert_true(rows > 0);
    if ((int64_t)bytes != r->kv_bytes_per_token * rows)
        fail_msg("%s: caches of %zu bytes over %lld rows, kv_bytes_per_token %lld", name, bytes,
                 (long long)rows, (long long)r->kv_bytes_per_token);
}

// Greedy decode equals the fp64 reference's token for token in both modes,
// each mode's teacher-forced logits are within tol of the reference's at
// every step (near ties by gen_check's rule), the figures are filled
// (kernels, peak, a time per step) and the caches are in o->amp's dtype.
static void check_decode(modeldef *md, const modeldef_override *ov, int nov, const gen_opts *o,
                         double tol, const char *name) {
    gen_mode *e;
    char err[600];
    if (gen_mode_new(md, ov, nov, o, GEN_EAGER, NULL, &e, err, sizeof err) < 0)
        fail_msg("%s: %s", name, err);
    int32_t *prompt = gen_prompt(e, 3);
    gen_ref ref;
    if (gen_reference(e, prompt, &ref, err, sizeof err) < 0)
        fail_msg("%s reference: %s", name, err);
    gen_out free_run, forced;
    int64_t B = o->batch, N = o->new_tokens;
    assert_int_equal(gen_out_init(&free_run, o, gen_vocab(e), true), 0);
    assert_int_equal(gen_out_init(&forced, o, gen_vocab(e), true), 0);
    if (gen_mode_run(e, prompt, NULL, &free_run) < 0)
        fail_msg("%s: %s", name, gen_error(e));
    if (gen_mode_run(e, prompt, ref.tokens, &forced) < 0)
        fail_msg("%s: %s", name, gen_error(e));
    char why[300];
    double worst;
    if (gen_check(&forced, &ref, tol, o->amp != DT_F32, &worst, why, sizeof why))
        fail_msg("%s eager: %s", name, why);
    // AMP's logits are f16, about 1e-3 off fp64 (the tolerance judges near
    // ties); ten times that would be an error of the AMP path itself
    assert_true(worst < (o->amp != DT_F32 ? 10 * tol : tol));
    // greedy alone: the same tokens (these models have no near ties at these seeds)
    for (int64_t i = 0; i < B * N; i++)
        assert_int_equal(free_run.tokens[i], ref.tokens[i]);
    assert_true(free_run.kernels_prefill > 0 && free_run.kernels_step > 0);
    assert_true(free_run.peak_bytes > 0 && free_run.ttft_s > 0);
    for (int64_t j = 0; j + 1 < N; j++)
        assert_true(free_run.step_s[j] > 0);
    check_caches(e, o, &free_run, true, name);
    // compiled: the static cache and fused attention, the same tokens
    gen_mode *c;
    if (gen_mode_new(md, ov, nov, o, GEN_COMPILED, e, &c, err, sizeof err) < 0)
        fail_msg("%s compiled: %s", name, err);
    if (gen_mode_run(c, prompt, NULL, &free_run) < 0)
        fail_msg("%s compiled: %s", name, gen_error(c));
    for (int64_t i = 0; i < B * N; i++)
        assert_int_equal(free_run.tokens[i], ref.tokens[i]);
    check_caches(c, o, &free_run, false, name);
    if (gen_mode_run(c, prompt, ref.tokens, &forced) < 0)
        fail_msg("%s compiled: %s", name, gen_error(c));
    if (gen_check(&forced, &ref, tol, o->amp != DT_F32, &worst, why, sizeof why))
        fail_msg("%s compiled: %s", name, why);
    // a second generation starts over: the cache's old rows are not read
    if (gen_mode_run(c, prompt, ref.tokens, &forced) < 0 ||
        gen_check(&forced, &ref, tol, o->amp != DT_F32, &worst, why, sizeof why))
        fail_msg("%s compiled, again: %s", name, why);
    assert_true(gen_compile_s(c) > 0);
    gen_mode_free(c);
    gen_out_free(&free_run);
    gen_out_free(&forced);
    gen_ref_free(&ref);
    free(prompt);
    gen_mode_free(e);
}

// fp32 at a tiny size: within 1e-4 of the reference.
static void check_eager(const tcase *tc, int64_t B, int64_t P, int64_t N) {
    modeldef *md = load(tc->model);
    gen_opts o = {.batch = B, .prompt_len = P, .new_tokens = N, .seed = 7, .device = BENCH_DEV_CPU};
    check_decode(md, tc->ov, tc->nov, &o, 1e-4, tc->model);
    modeldef_free(md);
}

static void test_eager_matches_reference(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        check_eager(&cases[i], 1, 5, 6);
        check_eager(&cases[i], 2, 7, 4);
    }
    for (size_t i = 0; i < sizeof glm_cases / sizeof glm_cases[0]; i++)
        check_eager(&glm_cases[i], 1, 6, 5);
}

// AMP (f16) options: a batch of B, P prompt tokens, N new.
static gen_opts amp_opts(int64_t B, int64_t P, int64_t N) {
    return (gen_opts){.batch = B,
                      .prompt_len = P,
                      .new_tokens = N,
                      .seed = 7,
                      .device = BENCH_DEV_CPU,
                      .amp = DT_F16};
}

// AMP (f16) at the generation suite's cpu size (suites/generate.yaml:
// each model's layer and head structure at a few million parameters):
// gpt2, llama (GQA), ChatGLM-6B and ChatGLM2-6B decode the fp64
// reference's tokens greedily in both modes, teacher-forced within AMP's
// tolerance (accuracy.c's), with their caches in f16; a shorter prompt and
// fewer tokens than the suite's keep it fast.
static void test_amp_cpu_size(void **state) {
    (void)state;
    char path[600];
    snprintf(path, sizeof path, "%s/suites/generate.yaml", source_dir());
    suite *s;
    diag d;
    if (suite_load(path, "cpu", &s, &d) < 0)
        fail_msg("%s:%d:%d: %s", path, d.line, d.col, d.msg);
    const char *want[] = {"gpt2", "llama", "chatglm", "chatglm2"};
    assert_int_equal(s->ncases, 4);
    double tol = bench_tolerance(BENCH_PREC_AMP, BENCH_WL_GENERATE);
    for (int k = 0; k < s->ncases; k++) {
        const suite_case *sc = &s->cases[k];
        assert_string_equal(sc->name, want[k]);
        modeldef *md = load_path(sc->model_path);
        gen_opts o = amp_opts(1, 12, 6);
        check_decode(md, sc->overrides, sc->noverrides, &o, tol, sc->name);
        modeldef_free(md);
    }
    suite_free(s);
}

// AMP at a tiny size, a batch of two: gpt2 and llama as in fp32.
static void test_amp_tiny(void **state) {
    (void)state;
    double tol = bench_tolerance(BENCH_PREC_AMP, BENCH_WL_GENERATE);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        modeldef *md = load(cases[i].model);
        gen_opts o = amp_opts(2, 7, 4);
        check_decode(md, cases[i].ov, cases[i].nov, &o, tol, cases[i].model);
        modeldef_free(md);
    }
}

// AMP on the CPU caches autocast's casts of the parameters (generate.c's
// cache_casts, as torch.autocast does within a generation): llama's step
// models hold no cast of a parameter, each parameter that
// autocast casts has its f16 copy, a BUFFER standing for it, whose values are the
// parameter rounded to f16 bit for bit; and a generation's time to first
// token holds making them again (recast), which leaves them as they were.
static void test_amp_cast_cache(void **state) {
    (void)state;
    modeldef *md = load("llama");
    gen_opts o = amp_opts(1, 5, 3);
    for (int kind = 0; kind < 2; kind++) {
        gen_mode *g;
        char err[600];
        if (gen_mode_new(md, llama_tiny, 7, &o, kind ? GEN_COMPILED : GEN_EAGER, NULL, &g, err,
                         sizeof err) < 0)
            fail_msg("%s", err);
        gen_out r;
        assert_int_equal(gen_out_init(&r, &o, gen_vocab(g), false), 0);
        int32_t *prompt = gen_prompt(g, 3);
        assert_int_equal(gen_mode_run(g, prompt, NULL, &r), 0);
        const model *m = gen_weights(g);
        const graph *gr = m->g;
        int cached = 0;
        for (int v = 0; v < gr->n; v++) {
            const graph_node *n = &gr->nodes[v];
            if (n->op == OP_CAST && n->ia[1])
                assert_int_not_equal(gr->nodes[n->src[0]].op, OP_PARAM);
            int p = autocast_cached_param(gr, v);
            if (p < 0)
                continue;
            cached++;
            assert_int_equal(n->dtype, DT_F16);
            const float *w = tensor_f32(m->values[p]);
            const uint16_t *h = tensor_data(m->values[v]);
            for (int64_t i = 0; i < graph_node_numel(n); i++)
                if (h[i] != dtype_f32_to_f16(w[i]))
                    fail_msg("%s[%lld]: 0x%04x, the f16 of %.9g is 0x%04x", n->name, (long long)i,
                             h[i], w[i], dtype_f32_to_f16(w[i]));
        }
        assert_true(cached >= 2 * 7); // two layers' seven linear weights, at least
        free(prompt);
        gen_out_free(&r);
        gen_mode_free(g);
    }
    modeldef_free(md);
}

// The cache changes nothing: the reference's cached decode gives, at each
// step, the logits the model as written (no cache, one forward over its 64
// positions, the same weights) gives at that position when fed the prompt
// and the tokens decoded so far (causal: what follows does not matter).
static void test_cache_equals_full_forward(void **state) {
    (void)state;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const tcase *tc = &cases[c];
        modeldef *md = load(tc->model);
        int64_t P = 9, N = 7, S = 64;
        gen_opts o = {.batch = 1, .prompt_len = P, .new_tokens = N, .device = BENCH_DEV_CPU};
        gen_mode *e;
        char err[600];
        if (gen_mode_new(md, tc->ov, tc->nov, &o, GEN_EAGER, NULL, &e, err, sizeof err) < 0)
            fail_msg("%s: %s", tc->model, err);
        int32_t *prompt = gen_prompt(e, 5);
        gen_ref ref;
        if (gen_reference(e, prompt, &ref, err, sizeof err) < 0)
            fail_msg("%s", err);
        model *m;
        diag d;
        if (modeldef_build(md, tc->ov, tc->nov, 1, &(modeldef_opts){0}, &m, &d) < 0)
            fail_msg("%s", d.msg);
        assert_int_equal(model_init_values_from(m, 0, gen_weights(e)), 0);
        int32_t *tok = NULL;
        for (int i = 0; i < m->g->n; i++)
            if (m->g->nodes[i].name && !strcmp(m->g->nodes[i].name, "tokens"))
                tok = (int32_t *)tensor_data(m->values[i]);
        assert_non_null(tok);
        for (int64_t t = 0; t < S; t++)
            tok[t] = t < P ? prompt[t] : t < P + N - 1 ? ref.tokens[t - P] : 0;
        double *out[GRAPH_MAX_MODEL_OUTPUTS];
        if (ref_run(m, out, err, sizeof err) < 0)
            fail_msg("%s", err);
        int64_t V = ref.vocab;
        for (int64_t j = 0; j < N; j++)
            for (int64_t k = 0; k < V; k++) {
                double want = out[0][(P - 1 + j) * V + k], got = ref.logits[j * V + k];
                if (fabs(got - want) > 1e-9 * (1 + fabs(want)))
                    fail_msg("%s step %lld logit %lld: cached %.12g, full forward %.12g",
                             tc->model, (long long)j, (long long)k, got, want);
            }
        for (int i = 0; i < m->g->noutputs; i++)
            free(out[i]);
        model_free(m);
        gen_ref_free(&ref);
        free(prompt);
        gen_mode_free(e);
        modeldef_free(md);
    }
}

// int4 and int8 weights: eager (dequantize, then the GEMM) and compiled
// (the fused quantized GEMM) decode the fp64 reference's tokens on the
// same dequantized weights, in fp32 and in AMP, and the quantization's own
// error is reported.
static void test_quantized(void **state) {
    (void)state;
    modeldef *md = load("llama");
    for (int run = 0; run < 4; run++) {
        int bits = run % 2 ? 8 : 4;
        bool amp = run >= 2;
        double tol = amp ? bench_tolerance(BENCH_PREC_AMP, BENCH_WL_GENERATE) : 1e-4;
        gen_opts o = {.batch = 1,
                      .prompt_len = 6,
                      .new_tokens = 5,
                      .device = BENCH_DEV_CPU,
                      .weight_bits = bits,
                      .weight_group = 16,
                      .weight_scales = DT_F32,
                      .amp = amp ? DT_F16 : DT_F32};
        gen_mode *e, *c;
        char err[600], why[300];
        if (gen_mode_new(md, llama_tiny, 7, &o, GEN_EAGER, NULL, &e, err, sizeof err) < 0 ||
            gen_mode_new(md, llama_tiny, 7, &o, GEN_COMPILED, e, &c, err, sizeof err) < 0)
            fail_msg("int%d: %s", bits, err);
        double qe = gen_quant_error(e);
        assert_true(qe > 0 && qe < (bits == 4 ? 0.2 : 0.02));
        int32_t *prompt = gen_prompt(e, 2);
        gen_ref ref;
        if (gen_reference(e, prompt, &ref, err, sizeof err) < 0)
            fail_msg("%s", err);
        gen_out r;
        assert_int_equal(gen_out_init(&r, &o, gen_vocab(e), true), 0);
        gen_mode *modes[2] = {e, c};
        for (int k = 0; k < 2; k++) {
            if (gen_mode_run(modes[k], prompt, ref.tokens, &r) < 0)
                fail_msg("int%d mode %d: %s", bits, k, gen_error(modes[k]));
            if (gen_check(&r, &ref, tol, amp, NULL, why, sizeof why))
                fail_msg("int%d %s mode %d: %s", bits, amp ? "amp" : "fp32", k, why);
        }
        gen_out_free(&r);
        gen_ref_free(&ref);
        free(prompt);
        gen_mode_free(c);
        gen_mode_free(e);
    }
    modeldef_free(md);
}

// The plan holds by execution: under a cap of the budget (less what the
// plan leaves out: the other step models' small inputs), eager's decode
// runs out of memory at the step the plan says the context passes the
// budget, within one step; compiled's decode step at the planned longest
// context holds the planned bytes exactly.
// A budget (in steps of 256 bytes above the prefill's peak) whose longest
// context for kind lands past P + 16: *po its plan.
static size_t budget_past(const tcase *tc, modeldef *md, const gen_opts *o, gen_kind kind,
                          gen_plan_out *po) {
    char err[600];
    gen_plan_out full;
    if (gen_plan_tokens(md, tc->ov, tc->nov, o, kind, (size_t)1 << 40, &full, err, sizeof err) < 0)
        fail_msg("%s: %s", tc->model, err);
    assert_int_equal(full.tokens, 64); // the model's positions
    assert_true(full.capped);
    size_t budget = full.prefill_peak;
    do {
        budget += 256;
        if (gen_plan_tokens(md, tc->ov, tc->nov, o, kind, budget, po, err, sizeof err) < 0)
            fail_msg("%s: %s", tc->model, err);
    } while (po->tokens < o->prompt_len + 16);
    assert_false(po->capped);
    return budget;
}

// A generation of context L (its prefill and every decode step) under a cap
// of the budget: 0 when it runs, -1 when it runs out of memory (any other
// failure fails the test). The cap adds what the plan leaves out: every
// value live but the prefill's sources (the other step models' inputs and
// masks), so that the prefill's own sources and the budget are what the
// plan counts.
static int run_capped(const tcase *tc, modeldef *md, gen_opts o, gen_kind kind, int64_t L,
                      size_t budget, gen_out *r) {
    char err[600];
    o.new_tokens = L - o.prompt_len + 1; // a cache of prompt + new - 1 rows
    gen_mode *g;
    if (gen_mode_new(md, tc->ov, tc->nov, &o, kind, NULL, &g, err, sizeof err) < 0)
        fail_msg("%s", err);
    int32_t *prompt = gen_prompt(g, 4);
    assert_int_equal(gen_out_init(r, &o, gen_vocab(g), false), 0);
    const graph *pre = gen_weights(g)->g;
    size_t sources = 0;
    for (int i = 0; i < pre->n; i++)
        if (op_kind(pre->nodes[i].op) == OPK_SOURCE)
            sources += tensor_mem_round(graph_node_bytes(&pre->nodes[i]));
    tensor_mem_set_limit(budget + tensor_mem_live() - sources);
    int rc = gen_mode_run(g, prompt, NULL, r);
    tensor_mem_set_limit(0);
    if (rc < 0 && !strstr(gen_error(g), "out of memory"))
        fail_msg("%s: %s", tc->model, gen_error(g));
    free(prompt);
    gen_mode_free(g);
    return rc;
}

static void check_plan_by_run(const tcase *tc, enum dtype amp) {
    modeldef *md = load(tc->model);
    const int64_t P = 8;
    gen_opts o = {
        .batch = 1, .prompt_len = P, .new_tokens = 1, .device = BENCH_DEV_CPU, .amp = amp};
    const char *prec = dtype_name(amp);
    gen_plan_out po;
    gen_out r;
    // eager: the generation of the planned context runs, one token more does not
    size_t budget = budget_past(tc, md, &o, GEN_EAGER, &po);
    if (run_capped(tc, md, o, GEN_EAGER, po.tokens, budget, &r) < 0)
        fail_msg("%s eager %s: planned %lld tokens within %zu bytes, the run stopped at %lld",
                 tc->model, prec, (long long)po.tokens, budget, (long long)(P + r.steps_done));
    gen_out_free(&r);
    if (run_capped(tc, md, o, GEN_EAGER, po.tokens + 1, budget, &r) == 0)
        fail_msg("%s eager %s: planned %lld tokens within %zu bytes, %lld ran", tc->model, prec,
                 (long long)po.tokens, budget, (long long)po.tokens + 1);
    gen_out_free(&r);
    // compiled (by the figures its runs report, uncapped): its decode step
    // at the planned context holds what the plan says, byte for byte (the
    // weights, the static cache, the inputs, the arena); no step of that
    // generation (its prefill included) holds more than the budget, and some
    // step of one token more does
    budget = budget_past(tc, md, &o, GEN_COMPILED, &po);
    assert_int_equal(run_capped(tc, md, o, GEN_COMPILED, po.tokens, (size_t)1 << 40, &r), 0);
    if (r.step_peak_bytes != po.peak_at_tokens || r.peak_bytes > budget)
        fail_msg("%s compiled %s at %lld tokens: planned %zu bytes a step within %zu, the step "
                 "held %zu, the generation %zu",
                 tc->model, prec, (long long)po.tokens, po.peak_at_tokens, budget,
                 r.step_peak_bytes, r.peak_bytes);
    gen_out_free(&r);
    assert_int_equal(run_capped(tc, md, o, GEN_COMPILED, po.tokens + 1, (size_t)1 << 40, &r), 0);
    if (r.peak_bytes <= budget)
        fail_msg("%s compiled %s: %lld tokens planned past %zu bytes, the generation held %zu",
                 tc->model, prec, (long long)po.tokens + 1, budget, r.peak_bytes);
    gen_out_free(&r);
    modeldef_free(md);
}

// gpt2 with multi-head attention, llama with multi-query (one kv head);
// fp32 and AMP (f16 caches, the weights' f16 copies, f16 activations)
static const modeldef_override llama_mqa[] = {
    OV("vocab", "89"), OV("seq", "64"),     OV("d_model", "32"),
    OV("layers", "2"), OV("heads", "4"),    OV("kv_heads", "1"),
    OV("ffn", "48")};

static void test_plan_by_run(void **state) {
    (void)state;
    for (int amp = 0; amp < 2; amp++) {
        check_plan_by_run(&cases[0], amp ? DT_F16 : DT_F32);
        check_plan_by_run(&(tcase){"llama", llama_mqa, 7}, amp ? DT_F16 : DT_F32);
    }
}

// Multi-turn chat: with the earlier rounds' cache kept and without it
// (each round prefills the whole dialogue), eager and compiled, the same
// tokens every round; and the first round's equal a plain generation's.
static void check_chat(enum dtype amp) {
    modeldef *md = load("llama");
    gen_opts o = {.batch = 2, .device = BENCH_DEV_CPU, .amp = amp};
    const int64_t R = 3, U = 5, G = 4, B = 2;
    int32_t turns[R * B * U], first[B * R * G], got[B * R * G];
    for (int64_t i = 0; i < R * B * U; i++)
        turns[i] = (int32_t)((i * 37 + 11) % 89);
    char err[600];
    gen_chat *base = NULL; // eager with reuse: the weights every other one shares
    for (int k = 0; k < 4; k++) {
        gen_chat_opts c = {.rounds = R, .turn_len = U, .gen_len = G, .reuse = k % 2 == 0};
        gen_chat *ch;
        if (gen_chat_new(md, llama_tiny, 7, &o, &c, k < 2 ? GEN_EAGER : GEN_COMPILED, base, &ch,
                         err, sizeof err) < 0)
            fail_msg("chat %d: %s", k, err);
        double ttft[R];
        if (gen_chat_run(ch, turns, k ? got : first, ttft) < 0)
            fail_msg("chat %d: %s", k, gen_chat_error(ch));
        for (int64_t r = 0; r < R; r++)
            assert_true(ttft[r] > 0);
        for (int64_t i = 0; k && i < B * R * G; i++)
            if (got[i] != first[i])
                fail_msg("chat %d (%s, %s, %s): token %lld is %d, eager with reuse gave %d", k,
                         k < 2 ? "eager" : "compiled", c.reuse ? "reuse" : "no reuse",
                         dtype_name(amp), (long long)i, got[i], first[i]);
        if (k == 0)
            base = ch;
        else
            gen_chat_free(ch);
    }
    gen_chat_free(base);
    // round 0 is a plain generation of its user turn
    gen_opts p = {
        .batch = B, .prompt_len = U, .new_tokens = G, .device = BENCH_DEV_CPU, .amp = amp};
    gen_mode *e;
    if (gen_mode_new(md, llama_tiny, 7, &p, GEN_EAGER, NULL, &e, err, sizeof err) < 0)
        fail_msg("%s", err);
    gen_out r;
    assert_int_equal(gen_out_init(&r, &p, gen_vocab(e), false), 0);
    assert_int_equal(gen_mode_run(e, turns, NULL, &r), 0);
    for (int64_t b = 0; b < B; b++)
        for (int64_t j = 0; j < G; j++)
            assert_int_equal(r.tokens[b * G + j], first[(b * R + 0) * G + j]);
    gen_out_free(&r);
    gen_mode_free(e);
    modeldef_free(md);
}

// fp32, and AMP (f16 caches kept across the rounds)
static void test_chat(void **state) {
    (void)state;
    check_chat(DT_F32);
    check_chat(DT_F16);
}

// An eager mode, its prompt, the reference's decode and a teacher-forced
// run against it: what the checks below perturb.
typedef struct forced {
    modeldef *md;
    gen_mode *e;
    int32_t *prompt;
    gen_ref ref;
    gen_out r;
} forced;

static void forced_run(forced *f, const tcase *tc, const gen_opts *o) {
    char err[600];
    f->md = load(tc->model);
    if (gen_mode_new(f->md, tc->ov, tc->nov, o, GEN_EAGER, NULL, &f->e, err, sizeof err) < 0)
        fail_msg("%s", err);
    f->prompt = gen_prompt(f->e, 1);
    assert_int_equal(gen_reference(f->e, f->prompt, &f->ref, err, sizeof err), 0);
    assert_int_equal(gen_out_init(&f->r, o, gen_vocab(f->e), true), 0);
    assert_int_equal(gen_mode_run(f->e, f->prompt, f->ref.tokens, &f->r), 0);
}

static void forced_free(forced *f) {
    gen_out_free(&f->r);
    gen_ref_free(&f->ref);
    free(f->prompt);
    gen_mode_free(f->e);
    modeldef_free(f->md);
}

// A wrong token is caught: the check names the step and row.
static void test_check_fails(void **state) {
    (void)state;
    gen_opts o = {.batch = 1, .prompt_len = 4, .new_tokens = 3, .device = BENCH_DEV_CPU};
    forced f;
    forced_run(&f, &cases[0], &o);
    gen_out *r = &f.r;
    gen_ref *ref = &f.ref;
    int64_t V = gen_vocab(f.e);
    r->tokens[1] = (r->tokens[1] + 1) % (int32_t)V;
    ref->gap[1] = 1e9; // no tie: the token must match
    char why[300] = "";
    assert_int_equal(gen_check(r, ref, 1e-3, false, NULL, why, sizeof why), 1);
    assert_non_null(strstr(why, "step 1, row 0"));
    // a near tie: the other token passes where the logits are close, within
    // tol or (AMP's fallback) at a cosine of at least 0.99; not when they are not
    ref->gap[1] = 0;
    float *row = r->logits + 1 * V; // step 1, row 0
    for (int64_t k = 0; k < V; k++)
        row[k] = (float)(ref->logits[V + k] * 1.01); // rel_l2 0.01, cosine 1
    assert_int_equal(gen_check(r, ref, 1e-3, false, NULL, why, sizeof why), 1);
    assert_non_null(strstr(why, "a near tie"));
    assert_int_equal(gen_check(r, ref, 1e-3, true, NULL, why, sizeof why), 0);
    for (int64_t k = 0; k < V; k++)
        row[k] = (float)(k % 2 ? ref->logits[V + k] : -ref->logits[V + k]);
    assert_int_equal(gen_check(r, ref, 1e-3, true, NULL, why, sizeof why), 1);
    assert_non_null(strstr(why, "cosine below 0.99"));
    forced_free(&f);
}

// AMP's tolerance still fails a wrong decode: an AMP run that passes
// against the reference fails it once every weight is scaled by 0.5 or 1.5
// (the step models share them), at a step that is no near tie; in f16 and
// in bf16 at its 8x wider tolerance (gen_check_tol).
static void check_fails_amp(enum dtype amp) {
    gen_opts o = amp_opts(1, 5, 6);
    o.amp = amp;
    double tol = gen_check_tol(bench_tolerance(BENCH_PREC_AMP, BENCH_WL_GENERATE), amp);
    forced f;
    forced_run(&f, &cases[1], &o);
    char why[300] = "";
    if (gen_check(&f.r, &f.ref, tol, true, NULL, why, sizeof why))
        fail_msg("unperturbed: %s", why);
    const model *m = gen_weights(f.e);
    for (int i = 0; i < m->g->n; i++) {
        if (m->g->nodes[i].op != OP_PARAM)
            continue;
        float *w = tensor_f32(m->values[i]);
        for (int64_t j = 0; j < tensor_numel(m->values[i]); j++)
            w[j] *= ((j * 2654435761u) >> 7) & 1 ? 1.5f : 0.5f;
    }
    assert_int_equal(gen_mode_run(f.e, f.prompt, f.ref.tokens, &f.r), 0);
    assert_int_equal(gen_check(&f.r, &f.ref, tol, true, NULL, why, sizeof why), 1);
    assert_non_null(strstr(why, "its top two logits"));
    forced_free(&f);
}

static void test_check_fails_amp(void **state) {
    (void)state;
    assert_true(gen_check_tol(1e-3, DT_BF16) == 8e-3 && gen_check_tol(1e-3, DT_F16) == 1e-3);
    check_fails_amp(DT_F16);
    check_fails_amp(DT_BF16);
}

// A context past the model's positions, a prompt of 0, a model that is
// no decoder: one message each, nothing built.
static void test_bad_input(void **state) {
    (void)state;
    modeldef *md = load("gpt2");
    gen_mode *e = NULL;
    char err[600] = "";
    gen_opts o = {.batch = 1, .prompt_len = 60, .new_tokens = 10, .device = BENCH_DEV_CPU};
    assert_int_equal(gen_mode_new(md, gpt2_tiny, 5, &o, GEN_EAGER, NULL, &e, err, sizeof err), -1);
    assert_null(e);
    assert_non_null(strstr(err, "exceeds the model's 64 positions"));
    o.prompt_len = 0;
    assert_int_equal(gen_mode_new(md, gpt2_tiny, 5, &o, GEN_EAGER, NULL, &e, err, sizeof err), -1);
    assert_non_null(strstr(err, "needs a batch, a prompt and new tokens"));
    modeldef_free(md);
    md = load("mlp");
    o.prompt_len = 4;
    assert_int_equal(gen_mode_new(md, NULL, 0, &o, GEN_EAGER, NULL, &e, err, sizeof err), -1);
    assert_null(e);
    modeldef_free(md);
}

int main(int argc, char **argv) {
    if (argc > 1) // one test by name (a glob): build/tests/test_generate 'test_amp*'
        cmocka_set_test_filter(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_eager_matches_reference),
        cmocka_unit_test(test_amp_cpu_size),
        cmocka_unit_test(test_amp_tiny),
        cmocka_unit_test(test_amp_cast_cache),
        cmocka_unit_test(test_cache_equals_full_forward),
        cmocka_unit_test(test_quantized),
        cmocka_unit_test(test_plan_by_run),
        cmocka_unit_test(test_chat),
        cmocka_unit_test(test_check_fails),
        cmocka_unit_test(test_check_fails_amp),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
