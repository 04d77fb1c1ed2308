// sum_to's plan, shared by the CPU kernel (cpu_grad.c) and the CUDA one
// (backend/cuda/cuda_grad_reduce.cu): dy's dims, size-1 ones dropped and
// neighbours of the same kind merged, are kept (in out) or reduced. I is
// the last dim's length when it is kept, L when it is reduced (1 if none);
// the other kept and reduced dims, with their strides in dy, are listed.
#pragma once
#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sum_to_plan {
    int nk, nr;
    int64_t ks[TENSOR_MAX_DIMS], kst[TENSOR_MAX_DIMS]; // kept dims but the vector one
    int64_t rs[TENSOR_MAX_DIMS], rst[TENSOR_MAX_DIMS]; // reduced dims but the row one
    int64_t I, L;                                      // vector and row lengths (1 if none)
} sum_to_plan;

// dc: dy, contiguous; out: the shape it sums to (broadcasting rules)
void sum_to_plan_make(const tensor *dc, const tensor *out, sum_to_plan *p);

#ifdef __cplusplus
}
#endif
