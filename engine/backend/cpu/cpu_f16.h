// cpu_f16: rows of 16-bit floats (IEEE half, bfloat16) to and from f32
// registers.
//
//   float buf[256];
//   cpu_half_load(DT_BF16, n, src, stride, buf);  // stride in elements
//   ... compute in f32 ...
//   cpu_half_store(DT_BF16, n, buf, dst, 1);
//
// f16: with F16C (every x86 CPU with AVX2) eight values convert per
// instruction, rounding to nearest even; elsewhere dtype.c's bit-exact
// conversions. bf16: plain loops of dtype.c's bit operations (a shift; an
// add and a select to round), which the compiler vectorizes. AVX512-BF16's
// vcvtneps2bf16 is not used: it flushes subnormals, so its results would
// differ from the reference's and the compiled mode's in the last bits.
#pragma once
#include "core/dtype.h"

#include <stdint.h>
#include <string.h>
#if defined(__F16C__)
#include <immintrin.h>
#endif

// dtype_f32_to_bf16 / dtype_bf16_to_f32, inline so that loops vectorize
// (tests/op_table_half.c holds them to dtype.c's, bit for bit).
static inline uint16_t cpu_f32_to_bf16_inline(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t r = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    return (uint16_t)((x & 0x7fffffffu) > 0x7f800000u ? (x >> 16) | 0x40u : r);
}

static inline float cpu_bf16_to_f32_inline(uint16_t h) {
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static inline void cpu_f16_load(int64_t n, const uint16_t *src, int64_t stride, float *dst) {
    int64_t i = 0;
#if defined(__F16C__)
    if (stride == 1)
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    for (; i < n; i++)
        dst[i] = _cvtsh_ss(src[i * stride]);
#else
    for (; i < n; i++)
        dst[i] = dtype_f16_to_f32(src[i * stride]);
#endif
}

static inline void cpu_f16_store(int64_t n, const float *src, uint16_t *dst, int64_t stride) {
    int64_t i = 0;
#if defined(__F16C__)
    if (stride == 1)
        for (; i + 8 <= n; i += 8)
            _mm_storeu_si128((__m128i *)(dst + i),
                             _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++)
        dst[i * stride] = _cvtss_sh(src[i], _MM_FROUND_TO_NEAREST_INT);
#else
    for (; i < n; i++)
        dst[i * stride] = dtype_f32_to_f16(src[i]);
#endif
}

static inline void cpu_bf16_load(int64_t n, const uint16_t *src, int64_t stride, float *dst) {
    if (stride == 1) {
#pragma omp simd
        for (int64_t i = 0; i < n; i++)
            dst[i] = cpu_bf16_to_f32_inline(src[i]);
    } else {
        for (int64_t i = 0; i < n; i++)
            dst[i] = cpu_bf16_to_f32_inline(src[i * stride]);
    }
}

static inline void cpu_bf16_store(int64_t n, const float *src, uint16_t *dst, int64_t stride) {
    if (stride == 1) {
#pragma omp simd
        for (int64_t i = 0; i < n; i++)
            dst[i] = cpu_f32_to_bf16_inline(src[i]);
    } else {
        for (int64_t i = 0; i < n; i++)
            dst[i * stride] = cpu_f32_to_bf16_inline(src[i]);
    }
}

// f16 or bf16 by t (dtype_is_half(t)).
static inline void cpu_half_load(enum dtype t, int64_t n, const uint16_t *src, int64_t stride,
                                 float *dst) {
    if (t == DT_BF16)
        cpu_bf16_load(n, src, stride, dst);
    else
        cpu_f16_load(n, src, stride, dst);
}

static inline void cpu_half_store(enum dtype t, int64_t n, const float *src, uint16_t *dst,
                                  int64_t stride) {
    if (t == DT_BF16)
        cpu_bf16_store(n, src, dst, stride);
    else
        cpu_f16_store(n, src, dst, stride);
}
