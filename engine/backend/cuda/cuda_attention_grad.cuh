// cuda_attention_grad.cuh: fused attention's backward (ops.def
// ATTENTION_GRAD) as device code only, as cuda_attention.cuh: the nvcc
// build includes it from cuda_attention_grad.cu, and the build embeds it as
// cuda_attention_grad_text, which tests/test_attention.c puts after the
// prelude's and cuda_attention.cuh's texts and compiles with NVRTC.
//
//   tc_attg_args a = {...};                 // as tc_att_args, plus y, dy, lse, dd, dq, dk, dv
//   tc_attg_rows_f32<<<rows_grid, TC_ATT_ROWS * 32, 0, s>>>(a);       // lse, dd
//   tc_attg_keys_f32<<<keys_grid, TC_ATT_ROWS * 32, smem, s>>>(a);    // dk, dv
//   tc_attg_queries_f32<<<rows_grid, TC_ATT_ROWS * 32, smem, s>>>(a); // dq
//
// The CPU kernel's three passes (cpu_attention_grad.c), one warp per row as
// the forward: (1) a warp per query recomputes its row's log-sum-exp with
// the online max and sum, and dd = rowsum(dy * y); (2) a warp per key walks
// every query of its kv group's heads, staged TC_ATT_ROWS at a time in
// shared memory, and keeps dk and dv in registers across its lanes; (3) a
// warp per query walks the keys, staged likewise, and keeps dq. A score
// p = e^(s - lse) is recomputed in each pass that needs it; no (T, S) matrix
// exists and no two warps write the same row.
#pragma once
#ifndef __CUDACC_RTC__ // under NVRTC the text follows cuda_attention.cuh's
#define TC_ATT_NO_KERNELS
#include "cuda_attention.cuh"
#endif

typedef struct tc_attg_args {
    tc_att_args f;      // the forward's operands; f.y unused
    const void *y, *dy; // (B, H, T, Dv), strides sy, sdy
    long long sy[4], sdy[4];
    float *lse, *dd;    // (B, H, T) f32 workspace
    void *dq, *dk, *dv; // contiguous, of q's dtype
} tc_attg_args;

template <typename E>
static __device__ __forceinline__ void tc_attg_st(void *p, long long i, float x) {
    if (sizeof(E) == 2)
        ((uint16_t *)p)[i] = tc_f2h(x);
    else
        ((float *)p)[i] = x;
}

static __device__ __forceinline__ long long tc_attg_len(const tc_att_args &a, long long b) {
    long long L = a.S;
    if (a.len)
        L = a.len_i64 ? ((const long long *)a.len)[b * a.len_stride]
                      : ((const int *)a.len)[b * a.len_stride];
    return L < 0 ? 0 : L > a.S ? a.S : L;
}

// The keys query t sees: [0, end).
static __device__ __forceinline__ long long tc_attg_end(const tc_att_args &a, long long L,
                                                        long long t) {
    long long e = a.causal ? L - a.T + t + 1 : L;
    return e < 0 ? 0 : e > L ? L : e;
}

// The bias at (b, h, t, s), or 0.
static __device__ __forceinline__ float tc_attg_bias(const tc_att_args &a, long long b, long long h,
                                                     long long t, long long s) {
    if (!a.bias)
        return 0.0f;
    long long o = b * a.sb[0] + h * a.sb[1] + t * a.sb[2] + s * a.sb[3];
    return a.bias_f16 ? tc_h2f(((const uint16_t *)a.bias)[o]) : ((const float *)a.bias)[o];
}

// A warp's dot product of lane-spread x (TC_ATT_PER a lane) with row r.
static __device__ __forceinline__ float tc_attg_dot(const float *x, const float *r, long long n) {
    int lane = threadIdx.x % 32;
    float part = 0.0f;
    for (int i = 0; i < TC_ATT_PER; i++) {
        long long d = lane + 32 * i;
        if (d < n)
            part += x[i] * r[d];
    }
    return tc_att_warp_sum(part);
}

// Pass 1: a warp per query row.
template <typename E> static __device__ void tc_attg_rows(const tc_attg_args &g) {
    const tc_att_args &a = g.f;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    long long bh = blockIdx.y, b = bh / a.H, h = bh % a.H, kv = h / (a.H / a.KVH);
    long long t = (long long)blockIdx.x * TC_ATT_ROWS + warp;
    if (t >= a.T)
        return;
    long long L = tc_attg_len(a, b), end = tc_attg_end(a, L, t);
    const E *q = (const E *)a.q, *k = (const E *)a.k;
    const E *y = (const E *)g.y, *dy = (const E *)g.dy;
    float m = -INFINITY, l = 0.0f, dd = 0.0f;
    for (long long s0 = 0; s0 < end; s0 += 32) {
        float mine = -INFINITY; // lane c: key s0 + c's score
        for (int c = 0; c < 32 && s0 + c < end; c++) {
            float part = 0.0f;
            for (long long d = lane; d < a.D; d += 32)
                part += tc_att_ld(q, b * a.sq[0] + h * a.sq[1] + t * a.sq[2] + d * a.sq[3]) *
                        tc_att_ld(k, b * a.sk[0] + kv * a.sk[1] + (s0 + c) * a.sk[2] + d * a.sk[3]);
            float sc = tc_att_warp_sum(part) * a.scale;
            if (lane == c)
                mine = sc + tc_attg_bias(a, b, h, t, s0 + c);
        }
        float mx = fmaxf(m, tc_att_warp_max(mine));
        if (mx == -INFINITY)
            continue;
        l = l * expf(m - mx) + tc_att_warp_sum(mine == -INFINITY ? 0.0f : expf(mine - mx));
        m = mx;
    }
    for (long long e = lane; e < a.Dv; e += 32)
        dd += tc_att_ld(y, b * g.sy[0] + h * g.sy[1] + t * g.sy[2] + e * g.sy[3]) *
              tc_att_ld(dy, b * g.sdy[0] + h * g.sdy[1] + t * g.sdy[2] + e * g.sdy[3]);
    dd = tc_att_warp_sum(dd);
    if (lane == 0) {
        long long r = bh * a.T + t;
        g.lse[r] = l > 0.0f ? m + logf(l) : -INFINITY;
        g.dd[r] = dd;
    }
}

// Pass 2: a warp per key; queries and their dy staged TC_ATT_ROWS at a time.
template <typename E> static __device__ void tc_attg_keys(const tc_attg_args &g) {
    const tc_att_args &a = g.f;
    extern __shared__ float tc_attg_smem[];
    float *qs = tc_attg_smem;            // (TC_ATT_ROWS, D)
    float *dys = qs + TC_ATT_ROWS * a.D; // (TC_ATT_ROWS, Dv): dy rows
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    long long bk = blockIdx.y, b = bk / a.KVH, kv = bk % a.KVH, G = a.H / a.KVH;
    long long s = (long long)blockIdx.x * TC_ATT_ROWS + warp;
    long long L = tc_attg_len(a, b);
    const E *q = (const E *)a.q, *k = (const E *)a.k, *v = (const E *)a.v, *dy = (const E *)g.dy;
    float kr[TC_ATT_PER], vr[TC_ATT_PER], dk[TC_ATT_PER], dv[TC_ATT_PER];
    for (int i = 0; i < TC_ATT_PER; i++) {
        long long d = lane + 32 * i;
        bool in = s < a.S;
        kr[i] = in && d < a.D ? tc_att_ld(k, b * a.sk[0] + kv * a.sk[1] + s * a.sk[2] + d * a.sk[3])
                              : 0.0f;
        vr[i] = in && d < a.Dv
                    ? tc_att_ld(v, b * a.sv[0] + kv * a.sv[1] + s * a.sv[2] + d * a.sv[3])
                    : 0.0f;
        dk[i] = dv[i] = 0.0f;
    }
    for (long long h = kv * G; h < (kv + 1) * G; h++)
        for (long long t0 = 0; t0 < a.T; t0 += TC_ATT_ROWS) {
            int nq = (int)(a.T - t0 < TC_ATT_ROWS ? a.T - t0 : TC_ATT_ROWS);
            __syncthreads(); // the previous rows are used up
            for (long long i = threadIdx.x; i < (long long)nq * a.D; i += blockDim.x) {
                long long r = i / a.D, d = i % a.D;
                qs[i] = tc_att_ld(q, b * a.sq[0] + h * a.sq[1] + (t0 + r) * a.sq[2] + d * a.sq[3]);
            }
            for (long long i = threadIdx.x; i < (long long)nq * a.Dv; i += blockDim.x) {
                long long r = i / a.Dv, e = i % a.Dv;
                dys[i] =
                    tc_att_ld(dy, b * g.sdy[0] + h * g.sdy[1] + (t0 + r) * g.sdy[2] + e * g.sdy[3]);
            }
            __syncthreads();
            if (s >= a.S)
                continue;
            for (int r = 0; r < nq; r++) {
                long long t = t0 + r, row = (b * a.H + h) * a.T + t;
                if (s >= tc_attg_end(a, L, t) || g.lse[row] == -INFINITY)
                    continue; // uniform across the warp
                float sc =
                    tc_attg_dot(kr, qs + r * a.D, a.D) * a.scale + tc_attg_bias(a, b, h, t, s);
                float p = expf(sc - g.lse[row]);
                float dp = tc_attg_dot(vr, dys + r * a.Dv, a.Dv), dsv = p * (dp - g.dd[row]);
                for (int i = 0; i < TC_ATT_PER; i++) {
                    long long d = lane + 32 * i;
                    if (d < a.Dv)
                        dv[i] += p * dys[r * a.Dv + d];
                    if (d < a.D)
                        dk[i] += dsv * qs[r * a.D + d];
                }
            }
        }
    if (s >= a.S)
        return;
    long long row = (b * a.KVH + kv) * a.S + s;
    for (int i = 0; i < TC_ATT_PER; i++) {
        long long d = lane + 32 * i;
        if (d < a.D)
            tc_attg_st<E>(g.dk, row * a.D + d, dk[i] * a.scale);
        if (d < a.Dv)
            tc_attg_st<E>(g.dv, row * a.Dv + d, dv[i]);
    }
}

// Pass 3: a warp per query; keys and values staged TC_ATT_ROWS at a time.
template <typename E> static __device__ void tc_attg_queries(const tc_attg_args &g) {
    const tc_att_args &a = g.f;
    extern __shared__ float tc_attg_smem[];
    float *ks = tc_attg_smem;           // (TC_ATT_ROWS, D)
    float *vs = ks + TC_ATT_ROWS * a.D; // (TC_ATT_ROWS, Dv)
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    long long bh = blockIdx.y, b = bh / a.H, h = bh % a.H, kv = h / (a.H / a.KVH);
    long long t = (long long)blockIdx.x * TC_ATT_ROWS + warp;
    long long L = tc_attg_len(a, b);
    long long t_last = (long long)blockIdx.x * TC_ATT_ROWS + TC_ATT_ROWS - 1;
    long long end_block = tc_attg_end(a, L, t_last < a.T ? t_last : a.T - 1);
    long long end = t < a.T ? tc_attg_end(a, L, t) : 0, row = bh * a.T + t;
    float lse = t < a.T ? g.lse[row] : -INFINITY, dd = t < a.T ? g.dd[row] : 0.0f;
    const E *q = (const E *)a.q, *k = (const E *)a.k, *v = (const E *)a.v, *dy = (const E *)g.dy;
    float qr[TC_ATT_PER], dyr[TC_ATT_PER], dq[TC_ATT_PER];
    for (int i = 0; i < TC_ATT_PER; i++) {
        long long d = lane + 32 * i;
        qr[i] = t < a.T && d < a.D
                    ? tc_att_ld(q, b * a.sq[0] + h * a.sq[1] + t * a.sq[2] + d * a.sq[3])
                    : 0.0f;
        dyr[i] = t < a.T && d < a.Dv
                     ? tc_att_ld(dy, b * g.sdy[0] + h * g.sdy[1] + t * g.sdy[2] + d * g.sdy[3])
                     : 0.0f;
        dq[i] = 0.0f;
    }
    for (long long s0 = 0; s0 < end_block; s0 += TC_ATT_ROWS) {
        int nk = (int)(end_block - s0 < TC_ATT_ROWS ? end_block - s0 : TC_ATT_ROWS);
        __syncthreads();
        for (long long i = threadIdx.x; i < (long long)nk * a.D; i += blockDim.x) {
            long long c = i / a.D, d = i % a.D;
            ks[i] = tc_att_ld(k, b * a.sk[0] + kv * a.sk[1] + (s0 + c) * a.sk[2] + d * a.sk[3]);
        }
        for (long long i = threadIdx.x; i < (long long)nk * a.Dv; i += blockDim.x) {
            long long c = i / a.Dv, e = i % a.Dv;
            vs[i] = tc_att_ld(v, b * a.sv[0] + kv * a.sv[1] + (s0 + c) * a.sv[2] + e * a.sv[3]);
        }
        __syncthreads();
        if (lse == -INFINITY)
            continue;
        for (int c = 0; c < nk && s0 + c < end; c++) {
            float sc =
                tc_attg_dot(qr, ks + c * a.D, a.D) * a.scale + tc_attg_bias(a, b, h, t, s0 + c);
            float p = expf(sc - lse);
            float dsv = p * (tc_attg_dot(dyr, vs + c * a.Dv, a.Dv) - dd);
            for (int i = 0; i < TC_ATT_PER; i++) {
                long long d = lane + 32 * i;
                if (d < a.D)
                    dq[i] += dsv * ks[c * a.D + d];
            }
        }
    }
    if (t >= a.T)
        return;
    for (int i = 0; i < TC_ATT_PER; i++) {
        long long d = lane + 32 * i;
        if (d < a.D)
            tc_attg_st<E>(g.dq, row * a.D + d, dq[i] * a.scale);
    }
}

#define TC_ATTG_KERNELS(suffix, E)                                                                 \
    extern "C" __global__ void __launch_bounds__(TC_ATT_ROWS * 32)                                 \
        tc_attg_rows_##suffix(tc_attg_args g) {                                                    \
        tc_attg_rows<E>(g);                                                                        \
    }                                                                                              \
    extern "C" __global__ void __launch_bounds__(TC_ATT_ROWS * 32)                                 \
        tc_attg_keys_##suffix(tc_attg_args g) {                                                    \
        tc_attg_keys<E>(g);                                                                        \
    }                                                                                              \
    extern "C" __global__ void __launch_bounds__(TC_ATT_ROWS * 32)                                 \
        tc_attg_queries_##suffix(tc_attg_args g) {                                                 \
        tc_attg_queries<E>(g);                                                                     \
    }
TC_ATTG_KERNELS(f32, float)
TC_ATTG_KERNELS(f16, uint16_t)
