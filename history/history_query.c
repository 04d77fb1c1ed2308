// tcbench history list and show, and compare's rolling baseline (history.h).
#include "history_internal.h"

#include "results/results.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int history_list(history_db *h, FILE *out, char *err, size_t cap) {
    sqlite3_stmt *st;
    if (hdb_prepare(h,
                    "SELECT r.id, r.commit_sha, r.branch, r.timestamp, r.hostname, r.host_fp, "
                    "(SELECT count(*) FROM entry e WHERE e.run_id = r.id) FROM run r ORDER BY "
                    "r.timestamp, r.id",
                    NULL, 0, &st, err, cap) < 0)
        return -1;
    fprintf(out, "%-5s %-14s %-16s %-20s %-28s %s\n", "id", "commit", "branch", "date", "host",
            "entries");
    int rc;
    while ((rc = hdb_step(h, st, err, cap)) == 1) {
        char host[80];
        snprintf(host, sizeof host, "%.18s (%.8s)", hdb_text(st, 4), hdb_text(st, 5));
        fprintf(out, "%-5lld %-14.14s %-16s %-20s %-28s %lld\n",
                (long long)sqlite3_column_int64(st, 0), hdb_text(st, 1), hdb_text(st, 2),
                hdb_text(st, 3), host, (long long)sqlite3_column_int64(st, 6));
    }
    return hdb_finalize(h, st, rc, err, cap);
}

// The one key entry names (itself, or the start of a single key) into key.
static int entry_key(history_db *h, const char *entry, char *key, size_t kcap, char *err,
                     size_t cap) {
    sqlite3_stmt *st;
    hval v[] = {HV_TEXT(entry)};
    if (hdb_prepare(h,
                    "SELECT DISTINCT key FROM entry WHERE key = ?1 OR substr(key, 1, length(?1) + "
                    "1) = ?1 || ' ' ORDER BY key != ?1, key LIMIT 4",
                    v, 1, &st, err, cap) < 0)
        return -1;
    int rc, n = 0;
    char names[600] = "";
    while ((rc = hdb_step(h, st, err, cap)) == 1) {
        const char *k = hdb_text(st, 0);
        if (n == 0)
            snprintf(key, kcap, "%s", k);
        if (n == 0 && !strcmp(k, entry)) { // the exact key wins
            rc = 0;
            n = 1;
            break;
        }
        size_t len = strlen(names);
        snprintf(names + len, sizeof names - len, "%s'%s'", n ? ", " : "", k);
        n++;
    }
    if (hdb_finalize(h, st, rc, err, cap) < 0)
        return -1;
    if (n == 0) {
        snprintf(err, cap,
                 "%s: no entry '%s' (tcbench history show takes 'suite/name mode precision "
                 "workload device batch', or its start)",
                 h->path, entry);
        return -1;
    }
    if (n > 1) {
        snprintf(err, cap, "%s: '%s' names several entries (%s%s); give more of the key", h->path,
                 entry, names, n > 3 ? ", ..." : "");
        return -1;
    }
    return 0;
}

// The machine (host_fp) whose series to show: the newest run's of key, of
// those on host (a hostname or the start of a fingerprint) when given.
static int series_host(history_db *h, const char *key, const char *host, char *fp, size_t fcap,
                       char *desc, size_t dcap, char *err, size_t cap) {
    sqlite3_stmt *st;
    hval v[] = {HV_TEXT(key), HV_TEXT(host)};
    if (hdb_prepare(h,
                    "SELECT r.host_fp, r.host_desc FROM entry e JOIN run r ON r.id = e.run_id "
                    "WHERE e.key = ?1 AND (?2 IS NULL OR r.hostname = ?2 OR substr(r.host_fp, 1, "
                    "length(?2)) = ?2) ORDER BY r.timestamp DESC, r.id DESC LIMIT 1",
                    v, 2, &st, err, cap) < 0)
        return -1;
    int rc = hdb_step(h, st, err, cap);
    if (rc == 1) {
        snprintf(fp, fcap, "%s", hdb_text(st, 0));
        snprintf(desc, dcap, "%s", hdb_text(st, 1));
    }
    if (hdb_finalize(h, st, rc, err, cap) < 0)
        return -1;
    if (rc == 0) {
        snprintf(err, cap, "%s: no run of '%s' on host '%s' (tcbench history list names them)",
                 h->path, key, host);
        return -1;
    }
    return 0;
}

int history_show(history_db *h, const char *entry, const char *host, FILE *out, char *err,
                 size_t cap) {
    char key[700], fp[32], desc[1024];
    if (entry_key(h, entry, key, sizeof key, err, cap) < 0 ||
        series_host(h, key, host, fp, sizeof fp, desc, sizeof desc, err, cap) < 0)
        return -1;
    sqlite3_stmt *st;
    hval v[] = {HV_TEXT(key), HV_TEXT(fp)};
    if (hdb_prepare(h,
                    "SELECT r.commit_sha, r.timestamp, e.median_s, e.noise, e.n, e.status, "
                    "e.speedup, r.branch FROM entry e JOIN run r ON r.id = e.run_id WHERE e.key = "
                    "? AND r.host_fp = ? ORDER BY r.timestamp, r.id",
                    v, 2, &st, err, cap) < 0)
        return -1;
    fprintf(out, "# %s on %s (%.8s)\n", key, desc, fp);
    fprintf(out, "%-14s %-16s %-20s %12s %7s %5s %-14s %8s\n", "commit", "branch", "date",
            "median_ms", "noise", "n", "status", "speedup");
    int rc;
    while ((rc = hdb_step(h, st, err, cap)) == 1) {
        double med = hdb_real(st, 2), noise = hdb_real(st, 3), sp = hdb_real(st, 6);
        char m[32] = "", nz[32] = "", s[32] = "";
        if (isfinite(med))
            snprintf(m, sizeof m, "%.4f", med * 1e3);
        if (isfinite(noise))
            snprintf(nz, sizeof nz, "%.1f%%", noise * 100);
        if (isfinite(sp))
            snprintf(s, sizeof s, "%.3fx", sp);
        fprintf(out, "%-14.14s %-16s %-20s %12s %7s %5lld %-14s %8s\n", hdb_text(st, 0),
                hdb_text(st, 7), hdb_text(st, 1), m, nz, (long long)sqlite3_column_int64(st, 4),
                hdb_text(st, 5), s);
    }
    return hdb_finalize(h, st, rc, err, cap);
}

// --- the rolling baseline ------------------------------------------------------

static bool case_good(const json_t *c) {
    const char *s = json_string_value(json_object_get(c, "status"));
    return s && (!strcmp(s, "ok") || !strcmp(s, "pass"));
}

static bool case_stable(const json_t *c) {
    return !json_is_true(json_object_get(json_object_get(c, "stability"), "unstable"));
}

// One case from the same entry of several runs (newest first): the newest
// that passed (stable ones first) with the samples of all those runs, each
// run's processes kept apart in stability.process_samples, so that noise
// and spread come out as compare computes them for one file.
static json_t *pool(json_t *const *c, int n) {
    json_t *use[HISTORY_MAX_RUNS];
    int nu = 0;
    for (int pass = 0; pass < 2 && nu == 0; pass++)
        for (int i = 0; i < n; i++)
            if (case_good(c[i]) && (pass == 1 || case_stable(c[i])))
                use[nu++] = c[i];
    if (nu == 0) // failing everywhere: the newest, as it is
        return json_deep_copy(c[0]);
    json_t *out = json_deep_copy(use[0]), *samples = json_array(), *groups = json_array(),
           *runs = json_array();
    json_t *stab = json_object_get(out, "stability");
    if (!json_is_object(stab))
        json_object_set_new(out, "stability", stab = json_object());
    for (int i = 0; i < nu; i++) {
        json_t *s = json_object_get(use[i], "samples_s");
        json_t *ps = json_object_get(json_object_get(use[i], "stability"), "process_samples");
        json_int_t sum = 0;
        for (size_t k = 0; k < json_array_size(ps); k++)
            sum += json_integer_value(json_array_get(ps, k));
        json_array_extend(samples, s);
        json_array_append_new(runs, json_integer((json_int_t)json_array_size(s)));
        if (sum == (json_int_t)json_array_size(s) && sum > 0)
            json_array_extend(groups, ps);
        else
            json_array_append_new(groups, json_integer((json_int_t)json_array_size(s)));
    }
    if (json_array_size(groups) > BENCH_MAX_PROCESSES) { // one group per run, then
        json_decref(groups);
        groups = json_incref(runs);
    }
    json_object_set_new(stab, "processes", json_integer((json_int_t)json_array_size(groups)));
    json_object_set_new(stab, "process_samples", groups);
    json_object_del(stab, "process_medians_s");
    json_object_set_new(out, "samples_s", samples);
    json_object_set_new(out, "host_samples_s", json_null());
    json_decref(runs);
    return out;
}

// The runs a baseline may pool: branch ?1 on machine ?2, less the current
// run itself (timestamp ?4 on host ?5) when it was added already.
#define CANDIDATES                                                                                 \
    "WITH cand AS (SELECT * FROM run WHERE branch = ?1 AND host_fp = ?2 AND NOT (timestamp = ?4 "  \
    "AND hostname = ?5)) "

// The candidates in the order the baseline takes them: the current run's
// threads (?6) first, then the newest.
#define BY_THREADS "ORDER BY (threads_used IS ?6) DESC, timestamp DESC, id DESC "

// The newest ?3 candidates with the current run's threads, or the newest
// one's when none has them; their entries by key, newest run first.
static const char baseline_sql[] =
    CANDIDATES ", pick AS (SELECT id, timestamp FROM cand WHERE threads_used IS (SELECT "
               "threads_used FROM cand " BY_THREADS "LIMIT 1) ORDER BY "
               "timestamp DESC, id DESC LIMIT ?3) "
               "SELECT e.key, e.case_json, p.id FROM entry e JOIN pick p ON p.id = e.run_id "
               "ORDER BY e.key, p.timestamp DESC, p.id DESC";

// The document of the newest candidate, without cases; v: the statements'
// parameters.
static json_t *baseline_doc(history_db *h, const char *branch, const hval *v, char *err,
                            size_t cap) {
    sqlite3_stmt *st;
    if (hdb_prepare(h,
                    CANDIDATES "SELECT host_json, config_json, timestamp, commit_sha, tool_version "
                               "FROM cand " BY_THREADS "LIMIT 1",
                    v, 6, &st, err, cap) < 0)
        return NULL;
    int rc = hdb_step(h, st, err, cap);
    json_t *doc = NULL;
    if (rc == 1) {
        json_t *host = json_loads(hdb_text(st, 0), 0, NULL);
        json_t *config = json_loads(hdb_text(st, 1), 0, NULL);
        doc =
            json_pack("{s:i, s:{s:s, s:s, s:s}, s:s, s:[s], s:o*, s:o*, s:[]}", "schema_version",
                      RESULTS_SCHEMA_VERSION, "tool", "name", "tcbench", "version", hdb_text(st, 4),
                      "git_commit", hdb_text(st, 3), "timestamp", hdb_text(st, 2), "command_line",
                      "tcbench history", "host", host, "config", config, "cases");
        if (!doc)
            snprintf(err, cap, "%s: json_pack: the stored host or config does not read", h->path);
    }
    if (hdb_finalize(h, st, rc, err, cap) < 0) {
        json_decref(doc);
        return NULL;
    }
    if (rc == 0)
        snprintf(err, cap, "%s: no run of branch '%s' on this machine", h->path, branch);
    return doc;
}

// Pools the entries the statement returns into doc's cases.
static int baseline_cases(history_db *h, sqlite3_stmt *st, json_t *cases, char *err, size_t cap) {
    json_t *group[HISTORY_MAX_RUNS];
    int n = 0, rc;
    char key[700] = "";
    do {
        rc = hdb_step(h, st, err, cap);
        const char *k = rc == 1 ? hdb_text(st, 0) : "";
        if (n > 0 && (rc != 1 || strcmp(k, key) != 0)) {
            json_t *c = pool(group, n);
            while (n > 0)
                json_decref(group[--n]);
            if (!c || json_array_append_new(cases, c) < 0) {
                snprintf(err, cap, "%s: json_deep_copy: out of memory", h->path);
                return -1;
            }
        }
        if (rc != 1)
            break;
        snprintf(key, sizeof key, "%s", k);
        json_error_t je;
        json_t *c = json_loads(hdb_text(st, 1), 0, &je);
        if (!c) {
            snprintf(err, cap, "%s: entry %s of run %lld: json_loads: %s", h->path, key,
                     (long long)sqlite3_column_int64(st, 2), je.text);
            rc = -1;
        } else if (n < HISTORY_MAX_RUNS) {
            group[n++] = c;
        } else {
            json_decref(c);
        }
    } while (rc == 1);
    while (n > 0)
        json_decref(group[--n]);
    return rc < 0 ? -1 : 0;
}

int history_baseline(history_db *h, const char *branch, const resfile *cur, int runs, resfile **out,
                     char *err, size_t cap) {
    char desc[1024], fp[32];
    history_fingerprint(cur, desc, sizeof desc);
    history_hash(desc, fp, sizeof fp);
    *out = NULL;
    hval v[] = {HV_TEXT(branch), HV_TEXT(fp),           HV_INT(runs),
                HV_TEXT(cur->timestamp), HV_TEXT(cur->hostname), HV_INT(cur->threads_used)};
    json_t *doc = baseline_doc(h, branch, v, err, cap);
    if (!doc) {
        size_t len = strlen(err);
        snprintf(err + len, cap - len, " (%s: %s)", cur->path, desc);
        return -1;
    }
    sqlite3_stmt *st;
    int rc = hdb_prepare(h, baseline_sql, v, 6, &st, err, cap);
    if (rc == 0) {
        rc = baseline_cases(h, st, json_object_get(doc, "cases"), err, cap);
        rc = hdb_finalize(h, st, rc, err, cap);
    }
    if (rc < 0) {
        json_decref(doc);
        return -1;
    }
    char label[600];
    snprintf(label, sizeof label, "history:%s", branch);
    diag d;
    if (resfile_from_json(doc, label, out, &d) < 0) {
        diag_format(&d, err, cap);
        return -1;
    }
    return 0;
}
