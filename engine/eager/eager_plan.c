// eager_plan_peak (eager.h): the eager walk (walk.c) over a device that
// allocates no memory and runs no kernel. Its tensors are storage-less
// wraps, so views, reshapes that strides cannot express and contiguous of a
// contiguous input take the very decisions a real step takes; its
// allocator counts each output as the CPU allocator counts it, and its
// free uncounts a buffer when the last view of it goes. With the CPU's
// allocator, the f32 scratch of f16 GEMMs (AMP) counts as well: live with
// the kernel's output while it runs.
#include "eager.h"
#include "eager_internal.h"

#include "backend/cpu/cpu_kernels.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct plan_dev {
    const graph *g;
    size_t (*round)(size_t bytes);
    size_t live, peak;
    int peak_node;
    int64_t launched;
    bool cpu_scratch; // the CPU kernels' f16 GEMM scratch (cpu_gemm_f16_scratch) counts
    char err[160];
} plan_dev;

static int plan_kernel(void *ctx, const graph_node *n, tensor *const *s, tensor *y) {
    plan_dev *d = ctx;
    d->launched++;
    bool gemm = n->op == OP_MATMUL || n->op == OP_LINEAR;
    if (d->cpu_scratch && gemm) {
        const tensor *bias = n->op == OP_LINEAR && n->nsrc > 2 ? s[2] : NULL;
        size_t live =
            d->live + cpu_gemm_f16_scratch(s[0], s[1], bias, n->op == OP_LINEAR, y, d->round);
        if (live > d->peak) {
            d->peak = live;
            d->peak_node = (int)(n - d->g->nodes);
        }
    }
    return 0;
}

static const eager_kernel_fn plan_kernels[OP_COUNT] = {
#define OP(U, l, k, a0, a1) [OP_##U] = EAGER_ENTRY(k, plan_kernel),
#include "core/ops.def"
#undef OP
};

// A wrap over no memory whose storage records the bytes it counts for.
static tensor *plan_wrap(plan_dev *d, enum dtype dt, int ndim, const int64_t *shape) {
    tensor *t = tensor_wrap(dt, ndim, shape, NULL);
    if (!t) {
        snprintf(d->err, sizeof d->err, "out of host memory planning");
        return NULL;
    }
    t->storage->bytes = d->round(t->storage->bytes);
    return t;
}

static tensor *plan_alloc(void *ctx, const graph_node *n, int ndim, const int64_t *shape) {
    plan_dev *d = ctx;
    tensor *t = plan_wrap(d, n->dtype, ndim, shape);
    if (!t)
        return NULL;
    d->live += t->storage->bytes;
    if (d->live > d->peak) {
        d->peak = d->live;
        d->peak_node = (int)(n - d->g->nodes);
    }
    return t;
}

// Sources are never passed here by the walk and always hold a reference of
// their own, so a last reference is always an allocated buffer's.
static void plan_free(void *ctx, tensor *t) {
    if (t && t->storage->refs == 1)
        ((plan_dev *)ctx)->live -= t->storage->bytes;
    tensor_free(t);
}

static int plan_copy(void *ctx, const tensor *x, tensor *y) {
    (void)x, (void)y;
    ((plan_dev *)ctx)->launched++;
    return 0;
}

static void plan_reset_peak(void *ctx) {
    plan_dev *d = ctx;
    d->peak = d->live;
    d->peak_node = -1;
}

static size_t plan_peak(void *ctx) { return ((plan_dev *)ctx)->peak; }

static int plan_peak_of(const graph *g, size_t (*round)(size_t bytes), bool cpu_scratch,
                        eager_plan_figures *out, char *err, size_t cap);

int eager_plan_peak(const graph *g, eager_plan_figures *out, char *err, size_t cap) {
    return plan_peak_of(g, tensor_mem_round, true, out, err, cap);
}

int eager_plan_peak_rounded(const graph *g, size_t (*round)(size_t bytes), eager_plan_figures *out,
                            char *err, size_t cap) {
    return plan_peak_of(g, round, false, out, err, cap);
}

static int plan_peak_of(const graph *g, size_t (*round)(size_t bytes), bool cpu_scratch,
                        eager_plan_figures *out, char *err, size_t cap) {
    *out = (eager_plan_figures){.peak_node = -1};
    plan_dev pd = {.g = g, .round = round, .cpu_scratch = cpu_scratch};
    eager_device d = {.name = "plan",
                      .ctx = &pd,
                      .kernels = plan_kernels,
                      .alloc = plan_alloc,
                      .free = plan_free,
                      .copy = plan_copy,
                      .reset_peak = plan_reset_peak,
                      .peak_bytes = plan_peak,
                      .launched = &pd.launched,
                      .err = pd.err};
    size_t n = (size_t)(g->n ? g->n : 1);
    tensor **src = calloc(n, sizeof *src);
    tensor **outs = calloc((size_t)(g->noutputs ? g->noutputs : 1), sizeof *outs);
    eager_walk w;
    int rc = -1;
    if (!src || !outs || eager_walk_init(&w, g, EAGER_PROFILE_OFF) < 0) {
        snprintf(err, cap, "out of host memory planning the eager step");
        free(src);
        free(outs);
        return -1;
    }
    for (int i = 0; i < g->n; i++) {
        const graph_node *gn = &g->nodes[i];
        if (op_kind(gn->op) != OPK_SOURCE)
            continue;
        if (!(src[i] = plan_wrap(&pd, gn->dtype, gn->ndim, gn->shape))) {
            snprintf(err, cap, "%s", pd.err);
            goto done;
        }
        pd.live += src[i]->storage->bytes;
    }
    out->sources_bytes = pd.live;
    eager_stats st;
    if (eager_walk_step(&w, &d, src, outs, &st, err, cap) < 0)
        goto done;
    out->peak_bytes = st.peak_bytes;
    out->activation_bytes = st.peak_bytes - out->sources_bytes;
    out->output_bytes = pd.live - out->sources_bytes;
    out->peak_node = pd.peak_node;
    out->kernels = st.kernels;
    rc = 0;
done:
    for (int k = 0; k < g->noutputs; k++)
        plan_free(&pd, outs[k]);
    for (int i = 0; i < g->n; i++)
        tensor_free(src[i]);
    eager_walk_free(&w);
    free(src);
    free(outs);
    return rc;
}
