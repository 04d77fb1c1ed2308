// MATMUL and LINEAR through OpenBLAS's cblas_sgemm (cpu_kernels.h), or for
// at most four rows the matrix-vector kernels (cpu_gemm_par.h), as
// PyTorch's CPU eager does through its BLAS: no copies for operands whose last two dims are
// row-major or transposed (a permuted view goes in as CblasTrans), the
// batch dims of a matmul against a shared matrix folded into the rows of
// one GEMM, and the bias of a linear preloaded into the output with beta = 1
// (addmm).
#include "cpu_f16.h"
#include "cpu_iter.h"
#include "cpu_kernels.h"

#include <cblas.h>
#include <omp.h>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "cpu_gemm_par.h"
#include <stdlib.h>
#include <string.h>

// A (R, C) matrix with element strides (sr, sc) as BLAS sees it: row-major
// with leading dimension ld, transposed or not. false when neither fits
// (then the caller copies).
static bool blas_layout(int64_t R, int64_t C, int64_t sr, int64_t sc, bool *trans, int64_t *ld) {
    if ((C == 1 || sc == 1) && (R == 1 || sr >= C)) {
        *trans = false;
        *ld = R == 1 ? C : sr;
        if (*ld < 1)
            *ld = 1;
        return true;
    }
    if ((R == 1 || sr == 1) && (C == 1 || sc >= R)) {
        *trans = true;
        *ld = C == 1 ? R : sc;
        if (*ld < 1)
            *ld = 1;
        return true;
    }
    return false;
}

// The operand as a matrix BLAS takes, copying it (a counted kernel) when
// its strides do not allow that. *own receives the copy to free, or NULL.
static int gemm_operand(cpu_ctx *c, const tensor *t, tensor **own, const tensor **use, bool *trans,
                        int64_t *ld) {
    int nd = t->ndim;
    *own = NULL;
    *use = t;
    if (blas_layout(t->shape[nd - 2], t->shape[nd - 1], t->stride[nd - 2], t->stride[nd - 1], trans,
                    ld))
        return 0;
    *own = cpu_contiguous(c, t);
    if (!*own)
        return -1;
    *use = *own;
    *trans = false;
    *ld = t->shape[nd - 1];
    return 0;
}

// A batch of GEMMs is spread over threads, one matrix each, when there are
// at least as many as threads (as PyTorch's bmm does); OpenBLAS stays
// single-threaded inside a parallel region.

// ---- f16 operands (AMP) ---------------------------------------------------------
// OpenBLAS has no half-precision GEMM and this CPU has no AVX512-FP16, so the
// fastest honest method is the one PyTorch's CPU fallback uses: f16 operands
// converted to f32 (F16C, eight values an instruction), an f32 GEMM with f32
// accumulation, the result rounded to f16 once. The conversions belong to
// the one kernel this op launches. bf16 operands on a CPU with AVX512-BF16
// go to oneDNN's bf16 matmul instead (cpu_gemm_bf16.c) where it takes them.

// An operand as f32 in its own layout: an f32 one as a view; an f16 one by
// converting the storage span its view covers in one contiguous pass, then
// viewing that with the same strides, so that a transposed operand stays a
// transposed view (the GEMM's transpose flag) and a broadcast one (GQA's
// shared keys) stays broadcast (batch stride 0) instead of being written
// out element by element. A view covering much more storage than it reads
// (a narrow slice) is gathered contiguous instead.
// The storage span t's view covers (from *lo): what gemm_f32_of widens of
// a 16-bit operand unless it is over twice t's elements.
static int64_t view_span(const tensor *t, int64_t *lo) {
    int64_t hi = t->offset;
    *lo = t->offset;
    for (int d = 0; d < t->ndim; d++) {
        int64_t ext = (t->shape[d] - 1) * t->stride[d];
        *lo += ext < 0 ? ext : 0;
        hi += ext > 0 ? ext : 0;
    }
    return hi - *lo + 1;
}

static tensor *gemm_f32_of(cpu_ctx *c, const char *what, const tensor *t) {
    if (t->dtype == DT_F32) {
        tensor *v = tensor_view(t);
        if (!v)
            cpu_fail(c, "%s: out of memory", what);
        return v;
    }
    int64_t lo, n = tensor_numel(t), span = view_span(t, &lo);
    if (!dtype_is_half(t->dtype) || n == 0 || span > 2 * n)
        return cpu_f32_in(c, what, t);
    tensor *buf = tensor_new_empty(DT_F32, 1, &span), *v = buf ? tensor_view(buf) : NULL;
    tensor_free(buf);
    if (!v) {
        cpu_fail(c, "%s: out of memory for the f32 copy of a %zu-byte %s operand", what,
                 tensor_nbytes(t), dtype_name(t->dtype));
        return NULL;
    }
    const uint16_t *src = (const uint16_t *)t->storage->data + lo;
    float *dst = tensor_f32(v);
    int64_t chunks = (span + 32767) / 32768;
#pragma omp parallel for if (chunks > 1) schedule(static)
    for (int64_t i = 0; i < chunks; i++) {
        int64_t s = i * 32768, e = s + 32768 < span ? s + 32768 : span;
        cpu_half_load(t->dtype, e - s, src + s, 1, dst + s);
    }
    v->ndim = t->ndim;
    memcpy(v->shape, t->shape, sizeof v->shape);
    memcpy(v->stride, t->stride, sizeof v->stride);
    v->offset = t->offset - lo;
    return v;
}

// The bytes of one 16-bit operand's f32 copy (gemm_f32_of), as round counts them.
static size_t f32_copy_bytes(const tensor *t, size_t (*round)(size_t bytes)) {
    int64_t lo, n = tensor_numel(t), span = view_span(t, &lo);
    if (t->dtype == DT_F32 || n == 0)
        return 0;
    return round((size_t)(span > 2 * n ? n : span) * sizeof(float));
}

// A linear of a few rows of x against an f16 weight (AMP decoding) takes
// the f16 matrix-vector kernel (gemv_f16): x contiguous, the weight a
// contiguous (N, K) f16 matrix, out contiguous. Returns M, or 0.
static int64_t gemv_f16_rows(const tensor *x, const tensor *w, const tensor *out, bool linear) {
    if (!linear || w->dtype != DT_F16 || w->ndim != 2 || !tensor_is_contiguous(w) ||
        !tensor_is_contiguous(x) || !tensor_is_contiguous(out) || x->ndim < 1 ||
        (x->dtype != DT_F32 && !dtype_is_half(x->dtype)) ||
        (out->dtype != DT_F32 && !dtype_is_half(out->dtype)))
        return 0;
    int64_t K = w->shape[1], N = w->shape[0];
    if (K < 1 || N < 1 || x->shape[x->ndim - 1] != K)
        return 0;
    int64_t M = tensor_numel(x) / K;
    return M >= 1 && M <= CPU_GEMV_ROWS && tensor_numel(out) == M * N ? M : 0;
}

size_t cpu_gemm_f16_scratch(const tensor *a, const tensor *b, const tensor *bias, bool linear,
                            const tensor *out, size_t (*round)(size_t bytes)) {
    bool f16 = a->dtype == DT_F16 || b->dtype == DT_F16 || out->dtype == DT_F16;
    bool bf16 = a->dtype == DT_BF16 || b->dtype == DT_BF16 || out->dtype == DT_BF16;
    if (!f16 || bf16)
        return 0;
    int64_t M = gemv_f16_rows(a, b, out, linear);
    if (M) // gemv_f16: x and y in f32, an f16 bias widened
        return round((size_t)(M * b->shape[1]) * sizeof(float)) +
               round((size_t)(M * b->shape[0]) * sizeof(float)) +
               (bias ? f32_copy_bytes(bias, round) : 0);
    size_t o = dtype_is_half(out->dtype) ? round((size_t)tensor_numel(out) * sizeof(float)) : 0;
    return f32_copy_bytes(a, round) + f32_copy_bytes(b, round) +
           (bias ? f32_copy_bytes(bias, round) : 0) + o;
}

// GCC vector types of the matrix-vector kernels (gemv_f16 below, cpu_gemv
// further on): 16 floats, loaded unaligned.
typedef float cpu_v16 __attribute__((vector_size(64)));

static inline cpu_v16 cpu_v16_load(const float *p) {
    cpu_v16 v;
    memcpy(&v, p, sizeof v);
    return v;
}

// The 16 lanes' sum as a tree (halves added, 16 to 1 in four steps): a
// plain loop is 15 dependent adds, as many as the row's FMAs at K = 256.
typedef float cpu_v8 __attribute__((vector_size(32)));
typedef float cpu_v4 __attribute__((vector_size(16)));
static inline float cpu_v16_sum(cpu_v16 v) {
    cpu_v8 a = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) +
               __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
    cpu_v4 b =
        __builtin_shufflevector(a, a, 0, 1, 2, 3) + __builtin_shufflevector(a, a, 4, 5, 6, 7);
    return (b[0] + b[2]) + (b[1] + b[3]);
}

// y (M, N) f32 = x (M, K) f32 @ w (N, K)^T for columns [n0, n1): each
// weight row's halves converted 256 at a time into L1, dotted with every
// row of x.
static void gemv_f16_cols(int64_t M, int64_t n0, int64_t n1, int64_t K, const float *x,
                          const uint16_t *w, float *y, int64_t N) {
#if defined(__AVX512F__) && defined(__F16C__)
    // AVX-512: 16 halves a load, widened in a register (vcvtph2ps)
    if (M == 1) {
        int64_t K16 = K - K % 16;
        for (int64_t j = n0; j < n1; j++) {
            const uint16_t *wr = w + j * K;
            __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
            int64_t k = 0;
            for (; k + 32 <= K16; k += 32) {
                s0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + k),
                                     _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(wr + k))),
                                     s0);
                s1 = _mm512_fmadd_ps(
                    _mm512_loadu_ps(x + k + 16),
                    _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(wr + k + 16))), s1);
            }
            if (k < K16)
                s0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + k),
                                     _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(wr + k))),
                                     s0);
            float t = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
            for (k = K16; k < K; k++)
                t += x[k] * _cvtsh_ss(wr[k]);
            y[j] = t;
        }
        return;
    }
#endif
    float buf[256];
    for (int64_t j = n0; j < n1; j++) {
        cpu_v16 acc[CPU_GEMV_ROWS] = {{0}};
        float tail[CPU_GEMV_ROWS] = {0};
        for (int64_t k0 = 0; k0 < K; k0 += 256) {
            int64_t len = K - k0 < 256 ? K - k0 : 256, l16 = len - len % 16;
            cpu_f16_load(len, w + j * K + k0, 1, buf);
            for (int64_t m = 0; m < M; m++) {
                const float *xr = x + m * K + k0;
                for (int64_t k = 0; k < l16; k += 16)
                    acc[m] += cpu_v16_load(xr + k) * cpu_v16_load(buf + k);
                for (int64_t k = l16; k < len; k++)
                    tail[m] += xr[k] * buf[k];
            }
        }
        for (int64_t m = 0; m < M; m++)
            y[m * N + j] = cpu_v16_sum(acc[m]) + tail[m];
    }
}

// A linear of a few rows against an f16 weight (gemv_f16_rows: AMP's
// decoding step): x in f32 (a few KiB), the weight read once as halves
// (converting it all to f32 first, then the f32 kernel, read it twice and
// wrote twice its bytes), the columns over the threads as cpu_sgemm_par
// splits an f32 one, then the bias and out's dtype. Its f32 x and y are
// tensors, so that cpu_gemm_f16_scratch and --memory-limit count them.
static int gemv_f16(cpu_ctx *c, int64_t M, const tensor *x, const tensor *w, const tensor *bias,
                    tensor *out) {
    int64_t N = w->shape[0], K = w->shape[1], nx = M * K, ny = M * N;
    tensor *xt = tensor_new_empty(DT_F32, 1, &nx),
           *yt = xt ? tensor_new_empty(DT_F32, 1, &ny) : NULL;
    tensor *b32 = NULL;
    int rc = -1;
    if (!yt) {
        cpu_fail(c, "linear: out of memory for the f16 matrix-vector product");
        goto done;
    }
    float *xf = tensor_f32(xt), *y = tensor_f32(yt);
    if (x->dtype == DT_F32)
        memcpy(xf, tensor_f32(x), (size_t)nx * sizeof *xf);
    else
        cpu_half_load(x->dtype, nx, (const uint16_t *)x->storage->data + x->offset, 1, xf);
    const uint16_t *pw = (const uint16_t *)w->storage->data + w->offset;
    int nt = omp_in_parallel() ? 1 : omp_get_max_threads();
    if (nt < 2 || (double)M * (double)N * (double)K < CPU_GEMV_PAR_WORK || N / 16 < 2 * nt)
        gemv_f16_cols(M, 0, N, K, xf, pw, y, N);
    else {
#pragma omp parallel for schedule(static)
        for (int t = 0; t < nt; t++)
            gemv_f16_cols(M, cpu_gemv_col(N, t, nt), cpu_gemv_col(N, t + 1, nt), K, xf, pw, y, N);
    }
    if (bias) {
        if (!(b32 = cpu_f32_in(c, "linear", bias)))
            goto done;
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                int64_t at = b32->offset + n * (b32->ndim ? b32->stride[b32->ndim - 1] : 0);
                y[m * N + n] += ((const float *)b32->storage->data)[at];
            }
    }
    if (out->dtype == DT_F32)
        memcpy(tensor_f32(out), y, (size_t)ny * sizeof *y);
    else
        cpu_half_store(out->dtype, ny, y, (uint16_t *)out->storage->data + out->offset, 1);
    rc = 0;
done:
    tensor_free(b32);
    tensor_free(xt);
    tensor_free(yt);
    return rc;
}

// matmul (w NULL) or linear (w, bias) with any f16 operand or output: the
// operands through gemm_f32_of, the output through cpu_f32_out
// (cpu_kernels.h), then the f32 kernel.
static int gemm_f16(cpu_ctx *c, const tensor *a, const tensor *b, const tensor *bias, bool linear,
                    tensor *out) {
    const char *what = linear ? "linear" : "matmul";
    int64_t k0 = c->kernels;
    int rc = cpu_gemm_bf16(c, a, b, bias, linear, out);
    if (rc <= 0) {
        c->kernels = k0 + (rc == 0);
        return rc;
    }
    int64_t M = gemv_f16_rows(a, b, out, linear);
    if (M) {
        rc = gemv_f16(c, M, a, b, bias, out);
        c->kernels = k0 + 1;
        return rc;
    }
    tensor *a32 = gemm_f32_of(c, what, a), *b32 = a32 ? gemm_f32_of(c, what, b) : NULL;
    tensor *c32 = bias && b32 ? cpu_f32_in(c, what, bias) : NULL;
    tensor *o32 = b32 && (!bias || c32) ? cpu_f32_out(c, what, out) : NULL;
    rc = -1;
    if (o32)
        rc = linear ? cpu_linear(c, a32, b32, c32, o32) : cpu_matmul(c, a32, b32, o32);
    cpu_f32_done(o32, out, rc);
    tensor_free(a32);
    tensor_free(b32);
    tensor_free(c32);
    c->kernels = k0 + 1;
    return rc;
}

// The element offsets into A and B of matrix i of a batch over out's
// leading nb dims, by the operands' batch strides sa and sb.
static void batch_offsets(const tensor *out, int nb, const int64_t *sa, const int64_t *sb,
                          int64_t i, int64_t *oa, int64_t *ob) {
    *oa = *ob = 0;
    for (int d = nb - 1; d >= 0; d--) {
        int64_t k = i % out->shape[d];
        i /= out->shape[d];
        *oa += k * sa[d];
        *ob += k * sb[d];
    }
}

// ---- the matrix-vector kernels (cpu_gemm_par.h, cpu_gemv) ----

#define CPU_GEMV_AHEAD 8 // rows ahead that the matrix-vector kernel prefetches

// c[m, j] = sum_k a[m, k] w[j, k] + beta c[m, j] for columns j in [n0, n1)
// (B = w^T, tb 112: a linear's weight), four weight rows at a time, M rows
// of A against each (MR the compile-time row count). Each line read asks
// for the line CPU_GEMV_AHEAD rows further on: four rows read side by side
// are four short streams that the hardware prefetcher follows late, and a
// weight from DRAM (8192 x 512, f32, 2 threads) came at 14-20 GB/s without
// it and 33-35 GB/s with it.
static inline __attribute__((always_inline)) void
cpu_gemv_nt_body(int MR, int64_t n0, int64_t n1, int64_t K, const float *a, int64_t lda,
                 const float *w, int64_t ldw, float beta, float *c, int64_t ldc) {
    int64_t K16 = K - K % 16, j = n0;
    for (; j < n1; j += 4) {
        int nr = n1 - j < 4 ? (int)(n1 - j) : 4;
        const float *wr[4], *pf[4]; // the rows, and those CPU_GEMV_AHEAD on
        for (int r = 0; r < 4; r++) {
            wr[r] = w + (j + (r < nr ? r : 0)) * ldw;
            pf[r] = j + CPU_GEMV_AHEAD + r < n1 ? wr[r] + CPU_GEMV_AHEAD * ldw : wr[r];
        }
        cpu_v16 acc[CPU_GEMV_ROWS][4] = {{{0}}};
        for (int64_t k = 0; k < K16; k += 16) {
            cpu_v16 wv[4];
            for (int r = 0; r < 4; r++) {
                wv[r] = cpu_v16_load(wr[r] + k);
                __builtin_prefetch(pf[r] + k);
            }
            for (int m = 0; m < MR; m++) {
                cpu_v16 xv = cpu_v16_load(a + m * lda + k);
                for (int r = 0; r < 4; r++)
                    acc[m][r] += xv * wv[r];
            }
        }
        for (int m = 0; m < MR; m++)
            for (int r = 0; r < nr; r++) {
                float s = cpu_v16_sum(acc[m][r]);
                for (int64_t k = K16; k < K; k++)
                    s += a[m * lda + k] * wr[r][k];
                float *o = c + m * ldc + j + r;
                *o = beta != 0.0f ? s + beta * *o : s;
            }
    }
}

// c[m, j] = sum_k a[m, k] b[k, j] + beta c[m, j] for j in [n0, n1)
// (tb 111: B row-major): VW vectors of 16 columns at a time.
static inline __attribute__((always_inline)) void
cpu_gemv_nn_cols(int MR, int VW, int64_t j, int64_t K, const float *a, int64_t lda, const float *b,
                 int64_t ldb, float beta, float *c, int64_t ldc) {
    cpu_v16 acc[CPU_GEMV_ROWS][4] = {{{0}}};
    for (int64_t k = 0; k < K; k++) {
        const float *br = b + k * ldb + j;
        cpu_v16 bv[4];
        for (int r = 0; r < VW; r++)
            bv[r] = cpu_v16_load(br + 16 * r);
        for (int m = 0; m < MR; m++) {
            float x = a[m * lda + k];
            for (int r = 0; r < VW; r++)
                acc[m][r] += x * bv[r];
        }
    }
    for (int m = 0; m < MR; m++)
        for (int r = 0; r < VW; r++) {
            float *o = c + m * ldc + j + 16 * r;
            cpu_v16 v = acc[m][r];
            if (beta != 0.0f)
                v += beta * cpu_v16_load(o);
            memcpy(o, &v, sizeof v);
        }
}

static inline __attribute__((always_inline)) void
cpu_gemv_nn_body(int MR, int64_t n0, int64_t n1, int64_t K, const float *a, int64_t lda,
                 const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    int64_t j = n0;
    for (; j + 64 <= n1; j += 64)
        cpu_gemv_nn_cols(MR, 4, j, K, a, lda, b, ldb, beta, c, ldc);
    for (; j + 16 <= n1; j += 16)
        cpu_gemv_nn_cols(MR, 1, j, K, a, lda, b, ldb, beta, c, ldc);
    if (j == n1)
        return;
    // the last columns, fewer than 16: rows of B in order still
    int w = (int)(n1 - j);
    float acc[CPU_GEMV_ROWS][16] = {{0}};
    for (int64_t k = 0; k < K; k++)
        for (int m = 0; m < MR; m++)
            for (int i = 0; i < w; i++)
                acc[m][i] += a[m * lda + k] * b[k * ldb + j + i];
    for (int m = 0; m < MR; m++)
        for (int i = 0; i < w; i++) {
            float *o = c + m * ldc + j + i;
            *o = beta != 0.0f ? acc[m][i] + beta * *o : acc[m][i];
        }
}

void cpu_gemv(int tb, int64_t M, int64_t n0, int64_t n1, int64_t K, const float *a, int64_t lda,
              const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
#define CPU_GEMV_CASE(MR)                                                                          \
    case MR:                                                                                       \
        if (tb == 112)                                                                             \
            cpu_gemv_nt_body(MR, n0, n1, K, a, lda, b, ldb, beta, c, ldc);                         \
        else                                                                                       \
            cpu_gemv_nn_body(MR, n0, n1, K, a, lda, b, ldb, beta, c, ldc);                         \
        break;
    switch (M) {
        CPU_GEMV_CASE(1)
        CPU_GEMV_CASE(2)
        CPU_GEMV_CASE(3)
        CPU_GEMV_CASE(4)
    default: break;
    }
#undef CPU_GEMV_CASE
}

int cpu_matmul(cpu_ctx *c, const tensor *a, const tensor *b, tensor *out) {
    if (dtype_is_half(a->dtype) || dtype_is_half(b->dtype) || dtype_is_half(out->dtype))
        return gemm_f16(c, a, b, NULL, false, out);
    if (a->dtype != DT_F32 || b->dtype != DT_F32)
        return cpu_fail(c, "matmul: dtype %s is not supported by the CPU eager kernels (f32 only)",
                        dtype_name(a->dtype != DT_F32 ? a->dtype : b->dtype));
    tensor *ownA, *ownB;
    const tensor *A, *B;
    bool ta, tb;
    int64_t lda, ldb;
    if (gemm_operand(c, a, &ownA, &A, &ta, &lda) < 0)
        return -1;
    if (gemm_operand(c, b, &ownB, &B, &tb, &ldb) < 0) {
        tensor_free(ownA);
        return -1;
    }
    int nd = out->ndim, nb = nd - 2;
    int64_t M = out->shape[nd - 2], N = out->shape[nd - 1], K = a->shape[a->ndim - 1];
    // batch strides of each operand over the output's batch dims (0 = broadcast)
    int64_t sa[TENSOR_MAX_DIMS] = {0}, sb[TENSOR_MAX_DIMS] = {0};
    int64_t batch = 1;
    for (int d = 0; d < nb; d++) {
        int da = d - (nd - A->ndim), db = d - (nd - B->ndim);
        sa[d] = da >= 0 && A->shape[da] == out->shape[d] ? A->stride[da] : 0;
        sb[d] = db >= 0 && B->shape[db] == out->shape[d] ? B->stride[db] : 0;
        if (out->shape[d] == 1)
            sa[d] = sb[d] = 0;
        batch *= out->shape[d];
    }
    const float *pa = tensor_f32(A), *pb = tensor_f32(B);
    float *po = tensor_f32(out);
    // (..., M, K) @ (K, N) with A's batch and row dims one uniform stride:
    // one GEMM of (batch * M, K)
    bool b_shared = true, a_folds = !ta && batch > 1;
    int64_t expect = M * lda;
    for (int d = nb - 1; d >= 0; d--) {
        b_shared = b_shared && sb[d] == 0;
        if (out->shape[d] == 1)
            continue;
        a_folds = a_folds && sa[d] == expect;
        expect *= out->shape[d];
    }
    if (a_folds && b_shared) {
        M *= batch;
        batch = 1;
    }
    CBLAS_TRANSPOSE TA = ta ? CblasTrans : CblasNoTrans, TB = tb ? CblasTrans : CblasNoTrans;
    int nt = omp_get_max_threads();
    if (batch < nt) {
        // fewer matrices than threads (one, when the batch folded into
        // rows): each over every thread in turn (cpu_gemm_par.h). Not inside
        // an inactive parallel region: a team nested in one is made anew
        // each time (2.7 ms a GEMM with libgomp, measured on vit's)
        for (int64_t i = 0; i < batch; i++) {
            int64_t oa, ob;
            batch_offsets(out, nb, sa, sb, i, &oa, &ob);
            cpu_sgemm_par(TA, TB, M, N, K, pa + oa, lda, pb + ob, ldb, 0.0f, po + i * M * N, N);
        }
    } else {
        // as many matrices as threads or more: one thread per matrix (the
        // same rule the compiled mode's generated GEMMs follow)
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < batch; i++) {
            int64_t oa, ob;
            batch_offsets(out, nb, sa, sb, i, &oa, &ob);
            cpu_sgemm_one(TA, TB, M, N, K, pa + oa, lda, pb + ob, ldb, 0.0f, po + i * M * N, N);
        }
    }
    tensor_free(ownA);
    tensor_free(ownB);
    c->kernels++;
    return 0;
}

int cpu_linear(cpu_ctx *c, const tensor *x, const tensor *w, const tensor *bias, tensor *out) {
    if (dtype_is_half(x->dtype) || dtype_is_half(w->dtype) ||
        (bias && dtype_is_half(bias->dtype)) || dtype_is_half(out->dtype))
        return gemm_f16(c, x, w, bias, true, out);
    if (x->dtype != DT_F32 || w->dtype != DT_F32 || (bias && bias->dtype != DT_F32))
        return cpu_fail(c, "linear: dtype %s is not supported by the CPU eager kernels (f32 only)",
                        dtype_name(x->dtype != DT_F32 ? x->dtype : w->dtype));
    int nd = x->ndim;
    int64_t K = x->shape[nd - 1], N = w->shape[0], M = tensor_numel(x) / K;
    // x as (M, K): the leading dims must collapse into one row stride
    bool rows_ok = K == 1 || x->stride[nd - 1] == 1;
    int64_t lda = K, inner = 0;
    for (int d = nd - 2; d >= 0 && rows_ok; d--) {
        if (x->shape[d] == 1)
            continue;
        if (inner == 0) {
            lda = x->stride[d];
            inner = lda * x->shape[d];
        } else {
            rows_ok = x->stride[d] == inner;
            inner *= x->shape[d];
        }
    }
    rows_ok = rows_ok && lda >= K;
    tensor *own = NULL;
    const float *px = tensor_f32(x);
    if (!rows_ok) {
        own = cpu_contiguous(c, x);
        if (!own)
            return -1;
        px = tensor_f32(own);
        lda = K;
    }
    // B = w^T, (K, N) with strides (w.stride[1], w.stride[0]); a (N, K)
    // row-major weight is CblasTrans with ld K
    tensor *ownW = NULL;
    bool tb;
    int64_t ldb;
    const float *pw = tensor_f32(w);
    if (!blas_layout(K, N, w->stride[1], w->stride[0], &tb, &ldb)) {
        ownW = cpu_contiguous(c, w);
        if (!ownW) {
            tensor_free(own);
            return -1;
        }
        pw = tensor_f32(ownW);
        tb = true;
        ldb = K;
    }
    float *po = tensor_f32(out);
    float beta = 0.0f;
    if (bias) {
        const float *pb = tensor_f32(bias);
        int64_t bs = bias->stride[0];
#pragma omp parallel for if (M * N >= CPU_PAR_MIN) schedule(static)
        for (int64_t r = 0; r < M; r++) {
            float *row = po + r * N;
            if (bs == 1)
                memcpy(row, pb, (size_t)N * sizeof *row);
            else
                for (int64_t j = 0; j < N; j++)
                    row[j] = pb[j * bs];
        }
        beta = 1.0f;
    }
    // the bias preloaded, then row or column blocks over the threads
    // (cpu_gemm_par.h): the compiled mode's generated GEMMs split the same way
    cpu_sgemm_par(CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, px, lda, pw, ldb, beta, po,
                  N);
    tensor_free(own);
    tensor_free(ownW);
    c->kernels++;
    return 0;
}
