// pointwise: the f32 formula of each pointwise op, and of its derivative,
// written once for every executor that computes in f32:
//
//   the CPU eager kernels      backend/cpu/cpu_pointwise.c, cpu_grad.c
//   the generated C            codegen_c.c puts this text in every program
//   the CUDA eager kernels     backend/cuda/cuda_prelude.cuh includes it
//   the generated CUDA         codegen_cuda.c puts it after the prelude
//   constant folding           compile/ir.c (f32, as a kernel would store it)
//
// The fp64 reference (ref.c) keeps formulas of its own: it is the oracle.
//
// Every op of TC_POINTWISE_OPS(X), X(UPPER, lower, a0, b0), has
//   tc_f_<lower>(x, a, b)   its value at x
//   tc_d_<lower>(x, a, b)   its derivative at x (ACT_GRAD: dy * tc_d_<lower>)
// a and b are the node's attributes fa0 and fa1 (0 for ops without); a0
// and b0 their defaults, PyTorch's (the layers' and the tests').
// Adding a pointwise op: its ops.def row, its row below and its two
// functions, its fp64 formulas in ref.c; every executor then has it.
//
// The includer supplies the dialect, before this header: TC_FN (static inline, or a CUDA
// device function), and TC_EXP, TC_LOG, TC_TANH, TC_SQRT, TC_FABS,
// TC_NCDF (the normal CDF) for f32: cpu_math.h's vectorizable ones on the
// CPU, libdevice's on the GPU. The bodies use selects, never branches, so
// CPU loops calling them vectorize. Where PyTorch's backward picks a side
// at a kink (relu at 0, relu6, hardswish and hardsigmoid at their corners),
// the derivatives pick the same one.
#pragma once

// clang-format off
#define TC_POINTWISE_OPS(X)                                                                        \
    X(NEG, neg, 0, 0) X(EXP, exp, 0, 0) X(LOG, log, 0, 0) X(SQRT, sqrt, 0, 0)                      \
    X(RSQRT, rsqrt, 0, 0) X(RECIP, recip, 0, 0) X(ABS, abs, 0, 0) X(TANH, tanh, 0, 0)              \
    X(SIGMOID, sigmoid, 0, 0) X(RELU, relu, 0, 0) X(RELU6, relu6, 0, 0) X(GELU, gelu, 0, 0)        \
    X(GELU_TANH, gelu_tanh, 0, 0) X(SILU, silu, 0, 0) X(HARDSWISH, hardswish, 0, 0)                \
    X(HARDSIGMOID, hardsigmoid, 0, 0) X(MISH, mish, 0, 0) X(LEAKY_RELU, leaky_relu, 0.01, 0)       \
    X(ELU, elu, 1.0, 0) X(SOFTPLUS, softplus, 1.0, 20.0) X(SCALE, scale, 1.0, 0)        \
    X(SELU, selu, 0, 0)
// clang-format on

// Without a dialect, the table alone (eager.c makes one kernel per row).
#ifdef TC_FN

#define TC_UNUSED2(a, b) ((void)(a), (void)(b))

// min(max(v, 0), 6), NaN staying NaN as in PyTorch
TC_FN float tc_relu6f(float v) { return v < 0 ? 0.0f : v > 6.0f ? 6.0f : v; }

TC_FN float tc_f_neg(float x, float a, float b) { return TC_UNUSED2(a, b), -x; }
TC_FN float tc_d_neg(float x, float a, float b) { return TC_UNUSED2(a, b), (void)x, -1.0f; }

TC_FN float tc_f_exp(float x, float a, float b) { return TC_UNUSED2(a, b), TC_EXP(x); }
TC_FN float tc_d_exp(float x, float a, float b) { return TC_UNUSED2(a, b), TC_EXP(x); }

TC_FN float tc_f_log(float x, float a, float b) { return TC_UNUSED2(a, b), TC_LOG(x); }
TC_FN float tc_d_log(float x, float a, float b) { return TC_UNUSED2(a, b), 1.0f / x; }

TC_FN float tc_f_sqrt(float x, float a, float b) { return TC_UNUSED2(a, b), TC_SQRT(x); }
TC_FN float tc_d_sqrt(float x, float a, float b) { return TC_UNUSED2(a, b), 0.5f / TC_SQRT(x); }

TC_FN float tc_f_rsqrt(float x, float a, float b) { return TC_UNUSED2(a, b), 1.0f / TC_SQRT(x); }
TC_FN float tc_d_rsqrt(float x, float a, float b) {
    return TC_UNUSED2(a, b), -0.5f / (x * TC_SQRT(x));
}

TC_FN float tc_f_recip(float x, float a, float b) { return TC_UNUSED2(a, b), 1.0f / x; }
TC_FN float tc_d_recip(float x, float a, float b) { return TC_UNUSED2(a, b), -1.0f / (x * x); }

TC_FN float tc_f_abs(float x, float a, float b) { return TC_UNUSED2(a, b), TC_FABS(x); }
// sign(x), 0 at 0
TC_FN float tc_d_abs(float x, float a, float b) {
    TC_UNUSED2(a, b);
    float p = x > 0 ? 1.0f : 0.0f;
    float m = x < 0 ? 1.0f : 0.0f;
    return p - m;
}

TC_FN float tc_f_tanh(float x, float a, float b) { return TC_UNUSED2(a, b), TC_TANH(x); }
TC_FN float tc_d_tanh(float x, float a, float b) {
    TC_UNUSED2(a, b);
    float t = TC_TANH(x);
    return 1.0f - t * t;
}

TC_FN float tc_f_sigmoid(float x, float a, float b) {
    return TC_UNUSED2(a, b), 1.0f / (1.0f + TC_EXP(-x));
}
TC_FN float tc_d_sigmoid(float x, float a, float b) {
    float s = tc_f_sigmoid(x, a, b);
    return s * (1.0f - s);
}

TC_FN float tc_f_relu(float x, float a, float b) { return TC_UNUSED2(a, b), x < 0 ? 0.0f : x; }
TC_FN float tc_d_relu(float x, float a, float b) { return TC_UNUSED2(a, b), x > 0 ? 1.0f : 0.0f; }

TC_FN float tc_f_relu6(float x, float a, float b) { return TC_UNUSED2(a, b), tc_relu6f(x); }
// hardtanh's rule: 1 strictly inside (0, 6)
TC_FN float tc_d_relu6(float x, float a, float b) {
    TC_UNUSED2(a, b);
    float in = x > 0 ? 1.0f : 0.0f;
    return x < 6.0f ? in : 0.0f;
}

// exact, by the normal CDF
TC_FN float tc_f_gelu(float x, float a, float b) { return TC_UNUSED2(a, b), x * TC_NCDF(x); }
// Phi(x) + x phi(x)
TC_FN float tc_d_gelu(float x, float a, float b) {
    return TC_UNUSED2(a, b), TC_NCDF(x) + x * (0.39894228f * TC_EXP(-0.5f * (x * x)));
}

// 0.5 x (1 + tanh(u)) = x sigmoid(2u), u = k (x + 0.044715 x^3), k =
// sqrt(2/pi): the same value without the cancellation of 1 + tanh(u) for
// negative x
TC_FN float tc_f_gelu_tanh(float x, float a, float b) {
    return TC_UNUSED2(a, b), x / (1.0f + TC_EXP(-1.5957691216f * (x + 0.044715f * x * x * x)));
}
// With s = sigmoid(2u) = (1 + tanh u) / 2 and 1 - tanh^2 u = 4 s (1 - s):
// y' = s (1 + 2k x (1 - s) (1 + 3 * 0.044715 x^2)), no cancellation for x < 0.
TC_FN float tc_d_gelu_tanh(float x, float a, float b) {
    TC_UNUSED2(a, b);
    float x2 = x * x;
    float s = 1.0f / (1.0f + TC_EXP(-1.5957691216f * (x + 0.044715f * x2 * x)));
    return s * (1.0f + 1.5957691216f * x * (1.0f - s) * (1.0f + 0.134145f * x2));
}

TC_FN float tc_f_silu(float x, float a, float b) {
    return TC_UNUSED2(a, b), x / (1.0f + TC_EXP(-x));
}
TC_FN float tc_d_silu(float x, float a, float b) {
    float s = tc_f_sigmoid(x, a, b);
    return s * (1.0f + x * (1.0f - s));
}

TC_FN float tc_f_hardswish(float x, float a, float b) {
    return TC_UNUSED2(a, b), x * (tc_relu6f(x + 3.0f) / 6.0f);
}
// 0 below -3, x/3 + 1/2 on [-3, 3], 1 above
TC_FN float tc_d_hardswish(float x, float a, float b) {
    TC_UNUSED2(a, b);
    float m = x <= 3.0f ? x * (1.0f / 3.0f) + 0.5f : 1.0f;
    return x < -3.0f ? 0.0f : m;
}

TC_FN float tc_f_hardsigmoid(float x, float a, float b) {
    return TC_UNUSED2(a, b), tc_relu6f(x + 3.0f) / 6.0f;
}
// 1/6 strictly inside (-3, 3)
TC_FN float tc_d_hardsigmoid(float x, float a, float b) {
    TC_UNUSED2(a, b);
    float in = x > -3.0f ? 1.0f / 6.0f : 0.0f;
    return x < 3.0f ? in : 0.0f;
}

// log(1 + e^x), x above 20 (as PyTorch's softplus threshold); log1p by the
// correction log(u) - ((u - 1) - e) / u, u = 1 + e, exact for tiny e
TC_FN float tc_softplusf(float x) {
    float e = TC_EXP(x), u = 1.0f + e;
    float y = TC_LOG(u) - ((u - 1.0f) - e) / u;
    return x > 20.0f ? x : y;
}

// e^x - 1 for x <= 0 by Kahan's trick (u - 1) x / log u, u = e^x, which
// keeps the digits that u - 1 alone cancels near 0
TC_FN float tc_expm1f(float x) {
    float u = TC_EXP(x), l = TC_LOG(u);
    float k = (u - 1.0f) * (x / l);
    k = u == 1.0f ? x : k;
    return u == 0.0f ? -1.0f : k;
}

TC_FN float tc_f_mish(float x, float a, float b) {
    return TC_UNUSED2(a, b), x * TC_TANH(tc_softplusf(x));
}
// tanh(sp) + x sech^2(sp) sigmoid(x), sp = softplus(x)
TC_FN float tc_d_mish(float x, float a, float b) {
    float t = TC_TANH(tc_softplusf(x));
    return x * (1.0f - t * t) * tc_f_sigmoid(x, a, b) + t;
}

// a the negative slope; the derivative is a at 0, as PyTorch's
TC_FN float tc_f_leaky_relu(float x, float a, float b) { return (void)b, x > 0 ? x : x * a; }
TC_FN float tc_d_leaky_relu(float x, float a, float b) { return (void)b, x > 0 ? 1.0f : a; }

// a alpha: a (e^x - 1) below 0
TC_FN float tc_f_elu(float x, float a, float b) { return (void)b, x > 0 ? x : a * tc_expm1f(x); }
TC_FN float tc_d_elu(float x, float a, float b) { return (void)b, x > 0 ? 1.0f : a * TC_EXP(x); }

// F.selu: scale (x above 0, alpha (e^x - 1) below), with the fixed alpha and
// scale of Klambauer et al. that PyTorch uses
#define TC_SELU_ALPHA 1.6732632423543772848170429916717f
#define TC_SELU_SCALE 1.0507009873554804934193349852946f
TC_FN float tc_f_selu(float x, float a, float b) {
    return TC_UNUSED2(a, b), TC_SELU_SCALE * (x > 0 ? x : TC_SELU_ALPHA * tc_expm1f(x));
}
TC_FN float tc_d_selu(float x, float a, float b) {
    return TC_UNUSED2(a, b), x > 0 ? TC_SELU_SCALE : TC_SELU_SCALE * TC_SELU_ALPHA * TC_EXP(x);
}

// a beta, b the threshold: x where a x > b, else log(1 + e^(a x)) / a
TC_FN float tc_f_softplus(float x, float a, float b) {
    float z = x * a;
    return z > b ? x : tc_softplusf(z) / a;
}
TC_FN float tc_d_softplus(float x, float a, float b) {
    float z = x * a;
    return z > b ? 1.0f : 1.0f / (1.0f + TC_EXP(-z));
}

// x * a + b
TC_FN float tc_f_scale(float x, float a, float b) { return x * a + b; }
TC_FN float tc_d_scale(float x, float a, float b) { return (void)x, (void)b, a; }

#endif // TC_FN
