// The fp64 reference interpreter (ref.h): every op as the plainest loop
// over output elements, in double, views materialized by index arithmetic.
// Only the outermost loops of the heavy ops run in parallel (each output
// element is still one obvious sum), so real models stay checkable.
// Values of f16 and f32 nodes are not rounded to their dtype; CAST does
// round, by the rule the eager kernels share (backend/cpu/cpu_rules.h).
#include "ref.h"

#include "backend/cpu/cpu_rules.h"

#include <assert.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ref_ctx {
    const model *m;
    const graph *g;
    char *err;
    size_t errcap;
} ref_ctx;

// One function per op, named ref_<op> after ops.def: fills o (the node's
// numel doubles, row-major) from the inputs s[] (each its node's numel).
typedef int (*ref_fn)(ref_ctx *c, const graph_node *n, const double *const *s, double *o);

#define OP(U, l, k, a0, a1)                                                                        \
    static int ref_##l(ref_ctx *c, const graph_node *n, const double *const *s, double *o);
#include "ops.def"
#undef OP

static const ref_fn ref_table[] = {
#define OP(U, l, k, a0, a1) [OP_##U] = ref_##l,
#include "ops.def"
#undef OP
};
static_assert(sizeof ref_table / sizeof ref_table[0] == OP_COUNT,
              "ops.def: every op needs a ref_<name> function in ref.c");

static int fail(ref_ctx *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, c->errcap, fmt, ap);
    va_end(ap);
    return -1;
}

static const graph_node *src(const ref_ctx *c, const graph_node *n, int k) {
    return &c->g->nodes[n->src[k]];
}

// Advances a row-major multi-index; false after the last one.
static bool next_index(int nd, const int64_t *shape, int64_t *idx) {
    for (int d = nd - 1; d >= 0; d--) {
        if (++idx[d] < shape[d])
            return true;
        idx[d] = 0;
    }
    return false;
}

// Row-major offset in a tensor of shape (snd, sshape) of the element that
// broadcasts to index idx of an ond-dim tensor (NumPy rules: right-aligned,
// size-1 dims repeat).
static int64_t bcast_offset(int snd, const int64_t *sshape, int ond, const int64_t *idx) {
    int64_t off = 0;
    for (int d = 0; d < snd; d++) {
        int od = d + ond - snd;
        off = off * sshape[d] + (sshape[d] == 1 ? 0 : idx[od]);
    }
    return off;
}

// ---- sources ---------------------------------------------------------------

static int source(ref_ctx *c, const graph_node *n, double *o) {
    int id = (int)(n - c->g->nodes);
    const tensor *t = c->m->values ? c->m->values[id] : NULL;
    if (!t)
        return fail(c, "%s %%%d has no value: call model_init_values first", op_name(n->op), id);
    int64_t idx[TENSOR_MAX_DIMS] = {0}, i = 0;
    do
        o[i++] = tensor_get(t, idx);
    while (next_index(t->ndim, t->shape, idx));
    return 0;
}

#define REF_SOURCE(l)                                                                              \
    static int ref_##l(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {       \
        (void)s;                                                                                   \
        return source(c, n, o);                                                                    \
    }
REF_SOURCE(input)
REF_SOURCE(param)
REF_SOURCE(buffer)
REF_SOURCE(full)

// ---- unary -----------------------------------------------------------------

static double clamp6(double v) { return v < 0 ? 0 : v > 6 ? 6 : v; }

#define REF_UNARY(l, expr)                                                                         \
    static int ref_##l(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {       \
        (void)c;                                                                                   \
        int64_t count = graph_node_numel(n);                                                       \
        for (int64_t i = 0; i < count; i++) {                                                      \
            double x = s[0][i];                                                                    \
            o[i] = (expr);                                                                         \
        }                                                                                          \
        return 0;                                                                                  \
    }

// the formatter reads these expressions as declarations
// clang-format off
REF_UNARY(neg, -x)
REF_UNARY(exp, exp(x))
REF_UNARY(log, log(x))
REF_UNARY(sqrt, sqrt(x))
REF_UNARY(rsqrt, 1 / sqrt(x))
REF_UNARY(recip, 1 / x)
REF_UNARY(abs, fabs(x))
REF_UNARY(tanh, tanh(x))
REF_UNARY(sigmoid, 1 / (1 + exp(-x)))
REF_UNARY(relu, x < 0 ? 0 : x)
REF_UNARY(relu6, x < 0 ? 0 : x > 6 ? 6 : x)
REF_UNARY(gelu, 0.5 * x * (1 + erf(x / sqrt(2.0))))
REF_UNARY(gelu_tanh, 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))))
REF_UNARY(silu, x / (1 + exp(-x)))
REF_UNARY(hardswish, x * clamp6(x + 3) / 6)
REF_UNARY(hardsigmoid, clamp6(x + 3) / 6)
REF_UNARY(scale, x * n->fa[0] + n->fa[1])
REF_UNARY(cast, cpu_cast_value(n->dtype, x))
// clang-format on

static int ref_dropout(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    (void)c;
    uint64_t key = cpu_dropout_key(n->ia[0]);
    uint32_t thr = cpu_dropout_threshold(n->fa[0]);
    int64_t count = graph_node_numel(n);
    for (int64_t i = 0; i < count; i++)
        o[i] = cpu_dropout_keep(key, (uint64_t)i, thr) ? s[0][i] / (1 - n->fa[0]) : 0;
    return 0;
}

// ---- binary and where --------------------------------------------------------

static int binary(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    const graph_node *a = src(c, n, 0), *b = src(c, n, 1);
    int64_t idx[TENSOR_MAX_DIMS] = {0}, i = 0;
    bool is_int = !dtype_is_float(n->dtype);
    do {
        double x = s[0][bcast_offset(a->ndim, a->shape, n->ndim, idx)];
        double y = s[1][bcast_offset(b->ndim, b->shape, n->ndim, idx)];
        double r;
        switch (n->op) {
        case OP_ADD: r = x + y; break;
        case OP_SUB: r = x - y; break;
        case OP_MUL: r = x * y; break;
        case OP_DIV: r = x / y; break;
        default: r = (isnan(x) || x > y) ? x : y; break; // MAXIMUM, NaN wins
        }
        o[i++] = is_int ? cpu_cast_value(n->dtype, r) : r;
    } while (next_index(n->ndim, n->shape, idx));
    return 0;
}

#define REF_BINARY(l)                                                                              \
    static int ref_##l(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {       \
        return binary(c, n, s, o);                                                                 \
    }
REF_BINARY(add)
REF_BINARY(sub)
REF_BINARY(mul)
REF_BINARY(div)
REF_BINARY(maximum)

static int ref_where(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    const graph_node *m = src(c, n, 0), *a = src(c, n, 1), *b = src(c, n, 2);
    int64_t idx[TENSOR_MAX_DIMS] = {0}, i = 0;
    do {
        bool take = s[0][bcast_offset(m->ndim, m->shape, n->ndim, idx)] != 0;
        o[i++] = take ? s[1][bcast_offset(a->ndim, a->shape, n->ndim, idx)]
                      : s[2][bcast_offset(b->ndim, b->shape, n->ndim, idx)];
    } while (next_index(n->ndim, n->shape, idx));
    return 0;
}

// ---- reductions over one axis ----------------------------------------------

// x viewed as (outer, R, inner) around axis ax
static void split_axis(const graph_node *x, int ax, int64_t *outer, int64_t *R, int64_t *inner) {
    *outer = *inner = 1;
    for (int d = 0; d < ax; d++)
        *outer *= x->shape[d];
    for (int d = ax + 1; d < x->ndim; d++)
        *inner *= x->shape[d];
    *R = x->shape[ax];
}

static int reduce(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    int64_t outer, R, inner;
    split_axis(src(c, n, 0), (int)n->ia[0], &outer, &R, &inner);
    for (int64_t a = 0; a < outer; a++)
        for (int64_t i = 0; i < inner; i++) {
            const double *x = s[0] + a * R * inner + i;
            double acc = n->op == OP_MAX ? -INFINITY : 0;
            for (int64_t r = 0; r < R; r++) {
                double v = x[r * inner];
                if (n->op == OP_MAX)
                    acc = (isnan(v) || v > acc) ? v : acc;
                else
                    acc += v;
            }
            o[a * inner + i] = n->op == OP_MEAN ? acc / (double)R : acc;
        }
    return 0;
}

static int ref_sum(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    return reduce(c, n, s, o);
}
static int ref_mean(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    return reduce(c, n, s, o);
}
static int ref_max(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    return reduce(c, n, s, o);
}

// ---- softmax and norms -----------------------------------------------------

static void softmax_rows(const graph_node *n, const double *x, double *o, bool log_out) {
    int64_t C = n->shape[n->ndim - 1], rows = graph_node_numel(n) / C;
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * C;
        double m = -INFINITY, sum = 0;
        for (int64_t i = 0; i < C; i++)
            m = xr[i] > m ? xr[i] : m;
        for (int64_t i = 0; i < C; i++)
            sum += exp(xr[i] - m);
        for (int64_t i = 0; i < C; i++)
            o[r * C + i] = log_out ? xr[i] - m - log(sum) : exp(xr[i] - m) / sum;
    }
}

static int ref_softmax(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    (void)c;
    softmax_rows(n, s[0], o, false);
    return 0;
}

static int ref_log_softmax(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    (void)c;
    softmax_rows(n, s[0], o, true);
    return 0;
}

// layer_norm (bias given) and rms_norm (bias NULL) over the last axis
static void norm_rows(const graph_node *n, const double *x, const double *w, const double *b,
                      double *o) {
    int64_t C = n->shape[n->ndim - 1], rows = graph_node_numel(n) / C;
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * C;
        double mean = 0, var = 0;
        if (b) {
            for (int64_t i = 0; i < C; i++)
                mean += xr[i];
            mean /= (double)C;
        }
        for (int64_t i = 0; i < C; i++)
            var += (xr[i] - mean) * (xr[i] - mean);
        double inv = 1 / sqrt(var / (double)C + n->fa[0]);
        for (int64_t i = 0; i < C; i++)
            o[r * C + i] = (xr[i] - mean) * inv * w[i] + (b ? b[i] : 0);
    }
}

static int ref_layer_norm(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    (void)c;
    norm_rows(n, s[0], s[1], s[2], o);
    return 0;
}

static int ref_rms_norm(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    (void)c;
    norm_rows(n, s[0], s[1], NULL, o);
    return 0;
}

static int ref_batch_norm(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    (void)c;
    int64_t N = n->shape[0], C = n->shape[1], S = graph_node_numel(n) / (N * C);
    for (int64_t i = 0; i < N * C * S; i++) {
        int64_t ch = (i / S) % C;
        o[i] = (s[0][i] - s[3][ch]) / sqrt(s[4][ch] + n->fa[0]) * s[1][ch] + s[2][ch];
    }
    return 0;
}

static int ref_group_norm(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    (void)c;
    int64_t N = n->shape[0], C = n->shape[1], S = graph_node_numel(n) / (N * C);
    int64_t G = n->ia[0], len = C / G * S;
    for (int64_t ng = 0; ng < N * G; ng++) {
        const double *x = s[0] + ng * len;
        double mean = 0, var = 0;
        for (int64_t i = 0; i < len; i++)
            mean += x[i];
        mean /= (double)len;
        for (int64_t i = 0; i < len; i++)
            var += (x[i] - mean) * (x[i] - mean);
        double inv = 1 / sqrt(var / (double)len + n->fa[0]);
        for (int64_t i = 0; i < len; i++) {
            int64_t ch = (ng % G) * (C / G) + i / S;
            o[ng * len + i] = (x[i] - mean) * inv * s[1][ch] + s[2][ch];
        }
    }
    return 0;
}

// ---- matrix products ---------------------------------------------------------

static int ref_matmul(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    const graph_node *a = src(c, n, 0), *b = src(c, n, 1);
    int nb = n->ndim - 2;
    int64_t M = n->shape[nb], N = n->shape[nb + 1], K = a->shape[a->ndim - 1];
    int64_t batch = shape_numel(nb, n->shape);
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < batch * M; t++) {
        int64_t bi = t / M, i = t % M, idx[TENSOR_MAX_DIMS] = {0}, rest = bi;
        for (int d = nb - 1; d >= 0; d--) {
            idx[d] = rest % n->shape[d];
            rest /= n->shape[d];
        }
        const double *pa = s[0] + bcast_offset(a->ndim - 2, a->shape, nb, idx) * M * K + i * K;
        const double *pb = s[1] + bcast_offset(b->ndim - 2, b->shape, nb, idx) * K * N;
        for (int64_t j = 0; j < N; j++) {
            double acc = 0;
            for (int64_t k = 0; k < K; k++)
                acc += pa[k] * pb[k * N + j];
            o[t * N + j] = acc;
        }
    }
    return 0;
}

static int ref_linear(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    int64_t K = src(c, n, 1)->shape[1], N = n->shape[n->ndim - 1];
    int64_t rows = graph_node_numel(n) / N;
    const double *bias = n->nsrc > 2 ? s[2] : NULL;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < N; j++) {
            double acc = bias ? bias[j] : 0;
            for (int64_t k = 0; k < K; k++)
                acc += s[0][r * K + k] * s[1][j * K + k];
            o[r * N + j] = acc;
        }
    return 0;
}

// ---- images ------------------------------------------------------------------

// out[n, o, oh, ow] = bias[o] + sum over the group's input channels c and
// taps (i, j) of x[n, c, oh*s - p + i*d, ow*s - p + j*d] * w[o, c, i, j]
static int ref_conv2d(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    const graph_node *x = src(c, n, 0), *w = src(c, n, 1);
    int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3];
    int64_t O = n->shape[1], OH = n->shape[2], OW = n->shape[3];
    int64_t KH = w->shape[2], KW = w->shape[3], G = n->ia[6], Cg = C / G, Og = O / G;
    const int64_t *ia = n->ia;
#pragma omp parallel for schedule(static)
    for (int64_t no = 0; no < N * O; no++) {
        int64_t b = no / O, oc = no % O, g = oc / Og;
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                double acc = n->nsrc > 2 ? s[2][oc] : 0;
                for (int64_t ci = 0; ci < Cg; ci++)
                    for (int64_t i = 0; i < KH; i++)
                        for (int64_t j = 0; j < KW; j++) {
                            int64_t ih = oh * ia[0] - ia[2] + i * ia[4];
                            int64_t iw = ow * ia[1] - ia[3] + j * ia[5];
                            if (ih < 0 || ih >= H || iw < 0 || iw >= W)
                                continue;
                            acc += s[0][((b * C + g * Cg + ci) * H + ih) * W + iw] *
                                   s[1][((oc * Cg + ci) * KH + i) * KW + j];
                        }
                o[((b * O + oc) * OH + oh) * OW + ow] = acc;
            }
    }
    return 0;
}

// The adjoint of conv2d: input pixel (ih, iw) feeds output (ih*s - p + i*d,
// iw*s - p + j*d). Written as a gather over the input pixels that reach
// each output pixel, with weight w[c, o % Og, i, j].
static int ref_conv_transpose2d(ref_ctx *c, const graph_node *n, const double *const *s,
                                double *o) {
    const graph_node *x = src(c, n, 0), *w = src(c, n, 1);
    int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3];
    int64_t O = n->shape[1], OH = n->shape[2], OW = n->shape[3];
    int64_t KH = w->shape[2], KW = w->shape[3], G = n->ia[6], Cg = C / G, Og = O / G;
    const int64_t *ia = n->ia;
#pragma omp parallel for schedule(static)
    for (int64_t no = 0; no < N * O; no++) {
        int64_t b = no / O, oc = no % O, g = oc / Og;
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                double acc = n->nsrc > 2 ? s[2][oc] : 0;
                for (int64_t ci = g * Cg; ci < (g + 1) * Cg; ci++)
                    for (int64_t i = 0; i < KH; i++)
                        for (int64_t j = 0; j < KW; j++) {
                            int64_t th = oh + ia[2] - i * ia[4], tw = ow + ia[3] - j * ia[5];
                            if (th < 0 || tw < 0 || th % ia[0] || tw % ia[1])
                                continue;
                            int64_t ih = th / ia[0], iw = tw / ia[1];
                            if (ih >= H || iw >= W)
                                continue;
                            acc += s[0][((b * C + ci) * H + ih) * W + iw] *
                                   s[1][((ci * Og + oc % Og) * KH + i) * KW + j];
                        }
                o[((b * O + oc) * OH + oh) * OW + ow] = acc;
            }
    }
    return 0;
}

// max over the window's in-bounds pixels (padding is -inf); avg divides the
// in-bounds sum by the whole window (padding counts as zeros)
static int pool(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    const graph_node *x = src(c, n, 0);
    int64_t H = x->shape[2], W = x->shape[3], OH = n->shape[2], OW = n->shape[3];
    const int64_t *ia = n->ia;
    bool is_max = n->op == OP_MAX_POOL2D;
    for (int64_t p = 0; p < n->shape[0] * n->shape[1]; p++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                double acc = is_max ? -INFINITY : 0;
                for (int64_t i = 0; i < ia[4]; i++)
                    for (int64_t j = 0; j < ia[5]; j++) {
                        int64_t ih = oh * ia[0] - ia[2] + i, iw = ow * ia[1] - ia[3] + j;
                        if (ih < 0 || ih >= H || iw < 0 || iw >= W)
                            continue;
                        double v = s[0][(p * H + ih) * W + iw];
                        acc = is_max ? ((isnan(v) || v > acc) ? v : acc) : acc + v;
                    }
                o[(p * OH + oh) * OW + ow] = is_max ? acc : acc / (double)(ia[4] * ia[5]);
            }
    return 0;
}

static int ref_max_pool2d(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    return pool(c, n, s, o);
}
static int ref_avg_pool2d(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    return pool(c, n, s, o);
}

static int ref_upsample_nearest(ref_ctx *c, const graph_node *n, const double *const *s,
                                double *o) {
    (void)c;
    int64_t OH = n->shape[2], OW = n->shape[3], k = n->ia[0], H = OH / k, W = OW / k;
    for (int64_t p = 0; p < n->shape[0] * n->shape[1]; p++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++)
                o[(p * OH + oh) * OW + ow] = s[0][(p * H + oh / k) * W + ow / k];
    return 0;
}

// ---- data movement -------------------------------------------------------------

static int ref_embedding(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    const graph_node *t = src(c, n, 0);
    int64_t V = t->shape[0], D = t->shape[1], count = graph_node_numel(src(c, n, 1));
    for (int64_t i = 0; i < count; i++) {
        double id = s[1][i];
        if (id < 0 || id >= (double)V)
            return fail(c, "embedding: index %lld at position %lld is outside [0, %lld)",
                        (long long)id, (long long)i, (long long)V);
        memcpy(o + i * D, s[0] + (int64_t)id * D, (size_t)D * sizeof *o);
    }
    return 0;
}

static int copy_same(const graph_node *n, const double *x, double *o) {
    memcpy(o, x, (size_t)graph_node_numel(n) * sizeof *o);
    return 0;
}

static int ref_reshape(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    (void)c;
    return copy_same(n, s[0], o);
}

static int ref_contiguous(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    (void)c;
    return copy_same(n, s[0], o);
}

static int ref_permute(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    const graph_node *x = src(c, n, 0);
    int64_t xs[TENSOR_MAX_DIMS], idx[TENSOR_MAX_DIMS] = {0}, i = 0;
    tensor_strides_contiguous(x->ndim, x->shape, xs);
    do {
        int64_t off = 0;
        for (int d = 0; d < n->ndim; d++) // output dim d is input dim ia[d]
            off += idx[d] * xs[n->ia[d]];
        o[i++] = s[0][off];
    } while (next_index(n->ndim, n->shape, idx));
    return 0;
}

static int ref_slice(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    const graph_node *x = src(c, n, 0);
    int64_t idx[TENSOR_MAX_DIMS] = {0}, i = 0;
    do {
        int64_t off = 0;
        for (int d = 0; d < n->ndim; d++)
            off = off * x->shape[d] + idx[d] + (d == n->ia[0] ? n->ia[1] : 0);
        o[i++] = s[0][off];
    } while (next_index(n->ndim, n->shape, idx));
    return 0;
}

static int ref_expand(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    const graph_node *x = src(c, n, 0);
    int64_t idx[TENSOR_MAX_DIMS] = {0}, i = 0;
    do
        o[i++] = s[0][bcast_offset(x->ndim, x->shape, n->ndim, idx)];
    while (next_index(n->ndim, n->shape, idx));
    return 0;
}

static int ref_concat(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    int ax = (int)n->ia[0];
    int64_t idx[TENSOR_MAX_DIMS] = {0}, i = 0;
    do {
        int k = 0;
        int64_t at = idx[ax];
        while (at >= src(c, n, k)->shape[ax])
            at -= src(c, n, k++)->shape[ax];
        const graph_node *x = src(c, n, k);
        int64_t off = 0;
        for (int d = 0; d < n->ndim; d++)
            off = off * x->shape[d] + (d == ax ? at : idx[d]);
        o[i++] = s[k][off];
    } while (next_index(n->ndim, n->shape, idx));
    return 0;
}

// ---- losses --------------------------------------------------------------------

static int ref_cross_entropy(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    const graph_node *x = src(c, n, 0);
    int64_t N = x->shape[0], C = x->shape[1], count = 0;
    double total = 0;
    for (int64_t r = 0; r < N; r++) {
        int64_t t = (int64_t)s[1][r];
        if (t == n->ia[0])
            continue;
        if (t < 0 || t >= C)
            return fail(c, "cross_entropy: target %lld in row %lld is outside [0, %lld)",
                        (long long)t, (long long)r, (long long)C);
        const double *row = s[0] + r * C;
        double m = -INFINITY, sum = 0;
        for (int64_t i = 0; i < C; i++)
            m = row[i] > m ? row[i] : m;
        for (int64_t i = 0; i < C; i++)
            sum += exp(row[i] - m);
        total += m + log(sum) - row[t];
        count++;
    }
    o[0] = count ? total / (double)count : NAN;
    return 0;
}

static int ref_mse_loss(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    int64_t count = graph_node_numel(src(c, n, 0));
    double total = 0;
    for (int64_t i = 0; i < count; i++)
        total += (s[0][i] - s[1][i]) * (s[0][i] - s[1][i]);
    o[0] = total / (double)count;
    return 0;
}

// ---- the interpreter -------------------------------------------------------------

static void free_vals(int n, double **vals) {
    for (int i = 0; i < n; i++)
        free(vals[i]);
    free(vals);
}

// Every node's value; with keep_all false, each is freed after its last use
// (outputs and the loss are kept).
static double **ref_exec(const model *m, bool keep_all, char *err, size_t errcap) {
    const graph *g = m->g;
    ref_ctx c = {m, g, err, errcap};
    double **vals = calloc((size_t)(g->n ? g->n : 1), sizeof *vals);
    int *left = keep_all ? NULL : graph_use_counts(g);
    if (!vals || (!keep_all && !left)) {
        snprintf(err, errcap, "out of memory starting the reference run");
        free(vals);
        free(left);
        return NULL;
    }
    for (int i = 0; i < g->n; i++) {
        const graph_node *n = &g->nodes[i];
        const double *s[GRAPH_MAX_SRCS];
        for (int j = 0; j < n->nsrc; j++)
            s[j] = vals[n->src[j]];
        vals[i] = malloc((size_t)graph_node_numel(n) * sizeof **vals);
        if (!vals[i]) {
            snprintf(err, errcap, "out of memory in the reference run at %%%d %s", i,
                     op_name(n->op));
            goto fail;
        }
        if (ref_table[n->op](&c, n, s, vals[i]) < 0)
            goto fail;
        if (keep_all)
            continue;
        for (int j = 0; j < n->nsrc; j++)
            if (--left[n->src[j]] == 0) {
                free(vals[n->src[j]]);
                vals[n->src[j]] = NULL;
            }
        if (left[i] == 0) {
            free(vals[i]);
            vals[i] = NULL;
        }
    }
    free(left);
    return vals;
fail:
    free(left);
    free_vals(g->n, vals);
    return NULL;
}

int ref_run(const model *m, double **outputs, char *err, size_t errcap) {
    const graph *g = m->g;
    double **vals = ref_exec(m, false, err, errcap);
    if (!vals)
        return -1;
    int rc = 0;
    for (int k = 0; k < g->noutputs; k++) {
        const graph_node *n = &g->nodes[g->outputs[k]];
        size_t bytes = (size_t)graph_node_numel(n) * sizeof **outputs;
        outputs[k] = malloc(bytes);
        if (!outputs[k]) {
            snprintf(err, errcap, "out of memory copying reference output %d", k);
            for (int j = 0; j < k; j++)
                free(outputs[j]);
            rc = -1;
            break;
        }
        memcpy(outputs[k], vals[g->outputs[k]], bytes);
    }
    free_vals(g->n, vals);
    return rc;
}

double **ref_run_all(const model *m, char *err, size_t errcap) {
    return ref_exec(m, true, err, errcap);
}
