// cpu_f16: rows of IEEE half floats to and from f32 registers.
//
//   float buf[256];
//   cpu_f16_load(n, src, stride, buf);    // n <= any, stride in elements
//   ... compute in f32 ...
//   cpu_f16_store(n, buf, dst, 1);
//
// With F16C (every x86 CPU with AVX2) eight values convert per instruction,
// rounding to nearest even; elsewhere dtype.c's bit-exact conversions.
#pragma once
#include "dtype.h"

#include <stdint.h>
#if defined(__F16C__)
#include <immintrin.h>
#endif

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
