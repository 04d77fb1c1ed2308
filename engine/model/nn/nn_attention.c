// Multi-head attention as the Hugging Face eager modules run it: separate
// q/k/v projections, heads split by reshape + permute (views), scores by
// batched GEMM against a transposed view of k, scale, causal mask by where,
// softmax, GEMM with v, heads merged (a copy), output projection. Grouped
// and multi-query attention (kv_heads < heads) repeat k and v per query
// group, as HF's repeat_kv does. Rotary embeddings apply q*cos +
// rotate_half(q)*sin with shared cos/sin tables.
#include "nn_internal.h"

#include <float.h>
#include <math.h>
#include <stdio.h>

// (B, S, H*hd) -> (B, H, S, hd): a reshape view and a permute view
static int split_heads(nn_ctx *x, int t, int64_t H, int64_t hd) {
    const graph_node *n = nn_node(x, t);
    int64_t B = n->shape[0], S = n->shape[1];
    int r = graph_reshape(x->g, t, 4, (int64_t[]){B, S, H, hd});
    return graph_permute(x->g, r, (int[]){0, 2, 1, 3});
}

// (B, H, S, hd) * cos + rotate_half(.) * sin, tables (S, hd)
static int rotary(nn_ctx *x, int t, int cos_t, int sin_t) {
    const graph_node *n = nn_node(x, t);
    int64_t hd = n->shape[3], half = hd / 2;
    int lo = graph_slice(x->g, t, 3, 0, half);
    int hi = graph_slice(x->g, t, 3, half, half);
    int nhi = graph_unary(x->g, OP_NEG, hi);
    int64_t ia[GRAPH_MAX_IA] = {3};
    if (lo < 0 || nhi < 0)
        return -1;
    int rot = graph_op(x->g, OP_CONCAT, 2, (int[]){nhi, lo}, ia, NULL);
    int a = graph_binary(x->g, OP_MUL, t, cos_t);
    int b = graph_binary(x->g, OP_MUL, rot, sin_t);
    return graph_binary(x->g, OP_ADD, a, b);
}

// (B, KVH, S, hd) -> (B, H, S, hd) by repeating each kv head H/KVH times
static int repeat_kv(nn_ctx *x, int t, int64_t H) {
    const graph_node *n = nn_node(x, t);
    int64_t B = n->shape[0], KVH = n->shape[1], S = n->shape[2], hd = n->shape[3];
    if (KVH == H)
        return t;
    int r = graph_reshape(x->g, t, 5, (int64_t[]){B, KVH, 1, S, hd});
    if (r < 0)
        return -1;
    int e = graph_op_shaped(x->g, OP_EXPAND, 1, &r, NULL, NULL, 5,
                            (int64_t[]){B, KVH, H / KVH, S, hd});
    return graph_reshape(x->g, e, 4, (int64_t[]){B, H, S, hd});
}

// The attention proper: q (B, H, T, hd), k and v (B, KVH, S, hd) ->
// (B, H, T, hd). The math form eager frameworks run without a fused kernel:
// repeat_kv, a batched GEMM against a transposed view of k, scale, causal
// mask by where, softmax, a GEMM with v. With fused_attention (--attention
// sdpa) one ATTENTION node, as torch's scaled_dot_product_attention.
static int attend(nn_ctx *x, int q, int k, int v, bool causal) {
    int64_t H = nn_node(x, q)->shape[1], T = nn_node(x, q)->shape[2];
    int64_t S = nn_node(x, k)->shape[2], hd = nn_node(x, q)->shape[3];
    if (x->c->fused_attention)
        return graph_op(x->g, OP_ATTENTION, 3, (int[]){q, k, v}, (int64_t[GRAPH_MAX_IA]){causal},
                        (double[GRAPH_MAX_FA]){1.0 / sqrt((double)hd)});
    k = repeat_kv(x, k, H);
    v = repeat_kv(x, v, H);
    int kt = graph_permute(x->g, k, (int[]){0, 1, 3, 2}); // (B, H, hd, S) view
    int scores = graph_binary(x->g, OP_MATMUL, q, kt);    // (B, H, T, S)
    scores = graph_scale(x->g, scores, 1.0 / sqrt((double)hd), 0);
    if (nn_check(x, scores) < 0)
        return -1;
    if (causal) {
        char name[64];
        snprintf(name, sizeof name, "causal_mask.%lldx%lld", (long long)T, (long long)S);
        int mask = nn_shared_buffer(x, name, DT_BOOL, 2, (int64_t[]){T, S}, INIT_CAUSAL_MASK, 0);
        if (mask < 0)
            return -1;
        int low = graph_full(x->g, -FLT_MAX, DT_F32, 0, NULL); // as HF: finfo.min
        scores = graph_op(x->g, OP_WHERE, 3, (int[]){mask, scores, low}, NULL, NULL);
    }
    int p = graph_unary(x->g, OP_SOFTMAX, scores);
    return graph_binary(x->g, OP_MATMUL, p, v); // (B, H, T, hd)
}

int nn_attention(nn_ctx *x) {
    int q_in = nn_in(x, 0), kv_in = x->c->ninputs > 1 ? nn_in(x, 1) : q_in;
    const graph_node *qn = nn_node(x, q_in), *kn = nn_node(x, kv_in);
    if (qn->ndim != 3 || kn->ndim != 3)
        return nn_fail(x, NULL, "attention needs (B, T, D) inputs");
    int64_t B = qn->shape[0], T = qn->shape[1], D = qn->shape[2], S = kn->shape[1];
    if (kn->shape[0] != B)
        return nn_fail(x, NULL, "attention: query batch %lld and key batch %lld differ",
                       (long long)B, (long long)kn->shape[0]);
    int64_t H = nn_int(x, "heads", 1), KVH = nn_int(x, "kv_heads", H);
    if (H <= 0)
        return nn_fail(x, "heads", "attention: heads must be positive");
    if (KVH <= 0 || H % KVH)
        return nn_fail(x, "kv_heads", "attention: %lld heads do not group into %lld kv heads",
                       (long long)H, (long long)KVH);
    if (!nn_has(x, "head_dim") && D % H)
        return nn_fail(x, "heads", "attention: width %lld does not split into %lld heads",
                       (long long)D, (long long)H);
    int64_t hd = nn_int(x, "head_dim", D / H);
    if (hd <= 0)
        return nn_fail(x, "head_dim", "attention: head_dim must be positive");
    bool causal = nn_bool(x, "causal", false), rope = nn_bool(x, "rotary", false);
    bool bias = nn_bool(x, "bias", true);
    if (rope && hd % 2)
        return nn_fail(x, "rotary", "attention: rotary needs an even head_dim, got %lld",
                       (long long)hd);

    int q = nn_linear_to(x, q_in, H * hd, bias, "q");
    int k = q < 0 ? -1 : nn_linear_to(x, kv_in, KVH * hd, bias, "k");
    int v = k < 0 ? -1 : nn_linear_to(x, kv_in, KVH * hd, bias, "v");
    if (v < 0)
        return -1;
    q = split_heads(x, q, H, hd);   // (B, H, T, hd)
    k = split_heads(x, k, KVH, hd); // (B, KVH, S, hd)
    v = split_heads(x, v, KVH, hd);
    if (nn_check(x, q) < 0 || nn_check(x, k) < 0 || nn_check(x, v) < 0)
        return -1;
    if (rope) {
        char name[64];
        int64_t L = T > S ? T : S;
        double theta = nn_float(x, "rope_theta", 10000.0);
        snprintf(name, sizeof name, "rope_cos.%lldx%lld", (long long)L, (long long)hd);
        int c = nn_shared_buffer(x, name, DT_F32, 2, (int64_t[]){L, hd}, INIT_ROPE_COS, theta);
        snprintf(name, sizeof name, "rope_sin.%lldx%lld", (long long)L, (long long)hd);
        int s = nn_shared_buffer(x, name, DT_F32, 2, (int64_t[]){L, hd}, INIT_ROPE_SIN, theta);
        if (c < 0 || s < 0)
            return -1;
        int cq = T == L ? c : graph_slice(x->g, c, 0, L - T, T);
        int sq = T == L ? s : graph_slice(x->g, s, 0, L - T, T);
        int ck = S == L ? c : graph_slice(x->g, c, 0, L - S, S);
        int sk = S == L ? s : graph_slice(x->g, s, 0, L - S, S);
        q = nn_check(x, rotary(x, q, cq, sq));
        k = q < 0 ? -1 : nn_check(x, rotary(x, k, ck, sk));
        if (k < 0)
            return -1;
    }
    int o = attend(x, q, k, v, causal);
    o = graph_permute(x->g, o, (int[]){0, 2, 1, 3});          // (B, T, H, hd) view
    o = graph_reshape(x->g, o, 3, (int64_t[]){B, T, H * hd}); // a copy
    if (nn_check(x, o) < 0)
        return -1;
    return nn_emit(x, nn_linear_to(x, o, D, bias, "o"));
}
