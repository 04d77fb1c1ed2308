// The CUDA eager executor (eager_cuda.h): the kernel table and the caching
// allocator that the one graph walk (walk.c, eager_internal.h) runs, on one
// stream. The kernels live in engine/backend/cuda.
#include "eager_cuda.h"

#include "backend/cuda/cuda_rt.h"
#include "backend/cuda/cuda_share.h"
#include "core/pointwise.h"
#include "eager_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct eager_cuda {
    const model *m;
    cuda_ctx c;
    bool ctx_ok;
    cuda_ctx *cx;      // &c, or the share's context
    cuda_share *share; // NULL: the executor's own context and copies
    bool *lent;        // g->n: src[i] is the share's (not freed here)
    bool *passed;      // g->n: src[i] came from another executor's step (eager_cuda_pass)
    eager_walk walk;
    eager_device dev;
    tensor **src;  // device copies of the source nodes (owned; the walk borrows them)
    tensor **outs; // the last step's g->noutputs outputs (a reference each)
    char err[512];
};

// ---- kernels: one function per computing op, ec_<op> after ops.def -------

// Defines ec_<l>, an eager_kernel_fn: `call` runs the op's kernel on C
// (the context), n, s and y (the node's output, allocated by the walk from
// the caching allocator; NULL for updates).
#define C ((cuda_ctx *)ctx)
#define EC_KERNEL(l, call)                                                                         \
    static int ec_##l(void *ctx, const graph_node *n, tensor *const *s, tensor *y) {               \
        (void)n, (void)s, (void)y;                                                                 \
        return (call);                                                                             \
    }

#define UNARY(l)        EC_KERNEL(l, cuda_unary(C, n, s[0], y))
#define X(U, l, a0, b0) UNARY(l)
TC_POINTWISE_OPS(X) // core/pointwise.h
#undef X
UNARY(cast)
UNARY(dropout)
UNARY(noise)
#undef UNARY

#define BINARY(l) EC_KERNEL(l, cuda_binary(C, n, s[0], s[1], y))
BINARY(add)
BINARY(sub)
BINARY(mul)
BINARY(div)
BINARY(maximum)
#undef BINARY

#define OPT(k) (n->nsrc > (k) ? s[k] : NULL)

EC_KERNEL(where, cuda_where(C, s[0], s[1], s[2], y))
EC_KERNEL(sum, cuda_reduce(C, n, s[0], y))
EC_KERNEL(mean, cuda_reduce(C, n, s[0], y))
EC_KERNEL(max, cuda_reduce(C, n, s[0], y))
EC_KERNEL(softmax, cuda_softmax(C, s[0], false, n->ia[0], y))
EC_KERNEL(log_softmax, cuda_softmax(C, s[0], true, n->ia[0], y))
EC_KERNEL(layer_norm, cuda_layer_norm(C, s[0], s[1], s[2], n->fa[0], y))
EC_KERNEL(rms_norm, cuda_layer_norm(C, s[0], s[1], NULL, n->fa[0], y))
// training mode (ia0 1) normalizes with the batch's statistics and updates
// the running ones in the model's buffers (device sources), as eager.c
EC_KERNEL(batch_norm,
          n->ia[0] ? cuda_batch_norm_train(C, s[0], s[1], s[2], s[3], s[4], n->fa[0], n->fa[1], y)
                   : cuda_batch_norm(C, s[0], s[1], s[2], s[3], s[4], n->fa[0], y))
EC_KERNEL(group_norm, cuda_group_norm(C, s[0], s[1], s[2], n->ia[0], n->fa[0], y))
EC_KERNEL(instance_norm, cuda_group_norm(C, s[0], s[1], s[2], n->ia[0], n->fa[0], y))
EC_KERNEL(matmul, cuda_matmul(C, s[0], s[1], y))
EC_KERNEL(linear, cuda_linear(C, s[0], s[1], OPT(2), y))
EC_KERNEL(conv2d, cuda_conv2d(C, n, s[0], s[1], OPT(2), y))
EC_KERNEL(conv_transpose2d, cuda_conv2d(C, n, s[0], s[1], OPT(2), y))
EC_KERNEL(max_pool2d, cuda_pool2d(C, n, s[0], y))
EC_KERNEL(avg_pool2d, cuda_pool2d(C, n, s[0], y))
EC_KERNEL(upsample_nearest, cuda_upsample_nearest(C, s[0], n->ia[0], y))
EC_KERNEL(embedding, cuda_embedding(C, s[0], s[1], y))
EC_KERNEL(fft2_real, cuda_fft2_real(C, s[0], y))
EC_KERNEL(concat, cuda_concat(C, (int)n->ia[0], n->nsrc, (const tensor *const *)s, y))
EC_KERNEL(roll, cuda_roll(C, n->ia, s[0], y))
EC_KERNEL(unfold, cuda_im2col(C, n, s[0], y))
EC_KERNEL(fold, cuda_im2col(C, n, s[0], y))
EC_KERNEL(pad, cuda_pad(C, n, s[0], y))
EC_KERNEL(cross_entropy, cuda_cross_entropy(C, s[0], s[1], n->ia[0], n->fa[0], y))
EC_KERNEL(embedding_bag, cuda_embedding_bag(C, s[0], s[1], s[2], y))
EC_KERNEL(tril_gather, cuda_tril_gather(C, n, s[0], y))
EC_KERNEL(grid_sample, cuda_grid_sample(C, n, s[0], s[1], y))
EC_KERNEL(upsample_bilinear, cuda_grid_sample(C, n, s[0], NULL, y))
EC_KERNEL(mse_loss, cuda_mse_loss(C, s[0], s[1], y))
EC_KERNEL(bce_loss, cuda_bce_loss(C, n, s[0], s[1], y))
EC_KERNEL(lstm, cuda_lstm(C, n, (const tensor *const *)s, y))
EC_KERNEL(ctc_loss, cuda_ctc_loss(C, n, s[0], s[1], s[2], y))
EC_KERNEL(attention, cuda_attention(C, n, s[0], s[1], s[2], n->ia[1] ? s[n->ia[1]] : NULL,
                                    n->ia[2] ? s[n->ia[2]] : NULL, y))

// a >= b into bool: the masks of max's and maximum's gradients
EC_KERNEL(ge, cuda_ge(C, s[0], s[1], y))
EC_KERNEL(dequant, cuda_dequant(C, n, s[0], s[1], y))
EC_KERNEL(qlinear, cuda_qlinear(C, n, s[0], s[1], s[2], OPT(3), y))

// ---- backward ops (training) -----------------------------------------------

EC_KERNEL(act_grad, cuda_act_grad(C, n, s[0], s[1], y))
EC_KERNEL(sum_to, cuda_sum_to(C, s[0], y))
EC_KERNEL(softmax_grad, cuda_softmax_grad(C, s[0], s[1], false, n->ia[0], y))
EC_KERNEL(log_softmax_grad, cuda_softmax_grad(C, s[0], s[1], true, n->ia[0], y))
EC_KERNEL(layer_norm_grad, cuda_norm_grad(C, n, s[0], s[1], s[2], y))
EC_KERNEL(layer_norm_wgrad, cuda_norm_wgrad(C, n, s[0], s[1], y))
EC_KERNEL(rms_norm_grad, cuda_norm_grad(C, n, s[0], s[1], s[2], y))
EC_KERNEL(rms_norm_wgrad, cuda_norm_wgrad(C, n, s[0], s[1], y))
EC_KERNEL(batch_norm_grad, cuda_norm_grad(C, n, s[0], s[1], s[2], y))
EC_KERNEL(batch_norm_wgrad, cuda_norm_wgrad(C, n, s[0], s[1], y))
EC_KERNEL(batch_norm_stats, cuda_batch_norm_stats(C, s[0], n->fa[0], y))
EC_KERNEL(group_norm_grad, cuda_norm_grad(C, n, s[0], s[1], s[2], y))
EC_KERNEL(group_norm_wgrad, cuda_norm_wgrad(C, n, s[0], s[1], y))
EC_KERNEL(conv2d_grad_input, cuda_conv2d_grad(C, n, s[0], s[1], y))
EC_KERNEL(conv2d_grad_weight, cuda_conv2d_grad(C, n, s[0], s[1], y))
EC_KERNEL(max_pool2d_grad, cuda_pool2d_grad(C, n, s[0], s[1], y))
EC_KERNEL(avg_pool2d_grad, cuda_pool2d_grad(C, n, s[0], NULL, y))
EC_KERNEL(embedding_grad, cuda_embedding_grad(C, s[0], s[1], y))
EC_KERNEL(slice_grad, cuda_slice_grad(C, n, s[0], y))
EC_KERNEL(pad_grad, cuda_pad_grad(C, n, s[0], y))
EC_KERNEL(lstm_grad, cuda_lstm_grad(C, n, (const tensor *const *)s, y))
EC_KERNEL(embedding_bag_grad, cuda_embedding_bag_grad(C, s[0], s[1], s[2], y))
EC_KERNEL(tril_gather_grad, cuda_tril_gather_grad(C, n, s[0], y))
EC_KERNEL(grid_sample_grad, cuda_grid_sample_grad(C, n, s[0], s[1], y))
EC_KERNEL(upsample_bilinear_grad, cuda_grid_sample_grad(C, n, s[0], NULL, y))
EC_KERNEL(grid_sample_grad_grid, cuda_grid_sample_grad_grid(C, n, s[0], s[1], s[2], y))
EC_KERNEL(cross_entropy_grad, cuda_cross_entropy_grad(C, n, s[0], s[1], s[2], y))
EC_KERNEL(mse_loss_grad, cuda_mse_loss_grad(C, s[0], s[1], s[2], y))
EC_KERNEL(bce_loss_grad, cuda_bce_loss_grad(C, n, s[0], s[1], s[2], y))
EC_KERNEL(ctc_loss_grad, cuda_ctc_loss_grad(C, n, s[0], s[1], s[2], s[3], y))
EC_KERNEL(found_inf, cuda_found_inf(C, n, (const tensor *const *)s, y))
EC_KERNEL(attention_grad, cuda_attention_grad(C, n, s[0], s[1], s[2], s[3], s[4],
                                              n->ia[1] ? s[n->ia[1]] : NULL,
                                              n->ia[2] ? s[n->ia[2]] : NULL, y))

// strided into contiguous; the walk runs it only on a strided input
EC_KERNEL(contiguous, cuda_copy(C, s[0], y))

// ---- updates: write the model's own tensors (device sources) in place ----

EC_KERNEL(sgd, cuda_sgd(C, n, s[0], s[1], eager_sgd_buffer(n, s), eager_scaler(n, s)))
EC_KERNEL(adamw, cuda_adamw(C, n, s[0], s[1], s[2], s[3], eager_scaler(n, s)))
EC_KERNEL(running_stat, cuda_running_stat(C, n, s[0], s[1]))
EC_KERNEL(kv_write, cuda_kv_write(C, s[0], s[1], s[2]))
EC_KERNEL(scaler_update, cuda_scaler_update(C, n, s[0], s[1], s[2], s[3]))

// Every computing op's kernel; a missing ec_<op> fails to compile.
static const eager_kernel_fn ec_kernels[OP_COUNT] = {
#define OP(U, l, k, a0, a1) [OP_##U] = EAGER_ENTRY(k, ec_##l),
#include "core/ops.def"
#undef OP
};

// ---- the allocator: backend/cuda/cuda_alloc.h's caching allocator ---------

static tensor *dev_alloc(void *ctx, const graph_node *n, int ndim, const int64_t *shape) {
    return cuda_tensor_new(ctx, n->dtype, ndim, shape);
}

static void dev_free(void *ctx, tensor *t) { cuda_tensor_free(ctx, t); }

static int dev_copy(void *ctx, const tensor *x, tensor *y) { return cuda_copy(ctx, x, y); }

static void dev_reset_peak(void *ctx) { cuda_alloc_reset_peak(C->alloc); }

static size_t dev_peak(void *ctx) {
    cuda_alloc_stats as;
    cuda_alloc_get_stats(C->alloc, &as);
    return as.peak_bytes;
}

// ---- the executor --------------------------------------------------------

static bool is_source(const graph *g, int id) { return op_kind(g->nodes[id].op) == OPK_SOURCE; }

void eager_cuda_set_step(eager_cuda *e, uint64_t step) { e->cx->step = step; }

int eager_cuda_upload_inputs(eager_cuda *e) {
    const graph *g = e->m->g;
    for (int i = 0; i < g->n; i++) {
        if (g->nodes[i].op != OP_INPUT || !e->src[i] || !e->m->values[i])
            continue;
        if (cuda_tensor_copy_in(e->cx, e->src[i], e->m->values[i]) < 0) {
            snprintf(e->err, sizeof e->err, "uploading input %%%d: %s", i, e->cx->err);
            return -1;
        }
    }
    return 0;
}

// The context: the share's, or the executor's own.
static int open_ctx(eager_cuda *e, const eager_cuda_opts *o, char *err, size_t cap) {
    if (o && o->share) {
        e->share = o->share;
        e->cx = cuda_share_ctx(o->share);
        return 0;
    }
    char why[400];
    int dev = cuda_device_index();
    if (cuda_probe_here(why, sizeof why) < 0) {
        snprintf(err, cap, "%s", why);
        return -1;
    }
    e->ctx_ok = true;
    e->cx = &e->c;
    if (cuda_ctx_init(&e->c, dev, o && o->allow_tf32) < 0) {
        snprintf(err, cap, "CUDA set-up: %s", e->c.err);
        return -1;
    }
    return 0;
}

// Source i on the device: the share's copy of a named weight or buffer, an
// input another executor passes (none yet), or an upload of its own.
static int open_source(eager_cuda *e, int i, char *err, size_t cap) {
    const model *m = e->m;
    const graph_node *n = &m->g->nodes[i];
    if (e->share && cuda_share_lends(m, i)) {
        e->lent[i] = true;
        return (e->src[i] = cuda_share_value(e->share, m, i, err, cap)) ? 0 : -1;
    }
    if (e->share && n->op == OP_INPUT && (!m->values || !m->values[i]))
        return 0; // eager_cuda_pass's, before each run
    if (!m->values || !m->values[i]) {
        snprintf(err, cap, "%s %%%d has no value: call model_init_values first", op_name(n->op), i);
        return -1;
    }
    if (!(e->src[i] = cuda_tensor_upload(e->cx, m->values[i]))) {
        snprintf(err, cap, "copying %s %%%d to the GPU: %s", op_name(n->op), i, e->cx->err);
        return -1;
    }
    return 0;
}

int eager_cuda_new(const model *m, const eager_cuda_opts *o, eager_cuda **out, char *err,
                   size_t cap) {
    *out = NULL;
    eager_cuda *e = calloc(1, sizeof *e);
    if (!e) {
        snprintf(err, cap, "out of host memory");
        return -1;
    }
    e->m = m;
    // TCBENCH_PROFILE=eager: the host's time an op, which on the GPU is
    // the launch's (the kernels run behind it), printed by eager_cuda_free
    int walk_rc = eager_walk_init(&e->walk, m->g, eager_profile_env());
    size_t n = (size_t)(m->g->n ? m->g->n : 1);
    e->src = calloc(n, sizeof *e->src);
    e->lent = calloc(n, sizeof *e->lent);
    e->passed = calloc(n, sizeof *e->passed);
    // a training graph's outputs: the loss and one gradient per parameter
    e->outs = calloc((size_t)(m->g->noutputs ? m->g->noutputs : 1), sizeof *e->outs);
    if (walk_rc < 0 || !e->src || !e->lent || !e->passed || !e->outs) {
        eager_cuda_free(e);
        snprintf(err, cap, "out of host memory");
        return -1;
    }
    if (open_ctx(e, o, err, cap) < 0) { // no GPU: the driver's reason first
        eager_cuda_free(e);
        return -1;
    }
    for (int i = 0; i < m->g->n; i++)
        if (m->g->nodes[i].dtype == DT_BF16) {
            snprintf(err, cap,
                     "eager CUDA: bf16 is not supported by the CUDA backend (f32 and "
                     "f16 are; run --amp-dtype bf16 on the CPU)");
            eager_cuda_free(e);
            return -1;
        }
    e->dev = (eager_device){.name = "cuda",
                            .ctx = e->cx,
                            .kernels = ec_kernels,
                            .alloc = dev_alloc,
                            .free = dev_free,
                            .copy = dev_copy,
                            .reset_peak = dev_reset_peak,
                            .peak_bytes = dev_peak,
                            .launched = &e->cx->kernels,
                            .err = e->cx->err};
    // parameters, buffers, constants and inputs: a framework's module.cuda()
    for (int i = 0; i < m->g->n; i++)
        if (is_source(m->g, i) && open_source(e, i, err, cap) < 0) {
            eager_cuda_free(e);
            return -1;
        }
    *out = e;
    return 0;
}

static void release_outs(eager_cuda *e) {
    for (int k = 0; k < e->m->g->noutputs; k++) {
        cuda_tensor_free(e->cx, e->outs[k]);
        e->outs[k] = NULL;
    }
}

void eager_cuda_free(eager_cuda *e) {
    if (!e)
        return;
    if (e->cx) {
        if (e->outs)
            release_outs(e);
        if (e->src)
            for (int i = 0; i < e->m->g->n; i++)
                if (!e->lent[i])
                    cuda_tensor_free(e->cx, e->src[i]);
    }
    if (e->ctx_ok)
        cuda_ctx_free(&e->c);
    eager_walk_free(&e->walk);
    free(e->src);
    free(e->lent);
    free(e->passed);
    free(e->outs);
    free(e);
}

const char *eager_cuda_error(const eager_cuda *e) { return e->err; }
void *eager_cuda_stream(const eager_cuda *e) { return (void *)e->cx->stream; }

// A shared executor's inputs: m->values sent before the step (as the CPU's
// executors read them), the passed ones checked to be there.
static int send_inputs(eager_cuda *e) {
    const graph *g = e->m->g;
    for (int i = 0; i < g->n; i++) {
        if (g->nodes[i].op != OP_INPUT || e->passed[i])
            continue;
        if (!e->src[i]) {
            snprintf(e->err, sizeof e->err,
                     "input %%%d (%s) has no value on the device: pass it from the step before", i,
                     g->nodes[i].name ? g->nodes[i].name : "unnamed");
            return -1;
        }
        if (e->m->values[i] &&
            cuda_share_send(e->cx, e->src[i], e->m->values[i], e->err, sizeof e->err) < 0)
            return -1;
    }
    return 0;
}

int eager_cuda_run(eager_cuda *e, eager_stats *st) {
    e->err[0] = 0;
    release_outs(e);
    if (e->share && send_inputs(e) < 0)
        return -1;
    int rc = eager_walk_step(&e->walk, &e->dev, e->src, e->outs, st, e->err, sizeof e->err);
    // a passed input serves one step (as the CPU frees a step's past after it)
    for (int i = 0; e->share && i < e->m->g->n; i++)
        if (e->passed[i]) {
            cuda_tensor_free(e->cx, e->src[i]);
            e->src[i] = NULL;
            e->passed[i] = false;
        }
    return rc;
}

int eager_cuda_pass(eager_cuda *from, int k, eager_cuda *to, int input) {
    if (!from->share || from->share != to->share || k < 0 || k >= from->m->g->noutputs ||
        input < 0 || input >= to->m->g->n || to->m->g->nodes[input].op != OP_INPUT ||
        !from->outs[k]) {
        snprintf(to->err, sizeof to->err,
                 "eager_cuda_pass: output %d to input %%%d needs two executors of one share, "
                 "a step run and an input node",
                 k, input);
        return -1;
    }
    const graph_node *n = &to->m->g->nodes[input];
    const tensor *t = from->outs[k];
    if (t->dtype != n->dtype || t->ndim != n->ndim ||
        memcmp(t->shape, n->shape, (size_t)n->ndim * sizeof *n->shape)) {
        snprintf(to->err, sizeof to->err, "eager_cuda_pass: output %d's shape is not input %%%d's",
                 k, input);
        return -1;
    }
    cuda_tensor_free(to->cx, to->src[input]);
    to->src[input] = from->outs[k]; // the reference moves: `from` no longer holds it
    from->outs[k] = NULL;
    to->passed[input] = true;
    return 0;
}

int eager_cuda_output(eager_cuda *e, int k, tensor **out) {
    if (!out) { // dropped: a shared executor's device tensor goes back to the allocator
        if (e->share && k >= 0 && k < e->m->g->noutputs) {
            cuda_tensor_free(e->cx, e->outs[k]);
            e->outs[k] = NULL;
        }
        return 0;
    }
    *out = NULL;
    if (eager_cuda_sync(e) < 0)
        return -1;
    if (k < 0 || k >= e->m->g->noutputs || !e->outs[k] ||
        !(*out = cuda_tensor_download(e->cx, e->outs[k]))) {
        snprintf(e->err, sizeof e->err, "output %d: %s", k,
                 k >= 0 && k < e->m->g->noutputs && e->outs[k] ? e->cx->err
                                                               : "no step has made it");
        return -1;
    }
    if (e->share) { // copied: the step holds nothing on the device past its run
        cuda_tensor_free(e->cx, e->outs[k]);
        e->outs[k] = NULL;
    }
    return 0;
}

int eager_cuda_sync(eager_cuda *e) {
    if (cuda_ctx_sync(e->cx) < 0) {
        snprintf(e->err, sizeof e->err, "%s", e->cx->err);
        return -1;
    }
    return 0;
}

int eager_cuda_outputs(eager_cuda *e, tensor **outputs) {
    const graph *g = e->m->g;
    for (int k = 0; k < g->noutputs; k++)
        outputs[k] = NULL;
    if (eager_cuda_sync(e) < 0)
        return -1;
    for (int k = 0; k < g->noutputs; k++) {
        if (!e->outs[k] || !(outputs[k] = cuda_tensor_download(e->cx, e->outs[k]))) {
            snprintf(e->err, sizeof e->err, "output %d: %s", k,
                     e->outs[k] ? e->cx->err : "no step has run");
            for (int j = 0; j < k; j++) {
                tensor_free(outputs[j]);
                outputs[j] = NULL;
            }
            return -1;
        }
    }
    return 0;
}
