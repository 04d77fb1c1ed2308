// F.pad as one kernel (PAD, ops.def): constant or reflect, any strides, and
// its backward PAD_GRAD (cpu_kernels.h). The forward moves bytes, so it works
// for every dtype by element size; the backward adds in f32.
#include "cpu_iter.h"
#include "cpu_kernels.h"

#include <string.h>

// The x row that padded row i reads along a dim of x-size L with lo rows
// before it: -1 in a constant pad, mirrored about the edge row in reflect.
static int64_t pad_row(int64_t mode, int64_t i, int64_t lo, int64_t L) {
    int64_t j = i - lo;
    if (mode == PAD_REFLECT)
        return j < 0 ? -j : j >= L ? 2 * (L - 1) - j : j;
    return j < 0 || j >= L ? -1 : j;
}

static void put(char *dst, const char *src, size_t es) {
    switch (es) {
    case 1: *(uint8_t *)dst = *(const uint8_t *)src; break;
    case 2: *(uint16_t *)dst = *(const uint16_t *)src; break;
    case 4: *(uint32_t *)dst = *(const uint32_t *)src; break;
    default: *(uint64_t *)dst = *(const uint64_t *)src; break;
    }
}

// The constant's bytes in dtype t.
static void fill_bytes(enum dtype t, double v, char *out) {
    switch (t) {
    case DT_F32: *(float *)out = (float)v; break;
    case DT_F16:
    case DT_BF16: *(uint16_t *)out = dtype_f32_to_half(t, (float)v); break;
    case DT_I32: *(int32_t *)out = (int32_t)v; break;
    case DT_I64: *(int64_t *)out = (int64_t)v; break;
    default: *(uint8_t *)out = (uint8_t)v; break;
    }
}

// x (any strides) -> out (its strides): one pass over out's rows, each
// element read from its source row or set to the constant.
int cpu_pad(cpu_ctx *c, const graph_node *n, const tensor *x, tensor *out) {
    if (x->dtype != out->dtype)
        return cpu_fail(c, "pad: input %s and output %s differ in dtype", dtype_name(x->dtype),
                        dtype_name(out->dtype));
    int nd = out->ndim;
    if (nd < 1 || nd > PAD_MAX_DIMS)
        return cpu_fail(c, "pad: needs 1 to %d dims, got %d", PAD_MAX_DIMS, nd);
    size_t es = dtype_size(out->dtype);
    char fill[8];
    fill_bytes(out->dtype, n->fa[0], fill);
    int64_t W = out->shape[nd - 1], rows = tensor_numel(out) / W, mode = n->ia[0];
    int64_t lo_w = n->ia[2 * nd - 1], Lw = x->shape[nd - 1];
    const char *px = tensor_data(x);
    char *po = tensor_data(out);
#pragma omp parallel for if (rows * W >= CPU_PAR_MIN) schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        int64_t xo = 0, oo = 0, rest = r;
        bool inside = true;
        for (int d = nd - 2; d >= 0; d--) {
            int64_t i = rest % out->shape[d], j = pad_row(mode, i, n->ia[1 + 2 * d], x->shape[d]);
            rest /= out->shape[d];
            oo += i * out->stride[d];
            inside &= j >= 0;
            xo += (j < 0 ? 0 : j) * x->stride[d];
        }
        for (int64_t w = 0; w < W; w++) {
            int64_t j = inside ? pad_row(mode, w, lo_w, Lw) : -1;
            char *dst = po + (size_t)(oo + w * out->stride[nd - 1]) * es;
            put(dst, j < 0 ? fill : px + (size_t)(xo + j * x->stride[nd - 1]) * es, es);
        }
    }
    c->kernels++;
    return 0;
}

// The padded rows that x row j was read into (at most 3: its own, and in
// reflect its mirrors before and after), into at[]; returns how many.
static int pad_uses(int64_t mode, int64_t j, int64_t lo, int64_t hi, int64_t L, int64_t *at) {
    int k = 0;
    at[k++] = j + lo;
    if (mode == PAD_REFLECT) {
        if (j >= 1 && j <= lo)
            at[k++] = lo - j;
        if (j <= L - 2 && j >= L - 1 - hi)
            at[k++] = lo + 2 * (L - 1) - j;
    }
    return k;
}

static float load_f(const char *p, enum dtype t) {
    return t == DT_F32 ? *(const float *)p : dtype_half_to_f32(t, *(const uint16_t *)p);
}

// dy (padded, any strides) -> dx (x's shape, its strides): each dx element
// gathers the dy elements read from it, so no two threads write one place.
int cpu_pad_grad(cpu_ctx *c, const graph_node *n, const tensor *dy, tensor *out) {
    if (dy->dtype != out->dtype || !dtype_is_float(out->dtype))
        return cpu_fail(c, "pad_grad: dy %s and output %s must be one float dtype",
                        dtype_name(dy->dtype), dtype_name(out->dtype));
    int nd = out->ndim;
    if (nd < 1 || nd > PAD_MAX_DIMS)
        return cpu_fail(c, "pad_grad: needs 1 to %d dims, got %d", PAD_MAX_DIMS, nd);
    enum dtype t = out->dtype;
    size_t es = dtype_size(t);
    int64_t total = tensor_numel(out);
    const char *pd = tensor_data(dy);
    char *po = tensor_data(out);
#pragma omp parallel for if (total >= CPU_PAR_MIN) schedule(static)
    for (int64_t e = 0; e < total; e++) {
        int64_t at[PAD_MAX_DIMS][3], cnt[PAD_MAX_DIMS], pick[PAD_MAX_DIMS] = {0}, rest = e, oo = 0;
        for (int d = nd - 1; d >= 0; d--) {
            int64_t j = rest % out->shape[d];
            rest /= out->shape[d];
            oo += j * out->stride[d];
            cnt[d] =
                pad_uses(n->ia[0], j, n->ia[1 + 2 * d], n->ia[2 + 2 * d], out->shape[d], at[d]);
        }
        float acc = 0;
        for (;;) { // every combination of one use per dim
            int64_t off = 0;
            for (int d = 0; d < nd; d++)
                off += at[d][pick[d]] * dy->stride[d];
            acc += load_f(pd + (size_t)off * es, t);
            int d = nd - 1;
            while (d >= 0 && ++pick[d] == cnt[d])
                pick[d--] = 0;
            if (d < 0)
                break;
        }
        char *dst = po + (size_t)oo * es;
        if (t == DT_F32)
            *(float *)dst = acc;
        else
            *(uint16_t *)dst = dtype_f32_to_half(t, acc);
    }
    c->kernels++;
    return 0;
}
