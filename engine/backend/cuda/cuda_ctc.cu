// F.ctc_loss with reduction 'mean' (CTC_LOSS, CTC_LOSS_GRAD in ops.def):
// cpu_ctc.c's log-space alpha and beta recursions, one thread a sample
// (PyTorch's kernel spreads a sample's positions over a block; the loss of
// a recognition model is a sliver of its step), then the mean in one more
// kernel. f32 log_probs (autocast runs CTC in f32); i32 or i64 integers.
#include "cuda_pointwise.cuh"

#include <math_constants.h>

#include "core/op_rules.h"

struct ctc_f {
    const float *lp; // (T, B, C) contiguous
    const char *tg, *len;
    int64_t tg_st0, tg_st1, len_st, T, B, C, S, blank;
    int tg32, len32, zero_inf;
    double *scratch;    // (B, 2, T, 2S + 1)
    double *nll;        // (B): each sample's loss over its length and B
    float *g;           // (T, B, C) gradient, or NULL
    const float *dloss; // () the loss's gradient, with g
    __device__ int64_t at(const char *p, int is32, int64_t off) const {
        return is32 ? ((const int32_t *)p)[off] : ((const int64_t *)p)[off];
    }
    __device__ int64_t ext(int64_t b, int64_t s) const {
        return s % 2 == 0 ? blank : at(tg, tg32, b * tg_st0 + s / 2 * tg_st1);
    }
    __device__ void operator()(int64_t b) const {
        int64_t L = at(len, len32, b * len_st), E = 2 * L + 1, W = 2 * S + 1;
        double per = 1.0 / (double)(L > 1 ? L : 1) / (double)B;
        double *la = scratch + b * 2 * T * W, *lb = la + T * W;
        const float *p = lp + b * C;
        int64_t BC = B * C;
        if (g)
            for (int64_t t = 0; t < T; t++)
                for (int64_t c = 0; c < C; c++)
                    g[t * BC + b * C + c] = 0;
        bool bad = L < 0 || L > S;
        for (int64_t s = 1; !bad && s < E; s += 2)
            bad = ext(b, s) < 0 || ext(b, s) >= C || ext(b, s) == blank;
        if (bad) {
            nll[b] = CUDART_NAN;
            return;
        }
        for (int64_t s = 0; s < E; s++)
            la[s] = s < 2 ? (double)p[ext(b, s)] : -CUDART_INF;
        for (int64_t t = 1; t < T; t++)
            for (int64_t s = 0; s < E; s++) {
                int64_t l = ext(b, s);
                const double *q = la + (t - 1) * W;
                double v = q[s];
                if (s >= 1)
                    v = op_logaddexp(v, q[s - 1]);
                if (s >= 2 && s % 2 == 1 && ext(b, s - 2) != l)
                    v = op_logaddexp(v, q[s - 2]);
                la[t * W + s] = v + p[t * BC + l];
            }
        double v =
            -op_logaddexp(la[(T - 1) * W + E - 1], E > 1 ? la[(T - 1) * W + E - 2] : -CUDART_INF);
        bool inf = isinf(v);
        nll[b] = (inf && zero_inf ? 0 : v) * per;
        if (!g || inf)
            return;
        for (int64_t s = 0; s < E; s++)
            lb[(T - 1) * W + s] = s >= E - 2 ? (double)p[(T - 1) * BC + ext(b, s)] : -CUDART_INF;
        for (int64_t t = T - 2; t >= 0; t--)
            for (int64_t s = 0; s < E; s++) {
                int64_t l = ext(b, s);
                const double *q = lb + (t + 1) * W;
                double w = q[s];
                if (s + 1 < E)
                    w = op_logaddexp(w, q[s + 1]);
                if (s + 2 < E && s % 2 == 1 && ext(b, s + 2) != l)
                    w = op_logaddexp(w, q[s + 2]);
                lb[t * W + s] = w + p[t * BC + l];
            }
        for (int64_t t = 0; t < T; t++)
            for (int64_t s = 0; s < E; s++) {
                int64_t l = ext(b, s);
                double w = la[t * W + s] + lb[t * W + s];
                if (w > -CUDART_INF)
                    g[t * BC + b * C + l] -=
                        (float)((double)*dloss * per * exp(w - p[t * BC + l] + v));
            }
    }
};

// out () = the sum of the per-sample losses (NaN: a bad target)
struct ctc_sum_f {
    const double *nll;
    float *out;
    int64_t B;
    __device__ void operator()(int64_t) const {
        double s = 0;
        for (int64_t b = 0; b < B; b++)
            s += nll[b];
        *out = (float)s;
    }
};

static int ctc_run(cuda_ctx *c, const graph_node *n, const tensor *lp, const tensor *tg,
                   const tensor *len, const tensor *dloss, tensor *out) {
    const char *what = op_name(n->op);
    if (lp->dtype != DT_F32 || out->dtype != DT_F32 || (dloss && dloss->dtype != DT_F32))
        return cuda_pw_fail(c, what, lp->dtype != DT_F32 ? lp->dtype : out->dtype);
    for (const tensor *t : {tg, len})
        if (t->dtype != DT_I32 && t->dtype != DT_I64)
            return cuda_pw_fail(c, what, t->dtype);
    int64_t T = lp->shape[0], B = lp->shape[1], C = lp->shape[2], S = tg->shape[1];
    tensor *lc = cuda_contiguous(c, lp);
    if (!lc)
        return -1;
    size_t bytes = (size_t)(2 * T * (2 * S + 1) * B + B) * sizeof(double);
    double *ws = (double *)cuda_scratch_get(c, bytes);
    int rc = ws ? 0 : -1;
    double *nll = ws + 2 * T * (2 * S + 1) * B;
    if (rc == 0)
        rc = pw_launch(c, B,
                       ctc_f{(const float *)tensor_data(lc), (const char *)tensor_data(tg),
                             (const char *)tensor_data(len), tg->stride[0], tg->stride[1],
                             len->stride[0], T, B, C, S, n->ia[0], tg->dtype == DT_I32,
                             len->dtype == DT_I32, n->ia[1] != 0, ws, nll,
                             dloss ? (float *)tensor_data(out) : NULL,
                             dloss ? (const float *)tensor_data(dloss) : NULL},
                       "ctc<<<>>>");
    if (rc == 0 && !dloss)
        rc = pw_launch(c, 1, ctc_sum_f{nll, (float *)tensor_data(out), B}, "ctc_sum<<<>>>");
    if (ws)
        cuda_scratch_put(c, ws);
    cuda_tensor_free(c, lc);
    return rc;
}

int cuda_ctc_loss(cuda_ctx *c, const graph_node *n, const tensor *lp, const tensor *tg,
                  const tensor *len, tensor *out) {
    return ctc_run(c, n, lp, tg, len, NULL, out);
}

int cuda_ctc_loss_grad(cuda_ctx *c, const graph_node *n, const tensor *dloss, const tensor *lp,
                       const tensor *tg, const tensor *len, tensor *out) {
    return ctc_run(c, n, lp, tg, len, dloss, out);
}
