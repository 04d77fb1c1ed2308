// Going on with a run from its journal (resume.h).
#include "resume.h"

#include "results/configdiff.h"
#include "results/journal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void bench_journal_free(bench_journal *j) {
    if (!j)
        return;
    json_decref(j->header);
    json_decref(j->cases);
    free(j->lines);
    free(j->argv);
    free(j);
}

// The header's command_line as an argv (strings borrowed from the header).
static int journal_argv(bench_journal *j, diag *d) {
    const json_t *cl = json_object_get(j->header, "command_line");
    size_t n = json_array_size(cl);
    if (!json_is_array(cl) || n < 2)
        return diag_set(d, j->path, 1, 0, "the header's \"command_line\" is not a command line");
    if (!(j->argv = calloc(n + 1, sizeof *j->argv)))
        return diag_set(d, j->path, 1, 0, "calloc: out of memory");
    for (size_t i = 0; i < n; i++) {
        const char *s = json_string_value(json_array_get(cl, i));
        if (!s)
            return diag_set(d, j->path, 1, 0, "command_line[%zu] is not a string", i);
        j->argv[i] = (char *)s;
    }
    j->argc = (int)n;
    if (strcmp(j->argv[1], "run") != 0)
        return diag_set(d, j->path, 1, 0, "the journal of `tcbench %s`, not of `tcbench run`",
                        j->argv[1]);
    return 0;
}

int bench_journal_load(const char *path, bench_journal **out, FILE *warn, diag *d) {
    *out = NULL;
    bench_journal *j = calloc(1, sizeof *j);
    if (!j || !(j->cases = json_array())) {
        free(j);
        return diag_set(d, path, 0, 0, "calloc: out of memory");
    }
    snprintf(j->path, sizeof j->path, "%s", path);
    results_journal_reader r;
    if (results_journal_open(&r, path, d) < 0) {
        bench_journal_free(j);
        return -1;
    }
    json_t *o;
    int k, cap = 0;
    while ((k = results_journal_next(&r, &o, warn, d)) > 0) {
        if (!j->header) {
            if (!results_journal_is_header(o) || !json_is_object(json_object_get(o, "config"))) {
                json_decref(o);
                k = diag_set(d, path, r.line, 0,
                             "not a tcbench journal: its first line is not a header "
                             "(\"journal\": 1, with the run's config)");
                break;
            }
            j->header = o;
            continue;
        }
        int n = (int)json_array_size(j->cases);
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            int *l = realloc(j->lines, (size_t)cap * sizeof *l);
            if (!l) {
                json_decref(o);
                k = diag_set(d, path, r.line, 0, "realloc: out of memory");
                break;
            }
            j->lines = l;
        }
        j->lines[n] = r.line;
        if (json_array_append_new(j->cases, o) < 0) {
            k = diag_set(d, path, r.line, 0, "json_array_append: out of memory");
            break;
        }
    }
    results_journal_close(&r);
    if (k == 0 && !j->header)
        k = diag_set(d, path, 0, 0, "not a tcbench journal: no header line");
    if (k < 0 || journal_argv(j, d) < 0) {
        bench_journal_free(j);
        return -1;
    }
    *out = j;
    return 0;
}

// The first key (the journal's order, then this run's new ones) whose
// value differs: 0 when none, -2 with err.
static int config_compare(const json_t *was, const json_t *now, const char *path, char *err,
                          size_t cap) {
    results_config_diff df;
    if (!results_config_diff_find(was, now, NULL, &df))
        return 0;
    snprintf(err, cap, "--resume %s: the journal's run had %s %s, this one %s", path, df.option,
             df.a, df.b);
    return -2;
}

static bool same_entry(const results_case *a, const results_case *b) {
    return !strcmp(a->suite, b->suite) && !strcmp(a->name, b->name) && !strcmp(a->mode, b->mode) &&
           !strcmp(a->precision, b->precision) && !strcmp(a->workload, b->workload) &&
           !strcmp(a->device, b->device) && a->batch == b->batch;
}

// Takes each case line's entry into rep at its task (the last line wins).
static void take_entries(const bench_plan *p, const bench_journal *j, bench_report *rep) {
    for (size_t i = 0; i < json_array_size(j->cases); i++) {
        results_entry e;
        diag d;
        if (results_entry_read(json_array_get(j->cases, i), j->path, (int)i, &e, &d) < 0) {
            fprintf(stderr, "%s:%d: warning: %s, skipped\n", j->path, j->lines[i], d.msg);
            continue;
        }
        int task = -1;
        for (int t = 0; t < p->ntasks && task < 0 && e.status_known; t++) {
            results_case id;
            bench_result_case(p, t, &id);
            if (same_entry(&id, &e.id))
                task = t;
        }
        if (task < 0) {
            fprintf(stderr, "%s:%d: warning: %s [%s %s %s %s] %s, skipped\n", j->path, j->lines[i],
                    e.id.name, e.id.mode, e.id.precision, e.id.workload, e.id.device,
                    e.status_known ? "is no entry of this run" : "has an unknown status");
            results_entry_free(&e);
            continue;
        }
        bench_result_free(&rep->results[task]);
        rep->results[task] = e.r; // the samples are the report's now
        rep->results[task].task = task;
        rep->done[task] = true;
    }
    // a group counts only whole: else it is measured again
    for (int g = 0; g < p->ngroups; g++) {
        const bench_group *gr = &p->groups[g];
        bool whole = true;
        for (int i = 0; i < gr->ntasks; i++)
            whole &= rep->done[gr->first + i];
        for (int i = 0; i < gr->ntasks; i++) {
            if (!whole) {
                bench_result_free(&rep->results[gr->first + i]);
                memset(&rep->results[gr->first + i], 0, sizeof rep->results[0]);
                rep->done[gr->first + i] = false;
            }
            rep->resumed += whole;
        }
    }
    rep->nresults = rep->journaled = rep->resumed;
}

int bench_report_resume(const bench_plan *p, const bench_journal *j, bench_report **out, char *err,
                        size_t cap) {
    *out = NULL;
    json_t *config = bench_config_json(p);
    if (!config) {
        snprintf(err, cap, "json_object: out of memory building the config");
        return -1;
    }
    int rc = config_compare(json_object_get(j->header, "config"), config, j->path, err, cap);
    json_decref(config);
    if (rc < 0)
        return rc;
    bench_report *rep;
    int k = bench_report_new(p, &rep, err, cap);
    if (k < 0)
        return k;
    if (strcmp(rep->journal, j->path) != 0) {
        snprintf(err, cap, "--resume %s: the run writes its journal to %s", j->path, rep->journal);
        bench_report_free(rep);
        return -2;
    }
    const char *ts = json_string_value(json_object_get(j->header, "timestamp"));
    if (ts)
        snprintf(rep->timestamp, sizeof rep->timestamp, "%s", ts);
    rep->command_line = json_incref(json_object_get(j->header, "command_line"));
    take_entries(p, j, rep);
    if (results_journal_trim(rep->journal, err, cap) < 0) {
        bench_report_free(rep);
        return -1;
    }
    if (!(rep->journal_file = fopen(rep->journal, "a"))) {
        snprintf(err, cap, "fopen %s: %s", rep->journal, strerror(errno));
        bench_report_free(rep);
        return -1;
    }
    *out = rep;
    return 0;
}
