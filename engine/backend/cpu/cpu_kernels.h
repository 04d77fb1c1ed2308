// cpu_kernels: the CPU kernels of the eager executor, one per op family.
//
//   cpu_ctx c = {0};
//   cpu_dnnl_new(&c.dnnl, err, sizeof err);          // once, for conv and pool
//   tensor *y = tensor_new_empty(n->dtype, n->ndim, n->shape);
//   if (cpu_binary(&c, n, a, b, y) < 0)              // fills y; c.err says why not
//       ...
//   c.kernels;                                       // kernels launched so far
//   cpu_dnnl_free(c.dnnl);
//
// Each kernel writes a preallocated contiguous output of the node's shape and
// dtype and counts itself in c->kernels; a kernel that first has to make an
// input contiguous counts that copy too, as it is one more pass over memory
// (PyTorch launches it as its own kernel). Inputs may be any strided view.
// An unsupported dtype or a bad index is an error with a message, never a
// crash. Float math is done in f32 registers (f16 is converted on the fly);
// GEMMs call OpenBLAS, convolutions and pooling oneDNN.
#pragma once
#include "core/graph.h"
#include "core/tensor.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cpu_dnnl cpu_dnnl;

typedef struct cpu_ctx {
    int64_t kernels;         // kernels launched, internal copies included
    cpu_dnnl *dnnl;          // oneDNN engine, stream and primitive cache
    int64_t dnnl_gemms;      // bf16 GEMMs run by oneDNN's matmul (cpu_gemm_bf16)
    int64_t dnnl_bf16_convs; // bf16 convolutions run by oneDNN's bf16 primitive (cpu_dnnl)
    // the next convolution's weight is a parameter that never changes
    // while this context runs (compiled inference, as Inductor's freezing;
    // set around each call): it is reordered into the primitive's blocked
    // layout once, keyed by its address, and kept (cpu_dnnl_packed_bytes)
    bool freeze_weights;
    uint64_t step; // the training step, from 1 (dropout masks, Adam's bias correction);
                   // 0, a zeroed ctx, counts as 1
    char err[256];
} cpu_ctx;

// Sets c->err (printf-style) and returns -1.
int cpu_fail(cpu_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// f32 checks shared by the kernels: an error naming `what` for another
// dtype (t may be NULL); contiguous f32 versions of np f32 or f16 inputs
// (cpu_f32_in each; NULL entries stay NULL; on failure nothing stays
// allocated); freeing such a list.
int cpu_need_f32(cpu_ctx *c, const char *what, const tensor *t);
int cpu_inputs_f32(cpu_ctx *c, const char *what, int np, const tensor *const *in, tensor **out);
void cpu_free_all(int np, tensor **t);

// x itself (a new view) when contiguous, else a contiguous copy, counted as
// a kernel. NULL with c->err set when memory runs out.
tensor *cpu_contiguous(cpu_ctx *c, const tensor *x);

// t is 4-d (N, C, H, W) laid out channels-last (NHWC) and dense: the layout
// the compiled mode gives convolution activations (compile/layout.c), which
// convolution and pooling take without a copy.
bool cpu_channels_last(const tensor *t);

// f16 through f32 (AMP). This CPU has no f16 arithmetic (no AVX512-FP16)
// and oneDNN has no f16 convolution on it, so a kernel without an f16 loop
// of its own does what eager's f16 GEMMs do: f16 operands converted to f32
// scratch (F16C, eight values an instruction), the f32 kernel, the result
// rounded to f16 once. The conversions are part of the op's one kernel (not
// counted apart); for f32 these are cpu_contiguous and a view of out, so
// the f32 path copies nothing more than before.
//
//   tensor *x32 = cpu_f32_in(c, "conv2d", x);      // contiguous f32 or NULL
//   tensor *o32 = cpu_f32_out(c, "conv2d", out);   // out itself, or scratch
//   int rc = ...f32 kernel writing o32...;
//   return cpu_f32_done(o32, out, rc);             // rounds into out when rc == 0
//
// cpu_f32_in fails (NULL, c->err naming `what` and the dtype) for a dtype
// other than f32 and f16, as does cpu_f32_out.
tensor *cpu_f32_in(cpu_ctx *c, const char *what, const tensor *t);
tensor *cpu_f32_out(cpu_ctx *c, const char *what, tensor *out);
int cpu_f32_done(tensor *o32, tensor *out, int rc);
// An error naming `what` unless every non-NULL tensor of the list is f32, or
// every one is f16: kernels whose operands come from one autocast region.
int cpu_need_same_float(cpu_ctx *c, const char *what, int n, const tensor *const *t);

// pointwise (cpu_pointwise.c)
// UNARY ops, SCALE, CAST, DROPOUT and NOISE; x has out's shape.
int cpu_unary(cpu_ctx *c, const graph_node *n, const tensor *x, tensor *out);
// ADD, SUB, MUL, DIV, MAXIMUM with broadcasting; GE (any dtype) into bool.
int cpu_binary(cpu_ctx *c, const graph_node *n, const tensor *a, const tensor *b, tensor *out);
// cond ? a : b with broadcasting, any dtype.
int cpu_where(cpu_ctx *c, const tensor *cond, const tensor *a, const tensor *b, tensor *out);
// out = x, same shape, any strides and dtype (CONTIGUOUS, RESHAPE's copy).
int cpu_copy(cpu_ctx *c, const tensor *x, tensor *out);

// reductions, norms, losses (cpu_reduce.c)
// SUM, MEAN, MAX over n->ia[0], kept as size 1.
int cpu_reduce(cpu_ctx *c, const graph_node *n, const tensor *x, tensor *out);
// over the last axis; log_softmax when log
int cpu_softmax(cpu_ctx *c, const tensor *x, bool log, int64_t after, tensor *out);
// a softmax's axis, `after` axes before the last: its length C and the
// stride `inner` between its elements (the product of the axes after it)
void cpu_softmax_axis(const tensor *t, int64_t after, int64_t *C, int64_t *inner);
// x (..., C), weight (C), bias (C); bias NULL for rms_norm
int cpu_layer_norm(cpu_ctx *c, const tensor *x, const tensor *w, const tensor *b, double eps,
                   tensor *out);
int cpu_rms_norm(cpu_ctx *c, const tensor *x, const tensor *w, double eps, tensor *out);
// x (..., S, H) -> Re(FFT2) over the last two axes (cpu_fft.c, FFTW)
int cpu_fft2_real(cpu_ctx *c, const tensor *x, tensor *out);
// x (N, C, ...); weight, bias, running mean, running var (C)
int cpu_batch_norm(cpu_ctx *c, const tensor *x, const tensor *w, const tensor *b,
                   const tensor *mean, const tensor *var, double eps, tensor *out);
// x (N, C, ...); weight, bias (C)
int cpu_group_norm(cpu_ctx *c, const tensor *x, const tensor *w, const tensor *b, int64_t groups,
                   double eps, tensor *out);
// logits (N, C) f32, target (N) i32/i64 -> () mean over targets != ignore
int cpu_cross_entropy(cpu_ctx *c, const tensor *logits, const tensor *target, int64_t ignore,
                      double smoothing, tensor *out);
// CTC_LOSS, CTC_LOSS_GRAD (ops.def; cpu_ctc.c): log_probs (T, B, C), targets (B, S), lengths (B)
int cpu_ctc_loss(cpu_ctx *c, const graph_node *n, const tensor *lp, const tensor *tg,
                 const tensor *len, tensor *out);
int cpu_ctc_loss_grad(cpu_ctx *c, const graph_node *n, const tensor *dloss, const tensor *lp,
                      const tensor *tg, const tensor *len, tensor *out);
// () mean of (a - b)^2
int cpu_mse_loss(cpu_ctx *c, const tensor *a, const tensor *b, tensor *out);
// BCE_LOSS (cpu_bce.c): x, target of one shape -> () mean binary cross entropy;
// n->ia[0] 1: x are logits
int cpu_bce_loss(cpu_ctx *c, const graph_node *n, const tensor *x, const tensor *target,
                 tensor *out);

// matrix products through cblas_sgemm (cpu_gemm.c), each call single-threaded
// inside the executor's own OpenMP team (cpu_gemm_par.h), as in the
// generated code
// (..., M, K) @ (..., K, N) -> (..., M, N), batch dims broadcast
int cpu_matmul(cpu_ctx *c, const tensor *a, const tensor *b, tensor *out);
// x (..., K) @ w (N, K)^T + bias (N) -> (..., N); bias may be NULL
int cpu_linear(cpu_ctx *c, const tensor *x, const tensor *w, const tensor *bias, tensor *out);
// cpu_matmul (linear false; bias NULL) or cpu_linear with bf16 operands
// through oneDNN's bf16 matmul (cpu_gemm_bf16.c), into an f32 or bf16 out:
// 0 done, 1 declined (no AVX512-BF16, TCBENCH_DISABLE_DNNL_BF16, a layout
// it cannot express: nothing written, c->err untouched), -1 an error.
int cpu_gemm_bf16(cpu_ctx *c, const tensor *a, const tensor *b, const tensor *bias, bool linear,
                  tensor *out);
// The f32 scratch a matmul or linear with f16 operands or output holds
// during its one kernel (each f16 operand widened, an f16 output computed
// in f32 first; a linear of a few rows against an f16 weight: its x and y
// in f32), each buffer as round counts it; 0 for f32 (bf16: oneDNN's
// matmul may take it without any). For planners (eager_plan_peak).
size_t cpu_gemm_f16_scratch(const tensor *a, const tensor *b, const tensor *bias, bool linear,
                            const tensor *out, size_t (*round)(size_t bytes));

// convolution and pooling through oneDNN (cpu_dnnl.c)
int cpu_dnnl_new(cpu_dnnl **out, char *err, size_t errcap);
void cpu_dnnl_free(cpu_dnnl *d);
// Bytes of the weights kept reordered for a context with freeze_weights;
// *plain (may be NULL): the bytes of the plain weights they were made from.
size_t cpu_dnnl_packed_bytes(const cpu_dnnl *d, size_t *plain);
// bf16 GEMMs and convolutions through oneDNN's bf16 kernels (on when the CPU
// has AVX512-BF16, unless TCBENCH_DISABLE_DNNL_BF16 was set at
// cpu_dnnl_new), or through the widening path: tests and bench/ compare both.
void cpu_dnnl_set_bf16(cpu_dnnl *d, bool on);
// CONV2D and CONV_TRANSPOSE2D, attributes as in ops.def; bias may be NULL.
// Each operand and the output f32 or f16 (f16 through f32, rounded once).
int cpu_conv2d(cpu_ctx *c, const graph_node *n, const tensor *x, const tensor *w,
               const tensor *bias, tensor *out);
// A convolution's epilogue as oneDNN post-ops: an activation (RELU,
// RELU6, SIGMOID, TANH, GELU, GELU_TANH, SILU, HARDSWISH, EXP, SCALE as
// x * alpha + beta) or a binary op (ADD, SUB, MUL, DIV, MAXIMUM) with src1
// per channel (C contiguous floats) or of the output's shape (contiguous).
#define CPU_POST_MAX 8
typedef struct cpu_post {
    enum op op;
    float alpha, beta;
    const tensor *src1;
    bool per_channel;
} cpu_post;
// CONV2D / CONV_TRANSPOSE2D with an optional bias, then the post-ops, in one primitive
int cpu_conv2d_post(cpu_ctx *c, const graph_node *n, const tensor *x, const tensor *w,
                    const tensor *bias, int npost, const cpu_post *post, tensor *out);
// MAX_POOL2D, AVG_POOL2D
int cpu_pool2d(cpu_ctx *c, const graph_node *n, const tensor *x, tensor *out);

// data movement (cpu_gather.c)
// x (N, C, H, W) -> (N, C, H*s, W*s), any dtype
int cpu_upsample_nearest(cpu_ctx *c, const tensor *x, int64_t scale, tensor *out);
// table (V, D), indices (...) i32/i64 -> (..., D)
int cpu_embedding(cpu_ctx *c, const tensor *table, const tensor *idx, tensor *out);
// Fused attention (cpu_attention.c): q (B, H, T, D), k (B, KVH, S, D),
// v (B, KVH, S, Dv) -> y (B, H, T, Dv); bias (broadcast to (B, H, T, S)) and
// len (valid keys: () or (B), i32 or i64) may be NULL; n's ia0 causal, fa0
// the scale (ops.def ATTENTION).
int cpu_attention(cpu_ctx *c, const graph_node *n, const tensor *q, const tensor *k,
                  const tensor *v, const tensor *bias, const tensor *len, tensor *y);
// ATTENTION_GRAD (cpu_attention_grad.c): dy and y (B, H, T, Dv), q, k, v,
// bias and len as cpu_attention's -> out, the flat dq | dk | dv of q's dtype
int cpu_attention_grad(cpu_ctx *c, const graph_node *n, const tensor *dy, const tensor *q,
                       const tensor *k, const tensor *v, const tensor *y, const tensor *bias,
                       const tensor *len, tensor *out);
// LSTM, LSTM_GRAD (ops.def; cpu_lstm.c): in the op's five inputs in order
int cpu_lstm(cpu_ctx *c, const graph_node *n, const tensor *const *in, tensor *out);
int cpu_lstm_grad(cpu_ctx *c, const graph_node *n, const tensor *const *in, tensor *out);
int cpu_concat(cpu_ctx *c, int axis, int nin, const tensor *const *in, tensor *out);
// EMBEDDING_BAG (cpu_rec.c): table (V, D), indices (N), offsets (B) -> (B, D) bag sums
int cpu_embedding_bag(cpu_ctx *c, const tensor *table, const tensor *idx, const tensor *off,
                      tensor *out);
// TRIL_GATHER (cpu_rec.c): (B, F, F), any strides -> (B, P) the pairs below the diagonal
int cpu_tril_gather(cpu_ctx *c, const graph_node *n, const tensor *z, tensor *out);
// x rolled by shifts[d] in [0, size) along each axis d (torch.roll), any strides
int cpu_roll(cpu_ctx *c, const int64_t *shifts, const tensor *x, tensor *out);
// unfold (im2col) or fold (col2im) by n's op and geometry (ops.def), f32 or f16
int cpu_im2col(cpu_ctx *c, const graph_node *n, const tensor *x, tensor *out);
// PAD (ops.def; cpu_pad.c): x -> out padded by n's ia, constant fa0 or reflect; any dtype
int cpu_pad(cpu_ctx *c, const graph_node *n, const tensor *x, tensor *out);
// GRID_SAMPLE (ops.def; cpu_grid_sample.c): x (N, C, H, W), grid (N, Ho, Wo, 2) -> (N, C, Ho, Wo);
// with grid NULL, UPSAMPLE_BILINEAR to out's (Ho, Wo) (and the same for the _GRAD ops)
int cpu_grid_sample(cpu_ctx *c, const graph_node *n, const tensor *x, const tensor *grid,
                    tensor *out);
// KV_WRITE: cache (B, KVH, S, D) contiguous, written in place at rows
// [pos, pos + T) of axis 2 from rows (B, KVH, T, D), any strides; pos an
// i32 or i64 scalar read now (the run's position)
int cpu_kv_write(cpu_ctx *c, tensor *cache, const tensor *rows, const tensor *pos);

// ---- training: backward ops and in-place updates (cpu_grad.c) ----
// ACT_GRAD: out = dy * f'(x), f the unary op (enum op)n->ia[0]
int cpu_act_grad(cpu_ctx *c, const graph_node *n, const tensor *dy, const tensor *x, tensor *out);
// SUM_TO: out (its own shape) = dy summed over the axes dy was broadcast along
int cpu_sum_to(cpu_ctx *c, const tensor *dy, tensor *out);
// SOFTMAX_GRAD (log false) and LOG_SOFTMAX_GRAD (log true); y the forward output
int cpu_softmax_grad(cpu_ctx *c, const tensor *dy, const tensor *y, bool log, int64_t after,
                     tensor *out);
// LAYER_NORM_GRAD, RMS_NORM_GRAD, BATCH_NORM_GRAD, GROUP_NORM_GRAD: dx
int cpu_norm_grad(cpu_ctx *c, const graph_node *n, const tensor *dy, const tensor *x,
                  const tensor *w, tensor *out);
// LAYER_NORM_WGRAD, RMS_NORM_WGRAD, BATCH_NORM_WGRAD, GROUP_NORM_WGRAD
int cpu_norm_wgrad(cpu_ctx *c, const graph_node *n, const tensor *dy, const tensor *x, tensor *out);
// The same with batch norm's statistics given (the (3, C) f32 output of
// batch_norm_stats on x; NULL: computed from x, as above): the compiler's
// batch norm backward reuses the forward's instead of two passes over x in
// each kernel. The same bits either way.
int cpu_norm_grad_stats(cpu_ctx *c, const graph_node *n, const tensor *dy, const tensor *x,
                        const tensor *w, const tensor *stats, tensor *out);
int cpu_norm_wgrad_stats(cpu_ctx *c, const graph_node *n, const tensor *dy, const tensor *x,
                         const tensor *stats, tensor *out);
int cpu_embedding_grad(cpu_ctx *c, const tensor *dy, const tensor *idx, tensor *out);
// EMBEDDING_GRAD's sums, shared with EMBEDDING_BAG_GRAD (cpu_grad.c): out (V, D)
// row v sums the dy rows of the positions i where idx[i] = v: row bag[i], or
// row i when bag is NULL; `what` names the op in errors
int cpu_rows_grad(cpu_ctx *c, const char *what, const tensor *dy, const tensor *idx,
                  const int64_t *bag, tensor *out);
int cpu_slice_grad(cpu_ctx *c, const graph_node *n, const tensor *dy, tensor *out);
// EMBEDDING_BAG_GRAD, TRIL_GATHER_GRAD (cpu_rec.c): dy back onto the rows / pairs read
int cpu_embedding_bag_grad(cpu_ctx *c, const tensor *dy, const tensor *idx, const tensor *off,
                           tensor *out);
int cpu_tril_gather_grad(cpu_ctx *c, const graph_node *n, const tensor *dy, tensor *out);
// PAD_GRAD (cpu_pad.c): dy padded -> dx, summed where reflect read one element twice
int cpu_pad_grad(cpu_ctx *c, const graph_node *n, const tensor *dy, tensor *out);
// GRID_SAMPLE_GRAD, GRID_SAMPLE_GRAD_GRID (cpu_grid_sample.c): dx and d grid
int cpu_grid_sample_grad(cpu_ctx *c, const graph_node *n, const tensor *dy, const tensor *grid,
                         tensor *out);
int cpu_grid_sample_grad_grid(cpu_ctx *c, const graph_node *n, const tensor *dy, const tensor *x,
                              const tensor *grid, tensor *out);
int cpu_cross_entropy_grad(cpu_ctx *c, const graph_node *n, const tensor *dloss,
                           const tensor *logits, const tensor *target, tensor *out);
int cpu_mse_loss_grad(cpu_ctx *c, const tensor *dloss, const tensor *a, const tensor *b,
                      tensor *out);
// BCE_LOSS_GRAD (cpu_bce.c): dloss (), x, target -> d x
int cpu_bce_loss_grad(cpu_ctx *c, const graph_node *n, const tensor *dloss, const tensor *x,
                      const tensor *target, tensor *out);
// The step of c (0 counts as 1), and a check that t (may be NULL) can be
// updated in place: contiguous f32, an error naming `what` otherwise.
uint64_t cpu_step(const cpu_ctx *c);
int cpu_need_target(cpu_ctx *c, const char *what, const tensor *t);
// Updates, in place, with c->step: p, and the state (buf may be NULL for SGD)
// (cpu_update.c). scaler: NULL, or the grad scaler's scale, found_inf and
// step count (graph_scaler_src): a nonzero found_inf skips the update, the
// gradient is multiplied by 1/scale, and t is the step count + 1.
int cpu_sgd(cpu_ctx *c, const graph_node *n, tensor *p, const tensor *g, tensor *buf,
            const tensor *const *scaler);
int cpu_adamw(cpu_ctx *c, const graph_node *n, tensor *p, const tensor *g, tensor *m, tensor *v,
              const tensor *const *scaler);
int cpu_running_stat(cpu_ctx *c, const graph_node *n, tensor *buf, const tensor *stat);
// FOUND_INF: out () = 1 when any element of in[1 .. nin) times 1 / in[0] is not finite
// (with n->ia[0], in[1] is an earlier flag: 1 when it is)
int cpu_found_inf(cpu_ctx *c, const graph_node *n, const tensor *const *in, tensor *out);
// SCALER_UPDATE, in place: the scale, the growth tracker and the step count, given found_inf
int cpu_scaler_update(cpu_ctx *c, const graph_node *n, tensor *scale, tensor *tracker, tensor *step,
                      const tensor *found);
// BATCH_NORM in training mode: batch statistics; running mean and var
// updated in place with momentum (unbiased variance, as PyTorch)
// x (N, C, ...) -> out (3, C): per channel the mean, the biased variance
// and 1 / sqrt(var + eps), as cpu_batch_norm_train computes them.
int cpu_batch_norm_stats(cpu_ctx *c, const tensor *x, double eps, tensor *out);
int cpu_batch_norm_train(cpu_ctx *c, const tensor *x, const tensor *w, const tensor *b,
                         tensor *rmean, tensor *rvar, double eps, double momentum, tensor *out);

// ---- training: convolution and pooling backward (cpu_dnnl_grad.c) ----
// CONV2D_GRAD_INPUT (dy, w) and CONV2D_GRAD_WEIGHT (dy, x), attributes as conv2d
int cpu_conv2d_grad_input(cpu_ctx *c, const graph_node *n, const tensor *dy, const tensor *w,
                          tensor *out);
int cpu_conv2d_grad_weight(cpu_ctx *c, const graph_node *n, const tensor *dy, const tensor *x,
                           tensor *out);
// MAX_POOL2D_GRAD (x the forward input) and AVG_POOL2D_GRAD (x NULL)
int cpu_pool2d_grad(cpu_ctx *c, const graph_node *n, const tensor *dy, const tensor *x,
                    tensor *out);
