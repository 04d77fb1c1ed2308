// Pointwise eager kernels (cuda_rt.h): unary math, broadcasting binary ops,
// where, cast, dropout, noise and strided copies. The loop nest is cpu_iter's
// (size-1 dims dropped, dims that every operand walks contiguously merged),
// run as a grid-stride loop with 4 elements a thread, as PyTorch's
// elementwise kernels: when every operand is contiguous an element's offset
// is its index; otherwise offsets come from the merged shape, in 32-bit
// arithmetic when every offset fits. One instantiation per (op, dtype): 48
// unary, 10 float binary, 2 integer binary, 4 where, 4 copy and 1 cast.
#include "cuda_rt.h"

extern "C" {
#include "backend/cpu/cpu_iter.h"
#include "core/op_rules.h"
}
#include "cuda_pointwise.cuh"

int cuda_pw_fail(cuda_ctx *c, const char *what, enum dtype t) {
    snprintf(c->err, sizeof c->err, "%s: dtype %s is not supported by the CUDA kernels", what,
             dtype_name(t));
    return -1;
}

pw_iter pw_make(tensor *out, int nin, const tensor *const *in) {
    cpu_iter it;
    cpu_iter_init(&it, out, nin, in);
    pw_iter p;
    memset(&p, 0, sizeof p);
    p.ndim = it.ndim;
    p.n = it.numel;
    p.contig = it.ndim == 1;
    for (int d = 0; d < it.ndim; d++)
        p.shape[d] = it.shape[d];
    bool small = it.numel < INT32_MAX;
    for (int k = 0; k < it.nops; k++) {
        p.data[k] = it.data[k];
        int64_t reach = 0;
        for (int d = 0; d < it.ndim; d++) {
            p.st[k][d] = it.stride[k][d];
            reach += (it.shape[d] - 1) * (it.stride[k][d] < 0 ? -it.stride[k][d] : it.stride[k][d]);
        }
        p.contig = p.contig && (it.stride[k][0] == 1 || it.numel == 1);
        small = small && reach < INT32_MAX;
    }
    p.small = small;
    return p;
}

// ---- unary -----------------------------------------------------------------

struct un_prm {
    float a, b;   // a formula's fa0 and fa1; DROPOUT: a = 1 / (1 - p); NOISE: a = sd
    uint64_t key; // DROPOUT and NOISE
    uint32_t thr;
};

// A formula op of core/pointwise.h at x; dropout's mask and noise's draw
// are applied apart.
template <int OP> __device__ __forceinline__ float un_op(float x, const un_prm &p) {
#define X(U, l, a0, b0)                                                                                    \
    if constexpr (OP == OP_##U)                                                                    \
        return tc_f_##l(x, p.a, p.b);                                                              \
    else
    TC_POINTWISE_OPS(X)
#undef X
        return x;
}

template <typename T, int OP> struct unary_f {
    pw_iter it;
    un_prm p;
    __device__ void operator()(int64_t i) const {
        int64_t o[2];
        pw_offsets<2>(it, i, o);
        float v = ldf((const T *)it.data[1], o[1]);
        if constexpr (OP == OP_DROPOUT) // the flat output index, as op_rules.h
            v = tc_dropout_keep(p.key, (uint64_t)i, p.thr) ? v * p.a : 0.0f;
        else if constexpr (OP == OP_NOISE)
            v += p.a * op_noise_normal(p.key, (uint64_t)i);
        else
            v = un_op<OP>(v, p);
        stf((T *)it.data[0], o[0], v);
    }
};

#define UNARY_OPS(X) TC_POINTWISE_OPS(X) X(DROPOUT, dropout, 0, 0) X(NOISE, noise, 0, 0)

template <typename T>
static int unary_typed(cuda_ctx *c, enum op op, const pw_iter &it, const un_prm &p) {
    switch (op) {
#define X(U, l, a0, b0)                                                                                    \
    case OP_##U: return pw_launch(c, it.n, unary_f<T, OP_##U>{it, p}, "unary_" #U "<<<>>>");
        UNARY_OPS(X)
#undef X
    default: snprintf(c->err, sizeof c->err, "%s is not a unary op", op_name(op)); return -1;
    }
}

// ---- cast --------------------------------------------------------------------

__device__ double ld_any(int t, const char *p, int64_t i) {
    switch (t) {
    case DT_F32: return ((const float *)p)[i];
    case DT_F16: return tc_h2f(((const uint16_t *)p)[i]);
    case DT_I32: return ((const int32_t *)p)[i];
    case DT_I64: return (double)((const int64_t *)p)[i];
    default: return ((const uint8_t *)p)[i];
    }
}

// op_cast_value's rule: floats round, integers truncate toward zero,
// saturating, NaN to 0; bool is v != 0
__device__ void st_any(int t, char *p, int64_t i, double v) {
    switch (t) {
    case DT_F32: ((float *)p)[i] = (float)v; break;
    case DT_F16: ((uint16_t *)p)[i] = tc_f2h((float)v); break;
    case DT_I32:
        ((int32_t *)p)[i] = !(v == v)            ? 0
                            : v >= 2147483647.0  ? 2147483647
                            : v <= -2147483648.0 ? (int32_t)(-2147483647 - 1)
                                                 : (int32_t)v;
        break;
    case DT_I64:
        ((int64_t *)p)[i] = !(v == v)                     ? 0
                            : v >= 9223372036854775807.0  ? (int64_t)9223372036854775807ll
                            : v <= -9223372036854775808.0 ? (int64_t)(-9223372036854775807ll - 1)
                                                          : (int64_t)v;
        break;
    default: ((uint8_t *)p)[i] = v != 0; break;
    }
}

struct cast_f {
    pw_iter it;
    int from, to;
    __device__ void operator()(int64_t i) const {
        int64_t o[2];
        pw_offsets<2>(it, i, o);
        st_any(to, it.data[0], o[0], ld_any(from, it.data[1], o[1]));
    }
};

int cuda_unary(cuda_ctx *c, const graph_node *n, const tensor *x, tensor *out) {
    pw_iter it = pw_make(out, 1, &x);
    if (n->op == OP_CAST)
        return pw_launch(c, it.n, cast_f{it, (int)x->dtype, (int)out->dtype}, "cast<<<>>>");
    un_prm p = {};
    if (n->op == OP_DROPOUT) {
        p.key = op_dropout_key(n->ia[0], c->step ? c->step : 1);
        p.thr = op_dropout_threshold(n->fa[0]);
        p.a = (float)(1.0 / (1.0 - n->fa[0]));
    } else if (n->op == OP_NOISE) {
        p.key = op_noise_key(n->ia[0], c->step ? c->step : 1);
        p.a = (float)n->fa[0];
    } else { // a formula's attributes (core/pointwise.h)
        p.a = (float)n->fa[0];
        p.b = (float)n->fa[1];
    }
    if (x->dtype == DT_F32)
        return unary_typed<float>(c, n->op, it, p);
    if (x->dtype == DT_F16)
        return unary_typed<uint16_t>(c, n->op, it, p);
    return cuda_pw_fail(c, op_name(n->op), x->dtype);
}

// ---- binary ------------------------------------------------------------------

template <typename T, int OP> struct binary_f {
    pw_iter it;
    __device__ void operator()(int64_t i) const {
        int64_t o[3];
        pw_offsets<3>(it, i, o);
        float x = ldf((const T *)it.data[1], o[1]), y = ldf((const T *)it.data[2], o[2]), r;
        if constexpr (OP == OP_ADD)
            r = x + y;
        else if constexpr (OP == OP_SUB)
            r = x - y;
        else if constexpr (OP == OP_MUL)
            r = x * y;
        else if constexpr (OP == OP_DIV)
            r = x / y;
        else
            r = tc_maximum(x, y);
        stf((T *)it.data[0], o[0], r);
    }
};

// integers: exact, wrapping as the C types do
template <typename T> struct binary_int_f {
    pw_iter it;
    int op;
    __device__ void operator()(int64_t i) const {
        int64_t o[3];
        pw_offsets<3>(it, i, o);
        uint64_t x = (uint64_t)(int64_t)((const T *)it.data[1])[o[1]];
        uint64_t y = (uint64_t)(int64_t)((const T *)it.data[2])[o[2]];
        uint64_t r = op == OP_ADD   ? x + y
                     : op == OP_SUB ? x - y
                     : op == OP_MUL ? x * y
                                    : ((int64_t)x > (int64_t)y ? x : y);
        ((T *)it.data[0])[o[0]] = (T)r;
    }
};

template <typename T> static int binary_typed(cuda_ctx *c, enum op op, const pw_iter &it) {
    switch (op) {
    case OP_ADD: return pw_launch(c, it.n, binary_f<T, OP_ADD>{it}, "add<<<>>>");
    case OP_SUB: return pw_launch(c, it.n, binary_f<T, OP_SUB>{it}, "sub<<<>>>");
    case OP_MUL: return pw_launch(c, it.n, binary_f<T, OP_MUL>{it}, "mul<<<>>>");
    case OP_DIV: return pw_launch(c, it.n, binary_f<T, OP_DIV>{it}, "div<<<>>>");
    case OP_MAXIMUM: return pw_launch(c, it.n, binary_f<T, OP_MAXIMUM>{it}, "maximum<<<>>>");
    default: snprintf(c->err, sizeof c->err, "%s is not a binary op", op_name(op)); return -1;
    }
}

int cuda_binary(cuda_ctx *c, const graph_node *n, const tensor *a, const tensor *b, tensor *out) {
    const tensor *in[2] = {a, b};
    pw_iter it = pw_make(out, 2, in);
    switch (a->dtype) {
    case DT_F32: return binary_typed<float>(c, n->op, it);
    case DT_F16: return binary_typed<uint16_t>(c, n->op, it);
    case DT_I32:
        if (n->op != OP_DIV)
            return pw_launch(c, it.n, binary_int_f<int32_t>{it, n->op}, "binary_i32<<<>>>");
        break;
    case DT_I64:
        if (n->op != OP_DIV)
            return pw_launch(c, it.n, binary_int_f<int64_t>{it, n->op}, "binary_i64<<<>>>");
        break;
    default: break;
    }
    return cuda_pw_fail(c, op_name(n->op), a->dtype);
}

// ---- where and copy: they move bits, so one kernel per element size ------------

template <typename E> struct where_f {
    pw_iter it;
    __device__ void operator()(int64_t i) const {
        int64_t o[4];
        pw_offsets<4>(it, i, o);
        bool m = ((const uint8_t *)it.data[1])[o[1]] != 0;
        ((E *)it.data[0])[o[0]] = m ? ((const E *)it.data[2])[o[2]] : ((const E *)it.data[3])[o[3]];
    }
};

int cuda_where(cuda_ctx *c, const tensor *cond, const tensor *a, const tensor *b, tensor *out) {
    if (cond->dtype != DT_BOOL) {
        snprintf(c->err, sizeof c->err, "where: the condition must be bool, got %s",
                 dtype_name(cond->dtype));
        return -1;
    }
    const tensor *in[3] = {cond, a, b};
    pw_iter it = pw_make(out, 3, in);
    switch (dtype_size(out->dtype)) {
    case 1: return pw_launch(c, it.n, where_f<uint8_t>{it}, "where<<<>>>");
    case 2: return pw_launch(c, it.n, where_f<uint16_t>{it}, "where<<<>>>");
    case 4: return pw_launch(c, it.n, where_f<uint32_t>{it}, "where<<<>>>");
    default: return pw_launch(c, it.n, where_f<uint64_t>{it}, "where<<<>>>");
    }
}

template <typename E> struct copy_f {
    pw_iter it;
    __device__ void operator()(int64_t i) const {
        int64_t o[2];
        pw_offsets<2>(it, i, o);
        ((E *)it.data[0])[o[0]] = ((const E *)it.data[1])[o[1]];
    }
};

int cuda_copy(cuda_ctx *c, const tensor *x, tensor *out) {
    if (x->dtype != out->dtype) {
        snprintf(c->err, sizeof c->err, "copy: dtypes %s and %s differ", dtype_name(x->dtype),
                 dtype_name(out->dtype));
        return -1;
    }
    pw_iter it = pw_make(out, 1, &x);
    switch (dtype_size(out->dtype)) {
    case 1: return pw_launch(c, it.n, copy_f<uint8_t>{it}, "copy<<<>>>");
    case 2: return pw_launch(c, it.n, copy_f<uint16_t>{it}, "copy<<<>>>");
    case 4: return pw_launch(c, it.n, copy_f<uint32_t>{it}, "copy<<<>>>");
    default: return pw_launch(c, it.n, copy_f<uint64_t>{it}, "copy<<<>>>");
    }
}
