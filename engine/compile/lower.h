// lower: the lowering both code generators share (codegen_c.c for the CPU,
// codegen_cuda.c for NVRTC). A kernel group becomes a loop body over its
// operands p<a>: index arithmetic for strided and broadcast operands,
// loads and stores with their 16-bit conversions, one temporary v<m> per
// member, recomputed values, the levels of a row reduction, a GEMM's
// operand layouts and the optimizer update's math. What differs between
// the dialects (loop heads, reductions, type and index names, how a kernel
// takes its pointers) is a lower_dialect: data where it is a word, a hook
// where it is a statement.
//
//   static const lower_dialect c_dialect = {.name = "codegen", ...};
//   lgen g = {.p = p, .k = k, .b = &body, .d = &c_dialect};
//   lower_pointwise(&g);   // calls d->loop_open, the members, stores, d->loop_close
#pragma once
#include "compile_internal.h"

#include "base/sbuf.h"

typedef struct lgen lgen;

typedef struct lower_dialect {
    const char *name;       // the prefix of error messages ("codegen")
    const char *bool_type;  // storage of DT_BOOL
    const char *index_type; // row offsets o<a> and the row quotient q
    const char *index_cast; // before a stride constant in an index ("" or "(ix)")
    const char *row_digit;  // one dim's index in the row offsets
    const char *arg_ptr;    // the kernel's pointer to operand %d ("a[%d]")
    const char *maximum;    // OP_MAXIMUM over x0, x1
    // a recomputed value: an expression that declares x0.. and yields the
    // result; open, then the declarations, then close with the template at %s
    const char *recompute_open, *recompute_close;
    // max reductions track NaN in a flag (nan<m>) rather than in the max
    bool max_nan_flag;
    // stored row values are written by one thread: this line before the store
    const char *row_store_guard;
    bool order_by_store; // iterate in the memory order of the first stored buffer
    // before the operands' declarations (a type every index uses)
    void (*decl_head)(lgen *g);
    // after the row offsets of a row (values read once per row)
    void (*row_done)(lgen *g);
    // the elementwise loop nest over the iteration; its body sees j (and o<a>)
    void (*loop_open)(lgen *g);
    void (*loop_close)(lgen *g);
    // a row group's loop over rows r, before the row offsets
    void (*rows_open)(lgen *g, int64_t rows, int64_t L);
    // a loop over the row's elements j; red lists the reductions (members)
    // it accumulates, nred of them (0: the loop that stores full rows)
    void (*row_loop_open)(lgen *g, int64_t L);
    void (*row_loop_close)(lgen *g, int64_t L, const int *red, int nred);
} lower_dialect;

struct lgen {
    cprog *p;
    kgroup *k;
    sbuf *b; // where the body goes
    const lower_dialect *d;
    int nd;                                   // iteration dims
    int64_t shape[TENSOR_MAX_DIMS];           // iteration shape
    int64_t st[KG_MAX_ARGS][TENSOR_MAX_DIMS]; // per-arg strides over it
    bool used[KG_MAX_ARGS];                   // args the loop reads or writes (coalescing)
    int row_level;                            // 0: flat index j; 1: row offsets o<a> + j
    bool hoisted[KG_MAX_ARGS];                // read once per row into h<a>
    // inside an inner loop whose f16 operands with unit stride go through
    // f32 tiles s<a> (codegen_c.c's inner_begin .. inner_end)
    bool inner;
    bool tile_read[KG_MAX_ARGS], tile_write[KG_MAX_ARGS];
    sbuf *outer;         // the C dialect: where the inner loop goes
    sbuf body;           // the inner loop's body, meanwhile
    char lo[48], hi[48]; // the C dialect's inner bounds
};

#define LOWER_EXPR_CAP 2048

// The dialect's storage type of dtype t (16-bit floats as uint16_t).
const char *lower_ctype(const lgen *g, enum dtype t);
// The letter of a 16-bit dtype's conversions: tc_h2f / tc_f2h (f16) or
// tc_b2f / tc_f2b (bf16).
const char *lower_half_tag(enum dtype t);
bool lower_arg_is_half(const lgen *g, int ai);
int lower_member_index(const lgen *g, int v);
// A member's own value (v<m>), not a load.
bool lower_is_member_value(const lgen *g, int v);
// The index of arg ai at the current point of the loop nest.
void lower_index(const lgen *g, int ai, char *buf, size_t cap);
// The value of arg ai at the current point, as a float expression.
void lower_load(lgen *g, int ai, char *buf, size_t cap);
// The value of node v in the loop: a member, a constant, a recomputed value or a load.
void lower_operand(lgen *g, int v, char *buf, size_t cap);
// "p<a>[idx] = val;" with the conversion a 16-bit operand needs.
void lower_store(lgen *g, const char *indent, int ai, const char *idx, const char *val);
// "float v<m>; { x0 = ...; v<m> = <op>; }" for member m.
int lower_member(lgen *g, int m);
// Stores of the stored members m0 .. m1-1 at the current point.
void lower_stores(lgen *g, int m0, int m1);
// The iteration shape and every arg's strides over it (all args used).
void lower_set_iteration(lgen *g, int nd, const int64_t *shape);
// Merge adjacent dims that every used arg steps through as one.
void lower_coalesce(lgen *g);
void lower_order_by_store(lgen *g, int m0);
// Operand pointers p<a>, after d->decl_head.
void lower_decl_args(lgen *g);
// Row offsets o<a> of row r over dims 0 .. nd-2, then d->row_done.
void lower_row_offsets(lgen *g, const char *r);
// Register every operand members first_member.. read or store.
int lower_collect_args(lgen *g, int first_member);
// The buffer a GEMM or convolution writes: its own, or the last member's.
int lower_anchor_target(const lgen *g);
// A GEMM's or convolution's slots 0, 1 and 2, its operands and the buffer
// it writes (each in its own slot even when both operands are one node,
// x @ x), then the epilogue's operands. The target, or -1.
int lower_anchor_args(lgen *g);
// An epilogue's iteration: the anchor's output shape, the strides of every
// operand over it; slots 0 and 1 (the library call's inputs, of other
// shapes) take part in coalescing only where a member reads them.
void lower_epilogue_iteration(lgen *g);
// An epilogue at the current point: v0 the target's value, then members 1.. .
int lower_epilogue_body(lgen *g, int target);
// The epilogue over the iteration in the dialect's elementwise loop.
int lower_epilogue_loop(lgen *g, int target);
// The groups both dialects write the same way.
int lower_pointwise(lgen *g);
int lower_copy(lgen *g);
int lower_row(lgen *g);
// The row a row group reduces (the first reduction's input).
const graph_node *lower_row_full(const cprog *p, const kgroup *k);
// An extern op's operands: its non-constant sources, then itself.
void lower_extern_args(lgen *g);

// A GEMM's operands as row-major matrices with leading dimensions (as
// cuda_blas.c and cblas take them), its batch dims after folding what
// shares B into M. Slots: A is kgroup.args[0], B args[1], C args[2].
typedef struct lower_gemm {
    int ta, tb;
    int64_t M, N, K, lda, ldb;
    int nb; // batch dims left after folding batches into M
    int64_t bshape[TENSOR_MAX_DIMS], sa[TENSOR_MAX_DIMS], sb[TENSOR_MAX_DIMS];
} lower_gemm;

void lower_gemm_desc(const cprog *p, const kgroup *k, lower_gemm *d);

// The update kernel's per-chunk math (AdamW, SGD, running statistics) in a
// dialect, inside its loop over chunks: q points to the chunk's row, t0 is
// the step; the form's loop walks the chunk's elements i.
typedef struct lower_update_form {
    const char *ptrs;      // the operand pointer array ("a")
    const char *restrict_; // "restrict " or ""
    const char *bounds;    // after the pointers: a declaration of the bounds, or ""
    const char *loop;      // the element loop's head, over i
    const char *last_op;   // the branch of the last op ("else if (q->op == 3)")
} lower_update_form;

void lower_update_math(sbuf *b, const lower_update_form *f);

// An engine header as text, less its `#pragma once` line (and what stands
// before it unless head).
void lower_put_header(sbuf *out, const char *text, bool head);

// Kernels keyed by their text: the index of text among the first *n, or
// added as the next one (-1: out of memory).
int lower_kernel_key(char **texts, int *n, const char *text, bool *added);
// Frees the n texts and the array.
void lower_kernel_keys_free(char **texts, int n);
