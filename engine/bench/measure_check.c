// The accuracy check of a group for measure.c (measure_internal.h): eager
// against the fp64 reference, each compiled-family mode against eager and
// fp64 by PyTorch's rule; training through train_check.h.
#include "measure_internal.h"

#include "ref/ref.h"
#include "train_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
static bool log_accuracy(void) { return measure_log("accuracy"); }

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

void measure_reference_free(reference *ref) {
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

static bool cosine_fallback(const bench_plan *p, const bench_result *r) {
    return amp_task(p, r) || tf32_task(p, &p->tasks[r->task]);
}

// Accuracy first: eager once, before anything is compiled (its kernels and
// peak memory come from this step), and the fp64 reference once. -1 when
// the group cannot go on (every status set).
int measure_check_eager(const bench_plan *p, const bench_case *bc, const model *m, mode_run *runs,
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
void measure_check_compiled(const bench_plan *p, mode_run *runs, int n, double tol,
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

// The training check's state from one step to the next: the compared items
// (train_check.h) of eager, of the mode being checked and of fp64.
typedef struct train_state {
    int nitems, nout;
    tensor **eitems, **xitems; // eager's items after the steps, the checked mode's
    double **ref;              // fp64's items after its own steps
    double **base;             // amp: fp64 on rounded values
    double *ermse;             // per item, the compiled modes' noise yardstick
    bool *noise;               // per item, not compared (train_check_skips)
    train_snapshot s0;
    uint64_t steps;
    bool have_fp64;
    bool base_done;             // the baseline ran (train_baseline)
    bench_accuracy eager_acc0; // eager's verdict before its items were merged
    double tol;
} train_state;

// The arrays and the starting values; -1 when out of memory.
static int train_state_init(train_state *t, const model *m, double tol) {
    t->nitems = train_check_items(m);
    t->nout = m->g->noutputs;
    t->tol = tol;
    t->eitems = calloc((size_t)t->nitems, sizeof *t->eitems);
    t->xitems = calloc((size_t)t->nitems, sizeof *t->xitems);
    t->ref = calloc((size_t)t->nitems, sizeof *t->ref);
    t->base = calloc((size_t)t->nitems, sizeof *t->base);
    t->ermse = calloc((size_t)t->nitems, sizeof *t->ermse);
    t->noise = calloc((size_t)t->nitems, sizeof *t->noise);
    if (!t->eitems || !t->xitems || !t->ref || !t->base || !t->ermse || !t->noise ||
        train_snapshot_take(m, &t->s0) < 0)
        return -1;
    return 0;
}

// Puts the starting values back and frees the state.
static void train_state_free(train_state *t, const model *m) {
    if (t->s0.data)
        train_snapshot_restore(m, &t->s0);
    train_snapshot_free(&t->s0);
    if (t->eitems)
        train_check_free_items(t->nitems, t->eitems);
    if (t->xitems)
        train_check_free_items(t->nitems, t->xitems);
    for (int i = 0; t->ref && i < t->nitems; i++)
        free(t->ref[i]);
    for (int i = 0; t->base && i < t->nitems; i++)
        free(t->base[i]);
    free(t->ref);
    free(t->base);
    free(t->ermse);
    free(t->noise);
    free(t->eitems);
    free(t->xitems);
}

// Every mode's tolerance and reason; whether the fp64 reference runs.
static bool train_accuracy_setup(const bench_plan *p, const bench_case *bc, mode_run *runs, int n,
                                 double tol) {
    char skip[160];
    reference_skip(p, bc, skip, sizeof skip);
    // the scaler skips a step when an f16 gradient overflows; the reference,
    // which does not round to f16, never does: eager alone is the yardstick
    if (!skip[0] && p->cfg.grad_scaler && amp_task(p, runs[0].r))
        snprintf(skip, sizeof skip,
                 "skipped: under --grad-scaler a step is skipped when an f16 gradient "
                 "overflows, which the fp64 reference cannot");
    for (int i = 0; i < n; i++) {
        runs[i].r->acc.tol = tol;
        runs[i].r->acc.cosine_fallback = cosine_fallback(p, runs[i].r);
        snprintf(runs[i].r->acc.reason, sizeof runs[i].r->acc.reason, "%s", skip);
    }
    return !skip[0];
}

// The steps of mode mr from the values the model holds, into outs (which
// keep the last step's outputs); its kernels and peak memory from the last
// step. -1 when a step fails (the caller sets the status).
static int train_steps_run(mode_run *mr, const train_state *t, tensor **outs) {
    bench_exec_stats st;
    for (uint64_t step = 1; step <= t->steps; step++) {
        bench_exec_set_step(mr->x, step);
        if (bench_exec_run(mr->x, outs, &st) < 0)
            return -1;
        if (step < t->steps)
            for (int i = 0; i < t->nout; i++)
                tensor_free(outs[i]);
    }
    mr->kernels = st.kernels;
    mr->cast_kernels = st.cast_kernels;
    mr->peak_bytes = st.peak_bytes;
    return 0;
}

// Eager's steps and items: which items are compared, and with fp64 Adam's
// sign of noise (train_check.h). -1 when the group cannot go on.
static int train_eager(const bench_plan *p, const model *m, mode_run *runs, int n, train_state *t) {
    bench_result *er = runs[0].r;
    if (train_steps_run(&runs[0], t, runs[0].out) < 0) {
        char msg[sizeof er->message];
        step_message(&runs[0], msg, sizeof msg);
        eager_failed(er, n, task_device(p, er) == BENCH_DEV_CUDA, msg);
        return -1;
    }
    if (train_check_fill(m, runs[0].out, t->eitems) < 0) {
        set_all(er, n, BENCH_OOM, "out of memory copying eager's parameters");
        return -1;
    }
    if (train_check_skips(m, t->have_fp64 ? t->ref : NULL, t->eitems, t->noise) < 0) {
        set_all(er, n, BENCH_OOM, "out of memory");
        return -1;
    }
    if (t->have_fp64) { // Adam's sign of noise (train_check.h)
        int64_t set = train_mask_eager(m, t->eitems, t->ref);
        if (log_accuracy())
            fprintf(stderr,
                    "accuracy: eager: %lld parameter elements whose gradient's sign "
                    "differs from fp64's take fp64's update\n",
                    (long long)set);
    }
    return 0;
}

// Eager's item i against fp64 into o; top is the model's largest gradient
// element (fp64).
static void train_eager_item(const model *m, const train_state *t, int i, double top,
                             bench_accuracy_out *o) {
    bench_accuracy_compare(t->eitems[i], t->ref[i], o);
    o->rel_l2 = train_item_error(t->eitems[i], t->ref[i], t->tol);
    // a gradient that is zero in exact arithmetic (its parameter is
    // not compared after the steps): its rounding noise against the
    // model's largest gradient
    if (i >= 1 && i < t->nout && t->noise[t->nout + i - 1] && top > 0)
        o->rel_l2 = o->max_abs / top;
    if (t->base[i]) {
        double d2 = 0;
        int64_t ne = tensor_numel(t->eitems[i]);
        for (int64_t e = 0; e < ne; e++)
            d2 += (t->base[i][e] - t->ref[i][e]) * (t->base[i][e] - t->ref[i][e]);
        o->base_rmse = ne ? sqrt(d2 / (double)ne) : 0;
    }
    if (log_accuracy()) {
        char name[160];
        train_item_name(m, i, name, sizeof name);
        fprintf(stderr,
                "accuracy: %s: eager vs fp64 %.3g (rms %.3g, cosine %.6f, rounded-values "
                "baseline rms %.3g)\n",
                name, o->rel_l2, o->rmse, o->cosine, o->base_rmse);
    }
}

// Eager's items against fp64 merged into er->acc, and the compiled modes'
// noise yardstick (t->ermse); with the baseline where it ran.
static void eager_items(const model *m, train_state *t, bench_result *er) {
    double worst = -1, top = 0; // top: the largest gradient element (fp64)
    for (int k = 1; k < t->nout; k++)
        for (int64_t e = 0; e < tensor_numel(t->eitems[k]); e++)
            top = fmax(top, fabs(t->ref[k][e]));
    for (int i = 0; i < t->nitems; i++) {
        if (t->noise[i])
            continue;
        bench_accuracy_out o;
        train_eager_item(m, t, i, top, &o);
        bench_accuracy_merge(&er->acc, &o);
        // the compiled modes' noise yardstick (PyTorch's RMSE rule):
        // eager's error, or in fp32 training the model's own one-ulp
        // sensitivity when that is larger (a chaotic model's two steps)
        t->ermse[i] = er->acc.baseline_fallback && o.base_rmse > o.rmse ? o.base_rmse : o.rmse;
        if (!(o.rel_l2 <= worst)) { // NaN counts as worst
            worst = isnan(o.rel_l2) ? INFINITY : o.rel_l2;
            train_item_name(m, i, er->acc.worst, sizeof er->acc.worst);
        }
    }
    er->acc.checked = true;
}

// The baseline: fp64 on the model's values rounded to the low dtype (mixed
// precision: f16 or bf16), or moved by one ulp (fp32), and eager's items
// judged again with it. A second fp64 training run, so only when a verdict
// can depend on it: it only ever lets an item pass, so it runs once eager
// fails an item without it, or (fp32) once a compiled-family mode fails
// against eager's own error; whatever passes without it passes with it,
// and the verdicts are those of always running it. -1 when the group
// cannot go on (every status set).
static int train_baseline(const bench_plan *p, const model *m, mode_run *runs, int n,
                          train_state *t) {
    bench_result *er = runs[0].r;
    char err[512] = "";
    if (t->base_done)
        return 0;
    t->base_done = true;
    if (train_reference_rounded(m, &t->s0, amp_task(p, er) ? p->cfg.amp_dtype : DT_F32, t->steps,
                                t->base, err, sizeof err) < 0) {
        for (int i = 0; i < n; i++)
            set_status(runs[i].r, BENCH_ERROR, "fp64 reference (rounded values): %s", err);
        return -1;
    }
    er->acc = t->eager_acc0;
    eager_items(m, t, er);
    return 0;
}

// Eager against fp64, and the compiled modes' noise yardstick. -1 when the
// group cannot go on.
static int train_eager_vs_fp64(const bench_plan *p, const model *m, mode_run *runs, int n,
                               train_state *t) {
    bench_result *er = runs[0].r;
    er->acc.baseline_fallback = t->have_fp64 && !amp_task(p, er);
    if (!t->have_fp64)
        return 0;
    t->eager_acc0 = er->acc;
    eager_items(m, t, er);
    if (er->acc.failed_items > 0 && train_baseline(p, m, runs, n, t) < 0)
        return -1;
    return 0;
}

// Each compiled-family mode's steps from the starting values, its items
// against eager's by PyTorch's rule; a mode that fails to run ends
// fail_to_run alone. -1 when the group cannot go on.
static int train_modes(const bench_plan *p, const model *m, mode_run *runs, int n, train_state *t) {
    bench_result *er = runs[0].r;
    for (int k = 1; k < n; k++) {
        if (!runs[k].x)
            continue;
        train_snapshot_restore(m, &t->s0);
        if (train_steps_run(&runs[k], t, runs[0].out) < 0) {
            mode_failed(&runs[k]);
            continue;
        }
        if (train_check_fill(m, runs[0].out, t->xitems) < 0) {
            set_all(er, n, BENCH_OOM, "out of memory copying the parameters");
            return -1;
        }
        int64_t set = train_mask_mode(m, t->xitems, t->eitems, t->have_fp64 ? t->ref : NULL);
        if (log_accuracy())
            fprintf(stderr,
                    "accuracy: %s: %lld parameter elements whose gradient's sign "
                    "differs take eager's update\n",
                    bench_axis_value(BENCH_AXIS_MODE, runs[k].mode), (long long)set);
        // fp32: a failure may pass against the model's one-ulp
        // sensitivity, which the baseline gives (train_baseline): then the
        // mode is judged again
        const bench_accuracy before = runs[k].r->acc;
        for (bool again = p->cfg.accuracy; again;) {
            runs[k].r->acc = before;
            judge(&runs[k], t->nitems, t->xitems, t->eitems, t->have_fp64 ? t->ref : NULL, t->ermse,
                  er->acc.rmse, t->tol, m, t->noise);
            again = !strncmp(runs[k].r->acc.rule, "failed", 6) && er->acc.baseline_fallback &&
                    !t->base_done;
            if (again && train_baseline(p, m, runs, n, t) < 0) {
                train_check_free_items(t->nitems, t->xitems);
                return -1;
            }
        }
        train_check_free_items(t->nitems, t->xitems);
    }
    return 0;
}

// Training: every mode two optimizer steps from the same starting values
// (train_check.h); eager against the fp64 reference's own two steps, each
// compiled-family mode against eager's by PyTorch's rule. Kernels and peak
// memory come from the second step. The values are put back after. -1 when
// the group cannot go on (every status set).
int measure_check_train(const bench_plan *p, const bench_group *gr, const bench_case *bc,
                        const model *m, mode_run *runs, int n, double tol, double *t0) {
    train_state t = {0};
    char err[512] = "";
    int rc = -1;
    if (train_state_init(&t, m, tol) < 0) {
        set_all(runs[0].r, n, BENCH_OOM, "out of memory setting up the training check");
    } else {
        t.have_fp64 = train_accuracy_setup(p, bc, runs, n, tol);
        t.steps = train_check_steps(amp_task(p, runs[0].r));
        if (t.have_fp64 && train_reference(m, t.steps, t.ref, err, sizeof err) < 0) {
            for (int i = 0; i < n; i++)
                set_status(runs[i].r, BENCH_ERROR, "fp64 reference: %s", err);
        } else {
            measure_phase(p, gr, "check: fp64 reference", t0);
            if (train_eager(p, m, runs, n, &t) == 0 && train_eager_vs_fp64(p, m, runs, n, &t) == 0) {
                measure_phase(p, gr, "check: eager", t0);
                rc = train_modes(p, m, runs, n, &t);
                measure_phase(p, gr, "check: compiled modes", t0);
            }
        }
    }
    train_state_free(&t, m);
    return rc;
}
