// cpu_math: float math written so that loops calling it vectorize.
//
//   #pragma omp simd
//   for (int64_t i = 0; i < n; i++)
//       y[i] = cpu_expf(x[i]);          // becomes AVX / AVX-512 code
//
// libm's expf/logf/tanhf/erff are accurate but opaque calls, and glibc only
// offers vector variants under -ffast-math, which we do not use. These are
// branch-free (selects only) and stay within a few ulp of the true value
// (relative error about 3e-7). NaN and infinities come out as libm's do.
#pragma once
#include <stdint.h>
#include <string.h>

static inline float cpu_f32_from_bits(int32_t i) {
    float f;
    memcpy(&f, &i, sizeof f);
    return f;
}

static inline int32_t cpu_bits_from_f32(float f) {
    int32_t i;
    memcpy(&i, &f, sizeof i);
    return i;
}

// e^(hi + lo), with lo small against hi or zero: the sum is never rounded
// to one float, which keeps e^(-z^2 + c) accurate for large z. hi = n ln2 +
// r with |r| <= ln2/2 (Cody-Waite: ln2 split so that n * ln2_hi is exact),
// e^r by its Taylor series to r^7 (truncation below 1e-8), then 2^n applied
// as two halves so that subnormal results and overflow to infinity are right.
static inline float cpu_exp_sum(float hi, float lo) {
    float hc = hi > -104.0f ? hi : -104.0f; // NaN lands here too; restored below
    hc = hc < 89.0f ? hc : 89.0f;
    lo = hc == hi ? lo : 0.0f;
    float n = ((hc + lo) * 1.44269504f + 12582912.0f) - 12582912.0f; // round to nearest
    float r = ((hc - n * 0.693359375f) + lo) - n * -2.12194440e-4f;
    float p = 1.0f / 5040;
    p = p * r + 1.0f / 720;
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    int32_t ni = (int32_t)n;
    int32_t n1 = ni / 2, n2 = ni - n1;
    float y = p * cpu_f32_from_bits((n1 + 127) * 8388608) * cpu_f32_from_bits((n2 + 127) * 8388608);
    float x = hi + lo;
    return x == x ? y : x;
}

static inline float cpu_expf(float x) { return cpu_exp_sum(x, 0.0f); }

// log x. x = m 2^e with m in [sqrt(1/2), sqrt(2)); log m = 2 atanh(s) with
// s = (m - 1) / (m + 1), |s| <= 0.172, by its odd series to s^9.
static inline float cpu_logf(float x) {
    float tiny = 1.17549435e-38f; // subnormals are scaled by 2^23 first
    float xs = x < tiny ? x * 8388608.0f : x;
    xs = x > 0 ? xs : 1.0f; // keeps the bit arithmetic defined; answered below
    float ebias = x < tiny ? 23.0f : 0.0f;
    int32_t bits = cpu_bits_from_f32(xs);
    int32_t e = (bits - 0x3f3504f3) >> 23; // 0x3f3504f3 is sqrt(1/2)
    float m = cpu_f32_from_bits(bits - e * 8388608);
    float s = (m - 1.0f) / (m + 1.0f), s2 = s * s;
    float p = 2.0f / 9;
    p = p * s2 + 2.0f / 7;
    p = p * s2 + 2.0f / 5;
    p = p * s2 + 2.0f / 3;
    p = p * s2 + 2.0f;
    // e as a float by the magic-number trick: an int-to-float conversion
    // here keeps gcc (with its default -ftrapping-math) from vectorizing
    float ef = (cpu_f32_from_bits(e + 0x4b400000) - 12582912.0f) - ebias;
    float y = (ef * -2.12194440e-4f + s * p) + ef * 0.693359375f;
    // single selects, which vectorize (a nested ?: does not)
    float inf = __builtin_inff();
    y = x == inf ? inf : y;
    y = x == 0 ? -inf : y;
    return x >= 0 ? y : __builtin_nanf(""); // negative or NaN
}

// tanh: the odd Taylor series below 0.3 (where 1 - 2/(e^2a + 1) would
// cancel), that formula above.
static inline float cpu_tanhf(float x) {
    float a = x < 0 ? -x : x;
    float big = 1.0f - 2.0f / (cpu_expf(2.0f * a) + 1.0f);
    float s = a * a;
    float p = -1382.0f / 155925;
    p = p * s + 62.0f / 2835;
    p = p * s - 17.0f / 315;
    p = p * s + 2.0f / 15;
    p = p * s - 1.0f / 3;
    float small = a + a * s * p;
    float y = a < 0.3f ? small : big;
    return x < 0 ? -y : y;
}

// Phi(x) = P(N(0,1) <= x) = erfc(-x / sqrt 2) / 2, for exact gelu. erfc(z)
// for z >= 0 is t exp(-z^2 + P(t)), t = 1 / (1 + z/2): the Chebyshev fit of
// Press et al., Numerical Recipes (erfcc), fractional error below 1.2e-7 for
// every z. Taking erfc on |x| and 1 - erfc/2 for x > 0 keeps the relative
// error small on both tails, where 1 + erf(x) would cancel.
static inline float cpu_normal_cdf(float x) {
    float z = (x < 0 ? -x : x) * 0.70710678f;
    float t = 1.0f / (1.0f + 0.5f * z);
    float p = 0.17087277f;
    p = p * t - 0.82215223f;
    p = p * t + 1.48851587f;
    p = p * t - 1.13520398f;
    p = p * t + 0.27886807f;
    p = p * t - 0.18628806f;
    p = p * t + 0.09678418f;
    p = p * t + 0.37409196f;
    p = p * t + 1.00002368f;
    p = p * t - 1.26551223f;
    // z^2 = x^2 / 2 taken from x, not from the rounded z: x^2 = xh^2 +
    // (x - xh)(x + xh) with xh = x cut to 12 bits, so xh^2 is exact
    float xh = cpu_f32_from_bits(cpu_bits_from_f32(x) & (int32_t)0xfffff000);
    float half_erfc = 0.5f * t * cpu_exp_sum(-0.5f * (xh * xh), p - 0.5f * ((x - xh) * (x + xh)));
    return x < 0 ? half_erfc : 1.0f - half_erfc;
}

// ---- the dialect of core/pointwise.h on the CPU ----------------------------
// The eager kernels include that header after this one; codegen_c puts its
// text after this one's in every generated program.
#define TC_FN   static inline
#define TC_EXP  cpu_expf
#define TC_LOG  cpu_logf
#define TC_TANH cpu_tanhf
#define TC_NCDF cpu_normal_cdf
// the instructions (the build uses -fno-math-errno)
#define TC_SQRT __builtin_sqrtf
#define TC_FABS __builtin_fabsf
