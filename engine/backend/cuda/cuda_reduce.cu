// Reductions, softmax, norms and losses (cuda_rt.h). A reduction over the
// last axis runs one block per row (threads stride the row, then a warp
// shuffle and shared-memory tree); over another axis, one thread per output
// walks the axis with coalesced reads. Variances are two-pass, as on the
// CPU. Inputs are made contiguous first (a counted copy when they are
// views), except batch norm, which is elementwise.
#include "cuda_pointwise.cuh"

enum { RED_SUM, RED_MAX };

// Rows beyond the grid are covered by a grid-stride loop.
static unsigned row_grid(int64_t rows) { return (unsigned)(rows < (1 << 20) ? rows : (1 << 20)); }

// ---- SUM, MEAN, MAX ----------------------------------------------------------

template <typename T, int MODE>
__global__ void __launch_bounds__(1024)
    reduce_rows(const T *x, T *y, int64_t rows, int64_t R, float mul) {
    __shared__ float sh[32];
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const T *xr = x + row * R;
        float acc = MODE == RED_MAX ? -INFINITY : 0.0f;
        for (int64_t j = threadIdx.x; j < R; j += blockDim.x) {
            float v = ldf(xr, j);
            acc = MODE == RED_MAX ? tc_maximum(v, acc) : acc + v;
        }
        acc = MODE == RED_MAX ? tc_block_max(acc, sh) : tc_block_sum(acc, sh);
        if (threadIdx.x == 0)
            stf(y, row, acc * mul);
    }
}

// (outer, R, inner) -> (outer, inner), one thread per output
template <typename T, int MODE>
__global__ void reduce_cols(const T *x, T *y, int64_t outer, int64_t R, int64_t inner, float mul) {
    int64_t total = outer * inner, step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += step) {
        const T *src = x + (t / inner) * R * inner + t % inner;
        float acc = MODE == RED_MAX ? -INFINITY : 0.0f;
        for (int64_t r = 0; r < R; r++) {
            float v = ldf(src, r * inner);
            acc = MODE == RED_MAX ? tc_maximum(v, acc) : acc + v;
        }
        stf(y, t, acc * mul);
    }
}

template <typename T>
static int reduce_typed(cuda_ctx *c, int mode, const tensor *x, tensor *out, int ax, float mul) {
    int64_t outer = 1, inner = 1, R = x->shape[ax];
    for (int d = 0; d < ax; d++)
        outer *= x->shape[d];
    for (int d = ax + 1; d < x->ndim; d++)
        inner *= x->shape[d];
    const T *px = (const T *)tensor_data(x);
    T *py = (T *)tensor_data(out);
    if (outer * inner == 0)
        return 0;
    if (inner == 1) {
        int t = row_threads(R);
        if (mode == RED_MAX)
            reduce_rows<T, RED_MAX><<<row_grid(outer), t, 0, c->stream>>>(px, py, outer, R, mul);
        else
            reduce_rows<T, RED_SUM><<<row_grid(outer), t, 0, c->stream>>>(px, py, outer, R, mul);
    } else {
        int64_t blocks = (outer * inner + 255) / 256;
        unsigned g = (unsigned)(blocks < (1 << 20) ? blocks : (1 << 20));
        if (mode == RED_MAX)
            reduce_cols<T, RED_MAX><<<g, 256, 0, c->stream>>>(px, py, outer, R, inner, mul);
        else
            reduce_cols<T, RED_SUM><<<g, 256, 0, c->stream>>>(px, py, outer, R, inner, mul);
    }
    return CUDA_LAUNCHED(c, "reduce<<<>>>");
}

int cuda_reduce(cuda_ctx *c, const graph_node *n, const tensor *x, tensor *out) {
    if (x->dtype != DT_F32 && x->dtype != DT_F16)
        return cuda_pw_fail(c, op_name(n->op), x->dtype);
    tensor *xc = cuda_contiguous(c, x);
    if (!xc)
        return -1;
    int ax = (int)n->ia[0], mode = n->op == OP_MAX ? RED_MAX : RED_SUM;
    float mul = n->op == OP_MEAN ? 1.0f / (float)x->shape[ax] : 1.0f;
    int rc = x->dtype == DT_F32 ? reduce_typed<float>(c, mode, xc, out, ax, mul)
                                : reduce_typed<uint16_t>(c, mode, xc, out, ax, mul);
    cuda_tensor_free(c, xc);
    return rc;
}

// ---- softmax and log_softmax over any axis --------------------------------------

// a row is the C elements of one (outer, inner) pair, `in` apart (1: the
// last axis, contiguous)
template <typename T, bool LOG>
__global__ void __launch_bounds__(1024)
    softmax_rows(const T *x, T *y, int64_t rows, int64_t C, int64_t in) {
    __shared__ float sh[32];
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        int64_t at = row / in * C * in + row % in;
        const T *xr = x + at;
        T *yr = y + at;
        float m = -INFINITY, s = 0.0f;
        for (int64_t j = threadIdx.x; j < C; j += blockDim.x)
            m = tc_maximum(ldf(xr, j * in), m);
        m = tc_block_max(m, sh);
        for (int64_t j = threadIdx.x; j < C; j += blockDim.x)
            s += expf(ldf(xr, j * in) - m);
        s = tc_block_sum(s, sh);
        if (LOG) {
            float lse = m + logf(s);
            for (int64_t j = threadIdx.x; j < C; j += blockDim.x)
                stf(yr, j * in, ldf(xr, j * in) - lse);
        } else {
            float inv = 1.0f / s;
            for (int64_t j = threadIdx.x; j < C; j += blockDim.x)
                stf(yr, j * in, expf(ldf(xr, j * in) - m) * inv);
        }
    }
}

void cuda_softmax_axis(const tensor *t, int64_t after, int64_t *C, int64_t *inner) {
    int ax = t->ndim - 1 - (int)after;
    *C = ax >= 0 ? t->shape[ax] : 1;
    *inner = 1;
    for (int d = ax + 1; d < t->ndim; d++)
        *inner *= t->shape[d];
}

int cuda_softmax(cuda_ctx *c, const tensor *x, bool log, int64_t after, tensor *out) {
    const char *name = log ? "log_softmax" : "softmax";
    if (x->dtype != DT_F32 && x->dtype != DT_F16)
        return cuda_pw_fail(c, name, x->dtype);
    tensor *xc = cuda_contiguous(c, x);
    if (!xc)
        return -1;
    int64_t C, in;
    cuda_softmax_axis(xc, after, &C, &in);
    int64_t rows = C ? tensor_numel(xc) / C : 0;
    if (rows > 0) {
        unsigned g = row_grid(rows);
        int t = row_threads(C);
        if (x->dtype == DT_F32) {
            const float *px = (const float *)tensor_data(xc);
            float *py = (float *)tensor_data(out);
            if (log)
                softmax_rows<float, true><<<g, t, 0, c->stream>>>(px, py, rows, C, in);
            else
                softmax_rows<float, false><<<g, t, 0, c->stream>>>(px, py, rows, C, in);
        } else {
            const uint16_t *px = (const uint16_t *)tensor_data(xc);
            uint16_t *py = (uint16_t *)tensor_data(out);
            if (log)
                softmax_rows<uint16_t, true><<<g, t, 0, c->stream>>>(px, py, rows, C, in);
            else
                softmax_rows<uint16_t, false><<<g, t, 0, c->stream>>>(px, py, rows, C, in);
        }
    }
    int rc = rows > 0 ? CUDA_LAUNCHED(c, "softmax<<<>>>") : 0;
    cuda_tensor_free(c, xc);
    return rc;
}

// ---- norms -------------------------------------------------------------------------

// layer_norm (b given) and rms_norm (b NULL) over the last axis
template <typename T>
__global__ void __launch_bounds__(1024)
    norm_rows(const T *x, const void *w, const void *b, int pf16, T *y, int64_t rows, int64_t C,
              float eps) {
    __shared__ float sh[32];
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const T *xr = x + row * C;
        T *yr = y + row * C;
        float mean = 0.0f, ss = 0.0f;
        if (b) {
            for (int64_t j = threadIdx.x; j < C; j += blockDim.x)
                mean += ldf(xr, j);
            mean = tc_block_sum(mean, sh) / (float)C;
        }
        for (int64_t j = threadIdx.x; j < C; j += blockDim.x) {
            float d = ldf(xr, j) - mean;
            ss += d * d;
        }
        float rstd = 1.0f / sqrtf(tc_block_sum(ss, sh) / (float)C + eps);
        for (int64_t j = threadIdx.x; j < C; j += blockDim.x) {
            float v = (ldf(xr, j) - mean) * rstd * ldv(w, pf16, j);
            stf(yr, j, b ? v + ldv(b, pf16, j) : v);
        }
    }
}

// Checks x's dtype and that the parameters are contiguous vectors of one
// float dtype; *pf16 says which.
static int norm_params(cuda_ctx *c, const char *what, const tensor *x, int np,
                       const tensor *const *p, int *pf16) {
    if (x->dtype != DT_F32 && x->dtype != DT_F16)
        return cuda_pw_fail(c, what, x->dtype);
    *pf16 = -1;
    for (int i = 0; i < np; i++) {
        if (!p[i])
            continue;
        int f16 = p[i]->dtype == DT_F16;
        if ((p[i]->dtype != DT_F32 && !f16) || (*pf16 >= 0 && *pf16 != f16))
            return cuda_pw_fail(c, what, p[i]->dtype);
        if (!tensor_is_contiguous(p[i])) {
            snprintf(c->err, sizeof c->err, "%s: parameter %d is not contiguous", what, i + 1);
            return -1;
        }
        *pf16 = f16;
    }
    if (*pf16 < 0)
        *pf16 = 0;
    return 0;
}

int cuda_layer_norm(cuda_ctx *c, const tensor *x, const tensor *w, const tensor *b, double eps,
                    tensor *out) {
    int pf16 = 0;
    const tensor *p[2] = {w, b};
    if (norm_params(c, b ? "layer_norm" : "rms_norm", x, 2, p, &pf16) < 0)
        return -1;
    tensor *xc = cuda_contiguous(c, x);
    if (!xc)
        return -1;
    int64_t C = xc->shape[xc->ndim - 1], rows = tensor_numel(xc) / C;
    const void *pw = tensor_data(w), *pb = b ? tensor_data(b) : NULL;
    unsigned g = row_grid(rows);
    int t = row_threads(C);
    if (x->dtype == DT_F32)
        norm_rows<float><<<g, t, 0, c->stream>>>((const float *)tensor_data(xc), pw, pb, pf16,
                                                 (float *)tensor_data(out), rows, C, (float)eps);
    else
        norm_rows<uint16_t><<<g, t, 0, c->stream>>>((const uint16_t *)tensor_data(xc), pw, pb, pf16,
                                                    (uint16_t *)tensor_data(out), rows, C,
                                                    (float)eps);
    int rc = CUDA_LAUNCHED(c, "norm_rows<<<>>>");
    cuda_tensor_free(c, xc);
    return rc;
}

// y = (x - mean[c]) * w[c] / sqrt(var[c] + eps) + b[c], elementwise
template <typename T> struct batch_norm_f {
    pw_iter it;
    const void *w, *b, *mean, *var;
    int pf16 = 0;
    int64_t C, S;
    float eps;
    __device__ void operator()(int64_t i) const {
        int64_t o[2];
        pw_offsets<2>(it, i, o);
        int64_t ch = (i / S) % C;
        float s = ldv(w, pf16, ch) / sqrtf(ldv(var, pf16, ch) + eps);
        float v = (ldf((const T *)it.data[1], o[1]) - ldv(mean, pf16, ch)) * s + ldv(b, pf16, ch);
        stf((T *)it.data[0], o[0], v);
    }
};

int cuda_batch_norm(cuda_ctx *c, const tensor *x, const tensor *w, const tensor *b,
                    const tensor *mean, const tensor *var, double eps, tensor *out) {
    int pf16 = 0;
    const tensor *p[4] = {w, b, mean, var};
    if (norm_params(c, "batch_norm", x, 4, p, &pf16) < 0)
        return -1;
    int64_t N = x->shape[0], C = x->shape[1], S = tensor_numel(x) / (N * C);
    pw_iter it = pw_make(out, 1, &x);
    const void *pw = tensor_data(w), *pb = tensor_data(b);
    const void *pm = tensor_data(mean), *pv = tensor_data(var);
    if (x->dtype == DT_F32)
        return pw_launch(c, it.n, batch_norm_f<float>{it, pw, pb, pm, pv, pf16, C, S, (float)eps},
                         "batch_norm<<<>>>");
    return pw_launch(c, it.n, batch_norm_f<uint16_t>{it, pw, pb, pm, pv, pf16, C, S, (float)eps},
                     "batch_norm<<<>>>");
}

// one block per (n, group) of Cg * S contiguous elements
template <typename T>
__global__ void __launch_bounds__(1024)
    group_norm_k(const T *x, const void *w, const void *b, int pf16, T *y, int64_t ngroups,
                 int64_t G, int64_t Cg, int64_t S, float eps) {
    __shared__ float sh[32];
    int64_t len = Cg * S;
    for (int64_t ng = blockIdx.x; ng < ngroups; ng += gridDim.x) {
        const T *src = x + ng * len;
        T *dst = y + ng * len;
        float mean = 0.0f, ss = 0.0f;
        for (int64_t j = threadIdx.x; j < len; j += blockDim.x)
            mean += ldf(src, j);
        mean = tc_block_sum(mean, sh) / (float)len;
        for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
            float d = ldf(src, j) - mean;
            ss += d * d;
        }
        float rstd = 1.0f / sqrtf(tc_block_sum(ss, sh) / (float)len + eps);
        for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
            int64_t ch = (ng % G) * Cg + j / S;
            stf(dst, j, (ldf(src, j) - mean) * rstd * ldv(w, pf16, ch) + ldv(b, pf16, ch));
        }
    }
}

int cuda_group_norm(cuda_ctx *c, const tensor *x, const tensor *w, const tensor *b, int64_t groups,
                    double eps, tensor *out) {
    int pf16 = 0;
    const tensor *p[2] = {w, b};
    if (norm_params(c, "group_norm", x, 2, p, &pf16) < 0)
        return -1;
    tensor *xc = cuda_contiguous(c, x);
    if (!xc)
        return -1;
    int64_t N = xc->shape[0], C = xc->shape[1], S = tensor_numel(xc) / (N * C), Cg = C / groups;
    unsigned g = row_grid(N * groups);
    int t = row_threads(Cg * S);
    if (x->dtype == DT_F32)
        group_norm_k<float><<<g, t, 0, c->stream>>>((const float *)tensor_data(xc), tensor_data(w),
                                                    tensor_data(b), pf16, (float *)tensor_data(out),
                                                    N * groups, groups, Cg, S, (float)eps);
    else
        group_norm_k<uint16_t><<<g, t, 0, c->stream>>>(
            (const uint16_t *)tensor_data(xc), tensor_data(w), tensor_data(b), pf16,
            (uint16_t *)tensor_data(out), N * groups, groups, Cg, S, (float)eps);
    int rc = CUDA_LAUNCHED(c, "group_norm<<<>>>");
    cuda_tensor_free(c, xc);
    return rc;
}

// ---- losses --------------------------------------------------------------------------

// per row: (loss, 1) for a counted row, (0, 0) for an ignored or bad one
template <typename T>
__global__ void __launch_bounds__(1024)
    ce_rows(const T *x, const char *tgt, int t64, int64_t tstride, int64_t N, int64_t C,
            int64_t ignore, float eps, float *loss, float *valid, cuda_dev_error *err) {
    __shared__ float sh[32];
    for (int64_t row = blockIdx.x; row < N; row += gridDim.x) {
        int64_t t =
            t64 ? ((const int64_t *)tgt)[row * tstride] : ((const int32_t *)tgt)[row * tstride];
        if (t == ignore || t < 0 || t >= C) { // uniform across the block
            if (threadIdx.x == 0) {
                loss[row] = valid[row] = 0.0f;
                if (t != ignore)
                    dev_error(err, CUDA_DEVERR_TARGET, t, row, C);
            }
            continue;
        }
        const T *xr = x + row * C;
        float m = -INFINITY, s = 0.0f;
        for (int64_t j = threadIdx.x; j < C; j += blockDim.x)
            m = tc_maximum(ldf(xr, j), m);
        m = tc_block_max(m, sh);
        float all = 0.0f; // label smoothing: -log p_i = lse - x_i, mixed
        for (int64_t j = threadIdx.x; j < C; j += blockDim.x) {
            s += expf(ldf(xr, j) - m);
            all += ldf(xr, j);
        }
        s = tc_block_sum(s, sh);
        all = eps != 0.0f ? tc_block_sum(all, sh) : 0.0f;
        if (threadIdx.x == 0) {
            loss[row] = m + logf(s) - (1.0f - eps) * ldf(xr, t) - eps * all / (float)C;
            valid[row] = 1.0f;
        }
    }
}

// out = sum(v) / (w ? sum(w) : denom) in double, one block of 1024 threads;
// 0 / 0 gives NaN, as PyTorch's mean over nothing
__global__ void __launch_bounds__(1024)
    finalize_mean(const float *v, const float *w, int64_t n, double denom, float *out) {
    __shared__ double sv[1024], sw[1024];
    double a = 0, b = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        a += v[i];
        b += w ? w[i] : 0.0;
    }
    sv[threadIdx.x] = a;
    sw[threadIdx.x] = b;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) {
            sv[threadIdx.x] += sv[threadIdx.x + s];
            sw[threadIdx.x] += sw[threadIdx.x + s];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        double d = w ? sw[0] : denom;
        *out = (float)(sv[0] / d);
    }
}

int cuda_cross_entropy(cuda_ctx *c, const tensor *logits, const tensor *target, int64_t ignore,
                       double smoothing, tensor *out) {
    if (logits->dtype != DT_F32 && logits->dtype != DT_F16)
        return cuda_pw_fail(c, "cross_entropy", logits->dtype);
    if (target->dtype != DT_I32 && target->dtype != DT_I64) {
        snprintf(c->err, sizeof c->err, "cross_entropy: targets must be i32 or i64, got %s",
                 dtype_name(target->dtype));
        return -1;
    }
    tensor *lc = cuda_contiguous(c, logits);
    if (!lc)
        return -1;
    int64_t N = lc->shape[0], C = lc->shape[1];
    float *scratch = (float *)cuda_scratch_get(c, (size_t)(2 * (N > 0 ? N : 1)) * sizeof(float));
    int rc = -1;
    if (scratch) {
        const char *pt = (const char *)tensor_data(target);
        int t64 = target->dtype == DT_I64;
        if (N > 0) {
            if (logits->dtype == DT_F32)
                ce_rows<float><<<row_grid(N), row_threads(C), 0, c->stream>>>(
                    (const float *)tensor_data(lc), pt, t64, target->stride[0], N, C, ignore,
                    (float)smoothing, scratch, scratch + N, c->deverr);
            else
                ce_rows<uint16_t><<<row_grid(N), row_threads(C), 0, c->stream>>>(
                    (const uint16_t *)tensor_data(lc), pt, t64, target->stride[0], N, C, ignore,
                    (float)smoothing, scratch, scratch + N, c->deverr);
            rc = CUDA_LAUNCHED(c, "cross_entropy_rows<<<>>>");
        } else {
            rc = 0;
        }
        if (rc == 0) {
            finalize_mean<<<1, 1024, 0, c->stream>>>(scratch, scratch + N, N, 0.0,
                                                     (float *)tensor_data(out));
            rc = CUDA_LAUNCHED(c, "finalize_mean<<<>>>");
        }
        cuda_scratch_put(c, scratch);
    }
    cuda_tensor_free(c, lc);
    return rc;
}

// block partial sums of (a - b)^2
template <typename T>
__global__ void sq_diff_partial(const T *a, const T *b, int64_t n, float *part) {
    __shared__ float sh[32];
    float s = 0.0f;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        float d = ldf(a, i) - ldf(b, i);
        s += d * d;
    }
    s = tc_block_sum(s, sh);
    if (threadIdx.x == 0)
        part[blockIdx.x] = s;
}

// block partial sums of binary cross entropy: logits, or probabilities with
// each log clamped at -100 (torch's binary_cross_entropy)
template <typename T>
__global__ void bce_partial(const T *x, const T *t, int64_t n, int logits, float *part) {
    __shared__ float sh[32];
    float s = 0.0f;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        float v = ldf(x, i), y = ldf(t, i);
        s += logits ? fmaxf(v, 0.0f) - v * y + log1pf(expf(-fabsf(v)))
                    : -(y * fmaxf(logf(v), -100.0f) + (1 - y) * fmaxf(logf(1 - v), -100.0f));
    }
    s = tc_block_sum(s, sh);
    if (threadIdx.x == 0)
        part[blockIdx.x] = s;
}

int cuda_bce_loss(cuda_ctx *c, const graph_node *nd, const tensor *x, const tensor *t,
                  tensor *out) {
    if ((x->dtype != DT_F32 && x->dtype != DT_F16) || t->dtype != x->dtype)
        return cuda_pw_fail(c, "bce_loss", x->dtype);
    tensor *xc = cuda_contiguous(c, x), *tc = xc ? cuda_contiguous(c, t) : NULL;
    int64_t n = tensor_numel(x), blocks = (n + 1023) / 1024;
    blocks = blocks > 1024 ? 1024 : blocks < 1 ? 1 : blocks;
    float *part = tc ? (float *)cuda_scratch_get(c, (size_t)blocks * sizeof(float)) : NULL;
    int rc = -1, logits = (int)nd->ia[0];
    if (part) {
        if (x->dtype == DT_F32)
            bce_partial<float><<<(unsigned)blocks, 256, 0, c->stream>>>(
                (const float *)tensor_data(xc), (const float *)tensor_data(tc), n, logits, part);
        else
            bce_partial<uint16_t><<<(unsigned)blocks, 256, 0, c->stream>>>(
                (const uint16_t *)tensor_data(xc), (const uint16_t *)tensor_data(tc), n, logits,
                part);
        rc = CUDA_LAUNCHED(c, "bce_partial<<<>>>");
        if (rc == 0) {
            finalize_mean<<<1, 1024, 0, c->stream>>>(part, NULL, blocks, (double)n,
                                                     (float *)tensor_data(out));
            rc = CUDA_LAUNCHED(c, "finalize_mean<<<>>>");
        }
        cuda_scratch_put(c, part);
    }
    cuda_tensor_free(c, xc);
    cuda_tensor_free(c, tc);
    return rc;
}

int cuda_mse_loss(cuda_ctx *c, const tensor *a, const tensor *b, tensor *out) {
    if ((a->dtype != DT_F32 && a->dtype != DT_F16) || b->dtype != a->dtype)
        return cuda_pw_fail(c, "mse_loss", a->dtype);
    tensor *ac = cuda_contiguous(c, a), *bc = ac ? cuda_contiguous(c, b) : NULL;
    int64_t n = tensor_numel(a), blocks = (n + 1023) / 1024;
    if (blocks > 1024)
        blocks = 1024;
    if (blocks < 1)
        blocks = 1;
    float *part = bc ? (float *)cuda_scratch_get(c, (size_t)blocks * sizeof(float)) : NULL;
    int rc = -1;
    if (part) {
        if (a->dtype == DT_F32)
            sq_diff_partial<float><<<(unsigned)blocks, 256, 0, c->stream>>>(
                (const float *)tensor_data(ac), (const float *)tensor_data(bc), n, part);
        else
            sq_diff_partial<uint16_t><<<(unsigned)blocks, 256, 0, c->stream>>>(
                (const uint16_t *)tensor_data(ac), (const uint16_t *)tensor_data(bc), n, part);
        rc = CUDA_LAUNCHED(c, "mse_partial<<<>>>");
        if (rc == 0) {
            finalize_mean<<<1, 1024, 0, c->stream>>>(part, NULL, blocks, (double)n,
                                                     (float *)tensor_data(out));
            rc = CUDA_LAUNCHED(c, "finalize_mean<<<>>>");
        }
        cuda_scratch_put(c, part);
    }
    cuda_tensor_free(c, ac);
    cuda_tensor_free(c, bc);
    return rc;
}
