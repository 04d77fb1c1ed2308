#include "dtype.h"

#include <assert.h>
#include <string.h>

static const struct {
    const char *name;
    size_t size;
    bool is_float;
} dtype_table[] = {
    [DT_F32] = {"f32", 4, true},  [DT_F16] = {"f16", 2, true},
    [DT_I32] = {"i32", 4, false}, [DT_I64] = {"i64", 8, false},
    [DT_BOOL] = {"bool", 1, false}, [DT_BF16] = {"bf16", 2, true},
    [DT_I8] = {"i8", 1, false},     [DT_U8] = {"u8", 1, false},
};
static_assert(sizeof(dtype_table) / sizeof(dtype_table[0]) == DT_COUNT,
              "dtype_table needs one row per dtype");

size_t dtype_size(enum dtype t) { return dtype_table[t].size; }
const char *dtype_name(enum dtype t) { return dtype_table[t].name; }
bool dtype_is_float(enum dtype t) { return dtype_table[t].is_float; }
bool dtype_is_half(enum dtype t) { return t == DT_F16 || t == DT_BF16; }

bool dtype_parse(const char *s, enum dtype *out) {
    for (int i = 0; i < DT_COUNT; i++) {
        if (strcmp(s, dtype_table[i].name) == 0) {
            *out = (enum dtype)i;
            return true;
        }
    }
    return false;
}

// Bit-exact conversions, portable C. The eager kernels use F16C
// (backend/cpu/cpu_f16.h) where the target has it; these are the reference
// the tests hold them to, bit for bit, NaN payloads included.
float dtype_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { // subnormal: renormalize
            int e = -1;
            do {
                e++;
                man <<= 1;
            } while ((man & 0x400u) == 0);
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
        }
    } else if (exp == 31) { // inf, or NaN made quiet as F16C's vcvtph2ps does
        bits = sign | 0x7f800000u | (man << 13) | (man ? 0x400000u : 0);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t dtype_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t exp = (x >> 23) & 0xffu;
    uint32_t man = x & 0x7fffffu;
    if (exp == 0xff) // inf or NaN (keep NaN quiet and non-zero)
        return (uint16_t)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0));
    int e = (int)exp - 127 + 15;
    if (e >= 31)
        return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) { // subnormal or zero in f16
        if (e < -10)
            return (uint16_t)sign;
        man |= 0x800000u;
        int shift = 14 - e;
        uint32_t half = man >> shift;
        uint32_t rem = man & ((1u << shift) - 1);
        uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1)))
            half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = ((uint32_t)e << 10) | (man >> 13);
    uint32_t rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (half & 1)))
        half++; // may carry into the exponent, which is the right answer
    return (uint16_t)(sign | half);
}

float dtype_bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

// Round to nearest even on the bits: adding 0x7fff plus the kept lowest bit
// carries exactly when the dropped half is above the tie, or at it with an
// odd kept part; a carry out of the mantissa bumps the exponent, up to inf
// at the top of the range. Subnormals round the same way (no flush, unlike
// AVX512-BF16's vcvtneps2bf16). NaN keeps sign and top payload, made quiet.
uint16_t dtype_f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
