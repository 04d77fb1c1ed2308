// eager: runs a model one kernel per op, as an eager framework does.
//
//   eager *e = eager_new(m);            // m->values hold params, buffers, inputs
//   tensor *out[8];
//   eager_stats st;
//   eager_run(e, out, &st);             // g->noutputs tensors, caller frees
//   printf("%lld kernels, peak %zu bytes\n", (long long)st.kernels, st.peak_bytes);
//   eager_free(e);
//
// Every op that computes launches one kernel and allocates its output (64-byte
// aligned); views (reshape of contiguous data, permute, slice, expand) share
// storage and launch nothing, as in PyTorch. An intermediate is freed as soon
// as its last consumer has run. GEMMs go to OpenBLAS, convolutions and pooling
// to oneDNN; pointwise, reduction and norm kernels are OpenMP loops that
// vectorize, with fast paths for contiguous data. Threads: omp_set_num_threads
// by the caller (bench sets OpenMP, OpenBLAS and oneDNN together).
#pragma once
#include "model/model.h"

#include <stddef.h>
#include <stdint.h>

typedef struct eager_stats {
    int64_t kernels;      // kernels launched in the step
    int64_t cast_kernels; // of which dtype casts (mixed precision's)
    size_t peak_bytes;    // most tensor bytes live at once in the step (params included)
} eager_stats;

typedef struct eager eager;

eager *eager_new(const model *m);
// One step. 0 on success; -1 on an error (out of memory, a bad index or dtype:
// the message in eager_error).
int eager_run(eager *e, tensor **outputs, eager_stats *st);
const char *eager_error(const eager *e);
// The optimizer step of the next runs (from 1; 1 until set): dropout draws
// its masks from it and AdamW's bias correction uses it (under the grad
// scaler the graph's own count of steps taken does, engine/autodiff/autograd.h).
// Update ops (SGD, ADAMW, RUNNING_STAT) and training batch_norm write
// m->values in place, so each run sees the previous one's parameters and
// statistics.
void eager_set_step(eager *e, uint64_t step);
void eager_free(eager *e);

// An eager step's memory planned from the graph alone, without values and
// without running a kernel (a 6e9-parameter graph plans in a moment): the
// one graph walk (eager_internal.h) over a device that counts bytes as the
// CPU allocator does (tensor_mem_round) and launches nothing.
//
//   eager_plan_figures f;
//   if (eager_plan_peak(m->g, &f, err, sizeof err) < 0) ...
//   printf("peak %zu bytes at %%%d\n", f.peak_bytes, f.peak_node);
//
// peak_bytes is what eager_stats.peak_bytes reports for a step of the same
// graph when nothing else is live (the kernels' own scratch aside, but for
// the f32 copies an f16 GEMM makes of its operands, which count).
typedef struct eager_plan_figures {
    size_t sources_bytes;    // parameters, buffers, inputs: resident over the step
    size_t peak_bytes;       // most bytes live at once, sources included
    size_t activation_bytes; // peak_bytes - sources_bytes
    size_t output_bytes;     // what the step's outputs still hold after it
    int peak_node;           // the node whose output's allocation reaches the peak; -1: none
    int64_t kernels;         // kernels the step launches
} eager_plan_figures;

// 0, or -1 with err set (out of host memory).
int eager_plan_peak(const graph *g, eager_plan_figures *out, char *err, size_t cap);
// The same with another allocator's rounding of a request (the CUDA
// caching allocator's is cuda_alloc_round, backend/cuda/cuda_alloc.h), and
// no CPU kernel's scratch.
int eager_plan_peak_rounded(const graph *g, size_t (*round)(size_t bytes), eager_plan_figures *out,
                            char *err, size_t cap);
