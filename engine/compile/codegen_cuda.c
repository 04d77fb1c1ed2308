// CUDA C code generation (codegen_cuda.h): the lowering of lower.h in the
// CUDA dialect, its loop nests grid-stride loops and its row loops block
// reductions; what only CUDA does (launches, dropout, the update table's
// search, the translation unit) is here.
#include "codegen_cuda.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

extern const char cuda_prelude_text[]; // backend/cuda/cuda_prelude.cuh, embedded at build time
extern const char compile_prelude_pointwise[]; // core/pointwise.h, likewise

#define PW_BLOCK 256 // threads of an elementwise kernel
#define PW_ITEMS 4   // elements per thread per pass
#define MAX_GRID (1u << 20)

// 64-bit indices unless the count and every used arg's furthest offset fit
// comfortably in 32 bits (the grid-stride step is added before the test).
static bool wide(const lgen *g) {
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

// Every kernel's index type, ix, before its pointers.
static void decl_head(lgen *g) {
    sbuf_printf(g->b, "    typedef %s ix;\n", wide(g) ? "long long" : "int");
}

// The elementwise loop: every thread takes PW_ITEMS elements PW_BLOCK
// apart per pass, blocks stride the rest. The body sees j (and o<a>).
static void loop_open(lgen *g) {
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
    lower_row_offsets(g, "r");
}

static void loop_close(lgen *g) { sbuf_puts(g->b, "    }\n    }\n"); }

// ---- row groups: one block a row ---------------------------------------------

static int row_threads(int64_t L) {
    int t = 32;
    while (t < 1024 && t < L)
        t *= 2;
    return t;
}

// Rows over the grid, a row's elements over the block's threads.
static void rows_open(lgen *g, int64_t rows, int64_t L) {
    (void)L;
    sbuf_puts(g->b, "    __shared__ float tc_sh[32];\n");
    sbuf_printf(g->b, "    for (ix r = (ix)blockIdx.x; r < (ix)%lld; r += (ix)gridDim.x) {\n",
                (long long)rows);
}

static void row_loop_open(lgen *g, int64_t L) {
    sbuf_printf(g->b, "        for (ix j = (ix)threadIdx.x; j < (ix)%lld; j += (ix)blockDim.x) {\n",
                (long long)L);
}

// Each thread's partial reductions combined across the block (tc_block_sum
// / tc_block_max, which every thread leaves with the result); row values
// are then computed by every thread and stored by thread 0.
static void row_loop_close(lgen *g, int64_t L, const int *red, int nred) {
    (void)L;
    sbuf_puts(g->b, "        }\n");
    for (int i = 0; i < nred; i++)
        sbuf_printf(g->b, "        acc%d = %s(acc%d, tc_sh);\n", red[i],
                    g->p->g->nodes[g->k->nodes[red[i]]].op == OP_MAX ? "tc_block_max"
                                                                     : "tc_block_sum",
                    red[i]);
}

// ---- GEMM and convolution: the library call is the runtime's ------------------

// The epilogue as an elementwise kernel over the anchor's output, slots 0, 1
// and 2 being the library call's operands and output. Only the args the
// epilogue touches take part in coalescing (the GEMM inputs have other shapes).
static int emit_epilogue(lgen *g) {
    cprog *p = g->p;
    kgroup *k = g->k;
    if (k->rows_in_place) // cuBLAS would write output rows over input rows it has yet to read
        return compile_fail(p, "codegen_cuda: a GEMM planned with its input inside its output "
                               "(plan with gemm_rows_in_place off for CUDA)");
    int target = lower_anchor_args(g);
    if (target < 0)
        return -1;
    const graph *gr = p->g;
    if (gr->nodes[target].dtype != gr->nodes[k->anchor].dtype) // fuse.c's epilogue_keeps_dtype
        return compile_fail(p, "codegen_cuda: %s's epilogue ends in %s, the library writes %s",
                            op_name(gr->nodes[k->anchor].op), dtype_name(gr->nodes[target].dtype),
                            dtype_name(gr->nodes[k->anchor].dtype));
    if (k->n == 1)
        return 0;
    lower_epilogue_iteration(g);
    lower_coalesce(g);
    lower_decl_args(g);
    return lower_epilogue_loop(g, target);
}

// Dropout, which the C generator leaves to the library kernel, is generated
// here: the library kernel takes its mask's key as a launch argument, which
// a captured graph would keep from the step it was recorded in, while this
// loop computes the key from the step in device memory (a.step) at every
// replay. The mask is op_rules.h's: the bit of element i of the output
// (its flat index, which the loop's i is: the output is contiguous and the
// loop walks its shape in order) under key mix(mix(stream + c) + t).
static int emit_dropout(lgen *g) {
    cprog *p = g->p;
    kgroup *k = g->k;
    const graph_node *n = &p->g->nodes[k->anchor];
    int x = n->src[0];
    k->nargs = 0;
    compile_arg_of(k, x);
    compile_arg_of(k, k->anchor);
    lower_set_iteration(g, n->ndim, n->shape);
    lower_coalesce(g);
    lower_decl_args(g);
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
    lower_load(g, 0, ld, sizeof ld);
    snprintf(val, sizeof val, "tc_dropout_keep(key, (uint64_t)i, %uu) ? %s * %s : 0.0f", thr, ld,
             scale);
    lower_index(g, 1, idx, sizeof idx);
    lower_store(g, "        ", 1, idx, val);
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
static int emit_update(lgen *g) {
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
    static const lower_update_form form = {
        .ptrs = "pp",
        .restrict_ = "",
        .bounds = "",
        .loop = "            for (long long i = e0 + threadIdx.x; i < e1; i += blockDim.x)",
        .last_op = "else",
    };
    lower_update_math(b, &form);
    return 0;
}

// CUDA C for NVRTC: grid-stride loops, block reductions, lambdas for
// recomputed values, 32-bit indices (ix) where every offset fits.
static const lower_dialect cuda_dialect = {
    .name = "codegen_cuda",
    .bool_type = "uint8_t",
    .index_type = "ix",
    .index_cast = "(ix)",
    .row_digit = "t_",
    .arg_ptr = "a.p[%d]",
    .maximum = "tc_maximum(x0, x1)",
    .recompute_open = "([&]() -> float { ",
    .recompute_close = "return %s; }())",
    .row_store_guard = "        if (threadIdx.x == 0)\n",
    .decl_head = decl_head,
    .loop_open = loop_open,
    .loop_close = loop_close,
    .rows_open = rows_open,
    .row_loop_open = row_loop_open,
    .row_loop_close = row_loop_close,
};

// Fills the group's operands and writes its kernel body (empty: no kernel).
static int emit_group(cprog *p, kgroup *k, sbuf *b) {
    lgen g = {.p = p, .k = k, .b = b, .d = &cuda_dialect};
    switch (k->kind) {
    case KG_POINTWISE: return lower_pointwise(&g);
    case KG_ROWREDUCE: return lower_row(&g);
    case KG_GEMM:
    case KG_CONV: return emit_epilogue(&g);
    case KG_COPY: return lower_copy(&g);
    case KG_UPDATE: return emit_update(&g);
    default:
        if (is_dropout_group(p, k))
            return emit_dropout(&g);
        lower_extern_args(&g); // the runtime runs the op's eager kernel
        return 0;
    }
}

// ---- launches ----------------------------------------------------------------

static unsigned grid_for(int64_t n, int64_t per) {
    int64_t blocks = (n + per - 1) / per;
    if (blocks < 1)
        blocks = 1;
    return (unsigned)(blocks < MAX_GRID ? blocks : MAX_GRID);
}
int compile_cuda_passes(cprog *p, const model *m, bool fusion, FILE *log) {
    p->m = m;
    p->fusion = fusion;
    p->log = log;
    p->epilogue_keeps_dtype = true;
    return compile_decompose(p) < 0 || compile_quant(p) < 0 || compile_simplify(p) < 0 ||
                   compile_fuse(p) < 0 || compile_plan(p) < 0
               ? -1
               : 0;
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
        const graph_node *full = lower_row_full(p, k);
        if (!full)
            return compile_fail(p, "codegen_cuda: a row group without a reduction");
        int64_t L = full->ndim ? full->shape[full->ndim - 1] : 1;
        out->block = (unsigned)row_threads(L);
        out->grid = grid_for(graph_node_numel(full) / (L ? L : 1), 1);
        return 0;
    }
    case KG_GEMM:
        out->lib = CUDA_LIB_GEMM;
        lower_gemm_desc(p, k, &out->gemm);
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
    lower_put_header(&out, cuda_prelude_text, true);
    // the pointwise formulas, in the prelude's dialect, less their guard
    lower_put_header(&out, compile_prelude_pointwise, false);
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
        bool added;
        int found = lower_kernel_key(texts, &nk, kern.s, &added);
        if (found < 0)
            goto fail;
        if (added) { // the name goes in after the comparison: the text is the key
            const char *at = strstr(kern.s, "TKNAME");
            sbuf_printf(&out, "\n// %s: %s\nextern \"C\" __global__ void %.*stk%d%s",
                        kind_name(k->kind),
                        op_name(p->g->nodes[k->anchor >= 0 ? k->anchor : k->nodes[0]].op),
                        (int)(at - kern.s), kern.s, found, at + strlen("TKNAME"));
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
    lower_kernel_keys_free(texts, nk);
    free(body.s);
    free(kern.s);
    if (out.oom) {
        free(out.s);
        compile_fail(p, "out of memory generating CUDA");
        return NULL;
    }
    return out.s;
fail:
    lower_kernel_keys_free(texts, nk);
    free(body.s);
    free(kern.s);
    free(out.s);
    if (!p->err[0])
        compile_fail(p, "out of memory generating CUDA");
    return NULL;
}
