// F.pad as one kernel (PAD, ops.def), constant or reflect, and its backward
// PAD_GRAD, on operands of any strides: cpu_pad.c's loops, a thread an
// output element. The forward moves bytes (any dtype by element size); the
// backward gathers in f32, so no two threads write one place.
#include "cuda_grad.cuh"

struct pad_geom {
    int nd;
    int64_t mode;
    int64_t shape[PAD_MAX_DIMS], xshape[PAD_MAX_DIMS], lo[PAD_MAX_DIMS], hi[PAD_MAX_DIMS];
    int64_t st_out[PAD_MAX_DIMS], st_in[PAD_MAX_DIMS];
};

// The x row padded row i reads: -1 in a constant pad, mirrored in reflect.
__device__ __forceinline__ int64_t pad_row(int64_t mode, int64_t i, int64_t lo, int64_t L) {
    int64_t j = i - lo;
    if (mode == PAD_REFLECT)
        return j < 0 ? -j : j >= L ? 2 * (L - 1) - j : j;
    return j < 0 || j >= L ? -1 : j;
}

template <typename E> struct pad_f {
    pad_geom g;
    const E *x;
    E *y;
    E fill;
    __device__ void operator()(int64_t i) const {
        int64_t r = i, xo = 0, yo = 0;
        bool in = true;
        for (int d = g.nd - 1; d >= 0; d--) {
            int64_t q = r % g.shape[d], j = pad_row(g.mode, q, g.lo[d], g.xshape[d]);
            r /= g.shape[d];
            yo += q * g.st_out[d];
            in &= j >= 0;
            xo += (j < 0 ? 0 : j) * g.st_in[d];
        }
        y[yo] = in ? x[xo] : fill;
    }
};

// out's geometry (the padded or, for the backward, x's shape) over in.
static pad_geom geom(const graph_node *n, const tensor *out, const tensor *in, const tensor *x) {
    pad_geom g;
    memset(&g, 0, sizeof g);
    g.nd = out->ndim;
    g.mode = n->ia[0];
    for (int d = 0; d < out->ndim; d++) {
        g.shape[d] = out->shape[d];
        g.xshape[d] = x->shape[d];
        g.lo[d] = n->ia[1 + 2 * d];
        g.hi[d] = n->ia[2 + 2 * d];
        g.st_out[d] = out->stride[d];
        g.st_in[d] = in->stride[d];
    }
    return g;
}

template <typename E>
static int pad_typed(cuda_ctx *c, const graph_node *n, const tensor *x, tensor *out, E fill) {
    pad_f<E> f;
    memset(&f, 0, sizeof f);
    f.g = geom(n, out, x, x);
    f.x = (const E *)tensor_data(x);
    f.y = (E *)tensor_data(out);
    f.fill = fill;
    return pw_launch(c, tensor_numel(out), f, "pad<<<>>>");
}

int cuda_pad(cuda_ctx *c, const graph_node *n, const tensor *x, tensor *out) {
    if (x->dtype != out->dtype || out->ndim < 1 || out->ndim > PAD_MAX_DIMS) {
        snprintf(c->err, sizeof c->err, "pad: %s into %s, 1 to %d dims", dtype_name(x->dtype),
                 dtype_name(out->dtype), PAD_MAX_DIMS);
        return -1;
    }
    float v = (float)n->fa[0];
    switch (out->dtype) {
    case DT_F32: {
        uint32_t b;
        memcpy(&b, &v, sizeof b);
        return pad_typed<uint32_t>(c, n, x, out, b);
    }
    case DT_F16:
    case DT_BF16: return pad_typed<uint16_t>(c, n, x, out, dtype_f32_to_half(out->dtype, v));
    case DT_I32: return pad_typed<int32_t>(c, n, x, out, (int32_t)n->fa[0]);
    case DT_I64: return pad_typed<int64_t>(c, n, x, out, (int64_t)n->fa[0]);
    default: return pad_typed<uint8_t>(c, n, x, out, (uint8_t)n->fa[0]);
    }
}

// dx element j of each dim gathers its padded uses: its own row, and in
// reflect the mirrors before and after it
template <typename E> struct pad_grad_f {
    pad_geom g;
    const E *dy;
    E *y;
    __device__ void operator()(int64_t i) const {
        int64_t at[PAD_MAX_DIMS][3], cnt[PAD_MAX_DIMS], pick[PAD_MAX_DIMS], r = i, yo = 0;
        for (int d = g.nd - 1; d >= 0; d--) {
            int64_t j = r % g.shape[d], L = g.shape[d];
            r /= g.shape[d];
            yo += j * g.st_out[d];
            int k = 0;
            at[d][k++] = j + g.lo[d];
            if (g.mode == PAD_REFLECT) {
                if (j >= 1 && j <= g.lo[d])
                    at[d][k++] = g.lo[d] - j;
                if (j <= L - 2 && j >= L - 1 - g.hi[d])
                    at[d][k++] = g.lo[d] + 2 * (L - 1) - j;
            }
            cnt[d] = k;
            pick[d] = 0;
        }
        float acc = 0;
        for (;;) {
            int64_t off = 0;
            for (int d = 0; d < g.nd; d++)
                off += at[d][pick[d]] * g.st_in[d];
            acc += ldf(dy, off);
            int d = g.nd - 1;
            while (d >= 0 && ++pick[d] == cnt[d])
                pick[d--] = 0;
            if (d < 0)
                break;
        }
        stf(y, yo, acc);
    }
};

template <typename E>
static int pad_grad_typed(cuda_ctx *c, const graph_node *n, const tensor *dy, tensor *out) {
    pad_grad_f<E> f;
    memset(&f, 0, sizeof f);
    f.g = geom(n, out, dy, out);
    f.dy = (const E *)tensor_data(dy);
    f.y = (E *)tensor_data(out);
    return pw_launch(c, tensor_numel(out), f, "pad_grad<<<>>>");
}

int cuda_pad_grad(cuda_ctx *c, const graph_node *n, const tensor *dy, tensor *out) {
    const tensor *ops[2] = {dy, out};
    if (grad_need_same(c, "pad_grad", 2, ops) < 0)
        return -1;
    if (out->ndim < 1 || out->ndim > PAD_MAX_DIMS) {
        snprintf(c->err, sizeof c->err, "pad_grad: needs 1 to %d dims", PAD_MAX_DIMS);
        return -1;
    }
    return out->dtype == DT_F32 ? pad_grad_typed<float>(c, n, dy, out)
                                : pad_grad_typed<uint16_t>(c, n, dy, out);
}
