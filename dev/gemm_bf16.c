// gemm_bf16: eager's bf16 linear, (512, 1024) @ (1024, 1024)^T + bias into
// bf16, by oneDNN's bf16 matmul and by the widening path (bf16 operands to
// f32 scratch, cblas_sgemm, the result rounded; cpu_dnnl_set_bf16(false)),
// timed side by side: the median of 20 runs each after a warm-up, in
// GFLOP/s. The numbers in docs/amp.md come from it.
//
//   ninja -C build && ./build/dev/gemm_bf16     # OMP_NUM_THREADS as usual
#include "bench_util.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { M = 512, K = 1024, N = 1024, RUNS = 20 };

// one linear, its failure said on stderr
typedef struct linear_job {
    cpu_ctx *c;
    const tensor *x, *w, *b;
    tensor *y;
} linear_job;

static int run_linear(void *ctx) {
    linear_job *j = ctx;
    int rc = cpu_linear(j->c, j->x, j->w, j->b, j->y);
    if (rc < 0)
        fprintf(stderr, "gemm_bf16: linear: %s\n", j->c->err);
    return rc;
}

int main(void) {
    cpu_ctx c = {0};
    bench_ctx(&c, "gemm_bf16");
    tensor *x = bench_random_bf16(2, (int64_t[]){M, K}), *w = bench_random_bf16(2, (int64_t[]){N, K});
    tensor *b = bench_random_bf16(1, (int64_t[]){N}),
           *y = tensor_new_empty(DT_BF16, 2, (int64_t[]){M, N});
    if (!x || !w || !b || !y) {
        fprintf(stderr, "gemm_bf16: out of memory\n");
        return 1;
    }
    double flop = 2.0 * M * N * K;
    int64_t g0 = c.dnnl_gemms;
    linear_job job = {&c, x, w, b, y};
    double t_dnnl = bench_median(c.dnnl, RUNS, false, run_linear, &job, "gemm_bf16");
    bool used = c.dnnl_gemms > g0;
    double t_wide = bench_median(c.dnnl, RUNS, true, run_linear, &job, "gemm_bf16");
    printf("bf16 linear (%d x %d) @ (%d x %d)^T + bias -> bf16, %d threads, median of %d\n", M, K,
           N, K, omp_get_max_threads(), RUNS);
    bench_print("oneDNN bf16 matmul", "widen to f32 + cblas_sgemm", used, t_dnnl, t_wide, flop);
    tensor_free(x);
    tensor_free(w);
    tensor_free(b);
    tensor_free(y);
    cpu_dnnl_free(c.dnnl);
    return used ? 0 : 2;
}
