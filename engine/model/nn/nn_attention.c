// Multi-head attention as the Hugging Face eager modules run it: separate
// q/k/v projections, heads split by reshape + permute (views), scores by
// batched GEMM against a transposed view of k, scale, causal mask by where,
// softmax, GEMM with v, heads merged (a copy), output projection. Grouped
// and multi-query attention (kv_heads < heads) repeat k and v per query
// group, as HF's repeat_kv does. Rotary embeddings apply q*cos +
// rotate_half(q)*sin with shared cos/sin tables.
//
// ChatGLM's variants: q, k and v from one fused linear (fused_qkv, sliced
// as views; qkv_per_head for ChatGLM-6B's per-head [q|k|v] rows), separate
// q/k/v and output biases, rotary on the first rotary_dims of each head with
// the rest passed through, interleaved pairs (2i, 2i+1) as ChatGLM2, and
// GLM's 2-D positions (rotary_2d: the first half of each head by position,
// the second by block position).
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

// Rotary settings: the first `dims` of each head are rotated; pairs are
// (i, i + dims/2) (rotate_half) or (2i, 2i+1) when interleaved; two_d
// rotates each half of the head (dims = hd/2 each) by its own tables.
typedef struct rope_spec {
    int64_t dims;
    bool interleaved, two_d;
} rope_spec;

// Reads rotary_dims, rotary_interleaved and rotary_2d; -1 with the error at
// the key that is wrong.
static int rope_spec_read(nn_ctx *x, bool rope, int64_t hd, rope_spec *rs) {
    static const char *const keys[] = {"rotary_dims", "rotary_interleaved", "rotary_2d"};
    for (int i = 0; i < 3; i++)
        if (!rope && nn_has(x, keys[i]))
            return nn_fail(x, keys[i], "attention: %s needs rotary: true", keys[i]);
    rs->interleaved = nn_bool(x, "rotary_interleaved", false);
    rs->two_d = nn_bool(x, "rotary_2d", false);
    rs->dims = nn_int(x, "rotary_dims", rs->two_d ? hd / 2 : hd);
    if (rs->two_d && nn_has(x, "rotary_dims"))
        return nn_fail(x, "rotary_dims",
                       "attention: rotary_2d rotates each half of a head; drop rotary_dims");
    if (rs->two_d && hd % 4)
        return nn_fail(x, "rotary_2d",
                       "attention: rotary_2d needs head_dim divisible by 4, got %lld",
                       (long long)hd);
    if (rs->dims <= 0 || rs->dims % 2 || rs->dims > hd)
        return nn_fail(x, "rotary_dims",
                       "attention: rotary_dims must be even and in [2, head_dim %lld], got %lld",
                       (long long)hd, (long long)rs->dims);
    return 0;
}

// (B, H, T, d) rotated by pairs (2i, 2i+1), as ChatGLM2: x0*c - x1*s and
// x1*c + x0*s, with c, s (T, d) in rotate_half's layout (angle i at i and
// i + d/2), whose first half is taken.
static int rotary_pairs(nn_ctx *x, int t, int cos_t, int sin_t) {
    const graph_node *n = nn_node(x, t);
    int64_t B = n->shape[0], H = n->shape[1], T = n->shape[2], d = n->shape[3];
    int64_t pair[5] = {B, H, T, d / 2, 2};
    int p = graph_reshape(x->g, t, 5, pair);
    int x0 = graph_slice(x->g, p, 4, 0, 1), x1 = graph_slice(x->g, p, 4, 1, 1);
    int c = graph_slice(x->g, cos_t, 1, 0, d / 2), s = graph_slice(x->g, sin_t, 1, 0, d / 2);
    c = graph_reshape(x->g, c, 3, (int64_t[]){nn_node(x, cos_t)->shape[0], d / 2, 1});
    s = graph_reshape(x->g, s, 3, (int64_t[]){nn_node(x, sin_t)->shape[0], d / 2, 1});
    if (nn_check(x, x0) < 0 || nn_check(x, x1) < 0 || nn_check(x, c) < 0 || nn_check(x, s) < 0)
        return -1;
    int a0 = graph_binary(x->g, OP_SUB, graph_binary(x->g, OP_MUL, x0, c),
                          graph_binary(x->g, OP_MUL, x1, s));
    int a1 = graph_binary(x->g, OP_ADD, graph_binary(x->g, OP_MUL, x1, c),
                          graph_binary(x->g, OP_MUL, x0, s));
    int64_t ia[GRAPH_MAX_IA] = {4};
    int o = graph_op(x->g, OP_CONCAT, 2, (int[]){a0, a1}, ia, NULL);
    return graph_reshape(x->g, o, 4, (int64_t[]){B, H, T, d});
}

static int rotate_part(nn_ctx *x, int t, int64_t start, int64_t len, bool inter, int c, int s) {
    int part = graph_slice(x->g, t, 3, start, len);
    if (nn_check(x, part) < 0)
        return -1;
    return nn_check(x, inter ? rotary_pairs(x, part, c, s) : rotary(x, part, c, s));
}

// t (B, H, T, hd) with its tables: c, s (T, dims) by position, and for
// rotary_2d c2, s2 (T or 1, dims) by block position. The dims past
// rs->dims pass through unrotated.
static int rope_apply(nn_ctx *x, int t, const rope_spec *rs, int c, int s, int c2, int s2) {
    int64_t hd = nn_node(x, t)->shape[3];
    int64_t ia[GRAPH_MAX_IA] = {3};
    if (!rs->two_d && rs->dims == hd)
        return nn_check(x, rs->interleaved ? rotary_pairs(x, t, c, s) : rotary(x, t, c, s));
    int a = rotate_part(x, t, 0, rs->dims, rs->interleaved, c, s);
    int b = rs->two_d ? rotate_part(x, t, rs->dims, rs->dims, rs->interleaved, c2, s2)
                      : nn_check(x, graph_slice(x->g, t, 3, rs->dims, hd - rs->dims));
    if (a < 0 || b < 0)
        return -1;
    return nn_check(x, graph_op(x->g, OP_CONCAT, 2, (int[]){a, b}, ia, NULL));
}

// The fused linear with BEiT's biases: q_bias and v_bias (H hd) parameters
// and no k bias, cat(q_bias, zeros, v_bias) made every step as timm's
// forward does (a zero buffer, one concat) and given to the one GEMM.
static int linear_qv_bias(nn_ctx *x, int in, int64_t H, int64_t hd) {
    int64_t D = H * hd, K = nn_node(x, in)->shape[nn_node(x, in)->ndim - 1];
    double bound = 1.0 / sqrt((double)K);
    int w = nn_param(x, "qkv.weight", 2, (int64_t[]){3 * D, K}, INIT_UNIFORM, bound);
    int qb = w < 0 ? -1 : nn_param(x, "q_bias", 1, &D, INIT_ZEROS, 0);
    int vb = qb < 0 ? -1 : nn_param(x, "v_bias", 1, &D, INIT_ZEROS, 0);
    char name[64];
    snprintf(name, sizeof name, "zeros.%lld", (long long)D);
    int kb = vb < 0 ? -1 : nn_shared_buffer(x, name, DT_F32, 1, &D, INIT_ZEROS, 0);
    if (kb < 0)
        return -1;
    int b = graph_op(x->g, OP_CONCAT, 3, (int[]){qb, kb, vb}, (int64_t[GRAPH_MAX_IA]){0}, NULL);
    return nn_check(x, graph_op(x->g, OP_LINEAR, 3, (int[]){in, w, b}, NULL, NULL));
}

// q (B, T, H*hd), k and v (B, S, KVH*hd) into out[3]: three linears, or one
// fused linear to (H + 2 KVH) * hd sliced into views. qkv_per_head lays the
// fused rows out per head as [q_h | k_h | v_h] (ChatGLM-6B), else as
// [q | k | v] (ChatGLM2, GPT-2's c_attn); per head, out[] are already
// (B, H, T, hd).
static int project_qkv(nn_ctx *x, int q_in, int kv_in, int v_in, int64_t H, int64_t KVH, int64_t hd,
                       bool bias, int out[3], bool *split) {
    bool fused = nn_bool(x, "fused_qkv", false), per_head = nn_bool(x, "qkv_per_head", false);
    *split = false;
    if (!fused) {
        if (nn_has(x, "k_bias"))
            return nn_fail(x, "k_bias", "attention: k_bias needs fused_qkv: true");
        if (per_head)
            return nn_fail(x, "qkv_per_head", "attention: qkv_per_head needs fused_qkv: true");
        out[0] = nn_linear_to(x, q_in, H * hd, bias, "q");
        out[1] = out[0] < 0 ? -1 : nn_linear_to(x, kv_in, KVH * hd, bias, "k");
        out[2] = out[1] < 0 ? -1 : nn_linear_to(x, v_in, KVH * hd, bias, "v");
        return out[2] < 0 ? -1 : 0;
    }
    if (x->c->ninputs == 2 || kv_in != q_in) // a third input, the score bias, may follow [., .]
        return nn_fail(x, "fused_qkv", "attention: fused_qkv needs self-attention (one input)");
    if (per_head && KVH != H)
        return nn_fail(x, "qkv_per_head", "attention: qkv_per_head needs kv_heads equal to heads");
    bool kb = nn_bool(x, "k_bias", true);
    if (!kb && (!bias || per_head || KVH != H))
        return nn_fail(x, "k_bias",
                       "attention: k_bias: false is BEiT's q and v biases: it needs qkv biases, "
                       "kv_heads equal to heads and no qkv_per_head");
    int qkv = kb ? nn_linear_to(x, q_in, (H + 2 * KVH) * hd, bias, "qkv") // (B, T, (H+2KVH) hd)
                 : linear_qv_bias(x, q_in, H, hd);
    if (qkv < 0)
        return -1;
    if (per_head) {
        const graph_node *n = nn_node(x, qkv);
        int r = graph_reshape(x->g, qkv, 4, (int64_t[]){n->shape[0], n->shape[1], H, 3 * hd});
        for (int i = 0; i < 3; i++) { // (B, T, H, hd) -> (B, H, T, hd), views
            out[i] = graph_permute(x->g, graph_slice(x->g, r, 3, i * hd, hd), (int[]){0, 2, 1, 3});
            if (nn_check(x, out[i]) < 0)
                return -1;
        }
        *split = true;
        return 0;
    }
    int64_t start[3] = {0, H * hd, (H + KVH) * hd}, len[3] = {H * hd, KVH * hd, KVH * hd};
    for (int i = 0; i < 3; i++)
        if ((out[i] = nn_check(x, graph_slice(x->g, qkv, 2, start[i], len[i]))) < 0)
            return -1;
    return 0;
}

// Which keys a query sees, as a shared bool (T, S) buffer: the causal mask,
// or with a window the last `window` positions (causal, GPT-Neo's local
// layers) or a band of window / 2 either side (Longformer's sliding
// window; tcbench scores every key and masks, where Longformer's kernel
// computes only the band's chunks).
static int visible_mask(nn_ctx *x, int64_t T, int64_t S, bool causal, int64_t window) {
    char name[96];
    if (!window) {
        snprintf(name, sizeof name, "causal_mask.%lldx%lld", (long long)T, (long long)S);
        return nn_shared_buffer(x, name, DT_BOOL, 2, (int64_t[]){T, S}, INIT_CAUSAL_MASK, 0);
    }
    snprintf(name, sizeof name, "%s_mask.%lldx%lld.%lld", causal ? "window" : "band", (long long)T,
             (long long)S, (long long)window);
    return nn_shared_buffer(x, name, DT_BOOL, 2, (int64_t[]){T, S},
                            causal ? INIT_WINDOW_MASK : INIT_BAND_MASK,
                            (double)(causal ? window : window / 2));
}

// The attention proper: q (B, H, T, hd), k and v (B, KVH, S, hd) ->
// (B, H, T, hd). The math form eager frameworks run without a fused kernel:
// repeat_kv, a batched GEMM against a transposed view of k, scale, the mask
// (visible_mask) by where, softmax, a GEMM with v; a score bias (the third
// input, broadcast to (B, H, T, S); -1 for none) is added after the scale,
// one kernel, as T5's scores += position_bias. With fused_attention
// (--attention sdpa) one ATTENTION node, as torch's
// scaled_dot_product_attention: causal by its flag, the score bias and a
// window (0 where visible, the lowest float elsewhere) as its float bias
// source, as sdpa's attn_mask.
static int attend(nn_ctx *x, int q, int k, int v, int bias, bool causal, int64_t window,
                  double scale) {
    int64_t H = nn_node(x, q)->shape[1], T = nn_node(x, q)->shape[2];
    int64_t S = nn_node(x, k)->shape[2];
    if (x->c->fused_attention && !window)
        return graph_op(x->g, OP_ATTENTION, bias < 0 ? 3 : 4, (int[]){q, k, v, bias},
                        (int64_t[GRAPH_MAX_IA]){causal, bias < 0 ? 0 : 3},
                        (double[GRAPH_MAX_FA]){scale});
    int mask = -1, low = -1;
    if (causal || window) {
        mask = visible_mask(x, T, S, causal, window);
        low = mask < 0 ? -1 : graph_full(x->g, -FLT_MAX, DT_F32, 0, NULL); // as HF: finfo.min
        if (nn_check(x, low) < 0)
            return -1;
    }
    if (x->c->fused_attention) {
        int zero = graph_full(x->g, 0, DT_F32, 0, NULL);
        int wb = graph_op(x->g, OP_WHERE, 3, (int[]){mask, zero, low}, NULL, NULL); // (T, S)
        if (nn_check(x, wb) < 0)
            return -1;
        if (bias >= 0 && nn_check(x, wb = graph_binary(x->g, OP_ADD, bias, wb)) < 0)
            return -1;
        return graph_op(x->g, OP_ATTENTION, 4, (int[]){q, k, v, wb},
                        (int64_t[GRAPH_MAX_IA]){0, 3}, (double[GRAPH_MAX_FA]){scale});
    }
    k = repeat_kv(x, k, H);
    v = repeat_kv(x, v, H);
    int kt = graph_permute(x->g, k, (int[]){0, 1, 3, 2}); // (B, H, hd, S) view
    int scores = graph_binary(x->g, OP_MATMUL, q, kt);    // (B, H, T, S)
    if (scale != 1.0) // GPT-Neo and T5 do not scale: no kernel, as in their eager
        scores = graph_scale(x->g, scores, scale, 0);
    if (bias >= 0)
        scores = graph_binary(x->g, OP_ADD, scores, bias);
    if (nn_check(x, scores) < 0)
        return -1;
    if (mask >= 0)
        scores = graph_op(x->g, OP_WHERE, 3, (int[]){mask, scores, low}, NULL, NULL);
    int p = graph_unary(x->g, OP_SOFTMAX, scores);
    return graph_binary(x->g, OP_MATMUL, p, v); // (B, H, T, hd)
}

// A generation step's attention (nn.h): the layer's keys and values kept
// across steps. CONCAT, as Hugging Face's eager models: the past ones are
// inputs, concatenated with the new into fresh tensors (the step's
// outputs), then the same unfused attention. STATIC, as gpt-fast: a buffer
// of max_len rows a layer, written in place at cache_pos, read by one fused
// attention over its first kv_len rows.
static int cached_attention(nn_ctx *x, int q, int k, int v, bool causal, double scale) {
    nn_gen *gen = x->c->gen;
    if (gen->nlayers >= NN_GEN_MAX_LAYERS)
        return nn_fail(x, NULL, "generation: more than %d attention layers", NN_GEN_MAX_LAYERS);
    int i = gen->nlayers++;
    const graph_node *kn = nn_node(x, k);
    int64_t B = kn->shape[0], KVH = kn->shape[1], hd = kn->shape[3];
    gen->kv_bytes_per_token += 2 * KVH * hd * (int64_t)dtype_size(gen->kv_dtype);
    char kname[160], vname[160];
    if (gen->kv == NN_KV_CONCAT) {
        gen->past_k[i] = gen->past_v[i] = -1;
        if (gen->past > 0) {
            int64_t shape[4] = {B, KVH, gen->past, hd}, ia[GRAPH_MAX_IA] = {2};
            nn_pname(x, "past_k", kname, sizeof kname);
            nn_pname(x, "past_v", vname, sizeof vname);
            int pk = graph_input(x->g, kname, DT_F32, 4, shape);
            int pv = pk < 0 ? -1 : graph_input(x->g, vname, DT_F32, 4, shape);
            if (nn_check(x, pv) < 0)
                return -1;
            gen->past_k[i] = pk, gen->past_v[i] = pv;
            k = nn_check(x, graph_op(x->g, OP_CONCAT, 2, (int[]){pk, k}, ia, NULL));
            v = k < 0 ? -1 : nn_check(x, graph_op(x->g, OP_CONCAT, 2, (int[]){pv, v}, ia, NULL));
            if (v < 0)
                return -1;
        }
        gen->present_k[i] = k, gen->present_v[i] = v;
        return attend(x, q, k, v, -1, causal, 0, scale);
    }
    int64_t shape[4] = {B, KVH, gen->max_len, hd};
    nn_pname(x, "k_cache", kname, sizeof kname);
    nn_pname(x, "v_cache", vname, sizeof vname);
    int kc = graph_buffer(x->g, kname, DT_F32, 4, shape, INIT_ZEROS, 0);
    int vc = kc < 0 ? -1 : graph_buffer(x->g, vname, DT_F32, 4, shape, INIT_ZEROS, 0);
    int kw = vc < 0 ? -1 : graph_op(x->g, OP_KV_WRITE, 3, (int[]){kc, k, gen->cache_pos}, NULL, NULL);
    int vw = kw < 0 ? -1 : graph_op(x->g, OP_KV_WRITE, 3, (int[]){vc, v, gen->cache_pos}, NULL, NULL);
    if (nn_check(x, vw) < 0)
        return -1;
    gen->present_k[i] = kw, gen->present_v[i] = vw;
    // over the cache's first kv_len rows: the prefill's causal block, or one
    // query that sees every row written so far
    int64_t ia[GRAPH_MAX_IA] = {causal, 0, 3};
    double fa[GRAPH_MAX_FA] = {scale};
    return nn_check(x, graph_op(x->g, OP_ATTENTION, 4, (int[]){q, kw, vw, gen->kv_len}, ia, fa));
}

// The window key: 0 (every key, or the causal ones), with causal the last
// `window` positions, without a band of window / 2 either side. A window
// that covers every key is none (the same mask). -1 with the error at the key.
static int attention_window(nn_ctx *x, bool causal, int64_t S, int64_t *window) {
    int64_t w = nn_int(x, "window", 0);
    if (w < 0)
        return nn_fail(x, "window", "attention: window must be 0 (no window) or positive, got %lld",
                       (long long)w);
    if (w && !causal && w % 2)
        return nn_fail(x, "window",
                       "attention: a window without causal is a band of window / 2 either side, "
                       "so it must be even, got %lld",
                       (long long)w);
    if (w && x->c->gen)
        return nn_fail(x, "window", "attention: generation keeps no cache for a window yet");
    *window = (causal ? w >= S : w / 2 >= S - 1) ? 0 : w;
    return 0;
}

// The third input of attention, the additive score bias: (b, h, t, s), each
// 1 or the scores' (B, H, T, S). Generation caches no bias (its positions
// move with each step), so it refuses one.
static int score_bias(nn_ctx *x, int b, int64_t B, int64_t H, int64_t T, int64_t S) {
    const graph_node *n = nn_node(x, b);
    int64_t want[4] = {B, H, T, S};
    bool ok = n->ndim == 4 && dtype_is_float(n->dtype);
    for (int i = 0; ok && i < 4; i++)
        ok = n->shape[i] == 1 || n->shape[i] == want[i];
    if (!ok)
        return nn_fail(x, NULL,
                       "attention: the score bias (third input) must be a float tensor "
                       "broadcastable to (B %lld, H %lld, T %lld, S %lld)",
                       (long long)B, (long long)H, (long long)T, (long long)S);
    if (x->c->gen)
        return nn_fail(x, NULL, "generation caches no attention score bias");
    return b;
}

int nn_attention(nn_ctx *x) {
    // queries from input 0, keys from input 1 (or 0), values from the keys'
    // input, or with separate_values from input 2 (MobileBERT projects keys
    // and queries from its shared bottleneck and values from the block's
    // wide input); then the score bias, if any (T5)
    bool sep = nn_bool(x, "separate_values", false);
    int bias_at = sep ? 3 : 2;
    if (sep && x->c->ninputs < 3)
        return nn_fail(x, "separate_values",
                       "attention: separate_values takes the values from a third input "
                       "(input: [queries, keys, values])");
    int q_in = nn_in(x, 0), kv_in = x->c->ninputs > 1 ? nn_in(x, 1) : q_in;
    int v_in = sep ? nn_in(x, 2) : kv_in;
    const graph_node *qn = nn_node(x, q_in), *kn = nn_node(x, kv_in), *vn = nn_node(x, v_in);
    if (qn->ndim != 3 || kn->ndim != 3 || vn->ndim != 3)
        return nn_fail(x, NULL, "attention needs (B, T, D) inputs");
    int64_t B = qn->shape[0], T = qn->shape[1], D = qn->shape[2], S = kn->shape[1];
    if (kn->shape[0] != B || vn->shape[0] != B)
        return nn_fail(x, NULL, "attention: query batch %lld and key or value batch %lld differ",
                       (long long)B, (long long)(kn->shape[0] != B ? kn : vn)->shape[0]);
    if (vn->shape[1] != S)
        return nn_fail(x, NULL, "attention: %lld keys but %lld values", (long long)S,
                       (long long)vn->shape[1]);
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
    bool qkv_bias = nn_bool(x, "qkv_bias", bias), out_bias = nn_bool(x, "out_bias", bias);
    if (rope && hd % 2)
        return nn_fail(x, "rotary", "attention: rotary needs an even head_dim, got %lld",
                       (long long)hd);
    nn_gen *gen = x->c->gen;
    if (gen && (kv_in != q_in || v_in != q_in))
        return nn_fail(x, NULL, "generation keeps a cache of self-attention only, not of "
                                "attention over a second input");
    int sbias = x->c->ninputs > bias_at ? score_bias(x, nn_in(x, bias_at), B, H, T, S) : -1;
    if (x->c->ninputs > bias_at && sbias < 0)
        return -1;
    rope_spec rs;
    if (rope_spec_read(x, rope, hd, &rs) < 0)
        return -1;

    int qkv[3] = {-1, -1, -1};
    bool split;
    if (project_qkv(x, q_in, kv_in, v_in, H, KVH, hd, qkv_bias, qkv, &split) < 0)
        return -1;
    int q = split ? qkv[0] : split_heads(x, qkv[0], H, hd);   // (B, H, T, hd)
    int k = split ? qkv[1] : split_heads(x, qkv[1], KVH, hd); // (B, KVH, S, hd)
    int v = split ? qkv[2] : split_heads(x, qkv[2], KVH, hd);
    if (nn_check(x, q) < 0 || nn_check(x, k) < 0 || nn_check(x, v) < 0)
        return -1;
    if (rope) {
        char name[64];
        int64_t L = gen ? gen->max_len : T > S ? T : S;
        double theta = nn_float(x, "rope_theta", 10000.0);
        snprintf(name, sizeof name, "rope_cos.%lldx%lld", (long long)L, (long long)rs.dims);
        int64_t tab[2] = {L, rs.dims};
        int c = nn_shared_buffer(x, name, DT_F32, 2, tab, INIT_ROPE_COS, theta);
        snprintf(name, sizeof name, "rope_sin.%lldx%lld", (long long)L, (long long)rs.dims);
        int s = nn_shared_buffer(x, name, DT_F32, 2, tab, INIT_ROPE_SIN, theta);
        if (c < 0 || s < 0)
            return -1;
        int cq, sq, ck, sk;
        if (gen) { // the step's tokens at their positions: table rows gathered
            int ids = gen->position_ids;
            cq = ck = graph_op(x->g, OP_EMBEDDING, 2, (int[]){c, ids}, NULL, NULL);
            sq = sk = graph_op(x->g, OP_EMBEDDING, 2, (int[]){s, ids}, NULL, NULL);
        } else {
            cq = T == L ? c : graph_slice(x->g, c, 0, L - T, T);
            sq = T == L ? s : graph_slice(x->g, s, 0, L - T, T);
            ck = S == L ? c : graph_slice(x->g, c, 0, L - S, S);
            sk = S == L ? s : graph_slice(x->g, s, 0, L - S, S);
        }
        // block positions are 0 in a plain forward (GLM's context tokens);
        // a generation step keeps them 0 too (the decode treats every token
        // as context: the same work as GLM's block positions)
        int c0 = rs.two_d ? graph_slice(x->g, c, 0, 0, 1) : -1;
        int s0 = rs.two_d ? graph_slice(x->g, s, 0, 0, 1) : -1;
        q = rope_apply(x, q, &rs, cq, sq, c0, s0);
        k = q < 0 ? -1 : rope_apply(x, k, &rs, ck, sk, c0, s0);
        if (k < 0)
            return -1;
    }
    int64_t window = 0;
    if (attention_window(x, causal, S, &window) < 0)
        return -1;
    double scale = nn_float(x, "scale", 1.0 / sqrt((double)hd));
    if (!(scale > 0) || !isfinite(scale))
        return nn_fail(x, "scale", "attention: scale must be a positive number, got %g", scale);
    int o = gen ? cached_attention(x, q, k, v, causal, scale)
                : attend(x, q, k, v, sbias, causal, window, scale);
    if (o < 0)
        return -1;
    o = graph_permute(x->g, o, (int[]){0, 2, 1, 3});          // (B, T, H, hd) view
    o = graph_reshape(x->g, o, 3, (int64_t[]){B, T, H * hd}); // a copy
    if (nn_check(x, o) < 0)
        return -1;
    return nn_emit(x, nn_linear_to(x, o, D, out_bias, "o"));
}

// ConvBERT's mixed attention (conv-bert-base's ConvBertSelfAttention):
// (B, T, D) -> (B, T, 2 H hd), H self-attention heads of hd beside H
// span-based dynamic convolution heads of hd. As the class runs it:
//   q, k, v = linears of x to A = H hd; attention over them (no output
//   projection: the block's own dense follows);
//   kc = a separable convolution over time of x (depthwise, kernel K, no
//   bias; pointwise to A, no bias; then + a bias (A, 1));
//   kernels = softmax over K of linear(kc * q) to H K;
//   values = linear(x) to A, unfolded: for each t the K rows t - K/2 ..
//   t + K/2 (zeros past the ends), one kernel (im2col), here a grouped
//   convolution with one-hot taps (a constant buffer), as unfold is;
//   conv_out = per head, values (hd, K) @ kernels (K, 1);
//   out = [attention heads | conv heads].
int nn_convbert_attention(nn_ctx *x) {
    int in = nn_in(x, 0);
    const graph_node *n = nn_node(x, in);
    if (n->ndim != 3)
        return nn_fail(x, NULL, "convbert_attention needs (B, T, D) input");
    int64_t B = n->shape[0], T = n->shape[1], D = n->shape[2];
    int64_t H = nn_int(x, "heads", 1), K = nn_int(x, "kernel", 9);
    if (H <= 0)
        return nn_fail(x, "heads", "convbert_attention: heads must be positive");
    if (K <= 0 || K % 2 == 0)
        return nn_fail(x, "kernel", "convbert_attention: kernel must be odd and positive, got %lld",
                       (long long)K);
    if (!nn_has(x, "head_dim") && D % (2 * H))
        return nn_fail(x, "heads", "convbert_attention: width %lld does not split into 2 x %lld heads",
                       (long long)D, (long long)H);
    int64_t hd = nn_int(x, "head_dim", D / H / 2), A = H * hd, P = (K - 1) / 2;
    if (hd <= 0)
        return nn_fail(x, "head_dim", "convbert_attention: head_dim must be positive");
    graph *g = x->g;
    int q = nn_linear_to(x, in, A, true, "query");
    int k = q < 0 ? -1 : nn_linear_to(x, in, A, true, "key");
    int v = k < 0 ? -1 : nn_linear_to(x, in, A, true, "value");
    if (v < 0)
        return -1;
    // the separable convolution over time, on (B, D, T, 1) as conv1d is run
    int xt = graph_reshape(g, graph_permute(g, in, (int[]){0, 2, 1}), 4, (int64_t[]){B, D, T, 1});
    int dw = nn_param(x, "key_conv.depthwise.weight", 4, (int64_t[]){D, 1, K, 1}, INIT_NORMAL, 0.02);
    int pw = nn_param(x, "key_conv.pointwise.weight", 4, (int64_t[]){A, D, 1, 1}, INIT_NORMAL, 0.02);
    int pb = nn_param(x, "key_conv.bias", 2, (int64_t[]){A, 1}, INIT_ZEROS, 0);
    if (nn_check(x, xt) < 0 || dw < 0 || pw < 0 || pb < 0)
        return -1;
    int c = graph_op(g, OP_CONV2D, 2, (int[]){xt, dw}, (int64_t[GRAPH_MAX_IA]){1, 1, P, 0, 1, 1, D},
                     NULL);
    c = nn_check(x, c) < 0 ? -1
                           : graph_op(g, OP_CONV2D, 2, (int[]){c, pw},
                                      (int64_t[GRAPH_MAX_IA]){1, 1, 0, 0, 1, 1, 1}, NULL);
    c = nn_check(x, c) < 0 ? -1 : graph_reshape(g, c, 3, (int64_t[]){B, A, T});
    c = nn_check(x, c) < 0 ? -1 : graph_binary(g, OP_ADD, c, pb);
    c = nn_check(x, c) < 0 ? -1 : graph_permute(g, c, (int[]){0, 2, 1}); // (B, T, A) view
    int ca = nn_check(x, c) < 0 ? -1 : graph_binary(g, OP_MUL, c, q);
    if (nn_check(x, ca) < 0)
        return -1;
    int kern = nn_linear_to(x, ca, H * K, true, "conv_kernel");
    kern = kern < 0 ? -1 : graph_reshape(g, kern, 4, (int64_t[]){B, T, H, K});
    kern = nn_check(x, kern) < 0 ? -1 : graph_unary(g, OP_SOFTMAX, kern);
    kern = nn_check(x, kern) < 0 ? -1 : graph_reshape(g, kern, 5, (int64_t[]){B, T, H, K, 1});
    int vals = nn_check(x, kern) < 0 ? -1 : nn_linear_to(x, in, A, true, "conv_out");
    if (vals < 0)
        return -1;
    // unfold: (B, A, T, 1) -> (B, A K, T, 1), channel c's tap j at c K + j
    int vt = graph_reshape(g, graph_permute(g, vals, (int[]){0, 2, 1}), 4, (int64_t[]){B, A, T, 1});
    char name[64];
    snprintf(name, sizeof name, "unfold_taps.%lldx%lld", (long long)A, (long long)K);
    int taps = nn_shared_buffer(x, name, DT_F32, 4, (int64_t[]){A * K, 1, K, 1}, INIT_UNFOLD_TAPS, 0);
    if (nn_check(x, vt) < 0 || taps < 0)
        return -1;
    int u = graph_op(g, OP_CONV2D, 2, (int[]){vt, taps},
                     (int64_t[GRAPH_MAX_IA]){1, 1, P, 0, 1, 1, A}, NULL);
    u = nn_check(x, u) < 0 ? -1 : graph_reshape(g, u, 3, (int64_t[]){B, A * K, T});
    u = nn_check(x, u) < 0 ? -1 : graph_permute(g, u, (int[]){0, 2, 1});
    u = nn_check(x, u) < 0 ? -1 : graph_reshape(g, u, 5, (int64_t[]){B, T, H, hd, K}); // a copy
    int co = nn_check(x, u) < 0 ? -1 : graph_binary(g, OP_MATMUL, u, kern);   // (B, T, H, hd, 1)
    co = nn_check(x, co) < 0 ? -1 : graph_reshape(g, co, 3, (int64_t[]){B, T, A});
    if (nn_check(x, co) < 0)
        return -1;
    // self-attention over q, k, v
    int qh = split_heads(x, q, H, hd), kh = split_heads(x, k, H, hd), vh = split_heads(x, v, H, hd);
    if (nn_check(x, qh) < 0 || nn_check(x, kh) < 0 || nn_check(x, vh) < 0)
        return -1;
    int o = attend(x, qh, kh, vh, -1, false, 0, 1.0 / sqrt((double)hd));
    o = nn_check(x, o) < 0 ? -1 : graph_permute(g, o, (int[]){0, 2, 1, 3});
    o = nn_check(x, o) < 0 ? -1 : graph_reshape(g, o, 3, (int64_t[]){B, T, A});
    if (nn_check(x, o) < 0)
        return -1;
    return nn_emit(x, graph_op(g, OP_CONCAT, 2, (int[]){o, co}, (int64_t[GRAPH_MAX_IA]){2}, NULL));
}

// T5's relative position bias: (B, T, D) queries [, (B, S, D') keys] ->
// (1, H, T, S), the learned weight (buckets, H) gathered at each pair's
// bucket (a constant int table (T, S), model_relative_bucket), as
// T5Attention.compute_bias: an embedding lookup, then views to the scores'
// layout. A stack computes it once and adds it in every layer (`input: [.,
// ., bias]` on attention).
int nn_relative_position_bias(nn_ctx *x) {
    const graph_node *qn = nn_node(x, nn_in(x, 0));
    const graph_node *kn = nn_node(x, nn_in(x, x->c->ninputs - 1));
    if (qn->ndim != 3 || kn->ndim != 3)
        return nn_fail(x, NULL, "relative_position_bias needs (B, T, D) inputs");
    int64_t T = qn->shape[1], S = kn->shape[1], D = qn->shape[2];
    int64_t nb = nn_int(x, "buckets", 0), md = nn_int(x, "max_distance", 0);
    int64_t H = nn_int(x, "heads", 0);
    bool bi = nn_bool(x, "bidirectional", true);
    if (H <= 0)
        return nn_fail(x, "heads", "relative_position_bias: heads must be positive");
    // the exact half of the (per-direction) buckets must leave room for the
    // log-spaced ones, and those must reach past the exact ones
    int64_t half = bi ? nb / 2 : nb;
    if (half < 4 || (bi && nb % 2))
        return nn_fail(x, "buckets",
                       "relative_position_bias: buckets must be at least %d%s, got %lld",
                       bi ? 8 : 4, bi ? " and even when bidirectional" : "", (long long)nb);
    if (md <= half / 2)
        return nn_fail(x, "max_distance",
                       "relative_position_bias: max_distance must exceed the %lld exact buckets, "
                       "got %lld",
                       (long long)(half / 2), (long long)md);
    char name[96];
    snprintf(name, sizeof name, "relative_bucket.%s%lldx%lld.%lldx%lld", bi ? "bi" : "causal",
             (long long)nb, (long long)md, (long long)T, (long long)S);
    int idx =
        nn_shared_buffer(x, name, DT_I32, 2, (int64_t[]){T, S}, INIT_RELATIVE_BUCKET, (double)md);
    if (idx < 0)
        return -1;
    x->g->nodes[idx].ia[1] = nb;
    x->g->nodes[idx].ia[2] = bi;
    int w = nn_param(x, "weight", 2, (int64_t[]){nb, H}, INIT_NORMAL, 1.0 / sqrt((double)D));
    if (w < 0)
        return -1;
    int e = graph_op(x->g, OP_EMBEDDING, 2, (int[]){w, idx}, NULL, NULL); // (T, S, H)
    int r = nn_check(x, graph_reshape(x->g, e, 4, (int64_t[]){1, T, S, H}));
    return r < 0 ? -1 : nn_emit(x, graph_permute(x->g, r, (int[]){0, 3, 1, 2})); // (1, H, T, S)
}

int nn_levit_attention_bias(nn_ctx *x) {
    // LeViT's attention biases: a learned bias per head and per 2-D offset
    // between a query and a key, `attention_biases[:, attention_bias_idxs]`
    // -> (H, Nq, Nk). Keys on the res x res grid; queries on it, or every
    // stride-th row and column of it (AttentionDownsample). The table is
    // stored (res^2, H), the class's (H, res^2) transposed, for the gather
    // (one embedding lookup over a constant index table, then a view).
    // The input only places the layer.
    int64_t H = nn_int(x, "heads", 0), res = nn_int(x, "resolution", 0);
    int64_t st = nn_int(x, "stride", 1);
    if (H <= 0)
        return nn_fail(x, "heads", "levit_attention_bias: heads must be positive");
    if (res <= 0 || res > 4096)
        return nn_fail(x, "resolution", "levit_attention_bias: resolution must be 1 to 4096");
    if (st <= 0)
        return nn_fail(x, "stride", "levit_attention_bias: stride must be positive");
    int64_t side = (res - 1) / st + 1, Nq = side * side, Nk = res * res;
    char name[96];
    snprintf(name, sizeof name, "levit_offsets.%lld.%lld", (long long)res, (long long)st);
    int idx = nn_shared_buffer(x, name, DT_I32, 2, (int64_t[]){Nq, Nk}, INIT_LEVIT_OFFSET, 0);
    if (idx < 0)
        return -1;
    x->g->nodes[idx].ia[1] = res;
    x->g->nodes[idx].ia[2] = st;
    int w = nn_param(x, "attention_biases", 2, (int64_t[]){Nk, H}, INIT_NORMAL, 0.02);
    if (w < 0)
        return -1;
    int e =
        nn_check(x, graph_op(x->g, OP_EMBEDDING, 2, (int[]){w, idx}, NULL, NULL)); // (Nq, Nk, H)
    return e < 0 ? -1 : nn_emit(x, graph_permute(x->g, e, (int[]){2, 0, 1}));
}

// (B, N, D) -> (B, H, N, hd): a linear's output split into heads
static int heads_of(nn_ctx *x, int t, int64_t B, int64_t N, int64_t H, int64_t hd) {
    int r = graph_reshape(x->g, t, 4, (int64_t[]){B, N, H, hd});
    return r < 0 ? r : graph_permute(x->g, r, (int[]){0, 2, 1, 3});
}

int nn_gpsa(nn_ctx *x) {
    // ConViT's gated positional self-attention, as timm's GPSA, (B, N, D) ->
    // (B, N, D), N the patches of a square grid. Content scores
    // softmax(q k^T / sqrt(hd)) from `qk` (no bias); positional scores
    // softmax over keys of pos_proj(rel_indices) (a linear from [dx, dy,
    // dx^2 + dy^2] to the heads, on the indices expanded over the batch, as
    // the class); mixed per head by g = sigmoid(gating_param):
    // (1 - g) content + g positional, renormalized over the keys (a sum and
    // a division); then times v (`v`, no bias) and `proj`.
    const graph_node *in = nn_node(x, nn_in(x, 0));
    if (in->ndim != 3)
        return nn_fail(x, NULL, "gpsa needs (B, N, D) input");
    int64_t B = in->shape[0], N = in->shape[1], D = in->shape[2], H = nn_int(x, "heads", 0);
    int64_t side = (int64_t)llround(sqrt((double)N));
    if (H <= 0 || D % H)
        return nn_fail(x, "heads", "gpsa: heads must divide the width %lld", (long long)D);
    if (side * side != N)
        return nn_fail(x, NULL, "gpsa: %lld tokens are not a square grid of patches", (long long)N);
    int64_t hd = D / H;
    graph *g = x->g;
    int qk = nn_linear_to(x, nn_in(x, 0), 2 * D, false, "qk");
    if (qk < 0)
        return -1;
    int p = graph_permute(g, graph_reshape(g, qk, 5, (int64_t[]){B, N, 2, H, hd}),
                          (int[]){2, 0, 3, 1, 4}); // (2, B, H, N, hd)
    int q = graph_reshape(g, graph_slice(g, p, 0, 0, 1), 4, (int64_t[]){B, H, N, hd});
    int k = graph_reshape(g, graph_slice(g, p, 0, 1, 1), 4, (int64_t[]){B, H, N, hd});
    if (nn_check(x, q) < 0 || nn_check(x, k) < 0)
        return -1;
    char name[64];
    snprintf(name, sizeof name, "convit_rel.%lld", (long long)N);
    int rel = nn_shared_buffer(x, name, DT_F32, 4, (int64_t[]){1, N, N, 3}, INIT_CONVIT_REL, 0);
    if (rel < 0)
        return -1;
    g->nodes[rel].ia[1] = side;
    int pe = graph_op_shaped(g, OP_EXPAND, 1, &rel, NULL, NULL, 4, (int64_t[]){B, N, N, 3});
    if (nn_check(x, pe) < 0)
        return -1;
    int pos = nn_linear_to(x, pe, H, true, "pos_proj");
    if (pos < 0)
        return -1;
    pos = graph_permute(g, pos, (int[]){0, 3, 1, 2}); // (B, H, N, N)
    int s = graph_binary(g, OP_MATMUL, q, graph_permute(g, k, (int[]){0, 1, 3, 2}));
    s = graph_unary(g, OP_SOFTMAX, graph_scale(g, s, 1.0 / sqrt((double)hd), 0));
    pos = graph_unary(g, OP_SOFTMAX, pos);
    int gate = nn_param(x, "gating_param", 1, &H, INIT_ONES, 0);
    if (gate < 0 || nn_check(x, s) < 0 || nn_check(x, pos) < 0)
        return -1;
    gate = graph_unary(g, OP_SIGMOID, graph_reshape(g, gate, 4, (int64_t[]){1, H, 1, 1}));
    int a = graph_binary(g, OP_ADD, graph_binary(g, OP_MUL, graph_scale(g, gate, -1, 1), s),
                         graph_binary(g, OP_MUL, gate, pos));
    a = graph_binary(g, OP_DIV, a, graph_reduce(g, OP_SUM, a, 3));
    int v = nn_linear_to(x, nn_in(x, 0), D, false, "v");
    if (v < 0 || nn_check(x, a) < 0)
        return -1;
    int o = graph_binary(g, OP_MATMUL, a, heads_of(x, v, B, N, H, hd)); // (B, H, N, hd)
    o = graph_reshape(g, graph_permute(g, o, (int[]){0, 2, 1, 3}), 3, (int64_t[]){B, N, D});
    if (nn_check(x, o) < 0)
        return -1;
    return nn_emit(x, nn_linear_to(x, o, D, true, "proj"));
}
