// Layout planning: convolution activations channels-last (compile_internal.h).
//
// oneDNN's fast convolutions (brgconv, the depthwise brdgmm) work on NHWC
// activations; on plain NCHW data a convolution either pays two reorders
// per call (eager's way, as a framework's) or falls back to im2col + GEMM.
// A compiler sees the whole graph, so it can keep the activations between
// convolutions in NHWC and never reorder them: what Inductor's layout
// optimization does for convolutional models. The logical shape stays
// (N, C, H, W); only the buffer's strides change, and every kernel that
// touches the buffer reads them: the generated loops index by strides (and
// iterate in the output's memory order), oneDNN's convolution and pooling
// take the layout as it is (cpu_channels_last).
//
// A 4-d f32 buffer goes channels-last when a convolution or pooling writes
// or reads it, or a loop writes it from a channels-last buffer (a copy of a
// view writes it so when a loop also reads it), and every kernel that
// touches it is one that honours strides: a convolution group (as its input
// x, a full-size post-op operand, or in its generated epilogue), a pooling,
// a pointwise or row group. Not: graph outputs (returned plain), buffers
// under views (their strides were fixed from the base's), GEMM operands,
// other library kernels. Inference graphs only: the convolution gradients
// (oneDNN) and batch norm's statistics and gradients take channels-last
// operands as well (cpu_dnnl_grad.c, cpu_grad.c), but on the smoke convnets
// a channels-last training step, with honours() taking those kernels too,
// measured no faster (resnet) or slower (mobilenet_v2: 0.90x to 0.93x of
// eager against 1.00x plain): narrow channel counts (4 to 24) make the
// per-channel loops short.
// TCBENCH_DISABLE_LAYOUTS=1 keeps every buffer plain (an ablation).
#include "compile_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool f32_conv2d(const cprog *p, int anchor) {
    const graph_node *a = &p->g->nodes[anchor];
    return a->op == OP_CONV2D && a->dtype == DT_F32 && p->g->nodes[a->src[0]].dtype == DT_F32;
}

bool compile_channels_last(const cprog *p, int v) {
    const cnode *c = &p->info[v];
    return c->store == CS_BUFFER && c->lay.ndim == 4 && c->lay.stride[1] == 1 &&
           p->g->nodes[v].shape[1] > 1;
}

// Kernel group gi reads or writes v in a way that follows v's strides;
// *conv set when that kernel is a convolution or pooling.
static bool honours(const cprog *p, int gi, int v, int reader, bool *conv) {
    if (gi < 0)
        return false;
    const kgroup *k = &p->groups[gi];
    switch (k->kind) {
    case KG_POINTWISE:
    case KG_ROWREDUCE:
        // a loop that writes v from a channels-last buffer: the layout
        // carries on through it (unfused chains, the captured ablation),
        // rather than a transposing loop into plain and back
        if (reader < 0)
            for (int m = 0; m < k->n && !*conv; m++) {
                const graph_node *n = &p->g->nodes[k->nodes[m]];
                for (int s = 0; s < n->nsrc; s++)
                    *conv |= compile_channels_last(p, n->src[s]);
            }
        return true;
    case KG_CONV:
        if (!f32_conv2d(p, k->anchor))
            return false;
        // the weight of a convolution is plain
        if (reader == k->anchor && p->g->nodes[k->anchor].src[1] == v)
            return false;
        *conv = true;
        return true;
    case KG_COPY:
        // a copy of a view (a slice made contiguous) writes its buffer by
        // the buffer's strides (lower_copy), a reshape's copy plain; as a
        // reader a copy is left plain
        return reader < 0 && p->g->nodes[k->anchor].op != OP_RESHAPE;
    case KG_EXTERN: {
        const graph_node *a = &p->g->nodes[k->anchor];
        if (a->dtype != DT_F32)
            return false;
        if ((a->op != OP_MAX_POOL2D && a->op != OP_AVG_POOL2D) ||
            (reader >= 0 && a->src[0] != v))
            return false;
        *conv = true; // a pooling reads x and writes its output
        return true;
    }
    default:
        return false;
    }
}

// Group gi reads v element by element (a pointwise or row group, or a
// convolution's epilogue, as a generated loop or a oneDNN post-op), not
// only as a library kernel's input.
static bool loop_reads(const cprog *p, int gi, int v) {
    if (gi < 0)
        return false;
    const kgroup *k = &p->groups[gi];
    if (k->kind == KG_POINTWISE || k->kind == KG_ROWREDUCE)
        return true;
    if (k->kind != KG_CONV)
        return false;
    for (int m = 0; m < k->n; m++) {
        if (k->nodes[m] == k->anchor)
            continue;
        const graph_node *n = &p->g->nodes[k->nodes[m]];
        for (int s = 0; s < n->nsrc; s++)
            if (n->src[s] == v)
                return true;
    }
    return false;
}

int compile_layouts(cprog *p) {
    graph *g = p->g;
    const char *off = getenv("TCBENCH_DISABLE_LAYOUTS");
    if (g->loss >= 0 || (off && *off && strcmp(off, "0") != 0))
        return 0;
    bool *out = calloc((size_t)g->n, sizeof *out), *viewed = calloc((size_t)g->n, sizeof *viewed);
    if (!out || !viewed) {
        free(out), free(viewed);
        return compile_fail(p, "out of memory in layout planning");
    }
    for (int i = 0; i < g->noutputs; i++)
        out[g->outputs[i]] = true;
    for (int v = 0; v < g->n; v++)
        if (p->info[v].store == CS_VIEW)
            viewed[p->info[v].base] = true;
    int n_cl = 0;
    for (int v = 0; v < g->n; v++) {
        const graph_node *n = &g->nodes[v];
        cnode *c = &p->info[v];
        if (c->store != CS_BUFFER || n->ndim != 4 || n->dtype != DT_F32 || out[v] || viewed[v] ||
            n->shape[1] == 1 || n->shape[2] * n->shape[3] == 1)
            continue;
        bool conv = false, ok = honours(p, c->group, v, -1, &conv);
        // a copy goes channels-last (transposing its plain source) only for
        // a loop that would otherwise read it across the grain: CSPNet's
        // residual in its convolution's epilogue (cspdarknet53's inference
        // 0.54x of eager before), not for convolutions alone (mixnet_l's
        // channel groups: 0.75x with every copy transposed, 1.05x plain)
        bool copy = c->group >= 0 && p->groups[c->group].kind == KG_COPY, looped = false;
        for (int u = 0; u < g->n && ok; u++) {
            const graph_node *un = &g->nodes[u];
            for (int s = 0; s < un->nsrc && ok; s++) {
                if (un->src[s] != v)
                    continue;
                ok = p->info[u].store != CS_VIEW && p->info[u].store != CS_RECOMPUTE &&
                     honours(p, p->info[u].group, v, u, &conv);
                looped |= copy && loop_reads(p, p->info[u].group, v);
            }
        }
        if (!ok || !conv || (copy && !looped))
            continue;
        int64_t C = n->shape[1], H = n->shape[2], W = n->shape[3];
        c->lay.stride[0] = H * W * C;
        c->lay.stride[1] = 1;
        c->lay.stride[2] = W * C;
        c->lay.stride[3] = C;
        n_cl++;
        if (p->log)
            fprintf(p->log, "layout: %s %%%d is channels-last\n", op_name(n->op), v);
    }
    if (p->log && n_cl)
        fprintf(p->log, "layout: %d buffers channels-last\n", n_cl);
    free(out);
    free(viewed);
    return 0;
}
