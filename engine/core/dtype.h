// dtype: the element types tcbench tensors hold.
//
//   enum dtype t = DT_F32;
//   size_t n = dtype_size(t);           // 4
//   const char *s = dtype_name(t);      // "f32"
//   enum dtype u; dtype_parse("i32", &u);
//
// f16 is IEEE binary16 stored as uint16_t; arithmetic happens in f32
// registers (see dtype_f16_to_f32 / dtype_f32_to_f16, round to nearest even,
// NaNs made quiet: bit for bit what F16C's vcvtph2ps / vcvtps2ph give).
// bf16 (bfloat16: f32's sign, exponent and top 7 mantissa bits) is stored as
// uint16_t too; widening is a shift, narrowing rounds to nearest even with
// f32 subnormals kept (not flushed), inf kept and NaN made quiet
// (dtype_bf16_to_f32 / dtype_f32_to_bf16). dtype_is_half says "a 16-bit
// float stored as uint16_t": f16 or bf16.
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// New dtypes go last: the values are stable for whatever keys on them.
// DT_I8 and DT_U8 hold quantized weights (engine/backend/cpu/cpu_quant.h):
// int8 values, and raw bytes (int4 packs two values a byte).
enum dtype { DT_F32, DT_F16, DT_I32, DT_I64, DT_BOOL, DT_BF16, DT_I8, DT_U8, DT_COUNT };

size_t dtype_size(enum dtype t);
const char *dtype_name(enum dtype t);
bool dtype_parse(const char *s, enum dtype *out);
bool dtype_is_float(enum dtype t);
bool dtype_is_half(enum dtype t);

float dtype_f16_to_f32(uint16_t h);
uint16_t dtype_f32_to_f16(float f);

float dtype_bf16_to_f32(uint16_t h);
uint16_t dtype_f32_to_bf16(float f);

// A 16-bit float as f32 and back, f16 or bf16 by t (dtype_is_half(t)).
static inline float dtype_half_to_f32(enum dtype t, uint16_t h) {
    return t == DT_BF16 ? dtype_bf16_to_f32(h) : dtype_f16_to_f32(h);
}
static inline uint16_t dtype_f32_to_half(enum dtype t, float f) {
    return t == DT_BF16 ? dtype_f32_to_bf16(f) : dtype_f32_to_f16(f);
}
