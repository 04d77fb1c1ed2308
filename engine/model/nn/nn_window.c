// Swin's and BEiT's layers: torch.roll, the 2-D relative position bias
// table gathered by a constant index, and Swin's (shifted) window attention
// as timm's WindowAttention runs it without a fused kernel: windows by
// reshape + permute, one qkv linear, q scaled, q k^T, + the gathered bias,
// + the shift mask per window, softmax, p v, proj, windows merged back.
#include "nn_internal.h"

#include <math.h>
#include <stdio.h>

// roll: {shifts: [..], dims: [..]}, torch.roll(x, shifts, dims): one op
int nn_roll(nn_ctx *x) {
    const graph_node *in = nn_node(x, nn_in(x, 0));
    int64_t sh[TENSOR_MAX_DIMS], dims[TENSOR_MAX_DIMS], ia[GRAPH_MAX_IA] = {0};
    int ns = nn_list(x, "shifts", TENSOR_MAX_DIMS, sh);
    int nd = ns < 0 ? -1 : nn_list(x, "dims", TENSOR_MAX_DIMS, dims);
    if (ns < 0 || nd < 0)
        return -1;
    if (ns != nd)
        return nn_fail(x, "dims", "roll: %d shifts and %d dims; give one shift per dim", ns, nd);
    for (int i = 0; i < nd; i++) {
        int64_t d = dims[i] < 0 ? dims[i] + in->ndim : dims[i];
        if (d < 0 || d >= in->ndim)
            return nn_fail(x, "dims", "roll: dim %lld is outside the input's %d axes",
                           (long long)dims[i], in->ndim);
        ia[d] += sh[i];
    }
    return nn_emit(x, graph_op(x->g, OP_ROLL, 1, (int[]){nn_in(x, 0)}, ia, NULL));
}

// (1, heads, N, N): the table ((2 wh - 1)(2 ww - 1) [+ 3], heads) gathered
// at each token pair's relative offset in a wh x ww window, as timm's
// relative_position_bias_table[relative_position_index]; with cls (BEiT) the
// class token is token 0 of N = wh ww + 1 and takes the table's last three
// rows (to, from, itself).
static int window_bias(nn_ctx *x, int64_t wh, int64_t ww, int64_t heads, bool cls) {
    int64_t N = wh * ww + cls, rows = (2 * wh - 1) * (2 * ww - 1) + 3 * cls;
    char name[96];
    snprintf(name, sizeof name, "relative_position_index.%lldx%lld%s", (long long)wh, (long long)ww,
             cls ? ".cls" : "");
    int idx = nn_shared_buffer(x, name, DT_I32, 2, (int64_t[]){N, N}, INIT_REL_POS_2D, 0);
    if (idx < 0)
        return -1;
    x->g->nodes[idx].ia[1] = wh;
    x->g->nodes[idx].ia[2] = ww;
    x->g->nodes[idx].ia[3] = cls;
    int t =
        nn_param(x, "relative_position_bias_table", 2, (int64_t[]){rows, heads}, INIT_NORMAL, 0.02);
    if (t < 0)
        return -1;
    int e = graph_op(x->g, OP_EMBEDDING, 2, (int[]){t, idx}, NULL, NULL); // (N, N, heads)
    int r = graph_reshape(x->g, e, 4, (int64_t[]){1, N, N, heads});
    return nn_check(x,
                    graph_unary(x->g, OP_CONTIGUOUS, graph_permute(x->g, r, (int[]){0, 3, 1, 2})));
}

// window_position_bias: {window: [wh, ww], heads, cls}: the bias above, for
// attention's third input (BEiT)
int nn_window_position_bias(nn_ctx *x) {
    int64_t w[2];
    if (nn_ints(x, "window", 2, w, 0) < 0)
        return -1;
    int64_t heads = nn_int(x, "heads", 0);
    if (w[0] <= 0 || w[1] <= 0 || heads <= 0)
        return nn_fail(x, NULL, "window_position_bias: window and heads must be positive");
    return nn_emit(x, window_bias(x, w[0], w[1], heads, nn_bool(x, "cls", false)));
}

// (B, H, W, C) <-> (B nW, wh ww, C): window_partition and window_reverse
static int partition(nn_ctx *x, int t, int64_t B, int64_t H, int64_t W, int64_t C, int64_t wh,
                     int64_t ww) {
    int r = graph_reshape(x->g, t, 6, (int64_t[]){B, H / wh, wh, W / ww, ww, C});
    int p = graph_permute(x->g, r, (int[]){0, 1, 3, 2, 4, 5});
    return graph_reshape(x->g, graph_unary(x->g, OP_CONTIGUOUS, p), 3,
                         (int64_t[]){B * (H / wh) * (W / ww), wh * ww, C});
}

static int merge(nn_ctx *x, int t, int64_t B, int64_t H, int64_t W, int64_t C, int64_t wh,
                 int64_t ww) {
    int r = graph_reshape(x->g, t, 6, (int64_t[]){B, H / wh, W / ww, wh, ww, C});
    int p = graph_permute(x->g, r, (int[]){0, 1, 3, 2, 4, 5});
    return graph_reshape(x->g, graph_unary(x->g, OP_CONTIGUOUS, p), 4, (int64_t[]){B, H, W, C});
}

// The window's size and shift along one axis of r positions, as timm's
// _calc_window_shift: a window past the map shrinks to it, unshifted.
static void fit(int64_t r, int64_t *w, int64_t *s) {
    if (r <= *w) {
        *w = r;
        *s = 0;
    }
}

// (B, nW, heads, N, N) scores + the shift mask (1, nW, 1, N, N), a constant
// of 0 within a region and -100 across regions (timm's attn_mask)
static int add_shift_mask(nn_ctx *x, int s, int64_t B, int64_t H, int64_t W, int64_t heads,
                          const int64_t win[2], const int64_t sh[2]) {
    int64_t nW = (H / win[0]) * (W / win[1]), N = win[0] * win[1];
    char name[128];
    snprintf(name, sizeof name, "shift_mask.%lldx%lld.%lldx%lld.%lldx%lld", (long long)H,
             (long long)W, (long long)win[0], (long long)win[1], (long long)sh[0],
             (long long)sh[1]);
    int m = nn_shared_buffer(x, name, DT_F32, 3, (int64_t[]){nW, N, N}, INIT_SHIFT_MASK, 0);
    if (m < 0)
        return -1;
    int64_t *ia = x->g->nodes[m].ia;
    ia[1] = H, ia[2] = W, ia[3] = win[0], ia[4] = win[1], ia[5] = sh[0], ia[6] = sh[1];
    int r = graph_reshape(x->g, s, 5, (int64_t[]){B, nW, heads, N, N});
    int mr = graph_reshape(x->g, m, 5, (int64_t[]){1, nW, 1, N, N});
    return graph_reshape(x->g, graph_binary(x->g, OP_ADD, r, mr), 4,
                         (int64_t[]){B * nW, heads, N, N});
}

// window_attention: {heads, window, shift (0), qkv_bias (true)} on (B, H, W, C)
int nn_window_attention(nn_ctx *x) {
    const graph_node *in = nn_node(x, nn_in(x, 0));
    if (in->ndim != 4)
        return nn_fail(x, NULL, "window_attention needs a (B, H, W, C) input");
    int64_t B = in->shape[0], H = in->shape[1], W = in->shape[2], C = in->shape[3];
    int64_t heads = nn_int(x, "heads", 0), win[2] = {nn_int(x, "window", 0), 0}, sh[2];
    win[1] = win[0];
    sh[0] = sh[1] = nn_int(x, "shift", 0);
    if (heads <= 0 || C % heads)
        return nn_fail(x, "heads", "window_attention: heads must divide the %lld channels",
                       (long long)C);
    if (win[0] <= 0 || sh[0] < 0 || sh[0] >= win[0])
        return nn_fail(x, "shift", "window_attention: needs window > 0 and 0 <= shift < window");
    fit(H, &win[0], &sh[0]);
    fit(W, &win[1], &sh[1]);
    if (H % win[0] || W % win[1])
        return nn_fail(x, "window",
                       "window_attention: a %lldx%lld map does not split into %lldx%lld windows "
                       "(the padded case is not built)",
                       (long long)H, (long long)W, (long long)win[0], (long long)win[1]);
    int64_t hd = C / heads, N = win[0] * win[1], Bw = B * (H / win[0]) * (W / win[1]);
    int t = nn_in(x, 0);
    if (sh[0] || sh[1])
        t = graph_op(x->g, OP_ROLL, 1, &t, (int64_t[GRAPH_MAX_IA]){0, -sh[0], -sh[1]}, NULL);
    t = partition(x, t, B, H, W, C, win[0], win[1]);
    int qkv =
        nn_check(x, t) < 0 ? -1 : nn_linear_to(x, t, 3 * C, nn_bool(x, "qkv_bias", true), "qkv");
    if (qkv < 0)
        return -1;
    int part[3];
    for (int i = 0; i < 3; i++) { // [q | k | v], each (Bw, heads, N, hd) views
        int s = graph_slice(x->g, qkv, 2, i * C, C);
        s = graph_reshape(x->g, s, 4, (int64_t[]){Bw, N, heads, hd});
        part[i] = nn_check(x, graph_permute(x->g, s, (int[]){0, 2, 1, 3}));
        if (part[i] < 0)
            return -1;
    }
    int q = graph_scale(x->g, part[0], 1.0 / sqrt((double)hd), 0);
    int kt = graph_permute(x->g, part[1], (int[]){0, 1, 3, 2});
    int s = graph_binary(x->g, OP_MATMUL, q, kt); // (Bw, heads, N, N)
    int bias = nn_check(x, s) < 0 ? -1 : window_bias(x, win[0], win[1], heads, false);
    if (bias < 0)
        return -1;
    s = graph_binary(x->g, OP_ADD, s, bias);
    if (sh[0] || sh[1])
        s = add_shift_mask(x, s, B, H, W, heads, win, sh);
    int p = graph_unary(x->g, OP_SOFTMAX, s);
    int o = graph_binary(x->g, OP_MATMUL, p, part[2]); // (Bw, heads, N, hd)
    o = graph_reshape(x->g, graph_permute(x->g, o, (int[]){0, 2, 1, 3}), 3, (int64_t[]){Bw, N, C});
    o = nn_check(x, o) < 0 ? -1 : nn_linear_to(x, o, C, true, "proj");
    if (o < 0)
        return -1;
    o = merge(x, o, B, H, W, C, win[0], win[1]);
    if (sh[0] || sh[1])
        o = graph_op(x->g, OP_ROLL, 1, &o, (int64_t[GRAPH_MAX_IA]){0, sh[0], sh[1]}, NULL);
    return nn_emit(x, o);
}

// outlook_attention: {heads, kernel (3), padding (1), stride (2)} on
// (B, H, W, C), VOLO's OutlookAttention: v (no bias) unfolded into each
// output position's k x k neighbourhood, (B, heads, L, k k, hd); the map
// average-pooled by the stride, `attn` (bias) to heads k^4 logits per
// position, scaled by hd^-0.5 and softmaxed to (B, heads, L, k k, k k);
// their product folded back (overlaps summed) to (B, C, H, W), then proj.
int nn_outlook_attention(nn_ctx *x) {
    const graph_node *in = nn_node(x, nn_in(x, 0));
    if (in->ndim != 4)
        return nn_fail(x, NULL, "outlook_attention needs a (B, H, W, C) input");
    int64_t B = in->shape[0], H = in->shape[1], W = in->shape[2], C = in->shape[3];
    int64_t heads = nn_int(x, "heads", 0), k = nn_int(x, "kernel", 3);
    int64_t pad = nn_int(x, "padding", 1), st = nn_int(x, "stride", 2);
    if (heads <= 0 || C % heads)
        return nn_fail(x, "heads", "outlook_attention: heads must divide the %lld channels",
                       (long long)C);
    if (k < 1 || pad < 0 || st < 1 || H % st || W % st || (H + 2 * pad - k) / st + 1 != H / st ||
        (W + 2 * pad - k) / st + 1 != W / st)
        return nn_fail(x, "kernel",
                       "outlook_attention: kernel %lld, padding %lld and stride %lld must give "
                       "one block per pooled position of the %lldx%lld map",
                       (long long)k, (long long)pad, (long long)st, (long long)H, (long long)W);
    int64_t hd = C / heads, kk = k * k, L = (H / st) * (W / st);
    int64_t ia[GRAPH_MAX_IA] = {k, k, pad, pad, st, st, H, W};
    int nchw[4] = {0, 3, 1, 2};
    int v = nn_linear_to(x, nn_in(x, 0), C, false, "v");
    if (v < 0)
        return -1;
    v = graph_op(x->g, OP_UNFOLD, 1, (int[]){graph_permute(x->g, v, nchw)}, ia, NULL);
    v = graph_reshape(x->g, v, 5, (int64_t[]){B, heads, hd, kk, L});
    v = nn_check(x, graph_permute(x->g, v, (int[]){0, 1, 4, 3, 2})); // (B, heads, L, kk, hd)
    int p = v < 0
                ? -1
                : graph_op(x->g, OP_AVG_POOL2D, 1, (int[]){graph_permute(x->g, nn_in(x, 0), nchw)},
                           (int64_t[GRAPH_MAX_IA]){st, st, 0, 0, st, st}, NULL);
    p = nn_check(x, graph_permute(x->g, p, (int[]){0, 2, 3, 1})); // (B, H/st, W/st, C)
    int a = p < 0 ? -1 : nn_linear_to(x, p, heads * kk * kk, true, "attn");
    if (a < 0)
        return -1;
    a = graph_reshape(x->g, a, 5, (int64_t[]){B, L, heads, kk, kk});
    a = graph_permute(x->g, a, (int[]){0, 2, 1, 3, 4});
    a = graph_unary(x->g, OP_SOFTMAX, graph_scale(x->g, a, 1.0 / sqrt((double)hd), 0));
    int o = graph_binary(x->g, OP_MATMUL, a, v); // (B, heads, L, kk, hd)
    o = graph_reshape(x->g, graph_permute(x->g, o, (int[]){0, 1, 4, 3, 2}), 3,
                      (int64_t[]){B, C * kk, L});
    o = graph_op(x->g, OP_FOLD, 1, &o, ia, NULL);
    o = nn_check(x, graph_permute(x->g, o, (int[]){0, 2, 3, 1}));
    return o < 0 ? -1 : nn_emit(x, nn_linear_to(x, o, C, true, "proj"));
}
