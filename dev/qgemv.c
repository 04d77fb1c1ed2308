// qgemv: decode-shaped linears, y (M, N) = x (M, K) @ W (N, K)^T, M = 1, with f32
// weights (cpu_sgemm_par, which at M = 1 is cpu_gemv: what fp32 compiled runs) and
// with int8 and int4 weights (cpu_qgemm, the fused kernel QLINEAR runs),
// timed side by side: the median of 50 runs after a warm-up, with the
// weight bytes each moves and the ratio to f32. K = N = 2048 and
// K = 2048, N = 5632 (llama-style hidden and feed-forward widths). Decode
// is bound by memory where the weight is not in cache: int4 reads an eighth
// of f32's bytes (plus scales). The last int4 line is int4 without the SIMD
// kernels, AVX-512 or AVX2 (TCBENCH_DISABLE_QGEMV_SIMD=1).
// Then M = 128 (a prefill), where the fused kernel's tile form runs.
// Arguments NxK replace the shapes with M = 1 products of those (the
// generate suite's llama at --size cpu: 256x256 64x256 688x256 256x688
// 8192x256).
//
//   ninja -C build && OMP_NUM_THREADS=2 ./build/dev/qgemv [NxK ...]
#include "backend/cpu/cpu_quant.h"
#include "base/clock.h"

#include <cblas.h>
#include <omp.h>

#include "backend/cpu/cpu_gemm_par.h"
#include <stdio.h>
#include <stdlib.h>

enum { RUNS = 50, GROUP = 32 };

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct job {
    int64_t M, N, K;
    const float *x, *w;
    const void *q[2], *s[2]; // int8, int4
    float *y;
} job;

// The median seconds of RUNS calls (after two warm-ups); bits 0 is f32.
static double median(const job *j, int bits) {
    double t[RUNS];
    for (int r = -2; r < RUNS; r++) {
        double t0 = base_now();
        if (bits == 0)
            cpu_sgemm_par(CblasNoTrans, CblasTrans, j->M, j->N, j->K, j->x, j->K, j->w, j->K, 0.0f,
                          j->y, j->N);
        else if (cpu_qgemm(bits, GROUP, j->M, j->N, j->K, j->x, j->q[bits == 4], DT_F32,
                           j->s[bits == 4], NULL, j->y) < 0) {
            fprintf(stderr, "qgemv: cpu_qgemm: out of memory\n");
            exit(1);
        }
        if (r >= 0)
            t[r] = base_now() - t0;
    }
    qsort(t, RUNS, sizeof t[0], cmp);
    return (t[RUNS / 2 - 1] + t[RUNS / 2]) / 2;
}

int main(int argc, char **argv) {
    int64_t shapes[16][3] = {{1, 2048, 2048}, {1, 5632, 2048}, {128, 2048, 2048}}; // M, N, K
    int nshapes = 3;
    if (argc > 1)
        nshapes = 0;
    for (int a = 1; a < argc && nshapes < 16; a++) {
        long long n, k;
        if (sscanf(argv[a], "%lldx%lld", &n, &k) != 2 || n < 1 || k < 1) {
            fprintf(stderr, "qgemv: %s: want NxK, as 688x256\n", argv[a]);
            return 2;
        }
        shapes[nshapes][0] = 1, shapes[nshapes][1] = n, shapes[nshapes][2] = k;
        nshapes++;
    }
    printf("quantized linears, group %d, f32 scales, %d threads, median of %d\n", GROUP,
           omp_get_max_threads(), RUNS);
    printf("%-20s %-6s %10s %12s %10s\n", "M x N x K", "weight", "median us", "weight MB",
           "vs f32");
    for (int si = 0; si < nshapes; si++) {
        int64_t M = shapes[si][0], N = shapes[si][1], K = shapes[si][2];
        job j = {.M = M, .N = N, .K = K};
        float *w = malloc((size_t)(N * K) * sizeof *w), *x = malloc((size_t)(M * K) * sizeof *x);
        j.y = malloc((size_t)(M * N) * sizeof *j.y);
        int64_t G = (K + GROUP - 1) / GROUP;
        void *q8 = malloc((size_t)(N * K)), *q4 = malloc((size_t)(N * K) / 2 + (size_t)N);
        float *s8 = malloc((size_t)(N * G) * sizeof *s8);
        float *s4 = malloc((size_t)(N * G) * sizeof *s4);
        if (!w || !x || !j.y || !q8 || !q4 || !s8 || !s4) {
            fprintf(stderr, "qgemv: out of memory\n");
            return 1;
        }
        for (int64_t i = 0; i < N * K; i++)
            w[i] = (float)rand() / (float)RAND_MAX - 0.5f;
        for (int64_t i = 0; i < M * K; i++)
            x[i] = (float)rand() / (float)RAND_MAX - 0.5f;
        cpu_quant_quantize(8, GROUP, N, K, w, q8, DT_F32, s8);
        cpu_quant_quantize(4, GROUP, N, K, w, q4, DT_F32, s4);
        j.x = x, j.w = w, j.q[0] = q8, j.q[1] = q4, j.s[0] = s8, j.s[1] = s4;
        double f32 = median(&j, 0);
        const int bits[] = {0, 8, 4, 4};
        for (int b = 0; b < 4; b++) {
            if (b == 3) // int4 again without its SIMD kernels (cpu_quant.c)
                setenv("TCBENCH_DISABLE_QGEMV_SIMD", "1", 1);
            cpu_quant_env_reload();
            double t = b == 0 ? f32 : median(&j, bits[b]);
            unsetenv("TCBENCH_DISABLE_QGEMV_SIMD");
            cpu_quant_env_reload();
            double bytes = (double)N * K * (bits[b] == 0 ? 4 : bits[b] / 8.0) +
                           (bits[b] ? (double)N * G * 4 : 0);
            printf("%3lld x %5lld x %-6lld %-6s %10.1f %12.2f %9.2fx\n", (long long)M, (long long)N,
                   (long long)K,
                   bits[b] == 0   ? "f32"
                   : bits[b] == 8 ? "int8"
                                  : "int4",
                   t * 1e6, bytes / 1e6, f32 / t);
        }
        free(w), free(x), free(j.y), free(q8), free(q4), free(s8), free(s4);
    }
    return 0;
}
