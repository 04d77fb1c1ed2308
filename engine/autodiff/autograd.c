// The backward pass and the optimizer, appended to the forward graph
// (autograd.h). One rule per op kind; each rule reads the node's gradient
// dy and adds a contribution to the gradient of each input that needs one.
#include "autograd.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// GradScaler's defaults, for when the scaler is turned on
#define SCALER_DEFAULTS                                                                            \
    .init_scale = 65536.0, .growth_factor = 2.0, .backoff_factor = 0.5, .growth_interval = 2000

train_opts train_opts_default(void) {
    return (train_opts){.optim = OPTIM_ADAMW,
                        .lr = 0.01,
                        .beta1 = 0.9,
                        .beta2 = 0.999,
                        .eps = 1e-8,
                        .weight_decay = 0.01,
                        SCALER_DEFAULTS};
}

train_opts train_opts_sgd(void) {
    return (train_opts){.optim = OPTIM_SGD, .lr = 0.01, .momentum = 0.9, SCALER_DEFAULTS};
}

const char *optim_name(optim_kind k) { return k == OPTIM_SGD ? "sgd" : "adamw"; }

typedef struct ag {
    graph *g;
    int nfwd;       // forward nodes: ids below this
    bool *req;      // forward node needs a gradient (depends on a parameter)
    int *grad;      // accumulated gradient of each forward node, -1 none yet
    // Per-sample gradients (DP-SGD): psb the batch, 0 when off; wlike marks a
    // trained parameter and the casts of one, whose gradients keep the batch
    // axis in front: (psb, shape...), one gradient per sample.
    int64_t psb;
    bool *wlike;
    char *err;
    size_t cap;
} ag;

static int agfail(ag *a, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->err, a->cap, fmt, ap);
    va_end(ap);
    return -1;
}

// A builder call's result, or the graph's message.
static int chk(ag *a, int id, const char *what) {
    if (id < 0 && !a->err[0])
        agfail(a, "backward of %s: %s", what, graph_error(a->g));
    return id;
}

static graph_node node(const ag *a, int id) { return a->g->nodes[id]; }

static bool same_shape(const graph_node *x, int ndim, const int64_t *shape) {
    if (x->ndim != ndim)
        return false;
    for (int i = 0; i < ndim; i++)
        if (x->shape[i] != shape[i])
            return false;
    return true;
}

// t summed down to the shape of node `like` (a no-op when it already has it).
static int sum_to(ag *a, int t, int like) {
    if (t < 0)
        return -1;
    graph_node l = node(a, like), tn = node(a, t);
    if (same_shape(&tn, l.ndim, l.shape))
        return t;
    return graph_op_shaped(a->g, OP_SUM_TO, 1, &t, NULL, NULL, l.ndim, l.shape);
}

static int zero(ag *a, enum dtype t) { return graph_full(a->g, 0.0, t, 0, NULL); }

static bool per_sample(const ag *a, int x) { return a->psb && a->wlike[x]; }

// Adds contribution c to the gradient of forward node x.
static int accumulate(ag *a, int x, int c) {
    if (c < 0)
        return -1;
    if (!a->req[x])
        return 0;
    graph_node xn = node(a, x), cn = node(a, c);
    if (per_sample(a, x)) { // the batch axis in front
        if (xn.ndim + 1 > TENSOR_MAX_DIMS)
            return agfail(a, "per-sample gradients: %s has too many dimensions",
                          xn.name ? xn.name : op_name(xn.op));
        memmove(xn.shape + 1, xn.shape, (size_t)xn.ndim * sizeof *xn.shape);
        xn.shape[0] = a->psb;
        xn.ndim++;
    }
    if (!same_shape(&cn, xn.ndim, xn.shape))
        return agfail(a, "internal: gradient of %%%d %s has the wrong shape", x, op_name(xn.op));
    if (a->grad[x] < 0) {
        a->grad[x] = c;
        return 0;
    }
    int s = graph_binary(a->g, OP_ADD, a->grad[x], c);
    if (s < 0)
        return chk(a, s, "accumulation");
    a->grad[x] = s;
    return 0;
}

static int reshape_to(ag *a, int t, int like) {
    graph_node l = node(a, like);
    return graph_reshape(a->g, t, l.ndim, l.shape);
}

// The last two axes swapped: a view.
static int transpose(ag *a, int t) {
    graph_node n = node(a, t);
    int perm[TENSOR_MAX_DIMS];
    for (int i = 0; i < n.ndim; i++)
        perm[i] = i;
    perm[n.ndim - 1] = n.ndim - 2;
    perm[n.ndim - 2] = n.ndim - 1;
    return graph_permute(a->g, t, perm);
}

// Row `r` of a (2, C) weight gradient as (C).
static int wgrad_row(ag *a, int wg, int r) {
    graph_node n = node(a, wg);
    int s = graph_slice(a->g, wg, 0, r, 1);
    return graph_reshape(a->g, s, 1, &n.shape[1]);
}

static int back_unary(ag *a, const graph_node *n, int y, int dy) {
    int x = n->src[0];
    graph *g = a->g;
    switch (n->op) {
    case OP_NEG: return accumulate(a, x, graph_unary(g, OP_NEG, dy));
    case OP_SCALE: return accumulate(a, x, graph_scale(g, dy, n->fa[0], 0));
    case OP_CAST: // back to the input's dtype, an autocast cast's by autocast's rule
        return accumulate(a, x, n->ia[1] ? graph_autocast(g, dy, node(a, x).dtype)
                                         : graph_cast(g, dy, node(a, x).dtype));
    case OP_EXP: return accumulate(a, x, graph_binary(g, OP_MUL, dy, y)); // grad * result
    case OP_DROPOUT: // the same mask (stream, element, step): dy * mask / (1 - p)
        return accumulate(a, x, graph_op(g, OP_DROPOUT, 1, &dy, n->ia, n->fa));
    case OP_NOISE: return accumulate(a, x, dy); // x + noise: the noise does not depend on x
    default: {
        int64_t ia[GRAPH_MAX_IA] = {n->op};
        double fa[GRAPH_MAX_FA];
        memcpy(fa, n->fa, sizeof fa);
        return accumulate(a, x, graph_op(g, OP_ACT_GRAD, 2, (int[]){dy, x}, ia, fa));
    }
    }
}

static int back_binary(ag *a, const graph_node *n, int y, int dy) {
    int x0 = n->src[0], x1 = n->src[1];
    graph *g = a->g;
    switch (n->op) {
    case OP_ADD:
        if (a->req[x0] && accumulate(a, x0, sum_to(a, dy, x0)) < 0)
            return -1;
        return a->req[x1] ? accumulate(a, x1, sum_to(a, dy, x1)) : 0;
    case OP_SUB:
        if (a->req[x0] && accumulate(a, x0, sum_to(a, dy, x0)) < 0)
            return -1;
        return a->req[x1] ? accumulate(a, x1, graph_unary(g, OP_NEG, sum_to(a, dy, x1))) : 0;
    case OP_MUL:
        if (a->req[x0] && accumulate(a, x0, sum_to(a, graph_binary(g, OP_MUL, dy, x1), x0)) < 0)
            return -1;
        return a->req[x1] ? accumulate(a, x1, sum_to(a, graph_binary(g, OP_MUL, dy, x0), x1)) : 0;
    case OP_DIV: {
        int q = graph_binary(g, OP_DIV, dy, x1); // dy / b
        if (a->req[x0] && accumulate(a, x0, sum_to(a, q, x0)) < 0)
            return -1;
        if (!a->req[x1])
            return 0;
        // d/db (a / b) = -a / b^2 = -(dy / b) * y
        int t = graph_unary(g, OP_NEG, graph_binary(g, OP_MUL, q, y));
        return accumulate(a, x1, sum_to(a, t, x1));
    }
    case OP_MAXIMUM: { // ties go to the first operand
        int m = graph_binary(g, OP_GE, x0, x1), z = zero(a, n->dtype);
        if (m < 0 || z < 0)
            return -1;
        if (a->req[x0] &&
            accumulate(a, x0, sum_to(a, graph_op(g, OP_WHERE, 3, (int[]){m, dy, z}, NULL, NULL),
                                     x0)) < 0)
            return -1;
        return a->req[x1] ? accumulate(a, x1,
                                       sum_to(a, graph_op(g, OP_WHERE, 3, (int[]){m, z, dy}, NULL,
                                                          NULL),
                                              x1))
                          : 0;
    }
    default: return 0; // GE: a bool has no gradient
    }
}

static int back_reduce(ag *a, const graph_node *n, int y, int dy) {
    int x = n->src[0];
    graph *g = a->g;
    graph_node xn = node(a, x);
    switch (n->op) {
    case OP_SUM:
        return accumulate(a, x, graph_op_shaped(g, OP_EXPAND, 1, &dy, NULL, NULL, xn.ndim, xn.shape));
    case OP_MEAN: {
        int s = graph_scale(g, dy, 1.0 / (double)xn.shape[n->ia[0]], 0);
        return accumulate(a, x, graph_op_shaped(g, OP_EXPAND, 1, &s, NULL, NULL, xn.ndim, xn.shape));
    }
    default: { // MAX: every position equal to the maximum takes dy
        int ye = graph_op_shaped(g, OP_EXPAND, 1, &y, NULL, NULL, xn.ndim, xn.shape);
        int de = graph_op_shaped(g, OP_EXPAND, 1, &dy, NULL, NULL, xn.ndim, xn.shape);
        int m = graph_binary(g, OP_GE, x, ye), z = zero(a, n->dtype);
        if (m < 0 || z < 0 || de < 0)
            return -1;
        return accumulate(a, x, graph_op(g, OP_WHERE, 3, (int[]){m, de, z}, NULL, NULL));
    }
    }
}

// ---- per-sample gradients (DP-SGD) ----------------------------------------
// A weight's ordinary gradient sums the batch; these keep one per sample,
// batched as opacus and functorch compute them: linear's as a batched
// matmul over each sample's rows, conv2d's and group_norm's with the batch
// folded into the groups (a sample's channels are groups of their own).

// A bias's per-sample gradient: dy summed over every axis but the batch and
// axis `ax` (linear's last, conv2d's channels), (B, C).
static int ps_bias(ag *a, int dy, int ax, int b) {
    graph_node dn = node(a, dy);
    int64_t shape[TENSOR_MAX_DIMS];
    for (int i = 0; i < dn.ndim; i++)
        shape[i] = i == 0 || i == ax ? dn.shape[i] : 1;
    int s = graph_op_shaped(a->g, OP_SUM_TO, 1, &dy, NULL, NULL, dn.ndim, shape);
    return accumulate(a, b, graph_reshape(a->g, s, 2, (int64_t[]){a->psb, dn.shape[ax]}));
}

static bool leads_with_batch(ag *a, int x, const char *what) {
    graph_node xn = node(a, x);
    if (xn.ndim >= 2 && xn.shape[0] == a->psb)
        return true;
    char buf[96];
    graph_shape_str(xn.ndim, xn.shape, buf, sizeof buf);
    agfail(a, "per-sample gradients: %s's input %s does not lead with the batch (%lld)", what,
           buf, (long long)a->psb);
    return false;
}

// linear: sample b's rows (x (B, R, K), dy (B, R, N)) give dW_b = dy_b^T x_b
static int ps_linear(ag *a, const graph_node *n, int dy) {
    graph *g = a->g;
    int x = n->src[0], w = n->src[1];
    graph_node xn = node(a, x), wn = node(a, w);
    if (!leads_with_batch(a, x, "linear"))
        return -1;
    int64_t B = a->psb, N = wn.shape[0], K = wn.shape[1], R = graph_node_numel(&xn) / K / B;
    int d3 = chk(a, graph_reshape(g, dy, 3, (int64_t[]){B, R, N}), "per-sample linear");
    if (d3 < 0)
        return -1;
    if (a->req[w]) {
        int x3 = graph_reshape(g, x, 3, (int64_t[]){B, R, K}), t = transpose(a, d3);
        if (accumulate(a, w, x3 < 0 || t < 0 ? -1 : graph_binary(g, OP_MATMUL, t, x3)) < 0)
            return -1;
    }
    return n->nsrc == 3 && a->req[n->src[2]] ? ps_bias(a, d3, 2, n->src[2]) : 0;
}

// x (B, C, ...) as (1, B C, ...): groups stay within a sample
static int fold_batch(ag *a, int x) {
    graph_node xn = node(a, x);
    int64_t shape[TENSOR_MAX_DIMS];
    memcpy(shape, xn.shape, sizeof shape);
    shape[0] = 1;
    shape[1] = xn.shape[0] * xn.shape[1];
    return graph_reshape(a->g, x, xn.ndim, shape);
}

// conv2d: the weight gradient of one (1, B C, H, W) image with B times the
// groups is every sample's, (B O, C / g, kh, kw)
static int ps_conv(ag *a, const graph_node *n, int dy) {
    graph *g = a->g;
    int x = n->src[0], w = n->src[1];
    graph_node wn = node(a, w);
    if (!leads_with_batch(a, x, "conv2d"))
        return -1;
    if (a->req[w]) {
        int64_t ia[GRAPH_MAX_IA], B = a->psb;
        memcpy(ia, n->ia, sizeof ia);
        ia[6] *= B;
        int d1 = fold_batch(a, dy), x1 = fold_batch(a, x);
        int wg = d1 < 0 || x1 < 0
                     ? -1
                     : graph_op_shaped(g, OP_CONV2D_GRAD_WEIGHT, 2, (int[]){d1, x1}, ia, NULL, 4,
                                       (int64_t[]){B * wn.shape[0], wn.shape[1], wn.shape[2],
                                                   wn.shape[3]});
        int64_t shape[5] = {B, wn.shape[0], wn.shape[1], wn.shape[2], wn.shape[3]};
        if (accumulate(a, w, wg < 0 ? -1 : graph_reshape(g, wg, 5, shape)) < 0)
            return -1;
    }
    return n->nsrc == 3 && a->req[n->src[2]] ? ps_bias(a, dy, 1, n->src[2]) : 0;
}

// group_norm: the affine gradients of (1, B C, ...) with B times the groups,
// (2, B C) as (2, B, C)
static int ps_group_norm(ag *a, const graph_node *n, int dy) {
    graph *g = a->g;
    int x = n->src[0], w = n->src[1], b = n->src[2];
    if (!leads_with_batch(a, x, "group_norm"))
        return -1;
    int64_t ia[GRAPH_MAX_IA], B = a->psb, C = node(a, x).shape[1];
    memcpy(ia, n->ia, sizeof ia);
    ia[0] *= B;
    int d1 = fold_batch(a, dy), x1 = fold_batch(a, x);
    int wg = d1 < 0 || x1 < 0 ? -1
                              : graph_op(g, OP_GROUP_NORM_WGRAD, 2, (int[]){d1, x1}, ia, n->fa);
    int w3 = chk(a, wg < 0 ? -1 : graph_reshape(g, wg, 3, (int64_t[]){2, B, C}),
                 "per-sample group_norm");
    if (w3 < 0)
        return -1;
    for (int r = 0; r < 2; r++) {
        int p = r ? b : w;
        if (!a->req[p])
            continue;
        int s = graph_slice(g, w3, 0, r, 1);
        if (accumulate(a, p, s < 0 ? -1 : graph_reshape(g, s, 2, (int64_t[]){B, C})) < 0)
            return -1;
    }
    return 0;
}

// Whether op reads a per-sample source k by a rule above (or a cast's).
static bool ps_rule(enum op op, int k) {
    return k >= 1 ? op == OP_LINEAR || op == OP_CONV2D || op == OP_GROUP_NORM : op == OP_CAST;
}

// Per-sample mode: every gradient into a parameter goes through a rule above.
static int ps_guard(ag *a, const graph_node *n) {
    for (int k = 0; k < n->nsrc; k++) {
        int s = n->src[k];
        if (!a->req[s])
            continue;
        graph_node sn = node(a, s);
        if (a->wlike[s] && !ps_rule(n->op, k))
            return agfail(a,
                          "per-sample gradients: %s reads parameter %s; only linear, conv2d "
                          "and group_norm weights (and their casts) have per-sample rules",
                          op_name(n->op), sn.name ? sn.name : op_name(sn.op));
        if (!a->wlike[s] && k >= 1 && ps_rule(n->op, k))
            return agfail(a, "per-sample gradients: %s's weight is computed, not a parameter",
                          op_name(n->op));
    }
    return 0;
}

// A norm's dx, and its weight (and bias) gradients from one (2, C) or (C) node.
static int back_norm(ag *a, const graph_node *n, int y, int dy) {
    graph *g = a->g;
    int x = n->src[0];
    enum op gop, wop;
    switch (n->op) {
    case OP_SOFTMAX:
    case OP_LOG_SOFTMAX:
        return accumulate(a, x,
                          graph_op(g, n->op == OP_SOFTMAX ? OP_SOFTMAX_GRAD : OP_LOG_SOFTMAX_GRAD,
                                   2, (int[]){dy, y}, n->ia, NULL));
    case OP_LAYER_NORM: gop = OP_LAYER_NORM_GRAD, wop = OP_LAYER_NORM_WGRAD; break;
    case OP_RMS_NORM: gop = OP_RMS_NORM_GRAD, wop = OP_RMS_NORM_WGRAD; break;
    case OP_GROUP_NORM:
    case OP_INSTANCE_NORM: // ia0 = C: group norm's backward with a group per channel
        gop = OP_GROUP_NORM_GRAD, wop = OP_GROUP_NORM_WGRAD;
        break;
    case OP_BATCH_NORM:
        if (!n->ia[0])
            return agfail(a, "batch_norm in eval mode inside a training graph has no backward");
        gop = OP_BATCH_NORM_GRAD, wop = OP_BATCH_NORM_WGRAD;
        break;
    default: return agfail(a, "%s has no backward", op_name(n->op));
    }
    int w = n->src[1], b = n->op == OP_RMS_NORM ? -1 : n->src[2];
    if (a->req[x] && accumulate(a, x, graph_op(g, gop, 3, (int[]){dy, x, w}, n->ia, n->fa)) < 0)
        return -1;
    if (!a->req[w] && (b < 0 || !a->req[b]))
        return 0;
    if (a->psb && n->op == OP_GROUP_NORM)
        return ps_group_norm(a, n, dy);
    int wg = graph_op(g, wop, 2, (int[]){dy, x}, n->ia, n->fa);
    if (wg < 0)
        return -1;
    if (n->op == OP_RMS_NORM)
        return accumulate(a, w, wg);
    if (accumulate(a, w, wgrad_row(a, wg, 0)) < 0)
        return -1;
    return accumulate(a, b, wgrad_row(a, wg, 1));
}

static int back_gemm(ag *a, const graph_node *n, int dy) {
    graph *g = a->g;
    int x = n->src[0], w = n->src[1];
    graph_node xn = node(a, x), wn = node(a, w), dn = node(a, dy);
    if (n->op == OP_LINEAR) {
        // dx = dy @ W; dW = dy^T @ x over all rows; db = dy summed over rows
        if (a->req[x]) {
            int dx;
            if (dn.ndim >= 2) {
                dx = graph_binary(g, OP_MATMUL, dy, w);
            } else { // a single row
                int r = graph_reshape(g, dy, 2, (int64_t[]){1, dn.shape[0]});
                dx = graph_reshape(g, graph_binary(g, OP_MATMUL, r, w), 1, xn.shape);
            }
            if (accumulate(a, x, dx) < 0)
                return -1;
        }
        if (a->psb)
            return ps_linear(a, n, dy);
        int64_t N = wn.shape[0], K = wn.shape[1], M = graph_node_numel(&xn) / K;
        if (a->req[w]) {
            int d2 = graph_reshape(g, dy, 2, (int64_t[]){M, N});
            int x2 = graph_reshape(g, x, 2, (int64_t[]){M, K});
            if (accumulate(a, w, graph_binary(g, OP_MATMUL, transpose(a, d2), x2)) < 0)
                return -1;
        }
        if (n->nsrc == 3 && a->req[n->src[2]])
            return accumulate(a, n->src[2], sum_to(a, dy, n->src[2]));
        return 0;
    }
    // matmul: da = dy @ b^T, db = a^T @ dy, summed over broadcast batch axes
    if (a->req[x] && accumulate(a, x, sum_to(a, graph_binary(g, OP_MATMUL, dy, transpose(a, w)),
                                             x)) < 0)
        return -1;
    if (!a->req[w])
        return 0;
    if (wn.ndim == 2 && xn.ndim > 2) { // a shared right operand: one GEMM over all rows
        int64_t K = xn.shape[xn.ndim - 1], M = graph_node_numel(&xn) / K;
        int x2 = graph_reshape(g, x, 2, (int64_t[]){M, K});
        int d2 = graph_reshape(g, dy, 2, (int64_t[]){M, wn.shape[1]});
        return accumulate(a, w, graph_binary(g, OP_MATMUL, transpose(a, x2), d2));
    }
    return accumulate(a, w, sum_to(a, graph_binary(g, OP_MATMUL, transpose(a, x), dy), w));
}

static int back_conv(ag *a, const graph_node *n, int dy) {
    graph *g = a->g;
    int x = n->src[0], w = n->src[1];
    graph_node xn = node(a, x), wn = node(a, w);
    int64_t ia[GRAPH_MAX_IA];
    memcpy(ia, n->ia, sizeof ia);
    if (n->op == OP_CONV2D) {
        if (a->req[x] && accumulate(a, x, graph_op_shaped(g, OP_CONV2D_GRAD_INPUT, 2,
                                                          (int[]){dy, w}, ia, NULL, xn.ndim,
                                                          xn.shape)) < 0)
            return -1;
        if (a->psb)
            return ps_conv(a, n, dy);
        if (a->req[w] && accumulate(a, w, graph_op_shaped(g, OP_CONV2D_GRAD_WEIGHT, 2,
                                                          (int[]){dy, x}, ia, NULL, wn.ndim,
                                                          wn.shape)) < 0)
            return -1;
    } else {
        // the adjoint of a transposed convolution is the convolution itself;
        // its weight gradient is conv2d's with the roles of input and output swapped
        ia[7] = ia[8] = 0;
        if (a->req[x] && accumulate(a, x, graph_op(g, OP_CONV2D, 2, (int[]){dy, w}, ia, NULL)) < 0)
            return -1;
        if (a->req[w] && accumulate(a, w, graph_op_shaped(g, OP_CONV2D_GRAD_WEIGHT, 2,
                                                          (int[]){x, dy}, ia, NULL, wn.ndim,
                                                          wn.shape)) < 0)
            return -1;
    }
    if (n->nsrc == 3 && a->req[n->src[2]]) {
        graph_node dn = node(a, dy);
        int s = graph_op_shaped(g, OP_SUM_TO, 1, &dy, NULL, NULL, 3,
                                (int64_t[]){dn.shape[1], 1, 1});
        return accumulate(a, n->src[2], reshape_to(a, s, n->src[2]));
    }
    return 0;
}

static int back_pool(ag *a, const graph_node *n, int dy) {
    graph *g = a->g;
    int x = n->src[0];
    graph_node xn = node(a, x);
    switch (n->op) {
    case OP_MAX_POOL2D:
        return accumulate(a, x, graph_op(g, OP_MAX_POOL2D_GRAD, 2, (int[]){dy, x}, n->ia, NULL));
    case OP_AVG_POOL2D:
        return accumulate(a, x, graph_op_shaped(g, OP_AVG_POOL2D_GRAD, 1, &dy, n->ia, NULL,
                                                xn.ndim, xn.shape));
    case OP_UPSAMPLE_BILINEAR:
        return accumulate(
            a, x,
            graph_op_shaped(g, OP_UPSAMPLE_BILINEAR_GRAD, 1, &dy, n->ia, NULL, xn.ndim, xn.shape));
    default: { // nearest upsampling by s: each input took s*s copies
        int64_t s = n->ia[0];
        int64_t ia[GRAPH_MAX_IA] = {s, s, 0, 0, s, s};
        int p = graph_op(g, OP_AVG_POOL2D, 1, &dy, ia, NULL);
        return accumulate(a, x, graph_scale(g, p, (double)(s * s), 0));
    }
    }
}

static int back_view(ag *a, const graph_node *n, int dy) {
    graph *g = a->g;
    int x = n->src[0];
    graph_node xn = node(a, x);
    switch (n->op) {
    case OP_RESHAPE: return accumulate(a, x, reshape_to(a, dy, x));
    case OP_PERMUTE: {
        int inv[TENSOR_MAX_DIMS];
        for (int i = 0; i < n->ndim; i++)
            inv[n->ia[i]] = i;
        return accumulate(a, x, graph_permute(g, dy, inv));
    }
    case OP_SLICE:
        return accumulate(a, x, graph_op_shaped(g, OP_SLICE_GRAD, 1, &dy, n->ia, NULL, xn.ndim,
                                                xn.shape));
    default: return accumulate(a, x, sum_to(a, dy, x)); // EXPAND
    }
}

// (B, KVH, S, d) -> (B, KVH * G, S, d), each kv head repeated for its G
// query heads (a view; its backward sums the copies)
static int repeat_heads(ag *a, int t, int64_t G) {
    graph_node n = node(a, t);
    int64_t B = n.shape[0], KVH = n.shape[1], S = n.shape[2], d = n.shape[3];
    if (G == 1)
        return t;
    int r = graph_reshape(a->g, t, 5, (int64_t[]){B, KVH, 1, S, d});
    int e = r < 0 ? -1
                  : graph_op_shaped(a->g, OP_EXPAND, 1, &r, NULL, NULL, 5,
                                    (int64_t[]){B, KVH, G, S, d});
    return e < 0 ? -1 : graph_reshape(a->g, e, 4, (int64_t[]){B, KVH * G, S, d});
}

// d of the repeated heads summed back onto each kv head
static int sum_heads(ag *a, int dt, int like, int64_t G) {
    graph_node l = node(a, like);
    int64_t B = l.shape[0], KVH = l.shape[1], S = l.shape[2], d = l.shape[3];
    if (G == 1 || dt < 0)
        return dt;
    int r = graph_reshape(a->g, dt, 5, (int64_t[]){B, KVH, G, S, d});
    int s = r < 0 ? -1
                  : graph_op_shaped(a->g, OP_SUM_TO, 1, &r, NULL, NULL, 5,
                                    (int64_t[]){B, KVH, 1, S, d});
    return s < 0 ? -1 : graph_reshape(a->g, s, 4, l.shape);
}

// A fused backward's flat output gr sliced into the gradients of xs, in
// order, each reshaped to its source's shape; the last `share` sources take
// one slice together (LSTM's two biases).
static int flat_grads(ag *a, int gr, int nx, const int *xs, int share, const char *what) {
    int64_t at = 0;
    for (int i = 0; i < nx; i++) {
        graph_node xn = node(a, xs[i]);
        int64_t len = graph_node_numel(&xn);
        if (a->req[xs[i]] &&
            accumulate(a, xs[i], reshape_to(a, graph_slice(a->g, gr, 0, at, len), xs[i])) < 0)
            return chk(a, -1, what);
        at += i < nx - share ? len : 0;
    }
    return 0;
}

// ATTENTION's backward as one ATTENTION_GRAD node, as PyTorch's fused
// scaled_dot_product_attention backward: the probabilities recomputed a
// tile at a time inside it, its flat dq | dk | dv sliced into the three
// gradients (dk and dv already summed over each kv head's query heads).
static int back_attention_fused(ag *a, const graph_node *n, int y, int dy) {
    graph *g = a->g;
    int src[GRAPH_MAX_SRCS] = {dy, n->src[0], n->src[1], n->src[2], y}, ns = 5;
    int64_t ia[GRAPH_MAX_IA];
    memcpy(ia, n->ia, sizeof ia);
    for (int k = 1; k <= 2; k++)
        if (n->ia[k]) {
            src[ns] = n->src[n->ia[k]];
            ia[k] = ns++;
        }
    int gr = graph_op(g, OP_ATTENTION_GRAD, ns, src, ia, n->fa);
    if (chk(a, gr, "attention") < 0)
        return -1;
    return flat_grads(a, gr, 3, n->src, 0, "attention");
}

// ATTENTION's backward. Fused (above) unless the bias needs a gradient: then
// from primitive ops, the probabilities recomputed from q and k (the forward
// keeps no (T, S) matrix), then the math form's rules: dv = p^T dy,
// ds = softmax_grad(dy v^T, p), dq = ds k * scale, dk = ds^T q * scale,
// d bias = ds; GQA's repeated heads summed back.
static int back_attention(ag *a, const graph_node *n, int y, int dy) {
    graph *g = a->g;
    if (!n->ia[1] || !a->req[n->src[n->ia[1]]])
        return back_attention_fused(a, n, y, dy);
    if (n->ia[2])
        return agfail(a, "attention: no backward with a valid-length input and a bias that needs "
                         "a gradient");
    int q = n->src[0], k = n->src[1], v = n->src[2];
    graph_node qn = node(a, q), kn = node(a, k);
    int64_t G = qn.shape[1] / kn.shape[1], T = qn.shape[2], S = kn.shape[2];
    double sc = n->fa[0];
    int ke = repeat_heads(a, k, G), ve = repeat_heads(a, v, G);
    int s = ke < 0 || ve < 0 ? -1 : graph_binary(g, OP_MATMUL, q, transpose(a, ke));
    s = graph_scale(g, s, sc, 0);
    if (s >= 0 && n->ia[1])
        s = graph_binary(g, OP_ADD, s, n->src[n->ia[1]]);
    if (s >= 0 && n->ia[0]) {
        char name[64];
        snprintf(name, sizeof name, "causal_mask.%lldx%lld", (long long)T, (long long)S);
        int mask = -1; // the layers' shared one (nn_attention.c) when there is one
        for (int i = 0; i < g->n && mask < 0; i++)
            if (g->nodes[i].op == OP_BUFFER && g->nodes[i].name && !strcmp(g->nodes[i].name, name))
                mask = i;
        if (mask < 0)
            mask = graph_buffer(g, name, DT_BOOL, 2, (int64_t[]){T, S}, INIT_CAUSAL_MASK, 0);
        int low = graph_full(g, -FLT_MAX, node(a, s).dtype, 0, NULL);
        s = mask < 0 || low < 0 ? -1 : graph_op(g, OP_WHERE, 3, (int[]){mask, s, low}, NULL, NULL);
    }
    int p = graph_unary(g, OP_SOFTMAX, s);
    if (chk(a, p, "attention") < 0)
        return -1;
    if (a->req[v] &&
        accumulate(a, v, sum_heads(a, graph_binary(g, OP_MATMUL, transpose(a, p), dy), v, G)) < 0)
        return chk(a, -1, "attention");
    int dp = graph_binary(g, OP_MATMUL, dy, transpose(a, ve));
    int ds = dp < 0 ? -1 : graph_op(g, OP_SOFTMAX_GRAD, 2, (int[]){dp, p}, NULL, NULL);
    if (chk(a, ds, "attention") < 0)
        return -1;
    if (a->req[q] &&
        accumulate(a, q, graph_scale(g, graph_binary(g, OP_MATMUL, ds, ke), sc, 0)) < 0)
        return chk(a, -1, "attention");
    if (a->req[k] &&
        accumulate(a, k,
                   sum_heads(a,
                             graph_scale(g, graph_binary(g, OP_MATMUL, transpose(a, ds), q), sc, 0),
                             k, G)) < 0)
        return chk(a, -1, "attention");
    if (n->ia[1] && a->req[n->src[n->ia[1]]])
        return accumulate(a, n->src[n->ia[1]], sum_to(a, ds, n->src[n->ia[1]]));
    return 0;
}

// LSTM's backward through time as one LSTM_GRAD node, as PyTorch's
// _cudnn_rnn_backward: its flat dx | d w_ih | d w_hh | d b sliced into the
// gradients, d b going to both biases (they are summed in every gate).
static int back_lstm(ag *a, const graph_node *n, int y, int dy) {
    graph *g = a->g;
    if (!n->ia[1])
        return agfail(a, "lstm: built for inference (no saved gates); build it with ia1 set");
    int src[5] = {dy, n->src[0], n->src[1], n->src[2], y};
    int gr = graph_op(g, OP_LSTM_GRAD, 5, src, n->ia, n->fa);
    if (chk(a, gr, "lstm") < 0)
        return -1;
    return flat_grads(a, gr, 5, n->src, 2, "lstm");
}

// The gradient of forward node i (dy) spread to its inputs.
// F.pad's backward: a constant pad's is dy's middle (views, as PyTorch's
// narrow), a reflect pad's one pad_grad kernel adding the mirrored rows back
static int back_pad(ag *a, const graph_node *n, int dy) {
    graph *g = a->g;
    if (!a->req[n->src[0]])
        return 0;
    graph_node x = node(a, n->src[0]);
    if (n->ia[0] == PAD_REFLECT)
        return accumulate(a, n->src[0],
                          graph_op_shaped(g, OP_PAD_GRAD, 1, &dy, n->ia, NULL, x.ndim, x.shape));
    for (int d = 0; d < x.ndim && dy >= 0; d++)
        if (x.shape[d] != n->shape[d])
            dy = graph_slice(g, dy, d, n->ia[1 + 2 * d], x.shape[d]);
    return accumulate(a, n->src[0], dy);
}

// F.grid_sample's backward: dx scattered onto the taps, d grid from the
// weights' slopes, one kernel each (PyTorch runs one for both)
static int back_grid_sample(ag *a, const graph_node *n, int dy) {
    graph *g = a->g;
    int x = n->src[0], grid = n->src[1];
    if (a->req[x]) {
        graph_node xn = node(a, x);
        if (accumulate(a, x,
                       graph_op_shaped(g, OP_GRID_SAMPLE_GRAD, 2, (int[]){dy, grid}, n->ia, NULL,
                                       xn.ndim, xn.shape)) < 0)
            return -1;
    }
    if (!a->req[grid])
        return 0;
    return accumulate(a, grid,
                      graph_op(g, OP_GRID_SAMPLE_GRAD_GRID, 3, (int[]){dy, x, grid}, n->ia, NULL));
}

static int backward(ag *a, int i) {
    graph_node n = node(a, i);
    int dy = a->grad[i];
    graph *g = a->g;
    if (a->psb && ps_guard(a, &n) < 0)
        return -1;
    switch (op_kind(n.op)) {
    case OPK_SOURCE: return 0;
    case OPK_UNARY: return back_unary(a, &n, i, dy);
    case OPK_BINARY: return back_binary(a, &n, i, dy);
    case OPK_WHERE: {
        int z = zero(a, n.dtype), c = n.src[0];
        if (z < 0)
            return -1;
        if (a->req[n.src[1]] &&
            accumulate(a, n.src[1], sum_to(a, graph_op(g, OP_WHERE, 3, (int[]){c, dy, z}, NULL,
                                                       NULL),
                                           n.src[1])) < 0)
            return -1;
        if (!a->req[n.src[2]])
            return 0;
        return accumulate(a, n.src[2],
                          sum_to(a, graph_op(g, OP_WHERE, 3, (int[]){c, z, dy}, NULL, NULL),
                                 n.src[2]));
    }
    case OPK_REDUCE: return back_reduce(a, &n, i, dy);
    case OPK_NORM: return back_norm(a, &n, i, dy);
    case OPK_GEMM: return back_gemm(a, &n, dy);
    case OPK_CONV: return back_conv(a, &n, dy);
    case OPK_POOL: return back_pool(a, &n, dy);
    case OPK_GATHER: {
        if (n.op == OP_GRID_SAMPLE)
            return back_grid_sample(a, &n, dy);
        graph_node t = node(a, n.src[0]);
        if (!a->req[n.src[0]])
            return 0;
        if (n.op == OP_EMBEDDING_BAG) // each bag's dy row onto every row it summed
            return accumulate(a, n.src[0],
                              graph_op_shaped(g, OP_EMBEDDING_BAG_GRAD, 3,
                                              (int[]){dy, n.src[1], n.src[2]}, n.ia, NULL, 2,
                                              t.shape));
        return accumulate(a, n.src[0], graph_op_shaped(g, OP_EMBEDDING_GRAD, 2,
                                                       (int[]){dy, n.src[1]}, NULL, NULL, 2,
                                                       t.shape));
    }
    case OPK_VIEW: return back_view(a, &n, dy);
    case OPK_COPY:
        if (n.op == OP_CONTIGUOUS)
            return accumulate(a, n.src[0], dy);
        if (n.op == OP_UNFOLD || n.op == OP_FOLD) // each the other's adjoint
            return accumulate(
                a, n.src[0],
                graph_op(g, n.op == OP_UNFOLD ? OP_FOLD : OP_UNFOLD, 1, &dy, n.ia, NULL));
        if (n.op == OP_ROLL) { // rolled back: the shifts' complements
            int64_t back[GRAPH_MAX_IA] = {0};
            for (int d = 0; d < n.ndim; d++)
                back[d] = n.ia[d] ? n.shape[d] - n.ia[d] : 0;
            return accumulate(a, n.src[0], graph_op(g, OP_ROLL, 1, &dy, back, NULL));
        }
        if (n.op == OP_PAD)
            return back_pad(a, &n, dy);
        if (n.op == OP_TRIL_GATHER) { // the pairs back in place, zeros elsewhere
            graph_node z = node(a, n.src[0]);
            if (!a->req[n.src[0]])
                return 0;
            return accumulate(
                a, n.src[0],
                graph_op_shaped(g, OP_TRIL_GATHER_GRAD, 1, &dy, n.ia, NULL, 3, z.shape));
        }
        for (int k = 0, at = 0; k < n.nsrc; k++) { // concat: each input's slice of dy
            graph_node s = node(a, n.src[k]);
            int64_t len = s.shape[n.ia[0]];
            if (a->req[n.src[k]] &&
                accumulate(a, n.src[k], graph_slice(g, dy, (int)n.ia[0], at, len)) < 0)
                return -1;
            at += (int)len;
        }
        return 0;
    case OPK_LOSS:
        if (n.op == OP_CROSS_ENTROPY || n.op == OP_BCE_LOSS) // the target gets no gradient
            return accumulate(
                a, n.src[0],
                graph_op(g, n.op == OP_BCE_LOSS ? OP_BCE_LOSS_GRAD : OP_CROSS_ENTROPY_GRAD, 3,
                         (int[]){dy, n.src[0], n.src[1]}, n.ia, n.fa));
        if (n.op == OP_CTC_LOSS) // the log_probs' gradient; the integers get none
            return accumulate(a, n.src[0],
                              graph_op(g, OP_CTC_LOSS_GRAD, 4,
                                       (int[]){dy, n.src[0], n.src[1], n.src[2]}, n.ia, NULL));
        else {
            int d = graph_op(g, OP_MSE_LOSS_GRAD, 3, (int[]){dy, n.src[0], n.src[1]}, NULL, NULL);
            if (!a->req[n.src[0]]) // only the target needs it: d/db = -d/da
                return accumulate(a, n.src[1], graph_unary(g, OP_NEG, d));
            if (accumulate(a, n.src[0], d) < 0)
                return -1;
            return a->req[n.src[1]] ? accumulate(a, n.src[1], graph_unary(g, OP_NEG, d)) : 0;
        }
    case OPK_ATTENTION: return back_attention(a, &n, i, dy);
    case OPK_RNN: return back_lstm(a, &n, i, dy);
    case OPK_FFT: // linear and self-adjoint (the cosine kernel is symmetric): dx = fft2_real(dy)
        return accumulate(a, n.src[0], graph_unary(g, OP_FFT2_REAL, dy));
    case OPK_GRAD:
    case OPK_UPDATE: break;
    }
    return agfail(a, "%s has no backward (a graph is differentiated once)", op_name(n.op));
}

// The grad scaler's nodes: its state (BUFFER scalars) and this step's check.
typedef struct scaler {
    int scale, tracker, step; // "grad_scaler.scale", "grad_scaler.growth_tracker", "optimizer.step"
    int found;                // found_inf over every gradient
} scaler;

static int scaler_buffer(ag *a, const char *name, double init) {
    return chk(a, graph_buffer(a->g, name, DT_F32, 0, NULL, INIT_CONSTANT, init), "grad scaler");
}

// found_inf over the gradients of the parameters, in parameter order: one
// node per 7 gradients, each later one carrying the flag before it over.
static int check_grads(ag *a, scaler *sc) {
    int src[GRAPH_MAX_SRCS], n = 0;
    sc->found = -1;
    for (int i = 0; i <= a->nfwd; i++) {
        bool last = i == a->nfwd;
        if (!last && !(a->g->nodes[i].op == OP_PARAM && a->grad[i] >= 0))
            continue;
        if (n == 0) {
            src[n++] = sc->scale;
            if (sc->found >= 0)
                src[n++] = sc->found;
        }
        if (!last)
            src[n++] = a->grad[i];
        if (n == GRAPH_MAX_SRCS || (last && n > (sc->found >= 0 ? 2 : 1))) {
            int64_t ia[GRAPH_MAX_IA] = {sc->found >= 0};
            sc->found = chk(a, graph_op(a->g, OP_FOUND_INF, n, src, ia, NULL), "found_inf");
            if (sc->found < 0)
                return -1;
            n = 0;
        }
    }
    return 0;
}

// One optimizer state buffer named after the parameter.
static int state(ag *a, int p, const char *suffix) {
    graph_node pn = node(a, p);
    char name[512];
    snprintf(name, sizeof name, "%s.%s", pn.name ? pn.name : "param", suffix);
    return chk(a, graph_buffer(a->g, name, pn.dtype, pn.ndim, pn.shape, INIT_ZEROS, 0), "state");
}

// The update of parameter p; with the scaler (sc not NULL) its three
// sources follow the state and ia1 says so.
static int optimizer(ag *a, const train_opts *o, int p, int gr, const scaler *sc) {
    double fa[GRAPH_MAX_FA] = {0};
    int64_t ia[GRAPH_MAX_IA] = {0};
    int src[GRAPH_MAX_SRCS] = {p, gr}, n = 2;
    enum op op = o->optim == OPTIM_ADAMW ? OP_ADAMW : OP_SGD;
    if (op == OP_ADAMW) {
        if ((src[n++] = state(a, p, "exp_avg")) < 0 || (src[n++] = state(a, p, "exp_avg_sq")) < 0)
            return -1;
        fa[0] = o->lr, fa[1] = o->beta1, fa[2] = o->beta2, fa[3] = o->eps, fa[4] = o->weight_decay;
    } else {
        fa[0] = o->lr, fa[1] = o->momentum, fa[2] = o->weight_decay, fa[3] = o->dampening;
        ia[0] = o->nesterov;
        if (o->momentum != 0 && (src[n++] = state(a, p, "momentum_buffer")) < 0)
            return -1;
    }
    if (sc) {
        ia[1] = 1;
        src[n++] = sc->scale, src[n++] = sc->found, src[n++] = sc->step;
    }
    return chk(a, graph_op(a->g, op, n, src, ia, fa), op_name(op));
}

// DP-SGD's step (opacus' PrivacyEngine, functorch's vmap(grad) recipe in
// TorchBench): a.grad holds every parameter's per-sample gradients (B,
// shape...) of the mean loss, so sample b's own loss has B times (over the
// loss scale) its row. Each sample's gradient over all parameters is
// clipped to norm C = dp_max_grad_norm (times min(1, C / (|g_b| + 1e-6))),
// the clipped ones summed and divided by B: that sum becomes a.grad[i] (the
// checked gradient, unscaled). The update takes it plus Gaussian noise of
// standard deviation noise_multiplier C / B drawn by the seeded generator
// (upd[i], times the scale again under the scaler, whose update unscales).
static int dp_sgd(ag *a, const train_opts *o, const scaler *sc, int *upd) {
    graph *g = a->g;
    int64_t B = a->psb;
    double C = o->dp_max_grad_norm;
    int total = -1, inv = -1;
    for (int i = 0; i < a->nfwd; i++) {
        upd[i] = -1;
        if (g->nodes[i].op != OP_PARAM || a->grad[i] < 0)
            continue;
        int64_t numel = graph_node_numel(&g->nodes[i]);
        int g2 = graph_reshape(g, a->grad[i], 2, (int64_t[]){B, numel});
        int sq = g2 < 0 ? -1 : graph_reduce(g, OP_SUM, graph_binary(g, OP_MUL, g2, g2), 1);
        if ((total = chk(a, total < 0 || sq < 0 ? sq : graph_binary(g, OP_ADD, total, sq),
                         "per-sample norms")) < 0)
            return -1;
        upd[i] = g2;
    }
    // |g_b| of the sample's own loss; the clip factor C / max(|g_b| + 1e-6, C)
    int norm = graph_unary(g, OP_SQRT, total);
    if (sc && (inv = chk(a, graph_unary(g, OP_RECIP, sc->scale), "unscale")) < 0)
        return -1;
    norm = inv >= 0 ? graph_binary(g, OP_MUL, graph_scale(g, norm, (double)B, 0), inv)
                    : graph_scale(g, norm, (double)B, 0);
    int den = graph_binary(g, OP_MAXIMUM, graph_scale(g, norm, 1, 1e-6),
                           graph_full(g, C, DT_F32, 0, NULL));
    int f = graph_scale(g, graph_unary(g, OP_RECIP, den), C, 0);
    // each sample's weight in the sum: f B / (scale B)
    int w = chk(a, graph_reshape(g, inv >= 0 ? graph_binary(g, OP_MUL, f, inv) : f, 2,
                                 (int64_t[]){1, B}),
                "clip factors");
    if (w < 0)
        return -1;
    for (int i = 0; i < a->nfwd; i++) {
        if (upd[i] < 0)
            continue;
        const graph_node *p = &g->nodes[i];
        int sum = graph_reshape(g, graph_binary(g, OP_MATMUL, w, upd[i]), p->ndim, p->shape);
        int64_t ia[GRAPH_MAX_IA] = {g->n}; // the noise's stream: unique per parameter
        double fa[GRAPH_MAX_FA] = {o->dp_noise_multiplier * C / (double)B};
        int noisy = sum < 0 ? -1 : graph_op(g, OP_NOISE, 1, &sum, ia, fa);
        if ((a->grad[i] = chk(a, sum, "clipped sum")) < 0 ||
            (upd[i] = chk(a, sc && noisy >= 0 ? graph_binary(g, OP_MUL, noisy, sc->scale) : noisy,
                          "noise")) < 0)
            return -1;
    }
    return 0;
}

static int scaler_check_opts(const train_opts *o, char *err, size_t cap) {
    if (!(o->init_scale > 0 && isfinite((float)o->init_scale)) || !(o->growth_factor > 1) ||
        !(o->backoff_factor > 0 && o->backoff_factor < 1) || o->growth_interval < 1) {
        snprintf(err, cap,
                 "grad scaler: init_scale %g, growth_factor %g, backoff_factor %g, "
                 "growth_interval %d: need a finite f32 scale above 0, growth above 1, backoff "
                 "in (0, 1) and an interval of at least 1 (PyTorch's: 65536, 2, 0.5, 2000)",
                 o->init_scale, o->growth_factor, o->backoff_factor, o->growth_interval);
        return -1;
    }
    return 0;
}

int autograd_build(graph *g, const train_opts *o, bool keep_grads, char *err, size_t cap) {
    err[0] = '\0';
    if (g->loss < 0) {
        snprintf(err, cap, "the model has no loss to train (add a loss: section)");
        return -1;
    }
    for (int i = 0; i < g->n; i++)
        if (op_kind(g->nodes[i].op) == OPK_GRAD || op_kind(g->nodes[i].op) == OPK_UPDATE) {
            snprintf(err, cap, "the graph already has a backward");
            return -1;
        }
    if (o->grad_scaler && scaler_check_opts(o, err, cap) < 0)
        return -1;
    bool dp = o->dp_max_grad_norm != 0;
    if (dp && (!(o->dp_max_grad_norm > 0 && isfinite(o->dp_max_grad_norm)) ||
               !(o->dp_noise_multiplier >= 0 && isfinite(o->dp_noise_multiplier)))) {
        snprintf(err, cap,
                 "dp_sgd: max_grad_norm %g, noise_multiplier %g: need a finite norm above 0 "
                 "and a finite multiplier of at least 0",
                 o->dp_max_grad_norm, o->dp_noise_multiplier);
        return -1;
    }
    ag a = {.g = g, .nfwd = g->n, .err = err, .cap = cap};
    size_t nn = g->n > 0 ? (size_t)g->n : 1;
    a.req = calloc(nn, sizeof *a.req);
    a.grad = malloc(nn * sizeof *a.grad);
    a.wlike = dp ? calloc(nn, sizeof *a.wlike) : NULL;
    int *upd = dp ? malloc(nn * sizeof *upd) : NULL;
    int rc = -1;
    if (!a.req || !a.grad || (dp && (!a.wlike || !upd))) {
        snprintf(err, cap, "out of memory building the backward");
        goto done;
    }
    int nparams = 0;
    for (int i = 0; i < a.nfwd; i++) {
        const graph_node *n = &g->nodes[i];
        a.grad[i] = -1;
        if (n->op == OP_PARAM) { // a frozen one is a constant here (graph.h)
            a.req[i] = n->ia[1] != GRAPH_PARAM_FROZEN;
            nparams += a.req[i];
            if (dp)
                a.wlike[i] = a.req[i];
            continue;
        }
        if (dp && n->op == OP_CAST)
            a.wlike[i] = a.wlike[n->src[0]];
        if (!dtype_is_float(n->dtype) || op_kind(n->op) == OPK_SOURCE)
            continue;
        for (int k = 0; k < n->nsrc; k++)
            a.req[i] |= a.req[n->src[k]];
    }
    if (!nparams || !a.req[g->loss]) {
        snprintf(err, cap, "the loss does not depend on any parameter");
        goto done;
    }
    if (dp) { // per-sample gradients over the batch of the loss op's input (a mean)
        int l = g->loss;
        while (g->nodes[l].op == OP_RESHAPE || g->nodes[l].op == OP_CAST)
            l = g->nodes[l].src[0];
        const graph_node *ls = &g->nodes[g->nodes[l].src[0]];
        if (op_kind(g->nodes[l].op) != OPK_LOSS || ls->ndim < 1) {
            snprintf(err, cap, "dp_sgd: the loss must be one loss op over a batch (got %s)",
                     op_name(g->nodes[l].op));
            goto done;
        }
        a.psb = ls->shape[0];
    }
    scaler sc = {-1, -1, -1, -1};
    graph_node ln = g->nodes[g->loss];
    if (o->grad_scaler) { // the seed: d(loss * scale) / d loss
        if ((sc.scale = scaler_buffer(&a, "grad_scaler.scale", o->init_scale)) < 0 ||
            (sc.tracker = scaler_buffer(&a, "grad_scaler.growth_tracker", 0)) < 0 ||
            (sc.step = scaler_buffer(&a, "optimizer.step", 0)) < 0)
            goto done;
        int seed = graph_cast(g, sc.scale, ln.dtype);
        if (seed >= 0 && ln.ndim > 0)
            seed = graph_op_shaped(g, OP_EXPAND, 1, &seed, NULL, NULL, ln.ndim, ln.shape);
        a.grad[g->loss] = seed;
    } else {
        a.grad[g->loss] = graph_full(g, 1.0, ln.dtype, ln.ndim, ln.shape);
    }
    if (a.grad[g->loss] < 0) {
        chk(&a, -1, "the loss");
        goto done;
    }
    for (int i = g->loss; i >= 0; i--) {
        if (a.grad[i] < 0 || !a.req[i])
            continue;
        if (backward(&a, i) < 0) {
            if (!err[0])
                snprintf(err, cap, "backward of %%%d %s: %s", i, op_name(g->nodes[i].op),
                         graph_error(g));
            goto done;
        }
    }
    if (dp && dp_sgd(&a, o, o->grad_scaler ? &sc : NULL, upd) < 0)
        goto done;
    // outputs: the loss, then each trained parameter's gradient (unscaled:
    // times 1/scale; DP-SGD's clipped sum is); then the scaler's check, the
    // updates, the scaler's update
    g->noutputs = 0;
    graph_output(g, g->loss);
    bool unscale = o->grad_scaler && keep_grads && !dp;
    int inv = unscale ? graph_unary(g, OP_RECIP, sc.scale) : -1;
    if (unscale && chk(&a, inv, "unscale") < 0)
        goto done;
    for (int i = 0; i < a.nfwd; i++)
        if (keep_grads && g->nodes[i].op == OP_PARAM && a.grad[i] >= 0) {
            if (g->noutputs >= GRAPH_MAX_OUTPUTS) {
                snprintf(err, cap, "more than %d parameters", GRAPH_MAX_OUTPUTS - 1);
                goto done;
            }
            int out =
                inv >= 0 ? chk(&a, graph_binary(g, OP_MUL, a.grad[i], inv), "unscale") : a.grad[i];
            if (out < 0)
                goto done;
            graph_output(g, out);
        }
    if (o->grad_scaler && check_grads(&a, &sc) < 0)
        goto done;
    for (int i = 0; i < a.nfwd; i++)
        if (g->nodes[i].op == OP_PARAM && a.grad[i] >= 0 &&
            optimizer(&a, o, i, dp ? upd[i] : a.grad[i], o->grad_scaler ? &sc : NULL) < 0)
            goto done;
    if (o->grad_scaler &&
        chk(&a,
            graph_op(g, OP_SCALER_UPDATE, 4, (int[]){sc.scale, sc.tracker, sc.step, sc.found},
                     (int64_t[GRAPH_MAX_IA]){o->growth_interval},
                     (double[GRAPH_MAX_FA]){o->growth_factor, o->backoff_factor}),
            "scaler_update") < 0)
        goto done;
    rc = 0;
done:
    free(a.req);
    free(a.grad);
    free(a.wlike);
    free(upd);
    return rc;
}

int autograd_param_of_output(const graph *g, int output) {
    if (output < 1 || output >= g->noutputs)
        return -1;
    int gr = g->outputs[output];
    const graph_node *o = &g->nodes[gr];
    for (int i = 0; i < g->n; i++) {
        const graph_node *n = &g->nodes[i];
        if (n->op != OP_ADAMW && n->op != OP_SGD)
            continue;
        // under the grad scaler the output is the gradient times 1/scale;
        // DP-SGD updates with the output plus noise (times the scale)
        int u = n->src[1];
        if (g->nodes[u].op == OP_MUL && g->nodes[g->nodes[u].src[0]].op == OP_NOISE)
            u = g->nodes[u].src[0];
        if (g->nodes[u].op == OP_NOISE)
            u = g->nodes[u].src[0];
        if (u == gr || (graph_scaler_src(n) >= 0 && o->op == OP_MUL && o->src[0] == u))
            return n->src[0];
    }
    return -1;
}

int autograd_scaler_state(const graph *g, const char *name) {
    for (int i = 0; i < g->n; i++)
        if (g->nodes[i].op == OP_BUFFER && g->nodes[i].name && !strcmp(g->nodes[i].name, name))
            return i;
    return -1;
}
