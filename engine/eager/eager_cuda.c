// The CUDA eager executor (eager_cuda.h): eager.c's walk over the graph,
// one kernel per op on one stream, outputs from the caching allocator. The
// kernels live in engine/backend/cuda.
#include "eager_cuda.h"

#include "backend/cuda/cuda_rt.h"
#include "core/pointwise.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct eager_cuda {
    const model *m;
    cuda_ctx c;
    bool ctx_ok;
    int *uses;     // consumers of each node (+1 for outputs and the loss)
    int *left;     // the step's countdown of uses
    tensor **src;  // device copies of the source nodes (owned)
    tensor **vals; // the step's value of each node (sources: borrowed from src)
    tensor **outs; // the last step's g->noutputs outputs (a reference each)
    char err[512];
};

typedef int (*ec_fn)(eager_cuda *e, const graph_node *n, tensor *const *s, tensor **out);

#define OP(U, l, k, a0, a1)                                                                        \
    static int ec_##l(eager_cuda *e, const graph_node *n, tensor *const *s, tensor **out);
#include "core/ops.def"
#undef OP

static const ec_fn ec_table[] = {
#define OP(U, l, k, a0, a1) [OP_##U] = ec_##l,
#include "core/ops.def"
#undef OP
};
static_assert(sizeof ec_table / sizeof ec_table[0] == OP_COUNT,
              "ops.def: every op needs an ec_<name> function in eager_cuda.c");

static int node_id(const eager_cuda *e, const graph_node *n) { return (int)(n - e->m->g->nodes); }

static int ctx_fail(eager_cuda *e, const char *fmt, const char *what) {
    snprintf(e->c.err, sizeof e->c.err, fmt, what);
    return -1;
}

// ---- sources: copied to the device once, borrowed by every step ----------

static int source(eager_cuda *e, const graph_node *n, tensor **out) {
    *out = e->src[node_id(e, n)];
    return *out ? 0
                : ctx_fail(e, "%s has no device value: call model_init_values first",
                           op_name(n->op));
}

#define EC_SOURCE(l)                                                                               \
    static int ec_##l(eager_cuda *e, const graph_node *n, tensor *const *s, tensor **out) {        \
        (void)s;                                                                                   \
        return source(e, n, out);                                                                  \
    }
EC_SOURCE(input)
EC_SOURCE(param)
EC_SOURCE(buffer)
EC_SOURCE(full)

// ---- computing ops: allocate the output, run one kernel ------------------

#define C (&e->c)

#define EC_KERNEL(l, call)                                                                         \
    static int ec_##l(eager_cuda *e, const graph_node *n, tensor *const *s, tensor **out) {        \
        (void)s;                                                                                   \
        tensor *y = *out = cuda_tensor_new(C, n->dtype, n->ndim, n->shape);                        \
        if (!y)                                                                                    \
            return -1;                                                                             \
        if ((call) < 0) {                                                                          \
            cuda_tensor_free(C, y);                                                                \
            *out = NULL;                                                                           \
            return -1;                                                                             \
        }                                                                                          \
        return 0;                                                                                  \
    }

#define UNARY(l)        EC_KERNEL(l, cuda_unary(C, n, s[0], y))
#define X(U, l, a0, b0) UNARY(l)
TC_POINTWISE_OPS(X) // core/pointwise.h
#undef X
UNARY(cast)
UNARY(dropout)
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
EC_KERNEL(softmax, cuda_softmax(C, s[0], false, y))
EC_KERNEL(log_softmax, cuda_softmax(C, s[0], true, y))
EC_KERNEL(layer_norm, cuda_layer_norm(C, s[0], s[1], s[2], n->fa[0], y))
EC_KERNEL(rms_norm, cuda_layer_norm(C, s[0], s[1], NULL, n->fa[0], y))
// training mode (ia0 1) normalizes with the batch's statistics and updates
// the running ones in the model's buffers (device sources), as eager.c
EC_KERNEL(batch_norm,
          n->ia[0] ? cuda_batch_norm_train(C, s[0], s[1], s[2], s[3], s[4], n->fa[0], n->fa[1], y)
                   : cuda_batch_norm(C, s[0], s[1], s[2], s[3], s[4], n->fa[0], y))
EC_KERNEL(group_norm, cuda_group_norm(C, s[0], s[1], s[2], n->ia[0], n->fa[0], y))
EC_KERNEL(matmul, cuda_matmul(C, s[0], s[1], y))
EC_KERNEL(linear, cuda_linear(C, s[0], s[1], OPT(2), y))
EC_KERNEL(conv2d, cuda_conv2d(C, n, s[0], s[1], OPT(2), y))
EC_KERNEL(conv_transpose2d, cuda_conv2d(C, n, s[0], s[1], OPT(2), y))
EC_KERNEL(max_pool2d, cuda_pool2d(C, n, s[0], y))
EC_KERNEL(avg_pool2d, cuda_pool2d(C, n, s[0], y))
EC_KERNEL(upsample_nearest, cuda_upsample_nearest(C, s[0], n->ia[0], y))
EC_KERNEL(embedding, cuda_embedding(C, s[0], s[1], y))
EC_KERNEL(concat, cuda_concat(C, (int)n->ia[0], n->nsrc, (const tensor *const *)s, y))
EC_KERNEL(cross_entropy, cuda_cross_entropy(C, s[0], s[1], n->ia[0], y))
EC_KERNEL(mse_loss, cuda_mse_loss(C, s[0], s[1], y))

// a >= b into bool: the masks of max's and maximum's gradients
EC_KERNEL(ge, cuda_ge(C, s[0], s[1], y))

// ---- backward ops (training) -----------------------------------------------

EC_KERNEL(act_grad, cuda_act_grad(C, n, s[0], s[1], y))
EC_KERNEL(sum_to, cuda_sum_to(C, s[0], y))
EC_KERNEL(softmax_grad, cuda_softmax_grad(C, s[0], s[1], false, y))
EC_KERNEL(log_softmax_grad, cuda_softmax_grad(C, s[0], s[1], true, y))
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
EC_KERNEL(cross_entropy_grad, cuda_cross_entropy_grad(C, n, s[0], s[1], s[2], y))
EC_KERNEL(mse_loss_grad, cuda_mse_loss_grad(C, s[0], s[1], s[2], y))
EC_KERNEL(found_inf, cuda_found_inf(C, n, (const tensor *const *)s, y))

// ---- views: share storage, launch nothing --------------------------------

static int view_done(eager_cuda *e, const graph_node *n, tensor *v, tensor **out) {
    *out = v;
    return v ? 0 : ctx_fail(e, "out of host memory making a %s view", op_name(n->op));
}

// a copy when strides cannot express the new shape, as torch.reshape
static int ec_reshape(eager_cuda *e, const graph_node *n, tensor *const *s, tensor **out) {
    tensor *v = tensor_reshape(s[0], n->ndim, n->shape);
    if (v)
        return view_done(e, n, v, out);
    tensor *y = cuda_tensor_new(C, n->dtype, s[0]->ndim, s[0]->shape);
    if (!y)
        return -1;
    if (cuda_copy(C, s[0], y) < 0) {
        cuda_tensor_free(C, y);
        return -1;
    }
    y->ndim = n->ndim; // contiguous: the new shape is a relabeling
    memcpy(y->shape, n->shape, sizeof y->shape);
    tensor_strides_contiguous(y->ndim, y->shape, y->stride);
    *out = y;
    return 0;
}

static int ec_permute(eager_cuda *e, const graph_node *n, tensor *const *s, tensor **out) {
    int perm[TENSOR_MAX_DIMS];
    for (int i = 0; i < n->ndim; i++)
        perm[i] = (int)n->ia[i];
    return view_done(e, n, tensor_permute(s[0], perm), out);
}

static int ec_slice(eager_cuda *e, const graph_node *n, tensor *const *s, tensor **out) {
    int ax = (int)n->ia[0];
    return view_done(e, n, tensor_slice(s[0], ax, n->ia[1], n->shape[ax]), out);
}

static int ec_expand(eager_cuda *e, const graph_node *n, tensor *const *s, tensor **out) {
    return view_done(e, n, tensor_expand(s[0], n->ndim, n->shape), out);
}

static int ec_contiguous(eager_cuda *e, const graph_node *n, tensor *const *s, tensor **out) {
    (void)n;
    *out = cuda_contiguous(C, s[0]);
    return *out ? 0 : -1;
}

// ---- updates: write the model's own tensors (device sources) in place ----

// The node's value is src0 itself, a new view of it; nothing is allocated.
#define EC_UPDATE(l, call)                                                                         \
    static int ec_##l(eager_cuda *e, const graph_node *n, tensor *const *s, tensor **out) {        \
        if ((call) < 0)                                                                            \
            return -1;                                                                             \
        return view_done(e, n, tensor_view(s[0]), out);                                            \
    }

// the grad scaler's (scale, found_inf, step) of an SGD or ADAMW node, or NULL
#define SCALER (graph_scaler_src(n) >= 0 ? (const tensor *const *)s + graph_scaler_src(n) : NULL)

// SGD's momentum buffer: a third source before the grad scaler's, if any
static tensor *sgd_buffer(const graph_node *n, tensor *const *s) {
    return (graph_scaler_src(n) >= 0 ? graph_scaler_src(n) : n->nsrc) > 2 ? s[2] : NULL;
}

EC_UPDATE(sgd, cuda_sgd(C, n, s[0], s[1], sgd_buffer(n, s), SCALER))
EC_UPDATE(adamw, cuda_adamw(C, n, s[0], s[1], s[2], s[3], SCALER))
EC_UPDATE(running_stat, cuda_running_stat(C, n, s[0], s[1]))
EC_UPDATE(scaler_update, cuda_scaler_update(C, n, s[0], s[1], s[2], s[3]))

// ---- the executor --------------------------------------------------------

static bool is_source(const graph *g, int id) { return op_kind(g->nodes[id].op) == OPK_SOURCE; }

void eager_cuda_set_step(eager_cuda *e, uint64_t step) { e->c.step = step; }

int eager_cuda_upload_inputs(eager_cuda *e) {
    const graph *g = e->m->g;
    for (int i = 0; i < g->n; i++) {
        if (g->nodes[i].op != OP_INPUT || !e->src[i] || !e->m->values[i])
            continue;
        if (cuda_tensor_copy_in(C, e->src[i], e->m->values[i]) < 0) {
            snprintf(e->err, sizeof e->err, "uploading input %%%d: %s", i, e->c.err);
            return -1;
        }
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
    int n = m->g->n ? m->g->n : 1;
    e->uses = graph_use_counts(m->g);
    e->left = calloc((size_t)n, sizeof *e->left);
    e->src = calloc((size_t)n, sizeof *e->src);
    e->vals = calloc((size_t)n, sizeof *e->vals);
    // a training graph's outputs: the loss and one gradient per parameter
    e->outs = calloc((size_t)(m->g->noutputs ? m->g->noutputs : 1), sizeof *e->outs);
    if (!e->uses || !e->left || !e->src || !e->vals || !e->outs) {
        eager_cuda_free(e);
        snprintf(err, cap, "out of host memory");
        return -1;
    }
    char why[400];
    int dev = cuda_device_index();
    if (cuda_probe_here(why, sizeof why) < 0) {
        snprintf(err, cap, "%s", why);
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
    e->ctx_ok = true;
    if (cuda_ctx_init(C, dev, o && o->allow_tf32) < 0) {
        snprintf(err, cap, "CUDA set-up: %s", e->c.err);
        eager_cuda_free(e);
        return -1;
    }
    // parameters, buffers, constants and inputs: a framework's module.cuda()
    const graph *g = m->g;
    for (int i = 0; i < g->n; i++) {
        if (!is_source(g, i))
            continue;
        if (!m->values || !m->values[i]) {
            snprintf(err, cap, "%s %%%d has no value: call model_init_values first",
                     op_name(g->nodes[i].op), i);
            eager_cuda_free(e);
            return -1;
        }
        if (!(e->src[i] = cuda_tensor_upload(C, m->values[i]))) {
            snprintf(err, cap, "copying %s %%%d to the GPU: %s", op_name(g->nodes[i].op), i,
                     e->c.err);
            eager_cuda_free(e);
            return -1;
        }
    }
    *out = e;
    return 0;
}

static void release_outs(eager_cuda *e) {
    for (int k = 0; k < e->m->g->noutputs; k++) {
        cuda_tensor_free(C, e->outs[k]);
        e->outs[k] = NULL;
    }
}

// the step's own references (never the borrowed sources)
static void release_all(eager_cuda *e) {
    const graph *g = e->m->g;
    for (int i = 0; i < g->n; i++) {
        if (!is_source(g, i))
            cuda_tensor_free(C, e->vals[i]);
        e->vals[i] = NULL;
    }
}

void eager_cuda_free(eager_cuda *e) {
    if (!e)
        return;
    if (e->ctx_ok) {
        if (e->vals)
            release_all(e);
        if (e->outs)
            release_outs(e);
        if (e->src)
            for (int i = 0; i < e->m->g->n; i++)
                cuda_tensor_free(C, e->src[i]);
        cuda_ctx_free(C);
    }
    free(e->uses);
    free(e->left);
    free(e->src);
    free(e->vals);
    free(e->outs);
    free(e);
}

const char *eager_cuda_error(const eager_cuda *e) { return e->err; }
void *eager_cuda_stream(const eager_cuda *e) { return (void *)e->c.stream; }

int eager_cuda_run(eager_cuda *e, eager_stats *st) {
    const graph *g = e->m->g;
    e->err[0] = 0;
    release_outs(e);
    cuda_alloc_reset_peak(e->c.alloc);
    e->c.kernels = 0;
    memcpy(e->left, e->uses, (size_t)g->n * sizeof *e->left);
    for (int i = 0; i < g->n; i++) {
        const graph_node *n = &g->nodes[i];
        tensor *s[GRAPH_MAX_SRCS];
        for (int j = 0; j < n->nsrc; j++)
            s[j] = e->vals[n->src[j]];
        if (ec_table[n->op](e, n, s, &e->vals[i]) < 0) {
            snprintf(e->err, sizeof e->err, "%%%d %s: %s", i, op_name(n->op), e->c.err);
            release_all(e);
            return -1;
        }
        for (int j = 0; j < n->nsrc; j++) {
            int p = n->src[j];
            if (--e->left[p] == 0 && !is_source(g, p)) {
                cuda_tensor_free(C, e->vals[p]);
                e->vals[p] = NULL;
            }
        }
        if (e->left[i] == 0 && !is_source(g, i)) {
            cuda_tensor_free(C, e->vals[i]);
            e->vals[i] = NULL;
        }
    }
    for (int k = 0; k < g->noutputs; k++)
        if (!(e->outs[k] = tensor_view(e->vals[g->outputs[k]]))) {
            snprintf(e->err, sizeof e->err, "out of host memory returning output %d", k);
            release_outs(e);
            release_all(e);
            return -1;
        }
    release_all(e);
    if (st) {
        cuda_alloc_stats as;
        cuda_alloc_get_stats(e->c.alloc, &as);
        st->kernels = e->c.kernels;
        st->peak_bytes = as.peak_bytes;
    }
    return 0;
}

int eager_cuda_sync(eager_cuda *e) {
    if (cuda_ctx_sync(C) < 0) {
        snprintf(e->err, sizeof e->err, "%s", e->c.err);
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
        if (!e->outs[k] || !(outputs[k] = cuda_tensor_download(C, e->outs[k]))) {
            snprintf(e->err, sizeof e->err, "output %d: %s", k,
                     e->outs[k] ? e->c.err : "no step has run");
            for (int j = 0; j < k; j++) {
                tensor_free(outputs[j]);
                outputs[j] = NULL;
            }
            return -1;
        }
    }
    return 0;
}
