// cuda_rt: the CUDA backend's internal interface: checked library calls, the
// per-executor context (stream, cuBLAS / cuBLASLt / cuDNN handles, caching
// allocator), device tensors, and the eager kernels of every op.
//
//   cuda_ctx c;
//   if (cuda_ctx_init(&c, cuda_device_index(), false) < 0) puts(c.err);   // no TF32
//   tensor *x = cuda_tensor_new(&c, DT_F32, 2, (int64_t[]){8, 64});       // device memory
//   tensor *y = cuda_tensor_new(&c, DT_F32, 2, (int64_t[]){8, 64});
//   if (cuda_unary(&c, n, x, y) < 0) puts(c.err);    // enqueued on c.stream
//   cuda_ctx_sync(&c);                               // waits; kernel-found errors
//   cuda_tensor_free(&c, x); cuda_tensor_free(&c, y);
//   cuda_ctx_free(&c);
//
// Every call into CUDA, cuBLAS, cuBLASLt, cuDNN and NVRTC goes through one of
// the *_TRY macros: on failure they write "CALL failed at FILE:LINE: REASON"
// (the library's own words) into the error buffer and return -1 from the
// calling function. Nothing here aborts on a library error.
//
// Device tensors are ordinary `tensor` headers whose storage data is a
// device pointer (views from tensor.h work on them unchanged: they only move
// metadata). Their storage comes from cuda_tensor_new and must be released
// with cuda_tensor_free, never tensor_free. Kernels take any strided input
// view and write a fresh contiguous output of the node's shape, as the CPU
// kernels do (cpu_kernels.h); each counts itself in c->kernels, and an input
// that must first be made contiguous costs a counted copy. Float math is f32
// in registers for f32 and f16 storage.
#pragma once
#include "tcbench_config.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nvrtc.h>
#if TCBENCH_HAVE_CUDNN
#include <cudnn.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

#include "cuda_alloc.h"
#include "cuda_device.h"
#include "core/graph.h"
#include "core/tensor.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// Writes "CALL failed at FILE:LINE: REASON" and returns -1.
int cuda_fail_at(char *err, size_t cap, const char *call, const char *file, int line,
                 const char *reason);
const char *cuda_cublas_reason(cublasStatus_t s); // cublasGetStatusString, never NULL

#define CUDA_TRY(err, cap, call)                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess)                                                                     \
            return cuda_fail_at(err, cap, #call, __FILE__, __LINE__, cudaGetErrorString(e_));      \
    } while (0)
#define CUBLAS_TRY(err, cap, call)                                                                 \
    do {                                                                                           \
        cublasStatus_t s_ = (call);                                                                \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                           \
            return cuda_fail_at(err, cap, #call, __FILE__, __LINE__, cuda_cublas_reason(s_));      \
    } while (0)
// cuBLASLt reports cublasStatus_t too; a separate name says which library
#define CUBLASLT_TRY(err, cap, call) CUBLAS_TRY(err, cap, call)
#define NVRTC_TRY(err, cap, call)                                                                  \
    do {                                                                                           \
        nvrtcResult r_ = (call);                                                                   \
        if (r_ != NVRTC_SUCCESS)                                                                   \
            return cuda_fail_at(err, cap, #call, __FILE__, __LINE__, nvrtcGetErrorString(r_));     \
    } while (0)
#if TCBENCH_HAVE_CUDNN
#define CUDNN_TRY(err, cap, call)                                                                  \
    do {                                                                                           \
        cudnnStatus_t s_ = (call);                                                                 \
        if (s_ != CUDNN_STATUS_SUCCESS)                                                            \
            return cuda_fail_at(err, cap, #call, __FILE__, __LINE__, cudnnGetErrorString(s_));     \
    } while (0)
#endif

// The same with a context's error buffer.
#define CUDA_CTX(c, call)     CUDA_TRY((c)->err, sizeof(c)->err, call)
#define CUBLAS_CTX(c, call)   CUBLAS_TRY((c)->err, sizeof(c)->err, call)
#define CUBLASLT_CTX(c, call) CUBLASLT_TRY((c)->err, sizeof(c)->err, call)
#define CUDNN_CTX(c, call)    CUDNN_TRY((c)->err, sizeof(c)->err, call)

// An error some kernel found on the device (a bad index), kept in device
// memory until the next synchronization reads it.
typedef struct cuda_dev_error {
    int code; // 0 none, CUDA_DEVERR_*
    int pad;
    long long value, pos, limit;
} cuda_dev_error;
enum {
    CUDA_DEVERR_NONE,
    CUDA_DEVERR_EMBEDDING,
    CUDA_DEVERR_TARGET,
    CUDA_DEVERR_EMBEDDING_GRAD,
    CUDA_DEVERR_TARGET_GRAD,
    CUDA_DEVERR_KV_WRITE, // value: the position, pos: the rows, limit: the cache's length
};

typedef struct cuda_dnn cuda_dnn;
typedef struct cuda_lt cuda_lt;

typedef struct cuda_ctx {
    int device;
    cudaStream_t stream;
    cublasHandle_t blas;
    cublasLtHandle_t lt;
    cuda_lt *ltc;  // cuBLASLt plans by shape (cuda_blas.c)
    cuda_dnn *dnn; // cuDNN handle and algorithms by shape; NULL without cuDNN
    cuda_alloc *alloc;
    cuda_dev_error *deverr; // device memory
    int sm_count;
    bool allow_tf32; // TF32 tensor cores for f32 GEMMs and convolutions
    bool use_lt; // single GEMMs and linear + bias through cuBLASLt (TCBENCH_CUDA_DISABLE_LT=1: off)
    void *blas_ws;   // cuBLAS's workspace (cublasSetWorkspace), fixed so graphs can capture it
    void *ws;        // library workspace (cuBLASLt, cuDNN), outside the allocator's counts
    size_t ws_bytes;
    int64_t kernels; // launches so far (library calls count as one)
    uint64_t step;   // the training step (dropout masks, Adam's t; 0 counts as 1, as on the CPU)
    char err[400];
} cuda_ctx;

// Selects the device, makes the stream and the library handles. Math mode:
// CUBLAS_DEFAULT_MATH (no TF32) unless allow_tf32.
int cuda_ctx_init(cuda_ctx *c, int device, bool allow_tf32);
void cuda_ctx_free(cuda_ctx *c);
// Waits for the stream; -1 with the first asynchronous error or the first
// error a kernel recorded in c->deverr (cleared by reading it).
int cuda_ctx_sync(cuda_ctx *c);
// Checks a kernel launch that just happened and counts it.
int cuda_launched(cuda_ctx *c, const char *kernel, const char *file, int line);
#define CUDA_LAUNCHED(c, name) cuda_launched(c, name, __FILE__, __LINE__)

// Device tensors. NULL with c->err set when memory runs out.
tensor *cuda_tensor_new(cuda_ctx *c, enum dtype t, int ndim, const int64_t *shape);
void cuda_tensor_free(cuda_ctx *c, tensor *t); // NULL is fine
// A header over device memory someone else owns (an arena slot), with the
// given strides (NULL: contiguous); cuda_tensor_free frees only the header.
tensor *cuda_tensor_wrap(cuda_ctx *c, enum dtype t, int ndim, const int64_t *shape,
                         const int64_t *stride, void *data);
// A device copy of a host tensor (any strides; the copy is contiguous).
tensor *cuda_tensor_upload(cuda_ctx *c, const tensor *host);
// Copies a host tensor into an existing contiguous device tensor of its shape.
int cuda_tensor_copy_in(cuda_ctx *c, tensor *dev, const tensor *host);
// A host copy (contiguous) of a device tensor; waits for the stream.
tensor *cuda_tensor_download(cuda_ctx *c, const tensor *dev);
// x itself (a new view) when contiguous, else a contiguous copy (a counted kernel).
tensor *cuda_contiguous(cuda_ctx *c, const tensor *x);
// The context's library workspace, grown to at least `bytes` (NULL with
// c->err set when it cannot grow). Not counted in peak bytes: both modes
// make the same library calls.
void *cuda_workspace(cuda_ctx *c, size_t bytes);
// Device scratch memory in stream order (workspaces); cuda_scratch_put when done.
void *cuda_scratch_get(cuda_ctx *c, size_t bytes);
void cuda_scratch_put(cuda_ctx *c, void *p);

// ---- eager kernels (cuda_pointwise.cu, cuda_reduce.cu, cuda_gather.cu) ------
// UNARY ops, SCALE, CAST, DROPOUT and NOISE; x has out's shape.
int cuda_unary(cuda_ctx *c, const graph_node *n, const tensor *x, tensor *out);
// ADD, SUB, MUL, DIV, MAXIMUM with broadcasting (f32, f16; i32, i64 but DIV).
int cuda_binary(cuda_ctx *c, const graph_node *n, const tensor *a, const tensor *b, tensor *out);
int cuda_where(cuda_ctx *c, const tensor *cond, const tensor *a, const tensor *b, tensor *out);
// out = x elementwise, any strides on both sides, x broadcast to out's shape.
int cuda_copy(cuda_ctx *c, const tensor *x, tensor *out);
// SUM, MEAN, MAX over n->ia[0], kept as size 1.
int cuda_reduce(cuda_ctx *c, const graph_node *n, const tensor *x, tensor *out);
int cuda_softmax(cuda_ctx *c, const tensor *x, bool log, int64_t after, tensor *out);
// a softmax's axis, `after` axes before the last: its length C and the
// stride `inner` between its elements (the product of the axes after it)
void cuda_softmax_axis(const tensor *t, int64_t after, int64_t *C, int64_t *inner);
// x (..., C), weight (C), bias (C) or NULL for rms_norm
int cuda_layer_norm(cuda_ctx *c, const tensor *x, const tensor *w, const tensor *b, double eps,
                    tensor *out);
int cuda_batch_norm(cuda_ctx *c, const tensor *x, const tensor *w, const tensor *b,
                    const tensor *mean, const tensor *var, double eps, tensor *out);
int cuda_group_norm(cuda_ctx *c, const tensor *x, const tensor *w, const tensor *b, int64_t groups,
                    double eps, tensor *out);
// logits (N, C), target (N) i32/i64 -> () f32, label smoothing eps; a target
// out of range is reported by the next cuda_ctx_sync
int cuda_cross_entropy(cuda_ctx *c, const tensor *logits, const tensor *target, int64_t ignore,
                       double smoothing, tensor *out);
int cuda_mse_loss(cuda_ctx *c, const tensor *a, const tensor *b, tensor *out);
// BCE_LOSS: x, target of one shape and dtype (f32 or f16) -> () f32 mean; n->ia[0] 1: logits
int cuda_bce_loss(cuda_ctx *c, const graph_node *n, const tensor *x, const tensor *target,
                  tensor *out);
int cuda_upsample_nearest(cuda_ctx *c, const tensor *x, int64_t scale, tensor *out);
// table (V, D), indices i32/i64 -> (..., D); bad indices as cross_entropy's targets
int cuda_embedding(cuda_ctx *c, const tensor *table, const tensor *idx, tensor *out);
// FFT2_REAL (ops.def; cuda_fft.cu, cuFFT): f32 x (..., S, H) -> Re(FFT2) over the last two axes
int cuda_fft2_real(cuda_ctx *c, const tensor *x, tensor *out);
// DEQUANT, QLINEAR (ops.def; cuda_quant.cu): int8 / int4 weights with f32 or
// f16 scales; qlinear's x and out f32 or f16 (W8A16, W4A16), bias optional
int cuda_dequant(cuda_ctx *c, const graph_node *n, const tensor *q, const tensor *s, tensor *out);
int cuda_qlinear(cuda_ctx *c, const graph_node *n, const tensor *x, const tensor *q,
                 const tensor *s, const tensor *bias, tensor *out);
int cuda_concat(cuda_ctx *c, int axis, int nin, const tensor *const *in, tensor *out);
// x rolled by shifts[d] in [0, size) along each axis d (torch.roll): one kernel
int cuda_roll(cuda_ctx *c, const int64_t *shifts, const tensor *x, tensor *out);
// unfold (im2col) or fold (col2im) by n's op and geometry (ops.def), f32 or f16: one kernel
int cuda_im2col(cuda_ctx *c, const graph_node *n, const tensor *x, tensor *out);
// KV_WRITE (cpu_kv_write's contract); pos is read on the device, so that a
// captured step replays at the position of each run; one out of range
// writes nothing and is reported by the next synchronization
int cuda_kv_write(cuda_ctx *c, tensor *cache, const tensor *rows, const tensor *pos);
// ATTENTION (ops.def; cuda_attention.cu): q, k, v all f32 or all f16, head
// dims at most 256; bias (f32/f16, broadcast) and len may be NULL
int cuda_attention(cuda_ctx *c, const graph_node *n, const tensor *q, const tensor *k,
                   const tensor *v, const tensor *bias, const tensor *len, tensor *y);
// ATTENTION_GRAD (ops.def; cuda_attention_grad.cu): dy, q, k, v, y all f32
// or all f16, bias and len as cuda_attention's -> out, dq | dk | dv
int cuda_attention_grad(cuda_ctx *c, const graph_node *n, const tensor *dy, const tensor *q,
                        const tensor *k, const tensor *v, const tensor *y, const tensor *bias,
                        const tensor *len, tensor *out);
// a >= b with broadcasting into bool (f32, f16, i32, i64, bool); NaN compares false
int cuda_ge(cuda_ctx *c, const tensor *a, const tensor *b, tensor *out);

// ---- training (cuda_grad.cu, cuda_update.cu; convolution's in cuda_dnn.c) ---
// The backward ops of ops.def, one op each, the CPU kernels' formulas
// (cpu_kernels.h): operands and output of one float dtype (f32 or f16),
// statistics recomputed from x in f32.
// ACT_GRAD: out = dy * f'(x), f the unary op (enum op)n->ia[0]
int cuda_act_grad(cuda_ctx *c, const graph_node *n, const tensor *dy, const tensor *x, tensor *out);
// SUM_TO: out (its own shape) = dy summed over the axes dy was broadcast along
int cuda_sum_to(cuda_ctx *c, const tensor *dy, tensor *out);
// SOFTMAX_GRAD (log false), LOG_SOFTMAX_GRAD (log true); y the forward's output
int cuda_softmax_grad(cuda_ctx *c, const tensor *dy, const tensor *y, bool log, int64_t after,
                      tensor *out);
// LAYER_NORM_GRAD, RMS_NORM_GRAD, BATCH_NORM_GRAD, GROUP_NORM_GRAD: dx; w (C) f32 or f16
int cuda_norm_grad(cuda_ctx *c, const graph_node *n, const tensor *dy, const tensor *x,
                   const tensor *w, tensor *out);
// LAYER_NORM_WGRAD, BATCH_NORM_WGRAD, GROUP_NORM_WGRAD -> (2, C); RMS_NORM_WGRAD -> (C)
int cuda_norm_wgrad(cuda_ctx *c, const graph_node *n, const tensor *dy, const tensor *x,
                    tensor *out);
// x (N, C, ...) -> out (3, C) contiguous f32: the means, biased variances, 1 / sqrt(var + eps)
int cuda_batch_norm_stats(cuda_ctx *c, const tensor *x, double eps, tensor *out);
// BATCH_NORM in training mode: batch statistics; running mean and var
// (contiguous f32) updated in place with momentum, the variance unbiased
int cuda_batch_norm_train(cuda_ctx *c, const tensor *x, const tensor *w, const tensor *b,
                          tensor *rmean, tensor *rvar, double eps, double momentum, tensor *out);
// MAX_POOL2D_GRAD (x the forward input: a window's first max takes dy) and
// AVG_POOL2D_GRAD (x NULL), ia as the pools
int cuda_pool2d_grad(cuda_ctx *c, const graph_node *n, const tensor *dy, const tensor *x,
                     tensor *out);
// MAX_POOL2D, AVG_POOL2D in ceil mode (ia6), which cuda_pool2d hands here
int cuda_pool2d_ceil(cuda_ctx *c, const graph_node *n, const tensor *x, tensor *out);
// dy (..., D), indices i32/i64 -> out (V, D), rows summed in position
// order; a bad index is reported by the next cuda_ctx_sync
int cuda_embedding_grad(cuda_ctx *c, const tensor *dy, const tensor *idx, tensor *out);
// out: zeros, dy at n->ia[1] along axis n->ia[0]; any dtype
int cuda_slice_grad(cuda_ctx *c, const graph_node *n, const tensor *dy, tensor *out);
// PAD, PAD_GRAD (ops.def; cuda_pad.cu): F.pad constant or reflect, and its backward
int cuda_pad(cuda_ctx *c, const graph_node *n, const tensor *x, tensor *out);
int cuda_pad_grad(cuda_ctx *c, const graph_node *n, const tensor *dy, tensor *out);
// LSTM, LSTM_GRAD (ops.def; cuda_lstm.cu): in the op's five inputs in order; cuBLAS GEMMs
// and one cell kernel a step, as cpu_lstm
int cuda_lstm(cuda_ctx *c, const graph_node *n, const tensor *const *in, tensor *out);
int cuda_lstm_grad(cuda_ctx *c, const graph_node *n, const tensor *const *in, tensor *out);
// CTC_LOSS, CTC_LOSS_GRAD (ops.def; cuda_ctc.cu): log_probs (T, B, C) f32, targets (B, S),
// lengths (B); a thread a sample runs cpu_ctc.c's recursions
int cuda_ctc_loss(cuda_ctx *c, const graph_node *n, const tensor *lp, const tensor *tg,
                  const tensor *len, tensor *out);
int cuda_ctc_loss_grad(cuda_ctx *c, const graph_node *n, const tensor *dloss, const tensor *lp,
                       const tensor *tg, const tensor *len, tensor *out);
// EMBEDDING_BAG, TRIL_GATHER and their backwards (ops.def; cuda_rec.cu): DLRM's
// bag sums of table rows (sum mode, offsets) and its interaction's lower triangle
int cuda_embedding_bag(cuda_ctx *c, const tensor *table, const tensor *idx, const tensor *off,
                       tensor *out);
int cuda_embedding_bag_grad(cuda_ctx *c, const tensor *dy, const tensor *idx, const tensor *off,
                            tensor *out);
int cuda_tril_gather(cuda_ctx *c, const graph_node *n, const tensor *z, tensor *out);
int cuda_tril_gather_grad(cuda_ctx *c, const graph_node *n, const tensor *dy, tensor *out);
// GRID_SAMPLE, its dx and d grid (ops.def; cuda_grid_sample.cu): bilinear F.grid_sample;
// with grid NULL, UPSAMPLE_BILINEAR and its dx
int cuda_grid_sample(cuda_ctx *c, const graph_node *n, const tensor *x, const tensor *grid,
                     tensor *out);
int cuda_grid_sample_grad(cuda_ctx *c, const graph_node *n, const tensor *dy, const tensor *grid,
                          tensor *out);
int cuda_grid_sample_grad_grid(cuda_ctx *c, const graph_node *n, const tensor *dy, const tensor *x,
                               const tensor *grid, tensor *out);
// dloss (), logits (N, C), target (N) i32/i64 -> d logits; ignore index
// n->ia[0]; a bad target is reported by the next cuda_ctx_sync
int cuda_cross_entropy_grad(cuda_ctx *c, const graph_node *n, const tensor *dloss,
                            const tensor *logits, const tensor *target, tensor *out);
// BCE_LOSS_GRAD: dloss (), x, target -> d x, any strides
int cuda_bce_loss_grad(cuda_ctx *c, const graph_node *n, const tensor *dloss, const tensor *x,
                       const tensor *target, tensor *out);
int cuda_mse_loss_grad(cuda_ctx *c, const tensor *dloss, const tensor *a, const tensor *b,
                       tensor *out);
// FOUND_INF: out () f32 = 1 when an element of in[1 or 2 ..] times 1 / in[0]
// is inf or NaN, or (n->ia[0]) the earlier flag in[1] is set
int cuda_found_inf(cuda_ctx *c, const graph_node *n, const tensor *const *in, tensor *out);
// Updates, in place, with c->step (contiguous f32 targets; the gradient
// f32, any strides). scaler: NULL, or the grad scaler's scale,
// found_inf and step count (graph_scaler_src), read on the device: a
// nonzero found_inf skips the update, the gradient is multiplied by
// 1/scale, and t is the step count + 1.
int cuda_sgd(cuda_ctx *c, const graph_node *n, tensor *p, const tensor *g, tensor *buf,
             const tensor *const *scaler);
int cuda_adamw(cuda_ctx *c, const graph_node *n, tensor *p, const tensor *g, tensor *m, tensor *v,
               const tensor *const *scaler);
int cuda_running_stat(cuda_ctx *c, const graph_node *n, tensor *buf, const tensor *stat);
// SCALER_UPDATE, in place: the scale, growth tracker and step count, given found_inf
int cuda_scaler_update(cuda_ctx *c, const graph_node *n, tensor *scale, tensor *tracker,
                       tensor *step, const tensor *found);

// ---- library calls (cuda_blas.c, cuda_dnn.c) ---------------------------------
// C (M, N) row-major, ldc N, count matrices sc apart = op(A) op(B): the one
// cuBLAS call behind matmul, linear and the compiled mode's GEMMs. An
// operand is row-major with leading dimension ld, or transposed (t); sa / sb
// are batch strides in elements (0: broadcast).
int cuda_gemm(cuda_ctx *c, enum dtype t, bool ta, int64_t lda, int64_t sa, const void *A, bool tb,
              int64_t ldb, int64_t sb, const void *B, int64_t M, int64_t N, int64_t K, float beta,
              void *C, int64_t sc, int64_t count);
// (..., M, K) @ (..., K, N): cuBLAS (strided-batched over broadcast batch dims)
int cuda_matmul(cuda_ctx *c, const tensor *a, const tensor *b, tensor *out);
// x (..., K) @ w (N, K)^T + bias: cuBLASLt with a bias epilogue, or cuBLAS
int cuda_linear(cuda_ctx *c, const tensor *x, const tensor *w, const tensor *bias, tensor *out);
void cuda_blas_free(cuda_ctx *c);
// CONV2D, CONV_TRANSPOSE2D (bias may be NULL), MAX_POOL2D, AVG_POOL2D via cuDNN
int cuda_dnn_new(cuda_ctx *c);
void cuda_dnn_free(cuda_ctx *c);
int cuda_conv2d(cuda_ctx *c, const graph_node *n, const tensor *x, const tensor *w,
                const tensor *bias, tensor *out);
int cuda_pool2d(cuda_ctx *c, const graph_node *n, const tensor *x, tensor *out);
// CONV2D_GRAD_INPUT (dy, weight -> dx) and CONV2D_GRAD_WEIGHT (dy, x ->
// d weight): cudnnConvolutionBackwardData / BackwardFilter, ia as conv2d
int cuda_conv2d_grad(cuda_ctx *c, const graph_node *n, const tensor *dy, const tensor *b,
                     tensor *out);
// the same as plain gathers (cuda_conv_direct.cu), where cuDNN has no
// algorithm for the shapes: any strides, f32 or f16, deterministic
int cuda_conv2d_grad_direct(cuda_ctx *c, const graph_node *n, const tensor *dy, const tensor *b,
                            tensor *out);

#ifdef __cplusplus
}
#endif
