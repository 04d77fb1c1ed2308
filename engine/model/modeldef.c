// Loading a model file: checks the template's structure (keys, layer names,
// expression syntax, parameter names) so that `tcbench check` reports a
// mistake before anything is built (modeldef.h, docs/yaml.md). Building is
// in modeldef_build.c.
#include "modeldef_internal.h"

#include "base/strdist.h"
#include "model/nn/nn.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const char *const model_keys[] = {"name", "family", "params",  "inputs",      "blocks",
                                         "body", "loss",   "outputs", "train_needs", NULL};

// What a model's training may need that the engine does not build
// (`train_needs:`): its train entries end model_fail_to_load with the reason,
// its inference entries run.
static const char *const train_needs_names[] = {"second_order_gradients", "inference_only",
                                                NULL};
static const char *const train_needs_reasons[] = {
    "training needs second-order gradients: the loss differentiates a gradient (MAML's "
    "meta-gradient through an inner SGD loop), and the engine's backward pass is not itself "
    "differentiable; not built yet",
    "no training: the benchmark runs this model for inference only (no parameters, no loss)",
};
static const char *const block_keys[] = {"params", "inputs", "body", NULL};
static const char *const input_keys[] = {"shape", "dtype", "range", NULL};
static const char *const repeat_keys[] = {"repeat", "body", "input", "as", "shared", NULL};
static const char *const residual_keys[] = {"residual", "input", "as", NULL};

const char *modeldef_name(const modeldef *md) { return md->name; }
const char *modeldef_family(const modeldef *md) { return md->family; }

void modeldef_free(modeldef *md) {
    if (!md)
        return;
    for (int i = 0; i < md->nparams; i++)
        expr_free(md->pexpr[i]);
    free(md->pkey);
    free(md->pval);
    free(md->pexpr);
    free(md->defs);
    yd_free(md->doc);
    free(md->path);
    free(md);
}

const yd_node *md_block(const modeldef *md, const char *name) {
    return md->blocks ? yd_get(md->blocks, name) : NULL;
}

int md_block_ninputs(const yd_node *blk) {
    const yd_node *in = yd_get(blk, "inputs");
    return !in ? 1 : in->kind == YD_SEQ ? in->n : 1;
}

// The parameter `name` of block blk (its default's node), or NULL.
static const yd_node *block_param(const yd_node *blk, const char *name) {
    const yd_node *p = blk ? yd_get(blk, "params") : NULL;
    return p && p->kind == YD_MAP ? yd_get_key(p, name) : NULL;
}

// "$out, $kernel" of a block, for messages.
static void block_param_list(const yd_node *blk, char *buf, size_t cap) {
    const yd_node *p = yd_get(blk, "params");
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; p && p->kind == YD_MAP && i < p->n && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s$%s", i ? ", " : "", p->keys[i]->str);
    if (!o)
        snprintf(buf, cap, "none");
}

int md_param_index(const modeldef *md, const char *name) {
    for (int i = 0; i < md->nparams; i++)
        if (!strcmp(md->pkey[i]->str, name))
            return i;
    return -1;
}

void md_param_list(const modeldef *md, char *buf, size_t cap) {
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < md->nparams && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s$%s", i ? ", " : "", md->pkey[i]->str);
    if (o < cap)
        snprintf(buf + o, cap - o, "%s$batch", o ? " and " : "");
}

static bool is_ident(const char *s) {
    if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z')))
        return false;
    for (; *s; s++)
        if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
              (*s >= '0' && *s <= '9')))
            return false;
    return true;
}

// Column of byte `off` of a scalar's text (exact for one-line scalars).
int md_text_col(const yd_node *n, int off) { return n->text_col + (off > 0 ? off : 0); }

// ---------------------------------------------------------------- scalars

// What a scalar is: plain null, plain true/false, an expression (numbers
// too), or a word. Quoted text is a word unless it holds a '$'. A plain
// scalar that fails to parse is a word unless it holds '$' or an operator,
// in which case the syntax error is reported. *e is set for MD_SC_EXPR.
int md_scalar_class(const modeldef *md, const yd_node *n, expr **e, diag *d) {
    *e = NULL;
    bool b;
    if (yd_is_null(n))
        return MD_SC_NULL;
    if (yd_is_bool(n, &b))
        return MD_SC_BOOL;
    if (!n->plain && !strchr(n->str, '$'))
        return MD_SC_STR;
    int off;
    char err[256];
    if (expr_parse(n->str, e, &off, err, sizeof err) == 0)
        return MD_SC_EXPR;
    if (!expr_looks_like(n->str))
        return MD_SC_STR;
    return diag_set(d, md->path, n->line, md_text_col(n, off), "%s", err);
}

typedef struct {
    const modeldef *md;
    const yd_node *n;
    diag *d;
    int rc;
} var_check;

static void check_var(void *ctx, const char *name, int off) {
    var_check *v = ctx;
    if (v->rc < 0 || !strcmp(name, "batch") || md_param_index(v->md, name) >= 0 ||
        block_param(v->md->checking, name))
        return;
    char list[256], blist[256] = "";
    md_param_list(v->md, list, sizeof list);
    if (v->md->checking)
        block_param_list(v->md->checking, blist, sizeof blist);
    v->rc = diag_set(v->d, v->md->path, v->n->line, md_text_col(v->n, off),
                     "unknown parameter $%s; the parameters are %s%s%s", name, list,
                     v->md->checking ? ", and the block's " : "", blist);
}

static int check_vars(const modeldef *md, const yd_node *n, const expr *e, diag *d) {
    var_check v = {md, n, d, 0};
    expr_each_var(e, check_var, &v);
    return v.rc;
}

// A scalar that must be an expression (a param, a shape entry, a count).
static int check_expr(const modeldef *md, const yd_node *n, const char *what, diag *d) {
    if (n->kind != YD_SCALAR || yd_is_null(n))
        return diag_set(d, md->path, n->line, n->col, "%s must be a number or an expression", what);
    int off;
    char err[256];
    expr *e;
    if (expr_parse(n->str, &e, &off, err, sizeof err) < 0)
        return diag_set(d, md->path, n->line, md_text_col(n, off), "%s: %s", what, err);
    int rc = check_vars(md, n, e, d);
    expr_free(e);
    return rc;
}

// A layer's value: scalars of any class, lists of them.
static int check_value(const modeldef *md, const yd_node *n, diag *d) {
    if (n->kind == YD_MAP)
        return diag_set(d, md->path, n->line, n->col,
                        "a layer's value must be a number, word, expression or list, not a "
                        "mapping");
    if (n->kind == YD_SEQ) {
        for (int i = 0; i < n->n; i++)
            if (check_value(md, n->vals[i], d) < 0)
                return -1;
        return 0;
    }
    expr *e;
    int c = md_scalar_class(md, n, &e, d);
    if (c < 0)
        return -1;
    int rc = e ? check_vars(md, n, e, d) : 0;
    expr_free(e);
    return rc;
}

// ---------------------------------------------------------------- loading

static int add_def(modeldef *md, const yd_node *n, diag *d) {
    md_def *p = realloc(md->defs, (size_t)(md->ndefs + 1) * sizeof *p);
    if (!p)
        return diag_set(d, md->path, 0, 0, "out of memory loading the model");
    md->defs = p;
    md->defs[md->ndefs++] = (md_def){n->str, n->line, n->col};
    return 0;
}

static int check_name(const modeldef *md, const yd_node *n, const char *what, diag *d) {
    if (n->kind != YD_SCALAR || yd_is_null(n))
        return diag_set(d, md->path, n->line, n->col, "%s must be a tensor name, not %s", what,
                        n->kind == YD_SCALAR ? "empty" : yd_kind_name(n->kind));
    return yd_check_name(md->doc, n, what, false, d);
}

// `input: x` or `input: [., skip]`; `as: y` or `as: [q, k, v]`.
static int check_names(modeldef *md, const yd_node *n, const char *what, bool define, diag *d) {
    int cnt = n->kind == YD_SEQ ? n->n : 1;
    if (n->kind == YD_SEQ && n->n == 0)
        return diag_set(d, md->path, n->line, n->col, "'%s' is an empty list", what);
    if (cnt > (define ? NN_MAX_OUT : MD_MAX_INPUTS))
        return diag_set(d, md->path, n->line, n->col, "'%s' names %d tensors; at most %d", what,
                        cnt, define ? NN_MAX_OUT : MD_MAX_INPUTS);
    for (int i = 0; i < cnt; i++) {
        const yd_node *v = n->kind == YD_SEQ ? n->vals[i] : n;
        if (check_name(md, v, what, d) < 0)
            return -1;
        if (define && !strcmp(v->str, "."))
            return diag_set(d, md->path, v->line, v->col,
                            "'.' is the previous output; `as:` needs a new name");
        if (define && add_def(md, v, d) < 0)
            return -1;
    }
    return 0;
}

static int unknown_layer(const modeldef *md, const yd_node *k, diag *d) {
    // the built layers first, then those known but not built
    const char *const *names = nn_layer_names();
    int best = strdist_closest(k->str, names, 2);
    if (best < 0)
        best = strdist_closest(k->str, names = nn_unbuilt_names(), 2);
    if (best >= 0)
        return diag_set(d, md->path, k->line, k->col, "unknown layer '%s'; did you mean '%s'?",
                        k->str, names[best]);
    return diag_set(d, md->path, k->line, k->col,
                    "unknown layer '%s'; docs/yaml.md lists the layers", k->str);
}

// A layer known of but not built yet (nn_layer_unbuilt): the first one is
// kept for modeldef_unbuilt, and the file goes on being checked (its keys,
// the names it defines) as any other. false for any other name.
static bool note_unbuilt(modeldef *md, const yd_node *k) {
    if (!nn_layer_unbuilt(k->str))
        return false;
    if (!md->unbuilt)
        md->unbuilt = k;
    return true;
}

bool modeldef_unbuilt(const modeldef *md, diag *d) {
    if (!md->unbuilt)
        return false;
    diag_set(d, md->path, md->unbuilt->line, md->unbuilt->col, "layer '%s' is not built yet (%s)",
             md->unbuilt->str, nn_layer_unbuilt(md->unbuilt->str));
    return true;
}

static int check_steps(modeldef *md, const yd_node *seq, const char *what, diag *d);

// A call of a block, `- name: {param: value, input: ..., as: ...}` (v NULL
// for `- name`): its keys are the block's parameters, every required one
// is given, its inputs are as many as the block's at most.
static int check_call(modeldef *md, const yd_node *k, const yd_node *v, diag *d) {
    const yd_node *blk = md_block(md, k->str), *params = yd_get(blk, "params");
    if (v && yd_is_null(v))
        v = NULL;
    if (v && v->kind != YD_MAP)
        return diag_set(d, md->path, v->line, v->col,
                        "block '%s' takes a mapping of its parameters like {out: 64}, not %s",
                        k->str, yd_kind_name(v->kind));
    for (int i = 0; v && i < v->n; i++) {
        const yd_node *key = v->keys[i], *val = v->vals[i];
        int rc;
        if (!strcmp(key->str, "input")) {
            int n = val->kind == YD_SEQ ? val->n : 1, cap = md_block_ninputs(blk);
            rc = check_names(md, val, "input", false, d);
            if (rc == 0 && n > cap)
                rc = diag_set(d, md->path, val->line, val->col,
                              "block '%s' takes %d input%s; 'input' names %d", k->str, cap,
                              cap == 1 ? "" : "s", n);
        } else if (!strcmp(key->str, "as")) {
            rc = check_names(md, val, "as", true, d);
            if (rc == 0 && val->kind == YD_SEQ && val->n > 1)
                rc = diag_set(d, md->path, val->line, val->col,
                              "block '%s' makes one output; 'as' names %d", k->str, val->n);
        } else if (!block_param(blk, key->str)) {
            char list[256];
            block_param_list(blk, list, sizeof list);
            rc = diag_set(d, md->path, key->line, key->col,
                          "block '%s' has no parameter '%s'; its parameters are %s (and input, "
                          "as)",
                          k->str, key->str, list);
        } else {
            rc = check_value(md, val, d);
        }
        if (rc < 0)
            return -1;
    }
    for (int i = 0; params && params->kind == YD_MAP && i < params->n; i++)
        if (yd_is_null(params->vals[i]) && !(v && yd_get(v, params->keys[i]->str)))
            return diag_set(d, md->path, k->line, k->col, "block '%s' needs '%s' (line %d)",
                            k->str, params->keys[i]->str, params->keys[i]->line);
    return 0;
}

static int check_step(modeldef *md, const yd_node *s, diag *d) {
    if (s->kind == YD_SCALAR && !yd_is_null(s)) { // `- relu`: a layer without keys
        if (md_block(md, s->str))
            return check_call(md, s, NULL, d);
        if (!nn_layer_known(s->str) && !note_unbuilt(md, s))
            return unknown_layer(md, s, d);
        return 0;
    }
    if (s->kind != YD_MAP || s->n == 0)
        return diag_set(d, md->path, s->line, s->col,
                        "a body entry is a layer like `- linear: {out: 64}`, a repeat or a "
                        "residual, not %s",
                        yd_is_null(s) ? "nothing" : yd_kind_name(s->kind));
    const yd_node *v;
    if ((v = yd_get(s, "input")) && check_names(md, v, "input", false, d) < 0)
        return -1;
    if (v && v->kind == YD_SEQ && (yd_get(s, "repeat") || yd_get(s, "residual")))
        return diag_set(d, md->path, v->line, v->col,
                        "a repeat or residual starts from one tensor; 'input' names %d", v->n);
    if ((v = yd_get(s, "as")) && check_names(md, v, "as", true, d) < 0)
        return -1;
    if ((v = yd_get(s, "repeat"))) {
        if (yd_check_keys(md->doc, s, "a repeat", repeat_keys, d) < 0 ||
            check_expr(md, v, "the repeat count", d) < 0)
            return -1;
        const yd_node *sh = yd_get(s, "shared");
        bool flag;
        if (sh && !yd_is_bool(sh, &flag))
            return diag_set(d, md->path, sh->line, sh->col,
                            "a repeat's 'shared' is true (one set of parameters for every "
                            "repetition) or false");
        const yd_node *body = yd_get(s, "body");
        if (!body)
            return diag_set(d, md->path, s->line, s->col,
                            "a repeat needs 'body:', the list of layers to repeat");
        return check_steps(md, body, "a repeat's body", d);
    }
    if ((v = yd_get(s, "residual"))) {
        if (yd_check_keys(md->doc, s, "a residual", residual_keys, d) < 0)
            return -1;
        return check_steps(md, v, "a residual", d);
    }
    const yd_node *k = s->keys[0];
    if (s->n > 1)
        return diag_set(d, md->path, s->keys[1]->line, s->keys[1]->col,
                        "a layer is a one-key mapping; '%s' beside '%s' belongs inside its "
                        "braces: `- %s: {..., %s: ...}`",
                        s->keys[1]->str, k->str, k->str, s->keys[1]->str);
    if (!strcmp(k->str, "body"))
        return diag_set(d, md->path, k->line, k->col, "'body:' needs a 'repeat:' beside it");
    if (md_block(md, k->str))
        return check_call(md, k, s->vals[0], d);
    if (!nn_layer_known(k->str) && !note_unbuilt(md, k))
        return unknown_layer(md, k, d);
    v = s->vals[0];
    if (yd_is_null(v))
        return 0;
    if (v->kind != YD_MAP)
        return diag_set(d, md->path, v->line, v->col,
                        "layer '%s' takes a mapping of keys like {out: 64}, not %s", k->str,
                        yd_kind_name(v->kind));
    for (int i = 0; i < v->n; i++) {
        const char *key = v->keys[i]->str;
        bool flag;
        if (!strcmp(key, "unused") && !yd_is_bool(v->vals[i], &flag))
            return diag_set(d, md->path, v->vals[i]->line, v->vals[i]->col,
                            "'unused' is true or false (true: the layer's parameters are held, "
                            "its ops are not run)");
        int rc = !strcmp(key, "input")    ? check_names(md, v->vals[i], "input", false, d)
                 : !strcmp(key, "as")     ? check_names(md, v->vals[i], "as", true, d)
                 : !strcmp(key, "unused") ? 0
                                          : check_value(md, v->vals[i], d);
        if (rc < 0)
            return -1;
    }
    return 0;
}

static int check_steps(modeldef *md, const yd_node *seq, const char *what, diag *d) {
    if (yd_expect(md->doc, seq, YD_SEQ, what, d) < 0)
        return -1;
    if (seq->n == 0)
        return diag_set(d, md->path, seq->line, seq->col, "%s is an empty list", what);
    for (int i = 0; i < seq->n; i++)
        if (check_step(md, seq->vals[i], d) < 0)
            return -1;
    return 0;
}

static int load_params(modeldef *md, const yd_node *p, diag *d) {
    if (yd_expect(md->doc, p, YD_MAP, "params", d) < 0)
        return -1;
    md->pkey = calloc((size_t)p->n + 1, sizeof *md->pkey);
    md->pval = calloc((size_t)p->n + 1, sizeof *md->pval);
    md->pexpr = calloc((size_t)p->n + 1, sizeof *md->pexpr);
    if (!md->pkey || !md->pval || !md->pexpr)
        return diag_set(d, md->path, 0, 0, "out of memory loading the model");
    for (int i = 0; i < p->n; i++) {
        const yd_node *k = p->keys[i], *v = p->vals[i];
        if (!is_ident(k->str))
            return diag_set(d, md->path, k->line, k->col,
                            "parameter name '%s' cannot be written as $name; use letters, "
                            "digits and _",
                            k->str);
        if (!strcmp(k->str, "batch"))
            return diag_set(d, md->path, k->line, k->col,
                            "'batch' is reserved: $batch is the case's batch size");
        bool b;
        if (v->kind != YD_SCALAR || yd_is_null(v) || yd_is_bool(v, &b))
            return diag_set(d, md->path, v->line, v->col,
                            "parameter '%s' must be a number or an expression", k->str);
        int off;
        char err[256];
        if (expr_parse(v->str, &md->pexpr[i], &off, err, sizeof err) < 0)
            return diag_set(d, md->path, v->line, md_text_col(v, off), "%s", err);
        md->pkey[i] = k;
        md->pval[i] = v;
        md->nparams++;
    }
    for (int i = 0; i < md->nparams; i++) // params may name later ones
        if (check_vars(md, md->pval[i], md->pexpr[i], d) < 0)
            return -1;
    return 0;
}

// Whether the steps of seq call, directly or through other blocks, a block
// being walked (state 1): a cycle. state: per block of md->blocks, 0 not
// seen, 1 being walked, 2 known to end.
static int block_cycles(const modeldef *md, const yd_node *seq, char *state, diag *d) {
    for (int i = 0; seq && seq->kind == YD_SEQ && i < seq->n; i++) {
        const yd_node *s = seq->vals[i], *k;
        if (s->kind == YD_SCALAR)
            k = s;
        else if (s->kind != YD_MAP || s->n == 0)
            continue;
        else if (yd_get(s, "repeat")) {
            if (block_cycles(md, yd_get(s, "body"), state, d) < 0)
                return -1;
            continue;
        } else if (yd_get(s, "residual")) {
            if (block_cycles(md, yd_get(s, "residual"), state, d) < 0)
                return -1;
            continue;
        } else
            k = s->keys[0];
        int j = 0;
        while (j < md->blocks->n && strcmp(md->blocks->keys[j]->str, k->str))
            j++;
        if (j == md->blocks->n || state[j] == 2)
            continue;
        if (state[j] == 1)
            return diag_set(d, md->path, k->line, k->col,
                            "block '%s' calls itself here; a block's body cannot reach its own "
                            "block",
                            k->str);
        state[j] = 1;
        if (block_cycles(md, yd_get(md->blocks->vals[j], "body"), state, d) < 0)
            return -1;
        state[j] = 2;
    }
    return 0;
}

// `blocks:` name -> {params: {name: default or ~}, inputs: [names], body: [...]}
static int load_blocks(modeldef *md, const yd_node *v, diag *d) {
    if (yd_expect(md->doc, v, YD_MAP, "blocks", d) < 0)
        return -1;
    for (int i = 0; i < v->n; i++) {
        const yd_node *k = v->keys[i], *b = v->vals[i], *p, *in;
        if (!is_ident(k->str))
            return diag_set(d, md->path, k->line, k->col,
                            "block name '%s': use letters, digits and _", k->str);
        if (nn_layer_known(k->str) || nn_layer_unbuilt(k->str) || !strcmp(k->str, "repeat") ||
            !strcmp(k->str, "residual") || !strcmp(k->str, "body"))
            return diag_set(d, md->path, k->line, k->col,
                            "block '%s' has the name of a layer; give it a name of its own",
                            k->str);
        if (yd_expect(md->doc, b, YD_MAP, "a block", d) < 0 ||
            yd_check_keys(md->doc, b, "a block", block_keys, d) < 0)
            return -1;
        if (!yd_get(b, "body"))
            return diag_set(d, md->path, b->line, b->col,
                            "block '%s' needs 'body:', its list of layers", k->str);
        if ((p = yd_get(b, "params")) && !yd_is_null(p)) {
            if (yd_expect(md->doc, p, YD_MAP, "a block's params", d) < 0)
                return -1;
            for (int j = 0; j < p->n; j++) {
                const yd_node *pk = p->keys[j], *pv = p->vals[j];
                if (!is_ident(pk->str) || !strcmp(pk->str, "batch") ||
                    !strcmp(pk->str, "input") || !strcmp(pk->str, "as"))
                    return diag_set(d, md->path, pk->line, pk->col,
                                    "block parameter '%s': use letters, digits and _ (not "
                                    "batch, input or as)",
                                    pk->str);
                if (pv->kind != YD_SCALAR)
                    return diag_set(d, md->path, pv->line, pv->col,
                                    "block parameter '%s' defaults to a number, expression, word "
                                    "or boolean, or ~ when every call must give it",
                                    pk->str);
                if (!yd_is_null(pv) && check_value(md, pv, d) < 0) // model params only
                    return -1;
            }
        }
        if ((in = yd_get(b, "inputs")) && check_names(md, in, "inputs", true, d) < 0)
            return -1;
    }
    md->blocks = v;
    for (int i = 0; i < v->n; i++) {
        md->checking = v->vals[i];
        int rc = check_steps(md, yd_get(v->vals[i], "body"), "a block's body", d);
        md->checking = NULL;
        if (rc < 0)
            return -1;
    }
    char *state = calloc((size_t)v->n + 1, 1);
    if (!state)
        return diag_set(d, md->path, 0, 0, "out of memory loading the model");
    int rc = 0;
    for (int i = 0; i < v->n && rc == 0; i++)
        if (state[i] == 0) {
            state[i] = 1;
            rc = block_cycles(md, yd_get(v->vals[i], "body"), state, d);
            state[i] = 2;
        }
    free(state);
    return rc;
}

static int load_inputs(modeldef *md, const yd_node *in, diag *d) {
    if (yd_expect(md->doc, in, YD_MAP, "inputs", d) < 0)
        return -1;
    if (in->n == 0)
        return diag_set(d, md->path, in->line, in->col, "inputs is empty");
    for (int i = 0; i < in->n; i++) {
        const yd_node *k = in->keys[i], *v = in->vals[i];
        if (!strcmp(k->str, ".") || !k->str[0])
            return diag_set(d, md->path, k->line, k->col, "'%s' cannot name an input", k->str);
        if (yd_expect(md->doc, v, YD_MAP, "an input", d) < 0 ||
            yd_check_keys(md->doc, v, "an input", input_keys, d) < 0)
            return -1;
        const yd_node *shape = yd_get(v, "shape"), *dt = yd_get(v, "dtype"),
                      *range = yd_get(v, "range");
        if (!shape)
            return diag_set(d, md->path, v->line, v->col, "input '%s' needs 'shape:'", k->str);
        if (yd_expect(md->doc, shape, YD_SEQ, "shape", d) < 0)
            return -1;
        if (shape->n > TENSOR_MAX_DIMS)
            return diag_set(d, md->path, shape->line, shape->col,
                            "input '%s' has %d dimensions; at most %d", k->str, shape->n,
                            TENSOR_MAX_DIMS);
        for (int j = 0; j < shape->n; j++)
            if (check_expr(md, shape->vals[j], "a dimension", d) < 0)
                return -1;
        enum dtype t = DT_F32;
        if (dt && (dt->kind != YD_SCALAR || !dtype_parse(dt->str, &t)))
            return diag_set(d, md->path, dt->line, dt->col,
                            "unknown dtype '%s'; expected one of f32, f16, bf16, i32, i64, bool",
                            dt->kind == YD_SCALAR ? dt->str : "(not a word)");
        if (range) {
            if (dtype_is_float(t) || t == DT_BOOL)
                return diag_set(d, md->path, range->line, range->col,
                                "range is for integer inputs; '%s' is %s", k->str, dtype_name(t));
            if (range->kind != YD_SEQ || range->n != 2)
                return diag_set(d, md->path, range->line, range->col,
                                "range must be a list [low, high) of two numbers");
            for (int j = 0; j < 2; j++)
                if (check_expr(md, range->vals[j], "a range bound", d) < 0)
                    return -1;
        }
        if (add_def(md, k, d) < 0)
            return -1;
    }
    return 0;
}

// A literal label_smoothing outside [0, 1], caught by `tcbench check` (which
// builds no loss); an expression is checked when training builds the loss.
static int check_smoothing(modeldef *md, const yd_node *v, diag *d) {
    char *end = NULL;
    double eps = v->kind == YD_SCALAR && v->str ? strtod(v->str, &end) : 0;
    if (!end || end == v->str || *end || (eps >= 0 && eps <= 1))
        return 0;
    return diag_set(d, md->path, v->line, v->col,
                    "cross_entropy: label_smoothing %g is outside [0, 1]", eps);
}

// One loss term: {cross_entropy: {input: logits, target: labels}}; in_mean:
// one of a `mean:` list's.
static int load_loss_term(modeldef *md, const yd_node *l, bool in_mean, diag *d) {
    if (yd_expect(md->doc, l, YD_MAP, "loss", d) < 0)
        return -1;
    if (l->n != 1)
        return diag_set(d, md->path, l->line, l->col,
                        "loss is a one-key mapping like {cross_entropy: {target: labels}}");
    const yd_node *k = l->keys[0], *v = l->vals[0];
    if (!nn_loss_known(k->str))
        return diag_set(d, md->path, k->line, k->col, "unknown loss '%s'; %s", k->str,
                        in_mean ? "a mean's terms are cross_entropy, mse, bce, bce_with_logits, "
                                  "ctc or output_mean"
                                : "expected cross_entropy, mse, bce, bce_with_logits, ctc, "
                                  "output_mean or mean");
    if (yd_expect(md->doc, v, YD_MAP, "the loss", d) < 0)
        return -1;
    const yd_node *t = yd_get(v, "target");
    bool no_target = !strcmp(k->str, "output_mean"); // the output alone
    if (!t && !no_target)
        return diag_set(d, md->path, v->line, v->col, "loss '%s' needs 'target:'", k->str);
    if (t && no_target)
        return diag_set(d, md->path, t->line, t->col,
                        "loss 'output_mean' takes no 'target:' (the mean of its input)");
    if (!strcmp(k->str, "ctc") != !!yd_get(v, "lengths"))
        return diag_set(d, md->path, v->line, v->col,
                        "loss '%s' %s 'lengths:' (the target lengths, ctc's alone)", k->str,
                        strcmp(k->str, "ctc") ? "takes no" : "needs");
    for (int i = 0; i < v->n; i++) {
        const char *key = v->keys[i]->str;
        bool name = !strcmp(key, "input") || !strcmp(key, "target") || !strcmp(key, "lengths");
        int rc = name ? check_name(md, v->vals[i], key, d) : check_value(md, v->vals[i], d);
        if (rc < 0)
            return -1;
        if (!strcmp(key, "label_smoothing") && check_smoothing(md, v->vals[i], d) < 0)
            return -1;
    }
    return 0;
}

// A loss term, or `mean:` over a list of terms (a question-answering head's
// start and end cross-entropies).
static int load_loss(modeldef *md, const yd_node *l, diag *d) {
    if (l->kind != YD_MAP || l->n != 1 || strcmp(l->keys[0]->str, "mean"))
        return load_loss_term(md, l, false, d);
    const yd_node *v = l->vals[0];
    if (v->kind != YD_SEQ || v->n < 1 || v->n > MD_MAX_LOSS_TERMS)
        return diag_set(d, md->path, v->line, v->col,
                        "mean: takes a list of 1 to %d losses like [{cross_entropy: {...}}, ...]",
                        MD_MAX_LOSS_TERMS);
    for (int i = 0; i < v->n; i++)
        if (load_loss_term(md, v->vals[i], true, d) < 0)
            return -1;
    return 0;
}

// `train_needs: second_order_gradients`: one word of train_needs_names.
static int load_train_needs(modeldef *md, const yd_node *v, diag *d) {
    if (v->kind != YD_SCALAR || yd_is_null(v))
        return diag_set(d, md->path, v->line, v->col,
                        "train_needs must be a word: second_order_gradients or "
                        "inference_only");
    for (int i = 0; train_needs_names[i]; i++)
        if (!strcmp(v->str, train_needs_names[i])) {
            md->train_needs = v;
            return 0;
        }
    int best = strdist_closest(v->str, train_needs_names, 3);
    if (best >= 0)
        return diag_set(d, md->path, v->line, v->col,
                        "unknown train_needs '%s'; did you mean '%s'?", v->str,
                        train_needs_names[best]);
    return diag_set(d, md->path, v->line, v->col,
                    "unknown train_needs '%s'; expected second_order_gradients or "
                    "inference_only",
                    v->str);
}

bool modeldef_train_unbuilt(const modeldef *md, diag *d) {
    if (!md->train_needs)
        return false;
    for (int i = 0; train_needs_names[i]; i++)
        if (!strcmp(md->train_needs->str, train_needs_names[i]))
            diag_set(d, md->path, md->train_needs->line, md->train_needs->col, "%s",
                     train_needs_reasons[i]);
    return true;
}

static int load_model(modeldef *md, diag *d) {
    const yd_node *root = md->doc->root, *v;
    if (!root)
        return diag_set(d, md->path, 0, 0, "the model file is empty");
    if (yd_expect(md->doc, root, YD_MAP, "a model", d) < 0 ||
        yd_check_keys(md->doc, root, "model", model_keys, d) < 0)
        return -1;
    if (!(v = yd_get(root, "name")))
        return diag_set(d, md->path, root->line, root->col, "a model needs 'name:'");
    if (v->kind != YD_SCALAR || yd_is_null(v))
        return diag_set(d, md->path, v->line, v->col, "name must be a word");
    if (yd_check_name(md->doc, v, "the model's name", true, d) < 0)
        return -1;
    md->name = v->str;
    md->family = "";
    if ((v = yd_get(root, "family"))) {
        if (v->kind != YD_SCALAR)
            return diag_set(d, md->path, v->line, v->col, "family must be a word");
        if (!yd_is_null(v) && yd_check_name(md->doc, v, "family", true, d) < 0)
            return -1;
        md->family = v->str;
    }
    if ((v = yd_get(root, "params")) && !yd_is_null(v) && load_params(md, v, d) < 0)
        return -1;
    if (!(md->inputs = yd_get(root, "inputs")))
        return diag_set(d, md->path, root->line, root->col, "a model needs 'inputs:'");
    if (load_inputs(md, md->inputs, d) < 0)
        return -1;
    if ((v = yd_get(root, "blocks")) && !yd_is_null(v) && load_blocks(md, v, d) < 0)
        return -1;
    if (!(md->body = yd_get(root, "body")))
        return diag_set(d, md->path, root->line, root->col, "a model needs 'body:'");
    if (check_steps(md, md->body, "body", d) < 0)
        return -1;
    if ((md->loss = yd_get(root, "loss")) && load_loss(md, md->loss, d) < 0)
        return -1;
    if ((md->outputs = yd_get(root, "outputs")) &&
        check_names(md, md->outputs, "outputs", false, d) < 0)
        return -1;
    if ((v = yd_get(root, "train_needs")) && load_train_needs(md, v, d) < 0)
        return -1;
    return 0;
}

int modeldef_load(const char *path, modeldef **out, diag *d) {
    *out = NULL;
    modeldef *md = calloc(1, sizeof *md);
    if (!md || !(md->path = strdup(path))) {
        free(md);
        return diag_set(d, path, 0, 0, "out of memory loading the model");
    }
    if (yd_load(path, &md->doc, d) < 0 || load_model(md, d) < 0) {
        modeldef_free(md);
        return -1;
    }
    *out = md;
    return 0;
}
