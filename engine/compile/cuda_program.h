// cuda_program: the compiled mode on the GPU, compile.h's counterpart: the
// same passes, codegen_cuda's kernels built by NVRTC for this GPU and loaded
// with cudaLibraryLoadData, one planned arena in device memory, and the whole
// step captured once into a CUDA graph and replayed (graph capture).
//
//   compile_opts o = compile_opts_default();          // fusion, capture, dump
//   cuda_program *cp;
//   if (cuda_program_new(m, &o, false, &cp, err, sizeof err) < 0) ...  // false: no TF32
//   compiled_stats st;
//   cuda_program_run(cp, &st);            // one step, enqueued (a graph launch)
//   cuda_program_sync(cp);
//   tensor *out[8];
//   cuda_program_outputs(cp, out);        // host copies; the caller frees them
//   cuda_program_free(cp);
//
// Training graphs (engine/autodiff/autograd.h) run as on the CPU (compile.h): each
// step computes the loss and every gradient (the outputs) and updates the
// parameters, the optimizer state, the running statistics and the grad
// scaler's scalars in place. That state lives in the program's device copies
// of those sources from step to step (uploaded from m->values once, by
// cuda_program_new, which puts it back after its own first step);
// cuda_program_download_state copies it into m->values, where the CPU
// program leaves it.
//
//   cuda_program_set_step(cp, t);          // t from 1: Adam's bias correction, dropout masks
//   cuda_program_run(cp, &st);
//   cuda_program_outputs(cp, out);        // loss, gradients
//   cuda_program_download_state(cp);      // parameters and state into m->values
//
// The step reaches the kernels through a device word copied before each run
// (when it changed), so a captured step serves every step.
//
// Modes, as on the CPU: compiled = fusion and capture; fused (capture off) =
// the groups launched one by one every step; captured (fusion off) = one
// kernel per original op, replayed as a graph. Per group the runtime makes
// the library call codegen_cuda's launch names (cuBLAS GEMM, cuDNN
// convolution, or an op's eager CUDA kernel, the same ones eager_cuda runs)
// and then launches the generated kernel. The first step runs without
// capture, so every library plan, workspace and allocator segment exists
// before a graph records them. stats: kernels per step, peak bytes =
// sources + arena, compile time (NVRTC included). TCBENCH_DISABLE_FUSION and
// TCBENCH_DISABLE_CAPTURE work through compile_opts; --dump writes MODEL.cu.
// cuda_program_new_shared runs on a cuda_share's context
// (backend/cuda/cuda_share.h) and takes the share's copy of each named
// PARAM and BUFFER instead of uploading its own: a generation's prefill
// and decode-step programs then write and read one static KV cache. Each
// run of a shared program first sends its inputs' m->values (the token
// ids, positions and cache length) to their device copies, in stream order
// before the graph launch, so one captured graph serves every position.
//
// Built only with the CUDA backend (TCBENCH_HAVE_CUDA); the rest of tcbench
// reaches it through the executor registry (exec.h), which says when a
// build lacks it.
#pragma once
#include "compile/compile.h"
#include "model/model.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cuda_program cuda_program;
typedef struct cuda_share cuda_share;

int cuda_program_new(const model *m, const compile_opts *o, bool allow_tf32, cuda_program **out,
                     char *err, size_t cap);
// The same on share's context and weights (allow_tf32: the share's, off).
int cuda_program_new_shared(const model *m, const compile_opts *o, bool allow_tf32,
                            cuda_share *share, cuda_program **out, char *err, size_t cap);
// The training step of the next runs (from 1; 0 counts as 1), as compiled_set_step.
void cuda_program_set_step(cuda_program *c, uint64_t step);
int cuda_program_run(cuda_program *c, compiled_stats *st);
int cuda_program_sync(cuda_program *c);
int cuda_program_outputs(cuda_program *c, tensor **outputs);
// A host copy of output k alone (waits); out NULL: nothing (outputs live in the arena).
int cuda_program_output(cuda_program *c, int k, tensor **out);
// Training: the sources the step writes, copied into m->values (waits).
int cuda_program_download_state(cuda_program *c);
const char *cuda_program_error(const cuda_program *c);
void *cuda_program_stream(const cuda_program *c);
void cuda_program_free(cuda_program *c);
