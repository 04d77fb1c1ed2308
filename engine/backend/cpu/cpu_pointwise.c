// Pointwise kernels: unary math, broadcasting binary ops, where, cast,
// dropout, noise and strided copies (cpu_kernels.h). Each op is a 1-d
// segment loop specialized on unit and zero strides; cpu_iter supplies the
// segments and the threads.
#include "core/op_rules.h"
#include "cpu_f16.h"
#include "cpu_iter.h"
#include "cpu_kernels.h"
#include "cpu_formulas.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#if defined(__AVX__)
#include <immintrin.h>
#endif

int cpu_fail(cpu_ctx *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
    return -1;
}

// f16 and bf16 operands are converted through f32 buffers of this many elements
// (on the stack: three of them fit easily in L1).
#define CHUNK 256

// ---- unary ---------------------------------------------------------------

typedef struct unary_prm {
    float a, b;   // a formula's fa0 and fa1; DROPOUT: a = 1 / (1 - p); NOISE: a = sd
    uint64_t key; // DROPOUT and NOISE stream key
    uint32_t thr; // DROPOUT threshold
} unary_prm;

// o[i] = f(x[i * sx]) for i < n; flat0 is o[0]'s index in the output.
typedef void (*unary_fn)(int64_t n, float *restrict o, const float *restrict x, int64_t sx,
                         const unary_prm *p, int64_t flat0);

#define UNARY(name, expr)                                                                          \
    static void un_##name(int64_t n, float *restrict o, const float *restrict a, int64_t sa,       \
                          const unary_prm *p, int64_t flat0) {                                     \
        (void)p;                                                                                   \
        (void)flat0;                                                                               \
        if (sa == 1) {                                                                             \
            _Pragma("omp simd") for (int64_t i = 0; i < n; i++) {                                  \
                float x = a[i];                                                                    \
                o[i] = (expr);                                                                     \
            }                                                                                      \
        } else {                                                                                   \
            for (int64_t i = 0; i < n; i++) {                                                      \
                float x = a[i * sa];                                                               \
                o[i] = (expr);                                                                     \
            }                                                                                      \
        }                                                                                          \
    }

// Every op of core/pointwise.h's table by its formula there; sqrt and
// rsqrt are replaced below, dropout and noise are not formulas.
#define X(U, l, a0, b0) UNARY(f_##l, tc_f_##l(x, p->a, p->b))
TC_POINTWISE_OPS(X)
#undef X

// sqrtf sets errno, so gcc will not vectorize it without -fno-math-errno;
// the square-root instruction is called directly instead.
static void un_sqrt_rsqrt(int64_t n, float *restrict o, const float *restrict a, int64_t sa,
                          bool recip) {
    int64_t i = 0;
#if defined(__AVX__)
    if (sa == 1) {
        __m256 one = _mm256_set1_ps(1.0f);
        for (; i + 8 <= n; i += 8) {
            __m256 r = _mm256_sqrt_ps(_mm256_loadu_ps(a + i));
            _mm256_storeu_ps(o + i, recip ? _mm256_div_ps(one, r) : r);
        }
    }
#endif
    for (; i < n; i++) {
        float r = sqrtf(a[i * sa]);
        o[i] = recip ? 1.0f / r : r;
    }
}

static void un_sqrt(int64_t n, float *restrict o, const float *restrict a, int64_t sa,
                    const unary_prm *p, int64_t flat0) {
    (void)p;
    (void)flat0;
    un_sqrt_rsqrt(n, o, a, sa, false);
}

static void un_rsqrt(int64_t n, float *restrict o, const float *restrict a, int64_t sa,
                     const unary_prm *p, int64_t flat0) {
    (void)p;
    (void)flat0;
    un_sqrt_rsqrt(n, o, a, sa, true);
}

// The mask depends on the element's flat index only (op_rules.h), so it is
// the same for any thread split and matches the reference bit for bit.
static void un_dropout(int64_t n, float *restrict o, const float *restrict a, int64_t sa,
                       const unary_prm *p, int64_t flat0) {
    uint64_t key = p->key;
    uint32_t thr = p->thr;
    float s = p->a;
#pragma omp simd
    for (int64_t i = 0; i < n; i++)
        o[i] = op_dropout_keep(key, (uint64_t)(flat0 + i), thr) ? a[i * sa] * s : 0.0f;
}

// The draw, like dropout's mask, depends on the element's flat index only.
UNARY(noise, x + p->a * op_noise_normal(p->key, (uint64_t)(flat0 + i)))

static const unary_fn formula_table[OP_COUNT] = {
#define X(U, l, a0, b0) [OP_##U] = un_f_##l,
    TC_POINTWISE_OPS(X)
#undef X
};

// The kernel of a unary op: the square roots by the instruction, unrolled
// by hand (above), dropout by its mask, noise by its draw, the others by
// their formula.
static unary_fn unary_of(enum op op) {
    if (op == OP_SQRT)
        return un_sqrt;
    if (op == OP_RSQRT)
        return un_rsqrt;
    if (op == OP_DROPOUT)
        return un_dropout;
    if (op == OP_NOISE)
        return un_noise;
    return op >= 0 && op < OP_COUNT ? formula_table[op] : NULL;
}

typedef struct unary_job {
    unary_fn fn;
    unary_prm p;
    enum dtype t; // the operands' dtype
} unary_job;

static void seg_unary_f32(void *ctx, int64_t n, char *const *ptr, const int64_t *st,
                          int64_t flat0) {
    const unary_job *j = ctx;
    j->fn(n, (float *)ptr[0], (const float *)ptr[1], st[1], &j->p, flat0);
}

static void seg_unary_half(void *ctx, int64_t n, char *const *ptr, const int64_t *st,
                           int64_t flat0) {
    const unary_job *j = ctx;
    float x[CHUNK], y[CHUNK];
    uint16_t *o = (uint16_t *)ptr[0];
    const uint16_t *a = (const uint16_t *)ptr[1];
    for (int64_t i = 0; i < n; i += CHUNK) {
        int64_t m = n - i < CHUNK ? n - i : CHUNK;
        cpu_half_load(j->t, m, a + i * st[1], st[1], x);
        j->fn(m, y, x, 1, &j->p, flat0 + i);
        cpu_half_store(j->t, m, y, o + i, 1);
    }
}

// ---- cast ----------------------------------------------------------------

static double load_as_double(enum dtype t, const char *p) {
    switch (t) {
    case DT_F32: return *(const float *)p;
    case DT_F16: return dtype_f16_to_f32(*(const uint16_t *)p);
    case DT_BF16: return dtype_bf16_to_f32(*(const uint16_t *)p);
    case DT_I32: return *(const int32_t *)p;
    case DT_I64: return (double)*(const int64_t *)p;
    case DT_BOOL: return *(const uint8_t *)p;
    default: return 0;
    }
}

static void store_double(enum dtype t, char *p, double v) {
    switch (t) {
    case DT_F32: *(float *)p = (float)v; break;
    case DT_F16: *(uint16_t *)p = dtype_f32_to_f16((float)v); break;
    case DT_BF16: *(uint16_t *)p = dtype_f32_to_bf16((float)v); break;
    case DT_I32: *(int32_t *)p = (int32_t)v; break;
    case DT_I64: *(int64_t *)p = (int64_t)v; break;
    case DT_BOOL: *(uint8_t *)p = v != 0; break;
    default: break;
    }
}

typedef struct cast_job {
    enum dtype from, to;
} cast_job;

// f16 or bf16 (j->from) to f32
static void seg_cast_half_to_f32(void *ctx, int64_t n, char *const *ptr, const int64_t *st,
                                 int64_t flat0) {
    (void)flat0;
    const cast_job *j = ctx;
    cpu_half_load(j->from, n, (const uint16_t *)ptr[1], st[1], (float *)ptr[0]);
}

// f32 to f16 or bf16 (j->to)
static void seg_cast_f32_to_half(void *ctx, int64_t n, char *const *ptr, const int64_t *st,
                                 int64_t flat0) {
    (void)flat0;
    const cast_job *j = ctx;
    const float *a = (const float *)ptr[1];
    uint16_t *o = (uint16_t *)ptr[0];
    if (st[1] == 1) {
        cpu_half_store(j->to, n, a, o, 1);
        return;
    }
    float x[CHUNK];
    for (int64_t i = 0; i < n; i += CHUNK) {
        int64_t m = n - i < CHUNK ? n - i : CHUNK;
        for (int64_t k = 0; k < m; k++)
            x[k] = a[(i + k) * st[1]];
        cpu_half_store(j->to, m, x, o + i, 1);
    }
}

// Every other pair: rare (index and mask conversions), so one generic loop
// through double, which holds every i32, f16 and bf16 exactly.
static void seg_cast_generic(void *ctx, int64_t n, char *const *ptr, const int64_t *st,
                             int64_t flat0) {
    (void)flat0;
    const cast_job *j = ctx;
    int64_t si = (int64_t)dtype_size(j->from), so = (int64_t)dtype_size(j->to);
    for (int64_t i = 0; i < n; i++)
        store_double(j->to, ptr[0] + i * so,
                     op_cast_value(j->to, load_as_double(j->from, ptr[1] + i * st[1] * si)));
}

// ---- copy ----------------------------------------------------------------

int cpu_copy(cpu_ctx *c, const tensor *x, tensor *out) {
    if (x->dtype != out->dtype) // a copy moves bytes: a cast is cpu_unary's
        return cpu_fail(c, "copy: input %s and output %s differ in dtype", dtype_name(x->dtype),
                        dtype_name(out->dtype));
    cpu_iter_copy(out, x);
    c->kernels++;
    return 0;
}

tensor *cpu_contiguous(cpu_ctx *c, const tensor *x) {
    if (tensor_is_contiguous(x))
        return tensor_view(x);
    tensor *y = tensor_new_empty(x->dtype, x->ndim, x->shape);
    if (!y) {
        cpu_fail(c, "out of memory making a %zu-byte contiguous copy", tensor_nbytes(x));
        return NULL;
    }
    cpu_copy(c, x, y);
    return y;
}

// ---- f16 and bf16 through f32 scratch (cpu_kernels.h) ----------------------

// Strided 16-bit reads straight into contiguous f32: one pass, no copy first.
tensor *cpu_f32_in(cpu_ctx *c, const char *what, const tensor *t) {
    if (t->dtype == DT_F32)
        return cpu_contiguous(c, t);
    if (!dtype_is_half(t->dtype)) {
        cpu_fail(c, "%s: dtype %s is not supported by the CPU eager kernels (f32, f16, bf16)", what,
                 dtype_name(t->dtype));
        return NULL;
    }
    tensor *y = tensor_new_empty(DT_F32, t->ndim, t->shape);
    if (!y) {
        cpu_fail(c, "%s: out of memory for the f32 copy of a %zu-byte %s operand", what,
                 tensor_nbytes(t), dtype_name(t->dtype));
        return NULL;
    }
    cpu_iter it;
    cpu_iter_init(&it, y, 1, &t);
    cast_job j = {t->dtype, DT_F32};
    cpu_iter_run(&it, seg_cast_half_to_f32, &j);
    return y;
}

tensor *cpu_f32_out(cpu_ctx *c, const char *what, tensor *out) {
    if (out->dtype != DT_F32 && !dtype_is_half(out->dtype)) {
        cpu_fail(c,
                 "%s: output dtype %s is not supported by the CPU eager kernels (f32, f16, bf16)",
                 what, dtype_name(out->dtype));
        return NULL;
    }
    tensor *y =
        out->dtype == DT_F32 ? tensor_view(out) : tensor_new_empty(DT_F32, out->ndim, out->shape);
    if (!y)
        cpu_fail(c, "%s: out of memory for an f32 output of %lld elements", what,
                 (long long)tensor_numel(out));
    return y;
}

int cpu_f32_done(tensor *o32, tensor *out, int rc) {
    if (rc == 0 && o32 && dtype_is_half(out->dtype)) {
        cpu_iter it;
        cpu_iter_init(&it, out, 1, (const tensor *[]){o32});
        cast_job j = {DT_F32, out->dtype};
        cpu_iter_run(&it, seg_cast_f32_to_half, &j);
    }
    tensor_free(o32);
    return rc;
}

int cpu_need_same_float(cpu_ctx *c, const char *what, int n, const tensor *const *t) {
    enum dtype first = DT_COUNT;
    for (int i = 0; i < n; i++) {
        if (!t[i])
            continue;
        if (t[i]->dtype != DT_F32 && !dtype_is_half(t[i]->dtype))
            return cpu_fail(c,
                            "%s: dtype %s is not supported by the CPU eager kernels (f32, f16, "
                            "bf16)",
                            what, dtype_name(t[i]->dtype));
        if (first == DT_COUNT)
            first = t[i]->dtype;
        else if (t[i]->dtype != first) // name the 16-bit one first
            return cpu_fail(c,
                            "%s: dtype %s is not supported beside %s (operands and output all "
                            "of one float dtype)",
                            what, dtype_name(first == DT_F32 ? t[i]->dtype : first),
                            dtype_name(first == DT_F32 ? first : t[i]->dtype));
    }
    return 0;
}

int cpu_unary(cpu_ctx *c, const graph_node *n, const tensor *x, tensor *out) {
    cpu_iter it;
    cpu_iter_init(&it, out, 1, &x);
    if (n->op == OP_CAST) {
        cast_job j = {x->dtype, out->dtype};
        if (j.from == j.to) {
            cpu_iter_copy(out, x);
        } else if (dtype_is_half(j.from) && j.to == DT_F32) {
            cpu_iter_run(&it, seg_cast_half_to_f32, &j);
        } else if (j.from == DT_F32 && dtype_is_half(j.to)) {
            cpu_iter_run(&it, seg_cast_f32_to_half, &j);
        } else {
            cpu_iter_run(&it, seg_cast_generic, &j);
        }
        c->kernels++;
        return 0;
    }
    unary_job j = {.fn = unary_of(n->op), .t = x->dtype};
    if (!j.fn)
        return cpu_fail(c, "%s is not a unary op", op_name(n->op));
    if (n->op == OP_DROPOUT) {
        j.p.key = op_dropout_key(n->ia[0], c->step ? c->step : 1);
        j.p.thr = op_dropout_threshold(n->fa[0]);
        j.p.a = (float)(1.0 / (1.0 - n->fa[0]));
    } else if (n->op == OP_NOISE) {
        j.p.key = op_noise_key(n->ia[0], c->step ? c->step : 1);
        j.p.a = (float)n->fa[0];
    } else { // a formula's attributes (core/pointwise.h)
        j.p.a = (float)n->fa[0];
        j.p.b = (float)n->fa[1];
    }
    if (x->dtype != out->dtype)
        return cpu_fail(c, "%s: input %s and output %s differ in dtype", op_name(n->op),
                        dtype_name(x->dtype), dtype_name(out->dtype));
    if (x->dtype == DT_F32)
        cpu_iter_run(&it, seg_unary_f32, &j);
    else if (dtype_is_half(x->dtype))
        cpu_iter_run(&it, seg_unary_half, &j);
    else
        return cpu_fail(c, "%s: dtype %s is not supported (f32, f16 and bf16 are)", op_name(n->op),
                        dtype_name(x->dtype));
    c->kernels++;
    return 0;
}

// ---- binary --------------------------------------------------------------

typedef void (*binary_fn)(int64_t n, float *restrict o, const float *restrict a, int64_t sa,
                          const float *restrict b, int64_t sb);

#define BINARY(name, expr)                                                                         \
    static void bin_##name(int64_t n, float *restrict o, const float *restrict a, int64_t sa,      \
                           const float *restrict b, int64_t sb) {                                  \
        if (sa == 1 && sb == 1) {                                                                  \
            _Pragma("omp simd") for (int64_t i = 0; i < n; i++) {                                  \
                float x = a[i], y = b[i];                                                          \
                o[i] = (expr);                                                                     \
            }                                                                                      \
        } else if (sa == 1 && sb == 0) {                                                           \
            float y = b[0];                                                                        \
            _Pragma("omp simd") for (int64_t i = 0; i < n; i++) {                                  \
                float x = a[i];                                                                    \
                o[i] = (expr);                                                                     \
            }                                                                                      \
        } else if (sa == 0 && sb == 1) {                                                           \
            float x = a[0];                                                                        \
            _Pragma("omp simd") for (int64_t i = 0; i < n; i++) {                                  \
                float y = b[i];                                                                    \
                o[i] = (expr);                                                                     \
            }                                                                                      \
        } else {                                                                                   \
            for (int64_t i = 0; i < n; i++) {                                                      \
                float x = a[i * sa], y = b[i * sb];                                                \
                o[i] = (expr);                                                                     \
            }                                                                                      \
        }                                                                                          \
    }

// clang-format off
BINARY(add, x + y)
BINARY(sub, x - y)
BINARY(mul, x * y)
BINARY(div, x / y)
// NaN in either input gives NaN, as torch.maximum
BINARY(maximum, (x != x || x > y) ? x : y)
// clang-format on

static const binary_fn binary_table[OP_COUNT] = {
    [OP_ADD] = bin_add, [OP_SUB] = bin_sub,         [OP_MUL] = bin_mul,
    [OP_DIV] = bin_div, [OP_MAXIMUM] = bin_maximum,
};

static void seg_binary_f32(void *ctx, int64_t n, char *const *ptr, const int64_t *st,
                           int64_t flat0) {
    (void)flat0;
    binary_fn fn = *(const binary_fn *)ctx;
    fn(n, (float *)ptr[0], (const float *)ptr[1], st[1], (const float *)ptr[2], st[2]);
}

typedef struct binary_job {
    binary_fn fn;
    enum dtype t; // f16 or bf16
} binary_job;

static void seg_binary_half(void *ctx, int64_t n, char *const *ptr, const int64_t *st,
                            int64_t flat0) {
    (void)flat0;
    const binary_job *j = ctx;
    float x[CHUNK], y[CHUNK], z[CHUNK];
    const uint16_t *a = (const uint16_t *)ptr[1], *b = (const uint16_t *)ptr[2];
    for (int64_t i = 0; i < n; i += CHUNK) {
        int64_t m = n - i < CHUNK ? n - i : CHUNK;
        cpu_half_load(j->t, st[1] ? m : 1, a + i * st[1], st[1], x);
        cpu_half_load(j->t, st[2] ? m : 1, b + i * st[2], st[2], y);
        j->fn(m, z, x, st[1] ? 1 : 0, y, st[2] ? 1 : 0);
        cpu_half_store(j->t, m, z, (uint16_t *)ptr[0] + i, 1);
    }
}

// Integer tensors (positions, counters): exact arithmetic in 64 bits,
// wrapping like the C types on overflow.
typedef struct int_job {
    enum op op;
    enum dtype t;
} int_job;

static int64_t load_int(enum dtype t, const char *p) {
    return t == DT_I32 ? *(const int32_t *)p : *(const int64_t *)p;
}

static void seg_binary_int(void *ctx, int64_t n, char *const *ptr, const int64_t *st,
                           int64_t flat0) {
    (void)flat0;
    const int_job *j = ctx;
    int64_t es = (int64_t)dtype_size(j->t);
    for (int64_t i = 0; i < n; i++) {
        uint64_t x = (uint64_t)load_int(j->t, ptr[1] + i * st[1] * es);
        uint64_t y = (uint64_t)load_int(j->t, ptr[2] + i * st[2] * es);
        uint64_t r = j->op == OP_ADD   ? x + y
                     : j->op == OP_SUB ? x - y
                     : j->op == OP_MUL ? x * y
                                       : ((int64_t)x > (int64_t)y ? x : y);
        if (j->t == DT_I32)
            ((int32_t *)ptr[0])[i] = (int32_t)(uint32_t)r;
        else
            ((int64_t *)ptr[0])[i] = (int64_t)r;
    }
}

// GE: a >= b into bool (uint8) for every input dtype; NaN compares false.
// f16 and bf16 go through f32 chunks, integers compare as int64.
static void seg_ge(void *ctx, int64_t n, char *const *ptr, const int64_t *st, int64_t flat0) {
    (void)flat0;
    enum dtype t = *(const enum dtype *)ctx;
    uint8_t *restrict o = (uint8_t *)ptr[0];
    if (t == DT_F32) {
        const float *restrict a = (const float *)ptr[1], *restrict b = (const float *)ptr[2];
        if (st[1] == 1 && st[2] == 1) {
#pragma omp simd
            for (int64_t i = 0; i < n; i++)
                o[i] = a[i] >= b[i];
        } else {
            for (int64_t i = 0; i < n; i++)
                o[i] = a[i * st[1]] >= b[i * st[2]];
        }
    } else if (dtype_is_half(t)) {
        float x[CHUNK], y[CHUNK];
        const uint16_t *a = (const uint16_t *)ptr[1], *b = (const uint16_t *)ptr[2];
        for (int64_t i = 0; i < n; i += CHUNK) {
            int64_t m = n - i < CHUNK ? n - i : CHUNK;
            cpu_half_load(t, m, a + i * st[1], st[1], x);
            cpu_half_load(t, m, b + i * st[2], st[2], y);
            for (int64_t k = 0; k < m; k++)
                o[i + k] = x[k] >= y[k];
        }
    } else {
        int64_t es = (int64_t)dtype_size(t);
        for (int64_t i = 0; i < n; i++)
            o[i] = t == DT_BOOL ? ptr[1][i * st[1]] >= ptr[2][i * st[2]]
                                : load_int(t, ptr[1] + i * st[1] * es) >=
                                      load_int(t, ptr[2] + i * st[2] * es);
    }
}

int cpu_binary(cpu_ctx *c, const graph_node *n, const tensor *a, const tensor *b, tensor *out) {
    if (n->op == OP_GE) {
        if (a->dtype != b->dtype || out->dtype != DT_BOOL)
            return cpu_fail(c, "ge: inputs %s and %s must match, into bool", dtype_name(a->dtype),
                            dtype_name(b->dtype));
        cpu_iter it;
        cpu_iter_init(&it, out, 2, (const tensor *[]){a, b});
        enum dtype t = a->dtype;
        cpu_iter_run(&it, seg_ge, &t);
        c->kernels++;
        return 0;
    }
    binary_fn fn = binary_table[n->op];
    if (!fn)
        return cpu_fail(c, "%s is not a binary op", op_name(n->op));
    if (a->dtype != b->dtype || out->dtype != a->dtype)
        return cpu_fail(c, "%s: dtypes %s, %s into %s differ (cast first)", op_name(n->op),
                        dtype_name(a->dtype), dtype_name(b->dtype), dtype_name(out->dtype));
    cpu_iter it;
    cpu_iter_init(&it, out, 2, (const tensor *[]){a, b});
    if (a->dtype == DT_F32) {
        cpu_iter_run(&it, seg_binary_f32, &fn);
    } else if (dtype_is_half(a->dtype)) {
        binary_job j = {fn, a->dtype};
        cpu_iter_run(&it, seg_binary_half, &j);
    } else if ((a->dtype == DT_I32 || a->dtype == DT_I64) && n->op != OP_DIV) {
        int_job j = {n->op, a->dtype};
        cpu_iter_run(&it, seg_binary_int, &j);
    } else {
        return cpu_fail(c, "%s: dtype %s is not supported (f32, f16, bf16%s are)", op_name(n->op),
                        dtype_name(a->dtype), n->op == OP_DIV ? "" : ", i32, i64");
    }
    c->kernels++;
    return 0;
}

// ---- where ---------------------------------------------------------------

// A select moves bits, so one loop per element size serves every dtype.
#define WHERE_LOOP(T)                                                                              \
    do {                                                                                           \
        T *restrict o = (T *)ptr[0];                                                               \
        const uint8_t *restrict m = (const uint8_t *)ptr[1];                                       \
        const T *restrict a = (const T *)ptr[2], *restrict b = (const T *)ptr[3];                  \
        if (st[1] == 1 && st[2] == 1 && st[3] == 1) {                                              \
            _Pragma("omp simd") for (int64_t i = 0; i < n; i++) o[i] = m[i] ? a[i] : b[i];         \
        } else {                                                                                   \
            for (int64_t i = 0; i < n; i++)                                                        \
                o[i] = m[i * st[1]] ? a[i * st[2]] : b[i * st[3]];                                 \
        }                                                                                          \
    } while (0)

static void seg_where(void *ctx, int64_t n, char *const *ptr, const int64_t *st, int64_t flat0) {
    (void)flat0;
    switch (*(const int64_t *)ctx) {
    case 1: WHERE_LOOP(uint8_t); break;
    case 2: WHERE_LOOP(uint16_t); break;
    case 4: WHERE_LOOP(uint32_t); break;
    default: WHERE_LOOP(uint64_t); break;
    }
}

int cpu_where(cpu_ctx *c, const tensor *cond, const tensor *a, const tensor *b, tensor *out) {
    if (cond->dtype != DT_BOOL)
        return cpu_fail(c, "where: the condition must be bool, got %s", dtype_name(cond->dtype));
    if (a->dtype != out->dtype || b->dtype != out->dtype)
        return cpu_fail(c, "where: dtypes %s and %s into %s differ", dtype_name(a->dtype),
                        dtype_name(b->dtype), dtype_name(out->dtype));
    cpu_iter it;
    cpu_iter_init(&it, out, 3, (const tensor *[]){cond, a, b});
    int64_t es = (int64_t)dtype_size(out->dtype);
    cpu_iter_run(&it, seg_where, &es);
    c->kernels++;
    return 0;
}
