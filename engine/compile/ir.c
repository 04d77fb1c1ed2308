// Helpers shared by the passes: layouts of views, scalar semantics of the
// pointwise ops (for constant folding), op classes.
#include "compile_internal.h"

#include "../backend/cpu/cpu_rules.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void clayout_contiguous(clayout *l, int ndim, const int64_t *shape) {
    l->ndim = ndim;
    l->offset = 0;
    memcpy(l->shape, shape, (size_t)ndim * sizeof *shape);
    tensor_strides_contiguous(ndim, shape, l->stride);
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

bool compile_is_pointwise(enum op op) {
    enum op_kind k = op_kind(op);
    // dropout needs the element's flat index and stays a library kernel
    return (k == OPK_UNARY || k == OPK_BINARY || k == OPK_WHERE || op == OP_CONTIGUOUS) &&
           op != OP_DROPOUT;
}

double compile_scalar_op(enum op op, const graph_node *n, const double *a) {
    double x = a[0];
    switch (op) {
    case OP_NEG: return -x;
    case OP_EXP: return exp(x);
    case OP_LOG: return log(x);
    case OP_SQRT: return sqrt(x);
    case OP_RSQRT: return 1 / sqrt(x);
    case OP_RECIP: return 1 / x;
    case OP_ABS: return fabs(x);
    case OP_TANH: return tanh(x);
    case OP_SIGMOID: return 1 / (1 + exp(-x));
    case OP_RELU: return x > 0 ? x : 0;
    case OP_RELU6: return x < 0 ? 0 : x > 6 ? 6 : x;
    case OP_GELU: return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    case OP_GELU_TANH:
        return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    case OP_SILU: return x / (1 + exp(-x));
    case OP_HARDSWISH: return x * fmin(fmax(x + 3, 0), 6) / 6;
    case OP_HARDSIGMOID: return fmin(fmax(x + 3, 0), 6) / 6;
    case OP_SCALE: return x * n->fa[0] + n->fa[1];
    case OP_CAST: return cpu_cast_value((enum dtype)n->ia[0], x); // as the kernel would store it
    case OP_CONTIGUOUS: return x;
    case OP_ADD: return x + a[1];
    case OP_SUB: return x - a[1];
    case OP_MUL: return x * a[1];
    case OP_DIV: return x / a[1];
    case OP_MAXIMUM: return (x != x || x > a[1]) ? x : a[1]; // NaN propagates, as eager
    case OP_WHERE: return x != 0 ? a[1] : a[2];
    default: return NAN;
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
