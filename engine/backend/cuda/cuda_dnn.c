// Convolution, transposed convolution, pooling and the convolution's
// gradients through cuDNN (cuda_rt.h), as PyTorch's CUDA eager with
// benchmark mode off. The forward convolution runs an execution plan of
// the graph API, made once per shape (be_plan, below); the rest, and a
// shape no plan takes, the legacy API: the algorithm is cuDNN's first
// heuristic choice (cudnnGet*Algorithm_v7), picked once per shape and
// kept with its descriptors, so a later step only binds pointers. For the gradients
// (cudnnConvolutionBackwardData / BackwardFilter) it is the first
// deterministic choice, as with torch.backends.cudnn.deterministic, so
// that every training step gives the same bits. Inputs may be strided (the
// tensor descriptors carry strides); weights and biases are made
// contiguous. f32 convolutions use CUDNN_FMA_MATH (no TF32) unless the
// context allows TF32; f16 ones tensor cores, accumulating in f32. A
// convolution's bias is cudnnAddTensor. TCBENCH_LOG=cudnn prints each
// choice when it is made.
#include "cuda_rt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if !TCBENCH_HAVE_CUDNN

int cuda_dnn_new(cuda_ctx *c) {
    c->dnn = NULL;
    return 0;
}
void cuda_dnn_free(cuda_ctx *c) { (void)c; }

static int no_dnn(cuda_ctx *c, const graph_node *n) {
    snprintf(c->err, sizeof c->err,
             "%s needs cuDNN, and this build found none (install cuDNN under the CUDA toolkit "
             "and reconfigure)",
             op_name(n->op));
    return -1;
}

int cuda_conv2d(cuda_ctx *c, const graph_node *n, const tensor *x, const tensor *w,
                const tensor *bias, tensor *out) {
    (void)x, (void)w, (void)bias, (void)out;
    return no_dnn(c, n);
}

int cuda_pool2d(cuda_ctx *c, const graph_node *n, const tensor *x, tensor *out) {
    (void)x, (void)out;
    return no_dnn(c, n);
}

int cuda_conv2d_grad(cuda_ctx *c, const graph_node *n, const tensor *dy, const tensor *b,
                     tensor *out) {
    (void)dy, (void)b, (void)out;
    return no_dnn(c, n);
}

#else

// x (N, C, H, W), w (O, C/g, kh, kw) and y (N, O, OH, OW) in the
// convolution's roles: for the gradients y is dy, and x or w the output
typedef struct dnn_key {
    int op, dtype, has_bias;
    int64_t x[4], xs[4], w[4], y[4], ys[4];
    int64_t ia[9];
} dnn_key;

typedef struct dnn_entry {
    dnn_key key;
    cudnnTensorDescriptor_t xd, yd, bd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    cudnnPoolingDescriptor_t pd;
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd;
    cudnnConvolutionBwdFilterAlgo_t bwf;
    size_t ws;
    bool direct; // a gradient cuDNN has no algorithm for: cuda_conv2d_grad_direct
    // the forward convolution's execution plan (graph API), made at its
    // first call; NULL: the legacy call (none, or TCBENCH_CUDNN_LEGACY=1)
    cudnnBackendDescriptor_t plan;
    int64_t plan_ws;
    bool plan_tried;
    struct dnn_entry *next;
} dnn_entry;

struct cuda_dnn {
    cudnnHandle_t h;
    dnn_entry *head;
    bool legacy; // TCBENCH_CUDNN_LEGACY=1: no execution plans (be_plan)
};

int cuda_dnn_new(cuda_ctx *c) {
    c->dnn = calloc(1, sizeof *c->dnn);
    if (!c->dnn) {
        snprintf(c->err, sizeof c->err, "out of host memory for the cuDNN context");
        return -1;
    }
    const char *l = getenv("TCBENCH_CUDNN_LEGACY");
    c->dnn->legacy = l && *l && strcmp(l, "0") != 0;
    CUDNN_CTX(c, cudnnCreate(&c->dnn->h));
    CUDNN_CTX(c, cudnnSetStream(c->dnn->h, c->stream));
    return 0;
}

static void entry_free(dnn_entry *e) {
    if (e->xd)
        cudnnDestroyTensorDescriptor(e->xd);
    if (e->yd)
        cudnnDestroyTensorDescriptor(e->yd);
    if (e->bd)
        cudnnDestroyTensorDescriptor(e->bd);
    if (e->wd)
        cudnnDestroyFilterDescriptor(e->wd);
    if (e->cd)
        cudnnDestroyConvolutionDescriptor(e->cd);
    if (e->pd)
        cudnnDestroyPoolingDescriptor(e->pd);
    if (e->plan)
        cudnnBackendDestroyDescriptor(e->plan);
    free(e);
}

void cuda_dnn_free(cuda_ctx *c) {
    if (!c->dnn)
        return;
    for (dnn_entry *e = c->dnn->head, *nx; e; e = nx) {
        nx = e->next;
        entry_free(e);
    }
    if (c->dnn->h)
        cudnnDestroy(c->dnn->h);
    free(c->dnn);
    c->dnn = NULL;
}

static bool log_on(void) {
    const char *l = getenv("TCBENCH_LOG");
    return l && strstr(l, "cudnn");
}

static int as_int(cuda_ctx *c, int64_t v, int *out) {
    if (v < 0 || v > 0x7fffffff) {
        snprintf(c->err, sizeof c->err, "cuDNN: a dimension or stride exceeds 32 bits");
        return -1;
    }
    *out = (int)v;
    return 0;
}

static int tensor_desc(cuda_ctx *c, cudnnTensorDescriptor_t *d, cudnnDataType_t dt,
                       const int64_t *shape, const int64_t *stride) {
    int s[4], st[4];
    for (int i = 0; i < 4; i++)
        if (as_int(c, shape[i], &s[i]) < 0 || as_int(c, stride[i], &st[i]) < 0)
            return -1;
    CUDNN_CTX(c, cudnnCreateTensorDescriptor(d));
    CUDNN_CTX(c, cudnnSetTensor4dDescriptorEx(*d, dt, s[0], s[1], s[2], s[3], st[0], st[1], st[2],
                                              st[3]));
    return 0;
}

static int entry_init(cuda_ctx *c, dnn_entry *e) {
    const dnn_key *k = &e->key;
    const int64_t *ia = k->ia;
    cudnnHandle_t h = c->dnn->h;
    cudnnDataType_t dt = k->dtype == DT_F16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
    if (tensor_desc(c, &e->xd, dt, k->x, k->xs) < 0 || tensor_desc(c, &e->yd, dt, k->y, k->ys) < 0)
        return -1;
    if (k->op == OP_MAX_POOL2D || k->op == OP_AVG_POOL2D) {
        CUDNN_CTX(c, cudnnCreatePoolingDescriptor(&e->pd));
        // avg divides by the whole window, padding included (PyTorch's
        // default), or by its cells in the input (ia7)
        cudnnPoolingMode_t mode = k->op == OP_MAX_POOL2D ? CUDNN_POOLING_MAX
                                  : ia[7] ? CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING
                                          : CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING;
        CUDNN_CTX(c, cudnnSetPooling2dDescriptor(e->pd, mode, CUDNN_PROPAGATE_NAN, (int)ia[4],
                                                 (int)ia[5], (int)ia[2], (int)ia[3], (int)ia[0],
                                                 (int)ia[1]));
        return 0;
    }
    bool tr = k->op == OP_CONV_TRANSPOSE2D;
    int g = (int)ia[6];
    // a transposed convolution is the data gradient of the convolution from
    // y's shape to x's, whose filter is ours: (C, O/g, kh, kw)
    CUDNN_CTX(c, cudnnCreateFilterDescriptor(&e->wd));
    CUDNN_CTX(c, cudnnSetFilter4dDescriptor(e->wd, dt, CUDNN_TENSOR_NCHW, (int)k->w[0],
                                            (int)k->w[1], (int)k->w[2], (int)k->w[3]));
    CUDNN_CTX(c, cudnnCreateConvolutionDescriptor(&e->cd));
    CUDNN_CTX(c, cudnnSetConvolution2dDescriptor(e->cd, (int)ia[2], (int)ia[3], (int)ia[0],
                                                 (int)ia[1], (int)ia[4], (int)ia[5],
                                                 CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    CUDNN_CTX(c, cudnnSetConvolutionGroupCount(e->cd, g));
    cudnnMathType_t mt = k->dtype == DT_F16 ? CUDNN_TENSOR_OP_MATH
                         : c->allow_tf32    ? CUDNN_DEFAULT_MATH
                                            : CUDNN_FMA_MATH;
    CUDNN_CTX(c, cudnnSetConvolutionMathType(e->cd, mt));
    if (k->has_bias) {
        int64_t bs[4] = {1, k->y[1], 1, 1}, bst[4] = {k->y[1], 1, 1, 1};
        if (tensor_desc(c, &e->bd, dt, bs, bst) < 0)
            return -1;
    }
    // the first heuristic choice that runs; for the gradients, the first
    // deterministic one when there is one
    bool det = k->op == OP_CONV2D_GRAD_INPUT || k->op == OP_CONV2D_GRAD_WEIGHT;
    int got = 0, pick = -1, algo = 0;
#define DNN_PICK(perf)                                                                             \
    for (int i = 0; i < got; i++) {                                                                \
        if (perf[i].status != CUDNN_STATUS_SUCCESS)                                                \
            continue;                                                                              \
        if (pick < 0)                                                                              \
            pick = i;                                                                              \
        if (!det || perf[i].determinism == CUDNN_DETERMINISTIC) {                                  \
            pick = i;                                                                              \
            break;                                                                                 \
        }                                                                                          \
    }                                                                                              \
    if (pick >= 0) {                                                                               \
        algo = (int)perf[pick].algo;                                                               \
        e->ws = perf[pick].memory;                                                                 \
    }
    if (k->op == OP_CONV2D) {
        cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        CUDNN_CTX(c, cudnnGetConvolutionForwardAlgorithm_v7(h, e->xd, e->wd, e->cd, e->yd,
                                                            CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got,
                                                            perf));
        DNN_PICK(perf)
        e->fwd = (cudnnConvolutionFwdAlgo_t)algo;
    } else if (k->op == OP_CONV2D_GRAD_WEIGHT) {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        CUDNN_CTX(c, cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                         h, e->xd, e->yd, e->cd, e->wd, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
                         &got, perf));
        DNN_PICK(perf)
        e->bwf = (cudnnConvolutionBwdFilterAlgo_t)algo;
    } else {
        // conv_transpose2d: x is its input, y its output; conv2d_grad_input:
        // y is dy and x the gradient made
        cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        if (tr)
            CUDNN_CTX(c, cudnnGetConvolutionBackwardDataAlgorithm_v7(
                             h, e->wd, e->xd, e->cd, e->yd, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                             &got, perf));
        else
            CUDNN_CTX(c, cudnnGetConvolutionBackwardDataAlgorithm_v7(
                             h, e->wd, e->yd, e->cd, e->xd, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                             &got, perf));
        DNN_PICK(perf)
        e->bwd = (cudnnConvolutionBwdDataAlgo_t)algo;
    }
#undef DNN_PICK
    // The heuristics can rank no algorithm as supported (channels-last
    // views, some dilated and strided filters; asking each algorithm for its
    // workspace gave none either, on an H200): the gradients have a kernel
    // of their own, the rest fail.
    if (pick < 0 && det) {
        e->direct = true;
        if (log_on())
            fprintf(stderr, "cudnn: %s: no algorithm (%d ranked), the direct kernel\n",
                    op_name((enum op)k->op), got);
        return 0;
    }
    if (pick < 0) {
        snprintf(c->err, sizeof c->err,
                 "%s: cuDNN has no algorithm for these shapes (%d ranked, none supported)",
                 op_name((enum op)k->op), got);
        return -1;
    }
    if (log_on())
        fprintf(stderr,
                "cudnn: %s x(%lld,%lld,%lld,%lld) w(%lld,%lld,%lld,%lld) -> algo %d, %zu "
                "bytes of workspace\n",
                op_name((enum op)k->op), (long long)k->x[0], (long long)k->x[1], (long long)k->x[2],
                (long long)k->x[3], (long long)k->w[0], (long long)k->w[1], (long long)k->w[2],
                (long long)k->w[3], algo, e->ws);
    return 0;
}

// ---- the forward convolution through the graph API ---------------------------
//
// cuDNN 9 runs the legacy cudnnConvolutionForward through its graph
// (backend) API, building what it needs again at every call: on an H200
// that cost about 70 us of host time a convolution, which made eager's
// small convnets host-bound (docs/cuda.md). PyTorch calls the graph API
// and keeps each shape's execution plan; so does this: tensors x, w, y
// (unique ids 1, 2, 3; 16-byte aligned), the convolution, a one-operation
// graph, the heuristic's configurations in order (mode A, PyTorch's
// default), the first whose plan finalizes, leaving out those that convert
// their inputs down and, for f32 unless the context allows TF32, those on
// tensor cores (be_cfg_allowed, as PyTorch filters them). A call then binds three pointers
// and the workspace (a variant pack) and executes. A shape no
// configuration takes keeps the legacy call.

#define BE_ALIGN 16

// cudnnBackendSetAttribute, checked: 0, or -1 with why naming the attribute.
static int be_set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
                  cudnnBackendAttributeType_t type, int64_t count, const void *v, char *why,
                  size_t cap) {
    cudnnStatus_t s = cudnnBackendSetAttribute(d, name, type, count, v);
    if (s == CUDNN_STATUS_SUCCESS)
        return 0;
    snprintf(why, cap, "cudnnBackendSetAttribute(%d): %s", (int)name, cudnnGetErrorString(s));
    return -1;
}

static int be_finalize(cudnnBackendDescriptor_t d, const char *what, char *why, size_t cap) {
    cudnnStatus_t s = cudnnBackendFinalize(d);
    if (s == CUDNN_STATUS_SUCCESS)
        return 0;
    snprintf(why, cap, "cudnnBackendFinalize(%s): %s", what, cudnnGetErrorString(s));
    return -1;
}

static int be_tensor(cudnnBackendDescriptor_t *d, cudnnDataType_t dt, const int64_t *shape,
                     const int64_t *stride, int64_t uid, char *why, size_t cap) {
    int64_t align = BE_ALIGN;
    cudnnStatus_t s = cudnnBackendCreateDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, d);
    if (s != CUDNN_STATUS_SUCCESS) {
        snprintf(why, cap, "cudnnBackendCreateDescriptor(tensor): %s", cudnnGetErrorString(s));
        return -1;
    }
    if (be_set(*d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt, why, cap) < 0 ||
        be_set(*d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, shape, why, cap) < 0 ||
        be_set(*d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, stride, why, cap) < 0 ||
        be_set(*d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, why, cap) < 0 ||
        be_set(*d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align, why, cap) < 0)
        return -1;
    return be_finalize(*d, "tensor", why, cap);
}

// Whether the engine of configuration cfg may run here, as PyTorch
// filters them: none that converts its inputs down, and for f32 without
// TF32 none that computes on tensor cores.
static bool be_cfg_allowed(cuda_ctx *c, cudnnBackendDescriptor_t cfg, bool f32) {
    bool no_tc = f32 && !c->allow_tf32;
    cudnnBackendDescriptor_t eng;
    if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &eng) != CUDNN_STATUS_SUCCESS)
        return false;
    int64_t n = 0;
    cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
    bool ok =
        cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                 &n, &eng) == CUDNN_STATUS_SUCCESS &&
        cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                 CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n,
                                 notes) == CUDNN_STATUS_SUCCESS;
    for (int64_t i = 0; ok && i < n; i++)
        ok = !(no_tc && notes[i] == CUDNN_NUMERICAL_NOTE_TENSOR_CORE) &&
             notes[i] != CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS;
    cudnnBackendDestroyDescriptor(eng);
    return ok;
}

#define BE_CFGS 32

// e's execution plan into e->plan (NULL when no configuration finalizes);
// -1 with why when the graph itself cannot be described.
static int be_plan(cuda_ctx *c, dnn_entry *e, char *why, size_t cap) {
    const dnn_key *k = &e->key;
    const int64_t *ia = k->ia;
    cudnnDataType_t dt = k->dtype == DT_F16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
    cudnnDataType_t ct = CUDNN_DATA_FLOAT;
    int64_t ws[4];
    tensor_strides_contiguous(4, k->w, ws);
    cudnnBackendDescriptor_t x = NULL, w = NULL, y = NULL, conv = NULL, op = NULL, graph = NULL,
                             heur = NULL, cfgs[BE_CFGS] = {0};
    int ncfg = 0, rc = -1;
    if (be_tensor(&x, dt, k->x, k->xs, 1, why, cap) < 0 ||
        be_tensor(&w, dt, k->w, ws, 2, why, cap) < 0 ||
        be_tensor(&y, dt, k->y, k->ys, 3, why, cap) < 0)
        goto done;
    // conv2d's attributes (graph.c): stride ia0-1, padding ia2-3, dilation ia4-5
    int64_t sdims = 2, stride[2] = {ia[0], ia[1]}, pad[2] = {ia[2], ia[3]}, dil[2] = {ia[4], ia[5]};
    cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    float alpha = 1.0f, beta = 0.0f;
    cudnnHandle_t h = c->dnn->h;
    // the handle attributes are deprecated in newer cuDNN 9 releases and
    // required by older ones: named by value
    const cudnnBackendAttributeName_t graph_handle = (cudnnBackendAttributeName_t)800,
                                      plan_handle = (cudnnBackendAttributeName_t)400;
    if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, &conv) ||
        be_set(conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &ct, why, cap) <
            0 ||
        be_set(conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode, why,
               cap) < 0 ||
        be_set(conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &sdims, why, cap) <
            0 ||
        be_set(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dil, why, cap) < 0 ||
        be_set(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, stride, why, cap) <
            0 ||
        be_set(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pad, why, cap) < 0 ||
        be_set(conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pad, why, cap) <
            0 ||
        be_finalize(conv, "convolution", why, cap) < 0)
        goto done;
    if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, &op) ||
        be_set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x,
               why, cap) < 0 ||
        be_set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &w,
               why, cap) < 0 ||
        be_set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y,
               why, cap) < 0 ||
        be_set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
               CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv, why, cap) < 0 ||
        be_set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha, why,
               cap) < 0 ||
        be_set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta, why,
               cap) < 0 ||
        be_finalize(op, "convolution forward", why, cap) < 0)
        goto done;
    if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &graph) ||
        be_set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op, why,
               cap) < 0 ||
        be_set(graph, graph_handle, CUDNN_TYPE_HANDLE, 1, &h, why, cap) < 0 ||
        be_finalize(graph, "operation graph", why, cap) < 0)
        goto done;
    cudnnBackendHeurMode_t hm = CUDNN_HEUR_MODE_A;
    if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur) ||
        be_set(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
               &graph, why, cap) < 0 ||
        be_set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &hm, why, cap) < 0 ||
        be_finalize(heur, "engine heuristics", why, cap) < 0)
        goto done;
    for (ncfg = 0; ncfg < BE_CFGS; ncfg++)
        if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfgs[ncfg]))
            break;
    int64_t got = 0;
    cudnnStatus_t st = cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                CUDNN_TYPE_BACKEND_DESCRIPTOR, ncfg, &got, cfgs);
    if (st != CUDNN_STATUS_SUCCESS) {
        snprintf(why, cap, "cudnnBackendGetAttribute(engine heuristics' results): %s",
                 cudnnGetErrorString(st));
        goto done;
    }
    rc = 0; // from here, no plan is not an error: the legacy call stays
    for (int64_t i = 0; i < got && i < ncfg && !e->plan; i++) {
        if (!be_cfg_allowed(c, cfgs[i], k->dtype == DT_F32))
            continue;
        cudnnBackendDescriptor_t plan;
        int64_t one = 0; // the workspace size's element count
        if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan))
            break;
        char skip[200];
        if (be_set(plan, plan_handle, CUDNN_TYPE_HANDLE, 1, &h, skip, sizeof skip) == 0 &&
            be_set(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                   &cfgs[i], skip, sizeof skip) == 0 &&
            be_finalize(plan, "execution plan", skip, sizeof skip) == 0 &&
            cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                     CUDNN_TYPE_INT64, 1, &one,
                                     &e->plan_ws) == CUDNN_STATUS_SUCCESS)
            e->plan = plan;
        else
            cudnnBackendDestroyDescriptor(plan);
    }
    if (log_on())
        fprintf(stderr, "cudnn: conv2d x(%lld,%lld,%lld,%lld): %s (%lld configurations)\n",
                (long long)k->x[0], (long long)k->x[1], (long long)k->x[2], (long long)k->x[3],
                e->plan ? "an execution plan" : "no plan, the legacy call", (long long)got);
done:
    for (int i = 0; i < ncfg; i++)
        cudnnBackendDestroyDescriptor(cfgs[i]);
    cudnnBackendDescriptor_t all[] = {heur, graph, op, conv, y, w, x};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        if (all[i])
            cudnnBackendDestroyDescriptor(all[i]);
    return rc;
}

// Runs e's plan on x, w into y: 1 done, 0 the legacy call is to run (no
// plan, or a pointer off BE_ALIGN), -1 error.
static int be_run(cuda_ctx *c, dnn_entry *e, const void *x, const void *w, void *y) {
    if (!e->plan_tried) {
        e->plan_tried = true;
        char why[300] = "";
        if (!c->dnn->legacy && be_plan(c, e, why, sizeof why) < 0 && log_on())
            fprintf(stderr, "cudnn: conv2d: no execution plan (%s): the legacy call\n", why);
    }
    if (!e->plan || ((uintptr_t)x | (uintptr_t)w | (uintptr_t)y) % BE_ALIGN)
        return 0;
    void *ws = NULL;
    if (e->plan_ws > 0 && !(ws = cuda_workspace(c, (size_t)e->plan_ws)))
        return -1;
    void *ptrs[3] = {(void *)x, (void *)w, y};
    int64_t uids[3] = {1, 2, 3};
    cudnnBackendDescriptor_t pack;
    CUDNN_CTX(c, cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack));
    char why[300];
    int rc = be_set(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, ptrs, why,
                    sizeof why) < 0 ||
                     be_set(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids,
                            why, sizeof why) < 0 ||
                     be_set(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws,
                            why, sizeof why) < 0 ||
                     be_finalize(pack, "variant pack", why, sizeof why) < 0
                 ? -1
                 : 0;
    if (rc < 0)
        snprintf(c->err, sizeof c->err, "conv2d: %s", why);
    if (rc == 0) {
        cudnnStatus_t s = cudnnBackendExecute(c->dnn->h, e->plan, pack);
        if (s != CUDNN_STATUS_SUCCESS)
            rc = cuda_fail_at(c->err, sizeof c->err, "cudnnBackendExecute", __FILE__, __LINE__,
                              cudnnGetErrorString(s));
    }
    cudnnBackendDestroyDescriptor(pack);
    return rc < 0 ? -1 : 1;
}

static dnn_entry *lookup(cuda_ctx *c, const dnn_key *k) {
    for (dnn_entry *e = c->dnn->head; e; e = e->next)
        if (memcmp(&e->key, k, sizeof *k) == 0)
            return e;
    dnn_entry *e = calloc(1, sizeof *e);
    if (!e) {
        snprintf(c->err, sizeof c->err, "out of host memory for a cuDNN plan");
        return NULL;
    }
    e->key = *k;
    if (entry_init(c, e) < 0) {
        entry_free(e);
        return NULL;
    }
    e->next = c->dnn->head;
    c->dnn->head = e;
    return e;
}

static int key_init(cuda_ctx *c, dnn_key *k, const graph_node *n, const tensor *x, const tensor *w,
                    const tensor *y) {
    memset(k, 0, sizeof *k); // padding too: keys are compared with memcmp
    if (!c->dnn) {
        snprintf(c->err, sizeof c->err, "%s: the cuDNN context was not set up", op_name(n->op));
        return -1;
    }
    if (x->dtype != DT_F32 && x->dtype != DT_F16) {
        snprintf(c->err, sizeof c->err, "%s: dtype %s is not supported (f32 and f16 are)",
                 op_name(n->op), dtype_name(x->dtype));
        return -1;
    }
    k->op = n->op;
    k->dtype = x->dtype;
    bool grad = n->op == OP_CONV2D_GRAD_INPUT || n->op == OP_CONV2D_GRAD_WEIGHT;
    for (int i = 0; i < 4; i++) {
        k->x[i] = x->shape[i];
        k->xs[i] = x->stride[i];
        k->y[i] = y->shape[i];
        k->w[i] = w ? w->shape[i] : 0;
    }
    // the forward ops write a fresh contiguous y; a gradient's y is dy, any view
    if (grad)
        memcpy(k->ys, y->stride, sizeof k->ys);
    else
        tensor_strides_contiguous(4, k->y, k->ys);
    memcpy(k->ia, n->ia, sizeof k->ia);
    if (grad) // conv2d's defaults (graph.c), as ref.c applies them
        for (int i = 0; i < 7; i++)
            if ((i < 2 || i == 4 || i == 5 || i == 6) && k->ia[i] <= 0)
                k->ia[i] = 1;
    return 0;
}

// x itself, or a contiguous copy when a stride is not positive (an
// expanded view), which cuDNN's descriptors do not take.
static tensor *dnn_input(cuda_ctx *c, const tensor *x) {
    bool ok = true;
    for (int i = 0; i < x->ndim; i++)
        ok = ok && (x->stride[i] > 0 || x->shape[i] == 1);
    if (ok) {
        tensor *v = tensor_view(x);
        if (!v)
            snprintf(c->err, sizeof c->err, "out of host memory for a view");
        return v;
    }
    return cuda_contiguous(c, x);
}

static int conv(cuda_ctx *c, const graph_node *n, const tensor *x, const tensor *w,
                const tensor *bias, tensor *out);

int cuda_conv2d(cuda_ctx *c, const graph_node *n, const tensor *x, const tensor *w,
                const tensor *bias, tensor *out) {
    tensor *xc = dnn_input(c, x);
    int rc = xc ? conv(c, n, xc, w, bias, out) : -1;
    cuda_tensor_free(c, xc);
    return rc;
}

static int pool(cuda_ctx *c, const graph_node *n, const tensor *x, tensor *out);

int cuda_pool2d(cuda_ctx *c, const graph_node *n, const tensor *x, tensor *out) {
    if (n->ia[6])
        return cuda_pool2d_ceil(c, n, x, out);
    tensor *xc = dnn_input(c, x);
    int rc = xc ? pool(c, n, xc, out) : -1;
    cuda_tensor_free(c, xc);
    return rc;
}

static int conv(cuda_ctx *c, const graph_node *n, const tensor *x, const tensor *w,
                const tensor *bias, tensor *out) {
    dnn_key k;
    if (key_init(c, &k, n, x, w, out) < 0)
        return -1;
    if (w->dtype != x->dtype || (bias && bias->dtype != x->dtype)) {
        snprintf(c->err, sizeof c->err, "%s: input, weight and bias dtypes differ", op_name(n->op));
        return -1;
    }
    k.has_bias = bias != NULL;
    dnn_entry *e = lookup(c, &k);
    if (!e)
        return -1;
    tensor *wc = cuda_contiguous(c, w), *bc = wc && bias ? cuda_contiguous(c, bias) : NULL;
    int rc = -1;
    void *ws = NULL;
    float one = 1.0f, zero = 0.0f;
    int be = wc && (!bias || bc) && n->op == OP_CONV2D
                 ? be_run(c, e, tensor_data(x), tensor_data(wc), tensor_data(out))
                 : 0;
    if (be != 0) {
        rc = be < 0 ? -1 : 0;
    } else if (wc && (!bias || bc) && (e->ws == 0 || (ws = cuda_workspace(c, e->ws)))) {
        cudnnStatus_t s;
        if (n->op == OP_CONV2D)
            s = cudnnConvolutionForward(c->dnn->h, &one, e->xd, tensor_data(x), e->wd,
                                        tensor_data(wc), e->cd, e->fwd, ws, e->ws, &zero, e->yd,
                                        tensor_data(out));
        else
            s = cudnnConvolutionBackwardData(c->dnn->h, &one, e->wd, tensor_data(wc), e->xd,
                                             tensor_data(x), e->cd, e->bwd, ws, e->ws, &zero, e->yd,
                                             tensor_data(out));
        rc = s == CUDNN_STATUS_SUCCESS
                 ? 0
                 : cuda_fail_at(c->err, sizeof c->err,
                                n->op == OP_CONV2D ? "cudnnConvolutionForward"
                                                   : "cudnnConvolutionBackwardData",
                                __FILE__, __LINE__, cudnnGetErrorString(s));
    }
    if (rc == 0)
        c->kernels++;
    if (rc == 0 && bias) {
        cudnnStatus_t s =
            cudnnAddTensor(c->dnn->h, &one, e->bd, tensor_data(bc), &one, e->yd, tensor_data(out));
        if (s != CUDNN_STATUS_SUCCESS)
            rc = cuda_fail_at(c->err, sizeof c->err, "cudnnAddTensor", __FILE__, __LINE__,
                              cudnnGetErrorString(s));
        c->kernels++;
    }
    cuda_tensor_free(c, wc);
    cuda_tensor_free(c, bc);
    return rc;
}

static int pool(cuda_ctx *c, const graph_node *n, const tensor *x, tensor *out) {
    dnn_key k;
    if (key_init(c, &k, n, x, NULL, out) < 0)
        return -1;
    dnn_entry *e = lookup(c, &k);
    if (!e)
        return -1;
    float one = 1.0f, zero = 0.0f;
    CUDNN_CTX(c, cudnnPoolingForward(c->dnn->h, e->pd, &one, e->xd, tensor_data(x), &zero, e->yd,
                                     tensor_data(out)));
    c->kernels++;
    return 0;
}

// x, w, y: the forward's roles, one of x and w being out
static int conv_grad(cuda_ctx *c, const graph_node *n, const tensor *x, const tensor *w,
                     const tensor *y, tensor *out) {
    dnn_key k;
    if (key_init(c, &k, n, x, w, y) < 0)
        return -1;
    dnn_entry *e = lookup(c, &k);
    if (!e)
        return -1;
    if (e->direct) // counts its kernel
        return cuda_conv2d_grad_direct(c, n, y, n->op == OP_CONV2D_GRAD_INPUT ? w : x, out);
    void *ws = NULL;
    if (e->ws && !(ws = cuda_workspace(c, e->ws)))
        return -1;
    float one = 1.0f, zero = 0.0f;
    c->kernels++;
    if (n->op == OP_CONV2D_GRAD_INPUT)
        CUDNN_CTX(c, cudnnConvolutionBackwardData(c->dnn->h, &one, e->wd, tensor_data(w), e->yd,
                                                  tensor_data(y), e->cd, e->bwd, ws, e->ws, &zero,
                                                  e->xd, tensor_data(out)));
    else
        CUDNN_CTX(c, cudnnConvolutionBackwardFilter(c->dnn->h, &one, e->xd, tensor_data(x), e->yd,
                                                    tensor_data(y), e->cd, e->bwf, ws, e->ws, &zero,
                                                    e->wd, tensor_data(out)));
    return 0;
}

int cuda_conv2d_grad(cuda_ctx *c, const graph_node *n, const tensor *dy, const tensor *b,
                     tensor *out) {
    const char *what = op_name(n->op);
    bool data = n->op == OP_CONV2D_GRAD_INPUT;
    // the forward's x (N, C, H, W), w (O, C/g, kh, kw) and y (N, O, OH, OW)
    const tensor *x = data ? out : b, *w = data ? b : out;
    if ((dy->dtype != DT_F32 && dy->dtype != DT_F16) || b->dtype != dy->dtype ||
        out->dtype != dy->dtype) {
        snprintf(c->err, sizeof c->err, "%s: dtypes %s, %s into %s (f32 or f16, the same for all)",
                 what, dtype_name(dy->dtype), dtype_name(b->dtype), dtype_name(out->dtype));
        return -1;
    }
    if (x->ndim != 4 || w->ndim != 4 || dy->ndim != 4) {
        snprintf(c->err, sizeof c->err,
                 "%s: needs 4-d input, weight and output, got %d, %d and %d dims", what, x->ndim,
                 w->ndim, dy->ndim);
        return -1;
    }
    int64_t g = n->ia[6] > 0 ? n->ia[6] : 1, C = x->shape[1], O = dy->shape[1];
    if (C % g || O % g || w->shape[0] != O || w->shape[1] * g != C || x->shape[0] != dy->shape[0]) {
        snprintf(c->err, sizeof c->err,
                 "%s: shapes do not fit a conv2d: x (%lld, %lld, ...), weight (%lld, %lld, ...), "
                 "dy (%lld, %lld, ...), groups %lld",
                 what, (long long)x->shape[0], (long long)C, (long long)w->shape[0],
                 (long long)w->shape[1], (long long)dy->shape[0], (long long)O, (long long)g);
        return -1;
    }
    // dy and x as views cuDNN's descriptors take; the weight contiguous
    tensor *yc = dnn_input(c, dy);
    tensor *bc = !yc ? NULL : data ? cuda_contiguous(c, b) : dnn_input(c, b);
    int rc = bc ? conv_grad(c, n, data ? out : bc, data ? bc : out, yc, out) : -1;
    cuda_tensor_free(c, yc);
    cuda_tensor_free(c, bc);
    return rc;
}

#endif
