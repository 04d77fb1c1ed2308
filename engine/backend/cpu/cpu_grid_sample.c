// F.grid_sample, bilinear, as one kernel (GRID_SAMPLE, ops.def), and with no
// grid F.interpolate's bilinear upsample (UPSAMPLE_BILINEAR) on the same taps.
// Backward: dx scattered onto each position's four taps (one thread a
// channel plane, so no two threads add into one place) and d grid gathered
// over the channels. Operands of any strides; f32, f16 or bf16, math in f32.
#include "cpu_iter.h"
#include "cpu_kernels.h"

#include <math.h>
#include <stdlib.h>

static float ld(const tensor *t, int64_t off) {
    const char *p = (const char *)tensor_data(t) + (size_t)off * dtype_size(t->dtype);
    return t->dtype == DT_F32 ? *(const float *)p
                              : dtype_half_to_f32(t->dtype, *(const uint16_t *)p);
}

static void st(tensor *t, int64_t off, float v) {
    char *p = (char *)tensor_data(t) + (size_t)off * dtype_size(t->dtype);
    if (t->dtype == DT_F32)
        *(float *)p = v;
    else
        *(uint16_t *)p = dtype_f32_to_half(t->dtype, v);
}

// One output position's sampling: the four taps (y, x; inside flags), their
// weights nw, ne, sw, se, the fractions and d coordinate / d grid.
typedef struct {
    int64_t y[4], x[4];
    bool in[4];
    float w[4], tx, ty, dgx, dgy;
} taps;

// Normalized g -> a coordinate along `size` samples (ref.c's grid_coord).
static float coord(const graph_node *n, float g, int64_t size, float *dg) {
    float c = n->ia[1] ? (g + 1) / 2 * (float)(size - 1) : ((g + 1) * (float)size - 1) / 2;
    *dg = n->ia[1] ? (float)(size - 1) / 2 : (float)size / 2;
    if (n->ia[0] == GRID_PAD_BORDER && (c < 0 || c > (float)(size - 1))) {
        *dg = 0;
        c = c < 0 ? 0 : (float)(size - 1);
    }
    return c;
}

// Output o of `out` along an axis of `in` samples: upsample_bilinear2d's
// source index, clamped to the edges (so its last tap weighs 0 there).
static float upsample_coord(const graph_node *n, int64_t o, int64_t in, int64_t out) {
    float c = n->ia[1] ? (out > 1 ? (float)(in - 1) / (float)(out - 1) * (float)o : 0)
                       : (float)in / (float)out * ((float)o + 0.5f) - 0.5f;
    return c < 0 ? 0 : c > (float)(in - 1) ? (float)(in - 1) : c;
}

// Position (ho, wo) of batch b sampled at the grid, or with no grid
// upsampled (UPSAMPLE_BILINEAR) from (H, W) to (Ho, Wo).
static taps taps_at(const graph_node *n, const tensor *grid, int64_t b, int64_t ho, int64_t wo,
                    int64_t H, int64_t W, int64_t Ho, int64_t Wo);

// Output position e of (N, Ho, Wo): its batch, row and column, and its taps.
static taps taps_of(const graph_node *n, const tensor *grid, int64_t e, const int64_t *hw,
                    int64_t *b, int64_t *ho, int64_t *wo) {
    int64_t Ho = hw[2], Wo = hw[3];
    *wo = e % Wo, *ho = (e / Wo) % Ho, *b = e / (Wo * Ho);
    return taps_at(n, grid, *b, *ho, *wo, hw[0], hw[1], Ho, Wo);
}

static taps taps_at(const graph_node *n, const tensor *grid, int64_t b, int64_t ho, int64_t wo,
                    int64_t H, int64_t W, int64_t Ho, int64_t Wo) {
    taps t = {.dgx = 0};
    float ix, iy;
    if (grid) {
        int64_t g0 = b * grid->stride[0] + ho * grid->stride[1] + wo * grid->stride[2];
        ix = coord(n, ld(grid, g0), W, &t.dgx);
        iy = coord(n, ld(grid, g0 + grid->stride[3]), H, &t.dgy);
    } else {
        ix = upsample_coord(n, wo, W, Wo), iy = upsample_coord(n, ho, H, Ho);
    }
    float x0 = floorf(ix), y0 = floorf(iy);
    t.tx = ix - x0, t.ty = iy - y0;
    for (int k = 0; k < 4; k++) {
        t.x[k] = (int64_t)x0 + (k & 1), t.y[k] = (int64_t)y0 + (k >> 1);
        t.in[k] = t.x[k] >= 0 && t.x[k] < W && t.y[k] >= 0 && t.y[k] < H;
        t.w[k] = ((k & 1) ? t.tx : 1 - t.tx) * ((k >> 1) ? t.ty : 1 - t.ty);
    }
    return t;
}

// x[b, ch] at the four taps, 0 outside
static void tap_values(const tensor *x, int64_t b, int64_t ch, const taps *t, float *v) {
    int64_t xb = b * x->stride[0] + ch * x->stride[1];
    for (int k = 0; k < 4; k++)
        v[k] = t->in[k] ? ld(x, xb + t->y[k] * x->stride[2] + t->x[k] * x->stride[3]) : 0;
}

// a, b (the grid, or NULL for an upsample), d: 4-d, one float dtype
static int check(cpu_ctx *c, const char *what, const tensor *a, const tensor *b, const tensor *d) {
    if (!b)
        b = a;
    bool ok = dtype_is_float(a->dtype) && a->dtype == b->dtype && a->dtype == d->dtype &&
              a->ndim == 4 && b->ndim == 4 && d->ndim == 4;
    return ok ? 0
              : cpu_fail(c, "%s: needs 4-d operands of one float dtype, got %s, %s and %s", what,
                         dtype_name(a->dtype), dtype_name(b->dtype), dtype_name(d->dtype));
}

// x (N, C, H, W), grid (N, Ho, Wo, 2) or NULL (an upsample) -> out (N, C, Ho, Wo)
int cpu_grid_sample(cpu_ctx *c, const graph_node *n, const tensor *x, const tensor *grid,
                    tensor *out) {
    if (check(c, "grid_sample", x, grid, out) < 0)
        return -1;
    int64_t C = x->shape[1], hw[4] = {x->shape[2], x->shape[3], out->shape[2], out->shape[3]};
    int64_t total = x->shape[0] * hw[2] * hw[3];
#pragma omp parallel for if (total * C >= CPU_PAR_MIN) schedule(static)
    for (int64_t e = 0; e < total; e++) {
        int64_t b, ho, wo;
        taps t = taps_of(n, grid, e, hw, &b, &ho, &wo);
        for (int64_t ch = 0; ch < C; ch++) {
            float v4[4], v = 0;
            tap_values(x, b, ch, &t, v4);
            for (int k = 0; k < 4; k++)
                v += t.w[k] * v4[k];
            st(out,
               b * out->stride[0] + ch * out->stride[1] + ho * out->stride[2] + wo * out->stride[3],
               v);
        }
    }
    c->kernels++;
    return 0;
}

// dy (N, C, Ho, Wo), grid or NULL -> dx (N, C, H, W): each plane (b, ch) summed in f32
int cpu_grid_sample_grad(cpu_ctx *c, const graph_node *n, const tensor *dy, const tensor *grid,
                         tensor *out) {
    if (check(c, "grid_sample_grad", dy, grid, out) < 0)
        return -1;
    int64_t N = out->shape[0], C = out->shape[1], H = out->shape[2], W = out->shape[3];
    int64_t Ho = dy->shape[2], Wo = dy->shape[3];
    float *acc = calloc((size_t)(N * C * H * W), sizeof *acc);
    if (!acc)
        return cpu_fail(c, "grid_sample_grad: out of memory for a %lld-float scratch",
                        (long long)(N * C * H * W));
#pragma omp parallel for if (N * C * Ho * Wo >= CPU_PAR_MIN) schedule(static)
    for (int64_t pl = 0; pl < N * C; pl++) {
        int64_t b = pl / C, ch = pl % C;
        float *a = acc + pl * H * W;
        for (int64_t ho = 0; ho < Ho; ho++)
            for (int64_t wo = 0; wo < Wo; wo++) {
                taps t = taps_at(n, grid, b, ho, wo, H, W, Ho, Wo);
                float d = ld(dy, b * dy->stride[0] + ch * dy->stride[1] + ho * dy->stride[2] +
                                     wo * dy->stride[3]);
                for (int k = 0; k < 4; k++)
                    if (t.in[k])
                        a[t.y[k] * W + t.x[k]] += t.w[k] * d;
            }
        for (int64_t i = 0; i < H * W; i++)
            st(out,
               b * out->stride[0] + ch * out->stride[1] + (i / W) * out->stride[2] +
                   (i % W) * out->stride[3],
               a[i]);
    }
    free(acc);
    c->kernels++;
    return 0;
}

// dy, x, grid -> d grid (N, Ho, Wo, 2): the bilinear weights' slopes in x
// and y, summed over the channels, times d coordinate / d grid
int cpu_grid_sample_grad_grid(cpu_ctx *c, const graph_node *n, const tensor *dy, const tensor *x,
                              const tensor *grid, tensor *out) {
    if (!grid || check(c, "grid_sample_grad_grid", dy, x, grid) < 0 ||
        check(c, "grid_sample_grad_grid", dy, grid, out) < 0)
        return grid ? -1 : cpu_fail(c, "grid_sample_grad_grid: needs a grid");
    int64_t C = x->shape[1], hw[4] = {x->shape[2], x->shape[3], dy->shape[2], dy->shape[3]};
    int64_t total = x->shape[0] * hw[2] * hw[3];
#pragma omp parallel for if (total * C >= CPU_PAR_MIN) schedule(static)
    for (int64_t e = 0; e < total; e++) {
        int64_t b, ho, wo;
        taps t = taps_of(n, grid, e, hw, &b, &ho, &wo);
        float gx = 0, gy = 0;
        for (int64_t ch = 0; ch < C; ch++) {
            float v[4];
            tap_values(x, b, ch, &t, v);
            float d = ld(dy, b * dy->stride[0] + ch * dy->stride[1] + ho * dy->stride[2] +
                                 wo * dy->stride[3]);
            gx += d * ((1 - t.ty) * (v[1] - v[0]) + t.ty * (v[3] - v[2]));
            gy += d * ((1 - t.tx) * (v[2] - v[0]) + t.tx * (v[3] - v[1]));
        }
        int64_t o = b * out->stride[0] + ho * out->stride[1] + wo * out->stride[2];
        st(out, o, gx * t.dgx);
        st(out, o + out->stride[3], gy * t.dgy);
    }
    c->kernels++;
    return 0;
}
