// Decomposition: composite ops become the primitives they are made of (the
// PrimTorch idea), so that fusion sees every elementwise step and the
// reductions between them. Biases of linear and convolution layers become
// separate adds, which fusion then folds into the GEMM's epilogue.
//
// Training: the row-wise backward ops (softmax, log-softmax, layer and RMS
// norm) become reductions over the rows; the norms' statistics are written
// with the same nodes as their forward, so CSE shares the forward's mean and
// rstd (one value per row) with the backward; mse_loss_grad becomes pointwise; batch norm in training mode
// becomes batch-statistic reductions, the normalization, and one
// running_stat update per running buffer. act_grad and ge stay nodes: the
// generators write them as expressions (compile_is_pointwise).
#include "compile_internal.h"

#include <assert.h>
#include <stdio.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int compile_fail(cprog *p, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err, sizeof p->err, fmt, ap);
    va_end(ap);
    return -1;
}

typedef struct dctx {
    cprog *p;
    graph *ng;
    int *origin;
    int cap;
    int cur; // model node being expanded
} dctx;

// Record the origin of every node the expansion of d->cur added. One op
// expands into far fewer than DECOMPOSE_SLACK nodes.
#define DECOMPOSE_SLACK 64
static int track(dctx *d, int before, int id) {
    if (id < 0)
        return -1;
    assert(d->ng->n <= before + DECOMPOSE_SLACK);
    for (int i = before; i < d->ng->n; i++)
        d->origin[i] = d->cur;
    return id;
}

// (C) -> (C, 1, ..., 1) so a per-channel vector broadcasts over (N, C, ...)
static int channel_view(dctx *d, int v, int ndim) {
    int64_t s[TENSOR_MAX_DIMS];
    s[0] = graph_at(d->ng, v)->shape[0];
    for (int i = 1; i < ndim - 1; i++)
        s[i] = 1;
    return graph_reshape(d->ng, v, ndim - 1, s);
}

// x normalized over its last axis: (x - mean) * rsqrt(var + eps). With
// rstd (the backward), the rsqrt goes to *rstd and the result is computed
// as (x + -mean) * rstd: the same bits, but a node CSE does not merge with
// the forward's, so the forward shares only its statistics (one value per
// row) and keeps no full-size intermediate alive for the backward.
static int normalize_last(dctx *d, int x, double eps, int *rstd) {
    graph *g = d->ng;
    int nd = graph_at(g, x)->ndim;
    int mu = graph_reduce(g, OP_MEAN, x, nd - 1);
    int xc = graph_binary(g, OP_SUB, x, mu);
    int var = graph_reduce(g, OP_MEAN, graph_binary(g, OP_MUL, xc, xc), nd - 1);
    int r = graph_unary(g, OP_RSQRT, graph_scale(g, var, 1, eps));
    if (!rstd)
        return graph_binary(g, OP_MUL, xc, r);
    *rstd = r;
    return graph_binary(g, OP_MUL, graph_binary(g, OP_ADD, x, graph_unary(g, OP_NEG, mu)), r);
}

// x * rsqrt(mean(x^2) + eps) over the last axis, as RMS norm's forward;
// backward (CSE-distinct, as above): rstd * x
static int rms_last(dctx *d, int x, double eps, int *rstd, bool backward) {
    graph *g = d->ng;
    int ms = graph_reduce(g, OP_MEAN, graph_binary(g, OP_MUL, x, x), graph_at(g, x)->ndim - 1);
    *rstd = graph_unary(g, OP_RSQRT, graph_scale(g, ms, 1, eps));
    return backward ? graph_binary(g, OP_MUL, *rstd, x) : graph_binary(g, OP_MUL, x, *rstd);
}

// Batch norm in training: the batch's statistics, the running ones moved
// toward them (biased variance for the normalization, unbiased for the
// running variance, as PyTorch). For (N, C, ...) input the statistics are
// one library kernel (batch_norm_stats: per channel the mean, the variance
// and 1 / sqrt(var + eps), over the batch and the spatial positions), and
// the input is normalized in its own shape from per-channel views of them,
// so what follows (an activation, a residual add) fuses into that loop. For
// (N, C) input they are column means.
static int batch_norm_train(dctx *d, const graph_node *n, const int *s) {
    graph *g = d->ng;
    const graph_node *x = graph_at(g, s[0]);
    int64_t N = x->shape[0], C = x->shape[1], L = 1;
    for (int i = 2; i < x->ndim; i++)
        L *= x->shape[i];
    int nd = x->ndim;
    int mean, var, y;
    if (nd > 2) {
        int st = graph_op(g, OP_BATCH_NORM_STATS, 1, &s[0], NULL, (double[GRAPH_MAX_FA]){n->fa[0]});
        int64_t cs[TENSOR_MAX_DIMS];
        cs[0] = C;
        for (int i = 1; i < nd - 1; i++)
            cs[i] = 1;
        mean = graph_reshape(g, graph_slice(g, st, 0, 0, 1), 1, &C);
        var = graph_reshape(g, graph_slice(g, st, 0, 1, 1), 1, &C);
        int rstd = graph_reshape(g, graph_slice(g, st, 0, 2, 1), nd - 1, cs);
        int xc = graph_binary(g, OP_SUB, s[0], graph_reshape(g, mean, nd - 1, cs));
        y = graph_binary(g, OP_ADD,
                         graph_binary(g, OP_MUL, graph_binary(g, OP_MUL, xc, rstd),
                                      channel_view(d, s[1], nd)),
                         channel_view(d, s[2], nd));
    } else {
        mean = graph_reduce(g, OP_MEAN, s[0], 0);
        int xc = graph_binary(g, OP_SUB, s[0], mean);
        var = graph_reduce(g, OP_MEAN, graph_binary(g, OP_MUL, xc, xc), 0);
        int r = graph_unary(g, OP_RSQRT, graph_scale(g, var, 1, n->fa[0]));
        y = graph_binary(g, OP_ADD, graph_binary(g, OP_MUL, graph_binary(g, OP_MUL, xc, r), s[1]),
                         s[2]);
        mean = graph_reshape(g, mean, 1, &C);
        var = graph_reshape(g, var, 1, &C);
    }
    double cnt = (double)(N * L), mom = n->fa[1];
    if (graph_op(g, OP_RUNNING_STAT, 2, (int[]){s[3], mean}, NULL,
                 (double[GRAPH_MAX_FA]){mom, 1}) < 0 ||
        graph_op(g, OP_RUNNING_STAT, 2, (int[]){s[4], var}, NULL,
                 (double[GRAPH_MAX_FA]){mom, cnt > 1 ? cnt / (cnt - 1) : 1}) < 0)
        return -1;
    return y;
}

static int expand_node(dctx *d, const graph_node *n, const int *s) {
    graph *g = d->ng;
    switch (n->op) {
    case OP_INPUT: {
        int id = graph_input(g, n->name, n->dtype, n->ndim, n->shape);
        if (id >= 0)
            memcpy(g->nodes[id].ia, n->ia, sizeof n->ia);
        return id;
    }
    case OP_PARAM: return graph_param(g, n->name, n->ndim, n->shape, (enum init_kind)n->ia[0], n->fa[0]);
    case OP_BUFFER:
        return graph_buffer(g, n->name, n->dtype, n->ndim, n->shape, (enum init_kind)n->ia[0],
                            n->fa[0]);
    case OP_FULL: return graph_full(g, n->fa[0], n->dtype, n->ndim, n->shape);
    case OP_SOFTMAX:
    case OP_LOG_SOFTMAX: {
        int ax = n->ndim - 1 - (int)n->ia[0];
        int m = graph_reduce(g, OP_MAX, s[0], ax);
        int xc = graph_binary(g, OP_SUB, s[0], m);
        int e = graph_unary(g, OP_EXP, xc);
        int sum = graph_reduce(g, OP_SUM, e, ax);
        if (n->op == OP_SOFTMAX)
            return graph_binary(g, OP_DIV, e, sum);
        return graph_binary(g, OP_SUB, xc, graph_unary(g, OP_LOG, sum));
    }
    case OP_LAYER_NORM: {
        int y = normalize_last(d, s[0], n->fa[0], NULL);
        return graph_binary(g, OP_ADD, graph_binary(g, OP_MUL, y, s[1]), s[2]);
    }
    case OP_RMS_NORM: {
        int r;
        return graph_binary(g, OP_MUL, rms_last(d, s[0], n->fa[0], &r, false), s[1]);
    }
    case OP_BATCH_NORM: {
        if (n->ia[0])
            return batch_norm_train(d, n, s);
        // inference: running statistics, per channel
        int nd = n->ndim;
        int mean = channel_view(d, s[3], nd), var = channel_view(d, s[4], nd);
        int w = channel_view(d, s[1], nd), b = channel_view(d, s[2], nd);
        int r = graph_unary(g, OP_RSQRT, graph_scale(g, var, 1, n->fa[0]));
        int y = graph_binary(g, OP_MUL, graph_binary(g, OP_SUB, s[0], mean), r);
        return graph_binary(g, OP_ADD, graph_binary(g, OP_MUL, y, w), b);
    }
    case OP_GROUP_NORM:
    case OP_INSTANCE_NORM: { // instance norm: G = C (ia0)
        // (N, C, ...) -> (N, G, rest) normalized over rest -> back, per-channel affine
        // x's shape copied: the nodes below may move the node array
        graph_node x = *graph_at(g, s[0]);
        int64_t N = x.shape[0], G = n->ia[0];
        int v = graph_reshape(g, s[0], 3, (int64_t[]){N, G, -1});
        int y = graph_reshape(g, normalize_last(d, v, n->fa[0], NULL), x.ndim, x.shape);
        int w = channel_view(d, s[1], x.ndim), b = channel_view(d, s[2], x.ndim);
        return graph_binary(g, OP_ADD, graph_binary(g, OP_MUL, y, w), b);
    }
    case OP_SOFTMAX_GRAD: { // y * (dy - sum(dy * y))
        int ax = n->ndim - 1 - (int)n->ia[0];
        int sum = graph_reduce(g, OP_SUM, graph_binary(g, OP_MUL, s[0], s[1]), ax);
        return graph_binary(g, OP_MUL, s[1], graph_binary(g, OP_SUB, s[0], sum));
    }
    case OP_LOG_SOFTMAX_GRAD: { // dy - exp(y) * sum(dy)
        int sum = graph_reduce(g, OP_SUM, s[0], n->ndim - 1 - (int)n->ia[0]);
        return graph_binary(g, OP_SUB, s[0],
                            graph_binary(g, OP_MUL, graph_unary(g, OP_EXP, s[1]), sum));
    }
    case OP_LAYER_NORM_GRAD:
    case OP_RMS_NORM_GRAD: {
        // g = dy * w; dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), the
        // mean(g) term only for layer norm; xhat and rstd as the forward's
        int r, ax = n->ndim - 1;
        int xhat = n->op == OP_LAYER_NORM_GRAD ? normalize_last(d, s[1], n->fa[0], &r)
                                                : rms_last(d, s[1], n->fa[0], &r, true);
        int gw = graph_binary(g, OP_MUL, s[0], s[2]);
        int m2 = graph_reduce(g, OP_MEAN, graph_binary(g, OP_MUL, gw, xhat), ax);
        int t = graph_binary(g, OP_MUL, xhat, m2);
        if (n->op == OP_LAYER_NORM_GRAD)
            t = graph_binary(g, OP_ADD, t, graph_reduce(g, OP_MEAN, gw, ax));
        return graph_binary(g, OP_MUL, r, graph_binary(g, OP_SUB, gw, t));
    }
    case OP_MSE_LOSS_GRAD: { // dloss * 2 (a - b) / numel
        double k = 2.0 / (double)graph_node_numel(n);
        return graph_binary(g, OP_MUL, graph_scale(g, graph_binary(g, OP_SUB, s[1], s[2]), k, 0),
                            s[0]);
    }
    case OP_BATCH_NORM_GRAD:
    case OP_BATCH_NORM_WGRAD: {
        // the forward's statistics (the same batch_norm_stats node, merged by
        // CSE) as an extra source: neither kernel passes over x for them again
        int base = n->op == OP_BATCH_NORM_GRAD ? 3 : 2;
        if (n->nsrc != base || graph_at(g, s[1])->ndim <= 2)
            break;
        int st = graph_op(g, OP_BATCH_NORM_STATS, 1, &s[1], NULL, (double[GRAPH_MAX_FA]){n->fa[0]});
        if (st < 0)
            return -1;
        int ss[4] = {s[0], s[1], s[2], st};
        ss[base] = st;
        return graph_op_shaped(g, n->op, base + 1, ss, n->ia, n->fa, n->ndim, n->shape);
    }
    case OP_LINEAR:
        if (n->nsrc == 3)
            return graph_binary(g, OP_ADD, graph_op(g, OP_LINEAR, 2, s, NULL, NULL), s[2]);
        break;
    case OP_CONV2D:
    case OP_CONV_TRANSPOSE2D:
        if (n->nsrc == 3) {
            int c = graph_op(g, n->op, 2, s, n->ia, n->fa);
            return graph_binary(g, OP_ADD, c, channel_view(d, s[2], n->ndim));
        }
        break;
    default:
        break;
    }
    return graph_op_shaped(g, n->op, n->nsrc, s, n->ia, n->fa, n->ndim, n->shape);
}

// Node i of a fused attention chain's backward (att[o], role w: 0 dq, 1 dk,
// 2 dv): its slice of the chain's one ATTENTION_GRAD node, made at the first
// of the three (*ag, -1 until then) from dy, q, k, v and o's ATTENTION.
static int attention_grad_part(dctx *d, const compile_attention *a, int o, int w, int i,
                               const int *map, int *ag) {
    graph *g = d->ng;
    const graph *mg = d->p->m->g;
    if (*ag < 0)
        *ag = graph_op(g, OP_ATTENTION_GRAD, 5,
                       (int[]){map[a->dy], map[a->q], map[a->k], map[a->v], map[o]},
                       (int64_t[GRAPH_MAX_IA]){a->causal}, (double[GRAPH_MAX_FA]){a->scale});
    if (*ag < 0)
        return -1;
    int64_t nq = graph_node_numel(&mg->nodes[a->q]), nk = graph_node_numel(&mg->nodes[a->k]);
    int64_t off[3] = {0, nq, nq + nk};
    const graph_node *n = &mg->nodes[i];
    return graph_reshape(g, graph_slice(g, *ag, 0, off[w], graph_node_numel(n)), n->ndim,
                         n->shape);
}

// What the passes assume of side effects (compile_internal.h): each written
// node a parameter, buffer or input, written once, and no update's value
// read by another node.
static int check_side_effects(cprog *p) {
    const graph *g = p->m->g;
    char *state = calloc((size_t)g->n + 1, 1); // 2: written by an earlier node
    if (!state)
        return compile_fail(p, "out of memory in decompose");
    int rc = 0;
    for (int i = 0; i < g->n && !rc; i++) {
        const graph_node *n = &g->nodes[i];
        for (int j = 0; j < n->nsrc && !rc; j++) {
            const graph_node *u = &g->nodes[n->src[j]];
            if (op_kind(u->op) == OPK_UPDATE && !op_update_readable(u))
                rc = compile_fail(p, "%s (node %d) reads the value of %s (node %d): an update's "
                                     "value is for the next step, read its source instead",
                                  op_name(n->op), i, op_name(u->op), n->src[j]);
            else if (compile_writes(n, j) &&
                     (op_kind(u->op) != OPK_SOURCE || u->op == OP_FULL))
                rc = compile_fail(p, "%s (node %d) writes %s (node %d): only parameters, "
                                     "buffers and inputs can be updated in place",
                                  op_name(n->op), i, op_name(u->op), n->src[j]);
            else if (compile_writes(n, j) && state[n->src[j]] == 2)
                rc = compile_fail(p, "%s (node %d) writes %s, which another update writes too",
                                  op_name(n->op), i, u->name ? u->name : op_name(u->op));
            else if (compile_writes(n, j))
                state[n->src[j]] = 2;
        }
    }
    free(state);
    return rc;
}

// Rematerialization (the partitioner's choice for cheap values): in a
// training step, a forward value the backward reads is either kept from the
// forward (it stays live from its forward kernel to its last backward
// reader) or computed again in the backward from values kept anyway. A
// forward value is recomputable when it is pointwise, or a training batch
// norm's normalization of a 4-d input (its statistics, C values a channel,
// are kept instead), and each of its inputs is a source, a value the
// backward keeps anyway (it reads it and cannot recompute it: a GEMM's or a
// convolution's output), or recomputable itself, as long as the chain of
// pointwise work from kept values stays short (REMAT_MAX_OPS): beyond that
// the value is kept, which cuts a residual network's chain of blocks at
// each block's output. The recomputed copies fuse with the backward's other
// work on the same inputs (gelu(h) next to gelu's gradient of h, a batch
// norm's normalization next to its activation's gradient), so a convnet
// keeps its convolutions' outputs but not the normalized activations
// between them. A copy is tagged in its last integer attribute (a slot
// pointwise ops do not use) so that CSE does not merge it back into the
// forward's node; the batch statistics are not tagged, and merge.
#define REMAT_TAG (GRAPH_MAX_IA - 1)
#define REMAT_MAX_OPS 16

static bool bn_train_4d(const graph_node *n) {
    return n->op == OP_BATCH_NORM && n->ia[0] && n->ndim > 2;
}

// cost[u]: pointwise ops to recompute u from kept values, or -1 when u is
// not recomputable (kept where the backward reads it)
static void remat_costs(const graph *g, const bool *bread, int *cost) {
    for (int u = 0; u < g->n; u++) {
        const graph_node *n = &g->nodes[u];
        cost[u] = -1;
        // (a training batch norm's side effect, the running statistics,
        // stays with the forward's node: the copy only normalizes)
        if (u > g->loss || op_kind(n->op) == OPK_SOURCE ||
            (op_has_side_effect(n) && !bn_train_4d(n)) ||
            n->op == OP_CAST || n->op == OP_CONTIGUOUS ||
            !(compile_is_pointwise(n) || bn_train_4d(n)))
            continue;
        int c = bn_train_4d(n) ? 4 : 1;
        bool ok = true;
        for (int k = 0; k < n->nsrc && ok; k++) {
            int v = n->src[k];
            if (op_kind(g->nodes[v].op) == OPK_SOURCE)
                continue;
            if (cost[v] >= 0)
                c += cost[v];
            else
                ok = bread[v]; // kept anyway
        }
        if (ok && bn_train_4d(n)) // normalized from its input: the input is kept
            ok = cost[n->src[0]] < 0;
        if (ok && c <= REMAT_MAX_OPS)
            cost[u] = c;
    }
}

static void tag(graph *g, int v) {
    if (v >= 0)
        g->nodes[v].ia[REMAT_TAG] = 1;
}

// A training batch norm's output computed again from its input: the
// forward's statistics (the same batch_norm_stats node, merged by CSE),
// the normalization in tagged nodes
static int bn_normalize_again(dctx *d, const graph_node *n, const int *s) {
    graph *g = d->ng;
    const graph_node *x = graph_at(g, s[0]);
    int64_t C = x->shape[1], cs[TENSOR_MAX_DIMS];
    int nd = x->ndim;
    cs[0] = C;
    for (int i = 1; i < nd - 1; i++)
        cs[i] = 1;
    int st = graph_op(g, OP_BATCH_NORM_STATS, 1, &s[0], NULL, (double[GRAPH_MAX_FA]){n->fa[0]});
    int mean = graph_reshape(g, graph_slice(g, st, 0, 0, 1), nd - 1, cs);
    int rstd = graph_reshape(g, graph_slice(g, st, 0, 2, 1), nd - 1, cs);
    int xc = graph_binary(g, OP_SUB, s[0], mean);
    tag(g, xc);
    int xn = graph_binary(g, OP_MUL, xc, rstd);
    tag(g, xn);
    int yw = graph_binary(g, OP_MUL, xn, channel_view(d, s[1], nd));
    tag(g, yw);
    int y = graph_binary(g, OP_ADD, yw, channel_view(d, s[2], nd));
    tag(g, y);
    return y;
}

// The backward's copy of forward value u (cost[u] >= 0), made once.
static int remat_copy(dctx *d, int u, const int *cost, const int *map, int *remat) {
    if (remat[u] >= 0)
        return remat[u];
    const graph *g = d->p->m->g;
    const graph_node *un = &g->nodes[u];
    int us[GRAPH_MAX_SRCS];
    for (int k = 0; k < un->nsrc; k++) {
        int v = un->src[k];
        us[k] = cost[v] >= 0 ? remat_copy(d, v, cost, map, remat) : map[v];
        if (us[k] < 0)
            return -1;
    }
    if (bn_train_4d(un)) {
        remat[u] = bn_normalize_again(d, un, us);
    } else {
        int64_t ia[GRAPH_MAX_IA];
        memcpy(ia, un->ia, sizeof ia);
        ia[REMAT_TAG] = 1;
        remat[u] = graph_op_shaped(d->ng, un->op, un->nsrc, us, ia, un->fa, un->ndim, un->shape);
    }
    if (remat[u] >= 0 && d->p->log)
        fprintf(d->p->log, "remat: %s %%%d is recomputed for the backward\n", op_name(un->op), u);
    return remat[u];
}

int compile_decompose(cprog *p) {
    const graph *g = p->m->g;
    // which forward values the backward reads (training graphs only)
    bool *bread = NULL;
    int *remat = NULL, *cost = NULL;
    const char *off = getenv("TCBENCH_DISABLE_REMAT");
    if (g->loss >= 0 && g->n > g->loss + 1 && !(off && *off && strcmp(off, "0"))) {
        bread = calloc((size_t)g->n, sizeof *bread);
        remat = malloc((size_t)g->n * sizeof *remat);
        cost = malloc((size_t)g->n * sizeof *cost);
        if (!bread || !remat || !cost) {
            free(bread), free(remat), free(cost);
            return compile_fail(p, "out of memory in decompose");
        }
        for (int i = 0; i < g->n; i++) {
            remat[i] = -1;
            if (i > g->loss && op_kind(g->nodes[i].op) != OPK_UPDATE)
                for (int j = 0; j < g->nodes[i].nsrc; j++)
                    bread[g->nodes[i].src[j]] = true;
        }
        remat_costs(g, bread, cost);
    }
    if (check_side_effects(p) < 0)
        return -1;
    dctx d = {.p = p, .ng = graph_new()};
    int *map = malloc((size_t)g->n * sizeof *map);
    p->src_of = malloc((size_t)g->n * sizeof *p->src_of);
    compile_attention *att = malloc((size_t)(g->n ? g->n : 1) * sizeof *att);
    // role[i]: 3 o + w when node i is part w of chain o's backward; ag[o]: its ATTENTION_GRAD
    int *role = malloc((size_t)(2 * g->n + 1) * sizeof *role), *ag = role + g->n;
    if (!d.ng || !map || !p->src_of || !att || !role ||
        compile_attention_find(g, p->fusion, p->log, att) < 0) {
        graph_free(d.ng);
        free(map);
        free(att);
        free(role);
        return compile_fail(p, "out of memory in decompose");
    }
    for (int i = 0; i < 2 * g->n; i++)
        role[i] = -1;
    for (int o = 0; o < g->n; o++)
        if (att[o].q >= 0 && att[o].dy >= 0) {
            role[att[o].gq] = 3 * o;
            role[att[o].gk] = 3 * o + 1;
            role[att[o].gv] = 3 * o + 2;
        }
    for (int i = 0; i < g->n; i++) {
        const graph_node *n = &g->nodes[i];
        int s[GRAPH_MAX_SRCS];
        for (int j = 0; j < n->nsrc; j++)
            s[j] = map[n->src[j]];
        d.cur = i;
        int before = d.ng->n;
        if (bread && i > g->loss && op_kind(n->op) != OPK_UPDATE)
            for (int j = 0; j < n->nsrc && j < GRAPH_MAX_SRCS; j++) {
                int u = n->src[j];
                if (cost[u] < 0)
                    continue;
                if ((s[j] = remat_copy(&d, u, cost, map, remat)) < 0) {
                    compile_fail(p, "recompute %s: %s", op_name(g->nodes[u].op),
                                 graph_error(d.ng));
                    goto fail;
                }
            }
        // room for the origins of the copies and of this node's expansion
        if (d.cap < d.ng->n + 2 * DECOMPOSE_SLACK) {
            int cap = d.ng->n * 2 + 2 * DECOMPOSE_SLACK;
            int *o = realloc(d.origin, (size_t)cap * sizeof *o);
            if (!o)
                goto oom;
            d.origin = o;
            d.cap = cap;
        }
        for (; before < d.ng->n; before++) // the copies: recomputed for node i
            d.origin[before] = i;
        const compile_attention *a = &att[i];
        int r = role[i];
        map[i] =
            track(&d, before,
                  r >= 0 ? attention_grad_part(&d, &att[r / 3], r / 3, r % 3, i, map, &ag[r / 3])
                  : a->q < 0 ? expand_node(&d, n, s)
                             : graph_op(d.ng, OP_ATTENTION, a->bias < 0 ? 3 : 4,
                                        (int[]){map[a->q], map[a->k], map[a->v],
                                                a->bias < 0 ? -1 : map[a->bias]},
                                        (int64_t[GRAPH_MAX_IA]){a->causal, a->bias < 0 ? 0 : 3},
                                        (double[GRAPH_MAX_FA]){a->scale}));
        if (map[i] < 0) {
            compile_fail(p, "decompose %s (node %d): %s", op_name(n->op), i, graph_error(d.ng));
            goto fail;
        }
        p->src_of[i] = op_kind(n->op) == OPK_SOURCE ? map[i] : -1;
    }
    for (int i = 0; i < g->noutputs; i++)
        graph_output(d.ng, map[g->outputs[i]]);
    d.ng->loss = g->loss >= 0 ? map[g->loss] : -1;
    p->g = d.ng;
    p->origin = d.origin;
    free(map);
    free(att);
    free(role);
    free(bread);
    free(remat);
    free(cost);
    return 0;
oom:
    compile_fail(p, "out of memory in decompose");
fail:
    graph_free(d.ng);
    free(d.origin);
    free(map);
    free(att);
    free(role);
    free(bread);
    free(remat);
    free(cost);
    return -1;
}
