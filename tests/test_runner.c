// The runner: timing loop, planning, measurement, isolation and results.
// Works on a tiny suite written to a temporary directory.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

// after the four above, which it needs
#include <cmocka.h>

#include <ftw.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/runner.h"
#include "bench/timing.h"

static char dir[512], suite_path[600], model_path[600];

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_true(fputs(text, f) >= 0);
    assert_int_equal(fclose(f), 0);
}

static const char tiny_mlp[] = "name: tiny_mlp\n"
                               "family: mlp\n"
                               "params: {hidden: 32}\n"
                               "inputs:\n"
                               "  x: {shape: [$batch, 16]}\n"
                               "body:\n"
                               "  - linear: {out: $hidden}\n"
                               "  - relu: {}\n"
                               "  - linear: {out: 8}\n";

static const char tiny_suite[] = "name: tiny\n"
                                 "defaults:\n"
                                 "  modes: [eager, compiled]\n"
                                 "cases:\n"
                                 "  - name: fine\n"
                                 "    model: tiny_mlp\n"
                                 "    batch: 4\n"
                                 "    params: {hidden: 24}\n"
                                 "    sizes: {big: {batch: 8}}\n"
                                 "  - name: crashes\n"
                                 "    model: tiny_mlp\n"
                                 "    batch: 2\n"
                                 "  - name: hangs\n"
                                 "    model: tiny_mlp\n"
                                 "    batch: 2\n";

static int setup(void **state) {
    (void)state;
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/tcbench-runner-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir))
        return -1;
    char sub[600];
    snprintf(sub, sizeof sub, "%s/models", dir);
    if (mkdir(sub, 0777) < 0)
        return -1;
    snprintf(sub, sizeof sub, "%s/suites", dir);
    if (mkdir(sub, 0777) < 0)
        return -1;
    snprintf(model_path, sizeof model_path, "%s/models/tiny_mlp.yaml", dir);
    snprintf(suite_path, sizeof suite_path, "%s/suites/tiny.yaml", dir);
    write_file(model_path, tiny_mlp);
    write_file(suite_path, tiny_suite);
    // the suite must find its model beside it, not wherever the caller points
    unsetenv("TCBENCH_MODELS");
    unsetenv("TCBENCH_TEST_FAULT");
    return 0;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int teardown(void **state) {
    (void)state;
    return nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static bench_config tiny_config(void) {
    static const char *suites[1];
    suites[0] = suite_path;
    bench_config cfg;
    bench_config_init(&cfg);
    cfg.suites = suites;
    cfg.nsuites = 1;
    cfg.threads = 1;
    cfg.repeat = 3;
    return cfg;
}

// ~20 us of work the compiler cannot drop
static int spin_step(void *ctx) {
    int *calls = ctx;
    double t0 = bench_now();
    while (bench_now() - t0 < 20e-6)
        ;
    (*calls)++;
    return 0;
}

static void test_timing_loop(void **state) {
    (void)state;
    int calls = 0;
    bench_timing t;
    double t0 = bench_now();
    assert_int_equal(bench_time(spin_step, &calls, &(bench_timing_opts){.repeat = 5}, &t), 0);
    double total = bench_now() - t0;
    assert_true(t.warmup_iters >= 3);
    assert_true(t.warmup_s >= 0.2);
    assert_int_equal(t.nsamples, 5);
    // 1 ms of work per sample needs about 50 iterations of 20 us
    assert_true(t.iters_per_sample >= 2);
    for (int i = 0; i < t.nsamples; i++) {
        assert_true(t.samples[i] >= 20e-6);
        assert_true(t.samples[i] * (double)t.iters_per_sample >= 1e-3);
    }
    assert_true(calls >= t.warmup_iters + 5 * t.iters_per_sample);
    assert_true(total < 5);
    bench_timing_free(&t);
}

static int failing_step(void *ctx) {
    int *calls = ctx;
    return ++*calls == 2 ? -1 : 0;
}

static void test_timing_step_failure(void **state) {
    (void)state;
    int calls = 0;
    bench_timing t;
    assert_int_equal(bench_time(failing_step, &calls, NULL, &t), -1);
    assert_int_equal(calls, 2);
    bench_timing_free(&t);
}

static void test_plan(void **state) {
    (void)state;
    bench_config cfg = tiny_config();
    bench_plan *p;
    diag d = {0};
    assert_int_equal(bench_plan_new(&cfg, &p, &d), 0);
    assert_int_equal(p->ncases, 3);
    assert_int_equal(p->ntasks, 3);
    // the suite asks for compiled too; this build runs eager and says so
    assert_string_equal(p->skipped, "mode compiled");
    assert_true(p->used[BENCH_AXIS_MODE][BENCH_MODE_EAGER]);
    assert_false(p->used[BENCH_AXIS_MODE][BENCH_MODE_COMPILED]);
    assert_int_equal(p->tasks[1].axis[BENCH_AXIS_MODE], BENCH_MODE_EAGER);
    assert_int_equal(p->tasks[1].axis[BENCH_AXIS_PRECISION], BENCH_PREC_FP32);
    // 16 * 24 + 24 + 24 * 8 + 8
    assert_int_equal(p->cases[0].param_count, 608);
    assert_int_equal(p->cases[0].batch, 4);
    assert_true(p->cases[0].flops > 2.0 * 4 * 16 * 24);
    bench_plan_free(p);

    cfg.only = (const char *[]){"fine", "hangs"};
    cfg.nonly = 2;
    assert_int_equal(bench_plan_new(&cfg, &p, &d), 0);
    assert_int_equal(p->ncases, 2);
    assert_string_equal(p->cases[1].c->name, "hangs");
    bench_plan_free(p);

    cfg.only = (const char *[]){"nosuch"};
    cfg.nonly = 1;
    assert_int_equal(bench_plan_new(&cfg, &p, &d), -1);
    assert_non_null(strstr(d.msg, "--only nosuch"));
    cfg.nonly = 0;

    cfg.filter = "^f";
    assert_int_equal(bench_plan_new(&cfg, &p, &d), 0);
    assert_int_equal(p->ncases, 1);
    bench_plan_free(p);
    cfg.filter = NULL;
    cfg.exclude = "s$";
    assert_int_equal(bench_plan_new(&cfg, &p, &d), 0);
    assert_int_equal(p->ncases, 1);
    assert_string_equal(p->cases[0].c->name, "fine");
    bench_plan_free(p);

    cfg.exclude = "(";
    assert_int_equal(bench_plan_new(&cfg, &p, &d), -1);
    assert_non_null(strstr(d.msg, "--exclude"));
    cfg.exclude = NULL;

    cfg.size = "big";
    assert_int_equal(bench_plan_new(&cfg, &p, &d), 0);
    assert_int_equal(p->cases[0].batch, 8);
    assert_int_equal(p->cases[1].batch, 2);
    bench_plan_free(p);
    cfg.size = "huge";
    assert_int_equal(bench_plan_new(&cfg, &p, &d), -1);
    assert_non_null(strstr(d.msg, "huge"));
    cfg.size = NULL;

    cfg.batch = 5;
    assert_int_equal(bench_plan_new(&cfg, &p, &d), 0);
    assert_int_equal(p->cases[0].batch, 5);
    bench_plan_free(p);
    cfg.batch = 0;

    cfg.axis[BENCH_AXIS_MODE][0] = BENCH_MODE_COMPILED;
    cfg.naxis[BENCH_AXIS_MODE] = 1;
    assert_int_equal(bench_plan_new(&cfg, &p, &d), -1);
    assert_string_equal(d.msg, "--mode compiled: not available in this build yet");
    cfg.axis[BENCH_AXIS_MODE][0] = BENCH_MODE_EAGER;
    assert_int_equal(bench_plan_new(&cfg, &p, &d), 0);
    assert_string_equal(p->skipped, "");
    bench_plan_free(p);
}

static void test_measure_in_process(void **state) {
    (void)state;
    bench_config cfg = tiny_config();
    bench_plan *p;
    diag d = {0};
    assert_int_equal(bench_plan_new(&cfg, &p, &d), 0);
    bench_result r;
    bench_task_measure(p, 0, &r);
    assert_int_equal(r.status, BENCH_OK);
    assert_string_equal(r.message, "");
    assert_int_equal(r.nsamples, 3);
    assert_int_equal(r.stats.n, 3);
    assert_true(r.stats.median > 0);
    assert_true(r.iters_per_sample >= 1);
    assert_true(r.kernels > 0);
    assert_true(r.peak_bytes > 0);
    assert_true(r.acc.checked);
    assert_int_equal(r.acc.noutputs, 1);
    assert_true(r.acc.rel_l2 < BENCH_TOL_FP32);

    // what the child sends reads back the same
    json_t *j = bench_result_json(p, &r);
    assert_non_null(j);
    char *text = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(j);
    bench_result back = {0};
    assert_int_equal(bench_result_from_child(text, strlen(text), &back), 0);
    free(text);
    assert_int_equal(back.status, BENCH_OK);
    assert_int_equal(back.nsamples, 3);
    for (int i = 0; i < 3; i++)
        assert_true(back.samples[i] == r.samples[i]);
    assert_true(back.stats.median == r.stats.median);
    assert_int_equal(back.kernels, r.kernels);
    assert_int_equal(back.peak_bytes, r.peak_bytes);
    assert_int_equal(back.iters_per_sample, r.iters_per_sample);
    assert_true(back.acc.checked);
    assert_true(back.acc.rel_l2 == r.acc.rel_l2);
    bench_result_free(&back);
    bench_result_free(&r);
    assert_int_equal(bench_result_from_child("{\"status\": 3}", 13, &back), -1);
    assert_int_equal(back.status, BENCH_ERROR);
    assert_int_equal(bench_result_from_child("not json", 8, &back), -1);
    assert_non_null(strstr(back.message, "malformed"));
    bench_plan_free(p);

    // the reference check is skipped on request, and above the FLOPs limit
    cfg.accuracy = false;
    assert_int_equal(bench_plan_new(&cfg, &p, &d), 0);
    bench_task_measure(p, 0, &r);
    assert_int_equal(r.status, BENCH_OK);
    assert_false(r.acc.checked);
    assert_non_null(strstr(r.acc.reason, "--no-accuracy"));
    bench_result_free(&r);
    bench_plan_free(p);
    cfg.accuracy = true;
    cfg.accuracy_flops_limit = 100;
    assert_int_equal(bench_plan_new(&cfg, &p, &d), 0);
    bench_task_measure(p, 0, &r);
    assert_int_equal(r.status, BENCH_OK);
    assert_false(r.acc.checked);
    assert_non_null(strstr(r.acc.reason, "limit"));
    bench_result_free(&r);
    bench_plan_free(p);
}

static int ndone;
static void count_done(const bench_plan *p, const bench_result *r, void *user) {
    (void)p;
    (void)r;
    (void)user;
    ndone++;
}

static const char *const case_keys[] = {
    "suite",       "name",      "model",      "family",  "device",
    "mode",        "precision", "workload",   "batch",   "params",
    "status",      "message",   "samples_s",  "stats",   "iterations_per_sample",
    "param_count", "flops",     "peak_bytes", "kernels", "accuracy",
    "wall_s",      NULL};

static void check_case_keys(const json_t *c) {
    for (int k = 0; case_keys[k]; k++)
        if (!json_object_get(c, case_keys[k]))
            fail_msg("case object lacks '%s'", case_keys[k]);
}

static void test_run_isolated(void **state) {
    (void)state;
    bench_config cfg = tiny_config();
    char out[700];
    snprintf(out, sizeof out, "%s/res/out.json", dir); // res/ does not exist yet
    cfg.output = out;
    cfg.timeout_s = 2;
    // two threads in the children, after this process ran OpenMP with one
    // (test_measure_in_process): the pool must not be inherited broken
    cfg.threads = 2;
    char *argv[] = {"tcbench", "run", suite_path};
    cfg.argc = 3;
    cfg.argv = argv;
    setenv("TCBENCH_TEST_FAULT", "crash:crashes,hang:hangs", 1);
    bench_plan *p;
    diag d = {0};
    assert_int_equal(bench_plan_new(&cfg, &p, &d), 0);
    bench_report *rep;
    char err[512];
    assert_int_equal(bench_report_open(p, &rep, err, sizeof err), 0);
    ndone = 0;
    int failed = bench_run(p, rep, &(bench_hooks){.on_done = count_done});
    unsetenv("TCBENCH_TEST_FAULT");
    assert_int_equal(failed, 2);
    assert_int_equal(ndone, 3);
    assert_int_equal(rep->nresults, 3);

    bench_result *ok = &rep->results[0], *crash = &rep->results[1], *hang = &rep->results[2];
    assert_int_equal(ok->status, BENCH_OK);
    assert_int_equal(ok->nsamples, 3);
    assert_int_equal(ok->stats.n, 3);
    assert_true(ok->acc.checked);
    assert_int_equal(crash->status, BENCH_CRASH);
    assert_string_equal(crash->message, "killed by SIGSEGV");
    assert_int_equal(crash->nsamples, 0);
    assert_int_equal(hang->status, BENCH_TIMEOUT);
    assert_true(hang->wall_s >= 2 && hang->wall_s < 10);

    assert_int_equal(bench_report_write(rep, err, sizeof err), 0);
    json_error_t jerr;
    json_t *doc = json_load_file(out, 0, &jerr);
    if (!doc)
        fail_msg("%s:%d: %s", out, jerr.line, jerr.text);
    assert_int_equal(json_integer_value(json_object_get(doc, "schema_version")), 1);
    json_t *tool = json_object_get(doc, "tool");
    assert_string_equal(json_string_value(json_object_get(tool, "name")), "tcbench");
    assert_non_null(json_string_value(json_object_get(tool, "version")));
    assert_non_null(json_string_value(json_object_get(tool, "git_commit")));
    const char *ts = json_string_value(json_object_get(doc, "timestamp"));
    assert_non_null(ts);
    assert_int_equal(strlen(ts), 20); // 2024-01-02T03:04:05Z
    assert_int_equal(ts[19], 'Z');
    json_t *cl = json_object_get(doc, "command_line");
    assert_int_equal(json_array_size(cl), 3);
    assert_string_equal(json_string_value(json_array_get(cl, 1)), "run");
    json_t *host = json_object_get(doc, "host");
    const char *host_keys[] = {"hostname", "os",     "cpu_model", "cores", "threads_used",
                               "blas",     "onednn", "cpu_flags", NULL};
    for (int k = 0; host_keys[k]; k++)
        if (!json_object_get(host, host_keys[k]))
            fail_msg("host lacks '%s'", host_keys[k]);
    assert_int_equal(json_integer_value(json_object_get(host, "threads_used")), 2);
    assert_string_equal(json_string_value(json_object_get(json_object_get(host, "blas"), "name")),
                        "OpenBLAS");
    assert_non_null(json_string_value(json_object_get(json_object_get(host, "blas"), "config")));
    assert_non_null(json_string_value(json_object_get(json_object_get(host, "onednn"), "version")));
    assert_true(json_is_boolean(json_object_get(json_object_get(host, "cpu_flags"), "avx2")));
    json_t *config = json_object_get(doc, "config");
    const char *config_keys[] = {"suites",    "size",      "seed",  "repeat",
                                 "threads",   "timeout_s", "modes", "precisions",
                                 "workloads", "device",    NULL};
    for (int k = 0; config_keys[k]; k++)
        if (!json_object_get(config, config_keys[k]))
            fail_msg("config lacks '%s'", config_keys[k]);
    assert_int_equal(json_integer_value(json_object_get(config, "repeat")), 3);
    assert_string_equal(json_string_value(json_object_get(config, "device")), "cpu");
    json_t *modes = json_object_get(config, "modes");
    assert_int_equal(json_array_size(modes), 1);
    assert_string_equal(json_string_value(json_array_get(modes, 0)), "eager");

    json_t *cases = json_object_get(doc, "cases");
    assert_int_equal(json_array_size(cases), 3);
    for (size_t i = 0; i < 3; i++)
        check_case_keys(json_array_get(cases, i));
    json_t *c0 = json_array_get(cases, 0), *c1 = json_array_get(cases, 1);
    assert_string_equal(json_string_value(json_object_get(c0, "status")), "ok");
    assert_string_equal(json_string_value(json_object_get(c0, "suite")), "tiny");
    assert_string_equal(json_string_value(json_object_get(c0, "model")), "tiny_mlp");
    assert_string_equal(json_string_value(json_object_get(c0, "mode")), "eager");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(c0, "params"), "hidden")),
                     24);
    assert_int_equal(json_array_size(json_object_get(c0, "samples_s")), 3);
    json_t *stats = json_object_get(c0, "stats");
    const char *stat_keys[] = {"median_s", "q1_s", "q3_s",  "min_s",    "max_s", "mean_s",
                               "stddev_s", "cv",   "mad_s", "outliers", "n",     NULL};
    for (int k = 0; stat_keys[k]; k++)
        if (!json_object_get(stats, stat_keys[k]))
            fail_msg("stats lacks '%s'", stat_keys[k]);
    json_t *acc = json_object_get(c0, "accuracy");
    assert_true(json_is_true(json_object_get(acc, "checked")));
    assert_true(json_is_number(json_object_get(acc, "rel_l2")));
    assert_string_equal(json_string_value(json_object_get(c1, "status")), "crash");
    assert_true(json_is_null(json_object_get(c1, "stats")));
    assert_string_equal(json_string_value(json_object_get(json_array_get(cases, 2), "status")),
                        "timeout");
    json_decref(doc);

    // the journal: one parseable line per case, in order
    FILE *f = fopen(rep->journal, "r");
    assert_non_null(f);
    char line[1 << 16];
    int lines = 0;
    const char *want[] = {"ok", "crash", "timeout"};
    while (fgets(line, sizeof line, f)) {
        json_t *c = json_loads(line, 0, &jerr);
        assert_non_null(c);
        assert_true(lines < 3);
        check_case_keys(c);
        assert_string_equal(json_string_value(json_object_get(c, "status")), want[lines]);
        json_decref(c);
        lines++;
    }
    fclose(f);
    assert_int_equal(lines, 3);
    // the temporary file was renamed away
    char tmp[800];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", out, (long)getpid());
    assert_int_equal(access(tmp, F_OK), -1);
    bench_report_free(rep);
    bench_plan_free(p);
}

static void test_run_oom(void **state) {
    (void)state;
    bench_config cfg = tiny_config();
    char out[700];
    snprintf(out, sizeof out, "%s/oom.json", dir);
    cfg.output = out;
    cfg.only = (const char *[]){"fine"};
    cfg.nonly = 1;
    setenv("TCBENCH_TEST_FAULT", "oom:fine", 1);
    bench_plan *p;
    diag d = {0};
    assert_int_equal(bench_plan_new(&cfg, &p, &d), 0);
    bench_report *rep;
    char err[512];
    assert_int_equal(bench_report_open(p, &rep, err, sizeof err), 0);
    assert_int_equal(bench_run(p, rep, NULL), 1);
    unsetenv("TCBENCH_TEST_FAULT");
    assert_int_equal(rep->results[0].status, BENCH_OOM);
    bench_report_free(rep);
    bench_plan_free(p);
}

static void test_report_open_fails(void **state) {
    (void)state;
    bench_config cfg = tiny_config();
    char out[700];
    // a regular file where a directory should be
    snprintf(out, sizeof out, "%s/suites/tiny.yaml/out.json", dir);
    cfg.output = out;
    bench_plan *p;
    diag d = {0};
    assert_int_equal(bench_plan_new(&cfg, &p, &d), 0);
    bench_report *rep;
    char err[512];
    assert_int_equal(bench_report_open(p, &rep, err, sizeof err), -1);
    assert_null(rep);
    assert_non_null(strstr(err, "mkdir"));
    bench_plan_free(p);
}

static void test_check_file(void **state) {
    (void)state;
    diag d = {0};
    assert_int_equal(bench_check_file(suite_path, &d), 0);
    assert_int_equal(bench_check_file(model_path, &d), 0);
    char bad[700];
    snprintf(bad, sizeof bad, "%s/models/bad.yaml", dir);
    write_file(bad, "name: bad\n"
                    "inputs:\n"
                    "  x: {shape: [$batch, 16]}\n"
                    "body:\n"
                    "  - linaer: {out: 4}\n");
    assert_int_equal(bench_check_file(bad, &d), -1);
    assert_string_equal(d.file, bad);
    assert_int_equal(d.line, 5);
    // a suite whose size points a case at an impossible override
    char bad_suite[700];
    snprintf(bad_suite, sizeof bad_suite, "%s/suites/bad_size.yaml", dir);
    write_file(bad_suite, "cases:\n"
                          "  - model: tiny_mlp\n"
                          "    batch: 2\n"
                          "    sizes: {odd: {params: {nosuch: 3}}}\n");
    assert_int_equal(bench_check_file(bad_suite, &d), -1);
    assert_int_equal(d.line, 4);
    char missing[700];
    snprintf(missing, sizeof missing, "%s/nope.yaml", dir);
    assert_int_equal(bench_check_file(missing, &d), -1);
    assert_non_null(strstr(d.file, "nope.yaml"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_timing_loop),
        cmocka_unit_test(test_timing_step_failure),
        cmocka_unit_test(test_plan),
        cmocka_unit_test(test_measure_in_process),
        cmocka_unit_test(test_run_isolated),
        cmocka_unit_test(test_run_oom),
        cmocka_unit_test(test_report_open_fails),
        cmocka_unit_test(test_check_file),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
