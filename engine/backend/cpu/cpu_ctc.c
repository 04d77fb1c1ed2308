// F.ctc_loss with reduction 'mean' (CTC_LOSS, CTC_LOSS_GRAD in ops.def), as
// PyTorch's CPU kernel: per sample the forward (alpha) recursion over the
// target with blanks between and around its labels, in log space; the
// backward adds the beta recursion and gives each log-probability's
// gradient from alpha + beta. Samples run in parallel; the sums in double.
#include "core/op_rules.h"
#include "cpu_kernels.h"

#include <math.h>
#include <stdlib.h>

static int64_t int_at(const tensor *t, int64_t i0, int64_t i1) {
    const char *p =
        (const char *)tensor_data(t) +
        (i0 * t->stride[0] + (t->ndim > 1 ? i1 * t->stride[1] : 0)) * (int64_t)dtype_size(t->dtype);
    return t->dtype == DT_I32 ? *(const int32_t *)p : *(const int64_t *)p;
}

typedef struct ctc_job {
    const float *lp; // (T, B, C) contiguous
    const tensor *tg, *len;
    int64_t T, B, C, S, blank;
    bool zero_inf;
} ctc_job;

// The label l'_s of the extended target: blank at even s.
static inline int64_t ext(const ctc_job *j, int64_t b, int64_t s) {
    return s % 2 == 0 ? j->blank : int_at(j->tg, b, s / 2);
}

// Sample b's -log p(target); its gradient times gscale into g (T, B, C)
// when g is given. la, lb: (T, 2S + 1) scratch. -1: a bad target or length.
static int ctc_sample(const ctc_job *j, int64_t b, double *la, double *lb, float *g, double gscale,
                      double *nll_out) {
    int64_t T = j->T, C = j->C, B = j->B, L = int_at(j->len, b, 0);
    if (L < 0 || L > j->S)
        return -1;
    int64_t E = 2 * L + 1;
    for (int64_t s = 1; s < E; s += 2)
        if (ext(j, b, s) < 0 || ext(j, b, s) >= C || ext(j, b, s) == j->blank)
            return -1;
    const float *lp = j->lp + b * C;
#define LP(t, c) ((double)lp[(t)*B * C + (c)])
    for (int64_t s = 0; s < E; s++)
        la[s] = s < 2 ? LP(0, ext(j, b, s)) : -INFINITY;
    for (int64_t t = 1; t < T; t++)
        for (int64_t s = 0; s < E; s++) {
            int64_t l = ext(j, b, s);
            const double *p = la + (t - 1) * E;
            double v = p[s];
            if (s >= 1)
                v = op_logaddexp(v, p[s - 1]);
            if (s >= 2 && s % 2 == 1 && ext(j, b, s - 2) != l)
                v = op_logaddexp(v, p[s - 2]);
            la[t * E + s] = v + LP(t, l);
        }
    double nll =
        -op_logaddexp(la[(T - 1) * E + E - 1], E > 1 ? la[(T - 1) * E + E - 2] : -INFINITY);
    bool inf = isinf(nll);
    *nll_out = inf && j->zero_inf ? 0 : nll;
    if (!g)
        return 0;
    for (int64_t t = 0; t < T; t++)
        for (int64_t c = 0; c < C; c++)
            g[t * B * C + b * C + c] = 0;
    if (inf)
        return 0;
    for (int64_t s = 0; s < E; s++)
        lb[(T - 1) * E + s] = s >= E - 2 ? LP(T - 1, ext(j, b, s)) : -INFINITY;
    for (int64_t t = T - 2; t >= 0; t--)
        for (int64_t s = 0; s < E; s++) {
            int64_t l = ext(j, b, s);
            const double *n = lb + (t + 1) * E;
            double v = n[s];
            if (s + 1 < E)
                v = op_logaddexp(v, n[s + 1]);
            if (s + 2 < E && s % 2 == 1 && ext(j, b, s + 2) != l)
                v = op_logaddexp(v, n[s + 2]);
            lb[t * E + s] = v + LP(t, l);
        }
    // d(-log p)/d lp[t, c] = -exp(log sum_{s: l'_s = c} alpha beta - lp[t, c] + nll)
    for (int64_t t = 0; t < T; t++)
        for (int64_t s = 0; s < E; s++) {
            int64_t l = ext(j, b, s);
            double v = la[t * E + s] + lb[t * E + s];
            if (v > -INFINITY)
                g[t * B * C + b * C + l] -= (float)(gscale * exp(v - LP(t, l) + nll));
        }
#undef LP
    return 0;
}

// The loss (g NULL) or its gradient times dloss into g.
static int ctc_run(cpu_ctx *c, const graph_node *n, const tensor *lpt, const tensor *tg,
                   const tensor *len, double dloss, float *g, double *loss) {
    const char *what = op_name(n->op);
    if (tg->dtype != DT_I32 && tg->dtype != DT_I64)
        return cpu_fail(c, "%s: targets must be i32 or i64, got %s", what, dtype_name(tg->dtype));
    if (len->dtype != DT_I32 && len->dtype != DT_I64)
        return cpu_fail(c, "%s: lengths must be i32 or i64, got %s", what, dtype_name(len->dtype));
    tensor *lc = cpu_f32_in(c, what, lpt);
    if (!lc)
        return -1;
    ctc_job j = {tensor_f32(lc), tg,           len,      lc->shape[0], lc->shape[1],
                 lc->shape[2],   tg->shape[1], n->ia[0], n->ia[1] != 0};
    int64_t E = 2 * j.S + 1;
    double *scratch = malloc((size_t)(2 * j.T * E * j.B) * sizeof *scratch);
    if (!scratch) {
        tensor_free(lc);
        return cpu_fail(c, "%s: out of memory for the (%lld, %lld) recursions", what,
                        (long long)j.T, (long long)E);
    }
    double total = 0;
    int64_t bad = 0;
#pragma omp parallel for reduction(+ : total) reduction(max : bad) schedule(static)
    for (int64_t b = 0; b < j.B; b++) {
        double *la = scratch + 2 * b * j.T * E, nll = 0;
        int64_t L = int_at(len, b, 0);
        double per = 1.0 / (double)(L > 1 ? L : 1) / (double)j.B;
        if (ctc_sample(&j, b, la, la + j.T * E, g, dloss * per, &nll) < 0)
            bad = b + 1;
        total += nll * per;
    }
    free(scratch);
    tensor_free(lc);
    if (bad)
        return cpu_fail(c,
                        "%s: sample %lld's target length or labels are outside [0, %lld] "
                        "and [0, %lld) without the blank %lld",
                        what, (long long)(bad - 1), (long long)j.S, (long long)j.C,
                        (long long)j.blank);
    *loss = total;
    c->kernels++;
    return 0;
}

int cpu_ctc_loss(cpu_ctx *c, const graph_node *n, const tensor *lp, const tensor *tg,
                 const tensor *len, tensor *out) {
    if (cpu_need_f32(c, "ctc_loss", out) < 0)
        return -1;
    double loss = 0;
    if (ctc_run(c, n, lp, tg, len, 0, NULL, &loss) < 0)
        return -1;
    *tensor_f32(out) = (float)loss;
    return 0;
}

int cpu_ctc_loss_grad(cpu_ctx *c, const graph_node *n, const tensor *dloss, const tensor *lp,
                      const tensor *tg, const tensor *len, tensor *out) {
    tensor *dc = cpu_f32_in(c, "ctc_loss_grad", dloss);
    tensor *oc = dc ? cpu_f32_out(c, "ctc_loss_grad", out) : NULL;
    double loss = 0;
    int rc = oc ? ctc_run(c, n, lp, tg, len, *tensor_f32(dc), tensor_f32(oc), &loss) : -1;
    tensor_free(dc);
    return cpu_f32_done(oc, out, rc);
}
