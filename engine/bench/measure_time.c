// Timing a group's modes for measure.c (measure_internal.h): interleaved
// rounds (timing.h), the samples kept, and eager's one-thread check.
#include "measure_internal.h"

#include "timing.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

// The GPU's clock around a sample (exec.h: CUDA events on the executor's stream).
static int mode_clock_start(void *ctx) { return bench_exec_sample_start(((mode_run *)ctx)->x); }
static int mode_clock_stop(void *ctx, double *s) {
    return bench_exec_sample_stop(((mode_run *)ctx)->x, s);
}
static const bench_clock device_clock = {mode_clock_start, mode_clock_stop};

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

// TCBENCH_TEST_NOISE (faults.h): sample i stretched by 1 + i mod 3, which
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
void measure_keep_timing(const bench_plan *p, bench_result *r, const bench_timing *t,
                         const bench_probe *before, const bench_probe *after) {
    r->samples = t->samples;
    r->host_samples = t->host_samples;
    r->nsamples = t->nsamples;
    r->iters_per_sample = t->iters_per_sample;
    test_noise(p, r);
    bench_stats_compute(r->samples, r->nsamples, &r->stats);
    bench_probe_diff(before, after, &r->stab);
    r->stab.rounds = r->nsamples;
    // noise, spread and the median by process: bench_group_judge
    r->stab.processes = 1;
    r->stab.process_samples[0] = r->nsamples;
    r->stab.threads = p->cfg.threads;
}

static void keep_samples(const bench_plan *p, mode_run **who, bench_timing *tm, int ns,
                         const bench_probe *before, const bench_probe *after) {
    for (int k = 0; k < ns; k++)
        measure_keep_timing(p, who[k]->r, &tm[k], before, after);
}

// Times every mode still running, interleaved; a compiled-family mode that
// fails a step ends fail_to_run and the others are timed again without it.
// On the GPU each sample is timed by CUDA events on the mode's stream (the
// host's time beside it), one step per sample under --flush-l2, and every
// mode is synchronized at the end, where errors kernels found surface.
int measure_time_modes(const bench_plan *p, mode_run *runs, int n) {
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

// Eager on one thread, right after the rounds, into its one_thread_s: when
// its median on the run's threads is more than BENCH_THREAD_STALL times the
// one-thread median, the threads stalled each other (a nested team made
// anew per call, a second thread pool, a preempted barrier), which is not
// the workload: bench_group_judge makes the group's entries unstable and
// the warning names the figures. CPU eager only (a GPU step does not use
// the host's threads).
void measure_eager_thread_check(const bench_plan *p, mode_run *runs) {
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
