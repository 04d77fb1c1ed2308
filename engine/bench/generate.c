// Greedy decoding with a KV cache (generate.h): the step models of each
// mode, their runs and the fp64 reference's decode.
#include "generate.h"

#include "accuracy.h"
#include "autodiff/autocast.h"
#include "axes.h"
#include "backend/cpu/cpu_f16.h"
#include "backend/cpu/cpu_iter.h"
#include "base/clock.h"
#include "compile/compile.h"
#include "core/tensor.h"
#include "eager/eager.h"
#include "exec.h"
#include "model/quantize.h"
#include "ref/ref.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// One step model: its graph and values, the cache lists its attention
// layers filled, its executor and the inputs the driver sets.
typedef struct gen_step {
    model *m;
    nn_gen gen;
    bench_exec *x;
    int tokens; // the token ids input (B, T)
    int64_t T;
    int (*casts)[2]; // AMP on the CPU: its cached casts, {copy, parameter} (cache_casts)
    int ncasts;
} gen_step;

struct gen_mode {
    gen_kind kind;
    gen_opts o;
    int64_t vocab, max_len;
    double quant_rel_rms; // --weights: the quantization's own error (quantize.h)
    gen_step pre;  // the prefill (T = P)
    gen_step *dec; // eager: one a past length P .. P + N - 2; compiled: one
    int ndec;
    exec_share *share; // CUDA: the steps' one context, weights and static cache
    double compile_s;
    char err[600];
};

static int fail(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
    return -1;
}

// The model's token ids: its INPUT named tokens, else its first 2-d integer input.
static int token_input(const graph *g) {
    int first = -1;
    for (int i = 0; i < g->n; i++) {
        const graph_node *n = &g->nodes[i];
        if (n->op != OP_INPUT || (n->dtype != DT_I32 && n->dtype != DT_I64) || n->ndim != 2)
            continue;
        if (n->name && !strcmp(n->name, "tokens"))
            return i;
        if (first < 0 && strcmp(n->name ? n->name : "", "position_ids"))
            first = i;
    }
    return first;
}

// The node of s's graph named name (an input), or -1.
static int named(const graph *g, const char *name) {
    for (int i = 0; i < g->n; i++)
        if (g->nodes[i].op == OP_INPUT && g->nodes[i].name && !strcmp(g->nodes[i].name, name))
            return i;
    return -1;
}

// The ids of a step's inputs, kept by name across the passes that
// renumber its graph (autocast, quantization). gen's present lists stay
// the built graph's: only step_autocast reads them, before either pass.
typedef struct step_inputs {
    int *ids[4 + 2 * NN_GEN_MAX_LAYERS];
    char *names[4 + 2 * NN_GEN_MAX_LAYERS];
    int n;
} step_inputs;

static void inputs_save(gen_step *s, step_inputs *in) {
    const graph *g = s->m->g;
    int n = 0;
    in->ids[n++] = &s->tokens, in->ids[n++] = &s->gen.position_ids;
    in->ids[n++] = &s->gen.cache_pos, in->ids[n++] = &s->gen.kv_len;
    for (int i = 0; i < s->gen.nlayers && s->gen.kv == NN_KV_CONCAT && s->gen.past > 0; i++)
        in->ids[n++] = &s->gen.past_k[i], in->ids[n++] = &s->gen.past_v[i];
    for (int i = 0; i < n; i++)
        in->names[i] = *in->ids[i] >= 0 ? strdup(g->nodes[*in->ids[i]].name) : NULL;
    in->n = n;
}

// The saved inputs found again in the step's graph (rc 0), then forgotten. Returns rc.
static int inputs_restore(gen_step *s, step_inputs *in, int rc, char *err, size_t cap) {
    for (int i = 0; i < in->n; i++) {
        if (rc == 0 && in->names[i] && (*in->ids[i] = named(s->m->g, in->names[i])) < 0)
            rc = fail(err, cap, "internal: input %s lost in a graph pass", in->names[i]);
        free(in->names[i]);
    }
    return rc;
}

// AMP: the step's graph through autocast with its caches held in low: the
// past inputs, the static cache's buffers, and what the step makes of them
// (eager's concatenations, the prefill's keys and values, kv_write), as a
// framework's cache holds the projections' dtype. Before the values.
static int step_autocast(model *m, const nn_gen *gen, enum dtype low, char *err, size_t cap) {
    const graph *g = m->g;
    bool *pin = calloc((size_t)g->n, sizeof *pin);
    if (!pin)
        return fail(err, cap, "out of memory");
    for (int i = 0; i < gen->nlayers; i++) {
        int made[2] = {gen->present_k[i], gen->present_v[i]};
        for (int k = 0; k < 2; k++) {
            pin[made[k]] = true;
            if (gen->kv == NN_KV_STATIC) // kv_write's cache
                pin[g->nodes[made[k]].src[0]] = true;
        }
        if (gen->kv == NN_KV_CONCAT && gen->past > 0)
            pin[gen->past_k[i]] = pin[gen->past_v[i]] = true;
    }
    graph *amp;
    int rc = autocast_build_pinned(g, low, pin, &amp, err, cap);
    free(pin);
    if (rc < 0)
        return -1;
    graph_free(m->g);
    m->g = amp;
    return 0;
}

// Weight-only quantization of a step model: its linears read DEQUANT of
// buffers quantized from its weights, then replaced by `first`'s of the
// same names (the first prefill's, which every step model and mode reads).
static int quantize_step(gen_mode *g, gen_step *s, const model *first, char *err, size_t cap) {
    model_quant_stats st;
    if (model_quantize_weights(s->m, g->o.weight_bits, g->o.weight_group, g->o.weight_scales, &st,
                               err, cap) < 0)
        return -1;
    g->quant_rel_rms = st.rel_rms;
    if (first && model_init_values_from(s->m, g->o.seed, first) < 0)
        return fail(err, cap, "out of memory sharing the quantized weights");
    return 0;
}

static void set_step_inputs(gen_step *s, const int32_t *tokens, int64_t pos);

// AMP on the CPU: autocast's casts of the parameters cached
// (autocast_cache_params) in every step model, as torch.autocast caches
// them within the region a generation runs in (one generate call: its
// prefill makes the copies, its decode steps read them). The copies are
// shared with `from` (the prefill, or the other mode's) where it has them,
// else made here, and made again, timed, at the start of every generation
// and chat round (recast): the time to first token holds the casts, as
// the first forward of a framework's autocast region does, and no later
// step does. They round as the executors' cast kernels do (dtype.h:
// F16C's, bit for bit). On CUDA the copies go to the device once, when the
// steps are built (cuda_share lends them to every step by name), and a
// generation does not make them again: its time to first token holds no
// casts (on an H200 those of the `cpu` size's 20 MB would take some us).
// The parameter w rounded into the f16 or bf16 tensor h, over the threads.
#define CAST_CHUNK 16384
static void cast_copy(const tensor *w, tensor *h) {
    int64_t n = tensor_numel(h);
    const float *src = tensor_f32(w);
    uint16_t *dst = tensor_data(h);
#pragma omp parallel for if (n >= CPU_PAR_MIN) schedule(static)
    for (int64_t i = 0; i < n; i += CAST_CHUNK)
        cpu_half_store(h->dtype, n - i < CAST_CHUNK ? n - i : CAST_CHUNK, src + i, dst + i, 1);
}

static int cache_casts(gen_step *s, const model *from, char *err, size_t cap) {
    model *m = s->m;
    int made = autocast_cache_params(m->g);
    if (made < 0 || !(s->casts = malloc((size_t)(made ? made : 1) * sizeof *s->casts)))
        return fail(err, cap, "out of memory caching autocast's casts");
    const graph *g = m->g;
    for (int v = 0; v < g->n; v++) {
        int p = autocast_cached_param(g, v);
        if (p < 0)
            continue;
        s->casts[s->ncasts][0] = v, s->casts[s->ncasts][1] = p;
        s->ncasts++;
        const graph_node *n = &g->nodes[v];
        tensor_free(m->values[v]);
        m->values[v] = NULL;
        int j = -1;
        for (int i = 0; from && i < from->g->n && j < 0; i++) {
            const graph_node *f = &from->g->nodes[i];
            if (autocast_copy(f) && !strcmp(f->name, n->name))
                j = i;
        }
        if (j >= 0)
            m->values[v] = tensor_view(from->values[j]);
        else if ((m->values[v] = tensor_new_empty(n->dtype, n->ndim, n->shape)))
            cast_copy(m->values[p], m->values[v]);
        if (!m->values[v])
            return fail(err, cap, "out of memory for %s", n->name);
    }
    return 0;
}

// A GPU program runs one step as it is made (compiled, to make its library
// plans): position 0 and token 0 keep it within the cache and the vocabulary.
static int device_first_inputs(gen_step *s, char *err, size_t cap) {
    int32_t *zeros = calloc((size_t)(s->m->batch * s->T), sizeof *zeros);
    if (!zeros)
        return fail(err, cap, "out of memory");
    set_step_inputs(s, zeros, 0);
    free(zeros);
    return 0;
}

static int build_step(const modeldef *md, const modeldef_override *ov, int nov, gen_mode *g,
                      nn_kv_mode kv, int64_t past, int64_t T, const model *share, gen_step *s,
                      char *err, size_t cap) {
    s->gen = (nn_gen){.kv = kv, .past = past, .max_len = g->max_len, .kv_dtype = g->o.amp};
    s->T = T;
    modeldef_opts mo = {.gen = &s->gen, .gen_tokens = T, .fused_attention = g->o.fused_attention};
    diag d = {0};
    if (modeldef_build(md, ov, nov, g->o.batch, &mo, &s->m, &d) < 0) {
        diag_format(&d, err, cap);
        return -1;
    }
    const graph *gr = s->m->g;
    s->tokens = token_input(gr);
    const graph_node *lo = gr->noutputs ? &gr->nodes[gr->outputs[0]] : NULL;
    if (s->tokens < 0 || !lo || lo->ndim != 3 || lo->shape[1] != T)
        return fail(err, cap,
                    "%s: generation needs a decoder: token ids (batch, $seq) in, logits "
                    "(batch, $seq, vocab) out",
                    modeldef_name(md));
    if (s->gen.nlayers == 0)
        return fail(err, cap, "%s: generation needs attention layers to cache",
                    modeldef_name(md));
    g->vocab = lo->shape[2];
    // autocast and quantization renumber the graph: its inputs are found again by name
    step_inputs in;
    inputs_save(s, &in);
    int rc = g->o.amp != DT_F32 ? step_autocast(s->m, &s->gen, g->o.amp, err, cap) : 0;
    if (rc == 0 && model_init_values_from(s->m, g->o.seed, share) < 0)
        rc = fail(err, cap, "out of memory for the values of %s", modeldef_name(md));
    if (rc == 0 && g->o.weight_bits)
        rc = quantize_step(g, s, share, err, cap);
    if (inputs_restore(s, &in, rc, err, cap) < 0)
        return -1;
    // the past keys and values are the previous step's outputs, set per run
    for (int i = 0; i < s->gen.nlayers && kv == NN_KV_CONCAT && past > 0; i++) {
        tensor_free(s->m->values[s->gen.past_k[i]]);
        tensor_free(s->m->values[s->gen.past_v[i]]);
        s->m->values[s->gen.past_k[i]] = s->m->values[s->gen.past_v[i]] = NULL;
    }
    if (g->o.amp != DT_F32 && cache_casts(s, share, err, cap) < 0)
        return -1;
    bench_exec_opts xo = {.device = g->o.device, .share = g->share};
    if (g->share && device_first_inputs(s, err, cap) < 0)
        return -1;
    double t0 = base_now();
    if (g->kind == GEN_EAGER) {
        rc = bench_exec_eager(s->m, &xo, &s->x, err, cap);
    } else {
        compile_opts co = g->o.compile ? *g->o.compile : compile_opts_default();
        char dump[4096];
        if (co.dump_dir) { // --dump: each step model in a folder of its own
            snprintf(dump, sizeof dump, "%s/step-T%lld-past%lld", co.dump_dir, (long long)T,
                     (long long)past);
            co.dump_dir = dump;
        }
        rc = bench_exec_compile(s->m, &co, &xo, &s->x, err, cap);
        g->compile_s += base_now() - t0;
    }
    return rc;
}

// The cached casts of step s's parameters made again from them (cache_casts):
// the work of the casts a generation's first step makes. Not on CUDA, whose
// copies went to the device once (g->share lends them).
static void recast(const gen_mode *g, gen_step *s) {
    if (g->share)
        return;
    for (int i = 0; i < s->ncasts; i++)
        cast_copy(s->m->values[s->casts[i][1]], s->m->values[s->casts[i][0]]);
}

int gen_mode_new(const modeldef *md, const modeldef_override *ov, int nov, const gen_opts *o,
                 gen_kind kind, const gen_mode *share, gen_mode **out, char *err, size_t cap) {
    *out = NULL;
    if (o->batch <= 0 || o->prompt_len <= 0 || o->new_tokens <= 0)
        return fail(err, cap, "generation needs a batch, a prompt and new tokens, got %lld, %lld "
                              "and %lld",
                    (long long)o->batch, (long long)o->prompt_len, (long long)o->new_tokens);
    gen_mode *g = calloc(1, sizeof *g);
    if (!g)
        return fail(err, cap, "out of memory");
    g->kind = kind;
    g->o = *o;
    g->max_len = o->prompt_len + o->new_tokens - 1; // the last token is never fed back
    if (o->device == BENCH_DEV_CUDA && bench_exec_share_new(o->device, &g->share, err, cap) < 0) {
        free(g);
        return -1;
    }
    nn_kv_mode kv = kind == GEN_EAGER ? NN_KV_CONCAT : NN_KV_STATIC;
    const model *from = share ? share->pre.m : NULL;
    int rc = build_step(md, ov, nov, g, kv, 0, o->prompt_len, from, &g->pre, err, cap);
    g->ndec = kind == GEN_EAGER ? (int)(o->new_tokens - 1) : 1;
    if (rc == 0 && g->ndec > 0 && !(g->dec = calloc((size_t)g->ndec, sizeof *g->dec)))
        rc = fail(err, cap, "out of memory");
    for (int i = 0; rc == 0 && i < g->ndec; i++)
        rc = build_step(md, ov, nov, g, kv, kind == GEN_EAGER ? o->prompt_len + i : 0, 1,
                        g->pre.m, &g->dec[i], err, cap);
    if (rc < 0) {
        if (!g->dec)
            g->ndec = 0;
        gen_mode_free(g);
        return -1;
    }
    *out = g;
    return 0;
}

static void step_free(gen_step *s) {
    bench_exec_free(s->x);
    if (s->m && s->gen.kv == NN_KV_CONCAT) // the borrowed past: not the model's to free
        for (int i = 0; i < s->gen.nlayers && s->gen.past > 0; i++)
            s->m->values[s->gen.past_k[i]] = s->m->values[s->gen.past_v[i]] = NULL;
    model_free(s->m);
    free(s->casts);
}

void gen_mode_free(gen_mode *g) {
    if (!g)
        return;
    step_free(&g->pre);
    for (int i = 0; i < g->ndec; i++)
        step_free(&g->dec[i]);
    free(g->dec);
    bench_exec_share_free(g->share); // after the executors that borrow it
    free(g);
}

int64_t gen_vocab(const gen_mode *g) { return g->vocab; }
const model *gen_weights(const gen_mode *g) { return g->pre.m; }
const char *gen_error(const gen_mode *g) { return g->err; }
double gen_compile_s(const gen_mode *g) { return g->compile_s; }
double gen_quant_error(const gen_mode *g) { return g->o.weight_bits ? g->quant_rel_rms : NAN; }

void gen_seeded_ids(int32_t *ids, int64_t n, int64_t vocab, uint64_t seed) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;
    for (int64_t i = 0; i < n; i++) { // splitmix64
        uint64_t z = (s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        ids[i] = (int32_t)((z ^ (z >> 31)) % (uint64_t)vocab);
    }
}

int32_t *gen_prompt(const gen_mode *g, uint64_t seed) {
    int64_t n = g->o.batch * g->o.prompt_len;
    int32_t *p = malloc((size_t)n * sizeof *p);
    if (p)
        gen_seeded_ids(p, n, g->vocab, seed);
    return p;
}

int gen_out_init(gen_out *r, const gen_opts *o, int64_t vocab, bool keep_logits) {
    memset(r, 0, sizeof *r);
    r->batch = o->batch, r->new_tokens = o->new_tokens, r->vocab = vocab;
    size_t bn = (size_t)(o->batch * o->new_tokens);
    r->tokens = calloc(bn, sizeof *r->tokens);
    r->step_s = calloc((size_t)o->new_tokens, sizeof *r->step_s);
    if (keep_logits)
        r->logits = malloc(bn * (size_t)vocab * sizeof *r->logits);
    if (!r->tokens || !r->step_s || (keep_logits && !r->logits)) {
        gen_out_free(r);
        return -1;
    }
    return 0;
}

void gen_out_free(gen_out *r) {
    free(r->tokens);
    free(r->logits);
    free(r->step_s);
    memset(r, 0, sizeof *r);
}

// Sets an integer input's elements (i32 or i64) from vals.
static void set_ints(tensor *t, const int32_t *vals, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        if (t->dtype == DT_I64)
            ((int64_t *)tensor_data(t))[i] = vals[i];
        else
            ((int32_t *)tensor_data(t))[i] = vals[i];
    }
}

static void set_int(tensor *t, int32_t v) { set_ints(t, &v, 1); }

// The step's inputs: its tokens (B, T) at positions pos .. pos + T - 1.
static void set_step_inputs(gen_step *s, const int32_t *tokens, int64_t pos) {
    tensor **v = s->m->values;
    int64_t B = s->m->batch, T = s->T;
    set_ints(v[s->tokens], tokens, B * T);
    int32_t ids[4096];
    for (int64_t t = 0; t < T; t += 4096) {
        int64_t n = T - t < 4096 ? T - t : 4096;
        for (int64_t i = 0; i < n; i++)
            ids[i] = (int32_t)(pos + t + i);
        tensor *part = tensor_slice(v[s->gen.position_ids], 0, t, n);
        if (part)
            set_ints(part, ids, n);
        tensor_free(part);
    }
    if (s->gen.kv == NN_KV_STATIC) {
        set_int(v[s->gen.cache_pos], (int32_t)pos);
        set_int(v[s->gen.kv_len], (int32_t)(pos + T));
    }
}

// The argmax of each row's last-position logits into next[b]; the logits
// into keep (B x V floats) when set.
static void pick(const tensor *logits, int64_t B, int64_t V, int32_t *next, float *keep) {
    int64_t T = logits->shape[1];
    // f32 and contiguous (every step's logits but a view's): a plain loop,
    // as a framework's argmax is, not an element lookup per logit
    const float *f =
        logits->dtype == DT_F32 && tensor_is_contiguous(logits) ? tensor_f32(logits) : NULL;
    for (int64_t b = 0; b < B; b++) {
        int64_t best = 0;
        float bv = -INFINITY;
        for (int64_t k = 0; k < V; k++) {
            float x = f ? f[(b * T + T - 1) * V + k]
                        : (float)tensor_get(logits, (int64_t[]){b, T - 1, k});
            if (keep)
                keep[b * V + k] = x;
            if (x > bv) {
                bv = x;
                best = k;
            }
        }
        next[b] = (int32_t)best;
    }
}

// One step's run: outputs into out (caller frees them). On the GPU only the
// logits come to the host (out[0]); the caches stay on the device.
static int run_step(gen_mode *g, gen_step *s, tensor **out, size_t *peak, int64_t *kernels,
                    size_t *step_peak) {
    bench_exec_stats st;
    if (g->share ? bench_exec_run(s->x, NULL, &st) < 0 || bench_exec_output(s->x, 0, &out[0]) < 0
                 : bench_exec_run(s->x, out, &st) < 0)
        return fail(g->err, sizeof g->err, "%s: %s", bench_exec_what(s->x), bench_exec_error(s->x));
    if (st.peak_bytes > *peak)
        *peak = st.peak_bytes;
    *step_peak = st.peak_bytes;
    *kernels = st.kernels;
    return 0;
}

// The GPU's eager past: the caches prev's step made (its outputs 1..)
// become s's past inputs on the device, with no copy to the host.
static int pass_past(gen_mode *g, gen_step *prev, gen_step *s) {
    for (int i = 0; i < s->gen.nlayers && s->gen.kv == NN_KV_CONCAT && s->gen.past > 0; i++)
        if (bench_exec_pass(prev->x, 1 + 2 * i, s->x, s->gen.past_k[i]) < 0 ||
            bench_exec_pass(prev->x, 2 + 2 * i, s->x, s->gen.past_v[i]) < 0)
            return fail(g->err, sizeof g->err, "%s: %s", bench_exec_what(s->x),
                        bench_exec_error(s->x));
    return 0;
}

// The GPU's eager caches that step s left on the device (its outputs
// 1..), when no step takes them.
static void drop_caches(gen_mode *g, gen_step *s) {
    for (int k = 1; s && g->share && g->kind == GEN_EAGER && k < s->m->g->noutputs; k++)
        bench_exec_output(s->x, k, NULL);
}

static void free_outputs(tensor **out, int n) {
    for (int i = 0; i < n; i++) {
        tensor_free(out[i]);
        out[i] = NULL;
    }
}

// A step's caches (outputs 1..) become the next step's past; its logits go.
static void shift_caches(tensor **out, tensor **past, int n) {
    free_outputs(past, n);
    for (int i = 1; i < n; i++)
        past[i] = out[i], out[i] = NULL;
    tensor_free(out[0]);
    out[0] = NULL;
}

// Both lists of step outputs and the lists themselves.
static void free_both(tensor **out, tensor **past, int n) {
    if (out)
        free_outputs(out, n);
    if (past)
        free_outputs(past, n);
    free(out);
    free(past);
}

int gen_mode_run(gen_mode *g, const int32_t *prompt, const int32_t *force, gen_out *r) {
    int64_t B = g->o.batch, N = g->o.new_tokens, P = g->o.prompt_len, V = g->vocab;
    int nout = g->pre.m->g->noutputs;
    tensor **out = calloc((size_t)nout, sizeof *out);
    tensor **past = calloc((size_t)nout, sizeof *past); // eager: the last step's caches
    int32_t *next = malloc((size_t)B * sizeof *next), *fed = malloc((size_t)B * sizeof *fed);
    int rc = 0;
    if (!out || !past || !next || !fed) {
        rc = fail(g->err, sizeof g->err, "out of memory");
        goto done;
    }
    r->peak_bytes = 0;
    r->steps_done = 0;
    r->kv_bytes_per_token = g->pre.gen.kv_bytes_per_token;
    double t0 = base_now();
    recast(g, &g->pre);
    set_step_inputs(&g->pre, prompt, 0);
    if ((rc = run_step(g, &g->pre, out, &r->peak_bytes, &r->kernels_prefill,
                       &r->step_peak_bytes)) < 0)
        goto done;
    pick(out[0], B, V, next, r->logits);
    r->ttft_s = base_now() - t0;
    for (int64_t j = 0; j + 1 < N; j++) {
        for (int64_t b = 0; b < B; b++) {
            r->tokens[b * N + j] = next[b];
            fed[b] = force ? force[b * N + j] : next[b];
        }
        shift_caches(out, past, nout); // the caches this step grew: the next one's past
        gen_step *s = g->kind == GEN_EAGER ? &g->dec[j] : &g->dec[0];
        t0 = base_now();
        if (g->share && g->kind == GEN_EAGER &&
            (rc = pass_past(g, j ? &g->dec[j - 1] : &g->pre, s)) < 0)
            goto done;
        for (int i = 0; i < s->gen.nlayers && s->gen.kv == NN_KV_CONCAT; i++) {
            s->m->values[s->gen.past_k[i]] = past[1 + 2 * i];
            s->m->values[s->gen.past_v[i]] = past[2 + 2 * i];
        }
        set_step_inputs(s, fed, P + j);
        rc = run_step(g, s, out, &r->peak_bytes, &r->kernels_step, &r->step_peak_bytes);
        for (int i = 0; i < s->gen.nlayers && s->gen.kv == NN_KV_CONCAT; i++)
            s->m->values[s->gen.past_k[i]] = s->m->values[s->gen.past_v[i]] = NULL;
        if (rc < 0)
            goto done;
        pick(out[0], B, V, next, r->logits ? r->logits + (j + 1) * B * V : NULL);
        r->step_s[j] = base_now() - t0;
        r->steps_done = j + 1;
    }
    for (int64_t b = 0; b < B; b++)
        r->tokens[b * N + N - 1] = next[b];
    // the GPU's eager: the last step's caches, which no step takes, go now
    // (the CPU's go below), not at that step's next run
    drop_caches(g, N > 1 ? &g->dec[N - 2] : &g->pre);
done:
    free_both(out, past, nout);
    free(next);
    free(fed);
    return rc;
}

// ---- the fp64 reference -----------------------------------------------------

void gen_ref_free(gen_ref *ref) {
    free(ref->tokens);
    free(ref->logits);
    free(ref->gap);
    memset(ref, 0, sizeof *ref);
}

// Argmax and top-two gap of each row's last position in a (B, T, V) output.
static void ref_pick(const double *lg, int64_t B, int64_t T, int64_t V, int32_t *next,
                     double *keep, double *gap) {
    for (int64_t b = 0; b < B; b++) {
        const double *row = lg + (b * T + T - 1) * V;
        int64_t best = 0;
        double top = -INFINITY, second = -INFINITY;
        for (int64_t k = 0; k < V; k++) {
            keep[b * V + k] = row[k];
            if (row[k] > top) {
                second = top;
                top = row[k];
                best = k;
            } else if (row[k] > second) {
                second = row[k];
            }
        }
        next[b] = (int32_t)best;
        gap[b] = top - second;
    }
}

int gen_reference(const gen_mode *e, const int32_t *prompt, gen_ref *ref, char *err, size_t cap) {
    if (e->kind != GEN_EAGER)
        return fail(err, cap, "the reference decodes on eager's step models");
    int64_t B = e->o.batch, N = e->o.new_tokens, P = e->o.prompt_len, V = e->vocab;
    memset(ref, 0, sizeof *ref);
    ref->batch = B, ref->new_tokens = N, ref->vocab = V;
    ref->tokens = calloc((size_t)(B * N), sizeof *ref->tokens);
    ref->logits = malloc((size_t)(N * B * V) * sizeof *ref->logits);
    ref->gap = malloc((size_t)(N * B) * sizeof *ref->gap);
    int nout = e->pre.m->g->noutputs;
    double **out = calloc((size_t)nout, sizeof *out), **past = calloc((size_t)nout, sizeof *past);
    int32_t *next = malloc((size_t)B * sizeof *next);
    int rc = 0;
    if (!ref->tokens || !ref->logits || !ref->gap || !out || !past || !next) {
        rc = fail(err, cap, "out of memory for the reference decode");
        goto done;
    }
    for (int64_t j = 0; j < N && rc == 0; j++) {
        const gen_step *s = j == 0 ? &e->pre : &e->dec[j - 1];
        const graph *g = s->m->g;
        double **given = calloc((size_t)g->n, sizeof *given);
        double *ids = malloc((size_t)(B * s->T + s->T) * sizeof *ids);
        if (!given || !ids) {
            free(given);
            free(ids);
            rc = fail(err, cap, "out of memory for the reference decode");
            break;
        }
        // the step's tokens and positions as the executors get them, the past in fp64
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = 0; t < s->T; t++)
                ids[b * s->T + t] = j == 0 ? prompt[b * P + t] : ref->tokens[b * N + j - 1];
        for (int64_t t = 0; t < s->T; t++)
            ids[B * s->T + t] = (double)(j == 0 ? t : P + j - 1);
        given[s->tokens] = ids;
        given[s->gen.position_ids] = ids + B * s->T;
        // a cached cast (cache_casts) is exact, as the reference's casts are
        for (int c = 0; c < s->ncasts && rc == 0; c++) {
            const tensor *w = s->m->values[s->casts[c][1]];
            const float *wf = tensor_f32(w);
            int64_t n = tensor_numel(w);
            double *d = given[s->casts[c][0]] = malloc((size_t)n * sizeof *d);
            if (!d)
                rc = fail(err, cap, "out of memory for the reference decode");
            for (int64_t i = 0; d && i < n; i++)
                d[i] = wf[i];
        }
        for (int i = 0; i < s->gen.nlayers && j > 0; i++) {
            given[s->gen.past_k[i]] = past[1 + 2 * i];
            given[s->gen.past_v[i]] = past[2 + 2 * i];
        }
        if (rc == 0)
            rc = ref_run_given(s->m, given, out, err, cap);
        for (int c = 0; c < s->ncasts; c++)
            free(given[s->casts[c][0]]);
        free(given);
        free(ids);
        if (rc < 0)
            break;
        ref_pick(out[0], B, s->T, V, next, ref->logits + j * B * V, ref->gap + j * B);
        for (int64_t b = 0; b < B; b++)
            ref->tokens[b * N + j] = next[b];
        for (int i = 0; i < nout; i++) {
            free(i == 0 ? out[i] : past[i]);
            if (i > 0)
                past[i] = out[i];
            out[i] = NULL;
        }
    }
done:
    for (int i = 0; out && i < nout; i++)
        free(out[i]);
    for (int i = 0; past && i < nout; i++)
        free(past[i]);
    free(out);
    free(past);
    free(next);
    if (rc < 0)
        gen_ref_free(ref);
    return rc;
}

double gen_check_tol(double tol, enum dtype amp) { return amp == DT_BF16 ? 8 * tol : tol; }

int gen_check(const gen_out *r, const gen_ref *ref, double tol, bool cosine_fallback, double *worst,
              char *why, size_t cap) {
    int64_t B = ref->batch, N = ref->new_tokens, V = ref->vocab;
    double most = 0;
    int bad = 0;
    for (int64_t j = 0; j < N; j++)
        for (int64_t b = 0; b < B; b++) {
            const double *want = ref->logits + (j * B + b) * V;
            const float *got = r->logits ? r->logits + (j * B + b) * V : NULL;
            double num = 0, den = 0, gg = 0, gw = 0;
            for (int64_t k = 0; got && k < V; k++) {
                num += (got[k] - want[k]) * (got[k] - want[k]);
                den += want[k] * want[k];
                gg += (double)got[k] * got[k];
                gw += got[k] * want[k];
            }
            double rel = den > 0 ? sqrt(num / den) : sqrt(num);
            double cosine = gg > 0 && den > 0 ? gw / sqrt(gg * den) : 0;
            most = rel > most ? rel : most;
            if (bad)
                continue;
            int32_t tok = r->tokens[b * N + j], rt = ref->tokens[b * N + j];
            double top = fabs(want[rt]);
            bool tie = ref->gap[j * B + b] < tol * (top > 1 ? top : 1);
            bool close = got && (rel <= tol || (cosine_fallback && cosine >= BENCH_COSINE_MIN));
            if (tok == rt || (tie && close))
                continue;
            bad = 1;
            if (tie)
                snprintf(why, cap,
                         "step %lld, row %lld: token %d where the reference has %d (a near tie: "
                         "gap %.3g), and the logits' rel_l2 %.3g is above %.0e%s",
                         (long long)j, (long long)b, tok, rt, ref->gap[j * B + b], rel, tol,
                         cosine_fallback ? " and their cosine below 0.99" : "");
            else
                snprintf(why, cap,
                         "step %lld, row %lld: token %d where the reference has %d (its top two "
                         "logits %.3g apart)",
                         (long long)j, (long long)b, tok, rt, ref->gap[j * B + b]);
        }
    if (worst)
        *worst = most;
    return bad;
}

// ---- the memory-budget study ---------------------------------------------------

#define GEN_PLAN_MAX_TOKENS (1 << 24) // a model without positions: the search ends here

// A step model's graph alone (no values), quantized as o says.
static int plan_step(const modeldef *md, const modeldef_override *ov, int nov, const gen_opts *o,
                     nn_kv_mode kv, int64_t past, int64_t T, int64_t max_len, model **m,
                     nn_gen *gen, char *err, size_t cap) {
    *gen = (nn_gen){.kv = kv, .past = past, .max_len = max_len, .kv_dtype = o->amp};
    modeldef_opts mo = {.gen = gen,
                        .gen_tokens = T,
                        .graph_only = true,
                        .fused_attention = o->fused_attention};
    diag d = {0};
    if (modeldef_build(md, ov, nov, o->batch, &mo, m, &d) < 0) {
        diag_format(&d, err, cap);
        return -1;
    }
    if ((o->amp != DT_F32 && step_autocast(*m, gen, o->amp, err, cap) < 0) ||
        (o->weight_bits && model_quantize_weights(*m, o->weight_bits, o->weight_group,
                                                  o->weight_scales, NULL, err, cap) < 0)) {
        model_free(*m);
        *m = NULL;
        return -1;
    }
    // AMP on the CPU: the generation's cached casts, as build_step has them
    if (o->amp != DT_F32 && o->device == BENCH_DEV_CPU && autocast_cache_params((*m)->g) < 0) {
        model_free(*m);
        *m = NULL;
        return fail(err, cap, "out of memory caching autocast's casts");
    }
    return 0;
}

// The planned peak of one step: eager's walk, or the compiled arena and sources.
static int plan_peak(const model *m, gen_kind kind, size_t *peak, size_t *sources, char *err,
                     size_t cap) {
    if (kind == GEN_EAGER) {
        eager_plan_figures f;
        if (eager_plan_peak(m->g, &f, err, cap) < 0)
            return -1;
        *peak = f.peak_bytes, *sources = f.sources_bytes;
        return 0;
    }
    compile_opts co = compile_opts_default();
    compile_memory_figures f;
    if (compile_plan_memory(m, &co, &f, err, cap) < 0)
        return -1;
    *peak = f.peak_bytes, *sources = f.sources_bytes;
    return 0;
}

// A step's inputs and caches: the bytes of its sources that are not
// weights, as kind's planner counts sources (eager's allocator rounds each).
static size_t held_bytes(const graph *g, gen_kind kind) {
    size_t held = 0;
    for (int i = 0; i < g->n; i++) {
        const graph_node *n = &g->nodes[i];
        bool cache = n->name && (strstr(n->name, "past_") || strstr(n->name, "_cache"));
        size_t b = graph_node_bytes(n);
        if (n->op == OP_INPUT || (n->op == OP_BUFFER && cache))
            held += kind == GEN_EAGER ? tensor_mem_round(b) : b;
    }
    return held;
}

// A generation of context L (prompt and tokens) as planned: the step that
// makes token L (eager's decode with L - 1 past tokens, compiled's with a
// cache of L rows) and the generation's peak, the larger of that step's and
// its prefill's (which holds the rotary tables and compiled's static cache
// of L rows too).
typedef struct ctx_plan {
    size_t step_peak, gen_peak;
    size_t weights; // the step's sources less caches and inputs
    int64_t kvpt;
} ctx_plan;

// 1 when L passes the model's positions.
static int plan_context(const modeldef *md, const modeldef_override *ov, int nov, const gen_opts *o,
                        gen_kind kind, int64_t L, ctx_plan *cp, char *err, size_t cap) {
    nn_kv_mode kv = kind == GEN_EAGER ? NN_KV_CONCAT : NN_KV_STATIC;
    size_t prefill = 0;
    for (int k = 0; k < 2; k++) { // the step, then the prefill
        model *m;
        nn_gen gen;
        int64_t past = k == 0 && kind == GEN_EAGER ? L - 1 : 0;
        if (plan_step(md, ov, nov, o, kv, past, k ? o->prompt_len : 1, L, &m, &gen, err, cap) < 0)
            return strstr(err, "exceeds the model's") ? 1 : -1;
        size_t sources = 0, caches = held_bytes(m->g, kind);
        int rc = plan_peak(m, kind, k ? &prefill : &cp->step_peak, &sources, err, cap);
        if (k == 0) {
            cp->weights = sources > caches ? sources - caches : 0;
            cp->kvpt = gen.kv_bytes_per_token;
        }
        model_free(m);
        if (rc < 0)
            return -1;
    }
    cp->gen_peak = prefill > cp->step_peak ? prefill : cp->step_peak;
    return 0;
}

int gen_plan_tokens(const modeldef *md, const modeldef_override *ov, int nov, const gen_opts *o,
                    gen_kind kind, size_t budget, gen_plan_out *out, char *err, size_t cap) {
    memset(out, 0, sizeof *out);
    int64_t P = o->prompt_len;
    if (o->batch <= 0 || P <= 0)
        return fail(err, cap, "a plan needs a batch and a prompt");
    // the prefill, its cache (compiled) of P + 1 rows
    model *m;
    nn_gen gen;
    nn_kv_mode kv = kind == GEN_EAGER ? NN_KV_CONCAT : NN_KV_STATIC;
    if (plan_step(md, ov, nov, o, kv, 0, P, P + 1, &m, &gen, err, cap) < 0)
        return -1;
    size_t sources = 0, held = held_bytes(m->g, kind);
    int rc = plan_peak(m, kind, &out->prefill_peak, &sources, err, cap);
    out->weights_bytes = sources > held ? sources - held : 0;
    out->kv_bytes_per_token = gen.kv_bytes_per_token;
    model_free(m);
    if (rc < 0)
        return -1;
    if (out->prefill_peak > budget)
        return 0;
    // the largest L in (P, positions] whose generation fits: doubling, then bisection
    int64_t lo = P, hi = -1;
    ctx_plan at_lo = {.step_peak = out->prefill_peak}, cp;
    for (int64_t L = 2 * P + 1;; L = 2 * L) {
        if ((rc = plan_context(md, ov, nov, o, kind, L, &cp, err, cap)) < 0)
            return -1;
        if (rc == 1 || cp.gen_peak > budget || L > GEN_PLAN_MAX_TOKENS) {
            hi = L;
            break;
        }
        lo = L, at_lo = cp;
    }
    bool past_positions = false;
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        if ((rc = plan_context(md, ov, nov, o, kind, mid, &cp, err, cap)) < 0)
            return -1;
        if (rc == 0 && cp.gen_peak <= budget) {
            lo = mid, at_lo = cp;
        } else {
            hi = mid;
            past_positions = rc == 1;
        }
    }
    // was it the positions? the step after lo does not exist, or does not fit
    if (!past_positions)
        past_positions = plan_context(md, ov, nov, o, kind, lo + 1, &cp, err, cap) == 1;
    if (lo > P)
        out->weights_bytes = at_lo.weights, out->kv_bytes_per_token = at_lo.kvpt;
    out->tokens = lo;
    out->capped = past_positions;
    out->peak_at_tokens = at_lo.step_peak;
    return 0;
}

// ---- multi-turn chat ---------------------------------------------------------

struct gen_chat {
    gen_mode *g;        // its prefill: round 0; its decode steps: every past length
    gen_chat_opts c;
    gen_step *round;    // rounds 1..R-1: the prefill of each (compiled with reuse: one, shared)
    int nround;
};

int gen_chat_new(const modeldef *md, const modeldef_override *ov, int nov, const gen_opts *o,
                 const gen_chat_opts *c, gen_kind kind, const gen_chat *share, gen_chat **out,
                 char *err, size_t cap) {
    *out = NULL;
    int64_t R = c->rounds, U = c->turn_len, G = c->gen_len;
    if (R <= 0 || U <= 0 || G <= 0)
        return fail(err, cap, "a chat needs rounds, a user turn and tokens to generate");
    gen_chat *ch = calloc(1, sizeof *ch);
    if (!ch)
        return fail(err, cap, "out of memory");
    ch->c = *c;
    // every token but the last one generated is fed: R (U + G) - 1 rows
    gen_opts go = *o;
    go.prompt_len = U;
    go.new_tokens = R * (U + G) - U;
    int rc = gen_mode_new(md, ov, nov, &go, kind, share ? share->g : NULL, &ch->g, err, cap);
    gen_mode *g = ch->g;
    ch->nround = R > 1 ? (int)(kind == GEN_COMPILED && c->reuse ? 1 : R - 1) : 0;
    if (rc == 0 && ch->nround && !(ch->round = calloc((size_t)ch->nround, sizeof *ch->round)))
        rc = fail(err, cap, "out of memory");
    nn_kv_mode kv = kind == GEN_EAGER ? NN_KV_CONCAT : NN_KV_STATIC;
    for (int i = 0; rc == 0 && i < ch->nround; i++) {
        int64_t r = i + 1, L = r * (U + G) - 1; // rows cached when round r starts
        int64_t past = c->reuse && kind == GEN_EAGER ? L : 0;
        int64_t T = c->reuse ? U + 1 : L + U + 1;
        rc = build_step(md, ov, nov, g, kv, past, T, g->pre.m, &ch->round[i], err, cap);
    }
    if (rc < 0) {
        gen_chat_free(ch);
        return -1;
    }
    *out = ch;
    return 0;
}

void gen_chat_free(gen_chat *ch) {
    if (!ch)
        return;
    for (int i = 0; i < ch->nround; i++)
        step_free(&ch->round[i]);
    free(ch->round);
    gen_mode_free(ch->g);
    free(ch);
}

const char *gen_chat_error(const gen_chat *ch) { return ch->g->err; }
int64_t gen_chat_vocab(const gen_chat *ch) { return ch->g->vocab; }

// Runs step s on tokens (B x s->T) at position pos with the eager past
// (NULL entries: none), its outputs into out; then the argmax into next.
// *last: the step run before (the GPU's eager past is its caches, passed
// on the device), then s.
static int chat_step(gen_mode *g, gen_step *s, const int32_t *tokens, int64_t pos, tensor **past,
                     tensor **out, int32_t *next, gen_step **last) {
    if (g->share && g->kind == GEN_EAGER) {
        int rc = s->gen.past > 0 ? pass_past(g, *last, s) : 0;
        if (s->gen.past == 0 || rc < 0) // a round that prefills anew; what a failed pass left
            drop_caches(g, *last);
        *last = s;
        if (rc < 0)
            return -1;
    }
    for (int i = 0; i < s->gen.nlayers && s->gen.kv == NN_KV_CONCAT && s->gen.past > 0; i++) {
        s->m->values[s->gen.past_k[i]] = past[1 + 2 * i];
        s->m->values[s->gen.past_v[i]] = past[2 + 2 * i];
    }
    set_step_inputs(s, tokens, pos);
    size_t peak = 0, sp;
    int64_t kernels;
    int rc = run_step(g, s, out, &peak, &kernels, &sp);
    for (int i = 0; i < s->gen.nlayers && s->gen.kv == NN_KV_CONCAT && s->gen.past > 0; i++)
        s->m->values[s->gen.past_k[i]] = s->m->values[s->gen.past_v[i]] = NULL;
    if (rc == 0)
        pick(out[0], g->o.batch, g->vocab, next, NULL);
    return rc;
}

int gen_chat_run(gen_chat *ch, const int32_t *turns, int32_t *tokens, double *ttft) {
    gen_mode *g = ch->g;
    int64_t B = g->o.batch, R = ch->c.rounds, U = ch->c.turn_len, G = ch->c.gen_len;
    int64_t H = R * (U + G); // the dialogue's tokens, the last one never fed
    int nout = g->pre.m->g->noutputs;
    tensor **out = calloc((size_t)nout, sizeof *out), **past = calloc((size_t)nout, sizeof *past);
    int32_t *hist = malloc((size_t)(B * H) * sizeof *hist);
    int32_t *feed = malloc((size_t)(B * H) * sizeof *feed), *next = malloc((size_t)B * sizeof *next);
    int rc = out && past && hist && feed && next ? 0
                                                 : fail(g->err, sizeof g->err, "out of memory");
    int64_t L = 0; // rows in the cache; hist holds L + 1 tokens after a round's first
    gen_step *last = NULL; // the step run last (its caches on the GPU are the eager past)
    for (int64_t r = 0; rc == 0 && r < R; r++) {
        for (int64_t b = 0; b < B; b++) // the user's turn after the last generated token
            memcpy(hist + b * H + (r ? L + 1 : 0), turns + (r * B + b) * U, (size_t)U * sizeof *hist);
        int64_t start = r == 0 ? 0 : ch->c.reuse ? L : 0, end = (r ? L + 1 : 0) + U;
        gen_step *s = r == 0 ? &g->pre : &ch->round[g->kind == GEN_COMPILED && ch->c.reuse ? 0 : r - 1];
        for (int64_t b = 0; b < B; b++)
            memcpy(feed + b * (end - start), hist + b * H + start,
                   (size_t)(end - start) * sizeof *feed);
        if (!ch->c.reuse || r == 0)
            free_outputs(past, nout); // no reuse: the whole dialogue again, no past
        double t0 = base_now();
        recast(g, s); // each round is a generation of its own: its casts again
        rc = chat_step(g, s, feed, start, past, out, next, &last);
        ttft[r] = base_now() - t0;
        L = end;
        for (int64_t j = 0; rc == 0; j++) {
            for (int64_t b = 0; b < B; b++) {
                tokens[(b * R + r) * G + j] = next[b];
                hist[b * H + L] = next[b];
            }
            if (j + 1 == G)
                break;
            shift_caches(out, past, nout);
            gen_step *d = g->kind == GEN_EAGER ? &g->dec[L - ch->c.turn_len] : &g->dec[0];
            rc = chat_step(g, d, next, L, past, out, next, &last);
            L++;
        }
        if (rc == 0) // the caches after the round's last fed token: the next round's past
            shift_caches(out, past, nout);
    }
    drop_caches(g, last);
    free_both(out, past, nout);
    free(hist);
    free(feed);
    free(next);
    return rc;
}
