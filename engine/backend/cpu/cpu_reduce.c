// Reductions, softmax, norms and losses (cpu_kernels.h): one kernel each,
// parallel over independent rows (or channel planes), f32 throughout with
// the long sums taken in vector-width float blocks added into a double, so
// rounding does not grow with the row length. Inputs are made contiguous
// first (a counted copy when they are views). f16 inputs (AMP) are read
// into f32 scratch and an f16 output is rounded once from an f32 one
// (cpu_f32_in, cpu_f32_out): the sums stay f32 or wider.
#include "cpu_iter.h"
#include "cpu_kernels.h"
#include "cpu_math.h"

#include <math.h>
#include <stdlib.h>

// Floats summed in one block before the block total goes into a double.
#define BLOCK 1024

static double sum_f32(const float *x, int64_t n) {
    double total = 0;
    for (int64_t i0 = 0; i0 < n; i0 += BLOCK) {
        int64_t e = n - i0 < BLOCK ? n : i0 + BLOCK;
        float s = 0;
#pragma omp simd reduction(+ : s)
        for (int64_t i = i0; i < e; i++)
            s += x[i];
        total += s;
    }
    return total;
}

// sum of (x - mean)^2: the two-pass variance, stable for any mean.
static double sum_sq_dev_f32(const float *x, int64_t n, float mean) {
    double total = 0;
    for (int64_t i0 = 0; i0 < n; i0 += BLOCK) {
        int64_t e = n - i0 < BLOCK ? n : i0 + BLOCK;
        float s = 0;
#pragma omp simd reduction(+ : s)
        for (int64_t i = i0; i < e; i++)
            s += (x[i] - mean) * (x[i] - mean);
        total += s;
    }
    return total;
}

// NaN-propagating max with 16 independent lanes, so it vectorizes.
static float max_f32(const float *x, int64_t n) {
    float m[16];
    for (int j = 0; j < 16; j++)
        m[j] = -INFINITY;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++) {
            float v = x[i + j];
            m[j] = (v != v || v > m[j]) ? v : m[j];
        }
    for (int j = 0; i < n; i++, j++)
        m[j] = (x[i] != x[i] || x[i] > m[j]) ? x[i] : m[j];
    float r = m[0];
    for (int j = 1; j < 16; j++)
        r = (m[j] != m[j] || m[j] > r) ? m[j] : r;
    return r;
}

int cpu_need_f32(cpu_ctx *c, const char *what, const tensor *t) {
    if (t && t->dtype != DT_F32)
        return cpu_fail(c, "%s: dtype %s is not supported by the CPU eager kernels (f32 only)",
                        what, dtype_name(t->dtype));
    return 0;
}

// ---- SUM, MEAN, MAX over one axis ---------------------------------------

int cpu_reduce(cpu_ctx *c, const graph_node *n, const tensor *x, tensor *out) {
    tensor *xc = cpu_f32_in(c, op_name(n->op), x);
    tensor *oc = xc ? cpu_f32_out(c, op_name(n->op), out) : NULL;
    if (!oc) {
        tensor_free(xc);
        return -1;
    }
    int ax = (int)n->ia[0];
    int64_t outer = 1, inner = 1, R = xc->shape[ax];
    for (int d = 0; d < ax; d++)
        outer *= xc->shape[d];
    for (int d = ax + 1; d < xc->ndim; d++)
        inner *= xc->shape[d];
    const float *px = tensor_f32(xc);
    float *po = tensor_f32(oc);
    bool is_max = n->op == OP_MAX;
    float mul = n->op == OP_MEAN ? 1.0f / (float)R : 1.0f;
    bool par = outer * R * inner >= CPU_PAR_MIN;
    if (inner == 1) { // rows: (outer, R) -> (outer)
#pragma omp parallel for if (par) schedule(static)
        for (int64_t o = 0; o < outer; o++) {
            const float *row = px + o * R;
            po[o] = is_max ? max_f32(row, R) : (float)(sum_f32(row, R) * mul);
        }
    } else { // (outer, R, inner) -> (outer, inner), vector over inner
        enum { IB = 512 };
        int64_t nb = (inner + IB - 1) / IB;
#pragma omp parallel for if (par) schedule(static)
        for (int64_t t = 0; t < outer * nb; t++) {
            int64_t o = t / nb, i0 = (t % nb) * IB;
            int64_t len = inner - i0 < IB ? inner - i0 : IB;
            const float *src = px + o * R * inner + i0;
            float *dst = po + o * inner + i0;
            float acc[IB];
            for (int64_t i = 0; i < len; i++)
                acc[i] = src[i];
            for (int64_t r = 1; r < R; r++) {
                const float *row = src + r * inner;
                if (is_max) {
#pragma omp simd
                    for (int64_t i = 0; i < len; i++)
                        acc[i] = (row[i] != row[i] || row[i] > acc[i]) ? row[i] : acc[i];
                } else {
#pragma omp simd
                    for (int64_t i = 0; i < len; i++)
                        acc[i] += row[i];
                }
            }
            for (int64_t i = 0; i < len; i++)
                dst[i] = acc[i] * mul;
        }
    }
    tensor_free(xc);
    c->kernels++;
    return cpu_f32_done(oc, out, 0);
}

// ---- softmax and log_softmax over any axis ---------------------------------

void cpu_softmax_axis(const tensor *t, int64_t after, int64_t *C, int64_t *inner) {
    int ax = t->ndim - 1 - (int)after;
    *C = ax >= 0 ? t->shape[ax] : 1;
    *inner = 1;
    for (int d = ax + 1; d < t->ndim; d++)
        *inner *= t->shape[d];
}

// (outer, C, inner) with inner > 1: each (outer, inner) column on its own
static void softmax_strided(const float *px, float *po, int64_t C, int64_t in, int64_t cols,
                            bool log) {
#pragma omp parallel for if (cols * C >= CPU_PAR_MIN) schedule(static)
    for (int64_t r = 0; r < cols; r++) {
        const float *x = px + r / in * C * in + r % in;
        float *o = po + r / in * C * in + r % in, m = -INFINITY, s = 0;
        for (int64_t i = 0; i < C; i++)
            m = x[i * in] > m || isnan(x[i * in]) ? x[i * in] : m;
        for (int64_t i = 0; i < C; i++)
            s += cpu_expf(x[i * in] - m);
        float lse = m + logf(s), inv = 1.0f / s;
        for (int64_t i = 0; i < C; i++)
            o[i * in] = log ? x[i * in] - lse : cpu_expf(x[i * in] - m) * inv;
    }
}

int cpu_softmax(cpu_ctx *c, const tensor *x, bool log, int64_t after, tensor *out) {
    const char *name = log ? "log_softmax" : "softmax";
    tensor *xc = cpu_f32_in(c, name, x), *oc = xc ? cpu_f32_out(c, name, out) : NULL;
    if (!oc) {
        tensor_free(xc);
        return -1;
    }
    int64_t C, inner;
    cpu_softmax_axis(xc, after, &C, &inner);
    int64_t rows = tensor_numel(xc) / C;
    const float *px = tensor_f32(xc);
    float *po = tensor_f32(oc);
    if (inner > 1) {
        softmax_strided(px, po, C, inner, rows, log);
        rows = 0;
    }
#pragma omp parallel for if (rows * C >= CPU_PAR_MIN) schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const float *row = px + r * C;
        float *o = po + r * C;
        float m = max_f32(row, C);
        float s = 0;
        if (log) {
#pragma omp simd reduction(+ : s)
            for (int64_t i = 0; i < C; i++)
                s += cpu_expf(row[i] - m);
            float lse = m + logf(s);
#pragma omp simd
            for (int64_t i = 0; i < C; i++)
                o[i] = row[i] - lse;
        } else {
#pragma omp simd reduction(+ : s)
            for (int64_t i = 0; i < C; i++) {
                float e = cpu_expf(row[i] - m);
                o[i] = e;
                s += e;
            }
            float inv = 1.0f / s;
#pragma omp simd
            for (int64_t i = 0; i < C; i++)
                o[i] *= inv;
        }
    }
    tensor_free(xc);
    c->kernels++;
    return cpu_f32_done(oc, out, 0);
}

// ---- norms ---------------------------------------------------------------

// Makes the inputs contiguous f32 (1-d f32 parameters nearly always are: a
// view, no copy); f16 ones are converted.
int cpu_inputs_f32(cpu_ctx *c, const char *what, int np, const tensor *const *in, tensor **out) {
    for (int i = 0; i < np; i++)
        out[i] = NULL;
    for (int i = 0; i < np; i++) {
        if (!in[i])
            continue;
        if (!(out[i] = cpu_f32_in(c, what, in[i]))) {
            for (int k = 0; k < i; k++)
                tensor_free(out[k]);
            return -1;
        }
    }
    return 0;
}

void cpu_free_all(int np, tensor **t) {
    for (int i = 0; i < np; i++)
        tensor_free(t[i]);
}

int cpu_layer_norm(cpu_ctx *c, const tensor *x, const tensor *w, const tensor *b, double eps,
                   tensor *out) {
    const char *what = b ? "layer_norm" : "rms_norm";
    tensor *t[3], *oc = NULL;
    if (cpu_inputs_f32(c, what, 3, (const tensor *[]){x, w, b}, t) < 0)
        return -1;
    if (!(oc = cpu_f32_out(c, what, out))) {
        cpu_free_all(3, t);
        return -1;
    }
    int64_t C = t[0]->shape[t[0]->ndim - 1], rows = tensor_numel(t[0]) / C;
    const float *px = tensor_f32(t[0]), *pw = tensor_f32(t[1]);
    const float *pb = b ? tensor_f32(t[2]) : NULL;
    float *po = tensor_f32(oc);
#pragma omp parallel for if (rows * C >= CPU_PAR_MIN) schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const float *row = px + r * C;
        float *o = po + r * C;
        if (pb) {
            float mean = (float)(sum_f32(row, C) / (double)C);
            float rstd = (float)(1.0 / sqrt(sum_sq_dev_f32(row, C, mean) / (double)C + eps));
#pragma omp simd
            for (int64_t i = 0; i < C; i++)
                o[i] = (row[i] - mean) * rstd * pw[i] + pb[i];
        } else {
            float rms = (float)(1.0 / sqrt(sum_sq_dev_f32(row, C, 0.0f) / (double)C + eps));
#pragma omp simd
            for (int64_t i = 0; i < C; i++)
                o[i] = row[i] * rms * pw[i];
        }
    }
    cpu_free_all(3, t);
    c->kernels++;
    return cpu_f32_done(oc, out, 0);
}

int cpu_rms_norm(cpu_ctx *c, const tensor *x, const tensor *w, double eps, tensor *out) {
    return cpu_layer_norm(c, x, w, NULL, eps, out);
}

int cpu_batch_norm(cpu_ctx *c, const tensor *x, const tensor *w, const tensor *b,
                   const tensor *mean, const tensor *var, double eps, tensor *out) {
    tensor *t[5], *oc = NULL;
    if (cpu_inputs_f32(c, "batch_norm", 5, (const tensor *[]){x, w, b, mean, var}, t) < 0)
        return -1;
    int64_t N = t[0]->shape[0], C = t[0]->shape[1], S = tensor_numel(t[0]) / (N * C);
    // y = x * scale + shift per channel, folded once per call
    float *scale = malloc((size_t)(2 * C) * sizeof *scale);
    if (!scale)
        cpu_fail(c, "batch_norm: out of memory for %lld channels", (long long)C);
    if (!scale || !(oc = cpu_f32_out(c, "batch_norm", out))) {
        free(scale);
        cpu_free_all(5, t);
        return -1;
    }
    float *shift = scale + C;
    const float *pw = tensor_f32(t[1]), *pb = tensor_f32(t[2]);
    const float *pm = tensor_f32(t[3]), *pv = tensor_f32(t[4]);
    for (int64_t ch = 0; ch < C; ch++) {
        double s = pw[ch] / sqrt((double)pv[ch] + eps);
        scale[ch] = (float)s;
        shift[ch] = (float)(pb[ch] - pm[ch] * s);
    }
    const float *px = tensor_f32(t[0]);
    float *po = tensor_f32(oc);
    bool par = N * C * S >= CPU_PAR_MIN;
    if (S == 1) { // (N, C): rows of channels
#pragma omp parallel for if (par) schedule(static)
        for (int64_t i = 0; i < N; i++) {
#pragma omp simd
            for (int64_t ch = 0; ch < C; ch++)
                po[i * C + ch] = px[i * C + ch] * scale[ch] + shift[ch];
        }
    } else { // (N, C, S): planes
#pragma omp parallel for if (par) schedule(static)
        for (int64_t p = 0; p < N * C; p++) {
            float a = scale[p % C], bb = shift[p % C];
            const float *src = px + p * S;
            float *dst = po + p * S;
#pragma omp simd
            for (int64_t i = 0; i < S; i++)
                dst[i] = src[i] * a + bb;
        }
    }
    free(scale);
    cpu_free_all(5, t);
    c->kernels++;
    return cpu_f32_done(oc, out, 0);
}

int cpu_group_norm(cpu_ctx *c, const tensor *x, const tensor *w, const tensor *b, int64_t groups,
                   double eps, tensor *out) {
    tensor *t[3], *oc = NULL;
    if (cpu_inputs_f32(c, "group_norm", 3, (const tensor *[]){x, w, b}, t) < 0)
        return -1;
    if (!(oc = cpu_f32_out(c, "group_norm", out))) {
        cpu_free_all(3, t);
        return -1;
    }
    int64_t N = t[0]->shape[0], C = t[0]->shape[1], S = tensor_numel(t[0]) / (N * C);
    int64_t Cg = C / groups, len = Cg * S;
    const float *px = tensor_f32(t[0]), *pw = tensor_f32(t[1]), *pb = tensor_f32(t[2]);
    float *po = tensor_f32(oc);
#pragma omp parallel for if (N * C * S >= CPU_PAR_MIN) schedule(static)
    for (int64_t ng = 0; ng < N * groups; ng++) {
        const float *src = px + ng * len;
        float *dst = po + ng * len;
        float mean = (float)(sum_f32(src, len) / (double)len);
        float rstd = (float)(1.0 / sqrt(sum_sq_dev_f32(src, len, mean) / (double)len + eps));
        for (int64_t k = 0; k < Cg; k++) {
            int64_t ch = (ng % groups) * Cg + k;
            float a = rstd * pw[ch], bb = pb[ch] - mean * a;
            const float *s = src + k * S;
            float *d = dst + k * S;
#pragma omp simd
            for (int64_t i = 0; i < S; i++)
                d[i] = s[i] * a + bb;
        }
    }
    cpu_free_all(3, t);
    c->kernels++;
    return cpu_f32_done(oc, out, 0);
}

// ---- losses --------------------------------------------------------------

int cpu_cross_entropy(cpu_ctx *c, const tensor *logits, const tensor *target, int64_t ignore,
                      double smoothing, tensor *out) {
    if (cpu_need_f32(c, "cross_entropy", out) < 0)
        return -1;
    if (target->dtype != DT_I32 && target->dtype != DT_I64)
        return cpu_fail(c, "cross_entropy: targets must be i32 or i64, got %s",
                        dtype_name(target->dtype));
    tensor *lc = cpu_f32_in(c, "cross_entropy", logits);
    if (!lc)
        return -1;
    int64_t N = lc->shape[0], C = lc->shape[1];
    const float *px = tensor_f32(lc);
    const char *pt = tensor_data(target);
    int64_t ts = target->stride[0] * (int64_t)dtype_size(target->dtype);
    bool i32 = target->dtype == DT_I32;
    double total = 0;
    int64_t count = 0, bad = 0; // bad: 1 + the last row whose target is out of range
#pragma omp parallel for if (N * C >= CPU_PAR_MIN) reduction(+ : total, count) \
    reduction(max : bad) schedule(static)
    for (int64_t r = 0; r < N; r++) {
        int64_t tr = i32 ? *(const int32_t *)(pt + r * ts) : *(const int64_t *)(pt + r * ts);
        if (tr == ignore)
            continue;
        if (tr < 0 || tr >= C) {
            bad = r + 1;
            continue;
        }
        const float *row = px + r * C;
        float m = max_f32(row, C), s = 0, all = 0;
#pragma omp simd reduction(+ : s)
        for (int64_t i = 0; i < C; i++)
            s += cpu_expf(row[i] - m);
        if (smoothing != 0) { // -log p_i = lse - x_i, the target's and the mean's mixed
#pragma omp simd reduction(+ : all)
            for (int64_t i = 0; i < C; i++)
                all += row[i];
        }
        total += (double)m + log((double)s) - (1 - smoothing) * row[tr] -
                 smoothing * (double)all / (double)C;
        count++;
    }
    tensor_free(lc);
    if (bad) {
        int64_t r = bad - 1;
        int64_t tr = i32 ? *(const int32_t *)(pt + r * ts) : *(const int64_t *)(pt + r * ts);
        return cpu_fail(c, "cross_entropy: target %lld in row %lld is outside [0, %lld)",
                        (long long)tr, (long long)r, (long long)C);
    }
    // every target ignored: 0 / 0, NaN, as PyTorch
    *tensor_f32(out) = count ? (float)(total / (double)count) : NAN;
    c->kernels++;
    return 0;
}

int cpu_mse_loss(cpu_ctx *c, const tensor *a, const tensor *b, tensor *out) {
    tensor *t[2];
    if (cpu_need_f32(c, "mse_loss", out) < 0 ||
        cpu_inputs_f32(c, "mse_loss", 2, (const tensor *[]){a, b}, t) < 0)
        return -1;
    int64_t n = tensor_numel(t[0]), nb = (n + BLOCK - 1) / BLOCK;
    const float *pa = tensor_f32(t[0]), *pb = tensor_f32(t[1]);
    double total = 0;
#pragma omp parallel for if (n >= CPU_PAR_MIN) reduction(+ : total) schedule(static)
    for (int64_t blk = 0; blk < nb; blk++) {
        int64_t e = (blk + 1) * BLOCK < n ? (blk + 1) * BLOCK : n;
        float s = 0;
#pragma omp simd reduction(+ : s)
        for (int64_t i = blk * BLOCK; i < e; i++)
            s += (pa[i] - pb[i]) * (pa[i] - pb[i]);
        total += s;
    }
    *tensor_f32(out) = (float)(total / (double)n);
    cpu_free_all(2, t);
    c->kernels++;
    return 0;
}
