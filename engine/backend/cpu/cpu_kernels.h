// cpu_kernels: the CPU kernels of the eager executor, one per op family.
//
//   cpu_ctx c = {0};
//   cpu_dnnl_new(&c.dnnl, err, sizeof err);          // once, for conv and pool
//   tensor *y = tensor_new_empty(n->dtype, n->ndim, n->shape);
//   if (cpu_binary(&c, n, a, b, y) < 0)              // fills y; c.err says why not
//       ...
//   c.kernels;                                       // kernels launched so far
//   cpu_dnnl_free(c.dnnl);
//
// Each kernel writes a preallocated contiguous output of the node's shape and
// dtype and counts itself in c->kernels; a kernel that first has to make an
// input contiguous counts that copy too, as it is one more pass over memory
// (PyTorch launches it as its own kernel). Inputs may be any strided view.
// An unsupported dtype or a bad index is an error with a message, never a
// crash. Float math is done in f32 registers (f16 is converted on the fly);
// GEMMs call OpenBLAS, convolutions and pooling oneDNN.
#pragma once
#include "graph.h"
#include "tensor.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cpu_dnnl cpu_dnnl;

typedef struct cpu_ctx {
    int64_t kernels; // kernels launched, internal copies included
    cpu_dnnl *dnnl;  // oneDNN engine, stream and primitive cache
    char err[256];
} cpu_ctx;

// Sets c->err (printf-style) and returns -1.
int cpu_fail(cpu_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// x itself (a new view) when contiguous, else a contiguous copy, counted as
// a kernel. NULL with c->err set when memory runs out.
tensor *cpu_contiguous(cpu_ctx *c, const tensor *x);

// pointwise (cpu_pointwise.c)
// UNARY ops, SCALE, CAST and DROPOUT; x has out's shape.
int cpu_unary(cpu_ctx *c, const graph_node *n, const tensor *x, tensor *out);
// ADD, SUB, MUL, DIV, MAXIMUM with broadcasting.
int cpu_binary(cpu_ctx *c, const graph_node *n, const tensor *a, const tensor *b, tensor *out);
// cond ? a : b with broadcasting, any dtype.
int cpu_where(cpu_ctx *c, const tensor *cond, const tensor *a, const tensor *b, tensor *out);
// out = x, same shape, any strides and dtype (CONTIGUOUS, RESHAPE's copy).
int cpu_copy(cpu_ctx *c, const tensor *x, tensor *out);

// reductions, norms, losses (cpu_reduce.c)
// SUM, MEAN, MAX over n->ia[0], kept as size 1.
int cpu_reduce(cpu_ctx *c, const graph_node *n, const tensor *x, tensor *out);
// over the last axis; log_softmax when log
int cpu_softmax(cpu_ctx *c, const tensor *x, bool log, tensor *out);
// x (..., C), weight (C), bias (C); bias NULL for rms_norm
int cpu_layer_norm(cpu_ctx *c, const tensor *x, const tensor *w, const tensor *b, double eps,
                   tensor *out);
int cpu_rms_norm(cpu_ctx *c, const tensor *x, const tensor *w, double eps, tensor *out);
// x (N, C, ...); weight, bias, running mean, running var (C)
int cpu_batch_norm(cpu_ctx *c, const tensor *x, const tensor *w, const tensor *b,
                   const tensor *mean, const tensor *var, double eps, tensor *out);
// x (N, C, ...); weight, bias (C)
int cpu_group_norm(cpu_ctx *c, const tensor *x, const tensor *w, const tensor *b, int64_t groups,
                   double eps, tensor *out);
// logits (N, C) f32, target (N) i32/i64 -> () mean over targets != ignore
int cpu_cross_entropy(cpu_ctx *c, const tensor *logits, const tensor *target, int64_t ignore,
                      tensor *out);
// () mean of (a - b)^2
int cpu_mse_loss(cpu_ctx *c, const tensor *a, const tensor *b, tensor *out);

// matrix products through cblas_sgemm (cpu_gemm.c)
// (..., M, K) @ (..., K, N) -> (..., M, N), batch dims broadcast
int cpu_matmul(cpu_ctx *c, const tensor *a, const tensor *b, tensor *out);
// x (..., K) @ w (N, K)^T + bias (N) -> (..., N); bias may be NULL
int cpu_linear(cpu_ctx *c, const tensor *x, const tensor *w, const tensor *bias, tensor *out);

// convolution and pooling through oneDNN (cpu_dnnl.c)
int cpu_dnnl_new(cpu_dnnl **out, char *err, size_t errcap);
void cpu_dnnl_free(cpu_dnnl *d);
// CONV2D and CONV_TRANSPOSE2D, attributes as in ops.def; bias may be NULL
int cpu_conv2d(cpu_ctx *c, const graph_node *n, const tensor *x, const tensor *w,
               const tensor *bias, tensor *out);
// A convolution's epilogue as oneDNN post-ops: an activation (RELU,
// RELU6, SIGMOID, TANH, GELU, GELU_TANH, SILU, HARDSWISH, EXP, SCALE as
// x * alpha + beta) or a binary op (ADD, SUB, MUL, DIV, MAXIMUM) with src1
// per channel (C contiguous floats) or of the output's shape (contiguous).
#define CPU_POST_MAX 8
typedef struct cpu_post {
    enum op op;
    float alpha, beta;
    const tensor *src1;
    bool per_channel;
} cpu_post;
// CONV2D / CONV_TRANSPOSE2D with an optional bias, then the post-ops, in one primitive
int cpu_conv2d_post(cpu_ctx *c, const graph_node *n, const tensor *x, const tensor *w,
                    const tensor *bias, int npost, const cpu_post *post, tensor *out);
// MAX_POOL2D, AVG_POOL2D
int cpu_pool2d(cpu_ctx *c, const graph_node *n, const tensor *x, tensor *out);

// data movement (cpu_gather.c)
// x (N, C, H, W) -> (N, C, H*s, W*s), any dtype
int cpu_upsample_nearest(cpu_ctx *c, const tensor *x, int64_t scale, tensor *out);
// table (V, D), indices (...) i32/i64 -> (..., D)
int cpu_embedding(cpu_ctx *c, const tensor *table, const tensor *idx, tensor *out);
int cpu_concat(cpu_ctx *c, int axis, int nin, const tensor *const *in, tensor *out);
