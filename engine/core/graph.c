#include "graph.h"

#include <assert.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    enum op_kind kind;
    int min_srcs, max_srcs;
} op_table[] = {
#define OP(U, l, k, a0, a1) [OP_##U] = {#l, k, a0, a1},
#include "ops.def"
#undef OP
};
static_assert(sizeof(op_table) / sizeof(op_table[0]) == OP_COUNT, "one op_table row per op");

const char *op_name(enum op op) { return op_table[op].name; }
enum op_kind op_kind(enum op op) { return op_table[op].kind; }
int op_min_srcs(enum op op) { return op_table[op].min_srcs; }
int op_max_srcs(enum op op) { return op_table[op].max_srcs; }

bool op_update_readable(const graph_node *n) { return n->op == OP_KV_WRITE; }

bool op_has_side_effect(const graph_node *n) {
    return op_kind(n->op) == OPK_UPDATE || (n->op == OP_BATCH_NORM && n->ia[0]);
}

int graph_scaler_src(const graph_node *n) {
    return (n->op == OP_SGD || n->op == OP_ADAMW) && n->ia[1] ? n->nsrc - 3 : -1;
}

graph *graph_new(void) {
    graph *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->loss = -1;
    return g;
}

void graph_free(graph *g) {
    if (!g)
        return;
    for (int i = 0; i < g->n; i++)
        free(g->nodes[i].name);
    free(g->nodes);
    free(g);
}

const char *graph_error(const graph *g) { return g->err; }

static int fail(graph *g, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->err, sizeof g->err, fmt, ap);
    va_end(ap);
    return -1;
}

static void shape_str(char *buf, size_t cap, int ndim, const int64_t *shape) {
    size_t o = (size_t)snprintf(buf, cap, "(");
    for (int i = 0; i < ndim && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (o < cap)
        snprintf(buf + o, cap - o, ")");
}

void graph_shape_str(int ndim, const int64_t *shape, char *buf, size_t cap) {
    shape_str(buf, cap, ndim, shape);
}

static const char *shape_s(char *buf, const graph_node *n) {
    shape_str(buf, 96, n->ndim, n->shape);
    return buf;
}

// Tensors larger than this are refused at build time: no model in a suite
// needs them, and the error beats an out-of-memory kill later.
#define GRAPH_MAX_BYTES ((int64_t)1 << 40)

static graph_node *push(graph *g) {
    if (g->n == g->cap) {
        int cap = g->cap ? g->cap * 2 : 256;
        graph_node *p = realloc(g->nodes, (size_t)cap * sizeof *p);
        if (!p)
            return NULL;
        g->nodes = p;
        g->cap = cap;
    }
    graph_node *n = &g->nodes[g->n];
    memset(n, 0, sizeof *n);
    return n;
}

static int commit(graph *g, graph_node *n) {
    for (int i = 0; i < n->ndim; i++)
        if (n->shape[i] <= 0) {
            char b[96];
            return fail(g, "%s would have shape %s: every dimension must be positive",
                        op_name(n->op), shape_s(b, n));
        }
    double bytes = (double)dtype_size(n->dtype);
    for (int i = 0; i < n->ndim; i++)
        bytes *= (double)n->shape[i];
    if (bytes > (double)GRAPH_MAX_BYTES) {
        char b[96];
        return fail(g, "%s of shape %s needs %.3g bytes, more than any machine here has",
                    op_name(n->op), shape_s(b, n), bytes);
    }
    return g->n++;
}

static char *dupname(const char *s) { return s ? strdup(s) : NULL; }

static int source(graph *g, enum op op, const char *name, enum dtype t, int ndim,
                  const int64_t *shape) {
    if (ndim < 0 || ndim > TENSOR_MAX_DIMS)
        return fail(g, "a tensor has %d dimensions; at most %d are supported", ndim,
                    TENSOR_MAX_DIMS);
    graph_node *n = push(g);
    if (!n)
        return fail(g, "out of memory building the graph");
    n->op = op;
    n->dtype = t;
    n->ndim = ndim;
    if (ndim > 0)
        memcpy(n->shape, shape, (size_t)ndim * sizeof *shape);
    int id = commit(g, n);
    if (id >= 0)
        g->nodes[id].name = dupname(name);
    return id;
}

int graph_input(graph *g, const char *name, enum dtype t, int ndim, const int64_t *shape) {
    return source(g, OP_INPUT, name, t, ndim, shape);
}

int graph_param(graph *g, const char *name, int ndim, const int64_t *shape, enum init_kind init,
                double scale) {
    int id = source(g, OP_PARAM, name, DT_F32, ndim, shape);
    if (id >= 0) {
        g->nodes[id].ia[0] = init;
        g->nodes[id].fa[0] = scale;
    }
    return id;
}

int graph_buffer(graph *g, const char *name, enum dtype t, int ndim, const int64_t *shape,
                 enum init_kind init, double arg) {
    int id = source(g, OP_BUFFER, name, t, ndim, shape);
    if (id >= 0) {
        g->nodes[id].ia[0] = init;
        g->nodes[id].fa[0] = arg;
    }
    return id;
}

int graph_full(graph *g, double value, enum dtype t, int ndim, const int64_t *shape) {
    int id = source(g, OP_FULL, NULL, t, ndim, shape);
    if (id >= 0)
        g->nodes[id].fa[0] = value;
    return id;
}

int graph_keep_params(graph *g, int from) {
    int w = from;
    for (int i = from; i < g->n; i++) {
        if (g->nodes[i].op == OP_PARAM)
            g->nodes[w++] = g->nodes[i];
        else
            free(g->nodes[i].name);
    }
    int kept = w - from;
    g->n = w;
    return kept;
}

int graph_copy_source(graph *g, const graph_node *n) {
    int id;
    switch (n->op) {
    case OP_INPUT: id = graph_input(g, n->name, n->dtype, n->ndim, n->shape); break;
    case OP_PARAM:
        id = graph_param(g, n->name, n->ndim, n->shape, (enum init_kind)n->ia[0], n->fa[0]);
        break;
    case OP_BUFFER:
        id = graph_buffer(g, n->name, n->dtype, n->ndim, n->shape, (enum init_kind)n->ia[0],
                          n->fa[0]);
        break;
    default: id = graph_full(g, n->fa[0], n->dtype, n->ndim, n->shape); break;
    }
    if (id >= 0) { // every attribute as it was (input ranges, init arguments)
        memcpy(g->nodes[id].ia, n->ia, sizeof n->ia);
        memcpy(g->nodes[id].fa, n->fa, sizeof n->fa);
    }
    return id;
}

// NumPy broadcasting of a list of shapes into out.
static bool broadcast(graph *g, int nsrc, const graph_node *const *s, graph_node *out) {
    int nd = 0;
    for (int i = 0; i < nsrc; i++)
        if (s[i]->ndim > nd)
            nd = s[i]->ndim;
    out->ndim = nd;
    for (int d = 0; d < nd; d++) {
        int64_t v = 1;
        for (int i = 0; i < nsrc; i++) {
            int k = d - (nd - s[i]->ndim);
            if (k < 0)
                continue;
            int64_t e = s[i]->shape[k];
            if (e == v || e == 1)
                continue;
            if (v != 1) {
                char a[96], b[96];
                fail(g, "%s: shapes %s and %s do not broadcast", op_name(out->op),
                     shape_s(a, s[0]), shape_s(b, s[i]));
                return false;
            }
            v = e;
        }
        out->shape[d] = v;
    }
    return true;
}

static bool same_shape(const graph_node *a, const graph_node *b) {
    if (a->ndim != b->ndim)
        return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i])
            return false;
    return true;
}

static void copy_shape(graph_node *dst, const graph_node *src) {
    dst->ndim = src->ndim;
    memcpy(dst->shape, src->shape, sizeof dst->shape);
}

static int norm_axis(graph *g, enum op op, int64_t axis, int ndim, int64_t *out) {
    if (axis < 0)
        axis += ndim;
    if (axis < 0 || axis >= ndim)
        return fail(g, "%s: axis %lld is out of range for %d dimensions", op_name(op),
                    (long long)axis, ndim);
    *out = axis;
    return 0;
}

// x -> padded: each dim gains ia[1 + 2d] before and ia[2 + 2d] after; a
// reflected pad stays below the dim's size, as F.pad's reflect mode
static int pad_shape(graph *g, const graph_node *n, const graph_node *x, int64_t *out) {
    char b0[96];
    if (x->ndim > PAD_MAX_DIMS)
        return fail(g, "pad: at most %d dims, got %s", PAD_MAX_DIMS, shape_s(b0, x));
    if (n->ia[0] != PAD_CONSTANT && n->ia[0] != PAD_REFLECT)
        return fail(g, "pad: unknown mode %lld", (long long)n->ia[0]);
    for (int d = 0; d < x->ndim; d++) {
        int64_t lo = n->ia[1 + 2 * d], hi = n->ia[2 + 2 * d];
        if (lo < 0 || hi < 0)
            return fail(g, "pad: dim %d's pads %lld, %lld must not be negative", d, (long long)lo,
                        (long long)hi);
        if (n->ia[0] == PAD_REFLECT && (lo >= x->shape[d] || hi >= x->shape[d]))
            return fail(g, "pad: reflect pads %lld, %lld of dim %d must be below its size %lld",
                        (long long)lo, (long long)hi, d, (long long)x->shape[d]);
        out[d] = x->shape[d] + lo + hi;
    }
    return 0;
}

// TRIL_GATHER's pair count of F features: below the diagonal, or on it too
static int64_t tril_pairs(int64_t F, int64_t itself) { return F * (F - 1) / 2 + (itself ? F : 0); }

// x (N, C, H, W), grid (N, Ho, Wo, 2) of x's float dtype -> (N, C, Ho, Wo)
static int grid_sample_shape(graph *g, const graph_node *n, const graph_node *x,
                             const graph_node *grid) {
    char b0[96], b1[96];
    if (x->ndim != 4 || grid->ndim != 4 || grid->shape[3] != 2 || grid->shape[0] != x->shape[0])
        return fail(g, "grid_sample: needs x (N, C, H, W) and grid (N, Ho, Wo, 2), got %s and %s",
                    shape_s(b0, x), shape_s(b1, grid));
    if (!dtype_is_float(x->dtype) || grid->dtype != x->dtype)
        return fail(g, "grid_sample: x and grid must share a float dtype, got %s and %s",
                    dtype_name(x->dtype), dtype_name(grid->dtype));
    if (n->ia[0] != GRID_PAD_ZEROS && n->ia[0] != GRID_PAD_BORDER)
        return fail(g, "grid_sample: unknown padding mode %lld", (long long)n->ia[0]);
    return 0;
}

static int conv_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
    return (int)((in + 2 * p - d * (k - 1) - 1) / s + 1);
}

// PyTorch's pooling_output_shape: ceil mode rounds the window count up, but
// a last window must start inside the input or its left padding.
static int pool_out(int64_t in, int64_t k, int64_t s, int64_t p, bool ceil_mode) {
    int64_t o = (in + 2 * p - k + (ceil_mode ? s - 1 : 0)) / s + 1;
    if (ceil_mode && (o - 1) * s >= in + p)
        o--;
    return (int)o;
}

// Backward ops whose output shape is stated (ndim_hint, shape_hint): the
// forward input's, checked against the gradient dy = s[0].
static int infer_grad_shaped(graph *g, graph_node *n, const graph_node *const *s, int ndim_hint,
                             const int64_t *shape_hint) {
    const graph_node *dy = s[0];
    char b0[96], b1[96];
    if (ndim_hint < 0 || ndim_hint > TENSOR_MAX_DIMS)
        return fail(g, "%s needs its output shape", op_name(n->op));
    n->ndim = ndim_hint;
    if (ndim_hint > 0)
        memcpy(n->shape, shape_hint, (size_t)ndim_hint * sizeof *shape_hint);
    if (n->op == OP_SUM_TO) {
        const graph_node *pair[2] = {dy, n};
        graph_node tmp = *n;
        if (n->ndim > dy->ndim || !broadcast(g, 2, pair, &tmp) || !same_shape(&tmp, dy))
            return fail(g, "sum_to: %s does not broadcast to %s", shape_s(b1, n), shape_s(b0, dy));
    } else if (n->op == OP_SLICE_GRAD) {
        if (norm_axis(g, n->op, n->ia[0], n->ndim, &n->ia[0]) < 0)
            return -1;
        bool ok = n->ndim == dy->ndim && n->ia[1] >= 0 &&
                  n->ia[1] + dy->shape[n->ia[0]] <= n->shape[n->ia[0]];
        for (int d = 0; ok && d < n->ndim; d++)
            ok = d == n->ia[0] || n->shape[d] == dy->shape[d];
        if (!ok)
            return fail(g, "slice_grad: %s is not a slice of %s", shape_s(b0, dy), shape_s(b1, n));
    } else if (n->op == OP_PAD_GRAD) {
        int64_t padded[TENSOR_MAX_DIMS];
        if (pad_shape(g, n, n, padded) < 0)
            return -1;
        bool ok = n->ndim == dy->ndim;
        for (int d = 0; ok && d < n->ndim; d++)
            ok = padded[d] == dy->shape[d];
        if (!ok)
            return fail(g, "pad_grad: %s is not %s padded", shape_s(b0, dy), shape_s(b1, n));
    } else if (n->op == OP_EMBEDDING_BAG_GRAD) {
        bool ok = n->ndim == 2 && dy->ndim == 2 && dy->shape[1] == n->shape[1];
        for (int k = 1; k < 3; k++)
            ok = ok && s[k]->ndim == 1 && (s[k]->dtype == DT_I32 || s[k]->dtype == DT_I64);
        if (!ok || s[2]->shape[0] != dy->shape[0])
            return fail(g, "embedding_bag_grad: %s, indices %s and offsets %s do not make %s",
                        shape_s(b0, dy), shape_s(b1, s[1]), shape_s(b1, s[2]), shape_s(b1, n));
    } else if (n->op == OP_TRIL_GATHER_GRAD) {
        if (n->ndim != 3 || n->shape[1] != n->shape[2] || dy->ndim != 2 ||
            dy->shape[0] != n->shape[0] || dy->shape[1] != tril_pairs(n->shape[1], n->ia[0]))
            return fail(g, "tril_gather_grad: %s is not the pairs of %s", shape_s(b0, dy),
                        shape_s(b1, n));
    } else if (n->op == OP_UPSAMPLE_BILINEAR_GRAD) {
        if (n->ndim != 4 || dy->ndim != 4 || dy->shape[0] != n->shape[0] ||
            dy->shape[1] != n->shape[1] || dy->shape[2] != n->ia[2] || dy->shape[3] != n->ia[3])
            return fail(g, "upsample_bilinear_grad: %s is not %s upsampled", shape_s(b0, dy),
                        shape_s(b1, n));
    } else if (n->op == OP_GRID_SAMPLE_GRAD) {
        if (grid_sample_shape(g, n, n, s[1]) < 0)
            return -1;
        if (dy->ndim != 4 || dy->shape[0] != n->shape[0] || dy->shape[1] != n->shape[1] ||
            dy->shape[2] != s[1]->shape[1] || dy->shape[3] != s[1]->shape[2])
            return fail(g, "grid_sample_grad: %s is not sampled from %s by grid %s",
                        shape_s(b0, dy), shape_s(b1, n), shape_s(b1, s[1]));
    } else if (n->op == OP_EMBEDDING_GRAD) {
        if (n->ndim != 2 || dy->ndim != s[1]->ndim + 1 || dy->shape[dy->ndim - 1] != n->shape[1] ||
            (s[1]->dtype != DT_I32 && s[1]->dtype != DT_I64))
            return fail(g, "embedding_grad: %s and indices %s do not make %s", shape_s(b0, dy),
                        shape_s(b1, s[1]), shape_s(b1, n));
    } else if (n->ndim != 4 || dy->ndim != 4) {
        return fail(g, "%s: needs 4-d shapes, got %s and %s", op_name(n->op), shape_s(b0, dy),
                    shape_s(b1, n));
    }
    return 0;
}

// Backward ops: the output has dy's shape, a stated shape (the forward
// input's), or the weight gradients' (2, C) / (C).
static int infer_attention_grad(graph *g, graph_node *n, const graph_node *const *s);

// LSTM: x (B, T, I), w_ih (4H, I), w_hh (4H, H), b_ih, b_hh (4H), all of
// x's float dtype -> (K, B, T, H), K 6 in training (ia1), else 1
static int infer_rnn(graph *g, graph_node *n, const graph_node *const *s) {
    char b0[96], b1[96], b2[96];
    const graph_node *x = s[0], *wi = s[1], *wh = s[2];
    if (x->ndim != 3 || wi->ndim != 2 || wh->ndim != 2 || wh->shape[0] != 4 * wh->shape[1] ||
        wi->shape[0] != wh->shape[0] || wi->shape[1] != x->shape[2])
        return fail(g, "lstm: needs x (B, T, I), w_ih (4H, I), w_hh (4H, H); got %s, %s, %s",
                    shape_s(b0, x), shape_s(b1, wi), shape_s(b2, wh));
    for (int k = 0; k < 5; k++) {
        if (s[k]->dtype != x->dtype || !dtype_is_float(x->dtype))
            return fail(g, "lstm: every input must have x's float dtype, input %d is %s", k,
                        dtype_name(s[k]->dtype));
        if (k >= 3 && (s[k]->ndim != 1 || s[k]->shape[0] != wi->shape[0]))
            return fail(g, "lstm: the biases must be (%lld), got %s", (long long)wi->shape[0],
                        shape_s(b0, s[k]));
    }
    n->ndim = 4;
    n->shape[0] = n->ia[1] ? 6 : 1;
    n->shape[1] = x->shape[0];
    n->shape[2] = x->shape[1];
    n->shape[3] = wh->shape[1];
    return 0;
}

// LSTM_GRAD: dy, x, w_ih, w_hh, y = lstm's training output -> flat grads
static int infer_lstm_grad(graph *g, graph_node *n, const graph_node *const *s) {
    char b0[96], b1[96], b2[96];
    const graph_node *x = s[1], *wi = s[2], *wh = s[3], *y = s[4];
    if (x->ndim != 3 || wi->ndim != 2 || wh->ndim != 2 || y->ndim != 4 || y->shape[0] != 6 ||
        !same_shape(s[0], y) || y->shape[1] != x->shape[0] || y->shape[2] != x->shape[1] ||
        wh->shape[0] != 4 * y->shape[3] || wh->shape[1] != y->shape[3] ||
        wi->shape[0] != wh->shape[0] || wi->shape[1] != x->shape[2])
        return fail(g, "lstm_grad: dy %s and y %s must be lstm's training output over x %s",
                    shape_s(b0, s[0]), shape_s(b1, y), shape_s(b2, x));
    int64_t H = wh->shape[1], I = wi->shape[1];
    n->ndim = 1;
    n->shape[0] = graph_node_numel(x) + 4 * H * I + 4 * H * H + 4 * H;
    return 0;
}

static int infer_grad(graph *g, graph_node *n, const graph_node *const *s, int ndim_hint,
                      const int64_t *shape_hint) {
    const graph_node *dy = s[0];
    char b0[96], b1[96];
    n->dtype = dy->dtype;
    if (!dtype_is_float(dy->dtype))
        return fail(g, "%s: the gradient must be floating point, got %s", op_name(n->op),
                    dtype_name(dy->dtype));
    switch (n->op) {
    case OP_BATCH_NORM_STATS: // s[0] is x, not a gradient
        if (dy->ndim < 2 || dy->shape[0] * graph_node_numel(dy) / (dy->shape[0] * dy->shape[1]) < 2)
            return fail(g, "batch_norm_stats needs (N, C, ...) input with more than one value "
                           "per channel, got %s", shape_s(b0, dy));
        n->ndim = 2;
        n->shape[0] = 3;
        n->shape[1] = dy->shape[1];
        return 0;
    case OP_ACT_GRAD:
    case OP_SOFTMAX_GRAD:
    case OP_LOG_SOFTMAX_GRAD:
    case OP_LAYER_NORM_GRAD:
    case OP_RMS_NORM_GRAD:
    case OP_BATCH_NORM_GRAD:
    case OP_GROUP_NORM_GRAD:
    case OP_MAX_POOL2D_GRAD:
        copy_shape(n, dy);
        if (n->op == OP_MAX_POOL2D_GRAD)
            copy_shape(n, s[1]);
        else if (!same_shape(dy, s[1]))
            return fail(g, "%s: %s and %s differ", op_name(n->op), shape_s(b0, dy),
                        shape_s(b1, s[1]));
        if (n->op == OP_ACT_GRAD &&
            (n->ia[0] < 0 || n->ia[0] >= OP_COUNT || op_kind((enum op)n->ia[0]) != OPK_UNARY))
            return fail(g, "act_grad: ia0 must name a unary op");
        return 0;
    case OP_LAYER_NORM_WGRAD:
    case OP_RMS_NORM_WGRAD:
    case OP_BATCH_NORM_WGRAD:
    case OP_GROUP_NORM_WGRAD: {
        if (!same_shape(dy, s[1]) || dy->ndim < (n->op == OP_BATCH_NORM_WGRAD ||
                                                  n->op == OP_GROUP_NORM_WGRAD ? 2 : 1))
            return fail(g, "%s: %s and %s differ", op_name(n->op), shape_s(b0, dy),
                        shape_s(b1, s[1]));
        bool chan = n->op == OP_BATCH_NORM_WGRAD || n->op == OP_GROUP_NORM_WGRAD;
        int64_t c = chan ? dy->shape[1] : dy->shape[dy->ndim - 1];
        n->ndim = n->op == OP_RMS_NORM_WGRAD ? 1 : 2;
        n->shape[0] = n->ndim == 2 ? 2 : c;
        n->shape[1] = c;
        return 0;
    }
    case OP_ATTENTION_GRAD: return infer_attention_grad(g, n, s);
    case OP_LSTM_GRAD: return infer_lstm_grad(g, n, s);
    case OP_FOUND_INF: // s[0] the scale, s[1] with ia0 an earlier flag
        n->ndim = 0;
        n->dtype = DT_F32;
        for (int i = 0; i < n->nsrc; i++)
            if (!dtype_is_float(s[i]->dtype) ||
                ((i == 0 || (i == 1 && n->ia[0])) && (s[i]->ndim != 0 || s[i]->dtype != DT_F32)))
                return fail(g, "found_inf: needs an f32 scale () (and flag, with ia0), then "
                               "floating-point tensors");
        if (n->ia[0] && n->nsrc < 3)
            return fail(g, "found_inf: a chained flag needs tensors to check as well");
        return 0;
    case OP_GRID_SAMPLE_GRAD_GRID: {
        const graph_node *x = s[1], *grid = s[2];
        if (grid_sample_shape(g, n, x, grid) < 0)
            return -1;
        if (dy->ndim != 4 || dy->shape[0] != x->shape[0] || dy->shape[1] != x->shape[1] ||
            dy->shape[2] != grid->shape[1] || dy->shape[3] != grid->shape[2])
            return fail(g, "grid_sample_grad_grid: %s is not sampled from %s by grid %s",
                        shape_s(b0, dy), shape_s(b1, x), shape_s(b1, grid));
        copy_shape(n, grid);
        return 0;
    }
    case OP_CROSS_ENTROPY_GRAD:
    case OP_CTC_LOSS_GRAD:
    case OP_MSE_LOSS_GRAD:
    case OP_BCE_LOSS_GRAD:
        if (dy->ndim != 0)
            return fail(g, "%s: the loss gradient must be a scalar", op_name(n->op));
        copy_shape(n, s[1]);
        return 0;
    default:
        break;
    }
    return infer_grad_shaped(g, n, s, ndim_hint, shape_hint);
}

// Shape and dtype inference, one helper a family of op kinds. Each fills n
// (op, srcs and attributes already set, dtype the first source's) from its
// sources s and returns 0, or sets g's error and returns -1.

static int infer_unary(graph *g, graph_node *n, const graph_node *const *s) {
    const graph_node *x = s[0];
    copy_shape(n, x);
    if (n->op == OP_CAST)
        n->dtype = (enum dtype)n->ia[0];
    else if (!dtype_is_float(x->dtype))
        return fail(g, "%s needs a floating-point input, got %s", op_name(n->op),
                    dtype_name(x->dtype));
    return 0;
}

static int infer_binary(graph *g, graph_node *n, const graph_node *const *s) {
    if (!broadcast(g, 2, s, n))
        return -1;
    if (s[0]->dtype != s[1]->dtype)
        return fail(g, "%s: dtypes %s and %s differ (cast one first)", op_name(n->op),
                    dtype_name(s[0]->dtype), dtype_name(s[1]->dtype));
    if (n->op == OP_GE)
        n->dtype = DT_BOOL;
    return 0;
}

static int infer_where(graph *g, graph_node *n, const graph_node *const *s) {
    if (s[0]->dtype != DT_BOOL)
        return fail(g, "where: the condition must be bool, got %s", dtype_name(s[0]->dtype));
    if (s[1]->dtype != s[2]->dtype)
        return fail(g, "where: dtypes %s and %s differ", dtype_name(s[1]->dtype),
                    dtype_name(s[2]->dtype));
    n->dtype = s[1]->dtype;
    return broadcast(g, 3, s, n) ? 0 : -1;
}

static int infer_reduce(graph *g, graph_node *n, const graph_node *const *s) {
    const graph_node *x = s[0];
    if (norm_axis(g, n->op, n->ia[0], x->ndim, &n->ia[0]) < 0)
        return -1;
    copy_shape(n, x);
    n->shape[n->ia[0]] = 1;
    return 0;
}

static int infer_norm(graph *g, graph_node *n, const graph_node *const *s) {
    const graph_node *x = s[0];
    char b0[96];
    copy_shape(n, x);
    if (x->ndim < 1 || !dtype_is_float(x->dtype))
        return fail(g, "%s needs a floating-point tensor", op_name(n->op));
    int64_t c = x->shape[x->ndim - 1];
    if ((n->op == OP_SOFTMAX || n->op == OP_LOG_SOFTMAX) && (n->ia[0] < 0 || n->ia[0] >= x->ndim))
        return fail(g, "%s: axis %lld before the last is outside %s", op_name(n->op),
                    (long long)n->ia[0], shape_s(b0, x));
    if (n->op == OP_BATCH_NORM || n->op == OP_GROUP_NORM || n->op == OP_INSTANCE_NORM) {
        if (x->ndim < 2)
            return fail(g, "%s needs (N, C, ...) input, got %s", op_name(n->op), shape_s(b0, x));
        c = x->shape[1];
    }
    if (n->op == OP_GROUP_NORM && (n->ia[0] <= 0 || c % n->ia[0]))
        return fail(g, "group_norm: %lld channels do not split into %lld groups", (long long)c,
                    (long long)n->ia[0]);
    if (n->op == OP_INSTANCE_NORM && n->ia[0] != c)
        return fail(g, "instance_norm: ia0 must be the %lld channels, got %lld", (long long)c,
                    (long long)n->ia[0]);
    for (int i = 1; i < n->nsrc; i++)
        if (s[i]->ndim != 1 || s[i]->shape[0] != c)
            return fail(g, "%s: parameter %d has shape %s, expected (%lld)", op_name(n->op), i,
                        shape_s(b0, s[i]), (long long)c);
    return 0;
}

static int infer_linear(graph *g, graph_node *n, const graph_node *const *s) {
    const graph_node *x = s[0], *w = s[1];
    char b0[96], b1[96];
    if (x->ndim < 1 || w->ndim != 2 || x->shape[x->ndim - 1] != w->shape[1])
        return fail(g, "linear: input %s does not match weight %s (last dim must be %lld)",
                    shape_s(b0, x), shape_s(b1, w), w->ndim == 2 ? (long long)w->shape[1] : -1LL);
    if (n->nsrc == 3 && (s[2]->ndim != 1 || s[2]->shape[0] != w->shape[0]))
        return fail(g, "linear: bias %s does not match %lld outputs", shape_s(b0, s[2]),
                    (long long)w->shape[0]);
    copy_shape(n, x);
    n->shape[n->ndim - 1] = w->shape[0];
    return 0;
}

static int infer_matmul(graph *g, graph_node *n, const graph_node *const *s) {
    const graph_node *a = s[0], *bm = s[1];
    char b0[96], b1[96];
    if (a->ndim < 2 || bm->ndim < 2)
        return fail(g, "matmul needs at least 2-d operands, got %s and %s", shape_s(b0, a),
                    shape_s(b1, bm));
    if (a->shape[a->ndim - 1] != bm->shape[bm->ndim - 2])
        return fail(g, "matmul: %s @ %s: inner dimensions differ", shape_s(b0, a), shape_s(b1, bm));
    if (a->dtype != bm->dtype)
        return fail(g, "matmul: dtypes %s and %s differ", dtype_name(a->dtype),
                    dtype_name(bm->dtype));
    graph_node ba = *a, bb = *bm;
    ba.ndim -= 2;
    bb.ndim -= 2;
    const graph_node *pair[2] = {&ba, &bb};
    if (!broadcast(g, 2, pair, n))
        return -1;
    n->shape[n->ndim++] = a->shape[a->ndim - 2];
    n->shape[n->ndim++] = bm->shape[bm->ndim - 1];
    if (n->ndim > TENSOR_MAX_DIMS)
        return fail(g, "matmul: too many dimensions");
    return 0;
}

static int infer_conv(graph *g, graph_node *n, const graph_node *const *s) {
    const graph_node *x = s[0], *w = s[1];
    char b0[96], b1[96];
    if (x->ndim != 4 || w->ndim != 4)
        return fail(g, "%s needs 4-d input and weight, got %s and %s", op_name(n->op),
                    shape_s(b0, x), shape_s(b1, w));
    int64_t groups = n->ia[6] ? n->ia[6] : 1;
    n->ia[6] = groups;
    for (int i = 0; i < 2; i++) {
        if (n->ia[i] <= 0)
            n->ia[i] = 1;
        if (n->ia[4 + i] <= 0)
            n->ia[4 + i] = 1;
    }
    int64_t C = x->shape[1], O;
    if (n->op == OP_CONV2D) {
        O = w->shape[0];
        if (C % groups || O % groups || w->shape[1] != C / groups)
            return fail(g, "conv2d: input %s, weight %s and groups %lld do not agree",
                        shape_s(b0, x), shape_s(b1, w), (long long)groups);
    } else {
        O = w->shape[1] * groups;
        if (w->shape[0] != C || C % groups)
            return fail(g, "conv_transpose2d: input %s, weight %s and groups %lld do not agree",
                        shape_s(b0, x), shape_s(b1, w), (long long)groups);
    }
    if (n->nsrc == 3 && (s[2]->ndim != 1 || s[2]->shape[0] != O))
        return fail(g, "%s: bias must have %lld elements", op_name(n->op), (long long)O);
    n->ndim = 4;
    n->shape[0] = x->shape[0];
    n->shape[1] = O;
    for (int i = 0; i < 2; i++) {
        int64_t in = x->shape[2 + i], k = w->shape[2 + i];
        int64_t st = n->ia[i], p = n->ia[2 + i], d = n->ia[4 + i];
        if (n->op == OP_CONV2D)
            n->shape[2 + i] = conv_out(in, k, st, p, d);
        else
            n->shape[2 + i] = (in - 1) * st - 2 * p + d * (k - 1) + n->ia[7 + i] + 1;
    }
    return 0;
}

static int infer_pool(graph *g, graph_node *n, const graph_node *const *s) {
    const graph_node *x = s[0];
    char b0[96];
    if (x->ndim != 4)
        return fail(g, "%s needs (N, C, H, W) input, got %s", op_name(n->op), shape_s(b0, x));
    copy_shape(n, x);
    if (n->op == OP_UPSAMPLE_NEAREST) {
        if (n->ia[0] < 1)
            return fail(g, "upsample: scale must be a positive integer");
        n->shape[2] *= n->ia[0];
        n->shape[3] *= n->ia[0];
        return 0;
    }
    if (n->op == OP_UPSAMPLE_BILINEAR) {
        if (n->ia[2] < 1 || n->ia[3] < 1)
            return fail(g, "upsample_bilinear: output sizes must be positive");
        n->shape[2] = n->ia[2];
        n->shape[3] = n->ia[3];
        return 0;
    }
    for (int i = 0; i < 2; i++) {
        if (n->ia[4 + i] <= 0)
            return fail(g, "%s: kernel size must be positive", op_name(n->op));
        if (n->ia[i] <= 0)
            n->ia[i] = n->ia[4 + i];
        if (2 * n->ia[2 + i] > n->ia[4 + i])
            return fail(g, "%s: padding must be at most half the kernel", op_name(n->op));
        n->shape[2 + i] =
            pool_out(x->shape[2 + i], n->ia[4 + i], n->ia[i], n->ia[2 + i], n->ia[6] != 0);
    }
    if (n->ia[7] && n->op != OP_AVG_POOL2D)
        return fail(g, "%s: only avg_pool2d can leave the padding out of its count",
                    op_name(n->op));
    return 0;
}

// dequant and qlinear (ops.def): qweight (N, K) i8 or (N, ceil(K/2)) u8,
// scales (N, ceil(K / group)) f32 or f16; ia0 bits, ia1 group, ia2 K.
static int infer_quant(graph *g, graph_node *n, const graph_node *const *s) {
    char b0[96], b1[96];
    const char *what = op_name(n->op);
    bool dq = n->op == OP_DEQUANT;
    const graph_node *q = s[dq ? 0 : 1], *sc = s[dq ? 1 : 2];
    int64_t bits = n->ia[0], group = n->ia[1], K = n->ia[2];
    if ((bits != 4 && bits != 8) || group < 1 || K < 1)
        return fail(g, "%s: bits %lld, group %lld, K %lld: bits must be 4 or 8, group and K "
                    "positive",
                    what, (long long)bits, (long long)group, (long long)K);
    int64_t N = q->shape[0], G = (K + group - 1) / group;
    if (q->ndim != 2 || q->dtype != (bits == 8 ? DT_I8 : DT_U8) ||
        q->shape[1] != (bits == 8 ? K : (K + 1) / 2))
        return fail(g, "%s: int%lld weights of width %lld must be (N, %lld) %s, got %s %s", what,
                    (long long)bits, (long long)K, (long long)(bits == 8 ? K : (K + 1) / 2),
                    bits == 8 ? "i8" : "u8", shape_s(b0, q), dtype_name(q->dtype));
    if (sc->ndim != 2 || sc->shape[0] != N || sc->shape[1] != G ||
        (sc->dtype != DT_F32 && sc->dtype != DT_F16))
        return fail(g, "%s: scales must be (%lld, %lld) f32 or f16, got %s %s", what,
                    (long long)N, (long long)G, shape_s(b1, sc), dtype_name(sc->dtype));
    if (dq) {
        n->ndim = 2;
        n->shape[0] = N;
        n->shape[1] = K;
        n->dtype = DT_F32;
        return 0;
    }
    const graph_node *x = s[0];
    if (x->ndim < 1 || x->shape[x->ndim - 1] != K || !dtype_is_float(x->dtype))
        return fail(g, "qlinear: x %s %s must be floats with last dim %lld", shape_s(b0, x),
                    dtype_name(x->dtype), (long long)K);
    if (n->nsrc > 3 && (s[3]->ndim != 1 || s[3]->shape[0] != N))
        return fail(g, "qlinear: bias %s must be (%lld)", shape_s(b0, s[3]), (long long)N);
    copy_shape(n, x);
    n->shape[n->ndim - 1] = N;
    return 0;
}

static int infer_gather(graph *g, graph_node *n, const graph_node *const *s) {
    char b0[96], b1[96], b2[96];
    if (n->op == OP_DEQUANT || n->op == OP_QLINEAR)
        return infer_quant(g, n, s);
    if (n->op == OP_EMBEDDING_BAG) {
        bool ok = s[0]->ndim == 2 && n->ia[0] == EMBEDDING_BAG_SUM;
        for (int k = 1; k < 3; k++)
            ok = ok && s[k]->ndim == 1 && (s[k]->dtype == DT_I32 || s[k]->dtype == DT_I64);
        if (!ok)
            return fail(g,
                        "embedding_bag: needs a table (V, D), indices (N) and offsets (B), "
                        "both i32 or i64, mode sum; got %s, %s %s, %s %s",
                        shape_s(b0, s[0]), dtype_name(s[1]->dtype), shape_s(b1, s[1]),
                        dtype_name(s[2]->dtype), shape_s(b2, s[2]));
        n->ndim = 2;
        n->shape[0] = s[2]->shape[0];
        n->shape[1] = s[0]->shape[1];
        n->dtype = s[0]->dtype;
        return 0;
    }
    if (n->op == OP_GRID_SAMPLE) {
        if (grid_sample_shape(g, n, s[0], s[1]) < 0)
            return -1;
        n->ndim = 4;
        int64_t shape[4] = {s[0]->shape[0], s[0]->shape[1], s[1]->shape[1], s[1]->shape[2]};
        memcpy(n->shape, shape, sizeof shape);
        return 0;
    }
    if (s[0]->ndim != 2)
        return fail(g, "embedding: the table must be 2-d, got %s", shape_s(b0, s[0]));
    if (s[1]->dtype != DT_I32 && s[1]->dtype != DT_I64)
        return fail(g, "embedding: indices must be i32 or i64, got %s", dtype_name(s[1]->dtype));
    if (s[1]->ndim + 1 > TENSOR_MAX_DIMS)
        return fail(g, "embedding: too many index dimensions");
    copy_shape(n, s[1]);
    n->shape[n->ndim++] = s[0]->shape[1];
    n->dtype = s[0]->dtype;
    return 0;
}

static int infer_fft(graph *g, graph_node *n, const graph_node *x) {
    char b0[96];
    if (x->ndim < 2)
        return fail(g, "%s: needs (..., S, H) input, got %s", op_name(n->op), shape_s(b0, x));
    if (!dtype_is_float(x->dtype))
        return fail(g, "%s: needs a float input, got %s", op_name(n->op), dtype_name(x->dtype));
    copy_shape(n, x);
    n->dtype = x->dtype;
    return 0;
}

static int infer_permute(graph *g, graph_node *n, const graph_node *x) {
    bool seen[TENSOR_MAX_DIMS] = {0};
    n->ndim = x->ndim;
    for (int i = 0; i < x->ndim; i++) {
        int64_t p = n->ia[i];
        if (p < 0)
            p += x->ndim;
        if (p < 0 || p >= x->ndim || seen[p])
            return fail(g, "permute: not a permutation of %d axes", x->ndim);
        seen[p] = true;
        n->ia[i] = p;
        n->shape[i] = x->shape[p];
    }
    return 0;
}

// The views but permute: the shape is given (shape_hint), and checked.
static int infer_view(graph *g, graph_node *n, const graph_node *const *s, int ndim_hint,
                      const int64_t *shape_hint) {
    const graph_node *x = s[0];
    char b0[96], b1[96];
    if (n->op == OP_PERMUTE)
        return infer_permute(g, n, x);
    if (ndim_hint < 0 || ndim_hint > TENSOR_MAX_DIMS)
        return fail(g, "%s: bad rank %d", op_name(n->op), ndim_hint);
    n->ndim = ndim_hint;
    if (ndim_hint > 0)
        memcpy(n->shape, shape_hint, (size_t)ndim_hint * sizeof *shape_hint);
    if (n->op == OP_RESHAPE) {
        if (shape_numel(n->ndim, n->shape) != shape_numel(x->ndim, x->shape))
            return fail(g, "reshape: %s has %lld elements, %s has %lld", shape_s(b0, x),
                        (long long)shape_numel(x->ndim, x->shape), shape_s(b1, n),
                        (long long)shape_numel(n->ndim, n->shape));
    } else if (n->op == OP_SLICE) {
        if (norm_axis(g, n->op, n->ia[0], x->ndim, &n->ia[0]) < 0)
            return -1;
        if (n->ndim != x->ndim || n->ia[1] < 0 ||
            n->ia[1] + n->shape[n->ia[0]] > x->shape[n->ia[0]])
            return fail(g, "slice: out of range of %s", shape_s(b0, x));
    } else if (n->op == OP_EXPAND) {
        const graph_node *pair[2] = {x, n};
        graph_node tmp = *n;
        if (!broadcast(g, 2, pair, &tmp) || !same_shape(&tmp, n))
            return fail(g, "expand: %s does not broadcast to %s", shape_s(b0, x), shape_s(b1, n));
    }
    return 0;
}

// unfold and fold (ops.def): the geometry checked, unfold's image size kept in ia6,7
static int infer_im2col(graph *g, graph_node *n, const graph_node *x) {
    char b0[96];
    const char *what = op_name(n->op);
    bool un = n->op == OP_UNFOLD;
    int64_t *ia = n->ia;
    if (x->ndim != (un ? 4 : 3))
        return fail(g, "%s needs %s input, got %s", what, un ? "(N, C, H, W)" : "(N, C kh kw, L)",
                    shape_s(b0, x));
    if (un)
        ia[6] = x->shape[2], ia[7] = x->shape[3];
    int64_t oh[2];
    for (int i = 0; i < 2; i++) {
        if (ia[i] < 1 || ia[2 + i] < 0 || ia[4 + i] < 1 || ia[6 + i] + 2 * ia[2 + i] < ia[i])
            return fail(g, "%s: kernel %lld, padding %lld, stride %lld over %lld positions", what,
                        (long long)ia[i], (long long)ia[2 + i], (long long)ia[4 + i],
                        (long long)ia[6 + i]);
        oh[i] = (ia[6 + i] + 2 * ia[2 + i] - ia[i]) / ia[4 + i] + 1;
    }
    int64_t kk = ia[0] * ia[1];
    n->ndim = un ? 3 : 4;
    n->shape[0] = x->shape[0];
    if (un) {
        n->shape[1] = x->shape[1] * kk;
        n->shape[2] = oh[0] * oh[1];
        return 0;
    }
    if (x->shape[1] % kk || x->shape[2] != oh[0] * oh[1])
        return fail(g, "fold: %s is not (N, C %lld, %lld blocks)", shape_s(b0, x), (long long)kk,
                    (long long)(oh[0] * oh[1]));
    n->shape[1] = x->shape[1] / kk;
    n->shape[2] = ia[6];
    n->shape[3] = ia[7];
    return 0;
}

static int infer_copy(graph *g, graph_node *n, const graph_node *const *s) {
    const graph_node *x = s[0];
    char b0[96], b1[96];
    copy_shape(n, x);
    if (n->op == OP_ROLL) { // shifts of any sign, kept in [0, size); none past the rank
        for (int d = 0; d < GRAPH_MAX_IA; d++) {
            if (d >= x->ndim && n->ia[d])
                return fail(g, "roll: a shift along axis %d of a %s input", d, shape_s(b0, x));
            if (d < x->ndim)
                n->ia[d] = ((n->ia[d] % x->shape[d]) + x->shape[d]) % x->shape[d];
        }
        return 0;
    }
    if (n->op == OP_UNFOLD || n->op == OP_FOLD)
        return infer_im2col(g, n, x);
    if (n->op == OP_PAD)
        return pad_shape(g, n, x, n->shape);
    if (n->op == OP_TRIL_GATHER) {
        if (x->ndim != 3 || x->shape[1] != x->shape[2] || (n->ia[0] != 0 && n->ia[0] != 1))
            return fail(g, "tril_gather: needs (B, F, F) and ia0 0 or 1, got %s and %lld",
                        shape_s(b0, x), (long long)n->ia[0]);
        n->ndim = 2;
        n->shape[1] = tril_pairs(x->shape[1], n->ia[0]);
        return 0;
    }
    if (n->op != OP_CONCAT)
        return 0;
    if (norm_axis(g, n->op, n->ia[0], x->ndim, &n->ia[0]) < 0)
        return -1;
    int ax = (int)n->ia[0];
    n->shape[ax] = 0;
    for (int i = 0; i < n->nsrc; i++) {
        bool ok = s[i]->ndim == x->ndim && s[i]->dtype == x->dtype;
        for (int d = 0; ok && d < x->ndim; d++)
            ok = d == ax || s[i]->shape[d] == x->shape[d];
        if (!ok)
            return fail(g, "concat: %s and %s differ off axis %d", shape_s(b0, x),
                        shape_s(b1, s[i]), ax);
        n->shape[ax] += s[i]->shape[ax];
    }
    return 0;
}

// CTC_LOSS: log_probs (T, B, C) float, targets (B, S) and lengths (B) integers
static int infer_ctc(graph *g, const graph_node *n, const graph_node *const *s) {
    char b0[96], b1[96], b2[96];
    const graph_node *lp = s[0], *tg = s[1], *len = s[2];
    if (lp->ndim != 3 || tg->ndim != 2 || len->ndim != 1 || tg->shape[0] != lp->shape[1] ||
        len->shape[0] != lp->shape[1] || !dtype_is_float(lp->dtype))
        return fail(g,
                    "ctc_loss: needs float log_probs (T, B, C), targets (B, S), lengths (B); "
                    "got %s, %s, %s",
                    shape_s(b0, lp), shape_s(b1, tg), shape_s(b2, len));
    for (int k = 1; k <= 2; k++)
        if (s[k]->dtype != DT_I32 && s[k]->dtype != DT_I64)
            return fail(g, "ctc_loss: targets and lengths must be integers, input %d is %s", k,
                        dtype_name(s[k]->dtype));
    if (n->ia[0] < 0 || n->ia[0] >= lp->shape[2])
        return fail(g, "ctc_loss: blank %lld is not a class of %lld", (long long)n->ia[0],
                    (long long)lp->shape[2]);
    return 0;
}

static int infer_loss(graph *g, graph_node *n, const graph_node *const *s) {
    char b0[96], b1[96];
    n->ndim = 0;
    n->dtype = DT_F32;
    if (n->op == OP_MSE_LOSS || n->op == OP_BCE_LOSS) {
        if (!same_shape(s[0], s[1]))
            return fail(g, "%s: prediction %s and target %s differ", op_name(n->op),
                        shape_s(b0, s[0]), shape_s(b1, s[1]));
        if (n->op == OP_BCE_LOSS && (!dtype_is_float(s[0]->dtype) || !dtype_is_float(s[1]->dtype)))
            return fail(g, "bce_loss: prediction and target must be floating point, got %s and %s",
                        dtype_name(s[0]->dtype), dtype_name(s[1]->dtype));
        return 0;
    }
    if (n->op == OP_CTC_LOSS)
        return infer_ctc(g, n, s);
    if (s[0]->ndim != 2 || s[1]->ndim != 1 || s[0]->shape[0] != s[1]->shape[0])
        return fail(g, "cross_entropy: logits %s and targets %s must be (N, C) and (N)",
                    shape_s(b0, s[0]), shape_s(b1, s[1]));
    if (s[1]->dtype != DT_I32 && s[1]->dtype != DT_I64)
        return fail(g, "cross_entropy: targets must be integers, got %s", dtype_name(s[1]->dtype));
    return 0;
}

// The new rows fit the cache in every dimension but the sequence (axis 2),
// and the position is an integer scalar read at run time.
static int infer_kv_write(graph *g, const graph_node *n, const graph_node *const *s) {
    (void)n;
    const graph_node *c = s[0], *v = s[1], *pos = s[2];
    char b0[96], b1[96];
    if (c->ndim != 4 || v->ndim != 4 || c->shape[0] != v->shape[0] || c->shape[1] != v->shape[1] ||
        c->shape[3] != v->shape[3] || v->shape[2] > c->shape[2])
        return fail(g, "kv_write: rows %s do not fit cache %s", shape_s(b0, v), shape_s(b1, c));
    if (c->dtype != v->dtype || !dtype_is_float(c->dtype))
        return fail(g, "kv_write: rows of %s into a cache of %s", dtype_name(v->dtype),
                    dtype_name(c->dtype));
    if (pos->ndim != 0 || (pos->dtype != DT_I32 && pos->dtype != DT_I64))
        return fail(g, "kv_write: the position must be an i32 or i64 scalar (), got %s %s",
                    dtype_name(pos->dtype), shape_s(b0, pos));
    return 0;
}

static int infer_update(graph *g, graph_node *n, const graph_node *const *s) {
    const graph_node *x = s[0];
    char b0[96], b1[96];
    copy_shape(n, x);
    if (n->op == OP_KV_WRITE)
        return infer_kv_write(g, n, s);
    if (!same_shape(x, s[1]) || x->dtype != s[1]->dtype || !dtype_is_float(x->dtype))
        return fail(g, "%s: gradient %s does not match %s", op_name(n->op), shape_s(b0, s[1]),
                    shape_s(b1, x));
    int end = n->ia[1] && (n->op == OP_SGD || n->op == OP_ADAMW) ? n->nsrc - 3 : n->nsrc;
    if ((n->op == OP_SGD && (end < 2 || end > 3)) || (n->op == OP_ADAMW && end != 4))
        return fail(g, "%s: %d inputs do not make its state%s", op_name(n->op), n->nsrc,
                    n->ia[1] ? " and the grad scaler's three" : "");
    if (n->op == OP_SCALER_UPDATE && (x->ndim != 0 || x->dtype != DT_F32))
        return fail(g, "scaler_update: the scale and its counters must be f32 scalars ()");
    for (int i = 2; i < end; i++)
        if (!same_shape(x, s[i]) || s[i]->dtype != x->dtype)
            return fail(g, "%s: state %d has shape %s, expected %s", op_name(n->op), i,
                        shape_s(b0, s[i]), shape_s(b1, x));
    for (int i = end; i < n->nsrc; i++)
        if (s[i]->ndim != 0 || s[i]->dtype != DT_F32)
            return fail(g, "%s: the grad scaler's input %d must be an f32 scalar ()",
                        op_name(n->op), i);
    return 0;
}

// ATTENTION's contract (ops.def): q (B, H, T, D), k (B, KVH, S, D),
// v (B, KVH, S, Dv); the bias and valid-length sources named by ia1, ia2.
static int infer_attention(graph *g, graph_node *n, const graph_node *const *s) {
    static const char *role[] = {"q", "k", "v"};
    char b0[96], b1[96];
    for (int i = 0; i < 3; i++) {
        if (s[i]->ndim != 4)
            return fail(g, "attention: %s must be 4-d (batch, heads, positions, head dim), got %s",
                        role[i], shape_s(b0, s[i]));
        if (s[i]->dtype != s[0]->dtype || (s[i]->dtype != DT_F32 && !dtype_is_half(s[i]->dtype)))
            return fail(g,
                        "attention: q, k and v must be all f32 or all one 16-bit float, got %s, "
                        "%s, %s",
                        dtype_name(s[0]->dtype), dtype_name(s[1]->dtype), dtype_name(s[2]->dtype));
    }
    const graph_node *q = s[0], *k = s[1], *v = s[2];
    int64_t B = q->shape[0], H = q->shape[1], T = q->shape[2], KVH = k->shape[1], S = k->shape[2];
    if (k->shape[0] != B || v->shape[0] != B || v->shape[1] != KVH || v->shape[2] != S)
        return fail(g,
                    "attention: k %s and v %s must share batch, kv heads and length, with q's "
                    "batch %lld",
                    shape_s(b0, k), shape_s(b1, v), (long long)B);
    if (k->shape[3] != q->shape[3])
        return fail(g, "attention: q %s and k %s differ in head dim", shape_s(b0, q),
                    shape_s(b1, k));
    if (KVH < 1 || H % KVH)
        return fail(g, "attention: %lld query heads are not a multiple of %lld kv heads",
                    (long long)H, (long long)KVH);
    if (n->ia[0] != 0 && n->ia[0] != 1)
        return fail(g, "attention: ia0 (causal) must be 0 or 1, got %lld", (long long)n->ia[0]);
    int64_t bi = n->ia[1], li = n->ia[2];
    if ((bi && (bi < 3 || bi >= n->nsrc)) || (li && (li < 3 || li >= n->nsrc)) ||
        (bi && bi == li) || n->nsrc != 3 + (bi != 0) + (li != 0))
        return fail(g,
                    "attention: %d inputs, but bias index %lld and length index %lld must name "
                    "the inputs after q, k, v, each once",
                    n->nsrc, (long long)bi, (long long)li);
    if (bi) {
        const graph_node *m = s[bi];
        int64_t full[4] = {B, H, T, S};
        bool ok = m->ndim <= 4 && (m->dtype == DT_F32 || dtype_is_half(m->dtype));
        for (int i = 0; ok && i < m->ndim; i++) {
            int64_t e = m->shape[i], want = full[4 - m->ndim + i];
            ok = e == 1 || e == want;
        }
        if (!ok)
            return fail(g,
                        "attention: the bias %s %s does not broadcast to (%lld, %lld, %lld, %lld)",
                        dtype_name(m->dtype), shape_s(b0, m), (long long)B, (long long)H,
                        (long long)T, (long long)S);
    }
    if (li) {
        const graph_node *m = s[li];
        if ((m->dtype != DT_I32 && m->dtype != DT_I64) || m->ndim > 1 ||
            (m->ndim == 1 && m->shape[0] != B))
            return fail(g,
                        "attention: the valid length must be i32 or i64 of shape () or (%lld), "
                        "got %s %s",
                        (long long)B, dtype_name(m->dtype), shape_s(b0, m));
    }
    copy_shape(n, q);
    n->shape[3] = v->shape[3];
    return 0;
}

// ATTENTION_GRAD: dy, then attention's q, k, v, its output y, then its bias
// and valid length at ia1, ia2 (at least 5), checked as attention's are.
static int infer_attention_grad(graph *g, graph_node *n, const graph_node *const *s) {
    const graph_node *fs[5] = {s[1], s[2], s[3]};
    graph_node f = *n;
    char b0[96], b1[96];
    f.op = OP_ATTENTION;
    f.nsrc = n->nsrc - 2;
    for (int k = 1; k <= 2; k++) {
        if (!n->ia[k])
            continue;
        if (n->ia[k] < 5 || n->ia[k] >= n->nsrc)
            return fail(g, "attention_grad: input index %lld (ia%d) must name an input after y",
                        (long long)n->ia[k], k);
        f.ia[k] = n->ia[k] - 2;
        fs[f.ia[k]] = s[n->ia[k]];
    }
    if (infer_attention(g, &f, fs) < 0)
        return -1;
    for (int i = 0; i <= 4; i += 4)
        if (!same_shape(s[i], &f) || s[i]->dtype != s[1]->dtype)
            return fail(g, "attention_grad: %s %s %s must be attention's output, %s %s",
                        i ? "y" : "dy", dtype_name(s[i]->dtype), shape_s(b0, s[i]),
                        dtype_name(s[1]->dtype), shape_s(b1, &f));
    n->dtype = s[1]->dtype;
    n->ndim = 1;
    n->shape[0] = graph_node_numel(s[1]) + graph_node_numel(s[2]) + graph_node_numel(s[3]);
    return 0;
}

// Fills n (op, srcs and attributes already set); ndim_hint and shape_hint
// are the stated output shape of the ops that take one (views, some grads).
static int infer(graph *g, graph_node *n, int ndim_hint, const int64_t *shape_hint) {
    const graph_node *s[GRAPH_MAX_SRCS];
    for (int i = 0; i < n->nsrc; i++)
        s[i] = &g->nodes[n->src[i]];
    if (n->nsrc)
        n->dtype = s[0]->dtype;
    switch (op_kind(n->op)) {
    case OPK_SOURCE:
        return fail(g, "sources are made with graph_input/param/buffer/full");
    case OPK_UNARY:
        return infer_unary(g, n, s);
    case OPK_BINARY:
        return infer_binary(g, n, s);
    case OPK_WHERE:
        return infer_where(g, n, s);
    case OPK_REDUCE:
        return infer_reduce(g, n, s);
    case OPK_NORM:
        return infer_norm(g, n, s);
    case OPK_GEMM:
        return n->op == OP_LINEAR ? infer_linear(g, n, s) : infer_matmul(g, n, s);
    case OPK_CONV:
        return infer_conv(g, n, s);
    case OPK_POOL:
        return infer_pool(g, n, s);
    case OPK_GATHER:
        return infer_gather(g, n, s);
    case OPK_VIEW:
        return infer_view(g, n, s, ndim_hint, shape_hint);
    case OPK_COPY:
        return infer_copy(g, n, s);
    case OPK_LOSS:
        return infer_loss(g, n, s);
    case OPK_GRAD:
        return infer_grad(g, n, s, ndim_hint, shape_hint);
    case OPK_UPDATE:
        return infer_update(g, n, s);
    case OPK_ATTENTION: return infer_attention(g, n, s);
    case OPK_FFT: return infer_fft(g, n, s[0]);
    case OPK_RNN: return infer_rnn(g, n, s);
    }
    return fail(g, "unknown op kind");
}

int graph_op_shaped(graph *g, enum op op, int nsrc, const int *src, const int64_t *ia,
                    const double *fa, int ndim, const int64_t *shape) {
    if (nsrc < op_min_srcs(op) || nsrc > op_max_srcs(op))
        return fail(g, "%s takes %d to %d inputs, got %d", op_name(op), op_min_srcs(op),
                    op_max_srcs(op), nsrc);
    for (int i = 0; i < nsrc; i++)
        if (src[i] < 0 || src[i] >= g->n)
            return fail(g, "%s: input %d does not exist", op_name(op), i);
    graph_node *n = push(g);
    if (!n)
        return fail(g, "out of memory building the graph");
    n->op = op;
    n->nsrc = nsrc;
    memcpy(n->src, src, (size_t)nsrc * sizeof *src);
    if (ia)
        memcpy(n->ia, ia, sizeof n->ia);
    if (fa)
        memcpy(n->fa, fa, sizeof n->fa);
    if (infer(g, n, ndim, shape) < 0)
        return -1;
    return commit(g, n);
}

int graph_op(graph *g, enum op op, int nsrc, const int *src, const int64_t *ia, const double *fa) {
    return graph_op_shaped(g, op, nsrc, src, ia, fa, -1, NULL);
}

int graph_unary(graph *g, enum op op, int x) {
    if (x < 0)
        return -1;
    return graph_op(g, op, 1, &x, NULL, NULL);
}

int graph_binary(graph *g, enum op op, int a, int b) {
    if (a < 0 || b < 0)
        return -1;
    return graph_op(g, op, 2, (int[]){a, b}, NULL, NULL);
}

int graph_scale(graph *g, int x, double mul, double add) {
    if (x < 0)
        return -1;
    return graph_op(g, OP_SCALE, 1, &x, NULL, (double[GRAPH_MAX_FA]){mul, add});
}

int graph_reshape(graph *g, int x, int ndim, const int64_t *shape) {
    if (x < 0)
        return -1;
    int64_t s[TENSOR_MAX_DIMS];
    int infer_at = -1;
    int64_t known = 1;
    if (ndim > TENSOR_MAX_DIMS)
        return fail(g, "reshape: at most %d dimensions", TENSOR_MAX_DIMS);
    for (int i = 0; i < ndim; i++) {
        s[i] = shape[i];
        if (s[i] == -1) {
            if (infer_at >= 0)
                return fail(g, "reshape: only one dimension may be -1");
            infer_at = i;
        } else {
            known *= s[i];
        }
    }
    if (infer_at >= 0) {
        int64_t total = graph_node_numel(&g->nodes[x]);
        if (known <= 0 || total % known)
            return fail(g, "reshape: %lld elements do not divide by %lld", (long long)total,
                        (long long)known);
        s[infer_at] = total / known;
    }
    return graph_op_shaped(g, OP_RESHAPE, 1, &x, NULL, NULL, ndim, s);
}

int graph_permute(graph *g, int x, const int *perm) {
    if (x < 0)
        return -1;
    int64_t ia[GRAPH_MAX_IA] = {0};
    for (int i = 0; i < g->nodes[x].ndim; i++)
        ia[i] = perm[i];
    return graph_op(g, OP_PERMUTE, 1, &x, ia, NULL);
}

int graph_slice(graph *g, int x, int axis, int64_t start, int64_t len) {
    if (x < 0)
        return -1;
    const graph_node *n = &g->nodes[x];
    int64_t s[TENSOR_MAX_DIMS];
    memcpy(s, n->shape, sizeof s);
    int a = axis < 0 ? axis + n->ndim : axis;
    if (a < 0 || a >= n->ndim)
        return fail(g, "slice: axis %d out of range", axis);
    s[a] = len;
    return graph_op_shaped(g, OP_SLICE, 1, &x, (int64_t[GRAPH_MAX_IA]){a, start}, NULL, n->ndim,
                           s);
}

int graph_cast(graph *g, int x, enum dtype t) {
    if (x < 0)
        return -1;
    if (g->nodes[x].dtype == t)
        return x;
    return graph_op(g, OP_CAST, 1, &x, (int64_t[GRAPH_MAX_IA]){t}, NULL);
}

int graph_autocast(graph *g, int x, enum dtype t) {
    if (x < 0)
        return -1;
    if (g->nodes[x].dtype == t)
        return x;
    return graph_op(g, OP_CAST, 1, &x, (int64_t[GRAPH_MAX_IA]){t, 1}, NULL);
}

int graph_reduce(graph *g, enum op op, int x, int axis) {
    if (x < 0)
        return -1;
    return graph_op(g, op, 1, &x, (int64_t[GRAPH_MAX_IA]){axis}, NULL);
}

void graph_output(graph *g, int node) {
    assert(g->noutputs < (int)(sizeof g->outputs / sizeof g->outputs[0]));
    g->outputs[g->noutputs++] = node;
}

int64_t graph_node_numel(const graph_node *n) { return shape_numel(n->ndim, n->shape); }
size_t graph_node_bytes(const graph_node *n) {
    return (size_t)graph_node_numel(n) * dtype_size(n->dtype);
}

int64_t graph_param_count(const graph *g) {
    int64_t c = 0;
    for (int i = 0; i < g->n; i++)
        if (g->nodes[i].op == OP_PARAM)
            c += graph_node_numel(&g->nodes[i]);
    return c;
}

double graph_flops(const graph *g) {
    double f = 0;
    for (int i = 0; i < g->n; i++) {
        const graph_node *n = &g->nodes[i];
        const graph_node *x = n->nsrc ? &g->nodes[n->src[0]] : NULL;
        double out = (double)graph_node_numel(n);
        switch (op_kind(n->op)) {
        case OPK_GATHER:
            if (n->op == OP_QLINEAR)
                f += 2 * out * (double)n->ia[2];
            else if (n->op == OP_EMBEDDING_BAG) // one add per gathered element
                f += (double)graph_node_numel(&g->nodes[n->src[1]]) * (double)n->shape[1];
            else if (n->op == OP_GRID_SAMPLE) // four taps, each a multiply-add
                f += 8 * out;
            break;
        case OPK_GEMM: {
            double k = (double)x->shape[x->ndim - 1];
            f += 2 * out * k + (n->nsrc == 3 ? out : 0);
            break;
        }
        case OPK_CONV: {
            const graph_node *w = &g->nodes[n->src[1]];
            double per = (double)w->shape[1] * w->shape[2] * w->shape[3];
            if (n->op == OP_CONV2D)
                f += 2 * out * per;
            else // each input element scatters into O/g * kh * kw outputs
                f += 2 * (double)graph_node_numel(x) * per;
            break;
        }
        case OPK_UNARY:
        case OPK_BINARY:
        case OPK_WHERE:
            f += out;
            break;
        case OPK_REDUCE:
        case OPK_LOSS:
            f += (double)graph_node_numel(x);
            break;
        case OPK_NORM:
            f += 5 * out;
            break;
        case OPK_ATTENTION: { // two GEMMs: q k^T and p v (the mask's savings not counted)
            const graph_node *k = &g->nodes[n->src[1]];
            f += 2 * out * (double)k->shape[2] * (1 + (double)x->shape[3] / (double)n->shape[3]);
            break;
        }
        case OPK_POOL:
            f += out * (double)(n->op == OP_UPSAMPLE_NEAREST    ? 1
                                : n->op == OP_UPSAMPLE_BILINEAR ? 8 // four multiply-adds
                                                                : n->ia[4] * n->ia[5]);
            break;
        case OPK_RNN: { // two GEMMs a step (x w_ih^T, h w_hh^T), the cell's ~10 flops a gate
            double bt = (double)n->shape[1] * n->shape[2], H = (double)n->shape[3];
            f += bt * 4 * H * (2 * (double)x->shape[2] + 2 * H + 3);
            break;
        }
        case OPK_FFT: // a real-input 2-D FFT: 2.5 N log2(S H), half a complex one's 5 N log2 N
            f += 2.5 * out * log2((double)n->shape[n->ndim - 2] * (double)n->shape[n->ndim - 1]);
            break;
        default:
            break;
        }
    }
    return f;
}

double graph_min_bytes(const graph *g) {
    double b = 0;
    for (int i = 0; i < g->n; i++)
        if (g->nodes[i].op == OP_INPUT || g->nodes[i].op == OP_PARAM || g->nodes[i].op == OP_BUFFER)
            b += (double)graph_node_bytes(&g->nodes[i]);
    for (int i = 0; i < g->noutputs; i++)
        b += (double)graph_node_bytes(&g->nodes[g->outputs[i]]);
    if (g->loss >= 0)
        b += (double)graph_node_bytes(&g->nodes[g->loss]);
    return b;
}

int *graph_use_counts(const graph *g) {
    int *u = calloc((size_t)(g->n ? g->n : 1), sizeof *u);
    if (!u)
        return NULL;
    for (int i = 0; i < g->n; i++)
        for (int j = 0; j < g->nodes[i].nsrc; j++)
            u[g->nodes[i].src[j]]++;
    for (int i = 0; i < g->noutputs; i++)
        u[g->outputs[i]]++;
    if (g->loss >= 0)
        u[g->loss]++;
    return u;
}

void graph_print(const graph *g, void *file) {
    FILE *f = file;
    for (int i = 0; i < g->n; i++) {
        const graph_node *n = &g->nodes[i];
        char b[96];
        fprintf(f, "%%%d = %s(", i, op_name(n->op));
        for (int j = 0; j < n->nsrc; j++)
            fprintf(f, j ? ", %%%d" : "%%%d", n->src[j]);
        fprintf(f, ") : %s%s", dtype_name(n->dtype), shape_s(b, n));
        if (n->name)
            fprintf(f, "  # %s", n->name);
        fputc('\n', f);
    }
    for (int i = 0; i < g->noutputs; i++)
        fprintf(f, "output %%%d\n", g->outputs[i]);
    if (g->loss >= 0)
        fprintf(f, "loss %%%d\n", g->loss);
}
