// A run's least duration from FLOPs and the calibration (estimate.h).
#include "estimate.h"

#include "timing.h"
#include "train_check.h"

#include <math.h>

// A training step: forward, backward (twice the forward's work) and the
// update, as the usual 3x rule of thumb.
#define TRAIN_STEP_FACTOR 3.0

double bench_task_seconds(const bench_plan *p, int task, const bench_calibration *c) {
    const bench_config *cfg = &p->cfg;
    const bench_task *t = &p->tasks[task];
    const bench_case *bc = &p->cases[t->case_index];
    if (bc->fail_to_load[0] || !isfinite(bc->flops))
        return -1;
    bool train = t->axis[BENCH_AXIS_WORKLOAD] == BENCH_WL_TRAIN;
    if (train && bc->train_fail_to_load[0])
        return -1;
    int processes = p->groups[t->group].processes > 0 ? p->groups[t->group].processes : 1;
    double k = train ? TRAIN_STEP_FACTOR : 1.0;
    double flops = k * bc->flops, bytes = isfinite(bc->min_bytes) ? k * bc->min_bytes : 0;
    // the roofline: no step is faster than its arithmetic or its traffic
    double step = fmax(flops / c->gemm_flops, bytes / c->bandwidth_Bps);
    double warm = cfg->warmup > 0 ? cfg->warmup * step
                                  : fmax(BENCH_DEFAULT_WARMUP_ITERS * step, BENCH_DEFAULT_WARMUP_S);
    double timed = fmax(cfg->repeat * step, cfg->min_time_s);
    bool amp = t->axis[BENCH_AXIS_PRECISION] == BENCH_PREC_AMP;
    double checks = !cfg->accuracy ? 0 : train ? (double)train_check_steps(amp) : 1;
    return processes * (warm + timed) + checks * step;
}

void bench_plan_estimate(const bench_plan *p, const bench_calibration *c, bench_estimate *e) {
    *e = (bench_estimate){0};
    for (int i = 0; i < p->ntasks; i++) {
        double s = bench_task_seconds(p, i, c);
        if (s < 0)
            continue;
        e->seconds += s;
        e->entries++;
    }
}
