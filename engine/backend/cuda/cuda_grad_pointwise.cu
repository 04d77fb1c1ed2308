// Pointwise training kernels (cuda_grad.cu): a >= b, act_grad,
// slice_grad, mse_loss_grad and bce_loss_grad, cpu_iter's loop nest through pw_make,
// grid-stride, on operands of any strides.
#include "cuda_grad.cuh"

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

// ---- MSE_LOSS_GRAD, BCE_LOSS_GRAD -----------------------------------------------------------

enum { LG_MSE, LG_BCE, LG_BCE_LOGITS };

// out = k d(a, b), k = dloss / numel in double, once a thread: mse's
// 2 (a - b); BCELoss's (p - t) / max(p (1 - p), 1e-12), torch's epsilon;
// the logits form's sigmoid(x) - t
template <typename T>
__global__ void __launch_bounds__(PW_BLOCK)
    loss_grad_k(pw_iter it, const void *dl, int dl16, double numel, int kind) {
    float k = (float)((double)ldv(dl, dl16, 0) / numel);
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < it.n;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t o[3];
        pw_offsets<3>(it, i, o);
        float a = ldf((const T *)it.data[1], o[1]), b = ldf((const T *)it.data[2], o[2]);
        float d = kind == LG_MSE   ? 2 * (a - b)
                  : kind == LG_BCE ? (a - b) / fmaxf(a * (1 - a), 1e-12f)
                                   : 1.0f / (1.0f + expf(-a)) - b;
        stf((T *)it.data[0], o[0], k * d);
    }
}

static int loss_grad(cuda_ctx *c, const char *what, int kind, const tensor *dloss, const tensor *a,
                     const tensor *b, tensor *out) {
    const tensor *t[3] = {out, a, b};
    if (grad_need_same(c, what, 3, t) < 0 || grad_need_float(c, what, dloss) < 0)
        return -1;
    pw_iter it = pw_make(out, 2, t + 1);
    if (it.n <= 0)
        return 0;
    int64_t blocks = (it.n + PW_BLOCK - 1) / PW_BLOCK, cap = (int64_t)c->sm_count * 32;
    unsigned g = (unsigned)(blocks < cap ? blocks : cap > 0 ? cap : 1);
    const void *dl = tensor_data(dloss);
    int dl16 = dloss->dtype == DT_F16;
    if (out->dtype == DT_F32)
        loss_grad_k<float><<<g, PW_BLOCK, 0, c->stream>>>(it, dl, dl16, (double)it.n, kind);
    else
        loss_grad_k<uint16_t><<<g, PW_BLOCK, 0, c->stream>>>(it, dl, dl16, (double)it.n, kind);
    return CUDA_LAUNCHED(c, what);
}

int cuda_mse_loss_grad(cuda_ctx *c, const tensor *dloss, const tensor *a, const tensor *b,
                       tensor *out) {
    return loss_grad(c, "mse_loss_grad", LG_MSE, dloss, a, b, out);
}

int cuda_bce_loss_grad(cuda_ctx *c, const graph_node *n, const tensor *dloss, const tensor *x,
                       const tensor *target, tensor *out) {
    return loss_grad(c, "bce_loss_grad", n->ia[0] ? LG_BCE_LOGITS : LG_BCE, dloss, x, target, out);
}
