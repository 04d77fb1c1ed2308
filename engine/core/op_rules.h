// op_rules: numeric rules that the fp64 reference (engine/ref/ref.c), the
// eager kernels of every backend and the compiled mode must apply
// identically, kept in one place so they cannot drift apart. The reference
// includes this header, never a backend's.
//
//   uint64_t key = op_dropout_key(n->ia[0], step);    // stream id, training step
//   uint32_t thr = op_dropout_threshold(n->fa[0]);    // p
//   y[i] = op_dropout_keep(key, i, thr) ? x[i] / (1 - p) : 0;
//
//   double v = op_cast_value(DT_I32, -2.7);           // -2: what a cast stores
#pragma once
#include "dtype.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __CUDACC__
#define OP_RULES_HD __host__ __device__
#else
#define OP_RULES_HD
#endif

// log(e^a + e^b) with -inf for an impossible term: the log-space sum of the
// CTC recursions (the CPU and CUDA kernels)
static inline OP_RULES_HD double op_logaddexp(double a, double b) {
    if (a == -INFINITY)
        return b;
    if (b == -INFINITY)
        return a;
    double m = a > b ? a : b;
    return m + log(exp(a - m) + exp(b - m));
}

// splitmix64's finalizer: a bijective 64-bit mix, counter-based, so any
// element's mask bit is computed alone (threads and vector lanes need no
// shared generator state).
static inline uint64_t op_mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// A mask per (stream, step): the same op draws a new mask every training
// step, and the same step always draws the same one (eager, compiled and the
// reference agree bit for bit).
static inline uint64_t op_dropout_key(int64_t stream, uint64_t step) {
    return op_mix64(op_mix64((uint64_t)stream + 0x9e3779b97f4a7c15ull) + step);
}

// p as a 24-bit threshold: element i is dropped when its 24-bit draw is
// below it, so p = 0 keeps everything and p = 1 drops everything.
static inline uint32_t op_dropout_threshold(double p) {
    if (!(p > 0))
        return 0;
    if (p >= 1)
        return 1u << 24;
    return (uint32_t)(p * 16777216.0);
}

static inline bool op_dropout_keep(uint64_t key, uint64_t i, uint32_t threshold) {
    return (uint32_t)(op_mix64(key ^ (i * 0x9e3779b97f4a7c15ull)) >> 40) >= threshold;
}

// The value a cast to t stores, as a double: floats round (f16 and bf16 to
// nearest even), integers truncate toward zero as C and PyTorch do, saturating at
// the type's range and taking NaN to 0 (C leaves those undefined), and bool
// is v != 0.
static inline double op_cast_value(enum dtype t, double v) {
    switch (t) {
    case DT_F32: return (float)v;
    case DT_F16: return dtype_f16_to_f32(dtype_f32_to_f16((float)v));
    case DT_BF16: return dtype_bf16_to_f32(dtype_f32_to_bf16((float)v));
    case DT_I32:
        if (!(v == v))
            return 0;
        return v >= 2147483647.0    ? 2147483647.0
               : v <= -2147483648.0 ? -2147483648.0
                                    : (double)(int32_t)v;
    case DT_I64:
        if (!(v == v))
            return 0;
        if (v >= 9223372036854775807.0)
            return 9223372036854775807.0;
        return v <= -9223372036854775808.0 ? -9223372036854775808.0 : (double)(int64_t)v;
    case DT_BOOL: return v != 0;
    default: return v;
    }
}
