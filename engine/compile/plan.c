// Scheduling and memory planning: groups in a topological order, the live
// range of every stored tensor over that order, in-place reuse where a
// kernel reads each element of a dying input only where it writes the same
// element of its output, then best-fit offsets in one arena (greedy by
// size: the largest tensors placed first, each at the lowest offset free for
// its whole live range). A group that writes a source in place (an update)
// runs after every other group that reads that source, directly, through a
// view, or through a value recomputed from it (CS_RECOMPUTE), so forward and
// backward both read a parameter's old value.
#include "compile_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ALIGN 64

static int storage_of(const cprog *p, int v) {
    return p->info[v].store == CS_VIEW ? p->info[v].base : v;
}

// v covers its whole storage in row-major order (the storage itself, or a
// contiguous view of all of it)
static bool full_view(const cprog *p, int v) {
    const cnode *c = &p->info[v];
    if (c->store == CS_BUFFER)
        return true;
    if (c->store != CS_VIEW || c->lay.offset != 0)
        return false;
    int64_t expect = 1;
    for (int d = c->lay.ndim - 1; d >= 0; d--) {
        if (c->lay.shape[d] != 1 && c->lay.stride[d] != expect)
            return false;
        expect *= c->lay.shape[d];
    }
    return expect == graph_node_numel(&p->g->nodes[c->base]);
}

static int producer_group(const cprog *p, int v) {
    int b = storage_of(p, v);
    return p->info[b].group;
}

static void add_edge(char *edge, int *indeg, int ng, int from, int to) {
    if (from >= 0 && to >= 0 && from != to && !edge[(size_t)from * ng + to]) {
        edge[(size_t)from * ng + to] = 1;
        indeg[to]++;
    }
}

// Group gi reads node v: it must run before whatever writes v's storage.
static void read_edges(const cprog *p, int v, int gi, const int *writer, char *edge, int *indeg) {
    if (p->info[v].store == CS_RECOMPUTE) { // recomputed inside gi from its sources
        const graph_node *n = &p->g->nodes[v];
        for (int s = 0; s < n->nsrc; s++)
            read_edges(p, n->src[s], gi, writer, edge, indeg);
        return;
    }
    // a readable update's value is its source after the write: the
    // producer's edge orders the reader after it, not before
    if (op_update_readable(&p->g->nodes[v]))
        return;
    add_edge(edge, indeg, p->ngroups, gi, writer[storage_of(p, v)]);
}

// An update of a training step (the optimizer's, a running statistic's),
// which the schedule runs as soon as it is ready so that the gradient it
// reads dies at once. An inference graph's only updates are kv_writes,
// which free nothing by going first (between a decode step's k and v
// projections one split their run of matrix-vector GEMMs, codegen_c.c).
static bool is_update(const cprog *p, int gi) {
    const kgroup *k = &p->groups[gi];
    return p->g->loss >= 0 &&
           (k->kind == KG_UPDATE ||
            (k->kind == KG_EXTERN && op_kind(p->g->nodes[k->anchor].op) == OPK_UPDATE));
}

// Reorder p->groups topologically (Kahn's algorithm, earliest member first).
static int schedule(cprog *p) {
    int ng = p->ngroups;
    int *indeg = calloc((size_t)ng, sizeof *indeg);
    int *order = malloc((size_t)ng * sizeof *order);
    char *edge = calloc((size_t)ng * (size_t)ng, 1);
    bool *done = calloc((size_t)ng, sizeof *done);
    int *writer = malloc((size_t)p->g->n * sizeof *writer); // group writing a source, or -1
    if (!indeg || !order || !edge || !done || !writer) {
        free(indeg), free(order), free(edge), free(done), free(writer);
        return compile_fail(p, "out of memory in schedule");
    }
    for (int v = 0; v < p->g->n; v++)
        writer[v] = -1;
    for (int gi = 0; gi < ng; gi++)
        for (int m = 0; m < p->groups[gi].n; m++) {
            const graph_node *n = &p->g->nodes[p->groups[gi].nodes[m]];
            for (int s = 0; s < n->nsrc; s++)
                if (compile_writes(n, s))
                    writer[n->src[s]] = gi;
        }
    for (int gi = 0; gi < ng; gi++) {
        kgroup *k = &p->groups[gi];
        for (int m = 0; m < k->n; m++) {
            const graph_node *n = &p->g->nodes[k->nodes[m]];
            for (int s = 0; s < n->nsrc; s++) {
                add_edge(edge, indeg, ng, producer_group(p, n->src[s]), gi);
                read_edges(p, n->src[s], gi, writer, edge, indeg);
            }
        }
    }
    free(writer);
    // earliest member first, but an update as soon as it is ready: its
    // gradient (and the update's reads) can die at once
    for (int pos = 0; pos < ng; pos++) {
        int best = -1;
        for (int gi = 0; gi < ng; gi++) {
            if (done[gi] || indeg[gi] != 0)
                continue;
            bool up = is_update(p, gi), bup = best >= 0 && is_update(p, best);
            if (best < 0 || (up && !bup) ||
                (up == bup && p->groups[gi].nodes[0] < p->groups[best].nodes[0]))
                best = gi;
        }
        if (best < 0) {
            free(indeg), free(order), free(edge), free(done);
            return compile_fail(p, "internal error: the kernel groups form a cycle");
        }
        done[best] = true;
        order[pos] = best;
        for (int gi = 0; gi < ng; gi++)
            if (edge[(size_t)best * ng + gi])
                indeg[gi]--;
    }
    kgroup *sorted = malloc((size_t)ng * sizeof *sorted);
    if (!sorted) {
        free(indeg), free(order), free(edge), free(done);
        return compile_fail(p, "out of memory in schedule");
    }
    for (int pos = 0; pos < ng; pos++)
        sorted[pos] = p->groups[order[pos]];
    free(p->groups);
    p->groups = sorted;
    for (int pos = 0; pos < ng; pos++)
        for (int m = 0; m < sorted[pos].n; m++)
            p->info[sorted[pos].nodes[m]].group = pos;
    free(indeg), free(order), free(edge), free(done);
    return 0;
}

// Does group gi touch input buffer b only elementwise, at the index where it
// writes output o? Then o may take b's memory when b dies in gi.
static bool elementwise_reader(const cprog *p, int gi, int b, int o) {
    const kgroup *k = &p->groups[gi];
    if (k->kind != KG_POINTWISE && k->kind != KG_ROWREDUCE)
        return false;
    const graph_node *bn = &p->g->nodes[b], *on = &p->g->nodes[o];
    if (graph_node_bytes(bn) != graph_node_bytes(on) || bn->ndim != on->ndim)
        return false;
    for (int i = 0; i < bn->ndim; i++) // same shape, same layout (layout.c)
        if (bn->shape[i] != on->shape[i] || p->info[b].lay.stride[i] != p->info[o].lay.stride[i])
            return false;
    if (k->kind == KG_ROWREDUCE) {
        // a row kernel stores a value of one per row as soon as it has it,
        // before later members of the row read their inputs; only a
        // full-row member, written by the last loop, may write over one
        const graph_node *full = NULL;
        for (int m = 0; m < k->n && !full; m++)
            if (op_kind(p->g->nodes[k->nodes[m]].op) == OPK_REDUCE)
                full = &p->g->nodes[p->g->nodes[k->nodes[m]].src[0]];
        int L = full->ndim - 1;
        if (op_kind(on->op) == OPK_REDUCE || on->ndim != full->ndim || full->shape[L] == 1 ||
            on->shape[L] != full->shape[L])
            return false;
    }
    for (int m = 0; m < k->n; m++) {
        const graph_node *n = &p->g->nodes[k->nodes[m]];
        for (int s = 0; s < n->nsrc; s++) {
            int src = n->src[s];
            if (storage_of(p, src) != b)
                continue;
            if (src != b) // read through a view: indices differ
                return false;
            const graph_node *c = n;
            if (c->ndim != on->ndim) // broadcast into a larger node
                return false;
            for (int i = 0; i < c->ndim; i++)
                if (c->shape[i] != on->shape[i])
                    return false;
        }
    }
    return true;
}

static size_t aligned_bytes(const graph *g, int v) {
    return (graph_node_bytes(&g->nodes[v]) + ALIGN - 1) / ALIGN * ALIGN;
}

// Contiguous from the start of its storage.
static bool contiguous(const clayout *l) { return l->offset == 0 && clayout_is_contiguous(l); }

// Rows in place: a GEMM out(M, N) = a(M, K) @ w whose output rows are at
// least twice as long as its input rows (N >= 2K: a language model's head,
// d_model in, the vocabulary out) may keep its dying input in the first
// bytes of its output. The kernel (codegen_c.c, emit_gemm) then computes
// output rows [r0, r1) with r0 = ceil(r1 K / N), from r1 = M down: those
// rows lie past every input row [0, r1) it has yet to read, and row 0 goes
// through a copy of its input row. The input's memory is then no longer
// live beside the output's: the peak of such a step drops by the input's
// size. Applies when the input is contiguous f32, read by nothing else in
// the group and by nothing after it, and the output is a contiguous f32
// buffer of its own. The input keeps its own live range: only its bytes
// are taken before the GEMM, and the rest of the output's place is free for
// other tensors until then. The two are tied (tie[]): placed together, the
// input's storage at the output's offset.
#define ROWS_IN_PLACE_MAX_K 4096 // row 0's copy lives on the stack

static void gemm_rows_in_place(cprog *p, int gi, const int *alias, int *tie) {
    graph *g = p->g;
    kgroup *k = &p->groups[gi];
    if (k->kind != KG_GEMM)
        return;
    const graph_node *an = &g->nodes[k->anchor];
    if ((an->op != OP_LINEAR && an->op != OP_MATMUL) || an->dtype != DT_F32 || an->ndim < 1)
        return;
    int a = an->src[0], w = an->src[1];
    const graph_node *wn = &g->nodes[w], *anode = &g->nodes[a];
    int b = storage_of(p, a);
    int t = p->info[k->anchor].store == CS_BUFFER ? k->anchor : k->nodes[k->n - 1];
    const cnode *cb = &p->info[b], *ct = &p->info[t];
    if (wn->ndim != 2 || anode->dtype != DT_F32 || anode->ndim < 1 || g->nodes[t].dtype != DT_F32)
        return;
    if (cb->store != CS_BUFFER || ct->store != CS_BUFFER || ct->first != gi ||
        (alias[t] >= 0 && alias[t] != t) ||
        !full_view(p, a) || !contiguous(&p->info[a].lay) || !contiguous(&ct->lay) || b == t ||
        storage_of(p, w) == b)
        return;
    const graph_node *tn = &g->nodes[t];
    if (tn->ndim != an->ndim)
        return;
    for (int d = 0; d < an->ndim; d++)
        if (tn->shape[d] != an->shape[d])
            return;
    int64_t K = anode->shape[anode->ndim - 1], N = an->shape[an->ndim - 1];
    if (K < 1 || K > ROWS_IN_PLACE_MAX_K || N < 2 * K ||
        graph_node_numel(anode) / K != graph_node_numel(an) / N)
        return;
    // the input's memory (b's, or the owner b took in place) dies here, and
    // only the GEMM's left operand reads it in this group
    int r = alias[b] >= 0 ? alias[b] : b;
    if (p->info[r].last != gi)
        return;
    for (int m = 0; m < k->n; m++) {
        const graph_node *n = &g->nodes[k->nodes[m]];
        for (int s = 0; s < n->nsrc; s++) {
            int x = storage_of(p, n->src[s]), own = alias[x] >= 0 ? alias[x] : x;
            if (own == r && !(k->nodes[m] == k->anchor && s == 0))
                return;
        }
    }
    if (tie[r] >= 0 || tie[t] >= 0) // one tie per storage
        return;
    tie[t] = r;
    tie[r] = t;
    k->rows_in_place = true; // a candidate: compile_plan keeps it where it lowers the arena
}

// Offsets for the items (largest first), each at the lowest offset clear of
// every placed tensor that is live at the same time; a tied pair (tie[])
// takes one offset. Returns the arena's size.
static size_t place(cprog *p, const int *items, int nitems, const int *tie, bool *placed) {
    const graph *g = p->g;
    for (int i = 0; i < nitems; i++)
        placed[items[i]] = false;
    size_t arena = 0;
    for (int i = 0; i < nitems; i++) {
        int v = items[i], u = tie[v]; // u: placed with v at v's offset
        if (placed[v])
            continue;
        cnode *c = &p->info[v];
        size_t sz = aligned_bytes(g, v), off = 0;
        bool moved = true;
        while (moved) { // lowest offset clear of every placed, overlapping tensor
            moved = false;
            for (int j = 0; j < nitems; j++) {
                int x = items[j];
                if (!placed[x])
                    continue;
                const cnode *d = &p->info[x];
                size_t dsz = aligned_bytes(g, x);
                for (int side = 0; side < 2; side++) { // v, then its tied storage
                    const cnode *e = side ? (u >= 0 ? &p->info[u] : NULL) : c;
                    size_t esz = side ? (u >= 0 ? aligned_bytes(g, u) : 0) : sz;
                    if (!e)
                        continue;
                    bool overlap_time = !(d->last < e->first || e->last < d->first);
                    bool overlap_mem = off < (size_t)d->offset + dsz && (size_t)d->offset < off + esz;
                    if (overlap_time && overlap_mem) {
                        off = (size_t)d->offset + dsz;
                        moved = true;
                    }
                }
            }
        }
        c->offset = (int64_t)off;
        placed[v] = true;
        if (u >= 0) {
            p->info[u].offset = (int64_t)off;
            placed[u] = true;
            if (off + aligned_bytes(g, u) > arena)
                arena = off + aligned_bytes(g, u);
        }
        if (off + sz > arena)
            arena = off + sz;
    }
    return arena;
}

int compile_plan(cprog *p) {
    if (schedule(p) < 0)
        return -1;
    graph *g = p->g;
    int end = p->ngroups;
    int *alias = malloc((size_t)g->n * sizeof *alias);
    int *items = malloc((size_t)g->n * sizeof *items);
    int *tie = malloc((size_t)g->n * sizeof *tie); // rows in place: input <-> output storage
    bool *placed = calloc((size_t)g->n, sizeof *placed);
    if (!alias || !items || !tie || !placed) {
        free(alias), free(items), free(tie), free(placed);
        return compile_fail(p, "out of memory in plan");
    }
    for (int v = 0; v < g->n; v++) {
        cnode *c = &p->info[v];
        alias[v] = -1;
        c->first = c->group;
        c->last = c->group;
    }
    // live ranges: last reader of each storage (views read their base)
    for (int gi = 0; gi < p->ngroups; gi++) {
        kgroup *k = &p->groups[gi];
        for (int m = 0; m < k->n; m++) {
            const graph_node *n = &g->nodes[k->nodes[m]];
            for (int s = 0; s < n->nsrc; s++) {
                int b = storage_of(p, n->src[s]);
                if (p->info[b].store == CS_BUFFER && p->info[b].last < gi)
                    p->info[b].last = gi;
            }
        }
    }
    for (int i = 0; i < g->noutputs; i++)
        p->info[storage_of(p, g->outputs[i])].last = end;
    if (g->loss >= 0)
        p->info[storage_of(p, g->loss)].last = end;

    // in place: an output takes the memory of an input that dies here
    for (int gi = 0; gi < p->ngroups; gi++) {
        kgroup *k = &p->groups[gi];
        for (int m = 0; m < k->n; m++) {
            int o = k->nodes[m];
            if (p->info[o].store != CS_BUFFER)
                continue;
            for (int mm = 0; mm < k->n && alias[o] < 0; mm++) {
                const graph_node *n = &g->nodes[k->nodes[mm]];
                for (int s = 0; s < n->nsrc; s++) {
                    int b = n->src[s];
                    if (p->info[b].store != CS_BUFFER || p->info[b].group == gi ||
                        p->info[b].last != gi || alias[b] != -1 ||
                        !elementwise_reader(p, gi, b, o))
                        continue;
                    // the storage is b's; its life now runs to o's end
                    alias[o] = b;
                    alias[b] = b; // taken: no second output may claim it
                    p->info[b].last = p->info[o].last;
                    if (p->log)
                        fprintf(p->log, "plan: %s %%%d reuses the memory of %%%d in place\n",
                                op_name(g->nodes[o].op), o, b);
                    break;
                }
            }
        }
    }

    // in place, library kernels that allow it: cross_entropy_grad reads each
    // row of the logits before it writes the same row (max, then exp, then the
    // gradient over its own exp), so its output may take the logits' memory
    // when they die there (the largest tensor of a language model's step)
    for (int gi = 0; gi < p->ngroups; gi++) {
        kgroup *k = &p->groups[gi];
        if (k->kind != KG_EXTERN || g->nodes[k->anchor].op != OP_CROSS_ENTROPY_GRAD)
            continue;
        int o = k->anchor, v = g->nodes[o].src[1], b = storage_of(p, v);
        if (p->info[o].store != CS_BUFFER || alias[o] >= 0 || p->info[b].store != CS_BUFFER ||
            p->info[b].group == gi || p->info[b].last != gi || alias[b] != -1 ||
            graph_node_bytes(&g->nodes[b]) != graph_node_bytes(&g->nodes[o]) ||
            !full_view(p, v))
            continue;
        alias[o] = b;
        alias[b] = b;
        p->info[b].last = p->info[o].last;
        if (p->log)
            fprintf(p->log, "plan: %s %%%d reuses the memory of %%%d in place\n",
                    op_name(g->nodes[o].op), o, b);
    }

    for (int v = 0; v < g->n; v++)
        tie[v] = -1;
    if (p->gemm_rows_in_place)
        for (int gi = 0; gi < p->ngroups; gi++)
            gemm_rows_in_place(p, gi, alias, tie);

    // greedy by size
    int nitems = 0;
    for (int v = 0; v < g->n; v++)
        if (p->info[v].store == CS_BUFFER && (alias[v] < 0 || alias[v] == v))
            items[nitems++] = v;
    for (int i = 1; i < nitems; i++) { // insertion sort, largest first
        int v = items[i], j = i;
        size_t sz = graph_node_bytes(&g->nodes[v]);
        while (j > 0 && graph_node_bytes(&g->nodes[items[j - 1]]) < sz) {
            items[j] = items[j - 1];
            j--;
        }
        items[j] = v;
    }
    size_t arena = place(p, items, nitems, tie, placed);
    if (p->gemm_rows_in_place) {
        // keep a tie only where it lowers the arena: elsewhere (a GEMM not
        // at the peak) it would cost the kernel its chunks for nothing
        for (int t = 0; t < g->n; t++) {
            int r = tie[t];
            if (r < 0 || p->info[t].group < 0 || !p->groups[p->info[t].group].rows_in_place)
                continue;
            tie[t] = tie[r] = -1;
            size_t without = place(p, items, nitems, tie, placed);
            if (without <= arena) {
                arena = without;
                p->groups[p->info[t].group].rows_in_place = false;
            } else {
                tie[t] = r, tie[r] = t;
            }
        }
        arena = place(p, items, nitems, tie, placed);
        if (p->log)
            for (int gi = 0; gi < p->ngroups; gi++)
                if (p->groups[gi].rows_in_place)
                    fprintf(p->log, "plan: %s %%%d keeps its input in its first bytes (rows in "
                                    "place)\n",
                            op_name(g->nodes[p->groups[gi].anchor].op), p->groups[gi].anchor);
    }
    for (int v = 0; v < g->n; v++)
        if (alias[v] >= 0 && alias[v] != v)
            p->info[v].offset = p->info[alias[v]].offset;
    p->arena_bytes = arena;
    if (p->log) { // how close the packing came to the most bytes live at once
        size_t most = 0;
        int at = 0;
        for (int gi = 0; gi <= p->ngroups; gi++) {
            size_t live = 0;
            for (int i = 0; i < nitems; i++)
                if (p->info[items[i]].first <= gi && gi <= p->info[items[i]].last)
                    live += (graph_node_bytes(&g->nodes[items[i]]) + ALIGN - 1) / ALIGN * ALIGN;
            if (live > most)
                most = live, at = gi;
        }
        fprintf(p->log, "plan: arena %zu bytes; at most %zu live at once (at group %d of %d)\n",
                arena, most, at, p->ngroups);
        const char *lg = getenv("TCBENCH_LOG"); // TCBENCH_LOG=fusion,memory: what is live then
        if (lg && strstr(lg, "memory"))
            for (int i = 0; i < nitems; i++)
                if (p->info[items[i]].first <= at && at <= p->info[items[i]].last)
                    fprintf(p->log, "plan:   live %s %%%d %zu bytes, groups %d..%d\n",
                            op_name(g->nodes[items[i]].op), items[i],
                            graph_node_bytes(&g->nodes[items[i]]), p->info[items[i]].first,
                            p->info[items[i]].last);
    }
    free(alias);
    free(items);
    free(tie);
    free(placed);
    return 0;
}
