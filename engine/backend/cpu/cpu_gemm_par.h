// cpu_gemm_par: the one threading scheme of every f32 GEMM, eager's and
// the generated code's alike (this header is embedded in the generated
// C's prelude, as cpu_math.h is).
//
//   cpu_sgemm_par(111, 112, M, N, K, a, K, w, K, 0.0f, c, N);   // c = a @ w^T
//
// The threads come from OpenMP, never from OpenBLAS: a GEMM with work
// enough is cut into blocks of rows (each thread packs all of B: cheap when
// M is large) or, when there are too few rows for every thread, blocks of
// columns (each thread packs all of A, which is then small), each block one
// cblas_sgemm inside one active parallel region, where OpenBLAS's OpenMP
// build runs single-threaded. A GEMM below CPU_GEMM_PAR_WORK is one call on
// one thread, as OpenBLAS itself keeps GEMMs of that size. A GEMM of at most
// CPU_GEMV_ROWS rows takes the matrix-vector kernels below instead
// (TCBENCH_DISABLE_GEMV=1: cblas_sgemm as above).
//
// Call it from plain code or from inside an active parallel region, never
// from inside an inactive one (`#pragma omp parallel if (false)`): libgomp
// makes a team nested in such a region anew on every call. That was eager's
// stall: a matmul whose batch folded into one GEMM ran it inside its batch
// loop's inactive region, OpenBLAS opened its own region there, and each of
// vit's small training GEMMs took 2-3 ms (the step 16-24 ms on two threads
// against 1.9 ms on one).
//
// The caller declares cblas_sgemm (cblas.h in the engine, the prelude's
// own declaration in generated code) before including this header. Order
// and transpose flags are CBLAS's numbers: 101 row-major, 111 no
// transpose, 112 transpose.
#pragma once
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CPU_GEMM_PAR_WORK 262144.0 // M*N*K below which one thread does it all
#define CPU_GEMM_ROWS_MIN 32       // rows per thread for row blocks
#define CPU_GEMM_COLS_MIN 16       // columns per thread for column blocks

typedef struct cpu_gemm_split {
    int rows, cols; // blocks along M and N; one of them is 1
} cpu_gemm_split;

// The blocks a (M, N, K) GEMM is cut into for nt threads.
static inline cpu_gemm_split cpu_gemm_split_plan(int64_t M, int64_t N, int64_t K, int nt) {
    cpu_gemm_split s = {1, 1};
    if (nt <= 1 || (double)M * (double)N * (double)K < CPU_GEMM_PAR_WORK)
        return s;
    if (M >= CPU_GEMM_ROWS_MIN * (int64_t)nt) {
        s.rows = nt;
        return s;
    }
    if (N >= CPU_GEMM_COLS_MIN * (int64_t)nt) {
        s.cols = nt;
        return s;
    }
    // neither side long enough for every thread (the work is in K): short
    // blocks along the longer side, never one call that OpenBLAS would
    // thread on its own
    if (M >= N)
        s.rows = (int)(M < nt ? M : nt);
    else
        s.cols = (int)(N < nt ? N : nt);
    return s;
}

// Matrix-vector products: a GEMM of at most CPU_GEMV_ROWS rows of A
// (contiguous rows, ta 111) reads each element of B once, straight from
// memory, with no packing. OpenBLAS's sgemm packs all of B first, and at
// M = 1 that dominates: a (1 x 256) @ (256 x 688) took 40 us through it and
// 5 us here, (1 x 256) @ (256 x 8192) 260 us and 45 us on two threads (AMD
// EPYC, AVX-512), as fast as OpenBLAS's own sgemv, which an eager framework
// reaches through MKL's or newer OpenBLAS's GEMM at M = 1. Decode is all
// such products. Plain C on GCC vector types, which the compiler maps to
// the target's widest registers (best of 200 warm calls, the figures above).
#define CPU_GEMV_ROWS     4       // M at most this: the matrix-vector kernels
#define CPU_GEMV_PAR_WORK 32768.0 // M*N*K from which the columns split over threads
#define CPU_GEMV_AHEAD    8       // rows ahead that the matrix-vector kernel prefetches

// The generated C defines CPU_GEMV_EXTERN: its cpu_gemv is the engine's,
// through the pointer tc_gemv that the loader sets (program.c), so both
// modes run the same machine code (the same sums, bit for bit), and no
// program compiles the kernels again: their bodies in every part of a
// program had tripled its compile time (llama's decode step, 0.4 s to
// 1.25 s).
typedef void (*cpu_gemv_fn)(int tb, int64_t M, int64_t n0, int64_t n1, int64_t K, const float *a,
                            int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                            int64_t ldc);
#ifdef CPU_GEMV_EXTERN
extern cpu_gemv_fn tc_gemv;
#define cpu_gemv tc_gemv
#else
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

// Columns [n0, n1) of c (M, N) = a (M, K) @ B + beta c on the calling
// thread, M at most CPU_GEMV_ROWS, B = w^T (tb 112) or b (tb 111). One
// copy a translation unit, never inlined.
__attribute__((noinline, unused)) static void cpu_gemv(int tb, int64_t M, int64_t n0, int64_t n1,
                                                       int64_t K, const float *a, int64_t lda,
                                                       const float *b, int64_t ldb, float beta,
                                                       float *c, int64_t ldc) {
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

// The same, callable from outside (cpu_gemm.c): what a compiled program's
// tc_gemv is set to.
void cpu_gemv_entry(int tb, int64_t M, int64_t n0, int64_t n1, int64_t K, const float *a,
                    int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc);
#endif

// Whether a GEMM takes the matrix-vector kernels.
static int cpu_gemv_off = -1; // TCBENCH_DISABLE_GEMV, read once per unit

static inline int cpu_gemv_fits(int ta, int64_t M) {
    if (cpu_gemv_off < 0) { // the same value from any thread that races here
        const char *e = getenv("TCBENCH_DISABLE_GEMV");
        cpu_gemv_off = e && *e && strcmp(e, "0") != 0;
    }
    return !cpu_gemv_off && ta == 111 && M >= 1 && M <= CPU_GEMV_ROWS;
}

// One GEMM on the calling thread: the matrix-vector kernels when A is a
// few contiguous rows, else cblas_sgemm.
static inline void cpu_sgemm_one(int ta, int tb, int64_t M, int64_t N, int64_t K, const float *a,
                                 int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                                 int64_t ldc) {
    if (cpu_gemv_fits(ta, M))
        cpu_gemv(tb, M, 0, N, K, a, lda, b, ldb, beta, c, ldc);
    else
        cblas_sgemm(101, ta, tb, (int)M, (int)N, (int)K, 1.0f, a, (int)lda, b, (int)ldb, beta, c,
                    (int)ldc);
}

// c (M, N) = a (M, K) @ b (K, N) + beta * c, operands as cblas_sgemm takes
// them (ta, tb: 111 or 112), over the calling team's threads. Inside a
// parallel region it is one single-threaded GEMM. A GEMM of one part (too
// little work for threads, or one thread; inside an active region too) is
// a plain call, without a region of its own: an inactive one costs libgomp
// more than a batched matmul's tiny matrices take (ConvBERT's 256
// (16 x 9) @ (9 x 1) products, 0.87x of eager with it).
static inline void cpu_sgemm_par(int ta, int tb, int64_t M, int64_t N, int64_t K, const float *a,
                                 int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                                 int64_t ldc) {
    int nt = omp_in_parallel() ? 1 : omp_get_max_threads();
    if (cpu_gemv_fits(ta, M)) {
        // a few rows: column blocks of whole vectors over the threads
        int64_t v = N / 16;
        if (nt < 2 || (double)M * (double)N * (double)K < CPU_GEMV_PAR_WORK || v < 2 * nt) {
            cpu_gemv(tb, M, 0, N, K, a, lda, b, ldb, beta, c, ldc);
            return;
        }
#pragma omp parallel for schedule(static)
        for (int t = 0; t < nt; t++)
            cpu_gemv(tb, M, 16 * (v * t / nt), t == nt - 1 ? N : 16 * (v * (t + 1) / nt), K, a, lda,
                     b, ldb, beta, c, ldc);
        return;
    }
    cpu_gemm_split s = {1, 1};
    if (nt > 1)
        s = cpu_gemm_split_plan(M, N, K, nt);
    int parts = s.rows * s.cols;
    if (parts == 1) {
        cblas_sgemm(101, ta, tb, (int)M, (int)N, (int)K, 1.0f, a, (int)lda, b, (int)ldb, beta, c,
                    (int)ldc);
        return;
    }
#pragma omp parallel for schedule(static)
    for (int t = 0; t < parts; t++) {
        int64_t i = t / s.cols, j = t % s.cols;
        int64_t m0 = M * i / s.rows, m1 = M * (i + 1) / s.rows;
        int64_t n0 = N * j / s.cols, n1 = N * (j + 1) / s.cols;
        cblas_sgemm(101, ta, tb, (int)(m1 - m0), (int)(n1 - n0), (int)K, 1.0f,
                    a + (ta == 112 ? m0 : m0 * lda), (int)lda, b + (tb == 112 ? n0 * ldb : n0),
                    (int)ldb, beta, c + m0 * ldc + n0, (int)ldc);
    }
}
