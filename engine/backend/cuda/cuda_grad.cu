// Training kernels (cuda_rt.h): the backward ops and training batch norm,
// the GPU side of cpu_grad.c and cpu_dnnl_grad.c's pooling (the optimizers'
// updates are in cuda_update.cu, convolution gradients are cuDNN's in
// cuda_dnn.c). The formulas are the CPU kernels', in f32 registers for f32
// and f16 storage:
//
//   pointwise (act_grad, mse_loss_grad, slice_grad): cpu_iter's loop nest
//       through pw_make, grid-stride;
//   per set (softmax rows, a norm's rows, channels or groups): one block per
//       set, statistics recomputed from x, two-pass variance;
//   sums over many rows into few outputs (sum_to with the last axis kept,
//       layer and rms norm weight gradients): 32 columns a block, 16 row
//       lanes, the rows split over more blocks when the columns are few,
//       partial sums then added in a fixed order;
//   gathers (pooling, embedding gradients): one thread per output element
//       adding its contributions in the CPU's order, so there are no
//       atomics and the same bits every step; embedding_grad first sorts the
//       positions by row with CUB's stable radix sort.
//
// Inputs that are views are made contiguous first (a counted copy), except
// for the pointwise ones. A bad embedding index or cross-entropy target is
// recorded on the device and reported by the next cuda_ctx_sync.
#include "cuda_grad.cuh"
#include "backend/cpu/cpu_sum_to.h"

#include <cub/device/device_radix_sort.cuh>

// ---- checks shared with cuda_update.cu (cuda_grad.cuh) -----------------------------

unsigned grad_grid(int64_t rows) { return (unsigned)(rows < (1 << 20) ? rows : (1 << 20)); }

int grad_need_float(cuda_ctx *c, const char *what, const tensor *t) {
    if (t->dtype != DT_F32 && t->dtype != DT_F16)
        return cuda_pw_fail(c, what, t->dtype);
    return 0;
}

int grad_need_same(cuda_ctx *c, const char *what, int n, const tensor *const *t) {
    for (int i = 0; i < n; i++) {
        if (grad_need_float(c, what, t[i]) < 0)
            return -1;
        if (t[i]->dtype != t[0]->dtype) {
            snprintf(c->err, sizeof c->err,
                     "%s: dtypes %s and %s differ (operands and output of one float dtype)", what,
                     dtype_name(t[0]->dtype), dtype_name(t[i]->dtype));
            return -1;
        }
    }
    return 0;
}

int grad_need_vector(cuda_ctx *c, const char *what, const tensor *t, int *f16) {
    if (grad_need_float(c, what, t) < 0)
        return -1;
    if (!tensor_is_contiguous(t)) {
        snprintf(c->err, sizeof c->err, "%s: its weight vector is not contiguous", what);
        return -1;
    }
    *f16 = t->dtype == DT_F16;
    return 0;
}

int grad_need_target(cuda_ctx *c, const char *what, const tensor *t) {
    if (t && (t->dtype != DT_F32 || !tensor_is_contiguous(t))) {
        snprintf(c->err, sizeof c->err,
                 "%s: the tensors it updates in place must be contiguous f32, got %s%s", what,
                 dtype_name(t->dtype), tensor_is_contiguous(t) ? "" : " (a view)");
        return -1;
    }
    return 0;
}

// The sets a norm's statistics run over (ref.c's norm_sets): rows of the
// last axis (layer, rms norm: weight per element of the row), channels over
// (N, S) of x (N, C, S) (batch norm: weight per set), or contiguous (n,
// group) runs of Cg * S (group norm: weight per channel). small: the
// in-set index math fits 32 bits.
enum { NSET_ROWS, NSET_CHANNELS, NSET_GROUPS };
struct nset {
    int kind, small;
    int64_t len, C, S, G, Cg;
};

// element k of set g
__device__ __forceinline__ int64_t set_off(const nset &L, int64_t g, int64_t k) {
    if (L.kind != NSET_CHANNELS)
        return g * L.len + k;
    int64_t b, i;
    if (L.small) {
        uint32_t q = (uint32_t)k, s = (uint32_t)L.S, bq = q / s;
        b = bq, i = q - bq * s;
    } else {
        b = k / L.S, i = k % L.S;
    }
    return (b * L.C + g) * L.S + i;
}

// the weight channel of element k of set g
__device__ __forceinline__ int64_t set_ch(const nset &L, int64_t g, int64_t k) {
    if (L.kind == NSET_ROWS)
        return k;
    if (L.kind == NSET_CHANNELS)
        return g;
    int64_t c = L.small ? (int64_t)((uint32_t)k / (uint32_t)L.S) : k / L.S;
    return (g % L.G) * L.Cg + c;
}

// Mean (0 unless center), biased variance (two passes) and 1 / sqrt(var +
// eps) of set g, as the forward norms compute them. Every thread of the
// block calls it and gets the results.
template <typename T>
__device__ void set_stats(const T *x, const nset &L, int64_t g, int center, float eps, float *sh,
                          float *mean, float *var, float *rstd) {
    float m = 0.0f, ss = 0.0f;
    if (center) {
        float s = 0.0f;
        for (int64_t k = threadIdx.x; k < L.len; k += blockDim.x)
            s += ldf(x, set_off(L, g, k));
        m = tc_block_sum(s, sh) / (float)L.len;
    }
    for (int64_t k = threadIdx.x; k < L.len; k += blockDim.x) {
        float d = ldf(x, set_off(L, g, k)) - m;
        ss += d * d;
    }
    float v = tc_block_sum(ss, sh) / (float)L.len;
    *mean = m;
    *var = v;
    *rstd = 1.0f / sqrtf(v + eps);
}

// ---- GE ------------------------------------------------------------------------------

__device__ __forceinline__ float ge_val(const float *p, int64_t i) { return p[i]; }
__device__ __forceinline__ float ge_val(const uint16_t *p, int64_t i) { return tc_h2f(p[i]); }
__device__ __forceinline__ int64_t ge_val(const int32_t *p, int64_t i) { return p[i]; }
__device__ __forceinline__ int64_t ge_val(const int64_t *p, int64_t i) { return p[i]; }
__device__ __forceinline__ int64_t ge_val(const uint8_t *p, int64_t i) { return p[i]; }

// a >= b into bool; NaN compares false
template <typename E> struct ge_f {
    pw_iter it;
    __device__ void operator()(int64_t i) const {
        int64_t o[3];
        pw_offsets<3>(it, i, o);
        ((uint8_t *)it.data[0])[o[0]] =
            ge_val((const E *)it.data[1], o[1]) >= ge_val((const E *)it.data[2], o[2]);
    }
};

int cuda_ge(cuda_ctx *c, const tensor *a, const tensor *b, tensor *out) {
    if (a->dtype != b->dtype || out->dtype != DT_BOOL) {
        snprintf(c->err, sizeof c->err, "ge: inputs %s and %s must match, into bool",
                 dtype_name(a->dtype), dtype_name(b->dtype));
        return -1;
    }
    const tensor *in[2] = {a, b};
    pw_iter it = pw_make(out, 2, in);
    switch (a->dtype) {
    case DT_F32: return pw_launch(c, it.n, ge_f<float>{it}, "ge<<<>>>");
    case DT_F16: return pw_launch(c, it.n, ge_f<uint16_t>{it}, "ge<<<>>>");
    case DT_I32: return pw_launch(c, it.n, ge_f<int32_t>{it}, "ge<<<>>>");
    case DT_I64: return pw_launch(c, it.n, ge_f<int64_t>{it}, "ge<<<>>>");
    case DT_BOOL: return pw_launch(c, it.n, ge_f<uint8_t>{it}, "ge<<<>>>");
    default: return cuda_pw_fail(c, "ge", a->dtype);
    }
}

// ---- ACT_GRAD ----------------------------------------------------------------------------

// f'(x) of the formula op OP (core/pointwise.h); a, b its attributes
template <int OP> __device__ __forceinline__ float dact(float x, float a, float b) {
#define X(U, l, a0, b0)                                                                                    \
    if constexpr (OP == OP_##U)                                                                    \
        return tc_d_##l(x, a, b);                                                                  \
    else
    TC_POINTWISE_OPS(X)
#undef X
        return 0.0f;
}

template <typename T, int OP> struct act_grad_f {
    pw_iter it;
    float a, b;
    __device__ void operator()(int64_t i) const {
        int64_t o[3];
        pw_offsets<3>(it, i, o);
        float d = ldf((const T *)it.data[1], o[1]), x = ldf((const T *)it.data[2], o[2]);
        stf((T *)it.data[0], o[0], d * dact<OP>(x, a, b));
    }
};

template <typename T>
static int act_grad_typed(cuda_ctx *c, enum op f, const pw_iter &it, float a, float b) {
    switch (f) {
#define X(U, l, a0, b0)                                                                                    \
    case OP_##U:                                                                                   \
        return pw_launch(c, it.n, act_grad_f<T, OP_##U>{it, a, b}, "act_grad_" #U "<<<>>>");
        TC_POINTWISE_OPS(X)
#undef X
    default:
        snprintf(c->err, sizeof c->err,
                 "act_grad: no derivative for %s (cast and dropout have none here)",
                 f >= 0 && f < OP_COUNT ? op_name(f) : "an unknown op");
        return -1;
    }
}

int cuda_act_grad(cuda_ctx *c, const graph_node *n, const tensor *dy, const tensor *x,
                  tensor *out) {
    const tensor *t[3] = {out, dy, x};
    if (grad_need_same(c, "act_grad", 3, t) < 0)
        return -1;
    pw_iter it = pw_make(out, 2, t + 1);
    enum op f = (enum op)n->ia[0];
    float a = (float)n->fa[0], b = (float)n->fa[1];
    return out->dtype == DT_F32 ? act_grad_typed<float>(c, f, it, a, b)
                                : act_grad_typed<uint16_t>(c, f, it, a, b);
}

// ---- column sums: few outputs, each summed over many rows ---------------------------------

#define CS_X 32 // columns a block (consecutive outputs: coalesced reads)
#define CS_Y 16 // row lanes a block

// A loader L gives L::NV values at (row, column) and stores the NV sums of
// a column. Rows split over gridDim.y blocks leave partial sums in part
// ((split, NV, ncols) floats), which colsum_fin_k adds in split order.
template <typename L>
__global__ void __launch_bounds__(CS_X *CS_Y)
    colsum_k(L ld, int64_t ncols, int64_t nrows, float *part) {
    __shared__ float sh[L::NV][CS_Y][CS_X + 1];
    int tx = threadIdx.x, ty = threadIdx.y;
    for (int64_t tile = blockIdx.x; tile * CS_X < ncols; tile += gridDim.x) {
        int64_t col = tile * CS_X + tx;
        float acc[L::NV];
        for (int k = 0; k < L::NV; k++)
            acc[k] = 0.0f;
        if (col < ncols)
            for (int64_t r = (int64_t)blockIdx.y * CS_Y + ty; r < nrows;
                 r += (int64_t)gridDim.y * CS_Y) {
                float v[L::NV];
                ld.load(r, col, v);
                for (int k = 0; k < L::NV; k++)
                    acc[k] += v[k];
            }
        for (int k = 0; k < L::NV; k++)
            sh[k][ty][tx] = acc[k];
        __syncthreads();
        if (ty == 0 && col < ncols) {
            float s[L::NV];
            for (int k = 0; k < L::NV; k++) {
                s[k] = 0.0f;
                for (int y = 0; y < CS_Y; y++)
                    s[k] += sh[k][y][tx];
            }
            if (gridDim.y == 1)
                ld.store(col, s);
            else
                for (int k = 0; k < L::NV; k++)
                    part[((int64_t)blockIdx.y * L::NV + k) * ncols + col] = s[k];
        }
        __syncthreads(); // sh is written again by the next tile
    }
}

template <typename L>
__global__ void colsum_fin_k(L ld, int64_t ncols, int splits, const float *part) {
    for (int64_t col = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; col < ncols;
         col += (int64_t)gridDim.x * blockDim.x) {
        float s[L::NV];
        for (int k = 0; k < L::NV; k++) {
            s[k] = 0.0f;
            for (int sp = 0; sp < splits; sp++)
                s[k] += part[((int64_t)sp * L::NV + k) * ncols + col];
        }
        ld.store(col, s);
    }
}

// Enough blocks to fill the GPU twice: the rows are split when the column
// tiles are fewer, each split keeping at least 64 rows.
template <typename L>
static int colsum(cuda_ctx *c, const L &ld, int64_t ncols, int64_t nrows, const char *name) {
    if (ncols <= 0)
        return 0;
    int64_t tiles = (ncols + CS_X - 1) / CS_X, want = 2 * (c->sm_count > 0 ? c->sm_count : 1);
    int64_t splits = 1;
    if (tiles < want) {
        splits = (want + tiles - 1) / tiles;
        if (splits > nrows / 64)
            splits = nrows / 64;
        if (splits > 65535)
            splits = 65535;
        if (splits < 1)
            splits = 1;
    }
    float *part = NULL;
    if (splits > 1 &&
        !(part = (float *)cuda_scratch_get(c, (size_t)(splits * L::NV * ncols) * sizeof(float))))
        return -1;
    dim3 grid(grad_grid(tiles), (unsigned)splits), block(CS_X, CS_Y);
    colsum_k<L><<<grid, block, 0, c->stream>>>(ld, ncols, nrows, part);
    int rc = cuda_launched(c, name, __FILE__, __LINE__);
    if (rc == 0 && splits > 1) {
        colsum_fin_k<L>
            <<<grad_grid((ncols + 255) / 256), 256, 0, c->stream>>>(ld, ncols, (int)splits, part);
        rc = CUDA_LAUNCHED(c, "colsum_fin<<<>>>");
    }
    if (part)
        cuda_scratch_put(c, part);
    return rc;
}

// ---- SUM_TO --------------------------------------------------------------------------------

// The plan is cpu_sum_to's (cpu_sum_to.h).

// element offset of flat index q over dims (size, stride)
__device__ __forceinline__ int64_t st_off(int64_t q, int nd, const int64_t *size,
                                          const int64_t *stride) {
    int64_t off = 0;
    for (int d = nd - 1; d >= 0; d--) {
        off += (q % size[d]) * stride[d];
        q /= size[d];
    }
    return off;
}

// the last dim reduced (or nothing kept): one block per output over its
// nR * L elements
template <typename T>
__global__ void __launch_bounds__(1024)
    sum_to_rows_k(const T *x, T *y, sum_to_plan p, int64_t nout, int64_t nred) {
    __shared__ float sh[32];
    for (int64_t o = blockIdx.x; o < nout; o += gridDim.x) {
        int64_t base = st_off(o, p.nk, p.ks, p.kst);
        float acc = 0.0f;
        for (int64_t q = threadIdx.x; q < nred; q += blockDim.x)
            acc += ldf(x, base + st_off(q / p.L, p.nr, p.rs, p.rst) + q % p.L);
        acc = tc_block_sum(acc, sh);
        if (threadIdx.x == 0)
            stf(y, o, acc);
    }
}

// the last dim kept: column sums, column = output, row = reduced position
template <typename T> struct sum_to_ld {
    static constexpr int NV = 1;
    const T *x;
    T *y;
    sum_to_plan p;
    __device__ void load(int64_t r, int64_t col, float *v) const {
        v[0] =
            ldf(x, st_off(col / p.I, p.nk, p.ks, p.kst) + col % p.I + st_off(r, p.nr, p.rs, p.rst));
    }
    __device__ void store(int64_t col, const float *v) const { stf(y, col, v[0]); }
};

template <typename T> static int sum_to_typed(cuda_ctx *c, const tensor *dc, tensor *out) {
    sum_to_plan p;
    sum_to_plan_make(dc, out, &p);
    int64_t nout = tensor_numel(out);
    if (nout == 0)
        return 0;
    const T *px = (const T *)tensor_data(dc);
    T *py = (T *)tensor_data(out);
    if (p.I > 1)
        return colsum(c, sum_to_ld<T>{px, py, p}, nout, shape_numel(p.nr, p.rs),
                      "sum_to_cols<<<>>>");
    int64_t nred = shape_numel(p.nr, p.rs) * p.L;
    sum_to_rows_k<T><<<grad_grid(nout), row_threads(nred), 0, c->stream>>>(px, py, p, nout, nred);
    return CUDA_LAUNCHED(c, "sum_to_rows<<<>>>");
}

int cuda_sum_to(cuda_ctx *c, const tensor *dy, tensor *out) {
    const tensor *t[2] = {out, dy};
    if (grad_need_same(c, "sum_to", 2, t) < 0)
        return -1;
    tensor *dc = cuda_contiguous(c, dy);
    if (!dc)
        return -1;
    int rc =
        dy->dtype == DT_F32 ? sum_to_typed<float>(c, dc, out) : sum_to_typed<uint16_t>(c, dc, out);
    cuda_tensor_free(c, dc);
    return rc;
}

// ---- SOFTMAX_GRAD, LOG_SOFTMAX_GRAD ------------------------------------------------------

template <typename T, bool LOG>
__global__ void __launch_bounds__(1024)
    softmax_grad_k(const T *dy, const T *y, T *o, int64_t rows, int64_t C) {
    __shared__ float sh[32];
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const T *d = dy + row * C, *yr = y + row * C;
        float s = 0.0f;
        for (int64_t j = threadIdx.x; j < C; j += blockDim.x)
            s += LOG ? ldf(d, j) : ldf(d, j) * ldf(yr, j);
        s = tc_block_sum(s, sh);
        for (int64_t j = threadIdx.x; j < C; j += blockDim.x) {
            float dv = ldf(d, j), yv = ldf(yr, j);
            stf(o + row * C, j, LOG ? dv - expf(yv) * s : yv * (dv - s));
        }
    }
}

template <typename T>
static void softmax_grad_launch(cuda_ctx *c, bool log, const tensor *d, const tensor *y,
                                tensor *out, int64_t rows, int64_t C) {
    const T *pd = (const T *)tensor_data(d), *py = (const T *)tensor_data(y);
    T *po = (T *)tensor_data(out);
    if (log)
        softmax_grad_k<T, true>
            <<<grad_grid(rows), row_threads(C), 0, c->stream>>>(pd, py, po, rows, C);
    else
        softmax_grad_k<T, false>
            <<<grad_grid(rows), row_threads(C), 0, c->stream>>>(pd, py, po, rows, C);
}

int cuda_softmax_grad(cuda_ctx *c, const tensor *dy, const tensor *y, bool log, tensor *out) {
    const char *what = log ? "log_softmax_grad" : "softmax_grad";
    const tensor *t[3] = {out, dy, y};
    if (grad_need_same(c, what, 3, t) < 0)
        return -1;
    tensor *dc = cuda_contiguous(c, dy), *yc = dc ? cuda_contiguous(c, y) : NULL;
    int rc = -1;
    if (yc) {
        int64_t C = out->ndim ? out->shape[out->ndim - 1] : 1;
        int64_t rows = C ? tensor_numel(out) / C : 0;
        rc = 0;
        if (rows > 0) {
            if (out->dtype == DT_F32)
                softmax_grad_launch<float>(c, log, dc, yc, out, rows, C);
            else
                softmax_grad_launch<uint16_t>(c, log, dc, yc, out, rows, C);
            rc = CUDA_LAUNCHED(c, "softmax_grad<<<>>>");
        }
    }
    cuda_tensor_free(c, dc);
    cuda_tensor_free(c, yc);
    return rc;
}

// ---- norms: statistics recomputed from x ---------------------------------------------------

// Statistics of every set: mean, biased variance and 1 / sqrt(var + eps)
// into st (3 * sets floats: the means, the variances, the rstds), one block
// a set. var may be skipped by the caller; it is always written.
template <typename T>
__global__ void __launch_bounds__(1024)
    set_stats_k(const T *x, nset L, int64_t sets, int center, float eps, float *st) {
    __shared__ float sh[32];
    for (int64_t g = blockIdx.x; g < sets; g += gridDim.x) {
        float mean, var, rstd;
        set_stats(x, L, g, center, eps, sh, &mean, &var, &rstd);
        if (threadIdx.x == 0) {
            st[g] = mean;
            st[sets + g] = var;
            st[2 * sets + g] = rstd;
        }
    }
}

template <typename T>
static int set_stats_launch(cuda_ctx *c, const tensor *x, const nset &L, int64_t sets, bool center,
                            double eps, float *st) {
    if (sets <= 0)
        return 0;
    set_stats_k<T><<<grad_grid(sets), row_threads(L.len), 0, c->stream>>>(
        (const T *)tensor_data(x), L, sets, center, (float)eps, st);
    return CUDA_LAUNCHED(c, "norm_stats<<<>>>");
}

// dx of one set per block: g = dy * w, xhat = (x - mean) rstd,
// dx = rstd (g - mean(g) - xhat mean(g xhat)); rms norm without the means
template <typename T>
__global__ void __launch_bounds__(1024)
    norm_grad_k(const T *dy, const T *x, const void *w, int wf16, T *dx, nset L, int64_t sets,
                int center, float eps) {
    __shared__ float sh[32];
    float n = (float)L.len;
    for (int64_t g = blockIdx.x; g < sets; g += gridDim.x) {
        float mean, var, rstd;
        set_stats(x, L, g, center, eps, sh, &mean, &var, &rstd);
        float sg = 0.0f, sgx = 0.0f;
        for (int64_t k = threadIdx.x; k < L.len; k += blockDim.x) {
            int64_t at = set_off(L, g, k);
            float gv = ldf(dy, at) * ldv(w, wf16, set_ch(L, g, k));
            sg += gv;
            sgx += gv * (ldf(x, at) - mean);
        }
        sg = tc_block_sum(sg, sh);
        sgx = tc_block_sum(sgx, sh);
        float mg = center ? sg / n : 0.0f, mgx = sgx * rstd / n;
        for (int64_t k = threadIdx.x; k < L.len; k += blockDim.x) {
            int64_t at = set_off(L, g, k);
            float wv = ldv(w, wf16, set_ch(L, g, k));
            stf(dx, at, rstd * (ldf(dy, at) * wv - mg - (ldf(x, at) - mean) * rstd * mgx));
        }
    }
}

// Weight and bias gradients of batch and group norm, one block a channel:
// sums over (N, S) of dy * xhat and of dy. Batch norm's statistics are the
// channel's own (mean NULL: computed here); group norm's come per (n, group)
// from set_stats_k.
template <typename T>
__global__ void __launch_bounds__(1024)
    chan_wgrad_k(const T *dy, const T *x, const float *mean, const float *rstd, nset L, int64_t G,
                 float eps, T *out) {
    __shared__ float sh[32];
    int64_t C = L.C, Cg = G ? C / G : 1;
    for (int64_t ch = blockIdx.x; ch < C; ch += gridDim.x) {
        float m = 0.0f, r = 0.0f, var;
        if (!mean)
            set_stats(x, L, ch, 1, eps, sh, &m, &var, &r);
        float a = 0.0f, b = 0.0f;
        for (int64_t k = threadIdx.x; k < L.len; k += blockDim.x) {
            int64_t at = set_off(L, ch, k);
            if (mean) {
                int64_t ng = (k / L.S) * G + ch / Cg;
                m = mean[ng];
                r = rstd[ng];
            }
            float d = ldf(dy, at);
            a += d * ((ldf(x, at) - m) * r);
            b += d;
        }
        a = tc_block_sum(a, sh);
        b = tc_block_sum(b, sh);
        if (threadIdx.x == 0) {
            stf(out, ch, a);
            stf(out, C + ch, b);
        }
    }
}

// Layer and rms norm weight gradients: columns of (rows, C) summed, with
// each row's statistics from set_stats_k.
template <typename T, bool CENTER> struct norm_wgrad_ld {
    static constexpr int NV = CENTER ? 2 : 1;
    const T *dy, *x;
    const float *mean, *rstd;
    T *out;
    int64_t C;
    __device__ void load(int64_t r, int64_t col, float *v) const {
        float d = ldf(dy, r * C + col);
        v[0] = d * ((ldf(x, r * C + col) - mean[r]) * rstd[r]);
        if constexpr (CENTER)
            v[1] = d;
    }
    __device__ void store(int64_t col, const float *v) const {
        stf(out, col, v[0]);
        if constexpr (CENTER)
            stf(out, C + col, v[1]);
    }
};

// The sets of a norm op over x: layer / rms norm rows of the last axis,
// batch norm channels over (N, spatial), group norm (n, group).
static nset norm_sets(enum op op, int64_t groups, const tensor *x, int64_t *sets) {
    nset L;
    memset(&L, 0, sizeof L);
    int64_t numel = tensor_numel(x);
    switch (op) {
    case OP_LAYER_NORM_GRAD:
    case OP_LAYER_NORM_WGRAD:
    case OP_RMS_NORM_GRAD:
    case OP_RMS_NORM_WGRAD:
        L.kind = NSET_ROWS;
        L.len = L.C = x->shape[x->ndim - 1];
        *sets = L.len ? numel / L.len : 0;
        break;
    case OP_BATCH_NORM_GRAD:
    case OP_BATCH_NORM_WGRAD:
    case OP_BATCH_NORM_STATS:
    case OP_BATCH_NORM:
        L.kind = NSET_CHANNELS;
        L.C = x->shape[1];
        L.S = numel / (x->shape[0] * L.C);
        L.len = x->shape[0] * L.S;
        *sets = L.C;
        break;
    default: // group norm: contiguous (n, group) runs
        L.kind = NSET_GROUPS;
        L.C = x->shape[1];
        L.S = numel / (x->shape[0] * L.C);
        L.G = groups;
        L.Cg = L.C / L.G;
        L.len = L.Cg * L.S;
        *sets = x->shape[0] * L.G;
        break;
    }
    L.small = L.len < INT32_MAX && L.S < INT32_MAX;
    return L;
}

static bool is_group(const graph_node *n) {
    return n->op == OP_GROUP_NORM_GRAD || n->op == OP_GROUP_NORM_WGRAD;
}

static bool is_centered(const graph_node *n) {
    return n->op != OP_RMS_NORM_GRAD && n->op != OP_RMS_NORM_WGRAD;
}

static int norm_shape_check(cuda_ctx *c, const graph_node *n, const tensor *x) {
    bool chan = n->op == OP_BATCH_NORM_GRAD || n->op == OP_BATCH_NORM_WGRAD || is_group(n);
    if (x->ndim < (chan ? 2 : 1) || tensor_numel(x) == 0) {
        snprintf(c->err, sizeof c->err, "%s: needs a non-empty input of %s dims", op_name(n->op),
                 chan ? "(N, C, ...)" : "(..., C)");
        return -1;
    }
    if (is_group(n) && (n->ia[0] <= 0 || x->shape[1] % n->ia[0])) {
        snprintf(c->err, sizeof c->err, "%s: %lld groups do not divide the channels of the input",
                 op_name(n->op), (long long)n->ia[0]);
        return -1;
    }
    return 0;
}

template <typename T>
static int norm_grad_typed(cuda_ctx *c, const graph_node *n, const tensor *dc, const tensor *xc,
                           const tensor *w, int wf16, tensor *out) {
    int64_t sets;
    nset L = norm_sets(n->op, n->ia[0], xc, &sets);
    norm_grad_k<T><<<grad_grid(sets), row_threads(L.len), 0, c->stream>>>(
        (const T *)tensor_data(dc), (const T *)tensor_data(xc), tensor_data(w), wf16,
        (T *)tensor_data(out), L, sets, is_centered(n), (float)n->fa[0]);
    return CUDA_LAUNCHED(c, "norm_grad<<<>>>");
}

int cuda_norm_grad(cuda_ctx *c, const graph_node *n, const tensor *dy, const tensor *x,
                   const tensor *w, tensor *out) {
    const char *what = op_name(n->op);
    const tensor *t[3] = {out, dy, x};
    int wf16 = 0;
    if (grad_need_same(c, what, 3, t) < 0 || grad_need_vector(c, what, w, &wf16) < 0 ||
        norm_shape_check(c, n, x) < 0)
        return -1;
    bool last = n->op == OP_LAYER_NORM_GRAD || n->op == OP_RMS_NORM_GRAD;
    int64_t C = x->shape[last ? x->ndim - 1 : 1];
    if (tensor_numel(w) != C) {
        snprintf(c->err, sizeof c->err, "%s: the weight has %lld values for %lld channels", what,
                 (long long)tensor_numel(w), (long long)C);
        return -1;
    }
    tensor *dc = cuda_contiguous(c, dy), *xc = dc ? cuda_contiguous(c, x) : NULL;
    int rc = -1;
    if (xc)
        rc = out->dtype == DT_F32 ? norm_grad_typed<float>(c, n, dc, xc, w, wf16, out)
                                  : norm_grad_typed<uint16_t>(c, n, dc, xc, w, wf16, out);
    cuda_tensor_free(c, dc);
    cuda_tensor_free(c, xc);
    return rc;
}

template <typename T>
static int norm_wgrad_typed(cuda_ctx *c, const graph_node *n, const tensor *dc, const tensor *xc,
                            tensor *out) {
    int64_t sets;
    nset L = norm_sets(n->op, n->ia[0], xc, &sets);
    const T *pd = (const T *)tensor_data(dc), *px = (const T *)tensor_data(xc);
    T *po = (T *)tensor_data(out);
    float eps = (float)n->fa[0];
    if (n->op == OP_BATCH_NORM_WGRAD) {
        chan_wgrad_k<T><<<grad_grid(L.C), row_threads(L.len), 0, c->stream>>>(pd, px, NULL, NULL, L,
                                                                              0, eps, po);
        return CUDA_LAUNCHED(c, "batch_norm_wgrad<<<>>>");
    }
    float *st = (float *)cuda_scratch_get(c, (size_t)(3 * sets) * sizeof(float));
    if (!st)
        return -1;
    int rc = set_stats_launch<T>(c, xc, L, sets, is_centered(n), n->fa[0], st);
    if (rc == 0 && is_group(n)) {
        // channels over (N, S): the same sets as batch norm's
        nset B = L;
        B.kind = NSET_CHANNELS;
        B.len = xc->shape[0] * L.S;
        B.small = B.len < INT32_MAX && B.S < INT32_MAX;
        chan_wgrad_k<T><<<grad_grid(L.C), row_threads(B.len), 0, c->stream>>>(
            pd, px, st, st + 2 * sets, B, L.G, eps, po);
        rc = CUDA_LAUNCHED(c, "group_norm_wgrad<<<>>>");
    } else if (rc == 0) {
        int64_t C = L.len;
        if (is_centered(n))
            rc = colsum(c, norm_wgrad_ld<T, true>{pd, px, st, st + 2 * sets, po, C}, C, sets,
                        "layer_norm_wgrad<<<>>>");
        else
            rc = colsum(c, norm_wgrad_ld<T, false>{pd, px, st, st + 2 * sets, po, C}, C, sets,
                        "rms_norm_wgrad<<<>>>");
    }
    cuda_scratch_put(c, st);
    return rc;
}

int cuda_norm_wgrad(cuda_ctx *c, const graph_node *n, const tensor *dy, const tensor *x,
                    tensor *out) {
    const char *what = op_name(n->op);
    const tensor *t[3] = {out, dy, x};
    if (grad_need_same(c, what, 3, t) < 0 || norm_shape_check(c, n, x) < 0)
        return -1;
    tensor *dc = cuda_contiguous(c, dy), *xc = dc ? cuda_contiguous(c, x) : NULL;
    int rc = -1;
    if (xc)
        rc = out->dtype == DT_F32 ? norm_wgrad_typed<float>(c, n, dc, xc, out)
                                  : norm_wgrad_typed<uint16_t>(c, n, dc, xc, out);
    cuda_tensor_free(c, dc);
    cuda_tensor_free(c, xc);
    return rc;
}

// ---- batch norm in training: statistics, and the forward that updates the running ones ----

int cuda_batch_norm_stats(cuda_ctx *c, const tensor *x, double eps, tensor *out) {
    if (grad_need_target(c, "batch_norm_stats", out) < 0 ||
        grad_need_float(c, "batch_norm_stats", x) < 0)
        return -1;
    if (x->ndim < 2 || tensor_numel(x) == 0) {
        snprintf(c->err, sizeof c->err, "batch_norm_stats: needs a non-empty (N, C, ...) input");
        return -1;
    }
    tensor *xc = cuda_contiguous(c, x);
    if (!xc)
        return -1;
    int64_t sets;
    nset L = norm_sets(OP_BATCH_NORM_STATS, 0, xc, &sets);
    float *po = (float *)tensor_data(out); // (3, C): the means, variances and rstds
    int rc = x->dtype == DT_F32 ? set_stats_launch<float>(c, xc, L, sets, true, eps, po)
                                : set_stats_launch<uint16_t>(c, xc, L, sets, true, eps, po);
    cuda_tensor_free(c, xc);
    return rc;
}

// one block a channel: the batch's statistics, y = x * a + (b - mean a)
// with a = rstd w, and the running statistics moved by momentum (the
// variance unbiased), as cpu_batch_norm_train
template <typename T>
__global__ void __launch_bounds__(1024)
    bn_train_k(const T *x, const void *w, const void *b, int pf16, float *rmean, float *rvar, T *y,
               nset L, float eps, double mom) {
    __shared__ float sh[32];
    double cnt = (double)L.len;
    for (int64_t ch = blockIdx.x; ch < L.C; ch += gridDim.x) {
        float mean, var, rstd;
        set_stats(x, L, ch, 1, eps, sh, &mean, &var, &rstd);
        float a = rstd * ldv(w, pf16, ch), shift = ldv(b, pf16, ch) - mean * a;
        for (int64_t k = threadIdx.x; k < L.len; k += blockDim.x) {
            int64_t at = set_off(L, ch, k);
            stf(y, at, ldf(x, at) * a + shift);
        }
        if (threadIdx.x == 0) {
            rmean[ch] = (float)((1 - mom) * rmean[ch] + mom * mean);
            rvar[ch] = (float)((1 - mom) * rvar[ch] + mom * (double)var * cnt / (cnt - 1));
        }
    }
}

int cuda_batch_norm_train(cuda_ctx *c, const tensor *x, const tensor *w, const tensor *b,
                          tensor *rmean, tensor *rvar, double eps, double momentum, tensor *out) {
    const tensor *t[2] = {out, x};
    int wf16 = 0, bf16 = 0;
    if (grad_need_target(c, "batch_norm", rmean) < 0 ||
        grad_need_target(c, "batch_norm", rvar) < 0 || grad_need_same(c, "batch_norm", 2, t) < 0 ||
        grad_need_vector(c, "batch_norm", w, &wf16) < 0 ||
        grad_need_vector(c, "batch_norm", b, &bf16) < 0)
        return -1;
    if (wf16 != bf16) {
        snprintf(c->err, sizeof c->err, "batch_norm: weight %s and bias %s differ in dtype",
                 dtype_name(w->dtype), dtype_name(b->dtype));
        return -1;
    }
    if (x->ndim < 2) {
        snprintf(c->err, sizeof c->err, "batch_norm: needs (N, C, ...) input, got %d dims",
                 x->ndim);
        return -1;
    }
    int64_t N = x->shape[0], C = x->shape[1], S = N * C != 0 ? tensor_numel(x) / (N * C) : 0;
    if (N * S < 2) {
        snprintf(c->err, sizeof c->err,
                 "batch_norm: training needs more than one value per channel, got input of "
                 "%lld x %lld",
                 (long long)N, (long long)S);
        return -1;
    }
    tensor *xc = cuda_contiguous(c, x);
    if (!xc)
        return -1;
    int64_t sets;
    nset L = norm_sets(OP_BATCH_NORM, 0, xc, &sets);
    float *pm = (float *)tensor_data(rmean), *pv = (float *)tensor_data(rvar);
    if (x->dtype == DT_F32)
        bn_train_k<float><<<grad_grid(C), row_threads(L.len), 0, c->stream>>>(
            (const float *)tensor_data(xc), tensor_data(w), tensor_data(b), wf16, pm, pv,
            (float *)tensor_data(out), L, (float)eps, momentum);
    else
        bn_train_k<uint16_t><<<grad_grid(C), row_threads(L.len), 0, c->stream>>>(
            (const uint16_t *)tensor_data(xc), tensor_data(w), tensor_data(b), wf16, pm, pv,
            (uint16_t *)tensor_data(out), L, (float)eps, momentum);
    int rc = CUDA_LAUNCHED(c, "batch_norm_train<<<>>>");
    cuda_tensor_free(c, xc);
    return rc;
}

// ---- MAX_POOL2D_GRAD, AVG_POOL2D_GRAD ----------------------------------------------------

struct pool_geom {
    int64_t H, W, OH, OW, sh, sw, ph, pw, kh, kw;
};

// Each window's argmax within its (n, c) plane: the first maximum in
// row-major window order, padding never winning, the first NaN winning
// (ref.c's rule); -1 for a window wholly in the padding.
template <typename T> struct pool_argmax_f {
    const T *x;
    int32_t *best;
    pool_geom g;
    __device__ void operator()(int64_t i) const {
        int64_t ow = i % g.OW, r = i / g.OW, oh = r % g.OH, p = r / g.OH;
        int64_t h0 = oh * g.sh - g.ph, w0 = ow * g.sw - g.pw;
        int64_t ha = h0 > 0 ? h0 : 0, hb = h0 + g.kh < g.H ? h0 + g.kh : g.H;
        int64_t wa = w0 > 0 ? w0 : 0, wb = w0 + g.kw < g.W ? w0 + g.kw : g.W;
        const T *xp = x + p * g.H * g.W;
        int64_t at = -1;
        float m = 0.0f;
        for (int64_t h = ha; h < hb; h++)
            for (int64_t w = wa; w < wb; w++) {
                float v = ldf(xp, h * g.W + w);
                if (at < 0 || v > m || (v != v && m == m)) {
                    m = v;
                    at = h * g.W + w;
                }
            }
        best[i] = (int32_t)at;
    }
};

// dx at (p, h, w): the windows that hold the pixel in (oh, ow) order, the
// order the CPU kernel adds them in: max pool's where it is the argmax,
// avg pool's dy / (kh kw) from each
template <typename T> struct pool_grad_f {
    const T *dy;
    const int32_t *best; // NULL: average
    T *dx;
    pool_geom g;
    __device__ void operator()(int64_t i) const {
        int64_t w = i % g.W, r = i / g.W, h = r % g.H, p = r / g.H;
        int64_t oh0 = h + g.ph < g.kh ? 0 : (h + g.ph - g.kh) / g.sh + 1;
        int64_t oh1 = (h + g.ph) / g.sh, ow1 = (w + g.pw) / g.sw;
        int64_t ow0 = w + g.pw < g.kw ? 0 : (w + g.pw - g.kw) / g.sw + 1;
        oh1 = oh1 < g.OH - 1 ? oh1 : g.OH - 1;
        ow1 = ow1 < g.OW - 1 ? ow1 : g.OW - 1;
        float acc = 0.0f, area = (float)(g.kh * g.kw);
        int32_t me = (int32_t)(h * g.W + w);
        for (int64_t oh = oh0; oh <= oh1; oh++)
            for (int64_t ow = ow0; ow <= ow1; ow++) {
                int64_t j = (p * g.OH + oh) * g.OW + ow;
                if (!best)
                    acc += ldf(dy, j) / area;
                else if (best[j] == me)
                    acc += ldf(dy, j);
            }
        stf(dx, i, acc);
    }
};

template <typename T>
static int pool_grad_typed(cuda_ctx *c, const tensor *dc, const tensor *xc, const pool_geom &g,
                           tensor *out) {
    int64_t P = out->shape[0] * out->shape[1], windows = P * g.OH * g.OW;
    int32_t *best = NULL;
    if (xc) {
        if (!(best = (int32_t *)cuda_scratch_get(c, (size_t)(windows > 0 ? windows : 1) *
                                                        sizeof(int32_t))))
            return -1;
        if (pw_launch(c, windows, pool_argmax_f<T>{(const T *)tensor_data(xc), best, g},
                      "max_pool2d_argmax<<<>>>") < 0) {
            cuda_scratch_put(c, best);
            return -1;
        }
    }
    int rc = pw_launch(c, tensor_numel(out),
                       pool_grad_f<T>{(const T *)tensor_data(dc), best, (T *)tensor_data(out), g},
                       "pool2d_grad<<<>>>");
    if (best)
        cuda_scratch_put(c, best);
    return rc;
}

int cuda_pool2d_grad(cuda_ctx *c, const graph_node *n, const tensor *dy, const tensor *x,
                     tensor *out) {
    bool max = n->op == OP_MAX_POOL2D_GRAD;
    const char *what = op_name(n->op);
    const tensor *t[3] = {out, dy, x};
    if (max && !x) {
        snprintf(c->err, sizeof c->err, "%s: needs the forward input x", what);
        return -1;
    }
    if (grad_need_same(c, what, max ? 3 : 2, t) < 0)
        return -1;
    if (dy->ndim != 4 || out->ndim != 4 || (max && x->ndim != 4)) {
        snprintf(c->err, sizeof c->err, "%s: needs 4-d (N, C, H, W) tensors", what);
        return -1;
    }
    for (int i = 0; i < 4; i++)
        if ((i < 2 && dy->shape[i] != out->shape[i]) || (max && x->shape[i] != out->shape[i])) {
            snprintf(c->err, sizeof c->err, "%s: dy, x and dx disagree in dim %d", what, i);
            return -1;
        }
    const int64_t *ia = n->ia;
    pool_geom g = {out->shape[2], out->shape[3], dy->shape[2], dy->shape[3], ia[0],
                   ia[1],         ia[2],         ia[3],        ia[4],        ia[5]};
    g.sh = g.sh > 0 ? g.sh : g.kh; // ref.c's default: the stride is the kernel
    g.sw = g.sw > 0 ? g.sw : g.kw;
    if (g.kh < 1 || g.kw < 1 || g.ph < 0 || g.pw < 0 || g.H * g.W >= INT32_MAX) {
        snprintf(c->err, sizeof c->err,
                 "%s: kernel %lldx%lld, padding %lldx%lld and planes of %lld pixels are not "
                 "supported (kernel >= 1, padding >= 0, planes below 2^31)",
                 what, (long long)g.kh, (long long)g.kw, (long long)g.ph, (long long)g.pw,
                 (long long)(g.H * g.W));
        return -1;
    }
    tensor *dc = cuda_contiguous(c, dy), *xc = dc && max ? cuda_contiguous(c, x) : NULL;
    int rc = -1;
    if (dc && (!max || xc))
        rc = out->dtype == DT_F32 ? pool_grad_typed<float>(c, dc, xc, g, out)
                                  : pool_grad_typed<uint16_t>(c, dc, xc, g, out);
    cuda_tensor_free(c, dc);
    cuda_tensor_free(c, xc);
    return rc;
}

// ---- EMBEDDING_GRAD ---------------------------------------------------------------------

// keys: each position's row (a bad index becomes V, past every row, and is
// reported); values: the positions
struct emb_prep_f {
    const char *idx;
    int i64;
    int64_t V;
    uint32_t *key;
    int32_t *pos;
    cuda_dev_error *err;
    __device__ void operator()(int64_t i) const {
        int64_t id = i64 ? ((const int64_t *)idx)[i] : ((const int32_t *)idx)[i];
        if (id < 0 || id >= V) {
            dev_error(err, CUDA_DEVERR_EMBEDDING_GRAD, id, i, V);
            id = V;
        }
        key[i] = (uint32_t)id;
        pos[i] = (int32_t)i;
    }
};

__device__ __forceinline__ int64_t lower_bound(const uint32_t *k, int64_t n, uint32_t v) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        if (k[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

// one block a row v of out (V, D): its positions (sorted, ascending within
// the row, as the CPU's counting sort leaves them) summed in order
template <typename T>
__global__ void __launch_bounds__(1024)
    emb_grad_k(const T *dy, const uint32_t *key, const int32_t *pos, int64_t n, int64_t V,
               int64_t D, T *out) {
    for (int64_t v = blockIdx.x; v < V; v += gridDim.x) {
        int64_t lo = lower_bound(key, n, (uint32_t)v), hi = lower_bound(key, n, (uint32_t)v + 1);
        for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
            float acc = 0.0f;
            for (int64_t k = lo; k < hi; k++)
                acc += ldf(dy, (int64_t)pos[k] * D + d);
            stf(out, v * D + d, acc);
        }
    }
}

// keys, positions, the sort and the sum; dc and ic contiguous
template <typename T>
static int emb_grad_run(cuda_ctx *c, const tensor *dc, const tensor *ic, int64_t n, int bits,
                        tensor *out) {
    int64_t V = out->shape[0], D = out->shape[1];
    uint32_t *kout = NULL;
    int32_t *pout = NULL;
    char *buf = NULL;
    int rc = 0;
    if (n > 0) {
        size_t sort_bytes = 0, nn = (size_t)n;
        cudaError_t e = cub::DeviceRadixSort::SortPairs(
            NULL, sort_bytes, (const uint32_t *)NULL, (uint32_t *)NULL, (const int32_t *)NULL,
            (int32_t *)NULL, (int)n, 0, bits, c->stream);
        if (e != cudaSuccess)
            return cuda_fail_at(c->err, sizeof c->err, "cub::DeviceRadixSort::SortPairs(size)",
                                __FILE__, __LINE__, cudaGetErrorString(e));
        // CUB's storage first (the allocator's blocks are 512-byte aligned),
        // then the keys and positions in and out
        size_t head = (sort_bytes + 255) & ~(size_t)255;
        if (!(buf = (char *)cuda_scratch_get(c, head + 4 * nn * sizeof(uint32_t))))
            return -1;
        uint32_t *kin = (uint32_t *)(buf + head);
        int32_t *pin = (int32_t *)(kin + nn);
        kout = (uint32_t *)(pin + nn);
        pout = (int32_t *)(kout + nn);
        emb_prep_f prep = {
            (const char *)tensor_data(ic), ic->dtype == DT_I64, V, kin, pin, c->deverr};
        rc = pw_launch(c, n, prep, "embedding_grad_keys<<<>>>");
        if (rc == 0) {
            e = cub::DeviceRadixSort::SortPairs(buf, sort_bytes, kin, kout, pin, pout, (int)n, 0,
                                                bits, c->stream);
            c->kernels++; // a library call: one
            if (e != cudaSuccess)
                rc = cuda_fail_at(c->err, sizeof c->err, "cub::DeviceRadixSort::SortPairs",
                                  __FILE__, __LINE__, cudaGetErrorString(e));
        }
    }
    if (rc == 0) { // with no positions every row sums nothing: zeros
        emb_grad_k<T><<<grad_grid(V), row_threads(D), 0, c->stream>>>(
            (const T *)tensor_data(dc), kout, pout, n, V, D, (T *)tensor_data(out));
        rc = CUDA_LAUNCHED(c, "embedding_grad<<<>>>");
    }
    if (buf)
        cuda_scratch_put(c, buf);
    return rc;
}

int cuda_embedding_grad(cuda_ctx *c, const tensor *dy, const tensor *idx, tensor *out) {
    if (idx->dtype != DT_I32 && idx->dtype != DT_I64) {
        snprintf(c->err, sizeof c->err, "embedding_grad: indices must be i32 or i64, got %s",
                 dtype_name(idx->dtype));
        return -1;
    }
    const tensor *t[2] = {out, dy};
    if (grad_need_same(c, "embedding_grad", 2, t) < 0)
        return -1;
    int64_t V = out->shape[0], n = tensor_numel(idx);
    if (tensor_numel(dy) != n * out->shape[1]) {
        snprintf(c->err, sizeof c->err,
                 "embedding_grad: dy has %lld values for %lld indices of rows of %lld",
                 (long long)tensor_numel(dy), (long long)n, (long long)out->shape[1]);
        return -1;
    }
    if (V >= INT32_MAX || n >= INT32_MAX) {
        snprintf(c->err, sizeof c->err,
                 "embedding_grad: %lld rows and %lld indices: both must stay below 2^31",
                 (long long)V, (long long)n);
        return -1;
    }
    if (tensor_numel(out) == 0)
        return 0;
    int bits = 1; // keys are in [0, V]: V itself marks a bad index
    while (bits < 32 && ((int64_t)1 << bits) <= V)
        bits++;
    tensor *dc = cuda_contiguous(c, dy), *ic = dc ? cuda_contiguous(c, idx) : NULL;
    int rc = -1;
    if (ic)
        rc = out->dtype == DT_F32 ? emb_grad_run<float>(c, dc, ic, n, bits, out)
                                  : emb_grad_run<uint16_t>(c, dc, ic, n, bits, out);
    cuda_tensor_free(c, dc);
    cuda_tensor_free(c, ic);
    return rc;
}

// ---- SLICE_GRAD --------------------------------------------------------------------------

// out: zeros, and dy where [start, start + len) along ax; dy any strides
template <typename E> struct slice_grad_f {
    const E *dy;
    E *y;
    int nd, ax;
    int64_t start, len;
    int64_t shape[TENSOR_MAX_DIMS], st[TENSOR_MAX_DIMS];
    __device__ void operator()(int64_t i) const {
        int64_t r = i, off = 0;
        bool in = true;
        for (int d = nd - 1; d >= 0; d--) {
            int64_t q = r % shape[d];
            r /= shape[d];
            if (d == ax) {
                q -= start;
                in = q >= 0 && q < len;
            }
            off += q * st[d];
        }
        y[i] = in ? dy[off] : (E)0;
    }
};

template <typename E>
static int slice_grad_typed(cuda_ctx *c, int ax, int64_t start, const tensor *dy, tensor *out) {
    slice_grad_f<E> f;
    memset(&f, 0, sizeof f);
    f.dy = (const E *)tensor_data(dy);
    f.y = (E *)tensor_data(out);
    f.nd = out->ndim;
    f.ax = ax;
    f.start = start;
    f.len = dy->shape[ax];
    for (int d = 0; d < out->ndim; d++) {
        f.shape[d] = out->shape[d];
        f.st[d] = dy->stride[d];
    }
    return pw_launch(c, tensor_numel(out), f, "slice_grad<<<>>>");
}

int cuda_slice_grad(cuda_ctx *c, const graph_node *n, const tensor *dy, tensor *out) {
    if (dy->dtype != out->dtype) {
        snprintf(c->err, sizeof c->err, "slice_grad: dy %s and output %s differ in dtype",
                 dtype_name(dy->dtype), dtype_name(out->dtype));
        return -1;
    }
    int ax = (int)n->ia[0];
    int64_t start = n->ia[1];
    switch (dtype_size(out->dtype)) {
    case 1: return slice_grad_typed<uint8_t>(c, ax, start, dy, out);
    case 2: return slice_grad_typed<uint16_t>(c, ax, start, dy, out);
    case 4: return slice_grad_typed<uint32_t>(c, ax, start, dy, out);
    default: return slice_grad_typed<uint64_t>(c, ax, start, dy, out);
    }
}

// ---- losses --------------------------------------------------------------------------------

__device__ __forceinline__ int64_t target_at(const char *tgt, int t64, int64_t stride, int64_t r) {
    return t64 ? ((const int64_t *)tgt)[r * stride] : ((const int32_t *)tgt)[r * stride];
}

// one block: the rows counted (targets != ignore; bad ones reported) and
// k = dloss / count (0 when none counts)
__global__ void __launch_bounds__(1024)
    ce_count_k(const char *tgt, int t64, int64_t tstride, int64_t N, int64_t C, int64_t ignore,
               const void *dl, int dl16, float *k, cuda_dev_error *err) {
    __shared__ unsigned long long count;
    if (threadIdx.x == 0)
        count = 0;
    __syncthreads();
    unsigned long long mine = 0;
    for (int64_t r = threadIdx.x; r < N; r += blockDim.x) {
        int64_t t = target_at(tgt, t64, tstride, r);
        if (t == ignore)
            continue;
        if (t < 0 || t >= C)
            dev_error(err, CUDA_DEVERR_TARGET_GRAD, t, r, C);
        else
            mine++;
    }
    atomicAdd(&count, mine);
    __syncthreads();
    if (threadIdx.x == 0)
        *k = count ? ldv(dl, dl16, 0) / (float)count : 0.0f;
}

// per row: (softmax(row) - onehot(t)) * k, zeros for an ignored (or bad) row
template <typename T, typename O>
__global__ void __launch_bounds__(1024)
    ce_grad_k(const T *x, const char *tgt, int t64, int64_t tstride, int64_t N, int64_t C,
              int64_t ignore, const float *kp, O *o) {
    __shared__ float sh[32];
    float k = *kp;
    for (int64_t row = blockIdx.x; row < N; row += gridDim.x) {
        int64_t t = target_at(tgt, t64, tstride, row);
        const T *xr = x + row * C;
        O *orow = o + row * C;
        if (t == ignore || t < 0 || t >= C) { // uniform across the block
            for (int64_t j = threadIdx.x; j < C; j += blockDim.x)
                stf(orow, j, 0.0f);
            continue;
        }
        float m = -INFINITY, s = 0.0f;
        for (int64_t j = threadIdx.x; j < C; j += blockDim.x)
            m = tc_maximum(ldf(xr, j), m);
        m = tc_block_max(m, sh);
        for (int64_t j = threadIdx.x; j < C; j += blockDim.x)
            s += expf(ldf(xr, j) - m);
        float ks = k / tc_block_sum(s, sh);
        for (int64_t j = threadIdx.x; j < C; j += blockDim.x) {
            float v = expf(ldf(xr, j) - m) * ks;
            stf(orow, j, j == t ? v - k : v);
        }
    }
}

template <typename T, typename O>
static void ce_grad_launch(cuda_ctx *c, const tensor *lc, const tensor *target, int64_t ignore,
                           const float *k, tensor *out) {
    int64_t N = lc->shape[0], C = lc->shape[1];
    ce_grad_k<T, O><<<grad_grid(N), row_threads(C), 0, c->stream>>>(
        (const T *)tensor_data(lc), (const char *)tensor_data(target), target->dtype == DT_I64,
        target->stride[0], N, C, ignore, k, (O *)tensor_data(out));
}

int cuda_cross_entropy_grad(cuda_ctx *c, const graph_node *n, const tensor *dloss,
                            const tensor *logits, const tensor *target, tensor *out) {
    if (target->dtype != DT_I32 && target->dtype != DT_I64) {
        snprintf(c->err, sizeof c->err, "cross_entropy_grad: targets must be i32 or i64, got %s",
                 dtype_name(target->dtype));
        return -1;
    }
    if (grad_need_float(c, "cross_entropy_grad", dloss) < 0 ||
        grad_need_float(c, "cross_entropy_grad", logits) < 0 ||
        grad_need_float(c, "cross_entropy_grad", out) < 0)
        return -1;
    int64_t N = logits->shape[0], C = logits->shape[1], ignore = n->ia[0];
    if (N * C == 0)
        return 0;
    tensor *lc = cuda_contiguous(c, logits);
    float *k = lc ? (float *)cuda_scratch_get(c, sizeof(float)) : NULL;
    int rc = -1;
    if (k) {
        ce_count_k<<<1, 1024, 0, c->stream>>>(
            (const char *)tensor_data(target), target->dtype == DT_I64, target->stride[0], N, C,
            ignore, tensor_data(dloss), dloss->dtype == DT_F16, k, c->deverr);
        rc = CUDA_LAUNCHED(c, "cross_entropy_count<<<>>>");
        if (rc == 0) {
            bool x16 = logits->dtype == DT_F16, o16 = out->dtype == DT_F16;
            if (!x16 && !o16)
                ce_grad_launch<float, float>(c, lc, target, ignore, k, out);
            else if (!x16)
                ce_grad_launch<float, uint16_t>(c, lc, target, ignore, k, out);
            else if (!o16)
                ce_grad_launch<uint16_t, float>(c, lc, target, ignore, k, out);
            else
                ce_grad_launch<uint16_t, uint16_t>(c, lc, target, ignore, k, out);
            rc = CUDA_LAUNCHED(c, "cross_entropy_grad<<<>>>");
        }
        cuda_scratch_put(c, k);
    }
    cuda_tensor_free(c, lc);
    return rc;
}

// out = k (a - b), k = 2 dloss / numel in double, once a thread
template <typename T>
__global__ void __launch_bounds__(PW_BLOCK)
    mse_grad_k(pw_iter it, const void *dl, int dl16, double numel) {
    float k = (float)(2.0 * (double)ldv(dl, dl16, 0) / numel);
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < it.n;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t o[3];
        pw_offsets<3>(it, i, o);
        stf((T *)it.data[0], o[0],
            k * (ldf((const T *)it.data[1], o[1]) - ldf((const T *)it.data[2], o[2])));
    }
}

int cuda_mse_loss_grad(cuda_ctx *c, const tensor *dloss, const tensor *a, const tensor *b,
                       tensor *out) {
    const tensor *t[3] = {out, a, b};
    if (grad_need_same(c, "mse_loss_grad", 3, t) < 0 ||
        grad_need_float(c, "mse_loss_grad", dloss) < 0)
        return -1;
    pw_iter it = pw_make(out, 2, t + 1);
    if (it.n <= 0)
        return 0;
    int64_t blocks = (it.n + PW_BLOCK - 1) / PW_BLOCK, cap = (int64_t)c->sm_count * 32;
    unsigned g = (unsigned)(blocks < cap ? blocks : cap > 0 ? cap : 1);
    const void *dl = tensor_data(dloss);
    int dl16 = dloss->dtype == DT_F16;
    if (out->dtype == DT_F32)
        mse_grad_k<float><<<g, PW_BLOCK, 0, c->stream>>>(it, dl, dl16, (double)it.n);
    else
        mse_grad_k<uint16_t><<<g, PW_BLOCK, 0, c->stream>>>(it, dl, dl16, (double)it.n);
    return CUDA_LAUNCHED(c, "mse_loss_grad<<<>>>");
}
