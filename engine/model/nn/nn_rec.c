// The recommendation layers: nn.EmbeddingBag in sum mode (DLRM's sparse
// features) and DLRM's dot interaction.
#include "nn_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define X0 nn_in(x, 0)

// nn.EmbeddingBag(num, dim, mode="sum"): indices (N) with offsets (B) ->
// (B, dim), one kernel (op embedding_bag); or indices (B, L), bags of L,
// which PyTorch turns into the offsets 0, L, 2L, ... (here a shared buffer)
// and a flat view of the indices. The table is U(-sqrt(1/num), sqrt(1/num)),
// DLRM's.
int nn_embedding_bag(nn_ctx *x) {
    const char *mode = nn_str(x, "mode", "sum");
    if (strcmp(mode, "sum") != 0)
        return nn_fail(x, "mode", "embedding_bag: mode '%s' is not built; only sum", mode);
    const graph_node *idx = nn_node(x, X0);
    bool flat = x->c->ninputs == 2;
    if (idx->dtype != DT_I32 && idx->dtype != DT_I64)
        return nn_fail(x, NULL, "embedding_bag: indices must be i32 or i64, got %s",
                       dtype_name(idx->dtype));
    if (idx->ndim != (flat ? 1 : 2))
        return nn_fail(x, NULL,
                       flat ? "embedding_bag: with offsets the indices are 1-d (N), got %d dims"
                            : "embedding_bag: without offsets the indices are 2-d (B, L), got %d "
                              "dims",
                       idx->ndim);
    int64_t num = nn_int(x, "num", 0), dim = nn_int(x, "dim", 0);
    int w = nn_param(x, "weight", 2, (int64_t[]){num, dim}, INIT_UNIFORM, sqrt(1.0 / (double)num));
    if (w < 0)
        return -1;
    int ids = X0, off;
    if (flat) {
        off = nn_in(x, 1);
        const graph_node *o = nn_node(x, off);
        if (o->ndim != 1 || o->dtype != idx->dtype)
            return nn_fail(x, NULL, "embedding_bag: offsets must be 1-d (B) of the indices' %s",
                           dtype_name(idx->dtype));
    } else {
        int64_t B = idx->shape[0], L = idx->shape[1];
        char name[64];
        snprintf(name, sizeof name, "embedding_bag.offsets_%lld_%lld", (long long)B, (long long)L);
        off = nn_shared_buffer(x, name, idx->dtype, 1, &B, INIT_ARANGE, (double)L);
        ids = off < 0 ? -1 : nn_check(x, graph_reshape(x->g, X0, 1, (int64_t[]){B * L}));
        if (ids < 0)
            return -1;
    }
    int64_t ia[GRAPH_MAX_IA] = {EMBEDDING_BAG_SUM};
    return nn_emit(x, graph_op(x->g, OP_EMBEDDING_BAG, 3, (int[]){w, ids, off}, ia, NULL));
}

// DLRM's "dot" interaction (interact_features): T = the concatenated
// features (B, F D) seen as (B, F, D), Z = T T^T (one batched GEMM), Z's
// pairs below the diagonal gathered (on it too with `self`), then concatenated
// after the dense features (B, D): (B, D + F (F - 1) / 2).
int nn_dot_interaction(nn_ctx *x) {
    const graph_node *t = nn_node(x, X0), *dense = nn_node(x, nn_in(x, 1));
    if (t->ndim != 2 || dense->ndim != 2 || dense->shape[0] != t->shape[0] ||
        t->shape[1] % dense->shape[1])
        return nn_fail(x, NULL,
                       "dot_interaction: needs the features (B, F D) and the dense ones (B, D)");
    int64_t B = t->shape[0], D = dense->shape[1], F = t->shape[1] / D;
    graph *g = x->g;
    int v = nn_check(x, graph_reshape(g, X0, 3, (int64_t[]){B, F, D}));
    int vt = v < 0 ? -1 : nn_check(x, graph_permute(g, v, (int[]){0, 2, 1}));
    int z = vt < 0 ? -1 : graph_binary(g, OP_MATMUL, v, vt);
    int64_t ia[GRAPH_MAX_IA] = {nn_bool(x, "self", false)};
    int p = z < 0 ? -1 : graph_op(g, OP_TRIL_GATHER, 1, &z, ia, NULL);
    if (nn_check(x, p) < 0)
        return -1;
    int64_t cat[GRAPH_MAX_IA] = {1};
    return nn_emit(x, graph_op(g, OP_CONCAT, 2, (int[]){nn_in(x, 1), p}, cat, NULL));
}
