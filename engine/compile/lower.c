// The lowering the C and CUDA generators share (lower.h): everything here
// writes the same text for both, but for the words and hooks of the dialect.
#include "lower.h"

#include <stdlib.h>
#include <string.h>

const char *lower_ctype(const lgen *g, enum dtype t) {
    switch (t) {
    case DT_F32: return "float";
    case DT_I32: return "int32_t";
    case DT_I64: return "int64_t";
    case DT_BOOL: return g->d->bool_type;
    default: return "uint16_t"; // f16 and bf16 storage; tc_h2f / tc_b2f convert
    }
}

const char *lower_half_tag(enum dtype t) { return t == DT_BF16 ? "b" : "h"; }

static enum dtype arg_dtype(const lgen *g, int ai) { return g->p->g->nodes[g->k->args[ai]].dtype; }

bool lower_arg_is_half(const lgen *g, int ai) { return dtype_is_half(arg_dtype(g, ai)); }

// A 16-bit operand read or written through a tile in this inner loop.
static bool tiled(const lgen *g, int ai) {
    return g->inner && lower_arg_is_half(g, ai) && !g->hoisted[ai] && g->st[ai][g->nd - 1] == 1;
}

int lower_member_index(const lgen *g, int v) {
    for (int i = 0; i < g->k->n; i++)
        if (g->k->nodes[i] == v)
            return i;
    return -1;
}

bool lower_is_member_value(const lgen *g, int v) {
    const cnode *c = &g->p->info[v];
    return c->group == g->p->info[g->k->nodes[0]].group && c->store != CS_VIEW &&
           c->store != CS_SOURCE && c->store != CS_RECOMPUTE;
}

void lower_index(const lgen *g, int ai, char *buf, size_t cap) {
    long long s = (long long)g->st[ai][g->nd - 1];
    const char *cast = g->d->index_cast;
    if (g->row_level) {
        if (s == 0 || s == 1)
            snprintf(buf, cap, s == 0 ? "o%d" : "o%d + j", ai);
        else
            snprintf(buf, cap, "o%d + j * %s%lld", ai, cast, s);
    } else {
        if (s == 0 || s == 1)
            snprintf(buf, cap, s == 0 ? "0" : "j");
        else
            snprintf(buf, cap, "j * %s%lld", cast, s);
    }
}

void lower_load(lgen *g, int ai, char *buf, size_t cap) {
    char idx[96];
    lower_index(g, ai, idx, sizeof idx);
    if (tiled(g, ai)) {
        g->tile_read[ai] = true;
        snprintf(buf, cap, "s%d[j - jt]", ai);
    } else if (lower_arg_is_half(g, ai)) {
        snprintf(buf, cap, "tc_%s2f(p%d[%s])", lower_half_tag(arg_dtype(g, ai)), ai, idx);
    } else if (arg_dtype(g, ai) == DT_BOOL) {
        snprintf(buf, cap, "(p%d[%s] != 0)", ai, idx);
    } else {
        snprintf(buf, cap, "p%d[%s]", ai, idx);
    }
}

void lower_store(lgen *g, const char *indent, int ai, const char *idx, const char *val) {
    if (tiled(g, ai)) {
        g->tile_write[ai] = true;
        sbuf_printf(g->b, "%ss%d[j - jt] = %s;\n", indent, ai, val);
    } else if (lower_arg_is_half(g, ai)) {
        sbuf_printf(g->b, "%sp%d[%s] = tc_f2%s(%s);\n", indent, ai, idx,
                    lower_half_tag(arg_dtype(g, ai)), val);
    } else {
        sbuf_printf(g->b, "%sp%d[%s] = %s;\n", indent, ai, idx, val);
    }
}

static void recompute_expr(lgen *g, int v, char *buf, size_t cap);

void lower_operand(lgen *g, int v, char *buf, size_t cap) {
    const cnode *c = &g->p->info[v];
    if (c->store == CS_CONST) {
        compile_literal(buf, cap, g->p->g->nodes[v].fa[0]);
        return;
    }
    if (c->store == CS_RECOMPUTE) {
        recompute_expr(g, v, buf, cap);
        return;
    }
    if (lower_is_member_value(g, v)) {
        snprintf(buf, cap, "v%d", lower_member_index(g, v));
        return;
    }
    int ai = compile_arg_of(g->k, v);
    if (g->hoisted[ai])
        snprintf(buf, cap, arg_dtype(g, ai) == DT_BOOL ? "(h%d != 0)" : "h%d", ai);
    else
        lower_load(g, ai, buf, cap);
}

// Does a member of the group read v?
static bool read_in_group(const lgen *g, int v) {
    for (int m = 0; m < g->k->n; m++) {
        const graph_node *w = &g->p->g->nodes[g->k->nodes[m]];
        for (int s = 0; s < w->nsrc; s++)
            if (w->src[s] == v)
                return true;
    }
    return false;
}

// The expression of an elementwise op over operands named x0, x1, x2 (x0 an
// int for where's condition). NULL for ops that are not elementwise.
static const char *op_template(const lgen *g, const graph_node *n, char *buf, size_t cap) {
    if (compile_formula_expr(n, buf, cap)) // core/pointwise.h's
        return buf;
    switch (n->op) {
    case OP_CAST:
        // between float dtypes (fuse.c): values are f32 and a store rounds,
        // but a narrowing cast read by another member rounds here, as eager's
        // kernel would have stored it
        if (dtype_is_half(n->dtype) && g->p->g->nodes[n->src[0]].dtype != n->dtype &&
            read_in_group(g, (int)(n - g->p->g->nodes))) {
            const char *t = lower_half_tag(n->dtype);
            snprintf(buf, cap, "tc_%s2f(tc_f2%s(x0))", t, t);
            return buf;
        }
        return "x0";
    case OP_CONTIGUOUS: return "x0";
    case OP_ADD: return "x0 + x1";
    case OP_SUB: return "x0 - x1";
    case OP_MUL: return "x0 * x1";
    case OP_DIV: return "x0 / x1";
    case OP_MAXIMUM: return g->d->maximum;
    case OP_WHERE: return "x0 ? x1 : x2";
    case OP_GE: return "x0 >= x1 ? 1.0f : 0.0f";
    default: return NULL;
    }
}

static const char *operand_type(const graph_node *n, int s) {
    return s == 0 && n->op == OP_WHERE ? "int" : "float";
}

// A recomputed node (CS_RECOMPUTE: a small per-channel value of sources,
// see fuse.c) as one expression that evaluates each operand once: small
// values such as batch norm's rsqrt(var + eps) cost less to recompute in
// every kernel that reads them than a kernel of their own.
static void recompute_expr(lgen *g, int v, char *buf, size_t cap) {
    const graph_node *n = &g->p->g->nodes[v];
    char x[3][LOWER_EXPR_CAP], tb[160];
    for (int s = 0; s < n->nsrc && s < 3; s++)
        lower_operand(g, n->src[s], x[s], sizeof x[s]);
    const char *t = op_template(g, n, tb, sizeof tb);
    size_t o = (size_t)snprintf(buf, cap, "%s", g->d->recompute_open);
    for (int s = 0; s < n->nsrc && s < 3 && o < cap; s++)
        o += (size_t)snprintf(buf + o, cap - o, "%s x%d = %s; ", operand_type(n, s), s, x[s]);
    if (!t) // fuse.c recomputes elementwise ops only; a new one needs its template
        compile_fail(g->p, "%s: no expression for recomputed %s", g->d->name, op_name(n->op));
    if (o < cap)
        snprintf(buf + o, cap - o, g->d->recompute_close, t ? t : "0.0f");
}

int lower_member(lgen *g, int m) {
    int v = g->k->nodes[m];
    const graph_node *n = &g->p->g->nodes[v];
    char x[3][LOWER_EXPR_CAP], tb[160];
    for (int s = 0; s < n->nsrc && s < 3; s++)
        lower_operand(g, n->src[s], x[s], sizeof x[s]);
    sbuf *b = g->b;
    sbuf_printf(b, "        float v%d;\n        {\n", m);
    for (int s = 0; s < n->nsrc && s < 3; s++)
        sbuf_printf(b, "            %s x%d = %s;\n", operand_type(n, s), s, x[s]);
    const char *e = op_template(g, n, tb, sizeof tb);
    if (!e)
        return compile_fail(g->p, "%s: %s cannot be fused", g->d->name, op_name(n->op));
    sbuf_printf(b, "            v%d = %s;\n        }\n", m, e);
    return 0;
}

void lower_stores(lgen *g, int m0, int m1) {
    for (int m = m0; m < m1; m++) {
        int v = g->k->nodes[m];
        if (g->p->info[v].store != CS_BUFFER)
            continue;
        int ai = compile_arg_of(g->k, v);
        char idx[96], val[16];
        lower_index(g, ai, idx, sizeof idx);
        snprintf(val, sizeof val, "v%d", m);
        lower_store(g, "        ", ai, idx, val);
    }
}

void lower_set_iteration(lgen *g, int nd, const int64_t *shape) {
    g->nd = nd > 0 ? nd : 1;
    for (int i = 0; i < g->nd; i++)
        g->shape[i] = nd > 0 ? shape[i] : 1;
    for (int a = 0; a < g->k->nargs; a++) {
        compile_eff_strides(g->p, g->k->args[a], g->nd, g->shape, g->st[a]);
        g->used[a] = true;
    }
}

void lower_coalesce(lgen *g) {
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

// Iterate in the memory order of the first buffer the loop stores (a
// channels-last output walks C innermost), so its stores stay unit-stride
// and the inner loop vectorizes; elementwise loops may run in any order.
void lower_order_by_store(lgen *g, int m0) {
    int o = -1;
    for (int m = m0; m < g->k->n && o < 0; m++)
        if (g->p->info[g->k->nodes[m]].store == CS_BUFFER)
            o = compile_arg_of(g->k, g->k->nodes[m]);
    if (o < 0)
        return;
    for (int i = 1; i < g->nd; i++) // insertion sort, largest stride first, stable
        for (int j = i; j > 0 && g->st[o][j - 1] < g->st[o][j]; j--) {
            int64_t t = g->shape[j];
            g->shape[j] = g->shape[j - 1];
            g->shape[j - 1] = t;
            for (int a = 0; a < g->k->nargs; a++) {
                t = g->st[a][j];
                g->st[a][j] = g->st[a][j - 1];
                g->st[a][j - 1] = t;
            }
        }
}

// "    <type> *p<a> = (<type> *)<ptr>" plus what follows (a line's end).
static void decl_pointer(lgen *g, const char *konst, const char *type, int a, const char *rest) {
    char ptr[32];
    snprintf(ptr, sizeof ptr, g->d->arg_ptr, a);
    sbuf_printf(g->b, "    %s%s *p%d = (%s%s *)%s%s", konst, type, a, konst, type, ptr, rest);
}

void lower_decl_args(lgen *g) {
    if (g->d->decl_head)
        g->d->decl_head(g);
    for (int a = 0; a < g->k->nargs; a++)
        decl_pointer(g, "", lower_ctype(g, arg_dtype(g, a)), a, ";\n");
}

void lower_row_offsets(lgen *g, const char *r) {
    sbuf *b = g->b;
    const char *it = g->d->index_type, *cast = g->d->index_cast, *dig = g->d->row_digit;
    for (int a = 0; a < g->k->nargs; a++)
        sbuf_printf(b, "        %s o%d = 0;\n", it, a);
    sbuf_printf(b, "        %s q = %s;\n", it, r);
    for (int d = g->nd - 2; d >= 0; d--) {
        long long n = (long long)g->shape[d];
        sbuf_printf(b, "        {\n            %s %s = q %% %s%lld;\n            q /= %s%lld;\n",
                    it, dig, cast, n, cast, n);
        for (int a = 0; a < g->k->nargs; a++)
            if (g->st[a][d])
                sbuf_printf(b, "            o%d += %s * %s%lld;\n", a, dig, cast,
                            (long long)g->st[a][d]);
        sbuf_puts(b, "        }\n");
    }
    sbuf_puts(b, "        (void)q;\n");
    if (g->d->row_done)
        g->d->row_done(g);
}

// Register node v as an operand (a recomputed node: its own operands).
static int collect_operand(lgen *g, int v) {
    const cnode *c = &g->p->info[v];
    if (c->store == CS_RECOMPUTE) {
        const graph_node *n = &g->p->g->nodes[v];
        for (int s = 0; s < n->nsrc; s++)
            if (collect_operand(g, n->src[s]) < 0)
                return -1;
        return 0;
    }
    if (lower_is_member_value(g, v) || c->store == CS_CONST || compile_arg_of(g->k, v) >= 0)
        return 0;
    return compile_fail(g->p, "%s: a kernel has more than %d operands", g->d->name, KG_MAX_ARGS);
}

// Every operand the group's loops read or write, in a fixed order.
int lower_collect_args(lgen *g, int first_member) {
    kgroup *k = g->k;
    for (int m = first_member; m < k->n; m++) {
        const graph_node *n = &g->p->g->nodes[k->nodes[m]];
        for (int s = 0; s < n->nsrc; s++)
            if (collect_operand(g, n->src[s]) < 0)
                return -1;
    }
    for (int m = first_member; m < k->n; m++)
        if (g->p->info[k->nodes[m]].store == CS_BUFFER && compile_arg_of(k, k->nodes[m]) < 0)
            return compile_fail(g->p, "%s: a kernel has more than %d operands", g->d->name,
                                KG_MAX_ARGS);
    return 0;
}

int lower_pointwise(lgen *g) {
    const graph_node *n0 = &g->p->g->nodes[g->k->nodes[0]];
    if (lower_collect_args(g, 0) < 0)
        return -1;
    lower_set_iteration(g, n0->ndim, n0->shape);
    if (g->d->order_by_store)
        lower_order_by_store(g, 0);
    lower_coalesce(g);
    lower_decl_args(g);
    g->d->loop_open(g);
    for (int m = 0; m < g->k->n; m++)
        if (lower_member(g, m) < 0)
            return -1;
    lower_stores(g, 0, g->k->n);
    g->d->loop_close(g);
    return 0;
}

// A view strides cannot express (or a GEMM cannot read): copied in the
// order of its elements into a contiguous buffer. A reshape copies its
// source in row-major order.
int lower_copy(lgen *g) {
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
        return compile_fail(p, "%s: no layout for %s", g->d->name, op_name(n->op));
    }
    // the source pointer is the storage base of src; its strides are `in`
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
    // the output plain, or channels-last where layout.c made it so (not a
    // reshape's: its iteration is its source's shape)
    int64_t cst[TENSOR_MAX_DIMS];
    tensor_strides_contiguous(g->nd, g->shape, cst);
    bool cl = n->op != OP_RESHAPE && in.ndim == 4 && compile_channels_last(p, v);
    for (int i = 0; i < g->nd; i++)
        g->st[1][i] = cl ? (g->shape[i] == 1 ? 0 : p->info[v].lay.stride[i]) : cst[i];
    g->used[0] = g->used[1] = true;
    if (cl && g->d->order_by_store) // store unit-stride: walk C innermost
        lower_order_by_store(g, 0);
    lower_coalesce(g);
    if (g->d->decl_head)
        g->d->decl_head(g);
    const char *t = lower_ctype(g, n->dtype);
    char off[48];
    snprintf(off, sizeof off, " + %lld;\n", (long long)in.offset);
    decl_pointer(g, "const ", t, 0, off);
    decl_pointer(g, "", t, 1, ";\n");
    g->d->loop_open(g);
    char i0[96], i1[96];
    lower_index(g, 0, i0, sizeof i0);
    lower_index(g, 1, i1, sizeof i1);
    sbuf_printf(g->b, "        p1[%s] = p0[%s];\n", i1, i0);
    g->d->loop_close(g);
    return 0;
}

// ---- row groups: reductions over the last axis ---------------------------

typedef struct rowinfo {
    int level[FUSE_MAX_MEMBERS]; // see lower_row
    bool full[FUSE_MAX_MEMBERS]; // full row shape (else one value per row)
    bool need[FUSE_MAX_MEMBERS];
} rowinfo;

static bool is_reduce(const graph_node *n) { return op_kind(n->op) == OPK_REDUCE; }

const graph_node *lower_row_full(const cprog *p, const kgroup *k) {
    for (int m = 0; m < k->n; m++)
        if (is_reduce(&p->g->nodes[k->nodes[m]]))
            return &p->g->nodes[p->g->nodes[k->nodes[m]].src[0]];
    return NULL;
}

static void mark_need(const lgen *g, rowinfo *ri, int m) {
    if (ri->need[m] || !ri->full[m])
        return;
    ri->need[m] = true;
    const graph_node *n = &g->p->g->nodes[g->k->nodes[m]];
    for (int s = 0; s < n->nsrc; s++)
        if (lower_is_member_value(g, n->src[s]))
            mark_need(g, ri, lower_member_index(g, n->src[s]));
}

static int emit_full_members(lgen *g, const rowinfo *ri, int max_level) {
    for (int m = 0; m < g->k->n; m++)
        if (ri->need[m] && ri->full[m] && ri->level[m] <= max_level && lower_member(g, m) < 0)
            return -1;
    return 0;
}

// Loop L over the row accumulates the reductions of level lev.
static int emit_reductions(lgen *g, rowinfo *ri, int lev, int64_t L) {
    const kgroup *k = g->k;
    const graph_node *nodes = g->p->g->nodes;
    int red[FUSE_MAX_MEMBERS], nred = 0;
    memset(ri->need, 0, sizeof ri->need);
    for (int m = 0; m < k->n; m++) {
        const graph_node *n = &nodes[k->nodes[m]];
        if (!is_reduce(n) || ri->level[m] != lev)
            continue;
        int s = lower_member_index(g, n->src[0]);
        if (s >= 0)
            mark_need(g, ri, s);
        sbuf_printf(g->b, "        float acc%d = %s;\n", m, n->op == OP_MAX ? "-INFINITY" : "0.0f");
        if (n->op == OP_MAX && g->d->max_nan_flag)
            sbuf_printf(g->b, "        int nan%d = 0;\n", m);
        red[nred++] = m;
    }
    g->d->row_loop_open(g, L);
    if (emit_full_members(g, ri, lev - 1) < 0)
        return -1;
    for (int i = 0; i < nred; i++) {
        int m = red[i];
        const graph_node *n = &nodes[k->nodes[m]];
        char x[LOWER_EXPR_CAP];
        lower_operand(g, n->src[0], x, sizeof x);
        if (n->op != OP_MAX)
            sbuf_printf(g->b, "            acc%d += %s;\n", m, x);
        else if (g->d->max_nan_flag) // NaN propagates, as eager's max
            sbuf_printf(g->b,
                        "            { float x = %s; acc%d = acc%d > x ? acc%d : x; "
                        "nan%d |= x != x; }\n",
                        x, m, m, m, m);
        else
            sbuf_printf(g->b, "            acc%d = tc_maximum(%s, acc%d);\n", m, x, m);
    }
    g->d->row_loop_close(g, L, red, nred);
    return 0;
}

// The values of level lev that are one a row, in order, and their stores.
static int emit_row_values(lgen *g, const rowinfo *ri, int lev, int64_t L) {
    const kgroup *k = g->k;
    for (int m = 0; m < k->n; m++) {
        const graph_node *n = &g->p->g->nodes[k->nodes[m]];
        if (ri->full[m] || ri->level[m] != lev)
            continue;
        if (!is_reduce(n)) {
            if (lower_member(g, m) < 0)
                return -1;
        } else if (n->op == OP_MEAN) {
            sbuf_printf(g->b, "        float v%d = acc%d / %lld.0f;\n", m, m, (long long)L);
        } else if (n->op == OP_MAX && g->d->max_nan_flag) {
            sbuf_printf(g->b, "        float v%d = nan%d ? NAN : acc%d;\n", m, m, m);
        } else {
            sbuf_printf(g->b, "        float v%d = acc%d;\n", m, m);
        }
        if (g->p->info[k->nodes[m]].store == CS_BUFFER) {
            int ai = compile_arg_of(g->k, k->nodes[m]);
            char idx[16], val[16];
            snprintf(idx, sizeof idx, "o%d", ai);
            snprintf(val, sizeof val, "v%d", m);
            if (g->d->row_store_guard)
                sbuf_puts(g->b, g->d->row_store_guard);
            lower_store(g, g->d->row_store_guard ? "            " : "        ", ai, idx, val);
        }
    }
    return 0;
}

// Levels: a reduction is one more than the deepest reduction its input
// needs; other members take the deepest of their inputs. Loop L (1..K)
// accumulates the reductions of level L from full-row values of lower
// levels; row values of level L follow it; a last loop writes the stored
// full-row members. Each loop recomputes the cheap elementwise values it
// needs rather than storing them.
int lower_row(lgen *g) {
    cprog *p = g->p;
    kgroup *k = g->k;
    rowinfo ri;
    memset(&ri, 0, sizeof ri);
    const graph_node *full = lower_row_full(p, k);
    if (!full)
        return compile_fail(p, "%s: a row group without a reduction", g->d->name);
    int maxlev = 0;
    for (int m = 0; m < k->n; m++) {
        const graph_node *n = &p->g->nodes[k->nodes[m]];
        ri.full[m] = !is_reduce(n) && n->ndim == full->ndim &&
                     n->shape[n->ndim - 1] == full->shape[full->ndim - 1] &&
                     !(full->shape[full->ndim - 1] == 1);
        int lev = 0;
        for (int s = 0; s < n->nsrc; s++)
            if (lower_is_member_value(g, n->src[s])) {
                int l = ri.level[lower_member_index(g, n->src[s])];
                lev = l > lev ? l : lev;
            }
        ri.level[m] = is_reduce(n) ? lev + 1 : lev;
        if (ri.level[m] > maxlev)
            maxlev = ri.level[m];
    }
    if (lower_collect_args(g, 0) < 0)
        return -1;
    lower_set_iteration(g, full->ndim, full->shape);
    lower_decl_args(g);
    int64_t L = g->shape[g->nd - 1], rows = shape_numel(g->nd, g->shape) / L;
    g->row_level = 1;
    g->d->rows_open(g, rows, L);
    lower_row_offsets(g, "r");
    // row values with no reduction beneath them (loads along the row's
    // constant index): compute them once, with j = 0
    sbuf_printf(g->b, "        const %s j = 0;\n        (void)j;\n", g->d->index_type);
    for (int lev = 0; lev <= maxlev; lev++)
        if ((lev > 0 && emit_reductions(g, &ri, lev, L) < 0) || emit_row_values(g, &ri, lev, L) < 0)
            return -1;
    bool any_full_store = false;
    memset(ri.need, 0, sizeof ri.need);
    for (int m = 0; m < k->n; m++)
        if (ri.full[m] && p->info[k->nodes[m]].store == CS_BUFFER) {
            any_full_store = true;
            mark_need(g, &ri, m);
        }
    if (any_full_store) {
        g->d->row_loop_open(g, L);
        if (emit_full_members(g, &ri, maxlev) < 0)
            return -1;
        for (int m = 0; m < k->n; m++)
            if (ri.full[m] && p->info[k->nodes[m]].store == CS_BUFFER) {
                int ai = compile_arg_of(k, k->nodes[m]);
                char idx[96], val[16];
                lower_index(g, ai, idx, sizeof idx);
                snprintf(val, sizeof val, "v%d", m);
                lower_store(g, "            ", ai, idx, val);
            }
        g->d->row_loop_close(g, L, NULL, 0);
    }
    sbuf_puts(g->b, "    }\n");
    return 0;
}

// ---- GEMM and convolution with epilogues --------------------------------

int lower_anchor_target(const lgen *g) {
    const kgroup *k = g->k;
    if (g->p->info[k->anchor].store == CS_BUFFER)
        return k->anchor;
    return k->nodes[k->n - 1];
}

int lower_anchor_args(lgen *g) {
    kgroup *k = g->k;
    const graph_node *an = &g->p->g->nodes[k->anchor];
    int target = lower_anchor_target(g);
    k->args[0] = an->src[0];
    k->args[1] = an->src[1];
    k->args[2] = target;
    k->nargs = 3;
    return lower_collect_args(g, 1) < 0 ? -1 : target;
}

void lower_epilogue_iteration(lgen *g) {
    const kgroup *k = g->k;
    const graph_node *an = &g->p->g->nodes[k->anchor];
    lower_set_iteration(g, an->ndim, an->shape);
    for (int a = 0; a < 2; a++) {
        g->used[a] = false;
        for (int m = 1; m < k->n; m++) {
            const graph_node *n = &g->p->g->nodes[k->nodes[m]];
            for (int s = 0; s < n->nsrc; s++)
                g->used[a] |= n->src[s] == k->args[a];
        }
    }
}

int lower_epilogue_body(lgen *g, int target) {
    char x[128];
    lower_load(g, compile_arg_of(g->k, target), x, sizeof x);
    sbuf_printf(g->b, "        float v0 = %s;\n", x);
    for (int m = 1; m < g->k->n; m++)
        if (lower_member(g, m) < 0)
            return -1;
    lower_stores(g, 1, g->k->n);
    return 0;
}

int lower_epilogue_loop(lgen *g, int target) {
    g->d->loop_open(g);
    if (lower_epilogue_body(g, target) < 0)
        return -1;
    g->d->loop_close(g);
    return 0;
}

void lower_extern_args(lgen *g) {
    cprog *p = g->p;
    kgroup *k = g->k;
    const graph_node *an = &p->g->nodes[k->anchor];
    k->nargs = 0;
    for (int s = 0; s < an->nsrc; s++)
        if (p->info[an->src[s]].store != CS_CONST)
            compile_arg_of(k, an->src[s]);
    compile_arg_of(k, k->anchor);
}

// Row-major with leading dimension ld, or transposed, from the strides.
static void gemm_ld(int64_t rows, int64_t cols, int64_t rs, int64_t cs, int *trans, int64_t *ld) {
    if (cs == 1 || cols == 1) {
        *trans = 0;
        *ld = rows > 1 && rs > cols ? rs : cols;
    } else {
        *trans = 1;
        *ld = cols > 1 && cs > rows ? cs : rows;
    }
}

void lower_gemm_desc(const cprog *p, const kgroup *k, lower_gemm *d) {
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
    // fold trailing batch dims into M while A's rows stay evenly strided and B is shared
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

// ---- in-place updates ------------------------------------------------------

// The math of one chunk q: $P stands for the pointer array, $R the
// pointers' qualifier, $B the element bounds' declaration, $L the element
// loop's head, $O the last op's branch. PyTorch's AdamW and SGD as
// the eager kernels compute them, in the same order of operations.
static const char update_math[] =
    "        float *$Rw = (float *)$P[q->arg];\n"
    "        const float *$Rgr = (const float *)$P[q->arg + 1];\n"
    "$B        uint64_t t = t0;\n"
    "        float inv = 1.0f; // the gradient's factor\n"
    "        if (q->amp >= 0) { // grad scaler: found_inf skips, 1/scale, own step count\n"
    "            if (*(const float *)$P[q->arg + q->amp + 1] != 0.0f)\n"
    "                continue;\n"
    "            inv = (float)(1.0 / *(const float *)$P[q->arg + q->amp]);\n"
    "            t = (uint64_t)*(const float *)$P[q->arg + q->amp + 2] + 1;\n"
    "        }\n"
    "        if (q->op == 0) { // AdamW: decay, moments, bias-corrected step\n"
    "            float *$Rm = (float *)$P[q->arg + 2], *$Rv = (float *)$P[q->arg + 3];\n"
    "            const double lr = q->h[0], b1 = q->h[1], b2 = q->h[2];\n"
    "            const float decay = (float)(1 - lr * q->h[4]), eps = (float)q->h[3];\n"
    "            const float step = (float)(lr / (1 - tc_powi(b1, t)));\n"
    "            const float inv_bc2 = (float)(1 / sqrt(1 - tc_powi(b2, t)));\n"
    "            const float fb1 = (float)b1, fb2 = (float)b2;\n"
    "            const float ob1 = (float)(1 - b1), ob2 = (float)(1 - b2);\n"
    "$L {\n"
    "                float gi_ = gr[i] * inv;\n"
    "                float mi = fb1 * m[i] + ob1 * gi_, vi = fb2 * v[i] + ob2 * gi_ * gi_;\n"
    "                m[i] = mi;\n"
    "                v[i] = vi;\n"
    "                w[i] = w[i] * decay - step * mi / (sqrtf(vi) * inv_bc2 + eps);\n"
    "            }\n"
    "        } else if (q->op == 1) { // SGD with momentum (dampening, nesterov)\n"
    "            float *$Rbuf = (float *)$P[q->arg + 2];\n"
    "            const float lr = (float)q->h[0], mom = (float)q->h[1], wd = (float)q->h[2];\n"
    "            const int first = t == 1, nesterov = q->h[4] != 0;\n"
    "            const float keep = first ? 0.0f : mom;\n"
    "            const float take = first ? 1.0f : 1.0f - (float)q->h[3];\n"
    "$L {\n"
    "                float d = gr[i] * inv + wd * w[i];\n"
    "                float bi = keep * buf[i] + take * d;\n"
    "                buf[i] = bi;\n"
    "                w[i] -= lr * (nesterov ? d + mom * bi : bi);\n"
    "            }\n"
    "        } else if (q->op == 2) { // SGD without momentum\n"
    "            const float lr = (float)q->h[0], wd = (float)q->h[2];\n"
    "$L\n"
    "                w[i] -= lr * (gr[i] * inv + wd * w[i]);\n"
    "        } $O { // running statistic: (1 - momentum) buf + momentum * factor * stat\n"
    "            const float keep = (float)(1 - q->h[0]), take = (float)(q->h[0] * q->h[1]);\n"
    "$L\n"
    "                w[i] = keep * w[i] + take * gr[i];\n"
    "        }\n"
    "    }\n";

void lower_update_math(sbuf *b, const lower_update_form *f) {
    const char *s = update_math;
    for (const char *at; (at = strchr(s, '$')); s = at + 2) {
        sbuf_printf(b, "%.*s", (int)(at - s), s);
        switch (at[1]) {
        case 'P': sbuf_puts(b, f->ptrs); break;
        case 'R': sbuf_puts(b, f->restrict_); break;
        case 'B': sbuf_puts(b, f->bounds); break;
        case 'L': sbuf_puts(b, f->loop); break;
        default: sbuf_puts(b, f->last_op); break;
        }
    }
    sbuf_puts(b, s);
}

// ---- the translation unit --------------------------------------------------

void lower_put_header(sbuf *out, const char *text, bool head) {
    const char *guard = strstr(text, "#pragma once\n");
    if (!guard) {
        sbuf_puts(out, text);
        return;
    }
    if (head)
        sbuf_printf(out, "%.*s", (int)(guard - text), text);
    sbuf_puts(out, guard + strlen("#pragma once\n"));
}

int lower_kernel_key(char **texts, int *n, const char *text, bool *added) {
    *added = false;
    for (int i = 0; i < *n; i++)
        if (strcmp(texts[i], text) == 0)
            return i;
    if (!(texts[*n] = strdup(text)))
        return -1;
    *added = true;
    return (*n)++;
}

void lower_kernel_keys_free(char **texts, int n) {
    for (int i = 0; i < n; i++)
        free(texts[i]);
    free(texts);
}
