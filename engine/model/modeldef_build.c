// Building a model from its loaded template: parameters with overrides,
// inputs, the body with its scopes, outputs and loss (modeldef.h).
#include "modeldef_internal.h"

#include "model/nn/nn.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// A model with more ops than this is a runaway repeat, not a benchmark.
#define MD_MAX_NODES (1 << 22)

// Where an expression's text starts (for errors at the exact column).
typedef struct md_src {
    const char *file;
    int line, col;
} md_src;

typedef struct md_bind {
    const char *name;
    int id;
} md_bind;

// Names live in scopes: the model, each residual body, each repetition of a
// repeat's body. Lookup goes innermost first; a block's names end with it.
typedef struct md_scope {
    struct md_scope *parent;
    char *prefix; // parameter name prefix: "" at the top, "layers.3"
    md_bind *b;
    int nb;
    char **used; // local prefix names taken, kept unique
    int nused;
    int prev; // the previous output, -1 before any
} md_scope;

// A block call's parameters: what `$name` is inside the block's body.
typedef struct md_fval {
    enum { MD_FV_NUM, MD_FV_BOOL, MD_FV_STR } kind;
    expr_value num;
    bool flag;
    const char *str;
} md_fval;

typedef struct md_frame {
    const yd_node *params; // the block's `params:` mapping (keys in order)
    md_fval *vals;         // one per key
} md_frame;

// A parameter being evaluated and the $name it is looking up.
typedef struct md_pending {
    int param;
    int off; // of the $name in the parameter's expression
} md_pending;

typedef struct md_build {
    const modeldef *md;
    int64_t batch;
    bool training, fused_attention;
    bool shared;        // inside a `shared: true` repeat: layers reuse its parameters by name
    md_frame *frame;    // inside a block's body: its call's parameters; NULL outside
    int depth;          // blocks being built, nested
    const char *block;  // the innermost of them, or NULL
    nn_gen *gen;        // a generation step, or NULL
    int64_t gen_tokens; // its tokens: what `$seq` dimensions of inputs become
    graph *g;
    diag *d;
    // parameter values and where each one's expression is written
    expr_value *pval;
    char *pstate; // 0 not yet, 1 being evaluated, 2 done
    const expr **pexpr;
    md_src *psrc;
    expr **owned;      // parsed overrides
    bool *pover;       // set by an override
    md_pending *stack; // parameters being evaluated, outermost first
    int nstack;
    md_src cur; // the expression being evaluated
    // for each graph node, where it was made (the memory check points there)
    int *oline, *ocol;
    int norigin, ocap; // origins set, room for

} md_build;

static int bfail(md_build *b, const yd_node *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int bfail(md_build *b, const yd_node *n, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return diag_set(b->d, b->md->path, n ? n->line : 0, n ? n->col : 0, "%s", msg);
}

static int oom(md_build *b) {
    return diag_set(b->d, b->md->path, 0, 0, "out of memory building the model");
}

static int src_fail(md_build *b, md_src s, int off, const char *msg) {
    return diag_set(b->d, s.file, s.line, s.col > 0 ? s.col + (off > 0 ? off : 0) : 0, "%s", msg);
}

static int eval_param(md_build *b, int i);

// The value of block parameter `name` in frame f, or NULL.
static const md_fval *frame_get(const md_frame *f, const char *name) {
    for (int i = 0; f && f->params && i < f->params->n; i++)
        if (!strcmp(f->params->keys[i]->str, name))
            return &f->vals[i];
    return NULL;
}

static int lookup(void *ctx, const char *name, int off, expr_value *out) {
    md_build *b = ctx;
    if (!strcmp(name, "batch")) {
        *out = expr_int(b->batch);
        return 0;
    }
    char msg[512];
    const md_fval *fv = frame_get(b->frame, name);
    if (fv) {
        if (fv->kind == MD_FV_NUM) {
            *out = fv->num;
            return 0;
        }
        snprintf(msg, sizeof msg, "block parameter $%s is %s, not a number", name,
                 fv->kind == MD_FV_BOOL ? "a boolean" : "a word");
        return src_fail(b, b->cur, off, msg);
    }
    int i = md_param_index(b->md, name);
    if (i < 0) {
        char list[256];
        md_param_list(b->md, list, sizeof list);
        snprintf(msg, sizeof msg, "unknown parameter $%s; the parameters are %s", name, list);
        return src_fail(b, b->cur, off, msg);
    }
    if (b->nstack > 0)
        b->stack[b->nstack - 1].off = off;
    if (b->pstate[i] == 1) {
        // The cycle runs from i's entry in the stack to the top. It is
        // reported where it starts, or at an override in it: the override
        // is more likely the mistake than the model's own defaults.
        int k = 0;
        while (k < b->nstack && b->stack[k].param != i)
            k++;
        int at = k;
        for (int j = k; j < b->nstack; j++)
            if (b->pover[b->stack[j].param]) {
                at = j;
                break;
            }
        int o = snprintf(msg, sizeof msg, "parameter cycle:");
        for (int j = k; j < b->nstack && o < (int)sizeof msg; j++)
            o += snprintf(msg + o, sizeof msg - (size_t)o, " $%s ->",
                          b->md->pkey[b->stack[j].param]->str);
        if (o < (int)sizeof msg)
            snprintf(msg + o, sizeof msg - (size_t)o, " $%s; give one of them a number", name);
        return src_fail(b, b->psrc[b->stack[at].param], b->stack[at].off, msg);
    }
    if (b->pstate[i] == 0 && eval_param(b, i) < 0)
        return -1;
    *out = b->pval[i];
    return 0;
}

static int eval_with(md_build *b, const expr *e, md_src s, expr_value *out) {
    md_src saved = b->cur;
    b->cur = s;
    int off;
    char err[256];
    int rc = expr_eval(e, lookup, b, out, &off, err, sizeof err);
    b->cur = saved;
    if (rc < 0 && off >= 0)
        return src_fail(b, s, off, err);
    return rc;
}

static int eval_param(md_build *b, int i) {
    b->pstate[i] = 1;
    b->stack[b->nstack++] = (md_pending){i, 0};
    md_frame *f = b->frame; // a model parameter never sees a block's
    b->frame = NULL;
    int rc = eval_with(b, b->pexpr[i], b->psrc[i], &b->pval[i]);
    b->frame = f;
    b->nstack--;
    b->pstate[i] = 2;
    return rc;
}

static md_src node_src(const md_build *b, const yd_node *n) {
    return (md_src){b->md->path, n->line, n->text_col};
}

// A scalar of the file as a number.
static int eval_node(md_build *b, const yd_node *n, expr_value *out) {
    int off;
    char err[256];
    expr *e;
    if (expr_parse(n->str, &e, &off, err, sizeof err) < 0) // checked at load; kept safe
        return src_fail(b, node_src(b, n), off, err);
    int rc = eval_with(b, e, node_src(b, n), out);
    expr_free(e);
    return rc;
}

static int eval_int(md_build *b, const yd_node *n, const char *what, int64_t *out) {
    expr_value v;
    if (eval_node(b, n, &v) < 0)
        return -1;
    if (v.is_float) {
        char s[40];
        expr_value_str(v, s, sizeof s);
        return bfail(b, n, "%s must be an integer; '%s' is %s", what, n->str, s);
    }
    *out = v.i;
    return 0;
}

static int setup_params(md_build *b, const modeldef_override *ov, int nov) {
    const modeldef *md = b->md;
    int n = md->nparams;
    b->pval = calloc((size_t)n + 1, sizeof *b->pval);
    b->pstate = calloc((size_t)n + 1, 1);
    b->pexpr = calloc((size_t)n + 1, sizeof *b->pexpr);
    b->psrc = calloc((size_t)n + 1, sizeof *b->psrc);
    b->owned = calloc((size_t)nov + 1, sizeof *b->owned);
    b->stack = calloc((size_t)n + 1, sizeof *b->stack);
    b->pover = calloc((size_t)n + 1, sizeof *b->pover);
    if (!b->pval || !b->pstate || !b->pexpr || !b->psrc || !b->owned || !b->stack || !b->pover)
        return oom(b);
    for (int i = 0; i < n; i++) {
        b->pexpr[i] = md->pexpr[i];
        b->psrc[i] = node_src(b, md->pval[i]);
    }
    for (int j = 0; j < nov; j++) {
        md_src s = {ov[j].file ? ov[j].file : "", ov[j].line, ov[j].col};
        char msg[512];
        int i = md_param_index(md, ov[j].key);
        if (i < 0) {
            char list[256];
            md_param_list(md, list, sizeof list);
            snprintf(msg, sizeof msg, "override of unknown parameter '%s'; %s has %s", ov[j].key,
                     md->name, list);
            return src_fail(b, s, 0, msg);
        }
        int off;
        char err[256];
        if (expr_parse(ov[j].expr, &b->owned[j], &off, err, sizeof err) < 0)
            return src_fail(b, s, off, err);
        b->pexpr[i] = b->owned[j];
        b->psrc[i] = s;
        b->pover[i] = true;
    }
    for (int i = 0; i < n; i++) // every one, so a bad unused parameter is caught too
        if (b->pstate[i] == 0 && eval_param(b, i) < 0)
            return -1;
    return 0;
}

// Records where the nodes made since the last call come from.
static int set_origin(md_build *b, const yd_node *n) {
    if (b->g->n > b->norigin) {
        if (b->g->n > b->ocap) { // doubling: a deep repeat stays linear
            int cap = b->ocap ? 2 * b->ocap : 256;
            cap = cap < b->g->n ? b->g->n : cap;
            int *l = realloc(b->oline, (size_t)cap * sizeof *l);
            if (l)
                b->oline = l;
            int *c = realloc(b->ocol, (size_t)cap * sizeof *c);
            if (c)
                b->ocol = c;
            if (!l || !c)
                return oom(b);
            b->ocap = cap;
        }
        for (int i = b->norigin; i < b->g->n; i++) {
            b->oline[i] = n->line;
            b->ocol[i] = n->col;
        }
        b->norigin = b->g->n;
    }
    return 0;
}

// ---------------------------------------------------------------- scopes

static int scope_bind(md_build *b, md_scope *sc, const char *name, int id) {
    md_bind *p = realloc(sc->b, (size_t)(sc->nb + 1) * sizeof *p);
    if (!p)
        return oom(b);
    sc->b = p;
    sc->b[sc->nb++] = (md_bind){name, id};
    return 0;
}

static void scope_free(md_scope *sc) {
    for (int i = 0; i < sc->nused; i++)
        free(sc->used[i]);
    free(sc->used);
    free(sc->b);
    free(sc->prefix);
}

// The full prefix for a local name made unique within the scope:
// "linear", then "linear_1", "linear_2"...
static char *scope_take(md_build *b, md_scope *sc, const char *base) {
    char local[200];
    snprintf(local, sizeof local, "%s", base);
    for (int k = 1;; k++) {
        bool taken = false;
        for (int i = 0; i < sc->nused && !taken; i++)
            taken = !strcmp(sc->used[i], local);
        if (!taken)
            break;
        snprintf(local, sizeof local, "%s_%d", base, k);
    }
    char **u = realloc(sc->used, (size_t)(sc->nused + 1) * sizeof *u);
    char *full = NULL;
    if (!u || !(u[sc->nused] = strdup(local)) ||
        asprintf(&full, "%s%s%s", sc->prefix, sc->prefix[0] ? "." : "", local) < 0) {
        if (u)
            sc->used = u;
        oom(b);
        return NULL;
    }
    sc->used = u;
    sc->nused++;
    return full;
}

static int unresolved(md_build *b, md_scope *sc, const yd_node *n) {
    const md_def *before = NULL, *after = NULL;
    char list[256];
    size_t o = 0;
    list[0] = 0;
    for (md_scope *s = sc; s; s = s->parent)
        for (int i = 0; i < s->nb && o < sizeof list; i++)
            o += (size_t)snprintf(list + o, sizeof list - o, "%s%s", o ? ", " : "", s->b[i].name);
    if (b->block)
        return bfail(b, n,
                     "no tensor named '%s' in block '%s'; a block's body sees its inputs and "
                     "what it makes: %s (and '.', the previous output)",
                     n->str, b->block, o ? list : "none");
    for (int i = 0; i < b->md->ndefs; i++) {
        const md_def *f = &b->md->defs[i];
        if (strcmp(f->name, n->str))
            continue;
        bool later = f->line > n->line || (f->line == n->line && f->col > n->col);
        if (later && !after)
            after = f;
        if (!later)
            before = f;
    }
    if (before)
        return bfail(b, n,
                     "tensor '%s' is not visible here: it is made inside a repeat or residual "
                     "block (line %d), and names made in a block stay in it",
                     n->str, before->line);
    if (after)
        return bfail(b, n, "tensor '%s' is used before it exists (it is made at line %d)", n->str,
                     after->line);
    return bfail(b, n, "no tensor named '%s'; names here: %s (and '.', the previous output)",
                 n->str, o ? list : "none");
}

static int resolve(md_build *b, md_scope *sc, const yd_node *n, int *id) {
    if (!strcmp(n->str, ".")) {
        if (sc->prev < 0)
            return bfail(b, n, "'.' names the previous output, and there is none here");
        *id = sc->prev;
        return 0;
    }
    for (md_scope *s = sc; s; s = s->parent)
        for (int i = s->nb - 1; i >= 0; i--)
            if (!strcmp(s->b[i].name, n->str)) {
                *id = s->b[i].id;
                return 0;
            }
    return unresolved(b, sc, n);
}

// The inputs of a step: `input:` or else the previous output.
static int step_inputs(md_build *b, md_scope *sc, const yd_node *in, const yd_node *at, int *ids,
                       int cap, int *n) {
    if (!in) {
        if (sc->prev < 0)
            return bfail(b, at, "this layer has no input; name one with `input:`");
        ids[0] = sc->prev;
        *n = 1;
        return 0;
    }
    *n = in->kind == YD_SEQ ? in->n : 1;
    if (*n > cap) // checked at load; kept safe
        return bfail(b, in, "at most %d input%s here", cap, cap == 1 ? "" : "s");
    for (int i = 0; i < *n; i++)
        if (resolve(b, sc, in->kind == YD_SEQ ? in->vals[i] : in, &ids[i]) < 0)
            return -1;
    return 0;
}

// Binds `as:` names to the outputs; the first output becomes the previous one.
static int step_outputs(md_build *b, md_scope *sc, const yd_node *as, const yd_node *at,
                        const int *out, int nout) {
    sc->prev = out[0];
    if (!as)
        return 0;
    if (as->kind == YD_SEQ && as->n != nout)
        return bfail(b, as, "'%s' makes %d output%s but `as:` names %d", at->str, nout,
                     nout == 1 ? "" : "s", as->n);
    int n = as->kind == YD_SEQ ? as->n : 1;
    for (int i = 0; i < n; i++)
        if (scope_bind(b, sc, (as->kind == YD_SEQ ? as->vals[i] : as)->str, out[i]) < 0)
            return -1;
    return 0;
}

static const char *as_base(const yd_node *as) {
    if (!as)
        return NULL;
    return as->kind == YD_SEQ ? as->vals[0]->str : as->str;
}

// ---------------------------------------------------------------- layers

static void value_free(nn_value *v) {
    for (int i = 0; i < v->n; i++)
        value_free(&v->items[i]);
    free(v->items);
}

static int to_value(md_build *b, const yd_node *n, nn_value *v) {
    memset(v, 0, sizeof *v);
    v->line = n->line;
    v->col = n->col;
    if (n->kind == YD_SEQ) {
        v->type = NN_V_LIST;
        if (n->n && !(v->items = calloc((size_t)n->n, sizeof *v->items)))
            return oom(b);
        for (; v->n < n->n; v->n++)
            if (to_value(b, n->vals[v->n], &v->items[v->n]) < 0)
                return -1;
        return 0;
    }
    if (n->kind == YD_MAP)
        return bfail(b, n, "a layer's value cannot be a mapping");
    // `bias: $has_bias`, `mode: $pool`: a block parameter's boolean or word as it is
    const md_fval *fv = n->str[0] == '$' ? frame_get(b->frame, n->str + 1) : NULL;
    if (fv && fv->kind == MD_FV_BOOL) {
        *v = (nn_value){.type = NN_V_BOOL, .i = fv->flag, .f = fv->flag, .line = n->line,
                        .col = n->col};
        return 0;
    }
    if (fv && fv->kind == MD_FV_STR) {
        v->type = NN_V_STR;
        v->s = fv->str;
        return 0;
    }
    expr *e;
    bool t;
    expr_value x;
    int rc = 0;
    switch (md_scalar_class(b->md, n, &e, b->d)) {
    case MD_SC_NULL: return bfail(b, n, "this key has no value; give one or leave the key out");
    case MD_SC_BOOL:
        yd_is_bool(n, &t);
        *v = (nn_value){.type = NN_V_BOOL, .i = t, .f = t, .line = n->line, .col = n->col};
        return 0;
    case MD_SC_STR:
        v->type = NN_V_STR;
        v->s = n->str;
        return 0;
    case MD_SC_EXPR:
        rc = eval_with(b, e, node_src(b, n), &x);
        expr_free(e);
        if (rc < 0)
            return -1;
        v->type = x.is_float ? NN_V_FLOAT : NN_V_INT;
        v->i = x.i;
        v->f = x.f;
        return 0;
    default: return -1;
    }
}

// Calls the layer library for one layer or loss and reports its error at
// the key it blames, or at the layer's name.
static int call_nn(md_build *b, const yd_node *name, const char *type, const char *prefix,
                   const yd_node *map, const int *ins, int nin, const char *const *skip,
                   nn_result *r) {
    int cap = map && map->kind == YD_MAP ? map->n : 0;
    nn_arg *args = calloc((size_t)cap + 1, sizeof *args);
    if (!args)
        return oom(b);
    int nargs = 0, rc = 0;
    for (int i = 0; i < cap && rc == 0; i++) {
        const yd_node *k = map->keys[i];
        bool skipped = false;
        for (int j = 0; skip[j]; j++)
            skipped |= !strcmp(k->str, skip[j]);
        if (skipped)
            continue;
        args[nargs] = (nn_arg){.key = k->str, .line = k->line, .col = k->col};
        rc = to_value(b, map->vals[i], &args[nargs].v);
        nargs++;
    }
    if (rc == 0) {
        nn_call c = {.type = type,
                     .prefix = prefix,
                     .nargs = nargs,
                     .args = args,
                     .ninputs = nin,
                     .inputs = ins,
                     .training = b->training,
                     .gen = b->gen,
                     .fused_attention = b->fused_attention,
                     .shared = b->shared};
        if (nn_build(b->g, &c, r) < 0) {
            const yd_node *at = r->bad_arg >= 0 && r->bad_arg < nargs ? NULL : name;
            rc = at ? bfail(b, at, "%s", r->err)
                    : diag_set(b->d, b->md->path, args[r->bad_arg].line, args[r->bad_arg].col, "%s",
                               r->err);
        } else if (r->nout < 1) {
            rc = bfail(b, name, "layer '%s' made no output", type);
        }
    }
    for (int i = 0; i < nargs; i++)
        value_free(&args[i].v);
    free(args);
    if (rc == 0)
        rc = set_origin(b, name);
    return rc;
}

static int build_steps(md_build *b, md_scope *sc, const yd_node *seq);

static int build_layer(md_build *b, md_scope *sc, const yd_node *name, const yd_node *map) {
    const yd_node *in = yd_get(map, "input"), *as = yd_get(map, "as");
    int ids[MD_MAX_INPUTS], nin = 0;
    if (step_inputs(b, sc, in, name, ids, MD_MAX_INPUTS, &nin) < 0)
        return -1;
    char *prefix = scope_take(b, sc, as ? as_base(as) : name->str);
    if (!prefix)
        return -1;
    // `unused: true`: the layer's parameters are made (counted, initialized,
    // saved) but none of its ops, and its first input passes through, as a
    // module the class holds and its forward never calls
    const yd_node *un = yd_get(map, "unused");
    bool unused = false;
    if (un)
        yd_is_bool(un, &unused);
    nn_gen *gen = b->gen;
    int n0 = b->g->n;
    if (unused)
        b->gen = NULL; // no cache for a layer that never runs
    nn_result r;
    int rc = call_nn(b, name, name->str, prefix, map, ids, nin,
                     (const char *const[]){"input", "as", "unused", NULL}, &r);
    b->gen = gen;
    free(prefix);
    if (rc < 0)
        return -1;
    if (unused) {
        if (graph_keep_params(b->g, n0) == 0)
            return bfail(b, un,
                         "layer '%s' has no parameters; 'unused: true' keeps a layer's "
                         "parameters without running it",
                         name->str);
        if (b->norigin > b->g->n)
            b->norigin = b->g->n;
        r.out[0] = ids[0];
        r.nout = 1;
    }
    return step_outputs(b, sc, as, name, r.out, r.nout);
}

static bool same_shape(const graph_node *a, const graph_node *c) {
    if (a->ndim != c->ndim)
        return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != c->shape[i])
            return false;
    return true;
}

static void shape_str(const graph_node *n, char *buf, size_t cap) {
    size_t o = (size_t)snprintf(buf, cap, "(");
    for (int i = 0; i < n->ndim && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%lld", i ? ", " : "", (long long)n->shape[i]);
    if (o < cap)
        snprintf(buf + o, cap - o, ")");
}

// A block's body in a new scope that starts from `in`; *out its last output.
static int build_block(md_build *b, md_scope *sc, const char *prefix, const yd_node *body, int in,
                       int *out) {
    md_scope inner = {.parent = sc, .prev = in, .prefix = strdup(prefix)};
    if (!inner.prefix)
        return oom(b);
    int rc = build_steps(b, &inner, body);
    *out = inner.prev;
    scope_free(&inner);
    return rc;
}

static int build_residual(md_build *b, md_scope *sc, const yd_node *s) {
    const yd_node *key = yd_get_key(s, "residual"), *as = yd_get(s, "as");
    int in = -1, nin = 0, out = -1;
    if (step_inputs(b, sc, yd_get(s, "input"), key, &in, 1, &nin) < 0)
        return -1;
    char *prefix = scope_take(b, sc, as ? as_base(as) : "residual");
    if (!prefix)
        return -1;
    int rc = build_block(b, sc, prefix, yd_get(s, "residual"), in, &out);
    free(prefix);
    if (rc < 0)
        return -1;
    const graph_node *x = graph_at(b->g, in), *y = graph_at(b->g, out);
    if (!same_shape(x, y)) {
        char xs[96], ys[96];
        shape_str(x, xs, sizeof xs);
        shape_str(y, ys, sizeof ys);
        return bfail(b, key,
                     "residual: the body turns shape %s into %s; a residual adds its input "
                     "back, so they must match",
                     xs, ys);
    }
    int sum = graph_binary(b->g, OP_ADD, out, in);
    if (sum < 0)
        return bfail(b, key, "residual: %s", graph_error(b->g));
    return step_outputs(b, sc, as, key, &sum, 1);
}

static int build_repeat(md_build *b, md_scope *sc, const yd_node *s) {
    const yd_node *cnt = yd_get(s, "repeat"), *as = yd_get(s, "as");
    const yd_node *key = yd_get_key(s, "repeat");
    int64_t n;
    if (eval_int(b, cnt, "the repeat count", &n) < 0)
        return -1;
    if (n < 0)
        return bfail(b, cnt, "the repeat count is %lld; it must be 0 or more", (long long)n);
    int cur = -1, nin = 0;
    if (step_inputs(b, sc, yd_get(s, "input"), key, &cur, 1, &nin) < 0)
        return -1;
    // `repeat: $layers` names its repetitions layers.0, layers.1, ...
    const char *base = as_base(as);
    expr *e = NULL;
    int off;
    char err[8];
    if (!base && expr_parse(cnt->str, &e, &off, err, sizeof err) == 0)
        base = expr_single_var(e);
    char *prefix = scope_take(b, sc, base ? base : "repeat");
    expr_free(e);
    if (!prefix)
        return -1;
    int rc = 0;
    if (n > MD_MAX_NODES) // each repetition is at least a step: the cap, known now
        rc = bfail(b, cnt, "the repeat count is %lld; a model has at most %d ops", (long long)n,
                   MD_MAX_NODES);
    // `shared: true`: one set of parameters, named without a repetition
    // index and made by the first repetition, used by every one (ALBERT)
    bool shared = false, was_shared = b->shared;
    const yd_node *sh = yd_get(s, "shared");
    if (sh)
        yd_is_bool(sh, &shared); // checked at load
    b->shared = was_shared || shared;
    int start = b->g->n;
    for (int64_t i = 0; i < n && rc == 0; i++) {
        char p[300];
        if (shared)
            snprintf(p, sizeof p, "%s", prefix);
        else
            snprintf(p, sizeof p, "%s.%lld", prefix, (long long)i);
        rc = build_block(b, sc, p, yd_get(s, "body"), cur, &cur);
        // the repetitions are alike: the first tells what all of them make
        int64_t each = b->g->n - start;
        if (rc == 0 && (b->g->n > MD_MAX_NODES || (i == 0 && start + each * n > MD_MAX_NODES)))
            rc = bfail(b, cnt, "%lld repetitions of %lld ops grow the model past %d ops; lower "
                               "the count",
                       (long long)n, (long long)each, MD_MAX_NODES);
    }
    b->shared = was_shared;
    free(prefix);
    if (rc < 0)
        return -1;
    return step_outputs(b, sc, as, key, &cur, 1);
}

// One parameter of a call: the call's value (evaluated where the call is
// written) or the block's default (over the model's parameters alone).
static int call_value(md_build *b, const yd_node *n, md_fval *out) {
    bool t;
    expr *e = NULL;
    const md_fval *fv = n->str[0] == '$' ? frame_get(b->frame, n->str + 1) : NULL;
    if (fv && fv->kind != MD_FV_NUM) {
        *out = *fv;
        return 0;
    }
    int c = md_scalar_class(b->md, n, &e, b->d);
    expr_free(e);
    switch (c) {
    case MD_SC_BOOL:
        yd_is_bool(n, &t);
        *out = (md_fval){.kind = MD_FV_BOOL, .flag = t};
        return 0;
    case MD_SC_STR: *out = (md_fval){.kind = MD_FV_STR, .str = n->str}; return 0;
    case MD_SC_EXPR: out->kind = MD_FV_NUM; return eval_node(b, n, &out->num);
    default: return bfail(b, n, "a block parameter needs a value");
    }
}

// `- name: {param: value, input: ..., as: ...}`: the block's body in a
// scope of its own that sees its inputs only, with $param its call's values.
static int build_call(md_build *b, md_scope *sc, const yd_node *name, const yd_node *map) {
    const yd_node *blk = md_block(b->md, name->str), *params = yd_get(blk, "params");
    const yd_node *as = yd_get(map, "as"), *innames = yd_get(blk, "inputs");
    if (params && params->kind != YD_MAP)
        params = NULL;
    if (b->depth >= MD_MAX_BLOCK_DEPTH)
        return bfail(b, name, "blocks nest %d deep here; at most %d", b->depth + 1,
                     MD_MAX_BLOCK_DEPTH);
    int ids[MD_MAX_INPUTS], nin = 0;
    if (step_inputs(b, sc, yd_get(map, "input"), name, ids, MD_MAX_INPUTS, &nin) < 0)
        return -1;
    int want = md_block_ninputs(blk);
    if (nin != want)
        return bfail(b, name, "block '%s' takes %d input%s; this call gives %d", name->str, want,
                     want == 1 ? "" : "s", nin);
    md_frame f = {.params = params};
    int np = params ? params->n : 0, rc = 0;
    if (np && !(f.vals = calloc((size_t)np, sizeof *f.vals)))
        return oom(b);
    for (int i = 0; i < np && rc == 0; i++) {
        const yd_node *given = map ? yd_get(map, params->keys[i]->str) : NULL;
        if (given) {
            rc = call_value(b, given, &f.vals[i]);
        } else if (yd_is_null(params->vals[i])) { // checked at load; kept safe
            rc = bfail(b, name, "block '%s' needs '%s'", name->str, params->keys[i]->str);
        } else {
            md_frame *caller = b->frame; // a default sees the model's parameters
            b->frame = NULL;
            rc = call_value(b, params->vals[i], &f.vals[i]);
            b->frame = caller;
        }
    }
    char *prefix = rc == 0 ? scope_take(b, sc, as ? as_base(as) : name->str) : NULL;
    if (rc == 0 && !prefix)
        rc = -1;
    md_scope inner = {.prev = ids[0], .prefix = prefix};
    for (int i = 0; i < nin && rc == 0 && innames; i++)
        rc = scope_bind(b, &inner,
                        (innames->kind == YD_SEQ ? innames->vals[i] : innames)->str, ids[i]);
    if (rc == 0) {
        md_frame *caller = b->frame;
        const char *outer = b->block;
        b->frame = &f;
        b->block = name->str;
        b->depth++;
        rc = build_steps(b, &inner, yd_get(blk, "body"));
        b->depth--;
        b->block = outer;
        b->frame = caller;
    }
    int out = inner.prev;
    scope_free(&inner);
    free(f.vals);
    if (rc < 0)
        return -1;
    return step_outputs(b, sc, as, name, &out, 1);
}

static int build_steps(md_build *b, md_scope *sc, const yd_node *seq) {
    for (int i = 0; i < seq->n; i++) {
        const yd_node *s = seq->vals[i];
        int rc;
        if (s->kind == YD_SCALAR && md_block(b->md, s->str))
            rc = build_call(b, sc, s, NULL);
        else if (s->kind == YD_SCALAR)
            rc = build_layer(b, sc, s, NULL);
        else if (s->n > 0 && md_block(b->md, s->keys[0]->str))
            rc = build_call(b, sc, s->keys[0], yd_is_null(s->vals[0]) ? NULL : s->vals[0]);
        else if (yd_get(s, "repeat"))
            rc = build_repeat(b, sc, s);
        else if (yd_get(s, "residual"))
            rc = build_residual(b, sc, s);
        else
            rc = build_layer(b, sc, s->keys[0], yd_is_null(s->vals[0]) ? NULL : s->vals[0]);
        if (rc < 0)
            return -1;
    }
    return 0;
}

// ---------------------------------------------------------------- the model

static int build_inputs(md_build *b, md_scope *root) {
    const yd_node *in = b->md->inputs;
    for (int i = 0; i < in->n; i++) {
        const yd_node *k = in->keys[i], *v = in->vals[i];
        const yd_node *shape = yd_get(v, "shape"), *dt = yd_get(v, "dtype"),
                      *range = yd_get(v, "range");
        int64_t dims[TENSOR_MAX_DIMS];
        for (int j = 0; j < shape->n; j++) {
            if (eval_int(b, shape->vals[j], "a dimension", &dims[j]) < 0)
                return -1;
            if (b->gen && shape->vals[j]->kind == YD_SCALAR &&
                !strcmp(shape->vals[j]->str, "$seq")) {
                // a generation step's tokens; $seq is the model's positions
                if (dims[j] < b->gen->max_len)
                    return bfail(b, shape->vals[j],
                                 "a context of %lld tokens (prompt and new tokens) exceeds the "
                                 "model's %lld positions ($seq)",
                                 (long long)b->gen->max_len, (long long)dims[j]);
                dims[j] = b->gen_tokens;
            }
            if (dims[j] <= 0)
                return bfail(b, shape->vals[j],
                             "dimension %d of input '%s' is %lld; every dimension must be "
                             "positive",
                             j, k->str, (long long)dims[j]);
        }
        enum dtype t = DT_F32;
        if (dt)
            dtype_parse(dt->str, &t);
        int64_t lo = 0, hi = 0;
        if (range) {
            if (eval_int(b, range->vals[0], "a range bound", &lo) < 0 ||
                eval_int(b, range->vals[1], "a range bound", &hi) < 0)
                return -1;
            if (lo >= hi)
                return bfail(b, range, "range [%lld, %lld) of input '%s' is empty", (long long)lo,
                             (long long)hi, k->str);
        }
        int id = graph_input(b->g, k->str, t, shape->n, dims);
        if (id < 0)
            return bfail(b, k, "input '%s': %s", k->str, graph_error(b->g));
        if (range) {
            b->g->nodes[id].ia[0] = lo;
            b->g->nodes[id].ia[1] = hi;
            b->g->nodes[id].ia[2] = 1;
        }
        if (set_origin(b, k) < 0 || scope_bind(b, root, k->str, id) < 0)
            return -1;
        if (i == 0)
            root->prev = id; // the first input feeds the first layer
    }
    return 0;
}

// A generation step's own inputs (nn.h): the tokens' positions and, for
// the static cache, where they go and how many rows are valid after.
static int build_gen_inputs(md_build *b) {
    nn_gen *gen = b->gen;
    gen->nlayers = 0;
    gen->kv_bytes_per_token = 0;
    gen->position_ids = graph_input(b->g, "position_ids", DT_I32, 1, &b->gen_tokens);
    gen->cache_pos = gen->kv_len = -1;
    if (gen->kv == NN_KV_STATIC) {
        gen->cache_pos = graph_input(b->g, "cache_pos", DT_I32, 0, NULL);
        gen->kv_len = graph_input(b->g, "kv_len", DT_I32, 0, NULL);
    }
    if (gen->position_ids < 0 || (gen->kv == NN_KV_STATIC && gen->kv_len < 0))
        return diag_set(b->d, b->md->path, 0, 0, "generation inputs: %s", graph_error(b->g));
    // drawn like any input until the driver sets them: valid positions
    graph_node *p = &b->g->nodes[gen->position_ids];
    p->ia[0] = 0, p->ia[1] = gen->max_len, p->ia[2] = 1;
    return 0;
}

// CONCAT: each attention layer's grown keys and values after the model's outputs.
static int build_gen_outputs(md_build *b) {
    if (b->gen->kv != NN_KV_CONCAT)
        return 0;
    if (b->g->noutputs + 2 * b->gen->nlayers > GRAPH_MAX_OUTPUTS)
        return diag_set(b->d, b->md->path, 0, 0, "%d attention layers: too many cache outputs",
                        b->gen->nlayers);
    for (int i = 0; i < b->gen->nlayers; i++) {
        graph_output(b->g, b->gen->present_k[i]);
        graph_output(b->g, b->gen->present_v[i]);
    }
    return 0;
}

// One loss term; *out its scalar (-1 when not training: names checked only).
static int build_loss_term(md_build *b, md_scope *root, const yd_node *l, const char *prefix,
                           int *out) {
    const yd_node *type = l->keys[0], *v = l->vals[0];
    const yd_node *in = yd_get(v, "input"), *tg = yd_get(v, "target");
    const yd_node *len = yd_get(v, "lengths"); // a third input (ctc's target lengths)
    int ids[3];
    *out = -1;
    if (in ? resolve(b, root, in, &ids[0]) < 0 : (ids[0] = root->prev) < 0)
        return -1;
    if (tg && resolve(b, root, tg, &ids[1]) < 0)
        return -1;
    if (len && resolve(b, root, len, &ids[2]) < 0)
        return -1;
    if (!b->training)
        return 0;
    nn_result r;
    if (call_nn(b, type, type->str, prefix, v, ids, len ? 3 : tg ? 2 : 1,
                (const char *const[]){"input", "target", "lengths", NULL}, &r) < 0)
        return -1;
    *out = r.out[0];
    return 0;
}

// modeldef_opts.output_mean_loss: the loss is PyTorch's benchmark harness's
// reduce_to_scalar_loss over the model's outputs, whatever its `loss:` says:
// each floating output's mean over all its elements, averaged over them
static int build_output_mean_loss(md_build *b) {
    graph *g = b->g;
    int sum = -1, n = 0;
    for (int i = 0; i < g->noutputs; i++) {
        int o = g->outputs[i];
        if (!dtype_is_float(g->nodes[o].dtype))
            continue;
        int flat = g->nodes[o].ndim == 1 ? o : graph_reshape(g, o, 1, (int64_t[]){-1});
        int m = flat < 0 ? -1 : graph_reduce(g, OP_MEAN, flat, 0);
        m = m < 0 ? -1 : graph_reshape(g, m, 0, NULL);
        sum = m < 0 ? -1 : sum < 0 ? m : graph_binary(g, OP_ADD, sum, m);
        if (sum < 0)
            return diag_set(b->d, b->md->path, 0, 0, "the outputs' mean as the loss: %s",
                            graph_error(g));
        n++;
    }
    if (!n)
        return diag_set(b->d, b->md->path, 0, 0,
                        "the outputs' mean as the loss: the model has no floating output");
    if (n > 1 && (sum = graph_scale(g, sum, 1.0 / n, 0)) < 0)
        return diag_set(b->d, b->md->path, 0, 0, "the outputs' mean as the loss: %s",
                        graph_error(g));
    g->loss = sum;
    return 0;
}

// The loss: one term, or `mean:` of several, summed and scaled by 1/n as
// (a + b) / 2 runs in PyTorch.
static int build_loss(md_build *b, md_scope *root) {
    const yd_node *l = b->md->loss;
    if (strcmp(l->keys[0]->str, "mean"))
        return build_loss_term(b, root, l, "loss", &b->g->loss);
    const yd_node *terms = l->vals[0];
    int sum = -1;
    for (int i = 0; i < terms->n; i++) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "loss.%d", i);
        int t;
        if (build_loss_term(b, root, terms->vals[i], prefix, &t) < 0)
            return -1;
        if (b->training && (sum = sum < 0 ? t : graph_binary(b->g, OP_ADD, sum, t)) < 0)
            return bfail(b, l->keys[0], "mean: %s", graph_error(b->g));
    }
    if (!b->training)
        return 0;
    if (terms->n > 1 && (sum = graph_scale(b->g, sum, 1.0 / terms->n, 0)) < 0)
        return bfail(b, l->keys[0], "mean: %s", graph_error(b->g));
    if (set_origin(b, l->keys[0]) < 0)
        return -1;
    b->g->loss = sum;
    return 0;
}

static int build_outputs(md_build *b, md_scope *root) {
    const yd_node *o = b->md->outputs;
    if (!o) {
        graph_output(b->g, root->prev);
        return 0;
    }
    int n = o->kind == YD_SEQ ? o->n : 1;
    if (n > GRAPH_MAX_MODEL_OUTPUTS)
        return bfail(b, o, "at most %d outputs", GRAPH_MAX_MODEL_OUTPUTS);
    for (int i = 0; i < n; i++) {
        int id;
        if (resolve(b, root, o->kind == YD_SEQ ? o->vals[i] : o, &id) < 0)
            return -1;
        graph_output(b->g, id);
    }
    return 0;
}

// Refuses a model whose parameters and inputs alone exceed this machine's
// memory, pointing at the layer that makes the largest of them.
static int check_memory(md_build *b) {
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || psize <= 0)
        return 0;
    double total = 0, phys = (double)pages * (double)psize, big = -1;
    int at = -1;
    for (int i = 0; i < b->g->n; i++) {
        const graph_node *n = graph_at(b->g, i);
        if (n->op != OP_INPUT && n->op != OP_PARAM && n->op != OP_BUFFER)
            continue;
        double bytes = (double)graph_node_bytes(n);
        total += bytes;
        if (bytes > big) {
            big = bytes;
            at = i;
        }
    }
    if (total <= phys || at < 0)
        return 0;
    const double gib = 1024.0 * 1024.0 * 1024.0;
    const char *name = graph_at(b->g, at)->name;
    return diag_set(b->d, b->md->path, b->oline[at], b->ocol[at],
                    "model needs %.1f GiB of parameters, this machine has %.1f GiB; the largest, "
                    "'%s' (%.1f GiB), is made here",
                    total / gib, phys / gib, name ? name : "?", big / gib);
}

int modeldef_build(const modeldef *md, const modeldef_override *ov, int nov, int64_t batch,
                   const modeldef_opts *opts, model **out, diag *d) {
    *out = NULL;
    if (batch <= 0)
        return diag_set(d, md->path, 0, 0, "batch must be positive, got %lld", (long long)batch);
    if (modeldef_unbuilt(md, d))
        return -1;
    md_build b = {.md = md,
                  .batch = batch,
                  .training = opts && opts->training,
                  .gen = opts ? opts->gen : NULL,
                  .gen_tokens = opts ? opts->gen_tokens : 0,
                  .fused_attention = opts && opts->fused_attention,
                  .d = d};
    if (b.gen && (b.training || b.gen_tokens <= 0 || b.gen->max_len < b.gen_tokens))
        return diag_set(d, md->path, 0, 0,
                        "a generation step needs inference, tokens and a context that holds them");
    md_scope root = {.prev = -1, .prefix = strdup("")};
    b.g = graph_new();
    int rc = !b.g || !root.prefix ? oom(&b) : 0;
    if (rc == 0)
        rc = setup_params(&b, ov, nov);
    if (rc == 0)
        rc = build_inputs(&b, &root);
    if (rc == 0 && b.gen)
        rc = build_gen_inputs(&b);
    if (rc == 0)
        rc = build_steps(&b, &root, md->body);
    if (rc == 0)
        rc = build_outputs(&b, &root);
    if (rc == 0 && b.gen)
        rc = build_gen_outputs(&b);
    if (rc == 0 && b.training && opts && opts->output_mean_loss)
        rc = build_output_mean_loss(&b);
    else if (rc == 0 && md->loss)
        rc = build_loss(&b, &root);
    if (rc == 0 && !(opts && opts->graph_only))
        rc = check_memory(&b);
    if (rc == 0 && !(*out = model_new(b.g, md->name, md->family, batch)))
        rc = oom(&b);
    if (rc < 0)
        graph_free(b.g);
    scope_free(&root);
    for (int j = 0; j < nov && b.owned; j++)
        expr_free(b.owned[j]);
    free(b.owned);
    free(b.pval);
    free(b.pstate);
    free(b.pexpr);
    free(b.psrc);
    free(b.stack);
    free(b.pover);
    free(b.oline);
    free(b.ocol);
    return rc;
}
