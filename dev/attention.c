// attention: the fused ATTENTION op against the unfused chain (repeat_kv,
// matmul with k^T, scale, causal where, softmax, matmul with v: what
// nn_attention.c builds), each as a compiled program (compile_model; the
// chain with TCBENCH_DISABLE_FUSED_ATTENTION=1 so that the pattern pass
// leaves it), llama-like sizes: batch 1, 8 heads, 2 kv heads. Prefill:
// T = S = 1024, causal. Decode: T = 1 over S = 128 .. 4096. Medians of 15
// steps after two warm-ups; the docs quote it. With "train": a training
// step of the chain alone (q, k, v trained by SGD against an MSE loss) at
// T = S = 512 and 1024, the pass fusing its forward into ATTENTION and its
// backward into ATTENTION_GRAD against the chain left unfused; the forward
// alone is timed beside it, so that the backward's share can be read off.
// With "bf16": q, k and v in bf16 and the chain as autocast runs it (bf16
// matmuls, the softmax in f32, its probabilities cast back), prefill at
// T = S = 128 .. 1024, then decode.
//
//   ninja -C build && OMP_NUM_THREADS=2 ./build/dev/attention [head_dim] [train [T0] | bf16 |
//   decode]
// (T0: the shortest T of "train", doubling to 1024)
#include "autodiff/autograd.h"
#include "base/clock.h"
#include "compile/compile.h"

#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { B = 1, H = 8, KVH = 2, RUNS = 15 };

static enum dtype DT = DT_F32; // q, k and v ("bf16": DT_BF16)

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

// train: q, k, v parameters, an MSE loss against a target and the step's
// backward and SGD updates (autograd.h)
static model *build(int64_t T, int64_t S, int64_t D, bool fused, bool train) {
    graph *g = graph_new();
    int q, k, v;
    if (train) {
        q = graph_param(g, "q", 4, (int64_t[]){B, H, T, D}, INIT_NORMAL, 1);
        k = graph_param(g, "k", 4, (int64_t[]){B, KVH, S, D}, INIT_NORMAL, 1);
        v = graph_param(g, "v", 4, (int64_t[]){B, KVH, S, D}, INIT_NORMAL, 1);
    } else {
        q = graph_input(g, "q", DT, 4, (int64_t[]){B, H, T, D});
        k = graph_input(g, "k", DT, 4, (int64_t[]){B, KVH, S, D});
        v = graph_input(g, "v", DT, 4, (int64_t[]){B, KVH, S, D});
    }
    double sc = 1 / sqrt((double)D);
    int y;
    if (fused) {
        y = graph_op(g, OP_ATTENTION, 3, (int[]){q, k, v}, (int64_t[GRAPH_MAX_IA]){1},
                     (double[GRAPH_MAX_FA]){sc});
    } else {
        int kt = graph_permute(g, repeat(g, k, S, D), (int[]){0, 1, 3, 2});
        int s = graph_scale(g, graph_binary(g, OP_MATMUL, q, kt), sc, 0);
        int mask = graph_buffer(g, "mask", DT_BOOL, 2, (int64_t[]){T, S}, INIT_CAUSAL_MASK, 0);
        int low = graph_full(g, DT == DT_F32 ? -FLT_MAX : -3.0e38, DT, 0, NULL);
        s = graph_op(g, OP_WHERE, 3, (int[]){mask, s, low}, NULL, NULL);
        if (DT != DT_F32) // autocast: the softmax in f32, its result cast back
            s = graph_cast(g, graph_unary(g, OP_SOFTMAX, graph_cast(g, s, DT_F32)), DT);
        else
            s = graph_unary(g, OP_SOFTMAX, s);
        y = graph_binary(g, OP_MATMUL, s, repeat(g, v, S, D));
    }
    if (y < 0) {
        fprintf(stderr, "attention: %s\n", graph_error(g));
        exit(1);
    }
    graph_output(g, y);
    char err[300];
    if (train) {
        int target = graph_input(g, "target", DT_F32, 4, (int64_t[]){B, H, T, D});
        g->loss = graph_op(g, OP_MSE_LOSS, 2, (int[]){y, target}, NULL, NULL);
        train_opts o = train_opts_sgd();
        if (g->loss < 0 || autograd_build(g, &o, false, err, sizeof err) < 0) {
            fprintf(stderr, "attention: training step: %s\n", g->loss < 0 ? graph_error(g) : err);
            exit(1);
        }
    }
    model *m = model_new(g, fused ? "fused" : "chain", "dev", B);
    if (!m || model_init_values(m, 1) < 0) {
        fprintf(stderr, "attention: out of memory\n");
        exit(1);
    }
    return m;
}

// The median seconds of one compiled step of the graph. A training step is
// always built as the chain: fused says whether the pass may fuse it.
static double time_step(int64_t T, int64_t S, int64_t D, bool fused, bool train, int runs) {
    model *m = build(T, S, D, fused && !train, train);
    setenv("TCBENCH_DISABLE_FUSED_ATTENTION", train && fused ? "0" : "1", 1);
    compile_opts o = compile_opts_default();
    compiled *c;
    char err[600];
    if (compile_model(m, &o, &c, err, sizeof err) < 0) {
        fprintf(stderr, "attention: compile_model: %s\n", err);
        exit(1);
    }
    double t[RUNS];
    for (int r = -2; r < runs; r++) {
        tensor *out[1];
        compiled_stats st;
        double t0 = base_now();
        if (compiled_run(c, out, &st) < 0) {
            fprintf(stderr, "attention: compiled_run: %s\n", compiled_error(c));
            exit(1);
        }
        if (r >= 0)
            t[r] = base_now() - t0;
        for (int i = 0; i < m->g->noutputs; i++)
            tensor_free(out[i]);
    }
    compiled_free(c);
    model_free(m);
    qsort(t, (size_t)runs, sizeof t[0], cmp_double);
    return t[runs / 2];
}

static void row(const char *what, int64_t T, int64_t S, int64_t D, bool train) {
    int runs = train ? 7 : RUNS;
    double tf = time_step(T, S, D, true, train, runs), tc = time_step(T, S, D, false, train, runs);
    printf("  %-8s T %5lld S %5lld   fused %9.3f ms   chain %9.3f ms   %5.2fx\n", what,
           (long long)T, (long long)S, 1e3 * tf, 1e3 * tc, tc / tf);
}

int main(int argc, char **argv) {
    int64_t D = argc > 1 ? atoll(argv[1]) : 64;
    bool train = argc > 2 && !strcmp(argv[2], "train");
    int64_t T0 = argc > 3 ? atoll(argv[3]) : 512; // train: the shortest length (doubling to 1024)
    bool sweep = argc > 2 && !strcmp(argv[2], "bf16");
    bool decode = argc > 2 && !strcmp(argv[2], "decode"); // the decode rows alone
    DT = sweep ? DT_BF16 : DT_F32;
    setenv("TCBENCH_ATTENTION_TRAIN_MIN_TS", "0", 1); // "fused" fuses at every length
    printf("attention, compiled, %s, batch %d, heads %d, kv heads %d, head dim %lld, causal, %d "
           "threads, median of %d\n",
           dtype_name(DT), B, H, KVH, (long long)D, omp_get_max_threads(), train ? 7 : RUNS);
    if (train) {
        for (int64_t T = T0 > 0 ? T0 : 512; T <= 1024; T *= 2) {
            row("forward", T, T, D, false);
            row("train", T, T, D, true);
        }
        return 0;
    }
    for (int64_t T = sweep ? 128 : 1024; !decode && T <= 1024; T *= 2)
        row("prefill", T, T, D, false);
    for (int64_t S = 128; S <= 4096; S *= 2)
        row("decode", 1, S, D, false);
    return 0;
}
