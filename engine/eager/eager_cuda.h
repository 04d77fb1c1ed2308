// eager_cuda: runs a model one kernel per op on an NVIDIA GPU, as PyTorch's
// eager mode does on CUDA.
//
//   char why[256];
//   if (cuda_probe(why, sizeof why) < 0) ...            // backend/cuda/cuda_device.h
//   eager_cuda *e;
//   if (eager_cuda_new(m, &(eager_cuda_opts){0}, &e, err, sizeof err) < 0) ...
//   eager_stats st;
//   eager_cuda_run(e, &st);                 // one step, enqueued on eager_cuda_stream(e)
//   eager_cuda_sync(e);                     // waits; asynchronous and kernel-found errors
//   tensor *out[8];
//   eager_cuda_outputs(e, out);             // host copies of the last step's outputs
//   eager_cuda_free(e);
//
// eager_cuda_new copies every parameter, buffer, constant and input of
// m->values to the GPU once (a framework's module.cuda()); after
// model_init_inputs, eager_cuda_upload_inputs copies the new inputs.
// A step is what eager.h's is, on the device: one launch per computing op
// (library calls count as one; an op that needs a contiguous copy first
// counts it too), every output from the caching allocator
// (backend/cuda/cuda_alloc.h), views free, each intermediate returned to the
// allocator right after its last consumer, all on one stream. eager_cuda_run
// returns once the step is enqueued (as PyTorch does), so time it with CUDA
// events on eager_cuda_stream (cuda_timer in cuda_device.h) or sync first.
// The step's outputs stay on the device until the next step or
// eager_cuda_outputs. GEMMs are cuBLAS / cuBLASLt (f32 without TF32 unless
// opts.allow_tf32), convolution and pooling cuDNN, everything else the CUDA
// C kernels in backend/cuda (docs/cuda.md).
//
// With opts.share (backend/cuda/cuda_share.h) the executor runs on the
// share's context and takes the share's copy of each named weight and
// buffer; an input without a value is left for eager_cuda_pass, which hands
// it another executor's output on the device (a generation's past keys and
// values, never copied to the host); and every run first sends the inputs'
// m->values, as the CPU's executors read them.
//
// Built only with the CUDA backend: callers reach it through the executor
// registry (engine/exec.h), which has no CUDA executors in a build without
// it and says so.
#pragma once
#include "eager.h"
#include "model/model.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cuda_share cuda_share;

typedef struct eager_cuda_opts {
    bool allow_tf32; // TF32 tensor cores for f32 GEMMs and convolutions (PyTorch: off for GEMMs)
    cuda_share *share; // NULL: a context and copies of its own; else the share's (its TF32 off)
} eager_cuda_opts;

typedef struct eager_cuda eager_cuda;

// 0, or -1 with err set (no GPU: the driver's reason; out of memory; ...).
int eager_cuda_new(const model *m, const eager_cuda_opts *o, eager_cuda **out, char *err,
                   size_t cap);
// Copies m->values of the INPUT nodes to the device again.
int eager_cuda_upload_inputs(eager_cuda *e);
// The training step of the next runs (from 1; 0 counts as 1), as
// eager_set_step: Adam's bias correction, SGD's first step, dropout masks.
void eager_cuda_set_step(eager_cuda *e, uint64_t step);
// One step. 0, or -1 with eager_cuda_error set. st: kernels launched, of
// which casts (counted as eager_run counts them: one graph walk, walk.c),
// and the allocator's peak live bytes over the step (parameters and inputs
// included).
int eager_cuda_run(eager_cuda *e, eager_stats *st);
// Waits for the step; -1 with the reason when a kernel failed or found a bad
// index (embedding, cross_entropy targets).
int eager_cuda_sync(eager_cuda *e);
// Host copies of the last step's g->noutputs outputs (contiguous; the caller
// frees them with tensor_free). Waits for the step.
int eager_cuda_outputs(eager_cuda *e, tensor **outputs);
// A host copy of output k of the last step alone (waits); out NULL: no
// copy. With a share the device tensor is released either way (a
// generation's logits, the last step's caches), so a second copy of k fails.
int eager_cuda_output(eager_cuda *e, int k, tensor **out);
// Executors of one share: output k of from's last step becomes the value of
// `to`'s INPUT node `input` for to's next run (the device tensor itself,
// moved: from no longer holds it; to releases it after that run). -1 with
// to's error: no share, no such output, a shape that differs.
int eager_cuda_pass(eager_cuda *from, int k, eager_cuda *to, int input);
const char *eager_cuda_error(const eager_cuda *e);
// The cudaStream_t the steps run on, as void *.
void *eager_cuda_stream(const eager_cuda *e);
void eager_cuda_free(eager_cuda *e);
