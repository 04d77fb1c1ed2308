// The quantized-linear pass: LINEAR(x, DEQUANT(q, s)) becomes QLINEAR(x, q,
// s), the dequantization fused into the GEMM (cpu_quant.h's kernel, or
// cuda_quant.cu's on the GPU), when the DEQUANT has no other reader. Under
// AMP the weight reaches the linear through autocast's cast,
// LINEAR(x, CAST(DEQUANT(q, s))), and the cast goes too: the fused kernel
// reads x in its own dtype. It runs on the decomposed graph (the linear's
// bias is an ADD of its own by then, fused into the next pointwise
// kernel), before simplify, which drops the unread DEQUANT. The rewrite is
// in place: the QLINEAR keeps the LINEAR's id, shape and dtype, and its new
// sources (q, s) come before it, so the order stays topological.
// TCBENCH_DISABLE_QLINEAR=1 leaves the graph alone (eager's form: the
// dequantized weight in a buffer, then the GEMM).
#include "compile_internal.h"

#include <stdlib.h>
#include <string.h>

// The DEQUANT the linear's weight w comes from, through at most one cast,
// each read once; -1 when it does not.
static int sole_dequant(const graph *g, const int *uses, int w) {
    if (g->nodes[w].op == OP_CAST && uses[w] == 1)
        w = g->nodes[w].src[0];
    return g->nodes[w].op == OP_DEQUANT && uses[w] == 1 ? w : -1;
}

int compile_quant(cprog *p) {
    graph *g = p->g;
    const char *off = getenv("TCBENCH_DISABLE_QLINEAR");
    if (off && *off && strcmp(off, "0") != 0)
        return 0;
    int *uses = calloc((size_t)(g->n > 0 ? g->n : 1), sizeof *uses);
    if (!uses)
        return compile_fail(p, "out of memory in the quantized-linear pass");
    for (int v = 0; v < g->n; v++)
        for (int s = 0; s < g->nodes[v].nsrc; s++)
            uses[g->nodes[v].src[s]]++;
    for (int i = 0; i < g->noutputs; i++)
        uses[g->outputs[i]]++;
    if (g->loss >= 0)
        uses[g->loss]++;
    for (int v = 0; v < g->n; v++) {
        graph_node *n = &g->nodes[v];
        int d = n->op == OP_LINEAR ? sole_dequant(g, uses, n->src[1]) : -1;
        if (d < 0)
            continue;
        const graph_node *dq = &g->nodes[d];
        n->op = OP_QLINEAR;
        if (n->nsrc > 2)
            n->src[3] = n->src[2];
        n->src[1] = dq->src[0];
        n->src[2] = dq->src[1];
        n->nsrc++;
        memcpy(n->ia, dq->ia, sizeof n->ia);
        if (p->log)
            fprintf(p->log, "quant: linear %%%d reads int%lld weights: one qlinear kernel\n", v,
                    (long long)dq->ia[0]);
    }
    free(uses);
    return 0;
}
