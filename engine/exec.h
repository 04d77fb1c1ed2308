// exec: the executor interface and its registry. Each executor (CPU eager,
// CPU compiled, CUDA eager, CUDA compiled) fills one exec_iface, as ggml's
// backends fill ggml_backend_i, and registers it by (device, family); a
// build without the CUDA backend registers no CUDA executor, so nothing
// outside it needs a stub or an #if.
//
//   char err[512];
//   exec *x;
//   exec_opts o = {.tf32 = false, .compile = NULL};     // compile: NULL is the default
//   if (exec_new("cuda", "eager", m, &o, &x, err, sizeof err) < 0) ...  // not built, no GPU
//   tensor *out[8];
//   exec_stats st;
//   exec_set_step(x, 1);
//   exec_run(x, out, &st);             // one step; host copies of its outputs, caller frees
//   exec_run(x, NULL, &st);            // one step, outputs dropped
//   exec_sync(x);                      // waits for a device's enqueued steps
//   exec_sample_start(x, true);        // device clock (exec_has_clock): cold L2, start
//   ... exec_run(x, NULL, NULL) ...
//   double s;
//   exec_sample_stop(x, &s);           // waits; seconds between the device's events
//   exec_free(x);
//
// Executors that run in turn on the same data (a generation's prefill and
// decode steps) may share a device's context and named weights and
// buffers, the static KV cache among them (exec_share_new; the CPU's share
// host values through model_init_values_from and need none):
//
//   exec_share *s;
//   exec_share_new("cuda", &s, err, sizeof err);
//   exec_opts o = {.share = s};
//   exec_new("cuda", "compiled", prefill, &o, &a, ...); exec_new(..., step, &o, &b, ...);
//   exec_run(a, NULL, &st); exec_output(a, 0, &logits);   // one output to the host
//   exec_pass(a, 1, b, past_k);       // eager: an output as b's input, on the device
//   exec_free(a); exec_free(b); exec_share_free(s);
//
// Families: "eager" (one kernel per op, eager.h, eager_cuda.h) and
// "compiled" (compile.h, cuda_program.h; compile_opts choose compiled,
// fused or captured). On the CPU a step ends before exec_run returns; on a
// device it is enqueued on the executor's stream, and errors a kernel finds
// surface at the next exec_run with outputs or exec_sync. A CUDA executor
// is made in the calling process: a CUDA context does not survive fork.
#pragma once
#include "compile/compile.h"
#include "model/model.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct exec_share exec_share;

typedef struct exec_opts {
    bool tf32;                   // device: TF32 tensor cores for f32 GEMMs and convolutions
    const compile_opts *compile; // compiled family: fusion, capture, dump, cache; NULL: default
    exec_share *share; // a device's shared context and sources (its tf32 off); NULL: its own
} exec_opts;

typedef struct exec_stats {
    int64_t kernels;      // launched per step
    int64_t cast_kernels; // of which casts alone
    size_t peak_bytes;    // most bytes live in the step, parameters and inputs included
    size_t arena_bytes;   // compiled family: the planned arena
} exec_stats;

typedef struct exec_compile_figures {
    bool cache_hit;     // the program came from the kernel cache
    size_t arena_bytes; // the planned arena
} exec_compile_figures;

// One executor. ctx is what create made. A member marked "may be NULL" is
// absent where the executor has nothing to do for it.
typedef struct exec_iface {
    const char *device; // "cpu", "cuda"
    const char *family; // "eager", "compiled"
    const char *call;   // the executor's run, for messages: "eager_run", "cuda_program_run"
    // 0 when the device is usable, else -1 with a one-line reason. May be NULL.
    int (*probe)(char *why, size_t cap);
    // 0, or -1 with err set in the executor's words.
    int (*create)(const model *m, const exec_opts *o, void **ctx, char *err, size_t cap);
    // The optimizer step of the next runs (from 1).
    void (*set_step)(void *ctx, uint64_t step);
    // One step; outputs: g->noutputs host tensors (caller frees). NULL only
    // where `outputs` is set: the outputs stay on the device. -1 with error().
    int (*run)(void *ctx, tensor **outputs, exec_stats *st);
    // Waits for the enqueued steps; -1 with error(). May be NULL (run waits).
    int (*sync)(void *ctx);
    // Host copies of the last step's outputs (waits). May be NULL: run
    // returns them.
    int (*outputs)(void *ctx, tensor **outputs);
    const char *(*error)(const void *ctx);
    // The device's clock around one sample: flush_l2 enqueues an L2 flush
    // before the start event; stop waits. May be NULL (timed by the host).
    int (*sample_start)(void *ctx, bool flush_l2, char *err, size_t cap);
    int (*sample_stop)(void *ctx, double *seconds, char *err, size_t cap);
    // The compile's own figures. May be NULL (zeros).
    void (*compile_info)(const void *ctx, exec_compile_figures *info);
    // The device's share (exec_share_new): made, freed. May be NULL (none).
    int (*share_new)(void **share, char *err, size_t cap);
    void (*share_free)(void *share);
    // A host copy of output k of the last step alone (waits); out NULL:
    // dropped, not copied. May be NULL: run returns the outputs.
    int (*output)(void *ctx, int k, tensor **out);
    // Output k of from's last step as `to`'s INPUT node `input` for its next
    // run, on the device (executors of one share). May be NULL.
    int (*pass)(void *from, int k, void *to, int input);
    void (*free)(void *ctx);
} exec_iface;

// The registered executor for device and family, or NULL with err saying
// why: a device this build lacks names the build option that brings it
// ("built without the CUDA backend ...; reconfigure with -Dcuda=enabled").
const exec_iface *exec_find(const char *device, const char *family, char *err, size_t cap);
// Whether this build registers any executor for device.
bool exec_device_built(const char *device);
// 0 when device is built and usable (its executors' probe), else -1 with a
// one-line reason.
int exec_device_probe(const char *device, char *why, size_t cap);
// The registered executors, for tests that run every one: *n of them.
const exec_iface *const *exec_list(int *n);

typedef struct exec exec;

// exec_find and then create. -1 with err.
int exec_new(const char *device, const char *family, const model *m, const exec_opts *o, exec **out,
             char *err, size_t cap);
// The same from a descriptor (exec_list's).
int exec_new_from(const exec_iface *i, const model *m, const exec_opts *o, exec **out, char *err,
                  size_t cap);
const exec_iface *exec_iface_of(const exec *x);
void exec_set_step(exec *x, uint64_t step);
// One step: outputs as exec_iface.run, or NULL to drop them (any executor).
// st may be NULL. -1 with exec_error set.
int exec_run(exec *x, tensor **outputs, exec_stats *st);
int exec_sync(exec *x);
// Host copies of the last step's outputs; -1 where run returns them (CPU).
int exec_outputs(exec *x, tensor **outputs);
bool exec_has_clock(const exec *x);
int exec_sample_start(exec *x, bool flush_l2);
int exec_sample_stop(exec *x, double *seconds);
void exec_compile_info(const exec *x, exec_compile_figures *info);
const char *exec_error(const exec *x);
void exec_free(exec *x);

// A share for device's executors; -1 with err when the device has none
// (the CPU) or cannot make one (no GPU: the driver's reason).
int exec_share_new(const char *device, exec_share **out, char *err, size_t cap);
// After every executor made with it.
void exec_share_free(exec_share *s);
// Host copy of output k of the last step (waits); -1 where the executor has
// no such call (the CPU's run returns its outputs). out NULL: no copy, the
// output dropped (a shared eager executor releases its device tensor).
int exec_output(exec *x, int k, tensor **out);
// Output k of from's last step becomes to's INPUT node `input` for to's
// next run, without a copy (executors of one share, eager family). -1 with
// to's exec_error where the executor cannot.
int exec_pass(exec *from, int k, exec *to, int input);
