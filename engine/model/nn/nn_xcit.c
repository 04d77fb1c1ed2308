// XCiT's layers (timm's xcit.py): cross-covariance attention (XCA), whose
// heads attend over channels, not tokens; and the Fourier position
// features its PositionalEncodingFourier projects.
#include "nn_internal.h"

#include <stdio.h>

// F.normalize(t, dim=-1): t / max(||t||_2, 1e-12) over the last axis
int nn_l2_normalize(nn_ctx *x, int t) {
    int nd = nn_node(x, t)->ndim;
    int s = graph_reduce(x->g, OP_SUM, graph_binary(x->g, OP_MUL, t, t), nd - 1);
    int n = graph_unary(x->g, OP_SQRT, s);
    int d = graph_binary(x->g, OP_MAXIMUM, n, graph_full(x->g, 1e-12, DT_F32, 0, NULL));
    return nn_check(x, graph_binary(x->g, OP_DIV, t, d));
}

// xca_attention: {heads, qkv_bias (true)} on (B, N, C), as timm's XCA
// unfused: qkv (B, N, 3, heads, hd) permuted to q, k, v (B, heads, hd, N)
// views, q and k L2-normalized over the tokens, (q k^T) * temperature
// (a learned (heads, 1, 1)), softmax over channels, that times v, back to
// (B, N, C) and proj.
int nn_xca_attention(nn_ctx *x) {
    const graph_node *in = nn_node(x, nn_in(x, 0));
    if (in->ndim != 3)
        return nn_fail(x, NULL, "xca_attention needs a (B, N, C) input");
    int64_t B = in->shape[0], N = in->shape[1], C = in->shape[2], H = nn_int(x, "heads", 0);
    if (H <= 0 || C % H)
        return nn_fail(x, "heads", "xca_attention: heads must divide the %lld channels",
                       (long long)C);
    int64_t hd = C / H;
    int qkv = nn_linear_to(x, nn_in(x, 0), 3 * C, nn_bool(x, "qkv_bias", true), "qkv");
    if (qkv < 0)
        return -1;
    int r = graph_reshape(x->g, qkv, 5, (int64_t[]){B, N, 3, H, hd});
    int part[3];
    for (int i = 0; i < 3; i++) { // (B, N, 1, H, hd) -> (B, H, hd, N) views
        int s = graph_reshape(x->g, graph_slice(x->g, r, 2, i, 1), 4, (int64_t[]){B, N, H, hd});
        if ((part[i] = nn_check(x, graph_permute(x->g, s, (int[]){0, 2, 3, 1}))) < 0)
            return -1;
    }
    int q = nn_l2_normalize(x, part[0]);
    int k = q < 0 ? -1 : nn_l2_normalize(x, part[1]);
    int temp = k < 0 ? -1 : nn_param(x, "temperature", 3, (int64_t[]){H, 1, 1}, INIT_ONES, 0);
    if (temp < 0)
        return -1;
    int a = graph_binary(x->g, OP_MATMUL, q, graph_permute(x->g, k, (int[]){0, 1, 3, 2}));
    a = graph_unary(x->g, OP_SOFTMAX, graph_binary(x->g, OP_MUL, a, temp)); // (B, H, hd, hd)
    int o = graph_binary(x->g, OP_MATMUL, a, part[2]);                      // (B, H, hd, N)
    o = graph_reshape(x->g, graph_permute(x->g, o, (int[]){0, 3, 1, 2}), 3, (int64_t[]){B, N, C});
    return nn_check(x, o) < 0 ? -1 : nn_emit(x, nn_linear_to(x, o, C, true, "proj"));
}

// fourier_positions: {hidden (32), grid: [h, w]}: the constant (1, 2 hidden,
// h, w) features of timm's PositionalEncodingFourier before its 1x1
// projection (INIT_FOURIER_POS); the input only places the layer
int nn_fourier_positions(nn_ctx *x) {
    int64_t hid = nn_int(x, "hidden", 32), grid[2];
    if (nn_ints(x, "grid", 2, grid, 0) < 0)
        return -1;
    if (hid <= 0 || hid % 2 || grid[0] <= 0 || grid[1] <= 0)
        return nn_fail(x, NULL, "fourier_positions: hidden must be even, hidden and grid positive");
    char name[96];
    snprintf(name, sizeof name, "fourier_positions.%lld.%lldx%lld", (long long)hid,
             (long long)grid[0], (long long)grid[1]);
    return nn_emit(x,
                   nn_shared_buffer(x, name, DT_F32, 4, (int64_t[]){1, 2 * hid, grid[0], grid[1]},
                                    INIT_FOURIER_POS, 0));
}
