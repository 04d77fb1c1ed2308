// The pointwise loop nest (cpu_iter.h).
#include "cpu_iter.h"

#include "core/dtype.h"

#include <omp.h>
#include <string.h>

void cpu_iter_init(cpu_iter *it, tensor *out, int nin, const tensor *const *in) {
    int nd = out->ndim;
    it->nops = nin + 1;
    it->numel = tensor_numel(out);
    const tensor *ops[CPU_ITER_MAX_OPS] = {out};
    for (int k = 0; k < nin; k++)
        ops[k + 1] = in[k];
    int64_t shape[TENSOR_MAX_DIMS], stride[CPU_ITER_MAX_OPS][TENSOR_MAX_DIMS];
    for (int k = 0; k < it->nops; k++) {
        const tensor *t = ops[k];
        it->data[k] = tensor_data(t);
        it->esize[k] = (int64_t)dtype_size(t->dtype);
        for (int d = 0; d < nd; d++) {
            int s = d - (nd - t->ndim); // inputs align to the right
            bool bc = s < 0 || t->shape[s] != out->shape[d];
            stride[k][d] = bc ? 0 : t->stride[s];
        }
    }
    for (int d = 0; d < nd; d++)
        shape[d] = out->shape[d];
    // drop size-1 dims, then merge a dim into the one inside it when every
    // operand steps over the inner one contiguously
    int m = 0;
    for (int d = 0; d < nd; d++) {
        if (shape[d] == 1)
            continue;
        bool merge = m > 0;
        for (int k = 0; merge && k < it->nops; k++)
            merge = it->stride[k][m - 1] == stride[k][d] * shape[d];
        if (merge) {
            it->shape[m - 1] *= shape[d];
            for (int k = 0; k < it->nops; k++)
                it->stride[k][m - 1] = stride[k][d];
        } else {
            it->shape[m] = shape[d];
            for (int k = 0; k < it->nops; k++)
                it->stride[k][m] = stride[k][d];
            m++;
        }
    }
    if (m == 0) {
        it->shape[0] = 1;
        for (int k = 0; k < it->nops; k++)
            it->stride[k][0] = 0;
        m = 1;
    }
    it->ndim = m;
}

// One thread's share [begin, end) of the flat output range.
static void run_range(const cpu_iter *it, cpu_segment_fn fn, void *ctx, int64_t begin,
                      int64_t end) {
    int nd = it->ndim, last = nd - 1;
    int64_t idx[TENSOR_MAX_DIMS];
    int64_t rest = begin;
    for (int d = last; d >= 0; d--) {
        idx[d] = rest % it->shape[d];
        rest /= it->shape[d];
    }
    int64_t inner[CPU_ITER_MAX_OPS];
    for (int k = 0; k < it->nops; k++)
        inner[k] = it->stride[k][last];
    int64_t pos = begin;
    while (pos < end) {
        int64_t n = it->shape[last] - idx[last];
        if (n > end - pos)
            n = end - pos;
        char *ptr[CPU_ITER_MAX_OPS];
        for (int k = 0; k < it->nops; k++) {
            int64_t off = 0;
            for (int d = 0; d < nd; d++)
                off += idx[d] * it->stride[k][d];
            ptr[k] = it->data[k] + off * it->esize[k];
        }
        fn(ctx, n, ptr, inner, pos);
        pos += n;
        idx[last] += n;
        for (int d = last; d > 0 && idx[d] == it->shape[d]; d--) {
            idx[d] = 0;
            idx[d - 1]++;
        }
    }
}

void cpu_iter_run(const cpu_iter *it, cpu_segment_fn fn, void *ctx) {
    int64_t total = it->numel;
    if (total < CPU_PAR_MIN || omp_get_max_threads() == 1) {
        run_range(it, fn, ctx, 0, total);
        return;
    }
#pragma omp parallel
    {
        int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
        // chunks in multiples of 64 elements keep threads off each other's
        // cache lines
        int64_t chunk = ((total + nt - 1) / nt + 63) & ~(int64_t)63;
        int64_t begin = t * chunk, end = begin + chunk < total ? begin + chunk : total;
        if (begin < end)
            run_range(it, fn, ctx, begin, end);
    }
}

#define COPY_STRIDED(T)                                                                            \
    do {                                                                                           \
        T *restrict o = (T *)ptr[0];                                                               \
        const T *restrict a = (const T *)ptr[1];                                                   \
        for (int64_t i = 0; i < n; i++)                                                            \
            o[i * st[0]] = a[i * st[1]];                                                           \
    } while (0)

static void seg_copy(void *ctx, int64_t n, char *const *ptr, const int64_t *st, int64_t flat0) {
    (void)flat0;
    int64_t es = *(const int64_t *)ctx;
    if (st[0] == 1 && st[1] == 1) {
        memcpy(ptr[0], ptr[1], (size_t)(n * es));
        return;
    }
    switch (es) {
    case 1: COPY_STRIDED(uint8_t); break;
    case 2: COPY_STRIDED(uint16_t); break;
    case 4: COPY_STRIDED(uint32_t); break;
    default: COPY_STRIDED(uint64_t); break;
    }
}

// A transposed pair of inner dims (input stride 1 on the second-to-last
// dim, output stride 1 on the last) copied run by run reads one element per
// cache line. 8 x 8 tiles read 8 contiguous runs into a small buffer and
// write 8 contiguous runs out of it; 8 input lines stay within the ways of
// one L1 set even when the input stride is a power of two.
#define TILE 8

// bounds as constants for whole tiles, so the compiler unrolls them
#define TILE_LOOPS(T, NR, NC)                                                                      \
    do {                                                                                           \
        T *o = (T *)po, buf[TILE][TILE];                                                           \
        const T *a = (const T *)pa;                                                                \
        for (int64_t c = 0; c < (NC); c++)                                                         \
            for (int64_t r = 0; r < (NR); r++)                                                     \
                buf[r][c] = a[r + c * isc];                                                        \
        for (int64_t r = 0; r < (NR); r++)                                                         \
            for (int64_t c = 0; c < (NC); c++)                                                     \
                o[r * osr + c] = buf[r][c];                                                        \
    } while (0)

#define COPY_TILE(T)                                                                               \
    do {                                                                                           \
        if (nr == TILE && nc == TILE)                                                              \
            TILE_LOOPS(T, TILE, TILE);                                                             \
        else                                                                                       \
            TILE_LOOPS(T, nr, nc);                                                                 \
    } while (0)

static void copy_tiled(const cpu_iter *it) {
    int nd = it->ndim;
    int64_t R = it->shape[nd - 2], C = it->shape[nd - 1], es = it->esize[0];
    int64_t osr = it->stride[0][nd - 2], isc = it->stride[1][nd - 1];
    int64_t tr = (R + TILE - 1) / TILE, tc = (C + TILE - 1) / TILE;
    int64_t outer = it->numel / (R * C);
#pragma omp parallel for if (it->numel >= CPU_PAR_MIN) schedule(static)
    for (int64_t t = 0; t < outer * tr * tc; t++) {
        int64_t rest = t / (tr * tc), oo = 0, io = 0;
        for (int d = nd - 3; d >= 0; d--) {
            int64_t k = rest % it->shape[d];
            rest /= it->shape[d];
            oo += k * it->stride[0][d];
            io += k * it->stride[1][d];
        }
        int64_t r0 = (t / tc) % tr * TILE, c0 = t % tc * TILE;
        int64_t nr = R - r0 < TILE ? R - r0 : TILE, nc = C - c0 < TILE ? C - c0 : TILE;
        char *po = it->data[0] + (oo + r0 * osr + c0) * es;
        const char *pa = it->data[1] + (io + r0 + c0 * isc) * es;
        switch (es) {
        case 1: COPY_TILE(uint8_t); break;
        case 2: COPY_TILE(uint16_t); break;
        case 4: COPY_TILE(uint32_t); break;
        default: COPY_TILE(uint64_t); break;
        }
    }
}

void cpu_iter_copy(tensor *out, const tensor *x) {
    cpu_iter it;
    cpu_iter_init(&it, out, 1, &x);
    int nd = it.ndim;
    if (nd >= 2 && it.stride[0][nd - 1] == 1 && it.stride[1][nd - 2] == 1 &&
        it.stride[1][nd - 1] != 1 && it.shape[nd - 1] >= 8 && it.shape[nd - 2] >= 8) {
        copy_tiled(&it);
        return;
    }
    int64_t es = (int64_t)dtype_size(x->dtype);
    cpu_iter_run(&it, seg_copy, &es);
}
