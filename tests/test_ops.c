// Per-op tests: every op in ops.def runs in the eager executor and in the
// fp64 reference on seeded random inputs, and every output element must
// agree within the case's tolerance (|eager - ref| <= atol + rtol |ref|).
// Cases cover odd sizes, sizes above the OpenMP threshold, broadcasting,
// f16, and non-contiguous views feeding kernels; each also checks the
// number of kernels launched (views launch none), that peak bytes are
// plausible, and that a second step gives the same bits. A last test fails
// when an op in ops.def has no case.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eager/eager.h"
#include "core/graph.h"
#include "model/model.h"
#include "ref/ref.h"

typedef struct op_case op_case;
typedef int (*build_fn)(graph *g, const op_case *tc);

struct op_case {
    const char *name;
    build_fn build;
    enum op op;    // for the generic builders
    enum dtype dt; // main input dtype (f32 when 0)
    int nd, nd2;   // main and second input shapes
    int64_t shape[4], shape2[4];
    int64_t ia[GRAPH_MAX_IA];
    double fa[GRAPH_MAX_FA];
    double rtol, atol; // 0: 1e-5 and 1e-6, right for f32 pointwise
    int kernels;       // expected kernels in a step (checked for every case)
    bool nhwc;         // b_conv_grad: channels-last dy and x
};

// ---- graph helpers ----------------------------------------------------------

// Inputs named "pos" get values |N(0, 1)| + 0.1 (log, sqrt, variances),
// inputs named "wide" N(0, 16) (to reach relu6's and hardswish's corners and
// the tails of exp, tanh and gelu); others N(0, 1).
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

static int op(graph *g, enum op o, int nsrc, const int *s, const op_case *tc) {
    return graph_op(g, o, nsrc, s, tc->ia, tc->fa);
}

static int out(graph *g, int y) {
    if (y >= 0)
        graph_output(g, y);
    return y;
}

// ---- generic builders ---------------------------------------------------------

static int b_unary(graph *g, const op_case *tc) {
    int x = in(g, "x", tc->dt, tc->nd, tc->shape);
    return out(g, op(g, tc->op, 1, &x, tc));
}

static int b_unary_wide(graph *g, const op_case *tc) {
    int x = in(g, "wide", tc->dt, tc->nd, tc->shape);
    return out(g, op(g, tc->op, 1, &x, tc));
}

static int b_unary_pos(graph *g, const op_case *tc) {
    int x = in(g, "pos", tc->dt, tc->nd, tc->shape);
    return out(g, op(g, tc->op, 1, &x, tc));
}

// the op on a transposed (non-contiguous) view of a (shape[1], shape[0]) input
static int b_unary_perm(graph *g, const op_case *tc) {
    int x = in(g, "x", tc->dt, 2, (int64_t[]){tc->shape[1], tc->shape[0]});
    int p = graph_permute(g, x, (int[]){1, 0});
    return out(g, op(g, tc->op, 1, &p, tc));
}

// the op on columns [3, 3 + shape[1]) of a wider input
static int b_unary_slice(graph *g, const op_case *tc) {
    int x = in(g, "x", tc->dt, 2, (int64_t[]){tc->shape[0], tc->shape[1] + 5});
    int v = graph_slice(g, x, 1, 3, tc->shape[1]);
    return out(g, op(g, tc->op, 1, &v, tc));
}

// the op on a stride-0 view: (shape[1]) expanded to shape
static int b_unary_expand(graph *g, const op_case *tc) {
    int x = in(g, "x", tc->dt, 1, &tc->shape[1]);
    int v = graph_op_shaped(g, OP_EXPAND, 1, &x, NULL, NULL, 2, tc->shape);
    return out(g, op(g, tc->op, 1, &v, tc));
}

static int b_binary(graph *g, const op_case *tc) {
    int a = in(g, "a", tc->dt, tc->nd, tc->shape), b = in(g, "b", tc->dt, tc->nd2, tc->shape2);
    return out(g, op(g, tc->op, 2, (int[]){a, b}, tc));
}

static int b_binary_int(graph *g, const op_case *tc) {
    int a = in_int(g, tc->dt, tc->nd, tc->shape, -50, 50);
    int b = in_int(g, tc->dt, tc->nd2, tc->shape2, -50, 50);
    return out(g, op(g, tc->op, 2, (int[]){a, b}, tc));
}

// a transposed view plus a contiguous tensor of the same shape
static int b_binary_perm(graph *g, const op_case *tc) {
    int a = in(g, "a", tc->dt, 2, (int64_t[]){tc->shape[1], tc->shape[0]});
    int b = in(g, "b", tc->dt, 2, tc->shape);
    int p = graph_permute(g, a, (int[]){1, 0});
    return out(g, op(g, tc->op, 2, (int[]){p, b}, tc));
}

static int b_where(graph *g, const op_case *tc) {
    int m = in(g, "mask", DT_BOOL, tc->nd, tc->shape);
    int a = in(g, "a", tc->dt, tc->nd, tc->shape), b = in(g, "b", tc->dt, tc->nd2, tc->shape2);
    return out(g, op(g, OP_WHERE, 3, (int[]){m, a, b}, tc));
}

// ---- builders for single cases --------------------------------------------------

static int b_sources(graph *g, const op_case *tc) {
    (void)tc;
    int64_t s[] = {7, 13};
    int x = in(g, "x", DT_F32, 2, s);
    int p = graph_param(g, "p", 2, s, INIT_UNIFORM, 0.5);
    int b = graph_buffer(g, "b", DT_F32, 2, s, INIT_NORMAL, 2.0);
    int f = graph_full(g, 1.5, DT_F32, 2, s);
    out(g, x); // a source returned as an output: no kernel, a view
    return out(g, graph_binary(g, OP_MUL, graph_binary(g, OP_ADD, p, b), f));
}

static int b_cast_chain(graph *g, const op_case *tc) {
    int x = in(g, "x", tc->dt, tc->nd, tc->shape);
    return out(g, graph_cast(g, x, (enum dtype)tc->ia[0]));
}

static int b_cast_from_int(graph *g, const op_case *tc) {
    int x = in_int(g, tc->dt, tc->nd, tc->shape, -1000, 1000);
    return out(g, graph_cast(g, x, (enum dtype)tc->ia[0]));
}

static int b_cast_from_bool(graph *g, const op_case *tc) {
    int x = in(g, "mask", DT_BOOL, tc->nd, tc->shape);
    return out(g, graph_cast(g, x, (enum dtype)tc->ia[0]));
}

static int b_reduce_perm(graph *g, const op_case *tc) {
    int x = in(g, "x", tc->dt, 3, (int64_t[]){tc->shape[2], tc->shape[0], tc->shape[1]});
    int p = graph_permute(g, x, (int[]){1, 2, 0});
    return out(g, op(g, tc->op, 1, &p, tc));
}

static int b_layer_norm(graph *g, const op_case *tc) {
    int64_t C = tc->shape[tc->nd - 1];
    int x = in(g, "x", tc->dt, tc->nd, tc->shape);
    int w = param(g, 1, &C), b = param(g, 1, &C);
    if (tc->op == OP_RMS_NORM)
        return out(g, op(g, OP_RMS_NORM, 2, (int[]){x, w}, tc));
    return out(g, op(g, OP_LAYER_NORM, 3, (int[]){x, w, b}, tc));
}

static int b_channel_norm(graph *g, const op_case *tc) {
    int64_t C = tc->shape[1];
    int x = in(g, "x", tc->dt, tc->nd, tc->shape);
    int w = param(g, 1, &C), b = param(g, 1, &C);
    if (tc->op == OP_GROUP_NORM)
        return out(g, op(g, OP_GROUP_NORM, 3, (int[]){x, w, b}, tc));
    int mean = graph_buffer(g, "mean", DT_F32, 1, &C, INIT_NORMAL, 0.5);
    int var = in(g, "pos", DT_F32, 1, &C);
    return out(g, op(g, OP_BATCH_NORM, 5, (int[]){x, w, b, mean, var}, tc));
}

static int b_matmul(graph *g, const op_case *tc) {
    int a = in(g, "a", tc->dt, tc->nd, tc->shape), b = in(g, "b", tc->dt, tc->nd2, tc->shape2);
    return out(g, graph_binary(g, OP_MATMUL, a, b));
}

// a @ b^T with b given as (N, K): the transposed view goes in as CblasTrans
static int b_matmul_bt(graph *g, const op_case *tc) {
    int a = in(g, "a", tc->dt, tc->nd, tc->shape), b = in(g, "b", tc->dt, tc->nd2, tc->shape2);
    int p = graph_permute(g, b, (int[]){1, 0});
    return out(g, graph_binary(g, OP_MATMUL, a, p));
}

// a^T @ b with a given as (K, M)
static int b_matmul_at(graph *g, const op_case *tc) {
    int a = in(g, "a", tc->dt, tc->nd, tc->shape), b = in(g, "b", tc->dt, tc->nd2, tc->shape2);
    int p = graph_permute(g, a, (int[]){1, 0});
    return out(g, graph_binary(g, OP_MATMUL, p, b));
}

// a is columns [2, 2 + K) of a (M, K + 4) input: lda > K, no copy
static int b_matmul_slice(graph *g, const op_case *tc) {
    int a = in(g, "a", tc->dt, 2, (int64_t[]){tc->shape[0], tc->shape[1] + 4});
    int b = in(g, "b", tc->dt, tc->nd2, tc->shape2);
    return out(g, graph_binary(g, OP_MATMUL, graph_slice(g, a, 1, 2, tc->shape[1]), b));
}

// a is (shape[1]) expanded to (shape[0], shape[1]): rows of stride 0, which
// BLAS cannot take, so the kernel copies it first
static int b_matmul_expand(graph *g, const op_case *tc) {
    int a = in(g, "a", tc->dt, 1, &tc->shape[1]), b = in(g, "b", tc->dt, tc->nd2, tc->shape2);
    int v = graph_op_shaped(g, OP_EXPAND, 1, &a, NULL, NULL, 2, tc->shape);
    return out(g, graph_binary(g, OP_MATMUL, v, b));
}

// x (shape), weight (shape2) = (N, K), bias when ia[0]
static int b_linear(graph *g, const op_case *tc) {
    int x = in(g, "x", tc->dt, tc->nd, tc->shape);
    int w = param(g, 2, tc->shape2), b = param(g, 1, tc->shape2);
    int s[] = {x, w, b};
    return out(g, graph_op(g, OP_LINEAR, tc->ia[0] ? 3 : 2, s, NULL, NULL));
}

// x given as (B, K, T), permuted to (B, T, K): rows do not collapse
static int b_linear_perm(graph *g, const op_case *tc) {
    int x = in(g, "x", tc->dt, 3, (int64_t[]){tc->shape[0], tc->shape[2], tc->shape[1]});
    int w = param(g, 2, tc->shape2), b = param(g, 1, tc->shape2);
    int p = graph_permute(g, x, (int[]){0, 2, 1});
    return out(g, graph_op(g, OP_LINEAR, 3, (int[]){p, w, b}, NULL, NULL));
}

// x (shape), weight (shape2); bias when ia[9]; ia[0..8] as ops.def
static int b_conv(graph *g, const op_case *tc) {
    int x = in(g, "x", tc->dt, tc->nd, tc->shape);
    int w = param(g, 4, tc->shape2);
    int64_t O = tc->op == OP_CONV2D ? tc->shape2[0] : tc->shape2[1] * (tc->ia[6] ? tc->ia[6] : 1);
    int b = param(g, 1, &O);
    return out(g, op(g, tc->op, tc->ia[9] ? 3 : 2, (int[]){x, w, b}, tc));
}

// x given as (M, K + 5), columns [3, 3 + K) taken: rows with a stride
// larger than K go to BLAS as they are
static int b_linear_slice(graph *g, const op_case *tc) {
    int x = in(g, "x", tc->dt, 2, (int64_t[]){tc->shape[0], tc->shape[1] + 5});
    int v = graph_slice(g, x, 1, 3, tc->shape[1]);
    int w = param(g, 2, tc->shape2), b = param(g, 1, tc->shape2);
    return out(g, graph_op(g, OP_LINEAR, 3, (int[]){v, w, b}, NULL, NULL));
}

// A 4-d input of logical shape s that is a permuted view: the input is
// made in the order perm reads it (base[perm[i]] = s[i]), then permuted.
static int in_permuted(graph *g, const char *name, enum dtype dt, const int64_t *s,
                       const int *perm) {
    int64_t base[4];
    for (int i = 0; i < 4; i++)
        base[perm[i]] = s[i];
    return graph_permute(g, in(g, name, dt, 4, base), perm);
}

static const int NHWC[4] = {0, 3, 1, 2};    // channels-last: what the kernels take as it is
static const int SWAP_HW[4] = {0, 1, 3, 2}; // neither plain nor channels-last: copied first

// a convolution or pooling (tc->op) over a permuted view of x
static int conv_or_pool_of(graph *g, const op_case *tc, const int *perm) {
    int x = in_permuted(g, "x", tc->dt, tc->shape, perm);
    if (tc->op != OP_CONV2D)
        return out(g, op(g, tc->op, 1, &x, tc));
    int w = param(g, 4, tc->shape2);
    return out(g, op(g, OP_CONV2D, 2, (int[]){x, w}, tc));
}

static int b_conv_perm(graph *g, const op_case *tc) { return conv_or_pool_of(g, tc, NHWC); }
static int b_conv_swap(graph *g, const op_case *tc) { return conv_or_pool_of(g, tc, SWAP_HW); }
static int b_pool_perm(graph *g, const op_case *tc) { return conv_or_pool_of(g, tc, NHWC); }
static int b_pool_swap(graph *g, const op_case *tc) { return conv_or_pool_of(g, tc, SWAP_HW); }

static int b_embedding(graph *g, const op_case *tc) {
    int t = graph_buffer(g, "table", tc->dt, 2, tc->shape, INIT_NORMAL, 1.0);
    int i = in_int(g, tc->ia[1] ? DT_I64 : DT_I32, tc->nd2, tc->shape2, 0, tc->shape[0]);
    return out(g, graph_op(g, OP_EMBEDDING, 2, (int[]){t, i}, NULL, NULL));
}

// ids drawn from [0, V + 3): some fall outside the table
static int b_embedding_bad(graph *g, const op_case *tc) {
    int t = graph_buffer(g, "table", tc->dt, 2, tc->shape, INIT_NORMAL, 1.0);
    int i = in_int(g, DT_I32, tc->nd2, tc->shape2, 0, tc->shape[0] + 3);
    return out(g, graph_op(g, OP_EMBEDDING, 2, (int[]){t, i}, NULL, NULL));
}

static int b_reshape(graph *g, const op_case *tc) {
    int x = in(g, "x", tc->dt, tc->nd, tc->shape);
    return out(g, graph_reshape(g, x, tc->nd2, tc->shape2));
}

// reshape of a transposed view: strides cannot express it, so it copies
static int b_reshape_perm(graph *g, const op_case *tc) {
    int x = in(g, "x", tc->dt, 2, (int64_t[]){tc->shape[1], tc->shape[0]});
    int p = graph_permute(g, x, (int[]){1, 0});
    return out(g, graph_reshape(g, p, tc->nd2, tc->shape2));
}

static int b_views(graph *g, const op_case *tc) {
    (void)tc;
    int x = in(g, "x", DT_F32, 3, (int64_t[]){4, 5, 6});
    int p = graph_permute(g, x, (int[]){2, 0, 1});      // (6, 4, 5)
    int s = graph_slice(g, p, 2, 1, 3);                 // (6, 4, 3)
    int r = graph_reshape(g, x, 2, (int64_t[]){20, 6}); // view
    int v = graph_slice(g, r, 0, 2, 1);                 // (1, 6)
    int e = graph_op_shaped(g, OP_EXPAND, 1, &v, NULL, NULL, 3, (int64_t[]){3, 5, 6});
    out(g, p);
    out(g, s);
    out(g, e);
    return out(g, graph_unary(g, OP_CONTIGUOUS, x)); // already contiguous: no kernel
}

static int b_contiguous_perm(graph *g, const op_case *tc) {
    int x = in(g, "x", tc->dt, tc->nd, tc->shape);
    int p = graph_permute(g, x, (int[]){2, 0, 1});
    return out(g, graph_unary(g, OP_CONTIGUOUS, p));
}

// (B, R, C) -> (B, C, R) made contiguous: the tiled transpose copy
static int b_transpose_last(graph *g, const op_case *tc) {
    int x = in(g, "x", tc->dt, tc->nd, tc->shape);
    int p = graph_permute(g, x, (int[]){0, 2, 1});
    return out(g, graph_unary(g, OP_CONTIGUOUS, p));
}

// three pieces along ia[0]: sizes 2, 1 and 3 on that axis, the middle one a
// transposed view
static int b_concat(graph *g, const op_case *tc) {
    int ax = tc->ia[0] < 0 ? (int)tc->ia[0] + 2 : (int)tc->ia[0];
    int64_t s[3][2];
    int x[3];
    for (int k = 0; k < 3; k++) {
        memcpy(s[k], tc->shape, sizeof s[k]);
        s[k][ax] = k == 0 ? 2 : k == 1 ? 1 : 3;
    }
    x[0] = in(g, "a", tc->dt, 2, s[0]);
    x[1] = graph_permute(g, in(g, "b", tc->dt, 2, (int64_t[]){s[1][1], s[1][0]}), (int[]){1, 0});
    x[2] = in(g, "c", tc->dt, 2, s[2]);
    return out(g, op(g, OP_CONCAT, 3, x, tc));
}

static int b_cross_entropy(graph *g, const op_case *tc) {
    int x = in(g, "x", DT_F32, 2, tc->shape);
    int t = in_int(g, tc->dt, 1, tc->shape, 0, tc->shape[1] + (tc->ia[1] ? 2 : 0));
    return out(g, op(g, OP_CROSS_ENTROPY, 2, (int[]){x, t}, tc));
}

static int b_mse(graph *g, const op_case *tc) {
    int a = in(g, "a", tc->dt, tc->nd, tc->shape), b = in(g, "b", tc->dt, tc->nd, tc->shape);
    return out(g, op(g, OP_MSE_LOSS, 2, (int[]){a, b}, tc));
}

// x -> exp -> exp -> exp -> exp: only two intermediates are ever live
static int b_chain(graph *g, const op_case *tc) {
    int y = in(g, "x", tc->dt, tc->nd, tc->shape);
    for (int i = 0; i < 4; i++)
        y = graph_scale(g, graph_unary(g, OP_TANH, y), 1.0, 0.0);
    return out(g, y);
}

// ---- builders for the training ops ---------------------------------------------

// dy * f'(x), f = ia[0]; x "pos" for the ops defined on x > 0, "wide" else
static int b_act_grad(graph *g, const op_case *tc) {
    enum op f = (enum op)tc->ia[0];
    bool pos = f == OP_LOG || f == OP_SQRT || f == OP_RSQRT;
    int dy = in(g, "dy", tc->dt, tc->nd, tc->shape);
    int x = in(g, pos ? "pos" : "wide", tc->dt, tc->nd, tc->shape);
    return out(g, op(g, OP_ACT_GRAD, 2, (int[]){dy, x}, tc));
}

// x a transposed view, dy sliced out of a wider input
static int b_act_grad_views(graph *g, const op_case *tc) {
    int64_t R = tc->shape[0], C = tc->shape[1];
    int dy = graph_slice(g, in(g, "dy", tc->dt, 2, (int64_t[]){R, C + 4}), 1, 2, C);
    int x = graph_permute(g, in(g, "wide", tc->dt, 2, (int64_t[]){C, R}), (int[]){1, 0});
    return out(g, op(g, OP_ACT_GRAD, 2, (int[]){dy, x}, tc));
}

// dy (shape) summed to shape2
static int b_sum_to(graph *g, const op_case *tc) {
    int dy = in(g, "dy", tc->dt, tc->nd, tc->shape);
    return out(g, graph_op_shaped(g, OP_SUM_TO, 1, &dy, NULL, NULL, tc->nd2, tc->shape2));
}

// dy a transposed view of a (shape[1], shape[0]) input
static int b_sum_to_perm(graph *g, const op_case *tc) {
    int x = in(g, "dy", tc->dt, 2, (int64_t[]){tc->shape[1], tc->shape[0]});
    int dy = graph_permute(g, x, (int[]){1, 0});
    return out(g, graph_op_shaped(g, OP_SUM_TO, 1, &dy, NULL, NULL, tc->nd2, tc->shape2));
}

// dy, x of shape and the weight (C): the last axis, or axis 1 for the
// channel norms; the weight gradients take dy and x only
static int b_norm_grad(graph *g, const op_case *tc) {
    bool chan = tc->op == OP_BATCH_NORM_GRAD || tc->op == OP_BATCH_NORM_WGRAD ||
                tc->op == OP_GROUP_NORM_GRAD || tc->op == OP_GROUP_NORM_WGRAD;
    int64_t C = chan ? tc->shape[1] : tc->shape[tc->nd - 1];
    int dy = in(g, "dy", tc->dt, tc->nd, tc->shape);
    int x = in(g, "x", tc->dt, tc->nd, tc->shape);
    int w = param(g, 1, &C);
    bool wgrad = op_min_srcs(tc->op) == 2;
    return out(g, op(g, tc->op, wgrad ? 2 : 3, (int[]){dy, x, w}, tc));
}

// x a transposed view of a (shape[1], shape[0]) input
static int b_norm_grad_perm(graph *g, const op_case *tc) {
    int64_t C = tc->shape[1];
    int dy = in(g, "dy", tc->dt, 2, tc->shape);
    int x = graph_permute(g, in(g, "x", tc->dt, 2, (int64_t[]){tc->shape[1], tc->shape[0]}),
                          (int[]){1, 0});
    int w = param(g, 1, &C);
    return out(g, op(g, tc->op, 3, (int[]){dy, x, w}, tc));
}

// A 4-d input of shape s laid out channels-last, the layout the compiled
// mode gives activations.
static int in_nhwc(graph *g, const char *name, enum dtype dt, const int64_t *s) {
    return in_permuted(g, name, dt, s, NHWC);
}

// batch norm's statistics and gradients over channels-last dy and x
static int b_bn_nhwc(graph *g, const op_case *tc) {
    int64_t C = tc->shape[1];
    int x = in_nhwc(g, "x", tc->dt, tc->shape);
    if (tc->op == OP_BATCH_NORM_STATS)
        return out(g, op(g, tc->op, 1, &x, tc));
    int dy = in_nhwc(g, "dy", tc->dt, tc->shape);
    int w = param(g, 1, &C);
    bool wgrad = op_min_srcs(tc->op) == 2;
    return out(g, op(g, tc->op, wgrad ? 2 : 3, (int[]){dy, x, w}, tc));
}

static int64_t conv_out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
    return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

// x shape in shape, weight (O, C/g, kh, kw) in shape2, ia as conv2d; dy has
// the forward output's shape. grad_input makes dx from (dy, w), grad_weight
// dw from (dy, x).
static int b_conv_grad(graph *g, const op_case *tc) {
    const int64_t *xs = tc->shape, *ws = tc->shape2, *ia = tc->ia;
    int64_t dys[4] = {xs[0], ws[0], conv_out_size(xs[2], ws[2], ia[0], ia[2], ia[4]),
                      conv_out_size(xs[3], ws[3], ia[1], ia[3], ia[5])};
    // .nhwc: dy and x channels-last views (the compiled mode's layout)
    int dy = tc->nhwc ? in_nhwc(g, "dy", tc->dt, dys) : in(g, "dy", tc->dt, 4, dys);
    if (tc->op == OP_CONV2D_GRAD_INPUT) {
        int w = param(g, 4, ws);
        return out(g, graph_op_shaped(g, tc->op, 2, (int[]){dy, w}, ia, NULL, 4, xs));
    }
    int x = tc->nhwc ? in_nhwc(g, "x", tc->dt, xs) : in(g, "x", tc->dt, 4, xs);
    return out(g, graph_op_shaped(g, tc->op, 2, (int[]){dy, x}, ia, NULL, 4, ws));
}

// x shape in shape, ia as the pools
static int b_pool_grad(graph *g, const op_case *tc) {
    const int64_t *xs = tc->shape, *ia = tc->ia;
    int64_t dys[4] = {xs[0], xs[1], conv_out_size(xs[2], ia[4], ia[0], ia[2], 1),
                      conv_out_size(xs[3], ia[5], ia[1], ia[3], 1)};
    int dy = in(g, "dy", tc->dt, 4, dys);
    if (tc->op == OP_AVG_POOL2D_GRAD)
        return out(g, graph_op_shaped(g, tc->op, 1, &dy, ia, NULL, 4, xs));
    int x = in(g, "x", tc->dt, 4, xs);
    return out(g, op(g, tc->op, 2, (int[]){dy, x}, tc));
}

// table (V, D) = shape, indices of shape2 in [0, V + ia[1]) (i64 when ia[0])
static int b_embedding_grad(graph *g, const op_case *tc) {
    int64_t dys[TENSOR_MAX_DIMS];
    memcpy(dys, tc->shape2, sizeof tc->shape2);
    dys[tc->nd2] = tc->shape[1];
    int i =
        in_int(g, tc->ia[0] ? DT_I64 : DT_I32, tc->nd2, tc->shape2, 0, tc->shape[0] + tc->ia[1]);
    int dy = in(g, "dy", tc->dt, tc->nd2 + 1, dys);
    return out(g,
               graph_op_shaped(g, OP_EMBEDDING_GRAD, 2, (int[]){dy, i}, NULL, NULL, 2, tc->shape));
}

// dy (shape2) into zeros of shape at ia[1] along ia[0]; dy a transposed
// view when ia[2]
static int b_slice_grad(graph *g, const op_case *tc) {
    int dy;
    if (tc->ia[2])
        dy = graph_permute(g, in(g, "dy", tc->dt, 2, (int64_t[]){tc->shape2[1], tc->shape2[0]}),
                           (int[]){1, 0});
    else
        dy = in(g, "dy", tc->dt, tc->nd2, tc->shape2);
    int64_t ia[GRAPH_MAX_IA] = {tc->ia[0], tc->ia[1]};
    return out(g, graph_op_shaped(g, OP_SLICE_GRAD, 1, &dy, ia, NULL, tc->nd, tc->shape));
}

// dloss () and logits (N, C), targets in [0, C); ia0 ignored
static int b_cross_entropy_grad(graph *g, const op_case *tc) {
    int dl = in(g, "dl", DT_F32, 0, NULL);
    int x = in(g, "x", DT_F32, 2, tc->shape);
    int t = in_int(g, tc->dt, 1, tc->shape, 0, tc->shape[1]);
    return out(g, op(g, OP_CROSS_ENTROPY_GRAD, 3, (int[]){dl, x, t}, tc));
}

// dloss (), a (a transposed view when ia[0]), b
static int b_mse_grad(graph *g, const op_case *tc) {
    int dl = in(g, "dl", DT_F32, 0, NULL);
    int a = tc->ia[0]
                ? graph_permute(g, in(g, "a", DT_F32, 2, (int64_t[]){tc->shape[1], tc->shape[0]}),
                                (int[]){1, 0})
                : in(g, "a", DT_F32, tc->nd, tc->shape);
    int b = in(g, "b", DT_F32, tc->nd, tc->shape);
    return out(g, graph_op(g, OP_MSE_LOSS_GRAD, 3, (int[]){dl, a, b}, NULL, NULL));
}

// param, gradient (a transposed view when ia[1]) and the optimizer's state
// buffers: zeros for SGD's momentum and Adam's second moment, N(0, 1) for
// Adam's first; RUNNING_STAT: a buffer of ones and a statistic
static int b_update(graph *g, const op_case *tc) {
    int p = tc->op == OP_RUNNING_STAT
                ? graph_buffer(g, "rs", DT_F32, tc->nd, tc->shape, INIT_ONES, 0)
                : param(g, tc->nd, tc->shape);
    int gr = tc->ia[1]
                 ? graph_permute(g, in(g, "g", DT_F32, 2, (int64_t[]){tc->shape[1], tc->shape[0]}),
                                 (int[]){1, 0})
                 : in(g, "g", DT_F32, tc->nd, tc->shape);
    int s[4] = {p, gr, -1, -1}, ns = 2;
    if (tc->op == OP_SGD && tc->fa[1] != 0)
        s[ns++] = graph_buffer(g, "buf", DT_F32, tc->nd, tc->shape, INIT_ZEROS, 0);
    if (tc->op == OP_ADAMW) {
        s[ns++] = graph_buffer(g, "m", DT_F32, tc->nd, tc->shape, INIT_NORMAL, 0.1);
        s[ns++] = graph_buffer(g, "v", DT_F32, tc->nd, tc->shape, INIT_ZEROS, 0);
    }
    int64_t ia[GRAPH_MAX_IA] = {tc->ia[0]};
    return out(g, graph_op(g, tc->op, ns, s, ia, tc->fa));
}

// b_update's update under the grad scaler: a scale of 1024 (the gradient is
// unscaled by it), found_inf over the gradient (and, with ia2, over an inf:
// the update is skipped, its parameter returned as it was), and an
// optimizer step count of 3 (Adam's t is 4, SGD's first-step rule is off)
static int b_update_scaled(graph *g, const op_case *tc) {
    int p = param(g, tc->nd, tc->shape), gr = in(g, "g", DT_F32, tc->nd, tc->shape);
    int s[7] = {p, gr}, ns = 2;
    if (tc->op == OP_SGD && tc->fa[1] != 0)
        s[ns++] = graph_buffer(g, "buf", DT_F32, tc->nd, tc->shape, INIT_NORMAL, 0.1);
    if (tc->op == OP_ADAMW) {
        s[ns++] = graph_buffer(g, "m", DT_F32, tc->nd, tc->shape, INIT_NORMAL, 0.1);
        s[ns++] = graph_buffer(g, "v", DT_F32, tc->nd, tc->shape, INIT_CONSTANT, 0.01);
    }
    int sc = graph_buffer(g, "scale", DT_F32, 0, NULL, INIT_CONSTANT, 1024);
    int chk[3] = {sc, gr, -1}, nc = 2;
    if (tc->ia[2])
        chk[nc++] = graph_full(g, INFINITY, DT_F32, 1, (int64_t[]){3});
    s[ns++] = sc;
    s[ns++] = graph_op(g, OP_FOUND_INF, nc, chk, NULL, NULL);
    s[ns++] = graph_buffer(g, "step", DT_F32, 0, NULL, INIT_CONSTANT, 3);
    int64_t ia[GRAPH_MAX_IA] = {tc->ia[0], 1};
    return out(g, graph_op(g, tc->op, ns, s, ia, tc->fa));
}

// found_inf over a (shape) then, chained, over b (shape2) and, with ia2, a
// NaN; both flags are outputs
static int b_found_inf(graph *g, const op_case *tc) {
    int sc = graph_buffer(g, "scale", DT_F32, 0, NULL, INIT_CONSTANT, 0.25);
    int a = in(g, "a", DT_F32, tc->nd, tc->shape), b = in(g, "b", DT_F32, tc->nd2, tc->shape2);
    int f1 = out(g, graph_op(g, OP_FOUND_INF, 2, (int[]){sc, a}, NULL, NULL));
    int s[4] = {sc, f1, b, -1}, ns = 3;
    if (tc->ia[2])
        s[ns++] = graph_full(g, NAN, DT_F32, 0, NULL);
    return out(g, graph_op(g, OP_FOUND_INF, ns, s, (int64_t[GRAPH_MAX_IA]){1}, NULL));
}

// scaler_update with a scale of 1024, a growth tracker of fa2, a step count
// of 5, found_inf over x (and, with ia2, an inf); ia0 growth interval, fa0
// growth, fa1 backoff. Outputs: the scale (the update's value).
static int b_scaler_update(graph *g, const op_case *tc) {
    int sc = graph_buffer(g, "scale", DT_F32, 0, NULL, INIT_CONSTANT, 1024);
    int tr = graph_buffer(g, "tracker", DT_F32, 0, NULL, INIT_CONSTANT, tc->fa[2]);
    int st = graph_buffer(g, "step", DT_F32, 0, NULL, INIT_CONSTANT, 5);
    int chk[3] = {sc, in(g, "x", DT_F32, tc->nd, tc->shape), -1}, nc = 2;
    if (tc->ia[2])
        chk[nc++] = graph_full(g, INFINITY, DT_F32, 0, NULL);
    int f = graph_op(g, OP_FOUND_INF, nc, chk, NULL, NULL);
    return out(g, graph_op(g, OP_SCALER_UPDATE, 4, (int[]){sc, tr, st, f}, tc->ia, tc->fa));
}

// ---- the cases ------------------------------------------------------------------

#define S1(a)          .nd = 1, .shape = {a}
#define S2(a, b)       .nd = 2, .shape = {a, b}
#define S3(a, b, c)    .nd = 3, .shape = {a, b, c}
#define S4(a, b, c, d) .nd = 4, .shape = {a, b, c, d}
#define T1(a)          .nd2 = 1, .shape2 = {a}
#define T2(a, b)       .nd2 = 2, .shape2 = {a, b}
#define T3(a, b, c)    .nd2 = 3, .shape2 = {a, b, c}
#define T4(a, b, c, d) .nd2 = 4, .shape2 = {a, b, c, d}
#define BIG            S2(257, 301) // 77357 elements: above the one-thread threshold
#define F16            .dt = DT_F16, .rtol = 2e-3, .atol = 1e-3
// GEMM-like sums of K products: float rounding grows like sqrt(K)
#define GEMM(K) .rtol = 1e-4, .atol = 2e-5 * (K)
#define IA(...) .ia = {__VA_ARGS__}
#define ONE     .kernels = 1

#define UN(o)                                                                                      \
    { #o, b_unary_wide, OP_##o, S2(7, 13), ONE }
#define AG(o)                                                                                      \
    { "act_grad_" #o, b_act_grad, OP_ACT_GRAD, S2(7, 13), IA(OP_##o), .atol = 1e-5, ONE }
#define NORM(eps, tol) .fa = {eps}, .rtol = 1e-4, .atol = (tol)
#define UN_POS(o)                                                                                  \
    { #o "_pos", b_unary_pos, OP_##o, S2(7, 13), ONE }

static const op_case cases[] = {
    {"sources", b_sources, .kernels = 2},
    // unary, f32, 7x13
    UN(NEG),
    UN(EXP),
    UN(RECIP),
    UN(ABS),
    UN(TANH),
    UN(SIGMOID),
    UN(RELU),
    UN(RELU6),
    UN(GELU),
    UN(GELU_TANH),
    UN(SILU),
    UN(HARDSWISH),
    UN(HARDSIGMOID),
    UN(MISH),
    {"leaky_relu", b_unary_wide, OP_LEAKY_RELU, S2(7, 13), .fa = {0.2}, ONE},
    {"elu", b_unary_wide, OP_ELU, S2(7, 13), .fa = {1.3}, ONE},
    // beta 2, threshold 3: both sides of the cut at x = 1.5
    {"softplus", b_unary_wide, OP_SOFTPLUS, S2(7, 13), .fa = {2.0, 3.0}, ONE},
    {"softplus_default", b_unary_wide, OP_SOFTPLUS, S2(7, 13), .fa = {1.0, 20.0}, ONE},
    UN_POS(LOG),
    UN_POS(SQRT),
    UN_POS(RSQRT),
    {"scale", b_unary, OP_SCALE, S2(7, 13), .fa = {-1.5, 0.25}, ONE},
    {"tanh_1x1", b_unary, OP_TANH, S2(1, 1), ONE},
    // above the threshold: threads split the range
    {"gelu_big", b_unary, OP_GELU, BIG, ONE},
    {"exp_big", b_unary, OP_EXP, BIG, ONE},
    {"silu_big", b_unary, OP_SILU, BIG, ONE},
    {"sqrt_big", b_unary_pos, OP_SQRT, BIG, ONE},
    {"log_big", b_unary_pos, OP_LOG, BIG, ONE},
    // views feeding a kernel
    {"tanh_perm", b_unary_perm, OP_TANH, S2(7, 13), ONE},
    {"gelu_perm_big", b_unary_perm, OP_GELU, BIG, ONE},
    {"sigmoid_slice", b_unary_slice, OP_SIGMOID, S2(7, 13), ONE},
    {"relu_expand", b_unary_expand, OP_RELU, S2(7, 13), ONE},
    {"rsqrt_slice", b_unary_slice, OP_RSQRT, S2(9, 40), ONE},
    // f16 in f32 registers
    {"gelu_f16", b_unary, OP_GELU, S2(7, 13), F16, ONE},
    {"exp_f16_big", b_unary, OP_EXP, BIG, F16, ONE},
    {"silu_f16_perm", b_unary_perm, OP_SILU, S2(33, 17), F16, ONE},
    // cast
    {"cast_f32_f16", b_cast_chain, OP_CAST, S2(7, 13), IA(DT_F16), .rtol = 1e-9, ONE},
    {"cast_f16_f32", b_cast_chain, OP_CAST, S2(7, 13), .dt = DT_F16, IA(DT_F32), .rtol = 1e-9, ONE},
    {"cast_f32_f16_big_perm", b_unary_perm, OP_CAST, BIG, IA(DT_F16), .rtol = 1e-9, ONE},
    {"cast_f32_i32", b_cast_chain, OP_CAST, S2(7, 13), IA(DT_I32), .rtol = 1e-9, ONE},
    {"cast_i32_f32", b_cast_from_int, OP_CAST, S2(7, 13), .dt = DT_I32, IA(DT_F32), .rtol = 1e-9,
     ONE},
    {"cast_i64_f16", b_cast_from_int, OP_CAST, S2(7, 13), .dt = DT_I64, IA(DT_F16), .rtol = 1e-9,
     ONE},
    {"cast_bool_f32", b_cast_from_bool, OP_CAST, S2(7, 13), IA(DT_F32), .rtol = 1e-9, ONE},
    {"cast_f32_bool", b_cast_chain, OP_CAST, S2(7, 13), IA(DT_BOOL), .rtol = 1e-9, ONE},
    // dropout: the mask rule is shared, so eager and the reference agree exactly
    {"dropout", b_unary, OP_DROPOUT, BIG, .fa = {0.3}, IA(7), ONE},
    {"dropout_p0", b_unary, OP_DROPOUT, S2(7, 13), ONE},
    {"dropout_f16", b_unary, OP_DROPOUT, S2(7, 13), F16, .fa = {0.5}, IA(3), ONE},
    // binary with broadcasting
    {"add", b_binary, OP_ADD, S2(7, 13), T2(7, 13), ONE},
    {"sub_row", b_binary, OP_SUB, S3(3, 7, 13), T1(13), ONE},
    {"mul_channel", b_binary, OP_MUL, S4(2, 5, 6, 7), T3(5, 1, 1), ONE},
    {"div_scalar", b_binary, OP_DIV, S2(7, 13), T1(1), ONE},
    {"div_scalar_left", b_binary, OP_DIV, S1(1), T2(7, 13), ONE},
    {"maximum_outer", b_binary, OP_MAXIMUM, S2(7, 1), T2(1, 13), ONE},
    {"add_big_row", b_binary, OP_ADD, BIG, T1(301), ONE},
    {"mul_big_channel", b_binary, OP_MUL, S4(2, 64, 33, 35), T3(64, 1, 1), ONE},
    {"sub_mid", b_binary, OP_SUB, S3(5, 7, 9), T3(5, 1, 9), ONE},
    {"add_perm", b_binary_perm, OP_ADD, S2(7, 13), ONE},
    {"mul_perm_big", b_binary_perm, OP_MUL, BIG, ONE},
    {"add_f16_row", b_binary, OP_ADD, S3(3, 7, 13), T1(13), F16, ONE},
    {"maximum_f16", b_binary, OP_MAXIMUM, S2(7, 13), T2(7, 13), F16, ONE},
    {"add_i32", b_binary_int, OP_ADD, S2(7, 13), T1(13), .dt = DT_I32, .rtol = 1e-12, ONE},
    {"mul_i64", b_binary_int, OP_MUL, S2(7, 13), T2(7, 1), .dt = DT_I64, .rtol = 1e-12, ONE},
    {"where", b_where, OP_WHERE, S2(7, 13), T2(7, 13), ONE},
    {"where_bcast", b_where, OP_WHERE, S3(3, 7, 13), T1(13), ONE},
    {"where_big", b_where, OP_WHERE, BIG, T1(1), ONE},
    {"where_f16", b_where, OP_WHERE, S2(7, 13), T2(1, 13), F16, ONE},
    // reductions
    {"sum_last", b_unary, OP_SUM, S3(5, 7, 9), IA(2), .rtol = 1e-5, .atol = 1e-5, ONE},
    {"sum_mid", b_unary, OP_SUM, S3(5, 7, 9), IA(1), .rtol = 1e-5, .atol = 1e-5, ONE},
    {"mean_first", b_unary, OP_MEAN, S3(5, 7, 9), IA(0), .rtol = 1e-5, .atol = 1e-5, ONE},
    {"max_mid", b_unary, OP_MAX, S3(5, 7, 9), IA(-2), ONE},
    {"sum_big_rows", b_unary, OP_SUM, BIG, IA(1), .rtol = 1e-5, .atol = 1e-4, ONE},
    {"mean_big_cols", b_unary, OP_MEAN, BIG, IA(0), .rtol = 1e-5, .atol = 1e-5, ONE},
    {"max_big_cols", b_unary, OP_MAX, S2(300, 1100), IA(0), ONE},
    {"max_perm", b_reduce_perm, OP_MAX, S3(5, 7, 9), IA(2), .kernels = 2},
    {"sum_1x1", b_unary, OP_SUM, S2(1, 1), IA(0), ONE},
    // softmax and norms
    {"softmax", b_unary, OP_SOFTMAX, S2(7, 13), ONE},
    {"softmax_big", b_unary, OP_SOFTMAX, S2(129, 1000), ONE},
    {"softmax_1", b_unary, OP_SOFTMAX, S2(5, 1), ONE},
    {"log_softmax", b_unary, OP_LOG_SOFTMAX, S3(2, 7, 13), .atol = 1e-5, ONE},
    {"log_softmax_perm", b_unary_perm, OP_LOG_SOFTMAX, S2(7, 13), .atol = 1e-5, .kernels = 2},
    {"layer_norm", b_layer_norm, OP_LAYER_NORM, S3(5, 7, 64), .fa = {1e-5}, .rtol = 1e-4,
     .atol = 1e-5, ONE},
    {"layer_norm_big", b_layer_norm, OP_LAYER_NORM, S2(64, 768), .fa = {1e-5}, .rtol = 1e-4,
     .atol = 1e-5, ONE},
    {"layer_norm_odd", b_layer_norm, OP_LAYER_NORM, S2(3, 13), .fa = {1e-3}, .rtol = 1e-4,
     .atol = 1e-5, ONE},
    {"rms_norm", b_layer_norm, OP_RMS_NORM, S3(5, 7, 64), .fa = {1e-6}, .rtol = 1e-4, .atol = 1e-5,
     ONE},
    {"batch_norm", b_channel_norm, OP_BATCH_NORM, S4(2, 3, 5, 7), .fa = {1e-5}, .rtol = 1e-4,
     .atol = 1e-5, ONE},
    {"batch_norm_2d", b_channel_norm, OP_BATCH_NORM, S2(9, 13), .fa = {1e-5}, .rtol = 1e-4,
     .atol = 1e-5, ONE},
    {"batch_norm_big", b_channel_norm, OP_BATCH_NORM, S4(2, 32, 28, 28), .fa = {1e-5}, .rtol = 1e-4,
     .atol = 1e-5, ONE},
    {"group_norm", b_channel_norm, OP_GROUP_NORM, S4(2, 6, 5, 7), IA(3), .fa = {1e-5}, .rtol = 1e-4,
     .atol = 1e-5, ONE},
    {"group_norm_big", b_channel_norm, OP_GROUP_NORM, S4(2, 32, 24, 24), IA(8), .fa = {1e-5},
     .rtol = 1e-4, .atol = 1e-5, ONE},
    // matmul
    {"matmul", b_matmul, OP_MATMUL, S2(7, 13), T2(13, 5), GEMM(13), ONE},
    {"matmul_1x1", b_matmul, OP_MATMUL, S2(1, 1), T2(1, 1), GEMM(1), ONE},
    {"matmul_vec", b_matmul, OP_MATMUL, S2(1, 13), T2(13, 1), GEMM(13), ONE},
    {"matmul_fold", b_matmul, OP_MATMUL, S3(3, 7, 13), T2(13, 5), GEMM(13), ONE},
    {"matmul_bcast", b_matmul, OP_MATMUL, S4(2, 1, 7, 13), T3(3, 13, 5), GEMM(13), ONE},
    {"matmul_batch_small", b_matmul, OP_MATMUL, S3(16, 8, 16), T3(16, 16, 8), GEMM(16), ONE},
    {"matmul_big", b_matmul, OP_MATMUL, S2(65, 300), T2(300, 129), GEMM(300), ONE},
    {"matmul_bt", b_matmul_bt, OP_MATMUL, S2(7, 13), T2(5, 13), GEMM(13), ONE},
    {"matmul_at", b_matmul_at, OP_MATMUL, S2(13, 7), T2(13, 5), GEMM(13), ONE},
    {"matmul_slice", b_matmul_slice, OP_MATMUL, S2(7, 13), T2(13, 5), GEMM(13), ONE},
    {"matmul_expand", b_matmul_expand, OP_MATMUL, S2(7, 13), T2(13, 5), GEMM(13), .kernels = 2},
    {"linear", b_linear, OP_LINEAR, S3(5, 7, 13), T2(6, 13), IA(1), GEMM(13), ONE},
    // f16 operands (AMP): converted to f32, one f32 GEMM, rounded to f16 once
    {"matmul_f16", b_matmul, OP_MATMUL, S2(7, 13), T2(13, 5), F16, ONE},
    {"matmul_f16_bt", b_matmul_bt, OP_MATMUL, S3(4, 70, 33), T2(21, 33), F16, ONE},
    {"matmul_f16_batched", b_matmul, OP_MATMUL, S3(6, 9, 13), T3(6, 13, 7), F16, ONE},
    {"linear_f16_bias", b_linear, OP_LINEAR, S3(5, 7, 13), T2(6, 13), IA(1), F16, ONE},
    {"linear_f16_big", b_linear, OP_LINEAR, S2(300, 96), T2(80, 96), IA(1), F16, ONE},
    {"linear_nobias", b_linear, OP_LINEAR, S2(7, 13), T2(6, 13), GEMM(13), ONE},
    {"linear_1d", b_linear, OP_LINEAR, S1(13), T2(6, 13), IA(1), GEMM(13), ONE},
    {"linear_big", b_linear, OP_LINEAR, S2(128, 256), T2(300, 256), IA(1), GEMM(256), ONE},
    {"linear_perm", b_linear_perm, OP_LINEAR, S3(2, 7, 13), T2(6, 13), GEMM(13), .kernels = 2},
    {"linear_slice", b_linear_slice, OP_LINEAR, S2(7, 13), T2(6, 13), GEMM(13), ONE},
    // convolution and pooling (ia: stride, padding, dilation, groups,
    // output padding; ia[9] adds a bias)
    {"conv2d", b_conv, OP_CONV2D, S4(2, 3, 9, 11), T4(4, 3, 3, 3), IA(1, 1, 1, 1, 1, 1, 1, 0, 0, 1),
     GEMM(27), ONE},
    {"conv2d_stride_dil", b_conv, OP_CONV2D, S4(2, 3, 13, 12), T4(5, 3, 3, 2),
     IA(2, 3, 0, 1, 2, 1, 1), GEMM(18), ONE},
    {"conv2d_groups", b_conv, OP_CONV2D, S4(1, 4, 8, 8), T4(6, 2, 3, 3),
     IA(1, 1, 1, 1, 1, 1, 2, 0, 0, 1), GEMM(18), ONE},
    {"conv2d_depthwise", b_conv, OP_CONV2D, S4(2, 4, 7, 7), T4(4, 1, 3, 3),
     IA(2, 2, 1, 1, 1, 1, 4, 0, 0, 1), GEMM(9), ONE},
    {"conv2d_1x1_big", b_conv, OP_CONV2D, S4(2, 32, 28, 28), T4(48, 32, 1, 1),
     IA(1, 1, 0, 0, 1, 1, 1, 0, 0, 1), GEMM(32), ONE},
    // a channels-last view (an NHWC tensor permuted) is read as it is
    {"conv2d_perm", b_conv_perm, OP_CONV2D, S4(1, 3, 6, 5), T4(2, 3, 3, 3), IA(1, 1, 1, 1, 1, 1, 1),
     GEMM(27), ONE},
    {"conv2d_perm_1x1", b_conv_perm, OP_CONV2D, S4(2, 5, 4, 3), T4(4, 5, 1, 1),
     IA(1, 1, 0, 0, 1, 1, 1), GEMM(5), ONE},
    {"conv2d_swap", b_conv_swap, OP_CONV2D, S4(1, 3, 6, 5), T4(2, 3, 3, 3), IA(1, 1, 1, 1, 1, 1, 1),
     GEMM(27), .kernels = 2},
    {"conv_transpose2d", b_conv, OP_CONV_TRANSPOSE2D, S4(2, 4, 5, 6), T4(4, 3, 3, 3),
     IA(2, 2, 1, 1, 1, 1, 1, 1, 1, 1), GEMM(36), ONE},
    {"conv_transpose2d_groups", b_conv, OP_CONV_TRANSPOSE2D, S4(1, 4, 5, 5), T4(4, 2, 2, 2),
     IA(2, 2, 0, 0, 1, 1, 2, 0, 0, 1), GEMM(8), ONE},
    {"conv_transpose2d_dil", b_conv, OP_CONV_TRANSPOSE2D, S4(1, 3, 4, 5), T4(3, 2, 3, 2),
     IA(1, 2, 2, 0, 2, 1, 1, 0, 1), GEMM(18), ONE},
    {"max_pool2d", b_unary, OP_MAX_POOL2D, S4(2, 3, 9, 11), IA(2, 2, 1, 1, 3, 3), ONE},
    {"max_pool2d_2x2", b_unary, OP_MAX_POOL2D, S4(1, 2, 8, 7), IA(2, 2, 0, 0, 2, 2), ONE},
    {"avg_pool2d", b_unary, OP_AVG_POOL2D, S4(2, 3, 9, 11), IA(2, 2, 1, 1, 3, 3), ONE},
    {"avg_pool2d_rect", b_unary, OP_AVG_POOL2D, S4(1, 2, 8, 9), IA(1, 3, 0, 1, 2, 3), ONE},
    {"max_pool2d_perm", b_pool_perm, OP_MAX_POOL2D, S4(1, 3, 6, 5), IA(1, 1, 1, 1, 3, 3), ONE},
    {"avg_pool2d_perm", b_pool_perm, OP_AVG_POOL2D, S4(2, 4, 6, 5), IA(2, 2, 1, 1, 3, 3), ONE},
    {"max_pool2d_swap", b_pool_swap, OP_MAX_POOL2D, S4(1, 3, 6, 5), IA(1, 1, 1, 1, 3, 3),
     .kernels = 2},
    {"upsample", b_unary, OP_UPSAMPLE_NEAREST, S4(2, 3, 4, 5), IA(2), ONE},
    {"upsample_f16_perm", b_pool_perm, OP_UPSAMPLE_NEAREST, S4(1, 3, 4, 5), IA(3), F16, ONE},
    // data movement
    {"embedding", b_embedding, OP_EMBEDDING, S2(11, 6), T2(3, 5), ONE},
    {"embedding_i64_big", b_embedding, OP_EMBEDDING, S2(1000, 64), T2(8, 128), IA(0, 1), ONE},
    {"embedding_f16", b_embedding, OP_EMBEDDING, S2(11, 6), T1(9), F16, ONE},
    {"reshape_view", b_reshape, OP_RESHAPE, S3(4, 5, 6), T2(20, 6), .kernels = 0},
    {"reshape_copy", b_reshape_perm, OP_RESHAPE, S2(7, 13), T1(91), ONE},
    {"views", b_views, OP_PERMUTE, .kernels = 0},
    {"contiguous_perm", b_contiguous_perm, OP_CONTIGUOUS, S3(4, 5, 6), ONE},
    {"contiguous_tiled", b_contiguous_perm, OP_CONTIGUOUS, S3(17, 19, 45), ONE},
    {"contiguous_tiled_big", b_contiguous_perm, OP_CONTIGUOUS, S3(3, 100, 129), ONE},
    {"transpose_batched", b_transpose_last, OP_CONTIGUOUS, S3(3, 40, 37), ONE},
    {"transpose_f16", b_transpose_last, OP_CONTIGUOUS, S3(2, 33, 70), F16, ONE},
    {"reshape_copy_tiled", b_reshape_perm, OP_RESHAPE, S2(70, 33), T1(2310), ONE},
    {"concat_0", b_concat, OP_CONCAT, S2(4, 13), IA(0), ONE},
    {"concat_1", b_concat, OP_CONCAT, S2(7, 4), IA(1), ONE},
    {"concat_f16", b_concat, OP_CONCAT, S2(7, 4), IA(-1), F16, ONE}, // axis -1 is 1
    // losses (ia0 is the ignored target; -100 ignores none)
    {"cross_entropy", b_cross_entropy, OP_CROSS_ENTROPY, S2(9, 13), .dt = DT_I32, IA(-100),
     .atol = 1e-5, ONE},
    {"cross_entropy_ignore", b_cross_entropy, OP_CROSS_ENTROPY, S2(40, 5), .dt = DT_I64, IA(3),
     .atol = 1e-5, ONE},
    {"cross_entropy_big", b_cross_entropy, OP_CROSS_ENTROPY, S2(64, 1000), .dt = DT_I32, IA(-100),
     .atol = 1e-5, ONE},
    {"mse_loss", b_mse, OP_MSE_LOSS, S2(7, 13), .atol = 1e-6, ONE},
    {"mse_loss_big", b_mse, OP_MSE_LOSS, BIG, .atol = 1e-5, ONE},
    // comparisons into bool
    {"ge", b_binary, OP_GE, S2(7, 13), T2(7, 13), ONE},
    {"ge_bcast_f16", b_binary, OP_GE, S3(3, 7, 13), T1(13), .dt = DT_F16, ONE},
    {"ge_perm_big", b_binary_perm, OP_GE, BIG, ONE},
    {"ge_i32", b_binary_int, OP_GE, S2(7, 13), T2(7, 1), .dt = DT_I32, ONE},
    // training: activation gradients, dy * f'(x) for every unary op with one
    AG(NEG),
    AG(EXP),
    AG(LOG),
    AG(SQRT),
    AG(RSQRT),
    AG(RECIP),
    AG(ABS),
    AG(TANH),
    AG(SIGMOID),
    AG(RELU),
    AG(RELU6),
    AG(GELU),
    AG(GELU_TANH),
    AG(SILU),
    AG(HARDSWISH),
    AG(HARDSIGMOID),
    AG(MISH),
    {"act_grad_LEAKY_RELU", b_act_grad, OP_ACT_GRAD, S2(7, 13), IA(OP_LEAKY_RELU), .fa = {0.2},
     .atol = 1e-5, ONE},
    {"act_grad_ELU", b_act_grad, OP_ACT_GRAD, S2(7, 13), IA(OP_ELU), .fa = {1.3}, .atol = 1e-5,
     ONE},
    {"act_grad_SOFTPLUS", b_act_grad, OP_ACT_GRAD, S2(7, 13), IA(OP_SOFTPLUS), .fa = {2.0, 3.0},
     .atol = 1e-5, ONE},
    {"act_grad_SCALE", b_act_grad, OP_ACT_GRAD, S2(7, 13), IA(OP_SCALE), .fa = {-1.5, 0.25}, ONE},
    {"act_grad_gelu_big", b_act_grad, OP_ACT_GRAD, BIG, IA(OP_GELU), .atol = 1e-5, ONE},
    {"act_grad_silu_views", b_act_grad_views, OP_ACT_GRAD, S2(33, 17), IA(OP_SILU), .atol = 1e-5,
     ONE},
    {"act_grad_tanh_f16", b_act_grad, OP_ACT_GRAD, S2(7, 13), IA(OP_TANH), F16, ONE},
    // sums over broadcast axes
    {"sum_to_bias", b_sum_to, OP_SUM_TO, S2(7, 13), T1(13), .atol = 1e-5, ONE},
    {"sum_to_rows", b_sum_to, OP_SUM_TO, S2(7, 13), T2(7, 1), .atol = 1e-5, ONE},
    {"sum_to_scalar", b_sum_to, OP_SUM_TO, S2(7, 13), .atol = 1e-5, ONE},
    {"sum_to_channel", b_sum_to, OP_SUM_TO, S4(2, 5, 6, 7), T3(5, 1, 1), .atol = 1e-5, ONE},
    {"sum_to_same", b_sum_to, OP_SUM_TO, S2(7, 13), T2(7, 13), ONE},
    {"sum_to_inner", b_sum_to, OP_SUM_TO, S3(3, 7, 13), T3(3, 1, 13), .atol = 1e-5, ONE},
    {"sum_to_big_bias", b_sum_to, OP_SUM_TO, BIG, T1(301), .atol = 1e-4, ONE},
    {"sum_to_big_scalar", b_sum_to, OP_SUM_TO, BIG, .atol = 1e-3, ONE},
    {"sum_to_big_channel", b_sum_to, OP_SUM_TO, S4(4, 64, 33, 35), T3(64, 1, 1), .atol = 1e-4, ONE},
    {"sum_to_big_outer", b_sum_to, OP_SUM_TO, S3(40, 3, 700), T2(1, 700), .atol = 1e-4, ONE},
    {"sum_to_perm", b_sum_to_perm, OP_SUM_TO, S2(7, 13), T1(13), .atol = 1e-5, .kernels = 2},
    {"sum_to_f16", b_sum_to, OP_SUM_TO, S3(3, 7, 13), T2(1, 13), F16, ONE},
    {"sum_to_f16_big", b_sum_to, OP_SUM_TO, BIG, T1(301), .dt = DT_F16, .rtol = 2e-3, .atol = 2e-2,
     ONE},
    // softmax gradients (y is any tensor: the formulas do not need a softmax)
    {"softmax_grad", b_binary, OP_SOFTMAX_GRAD, S2(7, 13), T2(7, 13), ONE},
    {"softmax_grad_big", b_binary, OP_SOFTMAX_GRAD, S2(129, 1000), T2(129, 1000), .atol = 1e-4,
     ONE},
    {"log_softmax_grad", b_binary, OP_LOG_SOFTMAX_GRAD, S3(2, 7, 13), T3(2, 7, 13), .atol = 1e-5,
     ONE},
    {"log_softmax_grad_perm", b_binary_perm, OP_LOG_SOFTMAX_GRAD, S2(7, 13), .atol = 1e-5,
     .kernels = 2},
    // norm gradients
    {"layer_norm_grad", b_norm_grad, OP_LAYER_NORM_GRAD, S3(5, 7, 64), NORM(1e-5, 1e-5), ONE},
    {"layer_norm_grad_odd", b_norm_grad, OP_LAYER_NORM_GRAD, S2(3, 13), NORM(1e-3, 1e-5), ONE},
    {"layer_norm_grad_big", b_norm_grad, OP_LAYER_NORM_GRAD, S2(64, 768), NORM(1e-5, 1e-5), ONE},
    {"layer_norm_grad_perm", b_norm_grad_perm, OP_LAYER_NORM_GRAD, S2(7, 13), NORM(1e-5, 1e-5),
     .kernels = 2},
    {"layer_norm_wgrad", b_norm_grad, OP_LAYER_NORM_WGRAD, S3(5, 7, 64), NORM(1e-5, 1e-5), ONE},
    {"layer_norm_wgrad_big", b_norm_grad, OP_LAYER_NORM_WGRAD, S2(257, 301), NORM(1e-5, 1e-4), ONE},
    {"rms_norm_grad", b_norm_grad, OP_RMS_NORM_GRAD, S3(5, 7, 64), NORM(1e-6, 1e-5), ONE},
    {"rms_norm_grad_big", b_norm_grad, OP_RMS_NORM_GRAD, S2(64, 768), NORM(1e-6, 1e-5), ONE},
    {"rms_norm_wgrad", b_norm_grad, OP_RMS_NORM_WGRAD, S2(9, 13), NORM(1e-6, 1e-5), ONE},
    {"rms_norm_wgrad_big", b_norm_grad, OP_RMS_NORM_WGRAD, S2(257, 301), NORM(1e-6, 1e-4), ONE},
    {"batch_norm_grad", b_norm_grad, OP_BATCH_NORM_GRAD, S4(2, 3, 5, 7), NORM(1e-5, 1e-5), ONE},
    {"batch_norm_grad_2d", b_norm_grad, OP_BATCH_NORM_GRAD, S2(9, 13), NORM(1e-5, 1e-5), ONE},
    {"batch_norm_grad_big", b_norm_grad, OP_BATCH_NORM_GRAD, S4(2, 32, 28, 28), NORM(1e-5, 1e-5),
     ONE},
    {"batch_norm_wgrad", b_norm_grad, OP_BATCH_NORM_WGRAD, S4(2, 3, 5, 7), NORM(1e-5, 1e-5), ONE},
    {"batch_norm_stats", b_unary, OP_BATCH_NORM_STATS, S4(2, 3, 5, 7), NORM(1e-5, 1e-5), ONE},
    // channels-last operands: the per-channel column sums (cpu_grad.c, bn_nhwc)
    {"batch_norm_stats_nhwc", b_bn_nhwc, OP_BATCH_NORM_STATS, S4(2, 5, 6, 7), NORM(1e-5, 1e-5),
     ONE},
    {"batch_norm_stats_nhwc_big", b_bn_nhwc, OP_BATCH_NORM_STATS, S4(4, 24, 20, 20),
     NORM(1e-5, 1e-5), ONE},
    // eager allocates dx plain, so dy and x are copied (3 kernels); the
    // compiled mode's channels-last dx takes the column sums (test_compile)
    {"batch_norm_grad_nhwc", b_bn_nhwc, OP_BATCH_NORM_GRAD, S4(2, 5, 6, 7), NORM(1e-5, 1e-5),
     .kernels = 3},
    {"batch_norm_wgrad_nhwc", b_bn_nhwc, OP_BATCH_NORM_WGRAD, S4(2, 5, 6, 7), NORM(1e-5, 1e-5),
     ONE},
    {"batch_norm_wgrad_nhwc_big", b_bn_nhwc, OP_BATCH_NORM_WGRAD, S4(4, 24, 20, 20),
     NORM(1e-5, 1e-5), ONE},
    {"batch_norm_stats_big", b_unary, OP_BATCH_NORM_STATS, S4(4, 16, 24, 24), NORM(1e-5, 1e-5),
     ONE},
    {"batch_norm_wgrad_big", b_norm_grad, OP_BATCH_NORM_WGRAD, S4(2, 32, 28, 28), NORM(1e-5, 1e-4),
     ONE},
    {"group_norm_grad", b_norm_grad, OP_GROUP_NORM_GRAD, S4(2, 6, 5, 7), IA(3), NORM(1e-5, 1e-5),
     ONE},
    {"group_norm_grad_big", b_norm_grad, OP_GROUP_NORM_GRAD, S4(2, 32, 24, 24), IA(8),
     NORM(1e-5, 1e-5), ONE},
    {"group_norm_wgrad", b_norm_grad, OP_GROUP_NORM_WGRAD, S4(2, 6, 5, 7), IA(2), NORM(1e-5, 1e-5),
     ONE},
    {"group_norm_wgrad_big", b_norm_grad, OP_GROUP_NORM_WGRAD, S4(2, 32, 24, 24), IA(8),
     NORM(1e-5, 1e-4), ONE},
    {"batch_norm_train", b_channel_norm, OP_BATCH_NORM, S4(2, 3, 5, 7), IA(1), .fa = {1e-5, 0.1},
     .rtol = 1e-4, .atol = 1e-5, ONE},
    {"batch_norm_train_2d_big", b_channel_norm, OP_BATCH_NORM, S2(300, 130), IA(1),
     .fa = {1e-5, 0.1}, .rtol = 1e-4, .atol = 1e-5, ONE},
    // convolution and pooling gradients (ia as conv2d and the pools)
    {"conv2d_grad_input", b_conv_grad, OP_CONV2D_GRAD_INPUT, S4(2, 3, 9, 11), T4(4, 3, 3, 3),
     IA(1, 1, 1, 1, 1, 1, 1), GEMM(36), ONE},
    {"conv2d_grad_input_stride_dil", b_conv_grad, OP_CONV2D_GRAD_INPUT, S4(2, 3, 13, 12),
     T4(5, 3, 3, 2), IA(2, 3, 0, 1, 2, 1, 1), GEMM(45), ONE},
    {"conv2d_grad_input_groups", b_conv_grad, OP_CONV2D_GRAD_INPUT, S4(1, 4, 8, 8), T4(6, 2, 3, 3),
     IA(1, 1, 1, 1, 1, 1, 2), GEMM(27), ONE},
    {"conv2d_grad_weight", b_conv_grad, OP_CONV2D_GRAD_WEIGHT, S4(2, 3, 9, 11), T4(4, 3, 3, 3),
     IA(1, 1, 1, 1, 1, 1, 1), GEMM(198), ONE},
    {"conv2d_grad_weight_stride_dil", b_conv_grad, OP_CONV2D_GRAD_WEIGHT, S4(2, 3, 13, 12),
     T4(5, 3, 3, 2), IA(2, 3, 0, 1, 2, 1, 1), GEMM(80), ONE},
    {"conv2d_grad_weight_depthwise", b_conv_grad, OP_CONV2D_GRAD_WEIGHT, S4(2, 4, 7, 7),
     T4(4, 1, 3, 3), IA(2, 2, 1, 1, 1, 1, 4), GEMM(32), ONE},
    // channels-last dy and x, taken without a copy (one kernel)
    {"conv2d_grad_input_nhwc", b_conv_grad, OP_CONV2D_GRAD_INPUT, S4(2, 3, 9, 11), T4(4, 3, 3, 3),
     IA(1, 1, 1, 1, 1, 1, 1), GEMM(36), ONE, .nhwc = true},
    {"conv2d_grad_input_nhwc_1x1", b_conv_grad, OP_CONV2D_GRAD_INPUT, S4(2, 6, 5, 4),
     T4(8, 6, 1, 1), IA(1, 1, 0, 0, 1, 1, 1), GEMM(8), ONE, .nhwc = true},
    {"conv2d_grad_weight_nhwc", b_conv_grad, OP_CONV2D_GRAD_WEIGHT, S4(2, 3, 9, 11), T4(4, 3, 3, 3),
     IA(1, 1, 1, 1, 1, 1, 1), GEMM(198), ONE, .nhwc = true},
    {"conv2d_grad_weight_nhwc_depthwise", b_conv_grad, OP_CONV2D_GRAD_WEIGHT, S4(2, 4, 7, 7),
     T4(4, 1, 3, 3), IA(2, 2, 1, 1, 1, 1, 4), GEMM(32), ONE, .nhwc = true},
    {"max_pool2d_grad", b_pool_grad, OP_MAX_POOL2D_GRAD, S4(2, 3, 9, 11), IA(2, 2, 1, 1, 3, 3),
     ONE},
    {"max_pool2d_grad_overlap", b_pool_grad, OP_MAX_POOL2D_GRAD, S4(1, 2, 8, 7),
     IA(1, 1, 0, 0, 2, 2), ONE},
    {"avg_pool2d_grad", b_pool_grad, OP_AVG_POOL2D_GRAD, S4(2, 3, 9, 11), IA(2, 2, 1, 1, 3, 3),
     ONE},
    {"avg_pool2d_grad_rect", b_pool_grad, OP_AVG_POOL2D_GRAD, S4(1, 2, 8, 9), IA(1, 3, 0, 1, 2, 3),
     ONE},
    // data movement gradients
    {"embedding_grad", b_embedding_grad, OP_EMBEDDING_GRAD, S2(11, 6), T2(3, 5), .atol = 1e-5, ONE},
    {"embedding_grad_repeats", b_embedding_grad, OP_EMBEDDING_GRAD, S2(3, 7), T1(40), .atol = 1e-5,
     ONE},
    {"embedding_grad_i64_big", b_embedding_grad, OP_EMBEDDING_GRAD, S2(1000, 64), T2(8, 128), IA(1),
     .atol = 1e-5, ONE},
    {"slice_grad", b_slice_grad, OP_SLICE_GRAD, S3(4, 9, 5), T3(4, 3, 5), IA(1, 2), ONE},
    {"slice_grad_first", b_slice_grad, OP_SLICE_GRAD, S2(7, 13), T2(2, 13), IA(0, 5), ONE},
    {"slice_grad_last_perm", b_slice_grad, OP_SLICE_GRAD, S2(7, 13), T2(7, 4), IA(-1, 0, 1), ONE},
    {"slice_grad_f16_big", b_slice_grad, OP_SLICE_GRAD, S2(257, 301), T2(257, 100), IA(1, 150), F16,
     ONE},
    // loss gradients
    {"cross_entropy_grad", b_cross_entropy_grad, OP_CROSS_ENTROPY_GRAD, S2(9, 13), .dt = DT_I32,
     IA(-100), ONE},
    {"cross_entropy_grad_ignore", b_cross_entropy_grad, OP_CROSS_ENTROPY_GRAD, S2(40, 5),
     .dt = DT_I64, IA(3), ONE},
    {"cross_entropy_grad_big", b_cross_entropy_grad, OP_CROSS_ENTROPY_GRAD, S2(64, 1000),
     .dt = DT_I32, IA(-100), ONE},
    {"mse_loss_grad", b_mse_grad, OP_MSE_LOSS_GRAD, S2(7, 13), ONE},
    {"mse_loss_grad_perm_big", b_mse_grad, OP_MSE_LOSS_GRAD, BIG, IA(1), ONE},
    // updates at step 1 (several steps: test_updates_steps)
    {"sgd", b_update, OP_SGD, S2(7, 13), .fa = {0.1, 0, 0.01}, ONE},
    {"sgd_momentum", b_update, OP_SGD, S2(7, 13), .fa = {0.1, 0.9, 0.01, 0.1}, ONE},
    {"sgd_nesterov_perm", b_update, OP_SGD, S2(7, 13), IA(1, 1), .fa = {0.1, 0.9, 0, 0},
     .kernels = 2},
    {"sgd_big", b_update, OP_SGD, BIG, .fa = {0.1, 0.9, 0.01, 0}, ONE},
    {"adamw", b_update, OP_ADAMW, S2(7, 13), .fa = {1e-2, 0.9, 0.999, 1e-8, 0.01}, ONE},
    {"adamw_big", b_update, OP_ADAMW, BIG, .fa = {1e-3, 0.8, 0.99, 1e-6, 0.1}, ONE},
    {"running_stat", b_update, OP_RUNNING_STAT, S1(13), .fa = {0.1, 1.5}, ONE},
    // the grad scaler: the non-finite check, updates that unscale or skip, the scale's update
    {"found_inf", b_found_inf, OP_FOUND_INF, BIG, T2(7, 13), .kernels = 2},
    {"found_inf_nan", b_found_inf, OP_FOUND_INF, S2(7, 13), T1(5), IA(0, 0, 1), .kernels = 2},
    {"sgd_scaled", b_update_scaled, OP_SGD, S2(7, 13), .fa = {0.1, 0, 0.01}, .kernels = 2},
    {"sgd_momentum_scaled_big", b_update_scaled, OP_SGD, BIG, .fa = {0.1, 0.9, 0.01, 0.1},
     .kernels = 2},
    {"sgd_momentum_skipped", b_update_scaled, OP_SGD, S2(7, 13), IA(1, 0, 1),
     .fa = {0.1, 0.9, 0.01, 0}, .kernels = 2},
    {"adamw_scaled", b_update_scaled, OP_ADAMW, S2(7, 13), .fa = {1e-2, 0.9, 0.999, 1e-8, 0.01},
     .kernels = 2},
    {"adamw_scaled_big", b_update_scaled, OP_ADAMW, BIG, .fa = {1e-3, 0.8, 0.99, 1e-6, 0.1},
     .kernels = 2},
    {"adamw_skipped", b_update_scaled, OP_ADAMW, S2(7, 13), IA(0, 0, 1),
     .fa = {1e-2, 0.9, 0.999, 1e-8, 0.01}, .kernels = 2},
    {"scaler_update_grow", b_scaler_update, OP_SCALER_UPDATE, S1(9), IA(3), .fa = {2, 0.5, 2},
     .kernels = 2},
    {"scaler_update_count", b_scaler_update, OP_SCALER_UPDATE, S1(9), IA(3), .fa = {2, 0.5, 0},
     .kernels = 2},
    {"scaler_update_backoff", b_scaler_update, OP_SCALER_UPDATE, S1(9), IA(3, 0, 1),
     .fa = {2, 0.5, 2}, .kernels = 2},
    // executor: intermediates are freed after their last use
    {"chain", b_chain, OP_TANH, S2(64, 1024), .kernels = 8},
};

#define NCASES ((int)(sizeof cases / sizeof cases[0]))

// ---- the harness ----------------------------------------------------------------

static model *case_model(const op_case *tc) {
    graph *g = graph_new();
    assert_non_null(g);
    if (tc->build(g, tc) < 0)
        fail_msg("%s: building the graph failed: %s", tc->name, graph_error(g));
    model *m = model_new(g, tc->name, "test", 1);
    assert_non_null(m);
    assert_int_equal(model_init_values(m, 1234), 0);
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

// Every element: |e - r| <= atol + rtol |r| (both NaN counts as equal).
static int compare(const char *name, int k, const tensor *t, const double *ref, double rtol,
                   double atol) {
    int bad = 0;
    for (int64_t i = 0; i < tensor_numel(t); i++) {
        double e = tensor_get_flat(t, i), r = ref[i];
        if ((isnan(e) && isnan(r)) || fabs(e - r) <= atol + rtol * fabs(r))
            continue;
        if (bad++ < 5)
            print_error("%s: output %d element %lld: eager %.9g, reference %.9g (diff %.3g)\n",
                        name, k, (long long)i, e, r, fabs(e - r));
    }
    return bad;
}

static size_t padded(size_t bytes) { return (bytes + 63) & ~(size_t)63; }

static void run_case(const op_case *tc) {
    model *m = case_model(tc);
    const graph *g = m->g;
    eager *e = eager_new(m);
    assert_non_null(e);
    tensor *outs[8], *again[8];
    eager_stats st, st2;
    // live before the step: the sources (and whatever an earlier failed
    // case leaked when its assertion jumped out)
    size_t live = tensor_mem_live();
    // the reference first: update ops change the model's values in eager
    char err[256];
    double **ref = ref_run_all(m, err, sizeof err);
    if (!ref)
        fail_msg("%s: ref_run_all failed: %s", tc->name, err);
    if (eager_run(e, outs, &st) < 0)
        fail_msg("%s: eager_run failed: %s", tc->name, eager_error(e));
    bool updates = false;
    for (int i = 0; i < g->n; i++)
        updates |= op_kind(g->nodes[i].op) == OPK_UPDATE;
    double rtol = tc->rtol ? tc->rtol : 1e-5, atol = tc->atol ? tc->atol : 1e-6;
    int bad = 0;
    size_t out_bytes = 0, all_bytes = 0;
    for (int i = 0; i < g->n; i++)
        if (op_kind(g->nodes[i].op) != OPK_SOURCE)
            all_bytes += padded(graph_node_bytes(&g->nodes[i]));
    for (int k = 0; k < g->noutputs; k++) {
        const graph_node *n = &g->nodes[g->outputs[k]];
        assert_int_equal(outs[k]->dtype, n->dtype);
        assert_int_equal(outs[k]->ndim, n->ndim);
        assert_memory_equal(outs[k]->shape, n->shape, (size_t)n->ndim * sizeof n->shape[0]);
        bad += compare(tc->name, k, outs[k], ref[g->outputs[k]], rtol, atol);
        if (op_kind(n->op) != OPK_VIEW && op_kind(n->op) != OPK_SOURCE && n->op != OP_CONTIGUOUS &&
            op_kind(n->op) != OPK_UPDATE) // an update's value is its parameter
            out_bytes += tensor_nbytes(outs[k]);
    }
    if (bad)
        fail_msg("%s: %d elements differ from the reference", tc->name, bad);
    if (st.kernels != tc->kernels)
        fail_msg("%s: %lld kernels launched, expected %d", tc->name, (long long)st.kernels,
                 tc->kernels);
    // the step's peak holds the sources and each computed output at least,
    // and never more than every node's buffer twice over (internal copies);
    // an f16 GEMM also holds f32 copies of its operands and result (twice
    // their f16 bytes, each rounded up to the 64-byte allocation)
    size_t scratch =
        tc->dt == DT_F16 && op_kind(tc->op) == OPK_GEMM ? 2 * live + 2 * all_bytes + 4 * 64 : 0;
    if (st.peak_bytes < live + out_bytes || st.peak_bytes > live + 2 * all_bytes + scratch)
        fail_msg("%s: peak %zu bytes; live before %zu, outputs %zu, all nodes %zu", tc->name,
                 st.peak_bytes, live, out_bytes, all_bytes);
    // a second step: same kernels, same bits (cached primitives, no state;
    // updates move their parameters, test_updates_steps follows them)
    if (eager_run(e, again, &st2) < 0)
        fail_msg("%s: second eager_run failed: %s", tc->name, eager_error(e));
    assert_int_equal(st2.kernels, st.kernels);
    for (int k = 0; k < g->noutputs; k++) {
        for (int64_t i = 0; !updates && i < tensor_numel(outs[k]); i++) {
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
    eager_free(e);
    model_free(m);
}

// One cmocka test per case, so a failure names the case.
static void test_case(void **state) { run_case((const op_case *)*state); }

// Every op in ops.def appears in at least one case graph.
static void test_every_op_covered(void **state) {
    (void)state;
    bool seen[OP_COUNT] = {0};
    for (int c = 0; c < NCASES; c++) {
        graph *g = graph_new();
        assert_non_null(g);
        if (cases[c].build(g, &cases[c]) < 0)
            fail_msg("%s: %s", cases[c].name, graph_error(g));
        for (int i = 0; i < g->n; i++)
            seen[g->nodes[i].op] = true;
        graph_free(g);
    }
    int missing = 0;
    for (int o = 0; o < OP_COUNT; o++)
        if (!seen[o]) {
            print_error("op %s has no case in tests/test_ops.c\n", op_name((enum op)o));
            missing++;
        }
    assert_int_equal(missing, 0);
}

// The kept fraction of dropout is 1 - p, and kept values are scaled.
static void test_dropout_rate(void **state) {
    (void)state;
    const op_case tc = {"dropout_rate", b_unary, OP_DROPOUT, S2(256, 400), .fa = {0.25}, IA(11)};
    model *m = case_model(&tc);
    eager *e = eager_new(m);
    tensor *y;
    assert_int_equal(eager_run(e, &y, NULL), 0);
    const tensor *x = m->values[0];
    int64_t kept = 0, n = tensor_numel(y);
    for (int64_t i = 0; i < n; i++) {
        double v = tensor_get_flat(y, i);
        if (v != 0) {
            kept++;
            assert_true(fabs(v - tensor_get_flat(x, i) / 0.75) <= 1e-6 * fabs(v));
        }
    }
    double frac = (double)kept / (double)n; // binomial sd ~0.0014
    if (fabs(frac - 0.75) > 0.01)
        fail_msg("dropout kept %.4f of elements, expected 0.75", frac);
    tensor_free(y);
    eager_free(e);
    model_free(m);
}

// Bad data and unsupported dtypes are errors with a message, not crashes,
// and the step leaves nothing allocated.
static void expect_error(const op_case *tc, const char *eager_says, bool ref_fails) {
    model *m = case_model(tc);
    size_t live = tensor_mem_live();
    eager *e = eager_new(m);
    tensor *y[8];
    assert_int_equal(eager_run(e, y, NULL), -1);
    if (!strstr(eager_error(e), eager_says))
        fail_msg("%s: eager error \"%s\" does not say \"%s\"", tc->name, eager_error(e),
                 eager_says);
    assert_null(y[0]);
    assert_int_equal(tensor_mem_live(), live);
    char err[256] = "";
    double **ref = ref_run_all(m, err, sizeof err);
    if (ref_fails) {
        assert_null(ref);
        assert_non_null(strstr(err, eager_says));
    } else {
        assert_non_null(ref);
        for (int i = 0; i < m->g->n; i++)
            free(ref[i]);
        free(ref);
    }
    eager_free(e);
    model_free(m);
}

static void test_errors(void **state) {
    (void)state;
    const op_case emb = {"embedding_bad", b_embedding_bad, OP_EMBEDDING, S2(5, 4), T1(200)};
    expect_error(&emb, "outside [0, 5)", true);
    const op_case ce = {"ce_bad",  b_cross_entropy, OP_CROSS_ENTROPY,
                        S2(50, 4), .dt = DT_I32,    IA(-100, 1)};
    expect_error(&ce, "outside [0, 4)", true);
    const op_case mm = {"matmul_i32", b_matmul, OP_MATMUL, S2(4, 5), T2(5, 3), .dt = DT_I32};
    expect_error(&mm, "i32", false);
    // f16 runs everywhere (tests/test_f16.c); integers in a float kernel do not
    const op_case cv = {"pool_i32",     b_pool_perm,          OP_MAX_POOL2D,
                        S4(1, 2, 4, 4), IA(1, 1, 0, 0, 2, 2), .dt = DT_I32};
    expect_error(&cv, "max_pool2d: dtype i32 is not supported", false);
    const op_case dv = {"div_i32", b_binary_int, OP_DIV, S2(3, 4), T2(3, 4), .dt = DT_I32};
    expect_error(&dv, "i32", false);
    // ids drawn from [0, 5 + 4): some fall outside the (5, 3) table
    const op_case eg = {
        "embedding_grad_bad", b_embedding_grad, OP_EMBEDDING_GRAD, S2(5, 3), T1(100), IA(0, 4)};
    expect_error(&eg, "outside [0, 5)", true);
    const op_case ag = {"act_grad_cast", b_act_grad, OP_ACT_GRAD, S2(3, 4), IA(OP_CAST)};
    expect_error(&ag, "no derivative for cast", true);
    const op_case sg = {"sgd_no_buffer", b_binary, OP_SGD, S2(3, 4), T2(3, 4), .fa = {0.1, 0.9}};
    expect_error(&sg, "momentum buffer", true);
    const op_case bn = {"bn_train_one", b_channel_norm, OP_BATCH_NORM,
                        S2(1, 4),       IA(1),          .fa = {1e-5, 0.1}};
    expect_error(&bn, "more than one value per channel", true);
    const op_case gg = {"group_norm_grad_groups", b_norm_grad, OP_GROUP_NORM_GRAD, S4(2, 6, 2, 2),
                        IA(4)};
    expect_error(&gg, "groups do not divide", true);
}

// A model whose values were never set up is refused, not dereferenced.
static void test_no_values(void **state) {
    (void)state;
    graph *g = graph_new();
    int x = graph_input(g, "x", DT_F32, 1, (int64_t[]){4});
    graph_output(g, graph_unary(g, OP_EXP, x));
    model *m = model_new(g, "novalues", "test", 1);
    eager *e = eager_new(m);
    tensor *y;
    assert_int_equal(eager_run(e, &y, NULL), -1);
    assert_non_null(strstr(eager_error(e), "model_init_values"));
    char err[256];
    double *r;
    assert_int_equal(ref_run(m, &r, err, sizeof err), -1);
    assert_non_null(strstr(err, "model_init_values"));
    eager_free(e);
    model_free(m);
}

// ref_run returns copies of the outputs only (a node output twice gets two).
static void test_ref_run_outputs(void **state) {
    (void)state;
    const op_case tc = {"ref_run", b_unary, OP_TANH, S2(3, 4)};
    model *m = case_model(&tc);
    graph_output(m->g, m->g->outputs[0]);
    double *r[8];
    char err[256];
    assert_int_equal(ref_run(m, r, err, sizeof err), 0);
    for (int i = 0; i < 12; i++) {
        assert_true(r[0][i] == tanh(tensor_get_flat(m->values[0], i)));
        assert_true(r[1][i] == r[0][i]);
    }
    assert_ptr_not_equal(r[0], r[1]);
    free(r[0]);
    free(r[1]);
    model_free(m);
}

// ---- training over several steps -------------------------------------------------

// Every element of t against n doubles: |t - r| <= atol + rtol |r|.
static void expect_close(const char *what, int step, const tensor *t, const double *r, double rtol,
                         double atol) {
    for (int64_t i = 0; i < tensor_numel(t); i++) {
        double e = tensor_get_flat(t, i);
        if (!(fabs(e - r[i]) <= atol + rtol * fabs(r[i])))
            fail_msg("%s, step %d, element %lld: eager %.9g, reference %.9g", what, step,
                     (long long)i, e, r[i]);
    }
}

// Runs m for `steps` steps in eager and in a reference session, redrawing
// the inputs each step; after each, every output and every PARAM and BUFFER
// (the updated state) must agree.
static void train_steps(model *m, int steps, double rtol, double atol) {
    const graph *g = m->g;
    char err[256];
    ref_session *rs = ref_session_new(m, err, sizeof err);
    if (!rs)
        fail_msg("ref_session_new: %s", err);
    eager *e = eager_new(m);
    assert_non_null(e);
    for (int step = 1; step <= steps; step++) {
        assert_int_equal(model_init_inputs(m, 99, (uint64_t)step), 0);
        tensor *outs[8];
        double *ref[8];
        eager_set_step(e, (uint64_t)step);
        if (eager_run(e, outs, NULL) < 0)
            fail_msg("step %d: eager_run: %s", step, eager_error(e));
        if (ref_session_run(rs, (uint64_t)step, ref, err, sizeof err) < 0)
            fail_msg("step %d: ref_session_run: %s", step, err);
        for (int k = 0; k < g->noutputs; k++) {
            expect_close(op_name(g->nodes[g->outputs[k]].op), step, outs[k], ref[k], rtol, atol);
            tensor_free(outs[k]);
            free(ref[k]);
        }
        for (int i = 0; i < g->n; i++)
            if (g->nodes[i].op == OP_PARAM || g->nodes[i].op == OP_BUFFER)
                expect_close(g->nodes[i].name, step, m->values[i], ref_session_source(rs, i), rtol,
                             atol);
    }
    assert_null(ref_session_source(rs, g->outputs[0])); // not a source
    eager_free(e);
    ref_session_free(rs);
}

// SGD (plain; momentum with nesterov), AdamW and a running statistic over
// three steps, with gradients that depend on the parameters (p * x), so
// each step's state feeds the next.
static void test_updates_steps(void **state) {
    (void)state;
    graph *g = graph_new();
    int64_t s2[] = {5, 7}, s1[] = {13};
    int p1 = graph_param(g, "p1", 2, s2, INIT_NORMAL, 1.0);
    int g1 = graph_binary(g, OP_MUL, p1, graph_input(g, "x1", DT_F32, 2, s2));
    int buf = graph_buffer(g, "buf", DT_F32, 2, s2, INIT_ZEROS, 0);
    int64_t nesterov[GRAPH_MAX_IA] = {1};
    graph_output(g, graph_op(g, OP_SGD, 3, (int[]){p1, g1, buf}, nesterov,
                             (double[GRAPH_MAX_FA]){0.1, 0.9, 0.01, 0.1}));
    int p2 = graph_param(g, "p2", 1, s1, INIT_NORMAL, 1.0);
    int g2 = graph_binary(g, OP_MUL, p2, graph_input(g, "x2", DT_F32, 1, s1));
    int m2 = graph_buffer(g, "m2", DT_F32, 1, s1, INIT_ZEROS, 0);
    int v2 = graph_buffer(g, "v2", DT_F32, 1, s1, INIT_ZEROS, 0);
    graph_output(g, graph_op(g, OP_ADAMW, 4, (int[]){p2, g2, m2, v2}, NULL,
                             (double[GRAPH_MAX_FA]){1e-2, 0.9, 0.999, 1e-8, 0.01}));
    int p3 = graph_param(g, "p3", 1, s1, INIT_NORMAL, 1.0);
    int g3 = graph_input(g, "g3", DT_F32, 1, s1);
    graph_output(
        g, graph_op(g, OP_SGD, 2, (int[]){p3, g3}, NULL, (double[GRAPH_MAX_FA]){0.05, 0, 0.1, 0}));
    int rs = graph_buffer(g, "rs", DT_F32, 1, s1, INIT_ONES, 0);
    int y = graph_op(g, OP_RUNNING_STAT, 2, (int[]){rs, graph_input(g, "st", DT_F32, 1, s1)}, NULL,
                     (double[GRAPH_MAX_FA]){0.1, 2.0});
    if (y < 0)
        fail_msg("%s", graph_error(g));
    graph_output(g, y);
    model *m = model_new(g, "updates", "test", 1);
    assert_int_equal(model_init_values(m, 5), 0);
    tensor *p0 = tensor_contiguous(m->values[p1]);
    train_steps(m, 3, 1e-5, 1e-6);
    // the model's own tensors moved (eager wrote them in place)
    assert_true(tensor_get_flat(m->values[p1], 0) != tensor_get_flat(p0, 0));
    tensor_free(p0);
    model_free(m);
}

// Training batch_norm normalizes with the batch's statistics and moves the
// running mean and (unbiased) variance, in the model's buffers, each step.
static void test_batch_norm_training_steps(void **state) {
    (void)state;
    graph *g = graph_new();
    int64_t C = 3;
    int x = graph_input(g, "x", DT_F32, 4, (int64_t[]){4, C, 5, 5});
    int w = graph_param(g, "w", 1, &C, INIT_NORMAL, 1.0);
    int b = graph_param(g, "b", 1, &C, INIT_NORMAL, 1.0);
    int rm = graph_buffer(g, "running_mean", DT_F32, 1, &C, INIT_ZEROS, 0);
    int rv = graph_buffer(g, "running_var", DT_F32, 1, &C, INIT_ONES, 0);
    int64_t train[GRAPH_MAX_IA] = {1};
    graph_output(g, graph_op(g, OP_BATCH_NORM, 5, (int[]){x, w, b, rm, rv}, train,
                             (double[GRAPH_MAX_FA]){1e-5, 0.1}));
    model *m = model_new(g, "bn_train", "test", 1);
    assert_int_equal(model_init_values(m, 5), 0);
    train_steps(m, 3, 1e-4, 1e-5);
    // after three steps of momentum 0.1 the mean is about 0.271 of the batch's
    assert_true(tensor_get_flat(m->values[rm], 0) != 0);
    assert_true(tensor_get_flat(m->values[rv], 0) != 1);
    model_free(m);
}

// The dropout mask is a function of (stream, step, element): the same pair
// gives the same mask in eager and in the reference, another step or
// another stream a different one.
static int64_t mask_diff(const tensor *a, const tensor *b) {
    int64_t d = 0;
    for (int64_t i = 0; i < tensor_numel(a); i++)
        d += (tensor_get_flat(a, i) == 0) != (tensor_get_flat(b, i) == 0);
    return d;
}

static void test_dropout_steps(void **state) {
    (void)state;
    graph *g = graph_new();
    int64_t shape[] = {64, 100};
    int x = graph_input(g, "x", DT_F32, 2, shape);
    int64_t s5[GRAPH_MAX_IA] = {5}, s6[GRAPH_MAX_IA] = {6};
    double p[GRAPH_MAX_FA] = {0.5};
    graph_output(g, graph_op(g, OP_DROPOUT, 1, &x, s5, p));
    graph_output(g, graph_op(g, OP_DROPOUT, 1, &x, s6, p));
    model *m = model_new(g, "dropout_steps", "test", 1);
    assert_int_equal(model_init_values(m, 5), 0);
    eager *e = eager_new(m);
    char err[256];
    ref_session *rs = ref_session_new(m, err, sizeof err);
    assert_non_null(rs);
    tensor *a[2], *b[2], *c[2];
    double *r[2];
    assert_int_equal(eager_run(e, a, NULL), 0); // step 1 by default
    eager_set_step(e, 1);
    assert_int_equal(eager_run(e, b, NULL), 0);
    eager_set_step(e, 2);
    assert_int_equal(eager_run(e, c, NULL), 0);
    assert_int_equal(ref_session_run(rs, 2, r, err, sizeof err), 0);
    int64_t n = tensor_numel(a[0]);
    assert_int_equal(mask_diff(a[0], b[0]), 0);
    assert_int_equal(mask_diff(a[1], b[1]), 0);
    // independent masks of p = 0.5 differ in about half the places
    assert_true(mask_diff(a[0], c[0]) > n / 3);
    assert_true(mask_diff(a[0], a[1]) > n / 3);
    assert_true(mask_diff(c[0], c[1]) > n / 3);
    for (int k = 0; k < 2; k++) {
        for (int64_t i = 0; i < n; i++)
            assert_true((tensor_get_flat(c[k], i) == 0) == (r[k][i] == 0));
        tensor_free(a[k]);
        tensor_free(b[k]);
        tensor_free(c[k]);
        free(r[k]);
    }
    ref_session_free(rs);
    eager_free(e);
    model_free(m);
}

// Rows named by several positions get the sum of those positions' rows;
// rows named by none are zero.
static void test_embedding_grad_repeats(void **state) {
    (void)state;
    graph *g = graph_new();
    int64_t V = 4, D = 3, N = 6;
    int idx = graph_input(g, "idx", DT_I64, 1, &N);
    int dy = graph_input(g, "dy", DT_F32, 2, (int64_t[]){N, D});
    graph_output(g, graph_op_shaped(g, OP_EMBEDDING_GRAD, 2, (int[]){dy, idx}, NULL, NULL, 2,
                                    (int64_t[]){V, D}));
    model *m = model_new(g, "embedding_grad_repeats", "test", 1);
    assert_int_equal(model_init_values(m, 5), 0);
    const int64_t ids[] = {2, 0, 2, 2, 3, 0};
    for (int64_t i = 0; i < N; i++) {
        tensor_set(m->values[idx], (int64_t[]){i}, (double)ids[i]);
        for (int64_t d = 0; d < D; d++)
            tensor_set(m->values[dy], (int64_t[]){i, d}, (double)(i * 10 + d));
    }
    eager *e = eager_new(m);
    tensor *y;
    assert_int_equal(eager_run(e, &y, NULL), 0);
    for (int64_t v = 0; v < V; v++)
        for (int64_t d = 0; d < D; d++) {
            double want = 0;
            for (int64_t i = 0; i < N; i++)
                want += ids[i] == v ? (double)(i * 10 + d) : 0;
            assert_true(tensor_get(y, (int64_t[]){v, d}) == want);
        }
    tensor_free(y);
    eager_free(e);
    model_free(m);
}

int main(void) {
    struct CMUnitTest tests[NCASES + 9];
    for (int c = 0; c < NCASES; c++)
        tests[c] = (struct CMUnitTest){cases[c].name, test_case, NULL, NULL, (void *)&cases[c]};
    tests[NCASES] = (struct CMUnitTest)cmocka_unit_test(test_every_op_covered);
    tests[NCASES + 1] = (struct CMUnitTest)cmocka_unit_test(test_dropout_rate);
    tests[NCASES + 2] = (struct CMUnitTest)cmocka_unit_test(test_errors);
    tests[NCASES + 3] = (struct CMUnitTest)cmocka_unit_test(test_no_values);
    tests[NCASES + 4] = (struct CMUnitTest)cmocka_unit_test(test_ref_run_outputs);
    tests[NCASES + 5] = (struct CMUnitTest)cmocka_unit_test(test_updates_steps);
    tests[NCASES + 6] = (struct CMUnitTest)cmocka_unit_test(test_batch_norm_training_steps);
    tests[NCASES + 7] = (struct CMUnitTest)cmocka_unit_test(test_dropout_steps);
    tests[NCASES + 8] = (struct CMUnitTest)cmocka_unit_test(test_embedding_grad_repeats);
    return _cmocka_run_group_tests("test_ops", tests, NCASES + 9, NULL, NULL);
}
