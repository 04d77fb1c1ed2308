// C code generation: one function per distinct kernel, keyed by its text
// (shapes, strides, ops, constants; never pointers), so the identical layers
// of a model share one compiled kernel; and tc_step(), which runs every
// group in order with its pointers: the CPU form of graph capture.
//
// Every kernel has the signature
//   void kN(char *const *a, const tc_rt *rt, int gi)
// a: the data pointers of the group's operands (kgroup.args), rt: runtime
// calls for what a library does (convolution, pooling, gathers), gi: the
// group index those calls name. Loops: the outer one parallel (OpenMP, on
// one thread below PAR_MIN elements, the same threshold the eager kernels
// use), the inner one `omp simd` over unit or broadcast strides.
#include "compile_internal.h"

#include "base/sbuf.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PAR_MIN 32768

extern const char compile_prelude_math[];      // cpu_math.h, embedded at build time
extern const char compile_prelude_gemm[];      // cpu_gemm_par.h, likewise
extern const char compile_prelude_pointwise[]; // core/pointwise.h, likewise

typedef struct kgen {
    cprog *p;
    kgroup *k;
    sbuf *b;
    int nd;                                   // iteration dims
    int64_t shape[TENSOR_MAX_DIMS];           // iteration shape
    int64_t st[KG_MAX_ARGS][TENSOR_MAX_DIMS]; // per-arg strides over it
    int row_level;                            // 0: 1-d loop over j; 1: rows r, inner j
    bool hoisted[KG_MAX_ARGS];                // read once per row into h<a>
    // inside an inner loop being emitted (inner_begin .. inner_end): f16
    // operands with unit stride go through f32 tiles s<a>, converted in
    // bulk (F16C) before and after the loop, which then vectorizes
    bool inner;
    sbuf *outer;         // where the loop goes
    sbuf body;           // the loop's body, meanwhile
    char lo[48], hi[48]; // loop_open's inner bounds
    bool tile_read[KG_MAX_ARGS], tile_write[KG_MAX_ARGS];
} kgen;

// Elements per f16 tile: a few KiB of stack per staged operand.
#define TILE 256

static const char *ctype(enum dtype t) {
    switch (t) {
    case DT_F32: return "float";
    case DT_I32: return "int32_t";
    case DT_I64: return "int64_t";
    case DT_BOOL: return "unsigned char";
    default: return "uint16_t";
    }
}

static bool is_half(const kgen *g, int ai) {
    return dtype_is_half(g->p->g->nodes[g->k->args[ai]].dtype);
}

// The letter of a 16-bit operand's conversions: tc_h2f / tc_f2h (f16) or
// tc_b2f / tc_f2b (bf16), and their _n tile versions.
static const char *half_tag(enum dtype t) { return t == DT_BF16 ? "b" : "h"; }
static const char *arg_tag(const kgen *g, int ai) {
    return half_tag(g->p->g->nodes[g->k->args[ai]].dtype);
}

// An f16 operand read or written through a tile in this inner loop.
static bool tiled(const kgen *g, int ai) {
    return g->inner && is_half(g, ai) && !g->hoisted[ai] && g->st[ai][g->nd - 1] == 1;
}

static bool in_group(const kgen *g, int v) {
    return g->p->info[v].group == g->p->info[g->k->nodes[0]].group;
}

static int member_index(const kgen *g, int v) {
    for (int i = 0; i < g->k->n; i++)
        if (g->k->nodes[i] == v)
            return i;
    return -1;
}

// The index expression of arg ai at the current point of the loop nest.
static void index_of(const kgen *g, int ai, char *buf, size_t cap) {
    int64_t s = g->st[ai][g->nd - 1];
    if (g->row_level)
        snprintf(buf, cap,
                 s == 0   ? "o%d"
                 : s == 1 ? "o%d + j"
                          : "o%d + j * %lld",
                 ai, (long long)s);
    else
        snprintf(buf, cap, s == 0 ? "0" : s == 1 ? "j" : "j * %lld", (long long)s);
}

// The value of node v inside the loop: a member's temporary, a constant, or a load.
static void recompute_expr(kgen *g, int v, char *buf, size_t cap);

static void operand(kgen *g, int v, char *buf, size_t cap) {
    const cnode *c = &g->p->info[v];
    if (c->store == CS_CONST) {
        compile_literal(buf, cap, g->p->g->nodes[v].fa[0]);
        return;
    }
    if (c->store == CS_RECOMPUTE) {
        recompute_expr(g, v, buf, cap);
        return;
    }
    if (in_group(g, v) && c->store != CS_VIEW && c->store != CS_SOURCE) {
        snprintf(buf, cap, "v%d", member_index(g, v));
        return;
    }
    int ai = compile_arg_of(g->k, v);
    char idx[96];
    index_of(g, ai, idx, sizeof idx);
    if (g->hoisted[ai]) {
        snprintf(buf, cap, g->p->g->nodes[v].dtype == DT_BOOL ? "(h%d != 0)" : "h%d", ai);
    } else if (tiled(g, ai)) {
        g->tile_read[ai] = true;
        snprintf(buf, cap, "s%d[j - jt]", ai);
    } else if (is_half(g, ai)) {
        snprintf(buf, cap, "tc_%s2f(p%d[%s])", arg_tag(g, ai), ai, idx);
    } else if (g->p->g->nodes[v].dtype == DT_BOOL) {
        snprintf(buf, cap, "(p%d[%s] != 0)", ai, idx);
    } else {
        snprintf(buf, cap, "p%d[%s]", ai, idx);
    }
}

// "p<a>[idx] = val;" with the conversion an f16 operand needs (or into its tile).
static void emit_store(kgen *g, const char *indent, int ai, const char *idx, const char *val) {
    if (tiled(g, ai)) {
        g->tile_write[ai] = true;
        sbuf_printf(g->b, "%ss%d[j - jt] = %s;\n", indent, ai, val);
    } else if (is_half(g, ai)) {
        sbuf_printf(g->b, "%sp%d[%s] = tc_f2%s(%s);\n", indent, ai, idx, arg_tag(g, ai), val);
    } else {
        sbuf_printf(g->b, "%sp%d[%s] = %s;\n", indent, ai, idx, val);
    }
}

// The value of arg ai at the current point, as a float expression.
static void load_expr(kgen *g, int ai, char *buf, size_t cap) {
    char idx[96];
    index_of(g, ai, idx, sizeof idx);
    if (tiled(g, ai)) {
        g->tile_read[ai] = true;
        snprintf(buf, cap, "s%d[j - jt]", ai);
    } else if (is_half(g, ai)) {
        snprintf(buf, cap, "tc_%s2f(p%d[%s])", arg_tag(g, ai), ai, idx);
    } else {
        snprintf(buf, cap, "p%d[%s]", ai, idx);
    }
}

// An inner loop over j in [lo, hi): its body is written between
// inner_begin and inner_end into a buffer of its own, so that inner_end
// knows which f16 operands it touched and wraps it in tiles for them.
static void inner_begin(kgen *g, sbuf *body) {
    g->outer = g->b;
    g->b = body;
    sbuf_reset(body);
    g->inner = true;
    memset(g->tile_read, 0, sizeof g->tile_read);
    memset(g->tile_write, 0, sizeof g->tile_write);
}

static void inner_end(kgen *g, sbuf *body, const char *ind, const char *lo, const char *hi,
                      const char *clauses) {
    g->b = g->outer;
    g->inner = false;
    sbuf *b = g->b;
    bool any = false;
    for (int a = 0; a < g->k->nargs; a++)
        any |= g->tile_read[a] || g->tile_write[a];
    if (!any) {
        sbuf_printf(b, "#pragma omp simd%s\n%sfor (int64_t j = %s; j < %s; j++) {\n%s%s}\n",
                    clauses, ind, lo, hi, body->s ? body->s : "", ind);
        return;
    }
    sbuf_printf(b, "%sfor (int64_t jt = %s; jt < %s; jt += %d) {\n", ind, lo, hi, TILE);
    sbuf_printf(b, "%s    const int64_t jn = %s - jt < %d ? %s - jt : %d;\n", ind, hi, TILE, hi,
                TILE);
    for (int a = 0; a < g->k->nargs; a++) {
        if (!g->tile_read[a] && !g->tile_write[a])
            continue;
        sbuf_printf(b, "%s    float s%d[%d];\n", ind, a, TILE);
        if (g->tile_read[a])
            sbuf_printf(b, "%s    tc_%s2f_n(s%d, p%d + %s%d + jt, jn);\n", ind, arg_tag(g, a), a, a,
                        g->row_level ? "o" : "", g->row_level ? a : 0);
    }
    sbuf_printf(b,
                "#pragma omp simd%s\n%s    for (int64_t j = jt; j < jt + jn; j++) {\n%s%s    }\n",
                clauses, ind, body->s ? body->s : "", ind);
    for (int a = 0; a < g->k->nargs; a++)
        if (g->tile_write[a])
            sbuf_printf(b, "%s    tc_f2%s_n(p%d + %s%d + jt, s%d, jn);\n", ind, arg_tag(g, a), a,
                        g->row_level ? "o" : "", g->row_level ? a : 0, a);
    sbuf_printf(b, "%s}\n", ind);
}

// The C expression of an elementwise op over operands named x0, x1, x2
// (x0 an int for where's condition). NULL for ops that are not elementwise.
static const char *op_template(const graph_node *n, char *buf, size_t cap) {
    if (compile_formula_expr(n, buf, cap)) // core/pointwise.h's
        return buf;
    switch (n->op) {
    case OP_CONTIGUOUS:
    case OP_CAST: return "x0"; // between f32, f16 and bf16 (fuse.c): the store rounds
    case OP_ADD: return "x0 + x1";
    case OP_SUB: return "x0 - x1";
    case OP_MUL: return "x0 * x1";
    case OP_DIV: return "x0 / x1";
    case OP_MAXIMUM: return "(x0 != x0 || x0 > x1) ? x0 : x1";
    case OP_WHERE: return "x0 ? x1 : x2";
    case OP_GE: return "x0 >= x1 ? 1.0f : 0.0f";
    default: return NULL;
    }
}

#define EXPR_CAP 2048

// A recomputed node as one expression (a GNU statement expression, so each
// operand is evaluated once): small per-channel values such as batch norm's
// rsqrt(var + eps) cost less to recompute in every kernel that reads them
// than a kernel launch of their own.
static void recompute_expr(kgen *g, int v, char *buf, size_t cap) {
    const graph_node *n = &g->p->g->nodes[v];
    char x[3][EXPR_CAP], tb[160];
    for (int s = 0; s < n->nsrc && s < 3; s++)
        operand(g, n->src[s], x[s], sizeof x[s]);
    const char *t = op_template(n, tb, sizeof tb);
    size_t o = (size_t)snprintf(buf, cap, "({ ");
    for (int s = 0; s < n->nsrc && s < 3 && o < cap; s++)
        o += (size_t)snprintf(buf + o, cap - o, "%s x%d = %s; ",
                              s == 0 && n->op == OP_WHERE ? "int" : "float", s, x[s]);
    if (!t) // fuse.c recomputes elementwise ops only; a new one needs its template
        compile_fail(g->p, "codegen: no C expression for recomputed %s", op_name(n->op));
    if (o < cap)
        snprintf(buf + o, cap - o, "%s; })", t ? t : "0.0f");
}

// "float vM = <op>(operands);" for member m
static int emit_member(kgen *g, int m) {
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
        return compile_fail(g->p, "codegen: %s cannot be fused", op_name(n->op));
    sbuf_printf(b, "            v%d = %s;\n        }\n", m, e);
    return 0;
}

// Merge adjacent dims where every arg steps through them as one.
static void coalesce(kgen *g) {
    int nd = g->nd;
    for (int d = nd - 2; d >= 0; d--) {
        bool ok = true;
        for (int a = 0; a < g->k->nargs && ok; a++)
            ok = g->st[a][d] == g->st[a][d + 1] * g->shape[d + 1];
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

static void set_iteration(kgen *g, int nd, const int64_t *shape) {
    g->nd = nd > 0 ? nd : 1;
    for (int i = 0; i < g->nd; i++)
        g->shape[i] = nd > 0 ? shape[i] : 1;
    for (int a = 0; a < g->k->nargs; a++)
        compile_eff_strides(g->p, g->k->args[a], g->nd, g->shape, g->st[a]);
}

// Iterate in the memory order of the first buffer the loop stores (a
// channels-last output walks C innermost), so its stores stay unit-stride
// and the inner loop vectorizes; elementwise loops may run in any order.
static void order_by_store(kgen *g, int m0) {
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

static void decl_args(kgen *g) {
    for (int a = 0; a < g->k->nargs; a++) {
        const graph_node *n = &g->p->g->nodes[g->k->args[a]];
        sbuf_printf(g->b, "    %s *p%d = (%s *)a[%d];\n", ctype(n->dtype), a, ctype(n->dtype), a);
    }
}

// An operand that does not move along the inner loop (a per-channel scale,
// a bias on its row) is read once per row into a local, so the compiler can
// hoist what is computed from it: it cannot move loads past the kernel's
// stores by itself, not knowing they do not alias.
static bool writes(const kgen *g, int v) {
    if (g->p->info[v].store != CS_BUFFER)
        return false;
    if (g->k->anchor == v || g->p->info[v].group == g->p->info[g->k->nodes[0]].group)
        return true;
    return false;
}

static void emit_hoists(kgen *g, bool rows) {
    for (int a = 0; a < g->k->nargs; a++) {
        g->hoisted[a] = false;
        if (g->st[a][g->nd - 1] != 0 || writes(g, g->k->args[a]))
            continue;
        const graph_node *n = &g->p->g->nodes[g->k->args[a]];
        char at[32];
        snprintf(at, sizeof at, rows ? "p%d[o%d]" : "p%d[0]", a, a);
        if (dtype_is_half(n->dtype))
            sbuf_printf(g->b, "        const float h%d = tc_%s2f(%s);\n", a, half_tag(n->dtype),
                        at);
        else
            sbuf_printf(g->b, "        const %s h%d = %s;\n", ctype(n->dtype), a, at);
        g->hoisted[a] = true;
    }
}

// Per-row offsets o<a> for row r of the iteration (dims 0 .. nd-2).
static void emit_row_offsets(kgen *g, const char *r) {
    sbuf *b = g->b;
    for (int a = 0; a < g->k->nargs; a++)
        sbuf_printf(b, "        int64_t o%d = 0;\n", a);
    sbuf_printf(b, "        int64_t q = %s;\n", r);
    for (int d = g->nd - 2; d >= 0; d--) {
        sbuf_printf(b, "        {\n            int64_t i = q %% %lld;\n            q /= %lld;\n",
                    (long long)g->shape[d], (long long)g->shape[d]);
        for (int a = 0; a < g->k->nargs; a++)
            if (g->st[a][d])
                sbuf_printf(b, "            o%d += i * %lld;\n", a, (long long)g->st[a][d]);
        sbuf_puts(b, "        }\n");
    }
    sbuf_puts(b, "        (void)q;\n");
    emit_hoists(g, true);
}

static bool is_member_value(const kgen *g, int v) {
    const cnode *c = &g->p->info[v];
    return in_group(g, v) && c->store != CS_VIEW && c->store != CS_SOURCE &&
           c->store != CS_RECOMPUTE;
}

// Register node v as an operand (a recomputed node: its own operands).
static int collect_operand(kgen *g, int v) {
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
    return compile_fail(g->p, "codegen: a kernel has more than %d operands", KG_MAX_ARGS);
}

// Register every operand the group's loops read or write, in a fixed order.
static int collect_args(kgen *g, int first_member) {
    kgroup *k = g->k;
    for (int m = first_member; m < k->n; m++) {
        const graph_node *n = &g->p->g->nodes[k->nodes[m]];
        for (int s = 0; s < n->nsrc; s++)
            if (collect_operand(g, n->src[s]) < 0)
                return -1;
    }
    for (int m = first_member; m < k->n; m++)
        if (g->p->info[k->nodes[m]].store == CS_BUFFER && compile_arg_of(k, k->nodes[m]) < 0)
            return compile_fail(g->p, "codegen: a kernel has more than %d operands", KG_MAX_ARGS);
    return 0;
}

static void emit_stores(kgen *g, int m0, int m1, bool (*want)(const kgen *, int)) {
    for (int m = m0; m < m1; m++) {
        int v = g->k->nodes[m];
        if (g->p->info[v].store != CS_BUFFER || (want && !want(g, m)))
            continue;
        int ai = compile_arg_of(g->k, v);
        char idx[96], val[16];
        index_of(g, ai, idx, sizeof idx);
        snprintf(val, sizeof val, "v%d", m);
        emit_store(g, "        ", ai, idx, val);
    }
}

// Open the loop nest over the iteration shape; the body sees j (and o<a>).
static void loop_open(kgen *g) {
    sbuf *b = g->b;
    int64_t total = shape_numel(g->nd, g->shape);
    if (g->nd == 1) {
        int64_t chunk = 4096, n = g->shape[0], nchunks = (n + chunk - 1) / chunk;
        g->row_level = 0;
        sbuf_printf(b, "#pragma omp parallel for if (%lld >= %d) schedule(static)\n",
                    (long long)total, PAR_MIN);
        sbuf_printf(b, "    for (int64_t t = 0; t < %lld; t++) {\n", (long long)nchunks);
        sbuf_printf(b, "        int64_t j0 = t * %lld, j1 = j0 + %lld < %lld ? j0 + %lld : %lld;\n",
                    (long long)chunk, (long long)chunk, (long long)n, (long long)chunk,
                    (long long)n);
        emit_hoists(g, false);
        snprintf(g->lo, sizeof g->lo, "j0");
        snprintf(g->hi, sizeof g->hi, "j1");
        inner_begin(g, &g->body);
        return;
    }
    g->row_level = 1;
    int64_t rows = total / g->shape[g->nd - 1];
    sbuf_printf(b, "#pragma omp parallel for if (%lld >= %d) schedule(static)\n", (long long)total,
                PAR_MIN);
    sbuf_printf(b, "    for (int64_t r = 0; r < %lld; r++) {\n", (long long)rows);
    emit_row_offsets(g, "r");
    snprintf(g->lo, sizeof g->lo, "0");
    snprintf(g->hi, sizeof g->hi, "%lld", (long long)g->shape[g->nd - 1]);
    inner_begin(g, &g->body);
}

static void loop_close(kgen *g) {
    inner_end(g, &g->body, "    ", g->lo, g->hi, "");
    sbuf_puts(g->b, "    }\n");
}

static int emit_pointwise(kgen *g) {
    const graph_node *n0 = &g->p->g->nodes[g->k->nodes[0]];
    if (collect_args(g, 0) < 0)
        return -1;
    set_iteration(g, n0->ndim, n0->shape);
    order_by_store(g, 0);
    coalesce(g);
    decl_args(g);
    loop_open(g);
    for (int m = 0; m < g->k->n; m++)
        if (emit_member(g, m) < 0)
            return -1;
    emit_stores(g, 0, g->k->n, NULL);
    loop_close(g);
    return 0;
}

// A view strides cannot express (or a GEMM cannot read): copy it in the
// order of its elements. A reshape copies its source in row-major order.
static int emit_copy(kgen *g) {
    cprog *p = g->p;
    int v = g->k->anchor;
    const graph_node *n = &p->g->nodes[v];
    int src = n->src[0];
    clayout in;
    int ndim;
    const int64_t *shape;
    if (n->op == OP_RESHAPE) {
        in = p->info[src].store == CS_VIEW ? p->info[src].lay : (clayout){0};
        if (p->info[src].store != CS_VIEW)
            clayout_contiguous(&in, p->g->nodes[src].ndim, p->g->nodes[src].shape);
    } else if (!compile_view_layout(p, v, &in)) {
        return compile_fail(p, "codegen: no layout for %s", op_name(n->op));
    }
    ndim = in.ndim;
    shape = in.shape;
    // the source pointer is the storage base of src; its strides are `in`
    int base = p->info[src].store == CS_VIEW ? p->info[src].base : src;
    kgroup *k = g->k;
    k->args[0] = base;
    k->args[1] = v;
    k->nargs = 2;
    g->nd = ndim > 0 ? ndim : 1;
    for (int i = 0; i < g->nd; i++) {
        g->shape[i] = ndim > 0 ? shape[i] : 1;
        g->st[0][i] = ndim > 0 ? (shape[i] == 1 ? 0 : in.stride[i]) : 0;
    }
    int64_t cst[TENSOR_MAX_DIMS];
    tensor_strides_contiguous(g->nd, g->shape, cst);
    for (int i = 0; i < g->nd; i++)
        g->st[1][i] = cst[i];
    coalesce(g);
    sbuf_printf(g->b, "    const %s *p0 = (const %s *)a[0] + %lld;\n", ctype(n->dtype),
                ctype(n->dtype), (long long)in.offset);
    sbuf_printf(g->b, "    %s *p1 = (%s *)a[1];\n", ctype(n->dtype), ctype(n->dtype));
    loop_open(g);
    char i0[96], i1[96];
    index_of(g, 0, i0, sizeof i0);
    index_of(g, 1, i1, sizeof i1);
    sbuf_printf(g->b, "        p1[%s] = p0[%s];\n", i1, i0);
    loop_close(g);
    return 0;
}

// ---- row groups: reductions over the last axis ---------------------------

typedef struct rowinfo {
    int level[FUSE_MAX_MEMBERS]; // see emit_row
    bool full[FUSE_MAX_MEMBERS]; // full row shape (else one value per row)
    bool need[FUSE_MAX_MEMBERS];
} rowinfo;

static bool is_reduce(const graph_node *n) { return op_kind(n->op) == OPK_REDUCE; }

static void mark_need(kgen *g, rowinfo *ri, int m) {
    if (ri->need[m] || !ri->full[m])
        return;
    ri->need[m] = true;
    const graph_node *n = &g->p->g->nodes[g->k->nodes[m]];
    for (int s = 0; s < n->nsrc; s++) {
        int v = n->src[s];
        if (is_member_value(g, v))
            mark_need(g, ri, member_index(g, v));
    }
}

static void emit_full_members(kgen *g, rowinfo *ri, int max_level) {
    for (int m = 0; m < g->k->n; m++)
        if (ri->need[m] && ri->full[m] && ri->level[m] <= max_level)
            emit_member(g, m);
}

// Levels: a reduction is one more than the deepest reduction its input
// needs; other members take the deepest of their inputs. Loop L (1..K)
// accumulates the reductions of level L from full-row values of lower
// levels; row values of level L follow it; a last loop writes the stored
// full-row members. Each loop recomputes the cheap elementwise values it
// needs rather than storing them.
static int emit_row(kgen *g) {
    cprog *p = g->p;
    kgroup *k = g->k;
    rowinfo ri;
    memset(&ri, 0, sizeof ri);
    const graph_node *full = NULL;
    for (int m = 0; m < k->n && !full; m++)
        if (is_reduce(&p->g->nodes[k->nodes[m]]))
            full = &p->g->nodes[p->g->nodes[k->nodes[m]].src[0]];
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
    int64_t L = g->shape[g->nd - 1], rows = shape_numel(g->nd, g->shape) / L;
    g->row_level = 1;
    sbuf_printf(b, "#pragma omp parallel for if (%lld >= %d) schedule(static)\n",
                (long long)(rows * L), PAR_MIN);
    sbuf_printf(b, "    for (int64_t r = 0; r < %lld; r++) {\n", (long long)rows);
    emit_row_offsets(g, "r");
    // row values with no reduction beneath them (loads along the row's
    // constant index): compute them once, with j = 0
    sbuf_puts(b, "        const int64_t j = 0;\n        (void)j;\n");
    for (int lev = 0; lev <= maxlev; lev++) {
        if (lev > 0) {
            memset(ri.need, 0, sizeof ri.need);
            char clauses[FUSE_MAX_MEMBERS * 24] = "";
            size_t o = 0;
            for (int m = 0; m < k->n; m++) {
                const graph_node *n = &p->g->nodes[k->nodes[m]];
                if (!is_reduce(n) || ri.level[m] != lev)
                    continue;
                int s = member_index(g, n->src[0]);
                if (s >= 0)
                    mark_need(g, &ri, s);
                sbuf_printf(b, "        float acc%d = %s;\n", m,
                            n->op == OP_MAX ? "-INFINITY" : "0.0f");
                if (n->op == OP_MAX)
                    sbuf_printf(b, "        int nan%d = 0;\n", m);
                if (o < sizeof clauses) // FUSE_MAX_MEMBERS clauses fit; stay safe regardless
                    o += (size_t)snprintf(clauses + o, sizeof clauses - o, " reduction(%s:acc%d)",
                                          n->op == OP_MAX ? "max" : "+", m);
                if (n->op == OP_MAX && o < sizeof clauses)
                    o +=
                        (size_t)snprintf(clauses + o, sizeof clauses - o, " reduction(|:nan%d)", m);
            }
            inner_begin(g, &g->body);
            emit_full_members(g, &ri, lev - 1);
            for (int m = 0; m < k->n; m++) {
                const graph_node *n = &p->g->nodes[k->nodes[m]];
                if (!is_reduce(n) || ri.level[m] != lev)
                    continue;
                char x[EXPR_CAP];
                operand(g, n->src[0], x, sizeof x);
                if (n->op == OP_MAX) // NaN propagates, as eager's max
                    sbuf_printf(g->b,
                                "            { float x = %s; acc%d = acc%d > x ? acc%d : x; "
                                "nan%d |= x != x; }\n",
                                x, m, m, m, m);
                else
                    sbuf_printf(g->b, "            acc%d += %s;\n", m, x);
            }
            char hi[32];
            snprintf(hi, sizeof hi, "%lld", (long long)L);
            inner_end(g, &g->body, "        ", "0", hi, clauses);
        }
        // row values of this level, in order
        for (int m = 0; m < k->n; m++) {
            const graph_node *n = &p->g->nodes[k->nodes[m]];
            if (ri.full[m] || ri.level[m] != lev)
                continue;
            if (is_reduce(n)) {
                if (n->op == OP_MEAN)
                    sbuf_printf(b, "        float v%d = acc%d / %lld.0f;\n", m, m, (long long)L);
                else if (n->op == OP_MAX)
                    sbuf_printf(b, "        float v%d = nan%d ? NAN : acc%d;\n", m, m, m);
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
                emit_store(g, "        ", ai, idx, val);
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
        inner_begin(g, &g->body);
        emit_full_members(g, &ri, maxlev);
        for (int m = 0; m < k->n; m++)
            if (ri.full[m] && p->info[k->nodes[m]].store == CS_BUFFER) {
                int ai = compile_arg_of(k, k->nodes[m]);
                char idx[96], val[16];
                index_of(g, ai, idx, sizeof idx);
                snprintf(val, sizeof val, "v%d", m);
                emit_store(g, "            ", ai, idx, val);
            }
        char hi[32];
        snprintf(hi, sizeof hi, "%lld", (long long)L);
        inner_end(g, &g->body, "        ", "0", hi, "");
    }
    sbuf_puts(b, "    }\n");
    return 0;
}

// ---- GEMM and convolution with epilogues --------------------------------

// The buffer the anchor writes: its own if stored, else the last member's
// (the epilogue then runs in place).
static int anchor_target(const kgen *g) {
    const kgroup *k = g->k;
    if (g->p->info[k->anchor].store == CS_BUFFER)
        return k->anchor;
    return k->nodes[k->n - 1];
}

// The epilogue body at (row offsets, j): v0 is the anchor's value.
static int emit_epilogue_body(kgen *g, int target) {
    int ai = compile_arg_of(g->k, target);
    char idx[96], x[128];
    load_expr(g, ai, x, sizeof x);
    sbuf_printf(g->b, "        float v0 = %s;\n", x);
    for (int m = 1; m < g->k->n; m++)
        if (emit_member(g, m) < 0)
            return -1;
    for (int m = 1; m < g->k->n; m++) {
        int v = g->k->nodes[m];
        if (g->p->info[v].store != CS_BUFFER)
            continue;
        int bi = compile_arg_of(g->k, v);
        char val[16];
        index_of(g, bi, idx, sizeof idx);
        snprintf(val, sizeof val, "v%d", m);
        emit_store(g, "        ", bi, idx, val);
    }
    return 0;
}

// The epilogue over output rows [r0, r1) (C expressions), each row's
// elements in an inner simd loop.
// ... over columns [j0, j1) of those rows (C expressions).
static int emit_epilogue_block(kgen *g, int target, const char *r0, const char *r1, const char *j0,
                               const char *j1) {
    sbuf *b = g->b;
    sbuf_printf(b, "        for (int64_t r = %s; r < %s; r++) {\n", r0, r1);
    emit_row_offsets(g, "r");
    g->row_level = 1;
    inner_begin(g, &g->body);
    if (emit_epilogue_body(g, target) < 0)
        return -1;
    inner_end(g, &g->body, "        ", j0, j1, "");
    sbuf_puts(b, "        }\n");
    return 0;
}

static int emit_epilogue_rows(kgen *g, int target, const char *r0, const char *r1, int64_t N) {
    char hi[32];
    snprintf(hi, sizeof hi, "%lld", (long long)N);
    return emit_epilogue_block(g, target, r0, r1, "0", hi);
}

typedef struct gemm_side {
    int64_t rs, cs;               // row and column strides of the matrix
    int64_t bst[TENSOR_MAX_DIMS]; // batch strides over the output's batch dims
} gemm_side;

static void gemm_ld(int64_t rows, int64_t cols, const gemm_side *s, bool *trans, int64_t *ld) {
    if (s->cs == 1 || cols == 1) {
        *trans = false;
        *ld = rows > 1 && s->rs > cols ? s->rs : cols;
    } else {
        *trans = true;
        *ld = cols > 1 && s->cs > rows ? s->cs : rows;
    }
}

static int emit_library_anchor(kgen *g, int target);

// A GEMM whose input A (M, K) lies in the first bytes of its output (M, N),
// N >= 2K (plan.c, rows in place): output rows [r0, r1) with
// r0 = ceil(r1 K / N) occupy bytes from r0 N on, past input rows [0, r1), so
// chunks from the last row down never write over a row not yet read. Once
// the rows left hold at most ROWS_COPY_MAX input floats (and at most an
// eighth of the input), they are copied to the stack and done last, a
// matrix-vector product a row (no packing of the weight for a few rows:
// measured against a second GEMM call, which packs all of it again). The
// chunks before are row blocks over the threads with their epilogue, as the
// plain GEMM's.
#define ROWS_COPY_MAX 4096

static int emit_gemm_rows_in_place(kgen *g, int target, int64_t M, int64_t N, int64_t K,
                                   const char *TB, int64_t ldb) {
    sbuf *b = g->b;
    bool epi = g->k->n > 1;
    int64_t left = M; // rows still to do after the chunks: the copied ones
    int64_t limit = M * K / 8 < ROWS_COPY_MAX ? M * K / 8 : ROWS_COPY_MAX;
    while (left > 1 && left * K > limit)
        left = (left * K + N - 1) / N;
    bool tb = strcmp(TB, "112") == 0; // B(k, n) = W[n, k]
    sbuf_puts(b, "    int nt = omp_get_max_threads();\n");
    sbuf_printf(b, "    int64_t parts = (nt > 1 && %d) ? nt : 1;\n",
                (double)M * N * K >= PAR_MIN * 8.0);
    sbuf_printf(b, "    float rows0[%lld];\n", (long long)(left * K));
    sbuf_printf(b, "    memcpy(rows0, p0, sizeof rows0);\n");
    sbuf_puts(b, "#pragma omp parallel if (parts > 1)\n    {\n");
    sbuf_printf(b, "    for (int64_t r1 = %lld, r0; r1 > %lld; r1 = r0) {\n", (long long)M,
                (long long)left);
    sbuf_printf(b, "        r0 = (r1 * %lld + %lld) / %lld;\n", (long long)K, (long long)(N - 1),
                (long long)N);
    sbuf_printf(b, "        if (r0 < %lld)\n            r0 = %lld;\n", (long long)left,
                (long long)left);
    sbuf_puts(b, "#pragma omp for schedule(static)\n");
    sbuf_puts(b, "        for (int64_t t = 0; t < parts; t++) {\n");
    sbuf_puts(b, "        int64_t m0 = r0 + (r1 - r0) * t / parts, m1 = r0 + (r1 - r0) * (t + 1) "
                 "/ parts;\n");
    sbuf_printf(b,
                "        cblas_sgemm(101, 111, %s, (int)(m1 - m0), %lld, %lld, 1.0f, p0 + m0 * "
                "%lld, %lld, p1, %lld, 0.0f, p2 + m0 * %lld, %lld);\n",
                TB, (long long)N, (long long)K, (long long)K, (long long)K, (long long)ldb,
                (long long)N, (long long)N);
    if (epi && emit_epilogue_rows(g, target, "m0", "m1", N) < 0)
        return -1;
    sbuf_puts(b, "        }\n    }\n");
    // the copied rows, once every chunk has read its rows
    sbuf_puts(b, "#pragma omp for schedule(static)\n");
    sbuf_printf(b, "    for (int64_t ri = 0; ri < %lld; ri++) {\n", (long long)left);
    if (tb)
        sbuf_printf(b,
                    "        cblas_sgemv(101, 111, %lld, %lld, 1.0f, p1, %lld, rows0 + ri * %lld, "
                    "1, 0.0f, p2 + ri * %lld, 1);\n",
                    (long long)N, (long long)K, (long long)ldb, (long long)K, (long long)N);
    else
        sbuf_printf(b,
                    "        cblas_sgemv(101, 112, %lld, %lld, 1.0f, p1, %lld, rows0 + ri * %lld, "
                    "1, 0.0f, p2 + ri * %lld, 1);\n",
                    (long long)K, (long long)N, (long long)ldb, (long long)K, (long long)N);
    if (epi && emit_epilogue_rows(g, target, "ri", "ri + 1", N) < 0)
        return -1;
    sbuf_puts(b, "    }\n    }\n");
    return 0;
}

static int emit_gemm(kgen *g) {
    cprog *p = g->p;
    kgroup *k = g->k;
    const graph_node *an = &p->g->nodes[k->anchor];
    int a = an->src[0], w = an->src[1];
    int target = anchor_target(g);
    // operands 0, 1 and the target come first so every GEMM reads them alike,
    // each in its own slot even when both operands are one node (x @ x)
    k->args[0] = a;
    k->args[1] = w;
    k->args[2] = target;
    k->nargs = 3;
    if (collect_args(g, 1) < 0)
        return -1;
    if (is_half(g, 0) || is_half(g, 1) ||
        is_half(g, 2)) // 16-bit: eager's kernel, then the epilogue
        return emit_library_anchor(g, target);
    const clayout *la = &p->info[a].lay, *lw = &p->info[w].lay;
    int nd = an->ndim, nb = nd >= 2 ? nd - 2 : 0;
    int64_t M = nd >= 2 ? an->shape[nd - 2] : 1, N = an->shape[nd - 1];
    int64_t K = p->g->nodes[a].shape[p->g->nodes[a].ndim - 1];
    gemm_side A = {0}, B = {0};
    int ad = la->ndim;
    A.rs = ad >= 2 ? la->stride[ad - 2] : 0;
    A.cs = la->stride[ad - 1];
    int64_t bshape[TENSOR_MAX_DIMS];
    for (int i = 0; i < nb; i++)
        bshape[i] = an->shape[i];
    for (int i = 0; i < nb; i++) {
        int j = i - (nb - (ad - 2));
        A.bst[i] = (j < 0 || la->shape[j] == 1) ? 0 : la->stride[j];
    }
    if (an->op == OP_LINEAR) { // B(k, n) = W[n, k]
        B.rs = lw->stride[1];
        B.cs = lw->stride[0];
    } else {
        int bd = lw->ndim;
        B.rs = lw->stride[bd - 2];
        B.cs = lw->stride[bd - 1];
        for (int i = 0; i < nb; i++) {
            int j = i - (nb - (bd - 2));
            B.bst[i] = (j < 0 || lw->shape[j] == 1) ? 0 : lw->stride[j];
        }
    }
    // fold trailing batch dims into M while A's rows stay evenly strided and B is shared
    while (nb > 0 && B.bst[nb - 1] == 0 && A.bst[nb - 1] == A.rs * M && ad >= 2) {
        M *= bshape[nb - 1];
        nb--;
    }
    int64_t nbatch = shape_numel(nb, bshape);
    bool ta, tb;
    int64_t lda, ldb;
    gemm_ld(M, K, &A, &ta, &lda);
    gemm_ld(K, N, &B, &tb, &ldb);
    // the epilogue walks the output's own dims: rows are global row
    // indices of the contiguous output, whatever the GEMM folded
    set_iteration(g, an->ndim, an->shape);
    decl_args(g);
    sbuf *b = g->b;
    bool epi = k->n > 1;
    const char *TA = ta ? "112" : "111", *TB = tb ? "112" : "111";
    if (k->rows_in_place && (nbatch > 1 || ta || lda != K || N < 2 * K))
        return compile_fail(p,
                            "internal error: rows in place for a GEMM that is not one matrix "
                            "of contiguous rows (%lld x %lld, K %lld)",
                            (long long)M, (long long)N, (long long)K);
    // the batch loop or the row blocks
    if (nbatch > 1) {
        // one matrix per thread when there are at least as many as threads,
        // the rule eager's matmul follows (cpu_gemm.c); else each matrix over
        // every thread in turn (cpu_sgemm_par), from a plain loop: a team
        // nested in an inactive parallel region is made anew each time
        sbuf loop = {0};
        sbuf *outer = g->b;
        g->b = &loop;
        sbuf_printf(&loop, "    for (int64_t bi = 0; bi < %lld; bi++) {\n", (long long)nbatch);
        sbuf_puts(&loop, "        int64_t oa = 0, ob = 0, qb = bi;\n");
        for (int d = nb - 1; d >= 0; d--) {
            sbuf_printf(&loop, "        { int64_t i = qb %% %lld; qb /= %lld;",
                        (long long)bshape[d], (long long)bshape[d]);
            sbuf_printf(&loop, " oa += i * %lld; ob += i * %lld; }\n", (long long)A.bst[d],
                        (long long)B.bst[d]);
        }
        sbuf_printf(&loop,
                    "        cpu_sgemm_par(%s, %s, %lld, %lld, %lld, p0 + oa, %lld, p1 + ob, "
                    "%lld, 0.0f, p2 + bi * %lld, %lld);\n",
                    TA, TB, (long long)M, (long long)N, (long long)K, (long long)lda,
                    (long long)ldb, (long long)(M * N), (long long)N);
        char r0[48], r1[48];
        snprintf(r0, sizeof r0, "bi * %lld", (long long)M);
        snprintf(r1, sizeof r1, "(bi + 1) * %lld", (long long)M);
        int rc = epi ? emit_epilogue_rows(g, target, r0, r1, N) : 0;
        sbuf_puts(&loop, "    }\n");
        g->b = outer;
        if (rc == 0 && !loop.oom) {
            sbuf_printf(b, "    if (%lld >= omp_get_max_threads()) {\n", (long long)nbatch);
            sbuf_puts(b, "#pragma omp parallel for schedule(static)\n");
            sbuf_puts(b, loop.s);
            sbuf_puts(b, "    } else {\n");
            sbuf_puts(b, loop.s);
            sbuf_puts(b, "    }\n");
        }
        if (loop.oom)
            b->oom = true;
        free(loop.s);
        return rc;
    }
    if (k->rows_in_place)
        return emit_gemm_rows_in_place(g, target, M, N, K, TB, ldb);
    // one matrix: row blocks, each a single-threaded GEMM plus its epilogue
    // while the block is in cache, when there are rows enough (the rule of
    // cpu_gemm_split_plan, which eager's linear and matmul follow); else the
    // GEMM split as eager splits it (cpu_sgemm_par: column blocks when rows
    // are few), then the epilogue over the rows in parallel.
    int64_t arow = ta ? 1 : lda; // step of one row of A in elements
    sbuf_printf(b, "    int nt = omp_get_max_threads();\n");
    sbuf_printf(b, "    cpu_gemm_split sp = cpu_gemm_split_plan(%lld, %lld, %lld, nt);\n",
                (long long)M, (long long)N, (long long)K);
    sbuf_puts(b, "    int64_t blocks = sp.cols == 1 ? sp.rows : 1;\n");
    sbuf_puts(b, "    if (blocks > 1) {\n");
    sbuf_puts(b, "#pragma omp parallel for schedule(static)\n");
    sbuf_puts(b, "    for (int64_t t = 0; t < blocks; t++) {\n");
    sbuf_printf(b, "        int64_t m0 = %lld * t / blocks, m1 = %lld * (t + 1) / blocks;\n",
                (long long)M, (long long)M);
    sbuf_printf(
        b,
        "        cblas_sgemm(101, %s, %s, (int)(m1 - m0), %lld, %lld, 1.0f, p0 + m0 * %lld, "
        "%lld, p1, %lld, 0.0f, p2 + m0 * %lld, %lld);\n",
        TA, TB, (long long)N, (long long)K, (long long)arow, (long long)lda, (long long)ldb,
        (long long)N, (long long)N);
    if (epi && emit_epilogue_rows(g, target, "m0", "m1", N) < 0)
        return -1;
    sbuf_puts(b, "    }\n    } else {\n");

    sbuf_printf(b,
                "        cpu_sgemm_par(%s, %s, %lld, %lld, %lld, p0, %lld, p1, %lld, 0.0f, p2, "
                "%lld);\n",
                TA, TB, (long long)M, (long long)N, (long long)K, (long long)lda, (long long)ldb,
                (long long)N);
    if (epi) {
        char r1[48];
        snprintf(r1, sizeof r1, "%lld", (long long)M);
        sbuf_printf(b, "#pragma omp parallel for if (%lld >= %d) schedule(static)\n",
                    (long long)(M * N), PAR_MIN);
        if (emit_epilogue_rows(g, target, "0", r1, N) < 0)
            return -1;
    }
    sbuf_puts(b, "    }\n");
    return 0;
}

// Convolution by the runtime (oneDNN), its epilogue as post-ops when they
// can say it, else as a loop over the convolution's output.
static int emit_library_anchor(kgen *g, int target) {
    const graph_node *an = &g->p->g->nodes[g->k->anchor];
    decl_args(g);
    sbuf_puts(g->b, "    rt->call(rt->ctx, gi, a);\n");
    if (g->k->n == 1)
        return 0;
    set_iteration(g, an->ndim, an->shape);
    order_by_store(g, 0);
    coalesce(g);
    loop_open(g);
    if (emit_epilogue_body(g, target) < 0)
        return -1;
    loop_close(g);
    return 0;
}

static int emit_conv(kgen *g) {
    cprog *p = g->p;
    kgroup *k = g->k;
    const graph_node *an = &p->g->nodes[k->anchor];
    int target = anchor_target(g);
    k->args[0] = an->src[0]; // slots 0, 1, 2 as the runtime call expects them
    k->args[1] = an->src[1];
    k->args[2] = target;
    k->nargs = 3;
    if (collect_args(g, 1) < 0)
        return -1;
    // an epilogue oneDNN can run as post-ops is done inside the call
    conv_post posts[CONV_POST_MAX];
    if (compile_conv_posts(p, k, posts) >= 0) {
        decl_args(g);
        sbuf_puts(g->b, "    rt->call(rt->ctx, gi, a);\n");
        return 0;
    }
    return emit_library_anchor(g, target);
}

static int emit_extern(kgen *g) {
    cprog *p = g->p;
    kgroup *k = g->k;
    const graph_node *an = &p->g->nodes[k->anchor];
    k->nargs = 0;
    for (int s = 0; s < an->nsrc; s++)
        if (p->info[an->src[s]].store != CS_CONST)
            compile_arg_of(k, an->src[s]);
    compile_arg_of(k, k->anchor);
    sbuf_puts(g->b, "    (void)a;\n    rt->call(rt->ctx, gi, a);\n");
    return 0;
}

// ---- in-place updates: the multi-tensor apply -----------------------------

// Elements per chunk of the update table: the loop's unit of parallel work
// (8 Ki: a 32 Ki-element tensor, which eager's kernel splits over the
// threads, is four chunks, not one).
#define UPDATE_CHUNK 8192

// Every member's tensor cut into chunks of a table, one parallel loop over
// the chunks; each chunk's op, its operands' first slot in a, its element
// range and its hyperparameters. The step t comes from rt at run time, so
// one build serves every step. The math is the eager kernels' (PyTorch's
// AdamW and SGD; engine/core/ops.def), in the same order of operations. Under
// the grad scaler (a chunk's amp: the slot of its scale, found_inf and step
// count, after its state) each chunk reads found_inf from memory and skips
// itself when it is set: the step's skip needs no trip to the host.
static int emit_update(kgen *g) {
    cprog *p = g->p;
    kgroup *k = g->k;
    sbuf *b = g->b;
    int64_t total = 0;
    int nchunks = 0, slot = 0;
    k->nargs = 0;
    sbuf_puts(b, "    static const tc_chunk ch[] = {\n");
    for (int m = 0; m < k->n; m++) {
        const graph_node *n = &p->g->nodes[k->nodes[m]];
        int64_t numel = graph_node_numel(n);
        double h[5];
        int op = compile_update_row(n, h);
        for (int64_t lo = 0; lo < numel; lo += UPDATE_CHUNK, nchunks++) {
            int64_t hi = lo + UPDATE_CHUNK < numel ? lo + UPDATE_CHUNK : numel;
            sbuf_printf(b,
                        "        {%d, %d, %d, %lld, %lld, {%.17g, %.17g, %.17g, %.17g, %.17g}},\n",
                        op, slot, graph_scaler_src(n), (long long)lo, (long long)hi, h[0], h[1],
                        h[2], h[3], h[4]);
        }
        total += numel;
        slot += n->nsrc;
    }
    if (nchunks == 0) // only empty tensors
        sbuf_puts(b, "        {-1, 0, -1, 0, 0, {0}},\n");
    sbuf_puts(b, "    };\n");
    sbuf_puts(b, "    const uint64_t t0 = rt->step ? rt->step : 1;\n");
    // threads share the chunks once there are two (an update streams seven
    // arrays: 16 Ki elements are some 450 KiB of traffic, past a fork's cost)
    sbuf_printf(b, "#pragma omp parallel for if (%lld >= %d) schedule(dynamic, 1)\n",
                (long long)total, 2 * UPDATE_CHUNK);
    sbuf_printf(b, "    for (int c = 0; c < %d; c++) {\n", nchunks);
    sbuf_puts(
        b,
        "        const tc_chunk *q = &ch[c];\n"
        "        float *restrict w = (float *)a[q->arg];\n"
        "        const float *restrict gr = (const float *)a[q->arg + 1];\n"
        "        const int64_t lo = q->lo, hi = q->hi;\n"
        "        uint64_t t = t0;\n"
        "        float inv = 1.0f; // the gradient's factor\n"
        "        if (q->amp >= 0) { // grad scaler: found_inf skips, 1/scale, own step count\n"
        "            if (*(const float *)a[q->arg + q->amp + 1] != 0.0f)\n"
        "                continue;\n"
        "            inv = (float)(1.0 / *(const float *)a[q->arg + q->amp]);\n"
        "            t = (uint64_t)*(const float *)a[q->arg + q->amp + 2] + 1;\n"
        "        }\n"
        "        if (q->op == 0) { // AdamW: decay, moments, bias-corrected step\n"
        "            float *restrict m = (float *)a[q->arg + 2], *restrict v = (float *)a[q->arg + "
        "3];\n"
        "            const double lr = q->h[0], b1 = q->h[1], b2 = q->h[2];\n"
        "            const float decay = (float)(1 - lr * q->h[4]), eps = (float)q->h[3];\n"
        "            const float step = (float)(lr / (1 - tc_powi(b1, t)));\n"
        "            const float inv_bc2 = (float)(1 / sqrt(1 - tc_powi(b2, t)));\n"
        "            const float fb1 = (float)b1, fb2 = (float)b2;\n"
        "            const float ob1 = (float)(1 - b1), ob2 = (float)(1 - b2);\n"
        "#pragma omp simd\n"
        "            for (int64_t i = lo; i < hi; i++) {\n"
        "                float gi_ = gr[i] * inv;\n"
        "                float mi = fb1 * m[i] + ob1 * gi_, vi = fb2 * v[i] + ob2 * gi_ * gi_;\n"
        "                m[i] = mi;\n"
        "                v[i] = vi;\n"
        "                w[i] = w[i] * decay - step * mi / (sqrtf(vi) * inv_bc2 + eps);\n"
        "            }\n"
        "        } else if (q->op == 1) { // SGD with momentum (dampening, nesterov)\n"
        "            float *restrict buf = (float *)a[q->arg + 2];\n"
        "            const float lr = (float)q->h[0], mom = (float)q->h[1], wd = (float)q->h[2];\n"
        "            const int first = t == 1, nesterov = q->h[4] != 0;\n"
        "            const float keep = first ? 0.0f : mom;\n"
        "            const float take = first ? 1.0f : 1.0f - (float)q->h[3];\n"
        "#pragma omp simd\n"
        "            for (int64_t i = lo; i < hi; i++) {\n"
        "                float d = gr[i] * inv + wd * w[i];\n"
        "                float bi = keep * buf[i] + take * d;\n"
        "                buf[i] = bi;\n"
        "                w[i] -= lr * (nesterov ? d + mom * bi : bi);\n"
        "            }\n"
        "        } else if (q->op == 2) { // SGD without momentum\n"
        "            const float lr = (float)q->h[0], wd = (float)q->h[2];\n"
        "#pragma omp simd\n"
        "            for (int64_t i = lo; i < hi; i++)\n"
        "                w[i] -= lr * (gr[i] * inv + wd * w[i]);\n"
        "        } else if (q->op == 3) { // running statistic: (1 - momentum) buf + momentum * "
        "factor * stat\n"
        "            const float keep = (float)(1 - q->h[0]), take = (float)(q->h[0] * q->h[1]);\n"
        "#pragma omp simd\n"
        "            for (int64_t i = lo; i < hi; i++)\n"
        "                w[i] = keep * w[i] + take * gr[i];\n"
        "        }\n"
        "    }\n");
    return 0;
}

// ---- the translation unit -----------------------------------------------

static const char tc_abi[] =
    "typedef struct tc_rt {\n"
    "    int (*call)(void *ctx, int gi, char *const *a);\n"
    "    void *ctx;\n"
    "    uint64_t step; // the training step t, from 1 (compiled_set_step)\n"
    "} tc_rt;\n"
    "typedef struct tc_chunk { // one piece of one tensor of an update kernel\n"
    "    int op, arg;           // kind; slot of the tensor's first operand in a\n"
    "    int amp;               // grad scaler: its first operand's slot after arg, or -1\n"
    "    int64_t lo, hi;        // element range\n"
    "    double h[5];           // hyperparameters\n"
    "} tc_chunk;\n"
    "static inline double tc_powi(double x, uint64_t n) {\n"
    "    double r = 1.0;\n"
    "    for (; n; n >>= 1, x *= x)\n"
    "        if (n & 1)\n"
    "            r *= x;\n"
    "    return r;\n"
    "}\n"
    "// f16 (IEEE half, stored as uint16_t) to and from f32: F16C where the\n"
    "// target has it (eight values an instruction, round to nearest even)\n"
    "#if defined(__F16C__)\n"
    "#include <immintrin.h>\n"
    "static inline float tc_h2f(uint16_t h) { return _cvtsh_ss(h); }\n"
    "static inline uint16_t tc_f2h(float x) { return (uint16_t)_cvtss_sh(x, 0); }\n"
    "#else\n"
    "static inline float tc_h2f(uint16_t h) {\n"
    "    uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, u;\n"
    "    if (e == 31) u = s | 0x7f800000u | (m << 13);\n"
    "    else if (e) u = s | ((e + 112) << 23) | (m << 13);\n"
    "    else if (!m) u = s;\n"
    "    else { float f = (float)m * 0x1p-24f; memcpy(&u, &f, 4); u |= s; }\n"
    "    float f;\n"
    "    memcpy(&f, &u, 4);\n"
    "    return f;\n"
    "}\n"
    "static inline uint16_t tc_f2h(float f) {\n"
    "    uint32_t x;\n"
    "    memcpy(&x, &f, 4);\n"
    "    uint32_t s = (x >> 16) & 0x8000u, ex = (x >> 23) & 0xffu, m = x & 0x7fffffu;\n"
    "    if (ex == 0xff) return (uint16_t)(s | 0x7c00u | (m ? 0x200u | (m >> 13) : 0));\n"
    "    int e = (int)ex - 112;\n"
    "    if (e >= 31) return (uint16_t)(s | 0x7c00u);\n"
    "    if (e <= 0) {\n"
    "        if (e < -10) return (uint16_t)s;\n"
    "        m |= 0x800000u;\n"
    "        int sh = 14 - e;\n"
    "        uint32_t h = m >> sh, r = m & ((1u << sh) - 1), mid = 1u << (sh - 1);\n"
    "        return (uint16_t)(s | (h + (r > mid || (r == mid && (h & 1)))));\n"
    "    }\n"
    "    uint32_t h = ((uint32_t)e << 10) | (m >> 13), r = m & 0x1fffu;\n"
    "    return (uint16_t)(s | (h + (r > 0x1000u || (r == 0x1000u && (h & 1)))));\n"
    "}\n"
    "#endif\n"
    "static inline void tc_h2f_n(float *restrict d, const uint16_t *restrict s, int64_t n) {\n"
    "    int64_t i = 0;\n"
    "#if defined(__F16C__)\n"
    "    for (; i + 8 <= n; i += 8)\n"
    "        _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));\n"
    "#endif\n"
    "    for (; i < n; i++)\n"
    "        d[i] = tc_h2f(s[i]);\n"
    "}\n"
    "static inline void tc_f2h_n(uint16_t *restrict d, const float *restrict s, int64_t n) {\n"
    "    int64_t i = 0;\n"
    "#if defined(__F16C__)\n"
    "    for (; i + 8 <= n; i += 8)\n"
    "        _mm_storeu_si128((__m128i *)(d + i), _mm256_cvtps_ph(_mm256_loadu_ps(s + i), 0));\n"
    "#endif\n"
    "    for (; i < n; i++)\n"
    "        d[i] = tc_f2h(s[i]);\n"
    "}\n"
    "// bf16 (stored as uint16_t) to and from f32: a shift, and round to nearest\n"
    "// even on the bits (NaN made quiet, subnormals kept), as dtype.c's; plain\n"
    "// loops, which vectorize\n"
    "static inline float tc_b2f(uint16_t h) {\n"
    "    uint32_t u = (uint32_t)h << 16;\n"
    "    float f;\n"
    "    memcpy(&f, &u, 4);\n"
    "    return f;\n"
    "}\n"
    "static inline uint16_t tc_f2b(float f) {\n"
    "    uint32_t x;\n"
    "    memcpy(&x, &f, 4);\n"
    "    uint32_t r = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;\n"
    "    return (uint16_t)((x & 0x7fffffffu) > 0x7f800000u ? (x >> 16) | 0x40u : r);\n"
    "}\n"
    "static inline void tc_b2f_n(float *restrict d, const uint16_t *restrict s, int64_t n) {\n"
    "#pragma omp simd\n"
    "    for (int64_t i = 0; i < n; i++)\n"
    "        d[i] = tc_b2f(s[i]);\n"
    "}\n"
    "static inline void tc_f2b_n(uint16_t *restrict d, const float *restrict s, int64_t n) {\n"
    "#pragma omp simd\n"
    "    for (int64_t i = 0; i < n; i++)\n"
    "        d[i] = tc_f2b(s[i]);\n"
    "}\n"
    "void cblas_sgemm(int order, int ta, int tb, int m, int n, int k, float alpha,\n"
    "                 const float *a, int lda, const float *b, int ldb, float beta, float *c,\n"
    "                 int ldc);\n"
    "void cblas_sgemv(int order, int trans, int m, int n, float alpha, const float *a, int lda,\n"
    "                 const float *x, int incx, float beta, float *y, int incy);\n";

// An embedded engine header, less its header guard.
static void prelude_put(sbuf *out, const char *pre) {
    const char *guard = strstr(pre, "#pragma once\n");
    if (guard) {
        sbuf_printf(out, "%.*s", (int)(guard - pre), pre);
        pre = guard + strlen("#pragma once\n");
    }
    sbuf_puts(out, pre);
    sbuf_puts(out, "\n");
}

static int emit_group(cprog *p, kgroup *k, sbuf *b) {
    kgen g = {.p = p, .k = k, .b = b};
    int rc;
    switch (k->kind) {
    case KG_POINTWISE: rc = emit_pointwise(&g); break;
    case KG_ROWREDUCE: rc = emit_row(&g); break;
    case KG_GEMM: rc = emit_gemm(&g); break;
    case KG_CONV: rc = emit_conv(&g); break;
    case KG_COPY: rc = emit_copy(&g); break;
    case KG_UPDATE: rc = emit_update(&g); break;
    default: rc = emit_extern(&g); break;
    }
    if (g.body.oom)
        b->oom = true;
    free(g.body.s);
    return rc;
}

// The pointer expression for operand node v in tc_step.
static void pointer_of(const cprog *p, int v, char *buf, size_t cap) {
    const cnode *c = &p->info[v];
    int base = c->store == CS_VIEW ? c->base : v;
    int64_t eoff = c->store == CS_VIEW ? c->lay.offset : 0;
    size_t es = dtype_size(p->g->nodes[v].dtype);
    const cnode *bc = &p->info[base];
    if (bc->store == CS_SOURCE || bc->store == CS_CONST) // constants: filled by the runtime
        snprintf(buf, cap, "ext[%d] + %lld", base, (long long)(eoff * (int64_t)es));
    else
        snprintf(buf, cap, "arena + %lld", (long long)(bc->offset + eoff * (int64_t)es));
}

char *compile_codegen_c(cprog *p) {
    sbuf out = {0}, body = {0};
    char **bodies = calloc((size_t)p->ngroups + 1, sizeof *bodies);
    int nk = 0;
    if (!bodies)
        return NULL;
    sbuf_printf(&out,
                "// Generated by tcbench for model '%s': %d kernel groups.\n"
                "#include <math.h>\n#include <stdint.h>\n#include <string.h>\n#include <omp.h>\n\n",
                p->m->name, p->ngroups);
    // the eager kernels' math and pointwise formulas, less their header guards
    prelude_put(&out, compile_prelude_math);
    prelude_put(&out, compile_prelude_pointwise);
    sbuf_puts(&out, tc_abi);
    // eager's GEMM threading (after tc_abi's cblas_sgemm declaration)
    prelude_put(&out, compile_prelude_gemm);
    for (int gi = 0; gi < p->ngroups; gi++) {
        kgroup *k = &p->groups[gi];
        sbuf_reset(&body);
        if (emit_group(p, k, &body) < 0 || body.oom || p->err[0])
            goto fail;
        int found = -1;
        for (int i = 0; i < nk && found < 0; i++)
            if (strcmp(bodies[i], body.s ? body.s : "") == 0)
                found = i;
        if (found < 0) {
            bodies[nk] = strdup(body.s ? body.s : "");
            if (!bodies[nk])
                goto fail;
            sbuf_printf(&out,
                        "\n// %s\nstatic void k%d(char *const *a, const tc_rt *rt, int gi) {\n"
                        "    (void)rt;\n    (void)gi;\n%s}\n",
                        op_name(p->g->nodes[k->anchor >= 0 ? k->anchor : k->nodes[0]].op), nk,
                        bodies[nk]);
            found = nk++;
        }
        k->kernel = found;
    }
    sbuf_puts(&out, "\ntypedef void (*tc_kernel)(char *const *, const tc_rt *, int);\n");
    sbuf_puts(&out, "const tc_kernel tc_kernels[] = {");
    for (int i = 0; i < nk; i++)
        sbuf_printf(&out, "%sk%d", i ? ", " : "", i);
    sbuf_printf(&out, "};\nconst int tc_nkernels = %d;\n\n", nk);
    sbuf_puts(&out, "void tc_step(char *const *ext, char *arena, const tc_rt *rt) {\n");
    sbuf_puts(&out, "    (void)ext;\n    (void)arena;\n");
    for (int gi = 0; gi < p->ngroups; gi++) {
        kgroup *k = &p->groups[gi];
        sbuf_puts(&out, "    {\n        char *const a[] = {");
        int nops = compile_group_operands(p, k, NULL, 0);
        int *ops = malloc((size_t)(nops ? nops : 1) * sizeof *ops);
        if (!ops)
            goto fail;
        compile_group_operands(p, k, ops, nops);
        for (int i = 0; i < nops; i++) {
            char ptr[96];
            pointer_of(p, ops[i], ptr, sizeof ptr);
            sbuf_printf(&out, "%s%s", i ? ", " : "", ptr);
        }
        free(ops);
        if (nops == 0)
            sbuf_puts(&out, "0");
        sbuf_printf(&out, "};\n        k%d(a, rt, %d);\n    }\n", k->kernel, gi);
    }
    sbuf_puts(&out, "}\n");
    for (int i = 0; i < nk; i++)
        free(bodies[i]);
    free(bodies);
    free(body.s);
    if (out.oom) {
        free(out.s);
        return NULL;
    }
    return out.s;
fail:
    for (int i = 0; i < nk; i++)
        free(bodies[i]);
    free(bodies);
    free(body.s);
    free(out.s);
    return NULL;
}
