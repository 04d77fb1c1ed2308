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
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum dtype { DT_F32, DT_F16, DT_I32, DT_I64, DT_BOOL, DT_COUNT };

size_t dtype_size(enum dtype t);
const char *dtype_name(enum dtype t);
bool dtype_parse(const char *s, enum dtype *out);
bool dtype_is_float(enum dtype t);

float dtype_f16_to_f32(uint16_t h);
uint16_t dtype_f32_to_f16(float f);
