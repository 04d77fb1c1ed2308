// Preparing a group for measure.c (measure_internal.h): its model
// (model_prepare.h), eager on the group's device, and a mode_run per task.
#include "measure_internal.h"

#include "eager/eager.h"
#include "model/model_prepare.h"
#include "oomkill.h"

#include <stdlib.h>

// The group's memory planned from its graph alone, before any value exists:
// a case that cannot fit ends `oom` with its figures instead of being killed
// part way (ZOO.md). What it needs at least: eager's step at its peak
// (parameters, optimizer state, inputs, and the activations live at once,
// eager_plan_peak) and, for a checked training step, the copy of the
// starting values the check puts back. The compiled modes' arenas and the
// fp64 reference come on top, so a case that passes here may still end
// `oom` later; one refused here could not have run. The budget is
// --memory-limit where given, else what the machine has available now
// (bench_mem_available). The CPU's host memory only: a GPU's is the CUDA
// allocator's to refuse. 0 when it fits or nothing is known; -1 with every
// status set.
static int group_fits(const bench_plan *p, const bench_case *bc, const model_prep *prep,
                      bench_result *rs, int n) {
    size_t budget = p->cfg.memory_limit;
    const char *what = "--memory-limit";
    if (!budget) {
        if (bench_mem_available(&budget) < 0)
            return 0;
        what = "available on this machine";
    }
    model_prep graph_only = *prep;
    graph_only.no_values = true;
    graph_only.weight_bits = 0; // planned at f32 weights: no more than quantized ones
    char err[600];
    model *m;
    if (model_prepare(bc->md, bc->c->overrides, bc->c->noverrides, bc->batch, &graph_only, &m, err,
                      sizeof err) != MODEL_PREP_DONE)
        return 0; // the real preparation below reports it
    eager_plan_figures f;
    int rc = eager_plan_peak(m->g, &f, err, sizeof err);
    model_free(m);
    if (rc < 0)
        return 0;
    size_t copy = prep->train && p->cfg.accuracy ? f.sources_bytes : 0;
    size_t need = f.peak_bytes + copy;
    if (need <= budget)
        return 0;
    const double gib = 1024.0 * 1024.0 * 1024.0;
    char extra[100] = "", msg[400];
    if (copy)
        snprintf(extra, sizeof extra, "; the training check's copy of them: %.2f GiB",
                 (double)copy / gib);
    snprintf(msg, sizeof msg,
             "needs at least %.2f GiB before it allocates (eager's step: %.2f GiB of parameters, "
             "state and inputs, %.2f GiB of activations at its peak%s); %.2f GiB %s",
             (double)need / gib, (double)f.sources_bytes / gib, (double)f.activation_bytes / gib,
             extra, (double)budget / gib, what);
    set_all(rs, n, BENCH_OOM, msg);
    return -1;
}

// The group's model (training: with its backward and optimizer; keep_grads:
// returning every gradient), its values, eager on the group's device, and a
// mode_run per task. -1 with every status set when it cannot be built.
int measure_group_setup(const bench_plan *p, const bench_group *gr, const bench_case *bc,
                        bool train, bool keep_grads, bench_result *rs, int n, model **mp,
                        bench_exec **ep, mode_run *runs) {
    bool amp = p->tasks[gr->first].axis[BENCH_AXIS_PRECISION] == BENCH_PREC_AMP;
    // --grad-scaler: loss scaling where f16 gradients need it, AMP training
    train_opts o = bc->c->optim;
    o.grad_scaler = p->cfg.grad_scaler && amp;
    model_prep prep = {.amp = amp ? p->cfg.amp_dtype : DT_F32,
                       .train = train ? &o : NULL,
                       .keep_grads = keep_grads,
                       .seed = p->cfg.seed,
                       .weight_bits = train ? 0 : p->cfg.weight_bits,
                       .weight_group = p->cfg.weight_group,
                       .weight_scales = p->cfg.weight_scales,
                       .fused_attention = p->cfg.fused_attention,
                       .output_mean_loss = bc->c->output_mean_loss};
    char err[600];
    int device = p->tasks[gr->first].axis[BENCH_AXIS_DEVICE];
    if (device == BENCH_DEV_CPU && group_fits(p, bc, &prep, rs, n) < 0)
        return -1;
    enum model_prep_step s = model_prepare(bc->md, bc->c->overrides, bc->c->noverrides, bc->batch,
                                           &prep, mp, err, sizeof err);
    if (s != MODEL_PREP_DONE) {
        // an autocast refusal (BCELoss on probabilities, as torch.autocast
        // raises) stops eager AMP itself: the study's eager_fail_to_run
        set_all(rs, n,
                s == MODEL_PREP_VALUES     ? BENCH_OOM
                : s == MODEL_PREP_AUTOCAST ? BENCH_EAGER_FAIL_TO_RUN
                                           : BENCH_ERROR,
                err);
        return -1;
    }
    model *m = *mp;
    const bench_exec_opts xo = exec_opts(p, device);
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

void measure_group_teardown(model *m, bench_exec *e, mode_run *runs, int n) {
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
