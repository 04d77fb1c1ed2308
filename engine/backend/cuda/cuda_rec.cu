// The recommendation ops on the GPU (cuda_rt.h): EMBEDDING_BAG in sum mode
// and TRIL_GATHER with its backward, as cpu_rec.c computes them, a thread
// an output element; the bag sums add in f32 in position order.
// EMBEDDING_BAG_GRAD is embedding_grad's sort and row sums
// (cuda_grad_gather.cu). A bad index is recorded on the device and reported
// by the next cuda_ctx_sync; offsets are clamped to [0, N] (the CPU kernels
// and the reference check them).
#include "cuda_grad.cuh"

__device__ __forceinline__ int64_t ld_index(const char *p, int i64, int64_t i) {
    return i64 ? ((const int64_t *)p)[i] : ((const int32_t *)p)[i];
}

// bag b's positions [lo, hi) among n indices, clamped into [0, n]
__device__ __forceinline__ void bag_span(const char *off, int i64, int64_t B, int64_t n, int64_t b,
                                         int64_t *lo, int64_t *hi) {
    int64_t a = ld_index(off, i64, b), z = b + 1 < B ? ld_index(off, i64, b + 1) : n;
    *lo = a < 0 ? 0 : a > n ? n : a;
    *hi = z < *lo ? *lo : z > n ? n : z;
}

// y (B, D) [b, d] = sum of table[idx[i], d] over bag b
template <typename T> struct bag_f {
    const T *table;
    const char *idx, *off;
    int i64;
    int64_t B, D, V, n;
    T *y;
    cuda_dev_error *err;
    __device__ void operator()(int64_t e) const {
        int64_t b = e / D, d = e % D, lo, hi;
        bag_span(off, i64, B, n, b, &lo, &hi);
        float acc = 0.0f;
        for (int64_t i = lo; i < hi; i++) {
            int64_t id = ld_index(idx, i64, i);
            if (id < 0 || id >= V) {
                if (d == 0)
                    dev_error(err, CUDA_DEVERR_EMBEDDING, id, i, V);
                continue;
            }
            acc += ldf(table, id * D + d);
        }
        stf(y, e, acc);
    }
};

// The operands' dtypes: int indices and offsets of one dtype; out and the
// table (or dy) of one float dtype. 0, or -1 with c->err set.
static int bag_check(cuda_ctx *c, const char *what, const tensor *fl, const tensor *idx,
                     const tensor *off, tensor *out) {
    if ((idx->dtype != DT_I32 && idx->dtype != DT_I64) || off->dtype != idx->dtype) {
        snprintf(c->err, sizeof c->err, "%s: indices and offsets must be i32 or i64, got %s and %s",
                 what, dtype_name(idx->dtype), dtype_name(off->dtype));
        return -1;
    }
    const tensor *t[2] = {fl, out};
    return grad_need_same(c, what, 2, t);
}

template <typename T>
static int bag_typed(cuda_ctx *c, const tensor *tc, const tensor *ic, const tensor *oc,
                     tensor *out) {
    bag_f<T> f;
    f.table = (const T *)tensor_data(tc);
    f.idx = (const char *)tensor_data(ic), f.off = (const char *)tensor_data(oc);
    f.i64 = ic->dtype == DT_I64;
    f.B = out->shape[0], f.D = out->shape[1], f.V = tc->shape[0], f.n = tensor_numel(ic);
    f.y = (T *)tensor_data(out);
    f.err = c->deverr;
    return pw_launch(c, tensor_numel(out), f, "embedding_bag<<<>>>");
}

int cuda_embedding_bag(cuda_ctx *c, const tensor *table, const tensor *idx, const tensor *off,
                       tensor *out) {
    if (bag_check(c, "embedding_bag", table, idx, off, out) < 0)
        return -1;
    const tensor *in[3] = {table, idx, off};
    tensor *cc[3] = {NULL, NULL, NULL}; // each operand contiguous
    int rc = 0;
    for (int k = 0; k < 3 && rc == 0; k++)
        rc = (cc[k] = cuda_contiguous(c, in[k])) ? 0 : -1;
    if (rc == 0)
        rc = out->dtype == DT_F32 ? bag_typed<float>(c, cc[0], cc[1], cc[2], out)
                                  : bag_typed<uint16_t>(c, cc[0], cc[1], cc[2], out);
    for (int k = 0; k < 3; k++)
        cuda_tensor_free(c, cc[k]);
    return rc;
}

// ---- TRIL_GATHER, TRIL_GATHER_GRAD --------------------------------------------------------

// pair k of F features -> (i, j), row by row: j < i, or j <= i with self
__device__ __forceinline__ void pair_of(int64_t k, int64_t self, int64_t *i, int64_t *j) {
    // rows hold i + self pairs: the row is the largest i with i (i - 1 + 2 self) / 2 <= k
    int64_t r =
        (int64_t)((sqrt(8.0 * (double)k + (2 * self - 1) * (2 * self - 1)) - (2 * self - 1)) / 2);
    while (r * (r - 1 + 2 * self) / 2 > k)
        r--;
    while ((r + 1) * (r + 2 * self) / 2 <= k)
        r++;
    *i = r;
    *j = k - r * (r - 1 + 2 * self) / 2;
}

// y (B, P) [b, k] = z[b, i, j] (z any strides); back: z (contiguous,
// zeroed first) [b, i, j] = y[b, k]
template <typename E> struct tril_f {
    E *z;
    E *p;
    int64_t F, P, self, sb, si, sj;
    bool back;
    __device__ void operator()(int64_t e) const {
        int64_t b = e / P, k = e % P, i, j;
        pair_of(k, self, &i, &j);
        E *at = z + b * sb + i * si + j * sj;
        if (back)
            *at = p[e];
        else
            p[e] = *at;
    }
};

template <typename E>
static int tril_typed(cuda_ctx *c, const graph_node *n, const tensor *z, const tensor *p,
                      bool back) {
    tril_f<E> f;
    f.z = (E *)tensor_data(z);
    f.p = (E *)tensor_data(p);
    f.F = z->shape[1];
    f.P = p->shape[1];
    f.self = n->ia[0];
    f.sb = z->stride[0], f.si = z->stride[1], f.sj = z->stride[2];
    f.back = back;
    return pw_launch(c, tensor_numel(p), f, back ? "tril_gather_grad<<<>>>" : "tril_gather<<<>>>");
}

// by element size: the pairs move as bytes, whatever the dtype
static int tril_run(cuda_ctx *c, const graph_node *n, const tensor *z, const tensor *p, bool back) {
    size_t es = dtype_size(z->dtype);
    return es == 2   ? tril_typed<uint16_t>(c, n, z, p, back)
           : es == 4 ? tril_typed<uint32_t>(c, n, z, p, back)
           : es == 8 ? tril_typed<uint64_t>(c, n, z, p, back)
                     : tril_typed<uint8_t>(c, n, z, p, back);
}

int cuda_tril_gather(cuda_ctx *c, const graph_node *n, const tensor *z, tensor *out) {
    if (z->dtype != out->dtype || !tensor_is_contiguous(out)) {
        snprintf(c->err, sizeof c->err, "tril_gather: %s into a contiguous %s output",
                 dtype_name(z->dtype), dtype_name(out->dtype));
        return -1;
    }
    return tril_run(c, n, z, out, false);
}

int cuda_tril_gather_grad(cuda_ctx *c, const graph_node *n, const tensor *dy, tensor *out) {
    if (dy->dtype != out->dtype || !tensor_is_contiguous(out)) {
        snprintf(c->err, sizeof c->err, "tril_gather_grad: %s into a contiguous %s output",
                 dtype_name(dy->dtype), dtype_name(out->dtype));
        return -1;
    }
    cudaError_t e = cudaMemsetAsync(tensor_data(out), 0,
                                    (size_t)tensor_numel(out) * dtype_size(out->dtype), c->stream);
    if (e != cudaSuccess)
        return cuda_fail_at(c->err, sizeof c->err, "cudaMemsetAsync", __FILE__, __LINE__,
                            cudaGetErrorString(e));
    tensor *dc = cuda_contiguous(c, dy);
    int rc = dc ? tril_run(c, n, out, dc, true) : -1;
    cuda_tensor_free(c, dc);
    return rc;
}
