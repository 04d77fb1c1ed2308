// Measuring one group in this process: what a child does (runner.h). Eager
// and every compiled-family mode of one case, as PyTorch's harness does:
// build once, compile, check accuracy first, then time all modes
// interleaved. The executors are exec.h's, so the same steps run on the
// CPU and on the GPU.
#include "runner.h"

#include "autocast.h"
#include "autograd.h"
#include "base/clock.h"
#include "base/files.h"
#include "exec.h"
#include "ref.h"
#include "timing.h"
#include "train_check.h"

#include <cblas.h>
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void set_status(bench_result *r, enum bench_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_status(bench_result *r, enum bench_status s, const char *fmt, ...) {
    r->status = s;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->message, sizeof r->message, fmt, ap);
    va_end(ap);
}

// The same end for every entry of the group (the model would not build, ...).
static void set_all(bench_result *rs, int n, enum bench_status s, const char *msg) {
    for (int i = 0; i < n; i++)
        set_status(&rs[i], s, "%s", msg);
}

// The baseline failed (it could not be made, or a step failed): there is
// nothing to compare with. On the CPU only memory fails eager, and every
// mode ends oom; on the GPU (no device, a kernel the backend lacks) eager
// ends error and each compiled-family mode fail_to_run, all with its words.
static void eager_failed(bench_result *rs, int n, bool cuda, const char *msg) {
    for (int k = 0; k < n; k++)
        set_status(&rs[k], !cuda ? BENCH_OOM : k == 0 ? BENCH_ERROR : BENCH_FAIL_TO_RUN, "%s", msg);
}

// One mode of the group: its result, executor, and what its last step said.
typedef struct mode_run {
    int mode;
    bench_result *r;
    bench_exec *x; // eager: the group's baseline; compiled-family: NULL once it failed
    int noutputs;
    tensor **out;  // noutputs slots for a step's outputs
    uint64_t step; // training: the optimizer step of the next run
    int64_t kernels, cast_kernels;
    size_t peak_bytes;
} mode_run;

// "eager_cuda_run: %3 sum_to: ...": a failed step in the executor's words.
static void step_message(const mode_run *mr, char *buf, size_t cap) {
    snprintf(buf, cap, "%s: %s", bench_exec_what(mr->x), bench_exec_error(mr->x));
}

// A compiled-family mode whose step failed ends fail_to_run alone.
static void mode_failed(mode_run *mr) {
    char msg[sizeof mr->r->message];
    step_message(mr, msg, sizeof msg);
    set_status(mr->r, BENCH_FAIL_TO_RUN, "%s", msg);
    bench_exec_free(mr->x);
    mr->x = NULL;
}

// One step, outputs dropped at once as a benchmark loop does (on the GPU:
// enqueued).
static int mode_step(void *ctx) {
    mode_run *mr = ctx;
    bench_exec_set_step(mr->x, ++mr->step);
    bench_exec_stats st;
    int rc = bench_exec_run(mr->x, NULL, &st);
    // eager's figures come from its checked step
    if (rc == 0 && bench_mode_compiled(mr->mode)) {
        mr->kernels = st.kernels, mr->cast_kernels = st.cast_kernels,
        mr->peak_bytes = st.peak_bytes;
        mr->r->arena_bytes = (int64_t)st.arena_bytes;
    }
    return rc;
}

// The GPU's clock around a sample (exec.h: CUDA events on the executor's stream).
static int mode_clock_start(void *ctx) { return bench_exec_sample_start(((mode_run *)ctx)->x); }
static int mode_clock_stop(void *ctx, double *s) {
    return bench_exec_sample_stop(((mode_run *)ctx)->x, s);
}
static const bench_clock device_clock = {mode_clock_start, mode_clock_stop};

static int task_device(const bench_plan *p, const bench_result *r) {
    return p->tasks[r->task].axis[BENCH_AXIS_DEVICE];
}

static bench_exec_opts exec_opts(const bench_plan *p, int device) {
    return (bench_exec_opts){.device = device, .tf32 = p->cfg.tf32, .flush_l2 = p->cfg.flush_l2};
}

// A compiled-family mode's switches: the kill switches hold in every mode.
static compile_opts mode_compile_opts(int mode) {
    compile_opts o = compile_opts_default();
    o.capture = mode != BENCH_MODE_FUSED && o.capture;
    o.fusion = mode != BENCH_MODE_CAPTURED && o.fusion;
    return o;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void bench_remove_tree(const char *dir) {
    if (nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) < 0)
        fprintf(stderr, "tcbench: removing %s: %s\n", dir, strerror(errno));
}

// The empty kernel cache a mode compiles into: KCACHE/MODE when the
// group's processes share kcache, else a temporary directory of its own.
static int mode_cache(const char *kcache, const char *mode, char *dir, size_t dcap, char *err,
                      size_t cap) {
    if (kcache) {
        snprintf(dir, dcap, "%s/%s", kcache, mode);
        if (mkdir(dir, 0700) < 0) {
            snprintf(err, cap, "mkdir %.400s: %s", dir, strerror(errno));
            return -1;
        }
        return 0;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, dcap, "%s/tcbench-kcache-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        snprintf(err, cap, "mkdtemp %.400s: %s", dir, strerror(errno));
        return -1;
    }
    return 0;
}

// Compiles mr's mode cold (an empty kernel cache of its own) and warm (the
// same cache: the program kept). On the GPU, which has no kernel cache yet,
// once: the cold time, no warm one. -1 with err: the compiler's words.
static int compile_mode(const bench_plan *p, const bench_case *bc, const model *m, mode_run *mr,
                        const char *kcache, char *err, size_t cap) {
    compile_opts o = mode_compile_opts(mr->mode);
    const bench_exec_opts xo = exec_opts(p, task_device(p, mr->r));
    const char *mode = bench_axis_value(BENCH_AXIS_MODE, mr->mode);
    char dump[4096];
    if (p->cfg.dump_dir) {
        snprintf(dump, sizeof dump, "%s/%s/%s", p->cfg.dump_dir, bc->c->name, mode);
        if (base_mkdir_p(dump, 0777, err, cap) < 0)
            return -1;
        o.dump_dir = dump;
    }
    bench_compile *bc_out = &mr->r->compile;
    if (xo.device == BENCH_DEV_CUDA) {
        double t0 = base_now();
        int rc = bench_exec_compile(m, &o, &xo, &mr->x, err, cap);
        bc_out->cold_s = base_now() - t0;
        if (rc < 0)
            return -1;
        bc_out->warm_s = NAN;
        bc_out->cache_hit = false;
        bc_out->done = true;
        return 0;
    }
    char cache[1024];
    if (mode_cache(kcache, mode, cache, sizeof cache, err, cap) < 0)
        return -1;
    o.cache_dir = cache;
    bench_exec *cold = NULL;
    double t0 = base_now();
    int rc = bench_exec_compile(m, &o, &xo, &cold, err, cap);
    bc_out->cold_s = base_now() - t0;
    bench_exec_free(cold);
    if (rc == 0) {
        o.dump_dir = NULL;
        t0 = base_now();
        rc = bench_exec_compile(m, &o, &xo, &mr->x, err, cap);
        bc_out->warm_s = base_now() - t0;
    }
    if (!kcache) // the group's processes share KCACHE/MODE; the parent removes it
        bench_remove_tree(cache);
    if (rc < 0)
        return -1;
    size_t arena;
    bench_exec_compile_info(mr->x, &bc_out->cache_hit, &arena);
    bc_out->done = true;
    mr->r->arena_bytes = (int64_t)arena;
    return 0;
}

// Why the fp64 reference is not run, or "" when it is.
static void reference_skip(const bench_plan *p, const bench_case *bc, char *why, size_t cap) {
    why[0] = '\0';
    if (!p->cfg.accuracy)
        snprintf(why, cap, "disabled by --no-accuracy");
    else if (bc->flops > p->cfg.accuracy_flops_limit)
        snprintf(why, cap,
                 "skipped: %.3g FLOPs per step is above the %.3g limit of the fp64 reference",
                 bc->flops, p->cfg.accuracy_flops_limit);
}

// TCBENCH_LOG=accuracy: each compared item's error, on stderr.
static bool log_accuracy(void) {
    const char *l = getenv("TCBENCH_LOG");
    return l && strstr(l, "accuracy");
}

// PyTorch's rule on each of n items (outputs; for training also the
// parameters after the steps) of a compiled-family mode (accuracy.h): x
// against eager's eo and the reference ref (NULL when not run); eager_rmse[i]
// is eager's RMSE against ref on item i. m names the items of a training
// check (NULL: "output i").
static void judge(mode_run *mr, int n, tensor *const *x, tensor *const *eo, double *const *ref,
                  const double *eager_rmse, double eager_rmse_all, double tol, const model *m,
                  const bool *skip) {
    bench_accuracy *acc = &mr->r->acc;
    enum bench_rule worst = BENCH_RULE_ALLCLOSE;
    char why[sizeof acc->rule] = "";
    acc->vs_eager = true;
    acc->checked = true;
    acc->vs_eager_max_abs = acc->vs_eager_rel_l2 = 0;
    acc->eager_rmse = ref ? eager_rmse_all : NAN;
    if (!ref)
        acc->rel_l2 = acc->max_abs = acc->rmse = NAN;
    for (int i = 0; i < n; i++) {
        if (skip && skip[i])
            continue;
        bench_vs_eager ve;
        bench_accuracy_vs_eager(x[i], eo[i], tol, &ve);
        acc->vs_eager_max_abs = isnan(ve.max_abs) ? NAN : fmax(acc->vs_eager_max_abs, ve.max_abs);
        acc->vs_eager_rel_l2 = isnan(ve.rel_l2) ? NAN : fmax(acc->vs_eager_rel_l2, ve.rel_l2);
        double rmse = NAN, ermse = NAN;
        if (ref) {
            bench_accuracy_out o;
            bench_accuracy_compare(x[i], ref[i], &o);
            if (m) { // training: the floored relative error (train_check.h)
                o.rel_l2 = train_item_error(x[i], ref[i], tol);
                if (log_accuracy()) {
                    char name[160];
                    train_item_name(m, i, name, sizeof name);
                    fprintf(stderr, "accuracy: %s: %s vs fp64 %.3g, vs eager max abs %.3g\n", name,
                            bench_axis_value(BENCH_AXIS_MODE, mr->mode), o.rel_l2, ve.max_abs);
                }
            }
            bench_accuracy_merge(acc, &o);
            rmse = o.rmse;
            ermse = eager_rmse[i];
        }
        char w[sizeof why];
        enum bench_rule r = bench_rule_apply(&ve, rmse, ermse, tol, w, sizeof w);
        if (r == BENCH_RULE_FAILED && worst != BENCH_RULE_FAILED) {
            char name[160];
            if (m)
                train_item_name(m, i, name, sizeof name);
            else
                snprintf(name, sizeof name, "output %d", i);
            snprintf(why, sizeof why, "%.60s: %.120s", name, w);
        }
        if (r > worst)
            worst = r;
    }
    if (worst == BENCH_RULE_FAILED)
        snprintf(acc->rule, sizeof acc->rule, "failed: %.185s", why);
    else
        snprintf(acc->rule, sizeof acc->rule, "%s", bench_rule_name(worst));
}

// Eager's outputs and the fp64 reference's, kept while the compiled-family
// modes are checked against them.
typedef struct reference {
    tensor *eager[BENCH_MAX_OUTPUTS];
    double *fp64[BENCH_MAX_OUTPUTS]; // NULL when the reference is not run
    bool have_fp64;
    int noutputs;
} reference;

static void reference_free(reference *ref) {
    for (int i = 0; i < ref->noutputs; i++) {
        tensor_free(ref->eager[i]);
        free(ref->fp64[i]);
    }
}

// Mixed precision: eager's outputs may also pass against fp64 by their
// cosine similarity (accuracy.h), PyTorch's fallback for AMP.
static bool amp_task(const bench_plan *p, const bench_result *r) {
    return p->tasks[r->task].axis[BENCH_AXIS_PRECISION] == BENCH_PREC_AMP;
}

// fp32 on the GPU under --tf32: GEMM and convolution inputs keep 10
// mantissa bits, as f16's, so the check is AMP's: its tolerance and its
// cosine fallback (the fp32 training steps and baseline stay as they are).
static bool tf32_task(const bench_plan *p, const bench_task *t) {
    return p->cfg.tf32 && t->axis[BENCH_AXIS_DEVICE] == BENCH_DEV_CUDA &&
           t->axis[BENCH_AXIS_PRECISION] == BENCH_PREC_FP32;
}

static bool cosine_fallback(const bench_plan *p, const bench_result *r) {
    return amp_task(p, r) || tf32_task(p, &p->tasks[r->task]);
}

// Accuracy first: eager once, before anything is compiled (its kernels and
// peak memory come from this step), and the fp64 reference once. -1 when
// the group cannot go on (every status set).
static int check_eager(const bench_plan *p, const bench_case *bc, const model *m, mode_run *runs,
                       int n, double tol, reference *ref) {
    bench_result *er = runs[0].r;
    char skip[160], err[256] = "";
    bench_exec_stats st;
    ref->noutputs = m->g->noutputs;
    if (bench_exec_run(runs[0].x, ref->eager, &st) < 0) {
        char msg[sizeof er->message];
        step_message(&runs[0], msg, sizeof msg);
        eager_failed(er, n, task_device(p, er) == BENCH_DEV_CUDA, msg);
        return -1;
    }
    runs[0].kernels = st.kernels;
    runs[0].cast_kernels = st.cast_kernels;
    runs[0].peak_bytes = st.peak_bytes;
    reference_skip(p, bc, skip, sizeof skip);
    for (int i = 0; i < n; i++) {
        runs[i].r->acc.tol = tol;
        runs[i].r->acc.cosine_fallback = cosine_fallback(p, runs[i].r);
        snprintf(runs[i].r->acc.reason, sizeof runs[i].r->acc.reason, "%s", skip);
    }
    ref->have_fp64 = !skip[0];
    if (!ref->have_fp64)
        return 0;
    if (ref_run(m, ref->fp64, err, sizeof err) < 0) {
        for (int i = 0; i < n; i++)
            set_status(runs[i].r, BENCH_ERROR, "fp64 reference: %s", err);
        return -1;
    }
    for (int i = 0; i < ref->noutputs; i++) {
        bench_accuracy_out o;
        bench_accuracy_compare(ref->eager[i], ref->fp64[i], &o);
        bench_accuracy_merge(&er->acc, &o);
    }
    er->acc.checked = true;
    return 0;
}

// Each compiled-family mode once, against eager and fp64; a mode that fails
// to run ends fail_to_run alone.
static void check_compiled(const bench_plan *p, mode_run *runs, int n, double tol,
                           const reference *ref) {
    for (int k = 1; k < n; k++) {
        if (!runs[k].x)
            continue;
        tensor *xo[BENCH_MAX_OUTPUTS] = {0};
        bench_exec_stats cs;
        if (bench_exec_run(runs[k].x, xo, &cs) < 0) {
            mode_failed(&runs[k]);
            continue;
        }
        runs[k].r->arena_bytes = (int64_t)cs.arena_bytes;
        if (p->cfg.accuracy) {
            double ermse[BENCH_MAX_OUTPUTS];
            for (int i = 0; i < ref->noutputs; i++)
                ermse[i] = runs[0].r->acc.outputs[i].rmse;
            judge(&runs[k], ref->noutputs, xo, ref->eager, ref->have_fp64 ? ref->fp64 : NULL, ermse,
                  runs[0].r->acc.rmse, tol, NULL, NULL);
        }
        for (int i = 0; i < ref->noutputs; i++)
            tensor_free(xo[i]);
    }
}

// Training: every mode two optimizer steps from the same starting values
// (train_check.h); eager against the fp64 reference's own two steps, each
// compiled-family mode against eager's by PyTorch's rule. Kernels and peak
// memory come from the second step. The values are put back after. -1 when
// the group cannot go on (every status set).
static int check_train(const bench_plan *p, const bench_case *bc, const model *m, mode_run *runs,
                       int n, double tol) {
    int nitems = train_check_items(m), nout = m->g->noutputs, rc = -1;
    tensor **eitems = calloc((size_t)nitems, sizeof *eitems);
    tensor **xitems = calloc((size_t)nitems, sizeof *xitems);
    double **ref = calloc((size_t)nitems, sizeof *ref);
    double **base = calloc((size_t)nitems, sizeof *base); // amp: fp64 on rounded values
    double *ermse = calloc((size_t)nitems, sizeof *ermse);
    bool *noise = calloc((size_t)nitems, sizeof *noise);
    tensor **outs = runs[0].out;
    train_snapshot s0 = {0};
    char skip[160], err[512] = "";
    bench_result *er = runs[0].r;
    if (!eitems || !xitems || !ref || !base || !ermse || !noise ||
        train_snapshot_take(m, &s0) < 0) {
        set_all(er, n, BENCH_OOM, "out of memory setting up the training check");
        goto done;
    }
    reference_skip(p, bc, skip, sizeof skip);
    // the scaler skips a step when an f16 gradient overflows; the reference,
    // which does not round to f16, never does: eager alone is the yardstick
    if (!skip[0] && p->cfg.grad_scaler && amp_task(p, er))
        snprintf(skip, sizeof skip,
                 "skipped: under --grad-scaler a step is skipped when an f16 gradient "
                 "overflows, which the fp64 reference cannot");
    for (int i = 0; i < n; i++) {
        runs[i].r->acc.tol = tol;
        runs[i].r->acc.cosine_fallback = cosine_fallback(p, runs[i].r);
        snprintf(runs[i].r->acc.reason, sizeof runs[i].r->acc.reason, "%s", skip);
    }
    bool have_fp64 = !skip[0];
    const uint64_t steps = train_check_steps(amp_task(p, er));
    if (have_fp64 && train_reference(m, steps, ref, err, sizeof err) < 0) {
        for (int i = 0; i < n; i++)
            set_status(runs[i].r, BENCH_ERROR, "fp64 reference: %s", err);
        goto done;
    }
    bench_exec_stats st;
    for (uint64_t step = 1; step <= steps; step++) {
        bench_exec_set_step(runs[0].x, step);
        if (bench_exec_run(runs[0].x, outs, &st) < 0) {
            char msg[sizeof er->message];
            step_message(&runs[0], msg, sizeof msg);
            eager_failed(er, n, task_device(p, er) == BENCH_DEV_CUDA, msg);
            goto done;
        }
        if (step < steps)
            for (int i = 0; i < nout; i++)
                tensor_free(outs[i]);
    }
    runs[0].kernels = st.kernels;
    runs[0].cast_kernels = st.cast_kernels;
    runs[0].peak_bytes = st.peak_bytes;
    if (train_check_fill(m, outs, eitems) < 0) {
        set_all(er, n, BENCH_OOM, "out of memory copying eager's parameters");
        goto done;
    }
    if (train_check_skips(m, have_fp64 ? ref : NULL, eitems, noise) < 0) {
        set_all(er, n, BENCH_OOM, "out of memory");
        goto done;
    }
    if (have_fp64) { // Adam's sign of noise (train_check.h)
        int64_t set = train_mask_eager(m, eitems, ref);
        if (log_accuracy())
            fprintf(stderr,
                    "accuracy: eager: %lld parameter elements whose gradient's sign "
                    "differs from fp64's take fp64's update\n",
                    (long long)set);
    }
    // the baseline of fp64 on the model's values rounded to the low dtype
    // (mixed precision: f16 or bf16), or moved by one ulp (fp32)
    er->acc.baseline_fallback = have_fp64 && !amp_task(p, er);
    if (have_fp64 && train_reference_rounded(m, &s0, amp_task(p, er) ? p->cfg.amp_dtype : DT_F32,
                                             steps, base, err, sizeof err) < 0) {
        for (int i = 0; i < n; i++)
            set_status(runs[i].r, BENCH_ERROR, "fp64 reference (rounded values): %s", err);
        goto done;
    }
    if (have_fp64) {
        double worst = -1, top = 0; // top: the largest gradient element (fp64)
        for (int k = 1; k < nout; k++)
            for (int64_t e = 0; e < tensor_numel(eitems[k]); e++)
                top = fmax(top, fabs(ref[k][e]));
        for (int i = 0; i < nitems; i++) {
            if (noise[i])
                continue;
            bench_accuracy_out o;
            bench_accuracy_compare(eitems[i], ref[i], &o);
            o.rel_l2 = train_item_error(eitems[i], ref[i], tol);
            // a gradient that is zero in exact arithmetic (its parameter is
            // not compared after the steps): its rounding noise against the
            // model's largest gradient
            if (i >= 1 && i < nout && noise[nout + i - 1] && top > 0)
                o.rel_l2 = o.max_abs / top;
            if (base[i]) {
                double d2 = 0;
                int64_t ne = tensor_numel(eitems[i]);
                for (int64_t e = 0; e < ne; e++)
                    d2 += (base[i][e] - ref[i][e]) * (base[i][e] - ref[i][e]);
                o.base_rmse = ne ? sqrt(d2 / (double)ne) : 0;
            }
            if (log_accuracy()) {
                char name[160];
                train_item_name(m, i, name, sizeof name);
                fprintf(stderr,
                        "accuracy: %s: eager vs fp64 %.3g (rms %.3g, cosine %.6f, rounded-values "
                        "baseline rms %.3g)\n",
                        name, o.rel_l2, o.rmse, o.cosine, o.base_rmse);
            }
            bench_accuracy_merge(&er->acc, &o);
            // the compiled modes' noise yardstick (PyTorch's RMSE rule):
            // eager's error, or in fp32 training the model's own one-ulp
            // sensitivity when that is larger (a chaotic model's two steps)
            ermse[i] = er->acc.baseline_fallback && o.base_rmse > o.rmse ? o.base_rmse : o.rmse;
            if (!(o.rel_l2 <= worst)) { // NaN counts as worst
                worst = isnan(o.rel_l2) ? INFINITY : o.rel_l2;
                train_item_name(m, i, er->acc.worst, sizeof er->acc.worst);
            }
        }
        er->acc.checked = true;
    }
    for (int k = 1; k < n; k++) {
        if (!runs[k].x)
            continue;
        train_snapshot_restore(m, &s0);
        bench_exec_stats cs;
        bool ok = true;
        for (uint64_t step = 1; step <= steps && ok; step++) {
            bench_exec_set_step(runs[k].x, step);
            if (bench_exec_run(runs[k].x, outs, &cs) < 0) {
                mode_failed(&runs[k]);
                ok = false;
            } else if (step < steps) {
                for (int i = 0; i < nout; i++)
                    tensor_free(outs[i]);
            }
        }
        if (!ok)
            continue;
        runs[k].kernels = cs.kernels;
        runs[k].cast_kernels = cs.cast_kernels;
        runs[k].peak_bytes = cs.peak_bytes;
        if (train_check_fill(m, outs, xitems) < 0) {
            set_all(er, n, BENCH_OOM, "out of memory copying the parameters");
            goto done;
        }
        {
            int64_t set = train_mask_mode(m, xitems, eitems, have_fp64 ? ref : NULL);
            if (log_accuracy())
                fprintf(stderr,
                        "accuracy: %s: %lld parameter elements whose gradient's sign "
                        "differs take eager's update\n",
                        bench_axis_value(BENCH_AXIS_MODE, runs[k].mode), (long long)set);
        }
        if (p->cfg.accuracy)
            judge(&runs[k], nitems, xitems, eitems, have_fp64 ? ref : NULL, ermse, er->acc.rmse,
                  tol, m, noise);
        train_check_free_items(nitems, xitems);
    }
    rc = 0;
done:
    if (s0.data)
        train_snapshot_restore(m, &s0);
    train_snapshot_free(&s0);
    if (eitems)
        train_check_free_items(nitems, eitems);
    if (xitems)
        train_check_free_items(nitems, xitems);
    for (int i = 0; ref && i < nitems; i++)
        free(ref[i]);
    for (int i = 0; base && i < nitems; i++)
        free(base[i]);
    free(ref);
    free(base);
    free(ermse);
    free(noise);
    free(eitems);
    free(xitems);
    return rc;
}

// The measuring options of the run (timing.h): the budget, and the
// adaptive rounds against the speedups' interval.
static bench_timing_opts timing_opts(const bench_plan *p, bool cuda) {
    return (bench_timing_opts){.repeat = p->cfg.repeat,
                               .warmup_fixed = p->cfg.warmup,
                               .one_step_samples = cuda && p->cfg.flush_l2,
                               .min_time_s = p->cfg.min_time_s,
                               .max_time_s = p->cfg.max_time_s,
                               .ci_target = BENCH_CI_TARGET};
}

// TCBENCH_TEST_NOISE (runner.h): sample i stretched by 1 + i mod 3, which
// moves the median absolute deviation, not just one outlier.
static void test_noise(const bench_plan *p, bench_result *r) {
    const bench_task *t = &p->tasks[r->task];
    if (!bench_test_noise(p->cases[t->case_index].c->name,
                          bench_axis_value(BENCH_AXIS_MODE, t->axis[BENCH_AXIS_MODE])))
        return;
    for (int i = 0; i < r->nsamples; i++) {
        r->samples[i] *= 1 + i % 3;
        if (r->host_samples)
            r->host_samples[i] *= 1 + i % 3;
    }
}

// The samples of every mode, once timing succeeded; the machine during
// the timed rounds goes into each entry's stability.
static void keep_samples(const bench_plan *p, mode_run **who, bench_timing *tm, int ns,
                         const bench_probe *before, const bench_probe *after) {
    for (int k = 0; k < ns; k++) {
        bench_result *r = who[k]->r;
        r->samples = tm[k].samples;
        r->host_samples = tm[k].host_samples;
        r->nsamples = tm[k].nsamples;
        r->iters_per_sample = tm[k].iters_per_sample;
        test_noise(p, r);
        bench_stats_compute(r->samples, r->nsamples, &r->stats);
        bench_probe_diff(before, after, &r->stab);
        r->stab.rounds = r->nsamples;
        r->stab.noise = r->stab.sample_noise = bench_stats_noise(&r->stats);
        r->stab.processes = 1;
        r->stab.process_medians_s[0] = r->stats.median;
        r->stab.process_samples[0] = r->nsamples;
        r->stab.process_spread = NAN;
        r->stab.threads = p->cfg.threads;
    }
}

// Times every mode still running, interleaved; a compiled-family mode that
// fails a step ends fail_to_run and the others are timed again without it.
// On the GPU each sample is timed by CUDA events on the mode's stream (the
// host's time beside it), one step per sample under --flush-l2, and every
// mode is synchronized at the end, where errors kernels found surface.
static int time_modes(const bench_plan *p, mode_run *runs, int n) {
    bool cuda = task_device(p, runs[0].r) == BENCH_DEV_CUDA;
    bench_timing_opts opts = timing_opts(p, cuda);
    char err[256];
    if (p->cfg.pin && bench_threads_pin(p->cfg.threads, err, sizeof err) < 0)
        fprintf(stderr, "tcbench: --pin: %s; the threads run unpinned\n", err);
    for (;;) {
        bench_step steps[BENCH_MODE_COUNT];
        mode_run *who[BENCH_MODE_COUNT];
        bench_timing tm[BENCH_MODE_COUNT];
        int ns = 0, bad = -1;
        for (int k = 0; k < n; k++)
            if (runs[k].x) {
                who[ns] = &runs[k];
                steps[ns++] = (bench_step){mode_step, &runs[k],
                                           bench_exec_has_clock(runs[k].x) ? &device_clock : NULL};
            }
        bench_probe before = {0}, after = {0};
        int rc = bench_time_warm_up(steps, ns, &opts, tm, &bad);
        if (rc == 0) {
            bench_probe_read(&before);
            rc = bench_time_rounds(steps, ns, &opts, tm, &bad);
            bench_probe_read(&after);
        }
        for (int k = 0; rc == 0 && k < ns; k++)
            if (bench_exec_sync(who[k]->x) < 0) {
                rc = -1;
                bad = k;
            }
        if (rc == 0) {
            keep_samples(p, who, tm, ns, &before, &after);
            return 0;
        }
        for (int k = 0; k < ns; k++)
            bench_timing_free(&tm[k]);
        if (bad < 0) {
            set_all(runs[0].r, n, BENCH_OOM, "malloc: out of memory for the samples");
            return -1;
        }
        if (who[bad] == &runs[0]) {
            char msg[sizeof runs[0].r->message];
            step_message(&runs[0], msg, sizeof msg);
            eager_failed(runs[0].r, n, cuda, msg);
            return -1;
        }
        mode_failed(who[bad]);
    }
}

// Statuses and memory once everything is measured (bench_group_judge then
// gives the speedups and stability).
static void finish(mode_run *runs, int n, double tol) {
    bench_result *er = runs[0].r;
    for (int k = 0; k < n; k++) {
        bench_result *r = runs[k].r;
        if (k > 0 && !runs[k].x)
            continue; // fail_to_run already
        r->kernels = runs[k].kernels;
        r->cast_kernels = runs[k].cast_kernels;
        r->peak_bytes = (int64_t)runs[k].peak_bytes;
        r->message[0] = '\0';
        if (k == 0) {
            r->status = BENCH_OK;
            if (!bench_accuracy_passes(&r->acc, tol))
                set_status(r, BENCH_FAIL_ACCURACY,
                           "rel_l2 %.3g vs the fp64 reference is above %.0e%s%s%s", r->acc.rel_l2,
                           tol,
                           r->acc.cosine_fallback     ? " and its cosine is below 0.99"
                           : r->acc.baseline_fallback ? " and twice the one-ulp baseline"
                                                      : "",
                           r->acc.worst[0] ? ", worst: " : "", r->acc.worst);
            continue;
        }
        if (r->peak_bytes > 0)
            r->compression_ratio = (double)er->peak_bytes / (double)r->peak_bytes;
        if (!strncmp(r->acc.rule, "failed", 6)) {
            set_status(r, BENCH_FAIL_ACCURACY, "%s", r->acc.rule);
            continue;
        }
        r->status = BENCH_PASS;
        if (!r->acc.checked) // the user skipped the check: say the speed is unvalidated
            snprintf(r->message, sizeof r->message,
                     "accuracy not checked (--no-accuracy): the speedup is not validated");
    }
}

// Eager on one thread, right after the rounds, into its one_thread_s: when
// its median on the run's threads is more than BENCH_THREAD_STALL times the
// one-thread median, the threads stalled each other (a nested team made
// anew per call, a second thread pool, a preempted barrier), which is not
// the workload: bench_group_judge makes the group's entries unstable and
// the warning names the figures. CPU eager only (a GPU step does not use
// the host's threads).
static void eager_thread_check(const bench_plan *p, mode_run *runs) {
    bench_result *er = runs[0].r;
    if (p->cfg.threads < 2 || !runs[0].x || er->stats.n == 0 || task_device(p, er) != BENCH_DEV_CPU)
        return;
    bench_timing_opts o = {.repeat = 5, .warmup_fixed = 2, .min_time_s = 0.02};
    bench_timing t = {0};
    omp_set_num_threads(1);
    int rc = bench_time(mode_step, &runs[0], &o, &t);
    omp_set_num_threads(p->cfg.threads);
    bench_stats st;
    if (rc == 0 && bench_stats_compute(t.samples, t.nsamples, &st) == 0)
        er->stab.one_thread_s = st.median;
    bench_timing_free(&t);
}

static void result_init(bench_result *r, int task) {
    memset(r, 0, sizeof *r);
    r->task = task;
    r->status = BENCH_ERROR;
    r->speedup = (bench_speedup){NAN, NAN, NAN};
    r->compression_ratio = NAN;
    r->acc.eager_rmse = NAN;
    r->stab.ci_rel_width = r->stab.run_delay_s = r->stab.one_thread_s = NAN;
    r->stab.load_start = r->stab.load_end = NAN;
}

// The group's model (training: with its backward and optimizer; keep_grads:
// returning every gradient), its values, eager on the group's device, and a
// mode_run per task. -1 with every status set when it cannot be built.
static int group_setup(const bench_plan *p, const bench_group *gr, const bench_case *bc, bool train,
                       bool keep_grads, bench_result *rs, int n, model **mp, bench_exec **ep,
                       mode_run *runs) {
    modeldef_opts opts = {.training = train};
    diag d = {0};
    if (modeldef_build(bc->md, bc->c->overrides, bc->c->noverrides, bc->batch, &opts, mp, &d) < 0) {
        char msg[512];
        diag_format(&d, msg, sizeof msg);
        set_all(rs, n, BENCH_ERROR, msg);
        return -1;
    }
    model *m = *mp;
    if (p->tasks[gr->first].axis[BENCH_AXIS_PRECISION] == BENCH_PREC_AMP) {
        // autocast before autograd: the backward of each cast is the cast back
        graph *amp;
        char err[512];
        if (autocast_build(m->g, p->cfg.amp_dtype, &amp, err, sizeof err) < 0) {
            set_all(rs, n, BENCH_ERROR, err);
            return -1;
        }
        graph_free(m->g);
        m->g = amp;
    }
    if (train) { // the training step as one graph, before its values exist
        char err[512];
        // --grad-scaler: loss scaling where f16 gradients need it, AMP training
        train_opts o = bc->c->optim;
        o.grad_scaler =
            p->cfg.grad_scaler && p->tasks[gr->first].axis[BENCH_AXIS_PRECISION] == BENCH_PREC_AMP;
        if (autograd_build(m->g, &o, keep_grads, err, sizeof err) < 0) {
            set_all(rs, n, BENCH_ERROR, err);
            return -1;
        }
    }
    if (model_init_values(m, p->cfg.seed) < 0) {
        set_all(rs, n, BENCH_OOM, "model_init_values: out of memory");
        return -1;
    }
    int device = p->tasks[gr->first].axis[BENCH_AXIS_DEVICE];
    const bench_exec_opts xo = exec_opts(p, device);
    char err[600];
    if (bench_exec_eager(m, &xo, ep, err, sizeof err) < 0) {
        eager_failed(rs, n, device == BENCH_DEV_CUDA, err);
        return -1;
    }
    for (int k = 0; k < n; k++) {
        runs[k] = (mode_run){.mode = p->tasks[gr->first + k].axis[BENCH_AXIS_MODE],
                             .r = &rs[k],
                             .noutputs = m->g->noutputs,
                             .out = calloc((size_t)m->g->noutputs, sizeof(tensor *))};
        if (!runs[k].out) {
            set_all(rs, n, BENCH_OOM, "out of memory");
            return -1;
        }
    }
    // the plan puts eager first in any group with a compiled-family mode
    if (runs[0].mode == BENCH_MODE_EAGER)
        runs[0].x = *ep;
    if (!runs[0].x) {
        set_all(rs, n, BENCH_ERROR, "internal: the group has no eager baseline first");
        return -1;
    }
    return 0;
}

static void group_teardown(model *m, bench_exec *e, mode_run *runs, int n) {
    for (int k = 1; k < n; k++) {
        bench_exec_free(runs[k].x);
        runs[k].x = NULL;
    }
    for (int k = 0; k < n; k++) {
        free(runs[k].out);
        runs[k].out = NULL;
    }
    runs[0].x = NULL;
    bench_exec_free(e);
    model_free(m);
}

// Training, in two parts on the CPU. The check (check_train) runs a graph
// that also returns every gradient, compiled once per mode into the kernel
// cache. The measured graph returns only the loss, so that a gradient can
// die at its update (it differs from the checked one in its outputs alone);
// its compile latency, kernels and peak memory come from its first step.
// On the GPU, whose executors keep the parameters on the device and return
// the step's outputs alone, the measured graph is checked itself: the loss
// after the check's steps, against eager's and the fp64 reference's (it
// depends on every gradient and update before it), then timed.
static void measure_train(const bench_plan *p, const bench_group *gr, const bench_case *bc,
                          const char *kcache, bench_result *rs, int n, double tol) {
    bool cuda = p->tasks[gr->first].axis[BENCH_AXIS_DEVICE] == BENCH_DEV_CUDA;
    const bench_exec_opts xo = exec_opts(p, BENCH_DEV_CPU);
    model *m = NULL;
    bench_exec *e = NULL;
    mode_run runs[BENCH_MODE_COUNT] = {{0}};
    bool dead[BENCH_MODE_COUNT] = {0};
    if (!cuda) {
        if (group_setup(p, gr, bc, true, true, rs, n, &m, &e, runs) < 0)
            goto done;
        for (int k = 1; k < n; k++) {
            compile_opts o = mode_compile_opts(runs[k].mode);
            char err[512];
            if (bench_exec_compile(m, &o, &xo, &runs[k].x, err, sizeof err) < 0)
                set_status(&rs[k], BENCH_FAIL_TO_RUN, "%s", err);
        }
        int rc = check_train(p, bc, m, runs, n, tol);
        for (int k = 1; k < n; k++)
            dead[k] = !runs[k].x;
        group_teardown(m, e, runs, n);
        m = NULL, e = NULL;
        if (rc < 0)
            return;
    }

    if (group_setup(p, gr, bc, true, false, rs, n, &m, &e, runs) < 0)
        goto done;
    for (int k = 1; k < n; k++) {
        char err[512];
        if (!dead[k] && compile_mode(p, bc, m, &runs[k], kcache, err, sizeof err) < 0)
            set_status(&rs[k], BENCH_FAIL_TO_RUN, "%s", err);
    }
    if (cuda) { // the check's steps give kernels and peak memory
        if (check_train(p, bc, m, runs, n, tol) < 0)
            goto done;
    } else { // the first step: kernels and peak memory of each mode
        bench_exec_stats st;
        bench_exec_set_step(runs[0].x, ++runs[0].step);
        if (bench_exec_run(runs[0].x, NULL, &st) < 0) {
            char msg[sizeof rs[0].message];
            step_message(&runs[0], msg, sizeof msg);
            eager_failed(rs, n, false, msg);
            goto done;
        }
        runs[0].kernels = st.kernels;
        runs[0].cast_kernels = st.cast_kernels;
        runs[0].peak_bytes = st.peak_bytes;
        for (int k = 1; k < n; k++)
            if (runs[k].x && mode_step(&runs[k]) < 0)
                mode_failed(&runs[k]);
    }
    if (time_modes(p, runs, n) < 0)
        goto done;
    finish(runs, n, tol);
    eager_thread_check(p, runs);
    bench_group_judge(rs, n, p->cfg.threads);
done:
    group_teardown(m, e, runs, n);
}

// A later process of the group (bench_group_measure, process > 0): build,
// compile each mode once (into a temporary kernel cache of its own: the
// generated code is the same as process 0's, built anew in this process),
// and time. Accuracy, compile times, kernels and memory are process 0's.
static void measure_again(const bench_plan *p, const bench_group *gr, const bench_case *bc,
                          bool train, const char *kcache, bench_result *rs, int n) {
    model *m = NULL;
    bench_exec *e = NULL;
    mode_run runs[BENCH_MODE_COUNT] = {{0}};
    if (group_setup(p, gr, bc, train, false, rs, n, &m, &e, runs) < 0)
        goto done;
    char cache[1024] = "";
    for (int k = 1; k < n; k++) {
        compile_opts o = mode_compile_opts(runs[k].mode);
        const bench_exec_opts xo = exec_opts(p, task_device(p, runs[k].r));
        char err[512];
        const char *mode = bench_axis_value(BENCH_AXIS_MODE, runs[k].mode);
        bool own = !kcache; // else process 0's programs, loaded from KCACHE/MODE
        if (xo.device == BENCH_DEV_CPU) {
            if (own && mode_cache(NULL, mode, cache, sizeof cache, err, sizeof err) < 0) {
                set_status(&rs[k], BENCH_FAIL_TO_RUN, "%s", err);
                continue;
            }
            if (!own)
                snprintf(cache, sizeof cache, "%s/%s", kcache, mode);
            o.cache_dir = cache;
        }
        if (bench_exec_compile(m, &o, &xo, &runs[k].x, err, sizeof err) < 0)
            set_status(&rs[k], BENCH_FAIL_TO_RUN, "%s", err);
        if (xo.device == BENCH_DEV_CPU && own)
            bench_remove_tree(cache);
    }
    if (time_modes(p, runs, n) < 0)
        goto done;
    for (int k = 0; k < n; k++)
        if (runs[k].x)
            runs[k].r->status = k == 0 ? BENCH_OK : BENCH_PASS;
done:
    group_teardown(m, e, runs, n);
}

void bench_group_measure(const bench_plan *p, int group, int process, const char *kcache,
                         bench_result *rs) {
    const bench_group *gr = &p->groups[group];
    int n = gr->ntasks;
    for (int i = 0; i < n; i++)
        result_init(&rs[i], gr->first + i);
    const bench_task *t = &p->tasks[gr->first];
    const bench_case *bc = &p->cases[t->case_index];
    for (int i = 0; i < n; i++)
        for (int a = 0; a < BENCH_AXIS_COUNT; a++) {
            int v = p->tasks[gr->first + i].axis[a];
            if (!bench_axis_available(a, v)) {
                char msg[200];
                snprintf(msg, sizeof msg, "%s %s: not available in this build yet",
                         bench_axis_name(a), bench_axis_value(a, v));
                set_all(rs, n, BENCH_ERROR, msg);
                return;
            }
        }

    // oneDNN follows OpenMP's setting; OpenBLAS keeps its own.
    omp_set_num_threads(p->cfg.threads);
    openblas_set_num_threads(p->cfg.threads);

    bool train = t->axis[BENCH_AXIS_WORKLOAD] == BENCH_WL_TRAIN;
    double tol = bench_tolerance(tf32_task(p, t) ? BENCH_PREC_AMP : t->axis[BENCH_AXIS_PRECISION],
                                 t->axis[BENCH_AXIS_WORKLOAD]);
    if (process > 0) {
        measure_again(p, gr, bc, train, kcache, rs, n);
        return;
    }
    if (train) {
        measure_train(p, gr, bc, kcache, rs, n, tol);
        return;
    }
    model *m = NULL;
    bench_exec *e = NULL;
    mode_run runs[BENCH_MODE_COUNT] = {{0}};
    reference ref = {0};
    if (group_setup(p, gr, bc, false, false, rs, n, &m, &e, runs) < 0)
        goto done;
    if (check_eager(p, bc, m, runs, n, tol, &ref) < 0)
        goto done;
    for (int k = 1; k < n; k++) {
        char err[512];
        if (compile_mode(p, bc, m, &runs[k], kcache, err, sizeof err) < 0)
            set_status(&rs[k], BENCH_FAIL_TO_RUN, "%s", err);
    }
    check_compiled(p, runs, n, tol, &ref);
    reference_free(&ref);
    ref = (reference){0};
    if (time_modes(p, runs, n) < 0)
        goto done;
    finish(runs, n, tol);
    eager_thread_check(p, runs);
    bench_group_judge(rs, n, p->cfg.threads);
done:
    reference_free(&ref);
    group_teardown(m, e, runs, n);
}
