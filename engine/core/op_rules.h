// op_rules: numeric rules that the fp64 reference (engine/ref/ref.c), the
// eager kernels of every backend and the compiled mode must apply
// identically, kept in one place so they cannot drift apart. The reference
// includes this header, never a backend's.
//
//   uint64_t key = op_dropout_key(n->ia[0], step);    // stream id, training step
//   uint32_t thr = op_dropout_threshold(n->fa[0]);    // p
//   y[i] = op_dropout_keep(key, i, thr) ? x[i] / (1 - p) : 0;
//
//   uint64_t nk = op_noise_key(n->ia[0], step);       // stream id, training step
//   y[i] = x[i] + (float)n->fa[0] * op_noise_normal(nk, i);   // std fa0
//
//   double v = op_cast_value(DT_I32, -2.7);           // -2: what a cast stores
#pragma once
#include "dtype.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

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
static inline OP_RULES_HD uint64_t op_mix64(uint64_t z) {
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

// Noise is keyed apart from dropout, so a noise op and a dropout given one
// stream id draw unrelated values; a new draw every step, as dropout's.
static inline uint64_t op_noise_key(int64_t stream, uint64_t step) {
    return op_mix64(op_dropout_key(stream, step) ^ 0x6a09e667f3bcc909ull);
}

// A 32-bit hash (Wellons' lowbias32): two rounds per draw keep the noise
// kernel in 32-bit vector lanes (a 64-bit multiply has no AVX2 instruction).
static inline OP_RULES_HD uint32_t op_hash32(uint32_t x) {
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    return x ^ (x >> 16);
}

// ln x for a float x in (0, 1]: x = 2^e m with m in [sqrt(1/2), sqrt(2)),
// ln m = 2 atanh(s), s = (m - 1) / (m + 1), by its series to s^11 (1e-6
// absolute); branch-free, so the loop vectorizes.
static inline OP_RULES_HD float op_ln_unit(float x) {
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    int32_t e = (int32_t)((b >> 23) & 0xff) - 127;
    b = (b & 0x7fffffu) | 0x3f800000u;
    float m;
    memcpy(&m, &b, sizeof m);
    int32_t big = m > 1.41421356f;
    m *= 1.0f - 0.5f * (float)big;
    e += big;
    float t = m - 1.0f, s = t / (2.0f + t), s2 = s * s;
    float p = s2 * (0.6666667f + s2 * (0.4f + s2 * (0.2857143f + s2 * (0.2222222f +
                                                                       s2 * 0.1818182f))));
    return (float)e * 0.6931472f + 2.0f * s + s * p;
}

// cos(2 pi u) for u in [0, 1): the quadrant k, then cos or sin of
// |r| <= pi / 4 by their Taylor series (1e-7 absolute); branch-free.
static inline OP_RULES_HD float op_cos_turn(float u) {
    int32_t k = (int32_t)(u * 4.0f + 0.5f);
    float r = (u - (float)k * 0.25f) * 6.2831853f, r2 = r * r;
    float c = 1.0f + r2 * (-0.5f + r2 * (1.0f / 24 + r2 * (-1.0f / 720 + r2 * (1.0f / 40320))));
    float sn = r * (1.0f + r2 * (-1.0f / 6 + r2 * (1.0f / 120 + r2 * (-1.0f / 5040 +
                                                                       r2 * (1.0f / 362880)))));
    float odd = (float)(k & 1), sign = 1.0f - 2.0f * (float)((k + 1) >> 1 & 1);
    return sign * (c + odd * (sn - c));
}

// A standard normal draw for element i, by Box-Muller on two 24-bit
// uniforms hashed from (key, i): u1 in (0, 1], so |z| <= 5.77. Float
// arithmetic throughout, vectorizable, so that noise costs what
// PyTorch's vectorized normal_ costs (about 5 ns an element on one core
// here) and every executor draws the same values.
static inline OP_RULES_HD float op_noise_normal(uint64_t key, uint64_t i) {
    uint32_t h1 = op_hash32(((uint32_t)i * 0x9e3779b9u) ^ (uint32_t)key ^
                            (uint32_t)(i >> 32) * 0x85ebca6bu);
    uint32_t h2 = op_hash32(h1 ^ (uint32_t)(key >> 32));
    float u1 = (float)(int32_t)((h1 >> 8) + 1) * (1.0f / 16777216.0f);
    float u2 = (float)(int32_t)(h2 >> 8) * (1.0f / 16777216.0f);
    return sqrtf(-2.0f * op_ln_unit(u1)) * op_cos_turn(u2);
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
