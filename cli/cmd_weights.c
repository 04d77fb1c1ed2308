// tcbench weights: each case's seeded values and eager's answers as a
// safetensors file (docs/torch.md), for another framework to load the same
// weights and inputs and check its outputs against tcbench's.
#include "cli.h"

#include "autodiff/autograd.h"
#include "base/files.h"
#include "eager/eager.h"
#include "model/model_prepare.h"
#include "results/safetensors.h"
#include "tcbench_config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: tcbench weights SUITE... -o DIR [--only NAMES] [--size NAME] [--seed N]\n"
    "\n"
    "Write DIR/CASE.safetensors for every selected case: the parameters and buffers\n"
    "under the model's names, the inputs as input.NAME, all from the seed a run\n"
    "uses; eager's fp32 inference outputs as output.K; and, where the case trains,\n"
    "one eager training step from those values: train.loss and train.grad.PARAM\n"
    "(each parameter's gradient; for a dp_sgd case the clipped per-sample sum over the\n"
    "batch size, before the noise).\n"
    "\n"
    "  -o, --output DIR     the folder (created)\n"
    "  --only NAMES         these cases only (comma-separated exact names; repeatable)\n"
    "  --size NAME          apply the suite's size NAME\n"
    "  --seed N             parameter and input values (default 0, as run's)\n"
    "  -h, --help           this help\n";

static const struct option long_opts[] = {
    {"output", required_argument, NULL, 'o'}, {"only", required_argument, NULL, 'n'},
    {"size", required_argument, NULL, 's'},   {"seed", required_argument, NULL, 'e'},
    {"help", no_argument, NULL, 'h'},         {0},
};

static const char *st_dtype(enum dtype t) {
    switch (t) {
    case DT_F32: return "F32";
    case DT_F16: return "F16";
    case DT_BF16: return "BF16";
    case DT_I32: return "I32";
    case DT_I64: return "I64";
    case DT_BOOL: return "BOOL";
    case DT_I8: return "I8";
    case DT_U8: return "U8";
    default: return NULL;
    }
}

// The tensors of one file, their names and the contiguous copies they need.
typedef struct wlist {
    st_tensor *t;
    char **names;
    tensor **own;
    int n, cap;
} wlist;

static int wl_add(wlist *w, const char *prefix, const char *name, const tensor *v) {
    if (w->n == w->cap) {
        int cap = w->cap ? 2 * w->cap : 64;
        st_tensor *t = realloc(w->t, (size_t)cap * sizeof *t);
        if (t)
            w->t = t;
        char **names = realloc(w->names, (size_t)cap * sizeof *names);
        if (names)
            w->names = names;
        tensor **own = realloc(w->own, (size_t)cap * sizeof *own);
        if (own)
            w->own = own;
        if (!t || !names || !own)
            return -1;
        w->cap = cap;
    }
    size_t len = strlen(prefix) + strlen(name) + 1;
    char *nm = malloc(len);
    tensor *c = tensor_is_contiguous(v) ? NULL : tensor_contiguous(v);
    if (!nm || (!c && !tensor_is_contiguous(v))) {
        free(nm);
        return -1;
    }
    snprintf(nm, len, "%s%s", prefix, name);
    const tensor *src = c ? c : v;
    st_tensor *t = &w->t[w->n];
    *t = (st_tensor){.name = nm, .dtype = st_dtype(src->dtype), .ndim = src->ndim,
                     .data = tensor_data(src), .bytes = tensor_nbytes(src)};
    for (int d = 0; d < src->ndim; d++)
        t->shape[d] = src->shape[d];
    w->names[w->n] = nm;
    w->own[w->n] = c;
    w->n++;
    return t->dtype ? 0 : -1;
}

static void wl_free(wlist *w) {
    for (int i = 0; i < w->n; i++) {
        free(w->names[i]);
        tensor_free(w->own[i]);
    }
    free(w->t);
    free(w->names);
    free(w->own);
}

// One eager step of m (step 1): out[0 .. noutputs).
static int eager_step(model *m, tensor **out, char *err, size_t cap) {
    eager *e = eager_new(m);
    if (!e)
        return snprintf(err, cap, "eager_new: out of memory"), -1;
    eager_set_step(e, 1);
    int rc = eager_run(e, out, NULL);
    if (rc < 0)
        snprintf(err, cap, "eager: %s", eager_error(e));
    eager_free(e);
    return rc;
}

static void free_outs(tensor **out, int n) {
    for (int i = 0; out && i < n; i++)
        tensor_free(out[i]);
    free(out);
}

// The case's training step from the same seed: train.loss and
// train.grad.PARAM into w (tr and its outputs kept for w's pointers).
// *why says why there is none (no loss, train_needs).
static int add_train(const bench_case *bc, uint64_t seed, const model *from, wlist *w, model **tr,
                     tensor ***tout, char *streams, size_t scap, char *why, size_t wcap, char *err,
                     size_t cap) {
    diag d = {0};
    if (bc->train_fail_to_load[0] || modeldef_train_unbuilt(bc->md, &d)) {
        snprintf(why, wcap, "%s", bc->train_fail_to_load[0] ? bc->train_fail_to_load : d.msg);
        return 0;
    }
    train_opts o = bc->c->optim;
    model_prep prep = {.train = &o, .keep_grads = true, .seed = seed, .no_values = true,
                       .output_mean_loss = bc->c->output_mean_loss};
    char perr[600];
    if (model_prepare(bc->md, bc->c->overrides, bc->c->noverrides, bc->batch, &prep, tr, perr,
                      sizeof perr) != MODEL_PREP_DONE) {
        snprintf(why, wcap, "%s", perr);
        return 0;
    }
    // the parameters and buffers the file holds (by name), not the ones the
    // training graph's own node ids would draw
    if (model_init_values_from(*tr, seed, from) < 0)
        return snprintf(err, cap, "out of memory"), -1;
    // own copies of what it shares with `from`: the step's optimizer (and a
    // training batch norm) updates parameters and buffers in place
    for (int i = 0; i < (*tr)->g->n; i++) {
        tensor *v = (*tr)->values[i];
        enum op op = (*tr)->g->nodes[i].op;
        if (!v || (op != OP_PARAM && op != OP_BUFFER))
            continue;
        tensor *c = tensor_contiguous(v);
        if (!c)
            return snprintf(err, cap, "out of memory"), -1;
        tensor_free(v);
        (*tr)->values[i] = c;
    }
    // each dropout site's mask stream (op_rules.h), in graph order: the
    // forward's sites come before the loss, the backward reuses them
    size_t so = 0;
    streams[0] = 0;
    for (int i = 0; i < (*tr)->g->loss && so < scap; i++)
        if ((*tr)->g->nodes[i].op == OP_DROPOUT)
            so += (size_t)snprintf(streams + so, scap - so, "%s%lld", so ? "," : "",
                                   (long long)(*tr)->g->nodes[i].ia[0]);
    int n = (*tr)->g->noutputs;
    *tout = calloc((size_t)n, sizeof **tout);
    if (!*tout)
        return snprintf(err, cap, "out of memory"), -1;
    if (eager_step(*tr, *tout, err, cap) < 0)
        return -1;
    if (wl_add(w, "train.", "loss", (*tout)[0]) < 0)
        return snprintf(err, cap, "out of memory"), -1;
    for (int k = 1; k < n; k++) {
        int p = autograd_param_of_output((*tr)->g, k);
        const char *pn = p >= 0 ? (*tr)->g->nodes[p].name : NULL;
        if (!pn)
            return snprintf(err, cap, "internal: gradient output %d has no parameter", k), -1;
        if (wl_add(w, "train.grad.", pn, (*tout)[k]) < 0)
            return snprintf(err, cap, "out of memory"), -1;
    }
    return 0;
}

static int write_case(const bench_case *bc, const char *dir, const char *size, uint64_t seed,
                      char *err, size_t cap) {
    model_prep prep = {.seed = seed, .output_mean_loss = bc->c->output_mean_loss};
    model *m = NULL, *tr = NULL;
    tensor **out = NULL, **tout = NULL;
    wlist w = {0};
    int rc = -1;
    if (model_prepare(bc->md, bc->c->overrides, bc->c->noverrides, bc->batch, &prep, &m, err,
                      cap) != MODEL_PREP_DONE)
        goto done;
    const graph *g = m->g;
    if (!(out = calloc((size_t)g->noutputs, sizeof *out))) {
        snprintf(err, cap, "out of memory");
        goto done;
    }
    if (eager_step(m, out, err, cap) < 0)
        goto done;
    for (int i = 0; i < g->n; i++) {
        const graph_node *nd = &g->nodes[i];
        char id[32];
        snprintf(id, sizeof id, "%d", i);
        const char *name = nd->name ? nd->name : id;
        int r = 0;
        if (nd->op == OP_PARAM || nd->op == OP_BUFFER)
            r = wl_add(&w, nd->op == OP_BUFFER && !nd->name ? "buffer." : "", name, m->values[i]);
        else if (nd->op == OP_INPUT)
            r = wl_add(&w, "input.", name, m->values[i]);
        if (r < 0) {
            snprintf(err, cap, "%s: dtype %s has no safetensors name, or out of memory", name,
                     dtype_name(m->values[i]->dtype));
            goto done;
        }
    }
    for (int k = 0; k < g->noutputs; k++) {
        char id[32];
        snprintf(id, sizeof id, "%d", k);
        if (wl_add(&w, "output.", id, out[k]) < 0) {
            snprintf(err, cap, "output %d: out of memory", k);
            goto done;
        }
    }
    char why[1200] = "", streams[4096] = "";
    if (add_train(bc, seed, m, &w, &tr, &tout, streams, sizeof streams, why, sizeof why, err,
                  cap) < 0)
        goto done;
    char batch[32], seeds[32], nout[32];
    snprintf(batch, sizeof batch, "%lld", (long long)bc->batch);
    snprintf(seeds, sizeof seeds, "%llu", (unsigned long long)seed);
    snprintf(nout, sizeof nout, "%d", g->noutputs);
    const char *meta[] = {"format", "tcbench-weights-1",
                          "tcbench_version", TCBENCH_VERSION,
                          "suite", bc->s->name ? bc->s->name : "",
                          "case", bc->c->name,
                          "model", modeldef_name(bc->md) ? modeldef_name(bc->md) : "",
                          "size", size ? size : "",
                          "batch", batch,
                          "seed", seeds,
                          "outputs", nout,
                          "train", why[0] ? why : "one eager step (step 1) from these values",
                          "optimizer", optim_name(bc->c->optim.optim),
                          "dropout_streams", streams};
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.safetensors", dir, bc->c->name);
    rc = safetensors_write(path, w.t, w.n, meta, (int)(sizeof meta / sizeof meta[0]) / 2, err,
                           cap);
    if (rc == 0)
        printf("%s: %d tensors%s\n", path, w.n, why[0] ? " (no training step)" : "");
done:
    wl_free(&w);
    free_outs(out, m ? m->g->noutputs : 0);
    free_outs(tout, tr ? tr->g->noutputs : 0);
    model_free(tr);
    model_free(m);
    return rc;
}

int cmd_weights(int argc, char **argv) {
    const char *cmd = "weights", *dir = NULL;
    bench_config cfg;
    bench_config_init(&cfg);
    cli_strings only = {0};
    int c, rc = 2;
    long long seed = 0;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":ho:", long_opts, NULL)) != -1) {
        switch (c) {
        case 'o': dir = optarg; break;
        case 's': cfg.size = optarg; break;
        case 'n':
            if (cli_strings_add_list(&only, cmd, "--only", optarg) < 0)
                goto out;
            break;
        case 'e':
            if (cli_parse_int(cmd, "--seed", optarg, 0, (long long)1 << 62, &seed) < 0)
                goto out;
            break;
        case 'h': fputs(usage, stdout); rc = 0; goto out;
        default: rc = cli_bad_option(cmd, c, argv); goto out;
        }
    }
    if (optind >= argc) {
        rc = cli_fail(cmd, "no SUITE given (see tcbench weights --help)");
        goto out;
    }
    if (!dir) {
        rc = cli_fail(cmd, "no -o DIR given (see tcbench weights --help)");
        goto out;
    }
    cfg.suites = (const char *const *)argv + optind;
    cfg.nsuites = argc - optind;
    cfg.only = (const char *const *)only.v;
    cfg.nonly = only.n;
    cfg.seed = (uint64_t)seed;
    bench_plan *p;
    diag d = {0};
    if (bench_plan_new(&cfg, &p, &d) < 0) {
        cli_diag(cmd, &d);
        goto out;
    }
    char err[1200];
    if (base_mkdir_p(dir, 0777, err, sizeof err) < 0) {
        rc = cli_fail(cmd, "%s", err);
        bench_plan_free(p);
        goto out;
    }
    rc = 0;
    for (int i = 0; i < p->ncases; i++) {
        const bench_case *bc = &p->cases[i];
        if (bc->fail_to_load[0]) {
            fprintf(stderr, "tcbench weights: %s: not written: %s\n", bc->c->name,
                    bc->fail_to_load);
            continue;
        }
        if (write_case(bc, dir, cfg.size, cfg.seed, err, sizeof err) < 0) {
            fprintf(stderr, "tcbench weights: %s: %s\n", bc->c->name, err);
            rc = 1;
        }
    }
    bench_plan_free(p);
out:
    cli_strings_free(&only);
    return rc;
}
