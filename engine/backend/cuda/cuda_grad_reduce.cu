// Training kernels that sum (cuda_grad.cu): sum_to (cpu_sum_to.h's plan),
// the softmax and log-softmax gradients and cross-entropy's, one block a
// row. A bad cross-entropy target is recorded on the device and reported by
// the next cuda_ctx_sync.
#include "cuda_grad.cuh"
#include "cuda_grad_colsum.cuh"
#include "backend/cpu/cpu_sum_to.h"

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
    softmax_grad_k(const T *dy, const T *y, T *o, int64_t rows, int64_t C, int64_t in) {
    __shared__ float sh[32];
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        int64_t at = row / in * C * in + row % in; // as softmax_rows
        const T *d = dy + at, *yr = y + at;
        float s = 0.0f;
        for (int64_t j = threadIdx.x; j < C; j += blockDim.x)
            s += LOG ? ldf(d, j * in) : ldf(d, j * in) * ldf(yr, j * in);
        s = tc_block_sum(s, sh);
        for (int64_t j = threadIdx.x; j < C; j += blockDim.x) {
            float dv = ldf(d, j * in), yv = ldf(yr, j * in);
            stf(o + at, j * in, LOG ? dv - expf(yv) * s : yv * (dv - s));
        }
    }
}

template <typename T>
static void softmax_grad_launch(cuda_ctx *c, bool log, const tensor *d, const tensor *y,
                                tensor *out, int64_t rows, int64_t C, int64_t in) {
    const T *pd = (const T *)tensor_data(d), *py = (const T *)tensor_data(y);
    T *po = (T *)tensor_data(out);
    if (log)
        softmax_grad_k<T, true>
            <<<grad_grid(rows), row_threads(C), 0, c->stream>>>(pd, py, po, rows, C, in);
    else
        softmax_grad_k<T, false>
            <<<grad_grid(rows), row_threads(C), 0, c->stream>>>(pd, py, po, rows, C, in);
}

int cuda_softmax_grad(cuda_ctx *c, const tensor *dy, const tensor *y, bool log, int64_t after,
                      tensor *out) {
    const char *what = log ? "log_softmax_grad" : "softmax_grad";
    const tensor *t[3] = {out, dy, y};
    if (grad_need_same(c, what, 3, t) < 0)
        return -1;
    tensor *dc = cuda_contiguous(c, dy), *yc = dc ? cuda_contiguous(c, y) : NULL;
    int rc = -1;
    if (yc) {
        int64_t C, in;
        cuda_softmax_axis(out, after, &C, &in);
        int64_t rows = C ? tensor_numel(out) / C : 0;
        rc = 0;
        if (rows > 0) {
            if (out->dtype == DT_F32)
                softmax_grad_launch<float>(c, log, dc, yc, out, rows, C, in);
            else
                softmax_grad_launch<uint16_t>(c, log, dc, yc, out, rows, C, in);
            rc = CUDA_LAUNCHED(c, "softmax_grad<<<>>>");
        }
    }
    cuda_tensor_free(c, dc);
    cuda_tensor_free(c, yc);
    return rc;
}

// ---- CROSS_ENTROPY_GRAD ----------------------------------------------------------------------

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

// per row: (softmax(row) - onehot(t)) * k, zeros for an ignored (or bad) row;
// label smoothing eps makes the one-hot (1 - eps) onehot(t) + eps / C
template <typename T, typename O>
__global__ void __launch_bounds__(1024)
    ce_grad_k(const T *x, const char *tgt, int t64, int64_t tstride, int64_t N, int64_t C,
              int64_t ignore, float eps, const float *kp, O *o) {
    __shared__ float sh[32];
    float k = *kp, ke = k * eps / (float)C;
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
            float v = expf(ldf(xr, j) - m) * ks - ke;
            stf(orow, j, j == t ? v - (k - k * eps) : v);
        }
    }
}

template <typename T, typename O>
static void ce_grad_launch(cuda_ctx *c, const tensor *lc, const tensor *target, int64_t ignore,
                           float eps, const float *k, tensor *out) {
    int64_t N = lc->shape[0], C = lc->shape[1];
    ce_grad_k<T, O><<<grad_grid(N), row_threads(C), 0, c->stream>>>(
        (const T *)tensor_data(lc), (const char *)tensor_data(target), target->dtype == DT_I64,
        target->stride[0], N, C, ignore, eps, k, (O *)tensor_data(out));
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
    float eps = (float)n->fa[0];
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
                ce_grad_launch<float, float>(c, lc, target, ignore, eps, k, out);
            else if (!x16)
                ce_grad_launch<float, uint16_t>(c, lc, target, ignore, eps, k, out);
            else if (!o16)
                ce_grad_launch<uint16_t, float>(c, lc, target, ignore, eps, k, out);
            else
                ce_grad_launch<uint16_t, uint16_t>(c, lc, target, ignore, eps, k, out);
            rc = CUDA_LAUNCHED(c, "cross_entropy_grad<<<>>>");
        }
        cuda_scratch_put(c, k);
    }
    cuda_tensor_free(c, lc);
    return rc;
}
