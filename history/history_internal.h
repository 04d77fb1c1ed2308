// history_int: the sqlite3 plumbing the history's files share. Every call
// is checked here, and a failure names the call, the statement and the file.
// Not for other modules: use history.h.
//
//   sqlite3_stmt *st;
//   hval v[] = {HV_TEXT("main"), HV_INT(5)};
//   if (hdb_prepare(h, "SELECT id FROM run WHERE branch = ? LIMIT ?", v, 2, &st, err, cap) < 0) ...
//   int rc;
//   while ((rc = hdb_step(h, st, err, cap)) == 1) ... sqlite3_column_int64(st, 0) ...
//   if (hdb_finalize(h, st, rc, err, cap) < 0) ...
#pragma once
#include "history.h"

#include <sqlite3.h>

struct history_db {
    sqlite3 *db;
    char path[1024];
};

// A value to bind; text is copied by SQLite (SQLITE_TRANSIENT).
typedef struct hval {
    enum { HV_NULL, HV_INT, HV_REAL, HV_TEXT } t;
    long long i;
    double d;      // NaN binds NULL
    const char *s; // NULL binds NULL
} hval;
#define HV_INT(x)  ((hval){.t = HV_INT, .i = (x)})
#define HV_REAL(x) ((hval){.t = HV_REAL, .d = (x)})
#define HV_TEXT(x) ((hval){.t = HV_TEXT, .s = (x)})

// "FILE: CALL (the statement's start): sqlite3's message" into err; -1.
int hdb_fail(history_db *h, const char *call, const char *sql, char *err, size_t cap);
// Binds v[0 .. n) to st's parameters 1 .. n.
int hdb_bind(history_db *h, sqlite3_stmt *st, const hval *v, int n, char *err, size_t cap);
int hdb_prepare(history_db *h, const char *sql, const hval *v, int n, sqlite3_stmt **st, char *err,
                size_t cap);
// 1: a row, 0: done, -1 with err.
int hdb_step(history_db *h, sqlite3_stmt *st, char *err, size_t cap);
// Finalizes st; rc is the last hdb_step's (a -1 there is kept: err says why).
int hdb_finalize(history_db *h, sqlite3_stmt *st, int rc, char *err, size_t cap);
// One statement that returns no rows: prepare, bind, step, finalize.
int hdb_exec(history_db *h, const char *sql, const hval *v, int n, char *err, size_t cap);
// A text column, "" for NULL.
const char *hdb_text(sqlite3_stmt *st, int col);
// A real column, NAN for NULL.
double hdb_real(sqlite3_stmt *st, int col);
// A transaction that takes the write lock at once (waiting out the busy
// timeout), its commit, and a rollback after a failure (err kept).
int hdb_begin(history_db *h, char *err, size_t cap);
int hdb_commit(history_db *h, char *err, size_t cap);
void hdb_rollback(history_db *h);

// 16 hex digits of FNV-1a 64 of s, into buf (17 bytes at least).
void history_hash(const char *s, char *buf, size_t cap);
