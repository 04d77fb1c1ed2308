// Planning a run: suites, case selection, model checks, axes (plan.h).
#include "plan.h"
#include "generate.h"
#include "shard.h"

#include "../exec.h" // the executor registry (not bench/exec.h)
#include "accuracy.h"
#include "base/strdist.h"

#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

_Static_assert(SUITE_MAX_PROCESSES == BENCH_MAX_PROCESSES,
               "a suite's processes and the runner's agree");

void bench_config_init(bench_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    cfg->threads = cores > 0 ? (int)cores : 1;
    cfg->repeat = 10;
    cfg->min_time_s = BENCH_DEFAULT_MIN_TIME_S;
    cfg->max_time_s = BENCH_DEFAULT_MAX_TIME_S;
    cfg->processes = BENCH_DEFAULT_PROCESSES;
    cfg->timeout_s = BENCH_DEFAULT_TIMEOUT_S;
    cfg->accuracy = true;
    cfg->amp_dtype = DT_F16;
    cfg->weight_scales = DT_F32;
    cfg->accuracy_flops_limit = BENCH_ACCURACY_FLOPS_LIMIT;
}

int bench_case_build(const suite_case *c, int64_t batch, bool graph_only, modeldef **md, model **m,
                     diag *d) {
    *md = NULL;
    *m = NULL;
    if (modeldef_load(c->model_path, md, d) < 0)
        return -1;
    if (modeldef_unbuilt(*md, d))
        return 1;
    modeldef_opts o = {.graph_only = graph_only};
    if (modeldef_build(*md, c->overrides, c->noverrides, batch, &o, m, d) < 0) {
        modeldef_free(*md);
        *md = NULL;
        return -1;
    }
    return 0;
}

void bench_plan_free(bench_plan *p) {
    if (!p)
        return;
    for (int i = 0; i < p->ncases; i++)
        modeldef_free(p->cases[i].md);
    for (int i = 0; i < p->nsuites; i++)
        suite_free(p->suites[i]);
    free(p->suites);
    free(p->cases);
    free(p->tasks);
    free(p->groups);
    bench_shard_free(p->shard);
    free(p);
}

// A suite's default words for one axis (devices have none: cpu).
static void suite_defaults(const suite *s, enum bench_axis a, char ***words, int *n) {
    *words = NULL;
    *n = 0;
    if (a == BENCH_AXIS_MODE)
        *words = s->modes, *n = s->nmodes;
    else if (a == BENCH_AXIS_PRECISION)
        *words = s->precisions, *n = s->nprecisions;
    else if (a == BENCH_AXIS_WORKLOAD)
        *words = s->workloads, *n = s->nworkloads;
}

// The values suite s runs on each axis; unavailable defaults go to skipped.
static int suite_axes(const bench_config *cfg, const suite *s, int vals[][BENCH_AXIS_MAX],
                      int *nvals, bool skipped[][BENCH_AXIS_MAX], diag *d) {
    for (int a = 0; a < BENCH_AXIS_COUNT; a++) {
        nvals[a] = 0;
        if (cfg->naxis[a] > 0) {
            for (int i = 0; i < cfg->naxis[a]; i++) {
                int v = cfg->axis[a][i];
                if (!bench_axis_available(a, v))
                    return diag_set(d, NULL, 0, 0, "--%s %s: not available in this build yet",
                                    bench_axis_name(a), bench_axis_value(a, v));
                vals[a][nvals[a]++] = v;
            }
            continue;
        }
        char **words;
        int nw;
        suite_defaults(s, a, &words, &nw);
        if (nw == 0) {
            vals[a][nvals[a]++] = 0;
            continue;
        }
        for (int i = 0; i < nw; i++) {
            int v = bench_axis_parse(a, words[i]);
            if (v < 0)
                return diag_set(d, s->path, 0, 0, "unknown %s '%s' in the suite's defaults (%s)",
                                bench_axis_name(a), words[i], bench_axis_values_list(a));
            bool dup = false;
            for (int k = 0; k < nvals[a]; k++)
                dup |= vals[a][k] == v;
            if (dup)
                continue;
            // --weights quantizes inference and generation graphs: a suite's
            // training default is not run with it
            if (a == BENCH_AXIS_WORKLOAD && v == BENCH_WL_TRAIN && cfg->weight_bits)
                continue;
            if (bench_axis_available(a, v))
                vals[a][nvals[a]++] = v;
            else
                skipped[a][v] = true;
        }
    }
    return 0;
}

// The tasks of case ci: one group per precision x workload x device, the
// modes fastest within it, eager first whenever a compiled-family mode runs.
static int add_tasks(bench_plan *p, int ci, int vals[][BENCH_AXIS_MAX], const int *nvals) {
    int modes[BENCH_AXIS_MAX], nmodes = 0;
    bool compiled = false;
    for (int i = 0; i < nvals[BENCH_AXIS_MODE]; i++)
        compiled |= bench_mode_compiled(vals[BENCH_AXIS_MODE][i]);
    if (compiled)
        modes[nmodes++] = BENCH_MODE_EAGER;
    for (int i = 0; i < nvals[BENCH_AXIS_MODE]; i++)
        if (!compiled || vals[BENCH_AXIS_MODE][i] != BENCH_MODE_EAGER)
            modes[nmodes++] = vals[BENCH_AXIS_MODE][i];
    int combos = 1;
    for (int a = 0; a < BENCH_AXIS_COUNT; a++)
        if (a != BENCH_AXIS_MODE)
            combos *= nvals[a];
    if (combos == 0 || nmodes == 0)
        return 0;
    bench_task *t = realloc(p->tasks, (size_t)(p->ntasks + combos * nmodes) * sizeof *t);
    if (!t)
        return -1;
    p->tasks = t;
    bench_group *g = realloc(p->groups, (size_t)(p->ngroups + combos) * sizeof *g);
    if (!g)
        return -1;
    p->groups = g;
    for (int k = 0; k < combos; k++) {
        const suite *s = p->cases[ci].s;
        int procs = p->cfg.processes_set || !s->processes ? p->cfg.processes : s->processes;
        p->groups[p->ngroups] = (bench_group){p->ntasks, nmodes, procs};
        for (int m = 0; m < nmodes; m++) {
            bench_task *task = &p->tasks[p->ntasks++];
            task->case_index = ci;
            task->group = p->ngroups;
            // k as a mixed-radix number over the other axes, the last fastest
            int rest = k;
            for (int a = BENCH_AXIS_COUNT - 1; a >= 0; a--) {
                if (a == BENCH_AXIS_MODE)
                    continue;
                task->axis[a] = vals[a][rest % nvals[a]];
                rest /= nvals[a];
                p->used[a][task->axis[a]] = true;
            }
            task->axis[BENCH_AXIS_MODE] = modes[m];
            p->used[BENCH_AXIS_MODE][modes[m]] = true;
        }
        p->ngroups++;
    }
    return 0;
}

static bool selected(const bench_config *cfg, const char *name, const regex_t *filter,
                     const regex_t *exclude, bool *only_hit) {
    if (cfg->nonly > 0) {
        bool hit = false;
        for (int i = 0; i < cfg->nonly; i++)
            if (strcmp(cfg->only[i], name) == 0)
                hit = only_hit[i] = true;
        if (!hit)
            return false;
    }
    if (filter && regexec(filter, name, 0, NULL, 0) != 0)
        return false;
    if (exclude && regexec(exclude, name, 0, NULL, 0) == 0)
        return false;
    return true;
}

static int compile_regex(const char *opt, const char *src, regex_t *re, diag *d) {
    int rc = regcomp(re, src, REG_EXTENDED | REG_NOSUB);
    if (rc != 0) {
        char why[200];
        regerror(rc, re, why, sizeof why);
        return diag_set(d, NULL, 0, 0, "%s '%s': bad regular expression: %s", opt, src, why);
    }
    return 0;
}

// "a, b, c" from names, cut to fit cap with "... (N more)".
static void names_list(const char *const *names, int n, char *buf, size_t cap) {
    size_t o = 0;
    buf[0] = '\0';
    for (int i = 0; i < n; i++) {
        size_t len = strlen(names[i]);
        if (o + len + 2 + 20 >= cap) { // room for the tail
            snprintf(buf + o, cap - o, "%s... (%d more)", i ? ", " : "", n - i);
            return;
        }
        o += (size_t)snprintf(buf + o, cap - o, "%s%s", i ? ", " : "", names[i]);
    }
}

// The selection options given, for a message: "--filter 'x' --exclude 'y'".
static void selection_words(const bench_config *cfg, char *buf, size_t cap) {
    size_t o = 0;
    buf[0] = '\0';
    for (int i = 0; i < cfg->nonly && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%.60s", i ? "," : "--only ", cfg->only[i]);
    if (cfg->filter && o < cap)
        o += (size_t)snprintf(buf + o, cap - o, "%s--filter '%.60s'", o ? " " : "", cfg->filter);
    if (cfg->exclude && o < cap)
        snprintf(buf + o, cap - o, "%s--exclude '%.60s'", o ? " " : "", cfg->exclude);
}

// Every --only name is a case of some suite and the selection leaves a
// case; checked before any model is built, so a typo costs no time.
static int check_selection(const bench_plan *p, const regex_t *filter, const regex_t *exclude,
                           bool *only_hit, diag *d) {
    const bench_config *cfg = &p->cfg;
    int total = 0, nsel = 0;
    for (int i = 0; i < p->nsuites; i++)
        total += p->suites[i]->ncases;
    const char **names = calloc((size_t)total + 1, sizeof *names);
    if (!names)
        return diag_set(d, NULL, 0, 0, "calloc: out of memory listing %d cases", total);
    for (int i = 0, k = 0; i < p->nsuites; i++)
        for (int j = 0; j < p->suites[i]->ncases; j++) {
            const char *name = p->suites[i]->cases[j].name;
            names[k++] = name;
            nsel += selected(cfg, name, filter, exclude, only_hit);
        }
    char list[300], sel[240];
    names_list(names, total, list, sizeof list);
    const char *suites = cfg->nsuites > 1 ? "suites" : "suite";
    int rc = 0;
    for (int i = 0; i < cfg->nonly && rc == 0; i++) {
        if (only_hit[i])
            continue;
        int near = strdist_closest(cfg->only[i], names, 3);
        if (near >= 0)
            rc =
                diag_set(d, NULL, 0, 0, "--only %.100s: no case %.100s in the %s; did you mean %s?",
                         cfg->only[i], cfg->only[i], suites, names[near]);
        else
            rc = diag_set(d, NULL, 0, 0, "--only %.100s: no case %.100s in the %s; the cases: %s",
                          cfg->only[i], cfg->only[i], suites, list);
    }
    if (rc == 0 && nsel == 0) {
        selection_words(cfg, sel, sizeof sel);
        rc = diag_set(d, NULL, 0, 0, "%s: no case matches; the cases: %s", sel, list);
    }
    free(names);
    return rc;
}

static void skipped_note(bench_plan *p, bool skipped[][BENCH_AXIS_MAX]) {
    size_t o = 0, cap = sizeof p->skipped;
    for (int a = 0; a < BENCH_AXIS_COUNT; a++) {
        bool first = true;
        for (int v = 0; v < bench_axis_size(a); v++) {
            if (!skipped[a][v] || o >= cap)
                continue;
            if (first)
                o += (size_t)snprintf(p->skipped + o, cap - o, "%s%s %s", o ? "; " : "",
                                      bench_axis_name(a), bench_axis_value(a, v));
            else
                o += (size_t)snprintf(p->skipped + o, cap - o, ", %s", bench_axis_value(a, v));
            first = false;
        }
    }
}

// A case the generate workload runs: its context (prompt and new tokens)
// within the model's positions and the model a decoder, checked on the
// graph of its prefill before anything runs (bad input: exit 2).
static int check_generate(const bench_plan *p, const bench_case *bc, int vals[][BENCH_AXIS_MAX],
                          const int *nvals, diag *d) {
    bool gen = false, chat = false;
    for (int i = 0; i < nvals[BENCH_AXIS_WORKLOAD]; i++) {
        gen |= vals[BENCH_AXIS_WORKLOAD][i] == BENCH_WL_GENERATE;
        chat |= vals[BENCH_AXIS_WORKLOAD][i] == BENCH_WL_CHAT;
    }
    if (!gen && !chat)
        return 0;
    int64_t P = gen_prompt_len(&p->cfg, bc->c), N = gen_new_tokens(&p->cfg, bc->c);
    int64_t R = chat ? gen_rounds(&p->cfg, bc->c) : 1;
    if (R > BENCH_MAX_CHAT_ROUNDS)
        return diag_set(d, bc->c->model_path, 0, 0, "case '%s', chat: %lld rounds, at most %d",
                        bc->c->name, (long long)R, BENCH_MAX_CHAT_ROUNDS);
    // the longest dialogue: every round's turn and tokens, the last never fed
    int64_t ctx = P + N - 1 > R * (P + N) - 1 ? P + N - 1 : R * (P + N) - 1;
    nn_gen g = {.kv = NN_KV_CONCAT, .max_len = ctx};
    modeldef_opts mo = {.gen = &g, .gen_tokens = P, .graph_only = true};
    model *m;
    if (modeldef_build(bc->md, bc->c->overrides, bc->c->noverrides, bc->batch, &mo, &m, d) < 0) {
        char msg[sizeof d->msg];
        snprintf(msg, sizeof msg, "case '%.64s', %s: %.400s", bc->c->name,
                 chat ? "chat" : "generate", d->msg);
        snprintf(d->msg, sizeof d->msg, "%s", msg);
        return -1;
    }
    int nl = g.nlayers;
    model_free(m);
    if (nl == 0)
        return diag_set(d, bc->c->model_path, 0, 0,
                        "case '%s', generate: the model has no attention layer to cache",
                        bc->c->name);
    return 0;
}

// Load and select the cases of one suite, building each selected model.
static int plan_suite(bench_plan *p, const suite *s, const regex_t *filter, const regex_t *exclude,
                      bool *only_hit, bool skipped[][BENCH_AXIS_MAX], diag *d) {
    int vals[BENCH_AXIS_COUNT][BENCH_AXIS_MAX], nvals[BENCH_AXIS_COUNT];
    if (suite_axes(&p->cfg, s, vals, nvals, skipped, d) < 0)
        return -1;
    for (int i = 0; i < s->ncases; i++) {
        const suite_case *c = &s->cases[i];
        if (!selected(&p->cfg, c->name, filter, exclude, only_hit))
            continue;
        // --batch-sizes sweeps: the case once per batch size
        int nb = p->cfg.nbatches > 0 ? p->cfg.nbatches : 1;
        for (int bi = 0; bi < nb; bi++) {
            bench_case *cs = realloc(p->cases, (size_t)(p->ncases + 1) * sizeof *cs);
            if (!cs)
                return diag_set(d, NULL, 0, 0, "realloc: out of memory planning %d cases",
                                p->ncases + 1);
            p->cases = cs;
            bench_case *bc = &p->cases[p->ncases];
            memset(bc, 0, sizeof *bc);
            bc->s = s;
            bc->c = c;
            bc->batch = p->cfg.nbatches > 0 ? p->cfg.batches[bi]
                        : p->cfg.batch > 0  ? p->cfg.batch
                                            : c->batch;
            model *m;
            int rc = bench_case_build(c, bc->batch, false, &bc->md, &m, d);
            if (rc < 0)
                return -1;
            if (rc > 0) { // a layer not built yet: its tasks end model_fail_to_load
                diag_format(d, bc->fail_to_load, sizeof bc->fail_to_load);
                *d = (diag){0};
                bc->param_count = -1;
                bc->flops = bc->min_bytes = NAN;
            } else {
                bc->param_count = graph_param_count(m->g);
                bc->flops = graph_flops(m->g);
                bc->min_bytes = graph_min_bytes(m->g);
                bc->nodes = m->g->n;
                model_free(m);
                if (check_generate(p, bc, vals, nvals, d) < 0)
                    return -1;
            }
            if (modeldef_train_unbuilt(bc->md, d)) {
                diag_format(d, bc->train_fail_to_load, sizeof bc->train_fail_to_load);
                *d = (diag){0};
            }
            if (add_tasks(p, p->ncases++, vals, nvals) < 0)
                return diag_set(d, NULL, 0, 0, "realloc: out of memory planning tasks");
        }
    }
    return 0;
}

int bench_device_auto(bench_config *cfg) {
    static char why[400];
    int dev = exec_device_probe("cuda", why, sizeof why) == 0 ? BENCH_DEV_CUDA : BENCH_DEV_CPU;
    if (dev == BENCH_DEV_CUDA)
        why[0] = '\0';
    cfg->device_auto = why;
    return dev;
}

int bench_config_check_devices(bench_config *cfg, char *err, size_t cap) {
    if (cfg->naxis[BENCH_AXIS_DEVICE] == 0) {
        cfg->axis[BENCH_AXIS_DEVICE][0] = bench_device_auto(cfg);
        cfg->naxis[BENCH_AXIS_DEVICE] = 1;
    }
    bool cuda = false;
    for (int i = 0; i < cfg->naxis[BENCH_AXIS_DEVICE]; i++) {
        int dev = cfg->axis[BENCH_AXIS_DEVICE][i];
        const char *name = bench_axis_value(BENCH_AXIS_DEVICE, dev);
        char why[400];
        // not built, or no GPU: the reason is the answer
        if (exec_device_probe(name, why, sizeof why) < 0) {
            snprintf(err, cap, "--device %s: %s", name, why);
            return -1;
        }
        cuda |= dev == BENCH_DEV_CUDA;
    }
    // what --device auto decided, for the messages
    char chose[500] = "";
    if (cfg->device_auto)
        snprintf(chose, sizeof chose, " (--device auto chose %s%s%.400s)", cuda ? "cuda" : "cpu",
                 cfg->device_auto[0] ? ": " : "", cfg->device_auto);
    const char *gpu_only = cfg->tf32 ? "--tf32" : cfg->flush_l2 ? "--flush-l2" : NULL;
    if (gpu_only && !cuda) {
        snprintf(err, cap, "%s: a GPU setting, for --device cuda; this run is on the cpu%s",
                 gpu_only, chose);
        return -1;
    }
    // --weights quantizes inference and generation graphs; a training default of a
    // suite is left out (suite_axes), --workload train refused
    for (int i = 0; cfg->weight_bits && i < cfg->naxis[BENCH_AXIS_WORKLOAD]; i++)
        if (cfg->axis[BENCH_AXIS_WORKLOAD][i] == BENCH_WL_TRAIN) {
            snprintf(err, cap,
                     "--weights int%d: weight-only quantization is for inference; training "
                     "would update weights that are no longer there (drop --workload train)",
                     cfg->weight_bits);
            return -1;
        }
    if (cfg->weight_bits && cfg->weight_group == 0)
        cfg->weight_group = cfg->weight_bits == 4 ? 32 : 128;
    bool amp = cfg->naxis[BENCH_AXIS_PRECISION] == 0; // the suites' defaults may hold amp
    for (int i = 0; i < cfg->naxis[BENCH_AXIS_PRECISION]; i++)
        amp |= cfg->axis[BENCH_AXIS_PRECISION][i] == BENCH_PREC_AMP;
    if (cuda && amp && cfg->amp_dtype == DT_BF16) {
        snprintf(err, cap,
                 "--amp-dtype bf16: the CUDA backend runs amp in fp16 only; run bf16 with "
                 "--device cpu%s",
                 chose);
        return -1;
    }
    return 0;
}

int bench_plan_new(const bench_config *cfg, bench_plan **out, diag *d) {
    *out = NULL;
    bench_plan *p = calloc(1, sizeof *p);
    bool *only_hit = calloc((size_t)cfg->nonly + 1, sizeof *only_hit);
    if (!p || !only_hit) {
        free(p);
        free(only_hit);
        return diag_set(d, NULL, 0, 0, "calloc: out of memory");
    }
    p->cfg = *cfg;
    regex_t filter, exclude;
    bool has_filter = false, has_exclude = false;
    bool skipped[BENCH_AXIS_COUNT][BENCH_AXIS_MAX] = {{0}};
    int rc = -1;

    if (cfg->filter) {
        if (compile_regex("--filter", cfg->filter, &filter, d) < 0)
            goto done;
        has_filter = true;
    }
    if (cfg->exclude) {
        if (compile_regex("--exclude", cfg->exclude, &exclude, d) < 0)
            goto done;
        has_exclude = true;
    }
    p->suites = calloc((size_t)cfg->nsuites + 1, sizeof *p->suites);
    if (!p->suites) {
        diag_set(d, NULL, 0, 0, "calloc: out of memory");
        goto done;
    }
    for (int i = 0; i < cfg->nsuites; i++) {
        if (suite_load(cfg->suites[i], cfg->size, &p->suites[i], d) < 0)
            goto done;
        p->nsuites++;
    }
    if (check_selection(p, has_filter ? &filter : NULL, has_exclude ? &exclude : NULL, only_hit,
                        d) < 0)
        goto done;
    for (int i = 0; i < p->nsuites; i++)
        if (plan_suite(p, p->suites[i], has_filter ? &filter : NULL, has_exclude ? &exclude : NULL,
                       only_hit, skipped, d) < 0)
            goto done;
    skipped_note(p, skipped);
    // the results' config.processes: the suites' own when every group has it
    for (int g = 0; !p->cfg.processes_set && g < p->ngroups; g++) {
        if (p->groups[g].processes != p->groups[0].processes)
            break;
        if (g == p->ngroups - 1)
            p->cfg.processes = p->groups[0].processes;
    }
    if (cfg->shard_count > 0 && bench_plan_shard(p, cfg->shard_index, cfg->shard_count, d) < 0)
        goto done;
    rc = 0;
done:
    if (has_filter)
        regfree(&filter);
    if (has_exclude)
        regfree(&exclude);
    free(only_hit);
    if (rc < 0)
        bench_plan_free(p);
    else
        *out = p;
    return rc;
}
