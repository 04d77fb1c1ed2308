// bench_util: what the kernel micro-benchmarks share: random bf16 tensors,
// and the median time of a kernel with oneDNN's bf16 path on or off.
#pragma once
#include "backend/cpu/cpu_kernels.h"
#include "base/clock.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

static inline int bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// A kernel context with oneDNN; a failure ends the program.
static inline void bench_ctx(cpu_ctx *c, const char *name) {
    char err[256];
    if (cpu_dnnl_new(&c->dnnl, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", name, err);
        exit(1);
    }
}

// Uniform in [-0.5, 0.5), rounded to bf16.
static inline tensor *bench_random_bf16(int nd, const int64_t *shape) {
    tensor *t = tensor_new_empty(DT_BF16, nd, shape);
    if (!t)
        return NULL;
    uint16_t *h = tensor_data(t);
    for (int64_t i = 0; i < tensor_numel(t); i++)
        h[i] = dtype_f32_to_bf16((float)rand() / (float)RAND_MAX - 0.5f);
    return t;
}

// The median seconds of runs calls of kernel(ctx) after two warm-ups (the
// primitive, the pages); widen selects d's widening path
// (cpu_dnnl_set_bf16). A failing kernel ends the program.
static inline double bench_median(cpu_dnnl *d, int runs, bool widen, int (*kernel)(void *),
                                  void *ctx, const char *name) {
    cpu_dnnl_set_bf16(d, !widen);
    double *t = malloc((size_t)runs * sizeof *t);
    if (!t) {
        fprintf(stderr, "%s: out of memory\n", name);
        exit(1);
    }
    for (int r = -2; r < runs; r++) {
        double t0 = base_now();
        if (kernel(ctx) < 0) {
            fprintf(stderr, "%s: the kernel failed\n", name);
            exit(1);
        }
        if (r >= 0)
            t[r] = base_now() - t0;
    }
    qsort(t, (size_t)runs, sizeof t[0], bench_cmp_double);
    double m = runs % 2 ? t[runs / 2] : (t[runs / 2 - 1] + t[runs / 2]) / 2;
    free(t);
    return m;
}

// The two timings of one kernel and their ratio, flop per call; used says
// whether oneDNN's bf16 path ran (else the "fast" row is the widening path).
static inline void bench_print(const char *fast, const char *wide, bool used, double t_fast,
                               double t_wide, double flop) {
    char label[96];
    snprintf(label, sizeof label, "%s%s", fast, used ? "" : " (declined!)");
    printf("  %-34s %8.3f ms  %7.1f GFLOP/s\n", label, 1e3 * t_fast, flop / t_fast * 1e-9);
    printf("  %-34s %8.3f ms  %7.1f GFLOP/s\n", wide, 1e3 * t_wide, flop / t_wide * 1e-9);
    printf("  speedup %.2fx\n", t_wide / t_fast);
}
