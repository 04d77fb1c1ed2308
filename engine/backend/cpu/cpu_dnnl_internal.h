// cpu_dnnl_internal: the primitive cache of cpu_dnnl.c, shared with the
// backward kernels of cpu_dnnl_grad.c and the bf16 matmul of
// cpu_gemm_bf16.c; not for use outside those three files.
//
//   dnnl_key k;
//   cpu_dnnl_key_init(&k, n, x, w, y);            // op, shapes, attributes
//   dnnl_entry *e = cpu_dnnl_lookup(c, &k, make);  // make(c, &k) on a miss
//   cpu_dnnl_execute(c, e, (void *[]){...});       // data in e->arg order
//
// A make function builds the primitive and one memory object per argument
// (data handle DNNL_MEMORY_NONE) on cpu_dnnl_engine(); the cache owns the
// entry from then on and frees it with the executor's cpu_dnnl.
#pragma once
#include "cpu_kernels.h"

#include <dnnl.h>
#include <stdio.h>

typedef struct dnnl_key {
    int op;
    int has_bias;
    int64_t x[4], w[4], y[4];    // forward input, weight, forward output
    int64_t xs[4], ws[4], ys[4]; // their strides (bf16 matmul; 0 elsewhere)
    int64_t ia[9];
    // bf16 convolution (cpu_dnnl.c): bf16 src and weights; dst and each
    // post-op operand f32 or bf16 (1 for bf16). All 0 for f32 primitives.
    int bf16, bf16_y, bf16_post[CPU_POST_MAX];
    // channels-last (NHWC-strided, dense) x, y and full-size post-op
    // operands (the compiled mode's layout, compile/layout.c); 0: plain
    int xcl, ycl, post_cl[CPU_POST_MAX];
    int npost; // post-ops (cpu_conv2d_post)
    int post_op[CPU_POST_MAX];
    int post_chan[CPU_POST_MAX];
    float post_a[CPU_POST_MAX], post_b[CPU_POST_MAX];
} dnnl_key;

enum { CPU_DNNL_MAX_ARGS = 4 + CPU_POST_MAX };

typedef struct dnnl_entry {
    dnnl_key key;
    dnnl_primitive_t prim;
    int nargs;
    int arg[CPU_DNNL_MAX_ARGS];           // DNNL_ARG_SRC, ...
    dnnl_memory_t mem[CPU_DNNL_MAX_ARGS]; // bound to tensor data at each call
    // An argument the primitive wants in another layout than the caller's
    // plain one (cpu_dnnl_arg): mem[i] is then bound to the context's
    // scratch, user[i] to the caller's data, and reo[i] reorders between
    // them, before the primitive for an input, after it for an output.
    dnnl_memory_t user[CPU_DNNL_MAX_ARGS];
    dnnl_primitive_t reo[CPU_DNNL_MAX_ARGS];
    size_t inner_bytes[CPU_DNNL_MAX_ARGS];
    bool output[CPU_DNNL_MAX_ARGS];
    // frozen weights (cpu_ctx.freeze_weights): each weight tensor this
    // primitive has read, reordered once, by the address of its data
    struct dnnl_pack {
        const void *user;
        void *buf;
        struct dnnl_pack *next;
    } *packs;
    struct dnnl_entry *next;
} dnnl_entry;

typedef dnnl_entry *(*cpu_dnnl_make_fn)(cpu_ctx *c, const dnnl_key *k);

const char *cpu_dnnl_status_str(dnnl_status_t s);

// Runs a dnnl_* call; on failure records its name and status and jumps to
// `fail` (so partly made objects are released there).
#define DNNL_TRY(errbuf, cap, fn, args)                                                            \
    do {                                                                                           \
        dnnl_status_t st_ = fn args;                                                               \
        if (st_ != dnnl_success) {                                                                 \
            snprintf(errbuf, cap, "%s failed: %s", #fn, cpu_dnnl_status_str(st_));                 \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

dnnl_engine_t cpu_dnnl_engine(void); // made by the first cpu_dnnl_new
// oneDNN's bf16 kernels run for d: the CPU has AVX512-BF16 and
// TCBENCH_DISABLE_DNNL_BF16 was unset or 0 when d was made
// (cpu_dnnl_set_bf16 changes it; NULL d: false)
bool cpu_dnnl_bf16_on(const cpu_dnnl *d);
void cpu_dnnl_key_init(dnnl_key *k, const graph_node *n, const tensor *x, const tensor *w,
                       const tensor *y);
dnnl_entry *cpu_dnnl_lookup(cpu_ctx *c, const dnnl_key *k, cpu_dnnl_make_fn make);
// A convolution of key k (forward or backward) runs on channels-last
// activations and blocked weights, reordered in and out (cpu_dnnl.c,
// entry_new): every one with a spatial window or groups; a 1x1 without
// groups is a GEMM on plain NCHW.
bool cpu_dnnl_conv_blocked(const dnnl_key *k);
// x itself (a view) when plain contiguous or channels-last (*cl set), else
// a contiguous copy: the layouts a convolution takes as they are.
tensor *cpu_dnnl_operand(cpu_ctx *c, const tensor *x, int *cl);
// Appends argument `arg` to e: the primitive's descriptor prim_md (what pd
// asked for), the caller's data laid out as user_md. When the two differ a
// reorder is made and runs inside cpu_dnnl_execute, as a framework's eager
// convolution reorders plain tensors into the primitive's layout and back.
int cpu_dnnl_arg(cpu_ctx *c, dnnl_entry *e, int arg, const dnnl_memory_desc_t *user_md,
                 const dnnl_memory_desc_t *prim_md, bool output);
// Binds data pointers (in the entry's argument order), runs it with its
// reorders, counts a kernel.
int cpu_dnnl_execute(cpu_ctx *c, dnnl_entry *e, void *const *data);
void cpu_dnnl_entry_free(dnnl_entry *e); // a partly made one too
// TCBENCH_LOG=dnnl: prints the implementation oneDNN chose for pd
void cpu_dnnl_log_impl(const dnnl_key *k, const_dnnl_primitive_desc_t pd);
// dnnl_primitive_desc_create, but the first implementation whose name does
// not begin with `skip` (NULL: the first one): a way around an
// implementation known to be wrong for some shapes. Fails as the call does,
// its name in c->err.
int cpu_dnnl_pd_create(cpu_ctx *c, dnnl_primitive_desc_t *pd, const_dnnl_op_desc_t d,
                       const_dnnl_primitive_attr_t attr, const_dnnl_primitive_desc_t hint,
                       const char *skip);
