// attention: the fused ATTENTION op against the unfused chain (repeat_kv,
// matmul with k^T, scale, causal where, softmax, matmul with v: what
// nn_attention.c builds), each as a compiled program (compile_model; the
// chain with TCBENCH_DISABLE_FUSED_ATTENTION=1 so that the pattern pass
// leaves it), llama-like sizes: batch 1, 8 heads, 2 kv heads. Prefill:
// T = S = 1024, causal. Decode: T = 1 over S = 128 .. 4096. Medians of 15
// steps after two warm-ups; the docs quote it.
//
//   ninja -C build && OMP_NUM_THREADS=2 ./build/dev/attention [head_dim]
#include "base/clock.h"
#include "compile/compile.h"

#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

enum { B = 1, H = 8, KVH = 2, RUNS = 15 };

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// (B, KVH, S, D) -> (B, H, S, D) as repeat_kv
static int repeat(graph *g, int t, int64_t S, int64_t D) {
    int r = graph_reshape(g, t, 5, (int64_t[]){B, KVH, 1, S, D});
    r = graph_op_shaped(g, OP_EXPAND, 1, &r, NULL, NULL, 5, (int64_t[]){B, KVH, H / KVH, S, D});
    return graph_reshape(g, r, 4, (int64_t[]){B, H, S, D});
}

static model *build(int64_t T, int64_t S, int64_t D, bool fused) {
    graph *g = graph_new();
    int q = graph_input(g, "q", DT_F32, 4, (int64_t[]){B, H, T, D});
    int k = graph_input(g, "k", DT_F32, 4, (int64_t[]){B, KVH, S, D});
    int v = graph_input(g, "v", DT_F32, 4, (int64_t[]){B, KVH, S, D});
    double sc = 1 / sqrt((double)D);
    int y;
    if (fused) {
        y = graph_op(g, OP_ATTENTION, 3, (int[]){q, k, v}, (int64_t[GRAPH_MAX_IA]){1},
                     (double[GRAPH_MAX_FA]){sc});
    } else {
        int kt = graph_permute(g, repeat(g, k, S, D), (int[]){0, 1, 3, 2});
        int s = graph_scale(g, graph_binary(g, OP_MATMUL, q, kt), sc, 0);
        int mask = graph_buffer(g, "mask", DT_BOOL, 2, (int64_t[]){T, S}, INIT_CAUSAL_MASK, 0);
        int low = graph_full(g, -FLT_MAX, DT_F32, 0, NULL);
        s = graph_op(g, OP_WHERE, 3, (int[]){mask, s, low}, NULL, NULL);
        y = graph_binary(g, OP_MATMUL, graph_unary(g, OP_SOFTMAX, s), repeat(g, v, S, D));
    }
    if (y < 0) {
        fprintf(stderr, "attention: %s\n", graph_error(g));
        exit(1);
    }
    graph_output(g, y);
    model *m = model_new(g, fused ? "fused" : "chain", "dev", B);
    if (!m || model_init_values(m, 1) < 0) {
        fprintf(stderr, "attention: out of memory\n");
        exit(1);
    }
    return m;
}

// The median seconds of one compiled step of the graph.
static double time_step(int64_t T, int64_t S, int64_t D, bool fused) {
    model *m = build(T, S, D, fused);
    setenv("TCBENCH_DISABLE_FUSED_ATTENTION", "1", 1);
    compile_opts o = compile_opts_default();
    compiled *c;
    char err[600];
    if (compile_model(m, &o, &c, err, sizeof err) < 0) {
        fprintf(stderr, "attention: compile_model: %s\n", err);
        exit(1);
    }
    double t[RUNS];
    for (int r = -2; r < RUNS; r++) {
        tensor *out[1];
        compiled_stats st;
        double t0 = base_now();
        if (compiled_run(c, out, &st) < 0) {
            fprintf(stderr, "attention: compiled_run: %s\n", compiled_error(c));
            exit(1);
        }
        if (r >= 0)
            t[r] = base_now() - t0;
        tensor_free(out[0]);
    }
    compiled_free(c);
    model_free(m);
    qsort(t, RUNS, sizeof t[0], cmp_double);
    return t[RUNS / 2];
}

static void row(const char *what, int64_t T, int64_t S, int64_t D) {
    double tf = time_step(T, S, D, true), tc = time_step(T, S, D, false);
    printf("  %-8s T %5lld S %5lld   fused %9.3f ms   chain %9.3f ms   %5.2fx\n", what,
           (long long)T, (long long)S, 1e3 * tf, 1e3 * tc, tc / tf);
}

int main(int argc, char **argv) {
    int64_t D = argc > 1 ? atoll(argv[1]) : 64;
    printf("attention, compiled, batch %d, heads %d, kv heads %d, head dim %lld, causal, %d "
           "threads, median of %d\n",
           B, H, KVH, (long long)D, omp_get_max_threads(), RUNS);
    row("prefill", 1024, 1024, D);
    for (int64_t S = 128; S <= 4096; S *= 2)
        row("decode", 1, S, D);
    return 0;
}
