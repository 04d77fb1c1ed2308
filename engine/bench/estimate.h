// estimate: how long a run will take at least, from each case's FLOPs and
// bytes and the machine's calibration (calibrate.h), before anything runs.
//
//   bench_calibration c;
//   if (bench_calibration_load(NULL, p->cfg.threads, &c) == 0) {
//       bench_estimate e;
//       bench_plan_estimate(p, &c, &e);
//       if (e.seconds > BENCH_ESTIMATE_WARN_S) ... say so, suggest --size cpu ...
//   }
//
// Each entry costs its steps (warm-up, the accuracy check, the timed
// rounds; training three inference steps each) at the calibrated roofline:
// the larger of FLOPs / GEMM rate and bytes / bandwidth. No step runs
// faster than that, so the figure is a floor: compiling, the fp64
// reference's slower arithmetic and overheads only add to it.
#pragma once
#include "calibrate.h"
#include "plan.h"

// A run estimated above this says so first (ZOO.md: ten minutes).
#define BENCH_ESTIMATE_WARN_S 600.0

typedef struct bench_estimate {
    double seconds; // the whole run, at least
    int entries;    // tasks counted (those whose case builds)
} bench_estimate;

void bench_plan_estimate(const bench_plan *p, const bench_calibration *c, bench_estimate *e);
// One task's share of that: its least seconds at c's roofline; -1 when its
// case (or its training) does not build, so it runs nothing.
double bench_task_seconds(const bench_plan *p, int task, const bench_calibration *c);
