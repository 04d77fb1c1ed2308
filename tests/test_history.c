// history (history/history.h): steps found where they are and nowhere
// else (one 15% step at a known index in noise; a flat noisy series; two
// steps; a single outlier is no step), and the database through the API:
// add, list, show, the same run refused, a pooled baseline with every
// run's samples and processes, a newer schema and a foreign file refused,
// the report's steps.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

// after the four above, which it needs
#include <cmocka.h>

#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "history/history.h"
#include "splitmix.h"

static char dir[256];

// y[i] = level * (1 + noise * (uniform - 0.5)), level times (1 + step) from at on
static void series(double *y, int n, double noise, int at, double step) {
    for (int i = 0; i < n; i++)
        y[i] = (i >= at ? 1 + step : 1) * (1 + noise * (uniform() - 0.5));
}

static void test_one_step(void **state) {
    (void)state;
    rng_state = 1;
    for (int trial = 0; trial < 50; trial++) {
        double y[20];
        int at = 4 + trial % 12;
        series(y, 20, 0.04, at, 0.15);
        history_step st[8];
        int n = history_steps(y, 20, st, 8);
        assert_int_equal(n, 1);
        assert_int_equal(st[0].at, at);
        assert_true(st[0].change > 0.12 && st[0].change < 0.18);
    }
}

static void test_flat(void **state) {
    (void)state;
    rng_state = 2;
    for (int trial = 0; trial < 200; trial++) {
        double y[30];
        series(y, 30, 0.04, 30, 0);
        history_step st[8];
        assert_int_equal(history_steps(y, 30, st, 8), 0);
    }
}

static void test_two_steps_and_outlier(void **state) {
    (void)state;
    rng_state = 3;
    double y[24];
    series(y, 24, 0.02, 24, 0);
    for (int i = 8; i < 24; i++)
        y[i] *= i < 16 ? 0.8 : 1.1; // -20% at 8, then +37.5% at 16
    history_step st[8];
    int n = history_steps(y, 24, st, 8);
    assert_int_equal(n, 2);
    assert_int_equal(st[0].at, 8);
    assert_int_equal(st[1].at, 16);
    assert_true(st[0].change < -0.15);
    assert_true(st[1].change > 0.3);
    // one wild run is no step: each side needs HISTORY_STEP_MINSEG runs
    double z[12];
    series(z, 12, 0.02, 12, 0);
    z[11] *= 1.5;
    assert_int_equal(history_steps(z, 12, st, 8), 0);
    assert_int_equal(history_steps(z, 3, st, 8), 0);
}

// A results file of smoke/mlp eager, 12 samples in 3 processes, about scale ms.
static void write_run(const char *path, const char *ts, double scale) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f,
            "{\"schema_version\": 1, \"tool\": {\"name\": \"tcbench\", \"version\": \"t\", "
            "\"git_commit\": \"abc%.2s\"}, \"timestamp\": \"%s\", \"command_line\": [\"t\"], "
            "\"host\": {\"hostname\": \"h\", \"os\": \"L\", \"cpu_model\": \"CPU\", \"cores\": "
            "4, \"threads_used\": 1}, \"config\": {}, \"cases\": [{\"suite\": \"s\", \"name\": "
            "\"m\", \"mode\": \"eager\", \"precision\": \"fp32\", \"workload\": \"infer\", "
            "\"device\": \"cpu\", \"batch\": 1, \"status\": \"ok\", \"samples_s\": [",
            ts + 8, ts);
    for (int i = 0; i < 12; i++)
        fprintf(f, "%s%.6g", i ? ", " : "", scale * 1e-3 * (1 + 0.01 * (uniform() - 0.5)));
    fprintf(f, "], \"stability\": {\"processes\": 3, \"process_samples\": [4, 4, 4]}}]}\n");
    assert_int_equal(fclose(f), 0);
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void test_db(void **state) {
    (void)state;
    rng_state = 4;
    char db[300], run[300], out[300], err[2048];
    snprintf(db, sizeof db, "%s/sub/h.sqlite", dir);
    snprintf(out, sizeof out, "%s/out.txt", dir);
    history_db *h;
    assert_int_equal(history_open(db, false, &h, err, sizeof err), -1);
    assert_non_null(strstr(err, "tcbench history add creates it"));
    assert_int_equal(history_open(db, true, &h, err, sizeof err), 0);
    history_add_opts o = {.branch = "main"};
    for (int i = 0; i < 6; i++) {
        char ts[32];
        snprintf(ts, sizeof ts, "2026-01-%02dT00:00:00Z", i + 1);
        snprintf(run, sizeof run, "%s/r%d.json", dir, i);
        write_run(run, ts, i < 3 ? 1 : 1.2);
        FILE *f = fopen(out, "w");
        assert_int_equal(history_add(h, run, &o, f, err, sizeof err), 0);
        fclose(f);
    }
    // the same run again: refused, nothing added
    assert_int_equal(history_add(h, run, &o, stdout, err, sizeof err), -1);
    assert_non_null(strstr(err, "already in"));
    FILE *f = fopen(out, "w");
    assert_int_equal(history_list(h, f, err, sizeof err), 0);
    fclose(f);
    assert_non_null(strstr(slurp(out), "\n6     abc06"));
    f = fopen(out, "w");
    assert_int_equal(history_show(h, "s/m", NULL, f, err, sizeof err), 0);
    fclose(f);
    assert_non_null(strstr(slurp(out), "# s/m eager fp32 infer cpu 1 on CPU; 4 cores"));
    assert_int_equal(history_show(h, "s/m", "nohost", stdout, err, sizeof err), -1);

    // the baseline pools the last 3 runs but cur's own (added already):
    // 36 samples, 9 processes, the newest run the one before cur's
    resfile *cur, *base;
    diag d;
    assert_int_equal(resfile_load(run, &cur, &d), 0);
    assert_int_equal(history_baseline(h, "main", cur, 3, &base, err, sizeof err), 0);
    assert_int_equal(base->nentries, 1);
    assert_int_equal(base->entries[0].nsamples, 36);
    assert_int_equal(base->entries[0].processes, 9);
    assert_true(fabs(base->entries[0].stats.median - 1.2e-3) < 2e-5);
    assert_string_equal(base->git_commit, "abc05");
    resfile_free(base);
    assert_int_equal(history_baseline(h, "dev", cur, 3, &base, err, sizeof err), -1);
    assert_non_null(strstr(err, "no run of branch 'dev'"));
    resfile_free(cur);

    char rep[300], md[320];
    snprintf(rep, sizeof rep, "%s/rep", dir);
    snprintf(md, sizeof md, "%s/history.md", rep);
    assert_int_equal(history_report(h, rep, "/nonexistent/gnuplot", stdout, err, sizeof err), 0);
    assert_non_null(strstr(slurp(md), "| s/m eager fp32 infer cpu 1 | "));
    assert_non_null(strstr(slurp(md), " | abc03 | abc04 | +"));
    history_close(h);

    // a newer schema is refused, by its number
    sqlite3 *raw;
    assert_int_equal(sqlite3_open(db, &raw), SQLITE_OK);
    assert_int_equal(sqlite3_exec(raw, "UPDATE schema_version SET version = 9", NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(raw);
    assert_int_equal(history_open(db, false, &h, err, sizeof err), -1);
    assert_non_null(strstr(err, "schema version 9, newer than this tcbench reads (1)"));

    // another program's database is refused and left as it was
    snprintf(db, sizeof db, "%s/foreign.sqlite", dir);
    assert_int_equal(sqlite3_open(db, &raw), SQLITE_OK);
    assert_int_equal(sqlite3_exec(raw, "CREATE TABLE t (x)", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(raw);
    assert_int_equal(history_open(db, true, &h, err, sizeof err), -1);
    assert_non_null(strstr(err, "not a tcbench history database"));
}

int main(void) {
    snprintf(dir, sizeof dir, "%s/tcbench-test-history-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_step),
        cmocka_unit_test(test_flat),
        cmocka_unit_test(test_two_steps_and_outlier),
        cmocka_unit_test(test_db),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return rc;
}
