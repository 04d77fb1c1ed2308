// The recommendation models' ops (cpu_kernels.h): nn.EmbeddingBag in sum mode
// with offsets (EMBEDDING_BAG) and its backward, and DLRM's gather of the
// interaction matrix's lower triangle (TRIL_GATHER) and its backward.
// The bags sum in f32, as PyTorch accumulates a half table; the gathers move
// bytes, so they take every dtype by element size.
#include "cpu_iter.h"
#include "cpu_kernels.h"

#include <stdlib.h>
#include <string.h>

static int64_t index_at(const tensor *t, int64_t i) {
    return t->dtype == DT_I32 ? ((const int32_t *)tensor_data(t))[i]
                              : ((const int64_t *)tensor_data(t))[i];
}

// Checks the offsets (B) against N indices: from 0, ascending, within
// [0, N], as PyTorch requires; 0, or -1 with the error naming `what`.
static int check_offsets(cpu_ctx *c, const char *what, const tensor *off, int64_t N) {
    int64_t B = off->shape[0], prev = 0;
    for (int64_t b = 0; b < B; b++) {
        int64_t o = index_at(off, b);
        if (o < prev || o > N || (b == 0 && o != 0))
            return cpu_fail(c,
                            "%s: offset %lld of bag %lld is not ascending from 0 within [0, %lld]",
                            what, (long long)o, (long long)b, (long long)N);
        prev = o;
    }
    return 0;
}

// Contiguous copies of the indices and offsets (views when already so),
// the offsets checked; 0, or -1 with nothing left allocated.
static int bag_inputs(cpu_ctx *c, const char *what, const tensor *idx, const tensor *off,
                      tensor **ic, tensor **oc) {
    if ((idx->dtype != DT_I32 && idx->dtype != DT_I64) ||
        (off->dtype != DT_I32 && off->dtype != DT_I64))
        return cpu_fail(c, "%s: indices and offsets must be i32 or i64, got %s and %s", what,
                        dtype_name(idx->dtype), dtype_name(off->dtype));
    *ic = cpu_contiguous(c, idx);
    *oc = *ic ? cpu_contiguous(c, off) : NULL;
    if (*oc && check_offsets(c, what, *oc, tensor_numel(*ic)) == 0)
        return 0;
    tensor_free(*ic);
    tensor_free(*oc);
    return -1;
}

// table (V, D), indices (N), offsets (B) -> out (B, D): bag b's rows summed,
// each bag by one thread.
int cpu_embedding_bag(cpu_ctx *c, const tensor *table, const tensor *idx, const tensor *off,
                      tensor *out) {
    tensor *ic, *oc;
    if (bag_inputs(c, "embedding_bag", idx, off, &ic, &oc) < 0)
        return -1;
    tensor *tc = cpu_f32_in(c, "embedding_bag", table);
    tensor *yc = tc ? cpu_f32_out(c, "embedding_bag", out) : NULL;
    int rc = yc ? 0 : -1;
    int64_t V = table->shape[0], D = table->shape[1], B = out->shape[0], N = tensor_numel(ic);
    int64_t bad = 0; // 1 + the last position holding an index out of range
    if (rc == 0) {
        const float *pt = tensor_f32(tc);
        float *py = tensor_f32(yc);
#pragma omp parallel for if (N * D >= CPU_PAR_MIN) reduction(max : bad) schedule(static)
        for (int64_t b = 0; b < B; b++) {
            int64_t hi = b + 1 < B ? index_at(oc, b + 1) : N;
            float *y = py + b * D;
            memset(y, 0, (size_t)D * sizeof *y);
            for (int64_t i = index_at(oc, b); i < hi; i++) {
                int64_t id = index_at(ic, i);
                if (id < 0 || id >= V) {
                    bad = i + 1;
                    continue;
                }
                const float *row = pt + id * D;
#pragma omp simd
                for (int64_t d = 0; d < D; d++)
                    y[d] += row[d];
            }
        }
        if (bad)
            rc = cpu_fail(c, "embedding_bag: index %lld at position %lld is outside [0, %lld)",
                          (long long)index_at(ic, bad - 1), (long long)(bad - 1), (long long)V);
        else
            c->kernels++;
    }
    tensor_free(tc);
    tensor_free(ic);
    tensor_free(oc);
    return yc ? cpu_f32_done(yc, out, rc) : rc;
}

// dy (B, D), indices, offsets -> out (V, D): each position's bag found,
// then EMBEDDING_GRAD's row sums (cpu_rows_grad) over the bags' dy rows.
int cpu_embedding_bag_grad(cpu_ctx *c, const tensor *dy, const tensor *idx, const tensor *off,
                           tensor *out) {
    tensor *ic, *oc;
    if (bag_inputs(c, "embedding_bag_grad", idx, off, &ic, &oc) < 0)
        return -1;
    int64_t B = dy->shape[0], N = tensor_numel(ic);
    int64_t *bag = malloc((size_t)(N ? N : 1) * sizeof *bag);
    int rc =
        bag ? 0 : cpu_fail(c, "embedding_bag_grad: out of memory for %lld indices", (long long)N);
    for (int64_t b = 0; bag && b < B; b++)
        for (int64_t i = index_at(oc, b), hi = b + 1 < B ? index_at(oc, b + 1) : N; i < hi; i++)
            bag[i] = b;
    if (bag)
        rc = cpu_rows_grad(c, "embedding_bag_grad", dy, ic, bag, out);
    free(bag);
    tensor_free(ic);
    tensor_free(oc);
    return rc;
}

// z (B, F, F), any strides, <-> the pairs (B, P), contiguous: back false
// gathers z's pairs into p, back true zeroes z (contiguous then) and puts p
// at the pairs.
static int tril_move(cpu_ctx *c, const graph_node *n, char *pz, const tensor *z, char *pp,
                     bool back) {
    int64_t B = z->shape[0], F = z->shape[1], P = F * (F - 1) / 2 + (n->ia[0] ? F : 0);
    size_t es = dtype_size(z->dtype);
    if (back)
        memset(pz, 0, (size_t)(B * F * F) * es);
#pragma omp parallel for if (B * P >= CPU_PAR_MIN) schedule(static)
    for (int64_t b = 0; b < B; b++) {
        int64_t k = b * P;
        for (int64_t i = 0; i < F; i++)
            for (int64_t j = 0; j < i + n->ia[0]; j++, k++) {
                char *at =
                    pz + (size_t)(b * z->stride[0] + i * z->stride[1] + j * z->stride[2]) * es;
                if (back)
                    memcpy(at, pp + (size_t)k * es, es);
                else
                    memcpy(pp + (size_t)k * es, at, es);
            }
    }
    c->kernels++;
    return 0;
}

int cpu_tril_gather(cpu_ctx *c, const graph_node *n, const tensor *z, tensor *out) {
    if (z->dtype != out->dtype || !tensor_is_contiguous(out))
        return cpu_fail(c, "tril_gather: input %s into a contiguous output of its dtype, got %s",
                        dtype_name(z->dtype), dtype_name(out->dtype));
    return tril_move(c, n, tensor_data(z), z, tensor_data(out), false);
}

int cpu_tril_gather_grad(cpu_ctx *c, const graph_node *n, const tensor *dy, tensor *out) {
    if (dy->dtype != out->dtype)
        return cpu_fail(c, "tril_gather_grad: dy %s and output %s differ in dtype",
                        dtype_name(dy->dtype), dtype_name(out->dtype));
    if (!tensor_is_contiguous(out)) // zeroed whole before the pairs are put
        return cpu_fail(c, "tril_gather_grad: needs a contiguous output");
    tensor *dc = cpu_contiguous(c, dy);
    if (!dc)
        return -1;
    int rc = tril_move(c, n, tensor_data(out), out, tensor_data(dc), true);
    tensor_free(dc);
    return rc;
}
