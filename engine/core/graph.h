// graph: a static dataflow graph of ops with inferred shapes.
//
//   graph *g = graph_new();
//   int x = graph_input(g, "x", DT_F32, 2, (int64_t[]){8, 64});
//   int w = graph_param(g, "fc.weight", 2, (int64_t[]){32, 64}, INIT_NORMAL, 0.02);
//   int y = graph_op(g, OP_LINEAR, 2, (int[]){x, w}, NULL, NULL);
//   y = graph_unary(g, OP_RELU, y);
//   if (y < 0) puts(graph_error(g));     // a shape error, said in words
//   graph_output(g, y);
//   graph_free(g);
//
// Nodes are appended in a topological order by construction: an op can only
// name nodes that exist. Node ids are ints into g->nodes. Every builder call
// infers the output shape and dtype; on a bad shape it returns -1 and leaves
// a message in graph_error() (the caller adds the file position).
#pragma once
#include "dtype.h"
#include "tensor.h"

#include <stdbool.h>
#include <stdint.h>

enum op {
#define OP(U, l, k, a0, a1) OP_##U,
#include "ops.def"
#undef OP
    OP_COUNT
};

enum op_kind {
    OPK_SOURCE,
    OPK_UNARY,
    OPK_BINARY,
    OPK_WHERE,
    OPK_REDUCE,
    OPK_NORM,
    OPK_GEMM,
    OPK_CONV,
    OPK_POOL,
    OPK_GATHER,
    OPK_VIEW,
    OPK_COPY,
    OPK_LOSS,
    OPK_GRAD,   // backward ops (engine/autodiff/autograd.c)
    OPK_UPDATE, // in-place updates of sources (optimizers, running statistics)
    OPK_ATTENTION,
    OPK_RNN, // recurrent layers over (B, T, I) (lstm)
    OPK_FFT, // transforms over trailing axes that keep the shape (fft2_real)
};

// OP_PAD's modes (ia0)
enum { PAD_CONSTANT, PAD_REFLECT };
#define PAD_MAX_DIMS 5 // 1 + 2 * 5 attributes fit graph_node.ia
// OP_GRID_SAMPLE's padding modes (ia0)
enum { GRID_PAD_ZEROS, GRID_PAD_BORDER };

// OP_EMBEDDING_BAG's modes (ia0): only PyTorch's "sum" so far
enum { EMBEDDING_BAG_SUM };

const char *op_name(enum op op);
enum op_kind op_kind(enum op op);
int op_min_srcs(enum op op);
int op_max_srcs(enum op op);

// How PARAM and BUFFER nodes get their values (engine/model/init.c).
enum init_kind {
    INIT_NORMAL,  // N(0, fa0^2)
    INIT_UNIFORM, // U(-fa0, fa0)
    INIT_ZEROS,
    INIT_ONES,
    INIT_CAUSAL_MASK, // bool (T, S): key s visible to query t when s <= t + (S - T)
    INIT_ROPE_COS,    // (T, D): cos(t * theta^(-2(i mod D/2)/D)), fa0 theta
    INIT_ROPE_SIN,
    INIT_REL_SINUSOID, // (2L, D): relative position L - row, [sin | cos](pos * fa0^(-2i/D))
    INIT_CONSTANT,     // every element fa0 (the grad scaler's initial scale)
    // (C K, 1, K, 1): output channel o's taps one-hot at o mod K; a grouped
    // conv2d with it is unfold (im2col) over a (K, 1) window (ConvBERT)
    INIT_UNFOLD_TAPS,
    // (P, D) fairseq's sinusoidal positions (M2M100, XGLM, Speech2Text2):
    // h = D / 2, f_k = exp(-k ln(10000) / (h - 1)); column k < h is
    // sin(p f_k), column h + k cos(p f_k), an odd D's last column 0; row fa0
    // zero when fa0 >= 0 (the padding index)
    INIT_SINUSOID,
    // (P, D) Pegasus's: s = ceil(D / 2); column c < s is sin(p / 10000^(2c / D)),
    // column s + k cos(p / 10000^(2k / D))
    INIT_SINUSOID_PEGASUS,
    // (P, D) the Transformer paper's, interleaved: column 2i is
    // sin(p / 10000^(2i / D)), column 2i + 1 its cos (BERT-pytorch,
    // attention-is-all-you-need-pytorch, Speech-Transformer)
    INIT_SINUSOID_INTERLEAVED,
    // bool (T, S), with t' = t + (S - T) the query's position among the keys:
    INIT_WINDOW_MASK, // key s visible when 0 <= t' - s < fa0: causal, the last fa0 (GPT-Neo local)
    INIT_BAND_MASK,   // key s visible when |s - t'| <= fa0: a band both ways (Longformer)
    // i32 (2T - 1), DeBERTa's relative positions (nn_disentangled.c): element m
    // for the distance d = T - 1 - m (reversed: d = m - (T - 1)) holds
    // clamp(bucket(d) + span, 0, 2 span - 1), bucket the identity or v2's log
    // buckets; fa0 packs span, buckets and max position (graph_rel_index_arg)
    INIT_REL_INDEX,
    // int (T, S): T5's relative position bucket of key s from query t
    // (model_relative_bucket, model.h); ia1 buckets, ia2 1: bidirectional,
    // fa0 max distance
    INIT_RELATIVE_BUCKET,
    // (O, I): torch's bicubic resize of one axis from I to O samples
    // (align_corners false, A = -0.75, taps clamped at the edges;
    // model_bicubic_weight): y = W x along that axis
    INIT_BICUBIC,
    // f32 (H, W): each pixel's column (fa0 0) or row (fa0 1), as
    // torch.meshgrid(arange(W), arange(H), indexing="xy") (Super SloMo's backWarp)
    INIT_PIXEL_GRID,
    // int (Nq, Nk): LeViT's attention-bias offsets (levit_attention_bias):
    // query q on the grid of side ceil(ia1 / ia2) at (qy, qx) ia2 apart, key k
    // on the grid of side ia1 at (ky, kx): |qy ia2 - ky| ia1 + |qx ia2 - kx|
    INIT_LEVIT_OFFSET,
    // f32 (1, N, N, 3), N = ia1^2: ConViT's rel_indices, for patches n and m
    // of the ia1 x ia1 grid [dx, dy, dx^2 + dy^2], dx, dy the column and row
    // of m less those of n
    INIT_CONVIT_REL,
    // i32 (N, N), timm's relative_position_index of a ia1 x ia2 window
    // (Swin, BEiT): token i at (i / ia2, i mod ia2) and j get
    // (hi - hj + ia1 - 1)(2 ia2 - 1) + wi - wj + ia2 - 1; ia3 1: token 0 is a
    // class token (N = ia1 ia2 + 1), its row, column and corner the three
    // entries past those (BEiT's gen_relative_position_index)
    INIT_REL_POS_2D,
    // f32 (nW, N, N), Swin's shifted-window mask over an ia1 x ia2 map in
    // ia3 x ia4 windows shifted by ia5, ia6: 0 between tokens of one region
    // of the rolled map, -100 across regions (timm's attn_mask)
    INIT_SHIFT_MASK,
    // f32 (1, 2 hid, h, w), XCiT's PositionalEncodingFourier before its
    // projection: channel k < hid from the row, hid + k from the column,
    // e = (p + 1) / (size + 1e-6) 2 pi, sin(e / t_k) for even k and cos for
    // odd, t_k = 10000^(2 floor(k / 2) / hid)
    INIT_FOURIER_POS,
    // int (N): element i holds floor(i fa0), nn.EmbeddingBag's offsets of N
    // bags of fa0 indices each (what PyTorch makes for a 2-d input); a
    // fractional fa0 makes bags of uneven sizes, 0 included (the op tests)
    INIT_ARANGE,
};

// INIT_REL_INDEX's fa0: span and buckets below 2^16, max position below 2^20,
// one integer exact in a double. buckets 0: no log buckets.
static inline double graph_rel_index_arg(int64_t span, int64_t buckets, int64_t max_pos,
                                         int reversed) {
    return (double)((((max_pos << 16 | buckets) << 16 | span) << 1) | (reversed != 0));
}

#define GRAPH_MAX_SRCS 8
#define GRAPH_MAX_IA 12
#define GRAPH_MAX_FA 6
// A model file names at most GRAPH_MAX_MODEL_OUTPUTS outputs; the training
// check graph adds one per gradient (engine/autodiff/autograd.h).
#define GRAPH_MAX_MODEL_OUTPUTS 8
#define GRAPH_MAX_OUTPUTS 1024

typedef struct graph_node {
    enum op op;
    enum dtype dtype;
    int ndim;
    int64_t shape[TENSOR_MAX_DIMS];
    int nsrc;
    int src[GRAPH_MAX_SRCS];
    int64_t ia[GRAPH_MAX_IA];
    double fa[GRAPH_MAX_FA];
    char *name; // sources: "layers.0.attn.q.weight"; others may be NULL
} graph_node;

typedef struct graph {
    graph_node *nodes;
    int n, cap;
    int outputs[GRAPH_MAX_OUTPUTS];
    int noutputs;
    int loss; // node id of the scalar loss, or -1
    char err[256];
} graph;

// Ops that write one of their sources in place (OPK_UPDATE, and batch_norm in
// training mode, which updates its running statistics): never merged, never
// dead, and run after every other reader of what they write.
bool op_has_side_effect(const graph_node *n);
// An update whose value (its src0 after the write) later ops of the same
// step may read: kv_write. Every other update's value is for the next step.
bool op_update_readable(const graph_node *n);
// SGD and ADAMW under the grad scaler (ia1 set; engine/autodiff/autograd.h) end with
// three more sources: the loss scale, found_inf and the optimizer's step
// count. The index of the first of them, or -1 for any other node.
int graph_scaler_src(const graph_node *n);

graph *graph_new(void);
void graph_free(graph *g);
const char *graph_error(const graph *g);
// A shape as "(2, 3)", for messages.
void graph_shape_str(int ndim, const int64_t *shape, char *buf, size_t cap);

int graph_input(graph *g, const char *name, enum dtype t, int ndim, const int64_t *shape);
int graph_param(graph *g, const char *name, int ndim, const int64_t *shape,
                enum init_kind init, double scale);
// A PARAM's ia1 set: a frozen parameter, counted and saved with the model but
// never differentiated nor updated (PyTorch's requires_grad=False: Pegasus's
// and Speech2Text2's sinusoidal tables).
#define GRAPH_PARAM_FROZEN 1
int graph_buffer(graph *g, const char *name, enum dtype t, int ndim, const int64_t *shape,
                 enum init_kind init, double arg);
int graph_full(graph *g, double value, enum dtype t, int ndim, const int64_t *shape);
// Removes every node made from `from` on except the parameters, which move
// down in their order: a layer whose parameters a model holds but never uses
// (a causal LM's cross-attention). Parameters have no sources, so nothing
// left points at a removed node. Returns how many parameters were kept.
int graph_keep_params(graph *g, int from);
// A copy of source node n (of another graph) into g, every attribute kept:
// what graph rewrites (autocast, weight quantization) do with sources.
int graph_copy_source(graph *g, const graph_node *n);

// General builder: ia / fa may be NULL (zeros). Shapes for RESHAPE, SLICE,
// EXPAND come from `shape` (ndim entries); other ops infer theirs and ignore it.
int graph_op(graph *g, enum op op, int nsrc, const int *src, const int64_t *ia,
             const double *fa);
int graph_op_shaped(graph *g, enum op op, int nsrc, const int *src, const int64_t *ia,
                    const double *fa, int ndim, const int64_t *shape);

// Short forms.
int graph_unary(graph *g, enum op op, int x);
int graph_binary(graph *g, enum op op, int a, int b);
int graph_scale(graph *g, int x, double mul, double add);
int graph_reshape(graph *g, int x, int ndim, const int64_t *shape); // one -1 allowed
int graph_permute(graph *g, int x, const int *perm);
int graph_slice(graph *g, int x, int axis, int64_t start, int64_t len);
int graph_cast(graph *g, int x, enum dtype t);
// A cast mixed precision made (ia1 = 1; autocast.h): the fp64 reference
// treats it as exact, so that its answer is the model's without autocast.
int graph_autocast(graph *g, int x, enum dtype t);
int graph_reduce(graph *g, enum op op, int x, int axis); // keeps the axis as size 1

void graph_output(graph *g, int node);

static inline const graph_node *graph_at(const graph *g, int id) { return &g->nodes[id]; }
int64_t graph_node_numel(const graph_node *n);
size_t graph_node_bytes(const graph_node *n);

// Counts over the graph.
int64_t graph_param_count(const graph *g);  // elements in PARAM nodes
double graph_flops(const graph *g);         // multiply-add counted as 2
// The fewest bytes a step must move: every source read once, every output
// (and the loss) written once. The floor of the roofline.
double graph_min_bytes(const graph *g);
// use counts of each node (consumers + 1 if it is an output); caller frees.
int *graph_use_counts(const graph *g);
// Text dump, one node a line, for --dump and debugging.
void graph_print(const graph *g, void *file);
