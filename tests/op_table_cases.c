// The op cases of tests/test_op_table.c (op_table.h): every op of ops.def
// at odd sizes, above the OpenMP threshold, broadcast, on non-contiguous
// views (permuted, sliced, expanded), f16 and bf16, the training ops, and
// graphs of several ops at once (the group_ rows). Three kinds of builder:
// b_ one op from the row's fields, g_ several ops a graph in the row's
// dtype, h_ one op whose 16-bit variants are checked against the f32 step.
#include "op_table.h"
#include "model/nn/nn.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

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

int b_unary(graph *g, const op_case *tc) {
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

int b_binary(graph *g, const op_case *tc) {
    int a = in(g, "a", tc->dt, tc->nd, tc->shape), b = in(g, "b", tc->dt, tc->nd2, tc->shape2);
    return out(g, op(g, tc->op, 2, (int[]){a, b}, tc));
}

int b_binary_int(graph *g, const op_case *tc) {
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

int b_channel_norm(graph *g, const op_case *tc) {
    int64_t C = tc->shape[1];
    int x = in(g, "x", tc->dt, tc->nd, tc->shape);
    int w = param(g, 1, &C), b = param(g, 1, &C);
    if (tc->op == OP_GROUP_NORM || tc->op == OP_INSTANCE_NORM)
        return out(g, op(g, tc->op, 3, (int[]){x, w, b}, tc));
    int mean = graph_buffer(g, "mean", DT_F32, 1, &C, INIT_NORMAL, 0.5);
    int var = in(g, "pos", DT_F32, 1, &C);
    return out(g, op(g, OP_BATCH_NORM, 5, (int[]){x, w, b, mean, var}, tc));
}

int b_matmul(graph *g, const op_case *tc) {
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

// x and the weight in the case's dtype, the weight cast from an f32
// parameter as autocast casts it: an f16 (N, K) weight
static int b_linear_hw(graph *g, const op_case *tc) {
    int x = in(g, "x", tc->dt, tc->nd, tc->shape);
    int w = graph_cast(g, param(g, 2, tc->shape2), tc->dt);
    return out(g, graph_op(g, OP_LINEAR, 2, (int[]){x, w}, NULL, NULL));
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
int b_pool_perm(graph *g, const op_case *tc) { return conv_or_pool_of(g, tc, NHWC); }
static int b_pool_swap(graph *g, const op_case *tc) { return conv_or_pool_of(g, tc, SWAP_HW); }

static int b_embedding(graph *g, const op_case *tc) {
    int t = graph_buffer(g, "table", tc->dt, 2, tc->shape, INIT_NORMAL, 1.0);
    int i = in_int(g, tc->ia[1] ? DT_I64 : DT_I32, tc->nd2, tc->shape2, 0, tc->shape[0]);
    return out(g, graph_op(g, OP_EMBEDDING, 2, (int[]){t, i}, NULL, NULL));
}

// dequant (x unused) or qlinear of x (shape) over a (shape2) quantized weight:
// ia {bits, group, K}; int8 values, or int4 bytes of any value; scales
// uniform, f16 when tc->bias is 2 (qlinear: bias 1 adds an f32 bias)
static int b_quant(graph *g, const op_case *tc) {
    int64_t N = tc->shape2[0], K = tc->ia[2], G = (K + tc->ia[1] - 1) / tc->ia[1];
    bool i8 = tc->ia[0] == 8;
    int q = in_int(g, i8 ? DT_I8 : DT_U8, 2, (int64_t[]){N, i8 ? K : (K + 1) / 2}, i8 ? -127 : 0,
                   i8 ? 128 : 256);
    int sc = graph_buffer(g, "scales", tc->bias == 2 ? DT_F16 : DT_F32, 2, (int64_t[]){N, G},
                          INIT_UNIFORM, 0.05);
    if (tc->op == OP_DEQUANT)
        return out(g, op(g, OP_DEQUANT, 2, (int[]){q, sc}, tc));
    int x = in(g, "x", tc->dt, tc->nd, tc->shape);
    int b = graph_param(g, "b", 1, &N, INIT_NORMAL, 1.0);
    return out(g, op(g, OP_QLINEAR, tc->bias == 1 ? 4 : 3, (int[]){x, q, sc, b}, tc));
}

// ids drawn from [0, V + 3): some fall outside the table
int b_embedding_bad(graph *g, const op_case *tc) {
    int t = graph_buffer(g, "table", tc->dt, 2, tc->shape, INIT_NORMAL, 1.0);
    int i = in_int(g, DT_I32, tc->nd2, tc->shape2, 0, tc->shape[0] + 3);
    return out(g, graph_op(g, OP_EMBEDDING, 2, (int[]){t, i}, NULL, NULL));
}

// q (shape), k and v (shape2: B, KVH, S, D); ia0 causal, fa0 the scale;
// ia1 1: a (B, 1, 1, S) f32 bias input
static int b_attention(graph *g, const op_case *tc) {
    int q = in(g, "q", tc->dt, tc->nd, tc->shape);
    int k = in(g, "k", tc->dt, tc->nd2, tc->shape2);
    int v = in(g, "v", tc->dt, tc->nd2, tc->shape2);
    int64_t ia[GRAPH_MAX_IA] = {tc->ia[0], tc->ia[1] ? 3 : 0};
    int src[4] = {q, k, v, -1};
    if (tc->ia[1])
        src[3] = in(g, "bias", DT_F32, 4, (int64_t[]){tc->shape[0], 1, 1, tc->shape2[2]});
    return out(g, graph_op(g, OP_ATTENTION, tc->ia[1] ? 4 : 3, src, ia, tc->fa));
}

// b_attention's inputs and attention, then its backward: ATTENTION_GRAD of
// a dy input (the output's shape), q, k, v, the attention and the bias
static int b_attention_grad(graph *g, const op_case *tc) {
    int q = in(g, "q", tc->dt, tc->nd, tc->shape);
    int k = in(g, "k", tc->dt, tc->nd2, tc->shape2);
    int v = in(g, "v", tc->dt, tc->nd2, tc->shape2);
    int64_t ia[GRAPH_MAX_IA] = {tc->ia[0], tc->ia[1] ? 3 : 0};
    int src[7] = {q, k, v, -1};
    if (tc->ia[1])
        src[3] = in(g, "bias", DT_F32, 4, (int64_t[]){tc->shape[0], 1, 1, tc->shape2[2]});
    int y = graph_op(g, OP_ATTENTION, tc->ia[1] ? 4 : 3, src, ia, tc->fa);
    if (y < 0)
        return -1;
    int64_t ys[4];
    memcpy(ys, g->nodes[y].shape, sizeof ys); // in() may move the nodes
    int dy = in(g, "dy", tc->dt, 4, ys);
    int gs[6] = {dy, q, k, v, y, src[3]};
    ia[1] = tc->ia[1] ? 5 : 0;
    return out(g, graph_op(g, OP_ATTENTION_GRAD, tc->ia[1] ? 6 : 5, gs, ia, tc->fa));
}

// One LSTM layer and direction over x (shape: B, T, I) with hidden
// shape2[0], ia as lstm's: every operand an input of the case's dtype
static int lstm_node(graph *g, const op_case *tc, const int64_t *ia, int *src) {
    int64_t H = tc->shape2[0], I = tc->shape[2];
    src[0] = in(g, "x", tc->dt, 3, tc->shape);
    src[1] = in(g, "w", tc->dt, 2, (int64_t[]){4 * H, I});
    src[2] = in(g, "w", tc->dt, 2, (int64_t[]){4 * H, H});
    src[3] = in(g, "w", tc->dt, 1, (int64_t[]){4 * H});
    src[4] = in(g, "w", tc->dt, 1, (int64_t[]){4 * H});
    return graph_op(g, OP_LSTM, 5, src, ia, NULL);
}

static int b_lstm(graph *g, const op_case *tc) {
    int src[5];
    return out(g, lstm_node(g, tc, tc->ia, src));
}

// lstm_node in training, then its backward: LSTM_GRAD of a dy input of the
// forward's (6, B, T, H) shape
static int b_lstm_grad(graph *g, const op_case *tc) {
    int64_t ia[GRAPH_MAX_IA] = {tc->ia[0], 1};
    int src[5];
    int y = lstm_node(g, tc, ia, src);
    if (y < 0)
        return -1;
    int64_t ys[4];
    memcpy(ys, g->nodes[y].shape, sizeof ys); // in() may move the nodes
    int gs[5] = {in(g, "dy", tc->dt, 4, ys), src[0], src[1], src[2], y};
    return out(g, graph_op(g, OP_LSTM_GRAD, 5, gs, ia, NULL));
}

// F.ctc_loss over log_probs (shape: T, B, C), targets (B, shape2[0]) in
// [1, C) (blank 0) and lengths in [0, shape2[0]]; ia as ctc_loss's
static int ctc_inputs(graph *g, const op_case *tc, int *src) {
    int64_t B = tc->shape[1], S = tc->shape2[0];
    src[0] = in(g, "x", tc->dt, 3, tc->shape);
    src[1] = in_int(g, DT_I32, 2, (int64_t[]){B, S}, 1, tc->shape[2]);
    src[2] = in_int(g, DT_I64, 1, &B, 0, S + 1);
    return src[2];
}

static int b_ctc(graph *g, const op_case *tc) {
    int src[3];
    if (ctc_inputs(g, tc, src) < 0)
        return -1;
    return out(g, graph_op(g, OP_CTC_LOSS, 3, src, tc->ia, NULL));
}

// its backward: a dloss () input, then ctc_loss's inputs
static int b_ctc_grad(graph *g, const op_case *tc) {
    int src[4];
    src[0] = in(g, "dy", DT_F32, 0, NULL);
    if (ctc_inputs(g, tc, src + 1) < 0)
        return -1;
    return out(g, graph_op(g, OP_CTC_LOSS_GRAD, 4, src, tc->ia, NULL));
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

int b_cross_entropy(graph *g, const op_case *tc) {
    int x = in(g, "x", DT_F32, 2, tc->shape);
    int t = in_int(g, tc->dt, 1, tc->shape, 0, tc->shape[1] + (tc->ia[1] ? 2 : 0));
    return out(g, op(g, OP_CROSS_ENTROPY, 2, (int[]){x, t}, tc));
}

static int b_mse(graph *g, const op_case *tc) {
    int a = in(g, "a", tc->dt, tc->nd, tc->shape), b = in(g, "b", tc->dt, tc->nd, tc->shape);
    return out(g, op(g, OP_MSE_LOSS, 2, (int[]){a, b}, tc));
}

// x of dt (logits with ia0, else sigmoid(x): probabilities), targets N(0, 1)
// as torch leaves them unchecked; the grad with an f32 dloss ()
static int b_bce(graph *g, const op_case *tc) {
    int x = in(g, "x", tc->dt, tc->nd, tc->shape), t = in(g, "t", tc->dt, tc->nd, tc->shape);
    if (!tc->ia[0])
        x = graph_unary(g, OP_SIGMOID, x);
    if (tc->op == OP_BCE_LOSS)
        return out(g, op(g, OP_BCE_LOSS, 2, (int[]){x, t}, tc));
    int dl = in(g, "dl", DT_F32, 0, NULL);
    return out(g, op(g, OP_BCE_LOSS_GRAD, 3, (int[]){dl, x, t}, tc));
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
int b_act_grad(graph *g, const op_case *tc) {
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
int b_norm_grad(graph *g, const op_case *tc) {
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

// a pool's output along axis i (0: H, 1: W), ceil mode (ia6) as PyTorch's
static int64_t pool_out_size(int64_t in, const int64_t *ia, int i) {
    int64_t k = ia[4 + i], s = ia[i], p = ia[2 + i];
    int64_t o = (in + 2 * p - k + (ia[6] ? s - 1 : 0)) / s + 1;
    return ia[6] && (o - 1) * s >= in + p ? o - 1 : o;
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
    int64_t dys[4] = {xs[0], xs[1], pool_out_size(xs[2], ia, 0), pool_out_size(xs[3], ia, 1)};
    int dy = in(g, "dy", tc->dt, 4, dys);
    if (tc->op == OP_AVG_POOL2D_GRAD)
        return out(g, graph_op_shaped(g, tc->op, 1, &dy, ia, NULL, 4, xs));
    int x = in(g, "x", tc->dt, 4, xs);
    return out(g, op(g, tc->op, 2, (int[]){dy, x}, tc));
}

// table (V, D) = shape, indices of shape2 in [0, V + ia[1]) (i64 when ia[0])
int b_embedding_grad(graph *g, const op_case *tc) {
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

// dy (shape2, the padded shape) back to shape, ia as pad's
static int b_pad_grad(graph *g, const op_case *tc) {
    int dy = in(g, "dy", tc->dt, tc->nd2, tc->shape2);
    return out(g, graph_op_shaped(g, OP_PAD_GRAD, 1, &dy, tc->ia, NULL, tc->nd, tc->shape));
}

// nn.EmbeddingBag's operands: indices (shape2[0]) in [0, shape[0]), i64
// when ia1, and offsets (shape2[1] bags) floor(b fa0): a fractional fa0
// makes bags of uneven sizes, empty ones included
static void bag_operands(graph *g, const op_case *tc, int *idx, int *off) {
    enum dtype it = tc->ia[1] ? DT_I64 : DT_I32;
    *idx = in_int(g, it, 1, tc->shape2, 0, tc->shape[0]);
    *off = graph_buffer(g, "offsets", it, 1, &tc->shape2[1], INIT_ARANGE, tc->fa[0]);
}

// table (shape) -> (shape2[1], D) bag sums
static int b_embedding_bag(graph *g, const op_case *tc) {
    int t = graph_buffer(g, "table", tc->dt, 2, tc->shape, INIT_NORMAL, 1.0), i, o;
    bag_operands(g, tc, &i, &o);
    int64_t ia[GRAPH_MAX_IA] = {EMBEDDING_BAG_SUM};
    return out(g, graph_op(g, OP_EMBEDDING_BAG, 3, (int[]){t, i, o}, ia, NULL));
}

// dy (shape2[1], D) -> (shape) the table's gradient
static int b_embedding_bag_grad(graph *g, const op_case *tc) {
    int i, o;
    bag_operands(g, tc, &i, &o);
    int dy = in(g, "dy", tc->dt, 2, (int64_t[]){tc->shape2[1], tc->shape[1]});
    return out(g, graph_op_shaped(g, OP_EMBEDDING_BAG_GRAD, 3, (int[]){dy, i, o}, NULL, NULL, 2,
                                  tc->shape));
}

// DLRM's pairs of (B, F, F) = shape; of its transpose (a strided view) when ia1
static int b_tril_gather(graph *g, const op_case *tc) {
    int z = in(g, "z", tc->dt, 3, tc->shape);
    if (tc->ia[1])
        z = graph_permute(g, z, (int[]){0, 2, 1});
    return out(g, op(g, OP_TRIL_GATHER, 1, &z, tc));
}

// dy (B, P) back to (B, F, F) = shape
static int b_tril_gather_grad(graph *g, const op_case *tc) {
    int64_t F = tc->shape[1], P = F * (F - 1) / 2 + (tc->ia[0] ? F : 0);
    int dy = in(g, "dy", tc->dt, 2, (int64_t[]){tc->shape[0], P});
    return out(g, graph_op_shaped(g, OP_TRIL_GATHER_GRAD, 1, &dy, tc->ia, NULL, 3, tc->shape));
}

// x (shape) sampled at a grid (N, shape2[1], shape2[2], 2) of N(0, 1)
// coordinates, a third outside [-1, 1]; x a view with H and W swapped when
// shape2[0] is 1
static int b_grid_sample(graph *g, const op_case *tc) {
    const int64_t *s = tc->shape;
    int x = tc->shape2[0]
                ? graph_permute(g, in(g, "x", tc->dt, 4, (int64_t[]){s[0], s[1], s[3], s[2]}),
                                (int[]){0, 1, 3, 2})
                : in(g, "x", tc->dt, 4, s);
    int grid = in(g, "grid", tc->dt, 4, (int64_t[]){s[0], tc->shape2[1], tc->shape2[2], 2});
    return out(g, op(g, OP_GRID_SAMPLE, 2, (int[]){x, grid}, tc));
}

// dy (N, C, shape2[2], shape2[3]) scattered back to x's shape
static int b_grid_sample_grad(graph *g, const op_case *tc) {
    const int64_t *s = tc->shape, *t = tc->shape2;
    int dy = in(g, "dy", tc->dt, 4, t);
    int grid = in(g, "grid", tc->dt, 4, (int64_t[]){s[0], t[2], t[3], 2});
    return out(g,
               graph_op_shaped(g, OP_GRID_SAMPLE_GRAD, 2, (int[]){dy, grid}, tc->ia, NULL, 4, s));
}

static int b_grid_sample_grad_grid(graph *g, const op_case *tc) {
    const int64_t *s = tc->shape, *t = tc->shape2;
    int dy = in(g, "dy", tc->dt, 4, t), x = in(g, "x", tc->dt, 4, s);
    int grid = in(g, "grid", tc->dt, 4, (int64_t[]){s[0], t[2], t[3], 2});
    return out(g, op(g, OP_GRID_SAMPLE_GRAD_GRID, 3, (int[]){dy, x, grid}, tc));
}

// dy (shape2, upsampled) back to shape
static int b_upsample_bilinear_grad(graph *g, const op_case *tc) {
    int dy = in(g, "dy", tc->dt, tc->nd2, tc->shape2);
    return out(
        g, graph_op_shaped(g, OP_UPSAMPLE_BILINEAR_GRAD, 1, &dy, tc->ia, NULL, tc->nd, tc->shape));
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

// a static KV cache: head-split (permuted) rows written at a position drawn
// at run time, and the cache read after the write in the same step, as
// attention reads it
static int b_kv_write(graph *g, const op_case *tc) {
    int c = graph_buffer(g, "cache", DT_F32, 4, tc->shape, INIT_NORMAL, 1.0);
    int64_t T = tc->shape2[2];
    int x = in(g, "x", DT_F32, 4, (int64_t[]){tc->shape[0], T, tc->shape[1], tc->shape[3]});
    int r = graph_permute(g, x, (int[]){0, 2, 1, 3});
    int pos = in_int(g, tc->ia[0] ? DT_I64 : DT_I32, 0, NULL, 0, tc->shape[2] - T + 1);
    int kv = out(g, graph_op(g, OP_KV_WRITE, 3, (int[]){c, r, pos}, NULL, NULL));
    return out(g, graph_scale(g, kv, 2.0, 0.0));
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

static int op1(graph *g, enum op o, int x, const int64_t *ia, const double *fa) {
    return graph_op(g, o, 1, &x, ia, fa);
}

#define S(...)   ((int64_t[]){__VA_ARGS__})
#define IAV(...) ((int64_t[GRAPH_MAX_IA]){__VA_ARGS__})
#define FAV(...) ((double[GRAPH_MAX_FA]){__VA_ARGS__})

// ---- builders of several ops a graph (the CUDA executor's cases)
// -----------------------------------------------------------------------

static int g_sources(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
    (void)dt;
    int x = in(g, "x", DT_F32, 2, S(7, 13));
    int p = graph_param(g, "p", 2, S(7, 13), INIT_UNIFORM, 0.5);
    int b = graph_buffer(g, "b", DT_F32, 2, S(7, 13), INIT_NORMAL, 2.0);
    int f = graph_full(g, 1.5, DT_F32, 2, S(7, 13));
    out(g, x);
    return out(
        g, graph_binary(g, OP_MUL, graph_binary(g, OP_ADD, p, b), graph_binary(g, OP_ADD, f, x)));
}

// every unary op, each on an input of the range it needs, in two rows
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

static int g_unary_all(graph *g, const op_case *tc) { return unary_some(g, tc->dt, 0, 7); }
static int g_unary_all2(graph *g, const op_case *tc) { return unary_some(g, tc->dt, 8, 15); }

static int g_unary_big(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
    int x = in(g, "wide", dt, 1, S((1 << 20) + 3));
    out(g, graph_unary(g, OP_GELU, x));
    return out(g, graph_scale(g, x, -1.5, 0.25));
}

static int g_unary_views(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
    int x = in(g, "x", dt, 2, S(13, 7));
    out(g, graph_unary(g, OP_TANH, graph_permute(g, x, (int[]){1, 0})));
    out(g, graph_unary(g, OP_SIGMOID, graph_slice(g, x, 1, 2, 4)));
    int r = graph_slice(g, x, 0, 3, 1);
    return out(g, graph_unary(g, OP_SILU,
                              graph_op_shaped(g, OP_EXPAND, 1, &r, NULL, NULL, 3, S(5, 4, 7))));
}

static int g_cast(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
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

static int g_dropout(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
    int x = in(g, "x", dt, 3, S(4, 33, 65));
    return out(g, op1(g, OP_DROPOUT, x, IAV(7), FAV(0.3)));
}

// noise inside a pointwise chain, which is cut around it (never fused)
static int g_noise(graph *g, const op_case *tc) {
    int x = in(g, "x", tc->dt, 3, S(4, 33, 65));
    out(g, op1(g, OP_NOISE, x, IAV(7), FAV(0.3)));
    int y = op1(g, OP_NOISE, graph_unary(g, OP_TANH, x), IAV(8), FAV(0.3));
    return out(g, graph_unary(g, OP_RELU, y));
}

// A layer of engine/model/nn as a model file calls it (one input, prefix its name)
static int nn_layer(graph *g, const char *type, int x, bool training, int nargs,
                    const nn_arg *args) {
    nn_call c = {.type = type, .prefix = type, .nargs = nargs, .args = args, .ninputs = 1,
                 .inputs = &x, .training = training};
    nn_result r;
    return nn_build(g, &c, &r) < 0 ? -1 : r.out[0];
}

#define NN_INT(k, n) {.key = (k), .v = {.type = NN_V_INT, .i = (n), .f = (n)}}
#define NN_NUM(k, n) {.key = (k), .v = {.type = NN_V_FLOAT, .f = (n)}}

// timm's composite layers (nn_vision.c): NFNet's weight-standardized conv
// (grouped, the gain and gamma), ConvNeXt's LayerNorm2d, layer scale over
// NCHW channels, and drop path's per-sample mask in training
static int g_timm_layers(graph *g, const op_case *tc) {
    int x = in(g, "x", tc->dt, 4, S(4, 6, 9, 11));
    nn_arg conv[] = {NN_INT("out", 8),     NN_INT("kernel", 3),  NN_INT("padding", 1),
                     NN_INT("groups", 2),  NN_NUM("gamma", 1.7), NN_NUM("eps", 1e-5)};
    out(g, nn_layer(g, "std_conv2d", x, false, 6, conv));
    out(g, nn_layer(g, "layer_norm2d", x, false, 0, NULL));
    nn_arg ls[] = {NN_NUM("init", 0.5), {.key = "channels_first", .v = {.type = NN_V_BOOL, .i = 1}}};
    out(g, nn_layer(g, "layer_scale", x, false, 2, ls));
    nn_arg dp[] = {NN_NUM("p", 0.5)};
    return out(g, nn_layer(g, "drop_path", x, true, 1, dp));
}

static int g_binary(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
    static const enum op ops[] = {OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_MAXIMUM};
    int a = in(g, "a", dt, 3, S(3, 7, 13)), b = in(g, "pos", dt, 1, S(13));
    int c = in(g, "c", dt, 2, S(7, 1));
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        out(g, graph_binary(g, ops[i], a, b)); // (3, 7, 13) with (13)
    out(g, graph_binary(g, OP_MUL, c, b));     // (7, 1) with (13): both broadcast
    int t = in(g, "t", dt, 2, S(13, 7));
    return out(g, graph_binary(g, OP_ADD, graph_permute(g, t, (int[]){1, 0}), c));
}

static int g_binary_big(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
    int a = in(g, "a", dt, 2, S(1031, 1029)), b = in(g, "b", dt, 2, S(1031, 1029));
    return out(g, graph_binary(g, OP_ADD, a, b));
}

static int g_binary_int(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
    (void)dt;
    int a = in_int(g, DT_I32, 2, S(5, 9), -50, 50), b = in_int(g, DT_I32, 1, S(9), -50, 50);
    int c = in_int(g, DT_I64, 2, S(5, 9), -50, 50), d = in_int(g, DT_I64, 2, S(5, 9), -50, 50);
    out(g, graph_binary(g, OP_ADD, a, b));
    out(g, graph_binary(g, OP_MUL, a, b));
    out(g, graph_binary(g, OP_SUB, c, d));
    return out(g, graph_binary(g, OP_MAXIMUM, c, d));
}

static int g_where(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
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

static int g_reduce(graph *g, const op_case *tc) { return reduce_axes(g, tc->dt, 0, 1); }

static int g_reduce_last(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
    reduce_axes(g, dt, 2, 2);
    int x = in(g, "x2", dt, 3, S(5, 37, 300));
    int p = graph_permute(g, x, (int[]){1, 2, 0}); // a view: copied first
    return out(g, graph_reduce(g, OP_SUM, p, 2));
}

static int g_softmax(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
    int x = in(g, "wide", dt, 3, S(3, 5, 1000)), y = in(g, "x", dt, 2, S(77, 5));
    out(g, op1(g, OP_SOFTMAX, x, NULL, NULL));
    out(g, op1(g, OP_LOG_SOFTMAX, x, NULL, NULL));
    out(g, op1(g, OP_SOFTMAX, y, NULL, NULL));
    return out(g, op1(g, OP_LOG_SOFTMAX, graph_permute(g, y, (int[]){1, 0}), NULL, NULL));
}

static int g_norms(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
    int x = in(g, "x", dt, 3, S(4, 9, 96)), w = param(g, 1, S(96)), b = param(g, 1, S(96));
    if (dt == DT_F16) {
        w = graph_cast(g, w, DT_F16);
        b = graph_cast(g, b, DT_F16);
    }
    out(g, graph_op(g, OP_LAYER_NORM, 3, (int[]){x, w, b}, NULL, FAV(1e-5)));
    out(g, graph_op(g, OP_RMS_NORM, 2, (int[]){x, w}, NULL, FAV(1e-6)));
    int c = in(g, "x", dt, 4, S(2, 12, 5, 7));
    int cw = param(g, 1, S(12)), cb = param(g, 1, S(12)), cm = param(g, 1, S(12));
    int cv = graph_buffer(g, "var", DT_F32, 1, S(12), INIT_ONES, 0);
    if (dt == DT_F16) {
        cw = graph_cast(g, cw, DT_F16), cb = graph_cast(g, cb, DT_F16);
        cm = graph_cast(g, cm, DT_F16), cv = graph_cast(g, cv, DT_F16);
    }
    out(g, graph_op(g, OP_BATCH_NORM, 5, (int[]){c, cw, cb, cm, cv}, NULL, FAV(1e-5)));
    return out(g, graph_op(g, OP_GROUP_NORM, 3, (int[]){c, cw, cb}, IAV(3), FAV(1e-5)));
}

int g_matmul(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
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

static int g_linear(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
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

static int g_conv(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
    int x = in(g, "x", dt, 4, S(2, 6, 11, 13));
    int w1 = param(g, 4, S(8, 6, 3, 3)), b1 = param(g, 1, S(8));
    int w2 = param(g, 4, S(6, 2, 3, 3));                         // groups 3
    int wt = param(g, 4, S(6, 4, 3, 3)), bt = param(g, 1, S(8)); // transposed, groups 2: O = 8
    if (dt == DT_F16) {
        w1 = graph_cast(g, w1, DT_F16), b1 = graph_cast(g, b1, DT_F16);
        w2 = graph_cast(g, w2, DT_F16), wt = graph_cast(g, wt, DT_F16),
        bt = graph_cast(g, bt, DT_F16);
    }
    out(g, graph_op(g, OP_CONV2D, 3, (int[]){x, w1, b1}, IAV(1, 1, 1, 1, 1, 1, 1), NULL));
    out(g, graph_op(g, OP_CONV2D, 2, (int[]){x, w2}, IAV(2, 2, 2, 1, 2, 2, 3), NULL));
    int xp = graph_permute(g, in(g, "xp", dt, 4, S(2, 11, 13, 6)), (int[]){0, 3, 1, 2});
    out(g, graph_op(g, OP_CONV2D, 2, (int[]){xp, w1}, IAV(1, 1, 0, 0, 1, 1, 1), NULL));
    return out(g, graph_op(g, OP_CONV_TRANSPOSE2D, 3, (int[]){x, wt, bt},
                           IAV(2, 2, 1, 1, 1, 1, 2, 1, 0), NULL));
}

static int g_pool(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
    int x = in(g, "x", dt, 4, S(2, 5, 12, 15));
    out(g, op1(g, OP_MAX_POOL2D, x, IAV(2, 2, 1, 1, 3, 3), NULL));
    out(g, op1(g, OP_AVG_POOL2D, x, IAV(2, 2, 1, 0, 3, 2), NULL));
    out(g, op1(g, OP_AVG_POOL2D, x, IAV(1, 1, 0, 0, 12, 15), NULL)); // global
    return out(g,
               op1(g, OP_UPSAMPLE_NEAREST, graph_permute(g, x, (int[]){0, 1, 3, 2}), IAV(2), NULL));
}

static int g_embedding(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
    int t = graph_buffer(g, "table", dt, 2, S(50, 24), INIT_NORMAL, 1.0);
    out(g,
        graph_op(g, OP_EMBEDDING, 2, (int[]){t, in_int(g, DT_I32, 2, S(3, 7), 0, 50)}, NULL, NULL));
    return out(
        g, graph_op(g, OP_EMBEDDING, 2, (int[]){t, in_int(g, DT_I64, 1, S(9), 0, 50)}, NULL, NULL));
}

static int g_views(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
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

static int g_concat(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
    int a = in(g, "a", dt, 2, S(4, 2)), c = in(g, "c", dt, 2, S(4, 3));
    int b = graph_permute(g, in(g, "b", dt, 2, S(1, 4)), (int[]){1, 0});
    out(g, graph_op(g, OP_CONCAT, 3, (int[]){a, b, c}, IAV(1), NULL));
    return out(g, graph_op(g, OP_CONCAT, 2, (int[]){a, a}, IAV(0), NULL));
}

static int g_losses(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
    int x = in(g, "x", dt, 2, S(37, 300));
    out(g, graph_op(g, OP_CROSS_ENTROPY, 2, (int[]){x, in_int(g, DT_I32, 1, S(37), 0, 300)},
                    IAV(-100), NULL));
    // targets drawn from [0, 4): those equal to the ignore index 3 are skipped
    int xs = in(g, "xs", dt, 2, S(16, 3));
    out(g, graph_op(g, OP_CROSS_ENTROPY, 2, (int[]){xs, in_int(g, DT_I64, 1, S(16), 0, 4)}, IAV(3),
                    NULL));
    int a = in(g, "a", dt, 3, S(3, 40, 33)), b = in(g, "b", dt, 3, S(3, 40, 33));
    return out(g, graph_op(g, OP_MSE_LOSS, 2, (int[]){a, b}, NULL, NULL));
}

// ---- training: backward ops, updates, the grad scaler -------------------------------------

static int sum_to(graph *g, int x, int nd, const int64_t *shape) {
    return graph_op_shaped(g, OP_SUM_TO, 1, &x, NULL, NULL, nd, shape);
}

// a value of the graph read after the ops before it ran: a state buffer
// after its update
static int after(graph *g, int x) { return out(g, graph_scale(g, x, 1.0, 0.0)); }

// broadcasting, views, equal values and NaN (false either way); integers
static int g_ge(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
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
        y = out(g, graph_op(g, OP_ACT_GRAD, 2, (int[]){dy, src}, IAV(o), FAV(-1.5, 0.25)));
    }
    return y;
}

static int g_act_grad(graph *g, const op_case *tc) { return act_grad_some(g, tc->dt, 0, 7); }
static int g_act_grad2(graph *g, const op_case *tc) { return act_grad_some(g, tc->dt, 8, 15); }

// SCALE's, and dy sliced out of a wider input with x a transposed view
static int g_act_grad3(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
    act_grad_some(g, dt, 16, 16);
    int dy = graph_slice(g, in(g, "dy2", dt, 2, S(13, 11)), 1, 2, 7);
    int x = graph_permute(g, in(g, "wide", dt, 2, S(7, 13)), (int[]){1, 0});
    out(g, graph_op(g, OP_ACT_GRAD, 2, (int[]){dy, x}, IAV(OP_SILU), NULL));
    return out(g, graph_op(g, OP_ACT_GRAD, 2, (int[]){dy, x}, IAV(OP_GELU), NULL));
}

// column sums (the last dim kept), one block an output (reduced), a scalar,
// channels, leading dims, a transposed view
static int g_sum_to(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
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
static int g_sum_to_big(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
    out(g, sum_to(g, in(g, "tall", dt, 2, S(4096, 40)), 1, S(40)));
    int a = in(g, "a", dt, 2, S(257, 301));
    out(g, sum_to(g, a, 1, S(301)));
    out(g, sum_to(g, a, 0, NULL));
    out(g, sum_to(g, in(g, "b", dt, 4, S(4, 64, 33, 35)), 3, S(64, 1, 1)));
    return out(g, sum_to(g, in(g, "c", dt, 3, S(40, 3, 700)), 2, S(1, 700)));
}

// dy against softmax and log_softmax outputs: a wide row, narrow ones, a view
static int g_softmax_grad(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
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
static int g_norm_grads(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
    int x = in(g, "x", dt, 3, S(4, 9, 96)), dy = in(g, "dy", dt, 3, S(4, 9, 96));
    int w = param(g, 1, S(96));
    out(g, graph_op(g, OP_LAYER_NORM_GRAD, 3, (int[]){dy, x, w}, NULL, FAV(1e-5)));
    out(g, graph_op(g, OP_LAYER_NORM_WGRAD, 2, (int[]){dy, x}, NULL, FAV(1e-5)));
    out(g, graph_op(g, OP_RMS_NORM_GRAD, 3, (int[]){dy, x, w}, NULL, FAV(1e-6)));
    out(g, graph_op(g, OP_RMS_NORM_WGRAD, 2, (int[]){dy, x}, NULL, FAV(1e-6)));
    int xp = graph_permute(g, in(g, "xp", dt, 2, S(13, 7)), (int[]){1, 0});
    int d2 = in(g, "d2", dt, 2, S(7, 13)), w2 = param(g, 1, S(13));
    out(g, graph_op(g, OP_LAYER_NORM_GRAD, 3, (int[]){d2, xp, w2}, NULL, FAV(1e-5)));
    return out(g, graph_op(g, OP_RMS_NORM_WGRAD, 2, (int[]){d2, xp}, NULL, FAV(1e-6)));
}

// batch norm over (N, C, H, W) and (N, C); group norm; the statistics
static int g_chan_norm_grads(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
    int x = in(g, "x", dt, 4, S(2, 12, 5, 7)), dy = in(g, "dy", dt, 4, S(2, 12, 5, 7));
    int w = param(g, 1, S(12));
    out(g, graph_op(g, OP_BATCH_NORM_GRAD, 3, (int[]){dy, x, w}, NULL, FAV(1e-5)));
    out(g, graph_op(g, OP_BATCH_NORM_WGRAD, 2, (int[]){dy, x}, NULL, FAV(1e-5)));
    out(g, graph_op(g, OP_GROUP_NORM_GRAD, 3, (int[]){dy, x, w}, IAV(3), FAV(1e-5)));
    out(g, graph_op(g, OP_GROUP_NORM_WGRAD, 2, (int[]){dy, x}, IAV(4), FAV(1e-5)));
    int x2 = in(g, "x2", dt, 2, S(9, 13)), d2 = in(g, "d2", dt, 2, S(9, 13));
    int w2 = param(g, 1, S(13));
    out(g, graph_op(g, OP_BATCH_NORM_GRAD, 3, (int[]){d2, x2, w2}, NULL, FAV(1e-5)));
    int y = out(g, graph_op(g, OP_BATCH_NORM_WGRAD, 2, (int[]){d2, x2}, NULL, FAV(1e-5)));
    // the statistics are an f32 output
    return dt == DT_F32 ? out(g, op1(g, OP_BATCH_NORM_STATS, x, NULL, FAV(1e-5))) : y;
}

// sizes where the weight gradients split their rows over blocks, and real
// channel counts
static int g_norm_grads_big(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
    int t = in(g, "t", dt, 2, S(2048, 40)), dt_ = in(g, "dt", dt, 2, S(2048, 40));
    out(g, graph_op(g, OP_LAYER_NORM_WGRAD, 2, (int[]){dt_, t}, NULL, FAV(1e-5)));
    out(g, graph_op(g, OP_RMS_NORM_WGRAD, 2, (int[]){dt_, t}, NULL, FAV(1e-6)));
    int r = in(g, "r", dt, 2, S(64, 768)), dr = in(g, "dr", dt, 2, S(64, 768));
    out(g,
        graph_op(g, OP_LAYER_NORM_GRAD, 3, (int[]){dr, r, param(g, 1, S(768))}, NULL, FAV(1e-5)));
    int c = in(g, "c", dt, 4, S(2, 32, 24, 24)), dc = in(g, "dc", dt, 4, S(2, 32, 24, 24));
    out(g, graph_op(g, OP_BATCH_NORM_GRAD, 3, (int[]){dc, c, param(g, 1, S(32))}, NULL, FAV(1e-5)));
    out(g,
        graph_op(g, OP_GROUP_NORM_GRAD, 3, (int[]){dc, c, param(g, 1, S(32))}, IAV(8), FAV(1e-5)));
    int y = out(g, graph_op(g, OP_GROUP_NORM_WGRAD, 2, (int[]){dc, c}, IAV(8), FAV(1e-5)));
    return dt == DT_F32 ? out(g, op1(g, OP_BATCH_NORM_STATS, c, NULL, FAV(1e-5))) : y;
}

// batch norm in training: the output, and the running statistics it moved
static int g_bn_train(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
    int y = -1;
    for (int k = 0; k < 2; k++) {
        int64_t C = k ? 130 : 3;
        int x = k ? in(g, "x2", dt, 2, S(300, 130)) : in(g, "x", dt, 4, S(2, 3, 5, 7));
        int w = param(g, 1, &C), b = param(g, 1, &C);
        int rm = graph_buffer(g, "mean", DT_F32, 1, &C, INIT_NORMAL, 0.5);
        int rv = graph_buffer(g, "var", DT_F32, 1, &C, INIT_ONES, 0);
        out(g, graph_op(g, OP_BATCH_NORM, 5, (int[]){x, w, b, rm, rv}, IAV(1), FAV(1e-5, 0.1)));
        after(g, rm);
        y = after(g, rv);
    }
    return y;
}

// conv2d's dx and dW: padding; stride, dilation and groups; depthwise;
// channels-last views of dy and x (cuDNN takes their strides)
static int g_conv_grads(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
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
static int g_pool_grads(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
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
static int g_pool_nan(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
    int64_t xs[4] = {1, 2, 6, 7};
    int x = graph_full(g, NAN, dt, 4, xs);
    int dy = in(g, "dy", dt, 4, S(1, 2, 3, 4));
    return out(g, graph_op(g, OP_MAX_POOL2D_GRAD, 2, (int[]){dy, x}, IAV(2, 2, 1, 1, 3, 3), NULL));
}

// rows summed from positions: some repeats, many repeats, a vocabulary, a
// transposed dy
static int g_embedding_grads(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
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

// box_embedding's indices (nn_layers.c): integer boxes (B, T, 4) made from
// corners and sizes (an add, a concat), their (B, T, 1) slices (strided
// views) read directly and through an integer sub, as rows of a table and
// as the rows an embedding gradient sums into
static int g_box_indices(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
    int corner = in_int(g, DT_I32, 3, S(3, 5, 2), 0, 20),
        size = in_int(g, DT_I32, 3, S(3, 5, 2), 0, 20);
    int box = graph_op(g, OP_CONCAT, 2, (int[]){corner, graph_binary(g, OP_ADD, corner, size)},
                       IAV(2), NULL);
    int y0 = graph_slice(g, box, 2, 1, 1), x1 = graph_slice(g, box, 2, 2, 1);
    int y1 = graph_slice(g, box, 2, 3, 1);
    int t = graph_buffer(g, "table", dt, 2, S(40, 24), INIT_NORMAL, 1.0);
    out(g, graph_op(g, OP_EMBEDDING, 2, (int[]){t, x1}, NULL, NULL));
    int h = graph_binary(g, OP_SUB, y1, y0);
    out(g, graph_op(g, OP_EMBEDDING, 2, (int[]){t, h}, NULL, NULL));
    int dy = in(g, "dy", dt, 4, S(3, 5, 1, 24));
    return out(g,
               graph_op_shaped(g, OP_EMBEDDING_GRAD, 2, (int[]){dy, h}, NULL, NULL, 2, S(40, 24)));
}

// dy into zeros: a middle axis, the first, the last (negative, a view of dy)
static int g_slice_grads(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
    int d1 = in(g, "dy", dt, 3, S(4, 3, 5)), d2 = in(g, "dy", dt, 2, S(2, 13));
    int d3 = graph_permute(g, in(g, "dy", dt, 2, S(4, 7)), (int[]){1, 0});
    int d4 = in(g, "dy", dt, 2, S(257, 100));
    out(g, graph_op_shaped(g, OP_SLICE_GRAD, 1, &d1, IAV(1, 2), NULL, 3, S(4, 9, 5)));
    out(g, graph_op_shaped(g, OP_SLICE_GRAD, 1, &d2, IAV(0, 5), NULL, 2, S(7, 13)));
    out(g, graph_op_shaped(g, OP_SLICE_GRAD, 1, &d3, IAV(-1, 0), NULL, 2, S(7, 13)));
    return out(g, graph_op_shaped(g, OP_SLICE_GRAD, 1, &d4, IAV(1, 150), NULL, 2, S(257, 301)));
}

// cross-entropy's (with ignored rows) and mse's gradients
static int g_loss_grads(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
    int dl = in(g, "dl", dt, 0, NULL);
    int x = in(g, "x", dt, 2, S(9, 13)), t = in_int(g, DT_I32, 1, S(9), 0, 13);
    out(g, graph_op(g, OP_CROSS_ENTROPY_GRAD, 3, (int[]){dl, x, t}, IAV(-100), NULL));
    // targets from [0, 5): those equal to the ignore index 3 give zero rows
    int xs = in(g, "xs", dt, 2, S(40, 5)), ts = in_int(g, DT_I64, 1, S(40), 0, 5);
    out(g, graph_op(g, OP_CROSS_ENTROPY_GRAD, 3, (int[]){dl, xs, ts}, IAV(3), NULL));
    int xb = in(g, "xb", dt, 2, S(64, 1000)), tb = in_int(g, DT_I32, 1, S(64), 0, 1000);
    out(g, graph_op(g, OP_CROSS_ENTROPY_GRAD, 3, (int[]){dl, xb, tb}, IAV(-100), NULL));
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
static int g_found_inf(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
    int sc = graph_buffer(g, "scale", DT_F32, 0, NULL, INIT_CONSTANT, 0.25);
    int a = in(g, "a", dt, 2, S(257, 301)), b = in(g, "b", dt, 2, S(7, 13));
    int nan = graph_full(g, NAN, dt, 0, NULL);
    int f1 = out(g, graph_op(g, OP_FOUND_INF, 2, (int[]){sc, a}, NULL, NULL));
    out(g, graph_op(g, OP_FOUND_INF, 4, (int[]){sc, f1, b, nan}, IAV(1), NULL));
    int y = out(g, graph_op(g, OP_FOUND_INF, 4, (int[]){sc, f1, b, a}, IAV(1), NULL));
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
    out(g, graph_op(g, OP_SGD, 2, (int[]){p1, g1}, NULL, FAV(0.1, 0, 0.01)));
    out(g, graph_op(g, OP_SGD, 3, (int[]){p2, g2, buf2}, NULL, FAV(0.1, 0.9, 0.01, 0.1)));
    after(g, buf2);
    out(g, graph_op(g, OP_SGD, 3, (int[]){p3, g3, buf3}, IAV(1), FAV(0.1, 0.9, 0, 0)));
    double *fa = big ? FAV(1e-3, 0.8, 0.99, 1e-6, 0.1) : FAV(1e-2, 0.9, 0.999, 1e-8, 0.01);
    out(g, graph_op(g, OP_ADAMW, 4, (int[]){p4, g1, m, v}, NULL, fa));
    after(g, m);
    after(g, v);
    int rs = graph_buffer(g, "rs", DT_F32, 1, &shape[nd - 1], INIT_ONES, 0);
    int st = in(g, "st", dt, 1, &shape[nd - 1]);
    return out(g, graph_op(g, OP_RUNNING_STAT, 2, (int[]){rs, st}, NULL, FAV(0.1, 1.5)));
}

static int g_updates(graph *g, const op_case *tc) {
    return updates_of(g, tc->dt, 2, S(7, 13), false);
}
static int g_updates_big(graph *g, const op_case *tc) {
    return updates_of(g, tc->dt, 2, S(257, 301), true);
}

// under the grad scaler: a scale of 1024 that the gradient is unscaled by,
// a step count of 3 (Adam's t is 4, SGD's first-step rule is off); then
// found_inf set by an inf: every update skipped, parameters and state as
// they were
static int g_updates_scaled(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
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
        out(g, graph_op(g, OP_SGD, 5, (int[]){p1, gr, sc, fi, step}, IAV(0, 1), FAV(0.1, 0, 0.01)));
        out(g, graph_op(g, OP_SGD, 6, (int[]){p2, gr, buf, sc, fi, step}, IAV(1, 1),
                        FAV(0.1, 0.9, 0.01, 0.1)));
        out(g, graph_op(g, OP_ADAMW, 7, (int[]){p3, gr, m, v, sc, fi, step}, IAV(0, 1),
                        FAV(1e-2, 0.9, 0.999, 1e-8, 0.01)));
        y = after(g, m);
    }
    return y;
}

// the scale's update: growth after the interval, a step counted, a backoff
static int g_scaler_update(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
    int x = in(g, "x", dt, 1, S(9)), inf = graph_full(g, INFINITY, dt, 0, NULL), y = -1;
    for (int k = 0; k < 3; k++) {
        int sc = graph_buffer(g, "scale", DT_F32, 0, NULL, INIT_CONSTANT, 1024);
        int tr = graph_buffer(g, "tracker", DT_F32, 0, NULL, INIT_CONSTANT, k == 1 ? 0 : 2);
        int st = graph_buffer(g, "step", DT_F32, 0, NULL, INIT_CONSTANT, 5);
        int f = k == 2 ? graph_op(g, OP_FOUND_INF, 3, (int[]){sc, x, inf}, NULL, NULL)
                       : graph_op(g, OP_FOUND_INF, 2, (int[]){sc, x}, NULL, NULL);
        out(g, graph_op(g, OP_SCALER_UPDATE, 4, (int[]){sc, tr, st, f}, IAV(3), FAV(2, 0.5)));
        y = after(g, tr);
        if (k != 1)
            y = after(g, st);
    }
    return y;
}

// ---- one-op builders of the 16-bit cases ----

// the main (N, C, H, W) input, NHWC permuted when tc->perm
static int x4(graph *g, enum dtype dt, const op_case *tc) {
    const int64_t *s = tc->shape;
    if (!tc->perm)
        return graph_input(g, "x", dt, 4, s);
    int x = graph_input(g, "x", dt, 4, (int64_t[]){s[0], s[2], s[3], s[1]});
    return graph_permute(g, x, (int[]){0, 3, 1, 2});
}

// x (s), weight (s2) of dt; bias as tc->bias
static int h_conv(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
    int x = x4(g, dt, tc), w = graph_input(g, "w", dt, 4, tc->shape2);
    int64_t O = tc->op == OP_CONV2D ? tc->shape2[0] : tc->shape2[1] * tc->ia[6];
    int b = tc->bias == 1 ? graph_input(g, "b", dt, 1, &O) : param(g, 1, &O);
    return out(g, graph_op(g, tc->op, tc->bias ? 3 : 2, (int[]){x, w, b}, tc->ia, NULL));
}

// dy of the forward output's shape; grad_input: (dy, w) -> dx (s);
// grad_weight: (dy, x) -> dw (s2)
static int h_conv_grad(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
    const int64_t *xs = tc->shape, *ws = tc->shape2, *ia = tc->ia;
    int64_t dys[4] = {xs[0], ws[0], conv_out_size(xs[2], ws[2], ia[0], ia[2], ia[4]),
                      conv_out_size(xs[3], ws[3], ia[1], ia[3], ia[5])};
    int dy = graph_input(g, "dy", dt, 4, dys);
    bool data = tc->op == OP_CONV2D_GRAD_INPUT;
    int other = data ? graph_input(g, "w", dt, 4, ws) : x4(g, dt, tc);
    return out(g, graph_op_shaped(g, tc->op, 2, (int[]){dy, other}, ia, NULL, 4, data ? xs : ws));
}

// MAX_POOL2D, AVG_POOL2D, UPSAMPLE_NEAREST on x (s)
static int h_pool(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
    int x = x4(g, dt, tc);
    return out(g, graph_op(g, tc->op, 1, &x, tc->ia, NULL));
}

static int h_pool_grad(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
    const int64_t *xs = tc->shape, *ia = tc->ia;
    int64_t dys[4] = {xs[0], xs[1], pool_out_size(xs[2], ia, 0), pool_out_size(xs[3], ia, 1)};
    int dy = graph_input(g, "dy", dt, 4, dys);
    if (tc->op == OP_AVG_POOL2D_GRAD)
        return out(g, graph_op_shaped(g, tc->op, 1, &dy, ia, NULL, 4, xs));
    return out(g, graph_op(g, tc->op, 2, (int[]){dy, x4(g, dt, tc)}, ia, NULL));
}

// one input of s: reductions (axis ia0), softmax, log_softmax
static int h_one(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
    int x = graph_input(g, "x", dt, tc->nd, tc->shape);
    return out(g, graph_op(g, tc->op, 1, &x, tc->ia, tc->fa));
}

// (B, R, C) made contiguous as (B, C, R)
static int h_transpose(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
    int x = graph_input(g, "x", dt, 3, tc->shape);
    return out(g, graph_unary(g, OP_CONTIGUOUS, graph_permute(g, x, (int[]){0, 2, 1})));
}

// (R, 2 | 1 | 3) pieces along axis 1, the middle one a transposed view
static int h_concat(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
    int64_t R = tc->shape[0];
    int a = graph_input(g, "a", dt, 2, (int64_t[]){R, 2});
    int b = graph_permute(g, graph_input(g, "b", dt, 2, (int64_t[]){1, R}), (int[]){1, 0});
    int c = graph_input(g, "c", dt, 2, (int64_t[]){R, 3});
    return out(g, graph_op(g, OP_CONCAT, 3, (int[]){a, b, c}, tc->ia, NULL));
}

// dy (s2) into zeros of s at ia1 along ia0
static int h_slice_grad(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
    int dy = graph_input(g, "dy", dt, tc->nd2, tc->shape2);
    return out(g, graph_op_shaped(g, OP_SLICE_GRAD, 1, &dy, tc->ia, NULL, tc->nd, tc->shape));
}

static int idx_in(graph *g, int nd, const int64_t *shape, int64_t hi) {
    int id = graph_input(g, "idx", DT_I32, nd, shape);
    if (id >= 0) {
        g->nodes[id].ia[0] = 0;
        g->nodes[id].ia[1] = hi;
        g->nodes[id].ia[2] = 1;
    }
    return id;
}

// table (s) of dt, indices (s2)
static int h_embedding(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
    int t = graph_input(g, "table", dt, 2, tc->shape);
    int i = idx_in(g, tc->nd2, tc->shape2, tc->shape[0]);
    return out(g, graph_op(g, OP_EMBEDDING, 2, (int[]){t, i}, NULL, NULL));
}

// dy (s2..., D) onto a (V, D) = s table
static int h_embedding_grad(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
    int64_t dys[TENSOR_MAX_DIMS];
    memcpy(dys, tc->shape2, sizeof tc->shape2);
    dys[tc->nd2] = tc->shape[1];
    int i = idx_in(g, tc->nd2, tc->shape2, tc->shape[0]);
    int dy = graph_input(g, "dy", dt, tc->nd2 + 1, dys);
    return out(g,
               graph_op_shaped(g, OP_EMBEDDING_GRAD, 2, (int[]){dy, i}, NULL, NULL, 2, tc->shape));
}

static int h_sum_to(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
    int dy = graph_input(g, "dy", dt, tc->nd, tc->shape);
    return out(g, graph_op_shaped(g, OP_SUM_TO, 1, &dy, NULL, NULL, tc->nd2, tc->shape2));
}

// x of dt, f32 parameters as AMP has them: (C) over the last axis, or axis
// 1 for the channel norms; batch norm's running statistics
static int h_norm(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
    bool chan = tc->op == OP_BATCH_NORM || tc->op == OP_GROUP_NORM || tc->op == OP_INSTANCE_NORM;
    int64_t C = chan ? tc->shape[1] : tc->shape[tc->nd - 1];
    int x = graph_input(g, "x", dt, tc->nd, tc->shape);
    int w = param(g, 1, &C), b = param(g, 1, &C);
    int s[5] = {x, w, b, -1, -1}, ns = tc->op == OP_RMS_NORM ? 2 : 3;
    if (tc->op == OP_BATCH_NORM) {
        s[ns++] = graph_buffer(g, "mean", DT_F32, 1, &C, INIT_NORMAL, 0.5);
        s[ns++] = graph_buffer(g, "var", DT_F32, 1, &C, INIT_ONES, 0);
    }
    return out(g, graph_op(g, tc->op, ns, s, tc->ia, tc->fa));
}

// dy, x of dt and an f32 weight (C); weight gradients take dy and x only
static int h_norm_grad(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
    bool chan = tc->op == OP_BATCH_NORM_GRAD || tc->op == OP_BATCH_NORM_WGRAD ||
                tc->op == OP_GROUP_NORM_GRAD || tc->op == OP_GROUP_NORM_WGRAD;
    int64_t C = chan ? tc->shape[1] : tc->shape[tc->nd - 1];
    int dy = graph_input(g, "dy", dt, tc->nd, tc->shape),
        x = graph_input(g, "x", dt, tc->nd, tc->shape);
    int w = param(g, 1, &C);
    return out(g, graph_op(g, tc->op, op_min_srcs(tc->op), (int[]){dy, x, w}, tc->ia, tc->fa));
}

// a (s) @ b (s2); when tc->perm, b (..., K, N) is the transposed view of a
// (..., N, K) input (attention's q @ k^T)
static int h_matmul(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
    int a = graph_input(g, "a", dt, tc->nd, tc->shape), nb = tc->nd2;
    int64_t bs[4];
    int perm[4];
    for (int d = 0; d < nb; d++) {
        bool last2 = tc->perm && d >= nb - 2;
        perm[d] = last2 ? 2 * nb - 3 - d : d;
        bs[d] = tc->shape2[perm[d]];
    }
    int b = graph_input(g, "b", dt, nb, bs);
    if (tc->perm)
        b = graph_permute(g, b, perm);
    return out(g, graph_op(g, OP_MATMUL, 2, (int[]){a, b}, NULL, NULL));
}

// x (s) @ w (s2 = (N, K))^T + bias: an input of dt (bias 1) or an f32 parameter (2)
static int h_linear(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
    int x = graph_input(g, "x", dt, tc->nd, tc->shape), w = graph_input(g, "w", dt, 2, tc->shape2);
    int64_t N = tc->shape2[0];
    int b = tc->bias == 1 ? graph_input(g, "b", dt, 1, &N) : param(g, 1, &N);
    return out(g, graph_op(g, OP_LINEAR, tc->bias ? 3 : 2, (int[]){x, w, b}, NULL, NULL));
}

// two inputs of s: softmax grads, act_grad, mse_loss
static int h_two(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
    int a = graph_input(g, "a", dt, tc->nd, tc->shape),
        b = graph_input(g, "b", dt, tc->nd, tc->shape);
    return out(g, graph_op(g, tc->op, 2, (int[]){a, b}, tc->ia, tc->fa));
}

// logits (N, C) of dt, targets; the grad with an f32 dloss ()
static int h_cross_entropy(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
    int x = graph_input(g, "x", dt, 2, tc->shape), t = idx_in(g, 1, tc->shape, tc->shape[1]);
    if (tc->op == OP_CROSS_ENTROPY)
        return out(g, graph_op(g, OP_CROSS_ENTROPY, 2, (int[]){x, t}, tc->ia, tc->fa));
    int dl = graph_input(g, "dl", DT_F32, 0, NULL);
    return out(g, graph_op(g, OP_CROSS_ENTROPY_GRAD, 3, (int[]){dl, x, t}, tc->ia, tc->fa));
}

// an f32 dloss (), a and b of dt
static int h_mse_grad(graph *g, const op_case *tc) {
    enum dtype dt = tc->dt;
    int dl = graph_input(g, "dl", DT_F32, 0, NULL);
    int a = graph_input(g, "a", dt, tc->nd, tc->shape),
        b = graph_input(g, "b", dt, tc->nd, tc->shape);
    return out(g, graph_op(g, OP_MSE_LOSS_GRAD, 3, (int[]){dl, a, b}, NULL, NULL));
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
// conv2d's ia: stride (2), padding (2), dilation (2), groups, output padding (2)
#define CONV(sh, sw, ph, pw, dh, dw, g) IA(sh, sw, ph, pw, dh, dw, g)
// run in f32, f16 and bf16; one kernel in CPU eager
#define HALF .half = HALF_F16 | HALF_BF16, ONE, .rtol = 1e-4, .atol = 1e-5
#define CPU_MODES                                                                                  \
    (OPM_BIT(OPM_EAGER) | OPM_BIT(OPM_COMPILED) | OPM_BIT(OPM_FUSED) | OPM_BIT(OPM_CAPTURED))
#define COMPILE_MODES                                                                              \
    (OPM_BIT(OPM_COMPILED) | OPM_BIT(OPM_FUSED) | OPM_BIT(OPM_CAPTURED) |                          \
     OPM_BIT(OPM_CUDA_COMPILED) | OPM_BIT(OPM_CUDA_FUSED) | OPM_BIT(OPM_CUDA_CAPTURED) |           \
     OPM_BIT(OPM_NVRTC))
// the CPU kernels do not share it: run on the GPU only
#define GPU_ONLY .known_fail = CPU_MODES
// Known engine bug: the compiler's decompose pass refuses 16-bit data beside
// f32 weights, biases or a loss gradient, which eager runs (the layout AMP
// gives norms and biases): "decompose linear: add: dtypes f16 and f32 differ
// (cast one first)"; batch norm in training says "running_stat: gradient (3)
// does not match (3)". On the CPU and in the CUDA source alike.
#define MIXED_DTYPES COMPILE_MODES
// Not a bug: CUDA eager, as PyTorch's CUDA kernels, takes the operands of a
// GEMM, convolution or loss gradient in one dtype ("linear: dtypes f16, f32,
// f32 are not supported (f32 or f16, all alike)"); AMP's graphs on the GPU
// give it one (docs/cuda.md). The CPU kernels take the mix.
#define MIXED_DTYPES_CUDA (MIXED_DTYPES | OPM_BIT(OPM_CUDA_EAGER))
// Known engine bug: the compiled mode lowers a 16-bit batch norm gradient to
// a batch_norm_stats that the CPU kernels run in f32 only ("batch_norm_stats:
// dtype f16 is not supported by the CPU eager kernels").
// The CUDA program's batch_norm_stats updates f32 running statistics only
// ("the tensors it updates in place must be contiguous f32, got f16"), as
// AMP keeps them.
#define BN_STATS_16                                                                                \
    (OPM_BIT(OPM_COMPILED) | OPM_BIT(OPM_FUSED) | OPM_BIT(OPM_CAPTURED) |                          \
     OPM_BIT(OPM_CUDA_COMPILED) | OPM_BIT(OPM_CUDA_FUSED) | OPM_BIT(OPM_CUDA_CAPTURED))
// an f16 variant too, within rtol and atol (0: 2e-3 each)
#define ALSO_F16(rt, at) .half = HALF_F16, .rtol16 = (rt), .atol16 = (at)
#define ONE              .kernels = 1
#define SOME             .kernels = -1 // kernels launched, not counted

#define UN(o)                                                                                      \
    { #o, b_unary_wide, OP_##o, S2(7, 13), ONE }
#define AG(o)                                                                                      \
    { "act_grad_" #o, b_act_grad, OP_ACT_GRAD, S2(7, 13), IA(OP_##o), .atol = 1e-5, ONE }
#define NORM(eps, tol) .fa = {eps}, .rtol = 1e-4, .atol = (tol)
#define UN_POS(o)                                                                                  \
    { #o "_pos", b_unary_pos, OP_##o, S2(7, 13), ONE }

const op_case op_cases[] = {
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
    UN(SELU),
    {"selu_f16_big", b_unary, OP_SELU, BIG, F16, ONE},
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
    // noise: so is the normal draw, up to the f32 rounding of x + (float)(std z)
    {"noise", b_unary, OP_NOISE, BIG, .fa = {0.5}, IA(7), ONE},
    {"noise_std0", b_unary, OP_NOISE, S2(7, 13), ONE},
    {"noise_f16", b_unary, OP_NOISE, S2(7, 13), F16, .fa = {0.25}, IA(3), ONE},
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
    // ia0: the axes after the softmax's (ResNeSt's radix softmax over dim 1)
    {"softmax_axis1", b_unary, OP_SOFTMAX, S4(3, 2, 4, 5), IA(2), ONE},
    {"softmax_axis0", b_unary, OP_SOFTMAX, S2(6, 7), IA(1), ONE},
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
    {"instance_norm", b_channel_norm, OP_INSTANCE_NORM, S4(2, 6, 5, 7), IA(6), .fa = {1e-5},
     .rtol = 1e-4, .atol = 1e-5, ONE},
    {"instance_norm_big", b_channel_norm, OP_INSTANCE_NORM, S4(2, 32, 24, 24), IA(32), .fa = {1e-5},
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
    {"linear_f16_bias", b_linear, OP_LINEAR, S3(5, 7, 13), T2(6, 13), IA(1), F16, ONE,
     .known_fail = MIXED_DTYPES_CUDA},
    {"linear_f16_big", b_linear, OP_LINEAR, S2(300, 96), T2(80, 96), IA(1), F16, ONE,
     .known_fail = MIXED_DTYPES_CUDA},
    // a few rows against an f16 weight (AMP decoding): the f16 matrix-vector
    // kernel, one row (AVX-512: halves widened in registers) and three, on
    // one thread and with the columns split over the threads
    {"linear_f16_gemv", b_linear_hw, OP_LINEAR, S2(1, 100), T2(70, 100), F16, .kernels = 2},
    {"linear_f16_gemv_rows", b_linear_hw, OP_LINEAR, S3(1, 3, 40), T2(37, 40), F16, .kernels = 2},
    {"linear_f16_gemv_par", b_linear_hw, OP_LINEAR, S2(1, 512), T2(300, 512), F16, .kernels = 2},
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
    // ia6 ceil mode (a last window starting in the right padding), ia7 the
    // padding left out of avg's count (Inception's, NASNet's, ResNeSt's pools)
    {"max_pool2d_ceil", b_unary, OP_MAX_POOL2D, S4(2, 3, 10, 12), IA(2, 2, 1, 1, 3, 3, 1), ONE},
    {"avg_pool2d_exclude", b_unary, OP_AVG_POOL2D, S4(2, 3, 9, 11), IA(2, 2, 1, 1, 3, 3, 0, 1),
     ONE},
    {"avg_pool2d_exclude_ceil", b_unary, OP_AVG_POOL2D, S4(1, 2, 7, 9), IA(2, 2, 0, 0, 2, 2, 1, 1),
     ONE},
    {"avg_pool2d_exclude_ceil_pad", b_unary, OP_AVG_POOL2D, S4(2, 3, 10, 12),
     IA(2, 2, 1, 1, 3, 3, 1, 1), ONE},
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
    // quantized weights: odd K (group tails, a half-used int4 byte), GEMV and tiles
    {"dequant_int4", b_quant, OP_DEQUANT, S1(1), T2(7, 45), IA(4, 32, 45), ONE},
    {"dequant_int8_f16_scales", b_quant, OP_DEQUANT, S1(1), T2(5, 100), IA(8, 32, 100), .bias = 2,
     ONE},
    {"qlinear_int4_gemv_bias", b_quant, OP_QLINEAR, S2(3, 45), T2(13, 45), IA(4, 32, 45), .bias = 1,
     GEMM(45), ONE},
    {"qlinear_int8_tiles", b_quant, OP_QLINEAR, S3(3, 7, 100), T2(40, 100), IA(8, 32, 100),
     .bias = 2, GEMM(100), ONE},
    {"qlinear_int4_f16", b_quant, OP_QLINEAR, S2(17, 64), T2(9, 64), IA(4, 64, 64), F16, ONE},
    // K and group multiples of 8: CUDA's tq_gemv4 (a short last group; f16 scales)
    {"qlinear_int4_gemv8_bias", b_quant, OP_QLINEAR, S2(5, 200), T2(37, 200), IA(4, 64, 200),
     .bias = 1, GEMM(200), ONE},
    {"qlinear_int4_gemv8_f16", b_quant, OP_QLINEAR, S3(1, 1, 96), T2(19, 96), IA(4, 32, 96),
     .bias = 2, F16, ONE},
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
    // torch.roll (Swin's shifted windows): two axes, negative shifts, a shift past the size,
    // one axis of a transposed view, 16-bit
    {"roll_2d", b_unary, OP_ROLL, S4(2, 7, 6, 3), IA(0, -3, 2, 0), ONE},
    {"roll_wrap", b_unary, OP_ROLL, S3(3, 5, 4), IA(7, 0, -1), ONE},
    {"roll_perm", b_unary_perm, OP_ROLL, S2(9, 5), IA(0, 2), ONE},
    {"roll_big", b_unary, OP_ROLL, BIG, IA(100, -7), HALF},
    // F.unfold / F.fold (VOLO's outlook attention: kernel 3, padding 1, stride 2), odd sizes,
    // overlapping and disjoint blocks, a transposed view, f16
    {"unfold", b_unary, OP_UNFOLD, S4(2, 3, 7, 6), IA(3, 3, 1, 1, 2, 2), ONE},
    {"unfold_k2", b_unary, OP_UNFOLD, S4(1, 2, 5, 4), IA(2, 1, 0, 0, 1, 1), ONE},
    {"fold", b_unary, OP_FOLD, S3(2, 27, 12), IA(3, 3, 1, 1, 2, 2, 7, 6), ONE},
    {"fold_overlap", b_unary, OP_FOLD, S3(1, 8, 16), IA(2, 2, 0, 0, 1, 1, 5, 5), ONE},
    {"unfold_f16", b_unary, OP_UNFOLD, S4(2, 3, 7, 6), IA(3, 3, 1, 1, 2, 2), F16, ONE},
    {"fold_f16", b_unary, OP_FOLD, S3(2, 27, 12), IA(3, 3, 1, 1, 2, 2, 7, 6), F16, ONE},
    // losses (ia0 is the ignored target; -100 ignores none)
    {"cross_entropy", b_cross_entropy, OP_CROSS_ENTROPY, S2(9, 13), .dt = DT_I32, IA(-100),
     .atol = 1e-5, ONE},
    {"cross_entropy_ignore", b_cross_entropy, OP_CROSS_ENTROPY, S2(40, 5), .dt = DT_I64, IA(3),
     .atol = 1e-5, ONE},
    {"cross_entropy_big", b_cross_entropy, OP_CROSS_ENTROPY, S2(64, 1000), .dt = DT_I32, IA(-100),
     .atol = 1e-5, ONE},
    // fa0: label smoothing (Speech-Transformer's 0.1), with ignored rows
    {"cross_entropy_smooth", b_cross_entropy, OP_CROSS_ENTROPY, S2(40, 5), .dt = DT_I64, IA(3),
     .fa = {0.1}, .atol = 1e-5, ONE},
    {"cross_entropy_smooth_big", b_cross_entropy, OP_CROSS_ENTROPY, S2(64, 1000), .dt = DT_I32,
     IA(-100), .fa = {0.1}, .atol = 1e-5, ONE},
    {"mse_loss", b_mse, OP_MSE_LOSS, S2(7, 13), .atol = 1e-6, ONE},
    {"mse_loss_big", b_mse, OP_MSE_LOSS, BIG, .atol = 1e-5, ONE},
    {"bce_loss", b_bce, OP_BCE_LOSS, S2(7, 13), .atol = 1e-6, .kernels = 2}, // sigmoid, bce
    {"bce_with_logits_loss", b_bce, OP_BCE_LOSS, S2(7, 13), IA(1), .atol = 1e-6, ONE},
    {"bce_with_logits_loss_big", b_bce, OP_BCE_LOSS, BIG, IA(1), .atol = 1e-5, ONE},
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
    AG(SELU),
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
    {"softmax_grad_axis1", b_binary, OP_SOFTMAX_GRAD, S4(3, 2, 4, 5), T4(3, 2, 4, 5), IA(2), ONE},
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
    // instance norm's backward: group norm's with a group a channel
    {"instance_norm_grad", b_norm_grad, OP_GROUP_NORM_GRAD, S4(2, 6, 5, 7), IA(6), NORM(1e-5, 1e-5),
     ONE},
    {"instance_norm_wgrad", b_norm_grad, OP_GROUP_NORM_WGRAD, S4(2, 6, 5, 7), IA(6),
     NORM(1e-5, 1e-5), ONE},
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
    {"max_pool2d_grad_ceil", b_pool_grad, OP_MAX_POOL2D_GRAD, S4(2, 3, 10, 12),
     IA(2, 2, 1, 1, 3, 3, 1), ONE},
    {"avg_pool2d_grad_exclude", b_pool_grad, OP_AVG_POOL2D_GRAD, S4(2, 3, 9, 11),
     IA(2, 2, 1, 1, 3, 3, 0, 1), ONE},
    {"avg_pool2d_grad_exclude_ceil", b_pool_grad, OP_AVG_POOL2D_GRAD, S4(2, 3, 10, 12),
     IA(2, 2, 1, 1, 3, 3, 1, 1), ONE},
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
    {"cross_entropy_grad_smooth", b_cross_entropy_grad, OP_CROSS_ENTROPY_GRAD, S2(40, 5),
     .dt = DT_I64, IA(3), .fa = {0.1}, ONE},
    {"cross_entropy_grad_smooth_big", b_cross_entropy_grad, OP_CROSS_ENTROPY_GRAD, S2(64, 1000),
     .dt = DT_I32, IA(-100), .fa = {0.1}, ONE},
    {"mse_loss_grad", b_mse_grad, OP_MSE_LOSS_GRAD, S2(7, 13), ONE},
    {"mse_loss_grad_perm_big", b_mse_grad, OP_MSE_LOSS_GRAD, BIG, IA(1), ONE},
    {"bce_loss_grad", b_bce, OP_BCE_LOSS_GRAD, S2(7, 13), .kernels = 2},
    {"bce_with_logits_loss_grad", b_bce, OP_BCE_LOSS_GRAD, S2(7, 13), IA(1), ONE},
    {"bce_with_logits_loss_grad_big", b_bce, OP_BCE_LOSS_GRAD, BIG, IA(1), ONE},
    // updates at step 1 (several steps: test_updates_steps)
    {"sgd", b_update, OP_SGD, S2(7, 13), .fa = {0.1, 0, 0.01}, ONE},
    {"sgd_momentum", b_update, OP_SGD, S2(7, 13), .fa = {0.1, 0.9, 0.01, 0.1}, ONE},
    {"sgd_nesterov_perm", b_update, OP_SGD, S2(7, 13), IA(1, 1), .fa = {0.1, 0.9, 0, 0},
     .kernels = 2},
    {"sgd_big", b_update, OP_SGD, BIG, .fa = {0.1, 0.9, 0.01, 0}, ONE},
    {"adamw", b_update, OP_ADAMW, S2(7, 13), .fa = {1e-2, 0.9, 0.999, 1e-8, 0.01}, ONE},
    {"adamw_big", b_update, OP_ADAMW, BIG, .fa = {1e-3, 0.8, 0.99, 1e-6, 0.1}, ONE},
    {"running_stat", b_update, OP_RUNNING_STAT, S1(13), .fa = {0.1, 1.5}, ONE},
    {"kv_write", b_kv_write, OP_KV_WRITE, S4(2, 3, 10, 4), T4(2, 3, 3, 4), .kernels = 2},
    {"kv_write_i64", b_kv_write, OP_KV_WRITE, S4(2, 1, 7, 8), T4(2, 1, 1, 8), IA(1), .kernels = 2},
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
    // several ops a graph, each row once in its dtype
    {"ops_sources", .build = g_sources, SOME},
    {"ops_unary", .build = g_unary_all, SOME, ALSO_F16(0, 0)},
    {"ops_unary2", .build = g_unary_all2, SOME, ALSO_F16(0, 0)},
    {"ops_unary_big", .build = g_unary_big, SOME},
    {"ops_unary_views", .build = g_unary_views, SOME, ALSO_F16(0, 0)},
    // cast(cast(x, f16), f32) keeps the f16 rounding when the pair fuses
    {"ops_cast", .build = g_cast, SOME},
    {"ops_dropout", .build = g_dropout, SOME, ALSO_F16(0, 0)},
    {"ops_noise", .build = g_noise, SOME, ALSO_F16(0, 0)},
    {"ops_binary", .build = g_binary, SOME, ALSO_F16(0, 0)},
    {"ops_binary_big", .build = g_binary_big, SOME},
    {"ops_binary_int", .build = g_binary_int, SOME, .dt = DT_I32},
    {"ops_where", .build = g_where, SOME, ALSO_F16(0, 0)},
    {"ops_reduce", .build = g_reduce, SOME, .rtol = 1e-5, .atol = 1e-4, ALSO_F16(4e-3, 4e-2)},
    {"ops_reduce_last", .build = g_reduce_last, SOME, .rtol = 1e-5, .atol = 1e-4,
     ALSO_F16(4e-3, 4e-2)},
    // log_softmax of 1000 wide values: x - logsumexp with the sum near 10, whose f32 ulp is 1e-6
    {"ops_softmax", .build = g_softmax, SOME, .rtol = 1e-5, .atol = 4e-6, ALSO_F16(0, 0)},
    {"ops_norms", .build = g_norms, SOME, .rtol = 1e-4, .atol = 1e-5, ALSO_F16(4e-3, 4e-3)},
    {"ops_timm_layers", .build = g_timm_layers, SOME, .rtol = 1e-4, .atol = 1e-5},
    {"ops_matmul", .build = g_matmul, SOME, .rtol = 1e-5, .atol = 1e-4, ALSO_F16(4e-3, 4e-2)},
    {"ops_linear", .build = g_linear, SOME, .rtol = 1e-5, .atol = 1e-4, ALSO_F16(4e-3, 4e-2)},
    {"ops_conv_pool", .build = g_conv, SOME, .rtol = 1e-5, .atol = 1e-4, ALSO_F16(4e-3, 4e-2)},
    {"ops_pool", .build = g_pool, SOME, ALSO_F16(0, 0)},
    {"ops_embedding", .build = g_embedding, SOME, ALSO_F16(0, 0)},
    {"ops_views", .build = g_views, SOME},
    {"ops_concat", .build = g_concat, SOME, ALSO_F16(0, 0)},
    {"ops_losses", .build = g_losses, SOME, .rtol = 1e-5, .atol = 1e-5, ALSO_F16(2e-3, 2e-3)},
    // training
    {"ops_ge", .build = g_ge, SOME, ALSO_F16(0, 0)},
    {"ops_act_grad", .build = g_act_grad, SOME, .rtol = 1e-5, .atol = 1e-5, ALSO_F16(0, 0)},
    {"ops_act_grad2", .build = g_act_grad2, SOME, .rtol = 1e-5, .atol = 1e-5, ALSO_F16(0, 0)},
    {"ops_act_grad3_views", .build = g_act_grad3, SOME, .rtol = 1e-5, .atol = 1e-5, ALSO_F16(0, 0)},
    {"ops_sum_to", .build = g_sum_to, SOME, .rtol = 1e-5, .atol = 1e-5, ALSO_F16(2e-3, 1e-2)},
    {"ops_sum_to_big", .build = g_sum_to_big, SOME, .rtol = 1e-5, .atol = 2e-3,
     ALSO_F16(4e-3, 5e-2)},
    {"ops_softmax_grad", .build = g_softmax_grad, SOME, .rtol = 1e-4, .atol = 1e-5,
     ALSO_F16(4e-3, 4e-3)},
    {"ops_norm_grads", .build = g_norm_grads, SOME, .rtol = 1e-4, .atol = 1e-4,
     ALSO_F16(4e-3, 4e-2), .known_fail16 = MIXED_DTYPES},
    {"ops_chan_norm_grads", .build = g_chan_norm_grads, SOME, .rtol = 1e-4, .atol = 1e-4,
     ALSO_F16(4e-3, 4e-2), .known_fail16 = BN_STATS_16},
    {"ops_norm_grads_big", .build = g_norm_grads_big, SOME, .rtol = 1e-4, .atol = 2e-4,
     ALSO_F16(4e-3, 5e-2), .known_fail16 = MIXED_DTYPES},
    {"ops_batch_norm_train", .build = g_bn_train, SOME, .rtol = 1e-4, .atol = 1e-5,
     ALSO_F16(4e-3, 4e-3), .known_fail16 = MIXED_DTYPES},
    {"ops_conv_grads", .build = g_conv_grads, SOME, .rtol = 1e-4, .atol = 2e-3,
     ALSO_F16(4e-3, 5e-2)},
    {"ops_pool_grads", .build = g_pool_grads, SOME, ALSO_F16(0, 0)},
    // max pooling's gradient over NaN: ref.c gives dy to a window's first NaN,
    // the CPU kernels to its last (a rule of their own, not a bug)
    {"ops_max_pool_grad_nan", .build = g_pool_nan, SOME, GPU_ONLY},
    {"ops_embedding_grad", .build = g_embedding_grads, SOME, .rtol = 1e-5, .atol = 1e-5,
     ALSO_F16(2e-3, 1e-2)},
    {"ops_slice_grad", .build = g_slice_grads, SOME, ALSO_F16(0, 0)},
    {"ops_box_indices", .build = g_box_indices, SOME, .rtol = 1e-5, .atol = 1e-5,
     ALSO_F16(2e-3, 1e-2)},
    {"ops_loss_grads", .build = g_loss_grads, SOME, .rtol = 1e-5, .atol = 1e-6, ALSO_F16(0, 0)},
    {"ops_found_inf", .build = g_found_inf, SOME, ALSO_F16(0, 0)},
    {"ops_updates", .build = g_updates, SOME, .rtol = 1e-5, .atol = 1e-5},
    {"ops_updates_big", .build = g_updates_big, SOME, .rtol = 1e-5, .atol = 1e-5},
    {"ops_updates_scaled", .build = g_updates_scaled, SOME, .rtol = 1e-5, .atol = 1e-5},
    {"ops_scaler_update", .build = g_scaler_update, SOME},
    // one op, in f32, f16 and bf16 (op_case.half)
    // convolutions: x and w f16, bias f16 or f32
    {"half_conv2d_bias", h_conv, OP_CONV2D, S4(2, 3, 9, 11), T4(4, 3, 3, 3),
     CONV(1, 1, 1, 1, 1, 1, 1), .bias = 1, HALF},
    {"half_conv2d_stride_pad_dil_f32_bias", h_conv, OP_CONV2D, S4(2, 3, 13, 12), T4(5, 3, 3, 2),
     CONV(2, 3, 0, 1, 2, 1, 1), .bias = 2, HALF, .known_fail16 = MIXED_DTYPES_CUDA},
    {"half_conv2d_groups", h_conv, OP_CONV2D, S4(1, 4, 8, 8), T4(6, 2, 3, 3),
     CONV(1, 1, 1, 1, 1, 1, 2), HALF},
    {"half_conv2d_depthwise_perm", h_conv, OP_CONV2D, S4(2, 8, 7, 7), T4(8, 1, 3, 3),
     CONV(2, 2, 1, 1, 1, 1, 8), .bias = 1, .perm = true, HALF},
    {"half_conv2d_1x1_big", h_conv, OP_CONV2D, S4(2, 32, 28, 28), T4(48, 32, 1, 1),
     CONV(1, 1, 0, 0, 1, 1, 1), .bias = 1, HALF},
    {"half_conv_transpose2d", h_conv, OP_CONV_TRANSPOSE2D, S4(2, 4, 5, 6), T4(4, 3, 3, 3),
     IA(2, 2, 1, 1, 1, 1, 1, 1, 1), .bias = 1, HALF},
    {"half_conv_transpose2d_groups_dil", h_conv, OP_CONV_TRANSPOSE2D, S4(1, 4, 5, 5),
     T4(4, 2, 3, 2), IA(1, 2, 1, 0, 2, 1, 2, 0, 1), .bias = 2, HALF,
     .known_fail16 = MIXED_DTYPES_CUDA},
    {"half_conv2d_grad_input", h_conv_grad, OP_CONV2D_GRAD_INPUT, S4(2, 3, 13, 12), T4(5, 3, 3, 2),
     CONV(2, 3, 0, 1, 2, 1, 1), HALF},
    {"half_conv2d_grad_input_groups", h_conv_grad, OP_CONV2D_GRAD_INPUT, S4(1, 4, 8, 8),
     T4(6, 2, 3, 3), CONV(1, 1, 1, 1, 1, 1, 2), HALF},
    {"half_conv2d_grad_weight", h_conv_grad, OP_CONV2D_GRAD_WEIGHT, S4(2, 3, 9, 11), T4(4, 3, 3, 3),
     CONV(1, 1, 1, 1, 1, 1, 1), .perm = true, HALF},
    {"half_conv2d_grad_weight_depthwise", h_conv_grad, OP_CONV2D_GRAD_WEIGHT, S4(2, 4, 7, 7),
     T4(4, 1, 3, 3), CONV(2, 2, 1, 1, 1, 1, 4), HALF},
    // pooling, upsampling and their gradients (pool ia: stride, padding, kernel)
    {"half_max_pool2d_perm", h_pool, OP_MAX_POOL2D, S4(2, 3, 9, 11), IA(2, 2, 1, 1, 3, 3),
     .perm = true, HALF},
    {"half_avg_pool2d", h_pool, OP_AVG_POOL2D, S4(2, 3, 9, 11), IA(2, 2, 1, 1, 3, 3), HALF},
    {"half_avg_pool2d_exclude_ceil", h_pool, OP_AVG_POOL2D, S4(2, 3, 10, 12),
     IA(2, 2, 1, 1, 3, 3, 1, 1), HALF},
    {"half_max_pool2d_ceil", h_pool, OP_MAX_POOL2D, S4(2, 3, 10, 12), IA(2, 2, 1, 1, 3, 3, 1),
     HALF},
    {"half_max_pool2d_big", h_pool, OP_MAX_POOL2D, S4(4, 16, 32, 32), IA(2, 2, 0, 0, 2, 2), HALF},
    {"half_max_pool2d_grad", h_pool_grad, OP_MAX_POOL2D_GRAD, S4(2, 3, 9, 11), IA(2, 2, 1, 1, 3, 3),
     HALF},
    {"half_avg_pool2d_grad", h_pool_grad, OP_AVG_POOL2D_GRAD, S4(1, 2, 8, 9), IA(1, 3, 0, 1, 2, 3),
     HALF},
    {"half_avg_pool2d_grad_exclude_ceil", h_pool_grad, OP_AVG_POOL2D_GRAD, S4(2, 3, 10, 12),
     IA(2, 2, 1, 1, 3, 3, 1, 1), HALF},
    {"half_upsample_nearest_perm", h_pool, OP_UPSAMPLE_NEAREST, S4(1, 3, 4, 5), IA(3), .perm = true,
     HALF},
    // data movement
    {"half_concat", h_concat, OP_CONCAT, S2(7, 0), IA(1), HALF},
    {"half_slice_grad", h_slice_grad, OP_SLICE_GRAD, S3(4, 9, 5), .nd2 = 3, .shape2 = {4, 3, 5},
     IA(1, 2), HALF},
    {"half_embedding", h_embedding, OP_EMBEDDING, S2(11, 6), T2(3, 5), HALF},
    {"half_embedding_grad", h_embedding_grad, OP_EMBEDDING_GRAD, S2(7, 6), T1(40), HALF},
    {"half_contiguous_transpose", h_transpose, OP_CONTIGUOUS, S3(2, 33, 70), HALF},
    // reductions: f32 sums, the result rounded once
    {"half_sum_rows_big", h_one, OP_SUM, BIG, IA(1), HALF},
    {"half_mean_inner_big", h_one, OP_MEAN, BIG, IA(0), HALF},
    {"half_max_rows", h_one, OP_MAX, S3(3, 7, 13), IA(2), HALF},
    {"half_sum_to_bias_big", h_sum_to, OP_SUM_TO, BIG, T1(301), .own = true, HALF},
    {"half_sum_to_channel", h_sum_to, OP_SUM_TO, S4(2, 5, 6, 7), .nd2 = 3, .shape2 = {5, 1, 1},
     .own = true, HALF},
    // softmax, norms and their gradients
    {"half_softmax", h_one, OP_SOFTMAX, S3(2, 7, 13), HALF},
    {"half_softmax_axis1", h_one, OP_SOFTMAX, S3(2, 7, 13), IA(1), HALF},
    {"half_log_softmax_big", h_one, OP_LOG_SOFTMAX, BIG, HALF},
    {"half_layer_norm", h_norm, OP_LAYER_NORM, S3(5, 7, 64), .fa = {1e-5},
     .known_fail16 = MIXED_DTYPES, HALF},
    {"half_rms_norm", h_norm, OP_RMS_NORM, S2(9, 13), .fa = {1e-6}, .known_fail16 = MIXED_DTYPES,
     HALF},
    {"half_batch_norm", h_norm, OP_BATCH_NORM, S4(2, 3, 5, 7), .fa = {1e-5},
     .known_fail16 = MIXED_DTYPES, HALF},
    {"half_batch_norm_train", h_norm, OP_BATCH_NORM, S4(2, 3, 5, 7), IA(1), .fa = {1e-5, 0.1},
     .known_fail16 = MIXED_DTYPES, HALF},
    {"half_group_norm", h_norm, OP_GROUP_NORM, S4(2, 6, 5, 7), IA(3), .fa = {1e-5},
     .known_fail16 = MIXED_DTYPES, HALF},
    {"half_instance_norm", h_norm, OP_INSTANCE_NORM, S4(2, 6, 5, 7), IA(6), .fa = {1e-5},
     .known_fail16 = MIXED_DTYPES, HALF},
    {"half_softmax_grad", h_two, OP_SOFTMAX_GRAD, S2(7, 13), HALF},
    {"half_softmax_grad_axis0", h_two, OP_SOFTMAX_GRAD, S2(7, 13), IA(1), HALF},
    {"half_log_softmax_grad", h_two, OP_LOG_SOFTMAX_GRAD, S3(2, 7, 13), HALF},
    {"half_layer_norm_grad", h_norm_grad, OP_LAYER_NORM_GRAD, S3(5, 7, 64), .fa = {1e-5},
     .known_fail16 = MIXED_DTYPES, HALF},
    {"half_layer_norm_wgrad", h_norm_grad, OP_LAYER_NORM_WGRAD, S3(5, 7, 64), .fa = {1e-5}, HALF},
    {"half_batch_norm_grad", h_norm_grad, OP_BATCH_NORM_GRAD, S4(2, 3, 5, 7), .fa = {1e-5},
     .known_fail16 = BN_STATS_16, HALF},
    {"half_batch_norm_wgrad", h_norm_grad, OP_BATCH_NORM_WGRAD, S4(2, 3, 5, 7), .fa = {1e-5},
     .known_fail16 = BN_STATS_16, HALF},
    {"half_group_norm_grad", h_norm_grad, OP_GROUP_NORM_GRAD, S4(2, 6, 5, 7), IA(3), .fa = {1e-5},
     HALF},
    {"half_instance_norm_grad", h_norm_grad, OP_GROUP_NORM_GRAD, S4(2, 6, 5, 7), IA(6),
     .fa = {1e-5}, HALF},
    {"half_act_grad_gelu", h_two, OP_ACT_GRAD, S2(7, 13), IA(OP_GELU), .own = true, HALF},
    // losses over f16 values (the loss itself is f32)
    {"half_cross_entropy", h_cross_entropy, OP_CROSS_ENTROPY, S2(9, 13), IA(-100), HALF},
    {"half_cross_entropy_grad", h_cross_entropy, OP_CROSS_ENTROPY_GRAD, S2(9, 13), IA(-100), HALF},
    {"half_cross_entropy_smooth", h_cross_entropy, OP_CROSS_ENTROPY, S2(9, 13), IA(-100),
     .fa = {0.1}, HALF},
    {"half_cross_entropy_grad_smooth", h_cross_entropy, OP_CROSS_ENTROPY_GRAD, S2(9, 13), IA(-100),
     .fa = {0.1}, HALF},
    {"half_mse_loss", h_two, OP_MSE_LOSS, S2(7, 13), HALF},
    {"half_bce_with_logits_loss", b_bce, OP_BCE_LOSS, S2(7, 13), IA(1), HALF},
    // the target stays f32 beside 16-bit logits (MIXED_DTYPES_CUDA on the GPU)
    {"half_bce_with_logits_loss_grad", b_bce, OP_BCE_LOSS_GRAD, S2(7, 13), IA(1), HALF,
     .known_fail16 = OPM_BIT(OPM_CUDA_EAGER) | OPM_BIT(OPM_CUDA_COMPILED) |
                     OPM_BIT(OPM_CUDA_FUSED) | OPM_BIT(OPM_CUDA_CAPTURED)},
    {"half_mse_loss_grad", h_mse_grad, OP_MSE_LOSS_GRAD, S2(7, 13), HALF,
     .known_fail16 = MIXED_DTYPES_CUDA},
    // GEMMs: operands widened, one f32 GEMM, the result rounded once
    {"half_matmul_batched", h_matmul, OP_MATMUL, S3(3, 17, 24), .nd2 = 3, .shape2 = {3, 24, 9},
     HALF},
    {"half_matmul_transposed_b", h_matmul, OP_MATMUL, S2(33, 40), T2(40, 27), .perm = true, HALF},
    {"half_linear_bias", h_linear, OP_LINEAR, S3(2, 9, 32), T2(20, 32), .bias = 1, HALF},
    {"half_linear_big_f32_bias", h_linear, OP_LINEAR, S2(512, 96), T2(64, 96), .bias = 2, HALF,
     .known_fail16 = MIXED_DTYPES_CUDA},
    {"half_matmul_attention_4d_transposed", h_matmul, OP_MATMUL, S4(2, 4, 16, 8), T4(2, 4, 8, 16),
     .perm = true, HALF},
    {"half_matmul_attention_4d_broadcast", h_matmul, OP_MATMUL, S4(2, 4, 16, 8), T4(1, 4, 8, 16),
     HALF},
    // fused attention: GQA, causal with T < S, ragged tiles; a bias; f16 (last, so that the
    // batches before keep their node ids and so their drawn values)
    {"attention", b_attention, OP_ATTENTION, S4(2, 4, 35, 8), T4(2, 2, 70, 8), IA(1), .fa = {0.35},
     GEMM(70), ONE},
    {"attention_bias", b_attention, OP_ATTENTION, S4(1, 2, 5, 4), T4(1, 1, 9, 4), IA(0, 1),
     .fa = {0.5}, ONE},
    {"attention_f16", b_attention, OP_ATTENTION, S4(1, 2, 8, 8), T4(1, 2, 8, 8), IA(1),
     .fa = {0.35}, F16, ONE},
    // its backward (the forward's kernel and the backward's): GQA, causal, T < S; a bias; f16
    {"attention_grad", b_attention_grad, OP_ATTENTION_GRAD, S4(2, 4, 35, 8), T4(2, 2, 70, 8), IA(1),
     .fa = {0.35}, GEMM(70), .kernels = 2},
    {"attention_grad_bias", b_attention_grad, OP_ATTENTION_GRAD, S4(1, 2, 5, 4), T4(1, 1, 9, 4),
     IA(0, 1), .fa = {0.5}, .kernels = 2},
    {"attention_grad_f16", b_attention_grad, OP_ATTENTION_GRAD, S4(1, 2, 8, 8), T4(1, 2, 8, 8),
     IA(1), .fa = {0.35}, F16, .kernels = 2},
    // FNet's Fourier mixing: odd and even axes (both halves of the spectrum), a batch, a
    // transposed view (copied first: two kernels), FNet's 2-D shape at the cpu size
    {"fft2_real", b_unary, OP_FFT2_REAL, S3(3, 7, 12), .rtol = 1e-4, .atol = 1e-4, ONE},
    {"fft2_real_odd", b_unary, OP_FFT2_REAL, S3(2, 9, 5), .rtol = 1e-4, .atol = 1e-4, ONE},
    {"fft2_real_perm", b_unary_perm, OP_FFT2_REAL, S2(10, 6), .rtol = 1e-4, .atol = 1e-4,
     .kernels = 2},
    {"fft2_real_fnet", b_unary, OP_FFT2_REAL, S3(2, 64, 64), .rtol = 1e-4, .atol = 1e-3, ONE},
    // F.pad (ia0 the mode, then each dim's before and after): the tf_ models' "same"
    // (0, 1 on H and W), a constant on three dims, reflect on both spatial dims (pads up
    // to size - 1), a transposed view, and the backward: reflect adds the mirrored rows
    {"pad_same", b_unary, OP_PAD, S4(2, 3, 5, 6), IA(PAD_CONSTANT, 0, 0, 0, 0, 0, 1, 0, 1), HALF},
    {"pad_value", b_unary, OP_PAD, S3(4, 7, 5), IA(PAD_CONSTANT, 1, 2, 0, 0, 3, 0), .fa = {-1.5},
     HALF},
    {"pad_reflect", b_unary, OP_PAD, S4(2, 3, 5, 6), IA(PAD_REFLECT, 0, 0, 0, 0, 4, 1, 2, 5), HALF},
    {"pad_reflect_perm", b_unary_perm, OP_PAD, S2(6, 7), IA(PAD_REFLECT, 2, 3, 1, 0), ONE},
    {"pad_grad_reflect", b_pad_grad, OP_PAD_GRAD, S4(2, 3, 5, 6), T4(2, 3, 10, 13),
     IA(PAD_REFLECT, 0, 0, 0, 0, 4, 1, 2, 5), ONE, ALSO_F16(0, 0)},
    {"pad_grad_constant", b_pad_grad, OP_PAD_GRAD, S3(4, 7, 5), T3(7, 7, 8),
     IA(PAD_CONSTANT, 1, 2, 0, 0, 3, 0), ONE},
    // one LSTM layer and direction (ia: reverse, training): T steps are 2T kernels (the
    // input GEMM, a GEMM of h_prev past the first step, a cell each); the training slabs;
    // the reverse direction; f16 and bf16. Its backward: 2T - 1 more, then dx, d w_ih,
    // d w_hh, d b; reverse; f16
    {"lstm", b_lstm, OP_LSTM, S3(3, 5, 7), .nd2 = 1, .shape2 = {6}, GEMM(13), .kernels = 10,
     .half = HALF_F16 | HALF_BF16},
    {"lstm_train", b_lstm, OP_LSTM, S3(2, 4, 9), .nd2 = 1, .shape2 = {5}, IA(0, 1), GEMM(14),
     .kernels = 8},
    {"lstm_reverse", b_lstm, OP_LSTM, S3(3, 5, 4), .nd2 = 1, .shape2 = {8}, IA(1, 1), GEMM(12),
     .kernels = 10, .half = HALF_F16},
    {"lstm_grad", b_lstm_grad, OP_LSTM_GRAD, S3(3, 5, 7), .nd2 = 1, .shape2 = {6}, GEMM(24),
     .kernels = 23, .half = HALF_F16},
    {"lstm_grad_reverse", b_lstm_grad, OP_LSTM_GRAD, S3(2, 4, 3), .nd2 = 1, .shape2 = {5}, IA(1),
     GEMM(20), .kernels = 19},
    // CTC (blank 0 here; doctr's is the last class), zero_infinity: targets of up to 3 labels
    // (repeats need a blank between) over 7 steps, lengths from 0; its alpha-beta backward.
    // AMP runs it in f32, so no 16-bit rows
    {"ctc_loss", b_ctc, OP_CTC_LOSS, S3(7, 4, 5), .nd2 = 1, .shape2 = {3}, IA(0, 1), .rtol = 1e-5,
     .atol = 1e-5, ONE},
    {"ctc_loss_grad", b_ctc_grad, OP_CTC_LOSS_GRAD, S3(7, 4, 5), .nd2 = 1, .shape2 = {3}, IA(0, 1),
     .rtol = 1e-4, .atol = 1e-5, ONE},
    // nn.EmbeddingBag, sum mode (DLRM's sparse features): equal bags of 3; uneven
    // bags with empty ones (offsets floor(b 1.7), floor(b 0.5)), i64; a table
    // above the threshold; f16 summed in f32. Its backward: rows read by several
    // bags (V small) and by none, repeats within a bag
    {"embedding_bag", b_embedding_bag, OP_EMBEDDING_BAG, S2(11, 6), T2(15, 5), .fa = {3}, ONE},
    {"embedding_bag_uneven_i64", b_embedding_bag, OP_EMBEDDING_BAG, S2(13, 7), T2(20, 9), IA(0, 1),
     .fa = {1.7}, ONE},
    {"embedding_bag_empty", b_embedding_bag, OP_EMBEDDING_BAG, S2(5, 4), T2(3, 7), .fa = {0.5},
     ONE},
    {"embedding_bag_big", b_embedding_bag, OP_EMBEDDING_BAG, S2(1000, 64), T2(800, 100), IA(0, 1),
     .fa = {8}, ONE},
    {"embedding_bag_f16", b_embedding_bag, OP_EMBEDDING_BAG, S2(11, 6), T2(15, 5), .fa = {3}, ONE,
     ALSO_F16(0, 0)},
    {"embedding_bag_grad", b_embedding_bag_grad, OP_EMBEDDING_BAG_GRAD, S2(3, 7), T2(40, 6),
     .fa = {6.5}, .atol = 1e-5, ONE},
    {"embedding_bag_grad_uneven_i64", b_embedding_bag_grad, OP_EMBEDDING_BAG_GRAD, S2(13, 5),
     T2(20, 9), IA(0, 1), .fa = {1.7}, .atol = 1e-5, ONE, ALSO_F16(0, 0)},
    {"embedding_bag_grad_big", b_embedding_bag_grad, OP_EMBEDDING_BAG_GRAD, S2(1000, 64),
     T2(800, 100), IA(0, 1), .fa = {8}, .atol = 1e-5, ONE},
    // DLRM's interaction pairs: below the diagonal (27 features: 351 pairs),
    // with it (arch_interaction_itself), from a transposed view; the backward
    {"tril_gather", b_tril_gather, OP_TRIL_GATHER, S3(4, 9, 9), HALF},
    {"tril_gather_self", b_tril_gather, OP_TRIL_GATHER, S3(3, 5, 5), IA(1), HALF},
    {"tril_gather_perm_big", b_tril_gather, OP_TRIL_GATHER, S3(128, 27, 27), IA(0, 1), ONE},
    {"tril_gather_grad", b_tril_gather_grad, OP_TRIL_GATHER_GRAD, S3(4, 9, 9), HALF},
    {"tril_gather_grad_self", b_tril_gather_grad, OP_TRIL_GATHER_GRAD, S3(3, 5, 5), IA(1), ONE},
    // F.grid_sample, bilinear (ia0 the padding, ia1 align_corners): zeros and border,
    // both corner rules, x a view with H and W swapped, both backwards (dx scattered,
    // d grid gathered); f16 and bf16
    {"grid_sample", b_grid_sample, OP_GRID_SAMPLE, S4(2, 3, 5, 6), T3(0, 4, 7),
     IA(GRID_PAD_ZEROS, 0), HALF, .rtol16 = 2e-2, .atol16 = 2e-2},
    {"grid_sample_border", b_grid_sample, OP_GRID_SAMPLE, S4(2, 3, 5, 6), T3(0, 4, 7),
     IA(GRID_PAD_BORDER, 1), HALF, .rtol16 = 2e-2, .atol16 = 2e-2},
    {"grid_sample_perm", b_grid_sample, OP_GRID_SAMPLE, S4(1, 4, 6, 5), T3(1, 9, 8),
     IA(GRID_PAD_BORDER, 0), ONE},
    {"grid_sample_grad", b_grid_sample_grad, OP_GRID_SAMPLE_GRAD, S4(2, 3, 5, 6), T4(2, 3, 4, 7),
     IA(GRID_PAD_ZEROS, 0), SOME, ALSO_F16(2e-2, 2e-2)},
    {"grid_sample_grad_border", b_grid_sample_grad, OP_GRID_SAMPLE_GRAD, S4(2, 3, 5, 6),
     T4(2, 3, 4, 7), IA(GRID_PAD_BORDER, 1), SOME},
    {"grid_sample_grad_grid", b_grid_sample_grad_grid, OP_GRID_SAMPLE_GRAD_GRID, S4(2, 3, 5, 6),
     T4(2, 3, 4, 7), IA(GRID_PAD_ZEROS, 0), ONE, ALSO_F16(3e-2, 3e-2)},
    {"grid_sample_grad_grid_border", b_grid_sample_grad_grid, OP_GRID_SAMPLE_GRAD_GRID,
     S4(2, 3, 5, 6), T4(2, 3, 4, 7), IA(GRID_PAD_BORDER, 1), ONE},
    // F.interpolate bilinear to (ia2, ia3), ia1 align_corners: by 2 (Super SloMo), by 4
    // aligned (doctr's FPN), to odd sizes and down; its backward
    {"upsample_bilinear", b_unary, OP_UPSAMPLE_BILINEAR, S4(2, 3, 5, 6), IA(0, 0, 10, 12), HALF},
    {"upsample_bilinear_align", b_unary, OP_UPSAMPLE_BILINEAR, S4(2, 3, 5, 6), IA(0, 1, 20, 24),
     HALF},
    {"upsample_bilinear_odd", b_unary, OP_UPSAMPLE_BILINEAR, S4(1, 2, 7, 5), IA(0, 0, 9, 3), ONE},
    {"upsample_bilinear_grad", b_upsample_bilinear_grad, OP_UPSAMPLE_BILINEAR_GRAD, S4(2, 3, 5, 6),
     T4(2, 3, 10, 12), IA(0, 0, 10, 12), ONE, ALSO_F16(0, 0)},
    {"upsample_bilinear_grad_align", b_upsample_bilinear_grad, OP_UPSAMPLE_BILINEAR_GRAD,
     S4(1, 2, 7, 5), T4(1, 2, 9, 3), IA(0, 1, 9, 3), ONE},
};

const int op_ncases = (int)(sizeof op_cases / sizeof op_cases[0]);
