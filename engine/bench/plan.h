// plan: the cases, tasks and groups a run will measure, found before
// anything runs.
//
//   bench_plan *p; diag d;
//   if (bench_plan_new(&cfg, &p, &d) < 0) { diag_print(&d, stderr); exit(2); }  // bad input
//   for (int g = 0; g < p->ngroups; g++) ... p->tasks[p->groups[g].first] ...
//   bench_plan_free(p);
//
// Planning does everything that can find bad input before anything runs:
// it loads every suite, selects cases (--only, --filter, --exclude), loads
// and builds every selected case's model (cheap: shapes only, no values)
// and resolves the modes, precisions, workloads and devices to run. A task
// is one case under one value of each axis, and becomes one entry of the
// results. A group is the tasks of one case that differ only in mode: eager
// first (added whenever a compiled-family mode is asked for, as speedups
// need it), then the compiled-family modes in the order asked.
#pragma once
#include "base/diag.h"
#include "config.h"
#include "model/modeldef.h"
#include "model/suite.h"

#include <stdbool.h>
#include <stdint.h>

// --device auto: cuda when the executor registry's CUDA probe finds a
// usable GPU, else cpu; cfg->device_auto keeps the reason ("" when cuda).
int bench_device_auto(bench_config *cfg);

// The run's device and capability checks, before a plan is made: no
// --device means auto; each device asked for is built and usable (the
// registry's probe); the GPU-only settings (--tf32, --flush-l2) need a
// cuda device; amp in bf16 runs on the CPU only. -1 with a one-line reason
// in err that names the option ("--tf32: a GPU setting, ...").
int bench_config_check_devices(bench_config *cfg, char *err, size_t cap);

typedef struct bench_case {
    const suite *s;
    const suite_case *c;
    modeldef *md;
    int64_t batch;       // after --batch-size
    int64_t param_count; // of the inference graph
    double flops;        // per inference step
    double min_bytes;    // fewest bytes a step must move (graph_min_bytes)
    int nodes;           // of the inference graph (what compiling costs; shard.h)
    // The model names a layer not built yet (modeldef_unbuilt): the located
    // message every task of the case ends model_fail_to_load with; "" when
    // it builds. param_count is then -1 and the figures NAN.
    char fail_to_load[1100];
    // The model's training needs what the engine lacks (`train_needs:`,
    // modeldef_train_unbuilt): the located message its train tasks end
    // model_fail_to_load with; "" otherwise. Its other tasks run.
    char train_fail_to_load[1100];
} bench_case;

typedef struct bench_task {
    int case_index;
    int group;                  // index into plan->groups
    int axis[BENCH_AXIS_COUNT]; // one value per axis
} bench_task;

// Tasks first .. first + ntasks - 1: one case, one precision, workload and
// device, every mode; eager first when any mode is compiled-family.
typedef struct bench_group {
    int first, ntasks;
    // child processes that measure it: --processes, else its suite's
    // defaults.processes, else BENCH_DEFAULT_PROCESSES
    int processes;
} bench_group;

typedef struct bench_plan {
    bench_config cfg; // a copy; the strings stay the caller's
    suite **suites;
    int nsuites;
    bench_case *cases; // selected, in suite order
    int ncases;
    bench_task *tasks; // case-major, the mode fastest: every mode of a group together
    int ntasks;
    bench_group *groups; // one child process each
    int ngroups;
    bool used[BENCH_AXIS_COUNT][BENCH_AXIS_MAX]; // values some task runs
    // Suite defaults this build cannot run yet: "mode compiled; precision amp", or "".
    char skipped[256];
    // --shard K/N: the whole selection's partition (shard.h); tasks and
    // groups above are then shard K's alone (used keeps the selection's).
    // NULL without --shard.
    struct bench_shard *shard;
} bench_plan;

// 0 on success; -1 on bad input with a located message in d. With
// cfg->shard_count, the plan is cut to shard cfg->shard_index (shard.h).
int bench_plan_new(const bench_config *cfg, bench_plan **out, diag *d);
void bench_plan_free(bench_plan *p);
// Loads a case's model and builds its inference graph; the caller frees
// both. Shared by planning and `tcbench check`.
// graph_only: no values will be made (check): a model larger than this
// machine is not refused.
// 0; 1 when the model names a layer not built yet: d holds the
// model_fail_to_load message (modeldef_unbuilt), *md is loaded, *m NULL;
// -1 on bad input, with d set.
int bench_case_build(const suite_case *c, int64_t batch, bool graph_only, modeldef **md, model **m,
                     diag *d);
