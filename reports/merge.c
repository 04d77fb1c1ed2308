// The shards' results as one results file (merge.h).
#include "merge.h"

#include "compare.h"
#include "resfile.h"

#include "results/configdiff.h"
#include "results/journal.h"
#include "results/results.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct merge_input {
    const char *path;
    int pos;          // in the arguments
    resfile *f;       // read and checked; f->root has the document's fields
    json_t *cases;    // the case objects as written
    int index, count; // K and N of its --shard
    int taken;        // entries it gave the merge
} merge_input;

// The expected entries: the shard plan's groups times their modes.
typedef struct merge_table {
    resfile_entry *keys; // identity only; strings in the first input's config
    int *shard;
    json_t **found; // the case object taken, or NULL
    int *from;      // the input it came from
    int n;
    resfile_index x;
} merge_table;

// The case objects as written: a journal's lines but its header, or a
// results file's "cases".
static int raw_cases(merge_input *in, diag *d) {
    if (!in->f->journal) {
        json_error_t je;
        json_t *root = json_load_file(in->path, JSON_REJECT_DUPLICATES, &je);
        if (!root)
            return diag_set(d, in->path, je.line, je.column, "%s", je.text);
        in->cases = json_incref(json_object_get(root, "cases"));
        json_decref(root);
        return in->cases ? 0 : diag_set(d, in->path, 0, 0, "\"cases\" is missing");
    }
    results_journal_reader r;
    if (results_journal_open(&r, in->path, d) < 0)
        return -1;
    if (!(in->cases = json_array())) {
        results_journal_close(&r);
        return diag_set(d, in->path, 0, 0, "json_array: out of memory");
    }
    json_t *o;
    int k;
    // resfile_load has warned of the cut lines already
    while ((k = results_journal_next(&r, &o, NULL, d)) > 0) {
        if (results_journal_is_header(o)) {
            json_decref(o);
        } else if (json_array_append_new(in->cases, o) < 0) {
            k = diag_set(d, in->path, r.line, 0, "json_array_append: out of memory");
            break;
        }
    }
    results_journal_close(&r);
    return k;
}

static int input_load(merge_input *in, diag *d) {
    if (resfile_load(in->path, &in->f, d) < 0)
        return -1;
    const char *shard =
        json_string_value(json_object_get(json_object_get(in->f->root, "config"), "shard"));
    int used = 0;
    if (!shard || sscanf(shard, "%d/%d%n", &in->index, &in->count, &used) != 2 || shard[used] ||
        in->index < 1 || in->index > in->count)
        return diag_set(d, in->path, 0, 0,
                        "not a shard's results (its run had no --shard K/N); merge joins the "
                        "results of tcbench run --shard K/N");
    if (!json_is_array(json_object_get(json_object_get(in->f->root, "config"), "shard_plan")))
        return diag_set(d, in->path, 0, 0,
                        "config.shard_plan is missing: not written by tcbench run --shard");
    return raw_cases(in, d);
}

// b against a: the same tcbench, N and config but the shard.
static int inputs_match(const merge_input *a, const merge_input *b, diag *d) {
    if (strcmp(a->f->tool_version, b->f->tool_version) ||
        strcmp(a->f->git_commit, b->f->git_commit))
        return diag_set(d, NULL, 0, 0,
                        "%s and %s differ in the tcbench version: %s (git %s) vs %s (git %s)",
                        a->path, b->path, a->f->tool_version, a->f->git_commit, b->f->tool_version,
                        b->f->git_commit);
    if (a->count != b->count)
        return diag_set(d, NULL, 0, 0,
                        "%s and %s differ in the number of shards: --shard %d/%d vs --shard %d/%d",
                        a->path, b->path, a->index, a->count, b->index, b->count);
    static const char *const skip[] = {"shard", "device_auto", NULL};
    results_config_diff df;
    if (!results_config_diff_find(json_object_get(a->f->root, "config"),
                                  json_object_get(b->f->root, "config"), skip, &df))
        return 0;
    if (!strcmp(df.key, "shard_plan"))
        return diag_set(d, NULL, 0, 0,
                        "%s and %s differ in the shard plan: the same options, but the suites or "
                        "models changed between the runs",
                        a->path, b->path);
    return diag_set(d, NULL, 0, 0, "%s and %s differ in %s: %s vs %s", a->path, b->path, df.option,
                    df.a, df.b);
}

static void table_free(merge_table *t) {
    for (int i = 0; t->found && i < t->n; i++)
        json_decref(t->found[i]);
    free(t->keys);
    free(t->shard);
    free(t->found);
    free(t->from);
    resfile_index_free(&t->x);
}

static const char *get_str(const json_t *o, const char *key) {
    return json_string_value(json_object_get(o, key));
}

// The expected entries from the shard plan of in (config.shard_plan).
static int table_init(merge_table *t, const merge_input *in, diag *d) {
    const json_t *plan = json_object_get(json_object_get(in->f->root, "config"), "shard_plan");
    size_t n = 0;
    for (size_t g = 0; g < json_array_size(plan); g++)
        n += json_array_size(json_object_get(json_array_get(plan, g), "modes"));
    t->keys = calloc(n + 1, sizeof *t->keys);
    t->shard = calloc(n + 1, sizeof *t->shard);
    t->found = calloc(n + 1, sizeof *t->found);
    t->from = calloc(n + 1, sizeof *t->from);
    if (!t->keys || !t->shard || !t->found || !t->from || resfile_index_init(&t->x, n) < 0)
        return diag_set(d, in->path, 0, 0, "calloc: out of memory for %zu entries", n);
    for (size_t g = 0; g < json_array_size(plan); g++) {
        const json_t *o = json_array_get(plan, g), *modes = json_object_get(o, "modes");
        resfile_entry k = {.suite = get_str(o, "suite"),
                           .name = get_str(o, "name"),
                           .precision = get_str(o, "precision"),
                           .workload = get_str(o, "workload"),
                           .device = get_str(o, "device"),
                           .batch = json_integer_value(json_object_get(o, "batch"))};
        int shard = (int)json_integer_value(json_object_get(o, "shard"));
        if (!k.suite || !k.name || !k.precision || !k.workload || !k.device ||
            !json_is_integer(json_object_get(o, "batch")) || shard < 1 || shard > in->count)
            return diag_set(d, in->path, 0, 0, "config.shard_plan[%zu] is not a group of the plan",
                            g);
        for (size_t m = 0; m < json_array_size(modes); m++) {
            k.mode = json_string_value(json_array_get(modes, m));
            if (!k.mode)
                return diag_set(d, in->path, 0, 0,
                                "config.shard_plan[%zu].modes[%zu] is not a mode", g, m);
            t->keys[t->n] = k;
            t->shard[t->n] = shard;
            if (resfile_index_put(&t->x, &t->keys[t->n]))
                return diag_set(d, in->path, 0, 0, "config.shard_plan holds %s %s twice", k.name,
                                k.mode);
            t->n++;
        }
    }
    return 0;
}

static int add_line(char ***list, int *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int add_line(char ***list, int *n, const char *fmt, ...) {
    char buf[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    char **l = realloc(*list, (size_t)(*n + 1) * sizeof *l);
    if (!l)
        return -1;
    *list = l;
    if (!(l[*n] = strdup(buf)))
        return -1;
    ++*n;
    return 0;
}

// Each case of input i into its slot: later lines of one input win (a
// resumed journal), another input's copy is a duplicate.
static int table_fill(merge_table *t, merge_input *in, int i, merge_result *m, diag *d) {
    merge_input *cur = &in[i];
    for (size_t c = 0; c < json_array_size(cur->cases); c++) {
        json_t *o = json_array_get(cur->cases, c);
        results_entry e;
        if (results_entry_read(o, cur->path, (int)c, &e, d) < 0)
            return -1;
        resfile_entry key = {.suite = e.id.suite,
                             .name = e.id.name,
                             .mode = e.id.mode,
                             .precision = e.id.precision,
                             .workload = e.id.workload,
                             .device = e.id.device,
                             .batch = e.id.batch};
        results_entry_free(&e);
        char label[600];
        resfile_entry_label(&key, label, sizeof label);
        const resfile_entry *hit = resfile_index_find(&t->x, &key);
        if (!hit)
            return diag_set(d, cur->path, 0, 0, "cases[%zu] (%s) is no entry of the shard plan", c,
                            label);
        int k = (int)(hit - t->keys);
        if (t->found[k] && t->from[k] != i) {
            if (add_line(&m->duplicates, &m->nduplicates, "%s: in %s and %s", label,
                         in[t->from[k]].path, cur->path) < 0)
                return diag_set(d, NULL, 0, 0, "realloc: out of memory");
            continue;
        }
        cur->taken += !t->found[k];
        json_decref(t->found[k]);
        t->found[k] = json_incref(o);
        t->from[k] = i;
    }
    return 0;
}

// The command line without --shard and its value.
static json_t *command_line_json(const json_t *cl) {
    json_t *out = json_array();
    for (size_t i = 0; out && i < json_array_size(cl); i++) {
        const json_t *a = json_array_get(cl, i);
        const char *s = json_string_value(a);
        if (s && !strcmp(s, "--shard")) {
            i++;
            continue;
        }
        if (s && !strncmp(s, "--shard=", 8))
            continue;
        if (json_array_append(out, (json_t *)a) < 0) {
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

static json_t *inputs_json(const merge_input *in, int n) {
    json_t *arr = json_array();
    for (int i = 0; arr && i < n; i++) {
        const json_t *r = in[i].f->root;
        char shard[48];
        snprintf(shard, sizeof shard, "%d/%d", in[i].index, in[i].count);
        json_t *o = json_pack("{s:s, s:s, s:b, s:i, s:O?, s:O?, s:O?, s:O?}", "path", in[i].path,
                              "shard", shard, "journal", in[i].f->journal, "entries", in[i].taken,
                              "timestamp", json_object_get(r, "timestamp"), "command_line",
                              json_object_get(r, "command_line"), "host",
                              json_object_get(r, "host"), "wall_s", json_object_get(r, "wall_s"));
        if (!o || json_array_append_new(arr, o) < 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

static json_t *doc_json(const merge_table *t, const merge_input *in, int n) {
    const json_t *r0 = in[0].f->root;
    const char *ts = in[0].f->timestamp;
    double wall = 0;
    for (int i = 0; i < n; i++) {
        if (in[i].f->timestamp[0] && (!ts[0] || strcmp(in[i].f->timestamp, ts) < 0))
            ts = in[i].f->timestamp;
        const json_t *w = json_object_get(in[i].f->root, "wall_s");
        if (json_is_number(w) && json_number_value(w) > wall)
            wall = json_number_value(w);
    }
    json_t *cases = json_array(), *config = json_deep_copy(json_object_get(r0, "config"));
    if (!cases || !config || json_object_set_new(config, "shard", json_null()) < 0) {
        json_decref(cases);
        json_decref(config);
        return NULL;
    }
    for (int k = 0; k < t->n; k++)
        if (t->found[k] &&
            (json_object_set_new(t->found[k], "input", json_integer(t->from[k])) < 0 ||
             json_array_append(cases, t->found[k]) < 0)) {
            json_decref(cases);
            json_decref(config);
            return NULL;
        }
    json_t *inputs = inputs_json(in, n);
    return json_pack("{s:O, s:O?, s:s, s:o, s:O?, s:o, s:o, s:f, s:o}", "schema_version",
                     json_object_get(r0, "schema_version"), "tool", json_object_get(r0, "tool"),
                     "timestamp", ts, "command_line",
                     command_line_json(json_object_get(r0, "command_line")), "host",
                     json_object_get(r0, "host"), "config", config, "cases", cases, "wall_s", wall,
                     "inputs", inputs);
}

// One warning when the shards ran on machines that differ.
static void machines_warn(const merge_input *in, int n, FILE *warn) {
    for (int i = 1; warn && i < n; i++) {
        char why[512];
        compare_machines(in[0].f, in[i].f, why, sizeof why);
        if (!why[0])
            compare_settings(in[0].f, in[i].f, why, sizeof why);
        if (!why[0])
            continue;
        fprintf(warn,
                "tcbench merge: warning: %s and %s ran on different machines or settings (%s); the merged "
                "file's host is %s's, each entry's is inputs[its \"input\"].host\n",
                in[0].path, in[i].path, why, in[0].path);
        return;
    }
}

static int cmp_input(const void *a, const void *b) {
    const merge_input *x = a, *y = b;
    if (x->index != y->index)
        return x->index < y->index ? -1 : 1;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

// What the table lacks: m->missing, and the shards no input holds.
static int table_missing(const merge_table *t, const merge_input *in, int n, merge_result *m) {
    int count = in[0].count;
    bool *given = calloc((size_t)count + 1, sizeof *given);
    if (!given)
        return -1;
    for (int i = 0; i < n; i++)
        given[in[i].index] = true;
    size_t o = 0;
    for (int k = 1; k <= count && o < sizeof m->absent; k++)
        if (!given[k])
            o += (size_t)snprintf(m->absent + o, sizeof m->absent - o, "%s%d", o ? ", " : "", k);
    free(given);
    for (int k = 0; k < t->n; k++) {
        if (t->found[k])
            continue;
        char label[600];
        resfile_entry_label(&t->keys[k], label, sizeof label);
        if (add_line(&m->missing, &m->nmissing, "%s (shard %d/%d)", label, t->shard[k], count) < 0)
            return -1;
    }
    return 0;
}

int merge_shards(const char *const *paths, int n, FILE *warn, merge_result *m, diag *d) {
    memset(m, 0, sizeof *m);
    merge_table t = {0};
    merge_input *in = calloc((size_t)n + 1, sizeof *in);
    int rc = in ? 0 : diag_set(d, NULL, 0, 0, "calloc: out of memory");
    for (int i = 0; rc == 0 && i < n; i++) {
        in[i] = (merge_input){.path = paths[i], .pos = i};
        rc = input_load(&in[i], d);
    }
    if (rc == 0)
        qsort(in, (size_t)n, sizeof *in, cmp_input);
    for (int i = 1; rc == 0 && i < n; i++)
        rc = inputs_match(&in[0], &in[i], d);
    if (rc == 0)
        rc = table_init(&t, &in[0], d);
    for (int i = 0; rc == 0 && i < n; i++)
        rc = table_fill(&t, in, i, m, d);
    if (rc == 0 && table_missing(&t, in, n, m) < 0)
        rc = diag_set(d, NULL, 0, 0, "realloc: out of memory listing the missing entries");
    if (rc == 0) {
        machines_warn(in, n, warn);
        m->expected = t.n;
        m->merged = t.n - m->nmissing;
        m->count = in[0].count;
        if (!(m->doc = doc_json(&t, in, n)))
            rc = diag_set(d, NULL, 0, 0, "json_pack: out of memory building the merged results");
    }
    table_free(&t);
    for (int i = 0; in && i < n; i++) {
        resfile_free(in[i].f);
        json_decref(in[i].cases);
    }
    free(in);
    if (rc < 0)
        merge_result_free(m);
    return rc;
}

void merge_result_free(merge_result *m) {
    for (int i = 0; i < m->nmissing; i++)
        free(m->missing[i]);
    for (int i = 0; i < m->nduplicates; i++)
        free(m->duplicates[i]);
    free(m->missing);
    free(m->duplicates);
    json_decref(m->doc);
    memset(m, 0, sizeof *m);
}
