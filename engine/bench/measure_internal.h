// The parts of measuring one group (measure.c): prepare
// (measure_prepare.c: the model, eager and a mode_run per task), check
// (measure_check.c: accuracy against eager and the fp64 reference) and time
// (measure_time.c: every mode interleaved). Private to engine/bench.
//
//   mode_run runs[BENCH_MODE_COUNT] = {{0}};
//   if (measure_group_setup(p, gr, bc, false, false, rs, n, &m, &e, runs) < 0) ...
//   measure_check_eager(...); measure_check_compiled(...);
//   if (measure_time_modes(p, runs, n) == 0) ...
//   measure_group_teardown(m, e, runs, n);
#pragma once
#include "accuracy.h"
#include "core/tensor.h"
#include "exec.h"
#include "faults.h"
#include "host.h"
#include "measure.h"
#include "stability.h"
#include "timing.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline void set_status(bench_result *r, enum bench_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static inline void set_status(bench_result *r, enum bench_status s, const char *fmt, ...) {
    r->status = s;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->message, sizeof r->message, fmt, ap);
    va_end(ap);
}

// The same end for every entry of the group (the model would not build, ...).
static inline void set_all(bench_result *rs, int n, enum bench_status s, const char *msg) {
    for (int i = 0; i < n; i++)
        set_status(&rs[i], s, "%s", msg);
}

// A compiled-family mode that could not be made or run: oom once the
// --memory-limit cap has refused memory in this group (tensor_mem_set_limit
// starts the count), else fail_to_run.
static inline enum bench_status mode_fail_status(void) {
    return tensor_mem_refusals() > 0 ? BENCH_OOM : BENCH_FAIL_TO_RUN;
}

// The baseline failed (it could not be made, or a step failed): there is
// nothing to compare with, and no compiled-family mode is tried. On the CPU
// only memory fails eager, and every mode ends oom; on the GPU (no device, a
// kernel the backend lacks) every mode ends eager_fail_to_run, the study's
// name, with eager's words, unless the --memory-limit cap refused memory:
// then oom too.
static inline void eager_failed(bench_result *rs, int n, bool cuda, const char *msg) {
    bool capped = tensor_mem_refusals() > 0;
    set_all(rs, n, !cuda || capped ? BENCH_OOM : BENCH_EAGER_FAIL_TO_RUN, msg);
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
static inline void step_message(const mode_run *mr, char *buf, size_t cap) {
    snprintf(buf, cap, "%s: %s", bench_exec_what(mr->x), bench_exec_error(mr->x));
}

// A compiled-family mode whose step failed ends fail_to_run alone.
static inline void mode_failed(mode_run *mr) {
    char msg[sizeof mr->r->message];
    step_message(mr, msg, sizeof msg);
    set_status(mr->r, mode_fail_status(), "%s", msg);
    bench_exec_free(mr->x);
    mr->x = NULL;
}

// One step, outputs dropped at once as a benchmark loop does (on the GPU:
// enqueued).
static inline int mode_step(void *ctx) {
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

static inline int task_device(const bench_plan *p, const bench_result *r) {
    return p->tasks[r->task].axis[BENCH_AXIS_DEVICE];
}

static inline bench_exec_opts exec_opts(const bench_plan *p, int device) {
    return (bench_exec_opts){.device = device, .tf32 = p->cfg.tf32, .flush_l2 = p->cfg.flush_l2};
}

// fp32 on the GPU under --tf32: GEMM and convolution inputs keep 10
// mantissa bits, as f16's, so the check is AMP's: its tolerance and its
// cosine fallback (the fp32 training steps and baseline stay as they are).
static inline bool tf32_task(const bench_plan *p, const bench_task *t) {
    return p->cfg.tf32 && t->axis[BENCH_AXIS_DEVICE] == BENCH_DEV_CUDA &&
           t->axis[BENCH_AXIS_PRECISION] == BENCH_PREC_FP32;
}

// Eager's outputs and the fp64 reference's, kept while the compiled-family
// modes are checked against them.
typedef struct reference {
    tensor *eager[BENCH_MAX_OUTPUTS];
    double *fp64[BENCH_MAX_OUTPUTS]; // NULL when the reference is not run
    bool have_fp64;
    int noutputs;
} reference;

// Whether $TCBENCH_LOG names what (docs/cli.md).
static inline bool measure_log(const char *what) {
    const char *l = getenv("TCBENCH_LOG");
    return l && strstr(l, what);
}

// TCBENCH_LOG=phases: what each part of a group's measuring took (from *t0
// to now; *t0 becomes now), a line on stderr.
void measure_phase(const bench_plan *p, const bench_group *gr, const char *what, double *t0);

// measure_prepare.c
int measure_group_setup(const bench_plan *p, const bench_group *gr, const bench_case *bc,
                        bool train, bool keep_grads, bench_result *rs, int n, model **mp,
                        bench_exec **ep, mode_run *runs);
void measure_group_teardown(model *m, bench_exec *e, mode_run *runs, int n);

// measure_check.c
void measure_reference_free(reference *ref);
int measure_check_eager(const bench_plan *p, const bench_case *bc, const model *m, mode_run *runs,
                        int n, double tol, reference *ref);
void measure_check_compiled(const bench_plan *p, mode_run *runs, int n, double tol,
                            const reference *ref);
// t0: the phases' clock (measure_phase), its fp64, eager and compiled parts
int measure_check_train(const bench_plan *p, const bench_group *gr, const bench_case *bc,
                        const model *m, mode_run *runs, int n, double tol, double *t0);

// measure_generate.c: the generate workload, start to end (check: the fp64
// reference's decode and each mode against it)
void measure_generate(const bench_plan *p, const bench_group *gr, const bench_case *bc,
                      bool check, const char *kcache, bench_result *rs, int n, double tol);
void measure_chat(const bench_plan *p, const bench_group *gr, const bench_case *bc,
                  const char *kcache, bench_result *rs, int n);
// measure.c: the empty kernel cache a mode compiles into, KCACHE/MODE (the
// parent's to remove), or without KCACHE a temporary one (the caller's)
int measure_mode_cache(const char *kcache, const char *mode, char *dir, size_t dcap, char *err,
                       size_t cap);
// measure.c: a compiled-family mode's compile options (fused: no capture;
// captured: no fusion), and --dump's folder for a case in a mode,
// DIR/CASE/MODE, made: 1, 0 without --dump, -1 with err
compile_opts measure_compile_opts(int mode);
int measure_dump_dir(const bench_plan *p, const bench_case *bc, int mode, char *dir, size_t dcap,
                     char *err, size_t cap);

// measure_time.c
// A timed step's samples (taken over from t) and the machine around the
// rounds (before, after) into r.
void measure_keep_timing(const bench_plan *p, bench_result *r, const bench_timing *t,
                         const bench_probe *before, const bench_probe *after);
int measure_time_modes(const bench_plan *p, mode_run *runs, int n);
void measure_eager_thread_check(const bench_plan *p, mode_run *runs);
