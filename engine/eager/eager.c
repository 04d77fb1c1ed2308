// The eager executor (eager.h) on the CPU: the kernel table and the
// allocator that the one graph walk (walk.c, eager_internal.h) runs, plain
// aligned allocations where PyTorch has its caching allocator. The kernels
// live in engine/backend/cpu.
#include "eager.h"

#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/cpu_quant.h"
#include "core/pointwise.h"
#include "eager_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct eager {
    const model *m;
    eager_walk walk;
    eager_device dev;
    cpu_ctx cpu;
    char err[320];
};

// ---- kernels: one function per computing op, eager_<op> after ops.def ----

// Defines eager_<l>, an eager_kernel_fn: `call` runs the op's kernel on
// CPU (the context), n, s and y (the node's output, allocated by the walk;
// NULL for updates).
#define CPU ((cpu_ctx *)ctx)
#define EAGER_KERNEL(l, call)                                                                      \
    static int eager_##l(void *ctx, const graph_node *n, tensor *const *s, tensor *y) {            \
        (void)n, (void)s, (void)y;                                                                 \
        return (call);                                                                             \
    }

#define UNARY(l)        EAGER_KERNEL(l, cpu_unary(CPU, n, s[0], y))
#define X(U, l, a0, b0) UNARY(l)
TC_POINTWISE_OPS(X) // core/pointwise.h
#undef X
UNARY(cast)
UNARY(dropout)
UNARY(noise)
#undef UNARY

#define BINARY(l) EAGER_KERNEL(l, cpu_binary(CPU, n, s[0], s[1], y))
BINARY(add)
BINARY(sub)
BINARY(mul)
BINARY(div)
BINARY(maximum)
#undef BINARY

// the optional last input (bias) of linear and the convolutions
#define OPT(k) (n->nsrc > (k) ? s[k] : NULL)

EAGER_KERNEL(where, cpu_where(CPU, s[0], s[1], s[2], y))
EAGER_KERNEL(sum, cpu_reduce(CPU, n, s[0], y))
EAGER_KERNEL(mean, cpu_reduce(CPU, n, s[0], y))
EAGER_KERNEL(max, cpu_reduce(CPU, n, s[0], y))
EAGER_KERNEL(softmax, cpu_softmax(CPU, s[0], false, n->ia[0], y))
EAGER_KERNEL(log_softmax, cpu_softmax(CPU, s[0], true, n->ia[0], y))
EAGER_KERNEL(layer_norm, cpu_layer_norm(CPU, s[0], s[1], s[2], n->fa[0], y))
EAGER_KERNEL(rms_norm, cpu_rms_norm(CPU, s[0], s[1], n->fa[0], y))
EAGER_KERNEL(fft2_real, cpu_fft2_real(CPU, s[0], y))
// training mode (ia0 1) normalizes with batch statistics and updates the
// running ones in the model's buffers
EAGER_KERNEL(batch_norm, n->ia[0] ? cpu_batch_norm_train(CPU, s[0], s[1], s[2], s[3], s[4],
                                                         n->fa[0], n->fa[1], y)
                                  : cpu_batch_norm(CPU, s[0], s[1], s[2], s[3], s[4], n->fa[0], y))
EAGER_KERNEL(group_norm, cpu_group_norm(CPU, s[0], s[1], s[2], n->ia[0], n->fa[0], y))
EAGER_KERNEL(instance_norm, cpu_group_norm(CPU, s[0], s[1], s[2], n->ia[0], n->fa[0], y))
EAGER_KERNEL(matmul, cpu_matmul(CPU, s[0], s[1], y))
EAGER_KERNEL(linear, cpu_linear(CPU, s[0], s[1], OPT(2), y))
EAGER_KERNEL(conv2d, cpu_conv2d(CPU, n, s[0], s[1], OPT(2), y))
EAGER_KERNEL(conv_transpose2d, cpu_conv2d(CPU, n, s[0], s[1], OPT(2), y))
EAGER_KERNEL(max_pool2d, cpu_pool2d(CPU, n, s[0], y))
EAGER_KERNEL(avg_pool2d, cpu_pool2d(CPU, n, s[0], y))
EAGER_KERNEL(upsample_nearest, cpu_upsample_nearest(CPU, s[0], n->ia[0], y))
EAGER_KERNEL(embedding, cpu_embedding(CPU, s[0], s[1], y))
EAGER_KERNEL(concat, cpu_concat(CPU, (int)n->ia[0], n->nsrc, (const tensor *const *)s, y))
EAGER_KERNEL(roll, cpu_roll(CPU, n->ia, s[0], y))
EAGER_KERNEL(unfold, cpu_im2col(CPU, n, s[0], y))
EAGER_KERNEL(fold, cpu_im2col(CPU, n, s[0], y))
EAGER_KERNEL(pad, cpu_pad(CPU, n, s[0], y))
EAGER_KERNEL(cross_entropy, cpu_cross_entropy(CPU, s[0], s[1], n->ia[0], n->fa[0], y))
EAGER_KERNEL(embedding_bag, cpu_embedding_bag(CPU, s[0], s[1], s[2], y))
EAGER_KERNEL(tril_gather, cpu_tril_gather(CPU, n, s[0], y))
EAGER_KERNEL(grid_sample, cpu_grid_sample(CPU, n, s[0], s[1], y))
EAGER_KERNEL(upsample_bilinear, cpu_grid_sample(CPU, n, s[0], NULL, y))
EAGER_KERNEL(mse_loss, cpu_mse_loss(CPU, s[0], s[1], y))
EAGER_KERNEL(bce_loss, cpu_bce_loss(CPU, n, s[0], s[1], y))
EAGER_KERNEL(lstm, cpu_lstm(CPU, n, (const tensor *const *)s, y))
EAGER_KERNEL(ctc_loss, cpu_ctc_loss(CPU, n, s[0], s[1], s[2], y))
EAGER_KERNEL(ge, cpu_binary(CPU, n, s[0], s[1], y))
EAGER_KERNEL(dequant, cpu_dequant(CPU, n, s[0], s[1], y))
EAGER_KERNEL(qlinear, cpu_qlinear(CPU, n, s[0], s[1], s[2], OPT(3), y))
// the optional bias and valid length: the sources ia1 and ia2 name
#define ATT_SRC(k) (n->ia[k] ? s[n->ia[k]] : NULL)
EAGER_KERNEL(attention, cpu_attention(CPU, n, s[0], s[1], s[2], ATT_SRC(1), ATT_SRC(2), y))

// ---- backward ops (training) -----------------------------------------------

EAGER_KERNEL(act_grad, cpu_act_grad(CPU, n, s[0], s[1], y))
EAGER_KERNEL(sum_to, cpu_sum_to(CPU, s[0], y))
EAGER_KERNEL(softmax_grad, cpu_softmax_grad(CPU, s[0], s[1], false, n->ia[0], y))
EAGER_KERNEL(log_softmax_grad, cpu_softmax_grad(CPU, s[0], s[1], true, n->ia[0], y))
EAGER_KERNEL(layer_norm_grad, cpu_norm_grad(CPU, n, s[0], s[1], s[2], y))
EAGER_KERNEL(layer_norm_wgrad, cpu_norm_wgrad(CPU, n, s[0], s[1], y))
EAGER_KERNEL(rms_norm_grad, cpu_norm_grad(CPU, n, s[0], s[1], s[2], y))
EAGER_KERNEL(rms_norm_wgrad, cpu_norm_wgrad(CPU, n, s[0], s[1], y))
EAGER_KERNEL(batch_norm_grad, cpu_norm_grad(CPU, n, s[0], s[1], s[2], y))
EAGER_KERNEL(batch_norm_wgrad, cpu_norm_wgrad(CPU, n, s[0], s[1], y))
EAGER_KERNEL(batch_norm_stats, cpu_batch_norm_stats(CPU, s[0], n->fa[0], y))
EAGER_KERNEL(group_norm_grad, cpu_norm_grad(CPU, n, s[0], s[1], s[2], y))
EAGER_KERNEL(group_norm_wgrad, cpu_norm_wgrad(CPU, n, s[0], s[1], y))
EAGER_KERNEL(conv2d_grad_input, cpu_conv2d_grad_input(CPU, n, s[0], s[1], y))
EAGER_KERNEL(conv2d_grad_weight, cpu_conv2d_grad_weight(CPU, n, s[0], s[1], y))
EAGER_KERNEL(max_pool2d_grad, cpu_pool2d_grad(CPU, n, s[0], s[1], y))
EAGER_KERNEL(avg_pool2d_grad, cpu_pool2d_grad(CPU, n, s[0], NULL, y))
EAGER_KERNEL(embedding_grad, cpu_embedding_grad(CPU, s[0], s[1], y))
EAGER_KERNEL(slice_grad, cpu_slice_grad(CPU, n, s[0], y))
EAGER_KERNEL(pad_grad, cpu_pad_grad(CPU, n, s[0], y))
EAGER_KERNEL(lstm_grad, cpu_lstm_grad(CPU, n, (const tensor *const *)s, y))
EAGER_KERNEL(embedding_bag_grad, cpu_embedding_bag_grad(CPU, s[0], s[1], s[2], y))
EAGER_KERNEL(tril_gather_grad, cpu_tril_gather_grad(CPU, n, s[0], y))
EAGER_KERNEL(grid_sample_grad, cpu_grid_sample_grad(CPU, n, s[0], s[1], y))
EAGER_KERNEL(upsample_bilinear_grad, cpu_grid_sample_grad(CPU, n, s[0], NULL, y))
EAGER_KERNEL(grid_sample_grad_grid, cpu_grid_sample_grad_grid(CPU, n, s[0], s[1], s[2], y))
EAGER_KERNEL(cross_entropy_grad, cpu_cross_entropy_grad(CPU, n, s[0], s[1], s[2], y))
EAGER_KERNEL(mse_loss_grad, cpu_mse_loss_grad(CPU, s[0], s[1], s[2], y))
EAGER_KERNEL(bce_loss_grad, cpu_bce_loss_grad(CPU, n, s[0], s[1], s[2], y))
EAGER_KERNEL(ctc_loss_grad, cpu_ctc_loss_grad(CPU, n, s[0], s[1], s[2], s[3], y))
EAGER_KERNEL(attention_grad,
             cpu_attention_grad(CPU, n, s[0], s[1], s[2], s[3], s[4], ATT_SRC(1), ATT_SRC(2), y))

// strided into contiguous; the walk runs it only on a strided input
EAGER_KERNEL(contiguous, cpu_copy(CPU, s[0], y))

// ---- updates: write the model's own tensors (borrowed sources) in place ----

EAGER_KERNEL(sgd, cpu_sgd(CPU, n, s[0], s[1], eager_sgd_buffer(n, s), eager_scaler(n, s)))
EAGER_KERNEL(adamw, cpu_adamw(CPU, n, s[0], s[1], s[2], s[3], eager_scaler(n, s)))
EAGER_KERNEL(running_stat, cpu_running_stat(CPU, n, s[0], s[1]))
EAGER_KERNEL(kv_write, cpu_kv_write(CPU, s[0], s[1], s[2]))
EAGER_KERNEL(scaler_update, cpu_scaler_update(CPU, n, s[0], s[1], s[2], s[3]))
EAGER_KERNEL(found_inf, cpu_found_inf(CPU, n, (const tensor *const *)s, y))

// Every computing op's kernel; a missing eager_<op> fails to compile.
static const eager_kernel_fn eager_kernels[OP_COUNT] = {
#define OP(U, l, k, a0, a1) [OP_##U] = EAGER_ENTRY(k, eager_##l),
#include "core/ops.def"
#undef OP
};

// ---- the allocator: aligned host memory, counted by core/tensor ----------

static tensor *host_alloc(void *ctx, const graph_node *n, int ndim, const int64_t *shape) {
    int64_t refused = tensor_mem_refusals();
    tensor *t = tensor_new_empty(n->dtype, ndim, shape);
    if (t)
        return t;
    size_t bytes = (size_t)shape_numel(ndim, shape) * dtype_size(n->dtype);
    if (tensor_mem_refusals() == refused) {
        cpu_fail(ctx, "out of memory allocating %zu bytes for %s", bytes, op_name(n->op));
        return NULL;
    }
    char why[160];
    tensor_mem_refusal(why, sizeof why, tensor_mem_round(bytes), tensor_mem_live());
    cpu_fail(ctx, "out of memory: %s (--memory-limit)", why);
    return NULL;
}

static void host_free(void *ctx, tensor *t) {
    (void)ctx;
    tensor_free(t);
}

static int host_copy(void *ctx, const tensor *x, tensor *y) { return cpu_copy(ctx, x, y); }

static void host_reset_peak(void *ctx) {
    (void)ctx;
    tensor_mem_reset_peak();
}

static size_t host_peak(void *ctx) {
    (void)ctx;
    return tensor_mem_peak();
}

// ---- the executor --------------------------------------------------------

eager *eager_new(const model *m) {
    eager *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->m = m;
    e->cpu.step = 1;
    // TCBENCH_PROFILE=eager: seconds per op, printed by eager_free;
    // eager-nodes: per node as well
    if (eager_walk_init(&e->walk, m->g, eager_profile_env()) < 0) {
        free(e);
        return NULL;
    }
    e->dev = (eager_device){.name = "cpu",
                            .ctx = &e->cpu,
                            .kernels = eager_kernels,
                            .alloc = host_alloc,
                            .free = host_free,
                            .copy = host_copy,
                            .reset_peak = host_reset_peak,
                            .peak_bytes = host_peak,
                            .launched = &e->cpu.kernels,
                            .err = e->cpu.err};
    // set-up failures are reported by the first eager_run
    char err[256];
    if (cpu_dnnl_new(&e->cpu.dnnl, err, sizeof err) < 0)
        snprintf(e->err, sizeof e->err, "oneDNN set-up: %s", err);
    return e;
}

void eager_free(eager *e) {
    if (!e)
        return;
    eager_walk_free(&e->walk);
    cpu_dnnl_free(e->cpu.dnnl);
    free(e);
}

const char *eager_error(const eager *e) { return e->err; }

void eager_set_step(eager *e, uint64_t step) { e->cpu.step = step; }

int eager_run(eager *e, tensor **outputs, eager_stats *st) {
    for (int k = 0; k < e->m->g->noutputs; k++)
        outputs[k] = NULL;
    if (e->err[0] && !e->cpu.dnnl)
        return -1;
    e->err[0] = 0;
    // sources: the model's values (parameters, buffers, inputs), borrowed
    return eager_walk_step(&e->walk, &e->dev, e->m->values, outputs, st, e->err, sizeof e->err);
}
