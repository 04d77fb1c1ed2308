// Training kernels (cpu_kernels.h): the backward ops and training batch
// norm (the optimizers' updates are in cpu_update.c), one kernel each, as PyTorch's backward
// formulas and its foreach optimizers run. Outer loops are OpenMP-parallel over independent rows,
// channels or output tiles; inner loops are unit-stride and vectorize. Sums
// that reduce over many rows go through double accumulators. Inputs may be
// strided views: they are made contiguous first (a counted copy), except the
// pointwise ones, which walk strides with cpu_iter. act_grad and sum_to have
// f16 loops; the others read f16 operands (AMP) into f32 scratch and round
// an f16 output once (cpu_f32_in, cpu_f32_out), so their sums stay f32 or
// wider.
#include "cpu_f16.h"
#include "cpu_iter.h"
#include "cpu_kernels.h"
#include "cpu_formulas.h"
#include "cpu_sum_to.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

// f16 pointwise operands go through f32 buffers of this many elements.
#define CHUNK 256

uint64_t cpu_step(const cpu_ctx *c) { return c->step ? c->step : 1; }

// The in-place targets of updates: the model's own tensors, written where
// they are, so they must be contiguous f32.
int cpu_need_target(cpu_ctx *c, const char *what, const tensor *t) {
    if (!t)
        return 0;
    if (cpu_need_f32(c, what, t) < 0)
        return -1;
    if (!tensor_is_contiguous(t))
        return cpu_fail(c, "%s: the tensors it updates in place must be contiguous", what);
    return 0;
}

// ---- ACT_GRAD ----------------------------------------------------------------

// o[i] = dy[i] * f'(x[i]) over a run; a, b the forward op's attributes.
typedef void (*act_fn)(int64_t n, float *restrict o, const float *restrict dy, int64_t sd,
                       const float *restrict xp, int64_t sx, float a, float b);

// one for every op of core/pointwise.h, by its derivative there
#define X(U, l, a0, b0)                                                                            \
    static void ag_##l(int64_t n, float *restrict o, const float *restrict dy, int64_t sd,         \
                       const float *restrict xp, int64_t sx, float a, float b) {                   \
        if (sd == 1 && sx == 1) {                                                                  \
            _Pragma("omp simd") for (int64_t i = 0; i < n; i++) o[i] =                             \
                dy[i] * tc_d_##l(xp[i], a, b);                                                     \
        } else {                                                                                   \
            for (int64_t i = 0; i < n; i++)                                                        \
                o[i] = dy[i * sd] * tc_d_##l(xp[i * sx], a, b);                                    \
        }                                                                                          \
    }
TC_POINTWISE_OPS(X)
#undef X

static const act_fn act_table[OP_COUNT] = {
#define X(U, l, a0, b0) [OP_##U] = ag_##l,
    TC_POINTWISE_OPS(X)
#undef X
};

typedef struct act_job {
    act_fn fn;
    float a, b;   // the forward op's attributes
    enum dtype t; // the operands' dtype
} act_job;

static void seg_act_f32(void *ctx, int64_t n, char *const *ptr, const int64_t *st, int64_t flat0) {
    (void)flat0;
    const act_job *j = ctx;
    j->fn(n, (float *)ptr[0], (const float *)ptr[1], st[1], (const float *)ptr[2], st[2], j->a,
          j->b);
}

static void seg_act_half(void *ctx, int64_t n, char *const *ptr, const int64_t *st, int64_t flat0) {
    (void)flat0;
    const act_job *j = ctx;
    float d[CHUNK], x[CHUNK], y[CHUNK];
    const uint16_t *pd = (const uint16_t *)ptr[1], *px = (const uint16_t *)ptr[2];
    for (int64_t i = 0; i < n; i += CHUNK) {
        int64_t m = n - i < CHUNK ? n - i : CHUNK;
        cpu_half_load(j->t, m, pd + i * st[1], st[1], d);
        cpu_half_load(j->t, m, px + i * st[2], st[2], x);
        j->fn(m, y, d, 1, x, 1, j->a, j->b);
        cpu_half_store(j->t, m, y, (uint16_t *)ptr[0] + i, 1);
    }
}

int cpu_act_grad(cpu_ctx *c, const graph_node *n, const tensor *dy, const tensor *x, tensor *out) {
    enum op f = (enum op)n->ia[0];
    act_job j = {f >= 0 && f < OP_COUNT ? act_table[f] : NULL, (float)n->fa[0], (float)n->fa[1],
                 dy->dtype};
    if (!j.fn)
        return cpu_fail(c, "act_grad: no derivative for %s (cast and dropout have none here)",
                        f >= 0 && f < OP_COUNT ? op_name(f) : "an unknown op");
    if (dy->dtype != x->dtype || out->dtype != x->dtype ||
        (dy->dtype != DT_F32 && !dtype_is_half(dy->dtype)))
        return cpu_fail(c, "act_grad: dtypes %s, %s and %s (f32, f16 or bf16, the same for all)",
                        dtype_name(dy->dtype), dtype_name(x->dtype), dtype_name(out->dtype));
    cpu_iter it;
    cpu_iter_init(&it, out, 2, (const tensor *[]){dy, x});
    cpu_iter_run(&it, dy->dtype == DT_F32 ? seg_act_f32 : seg_act_half, &j);
    c->kernels++;
    return 0;
}

// ---- SUM_TO --------------------------------------------------------------------

// f32, f16 or bf16 elements as f32
static void load_row(enum dtype t, const char *p, int64_t n, float *dst) {
    if (t == DT_F32)
        memcpy(dst, p, (size_t)n * sizeof *dst);
    else
        cpu_half_load(t, n, (const uint16_t *)p, 1, dst);
}

static double row_sum(enum dtype t, const char *p, int64_t n) {
    double total = 0;
    float buf[CHUNK];
    for (int64_t i0 = 0; i0 < n; i0 += CHUNK) {
        int64_t m = n - i0 < CHUNK ? n - i0 : CHUNK;
        const float *x = (const float *)p + i0;
        if (t != DT_F32) {
            cpu_half_load(t, m, (const uint16_t *)p + i0, 1, buf);
            x = buf;
        }
        float s = 0;
#pragma omp simd reduction(+ : s)
        for (int64_t i = 0; i < m; i++)
            s += x[i];
        total += s;
    }
    return total;
}

// Element offset of flat index q over dims (size, stride).
static int64_t offset_of(int64_t q, int nd, const int64_t *size, const int64_t *stride) {
    int64_t off = 0;
    for (int d = nd - 1; d >= 0; d--) {
        off += (q % size[d]) * stride[d];
        q /= size[d];
    }
    return off;
}

// dy's dims, size-1 ones dropped and neighbours of the same kind merged, are
// kept (K: in out) or reduced (R). When the last one is kept, a tile is IB
// consecutive outputs summed as vectors over every reduced position; when
// it is reduced, a tile is one output summed as rows. Few tiles (a bias
// gradient, a full sum) also split the reduction, into partial sums that a
// second loop of the same parallel region adds up. (The plan: cpu_sum_to.h.)
enum { IB = 256 };

void sum_to_plan_make(const tensor *dc, const tensor *out, sum_to_plan *p) {
    int nd = dc->ndim, off = nd - out->ndim, m = 0;
    int64_t size[TENSOR_MAX_DIMS];
    bool kept[TENSOR_MAX_DIMS];
    for (int d = 0; d < nd; d++) {
        int64_t sz = dc->shape[d];
        if (sz == 1)
            continue;
        bool k = d >= off && out->shape[d - off] == sz;
        if (m && kept[m - 1] == k) {
            size[m - 1] *= sz;
        } else {
            size[m] = sz;
            kept[m++] = k;
        }
    }
    int64_t stride[TENSOR_MAX_DIMS], st = 1;
    for (int d = m - 1; d >= 0; d--) {
        stride[d] = st;
        st *= size[d];
    }
    memset(p, 0, sizeof *p);
    p->I = p->L = 1;
    for (int d = 0; d < m; d++) {
        if (d == m - 1 && kept[d])
            p->I = size[d];
        else if (d == m - 1)
            p->L = size[d];
        else if (kept[d]) {
            p->ks[p->nk] = size[d];
            p->kst[p->nk++] = stride[d];
        } else {
            p->rs[p->nr] = size[d];
            p->rst[p->nr++] = stride[d];
        }
    }
}

int cpu_sum_to(cpu_ctx *c, const tensor *dy, tensor *out) {
    enum dtype t = dy->dtype;
    if ((t != DT_F32 && !dtype_is_half(t)) || out->dtype != t)
        return cpu_fail(c, "sum_to: dtype %s is not supported (f32, f16 and bf16 are)",
                        dtype_name(t));
    tensor *dc = cpu_contiguous(c, dy);
    if (!dc)
        return -1;
    sum_to_plan p;
    sum_to_plan_make(dc, out, &p);
    int64_t nK = shape_numel(p.nk, p.ks), nR = shape_numel(p.nr, p.rs);
    int64_t nb = (p.I + IB - 1) / IB, tiles = nK * nb, onum = nK * p.I;
    int64_t red = nR * p.L; // reduced positions of a tile: rows (vector tiles) or elements
    if (p.I > 1)
        red = nR;
    bool par = tensor_numel(dc) >= CPU_PAR_MIN;
    int nt = par ? omp_get_max_threads() : 1;
    int64_t split = 1;
    if (par && tiles < 4 * nt) {
        int64_t minchunk = p.I > 1 ? (4096 + p.I - 1) / p.I : 4096;
        split = (4 * nt + tiles - 1) / tiles;
        if (split > red / minchunk)
            split = red / minchunk;
        if (split < 1)
            split = 1;
    }
    float *part = NULL;
    if (split > 1 && !(part = malloc((size_t)(split * onum) * sizeof *part))) {
        tensor_free(dc);
        return cpu_fail(c, "sum_to: out of memory for partial sums");
    }
    const char *px = tensor_data(dc);
    int64_t es = (int64_t)dtype_size(t);
    float *of = t == DT_F32 ? tensor_f32(out) : NULL;
    uint16_t *oh = dtype_is_half(t) ? (uint16_t *)tensor_data(out) : NULL;
#pragma omp parallel if (par)
    {
#pragma omp for schedule(static)
        for (int64_t w = 0; w < tiles * split; w++) {
            int64_t tile = w / split, r = w % split;
            int64_t kidx = tile / nb, i0 = (tile % nb) * IB;
            int64_t len = p.I - i0 < IB ? p.I - i0 : IB;
            int64_t q0 = red * r / split, q1 = red * (r + 1) / split;
            const char *base = px + (offset_of(kidx, p.nk, p.ks, p.kst) + i0) * es;
            float acc[IB], buf[IB];
            if (p.I > 1) { // vectors of len over the reduced rows
                for (int64_t i = 0; i < len; i++)
                    acc[i] = 0;
                for (int64_t q = q0; q < q1; q++) {
                    const char *row = base + offset_of(q, p.nr, p.rs, p.rst) * es;
                    const float *v = (const float *)row;
                    if (t != DT_F32) {
                        load_row(t, row, len, buf);
                        v = buf;
                    }
#pragma omp simd
                    for (int64_t i = 0; i < len; i++)
                        acc[i] += v[i];
                }
            } else { // row segments of the flat reduced range [q0, q1)
                double total = 0;
                for (int64_t q = q0; q < q1;) {
                    int64_t j = q % p.L, seg = p.L - j < q1 - q ? p.L - j : q1 - q;
                    const char *row = base + (offset_of(q / p.L, p.nr, p.rs, p.rst) + j) * es;
                    total += row_sum(t, row, seg);
                    q += seg;
                }
                acc[0] = (float)total;
            }
            float *dst = split > 1 ? part + r * onum + kidx * p.I + i0 : NULL;
            for (int64_t i = 0; i < len; i++) {
                if (dst)
                    dst[i] = acc[i];
                else if (of)
                    of[kidx * p.I + i0 + i] = acc[i];
                else
                    oh[kidx * p.I + i0 + i] = dtype_f32_to_half(t, acc[i]);
            }
        }
        if (split > 1) {
#pragma omp for schedule(static)
            for (int64_t o = 0; o < onum; o++) {
                double s = 0;
                for (int64_t r = 0; r < split; r++)
                    s += part[r * onum + o];
                if (of)
                    of[o] = (float)s;
                else
                    oh[o] = dtype_f32_to_half(t, (float)s);
            }
        }
    }
    free(part);
    tensor_free(dc);
    c->kernels++;
    return 0;
}

// ---- SOFTMAX_GRAD, LOG_SOFTMAX_GRAD --------------------------------------------

int cpu_softmax_grad(cpu_ctx *c, const tensor *dy, const tensor *y, bool log, int64_t after,
                     tensor *out) {
    const char *what = log ? "log_softmax_grad" : "softmax_grad";
    tensor *t[2], *oc = NULL;
    if (cpu_inputs_f32(c, what, 2, (const tensor *[]){dy, y}, t) < 0)
        return -1;
    if (!(oc = cpu_f32_out(c, what, out))) {
        cpu_free_all(2, t);
        return -1;
    }
    int64_t C, in;
    cpu_softmax_axis(t[0], after, &C, &in);
    int64_t rows = tensor_numel(t[0]) / C;
    const float *pd = tensor_f32(t[0]), *py = tensor_f32(t[1]);
    float *po = tensor_f32(oc);
    if (in > 1) { // (outer, C, inner): each (outer, inner) column on its own
#pragma omp parallel for if (rows * C >= CPU_PAR_MIN) schedule(static)
        for (int64_t r = 0; r < rows; r++) {
            int64_t at = r / in * C * in + r % in;
            const float *d = pd + at, *yr = py + at;
            double s = 0;
            for (int64_t i = 0; i < C; i++)
                s += log ? d[i * in] : d[i * in] * yr[i * in];
            float sf = (float)s;
            for (int64_t i = 0; i < C; i++)
                po[at + i * in] =
                    log ? d[i * in] - cpu_expf(yr[i * in]) * sf : yr[i * in] * (d[i * in] - sf);
        }
        rows = 0;
    }
#pragma omp parallel for if (rows * C >= CPU_PAR_MIN) schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const float *d = pd + r * C, *yr = py + r * C;
        float *o = po + r * C;
        double s = 0;
        if (log) {
#pragma omp simd reduction(+ : s)
            for (int64_t i = 0; i < C; i++)
                s += d[i];
            float sf = (float)s;
#pragma omp simd
            for (int64_t i = 0; i < C; i++)
                o[i] = d[i] - cpu_expf(yr[i]) * sf;
        } else {
#pragma omp simd reduction(+ : s)
            for (int64_t i = 0; i < C; i++)
                s += d[i] * yr[i];
            float sf = (float)s;
#pragma omp simd
            for (int64_t i = 0; i < C; i++)
                o[i] = yr[i] * (d[i] - sf);
        }
    }
    cpu_free_all(2, t);
    c->kernels++;
    return cpu_f32_done(oc, out, 0);
}

// ---- norms: statistics recomputed from x -------------------------------------

// mean (when centered) and 1/sqrt(var + eps) of n contiguous floats; var
// is the biased one, (x - mean)^2 summed, two passes.
static void row_stats(const float *x, int64_t n, bool center, double eps, float *mean,
                      float *rstd) {
    double s = 0, q = 0;
    if (center) {
#pragma omp simd reduction(+ : s)
        for (int64_t i = 0; i < n; i++)
            s += x[i];
    }
    float m = (float)(s / (double)n);
#pragma omp simd reduction(+ : q)
    for (int64_t i = 0; i < n; i++)
        q += (double)((x[i] - m) * (x[i] - m));
    *mean = m;
    *rstd = (float)(1.0 / sqrt(q / (double)n + eps));
}

// Statistics of channel ch of x (N, C, S) over its N planes.
static void chan_stats(const float *x, int64_t N, int64_t C, int64_t S, int64_t ch, double eps,
                       float *mean, float *rstd, double *var) {
    double s = 0, q = 0;
    for (int64_t b = 0; b < N; b++) {
        const float *p = x + (b * C + ch) * S;
#pragma omp simd reduction(+ : s)
        for (int64_t i = 0; i < S; i++)
            s += p[i];
    }
    double n = (double)(N * S);
    float m = (float)(s / n);
    for (int64_t b = 0; b < N; b++) {
        const float *p = x + (b * C + ch) * S;
#pragma omp simd reduction(+ : q)
        for (int64_t i = 0; i < S; i++)
            q += (double)((p[i] - m) * (p[i] - m));
    }
    *mean = m;
    *var = q / n;
    *rstd = (float)(1.0 / sqrt(q / n + eps));
}

// Over one set of statistics with n elements: g = dy * w, xhat = (x - mean)
// rstd, dx = rstd (g - mean(g) - xhat mean(g xhat)); without centering
// (rms) the mean(g) term goes. w is per element (wstep 1) or one value
// (wstep 0). sg and sgx are the sums of g and g * (x - mean) already taken.
static void dx_apply(int64_t len, const float *dy, const float *x, const float *w, int64_t wstep,
                     float mean, float rstd, float mg, float mgx, float *o) {
    if (wstep) {
#pragma omp simd
        for (int64_t i = 0; i < len; i++)
            o[i] = rstd * (dy[i] * w[i] - mg - (x[i] - mean) * rstd * mgx);
    } else {
        float wv = w[0];
#pragma omp simd
        for (int64_t i = 0; i < len; i++)
            o[i] = rstd * (dy[i] * wv - mg - (x[i] - mean) * rstd * mgx);
    }
}

// sums of dy * w and dy * w * (x - mean) over len elements
static void g_sums(int64_t len, const float *dy, const float *x, const float *w, int64_t wstep,
                   float mean, double *sg, double *sgx) {
    double a = 0, b = 0;
    if (wstep) {
#pragma omp simd reduction(+ : a, b)
        for (int64_t i = 0; i < len; i++) {
            float g = dy[i] * w[i];
            a += g;
            b += g * (x[i] - mean);
        }
    } else {
        float wv = w[0];
#pragma omp simd reduction(+ : a, b)
        for (int64_t i = 0; i < len; i++) {
            float g = dy[i] * wv;
            a += g;
            b += g * (x[i] - mean);
        }
    }
    *sg += a;
    *sgx += b;
}

// ---- batch norm over channels-last (NHWC) tensors -----------------------------
//
// The compiled mode stores convolution activations channels-last
// (compile/layout.c): (N, C, H, W) in memory as M = N*H*W rows of C
// channels. Per-channel statistics are then column sums over the rows:
// each thread sums its static share of rows into partials of its own
// (double), added in thread order at the end, so a thread count gives the
// same bits every run. The math is the plain kernels' (chan_stats, g_sums,
// dx_apply, wg_sums), in the same float / double types.

// Column sums over rows [0, M) of f(r, c) into sums (C doubles), OpenMP
// static shares; part holds nt * C doubles.
#define NHWC_COLSUM(M, C, par, part, sums, expr)                                                   \
    do {                                                                                           \
        int nt_ = (par) ? omp_get_max_threads() : 1;                                               \
        memset(part, 0, (size_t)(nt_ * (C)) * sizeof *(part));                                     \
        _Pragma("omp parallel if (par) num_threads(nt_)") {                                        \
            double *pp_ = (part) + (int64_t)omp_get_thread_num() * (C);                            \
            _Pragma("omp for schedule(static)") for (int64_t r = 0; r < (M); r++) {                \
                _Pragma("omp simd") for (int64_t c = 0; c < (C); c++) pp_[c] += (expr);            \
            }                                                                                      \
        }                                                                                          \
        for (int64_t c = 0; c < (C); c++) {                                                        \
            double t_ = 0;                                                                         \
            for (int k_ = 0; k_ < nt_; k_++)                                                       \
                t_ += (part)[(int64_t)k_ * (C) + c];                                               \
            (sums)[c] = t_;                                                                        \
        }                                                                                          \
    } while (0)

// mean (float), biased variance (double) and rstd per channel of x
// (M rows of C); part: nt * C doubles, sums: C doubles.
static void nhwc_stats(const float *x, int64_t M, int64_t C, double eps, bool par, double *part,
                       double *sums, float *mean, double *var, float *rstd) {
    NHWC_COLSUM(M, C, par, part, sums, (double)x[r * C + c]);
    for (int64_t c = 0; c < C; c++)
        mean[c] = (float)(sums[c] / (double)M);
    NHWC_COLSUM(M, C, par, part, sums,
                (double)((x[r * C + c] - mean[c]) * (x[r * C + c] - mean[c])));
    for (int64_t c = 0; c < C; c++) {
        var[c] = sums[c] / (double)M;
        rstd[c] = (float)(1.0 / sqrt(var[c] + eps));
    }
}

// Scratch for the channels-last kernels: partials, sums, and per-channel
// mean, rstd, var and two more float columns. NULL when memory runs out.
typedef struct nhwc_tmp {
    double *part, *sums, *var, *sums2;
    float *mean, *rstd, *f1, *f2;
} nhwc_tmp;

static bool nhwc_tmp_new(nhwc_tmp *t, int64_t C) {
    int nt = omp_get_max_threads();
    t->part = malloc((size_t)(nt * C) * sizeof *t->part);
    t->sums = malloc((size_t)(3 * C) * sizeof *t->sums);
    t->mean = malloc((size_t)(4 * C) * sizeof *t->mean);
    if (!t->part || !t->sums || !t->mean) {
        free(t->part), free(t->sums), free(t->mean);
        return false;
    }
    t->var = t->sums + C;
    t->sums2 = t->sums + 2 * C;
    t->rstd = t->mean + C;
    t->f1 = t->mean + 2 * C;
    t->f2 = t->mean + 3 * C;
    return true;
}

static void nhwc_tmp_free(nhwc_tmp *t) {
    free(t->part);
    free(t->sums);
    free(t->mean);
}

// x's layout when the batch norm kernels take it as it is: 1 channels-last,
// 0 plain contiguous f32, -1 anything else (the caller copies it).
static int bn_layout(const tensor *t) {
    if (t->dtype != DT_F32)
        return -1;
    if (tensor_is_contiguous(t))
        return 0;
    return cpu_channels_last(t) ? 1 : -1;
}

// batch_norm_stats, batch_norm_grad and batch_norm_wgrad when every 4-d
// operand is channels-last f32 (the compiled mode's layout). 1 when the
// operands are not all so (the plain kernels run), 0 done, -1 failed.
static int bn_nhwc(cpu_ctx *c, enum op op, const tensor *dy, const tensor *x, const tensor *w,
                   double eps, tensor *out) {
    if (x->ndim != 4 || bn_layout(x) != 1 || (dy && bn_layout(dy) != 1) ||
        (w && (w->dtype != DT_F32 || !tensor_is_contiguous(w))) || out->dtype != DT_F32 ||
        (op == OP_BATCH_NORM_GRAD ? bn_layout(out) != 1 : !tensor_is_contiguous(out)))
        return 1;
    int64_t C = x->shape[1], M = tensor_numel(x) / C;
    bool par = M * C >= CPU_PAR_MIN;
    nhwc_tmp t;
    if (!nhwc_tmp_new(&t, C))
        return cpu_fail(c, "%s: out of memory for per-channel sums", op_name(op));
    const float *px = tensor_f32(x), *pd = dy ? tensor_f32(dy) : NULL;
    float *po = tensor_f32(out);
    nhwc_stats(px, M, C, eps, par, t.part, t.sums, t.mean, t.var, t.rstd);
    const float *mean = t.mean, *rstd = t.rstd;
    if (op == OP_BATCH_NORM_STATS) {
        for (int64_t ch = 0; ch < C; ch++) {
            po[ch] = mean[ch];
            po[C + ch] = (float)t.var[ch];
            po[2 * C + ch] = rstd[ch];
        }
    } else if (op == OP_BATCH_NORM_WGRAD) {
        NHWC_COLSUM(M, C, par, t.part, t.sums,
                    (double)(pd[r * C + c] * ((px[r * C + c] - mean[c]) * rstd[c])));
        NHWC_COLSUM(M, C, par, t.part, t.sums2, (double)pd[r * C + c]);
        for (int64_t ch = 0; ch < C; ch++) {
            po[ch] = (float)t.sums[ch];
            po[C + ch] = (float)t.sums2[ch];
        }
    } else { // OP_BATCH_NORM_GRAD
        const float *pw = tensor_f32(w);
        NHWC_COLSUM(M, C, par, t.part, t.sums, (double)(pd[r * C + c] * pw[c]));
        NHWC_COLSUM(M, C, par, t.part, t.sums2,
                    (double)(pd[r * C + c] * pw[c] * (px[r * C + c] - mean[c])));
        float *mg = t.f1, *mgx = t.f2;
        for (int64_t ch = 0; ch < C; ch++) {
            mg[ch] = (float)(t.sums[ch] / (double)M);
            mgx[ch] = (float)(t.sums2[ch] * rstd[ch] / (double)M);
        }
#pragma omp parallel for if (par) schedule(static)
        for (int64_t r = 0; r < M; r++) {
#pragma omp simd
            for (int64_t ch = 0; ch < C; ch++) {
                int64_t i = r * C + ch;
                po[i] =
                    rstd[ch] * (pd[i] * pw[ch] - mg[ch] - (px[i] - mean[ch]) * rstd[ch] * mgx[ch]);
            }
        }
    }
    nhwc_tmp_free(&t);
    c->kernels++;
    return 0;
}

// group norm's groups come from the node, unchecked by shape inference
static int bad_groups(cpu_ctx *c, const graph_node *n, const tensor *x) {
    bool gn = n->op == OP_GROUP_NORM_GRAD || n->op == OP_GROUP_NORM_WGRAD;
    if (gn && (x->ndim < 2 || n->ia[0] <= 0 || x->shape[1] % n->ia[0]))
        return cpu_fail(c, "%s: %lld groups do not divide the channels of the input",
                        op_name(n->op), (long long)n->ia[0]);
    return 0;
}

// batch norm's statistics of channel ch: the given ones (batch_norm_stats'
// output, contiguous f32 (3, C)), else chan_stats over x
static void bn_stats_of(const float *st, const float *px, int64_t N, int64_t C, int64_t S,
                        int64_t ch, double eps, float *mean, float *rstd) {
    if (st) {
        *mean = st[ch];
        *rstd = st[2 * C + ch];
        return;
    }
    double var;
    chan_stats(px, N, C, S, ch, eps, mean, rstd, &var);
}

// the statistics' data when given as batch_norm_stats leaves them, else NULL
// (computed from x instead)
static const float *bn_given(const tensor *st, int64_t C) {
    return st && st->dtype == DT_F32 && tensor_is_contiguous(st) && st->ndim == 2 &&
                   st->shape[0] == 3 && st->shape[1] == C
               ? tensor_f32(st)
               : NULL;
}

int cpu_norm_grad(cpu_ctx *c, const graph_node *n, const tensor *dy, const tensor *x,
                  const tensor *w, tensor *out) {
    return cpu_norm_grad_stats(c, n, dy, x, w, NULL, out);
}

int cpu_norm_wgrad(cpu_ctx *c, const graph_node *n, const tensor *dy, const tensor *x,
                   tensor *out) {
    return cpu_norm_wgrad_stats(c, n, dy, x, NULL, out);
}

int cpu_norm_grad_stats(cpu_ctx *c, const graph_node *n, const tensor *dy, const tensor *x,
                        const tensor *w, const tensor *stats, tensor *out) {
    if (n->op == OP_BATCH_NORM_GRAD) {
        int rc = bn_nhwc(c, n->op, dy, x, w, n->fa[0], out);
        if (rc <= 0)
            return rc;
    }
    tensor *t[4];
    if (cpu_inputs_f32(c, op_name(n->op), 3, (const tensor *[]){dy, x, w}, t) < 0)
        return -1;
    t[3] = cpu_f32_out(c, op_name(n->op), out);
    if (!t[3] || bad_groups(c, n, t[1]) < 0) {
        cpu_free_all(4, t);
        return -1;
    }
    const float *pd = tensor_f32(t[0]), *px = tensor_f32(t[1]), *pw = tensor_f32(t[2]);
    float *po = tensor_f32(t[3]);
    double eps = n->fa[0];
    int64_t numel = tensor_numel(t[1]);
    bool par = numel >= CPU_PAR_MIN;
    if (n->op == OP_LAYER_NORM_GRAD || n->op == OP_RMS_NORM_GRAD) {
        bool center = n->op == OP_LAYER_NORM_GRAD;
        int64_t C = t[1]->shape[t[1]->ndim - 1], rows = numel / C;
#pragma omp parallel for if (par) schedule(static)
        for (int64_t r = 0; r < rows; r++) {
            const float *xr = px + r * C, *dr = pd + r * C;
            float mean, rstd;
            row_stats(xr, C, center, eps, &mean, &rstd);
            double sg = 0, sgx = 0;
            g_sums(C, dr, xr, pw, 1, mean, &sg, &sgx);
            float mg = center ? (float)(sg / (double)C) : 0.0f;
            float mgx = (float)(sgx * rstd / (double)C);
            dx_apply(C, dr, xr, pw, 1, mean, rstd, mg, mgx, po + r * C);
        }
    } else if (n->op == OP_BATCH_NORM_GRAD) {
        int64_t N = t[1]->shape[0], C = t[1]->shape[1], S = numel / (N * C);
        double cnt = (double)(N * S);
        const float *st = bn_given(stats, C);
#pragma omp parallel for if (par) schedule(static)
        for (int64_t ch = 0; ch < C; ch++) {
            float mean, rstd;
            double sg = 0, sgx = 0;
            bn_stats_of(st, px, N, C, S, ch, eps, &mean, &rstd);
            for (int64_t b = 0; b < N; b++) {
                int64_t o = (b * C + ch) * S;
                g_sums(S, pd + o, px + o, pw + ch, 0, mean, &sg, &sgx);
            }
            float mg = (float)(sg / cnt), mgx = (float)(sgx * rstd / cnt);
            for (int64_t b = 0; b < N; b++) {
                int64_t o = (b * C + ch) * S;
                dx_apply(S, pd + o, px + o, pw + ch, 0, mean, rstd, mg, mgx, po + o);
            }
        }
    } else if (n->op == OP_GROUP_NORM_GRAD) {
        int64_t N = t[1]->shape[0], C = t[1]->shape[1], S = numel / (N * C);
        int64_t G = n->ia[0], Cg = C / G, len = Cg * S;
#pragma omp parallel for if (par) schedule(static)
        for (int64_t ng = 0; ng < N * G; ng++) {
            const float *xr = px + ng * len, *dr = pd + ng * len;
            const float *wg = pw + (ng % G) * Cg;
            float mean, rstd;
            row_stats(xr, len, true, eps, &mean, &rstd);
            double sg = 0, sgx = 0;
            for (int64_t k = 0; k < Cg; k++)
                g_sums(S, dr + k * S, xr + k * S, wg + k, 0, mean, &sg, &sgx);
            float mg = (float)(sg / (double)len), mgx = (float)(sgx * rstd / (double)len);
            for (int64_t k = 0; k < Cg; k++)
                dx_apply(S, dr + k * S, xr + k * S, wg + k, 0, mean, rstd, mg, mgx,
                         po + ng * len + k * S);
        }
    } else {
        cpu_free_all(4, t);
        return cpu_fail(c, "%s is not a norm gradient", op_name(n->op));
    }
    cpu_free_all(3, t);
    c->kernels++;
    return cpu_f32_done(t[3], out, 0);
}

// sums of dy * (x - mean) * rstd and of dy over len elements, added to *a, *b
static void wg_sums(int64_t len, const float *dy, const float *x, float mean, float rstd, double *a,
                    double *b) {
    double sa = 0, sb = 0;
#pragma omp simd reduction(+ : sa, sb)
    for (int64_t i = 0; i < len; i++) {
        sa += dy[i] * ((x[i] - mean) * rstd);
        sb += dy[i];
    }
    *a += sa;
    *b += sb;
}

int cpu_norm_wgrad_stats(cpu_ctx *c, const graph_node *n, const tensor *dy, const tensor *x,
                         const tensor *stats, tensor *out) {
    if (n->op == OP_BATCH_NORM_WGRAD) {
        int rc = bn_nhwc(c, n->op, dy, x, NULL, n->fa[0], out);
        if (rc <= 0)
            return rc;
    }
    tensor *t[3];
    if (cpu_inputs_f32(c, op_name(n->op), 2, (const tensor *[]){dy, x}, t) < 0)
        return -1;
    t[2] = cpu_f32_out(c, op_name(n->op), out);
    if (!t[2] || bad_groups(c, n, t[1]) < 0) {
        cpu_free_all(3, t);
        return -1;
    }
    const float *pd = tensor_f32(t[0]), *px = tensor_f32(t[1]);
    float *po = tensor_f32(t[2]);
    double eps = n->fa[0];
    int64_t numel = tensor_numel(t[1]);
    bool par = numel >= CPU_PAR_MIN;
    if (n->op == OP_LAYER_NORM_WGRAD || n->op == OP_RMS_NORM_WGRAD) {
        // rows summed into per-thread partials (2, C), added up at the end
        bool center = n->op == OP_LAYER_NORM_WGRAD;
        int64_t C = t[1]->shape[t[1]->ndim - 1], rows = numel / C;
        int nt = par ? omp_get_max_threads() : 1;
        double *part = calloc((size_t)(nt * 2 * C), sizeof *part);
        if (!part) {
            cpu_free_all(3, t);
            return cpu_fail(c, "%s: out of memory for partial sums", op_name(n->op));
        }
#pragma omp parallel if (par) num_threads(nt)
        {
            double *pa = part + (int64_t)omp_get_thread_num() * 2 * C, *pb = pa + C;
#pragma omp for schedule(static)
            for (int64_t r = 0; r < rows; r++) {
                const float *xr = px + r * C, *dr = pd + r * C;
                float mean, rstd;
                row_stats(xr, C, center, eps, &mean, &rstd);
#pragma omp simd
                for (int64_t i = 0; i < C; i++) {
                    pa[i] += dr[i] * ((xr[i] - mean) * rstd);
                    pb[i] += dr[i];
                }
            }
#pragma omp for schedule(static)
            for (int64_t i = 0; i < C; i++) {
                double a = 0, b = 0;
                for (int k = 0; k < nt; k++) {
                    a += part[k * 2 * C + i];
                    b += part[k * 2 * C + C + i];
                }
                po[i] = (float)a;
                if (center)
                    po[C + i] = (float)b;
            }
        }
        free(part);
    } else if (n->op == OP_BATCH_NORM_WGRAD) {
        int64_t N = t[1]->shape[0], C = t[1]->shape[1], S = numel / (N * C);
        const float *st = bn_given(stats, C);
#pragma omp parallel for if (par) schedule(static)
        for (int64_t ch = 0; ch < C; ch++) {
            float mean, rstd;
            double a = 0, b = 0;
            bn_stats_of(st, px, N, C, S, ch, eps, &mean, &rstd);
            for (int64_t bi = 0; bi < N; bi++) {
                int64_t o = (bi * C + ch) * S;
                wg_sums(S, pd + o, px + o, mean, rstd, &a, &b);
            }
            po[ch] = (float)a;
            po[C + ch] = (float)b;
        }
    } else if (n->op == OP_GROUP_NORM_WGRAD) {
        // statistics per (n, group) first, then channels over the batch
        int64_t N = t[1]->shape[0], C = t[1]->shape[1], S = numel / (N * C);
        int64_t G = n->ia[0], Cg = C / G, len = Cg * S;
        float *st = malloc((size_t)(2 * N * G) * sizeof *st);
        if (!st) {
            cpu_free_all(3, t);
            return cpu_fail(c, "group_norm_wgrad: out of memory for statistics");
        }
#pragma omp parallel if (par)
        {
#pragma omp for schedule(static)
            for (int64_t ng = 0; ng < N * G; ng++)
                row_stats(px + ng * len, len, true, eps, &st[2 * ng], &st[2 * ng + 1]);
#pragma omp for schedule(static)
            for (int64_t ch = 0; ch < C; ch++) {
                double a = 0, b = 0;
                for (int64_t bi = 0; bi < N; bi++) {
                    int64_t ng = bi * G + ch / Cg, o = (bi * C + ch) * S;
                    wg_sums(S, pd + o, px + o, st[2 * ng], st[2 * ng + 1], &a, &b);
                }
                po[ch] = (float)a;
                po[C + ch] = (float)b;
            }
        }
        free(st);
    } else {
        cpu_free_all(3, t);
        return cpu_fail(c, "%s is not a norm weight gradient", op_name(n->op));
    }
    cpu_free_all(2, t);
    c->kernels++;
    return cpu_f32_done(t[2], out, 0);
}

// ---- BATCH_NORM in training mode ------------------------------------------------

int cpu_batch_norm_stats(cpu_ctx *c, const tensor *x, double eps, tensor *out) {
    if (cpu_need_target(c, "batch_norm_stats", out) < 0)
        return -1;
    int rc = bn_nhwc(c, OP_BATCH_NORM_STATS, NULL, x, NULL, eps, out);
    if (rc <= 0)
        return rc;
    tensor *xc;
    if (cpu_inputs_f32(c, "batch_norm_stats", 1, &x, &xc) < 0)
        return -1;
    int64_t N = xc->shape[0], C = xc->shape[1], S = tensor_numel(xc) / (N * C);
    const float *px = tensor_f32(xc);
    float *po = tensor_f32(out);
#pragma omp parallel for if (N * C * S >= CPU_PAR_MIN) schedule(static)
    for (int64_t ch = 0; ch < C; ch++) {
        float mean, rstd;
        double var;
        chan_stats(px, N, C, S, ch, eps, &mean, &rstd, &var);
        po[ch] = mean;
        po[C + ch] = (float)var;
        po[2 * C + ch] = rstd;
    }
    tensor_free(xc);
    c->kernels++;
    return 0;
}

int cpu_batch_norm_train(cpu_ctx *c, const tensor *x, const tensor *w, const tensor *b,
                         tensor *rmean, tensor *rvar, double eps, double momentum, tensor *out) {
    if (cpu_need_target(c, "batch_norm", rmean) < 0 || cpu_need_target(c, "batch_norm", rvar) < 0)
        return -1;
    tensor *t[4];
    if (cpu_inputs_f32(c, "batch_norm", 3, (const tensor *[]){x, w, b}, t) < 0)
        return -1;
    int64_t N = t[0]->shape[0], C = t[0]->shape[1], S = tensor_numel(t[0]) / (N * C);
    if (N * S < 2) {
        cpu_free_all(3, t);
        return cpu_fail(c,
                        "batch_norm: training needs more than one value per channel, got "
                        "input of %lld x %lld",
                        (long long)N, (long long)S);
    }
    if (!(t[3] = cpu_f32_out(c, "batch_norm", out))) {
        cpu_free_all(3, t);
        return -1;
    }
    const float *px = tensor_f32(t[0]), *pw = tensor_f32(t[1]), *pb = tensor_f32(t[2]);
    float *pm = tensor_f32(rmean), *pv = tensor_f32(rvar), *po = tensor_f32(t[3]);
    double cnt = (double)(N * S), m = momentum;
#pragma omp parallel for if (N * C * S >= CPU_PAR_MIN) schedule(static)
    for (int64_t ch = 0; ch < C; ch++) {
        float mean, rstd;
        double var;
        chan_stats(px, N, C, S, ch, eps, &mean, &rstd, &var);
        float a = rstd * pw[ch], sh = pb[ch] - mean * a;
        for (int64_t bi = 0; bi < N; bi++) {
            const float *src = px + (bi * C + ch) * S;
            float *dst = po + (bi * C + ch) * S;
#pragma omp simd
            for (int64_t i = 0; i < S; i++)
                dst[i] = src[i] * a + sh;
        }
        pm[ch] = (float)((1 - m) * pm[ch] + m * mean);
        pv[ch] = (float)((1 - m) * pv[ch] + m * var * cnt / (cnt - 1));
    }
    cpu_free_all(3, t);
    c->kernels++;
    return cpu_f32_done(t[3], out, 0);
}

// ---- EMBEDDING_GRAD ----------------------------------------------------------------

// The positions of each row are bucketed first (a counting sort: one pass
// over the indices, which also checks them), then rows are summed in
// parallel, each by one thread in position order: no races, no atomics,
// and the same bits for any thread count. Position i adds dy row bag[i]
// (an embedding bag's), or row i without bags.
int cpu_rows_grad(cpu_ctx *c, const char *what, const tensor *dy, const tensor *idx,
                  const int64_t *bag, tensor *out) {
    if (idx->dtype != DT_I32 && idx->dtype != DT_I64)
        return cpu_fail(c, "%s: indices must be i32 or i64, got %s", what, dtype_name(idx->dtype));
    int64_t V = out->shape[0], D = out->shape[1];
    tensor *dc = cpu_f32_in(c, what, dy);
    tensor *oc = dc ? cpu_f32_out(c, what, out) : NULL;
    tensor *ic = oc ? cpu_contiguous(c, idx) : NULL;
    int64_t n = ic ? tensor_numel(ic) : 0;
    int64_t *start = ic ? calloc((size_t)(V + 1), sizeof *start) : NULL;
    int64_t *fill = start ? malloc((size_t)(V ? V : 1) * sizeof *fill) : NULL;
    int64_t *pos = fill ? malloc((size_t)(n ? n : 1) * sizeof *pos) : NULL;
    int rc = 0;
    if (!pos) { // a failed cpu_contiguous has said why already
        rc = ic ? cpu_fail(c, "%s: out of memory for %lld rows", what, (long long)V) : -1;
        goto done;
    }
    const int32_t *p32 = tensor_data(ic);
    const int64_t *p64 = tensor_data(ic);
    bool i32 = ic->dtype == DT_I32;
    for (int64_t i = 0; i < n; i++) {
        int64_t id = i32 ? p32[i] : p64[i];
        if (id < 0 || id >= V) {
            rc = cpu_fail(c, "%s: index %lld at position %lld is outside [0, %lld)", what,
                          (long long)id, (long long)i, (long long)V);
            goto done;
        }
        start[id + 1]++;
    }
    for (int64_t v = 0; v < V; v++) {
        start[v + 1] += start[v];
        fill[v] = start[v];
    }
    for (int64_t i = 0; i < n; i++)
        pos[fill[i32 ? p32[i] : p64[i]]++] = i;
    const float *pd = tensor_f32(dc);
    float *po = tensor_f32(oc);
#pragma omp parallel for if ((V + n) * D >= CPU_PAR_MIN) schedule(dynamic, 16)
    for (int64_t v = 0; v < V; v++) {
        float *o = po + v * D;
        memset(o, 0, (size_t)D * sizeof *o);
        for (int64_t k = start[v]; k < start[v + 1]; k++) {
            const float *row = pd + (bag ? bag[pos[k]] : pos[k]) * D;
#pragma omp simd
            for (int64_t d = 0; d < D; d++)
                o[d] += row[d];
        }
    }
    c->kernels++;
done:
    free(pos);
    free(fill);
    free(start);
    tensor_free(ic);
    tensor_free(dc);
    return cpu_f32_done(oc, out, rc);
}

int cpu_embedding_grad(cpu_ctx *c, const tensor *dy, const tensor *idx, tensor *out) {
    return cpu_rows_grad(c, "embedding_grad", dy, idx, NULL, out);
}

// ---- SLICE_GRAD ----------------------------------------------------------------------

// Zeros around the slot, then dy copied into the slot (a strided view of
// out made on the stack, as cpu_concat does). Any dtype.
int cpu_slice_grad(cpu_ctx *c, const graph_node *n, const tensor *dy, tensor *out) {
    if (dy->dtype != out->dtype)
        return cpu_fail(c, "slice_grad: dy %s and output %s differ in dtype", dtype_name(dy->dtype),
                        dtype_name(out->dtype));
    int ax = (int)n->ia[0];
    int64_t start = n->ia[1], len = dy->shape[ax], A = out->shape[ax];
    int64_t outer = shape_numel(ax, out->shape),
            inner = shape_numel(out->ndim - ax - 1, out->shape + ax + 1);
    size_t es = dtype_size(out->dtype);
    char *po = tensor_data(out);
    size_t before = (size_t)(start * inner) * es, after = (size_t)((A - start - len) * inner) * es;
#pragma omp parallel for if (tensor_numel(out) >= CPU_PAR_MIN) schedule(static)
    for (int64_t o = 0; o < outer; o++) {
        char *row = po + (size_t)(o * A * inner) * es;
        memset(row, 0, before);
        memset(row + (size_t)((start + len) * inner) * es, 0, after);
    }
    tensor slot = *out;
    slot.offset += start * out->stride[ax];
    slot.shape[ax] = len;
    cpu_iter_copy(&slot, dy);
    c->kernels++;
    return 0;
}

// ---- losses ----------------------------------------------------------------------------

// the scalar upstream gradient, any float dtype
static float scalar_of(const tensor *t) { return (float)tensor_get_flat(t, 0); }

int cpu_cross_entropy_grad(cpu_ctx *c, const graph_node *n, const tensor *dloss,
                           const tensor *logits, const tensor *target, tensor *out) {
    if (target->dtype != DT_I32 && target->dtype != DT_I64)
        return cpu_fail(c, "cross_entropy_grad: targets must be i32 or i64, got %s",
                        dtype_name(target->dtype));
    int64_t N = logits->shape[0], C = logits->shape[1], ignore = n->ia[0], count = 0;
    const char *pt = tensor_data(target);
    int64_t ts = target->stride[0] * (int64_t)dtype_size(target->dtype);
    bool i32 = target->dtype == DT_I32;
#define TARGET(r) (i32 ? *(const int32_t *)(pt + (r)*ts) : *(const int64_t *)(pt + (r)*ts))
    for (int64_t r = 0; r < N; r++) {
        int64_t tr = TARGET(r);
        if (tr == ignore)
            continue;
        if (tr < 0 || tr >= C)
            return cpu_fail(c, "cross_entropy_grad: target %lld in row %lld is outside [0, %lld)",
                            (long long)tr, (long long)r, (long long)C);
        count++;
    }
    tensor *lc = cpu_f32_in(c, "cross_entropy_grad", logits);
    tensor *oc = lc ? cpu_f32_out(c, "cross_entropy_grad", out) : NULL;
    if (!oc) {
        tensor_free(lc);
        return -1;
    }
    const float *px = tensor_f32(lc);
    float *po = tensor_f32(oc);
    float k = count ? scalar_of(dloss) / (float)count : 0.0f;
    float eps = (float)n->fa[0], ke = k * eps / (float)C; // label smoothing's share
#pragma omp parallel for if (N * C >= CPU_PAR_MIN) schedule(static)
    for (int64_t r = 0; r < N; r++) {
        const float *row = px + r * C;
        float *o = po + r * C;
        int64_t tr = TARGET(r);
        if (tr == ignore) {
            memset(o, 0, (size_t)C * sizeof *o);
            continue;
        }
        float m = row[0];
        for (int64_t i = 1; i < C; i++)
            m = (row[i] != row[i] || row[i] > m) ? row[i] : m;
        float s = 0;
#pragma omp simd reduction(+ : s)
        for (int64_t i = 0; i < C; i++) {
            float e = cpu_expf(row[i] - m);
            o[i] = e;
            s += e;
        }
        float ks = k / s;
#pragma omp simd
        for (int64_t i = 0; i < C; i++)
            o[i] = o[i] * ks - ke;
        o[tr] -= k - k * eps;
    }
#undef TARGET
    tensor_free(lc);
    c->kernels++;
    return cpu_f32_done(oc, out, 0);
}

static void seg_mse_grad(void *ctx, int64_t n, char *const *ptr, const int64_t *st, int64_t flat0) {
    (void)flat0;
    float k = *(const float *)ctx;
    float *restrict o = (float *)ptr[0];
    const float *restrict a = (const float *)ptr[1], *restrict b = (const float *)ptr[2];
    if (st[1] == 1 && st[2] == 1) {
#pragma omp simd
        for (int64_t i = 0; i < n; i++)
            o[i] = k * (a[i] - b[i]);
    } else {
        for (int64_t i = 0; i < n; i++)
            o[i] = k * (a[i * st[1]] - b[i * st[2]]);
    }
}

int cpu_mse_loss_grad(cpu_ctx *c, const tensor *dloss, const tensor *a, const tensor *b,
                      tensor *out) {
    float k = (float)(2.0 * tensor_get_flat(dloss, 0) / (double)tensor_numel(a));
    if (a->dtype == DT_F32 && b->dtype == DT_F32 && out->dtype == DT_F32) {
        cpu_iter it;
        cpu_iter_init(&it, out, 2, (const tensor *[]){a, b});
        cpu_iter_run(&it, seg_mse_grad, &k);
        c->kernels++;
        return 0;
    }
    // f16 somewhere: through f32 scratch, one kernel in all
    int64_t k0 = c->kernels;
    tensor *t[3] = {0};
    int rc = -1;
    if (cpu_inputs_f32(c, "mse_loss_grad", 2, (const tensor *[]){a, b}, t) == 0 &&
        (t[2] = cpu_f32_out(c, "mse_loss_grad", out)))
        rc = cpu_mse_loss_grad(c, dloss, t[0], t[1], t[2]);
    cpu_f32_done(t[2], out, rc);
    cpu_free_all(2, t);
    c->kernels = k0 + (rc == 0);
    return rc;
}
