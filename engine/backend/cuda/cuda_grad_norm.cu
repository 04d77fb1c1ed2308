// The norms' training kernels (cuda_grad.cu): layer, rms, batch and group
// norm gradients, their statistics recomputed from x one block a set, and
// batch norm in training.
#include "cuda_grad.cuh"
#include "cuda_grad_colsum.cuh"

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
