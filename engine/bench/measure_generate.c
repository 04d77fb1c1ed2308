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

static compile_opts gen_compile_opts(int mode) {
    compile_opts o = compile_opts_default();
    o.capture = mode != BENCH_MODE_FUSED && o.capture;
    o.fusion = mode != BENCH_MODE_CAPTURED && o.fusion;
    return o;
}

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
    bench_timing_opts opts = {.repeat = p->cfg.repeat,
                              .warmup_fixed = p->cfg.warmup ? p->cfg.warmup : 1,
                              .one_step_samples = true,
                              .min_time_s = p->cfg.min_time_s,
                              .max_time_s = p->cfg.max_time_s,
                              .ci_target = BENCH_CI_TARGET};
    int rc = bench_time_warm_up(steps, ns, &opts, tm, &bad);
    for (int k = 0; k < n; k++)
        tk[k].nttft = tk[k].nsteps = 0; // the warm-up's generations are not figures
    bench_probe before = {0}, after = {0};
    if (rc == 0) {
        bench_probe_read(&before);
        rc = bench_time_rounds(steps, ns, &opts, tm, &bad);
        bench_probe_read(&after);
    }
    if (rc < 0) {
        for (int k = 0; k < ns; k++)
            bench_timing_free(&tm[k]);
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
        r->samples = tm[s].samples;
        r->host_samples = tm[s].host_samples;
        r->nsamples = tm[s].nsamples;
        r->iters_per_sample = 1;
        bench_stats_compute(r->samples, r->nsamples, &r->stats);
        bench_probe_diff(&before, &after, &r->stab);
        r->stab.rounds = r->nsamples;
        r->stab.processes = 1;
        r->stab.process_samples[0] = r->nsamples;
        r->stab.threads = p->cfg.threads;
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
                  .device = p->tasks[gr->first].axis[BENCH_AXIS_DEVICE]};
    if (o.device == BENCH_DEV_CUDA) {
        // each CUDA program uploads its own copy of the model's sources: the
        // prefill's cache writes would not reach the decode step's copy
        set_all(rs, n, BENCH_ERROR,
                "generate: not built for --device cuda yet (the step programs would each keep "
                "their own device copy of the static cache); run --device cpu");
        return;
    }
    if (p->tasks[gr->first].axis[BENCH_AXIS_PRECISION] != BENCH_PREC_FP32) {
        set_all(rs, n, BENCH_ERROR,
                "generate: amp is not built yet (the caches and their casts); run --precision "
                "fp32");
        return;
    }
    gen_task tk[BENCH_MODE_COUNT] = {{0}};
    compile_opts co[BENCH_MODE_COUNT];
    char cache[BENCH_MODE_COUNT][1024] = {{0}}; // each mode compiles cold, into its own
    gen_ref ref = {0};
    int32_t *prompt = NULL;
    char err[600];
    for (int k = 0; k < n; k++) {
        rs[k].gen = (bench_gen){.done = true, .prompt_len = o.prompt_len,
                                .new_tokens = o.new_tokens, .ttft_s = NAN, .decode_s = NAN,
                                .tokens_per_s = NAN, .weight_error = NAN};
        int mode = p->tasks[gr->first + k].axis[BENCH_AXIS_MODE];
        gen_opts mo = o;
        co[k] = gen_compile_opts(mode);
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
                set_all(rs, n, mode_fail_status() == BENCH_OOM ? BENCH_OOM : BENCH_ERROR,
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
            set_status(&rs[k], k ? mode_fail_status() : BENCH_ERROR, "%s", gen_error(tk[k].g));
            if (k == 0)
                goto done;
            gen_mode_free(tk[k].g);
            tk[k].g = NULL;
            continue;
        }
        char why[400] = "";
        double worst = NAN;
        int bad = gen_check(&tk[k].out, &ref, tol, &worst, why, sizeof why);
        a->checked = true;
        a->tol = tol;
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
