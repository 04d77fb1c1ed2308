// Suite files: a list of cases over model files (suite.h, docs/yaml.md).
#include "suite.h"

#include "yamldoc.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const suite_keys[] = {"name", "defaults", "cases", NULL};
static const char *const defaults_keys[] = {"modes",     "precisions", "workloads", "optimizer",
                                            "processes", "tolerance",  "loss",      NULL};
static const char *const case_keys[] = {"name",      "model",  "batch",      "params",
                                        "sizes",     "optimizer", "prompt_len", "new_tokens",
                                        "rounds",    "study",     "tolerance",  "loss",
                                        "dp_sgd",    NULL};
static const char *const tolerance_keys[] = {"infer", "train", NULL};
static const char *const adamw_keys[] = {"lr", "beta1", "beta2", "eps", "weight_decay", NULL};
static const char *const sgd_keys[] = {"lr", "momentum", "dampening", "weight_decay", "nesterov",
                                       NULL};
static const char *const dp_keys[] = {"max_grad_norm", "noise_multiplier", NULL};
static const char *const size_keys[] = {"params", "batch", "prompt_len", "new_tokens", "rounds",
                                        NULL};

// The words each default list may hold (the runner's modes, precisions,
// workloads; docs/yaml.md).
static const char *const known_modes[] = {"eager", "compiled", "fused", "captured", NULL};
static const char *const known_precisions[] = {"fp32", "amp", NULL};
static const char *const known_workloads[] = {"infer", "train", "generate", "chat", NULL};

typedef struct {
    const yd_doc *doc;
    diag *d;
} suite_ctx;

static int oom(suite_ctx *x) {
    return diag_set(x->d, x->doc->path, 0, 0, "out of memory loading the suite");
}

static void free_words(char **w, int n) {
    for (int i = 0; i < n; i++)
        free(w[i]);
    free(w);
}

static int words_set(suite_ctx *x, char ***out, int *nout, const char *const *w) {
    int n = 0;
    while (w[n])
        n++;
    char **p = calloc((size_t)n, sizeof *p);
    if (!p)
        return oom(x);
    for (int i = 0; i < n; i++)
        if (!(p[i] = strdup(w[i]))) {
            free_words(p, i);
            return oom(x);
        }
    free_words(*out, *nout);
    *out = p;
    *nout = n;
    return 0;
}

// A word or a list of words, each from `known`.
static int parse_words(suite_ctx *x, const yd_node *n, const char *what, const char *const *known,
                       char ***out, int *nout) {
    int count = n->kind == YD_SEQ ? n->n : 1;
    if (n->kind == YD_MAP)
        return diag_set(x->d, x->doc->path, n->line, n->col,
                        "%s must be a list of words, not a mapping", what);
    if (count == 0)
        return diag_set(x->d, x->doc->path, n->line, n->col, "%s is an empty list", what);
    char **w = calloc((size_t)count, sizeof *w);
    if (!w)
        return oom(x);
    for (int i = 0; i < count; i++) {
        const yd_node *v = n->kind == YD_SEQ ? n->vals[i] : n;
        if (v->kind != YD_SCALAR) {
            free_words(w, i);
            return diag_set(x->d, x->doc->path, v->line, v->col,
                            "each of %s must be a word, not %s", what, yd_kind_name(v->kind));
        }
        bool ok = false;
        for (int k = 0; known[k] && !ok; k++)
            ok = !strcmp(known[k], v->str);
        if (!ok) {
            char list[128] = "";
            size_t o = 0;
            for (int k = 0; known[k] && o < sizeof list; k++)
                o += (size_t)snprintf(list + o, sizeof list - o, "%s%s", k ? ", " : "", known[k]);
            free_words(w, i);
            return diag_set(x->d, x->doc->path, v->line, v->col,
                            "unknown word '%s' in %s; expected %s", v->str, what, list);
        }
        if (!(w[i] = strdup(v->str))) {
            free_words(w, i);
            return oom(x);
        }
    }
    free_words(*out, *nout);
    *out = w;
    *nout = count;
    return 0;
}

// A positive integer under key (batch, prompt_len, new_tokens).
static int parse_count(suite_ctx *x, const yd_node *n, const char *key, int64_t *out) {
    if (n->kind != YD_SCALAR)
        return diag_set(x->d, x->doc->path, n->line, n->col, "%s must be a positive integer, not %s",
                        key, yd_kind_name(n->kind));
    const char *s = n->str;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || errno == ERANGE || !n->plain)
        return diag_set(x->d, x->doc->path, n->line, n->col,
                        "%s must be a positive integer, got '%s'", key, s);
    if (v <= 0)
        return diag_set(x->d, x->doc->path, n->line, n->col,
                        "%s must be a positive integer, got %lld", key, v);
    *out = v;
    return 0;
}

// defaults.processes: 1 to SUITE_MAX_PROCESSES
static int parse_processes(suite_ctx *x, const yd_node *n, int *out) {
    int64_t v;
    if (parse_count(x, n, "processes", &v) < 0)
        return -1;
    if (v > SUITE_MAX_PROCESSES)
        return diag_set(x->d, x->doc->path, n->line, n->col,
                        "processes is at most %d, got %lld", SUITE_MAX_PROCESSES, (long long)v);
    *out = (int)v;
    return 0;
}

static int parse_batch(suite_ctx *x, const yd_node *n, int64_t *out) {
    return parse_count(x, n, "batch", out);
}

// The generate workload's prompt_len and new_tokens of a case or a size.
static int parse_gen(suite_ctx *x, const yd_node *n, int64_t *prompt_len, int64_t *new_tokens,
                     int64_t *rounds) {
    const yd_node *p = yd_get(n, "prompt_len"), *t = yd_get(n, "new_tokens");
    const yd_node *r = yd_get(n, "rounds");
    if (p && parse_count(x, p, "prompt_len", prompt_len) < 0)
        return -1;
    if (r && parse_count(x, r, "rounds", rounds) < 0)
        return -1;
    return t ? parse_count(x, t, "new_tokens", new_tokens) : 0;
}

// Appends (or replaces, for a key given again by a size) the overrides of a
// params mapping.
static int add_overrides(suite_ctx *x, suite *s, suite_case *c, const yd_node *params,
                         const char *what) {
    if (yd_expect(x->doc, params, YD_MAP, what, x->d) < 0)
        return -1;
    for (int i = 0; i < params->n; i++) {
        const yd_node *k = params->keys[i], *v = params->vals[i];
        if (v->kind != YD_SCALAR || yd_is_null(v))
            return diag_set(x->d, x->doc->path, v->line, v->col,
                            "parameter '%s' must be a number or an expression", k->str);
        char *key = strdup(k->str), *val = strdup(v->str);
        if (!key || !val) {
            free(key);
            free(val);
            return oom(x);
        }
        modeldef_override o = {key, val, s->path, v->line, v->text_col};
        int j = 0;
        while (j < c->noverrides && strcmp(c->overrides[j].key, key))
            j++;
        if (j < c->noverrides) {
            free((char *)c->overrides[j].key);
            free((char *)c->overrides[j].expr);
            c->overrides[j] = o;
            continue;
        }
        modeldef_override *p = realloc(c->overrides, (size_t)(c->noverrides + 1) * sizeof *p);
        if (!p) {
            free(key);
            free(val);
            return oom(x);
        }
        c->overrides = p;
        c->overrides[c->noverrides++] = o;
    }
    return 0;
}

// `model: gpt2` -> <suite dir>/../models/gpt2.yaml or $TCBENCH_MODELS/gpt2.yaml;
// a value with '/' or ending in .yaml is a path relative to the suite file.
static char *model_path(const char *suite_path, const char *model) {
    size_t ml = strlen(model);
    bool is_path = strchr(model, '/') || (ml >= 5 && !strcmp(model + ml - 5, ".yaml"));
    const char *slash = strrchr(suite_path, '/');
    int dl = slash ? (int)(slash - suite_path) : 1;
    const char *dir = slash ? suite_path : ".";
    const char *env = getenv("TCBENCH_MODELS");
    char *p = NULL;
    int rc;
    if (is_path && model[0] == '/')
        rc = asprintf(&p, "%s", model);
    else if (is_path)
        rc = asprintf(&p, "%.*s/%s", dl, dir, model);
    else if (env && *env)
        rc = asprintf(&p, "%s/%s.yaml", env, model);
    else
        rc = asprintf(&p, "%.*s/../models/%s.yaml", dl, dir, model);
    return rc < 0 ? NULL : p;
}

// The model's short name: "models/gpt2.yaml" -> "gpt2".
static char *model_stem(const char *model) {
    const char *b = strrchr(model, '/');
    b = b ? b + 1 : model;
    size_t n = strlen(b);
    if (n > 5 && !strcmp(b + n - 5, ".yaml"))
        n -= 5;
    return strndup(b, n);
}

// true or false.
static int parse_bool(suite_ctx *x, const yd_node *v, const char *key, bool *out) {
    if (!yd_is_bool(v, out))
        return diag_set(x->d, x->doc->path, v->line, v->col, "%s must be true or false", key);
    return 0;
}

// A non-negative finite number.
static int parse_rate(suite_ctx *x, const yd_node *v, const char *what, double *out) {
    char *end = NULL;
    double d = v->kind == YD_SCALAR && !yd_is_null(v) ? strtod(v->str, &end) : NAN;
    if (!end || end == v->str || *end || !(d >= 0) || d > 1e30)
        return diag_set(x->d, x->doc->path, v->line, v->col,
                        "%s must be a non-negative number, got '%s'", what,
                        v->kind == YD_SCALAR ? v->str : "a collection");
    *out = d;
    return 0;
}

// optimizer: adamw | sgd | {adamw: {lr: .., beta1: .., beta2: .., eps: .., weight_decay: ..}}
//          | {sgd: {lr: .., momentum: .., dampening: .., weight_decay: .., nesterov: true}}
static int parse_optimizer(suite_ctx *x, const yd_node *n, train_opts *o) {
    const yd_node *kind = n, *opts = NULL;
    if (n->kind == YD_MAP) {
        if (n->n != 1)
            return diag_set(x->d, x->doc->path, n->line, n->col,
                            "optimizer is adamw or sgd, or a one-key mapping like "
                            "{adamw: {lr: 0.001}}");
        kind = n->keys[0];
        opts = n->vals[0];
    }
    if (kind->kind != YD_SCALAR || yd_is_null(kind) ||
        (strcmp(kind->str, "adamw") && strcmp(kind->str, "sgd")))
        return diag_set(x->d, x->doc->path, kind->line, kind->col,
                        "unknown optimizer '%s'; expected adamw or sgd",
                        kind->kind == YD_SCALAR ? kind->str : "a collection");
    bool sgd = !strcmp(kind->str, "sgd");
    *o = sgd ? train_opts_sgd() : train_opts_default();
    if (!opts || yd_is_null(opts))
        return 0;
    if (yd_expect(x->doc, opts, YD_MAP, "the optimizer's settings", x->d) < 0 ||
        yd_check_keys(x->doc, opts, sgd ? "sgd" : "adamw", sgd ? sgd_keys : adamw_keys, x->d) < 0)
        return -1;
    for (int i = 0; i < opts->n; i++) {
        const char *k = opts->keys[i]->str;
        const yd_node *v = opts->vals[i];
        if (!strcmp(k, "nesterov")) {
            if (v->kind != YD_SCALAR || (strcmp(v->str, "true") && strcmp(v->str, "false")))
                return diag_set(x->d, x->doc->path, v->line, v->col,
                                "nesterov must be true or false");
            o->nesterov = !strcmp(v->str, "true");
            continue;
        }
        double *dst = !strcmp(k, "lr")             ? &o->lr
                      : !strcmp(k, "beta1")        ? &o->beta1
                      : !strcmp(k, "beta2")        ? &o->beta2
                      : !strcmp(k, "eps")          ? &o->eps
                      : !strcmp(k, "weight_decay") ? &o->weight_decay
                      : !strcmp(k, "momentum")     ? &o->momentum
                                                   : &o->dampening;
        if (parse_rate(x, v, k, dst) < 0)
            return -1;
        if ((dst == &o->beta1 || dst == &o->beta2) && *dst >= 1)
            return diag_set(x->d, x->doc->path, v->line, v->col, "%s must be below 1", k);
    }
    if (o->nesterov && (o->momentum <= 0 || o->dampening != 0))
        return diag_set(x->d, x->doc->path, opts->line, opts->col,
                        "nesterov needs a momentum and zero dampening");
    return 0;
}

// dp_sgd: {max_grad_norm: 1.0, noise_multiplier: 1.0}: training as DP-SGD
// (per-sample gradients clipped and noised; autograd.h), both keys needed
static int parse_dp(suite_ctx *x, const yd_node *n, train_opts *o) {
    if (yd_expect(x->doc, n, YD_MAP, "dp_sgd", x->d) < 0 ||
        yd_check_keys(x->doc, n, "dp_sgd", dp_keys, x->d) < 0)
        return -1;
    for (int i = 0; dp_keys[i]; i++) {
        const yd_node *v = yd_get(n, dp_keys[i]);
        if (!v)
            return diag_set(x->d, x->doc->path, n->line, n->col, "dp_sgd needs '%s:'",
                            dp_keys[i]);
        double *dst = i ? &o->dp_noise_multiplier : &o->dp_max_grad_norm;
        if (parse_rate(x, v, dp_keys[i], dst) < 0)
            return -1;
        if (!i && *dst == 0)
            return diag_set(x->d, x->doc->path, v->line, v->col,
                            "max_grad_norm must be above 0");
    }
    return 0;
}

// tolerance: {infer: 1e-3, train: 2e-2}: the accuracy checks' tolerance for
// those workloads in both precisions, over the built-in ones (a key left out
// keeps what *t had)
static int parse_tolerance(suite_ctx *x, const yd_node *n, suite_tolerance *t) {
    if (yd_expect(x->doc, n, YD_MAP, "tolerance", x->d) < 0 ||
        yd_check_keys(x->doc, n, "tolerance", tolerance_keys, x->d) < 0)
        return -1;
    for (int i = 0; i < n->n; i++) {
        const yd_node *v = n->vals[i];
        double d = 0;
        if (parse_rate(x, v, "a tolerance", &d) < 0)
            return -1;
        if (!(d > 0) || d >= 1)
            return diag_set(x->d, x->doc->path, v->line, v->col,
                            "a tolerance is above 0 and below 1, got '%s'", v->str);
        *(!strcmp(n->keys[i]->str, "infer") ? &t->infer : &t->train) = d;
    }
    return 0;
}

// loss: model (the model's own `loss:`) or output_mean (the mean of its
// outputs, as PyTorch's harness trains TorchBench's models)
static int parse_loss(suite_ctx *x, const yd_node *v, bool *output_mean) {
    if (v->kind != YD_SCALAR || yd_is_null(v) ||
        (strcmp(v->str, "model") && strcmp(v->str, "output_mean")))
        return diag_set(x->d, x->doc->path, v->line, v->col,
                        "loss is model (the model's own) or output_mean, got '%s'",
                        v->kind == YD_SCALAR ? v->str : "a collection");
    *output_mean = !strcmp(v->str, "output_mean");
    return 0;
}

static int parse_case(suite_ctx *x, suite *s, const yd_node *n, const char *size, bool *size_seen) {
    if (yd_expect(x->doc, n, YD_MAP, "a case", x->d) < 0 ||
        yd_check_keys(x->doc, n, "a case", case_keys, x->d) < 0)
        return -1;
    suite_case *c = &s->cases[s->ncases];
    memset(c, 0, sizeof *c);
    c->line = n->line;
    c->col = n->col;
    s->ncases++; // counted now so suite_free frees what is filled
    const yd_node *model = yd_get(n, "model"), *name = yd_get(n, "name");
    if (!model)
        return diag_set(x->d, x->doc->path, n->line, n->col,
                        "a case needs 'model:' (a model name like gpt2, or a path)");
    if (model->kind != YD_SCALAR || yd_is_null(model))
        return diag_set(x->d, x->doc->path, model->line, model->col,
                        "model must be a model name or a path");
    if (!(c->model_path = model_path(s->path, model->str)))
        return oom(x);
    struct stat st;
    if (stat(c->model_path, &st) != 0)
        return diag_set(
            x->d, x->doc->path, model->line, model->col,
            "model file '%s': stat: %s (a model name is looked up in the models/ folder "
            "beside the suite's folder, or in $TCBENCH_MODELS; a path is relative "
            "to the suite file)",
            c->model_path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return diag_set(x->d, x->doc->path, model->line, model->col,
                        "model file '%s' is not a regular file", c->model_path);
    if (name && (name->kind != YD_SCALAR || yd_is_null(name)))
        return diag_set(x->d, x->doc->path, name->line, name->col, "a case's name must be a word");
    if (name && yd_check_name(x->doc, name, "a case's name", true, x->d) < 0)
        return -1;
    c->name = name ? strdup(name->str) : model_stem(model->str);
    if (!c->name)
        return oom(x);
    const yd_node *where = name ? name : model;
    for (int i = 0; i < s->ncases - 1; i++)
        if (!strcmp(s->cases[i].name, c->name))
            return diag_set(x->d, x->doc->path, where->line, where->col,
                            "duplicate case name '%s' (first at line %d); give each case its "
                            "own name",
                            c->name, s->cases[i].line);
    const yd_node *batch = yd_get(n, "batch"), *params = yd_get(n, "params");
    if (!batch)
        return diag_set(x->d, x->doc->path, n->line, n->col, "case '%s' needs 'batch:'", c->name);
    if (parse_batch(x, batch, &c->batch) < 0)
        return -1;
    if (parse_gen(x, n, &c->prompt_len, &c->new_tokens, &c->rounds) < 0)
        return -1;
    if (params && add_overrides(x, s, c, params, "params") < 0)
        return -1;
    const yd_node *study = yd_get(n, "study");
    if (study && parse_bool(x, study, "study", &c->study) < 0)
        return -1;
    const yd_node *opt = yd_get(n, "optimizer");
    c->optim = s->optim;
    if (opt && parse_optimizer(x, opt, &c->optim) < 0)
        return -1;
    const yd_node *dp = yd_get(n, "dp_sgd");
    if (dp && parse_dp(x, dp, &c->optim) < 0)
        return -1;
    const yd_node *loss = yd_get(n, "loss");
    c->output_mean_loss = s->output_mean_loss;
    if (loss && parse_loss(x, loss, &c->output_mean_loss) < 0)
        return -1;
    const yd_node *tol = yd_get(n, "tolerance");
    c->tol = s->tol;
    if (tol && parse_tolerance(x, tol, &c->tol) < 0)
        return -1;
    const yd_node *sizes = yd_get(n, "sizes");
    if (!sizes)
        return 0;
    if (yd_expect(x->doc, sizes, YD_MAP, "sizes", x->d) < 0)
        return -1;
    // every size is checked, the chosen one applied
    for (int i = 0; i < sizes->n; i++) {
        const yd_node *sv = sizes->vals[i];
        if (yd_expect(x->doc, sv, YD_MAP, "a size", x->d) < 0 ||
            yd_check_keys(x->doc, sv, "a size", size_keys, x->d) < 0)
            return -1;
        int64_t b = c->batch, pl = c->prompt_len, nt = c->new_tokens, rn = c->rounds;
        const yd_node *sb = yd_get(sv, "batch"), *sp = yd_get(sv, "params");
        if ((sb && parse_batch(x, sb, &b) < 0) || parse_gen(x, sv, &pl, &nt, &rn) < 0)
            return -1;
        if (sp && yd_expect(x->doc, sp, YD_MAP, "params", x->d) < 0)
            return -1;
        if (!size || strcmp(size, sizes->keys[i]->str))
            continue;
        *size_seen = true;
        c->batch = b;
        c->prompt_len = pl, c->new_tokens = nt, c->rounds = rn;
        if (sp && add_overrides(x, s, c, sp, "params") < 0)
            return -1;
    }
    return 0;
}

// "tiny, small" from every case's sizes, without repeats.
static void size_names(const yd_node *cases, char *buf, size_t cap) {
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < cases->n; i++) {
        const yd_node *sz = yd_get(cases->vals[i], "sizes");
        for (int j = 0; sz && sz->kind == YD_MAP && j < sz->n; j++) {
            const char *w = sz->keys[j]->str;
            bool dup = false;
            for (int pi = 0; pi <= i && !dup; pi++) {
                const yd_node *pz = yd_get(cases->vals[pi], "sizes");
                for (int pj = 0; pz && pz->kind == YD_MAP && pj < (pi == i ? j : pz->n); pj++)
                    dup |= !strcmp(pz->keys[pj]->str, w);
            }
            if (!dup && o < cap)
                o += (size_t)snprintf(buf + o, cap - o, "%s%s", o ? ", " : "", w);
        }
    }
}

static int parse_suite(suite_ctx *x, suite *s, const yd_node *root, const char *size) {
    if (!root)
        return diag_set(x->d, x->doc->path, 0, 0, "the suite file is empty; it needs 'cases:'");
    if (yd_expect(x->doc, root, YD_MAP, "a suite", x->d) < 0 ||
        yd_check_keys(x->doc, root, "suite", suite_keys, x->d) < 0)
        return -1;
    const yd_node *name = yd_get(root, "name");
    if (name && (name->kind != YD_SCALAR || yd_is_null(name)))
        return diag_set(x->d, x->doc->path, name->line, name->col, "name must be a word");
    if (name && yd_check_name(x->doc, name, "the suite's name", true, x->d) < 0)
        return -1;
    s->name = name ? strdup(name->str) : model_stem(s->path);
    if (!s->name)
        return oom(x);
    if (words_set(x, &s->modes, &s->nmodes, (const char *const[]){"eager", "compiled", NULL}) < 0 ||
        words_set(x, &s->precisions, &s->nprecisions, (const char *const[]){"fp32", NULL}) < 0 ||
        words_set(x, &s->workloads, &s->nworkloads, (const char *const[]){"infer", NULL}) < 0)
        return -1;
    s->optim = train_opts_default();
    const yd_node *def = yd_get(root, "defaults");
    if (def) {
        if (yd_expect(x->doc, def, YD_MAP, "defaults", x->d) < 0 ||
            yd_check_keys(x->doc, def, "defaults", defaults_keys, x->d) < 0)
            return -1;
        const yd_node *v;
        if ((v = yd_get(def, "modes")) &&
            parse_words(x, v, "modes", known_modes, &s->modes, &s->nmodes) < 0)
            return -1;
        if ((v = yd_get(def, "precisions")) &&
            parse_words(x, v, "precisions", known_precisions, &s->precisions, &s->nprecisions) < 0)
            return -1;
        if ((v = yd_get(def, "workloads")) &&
            parse_words(x, v, "workloads", known_workloads, &s->workloads, &s->nworkloads) < 0)
            return -1;
        if ((v = yd_get(def, "optimizer")) && parse_optimizer(x, v, &s->optim) < 0)
            return -1;
        if ((v = yd_get(def, "processes")) && parse_processes(x, v, &s->processes) < 0)
            return -1;
        if ((v = yd_get(def, "tolerance")) && parse_tolerance(x, v, &s->tol) < 0)
            return -1;
        if ((v = yd_get(def, "loss")) && parse_loss(x, v, &s->output_mean_loss) < 0)
            return -1;
    }
    const yd_node *cases = yd_get(root, "cases");
    if (!cases)
        return diag_set(x->d, x->doc->path, root->line, root->col,
                        "a suite needs 'cases:', a list of cases");
    if (yd_expect(x->doc, cases, YD_SEQ, "cases", x->d) < 0)
        return -1;
    if (cases->n == 0)
        return diag_set(x->d, x->doc->path, cases->line, cases->col, "cases is an empty list");
    if (!(s->cases = calloc((size_t)cases->n, sizeof *s->cases)))
        return oom(x);
    bool size_seen = false;
    for (int i = 0; i < cases->n; i++)
        if (parse_case(x, s, cases->vals[i], size, &size_seen) < 0)
            return -1;
    if (size && !size_seen) {
        char names[256];
        size_names(cases, names, sizeof names);
        if (names[0])
            return diag_set(x->d, x->doc->path, 0, 0,
                            "size '%s' is defined by no case in %s; sizes here: %s", size,
                            x->doc->path, names);
        return diag_set(x->d, x->doc->path, 0, 0,
                        "size '%s' is defined by no case in %s; this suite defines no sizes", size,
                        x->doc->path);
    }
    return 0;
}

int suite_load(const char *path, const char *size, suite **out, diag *d) {
    *out = NULL;
    yd_doc *doc;
    if (yd_load(path, &doc, d) < 0)
        return -1;
    suite *s = calloc(1, sizeof *s);
    suite_ctx x = {doc, d};
    if (!s || !(s->path = strdup(path))) {
        free(s);
        yd_free(doc);
        return diag_set(d, path, 0, 0, "out of memory loading the suite");
    }
    int rc = parse_suite(&x, s, doc->root, size);
    yd_free(doc);
    if (rc < 0) {
        suite_free(s);
        return -1;
    }
    *out = s;
    return 0;
}

void suite_free(suite *s) {
    if (!s)
        return;
    for (int i = 0; i < s->ncases; i++) {
        suite_case *c = &s->cases[i];
        free(c->name);
        free(c->model_path);
        for (int j = 0; j < c->noverrides; j++) {
            free((char *)c->overrides[j].key);
            free((char *)c->overrides[j].expr);
        }
        free(c->overrides);
    }
    free(s->cases);
    free_words(s->modes, s->nmodes);
    free_words(s->precisions, s->nprecisions);
    free_words(s->workloads, s->nworkloads);
    free(s->name);
    free(s->path);
    free(s);
}
