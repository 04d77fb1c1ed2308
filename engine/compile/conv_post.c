// Convolution epilogues as oneDNN post-ops (compile_internal.h).
#include "compile_internal.h"

static bool eltwise_op(enum op op) {
    switch (op) {
    case OP_RELU: case OP_RELU6: case OP_SIGMOID: case OP_TANH: case OP_GELU:
    case OP_GELU_TANH: case OP_SILU: case OP_HARDSWISH: case OP_EXP: case OP_SCALE:
        return true;
    default:
        return false;
    }
}

// Operand shapes a binary post-op takes: (C, 1, 1) per channel (any rank
// that right-aligns so), or the output's full shape, contiguous.
static int operand_kind(const cprog *p, int v, const graph_node *out) {
    const graph_node *n = &p->g->nodes[v];
    const cnode *c = &p->info[v];
    if (n->dtype != DT_F32)
        return -1;
    int64_t C = out->shape[1];
    bool per_channel = graph_node_numel(n) == C && n->ndim >= 3 &&
                       n->shape[n->ndim - 3] == C && n->shape[n->ndim - 1] == 1 &&
                       n->shape[n->ndim - 2] == 1;
    if (per_channel) {
        if (c->store == CS_RECOMPUTE || c->store == CS_SOURCE || c->store == CS_BUFFER)
            return 1;
        // a view of C contiguous floats
        return c->store == CS_VIEW && c->lay.stride[c->lay.ndim - 3] == 1 ? 1 : -1;
    }
    if (n->ndim != out->ndim)
        return -1;
    for (int i = 0; i < n->ndim; i++)
        if (n->shape[i] != out->shape[i])
            return -1;
    if (c->store == CS_SOURCE || c->store == CS_BUFFER)
        return 2;
    if (c->store != CS_VIEW)
        return -1;
    int64_t s = 1; // a contiguous view
    for (int i = c->lay.ndim - 1; i >= 0; i--) {
        if (c->lay.shape[i] != 1 && c->lay.stride[i] != s)
            return -1;
        s *= c->lay.shape[i];
    }
    return 2;
}

// A convolution (not transposed) of a 1x1 kernel in one group whose input
// is plain NCHW: oneDNN 2.6 runs it as a GEMM (x64:gemm:jit); on a
// channels-last input (layout.c, inference) it is brgconv_1x1.
static bool gemm_1x1(const cprog *p, const graph_node *an) {
    const graph_node *w = &p->g->nodes[an->src[1]], *x = &p->g->nodes[an->src[0]];
    return an->op == OP_CONV2D && w->ndim == 4 && w->shape[2] == 1 && w->shape[3] == 1 &&
           w->shape[1] == x->shape[1] && !compile_channels_last(p, an->src[0]);
}

int compile_conv_posts(const cprog *p, const kgroup *k, conv_post *out) {
    if (k->kind != KG_CONV || k->n - 1 > CONV_POST_MAX)
        return -1;
    const graph_node *an = &p->g->nodes[k->anchor];
    if (an->dtype != DT_F32 || k->nodes[0] != k->anchor)
        return -1;
    int np = 0, cur = k->anchor;
    for (int m = 1; m < k->n; m++) {
        int v = k->nodes[m];
        const graph_node *n = &p->g->nodes[v];
        // every value but the last lives only inside the convolution
        if (p->info[cur].store == CS_BUFFER)
            return -1;
        conv_post *po = &out[np++];
        po->op = n->op;
        po->member = v;
        po->operand = -1;
        po->per_channel = false;
        if (eltwise_op(n->op)) {
            if (n->src[0] != cur)
                return -1;
        } else if (n->op == OP_ADD || n->op == OP_MUL || n->op == OP_MAXIMUM || n->op == OP_SUB ||
                   n->op == OP_DIV) {
            int other;
            if (n->src[0] == cur)
                other = n->src[1];
            else if (n->src[1] == cur && n->op != OP_SUB && n->op != OP_DIV)
                other = n->src[0];
            else
                return -1;
            if (other == cur)
                return -1;
            int kind = operand_kind(p, other, an);
            if (kind < 0)
                return -1;
            // per-channel operands other than a bias straight after the
            // convolution (its own bias argument) make oneDNN 2.6's gemm
            // convolution apply post-ops element by element, far slower
            // than the generated loop: those epilogues keep the loop
            if (kind == 1 && !(m == 1 && n->op == OP_ADD && p->info[other].store != CS_RECOMPUTE))
                return -1;
            // so does a tensor operand (a residual add) of a GEMM 1x1
            // convolution: phlippe_resnet's strided 1x1 shortcut with its add
            // as a post-op made the compiled training step 0.81x of eager,
            // 1.09x as the loop (brgconv_1x1's post-ops are fast: resnet50's
            // inference keeps them)
            if (kind == 2 && gemm_1x1(p, an))
                return -1;
            po->operand = other;
            po->per_channel = kind == 1;
        } else {
            return -1;
        }
        cur = v;
    }
    return np;
}
