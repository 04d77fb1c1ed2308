// gemm_bf16: eager's bf16 linear, (512, 1024) @ (1024, 1024)^T + bias into
// bf16, by oneDNN's bf16 matmul and by the widening path (bf16 operands to
// f32 scratch, cblas_sgemm, the result rounded; TCBENCH_DISABLE_DNNL_BF16=1),
// timed side by side: the median of 20 runs each after a warm-up, in
// GFLOP/s. The numbers in docs/amp.md come from it.
//
//   ninja -C build && ./build/bench/gemm_bf16     # OMP_NUM_THREADS as usual
#include "backend/cpu/cpu_kernels.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { M = 512, K = 1024, N = 1024, RUNS = 20 };

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static tensor *random_bf16(int nd, const int64_t *shape) {
    tensor *t = tensor_new_empty(DT_BF16, nd, shape);
    if (!t)
        return NULL;
    uint16_t *h = tensor_data(t);
    for (int64_t i = 0; i < tensor_numel(t); i++)
        h[i] = dtype_f32_to_bf16((float)rand() / (float)RAND_MAX - 0.5f);
    return t;
}

// the median seconds of one linear; disable selects the widening path
static double time_linear(cpu_ctx *c, bool disable, const tensor *x, const tensor *w,
                          const tensor *b, tensor *y) {
    if (disable)
        setenv("TCBENCH_DISABLE_DNNL_BF16", "1", 1);
    else
        unsetenv("TCBENCH_DISABLE_DNNL_BF16");
    double t[RUNS];
    for (int r = -2; r < RUNS; r++) { // two warm-ups: the primitive, the pages
        double t0 = now();
        if (cpu_linear(c, x, w, b, y) < 0) {
            fprintf(stderr, "gemm_bf16: linear failed: %s\n", c->err);
            exit(1);
        }
        if (r >= 0)
            t[r] = now() - t0;
    }
    qsort(t, RUNS, sizeof t[0], cmp_double);
    return (t[RUNS / 2 - 1] + t[RUNS / 2]) / 2;
}

int main(void) {
    cpu_ctx c = {0};
    char err[256];
    if (cpu_dnnl_new(&c.dnnl, err, sizeof err) < 0) {
        fprintf(stderr, "gemm_bf16: %s\n", err);
        return 1;
    }
    tensor *x = random_bf16(2, (int64_t[]){M, K}), *w = random_bf16(2, (int64_t[]){N, K});
    tensor *b = random_bf16(1, (int64_t[]){N}),
           *y = tensor_new_empty(DT_BF16, 2, (int64_t[]){M, N});
    if (!x || !w || !b || !y) {
        fprintf(stderr, "gemm_bf16: out of memory\n");
        return 1;
    }
    double flop = 2.0 * M * N * K;
    int64_t g0 = c.dnnl_gemms;
    double t_dnnl = time_linear(&c, false, x, w, b, y);
    bool used = c.dnnl_gemms > g0;
    double t_wide = time_linear(&c, true, x, w, b, y);
    printf("bf16 linear (%d x %d) @ (%d x %d)^T + bias -> bf16, %d threads, median of %d\n", M, K,
           N, K, omp_get_max_threads(), RUNS);
    printf("  %-34s %8.3f ms  %7.1f GFLOP/s\n",
           used ? "oneDNN bf16 matmul" : "oneDNN bf16 matmul (declined!)", 1e3 * t_dnnl,
           flop / t_dnnl * 1e-9);
    printf("  %-34s %8.3f ms  %7.1f GFLOP/s\n", "widen to f32 + cblas_sgemm", 1e3 * t_wide,
           flop / t_wide * 1e-9);
    printf("  speedup %.2fx\n", t_wide / t_dnnl);
    tensor_free(x);
    tensor_free(w);
    tensor_free(b);
    tensor_free(y);
    cpu_dnnl_free(c.dnnl);
    return used ? 0 : 2;
}
