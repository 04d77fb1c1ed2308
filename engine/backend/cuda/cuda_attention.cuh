// cuda_attention.cuh: the fused attention kernel (ops.def ATTENTION) as
// device code only, so that one text serves both builds: cuda_attention.cu
// includes it for the eager and compiled executors (nvcc), and the build
// embeds it as cuda_attention_text, which tests/test_attention.c puts after
// cuda_prelude.cuh's text and compiles with NVRTC for sm_80 and sm_90.
//
//   tc_att_args a = {...};          // pointers, sizes, strides (elements)
//   dim3 grid((T + TC_ATT_ROWS - 1) / TC_ATT_ROWS, B * H);
//   tc_attention_f32<<<grid, TC_ATT_ROWS * 32, smem, stream>>>(a);
//
// One block per (batch, head, tile of TC_ATT_ROWS queries), one warp per
// query: its lanes hold the scaled query and the output accumulator spread
// over the head dim (lane, lane + 32, ...), so D and Dv are at most
// TC_ATT_DMAX. The block stages tiles of a.tk keys and values in shared
// memory as f32; a warp scores its query against the tile (a warp reduction
// per key; lane c keeps key c's score), then updates its running max and sum
// and rescales its accumulator: online softmax in registers, no score matrix.
#pragma once

#define TC_ATT_ROWS 8   // queries (warps) per block
#define TC_ATT_DMAX 256 // head dims: 8 registers a lane
#define TC_ATT_PER  (TC_ATT_DMAX / 32)

typedef struct tc_att_args {
    const void *q, *k, *v, *bias, *len; // bias, len may be null
    void *y;                            // (B, H, T, Dv) contiguous
    long long B, H, KVH, T, S, D, Dv;
    long long sq[4], sk[4], sv[4], sb[4]; // strides; sb 0 along broadcast axes
    long long len_stride;                 // 0: one length for every batch row
    int len_i64, bias_f16, causal, tk;    // tk: keys per shared tile, at most 32
    float scale;
} tc_att_args;

#ifndef __CUDACC_RTC__
// Host side (cuda_attention.cu), for cuda_attention_grad.cu too: a's sizes,
// pointers, strides, masks and scale from the operands (y left unset);
// -1 with c->err set (naming `what`) on a bias dtype or head dim the
// kernels do not take. tc_att_strides: a 4-d operand's strides, 0 along
// broadcast axes, right-aligned.
int tc_att_fill(cuda_ctx *c, const char *what, const graph_node *n, const tensor *q,
                const tensor *k, const tensor *v, const tensor *bias, const tensor *len,
                tc_att_args *a);
void tc_att_strides(const tensor *t, long long *st);
#endif

template <typename E> static __device__ __forceinline__ float tc_att_ld(const E *p, long long i);
template <> __device__ __forceinline__ float tc_att_ld<float>(const float *p, long long i) {
    return p[i];
}
template <> __device__ __forceinline__ float tc_att_ld<uint16_t>(const uint16_t *p, long long i) {
    return tc_h2f(p[i]);
}

static __device__ __forceinline__ float tc_att_warp_sum(float x) {
    for (int o = 16; o > 0; o >>= 1)
        x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

static __device__ __forceinline__ float tc_att_warp_max(float x) {
    for (int o = 16; o > 0; o >>= 1)
        x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
    return x;
}

template <typename E> static __device__ void tc_attention_body(const tc_att_args &a) {
    extern __shared__ float tc_att_smem[];
    float *ks = tc_att_smem;                // (tk, D)
    float *vs = ks + (long long)a.tk * a.D; // (tk, Dv)
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    long long bh = blockIdx.y, b = bh / a.H, h = bh % a.H, g = h / (a.H / a.KVH);
    long long t = (long long)blockIdx.x * TC_ATT_ROWS + warp;
    long long L = a.S;
    if (a.len)
        L = a.len_i64 ? ((const long long *)a.len)[b * a.len_stride]
                      : ((const int *)a.len)[b * a.len_stride];
    L = L < 0 ? 0 : L > a.S ? a.S : L;
    // the block's last query sees the most keys
    long long t_last = (long long)blockIdx.x * TC_ATT_ROWS + TC_ATT_ROWS - 1;
    t_last = t_last < a.T ? t_last : a.T - 1;
    long long end_block = a.causal ? L - a.T + t_last + 1 : L;
    end_block = end_block < 0 ? 0 : end_block > L ? L : end_block;
    long long end = t < a.T ? (a.causal ? L - a.T + t + 1 : L) : 0;
    end = end < 0 ? 0 : end > L ? L : end;
    const E *q = (const E *)a.q, *k = (const E *)a.k, *v = (const E *)a.v;
    float qr[TC_ATT_PER], acc[TC_ATT_PER];
    for (int i = 0; i < TC_ATT_PER; i++) {
        long long d = lane + 32 * i;
        qr[i] = t < a.T && d < a.D
                    ? tc_att_ld(q, b * a.sq[0] + h * a.sq[1] + t * a.sq[2] + d * a.sq[3]) * a.scale
                    : 0.0f;
        acc[i] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    for (long long s0 = 0; s0 < end_block; s0 += a.tk) {
        int nk = (int)(end_block - s0 < a.tk ? end_block - s0 : a.tk);
        __syncthreads(); // the previous tile is used up
        for (long long i = threadIdx.x; i < (long long)nk * a.D; i += blockDim.x) {
            long long c = i / a.D, d = i % a.D;
            ks[i] = tc_att_ld(k, b * a.sk[0] + g * a.sk[1] + (s0 + c) * a.sk[2] + d * a.sk[3]);
        }
        for (long long i = threadIdx.x; i < (long long)nk * a.Dv; i += blockDim.x) {
            long long c = i / a.Dv, e = i % a.Dv;
            vs[i] = tc_att_ld(v, b * a.sv[0] + g * a.sv[1] + (s0 + c) * a.sv[2] + e * a.sv[3]);
        }
        __syncthreads();
        int vis = (int)(end - s0 < nk ? end - s0 : nk); // uniform across the warp
        if (vis <= 0)
            continue;
        float mine = -INFINITY; // lane c: key s0 + c's score
        for (int c = 0; c < vis; c++) {
            float part = 0.0f;
            for (int i = 0; i < TC_ATT_PER; i++) {
                long long d = lane + 32 * i;
                if (d < a.D)
                    part += qr[i] * ks[c * a.D + d];
            }
            float sc = tc_att_warp_sum(part);
            if (lane == c)
                mine = sc;
        }
        if (a.bias && lane < vis) {
            long long o = b * a.sb[0] + h * a.sb[1] + t * a.sb[2] + (s0 + lane) * a.sb[3];
            mine += a.bias_f16 ? tc_h2f(((const uint16_t *)a.bias)[o]) : ((const float *)a.bias)[o];
        }
        float mx = fmaxf(m, tc_att_warp_max(mine));
        if (mx == -INFINITY) // every key so far masked by the bias
            continue;
        float p = lane < vis ? expf(mine - mx) : 0.0f, corr = expf(m - mx);
        l = l * corr + tc_att_warp_sum(p);
        m = mx;
        for (int i = 0; i < TC_ATT_PER; i++)
            acc[i] *= corr;
        for (int c = 0; c < vis; c++) {
            float pc = __shfl_sync(0xffffffffu, p, c);
            for (int i = 0; i < TC_ATT_PER; i++) {
                long long e = lane + 32 * i;
                if (e < a.Dv)
                    acc[i] += pc * vs[c * a.Dv + e];
            }
        }
    }
    if (t >= a.T)
        return;
    float inv = l > 0.0f ? 1.0f / l : 0.0f;
    E *y = (E *)a.y + ((b * a.H + h) * a.T + t) * a.Dv;
    for (int i = 0; i < TC_ATT_PER; i++) {
        long long e = lane + 32 * i;
        if (e < a.Dv) {
            float r = acc[i] * inv;
            if (sizeof(E) == 2)
                ((uint16_t *)y)[e] = tc_f2h(r);
            else
                ((float *)y)[e] = r;
        }
    }
}

// the kernels themselves; cuda_attention_grad.cu takes only the device functions above
#ifndef TC_ATT_NO_KERNELS
extern "C" __global__ void __launch_bounds__(TC_ATT_ROWS * 32) tc_attention_f32(tc_att_args a) {
    tc_attention_body<float>(a);
}

extern "C" __global__ void __launch_bounds__(TC_ATT_ROWS * 32) tc_attention_f16(tc_att_args a) {
    tc_attention_body<uint16_t>(a);
}
#endif
