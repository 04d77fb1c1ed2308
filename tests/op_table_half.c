// The 16-bit tests of tests/test_op_table.c that are not rows of the op
// table. The conversions: dtype.c's portable ones and cpu_f16.h's F16C ones
// follow IEEE round to nearest even (ties, subnormals, overflow to inf,
// NaN, -0) and agree bit for bit on every half and on millions of floats;
// bf16 the same (ties, NaN, inf, overflow, subnormals, every bf16 value,
// random floats through the vector loops). conv2d_post (the compiled mode's
// convolution with its epilogue) in f16; kernels that cannot take a dtype
// say so; a small CNN trains a step under autocast. bf16 GEMMs and
// convolutions run oneDNN's bf16 primitives on a CPU with AVX512-BF16:
// checked against fp64 and against the widening path, strided and
// broadcast operands included, and that they really ran (or declined what
// they cannot express).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff/autograd.h"
#include "backend/cpu/cpu_f16.h"
#include "backend/cpu/cpu_kernels.h"
#include "core/graph.h"
#include "eager/eager.h"
#include "model/model.h"
#include "model/model_prepare.h"
#include "op_table.h"
#include "ref/ref.h"

#include <oneapi/dnnl/dnnl.h>

// ---- conversions ----------------------------------------------------------------

static uint32_t bits_of(float f) {
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

static float float_of(uint32_t b) {
    float f;
    memcpy(&f, &b, 4);
    return f;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next_u64(void) { // xorshift64*
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 0x2545f4914f6cdd1dull;
}

// cpu_f16.h's converters kept out of line: with the constant sizes and
// strides of these tests inlined, gcc's loop analysis warns (falsely) that
// the tail loops overflow
#if defined(__clang__)
#define OUT_OF_LINE __attribute__((noinline))
#else
#define OUT_OF_LINE __attribute__((noipa))
#endif

OUT_OF_LINE static void f16_load(int64_t n, const uint16_t *src, int64_t stride, float *dst) {
    cpu_f16_load(n, src, stride, dst);
}

OUT_OF_LINE static void f16_store(int64_t n, const float *src, uint16_t *dst, int64_t stride) {
    cpu_f16_store(n, src, dst, stride);
}

// The 16-bit formats as the conversion tests see them: the loops under
// test (F16C for f16, plain vectorized loops for bf16), dtype.c's scalar
// reference, the exponent mask (the mantissa is the bits below it, its top
// bit the quiet-NaN bit), the largest finite value (a filler a strided
// read must skip) and how many f32 ulps above a value its tie with the next
// one lies.
typedef struct half_fmt {
    const char *name, *loops;
    void (*load)(int64_t n, const uint16_t *src, int64_t stride, float *dst);
    void (*store)(int64_t n, const float *src, uint16_t *dst, int64_t stride);
    float (*widen)(uint16_t h);
    uint16_t (*narrow)(float f);
    uint16_t exp_mask, max_finite;
    uint32_t tie;
} half_fmt;

OUT_OF_LINE static void bf16_load(int64_t n, const uint16_t *src, int64_t stride, float *dst) {
    cpu_half_load(DT_BF16, n, src, stride, dst);
}

OUT_OF_LINE static void bf16_store(int64_t n, const float *src, uint16_t *dst, int64_t stride) {
    cpu_half_store(DT_BF16, n, src, dst, stride);
}

static const half_fmt F16 = {
    "f16", "F16C", f16_load, f16_store, dtype_f16_to_f32, dtype_f32_to_f16, 0x7c00, 0x7bff, 0x1000};
static const half_fmt BF16 = {
    "bf16", "loop", bf16_load, bf16_store, dtype_bf16_to_f32, dtype_f32_to_bf16,
    0x7f80, 0x7f7f, 0x8000};

typedef struct narrow_rule {
    float f;
    uint16_t h;
} narrow_rule;

// each f narrowed by the scalar reference, by the vector lanes and the tail
// of the store loop (19 = 16 in lanes + 3 in the tail) and by its strided
// path
static void expect_narrow(const half_fmt *fmt, int n, const narrow_rule *rules) {
    for (int r = 0; r < n; r++) {
        float f = rules[r].f;
        uint16_t want = rules[r].h;
        if (fmt->narrow(f) != want)
            fail_msg("dtype_f32_to_%s(%a = 0x%08x) = 0x%04x, want 0x%04x", fmt->name, (double)f,
                     bits_of(f), fmt->narrow(f), want);
        float in[19];
        uint16_t out[38];
        for (int i = 0; i < 19; i++)
            in[i] = f;
        fmt->store(19, in, out, 1);
        for (int i = 0; i < 19; i++)
            if (out[i] != want)
                fail_msg("%s store lane %d: %a -> 0x%04x, want 0x%04x", fmt->name, i, (double)f,
                         out[i], want);
        fmt->store(19, in, out, 2);
        assert_int_equal(out[36], want);
    }
}

static void test_narrow_rules(void **state) {
    (void)state;
    const float ulp1 = 0x1p-10f, tiny = 0x1p-24f; // f16's ulp at 1, its smallest subnormal
    const narrow_rule rules[] = {
        {1.0f, 0x3c00},
        {1.0f + ulp1 / 2, 0x3c00},            // tie: down to the even 1
        {1.0f + 3 * ulp1 / 2, 0x3c02},        // tie: up to the even 1 + 2 ulp
        {1.0f + ulp1 / 2 + 0x1p-23f, 0x3c01}, // just above the tie
        {-(1.0f + 3 * ulp1 / 2), 0xbc02},     // ties are symmetric
        {0x1p-14f, 0x0400},                   // smallest normal
        {tiny, 0x0001},                       // smallest subnormal
        {1023 * tiny, 0x03ff},                // largest subnormal
        {1023.5f * tiny, 0x0400},             // tie between them: the even one
        {tiny / 2, 0x0000},                   // tie between 0 and the smallest: 0
        {tiny / 2 * 1.0000001f, 0x0001},      // above it: the smallest subnormal
        {3 * tiny / 2, 0x0002},               // tie between 1 and 2 subnormal ulps: 2
        {tiny / 4, 0x0000},                   // rounds to 0
        {-tiny / 4, 0x8000},                  // to -0: the sign stays
        {1e-40f, 0x0000},                     // an f32 subnormal
        {65504.0f, 0x7bff},                   // largest finite
        {65519.0f, 0x7bff},                   // below the tie with the next binade
        {65520.0f, 0x7c00},                   // the tie: overflows to inf
        {-65520.0f, 0xfc00},
        {1e10f, 0x7c00},
        {INFINITY, 0x7c00},
        {-INFINITY, 0xfc00},
        {0.0f, 0x0000},
        {-0.0f, 0x8000},
        {float_of(0x7fc00000u), 0x7e00}, // quiet NaN
        {float_of(0xffc00000u), 0xfe00}, // its sign kept
        {float_of(0x7f800001u), 0x7e00}, // signaling NaN: made quiet
        {float_of(0x7fa00000u), 0x7f00}, // the payload's top bits kept
    };
    expect_narrow(&F16, (int)(sizeof rules / sizeof rules[0]), rules);
}

// h widened by the scalar reference, by the vector lanes and tail of
// cpu_f16_load and by its strided path
static void expect_widen(uint16_t h, uint32_t want) {
    assert_int_equal(bits_of(dtype_f16_to_f32(h)), want);
    uint16_t in[38];
    float out[19];
    for (int i = 0; i < 38; i++)
        in[i] = h;
    f16_load(19, in, 1, out);
    for (int i = 0; i < 19; i++)
        assert_int_equal(bits_of(out[i]), want);
    f16_load(19, in, 2, out);
    assert_int_equal(bits_of(out[18]), want);
}

static void test_widen_rules(void **state) {
    (void)state;
    expect_widen(0x3c00, bits_of(1.0f));
    expect_widen(0x8000, 0x80000000u); // -0
    expect_widen(0x0001, bits_of(0x1p-24f));
    expect_widen(0x03ff, bits_of(1023 * 0x1p-24f));
    expect_widen(0x7bff, bits_of(65504.0f));
    expect_widen(0x7c00, bits_of(INFINITY));
    expect_widen(0xfc00, bits_of(-INFINITY));
    expect_widen(0x7e00, 0x7fc00000u);
    expect_widen(0x7c01, 0x7fc02000u); // signaling NaN: quiet, payload kept, as F16C
    expect_widen(0xfd55, 0xffeaa000u);
}

// Every 16-bit value: widened by the vector path (contiguous and strided)
// as by the scalar one, and narrowed back to itself (a NaN to its quiet
// self).
static void all_values(const half_fmt *fmt) {
    enum { N = 65536 };
    uint16_t *h = malloc(N * sizeof *h), *h2 = malloc(2 * N * sizeof *h2);
    uint16_t *back = malloc(N * sizeof *back);
    float *v = malloc(N * sizeof *v), *s = malloc(N * sizeof *s);
    assert_true(h && h2 && back && v && s);
    for (uint32_t i = 0; i < N; i++) {
        h[i] = h2[2 * i] = (uint16_t)i;
        h2[2 * i + 1] = fmt->max_finite; // between the values a stride-2 read must skip
    }
    fmt->load(N, h, 1, v);
    for (uint32_t i = 0; i < N; i++)
        if (bits_of(v[i]) != bits_of(fmt->widen(h[i])))
            fail_msg("%s 0x%04x widens to 0x%08x (%s), 0x%08x (dtype.c)", fmt->name, i,
                     bits_of(v[i]), fmt->loops, bits_of(fmt->widen(h[i])));
    fmt->load(N, h2, 2, s);
    for (uint32_t i = 0; i < N; i++)
        assert_int_equal(bits_of(s[i]), bits_of(v[i]));
    fmt->store(N, v, back, 1);
    uint16_t mant = 0x7fff & ~fmt->exp_mask, quiet = (uint16_t)((mant + 1) >> 1);
    for (uint32_t i = 0; i < N; i++) {
        bool nan = (i & fmt->exp_mask) == fmt->exp_mask && (i & mant);
        uint16_t want = (uint16_t)(nan ? i | quiet : i);
        if (back[i] != want || fmt->narrow(v[i]) != want)
            fail_msg("%s 0x%04x round-trips to 0x%04x (%s), 0x%04x (dtype.c), want 0x%04x",
                     fmt->name, i, back[i], fmt->loops, fmt->narrow(v[i]), want);
    }
    free(h), free(h2), free(back), free(v), free(s);
}

static void test_all_halves(void **state) {
    (void)state;
    all_values(&F16);
}

// Random f32 bit patterns (every exponent: NaNs, infinities, subnormals,
// huge values) and values at, just below and just above every tie between
// two 16-bit values: the vector loops and dtype.c narrow them alike. check,
// when not NULL, looks at each block of random floats too.
static void random_narrow(const half_fmt *fmt,
                          void (*check)(int n, const float *f, const uint16_t *h)) {
    enum { B = 4096 };
    float f[B];
    uint16_t h[B];
    for (int block = 0; block < 1024; block++) { // 4M floats
        for (int i = 0; i < B; i++)
            f[i] = float_of((uint32_t)(next_u64() >> 32));
        fmt->store(B, f, h, 1);
        for (int i = 0; i < B; i++)
            if (h[i] != fmt->narrow(f[i]))
                fail_msg("%a (0x%08x): %s 0x%04x, dtype.c 0x%04x", (double)f[i], bits_of(f[i]),
                         fmt->loops, h[i], fmt->narrow(f[i]));
        if (check)
            check(B, f, h);
    }
    int n = 0;
    for (uint32_t i = 0; i < 65536; i++) {
        if ((i & fmt->exp_mask) == fmt->exp_mask)
            continue; // inf and NaN have no neighbours
        // a normal value's tie with the next one lies fmt->tie f32 ulps above it
        uint32_t base = bits_of(fmt->widen((uint16_t)i));
        for (uint32_t d = fmt->tie - 1; d <= fmt->tie + 1; d++) {
            f[n++] = float_of(base + d);
            if (n == B) {
                fmt->store(B, f, h, 1);
                for (int k = 0; k < B; k++)
                    assert_int_equal(h[k], fmt->narrow(f[k]));
                n = 0;
            }
        }
    }
}

static void test_random_floats(void **state) {
    (void)state;
    random_narrow(&F16, NULL);
}

// ---- bf16 conversions ------------------------------------------------------------

static void test_bf16_rules(void **state) {
    (void)state;
    const float ulp1 = 0x1p-7f; // bf16's ulp at 1
    const narrow_rule rules[] = {
        {1.0f, 0x3f80},
        {1.0f + ulp1 / 2, 0x3f80},            // tie: down to the even 1
        {1.0f + 3 * ulp1 / 2, 0x3f82},        // tie: up to the even 1 + 2 ulp
        {1.0f + ulp1 / 2 + 0x1p-23f, 0x3f81}, // just above the tie
        {1.0f + ulp1 / 2 - 0x1p-23f, 0x3f80}, // just below it
        {-(1.0f + 3 * ulp1 / 2), 0xbf82},     // ties are symmetric
        {float_of(0x7f7f0000u), 0x7f7f},      // largest finite bf16
        {float_of(0x7f7f7fffu), 0x7f7f},      // below the tie with the next binade
        {float_of(0x7f7f8000u), 0x7f80},      // the tie: overflows to inf
        {FLT_MAX, 0x7f80},                    // f32's largest rounds up to inf
        {-FLT_MAX, 0xff80},
        {INFINITY, 0x7f80},
        {-INFINITY, 0xff80},
        {0.0f, 0x0000},
        {-0.0f, 0x8000},
        {0x1p-126f, 0x0080},             // smallest normal
        {float_of(0x00010000u), 0x0001}, // smallest bf16 subnormal: kept, not flushed
        {float_of(0x00008000u), 0x0000}, // tie between 0 and it: 0 (even)
        {float_of(0x00018000u), 0x0002}, // tie between 1 and 2 subnormal ulps: 2
        {float_of(0x00008001u), 0x0001}, // above the tie
        {float_of(0x007fffffu), 0x0080}, // the largest f32 subnormal rounds up to normal
        {float_of(0x80008001u), 0x8001}, // the sign stays
        {float_of(0x7fc00000u), 0x7fc0}, // quiet NaN
        {float_of(0xffc00000u), 0xffc0}, // its sign kept
        {float_of(0x7f800001u), 0x7fc0}, // signaling NaN, payload only in dropped bits
        {float_of(0x7fa00000u), 0x7fe0}, // the payload's top bits kept, made quiet
        {float_of(0x7fffffffu), 0x7fff}, // no carry into the sign
    };
    expect_narrow(&BF16, (int)(sizeof rules / sizeof rules[0]), rules);
}

// Every bf16 as every half (all_values); widening is a 16-bit shift.
static void test_all_bf16(void **state) {
    (void)state;
    all_values(&BF16);
    for (uint32_t i = 0; i < 65536; i++)
        assert_int_equal(bits_of(dtype_bf16_to_f32((uint16_t)i)), i << 16);
}

// dtype.c's bf16 is the nearest (ties to even) by a plain comparison in
// double
static void nearest_bf16(int n, const float *f, const uint16_t *h) {
    for (int i = 0; i < n; i++) {
        uint32_t x = bits_of(f[i]);
        if ((x & 0x7f800000u) == 0x7f800000u || (x & 0x7fffffffu) >= 0x7f7f8000u)
            continue; // inf, NaN, and what rounds past the largest finite
        double lo = dtype_bf16_to_f32((uint16_t)(x >> 16));
        double hi = dtype_bf16_to_f32((uint16_t)((x >> 16) + 1)), d = f[i];
        double dl = fabs(d - lo), dh = fabs(hi - d);
        uint16_t want = (uint16_t)(x >> 16);
        if (dh < dl || (dh == dl && (want & 1)))
            want++;
        if (h[i] != want)
            fail_msg("%a: 0x%04x, nearest 0x%04x", d, h[i], want);
    }
}

static void test_random_bf16(void **state) {
    (void)state;
    random_narrow(&BF16, nearest_bf16);
}

// ---- conv2d_post (the compiled mode's convolution with its epilogue) ----------

static tensor *random_tensor(enum dtype dt, int nd, const int64_t *shape) {
    tensor *t = tensor_new_empty(dt, nd, shape);
    assert_non_null(t);
    for (int64_t k = 0; k < tensor_numel(t); k++) {
        float v = (float)((double)(next_u64() >> 11) / 4503599627370496.0 - 1.0);
        if (dt == DT_F16)
            ((uint16_t *)tensor_data(t))[k] = dtype_f32_to_f16(v);
        else
            tensor_f32(t)[k] = v;
    }
    return t;
}

static tensor *widened(const tensor *t) {
    if (t->dtype == DT_F32)
        return tensor_contiguous(t);
    tensor *y = tensor_new_empty(DT_F32, t->ndim, t->shape);
    assert_non_null(y);
    f16_load(tensor_numel(t), tensor_data(t), 1, tensor_f32(y));
    return y;
}

// x, w f16 with an f16 bias, post-ops relu, + an f16 tensor of the output's
// shape, * f32 per channel, then x * 0.5 - 1: the rounded f32 result
static void run_post(enum op op, const int64_t *xs, const int64_t *ws, const int64_t *ys) {
    cpu_ctx c = {0};
    char err[256];
    assert_int_equal(cpu_dnnl_new(&c.dnnl, err, sizeof err), 0);
    graph_node n = {.op = op, .ia = {1, 1, 1, 1, 1, 1, 1}};
    int64_t O = ys[1];
    tensor *x = random_tensor(DT_F16, 4, xs), *w = random_tensor(DT_F16, 4, ws);
    tensor *b = random_tensor(DT_F16, 1, &O), *add = random_tensor(DT_F16, 4, ys);
    tensor *mul = random_tensor(DT_F32, 1, &O);
    tensor *y = tensor_new_empty(DT_F16, 4, ys), *y32 = tensor_new_empty(DT_F32, 4, ys);
    cpu_post post[4] = {{.op = OP_RELU},
                        {.op = OP_ADD, .src1 = add},
                        {.op = OP_MUL, .src1 = mul, .per_channel = true},
                        {.op = OP_SCALE, .alpha = 0.5f, .beta = -1.0f}};
    if (cpu_conv2d_post(&c, &n, x, w, b, 4, post, y) < 0)
        fail_msg("%s with post-ops, f16: %s", op_name(op), c.err);
    assert_int_equal(c.kernels, 1);
    tensor *x32 = widened(x), *w32 = widened(w), *b32 = widened(b), *add32 = widened(add);
    cpu_post post32[4] = {post[0], post[1], post[2], post[3]};
    post32[1].src1 = add32;
    if (cpu_conv2d_post(&c, &n, x32, w32, b32, 4, post32, y32) < 0)
        fail_msg("%s with post-ops, f32: %s", op_name(op), c.err);
    const uint16_t *h = tensor_data(y);
    for (int64_t k = 0; k < tensor_numel(y); k++)
        if (h[k] != dtype_f32_to_f16(tensor_f32(y32)[k]))
            fail_msg("%s with post-ops: element %lld is 0x%04x, the rounded f32 result 0x%04x",
                     op_name(op), (long long)k, h[k], dtype_f32_to_f16(tensor_f32(y32)[k]));
    // f16 operands into an f32 output (the compiled mode's conv then cast):
    // the f32 result, unrounded
    tensor *yf = tensor_new_empty(DT_F32, 4, ys);
    assert_int_equal(cpu_conv2d_post(&c, &n, x, w, b, 4, post, yf), 0);
    assert_memory_equal(tensor_data(yf), tensor_data(y32), tensor_nbytes(y32));
    tensor *all[] = {x, w, b, add, mul, y, y32, x32, w32, b32, add32, yf};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tensor_free(all[i]);
    cpu_dnnl_free(c.dnnl);
}

static void test_conv_post(void **state) {
    (void)state;
    run_post(OP_CONV2D, (int64_t[]){2, 3, 9, 11}, (int64_t[]){4, 3, 3, 3},
             (int64_t[]){2, 4, 9, 11});
    // transposed (C, O, kh, kw); stride 1, padding 1: the input's size
    run_post(OP_CONV_TRANSPOSE2D, (int64_t[]){2, 4, 6, 5}, (int64_t[]){4, 3, 3, 3},
             (int64_t[]){2, 3, 6, 5});
}

// ---- dtypes a kernel cannot take ------------------------------------------------

static void expect_fail(cpu_ctx *c, int rc, const char *says) {
    assert_int_equal(rc, -1);
    if (!strstr(c->err, says))
        fail_msg("error \"%s\" does not say \"%s\"", c->err, says);
}

// ---- bf16 GEMMs: oneDNN's bf16 matmul against the widening path --------------------

// A bf16 view of random storage with these shape and strides.
static tensor *bf16_view(int nd, const int64_t *shape, const int64_t *stride) {
    int64_t n = 1;
    for (int d = 0; d < nd; d++)
        n += (shape[d] - 1) * stride[d];
    tensor *buf = tensor_new_empty(DT_BF16, 1, &n), *v = buf ? tensor_view(buf) : NULL;
    tensor_free(buf);
    assert_non_null(v);
    uint16_t *h = tensor_data(v);
    for (int64_t k = 0; k < n; k++)
        h[k] = dtype_f32_to_bf16((float)((double)(next_u64() >> 11) / 4503599627370496.0 - 1.0));
    v->ndim = nd;
    memcpy(v->shape, shape, (size_t)nd * sizeof *shape);
    memcpy(v->stride, stride, (size_t)nd * sizeof *stride);
    return v;
}

// t's element (i, j) of the matrix at the output's batch index bi (nb
// dims); t's batch dims right-aligned, size 1 broadcast
static double bf16_at(const tensor *t, int nb, const int64_t *bi, int64_t i, int64_t j) {
    int64_t off = i * t->stride[t->ndim - 2] + j * t->stride[t->ndim - 1];
    for (int d = 0; d < t->ndim - 2; d++)
        off += (t->shape[d] == 1 ? 0 : bi[d + nb - (t->ndim - 2)]) * t->stride[d];
    return dtype_bf16_to_f32(((const uint16_t *)tensor_data(t))[off]);
}

typedef struct gemm_case {
    const char *name;
    bool linear, bias, bf16_out;
    bool dnnl; // oneDNN takes it (on a CPU with AVX512-BF16); else it is declined
    int na, nb;
    int64_t as[4], ast[4], bs[4], bst[4]; // shapes and strides; linear: b is w (N, K)
} gemm_case;

static const gemm_case gemm_cases[] = {
    // q (2, 4, 16, 8) @ k^T: k (2, 4, 16, 8) viewed as (2, 4, 8, 16)
    {"attention_4d_transposed", .dnnl = true, .na = 4, .nb = 4, .as = {2, 4, 16, 8},
     .ast = {512, 128, 8, 1}, .bs = {2, 4, 8, 16}, .bst = {512, 128, 1, 8}},
    {"attention_4d_broadcast_size1", .dnnl = true, .na = 4, .nb = 4, .as = {2, 4, 16, 8},
     .ast = {512, 128, 8, 1}, .bs = {1, 4, 8, 16}, .bst = {512, 128, 16, 1}},
    {"attention_4d_broadcast_stride0", .dnnl = true, .na = 4, .nb = 4, .as = {2, 4, 16, 8},
     .ast = {512, 128, 8, 1}, .bs = {2, 4, 8, 16}, .bst = {0, 128, 16, 1}, .bf16_out = true},
    {"broadcast_a", .dnnl = true, .na = 3, .nb = 3, .as = {1, 5, 12}, .ast = {60, 12, 1},
     .bs = {3, 12, 7}, .bst = {84, 7, 1}},
    {"batched_at_2d", .dnnl = true, .na = 3, .nb = 2, .as = {3, 17, 24}, .ast = {408, 24, 1},
     .bs = {24, 9}, .bst = {9, 1}},
    {"one_row_bf16_out", .dnnl = true, .na = 2, .nb = 2, .as = {1, 8}, .ast = {8, 1}, .bs = {8, 16},
     .bst = {16, 1}, .bf16_out = true},
    {"linear_bias_bf16_out", .linear = true, .bias = true, .bf16_out = true, .dnnl = true, .na = 3,
     .nb = 2, .as = {2, 9, 32}, .ast = {288, 32, 1}, .bs = {20, 32}, .bst = {32, 1}},
    {"linear_transposed_w", .linear = true, .bias = true, .dnnl = true, .na = 2, .nb = 2,
     .as = {64, 96}, .ast = {96, 1}, .bs = {40, 96}, .bst = {1, 40}},
    // every other column: neither layout brgemm takes, so the widening path
    {"declined_strided_columns", .dnnl = false, .na = 3, .nb = 2, .as = {2, 16, 8},
     .ast = {256, 16, 2}, .bs = {8, 5}, .bst = {5, 1}},
};

// A context with oneDNN; whether the CPU has AVX512-BF16 (else only the
// widening path runs, and the tests say so).
static bool bf16_ctx(cpu_ctx *c) {
    bool have = (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core_bf16) ==
                dnnl_cpu_isa_avx512_core_bf16;
    if (!have)
        print_message("no AVX512-BF16: only the widening path runs\n");
    char err[256];
    assert_int_equal(cpu_dnnl_new(&c->dnnl, err, sizeof err), 0);
    return have;
}

// Both paths on the same bf16 values: oneDNN's (counted in c.dnnl_gemms)
// and, with cpu_dnnl_set_bf16(false), the widening one. Both sum exact
// bf16 products in f32, so each is within K f32 roundings of the fp64
// result (K * 2^-24 of the sum of |terms|), and so within twice that of
// each other; a bf16 output adds its own rounding.
static void test_gemm_bf16_dnnl(void **state) {
    (void)state;
    cpu_ctx c = {0};
    bool have = bf16_ctx(&c);
    for (size_t t = 0; t < sizeof gemm_cases / sizeof gemm_cases[0]; t++) {
        const gemm_case *tc = &gemm_cases[t];
        tensor *a = bf16_view(tc->na, tc->as, tc->ast), *b = bf16_view(tc->nb, tc->bs, tc->bst);
        int64_t N = tc->linear ? tc->bs[0] : tc->bs[tc->nb - 1], K = tc->as[tc->na - 1];
        tensor *bias = tc->bias ? bf16_view(1, &N, (int64_t[]){1}) : NULL;
        int nd = tc->na > tc->nb ? tc->na : tc->nb, nbat = nd - 2;
        int64_t os[4];
        for (int d = 0; d < nbat; d++) {
            int da = d - (nd - tc->na), db = d - (nd - tc->nb);
            int64_t sa = da >= 0 ? tc->as[da] : 1, sb = db >= 0 && !tc->linear ? tc->bs[db] : 1;
            os[d] = sa > sb ? sa : sb;
        }
        os[nd - 2] = tc->as[tc->na - 2];
        os[nd - 1] = N;
        enum dtype odt = tc->bf16_out ? DT_BF16 : DT_F32;
        tensor *y[2] = {tensor_new_empty(odt, nd, os), tensor_new_empty(odt, nd, os)};
        assert_true(y[0] && y[1]);
        for (int path = 0; path < 2; path++) {
            cpu_dnnl_set_bf16(c.dnnl, path == 0);
            int64_t g0 = c.dnnl_gemms, k0 = c.kernels;
            int rc =
                tc->linear ? cpu_linear(&c, a, b, bias, y[path]) : cpu_matmul(&c, a, b, y[path]);
            cpu_dnnl_set_bf16(c.dnnl, true);
            if (rc < 0)
                fail_msg("%s (%s path): %s", tc->name, path ? "widening" : "oneDNN", c.err);
            assert_int_equal(c.kernels - k0, 1);
            if (c.dnnl_gemms - g0 != (path == 0 && have && tc->dnnl))
                fail_msg("%s (%s path): %lld oneDNN GEMMs, expected %d", tc->name,
                         path ? "widening" : "oneDNN", (long long)(c.dnnl_gemms - g0),
                         path == 0 && have && tc->dnnl);
        }
        int64_t M = os[nd - 2], batch = tensor_numel(y[0]) / (M * N);
        for (int64_t q = 0; q < batch; q++) {
            int64_t bi[2] = {0}, rest = q;
            for (int d = nbat - 1; d >= 0; d--) {
                bi[d] = rest % os[d];
                rest /= os[d];
            }
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++) {
                    double ref = 0, mag = 0;
                    for (int64_t k = 0; k < K; k++) {
                        double p =
                            bf16_at(a, nbat, bi, i, k) *
                            (tc->linear ? bf16_at(b, 0, NULL, j, k) : bf16_at(b, nbat, bi, k, j));
                        ref += p;
                        mag += fabs(p);
                    }
                    if (bias) {
                        double v = dtype_bf16_to_f32(((const uint16_t *)tensor_data(bias))[j]);
                        ref += v;
                        mag += fabs(v);
                    }
                    int64_t o = (q * M + i) * N + j;
                    double got = tensor_get_flat(y[0], o), wid = tensor_get_flat(y[1], o);
                    double sums = (double)(K + 1) * 0x1p-24 * mag, ulp = tc->bf16_out ? 0x1p-8 : 0;
                    if (fabs(got - ref) > ulp * fabs(ref) + sums ||
                        fabs(got - wid) > 2 * ulp * fabs(ref) + 2 * sums)
                        fail_msg("%s: element %lld: oneDNN %.9g, widening %.9g, fp64 %.9g",
                                 tc->name, (long long)o, got, wid, ref);
                }
        }
        tensor *all[] = {a, b, bias, y[0], y[1]};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            tensor_free(all[i]);
    }
    cpu_dnnl_free(c.dnnl);
}

static void test_kernel_dtype_errors(void **state) {
    (void)state;
    cpu_ctx c = {0};
    char err[256];
    assert_int_equal(cpu_dnnl_new(&c.dnnl, err, sizeof err), 0);
    graph_node conv = {.op = OP_CONV2D, .ia = {1, 1, 1, 1, 1, 1, 1}};
    int64_t xs[4] = {1, 2, 5, 5}, ws[4] = {3, 2, 3, 3}, ys[4] = {1, 3, 5, 5}, O = 3;
    tensor *x16 = tensor_new(DT_F16, 4, xs), *w32 = tensor_new(DT_F32, 4, ws);
    tensor *xi = tensor_new(DT_I32, 4, xs), *wi = tensor_new(DT_I32, 4, ws);
    tensor *y16 = tensor_new(DT_F16, 4, ys), *yi = tensor_new(DT_I32, 4, ys);
    tensor *bi = tensor_new(DT_I32, 1, &O), *x32 = tensor_new(DT_F32, 4, xs);
    expect_fail(&c, cpu_conv2d(&c, &conv, xi, wi, NULL, yi), "conv2d: dtype i32 is not supported");
    expect_fail(&c, cpu_conv2d(&c, &conv, x16, w32, NULL, yi), "conv2d: output dtype i32");
    cpu_post post = {.op = OP_ADD, .src1 = yi};
    tensor *y32 = tensor_new(DT_F32, 4, ys), *w16 = tensor_new(DT_F16, 4, ws);
    expect_fail(&c, cpu_conv2d_post(&c, &conv, x32, w32, NULL, 1, &post, y32),
                "conv2d: post-op operand dtype i32");
    expect_fail(&c, cpu_conv2d_post(&c, &conv, x16, w16, bi, 0, NULL, y16),
                "conv2d: dtype i32 is not supported");
    // backward and pooling kernels take one dtype throughout (AMP's f16 gradients)
    graph_node pool = {.op = OP_MAX_POOL2D, .ia = {1, 1, 0, 0, 1, 1}};
    expect_fail(&c, cpu_pool2d(&c, &pool, x16, x32),
                "max_pool2d: dtype f16 is not supported beside f32");
    graph_node gi = {.op = OP_CONV2D_GRAD_INPUT, .ia = {1, 1, 1, 1, 1, 1, 1}};
    expect_fail(&c, cpu_conv2d_grad_input(&c, &gi, y16, w32, x16),
                "conv2d_grad_input: dtype f16 is not supported beside f32");
    graph_node sum = {.op = OP_SUM, .ia = {1}};
    tensor *si = tensor_new(DT_I32, 4, (int64_t[]){1, 1, 5, 5});
    expect_fail(&c, cpu_reduce(&c, &sum, xi, si), "sum: dtype i32 is not supported");
    expect_fail(&c, cpu_softmax(&c, xi, false, 0, xi), "softmax: dtype i32 is not supported");
    expect_fail(&c, cpu_concat(&c, 1, 1, (const tensor *[]){x32}, x16),
                "concat: input 0 is f32, the output f16");
    expect_fail(&c, cpu_copy(&c, x32, x16), "copy: input f32 and output f16 differ");
    assert_int_equal(c.kernels, 0);
    tensor *all[] = {x16, w32, xi, wi, y16, yi, bi, x32, y32, w16, si};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tensor_free(all[i]);
    cpu_dnnl_free(c.dnnl);
}

// ---- a CNN's training step under autocast ------------------------------------------

static void conv_ia(int64_t *ia, int64_t stride, int64_t pad, int64_t groups) {
    int64_t v[GRAPH_MAX_IA] = {stride, stride, pad, pad, 1, 1, groups};
    memcpy(ia, v, sizeof v);
}

// conv -> relu -> max pool -> depthwise conv -> hardswish -> avg pool ->
// upsample, concat with the max pool's output -> transposed conv -> slice
// -> batch norm -> mse against a target: what AMP runs in f16 and back.
static int cnn(graph *g) {
    int64_t ia[GRAPH_MAX_IA];
    double bn_fa[GRAPH_MAX_FA] = {1e-5, 0.1};
    int x = graph_input(g, "x", DT_F32, 4, (int64_t[]){2, 3, 12, 12});
    int w1 = graph_param(g, "c1.w", 4, (int64_t[]){8, 3, 3, 3}, INIT_NORMAL, 0.3);
    int b1 = graph_param(g, "c1.b", 1, (int64_t[]){8}, INIT_NORMAL, 0.1);
    conv_ia(ia, 1, 1, 1);
    int h = graph_unary(g, OP_RELU, graph_op(g, OP_CONV2D, 3, (int[]){x, w1, b1}, ia, NULL));
    int p = graph_op(g, OP_MAX_POOL2D, 1, &h, (int64_t[GRAPH_MAX_IA]){2, 2, 0, 0, 2, 2}, NULL);
    int dw = graph_param(g, "dw.w", 4, (int64_t[]){8, 1, 3, 3}, INIT_NORMAL, 0.3);
    conv_ia(ia, 1, 1, 8);
    int d = graph_unary(g, OP_HARDSWISH, graph_op(g, OP_CONV2D, 2, (int[]){p, dw}, ia, NULL));
    int a = graph_op(g, OP_AVG_POOL2D, 1, &d, (int64_t[GRAPH_MAX_IA]){2, 2, 0, 0, 2, 2}, NULL);
    int u = graph_op(g, OP_UPSAMPLE_NEAREST, 1, &a, (int64_t[GRAPH_MAX_IA]){2}, NULL);
    int cat = graph_op(g, OP_CONCAT, 2, (int[]){u, p}, (int64_t[GRAPH_MAX_IA]){1}, NULL);
    int wt = graph_param(g, "ct.w", 4, (int64_t[]){16, 4, 2, 2}, INIT_NORMAL, 0.2);
    // stride 2, no padding, groups 1: (2, 4, 12, 12)
    int t = graph_op(g, OP_CONV_TRANSPOSE2D, 2, (int[]){cat, wt},
                     (int64_t[GRAPH_MAX_IA]){2, 2, 0, 0, 1, 1, 1}, NULL);
    int s = graph_slice(g, t, 1, 1, 2);
    int bw = graph_param(g, "bn.w", 1, (int64_t[]){2}, INIT_ONES, 0);
    int bb = graph_param(g, "bn.b", 1, (int64_t[]){2}, INIT_ZEROS, 0);
    int rm = graph_buffer(g, "bn.mean", DT_F32, 1, (int64_t[]){2}, INIT_ZEROS, 0);
    int rv = graph_buffer(g, "bn.var", DT_F32, 1, (int64_t[]){2}, INIT_ONES, 0);
    int bn = graph_op(g, OP_BATCH_NORM, 5, (int[]){s, bw, bb, rm, rv}, (int64_t[GRAPH_MAX_IA]){1},
                      bn_fa);
    int y = graph_input(g, "target", DT_F32, 4, (int64_t[]){2, 2, 12, 12});
    g->loss = graph_op(g, OP_MSE_LOSS, 2, (int[]){bn, y}, NULL, NULL);
    return g->loss;
}

static model *cnn_model(bool amp) {
    graph *g = graph_new();
    assert_non_null(g);
    if (cnn(g) < 0)
        fail_msg("cnn: %s", graph_error(g));
    model *m = model_new(g, "cnn", "test", 2);
    assert_non_null(m);
    train_opts o = train_opts_default();
    char err[256];
    enum model_prep_step s = model_prepare_built(
        m, &(model_prep){.amp = amp ? DT_F16 : DT_F32, .train = &o, .keep_grads = true, .seed = 3},
        err, sizeof err);
    if (s != MODEL_PREP_DONE)
        fail_msg("%s: %s", model_prep_step_name(s), err);
    return m;
}

// ||a - b|| / ||b|| over all elements
static double rel_l2(const tensor *a, const tensor *b) {
    double num = 0, den = 0;
    for (int64_t k = 0; k < tensor_numel(b); k++) {
        double d = tensor_get_flat(a, k) - tensor_get_flat(b, k);
        num += d * d;
        den += tensor_get_flat(b, k) * tensor_get_flat(b, k);
    }
    return sqrt(num / (den > 0 ? den : 1));
}

// The casts shift node ids, and with them the values drawn from the seed:
// amp's sources take f32's values, matched by name.
static void copy_by_name(const model *from, model *to) {
    for (int i = 0; i < to->g->n; i++) {
        const graph_node *n = &to->g->nodes[i];
        if (!to->values[i] || !n->name)
            continue;
        int j = 0;
        while (j < from->g->n && !(from->values[j] && from->g->nodes[j].name &&
                                   strcmp(from->g->nodes[j].name, n->name) == 0))
            j++;
        if (j == from->g->n)
            fail_msg("source %s of the amp graph is not in the f32 one", n->name);
        assert_int_equal(tensor_nbytes(from->values[j]), tensor_nbytes(to->values[i]));
        memcpy(tensor_data(to->values[i]), tensor_data(from->values[j]),
               tensor_nbytes(to->values[i]));
    }
}

static void test_amp_cnn_step(void **state) {
    (void)state;
    model *amp = cnn_model(true), *f32 = cnn_model(false);
    copy_by_name(f32, amp);
    int f16_nodes = 0;
    for (int i = 0; i < amp->g->n; i++)
        f16_nodes += amp->g->nodes[i].dtype == DT_F16;
    assert_true(f16_nodes > 20); // the forward and backward of the convolutions run in f16
    assert_int_equal(amp->g->noutputs, f32->g->noutputs);
    eager *ea = eager_new(amp), *ef = eager_new(f32);
    assert_true(ea && ef);
    tensor *oa[16], *of[16];
    assert_true(amp->g->noutputs <= 16);
    for (int step = 1; step <= 2; step++) {
        eager_set_step(ea, (uint64_t)step);
        eager_set_step(ef, (uint64_t)step);
        if (eager_run(ea, oa, NULL) < 0)
            fail_msg("amp step %d: %s", step, eager_error(ea));
        if (eager_run(ef, of, NULL) < 0)
            fail_msg("f32 step %d: %s", step, eager_error(ef));
        // the loss, then each parameter's gradient (f32: master weights)
        for (int k = 0; k < amp->g->noutputs; k++) {
            assert_int_equal(oa[k]->dtype, DT_F32);
            double r = rel_l2(oa[k], of[k]);
            if (!(r < 1e-2))
                fail_msg("step %d, output %d: relative L2 %.3g from the f32 step", step, k, r);
            tensor_free(oa[k]);
            tensor_free(of[k]);
        }
    }
    eager_free(ea);
    eager_free(ef);
    model_free(amp);
    model_free(f32);
}

// ---- bf16 convolutions: oneDNN's bf16 primitive against the widening path ---------

typedef struct conv_case {
    const char *name;
    enum op op;
    int64_t N, C, H, W, O, kh, kw, stride, pad, groups, outpad;
    bool bias, bf16_out, post;
    bool dnnl; // oneDNN takes it (on a CPU with AVX512-BF16); else it is declined
} conv_case;

static const conv_case conv_cases[] = {
    {"stride2_pad1_bias", OP_CONV2D, 2, 8, 11, 9, 16, 3, 3, 2, 1, 1, 0, .bias = true, .dnnl = true},
    {"groups2_bf16_out", OP_CONV2D, 2, 8, 7, 7, 12, 3, 3, 1, 1, 2, 0, .bf16_out = true,
     .dnnl = true},
    {"depthwise_bias_bf16_out", OP_CONV2D, 2, 16, 9, 9, 16, 3, 3, 1, 1, 16, 0, .bias = true,
     .bf16_out = true, .dnnl = true},
    {"pointwise_1x1_bf16_out", OP_CONV2D, 3, 32, 6, 5, 16, 1, 1, 1, 0, 1, 0, .bf16_out = true,
     .dnnl = true},
    {"post_ops_bf16_out", OP_CONV2D, 2, 8, 9, 11, 8, 3, 3, 1, 1, 1, 0, .bias = true,
     .bf16_out = true, .post = true, .dnnl = true},
    {"post_ops_f32_out", OP_CONV2D, 2, 4, 6, 6, 8, 5, 3, 1, 2, 1, 0, .bias = true, .post = true,
     .dnnl = true},
    // (C, O, kh, kw) weight; stride 2, padding 1, output padding 1: twice the input's size
    {"transposed_stride2_bias", OP_CONV_TRANSPOSE2D, 2, 8, 5, 6, 4, 3, 3, 2, 1, 1, 1, .bias = true,
     .bf16_out = true, .dnnl = true},
};

static double bf16_flat(const tensor *t, int64_t i) {
    return dtype_bf16_to_f32(((const uint16_t *)tensor_data(t))[i]);
}

// fp64 convolution (or transposed convolution) of the bf16 values into ref,
// with the sum of |terms| of each output in mag
static void conv_ref(const conv_case *tc, const tensor *x, const tensor *w, const tensor *b,
                     int64_t OH, int64_t OW, double *ref, double *mag) {
    int64_t g = tc->groups, Cg = tc->C / g, Og = tc->O / g;
    for (int64_t n = 0; n < tc->N; n++)
        for (int64_t o = 0; o < tc->O; o++)
            for (int64_t p = 0; p < OH * OW; p++) {
                double v = b ? bf16_flat(b, o) : 0;
                ref[(n * tc->O + o) * OH * OW + p] = v;
                mag[(n * tc->O + o) * OH * OW + p] = fabs(v);
            }
    for (int64_t n = 0; n < tc->N; n++)
        for (int64_t o = 0; o < tc->O; o++)
            for (int64_t ci = 0; ci < Cg; ci++) {
                int64_t c = o / Og * Cg + ci;
                for (int64_t i = 0; i < tc->kh; i++)
                    for (int64_t j = 0; j < tc->kw; j++) {
                        double wv =
                            tc->op == OP_CONV2D
                                ? bf16_flat(w, ((o * Cg + ci) * tc->kh + i) * tc->kw + j)
                                : bf16_flat(w, ((c * Og + o % Og) * tc->kh + i) * tc->kw + j);
                        // conv walks the output, transposed conv the input
                        int64_t HH = tc->op == OP_CONV2D ? OH : tc->H;
                        int64_t WW = tc->op == OP_CONV2D ? OW : tc->W;
                        for (int64_t h = 0; h < HH; h++)
                            for (int64_t q = 0; q < WW; q++) {
                                // conv: output (h, q) reads input (h*s - p + i, ...);
                                // transposed: input (h, q) adds to output (h*s - p + i, ...)
                                int64_t ih, iw, oh, ow;
                                if (tc->op == OP_CONV2D) {
                                    oh = h, ow = q, ih = h * tc->stride - tc->pad + i,
                                    iw = q * tc->stride - tc->pad + j;
                                    if (ih < 0 || ih >= tc->H || iw < 0 || iw >= tc->W)
                                        continue;
                                } else {
                                    ih = h, iw = q, oh = h * tc->stride - tc->pad + i,
                                    ow = q * tc->stride - tc->pad + j;
                                    if (oh < 0 || oh >= OH || ow < 0 || ow >= OW)
                                        continue;
                                }
                                double t =
                                    bf16_flat(x, ((n * tc->C + c) * tc->H + ih) * tc->W + iw) * wv;
                                int64_t at = ((n * tc->O + o) * OH + oh) * OW + ow;
                                ref[at] += t;
                                mag[at] += fabs(t);
                            }
                    }
            }
}

// Both paths on the same bf16 values, as test_gemm_bf16_dnnl: oneDNN's bf16
// convolution (counted in c.dnnl_bf16_convs) and, with
// cpu_dnnl_set_bf16(false), the widening one. Both sum exact bf16
// products in f32, so each is within (K + post-ops) f32 roundings of the
// fp64 result and within twice that of each other; a bf16 output adds one
// rounding (2^-8 relative) on each side.
static void test_conv_bf16_dnnl(void **state) {
    (void)state;
    cpu_ctx c = {0};
    bool have = bf16_ctx(&c);
    for (size_t t = 0; t < sizeof conv_cases / sizeof conv_cases[0]; t++) {
        const conv_case *tc = &conv_cases[t];
        bool tr = tc->op == OP_CONV_TRANSPOSE2D;
        int64_t s = tc->stride, p = tc->pad;
        int64_t OH =
            tr ? (tc->H - 1) * s - 2 * p + tc->kh + tc->outpad : (tc->H + 2 * p - tc->kh) / s + 1;
        int64_t OW =
            tr ? (tc->W - 1) * s - 2 * p + tc->kw + tc->outpad : (tc->W + 2 * p - tc->kw) / s + 1;
        int64_t xs[4] = {tc->N, tc->C, tc->H, tc->W}, ys[4] = {tc->N, tc->O, OH, OW};
        int64_t ws[4] = {tr ? tc->C : tc->O, (tr ? tc->O : tc->C) / tc->groups, tc->kh, tc->kw};
        int64_t st[4];
        tensor_strides_contiguous(4, xs, st);
        tensor *x = bf16_view(4, xs, st);
        tensor_strides_contiguous(4, ws, st);
        tensor *w = bf16_view(4, ws, st), *add = NULL, *mul = NULL;
        tensor *b = tc->bias ? bf16_view(1, &tc->O, (int64_t[]){1}) : NULL;
        cpu_post post[4] = {{.op = OP_RELU},
                            {.op = OP_ADD},
                            {.op = OP_MUL, .per_channel = true},
                            {.op = OP_SCALE, .alpha = 0.5f, .beta = -1.0f}};
        if (tc->post) {
            tensor_strides_contiguous(4, ys, st);
            post[1].src1 = add = bf16_view(4, ys, st);
            post[2].src1 = mul = random_tensor(DT_F32, 1, &tc->O);
        }
        graph_node n = {.op = tc->op, .ia = {s, s, p, p, 1, 1, tc->groups, tc->outpad, tc->outpad}};
        enum dtype odt = tc->bf16_out ? DT_BF16 : DT_F32;
        tensor *y[2] = {tensor_new_empty(odt, 4, ys), tensor_new_empty(odt, 4, ys)};
        assert_true(y[0] && y[1]);
        for (int path = 0; path < 2; path++) {
            cpu_dnnl_set_bf16(c.dnnl, path == 0);
            int64_t v0 = c.dnnl_bf16_convs, k0 = c.kernels;
            int rc = tc->post ? cpu_conv2d_post(&c, &n, x, w, b, 4, post, y[path])
                              : cpu_conv2d(&c, &n, x, w, b, y[path]);
            cpu_dnnl_set_bf16(c.dnnl, true);
            if (rc < 0)
                fail_msg("%s (%s path): %s", tc->name, path ? "widening" : "oneDNN", c.err);
            assert_int_equal(c.kernels - k0, 1);
            if (c.dnnl_bf16_convs - v0 != (path == 0 && have && tc->dnnl))
                fail_msg("%s (%s path): %lld oneDNN bf16 convolutions, expected %d", tc->name,
                         path ? "widening" : "oneDNN", (long long)(c.dnnl_bf16_convs - v0),
                         path == 0 && have && tc->dnnl);
        }
        int64_t ny = tensor_numel(y[0]), K = tc->C / tc->groups * tc->kh * tc->kw;
        double *ref = malloc((size_t)ny * sizeof *ref), *mag = malloc((size_t)ny * sizeof *mag);
        assert_true(ref && mag);
        conv_ref(tc, x, w, b, OH, OW, ref, mag);
        for (int64_t o = 0; o < ny; o++) {
            double r = ref[o], m = mag[o];
            if (tc->post) {
                int64_t ch = o / (OH * OW) % tc->O;
                double a = bf16_flat(add, o), u = tensor_f32(mul)[ch];
                r = ((r > 0 ? r : 0) + a) * u * 0.5 - 1;
                m = ((m + fabs(a)) * fabs(u)) * 0.5 + 1;
            }
            double got = tensor_get_flat(y[0], o), wid = tensor_get_flat(y[1], o);
            double sums = (double)(K + 5) * 0x1p-24 * m, ulp = tc->bf16_out ? 0x1p-8 : 0;
            if (fabs(got - r) > ulp * fabs(r) + sums ||
                fabs(got - wid) > 2 * ulp * fabs(r) + 2 * sums)
                fail_msg("%s: element %lld: oneDNN %.9g, widening %.9g, fp64 %.9g", tc->name,
                         (long long)o, got, wid, r);
        }
        free(ref);
        free(mag);
        tensor *all[] = {x, w, b, add, mul, y[0], y[1]};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            tensor_free(all[i]);
    }
    cpu_dnnl_free(c.dnnl);
}

static const struct CMUnitTest half[] = {
    cmocka_unit_test(test_narrow_rules),        cmocka_unit_test(test_widen_rules),
    cmocka_unit_test(test_all_halves),          cmocka_unit_test(test_random_floats),
    cmocka_unit_test(test_bf16_rules),          cmocka_unit_test(test_all_bf16),
    cmocka_unit_test(test_random_bf16),         cmocka_unit_test(test_conv_post),
    cmocka_unit_test(test_kernel_dtype_errors), cmocka_unit_test(test_amp_cnn_step),
    cmocka_unit_test(test_gemm_bf16_dnnl),      cmocka_unit_test(test_conv_bf16_dnnl),
};

const struct CMUnitTest *const op_half_tests = half;
const int op_nhalf_tests = (int)(sizeof half / sizeof half[0]);
