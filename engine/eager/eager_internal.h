// eager_internal: the one graph walker of the eager executors, over a
// per-device kernel table. eager.c (CPU) and eager_cuda.c (CUDA) hold only
// their kernels and allocators; the walk, the use counts, the views, the
// release of each intermediate after its last use, the in-place updates
// and the kernel and cast counts are written here once.
//
//   static const eager_kernel_fn my_kernels[OP_COUNT] = {
//   #define OP(U, l, k, a0, a1) [OP_##U] = EAGER_ENTRY(k, my_##l),
//   #include "core/ops.def"
//   #undef OP
//   };
//   eager_device d = {.name = "my", .ctx = &ctx, .kernels = my_kernels,
//                     .alloc = my_alloc, .free = my_free, .copy = my_copy,
//                     .reset_peak = my_reset_peak, .peak_bytes = my_peak,
//                     .launched = &ctx.kernels, .err = ctx.err};
//   eager_walk w;
//   if (eager_walk_init(&w, g, EAGER_PROFILE_OFF) < 0) ...             // out of memory
//   if (eager_walk_step(&w, &d, sources, outs, &st, err, sizeof err) < 0) ...
//   eager_walk_free(&w);
//
// What the walker does with each op, by its kind (ops.def):
// - OPK_SOURCE: the node's value is sources[id], borrowed, never freed;
// - OPK_VIEW (reshape, permute, slice, expand): a host view sharing the
//   input's storage, no kernel; a reshape that strides cannot express is a
//   copy (d->copy) into a fresh output, as torch.reshape;
// - contiguous: a view when its input is contiguous, else its kernel;
// - OPK_UPDATE (optimizers, running statistics, the grad scaler): the
//   kernel writes src0 and its state sources in place (y is NULL); the
//   node's value is a view of src0;
// - every other op: the walker allocates the output through d->alloc and
//   runs the kernel into it, freeing the output again if the kernel fails.
// After each node, an input whose last consumer has run is returned to
// d->free (sources never are), and so is a value nothing reads.
#pragma once
#include "eager.h"

#include "core/graph.h"
#include "core/tensor.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// One op on one device: computes node n from its inputs s[] into y (the
// node's shape and dtype, allocated by the walker; NULL for OPK_UPDATE).
// 0, or -1 with the device's error message set.
typedef int (*eager_kernel_fn)(void *ctx, const graph_node *n, tensor *const *s, tensor *y);

// The entry of a device's kernel table for the op of kind k: its kernel
// fn, or NULL for sources and views, which launch nothing. A computing op
// without a kernel function is an undeclared identifier: a compile error.
#define EAGER_ENTRY(k, fn)         EAGER_ENTRY_##k(fn)
#define EAGER_ENTRY_OPK_SOURCE(fn) NULL
#define EAGER_ENTRY_OPK_VIEW(fn)   NULL
#define EAGER_ENTRY_OPK_UNARY(fn)  fn
#define EAGER_ENTRY_OPK_BINARY(fn) fn
#define EAGER_ENTRY_OPK_WHERE(fn)  fn
#define EAGER_ENTRY_OPK_REDUCE(fn) fn
#define EAGER_ENTRY_OPK_NORM(fn)   fn
#define EAGER_ENTRY_OPK_GEMM(fn)   fn
#define EAGER_ENTRY_OPK_CONV(fn)   fn
#define EAGER_ENTRY_OPK_POOL(fn)   fn
#define EAGER_ENTRY_OPK_GATHER(fn) fn
#define EAGER_ENTRY_OPK_COPY(fn)   fn
#define EAGER_ENTRY_OPK_LOSS(fn)   fn
#define EAGER_ENTRY_OPK_GRAD(fn)   fn
#define EAGER_ENTRY_OPK_UPDATE(fn) fn
#define EAGER_ENTRY_OPK_ATTENTION(fn) fn
#define EAGER_ENTRY_OPK_FFT(fn)       fn
#define EAGER_ENTRY_OPK_RNN(fn)       fn

// A device: its kernel table and allocator. ctx is the first argument of
// every callback.
typedef struct eager_device {
    const char *name; // "cpu", "cuda": named when an op has no kernel
    void *ctx;
    const eager_kernel_fn *kernels; // OP_COUNT entries, EAGER_ENTRY's
    // A tensor of n's dtype and the given shape from the device's
    // allocator (uninitialized); NULL with the error set.
    tensor *(*alloc)(void *ctx, const graph_node *n, int ndim, const int64_t *shape);
    void (*free)(void *ctx, tensor *t); // one reference; NULL is fine
    // Strided x into contiguous y of the same shape: one kernel.
    int (*copy)(void *ctx, const tensor *x, tensor *y);
    // The allocator's peak of live bytes, and its reset to what is live.
    void (*reset_peak)(void *ctx);
    size_t (*peak_bytes)(void *ctx);
    int64_t *launched; // the kernel counter the device's kernels bump
    const char *err;   // the device's last error message
} eager_device;

typedef struct eager_walk {
    const graph *g;
    int *uses;     // consumers of each node (+1 for outputs and the loss)
    int *left;     // the step's countdown of uses
    tensor **vals; // the step's value of each node (sources: borrowed)
    double *prof;  // seconds per op (eager_walk_init's profile), printed by eager_walk_free
    double *prof_node; // seconds per node, TCBENCH_PROFILE=eager-nodes
    int64_t prof_steps; // the steps walked with a profile; all but the first are timed
} eager_walk;

// What eager_walk_init's profile times (host time: on an asynchronous
// device, the launch): nothing, each op kind, or each node as well.
typedef enum eager_profile {
    EAGER_PROFILE_OFF,
    EAGER_PROFILE_OPS,
    EAGER_PROFILE_NODES
} eager_profile;

// The profile TCBENCH_PROFILE asks for: containing "eager-nodes", each
// node; "eager", each op kind; else none.
eager_profile eager_profile_env(void);

// 0, or -1 out of memory.
int eager_walk_init(eager_walk *w, const graph *g, eager_profile profile);
void eager_walk_free(eager_walk *w);

// One step over w->g on device d. sources[id] is the value of each source
// node (borrowed; NULL when it has none); outs[k] receives a new reference
// (a view) to output k, which the caller returns with d->free. st (may be
// NULL): d's kernels launched, of which casts (one per cast node: the graph
// makes no no-op casts), and d's peak bytes over the step. 0, or -1 with
// err set, every step value released and outs all NULL.
int eager_walk_step(eager_walk *w, const eager_device *d, tensor *const *sources, tensor **outs,
                    eager_stats *st, char *err, size_t cap);

// The state sources of an optimizer node, as ops.def lays them out.
// SGD's momentum buffer: a third source before the grad scaler's, or NULL.
static inline tensor *eager_sgd_buffer(const graph_node *n, tensor *const *s) {
    return (graph_scaler_src(n) >= 0 ? graph_scaler_src(n) : n->nsrc) > 2 ? s[2] : NULL;
}

// The grad scaler's (scale, found_inf, step) of an SGD or ADAMW node, or NULL.
static inline const tensor *const *eager_scaler(const graph_node *n, tensor *const *s) {
    return graph_scaler_src(n) >= 0 ? (const tensor *const *)s + graph_scaler_src(n) : NULL;
}
