// DeBERTa's self-attention, as Hugging Face's DisentangledSelfAttention
// (deberta and deberta_v2) runs it in eager, op for op:
//
//   version 1: one in_proj (D -> 3 H hd, no bias, rows per head [q_h | k_h |
//              v_h]) sliced into views, q_bias and v_bias added, the query
//              divided by sqrt(hd * factor) before the scores' GEMM
//   version 2: q, k and v linears with biases, the transposed keys divided
//              by sqrt(hd * factor)
//
// then softmax, a GEMM with v, heads merged, the output linear `o`. factor
// is 1 + (c2p) + (p2c).
//
// With `rel_table` the scores get the disentangled terms over a relative
// position table (2 R, D) that every layer naming it shares:
//   c2p[i, j] = q_i . pos_key[idx(i - j)]     (content to position)
//   p2c[i, j] = k_j . pos_query[idx(i - j)]   (position to content)
// idx(d) = clamp(bucket(d) + span, 0, 2 span - 1); v1: span = min(T, R) over
// the table's middle rows, bucket the identity; v2: span = buckets (or R)
// over its first rows, v2's log buckets. Hugging Face takes the product
// with every table row, (B, H, T, 2 span), and gathers along the last axis;
// here the projected rows are gathered first by a constant index (an
// embedding lookup of 2T - 1 rows, one per distance), the GEMM gives (B, H,
// T, 2T - 1), and a reshape-slice-reshape skew (Transformer-XL's relative
// shift) reads distance i - j at column T - 1 - i + j. The same products,
// with the engine's existing ops: gather, GEMM and views, each with its
// reference, kernels, gradient and AMP rule.
#include "nn_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

// (B, T, H*hd) -> (B, H, T, hd): views
static int de_heads(nn_ctx *x, int t, int64_t H, int64_t hd) {
    const graph_node *n = nn_node(x, t);
    int r = graph_reshape(x->g, t, 4, (int64_t[]){n->shape[0], n->shape[1], H, hd});
    return nn_check(x, graph_permute(x->g, r, (int[]){0, 2, 1, 3}));
}

// (B, H, T, 2T - 1) -> (B, H, T, T), out[i, j] = a[i, T - 1 - i + j]:
// flattened rows read at a stride of 2T - 2 from element T - 1
static int de_skew(nn_ctx *x, int a, int64_t T) {
    const graph_node *n = nn_node(x, a);
    int64_t B = n->shape[0], H = n->shape[1];
    int f = graph_reshape(x->g, a, 3, (int64_t[]){B, H, T * (2 * T - 1)});
    f = graph_slice(x->g, f, 2, T - 1, T * (2 * T - 2));
    f = graph_reshape(x->g, f, 4, (int64_t[]){B, H, T, 2 * T - 2});
    return nn_check(x, graph_slice(x->g, f, 3, 0, T));
}

// A relative projection's rows gathered per distance: rel (2 span, D) ->
// linear -> (2T - 1, H hd) rows idx(d) -> (H, hd, 2T - 1) for the GEMM
static int de_pos(nn_ctx *x, int rel, int idx, int64_t H, int64_t hd, bool bias, double scale,
                  const char *role) {
    int p = nn_linear_to(x, rel, H * hd, bias, role);
    if (p < 0)
        return -1;
    if (scale != 1)
        p = graph_scale(x->g, p, scale, 0);
    p = graph_op(x->g, OP_EMBEDDING, 2, (int[]){p, idx}, NULL, NULL);
    int64_t L = nn_node(x, idx)->shape[0];
    p = graph_reshape(x->g, p, 3, (int64_t[]){L, H, hd});
    return nn_check(x, graph_permute(x->g, p, (int[]){1, 2, 0}));
}

typedef struct de_spec {
    int version;
    int64_t H, hd, T, R, buckets;
    bool c2p, p2c;
    double scale; // 1 / sqrt(hd * factor)
} de_spec;

// The shared relative table (rows, D): made by the first layer that names
// it, found by its name by the others.
static int de_table(nn_ctx *x, int64_t rows, int64_t D) {
    char name[160];
    snprintf(name, sizeof name, "%s.weight", nn_str(x, "rel_table", ""));
    for (int i = 0; i < x->g->n; i++) {
        const graph_node *n = &x->g->nodes[i];
        if (n->op != OP_PARAM || !n->name || strcmp(n->name, name))
            continue;
        if (n->ndim != 2 || n->shape[0] != rows || n->shape[1] != D)
            return nn_fail(x, "rel_table",
                           "disentangled_attention: '%s' exists but is not (%lld, %lld)", name,
                           (long long)rows, (long long)D);
        return i;
    }
    return nn_check(x, graph_param(x->g, name, 2, (int64_t[]){rows, D}, INIT_NORMAL, 0.02));
}

// The disentangled terms c2p + p2c (B, H, T, T); q as the scores' GEMM
// takes it (v1: already scaled).
static int de_relative(nn_ctx *x, const de_spec *s, int q, int k) {
    int64_t D = nn_node(x, nn_in(x, 0))->shape[2], T = s->T;
    int64_t span = s->version == 1 ? (T < s->R ? T : s->R) : s->buckets > 0 ? s->buckets : s->R;
    int64_t rows = 2 * (s->version == 2 && s->buckets > 0 ? s->buckets : s->R);
    int table = de_table(x, rows, D);
    if (table < 0)
        return -1;
    int rel = graph_slice(x->g, table, 0, s->version == 1 ? s->R - span : 0, 2 * span);
    int64_t len = 2 * T - 1;
    int idx[2];
    for (int r = 0; r < 2; r++) {
        char name[96];
        snprintf(name, sizeof name, "rel_index.%lld.%lld.%lld.%lld%s", (long long)T,
                 (long long)span, (long long)s->buckets, (long long)s->R, r ? ".rev" : "");
        double arg = graph_rel_index_arg(span, s->buckets, s->R, r);
        if ((idx[r] = nn_shared_buffer(x, name, DT_I32, 1, &len, INIT_REL_INDEX, arg)) < 0)
            return -1;
    }
    int score = -1;
    if (s->c2p) {
        int pk = de_pos(x, rel, idx[0], s->H, s->hd, s->version == 2, 1,
                        s->version == 1 ? "pos_proj" : "pos_key_proj");
        int c = pk < 0 ? -1 : de_skew(x, graph_binary(x->g, OP_MATMUL, q, pk), T);
        if (c >= 0 && s->version == 2)
            c = nn_check(x, graph_scale(x->g, c, s->scale, 0));
        if ((score = c) < 0)
            return -1;
    }
    if (s->p2c) {
        // rows idx(-d): key j's row of distance j - i, transposed to (i, j)
        int pq = de_pos(x, rel, idx[1], s->H, s->hd, true, s->version == 1 ? s->scale : 1,
                        s->version == 1 ? "pos_q_proj" : "pos_query_proj");
        int p = pq < 0 ? -1 : de_skew(x, graph_binary(x->g, OP_MATMUL, k, pq), T);
        p = p < 0 ? -1 : nn_check(x, graph_permute(x->g, p, (int[]){0, 1, 3, 2}));
        if (p >= 0 && s->version == 2)
            p = nn_check(x, graph_scale(x->g, p, s->scale, 0));
        if (p < 0)
            return -1;
        score = score < 0 ? p : nn_check(x, graph_binary(x->g, OP_ADD, score, p));
    }
    return score;
}

// v1's projections: in_proj per head, then q_bias and v_bias (H, 1, hd)
static int de_project_v1(nn_ctx *x, const de_spec *s, int in, int out[3]) {
    const graph_node *n = nn_node(x, in);
    int64_t B = n->shape[0], H = s->H, hd = s->hd;
    int qkv = nn_linear_to(x, in, 3 * H * hd, false, "in_proj");
    int r = qkv < 0 ? -1 : graph_reshape(x->g, qkv, 4, (int64_t[]){B, s->T, H, 3 * hd});
    for (int i = 0; i < 3; i++)
        if ((out[i] = nn_check(x, graph_permute(x->g, graph_slice(x->g, r, 3, i * hd, hd),
                                                (int[]){0, 2, 1, 3}))) < 0)
            return -1;
    static const char *const roles[2] = {"q_bias", "v_bias"};
    for (int i = 0; i < 2; i++) {
        int b = nn_param(x, roles[i], 1, (int64_t[]){H * hd}, INIT_ZEROS, 0);
        b = b < 0 ? -1 : graph_reshape(x->g, b, 3, (int64_t[]){H, 1, hd});
        int *t = &out[2 * i];
        if ((*t = nn_check(x, graph_binary(x->g, OP_ADD, *t, b))) < 0)
            return -1;
    }
    return 0;
}

static int de_spec_read(nn_ctx *x, de_spec *s) {
    const graph_node *in = nn_node(x, nn_in(x, 0));
    if (in->ndim != 3)
        return nn_fail(x, NULL, "disentangled_attention needs (B, T, D) input");
    if (x->c->gen)
        return nn_fail(x, NULL,
                       "disentangled_attention: an encoder's layer, not built for generation");
    int64_t D = in->shape[2];
    s->H = nn_int(x, "heads", 1);
    if (s->H <= 0 || D % s->H)
        return nn_fail(x, "heads",
                       "disentangled_attention: width %lld does not split into %lld heads",
                       (long long)D, (long long)s->H);
    s->hd = D / s->H, s->T = in->shape[1];
    s->version = (int)nn_int(x, "version", 1);
    if (s->version != 1 && s->version != 2)
        return nn_fail(x, "version", "disentangled_attention: version is 1 or 2, got %d",
                       s->version);
    static const char *const rel_keys[] = {"max_relative", "buckets", "c2p", "p2c"};
    bool rel = nn_has(x, "rel_table");
    for (int i = 0; i < 4; i++)
        if (!rel && nn_has(x, rel_keys[i]))
            return nn_fail(x, rel_keys[i], "disentangled_attention: %s needs rel_table",
                           rel_keys[i]);
    s->R = nn_int(x, "max_relative", 512), s->buckets = nn_int(x, "buckets", 0);
    s->c2p = rel && nn_bool(x, "c2p", true), s->p2c = rel && nn_bool(x, "p2c", true);
    if (s->R < 1 || s->R >= 1 << 16)
        return nn_fail(x, "max_relative",
                       "disentangled_attention: max_relative must be in [1, 65535], got %lld",
                       (long long)s->R);
    if (s->buckets && (s->version == 1 || s->buckets < 2 || s->buckets >= 1 << 16 ||
                       s->buckets % 2 || s->R < s->buckets))
        return nn_fail(x, "buckets",
                       "disentangled_attention: buckets (v2's log buckets) need version 2, an even "
                       "count in [2, 2^16) and max_relative at least that count");
    if (rel && (s->T < 2 || s->T >= 1 << 15))
        return nn_fail(
            x, "rel_table",
            "disentangled_attention: relative positions need 2 to 32767 tokens, got %lld",
            (long long)s->T);
    s->scale = 1 / sqrt((double)s->hd * (1 + s->c2p + s->p2c));
    return 0;
}

int nn_disentangled_attention(nn_ctx *x) {
    de_spec s = {0};
    if (de_spec_read(x, &s) < 0)
        return -1;
    int in = nn_in(x, 0), qkv[3];
    const graph_node *n = nn_node(x, in);
    int64_t B = n->shape[0], D = n->shape[2];
    if (s.version == 1) {
        if (de_project_v1(x, &s, in, qkv) < 0)
            return -1;
        qkv[0] = nn_check(x, graph_scale(x->g, qkv[0], s.scale, 0));
    } else {
        static const char *const roles[3] = {"q", "k", "v"};
        for (int i = 0; i < 3; i++)
            if ((qkv[i] = nn_linear_to(x, in, D, true, roles[i])) < 0 ||
                (qkv[i] = de_heads(x, qkv[i], s.H, s.hd)) < 0)
                return -1;
    }
    if (qkv[0] < 0)
        return -1;
    int kt = graph_permute(x->g, qkv[1], (int[]){0, 1, 3, 2}); // (B, H, hd, T) view
    if (s.version == 2)
        kt = graph_scale(x->g, kt, s.scale, 0);
    int scores = nn_check(x, graph_binary(x->g, OP_MATMUL, qkv[0], kt)); // (B, H, T, T)
    if (scores >= 0 && (s.c2p || s.p2c)) {
        int r = de_relative(x, &s, qkv[0], qkv[1]);
        scores = r < 0 ? -1 : nn_check(x, graph_binary(x->g, OP_ADD, scores, r));
    }
    if (scores < 0)
        return -1;
    int p = graph_unary(x->g, OP_SOFTMAX, scores);
    int o = graph_binary(x->g, OP_MATMUL, p, qkv[2]);               // (B, H, T, hd)
    o = graph_permute(x->g, o, (int[]){0, 2, 1, 3});                // (B, T, H, hd) view
    o = graph_reshape(x->g, o, 3, (int64_t[]){B, s.T, s.H * s.hd}); // a copy
    if (nn_check(x, o) < 0)
        return -1;
    return nn_emit(x, nn_linear_to(x, o, D, true, "o"));
}
