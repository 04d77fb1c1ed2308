// The optimizers' in-place updates and running statistics (cpu_kernels.h):
// SGD, AdamW and running_stat, one kernel per tensor, PyTorch's update rules
// in one pass over the parameter, its gradient and its state; and the grad
// scaler's kernels (PyTorch's GradScaler): the non-finite check over the
// unscaled gradients, and the update of the scale.
#include "cpu_iter.h"
#include "cpu_kernels.h"

#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdbool.h>
#include <stdint.h>

// ---- the grad scaler -----------------------------------------------------------------------

// The update's view of the grad scaler: skip it, or the gradient's factor
// (1/scale, rounded to f32 from double as PyTorch's unscale_ does) and the
// step t (the optimizer's own count + 1: a skipped step does not count).
static bool scaler_skip(const tensor *const *scaler, float *inv, uint64_t *t) {
    if (!scaler)
        return false;
    if (tensor_get_flat(scaler[1], 0) != 0)
        return true;
    *inv = (float)(1.0 / tensor_get_flat(scaler[0], 0));
    *t = (uint64_t)tensor_get_flat(scaler[2], 0) + 1;
    return false;
}

// Whether any of n values times inv is inf or NaN (a NaN fails the compare).
static int nonfinite_span(const float *restrict pv, float inv, int64_t n) {
    int any = 0;
#pragma omp simd reduction(| : any)
    for (int64_t i = 0; i < n; i++)
        any |= !(fabsf(pv[i] * inv) <= FLT_MAX);
    return any;
}

int cpu_found_inf(cpu_ctx *c, const graph_node *n, const tensor *const *in, tensor *out) {
    if (cpu_need_target(c, "found_inf", out) < 0)
        return -1;
    float inv = (float)(1.0 / tensor_get_flat(in[0], 0));
    int any = n->ia[0] && tensor_get_flat(in[1], 0) != 0; // an earlier flag of the chain
    for (int k = n->ia[0] ? 2 : 1; k < n->nsrc && !any; k++) {
        tensor *t;
        if (cpu_inputs_f32(c, "found_inf", 1, &in[k], &t) < 0)
            return -1;
        const float *pv = tensor_f32(t);
        int64_t count = tensor_numel(t);
        if (count < CPU_PAR_MIN) {
            any = nonfinite_span(pv, inv, count);
        } else {
#pragma omp parallel reduction(| : any)
            {
                int nt = omp_get_num_threads(), th = omp_get_thread_num();
                int64_t i0 = count * th / nt, i1 = count * (th + 1) / nt;
                any |= nonfinite_span(pv + i0, inv, i1 - i0);
            }
        }
        tensor_free(t);
    }
    tensor_f32(out)[0] = any ? 1.0f : 0.0f;
    c->kernels++;
    return 0;
}

int cpu_scaler_update(cpu_ctx *c, const graph_node *n, tensor *scale, tensor *tracker, tensor *step,
                      const tensor *found) {
    if (cpu_need_target(c, "scaler_update", scale) < 0 ||
        cpu_need_target(c, "scaler_update", tracker) < 0 ||
        cpu_need_target(c, "scaler_update", step) < 0)
        return -1;
    float *ps = tensor_f32(scale), *pt = tensor_f32(tracker), *pn = tensor_f32(step);
    if (tensor_get_flat(found, 0) != 0) { // back off; the optimizer did not step
        *ps = (float)(*ps * n->fa[1]);
        *pt = 0;
    } else {
        *pn += 1;
        if (*pt + 1 >= (float)n->ia[0]) { // growth_interval good steps in a row
            float grown = (float)(*ps * n->fa[0]);
            if (isfinite(grown))
                *ps = grown;
            *pt = 0;
        } else {
            *pt += 1;
        }
    }
    c->kernels++;
    return 0;
}

// ---- updates, in place -------------------------------------------------------------------

// Update loops over one contiguous span each, plain `omp simd` loops called
// by each thread on its slice or by the caller on the whole tensor: a
// `parallel for simd if (...)` that runs on one thread came out scalar
// (8x slower on an AdamW of 16K elements).
typedef struct sgd_prm {
    float lr, wd, keep, take, nest, inv;
    bool nesterov, momentum;
} sgd_prm;

static void sgd_span(const sgd_prm *a, float *restrict pp, float *restrict pb,
                     const float *restrict pg, int64_t n) {
    float lr = a->lr, wd = a->wd, keep = a->keep, take = a->take, nest = a->nest, inv = a->inv;
    if (!a->momentum) {
#pragma omp simd
        for (int64_t i = 0; i < n; i++)
            pp[i] -= lr * (pg[i] * inv + wd * pp[i]);
        return;
    }
    bool nesterov = a->nesterov;
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        float d = pg[i] * inv + wd * pp[i];
        float bv = keep * pb[i] + take * d;
        pb[i] = bv;
        pp[i] -= lr * (nesterov ? d + nest * bv : bv);
    }
}

int cpu_sgd(cpu_ctx *c, const graph_node *n, tensor *p, const tensor *g, tensor *buf,
            const tensor *const *scaler) {
    float lr = (float)n->fa[0], mom = (float)n->fa[1], wd = (float)n->fa[2];
    float damp = 1.0f - (float)n->fa[3], inv = 1.0f;
    uint64_t t = cpu_step(c);
    if (cpu_need_target(c, "sgd", p) < 0 || cpu_need_target(c, "sgd", buf) < 0)
        return -1;
    if (mom != 0 && !buf)
        return cpu_fail(c, "sgd: momentum %g needs a momentum buffer (a third input)", mom);
    if (scaler_skip(scaler, &inv, &t)) {
        c->kernels++;
        return 0;
    }
    bool nesterov = n->ia[0] != 0, first = t == 1;
    tensor *gc;
    if (cpu_inputs_f32(c, "sgd", 1, &g, &gc) < 0)
        return -1;
    int64_t count = tensor_numel(p);
    float *pp = tensor_f32(p), *pb = buf ? tensor_f32(buf) : NULL;
    const float *pg = tensor_f32(gc);
    // the first step starts the buffer at d, as PyTorch's
    sgd_prm a = {.lr = lr,
                 .wd = wd,
                 .keep = first ? 0.0f : mom,
                 .take = first ? 1.0f : damp,
                 .nest = nesterov ? mom : 0,
                 .inv = inv,
                 .nesterov = nesterov,
                 .momentum = mom != 0};
    if (count < CPU_PAR_MIN) {
        sgd_span(&a, pp, pb, pg, count);
    } else {
#pragma omp parallel
        {
            int nt = omp_get_num_threads(), t = omp_get_thread_num();
            int64_t i0 = count * t / nt, i1 = count * (t + 1) / nt;
            sgd_span(&a, pp + i0, pb ? pb + i0 : NULL, pg + i0, i1 - i0);
        }
    }
    tensor_free(gc);
    c->kernels++;
    return 0;
}

typedef struct adamw_prm {
    float decay, eps, step, inv_bc2, b1, b2, ob1, ob2, inv;
} adamw_prm;

// One contiguous span of an AdamW update: a plain vectorizable loop (the
// same loop whether a thread takes a slice or the caller the whole tensor).
static void adamw_span(const adamw_prm *a, float *restrict pp, float *restrict pm,
                       float *restrict pv, const float *restrict pg, int64_t n) {
    float decay = a->decay, eps = a->eps, step = a->step, inv_bc2 = a->inv_bc2;
    float b1 = a->b1, b2 = a->b2, ob1 = a->ob1, ob2 = a->ob2, inv = a->inv;
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        float gi = pg[i] * inv;
        float mi = b1 * pm[i] + ob1 * gi, vi = b2 * pv[i] + ob2 * gi * gi;
        pm[i] = mi;
        pv[i] = vi;
        pp[i] = pp[i] * decay - step * mi / (sqrtf(vi) * inv_bc2 + eps);
    }
}

int cpu_adamw(cpu_ctx *c, const graph_node *n, tensor *p, const tensor *g, tensor *m, tensor *v,
              const tensor *const *scaler) {
    if (cpu_need_target(c, "adamw", p) < 0 || cpu_need_target(c, "adamw", m) < 0 ||
        cpu_need_target(c, "adamw", v) < 0)
        return -1;
    float inv = 1.0f;
    uint64_t step = cpu_step(c);
    if (scaler_skip(scaler, &inv, &step)) {
        c->kernels++;
        return 0;
    }
    tensor *gc;
    if (cpu_inputs_f32(c, "adamw", 1, &g, &gc) < 0)
        return -1;
    double lr = n->fa[0], b1 = n->fa[1], b2 = n->fa[2], t = (double)step;
    float decay = (float)(1 - lr * n->fa[4]), eps = (float)n->fa[3];
    float stepf = (float)(lr / (1 - pow(b1, t))), inv_bc2 = (float)(1 / sqrt(1 - pow(b2, t)));
    float fb1 = (float)b1, fb2 = (float)b2, ob1 = (float)(1 - b1), ob2 = (float)(1 - b2);
    int64_t count = tensor_numel(p);
    float *pp = tensor_f32(p), *pm = tensor_f32(m), *pv = tensor_f32(v);
    const float *pg = tensor_f32(gc);
    adamw_prm a = {decay, eps, stepf, inv_bc2, fb1, fb2, ob1, ob2, inv};
    if (count < CPU_PAR_MIN) {
        adamw_span(&a, pp, pm, pv, pg, count);
    } else {
#pragma omp parallel
        {
            int nt = omp_get_num_threads(), t = omp_get_thread_num();
            int64_t i0 = count * t / nt, i1 = count * (t + 1) / nt;
            adamw_span(&a, pp + i0, pm + i0, pv + i0, pg + i0, i1 - i0);
        }
    }
    tensor_free(gc);
    c->kernels++;
    return 0;
}

int cpu_running_stat(cpu_ctx *c, const graph_node *n, tensor *buf, const tensor *stat) {
    if (cpu_need_target(c, "running_stat", buf) < 0)
        return -1;
    tensor *sc;
    if (cpu_inputs_f32(c, "running_stat", 1, &stat, &sc) < 0)
        return -1;
    float keep = (float)(1 - n->fa[0]), take = (float)(n->fa[0] * n->fa[1]);
    int64_t count = tensor_numel(buf);
    float *pb = tensor_f32(buf);
    const float *ps = tensor_f32(sc);
#pragma omp parallel if (count >= CPU_PAR_MIN)
    {
        int nt = omp_get_num_threads(), t = omp_get_thread_num();
        int64_t i0 = count * t / nt, i1 = count * (t + 1) / nt;
#pragma omp simd
        for (int64_t i = i0; i < i1; i++)
            pb[i] = keep * pb[i] + take * ps[i];
    }
    tensor_free(sc);
    c->kernels++;
    return 0;
}
