// Layers other than attention: each expands into graph ops the way an eager
// framework's module runs them (one op per framework kernel).
#include "core/pointwise.h"
#include "nn_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define X0 nn_in(x, 0)

// The parameter `tie:` names, made by an earlier layer; -1 with the error.
static int tied_param(nn_ctx *x) {
    const char *name = nn_str(x, "tie", "");
    for (int i = 0; i < x->g->n; i++)
        if (x->g->nodes[i].op == OP_PARAM && x->g->nodes[i].name &&
            strcmp(x->g->nodes[i].name, name) == 0)
            return i;
    return nn_fail(x, "tie", "%s: no parameter named '%s' made before this layer", x->c->type,
                   name);
}

// tied_param, checked to be (rows, cols); the keys' names say which is which
// in the error. -1 on failure.
static int tied_weight(nn_ctx *x, int64_t rows, int64_t cols, const char *rkey, const char *ckey) {
    const char *name = nn_str(x, "tie", "");
    int w = tied_param(x);
    if (w < 0)
        return -1;
    const graph_node *wn = nn_node(x, w);
    if (wn->ndim != 2 || wn->shape[0] != rows || wn->shape[1] != cols)
        return nn_fail(x, "tie", "%s: tied weight '%s' must be (%s %lld, %s %lld)", x->c->type,
                       name, rkey, (long long)rows, ckey, (long long)cols);
    return w;
}

int nn_embedding(nn_ctx *x) {
    // (...) int -> (..., dim); `tie: shared.weight` looks up an earlier
    // layer's (num, dim) weight instead, as BART's encoder and decoder share one
    int64_t num = nn_int(x, "num", 0), dim = nn_int(x, "dim", 0);
    int w = nn_has(x, "tie") ? tied_weight(x, num, dim, "num", "dim")
                             : nn_param(x, "weight", 2, (int64_t[]){num, dim}, INIT_NORMAL, 0.02);
    if (w < 0)
        return -1;
    return nn_emit(x, graph_op(x->g, OP_EMBEDDING, 2, (int[]){w, X0}, NULL, NULL));
}

// x (..., T, D) + rows offset .. offset + T of a (max, D) table, as learned
// and sinusoidal positions add theirs.
static int add_position_rows(nn_ctx *x, int table, int64_t off) {
    const graph_node *in = nn_node(x, X0);
    int64_t T = in->shape[in->ndim - 2], max = nn_node(x, table)->shape[0];
    // a generation step's tokens stand at their positions: rows gathered
    int p = x->c->gen  ? graph_op(x->g, OP_EMBEDDING, 2, (int[]){table, x->c->gen->position_ids},
                                  NULL, NULL)
            : T == max ? table
                       : graph_slice(x->g, table, 0, off, T);
    return nn_emit(x, graph_binary(x->g, OP_ADD, X0, p));
}

// The table's rows and the offset, checked against the input's (..., T, D):
// D into *D; -1 after the error.
static int position_rows_check(nn_ctx *x, const char *layer, int64_t max, int64_t off, int64_t *D) {
    const graph_node *in = nn_node(x, X0);
    if (in->ndim < 2)
        return nn_fail(x, NULL, "%s needs (..., T, D) input", layer);
    int64_t T = in->shape[in->ndim - 2];
    *D = in->shape[in->ndim - 1];
    if (off < 0 || (off > 0 && off >= max))
        return nn_fail(x, "offset", "%s: offset %lld is outside the %lld rows", layer,
                       (long long)off, (long long)max);
    if (T + off > max && off == 0)
        return nn_fail(x, "max", "%s: sequence of %lld exceeds max %lld", layer, (long long)T,
                       (long long)max);
    if (T + off > max)
        return nn_fail(x, "max", "%s: sequence of %lld from offset %lld exceeds max %lld", layer,
                       (long long)T, (long long)off, (long long)max);
    if (x->c->gen && off)
        return nn_fail(x, "offset", "%s: an offset in generation is not built yet", layer);
    return 0;
}

int nn_positional_embedding(nn_ctx *x) {
    // x (..., T, D) + weight[offset : offset + T] (T, D); RoBERTa's rows start
    // past its padding index (offset 2)
    int64_t max = nn_int(x, "max", 0), off = nn_int(x, "offset", 0), D;
    if (position_rows_check(x, "positional_embedding", max, off, &D) < 0)
        return -1;
    int w = nn_param(x, "weight", 2, (int64_t[]){max, D}, INIT_NORMAL, 0.02);
    if (w < 0)
        return -1;
    return add_position_rows(x, w, off);
}

int nn_sinusoidal_positions(nn_ctx *x) {
    // x (..., T, D) + table[offset : offset + T] (T, D), the table (max, D) a
    // constant: fairseq's (M2M100, XGLM, Speech2Text2: sines then cosines, the
    // padding row zero, positions past the padding index), Pegasus's (its
    // own frequencies) or the Transformer paper's interleaved sines and
    // cosines. A buffer, or with `parameter: true` a frozen parameter, as
    // Pegasus and Speech2Text2 hold theirs (counted, untrained)
    const char *form = nn_str(x, "form", "fairseq");
    int64_t max = nn_int(x, "max", 0), off = nn_int(x, "offset", 0);
    int64_t pad = nn_int(x, "padding_idx", -1), D;
    bool pegasus = !strcmp(form, "pegasus"), interleaved = !strcmp(form, "interleaved");
    if (!pegasus && !interleaved && strcmp(form, "fairseq") != 0)
        return nn_fail(x, "form",
                       "sinusoidal_positions: form '%s' is not one of fairseq, pegasus, "
                       "interleaved",
                       form);
    if (position_rows_check(x, "sinusoidal_positions", max, off, &D) < 0)
        return -1;
    if ((pegasus || interleaved) && pad != -1)
        return nn_fail(x, "padding_idx", "sinusoidal_positions: %s table has no padding row",
                       pegasus ? "Pegasus's" : "the interleaved");
    if (pad < -1 || pad >= max)
        return nn_fail(x, "padding_idx",
                       "sinusoidal_positions: padding_idx %lld is not one of the %lld rows "
                       "(or -1: none)",
                       (long long)pad, (long long)max);
    if (!pegasus && !interleaved && D < 4)
        return nn_fail(x, NULL, "sinusoidal_positions: fairseq's table needs D >= 4, not %lld",
                       (long long)D);
    char name[96];
    snprintf(name, sizeof name, "sinusoid_%s.%lldx%lld.pad%lld", form, (long long)max, (long long)D,
             (long long)pad);
    enum init_kind init = pegasus       ? INIT_SINUSOID_PEGASUS
                          : interleaved ? INIT_SINUSOID_INTERLEAVED
                                        : INIT_SINUSOID;
    int t;
    if (nn_bool(x, "parameter", false)) { // a frozen parameter of its own, counted
        t = nn_param(x, "weight", 2, (int64_t[]){max, D}, init, (double)pad);
        if (t >= 0)
            x->g->nodes[t].ia[1] = GRAPH_PARAM_FROZEN;
    } else {
        t = nn_shared_buffer(x, name, DT_F32, 2, (int64_t[]){max, D}, init, (double)pad);
    }
    if (t < 0)
        return -1;
    return add_position_rows(x, t, off);
}

int nn_box_embedding(nn_ctx *x) {
    // x (B, T, D) plus LayoutLM's 2-D position embeddings of boxes (B, T, 4),
    // integers x0, y0, x1, y1: x[x0] + y[y0] + x[x1] + y[y1] + h[y1 - y0] +
    // w[x1 - x0], added in that order; tables x, y, h, w (max, D)
    const graph_node *in = nn_node(x, X0), *box = nn_node(x, nn_in(x, 1));
    if (in->ndim != 3 || box->ndim != 3 || box->shape[0] != in->shape[0] ||
        box->shape[1] != in->shape[1] || box->shape[2] != 4 ||
        (box->dtype != DT_I32 && box->dtype != DT_I64))
        return nn_fail(x, NULL,
                       "box_embedding takes (B, T, D) and integer boxes (B, T, 4) of the same "
                       "B and T (`input: [., boxes]`)");
    int64_t B = in->shape[0], T = in->shape[1], D = in->shape[2];
    int64_t table[2] = {nn_int(x, "max", 0), D};
    int xt = nn_param(x, "x.weight", 2, table, INIT_NORMAL, 0.02);
    int yt = nn_param(x, "y.weight", 2, table, INIT_NORMAL, 0.02);
    int ht = nn_param(x, "h.weight", 2, table, INIT_NORMAL, 0.02);
    int wt = nn_param(x, "w.weight", 2, table, INIT_NORMAL, 0.02);
    if (xt < 0 || yt < 0 || ht < 0 || wt < 0)
        return -1;
    int c[4]; // (B, T, 1) views: x0, y0, x1, y1
    for (int k = 0; k < 4; k++)
        c[k] = graph_slice(x->g, nn_in(x, 1), 2, k, 1);
    int height = graph_binary(x->g, OP_SUB, c[3], c[1]);
    int width = graph_binary(x->g, OP_SUB, c[2], c[0]);
    const int tab[6] = {xt, yt, xt, yt, ht, wt}, idx[6] = {c[0], c[1], c[2], c[3], height, width};
    int sum = X0;
    for (int k = 0; k < 6 && sum >= 0; k++) {
        int e =
            idx[k] < 0 ? -1 : graph_op(x->g, OP_EMBEDDING, 2, (int[]){tab[k], idx[k]}, NULL, NULL);
        e = graph_reshape(x->g, e, 3, (int64_t[]){B, T, D}); // (B, T, 1, D) -> (B, T, D)
        sum = graph_binary(x->g, OP_ADD, sum, e);
    }
    return nn_emit(x, sum);
}

int nn_linear_to(nn_ctx *x, int in, int64_t out, bool bias, const char *role) {
    // (..., K) -> (..., out); PyTorch's default init, U(-1/sqrt(K), 1/sqrt(K))
    const graph_node *n = nn_node(x, in);
    if (n->ndim < 1)
        return nn_fail(x, NULL, "%s needs at least a 1-d input", x->c->type);
    int64_t K = n->shape[n->ndim - 1];
    double bound = 1.0 / sqrt((double)K);
    char r[96];
    snprintf(r, sizeof r, "%s%sweight", role ? role : "", role ? "." : "");
    int w = nn_param(x, r, 2, (int64_t[]){out, K}, INIT_UNIFORM, bound);
    if (w < 0)
        return -1;
    int src[3] = {in, w, -1};
    if (bias) {
        snprintf(r, sizeof r, "%s%sbias", role ? role : "", role ? "." : "");
        src[2] = nn_param(x, r, 1, &out, INIT_UNIFORM, bound);
        if (src[2] < 0)
            return -1;
    }
    return nn_check(x, graph_op(x->g, OP_LINEAR, bias ? 3 : 2, src, NULL, NULL));
}

// (..., K) -> (..., out) with the weight (out, K) of an earlier layer, as a
// tied lm_head uses the word embeddings (`tie: word_embeddings.weight`).
static int linear_tied(nn_ctx *x, int64_t out, bool bias) {
    const graph_node *in = nn_node(x, X0);
    int64_t K = in->ndim > 0 ? in->shape[in->ndim - 1] : 0;
    int w = tied_weight(x, out, K, "out", "in");
    if (w < 0)
        return -1;
    int src[3] = {X0, w, -1};
    if (bias && (src[2] = nn_param(x, "bias", 1, &out, INIT_UNIFORM, 1.0 / sqrt((double)K))) < 0)
        return -1;
    return nn_check(x, graph_op(x->g, OP_LINEAR, bias ? 3 : 2, src, NULL, NULL));
}

// MobileBERT's decoder: x (..., K0 + E) @ cat([tied^T (K0, out), extra (E, out)])
// + bias, as the class runs it: the transposed view, the concatenated copy,
// one GEMM, then the bias added. `extra.weight (E, out)` is the class's
// dense.weight, the columns the tied embeddings (K0 wide) lack.
static int linear_tied_extra(nn_ctx *x, int64_t out, bool bias) {
    const char *name = nn_str(x, "tie", "");
    const graph_node *in = nn_node(x, X0);
    int64_t E = nn_int(x, "tie_extra", 0), K = in->ndim > 0 ? in->shape[in->ndim - 1] : 0;
    int w = tied_param(x);
    if (w < 0)
        return -1;
    const graph_node *wn = nn_node(x, w);
    if (E <= 0 || E >= K)
        return nn_fail(x, "tie_extra", "linear: tie_extra must be in [1, %lld), got %lld",
                       (long long)K, (long long)E);
    if (wn->ndim != 2 || wn->shape[0] != out || wn->shape[1] != K - E)
        return nn_fail(x, "tie",
                       "linear: tied weight '%s' must be (out %lld, in %lld): the input's %lld "
                       "less tie_extra",
                       name, (long long)out, (long long)(K - E), (long long)K);
    double bound = 1.0 / sqrt((double)K);
    int ew = nn_param(x, "extra.weight", 2, (int64_t[]){E, out}, INIT_UNIFORM, bound);
    int t = ew < 0 ? -1 : nn_check(x, graph_permute(x->g, w, (int[]){1, 0})); // (K0, out) view
    int64_t ia[GRAPH_MAX_IA] = {0};
    int cat = t < 0 ? -1 : nn_check(x, graph_op(x->g, OP_CONCAT, 2, (int[]){t, ew}, ia, NULL));
    int y = cat < 0 ? -1 : nn_check(x, graph_binary(x->g, OP_MATMUL, X0, cat)); // (..., out)
    if (y < 0 || !bias)
        return y;
    int b = nn_param(x, "bias", 1, &out, INIT_ZEROS, 0);
    return b < 0 ? -1 : nn_check(x, graph_binary(x->g, OP_ADD, y, b));
}

int nn_linear(nn_ctx *x) {
    int64_t out = nn_int(x, "out", 0);
    bool bias = nn_bool(x, "bias", true);
    if (out <= 0)
        return nn_fail(x, "out", "linear: out must be positive, got %lld", (long long)out);
    if (nn_has(x, "tie_extra") && !nn_has(x, "tie"))
        return nn_fail(x, "tie_extra", "linear: tie_extra widens a tied weight; give tie too");
    if (nn_has(x, "tie_extra"))
        return nn_emit(x, linear_tied_extra(x, out, bias));
    if (nn_has(x, "tie"))
        return nn_emit(x, linear_tied(x, out, bias));
    return nn_emit(x, nn_linear_to(x, X0, out, bias, NULL));
}

static int conv_common(nn_ctx *x, bool transpose, bool std) {
    // x (N, C, H, W) -> (N, out, H', W')
    const graph_node *in = nn_node(x, X0);
    if (in->ndim != 4)
        return nn_fail(x, NULL, "%s needs (N, C, H, W) input, got %d dimensions", x->c->type,
                       in->ndim);
    int64_t k[2], st[2], pad[2], dil[2], opad[2];
    if (nn_ints(x, "kernel", 2, k, 1) < 0 || nn_ints(x, "stride", 2, st, 1) < 0 ||
        nn_ints(x, "padding", 2, pad, 0) < 0 || nn_ints(x, "dilation", 2, dil, 1) < 0 ||
        nn_ints(x, "output_padding", 2, opad, 0) < 0)
        return -1;
    int64_t C = in->shape[1], O = nn_int(x, "out", 0), G = nn_int(x, "groups", 1);
    for (int i = 0; i < 2; i++) {
        if (k[i] <= 0)
            return nn_fail(x, "kernel", "%s: kernel must be positive", x->c->type);
        if (st[i] <= 0)
            return nn_fail(x, "stride", "%s: stride must be positive", x->c->type);
        if (dil[i] <= 0)
            return nn_fail(x, "dilation", "%s: dilation must be positive", x->c->type);
        if (pad[i] < 0)
            return nn_fail(x, "padding", "%s: padding must not be negative", x->c->type);
    }
    if (O <= 0)
        return nn_fail(x, "out", "%s: out must be positive", x->c->type);
    if (G <= 0 || C % G || O % G)
        return nn_fail(x, nn_has(x, "groups") ? "groups" : NULL,
                       "%s: %lld input and %lld output channels do not split into %lld groups",
                       x->c->type, (long long)C, (long long)O, (long long)G);
    int64_t wshape[4];
    double fan;
    if (!transpose) {
        wshape[0] = O, wshape[1] = C / G;
        fan = (double)(O / G) * (double)(k[0] * k[1]); // fan_out, as torchvision
    } else {
        wshape[0] = C, wshape[1] = O / G;
        fan = (double)(C / G) * (double)(k[0] * k[1]);
    }
    wshape[2] = k[0], wshape[3] = k[1];
    // Kaiming normal (fan_out, ReLU gain): keeps activations at unit scale
    // through deep convnets, so accuracy checks compare meaningful numbers.
    int w = nn_param(x, "weight", 4, wshape, INIT_NORMAL, sqrt(2.0 / fan));
    if (w < 0)
        return -1;
    if (std) {
        // NFNet's ScaledStdConv2d: the weight standardized every step,
        // scale gamma / sqrt(fan_in)
        int gain = nn_param(x, "gain", 4, (int64_t[]){O, 1, 1, 1}, INIT_ONES, 0);
        double scale = nn_float(x, "gamma", 1.0) / sqrt((double)(C / G * k[0] * k[1]));
        if (gain < 0 ||
            (w = nn_check(x, nn_standardize_weight(x->g, w, gain, scale,
                                                   nn_float(x, "eps", 1e-6)))) < 0)
            return -1;
    }
    int src[3] = {X0, w, -1};
    bool bias = nn_bool(x, "bias", true);
    if (bias && (src[2] = nn_param(x, "bias", 1, &O, INIT_ZEROS, 0)) < 0)
        return -1;
    int64_t ia[GRAPH_MAX_IA] = {st[0], st[1], pad[0], pad[1], dil[0], dil[1], G, opad[0], opad[1]};
    return nn_emit(x, graph_op(x->g, transpose ? OP_CONV_TRANSPOSE2D : OP_CONV2D, bias ? 3 : 2, src,
                               ia, NULL));
}

int nn_conv2d(nn_ctx *x) { return conv_common(x, false, false); }
int nn_conv_transpose2d(nn_ctx *x) { return conv_common(x, true, false); }
int nn_std_conv2d(nn_ctx *x) { return conv_common(x, false, true); }

static int channels(nn_ctx *x, int axis_from_end) {
    const graph_node *in = nn_node(x, X0);
    if (axis_from_end)
        return in->ndim >= 1 ? (int)in->shape[in->ndim - 1] : -1;
    return in->ndim >= 2 ? (int)in->shape[1] : -1;
}

static int norm_params(nn_ctx *x, int64_t C, int *w, int *b) {
    *w = nn_param(x, "weight", 1, &C, INIT_ONES, 0);
    if (*w < 0)
        return -1;
    if (b)
        *b = nn_param(x, "bias", 1, &C, INIT_ZEROS, 0);
    return b && *b < 0 ? -1 : 0;
}

// buffers running_mean (zeros) and running_var (ones), (C)
static int running_stats(nn_ctx *x, int64_t C, int *rm, int *rv) {
    char name[256];
    nn_pname(x, "running_mean", name, sizeof name);
    *rm = nn_check(x, graph_buffer(x->g, name, DT_F32, 1, &C, INIT_ZEROS, 0));
    nn_pname(x, "running_var", name, sizeof name);
    *rv = nn_check(x, graph_buffer(x->g, name, DT_F32, 1, &C, INIT_ONES, 0));
    return *rm < 0 || *rv < 0 ? -1 : 0;
}

int nn_batch_norm(nn_ctx *x) {
    // (N, C, ...) with running statistics (inference) as buffers
    int64_t C = channels(x, 0);
    if (C <= 0)
        return nn_fail(x, NULL, "batch_norm needs (N, C, ...) input");
    if (x->c->shared)
        return nn_fail(x, NULL,
                       "batch_norm in a shared repeat: its running statistics would be "
                       "shared by every repetition, which is not built; leave it out "
                       "of the shared body");
    int w, b, rm, rv;
    if (norm_params(x, C, &w, &b) < 0 || running_stats(x, C, &rm, &rv) < 0)
        return -1;
    double fa[GRAPH_MAX_FA] = {nn_float(x, "eps", 1e-5), nn_float(x, "momentum", 0.1)};
    // training: batch statistics, and the running ones updated (train mode)
    int64_t ia[GRAPH_MAX_IA] = {x->c->training};
    return nn_emit(x, graph_op(x->g, OP_BATCH_NORM, 5, (int[]){X0, w, b, rm, rv}, ia, fa));
}

int nn_layer_norm(nn_ctx *x) {
    int64_t C = channels(x, 1);
    if (C <= 0)
        return nn_fail(x, NULL, "layer_norm needs at least a 1-d input");
    int w, b;
    if (norm_params(x, C, &w, &b) < 0)
        return -1;
    double fa[GRAPH_MAX_FA] = {nn_float(x, "eps", 1e-5)};
    return nn_emit(x, graph_op(x->g, OP_LAYER_NORM, 3, (int[]){X0, w, b}, NULL, fa));
}

int nn_rms_norm(nn_ctx *x) {
    int64_t C = channels(x, 1);
    if (C <= 0)
        return nn_fail(x, NULL, "rms_norm needs at least a 1-d input");
    int w;
    if (norm_params(x, C, &w, NULL) < 0)
        return -1;
    double fa[GRAPH_MAX_FA] = {nn_float(x, "eps", 1e-6)};
    return nn_emit(x, graph_op(x->g, OP_RMS_NORM, 2, (int[]){X0, w}, NULL, fa));
}

int nn_group_norm(nn_ctx *x) {
    int64_t C = channels(x, 0), G = nn_int(x, "groups", 1);
    if (C <= 0)
        return nn_fail(x, NULL, "group_norm needs (N, C, ...) input");
    if (G <= 0 || C % G)
        return nn_fail(x, "groups", "group_norm: %lld channels do not split into %lld groups",
                       (long long)C, (long long)G);
    int w, b;
    if (norm_params(x, C, &w, &b) < 0)
        return -1;
    double fa[GRAPH_MAX_FA] = {nn_float(x, "eps", 1e-5)};
    int64_t ia[GRAPH_MAX_IA] = {G};
    return nn_emit(x, graph_op(x->g, OP_GROUP_NORM, 3, (int[]){X0, w, b}, ia, fa));
}

// nn.InstanceNorm2d: each (sample, channel) normalized over its own H x W,
// one instance_norm kernel as torch's; not affine (the class's default):
// constant weight 1 and bias 0, no parameters. With track_running_stats
// (StarGAN) the class keeps running_mean and running_var buffers and, in
// eval mode, normalizes by them: batch_norm's inference kernel on them here.
// Training normalizes by the instance's statistics and leaves the buffers
// as they are (torch also updates them: a few small kernels not built).
int nn_instance_norm(nn_ctx *x) {
    int64_t C = channels(x, 0);
    if (C <= 0 || nn_node(x, X0)->ndim < 3)
        return nn_fail(x, NULL, "instance_norm needs (N, C, H, ...) input");
    bool affine = nn_bool(x, "affine", false), track = nn_bool(x, "track_running_stats", false);
    int w, b;
    if (affine && norm_params(x, C, &w, &b) < 0)
        return -1;
    if (!affine) {
        w = nn_check(x, graph_full(x->g, 1, DT_F32, 1, &C));
        b = nn_check(x, graph_full(x->g, 0, DT_F32, 1, &C));
        if (w < 0 || b < 0)
            return -1;
    }
    double fa[GRAPH_MAX_FA] = {nn_float(x, "eps", 1e-5)};
    if (track) {
        if (x->c->shared)
            return nn_fail(x, "track_running_stats",
                           "instance_norm with running statistics in a shared repeat is not "
                           "built; leave it out of the shared body");
        int rm, rv;
        if (running_stats(x, C, &rm, &rv) < 0)
            return -1;
        if (!x->c->training)
            return nn_emit(x, graph_op(x->g, OP_BATCH_NORM, 5, (int[]){X0, w, b, rm, rv},
                                       (int64_t[GRAPH_MAX_IA]){0}, fa));
    }
    int64_t ia[GRAPH_MAX_IA] = {C};
    return nn_emit(x, graph_op(x->g, OP_INSTANCE_NORM, 3, (int[]){X0, w, b}, ia, fa));
}

// The formula op of the same name (core/pointwise.h), its attributes the
// layer's keys (nn.c's table row) or the formula's defaults.
int nn_activation(nn_ctx *x) {
    static const struct {
        const char *name;
        enum op op;
        double a0, b0;
    } acts[] = {
#define X(U, l, a0, b0) {#l, OP_##U, a0, b0},
        TC_POINTWISE_OPS(X)
#undef X
    };
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++)
        if (strcmp(acts[i].name, x->c->type) == 0) {
            double fa[GRAPH_MAX_FA] = {acts[i].a0, acts[i].b0};
            nn_activation_attrs(x, fa, GRAPH_MAX_FA);
            return nn_emit(x, graph_op(x->g, acts[i].op, 1, (int[]){X0}, NULL, fa));
        }
    return nn_fail(x, NULL, "unknown activation '%s'", x->c->type);
}

int nn_dropout(nn_ctx *x) {
    double p = nn_float(x, "p", 0.1);
    if (p < 0 || p >= 1)
        return nn_fail(x, "p", "dropout: p must be in [0, 1), got %g", p);
    // Inference runs modules in eval mode: dropout is the identity and
    // launches nothing, as in PyTorch.
    if (!x->c->training || p == 0)
        return nn_emit(x, X0);
    int64_t ia[GRAPH_MAX_IA] = {x->g->n}; // mask stream: unique per dropout site
    double fa[GRAPH_MAX_FA] = {p};
    return nn_emit(x, graph_op(x->g, OP_DROPOUT, 1, (int[]){X0}, ia, fa));
}

int nn_pool(nn_ctx *x) {
    int64_t k[2], st[2], pad[2];
    if (nn_ints(x, "kernel", 2, k, 1) < 0 || nn_ints(x, "padding", 2, pad, 0) < 0)
        return -1;
    if (nn_ints(x, "stride", 2, st, 0) < 0)
        return -1;
    if (!nn_has(x, "stride"))
        st[0] = k[0], st[1] = k[1];
    for (int i = 0; i < 2; i++) {
        if (k[i] <= 0)
            return nn_fail(x, "kernel", "%s: kernel must be positive", x->c->type);
        if (st[i] <= 0)
            return nn_fail(x, "stride", "%s: stride must be positive", x->c->type);
        if (pad[i] < 0 || 2 * pad[i] > k[i])
            return nn_fail(x, "padding", "%s: padding must be between 0 and half the kernel",
                           x->c->type);
    }
    bool ceil_mode = nn_bool(x, "ceil_mode", false);
    bool exclude = !nn_bool(x, "count_include_pad", true);
    // oneDNN pads the right for ceil mode and would count that padding too
    if (ceil_mode && !exclude && strcmp(x->c->type, "avg_pool2d") == 0)
        return nn_fail(x, "ceil_mode",
                       "avg_pool2d: ceil_mode with the padding counted is not built; "
                       "add count_include_pad: false");
    int64_t ia[GRAPH_MAX_IA] = {st[0], st[1], pad[0], pad[1], k[0], k[1], ceil_mode, exclude};
    enum op op = strcmp(x->c->type, "max_pool2d") == 0 ? OP_MAX_POOL2D : OP_AVG_POOL2D;
    return nn_emit(x, graph_op(x->g, op, 1, (int[]){X0}, ia, NULL));
}

int nn_global_avg_pool(nn_ctx *x) {
    // (N, C, H, W) -> (N, C, 1, 1): one mean over H*W, as adaptive_avg_pool2d(1)
    const graph_node *in = nn_node(x, X0);
    if (in->ndim != 4)
        return nn_fail(x, NULL, "global_avg_pool needs (N, C, H, W) input");
    int64_t N = in->shape[0], C = in->shape[1];
    int r = graph_reshape(x->g, X0, 3, (int64_t[]){N, C, -1});
    r = graph_reduce(x->g, OP_MEAN, r, 2);
    return nn_emit(x, graph_reshape(x->g, r, 4, (int64_t[]){N, C, 1, 1}));
}

int nn_mean(nn_ctx *x) {
    // (..., L, ...) -> (..., ...): one mean over `axis`, as torch's x.mean(dim)
    // (Twins' pooled tokens); keepdim keeps the axis as 1
    const graph_node *in = nn_node(x, X0);
    int nd = in->ndim;
    int64_t axis = nn_int(x, "axis", 0);
    if (axis < -nd || axis >= nd)
        return nn_fail(x, "axis", "mean: axis %lld is outside the input's %d dimensions",
                       (long long)axis, nd);
    axis = axis < 0 ? axis + nd : axis;
    int r = nn_check(x, graph_reduce(x->g, OP_MEAN, X0, (int)axis));
    if (r < 0 || nn_bool(x, "keepdim", false) || nd == 1)
        return r < 0 ? -1 : nn_emit(x, r);
    int64_t shape[TENSOR_MAX_DIMS];
    for (int i = 0, k = 0; i < nd; i++)
        if (i != axis)
            shape[k++] = in->shape[i];
    return nn_emit(x, graph_reshape(x->g, r, nd - 1, shape));
}

// (N, C, H, W) -> (N, C, size[0], size[1]), F.interpolate's bilinear mode as
// one kernel (upsample_bilinear2d's, op upsample_bilinear)
static int bilinear(nn_ctx *x, const int64_t *size) {
    int64_t ia[GRAPH_MAX_IA] = {0, nn_bool(x, "align_corners", false), size[0], size[1]};
    return nn_emit(x, graph_op(x->g, OP_UPSAMPLE_BILINEAR, 1, (int[]){X0}, ia, NULL));
}

// A resizing layer's mode: 1 bilinear, 0 its other mode (the default), -1
// an error; align_corners only with bilinear, as F.interpolate says.
static int resize_mode(nn_ctx *x, const char *layer, const char *other) {
    const char *mode = nn_str(x, "mode", other);
    bool lin = strcmp(mode, "bilinear") == 0;
    if (strcmp(mode, other) != 0 && !lin)
        return nn_fail(x, "mode", "%s: mode '%s' is not supported; use %s or bilinear", layer, mode,
                       other);
    if (!lin && nn_has(x, "align_corners"))
        return nn_fail(x, "align_corners", "%s: align_corners is for the bilinear mode", layer);
    return lin;
}

int nn_upsample(nn_ctx *x) {
    int lin = resize_mode(x, "upsample", "nearest");
    if (lin < 0)
        return -1;
    int64_t s = nn_int(x, "scale", 2);
    if (s < 1)
        return nn_fail(x, "scale", "upsample: scale must be a positive integer");
    const graph_node *in = nn_node(x, X0);
    if (lin && in->ndim != 4)
        return nn_fail(x, NULL, "upsample: bilinear needs (N, C, H, W) input");
    if (lin)
        return bilinear(x, (int64_t[]){in->shape[2] * s, in->shape[3] * s});
    int64_t ia[GRAPH_MAX_IA] = {s};
    return nn_emit(x, graph_op(x->g, OP_UPSAMPLE_NEAREST, 1, (int[]){X0}, ia, NULL));
}

int nn_interpolate(nn_ctx *x) {
    // (N, C, H, W) -> (N, C, Ho, Wo). bilinear: one kernel. bicubic (size
    // given, align_corners false) as Wh (Ho, H) @ x @ Ww^T (W, Wo): two GEMMs
    // with constant weight tables (INIT_BICUBIC) where torch runs one
    // kernel; an axis already at its size is left alone, a same-size
    // resize is the input itself (as timm's scale_image skips it)
    const graph_node *in = nn_node(x, X0);
    if (in->ndim != 4)
        return nn_fail(x, NULL, "interpolate needs (N, C, H, W) input");
    int lin = resize_mode(x, "interpolate", "bicubic");
    if (lin < 0)
        return -1;
    int64_t size[2];
    if (nn_ints(x, "size", 2, size, 0) < 0)
        return -1;
    if (size[0] < 1 || size[1] < 1)
        return nn_fail(x, "size", "interpolate: sizes must be positive");
    if (lin)
        return bilinear(x, size);
    int y = X0;
    for (int axis = 0; axis < 2; axis++) {
        int64_t n_in = in->shape[2 + axis], n_out = size[axis];
        if (n_in == n_out)
            continue;
        char name[64];
        snprintf(name, sizeof name, "bicubic.%lldx%lld", (long long)n_out, (long long)n_in);
        int w = nn_shared_buffer(x, name, DT_F32, 2, (int64_t[]){n_out, n_in}, INIT_BICUBIC, 0);
        if (w < 0)
            return -1;
        y = axis == 0 ? graph_binary(x->g, OP_MATMUL, w, y)
                      : graph_binary(x->g, OP_MATMUL, y, graph_permute(x->g, w, (int[]){1, 0}));
        if (nn_check(x, y) < 0)
            return -1;
    }
    return nn_emit(x, y);
}

int nn_grid_sample(nn_ctx *x) {
    // x (N, C, H, W) sampled at grid (N, Ho, Wo, 2) -> (N, C, Ho, Wo),
    // F.grid_sample's bilinear mode: one kernel (op grid_sample)
    const char *pad = nn_str(x, "padding", "zeros");
    bool border = strcmp(pad, "border") == 0;
    if (strcmp(pad, "zeros") != 0 && !border)
        return nn_fail(x, "padding",
                       "grid_sample: padding '%s' is not supported; use zeros or border", pad);
    const graph_node *in = nn_node(x, X0), *grid = nn_node(x, nn_in(x, 1));
    if (in->ndim != 4 || grid->ndim != 4 || grid->shape[3] != 2 || grid->shape[0] != in->shape[0])
        return nn_fail(x, NULL,
                       "grid_sample needs x (N, C, H, W) and a grid (N, Ho, Wo, 2) of the same N");
    int64_t ia[GRAPH_MAX_IA] = {border ? GRID_PAD_BORDER : GRID_PAD_ZEROS,
                                nn_bool(x, "align_corners", false)};
    return nn_emit(x, graph_op(x->g, OP_GRID_SAMPLE, 2, (int[]){X0, nn_in(x, 1)}, ia, NULL));
}

int nn_flow_grid(nn_ctx *x) {
    // Super SloMo's backWarp grid: flow (N, 2, H, W) in pixels -> (N, H, W, 2)
    // of 2 ((pixel + flow) / size - 0.5) per axis: x from channel 0 and the
    // column, y from channel 1 and the row (shared (H, W) buffers
    // pixel_grid.{x,y}.HxW); one add and one scale per axis, then a concat
    const graph_node *in = nn_node(x, X0);
    if (in->ndim != 4 || in->shape[1] != 2)
        return nn_fail(x, NULL, "flow_grid needs a flow (N, 2, H, W)");
    int64_t N = in->shape[0], H = in->shape[2], W = in->shape[3], side[2] = {W, H};
    int axes[2];
    for (int a = 0; a < 2; a++) {
        char name[64];
        snprintf(name, sizeof name, "pixel_grid.%c.%lldx%lld", a ? 'y' : 'x', (long long)H,
                 (long long)W);
        int pix = nn_shared_buffer(x, name, DT_F32, 2, (int64_t[]){H, W}, INIT_PIXEL_GRID, a);
        if (pix < 0)
            return -1;
        int u = graph_reshape(x->g, graph_slice(x->g, X0, 1, a, 1), 4, (int64_t[]){N, H, W, 1});
        int p = graph_reshape(x->g, pix, 3, (int64_t[]){H, W, 1});
        axes[a] = graph_scale(x->g, graph_binary(x->g, OP_ADD, p, u), 2.0 / (double)side[a], -1);
        if (nn_check(x, axes[a]) < 0)
            return -1;
    }
    int64_t ia[GRAPH_MAX_IA] = {3};
    return nn_emit(x, graph_op(x->g, OP_CONCAT, 2, axes, ia, NULL));
}

int nn_flatten(nn_ctx *x) {
    const graph_node *in = nn_node(x, X0);
    int nd = in->ndim;
    int64_t a = nn_int(x, "start", 1), b = nn_int(x, "end", -1);
    if (a < 0)
        a += nd;
    if (b < 0)
        b += nd;
    if (nd == 0 || a < 0 || b >= nd || a > b)
        return nn_fail(x, nn_has(x, "start") ? "start" : NULL,
                       "flatten: dims %lld..%lld are out of range for %d dimensions",
                       (long long)nn_int(x, "start", 1), (long long)nn_int(x, "end", -1), nd);
    int64_t s[TENSOR_MAX_DIMS];
    int k = 0;
    for (int i = 0; i < a; i++)
        s[k++] = in->shape[i];
    int64_t m = 1;
    for (int64_t i = a; i <= b; i++)
        m *= in->shape[i];
    s[k++] = m;
    for (int i = (int)b + 1; i < nd; i++)
        s[k++] = in->shape[i];
    return nn_emit(x, graph_reshape(x->g, X0, k, s));
}

int nn_reshape(nn_ctx *x) {
    int64_t s[TENSOR_MAX_DIMS];
    int n = nn_list(x, "shape", TENSOR_MAX_DIMS, s);
    if (n < 0)
        return -1;
    for (int i = 0; i < n; i++)
        if (s[i] == 0 || s[i] < -1)
            return nn_fail(x, "shape", "reshape: dimension %d is %lld; use a positive size or -1",
                           i, (long long)s[i]);
    int id = graph_reshape(x->g, X0, n, s);
    if (id < 0)
        return nn_fail(x, "shape", "%s", graph_error(x->g));
    return nn_emit(x, id);
}

// Tensor.repeat (torch.tile): each dim's size times its count, one copy
// kernel as torch's: a dim of size 1 is expanded, any other gets a new
// axis of the count in front of it; the view is copied and reshaped
int nn_tile(nn_ctx *x) {
    int64_t r[TENSOR_MAX_DIMS], v[TENSOR_MAX_DIMS], e[TENSOR_MAX_DIMS], out[TENSOR_MAX_DIMS];
    int n = nn_list(x, "reps", TENSOR_MAX_DIMS, r), k = 0;
    const graph_node xn = *nn_node(x, X0);
    if (n < 0)
        return -1;
    if (n != xn.ndim)
        return nn_fail(x, "reps", "tile: %d counts given for a %d-d tensor", n, xn.ndim);
    for (int d = 0; d < n; d++) {
        if (r[d] <= 0)
            return nn_fail(x, "reps", "tile: count %d is %lld; counts must be positive", d,
                           (long long)r[d]);
        if (r[d] > 1 && xn.shape[d] > 1) {
            if (k + 2 > TENSOR_MAX_DIMS - (n - d - 1))
                return nn_fail(x, "reps", "tile: more than %d dims with the new axes",
                               TENSOR_MAX_DIMS);
            v[k] = 1, e[k++] = r[d];
        }
        v[k] = xn.shape[d], e[k++] = xn.shape[d] > 1 ? xn.shape[d] : r[d];
        out[d] = xn.shape[d] * r[d];
    }
    int id = graph_reshape(x->g, X0, k, v);
    id = graph_op_shaped(x->g, OP_EXPAND, 1, &id, NULL, NULL, k, e);
    id = graph_op(x->g, OP_CONTIGUOUS, 1, &id, NULL, NULL);
    return nn_emit(x, graph_reshape(x->g, id, n, out));
}

int nn_permute(nn_ctx *x) {
    int64_t d[TENSOR_MAX_DIMS];
    int n = nn_list(x, "dims", TENSOR_MAX_DIMS, d);
    if (n < 0)
        return -1;
    if (n != nn_node(x, X0)->ndim)
        return nn_fail(x, "dims", "permute: %d dims given for a %d-d tensor", n,
                       nn_node(x, X0)->ndim);
    int perm[TENSOR_MAX_DIMS];
    for (int i = 0; i < n; i++)
        perm[i] = (int)d[i];
    int id = graph_permute(x->g, X0, perm);
    if (id < 0)
        return nn_fail(x, "dims", "%s", graph_error(x->g));
    return nn_emit(x, id);
}

int nn_binary(nn_ctx *x) {
    bool add = strcmp(x->c->type, "add") == 0, sub = strcmp(x->c->type, "sub") == 0;
    bool div = strcmp(x->c->type, "div") == 0;
    if (x->c->ninputs == 2) {
        if (nn_has(x, "value"))
            return nn_fail(x, "value", "%s: give two inputs or one input and a value, not both",
                           x->c->type);
        enum op op = add ? OP_ADD : sub ? OP_SUB : div ? OP_DIV : OP_MUL;
        return nn_emit(x, graph_binary(x->g, op, X0, nn_in(x, 1)));
    }
    if (!nn_has(x, "value"))
        return nn_fail(x, NULL, "%s needs two inputs (input: [., name]) or a value", x->c->type);
    double v = nn_float(x, "value", 0);
    if (div && v == 0)
        return nn_fail(x, "value", "div: the value must not be 0");
    if (sub)
        v = -v;
    if (div)
        v = 1 / v;
    return nn_emit(x, add || sub ? graph_scale(x->g, X0, 1, v) : graph_scale(x->g, X0, v, 0));
}

int nn_add_buffer(nn_ctx *x) {
    // (..., N) + buffer (N) of zeros that no step updates: the class's
    // registered buffer, as BART's final_logits_bias added to the logits
    const graph_node *in = nn_node(x, X0);
    if (in->ndim < 1)
        return nn_fail(x, NULL, "add_buffer needs at least a 1-d input");
    int64_t N = in->shape[in->ndim - 1];
    char name[256];
    nn_pname(x, "buffer", name, sizeof name);
    int b = nn_check(x, graph_buffer(x->g, name, DT_F32, 1, &N, INIT_ZEROS, 0));
    if (b < 0)
        return -1;
    return nn_emit(x, graph_binary(x->g, OP_ADD, X0, b));
}

int nn_concat(nn_ctx *x) {
    int64_t ia[GRAPH_MAX_IA] = {nn_int(x, "axis", -1)};
    return nn_emit(x, graph_op(x->g, OP_CONCAT, x->c->ninputs, x->c->inputs, ia, NULL));
}

int nn_split(nn_ctx *x) {
    // (..., L, ...) -> views of sizes[i] along axis (chunks: equal parts)
    const graph_node *in = nn_node(x, X0);
    int64_t axis = nn_int(x, "axis", -1);
    if (axis < 0)
        axis += in->ndim;
    if (axis < 0 || axis >= in->ndim)
        return nn_fail(x, "axis", "split: axis out of range for %d dimensions", in->ndim);
    int64_t L = in->shape[axis], sizes[NN_MAX_OUT];
    int n;
    if (nn_has(x, "sizes")) {
        n = nn_list(x, "sizes", NN_MAX_OUT, sizes);
        if (n < 0)
            return -1;
        // one size may be -1: the rest of the axis (DPN's dense path, whose
        // width grows block by block inside one repeat)
        int64_t tot = 0;
        int rest = -1;
        for (int i = 0; i < n; i++) {
            if (sizes[i] == -1 && rest < 0)
                rest = i;
            else
                tot += sizes[i];
        }
        if (rest >= 0 && tot < L)
            sizes[rest] = L - tot, tot = L;
        if (tot != L)
            return nn_fail(x, "sizes", "split: sizes add up to %lld, the axis has %lld",
                           (long long)tot, (long long)L);
    } else {
        int64_t c = nn_int(x, "chunks", 2);
        if (c < 1 || c > NN_MAX_OUT || L % c)
            return nn_fail(x, nn_has(x, "chunks") ? "chunks" : NULL,
                           "split: %lld does not split into %lld equal chunks (at most %d)",
                           (long long)L, (long long)c, NN_MAX_OUT);
        n = (int)c;
        for (int i = 0; i < n; i++)
            sizes[i] = L / c;
    }
    int64_t start = 0;
    for (int i = 0; i < n; i++) {
        if (sizes[i] <= 0)
            return nn_fail(x, "sizes", "split: sizes must be positive");
        int id = nn_check(x, graph_slice(x->g, X0, (int)axis, start, sizes[i]));
        if (id < 0)
            return -1;
        x->r->out[i] = id;
        start += sizes[i];
    }
    x->r->nout = n;
    return 0;
}

int nn_slice(nn_ctx *x) {
    int id = graph_slice(x->g, X0, (int)nn_int(x, "axis", 0), nn_int(x, "start", 0),
                         nn_int(x, "length", 1));
    if (id < 0)
        return nn_fail(x, "length", "%s", graph_error(x->g));
    return nn_emit(x, id);
}

int nn_softmax(nn_ctx *x) {
    // any axis, one kernel, as torch.softmax(x, dim) (and log_softmax)
    int64_t axis = nn_int(x, "axis", -1);
    int nd = nn_node(x, X0)->ndim;
    if (axis < -nd || axis >= nd)
        return nn_fail(x, "axis", "%s: axis %lld is outside the input's %d dims", x->c->type,
                       (long long)axis, nd);
    int64_t ia[GRAPH_MAX_IA] = {axis < 0 ? -1 - axis : nd - 1 - axis};
    enum op op = strcmp(x->c->type, "log_softmax") ? OP_SOFTMAX : OP_LOG_SOFTMAX;
    return nn_emit(x, graph_op(x->g, op, 1, (int[]){X0}, ia, NULL));
}

int nn_cls_token(nn_ctx *x) {
    // (B, T, D) -> (B, T + 1, D) with a learned token in front; with
    // dist_token (DeiT's distillation token) (B, T + 2, D): [token, dist, x],
    // one concat as the class's torch.cat
    const graph_node *in = nn_node(x, X0);
    if (in->ndim != 3)
        return nn_fail(x, NULL, "cls_token needs (B, T, D) input");
    int64_t B = in->shape[0], D = in->shape[2];
    int parts[3], n = 0;
    const char *roles[2] = {"token", "dist_token"};
    for (int i = 0; i < 1 + nn_bool(x, "dist_token", false); i++) {
        int t = nn_param(x, roles[i], 3, (int64_t[]){1, 1, D}, INIT_NORMAL, 0.02);
        if (t < 0)
            return -1;
        parts[n] = graph_op_shaped(x->g, OP_EXPAND, 1, &t, NULL, NULL, 3, (int64_t[]){B, 1, D});
        if (nn_check(x, parts[n++]) < 0)
            return -1;
    }
    parts[n++] = X0;
    int64_t ia[GRAPH_MAX_IA] = {1};
    return nn_emit(x, graph_op(x->g, OP_CONCAT, n, parts, ia, NULL));
}

static int flatten_rows(nn_ctx *x, int id, int keep_last) {
    const graph_node *n = nn_node(x, id);
    if (keep_last)
        return n->ndim == 2 ? id
                            : graph_reshape(x->g, id, 2, (int64_t[]){-1, n->shape[n->ndim - 1]});
    return n->ndim == 1 ? id : graph_reshape(x->g, id, 1, (int64_t[]){-1});
}

int nn_cross_entropy(nn_ctx *x) {
    // logits (..., C), targets (...) -> mean loss over targets != ignore_index;
    // label_smoothing eps mixes eps / C of every class into the target, as
    // F.cross_entropy's label_smoothing
    const graph_node *l = nn_node(x, X0), *t = nn_node(x, nn_in(x, 1));
    if (l->ndim != t->ndim + 1)
        return nn_fail(x, NULL, "cross_entropy: logits must have one more dimension than targets");
    double eps = nn_float(x, "label_smoothing", 0);
    if (!(eps >= 0 && eps <= 1))
        return nn_fail(x, "label_smoothing", "cross_entropy: label_smoothing %g is outside [0, 1]",
                       eps);
    int a = flatten_rows(x, X0, 1), b = flatten_rows(x, nn_in(x, 1), 0);
    int64_t ia[GRAPH_MAX_IA] = {nn_int(x, "ignore_index", -100)};
    double fa[GRAPH_MAX_FA] = {eps};
    if (a < 0 || b < 0)
        return nn_check(x, -1);
    return nn_emit(x, graph_op(x->g, OP_CROSS_ENTROPY, 2, (int[]){a, b}, ia, fa));
}

int nn_mse(nn_ctx *x) {
    return nn_emit(x, graph_op(x->g, OP_MSE_LOSS, 2, (int[]){X0, nn_in(x, 1)}, NULL, NULL));
}

// The mean of every element of the output, as PyTorch's benchmark harness
// trains TorchBench's models (reduce_to_scalar_loss: out.sum() / out.numel()):
// one reduction over the flattened output, a scalar
int nn_output_mean(nn_ctx *x) {
    int flat = flatten_rows(x, X0, 0);
    int r = flat < 0 ? -1 : graph_reduce(x->g, OP_MEAN, flat, 0);
    return nn_emit(x, r < 0 ? r : graph_reshape(x->g, r, 0, NULL));
}

// BCELoss on probabilities, BCEWithLogitsLoss on logits: mean over every
// element. A 0/1 integer target (an input drawn without a range) is cast
// to f32 first, one kernel, as a float label tensor would be made
static int bce(nn_ctx *x, int logits) {
    int t = nn_in(x, 1);
    const graph_node *tn = nn_node(x, t);
    if (tn->dtype == DT_I32 || tn->dtype == DT_I64 || tn->dtype == DT_BOOL)
        t = graph_cast(x->g, t, DT_F32);
    int64_t ia[GRAPH_MAX_IA] = {logits};
    return nn_emit(x, graph_op(x->g, OP_BCE_LOSS, 2, (int[]){X0, t}, ia, NULL));
}

int nn_bce(nn_ctx *x) { return bce(x, 0); }
int nn_bce_with_logits(nn_ctx *x) { return bce(x, 1); }

// nn.Identity: its input, no kernel; names a block's input for the layers
// that read it later (`- identity: {as: hidden}`)
int nn_identity(nn_ctx *x) { return nn_emit(x, X0); }

// MobileBERT's NoNorm: x * weight + bias over the last axis, two kernels as
// the class runs them; weight ones, bias zeros
int nn_no_norm(nn_ctx *x) {
    int64_t C = channels(x, 1);
    if (C <= 0)
        return nn_fail(x, NULL, "no_norm needs at least a 1-d input");
    int w, b;
    if (norm_params(x, C, &w, &b) < 0)
        return -1;
    return nn_emit(x, graph_binary(x->g, OP_ADD, graph_binary(x->g, OP_MUL, X0, w), b));
}

// ResMLP's Affine over the last axis: alpha * x + beta, alpha ones and beta
// zeros (D). PyTorch's addcmul is one kernel; here a mul and an add, which the
// compiled path fuses (docs/zoo.md).
int nn_affine(nn_ctx *x) {
    int64_t C = channels(x, 1);
    if (C <= 0)
        return nn_fail(x, NULL, "affine needs at least a 1-d input");
    int a = nn_param(x, "alpha", 1, &C, INIT_ONES, 0);
    int b = a < 0 ? -1 : nn_param(x, "beta", 1, &C, INIT_ZEROS, 0);
    if (b < 0)
        return -1;
    return nn_emit(x, graph_binary(x->g, OP_ADD, graph_binary(x->g, OP_MUL, X0, a), b));
}

// F.pad with a constant along one axis: (..., L, ...) -> (..., before + L +
// after, ...), one copy (a concat with constant blocks), as constant_pad_nd
// F.pad, one kernel (PAD): `axis` with `before`/`after`, or `pads` in F.pad's
// order (the last dim's before and after first); mode constant (`value`) or
// reflect (each pad below its dim's size)
int nn_pad(nn_ctx *x) {
    const graph_node *in = nn_node(x, X0);
    const char *mode = nn_str(x, "mode", "constant");
    bool reflect = strcmp(mode, "reflect") == 0;
    if (!reflect && strcmp(mode, "constant") != 0)
        return nn_fail(x, "mode", "pad: mode '%s' is not constant or reflect", mode);
    if (reflect && nn_has(x, "value"))
        return nn_fail(x, "value", "pad: a value is for mode constant");
    if (in->ndim > PAD_MAX_DIMS)
        return nn_fail(x, NULL, "pad: at most %d dims, the input has %d", PAD_MAX_DIMS, in->ndim);
    int64_t ia[GRAPH_MAX_IA] = {reflect ? PAD_REFLECT : PAD_CONSTANT};
    if (nn_has(x, "pads")) {
        if (nn_has(x, "axis") || nn_has(x, "before") || nn_has(x, "after"))
            return nn_fail(x, "pads", "pad: give pads or axis with before and after, not both");
        int64_t p[2 * PAD_MAX_DIMS];
        int np = nn_list(x, "pads", 2 * in->ndim, p);
        if (np < 0)
            return -1;
        if (np % 2)
            return nn_fail(x, "pads", "pad: pads holds (before, after) pairs, got %d values", np);
        for (int k = 0; k < np; k++) // F.pad's pair k / 2 pads dim ndim - 1 - k / 2
            ia[1 + 2 * (in->ndim - 1 - k / 2) + k % 2] = p[k];
    } else {
        if (!nn_has(x, "axis"))
            return nn_fail(x, NULL, "pad: needs axis (with before, after) or pads");
        int64_t axis = nn_int(x, "axis", 0);
        if (axis < 0)
            axis += in->ndim;
        if (axis < 0 || axis >= in->ndim)
            return nn_fail(x, "axis", "pad: axis %lld is out of range for %d dimensions",
                           (long long)nn_int(x, "axis", 0), in->ndim);
        ia[1 + 2 * axis] = nn_int(x, "before", 0);
        ia[2 + 2 * axis] = nn_int(x, "after", 0);
    }
    bool any = false;
    for (int d = 0; d < in->ndim; d++) {
        if (ia[1 + 2 * d] < 0 || ia[2 + 2 * d] < 0)
            return nn_fail(x,
                           nn_has(x, "pads")   ? "pads"
                           : ia[1 + 2 * d] < 0 ? "before"
                                               : "after",
                           "pad: before and after must not be negative");
        if (reflect && (ia[1 + 2 * d] >= in->shape[d] || ia[2 + 2 * d] >= in->shape[d]))
            return nn_fail(x, NULL, "pad: reflect pads of dim %d must be below its size %lld", d,
                           (long long)in->shape[d]);
        any |= ia[1 + 2 * d] || ia[2 + 2 * d];
    }
    if (!any)
        return nn_emit(x, X0);
    double fa[GRAPH_MAX_FA] = {nn_float(x, "value", 0)};
    return nn_emit(x, graph_op(x->g, OP_PAD, 1, (int[]){X0}, ia, fa));
}

// FNet's Fourier mixing, torch.fft.fftn(x, dim=(1, 2)).real on (B, T, D):
// one fft2_real op over the last two axes, one library FFT as in PyTorch
int nn_fft2_real(nn_ctx *x) {
    if (nn_node(x, X0)->ndim < 2)
        return nn_fail(x, NULL, "fft2_real needs (..., S, H) input");
    return nn_emit(x, graph_unary(x->g, OP_FFT2_REAL, X0));
}
