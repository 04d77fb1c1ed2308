// The eager executor (eager.h): walks the graph in order, one kernel per op,
// a fresh output per op, each intermediate freed right after its last
// consumer, as PyTorch's eager mode with its caching allocator turned into
// plain aligned allocations. The kernels live in engine/backend/cpu.
#include "eager.h"

#include "backend/cpu/cpu_kernels.h"
#include "core/pointwise.h"

#include <assert.h>
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct eager {
    const model *m;
    int *uses;     // consumers of each node (+1 for outputs and the loss)
    int *left;     // the step's countdown of uses
    tensor **vals; // the step's value of each node (sources: borrowed)
    cpu_ctx cpu;
    double *prof;      // TCBENCH_PROFILE=eager: seconds per op, printed by eager_free
    int64_t prof_runs; // the steps they add up
    char err[320];
};

// One function per op, named eager_<op> after ops.def: it sets *out to the
// node's value given its inputs' values s[]. Computing ops allocate *out.
typedef int (*eager_fn)(eager *e, const graph_node *n, tensor *const *s, tensor **out);

#define OP(U, l, k, a0, a1)                                                                        \
    static int eager_##l(eager *e, const graph_node *n, tensor *const *s, tensor **out);
#include "core/ops.def"
#undef OP

static const eager_fn eager_table[] = {
#define OP(U, l, k, a0, a1) [OP_##U] = eager_##l,
#include "core/ops.def"
#undef OP
};
static_assert(sizeof eager_table / sizeof eager_table[0] == OP_COUNT,
              "ops.def: every op needs an eager_<name> function in eager.c");

static int node_id(const eager *e, const graph_node *n) { return (int)(n - e->m->g->nodes); }

// ---- sources: values set up by model_init_values, borrowed ---------------

static int source(eager *e, const graph_node *n, tensor **out) {
    int id = node_id(e, n);
    *out = e->m->values ? e->m->values[id] : NULL;
    if (!*out)
        return cpu_fail(&e->cpu, "%s %%%d has no value: call model_init_values first",
                        op_name(n->op), id);
    return 0;
}

#define EAGER_SOURCE(l)                                                                            \
    static int eager_##l(eager *e, const graph_node *n, tensor *const *s, tensor **out) {          \
        (void)s;                                                                                   \
        return source(e, n, out);                                                                  \
    }
EAGER_SOURCE(input)
EAGER_SOURCE(param)
EAGER_SOURCE(buffer)
EAGER_SOURCE(full)

// ---- computing ops: allocate the output, run one kernel ------------------

static int out_new(eager *e, const graph_node *n, tensor **out) {
    *out = tensor_new_empty(n->dtype, n->ndim, n->shape);
    if (!*out)
        return cpu_fail(&e->cpu, "out of memory allocating %zu bytes for %s", graph_node_bytes(n),
                        op_name(n->op));
    return 0;
}

// Defines eager_<l>: allocate *out, run `call` (which may use e, n, s, y),
// free *out again if the kernel fails.
#define EAGER_KERNEL(l, call)                                                                      \
    static int eager_##l(eager *e, const graph_node *n, tensor *const *s, tensor **out) {          \
        (void)s;                                                                                   \
        if (out_new(e, n, out) < 0)                                                                \
            return -1;                                                                             \
        tensor *y = *out;                                                                          \
        if ((call) < 0) {                                                                          \
            tensor_free(y);                                                                        \
            *out = NULL;                                                                           \
            return -1;                                                                             \
        }                                                                                          \
        return 0;                                                                                  \
    }

#define UNARY(l)        EAGER_KERNEL(l, cpu_unary(&e->cpu, n, s[0], y))
#define X(U, l, a0, b0) UNARY(l)
TC_POINTWISE_OPS(X) // core/pointwise.h
#undef X
UNARY(cast)
UNARY(dropout)
#undef UNARY

#define BINARY(l) EAGER_KERNEL(l, cpu_binary(&e->cpu, n, s[0], s[1], y))
BINARY(add)
BINARY(sub)
BINARY(mul)
BINARY(div)
BINARY(maximum)
#undef BINARY

// the optional last input (bias) of linear and the convolutions
#define OPT(k) (n->nsrc > (k) ? s[k] : NULL)
#define CPU    (&e->cpu)

EAGER_KERNEL(where, cpu_where(CPU, s[0], s[1], s[2], y))
EAGER_KERNEL(sum, cpu_reduce(CPU, n, s[0], y))
EAGER_KERNEL(mean, cpu_reduce(CPU, n, s[0], y))
EAGER_KERNEL(max, cpu_reduce(CPU, n, s[0], y))
EAGER_KERNEL(softmax, cpu_softmax(CPU, s[0], false, y))
EAGER_KERNEL(log_softmax, cpu_softmax(CPU, s[0], true, y))
EAGER_KERNEL(layer_norm, cpu_layer_norm(CPU, s[0], s[1], s[2], n->fa[0], y))
EAGER_KERNEL(rms_norm, cpu_rms_norm(CPU, s[0], s[1], n->fa[0], y))
// training mode (ia0 1) normalizes with batch statistics and updates the
// running ones in the model's buffers
EAGER_KERNEL(batch_norm, n->ia[0] ? cpu_batch_norm_train(CPU, s[0], s[1], s[2], s[3], s[4],
                                                         n->fa[0], n->fa[1], y)
                                  : cpu_batch_norm(CPU, s[0], s[1], s[2], s[3], s[4], n->fa[0], y))
EAGER_KERNEL(group_norm, cpu_group_norm(CPU, s[0], s[1], s[2], n->ia[0], n->fa[0], y))
EAGER_KERNEL(matmul, cpu_matmul(CPU, s[0], s[1], y))
EAGER_KERNEL(linear, cpu_linear(CPU, s[0], s[1], OPT(2), y))
EAGER_KERNEL(conv2d, cpu_conv2d(CPU, n, s[0], s[1], OPT(2), y))
EAGER_KERNEL(conv_transpose2d, cpu_conv2d(CPU, n, s[0], s[1], OPT(2), y))
EAGER_KERNEL(max_pool2d, cpu_pool2d(CPU, n, s[0], y))
EAGER_KERNEL(avg_pool2d, cpu_pool2d(CPU, n, s[0], y))
EAGER_KERNEL(upsample_nearest, cpu_upsample_nearest(CPU, s[0], n->ia[0], y))
EAGER_KERNEL(embedding, cpu_embedding(CPU, s[0], s[1], y))
EAGER_KERNEL(concat, cpu_concat(CPU, (int)n->ia[0], n->nsrc, (const tensor *const *)s, y))
EAGER_KERNEL(cross_entropy, cpu_cross_entropy(CPU, s[0], s[1], n->ia[0], y))
EAGER_KERNEL(mse_loss, cpu_mse_loss(CPU, s[0], s[1], y))
EAGER_KERNEL(ge, cpu_binary(CPU, n, s[0], s[1], y))

// ---- backward ops (training) -----------------------------------------------

EAGER_KERNEL(act_grad, cpu_act_grad(CPU, n, s[0], s[1], y))
EAGER_KERNEL(sum_to, cpu_sum_to(CPU, s[0], y))
EAGER_KERNEL(softmax_grad, cpu_softmax_grad(CPU, s[0], s[1], false, y))
EAGER_KERNEL(log_softmax_grad, cpu_softmax_grad(CPU, s[0], s[1], true, y))
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
EAGER_KERNEL(cross_entropy_grad, cpu_cross_entropy_grad(CPU, n, s[0], s[1], s[2], y))
EAGER_KERNEL(mse_loss_grad, cpu_mse_loss_grad(CPU, s[0], s[1], s[2], y))

// ---- views: share storage, launch nothing --------------------------------

static int view_done(eager *e, const graph_node *n, tensor *v, tensor **out) {
    *out = v;
    if (!v)
        return cpu_fail(&e->cpu, "out of memory making a %s view", op_name(n->op));
    return 0;
}

// A copy when the strides cannot express the new shape (a permuted input),
// as torch.reshape falls back to one.
static int eager_reshape(eager *e, const graph_node *n, tensor *const *s, tensor **out) {
    tensor *v = tensor_reshape(s[0], n->ndim, n->shape);
    if (v)
        return view_done(e, n, v, out);
    tensor *y = tensor_new_empty(n->dtype, s[0]->ndim, s[0]->shape);
    if (!y)
        return cpu_fail(&e->cpu, "out of memory allocating %zu bytes for reshape",
                        graph_node_bytes(n));
    cpu_copy(&e->cpu, s[0], y);
    // the copy is contiguous, so the new shape is just a relabeling
    y->ndim = n->ndim;
    memcpy(y->shape, n->shape, sizeof y->shape);
    tensor_strides_contiguous(y->ndim, y->shape, y->stride);
    *out = y;
    return 0;
}

static int eager_permute(eager *e, const graph_node *n, tensor *const *s, tensor **out) {
    int perm[TENSOR_MAX_DIMS];
    for (int i = 0; i < n->ndim; i++)
        perm[i] = (int)n->ia[i];
    return view_done(e, n, tensor_permute(s[0], perm), out);
}

static int eager_slice(eager *e, const graph_node *n, tensor *const *s, tensor **out) {
    int ax = (int)n->ia[0];
    return view_done(e, n, tensor_slice(s[0], ax, n->ia[1], n->shape[ax]), out);
}

static int eager_expand(eager *e, const graph_node *n, tensor *const *s, tensor **out) {
    return view_done(e, n, tensor_expand(s[0], n->ndim, n->shape), out);
}

// Already contiguous: the input itself, as torch's .contiguous().
static int eager_contiguous(eager *e, const graph_node *n, tensor *const *s, tensor **out) {
    if (tensor_is_contiguous(s[0]))
        return view_done(e, n, tensor_view(s[0]), out);
    if (out_new(e, n, out) < 0)
        return -1;
    return cpu_copy(&e->cpu, s[0], *out);
}

// ---- updates: write the model's own tensors (borrowed sources) in place ----

// The node's value is src0 itself, a new view of it; nothing is allocated.
#define EAGER_UPDATE(l, call)                                                                      \
    static int eager_##l(eager *e, const graph_node *n, tensor *const *s, tensor **out) {          \
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

EAGER_UPDATE(sgd, cpu_sgd(CPU, n, s[0], s[1], sgd_buffer(n, s), SCALER))
EAGER_UPDATE(adamw, cpu_adamw(CPU, n, s[0], s[1], s[2], s[3], SCALER))
EAGER_UPDATE(running_stat, cpu_running_stat(CPU, n, s[0], s[1]))
EAGER_UPDATE(scaler_update, cpu_scaler_update(CPU, n, s[0], s[1], s[2], s[3]))
EAGER_KERNEL(found_inf, cpu_found_inf(CPU, n, (const tensor *const *)s, y))

// ---- the executor --------------------------------------------------------

eager *eager_new(const model *m) {
    eager *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->m = m;
    e->cpu.step = 1;
    int n = m->g->n;
    e->uses = graph_use_counts(m->g);
    e->left = calloc((size_t)(n ? n : 1), sizeof *e->left);
    e->vals = calloc((size_t)(n ? n : 1), sizeof *e->vals);
    if (!e->uses || !e->left || !e->vals) {
        eager_free(e);
        return NULL;
    }
    const char *pf = getenv("TCBENCH_PROFILE");
    if (pf && strstr(pf, "eager"))
        e->prof = calloc(OP_COUNT, sizeof *e->prof);
    // set-up failures are reported by the first eager_run
    char err[256];
    if (cpu_dnnl_new(&e->cpu.dnnl, err, sizeof err) < 0)
        snprintf(e->err, sizeof e->err, "oneDNN set-up: %s", err);
    return e;
}

void eager_free(eager *e) {
    if (!e)
        return;
    if (e->prof) {
        for (int o = 0; o < OP_COUNT; o++)
            if (e->prof[o] > 0)
                fprintf(stderr, "eager profile: %-20s %8.4f ms a step\n", op_name((enum op)o),
                        e->prof[o] * 1e3 / (double)(e->prof_runs ? e->prof_runs : 1));
        free(e->prof);
    }
    cpu_dnnl_free(e->cpu.dnnl);
    free(e->uses);
    free(e->left);
    free(e->vals);
    free(e);
}

const char *eager_error(const eager *e) { return e->err; }

void eager_set_step(eager *e, uint64_t step) { e->cpu.step = step; }

static bool is_source(const graph *g, int id) { return op_kind(g->nodes[id].op) == OPK_SOURCE; }

// Releases the step's own references (never the borrowed sources).
static void release_all(eager *e) {
    const graph *g = e->m->g;
    for (int i = 0; i < g->n; i++) {
        if (!is_source(g, i))
            tensor_free(e->vals[i]);
        e->vals[i] = NULL;
    }
}

int eager_run(eager *e, tensor **outputs, eager_stats *st) {
    const graph *g = e->m->g;
    for (int k = 0; k < g->noutputs; k++)
        outputs[k] = NULL;
    if (e->err[0] && !e->cpu.dnnl)
        return -1;
    e->err[0] = 0;
    e->prof_runs += e->prof != NULL;
    tensor_mem_reset_peak();
    e->cpu.kernels = 0;
    memcpy(e->left, e->uses, (size_t)g->n * sizeof *e->left);
    for (int i = 0; i < g->n; i++) {
        const graph_node *n = &g->nodes[i];
        tensor *s[GRAPH_MAX_SRCS];
        for (int j = 0; j < n->nsrc; j++)
            s[j] = e->vals[n->src[j]];
        double t0 = e->prof ? omp_get_wtime() : 0;
        int rc = eager_table[n->op](e, n, s, &e->vals[i]);
        if (e->prof)
            e->prof[n->op] += omp_get_wtime() - t0;
        if (rc < 0) {
            snprintf(e->err, sizeof e->err, "%%%d %s: %s", i, op_name(n->op), e->cpu.err);
            release_all(e);
            return -1;
        }
        for (int j = 0; j < n->nsrc; j++) {
            int p = n->src[j];
            if (--e->left[p] == 0 && !is_source(g, p)) {
                tensor_free(e->vals[p]);
                e->vals[p] = NULL;
            }
        }
        // nothing reads it: an eager framework computes it all the same
        if (e->left[i] == 0 && !is_source(g, i)) {
            tensor_free(e->vals[i]);
            e->vals[i] = NULL;
        }
    }
    for (int k = 0; k < g->noutputs; k++) {
        outputs[k] = tensor_view(e->vals[g->outputs[k]]);
        if (!outputs[k]) {
            snprintf(e->err, sizeof e->err, "out of memory returning output %d", k);
            for (int j = 0; j < k; j++) {
                tensor_free(outputs[j]);
                outputs[j] = NULL;
            }
            release_all(e);
            return -1;
        }
    }
    release_all(e);
    if (st) {
        st->kernels = e->cpu.kernels;
        st->cast_kernels = 0;
        for (int i = 0; i < g->n; i++) // one kernel each (graph_cast makes no no-op casts)
            st->cast_kernels += g->nodes[i].op == OP_CAST;
        st->peak_bytes = tensor_mem_peak();
    }
    return 0;
}
