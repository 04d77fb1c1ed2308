// Shared by the two halves of modeldef: loading (modeldef.c) and building
// (modeldef_build.c). The YAML tree is kept from load to build: every node
// knows its line and column, so each error of either phase points at the
// text that caused it.
#pragma once
#include "expr.h"
#include "modeldef.h"
#include "yamldoc.h"

#define MD_MAX_INPUTS 8
#define MD_MAX_LOSS_TERMS 8 // terms of a `mean:` loss

// A tensor name given in the file (an input or an `as:`), for telling
// "used before it exists" from "no such name".
typedef struct md_def {
    const char *name;
    int line, col;
} md_def;

struct modeldef {
    char *path;
    yd_doc *doc;
    const char *name, *family; // point into doc
    int nparams;
    const yd_node **pkey, **pval;
    expr **pexpr;
    md_def *defs;
    int ndefs;
    const yd_node *inputs, *body, *loss, *outputs;
    const yd_node *unbuilt; // the first layer not built yet (modeldef_unbuilt), or NULL
    const yd_node *train_needs; // `train_needs:` (modeldef_train_unbuilt), or NULL
    const yd_node *blocks;  // `blocks:` name -> {params, inputs, body}, or NULL
    const yd_node *checking; // loading: the block whose body is being checked, or NULL
};

#define MD_MAX_BLOCK_DEPTH 16 // blocks calling blocks, this deep at most

// The definition of block `name` (a mapping with params, inputs, body), or
// NULL when the model has no such block.
const yd_node *md_block(const modeldef *md, const char *name);
// The names a block's body starts with (`inputs:`, default one: "x"); n set.
int md_block_ninputs(const yd_node *blk);

int md_param_index(const modeldef *md, const char *name); // -1 when absent
// "$vocab, $seq and $batch", for messages.
void md_param_list(const modeldef *md, char *buf, size_t cap);
// Column of byte `off` of a scalar's text (exact for one-line scalars).
int md_text_col(const yd_node *n, int off);

enum { MD_SC_NULL, MD_SC_BOOL, MD_SC_EXPR, MD_SC_STR };
// What a scalar of a layer is (see modeldef.c); *e is set for MD_SC_EXPR,
// -1 after a syntax error.
int md_scalar_class(const modeldef *md, const yd_node *n, expr **e, diag *d);
