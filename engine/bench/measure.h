// measure: one group's measurement in this process (what each of the
// runner's children does), and the group's figures once its processes
// have all reported.
//
//   bench_result rs[BENCH_MODE_COUNT];
//   bench_group_measure(p, g, 0, NULL, rs);      // build, compile, check, time
//   bench_group_pool(rs, more, n, 1);            // a later process's samples
//   bench_group_judge(rs, n, p->cfg.threads);    // speedups and stability
//
// A child builds the model once, fills its values from the seed, compiles
// each compiled-family mode twice (cold: into an empty temporary kernel
// cache; warm: a cache hit, the program measured), checks every mode's
// first step (eager against the fp64 reference; compiled-family modes
// against eager and fp64 by PyTorch's rule, accuracy.h) and times all
// modes interleaved (timing.h). A cuda group runs the same steps with the
// GPU's executors (exec.h); its samples are CUDA event times, the host's
// beside them (host_samples).
#pragma once
#include "plan.h"
#include "results/results.h"

// The group's own measurement, in this process (what the child does,
// threads set from the config included): rs[0 .. ntasks - 1], task set.
// Process 0 does everything; a later process of the same group (process >
// 0) only builds, compiles and times: its results carry samples and
// stability, and the parent pools them into process 0's (bench_group_pool).
// kcache: NULL, or a directory the group's processes share (CPU): process
// 0 compiles cold into KCACHE/MODE and leaves it, later processes load the
// same programs from it (a cache hit) instead of compiling them again.
void bench_group_measure(const bench_plan *p, int group, int process, const char *kcache,
                         bench_result *rs);
// Removes dir and everything under it, depth first, never following a
// link out of it nor crossing into another file system.
void bench_remove_tree(const char *dir);
// Pools the samples of a later process's results `more` (rs's group, the
// same tasks) into rs: samples appended, their count kept by process,
// interference summed (the caller then recomputes rs's stats). A task that
// failed there while it was good in rs takes that status, its message
// prefixed by the process. `more` is left to the caller to free.
void bench_group_pool(bench_result *rs, const bench_result *more, int n, int process);
// Once a group's samples are final (one process, or pooled): each passing
// compiled-family entry's speedup over rs[0], and every entry's stability
// (its noise over the processes, the caps, a noisy eager baseline, a
// threading stall against rs[0]'s one-thread time), judged anew.
void bench_group_judge(bench_result *rs, int n, int threads);
