// Decomposition: composite ops become the primitives they are made of (the
// PrimTorch idea), so that fusion sees every elementwise step and the
// reductions between them. Biases of linear and convolution layers become
// separate adds, which fusion then folds into the GEMM's epilogue.
#include "compile_internal.h"

#include <assert.h>
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

// x normalized over its last axis: (x - mean) * rsqrt(var + eps)
static int normalize_last(dctx *d, int x, double eps) {
    graph *g = d->ng;
    int nd = graph_at(g, x)->ndim;
    int mu = graph_reduce(g, OP_MEAN, x, nd - 1);
    int xc = graph_binary(g, OP_SUB, x, mu);
    int var = graph_reduce(g, OP_MEAN, graph_binary(g, OP_MUL, xc, xc), nd - 1);
    int r = graph_unary(g, OP_RSQRT, graph_scale(g, var, 1, eps));
    return graph_binary(g, OP_MUL, xc, r);
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
        int ax = n->ndim - 1;
        int m = graph_reduce(g, OP_MAX, s[0], ax);
        int xc = graph_binary(g, OP_SUB, s[0], m);
        int e = graph_unary(g, OP_EXP, xc);
        int sum = graph_reduce(g, OP_SUM, e, ax);
        if (n->op == OP_SOFTMAX)
            return graph_binary(g, OP_DIV, e, sum);
        return graph_binary(g, OP_SUB, xc, graph_unary(g, OP_LOG, sum));
    }
    case OP_LAYER_NORM: {
        int y = normalize_last(d, s[0], n->fa[0]);
        return graph_binary(g, OP_ADD, graph_binary(g, OP_MUL, y, s[1]), s[2]);
    }
    case OP_RMS_NORM: {
        int ax = n->ndim - 1;
        int ms = graph_reduce(g, OP_MEAN, graph_binary(g, OP_MUL, s[0], s[0]), ax);
        int r = graph_unary(g, OP_RSQRT, graph_scale(g, ms, 1, n->fa[0]));
        return graph_binary(g, OP_MUL, graph_binary(g, OP_MUL, s[0], r), s[1]);
    }
    case OP_BATCH_NORM: {
        // inference: running statistics, per channel
        int nd = n->ndim;
        int mean = channel_view(d, s[3], nd), var = channel_view(d, s[4], nd);
        int w = channel_view(d, s[1], nd), b = channel_view(d, s[2], nd);
        int r = graph_unary(g, OP_RSQRT, graph_scale(g, var, 1, n->fa[0]));
        int y = graph_binary(g, OP_MUL, graph_binary(g, OP_SUB, s[0], mean), r);
        return graph_binary(g, OP_ADD, graph_binary(g, OP_MUL, y, w), b);
    }
    case OP_GROUP_NORM: {
        // (N, C, ...) -> (N, G, rest) normalized over rest -> back, per-channel affine
        const graph_node *x = graph_at(g, s[0]);
        int64_t N = x->shape[0], G = n->ia[0];
        int v = graph_reshape(g, s[0], 3, (int64_t[]){N, G, -1});
        int y = graph_reshape(g, normalize_last(d, v, n->fa[0]), x->ndim, x->shape);
        int w = channel_view(d, s[1], x->ndim), b = channel_view(d, s[2], x->ndim);
        return graph_binary(g, OP_ADD, graph_binary(g, OP_MUL, y, w), b);
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

int compile_decompose(cprog *p) {
    const graph *g = p->m->g;
    dctx d = {.p = p, .ng = graph_new()};
    int *map = malloc((size_t)g->n * sizeof *map);
    p->src_of = malloc((size_t)g->n * sizeof *p->src_of);
    if (!d.ng || !map || !p->src_of) {
        graph_free(d.ng);
        free(map);
        return compile_fail(p, "out of memory in decompose");
    }
    for (int i = 0; i < g->n; i++) {
        const graph_node *n = &g->nodes[i];
        int s[GRAPH_MAX_SRCS];
        for (int j = 0; j < n->nsrc; j++)
            s[j] = map[n->src[j]];
        d.cur = i;
        int before = d.ng->n;
        if (d.cap < before + DECOMPOSE_SLACK) {
            int cap = before * 2 + DECOMPOSE_SLACK;
            int *o = realloc(d.origin, (size_t)cap * sizeof *o);
            if (!o)
                goto oom;
            d.origin = o;
            d.cap = cap;
        }
        map[i] = track(&d, before, expand_node(&d, n, s));
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
    return 0;
oom:
    compile_fail(p, "out of memory in decompose");
fail:
    graph_free(d.ng);
    free(d.origin);
    free(map);
    return -1;
}
