// cpu_attention.h: what the fused attention kernels share (cpu_attention.c,
// the forward; cpu_attention_grad.c, the backward): strided operands read
// as f32 rows, and each batch row's valid length.
//
//   at_operand o = at_operand_of(q);                  // (B, H, T, D), any strides
//   at_load_row(&o, b * o.st[0] + h * o.st[1] + t * o.st[2], o.st[3], D, row);
#pragma once
#include "cpu_f16.h"
#include "cpu_kernels.h"

#include <stdlib.h>
#include <string.h>

// A strided 4-d operand broadcast to (B, H, T, S)-like indices: elements are
// base + i0 * st[0] + ... (st 0 along a broadcast axis).
typedef struct at_operand {
    enum dtype dtype;
    const char *data; // at element 0 (the tensor's offset applied)
    int64_t st[4];
} at_operand;

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
