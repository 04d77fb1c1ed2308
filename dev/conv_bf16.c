// conv_bf16: eager's bf16 convolution, a resnet stage's 3x3 layer (N=8,
// 64 -> 64 channels, 56x56, padding 1) with bias into bf16, by oneDNN's
// bf16 convolution and by the widening path (bf16 operands to f32 scratch,
// the f32 primitive, the result rounded; cpu_dnnl_set_bf16(false)),
// timed side by side: the median of 10 runs each after a warm-up, in
// GFLOP/s. The numbers in docs/amp.md come from it.
//
//   ninja -C build && ./build/dev/conv_bf16     # OMP_NUM_THREADS as usual
#include "bench_util.h"
#include "core/graph.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { N = 8, C = 64, O = 64, H = 56, W = 56, KH = 3, RUNS = 10 };

// one convolution, its failure said on stderr
typedef struct conv_job {
    cpu_ctx *c;
    const graph_node *n;
    const tensor *x, *w, *b;
    tensor *y;
} conv_job;

static int run_conv(void *ctx) {
    conv_job *j = ctx;
    int rc = cpu_conv2d(j->c, j->n, j->x, j->w, j->b, j->y);
    if (rc < 0)
        fprintf(stderr, "conv_bf16: conv2d: %s\n", j->c->err);
    return rc;
}

int main(void) {
    cpu_ctx c = {0};
    bench_ctx(&c, "conv_bf16");
    graph_node n = {.op = OP_CONV2D, .ia = {1, 1, 1, 1, 1, 1, 1}}; // stride 1, padding 1
    tensor *x = bench_random_bf16(4, (int64_t[]){N, C, H, W}),
           *w = bench_random_bf16(4, (int64_t[]){O, C, KH, KH}), *b = bench_random_bf16(1, (int64_t[]){O}),
           *y = tensor_new_empty(DT_BF16, 4, (int64_t[]){N, O, H, W});
    if (!x || !w || !b || !y) {
        fprintf(stderr, "conv_bf16: out of memory\n");
        return 1;
    }
    double flop = 2.0 * N * O * H * W * C * KH * KH;
    int64_t v0 = c.dnnl_bf16_convs;
    conv_job job = {&c, &n, x, w, b, y};
    double t_dnnl = bench_median(c.dnnl, RUNS, false, run_conv, &job, "conv_bf16");
    bool used = c.dnnl_bf16_convs > v0;
    double t_wide = bench_median(c.dnnl, RUNS, true, run_conv, &job, "conv_bf16");
    printf("bf16 conv2d (%d, %d, %d, %d) * (%d, %d, %d, %d), padding 1, + bias -> bf16, "
           "%d threads, median of %d\n",
           N, C, H, W, O, C, KH, KH, omp_get_max_threads(), RUNS);
    bench_print("oneDNN bf16 convolution", "widen to f32 + f32 convolution", used, t_dnnl, t_wide,
                flop);
    tensor_free(x);
    tensor_free(w);
    tensor_free(b);
    tensor_free(y);
    cpu_dnnl_free(c.dnnl);
    return used ? 0 : 2;
}
