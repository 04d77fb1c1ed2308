// Training kernels (cuda_rt.h): the backward ops and training batch norm,
// the GPU side of cpu_grad.c and cpu_dnnl_grad.c's pooling (the optimizers'
// updates are in cuda_update.cu, convolution gradients are cuDNN's in
// cuda_dnn.c), one file a family. The formulas are the CPU kernels', in f32
// registers for f32 and f16 storage:
//
//   pointwise (cuda_grad_pointwise.cu: ge, act_grad, slice_grad,
//       mse_loss_grad): cpu_iter's loop nest through pw_make, grid-stride;
//   per set (softmax rows and cross-entropy in cuda_grad_reduce.cu, a norm's
//       rows, channels or groups in cuda_grad_norm.cu): one block per set,
//       statistics recomputed from x, two-pass variance;
//   sums over many rows into few outputs (cuda_grad_colsum.cuh: sum_to with
//       the last axis kept, layer and rms norm weight gradients): 32 columns
//       a block, 16 row lanes, the rows split over more blocks when the
//       columns are few, partial sums then added in a fixed order;
//   gathers (cuda_grad_gather.cu: pooling, embedding gradients): one thread
//       per output element adding its contributions in the CPU's order, so
//       there are no atomics and the same bits every step; embedding_grad
//       first sorts the positions by row with CUB's stable radix sort.
//
// Inputs that are views are made contiguous first (a counted copy), except
// for the pointwise ones. A bad embedding index or cross-entropy target is
// recorded on the device and reported by the next cuda_ctx_sync. This file
// holds the operand checks they share with cuda_update.cu.
#include "cuda_grad.cuh"

// ---- checks shared by the training kernels (cuda_grad.cuh) -------------------------

unsigned grad_grid(int64_t rows) { return (unsigned)(rows < (1 << 20) ? rows : (1 << 20)); }

int grad_need_float(cuda_ctx *c, const char *what, const tensor *t) {
    if (t->dtype != DT_F32 && t->dtype != DT_F16)
        return cuda_pw_fail(c, what, t->dtype);
    return 0;
}

int grad_need_same(cuda_ctx *c, const char *what, int n, const tensor *const *t) {
    for (int i = 0; i < n; i++) {
        if (grad_need_float(c, what, t[i]) < 0)
            return -1;
        if (t[i]->dtype != t[0]->dtype) {
            snprintf(c->err, sizeof c->err,
                     "%s: dtypes %s and %s differ (operands and output of one float dtype)", what,
                     dtype_name(t[0]->dtype), dtype_name(t[i]->dtype));
            return -1;
        }
    }
    return 0;
}

int grad_need_vector(cuda_ctx *c, const char *what, const tensor *t, int *f16) {
    if (grad_need_float(c, what, t) < 0)
        return -1;
    if (!tensor_is_contiguous(t)) {
        snprintf(c->err, sizeof c->err, "%s: its weight vector is not contiguous", what);
        return -1;
    }
    *f16 = t->dtype == DT_F16;
    return 0;
}

int grad_need_target(cuda_ctx *c, const char *what, const tensor *t) {
    if (t && (t->dtype != DT_F32 || !tensor_is_contiguous(t))) {
        snprintf(c->err, sizeof c->err,
                 "%s: the tensors it updates in place must be contiguous f32, got %s%s", what,
                 dtype_name(t->dtype), tensor_is_contiguous(t) ? "" : " (a view)");
        return -1;
    }
    return 0;
}
