// axes: what a benchmark case can vary besides the model (mode, precision,
// workload, device) and how it can end (status).
//
//   int v = bench_axis_parse(BENCH_AXIS_PRECISION, "amp");   // BENCH_PREC_AMP, or -1
//   puts(bench_axis_value(BENCH_AXIS_PRECISION, BENCH_PREC_FP32));    // "fp32"
//
// Every value has a name from day one, so results files and suites can say
// "amp" or "cuda" before this build can run them; which values this build
// runs is bench_axis_available (bench/axes.h), the only part that needs the
// engine. The names are the results schema's, so they live with it and
// reports/ reads them without the engine. The tables sit in axes.c, guarded
// by static_assert on the counts.
#pragma once
#include <stdbool.h>

enum bench_axis {
    BENCH_AXIS_MODE,
    BENCH_AXIS_PRECISION,
    BENCH_AXIS_WORKLOAD,
    BENCH_AXIS_DEVICE,
    BENCH_AXIS_COUNT
};

enum bench_mode {
    BENCH_MODE_EAGER,
    BENCH_MODE_COMPILED,
    BENCH_MODE_FUSED,
    BENCH_MODE_CAPTURED,
    BENCH_MODE_COUNT
};
enum bench_precision { BENCH_PREC_FP32, BENCH_PREC_AMP, BENCH_PREC_COUNT };
enum bench_workload {
    BENCH_WL_INFER,
    BENCH_WL_TRAIN,
    BENCH_WL_GENERATE,
    BENCH_WL_CHAT,
    BENCH_WL_COUNT
};
enum bench_device { BENCH_DEV_CPU, BENCH_DEV_CUDA, BENCH_DEV_COUNT };

// the most values any axis has
#define BENCH_AXIS_MAX 4

const char *bench_axis_name(enum bench_axis a); // "mode"
int bench_axis_size(enum bench_axis a);
const char *bench_axis_value(enum bench_axis a, int v); // "eager"
int bench_axis_parse(enum bench_axis a, const char *s); // -1 when unknown
// All names of the axis, comma separated, for messages: "eager, compiled, fused, captured".
const char *bench_axis_values_list(enum bench_axis a);

// Eager entries end ok or fail_accuracy; compiled-family entries (PyTorch's
// names) pass, fail_accuracy or fail_to_run; any entry can end error, crash,
// timeout or oom. The study's two failures before any comparison end every
// entry of a case: model_fail_to_load (the model uses a layer the engine
// has not built) and eager_fail_to_run (eager failed, so the compiled-family
// modes were never tried). invalid is the readers' verdict on a file, never
// the runner's: a sample that is no plausible time (results_samples_check).
enum bench_status {
    BENCH_OK,                 // eager ran, and passed the accuracy check when there was one
    BENCH_PASS,               // a compiled-family mode ran and its result passed
    BENCH_FAIL_ACCURACY,      // ran, but the result is too far from eager and the fp64 reference
    BENCH_FAIL_TO_RUN,        // a compiled-family mode failed to compile or run (message says why)
    BENCH_MODEL_FAIL_TO_LOAD, // the model uses a layer not built yet (message names it)
    BENCH_EAGER_FAIL_TO_RUN,  // eager failed; no compiled-family mode was tried
    BENCH_ERROR,              // could not build or run (message says why)
    BENCH_CRASH,              // the child died of a signal
    BENCH_TIMEOUT,            // the child ran past --timeout and was killed
    BENCH_OOM,                // memory ran out
    BENCH_INVALID,            // its samples_s hold a time no run can measure (the message names it)
    BENCH_STATUS_COUNT
};

const char *bench_status_name(enum bench_status s); // "fail_accuracy"
int bench_status_parse(const char *s);              // -1 when unknown
bool bench_status_good(enum bench_status s);        // ok or pass
// compiled, fused, captured: modes that compile the model (and need eager beside them)
bool bench_mode_compiled(int mode);

// Modes by name, tcbench's and those another harness writes into results
// files (scripts/torch_side_by_side.py: torch-eager, torch-compile). The
// readers take all of them; tcbench runs only its own (bench_axis_parse,
// where torch-eager is unknown).
//
//   bench_mode_baseline("torch-compile");   // "torch-eager": its speedup is over that
//   bench_mode_peer("compiled");            // "torch-compile": the same step in PyTorch
//
// The mode a mode's speedup is measured over ("eager" for compiled, fused
// and captured, "torch-eager" for torch-compile); NULL for a baseline
// (eager, torch-eager) and for a mode no table knows.
const char *bench_mode_baseline(const char *mode);
// The other harness's mode that does what mode does (eager <-> torch-eager,
// compiled <-> torch-compile), or NULL.
const char *bench_mode_peer(const char *mode);
// Whether mode is another harness's (torch-eager, torch-compile).
bool bench_mode_foreign(const char *mode);
// Sort order of modes: tcbench's (eager, compiled, fused, captured), then
// the other harnesses'; -1 for a mode no table knows.
int bench_mode_rank(const char *mode);
