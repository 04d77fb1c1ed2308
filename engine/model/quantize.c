// Weight-only quantization of a model's linears (quantize.h): the graph is
// copied node by node with an id map, each quantized parameter replaced
// where it stood by its two buffers and a DEQUANT, so the order stays
// topological; the values move with their nodes.
#include "quantize.h"

#include "backend/cpu/cpu_quant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// v is a 2-D f32 parameter that only linears read as their weight, either
// directly or through a cast (autocast's, under AMP) that only they read.
static bool linear_weight(const graph *g, const int *readers, const int *start, int v) {
    const graph_node *n = &g->nodes[v];
    if (n->op != OP_PARAM || n->ndim != 2 || n->dtype != DT_F32 || start[v] == start[v + 1])
        return false;
    for (int i = 0; i < g->noutputs; i++)
        if (g->outputs[i] == v)
            return false;
    for (int r = start[v]; r < start[v + 1]; r++) {
        const graph_node *u = &g->nodes[readers[r]];
        if (u->op == OP_LINEAR && u->src[1] == v && u->src[0] != v)
            continue;
        if (u->op != OP_CAST)
            return false;
        int c = readers[r];
        for (int k = start[c]; k < start[c + 1]; k++) {
            const graph_node *w = &g->nodes[readers[k]];
            if (w->op != OP_LINEAR || w->src[1] != c || w->src[0] == c)
                return false;
        }
    }
    return true;
}

// Readers of every node, CSR-style: readers[start[v] .. start[v+1]).
static int reader_lists(const graph *g, int **readers, int **start) {
    *start = calloc((size_t)g->n + 2, sizeof **start);
    int total = 0;
    for (int v = 0; v < g->n; v++)
        total += g->nodes[v].nsrc;
    *readers = malloc((size_t)(total > 0 ? total : 1) * sizeof **readers);
    if (!*start || !*readers)
        return -1;
    for (int v = 0; v < g->n; v++)
        for (int s = 0; s < g->nodes[v].nsrc; s++)
            (*start)[g->nodes[v].src[s] + 2]++;
    for (int v = 0; v < g->n; v++)
        (*start)[v + 2] += (*start)[v + 1];
    for (int v = 0; v < g->n; v++)
        for (int s = 0; s < g->nodes[v].nsrc; s++) {
            int x = g->nodes[v].src[s];
            int slot = (*start)[x + 1]++;
            (*readers)[slot] = v;
        }
    return 0;
}

typedef struct qctx {
    int bits;
    int64_t group;
    enum dtype sdt;
    model_quant_stats st;
    double err2, ref2;
} qctx;

// Parameter w (N, K) as qweight and scales buffers of ng, their values in
// qv, qs, and the DEQUANT that reads them; -1 on a graph or memory error.
static int quantize_one(qctx *q, graph *ng, const graph_node *n, const tensor *w, tensor **qv,
                        tensor **qs) {
    int64_t N = n->shape[0], K = n->shape[1], G = cpu_quant_groups(K, q->group);
    int64_t qshape[2] = {N, cpu_quant_row_bytes(q->bits, K)}, sshape[2] = {N, G};
    char name[256];
    snprintf(name, sizeof name, "%s.qweight", n->name ? n->name : "linear");
    int qi = graph_buffer(ng, name, q->bits == 8 ? DT_I8 : DT_U8, 2, qshape, INIT_ZEROS, 0);
    snprintf(name, sizeof name, "%s.scales", n->name ? n->name : "linear");
    int si = qi < 0 ? -1 : graph_buffer(ng, name, q->sdt, 2, sshape, INIT_ZEROS, 0);
    int64_t ia[GRAPH_MAX_IA] = {q->bits, q->group, K};
    int d = si < 0 ? -1 : graph_op(ng, OP_DEQUANT, 2, (int[]){qi, si}, ia, NULL);
    if (d < 0 || !w) // no values: the graph alone (a memory plan)
        return d;
    *qv = tensor_new_empty(ng->nodes[qi].dtype, 2, qshape);
    *qs = tensor_new_empty(q->sdt, 2, sshape);
    float *dq = malloc((size_t)(N * K) * sizeof *dq);
    tensor *wc = tensor_is_contiguous(w) ? NULL : tensor_contiguous(w);
    if (!*qv || !*qs || !dq || (!tensor_is_contiguous(w) && !wc)) {
        free(dq);
        tensor_free(wc);
        return -1;
    }
    const float *pw = tensor_f32(wc ? wc : w);
    cpu_quant_quantize(q->bits, q->group, N, K, pw, tensor_data(*qv), q->sdt, tensor_data(*qs));
    cpu_quant_dequantize(q->bits, q->group, N, K, tensor_data(*qv), q->sdt, tensor_data(*qs), dq);
    for (int64_t i = 0; i < N * K; i++) {
        double e = (double)pw[i] - dq[i];
        q->err2 += e * e;
        q->ref2 += (double)pw[i] * pw[i];
    }
    free(dq);
    tensor_free(wc);
    q->st.weights++;
    q->st.params += N * K;
    q->st.bytes_before += (size_t)(N * K) * 4;
    q->st.bytes_after += tensor_numel(*qv) + (size_t)tensor_numel(*qs) * dtype_size(q->sdt);
    return d;
}

static int check_args(const model *m, int bits, int64_t group, enum dtype sdt, char *err,
                      size_t cap) {
    if (bits != 4 && bits != 8)
        return snprintf(err, cap, "weight quantization: %d bits: only 4 and 8", bits), -1;
    if (group < 1)
        return snprintf(err, cap, "weight quantization: group %lld must be positive",
                        (long long)group),
               -1;
    if (sdt != DT_F32 && sdt != DT_F16)
        return snprintf(err, cap, "weight quantization: scales must be f32 or f16, not %s",
                        dtype_name(sdt)),
               -1;
    const graph *g = m->g;
    bool train = g->loss >= 0;
    for (int i = 0; i < g->n && !train; i++)
        train = op_kind(g->nodes[i].op) == OPK_GRAD ||
                (op_kind(g->nodes[i].op) == OPK_UPDATE && !op_update_readable(&g->nodes[i]));
    if (train)
        return snprintf(err, cap,
                        "weight quantization is for inference: this graph trains (drop --weights "
                        "or run inference)"),
               -1;
    return 0;
}

int model_quantize_weights(model *m, int bits, int64_t group, enum dtype scale_dtype,
                           model_quant_stats *st, char *err, size_t cap) {
    if (check_args(m, bits, group, scale_dtype, err, cap) < 0)
        return -1;
    const graph *g = m->g;
    qctx q = {.bits = bits, .group = group, .sdt = scale_dtype};
    int *readers = NULL, *start = NULL;
    int *map = malloc((size_t)(g->n > 0 ? g->n : 1) * sizeof *map);
    graph *ng = graph_new();
    // values of ng: at most every old node plus two new buffers a weight
    tensor **nv = calloc((size_t)g->n * 3 + 1, sizeof *nv);
    bool *moved = calloc((size_t)g->n + 1, sizeof *moved);
    bool *fresh = calloc((size_t)g->n * 3 + 1, sizeof *fresh);
    int rc = -1;
    if (!map || !ng || !nv || !moved || !fresh || reader_lists(g, &readers, &start) < 0) {
        snprintf(err, cap, "weight quantization: out of memory");
        goto done;
    }
    for (int i = 0; i < g->n; i++) {
        const graph_node *n = &g->nodes[i];
        int s[GRAPH_MAX_SRCS];
        for (int k = 0; k < n->nsrc; k++)
            s[k] = map[n->src[k]];
        if (linear_weight(g, readers, start, i)) {
            tensor *qv = NULL, *qs = NULL;
            int base = ng->n;
            map[i] = quantize_one(&q, ng, n, m->values ? m->values[i] : NULL, &qv, &qs);
            if (map[i] >= 0) {
                nv[base] = qv;
                nv[base + 1] = qs;
                fresh[base] = fresh[base + 1] = true;
            } else {
                tensor_free(qv);
                tensor_free(qs);
            }
        } else if (op_kind(n->op) == OPK_SOURCE) {
            map[i] = graph_copy_source(ng, n);
            if (map[i] >= 0) {
                nv[map[i]] = m->values ? m->values[i] : NULL;
                moved[i] = true;
            }
        } else {
            map[i] = graph_op_shaped(ng, n->op, n->nsrc, s, n->ia, n->fa, n->ndim, n->shape);
            if (map[i] >= 0 && n->name)
                ng->nodes[map[i]].name = strdup(n->name);
        }
        if (map[i] < 0) {
            snprintf(err, cap, "weight quantization: %%%d %s: %s", i, op_name(n->op),
                     ng->err[0] ? graph_error(ng) : "out of memory");
            goto done;
        }
    }
    for (int i = 0; i < g->noutputs; i++)
        graph_output(ng, map[g->outputs[i]]);
    ng->loss = -1;
    // commit: the moved values change hands, the quantized weights' go
    for (int i = 0; i < g->n && m->values; i++)
        if (!moved[i])
            tensor_free(m->values[i]);
    if (m->values) {
        free(m->values);
        m->values = nv;
    } else {
        free(nv); // the graph alone: no values to move
    }
    nv = NULL;
    graph_free(m->g);
    m->g = ng;
    ng = NULL;
    q.st.rel_rms = q.ref2 > 0 ? sqrt(q.err2 / q.ref2) : 0;
    if (st)
        *st = q.st;
    rc = 0;
done:
    if (nv) // failed: only the new buffers' values are ours to free
        for (int i = 0; i < g->n * 3; i++)
            if (fresh[i])
                tensor_free(nv[i]);
    free(nv);
    graph_free(ng);
    free(map);
    free(moved);
    free(fresh);
    free(readers);
    free(start);
    return rc;
}
