// F.grid_sample, bilinear (GRID_SAMPLE, ops.def), and with no grid the
// bilinear upsample (UPSAMPLE_BILINEAR), and their backward, as
// cpu_grid_sample.c: a thread an output position (b, ho, wo) looping over the
// channels. dx scatters onto the four taps with f32 atomics, as PyTorch's
// backward does, into the output when it is f32 or else an f32 scratch cast
// after; d grid gathers. Any strides; f32, f16 or bf16, math in f32.
#include "cuda_pointwise.cuh"

struct gs_geom {
    int64_t N, C, H, W, Ho, Wo;
    int64_t pad, align;
    int64_t sx[4], sg[4], sd[4], so[4]; // strides of x (or dx), grid, dy, out
};

struct gs_taps {
    int64_t off[4]; // in an (H, W) plane by x's strides; -1 outside
    float w[4], tx, ty, dgx, dgy;
};

__device__ __forceinline__ float gs_coord(const gs_geom &g, float v, int64_t size, float *dg) {
    float c = g.align ? (v + 1) / 2 * (float)(size - 1) : ((v + 1) * (float)size - 1) / 2;
    *dg = g.align ? (float)(size - 1) / 2 : (float)size / 2;
    if (g.pad == GRID_PAD_BORDER && (c < 0 || c > (float)(size - 1))) {
        *dg = 0;
        c = c < 0 ? 0 : (float)(size - 1);
    }
    return c;
}

// upsample_bilinear2d's source index of output o, clamped to the edges
__device__ __forceinline__ float up_coord(const gs_geom &g, int64_t o, int64_t in, int64_t out) {
    float c = g.align ? (out > 1 ? (float)(in - 1) / (float)(out - 1) * (float)o : 0.0f)
                      : (float)in / (float)out * ((float)o + 0.5f) - 0.5f;
    return c < 0 ? 0.0f : c > (float)(in - 1) ? (float)(in - 1) : c;
}

// position (ho, wo) of batch b at the grid, or upsampled with no grid
template <typename E>
__device__ gs_taps gs_at(const gs_geom &g, const E *grid, int64_t b, int64_t ho, int64_t wo) {
    gs_taps t;
    t.dgx = t.dgy = 0;
    float ix, iy;
    if (grid) {
        int64_t o = b * g.sg[0] + ho * g.sg[1] + wo * g.sg[2];
        ix = gs_coord(g, ldf(grid, o), g.W, &t.dgx);
        iy = gs_coord(g, ldf(grid, o + g.sg[3]), g.H, &t.dgy);
    } else {
        ix = up_coord(g, wo, g.W, g.Wo), iy = up_coord(g, ho, g.H, g.Ho);
    }
    float x0 = floorf(ix), y0 = floorf(iy);
    t.tx = ix - x0, t.ty = iy - y0;
    for (int k = 0; k < 4; k++) {
        int64_t xi = (int64_t)x0 + (k & 1), yi = (int64_t)y0 + (k >> 1);
        bool in = xi >= 0 && xi < g.W && yi >= 0 && yi < g.H;
        t.off[k] = in ? yi * g.sx[2] + xi * g.sx[3] : -1;
        t.w[k] = ((k & 1) ? t.tx : 1 - t.tx) * ((k >> 1) ? t.ty : 1 - t.ty);
    }
    return t;
}

// output position i of (N, Ho, Wo): its batch, row, column and taps
template <typename E>
__device__ gs_taps gs_pos(const gs_geom &g, const E *grid, int64_t i, int64_t *b, int64_t *ho,
                          int64_t *wo) {
    *wo = i % g.Wo, *ho = (i / g.Wo) % g.Ho, *b = i / (g.Wo * g.Ho);
    return gs_at(g, grid, *b, *ho, *wo);
}

// x[b, ch] at the four taps, 0 outside
template <typename E>
__device__ void gs_values(const gs_geom &g, const E *x, int64_t b, int64_t ch, const gs_taps &t,
                          float *v) {
    int64_t xb = b * g.sx[0] + ch * g.sx[1];
    for (int k = 0; k < 4; k++)
        v[k] = t.off[k] >= 0 ? ldf(x, xb + t.off[k]) : 0.0f;
}

template <typename E> struct gs_fwd_f {
    gs_geom g;
    const E *x, *grid;
    E *y;
    __device__ void operator()(int64_t i) const {
        int64_t b, ho, wo;
        gs_taps t = gs_pos(g, grid, i, &b, &ho, &wo);
        for (int64_t ch = 0; ch < g.C; ch++) {
            float v4[4], v = 0;
            gs_values(g, x, b, ch, t, v4);
            for (int k = 0; k < 4; k++)
                v += t.w[k] * v4[k];
            stf(y, b * g.so[0] + ch * g.so[1] + ho * g.so[2] + wo * g.so[3], v);
        }
    }
};

// dx into acc (contiguous f32 (N, C, H, W), zeroed): g.sx are acc's strides
template <typename E> struct gs_dx_f {
    gs_geom g;
    const E *dy, *grid;
    float *acc;
    __device__ void operator()(int64_t i) const {
        int64_t b, ho, wo;
        gs_taps t = gs_pos(g, grid, i, &b, &ho, &wo);
        for (int64_t ch = 0; ch < g.C; ch++) {
            float d = ldf(dy, b * g.sd[0] + ch * g.sd[1] + ho * g.sd[2] + wo * g.sd[3]);
            float *plane = acc + b * g.sx[0] + ch * g.sx[1];
            for (int k = 0; k < 4; k++)
                if (t.off[k] >= 0)
                    atomicAdd(plane + t.off[k], t.w[k] * d);
        }
    }
};

struct gs_zero_f {
    float *acc;
    __device__ void operator()(int64_t i) const { acc[i] = 0; }
};

// the f32 sums into out's dtype and strides
template <typename E> struct gs_cast_f {
    gs_geom g;
    const float *acc;
    E *out;
    __device__ void operator()(int64_t i) const {
        int64_t w = i % g.W, h = (i / g.W) % g.H, ch = (i / (g.W * g.H)) % g.C,
                b = i / (g.W * g.H * g.C);
        stf(out, b * g.so[0] + ch * g.so[1] + h * g.so[2] + w * g.so[3], acc[i]);
    }
};

template <typename E> struct gs_dgrid_f {
    gs_geom g;
    const E *dy, *x, *grid;
    E *out;
    __device__ void operator()(int64_t i) const {
        int64_t b, ho, wo;
        gs_taps t = gs_pos(g, grid, i, &b, &ho, &wo);
        float gx = 0, gy = 0;
        for (int64_t ch = 0; ch < g.C; ch++) {
            float v[4];
            gs_values(g, x, b, ch, t, v);
            float d = ldf(dy, b * g.sd[0] + ch * g.sd[1] + ho * g.sd[2] + wo * g.sd[3]);
            gx += d * ((1 - t.ty) * (v[1] - v[0]) + t.ty * (v[3] - v[2]));
            gy += d * ((1 - t.tx) * (v[2] - v[0]) + t.tx * (v[3] - v[1]));
        }
        int64_t o = b * g.so[0] + ho * g.so[1] + wo * g.so[2];
        stf(out, o, gx * t.dgx);
        stf(out, o + g.so[3], gy * t.dgy);
    }
};

// The geometry of x (N, C, H, W) (or dx) sampled into hw (N, C, Ho, Wo)
// by the grid, or upsampled when it is NULL.
static gs_geom geom(const graph_node *n, const tensor *x, const tensor *grid, const tensor *dy,
                    const tensor *out, const tensor *hw) {
    gs_geom g;
    memset(&g, 0, sizeof g);
    g.N = x->shape[0], g.C = x->shape[1], g.H = x->shape[2], g.W = x->shape[3];
    g.Ho = hw->shape[2], g.Wo = hw->shape[3];
    g.pad = n->ia[0], g.align = n->ia[1];
    for (int d = 0; d < 4; d++) {
        g.sx[d] = x->stride[d];
        g.sg[d] = grid ? grid->stride[d] : 0;
        g.sd[d] = dy ? dy->stride[d] : 0;
        g.so[d] = out->stride[d];
    }
    return g;
}

// dx: f32 atomics into out, or into an f32 scratch cast into out after
template <typename E>
static int dx_typed(cuda_ctx *c, gs_geom g, const E *dy, const E *grid, tensor *out) {
    int64_t numel = tensor_numel(out);
    bool direct = out->dtype == DT_F32 && tensor_is_contiguous(out);
    float *acc = direct ? (float *)tensor_data(out)
                        : (float *)cuda_scratch_get(c, (size_t)numel * sizeof(float));
    if (!acc) {
        snprintf(c->err, sizeof c->err, "grid_sample_grad: no scratch for %lld floats",
                 (long long)numel);
        return -1;
    }
    g.sx[3] = 1, g.sx[2] = g.W, g.sx[1] = g.H * g.W, g.sx[0] = g.C * g.H * g.W;
    gs_zero_f zero = {acc};
    int rc = pw_launch(c, numel, zero, "grid_sample_grad_zero<<<>>>");
    gs_dx_f<E> f = {g, dy, grid, acc};
    if (rc == 0)
        rc = pw_launch(c, g.N * g.Ho * g.Wo, f, "grid_sample_grad<<<>>>");
    if (!direct) {
        gs_cast_f<E> cast = {g, acc, (E *)tensor_data(out)};
        if (rc == 0)
            rc = pw_launch(c, numel, cast, "grid_sample_grad_cast<<<>>>");
        cuda_scratch_put(c, acc);
    }
    return rc;
}

enum { GS_FWD, GS_DX, GS_DGRID };

// x the sampled image (dx's shape for GS_DX), dy the gradient (GS_DX, GS_DGRID)
template <typename E>
static int run_typed(cuda_ctx *c, int which, const graph_node *n, const tensor *dy, const tensor *x,
                     const tensor *grid, tensor *out) {
    const E *pg = grid ? (const E *)tensor_data(grid) : NULL;
    const E *pd = dy ? (const E *)tensor_data(dy) : NULL;
    gs_geom g = geom(n, x, grid, dy, out, which == GS_FWD ? out : dy);
    if (which == GS_DX)
        return dx_typed<E>(c, g, pd, pg, out);
    if (which == GS_DGRID) {
        gs_dgrid_f<E> f = {g, pd, (const E *)tensor_data(x), pg, (E *)tensor_data(out)};
        return pw_launch(c, g.N * g.Ho * g.Wo, f, "grid_sample_grad_grid<<<>>>");
    }
    gs_fwd_f<E> f = {g, (const E *)tensor_data(x), pg, (E *)tensor_data(out)};
    return pw_launch(c, g.N * g.Ho * g.Wo, f, "grid_sample<<<>>>");
}

// every operand given 4-d, of one float dtype
static int run(cuda_ctx *c, const char *what, int which, const graph_node *n, const tensor *dy,
               const tensor *x, const tensor *grid, tensor *out) {
    const tensor *t[4] = {out, dy, x, grid};
    for (int i = 0; i < 4; i++)
        if (t[i] && (t[i]->ndim != 4 || t[i]->dtype != out->dtype ||
                     (out->dtype != DT_F32 && !dtype_is_half(out->dtype)))) {
            snprintf(c->err, sizeof c->err, "%s: needs 4-d operands of one float dtype", what);
            return -1;
        }
    return out->dtype == DT_F32 ? run_typed<float>(c, which, n, dy, x, grid, out)
                                : run_typed<uint16_t>(c, which, n, dy, x, grid, out);
}

int cuda_grid_sample(cuda_ctx *c, const graph_node *n, const tensor *x, const tensor *grid,
                     tensor *out) {
    return run(c, "grid_sample", GS_FWD, n, NULL, x, grid, out);
}

int cuda_grid_sample_grad(cuda_ctx *c, const graph_node *n, const tensor *dy, const tensor *grid,
                          tensor *out) {
    return run(c, "grid_sample_grad", GS_DX, n, dy, out, grid, out);
}

int cuda_grid_sample_grad_grid(cuda_ctx *c, const graph_node *n, const tensor *dy, const tensor *x,
                               const tensor *grid, tensor *out) {
    if (!grid) {
        snprintf(c->err, sizeof c->err, "grid_sample_grad_grid: needs a grid");
        return -1;
    }
    return run(c, "grid_sample_grad_grid", GS_DGRID, n, dy, x, grid, out);
}
