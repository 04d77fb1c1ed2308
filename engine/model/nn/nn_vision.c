// timm's convnet pieces that are composites in PyTorch's eager too: layer
// norm over the channels of an NCHW map, layer scale, drop path, and the
// weight standardization of NFNet's convolutions. Each is a few graph ops,
// as timm's modules run them, so no kernel of their own.
#include "nn_internal.h"

#include <math.h>
#include <string.h>

#define X0 nn_in(x, 0)

// timm's ScaledStdConv2d: w (O, ...) -> (w - mean) / sqrt(var + eps) * gain
// * scale per output row, the biased variance over the row. timm runs it as
// batch_norm over (1, O, K) with weight gain * scale; here one layer_norm
// over (O, K) with a constant unit affine, then the gain: the same figures.
int nn_standardize_weight(graph *g, int w, int gain, double scale, double eps) {
    if (w < 0 || gain < 0)
        return -1;
    const graph_node *n = graph_at(g, w);
    int64_t O = n->shape[0], K = 1;
    int ndim = n->ndim;
    int64_t shape[TENSOR_MAX_DIMS];
    memcpy(shape, n->shape, sizeof(int64_t) * (size_t)ndim);
    for (int i = 1; i < ndim; i++)
        K *= shape[i];
    int r = graph_reshape(g, w, 2, (int64_t[]){O, K});
    int one = graph_full(g, 1, DT_F32, 1, &K), zero = graph_full(g, 0, DT_F32, 1, &K);
    double fa[GRAPH_MAX_FA] = {eps};
    int s = graph_op(g, OP_LAYER_NORM, 3, (int[]){r, one, zero}, NULL, fa);
    int gs = graph_scale(g, graph_reshape(g, gain, 2, (int64_t[]){O, 1}), scale, 0);
    return graph_reshape(g, graph_binary(g, OP_MUL, s, gs), ndim, shape);
}

// Stochastic depth, timm's drop_path: each sample kept with probability
// 1 - p and scaled by 1 / (1 - p). The mask is dropout over a (N, 1, ..., 1)
// tensor of ones (timm: bernoulli_ and div_ over that shape), then one mul.
int nn_drop_path_apply(graph *g, int x, double p, int64_t stream) {
    if (x < 0)
        return -1;
    const graph_node *n = graph_at(g, x);
    int64_t shape[TENSOR_MAX_DIMS];
    shape[0] = n->shape[0];
    for (int i = 1; i < n->ndim; i++)
        shape[i] = 1;
    int ones = graph_full(g, 1, n->dtype, n->ndim, shape);
    int64_t ia[GRAPH_MAX_IA] = {stream};
    double fa[GRAPH_MAX_FA] = {p};
    int mask = graph_op(g, OP_DROPOUT, 1, &ones, ia, fa);
    return graph_binary(g, OP_MUL, x, mask);
}

// timm's LayerNorm2d (ConvNeXt): (N, C, H, W) -> permute to (N, H, W, C),
// layer_norm over C, permute back, as its forward does
int nn_layer_norm2d(nn_ctx *x) {
    const graph_node *in = nn_node(x, X0);
    if (in->ndim != 4)
        return nn_fail(x, NULL, "layer_norm2d needs (N, C, H, W) input, got %d dimensions",
                       in->ndim);
    int64_t C = in->shape[1];
    int w = nn_param(x, "weight", 1, &C, INIT_ONES, 0);
    int b = w < 0 ? -1 : nn_param(x, "bias", 1, &C, INIT_ZEROS, 0);
    if (b < 0)
        return -1;
    int p = graph_permute(x->g, X0, (int[]){0, 2, 3, 1});
    double fa[GRAPH_MAX_FA] = {nn_float(x, "eps", 1e-6)};
    int y = graph_op(x->g, OP_LAYER_NORM, 3, (int[]){p, w, b}, NULL, fa);
    return nn_emit(x, graph_permute(x->g, y, (int[]){0, 3, 1, 2}));
}

// A learned per-channel scale, x * gamma: over the last axis, or with
// channels_first over axis 1 of (N, C, ...) (gamma seen as (C, 1, ...)).
// ConvNeXt's gamma and MetaFormer's Scale, initialized to `init`.
int nn_layer_scale(nn_ctx *x) {
    const graph_node *in = nn_node(x, X0);
    bool first = nn_bool(x, "channels_first", false);
    if (in->ndim < (first ? 2 : 1))
        return nn_fail(x, NULL, "layer_scale needs %s input", first ? "(N, C, ...)" : "(..., C)");
    int64_t C = first ? in->shape[1] : in->shape[in->ndim - 1];
    int gamma = nn_param(x, "gamma", 1, &C, INIT_CONSTANT, nn_float(x, "init", 1e-5));
    if (gamma < 0)
        return -1;
    if (first) {
        int64_t shape[TENSOR_MAX_DIMS] = {C};
        for (int i = 2; i < in->ndim; i++)
            shape[i - 1] = 1;
        gamma = graph_reshape(x->g, gamma, in->ndim - 1, shape);
    }
    return nn_emit(x, graph_binary(x->g, OP_MUL, X0, gamma));
}

// Stochastic depth on a residual branch: the identity at inference and for
// p 0 (no kernel, as timm's Identity), a per-sample mask in training.
int nn_drop_path(nn_ctx *x) {
    double p = nn_float(x, "p", 0);
    if (p < 0 || p >= 1)
        return nn_fail(x, "p", "drop_path: p must be in [0, 1), got %g", p);
    if (!x->c->training || p == 0)
        return nn_emit(x, X0);
    return nn_emit(x, nn_drop_path_apply(x->g, X0, p, x->g->n));
}
