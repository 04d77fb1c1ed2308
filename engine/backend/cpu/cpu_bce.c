// Binary cross entropy, BCELoss and BCEWithLogitsLoss (BCE_LOSS, ops.def),
// and its backward BCE_LOSS_GRAD: each one kernel over contiguous f32 (f16
// inputs through f32 scratch, as every loss here), the mean accumulated in
// double per block as cpu_mse_loss does.
#include "cpu_iter.h"
#include "cpu_kernels.h"

#include <math.h>

#define BLOCK 1024

// one element's loss: logits (max(x, 0) - x t + log1p(e^-|x|)) or
// probabilities, each log clamped at -100 as torch's binary_cross_entropy
static inline float bce_term(int logits, float x, float t) {
    if (logits)
        return fmaxf(x, 0) - x * t + log1pf(expf(-fabsf(x)));
    return -(t * fmaxf(logf(x), -100.f) + (1 - t) * fmaxf(logf(1 - x), -100.f));
}

int cpu_bce_loss(cpu_ctx *c, const graph_node *n, const tensor *x, const tensor *target,
                 tensor *out) {
    tensor *t[2];
    if (cpu_need_f32(c, "bce_loss", out) < 0 ||
        cpu_inputs_f32(c, "bce_loss", 2, (const tensor *[]){x, target}, t) < 0)
        return -1;
    int logits = (int)n->ia[0];
    int64_t cnt = tensor_numel(t[0]), nb = (cnt + BLOCK - 1) / BLOCK;
    const float *px = tensor_f32(t[0]), *pt = tensor_f32(t[1]);
    double total = 0;
#pragma omp parallel for if (cnt >= CPU_PAR_MIN) reduction(+ : total) schedule(static)
    for (int64_t blk = 0; blk < nb; blk++) {
        int64_t e = (blk + 1) * BLOCK < cnt ? (blk + 1) * BLOCK : cnt;
        float s = 0;
        for (int64_t i = blk * BLOCK; i < e; i++)
            s += bce_term(logits, px[i], pt[i]);
        total += s;
    }
    *tensor_f32(out) = (float)(total / (double)cnt);
    cpu_free_all(2, t);
    c->kernels++;
    return 0;
}

// d x = dloss (sigmoid(x) - t) / numel (logits), or dloss (p - t) /
// max(p (1 - p), 1e-12) / numel, torch's formula with its epsilon
int cpu_bce_loss_grad(cpu_ctx *c, const graph_node *n, const tensor *dloss, const tensor *x,
                      const tensor *target, tensor *out) {
    tensor *t[2], *o;
    if (cpu_inputs_f32(c, "bce_loss_grad", 2, (const tensor *[]){x, target}, t) < 0)
        return -1;
    if (!(o = cpu_f32_out(c, "bce_loss_grad", out))) {
        cpu_free_all(2, t);
        return -1;
    }
    int logits = (int)n->ia[0];
    int64_t cnt = tensor_numel(t[0]);
    float k = (float)(tensor_get_flat(dloss, 0) / (double)cnt);
    const float *px = tensor_f32(t[0]), *pt = tensor_f32(t[1]);
    float *po = tensor_f32(o);
#pragma omp parallel for if (cnt >= CPU_PAR_MIN) schedule(static)
    for (int64_t i = 0; i < cnt; i++) {
        float p = px[i];
        po[i] = logits ? k * (1 / (1 + expf(-p)) - pt[i])
                       : k * (p - pt[i]) / fmaxf(p * (1 - p), 1e-12f);
    }
    cpu_free_all(2, t);
    c->kernels++;
    return cpu_f32_done(o, out, 0);
}
