// Measuring one group in this process: what a child does (measure.h). Eager
// and every compiled-family mode of one case, as PyTorch's harness does:
// build once, compile, check accuracy first, then time all modes
// interleaved. The executors are exec.h's, so the same steps run on the
// CPU and on the GPU.
// The parts are in measure_prepare.c, measure_check.c and measure_time.c
// (measure_internal.h).
#include "measure_internal.h"

#include "base/clock.h"
#include "base/files.h"

#include "timing.h"

#include <cblas.h>
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void measure_phase(const bench_plan *p, const bench_group *gr, const char *what, double *t0) {
    double now = base_now();
    if (measure_log("phases")) {
        const bench_task *t = &p->tasks[gr->first];
        fprintf(stderr, "phases: %s %s %s: %s %.2f s\n", p->cases[t->case_index].c->name,
                bench_axis_value(BENCH_AXIS_PRECISION, t->axis[BENCH_AXIS_PRECISION]),
                bench_axis_value(BENCH_AXIS_WORKLOAD, t->axis[BENCH_AXIS_WORKLOAD]), what,
                now - *t0);
    }
    *t0 = now;
}

// A compiled-family mode's switches: the kill switches hold in every mode.
compile_opts measure_compile_opts(int mode) {
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

// The empty kernel cache a mode compiles into: KCACHE/MODE in the group's
// directory, which the parent made and removes whatever becomes of this
// child; else (measured in-process, or the parent could not make one) a
// temporary directory of its own, which the caller removes.
int measure_mode_cache(const char *kcache, const char *mode, char *dir, size_t dcap, char *err,
                      size_t cap) {
    if (kcache) {
        snprintf(dir, dcap, "%s/%s", kcache, mode);
        if (mkdir(dir, 0700) < 0) {
            snprintf(err, cap, "mkdir %.400s: %s", dir, strerror(errno));
            return -1;
        }
        return 0;
    }
    return base_mkdtemp("tcbench-kcache", dir, dcap, err, cap);
}

int measure_dump_dir(const bench_plan *p, const bench_case *bc, int mode, char *dir, size_t dcap,
                     char *err, size_t cap) {
    if (!p->cfg.dump_dir)
        return 0;
    snprintf(dir, dcap, "%s/%s/%s", p->cfg.dump_dir, bc->c->name,
             bench_axis_value(BENCH_AXIS_MODE, mode));
    return base_mkdir_p(dir, 0777, err, cap) < 0 ? -1 : 1;
}

// Compiles mr's mode cold, into its empty kernel cache `cache`
// (measure_mode_cache), and throws the executor away: cold_s. -1 with err:
// the compiler's words.
static int compile_cold(const bench_plan *p, const bench_case *bc, const model *m, mode_run *mr,
                        const char *cache, char *err, size_t cap) {
    compile_opts o = measure_compile_opts(mr->mode);
    const bench_exec_opts xo = exec_opts(p, task_device(p, mr->r));
    char dump[4096];
    int d = measure_dump_dir(p, bc, mr->mode, dump, sizeof dump, err, cap);
    if (d < 0)
        return -1;
    if (d > 0)
        o.dump_dir = dump;
    o.cache_dir = cache;
    bench_exec *cold = NULL;
    double t0 = base_now();
    int rc = bench_exec_compile(m, &o, &xo, &cold, err, cap);
    mr->r->compile.cold_s = base_now() - t0;
    bench_exec_free(cold);
    return rc;
}

// mr's mode again from the cache compile_cold filled (the program kept):
// warm_s, and the executor kept in mr.
static int compile_warm(const bench_plan *p, const model *m, mode_run *mr, const char *cache,
                        char *err, size_t cap) {
    compile_opts o = measure_compile_opts(mr->mode);
    const bench_exec_opts xo = exec_opts(p, task_device(p, mr->r));
    o.cache_dir = cache;
    bench_compile *bc_out = &mr->r->compile;
    double t0 = base_now();
    int rc = bench_exec_compile(m, &o, &xo, &mr->x, err, cap);
    bc_out->warm_s = base_now() - t0;
    if (rc < 0)
        return -1;
    size_t arena;
    bench_exec_compile_info(mr->x, &bc_out->cache_hit, &arena);
    bc_out->done = true;
    mr->r->arena_bytes = (int64_t)arena;
    return 0;
}

// Compiles mr's mode cold (an empty kernel cache of its own) and warm (the
// same cache: the program kept). On the GPU, which has no kernel cache yet,
// once: the cold time, no warm one. -1 with err: the compiler's words.
static int compile_mode(const bench_plan *p, const bench_case *bc, const model *m, mode_run *mr,
                        const char *kcache, char *err, size_t cap) {
    const bench_exec_opts xo = exec_opts(p, task_device(p, mr->r));
    bench_compile *bc_out = &mr->r->compile;
    if (xo.device == BENCH_DEV_CUDA) {
        compile_opts o = measure_compile_opts(mr->mode);
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
    const char *mode = bench_axis_value(BENCH_AXIS_MODE, mr->mode);
    if (measure_mode_cache(kcache, mode, cache, sizeof cache, err, cap) < 0)
        return -1;
    int rc = compile_cold(p, bc, m, mr, cache, err, cap);
    if (rc == 0)
        rc = compile_warm(p, m, mr, cache, err, cap);
    if (!kcache) // else KCACHE/MODE, the parent's to remove
        bench_remove_tree(cache);
    return rc;
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

// Training, in three parts on the CPU. The measured graph returns only the
// loss, so that a gradient can die at its update; each mode compiles it
// first, cold, into the mode's empty kernel cache. The check
// (measure_check_train) runs a graph that also returns every gradient: it
// differs from the measured one in its outputs alone, so its kernels are
// the same and only its tail compiles (kcache keeps each part's object).
// Then the measured graph again, from the cache (warm), its first step
// (kernels and peak memory), and the timing.
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
    char cache[BENCH_MODE_COUNT][1024];
    for (int k = 0; k < n; k++)
        cache[k][0] = '\0';
    double t0 = base_now();
    if (!cuda) {
        if (measure_group_setup(p, gr, bc, true, false, rs, n, &m, &e, runs) < 0)
            goto done;
        measure_phase(p, gr, "build", &t0);
        for (int k = 1; k < n; k++) {
            char err[512];
            const char *mode = bench_axis_value(BENCH_AXIS_MODE, runs[k].mode);
            if (measure_mode_cache(kcache, mode, cache[k], sizeof cache[k], err, sizeof err) < 0) {
                cache[k][0] = '\0';
                dead[k] = true;
            } else if (compile_cold(p, bc, m, &runs[k], cache[k], err, sizeof err) < 0) {
                dead[k] = true;
            }
            if (dead[k])
                set_status(&rs[k], mode_fail_status(), "%s", err);
        }
        measure_phase(p, gr, "compile cold", &t0);
        measure_group_teardown(m, e, runs, n);
        m = NULL, e = NULL;

        if (measure_group_setup(p, gr, bc, true, true, rs, n, &m, &e, runs) < 0)
            goto done;
        measure_phase(p, gr, "build checked graph", &t0);
        for (int k = 1; k < n; k++) {
            compile_opts o = measure_compile_opts(runs[k].mode);
            o.cache_dir = cache[k];
            char err[512];
            if (!dead[k] && bench_exec_compile(m, &o, &xo, &runs[k].x, err, sizeof err) < 0)
                set_status(&rs[k], mode_fail_status(), "%s", err);
        }
        measure_phase(p, gr, "compile checked graph", &t0);
        int rc = measure_check_train(p, gr, bc, m, runs, n, tol, &t0);
        for (int k = 1; k < n; k++)
            dead[k] = !runs[k].x;
        measure_group_teardown(m, e, runs, n);
        m = NULL, e = NULL;
        if (rc < 0)
            goto done;
    }

    if (measure_group_setup(p, gr, bc, true, false, rs, n, &m, &e, runs) < 0)
        goto done;
    measure_phase(p, gr, "build", &t0);
    for (int k = 1; k < n; k++) {
        char err[512];
        if (!dead[k] && (cuda ? compile_mode(p, bc, m, &runs[k], kcache, err, sizeof err)
                              : compile_warm(p, m, &runs[k], cache[k], err, sizeof err)) < 0)
            set_status(&rs[k], mode_fail_status(), "%s", err);
    }
    measure_phase(p, gr, cuda ? "compile" : "compile warm", &t0);
    if (cuda) { // the check's steps give kernels and peak memory
        if (measure_check_train(p, gr, bc, m, runs, n, tol, &t0) < 0)
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
        measure_phase(p, gr, "first step", &t0);
    }
    if (measure_time_modes(p, runs, n) < 0)
        goto done;
    measure_phase(p, gr, "time", &t0);
    finish(runs, n, tol);
    measure_eager_thread_check(p, runs);
    bench_group_judge(rs, n, p->cfg.threads);
done:
    measure_group_teardown(m, e, runs, n);
    for (int k = 1; k < n && !kcache; k++) // else KCACHE/MODE, the parent's to remove
        if (cache[k][0])
            bench_remove_tree(cache[k]);
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
    if (measure_group_setup(p, gr, bc, train, false, rs, n, &m, &e, runs) < 0)
        goto done;
    char cache[1024] = "";
    for (int k = 1; k < n; k++) {
        compile_opts o = measure_compile_opts(runs[k].mode);
        const bench_exec_opts xo = exec_opts(p, task_device(p, runs[k].r));
        char err[512];
        const char *mode = bench_axis_value(BENCH_AXIS_MODE, runs[k].mode);
        bool own = !kcache; // else process 0's programs, loaded from KCACHE/MODE
        if (xo.device == BENCH_DEV_CPU) {
            if (own && measure_mode_cache(NULL, mode, cache, sizeof cache, err, sizeof err) < 0) {
                set_status(&rs[k], mode_fail_status(), "%s", err);
                continue;
            }
            if (!own)
                snprintf(cache, sizeof cache, "%s/%s", kcache, mode);
            o.cache_dir = cache;
        }
        if (bench_exec_compile(m, &o, &xo, &runs[k].x, err, sizeof err) < 0)
            set_status(&rs[k], mode_fail_status(), "%s", err);
        if (xo.device == BENCH_DEV_CPU && own)
            bench_remove_tree(cache);
    }
    if (measure_time_modes(p, runs, n) < 0)
        goto done;
    for (int k = 0; k < n; k++)
        if (runs[k].x)
            runs[k].r->status = k == 0 ? BENCH_OK : BENCH_PASS;
done:
    measure_group_teardown(m, e, runs, n);
}

void bench_group_measure(const bench_plan *p, int group, int process, const char *kcache,
                         bench_result *rs) {
    const bench_group *gr = &p->groups[group];
    int n = gr->ntasks;
    for (int i = 0; i < n; i++)
        result_init(&rs[i], gr->first + i);
    const bench_task *t = &p->tasks[gr->first];
    const bench_case *bc = &p->cases[t->case_index];
    // a training the engine cannot do is said first: it holds even once
    // every layer is built
    if (t->axis[BENCH_AXIS_WORKLOAD] == BENCH_WL_TRAIN && bc->train_fail_to_load[0]) {
        set_all(rs, n, BENCH_MODEL_FAIL_TO_LOAD, bc->train_fail_to_load);
        return;
    }
    if (bc->fail_to_load[0]) {
        set_all(rs, n, BENCH_MODEL_FAIL_TO_LOAD, bc->fail_to_load);
        return;
    }
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

    // the cap, and a fresh count of its refusals, for this group's statuses
    tensor_mem_set_limit(p->cfg.memory_limit);
    // oneDNN follows OpenMP's setting; OpenBLAS keeps its own.
    omp_set_num_threads(p->cfg.threads);
    openblas_set_num_threads(p->cfg.threads);

    bool train = t->axis[BENCH_AXIS_WORKLOAD] == BENCH_WL_TRAIN;
    double tol = bench_tolerance(tf32_task(p, t) ? BENCH_PREC_AMP : t->axis[BENCH_AXIS_PRECISION],
                                 t->axis[BENCH_AXIS_WORKLOAD]);
    // the suite's tolerance for this workload, where it gives one (docs/yaml.md)
    double suite_tol = train ? bc->c->tol.train
                       : t->axis[BENCH_AXIS_WORKLOAD] == BENCH_WL_INFER ? bc->c->tol.infer
                                                                         : 0;
    if (suite_tol > 0)
        tol = suite_tol;
    if (t->axis[BENCH_AXIS_WORKLOAD] == BENCH_WL_CHAT) {
        measure_chat(p, gr, bc, kcache, rs, n);
        return;
    }
    if (t->axis[BENCH_AXIS_WORKLOAD] == BENCH_WL_GENERATE) {
        measure_generate(p, gr, bc, process == 0 && p->cfg.accuracy, kcache, rs, n, tol);
        return;
    }
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
    double t0 = base_now();
    if (measure_group_setup(p, gr, bc, false, false, rs, n, &m, &e, runs) < 0)
        goto done;
    measure_phase(p, gr, "build", &t0);
    if (measure_check_eager(p, bc, m, runs, n, tol, &ref) < 0)
        goto done;
    measure_phase(p, gr, "eager and fp64 reference", &t0);
    for (int k = 1; k < n; k++) {
        char err[512];
        if (compile_mode(p, bc, m, &runs[k], kcache, err, sizeof err) < 0)
            set_status(&rs[k], mode_fail_status(), "%s", err);
    }
    measure_phase(p, gr, "compile cold and warm", &t0);
    measure_check_compiled(p, runs, n, tol, &ref);
    measure_reference_free(&ref);
    ref = (reference){0};
    measure_phase(p, gr, "check", &t0);
    if (measure_time_modes(p, runs, n) < 0)
        goto done;
    measure_phase(p, gr, "time", &t0);
    finish(runs, n, tol);
    measure_eager_thread_check(p, runs);
    bench_group_judge(rs, n, p->cfg.threads);
done:
    measure_reference_free(&ref);
    measure_group_teardown(m, e, runs, n);
}
