// The history's database: opening it, its schema and migrations, and the
// checked sqlite3 calls the other files use (history_internal.h).
#include "history_internal.h"

#include "base/files.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

// A writer waits this long for another's transaction before it gives up.
#define HISTORY_BUSY_MS 60000

// Migration k brings the schema from version k to k + 1. A version 2 adds
// its statements as the second element; a file at version 1 then gets
// only that one, in the same transaction as the version's update.
static const char *const migrations[] = {
    // 1: runs and their entries; a run is identified by its start, its
    // host and its settings, so the same results file is stored once.
    "CREATE TABLE run ("
    "  id INTEGER PRIMARY KEY,"
    "  timestamp TEXT NOT NULL," // the results' start of the run (ISO 8601 UTC)
    "  hostname TEXT NOT NULL,"
    "  host_fp TEXT NOT NULL,"   // history_hash of history_fingerprint
    "  host_desc TEXT NOT NULL," // the fingerprint itself, readable
    "  threads_used INTEGER,"
    "  config_hash TEXT NOT NULL," // history_hash of the config, keys sorted
    "  commit_sha TEXT NOT NULL,"
    "  branch TEXT NOT NULL,"
    "  tool_version TEXT,"
    "  host_json TEXT NOT NULL,"
    "  config_json TEXT NOT NULL,"
    "  source TEXT NOT NULL," // the file it was added from
    "  added TEXT NOT NULL,"  // when (ISO 8601 UTC)
    "  UNIQUE (timestamp, hostname, host_fp, config_hash));"
    "CREATE INDEX run_branch ON run (branch, host_fp, timestamp);"
    "CREATE TABLE entry ("
    "  id INTEGER PRIMARY KEY,"
    "  run_id INTEGER NOT NULL REFERENCES run (id),"
    "  key TEXT NOT NULL," // "suite/name mode precision workload device batch"
    "  suite TEXT NOT NULL, name TEXT NOT NULL, mode TEXT NOT NULL, precision TEXT NOT NULL,"
    "  workload TEXT NOT NULL, device TEXT NOT NULL, batch INTEGER NOT NULL,"
    "  status TEXT NOT NULL,"
    "  n INTEGER NOT NULL," // samples
    "  median_s REAL, mean_s REAL,"
    "  noise REAL,"             // 1.4826 MAD / median within a process (stats.h)
    "  ci_lo REAL, ci_hi REAL," // the speedup's 95% interval
    "  speedup REAL,"
    "  case_json TEXT NOT NULL," // the case object as the file had it, samples and all
    "  UNIQUE (run_id, key));"
    "CREATE INDEX entry_key ON entry (key, run_id);",
};
_Static_assert(sizeof migrations / sizeof migrations[0] == HISTORY_SCHEMA_VERSION,
               "one migration per schema version");

void history_hash(const char *s, char *buf, size_t cap) {
    uint64_t h = 14695981039346656037ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    snprintf(buf, cap, "%016llx", (unsigned long long)h);
}

int hdb_fail(history_db *h, const char *call, const char *sql, char *err, size_t cap) {
    const char *msg = h->db ? sqlite3_errmsg(h->db) : "out of memory";
    if (sql)
        snprintf(err, cap, "%s: %s (%.40s%s): %s", h->path, call, sql,
                 strlen(sql) > 40 ? "..." : "", msg);
    else
        snprintf(err, cap, "%s: %s: %s", h->path, call, msg);
    return -1;
}

int hdb_bind(history_db *h, sqlite3_stmt *st, const hval *v, int n, char *err, size_t cap) {
    for (int i = 0; i < n; i++) {
        int rc;
        const char *call;
        if (v[i].t == HV_INT) {
            call = "sqlite3_bind_int64";
            rc = sqlite3_bind_int64(st, i + 1, v[i].i);
        } else if (v[i].t == HV_REAL && !isnan(v[i].d)) {
            call = "sqlite3_bind_double";
            rc = sqlite3_bind_double(st, i + 1, v[i].d);
        } else if (v[i].t == HV_TEXT && v[i].s) {
            call = "sqlite3_bind_text";
            rc = sqlite3_bind_text(st, i + 1, v[i].s, -1, SQLITE_TRANSIENT);
        } else {
            call = "sqlite3_bind_null";
            rc = sqlite3_bind_null(st, i + 1);
        }
        if (rc != SQLITE_OK)
            return hdb_fail(h, call, sqlite3_sql(st), err, cap);
    }
    return 0;
}

int hdb_prepare(history_db *h, const char *sql, const hval *v, int n, sqlite3_stmt **st, char *err,
                size_t cap) {
    *st = NULL;
    if (sqlite3_prepare_v2(h->db, sql, -1, st, NULL) != SQLITE_OK)
        return hdb_fail(h, "sqlite3_prepare_v2", sql, err, cap);
    if (hdb_bind(h, *st, v, n, err, cap) < 0) {
        sqlite3_finalize(*st); // the bind's error is the one to report
        *st = NULL;
        return -1;
    }
    return 0;
}

int hdb_step(history_db *h, sqlite3_stmt *st, char *err, size_t cap) {
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        return 1;
    if (rc == SQLITE_DONE)
        return 0;
    return hdb_fail(h, "sqlite3_step", sqlite3_sql(st), err, cap);
}

int hdb_finalize(history_db *h, sqlite3_stmt *st, int rc, char *err, size_t cap) {
    if (!st)
        return rc < 0 ? -1 : 0;
    char sql[64];
    snprintf(sql, sizeof sql, "%s", sqlite3_sql(st) ? sqlite3_sql(st) : "");
    // after a failed step, finalize returns that step's error again
    if (sqlite3_finalize(st) != SQLITE_OK && rc >= 0)
        return hdb_fail(h, "sqlite3_finalize", sql, err, cap);
    return rc < 0 ? -1 : 0;
}

int hdb_exec(history_db *h, const char *sql, const hval *v, int n, char *err, size_t cap) {
    sqlite3_stmt *st;
    if (hdb_prepare(h, sql, v, n, &st, err, cap) < 0)
        return -1;
    int rc = hdb_step(h, st, err, cap);
    return hdb_finalize(h, st, rc, err, cap);
}

const char *hdb_text(sqlite3_stmt *st, int col) {
    const unsigned char *s = sqlite3_column_text(st, col);
    return s ? (const char *)s : "";
}

double hdb_real(sqlite3_stmt *st, int col) {
    return sqlite3_column_type(st, col) == SQLITE_NULL ? NAN : sqlite3_column_double(st, col);
}

int hdb_begin(history_db *h, char *err, size_t cap) {
    return hdb_exec(h, "BEGIN IMMEDIATE", NULL, 0, err, cap);
}

int hdb_commit(history_db *h, char *err, size_t cap) {
    return hdb_exec(h, "COMMIT", NULL, 0, err, cap);
}

void hdb_rollback(history_db *h) {
    // after a failure, whose message err already holds; a transaction that
    // SQLite rolled back itself is no longer active, and that is fine
    if (sqlite3_get_autocommit(h->db) == 0)
        (void)sqlite3_exec(h->db, "ROLLBACK", NULL, NULL, NULL);
}

// One integer from a query (*v = -1 for no row or NULL).
static int query_int(history_db *h, const char *sql, long long *v, char *err, size_t cap) {
    sqlite3_stmt *st;
    *v = -1;
    if (hdb_prepare(h, sql, NULL, 0, &st, err, cap) < 0)
        return -1;
    int rc = hdb_step(h, st, err, cap);
    if (rc == 1 && sqlite3_column_type(st, 0) != SQLITE_NULL)
        *v = sqlite3_column_int64(st, 0);
    return hdb_finalize(h, st, rc, err, cap);
}

// The schema's version: 0 for a file without tables (new), -1 with err for
// one that is not a tcbench history. One statement reads both counts, so
// another process's migration cannot land between them.
static int schema_version(history_db *h, long long *v, char *err, size_t cap) {
    static const char sql[] =
        "SELECT (SELECT count(*) FROM sqlite_master WHERE type = 'table' "
        "AND name = 'schema_version'), (SELECT count(*) FROM sqlite_master WHERE "
        "type = 'table')";
    sqlite3_stmt *st;
    long long has = 0, objects = 0;
    int rc = hdb_prepare(h, sql, NULL, 0, &st, err, cap);
    if (rc == 0) {
        rc = hdb_step(h, st, err, cap);
        if (rc == 1) {
            has = sqlite3_column_int64(st, 0);
            objects = sqlite3_column_int64(st, 1);
        }
        rc = hdb_finalize(h, st, rc, err, cap);
    }
    if (rc < 0) { // a file of random bytes: "file is not a database"
        size_t len = strlen(err);
        snprintf(err + len, cap - len, " (not a tcbench history database)");
        return -1;
    }
    if (has > 0) {
        if (query_int(h, "SELECT max(version) FROM schema_version", v, err, cap) < 0)
            return -1;
        if (*v < 1) {
            snprintf(err, cap,
                     "%s: its schema_version table is empty: not a tcbench history database, or "
                     "a damaged one",
                     h->path);
            return -1;
        }
        return 0;
    }
    if (objects > 0) {
        snprintf(err, cap,
                 "%s: not a tcbench history database: it has %lld table%s and no "
                 "schema_version (another program's SQLite file?)",
                 h->path, objects, objects == 1 ? "" : "s");
        return -1;
    }
    *v = 0;
    return 0;
}

// Brings the schema to HISTORY_SCHEMA_VERSION, in one transaction.
static int migrate(history_db *h, char *err, size_t cap) {
    long long v;
    if (schema_version(h, &v, err, cap) < 0)
        return -1;
    if (v == HISTORY_SCHEMA_VERSION)
        return 0;
    if (v > HISTORY_SCHEMA_VERSION) {
        snprintf(err, cap,
                 "%s: schema version %lld, newer than this tcbench reads (%d): use a newer "
                 "tcbench",
                 h->path, v, HISTORY_SCHEMA_VERSION);
        return -1;
    }
    if (hdb_begin(h, err, cap) < 0)
        return -1;
    // another process may have migrated it while this one waited for the lock
    int rc = schema_version(h, &v, err, cap);
    if (rc == 0 && v == 0)
        rc = hdb_exec(h, "CREATE TABLE schema_version (version INTEGER NOT NULL)", NULL, 0, err,
                      cap);
    for (long long k = v; rc == 0 && k < HISTORY_SCHEMA_VERSION; k++) {
        char *msg = NULL;
        if (sqlite3_exec(h->db, migrations[k], NULL, NULL, &msg) != SQLITE_OK) {
            snprintf(err, cap, "%s: sqlite3_exec (migration to schema version %lld): %s", h->path,
                     k + 1, msg ? msg : sqlite3_errmsg(h->db));
            rc = -1;
        }
        sqlite3_free(msg);
    }
    if (rc == 0 && v < HISTORY_SCHEMA_VERSION) {
        hval ver = HV_INT(HISTORY_SCHEMA_VERSION);
        rc = hdb_exec(h, "DELETE FROM schema_version", NULL, 0, err, cap);
        if (rc == 0)
            rc = hdb_exec(h, "INSERT INTO schema_version (version) VALUES (?)", &ver, 1, err, cap);
    }
    if (rc == 0)
        rc = hdb_commit(h, err, cap);
    if (rc < 0)
        hdb_rollback(h);
    return rc;
}

// PRAGMA journal_mode=WAL; it takes a lock the busy handler does not wait
// for, so a busy file is tried again until the busy timeout.
static int wal_mode(history_db *h, char *err, size_t cap) {
    const char *sql = "PRAGMA journal_mode=WAL";
    for (int waited_ms = 0;; waited_ms += 10) {
        sqlite3_stmt *st;
        if (hdb_prepare(h, sql, NULL, 0, &st, err, cap) < 0)
            return -1;
        int rc = sqlite3_step(st);
        char mode[16] = "";
        if (rc == SQLITE_ROW)
            snprintf(mode, sizeof mode, "%s", hdb_text(st, 0));
        int fin = sqlite3_finalize(st);
        bool busy = rc == SQLITE_BUSY || rc == SQLITE_LOCKED || fin == SQLITE_BUSY;
        if (busy && waited_ms < HISTORY_BUSY_MS) {
            nanosleep(&(struct timespec){0, 10000000}, NULL);
            continue;
        }
        if (rc != SQLITE_ROW)
            return hdb_fail(h, "sqlite3_step", sql, err, cap);
        if (strcmp(mode, "wal") != 0) {
            snprintf(err, cap, "%s: %s: the journal mode stayed '%s'", h->path, sql, mode);
            return -1;
        }
        return 0;
    }
}

const char *history_default_path(const char *db_opt) {
    const char *env = getenv("TCBENCH_HISTORY");
    return db_opt ? db_opt : env && *env ? env : HISTORY_DEFAULT_DB;
}

// The directory of path, created when missing (a new database only).
static int parent_make(const char *path, char *err, size_t cap) {
    const char *slash = strrchr(path, '/');
    if (!slash || slash == path)
        return 0;
    char dir[1024];
    snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    return base_mkdir_p(dir, 0777, err, cap);
}

int history_open(const char *path, bool create, history_db **out, char *err, size_t cap) {
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) < 0) {
        if (errno != ENOENT || !create) {
            snprintf(err, cap, "%s: stat: %s%s", path, strerror(errno),
                     errno == ENOENT ? " (tcbench history add creates it)" : "");
            return -1;
        }
        if (parent_make(path, err, cap) < 0)
            return -1;
    } else if (!S_ISREG(sb.st_mode)) {
        snprintf(err, cap, "%s: not a regular file, not a history database", path);
        return -1;
    }
    history_db *h = calloc(1, sizeof *h);
    if (!h) {
        snprintf(err, cap, "%s: calloc: out of memory", path);
        return -1;
    }
    snprintf(h->path, sizeof h->path, "%s", path);
    int flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0);
    int rc = 0;
    if (sqlite3_open_v2(path, &h->db, flags, NULL) != SQLITE_OK)
        rc = hdb_fail(h, "sqlite3_open_v2", NULL, err, cap);
    if (rc == 0 && sqlite3_busy_timeout(h->db, HISTORY_BUSY_MS) != SQLITE_OK)
        rc = hdb_fail(h, "sqlite3_busy_timeout", NULL, err, cap);
    // the schema first: a foreign file is refused before anything is written to it
    long long v;
    if (rc == 0)
        rc = schema_version(h, &v, err, cap);
    if (rc == 0)
        rc = wal_mode(h, err, cap);
    if (rc == 0)
        rc = migrate(h, err, cap);
    if (rc < 0) {
        history_close(h);
        return -1;
    }
    *out = h;
    return 0;
}

void history_close(history_db *h) {
    if (!h)
        return;
    // sqlite3_close_v2 fails only on statements left unfinalized, which
    // every path here finalizes
    (void)sqlite3_close_v2(h->db);
    free(h);
}
