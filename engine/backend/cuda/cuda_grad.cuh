// cuda_grad.cuh: what the training kernels (cuda_grad*.cu, cuda_update.cu)
// share besides cuda_pointwise.cuh: the grid for one block a row or set,
// and the operand checks, each setting c->err and returning -1.
//
//   if (grad_need_target(c, "sgd", p) < 0) return -1;   // contiguous f32, written in place
//   kernel<<<grad_grid(rows), row_threads(len), 0, c->stream>>>(...);
#pragma once
#include "cuda_pointwise.cuh"

// Blocks for one block a row (a grid-stride loop covers rows beyond 2^20).
unsigned grad_grid(int64_t rows);
// f32 or f16.
int grad_need_float(cuda_ctx *c, const char *what, const tensor *t);
// Every t[i] f32 or f16, all of one dtype (an op's operands and output).
int grad_need_same(cuda_ctx *c, const char *what, int n, const tensor *const *t);
// A contiguous f32 or f16 vector (a norm's weight); *f16 says which.
int grad_need_vector(cuda_ctx *c, const char *what, const tensor *t, int *f16);
// The tensors an update writes in place: contiguous f32 (NULL passes).
int grad_need_target(cuda_ctx *c, const char *what, const tensor *t);
