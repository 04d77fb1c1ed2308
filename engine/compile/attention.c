// The attention pattern (compile_internal.h compile_attention_find): the
// unfused chain an eager attention layer builds (nn_attention.c attend(),
// Hugging Face's eager modules) found in the model's graph, so that
// decompose writes one ATTENTION node in its place, as Inductor's
// fuse_attention pass replaces the matmul-softmax-matmul chain by
// scaled_dot_product_attention:
//
//   k -> [reshape, expand, reshape: repeat_kv] -> permute(0, 1, 3, 2) = kt
//   s = matmul(q, kt) [-> scale(fa0)] [-> add(s, bias)]
//     [-> where(causal mask, s, very low)]
//   p = softmax(s) ; o = matmul(p, v [repeated likewise])
//
// autocast's casts (ia1 set) may sit between the links. Every link from the
// first matmul to softmax must have no other reader in the forward (nodes up
// to the loss). In a training step graph the backward's readers must be
// exactly the chain's own backward (autograd.c), found by match_backward:
//
//   dq  = matmul(ds, kt^T)          dkt = matmul(q^T, ds) -> permute = dk
//   dp' = matmul(dy, vr^T)          dvr = matmul(p'^T, dy)           = dv
//   ds from softmax_grad(dp, p) back through where and scale (no reader else)
//
// (p' is the probabilities as o reads them, a cast of p under autocast; dk
// and dv summed over the repeated heads by reshape, sum_to, reshape). A
// chain whose values have any other reader is left alone. GQA
// stays grouped: the repeated k and v are read through to the kv heads, which
// ATTENTION indexes itself. The causal where becomes ATTENTION's causal flag
// when its mask is an INIT_CAUSAL_MASK buffer of (T, S) (key s visible to
// query t when s <= t + S - T, ATTENTION's rule with L = S) and T <= S (a row
// with no visible key would be uniform in the chain and zeros in the op).
// The add of a float bias broadcast to the scores (T5's position bias)
// becomes ATTENTION's bias source; in a training graph only when nothing of
// the chain needs a gradient, as ATTENTION_GRAD gives the bias none.
#include "compile_internal.h"

#include <stdlib.h>
#include <string.h>

// T x S per head above which a training chain is fused (512 x 512): the
// break-even of dev/attention's training step (docs/compiler.md)
#define ATTENTION_TRAIN_MIN_TS ((int64_t)512 * 512)

static const graph_node *at(const graph *g, int id) { return &g->nodes[id]; }

// The chain's nodes match_backward looks at.
typedef struct chain {
    int mm, kt, p, pp; // q k^T, k^T, softmax, the probabilities o reads
} chain;

// Each node's readers: at[start[i] .. start[i + 1]).
typedef struct readers {
    int *start, *at;
} readers;

static int readers_build(const graph *g, readers *r) {
    r->start = calloc((size_t)g->n + 1, sizeof *r->start);
    int total = 0;
    for (int i = 0; i < g->n; i++)
        total += g->nodes[i].nsrc;
    r->at = malloc((size_t)(total ? total : 1) * sizeof *r->at);
    int *fill = calloc((size_t)g->n + 1, sizeof *fill);
    if (!r->start || !r->at || !fill) {
        free(r->start), free(r->at), free(fill);
        return -1;
    }
    for (int i = 0; i < g->n; i++)
        for (int j = 0; j < g->nodes[i].nsrc; j++)
            r->start[g->nodes[i].src[j] + 1]++;
    for (int i = 0; i < g->n; i++)
        r->start[i + 1] += r->start[i];
    for (int i = 0; i < g->n; i++)
        for (int j = 0; j < g->nodes[i].nsrc; j++) {
            int s = g->nodes[i].src[j];
            r->at[r->start[s] + fill[s]++] = i;
        }
    free(fill);
    return 0;
}

static bool is_swap(const graph_node *n) {
    return n->op == OP_PERMUTE && n->ndim == 4 && n->ia[0] == 0 && n->ia[1] == 1 &&
           n->ia[2] == 3 && n->ia[3] == 2;
}

// The readers of x past the loss (the backward's): their count, the first
// `max` of them in out.
static int bwd_readers(const graph *g, const readers *r, int x, int *out, int max) {
    int n = 0;
    for (int i = r->start[x]; i < r->start[x + 1]; i++)
        if (r->at[i] > g->loss && n++ < max)
            out[n - 1] = r->at[i];
    return n;
}

// x's one reader when it has one and it is an `op`, else -1.
static int sole_reader(const graph *g, const readers *r, int x, enum op op) {
    if (x < 0 || r->start[x + 1] - r->start[x] != 1)
        return -1;
    int y = r->at[r->start[x]];
    return at(g, y)->op == op ? y : -1;
}

// The gradient of a repeated operand (B, H, S, d) summed back onto its kv
// heads: autograd's reshape (B, KVH, G, S, d), sum_to, reshape (B, KVH, S, d).
static int unrepeat_grad(const graph *g, const readers *r, int d) {
    int r5 = sole_reader(g, r, d, OP_RESHAPE);
    if (r5 < 0 || at(g, r5)->ndim != 5)
        return -1;
    int r4 = sole_reader(g, r, sole_reader(g, r, r5, OP_SUM_TO), OP_RESHAPE);
    return r4 >= 0 && at(g, r4)->ndim == 4 ? r4 : -1;
}

static bool same_as(const graph *g, int x, int like) {
    const graph_node *a = at(g, x), *b = at(g, like);
    if (a->ndim != b->ndim || a->dtype != b->dtype)
        return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i])
            return false;
    return true;
}

// In a training graph: whether the chain ending at o has exactly its own
// backward as its values' backward readers (the rules at the top); fills
// a->dy, gq, gk, gv (all -1 when the chain has no backward).
static bool match_backward(const graph *g, const readers *r, int o, const chain *c,
                           compile_attention *a) {
    a->dy = a->gq = a->gk = a->gv = -1;
    int b[4];
    int nkt = bwd_readers(g, r, c->kt, b, 1), npp = bwd_readers(g, r, c->pp, b + 1, 2);
    int np = c->p == c->pp ? 0 : bwd_readers(g, r, c->p, b + 3, 1);
    // links between the first matmul and o other than p and p': no backward reader
    for (int x = at(g, c->p)->src[0]; x != c->mm;) {
        if (bwd_readers(g, r, x, NULL, 0))
            return false;
        x = at(g, x)->op == OP_WHERE ? at(g, x)->src[1] : at(g, x)->src[0];
    }
    for (int x = at(g, c->pp)->src[0]; c->pp != c->p && x != c->p; x = at(g, x)->src[0])
        if (bwd_readers(g, r, x, NULL, 0))
            return false;
    if (!nkt && !npp && !np)
        return true; // nothing of the chain needs a gradient
    // o's backward: p'^T (and, when p' is p, softmax_grad) read p'; p itself
    // read by softmax_grad alone
    int want_pp = c->pp == c->p ? 2 : 1;
    if (nkt != 1 || npp != want_pp || np != (c->pp == c->p ? 0 : 1))
        return false;
    int pt = -1, sg = c->pp == c->p ? -1 : b[3];
    for (int i = 1; i <= want_pp; i++) {
        if (is_swap(at(g, b[i])))
            pt = b[i];
        else if (at(g, b[i])->op == OP_SOFTMAX_GRAD)
            sg = b[i];
    }
    if (pt < 0 || sg < 0 || at(g, sg)->op != OP_SOFTMAX_GRAD || at(g, sg)->src[1] != c->p ||
        at(g, sg)->ia[0] != 0)
        return false;
    int gvr = sole_reader(g, r, pt, OP_MATMUL);
    if (gvr < 0 || at(g, gvr)->src[0] != pt)
        return false;
    a->dy = at(g, gvr)->src[1];
    a->gv = at(g, o)->src[1] == a->v ? gvr : unrepeat_grad(g, r, gvr);
    // the first matmul's backward: kt^T read by dq's matmul; q^T by dkt's,
    // both with the same ds
    int ktt = b[0];
    a->gq = is_swap(at(g, ktt)) ? sole_reader(g, r, ktt, OP_MATMUL) : -1;
    if (a->gq < 0 || at(g, a->gq)->src[1] != ktt)
        return false;
    int ds = at(g, a->gq)->src[0], qb[8], nq = bwd_readers(g, r, a->q, qb, 8);
    for (int i = 0; i < nq && i < 8 && a->gk < 0; i++) {
        int dkt = is_swap(at(g, qb[i])) ? sole_reader(g, r, qb[i], OP_MATMUL) : -1;
        if (dkt < 0 || at(g, dkt)->src[0] != qb[i] || at(g, dkt)->src[1] != ds)
            continue;
        int dkr = sole_reader(g, r, dkt, OP_PERMUTE);
        if (dkr < 0 || !is_swap(at(g, dkr)))
            continue;
        a->gk = at(g, c->kt)->src[0] == a->k ? dkr : unrepeat_grad(g, r, dkr);
    }
    return a->gk >= 0 && a->gv >= 0 && same_as(g, a->dy, o) && same_as(g, a->gq, a->q) &&
           same_as(g, a->gk, a->k) && same_as(g, a->gv, a->v);
}

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
static bool match(const graph *g, const int *uses, int o, compile_attention *a, chain *c) {
    const graph_node *on = at(g, o);
    if (on->op != OP_MATMUL || on->ndim != 4)
        return false;
    int p = skip_casts(g, uses, on->src[0]);
    c->p = p;
    c->pp = on->src[0];
    if (at(g, p)->op != OP_SOFTMAX || at(g, p)->ia[0] != 0 || uses[p] != 1 || uses[on->src[0]] != 1)
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
    a->bias = -1;
    if (sn->op == OP_ADD && sn->ndim == 4) {
        const graph_node *b = at(g, sn->src[1]);
        bool ok = uses[s] == 1 && b->ndim == 4 && dtype_is_float(b->dtype);
        for (int i = 0; ok && i < 4; i++)
            ok = b->shape[i] == 1 || b->shape[i] == sn->shape[i];
        if (!ok)
            return false;
        a->bias = sn->src[1];
        s = skip_casts(g, uses, sn->src[0]);
        sn = at(g, s);
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
    c->mm = s;
    c->kt = sn->src[1];
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
    // A training chain fuses (attention and attention_grad) only when its
    // scores are larger than this many elements per head: below, the
    // backward's extra tile products cost more than the (T, S) passes they
    // save (docs/compiler.md, "In training"). TCBENCH_ATTENTION_TRAIN_MIN_TS
    // sets it (0: every training chain).
    int64_t train_min_ts = ATTENTION_TRAIN_MIN_TS;
    const char *mts = getenv("TCBENCH_ATTENTION_TRAIN_MIN_TS");
    if (mts && *mts) {
        char *end;
        long long v = strtoll(mts, &end, 10);
        if (*end == 0 && v >= 0)
            train_min_ts = v;
        else
            fprintf(stderr,
                    "tcbench: TCBENCH_ATTENTION_TRAIN_MIN_TS=%s is not a count of "
                    "elements; %lld is used\n",
                    mts, (long long)train_min_ts);
    }
    // forward readers only (nodes up to the loss); the backward's are
    // match_backward's business
    int *uses = calloc((size_t)(g->n ? g->n : 1), sizeof *uses);
    readers r = {0};
    bool train = g->loss >= 0 && g->loss + 1 < g->n;
    if (!uses || (train && readers_build(g, &r) < 0)) {
        free(uses);
        return -1;
    }
    for (int i = 0; i < g->n && (g->loss < 0 || i <= g->loss); i++)
        for (int j = 0; j < g->nodes[i].nsrc; j++)
            uses[g->nodes[i].src[j]]++;
    int found = 0;
    for (int o = 0; o < g->n && (g->loss < 0 || o <= g->loss); o++) {
        compile_attention a;
        chain c;
        if (!match(g, uses, o, &a, &c))
            continue;
        a.dy = a.gq = a.gk = a.gv = -1;
        if (train && a.bias >= 0 && match_backward(g, &r, o, &c, &a) && a.dy >= 0) {
            if (log)
                fprintf(log,
                        "attention: %%%d left unfused: its score bias's gradient comes from "
                        "the unfused backward\n",
                        o);
            continue;
        }
        if (train && !match_backward(g, &r, o, &c, &a)) {
            if (log)
                fprintf(log, "attention: %%%d left unfused: its values have readers in the "
                             "backward other than its own gradient's\n", o);
            continue;
        }
        int64_t T = at(g, a.q)->shape[2], S = at(g, a.k)->shape[2];
        if (a.dy >= 0 && T * S <= train_min_ts) {
            if (log)
                fprintf(log,
                        "attention: %%%d left unfused: a training chain of T %lld x S %lld, "
                        "where the chain's GEMMs beat attention_grad's recomputation "
                        "(fused above T x S = %lld)\n",
                        o, (long long)T, (long long)S, (long long)train_min_ts);
            continue;
        }
        out[o] = a;
        found++;
        if (log) {
            const graph_node *q = at(g, a.q), *k = at(g, a.k);
            fprintf(log,
                    "attention: %%%d matmul-softmax-matmul -> attention (B %lld, heads %lld, kv "
                    "heads %lld, T %lld, S %lld, head dim %lld%s%s, scale %g)%s\n",
                    o, (long long)q->shape[0], (long long)q->shape[1], (long long)k->shape[1],
                    (long long)q->shape[2], (long long)k->shape[2], (long long)q->shape[3],
                    a.causal ? ", causal" : "", a.bias >= 0 ? ", bias" : "", a.scale,
                    a.dy >= 0 ? "; its backward -> attention_grad" : "");
        }
    }
    free(r.start);
    free(r.at);
    free(uses);
    return found;
}
