// cuda_quant.cuh: the weight-only quantized kernels (W8A16, W4A16 and
// their f32 forms), device code only, self-contained after cuda_prelude's
// text, so that the eager kernels (cuda_quant.cu includes it) and NVRTC
// (tests/test_quant_nvrtc.c compiles the embedded text for sm_80 and sm_90)
// build the same source.
//
//   tq_args a = {x, q, scales, bias, y, M, N, K, group, 4, 1, 1, 0, 1};
//   tq_gemv<<<(N + 7) / 8, 256>>>(a);          // M <= TQ_GEMV_M: a warp per output row
//   tq_gemv4<<<(N + 7) / 8, 256>>>(a);         // the same, int4 with K, group % 8 == 0
//   tq_tiled<<<dim3(N/16, M/16), dim3(16, 16)>>>(a); // larger M, 16x16 output tiles
//   tq_dequant<<<blocks, 256>>>(a);            // y (N, K) f32 = q * scale
//
// Storage as engine/backend/cpu/cpu_quant.h: int8 q (N, K); int4 q
// (N, ceil(K/2)) bytes, low nibble first, each value + 8; scales
// (N, ceil(K/group)) f32 or f16. Activations f32 or f16 (stored as
// uint16_t), products and sums in f32.
#pragma once

#define TQ_GEMV_M 8
#define TQ_T      16
#define TQ_KT     32

struct tq_args {
    const void *x;    // (M, K) activations
    const uint8_t *q; // the quantized weight
    const void *s;    // scales
    const void *bias; // (N) or NULL
    void *y;          // (M, N); dequant: (N, K) f32
    long long M, N, K, group;
    int bits, x_half, s_half, b_half, y_half;
};

TC_DEV float tq_ld(const void *p, long long i, int half) {
    return half ? tc_h2f(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

TC_DEV void tq_st(void *p, long long i, int half, float v) {
    if (half)
        ((uint16_t *)p)[i] = tc_f2h(v);
    else
        ((float *)p)[i] = v;
}

// Element (n, k) of the dequantized weight.
TC_DEV float tq_w(const tq_args &a, long long n, long long k) {
    long long G = (a.K + a.group - 1) / a.group;
    float s = tq_ld(a.s, n * G + k / a.group, a.s_half);
    int v;
    if (a.bits == 8) {
        v = ((const signed char *)a.q)[n * a.K + k];
    } else {
        unsigned b = a.q[n * ((a.K + 1) / 2) + k / 2];
        v = (int)(((k & 1) ? b >> 4 : b) & 15u) - 8;
    }
    return (float)v * s;
}

extern "C" __global__ void tq_dequant(const tq_args a) {
    long long total = a.N * a.K;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x)
        ((float *)a.y)[i] = tq_w(a, i / a.K, i % a.K);
}

// A GEMV warp's sums of column n (acc: each lane's, a row of x each) added
// up across the warp and stored by lane 0, with the bias.
TC_DEV void tq_gemv_store(const tq_args &a, const float *acc, long long n, int lane) {
#pragma unroll
    for (int m = 0; m < TQ_GEMV_M; m++) {
        float v = acc[m];
        for (int off = 16; off > 0; off /= 2)
            v += __shfl_down_sync(0xffffffffu, v, off);
        if (lane == 0 && m < a.M)
            tq_st(a.y, m * a.N + n, a.y_half, v + (a.bias ? tq_ld(a.bias, n, a.b_half) : 0.0f));
    }
}

// A warp per output column n: lanes stride over K, every row of x (M <=
// TQ_GEMV_M) accumulates in registers, then a shuffle reduction.
extern "C" __global__ void tq_gemv(const tq_args a) {
    long long n = blockIdx.x * (long long)(blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (n >= a.N)
        return;
    float acc[TQ_GEMV_M];
#pragma unroll
    for (int m = 0; m < TQ_GEMV_M; m++)
        acc[m] = 0.0f;
    for (long long k = lane; k < a.K; k += 32) {
        float w = tq_w(a, n, k);
#pragma unroll
        for (int m = 0; m < TQ_GEMV_M; m++)
            if (m < a.M)
                acc[m] += tq_ld(a.x, m * a.K + k, a.x_half) * w;
    }
    tq_gemv_store(a, acc, n, lane);
}

// int4 with K and the group multiples of 8 (tq_gemv4_fits): as tq_gemv, a
// warp per output column, but a lane takes 8 values at a time, one 32-bit
// load of 4 bytes (value 8c + j in bits 4j .. 4j + 3, low nibble first), and
// one scale (the 8 lie in one group), the 8 products summed before it is
// applied; 32-bit index math (tq_gemv's 64-bit divisions an element cost
// more than the products at decode's sizes).
static __host__ __device__ __forceinline__ bool tq_gemv4_fits(const tq_args &a) {
    return a.bits == 4 && a.K % 8 == 0 && a.group % 8 == 0 && a.K <= 0x7fffffffLL &&
           ((unsigned long long)a.q & 3ull) == 0 && // the rows' 32-bit loads
           (a.N * ((a.K + a.group - 1) / a.group)) <= 0x7fffffffLL;
}

extern "C" __global__ void tq_gemv4(const tq_args a) {
    long long n = blockIdx.x * (long long)(blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (n >= a.N)
        return;
    int K = (int)a.K, chunks = K / 8, group = (int)a.group, G = (K + group - 1) / group;
    const unsigned *row = (const unsigned *)(a.q + n * (a.K / 2));
    float acc[TQ_GEMV_M];
#pragma unroll
    for (int m = 0; m < TQ_GEMV_M; m++)
        acc[m] = 0.0f;
    for (int c = lane; c < chunks; c += 32) {
        unsigned word = row[c];
        int k0 = 8 * c;
        float s = tq_ld(a.s, n * G + k0 / group, a.s_half);
        float w[8];
#pragma unroll
        for (int j = 0; j < 8; j++)
            w[j] = (float)((int)((word >> (4 * j)) & 15u) - 8);
#pragma unroll
        for (int m = 0; m < TQ_GEMV_M; m++)
            if (m < a.M) {
                float d = 0.0f;
#pragma unroll
                for (int j = 0; j < 8; j++)
                    d += tq_ld(a.x, (long long)m * K + k0 + j, a.x_half) * w[j];
                acc[m] += d * s;
            }
    }
    tq_gemv_store(a, acc, n, lane);
}

// 16x16 output tiles; x and the dequantized weight staged through shared
// memory TQ_KT values of K at a time.
extern "C" __global__ void tq_tiled(const tq_args a) {
    __shared__ float xs[TQ_T][TQ_KT + 1];
    __shared__ float ws[TQ_T][TQ_KT + 1];
    int tx = threadIdx.x, ty = threadIdx.y, t = ty * TQ_T + tx;
    long long m0 = blockIdx.y * (long long)TQ_T, n0 = blockIdx.x * (long long)TQ_T;
    float acc = 0.0f;
    for (long long k0 = 0; k0 < a.K; k0 += TQ_KT) {
        for (int i = t; i < TQ_T * TQ_KT; i += TQ_T * TQ_T) {
            int r = i / TQ_KT, kk = i % TQ_KT;
            long long k = k0 + kk;
            xs[r][kk] = m0 + r < a.M && k < a.K ? tq_ld(a.x, (m0 + r) * a.K + k, a.x_half) : 0.0f;
            ws[r][kk] = n0 + r < a.N && k < a.K ? tq_w(a, n0 + r, k) : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < TQ_KT; kk++)
            acc += xs[ty][kk] * ws[tx][kk];
        __syncthreads();
    }
    long long m = m0 + ty, n = n0 + tx;
    if (m < a.M && n < a.N)
        tq_st(a.y, m * a.N + n, a.y_half, acc + (a.bias ? tq_ld(a.bias, n, a.b_half) : 0.0f));
}
