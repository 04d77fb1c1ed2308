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
#include "kcache.h"
#include "lower.h"

#include <cblas.h>

#include "backend/cpu/cpu_gemm_par.h" // CPU_GEMV_ROWS, CPU_GEMV_PAR_WORK
#include "backend/cpu/cpu_quant.h"    // cpu_quant_gemv_form

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PAR_MIN 32768

extern const char compile_prelude_math[];      // cpu_math.h, embedded at build time
extern const char compile_prelude_gemm[];      // cpu_gemm_par.h, likewise
extern const char compile_prelude_pointwise[]; // core/pointwise.h, likewise

// Elements per f16 tile: a few KiB of stack per staged operand.
#define TILE 256

// An inner loop over j in [lo, hi): its body is written between
// inner_begin and inner_end into a buffer of its own, so that inner_end
// knows which f16 operands it touched and wraps it in tiles for them.
static void inner_begin(lgen *g, sbuf *body) {
    g->outer = g->b;
    g->b = body;
    sbuf_reset(body);
    g->inner = true;
    memset(g->tile_read, 0, sizeof g->tile_read);
    memset(g->tile_write, 0, sizeof g->tile_write);
}

static const char *tag(const lgen *g, int ai) {
    return lower_half_tag(g->p->g->nodes[g->k->args[ai]].dtype);
}

static void inner_end(lgen *g, sbuf *body, const char *ind, const char *lo, const char *hi,
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
            sbuf_printf(b, "%s    tc_%s2f_n(s%d, p%d + %s%d + jt, jn);\n", ind, tag(g, a), a, a,
                        g->row_level ? "o" : "", g->row_level ? a : 0);
    }
    sbuf_printf(b,
                "#pragma omp simd%s\n%s    for (int64_t j = jt; j < jt + jn; j++) {\n%s%s    }\n",
                clauses, ind, body->s ? body->s : "", ind);
    for (int a = 0; a < g->k->nargs; a++)
        if (g->tile_write[a])
            sbuf_printf(b, "%s    tc_f2%s_n(p%d + %s%d + jt, s%d, jn);\n", ind, tag(g, a), a,
                        g->row_level ? "o" : "", g->row_level ? a : 0, a);
    sbuf_printf(b, "%s}\n", ind);
}

// An operand that does not move along the inner loop (a per-channel scale,
// a bias on its row) is read once per row into a local, so the compiler can
// hoist what is computed from it: it cannot move loads past the kernel's
// stores by itself, not knowing they do not alias.
static bool writes(const lgen *g, int v) {
    if (g->p->info[v].store != CS_BUFFER)
        return false;
    if (g->k->anchor == v || g->p->info[v].group == g->p->info[g->k->nodes[0]].group)
        return true;
    return false;
}

static void emit_hoists(lgen *g, bool rows) {
    for (int a = 0; a < g->k->nargs; a++) {
        g->hoisted[a] = false;
        if (g->st[a][g->nd - 1] != 0 || writes(g, g->k->args[a]))
            continue;
        const graph_node *n = &g->p->g->nodes[g->k->args[a]];
        char at[32];
        snprintf(at, sizeof at, rows ? "p%d[o%d]" : "p%d[0]", a, a);
        if (dtype_is_half(n->dtype))
            sbuf_printf(g->b, "        const float h%d = tc_%s2f(%s);\n", a,
                        lower_half_tag(n->dtype), at);
        else
            sbuf_printf(g->b, "        const %s h%d = %s;\n", lower_ctype(g, n->dtype), a, at);
        g->hoisted[a] = true;
    }
}

static void row_done(lgen *g) { emit_hoists(g, true); }

// Open the loop nest over the iteration shape; the body sees j (and o<a>).
static void loop_open(lgen *g) {
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
    lower_row_offsets(g, "r");
    snprintf(g->lo, sizeof g->lo, "0");
    snprintf(g->hi, sizeof g->hi, "%lld", (long long)g->shape[g->nd - 1]);
    inner_begin(g, &g->body);
}

// A group that only casts one contiguous operand between f32 and a 16-bit
// type (an AMP weight or activation cast): the conversion runs straight
// between the operands, as eager's does, instead of staging the 16-bit side
// in a tile and copying element by element. The output's operand index, or
// -1 when the group is not one.
static int plain_cast_out(const lgen *g) {
    const kgroup *k = g->k;
    if (k->n != 1 || k->nargs != 2 || g->row_level || g->nd != 1 ||
        g->p->g->nodes[k->nodes[0]].op != OP_CAST || g->st[0][0] != 1 || g->st[1][0] != 1)
        return -1;
    int o = k->args[0] == k->nodes[0] ? 0 : k->args[1] == k->nodes[0] ? 1 : -1;
    if (o < 0)
        return -1;
    enum dtype to = g->p->g->nodes[k->args[o]].dtype, from = g->p->g->nodes[k->args[1 - o]].dtype;
    bool half_to = dtype_is_half(to) && from == DT_F32,
         half_from = dtype_is_half(from) && to == DT_F32;
    return half_to || half_from ? o : -1;
}

static void loop_close(lgen *g) {
    int o = plain_cast_out(g);
    if (o >= 0) { // the body lowered is dropped
        g->b = g->outer;
        g->inner = false;
        int i = 1 - o;
        bool to_half = lower_arg_is_half(g, o);
        sbuf_printf(g->b, "        tc_%s%s_n(p%d + j0, p%d + j0, j1 - j0);\n",
                    to_half ? "f2" : tag(g, i), to_half ? tag(g, o) : "2f", o, i);
        sbuf_puts(g->b, "    }\n");
        return;
    }
    inner_end(g, &g->body, "    ", g->lo, g->hi, "");
    sbuf_puts(g->b, "    }\n");
}

// ---- row groups: the C dialect's reduction loops (lower_row) ---------------

static void c_rows_open(lgen *g, int64_t rows, int64_t L) {
    sbuf_printf(g->b, "#pragma omp parallel for if (%lld >= %d) schedule(static)\n",
                (long long)(rows * L), PAR_MIN);
    sbuf_printf(g->b, "    for (int64_t r = 0; r < %lld; r++) {\n", (long long)rows);
}

static void c_row_loop_open(lgen *g, int64_t L) {
    (void)L;
    inner_begin(g, &g->body);
}

// An `omp simd` loop over the row; its reductions are the loop's clauses.
static void c_row_loop_close(lgen *g, int64_t L, const int *red, int nred) {
    char clauses[FUSE_MAX_MEMBERS * 24] = "", hi[32];
    size_t o = 0;
    for (int i = 0; i < nred; i++) {
        int m = red[i];
        bool max = g->p->g->nodes[g->k->nodes[m]].op == OP_MAX;
        if (o < sizeof clauses) // FUSE_MAX_MEMBERS clauses fit; stay safe regardless
            o += (size_t)snprintf(clauses + o, sizeof clauses - o, " reduction(%s:acc%d)",
                                  max ? "max" : "+", m);
        if (max && o < sizeof clauses)
            o += (size_t)snprintf(clauses + o, sizeof clauses - o, " reduction(|:nan%d)", m);
    }
    snprintf(hi, sizeof hi, "%lld", (long long)L);
    inner_end(g, &g->body, "        ", "0", hi, clauses);
}

// ---- GEMM and convolution with epilogues --------------------------------

// The epilogue over output rows [r0, r1) (C expressions), each row's
// elements in an inner simd loop.
// ... over columns [j0, j1) of those rows (C expressions).
static int emit_epilogue_block(lgen *g, int target, const char *r0, const char *r1, const char *j0,
                               const char *j1) {
    sbuf *b = g->b;
    sbuf_printf(b, "        for (int64_t r = %s; r < %s; r++) {\n", r0, r1);
    lower_row_offsets(g, "r");
    g->row_level = 1;
    inner_begin(g, &g->body);
    if (lower_epilogue_body(g, target) < 0)
        return -1;
    inner_end(g, &g->body, "        ", j0, j1, "");
    sbuf_puts(b, "        }\n");
    return 0;
}

static int emit_epilogue_rows(lgen *g, int target, const char *r0, const char *r1, int64_t N) {
    char hi[32];
    snprintf(hi, sizeof hi, "%lld", (long long)N);
    return emit_epilogue_block(g, target, r0, r1, "0", hi);
}

static int emit_library_anchor(lgen *g, int target);

// A GEMM whose input A (M, K) lies in the first bytes of its output (M, N),
// N >= 2K (plan.c, rows in place): output rows [r0, r1) with
// r0 = ceil(r1 K / N) occupy bytes from r0 N on, past input rows [0, r1), so
// chunks from the last row down never write over a row not yet read. Once
// the rows left hold at most ROWS_COPY_MAX input floats (and at most an
// eighth of the input), they are copied to the stack and done last by the
// matrix-vector kernels (no packing of the weight for a few rows:
// measured against a second GEMM call, which packs all of it again). The
// chunks before are row blocks over the threads with their epilogue, as the
// plain GEMM's.
#define ROWS_COPY_MAX 4096

static int emit_gemm_rows_in_place(lgen *g, int target, int64_t M, int64_t N, int64_t K,
                                   const char *TB, int64_t ldb) {
    sbuf *b = g->b;
    bool epi = g->k->n > 1;
    int64_t left = M; // rows still to do after the chunks: the copied ones
    int64_t limit = M * K / 8 < ROWS_COPY_MAX ? M * K / 8 : ROWS_COPY_MAX;
    while (left > 1 && left * K > limit)
        left = (left * K + N - 1) / N;
    // too little work for threads: no parallel region at all, not an
    // inactive one (OpenBLAS threaded the sgemv this once called there, and
    // libgomp made that nested team anew each call: 0.1 ms for
    // deeprecommender's (4 x 32) @ (32 x 512)), and plain loops
    bool par = (double)M * N * K >= PAR_MIN * 8.0;
    if (par)
        sbuf_puts(b, "    int nt = omp_get_max_threads();\n"
                     "    int64_t parts = nt > 1 ? nt : 1;\n");
    else
        sbuf_puts(b, "    int64_t parts = 1;\n");
    sbuf_printf(b, "    float rows0[%lld];\n", (long long)(left * K));
    sbuf_printf(b, "    memcpy(rows0, p0, sizeof rows0);\n");
    if (par)
        sbuf_puts(b, "#pragma omp parallel if (parts > 1)\n");
    sbuf_puts(b, "    {\n");
    sbuf_printf(b, "    for (int64_t r1 = %lld, r0; r1 > %lld; r1 = r0) {\n", (long long)M,
                (long long)left);
    sbuf_printf(b, "        r0 = (r1 * %lld + %lld) / %lld;\n", (long long)K, (long long)(N - 1),
                (long long)N);
    sbuf_printf(b, "        if (r0 < %lld)\n            r0 = %lld;\n", (long long)left,
                (long long)left);
    if (par)
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
    // the copied rows, once every chunk has read its rows: the
    // matrix-vector kernels (cpu_gemm_par.h), CPU_GEMV_ROWS rows at a time,
    // their columns over the threads; then their epilogue, a row a thread
    sbuf_printf(b, "    for (int64_t r0 = 0; r0 < %lld; r0 += CPU_GEMV_ROWS) {\n", (long long)left);
    sbuf_printf(b, "        int64_t nr = %lld - r0 < CPU_GEMV_ROWS ? %lld - r0 : CPU_GEMV_ROWS;\n",
                (long long)left, (long long)left);
    if (par)
        sbuf_puts(b, "#pragma omp for schedule(static)\n");
    sbuf_puts(b, "        for (int64_t t = 0; t < parts; t++)\n");
    sbuf_printf(
        b,
        "            cpu_gemv(%s, nr, cpu_gemv_col(%lld, t, parts), cpu_gemv_col(%lld, t + 1, "
        "parts), %lld, rows0 + r0 * %lld, %lld, p1, %lld, 0.0f, p2 + r0 * %lld, %lld);\n",
        TB, (long long)N, (long long)N, (long long)K, (long long)K, (long long)K, (long long)ldb,
        (long long)N, (long long)N);
    sbuf_puts(b, "    }\n");
    if (epi) {
        if (par)
            sbuf_puts(b, "#pragma omp for schedule(static)\n");
        sbuf_printf(b, "    for (int64_t ri = 0; ri < %lld; ri++) {\n", (long long)left);
        if (emit_epilogue_rows(g, target, "ri", "ri + 1", N) < 0)
            return -1;
        sbuf_puts(b, "    }\n");
    }
    sbuf_puts(b, "    }\n");
    return 0;
}

static int emit_gemm(lgen *g) {
    cprog *p = g->p;
    kgroup *k = g->k;
    const graph_node *an = &p->g->nodes[k->anchor];
    // operands 0, 1 and the target come first so every GEMM reads them alike
    int target = lower_anchor_args(g);
    if (target < 0)
        return -1;
    if (lower_arg_is_half(g, 0) || lower_arg_is_half(g, 1) ||
        lower_arg_is_half(g, 2)) // 16-bit: eager's kernel, then the epilogue
        return emit_library_anchor(g, target);
    lower_gemm d;
    lower_gemm_desc(p, k, &d);
    int nb = d.nb;
    int64_t M = d.M, N = d.N, K = d.K, lda = d.lda, ldb = d.ldb;
    int64_t nbatch = shape_numel(nb, d.bshape);
    bool ta = d.ta, tb = d.tb;
    // the epilogue walks the output's own dims: rows are global row
    // indices of the contiguous output, whatever the GEMM folded
    lower_set_iteration(g, an->ndim, an->shape);
    lower_decl_args(g);
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
        for (int di = nb - 1; di >= 0; di--) {
            sbuf_printf(&loop, "        { int64_t i = qb %% %lld; qb /= %lld;",
                        (long long)d.bshape[di], (long long)d.bshape[di]);
            sbuf_printf(&loop, " oa += i * %lld; ob += i * %lld; }\n", (long long)d.sa[di],
                        (long long)d.sb[di]);
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
    // A few rows of A (a decoding step's matrix-vector products): the
    // kernel may be one member of a run of them in one parallel region
    // (compile_gemv_runs, tc_step), rt->parts > 0 then asking for the
    // columns of part rt->part alone, the GEMM's and the epilogue's, on
    // the calling thread: the split cpu_sgemm_par makes of the same GEMM.
    if (!ta && M <= CPU_GEMV_ROWS) {
        k->gemv_cols = true;
        sbuf_puts(b, "    if (rt->parts) {\n");
        sbuf_printf(b,
                    "        int64_t j0 = cpu_gemv_col(%lld, rt->part, rt->parts), "
                    "j1 = cpu_gemv_col(%lld, rt->part + 1, rt->parts);\n",
                    (long long)N, (long long)N);
        sbuf_printf(b,
                    "        cpu_sgemm_cols(%s, %lld, j0, j1, %lld, p0, %lld, p1, %lld, p2, "
                    "%lld);\n",
                    TB, (long long)M, (long long)K, (long long)lda, (long long)ldb, (long long)N);
        char rows[32];
        snprintf(rows, sizeof rows, "%lld", (long long)M);
        if (epi && emit_epilogue_block(g, target, "0", rows, "j0", "j1") < 0)
            return -1;
        sbuf_puts(b, "        return;\n    }\n");
    }
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
static int emit_library_anchor(lgen *g, int target) {
    lower_decl_args(g);
    sbuf_puts(g->b, "    rt->call(rt->ctx, gi, a);\n");
    if (g->k->n == 1)
        return 0;
    lower_epilogue_iteration(g);
    lower_order_by_store(g, 0);
    lower_coalesce(g);
    return lower_epilogue_loop(g, target);
}

static int emit_conv(lgen *g) {
    cprog *p = g->p;
    kgroup *k = g->k;
    int target = lower_anchor_args(g); // slots 0, 1, 2 as the runtime call expects them
    if (target < 0)
        return -1;
    // an epilogue oneDNN can run as post-ops is done inside the call
    conv_post posts[CONV_POST_MAX];
    if (compile_conv_posts(p, k, posts) >= 0) {
        lower_decl_args(g);
        sbuf_puts(g->b, "    rt->call(rt->ctx, gi, a);\n");
        return 0;
    }
    return emit_library_anchor(g, target);
}

// Whether node v's elements lie in order where its kernel argument points
// (as program.c's wrap_arg sees it: a view's or a buffer's own layout, else
// contiguous).
static bool arg_contiguous(const cprog *p, int v) {
    const cnode *c = &p->info[v];
    bool own = c->store == CS_VIEW || (c->store == CS_BUFFER && c->lay.ndim == p->g->nodes[v].ndim);
    return !own || clayout_is_contiguous(&c->lay);
}

// A QLINEAR in cpu_qgemm's matrix-vector form (a decode step's quantized
// linears): f32 x, bias and output, each contiguous, at most
// CPU_QGEMM_GEMV_MAX rows, the form cpu_qgemm would take. Its kernel calls
// the engine's qgemv through tc_qgemv (cpu_qgemv_cols) itself, rather than
// through the runtime's extern call, so that it can compute one thread's
// columns alone inside a run (compile_gemv_runs), as a GEMM's kernel does.
static bool qlinear_gemv(const cprog *p, const kgroup *k) {
    const graph_node *n = &p->g->nodes[k->anchor];
    if (n->op != OP_QLINEAR || n->nsrc < 3 || (n->ia[0] != 4 && n->ia[0] != 8) || n->ia[1] < 1 ||
        n->ia[2] < 1)
        return false;
    const graph_node *x = &p->g->nodes[n->src[0]], *q = &p->g->nodes[n->src[1]],
                     *s = &p->g->nodes[n->src[2]];
    int64_t K = n->ia[2], M = graph_node_numel(x) / K;
    bool ok = x->dtype == DT_F32 && n->dtype == DT_F32 &&
              q->dtype == (n->ia[0] == 8 ? DT_I8 : DT_U8) &&
              (s->dtype == DT_F32 || s->dtype == DT_F16) && graph_node_numel(x) == M * K &&
              cpu_quant_gemv_form(M);
    for (int i = 0; ok && i < n->nsrc; i++)
        ok = arg_contiguous(p, n->src[i]) && p->info[n->src[i]].store != CS_CONST &&
             (i < 3 || p->g->nodes[n->src[i]].dtype == DT_F32);
    return ok && arg_contiguous(p, k->anchor);
}

static int emit_qgemv(lgen *g) {
    const cprog *p = g->p;
    kgroup *k = g->k;
    const graph_node *n = &p->g->nodes[k->anchor], *x = &p->g->nodes[n->src[0]];
    int64_t K = n->ia[2], M = graph_node_numel(x) / K, N = p->g->nodes[n->src[1]].shape[0];
    int out = compile_arg_of(k, k->anchor), bias = n->nsrc > 3 ? compile_arg_of(k, n->src[3]) : -1;
    char bexpr[32] = "0", call[256];
    if (bias >= 0)
        snprintf(bexpr, sizeof bexpr, "(const float *)a[%d]", bias);
    snprintf(call, sizeof call,
             "tc_qgemv(%d, %lld, %lld, %lld, %lld, (const float *)a[%d], a[%d], %d, a[%d], %s, "
             "(float *)a[%d], ",
             (int)n->ia[0], (long long)n->ia[1], (long long)M, (long long)N, (long long)K,
             compile_arg_of(k, n->src[0]), compile_arg_of(k, n->src[1]),
             p->g->nodes[n->src[2]].dtype == DT_F16, compile_arg_of(k, n->src[2]), bexpr, out);
    k->gemv_cols = true;
    sbuf_printf(
        g->b,
        "    if (rt->parts) {\n"
        "        %scpu_gemv_col(%lld, rt->part, rt->parts), cpu_gemv_col(%lld, rt->part + 1, "
        "rt->parts), 0);\n"
        "        return;\n"
        "    }\n"
        "    %s0, %lld, 1);\n",
        call, (long long)N, (long long)N, call, (long long)N);
    return 0;
}

static int emit_extern(lgen *g) {
    lower_extern_args(g);
    if (qlinear_gemv(g->p, g->k))
        return emit_qgemv(g);
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
static int emit_update(lgen *g) {
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
    sbuf_puts(b, "        const tc_chunk *q = &ch[c];\n");
    static const lower_update_form form = {
        .ptrs = "a",
        .restrict_ = "restrict ",
        .bounds = "        const int64_t lo = q->lo, hi = q->hi;\n",
        .loop = "#pragma omp simd\n            for (int64_t i = lo; i < hi; i++)",
        .last_op = "else if (q->op == 3)",
    };
    lower_update_math(b, &form);
    return 0;
}

// ---- the translation unit -----------------------------------------------

static const char tc_abi[] =
    "typedef struct tc_rt {\n"
    "    int (*call)(void *ctx, int gi, char *const *a);\n"
    "    void *ctx;\n"
    "    uint64_t step; // the training step t, from 1 (compiled_set_step)\n"
    "    int part, parts; // parts > 0: a run's member computes part `part` alone\n"
    "} tc_rt;\n"
    "typedef void (*tc_qgemv_fn)(int bits, int64_t group, int64_t M, int64_t N, int64_t K,\n"
    "                            const float *x, const void *q, int half_scales,\n"
    "                            const void *scales, const float *bias, float *y, int64_t j0,\n"
    "                            int64_t j1, int par); // cpu_quant.h's cpu_qgemv_fn\n"
    "extern tc_qgemv_fn tc_qgemv;\n"
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
    "// (the compiler's builtins, not <immintrin.h>: that header alone costs\n"
    "// every compiler run 0.2 s)\n"
    "#if defined(__F16C__)\n"
    "typedef short tc_v8hi __attribute__((vector_size(16)));\n"
    "typedef float tc_v4sf __attribute__((vector_size(16)));\n"
    "typedef float tc_v8sf __attribute__((vector_size(32)));\n"
    "static inline float tc_h2f(uint16_t h) {\n"
    "    tc_v8hi v = {(short)h, 0, 0, 0, 0, 0, 0, 0};\n"
    "    return __builtin_ia32_vcvtph2ps(v)[0];\n"
    "}\n"
    "static inline uint16_t tc_f2h(float x) {\n"
    "    tc_v4sf v = {x, 0, 0, 0};\n"
    "    return (uint16_t)__builtin_ia32_vcvtps2ph(v, 0)[0];\n"
    "}\n"
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
    "    for (; i + 8 <= n; i += 8) {\n"
    "        tc_v8hi h;\n"
    "        memcpy(&h, s + i, sizeof h);\n"
    "        tc_v8sf f = __builtin_ia32_vcvtph2ps256(h);\n"
    "        memcpy(d + i, &f, sizeof f);\n"
    "    }\n"
    "#endif\n"
    "    for (; i < n; i++)\n"
    "        d[i] = tc_h2f(s[i]);\n"
    "}\n"
    "static inline void tc_f2h_n(uint16_t *restrict d, const float *restrict s, int64_t n) {\n"
    "    int64_t i = 0;\n"
    "#if defined(__F16C__)\n"
    "    for (; i + 8 <= n; i += 8) {\n"
    "        tc_v8sf f;\n"
    "        memcpy(&f, s + i, sizeof f);\n"
    "        tc_v8hi h = __builtin_ia32_vcvtps2ph256(f, 0);\n"
    "        memcpy(d + i, &h, sizeof h);\n"
    "    }\n"
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
    "                 int ldc);\n";

// An embedded engine header, less its header guard.
static void prelude_put(sbuf *out, const char *pre) {
    lower_put_header(out, pre, true);
    sbuf_puts(out, "\n");
}

// C for the system compiler: OpenMP loops, `omp simd` reductions, f16
// through tiles, GNU statement expressions.
static const lower_dialect c_dialect = {
    .name = "codegen",
    .bool_type = "unsigned char",
    .index_type = "int64_t",
    .index_cast = "",
    .row_digit = "i",
    .arg_ptr = "a[%d]",
    .maximum = "(x0 != x0 || x0 > x1) ? x0 : x1",
    .recompute_open = "({ ",
    .recompute_close = "%s; })",
    .max_nan_flag = true,
    .order_by_store = true,
    .row_done = row_done,
    .loop_open = loop_open,
    .loop_close = loop_close,
    .rows_open = c_rows_open,
    .row_loop_open = c_row_loop_open,
    .row_loop_close = c_row_loop_close,
};

static int emit_group(cprog *p, kgroup *k, sbuf *b) {
    lgen g = {.p = p, .k = k, .b = b, .d = &c_dialect};
    int rc;
    switch (k->kind) {
    case KG_POINTWISE: rc = lower_pointwise(&g); break;
    case KG_ROWREDUCE: rc = lower_row(&g); break;
    case KG_GEMM: rc = emit_gemm(&g); break;
    case KG_CONV: rc = emit_conv(&g); break;
    case KG_COPY: rc = lower_copy(&g); break;
    case KG_UPDATE: rc = emit_update(&g); break;
    default: rc = emit_extern(&g); break;
    }
    if (g.body.oom)
        b->oom = true;
    free(g.body.s);
    return rc;
}

// Shape-generic kernels. A pointwise, row or copy kernel's plain decimal
// integers (sizes, strides, offsets, tile bounds, the parallel test) are
// lifted out of its text: each occurrence becomes tc_P[i], a row of
// tc_kp that belongs to the group, so layers of one form and different
// shapes share one compiled kernel (rexnet_100's AMP training step: 540
// kernels, 74 forms). What C needs constant stays: preprocessor lines but
// an OpenMP `if` clause, array declarators, 0 and 1 (loop starts, unit
// strides), and floats, hex and suffixed numbers.
typedef struct lifted {
    sbuf text;
    int64_t *vals; // this kernel's lifted values, in order
    int n, cap;
} lifted;

static bool ident_char(char c) { return isalnum((unsigned char)c) || c == '_'; }

static bool type_word(const char *w, size_t n) {
    static const char *const types[] = {"float", "double", "int", "int64_t", "int32_t", "uint8_t",
                                        "uint16_t", "uint32_t", "uint64_t", "char", "short",
                                        "long", "unsigned", "size_t", "_Float16", NULL};
    for (int i = 0; types[i]; i++)
        if (strlen(types[i]) == n && !strncmp(types[i], w, n))
            return true;
    return false;
}

static int lift_push(lifted *l, int64_t v) {
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        int64_t *nv = realloc(l->vals, (size_t)cap * sizeof *nv);
        if (!nv)
            return -1;
        l->vals = nv, l->cap = cap;
    }
    l->vals[l->n++] = v;
    return 0;
}

// body's text into l->text with its liftable integers as tc_P[i], their
// values appended to l->vals (i counts from this body's first). -1 when
// memory runs out.
static int lift_literals(const char *body, lifted *l) {
    sbuf_reset(&l->text);
    int first = l->n;
    for (const char *line = body; *line;) {
        const char *eol = strchr(line, '\n');
        const char *end = eol ? eol + 1 : line + strlen(line);
        const char *q = line;
        while (q < end && (*q == ' ' || *q == '\t'))
            q++;
        bool pragma = *q == '#';
        // a line C wants constant throughout
        bool keep = false;
        for (const char *w = line; !pragma && w < end && !keep; w++)
            keep = !strncmp(w, "static", 6) || !strncmp(w, "__attribute__", 13) ||
                   !strncmp(w, "_Alignas", 8) || !strncmp(w, "case ", 5) ||
                   !strncmp(w, "__builtin", 9);
        int if_depth = 0, decl_depth = 0;
        bool in_if = false;
        const char *prev = NULL, *prev2 = NULL; // the last two words
        size_t prevn = 0, prev2n = 0;
        for (const char *c = line; c < end;) {
            if (c[0] == '/' && c + 1 < end && c[1] == '/') { // a comment: the rest
                sbuf_printf(&l->text, "%.*s", (int)(end - c), c);
                break;
            }
            if (*c == '"' || *c == '\'') { // a string or character constant, whole
                const char *e = c + 1;
                while (e < end && *e != *c)
                    e += *e == '\\' ? 2 : 1;
                e = e < end ? e + 1 : end;
                sbuf_printf(&l->text, "%.*s", (int)(e - c), c);
                c = e;
                continue;
            }
            if (ident_char(*c) && !isdigit((unsigned char)*c)) { // a word
                const char *e = c;
                while (e < end && ident_char(*e))
                    e++;
                sbuf_printf(&l->text, "%.*s", (int)(e - c), c);
                if (pragma && e - c == 2 && !strncmp(c, "if", 2) && !in_if) {
                    const char *o = e;
                    while (o < end && *o == ' ')
                        o++;
                    in_if = o < end && *o == '(';
                    if_depth = 0;
                }
                prev2 = prev, prev2n = prevn;
                prev = c, prevn = (size_t)(e - c);
                c = e;
                continue;
            }
            if (isdigit((unsigned char)*c) || (*c == '.' && c + 1 < end && isdigit((unsigned char)c[1]))) {
                const char *e = c;
                bool plain = true;
                while (e < end && (ident_char(*e) || *e == '.' ||
                                   ((*e == '+' || *e == '-') && e > c &&
                                    (e[-1] == 'e' || e[-1] == 'E' || e[-1] == 'p' || e[-1] == 'P')))) {
                    plain &= isdigit((unsigned char)*e) != 0;
                    e++;
                }
                size_t n = (size_t)(e - c);
                bool unit = n == 1 && (*c == '0' || *c == '1');
                bool lift = plain && !unit && n <= 18 && !keep && decl_depth == 0 &&
                            (pragma ? in_if && if_depth > 0 : true);
                if (lift) {
                    if (lift_push(l, strtoll(c, NULL, 10)) < 0)
                        return -1;
                    sbuf_printf(&l->text, "tc_P[%d]", l->n - 1 - first);
                } else {
                    sbuf_printf(&l->text, "%.*s", (int)n, c);
                }
                prev = prev2 = NULL;
                c = e;
                continue;
            }
            if (*c == '(' && in_if)
                if_depth++;
            if (*c == ')' && in_if && --if_depth == 0)
                in_if = false;
            // `type name[`: a declarator, constant inside; and a[i], the
            // operand slots, the kernel's form itself
            if (*c == '[' && (decl_depth > 0 || (prev && prev2 && type_word(prev2, prev2n)) ||
                              (prev && prevn == 1 && *prev == 'a')))
                decl_depth++;
            else if (*c == ']' && decl_depth > 0)
                decl_depth--;
            if (*c != ' ' && *c != '*' && *c != '[' && *c != ']')
                prev = prev2 = NULL;
            sbuf_printf(&l->text, "%c", *c);
            c++;
        }
        line = end;
    }
    return l->text.oom ? -1 : 0;
}

int compile_lift_literals(const char *body, char **text, int64_t **vals, int *n) {
    lifted l = {0};
    int rc = lift_literals(body, &l);
    *text = rc == 0 ? l.text.s : NULL;
    *vals = rc == 0 ? l.vals : NULL;
    *n = rc == 0 ? l.n : 0;
    if (rc < 0) {
        free(l.text.s);
        free(l.vals);
    }
    return rc;
}

// Where operand node v lives in tc_step: *base, the ext slot (sources and
// constants, filled by the runtime) or -1 for the arena, and a byte offset.
static void operand_of(const cprog *p, int v, int *base, int64_t *off) {
    const cnode *c = &p->info[v];
    int b = c->store == CS_VIEW ? c->base : v;
    int64_t eoff = c->store == CS_VIEW ? c->lay.offset : 0;
    int64_t es = (int64_t)dtype_size(p->g->nodes[v].dtype);
    const cnode *bc = &p->info[b];
    if (bc->store == CS_SOURCE || bc->store == CS_CONST) {
        *base = b;
        *off = eoff * es;
    } else {
        *base = -1;
        *off = (int64_t)bc->offset + eoff * es;
    }
}

// Every group's kernel into out, in order of first use (k->kernel set).
// Pass 1 emits each group's text and, for the kinds that may be
// shape-generic, its lifted form, each deduplicated (sk, lk: the distinct
// texts); pass 2 takes a lifted form only where two or more distinct texts
// share it, the others keep their constants, and writes the group's lifted
// values to kp from kpo[gi]. *nk: the kernels. -1 on failure (p->err, or
// out of memory).
static int emit_kernels(cprog *p, bool lift_on, sbuf *out, sbuf *kp, int32_t *kpo, int *nk) {
    int G = p->ngroups, nsk = 0, nlk = 0, nkp = 0;
    size_t n1 = (size_t)G + 1;
    sbuf body = {0};
    lifted lf = {0};
    char **sk = calloc(n1, sizeof *sk), **lk = calloc(n1, sizeof *lk);
    int *sid = calloc(n1, sizeof *sid), *lid = calloc(n1, sizeof *lid);
    int *voff = calloc(n1, sizeof *voff), *vn = calloc(n1, sizeof *vn);
    int *lfirst = calloc(n1, sizeof *lfirst), *skern = malloc(n1 * sizeof *skern),
        *lkern = malloc(n1 * sizeof *lkern);
    bool *lmulti = calloc(n1, sizeof *lmulti);
    int rc = sk && lk && sid && lid && voff && vn && lfirst && skern && lkern && lmulti ? 0 : -1;
    for (int i = 0; rc == 0 && i <= G; i++)
        skern[i] = lkern[i] = -1; // not emitted yet
    *nk = 0;
    for (int gi = 0; gi < G && rc == 0; gi++) {
        kgroup *k = &p->groups[gi];
        bool added;
        sbuf_reset(&body);
        lid[gi] = -1;
        if (emit_group(p, k, &body) < 0 || body.oom || p->err[0] ||
            (sid[gi] = lower_kernel_key(sk, &nsk, body.s ? body.s : "", &added)) < 0) {
            rc = -1;
            break;
        }
        if (!lift_on || !(k->kind == KG_POINTWISE || k->kind == KG_ROWREDUCE || k->kind == KG_COPY))
            continue;
        voff[gi] = lf.n;
        if (lift_literals(body.s ? body.s : "", &lf) < 0 ||
            (lid[gi] = lower_kernel_key(lk, &nlk, lf.text.s ? lf.text.s : "", &added)) < 0) {
            rc = -1;
            break;
        }
        vn[gi] = lf.n - voff[gi];
        if (added)
            lfirst[lid[gi]] = sid[gi];
        else if (lfirst[lid[gi]] != sid[gi])
            lmulti[lid[gi]] = true;
    }
    for (int gi = 0; gi < G && rc == 0; gi++) {
        kgroup *k = &p->groups[gi];
        bool generic = lid[gi] >= 0 && lmulti[lid[gi]];
        int *kern = generic ? &lkern[lid[gi]] : &skern[sid[gi]];
        kpo[gi] = nkp;
        for (int i = 0; generic && i < vn[gi]; i++)
            sbuf_printf(kp, "%lld,%s", (long long)lf.vals[voff[gi] + i], ++nkp % 16 ? "" : "\n");
        if (*kern < 0) {
            *kern = (*nk)++;
            sbuf_printf(out,
                        "\n" KCACHE_PART "// %s\nTC_KERNEL void k%d(char *const *a, const tc_rt *rt, int gi) {\n"
                        "    (void)rt;\n    (void)gi;\n%s%s}\n",
                        op_name(p->g->nodes[k->anchor >= 0 ? k->anchor : k->nodes[0]].op), *kern,
                        generic ? "    const int64_t *const restrict tc_P = tc_kp + tc_kpo[gi];\n" : "",
                        generic ? lk[lid[gi]] : sk[sid[gi]]);
        }
        k->kernel = *kern;
    }
    if (sk)
        lower_kernel_keys_free(sk, nsk);
    if (lk)
        lower_kernel_keys_free(lk, nlk);
    free(body.s);
    free(lf.text.s);
    free(lf.vals);
    free(sid);
    free(lid);
    free(voff);
    free(vn);
    free(lfirst);
    free(skern);
    free(lkern);
    free(lmulti);
    return rc;
}

// ---- runs of matrix-vector GEMMs -------------------------------------------

// The bytes operand v's data lies in: base as operand_of gives it (an ext
// index, or -1 for the arena) and [lo, hi) there (a view: its base's whole
// extent).
static void operand_span(const cprog *p, int v, int *base, int64_t *lo, int64_t *hi) {
    int b = p->info[v].store == CS_VIEW ? p->info[v].base : v;
    operand_of(p, b, base, lo);
    *hi = *lo + (int64_t)graph_node_bytes(&p->g->nodes[b]);
}

static bool member_of(const kgroup *k, int v) {
    for (int m = 0; m < k->n; m++)
        if (k->nodes[m] == v)
            return true;
    return false;
}

// A buffer whose elements lie in order: no layout of its own (program.c's
// wrap_arg), or a contiguous one.
static bool contiguous_buffer(const cprog *p, int v) {
    return p->info[v].store == CS_BUFFER && arg_contiguous(p, v);
}

// Whether group b may follow group a in a run: b's operands and a's share
// no bytes, but for both reading the same node, and for b's epilogue
// (operands past the GEMM's three) reading a's output where each thread
// wrote it: a contiguous buffer of the shape both GEMMs compute, so the
// same column split.
static bool run_compatible(const cprog *p, const kgroup *a, const kgroup *b) {
    const graph_node *bn = &p->g->nodes[b->anchor];
    bool same = compile_same_shape(&p->g->nodes[a->anchor], bn);
    for (int i = 0; i < b->nargs; i++) {
        int u = b->args[i], ub;
        int64_t ulo, uhi;
        bool uw = member_of(b, u);
        operand_span(p, u, &ub, &ulo, &uhi);
        for (int j = 0; j < a->nargs; j++) {
            int w = a->args[j], wb;
            int64_t wlo, whi;
            bool ww = member_of(a, w);
            if (u == w) {
                if (!uw && !ww)
                    continue; // both read it
                if (!uw && ww && i >= 3 && b->kind == KG_GEMM && same && contiguous_buffer(p, w) &&
                    compile_same_shape(&p->g->nodes[w], bn))
                    continue; // b's epilogue reads a's output, column by column
                return false;
            }
            operand_span(p, w, &wb, &wlo, &whi);
            if (ub == wb && ulo < whi && wlo < uhi && (uw || ww))
                return false; // bytes one writes that the other reads or writes
        }
    }
    return true;
}

// A GEMM group's multiply-adds (a QLINEAR's: M x N x K).
static double gemm_work(const cprog *p, const kgroup *k) {
    const graph_node *n = &p->g->nodes[k->anchor];
    if (k->kind != KG_GEMM)
        return (double)graph_node_numel(n) * (double)n->ia[2];
    lower_gemm d;
    lower_gemm_desc(p, k, &d);
    return (double)d.M * (double)d.N * (double)d.K;
}

int compile_gemv_runs(const cprog *p, int *run) {
    const char *off = getenv("TCBENCH_DISABLE_GEMV_RUNS");
    bool on = !(off && *off && strcmp(off, "0") != 0);
    for (int gi = 0; gi < p->ngroups;) {
        const kgroup *k = &p->groups[gi];
        int L = 1;
        double work = k->gemv_cols ? gemm_work(p, k) : 0;
        while (on && k->gemv_cols && gi + L < p->ngroups && L < GEMV_RUN_MAX) {
            const kgroup *b = &p->groups[gi + L];
            bool ok = b->gemv_cols && b->args[0] == k->args[0];
            for (int i = 0; ok && i < L; i++)
                ok = run_compatible(p, &p->groups[gi + i], b);
            if (!ok)
                break;
            work += gemm_work(p, b);
            L++;
        }
        if (L > 1 && work < CPU_GEMV_PAR_WORK)
            L = 1; // too little for the threads: each alone, as before
        run[gi] = L;
        for (int i = 1; i < L; i++)
            run[gi + i] = 0;
        gi += L;
    }
    return 0;
}

char *compile_codegen_c(cprog *p) {
    sbuf out = {0}, groups = {0}, kp = {0};
    int32_t *kpo = calloc((size_t)p->ngroups + 1, sizeof *kpo);
    int nk = 0;
    // TCBENCH_DISABLE_SHAPE_GENERIC=1: every kernel keeps its integers
    const char *off = getenv("TCBENCH_DISABLE_SHAPE_GENERIC");
    bool lift_on = !(off && *off && strcmp(off, "0"));
    if (!kpo)
        return NULL;
    sbuf_printf(&out,
                "// Generated by tcbench for model '%s': %d kernel groups.\n"
                "#include <math.h>\n#include <stdint.h>\n#include <string.h>\n#include <omp.h>\n\n",
                p->m->name, p->ngroups);
    // the eager kernels' math and pointwise formulas, less their header guards
    prelude_put(&out, compile_prelude_math);
    prelude_put(&out, compile_prelude_pointwise);
    sbuf_puts(&out, tc_abi);
    // eager's GEMM threading (after tc_abi's cblas_sgemm declaration), its
    // matrix-vector kernels the engine's own through tc_gemv (cpu_gemm_par.h)
    sbuf_puts(&out, "#define CPU_GEMV_EXTERN 1\n");
    prelude_put(&out, compile_prelude_gemm);
    // kcache may compile the kernels in parts, in parallel (kcache.h): each
    // kernel then links across parts, hidden from outside the library
    sbuf_puts(&out, "#ifdef TC_PARTS\n#define TC_KERNEL __attribute__((visibility(\"hidden\")))\n"
                    "#else\n#define TC_KERNEL static\n#endif\n");
    // the lifted integers of the shape-generic kernels, defined in the tail
    sbuf_puts(&out, "#define TC_KDATA __attribute__((visibility(\"hidden\")))\n"
                    "extern TC_KDATA const int64_t tc_kp[];\n"
                    "extern TC_KDATA const int32_t tc_kpo[];\n");
    if (emit_kernels(p, lift_on, &out, &kp, kpo, &nk) < 0)
        goto fail;
    sbuf_puts(&out, "\n" KCACHE_TAIL);
    // set by the loader to the engine's matrix-vector kernel (program.c)
    sbuf_puts(&out, "cpu_gemv_fn tc_gemv;\n");
    // and to the engine's quantized one (cpu_quant.h's cpu_qgemv_fn)
    sbuf_puts(&out, "tc_qgemv_fn tc_qgemv;\n");
    // the lifted values: each group's row of tc_kp starts at tc_kpo[gi]
    sbuf_printf(&out, "TC_KDATA const int64_t tc_kp[] = {%s};\n", kp.s ? kp.s : "0");
    sbuf_puts(&out, "TC_KDATA const int32_t tc_kpo[] = {");
    for (int gi = 0; gi < p->ngroups; gi++)
        sbuf_printf(&out, "%d,%s", kpo[gi], gi % 16 == 15 ? "\n" : "");
    sbuf_puts(&out, p->ngroups ? "};\n" : "0};\n");
    for (int i = 0; i < nk; i++)
        sbuf_printf(&out, "TC_KERNEL void k%d(char *const *, const tc_rt *, int);\n", i);
    sbuf_puts(&out, "\ntypedef void (*tc_kernel)(char *const *, const tc_rt *, int);\n");
    sbuf_puts(&out, "const tc_kernel tc_kernels[] = {");
    for (int i = 0; i < nk; i++)
        sbuf_printf(&out, "%sk%d", i ? ", " : "", i);
    sbuf_printf(&out, "};\nconst int tc_nkernels = %d;\n\n", nk);
    // tc_step walks a table of the groups and their operands (an ext index,
    // or -1 for the arena, and a byte offset each): one straight-line call
    // per group made a function that took the C compiler longer than all
    // the kernels of a large model, for no faster a step
    int maxops = 1, nall = 0;
    sbuf_puts(&out, "static const int64_t tc_ops[][2] = {\n");
    // per group: its kernel, its first operand in tc_ops, how many
    sbuf_puts(&groups, "static const int32_t tc_groups[][3] = {\n");
    for (int gi = 0; gi < p->ngroups; gi++) {
        kgroup *k = &p->groups[gi];
        int nops = compile_group_operands(p, k, NULL, 0);
        int *ops = malloc((size_t)(nops ? nops : 1) * sizeof *ops);
        if (!ops)
            goto fail;
        compile_group_operands(p, k, ops, nops);
        sbuf_printf(&groups, "{%d,%d,%d},%s", k->kernel, nall, nops, gi % 8 == 7 ? "\n" : "");
        for (int i = 0; i < nops; i++) {
            int base;
            int64_t off;
            operand_of(p, ops[i], &base, &off);
            sbuf_printf(&out, "{%d,%lld},", base, (long long)off);
            if (++nall % 8 == 0)
                sbuf_puts(&out, "\n");
        }
        free(ops);
        if (nops > maxops)
            maxops = nops;
    }
    sbuf_puts(&out, nall ? "};\n" : "{0,0}};\n");
    sbuf_puts(&groups, p->ngroups ? "};\n" : "{0,0,0}};\n");
    sbuf_puts(&out, groups.s);
    // runs of matrix-vector GEMMs (compile_gemv_runs): the length of the
    // run each group starts, 0 inside one; a run is one parallel region
    // in which every thread computes its columns of each member in turn
    int *run = malloc((size_t)(p->ngroups ? p->ngroups : 1) * sizeof *run);
    if (!run)
        goto fail;
    compile_gemv_runs(p, run);
    bool runs = false;
    for (int gi = 0; gi < p->ngroups; gi++)
        runs |= run[gi] > 1;
    if (runs) {
        sbuf_puts(&out, "static const int8_t tc_run[] = {");
        for (int gi = 0; gi < p->ngroups; gi++)
            sbuf_printf(&out, "%d,%s", run[gi], gi % 32 == 31 ? "\n" : "");
        sbuf_puts(&out, "};\n");
    }
    free(run);
    sbuf_printf(&out,
                "\nstatic void tc_operands(char *const *ext, char *arena, int gi, char **a) {\n"
                "    const int32_t *g = tc_groups[gi];\n"
                "    for (int i = 0; i < g[2]; i++) {\n"
                "        const int64_t *o = tc_ops[g[1] + i];\n"
                "        a[i] = (o[0] < 0 ? arena : ext[o[0]]) + o[1];\n"
                "    }\n"
                "}\n"
                "\nvoid tc_step(char *const *ext, char *arena, const tc_rt *rt) {\n"
                "    char *a[%d] = {0};\n"
                "    for (int gi = 0; gi < %d;) {\n",
                maxops, p->ngroups);
    if (runs)
        sbuf_printf(&out,
                    "        int L = tc_run[gi];\n"
                    "        if (L > 1 && omp_get_max_threads() > 1) {\n"
                    "            char *ra[%d][%d];\n"
                    "            for (int r = 0; r < L; r++)\n"
                    "                tc_operands(ext, arena, gi + r, ra[r]);\n"
                    "#pragma omp parallel\n"
                    "            {\n"
                    "                tc_rt pr = *rt;\n"
                    "                pr.part = omp_get_thread_num();\n"
                    "                pr.parts = omp_get_num_threads();\n"
                    "                for (int r = 0; r < L; r++)\n"
                    "                    tc_kernels[tc_groups[gi + r][0]](ra[r], &pr, gi + r);\n"
                    "            }\n"
                    "            gi += L;\n"
                    "            continue;\n"
                    "        }\n",
                    GEMV_RUN_MAX, maxops);
    sbuf_puts(&out, "        tc_operands(ext, arena, gi, a);\n"
                    "        tc_kernels[tc_groups[gi][0]](a, rt, gi);\n"
                    "        gi++;\n"
                    "    }\n"
                    "}\n");
    free(kpo);
    if (groups.oom || kp.oom)
        out.oom = true;
    free(kp.s);
    free(groups.s);
    if (out.oom) {
        free(out.s);
        return NULL;
    }
    return out.s;
fail:
    free(kpo);
    free(kp.s);
    free(groups.s);
    free(out.s);
    return NULL;
}
