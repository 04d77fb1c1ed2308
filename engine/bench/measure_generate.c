// The generate workload for measure.c (measure_internal.h): each mode's
// step models (generate.h), the fp64 reference's greedy decode, each mode
// teacher-forced against it, then every mode timed interleaved with one
// generation a sample. A sample is that generation's median decode step
// (seconds per token), so the speedup is the decode's; the time to first
// token and the tokens a second go beside it.
#include "measure_internal.h"

#include "generate.h"
#include "timing.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


typedef struct gen_task {
    gen_mode *g;
    const int32_t *prompt;
    gen_out out;
    double *ttft, *steps; // every timed generation's, for the medians
    int nttft, nsteps, cap_ttft, cap_steps;
    double last; // the last generation's median decode step
} gen_task;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    if (n <= 0)
        return NAN;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int push(double **v, int *n, int *cap, double x) {
    if (*n == *cap) {
        int c = *cap ? 2 * *cap : 64;
        double *nv = realloc(*v, (size_t)c * sizeof *nv);
        if (!nv)
            return -1;
        *v = nv, *cap = c;
    }
    (*v)[(*n)++] = x;
    return 0;
}

// One generation; its figures kept for the medians.
static int gen_step_fn(void *ctx) {
    gen_task *t = ctx;
    if (gen_mode_run(t->g, t->prompt, NULL, &t->out) < 0)
        return -1;
    int64_t n = t->out.new_tokens - 1;
    double *s = malloc((size_t)(n > 0 ? n : 1) * sizeof *s);
    if (!s)
        return -1;
    memcpy(s, t->out.step_s, (size_t)(n > 0 ? n : 0) * sizeof *s);
    t->last = n > 0 ? median(s, (int)n) : t->out.ttft_s;
    free(s);
    if (push(&t->ttft, &t->nttft, &t->cap_ttft, t->out.ttft_s) < 0)
        return -1;
    for (int64_t j = 0; j < n; j++)
        if (push(&t->steps, &t->nsteps, &t->cap_steps, t->out.step_s[j]) < 0)
            return -1;
    return 0;
}

// The sample's "clock": the generation's median decode step, not its wall time.
static int gen_clock_start(void *ctx) {
    (void)ctx;
    return 0;
}
static int gen_clock_stop(void *ctx, double *seconds) {
    *seconds = ((gen_task *)ctx)->last;
    return 0;
}
static const bench_clock decode_clock = {gen_clock_start, gen_clock_stop};

// The group's precision as generate.h's gen_opts.amp: DT_F32, or AMP's dtype.
static enum dtype gen_amp(const bench_plan *p, const bench_group *gr) {
    bool amp = p->tasks[gr->first].axis[BENCH_AXIS_PRECISION] == BENCH_PREC_AMP;
    return amp ? p->cfg.amp_dtype : DT_F32;
}

// A compiled mode's options; with --dump, its steps' code goes under
// DIR/CASE/MODE (dir: the caller's buffer for that path).
static compile_opts gen_compile_opts(const bench_plan *p, const bench_case *bc, int mode, char *dir,
                                     size_t dcap) {
    compile_opts o = measure_compile_opts(mode);
    char err[600];
    int d =
        mode == BENCH_MODE_EAGER ? 0 : measure_dump_dir(p, bc, mode, dir, dcap, err, sizeof err);
    if (d > 0)
        o.dump_dir = dir;
    else if (d < 0)
        fprintf(stderr, "warning: --dump: %s\n", err);
    return o;
}

// Every step interleaved: warm-up, each step's figures cleared (the
// warm-up's runs are not figures), then the timed rounds with the machine
// probed around them. One generation (or dialogue) a sample, its clock
// the step's own. Returns as bench_time_rounds.
static int time_steps(const bench_plan *p, const bench_step *steps, int ns,
                      void (*clear)(void *ctx), bench_timing *tm, int *bad, bench_probe *before,
                      bench_probe *after) {
    bench_timing_opts opts = {.repeat = p->cfg.repeat,
                              .warmup_fixed = p->cfg.warmup ? p->cfg.warmup : 1,
                              .one_step_samples = true,
                              .min_time_s = p->cfg.min_time_s,
                              .max_time_s = p->cfg.max_time_s,
                              .ci_target = BENCH_CI_TARGET};
    int rc = bench_time_warm_up(steps, ns, &opts, tm, bad);
    for (int k = 0; k < ns; k++)
        clear(steps[k].ctx);
    if (rc == 0) {
        bench_probe_read(before);
        rc = bench_time_rounds(steps, ns, &opts, tm, bad);
        bench_probe_read(after);
    }
    if (rc < 0)
        for (int k = 0; k < ns; k++)
            bench_timing_free(&tm[k]);
    return rc;
}

static void gen_clear(void *ctx) { ((gen_task *)ctx)->nttft = ((gen_task *)ctx)->nsteps = 0; }

// Times every mode still standing, interleaved: warm-up, then the rounds,
// whose generations alone give the medians.
static int time_modes(const bench_plan *p, gen_task *tk, bench_result *rs, int n) {
    bench_step steps[BENCH_MODE_COUNT];
    bench_timing tm[BENCH_MODE_COUNT];
    int who[BENCH_MODE_COUNT], ns = 0, bad = -1;
    for (int k = 0; k < n; k++)
        if (tk[k].g) {
            who[ns] = k;
            steps[ns++] = (bench_step){gen_step_fn, &tk[k], &decode_clock};
        }
    bench_probe before = {0}, after = {0};
    if (time_steps(p, steps, ns, gen_clear, tm, &bad, &before, &after) < 0) {
        const char *why = bad >= 0 ? gen_error(tk[who[bad]].g) : "out of memory for the samples";
        if (bad <= 0) {
            set_all(rs, n, bad < 0 ? BENCH_OOM : BENCH_ERROR, why);
        } else {
            set_status(&rs[who[bad]], mode_fail_status(), "%s", why);
        }
        return -1;
    }
    for (int s = 0; s < ns; s++) {
        bench_result *r = &rs[who[s]];
        gen_task *t = &tk[who[s]];
        measure_keep_timing(p, r, &tm[s], &before, &after);
        r->gen.ttft_s = median(t->ttft, t->nttft);
        r->gen.decode_s = median(t->steps, t->nsteps);
        r->gen.tokens_per_s = (double)t->out.batch / r->gen.decode_s;
    }
    return 0;
}

void measure_generate(const bench_plan *p, const bench_group *gr, const bench_case *bc,
                      bool check, const char *kcache, bench_result *rs, int n, double tol) {
    const suite_case *sc = bc->c;
    gen_opts o = {.batch = bc->batch,
                  .prompt_len = gen_prompt_len(&p->cfg, sc),
                  .new_tokens = gen_new_tokens(&p->cfg, sc),
                  .seed = p->cfg.seed,
                  .fused_attention = p->cfg.fused_attention,
                  .weight_bits = p->cfg.weight_bits,
                  .weight_group = p->cfg.weight_group,
                  .weight_scales = p->cfg.weight_scales,
                  .device = p->tasks[gr->first].axis[BENCH_AXIS_DEVICE],
                  .amp = gen_amp(p, gr)};
    gen_task tk[BENCH_MODE_COUNT] = {{0}};
    compile_opts co[BENCH_MODE_COUNT];
    char cache[BENCH_MODE_COUNT][1024] = {{0}}; // each mode compiles cold, into its own
    char dump[BENCH_MODE_COUNT][1024];
    gen_ref ref = {0};
    int32_t *prompt = NULL;
    char err[600];
    for (int k = 0; k < n; k++) {
        rs[k].gen = (bench_gen){.done = true, .prompt_len = o.prompt_len,
                                .new_tokens = o.new_tokens, .ttft_s = NAN, .decode_s = NAN,
                                .tokens_per_s = NAN, .weight_error = NAN};
        int mode = p->tasks[gr->first + k].axis[BENCH_AXIS_MODE];
        gen_opts mo = o;
        co[k] = gen_compile_opts(p, bc, mode, dump[k], sizeof dump[k]);
        mo.compile = &co[k];
        if (mode != BENCH_MODE_EAGER) {
            char name[64];
            snprintf(name, sizeof name, "%s-generate", bench_axis_value(BENCH_AXIS_MODE, mode));
            // the group's later processes find the first one's: a warm compile
            snprintf(cache[k], sizeof cache[k], "%s/%s", kcache ? kcache : "", name);
            bool later = kcache && access(cache[k], F_OK) == 0;
            if (!later &&
                measure_mode_cache(kcache, name, cache[k], sizeof cache[k], err, sizeof err) < 0) {
                cache[k][0] = 0;
                set_status(&rs[k], BENCH_FAIL_TO_RUN, "%s", err);
                continue;
            }
            co[k].cache_dir = cache[k];
        }
        gen_kind kind = mode == BENCH_MODE_EAGER ? GEN_EAGER : GEN_COMPILED;
        if (gen_mode_new(bc->md, sc->overrides, sc->noverrides, &mo, kind, k ? tk[0].g : NULL,
                         &tk[k].g, err, sizeof err) < 0) {
            if (k == 0) {
                set_all(rs, n, BENCH_ERROR, err);
                goto done;
            }
            set_status(&rs[k], mode_fail_status(), "%s", err);
            continue;
        }
        if (k > 0) {
            rs[k].compile = (bench_compile){true, gen_compile_s(tk[k].g), NAN, false};
        }
        if (gen_out_init(&tk[k].out, &o, gen_vocab(tk[k].g), check) < 0) {
            set_all(rs, n, BENCH_OOM, "out of memory for the generation's figures");
            goto done;
        }
    }
    if (!(prompt = gen_prompt(tk[0].g, p->cfg.seed + 1))) {
        set_all(rs, n, BENCH_OOM, "out of memory for the prompt");
        goto done;
    }
    bool have_ref = check && gen_reference(tk[0].g, prompt, &ref, err, sizeof err) == 0;
    for (int k = 0; k < n; k++) {
        tk[k].prompt = prompt;
        if (!tk[k].g)
            continue;
        // the figures of one greedy generation, then (checking) a teacher-forced one
        if (gen_mode_run(tk[k].g, prompt, NULL, &tk[k].out) < 0) {
            if (k == 0) {
                set_all(rs, n,
                        mode_fail_status() == BENCH_OOM ? BENCH_OOM : BENCH_EAGER_FAIL_TO_RUN,
                        gen_error(tk[0].g));
                goto done;
            }
            set_status(&rs[k], mode_fail_status(), "%s", gen_error(tk[k].g));
            gen_mode_free(tk[k].g);
            tk[k].g = NULL;
            continue;
        }
        rs[k].kernels = tk[k].out.kernels_step;
        rs[k].peak_bytes = (int64_t)tk[k].out.peak_bytes;
        rs[k].gen.kv_bytes_per_token = tk[k].out.kv_bytes_per_token;
        rs[k].gen.prefill_kernels = tk[k].out.kernels_prefill;
        rs[k].gen.weight_error = gen_quant_error(tk[0].g);
        bench_accuracy *a = &rs[k].acc;
        if (!have_ref) {
            snprintf(a->reason, sizeof a->reason, "%.150s",
                     check ? err : "not checked (--no-accuracy, or a later process)");
            continue;
        }
        if (gen_mode_run(tk[k].g, prompt, ref.tokens, &tk[k].out) < 0) {
            if (k == 0) { // eager's teacher-forced run: no baseline, nothing else tried
                set_all(rs, n, BENCH_EAGER_FAIL_TO_RUN, gen_error(tk[0].g));
                goto done;
            }
            set_status(&rs[k], mode_fail_status(), "%s", gen_error(tk[k].g));
            gen_mode_free(tk[k].g);
            tk[k].g = NULL;
            continue;
        }
        char why[400] = "";
        double worst = NAN;
        double gtol = gen_check_tol(tol, o.amp);
        int bad = gen_check(&tk[k].out, &ref, gtol, o.amp != DT_F32, &worst, why, sizeof why);
        a->checked = true;
        a->tol = gtol;
        a->rel_l2 = worst;
        snprintf(a->rule, sizeof a->rule, "%s%s", bad ? "failed: " : "greedy tokens",
                 bad ? why : "");
    }
    if (time_modes(p, tk, rs, n) < 0)
        goto done;
    for (int k = 0; k < n; k++) {
        bench_result *r = &rs[k];
        if (k > 0 && !tk[k].g)
            continue;
        r->message[0] = 0;
        if (r->acc.checked && !strncmp(r->acc.rule, "failed", 6))
            set_status(r, BENCH_FAIL_ACCURACY, "%s", r->acc.rule + 8);
        else
            r->status = k == 0 ? BENCH_OK : BENCH_PASS;
        if (k > 0 && r->peak_bytes > 0 && rs[0].peak_bytes > 0)
            r->compression_ratio = (double)rs[0].peak_bytes / (double)r->peak_bytes;
    }
    bench_group_judge(rs, n, p->cfg.threads);
done:
    for (int k = 0; k < n; k++) {
        gen_mode_free(tk[k].g);
        gen_out_free(&tk[k].out);
        free(tk[k].ttft);
        free(tk[k].steps);
    }
    gen_ref_free(&ref);
    free(prompt);
    for (int k = 0; k < n && !kcache; k++) // KCACHE/MODE is the parent's to remove
        if (cache[k][0])
            bench_remove_tree(cache[k]);
}

// ---- the chat workload -------------------------------------------------------
//
// Each mode runs the dialogue twice: with the earlier rounds' cache kept
// and with every round prefilled anew. A sample is one dialogue's last
// round's time to first token (the entry's samples: the kept cache's, so
// the speedup compares the modes there); every round's median goes beside
// it both ways. Every way must give eager's tokens (greedy, the same
// weights; generate's check against fp64 covers the decode itself).

typedef struct chat_task {
    gen_chat *c;
    const int32_t *turns;
    int32_t *tokens;
    int64_t R;
    double *ttft;            // this dialogue's rounds
    double *all;             // every timed dialogue's rounds, R a dialogue
    int nall, capall;        // doubles in all
    double last;             // this dialogue's last round
} chat_task;

static int chat_step_fn(void *ctx) {
    chat_task *t = ctx;
    if (gen_chat_run(t->c, t->turns, t->tokens, t->ttft) < 0)
        return -1;
    t->last = t->ttft[t->R - 1];
    for (int64_t r = 0; r < t->R; r++)
        if (push(&t->all, &t->nall, &t->capall, t->ttft[r]) < 0)
            return -1;
    return 0;
}
static int chat_clock_stop(void *ctx, double *seconds) {
    *seconds = ((chat_task *)ctx)->last;
    return 0;
}
static const bench_clock chat_clock = {gen_clock_start, chat_clock_stop};
static void chat_clear(void *ctx) { ((chat_task *)ctx)->nall = 0; }

// Round r's median over the timed dialogues.
static double round_median(const chat_task *t, int64_t r) {
    int n = t->nall / (int)t->R;
    double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    if (!v || n == 0) {
        free(v);
        return NAN;
    }
    for (int i = 0; i < n; i++)
        v[i] = t->all[i * t->R + r];
    double m = median(v, n);
    free(v);
    return m;
}

void measure_chat(const bench_plan *p, const bench_group *gr, const bench_case *bc,
                  const char *kcache, bench_result *rs, int n) {
    const suite_case *sc = bc->c;
    int64_t U = gen_prompt_len(&p->cfg, sc), G = gen_new_tokens(&p->cfg, sc);
    int64_t R = gen_rounds(&p->cfg, sc), B = bc->batch;
    gen_opts o = {.batch = B,
                  .seed = p->cfg.seed,
                  .fused_attention = p->cfg.fused_attention,
                  .weight_bits = p->cfg.weight_bits,
                  .weight_group = p->cfg.weight_group,
                  .weight_scales = p->cfg.weight_scales,
                  .device = p->tasks[gr->first].axis[BENCH_AXIS_DEVICE],
                  .amp = gen_amp(p, gr)};
    if (R > BENCH_MAX_CHAT_ROUNDS) {
        set_all(rs, n, BENCH_ERROR, "chat: at most 16 rounds");
        return;
    }
    chat_task tk[2 * BENCH_MODE_COUNT] = {{0}};
    compile_opts co[BENCH_MODE_COUNT];
    char cache[BENCH_MODE_COUNT][1024] = {{0}};
    char dump[BENCH_MODE_COUNT][1024];
    int32_t *turns = malloc((size_t)(R * B * U) * sizeof *turns);
    char err[600];
    if (!turns) {
        set_all(rs, n, BENCH_OOM, "out of memory for the dialogue");
        return;
    }
    for (int k = 0; k < 2 * n; k++) {
        int m = k / 2, mode = p->tasks[gr->first + m].axis[BENCH_AXIS_MODE];
        if (k % 2 == 1 && !tk[k - 1].c)
            continue; // the mode failed already
        gen_opts mo = o;
        co[m] = gen_compile_opts(p, bc, mode, dump[m], sizeof dump[m]);
        if (mode != BENCH_MODE_EAGER && k % 2 == 0) {
            char name[64];
            snprintf(name, sizeof name, "%s-chat", bench_axis_value(BENCH_AXIS_MODE, mode));
            snprintf(cache[m], sizeof cache[m], "%s/%s", kcache ? kcache : "", name);
            bool later = kcache && access(cache[m], F_OK) == 0;
            if (!later &&
                measure_mode_cache(kcache, name, cache[m], sizeof cache[m], err, sizeof err) < 0)
                cache[m][0] = 0;
        }
        if (cache[m][0])
            co[m].cache_dir = cache[m];
        mo.compile = &co[m];
        gen_chat_opts c = {.rounds = R, .turn_len = U, .gen_len = G, .reuse = k % 2 == 0};
        gen_kind kind = mode == BENCH_MODE_EAGER ? GEN_EAGER : GEN_COMPILED;
        tk[k].R = R;
        tk[k].turns = turns;
        tk[k].ttft = malloc((size_t)R * sizeof *tk[k].ttft);
        tk[k].tokens = malloc((size_t)(B * R * G) * sizeof *tk[k].tokens);
        if (!tk[k].ttft || !tk[k].tokens ||
            gen_chat_new(bc->md, sc->overrides, sc->noverrides, &mo, &c, kind, k ? tk[0].c : NULL,
                         &tk[k].c, err, sizeof err) < 0) {
            if (!tk[k].ttft || !tk[k].tokens)
                snprintf(err, sizeof err, "out of memory");
            if (m == 0) {
                set_all(rs, n, BENCH_ERROR, err);
                goto done;
            }
            set_status(&rs[m], mode_fail_status(), "%s", err);
            gen_chat_free(tk[2 * m].c);
            tk[2 * m].c = NULL;
            continue;
        }
        if (k == 0) // the user's turns
            gen_seeded_ids(turns, R * B * U, gen_chat_vocab(tk[0].c), p->cfg.seed + 1);
    }
    // every way gives eager's tokens
    for (int k = 0; k < 2 * n; k++) {
        if (!tk[k].c)
            continue;
        bench_result *r = &rs[k / 2];
        if (gen_chat_run(tk[k].c, turns, tk[k].tokens, tk[k].ttft) < 0) {
            if (k < 2) { // eager's dialogue: no baseline, nothing else tried
                set_all(rs, n, BENCH_EAGER_FAIL_TO_RUN, gen_chat_error(tk[k].c));
                goto done;
            }
            set_status(r, mode_fail_status(), "%s", gen_chat_error(tk[k].c));
            gen_chat_free(tk[k].c), tk[k].c = NULL;
            gen_chat_free(tk[k ^ 1].c), tk[k ^ 1].c = NULL;
            continue;
        }
        int64_t bad = -1;
        r->acc.rel_l2 = r->acc.rmse = r->acc.max_abs = NAN; // tokens compared, not values
        for (int64_t i = 0; k && i < B * R * G && bad < 0; i++)
            if (tk[k].tokens[i] != tk[0].tokens[i])
                bad = i;
        r->acc.checked = true;
        if (bad >= 0 && strncmp(r->acc.rule, "failed", 6))
            snprintf(r->acc.rule, sizeof r->acc.rule,
                     "failed: %s, round %lld token %lld is %d where eager's is %d",
                     k % 2 ? "prefilled anew" : "cache kept", (long long)(bad / G % R + 1),
                     (long long)(bad % G), tk[k].tokens[bad], tk[0].tokens[bad]);
        else if (!r->acc.rule[0])
            snprintf(r->acc.rule, sizeof r->acc.rule, "eager's tokens, cache kept and anew");
    }
    bench_step steps[2 * BENCH_MODE_COUNT] = {{0}};
    bench_timing tm[2 * BENCH_MODE_COUNT];
    int who[2 * BENCH_MODE_COUNT], ns = 0, bad = -1;
    for (int k = 0; k < 2 * n; k++)
        if (tk[k].c && tk[k ^ 1].c) {
            who[ns] = k;
            steps[ns++] = (bench_step){chat_step_fn, &tk[k], &chat_clock};
        }
    bench_probe before = {0}, after = {0};
    if (time_steps(p, steps, ns, chat_clear, tm, &bad, &before, &after) < 0) {
        set_all(rs, n, bad < 0 ? BENCH_OOM : BENCH_ERROR,
                bad < 0 ? "out of memory for the samples" : gen_chat_error(tk[who[bad]].c));
        goto done;
    }
    for (int s = 0; s < ns; s++) {
        int k = who[s];
        bench_result *r = &rs[k / 2];
        r->gen = (bench_gen){.done = true, .prompt_len = U, .new_tokens = G, .rounds = R,
                             .ttft_s = NAN, .decode_s = NAN, .tokens_per_s = NAN,
                             .weight_error = NAN};
        if (k % 2) { // the anew dialogue: its rounds' medians alone
            bench_timing_free(&tm[s]);
            continue;
        }
        measure_keep_timing(p, r, &tm[s], &before, &after);
    }
    for (int m = 0; m < n; m++) {
        bench_result *r = &rs[m];
        if (!tk[2 * m].c || !tk[2 * m + 1].c)
            continue;
        for (int64_t k = 0; k < R; k++) {
            r->gen.ttft_reuse_s[k] = round_median(&tk[2 * m], k);
            r->gen.ttft_anew_s[k] = round_median(&tk[2 * m + 1], k);
        }
        r->gen.ttft_s = r->gen.ttft_reuse_s[R - 1];
        r->message[0] = 0;
        if (!strncmp(r->acc.rule, "failed", 6))
            set_status(r, BENCH_FAIL_ACCURACY, "%s", r->acc.rule + 8);
        else
            r->status = m == 0 ? BENCH_OK : BENCH_PASS;
    }
    bench_group_judge(rs, n, p->cfg.threads);
done:
    for (int k = 0; k < 2 * n; k++) {
        gen_chat_free(tk[k].c);
        free(tk[k].ttft);
        free(tk[k].tokens);
        free(tk[k].all);
    }
    free(turns);
    for (int m = 0; m < n && !kcache; m++)
        if (cache[m][0])
            bench_remove_tree(cache[m]);
}
