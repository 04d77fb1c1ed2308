// Gather-style gradients (cuda_grad.cu): pooling, embedding and embedding bags, one
// thread per output element adding its contributions in the CPU's order,
// with no atomics. embedding_grad first sorts the positions by row with
// CUB's stable radix sort; a bad index is recorded on the device and
// reported by the next cuda_ctx_sync.
#include "cuda_grad.cuh"

#include <cub/device/device_radix_sort.cuh>

// ---- MAX_POOL2D_GRAD, AVG_POOL2D_GRAD ----------------------------------------------------

struct pool_geom {
    int64_t H, W, OH, OW, sh, sw, ph, pw, kh, kw, exclude; // exclude: ia7
};

// avg pooling's divisor for window (oh, ow), as ref.c's pool_divisor
__device__ __forceinline__ float pool_cells(const pool_geom &g, int64_t oh, int64_t ow) {
    int64_t h0 = oh * g.sh - g.ph, w0 = ow * g.sw - g.pw, h1 = h0 + g.kh, w1 = w0 + g.kw;
    if (g.exclude) {
        h0 = h0 > 0 ? h0 : 0, w0 = w0 > 0 ? w0 : 0;
        h1 = h1 < g.H ? h1 : g.H, w1 = w1 < g.W ? w1 : g.W;
    } else {
        h1 = h1 < g.H + g.ph ? h1 : g.H + g.ph, w1 = w1 < g.W + g.pw ? w1 : g.W + g.pw;
    }
    return (float)((h1 - h0) * (w1 - w0));
}

// MAX_POOL2D, AVG_POOL2D in ceil mode, whose last windows cuDNN's symmetric
// padding cannot reach: one thread per output, ref.c's rules
template <typename T> struct pool_fwd_f {
    const T *x;
    T *y;
    pool_geom g;
    bool max;
    __device__ void operator()(int64_t i) const {
        int64_t ow = i % g.OW, r = i / g.OW, oh = r % g.OH, p = r / g.OH;
        int64_t h0 = oh * g.sh - g.ph, w0 = ow * g.sw - g.pw;
        int64_t ha = h0 > 0 ? h0 : 0, hb = h0 + g.kh < g.H ? h0 + g.kh : g.H;
        int64_t wa = w0 > 0 ? w0 : 0, wb = w0 + g.kw < g.W ? w0 + g.kw : g.W;
        const T *xp = x + p * g.H * g.W;
        float acc = max ? -INFINITY : 0.0f;
        for (int64_t h = ha; h < hb; h++)
            for (int64_t w = wa; w < wb; w++) {
                float v = ldf(xp, h * g.W + w);
                acc = !max ? acc + v : (v > acc || v != v) ? v : acc;
            }
        stf(y, i, max ? acc : acc / pool_cells(g, oh, ow));
    }
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
// avg pool's dy / pool_cells from each
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
        float acc = 0.0f;
        int32_t me = (int32_t)(h * g.W + w);
        for (int64_t oh = oh0; oh <= oh1; oh++)
            for (int64_t ow = ow0; ow <= ow1; ow++) {
                int64_t j = (p * g.OH + oh) * g.OW + ow;
                if (!best)
                    acc += ldf(dy, j) / pool_cells(g, oh, ow);
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
    pool_geom g = {out->shape[2], out->shape[3], dy->shape[2], dy->shape[3], ia[0], ia[1],
                   ia[2],         ia[3],         ia[4],        ia[5],        ia[7]};
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

int cuda_pool2d_ceil(cuda_ctx *c, const graph_node *n, const tensor *x, tensor *out) {
    const int64_t *ia = n->ia;
    pool_geom g = {x->shape[2], x->shape[3], out->shape[2], out->shape[3], ia[0], ia[1],
                   ia[2],       ia[3],       ia[4],         ia[5],         ia[7]};
    bool max = n->op == OP_MAX_POOL2D;
    tensor *xc = cuda_contiguous(c, x);
    if (!xc)
        return -1;
    int rc = x->dtype == DT_F32
                 ? pw_launch(c, tensor_numel(out),
                             pool_fwd_f<float>{(const float *)tensor_data(xc),
                                               (float *)tensor_data(out), g, max},
                             "pool2d_ceil<<<>>>")
                 : pw_launch(c, tensor_numel(out),
                             pool_fwd_f<uint16_t>{(const uint16_t *)tensor_data(xc),
                                                  (uint16_t *)tensor_data(out), g, max},
                             "pool2d_ceil<<<>>>");
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

// the bag holding position p: the last b with off[b] <= p (EMBEDDING_BAG's
// offsets, ascending from 0)
__device__ __forceinline__ int64_t bag_of(const char *off, int i64, int64_t B, int64_t p) {
    int64_t lo = 0, hi = B;
    while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        int64_t o = i64 ? ((const int64_t *)off)[mid] : ((const int32_t *)off)[mid];
        if (o <= p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo - 1;
}

// one block a row v of out (V, D): its positions (sorted, ascending within
// the row, as the CPU's counting sort leaves them) summed in order, each
// position's dy row its own, or with offsets (B bags) its bag's
template <typename T>
__global__ void __launch_bounds__(1024)
    emb_grad_k(const T *dy, const uint32_t *key, const int32_t *pos, int64_t n, int64_t V,
               int64_t D, const char *off, int off64, int64_t B, T *out) {
    for (int64_t v = blockIdx.x; v < V; v += gridDim.x) {
        int64_t lo = lower_bound(key, n, (uint32_t)v), hi = lower_bound(key, n, (uint32_t)v + 1);
        for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
            float acc = 0.0f;
            for (int64_t k = lo; k < hi; k++) {
                int64_t r = off ? bag_of(off, off64, B, pos[k]) : pos[k];
                if (r >= 0)
                    acc += ldf(dy, r * D + d);
            }
            stf(out, v * D + d, acc);
        }
    }
}

// keys, positions, the sort and the sum; dc, ic and oc (the offsets, or
// NULL) contiguous
template <typename T>
static int emb_grad_run(cuda_ctx *c, const tensor *dc, const tensor *ic, const tensor *oc,
                        int64_t n, int bits, tensor *out) {
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
            (const T *)tensor_data(dc), kout, pout, n, V, D,
            oc ? (const char *)tensor_data(oc) : NULL, oc && oc->dtype == DT_I64,
            oc ? oc->shape[0] : 0, (T *)tensor_data(out));
        rc = CUDA_LAUNCHED(c, "embedding_grad<<<>>>");
    }
    if (buf)
        cuda_scratch_put(c, buf);
    return rc;
}

// EMBEDDING_GRAD, and EMBEDDING_BAG_GRAD when off (the bags' offsets) is given
static int rows_grad(cuda_ctx *c, const char *what, const tensor *dy, const tensor *idx,
                     const tensor *off, tensor *out) {
    if (idx->dtype != DT_I32 && idx->dtype != DT_I64) {
        snprintf(c->err, sizeof c->err, "%s: indices must be i32 or i64, got %s", what,
                 dtype_name(idx->dtype));
        return -1;
    }
    const tensor *t[2] = {out, dy};
    if (grad_need_same(c, what, 2, t) < 0)
        return -1;
    int64_t V = out->shape[0], n = tensor_numel(idx);
    int64_t rows = off ? off->shape[0] : n;
    if (tensor_numel(dy) != rows * out->shape[1]) {
        snprintf(c->err, sizeof c->err, "%s: dy has %lld values for %lld rows of %lld", what,
                 (long long)tensor_numel(dy), (long long)rows, (long long)out->shape[1]);
        return -1;
    }
    if (V >= INT32_MAX || n >= INT32_MAX) {
        snprintf(c->err, sizeof c->err, "%s: %lld rows and %lld indices: both must stay below 2^31",
                 what, (long long)V, (long long)n);
        return -1;
    }
    if (tensor_numel(out) == 0)
        return 0;
    int bits = 1; // keys are in [0, V]: V itself marks a bad index
    while (bits < 32 && ((int64_t)1 << bits) <= V)
        bits++;
    tensor *dc = cuda_contiguous(c, dy), *ic = dc ? cuda_contiguous(c, idx) : NULL;
    tensor *oc = ic && off ? cuda_contiguous(c, off) : NULL;
    int rc = -1;
    if (ic && (oc || !off))
        rc = out->dtype == DT_F32 ? emb_grad_run<float>(c, dc, ic, oc, n, bits, out)
                                  : emb_grad_run<uint16_t>(c, dc, ic, oc, n, bits, out);
    cuda_tensor_free(c, dc);
    cuda_tensor_free(c, ic);
    cuda_tensor_free(c, oc);
    return rc;
}

int cuda_embedding_grad(cuda_ctx *c, const tensor *dy, const tensor *idx, tensor *out) {
    return rows_grad(c, "embedding_grad", dy, idx, NULL, out);
}

int cuda_embedding_bag_grad(cuda_ctx *c, const tensor *dy, const tensor *idx, const tensor *off,
                            tensor *out) {
    if (off->dtype != idx->dtype) {
        snprintf(c->err, sizeof c->err, "embedding_bag_grad: offsets %s, indices %s",
                 dtype_name(off->dtype), dtype_name(idx->dtype));
        return -1;
    }
    return rows_grad(c, "embedding_bag_grad", dy, idx, off, out);
}

// ---- UNFOLD, FOLD ---------------------------------------------------------------------------

// unfold: out[b, (i kw + j), oh OW + ow] per column entry; fold: dx-style
// gather, each pixel summing the columns that read it in (i, j, oh, ow)
// order, as the CPU kernel adds them
template <typename T> struct im2col_f {
    const T *x;
    T *y;
    pool_geom g; // the pooling geometry: H, W the image's, OH, OW the blocks'
    bool un;
    __device__ void operator()(int64_t e) const {
        if (un) {
            int64_t ow = e % g.OW, r = e / g.OW, oh = r % g.OH;
            r /= g.OH;
            int64_t j = r % g.kw, i = (r / g.kw) % g.kh, b = r / (g.kw * g.kh);
            int64_t h = oh * g.sh - g.ph + i, w = ow * g.sw - g.pw + j;
            bool in = h >= 0 && h < g.H && w >= 0 && w < g.W;
            stf(y, e, in ? ldf(x, (b * g.H + h) * g.W + w) : 0.0f);
            return;
        }
        int64_t w = e % g.W, r = e / g.W, h = r % g.H, b = r / g.H;
        float acc = 0.0f;
        for (int64_t i = 0; i < g.kh; i++)
            for (int64_t j = 0; j < g.kw; j++) {
                int64_t th = h + g.ph - i, tw = w + g.pw - j;
                if (th < 0 || tw < 0 || th % g.sh || tw % g.sw || th / g.sh >= g.OH ||
                    tw / g.sw >= g.OW)
                    continue;
                acc += ldf(x, ((b * g.kh + i) * g.kw + j) * g.OH * g.OW + (th / g.sh) * g.OW +
                                  tw / g.sw);
            }
        stf(y, e, acc);
    }
};

int cuda_im2col(cuda_ctx *c, const graph_node *n, const tensor *x, tensor *out) {
    const int64_t *ia = n->ia;
    bool un = n->op == OP_UNFOLD;
    if (x->dtype != out->dtype || (x->dtype != DT_F32 && x->dtype != DT_F16)) {
        snprintf(c->err, sizeof c->err, "%s: f32 or f16 in and out, got %s and %s", op_name(n->op),
                 dtype_name(x->dtype), dtype_name(out->dtype));
        return -1;
    }
    pool_geom g = {ia[6], ia[7], 0, 0, ia[4], ia[5], ia[2], ia[3], ia[0], ia[1], 0}; // no divisor
    g.OH = (g.H + 2 * g.ph - g.kh) / g.sh + 1;
    g.OW = (g.W + 2 * g.pw - g.kw) / g.sw + 1;
    tensor *xc = cuda_contiguous(c, x);
    if (!xc)
        return -1;
    int rc = x->dtype == DT_F32 ? pw_launch(c, tensor_numel(out),
                                            im2col_f<float>{(const float *)tensor_data(xc),
                                                            (float *)tensor_data(out), g, un},
                                            "im2col<<<>>>")
                                : pw_launch(c, tensor_numel(out),
                                            im2col_f<uint16_t>{(const uint16_t *)tensor_data(xc),
                                                               (uint16_t *)tensor_data(out), g, un},
                                            "im2col<<<>>>");
    cuda_tensor_free(c, xc);
    return rc;
}
