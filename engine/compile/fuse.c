// Fusion: assigns every computing node to a kernel group.
//
// Views are resolved first: a chain of reshape / permute / slice / expand
// over a stored tensor becomes strides on that tensor (no kernel); a view
// that strides cannot express, or that a GEMM cannot read, becomes a copy
// kernel. Then, in this order (TVM's lattice for what may fuse, Inductor's
// checks for when):
//   1. GEMM and convolution anchors take a chain of elementwise consumers of
//      their own shape as an epilogue (bias, activation, residual add), run
//      in place on the output while it is in cache;
//   2. every reduction over the last axis grows a row group: elementwise
//      producers (prologue) and consumers over the same rows, and other
//      reductions over those rows (softmax and the norms become one kernel);
//   3. the remaining elementwise nodes fuse vertically with same-shape
//      consumers.
//   4. the optimizer's updates (and batch norm's running statistics) become
//      one KG_UPDATE group, a multi-tensor apply; one per update without
//      fusion. Updates never join any other group.
// A merge is refused when it would make a cycle between groups (checked on
// the group graph), when a group would exceed FUSE_MAX_NODES, or, without
// fusion (the "captured" ablation), when the nodes come from different ops.
// TCBENCH_LOG=fusion prints every decision and every refusal's reason.
#include "compile_internal.h"

#include <stdlib.h>
#include <string.h>

#define FUSE_MAX_NODES FUSE_MAX_MEMBERS

typedef struct fctx {
    cprog *p;
    graph *g;
    int *cons_start, *cons; // consumers, CSR
    int *mark;              // DFS scratch (epoch stamps)
    int epoch;
    int *stack;
} fctx;

static int ncons(const fctx *f, int v) { return f->cons_start[v + 1] - f->cons_start[v]; }
static int cons_at(const fctx *f, int v, int i) { return f->cons[f->cons_start[v] + i]; }

static void logf_(fctx *f, const char *fmt, const char *a, int v, const char *b, int w,
                  const char *why) {
    if (!f->p->log)
        return;
    fprintf(f->p->log, fmt, a, v, b, w, why);
}

#define LOG_FUSE(f, v, w, why)                                                                     \
    logf_(f, "fusion: %s %%%d into %s %%%d: %s\n", op_name(f->g->nodes[v].op), v,                  \
          op_name(f->g->nodes[w].op), w, why)

static int group_new(fctx *f, kg_kind kind, int anchor) {
    cprog *p = f->p;
    kgroup *gs = realloc(p->groups, (size_t)(p->ngroups + 1) * sizeof *gs);
    if (!gs)
        return -1;
    p->groups = gs;
    kgroup *k = &gs[p->ngroups];
    memset(k, 0, sizeof *k);
    k->kind = kind;
    k->anchor = anchor;
    k->nodes = malloc(FUSE_MAX_NODES * sizeof *k->nodes);
    if (!k->nodes)
        return -1;
    return p->ngroups++;
}

static void group_add(fctx *f, int gid, int v) {
    kgroup *k = &f->p->groups[gid];
    // keep graph order: insert sorted
    int i = k->n++;
    while (i > 0 && k->nodes[i - 1] > v) {
        k->nodes[i] = k->nodes[i - 1];
        i--;
    }
    k->nodes[i] = v;
    f->p->info[v].group = gid;
}

// Would adding v to group gid create a path gid -> outside -> gid? Walk
// forward from the consumers of the group's nodes (and v's) that are
// outside the group, treating every other group as one unit, and see if
// the walk comes back. (Node ids alone cannot cut the walk short: a node
// after the group's last one can belong to a group that also holds an
// earlier node, which runs, as a unit, before the set.)
static bool makes_cycle(fctx *f, int gid, int v) {
    cprog *p = f->p;
    kgroup *k = &p->groups[gid];
    f->epoch++;
    int sp = 0;
#define IN_SET(u) ((u) == v || p->info[u].group == gid)
    for (int i = 0; i <= k->n; i++) {
        int u = i < k->n ? k->nodes[i] : v;
        for (int c = 0; c < ncons(f, u); c++) {
            int w = cons_at(f, u, c);
            if (!IN_SET(w) && f->mark[w] != f->epoch) {
                f->mark[w] = f->epoch;
                f->stack[sp++] = w;
            }
        }
    }
    // any walk that comes back into the set closes a cycle
    while (sp > 0) {
        int u = f->stack[--sp];
        int ug = p->info[u].group;
        // a node of another group stands for its whole group: the group runs
        // once, after all its inputs and before all its readers
        int members = ug >= 0 ? p->groups[ug].n : 1;
        for (int m = 0; m < members; m++) {
            int x = ug >= 0 ? p->groups[ug].nodes[m] : u;
            for (int c = 0; c < ncons(f, x); c++) {
                int w = cons_at(f, x, c);
                if (IN_SET(w))
                    return true;
                if (f->mark[w] != f->epoch) {
                    f->mark[w] = f->epoch;
                    f->stack[sp++] = w;
                }
            }
        }
    }
#undef IN_SET
    return false;
}

// A cast between f32, f16 and bf16 fuses (the kernel loads and stores
// convert); casts of indices and masks stay library kernels, as eager's.
static bool float_cast(const graph *g, const graph_node *n) {
    return dtype_is_float(g->nodes[n->src[0]].dtype) && dtype_is_float(n->dtype);
}

static bool fusable_pointwise(fctx *f, int v) {
    const graph_node *n = &f->g->nodes[v];
    return compile_is_pointwise(n) && (n->op != OP_CAST || float_cast(f->g, n)) &&
           f->p->info[v].group < 0 && f->p->info[v].store == CS_INLINE;
}

// A training step's backward: the nodes that came from ops after the loss.
static bool backward_phase(const fctx *f, int v) {
    int loss = f->p->m->g->loss;
    return loss >= 0 && f->p->origin[v] > loss;
}

// Policy and size checks shared by every merge.
static const char *refuse(fctx *f, int gid, int v) {
    kgroup *k = &f->p->groups[gid];
    if (k->n >= FUSE_MAX_NODES)
        return "group is full";
    int seed = k->anchor >= 0 ? k->anchor : k->nodes[0];
    if (!f->p->fusion && f->p->origin[v] != f->p->origin[seed])
        return "fusion disabled (different ops)";
    // a backward value computed in a forward kernel would be stored until
    // the backward reads it; computed in the backward it costs a recompute
    // of cheap pointwise work and no memory (the partitioner's choice)
    if (backward_phase(f, v) != backward_phase(f, seed))
        return "forward and backward stay apart (the backward recomputes)";
    if (makes_cycle(f, gid, v))
        return "would make a cycle";
    return NULL;
}

static bool try_add(fctx *f, int gid, int v, int near) {
    const char *why = refuse(f, gid, v);
    if (why) {
        LOG_FUSE(f, v, near, why);
        return false;
    }
    group_add(f, gid, v);
    LOG_FUSE(f, v, near, "fused");
    return true;
}

// 1. GEMM / convolution epilogues.
static int fuse_epilogues(fctx *f) {
    for (int a = 0; a < f->g->n; a++) {
        enum op_kind k = op_kind(f->g->nodes[a].op);
        if (k != OPK_GEMM && k != OPK_CONV)
            continue;
        int gid = group_new(f, k == OPK_GEMM ? KG_GEMM : KG_CONV, a);
        if (gid < 0)
            return -1;
        group_add(f, gid, a);
        int cur = a;
        while (ncons(f, cur) == 1) {
            int c = cons_at(f, cur, 0);
            if (!fusable_pointwise(f, c) || !compile_same_shape(&f->g->nodes[c], &f->g->nodes[a])) {
                LOG_FUSE(f, c, cur, "not an elementwise op of the output's shape");
                break;
            }
            bool twice = false; // c reading cur twice (x * x) is fine; reading
            for (int s = 0; s < f->g->nodes[c].nsrc; s++) // another group member is not
                twice |= f->g->nodes[c].src[s] != cur && f->p->info[f->g->nodes[c].src[s]].group == gid;
            if (twice || !try_add(f, gid, c, cur))
                break;
            cur = c;
        }
        // the library writes the last member's buffer in the anchor's dtype:
        // members past the last one of that dtype go back (they fuse later)
        kgroup *grp = &f->p->groups[gid];
        while (f->p->epilogue_keeps_dtype && grp->n > 1 &&
               f->g->nodes[grp->nodes[grp->n - 1]].dtype != f->g->nodes[a].dtype) {
            int v = grp->nodes[--grp->n];
            f->p->info[v].group = -1;
            LOG_FUSE(
                f, v, a,
                "left out: the library call writes the epilogue's last value, in its own dtype");
        }
    }
    return 0;
}

static int row_class(const graph_node *full, const graph_node *n) {
    // 2: full row shape, 1: one value per row, 0: neither
    if (compile_same_shape(full, n))
        return 2;
    if (n->ndim != full->ndim || n->shape[n->ndim - 1] != 1)
        return 0;
    for (int i = 0; i < n->ndim - 1; i++)
        if (n->shape[i] != full->shape[i])
            return 0;
    return 1;
}

static bool is_row_reduce(const graph *g, int v) {
    const graph_node *n = &g->nodes[v];
    return op_kind(n->op) == OPK_REDUCE && n->ia[0] == n->ndim - 1;
}

// 2. Row groups around reductions over the last axis.
static int fuse_rows(fctx *f) {
    graph *g = f->g;
    for (int r = 0; r < g->n; r++) {
        if (!is_row_reduce(g, r) || f->p->info[r].group >= 0)
            continue;
        const graph_node *full = &g->nodes[g->nodes[r].src[0]];
        int gid = group_new(f, KG_ROWREDUCE, -1);
        if (gid < 0)
            return -1;
        group_add(f, gid, r);
        bool grew = true;
        while (grew) {
            grew = false;
            kgroup *k = &f->p->groups[gid];
            for (int i = 0; i < k->n && !grew; i++) {
                int u = k->nodes[i];
                // consumers: elementwise over the rows, or another row reduction
                for (int c = 0; c < ncons(f, u) && !grew; c++) {
                    int w = cons_at(f, u, c);
                    if (f->p->info[w].group >= 0)
                        continue;
                    bool ok = (fusable_pointwise(f, w) && row_class(full, &g->nodes[w])) ||
                              (is_row_reduce(g, w) && f->p->info[w].store == CS_INLINE &&
                               row_class(full, &g->nodes[g->nodes[w].src[0]]) == 2);
                    if (ok)
                        grew = try_add(f, gid, w, u);
                }
                // producers: full-shape elementwise ops (stored too if used elsewhere)
                for (int s = 0; s < g->nodes[u].nsrc && !grew; s++) {
                    int w = g->nodes[u].src[s];
                    if (fusable_pointwise(f, w) && row_class(full, &g->nodes[w]) == 2)
                        grew = try_add(f, gid, w, u);
                }
            }
        }
    }
    return 0;
}

// 3. Vertical fusion of the remaining elementwise nodes.
static int fuse_pointwise(fctx *f) {
    graph *g = f->g;
    for (int v = 0; v < g->n; v++) {
        if (!fusable_pointwise(f, v))
            continue;
        int gid = group_new(f, KG_POINTWISE, -1);
        if (gid < 0)
            return -1;
        group_add(f, gid, v);
        bool grew = true;
        while (grew) {
            grew = false;
            for (int i = 0; i < f->p->groups[gid].n; i++) {
                int u = f->p->groups[gid].nodes[i];
                for (int c = 0; c < ncons(f, u); c++) {
                    int w = cons_at(f, u, c);
                    if (fusable_pointwise(f, w) && compile_same_shape(&g->nodes[w], &g->nodes[v]))
                        grew |= try_add(f, gid, w, u);
                    else if (f->p->info[w].group < 0 && f->p->log)
                        LOG_FUSE(f, w, u, "not an elementwise op of the same shape");
                }
                // producers not yet grouped (a later input of a consumer)
                for (int s = 0; s < g->nodes[u].nsrc; s++) {
                    int w = g->nodes[u].src[s];
                    if (fusable_pointwise(f, w) && compile_same_shape(&g->nodes[w], &g->nodes[v]))
                        grew |= try_add(f, gid, w, u);
                }
            }
        }
    }
    return 0;
}

// Views: strides over a stored base, or a copy when strides cannot say it.
static bool gemm_readable(const clayout *l) {
    int n = l->ndim;
    if (n < 2)
        return false;
    int64_t rs = l->stride[n - 2], cs = l->stride[n - 1];
    int64_t rows = l->shape[n - 2], cols = l->shape[n - 1];
    return (cs == 1 && (rs >= cols || rows == 1)) || (rs == 1 && (cs >= rows || cols == 1));
}

bool compile_view_layout(const cprog *p, int v, clayout *out) {
    const graph *g = p->g;
    const graph_node *n = &g->nodes[v];
    int s = n->src[0];
    const cnode *si = &p->info[s];
    clayout in;
    if (si->store == CS_VIEW)
        in = si->lay;
    else
        clayout_contiguous(&in, g->nodes[s].ndim, g->nodes[s].shape);
    *out = in;
    switch (n->op) {
    case OP_RESHAPE: return clayout_reshape(&in, n->ndim, n->shape, out);
    case OP_PERMUTE:
        for (int i = 0; i < n->ndim; i++) {
            out->shape[i] = in.shape[n->ia[i]];
            out->stride[i] = in.stride[n->ia[i]];
        }
        return true;
    case OP_SLICE:
        out->shape[n->ia[0]] = n->shape[n->ia[0]];
        out->offset += n->ia[1] * in.stride[n->ia[0]];
        return true;
    default: { // EXPAND
        int pad = n->ndim - in.ndim;
        out->ndim = n->ndim;
        for (int i = n->ndim - 1; i >= 0; i--) {
            int k = i - pad;
            int64_t sz = k >= 0 ? in.shape[k] : 1, st = k >= 0 ? in.stride[k] : 0;
            out->shape[i] = n->shape[i];
            out->stride[i] = sz == n->shape[i] ? st : 0;
        }
        return true;
    }
    }
}

static void resolve_views(fctx *f) {
    cprog *p = f->p;
    graph *g = f->g;
    for (int v = 0; v < g->n; v++) {
        graph_node *n = &g->nodes[v];
        if (op_kind(n->op) != OPK_VIEW)
            continue;
        int s = n->src[0];
        cnode *si = &p->info[s], *vi = &p->info[v];
        clayout out;
        bool ok = compile_view_layout(p, v, &out);
        // GEMMs read strided matrices; oneDNN's convolution and pooling
        // take plain contiguous data
        bool bad_use = false;
        for (int c = 0; c < ncons(f, v); c++) {
            enum op_kind k = op_kind(g->nodes[cons_at(f, v, c)].op);
            if (k == OPK_GEMM)
                bad_use |= !gemm_readable(&out);
            else if (k == OPK_CONV || k == OPK_POOL)
                bad_use |= !clayout_is_contiguous(&out);
        }
        if (!ok || bad_use) {
            // materialize: a copy kernel of its own
            vi->store = CS_BUFFER;
            vi->base = v;
            clayout_contiguous(&vi->lay, n->ndim, n->shape);
            int gid = group_new(f, KG_COPY, v);
            if (gid >= 0)
                group_add(f, gid, v);
            if (p->log)
                fprintf(p->log, "fusion: %s %%%d becomes a copy: %s\n", op_name(n->op), v,
                        ok ? "a GEMM cannot read these strides" : "strides cannot express it");
        } else {
            vi->store = CS_VIEW;
            vi->base = si->store == CS_VIEW ? si->base : s;
            vi->lay = out;
        }
        // the storage under a view must exist
        int b = vi->store == CS_VIEW ? vi->base : s;
        p->info[b].must_store = true;
    }
}

// Small elementwise values computed from sources alone (batch norm's
// rsqrt(running_var + eps), per channel; a bias's f16 copy) are recomputed
// inside each kernel that reads them instead of being a kernel of their own.
#define RECOMPUTE_MAX_NUMEL 4096

static void mark_recompute(fctx *f) {
    cprog *p = f->p;
    graph *g = f->g;
    // forward: small elementwise values of sources alone
    bool *cand = calloc((size_t)g->n, sizeof *cand);
    if (!cand)
        return; // an optimization: without memory, do without it
    for (int v = 0; v < g->n; v++) {
        const cnode *c = &p->info[v];
        const graph_node *n = &g->nodes[v];
        // f32 values, and the f16 copies autocast makes of small parameters
        // (a bias read by its GEMM's epilogue)
        bool cast = n->op == OP_CAST && float_cast(g, n);
        if (c->store != CS_INLINE || c->must_store || !compile_is_pointwise(n) ||
            (n->op == OP_CAST && !cast) || (n->dtype != DT_F32 && !cast) ||
            graph_node_numel(n) > RECOMPUTE_MAX_NUMEL)
            continue;
        bool ok = true;
        for (int s = 0; s < n->nsrc && ok; s++) {
            int u = n->src[s];
            const cnode *sc = &p->info[u];
            ok = sc->store == CS_SOURCE || sc->store == CS_CONST || cand[u] ||
                 (sc->store == CS_VIEW && p->info[sc->base].store == CS_SOURCE);
        }
        cand[v] = ok;
    }
    // backward: every reader is a larger elementwise op or row reduction (the
    // value broadcasts into it), or is recomputed itself
    for (int v = g->n - 1; v >= 0; v--) {
        if (!cand[v])
            continue;
        const graph_node *n = &g->nodes[v];
        bool ok = ncons(f, v) > 0;
        for (int k = 0; k < ncons(f, v) && ok; k++) {
            int wi = cons_at(f, v, k);
            const graph_node *w = &g->nodes[wi];
            bool reads = (compile_is_pointwise(w) && (w->op != OP_CAST || float_cast(g, w))) ||
                         (op_kind(w->op) == OPK_REDUCE && w->ia[0] == w->ndim - 1);
            ok = reads && (graph_node_numel(w) > graph_node_numel(n) ||
                           p->info[wi].store == CS_RECOMPUTE);
        }
        if (!ok)
            continue;
        p->info[v].store = CS_RECOMPUTE;
    }
    // a recomputed node reads only sources, constants and recomputed nodes
    // (a candidate that stayed a stored value would be read before its
    // kernel wrote it), and is read only by larger values or recomputed
    // nodes: demote until both hold
    for (bool changed = true; changed;) {
        changed = false;
        for (int v = 0; v < g->n; v++) {
            if (p->info[v].store != CS_RECOMPUTE)
                continue;
            const graph_node *n = &g->nodes[v];
            bool ok = true;
            for (int s = 0; s < n->nsrc && ok; s++) {
                const cnode *sc = &p->info[n->src[s]];
                ok = sc->store == CS_SOURCE || sc->store == CS_CONST || sc->store == CS_RECOMPUTE ||
                     (sc->store == CS_VIEW && p->info[sc->base].store == CS_SOURCE);
            }
            for (int k = 0; k < ncons(f, v) && ok; k++) {
                int wi = cons_at(f, v, k);
                ok = graph_node_numel(&g->nodes[wi]) > graph_node_numel(n) ||
                     p->info[wi].store == CS_RECOMPUTE;
            }
            if (!ok) {
                p->info[v].store = CS_INLINE;
                changed = true;
            }
        }
    }
    for (int v = 0; v < g->n && p->log; v++)
        if (p->info[v].store == CS_RECOMPUTE)
            fprintf(p->log, "fusion: %s %%%d is recomputed where it is read\n",
                    op_name(g->nodes[v].op), v);
    free(cand);
}

// 4. Updates. With fusion, the generated updates run as a few multi-tensor
// kernels, "buckets" of the optimizer: updates are taken in the order their
// gradients complete (the last node they depend on, in graph order, which
// follows the backward), and a bucket closes once it holds an eighth of all
// the updated bytes (64 KiB at least). The scheduler runs a bucket as soon as it is ready, so
// a gradient's memory is free again soon after it is complete instead of
// every gradient living until one kernel at the end. An update that reads
// (not writes) a source another member writes stays apart, so that no
// member sees another's write. Without fusion each update is its own
// kernel; f16 updates or strided operands are library kernels.
typedef struct upd {
    int v, ready;
    size_t bytes;
} upd;

static int upd_cmp(const void *a, const void *b) {
    const upd *x = a, *y = b;
    return x->ready != y->ready ? (x->ready < y->ready ? -1 : 1) : (x->v < y->v ? -1 : x->v > y->v);
}

static int fuse_updates(fctx *f) {
    cprog *p = f->p;
    graph *g = f->g;
    if (g->n <= 0)
        return 0;
    bool *written = calloc((size_t)g->n, sizeof *written);
    upd *u = malloc((size_t)g->n * sizeof *u);
    int nu = 0;
    if (!written || !u)
        goto oom;
    for (int v = 0; v < g->n; v++) {
        const graph_node *n = &g->nodes[v];
        if (!compile_is_generated_update(g, n))
            continue;
        for (int s = 0; s < n->nsrc; s++)
            written[n->src[s]] |= compile_writes(n, s);
    }
    for (int v = 0; v < g->n; v++) {
        const graph_node *n = &g->nodes[v];
        if (op_kind(n->op) != OPK_UPDATE)
            continue;
        bool flat = true; // the generated loop reads every operand as a flat array
        for (int s = 0; s < n->nsrc; s++)
            flat &= clayout_is_contiguous(&p->info[n->src[s]].lay);
        bool alone = !p->fusion;
        for (int s = 0; s < n->nsrc; s++)
            alone |= !compile_writes(n, s) && written[n->src[s]];
        if (!flat || !compile_is_generated_update(g, n) || alone) {
            int gid = group_new(f, flat && compile_is_generated_update(g, n) ? KG_UPDATE : KG_EXTERN,
                                flat && compile_is_generated_update(g, n) ? -1 : v);
            if (gid < 0)
                goto oom;
            group_add(f, gid, v);
            continue;
        }
        // ready: after its operands and every other reader of what it writes
        int ready = 0;
        for (int s = 0; s < n->nsrc; s++) {
            if (op_kind(g->nodes[n->src[s]].op) != OPK_SOURCE && n->src[s] > ready)
                ready = n->src[s]; // the gradient (sources are there from the start)
            if (!compile_writes(n, s))
                continue;
            for (int k = 0; k < ncons(f, n->src[s]); k++) {
                int c = cons_at(f, n->src[s], k);
                if (c != v && op_kind(g->nodes[c].op) != OPK_UPDATE && c > ready)
                    ready = c;
            }
        }
        u[nu++] = (upd){v, ready, graph_node_bytes(&g->nodes[n->src[0]])};
    }
    qsort(u, (size_t)nu, sizeof *u, upd_cmp);
    size_t total = 0;
    for (int i = 0; i < nu; i++)
        total += u[i].bytes;
    size_t cap = total / 8 > (64 << 10) ? total / 8 : (64 << 10), fill = 0;
    int gid = -1;
    for (int i = 0; i < nu; i++) {
        if (gid < 0 || fill >= cap) {
            if ((gid = group_new(f, KG_UPDATE, -1)) < 0)
                goto oom;
            if (nu > FUSE_MAX_NODES) { // room for every update
                int *nodes = realloc(p->groups[gid].nodes, (size_t)nu * sizeof *nodes);
                if (!nodes)
                    goto oom;
                p->groups[gid].nodes = nodes;
            }
            fill = 0;
        }
        group_add(f, gid, u[i].v);
        fill += u[i].bytes;
        if (p->log)
            fprintf(p->log, "fusion: %s %%%d into update bucket %d (ready after %%%d)\n",
                    op_name(g->nodes[u[i].v].op), u[i].v, gid, u[i].ready);
    }
    free(written);
    free(u);
    return 0;
oom:
    free(written);
    free(u);
    return -1;
}

int compile_fuse(cprog *p) {
    graph *g = p->g;
    fctx f = {.p = p, .g = g};
    p->info = calloc((size_t)g->n, sizeof *p->info);
    f.cons_start = calloc((size_t)g->n + 1, sizeof *f.cons_start);
    f.mark = calloc((size_t)g->n, sizeof *f.mark);
    f.stack = malloc(((size_t)g->n + 1) * sizeof *f.stack);
    int total = 0;
    for (int i = 0; i < g->n; i++)
        total += g->nodes[i].nsrc;
    f.cons = malloc(((size_t)total + 1) * sizeof *f.cons);
    int rc = -1;
    if (!p->info || !f.cons_start || !f.mark || !f.stack || !f.cons) {
        compile_fail(p, "out of memory in fuse");
        goto done;
    }
    for (int i = 0; i < g->n; i++)
        for (int j = 0; j < g->nodes[i].nsrc; j++)
            f.cons_start[g->nodes[i].src[j] + 1]++;
    for (int i = 0; i < g->n; i++)
        f.cons_start[i + 1] += f.cons_start[i];
    int *fill = calloc((size_t)g->n, sizeof *fill);
    if (!fill) {
        compile_fail(p, "out of memory in fuse");
        goto done;
    }
    for (int i = 0; i < g->n; i++)
        for (int j = 0; j < g->nodes[i].nsrc; j++) {
            int s = g->nodes[i].src[j];
            // one edge per (producer, consumer) pair
            bool dup = false;
            for (int k = 0; k < j; k++)
                dup |= g->nodes[i].src[k] == s;
            if (!dup)
                f.cons[f.cons_start[s] + fill[s]++] = i;
        }
    // compact away the duplicate slots
    int w = 0;
    for (int i = 0; i < g->n; i++) {
        int start = w;
        for (int k = 0; k < fill[i]; k++)
            f.cons[w++] = f.cons[f.cons_start[i] + k];
        f.cons_start[i] = start;
    }
    f.cons_start[g->n] = w;
    free(fill);

    for (int i = 0; i < g->n; i++) {
        cnode *c = &p->info[i];
        const graph_node *n = &g->nodes[i];
        c->origin = p->origin[i];
        c->group = -1;
        c->base = i;
        clayout_contiguous(&c->lay, n->ndim, n->shape);
        c->store = n->op == OP_FULL ? CS_CONST
                   : op_kind(n->op) == OPK_SOURCE ? CS_SOURCE
                                                  : CS_INLINE;
        if (op_kind(n->op) == OPK_UPDATE) { // its value: src0, written in place
            c->store = CS_VIEW;
            c->base = n->src[0];
        }
    }
    for (int i = 0; i < g->noutputs; i++)
        p->info[g->outputs[i]].must_store = true;
    if (g->loss >= 0)
        p->info[g->loss].must_store = true;
    resolve_views(&f);
    mark_recompute(&f);
    if (fuse_epilogues(&f) < 0 || fuse_rows(&f) < 0 || fuse_pointwise(&f) < 0 ||
        fuse_updates(&f) < 0) {
        compile_fail(p, "out of memory in fuse");
        goto done;
    }
    // everything else is a kernel of its own
    for (int v = 0; v < g->n; v++) {
        if (p->info[v].group >= 0 || p->info[v].store != CS_INLINE)
            continue;
        int gid = group_new(&f, KG_EXTERN, v);
        if (gid < 0) {
            compile_fail(p, "out of memory in fuse");
            goto done;
        }
        group_add(&f, gid, v);
    }
    // a member is stored when anything outside its group reads it
    for (int v = 0; v < g->n; v++) {
        cnode *c = &p->info[v];
        if (c->group < 0 || op_kind(g->nodes[v].op) == OPK_UPDATE)
            continue;
        for (int k = 0; k < ncons(&f, v); k++)
            if (p->info[cons_at(&f, v, k)].group != c->group)
                c->must_store = true;
        kgroup *k = &p->groups[c->group];
        if (k->kind == KG_EXTERN || k->kind == KG_COPY)
            c->must_store = true;
        if (c->must_store)
            c->store = CS_BUFFER;
    }
    rc = 0;
done:
    free(f.cons_start);
    free(f.cons);
    free(f.mark);
    free(f.stack);
    return rc;
}
