// The autocast pass (autocast.h): a copy of the graph, node by node, with
// casts inserted before each op whose rule asks for another dtype.
#include "autocast.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

autocast_rule_kind autocast_rule(enum op op) {
    switch (op) {
    case OP_MATMUL:
    case OP_LINEAR:
    case OP_CONV2D:
    case OP_CONV_TRANSPOSE2D:
    case OP_ATTENTION:
    case OP_LSTM: return AC_LOW; // cuDNN's RNNs are on autocast's f16 list
    case OP_EXP:
    case OP_LOG:
    case OP_RSQRT:
    case OP_RECIP:
    case OP_SOFTPLUS: // on PyTorch's list of ops autocast runs in float32
    case OP_SOFTMAX:
    case OP_LOG_SOFTMAX:
    case OP_LAYER_NORM:
    case OP_RMS_NORM:
    case OP_BATCH_NORM:
    case OP_GROUP_NORM:
    case OP_INSTANCE_NORM:
    case OP_CROSS_ENTROPY:
    case OP_CTC_LOSS:
    case OP_MSE_LOSS:
    case OP_BCE_LOSS: // with logits (autocast_build refuses the plain form, as torch)
    case OP_SUM:
    case OP_MEAN:
    // no autocast list names the FFTs; torch runs them in the input's dtype,
    // but its CPU FFT has no f16 and cuFFT's f16 takes powers of two only
    // (FNet's 768 fails), so tcbench runs them in f32 (docs/amp.md)
    case OP_FFT2_REAL:
    case OP_GRID_SAMPLE: // on autocast's float32 list
        return AC_F32;
    case OP_ADD:
    case OP_SUB:
    case OP_MUL:
    case OP_DIV:
    case OP_MAXIMUM:
    case OP_GE:
    case OP_WHERE:
    case OP_CONCAT: return AC_PROMOTE;
    default: return AC_KEEP;
    }
}

const char *autocast_rule_name(autocast_rule_kind r) {
    static const char *names[] = {"keep", "low", "f32", "promote"};
    return names[r];
}

typedef struct ac {
    const graph *in;
    graph *g;
    int *map;      // in node -> out node
    int *cast[2];  // in node -> its cast to low / to f32 in out, -1 none yet
    enum dtype low;
    const bool *pin; // in node -> held in low (autocast_build_pinned), or NULL
} ac;

// The out value of in node v as dtype t (made once, then shared).
static int as(ac *a, int v, enum dtype t) {
    int x = a->map[v];
    if (x < 0 || a->g->nodes[x].dtype == t || !dtype_is_float(a->g->nodes[x].dtype))
        return x;
    int *slot = &a->cast[t == DT_F32][v];
    if (*slot < 0)
        *slot = graph_autocast(a->g, x, t);
    return *slot;
}

static int copy_op(ac *a, int i) {
    const graph_node *n = &a->in->nodes[i];
    autocast_rule_kind r = autocast_rule(n->op);
    enum dtype want = r == AC_LOW ? a->low : DT_F32;
    if (r == AC_PROMOTE) { // the widest floating input
        want = a->low;
        bool any = false;
        for (int k = 0; k < n->nsrc; k++) {
            const graph_node *s = &a->g->nodes[a->map[n->src[k]]];
            if (!dtype_is_float(s->dtype))
                continue;
            if (s->dtype == DT_F32)
                want = DT_F32;
            any = true;
        }
        if (!any)
            r = AC_KEEP;
    }
    // a pinned op that only moves bytes moves them in low (the same values
    // as casting its result, one kernel fewer); any other has its result cast
    enum op_kind kind = op_kind(n->op);
    bool pinned = a->pin && a->pin[i];
    bool moves = kind == OPK_VIEW || kind == OPK_COPY || n->op == OP_KV_WRITE;
    if (pinned && moves)
        r = AC_LOW, want = a->low;
    int s[GRAPH_MAX_SRCS];
    for (int k = 0; k < n->nsrc; k++)
        if ((s[k] = r == AC_KEEP ? a->map[n->src[k]] : as(a, n->src[k], want)) < 0)
            return -1;
    int id = graph_op_shaped(a->g, n->op, n->nsrc, s, n->ia, n->fa, n->ndim, n->shape);
    if (id >= 0 && n->name)
        a->g->nodes[id].name = strdup(n->name);
    return pinned && !moves ? graph_autocast(a->g, id, a->low) : id;
}

// A source in low when pinned (a floating input or buffer; parameters stay f32).
static int copy_source(ac *a, int i) {
    graph_node n = a->in->nodes[i];
    if (a->pin && a->pin[i] && n.op != OP_PARAM && dtype_is_float(n.dtype))
        n.dtype = a->low;
    return graph_copy_source(a->g, &n);
}

int autocast_build(const graph *in, enum dtype low, graph **out, char *err, size_t cap) {
    return autocast_build_pinned(in, low, NULL, out, err, cap);
}

int autocast_build_pinned(const graph *in, enum dtype low, const bool *pin, graph **out, char *err,
                          size_t cap) {
    *out = NULL;
    if (low != DT_F16 && low != DT_BF16) {
        snprintf(err, cap, "autocast: %s is not a low-precision float this build supports",
                 dtype_name(low));
        return -1;
    }
    size_t nn = in->n > 0 ? (size_t)in->n : 1;
    ac a = {.in = in, .g = graph_new(), .low = low, .pin = pin};
    a.map = malloc(nn * sizeof *a.map);
    a.cast[0] = malloc(nn * sizeof *a.cast[0]);
    a.cast[1] = malloc(nn * sizeof *a.cast[1]);
    int rc = -1;
    if (!a.g || !a.map || !a.cast[0] || !a.cast[1]) {
        snprintf(err, cap, "autocast: out of memory");
        goto done;
    }
    for (int i = 0; i < in->n; i++)
        a.map[i] = a.cast[0][i] = a.cast[1][i] = -1;
    for (int i = 0; i < in->n; i++) {
        const graph_node *n = &in->nodes[i];
        enum op_kind k = op_kind(n->op);
        if (k == OPK_GRAD || (k == OPK_UPDATE && !op_update_readable(n))) {
            snprintf(err, cap, "autocast runs on the forward graph, before autograd (%%%d %s)", i,
                     op_name(n->op));
            goto done;
        }
        if (n->op == OP_BCE_LOSS && !n->ia[0]) { // torch.autocast raises on BCELoss too
            snprintf(err, cap,
                     "autocast: bce (BCELoss on probabilities) is unsafe to autocast, as "
                     "torch.autocast says: a sigmoid in f16 rounds to 0 or 1; use bce_with_logits");
            goto done;
        }
        a.map[i] = k == OPK_SOURCE ? copy_source(&a, i) : copy_op(&a, i);
        if (a.map[i] < 0) {
            snprintf(err, cap, "autocast: %%%d %s: %s", i, op_name(n->op), graph_error(a.g));
            goto done;
        }
    }
    for (int i = 0; i < in->noutputs; i++)
        graph_output(a.g, a.map[in->outputs[i]]);
    a.g->loss = in->loss >= 0 ? a.map[in->loss] : -1;
    *out = a.g;
    a.g = NULL;
    rc = 0;
done:
    graph_free(a.g);
    free(a.map);
    free(a.cast[0]);
    free(a.cast[1]);
    return rc;
}

int autocast_cache_params(graph *g) {
    int made = 0;
    for (int i = 0; i < g->n; i++) {
        graph_node *c = &g->nodes[i];
        if (c->op != OP_CAST || !c->ia[1] || !dtype_is_half(c->dtype))
            continue;
        const graph_node *p = &g->nodes[c->src[0]];
        if (p->op != OP_PARAM || p->dtype != DT_F32 || !p->name)
            continue;
        size_t len = strlen(p->name) + 8;
        char *name = malloc(len);
        if (!name)
            return -1;
        snprintf(name, len, "%s:%s", p->name, dtype_name(c->dtype));
        free(c->name);
        c->name = name;
        c->op = OP_BUFFER;
        c->nsrc = 0;
        memset(c->src, 0, sizeof c->src);
        memset(c->ia, 0, sizeof c->ia);
        memset(c->fa, 0, sizeof c->fa);
        c->ia[0] = INIT_ZEROS;
        c->ia[1] = AUTOCAST_CACHED;
        made++;
    }
    return made;
}

int autocast_cached_param(const graph *g, int v) {
    const graph_node *c = &g->nodes[v];
    const char *colon = autocast_copy(c) && c->name ? strrchr(c->name, ':') : NULL;
    if (!colon)
        return -1;
    size_t len = (size_t)(colon - c->name);
    for (int i = 0; i < g->n; i++) {
        const graph_node *p = &g->nodes[i];
        if (p->op == OP_PARAM && p->name && strlen(p->name) == len &&
            strncmp(p->name, c->name, len) == 0)
            return i;
    }
    return -1;
}
