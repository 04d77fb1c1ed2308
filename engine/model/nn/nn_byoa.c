// Self-attention over a feature map with relative position logits, as
// timm's "bring your own attention" networks run it: BoTNet's
// BottleneckAttn (every position attends to every position) and HaloNet's
// HaloAttn (each block of positions attends to its block and a halo around
// it). Both are composites of existing ops, as PyTorch's eager runs them:
// 1x1 convolutions, views, GEMMs, a softmax, and PosEmbedRel's relative
// logits made by the pad / flatten / pad / reshape / slice trick.
//
//   - bottleneck_attention: {heads: 4}                  # (B, C, H, W) -> (B, C, H, W)
//   - halo_attention: {heads: 8, dim_head: 16, block: 8, halo: 2}
#include "nn_internal.h"

#include <math.h>
#include <string.h>

#define X0 nn_in(x, 0)

// x padded with zeros along axis: `after` entries at the end (a concat, as pad)
static int pad_after(graph *g, int x, int axis, int64_t after) {
    if (after == 0)
        return x;
    const graph_node *n = graph_at(g, x);
    int64_t shape[TENSOR_MAX_DIMS];
    memcpy(shape, n->shape, sizeof(int64_t) * (size_t)n->ndim);
    shape[axis] = after;
    int z = graph_full(g, 0, n->dtype, n->ndim, shape);
    if (z < 0)
        return -1;
    int64_t ia[GRAPH_MAX_IA] = {axis};
    return graph_op(g, OP_CONCAT, 2, (int[]){x, z}, ia, NULL);
}

// timm's rel_logits_1d without its expand: q (N, A, L, d) against a table
// rel (2 win - 1, d) -> (N, A, L, win), the logit of query i against key j
// of its window along the axis.
static int rel_logits_1d(graph *g, int q, int rel, int64_t win) {
    const graph_node *qn = graph_at(g, q);
    int64_t N = qn->shape[0], A = qn->shape[1], L = qn->shape[2];
    int64_t R = graph_at(g, rel)->shape[0];
    int x = graph_op(g, OP_MATMUL, 2, (int[]){q, graph_permute(g, rel, (int[]){1, 0})}, NULL,
                     NULL);                                        // (N, A, L, R)
    x = graph_reshape(g, x, 3, (int64_t[]){N * A, L, R});
    x = pad_after(g, x, 2, 1);                                     // (NA, L, R + 1)
    x = graph_reshape(g, x, 2, (int64_t[]){N * A, L * (R + 1)});
    x = pad_after(g, x, 1, R - L);                                 // (NA, (L + 1) R)
    x = graph_reshape(g, x, 3, (int64_t[]){N * A, L + 1, R});
    x = graph_slice(g, graph_slice(g, x, 1, 0, L), 2, win - 1, win); // (NA, L, win)
    return graph_reshape(g, x, 4, (int64_t[]){N, A, L, win});
}

// PosEmbedRel: q (N, qh, qw, d) -> (N, qh qw, win_h win_w), the height and
// the width logits broadcast over each other and added.
static int rel_logits(nn_ctx *x, int q, int64_t win_h, int64_t win_w) {
    const graph_node *qn = nn_node(x, q);
    int64_t N = qn->shape[0], qh = qn->shape[1], qw = qn->shape[2], d = qn->shape[3];
    int hr = nn_param(x, "pos_embed.height_rel", 2, (int64_t[]){2 * win_h - 1, d}, INIT_NORMAL,
                      1 / sqrt((double)d));
    int wr = hr < 0 ? -1
                    : nn_param(x, "pos_embed.width_rel", 2, (int64_t[]){2 * win_w - 1, d},
                               INIT_NORMAL, 1 / sqrt((double)d));
    if (wr < 0)
        return -1;
    graph *g = x->g;
    int lw = rel_logits_1d(g, q, wr, win_w); // (N, qh, qw, win_w)
    lw = graph_reshape(g, lw, 5, (int64_t[]){N, qh, qw, 1, win_w});
    int lh = rel_logits_1d(g, graph_permute(g, q, (int[]){0, 2, 1, 3}), hr, win_h);
    lh = graph_permute(g, lh, (int[]){0, 2, 1, 3}); // (N, qh, qw, win_h)
    lh = graph_reshape(g, lh, 5, (int64_t[]){N, qh, qw, win_h, 1});
    int sum = graph_binary(g, OP_ADD, lh, lw);
    return nn_check(x, graph_reshape(g, sum, 3, (int64_t[]){N, qh * qw, win_h * win_w}));
}

static int conv1x1(nn_ctx *x, const char *role, int in, int64_t out, int64_t stride) {
    int64_t C = nn_node(x, in)->shape[1];
    int w = nn_param(x, role, 4, (int64_t[]){out, C, 1, 1}, INIT_NORMAL, 1 / sqrt((double)C));
    if (w < 0)
        return -1;
    int64_t ia[GRAPH_MAX_IA] = {stride, stride, 0, 0, 1, 1, 1};
    return nn_check(x, graph_op(x->g, OP_CONV2D, 2, (int[]){in, w}, ia, NULL));
}

// The head sizes both classes derive: qk heads of dim_head (default
// make_divisible(out, 8) / heads), value heads of out / heads.
static int head_dims(nn_ctx *x, int64_t *heads, int64_t *out, int64_t *dqk, int64_t *dv,
                     int64_t dflt_heads) {
    const graph_node *in = nn_node(x, X0);
    if (in->ndim != 4)
        return nn_fail(x, NULL, "%s needs (N, C, H, W) input", x->c->type);
    *heads = nn_int(x, "heads", dflt_heads);
    *out = nn_int(x, "out", in->shape[1]);
    if (*heads <= 0 || *out <= 0 || *out % *heads)
        return nn_fail(x, "heads", "%s: out (%lld) must split into %lld heads", x->c->type,
                       (long long)*out, (long long)*heads);
    int64_t div8 = (*out + 4) / 8 * 8;
    *dqk = nn_int(x, "dim_head", 0); // 0: derived, as timm's None
    if (*dqk == 0)
        *dqk = (div8 < 8 ? 8 : div8) / *heads;
    *dv = *out / *heads;
    if (*dqk < 0)
        return nn_fail(x, "dim_head", "%s: dim_head must not be negative", x->c->type);
    return 0;
}

static int avg_pool2(graph *g, int x) {
    int64_t ia[GRAPH_MAX_IA] = {2, 2, 0, 0, 2, 2};
    return graph_op(g, OP_AVG_POOL2D, 1, (int[]){x}, ia, NULL);
}

// BoTNet's BottleneckAttn: (B, C, H, W) -> (B, out, H / stride, W / stride).
int nn_bottleneck_attention(nn_ctx *x) {
    int64_t heads, out, dqk, dv;
    if (head_dims(x, &heads, &out, &dqk, &dv, 4) < 0)
        return -1;
    int64_t stride = nn_int(x, "stride", 1);
    if (stride != 1 && stride != 2)
        return nn_fail(x, "stride", "bottleneck_attention: stride is 1 or 2");
    const graph_node *in = nn_node(x, X0);
    int64_t B = in->shape[0], H = in->shape[2], W = in->shape[3], BH = B * heads;
    graph *g = x->g;
    int qkv = conv1x1(x, "qkv.weight", X0, 2 * heads * dqk + out, 1); // (B, 2 qk + v, H, W)
    if (qkv < 0)
        return -1;
    int q = graph_reshape(g, graph_slice(g, qkv, 1, 0, heads * dqk), 3,
                          (int64_t[]){BH, dqk, H * W});
    q = graph_permute(g, q, (int[]){0, 2, 1}); // (BH, HW, dqk)
    int k = graph_reshape(g, graph_slice(g, qkv, 1, heads * dqk, heads * dqk), 3,
                          (int64_t[]){BH, dqk, H * W});
    int v = graph_reshape(g, graph_slice(g, qkv, 1, 2 * heads * dqk, out), 3,
                          (int64_t[]){BH, dv, H * W});
    v = graph_permute(g, v, (int[]){0, 2, 1}); // (BH, HW, dv)
    int s = graph_op(g, OP_MATMUL, 2, (int[]){q, k}, NULL, NULL);
    s = graph_scale(g, s, 1 / sqrt((double)dqk), 0);
    if (nn_check(x, s) < 0)
        return -1;
    int rel = rel_logits(x, graph_reshape(g, q, 4, (int64_t[]){BH, H, W, dqk}), H, W);
    if (rel < 0)
        return -1;
    s = graph_unary(g, OP_SOFTMAX, graph_binary(g, OP_ADD, s, rel)); // (BH, HW, HW)
    int o = graph_op(g, OP_MATMUL, 2, (int[]){s, v}, NULL, NULL);     // (BH, HW, dv)
    o = graph_reshape(g, graph_permute(g, o, (int[]){0, 2, 1}), 4, (int64_t[]){B, out, H, W});
    return nn_emit(x, stride == 2 ? avg_pool2(g, o) : o);
}

// The halo windows: kv (B, C, H, W) padded by halo on every side, the
// (win, win) window of each (block, block) block, -> (B, C, blocks, win, win)
// as tensor.unfold twice then a reshape (one copy): here views and concats.
static int halo_windows(graph *g, int kv, int64_t block, int64_t halo, int64_t nh, int64_t nw) {
    const graph_node *n = graph_at(g, kv);
    int64_t B = n->shape[0], C = n->shape[1], win = block + 2 * halo;
    int p = kv;
    for (int axis = 2; axis <= 3; axis++) {
        const graph_node *pn = graph_at(g, p);
        int64_t shape[4] = {pn->shape[0], pn->shape[1], pn->shape[2], pn->shape[3]};
        shape[axis] = halo;
        int z = graph_full(g, 0, pn->dtype, 4, shape);
        int64_t ia[GRAPH_MAX_IA] = {axis};
        p = graph_op(g, OP_CONCAT, 3, (int[]){z, p, z}, ia, NULL);
        if (p < 0)
            return -1;
    }
    // concats of at most 8 windows, then of those parts
    int parts[GRAPH_MAX_SRCS], np = 0, win_ids[GRAPH_MAX_SRCS], nwin = 0;
    int64_t cat2[GRAPH_MAX_IA] = {2};
    for (int64_t b = 0; b < nh * nw; b++) {
        int w = graph_slice(g, graph_slice(g, p, 2, (b / nw) * block, win), 3, (b % nw) * block, win);
        win_ids[nwin++] = graph_reshape(g, w, 5, (int64_t[]){B, C, 1, win, win});
        if (nwin == GRAPH_MAX_SRCS || b == nh * nw - 1) {
            if (np == GRAPH_MAX_SRCS)
                return -1;
            parts[np++] = nwin == 1 ? win_ids[0] : graph_op(g, OP_CONCAT, nwin, win_ids, cat2, NULL);
            nwin = 0;
        }
    }
    return np == 1 ? parts[0] : graph_op(g, OP_CONCAT, np, parts, cat2, NULL);
}

// HaloNet's HaloAttn: (B, C, H, W) -> (B, out, H / stride, W / stride).
int nn_halo_attention(nn_ctx *x) {
    int64_t heads, out, dqk, dv;
    if (head_dims(x, &heads, &out, &dqk, &dv, 8) < 0)
        return -1;
    int64_t stride = nn_int(x, "stride", 1), block = nn_int(x, "block", 8),
            halo = nn_int(x, "halo", 3);
    if (stride != 1 && stride != 2)
        return nn_fail(x, "stride", "halo_attention: stride is 1 or 2");
    if (block <= 0 || halo < 0)
        return nn_fail(x, "block", "halo_attention: block must be positive, halo not negative");
    const graph_node *in = nn_node(x, X0);
    int64_t B = in->shape[0], H = in->shape[2], W = in->shape[3], BH = B * heads;
    if (H % block || W % block)
        return nn_fail(x, "block", "halo_attention: the %lldx%lld map does not split into "
                       "blocks of %lld", (long long)H, (long long)W, (long long)block);
    int64_t nh = H / block, nw = W / block, nb = nh * nw, win = block + 2 * halo;
    if (nb > GRAPH_MAX_SRCS * GRAPH_MAX_SRCS)
        return nn_fail(x, "block", "halo_attention: at most %d blocks", GRAPH_MAX_SRCS * GRAPH_MAX_SRCS);
    // a stride that divides the block strides the queries; another pools the output
    bool pool = stride > 1 && block % stride != 0;
    int64_t bst = pool ? 1 : stride, bs = block / bst;
    graph *g = x->g;
    int q = conv1x1(x, "q.weight", X0, heads * dqk, bst); // (B, qk, H / bst, W / bst)
    if (q < 0)
        return -1;
    q = graph_reshape(g, q, 6, (int64_t[]){BH, dqk, nh, bs, nw, bs});
    q = graph_permute(g, q, (int[]){0, 1, 3, 5, 2, 4}); // (BH, dqk, bs, bs, nh, nw)
    q = graph_reshape(g, q, 4, (int64_t[]){BH, dqk, bs * bs, nb});
    q = graph_permute(g, q, (int[]){0, 3, 2, 1}); // (BH, nb, bs^2, dqk)
    int kv = conv1x1(x, "kv.weight", X0, heads * dqk + out, 1);
    if (kv < 0)
        return -1;
    kv = halo_windows(g, kv, block, halo, nh, nw); // (B, qk + v, nb, win, win)
    if (nn_check(x, kv) < 0)
        return -1;
    kv = graph_reshape(g, kv, 4, (int64_t[]){BH, dqk + dv, nb, win * win});
    kv = graph_permute(g, kv, (int[]){0, 2, 3, 1}); // (BH, nb, win^2, dqk + dv)
    int k = graph_permute(g, graph_slice(g, kv, 3, 0, dqk), (int[]){0, 1, 3, 2});
    int v = graph_slice(g, kv, 3, dqk, dv);
    int s = graph_op(g, OP_MATMUL, 2, (int[]){q, k}, NULL, NULL); // (BH, nb, bs^2, win^2)
    s = graph_scale(g, s, 1 / sqrt((double)dqk), 0);
    if (nn_check(x, s) < 0)
        return -1;
    int rel = rel_logits(x, graph_reshape(g, q, 4, (int64_t[]){BH * nb, bs, bs, dqk}), win, win);
    if (rel < 0)
        return -1;
    rel = graph_reshape(g, rel, 4, (int64_t[]){BH, nb, bs * bs, win * win});
    s = graph_unary(g, OP_SOFTMAX, graph_binary(g, OP_ADD, s, rel));
    int o = graph_op(g, OP_MATMUL, 2, (int[]){s, v}, NULL, NULL); // (BH, nb, bs^2, dv)
    o = graph_permute(g, o, (int[]){0, 3, 2, 1});                 // (BH, dv, bs^2, nb)
    o = graph_reshape(g, o, 5, (int64_t[]){BH * dv, bs, bs, nh, nw});
    o = graph_permute(g, o, (int[]){0, 3, 1, 4, 2}); // (BH dv, nh, bs, nw, bs)
    o = graph_reshape(g, o, 4, (int64_t[]){B, out, nh * bs, nw * bs});
    return nn_emit(x, pool ? avg_pool2(g, o) : o);
}
