// Recurrent layers: nn.LSTM as PyTorch runs it, one LSTM op (ops.def) per
// layer and direction, a bidirectional layer's two directions joined by one
// concat, as the CPU's native LSTM and cuDNN's per-layer outputs.
#include "nn_internal.h"

#include <math.h>
#include <stdio.h>

#define X0 nn_in(x, 0)

// One direction of layer l over x (B, T, I) -> (B, T, H); PyTorch's names
// weight_ih_l{l}[_reverse] and its init U(-1/sqrt(H), 1/sqrt(H))
static int lstm_direction(nn_ctx *x, int in, int64_t H, int l, bool rev) {
    int64_t I = nn_node(x, in)->shape[2], G = 4 * H;
    double bound = 1.0 / sqrt((double)H);
    const char *roles[4] = {"weight_ih", "weight_hh", "bias_ih", "bias_hh"};
    int64_t shapes[4][2] = {{G, I}, {G, H}, {G}, {G}};
    int src[5] = {in};
    for (int k = 0; k < 4; k++) {
        char r[48];
        snprintf(r, sizeof r, "%s_l%d%s", roles[k], l, rev ? "_reverse" : "");
        if ((src[1 + k] = nn_param(x, r, k < 2 ? 2 : 1, shapes[k], INIT_UNIFORM, bound)) < 0)
            return -1;
    }
    int64_t ia[GRAPH_MAX_IA] = {rev, x->c->training};
    int y = nn_check(x, graph_op(x->g, OP_LSTM, 5, src, ia, NULL));
    if (y < 0)
        return -1;
    int64_t B = nn_node(x, in)->shape[0], T = nn_node(x, in)->shape[1];
    y = graph_slice(x->g, y, 0, 0, 1);
    return nn_check(x, y < 0 ? -1 : graph_reshape(x->g, y, 3, (int64_t[]){B, T, H}));
}

// nn.LSTM(input, hidden, num_layers, bidirectional, batch_first): its output
// sequence (the h of every step, both directions side by side); zero initial
// state, as a forward without (h0, c0)
int nn_lstm(nn_ctx *x) {
    int64_t H = nn_int(x, "hidden", 0), layers = nn_int(x, "layers", 1);
    bool bi = nn_bool(x, "bidirectional", false), bf = nn_bool(x, "batch_first", true);
    if (H <= 0)
        return nn_fail(x, "hidden", "lstm: hidden must be positive, got %lld", (long long)H);
    if (layers < 1 || layers > 64)
        return nn_fail(x, "layers", "lstm: layers must be 1 to 64, got %lld", (long long)layers);
    if (nn_node(x, X0)->ndim != 3)
        return nn_fail(x, NULL, "lstm needs (B, T, I) input (batch_first), or (T, B, I)");
    int h = bf ? X0 : nn_check(x, graph_permute(x->g, X0, (int[]){1, 0, 2}));
    for (int l = 0; h >= 0 && l < layers; l++) {
        int fw = lstm_direction(x, h, H, l, false);
        if (!bi || fw < 0) {
            h = fw;
            continue;
        }
        int bw = lstm_direction(x, h, H, l, true);
        h = bw < 0 ? -1
                   : nn_check(x, graph_op(x->g, OP_CONCAT, 2, (int[]){fw, bw},
                                          (int64_t[GRAPH_MAX_IA]){2}, NULL));
    }
    if (h >= 0 && !bf)
        h = nn_check(x, graph_permute(x->g, h, (int[]){1, 0, 2}));
    return h < 0 ? -1 : nn_emit(x, h);
}

// F.normalize(x, p=2, dim=-1), as a speaker encoder's embedding: the
// primitive ops torch runs (a norm, a clamp, a division)
int nn_normalize(nn_ctx *x) {
    int y = nn_l2_normalize(x, X0);
    return y < 0 ? -1 : nn_emit(x, y);
}

// F.ctc_loss(log_probs (T, B, C), targets (B, S), input lengths all T,
// target lengths (B), blank, reduction='mean', zero_infinity): one op, as
// PyTorch's one kernel (and one for its backward). `logits: true` takes
// (B, T, C) scores as doctr's compute_loss does: permuted to (T, B, C) (a
// view) and log_softmax'd (one kernel) first
int nn_ctc(nn_ctx *x) {
    int lp = X0;
    if (nn_bool(x, "logits", false)) {
        if (nn_node(x, lp)->ndim != 3)
            return nn_fail(x, "logits", "ctc: logits must be (B, T, C)");
        int p = graph_permute(x->g, lp, (int[]){1, 0, 2});
        lp = nn_check(x, p < 0 ? -1 : graph_unary(x->g, OP_LOG_SOFTMAX, p));
        if (lp < 0)
            return -1;
    }
    const graph_node *n = nn_node(x, lp);
    int64_t blank = nn_int(x, "blank", 0);
    if (n->ndim == 3 && (blank < 0 || blank >= n->shape[2]))
        return nn_fail(x, "blank", "ctc: blank %lld is not one of the %lld classes",
                       (long long)blank, (long long)n->shape[2]);
    int64_t ia[GRAPH_MAX_IA] = {blank, nn_bool(x, "zero_infinity", false)};
    return nn_emit(x,
                   graph_op(x->g, OP_CTC_LOSS, 3, (int[]){lp, nn_in(x, 1), nn_in(x, 2)}, ia, NULL));
}
