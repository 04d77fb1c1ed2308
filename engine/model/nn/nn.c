// The layer table and nn_build: checks a call's keys and inputs, then runs
// the layer's builder. Builders live in nn_layers.c and nn_attention.c.
#include "nn_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

// Key types: i int, f number, b bool, s string, l int or list of ints.
typedef struct nn_keyspec {
    const char *name;
    char type;
    bool required;
} nn_keyspec;

#define NN_MAX_KEYS 20

typedef struct nn_layer {
    const char *name;
    int min_in, max_in;
    nn_build_fn build;
    nn_keyspec keys[NN_MAX_KEYS];
} nn_layer;

int nn_embedding(nn_ctx *x);
int nn_disentangled_attention(nn_ctx *x);
int nn_positional_embedding(nn_ctx *x);
int nn_box_embedding(nn_ctx *x);
int nn_sinusoidal_positions(nn_ctx *x);
int nn_linear(nn_ctx *x);
int nn_conv2d(nn_ctx *x);
int nn_conv_transpose2d(nn_ctx *x);
int nn_batch_norm(nn_ctx *x);
int nn_layer_norm(nn_ctx *x);
int nn_rms_norm(nn_ctx *x);
int nn_group_norm(nn_ctx *x);
int nn_instance_norm(nn_ctx *x);
int nn_bce(nn_ctx *x);
int nn_bce_with_logits(nn_ctx *x);
int nn_activation(nn_ctx *x);
int nn_dropout(nn_ctx *x);
int nn_pool(nn_ctx *x);
int nn_global_avg_pool(nn_ctx *x);
int nn_mean(nn_ctx *x);
int nn_upsample(nn_ctx *x);
int nn_flatten(nn_ctx *x);
int nn_reshape(nn_ctx *x);
int nn_tile(nn_ctx *x);
int nn_permute(nn_ctx *x);
int nn_binary(nn_ctx *x);
int nn_add_buffer(nn_ctx *x);
int nn_concat(nn_ctx *x);
int nn_split(nn_ctx *x);
int nn_slice(nn_ctx *x);
int nn_softmax(nn_ctx *x);
int nn_cls_token(nn_ctx *x);
int nn_identity(nn_ctx *x);
int nn_no_norm(nn_ctx *x);
int nn_affine(nn_ctx *x);
int nn_bottleneck_attention(nn_ctx *x);
int nn_halo_attention(nn_ctx *x);
int nn_pad(nn_ctx *x);
int nn_fft2_real(nn_ctx *x);
int nn_cross_entropy(nn_ctx *x);
int nn_mse(nn_ctx *x);
int nn_output_mean(nn_ctx *x);
int nn_matmul(nn_ctx *x);
int nn_parameter(nn_ctx *x);
int nn_relative_sinusoid(nn_ctx *x);
int nn_interpolate(nn_ctx *x);
int nn_grid_sample(nn_ctx *x);
int nn_flow_grid(nn_ctx *x);
int nn_std_conv2d(nn_ctx *x); // nn_layers.c
int nn_layer_norm2d(nn_ctx *x); // nn_vision.c
int nn_layer_scale(nn_ctx *x);
int nn_drop_path(nn_ctx *x);
int nn_roll(nn_ctx *x);
int nn_window_position_bias(nn_ctx *x);
int nn_window_attention(nn_ctx *x);
int nn_xca_attention(nn_ctx *x);
int nn_outlook_attention(nn_ctx *x);
int nn_fourier_positions(nn_ctx *x);
int nn_embedding_bag(nn_ctx *x); // nn_rec.c
int nn_dot_interaction(nn_ctx *x);

#define CONV_KEYS                                                                                  \
    {"out", 'i', true}, {"kernel", 'l', true}, {"stride", 'l', false}, {"padding", 'l', false},    \
        {"dilation", 'l', false}, {"groups", 'i', false}, {                                        \
        "bias", 'b', false                                                                         \
    }
#define POOL_KEYS                                                                                  \
    {"kernel", 'l', true}, {"stride", 'l', false}, { "padding", 'l', false }

static const nn_layer nn_layers[] = {
    {"embedding",
     1,
     1,
     nn_embedding,
     {{"num", 'i', true}, {"dim", 'i', true}, {"tie", 's', false}}},
    {"positional_embedding",
     1,
     1,
     nn_positional_embedding,
     {{"max", 'i', true}, {"offset", 'i', false}}},
    {"box_embedding", 2, 2, nn_box_embedding, {{"max", 'i', true}}},
    {"sinusoidal_positions",
     1,
     1,
     nn_sinusoidal_positions,
     {{"max", 'i', true},
      {"offset", 'i', false},
      {"padding_idx", 'i', false},
      {"form", 's', false},
      {"parameter", 'b', false}}},
    {"linear",
     1,
     1,
     nn_linear,
     {{"out", 'i', true}, {"bias", 'b', false}, {"tie", 's', false}, {"tie_extra", 'i', false}}},
    {"conv2d", 1, 1, nn_conv2d, {CONV_KEYS, {"share", 's', false}}},
    {"conv_transpose2d", 1, 1, nn_conv_transpose2d, {CONV_KEYS, {"output_padding", 'l', false}}},
    {"std_conv2d", 1, 1, nn_std_conv2d, {CONV_KEYS, {"gamma", 'f', false}, {"eps", 'f', false}}},
    {"batch_norm", 1, 1, nn_batch_norm, {{"eps", 'f', false}, {"momentum", 'f', false}}},
    {"layer_norm", 1, 1, nn_layer_norm, {{"eps", 'f', false}}},
    {"rms_norm", 1, 1, nn_rms_norm, {{"eps", 'f', false}}},
    {"group_norm", 1, 1, nn_group_norm, {{"groups", 'i', true}, {"eps", 'f', false}}},
    {"instance_norm",
     1,
     1,
     nn_instance_norm,
     {{"affine", 'b', false}, {"track_running_stats", 'b', false}, {"eps", 'f', false}}},
    {"layer_norm2d", 1, 1, nn_layer_norm2d, {{"eps", 'f', false}}},
    {"layer_scale", 1, 1, nn_layer_scale, {{"init", 'f', false}, {"channels_first", 'b', false}}},
    {"drop_path", 1, 1, nn_drop_path, {{"p", 'f', false}}},
    {"attention",
     1,
     4,
     nn_attention,
     {{"heads", 'i', true},
      {"kv_heads", 'i', false},
      {"head_dim", 'i', false},
      {"causal", 'b', false},
      {"rotary", 'b', false},
      {"rope_theta", 'f', false},
      {"bias", 'b', false},
      {"qkv_bias", 'b', false},
      {"out_bias", 'b', false},
      {"fused_qkv", 'b', false},
      {"qkv_per_head", 'b', false},
      {"rotary_dims", 'i', false},
      {"rotary_interleaved", 'b', false},
      {"rotary_2d", 'b', false},
      {"scale", 'f', false},
      {"window", 'i', false},
      {"separate_values", 'b', false},
      {"k_bias", 'b', false}}},
    {"convbert_attention",
     1,
     1,
     nn_convbert_attention,
     {{"heads", 'i', true}, {"head_dim", 'i', false}, {"kernel", 'i', false}}},
    {"disentangled_attention",
     1,
     1,
     nn_disentangled_attention,
     {{"heads", 'i', true},
      {"version", 'i', false},
      {"rel_table", 's', false},
      {"max_relative", 'i', false},
      {"buckets", 'i', false},
      {"c2p", 'b', false},
      {"p2c", 'b', false}}},
    {"relative_position_bias",
     1,
     2,
     nn_relative_position_bias,
     {{"buckets", 'i', true},
      {"max_distance", 'i', true},
      {"heads", 'i', true},
      {"bidirectional", 'b', false}}},
    {"relu", 1, 1, nn_activation, {{0}}},
    {"relu6", 1, 1, nn_activation, {{0}}},
    {"gelu", 1, 1, nn_activation, {{0}}},
    {"gelu_tanh", 1, 1, nn_activation, {{0}}},
    {"silu", 1, 1, nn_activation, {{0}}},
    {"tanh", 1, 1, nn_activation, {{0}}},
    {"sigmoid", 1, 1, nn_activation, {{0}}},
    {"exp", 1, 1, nn_activation, {{0}}},
    {"hardswish", 1, 1, nn_activation, {{0}}},
    {"hardsigmoid", 1, 1, nn_activation, {{0}}},
    // PyTorch's names (torch.nn.Mish, LeakyReLU, ELU, Softplus): fa0, fa1
    {"mish", 1, 1, nn_activation, {{0}}},
    {"leaky_relu", 1, 1, nn_activation, {{"negative_slope", 'f', false}}},
    {"elu", 1, 1, nn_activation, {{"alpha", 'f', false}}},
    {"selu", 1, 1, nn_activation, {{0}}},
    {"softplus", 1, 1, nn_activation, {{"beta", 'f', false}, {"threshold", 'f', false}}},
    {"dropout", 1, 1, nn_dropout, {{"p", 'f', false}}},
    {"max_pool2d", 1, 1, nn_pool, {POOL_KEYS, {"ceil_mode", 'b', false}}},
    {"avg_pool2d",
     1,
     1,
     nn_pool,
     {POOL_KEYS, {"ceil_mode", 'b', false}, {"count_include_pad", 'b', false}}},
    {"global_avg_pool", 1, 1, nn_global_avg_pool, {{0}}},
    {"mean", 1, 1, nn_mean, {{"axis", 'i', true}, {"keepdim", 'b', false}}},
    {"upsample",
     1,
     1,
     nn_upsample,
     {{"scale", 'i', true}, {"mode", 's', false}, {"align_corners", 'b', false}}},
    {"flatten", 1, 1, nn_flatten, {{"start", 'i', false}, {"end", 'i', false}}},
    {"reshape", 1, 1, nn_reshape, {{"shape", 'l', true}}},
    {"tile", 1, 1, nn_tile, {{"reps", 'l', true}}},
    {"permute", 1, 1, nn_permute, {{"dims", 'l', true}}},
    {"add", 1, 2, nn_binary, {{"value", 'f', false}}},
    {"mul", 1, 2, nn_binary, {{"value", 'f', false}}},
    {"sub", 1, 2, nn_binary, {{"value", 'f', false}}},
    {"div", 1, 2, nn_binary, {{"value", 'f', false}}},
    {"add_buffer", 1, 1, nn_add_buffer, {{0}}},
    {"concat", 1, 8, nn_concat, {{"axis", 'i', false}}},
    {"split",
     1,
     1,
     nn_split,
     {{"axis", 'i', false}, {"sizes", 'l', false}, {"chunks", 'i', false}}},
    {"slice", 1, 1, nn_slice, {{"axis", 'i', true}, {"start", 'i', false}, {"length", 'i', true}}},
    {"softmax", 1, 1, nn_softmax, {{"axis", 'i', false}}},
    {"log_softmax", 1, 1, nn_softmax, {{"axis", 'i', false}}},
    {"cls_token", 1, 1, nn_cls_token, {{"dist_token", 'b', false}}},
    {"matmul", 2, 2, nn_matmul, {{0}}},
    {"parameter", 1, 1, nn_parameter, {{"shape", 'l', true}, {"std", 'f', false}}},
    {"relative_sinusoid", 1, 1, nn_relative_sinusoid, {{"dim", 'i', false}}},
    {"identity", 1, 1, nn_identity, {{0}}},
    {"no_norm", 1, 1, nn_no_norm, {{0}}},
    {"affine", 1, 1, nn_affine, {{0}}},
    {"bottleneck_attention",
     1,
     1,
     nn_bottleneck_attention,
     {{"heads", 'i', false},
      {"dim_head", 'i', false},
      {"out", 'i', false},
      {"stride", 'i', false}}},
    {"halo_attention",
     1,
     1,
     nn_halo_attention,
     {{"heads", 'i', false},
      {"dim_head", 'i', false},
      {"out", 'i', false},
      {"stride", 'i', false},
      {"block", 'i', false},
      {"halo", 'i', false}}},
    {"fft2_real", 1, 1, nn_fft2_real, {{0}}},
    {"lstm",
     1,
     1,
     nn_lstm,
     {{"hidden", 'i', true},
      {"layers", 'i', false},
      {"bidirectional", 'b', false},
      {"batch_first", 'b', false}}},
    {"normalize", 1, 1, nn_normalize, {{0}}},
    {"roll", 1, 1, nn_roll, {{"shifts", 'l', true}, {"dims", 'l', true}}},
    {"window_position_bias",
     1,
     1,
     nn_window_position_bias,
     {{"window", 'l', true}, {"heads", 'i', true}, {"cls", 'b', false}}},
    {"window_attention",
     1,
     1,
     nn_window_attention,
     {{"heads", 'i', true},
      {"window", 'i', true},
      {"shift", 'i', false},
      {"qkv_bias", 'b', false}}},
    {"outlook_attention",
     1,
     1,
     nn_outlook_attention,
     {{"heads", 'i', true},
      {"kernel", 'i', false},
      {"padding", 'i', false},
      {"stride", 'i', false}}},
    {"xca_attention", 1, 1, nn_xca_attention, {{"heads", 'i', true}, {"qkv_bias", 'b', false}}},
    {"fourier_positions",
     1,
     1,
     nn_fourier_positions,
     {{"hidden", 'i', false}, {"grid", 'l', true}}},
    {"pad",
     1,
     1,
     nn_pad,
     {{"axis", 'i', false},
      {"before", 'i', false},
      {"after", 'i', false},
      {"value", 'f', false},
      {"pads", 'l', false},
      {"mode", 's', false}}},
    {"interpolate",
     1,
     1,
     nn_interpolate,
     {{"size", 'l', true}, {"mode", 's', false}, {"align_corners", 'b', false}}},
    {"grid_sample", 2, 2, nn_grid_sample, {{"padding", 's', false}, {"align_corners", 'b', false}}},
    {"flow_grid", 1, 1, nn_flow_grid, {{0}}},
    {"levit_attention_bias",
     1,
     1,
     nn_levit_attention_bias,
     {{"heads", 'i', true}, {"resolution", 'i', true}, {"stride", 'i', false}}},
    {"gpsa", 1, 1, nn_gpsa, {{"heads", 'i', true}}},
    {"embedding_bag",
     1,
     2,
     nn_embedding_bag,
     {{"num", 'i', true}, {"dim", 'i', true}, {"mode", 's', false}}},
    {"dot_interaction", 2, 2, nn_dot_interaction, {{"self", 'b', false}}},
};

static const nn_layer nn_losses[] = {
    {"cross_entropy",
     2,
     2,
     nn_cross_entropy,
     {{"ignore_index", 'i', false}, {"label_smoothing", 'f', false}}},
    {"mse", 2, 2, nn_mse, {{0}}},
    {"bce", 2, 2, nn_bce, {{0}}},
    {"bce_with_logits", 2, 2, nn_bce_with_logits, {{0}}},
    {"output_mean", 1, 1, nn_output_mean, {{0}}},
    {"ctc",
     3,
     3,
     nn_ctc,
     {{"blank", 'i', false}, {"zero_infinity", 'b', false}, {"logits", 'b', false}}},
};

#define COUNT(a) (int)(sizeof(a) / sizeof((a)[0]))

static const nn_layer *find(const nn_layer *t, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcmp(t[i].name, name) == 0)
            return &t[i];
    return NULL;
}

int nn_activation_attrs(const nn_ctx *x, double *fa, int cap) {
    const nn_layer *l = find(nn_layers, COUNT(nn_layers), x->c->type);
    int n = 0;
    for (int k = 0; l && k < NN_MAX_KEYS && l->keys[k].name && n < cap; k++, n++)
        if (l->keys[k].type == 'f' && nn_has(x, l->keys[k].name))
            fa[n] = nn_float(x, l->keys[k].name, fa[n]);
    return n;
}

bool nn_layer_known(const char *type) { return find(nn_layers, COUNT(nn_layers), type) != NULL; }

// The layers known of but not built yet, each with the reason a case that
// uses it ends model_fail_to_load (docs/yaml.md, "Layers not built yet").
static const struct {
    const char *name, *reason;
} nn_unbuilt[] = {
    {"lsh_attention", "Reformer's locality-sensitive hashing attention: keys hashed by random "
                      "rotations, sorted into buckets and attended in chunks"},
    {"block_sparse_attention", "BigBird's block-sparse attention: global, sliding-window and "
                               "random key blocks per query block"},
    {"isoneutral_mixing", "pyhpc's isoneutral mixing kernel: 23 float64 grids, vectors and masks "
                          "(a model takes at most 8 inputs, and f64 is no dtype here) through "
                          "some hundred slices, wheres, square roots and pointwise ops"},
};

const char *nn_layer_unbuilt(const char *type) {
    for (int i = 0; i < COUNT(nn_unbuilt); i++)
        if (!strcmp(nn_unbuilt[i].name, type))
            return nn_unbuilt[i].reason;
    return NULL;
}

const char *const *nn_unbuilt_names(void) {
    static const char *names[COUNT(nn_unbuilt) + 1];
    for (int i = 0; i < COUNT(nn_unbuilt); i++)
        names[i] = nn_unbuilt[i].name;
    return names;
}
bool nn_loss_known(const char *type) { return find(nn_losses, COUNT(nn_losses), type) != NULL; }

const char *const *nn_layer_names(void) {
    static const char *names[COUNT(nn_layers) + 1];
    for (int i = 0; i < COUNT(nn_layers); i++)
        names[i] = nn_layers[i].name;
    return names;
}

int nn_fail(nn_ctx *x, const char *key, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->r->err, sizeof x->r->err, fmt, ap);
    va_end(ap);
    x->r->bad_arg = key ? nn_arg_index(x, key) : -1;
    return -1;
}

int nn_check(nn_ctx *x, int id) {
    if (id >= 0)
        return id;
    if (!x->r->err[0]) {
        // graph messages start with their op's name; add the layer's when it differs
        const char *m = graph_error(x->g);
        size_t tl = strlen(x->c->type);
        if (strncmp(m, x->c->type, tl) == 0 && m[tl] == ':')
            snprintf(x->r->err, sizeof x->r->err, "%s", m);
        else
            snprintf(x->r->err, sizeof x->r->err, "%s: %s", x->c->type, m);
    }
    return -1;
}

int nn_arg_index(const nn_ctx *x, const char *key) {
    for (int i = 0; i < x->c->nargs; i++)
        if (strcmp(x->c->args[i].key, key) == 0)
            return i;
    return -1;
}

bool nn_has(const nn_ctx *x, const char *key) { return nn_arg_index(x, key) >= 0; }

static const nn_value *val(const nn_ctx *x, const char *key) {
    int i = nn_arg_index(x, key);
    return i < 0 ? NULL : &x->c->args[i].v;
}

int64_t nn_int(const nn_ctx *x, const char *key, int64_t dflt) {
    const nn_value *v = val(x, key);
    return v ? v->i : dflt;
}

double nn_float(const nn_ctx *x, const char *key, double dflt) {
    const nn_value *v = val(x, key);
    if (!v)
        return dflt;
    return v->type == NN_V_INT ? (double)v->i : v->f;
}

bool nn_bool(const nn_ctx *x, const char *key, bool dflt) {
    const nn_value *v = val(x, key);
    return v ? v->i != 0 : dflt;
}

const char *nn_str(const nn_ctx *x, const char *key, const char *dflt) {
    const nn_value *v = val(x, key);
    return v ? v->s : dflt;
}

int nn_ints(nn_ctx *x, const char *key, int n, int64_t *out, int64_t dflt) {
    const nn_value *v = val(x, key);
    for (int i = 0; i < n; i++)
        out[i] = dflt;
    if (!v)
        return 0;
    if (v->type == NN_V_INT) {
        for (int i = 0; i < n; i++)
            out[i] = v->i;
        return 0;
    }
    if (v->n != n)
        return nn_fail(x, key, "%s: '%s' needs one integer or a list of %d, got a list of %d",
                       x->c->type, key, n, v->n);
    for (int i = 0; i < n; i++)
        out[i] = v->items[i].i;
    return 0;
}

int nn_list(nn_ctx *x, const char *key, int max, int64_t *out) {
    const nn_value *v = val(x, key);
    if (!v)
        return -1;
    if (v->type == NN_V_INT) {
        out[0] = v->i;
        return 1;
    }
    if (v->n > max)
        return nn_fail(x, key, "%s: '%s' has %d entries, at most %d are allowed", x->c->type, key,
                       v->n, max);
    for (int i = 0; i < v->n; i++)
        out[i] = v->items[i].i;
    return v->n;
}

void nn_pname(const nn_ctx *x, const char *role, char *buf, size_t cap) {
    const char *p = x->c->prefix;
    if (p && *p)
        snprintf(buf, cap, "%s.%s", p, role);
    else
        snprintf(buf, cap, "%s", role);
}

int nn_param(nn_ctx *x, const char *role, int ndim, const int64_t *shape, enum init_kind init,
             double scale) {
    char name[256];
    // `share: NAME` (conv2d): the parameter is NAME.role wherever the layer
    // sits, made by the first layer that names it and used by the others,
    // as one module called from several blocks (CoaT's position encodings)
    bool share = nn_has(x, "share");
    if (share)
        snprintf(name, sizeof name, "%s.%s", nn_str(x, "share", ""), role);
    else
        nn_pname(x, role, name, sizeof name);
    for (int i = 0; (x->c->shared || share) && i < x->g->n; i++) {
        const graph_node *n = &x->g->nodes[i];
        if (n->op != OP_PARAM || !n->name || strcmp(n->name, name))
            continue;
        bool same = n->ndim == ndim;
        for (int k = 0; same && k < ndim; k++)
            same = n->shape[k] == shape[k];
        if (same)
            return i;
        char had[96], want[96];
        graph_shape_str(n->ndim, n->shape, had, sizeof had);
        graph_shape_str(ndim, shape, want, sizeof want);
        if (share)
            return nn_fail(x, "share", "%s: the shared '%s' is %s, and this layer needs %s",
                           x->c->type, name, had, want);
        return nn_fail(x, NULL,
                       "%s: a shared repeat uses one '%s' of shape %s in every repetition, and "
                       "this one needs %s; the body must give each repetition the input the "
                       "first had",
                       x->c->type, name, had, want);
    }
    return nn_check(x, graph_param(x->g, name, ndim, shape, init, scale));
}

int nn_shared_buffer(nn_ctx *x, const char *name, enum dtype t, int ndim, const int64_t *shape,
                     enum init_kind init, double arg) {
    for (int i = 0; i < x->g->n; i++) {
        const graph_node *n = &x->g->nodes[i];
        if (n->op == OP_BUFFER && n->name && strcmp(n->name, name) == 0)
            return i;
    }
    return nn_check(x, graph_buffer(x->g, name, t, ndim, shape, init, arg));
}

int nn_emit(nn_ctx *x, int id) {
    if (nn_check(x, id) < 0)
        return -1;
    x->r->out[0] = id;
    x->r->nout = 1;
    return 0;
}

int nn_in(const nn_ctx *x, int i) { return x->c->inputs[i]; }
const graph_node *nn_node(const nn_ctx *x, int id) { return &x->g->nodes[id]; }

static const char *type_words(char t) {
    switch (t) {
    case 'i': return "an integer";
    case 'f': return "a number";
    case 'b': return "true or false";
    case 's': return "a word";
    default: return "an integer or a list of integers";
    }
}

static bool type_ok(char t, const nn_value *v) {
    switch (t) {
    case 'i': return v->type == NN_V_INT;
    case 'f': return v->type == NN_V_INT || v->type == NN_V_FLOAT;
    case 'b': return v->type == NN_V_BOOL;
    case 's': return v->type == NN_V_STR;
    default:
        if (v->type == NN_V_INT)
            return true;
        if (v->type != NN_V_LIST)
            return false;
        for (int i = 0; i < v->n; i++)
            if (v->items[i].type != NN_V_INT)
                return false;
        return true;
    }
}

static int run(const nn_layer *L, graph *g, const nn_call *c, nn_result *r) {
    nn_ctx x = {g, c, r};
    for (int i = 0; i < c->nargs; i++) {
        const nn_keyspec *k = NULL;
        for (int j = 0; j < NN_MAX_KEYS && L->keys[j].name; j++)
            if (strcmp(L->keys[j].name, c->args[i].key) == 0)
                k = &L->keys[j];
        if (!k) {
            char known[256] = "";
            size_t o = 0;
            for (int j = 0; j < NN_MAX_KEYS && L->keys[j].name && o < sizeof known; j++)
                o += (size_t)snprintf(known + o, sizeof known - o, "%s%s", j ? ", " : "",
                                      L->keys[j].name);
            r->bad_arg = i;
            if (o)
                snprintf(r->err, sizeof r->err, "%s has no key '%s'; its keys are %s", L->name,
                         c->args[i].key, known);
            else
                snprintf(r->err, sizeof r->err, "%s takes no keys, got '%s'", L->name,
                         c->args[i].key);
            return -1;
        }
        if (!type_ok(k->type, &c->args[i].v)) {
            r->bad_arg = i;
            snprintf(r->err, sizeof r->err, "%s: '%s' must be %s", L->name, k->name,
                     type_words(k->type));
            return -1;
        }
        for (int j = 0; j < i; j++)
            if (strcmp(c->args[j].key, c->args[i].key) == 0) {
                r->bad_arg = i;
                snprintf(r->err, sizeof r->err, "%s: '%s' given twice", L->name, k->name);
                return -1;
            }
    }
    for (int j = 0; j < NN_MAX_KEYS && L->keys[j].name; j++)
        if (L->keys[j].required && !nn_has(&x, L->keys[j].name))
            return nn_fail(&x, NULL, "%s needs '%s' (%s)", L->name, L->keys[j].name,
                           type_words(L->keys[j].type));
    if (c->ninputs < L->min_in || c->ninputs > L->max_in) {
        if (L->min_in == L->max_in)
            return nn_fail(&x, NULL, "%s takes %d input%s, got %d", L->name, L->min_in,
                           L->min_in == 1 ? "" : "s", c->ninputs);
        return nn_fail(&x, NULL, "%s takes %d to %d inputs, got %d", L->name, L->min_in, L->max_in,
                       c->ninputs);
    }
    for (int i = 0; i < c->ninputs; i++)
        if (c->inputs[i] < 0 || c->inputs[i] >= g->n)
            return nn_fail(&x, NULL, "%s: input %d does not exist", L->name, i);
    if (L->build(&x) < 0) {
        if (!r->err[0])
            snprintf(r->err, sizeof r->err, "%s: %s", L->name, graph_error(g));
        return -1;
    }
    return 0;
}

int nn_build(graph *g, const nn_call *c, nn_result *r) {
    memset(r, 0, sizeof *r);
    r->bad_arg = -1;
    const nn_layer *L = find(nn_layers, COUNT(nn_layers), c->type);
    if (!L)
        L = find(nn_losses, COUNT(nn_losses), c->type);
    if (!L) {
        snprintf(r->err, sizeof r->err, "unknown layer '%s'", c->type);
        return -1;
    }
    return run(L, g, c, r);
}
