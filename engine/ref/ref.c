// The fp64 reference interpreter (ref.h): every op as the plainest loop
// over output elements, in double, views materialized by index arithmetic.
// Only the outermost loops of the heavy ops run in parallel (each output
// element is still one obvious sum), so real models stay checkable.
// Values of f16, bf16 and f32 nodes are not rounded to their dtype; CAST does
// round, by the rule the eager kernels share (core/op_rules.h),
// except the casts autocast made: the reference of a mixed-precision graph
// is the model's fp64 answer without autocast, as in PyTorch's harness.
#include "ref.h"

#include "core/op_rules.h"

#include <assert.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ref_ctx {
    const model *m;
    const graph *g;
    uint64_t step; // the optimizer step, from 1
    char *err;
    size_t errcap;
} ref_ctx;

// One function per op, named ref_<op> after ops.def: fills o (the node's
// numel doubles, row-major) from the inputs s[] (each its node's numel).
typedef int (*ref_fn)(ref_ctx *c, const graph_node *n, const double *const *s, double *o);

#define OP(U, l, k, a0, a1)                                                                        \
    static int ref_##l(ref_ctx *c, const graph_node *n, const double *const *s, double *o);
#include "core/ops.def"
#undef OP

static const ref_fn ref_table[] = {
#define OP(U, l, k, a0, a1) [OP_##U] = ref_##l,
#include "core/ops.def"
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

// F.selu's fixed constants (Klambauer et al., "Self-Normalizing Neural Networks")
#define SELU_ALPHA 1.6732632423543772848170429916717
#define SELU_SCALE 1.0507009873554804934193349852946

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
REF_UNARY(mish, x * tanh(log1p(exp(x)))) // exp overflows to inf, tanh(inf) = 1
REF_UNARY(leaky_relu, x > 0 ? x : x * n->fa[0])
REF_UNARY(elu, x > 0 ? x : n->fa[0] * expm1(x))
REF_UNARY(selu, SELU_SCALE * (x > 0 ? x : SELU_ALPHA * expm1(x)))
REF_UNARY(softplus, x * n->fa[0] > n->fa[1] ? x : log1p(exp(x * n->fa[0])) / n->fa[0])
REF_UNARY(scale, x * n->fa[0] + n->fa[1])
REF_UNARY(cast, n->ia[1] ? x : op_cast_value(n->dtype, x)) // autocast's: exact (graph.h)
// clang-format on

static int ref_dropout(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    uint64_t key = op_dropout_key(n->ia[0], c->step);
    uint32_t thr = op_dropout_threshold(n->fa[0]);
    int64_t count = graph_node_numel(n);
    for (int64_t i = 0; i < count; i++)
        o[i] = op_dropout_keep(key, (uint64_t)i, thr) ? s[0][i] / (1 - n->fa[0]) : 0;
    return 0;
}

static int ref_noise(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    uint64_t key = op_noise_key(n->ia[0], c->step);
    int64_t count = graph_node_numel(n);
    for (int64_t i = 0; i < count; i++)
        o[i] = s[0][i] + n->fa[0] * op_noise_normal(key, (uint64_t)i);
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
        case OP_GE: r = x >= y; break;
        default: r = (isnan(x) || x > y) ? x : y; break; // MAXIMUM, NaN wins
        }
        o[i++] = is_int ? op_cast_value(n->dtype, r) : r;
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
REF_BINARY(ge)

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

// A softmax's axis, ia0 axes before the last: its length C, and the stride
// `inner` (the product of the axes after it) between its elements.
static void softmax_axis(const graph_node *n, int64_t *C, int64_t *inner) {
    int ax = n->ndim - 1 - (int)n->ia[0];
    *C = n->shape[ax];
    *inner = 1;
    for (int d = ax + 1; d < n->ndim; d++)
        *inner *= n->shape[d];
}

static void softmax_rows(const graph_node *n, const double *x, double *o, bool log_out) {
    int64_t C, in;
    softmax_axis(n, &C, &in);
    for (int64_t r = 0; r < graph_node_numel(n) / C; r++) {
        int64_t at = r / in * C * in + r % in; // the row's first element
        const double *xr = x + at;
        double m = -INFINITY, sum = 0;
        for (int64_t i = 0; i < C; i++)
            m = xr[i * in] > m ? xr[i * in] : m;
        for (int64_t i = 0; i < C; i++)
            sum += exp(xr[i * in] - m);
        for (int64_t i = 0; i < C; i++)
            o[at + i * in] = log_out ? xr[i * in] - m - log(sum) : exp(xr[i * in] - m) / sum;
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

// Channel ch of x (N, C, S): its mean and biased variance (two passes).
static void chan_stats(const double *x, int64_t N, int64_t C, int64_t S, int64_t ch, double *mean,
                       double *var) {
    double m = 0, v = 0, cnt = (double)(N * S);
    for (int64_t b = 0; b < N; b++)
        for (int64_t k = 0; k < S; k++)
            m += x[(b * C + ch) * S + k];
    m /= cnt;
    for (int64_t b = 0; b < N; b++)
        for (int64_t k = 0; k < S; k++) {
            double d = x[(b * C + ch) * S + k] - m;
            v += d * d;
        }
    *mean = m;
    *var = v / cnt;
}

// Inference: the running statistics. Training (ia0 1): the batch's, biased
// variance; the running ones (s[3], s[4]) then move toward them by momentum
// fa1, the variance unbiased, as PyTorch. They are written in place: the
// run's own copies, or the session's (ref_session_run).
static int ref_batch_norm(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    int64_t N = n->shape[0], C = n->shape[1], S = graph_node_numel(n) / (N * C);
    if (!n->ia[0]) {
        for (int64_t i = 0; i < N * C * S; i++) {
            int64_t ch = (i / S) % C;
            o[i] = (s[0][i] - s[3][ch]) / sqrt(s[4][ch] + n->fa[0]) * s[1][ch] + s[2][ch];
        }
        return 0;
    }
    if (N * S < 2)
        return fail(c,
                    "batch_norm: training needs more than one value per channel, got input of "
                    "%lld x %lld",
                    (long long)N, (long long)S);
    double *rmean = (double *)s[3], *rvar = (double *)s[4], m = n->fa[1], cnt = (double)(N * S);
    for (int64_t ch = 0; ch < C; ch++) {
        double mean, var;
        chan_stats(s[0], N, C, S, ch, &mean, &var);
        for (int64_t b = 0; b < N; b++)
            for (int64_t k = 0; k < S; k++) {
                int64_t i = (b * C + ch) * S + k;
                o[i] = (s[0][i] - mean) / sqrt(var + n->fa[0]) * s[1][ch] + s[2][ch];
            }
        rmean[ch] = (1 - m) * rmean[ch] + m * mean;
        rvar[ch] = (1 - m) * rvar[ch] + m * var * cnt / (cnt - 1);
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

// ia0 holds C: group norm with one channel a group
static int ref_instance_norm(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    return ref_group_norm(c, n, s, o);
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

// ---- quantized weights -------------------------------------------------------

// Element (r, k) of dequant(q, scales) (ops.def): q as the reference holds
// it (int8 values, or int4 bytes: low nibble first, each value + 8) times
// the scale of its group, exactly.
static double dequant_at(const graph_node *n, const double *q, const double *sc, int64_t r,
                         int64_t k) {
    int64_t K = n->ia[2], group = n->ia[1], G = (K + group - 1) / group;
    double v;
    if (n->ia[0] == 8) {
        v = q[r * K + k];
    } else {
        int byte = (int)q[r * ((K + 1) / 2) + k / 2];
        v = (double)(((k % 2 ? byte >> 4 : byte) & 15) - 8);
    }
    return v * sc[r * G + k / group];
}

static int ref_dequant(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    (void)c;
    int64_t N = n->shape[0], K = n->shape[1];
    for (int64_t r = 0; r < N; r++)
        for (int64_t k = 0; k < K; k++)
            o[r * K + k] = dequant_at(n, s[0], s[1], r, k);
    return 0;
}

// linear over the exactly dequantized weight, in fp64
static int ref_qlinear(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    int64_t K = n->ia[2], N = n->shape[n->ndim - 1];
    int64_t rows = graph_node_numel(n) / N;
    double *w = malloc((size_t)(N * K) * sizeof *w);
    if (!w)
        return fail(c, "qlinear: out of memory for the (%lld, %lld) weight", (long long)N,
                    (long long)K);
    for (int64_t j = 0; j < N; j++)
        for (int64_t k = 0; k < K; k++)
            w[j * K + k] = dequant_at(n, s[1], s[2], j, k);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < N; j++) {
            double acc = n->nsrc > 3 ? s[3][j] : 0;
            for (int64_t k = 0; k < K; k++)
                acc += s[0][r * K + k] * w[j * K + k];
            o[r * N + j] = acc;
        }
    free(w);
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

// avg pooling's divisor for window (oh, ow), as PyTorch's: the window's cells
// up to the far padding (count_include_pad), or only those in the input (ia7)
static double pool_divisor(const int64_t *ia, int64_t H, int64_t W, int64_t oh, int64_t ow) {
    int64_t h0 = oh * ia[0] - ia[2], w0 = ow * ia[1] - ia[3];
    int64_t h1 = h0 + ia[4], w1 = w0 + ia[5];
    if (ia[7]) {
        h0 = h0 > 0 ? h0 : 0, w0 = w0 > 0 ? w0 : 0;
        h1 = h1 < H ? h1 : H, w1 = w1 < W ? w1 : W;
    } else {
        h1 = h1 < H + ia[2] ? h1 : H + ia[2], w1 = w1 < W + ia[3] ? w1 : W + ia[3];
    }
    return (double)((h1 - h0) * (w1 - w0));
}

// max over the window's in-bounds pixels (padding is -inf); avg divides the
// in-bounds sum by pool_divisor (padding counts as zeros)
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
                o[(p * OH + oh) * OW + ow] = is_max ? acc : acc / pool_divisor(ia, H, W, oh, ow);
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

// Bag b's positions [*lo, *hi) in the indices (nn.EmbeddingBag's offsets:
// the last bag runs to the end); -1 after the error when the offsets do not
// ascend from 0 within [0, N].
static int bag_span(ref_ctx *c, const char *what, const double *off, int64_t B, int64_t N,
                    int64_t b, int64_t *lo, int64_t *hi) {
    *lo = (int64_t)off[b];
    *hi = b + 1 < B ? (int64_t)off[b + 1] : N;
    if (*lo < 0 || *lo > *hi || *hi > N || (b == 0 && *lo != 0))
        return fail(c, "%s: offsets %lld, %lld of bag %lld are not ascending from 0 to %lld", what,
                    (long long)*lo, (long long)*hi, (long long)b, (long long)N);
    return 0;
}

// The bag sums (back false: o (B, D) from the table v (V, D)) or their
// backward (back true: o (V, D) from dy v (B, D)); idx and off as the op's.
static int bag_walk(ref_ctx *c, const graph_node *n, const double *v, const double *idx,
                    const double *off, double *o, bool back) {
    const graph_node *b0 = src(c, n, back ? 0 : 2);
    int64_t V = back ? n->shape[0] : src(c, n, 0)->shape[0], D = n->shape[1], B = b0->shape[0];
    int64_t N = graph_node_numel(src(c, n, 1)), lo, hi;
    const char *what = op_name(n->op);
    memset(o, 0, (size_t)graph_node_numel(n) * sizeof *o);
    for (int64_t b = 0; b < B; b++) {
        if (bag_span(c, what, off, B, N, b, &lo, &hi) < 0)
            return -1;
        for (int64_t i = lo; i < hi; i++) {
            if (idx[i] < 0 || idx[i] >= (double)V)
                return fail(c, "%s: index %lld at position %lld is outside [0, %lld)", what,
                            (long long)idx[i], (long long)i, (long long)V);
            int64_t row = (int64_t)idx[i];
            for (int64_t d = 0; d < D; d++)
                if (back)
                    o[row * D + d] += v[b * D + d];
                else
                    o[b * D + d] += v[row * D + d];
        }
    }
    return 0;
}

static int ref_embedding_bag(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    return bag_walk(c, n, s[0], s[1], s[2], o, false);
}

// DLRM's Z[:, li, lj]: the pairs j < i (j <= i with ia0), row by row
static int ref_tril_gather(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    int64_t F = src(c, n, 0)->shape[1], B = n->shape[0], k = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < F; i++)
            for (int64_t j = 0; j < i + n->ia[0]; j++)
                o[k++] = s[0][(b * F + i) * F + j];
    return 0;
}

// Re(DFT2) over the last two axes as two plain DFTs: along H, the cosine
// and sine sums c, t (S, H); then along S, y = sum_t cos(a) c - sin(a) t, the
// real part of e^(-ia) (c - i t). Angles from exact integer products mod N.
static int ref_fft2_real(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    int64_t S = n->shape[n->ndim - 2], H = n->shape[n->ndim - 1];
    int64_t B = graph_node_numel(n) / (S * H);
    double *cs = malloc((size_t)(2 * S * H) * sizeof *cs);
    if (!cs)
        return fail(c, "fft2_real: out of memory for a (%lld, %lld) scratch", (long long)S,
                    (long long)H);
    double *sn = cs + S * H;
    for (int64_t b = 0; b < B; b++) {
        const double *x = s[0] + b * S * H;
        double *y = o + b * S * H;
        for (int64_t t = 0; t < S; t++)
            for (int64_t h = 0; h < H; h++) {
                double cc = 0, ss = 0;
                for (int64_t d = 0; d < H; d++) {
                    double a = 2 * M_PI * (double)((h * d) % H) / (double)H;
                    cc += x[t * H + d] * cos(a);
                    ss += x[t * H + d] * sin(a);
                }
                cs[t * H + h] = cc, sn[t * H + h] = ss;
            }
        for (int64_t i = 0; i < S; i++)
            for (int64_t h = 0; h < H; h++) {
                double acc = 0;
                for (int64_t t = 0; t < S; t++) {
                    double a = 2 * M_PI * (double)((i * t) % S) / (double)S;
                    acc += cos(a) * cs[t * H + h] - sin(a) * sn[t * H + h];
                }
                y[i * H + h] = acc;
            }
    }
    free(cs);
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

// y[(i + shift) mod size] = x[i] along every axis (torch.roll)
static int ref_roll(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    (void)c;
    int64_t idx[TENSOR_MAX_DIMS] = {0}, i = 0;
    do {
        int64_t off = 0;
        for (int d = 0; d < n->ndim; d++)
            off = off * n->shape[d] + (idx[d] - n->ia[d] + n->shape[d]) % n->shape[d];
        o[i++] = s[0][off];
    } while (next_index(n->ndim, n->shape, idx));
    return 0;
}

// The x offset padded element idx reads (F.pad): -1 where a constant pad
// holds the value; reflect mirrors about the edge rows (x[1] left of x[0]).
static int64_t pad_source(const graph_node *p, const graph_node *x, const int64_t *idx) {
    int64_t off = 0;
    for (int d = 0; d < x->ndim; d++) {
        int64_t j = idx[d] - p->ia[1 + 2 * d], L = x->shape[d];
        if (p->ia[0] == PAD_REFLECT)
            j = j < 0 ? -j : j >= L ? 2 * (L - 1) - j : j;
        else if (j < 0 || j >= L)
            return -1;
        off = off * L + j;
    }
    return off;
}

static int ref_pad(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    const graph_node *x = src(c, n, 0);
    int64_t idx[TENSOR_MAX_DIMS] = {0}, i = 0;
    do {
        int64_t at = pad_source(n, x, idx);
        o[i++] = at < 0 ? n->fa[0] : s[0][at];
    } while (next_index(n->ndim, n->shape, idx));
    return 0;
}

// unfold and fold (ops.def): every (c, i, j, oh, ow) pairs a column entry
// with an image pixel (or the padding)
static int im2col(const graph_node *n, const graph_node *img, const double *s, double *o) {
    const int64_t *ia = n->ia;
    bool un = n->op == OP_UNFOLD;
    int64_t N = img->shape[0], C = img->shape[1], H = ia[6], W = ia[7];
    int64_t OH = (H + 2 * ia[2] - ia[0]) / ia[4] + 1, OW = (W + 2 * ia[3] - ia[1]) / ia[5] + 1;
    if (!un)
        memset(o, 0, (size_t)(N * C * H * W) * sizeof *o);
    for (int64_t b = 0; b < N * C; b++)
        for (int64_t i = 0; i < ia[0]; i++)
            for (int64_t j = 0; j < ia[1]; j++)
                for (int64_t oh = 0; oh < OH; oh++)
                    for (int64_t ow = 0; ow < OW; ow++) {
                        int64_t h = oh * ia[4] - ia[2] + i, w = ow * ia[5] - ia[3] + j;
                        int64_t col = ((b * ia[0] + i) * ia[1] + j) * OH * OW + oh * OW + ow;
                        bool in = h >= 0 && h < H && w >= 0 && w < W;
                        if (un)
                            o[col] = in ? s[(b * H + h) * W + w] : 0;
                        else if (in)
                            o[(b * H + h) * W + w] += s[col];
                    }
    return 0;
}

static int ref_unfold(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    return im2col(n, src(c, n, 0), s[0], o);
}

static int ref_fold(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    (void)c;
    return im2col(n, n, s[0], o);
}

// each dy element back onto the x element the forward read
static int ref_pad_grad(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    const graph_node *dy = src(c, n, 0);
    memset(o, 0, (size_t)graph_node_numel(n) * sizeof *o);
    int64_t idx[TENSOR_MAX_DIMS] = {0}, i = 0;
    do {
        int64_t at = pad_source(n, n, idx);
        if (at >= 0)
            o[at] += s[0][i];
        i++;
    } while (next_index(dy->ndim, dy->shape, idx));
    return 0;
}

// ---- grid_sample ----------------------------------------------------------------

// F.grid_sample's source coordinate along an axis of `size` samples for the
// normalized g in [-1, 1], and d coordinate / d g (0 where border padding
// clamps it, as PyTorch's clip_coordinates_set_grad).
static double grid_coord(const graph_node *n, double g, int64_t size, double *dg) {
    double c = n->ia[1] ? (g + 1) / 2 * (double)(size - 1) : ((g + 1) * (double)size - 1) / 2;
    *dg = n->ia[1] ? (double)(size - 1) / 2 : (double)size / 2;
    if (n->ia[0] == GRID_PAD_BORDER && (c < 0 || c > (double)(size - 1))) {
        *dg = 0;
        c = c < 0 ? 0 : (double)(size - 1);
    }
    return c;
}

// The four bilinear taps of (ix, iy): offsets in an (H, W) plane (-1 outside)
// and weights nw, ne, sw, se.
static void grid_taps(double ix, double iy, int64_t H, int64_t W, int64_t *at, double *w) {
    double x0 = floor(ix), y0 = floor(iy), tx = ix - x0, ty = iy - y0;
    for (int k = 0; k < 4; k++) {
        int64_t xi = (int64_t)x0 + (k & 1), yi = (int64_t)y0 + (k >> 1);
        at[k] = xi < 0 || xi >= W || yi < 0 || yi >= H ? -1 : yi * W + xi;
        w[k] = ((k & 1) ? tx : 1 - tx) * ((k >> 1) ? ty : 1 - ty);
    }
}

// The sampling of output position p (of Ho x Wo) of batch b: by the grid,
// or with no grid a bilinear upsample's (F.interpolate's source index,
// clamped to the edges as upsample_bilinear2d does).
typedef struct grid_pos {
    int64_t at[4];                 // taps
    double w[4], tx, ty, dgx, dgy; // weights, fractions, d coordinate / d grid
} grid_pos;

static double upsample_coord(const graph_node *n, int64_t o, int64_t in, int64_t out) {
    double c = n->ia[1] ? (out > 1 ? (double)o * (double)(in - 1) / (double)(out - 1) : 0)
                        : ((double)o + 0.5) * (double)in / (double)out - 0.5;
    return c < 0 ? 0 : c > (double)(in - 1) ? (double)(in - 1) : c;
}

static grid_pos grid_at(const graph_node *n, const double *grid, int64_t b, int64_t p, int64_t Wo,
                        int64_t HoWo, int64_t H, int64_t W) {
    grid_pos q = {.dgx = 0};
    double ix, iy;
    if (grid) {
        const double *gp = grid + (b * HoWo + p) * 2;
        ix = grid_coord(n, gp[0], W, &q.dgx), iy = grid_coord(n, gp[1], H, &q.dgy);
    } else {
        ix = upsample_coord(n, p % Wo, W, Wo), iy = upsample_coord(n, p / Wo, H, HoWo / Wo);
    }
    grid_taps(ix, iy, H, W, q.at, q.w);
    q.tx = ix - floor(ix), q.ty = iy - floor(iy);
    return q;
}

// x (N, C, H, W) sampled at grid (or upsampled when NULL) into o (N, C, Ho, Wo)
static void sample(const graph_node *n, const double *x, const double *grid, const int64_t *xs,
                   int64_t Ho, int64_t Wo, double *o) {
    int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], HoWo = Ho * Wo;
    for (int64_t b = 0; b < N; b++)
        for (int64_t p = 0; p < HoWo; p++) {
            grid_pos q = grid_at(n, grid, b, p, Wo, HoWo, H, W);
            for (int64_t ch = 0; ch < C; ch++) {
                const double *plane = x + (b * C + ch) * H * W;
                double v = 0;
                for (int k = 0; k < 4; k++)
                    v += q.at[k] < 0 ? 0 : q.w[k] * plane[q.at[k]];
                o[(b * C + ch) * HoWo + p] = v;
            }
        }
}

// dx (N, C, H, W): each dy element added onto its four taps with their weights
static void sample_grad(const graph_node *n, const double *dy, const double *grid,
                        const int64_t *xs, int64_t Ho, int64_t Wo, double *o) {
    int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], HoWo = Ho * Wo;
    memset(o, 0, (size_t)(N * C * H * W) * sizeof *o);
    for (int64_t b = 0; b < N; b++)
        for (int64_t p = 0; p < HoWo; p++) {
            grid_pos q = grid_at(n, grid, b, p, Wo, HoWo, H, W);
            for (int64_t ch = 0; ch < C; ch++)
                for (int k = 0; k < 4; k++)
                    if (q.at[k] >= 0)
                        o[(b * C + ch) * H * W + q.at[k]] += q.w[k] * dy[(b * C + ch) * HoWo + p];
        }
}

static int ref_grid_sample(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    sample(n, s[0], s[1], src(c, n, 0)->shape, n->shape[2], n->shape[3], o);
    return 0;
}

static int ref_upsample_bilinear(ref_ctx *c, const graph_node *n, const double *const *s,
                                 double *o) {
    sample(n, s[0], NULL, src(c, n, 0)->shape, n->shape[2], n->shape[3], o);
    return 0;
}

static int ref_grid_sample_grad(ref_ctx *c, const graph_node *n, const double *const *s,
                                double *o) {
    const graph_node *dy = src(c, n, 0);
    sample_grad(n, s[0], s[1], n->shape, dy->shape[2], dy->shape[3], o);
    return 0;
}

static int ref_upsample_bilinear_grad(ref_ctx *c, const graph_node *n, const double *const *s,
                                      double *o) {
    const graph_node *dy = src(c, n, 0);
    sample_grad(n, s[0], NULL, n->shape, dy->shape[2], dy->shape[3], o);
    return 0;
}

// d grid: the weights' derivatives in the fractions tx, ty, summed over the
// channels, times d coordinate / d grid
static int ref_grid_sample_grad_grid(ref_ctx *c, const graph_node *n, const double *const *s,
                                     double *o) {
    const graph_node *x = src(c, n, 1);
    int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3];
    int64_t HoWo = n->shape[1] * n->shape[2];
    for (int64_t b = 0; b < N; b++)
        for (int64_t p = 0; p < HoWo; p++) {
            grid_pos q = grid_at(n, s[2], b, p, n->shape[2], HoWo, H, W);
            double gx = 0, gy = 0;
            for (int64_t ch = 0; ch < C; ch++) {
                const double *plane = s[1] + (b * C + ch) * H * W;
                double v[4], d = s[0][(b * C + ch) * HoWo + p];
                for (int k = 0; k < 4; k++)
                    v[k] = q.at[k] < 0 ? 0 : plane[q.at[k]];
                gx += d * ((1 - q.ty) * (v[1] - v[0]) + q.ty * (v[3] - v[2]));
                gy += d * ((1 - q.tx) * (v[2] - v[0]) + q.tx * (v[3] - v[1]));
            }
            o[(b * HoWo + p) * 2] = gx * q.dgx;
            o[(b * HoWo + p) * 2 + 1] = gy * q.dgy;
        }
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
        double all = 0, eps = n->fa[0]; // -log p_i = lse - x_i, mixed
        for (int64_t i = 0; i < C; i++) {
            sum += exp(row[i] - m);
            all += row[i];
        }
        total += m + log(sum) - (1 - eps) * row[t] - eps * all / (double)C;
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

// torch's BCELoss clamps each log at -100; the logits form is
// max(x, 0) - x t + log(1 + e^-|x|)
static double bce_term(const graph_node *n, double x, double t) {
    if (n->ia[0])
        return fmax(x, 0) - x * t + log1p(exp(-fabs(x)));
    return -(t * fmax(log(x), -100) + (1 - t) * fmax(log(1 - x), -100));
}

static int ref_bce_loss(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    int64_t count = graph_node_numel(src(c, n, 0));
    double total = 0;
    for (int64_t i = 0; i < count; i++)
        total += bce_term(n, s[0][i], s[1][i]);
    o[0] = total / (double)count;
    return 0;
}

// ---- attention -----------------------------------------------------------------

// Row t of (b, h)'s probabilities over the S keys into p: softmax(q k^T *
// fa0 + bias) over the visible ones (ATTENTION's masks with valid length
// L), zeros elsewhere, all zeros when none is visible. qr the query (D), kb
// the kv head's keys (S, D); the bias is source ia1 of n, if any.
static void att_probs(const ref_ctx *c, const graph_node *n, const double *const *s,
                      const double *qr, const double *kb, int64_t T, int64_t L, int64_t b,
                      int64_t h, int64_t t, double *p) {
    const graph_node *bias = n->ia[1] ? src(c, n, (int)n->ia[1]) : NULL;
    int q0 = n->op == OP_ATTENTION ? 0 : 1; // attention_grad: dy first
    int64_t S = src(c, n, q0 + 1)->shape[2], D = src(c, n, q0)->shape[3];
    double m = -INFINITY, sum = 0;
    for (int64_t j = 0; j < S; j++) {
        p[j] = -INFINITY;
        if (j >= L || (n->ia[0] && j > L - T + t))
            continue;
        double dot = 0;
        for (int64_t d = 0; d < D; d++)
            dot += qr[d] * kb[j * D + d];
        p[j] = dot * n->fa[0];
        if (bias)
            p[j] += s[n->ia[1]][bcast_offset(bias->ndim, bias->shape, 4, (int64_t[]){b, h, t, j})];
        m = p[j] > m ? p[j] : m;
    }
    for (int64_t j = 0; j < S; j++) {
        p[j] = m == -INFINITY ? 0 : exp(p[j] - m);
        sum += p[j];
    }
    for (int64_t j = 0; j < S && sum > 0; j++)
        p[j] /= sum;
}

// Batch row b's valid length: source ia2 of n (() or (B)), else S; -1 with
// the error set when it is outside [0, S].
static int64_t att_len(ref_ctx *c, const graph_node *n, const double *const *s, int64_t b,
                       int64_t S) {
    int64_t L = n->ia[2] ? (int64_t)s[n->ia[2]][src(c, n, (int)n->ia[2])->ndim ? b : 0] : S;
    if (L < 0 || L > S)
        return fail(c, "%s: valid length %lld of batch row %lld is outside [0, %lld]",
                    op_name(n->op), (long long)L, (long long)b, (long long)S);
    return L;
}

// softmax(q k^T * fa0 + bias, masked) v, row by row over the visible keys.
static int ref_attention(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    const graph_node *q = src(c, n, 0), *k = src(c, n, 1), *v = src(c, n, 2);
    int64_t B = q->shape[0], H = q->shape[1], T = q->shape[2], D = q->shape[3];
    int64_t KVH = k->shape[1], S = k->shape[2], Dv = v->shape[3];
    double *p = malloc((size_t)(S ? S : 1) * sizeof *p);
    if (!p)
        return fail(c, "attention: out of memory");
    for (int64_t b = 0; b < B; b++) {
        int64_t L = att_len(c, n, s, b, S);
        if (L < 0) {
            free(p);
            return -1;
        }
        for (int64_t h = 0; h < H; h++) {
            int64_t g = h / (H / KVH);
            const double *kb = s[1] + (b * KVH + g) * S * D, *vb = s[2] + (b * KVH + g) * S * Dv;
            for (int64_t t = 0; t < T; t++) {
                const double *qr = s[0] + ((b * H + h) * T + t) * D;
                double *out = o + ((b * H + h) * T + t) * Dv;
                att_probs(c, n, s, qr, kb, T, L, b, h, t, p);
                for (int64_t e = 0; e < Dv; e++) { // keys no row sees are not read
                    double acc = 0;
                    for (int64_t j = 0; j < S; j++)
                        acc += p[j] != 0 ? p[j] * vb[j * Dv + e] : 0;
                    out[e] = acc;
                }
            }
        }
    }
    free(p);
    return 0;
}

// ATTENTION's gradients from the probabilities in full, row by row: p as
// the forward's, dv += p^T dy, ds = p (dy v^T - rowsum(dy y)), dq = ds k *
// scale, dk += ds^T q * scale (kv heads summing their query heads').
static int ref_attention_grad(ref_ctx *c, const graph_node *n, const double *const *s,
                              double *o) {
    const graph_node *q = src(c, n, 1), *k = src(c, n, 2), *v = src(c, n, 3);
    int64_t B = q->shape[0], H = q->shape[1], T = q->shape[2], D = q->shape[3];
    int64_t KVH = k->shape[1], S = k->shape[2], Dv = v->shape[3];
    double *dq = o, *dk = dq + B * H * T * D, *dv = dk + B * KVH * S * D;
    memset(o, 0, (size_t)graph_node_numel(n) * sizeof *o);
    double *p = malloc((size_t)(S ? S : 1) * sizeof *p);
    if (!p)
        return fail(c, "attention_grad: out of memory");
    for (int64_t b = 0; b < B; b++) {
        int64_t L = att_len(c, n, s, b, S);
        if (L < 0) {
            free(p);
            return -1;
        }
        for (int64_t h = 0; h < H; h++) {
            int64_t g = h / (H / KVH), kv = (b * KVH + g) * S;
            const double *kb = s[2] + kv * D, *vb = s[3] + kv * Dv;
            for (int64_t t = 0; t < T; t++) {
                int64_t row = (b * H + h) * T + t;
                const double *qr = s[1] + row * D, *dy = s[0] + row * Dv, *y = s[4] + row * Dv;
                double dd = 0;
                att_probs(c, n, s, qr, kb, T, L, b, h, t, p);
                for (int64_t e = 0; e < Dv; e++)
                    dd += dy[e] * y[e];
                for (int64_t j = 0; j < S; j++) {
                    double dp = 0;
                    if (p[j] == 0)
                        continue;
                    for (int64_t e = 0; e < Dv; e++) {
                        dp += dy[e] * vb[j * Dv + e];
                        dv[(kv + j) * Dv + e] += p[j] * dy[e];
                    }
                    double ds = p[j] * (dp - dd) * n->fa[0];
                    for (int64_t d = 0; d < D; d++) {
                        dq[row * D + d] += ds * kb[j * D + d];
                        dk[(kv + j) * D + d] += ds * qr[d];
                    }
                }
            }
        }
    }
    free(p);
    return 0;
}

// ---- backward ops ----------------------------------------------------------------

// f'(x) for the forward unary op f; false for ops without one here
static bool dact(const graph_node *n, enum op f, double x, double *d) {
    double k = sqrt(2 / M_PI), s = 1 / (1 + exp(-x)), t;
    switch (f) {
    case OP_NEG: *d = -1; break;
    case OP_EXP: *d = exp(x); break;
    case OP_LOG: *d = 1 / x; break;
    case OP_SQRT: *d = 0.5 / sqrt(x); break;
    case OP_RSQRT: *d = -0.5 * pow(x, -1.5); break;
    case OP_RECIP: *d = -1 / (x * x); break;
    case OP_ABS: *d = x > 0 ? 1 : x < 0 ? -1 : 0; break;
    case OP_TANH: *d = 1 - tanh(x) * tanh(x); break;
    case OP_SIGMOID: *d = s * (1 - s); break;
    case OP_RELU: *d = x > 0; break;
    case OP_RELU6: *d = x > 0 && x < 6; break;
    case OP_GELU:
        *d = 0.5 * (1 + erf(x / sqrt(2.0))) + x * exp(-0.5 * x * x) / sqrt(2 * M_PI);
        break;
    case OP_GELU_TANH:
        t = tanh(k * (x + 0.044715 * x * x * x));
        *d = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x);
        break;
    case OP_SILU: *d = s * (1 + x * (1 - s)); break;
    case OP_HARDSWISH: *d = x < -3 ? 0 : x <= 3 ? x / 3 + 0.5 : 1; break;
    case OP_HARDSIGMOID: *d = x > -3 && x < 3 ? 1.0 / 6 : 0; break;
    case OP_MISH: {
        double th = tanh(log1p(exp(x)));
        *d = th + x * (1 - th * th) * s;
        break;
    }
    case OP_LEAKY_RELU: *d = x > 0 ? 1 : n->fa[0]; break;
    case OP_ELU: *d = x > 0 ? 1 : n->fa[0] * exp(x); break;
    case OP_SELU: *d = SELU_SCALE * (x > 0 ? 1 : SELU_ALPHA * exp(x)); break;
    case OP_SOFTPLUS: {
        double z = x * n->fa[0];
        *d = z > n->fa[1] ? 1 : 1 / (1 + exp(-z));
        break;
    }
    case OP_SCALE: *d = n->fa[0]; break;
    default: return false;
    }
    return true;
}

static int ref_act_grad(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    enum op f = (enum op)n->ia[0];
    int64_t count = graph_node_numel(n);
    for (int64_t i = 0; i < count; i++) {
        double d;
        if (!dact(n, f, s[1][i], &d))
            return fail(c, "act_grad: no derivative for %s", op_name(f));
        o[i] = s[0][i] * d;
    }
    return 0;
}

// every element of dy added into the output element it was broadcast from
static int ref_sum_to(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    const graph_node *dy = src(c, n, 0);
    memset(o, 0, (size_t)graph_node_numel(n) * sizeof *o);
    int64_t idx[TENSOR_MAX_DIMS] = {0}, i = 0;
    do
        o[bcast_offset(n->ndim, n->shape, dy->ndim, idx)] += s[0][i++];
    while (next_index(dy->ndim, dy->shape, idx));
    return 0;
}

static void softmax_grad_rows(const graph_node *n, const double *dy, const double *y, double *o,
                              bool log_in) {
    int64_t C, in;
    softmax_axis(n, &C, &in);
    for (int64_t r = 0; r < graph_node_numel(n) / C; r++) {
        int64_t at = r / in * C * in + r % in;
        const double *d = dy + at, *yr = y + at;
        double sum = 0;
        for (int64_t i = 0; i < C; i++)
            sum += log_in ? d[i * in] : d[i * in] * yr[i * in];
        for (int64_t i = 0; i < C; i++)
            o[at + i * in] =
                log_in ? d[i * in] - exp(yr[i * in]) * sum : yr[i * in] * (d[i * in] - sum);
    }
}

static int ref_softmax_grad(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    (void)c;
    softmax_grad_rows(n, s[0], s[1], o, false);
    return 0;
}

static int ref_log_softmax_grad(ref_ctx *c, const graph_node *n, const double *const *s,
                                double *o) {
    (void)c;
    softmax_grad_rows(n, s[0], s[1], o, true);
    return 0;
}

// The sets a norm's statistics run over: `groups` of `len` elements. Layer
// and rms norm: rows of the last axis, weight per column; batch norm: a
// channel over (N, spatial); group norm: (n, group) over (C/G, spatial),
// weight per channel.
typedef struct norm_sets {
    enum op fwd; // LAYER_NORM, RMS_NORM, BATCH_NORM or GROUP_NORM
    int64_t groups, len, C, S, G;
} norm_sets;

static norm_sets norm_sets_of(const graph_node *n, const graph_node *x) {
    norm_sets L = {0};
    int64_t numel = graph_node_numel(x);
    switch (n->op) {
    case OP_LAYER_NORM_GRAD:
    case OP_LAYER_NORM_WGRAD: L.fwd = OP_LAYER_NORM; break;
    case OP_RMS_NORM_GRAD:
    case OP_RMS_NORM_WGRAD: L.fwd = OP_RMS_NORM; break;
    case OP_BATCH_NORM_GRAD:
    case OP_BATCH_NORM_WGRAD: L.fwd = OP_BATCH_NORM; break;
    default: L.fwd = OP_GROUP_NORM; break;
    }
    if (L.fwd == OP_LAYER_NORM || L.fwd == OP_RMS_NORM) {
        L.C = L.len = x->shape[x->ndim - 1];
        L.groups = numel / L.C;
        return L;
    }
    L.C = x->shape[1];
    L.S = numel / (x->shape[0] * L.C);
    L.G = L.fwd == OP_GROUP_NORM ? n->ia[0] : 1;
    L.groups = L.fwd == OP_GROUP_NORM ? x->shape[0] * L.G : L.C;
    L.len = numel / L.groups;
    return L;
}

// offset of element k of set grp, and its weight channel
static int64_t norm_elem(const norm_sets *L, int64_t grp, int64_t k, int64_t *ch) {
    switch (L->fwd) {
    case OP_BATCH_NORM: *ch = grp; return ((k / L->S) * L->C + grp) * L->S + k % L->S;
    case OP_GROUP_NORM: *ch = (grp % L->G) * (L->C / L->G) + k / L->S; return grp * L->len + k;
    default: *ch = k; return grp * L->len + k;
    }
}

// dx (s: dy, x, weight) or the weight gradients (s: dy, x; o is (2, C), or
// (C) for rms norm): mean and biased variance of each set recomputed from x,
// xhat = (x - mean) / sqrt(var + eps), g = dy * w,
// dx = (g - mean(g) - xhat mean(g xhat)) / sqrt(var + eps), rms norm
// without the mean and the mean(g) term.
static int norm_backward(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    const graph_node *x = src(c, n, 1);
    if ((n->op == OP_GROUP_NORM_GRAD || n->op == OP_GROUP_NORM_WGRAD) &&
        (x->ndim < 2 || n->ia[0] <= 0 || x->shape[1] % n->ia[0]))
        return fail(c, "%s: %lld groups do not divide the channels of the input", op_name(n->op),
                    (long long)n->ia[0]);
    norm_sets L = norm_sets_of(n, x);
    bool center = L.fwd != OP_RMS_NORM, dx = n->nsrc == 3;
    if (!dx)
        memset(o, 0, (size_t)graph_node_numel(n) * sizeof *o);
    for (int64_t grp = 0; grp < L.groups; grp++) {
        int64_t ch;
        double mean = 0, var = 0;
        for (int64_t k = 0; center && k < L.len; k++)
            mean += s[1][norm_elem(&L, grp, k, &ch)];
        mean /= (double)L.len;
        for (int64_t k = 0; k < L.len; k++) {
            double d = s[1][norm_elem(&L, grp, k, &ch)] - mean;
            var += d * d;
        }
        double rstd = 1 / sqrt(var / (double)L.len + n->fa[0]), mg = 0, mgx = 0;
        for (int64_t k = 0; k < L.len; k++) {
            int64_t at = norm_elem(&L, grp, k, &ch);
            double xhat = (s[1][at] - mean) * rstd;
            if (dx) {
                mg += s[0][at] * s[2][ch];
                mgx += s[0][at] * s[2][ch] * xhat;
            } else {
                o[ch] += s[0][at] * xhat;
                if (center)
                    o[L.C + ch] += s[0][at];
            }
        }
        if (!dx)
            continue;
        mg = center ? mg / (double)L.len : 0;
        mgx /= (double)L.len;
        for (int64_t k = 0; k < L.len; k++) {
            int64_t at = norm_elem(&L, grp, k, &ch);
            double xhat = (s[1][at] - mean) * rstd;
            o[at] = rstd * (s[0][at] * s[2][ch] - mg - xhat * mgx);
        }
    }
    return 0;
}

#define REF_NORM_BACKWARD(l)                                                                       \
    static int ref_##l(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {       \
        return norm_backward(c, n, s, o);                                                          \
    }
REF_NORM_BACKWARD(layer_norm_grad)
REF_NORM_BACKWARD(layer_norm_wgrad)
REF_NORM_BACKWARD(rms_norm_grad)
REF_NORM_BACKWARD(rms_norm_wgrad)
REF_NORM_BACKWARD(batch_norm_grad)
REF_NORM_BACKWARD(batch_norm_wgrad)
REF_NORM_BACKWARD(group_norm_grad)
REF_NORM_BACKWARD(group_norm_wgrad)

// conv2d's attributes, defaulted as graph.c does for the forward op
typedef struct conv_attr {
    int64_t sh, sw, ph, pw, dh, dw, groups;
} conv_attr;

static conv_attr conv_attr_of(const graph_node *n) {
    const int64_t *ia = n->ia;
    return (conv_attr){
        ia[0] > 0 ? ia[0] : 1, ia[1] > 0 ? ia[1] : 1, ia[2], ia[3], ia[4] > 0 ? ia[4] : 1,
        ia[5] > 0 ? ia[5] : 1, ia[6] > 0 ? ia[6] : 1};
}

// The adjoint of ref_conv2d in x: each product x[b, c, ih, iw] *
// w[oc, ci, i, j] of the forward sends dy[b, oc, oh, ow] * w back to x's
// pixel. Images run in parallel, so no two threads write one pixel.
static int ref_conv2d_grad_input(ref_ctx *c, const graph_node *n, const double *const *s,
                                 double *o) {
    const graph_node *dy = src(c, n, 0), *w = src(c, n, 1);
    int64_t N = n->shape[0], C = n->shape[1], H = n->shape[2], W = n->shape[3];
    int64_t O = dy->shape[1], OH = dy->shape[2], OW = dy->shape[3];
    int64_t KH = w->shape[2], KW = w->shape[3];
    conv_attr a = conv_attr_of(n);
    int64_t Cg = C / a.groups, Og = O / a.groups;
    if (C % a.groups || O % a.groups || w->shape[0] != O || w->shape[1] != Cg)
        return fail(c, "conv2d_grad_input: weight, groups and shapes do not agree");
    memset(o, 0, (size_t)graph_node_numel(n) * sizeof *o);
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < N; b++)
        for (int64_t oc = 0; oc < O; oc++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    double d = s[0][((b * O + oc) * OH + oh) * OW + ow];
                    int64_t c0 = oc / Og * Cg;
                    for (int64_t ci = 0; ci < Cg; ci++)
                        for (int64_t i = 0; i < KH; i++)
                            for (int64_t j = 0; j < KW; j++) {
                                int64_t ih = oh * a.sh - a.ph + i * a.dh;
                                int64_t iw = ow * a.sw - a.pw + j * a.dw;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W)
                                    continue;
                                o[((b * C + c0 + ci) * H + ih) * W + iw] +=
                                    d * s[1][((oc * Cg + ci) * KH + i) * KW + j];
                            }
                }
    return 0;
}

// dw[oc, ci, i, j] = sum over images and output pixels of dy * the input
// pixel that tap met in the forward
static int ref_conv2d_grad_weight(ref_ctx *c, const graph_node *n, const double *const *s,
                                  double *o) {
    const graph_node *dy = src(c, n, 0), *x = src(c, n, 1);
    int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3];
    int64_t O = dy->shape[1], OH = dy->shape[2], OW = dy->shape[3];
    int64_t KH = n->shape[2], KW = n->shape[3];
    conv_attr a = conv_attr_of(n);
    int64_t Cg = C / a.groups, Og = O / a.groups;
    if (C % a.groups || O % a.groups || n->shape[0] != O || n->shape[1] != Cg)
        return fail(c, "conv2d_grad_weight: weight, groups and shapes do not agree");
#pragma omp parallel for schedule(static)
    for (int64_t oc = 0; oc < O; oc++) {
        int64_t c0 = oc / Og * Cg;
        for (int64_t ci = 0; ci < Cg; ci++)
            for (int64_t i = 0; i < KH; i++)
                for (int64_t j = 0; j < KW; j++) {
                    double acc = 0;
                    for (int64_t b = 0; b < N; b++)
                        for (int64_t oh = 0; oh < OH; oh++)
                            for (int64_t ow = 0; ow < OW; ow++) {
                                int64_t ih = oh * a.sh - a.ph + i * a.dh;
                                int64_t iw = ow * a.sw - a.pw + j * a.dw;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W)
                                    continue;
                                acc += s[0][((b * O + oc) * OH + oh) * OW + ow] *
                                       s[1][((b * C + c0 + ci) * H + ih) * W + iw];
                            }
                    o[((oc * Cg + ci) * KH + i) * KW + j] = acc;
                }
    }
    return 0;
}

// Each window's dy goes back to its pixels: max pool's to the first maximum
// in row-major window order (padding never wins), avg pool's spread over the
// in-bounds pixels divided by pool_divisor, as the forward counts it.
static int pool_backward(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    const graph_node *dy = src(c, n, 0);
    int64_t H = n->shape[2], W = n->shape[3], OH = dy->shape[2], OW = dy->shape[3];
    int64_t kh = n->ia[4], kw = n->ia[5];
    int64_t sh = n->ia[0] > 0 ? n->ia[0] : kh, sw = n->ia[1] > 0 ? n->ia[1] : kw;
    bool is_max = n->op == OP_MAX_POOL2D_GRAD;
    (void)c;
    memset(o, 0, (size_t)graph_node_numel(n) * sizeof *o);
    for (int64_t p = 0; p < n->shape[0] * n->shape[1]; p++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                double d = s[0][(p * OH + oh) * OW + ow], best = 0;
                int64_t at = -1;
                for (int64_t i = 0; i < kh; i++)
                    for (int64_t j = 0; j < kw; j++) {
                        int64_t ih = oh * sh - n->ia[2] + i, iw = ow * sw - n->ia[3] + j;
                        if (ih < 0 || ih >= H || iw < 0 || iw >= W)
                            continue;
                        int64_t k = (p * H + ih) * W + iw;
                        if (!is_max)
                            o[k] += d / pool_divisor(n->ia, H, W, oh, ow);
                        else if (at < 0 || s[1][k] > best || (isnan(s[1][k]) && !isnan(best))) {
                            best = s[1][k];
                            at = k;
                        }
                    }
                if (is_max && at >= 0)
                    o[at] += d;
            }
    return 0;
}

static int ref_max_pool2d_grad(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    return pool_backward(c, n, s, o);
}
static int ref_avg_pool2d_grad(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    return pool_backward(c, n, s, o);
}

static int ref_embedding_grad(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    int64_t V = n->shape[0], D = n->shape[1], count = graph_node_numel(src(c, n, 1));
    memset(o, 0, (size_t)(V * D) * sizeof *o);
    for (int64_t i = 0; i < count; i++) {
        double id = s[1][i];
        if (id < 0 || id >= (double)V)
            return fail(c, "embedding_grad: index %lld at position %lld is outside [0, %lld)",
                        (long long)id, (long long)i, (long long)V);
        for (int64_t d = 0; d < D; d++)
            o[(int64_t)id * D + d] += s[0][i * D + d];
    }
    return 0;
}

static int ref_embedding_bag_grad(ref_ctx *c, const graph_node *n, const double *const *s,
                                  double *o) {
    return bag_walk(c, n, s[0], s[1], s[2], o, true);
}

static int ref_tril_gather_grad(ref_ctx *c, const graph_node *n, const double *const *s,
                                double *o) {
    (void)c;
    int64_t F = n->shape[1], B = n->shape[0], k = 0;
    memset(o, 0, (size_t)graph_node_numel(n) * sizeof *o);
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < F; i++)
            for (int64_t j = 0; j < i + n->ia[0]; j++)
                o[(b * F + i) * F + j] = s[0][k++];
    return 0;
}

static int ref_slice_grad(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    const graph_node *dy = src(c, n, 0);
    memset(o, 0, (size_t)graph_node_numel(n) * sizeof *o);
    int64_t idx[TENSOR_MAX_DIMS] = {0}, i = 0;
    do {
        int64_t off = 0;
        for (int d = 0; d < n->ndim; d++)
            off = off * n->shape[d] + idx[d] + (d == n->ia[0] ? n->ia[1] : 0);
        o[off] = s[0][i++];
    } while (next_index(dy->ndim, dy->shape, idx));
    return 0;
}

// d mean(-log softmax(row)[t]) / d logits = (softmax(row) - onehot(t)) / count,
// the one-hot (1 - eps) onehot(t) + eps / C with label smoothing eps
static int ref_cross_entropy_grad(ref_ctx *c, const graph_node *n, const double *const *s,
                                  double *o) {
    int64_t N = n->shape[0], C = n->shape[1], count = 0;
    for (int64_t r = 0; r < N; r++) {
        int64_t t = (int64_t)s[2][r];
        if (t == n->ia[0])
            continue;
        if (t < 0 || t >= C)
            return fail(c, "cross_entropy_grad: target %lld in row %lld is outside [0, %lld)",
                        (long long)t, (long long)r, (long long)C);
        count++;
    }
    for (int64_t r = 0; r < N; r++) {
        int64_t t = (int64_t)s[2][r];
        const double *row = s[1] + r * C;
        double m = -INFINITY, sum = 0;
        for (int64_t i = 0; i < C; i++)
            m = row[i] > m ? row[i] : m;
        for (int64_t i = 0; i < C; i++)
            sum += exp(row[i] - m);
        double eps = n->fa[0];
        for (int64_t i = 0; i < C; i++)
            o[r * C + i] =
                t == n->ia[0]
                    ? 0
                    : s[0][0] * (exp(row[i] - m) / sum - (1 - eps) * (i == t) - eps / (double)C) /
                          (double)count;
    }
    return 0;
}

static int ref_mse_loss_grad(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    (void)c;
    int64_t count = graph_node_numel(n);
    for (int64_t i = 0; i < count; i++)
        o[i] = s[0][0] * 2 * (s[1][i] - s[2][i]) / (double)count;
    return 0;
}

// BCELoss's backward divides by max(p (1 - p), 1e-12), as torch's
static int ref_bce_loss_grad(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    (void)c;
    int64_t count = graph_node_numel(n);
    for (int64_t i = 0; i < count; i++) {
        double x = s[1][i], t = s[2][i];
        double d = n->ia[0] ? 1 / (1 + exp(-x)) - t : (x - t) / fmax(x * (1 - x), 1e-12);
        o[i] = s[0][0] * d / (double)count;
    }
    return 0;
}

// ---- updates: write their sources (the run's or the session's copies) ----------------

// The grad scaler of an SGD or ADAMW node: whether found_inf skips it, else
// the gradient's factor (1/scale, rounded to f32 as PyTorch's unscale_) and
// t, the optimizer's own step count + 1. Without the scaler: 1 and the run's step.
static bool scaler_skip(const ref_ctx *c, const graph_node *n, const double *const *s, double *inv,
                        double *t) {
    int k = graph_scaler_src(n);
    *inv = 1;
    *t = (double)c->step;
    if (k < 0)
        return false;
    if (s[k + 1][0] != 0)
        return true;
    *inv = (float)(1 / s[k][0]);
    *t = s[k + 2][0] + 1;
    return false;
}

// A step the grad scaler skips: every source stays, the value is the parameter.
static int skipped(const graph_node *n, const double *const *s, double *o) {
    memcpy(o, s[0], (size_t)graph_node_numel(n) * sizeof *o);
    return 0;
}

// PyTorch's SGD: d = g + wd p; with momentum, buf = d on the first step and
// momentum buf + (1 - dampening) d after, d = nesterov ? d + momentum buf :
// buf; p -= lr d.
static int ref_sgd(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    double lr = n->fa[0], mom = n->fa[1], wd = n->fa[2], damp = n->fa[3], inv, t;
    int end = graph_scaler_src(n) >= 0 ? graph_scaler_src(n) : n->nsrc;
    double *p = (double *)s[0], *buf = end > 2 ? (double *)s[2] : NULL;
    if (mom != 0 && !buf)
        return fail(c, "sgd: momentum %g needs a momentum buffer (a third input)", mom);
    if (scaler_skip(c, n, s, &inv, &t))
        return skipped(n, s, o);
    int64_t count = graph_node_numel(n);
    for (int64_t i = 0; i < count; i++) {
        double d = s[1][i] * inv + wd * p[i];
        if (mom != 0) {
            buf[i] = t == 1 ? d : mom * buf[i] + (1 - damp) * d;
            d = n->ia[0] ? d + mom * buf[i] : buf[i];
        }
        p[i] -= lr * d;
        o[i] = p[i];
    }
    return 0;
}

// PyTorch's AdamW at step t: p *= 1 - lr wd; m, v move toward g, g^2;
// p -= lr / (1 - b1^t) m / (sqrt(v) / sqrt(1 - b2^t) + eps)
static int ref_adamw(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    double lr = n->fa[0], b1 = n->fa[1], b2 = n->fa[2], eps = n->fa[3], wd = n->fa[4], inv, t;
    if (scaler_skip(c, n, s, &inv, &t))
        return skipped(n, s, o);
    double *p = (double *)s[0], *m = (double *)s[2], *v = (double *)s[3];
    int64_t count = graph_node_numel(n);
    for (int64_t i = 0; i < count; i++) {
        double g = s[1][i] * inv;
        p[i] *= 1 - lr * wd;
        m[i] = b1 * m[i] + (1 - b1) * g;
        v[i] = b2 * v[i] + (1 - b2) * g * g;
        p[i] -= lr / (1 - pow(b1, t)) * m[i] / (sqrt(v[i]) / sqrt(1 - pow(b2, t)) + eps);
        o[i] = p[i];
    }
    return 0;
}

// Per channel: mean, biased variance, 1 / sqrt(var + eps), as ref_batch_norm.
static int ref_batch_norm_stats(ref_ctx *c, const graph_node *n, const double *const *s,
                                double *o) {
    const graph_node *x = &c->g->nodes[n->src[0]];
    int64_t N = x->shape[0], C = x->shape[1], S = graph_node_numel(x) / (N * C);
    for (int64_t ch = 0; ch < C; ch++) {
        double mean, var;
        chan_stats(s[0], N, C, S, ch, &mean, &var);
        o[ch] = mean;
        o[C + ch] = var;
        o[2 * C + ch] = 1 / sqrt(var + n->fa[0]);
    }
    return 0;
}

static int ref_running_stat(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    (void)c;
    double *buf = (double *)s[0], m = n->fa[0], f = n->fa[1];
    int64_t count = graph_node_numel(n);
    for (int64_t i = 0; i < count; i++) {
        buf[i] = (1 - m) * buf[i] + m * f * s[1][i];
        o[i] = buf[i];
    }
    return 0;
}

// cache[:, :, pos:pos+T, :] = new; the value is the cache after the write.
static int ref_kv_write(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    const graph_node *nw = src(c, n, 1);
    int64_t BH = n->shape[0] * n->shape[1], S = n->shape[2], D = n->shape[3], T = nw->shape[2];
    double pos = s[2][0];
    if (!(pos >= 0 && pos + (double)T <= (double)S))
        return fail(c, "kv_write: position %.0f with %lld rows is outside a cache of %lld", pos,
                        (long long)T, (long long)S);
    double *cache = (double *)s[0];
    for (int64_t bh = 0; bh < BH; bh++)
        memcpy(cache + (bh * S + (int64_t)pos) * D, s[1] + bh * T * D, (size_t)(T * D) * sizeof *o);
    memcpy(o, cache, (size_t)graph_node_numel(n) * sizeof *o);
    return 0;
}

// ---- the grad scaler ----------------------------------------------------------------

// 1 when an element of a tensor times 1/scale is inf or NaN. Both the
// element and the product are rounded to the tensor's dtype first, as the
// executors store them: a scaled f32 gradient beyond FLT_MAX overflowed
// there, which is what the scaler is for. (Values inside the backward are
// not rounded here, as everywhere in the reference: an f16 intermediate that
// overflows in an executor but not in fp64 is a step only the executor skips.)
static int ref_found_inf(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    double inv = (float)(1 / s[0][0]);
    o[0] = n->ia[0] && s[1][0] != 0; // an earlier flag of the chain
    for (int k = n->ia[0] ? 2 : 1; k < n->nsrc; k++) {
        enum dtype t = src(c, n, k)->dtype;
        int64_t count = graph_node_numel(src(c, n, k));
        for (int64_t i = 0; i < count && !o[0]; i++)
            o[0] = !isfinite(op_cast_value(t, op_cast_value(t, s[k][i]) * inv));
    }
    return 0;
}

// PyTorch's _amp_update_scale_: an inf or NaN backs the scale off and
// restarts the count of good steps; growth_interval good steps in a row grow
// it (unless that would overflow f32); a good step is one optimizer step.
static int ref_scaler_update(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    (void)c;
    double *scale = (double *)s[0], *tracker = (double *)s[1], *step = (double *)s[2];
    if (s[3][0] != 0) {
        *scale *= n->fa[1];
        *tracker = 0;
    } else {
        *step += 1;
        if (*tracker + 1 >= (double)n->ia[0]) {
            if (isfinite(op_cast_value(DT_F32, *scale * n->fa[0])))
                *scale *= n->fa[0];
            *tracker = 0;
        } else {
            *tracker += 1;
        }
    }
    o[0] = *scale;
    return 0;
}

// ---- the interpreter -------------------------------------------------------------

static bool is_source(const graph *g, int i) { return op_kind(g->nodes[i].op) == OPK_SOURCE; }

// Frees every value but the borrowed sources.
static void free_vals(const graph *g, double **vals, double *const *srcs) {
    for (int i = 0; i < g->n; i++)
        if (!(srcs && is_source(g, i)))
            free(vals[i]);
    free(vals);
}

// Every node's value at optimizer step `step`. Sources are read from
// m->values, or borrowed from srcs (a session's copies, which the updates
// then write). With keep_all false, each value is freed after its last use
// (outputs and the loss are kept).
static double **ref_exec(const model *m, double *const *srcs, uint64_t step, bool keep_all,
                         char *err, size_t errcap) {
    const graph *g = m->g;
    ref_ctx c = {m, g, step, err, errcap};
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
        if (srcs && is_source(g, i)) {
            vals[i] = srcs[i];
        } else {
            vals[i] = malloc((size_t)graph_node_numel(n) * sizeof **vals);
            if (!vals[i]) {
                snprintf(err, errcap, "out of memory in the reference run at %%%d %s", i,
                         op_name(n->op));
                goto fail;
            }
            if (ref_table[n->op](&c, n, s, vals[i]) < 0)
                goto fail;
        }
        if (keep_all)
            continue;
        for (int j = 0; j < n->nsrc; j++) {
            int p = n->src[j];
            if (--left[p] == 0 && !(srcs && is_source(g, p))) {
                free(vals[p]);
                vals[p] = NULL;
            }
        }
        if (left[i] == 0 && !(srcs && is_source(g, i))) {
            free(vals[i]);
            vals[i] = NULL;
        }
    }
    free(left);
    return vals;
fail:
    free(left);
    free_vals(g, vals, srcs);
    return NULL;
}

// Copies of the outputs out of one run's values.
static int copy_outputs(const graph *g, double **vals, double **outputs, char *err, size_t errcap) {
    for (int k = 0; k < g->noutputs; k++) {
        const graph_node *n = &g->nodes[g->outputs[k]];
        size_t bytes = (size_t)graph_node_numel(n) * sizeof **outputs;
        outputs[k] = malloc(bytes ? bytes : 1);
        if (!outputs[k]) {
            snprintf(err, errcap, "out of memory copying reference output %d", k);
            for (int j = 0; j < k; j++) {
                free(outputs[j]);
                outputs[j] = NULL;
            }
            return -1;
        }
        memcpy(outputs[k], vals[g->outputs[k]], bytes);
    }
    return 0;
}

int ref_run(const model *m, double **outputs, char *err, size_t errcap) {
    double **vals = ref_exec(m, NULL, 1, false, err, errcap);
    if (!vals)
        return -1;
    int rc = copy_outputs(m->g, vals, outputs, err, errcap);
    free_vals(m->g, vals, NULL);
    return rc;
}

int ref_run_given(const model *m, double *const *given, double **outputs, char *err,
                  size_t errcap) {
    const graph *g = m->g;
    ref_ctx c = {m, g, 1, err, errcap};
    double **srcs = calloc((size_t)(g->n ? g->n : 1), sizeof *srcs);
    bool *own = calloc((size_t)(g->n ? g->n : 1), sizeof *own);
    int rc = srcs && own ? 0 : -1;
    if (rc < 0)
        snprintf(err, errcap, "out of memory starting the reference run");
    for (int i = 0; i < g->n && rc == 0; i++) {
        if (!is_source(g, i))
            continue;
        if (given && given[i]) {
            srcs[i] = given[i];
            continue;
        }
        const graph_node *n = &g->nodes[i];
        own[i] = true;
        srcs[i] = malloc((size_t)(graph_node_numel(n) ? graph_node_numel(n) : 1) * sizeof **srcs);
        if (!srcs[i]) {
            snprintf(err, errcap, "out of memory copying %%%d %s", i, op_name(n->op));
            rc = -1;
        } else {
            rc = source(&c, n, srcs[i]);
        }
    }
    double **vals = rc == 0 ? ref_exec(m, srcs, 1, false, err, errcap) : NULL;
    if (vals) {
        rc = copy_outputs(g, vals, outputs, err, errcap);
        free_vals(g, vals, srcs);
    } else {
        rc = -1;
    }
    for (int i = 0; srcs && own && i < g->n; i++)
        if (own[i])
            free(srcs[i]);
    free(srcs);
    free(own);
    return rc;
}

double **ref_run_all(const model *m, char *err, size_t errcap) {
    return ref_exec(m, NULL, 1, true, err, errcap);
}

// ---- sessions: sources that persist across runs -------------------------------------

struct ref_session {
    const model *m;
    double **src; // g->n entries: the fp64 value of each source node, NULL for the rest
};

ref_session *ref_session_new(const model *m, char *err, size_t errcap) {
    const graph *g = m->g;
    ref_session *s = calloc(1, sizeof *s);
    if (s) {
        s->m = m;
        s->src = calloc((size_t)(g->n ? g->n : 1), sizeof *s->src);
    }
    if (!s || !s->src) {
        snprintf(err, errcap, "out of memory starting a reference session");
        ref_session_free(s);
        return NULL;
    }
    ref_ctx c = {m, g, 1, err, errcap};
    for (int i = 0; i < g->n; i++) {
        if (!is_source(g, i))
            continue;
        const graph_node *n = &g->nodes[i];
        s->src[i] = malloc((size_t)graph_node_numel(n) * sizeof **s->src);
        if (!s->src[i]) {
            snprintf(err, errcap, "out of memory copying %%%d %s", i, op_name(n->op));
            ref_session_free(s);
            return NULL;
        }
        if (source(&c, n, s->src[i]) < 0) {
            ref_session_free(s);
            return NULL;
        }
    }
    return s;
}

int ref_session_run(ref_session *s, uint64_t step, double **outputs, char *err, size_t errcap) {
    // the batch may have been redrawn (model_init_inputs); parameters and
    // buffers are the session's own
    const graph *g = s->m->g;
    ref_ctx c = {s->m, g, step, err, errcap};
    for (int i = 0; i < g->n; i++)
        if (g->nodes[i].op == OP_INPUT && source(&c, &g->nodes[i], s->src[i]) < 0)
            return -1;
    double **vals = ref_exec(s->m, s->src, step ? step : 1, false, err, errcap);
    if (!vals)
        return -1;
    int rc = copy_outputs(s->m->g, vals, outputs, err, errcap);
    free_vals(s->m->g, vals, s->src);
    return rc;
}

const double *ref_session_source(const ref_session *s, int node) {
    return node >= 0 && node < s->m->g->n ? s->src[node] : NULL;
}

void ref_session_free(ref_session *s) {
    if (!s)
        return;
    if (s->src)
        for (int i = 0; i < s->m->g->n; i++)
            free(s->src[i]);
    free(s->src);
    free(s);
}

// One LSTM layer and direction in fp64, step by step: the gates i, f, g, o
// of x_t w_ih^T + b_ih + h_prev w_hh^T + b_hh, c = f c_prev + i g,
// h = o tanh(c); (K, B, T, H) with the training slabs c, i, f, g, o.
static int ref_lstm(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    int64_t K = n->shape[0], B = n->shape[1], T = n->shape[2], H = n->shape[3];
    int64_t I = src(c, n, 0)->shape[2], BTH = B * T * H;
    double *cs = malloc((size_t)BTH * sizeof *cs);
    if (!cs)
        return fail(c, "lstm: out of memory for the cell states");
    for (int64_t b = 0; b < B; b++)
        for (int64_t st = 0; st < T; st++) {
            int64_t t = n->ia[0] ? T - 1 - st : st, tp = n->ia[0] ? t + 1 : t - 1;
            for (int64_t j = 0; j < H; j++) {
                double a[4];
                for (int q = 0; q < 4; q++) {
                    int64_t row = q * H + j;
                    double v = s[3][row] + s[4][row];
                    for (int64_t k = 0; k < I; k++)
                        v += s[0][(b * T + t) * I + k] * s[1][row * I + k];
                    for (int64_t k = 0; st > 0 && k < H; k++)
                        v += o[(b * T + tp) * H + k] * s[2][row * H + k];
                    a[q] = v;
                }
                double ig = 1 / (1 + exp(-a[0])), fg = 1 / (1 + exp(-a[1])), gg = tanh(a[2]);
                double og = 1 / (1 + exp(-a[3]));
                double cv = fg * (st > 0 ? cs[(b * T + tp) * H + j] : 0) + ig * gg;
                double v[6] = {og * tanh(cv), cv, ig, fg, gg, og};
                cs[(b * T + t) * H + j] = cv;
                for (int q = 0; q < K; q++)
                    o[q * BTH + (b * T + t) * H + j] = v[q];
            }
        }
    free(cs);
    return 0;
}

// LSTM's backward through time in fp64 from its saved slabs: per step
// back from the last, dh = dy + the recurrence's, dc = dh o (1 - tanh^2 c)
// + the next step's dc f; the gate gradients, then dx, d w_ih, d w_hh, d b.
static int ref_lstm_grad(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    const graph_node *y = src(c, n, 4);
    int64_t B = y->shape[1], T = y->shape[2], H = y->shape[3], I = src(c, n, 1)->shape[2];
    int64_t G = 4 * H, BTH = B * T * H;
    const double *dy = s[0], *x = s[1], *wi = s[2], *wh = s[3], *ys = s[4];
    double *dx = o, *dwi = dx + B * T * I, *dwh = dwi + G * I, *db = dwh + G * H;
    memset(o, 0, (size_t)graph_node_numel(n) * sizeof *o);
    double *dg = malloc((size_t)(G + 2 * H) * sizeof *dg);
    if (!dg)
        return fail(c, "lstm_grad: out of memory");
    double *dh = dg + G, *dc = dh + H;
    for (int64_t b = 0; b < B; b++) {
        memset(dh, 0, (size_t)(2 * H) * sizeof *dh);
        for (int64_t st = T - 1; st >= 0; st--) {
            int64_t t = n->ia[0] ? T - 1 - st : st, tp = n->ia[0] ? t + 1 : t - 1;
            int64_t r = (b * T + t) * H, rp = (b * T + tp) * H;
            for (int64_t j = 0; j < H; j++) {
                double cv = ys[BTH + r + j], ig = ys[2 * BTH + r + j], fg = ys[3 * BTH + r + j];
                double gg = ys[4 * BTH + r + j], og = ys[5 * BTH + r + j], th = tanh(cv);
                double cp = st > 0 ? ys[BTH + rp + j] : 0, dhv = dy[r + j] + dh[j];
                double dcv = dhv * og * (1 - th * th) + dc[j];
                dg[j] = dcv * gg * ig * (1 - ig);
                dg[H + j] = dcv * cp * fg * (1 - fg);
                dg[2 * H + j] = dcv * ig * (1 - gg * gg);
                dg[3 * H + j] = dhv * th * og * (1 - og);
                dc[j] = dcv * fg;
            }
            for (int64_t k = 0; k < H; k++) {
                double v = 0;
                for (int64_t q = 0; q < G; q++)
                    v += dg[q] * wh[q * H + k];
                dh[k] = st > 0 ? v : 0;
            }
            for (int64_t q = 0; q < G; q++) {
                db[q] += dg[q];
                for (int64_t k = 0; k < I; k++) {
                    dx[(b * T + t) * I + k] += dg[q] * wi[q * I + k];
                    dwi[q * I + k] += dg[q] * x[(b * T + t) * I + k];
                }
                for (int64_t k = 0; st > 0 && k < H; k++)
                    dwh[q * H + k] += dg[q] * ys[rp + k];
            }
        }
    }
    free(dg);
    return 0;
}

// CTC in fp64 over probabilities scaled per step (Graves' rescaling, not
// the kernels' log space): alpha over the extended target (blank, l1,
// blank, ..., lL, blank), its per-step sums' logs adding up to log p; the
// gradient from beta: d(-log p)/d lp[t, c] = -sum_{s: l'_s = c} alpha beta /
// (p y_t(c)) in the scaled form.
static double ctc_ref_sample(const graph_node *n, const double *const *s, int64_t b,
                             const graph_node *lpn, int64_t S, double *al, double *be, double *grad,
                             double gscale) {
    int64_t T = lpn->shape[0], B = lpn->shape[1], C = lpn->shape[2], L = (int64_t)s[2][b];
    int64_t E = 2 * L + 1, blank = n->ia[0];
    int64_t lab[2 * S + 1];
    for (int64_t k = 0; k < E; k++)
        lab[k] = k % 2 ? (int64_t)s[1][b * S + k / 2] : blank;
    double logp = 0;
    for (int64_t t = 0; t < T; t++) {
        double sum = 0;
        for (int64_t k = 0; k < E; k++) {
            double v;
            if (t == 0)
                v = k < 2 ? 1 : 0;
            else {
                const double *p = al + (t - 1) * E;
                v = p[k] + (k >= 1 ? p[k - 1] : 0) +
                    (k >= 2 && k % 2 && lab[k - 2] != lab[k] ? p[k - 2] : 0);
            }
            al[t * E + k] = v * exp(s[0][(t * B + b) * C + lab[k]]);
            sum += al[t * E + k];
        }
        for (int64_t k = 0; k < E && sum > 0; k++)
            al[t * E + k] /= sum;
        logp += log(sum);
    }
    double last = al[(T - 1) * E + E - 1] + (E > 1 ? al[(T - 1) * E + E - 2] : 0);
    logp += log(last);
    if (!grad || !(last > 0))
        return -logp;
    for (int64_t t = T - 1; t >= 0; t--) {
        double sum = 0;
        for (int64_t k = 0; k < E; k++) {
            double v;
            if (t == T - 1)
                v = k >= E - 2 ? 1 : 0;
            else {
                const double *q = be + (t + 1) * E;
                v = q[k] + (k + 1 < E ? q[k + 1] : 0) +
                    (k + 2 < E && k % 2 && lab[k + 2] != lab[k] ? q[k + 2] : 0);
            }
            be[t * E + k] = v * exp(s[0][(t * B + b) * C + lab[k]]);
            sum += be[t * E + k];
        }
        for (int64_t k = 0; k < E && sum > 0; k++)
            be[t * E + k] /= sum;
    }
    // alpha_t beta_t / y_t summed over k is p up to the step's scales: normalize per t
    for (int64_t t = 0; t < T; t++) {
        double z = 0;
        for (int64_t k = 0; k < E; k++)
            z += al[t * E + k] * be[t * E + k] / exp(s[0][(t * B + b) * C + lab[k]]);
        for (int64_t k = 0; k < E && z > 0; k++)
            grad[(t * B + b) * C + lab[k]] -=
                gscale * al[t * E + k] * be[t * E + k] / exp(s[0][(t * B + b) * C + lab[k]]) / z;
    }
    return -logp;
}

// The loss, or (grad) its gradient times dloss; -1 with a bad target
static int ctc_ref(ref_ctx *c, const graph_node *n, const double *const *s, double *loss,
                   double *grad, double dloss) {
    const graph_node *lpn = src(c, n, 0), *tg = src(c, n, 1);
    int64_t T = lpn->shape[0], B = lpn->shape[1], C = lpn->shape[2], S = tg->shape[1];
    double *al = malloc((size_t)(2 * T * (2 * S + 1)) * sizeof *al);
    if (!al)
        return fail(c, "ctc_loss: out of memory");
    double total = 0;
    for (int64_t b = 0; b < B; b++) {
        int64_t L = (int64_t)s[2][b];
        bool ok = L >= 0 && L <= S;
        for (int64_t k = 0; ok && k < L; k++)
            ok = s[1][b * S + k] >= 0 && s[1][b * S + k] < C && s[1][b * S + k] != n->ia[0];
        if (!ok) {
            free(al);
            return fail(c, "ctc_loss: sample %lld has a bad target", (long long)b);
        }
        double per = 1.0 / (double)(L > 1 ? L : 1) / (double)B;
        double nll = ctc_ref_sample(n, s, b, lpn, S, al, al + T * (2 * S + 1), grad, dloss * per);
        total += (isinf(nll) && n->ia[1] ? 0 : nll) * per;
    }
    free(al);
    *loss = total;
    return 0;
}

static int ref_ctc_loss(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    return ctc_ref(c, n, s, o, NULL, 0);
}

static int ref_ctc_loss_grad(ref_ctx *c, const graph_node *n, const double *const *s, double *o) {
    double loss;
    memset(o, 0, (size_t)graph_node_numel(n) * sizeof *o);
    graph_node f = *n; // ctc_loss's sources: the gradient's after dloss
    for (int k = 0; k < 3; k++)
        f.src[k] = n->src[k + 1];
    return ctc_ref(c, &f, s + 1, &loss, o, s[0][0]);
}
