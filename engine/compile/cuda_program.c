// The compiled mode on the GPU (cuda_program.h): program.c's runtime with
// NVRTC for the system compiler, a device arena, and a CUDA graph for the
// captured step. Training state (what updates write) lives in the device
// copies of the sources, from one step to the next.
#include "cuda_program.h"

#include "backend/cuda/cuda_nvrtc.h"
#include "backend/cuda/cuda_rt.h"
#include "backend/cuda/cuda_share.h"
#include "base/clock.h"
#include "codegen_cuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

// the generated kernels' one parameter (codegen_cuda.c)
typedef struct tc_args {
    char *p[KG_MAX_ARGS];
    const uint64_t *step; // device word: the training step
} tc_args;

struct cuda_program {
    cprog p;
    bool capture;
    cuda_ctx c;
    bool ctx_ok;       // c made (and freed) here
    cuda_ctx *cx;      // &c, or the share's context
    cuda_share *share; // NULL: copies of its own
    bool *lent;        // g->n: dev[v] is the share's (not freed here)
    cudaLibrary_t lib;
    cudaKernel_t *kern;
    int nk;
    cuda_launch *launch; // per group
    tc_args *args;       // per group: device pointers of kgroup.args
    tensor **dev;        // g->n: device copies of sources and constants (owned)
    bool *written;       // g->n: sources an update writes (training state)
    tensor **tables;     // per group: a KG_UPDATE group's operand pointers (owned)
    tensor *step_dev;    // the step word every tc_args points to (one uint64_t)
    uint64_t step;       // the step of the next run (cuda_program_set_step)
    uint64_t step_sent;  // the step the device word holds
    char *arena;
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    int64_t step_kernels;
    compiled_stats st;
    char err[600];
};

// ---- operands ------------------------------------------------------------------------

// The device address of node v's first element.
static char *pointer_of(cuda_program *c, int v) {
    const cprog *p = &c->p;
    const cnode *cn = &p->info[v];
    int b = cn->store == CS_VIEW ? cn->base : v;
    int64_t eoff = cn->store == CS_VIEW ? cn->lay.offset : 0;
    size_t es = dtype_size(p->g->nodes[v].dtype);
    char *base;
    if (p->info[b].store == CS_SOURCE || p->info[b].store == CS_CONST)
        base = c->dev[b] ? (char *)tensor_data(c->dev[b]) : NULL;
    else
        base = c->arena + p->info[b].offset;
    return base ? base + eoff * (int64_t)es : NULL;
}

// A header over operand v at ptr: the node's shape, its layout's strides.
static tensor *wrap_node(cuda_program *c, int v, char *ptr) {
    const graph_node *n = &c->p.g->nodes[v];
    const cnode *cn = &c->p.info[v];
    return cuda_tensor_wrap(c->cx, n->dtype, n->ndim, n->shape,
                            cn->store == CS_VIEW ? cn->lay.stride : NULL, ptr);
}

static int arg_index(const kgroup *k, int v) {
    for (int i = 0; i < k->nargs; i++)
        if (k->args[i] == v)
            return i;
    return -1;
}

// ---- library calls --------------------------------------------------------------------

// codegen_cuda's GEMM description: the batch dims in one strided-batched
// call per run of evenly strided batches (cuda_blas.c's matmul rule).
static int run_gemm(cuda_program *c, const kgroup *k, const cuda_gemm_desc *d, const tc_args *a) {
    // the output's dtype is the operands' (codegen_cuda.c's emit_epilogue)
    enum dtype t = c->p.g->nodes[k->args[2]].dtype;
    int64_t bs[TENSOR_MAX_DIMS], sa[TENSOR_MAX_DIMS], sb[TENSOR_MAX_DIMS], sc[TENSOR_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < d->nb; i++)
        if (d->bshape[i] != 1) {
            bs[n] = d->bshape[i];
            sa[n] = d->sa[i];
            sb[n] = d->sb[i];
            n++;
        }
    for (int i = n - 1; i >= 0; i--)
        sc[i] = i == n - 1 ? d->M * d->N : sc[i + 1] * bs[i + 1];
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (m > 0 && sa[m - 1] == sa[i] * bs[i] && sb[m - 1] == sb[i] * bs[i] &&
            sc[m - 1] == sc[i] * bs[i]) {
            bs[m - 1] *= bs[i];
            sa[m - 1] = sa[i], sb[m - 1] = sb[i], sc[m - 1] = sc[i];
        } else {
            bs[m] = bs[i], sa[m] = sa[i], sb[m] = sb[i], sc[m] = sc[i];
            m++;
        }
    }
    int64_t inner = m ? bs[m - 1] : 1, outer = 1;
    for (int i = 0; i < m - 1; i++)
        outer *= bs[i];
    size_t es = dtype_size(t);
    for (int64_t o = 0; o < outer; o++) {
        int64_t oa = 0, ob = 0, oc = 0, rest = o;
        for (int i = m - 2; i >= 0; i--) {
            int64_t q = rest % bs[i];
            rest /= bs[i];
            oa += q * sa[i], ob += q * sb[i], oc += q * sc[i];
        }
        if (cuda_gemm(c->cx, t, d->ta, d->lda, m ? sa[m - 1] : 0, a->p[0] + oa * (int64_t)es, d->tb,
                      d->ldb, m ? sb[m - 1] : 0, a->p[1] + ob * (int64_t)es, d->M, d->N, d->K, 0.0f,
                      a->p[2] + oc * (int64_t)es, m ? sc[m - 1] : 0, inner) < 0)
            return -1;
    }
    return 0;
}

// An op the generated code leaves to a library-style kernel: the eager
// CUDA kernel (the one eager_cuda's table calls for the op, with the same
// arguments), into the operand's arena slot (program.c's extern_run).
// Updates write their sources, the program's device copies, in place and
// leave y, which is their src0, alone.
static int run_extern(cuda_program *c, const kgroup *k, const tc_args *a) {
    cuda_ctx *cc = c->cx;
    const cprog *p = &c->p;
    const graph_node *n = &p->g->nodes[k->anchor];
    bool conv = k->kind == KG_CONV;
    int nsrc = conv ? 2 : n->nsrc, rc = -1;
    tensor *s[GRAPH_MAX_SRCS] = {0}, *y = NULL;
    for (int i = 0; i < nsrc; i++) {
        int v = n->src[i];
        if (p->info[v].store == CS_CONST) {
            s[i] = tensor_view(c->dev[v]);
        } else {
            int ai = conv ? i : arg_index(k, v);
            s[i] = ai >= 0 ? wrap_node(c, v, a->p[ai]) : NULL;
        }
        if (!s[i])
            goto done;
    }
    int out = conv ? 2 : arg_index(k, k->anchor);
    if (out < 0 || !(y = cuda_tensor_wrap(cc, n->dtype, n->ndim, n->shape, NULL, a->p[out])))
        goto done;
    switch (n->op) {
    case OP_CAST:
    case OP_DROPOUT:
    case OP_NOISE: rc = cuda_unary(cc, n, s[0], y); break;
    case OP_SUM:
    case OP_MEAN:
    case OP_MAX: rc = cuda_reduce(cc, n, s[0], y); break;
    case OP_CONV2D:
    case OP_CONV_TRANSPOSE2D: rc = cuda_conv2d(cc, n, s[0], s[1], NULL, y); break;
    case OP_MAX_POOL2D:
    case OP_AVG_POOL2D: rc = cuda_pool2d(cc, n, s[0], y); break;
    case OP_UPSAMPLE_NEAREST: rc = cuda_upsample_nearest(cc, s[0], n->ia[0], y); break;
    case OP_EMBEDDING: rc = cuda_embedding(cc, s[0], s[1], y); break;
    case OP_FFT2_REAL: rc = cuda_fft2_real(cc, s[0], y); break;
    case OP_ATTENTION:
        rc = cuda_attention(cc, n, s[0], s[1], s[2], n->ia[1] ? s[n->ia[1]] : NULL,
                            n->ia[2] ? s[n->ia[2]] : NULL, y);
        break;
    case OP_CONCAT:
        rc = cuda_concat(cc, (int)n->ia[0], n->nsrc, (const tensor *const *)s, y);
        break;
    case OP_ROLL: rc = cuda_roll(cc, n->ia, s[0], y); break;
    case OP_UNFOLD:
    case OP_FOLD: rc = cuda_im2col(cc, n, s[0], y); break;
    case OP_PAD: rc = cuda_pad(cc, n, s[0], y); break;
    case OP_CROSS_ENTROPY: rc = cuda_cross_entropy(cc, s[0], s[1], n->ia[0], n->fa[0], y); break;
    case OP_EMBEDDING_BAG: rc = cuda_embedding_bag(cc, s[0], s[1], s[2], y); break;
    case OP_TRIL_GATHER: rc = cuda_tril_gather(cc, n, s[0], y); break;
    case OP_GRID_SAMPLE: rc = cuda_grid_sample(cc, n, s[0], s[1], y); break;
    case OP_UPSAMPLE_BILINEAR: rc = cuda_grid_sample(cc, n, s[0], NULL, y); break;
    case OP_MSE_LOSS: rc = cuda_mse_loss(cc, s[0], s[1], y); break;
    case OP_BCE_LOSS: rc = cuda_bce_loss(cc, n, s[0], s[1], y); break;
    case OP_LSTM: rc = cuda_lstm(cc, n, (const tensor *const *)s, y); break;
    case OP_CTC_LOSS: rc = cuda_ctc_loss(cc, n, s[0], s[1], s[2], y); break;
    case OP_MATMUL: rc = cuda_matmul(cc, s[0], s[1], y); break;
    case OP_LINEAR: rc = cuda_linear(cc, s[0], s[1], n->nsrc > 2 ? s[2] : NULL, y); break;
    case OP_DEQUANT: rc = cuda_dequant(cc, n, s[0], s[1], y); break;
    case OP_QLINEAR:
        rc = cuda_qlinear(cc, n, s[0], s[1], s[2], n->nsrc > 3 ? s[3] : NULL, y);
        break;
    case OP_CONTIGUOUS: rc = cuda_copy(cc, s[0], y); break;
    case OP_GE: rc = cuda_ge(cc, s[0], s[1], y); break;
    case OP_BATCH_NORM:
        rc = n->ia[0]
                 ? cuda_batch_norm_train(cc, s[0], s[1], s[2], s[3], s[4], n->fa[0], n->fa[1], y)
                 : cuda_batch_norm(cc, s[0], s[1], s[2], s[3], s[4], n->fa[0], y);
        break;
    // backward
    case OP_ACT_GRAD: rc = cuda_act_grad(cc, n, s[0], s[1], y); break;
    case OP_SUM_TO: rc = cuda_sum_to(cc, s[0], y); break;
    case OP_SOFTMAX_GRAD:
    case OP_LOG_SOFTMAX_GRAD:
        rc = cuda_softmax_grad(cc, s[0], s[1], n->op == OP_LOG_SOFTMAX_GRAD, n->ia[0], y);
        break;
    case OP_LAYER_NORM_GRAD:
    case OP_RMS_NORM_GRAD:
    case OP_BATCH_NORM_GRAD:
    case OP_GROUP_NORM_GRAD: rc = cuda_norm_grad(cc, n, s[0], s[1], s[2], y); break;
    case OP_LAYER_NORM_WGRAD:
    case OP_RMS_NORM_WGRAD:
    case OP_BATCH_NORM_WGRAD:
    case OP_GROUP_NORM_WGRAD: rc = cuda_norm_wgrad(cc, n, s[0], s[1], y); break;
    case OP_BATCH_NORM_STATS: rc = cuda_batch_norm_stats(cc, s[0], n->fa[0], y); break;
    case OP_CONV2D_GRAD_INPUT:
    case OP_CONV2D_GRAD_WEIGHT: rc = cuda_conv2d_grad(cc, n, s[0], s[1], y); break;
    case OP_MAX_POOL2D_GRAD: rc = cuda_pool2d_grad(cc, n, s[0], s[1], y); break;
    case OP_AVG_POOL2D_GRAD: rc = cuda_pool2d_grad(cc, n, s[0], NULL, y); break;
    case OP_EMBEDDING_GRAD: rc = cuda_embedding_grad(cc, s[0], s[1], y); break;
    case OP_SLICE_GRAD: rc = cuda_slice_grad(cc, n, s[0], y); break;
    case OP_PAD_GRAD: rc = cuda_pad_grad(cc, n, s[0], y); break;
    case OP_LSTM_GRAD: rc = cuda_lstm_grad(cc, n, (const tensor *const *)s, y); break;
    case OP_EMBEDDING_BAG_GRAD: rc = cuda_embedding_bag_grad(cc, s[0], s[1], s[2], y); break;
    case OP_TRIL_GATHER_GRAD: rc = cuda_tril_gather_grad(cc, n, s[0], y); break;
    case OP_GRID_SAMPLE_GRAD: rc = cuda_grid_sample_grad(cc, n, s[0], s[1], y); break;
    case OP_UPSAMPLE_BILINEAR_GRAD: rc = cuda_grid_sample_grad(cc, n, s[0], NULL, y); break;
    case OP_GRID_SAMPLE_GRAD_GRID:
        rc = cuda_grid_sample_grad_grid(cc, n, s[0], s[1], s[2], y);
        break;
    case OP_CROSS_ENTROPY_GRAD: rc = cuda_cross_entropy_grad(cc, n, s[0], s[1], s[2], y); break;
    case OP_MSE_LOSS_GRAD: rc = cuda_mse_loss_grad(cc, s[0], s[1], s[2], y); break;
    case OP_BCE_LOSS_GRAD: rc = cuda_bce_loss_grad(cc, n, s[0], s[1], s[2], y); break;
    case OP_CTC_LOSS_GRAD: rc = cuda_ctc_loss_grad(cc, n, s[0], s[1], s[2], s[3], y); break;
    case OP_FOUND_INF: rc = cuda_found_inf(cc, n, (const tensor *const *)s, y); break;
    case OP_ATTENTION_GRAD:
        rc = cuda_attention_grad(cc, n, s[0], s[1], s[2], s[3], s[4],
                                 n->ia[1] ? s[n->ia[1]] : NULL, n->ia[2] ? s[n->ia[2]] : NULL, y);
        break;
    // updates, in place; the grad scaler's sources (graph_scaler_src) last
    case OP_SGD: {
        int sc = graph_scaler_src(n);
        rc = cuda_sgd(cc, n, s[0], s[1], (sc < 0 ? n->nsrc : sc) > 2 ? s[2] : NULL,
                      sc < 0 ? NULL : (const tensor *const *)s + sc);
        break;
    }
    case OP_ADAMW: {
        int sc = graph_scaler_src(n);
        rc = cuda_adamw(cc, n, s[0], s[1], s[2], s[3],
                        sc < 0 ? NULL : (const tensor *const *)s + sc);
        break;
    }
    case OP_RUNNING_STAT: rc = cuda_running_stat(cc, n, s[0], s[1]); break;
    case OP_KV_WRITE: rc = cuda_kv_write(cc, s[0], s[1], s[2]); break;
    case OP_SCALER_UPDATE: rc = cuda_scaler_update(cc, n, s[0], s[1], s[2], s[3]); break;
    default:
        snprintf(cc->err, sizeof cc->err, "compiled mode has no CUDA kernel for %s",
                 op_name(n->op));
    }
done:
    if (rc < 0 && !cc->err[0])
        snprintf(cc->err, sizeof cc->err, "out of host memory for a tensor header");
    for (int i = 0; i < nsrc; i++)
        cuda_tensor_free(cc, s[i]);
    cuda_tensor_free(cc, y);
    return rc;
}

// The step word, when the step changed: a copy in stream order before the
// step's kernels, staged from pageable memory as the call returns, so the
// caller may set the next step at once.
static int send_step(cuda_program *c) {
    if (c->step == c->step_sent)
        return 0;
    CUDA_TRY(c->err, sizeof c->err,
             cudaMemcpyAsync(tensor_data(c->step_dev), &c->step, sizeof c->step,
                             cudaMemcpyHostToDevice, c->cx->stream));
    c->step_sent = c->step;
    return 0;
}

// Every group once, in order, on the stream.
static int run_groups(cuda_program *c) {
    cuda_ctx *cc = c->cx;
    int64_t k0 = cc->kernels;
    cc->step = c->step; // for the library kernels that take the step at launch
    for (int gi = 0; gi < c->p.ngroups; gi++) {
        const kgroup *k = &c->p.groups[gi];
        const cuda_launch *l = &c->launch[gi];
        const tc_args *a = &c->args[gi];
        int rc = 0;
        cc->err[0] = 0;
        if (l->lib == CUDA_LIB_GEMM)
            rc = run_gemm(c, k, &l->gemm, a);
        else if (l->lib != CUDA_LIB_NONE)
            rc = run_extern(c, k, a);
        if (rc == 0 && l->kernel >= 0) {
            void *params[] = {(void *)a};
            cudaError_t e =
                cudaLaunchKernel((const void *)c->kern[l->kernel], (dim3){l->grid, 1, 1},
                                 (dim3){l->block, 1, 1}, params, l->smem, cc->stream);
            rc = e == cudaSuccess ? CUDA_LAUNCHED(cc, "cudaLaunchKernel")
                                  : cuda_fail_at(cc->err, sizeof cc->err, "cudaLaunchKernel",
                                                 __FILE__, __LINE__, cudaGetErrorString(e));
        }
        if (rc < 0) {
            const graph_node *n = &c->p.g->nodes[k->anchor >= 0 ? k->anchor : k->nodes[0]];
            snprintf(c->err, sizeof c->err, "group %d (%s): %s", gi, op_name(n->op), cc->err);
            return -1;
        }
    }
    c->step_kernels = cc->kernels - k0;
    return 0;
}

// ---- building ------------------------------------------------------------------------------

static int fail(cuda_program *c, char *err, size_t cap, const char *msg) {
    snprintf(err, cap, "%s", msg);
    cuda_program_free(c);
    return -1;
}

static void dump(const compile_opts *o, const cprog *p, const char *src) {
    if (!o || !o->dump_dir)
        return;
    mkdir(o->dump_dir, 0755);
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.cu", o->dump_dir, p->m->name);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(src, f);
        fclose(f);
    }
}

// NVRTC for this GPU's architecture, loaded as a library; the kernels by name.
static int load_kernels(cuda_program *c, const char *src, char *err, size_t cap) {
    int major = 0, minor = 0;
    CUDA_TRY(err, cap,
             cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, c->cx->device));
    CUDA_TRY(err, cap,
             cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, c->cx->device));
    cuda_nvrtc_result r;
    char name[300];
    snprintf(name, sizeof name, "%s.cu", c->p.m->name);
    if (cuda_nvrtc_compile(src, name, major * 10 + minor, &r, err, cap) < 0) {
        size_t len = strlen(err);
        snprintf(err + len, cap - len, "; NVRTC says: %.300s", r.log);
        cuda_nvrtc_result_free(&r);
        return -1;
    }
    cudaError_t e = cudaLibraryLoadData(&c->lib, r.cubin, NULL, NULL, 0, NULL, NULL, 0);
    cuda_nvrtc_result_free(&r);
    if (e != cudaSuccess)
        return cuda_fail_at(err, cap, "cudaLibraryLoadData", __FILE__, __LINE__,
                            cudaGetErrorString(e));
    for (int gi = 0; gi < c->p.ngroups; gi++)
        if (c->p.groups[gi].kernel + 1 > c->nk)
            c->nk = c->p.groups[gi].kernel + 1;
    c->kern = calloc((size_t)(c->nk ? c->nk : 1), sizeof *c->kern);
    if (!c->kern)
        return snprintf(err, cap, "out of host memory"), -1;
    for (int k = 0; k < c->nk; k++) {
        char kn[32];
        snprintf(kn, sizeof kn, "tk%d", k);
        CUDA_TRY(err, cap, cudaLibraryGetKernel(&c->kern[k], c->lib, kn));
    }
    return 0;
}

// The training state: every source an update writes in place.
static int find_written(cuda_program *c) {
    const graph *g = c->p.g;
    c->written = calloc((size_t)(g->n ? g->n : 1), sizeof *c->written);
    if (!c->written)
        return -1;
    for (int v = 0; v < g->n; v++) {
        const graph_node *n = &g->nodes[v];
        if (!op_has_side_effect(n))
            continue;
        for (int s = 0; s < n->nsrc; s++)
            if (compile_writes(n, s))
                c->written[n->src[s]] = true;
    }
    return 0;
}

// The training state back to its starting values (m->values), after the
// step that cuda_program_new runs to make every library plan.
static int restore_state(cuda_program *c, char *err, size_t cap) {
    const cprog *p = &c->p;
    for (int i = 0; i < p->m->g->n; i++) {
        int v = p->src_of[i];
        if (v >= 0 && c->written[v] && cuda_tensor_copy_in(c->cx, c->dev[v], p->m->values[i]) < 0)
            return snprintf(err, cap, "restoring %%%d after the first step: %s", i, c->cx->err), -1;
    }
    return 0;
}

static int copy_table(cuda_program *c, tensor *t, char *const *ptrs, int n, char *err, size_t cap) {
    CUDA_TRY(err, cap,
             cudaMemcpyAsync(tensor_data(t), ptrs, (size_t)n * sizeof *ptrs, cudaMemcpyHostToDevice,
                             c->cx->stream));
    CUDA_TRY(err, cap, cudaStreamSynchronize(c->cx->stream));
    return 0;
}

// An update group's operands as a device array of pointers (tc_args has
// room for KG_MAX_ARGS): uploaded once, since the pointers never change.
static int make_table(cuda_program *c, int gi, char *err, size_t cap) {
    const cprog *p = &c->p;
    const kgroup *k = &p->groups[gi];
    int n = compile_group_operands(p, k, NULL, 0), rc = -1;
    int64_t len = n ? n : 1;
    int *ops = malloc((size_t)len * sizeof *ops);
    char **ptrs = malloc((size_t)len * sizeof *ptrs);
    if (!ops || !ptrs) {
        snprintf(err, cap, "out of host memory");
    } else if (!(c->tables[gi] = cuda_tensor_new(c->cx, DT_I64, 1, &len))) {
        snprintf(err, cap, "an update's pointer table: %s", c->cx->err);
    } else {
        compile_group_operands(p, k, ops, n);
        for (int i = 0; i < n; i++)
            ptrs[i] = pointer_of(c, ops[i]);
        rc = copy_table(c, c->tables[gi], ptrs, n, err, cap);
        c->args[gi].p[0] = tensor_data(c->tables[gi]);
    }
    free(ops);
    free(ptrs);
    return rc;
}

// A library kernel that takes the training step as a launch argument (an
// update the generator leaves to the eager kernel, noise, and dropout were it
// not generated): a captured graph would keep the step it was recorded with.
static bool launch_reads_step(const cprog *p, const kgroup *k, const cuda_launch *l) {
    if (l->lib != CUDA_LIB_EXTERN)
        return false;
    enum op op = p->g->nodes[k->anchor].op;
    return op == OP_SGD || op == OP_ADAMW || op == OP_DROPOUT || op == OP_NOISE;
}

// Sources and the constants a library call reads, on the device.
static int upload_values(cuda_program *c, char *err, size_t cap) {
    cprog *p = &c->p;
    const graph *mg = p->m->g;
    for (int i = 0; i < mg->n; i++) {
        int v = p->src_of[i];
        if (v < 0)
            continue;
        if (!p->m->values || !p->m->values[i])
            return snprintf(err, cap, "%s %%%d has no value: call model_init_values first",
                            op_name(mg->nodes[i].op), i),
                   -1;
        if (c->share && cuda_share_lends(p->m, i)) {
            if (!(c->dev[v] = cuda_share_value(c->share, p->m, i, err, cap)))
                return -1;
            c->lent[v] = true;
        } else if (!(c->dev[v] = cuda_tensor_upload(c->cx, p->m->values[i]))) {
            return snprintf(err, cap, "copying %%%d to the GPU: %s", i, c->cx->err), -1;
        }
    }
    for (int v = 0; v < p->g->n; v++) {
        const graph_node *n = &p->g->nodes[v];
        if (p->info[v].store != CS_CONST || c->dev[v])
            continue;
        tensor *h = tensor_new_empty(n->dtype, n->ndim, n->shape);
        if (!h)
            return snprintf(err, cap, "out of host memory"), -1;
        int64_t numel = tensor_numel(h), zero[TENSOR_MAX_DIMS] = {0};
        size_t es = dtype_size(n->dtype);
        if (numel > 0)
            tensor_set(h, zero, n->fa[0]);
        for (int64_t i = 1; i < numel; i++)
            memcpy((char *)tensor_data(h) + i * (int64_t)es, tensor_data(h), es);
        c->dev[v] = cuda_tensor_upload(c->cx, h);
        tensor_free(h);
        if (!c->dev[v])
            return snprintf(err, cap, "copying a constant to the GPU: %s", c->cx->err), -1;
    }
    return 0;
}

int cuda_program_new(const model *m, const compile_opts *o, bool allow_tf32, cuda_program **out,
                     char *err, size_t cap) {
    return cuda_program_new_shared(m, o, allow_tf32, NULL, out, err, cap);
}

// The context: the share's, or the program's own.
static int open_ctx(cuda_program *c, bool allow_tf32, cuda_share *share, char *err, size_t cap) {
    if (share) {
        c->share = share;
        c->cx = cuda_share_ctx(share);
        return 0;
    }
    char why[512];
    if (cuda_probe_here(why, sizeof why) < 0)
        return snprintf(err, cap, "%s", why), -1;
    c->ctx_ok = true;
    c->cx = &c->c;
    if (cuda_ctx_init(&c->c, cuda_device_index(), allow_tf32) < 0)
        return snprintf(err, cap, "CUDA set-up: %s", c->c.err), -1;
    return 0;
}

int cuda_program_new_shared(const model *m, const compile_opts *o, bool allow_tf32,
                            cuda_share *share, cuda_program **out, char *err, size_t cap) {
    double t0 = base_now();
    *out = NULL;
    cuda_program *c = calloc(1, sizeof *c);
    if (!c)
        return snprintf(err, cap, "out of host memory"), -1;
    cprog *p = &c->p;
    c->capture = o ? o->capture : true;
    if (compile_cuda_passes(p, m, o ? o->fusion : true, o ? o->log : NULL) < 0)
        return fail(c, err, cap, p->err);
    char *src = compile_codegen_cuda(p);
    if (!src)
        return fail(c, err, cap, p->err[0] ? p->err : "CUDA code generation ran out of memory");
    dump(o, p, src);
    char why[512];
    if (open_ctx(c, allow_tf32, share, why, sizeof why) < 0) {
        free(src);
        return fail(c, err, cap, why);
    }
    int rc = load_kernels(c, src, err, cap);
    free(src);
    if (rc < 0) {
        cuda_program_free(c);
        return -1;
    }
    graph *g = p->g;
    c->dev = calloc((size_t)g->n, sizeof *c->dev);
    c->lent = calloc((size_t)g->n, sizeof *c->lent);
    c->launch = calloc((size_t)(p->ngroups ? p->ngroups : 1), sizeof *c->launch);
    c->args = calloc((size_t)(p->ngroups ? p->ngroups : 1), sizeof *c->args);
    c->tables = calloc((size_t)(p->ngroups ? p->ngroups : 1), sizeof *c->tables);
    if (!c->dev || !c->lent || !c->launch || !c->args || !c->tables || find_written(c) < 0)
        return fail(c, err, cap, "out of host memory");
    if (upload_values(c, err, cap) < 0) {
        cuda_program_free(c);
        return -1;
    }
    if (p->arena_bytes && !(c->arena = cuda_scratch_get(c->cx, p->arena_bytes)))
        return fail(c, err, cap, c->cx->err);
    if (!(c->step_dev = cuda_tensor_new(c->cx, DT_I64, 1, (int64_t[]){1})))
        return fail(c, err, cap, c->cx->err);
    c->step = 1; // as compiled_set_step's first step
    c->step_sent = 0;
    for (int gi = 0; gi < p->ngroups; gi++) {
        cuda_launch *l = &c->launch[gi];
        if (compile_cuda_launch(p, gi, l) < 0)
            return fail(c, err, cap, p->err);
        const kgroup *k = &p->groups[gi];
        c->args[gi].step = (const uint64_t *)tensor_data(c->step_dev);
        for (int i = 0; i < k->nargs; i++)
            c->args[gi].p[i] = pointer_of(c, k->args[i]);
        if (l->table && make_table(c, gi, err, cap) < 0) {
            cuda_program_free(c);
            return -1;
        }
        if (c->capture && launch_reads_step(p, k, l)) {
            c->capture = false;
            if (p->log)
                fprintf(p->log, "capture: off, %s %%%d takes the step as a launch argument\n",
                        op_name(g->nodes[k->anchor].op), k->anchor);
        }
    }
    // a first step outside any graph: library plans, workspaces, segments;
    // then the training state back to where it started
    if (send_step(c) < 0 || run_groups(c) < 0 || cuda_ctx_sync(c->cx) < 0)
        return fail(c, err, cap, c->err[0] ? c->err : c->cx->err);
    if (restore_state(c, err, cap) < 0) {
        cuda_program_free(c);
        return -1;
    }
    if (c->capture) {
        cudaStream_t s = c->cx->stream;
        cudaError_t e = cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed);
        if (e == cudaSuccess) {
            int r = run_groups(c);
            e = cudaStreamEndCapture(s, &c->graph);
            if (r < 0)
                return fail(c, err, cap, c->err);
        }
        if (e == cudaSuccess)
            e = cudaGraphInstantiate(&c->exec, c->graph, 0);
        if (e != cudaSuccess) {
            cuda_fail_at(why, sizeof why, "capturing the step in a CUDA graph", __FILE__, __LINE__,
                         cudaGetErrorString(e));
            return fail(c, err, cap, why);
        }
    }
    size_t params = 0;
    for (int v = 0; v < g->n; v++)
        if (c->dev[v])
            params += tensor_nbytes(c->dev[v]);
    c->st.peak_bytes = params + p->arena_bytes;
    c->st.arena_bytes = p->arena_bytes;
    c->st.kernels = c->step_kernels;
    c->st.compile_s = base_now() - t0;
    *out = c;
    return 0;
}

// ---- running --------------------------------------------------------------------------------

void cuda_program_set_step(cuda_program *c, uint64_t step) { c->step = step; }

// A shared program's inputs: m->values into their device copies, in stream
// order before the step (a replayed graph reads them there: the positions
// of a generation's decode step).
static int send_inputs(cuda_program *c) {
    const cprog *p = &c->p;
    const graph *mg = p->m->g;
    for (int i = 0; i < mg->n; i++) {
        int v = p->src_of[i];
        if (v < 0 || mg->nodes[i].op != OP_INPUT || !c->dev[v] || !p->m->values[i])
            continue;
        if (cuda_share_send(c->cx, c->dev[v], p->m->values[i], c->err, sizeof c->err) < 0)
            return -1;
    }
    return 0;
}

int cuda_program_run(cuda_program *c, compiled_stats *st) {
    c->err[0] = 0;
    if (send_step(c) < 0 || (c->share && send_inputs(c) < 0))
        return -1;
    if (c->exec) {
        cudaError_t e = cudaGraphLaunch(c->exec, c->cx->stream);
        if (e != cudaSuccess) {
            cuda_fail_at(c->err, sizeof c->err, "cudaGraphLaunch", __FILE__, __LINE__,
                         cudaGetErrorString(e));
            return -1;
        }
    } else if (run_groups(c) < 0) {
        return -1;
    }
    if (st)
        *st = c->st;
    return 0;
}

int cuda_program_sync(cuda_program *c) {
    if (cuda_ctx_sync(c->cx) < 0) {
        snprintf(c->err, sizeof c->err, "%s", c->cx->err);
        return -1;
    }
    return 0;
}

int cuda_program_outputs(cuda_program *c, tensor **outputs) {
    const graph *g = c->p.g;
    for (int k = 0; k < g->noutputs; k++)
        outputs[k] = NULL;
    for (int k = 0; k < g->noutputs; k++)
        if (cuda_program_output(c, k, &outputs[k]) < 0) {
            for (int j = 0; j < k; j++) {
                tensor_free(outputs[j]);
                outputs[j] = NULL;
            }
            return -1;
        }
    return 0;
}

int cuda_program_output(cuda_program *c, int k, tensor **out) {
    const graph *g = c->p.g;
    if (!out) // the outputs live in the arena: nothing to drop
        return 0;
    *out = NULL;
    if (k < 0 || k >= g->noutputs)
        return snprintf(c->err, sizeof c->err, "output %d: the step has %d", k, g->noutputs), -1;
    if (cuda_program_sync(c) < 0)
        return -1;
    int v = g->outputs[k];
    tensor *d = wrap_node(c, v, pointer_of(c, v));
    *out = d ? cuda_tensor_download(c->cx, d) : NULL;
    cuda_tensor_free(c->cx, d);
    if (!*out)
        return snprintf(c->err, sizeof c->err, "output %d: %s", k, c->cx->err), -1;
    return 0;
}

int cuda_program_download_state(cuda_program *c) {
    const cprog *p = &c->p;
    if (cuda_program_sync(c) < 0)
        return -1;
    for (int i = 0; i < p->m->g->n; i++) {
        int v = p->src_of[i];
        if (v < 0 || !c->written[v])
            continue;
        tensor *h = cuda_tensor_download(c->cx, c->dev[v]);
        if (!h) {
            snprintf(c->err, sizeof c->err, "downloading %%%d: %s", i, c->cx->err);
            return -1;
        }
        memcpy(tensor_data(p->m->values[i]), tensor_data(h), tensor_nbytes(h));
        tensor_free(h);
    }
    return 0;
}

const char *cuda_program_error(const cuda_program *c) { return c->err; }
void *cuda_program_stream(const cuda_program *c) { return (void *)c->cx->stream; }

void cuda_program_free(cuda_program *c) {
    if (!c)
        return;
    cprog *p = &c->p;
    if (c->exec)
        cudaGraphExecDestroy(c->exec);
    if (c->graph)
        cudaGraphDestroy(c->graph);
    if (c->cx) {
        if (c->dev)
            for (int v = 0; v < p->g->n; v++)
                if (!c->lent || !c->lent[v])
                    cuda_tensor_free(c->cx, c->dev[v]);
        if (c->tables)
            for (int gi = 0; gi < p->ngroups; gi++)
                cuda_tensor_free(c->cx, c->tables[gi]);
        cuda_tensor_free(c->cx, c->step_dev);
        if (c->arena)
            cuda_scratch_put(c->cx, c->arena);
    }
    if (c->ctx_ok)
        cuda_ctx_free(&c->c);
    if (c->lib)
        cudaLibraryUnload(c->lib);
    free(c->kern);
    free(c->launch);
    free(c->args);
    free(c->tables);
    free(c->written);
    free(c->dev);
    free(c->lent);
    compile_prog_free(p);
    free(c);
}
