// Tests for greedy generation with a KV cache (engine/bench/generate.h):
// each mode's decode of gpt2 (learned positions, MHA) and llama (rotary,
// GQA) at a tiny size against the fp64 reference's, the cache's shapes and
// the bad inputs.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/axes.h"
#include "bench/generate.h"
#include "core/tensor.h"
#include "ref/ref.h"

#include <math.h>

static modeldef *load(const char *name) {
    const char *src = getenv("TCBENCH_SOURCE_DIR");
    if (!src)
        fail_msg("TCBENCH_SOURCE_DIR is not set (meson test sets it)");
    char path[600];
    snprintf(path, sizeof path, "%s/models/%s.yaml", src, name);
    modeldef *md;
    diag d;
    if (modeldef_load(path, &md, &d) < 0)
        fail_msg("%s: %d:%d: %s", path, d.line, d.col, d.msg);
    return md;
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

// Eager greedy decode equals the fp64 reference's token for token, its
// teacher-forced logits are within 1e-4 of the reference's at every step,
// and the figures are filled: kernels, peak, a time per step.
static void check_eager(const tcase *tc, int64_t B, int64_t P, int64_t N) {
    modeldef *md = load(tc->model);
    gen_opts o = {.batch = B, .prompt_len = P, .new_tokens = N, .seed = 7,
                  .device = BENCH_DEV_CPU};
    gen_mode *e;
    char err[600];
    if (gen_mode_new(md, tc->ov, tc->nov, &o, GEN_EAGER, NULL, &e, err, sizeof err) < 0)
        fail_msg("%s: %s", tc->model, err);
    int32_t *prompt = gen_prompt(e, 3);
    gen_ref ref;
    if (gen_reference(e, prompt, &ref, err, sizeof err) < 0)
        fail_msg("%s reference: %s", tc->model, err);
    gen_out free_run, forced;
    assert_int_equal(gen_out_init(&free_run, &o, gen_vocab(e), true), 0);
    assert_int_equal(gen_out_init(&forced, &o, gen_vocab(e), true), 0);
    if (gen_mode_run(e, prompt, NULL, &free_run) < 0)
        fail_msg("%s: %s", tc->model, gen_error(e));
    if (gen_mode_run(e, prompt, ref.tokens, &forced) < 0)
        fail_msg("%s: %s", tc->model, gen_error(e));
    char why[300];
    double worst;
    if (gen_check(&forced, &ref, 1e-4, &worst, why, sizeof why))
        fail_msg("%s eager: %s", tc->model, why);
    assert_true(worst < 1e-4);
    // greedy alone: the same tokens (these tiny models have no near ties)
    for (int64_t i = 0; i < B * N; i++)
        assert_int_equal(free_run.tokens[i], ref.tokens[i]);
    assert_true(free_run.kernels_prefill > 0 && free_run.kernels_step > 0);
    assert_true(free_run.peak_bytes > 0 && free_run.ttft_s > 0);
    for (int64_t j = 0; j + 1 < N; j++)
        assert_true(free_run.step_s[j] > 0);
    // compiled: the static cache and fused attention, the same tokens
    gen_mode *c;
    if (gen_mode_new(md, tc->ov, tc->nov, &o, GEN_COMPILED, e, &c, err, sizeof err) < 0)
        fail_msg("%s compiled: %s", tc->model, err);
    if (gen_mode_run(c, prompt, NULL, &free_run) < 0)
        fail_msg("%s compiled: %s", tc->model, gen_error(c));
    for (int64_t i = 0; i < B * N; i++)
        assert_int_equal(free_run.tokens[i], ref.tokens[i]);
    if (gen_mode_run(c, prompt, ref.tokens, &forced) < 0)
        fail_msg("%s compiled: %s", tc->model, gen_error(c));
    if (gen_check(&forced, &ref, 1e-4, &worst, why, sizeof why))
        fail_msg("%s compiled: %s", tc->model, why);
    // a second generation starts over: the cache's old rows are not read
    if (gen_mode_run(c, prompt, ref.tokens, &forced) < 0 ||
        gen_check(&forced, &ref, 1e-4, &worst, why, sizeof why))
        fail_msg("%s compiled, again: %s", tc->model, why);
    assert_true(gen_compile_s(c) > 0);
    gen_mode_free(c);
    gen_out_free(&free_run);
    gen_out_free(&forced);
    gen_ref_free(&ref);
    free(prompt);
    gen_mode_free(e);
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
// same dequantized weights, and the quantization's own error is reported.
static void test_quantized(void **state) {
    (void)state;
    modeldef *md = load("llama");
    for (int bits = 4; bits <= 8; bits += 4) {
        gen_opts o = {.batch = 1, .prompt_len = 6, .new_tokens = 5, .device = BENCH_DEV_CPU,
                      .weight_bits = bits, .weight_group = 16, .weight_scales = DT_F32};
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
            if (gen_check(&r, &ref, 1e-4, NULL, why, sizeof why))
                fail_msg("int%d mode %d: %s", bits, k, why);
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
static void check_plan_by_run(const tcase *tc) {
    modeldef *md = load(tc->model);
    const int64_t P = 8, S = 64;
    gen_opts o = {.batch = 1, .prompt_len = P, .new_tokens = 1, .device = BENCH_DEV_CPU};
    char err[600];
    gen_plan_out full, po;
    if (gen_plan_tokens(md, tc->ov, tc->nov, &o, GEN_EAGER, (size_t)1 << 40, &full, err,
                        sizeof err) < 0)
        fail_msg("%s: %s", tc->model, err);
    assert_int_equal(full.tokens, S);
    assert_true(full.capped);
    // a budget whose longest eager context lands mid-way
    size_t budget = full.prefill_peak;
    do {
        budget += 256;
        assert_int_equal(gen_plan_tokens(md, tc->ov, tc->nov, &o, GEN_EAGER, budget, &po, err,
                                         sizeof err),
                         0);
    } while (po.tokens < P + 16);
    assert_false(po.capped);
    o.new_tokens = S - P;
    gen_mode *e;
    if (gen_mode_new(md, tc->ov, tc->nov, &o, GEN_EAGER, NULL, &e, err, sizeof err) < 0)
        fail_msg("%s", err);
    int32_t *prompt = gen_prompt(e, 4);
    gen_out r;
    assert_int_equal(gen_out_init(&r, &o, gen_vocab(e), false), 0);
    size_t others = tensor_mem_live() - po.weights_bytes;
    tensor_mem_set_limit(budget + others);
    int rc = gen_mode_run(e, prompt, NULL, &r);
    tensor_mem_set_limit(0);
    assert_int_equal(rc, -1);
    assert_non_null(strstr(gen_error(e), "out of memory"));
    int64_t reached = P + r.steps_done; // the context of the last step that ran
    if (reached < po.tokens - 1 || reached > po.tokens + 1)
        fail_msg("%s eager: planned %lld tokens within %zu bytes, the run reached %lld (%s)",
                 tc->model, (long long)po.tokens, budget, (long long)reached, gen_error(e));
    gen_out_free(&r);
    free(prompt);
    gen_mode_free(e);
    // compiled: its decode step at the planned context holds what the plan
    // says, byte for byte (the weights, the static cache, the inputs, the arena)
    assert_int_equal(gen_plan_tokens(md, tc->ov, tc->nov, &o, GEN_COMPILED, budget, &po, err,
                                     sizeof err),
                     0);
    assert_true(po.tokens > P + 16);
    o.new_tokens = po.tokens - P + 1; // a cache of prompt + new - 1 rows
    gen_mode *c;
    if (gen_mode_new(md, tc->ov, tc->nov, &o, GEN_COMPILED, NULL, &c, err, sizeof err) < 0)
        fail_msg("%s", err);
    prompt = gen_prompt(c, 4);
    assert_int_equal(gen_out_init(&r, &o, gen_vocab(c), false), 0);
    assert_int_equal(gen_mode_run(c, prompt, NULL, &r), 0);
    if (r.step_peak_bytes != po.peak_at_tokens)
        fail_msg("%s compiled at %lld tokens: planned %zu bytes, the step held %zu", tc->model,
                 (long long)po.tokens, po.peak_at_tokens, r.step_peak_bytes);
    gen_out_free(&r);
    free(prompt);
    gen_mode_free(c);
    modeldef_free(md);
}

// gpt2 with multi-head attention, llama with multi-query (one kv head)
static const modeldef_override llama_mqa[] = {
    OV("vocab", "89"), OV("seq", "64"),     OV("d_model", "32"),
    OV("layers", "2"), OV("heads", "4"),    OV("kv_heads", "1"),
    OV("ffn", "48")};

static void test_plan_by_run(void **state) {
    (void)state;
    check_plan_by_run(&cases[0]);
    check_plan_by_run(&(tcase){"llama", llama_mqa, 7});
}

// Multi-turn chat: with the earlier rounds' cache kept and without it
// (each round prefills the whole dialogue), eager and compiled, the same
// tokens every round; and the first round's equal a plain generation's.
static void test_chat(void **state) {
    (void)state;
    modeldef *md = load("llama");
    gen_opts o = {.batch = 2, .device = BENCH_DEV_CPU};
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
                fail_msg("chat %d (%s, %s): token %lld is %d, eager with reuse gave %d", k,
                         k < 2 ? "eager" : "compiled", c.reuse ? "reuse" : "no reuse",
                         (long long)i, got[i], first[i]);
        if (k == 0)
            base = ch;
        else
            gen_chat_free(ch);
    }
    gen_chat_free(base);
    // round 0 is a plain generation of its user turn
    gen_opts p = {.batch = B, .prompt_len = U, .new_tokens = G, .device = BENCH_DEV_CPU};
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

// A wrong token is caught: the check names the step and row.
static void test_check_fails(void **state) {
    (void)state;
    modeldef *md = load("gpt2");
    gen_opts o = {.batch = 1, .prompt_len = 4, .new_tokens = 3, .device = BENCH_DEV_CPU};
    gen_mode *e;
    char err[600];
    if (gen_mode_new(md, gpt2_tiny, 5, &o, GEN_EAGER, NULL, &e, err, sizeof err) < 0)
        fail_msg("%s", err);
    int32_t *prompt = gen_prompt(e, 1);
    gen_ref ref;
    assert_int_equal(gen_reference(e, prompt, &ref, err, sizeof err), 0);
    gen_out r;
    assert_int_equal(gen_out_init(&r, &o, gen_vocab(e), true), 0);
    assert_int_equal(gen_mode_run(e, prompt, ref.tokens, &r), 0);
    r.tokens[1] = (r.tokens[1] + 1) % (int32_t)gen_vocab(e);
    ref.gap[1] = 1e9; // no tie: the token must match
    char why[300] = "";
    assert_int_equal(gen_check(&r, &ref, 1e-3, NULL, why, sizeof why), 1);
    assert_non_null(strstr(why, "step 1, row 0"));
    gen_out_free(&r);
    gen_ref_free(&ref);
    free(prompt);
    gen_mode_free(e);
    modeldef_free(md);
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_eager_matches_reference),
        cmocka_unit_test(test_cache_equals_full_forward),
        cmocka_unit_test(test_quantized),
        cmocka_unit_test(test_plan_by_run),
        cmocka_unit_test(test_chat),
        cmocka_unit_test(test_check_fails),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
