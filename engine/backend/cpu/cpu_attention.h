// cpu_attention.h: what the fused attention kernels share (cpu_attention.c,
// the forward; cpu_attention_grad.c, the backward): the tile sizes, strided
// operands read as f32 rows, each batch row's valid length, and the two
// register-blocked tile products (scores against a transposed key tile;
// probabilities times values).
//
//   at_operand o = at_operand_of(q);                  // (B, H, T, D), any strides
//   at_load_row(&o, b * o.st[0] + h * o.st[1] + t * o.st[2], o.st[3], D, row);
#pragma once
#include "cpu_f16.h"
#include "cpu_kernels.h"

#include <stdlib.h>
#include <string.h>

#define AT_TQ 32 // query rows per tile
#define AT_TK 64 // keys per tile
#define AT_R  4  // query rows per register block
#define AT_C  16 // keys (or value dims) per register block

// A strided 4-d operand broadcast to (B, H, T, S)-like indices: elements are
// base + i0 * st[0] + ... (st 0 along a broadcast axis).
typedef struct at_operand {
    enum dtype dtype;
    const char *data; // at element 0 (the tensor's offset applied)
    int64_t st[4];
} at_operand;

// The dtypes attention's kernels take: f32 and the halves.
static inline bool at_float_dtype(enum dtype t) { return t == DT_F32 || dtype_is_half(t); }

static inline at_operand at_operand_of(const tensor *t) {
    at_operand o = {
        t->dtype, (const char *)t->storage->data + t->offset * dtype_size(t->dtype), {0, 0, 0, 0}};
    for (int i = 0; i < t->ndim; i++) // right-aligned: a bias may have fewer dims
        o.st[4 - t->ndim + i] = t->shape[i] == 1 ? 0 : t->stride[i];
    return o;
}

// n elements from element offset off, stride st, into f32 dst.
static inline void at_load_row(const at_operand *o, int64_t off, int64_t st, int64_t n,
                               float *dst) {
    if (o->dtype == DT_F32) {
        const float *p = (const float *)o->data + off;
        if (st == 1)
            memcpy(dst, p, (size_t)n * sizeof *dst);
        else
            for (int64_t i = 0; i < n; i++)
                dst[i] = p[i * st];
        return;
    }
    cpu_half_load(o->dtype, n, (const uint16_t *)o->data + off, st, dst);
}

// The valid keys of each of the B batch rows (S without len), malloc'd;
// NULL with the error set on a length outside [0, S] or out of memory.
static inline int64_t *at_lengths(cpu_ctx *c, const char *what, const tensor *len, int64_t B,
                                  int64_t S) {
    int64_t *L = malloc((size_t)(B ? B : 1) * sizeof *L);
    if (!L) {
        cpu_fail(c, "%s: out of memory", what);
        return NULL;
    }
    for (int64_t b = 0; b < B; b++) {
        L[b] = S;
        if (!len)
            continue;
        int64_t i = tensor_numel(len) == 1 ? 0 : b,
                off = len->offset + (len->ndim ? i * len->stride[0] : 0);
        L[b] = len->dtype == DT_I64 ? ((const int64_t *)len->storage->data)[off]
                                    : ((const int32_t *)len->storage->data)[off];
        if (L[b] < 0 || L[b] > S) {
            cpu_fail(c, "%s: valid length %lld of batch row %lld is outside [0, %lld]", what,
                     (long long)L[b], (long long)b, (long long)S);
            free(L);
            return NULL;
        }
    }
    return L;
}

// s (rows, AT_TK) = q (rows, D) . kt (D, AT_TK), rows a multiple of AT_R:
// AT_R x AT_C accumulators stay in registers over the whole dot product.
// Only the blocks of columns below ncols are computed (a short last key
// tile costs what it holds; the other columns keep what they held).
static inline void at_tile_scores(const float *q, const float *kt, int64_t D, int rows, int ncols,
                                  float *s) {
    for (int i0 = 0; i0 < rows; i0 += AT_R)
        for (int c0 = 0; c0 < ncols && c0 < AT_TK; c0 += AT_C) {
            float acc[AT_R][AT_C] = {{0}};
            for (int64_t d = 0; d < D; d++) {
                const float *kd = kt + d * AT_TK + c0;
                for (int r = 0; r < AT_R; r++) {
                    float qv = q[(i0 + r) * D + d];
#pragma omp simd
                    for (int c = 0; c < AT_C; c++)
                        acc[r][c] += qv * kd[c];
                }
            }
            for (int r = 0; r < AT_R; r++)
                memcpy(s + (i0 + r) * AT_TK + c0, acc[r], sizeof acc[r]);
        }
}

// acc (rows, Dv) += p (rows, AT_TK) . v (nk, Dv), v's rows ldv apart,
// blocked as tile_scores
static inline void at_tile_pv(const float *p, const float *v, int64_t ldv, int64_t Dv, int rows,
                              int nk, float *acc) {
    for (int i0 = 0; i0 < rows; i0 += AT_R) {
        int64_t e0 = 0;
        for (; e0 + AT_C <= Dv; e0 += AT_C) {
            float o[AT_R][AT_C];
            for (int r = 0; r < AT_R; r++)
                memcpy(o[r], acc + (i0 + r) * Dv + e0, sizeof o[r]);
            for (int c = 0; c < nk; c++) {
                const float *vc = v + c * ldv + e0;
                for (int r = 0; r < AT_R; r++) {
                    float pv = p[(i0 + r) * AT_TK + c];
#pragma omp simd
                    for (int e = 0; e < AT_C; e++)
                        o[r][e] += pv * vc[e];
                }
            }
            for (int r = 0; r < AT_R; r++)
                memcpy(acc + (i0 + r) * Dv + e0, o[r], sizeof o[r]);
        }
        for (int r = 0; e0 < Dv && r < AT_R; r++) // the last Dv % AT_C columns
            for (int c = 0; c < nk; c++) {
                float pv = p[(i0 + r) * AT_TK + c];
                for (int64_t e = e0; e < Dv; e++)
                    acc[(i0 + r) * Dv + e] += pv * v[c * ldv + e];
            }
    }
}
