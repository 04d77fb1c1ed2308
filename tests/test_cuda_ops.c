// Every op's CUDA eager kernel against the fp64 reference (engine/ref/ref.h):
// seeded random inputs; f32 and f16 storage; odd sizes and sizes of a
// million elements; broadcasting; permuted, sliced and expanded views
// feeding kernels; every library path (cuBLAS strided-batched with
// broadcast, cuBLASLt bias epilogue, cuDNN convolution with groups,
// dilation, transposed with output padding, pooling with padding, cuDNN's
// backward convolutions). The training ops too: every backward op, batch
// norm updating its running statistics, the optimizers' in-place updates
// (their state read back after them), the grad scaler's check, skips and
// scale update. Each case also checks that a second step gives the same
// bits (unless the first moved the model's state), that kernels were
// counted and peak bytes reported; bad embedding indices and cross-entropy
// targets, in the forward and the backward, must come back as errors from
// the sync, not as a crash. A last test fails when an op in ops.def has no
// case. Then every smoke model: eager_cuda against the CPU eager executor,
// the compiled mode (cuda_program: NVRTC, arena, CUDA graph) and its two
// ablations against eager_cuda; and a training step of each (f32 SGD, and
// AMP with AdamW and the grad scaler for mlp and resnet), eager_cuda
// against the CPU eager: the loss, every gradient, the next step's loss.
//
// It needs a GPU: without a usable one (cuda_probe) it exits 77, which
// meson reports as skipped; scripts/gpu-check.sh runs it on one.
// TCBENCH_CUDA_OPS_ON_CPU=1 runs the f32 cases through the CPU eager
// executor instead, which checks the cases themselves on any machine.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff/autograd.h"
#include "backend/cuda/cuda_device.h"
#include "compile/cuda_program.h"
#include "eager/eager.h"
#include "eager/eager_cuda.h"
#include "core/graph.h"
#include "model/model.h"
#include "model/model_prepare.h"
#include "model/modeldef.h"
#include "ref/ref.h"
#include "model/suite.h"

static bool on_cpu; // TCBENCH_CUDA_OPS_ON_CPU: the CPU eager executor checks the cases

typedef int (*build_fn)(graph *g, enum dtype dt);

typedef struct op_case {
    const char *name;
    build_fn build;
    enum dtype dt;
    double rtol, atol; // 0: 1e-5 and 1e-6 for f32, 2e-3 and 2e-3 for f16
    bool gpu_only;     // f16 or an error case the CPU kernels do not share
} op_case;

// ---- graph helpers: inputs named pos get |N(0,1)| + 0.1, wide 4 N(0,1) ----------

static int in(graph *g, const char *name, enum dtype dt, int nd, const int64_t *shape) {
    return graph_input(g, name, dt, nd, shape);
}

static int in_int(graph *g, enum dtype dt, int nd, const int64_t *shape, int64_t lo, int64_t hi) {
    int id = graph_input(g, "idx", dt, nd, shape);
    if (id >= 0) {
        g->nodes[id].ia[0] = lo;
        g->nodes[id].ia[1] = hi;
        g->nodes[id].ia[2] = 1;
    }
    return id;
}

static int param(graph *g, int nd, const int64_t *shape) {
    return graph_param(g, "w", nd, shape, INIT_NORMAL, 1.0);
}

static int out(graph *g, int y) {
    if (y >= 0)
        graph_output(g, y);
    return y;
}

static int op1(graph *g, enum op o, int x, const int64_t *ia, const double *fa) {
    return graph_op(g, o, 1, &x, ia, fa);
}

#define S(...)  ((int64_t[]){__VA_ARGS__})
#define IA(...) ((int64_t[GRAPH_MAX_IA]){__VA_ARGS__})
#define FA(...) ((double[GRAPH_MAX_FA]){__VA_ARGS__})

// ---- builders -----------------------------------------------------------------------

static int b_sources(graph *g, enum dtype dt) {
    (void)dt;
    int x = in(g, "x", DT_F32, 2, S(7, 13));
    int p = graph_param(g, "p", 2, S(7, 13), INIT_UNIFORM, 0.5);
    int b = graph_buffer(g, "b", DT_F32, 2, S(7, 13), INIT_NORMAL, 2.0);
    int f = graph_full(g, 1.5, DT_F32, 2, S(7, 13));
    out(g, x);
    return out(
        g, graph_binary(g, OP_MUL, graph_binary(g, OP_ADD, p, b), graph_binary(g, OP_ADD, f, x)));
}

// every unary op, each on an input of the range it needs, in two graphs
// (a graph has at most 8 outputs)
static int unary_some(graph *g, enum dtype dt, int first, int last) {
    static const enum op ops[] = {OP_NEG,         OP_EXP,       OP_RECIP, OP_ABS,
                                  OP_TANH,        OP_SIGMOID,   OP_RELU,  OP_RELU6,
                                  OP_GELU,        OP_GELU_TANH, OP_SILU,  OP_HARDSWISH,
                                  OP_HARDSIGMOID, OP_LOG,       OP_SQRT,  OP_RSQRT};
    int x = in(g, "x", dt, 2, S(7, 13)), w = in(g, "wide", dt, 2, S(7, 13));
    int pos = in(g, "pos", dt, 2, S(7, 13)), y = -1;
    for (int i = first; i <= last; i++) {
        enum op o = ops[i];
        int src = o == OP_LOG || o == OP_SQRT || o == OP_RSQRT ? pos
                  : o == OP_EXP || o == OP_RECIP               ? x
                                                               : w;
        y = out(g, graph_unary(g, o, src));
    }
    return y;
}

static int b_unary_all(graph *g, enum dtype dt) { return unary_some(g, dt, 0, 7); }
static int b_unary_all2(graph *g, enum dtype dt) { return unary_some(g, dt, 8, 15); }

static int b_unary_big(graph *g, enum dtype dt) {
    int x = in(g, "wide", dt, 1, S((1 << 20) + 3));
    out(g, graph_unary(g, OP_GELU, x));
    return out(g, graph_scale(g, x, -1.5, 0.25));
}

static int b_unary_views(graph *g, enum dtype dt) {
    int x = in(g, "x", dt, 2, S(13, 7));
    out(g, graph_unary(g, OP_TANH, graph_permute(g, x, (int[]){1, 0})));
    out(g, graph_unary(g, OP_SIGMOID, graph_slice(g, x, 1, 2, 4)));
    int r = graph_slice(g, x, 0, 3, 1);
    return out(g, graph_unary(g, OP_SILU,
                              graph_op_shaped(g, OP_EXPAND, 1, &r, NULL, NULL, 3, S(5, 4, 7))));
}

static int b_cast(graph *g, enum dtype dt) {
    (void)dt;
    int x = in(g, "wide", DT_F32, 2, S(9, 11));
    out(g, graph_cast(g, x, DT_F16));
    out(g, graph_cast(g, graph_cast(g, x, DT_F16), DT_F32));
    out(g, graph_cast(g, x, DT_I32));
    out(g, graph_cast(g, x, DT_BOOL));
    int i = in_int(g, DT_I64, 2, S(9, 11), -1000, 1000);
    out(g, graph_cast(g, i, DT_F32));
    out(g, graph_cast(g, i, DT_I32));
    return out(g, graph_cast(g, in(g, "mask", DT_BOOL, 2, S(9, 11)), DT_F32));
}

static int b_dropout(graph *g, enum dtype dt) {
    int x = in(g, "x", dt, 3, S(4, 33, 65));
    return out(g, op1(g, OP_DROPOUT, x, IA(7), FA(0.3)));
}

static int b_binary(graph *g, enum dtype dt) {
    static const enum op ops[] = {OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_MAXIMUM};
    int a = in(g, "a", dt, 3, S(3, 7, 13)), b = in(g, "pos", dt, 1, S(13));
    int c = in(g, "c", dt, 2, S(7, 1));
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        out(g, graph_binary(g, ops[i], a, b)); // (3, 7, 13) with (13)
    out(g, graph_binary(g, OP_MUL, c, b));     // (7, 1) with (13): both broadcast
    int t = in(g, "t", dt, 2, S(13, 7));
    return out(g, graph_binary(g, OP_ADD, graph_permute(g, t, (int[]){1, 0}), c));
}

static int b_binary_big(graph *g, enum dtype dt) {
    int a = in(g, "a", dt, 2, S(1031, 1029)), b = in(g, "b", dt, 2, S(1031, 1029));
    return out(g, graph_binary(g, OP_ADD, a, b));
}

static int b_binary_int(graph *g, enum dtype dt) {
    (void)dt;
    int a = in_int(g, DT_I32, 2, S(5, 9), -50, 50), b = in_int(g, DT_I32, 1, S(9), -50, 50);
    int c = in_int(g, DT_I64, 2, S(5, 9), -50, 50), d = in_int(g, DT_I64, 2, S(5, 9), -50, 50);
    out(g, graph_binary(g, OP_ADD, a, b));
    out(g, graph_binary(g, OP_MUL, a, b));
    out(g, graph_binary(g, OP_SUB, c, d));
    return out(g, graph_binary(g, OP_MAXIMUM, c, d));
}

static int b_where(graph *g, enum dtype dt) {
    int m = in(g, "mask", DT_BOOL, 2, S(6, 10));
    int a = in(g, "a", dt, 2, S(6, 10)), b = in(g, "b", dt, 1, S(10));
    int causal = graph_buffer(g, "causal", DT_BOOL, 2, S(6, 10), INIT_CAUSAL_MASK, 0);
    out(g, graph_op(g, OP_WHERE, 3, (int[]){causal, a, b}, NULL, NULL));
    return out(g, graph_op(g, OP_WHERE, 3, (int[]){m, a, b}, NULL, NULL));
}

static int reduce_axes(graph *g, enum dtype dt, int ax0, int ax1) {
    int x = in(g, "x", dt, 3, S(5, 37, 300)), y = -1;
    for (int ax = ax0; ax <= ax1; ax++) {
        out(g, graph_reduce(g, OP_SUM, x, ax));
        out(g, graph_reduce(g, OP_MEAN, x, ax));
        y = out(g, graph_reduce(g, OP_MAX, x, ax));
    }
    return y;
}

static int b_reduce(graph *g, enum dtype dt) { return reduce_axes(g, dt, 0, 1); }

static int b_reduce_last(graph *g, enum dtype dt) {
    reduce_axes(g, dt, 2, 2);
    int x = in(g, "x2", dt, 3, S(5, 37, 300));
    int p = graph_permute(g, x, (int[]){1, 2, 0}); // a view: copied first
    return out(g, graph_reduce(g, OP_SUM, p, 2));
}

static int b_softmax(graph *g, enum dtype dt) {
    int x = in(g, "wide", dt, 3, S(3, 5, 1000)), y = in(g, "x", dt, 2, S(77, 5));
    out(g, op1(g, OP_SOFTMAX, x, NULL, NULL));
    out(g, op1(g, OP_LOG_SOFTMAX, x, NULL, NULL));
    out(g, op1(g, OP_SOFTMAX, y, NULL, NULL));
    return out(g, op1(g, OP_LOG_SOFTMAX, graph_permute(g, y, (int[]){1, 0}), NULL, NULL));
}

static int b_norms(graph *g, enum dtype dt) {
    int x = in(g, "x", dt, 3, S(4, 9, 96)), w = param(g, 1, S(96)), b = param(g, 1, S(96));
    if (dt == DT_F16) {
        w = graph_cast(g, w, DT_F16);
        b = graph_cast(g, b, DT_F16);
    }
    out(g, graph_op(g, OP_LAYER_NORM, 3, (int[]){x, w, b}, NULL, FA(1e-5)));
    out(g, graph_op(g, OP_RMS_NORM, 2, (int[]){x, w}, NULL, FA(1e-6)));
    int c = in(g, "x", dt, 4, S(2, 12, 5, 7));
    int cw = param(g, 1, S(12)), cb = param(g, 1, S(12)), cm = param(g, 1, S(12));
    int cv = graph_buffer(g, "var", DT_F32, 1, S(12), INIT_ONES, 0);
    if (dt == DT_F16) {
        cw = graph_cast(g, cw, DT_F16), cb = graph_cast(g, cb, DT_F16);
        cm = graph_cast(g, cm, DT_F16), cv = graph_cast(g, cv, DT_F16);
    }
    out(g, graph_op(g, OP_BATCH_NORM, 5, (int[]){c, cw, cb, cm, cv}, NULL, FA(1e-5)));
    return out(g, graph_op(g, OP_GROUP_NORM, 3, (int[]){c, cw, cb}, IA(3), FA(1e-5)));
}

static int b_matmul(graph *g, enum dtype dt) {
    int a = in(g, "a", dt, 3, S(3, 17, 33)), b = in(g, "b", dt, 3, S(3, 33, 19));
    int w = in(g, "w", dt, 2, S(33, 19));
    out(g, graph_op(g, OP_MATMUL, 2, (int[]){a, b}, NULL, NULL)); // batched
    out(g, graph_op(g, OP_MATMUL, 2, (int[]){a, w}, NULL, NULL)); // shared B: folded
    int bt = in(g, "bt", dt, 3, S(3, 19, 33));                    // B transposed
    out(g,
        graph_op(g, OP_MATMUL, 2, (int[]){a, graph_permute(g, bt, (int[]){0, 2, 1})}, NULL, NULL));
    int at = in(g, "at", dt, 2, S(33, 17)); // A transposed, B broadcast over 2 x 3 batches
    int a2 = graph_permute(g, at, (int[]){1, 0});
    int b4 = in(g, "b4", dt, 4, S(2, 1, 33, 19));
    int b4e = graph_op_shaped(g, OP_EXPAND, 1, &b4, NULL, NULL, 4, S(2, 3, 33, 19));
    out(g, graph_op(g, OP_MATMUL, 2, (int[]){a2, b4e}, NULL, NULL));
    int x4 = in(g, "x4", dt, 4, S(2, 3, 17, 33)); // batch dims with a gap: a loop of calls
    int xs = graph_slice(g, x4, 1, 1, 2);
    return out(g, graph_op(g, OP_MATMUL, 2, (int[]){xs, graph_slice(g, b4e, 1, 0, 2)}, NULL, NULL));
}

static int b_linear(graph *g, enum dtype dt) {
    int x = in(g, "x", dt, 3, S(2, 9, 40)), w = param(g, 2, S(24, 40)), b = param(g, 1, S(24));
    if (dt == DT_F16) {
        w = graph_cast(g, w, DT_F16);
        b = graph_cast(g, b, DT_F16);
    }
    out(g, graph_op(g, OP_LINEAR, 3, (int[]){x, w, b}, NULL, NULL));
    out(g, graph_op(g, OP_LINEAR, 2, (int[]){x, w}, NULL, NULL));
    int xp = graph_permute(g, in(g, "xp", dt, 3, S(9, 2, 40)), (int[]){1, 0, 2});
    out(g, graph_op(g, OP_LINEAR, 3, (int[]){xp, w, b}, NULL, NULL)); // rows not evenly strided
    int xs = graph_slice(g, in(g, "xs", dt, 2, S(11, 45)), 1, 3, 40); // rows wider than K
    return out(g, graph_op(g, OP_LINEAR, 3, (int[]){xs, w, b}, NULL, NULL));
}

static int b_conv(graph *g, enum dtype dt) {
    int x = in(g, "x", dt, 4, S(2, 6, 11, 13));
    int w1 = param(g, 4, S(8, 6, 3, 3)), b1 = param(g, 1, S(8));
    int w2 = param(g, 4, S(6, 2, 3, 3));                         // groups 3
    int wt = param(g, 4, S(6, 4, 3, 3)), bt = param(g, 1, S(8)); // transposed, groups 2: O = 8
    if (dt == DT_F16) {
        w1 = graph_cast(g, w1, DT_F16), b1 = graph_cast(g, b1, DT_F16);
        w2 = graph_cast(g, w2, DT_F16), wt = graph_cast(g, wt, DT_F16),
        bt = graph_cast(g, bt, DT_F16);
    }
    out(g, graph_op(g, OP_CONV2D, 3, (int[]){x, w1, b1}, IA(1, 1, 1, 1, 1, 1, 1), NULL));
    out(g, graph_op(g, OP_CONV2D, 2, (int[]){x, w2}, IA(2, 2, 2, 1, 2, 2, 3), NULL));
    int xp = graph_permute(g, in(g, "xp", dt, 4, S(2, 11, 13, 6)), (int[]){0, 3, 1, 2});
    out(g, graph_op(g, OP_CONV2D, 2, (int[]){xp, w1}, IA(1, 1, 0, 0, 1, 1, 1), NULL));
    return out(g, graph_op(g, OP_CONV_TRANSPOSE2D, 3, (int[]){x, wt, bt},
                           IA(2, 2, 1, 1, 1, 1, 2, 1, 0), NULL));
}

static int b_pool(graph *g, enum dtype dt) {
    int x = in(g, "x", dt, 4, S(2, 5, 12, 15));
    out(g, op1(g, OP_MAX_POOL2D, x, IA(2, 2, 1, 1, 3, 3), NULL));
    out(g, op1(g, OP_AVG_POOL2D, x, IA(2, 2, 1, 0, 3, 2), NULL));
    out(g, op1(g, OP_AVG_POOL2D, x, IA(1, 1, 0, 0, 12, 15), NULL)); // global
    return out(g,
               op1(g, OP_UPSAMPLE_NEAREST, graph_permute(g, x, (int[]){0, 1, 3, 2}), IA(2), NULL));
}

static int b_embedding(graph *g, enum dtype dt) {
    int t = graph_buffer(g, "table", dt, 2, S(50, 24), INIT_NORMAL, 1.0);
    out(g,
        graph_op(g, OP_EMBEDDING, 2, (int[]){t, in_int(g, DT_I32, 2, S(3, 7), 0, 50)}, NULL, NULL));
    return out(
        g, graph_op(g, OP_EMBEDDING, 2, (int[]){t, in_int(g, DT_I64, 1, S(9), 0, 50)}, NULL, NULL));
}

static int b_views(graph *g, enum dtype dt) {
    int x = in(g, "x", dt, 3, S(4, 5, 6));
    int p = graph_permute(g, x, (int[]){2, 0, 1});
    out(g, p);
    out(g, graph_slice(g, p, 2, 1, 3));
    out(g, graph_reshape(g, x, 2, S(20, 6)));
    out(g, graph_reshape(g, p, 2, S(24, 5))); // strides cannot say it: a copy
    out(g, graph_unary(g, OP_CONTIGUOUS, p));
    int r = graph_slice(g, graph_reshape(g, x, 2, S(20, 6)), 0, 2, 1);
    return out(g, graph_op_shaped(g, OP_EXPAND, 1, &r, NULL, NULL, 3, S(3, 5, 6)));
}

static int b_concat(graph *g, enum dtype dt) {
    int a = in(g, "a", dt, 2, S(4, 2)), c = in(g, "c", dt, 2, S(4, 3));
    int b = graph_permute(g, in(g, "b", dt, 2, S(1, 4)), (int[]){1, 0});
    out(g, graph_op(g, OP_CONCAT, 3, (int[]){a, b, c}, IA(1), NULL));
    return out(g, graph_op(g, OP_CONCAT, 2, (int[]){a, a}, IA(0), NULL));
}

static int b_losses(graph *g, enum dtype dt) {
    int x = in(g, "x", dt, 2, S(37, 300));
    out(g, graph_op(g, OP_CROSS_ENTROPY, 2, (int[]){x, in_int(g, DT_I32, 1, S(37), 0, 300)},
                    IA(-100), NULL));
    // targets drawn from [0, 4): those equal to the ignore index 3 are skipped
    int xs = in(g, "xs", dt, 2, S(16, 3));
    out(g, graph_op(g, OP_CROSS_ENTROPY, 2, (int[]){xs, in_int(g, DT_I64, 1, S(16), 0, 4)}, IA(3),
                    NULL));
    int a = in(g, "a", dt, 3, S(3, 40, 33)), b = in(g, "b", dt, 3, S(3, 40, 33));
    return out(g, graph_op(g, OP_MSE_LOSS, 2, (int[]){a, b}, NULL, NULL));
}

// ---- training: backward ops, updates, the grad scaler -------------------------------------

static int64_t conv_out_size(int64_t in, int64_t k, int64_t st, int64_t pad, int64_t dil) {
    return (in + 2 * pad - dil * (k - 1) - 1) / st + 1;
}

static int sum_to(graph *g, int x, int nd, const int64_t *shape) {
    return graph_op_shaped(g, OP_SUM_TO, 1, &x, NULL, NULL, nd, shape);
}

// a value of the graph read after the ops before it ran: a state buffer
// after its update
static int after(graph *g, int x) { return out(g, graph_scale(g, x, 1.0, 0.0)); }

// broadcasting, views, equal values and NaN (false either way); integers
static int b_ge(graph *g, enum dtype dt) {
    int a = in(g, "a", dt, 3, S(3, 7, 13)), b = in(g, "b", dt, 1, S(13));
    int c = in(g, "c", dt, 2, S(7, 13)), t = in(g, "t", dt, 2, S(13, 7));
    int nan = graph_full(g, NAN, dt, 1, S(13));
    out(g, graph_binary(g, OP_GE, a, b));
    out(g, graph_binary(g, OP_GE, graph_permute(g, t, (int[]){1, 0}), c));
    out(g, graph_binary(g, OP_GE, c, c));
    out(g, graph_binary(g, OP_GE, nan, b));
    int y = out(g, graph_binary(g, OP_GE, b, nan));
    if (dt != DT_F32)
        return y;
    int i = in_int(g, DT_I32, 2, S(5, 9), -5, 5), j = in_int(g, DT_I32, 1, S(9), -5, 5);
    int k = in_int(g, DT_I64, 2, S(5, 9), -5, 5), l = in_int(g, DT_I64, 2, S(5, 1), -5, 5);
    out(g, graph_binary(g, OP_GE, i, j));
    return out(g, graph_binary(g, OP_GE, k, l));
}

// dy * f'(x) for every derivative, x in the range each needs
static int act_grad_some(graph *g, enum dtype dt, int first, int last) {
    static const enum op ops[] = {OP_NEG,         OP_EXP,  OP_LOG,       OP_SQRT,    OP_RSQRT,
                                  OP_RECIP,       OP_ABS,  OP_TANH,      OP_SIGMOID, OP_RELU,
                                  OP_RELU6,       OP_GELU, OP_GELU_TANH, OP_SILU,    OP_HARDSWISH,
                                  OP_HARDSIGMOID, OP_SCALE};
    int dy = in(g, "dy", dt, 2, S(7, 13)), x = in(g, "x", dt, 2, S(7, 13));
    int w = in(g, "wide", dt, 2, S(7, 13)), pos = in(g, "pos", dt, 2, S(7, 13)), y = -1;
    for (int i = first; i <= last; i++) {
        enum op o = ops[i];
        int src = o == OP_LOG || o == OP_SQRT || o == OP_RSQRT || o == OP_RECIP ? pos
                  : o == OP_EXP                                                 ? x
                                                                                : w;
        y = out(g, graph_op(g, OP_ACT_GRAD, 2, (int[]){dy, src}, IA(o), FA(-1.5, 0.25)));
    }
    return y;
}

static int b_act_grad(graph *g, enum dtype dt) { return act_grad_some(g, dt, 0, 7); }
static int b_act_grad2(graph *g, enum dtype dt) { return act_grad_some(g, dt, 8, 15); }

// SCALE's, and dy sliced out of a wider input with x a transposed view
static int b_act_grad3(graph *g, enum dtype dt) {
    act_grad_some(g, dt, 16, 16);
    int dy = graph_slice(g, in(g, "dy2", dt, 2, S(13, 11)), 1, 2, 7);
    int x = graph_permute(g, in(g, "wide", dt, 2, S(7, 13)), (int[]){1, 0});
    out(g, graph_op(g, OP_ACT_GRAD, 2, (int[]){dy, x}, IA(OP_SILU), NULL));
    return out(g, graph_op(g, OP_ACT_GRAD, 2, (int[]){dy, x}, IA(OP_GELU), NULL));
}

// column sums (the last dim kept), one block an output (reduced), a scalar,
// channels, leading dims, a transposed view
static int b_sum_to(graph *g, enum dtype dt) {
    int a = in(g, "a", dt, 2, S(7, 13)), b = in(g, "b", dt, 4, S(2, 5, 6, 7));
    int c = in(g, "c", dt, 3, S(3, 7, 13));
    int p = graph_permute(g, in(g, "p", dt, 2, S(13, 7)), (int[]){1, 0});
    out(g, sum_to(g, a, 1, S(13)));
    out(g, sum_to(g, a, 2, S(7, 1)));
    out(g, sum_to(g, a, 0, NULL));
    out(g, sum_to(g, b, 3, S(5, 1, 1)));
    out(g, sum_to(g, c, 3, S(3, 1, 13)));
    out(g, sum_to(g, c, 2, S(1, 13)));
    return out(g, sum_to(g, p, 1, S(13)));
}

// rows split over blocks (partial sums added by a second kernel), bias and
// channel gradients of real sizes, a full sum
static int b_sum_to_big(graph *g, enum dtype dt) {
    out(g, sum_to(g, in(g, "tall", dt, 2, S(4096, 40)), 1, S(40)));
    int a = in(g, "a", dt, 2, S(257, 301));
    out(g, sum_to(g, a, 1, S(301)));
    out(g, sum_to(g, a, 0, NULL));
    out(g, sum_to(g, in(g, "b", dt, 4, S(4, 64, 33, 35)), 3, S(64, 1, 1)));
    return out(g, sum_to(g, in(g, "c", dt, 3, S(40, 3, 700)), 2, S(1, 700)));
}

// dy against softmax and log_softmax outputs: a wide row, narrow ones, a view
static int b_softmax_grad(graph *g, enum dtype dt) {
    int x = in(g, "x", dt, 3, S(3, 5, 1000)), dy = in(g, "dy", dt, 3, S(3, 5, 1000));
    int xs = in(g, "xs", dt, 2, S(77, 5)), ds = in(g, "ds", dt, 2, S(77, 5));
    int dp = graph_permute(g, in(g, "dp", dt, 2, S(5, 77)), (int[]){1, 0});
    int y = op1(g, OP_SOFTMAX, x, NULL, NULL), ly = op1(g, OP_LOG_SOFTMAX, x, NULL, NULL);
    int ys = op1(g, OP_SOFTMAX, xs, NULL, NULL), lys = op1(g, OP_LOG_SOFTMAX, xs, NULL, NULL);
    out(g, graph_op(g, OP_SOFTMAX_GRAD, 2, (int[]){dy, y}, NULL, NULL));
    out(g, graph_op(g, OP_LOG_SOFTMAX_GRAD, 2, (int[]){dy, ly}, NULL, NULL));
    out(g, graph_op(g, OP_SOFTMAX_GRAD, 2, (int[]){ds, ys}, NULL, NULL));
    return out(g, graph_op(g, OP_LOG_SOFTMAX_GRAD, 2, (int[]){dp, lys}, NULL, NULL));
}

// layer and rms norm over the last axis (weights stay f32 under f16 data,
// as autocast leaves them); x a transposed view
static int b_norm_grads(graph *g, enum dtype dt) {
    int x = in(g, "x", dt, 3, S(4, 9, 96)), dy = in(g, "dy", dt, 3, S(4, 9, 96));
    int w = param(g, 1, S(96));
    out(g, graph_op(g, OP_LAYER_NORM_GRAD, 3, (int[]){dy, x, w}, NULL, FA(1e-5)));
    out(g, graph_op(g, OP_LAYER_NORM_WGRAD, 2, (int[]){dy, x}, NULL, FA(1e-5)));
    out(g, graph_op(g, OP_RMS_NORM_GRAD, 3, (int[]){dy, x, w}, NULL, FA(1e-6)));
    out(g, graph_op(g, OP_RMS_NORM_WGRAD, 2, (int[]){dy, x}, NULL, FA(1e-6)));
    int xp = graph_permute(g, in(g, "xp", dt, 2, S(13, 7)), (int[]){1, 0});
    int d2 = in(g, "d2", dt, 2, S(7, 13)), w2 = param(g, 1, S(13));
    out(g, graph_op(g, OP_LAYER_NORM_GRAD, 3, (int[]){d2, xp, w2}, NULL, FA(1e-5)));
    return out(g, graph_op(g, OP_RMS_NORM_WGRAD, 2, (int[]){d2, xp}, NULL, FA(1e-6)));
}

// batch norm over (N, C, H, W) and (N, C); group norm; the statistics
static int b_chan_norm_grads(graph *g, enum dtype dt) {
    int x = in(g, "x", dt, 4, S(2, 12, 5, 7)), dy = in(g, "dy", dt, 4, S(2, 12, 5, 7));
    int w = param(g, 1, S(12));
    out(g, graph_op(g, OP_BATCH_NORM_GRAD, 3, (int[]){dy, x, w}, NULL, FA(1e-5)));
    out(g, graph_op(g, OP_BATCH_NORM_WGRAD, 2, (int[]){dy, x}, NULL, FA(1e-5)));
    out(g, graph_op(g, OP_GROUP_NORM_GRAD, 3, (int[]){dy, x, w}, IA(3), FA(1e-5)));
    out(g, graph_op(g, OP_GROUP_NORM_WGRAD, 2, (int[]){dy, x}, IA(4), FA(1e-5)));
    int x2 = in(g, "x2", dt, 2, S(9, 13)), d2 = in(g, "d2", dt, 2, S(9, 13));
    int w2 = param(g, 1, S(13));
    out(g, graph_op(g, OP_BATCH_NORM_GRAD, 3, (int[]){d2, x2, w2}, NULL, FA(1e-5)));
    int y = out(g, graph_op(g, OP_BATCH_NORM_WGRAD, 2, (int[]){d2, x2}, NULL, FA(1e-5)));
    // the statistics are an f32 output
    return dt == DT_F32 ? out(g, op1(g, OP_BATCH_NORM_STATS, x, NULL, FA(1e-5))) : y;
}

// sizes where the weight gradients split their rows over blocks, and real
// channel counts
static int b_norm_grads_big(graph *g, enum dtype dt) {
    int t = in(g, "t", dt, 2, S(2048, 40)), dt_ = in(g, "dt", dt, 2, S(2048, 40));
    out(g, graph_op(g, OP_LAYER_NORM_WGRAD, 2, (int[]){dt_, t}, NULL, FA(1e-5)));
    out(g, graph_op(g, OP_RMS_NORM_WGRAD, 2, (int[]){dt_, t}, NULL, FA(1e-6)));
    int r = in(g, "r", dt, 2, S(64, 768)), dr = in(g, "dr", dt, 2, S(64, 768));
    out(g, graph_op(g, OP_LAYER_NORM_GRAD, 3, (int[]){dr, r, param(g, 1, S(768))}, NULL, FA(1e-5)));
    int c = in(g, "c", dt, 4, S(2, 32, 24, 24)), dc = in(g, "dc", dt, 4, S(2, 32, 24, 24));
    out(g, graph_op(g, OP_BATCH_NORM_GRAD, 3, (int[]){dc, c, param(g, 1, S(32))}, NULL, FA(1e-5)));
    out(g, graph_op(g, OP_GROUP_NORM_GRAD, 3, (int[]){dc, c, param(g, 1, S(32))}, IA(8), FA(1e-5)));
    int y = out(g, graph_op(g, OP_GROUP_NORM_WGRAD, 2, (int[]){dc, c}, IA(8), FA(1e-5)));
    return dt == DT_F32 ? out(g, op1(g, OP_BATCH_NORM_STATS, c, NULL, FA(1e-5))) : y;
}

// batch norm in training: the output, and the running statistics it moved
static int b_bn_train(graph *g, enum dtype dt) {
    int y = -1;
    for (int k = 0; k < 2; k++) {
        int64_t C = k ? 130 : 3;
        int x = k ? in(g, "x2", dt, 2, S(300, 130)) : in(g, "x", dt, 4, S(2, 3, 5, 7));
        int w = param(g, 1, &C), b = param(g, 1, &C);
        int rm = graph_buffer(g, "mean", DT_F32, 1, &C, INIT_NORMAL, 0.5);
        int rv = graph_buffer(g, "var", DT_F32, 1, &C, INIT_ONES, 0);
        out(g, graph_op(g, OP_BATCH_NORM, 5, (int[]){x, w, b, rm, rv}, IA(1), FA(1e-5, 0.1)));
        after(g, rm);
        y = after(g, rv);
    }
    return y;
}

// conv2d's dx and dW: padding; stride, dilation and groups; depthwise;
// channels-last views of dy and x (cuDNN takes their strides)
static int b_conv_grads(graph *g, enum dtype dt) {
    int x = in(g, "x", dt, 4, S(2, 6, 11, 13));
    int w1 = param(g, 4, S(8, 6, 3, 3)), w2 = param(g, 4, S(6, 2, 3, 3));
    int w3 = param(g, 4, S(6, 1, 3, 3));
    if (dt == DT_F16)
        w1 = graph_cast(g, w1, DT_F16), w2 = graph_cast(g, w2, DT_F16),
        w3 = graph_cast(g, w3, DT_F16);
    int64_t xs[4] = {2, 6, 11, 13};
    int y = -1;
    static const struct {
        int64_t ia[7], O, kh, kw;
        bool nhwc;
    } cv[] = {{{1, 1, 1, 1, 1, 1, 1}, 8, 3, 3, false},
              {{2, 2, 2, 1, 2, 2, 3}, 6, 3, 3, false},
              {{2, 2, 1, 1, 1, 1, 6}, 6, 3, 3, false},
              {{1, 1, 1, 1, 1, 1, 1}, 8, 3, 3, true}};
    int ws[4] = {w1, w2, w3, w1};
    for (int k = 0; k < 4; k++) {
        const int64_t *ia = cv[k].ia;
        int64_t OH = conv_out_size(xs[2], cv[k].kh, ia[0], ia[2], ia[4]);
        int64_t OW = conv_out_size(xs[3], cv[k].kw, ia[1], ia[3], ia[5]);
        int64_t ys[4] = {xs[0], cv[k].O, OH, OW};
        int64_t iav[GRAPH_MAX_IA] = {0};
        memcpy(iav, ia, 7 * sizeof *ia);
        int dy, xx = x;
        if (cv[k].nhwc) { // channels-last storage, NCHW views
            dy = graph_permute(g, in(g, "dyl", dt, 4, S(ys[0], ys[2], ys[3], ys[1])),
                               (int[]){0, 3, 1, 2});
            xx = graph_permute(g, in(g, "xl", dt, 4, S(xs[0], xs[2], xs[3], xs[1])),
                               (int[]){0, 3, 1, 2});
        } else {
            dy = in(g, "dy", dt, 4, ys);
        }
        int64_t wsh[4]; // copied: adding nodes may move g->nodes
        memcpy(wsh, g->nodes[ws[k]].shape, sizeof wsh);
        out(g, graph_op_shaped(g, OP_CONV2D_GRAD_INPUT, 2, (int[]){dy, ws[k]}, iav, NULL, 4, xs));
        y = out(g,
                graph_op_shaped(g, OP_CONV2D_GRAD_WEIGHT, 2, (int[]){dy, xx}, iav, NULL, 4, wsh));
    }
    return y;
}

// pooling's dx (dy of the forward output's shape): overlapping, global and
// rectangular windows; ties everywhere (the first in the window takes dy)
static int b_pool_grads(graph *g, enum dtype dt) {
    int64_t xs[4] = {2, 5, 12, 15};
    int x = in(g, "x", dt, 4, xs), flat = graph_full(g, 1.0, dt, 4, xs), y = -1;
    static const struct {
        enum op op;
        int64_t ia[6];
        bool ties;
    } pc[] = {{OP_MAX_POOL2D_GRAD, {2, 2, 1, 1, 3, 3}, false},
              {OP_MAX_POOL2D_GRAD, {1, 1, 0, 0, 2, 2}, false},
              {OP_MAX_POOL2D_GRAD, {1, 1, 0, 0, 12, 15}, false},
              {OP_MAX_POOL2D_GRAD, {2, 2, 1, 1, 3, 3}, true},
              {OP_AVG_POOL2D_GRAD, {2, 2, 1, 0, 3, 2}, false},
              {OP_AVG_POOL2D_GRAD, {1, 3, 0, 1, 2, 3}, false},
              {OP_AVG_POOL2D_GRAD, {1, 1, 0, 0, 12, 15}, false}};
    for (size_t k = 0; k < sizeof pc / sizeof pc[0]; k++) {
        const int64_t *ia = pc[k].ia;
        int64_t ds[4] = {xs[0], xs[1], conv_out_size(xs[2], ia[4], ia[0], ia[2], 1),
                         conv_out_size(xs[3], ia[5], ia[1], ia[3], 1)};
        int64_t iav[GRAPH_MAX_IA] = {ia[0], ia[1], ia[2], ia[3], ia[4], ia[5]};
        int dy = in(g, "dy", dt, 4, ds);
        if (pc[k].op == OP_AVG_POOL2D_GRAD)
            y = out(g, graph_op_shaped(g, pc[k].op, 1, &dy, iav, NULL, 4, xs));
        else
            y = out(g, graph_op(g, pc[k].op, 2, (int[]){dy, pc[k].ties ? flat : x}, iav, NULL));
    }
    return y;
}

// max pooling over NaN: ref.c's rule, the first NaN of a window takes dy
// (the CPU kernel gives it to the last)
static int b_pool_nan(graph *g, enum dtype dt) {
    int64_t xs[4] = {1, 2, 6, 7};
    int x = graph_full(g, NAN, dt, 4, xs);
    int dy = in(g, "dy", dt, 4, S(1, 2, 3, 4));
    return out(g, graph_op(g, OP_MAX_POOL2D_GRAD, 2, (int[]){dy, x}, IA(2, 2, 1, 1, 3, 3), NULL));
}

// rows summed from positions: some repeats, many repeats, a vocabulary, a
// transposed dy
static int b_embedding_grads(graph *g, enum dtype dt) {
    int i1 = in_int(g, DT_I32, 2, S(3, 7), 0, 50), d1 = in(g, "dy", dt, 3, S(3, 7, 24));
    out(g, graph_op_shaped(g, OP_EMBEDDING_GRAD, 2, (int[]){d1, i1}, NULL, NULL, 2, S(50, 24)));
    int i2 = in_int(g, DT_I64, 1, S(40), 0, 3), d2 = in(g, "dy", dt, 2, S(40, 7));
    out(g, graph_op_shaped(g, OP_EMBEDDING_GRAD, 2, (int[]){d2, i2}, NULL, NULL, 2, S(3, 7)));
    int i3 = in_int(g, DT_I64, 2, S(8, 128), 0, 1000), d3 = in(g, "dy", dt, 3, S(8, 128, 64));
    out(g, graph_op_shaped(g, OP_EMBEDDING_GRAD, 2, (int[]){d3, i3}, NULL, NULL, 2, S(1000, 64)));
    int i4 = in_int(g, DT_I32, 1, S(9), 0, 11);
    int d4 = graph_permute(g, in(g, "dy", dt, 2, S(24, 9)), (int[]){1, 0});
    return out(g,
               graph_op_shaped(g, OP_EMBEDDING_GRAD, 2, (int[]){d4, i4}, NULL, NULL, 2, S(11, 24)));
}

// dy into zeros: a middle axis, the first, the last (negative, a view of dy)
static int b_slice_grads(graph *g, enum dtype dt) {
    int d1 = in(g, "dy", dt, 3, S(4, 3, 5)), d2 = in(g, "dy", dt, 2, S(2, 13));
    int d3 = graph_permute(g, in(g, "dy", dt, 2, S(4, 7)), (int[]){1, 0});
    int d4 = in(g, "dy", dt, 2, S(257, 100));
    out(g, graph_op_shaped(g, OP_SLICE_GRAD, 1, &d1, IA(1, 2), NULL, 3, S(4, 9, 5)));
    out(g, graph_op_shaped(g, OP_SLICE_GRAD, 1, &d2, IA(0, 5), NULL, 2, S(7, 13)));
    out(g, graph_op_shaped(g, OP_SLICE_GRAD, 1, &d3, IA(-1, 0), NULL, 2, S(7, 13)));
    return out(g, graph_op_shaped(g, OP_SLICE_GRAD, 1, &d4, IA(1, 150), NULL, 2, S(257, 301)));
}

// cross-entropy's (with ignored rows) and mse's gradients
static int b_loss_grads(graph *g, enum dtype dt) {
    int dl = in(g, "dl", dt, 0, NULL);
    int x = in(g, "x", dt, 2, S(9, 13)), t = in_int(g, DT_I32, 1, S(9), 0, 13);
    out(g, graph_op(g, OP_CROSS_ENTROPY_GRAD, 3, (int[]){dl, x, t}, IA(-100), NULL));
    // targets from [0, 5): those equal to the ignore index 3 give zero rows
    int xs = in(g, "xs", dt, 2, S(40, 5)), ts = in_int(g, DT_I64, 1, S(40), 0, 5);
    out(g, graph_op(g, OP_CROSS_ENTROPY_GRAD, 3, (int[]){dl, xs, ts}, IA(3), NULL));
    int xb = in(g, "xb", dt, 2, S(64, 1000)), tb = in_int(g, DT_I32, 1, S(64), 0, 1000);
    out(g, graph_op(g, OP_CROSS_ENTROPY_GRAD, 3, (int[]){dl, xb, tb}, IA(-100), NULL));
    int a = in(g, "a", dt, 2, S(7, 13)), b = in(g, "b", dt, 2, S(7, 13));
    int ap = graph_permute(g, in(g, "ap", dt, 2, S(13, 7)), (int[]){1, 0});
    out(g, graph_op(g, OP_MSE_LOSS_GRAD, 3, (int[]){dl, a, b}, NULL, NULL));
    out(g, graph_op(g, OP_MSE_LOSS_GRAD, 3, (int[]){dl, ap, b}, NULL, NULL));
    int ab = in(g, "ab", dt, 2, S(257, 301)), bb = in(g, "bb", dt, 2, S(257, 301));
    return out(g, graph_op(g, OP_MSE_LOSS_GRAD, 3, (int[]){dl, ab, bb}, NULL, NULL));
}

// clean tensors (0), a NaN carried through a chain (1), a clean chain (0);
// in f32 a scale so small that unscaling overflows (1). (For an f16 tensor
// the reference rounds the unscaled value to f16 and the executors check it
// in f32, as PyTorch's unscale_ does: they part when 1/scale exceeds 1.)
static int b_found_inf(graph *g, enum dtype dt) {
    int sc = graph_buffer(g, "scale", DT_F32, 0, NULL, INIT_CONSTANT, 0.25);
    int a = in(g, "a", dt, 2, S(257, 301)), b = in(g, "b", dt, 2, S(7, 13));
    int nan = graph_full(g, NAN, dt, 0, NULL);
    int f1 = out(g, graph_op(g, OP_FOUND_INF, 2, (int[]){sc, a}, NULL, NULL));
    out(g, graph_op(g, OP_FOUND_INF, 4, (int[]){sc, f1, b, nan}, IA(1), NULL));
    int y = out(g, graph_op(g, OP_FOUND_INF, 4, (int[]){sc, f1, b, a}, IA(1), NULL));
    if (dt != DT_F32)
        return y;
    int tiny = graph_buffer(g, "tiny", DT_F32, 0, NULL, INIT_CONSTANT, 1e-38);
    int big = graph_full(g, 4.0, dt, 1, S(3));
    out(g, graph_op(g, OP_FOUND_INF, 2, (int[]){tiny, big}, NULL, NULL));
    return out(
        g, graph_op(g, OP_FOUND_INF, 2, (int[]){tiny, graph_scale(g, big, 0.5, 0)}, NULL, NULL));
}

// SGD plain, with momentum, nesterov on a transposed gradient; AdamW; a
// running statistic; the state they moved
static int updates_of(graph *g, enum dtype dt, int nd, const int64_t *shape, bool big) {
    int p1 = param(g, nd, shape), p2 = param(g, nd, shape), p3 = param(g, nd, shape);
    int p4 = param(g, nd, shape);
    int g1 = in(g, "g", dt, nd, shape), g2 = in(g, "g", dt, nd, shape);
    int g3 = graph_permute(g, in(g, "g", dt, 2, S(shape[1], shape[0])), (int[]){1, 0});
    int buf2 = graph_buffer(g, "buf", DT_F32, nd, shape, INIT_ZEROS, 0);
    int buf3 = graph_buffer(g, "buf", DT_F32, nd, shape, INIT_ZEROS, 0);
    int m = graph_buffer(g, "m", DT_F32, nd, shape, INIT_NORMAL, 0.1);
    int v = graph_buffer(g, "v", DT_F32, nd, shape, INIT_ZEROS, 0);
    out(g, graph_op(g, OP_SGD, 2, (int[]){p1, g1}, NULL, FA(0.1, 0, 0.01)));
    out(g, graph_op(g, OP_SGD, 3, (int[]){p2, g2, buf2}, NULL, FA(0.1, 0.9, 0.01, 0.1)));
    after(g, buf2);
    out(g, graph_op(g, OP_SGD, 3, (int[]){p3, g3, buf3}, IA(1), FA(0.1, 0.9, 0, 0)));
    double *fa = big ? FA(1e-3, 0.8, 0.99, 1e-6, 0.1) : FA(1e-2, 0.9, 0.999, 1e-8, 0.01);
    out(g, graph_op(g, OP_ADAMW, 4, (int[]){p4, g1, m, v}, NULL, fa));
    after(g, m);
    after(g, v);
    int rs = graph_buffer(g, "rs", DT_F32, 1, &shape[nd - 1], INIT_ONES, 0);
    int st = in(g, "st", dt, 1, &shape[nd - 1]);
    return out(g, graph_op(g, OP_RUNNING_STAT, 2, (int[]){rs, st}, NULL, FA(0.1, 1.5)));
}

static int b_updates(graph *g, enum dtype dt) { return updates_of(g, dt, 2, S(7, 13), false); }
static int b_updates_big(graph *g, enum dtype dt) {
    return updates_of(g, dt, 2, S(257, 301), true);
}

// under the grad scaler: a scale of 1024 that the gradient is unscaled by,
// a step count of 3 (Adam's t is 4, SGD's first-step rule is off); then
// found_inf set by an inf: every update skipped, parameters and state as
// they were
static int b_updates_scaled(graph *g, enum dtype dt) {
    int sc = graph_buffer(g, "scale", DT_F32, 0, NULL, INIT_CONSTANT, 1024);
    int step = graph_buffer(g, "step", DT_F32, 0, NULL, INIT_CONSTANT, 3);
    int gr = in(g, "g", dt, 2, S(7, 13)), y = -1;
    int inf = graph_full(g, INFINITY, dt, 1, S(3));
    for (int skip = 0; skip < 2; skip++) {
        int fi = skip ? graph_op(g, OP_FOUND_INF, 3, (int[]){sc, gr, inf}, NULL, NULL)
                      : graph_op(g, OP_FOUND_INF, 2, (int[]){sc, gr}, NULL, NULL);
        int p1 = param(g, 2, S(7, 13)), p2 = param(g, 2, S(7, 13)), p3 = param(g, 2, S(7, 13));
        int buf = graph_buffer(g, "buf", DT_F32, 2, S(7, 13), INIT_NORMAL, 0.1);
        int m = graph_buffer(g, "m", DT_F32, 2, S(7, 13), INIT_NORMAL, 0.1);
        int v = graph_buffer(g, "v", DT_F32, 2, S(7, 13), INIT_CONSTANT, 0.01);
        out(g, graph_op(g, OP_SGD, 5, (int[]){p1, gr, sc, fi, step}, IA(0, 1), FA(0.1, 0, 0.01)));
        out(g, graph_op(g, OP_SGD, 6, (int[]){p2, gr, buf, sc, fi, step}, IA(1, 1),
                        FA(0.1, 0.9, 0.01, 0.1)));
        out(g, graph_op(g, OP_ADAMW, 7, (int[]){p3, gr, m, v, sc, fi, step}, IA(0, 1),
                        FA(1e-2, 0.9, 0.999, 1e-8, 0.01)));
        y = after(g, m);
    }
    return y;
}

// the scale's update: growth after the interval, a step counted, a backoff
static int b_scaler_update(graph *g, enum dtype dt) {
    int x = in(g, "x", dt, 1, S(9)), inf = graph_full(g, INFINITY, dt, 0, NULL), y = -1;
    for (int k = 0; k < 3; k++) {
        int sc = graph_buffer(g, "scale", DT_F32, 0, NULL, INIT_CONSTANT, 1024);
        int tr = graph_buffer(g, "tracker", DT_F32, 0, NULL, INIT_CONSTANT, k == 1 ? 0 : 2);
        int st = graph_buffer(g, "step", DT_F32, 0, NULL, INIT_CONSTANT, 5);
        int f = k == 2 ? graph_op(g, OP_FOUND_INF, 3, (int[]){sc, x, inf}, NULL, NULL)
                       : graph_op(g, OP_FOUND_INF, 2, (int[]){sc, x}, NULL, NULL);
        out(g, graph_op(g, OP_SCALER_UPDATE, 4, (int[]){sc, tr, st, f}, IA(3), FA(2, 0.5)));
        y = after(g, tr);
        if (k != 1)
            y = after(g, st);
    }
    return y;
}

static const op_case cases[] = {
    {"sources", b_sources, DT_F32, 0, 0, false},
    {"unary_f32", b_unary_all, DT_F32, 0, 0, false},
    {"unary2_f32", b_unary_all2, DT_F32, 0, 0, false},
    {"unary_f16", b_unary_all, DT_F16, 0, 0, true},
    {"unary2_f16", b_unary_all2, DT_F16, 0, 0, true},
    {"unary_big", b_unary_big, DT_F32, 0, 0, false},
    {"unary_views", b_unary_views, DT_F32, 0, 0, false},
    {"unary_views_f16", b_unary_views, DT_F16, 0, 0, true},
    {"cast", b_cast, DT_F32, 0, 0, false},
    {"dropout", b_dropout, DT_F32, 0, 0, false},
    {"dropout_f16", b_dropout, DT_F16, 0, 0, true},
    {"binary", b_binary, DT_F32, 0, 0, false},
    {"binary_f16", b_binary, DT_F16, 0, 0, true},
    {"binary_big", b_binary_big, DT_F32, 0, 0, false},
    {"binary_int", b_binary_int, DT_I32, 0, 0, false},
    {"where", b_where, DT_F32, 0, 0, false},
    {"where_f16", b_where, DT_F16, 0, 0, true},
    {"reduce", b_reduce, DT_F32, 1e-5, 1e-4, false},
    {"reduce_f16", b_reduce, DT_F16, 4e-3, 4e-2, true},
    {"reduce_last", b_reduce_last, DT_F32, 1e-5, 1e-4, false},
    {"reduce_last_f16", b_reduce_last, DT_F16, 4e-3, 4e-2, true},
    {"softmax", b_softmax, DT_F32, 1e-5, 1e-6, false},
    {"softmax_f16", b_softmax, DT_F16, 0, 0, true},
    {"norms", b_norms, DT_F32, 1e-4, 1e-5, false},
    {"norms_f16", b_norms, DT_F16, 4e-3, 4e-3, true},
    {"matmul", b_matmul, DT_F32, 1e-5, 1e-4, false},
    {"matmul_f16", b_matmul, DT_F16, 4e-3, 4e-2, true},
    {"linear", b_linear, DT_F32, 1e-5, 1e-4, false},
    {"linear_f16", b_linear, DT_F16, 4e-3, 4e-2, true},
    {"conv_pool", b_conv, DT_F32, 1e-5, 1e-4, false},
    {"conv_f16", b_conv, DT_F16, 4e-3, 4e-2, true},
    {"pool", b_pool, DT_F32, 0, 0, false},
    {"pool_f16", b_pool, DT_F16, 0, 0, true},
    {"embedding", b_embedding, DT_F32, 0, 0, false},
    {"embedding_f16", b_embedding, DT_F16, 0, 0, true},
    {"views", b_views, DT_F32, 0, 0, false},
    {"concat", b_concat, DT_F32, 0, 0, false},
    {"concat_f16", b_concat, DT_F16, 0, 0, true},
    {"losses", b_losses, DT_F32, 1e-5, 1e-5, false},
    {"losses_f16", b_losses, DT_F16, 2e-3, 2e-3, true},
    // training
    {"ge", b_ge, DT_F32, 0, 0, false},
    {"ge_f16", b_ge, DT_F16, 0, 0, true},
    {"act_grad", b_act_grad, DT_F32, 1e-5, 1e-5, false},
    {"act_grad2", b_act_grad2, DT_F32, 1e-5, 1e-5, false},
    {"act_grad3_views", b_act_grad3, DT_F32, 1e-5, 1e-5, false},
    {"act_grad_f16", b_act_grad, DT_F16, 0, 0, true},
    {"act_grad2_f16", b_act_grad2, DT_F16, 0, 0, true},
    {"act_grad3_views_f16", b_act_grad3, DT_F16, 0, 0, true},
    {"sum_to", b_sum_to, DT_F32, 1e-5, 1e-5, false},
    {"sum_to_f16", b_sum_to, DT_F16, 2e-3, 1e-2, true},
    {"sum_to_big", b_sum_to_big, DT_F32, 1e-5, 2e-3, false},
    {"sum_to_big_f16", b_sum_to_big, DT_F16, 4e-3, 5e-2, true},
    {"softmax_grad", b_softmax_grad, DT_F32, 1e-4, 1e-5, false},
    {"softmax_grad_f16", b_softmax_grad, DT_F16, 4e-3, 4e-3, true},
    {"norm_grads", b_norm_grads, DT_F32, 1e-4, 1e-4, false},
    {"norm_grads_f16", b_norm_grads, DT_F16, 4e-3, 4e-2, true},
    {"chan_norm_grads", b_chan_norm_grads, DT_F32, 1e-4, 1e-4, false},
    {"chan_norm_grads_f16", b_chan_norm_grads, DT_F16, 4e-3, 4e-2, true},
    {"norm_grads_big", b_norm_grads_big, DT_F32, 1e-4, 2e-4, false},
    {"norm_grads_big_f16", b_norm_grads_big, DT_F16, 4e-3, 5e-2, true},
    {"batch_norm_train", b_bn_train, DT_F32, 1e-4, 1e-5, false},
    {"batch_norm_train_f16", b_bn_train, DT_F16, 4e-3, 4e-3, true},
    {"conv_grads", b_conv_grads, DT_F32, 1e-4, 2e-3, false},
    {"conv_grads_f16", b_conv_grads, DT_F16, 4e-3, 5e-2, true},
    {"pool_grads", b_pool_grads, DT_F32, 0, 0, false},
    {"pool_grads_f16", b_pool_grads, DT_F16, 0, 0, true},
    {"max_pool_grad_nan", b_pool_nan, DT_F32, 0, 0, true},
    {"embedding_grad", b_embedding_grads, DT_F32, 1e-5, 1e-5, false},
    {"embedding_grad_f16", b_embedding_grads, DT_F16, 2e-3, 1e-2, true},
    {"slice_grad", b_slice_grads, DT_F32, 0, 0, false},
    {"slice_grad_f16", b_slice_grads, DT_F16, 0, 0, true},
    {"loss_grads", b_loss_grads, DT_F32, 1e-5, 1e-6, false},
    {"loss_grads_f16", b_loss_grads, DT_F16, 0, 0, true},
    {"found_inf", b_found_inf, DT_F32, 0, 0, false},
    {"found_inf_f16", b_found_inf, DT_F16, 0, 0, true},
    {"updates", b_updates, DT_F32, 1e-5, 1e-5, false},
    {"updates_big", b_updates_big, DT_F32, 1e-5, 1e-5, false},
    {"updates_scaled", b_updates_scaled, DT_F32, 1e-5, 1e-5, false},
    {"scaler_update", b_scaler_update, DT_F32, 0, 0, false},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

// ---- running a case ---------------------------------------------------------------------

static model *case_model(const op_case *tc) {
    graph *g = graph_new();
    assert_non_null(g);
    if (tc->build(g, tc->dt) < 0)
        fail_msg("%s: building the graph failed: %s", tc->name, graph_error(g));
    model *m = model_new(g, tc->name, "test", 1);
    assert_non_null(m);
    assert_int_equal(model_init_values(m, 4321), 0);
    for (int i = 0; i < g->n; i++) {
        const graph_node *n = &g->nodes[i];
        if (n->op != OP_INPUT || !n->name)
            continue;
        bool pos = strcmp(n->name, "pos") == 0, wide = strcmp(n->name, "wide") == 0;
        if (!pos && !wide)
            continue;
        tensor *t = m->values[i];
        int64_t idx[TENSOR_MAX_DIMS] = {0};
        for (int64_t k = 0; k < tensor_numel(t); k++) {
            double v = tensor_get(t, idx);
            tensor_set(t, idx, pos ? fabs(v) + 0.1 : 4 * v);
            for (int d = t->ndim - 1; d >= 0 && ++idx[d] == t->shape[d]; d--)
                idx[d] = 0;
        }
    }
    return m;
}

static int compare(const char *name, int k, const tensor *t, const double *ref, double rtol,
                   double atol) {
    int bad = 0;
    for (int64_t i = 0; i < tensor_numel(t); i++) {
        double e = tensor_get_flat(t, i), r = ref[i];
        if ((isnan(e) && isnan(r)) || fabs(e - r) <= atol + rtol * fabs(r))
            continue;
        if (bad++ < 5)
            print_error("%s: output %d element %lld: got %.9g, reference %.9g (diff %.3g)\n", name,
                        k, (long long)i, e, r, fabs(e - r));
    }
    return bad;
}

// One step on the device under test; outputs as host tensors.
static int step(model *m, void *ex, tensor **outs, eager_stats *st, char *err, size_t cap) {
    if (on_cpu) {
        if (eager_run(ex, outs, st) == 0)
            return 0;
        snprintf(err, cap, "%s", eager_error(ex));
        return -1;
    }
    if (eager_cuda_run(ex, st) < 0 || eager_cuda_outputs(ex, outs) < 0) {
        snprintf(err, cap, "%s", eager_cuda_error(ex));
        return -1;
    }
    (void)m;
    return 0;
}

static void *executor(model *m, const char *name) {
    if (on_cpu) {
        eager *e = eager_new(m);
        assert_non_null(e);
        return e;
    }
    eager_cuda *e;
    char err[512];
    if (eager_cuda_new(m, NULL, &e, err, sizeof err) < 0)
        fail_msg("%s: eager_cuda_new: %s", name, err);
    return e;
}

static void executor_free(void *e) {
    if (on_cpu)
        eager_free(e);
    else
        eager_cuda_free(e);
}

// Updates and batch norm in training write their sources: a second step
// starts from other values.
static bool writes_sources(const graph *g) {
    for (int i = 0; i < g->n; i++) {
        const graph_node *n = &g->nodes[i];
        if (op_kind(n->op) == OPK_UPDATE || (n->op == OP_BATCH_NORM && n->ia[0]))
            return true;
    }
    return false;
}

static void run_case(const op_case *tc) {
    if (on_cpu && tc->gpu_only)
        skip();
    model *m = case_model(tc);
    const graph *g = m->g;
    void *e = executor(m, tc->name);
    tensor *outs[8], *again[8];
    eager_stats st, st2;
    char err[512];
    // the reference first: the CPU eager's updates write the model's values
    double **ref = ref_run_all(m, err, sizeof err);
    if (!ref)
        fail_msg("%s: ref_run_all failed: %s", tc->name, err);
    if (step(m, e, outs, &st, err, sizeof err) < 0)
        fail_msg("%s: step failed: %s", tc->name, err);
    bool f16 = tc->dt == DT_F16;
    double rtol = tc->rtol ? tc->rtol : f16 ? 2e-3 : 1e-5;
    double atol = tc->atol ? tc->atol : f16 ? 2e-3 : 1e-6;
    int bad = 0;
    for (int k = 0; k < g->noutputs; k++) {
        const graph_node *n = &g->nodes[g->outputs[k]];
        assert_int_equal(outs[k]->dtype, n->dtype);
        assert_int_equal(outs[k]->ndim, n->ndim);
        assert_memory_equal(outs[k]->shape, n->shape, (size_t)n->ndim * sizeof n->shape[0]);
        bad += compare(tc->name, k, outs[k], ref[g->outputs[k]], rtol, atol);
    }
    if (bad)
        fail_msg("%s: %d elements differ from the reference", tc->name, bad);
    assert_true(st.kernels > 0);
    assert_true(st.peak_bytes > 0);
    // a second step: the same kernels, and the same bits unless the first
    // moved the sources
    if (step(m, e, again, &st2, err, sizeof err) < 0)
        fail_msg("%s: second step failed: %s", tc->name, err);
    assert_int_equal(st2.kernels, st.kernels);
    bool moved = writes_sources(g);
    for (int k = 0; k < g->noutputs; k++) {
        for (int64_t i = 0; !moved && i < tensor_numel(outs[k]); i++) {
            double a = tensor_get_flat(outs[k], i), b = tensor_get_flat(again[k], i);
            if (!(a == b || (isnan(a) && isnan(b))))
                fail_msg("%s: output %d element %lld changed between steps", tc->name, k,
                         (long long)i);
        }
        tensor_free(outs[k]);
        tensor_free(again[k]);
    }
    for (int i = 0; i < g->n; i++)
        free(ref[i]);
    free(ref);
    executor_free(e);
    model_free(m);
}

static void test_case(void **state) { run_case((const op_case *)*state); }

static void test_every_op_covered(void **state) {
    (void)state;
    bool seen[OP_COUNT] = {0};
    for (int c = 0; c < NCASES; c++) {
        graph *g = graph_new();
        if (cases[c].build(g, cases[c].dt) < 0)
            fail_msg("%s: building the graph failed: %s", cases[c].name, graph_error(g));
        for (int i = 0; i < g->n; i++)
            seen[g->nodes[i].op] = true;
        graph_free(g);
    }
    int missing = 0;
    for (int o = 0; o < OP_COUNT; o++) {
        if (!seen[o]) {
            print_error("op %s has no case in test_cuda_ops.c\n", op_name((enum op)o));
            missing++;
        }
    }
    assert_int_equal(missing, 0);
}

// A bad index or target is found on the device and reported by the sync
// (eager_cuda_outputs), with the position, and the executor stays usable.
static void test_bad_indices(void **state) {
    (void)state;
    if (on_cpu)
        skip();
    static const char *said[] = {"embedding: index", "cross_entropy: target",
                                 "embedding_grad: index", "cross_entropy_grad: target"};
    for (int which = 0; which < 4; which++) {
        graph *g = graph_new();
        int idx = in_int(g, DT_I32, 1, S(50), 0, 13); // some beyond 10
        if (which == 0) {
            int t = graph_buffer(g, "table", DT_F32, 2, S(10, 4), INIT_NORMAL, 1.0);
            out(g, graph_op(g, OP_EMBEDDING, 2, (int[]){t, idx}, NULL, NULL));
        } else if (which == 1) {
            int x = in(g, "x", DT_F32, 2, S(50, 10));
            out(g, graph_op(g, OP_CROSS_ENTROPY, 2, (int[]){x, idx}, IA(-100), NULL));
        } else if (which == 2) {
            int dy = in(g, "dy", DT_F32, 2, S(50, 4));
            out(g, graph_op_shaped(g, OP_EMBEDDING_GRAD, 2, (int[]){dy, idx}, NULL, NULL, 2,
                                   S(10, 4)));
        } else {
            int dl = in(g, "dl", DT_F32, 0, NULL), x = in(g, "x", DT_F32, 2, S(50, 10));
            out(g, graph_op(g, OP_CROSS_ENTROPY_GRAD, 3, (int[]){dl, x, idx}, IA(-100), NULL));
        }
        model *m = model_new(g, "bad", "test", 1);
        assert_int_equal(model_init_values(m, 9), 0);
        eager_cuda *e = executor(m, "bad");
        tensor *y = NULL;
        assert_int_equal(eager_cuda_run(e, NULL), 0); // enqueued: found later
        assert_int_equal(eager_cuda_outputs(e, &y), -1);
        assert_null(y);
        print_message("%s\n", eager_cuda_error(e));
        assert_non_null(strstr(eager_cuda_error(e), said[which]));
        assert_non_null(strstr(eager_cuda_error(e), "outside [0, 10)"));
        eager_cuda_free(e);
        model_free(m);
    }
}

// With TF32 allowed the f32 GEMM still runs (and is close, not exact).
static void test_tf32(void **state) {
    (void)state;
    if (on_cpu)
        skip();
    graph *g = graph_new();
    b_matmul(g, DT_F32);
    model *m = model_new(g, "tf32", "test", 1);
    assert_int_equal(model_init_values(m, 3), 0);
    eager_cuda *e;
    char err[512];
    if (eager_cuda_new(m, &(eager_cuda_opts){.allow_tf32 = true}, &e, err, sizeof err) < 0)
        fail_msg("%s", err);
    tensor *outs[8];
    assert_int_equal(eager_cuda_run(e, NULL), 0);
    assert_int_equal(eager_cuda_outputs(e, outs), 0);
    double **ref = ref_run_all(m, err, sizeof err);
    assert_non_null(ref);
    for (int k = 0; k < g->noutputs; k++) {
        assert_int_equal(compare("tf32", k, outs[k], ref[g->outputs[k]], 5e-3, 5e-2), 0);
        tensor_free(outs[k]);
    }
    for (int i = 0; i < g->n; i++)
        free(ref[i]);
    free(ref);
    eager_cuda_free(e);
    model_free(m);
}

static int close_to(const char *what, const tensor *a, const tensor *b, double rtol, double atol) {
    int bad = 0;
    for (int64_t i = 0; i < tensor_numel(a); i++) {
        double x = tensor_get_flat(a, i), y = tensor_get_flat(b, i);
        if ((isnan(x) && isnan(y)) || fabs(x - y) <= atol + rtol * fabs(y))
            continue;
        if (bad++ < 3)
            print_error("%s: element %lld: %.9g, expected %.9g\n", what, (long long)i, x, y);
    }
    return bad;
}

// suites/smoke.yaml of the source tree (TCBENCH_SOURCE_DIR, set by meson).
static suite *smoke_suite(void) {
    const char *root = getenv("TCBENCH_SOURCE_DIR");
    assert_non_null(root);
    char path[600];
    snprintf(path, sizeof path, "%s/suites/smoke.yaml", root);
    suite *s;
    diag d;
    if (suite_load(path, NULL, &s, &d) < 0)
        fail_msg("%s:%d:%d: %s", path, d.line, d.col, d.msg);
    return s;
}

// Every smoke model on the GPU: eager_cuda against the CPU eager executor,
// and the compiled mode (with its fused and captured ablations) against
// eager_cuda, with the kernels per step of each.
static void test_smoke_models(void **state) {
    (void)state;
    if (on_cpu)
        skip();
    char err[600];
    suite *s = smoke_suite();
    diag d;
    int failures = 0;
    for (int ci = 0; ci < s->ncases; ci++) {
        const suite_case *sc = &s->cases[ci];
        modeldef *md = NULL;
        model *m = NULL;
        if (modeldef_load(sc->model_path, &md, &d) < 0 ||
            modeldef_build(md, sc->overrides, sc->noverrides, sc->batch, &(modeldef_opts){0}, &m,
                           &d) < 0)
            fail_msg("%s: %d:%d: %s", sc->name, d.line, d.col, d.msg);
        assert_int_equal(model_init_values(m, 17), 0);
        int no = m->g->noutputs;
        tensor *cpu[8], *gpu[8];
        eager *e = eager_new(m);
        assert_int_equal(eager_run(e, cpu, NULL), 0);
        eager_free(e);
        eager_cuda *ec;
        if (eager_cuda_new(m, NULL, &ec, err, sizeof err) < 0)
            fail_msg("%s: %s", sc->name, err);
        eager_stats est;
        if (eager_cuda_run(ec, &est) < 0 || eager_cuda_outputs(ec, gpu) < 0)
            fail_msg("%s: eager_cuda: %s", sc->name, eager_cuda_error(ec));
        eager_cuda_free(ec);
        for (int k = 0; k < no; k++)
            failures += close_to(sc->name, gpu[k], cpu[k], 1e-3, 1e-4) > 0;
        static const struct {
            const char *name;
            bool fusion, capture;
        } modes[] = {{"compiled", true, true}, {"fused", true, false}, {"captured", false, true}};
        char line[300];
        int o = snprintf(line, sizeof line, "%-14s eager %3lld kernels", sc->name,
                         (long long)est.kernels);
        for (int mi = 0; mi < 3; mi++) {
            compile_opts co = {.fusion = modes[mi].fusion, .capture = modes[mi].capture};
            cuda_program *cp;
            if (cuda_program_new(m, &co, false, &cp, err, sizeof err) < 0)
                fail_msg("%s %s: %s", sc->name, modes[mi].name, err);
            compiled_stats st;
            tensor *out[8];
            for (int rep = 0; rep < 2; rep++) // the second: a graph replay
                if (cuda_program_run(cp, &st) < 0)
                    fail_msg("%s %s: %s", sc->name, modes[mi].name, cuda_program_error(cp));
            if (cuda_program_outputs(cp, out) < 0)
                fail_msg("%s %s: %s", sc->name, modes[mi].name, cuda_program_error(cp));
            for (int k = 0; k < no; k++) {
                failures += close_to(modes[mi].name, out[k], gpu[k], 1e-3, 1e-4) > 0;
                tensor_free(out[k]);
            }
            o += snprintf(line + o, sizeof line - (size_t)o, ", %s %3lld", modes[mi].name,
                          (long long)st.kernels);
            cuda_program_free(cp);
        }
        print_message("%s\n", line);
        for (int k = 0; k < no; k++) {
            tensor_free(cpu[k]);
            tensor_free(gpu[k]);
        }
        model_free(m);
        modeldef_free(md);
    }
    suite_free(s);
    assert_int_equal(failures, 0);
}

// ||a - b|| / ||b|| over all elements
static double rel_l2(const tensor *a, const tensor *b) {
    double num = 0, den = 0;
    for (int64_t k = 0; k < tensor_numel(b); k++) {
        double d = tensor_get_flat(a, k) - tensor_get_flat(b, k);
        num += d * d;
        den += tensor_get_flat(b, k) * tensor_get_flat(b, k);
    }
    return sqrt(num / (den > 0 ? den : 1));
}

// A smoke model's training step (autograd.h: the loss, then each
// parameter's gradient, then the updates), in f32 with SGD, or under AMP
// (f16) with AdamW and the grad scaler.
static model *train_model(const suite_case *sc, bool amp) {
    modeldef *md = NULL;
    diag d;
    if (modeldef_load(sc->model_path, &md, &d) < 0)
        fail_msg("%s: %d:%d: %s", sc->name, d.line, d.col, d.msg);
    train_opts o = amp ? train_opts_default() : train_opts_sgd();
    o.grad_scaler = amp;
    o.init_scale = 256; // no f16 overflow on a first step: no step skipped by one executor only
    model *m;
    char err[600];
    enum model_prep_step s = model_prepare(
        md, sc->overrides, sc->noverrides, sc->batch,
        &(model_prep){.amp = amp ? DT_F16 : DT_F32, .train = &o, .keep_grads = true, .seed = 17},
        &m, err, sizeof err);
    modeldef_free(md);
    if (s != MODEL_PREP_DONE)
        fail_msg("%s: %s: %s", sc->name, model_prep_step_name(s), err);
    return m;
}

// Every smoke model's training step, eager_cuda against the CPU eager
// executor from the same values: the loss, every gradient, and the loss of
// a second step (which the first step's updates moved). In f32 (SGD) for
// every model, and under AMP with AdamW and the grad scaler for mlp and
// resnet. Both count steps 1 and 2 (Adam's bias correction, dropout masks).
static void test_smoke_training(void **state) {
    (void)state;
    if (on_cpu)
        skip();
    char err[600];
    suite *s = smoke_suite();
    int failures = 0;
    for (int ci = 0; ci < s->ncases; ci++) {
        const suite_case *sc = &s->cases[ci];
        for (int amp = 0; amp < 2; amp++) {
            if (amp && strcmp(sc->name, "mlp") != 0 && strcmp(sc->name, "resnet") != 0)
                continue;
            model *m = train_model(sc, amp);
            const char *v = amp ? "amp" : "fp32";
            int no = m->g->noutputs;
            // the device copies first: the CPU's updates write m->values
            eager_cuda *ec;
            if (eager_cuda_new(m, NULL, &ec, err, sizeof err) < 0)
                fail_msg("%s %s: %s", sc->name, v, err);
            tensor **c1 = calloc((size_t)no, sizeof *c1), **c2 = calloc((size_t)no, sizeof *c2);
            tensor **g1 = calloc((size_t)no, sizeof *g1), **g2 = calloc((size_t)no, sizeof *g2);
            assert_true(c1 && c2 && g1 && g2);
            eager *e = eager_new(m);
            assert_non_null(e);
            eager_set_step(e, 1);
            bool ok = eager_run(e, c1, NULL) == 0;
            eager_set_step(e, 2);
            if (!ok || eager_run(e, c2, NULL) < 0)
                fail_msg("%s %s: CPU eager: %s", sc->name, v, eager_error(e));
            eager_free(e);
            eager_stats est;
            eager_cuda_set_step(ec, 1);
            ok = eager_cuda_run(ec, &est) == 0 && eager_cuda_outputs(ec, g1) == 0;
            eager_cuda_set_step(ec, 2);
            if (!ok || eager_cuda_run(ec, NULL) < 0 || eager_cuda_outputs(ec, g2) < 0)
                fail_msg("%s %s: eager_cuda: %s", sc->name, v, eager_cuda_error(ec));
            double l1 = tensor_get_flat(g1[0], 0), r1 = tensor_get_flat(c1[0], 0);
            double l2 = tensor_get_flat(g2[0], 0), r2 = tensor_get_flat(c2[0], 0);
            if (!(fabs(l1 - r1) <= 1e-3 * fabs(r1) + 1e-4)) {
                print_error("%s %s: loss %.9g, CPU %.9g\n", sc->name, v, l1, r1);
                failures++;
            }
            double worst = 0;
            int at = 0;
            for (int k = 1; k < no; k++) {
                double r = rel_l2(g1[k], c1[k]);
                if (!(r <= worst))
                    worst = r, at = k;
                if (isnan(worst))
                    break;
            }
            // a wrong kernel is off by O(1); summation orders that differ
            // (cuDNN against oneDNN) move an ill-conditioned model's
            // gradients by up to a few percent (test_autograd.c)
            if (!(worst <= (amp ? 5e-2 : 3e-2))) {
                print_error("%s %s: gradient %d (parameter %%%d) is %.3g from the CPU's "
                            "(relative L2)\n",
                            sc->name, v, at, autograd_param_of_output(m->g, at), worst);
                failures++;
            }
            if (!(fabs(l2 - r2) <= (amp ? 3e-2 : 1e-2) * fabs(r2) + 1e-4)) {
                print_error("%s %s: second step's loss %.9g, CPU %.9g\n", sc->name, v, l2, r2);
                failures++;
            }
            print_message("%-14s %-4s training: %3lld kernels, loss %.6f -> %.6f (CPU %.6f -> "
                          "%.6f), gradients within %.2g\n",
                          sc->name, v, (long long)est.kernels, l1, l2, r1, r2, worst);
            for (int k = 0; k < no; k++) {
                tensor_free(c1[k]);
                tensor_free(c2[k]);
                tensor_free(g1[k]);
                tensor_free(g2[k]);
            }
            free(c1);
            free(c2);
            free(g1);
            free(g2);
            eager_cuda_free(ec);
            model_free(m);
        }
    }
    suite_free(s);
    assert_int_equal(failures, 0);
}

int main(void) {
    const char *c = getenv("TCBENCH_CUDA_OPS_ON_CPU");
    on_cpu = c && *c && strcmp(c, "0") != 0;
    char why[512];
    if (!on_cpu && cuda_probe(why, sizeof why) < 0) {
        printf("skipped: %s\n", why);
        return 77;
    }
    struct CMUnitTest tests[NCASES + 5];
    for (int i = 0; i < NCASES; i++)
        tests[i] = (struct CMUnitTest){cases[i].name, test_case, NULL, NULL, (void *)&cases[i]};
    tests[NCASES] = (struct CMUnitTest)cmocka_unit_test(test_every_op_covered);
    tests[NCASES + 1] = (struct CMUnitTest)cmocka_unit_test(test_bad_indices);
    tests[NCASES + 2] = (struct CMUnitTest)cmocka_unit_test(test_tf32);
    tests[NCASES + 3] = (struct CMUnitTest)cmocka_unit_test(test_smoke_models);
    tests[NCASES + 4] = (struct CMUnitTest)cmocka_unit_test(test_smoke_training);
    return cmocka_run_group_tests_name(on_cpu ? "cuda_ops (on the CPU)" : "cuda_ops", tests, NULL,
                                       NULL);
}
