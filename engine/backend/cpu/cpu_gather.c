// Data movement: nearest upsampling, embedding gather, concatenation and roll
// (cpu_kernels.h). They move bytes, so each works for every dtype by
// element size (f16 under AMP included), given that the output's dtype is
// the input's: checked, as a mismatch would misread memory.
#include "cpu_iter.h"
#include "cpu_kernels.h"

#include <string.h>

#define UPSAMPLE_ROW(T)                                                                            \
    do {                                                                                           \
        const T *s = (const T *)src;                                                               \
        T *d = (T *)dst;                                                                           \
        for (int64_t ow = 0; ow < OW; ow++)                                                        \
            d[ow] = s[(ow / scale) * sw];                                                          \
    } while (0)

int cpu_upsample_nearest(cpu_ctx *c, const tensor *x, int64_t scale, tensor *out) {
    if (x->dtype != out->dtype)
        return cpu_fail(c, "upsample_nearest: input %s and output %s differ in dtype",
                        dtype_name(x->dtype), dtype_name(out->dtype));
    int64_t N = x->shape[0], C = x->shape[1], OH = out->shape[2], OW = out->shape[3];
    int64_t es = (int64_t)dtype_size(x->dtype);
    const char *px = tensor_data(x);
    char *po = tensor_data(out);
    int64_t sn = x->stride[0], sc = x->stride[1], sh = x->stride[2], sw = x->stride[3];
    // one output row per iteration; a row repeats one input row
#pragma omp parallel for if (N * C * OH * OW >= CPU_PAR_MIN) schedule(static)
    for (int64_t r = 0; r < N * C * OH; r++) {
        int64_t oh = r % OH, ch = (r / OH) % C, n = r / (OH * C);
        const char *src = px + (n * sn + ch * sc + (oh / scale) * sh) * es;
        char *dst = po + r * OW * es;
        switch (es) {
        case 1: UPSAMPLE_ROW(uint8_t); break;
        case 2: UPSAMPLE_ROW(uint16_t); break;
        case 4: UPSAMPLE_ROW(uint32_t); break;
        default: UPSAMPLE_ROW(uint64_t); break;
        }
    }
    c->kernels++;
    return 0;
}

int cpu_embedding(cpu_ctx *c, const tensor *table, const tensor *idx, tensor *out) {
    if (idx->dtype != DT_I32 && idx->dtype != DT_I64)
        return cpu_fail(c, "embedding: indices must be i32 or i64, got %s", dtype_name(idx->dtype));
    if (table->dtype != out->dtype)
        return cpu_fail(c, "embedding: table %s and output %s differ in dtype",
                        dtype_name(table->dtype), dtype_name(out->dtype));
    int64_t V = table->shape[0], D = table->shape[1];
    int64_t es = (int64_t)dtype_size(table->dtype);
    // rows are copied whole, so the table's rows must be contiguous and the
    // indices are read flat
    tensor *tc = table->stride[1] == 1 || D == 1 ? tensor_view(table) : cpu_contiguous(c, table);
    tensor *ic = tc ? cpu_contiguous(c, idx) : NULL;
    if (!ic) {
        tensor_free(tc);
        return tc ? -1 : cpu_fail(c, "embedding: out of memory");
    }
    int64_t n = tensor_numel(ic), row = tc->stride[0];
    const char *pt = tensor_data(tc);
    char *po = tensor_data(out);
    bool i32 = ic->dtype == DT_I32;
    const int32_t *p32 = tensor_data(ic);
    const int64_t *p64 = tensor_data(ic);
    int64_t bad = 0; // 1 + the last position holding an index out of range
#pragma omp parallel for if (n * D >= CPU_PAR_MIN) reduction(max : bad) schedule(static)
    for (int64_t i = 0; i < n; i++) {
        int64_t id = i32 ? p32[i] : p64[i];
        if (id < 0 || id >= V) {
            bad = i + 1;
            continue;
        }
        memcpy(po + i * D * es, pt + id * row * es, (size_t)(D * es));
    }
    int64_t badv = bad ? (i32 ? p32[bad - 1] : p64[bad - 1]) : 0;
    tensor_free(tc);
    tensor_free(ic);
    if (bad)
        return cpu_fail(c, "embedding: index %lld at position %lld is outside [0, %lld)",
                        (long long)badv, (long long)(bad - 1), (long long)V);
    c->kernels++;
    return 0;
}

int cpu_concat(cpu_ctx *c, int axis, int nin, const tensor *const *in, tensor *out) {
    for (int i = 0; i < nin; i++)
        if (in[i]->dtype != out->dtype)
            return cpu_fail(c, "concat: input %d is %s, the output %s (cast it first)", i,
                            dtype_name(in[i]->dtype), dtype_name(out->dtype));
    int64_t at = 0;
    for (int i = 0; i < nin; i++) {
        // the input's slot in the output: a view made on the stack (no
        // allocation, no reference taken; it lives only for the copy)
        tensor slot = *out;
        slot.offset += at * out->stride[axis];
        slot.shape[axis] = in[i]->shape[axis];
        cpu_iter_copy(&slot, in[i]);
        at += in[i]->shape[axis];
    }
    c->kernels++;
    return 0;
}

// torch.roll: along each shifted axis the output's [shift, size) is the
// input's [0, size - shift) and its [0, shift) the input's tail, so k shifted
// axes are 2^k block copies between stack views (as concat's slots).
int cpu_roll(cpu_ctx *c, const int64_t *shifts, const tensor *x, tensor *out) {
    if (x->dtype != out->dtype)
        return cpu_fail(c, "roll: input %s and output %s differ in dtype", dtype_name(x->dtype),
                        dtype_name(out->dtype));
    int axes[TENSOR_MAX_DIMS], k = 0;
    for (int d = 0; d < x->ndim; d++)
        if (shifts[d])
            axes[k++] = d;
    for (int m = 0; m < 1 << k; m++) { // bit j of m: the wrapped tail along axes[j]
        tensor src = *x, dst = *out;
        for (int j = 0; j < k; j++) {
            int d = axes[j];
            int64_t sh = shifts[d], n = x->shape[d], len = m >> j & 1 ? sh : n - sh;
            src.offset += (m >> j & 1 ? n - sh : 0) * x->stride[d];
            dst.offset += (m >> j & 1 ? 0 : sh) * out->stride[d];
            src.shape[d] = dst.shape[d] = len;
        }
        cpu_iter_copy(&dst, &src);
    }
    c->kernels++;
    return 0;
}

// unfold (im2col) and fold (col2im) as ops.def defines them, in f32 (16-bit
// data through f32 copies). Each (n, c) plane is one task: fold's plane sums
// only its own columns, so no two threads write one pixel.
int cpu_im2col(cpu_ctx *c, const graph_node *n, const tensor *x, tensor *out) {
    const int64_t *ia = n->ia;
    bool un = n->op == OP_UNFOLD;
    const tensor *img = un ? x : out;
    int64_t P = img->shape[0] * img->shape[1], H = ia[6], W = ia[7], kh = ia[0], kw = ia[1];
    int64_t OH = (H + 2 * ia[2] - kh) / ia[4] + 1, OW = (W + 2 * ia[3] - kw) / ia[5] + 1;
    const char *what = op_name(n->op);
    tensor *xc = cpu_f32_in(c, what, x);
    tensor *oc = xc ? cpu_f32_out(c, what, out) : NULL;
    if (!oc) {
        tensor_free(xc);
        return -1;
    }
    const float *s = tensor_f32(xc);
    float *o = tensor_f32(oc);
#pragma omp parallel for if (P * kh * kw * OH * OW >= CPU_PAR_MIN) schedule(static)
    for (int64_t b = 0; b < P; b++) {
        float *plane = un ? NULL : o + b * H * W;
        if (plane)
            memset(plane, 0, (size_t)(H * W) * sizeof *plane);
        for (int64_t i = 0; i < kh; i++)
            for (int64_t j = 0; j < kw; j++)
                for (int64_t oh = 0; oh < OH; oh++) {
                    int64_t h = oh * ia[4] - ia[2] + i;
                    int64_t col = ((b * kh + i) * kw + j) * OH * OW + oh * OW;
                    for (int64_t ow = 0; ow < OW; ow++) {
                        int64_t w = ow * ia[5] - ia[3] + j;
                        bool in = h >= 0 && h < H && w >= 0 && w < W;
                        if (un)
                            o[col + ow] = in ? s[(b * H + h) * W + w] : 0.0f;
                        else if (in)
                            plane[h * W + w] += s[col + ow];
                    }
                }
    }
    tensor_free(xc);
    c->kernels++;
    return cpu_f32_done(oc, out, 0);
}

// A static KV cache's fill: rows (any strides: the head-split view of a
// projection) copied into the contiguous cache at the run's position.
int cpu_kv_write(cpu_ctx *c, tensor *cache, const tensor *rows, const tensor *pos) {
    if (cache->dtype != rows->dtype)
        return cpu_fail(c, "kv_write: rows of %s into a cache of %s", dtype_name(rows->dtype),
                        dtype_name(cache->dtype));
    if (!tensor_is_contiguous(cache))
        return cpu_fail(c, "kv_write: the cache must be contiguous");
    int64_t p = pos->dtype == DT_I64 ? *(const int64_t *)tensor_data(pos)
                                     : *(const int32_t *)tensor_data(pos);
    int64_t T = rows->shape[2], S = cache->shape[2];
    if (p < 0 || p > S - T)
        return cpu_fail(c, "kv_write: position %lld with %lld rows is outside a cache of %lld",
                        (long long)p, (long long)T, (long long)S);
    tensor *dst = tensor_slice(cache, 2, p, T);
    if (!dst)
        return cpu_fail(c, "kv_write: out of memory for a view");
    cpu_iter_copy(dst, rows);
    tensor_free(dst);
    c->kernels++;
    return 0;
}
