// Simplification: identities (x*1, x+0, scale(1, 0), casts and reshapes to
// the same type and shape, reshape chains), constant folding of ops whose
// inputs are all constants, common subexpressions, and dead code. The graph
// is rebuilt from what survives, so shapes are checked again. Nodes with
// side effects (updates, training batch norm) are never folded, merged or
// dead; every read of a source before its update is a read of the old value
// (nothing may read an update's value: see compile_internal.h), so merging
// two reads of one parameter stays right.
#include "compile_internal.h"

#include <stdlib.h>
#include <string.h>

static bool is_full(const graph *g, int id, double v) {
    return g->nodes[id].op == OP_FULL && g->nodes[id].fa[0] == v;
}

// The node this one can be replaced by, or itself.
static int identity_of(const graph *g, const graph_node *n, const int *s) {
    const graph_node *x = n->nsrc ? &g->nodes[s[0]] : NULL;
    switch (n->op) {
    case OP_SCALE:
        return n->fa[0] == 1 && n->fa[1] == 0 ? s[0] : -1;
    case OP_CAST:
        return x->dtype == n->dtype ? s[0] : -1;
    case OP_RESHAPE:
    case OP_EXPAND:
    case OP_CONTIGUOUS: return compile_same_shape(x, n) && (n->op != OP_CONTIGUOUS) ? s[0] : -1;
    case OP_PERMUTE:
        for (int i = 0; i < n->ndim; i++)
            if (n->ia[i] != i)
                return -1;
        return s[0];
    case OP_MUL:
        if (is_full(g, s[1], 1) && compile_same_shape(x, n))
            return s[0];
        if (is_full(g, s[0], 1) && compile_same_shape(&g->nodes[s[1]], n))
            return s[1];
        return -1;
    case OP_ADD:
        if (is_full(g, s[1], 0) && compile_same_shape(x, n))
            return s[0];
        if (is_full(g, s[0], 0) && compile_same_shape(&g->nodes[s[1]], n))
            return s[1];
        return -1;
    default:
        return -1;
    }
}

// Structural equality for common subexpressions.
static bool same_node(const graph_node *a, const graph_node *b, const int *sa, const int *sb) {
    if (a->op != b->op || a->dtype != b->dtype || a->nsrc != b->nsrc || !compile_same_shape(a, b))
        return false;
    for (int i = 0; i < a->nsrc; i++)
        if (sa[i] != sb[i])
            return false;
    return memcmp(a->ia, b->ia, sizeof a->ia) == 0 && memcmp(a->fa, b->fa, sizeof a->fa) == 0;
}

static uint64_t node_hash(const graph_node *n, const int *s) {
    uint64_t h = 1469598103934665603ull;
#define MIX(v) (h = (h ^ (uint64_t)(v)) * 1099511628211ull)
    MIX(n->op);
    MIX(n->dtype);
    for (int i = 0; i < n->nsrc; i++)
        MIX(s[i]);
    for (int i = 0; i < n->ndim; i++)
        MIX(n->shape[i]);
    for (int i = 0; i < GRAPH_MAX_IA; i++)
        MIX(n->ia[i]);
#undef MIX
    return h;
}

int compile_simplify(cprog *p) {
    graph *g = p->g;
    int n = g->n;
    int *repl = calloc((size_t)n + 1, sizeof *repl);
    int *srcs = malloc((size_t)n * GRAPH_MAX_SRCS * sizeof *srcs);
    bool *folded = calloc((size_t)n, sizeof *folded);
    double *fval = calloc((size_t)n, sizeof *fval);
    int hcap = 1;
    while (hcap < 2 * n)
        hcap <<= 1;
    int *table = malloc((size_t)hcap * sizeof *table);
    bool *live = calloc((size_t)n, sizeof *live);
    int *map = malloc((size_t)n * sizeof *map);
    int *origin = malloc((size_t)n * sizeof *origin);
    graph *ng = graph_new();
    int rc = -1;
    if (!repl || !srcs || !folded || !fval || !table || !live || !map || !origin || !ng) {
        compile_fail(p, "out of memory in simplify");
        goto done;
    }
    for (int i = 0; i < hcap; i++)
        table[i] = -1;

    for (int i = 0; i < n; i++) {
        const graph_node *nd = &g->nodes[i];
        int *s = &srcs[i * GRAPH_MAX_SRCS];
        for (int j = 0; j < nd->nsrc; j++)
            s[j] = repl[nd->src[j]];
        repl[i] = i;
        int id = identity_of(g, nd, s);
        if (id >= 0 && g->nodes[id].dtype == nd->dtype) {
            repl[i] = id;
            continue;
        }
        // reshape of reshape: one reshape of the first input
        if (nd->op == OP_RESHAPE && g->nodes[s[0]].op == OP_RESHAPE)
            s[0] = srcs[s[0] * GRAPH_MAX_SRCS];
        // constant folding: every input a FULL, op elementwise or a view
        bool all_const = nd->nsrc > 0;
        for (int j = 0; j < nd->nsrc; j++)
            all_const &= g->nodes[s[j]].op == OP_FULL;
        if (all_const && (compile_is_pointwise(nd) || op_kind(nd->op) == OPK_VIEW) &&
            nd->op != OP_DROPOUT && nd->op != OP_NOISE && !op_has_side_effect(nd)) {
            double in[GRAPH_MAX_SRCS];
            for (int j = 0; j < nd->nsrc; j++)
                in[j] = g->nodes[s[j]].fa[0];
            folded[i] = true;
            fval[i] = op_kind(nd->op) == OPK_VIEW ? in[0] : compile_scalar_op(nd->op, nd, in);
            // a folded node is a FULL from here on, for the nodes after it
            g->nodes[i].op = OP_FULL;
            g->nodes[i].nsrc = 0;
            g->nodes[i].fa[0] = fval[i];
        }
        if (op_kind(g->nodes[i].op) == OPK_SOURCE && g->nodes[i].op != OP_FULL)
            continue; // parameters and inputs are never merged
        if (op_has_side_effect(&g->nodes[i]))
            continue; // two identical updates are two updates
        uint64_t h = node_hash(&g->nodes[i], s) & (uint64_t)(hcap - 1);
        for (;; h = (h + 1) & (uint64_t)(hcap - 1)) {
            int o = table[h];
            if (o < 0) {
                table[h] = i;
                break;
            }
            if (same_node(&g->nodes[o], &g->nodes[i], &srcs[o * GRAPH_MAX_SRCS], s)) {
                repl[i] = o;
                break;
            }
        }
    }

    // dead code: keep what the outputs, the loss, the sources and the side
    // effects need
    for (int i = 0; i < g->noutputs; i++)
        live[repl[g->outputs[i]]] = true;
    for (int i = 0; i < n; i++)
        if (op_has_side_effect(&g->nodes[i]))
            live[i] = true;
    if (g->loss >= 0)
        live[repl[g->loss]] = true;
    for (int i = n - 1; i >= 0; i--) {
        if (op_kind(g->nodes[i].op) == OPK_SOURCE && g->nodes[i].op != OP_FULL)
            live[i] = repl[i] == i; // sources keep their ids for the runtime
        if (!live[i] || repl[i] != i)
            continue;
        for (int j = 0; j < g->nodes[i].nsrc; j++)
            live[srcs[i * GRAPH_MAX_SRCS + j]] = true;
    }

    int kept = 0;
    for (int i = 0; i < n; i++) {
        map[i] = -1;
        if (!live[i] || repl[i] != i)
            continue;
        graph_node *nd = &g->nodes[i];
        int s[GRAPH_MAX_SRCS];
        for (int j = 0; j < nd->nsrc; j++)
            s[j] = map[srcs[i * GRAPH_MAX_SRCS + j]];
        int id;
        switch (nd->op) {
        case OP_INPUT:
            id = graph_input(ng, nd->name, nd->dtype, nd->ndim, nd->shape);
            if (id >= 0)
                memcpy(ng->nodes[id].ia, nd->ia, sizeof nd->ia);
            break;
        case OP_PARAM:
            id = graph_param(ng, nd->name, nd->ndim, nd->shape, (enum init_kind)nd->ia[0], nd->fa[0]);
            break;
        case OP_BUFFER:
            id = graph_buffer(ng, nd->name, nd->dtype, nd->ndim, nd->shape,
                              (enum init_kind)nd->ia[0], nd->fa[0]);
            break;
        case OP_FULL: id = graph_full(ng, nd->fa[0], nd->dtype, nd->ndim, nd->shape); break;
        default:
            id = graph_op_shaped(ng, nd->op, nd->nsrc, s, nd->ia, nd->fa, nd->ndim, nd->shape);
        }
        if (id < 0) {
            compile_fail(p, "simplify: rebuilding %s: %s", op_name(nd->op), graph_error(ng));
            goto done;
        }
        map[i] = id;
        origin[kept++] = p->origin[i];
    }
    for (int i = 0; i < g->noutputs; i++)
        graph_output(ng, map[repl[g->outputs[i]]]);
    ng->loss = g->loss >= 0 ? map[repl[g->loss]] : -1;
    for (int i = 0; i < p->m->g->n; i++)
        if (p->src_of[i] >= 0)
            p->src_of[i] = map[repl[p->src_of[i]]];
    graph_free(p->g);
    free(p->origin);
    p->g = ng;
    p->origin = origin;
    ng = NULL;
    origin = NULL;
    rc = 0;
done:
    graph_free(ng);
    free(origin);
    free(map);
    free(live);
    free(table);
    free(fval);
    free(folded);
    free(srcs);
    free(repl);
    return rc;
}
