// Preparing a group for measure.c (measure_internal.h): its model
// (model_prepare.h), eager on the group's device, and a mode_run per task.
#include "measure_internal.h"

#include "model/model_prepare.h"

#include <stdlib.h>

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
                       .fused_attention = p->cfg.fused_attention};
    char err[600];
    enum model_prep_step s = model_prepare(bc->md, bc->c->overrides, bc->c->noverrides, bc->batch,
                                           &prep, mp, err, sizeof err);
    if (s != MODEL_PREP_DONE) {
        set_all(rs, n, s == MODEL_PREP_VALUES ? BENCH_OOM : BENCH_ERROR, err);
        return -1;
    }
    model *m = *mp;
    int device = p->tasks[gr->first].axis[BENCH_AXIS_DEVICE];
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
