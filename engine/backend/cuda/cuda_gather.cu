// Data movement (cuda_rt.h): nearest upsampling, embedding gather,
// concatenation and roll. They move bytes, so each works for every dtype by element
// size.
#include "cuda_pointwise.cuh"

// out (N, C, OH, OW) from x (N, C, H, W), any strides on x
template <typename E> struct upsample_f {
    const E *x;
    E *y;
    int64_t C, OH, OW, scale, sn, sc, sh, sw;
    __device__ void operator()(int64_t i) const {
        int64_t ow = i % OW, r = i / OW, oh = r % OH;
        r /= OH;
        int64_t ch = r % C, n = r / C;
        y[i] = x[n * sn + ch * sc + (oh / scale) * sh + (ow / scale) * sw];
    }
};

template <typename E>
static int upsample_typed(cuda_ctx *c, const tensor *x, int64_t s, tensor *out) {
    upsample_f<E> f = {(const E *)tensor_data(x),
                       (E *)tensor_data(out),
                       out->shape[1],
                       out->shape[2],
                       out->shape[3],
                       s,
                       x->stride[0],
                       x->stride[1],
                       x->stride[2],
                       x->stride[3]};
    return pw_launch(c, tensor_numel(out), f, "upsample_nearest<<<>>>");
}

int cuda_upsample_nearest(cuda_ctx *c, const tensor *x, int64_t scale, tensor *out) {
    switch (dtype_size(x->dtype)) {
    case 1: return upsample_typed<uint8_t>(c, x, scale, out);
    case 2: return upsample_typed<uint16_t>(c, x, scale, out);
    case 4: return upsample_typed<uint32_t>(c, x, scale, out);
    default: return upsample_typed<uint64_t>(c, x, scale, out);
    }
}

// y[i, d] = table[idx[i], d]; an index out of range writes zeros and is
// reported by the next synchronization
template <typename E> struct embedding_f {
    const E *table;
    const char *idx;
    E *y;
    int i64;
    int64_t D, V, row;
    cuda_dev_error *err;
    __device__ void operator()(int64_t i) const {
        int64_t p = i / D, d = i % D;
        int64_t id = i64 ? ((const int64_t *)idx)[p] : ((const int32_t *)idx)[p];
        if (id < 0 || id >= V) {
            y[i] = 0;
            if (d == 0)
                dev_error(err, CUDA_DEVERR_EMBEDDING, id, p, V);
            return;
        }
        y[i] = table[id * row + d];
    }
};

template <typename E>
static int embedding_typed(cuda_ctx *c, const tensor *t, const tensor *ic, tensor *out) {
    embedding_f<E> f = {(const E *)tensor_data(t),
                        (const char *)tensor_data(ic),
                        (E *)tensor_data(out),
                        ic->dtype == DT_I64,
                        t->shape[1],
                        t->shape[0],
                        t->stride[0],
                        c->deverr};
    return pw_launch(c, tensor_numel(out), f, "embedding<<<>>>");
}

int cuda_embedding(cuda_ctx *c, const tensor *table, const tensor *idx, tensor *out) {
    if (idx->dtype != DT_I32 && idx->dtype != DT_I64) {
        snprintf(c->err, sizeof c->err, "embedding: indices must be i32 or i64, got %s",
                 dtype_name(idx->dtype));
        return -1;
    }
    // rows are read with unit stride and indices flat
    tensor *tc = table->stride[1] == 1 || table->shape[1] == 1 ? tensor_view(table)
                                                               : cuda_contiguous(c, table);
    tensor *ic = tc ? cuda_contiguous(c, idx) : NULL;
    int rc = -1;
    if (ic) {
        switch (dtype_size(table->dtype)) {
        case 1: rc = embedding_typed<uint8_t>(c, tc, ic, out); break;
        case 2: rc = embedding_typed<uint16_t>(c, tc, ic, out); break;
        case 4: rc = embedding_typed<uint32_t>(c, tc, ic, out); break;
        default: rc = embedding_typed<uint64_t>(c, tc, ic, out); break;
        }
    } else if (!tc) {
        snprintf(c->err, sizeof c->err, "embedding: out of memory");
    }
    cuda_tensor_free(c, tc);
    cuda_tensor_free(c, ic);
    return rc;
}

// One strided copy into each input's slot of the output.
int cuda_concat(cuda_ctx *c, int axis, int nin, const tensor *const *in, tensor *out) {
    int64_t at = 0;
    for (int i = 0; i < nin; i++) {
        // the slot: a view made on the stack, living only for the copy
        tensor slot = *out;
        slot.offset += at * out->stride[axis];
        slot.shape[axis] = in[i]->shape[axis];
        if (cuda_copy(c, in[i], &slot) < 0)
            return -1;
        at += in[i]->shape[axis];
    }
    return 0;
}

// out (contiguous) from x (any strides): out[(i + shift) mod size] = x[i] per axis
template <typename E> struct roll_f {
    const E *x;
    E *y;
    int nd;
    int64_t shape[TENSOR_MAX_DIMS], shift[TENSOR_MAX_DIMS], xs[TENSOR_MAX_DIMS];
    __device__ void operator()(int64_t i) const {
        int64_t r = i, off = 0;
        for (int d = nd - 1; d >= 0; d--) {
            int64_t o = r % shape[d], s = o - shift[d];
            r /= shape[d];
            off += (s < 0 ? s + shape[d] : s) * xs[d];
        }
        y[i] = x[off];
    }
};

template <typename E>
static int roll_typed(cuda_ctx *c, const int64_t *shifts, const tensor *x, tensor *out) {
    roll_f<E> f = {(const E *)tensor_data(x), (E *)tensor_data(out), x->ndim, {0}, {0}, {0}};
    for (int d = 0; d < x->ndim; d++) {
        f.shape[d] = x->shape[d];
        f.shift[d] = shifts[d];
        f.xs[d] = x->stride[d];
    }
    return pw_launch(c, tensor_numel(out), f, "roll<<<>>>");
}

int cuda_roll(cuda_ctx *c, const int64_t *shifts, const tensor *x, tensor *out) {
    switch (dtype_size(x->dtype)) {
    case 1: return roll_typed<uint8_t>(c, shifts, x, out);
    case 2: return roll_typed<uint16_t>(c, shifts, x, out);
    case 4: return roll_typed<uint32_t>(c, shifts, x, out);
    default: return roll_typed<uint64_t>(c, shifts, x, out);
    }
}

// cache[b, h, pos + t, d] = rows[b, h, t, d], rows any strides, pos read
// here on the device (a captured graph replays with each run's position)
template <typename E> struct kv_write_f {
    E *cache;
    const E *rows;
    const char *pos;
    int i64;
    int64_t H, T, D, S, rs0, rs1, rs2, rs3;
    cuda_dev_error *err;
    __device__ void operator()(int64_t i) const {
        int64_t p = i64 ? *(const int64_t *)pos : *(const int32_t *)pos;
        if (p < 0 || p > S - T) {
            if (i == 0)
                dev_error(err, CUDA_DEVERR_KV_WRITE, p, T, S);
            return;
        }
        int64_t d = i % D, r = i / D, t = r % T;
        r /= T;
        int64_t h = r % H, b = r / H;
        cache[((b * H + h) * S + p + t) * D + d] = rows[b * rs0 + h * rs1 + t * rs2 + d * rs3];
    }
};

template <typename E>
static int kv_write_typed(cuda_ctx *c, tensor *cache, const tensor *rows, const tensor *pos) {
    kv_write_f<E> f = {(E *)tensor_data(cache),
                       (const E *)tensor_data(rows),
                       (const char *)tensor_data(pos),
                       pos->dtype == DT_I64,
                       cache->shape[1],
                       rows->shape[2],
                       cache->shape[3],
                       cache->shape[2],
                       rows->stride[0],
                       rows->stride[1],
                       rows->stride[2],
                       rows->stride[3],
                       c->deverr};
    return pw_launch(c, tensor_numel(rows), f, "kv_write<<<>>>");
}

int cuda_kv_write(cuda_ctx *c, tensor *cache, const tensor *rows, const tensor *pos) {
    if (cache->dtype != rows->dtype || !tensor_is_contiguous(cache) ||
        (pos->dtype != DT_I32 && pos->dtype != DT_I64)) {
        snprintf(c->err, sizeof c->err,
                 "kv_write: needs a contiguous cache, rows of its dtype and an integer position");
        return -1;
    }
    switch (dtype_size(cache->dtype)) {
    case 2: return kv_write_typed<uint16_t>(c, cache, rows, pos);
    case 4: return kv_write_typed<uint32_t>(c, cache, rows, pos);
    default: return kv_write_typed<uint64_t>(c, cache, rows, pos);
    }
}
