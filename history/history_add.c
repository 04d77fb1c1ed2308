// tcbench history add: one results file into the database, in one
// transaction (history.h).
#include "history_internal.h"

#include "results/axes.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void history_fingerprint(const resfile *f, char *buf, size_t cap) {
    int n = snprintf(buf, cap, "%s; %lld cores", f->cpu_model ? f->cpu_model : "unknown",
                     (long long)f->cores);
    for (size_t i = 0; f->gpus && i < json_array_size(f->gpus) && n >= 0 && (size_t)n < cap; i++) {
        const json_t *g = json_array_get(f->gpus, i);
        const char *name = json_string_value(json_object_get(g, "name"));
        n += snprintf(buf + n, cap - (size_t)n, "; %s %.0f GiB", name ? name : "unknown GPU",
                      json_number_value(json_object_get(g, "memory_bytes")) / (1 << 30));
    }
}

// JSON text of j, keys sorted (so that equal settings hash alike); NULL
// when memory runs out.
static char *canonical(const json_t *j) {
    return j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : strdup("null");
}

// What add refuses before it opens a transaction: a journal, an invalid
// entry, no commit to file the run under.
static int admissible(const resfile *f, const char *path, const char *commit, char *err,
                      size_t cap) {
    if (f->journal) {
        snprintf(err, cap,
                 "%s: a run's journal, not its results: add the results file the run wrote "
                 "(or tcbench merge the shards first)",
                 path);
        return -1;
    }
    for (int i = 0; f->ninvalid && i < f->nentries; i++) {
        const resfile_entry *e = &f->entries[i];
        if (strcmp(e->status, bench_status_name(BENCH_INVALID)) != 0)
            continue;
        char label[600];
        resfile_entry_label(e, label, sizeof label);
        snprintf(err, cap, "%s: cases[%d] (%s) is invalid: %s; such a file is not added", path,
                 e->index, label, e->message);
        return -1;
    }
    if (!commit || !*commit || !strcmp(commit, "unknown")) {
        snprintf(err, cap, "%s: the results record no git commit; pass --commit SHA", path);
        return -1;
    }
    return 0;
}

static int insert_entries(history_db *h, long long run, const resfile *f, const json_t *cases,
                          char *err, size_t cap) {
    static const char sql[] =
        "INSERT INTO entry (run_id, key, suite, name, mode, precision, workload, device, batch, "
        "status, n, median_s, mean_s, noise, ci_lo, ci_hi, speedup, case_json) VALUES (?, ?, ?, "
        "?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
    sqlite3_stmt *st;
    if (hdb_prepare(h, sql, NULL, 0, &st, err, cap) < 0)
        return -1;
    int rc = 0;
    for (int i = 0; i < f->nentries && rc == 0; i++) {
        const resfile_entry *e = &f->entries[i];
        char key[700];
        snprintf(key, sizeof key, "%s/%s %s %s %s %s %lld", e->suite, e->name, e->mode,
                 e->precision, e->workload, e->device, (long long)e->batch);
        char *text = canonical(json_array_get(cases, (size_t)e->index));
        if (!text) {
            snprintf(err, cap, "%s: json_dumps: out of memory", f->path);
            rc = -1;
            break;
        }
        bool timed = e->stats.n > 0;
        hval v[] = {HV_INT(run),
                    HV_TEXT(key),
                    HV_TEXT(e->suite),
                    HV_TEXT(e->name),
                    HV_TEXT(e->mode),
                    HV_TEXT(e->precision),
                    HV_TEXT(e->workload),
                    HV_TEXT(e->device),
                    HV_INT(e->batch),
                    HV_TEXT(e->status),
                    HV_INT(e->nsamples),
                    HV_REAL(timed ? e->stats.median : NAN),
                    HV_REAL(timed ? e->stats.mean : NAN),
                    HV_REAL(e->noise),
                    HV_REAL(e->x->ci95_lo),
                    HV_REAL(e->x->ci95_hi),
                    HV_REAL(e->speedup),
                    HV_TEXT(text)};
        if (sqlite3_reset(st) != SQLITE_OK)
            rc = hdb_fail(h, "sqlite3_reset", sql, err, cap);
        if (rc == 0)
            rc = hdb_bind(h, st, v, (int)(sizeof v / sizeof v[0]), err, cap);
        if (rc == 0 && hdb_step(h, st, err, cap) < 0) {
            size_t len = strlen(err);
            snprintf(err + len, cap - len, " (cases[%d], %s)", e->index, key);
            rc = -1;
        }
        free(text);
    }
    return hdb_finalize(h, st, rc, err, cap);
}

// TCBENCH_HISTORY_TEST_STALL=SECONDS: for the tests only, sleep inside the
// transaction, after the inserts and before the commit, so that a test can
// kill the process there (docs/history.md).
static void test_stall(void) {
    const char *s = getenv("TCBENCH_HISTORY_TEST_STALL");
    int secs = s ? atoi(s) : 0;
    if (secs <= 0)
        return;
    fprintf(stderr, "tcbench history: TCBENCH_HISTORY_TEST_STALL: sleeping %d s before COMMIT\n",
            secs);
    fflush(stderr);
    sleep((unsigned)secs);
}

// The run already stored as this one (*id), or *id = -1.
static int find_run(history_db *h, const hval *ident, long long *id, char *err, size_t cap) {
    sqlite3_stmt *st;
    *id = -1;
    if (hdb_prepare(h,
                    "SELECT id FROM run WHERE timestamp = ? AND hostname = ? AND host_fp = ? AND "
                    "config_hash = ?",
                    ident, 4, &st, err, cap) < 0)
        return -1;
    int rc = hdb_step(h, st, err, cap);
    if (rc == 1)
        *id = sqlite3_column_int64(st, 0);
    return hdb_finalize(h, st, rc, err, cap);
}

// The run's facts and entries, in the transaction; *id: the new run.
static int store(history_db *h, const resfile *f, const json_t *root, const char *commit,
                 const char *branch, long long *id, char *err, size_t cap) {
    char desc[1024], fp[32], chash[32], added[32];
    history_fingerprint(f, desc, sizeof desc);
    history_hash(desc, fp, sizeof fp);
    char *config = canonical(json_object_get(root, "config"));
    char *host = canonical(json_object_get(root, "host"));
    int rc = 0;
    if (!config || !host) {
        snprintf(err, cap, "%s: json_dumps: out of memory", f->path);
        rc = -1;
    }
    if (rc == 0) {
        history_hash(config, chash, sizeof chash);
        time_t now = time(NULL);
        strftime(added, sizeof added, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    }
    hval v[] = {HV_TEXT(f->timestamp), HV_TEXT(f->hostname), HV_TEXT(fp),
                HV_TEXT(chash),        HV_TEXT(desc),        HV_INT(f->threads_used),
                HV_TEXT(commit),       HV_TEXT(branch),      HV_TEXT(f->tool_version),
                HV_TEXT(host),         HV_TEXT(config),      HV_TEXT(f->path),
                HV_TEXT(added)};
    if (rc == 0)
        rc = find_run(h, v, id, err, cap);
    if (rc == 0 && *id >= 0) {
        snprintf(err, cap,
                 "%s: this run (%s on %s, the same settings) is already in %s as run %lld; a run "
                 "is added once",
                 f->path, f->timestamp, f->hostname, h->path, *id);
        rc = -1;
    }
    if (rc == 0)
        rc = hdb_exec(h,
                      "INSERT INTO run (timestamp, hostname, host_fp, config_hash, host_desc, "
                      "threads_used, commit_sha, branch, tool_version, host_json, config_json, "
                      "source, added) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                      v, (int)(sizeof v / sizeof v[0]), err, cap);
    if (rc == 0) {
        *id = sqlite3_last_insert_rowid(h->db);
        rc = insert_entries(h, *id, f, json_object_get(root, "cases"), err, cap);
    }
    free(config);
    free(host);
    return rc;
}

int history_add(history_db *h, const char *path, const history_add_opts *o, FILE *out, char *err,
                size_t cap) {
    resfile *f;
    diag d;
    if (resfile_load(path, &f, &d) < 0) {
        diag_format(&d, err, cap);
        return -1;
    }
    const char *commit = o->commit ? o->commit : f->git_commit;
    if (admissible(f, path, commit, err, cap) < 0) {
        resfile_free(f);
        return -1;
    }
    // the case objects as written (the reader keeps only their figures)
    json_error_t je;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        snprintf(err, cap, "%s:%d:%d: json_load_file: %s", path, je.line, je.column, je.text);
        resfile_free(f);
        return -1;
    }
    long long id = -1;
    int rc = hdb_begin(h, err, cap);
    if (rc == 0)
        rc = store(h, f, root, commit, o->branch, &id, err, cap);
    if (rc == 0) {
        test_stall();
        rc = hdb_commit(h, err, cap);
    }
    if (rc < 0)
        hdb_rollback(h);
    else
        fprintf(out, "added run %lld: %d entries of %s (commit %s, branch %s, %s)\n", id,
                f->nentries, path, commit, o->branch, f->hostname);
    json_decref(root);
    resfile_free(f);
    return rc;
}
