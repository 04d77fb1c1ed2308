// CUDA C code generation (codegen_cuda.h): codegen_c.c's lowering of every
// kernel group, with its loop nests turned into grid-stride loops and row
// loops into block reductions. The helpers mirror codegen_c.c's one for one
// (arg_of, operand, emit_member, coalesce, emit_row_offsets, emit_row's
// levels) so the two stay easy to compare; where they differ is said.
#include "codegen_cuda.h"

#include "base/sbuf.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

extern const char cuda_prelude_text[]; // backend/cuda/cuda_prelude.cuh, embedded at build time
extern const char compile_prelude_pointwise[]; // core/pointwise.h, likewise

#define PW_BLOCK 256 // threads of an elementwise kernel
#define PW_ITEMS 4   // elements per thread per pass
#define MAX_GRID (1u << 20)

typedef struct cgen {
    cprog *p;
    kgroup *k;
    sbuf *b;
    int nd;                                   // iteration dims
    int64_t shape[TENSOR_MAX_DIMS];           // iteration shape
    int64_t st[KG_MAX_ARGS][TENSOR_MAX_DIMS]; // per-arg strides over it
    bool used[KG_MAX_ARGS];                   // args the loop reads or writes (coalescing)
    int row_level;                            // 0: flat index j; 1: row offsets o<a> + j
} cgen;

static const char *ctype(enum dtype t) {
    switch (t) {
    case DT_F32: return "float";
    case DT_I32: return "int32_t";
    case DT_I64: return "int64_t";
    case DT_BOOL: return "uint8_t";
    default: return "uint16_t"; // f16 storage; tc_h2f / tc_f2h convert
    }
}

static enum dtype dtype_of(const cgen *g, int v) { return g->p->g->nodes[v].dtype; }

static bool in_group(const cgen *g, int v) {
    return g->p->info[v].group == g->p->info[g->k->nodes[0]].group;
}

static int member_index(const cgen *g, int v) {
    for (int i = 0; i < g->k->n; i++)
        if (g->k->nodes[i] == v)
            return i;
    return -1;
}

static bool is_member_value(const cgen *g, int v) {
    const cnode *c = &g->p->info[v];
    return in_group(g, v) && c->store != CS_VIEW && c->store != CS_SOURCE &&
           c->store != CS_RECOMPUTE;
}

static void index_of(const cgen *g, int ai, char *buf, size_t cap) {
    int64_t s = g->st[ai][g->nd - 1];
    if (g->row_level)
        snprintf(buf, cap,
                 s == 0   ? "o%d"
                 : s == 1 ? "o%d + j"
                          : "o%d + j * (ix)%lld",
                 ai, (long long)s);
    else
        snprintf(buf, cap, s == 0 ? "0" : s == 1 ? "j" : "j * (ix)%lld", (long long)s);
}

// A load of arg ai at idx as a float (f16 converted, bool as 0 / 1).
static void load_expr(const cgen *g, int ai, const char *idx, char *buf, size_t cap) {
    switch (dtype_of(g, g->k->args[ai])) {
    case DT_F16: snprintf(buf, cap, "tc_h2f(p%d[%s])", ai, idx); break;
    case DT_BOOL: snprintf(buf, cap, "(p%d[%s] != 0)", ai, idx); break;
    default: snprintf(buf, cap, "p%d[%s]", ai, idx); break;
    }
}

static void store_stmt(cgen *g, const char *indent, int ai, const char *idx, const char *val) {
    if (dtype_of(g, g->k->args[ai]) == DT_F16)
        sbuf_printf(g->b, "%sp%d[%s] = tc_f2h(%s);\n", indent, ai, idx, val);
    else
        sbuf_printf(g->b, "%sp%d[%s] = %s;\n", indent, ai, idx, val);
}

static void recompute_expr(cgen *g, int v, char *buf, size_t cap);

static void operand(cgen *g, int v, char *buf, size_t cap) {
    const cnode *c = &g->p->info[v];
    if (c->store == CS_CONST) {
        compile_literal(buf, cap, g->p->g->nodes[v].fa[0]);
        return;
    }
    if (c->store == CS_RECOMPUTE) {
        recompute_expr(g, v, buf, cap);
        return;
    }
    if (is_member_value(g, v)) {
        snprintf(buf, cap, "v%d", member_index(g, v));
        return;
    }
    int ai = compile_arg_of(g->k, v);
    char idx[96];
    index_of(g, ai, idx, sizeof idx);
    load_expr(g, ai, idx, buf, cap);
}

// The CUDA expression of an elementwise op over operands x0, x1, x2 (the
// eager CUDA kernels' expressions); NULL for ops that are not elementwise.
static const char *op_template(const graph_node *n, char *buf, size_t cap) {
    if (compile_formula_expr(n, buf, cap)) // core/pointwise.h's
        return buf;
    switch (n->op) {
    case OP_CONTIGUOUS: return "x0";
    // between f32 and f16 (fuse.c fuses float casts only): values are f32
    // in registers, the store rounds, as in the C generator
    case OP_CAST: return "x0";
    case OP_ADD: return "x0 + x1";
    case OP_SUB: return "x0 - x1";
    case OP_MUL: return "x0 * x1";
    case OP_DIV: return "x0 / x1";
    case OP_MAXIMUM: return "tc_maximum(x0, x1)";
    case OP_GE: return "x0 >= x1 ? 1.0f : 0.0f";
    case OP_WHERE: return "x0 ? x1 : x2";
    default: return NULL;
    }
}

#define EXPR_CAP 2048

// A recomputed node (CS_RECOMPUTE: a small per-channel value of sources,
// see fuse.c) as one expression: an immediately called lambda, so each
// operand is evaluated once.
static void recompute_expr(cgen *g, int v, char *buf, size_t cap) {
    const graph_node *n = &g->p->g->nodes[v];
    char x[3][EXPR_CAP], tb[160];
    for (int s = 0; s < n->nsrc && s < 3; s++)
        operand(g, n->src[s], x[s], sizeof x[s]);
    const char *t = op_template(n, tb, sizeof tb);
    size_t o = (size_t)snprintf(buf, cap, "([&]() -> float { ");
    for (int s = 0; s < n->nsrc && s < 3 && o < cap; s++)
        o += (size_t)snprintf(buf + o, cap - o, "%s x%d = %s; ",
                              s == 0 && n->op == OP_WHERE ? "int" : "float", s, x[s]);
    if (o < cap)
        snprintf(buf + o, cap - o, "return %s; }())", t ? t : "0.0f");
}

// "float vM = <op>(operands);" with the eager CUDA kernels' expressions
static int emit_member(cgen *g, int m) {
    int v = g->k->nodes[m];
    const graph_node *n = &g->p->g->nodes[v];
    char x[3][EXPR_CAP], tb[160];
    for (int s = 0; s < n->nsrc && s < 3; s++)
        operand(g, n->src[s], x[s], sizeof x[s]);
    sbuf *b = g->b;
    sbuf_printf(b, "        float v%d;\n        {\n", m);
    for (int s = 0; s < n->nsrc && s < 3; s++)
        sbuf_printf(b, "            %s x%d = %s;\n", s == 0 && n->op == OP_WHERE ? "int" : "float",
                    s, x[s]);
    const char *e = op_template(n, tb, sizeof tb);
    if (!e)
        return compile_fail(g->p, "codegen_cuda: %s cannot be fused", op_name(n->op));
    sbuf_printf(b, "            v%d = %s;\n        }\n", m, e);
    return 0;
}

// Merge adjacent dims that every used arg steps through as one.
static void coalesce(cgen *g) {
    int nd = g->nd;
    for (int d = nd - 2; d >= 0; d--) {
        bool ok = true;
        for (int a = 0; a < g->k->nargs && ok; a++)
            ok = !g->used[a] || g->st[a][d] == g->st[a][d + 1] * g->shape[d + 1];
        if (!ok)
            continue;
        g->shape[d] *= g->shape[d + 1];
        for (int a = 0; a < g->k->nargs; a++)
            g->st[a][d] = g->st[a][d + 1];
        for (int e = d + 1; e < nd - 1; e++) {
            g->shape[e] = g->shape[e + 1];
            for (int a = 0; a < g->k->nargs; a++)
                g->st[a][e] = g->st[a][e + 1];
        }
        nd--;
    }
    g->nd = nd;
}

static void set_iteration(cgen *g, int nd, const int64_t *shape) {
    g->nd = nd > 0 ? nd : 1;
    for (int i = 0; i < g->nd; i++)
        g->shape[i] = nd > 0 ? shape[i] : 1;
    for (int a = 0; a < g->k->nargs; a++) {
        compile_eff_strides(g->p, g->k->args[a], g->nd, g->shape, g->st[a]);
        g->used[a] = true;
    }
}

// 64-bit indices unless the count and every used arg's furthest offset fit
// comfortably in 32 bits (the grid-stride step is added before the test).
static bool wide(const cgen *g) {
    int64_t total = shape_numel(g->nd, g->shape);
    if (total >= ((int64_t)1 << 30))
        return true;
    for (int a = 0; a < g->k->nargs; a++) {
        if (!g->used[a])
            continue;
        int64_t reach = 0;
        for (int d = 0; d < g->nd; d++)
            reach += (g->shape[d] - 1) * (g->st[a][d] < 0 ? -g->st[a][d] : g->st[a][d]);
        if (reach >= ((int64_t)1 << 30))
            return true;
    }
    return false;
}

static void decl_args(cgen *g) {
    sbuf_printf(g->b, "    typedef %s ix;\n", wide(g) ? "long long" : "int");
    for (int a = 0; a < g->k->nargs; a++) {
        const char *t = ctype(dtype_of(g, g->k->args[a]));
        sbuf_printf(g->b, "    %s *p%d = (%s *)a.p[%d];\n", t, a, t, a);
    }
}

// Offsets o<a> of row r over dims 0 .. nd-2.
static void emit_row_offsets(cgen *g, const char *r) {
    sbuf *b = g->b;
    for (int a = 0; a < g->k->nargs; a++)
        sbuf_printf(b, "        ix o%d = 0;\n", a);
    sbuf_printf(b, "        ix q = %s;\n", r);
    for (int d = g->nd - 2; d >= 0; d--) {
        sbuf_printf(b,
                    "        {\n            ix t_ = q %% (ix)%lld;\n            q /= (ix)%lld;\n",
                    (long long)g->shape[d], (long long)g->shape[d]);
        for (int a = 0; a < g->k->nargs; a++)
            if (g->st[a][d])
                sbuf_printf(b, "            o%d += t_ * (ix)%lld;\n", a, (long long)g->st[a][d]);
        sbuf_puts(b, "        }\n");
    }
    sbuf_puts(b, "        (void)q;\n");
}

// Register node v as an operand (a recomputed node: its own operands).
static int collect_operand(cgen *g, int v) {
    const cnode *c = &g->p->info[v];
    if (c->store == CS_RECOMPUTE) {
        const graph_node *n = &g->p->g->nodes[v];
        for (int s = 0; s < n->nsrc; s++)
            if (collect_operand(g, n->src[s]) < 0)
                return -1;
        return 0;
    }
    if (is_member_value(g, v) || c->store == CS_CONST || compile_arg_of(g->k, v) >= 0)
        return 0;
    return compile_fail(g->p, "codegen_cuda: a kernel has more than %d operands", KG_MAX_ARGS);
}

static int collect_args(cgen *g, int first_member) {
    kgroup *k = g->k;
    for (int m = first_member; m < k->n; m++) {
        const graph_node *n = &g->p->g->nodes[k->nodes[m]];
        for (int s = 0; s < n->nsrc; s++)
            if (collect_operand(g, n->src[s]) < 0)
                return -1;
    }
    for (int m = first_member; m < k->n; m++)
        if (g->p->info[k->nodes[m]].store == CS_BUFFER && compile_arg_of(k, k->nodes[m]) < 0)
            return compile_fail(g->p, "codegen_cuda: a kernel has more than %d operands",
                                KG_MAX_ARGS);
    return 0;
}

static void emit_stores(cgen *g, int m0, int m1) {
    for (int m = m0; m < m1; m++) {
        int v = g->k->nodes[m];
        if (g->p->info[v].store != CS_BUFFER)
            continue;
        int ai = compile_arg_of(g->k, v);
        char idx[96], val[16];
        index_of(g, ai, idx, sizeof idx);
        snprintf(val, sizeof val, "v%d", m);
        store_stmt(g, "        ", ai, idx, val);
    }
}

// The elementwise loop: every thread takes PW_ITEMS elements PW_BLOCK
// apart per pass, blocks stride the rest. The body sees j (and o<a>).
static void loop_open(cgen *g) {
    sbuf *b = g->b;
    long long total = (long long)shape_numel(g->nd, g->shape);
    sbuf_printf(
        b,
        "    for (ix base = (ix)blockIdx.x * %d; base < (ix)%lld; base += (ix)gridDim.x * %d) {\n",
        PW_BLOCK * PW_ITEMS, total, PW_BLOCK * PW_ITEMS);
    sbuf_printf(b, "#pragma unroll\n    for (int u = 0; u < %d; u++) {\n", PW_ITEMS);
    sbuf_printf(b, "        const ix i = base + u * %d + (ix)threadIdx.x;\n", PW_BLOCK);
    sbuf_printf(b, "        if (i >= (ix)%lld)\n            break;\n", total);
    if (g->nd == 1) {
        g->row_level = 0;
        sbuf_puts(b, "        const ix j = i;\n");
        return;
    }
    g->row_level = 1;
    long long L = (long long)g->shape[g->nd - 1];
    sbuf_printf(b, "        const ix r = i / (ix)%lld, j = i %% (ix)%lld;\n", L, L);
    emit_row_offsets(g, "r");
}

static void loop_close(cgen *g) { sbuf_puts(g->b, "    }\n    }\n"); }

static int emit_pointwise(cgen *g) {
    const graph_node *n0 = &g->p->g->nodes[g->k->nodes[0]];
    if (collect_args(g, 0) < 0)
        return -1;
    set_iteration(g, n0->ndim, n0->shape);
    coalesce(g);
    decl_args(g);
    loop_open(g);
    for (int m = 0; m < g->k->n; m++)
        if (emit_member(g, m) < 0)
            return -1;
    emit_stores(g, 0, g->k->n);
    loop_close(g);
    return 0;
}

// codegen_c.c's emit_copy: the view's elements in order into a contiguous buffer.
static int emit_copy(cgen *g) {
    cprog *p = g->p;
    int v = g->k->anchor;
    const graph_node *n = &p->g->nodes[v];
    int src = n->src[0];
    clayout in;
    if (n->op == OP_RESHAPE) {
        in = p->info[src].store == CS_VIEW ? p->info[src].lay : (clayout){0};
        if (p->info[src].store != CS_VIEW)
            clayout_contiguous(&in, p->g->nodes[src].ndim, p->g->nodes[src].shape);
    } else if (!compile_view_layout(p, v, &in)) {
        return compile_fail(p, "codegen_cuda: no layout for %s", op_name(n->op));
    }
    int base = p->info[src].store == CS_VIEW ? p->info[src].base : src;
    kgroup *k = g->k;
    k->args[0] = base;
    k->args[1] = v;
    k->nargs = 2;
    g->nd = in.ndim > 0 ? in.ndim : 1;
    for (int i = 0; i < g->nd; i++) {
        g->shape[i] = in.ndim > 0 ? in.shape[i] : 1;
        g->st[0][i] = in.ndim > 0 ? (in.shape[i] == 1 ? 0 : in.stride[i]) : 0;
    }
    int64_t cst[TENSOR_MAX_DIMS];
    tensor_strides_contiguous(g->nd, g->shape, cst);
    for (int i = 0; i < g->nd; i++)
        g->st[1][i] = cst[i];
    g->used[0] = g->used[1] = true;
    coalesce(g);
    const char *t = ctype(n->dtype);
    sbuf_printf(g->b, "    typedef %s ix;\n", wide(g) ? "long long" : "int");
    sbuf_printf(g->b, "    const %s *p0 = (const %s *)a.p[0] + %lld;\n", t, t,
                (long long)in.offset);
    sbuf_printf(g->b, "    %s *p1 = (%s *)a.p[1];\n", t, t);
    loop_open(g);
    char i0[96], i1[96];
    index_of(g, 0, i0, sizeof i0);
    index_of(g, 1, i1, sizeof i1);
    sbuf_printf(g->b, "        p1[%s] = p0[%s];\n", i1, i0);
    loop_close(g);
    return 0;
}

// ---- row groups ------------------------------------------------------------

typedef struct rowinfo {
    int level[FUSE_MAX_MEMBERS];
    bool full[FUSE_MAX_MEMBERS];
    bool need[FUSE_MAX_MEMBERS];
} rowinfo;

static bool is_reduce(const graph_node *n) { return op_kind(n->op) == OPK_REDUCE; }

static const graph_node *row_full(const cprog *p, const kgroup *k) {
    for (int m = 0; m < k->n; m++)
        if (is_reduce(&p->g->nodes[k->nodes[m]]))
            return &p->g->nodes[p->g->nodes[k->nodes[m]].src[0]];
    return NULL;
}

static void mark_need(cgen *g, rowinfo *ri, int m) {
    if (ri->need[m] || !ri->full[m])
        return;
    ri->need[m] = true;
    const graph_node *n = &g->p->g->nodes[g->k->nodes[m]];
    for (int s = 0; s < n->nsrc; s++)
        if (is_member_value(g, n->src[s]))
            mark_need(g, ri, member_index(g, n->src[s]));
}

static int emit_full_members(cgen *g, rowinfo *ri, int max_level) {
    for (int m = 0; m < g->k->n; m++)
        if (ri->need[m] && ri->full[m] && ri->level[m] <= max_level && emit_member(g, m) < 0)
            return -1;
    return 0;
}

static int row_threads(int64_t L) {
    int t = 32;
    while (t < 1024 && t < L)
        t *= 2;
    return t;
}

// emit_row's levels on a block: loop L strides the row over the block's
// threads, accumulating the level's reductions per thread, then combines
// them across the block (tc_block_sum / tc_block_max, which every thread
// leaves with the result); the row values of the level are computed by every
// thread and stored by thread 0; the last loop writes the stored full-row
// members.
static int emit_row(cgen *g) {
    cprog *p = g->p;
    kgroup *k = g->k;
    rowinfo ri;
    memset(&ri, 0, sizeof ri);
    const graph_node *full = row_full(p, k);
    if (!full)
        return compile_fail(p, "codegen_cuda: a row group without a reduction");
    int maxlev = 0;
    for (int m = 0; m < k->n; m++) {
        const graph_node *n = &p->g->nodes[k->nodes[m]];
        ri.full[m] = !is_reduce(n) && n->ndim == full->ndim &&
                     n->shape[n->ndim - 1] == full->shape[full->ndim - 1] &&
                     !(full->shape[full->ndim - 1] == 1);
        int lev = 0;
        for (int s = 0; s < n->nsrc; s++)
            if (is_member_value(g, n->src[s])) {
                int l = ri.level[member_index(g, n->src[s])];
                lev = l > lev ? l : lev;
            }
        ri.level[m] = is_reduce(n) ? lev + 1 : lev;
        if (ri.level[m] > maxlev)
            maxlev = ri.level[m];
    }
    if (collect_args(g, 0) < 0)
        return -1;
    set_iteration(g, full->ndim, full->shape);
    decl_args(g);
    sbuf *b = g->b;
    long long L = (long long)g->shape[g->nd - 1];
    long long rows = (long long)(shape_numel(g->nd, g->shape) / L);
    g->row_level = 1;
    sbuf_puts(b, "    __shared__ float tc_sh[32];\n");
    sbuf_printf(b, "    for (ix r = (ix)blockIdx.x; r < (ix)%lld; r += (ix)gridDim.x) {\n", rows);
    emit_row_offsets(g, "r");
    sbuf_puts(b, "        const ix j = 0;\n        (void)j;\n");
    for (int lev = 0; lev <= maxlev; lev++) {
        if (lev > 0) {
            memset(ri.need, 0, sizeof ri.need);
            for (int m = 0; m < k->n; m++) {
                const graph_node *n = &p->g->nodes[k->nodes[m]];
                if (!is_reduce(n) || ri.level[m] != lev)
                    continue;
                int s = member_index(g, n->src[0]);
                if (s >= 0)
                    mark_need(g, &ri, s);
                sbuf_printf(b, "        float acc%d = %s;\n", m,
                            n->op == OP_MAX ? "-INFINITY" : "0.0f");
            }
            sbuf_printf(
                b, "        for (ix j = (ix)threadIdx.x; j < (ix)%lld; j += (ix)blockDim.x) {\n",
                L);
            if (emit_full_members(g, &ri, lev - 1) < 0)
                return -1;
            for (int m = 0; m < k->n; m++) {
                const graph_node *n = &p->g->nodes[k->nodes[m]];
                if (!is_reduce(n) || ri.level[m] != lev)
                    continue;
                char x[128];
                operand(g, n->src[0], x, sizeof x);
                if (n->op == OP_MAX)
                    sbuf_printf(b, "            acc%d = tc_maximum(%s, acc%d);\n", m, x, m);
                else
                    sbuf_printf(b, "            acc%d += %s;\n", m, x);
            }
            sbuf_puts(b, "        }\n");
            for (int m = 0; m < k->n; m++) {
                const graph_node *n = &p->g->nodes[k->nodes[m]];
                if (is_reduce(n) && ri.level[m] == lev)
                    sbuf_printf(b, "        acc%d = %s(acc%d, tc_sh);\n", m,
                                n->op == OP_MAX ? "tc_block_max" : "tc_block_sum", m);
            }
        }
        for (int m = 0; m < k->n; m++) {
            const graph_node *n = &p->g->nodes[k->nodes[m]];
            if (ri.full[m] || ri.level[m] != lev)
                continue;
            if (is_reduce(n)) {
                if (n->op == OP_MEAN)
                    sbuf_printf(b, "        float v%d = acc%d / %lld.0f;\n", m, m, L);
                else
                    sbuf_printf(b, "        float v%d = acc%d;\n", m, m);
            } else if (emit_member(g, m) < 0) {
                return -1;
            }
            if (p->info[k->nodes[m]].store == CS_BUFFER) {
                int ai = compile_arg_of(k, k->nodes[m]);
                char idx[16], val[16];
                snprintf(idx, sizeof idx, "o%d", ai);
                snprintf(val, sizeof val, "v%d", m);
                sbuf_puts(b, "        if (threadIdx.x == 0)\n");
                store_stmt(g, "            ", ai, idx, val);
            }
        }
    }
    bool any_full_store = false;
    memset(ri.need, 0, sizeof ri.need);
    for (int m = 0; m < k->n; m++)
        if (ri.full[m] && p->info[k->nodes[m]].store == CS_BUFFER) {
            any_full_store = true;
            mark_need(g, &ri, m);
        }
    if (any_full_store) {
        sbuf_printf(
            b, "        for (ix j = (ix)threadIdx.x; j < (ix)%lld; j += (ix)blockDim.x) {\n", L);
        if (emit_full_members(g, &ri, maxlev) < 0)
            return -1;
        for (int m = 0; m < k->n; m++)
            if (ri.full[m] && p->info[k->nodes[m]].store == CS_BUFFER) {
                int ai = compile_arg_of(k, k->nodes[m]);
                char idx[96], val[16];
                index_of(g, ai, idx, sizeof idx);
                snprintf(val, sizeof val, "v%d", m);
                store_stmt(g, "            ", ai, idx, val);
            }
        sbuf_puts(b, "        }\n");
    }
    sbuf_puts(b, "    }\n");
    return 0;
}

// ---- GEMM and convolution: the library call is the runtime's ------------------

static int anchor_target(const cgen *g) {
    const kgroup *k = g->k;
    if (g->p->info[k->anchor].store == CS_BUFFER)
        return k->anchor;
    return k->nodes[k->n - 1];
}

static int emit_epilogue_body(cgen *g, int target) {
    int ai = compile_arg_of(g->k, target);
    char idx[96], ld[128];
    index_of(g, ai, idx, sizeof idx);
    load_expr(g, ai, idx, ld, sizeof ld);
    sbuf_printf(g->b, "        float v0 = %s;\n", ld);
    for (int m = 1; m < g->k->n; m++)
        if (emit_member(g, m) < 0)
            return -1;
    emit_stores(g, 1, g->k->n);
    return 0;
}

// The epilogue as an elementwise kernel over the anchor's output, slots 0, 1
// and 2 being the library call's operands and output. Only the args the
// epilogue touches take part in coalescing (the GEMM inputs have other shapes).
static int emit_epilogue(cgen *g) {
    cprog *p = g->p;
    kgroup *k = g->k;
    const graph_node *an = &p->g->nodes[k->anchor];
    int target = anchor_target(g);
    if (k->rows_in_place) // cuBLAS would write output rows over input rows it has yet to read
        return compile_fail(p, "codegen_cuda: a GEMM planned with its input inside its output "
                               "(plan with gemm_rows_in_place off for CUDA)");
    k->args[0] = an->src[0];
    k->args[1] = an->src[1];
    k->args[2] = target;
    k->nargs = 3;
    if (collect_args(g, 1) < 0)
        return -1;
    if (k->n == 1)
        return 0;
    set_iteration(g, an->ndim, an->shape);
    for (int a = 0; a < 2; a++) {
        g->used[a] = false;
        for (int m = 1; m < k->n; m++) {
            const graph_node *n = &p->g->nodes[k->nodes[m]];
            for (int s = 0; s < n->nsrc; s++)
                g->used[a] |= n->src[s] == k->args[a];
        }
    }
    coalesce(g);
    decl_args(g);
    loop_open(g);
    if (emit_epilogue_body(g, target) < 0)
        return -1;
    loop_close(g);
    return 0;
}

static int emit_extern(cgen *g) {
    cprog *p = g->p;
    kgroup *k = g->k;
    const graph_node *an = &p->g->nodes[k->anchor];
    k->nargs = 0;
    for (int s = 0; s < an->nsrc; s++)
        if (p->info[an->src[s]].store != CS_CONST)
            compile_arg_of(k, an->src[s]);
    compile_arg_of(k, k->anchor);
    return 0;
}

// Dropout, which the C generator leaves to the library kernel, is generated
// here: the library kernel takes its mask's key as a launch argument, which
// a captured graph would keep from the step it was recorded in, while this
// loop computes the key from the step in device memory (a.step) at every
// replay. The mask is op_rules.h's: the bit of element i of the output
// (its flat index, which the loop's i is: the output is contiguous and the
// loop walks its shape in order) under key mix(mix(stream + c) + t).
static int emit_dropout(cgen *g) {
    cprog *p = g->p;
    kgroup *k = g->k;
    const graph_node *n = &p->g->nodes[k->anchor];
    int x = n->src[0];
    k->nargs = 0;
    compile_arg_of(k, x);
    compile_arg_of(k, k->anchor);
    set_iteration(g, n->ndim, n->shape);
    coalesce(g);
    decl_args(g);
    double q = n->fa[0];
    uint32_t thr = !(q > 0) ? 0 : q >= 1 ? 1u << 24 : (uint32_t)(q * 16777216.0);
    char scale[48];
    compile_literal(scale, sizeof scale, 1.0 / (1.0 - q));
    sbuf_printf(g->b,
                "    const uint64_t key = tc_mix64(tc_mix64((uint64_t)%lldll + "
                "0x9e3779b97f4a7c15ull) + (*a.step ? *a.step : 1ull));\n",
                (long long)n->ia[0]);
    loop_open(g);
    char idx[96], ld[160], val[320];
    index_of(g, 0, idx, sizeof idx);
    load_expr(g, 0, idx, ld, sizeof ld);
    snprintf(val, sizeof val, "tc_dropout_keep(key, (uint64_t)i, %uu) ? %s * %s : 0.0f", thr, ld,
             scale);
    index_of(g, 1, idx, sizeof idx);
    store_stmt(g, "        ", 1, idx, val);
    loop_close(g);
    return 0;
}

// ---- in-place updates: the multi-tensor apply ----------------------------------

// Elements of one tensor a block updates: the grid's unit of work.
#define UPDATE_CHUNK 4096

static bool is_dropout_group(const cprog *p, const kgroup *k) {
    return k->kind == KG_EXTERN && p->g->nodes[k->anchor].op == OP_DROPOUT;
}

// Blocks of an update group: every non-empty member's chunks.
static int64_t update_blocks(const cprog *p, const kgroup *k) {
    int64_t nb = 0;
    for (int m = 0; m < k->n; m++)
        nb += (graph_node_numel(&p->g->nodes[k->nodes[m]]) + UPDATE_CHUNK - 1) / UPDATE_CHUNK;
    return nb;
}

// codegen_c.c's emit_update on the grid: a table with one row per tensor
// (its op, its operands' first slot, the grad scaler's slot, its size, its
// first block, its hyperparameters); block b finds its tensor by a binary
// search over the first blocks and updates one chunk of it, the threads
// striding the chunk. The operands are too many for tc_args: a.p[0] is a
// device array of the group's operand pointers (compile_group_operands'
// order) that the runtime fills once. The step t comes from device memory
// (a.step), so a captured step serves every step. The math is the C
// generator's in the same order of operations (the eager kernels' and
// PyTorch's AdamW and SGD); under the grad scaler a chunk reads found_inf
// and skips itself when it is set, inside the step, as on the CPU.
static int emit_update(cgen *g) {
    cprog *p = g->p;
    kgroup *k = g->k;
    sbuf *b = g->b;
    int rows = 0, slot = 0;
    int64_t first = 0;
    k->nargs = 0;
    sbuf_puts(b, "    static const tc_upd ut[] = {\n");
    for (int m = 0; m < k->n; m++) {
        const graph_node *n = &p->g->nodes[k->nodes[m]];
        int64_t numel = graph_node_numel(n);
        double h[5];
        int op = compile_update_row(n, h);
        if (numel > 0) {
            sbuf_printf(
                b, "        {%d, %d, %d, %lldll, %lldll, {%.17g, %.17g, %.17g, %.17g, %.17g}},\n",
                op, slot, graph_scaler_src(n), (long long)numel, (long long)first, h[0], h[1], h[2],
                h[3], h[4]);
            first += (numel + UPDATE_CHUNK - 1) / UPDATE_CHUNK;
            rows++;
        }
        slot += n->nsrc;
    }
    if (rows == 0) { // only empty tensors: nothing to do
        sbuf_puts(b, "        {-1, 0, -1, 0, 0, {0}},\n    };\n    (void)ut;\n    (void)a;\n");
        return 0;
    }
    sbuf_puts(b, "    };\n");
    sbuf_printf(b,
                "    char *const *pp = (char *const *)a.p[0];\n"
                "    const uint64_t t0 = *a.step ? *a.step : 1ull;\n"
                "    for (long long blk = blockIdx.x; blk < %lldll; blk += gridDim.x) {\n"
                "        int lo = 0, hi = %d;\n"
                "        while (lo < hi) { // the last row whose first block is at or before blk\n"
                "            int mid = (lo + hi + 1) >> 1;\n"
                "            if (ut[mid].b0 <= blk)\n"
                "                lo = mid;\n"
                "            else\n"
                "                hi = mid - 1;\n"
                "        }\n"
                "        const tc_upd *q = &ut[lo];\n"
                "        const long long e0 = (blk - q->b0) * %dll;\n"
                "        const long long e1 = e0 + %dll < q->n ? e0 + %dll : q->n;\n",
                (long long)first, rows - 1, UPDATE_CHUNK, UPDATE_CHUNK, UPDATE_CHUNK);
    sbuf_puts(
        b,
        "        float *w = (float *)pp[q->arg];\n"
        "        const float *gr = (const float *)pp[q->arg + 1];\n"
        "        uint64_t t = t0;\n"
        "        float inv = 1.0f; // the gradient's factor\n"
        "        if (q->amp >= 0) { // grad scaler: found_inf skips, 1/scale, own step count\n"
        "            if (*(const float *)pp[q->arg + q->amp + 1] != 0.0f)\n"
        "                continue;\n"
        "            inv = (float)(1.0 / *(const float *)pp[q->arg + q->amp]);\n"
        "            t = (uint64_t)*(const float *)pp[q->arg + q->amp + 2] + 1;\n"
        "        }\n"
        "        if (q->op == 0) { // AdamW: decay, moments, bias-corrected step\n"
        "            float *m = (float *)pp[q->arg + 2], *v = (float *)pp[q->arg + 3];\n"
        "            const double lr = q->h[0], b1 = q->h[1], b2 = q->h[2];\n"
        "            const float decay = (float)(1 - lr * q->h[4]), eps = (float)q->h[3];\n"
        "            const float step = (float)(lr / (1 - tc_powi(b1, t)));\n"
        "            const float inv_bc2 = (float)(1 / sqrt(1 - tc_powi(b2, t)));\n"
        "            const float fb1 = (float)b1, fb2 = (float)b2;\n"
        "            const float ob1 = (float)(1 - b1), ob2 = (float)(1 - b2);\n"
        "            for (long long i = e0 + threadIdx.x; i < e1; i += blockDim.x) {\n"
        "                float gi_ = gr[i] * inv;\n"
        "                float mi = fb1 * m[i] + ob1 * gi_, vi = fb2 * v[i] + ob2 * gi_ * gi_;\n"
        "                m[i] = mi;\n"
        "                v[i] = vi;\n"
        "                w[i] = w[i] * decay - step * mi / (sqrtf(vi) * inv_bc2 + eps);\n"
        "            }\n"
        "        } else if (q->op == 1) { // SGD with momentum (dampening, nesterov)\n"
        "            float *buf = (float *)pp[q->arg + 2];\n"
        "            const float lr = (float)q->h[0], mom = (float)q->h[1], wd = (float)q->h[2];\n"
        "            const int first = t == 1, nesterov = q->h[4] != 0;\n"
        "            const float keep = first ? 0.0f : mom;\n"
        "            const float take = first ? 1.0f : 1.0f - (float)q->h[3];\n"
        "            for (long long i = e0 + threadIdx.x; i < e1; i += blockDim.x) {\n"
        "                float d = gr[i] * inv + wd * w[i];\n"
        "                float bi = keep * buf[i] + take * d;\n"
        "                buf[i] = bi;\n"
        "                w[i] -= lr * (nesterov ? d + mom * bi : bi);\n"
        "            }\n"
        "        } else if (q->op == 2) { // SGD without momentum\n"
        "            const float lr = (float)q->h[0], wd = (float)q->h[2];\n"
        "            for (long long i = e0 + threadIdx.x; i < e1; i += blockDim.x)\n"
        "                w[i] -= lr * (gr[i] * inv + wd * w[i]);\n"
        "        } else { // running statistic: (1 - momentum) buf + momentum * factor * stat\n"
        "            const float keep = (float)(1 - q->h[0]), take = (float)(q->h[0] * q->h[1]);\n"
        "            for (long long i = e0 + threadIdx.x; i < e1; i += blockDim.x)\n"
        "                w[i] = keep * w[i] + take * gr[i];\n"
        "        }\n"
        "    }\n");
    return 0;
}

// Fills the group's operands and writes its kernel body (empty: no kernel).
static int emit_group(cprog *p, kgroup *k, sbuf *b) {
    cgen g = {.p = p, .k = k, .b = b};
    switch (k->kind) {
    case KG_POINTWISE: return emit_pointwise(&g);
    case KG_ROWREDUCE: return emit_row(&g);
    case KG_GEMM:
    case KG_CONV: return emit_epilogue(&g);
    case KG_COPY: return emit_copy(&g);
    case KG_UPDATE: return emit_update(&g);
    default: return is_dropout_group(p, k) ? emit_dropout(&g) : emit_extern(&g);
    }
}

// ---- launches ----------------------------------------------------------------

static unsigned grid_for(int64_t n, int64_t per) {
    int64_t blocks = (n + per - 1) / per;
    if (blocks < 1)
        blocks = 1;
    return (unsigned)(blocks < MAX_GRID ? blocks : MAX_GRID);
}

// codegen_c.c's gemm_ld
static void gemm_ld(int64_t rows, int64_t cols, int64_t rs, int64_t cs, int *trans, int64_t *ld) {
    if (cs == 1 || cols == 1) {
        *trans = 0;
        *ld = rows > 1 && rs > cols ? rs : cols;
    } else {
        *trans = 1;
        *ld = cols > 1 && cs > rows ? cs : rows;
    }
}

// codegen_c.c's emit_gemm, as data: operand layouts, batch dims and folding.
static void gemm_desc(const cprog *p, const kgroup *k, cuda_gemm_desc *d) {
    const graph_node *an = &p->g->nodes[k->anchor];
    int a = an->src[0], w = an->src[1];
    const clayout *la = &p->info[a].lay, *lw = &p->info[w].lay;
    int nd = an->ndim, nb = nd >= 2 ? nd - 2 : 0, ad = la->ndim;
    memset(d, 0, sizeof *d);
    int64_t M = nd >= 2 ? an->shape[nd - 2] : 1, N = an->shape[nd - 1];
    int64_t K = p->g->nodes[a].shape[p->g->nodes[a].ndim - 1];
    int64_t ars = ad >= 2 ? la->stride[ad - 2] : 0, acs = la->stride[ad - 1], brs, bcs;
    for (int i = 0; i < nb; i++) {
        d->bshape[i] = an->shape[i];
        int j = i - (nb - (ad - 2));
        d->sa[i] = (j < 0 || la->shape[j] == 1) ? 0 : la->stride[j];
    }
    if (an->op == OP_LINEAR) { // B(k, n) = W[n, k]
        brs = lw->stride[1];
        bcs = lw->stride[0];
    } else {
        int bd = lw->ndim;
        brs = lw->stride[bd - 2];
        bcs = lw->stride[bd - 1];
        for (int i = 0; i < nb; i++) {
            int j = i - (nb - (bd - 2));
            d->sb[i] = (j < 0 || lw->shape[j] == 1) ? 0 : lw->stride[j];
        }
    }
    while (nb > 0 && d->sb[nb - 1] == 0 && d->sa[nb - 1] == ars * M && ad >= 2) {
        M *= d->bshape[nb - 1];
        nb--;
    }
    d->nb = nb;
    d->M = M;
    d->N = N;
    d->K = K;
    gemm_ld(M, K, ars, acs, &d->ta, &d->lda);
    gemm_ld(K, N, brs, bcs, &d->tb, &d->ldb);
}

int compile_cuda_launch(cprog *p, int gi, cuda_launch *out) {
    if (gi < 0 || gi >= p->ngroups)
        return compile_fail(p, "compile_cuda_launch: no group %d", gi);
    const kgroup *k = &p->groups[gi];
    memset(out, 0, sizeof *out);
    out->kernel = k->kernel;
    out->block = PW_BLOCK;
    const graph_node *n = &p->g->nodes[k->anchor >= 0 ? k->anchor : k->nodes[0]];
    int64_t count = graph_node_numel(n);
    switch (k->kind) {
    case KG_ROWREDUCE: {
        const graph_node *full = row_full(p, k);
        if (!full)
            return compile_fail(p, "codegen_cuda: a row group without a reduction");
        int64_t L = full->ndim ? full->shape[full->ndim - 1] : 1;
        out->block = (unsigned)row_threads(L);
        out->grid = grid_for(graph_node_numel(full) / (L ? L : 1), 1);
        return 0;
    }
    case KG_GEMM:
        out->lib = CUDA_LIB_GEMM;
        gemm_desc(p, k, &out->gemm);
        break;
    case KG_CONV: out->lib = CUDA_LIB_CONV; break;
    case KG_EXTERN: out->lib = is_dropout_group(p, k) ? CUDA_LIB_NONE : CUDA_LIB_EXTERN; break;
    case KG_UPDATE:
        out->table = true;
        out->grid = grid_for(update_blocks(p, k), 1);
        return 0;
    default: break;
    }
    out->grid = grid_for(count, PW_BLOCK * PW_ITEMS);
    return 0;
}

// ---- the translation unit ------------------------------------------------------

static const char *kind_name(kg_kind k) {
    static const char *names[] = {"pointwise", "row",  "gemm epilogue", "conv epilogue",
                                  "extern",    "copy", "update"};
    return names[k];
}

// What training kernels use, after the prelude: the update table's row and
// Adam's integer power (the derivatives are core/pointwise.h's).
static const char train_text[] =
    "struct tc_upd {  // one tensor of an update kernel\n"
    "    int op, arg;  // kind; slot of its first operand in the pointer table\n"
    "    int amp;      // grad scaler: its first operand's slot after arg, or -1\n"
    "    long long n;  // elements\n"
    "    long long b0; // its first block\n"
    "    double h[5];  // hyperparameters\n"
    "};\n"
    "TC_DEV double tc_powi(double x, uint64_t n) {\n"
    "    double r = 1.0;\n"
    "    for (; n; n >>= 1, x *= x)\n"
    "        if (n & 1)\n"
    "            r *= x;\n"
    "    return r;\n"
    "}\n";

char *compile_codegen_cuda(cprog *p) {
    for (int v = 0; v < p->g->n; v++)
        if (p->g->nodes[v].dtype == DT_BF16) {
            compile_fail(p, "codegen_cuda: bf16 is not supported by the CUDA backend (f32 and "
                            "f16 are; run --amp-dtype bf16 on the CPU)");
            return NULL;
        }
    sbuf out = {0}, body = {0}, kern = {0};
    char **texts = calloc((size_t)p->ngroups + 1, sizeof *texts);
    int nk = 0;
    if (!texts) {
        compile_fail(p, "out of memory generating CUDA");
        return NULL;
    }
    sbuf_printf(&out, "// Generated by tcbench for model '%s' (CUDA, NVRTC): %d kernel groups.\n",
                p->m->name, p->ngroups);
    const char *pre = cuda_prelude_text, *guard = strstr(pre, "#pragma once\n");
    if (guard) {
        sbuf_printf(&out, "%.*s", (int)(guard - pre), pre);
        pre = guard + strlen("#pragma once\n");
    }
    sbuf_puts(&out, pre);
    // the pointwise formulas, in the prelude's dialect, less their guard
    const char *pw = compile_prelude_pointwise, *pg = strstr(pw, "#pragma once\n");
    sbuf_puts(&out, pg ? pg + strlen("#pragma once\n") : pw);
    sbuf_puts(&out, train_text);
    sbuf_printf(&out,
                "\nstruct tc_args {\n    char *p[%d];\n    const uint64_t *step; // the training "
                "step t (0 counts as 1)\n};\n",
                KG_MAX_ARGS);
    for (int gi = 0; gi < p->ngroups; gi++) {
        kgroup *k = &p->groups[gi];
        sbuf_reset(&body);
        if (emit_group(p, k, &body) < 0 || body.oom)
            goto fail;
        k->kernel = -1;
        if (!body.s || !body.s[0])
            continue;
        cuda_launch l;
        if (compile_cuda_launch(p, gi, &l) < 0)
            goto fail;
        sbuf_reset(&kern);
        sbuf_printf(&kern, "__launch_bounds__(%u) TKNAME(const tc_args a) {\n%s}\n", l.block,
                    body.s);
        if (kern.oom)
            goto fail;
        int found = -1;
        for (int i = 0; i < nk && found < 0; i++)
            if (strcmp(texts[i], kern.s) == 0)
                found = i;
        if (found < 0) {
            if (!(texts[nk] = strdup(kern.s)))
                goto fail;
            // the name goes in after the comparison: the text is the key
            const char *at = strstr(kern.s, "TKNAME");
            sbuf_printf(&out, "\n// %s: %s\nextern \"C\" __global__ void %.*stk%d%s",
                        kind_name(k->kind),
                        op_name(p->g->nodes[k->anchor >= 0 ? k->anchor : k->nodes[0]].op),
                        (int)(at - kern.s), kern.s, nk, at + strlen("TKNAME"));
            found = nk++;
        }
        k->kernel = found;
    }
    sbuf_puts(&out, "\n// launches: group, kernel, library call first, grid x block\n");
    for (int gi = 0; gi < p->ngroups; gi++) {
        cuda_launch l;
        if (compile_cuda_launch(p, gi, &l) < 0)
            goto fail;
        static const char *libs[] = {"-", "gemm", "conv", "extern"};
        if (l.kernel >= 0)
            sbuf_printf(&out, "//   %d tk%d %s %u x %u\n", gi, l.kernel, libs[l.lib], l.grid,
                        l.block);
        else
            sbuf_printf(&out, "//   %d - %s\n", gi, libs[l.lib]);
    }
    for (int i = 0; i < nk; i++)
        free(texts[i]);
    free(texts);
    free(body.s);
    free(kern.s);
    if (out.oom) {
        free(out.s);
        compile_fail(p, "out of memory generating CUDA");
        return NULL;
    }
    return out.s;
fail:
    for (int i = 0; i < nk; i++)
        free(texts[i]);
    free(texts);
    free(body.s);
    free(kern.s);
    free(out.s);
    if (!p->err[0])
        compile_fail(p, "out of memory generating CUDA");
    return NULL;
}
