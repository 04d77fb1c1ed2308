// The compiled program: runs the passes, builds and loads the generated
// code, and executes steps, captured (one tc_step call over a planned
// arena) or as the "fused" ablation (a runtime loop over the generated
// kernels, each output allocated as eager does).
#include "compile_internal.h"

#include "../backend/cpu/cpu_kernels.h"
#include "../backend/cpu/cpu_quant.h"
#include <cblas.h>

#include "../backend/cpu/cpu_gemm_par.h" // after cblas.h
#include "base/clock.h"
#include "kcache.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct tc_rt { // as codegen_c.c's tc_abi
    int (*call)(void *ctx, int gi, char *const *a);
    void *ctx;
    uint64_t step;
    int part, parts;
} tc_rt;
typedef void (*tc_kernel)(char *const *, const tc_rt *, int);
typedef void (*tc_step_fn)(char *const *ext, char *arena, const tc_rt *rt);

struct compiled {
    cprog p;
    bool capture;
    bool poison; // TCBENCH_TEST_POISON: intermediate memory is NaN before each step
    void *so;
    tc_step_fn step;
    const tc_kernel *kernels;
    char **ext;       // g->n: data of source nodes
    char *arena;
    tensor **consts;  // g->n: FULL values some library kernels read
    tensor **bufs;    // fused mode: g->n live allocations
    int *free_after;  // fused mode: g->n, group after which a buffer dies (-1 never)
    cpu_ctx cpu;
    tc_rt rt;
    compiled_stats st;
    int *nposts;          // per group: convolution post-ops, -1 for none
    conv_post *posts;     // ngroups x CONV_POST_MAX
    tensor **scratch;     // ngroups x CONV_POST_MAX: recomputed per-channel operands
    char **ptrs;          // fused mode: one group's operand pointers
    int *ops;             // fused mode: one group's operand nodes
    int maxops;           // most operands of any group
    double *prof;         // fused mode, TCBENCH_PROFILE=compiled: seconds per group
    int64_t prof_runs;    // the steps they add up
    char err[320];
};

compile_opts compile_opts_default(void) {
    compile_opts o = {.fusion = true, .capture = true};
    const char *f = getenv("TCBENCH_DISABLE_FUSION"), *c = getenv("TCBENCH_DISABLE_CAPTURE");
    const char *l = getenv("TCBENCH_LOG");
    if (f && *f && strcmp(f, "0") != 0)
        o.fusion = false;
    if (c && *c && strcmp(c, "0") != 0)
        o.capture = false;
    if (l && strstr(l, "fusion"))
        o.log = stderr;
    return o;
}

// A tensor header over a kernel operand: the pointer is the first element,
// strides are the node's layout.
static void wrap_arg(const cprog *p, int v, char *ptr, tensor *t, tensor_storage *s) {
    const graph_node *n = &p->g->nodes[v];
    const cnode *c = &p->info[v];
    memset(t, 0, sizeof *t);
    memset(s, 0, sizeof *s);
    s->data = ptr;
    s->refs = 1;
    s->borrowed = true;
    t->dtype = n->dtype;
    t->ndim = n->ndim;
    memcpy(t->shape, n->shape, sizeof t->shape);
    if (c->store == CS_VIEW || (c->store == CS_BUFFER && c->lay.ndim == n->ndim)) // channels-last
        memcpy(t->stride, c->lay.stride, sizeof t->stride);
    else
        tensor_strides_contiguous(n->ndim, n->shape, t->stride);
    t->storage = s;
}

// One library kernel into a preallocated output (the same cpu_* kernels the
// eager executor calls). Updates write their sources (s[]) in place and
// leave y, which is their src0, alone.
static int extern_run(cpu_ctx *c, const graph_node *n, tensor *const *s, tensor *y) {
    switch (n->op) {
    case OP_CAST:
    case OP_DROPOUT:
    case OP_NOISE: return cpu_unary(c, n, s[0], y);
    case OP_GE: return cpu_binary(c, n, s[0], s[1], y);
    case OP_BATCH_NORM:
        if (n->ia[0])
            return cpu_batch_norm_train(c, s[0], s[1], s[2], s[3], s[4], n->fa[0], n->fa[1], y);
        return cpu_batch_norm(c, s[0], s[1], s[2], s[3], s[4], n->fa[0], y);
    // backward
    case OP_ACT_GRAD: return cpu_act_grad(c, n, s[0], s[1], y);
    case OP_SUM_TO: return cpu_sum_to(c, s[0], y);
    case OP_SOFTMAX_GRAD:
    case OP_LOG_SOFTMAX_GRAD:
        return cpu_softmax_grad(c, s[0], s[1], n->op == OP_LOG_SOFTMAX_GRAD, n->ia[0], y);
    case OP_LAYER_NORM_GRAD:
    case OP_RMS_NORM_GRAD:
    case OP_BATCH_NORM_GRAD:
    case OP_GROUP_NORM_GRAD:
        return cpu_norm_grad_stats(c, n, s[0], s[1], s[2], n->nsrc > 3 ? s[3] : NULL, y);
    case OP_LAYER_NORM_WGRAD:
    case OP_RMS_NORM_WGRAD:
    case OP_BATCH_NORM_WGRAD:
    case OP_GROUP_NORM_WGRAD:
        return cpu_norm_wgrad_stats(c, n, s[0], s[1], n->nsrc > 2 ? s[2] : NULL, y);
    case OP_BATCH_NORM_STATS: return cpu_batch_norm_stats(c, s[0], n->fa[0], y);
    case OP_CONV2D_GRAD_INPUT: return cpu_conv2d_grad_input(c, n, s[0], s[1], y);
    case OP_CONV2D_GRAD_WEIGHT: return cpu_conv2d_grad_weight(c, n, s[0], s[1], y);
    case OP_MAX_POOL2D_GRAD: return cpu_pool2d_grad(c, n, s[0], s[1], y);
    case OP_AVG_POOL2D_GRAD: return cpu_pool2d_grad(c, n, s[0], NULL, y);
    case OP_EMBEDDING_GRAD: return cpu_embedding_grad(c, s[0], s[1], y);
    case OP_SLICE_GRAD: return cpu_slice_grad(c, n, s[0], y);
    case OP_PAD_GRAD: return cpu_pad_grad(c, n, s[0], y);
    case OP_LSTM_GRAD: return cpu_lstm_grad(c, n, (const tensor *const *)s, y);
    case OP_EMBEDDING_BAG_GRAD: return cpu_embedding_bag_grad(c, s[0], s[1], s[2], y);
    case OP_TRIL_GATHER_GRAD: return cpu_tril_gather_grad(c, n, s[0], y);
    case OP_GRID_SAMPLE_GRAD: return cpu_grid_sample_grad(c, n, s[0], s[1], y);
    case OP_UPSAMPLE_BILINEAR_GRAD: return cpu_grid_sample_grad(c, n, s[0], NULL, y);
    case OP_GRID_SAMPLE_GRAD_GRID: return cpu_grid_sample_grad_grid(c, n, s[0], s[1], s[2], y);
    case OP_CROSS_ENTROPY_GRAD: return cpu_cross_entropy_grad(c, n, s[0], s[1], s[2], y);
    case OP_MSE_LOSS_GRAD: return cpu_mse_loss_grad(c, s[0], s[1], s[2], y);
    case OP_BCE_LOSS_GRAD: return cpu_bce_loss_grad(c, n, s[0], s[1], s[2], y);
    case OP_CTC_LOSS_GRAD: return cpu_ctc_loss_grad(c, n, s[0], s[1], s[2], s[3], y);
    case OP_ATTENTION_GRAD:
        return cpu_attention_grad(c, n, s[0], s[1], s[2], s[3], s[4],
                                  n->ia[1] ? s[n->ia[1]] : NULL, n->ia[2] ? s[n->ia[2]] : NULL, y);
    // updates, in place
    case OP_SGD: {
        int sc = graph_scaler_src(n); // the grad scaler's sources, or -1
        return cpu_sgd(c, n, s[0], s[1], (sc < 0 ? n->nsrc : sc) > 2 ? s[2] : NULL,
                       sc < 0 ? NULL : (const tensor *const *)s + sc);
    }
    case OP_ADAMW: {
        int sc = graph_scaler_src(n);
        return cpu_adamw(c, n, s[0], s[1], s[2], s[3],
                         sc < 0 ? NULL : (const tensor *const *)s + sc);
    }
    case OP_RUNNING_STAT: return cpu_running_stat(c, n, s[0], s[1]);
    case OP_KV_WRITE: return cpu_kv_write(c, s[0], s[1], s[2]);
    case OP_SCALER_UPDATE: return cpu_scaler_update(c, n, s[0], s[1], s[2], s[3]);
    case OP_FOUND_INF: return cpu_found_inf(c, n, (const tensor *const *)s, y);
    case OP_SUM:
    case OP_MEAN:
    case OP_MAX: return cpu_reduce(c, n, s[0], y);
    case OP_CONV2D:
    case OP_CONV_TRANSPOSE2D: return cpu_conv2d(c, n, s[0], s[1], NULL, y);
    case OP_MAX_POOL2D:
    case OP_AVG_POOL2D: return cpu_pool2d(c, n, s[0], y);
    case OP_UPSAMPLE_NEAREST: return cpu_upsample_nearest(c, s[0], n->ia[0], y);
    case OP_EMBEDDING: return cpu_embedding(c, s[0], s[1], y);
    case OP_FFT2_REAL: return cpu_fft2_real(c, s[0], y);
    case OP_ATTENTION:
        return cpu_attention(c, n, s[0], s[1], s[2], n->ia[1] ? s[n->ia[1]] : NULL,
                             n->ia[2] ? s[n->ia[2]] : NULL, y);
    case OP_CONCAT: return cpu_concat(c, (int)n->ia[0], n->nsrc, (const tensor *const *)s, y);
    case OP_ROLL: return cpu_roll(c, n->ia, s[0], y);
    case OP_UNFOLD:
    case OP_FOLD: return cpu_im2col(c, n, s[0], y);
    case OP_PAD: return cpu_pad(c, n, s[0], y);
    case OP_CROSS_ENTROPY: return cpu_cross_entropy(c, s[0], s[1], n->ia[0], n->fa[0], y);
    case OP_EMBEDDING_BAG: return cpu_embedding_bag(c, s[0], s[1], s[2], y);
    case OP_TRIL_GATHER: return cpu_tril_gather(c, n, s[0], y);
    case OP_GRID_SAMPLE: return cpu_grid_sample(c, n, s[0], s[1], y);
    case OP_UPSAMPLE_BILINEAR: return cpu_grid_sample(c, n, s[0], NULL, y);
    case OP_MSE_LOSS: return cpu_mse_loss(c, s[0], s[1], y);
    case OP_BCE_LOSS: return cpu_bce_loss(c, n, s[0], s[1], y);
    case OP_LSTM: return cpu_lstm(c, n, (const tensor *const *)s, y);
    case OP_CTC_LOSS: return cpu_ctc_loss(c, n, s[0], s[1], s[2], y);
    case OP_MATMUL: return cpu_matmul(c, s[0], s[1], y);
    case OP_LINEAR: return cpu_linear(c, s[0], s[1], n->nsrc > 2 ? s[2] : NULL, y);
    case OP_DEQUANT: return cpu_dequant(c, n, s[0], s[1], y);
    case OP_QLINEAR: return cpu_qlinear(c, n, s[0], s[1], s[2], n->nsrc > 3 ? s[3] : NULL, y);
    default: return cpu_fail(c, "compiled mode has no library kernel for %s", op_name(n->op));
    }
}

static int arg_index(const kgroup *k, int v) {
    int i = 0;
    while (k->args[i] != v)
        i++;
    return i;
}

// Element i of source or constant v's storage.
static double ext_value(const compiled *c, int v, int64_t i) {
    enum dtype t = c->p.g->nodes[v].dtype;
    if (dtype_is_half(t))
        return dtype_half_to_f32(t, ((const uint16_t *)c->ext[v])[i]);
    return ((const float *)c->ext[v])[i];
}

// A recomputed per-channel value (batch norm's rsqrt(var + eps)) for
// channel ch, from the sources it is made of.
static double eval_channel(const compiled *c, int v, int64_t ch) {
    const cprog *p = &c->p;
    const graph_node *n = &p->g->nodes[v];
    const cnode *cn = &p->info[v];
    bool one = graph_node_numel(n) == 1;
    switch (cn->store) {
    case CS_CONST: return n->fa[0];
    case CS_SOURCE: return ext_value(c, v, one ? 0 : ch);
    case CS_VIEW: {
        int64_t off = cn->lay.offset, st = 0;
        for (int i = 0; i < cn->lay.ndim; i++)
            if (cn->lay.shape[i] != 1)
                st = cn->lay.stride[i];
        return ext_value(c, cn->base, off + (one ? 0 : ch * st));
    }
    default: {
        double in[GRAPH_MAX_SRCS];
        for (int s = 0; s < n->nsrc; s++)
            in[s] = eval_channel(c, n->src[s], ch);
        return compile_scalar_op(n->op, n, in);
    }
    }
}

// A convolution and its epilogue as one oneDNN primitive with post-ops.
static int conv_with_posts(compiled *c, int gi, const graph_node *n, tensor *x, tensor *w,
                           char *const *a, tensor *y) {
    cprog *p = &c->p;
    kgroup *k = &p->groups[gi];
    int np = c->nposts[gi];
    cpu_post post[CONV_POST_MAX];
    tensor ts[CONV_POST_MAX];
    tensor_storage ss[CONV_POST_MAX];
    tensor *bias = NULL;
    int npost = 0;
    for (int i = 0; i < np; i++) {
        const conv_post *cp = &c->posts[gi * CONV_POST_MAX + i];
        const graph_node *m = &p->g->nodes[cp->member];
        if (cp->per_channel && i == 0 && m->op == OP_ADD &&
            p->info[cp->operand].store != CS_RECOMPUTE) { // the convolution's own bias
            int ai = 0;
            while (k->args[ai] != cp->operand)
                ai++;
            wrap_arg(p, cp->operand, a[ai], &ts[i], &ss[i]);
            ts[i].ndim = 1; // C contiguous floats (conv_post.c checked)
            ts[i].shape[0] = p->g->nodes[k->anchor].shape[1];
            ts[i].stride[0] = 1;
            bias = &ts[i];
            continue;
        }
        if (m->op == OP_SCALE && npost > 0 && post[npost - 1].op == OP_SCALE) {
            // two scales in a row are one linear post-op, a2 (a1 x + b1) + b2:
            // oneDNN 2.6's blocked convolutions compute a binary post-op
            // followed by two linear ones wrongly (dm_nfnet_f0's residual add,
            // then GammaAct's gamma and the next block's beta)
            cpu_post *q = &post[npost - 1];
            q->beta = (float)(m->fa[0] * q->beta + m->fa[1]);
            q->alpha = (float)(m->fa[0] * q->alpha);
            continue;
        }
        int j = npost++;
        post[j] = (cpu_post){.op = m->op, .alpha = (float)m->fa[0], .beta = (float)m->fa[1],
                             .per_channel = cp->per_channel};
        if (cp->operand < 0)
            continue;
        if (p->info[cp->operand].store == CS_RECOMPUTE) {
            tensor *sc = c->scratch[gi * CONV_POST_MAX + i];
            float *f = tensor_f32(sc);
            for (int64_t ch = 0; ch < sc->shape[0]; ch++)
                f[ch] = (float)eval_channel(c, cp->operand, ch);
            post[j].src1 = sc;
            continue;
        }
        int ai = 0;
        while (k->args[ai] != cp->operand)
            ai++;
        wrap_arg(p, cp->operand, a[ai], &ts[i], &ss[i]);
        post[j].src1 = &ts[i];
    }
    return cpu_conv2d_post(&c->cpu, n, x, w, bias, npost, post, y);
}

// Library kernels called from generated code: convolution, pooling, gathers,
// casts, losses (the extern kernels of the program). Same kernels as eager.
static int rt_call(void *ctx, int gi, char *const *a) {
    compiled *c = ctx;
    cprog *p = &c->p;
    kgroup *k = &p->groups[gi];
    const graph_node *n = &p->g->nodes[k->anchor];
    tensor ts[GRAPH_MAX_SRCS + 1];
    tensor_storage ss[GRAPH_MAX_SRCS + 1];
    tensor *src[GRAPH_MAX_SRCS];
    int nsrc = n->nsrc;
    bool slots = k->kind == KG_CONV || k->kind == KG_GEMM; // x, w, target in slots 0, 1, 2
    if (slots)
        nsrc = 2;
    for (int s = 0; s < nsrc; s++) {
        int v = n->src[s];
        if (p->info[v].store == CS_CONST) {
            src[s] = c->consts[v];
            continue;
        }
        // a convolution's or GEMM's operands are slots 0 and 1; an extern kernel's
        // list each node once however often the op reads it (concat(x, x))
        int i = slots ? s : arg_index(k, v);
        wrap_arg(p, v, a[i], &ts[s], &ss[s]);
        src[s] = &ts[s];
    }
    // the output: for a convolution the buffer it writes (slot 2), else the anchor
    int ai = slots ? 2 : arg_index(k, k->anchor);
    int out = k->args[ai];
    tensor y;
    tensor_storage ys;
    wrap_arg(p, out, a[ai], &y, &ys);
    // the target's own dtype: an epilogue that ends in a cast to f32 gets
    // the GEMM's f32 result unrounded (no f16 rounding in between)
    y.dtype = p->g->nodes[out].dtype;
    y.ndim = n->ndim;
    memcpy(y.shape, n->shape, sizeof y.shape);
    tensor_strides_contiguous(n->ndim, n->shape, y.stride);
    const clayout *ol = &p->info[out].lay; // a buffer's own layout (channels-last, layout.c)
    if (p->info[out].store == CS_BUFFER && ol->ndim == n->ndim &&
        memcmp(ol->shape, n->shape, (size_t)n->ndim * sizeof *n->shape) == 0)
        memcpy(y.stride, ol->stride, (size_t)n->ndim * sizeof *y.stride);
    // an inference program freezes the parameters, as Inductor's freezing:
    // nothing writes them while it runs, so a convolution's weight that is
    // a parameter is reordered into oneDNN's blocked layout once and kept
    c->cpu.freeze_weights = k->kind == KG_CONV && p->g->loss < 0 &&
                            p->info[n->src[1]].store == CS_SOURCE;
    int rc = k->kind == KG_CONV && c->nposts[gi] >= 0
                 ? conv_with_posts(c, gi, n, src[0], src[1], a, &y)
                 : extern_run(&c->cpu, n, src, &y);
    c->cpu.freeze_weights = false;
    if (rc < 0 && !c->err[0])
        snprintf(c->err, sizeof c->err, "%s", c->cpu.err);
    return rc;
}

static int fail(compiled *c, char *err, size_t cap, const char *msg) {
    snprintf(err, cap, "%s", msg);
    compiled_free(c);
    return -1;
}

// A group's kind, as the dump and the profile name it.
static const char *group_kind(const kgroup *k) {
    static const char *const kinds[] = {"pointwise", "row",  "gemm",  "conv",
                                        "extern",    "copy", "update"};
    return (unsigned)k->kind < sizeof kinds / sizeof kinds[0] ? kinds[k->kind] : "?";
}

// " op%id" for each member of k, "*" after the ones it stores.
static void group_members(FILE *f, const cprog *p, const kgroup *k) {
    for (int m = 0; m < k->n; m++)
        fprintf(f, " %s%%%d%s", op_name(p->g->nodes[k->nodes[m]].op), k->nodes[m],
                p->info[k->nodes[m]].store == CS_BUFFER ? "*" : "");
}

static void dump(const compile_opts *o, const cprog *p, const char *src) {
    if (!o->dump_dir)
        return;
    mkdir(o->dump_dir, 0755);
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.c", o->dump_dir, p->m->name);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(src, f);
        fclose(f);
    }
    snprintf(path, sizeof path, "%s/%s.graph.txt", o->dump_dir, p->m->name);
    f = fopen(path, "w");
    if (!f)
        return;
    for (int gi = 0; gi < p->ngroups; gi++) {
        const kgroup *k = &p->groups[gi];
        fprintf(f, "group %d (%s, kernel k%d):", gi, group_kind(k), k->kernel);
        group_members(f, p, k);
        fputc('\n', f);
    }
    fprintf(f, "arena %zu bytes\n", p->arena_bytes);
    fclose(f);
}

int compile_passes(cprog *p, const model *m, const compile_opts *o) {
    p->m = m;
    p->fusion = o->fusion;
    p->log = o->log;
    const char *rip = getenv("TCBENCH_DISABLE_ROWS_IN_PLACE");
    p->gemm_rows_in_place = !(rip && *rip && strcmp(rip, "0"));
    if (compile_decompose(p) < 0 || compile_quant(p) < 0 || compile_simplify(p) < 0 ||
        compile_fuse(p) < 0 || compile_layouts(p) < 0 || compile_plan(p) < 0)
        return -1;
    return 0;
}

void compile_prog_free(cprog *p) {
    for (int gi = 0; gi < p->ngroups; gi++)
        free(p->groups[gi].nodes);
    free(p->groups);
    free(p->info);
    free(p->origin);
    free(p->src_of);
    graph_free(p->g);
    memset(p, 0, sizeof *p);
}

size_t compile_sources_bytes(const graph *g) {
    size_t bytes = 0;
    for (int i = 0; i < g->n; i++)
        if (op_kind(g->nodes[i].op) == OPK_SOURCE)
            bytes += graph_node_bytes(&g->nodes[i]);
    return bytes;
}

int compile_model(const model *m, const compile_opts *o, compiled **out, char *err, size_t cap) {
    double t0 = base_now();
    *out = NULL;
    compiled *c = calloc(1, sizeof *c);
    if (!c)
        return snprintf(err, cap, "out of memory"), -1;
    cprog *p = &c->p;
    c->capture = o->capture;
    const char *poison = getenv("TCBENCH_TEST_POISON");
    c->poison = poison && *poison && strcmp(poison, "0") != 0;
    if (compile_passes(p, m, o) < 0)
        return fail(c, err, cap, p->err);
    // under --memory-limit the arena must fit beside the sources, as the
    // planner (compile_plan_memory) counts them
    size_t held = compile_sources_bytes(m->g);
    if (c->capture && !tensor_mem_admit(held, p->arena_bytes)) {
        char why[160];
        tensor_mem_refusal(why, sizeof why, p->arena_bytes, held);
        snprintf(err, cap, "out of memory: the arena %s (--memory-limit)", why);
        compiled_free(c);
        return -1;
    }
    char *src = compile_codegen_c(p);
    if (!src)
        return fail(c, err, cap, p->err[0] ? p->err : "code generation ran out of memory");
    dump(o, p, src);
    kcache_result kr;
    char kerr[600];
    int rc = kcache_build(src, o->cache_dir, &kr, kerr, sizeof kerr);
    free(src);
    if (rc < 0)
        return fail(c, err, cap, kerr);
    c->so = kr.handle;
    c->st.cache_hit = kr.hit;
    c->step = (tc_step_fn)dlsym(c->so, "tc_step");
    c->kernels = (const tc_kernel *)dlsym(c->so, "tc_kernels");
    if (!c->step || !c->kernels)
        return fail(c, err, cap, "dlsym tc_step / tc_kernels: the generated library is incomplete");
    // the GEMMs of a few rows run eager's own kernel (cpu_gemm_par.h)
    cpu_gemv_fn *gemv = (cpu_gemv_fn *)dlsym(c->so, "tc_gemv");
    if (!gemv)
        return fail(c, err, cap, "dlsym tc_gemv: the generated library is incomplete");
    *gemv = cpu_gemv;
    // and the quantized ones the engine's (cpu_quant.h)
    cpu_qgemv_fn *qgemv = (cpu_qgemv_fn *)dlsym(c->so, "tc_qgemv");
    if (!qgemv)
        return fail(c, err, cap, "dlsym tc_qgemv: the generated library is incomplete");
    *qgemv = cpu_qgemv_cols;
    graph *g = p->g;
    c->ext = calloc((size_t)g->n, sizeof *c->ext);
    c->consts = calloc((size_t)g->n, sizeof *c->consts);
    c->bufs = calloc((size_t)g->n, sizeof *c->bufs);
    c->free_after = malloc((size_t)g->n * sizeof *c->free_after);
    if (!c->ext || !c->consts || !c->bufs || !c->free_after)
        return fail(c, err, cap, "out of memory");
    for (int v = 0; v < g->n; v++) {
        const graph_node *n = &g->nodes[v];
        c->free_after[v] = -1;
        if (p->info[v].store == CS_CONST && n->ndim <= TENSOR_MAX_DIMS) {
            tensor *t = c->consts[v] = tensor_new_empty(n->dtype, n->ndim, n->shape);
            if (!t)
                return fail(c, err, cap, "out of memory");
            // one element in the node's dtype, then its bytes repeated
            int64_t numel = tensor_numel(t), zero[TENSOR_MAX_DIMS] = {0};
            size_t es = dtype_size(n->dtype);
            if (numel > 0)
                tensor_set(t, zero, n->fa[0]);
            for (int64_t i = 1; i < numel; i++)
                memcpy((char *)tensor_data(t) + i * (int64_t)es, tensor_data(t), es);
            c->ext[v] = tensor_data(t); // for kernels that read it from memory (a GEMM)
        }
    }
    if (c->capture && p->arena_bytes) {
        c->arena = aligned_alloc(64, (p->arena_bytes + 63) / 64 * 64);
        if (!c->arena)
            return fail(c, err, cap, "out of memory allocating the arena");
    }
    if (!c->capture) {
        for (int v = 0; v < g->n; v++)
            if (p->info[v].store == CS_BUFFER) {
                bool output = false;
                for (int i = 0; i < g->noutputs; i++)
                    output |= g->outputs[i] == v;
                output |= g->loss == v;
                c->free_after[v] = output ? -1 : p->info[v].last;
            }
    }
    char derr[256];
    if (cpu_dnnl_new(&c->cpu.dnnl, derr, sizeof derr) < 0)
        return fail(c, err, cap, derr);

    // convolution epilogues oneDNN runs as post-ops (codegen emits no loop for them)
    c->nposts = malloc((size_t)(p->ngroups + 1) * sizeof *c->nposts);
    c->posts = malloc((size_t)(p->ngroups + 1) * CONV_POST_MAX * sizeof *c->posts);
    c->scratch = calloc((size_t)(p->ngroups + 1) * CONV_POST_MAX, sizeof *c->scratch);
    if (!c->nposts || !c->posts || !c->scratch)
        return fail(c, err, cap, "out of memory");
    for (int gi = 0; gi < p->ngroups; gi++) {
        conv_post *cp = &c->posts[gi * CONV_POST_MAX];
        c->nposts[gi] = p->groups[gi].kind == KG_CONV ? compile_conv_posts(p, &p->groups[gi], cp)
                                                      : -1;
        for (int i = 0; i < c->nposts[gi]; i++) {
            if (cp[i].operand < 0 || p->info[cp[i].operand].store != CS_RECOMPUTE)
                continue;
            int64_t C = p->g->nodes[p->groups[gi].anchor].shape[1];
            c->scratch[gi * CONV_POST_MAX + i] = tensor_new_empty(DT_F32, 1, &C);
            if (!c->scratch[gi * CONV_POST_MAX + i])
                return fail(c, err, cap, "out of memory");
        }
    }
    c->maxops = 1;
    for (int gi = 0; gi < p->ngroups; gi++) {
        int n = compile_group_operands(p, &p->groups[gi], NULL, 0);
        c->maxops = n > c->maxops ? n : c->maxops;
    }
    c->ptrs = malloc((size_t)c->maxops * sizeof *c->ptrs);
    c->ops = malloc((size_t)c->maxops * sizeof *c->ops);
    if (!c->ptrs || !c->ops)
        return fail(c, err, cap, "out of memory");
    c->rt.call = rt_call;
    c->rt.ctx = c;
    compiled_set_step(c, 1);
    c->st.arena_bytes = p->arena_bytes;
    c->st.cast_kernels = 0;
    for (int gi = 0; gi < p->ngroups; gi++) {
        const kgroup *k = &p->groups[gi];
        bool casts = k->n > 0;
        for (int i = 0; i < k->n && casts; i++)
            casts = p->g->nodes[k->nodes[i]].op == OP_CAST;
        c->st.cast_kernels += casts;
    }
    c->st.compile_s = base_now() - t0;
    const char *pf = getenv("TCBENCH_PROFILE");
    if (pf && strstr(pf, "compiled") && !c->capture && p->ngroups > 0 &&
        !(c->prof = calloc((size_t)p->ngroups, sizeof *c->prof)))
        return fail(c, err, cap, "out of memory for the profile");
    *out = c;
    return 0;
}

static char *storage_ptr(compiled *c, int v) {
    cprog *p = &c->p;
    const cnode *cn = &p->info[v];
    int b = cn->store == CS_VIEW ? cn->base : v;
    int64_t eoff = cn->store == CS_VIEW ? cn->lay.offset : 0;
    size_t es = dtype_size(p->g->nodes[v].dtype);
    char *base;
    if (p->info[b].store == CS_SOURCE || p->info[b].store == CS_CONST)
        base = c->ext[b];
    else if (c->capture)
        base = c->arena + p->info[b].offset;
    else
        base = c->bufs[b] ? (char *)tensor_data(c->bufs[b]) : NULL;
    return base ? base + eoff * (int64_t)es : NULL;
}

static tensor *output_tensor(compiled *c, int v) {
    cprog *p = &c->p;
    const graph_node *n = &p->g->nodes[v];
    if (p->info[v].store == CS_CONST) // folded at compile time: no kernel wrote it
        return tensor_contiguous(c->consts[v]);
    tensor *t = tensor_wrap(n->dtype, n->ndim, n->shape, storage_ptr(c, v));
    if (t && p->info[v].store == CS_VIEW)
        memcpy(t->stride, p->info[v].lay.stride, sizeof t->stride);
    return t;
}

int compiled_run(compiled *c, tensor **outputs, compiled_stats *st) {
    cprog *p = &c->p;
    graph *g = p->g;
    const graph *mg = p->m->g;
    c->err[0] = 0;
    tensor_mem_reset_peak();
    for (int i = 0; i < mg->n; i++)
        if (p->src_of[i] >= 0)
            c->ext[p->src_of[i]] = (char *)tensor_data(p->m->values[i]);
    if (c->capture) {
        if (c->poison && c->arena) // all-ones bytes: a NaN in every float type
            memset(c->arena, 0xff, p->arena_bytes);
        c->step(c->ext, c->arena, &c->rt);
    } else {
        c->prof_runs++;
        for (int gi = 0; gi < p->ngroups; gi++) {
            kgroup *k = &p->groups[gi];
            for (int m = 0; m < k->n; m++) {
                int v = k->nodes[m];
                if (p->info[v].store != CS_BUFFER || c->bufs[v])
                    continue;
                c->bufs[v] = tensor_new_empty(g->nodes[v].dtype, g->nodes[v].ndim, g->nodes[v].shape);
                if (!c->bufs[v]) {
                    char why[160] = "allocating a kernel output";
                    if (tensor_mem_limit()) // the cap's words, as eager's
                        tensor_mem_refusal(why, sizeof why,
                                           tensor_mem_round(graph_node_bytes(&g->nodes[v])),
                                           tensor_mem_live());
                    snprintf(c->err, sizeof c->err, "out of memory: %%%d %s: %s%s", v,
                             op_name(g->nodes[v].op), why,
                             tensor_mem_limit() ? " (--memory-limit)" : "");
                    return -1;
                }
                if (c->poison)
                    memset(tensor_data(c->bufs[v]), 0xff, graph_node_bytes(&g->nodes[v]));
            }
            int nops = compile_group_operands(p, k, c->ops, c->maxops);
            for (int i = 0; i < nops; i++)
                c->ptrs[i] = storage_ptr(c, c->ops[i]);
            double t0 = c->prof ? base_now() : 0;
            c->kernels[k->kernel](c->ptrs, &c->rt, gi);
            if (c->prof)
                c->prof[gi] += base_now() - t0;
            for (int v = 0; v < g->n; v++)
                if (c->free_after[v] == gi && c->bufs[v]) {
                    tensor_free(c->bufs[v]);
                    c->bufs[v] = NULL;
                }
        }
    }
    if (c->err[0])
        return -1;
    for (int i = 0; i < g->noutputs; i++) {
        outputs[i] = output_tensor(c, g->outputs[i]);
        if (!outputs[i]) {
            snprintf(c->err, sizeof c->err, "out of memory");
            return -1;
        }
    }
    c->st.kernels = p->ngroups;
    size_t params = 0;
    for (int i = 0; i < mg->n; i++)
        if (p->m->values[i])
            params += tensor_nbytes(p->m->values[i]);
    // frozen inference: the program holds its convolution weights prepacked
    // instead of plain (Inductor's freezing discards the originals too)
    size_t plain, packed = cpu_dnnl_packed_bytes(c->cpu.dnnl, &plain);
    c->st.peak_bytes = (c->capture ? params + p->arena_bytes : tensor_mem_peak()) + packed - plain;
    if (st)
        *st = c->st;
    return 0;
}

void compiled_set_step(compiled *c, uint64_t step) {
    c->cpu.step = step;
    c->rt.step = step;
}

const char *compiled_error(const compiled *c) { return c->err; }

void compiled_info(const compiled *c, compiled_stats *st) { *st = c->st; }

// TCBENCH_PROFILE=compiled: the fused mode's time per kernel kind and first
// op, added up over the program's life (the eager profile's counterpart)
// TCBENCH_PROFILE=compiled-groups: each group's time, its members and the
// shape of what it computes, in program order
static void print_profile_groups(const compiled *c) {
    const cprog *p = &c->p;
    double runs = (double)(c->prof_runs ? c->prof_runs : 1);
    for (int gi = 0; gi < p->ngroups; gi++) {
        const kgroup *k = &p->groups[gi];
        const graph_node *a = &p->g->nodes[k->anchor >= 0 ? k->anchor : k->nodes[0]];
        char shape[96];
        graph_shape_str(a->ndim, a->shape, shape, sizeof shape);
        fprintf(stderr, "compiled profile: group %4d %-9s %8.4f ms  %s %s:", gi, group_kind(k),
                c->prof[gi] * 1e3 / runs, dtype_name(a->dtype), shape);
        group_members(stderr, p, k);
        fputc('\n', stderr);
    }
}

static void print_profile(const compiled *c) {
    const cprog *p = &c->p;
    const char *pf = getenv("TCBENCH_PROFILE");
    if (pf && strstr(pf, "compiled-groups"))
        print_profile_groups(c);
    for (int gi = 0; gi < p->ngroups; gi++) {
        const kgroup *k = &p->groups[gi];
        int lead = k->anchor >= 0 ? k->anchor : k->nodes[0];
        bool first = true; // one line per (kind, op), at its first group
        for (int gj = 0; gj < gi && first; gj++) {
            const kgroup *o = &p->groups[gj];
            first = !(o->kind == k->kind &&
                      p->g->nodes[o->anchor >= 0 ? o->anchor : o->nodes[0]].op == p->g->nodes[lead].op);
        }
        if (!first)
            continue;
        double sum = 0;
        int n = 0;
        for (int gj = gi; gj < p->ngroups; gj++) {
            const kgroup *o = &p->groups[gj];
            if (o->kind == k->kind &&
                p->g->nodes[o->anchor >= 0 ? o->anchor : o->nodes[0]].op == p->g->nodes[lead].op)
                sum += c->prof[gj], n++;
        }
        fprintf(stderr, "compiled profile: %-9s %-20s %4d groups %8.4f ms a step\n", group_kind(k),
                op_name(p->g->nodes[lead].op), n,
                sum * 1e3 / (double)(c->prof_runs ? c->prof_runs : 1));
    }
}

void compiled_free(compiled *c) {
    if (!c)
        return;
    cprog *p = &c->p;
    if (c->prof) {
        print_profile(c);
        free(c->prof);
    }
    if (p->g) {
        for (int v = 0; v < p->g->n; v++) {
            if (c->consts)
                tensor_free(c->consts[v]);
            if (c->bufs)
                tensor_free(c->bufs[v]);
        }
    }
    if (c->scratch)
        for (int i = 0; i < p->ngroups * CONV_POST_MAX; i++)
            tensor_free(c->scratch[i]);
    free(c->scratch);
    free(c->ptrs);
    free(c->ops);
    free(c->posts);
    free(c->nposts);
    free(c->consts);
    free(c->bufs);
    free(c->free_after);
    free(c->ext);
    free(c->arena);
    if (c->cpu.dnnl)
        cpu_dnnl_free(c->cpu.dnnl);
    if (c->so)
        dlclose(c->so);
    compile_prog_free(p);
    free(c);
}
