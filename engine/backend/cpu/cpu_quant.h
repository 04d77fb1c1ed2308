// cpu_quant: weight-only quantization of linear weights (int8, int4),
// symmetric, one scale per group of `group` input features of each output
// row, as gpt-fast and llama.cpp do it; and the kernels that use it.
//
//   int64_t G = cpu_quant_groups(K, 32), B = cpu_quant_row_bytes(4, K);
//   cpu_quant_quantize(4, 32, N, K, w, q, DT_F32, scales);   // w (N, K) f32
//   cpu_qgemm(4, 32, M, N, K, x, q, DT_F32, scales, bias, y);  // y = x @ dq(q)^T + bias
//   cpu_quant_dequantize(4, 32, N, K, q, DT_F32, scales, w2);  // w2 ~ w
//
// Storage (row-major, each row starts on a byte):
//   int8  q (N, K) int8_t, values in [-127, 127]
//   int4  q (N, ceil(K/2)) uint8_t, two values a byte, low nibble first,
//         each stored as value + 8 (offset binary: nibble 0..15 is -8..7,
//         as llama.cpp's Q4_0); quantization gives [-7, 7]
//   scales (N, ceil(K/group)) f32 or f16; the last group of a row is short
//         when group does not divide K.
// scale = max|w| / qmax (127 or 7) over the group, q = round(w / scale);
// an f16 scale rounds up so that no value clamps: |w - q * scale| <= scale / 2
// for the stored scale. A group of zeros has scale 0.
//
// cpu_qgemm never makes the whole dequantized weight: for few rows
// (M <= CPU_QGEMM_GEMV_MAX, decode) each output column's row of W is
// dequantized a chunk at a time in L1 and dotted with x, OpenMP over N
// (AVX-512: four weight rows a step, int4 through a table lookup, int8
// widened; else int4 with AVX2: 32 nibbles a step unpacked and multiplied
// in registers; TCBENCH_DISABLE_QGEMV_SIMD=1 keeps the portable loop, =avx512
// the AVX2 kernel); for more rows a
// block of W (about 1 MiB of f32; TCBENCH_QGEMM_TILE=ROWS) is dequantized
// into a tile and multiplied by sgemm, the tiles split over the threads.
// TCBENCH_QGEMM=gemv or tiles forces one form. The three are read at the
// first product; cpu_quant_env_reload makes the next one read them again
// (tests and the microbenchmark, which change them).
#pragma once
#include "cpu_kernels.h"

#include <stdint.h>

#define CPU_QGEMM_GEMV_MAX 8

void cpu_quant_env_reload(void);

int64_t cpu_quant_groups(int64_t K, int64_t group);
int64_t cpu_quant_row_bytes(int bits, int64_t K);

// n values in [-8, 7] into ceil(n/2) bytes, and back.
void cpu_quant_pack4(int64_t n, const int8_t *v, uint8_t *out);
void cpu_quant_unpack4(int64_t n, const uint8_t *p, int8_t *out);

// w (N, K) f32 into q (N, row bytes) and scales (N, G) of dtype sdt (f32, f16).
void cpu_quant_quantize(int bits, int64_t group, int64_t N, int64_t K, const float *w, void *q,
                        enum dtype sdt, void *scales);
// q, scales as above into w (N, K) f32.
void cpu_quant_dequantize(int bits, int64_t group, int64_t N, int64_t K, const void *q,
                          enum dtype sdt, const void *scales, float *w);

// y (M, N) = x (M, K) @ dequant(q)(N, K)^T (+ bias (N) when not NULL), all f32
// contiguous. -1 only when the tile form runs out of memory.
int cpu_qgemm(int bits, int64_t group, int64_t M, int64_t N, int64_t K, const float *x,
              const void *q, enum dtype sdt, const void *scales, const float *bias, float *y);

// cpu_qgemm's matrix-vector form (for M <= CPU_QGEMM_GEMV_MAX rows, the
// form it takes unless TCBENCH_QGEMM says otherwise: cpu_quant_gemv_form)
// for columns [j0, j1) of y alone, over the threads when par, else on the
// calling thread: the same sums, bit for bit. The generated C of a compiled
// program calls it through a pointer (codegen_c.c's tc_qgemv, this type;
// half_scales: f16 scales, else f32), one call a thread in a run of
// matrix-vector products.
typedef void (*cpu_qgemv_fn)(int bits, int64_t group, int64_t M, int64_t N, int64_t K,
                             const float *x, const void *q, int half_scales, const void *scales,
                             const float *bias, float *y, int64_t j0, int64_t j1, int par);
void cpu_qgemv_cols(int bits, int64_t group, int64_t M, int64_t N, int64_t K, const float *x,
                    const void *q, int half_scales, const void *scales, const float *bias, float *y,
                    int64_t j0, int64_t j1, int par);
bool cpu_quant_gemv_form(int64_t M);

// The ops (ops.def DEQUANT, QLINEAR; ia0 bits, ia1 group, ia2 K) for the
// eager executor and the compiled runtime: out preallocated, contiguous.
// x and out may be f32 or f16 (AMP); dequant's out is f32.
int cpu_dequant(cpu_ctx *c, const graph_node *n, const tensor *q, const tensor *s, tensor *out);
int cpu_qlinear(cpu_ctx *c, const graph_node *n, const tensor *x, const tensor *q, const tensor *s,
                const tensor *bias, tensor *out);
