// Helpers shared by the passes: layouts of views, scalar semantics of the
// pointwise ops (for constant folding), op classes.
#include "compile_internal.h"

#include "../backend/cpu/cpu_formulas.h"
#include "core/op_rules.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void clayout_contiguous(clayout *l, int ndim, const int64_t *shape) {
    l->ndim = ndim;
    l->offset = 0;
    memcpy(l->shape, shape, (size_t)ndim * sizeof *shape);
    tensor_strides_contiguous(ndim, shape, l->stride);
}

bool clayout_is_contiguous(const clayout *l) {
    return tensor_strides_are_contiguous(l->ndim, l->shape, l->stride);
}

bool compile_same_shape(const graph_node *a, const graph_node *b) {
    return a->ndim == b->ndim &&
           memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof a->shape[0]) == 0;
}

// The same rule as tensor_reshape (a view when the strides allow it).
bool clayout_reshape(const clayout *in, int ndim, const int64_t *shape, clayout *out) {
    int64_t ns[TENSOR_MAX_DIMS];
    if (!tensor_strides_reshape(in->ndim, in->shape, in->stride, ndim, shape, ns))
        return false;
    out->ndim = ndim;
    out->offset = in->offset;
    memcpy(out->shape, shape, (size_t)ndim * sizeof *shape);
    memcpy(out->stride, ns, (size_t)ndim * sizeof *ns);
    return true;
}

// The ops with a formula (and a derivative) in core/pointwise.h.
static bool has_formula(int64_t op) {
    switch (op) {
#define X(U, l, a0, b0) case OP_##U:
        TC_POINTWISE_OPS(X)
#undef X
        return true;
    default: return false;
    }
}

bool compile_formula_expr(const graph_node *n, char *buf, size_t cap) {
    bool grad = n->op == OP_ACT_GRAD;
    int64_t op = grad ? n->ia[0] : n->op;
    if (!has_formula(op))
        return false;
    char a[48], b[48];
    compile_literal(a, sizeof a, n->fa[0]);
    compile_literal(b, sizeof b, n->fa[1]);
    if (grad)
        snprintf(buf, cap, "x0 * tc_d_%s(x1, %s, %s)", op_name((enum op)op), a, b);
    else
        snprintf(buf, cap, "tc_f_%s(x0, %s, %s)", op_name((enum op)op), a, b);
    return true;
}

bool compile_is_pointwise(const graph_node *n) {
    enum op_kind k = op_kind(n->op);
    if (n->op == OP_ACT_GRAD)
        return has_formula(n->ia[0]);
    // dropout and noise need the element's flat index and stay library kernels
    return (k == OPK_UNARY || k == OPK_BINARY || k == OPK_WHERE || n->op == OP_CONTIGUOUS) &&
           n->op != OP_DROPOUT && n->op != OP_NOISE;
}

bool compile_writes(const graph_node *n, int s) {
    switch (n->op) {
    case OP_SGD:
    case OP_ADAMW: // the parameter and the optimizer state, not the grad scaler's sources
        return s == 0 || (s >= 2 && (graph_scaler_src(n) < 0 || s < graph_scaler_src(n)));
    case OP_RUNNING_STAT:
    case OP_KV_WRITE: return s == 0;
    case OP_SCALER_UPDATE: return s <= 2;          // the scale and its two counts, not found_inf
    case OP_BATCH_NORM: return n->ia[0] && s >= 3; // training: the running statistics
    default: return false;
    }
}

int compile_update_row(const graph_node *n, double h[5]) {
    for (int i = 0; i < 5; i++)
        h[i] = n->fa[i];
    if (n->op == OP_SGD)
        h[4] = n->ia[0] != 0;
    return n->op == OP_ADAMW ? 0 : n->op == OP_RUNNING_STAT ? 3 : n->fa[1] != 0 ? 1 : 2;
}

bool compile_is_generated_update(const graph *g, const graph_node *n) {
    if (n->op != OP_SGD && n->op != OP_ADAMW && n->op != OP_RUNNING_STAT)
        return false;
    int end = graph_scaler_src(n) >= 0 ? graph_scaler_src(n) : n->nsrc;
    if (n->op == OP_SGD && n->fa[1] != 0 && end < 3)
        return false; // momentum without its buffer: cpu_sgd says so
    for (int s = 0; s < n->nsrc; s++)
        if (g->nodes[n->src[s]].dtype != DT_F32)
            return false;
    return true;
}

int compile_group_operands(const cprog *p, const kgroup *k, int *out, int cap) {
    int n = 0;
    if (k->kind != KG_UPDATE) {
        for (int i = 0; i < k->nargs; i++, n++)
            if (n < cap)
                out[n] = k->args[i];
        return n;
    }
    for (int m = 0; m < k->n; m++) {
        const graph_node *u = &p->g->nodes[k->nodes[m]];
        for (int s = 0; s < u->nsrc; s++, n++)
            if (n < cap)
                out[n] = u->src[s];
    }
    return n;
}

// A formula op of core/pointwise.h at x (its derivative for ACT_GRAD), in
// f32 as its kernel computes it; NAN for the other ops.
static double formula(enum op op, bool grad, const graph_node *n, double x) {
    float a = (float)n->fa[0], b = (float)n->fa[1], xf = (float)x;
    switch (op) {
#define X(U, l, a0, b0)                                                                            \
    case OP_##U: return grad ? tc_d_##l(xf, a, b) : tc_f_##l(xf, a, b);
        TC_POINTWISE_OPS(X)
#undef X
    default: return NAN;
    }
}

double compile_scalar_op(enum op op, const graph_node *n, const double *a) {
    double x = a[0];
    switch (op) {
    case OP_ACT_GRAD: return x * formula((enum op)n->ia[0], true, n, a[1]);
    case OP_GE: return x >= a[1] ? 1 : 0;
    case OP_CAST: return op_cast_value((enum dtype)n->ia[0], x); // as the kernel would store it
    case OP_CONTIGUOUS: return x;
    case OP_ADD: return x + a[1];
    case OP_SUB: return x - a[1];
    case OP_MUL: return x * a[1];
    case OP_DIV: return x / a[1];
    case OP_MAXIMUM: return (x != x || x > a[1]) ? x : a[1]; // NaN propagates, as eager
    case OP_WHERE: return x != 0 ? a[1] : a[2];
    default: return formula(op, false, n, x);
    }
}

int compile_arg_of(kgroup *k, int node) {
    for (int i = 0; i < k->nargs; i++)
        if (k->args[i] == node)
            return i;
    if (k->nargs == KG_MAX_ARGS)
        return -1;
    k->args[k->nargs] = node;
    return k->nargs++;
}

void compile_eff_strides(const cprog *p, int v, int nd, const int64_t *shape, int64_t *st) {
    const clayout *l = &p->info[v].lay;
    int pad = nd - l->ndim;
    for (int i = 0; i < nd; i++) {
        int j = i - pad;
        st[i] = (j < 0 || (l->shape[j] == 1 && shape[i] != 1)) ? 0 : l->stride[j];
    }
}

void compile_literal(char *buf, size_t cap, double v) {
    if (isnan(v))
        snprintf(buf, cap, "NAN");
    else if (isinf(v))
        snprintf(buf, cap, v > 0 ? "INFINITY" : "(-INFINITY)");
    else {
        snprintf(buf, cap, "%.9g", (double)(float)v);
        if (!strpbrk(buf, ".eEn")) // an integer: make it a float literal
            strncat(buf, ".0", cap - strlen(buf) - 1);
        strncat(buf, "f", cap - strlen(buf) - 1);
    }
}
