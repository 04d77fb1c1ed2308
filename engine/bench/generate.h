// generate: greedy decoding with a KV cache, the engine of the generate
// workload. A mode is the step models it runs and their executors:
//
//   eager    Hugging Face's eager generate: a prefill over the prompt, then
//            one step model a token, each built for its past length (the
//            shapes a framework's eager dispatch meets anew every step).
//            The past keys and values are its inputs, concatenated with the
//            new ones into fresh tensors (its outputs, the next step's
//            inputs); attention as the model's layers build it.
//   compiled gpt-fast's: a prefill and ONE decode step, each compiled once,
//            over a static cache of prompt + new tokens rows a layer,
//            written in place at a position given at run time and read by
//            fused attention up to its valid rows.
//
//   gen_opts o = {.batch = 1, .prompt_len = 16, .new_tokens = 8};
//   gen_mode *e, *c;
//   gen_mode_new(md, ov, nov, &o, GEN_EAGER, NULL, &e, err, cap);
//   gen_mode_new(md, ov, nov, &o, GEN_COMPILED, e, &c, err, cap);  // e's weights
//   int32_t *prompt = gen_prompt(e, seed);        // B x P token ids
//   gen_out r;
//   gen_out_init(&r, &o, vocab);
//   gen_mode_run(e, prompt, NULL, &r);            // greedy: r.tokens, r.ttft_s, r.step_s
//   gen_reference(e, prompt, &ref, err, cap);     // fp64 on eager's step models
//   gen_mode_run(c, prompt, ref.tokens, &r);      // teacher-forced: r.logits of each step
//   gen_check(&r, &ref, 1e-3, false, NULL, why, sizeof why);
//
// N new tokens are the prefill's argmax and N - 1 decode steps. Every mode
// does the same host work around its steps (inputs set, argmax over the
// last position's logits), timed with them.
#pragma once
#include "config.h"
#include "compile/compile.h"
#include "model/modeldef.h"
#include "model/suite.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { GEN_EAGER, GEN_COMPILED } gen_kind;

// The generate workload's prompt and new tokens for a case: --prompt-len /
// --new-tokens, else the suite's prompt_len / new_tokens, else 32 each.
#define GEN_DEFAULT_PROMPT 32
#define GEN_DEFAULT_TOKENS 32
static inline int64_t gen_prompt_len(const bench_config *cfg, const suite_case *c) {
    return cfg->prompt_len ? cfg->prompt_len : c->prompt_len ? c->prompt_len : GEN_DEFAULT_PROMPT;
}
static inline int64_t gen_new_tokens(const bench_config *cfg, const suite_case *c) {
    return cfg->new_tokens ? cfg->new_tokens : c->new_tokens ? c->new_tokens : GEN_DEFAULT_TOKENS;
}
// The chat workload's rounds: --rounds, else the suite's rounds, else 4;
// each a user turn of the prompt length and the new tokens answered.
#define GEN_DEFAULT_ROUNDS 4
static inline int64_t gen_rounds(const bench_config *cfg, const suite_case *c) {
    return cfg->rounds ? cfg->rounds : c->rounds ? c->rounds : GEN_DEFAULT_ROUNDS;
}

typedef struct gen_opts {
    int64_t batch, prompt_len, new_tokens;
    uint64_t seed;               // the weights (and nothing else)
    int device;                  // BENCH_DEV_CPU or BENCH_DEV_CUDA
    const compile_opts *compile; // GEN_COMPILED; NULL: compile_opts_default()
    bool fused_attention;        // eager: one fused attention a layer (--attention sdpa)
    // DT_F32, or AMP's low dtype (DT_F16, DT_BF16): every step model through
    // autocast, its KV caches held in it (both modes; docs/generation.md)
    enum dtype amp;
    // weight-only quantization of the linears (--weights; quantize.h): bits
    // 0 (f32 weights), 8 or 4, per group of weight_group, weight_scales' dtype
    int weight_bits;
    int64_t weight_group;
    enum dtype weight_scales;
} gen_opts;

typedef struct gen_out {
    int64_t batch, new_tokens, vocab;
    int32_t *tokens;  // B x N: token j of row b at [b * N + j]
    float *logits;    // N x B x V: the last position's logits of each step; NULL: not kept
    double ttft_s;    // the prefill and its argmax
    double *step_s;   // N - 1 decode steps, each with its argmax
    size_t peak_bytes;        // the most bytes live in any step (weights and caches included)
    int64_t kernels_prefill;  // kernels of the prefill
    int64_t kernels_step;     // kernels of the last decode step
    int64_t kv_bytes_per_token; // keys and values a token adds to the caches, every layer
    int64_t steps_done;         // decode steps that ran (a failed run stops short)
    size_t step_peak_bytes;     // the last decode step's peak (compiled: sources and arena)
} gen_out;

// Buffers for o's shapes; keep_logits: also the logits. -1 when memory runs out.
int gen_out_init(gen_out *r, const gen_opts *o, int64_t vocab, bool keep_logits);
void gen_out_free(gen_out *r);

typedef struct gen_mode gen_mode;

// The step models of kind (their weights drawn from o->seed, or shared
// with `share`'s) and their executors. -1 with err: a prompt and new
// tokens past the model's positions, a model that is no decoder, the
// executor's words.
int gen_mode_new(const modeldef *md, const modeldef_override *ov, int nov, const gen_opts *o,
                 gen_kind kind, const gen_mode *share, gen_mode **out, char *err, size_t cap);
void gen_mode_free(gen_mode *g);
int64_t gen_vocab(const gen_mode *g);
// The prefill's model, which holds the weights every step model shares.
const model *gen_weights(const gen_mode *g);
// Seeded prompt token ids in [0, vocab), B x P; caller frees. NULL when memory runs out.
int32_t *gen_prompt(const gen_mode *g, uint64_t seed);
// n seeded token ids in [0, vocab) (gen_prompt's; the chat workload's turns).
void gen_seeded_ids(int32_t *ids, int64_t n, int64_t vocab, uint64_t seed);
// One generation: greedy, or with `force` (B x N: the tokens to feed
// after each step, a reference's) teacher-forced, so that each step's
// logits can be compared. r->tokens are the argmaxes either way. -1 with
// gen_error.
int gen_mode_run(gen_mode *g, const int32_t *prompt, const int32_t *force, gen_out *r);
const char *gen_error(const gen_mode *g);
// --weights: the relative RMS error of the quantized weights against the
// f32 ones (quantize.h); NaN without quantization.
double gen_quant_error(const gen_mode *g);
// Compile time of the compiled mode's step models (s), 0 for eager.
double gen_compile_s(const gen_mode *g);

// The fp64 reference's greedy decode on eager's step models (gen_mode of
// GEN_EAGER): tokens and, for each step, the last position's logits
// (N x B x V doubles) and their top-two gap. -1 with err.
typedef struct gen_ref {
    int64_t batch, new_tokens, vocab;
    int32_t *tokens;
    double *logits;
    double *gap; // N x B: top logit minus the runner-up
} gen_ref;
int gen_reference(const gen_mode *eager, const int32_t *prompt, gen_ref *ref, char *err,
                  size_t cap);
void gen_ref_free(gen_ref *ref);

// A teacher-forced run against the reference: every step's argmax equals
// the reference's token, except where the reference's top two logits are
// closer than tol * max(1, |top|): there the step's logits must be within
// tol of the reference's (relative L2 over the row), or with
// cosine_fallback (AMP, as accuracy.h judges AMP outputs) have a cosine
// similarity of at least BENCH_COSINE_MIN with them. 0 when it passes; else
// 1 with why naming the first step and row that fails. *worst (may be
// NULL): the largest relative L2 of any step's logits.
int gen_check(const gen_out *r, const gen_ref *ref, double tol, bool cosine_fallback, double *worst,
              char *why, size_t cap);
// gen_check's tol for a decode in dtype amp (DT_F32: fp32) from the
// workload's tolerance (AMP's is f16's): bf16 rounds 8x coarser (8
// significant bits to f16's 11), so its logits sit about 8x further from
// fp64 and a near tie may flip at an 8x wider gap.
double gen_check_tol(double tol, enum dtype amp);

// ---- the memory-budget study (tcbench plan) ---------------------------------
//
// The longest context (prompt and generated tokens) a mode of a decoder
// reaches within `budget` bytes, from its step models' memory plans alone
// (no values, nothing run: eager_plan_peak, compile_plan_memory): eager's
// concatenated cache and unfused attention (or SDPA with fused_attention),
// compiled's static cache and fused attention. A generation ends at the
// first step whose plan exceeds the budget; the prefill of o->prompt_len
// tokens must fit too, with the rotary tables (and compiled's static cache)
// of the whole context. o->new_tokens is ignored; the batch, precision
// (o->amp: the caches, weight copies and activations autocast makes),
// weights and attention options count. *tokens 0: not even the prefill fits. The
// context never exceeds the model's positions ($seq; *capped then).
typedef struct gen_plan_out {
    int64_t tokens;          // the longest context within the budget
    bool capped;             // the model's positions, not the budget, ended it
    size_t weights_bytes;    // the step's sources less its caches and inputs
    size_t prefill_peak;     // the prefill's planned peak
    size_t peak_at_tokens;   // the last step's planned peak at that context
    int64_t kv_bytes_per_token;
} gen_plan_out;
int gen_plan_tokens(const modeldef *md, const modeldef_override *ov, int nov, const gen_opts *o,
                    gen_kind kind, size_t budget, gen_plan_out *out, char *err, size_t cap);

// ---- multi-turn chat ----------------------------------------------------------
//
// R rounds: each appends a user turn of U tokens, then generates G tokens
// greedily. With reuse the earlier rounds' keys and values stay in the
// cache (the causal mask keeps them valid) and a round's prefill feeds only
// the new tokens (the last round's final token and the user turn); without
// it each round prefills the whole dialogue again, as a chat server that
// keeps no state does. Both give the same tokens.
//
//   gen_chat_opts c = {.rounds = 4, .turn_len = 32, .gen_len = 16, .reuse = true};
//   gen_chat *ch;
//   gen_chat_new(md, ov, nov, &o, &c, GEN_COMPILED, NULL, &ch, err, cap);  // o: batch, seed, ...
//   int32_t *turns = ...;                  // R x B x U user tokens
//   double ttft[4]; int32_t *tokens = ...  // B x R x G
//   gen_chat_run(ch, turns, tokens, ttft);
typedef struct gen_chat_opts {
    int64_t rounds, turn_len, gen_len;
    bool reuse;
} gen_chat_opts;

typedef struct gen_chat gen_chat;

// share (may be NULL): a chat whose weights this one uses (as gen_mode_new's).
int gen_chat_new(const modeldef *md, const modeldef_override *ov, int nov, const gen_opts *o,
                 const gen_chat_opts *c, gen_kind kind, const gen_chat *share, gen_chat **out,
                 char *err, size_t cap);
// turns: R x B x U token ids; tokens (out): B x R x G; ttft (out): R
// seconds, each round's prefill and first argmax. -1 with gen_chat_error.
int gen_chat_run(gen_chat *ch, const int32_t *turns, int32_t *tokens, double *ttft);
const char *gen_chat_error(const gen_chat *ch);
int64_t gen_chat_vocab(const gen_chat *ch);
void gen_chat_free(gen_chat *ch);
