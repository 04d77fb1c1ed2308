// The compiler's working data, shared by its passes (engine/compile/*.c).
//
//   decompose  graph -> graph of primitives (softmax, norms, biases split out)
//   simplify   dead code, common subexpressions, constant folding, identities
//   fuse       nodes -> kernel groups (pointwise, row reduction, GEMM or
//              convolution with epilogue, extern), no cycles, size capped
//   layouts    convolution activations channels-last (CPU inference)
//   plan       storage of every node (inline, arena buffer, strided view of a
//              buffer or source), liveness, best-fit offsets in one arena
//   codegen_c  C source: one function per distinct kernel, tc_step()
//   lower      the lowering codegen_c and codegen_cuda share (lower.h)
//   kcache     build with the system C compiler, cache on disk, dlopen
//
// Every node of the compiled graph keeps the id of the original op it came
// from (origin), so the "captured" ablation can fuse only within an op and
// logs can name what the user wrote.
//
// Training graphs (engine/autodiff/autograd.h) add nodes with side effects
// (op_has_side_effect): updates that write their sources in place. Every
// pass keeps them (never dead, merged or folded), each source is written by
// at most one of them, nothing reads an update's value (it is its src0,
// after the write: CS_VIEW of that source, but with a group of its own),
// and the plan runs the writer after every other reader of what it writes.
#pragma once
#include "compile.h"

#include "core/graph.h"

// How a node's value exists at run time.
typedef enum {
    CS_SOURCE, // a model value (parameter, buffer, input): external pointer
    CS_CONST,  // a FULL: a literal in the generated code
    CS_INLINE, // computed inside its group's kernel, never stored
    CS_BUFFER, // stored in the arena: contiguous, or channels-last (layout.c)
    CS_VIEW,   // a strided view of a CS_SOURCE or CS_BUFFER node (no kernel); an
               // update's value (its src0, written in place by its group)
    CS_RECOMPUTE, // a small elementwise value of sources only (a per-channel
                  // scale): recomputed inside every kernel that reads it
} cstore;

typedef struct clayout {
    int ndim;
    int64_t shape[TENSOR_MAX_DIMS];
    int64_t stride[TENSOR_MAX_DIMS]; // elements
    int64_t offset;                  // elements
} clayout;

typedef enum {
    KG_POINTWISE, // same-shape elementwise nodes, one loop nest
    KG_ROWREDUCE, // reductions over the last axis with their prologue and epilogue
    KG_GEMM,      // matmul / linear + elementwise epilogue, in place
    KG_CONV,      // convolution (oneDNN) + elementwise epilogue
    KG_EXTERN,    // an op run by a library-style kernel (gather, pool, concat, loss)
    KG_COPY,      // a view that strides cannot express, made contiguous
    KG_UPDATE,    // in-place updates (AdamW, SGD, running statistics) as one
                  // generated loop over a table of chunks of every tensor
                  // (multi-tensor apply); operands: each member's sources
} kg_kind;

#define KG_MAX_ARGS 48
#define FUSE_MAX_MEMBERS 64 // nodes in one kernel group at most

typedef struct kgroup {
    kg_kind kind;
    // KG_UPDATE: members may pass FUSE_MAX_MEMBERS (every optimizer update
    // of the model) and args stays empty: the operands are the members'
    // sources, in member order (compile_group_operands)
    int anchor;  // the GEMM / CONV / EXTERN / COPY node; -1 for pointwise and row groups
    int *nodes;  // members, in graph order
    int n;
    int kernel;  // index of its kernel in the generated source (codegen)
    int args[KG_MAX_ARGS]; // nodes whose data pointers the kernel takes, in order
    int nargs;
    // KG_GEMM: the GEMM's input lies at the start of its output's memory
    // (plan.c, "rows in place"); the kernel then computes the output rows
    // from the last down in chunks that never write over a row still unread
    bool rows_in_place;
    // KG_GEMM, or KG_EXTERN for a QLINEAR, CPU (codegen_c.c): a GEMM of a
    // few rows of A whose kernel can compute one thread's columns alone,
    // inside a run's region (compile_gemv_runs)
    bool gemv_cols;
} kgroup;

typedef struct cnode {
    int origin;  // node id in the model's graph
    int group;   // kgroup index, -1 for sources, consts and views
    cstore store;
    int base;    // CS_VIEW: node owning the storage; else the node itself
    clayout lay; // CS_VIEW / CS_BUFFER / CS_SOURCE: layout over the base storage
    bool must_store; // read through a view, or by another group, or an output
    int64_t offset;  // CS_BUFFER: byte offset in the arena
    int first, last; // CS_BUFFER: groups that write it first and read it last
} cnode;

typedef struct cprog {
    const model *m;
    graph *g;        // decomposed and simplified
    int *origin;     // g->n entries: the model node each came from
    cnode *info;     // g->n entries (from compile_fuse on)
    int *src_of;     // model node id -> g node id for sources (-1 when dropped)
    kgroup *groups;
    int ngroups;
    size_t arena_bytes;
    bool fusion;
    // plan.c may put a dying GEMM input inside the GEMM's output (CPU only:
    // the kernel must read the rows in the order codegen_c.c writes them)
    bool gemm_rows_in_place;
    // the GEMM or convolution library call writes its output in the anchor's
    // dtype into the group's target (CUDA: cuBLAS and cuDNN are called with
    // one dtype): an epilogue group then ends at a node of that dtype
    bool epilogue_keeps_dtype;
    FILE *log;
    char err[512];
} cprog;

// The attention pattern (attention.c): out[o] (g->n entries) describes the
// unfused attention chain that ends at model node o, a matmul of the
// probabilities with v (q -1 for every other node); decompose writes one
// ATTENTION node there, and the chain's other nodes die. Each replacement
// is logged to log (may be NULL). A fusion ablation (fusion false: the
// captured mode, TCBENCH_DISABLE_FUSION) and TCBENCH_DISABLE_FUSED_ATTENTION=1
// turn it off. The count found, or -1 out of memory.
//
// In a training step graph the chain's backward (autograd.c's rules for
// matmul, scale, where, softmax and the views) is found too: dy, the
// gradient of o, and the nodes holding the chain's contributions to the
// gradients of q, k and v (after GQA's sums over the repeated heads).
// Decompose writes one ATTENTION_GRAD there, sliced; the rest of the
// backward chain, softmax's output included, dies with the forward's.
typedef struct compile_attention {
    int q, k, v; // model nodes; k and v are the kv heads (before any repeat)
    int bias;    // the score bias added after the scale (T5's), or -1
    bool causal;
    double scale;
    int dy, gq, gk, gv; // the backward's nodes, -1 each in an inference chain
} compile_attention;
int compile_attention_find(const graph *g, bool fusion, FILE *log, compile_attention *out);

// Passes. Each returns 0 or -1 with p->err set.
int compile_decompose(cprog *p);
int compile_simplify(cprog *p);
// LINEAR over a DEQUANT read once into QLINEAR, in place (quant.c); after decompose
int compile_quant(cprog *p);
int compile_fuse(cprog *p);
// CPU only, after fuse: convolution activations channels-last (layout.c)
// Buffer v is channels-last (NHWC strides over its NCHW shape), as
// compile_layouts makes the ones it picks.
bool compile_channels_last(const cprog *p, int v);
int compile_layouts(cprog *p);
int compile_plan(cprog *p);
// The CPU pipeline up to the memory plan, on m's graph as o asks (fusion,
// log): decompose, simplify, fuse, layouts, plan. Reads no values. 0, or -1
// with p->err set; either way compile_prog_free releases what it made.
int compile_passes(cprog *p, const model *m, const compile_opts *o);
void compile_prog_free(cprog *p);
// The bytes of m's sources a compiled step reads where they are (the
// parameters, buffers and inputs of m->g), as compiled_stats counts them.
size_t compile_sources_bytes(const graph *g);
// The C translation unit for the program; caller frees.
char *compile_codegen_c(cprog *p);
// Runs of GEMMs of a few rows (decoding's matrix-vector products, kgroup
// gemv_cols: f32 GEMMs, and QLINEARs in cpu_qgemm's matrix-vector form,
// codegen_c.c's qlinear_gemv) that follow one another, read one A and share no bytes in a
// way that needs a barrier between them: tc_step runs each in one
// parallel region, every thread its columns of each member in turn, for a
// fork and join a GEMM. run[gi] (ngroups entries): the members of the run
// group gi starts, 1 alone, 0 inside a run. After compile_codegen_c's
// kernels have set gemv_cols. TCBENCH_DISABLE_GEMV_RUNS=1: none.
#define GEMV_RUN_MAX 8
int compile_gemv_runs(const cprog *p, int *run);
// A kernel body with its liftable integers as tc_P[i] (codegen_c.c,
// "Shape-generic kernels"): *text and *vals (n of them) are the caller's to
// free. -1 when memory runs out.
int compile_lift_literals(const char *body, char **text, int64_t **vals, int *n);

// The layout of view node v over its base, from its source's layout; false
// when strides cannot express it.
bool compile_view_layout(const cprog *p, int v, clayout *out);

// A convolution's epilogue as oneDNN post-ops, when every link is one: a
// bias (a per-channel add right after the convolution: its bias argument),
// activations, and add / sub / mul / div / max with a full-size operand (a
// residual). The convolution then writes the final value itself.
#define CONV_POST_MAX 8

typedef struct conv_post {
    enum op op;  // the member's op (an activation, SCALE, or a binary op)
    int member;  // its node
    int operand; // binary: the other node; -1 for activations
    bool per_channel; // binary operand broadcast over (N, ., H, W)
} conv_post;

// Number of post-ops (0 for a bare convolution) or -1 when the epilogue
// needs the generated loop.
int compile_conv_posts(const cprog *p, const kgroup *k, conv_post *out);

// Shared by the code generators (codegen_c.c, codegen_cuda.c).
// The operand slot of node in k (appended when new); -1 when k is full.
int compile_arg_of(kgroup *k, int node);
// Strides of node v over an iteration shape, right-aligned, 0 where v broadcasts.
void compile_eff_strides(const cprog *p, int v, int nd, const int64_t *shape, int64_t *st);
// A float literal in C: NAN, INFINITY, or %.9g with a decimal point and f.
void compile_literal(char *buf, size_t cap, double v);

// Shared helpers.
bool clayout_reshape(const clayout *in, int ndim, const int64_t *shape, clayout *out);
void clayout_contiguous(clayout *l, int ndim, const int64_t *shape);
// Whether l's strides are contiguous over its shape (dims of 1 aside; its
// offset not looked at).
bool clayout_is_contiguous(const clayout *l);
// The same dims, the same sizes.
bool compile_same_shape(const graph_node *a, const graph_node *b);
double compile_scalar_op(enum op op, const graph_node *n, const double *in);
// Elementwise ops the generators write as one expression (act_grad only
// for the activations with a cpu_d<op>f derivative).
bool compile_is_pointwise(const graph_node *n);
// A formula op of core/pointwise.h over the operand x0, or ACT_GRAD of one
// over dy x0 and x x1, as the call both generated dialects make
// ("tc_f_gelu(x0, 0.0f, 0.0f)"), into buf; false for any other op.
bool compile_formula_expr(const graph_node *n, char *buf, size_t cap);
// Does n write its source s in place (updates, training batch norm)?
bool compile_writes(const graph_node *n, int s);
// An update the generated multi-tensor loop runs (f32 AdamW, SGD, running stat).
bool compile_is_generated_update(const graph *g, const graph_node *n);
// A generated update's row in the multi-tensor table (both generators): the
// op code (0 AdamW, 1 SGD with momentum, 2 plain SGD, 3 running stat; as
// cpu_sgd, a momentum of 0 leaves the buffer alone) and its hyperparameters
// (fa0..fa4; SGD's nesterov flag in h[4]).
int compile_update_row(const graph_node *n, double h[5]);
// The operand nodes of group k in the order its kernel takes their pointers
// (k->args, or a KG_UPDATE group's members' sources); returns the count,
// writing at most cap.
int compile_group_operands(const cprog *p, const kgroup *k, int *out, int cap);
int compile_fail(cprog *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
