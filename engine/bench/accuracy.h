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
#pragma once
#include "tensor.h"

#include <stdbool.h>

// rel_l2 limit for fp32 inference against the fp64 reference
#define BENCH_TOL_FP32 1e-4
// steps above this many FLOPs skip the reference check: the naive fp64
// interpreter would take minutes
#define BENCH_ACCURACY_FLOPS_LIMIT 2e10

#define BENCH_MAX_OUTPUTS 8

typedef struct bench_accuracy_out {
    double rel_l2, max_abs, rmse;
} bench_accuracy_out;

typedef struct bench_accuracy {
    bool checked;
    char reason[160]; // why not checked
    double rel_l2, max_abs, rmse;
    int noutputs;
    bench_accuracy_out outputs[BENCH_MAX_OUTPUTS];
} bench_accuracy;

// x: any dtype and strides; ref: numel(x) doubles in row-major order.
void bench_accuracy_compare(const tensor *x, const double *ref, bench_accuracy_out *o);
void bench_accuracy_merge(bench_accuracy *acc, const bench_accuracy_out *o);
bool bench_accuracy_passes(const bench_accuracy *acc, double tol);
