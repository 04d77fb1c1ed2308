// cuda_pointwise.cuh: what the .cu files of the eager kernels share: f32 /
// f16 loads and stores, the elementwise iterator and its grid-stride launch.
//
//   pw_iter it = pw_make(out, 2, (const tensor *[]){a, b});  // cpu_iter's loop nest
//   pw_launch(c, it.n, my_functor{it}, "name<<<>>>");          // f(i) for i < n
//
// A functor's operator()(int64_t i) handles flat output element i and gets
// every operand's element offset from pw_offsets.
#pragma once
#include "cuda_prelude.cuh"
#include "cuda_rt.h"

#include <stdio.h>
#include <string.h>

#define PW_OPS   4
#define PW_BLOCK 256
#define PW_ITEMS 4

__device__ __forceinline__ float ldf(const float *p, int64_t i) { return p[i]; }
__device__ __forceinline__ float ldf(const uint16_t *p, int64_t i) { return tc_h2f(p[i]); }
__device__ __forceinline__ void stf(float *p, int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void stf(uint16_t *p, int64_t i, float v) { p[i] = tc_f2h(v); }

// A parameter vector (norm weights, statistics) of either float dtype.
__device__ __forceinline__ float ldv(const void *p, int is_f16, int64_t i) {
    return is_f16 ? tc_h2f(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

struct pw_iter {
    int ndim;
    int contig; // every operand is one unit-stride run: offsets are the index
    int small;  // every offset and the count fit in 32 bits
    int64_t n;
    int64_t shape[TENSOR_MAX_DIMS];
    int64_t st[PW_OPS][TENSOR_MAX_DIMS]; // elements
    char *data[PW_OPS];                  // operand 0 is the output
};

// out and the inputs broadcast to its shape (cpu_iter_init's rules).
pw_iter pw_make(tensor *out, int nin, const tensor *const *in);
int cuda_pw_fail(cuda_ctx *c, const char *what, enum dtype t);

template <int K>
__device__ __forceinline__ void pw_offsets(const pw_iter &it, int64_t i, int64_t *o) {
    if (it.contig) {
#pragma unroll
        for (int k = 0; k < K; k++)
            o[k] = i;
        return;
    }
#pragma unroll
    for (int k = 0; k < K; k++)
        o[k] = 0;
    if (it.small) {
        uint32_t r = (uint32_t)i;
        for (int d = it.ndim - 1; d >= 0; d--) {
            uint32_t s = (uint32_t)it.shape[d], q = r % s;
            r /= s;
#pragma unroll
            for (int k = 0; k < K; k++)
                o[k] += (int64_t)q * it.st[k][d];
        }
    } else {
        int64_t r = i;
        for (int d = it.ndim - 1; d >= 0; d--) {
            int64_t q = r % it.shape[d];
            r /= it.shape[d];
#pragma unroll
            for (int k = 0; k < K; k++)
                o[k] += q * it.st[k][d];
        }
    }
}

template <typename F> __global__ void __launch_bounds__(PW_BLOCK) pw_kernel(int64_t n, F f) {
    const int64_t step = (int64_t)gridDim.x * PW_BLOCK * PW_ITEMS;
    for (int64_t base = (int64_t)blockIdx.x * PW_BLOCK * PW_ITEMS; base < n; base += step) {
#pragma unroll
        for (int k = 0; k < PW_ITEMS; k++) {
            int64_t i = base + k * PW_BLOCK + threadIdx.x;
            if (i < n)
                f(i);
        }
    }
}

// Grid: one block per 1024 elements, at most 32 per multiprocessor (the
// grid-stride loop covers the rest).
template <typename F> static int pw_launch(cuda_ctx *c, int64_t n, const F &f, const char *name) {
    if (n <= 0)
        return 0;
    int64_t per = PW_BLOCK * PW_ITEMS, blocks = (n + per - 1) / per;
    int64_t cap = (int64_t)(c->sm_count > 0 ? c->sm_count : 1) * 32;
    if (blocks > cap)
        blocks = cap;
    pw_kernel<<<(unsigned)blocks, PW_BLOCK, 0, c->stream>>>(n, f);
    return cuda_launched(c, name, __FILE__, __LINE__);
}

// Records an error a kernel found (cuda_rt.h: reported by the next
// synchronization); the first one wins, later ones leave it alone.
static __device__ __forceinline__ void dev_error(cuda_dev_error *e, int code, long long v,
                                                 long long pos, long long lim) {
    if (atomicCAS(&e->code, 0, -1) == 0) {
        e->value = v;
        e->pos = pos;
        e->limit = lim;
        __threadfence();
        atomicExch(&e->code, code);
    }
}

// Threads for a kernel with one block per row of n elements.
static inline int row_threads(int64_t n) {
    int t = 32;
    while (t < 1024 && t < n)
        t *= 2;
    return t;
}
