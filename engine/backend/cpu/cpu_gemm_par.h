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

// Columns [n0, n1) of c (M, N) = a (M, K) @ B + beta c on the calling
// thread, M at most CPU_GEMV_ROWS, B = w^T (tb 112) or b (tb 111)
// (cpu_gemm.c). The generated C defines CPU_GEMV_EXTERN: its cpu_gemv is
// the engine's, through the pointer tc_gemv that the loader sets
// (program.c), so both modes run the same machine code (the same sums,
// bit for bit), and no program compiles the kernels: compiled into every
// part of a program they had tripled its compile time (llama's decode
// step, 0.4 s to 1.25 s).
typedef void (*cpu_gemv_fn)(int tb, int64_t M, int64_t n0, int64_t n1, int64_t K, const float *a,
                            int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                            int64_t ldc);
#ifdef CPU_GEMV_EXTERN
extern cpu_gemv_fn tc_gemv;
#define cpu_gemv tc_gemv
#else
void cpu_gemv(int tb, int64_t M, int64_t n0, int64_t n1, int64_t K, const float *a, int64_t lda,
              const float *b, int64_t ldb, float beta, float *c, int64_t ldc);
#endif

// The first column of part t of parts column blocks of N (whole vectors of
// 16; t == parts: N), as the matrix-vector kernels are split over threads.
static inline int64_t cpu_gemv_col(int64_t N, int64_t t, int64_t parts) {
    return t >= parts ? N : 16 * (N / 16 * t / parts);
}

// Whether a GEMM takes the matrix-vector kernels.
static int cpu_gemv_off = -1; // TCBENCH_DISABLE_GEMV, read once per unit

static inline int cpu_gemv_fits(int ta, int64_t M) {
    if (cpu_gemv_off < 0) { // the same value from any thread that races here
        const char *e = getenv("TCBENCH_DISABLE_GEMV");
        cpu_gemv_off = e && *e && strcmp(e, "0") != 0;
    }
    return !cpu_gemv_off && ta == 111 && M >= 1 && M <= CPU_GEMV_ROWS;
}

// Columns [j0, j1) of c (M, N) = a (M, K) @ B, B = w^T (tb 112) or b (tb
// 111), A plain rows: one thread's part of a GEMM of few rows as
// cpu_sgemm_par splits it (cpu_gemv_col), on the calling thread.
static inline void cpu_sgemm_cols(int tb, int64_t M, int64_t j0, int64_t j1, int64_t K,
                                  const float *a, int64_t lda, const float *b, int64_t ldb,
                                  float *c, int64_t ldc) {
    if (j1 <= j0)
        return;
    if (cpu_gemv_fits(111, M)) {
        cpu_gemv(tb, M, j0, j1, K, a, lda, b, ldb, 0.0f, c, ldc);
        return;
    }
    cblas_sgemm(101, 111, tb, (int)M, (int)(j1 - j0), (int)K, 1.0f, a, (int)lda,
                tb == 112 ? b + j0 * ldb : b + j0, (int)ldb, 0.0f, c + j0, (int)ldc);
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
            cpu_gemv(tb, M, cpu_gemv_col(N, t, nt), cpu_gemv_col(N, t + 1, nt), K, a, lda, b, ldb,
                     beta, c, ldc);
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
