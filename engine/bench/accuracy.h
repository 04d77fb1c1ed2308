// accuracy: how far an executor's outputs are from the fp64 reference.
//
//   bench_accuracy_out o;
//   bench_accuracy_compare(eager_out, ref_out, &o);   // one output tensor
//   bench_accuracy acc = {0};
//   bench_accuracy_merge(&acc, &o);                    // worst over outputs
//   if (!bench_accuracy_passes(&acc, BENCH_TOL_FP32)) ... status fail_accuracy
//
// Per output: relative L2 error ||x - ref|| / ||ref|| (when ||ref|| is 0,
// 0 if x is all zeros too, else infinity), the largest absolute error and
// the root mean square error. A NaN anywhere makes the figures NaN, and NaN
// never passes. The merged figures are the worst over outputs.
//
// A compiled-family mode is judged as PyTorch's harness does, output by
// output (bench_accuracy_vs_eager, bench_rule_apply): it passes when
// allclose(x, eager, rtol = tol, atol = tol); else when RMSE(x, fp64) <=
// k * RMSE(eager, fp64) + tol / 10, k = 2 (3 for outputs of fewer than 10
// elements); with no fp64 reference (above the FLOPs limit), when the cosine
// similarity of x and eager is at least 0.99. tol comes from a table by
// precision and workload (bench_tolerance).
//
// Eager itself is held to the reference: rel_l2 <= tol on every output;
// under mixed precision (cosine_fallback) an output whose rel_l2 is above
// tol still passes when its cosine similarity with fp64 is at least 0.99,
// PyTorch's fallback for AMP. The reference of an AMP graph is the model
// without autocast (graph_autocast).
#pragma once
#include "axes.h"
#include "core/tensor.h"
#include "results/results.h"

#include <stdbool.h>
#include <stdint.h>

// fp32 inference: eager's rel_l2 limit against fp64, and compiled's tol
#define BENCH_TOL_FP32 1e-4
// steps above this many FLOPs skip the reference check: the naive fp64
// interpreter would take minutes
#define BENCH_ACCURACY_FLOPS_LIMIT 2e10

// the cosine similarity PyTorch's harness accepts when a tolerance fails
#define BENCH_COSINE_MIN 0.99

// BENCH_MAX_OUTPUTS, bench_accuracy_out and bench_accuracy: results/results.h

enum bench_rule { BENCH_RULE_ALLCLOSE, BENCH_RULE_RMSE, BENCH_RULE_COSINE, BENCH_RULE_FAILED };

// One output of a compiled-family mode against eager's.
typedef struct bench_vs_eager {
    int64_t numel;
    double max_abs, rel_l2, cosine;
    bool allclose; // |x - e| <= tol + tol * |e| everywhere (torch.allclose), no NaN
} bench_vs_eager;

// x: any dtype and strides; ref: numel(x) doubles in row-major order.
void bench_accuracy_compare(const tensor *x, const double *ref, bench_accuracy_out *o);
void bench_accuracy_merge(bench_accuracy *acc, const bench_accuracy_out *o);
bool bench_accuracy_passes(const bench_accuracy *acc, double tol);

// PyTorch's tolerance: fp32 inference 1e-4, training 1e-2; amp 1e-3, 1e-2.
double bench_tolerance(enum bench_precision p, enum bench_workload w);
// x and eager: the same shape, any dtype and strides.
void bench_accuracy_vs_eager(const tensor *x, const tensor *eager, double tol, bench_vs_eager *o);
// The rule for one output; rmse and eager_rmse against fp64, NaN without the
// reference. BENCH_RULE_FAILED writes why into why.
enum bench_rule bench_rule_apply(const bench_vs_eager *o, double rmse, double eager_rmse,
                                 double tol, char *why, size_t cap);
const char *bench_rule_name(enum bench_rule r); // "allclose", "rmse", "cosine", "failed"
