// The attention pattern (compile_internal.h compile_attention_find): the
// unfused chain an eager attention layer builds (nn_attention.c attend(),
// Hugging Face's eager modules) found in the model's graph, so that
// decompose writes one ATTENTION node in its place, as Inductor's
// fuse_attention pass replaces the matmul-softmax-matmul chain by
// scaled_dot_product_attention:
//
//   k -> [reshape, expand, reshape: repeat_kv] -> permute(0, 1, 3, 2) = kt
//   s = matmul(q, kt) [-> scale(fa0)] [-> where(causal mask, s, very low)]
//   p = softmax(s) ; o = matmul(p, v [repeated likewise])
//
// autocast's casts (ia1 set) may sit between the links. Every link from the
// first matmul to softmax must have no other reader: a training graph keeps
// its probabilities for the backward, and such a chain is left alone. GQA
// stays grouped: the repeated k and v are read through to the kv heads, which
// ATTENTION indexes itself. The causal where becomes ATTENTION's causal flag
// when its mask is an INIT_CAUSAL_MASK buffer of (T, S) (key s visible to
// query t when s <= t + S - T, ATTENTION's rule with L = S) and T <= S (a row
// with no visible key would be uniform in the chain and zeros in the op).
#include "compile_internal.h"

#include <stdlib.h>
#include <string.h>

static const graph_node *at(const graph *g, int id) { return &g->nodes[id]; }

// Past autocast's casts with a single reader.
static int skip_casts(const graph *g, const int *uses, int id) {
    while (at(g, id)->op == OP_CAST && at(g, id)->ia[1] && uses[id] == 1)
        id = at(g, id)->src[0];
    return id;
}

// The kv-head tensor behind a (B, H, S, d) operand: itself, or what
// repeat_kv's reshape (B, KVH, 1, S, d), expand (B, KVH, G, S, d), reshape
// (B, H, S, d) repeats. *G gets the repeat count.
static int unrepeat(const graph *g, int id, int64_t *G) {
    *G = 1;
    const graph_node *r2 = at(g, id);
    if (r2->op != OP_RESHAPE || r2->ndim != 4)
        return id;
    const graph_node *e = at(g, r2->src[0]);
    if (e->op != OP_EXPAND || e->ndim != 5)
        return id;
    const graph_node *r1 = at(g, e->src[0]);
    if (r1->op != OP_RESHAPE || r1->ndim != 5 || r1->shape[2] != 1)
        return id;
    const graph_node *k = at(g, r1->src[0]);
    if (k->ndim != 4 || k->shape[0] != e->shape[0] || k->shape[1] != e->shape[1] ||
        k->shape[2] != e->shape[3] || k->shape[3] != e->shape[4] ||
        r2->shape[1] != e->shape[1] * e->shape[2] || r2->shape[2] != e->shape[3])
        return id;
    *G = e->shape[2];
    return r1->src[0];
}

static bool is_causal_mask(const graph_node *m, int64_t T, int64_t S) {
    return m->op == OP_BUFFER && m->ia[0] == INIT_CAUSAL_MASK && m->ndim == 2 && m->shape[0] == T &&
           m->shape[1] == S;
}

// Whether o = matmul(p, v) ends the chain; fills *a.
static bool match(const graph *g, const int *uses, int o, compile_attention *a) {
    const graph_node *on = at(g, o);
    if (on->op != OP_MATMUL || on->ndim != 4)
        return false;
    int p = skip_casts(g, uses, on->src[0]);
    if (at(g, p)->op != OP_SOFTMAX || uses[p] != 1 || uses[on->src[0]] != 1)
        return false;
    int s = skip_casts(g, uses, at(g, p)->src[0]);
    a->causal = false;
    a->scale = 1;
    const graph_node *sn = at(g, s);
    if (sn->op == OP_WHERE) {
        const graph_node *low = at(g, sn->src[2]);
        if (uses[s] != 1 || low->op != OP_FULL || low->fa[0] > -1e30)
            return false;
        a->causal = true;
        int m = sn->src[0];
        s = skip_casts(g, uses, sn->src[1]);
        sn = at(g, s);
        if (!is_causal_mask(at(g, m), sn->shape[2], sn->shape[3]))
            return false;
    }
    if (sn->op == OP_SCALE && sn->fa[1] == 0) {
        if (uses[s] != 1)
            return false;
        a->scale = sn->fa[0];
        s = skip_casts(g, uses, sn->src[0]);
        sn = at(g, s);
    }
    if (sn->op != OP_MATMUL || uses[s] != 1 || sn->ndim != 4)
        return false;
    const graph_node *kt = at(g, sn->src[1]);
    if (kt->op != OP_PERMUTE || kt->ia[0] != 0 || kt->ia[1] != 1 || kt->ia[2] != 3 ||
        kt->ia[3] != 2)
        return false;
    int64_t gk, gv;
    a->q = sn->src[0];
    a->k = unrepeat(g, kt->src[0], &gk);
    a->v = unrepeat(g, on->src[1], &gv);
    const graph_node *q = at(g, a->q), *k = at(g, a->k), *v = at(g, a->v);
    if (q->ndim != 4 || k->ndim != 4 || v->ndim != 4 || gk != gv || q->dtype != k->dtype ||
        q->dtype != v->dtype || q->dtype != on->dtype ||
        (q->dtype != DT_F32 && !dtype_is_half(q->dtype)))
        return false;
    int64_t T = q->shape[2], S = k->shape[2];
    if (k->shape[1] * gk != q->shape[1] || v->shape[2] != S || (a->causal && T > S))
        return false;
    return true;
}

int compile_attention_find(const graph *g, bool fusion, FILE *log, compile_attention *out) {
    for (int i = 0; i < g->n; i++)
        out[i].q = -1;
    const char *off = getenv("TCBENCH_DISABLE_FUSED_ATTENTION");
    if (!fusion || (off && *off && strcmp(off, "0")))
        return 0;
    int *uses = graph_use_counts(g);
    if (!uses)
        return -1;
    int found = 0;
    for (int o = 0; o < g->n; o++) {
        compile_attention a;
        if (!match(g, uses, o, &a))
            continue;
        out[o] = a;
        found++;
        if (log) {
            const graph_node *q = at(g, a.q), *k = at(g, a.k);
            fprintf(log,
                    "attention: %%%d matmul-softmax-matmul -> attention (B %lld, heads %lld, kv "
                    "heads %lld, T %lld, S %lld, head dim %lld%s, scale %g)\n",
                    o, (long long)q->shape[0], (long long)q->shape[1], (long long)k->shape[1],
                    (long long)q->shape[2], (long long)k->shape[2], (long long)q->shape[3],
                    a.causal ? ", causal" : "", a.scale);
        }
    }
    free(uses);
    return found;
}
