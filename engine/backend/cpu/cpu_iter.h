// cpu_iter: the loop nest of a pointwise kernel over broadcast, strided
// operands, as PyTorch's TensorIterator: operand 0 is the (fresh,
// contiguous) output, the rest are inputs broadcast to its shape.
//
//   cpu_iter it;
//   cpu_iter_init(&it, out, 2, (const tensor *[]){a, b});
//   cpu_iter_run(&it, my_segment, &ctx);   // my_segment(ctx, n, ptr, stride, flat0)
//
// init drops size-1 dims and merges dims that are contiguous in every
// operand, so a same-shape add is one flat run, a (N) bias over (M, N) is M
// runs of N, and a (C, 1, 1) scale over (N, C, H, W) is N*C runs of H*W
// with the scale's stride 0. run splits the flat output range across OpenMP
// threads (one thread below CPU_PAR_MIN elements) and calls the segment
// function once per innermost run with each operand's pointer and inner
// stride (elements; 0 for a broadcast operand), so segment functions are
// plain 1-d loops that specialize on strides 1 and 0 and vectorize.
#pragma once
#include "core/tensor.h"

#include <stdint.h>

// Below this many elements a kernel runs on one thread: forking the team
// costs more than it saves.
#define CPU_PAR_MIN      32768
#define CPU_ITER_MAX_OPS 4

typedef struct cpu_iter {
    int ndim; // >= 1
    int nops; // output + inputs
    int64_t numel;
    int64_t shape[TENSOR_MAX_DIMS];
    int64_t stride[CPU_ITER_MAX_OPS][TENSOR_MAX_DIMS]; // elements
    char *data[CPU_ITER_MAX_OPS];                      // first element
    int64_t esize[CPU_ITER_MAX_OPS];                   // bytes per element
} cpu_iter;

// ptr[k] is operand k's first element of the run, stride[k] its step in
// elements; flat0 is the run's first index in the output's row-major order.
typedef void (*cpu_segment_fn)(void *ctx, int64_t n, char *const *ptr, const int64_t *stride,
                               int64_t flat0);

void cpu_iter_init(cpu_iter *it, tensor *out, int nin, const tensor *const *in);
void cpu_iter_run(const cpu_iter *it, cpu_segment_fn fn, void *ctx);

// out = x elementwise (same shape and dtype, any strides on either side):
// memcpy for contiguous runs, a typed strided loop otherwise.
void cpu_iter_copy(tensor *out, const tensor *x);
