// The eager executors' one graph walk (eager_internal.h): one kernel per
// computing op through a device's table, views and sources free, each
// intermediate returned to the device's allocator after its last use.
#include "eager_internal.h"

#include "base/clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

eager_profile eager_profile_env(void) {
    const char *pf = getenv("TCBENCH_PROFILE");
    return !pf || !strstr(pf, "eager") ? EAGER_PROFILE_OFF
           : strstr(pf, "eager-nodes") ? EAGER_PROFILE_NODES
                                       : EAGER_PROFILE_OPS;
}

int eager_walk_init(eager_walk *w, const graph *g, eager_profile profile) {
    memset(w, 0, sizeof *w);
    w->g = g;
    size_t n = (size_t)(g->n ? g->n : 1);
    w->uses = graph_use_counts(g);
    w->left = calloc(n, sizeof *w->left);
    w->vals = calloc(n, sizeof *w->vals);
    if (profile != EAGER_PROFILE_OFF)
        w->prof = calloc(OP_COUNT, sizeof *w->prof);
    if (profile == EAGER_PROFILE_NODES)
        w->prof_node = calloc(n, sizeof *w->prof_node);
    if (!w->uses || !w->left || !w->vals || (profile != EAGER_PROFILE_OFF && !w->prof) ||
        (profile == EAGER_PROFILE_NODES && !w->prof_node)) {
        eager_walk_free(w);
        return -1;
    }
    return 0;
}

// The steps the profile timed (eager_walk_step: all but the first), at least 1.
static double prof_timed(const eager_walk *w) {
    return w->prof_steps > 1 ? (double)(w->prof_steps - 1) : 1.0;
}

// TCBENCH_PROFILE=eager-nodes: each computing node's time and shape, in
// graph order
static void print_profile_nodes(const eager_walk *w) {
    double runs = prof_timed(w);
    for (int i = 0; i < w->g->n; i++) {
        const graph_node *n = &w->g->nodes[i];
        if (w->prof_node[i] <= 0 || op_kind(n->op) == OPK_SOURCE || op_kind(n->op) == OPK_VIEW)
            continue;
        char shape[96];
        graph_shape_str(n->ndim, n->shape, shape, sizeof shape);
        fprintf(stderr, "eager profile: node %5d %-14s %8.4f ms  %s %s\n", i, op_name(n->op),
                w->prof_node[i] * 1e3 / runs, dtype_name(n->dtype), shape);
    }
}

void eager_walk_free(eager_walk *w) {
    if (w->prof_node)
        print_profile_nodes(w);
    if (w->prof) {
        for (int o = 0; o < OP_COUNT; o++)
            if (w->prof[o] > 0)
                fprintf(stderr, "eager profile: %-20s %8.4f ms a step\n", op_name((enum op)o),
                        w->prof[o] * 1e3 / prof_timed(w));
    }
    free(w->uses);
    free(w->left);
    free(w->vals);
    free(w->prof);
    free(w->prof_node);
    memset(w, 0, sizeof *w);
}

static bool is_source(const graph *g, int id) { return op_kind(g->nodes[id].op) == OPK_SOURCE; }

// Returns node id's value to the device (never a borrowed source's).
static void release(eager_walk *w, const eager_device *d, int id) {
    if (!is_source(w->g, id))
        d->free(d->ctx, w->vals[id]);
    w->vals[id] = NULL;
}

static void release_all(eager_walk *w, const eager_device *d) {
    for (int i = 0; i < w->g->n; i++)
        release(w, d, i);
}

// The walker's own failures name themselves in why; an empty why means
// the device's error message.
static int host_view(const graph_node *n, tensor *v, tensor **out, char *why, size_t cap) {
    *out = v;
    if (!v) {
        snprintf(why, cap, "out of host memory making a %s view", op_name(n->op));
        return -1;
    }
    return 0;
}

// n's kernel on d, or NULL with why set
static eager_kernel_fn kernel_of(const eager_device *d, const graph_node *n, char *why,
                                 size_t cap) {
    eager_kernel_fn fn = d->kernels[n->op];
    if (!fn)
        snprintf(why, cap, "no %s kernel for %s", d->name, op_name(n->op));
    return fn;
}

// Allocates n's output and runs n's kernel into it.
static int launch(const eager_device *d, const graph_node *n, tensor *const *s, tensor **out,
                  char *why, size_t cap) {
    eager_kernel_fn fn = kernel_of(d, n, why, cap);
    if (!fn)
        return -1;
    tensor *y = d->alloc(d->ctx, n, n->ndim, n->shape);
    if (!y)
        return -1;
    if (fn(d->ctx, n, s, y) < 0) {
        d->free(d->ctx, y);
        return -1;
    }
    *out = y;
    return 0;
}

// A copy when the strides cannot express the new shape (a permuted input),
// as torch.reshape falls back to one.
static int reshape(const eager_device *d, const graph_node *n, const tensor *x, tensor **out) {
    tensor *v = tensor_reshape(x, n->ndim, n->shape);
    if (v) {
        *out = v;
        return 0;
    }
    tensor *y = d->alloc(d->ctx, n, x->ndim, x->shape);
    if (!y)
        return -1;
    if (d->copy(d->ctx, x, y) < 0) {
        d->free(d->ctx, y);
        return -1;
    }
    // the copy is contiguous, so the new shape is just a relabeling
    y->ndim = n->ndim;
    memcpy(y->shape, n->shape, sizeof y->shape);
    tensor_strides_contiguous(y->ndim, y->shape, y->stride);
    *out = y;
    return 0;
}

static int view(const eager_device *d, const graph_node *n, tensor *const *s, tensor **out,
                char *why, size_t cap) {
    int perm[TENSOR_MAX_DIMS];
    switch (n->op) {
    case OP_RESHAPE: return reshape(d, n, s[0], out);
    case OP_PERMUTE:
        for (int i = 0; i < n->ndim; i++)
            perm[i] = (int)n->ia[i];
        return host_view(n, tensor_permute(s[0], perm), out, why, cap);
    case OP_SLICE: {
        int ax = (int)n->ia[0];
        return host_view(n, tensor_slice(s[0], ax, n->ia[1], n->shape[ax]), out, why, cap);
    }
    case OP_EXPAND: return host_view(n, tensor_expand(s[0], n->ndim, n->shape), out, why, cap);
    default: snprintf(why, cap, "no view rule for %s (eager/walk.c)", op_name(n->op)); return -1;
    }
}

// Sets *out to node id's value.
static int node_run(const eager_walk *w, const eager_device *d, tensor *const *sources, int id,
                    tensor *const *s, tensor **out, char *why, size_t cap) {
    const graph_node *n = &w->g->nodes[id];
    switch (op_kind(n->op)) {
    case OPK_SOURCE:
        *out = sources ? sources[id] : NULL;
        if (!*out) {
            snprintf(why, cap, "%s %%%d has no value: call model_init_values first", op_name(n->op),
                     id);
            return -1;
        }
        return 0;
    case OPK_VIEW: return view(d, n, s, out, why, cap);
    case OPK_UPDATE: { // writes src0 (and its state) in place; the value is src0
        eager_kernel_fn fn = kernel_of(d, n, why, cap);
        if (!fn || fn(d->ctx, n, s, NULL) < 0)
            return -1;
        return host_view(n, tensor_view(s[0]), out, why, cap);
    }
    default:
        // already contiguous: the input itself, as torch's .contiguous()
        if (n->op == OP_CONTIGUOUS && tensor_is_contiguous(s[0]))
            return host_view(n, tensor_view(s[0]), out, why, cap);
        return launch(d, n, s, out, why, cap);
    }
}

int eager_walk_step(eager_walk *w, const eager_device *d, tensor *const *sources, tensor **outs,
                    eager_stats *st, char *err, size_t cap) {
    const graph *g = w->g;
    for (int k = 0; k < g->noutputs; k++)
        outs[k] = NULL;
    // the first step makes the libraries' plans (cuDNN's heuristics, oneDNN's
    // primitives) and the allocator's first blocks: it is left out, so that
    // the profile is what a measured step spends
    bool timed = w->prof && w->prof_steps++ > 0;
    d->reset_peak(d->ctx);
    *d->launched = 0;
    int64_t casts = 0;
    memcpy(w->left, w->uses, (size_t)g->n * sizeof *w->left);
    for (int i = 0; i < g->n; i++) {
        const graph_node *n = &g->nodes[i];
        tensor *s[GRAPH_MAX_SRCS];
        for (int j = 0; j < n->nsrc; j++)
            s[j] = w->vals[n->src[j]];
        char why[160] = "";
        double t0 = timed ? base_now() : 0;
        int rc = node_run(w, d, sources, i, s, &w->vals[i], why, sizeof why);
        if (timed) {
            double dt = base_now() - t0;
            w->prof[n->op] += dt;
            if (w->prof_node)
                w->prof_node[i] += dt;
        }
        if (rc < 0) {
            snprintf(err, cap, "%%%d %s: %s", i, op_name(n->op), why[0] ? why : d->err);
            release_all(w, d);
            return -1;
        }
        // one kernel each: the graph makes no no-op casts (graph_cast)
        casts += n->op == OP_CAST;
        for (int j = 0; j < n->nsrc; j++)
            if (--w->left[n->src[j]] == 0)
                release(w, d, n->src[j]);
        // nothing reads it: an eager framework computes it all the same
        if (w->left[i] == 0)
            release(w, d, i);
    }
    for (int k = 0; k < g->noutputs; k++) {
        outs[k] = tensor_view(w->vals[g->outputs[k]]);
        if (!outs[k]) {
            snprintf(err, cap, "out of host memory returning output %d", k);
            for (int j = 0; j < k; j++) {
                d->free(d->ctx, outs[j]);
                outs[j] = NULL;
            }
            release_all(w, d);
            return -1;
        }
    }
    release_all(w, d);
    if (st) {
        st->kernels = *d->launched;
        st->cast_kernels = casts;
        st->peak_bytes = d->peak_bytes(d->ctx);
    }
    return 0;
}
