// exec: one mode's executor as the runner drives it, the same on every
// device: the executor that engine/exec.h's registry has for the case's
// device and family (CPU eager, CPU compiled, GPU eager, GPU compiled), with
// the case's L2 flush. A device this build lacks fails at creation, saying so.
//
//   bench_exec_opts o = {.device = BENCH_DEV_CUDA, .tf32 = false, .flush_l2 = true};
//   bench_exec *x;
//   if (bench_exec_eager(m, &o, &x, err, sizeof err) < 0) ...      // or bench_exec_compile
//   tensor *out[BENCH_MAX_OUTPUTS];
//   bench_exec_stats st;
//   bench_exec_set_step(x, 1);
//   bench_exec_run(x, out, &st);       // one step; host copies of its outputs, caller frees
//   bench_exec_run(x, NULL, &st);      // one step, outputs dropped: what timing runs
//   bench_exec_sample_start(x); ... bench_exec_sample_stop(x, &s);  // the GPU's clock
//   bench_exec_free(x);
//
// On the CPU a step runs to its end before bench_exec_run returns. On the
// GPU it is enqueued on the executor's stream, as PyTorch does; outputs
// asked for are copied back (which waits), and a sample is timed by a CUDA
// event pair on that stream, with an L2 flush enqueued before the start
// event when flush_l2 is set. Errors a kernel finds on the device
// surface at the next bench_exec_run with outputs or bench_exec_sync. The
// GPU executors are made in the calling process: call these only in the
// child that measures (a CUDA context does not survive fork).
#pragma once
#include "axes.h"
#include "compile/compile.h"
#include "model/model.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct exec_share exec_share; // engine/exec.h

typedef struct bench_exec_opts {
    int device;    // BENCH_DEV_CPU or BENCH_DEV_CUDA
    bool tf32;     // GPU: TF32 tensor cores for f32 GEMMs and convolutions
    bool flush_l2; // GPU: an L2 flush before each timed sample
    exec_share *share; // GPU: one context and weights for several executors (bench_exec_share_new)
} bench_exec_opts;

typedef struct bench_exec_stats {
    int64_t kernels;      // launched per step
    int64_t cast_kernels; // of which casts alone
    size_t peak_bytes;    // most bytes live in the step, parameters and inputs included
    size_t arena_bytes;   // compiled-family: the planned arena
} bench_exec_stats;

typedef struct bench_exec bench_exec;

// The eager executor of m on o->device. -1 with err: the executor's words.
int bench_exec_eager(const model *m, const bench_exec_opts *o, bench_exec **out, char *err,
                     size_t cap);
// m compiled with co (fusion, capture, dump_dir, cache_dir) for o->device.
int bench_exec_compile(const model *m, const compile_opts *co, const bench_exec_opts *o,
                       bench_exec **out, char *err, size_t cap);
// The optimizer step t of the next runs (the executor's set_step).
void bench_exec_set_step(bench_exec *x, uint64_t step);
// One step. outputs: g->noutputs host tensors (caller frees), or NULL to
// drop them. st may be NULL. -1 with bench_exec_error set.
int bench_exec_run(bench_exec *x, tensor **outputs, bench_exec_stats *st);
// Waits for every step enqueued; -1 with the first error a kernel found.
int bench_exec_sync(bench_exec *x);
const char *bench_exec_error(const bench_exec *x);
// The executor's call, for messages: "eager_run", "compiled_run",
// "eager_cuda_run", "cuda_program_run".
const char *bench_exec_what(const bench_exec *x);
// Whether samples are timed by the device (bench_exec_sample_start/stop).
bool bench_exec_has_clock(const bench_exec *x);
int bench_exec_sample_start(bench_exec *x);
int bench_exec_sample_stop(bench_exec *x, double *seconds);
// The compile's own figures (cache hit, arena) where the executor has them
// (compiled on the CPU); zeros elsewhere.
void bench_exec_compile_info(const bench_exec *x, bool *cache_hit, size_t *arena_bytes);
void bench_exec_free(bench_exec *x);
// engine/exec.h's share for device, and its calls: a generation's step
// models on the GPU share one context, their weights and the static KV
// cache; an eager step's outputs pass to the next on the device.
int bench_exec_share_new(int device, exec_share **out, char *err, size_t cap);
void bench_exec_share_free(exec_share *s);
// Host copy of output k alone (waits), or (out NULL) dropped; -1 on the
// CPU (run returns them).
int bench_exec_output(bench_exec *x, int k, tensor **out);
int bench_exec_pass(bench_exec *from, int k, bench_exec *to, int input);
