// cuda_prelude: device code shared by the eager CUDA kernels (the .cu files
// include it) and the generated kernels (codegen_cuda puts its text, embedded
// at build time, at the top of every translation unit NVRTC compiles), so
// eager and compiled mode compute every op with the same expressions.
//
//   float x = tc_h2f(p[i]);                 // f16 storage (uint16_t) to f32
//   p[i] = tc_f2h(tc_f_gelu(x, 0, 0));      // round to nearest even (core/pointwise.h)
//   float s = tc_block_sum(v, shared);      // every thread gets the block's sum
//
// The math is CUDA's libdevice (expf, logf, tanhf, erfcf: within 2 ulp),
// never the fast intrinsics: neither side is built with --use_fast_math.
// The pointwise formulas are core/pointwise.h's, the CPU kernels' too;
// maximum and max keep NaN. Dropout uses
// core/op_rules.h's counter-based mask bit for bit. No headers are needed under
// NVRTC: the integer types are defined here.
#pragma once

#ifdef __CUDACC_RTC__
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
#else
#include <stdint.h>
#endif
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#ifndef NAN
#define NAN __int_as_float(0x7fffffff)
#endif

#define TC_DEV static __device__ __forceinline__

TC_DEV float tc_h2f(uint16_t h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

TC_DEV uint16_t tc_f2h(float f) {
    uint16_t h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

// Phi(x) = erfc(-x / sqrt 2) / 2, accurate on both tails
TC_DEV float tc_normal_cdf(float x) { return 0.5f * erfcf(-0.70710678118654752f * x); }

// The dialect of core/pointwise.h, the pointwise formulas every executor
// shares: included here by the .cu files; codegen_cuda puts its text right
// after this prelude's for NVRTC, which has no include path.
#define TC_FN   TC_DEV
#define TC_EXP  expf
#define TC_LOG  logf
#define TC_TANH tanhf
#define TC_NCDF tc_normal_cdf
#define TC_SQRT sqrtf
#define TC_FABS fabsf
#ifndef __CUDACC_RTC__
#include "core/pointwise.h"
#endif

// NaN in either gives NaN, as torch.maximum
TC_DEV float tc_maximum(float x, float y) { return (x != x || x > y) ? x : y; }

// op_rules.h's dropout mask
TC_DEV uint64_t tc_mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

TC_DEV bool tc_dropout_keep(uint64_t key, uint64_t i, uint32_t threshold) {
    return (uint32_t)(tc_mix64(key ^ (i * 0x9e3779b97f4a7c15ull)) >> 40) >= threshold;
}

// ---- reductions across a warp and a block -----------------------------------
// Block reductions need 32 floats of shared memory and every thread of the
// block; every thread gets the result.

TC_DEV float tc_warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

TC_DEV float tc_warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v = tc_maximum(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

TC_DEV float tc_block_sum(float v, float *sh) {
    v = tc_warp_sum(v);
    int w = threadIdx.x >> 5, l = threadIdx.x & 31, nw = (blockDim.x + 31) >> 5;
    __syncthreads(); // sh may still be read by a previous reduction
    if (l == 0)
        sh[w] = v;
    __syncthreads();
    return tc_warp_sum(l < nw ? sh[l] : 0.0f);
}

TC_DEV float tc_block_max(float v, float *sh) {
    v = tc_warp_max(v);
    int w = threadIdx.x >> 5, l = threadIdx.x & 31, nw = (blockDim.x + 31) >> 5;
    __syncthreads();
    if (l == 0)
        sh[w] = v;
    __syncthreads();
    return tc_warp_max(l < nw ? sh[l] : -INFINITY);
}
