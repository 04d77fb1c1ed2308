// tcbench compare: the U test and Benjamini-Hochberg against known values,
// a clear regression exits 1, the case (one baseline sample x50, a
// 1.5x slowdown) is a regression where stddev / mean called it the same,
// 200 pairs of pure noise (with and without outliers x5..50) give no false
// regression, 30% dispersion or an entry marked unstable is noisy (listed
// apart in every format, exit 1 only with --fail-on-noisy), a different
// machine exits 2 (and --force goes on), corrupt JSON exits 2 with
// FILE:LINE:COL, ok -> fail_accuracy is a regression, the JUnit output is
// well-formed XML, the other formats say the same, and a file holding a
// sample that is no plausible time (1e200 s, 1e308 s, -1, 0) is refused.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

// after the four above, which it needs
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "reports/compare.h"
#include "splitmix.h"

static char dir[256];

static bool xml_well_formed(const char *s, int *testcases, int *failures); // below

// Box-Muller on splitmix64: the same noise on every machine
static double gauss(void) { return sqrt(-2 * log(uniform())) * cos(2 * M_PI * uniform()); }
// lognormal around median m with coefficient of variation about cv
static double lognormal(double m, double cv) { return m * exp(gauss() * sqrt(log1p(cv * cv))); }

typedef struct fake {
    const char *name, *status;
    double median, cv;
    int n;
    double spike;     // samples_s[0] multiplied by this (0: no spike)
    double outlier_p; // each sample, with this chance, multiplied by 5..50
    bool unstable;    // stability.unstable true, with a reason
    int processes;    // > 0: the samples come from this many processes, n / processes
    double spread;    // each, their medians exp(spread * (j - (processes - 1) / 2)) apart
} fake;
#define FAKE(nm, st, m, c, k)                                                                      \
    { .name = (nm), .status = (st), .median = (m), .cv = (c), .n = (k) }

// The stability object of the schema; null without samples, as run writes it.
static json_t *stability_of(const fake *f, json_t *samples) {
    if (!f->n)
        return json_null();
    double *x = malloc((size_t)f->n * sizeof *x);
    assert_non_null(x);
    for (int k = 0; k < f->n; k++)
        x[k] = json_real_value(json_array_get(samples, (size_t)k));
    bench_stats st;
    assert_int_equal(bench_stats_compute(x, f->n, &st), 0);
    free(x);
    json_t *reasons = json_array();
    if (f->unstable)
        json_array_append_new(reasons,
                              json_string("interference: 812 involuntary context switches"));
    json_t *j =
        json_pack("{s:f, s:n, s:i, s:i, s:f, s:n, s:n, s:b, s:o}", "noise", bench_stats_noise(&st),
                  "ci_rel_width", "rounds", f->n, "nivcsw", f->unstable ? 812 : 3, "steal_s", 0.0,
                  "load_start", "load_end", "unstable", f->unstable, "reasons", reasons);
    if (f->processes > 0) { // what resfile reads: the samples' split by process
        json_t *counts = json_array();
        for (int p = 0; p < f->processes; p++)
            json_array_append_new(counts, json_integer(f->n / f->processes));
        json_object_set_new(j, "process_samples", counts);
    }
    return j;
}

// A results file of one entry per fake, on the host cpu.
static void write_results(const char *path, const char *cpu, const fake *f, int nf) {
    json_t *cases = json_array();
    for (int i = 0; i < nf; i++) {
        json_t *s = json_array();
        for (int k = 0; k < f[i].n; k++) {
            double v = lognormal(f[i].median, f[i].cv);
            if (f[i].processes > 0) // process j of them shifted by spread * (j - middle)
                v *=
                    exp(f[i].spread * (k / (f[i].n / f[i].processes) - (f[i].processes - 1) / 2.0));
            if (k == 0 && f[i].spike > 0)
                v *= f[i].spike;
            if (f[i].outlier_p > 0 && uniform() < f[i].outlier_p)
                v *= 5 + 45 * uniform();
            json_array_append_new(s, json_real(v));
        }
        json_t *c = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:s, s:s, s:o}", "suite", "t",
                              "name", f[i].name, "mode", "compiled", "precision", "fp32",
                              "workload", "infer", "device", "cpu", "batch", 2, "status",
                              f[i].status, "message", "", "samples_s", s);
        assert_non_null(c);
        json_object_set_new(c, "stability", stability_of(&f[i], s));
        json_array_append_new(cases, c);
    }
    json_t *doc = json_pack("{s:i, s:{s:s, s:i, s:i}, s:o}", "schema_version", 1, "host",
                            "cpu_model", cpu, "cores", 2, "threads_used", 2, "cases", cases);
    assert_non_null(doc);
    assert_int_equal(json_dump_file(doc, path, JSON_INDENT(1)), 0);
    json_decref(doc);
}

static void path_of(char *buf, size_t cap, const char *name) {
    snprintf(buf, cap, "%s/%s", dir, name);
}

// compare_main with its output and errors captured.
static int run_compare(const char *a, const char *b, const compare_options *o, char **out,
                       char **err) {
    char pa[512], pb[512];
    path_of(pa, sizeof pa, a);
    path_of(pb, sizeof pb, b);
    char *obuf = NULL, *ebuf = NULL;
    size_t on = 0, en = 0;
    FILE *fo = open_memstream(&obuf, &on), *fe = open_memstream(&ebuf, &en);
    assert_non_null(fo);
    assert_non_null(fe);
    int rc = compare_main(pa, pb, o, fo, fe);
    fclose(fo);
    fclose(fe);
    if (out)
        *out = obuf;
    else
        free(obuf);
    if (err)
        *err = ebuf;
    else
        free(ebuf);
    return rc;
}

static int setup(void **state) {
    (void)state;
    const char *t = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/tcbench-test-compare-XXXXXX", t && *t ? t : "/tmp");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_mann_whitney(void **state) {
    (void)state;
    double a[] = {1, 2, 3, 4, 5}, b[] = {6, 7, 8, 9, 10};
    // scipy.stats.mannwhitneyu(a, b, method="asymptotic").pvalue
    assert_true(fabs(compare_mann_whitney(a, 5, b, 5) - 0.01218578036) < 1e-9);
    assert_true(fabs(compare_mann_whitney(b, 5, a, 5) - 0.01218578036) < 1e-9);
    // ties: U counted pair by pair, the tie term from the groups of equal values
    double c[] = {1, 1, 2, 2, 3, 5}, d[] = {2, 3, 3, 3, 4, 4, 6};
    assert_true(fabs(compare_mann_whitney(c, 6, d, 7) - 0.1080220334) < 1e-9);
    double e[] = {3, 3, 3};
    assert_true(compare_mann_whitney(e, 3, e, 3) == 1); // all tied: no evidence
}

static void test_bh(void **state) {
    (void)state;
    double p[] = {0.01, 0.04, 0.03, 0.005}, q[4];
    compare_bh_adjust(p, 4, q);
    // R: p.adjust(c(0.01, 0.04, 0.03, 0.005), "BH")
    double want[] = {0.02, 0.04, 0.04, 0.02};
    for (int i = 0; i < 4; i++)
        assert_true(fabs(q[i] - want[i]) < 1e-12);
}

static void test_clear_regression(void **state) {
    (void)state;
    rng_state = 1;
    fake base[] = {FAKE("mlp", "pass", 1e-3, 0.02, 20), FAKE("gpt2", "pass", 2e-3, 0.02, 20)};
    fake cur[] = {FAKE("mlp", "pass", 1.3e-3, 0.02, 20), FAKE("gpt2", "pass", 2e-3, 0.02, 20)};
    char a[512], b[512];
    path_of(a, sizeof a, "base.json");
    path_of(b, sizeof b, "slow.json");
    write_results(a, "cpu A", base, 2);
    write_results(b, "cpu A", cur, 2);
    compare_options o;
    compare_options_init(&o);
    char *out;
    assert_int_equal(run_compare("base.json", "slow.json", &o, &out, NULL), 1);
    assert_non_null(strstr(out, "regression   t/mlp compiled"));
    assert_non_null(strstr(out, "same         t/gpt2 compiled"));
    assert_non_null(strstr(out, "FAIL: 1 regression"));
    free(out);
    // the same file twice passes
    assert_int_equal(run_compare("base.json", "base.json", &o, NULL, NULL), 0);
    // and the reverse is an improvement, which passes
    assert_int_equal(run_compare("slow.json", "base.json", &o, &out, NULL), 0);
    assert_non_null(strstr(out, "improvement  t/mlp"));
    free(out);
}

// The case: one baseline sample in 20 is 50 times the others, and
// every current sample is 1.5 times slower. stddev / mean made the limit
// about 950% and the gate said `same`; the robust noise keeps it near 5%.
static void test_outlier_in_baseline(void **state) {
    (void)state;
    rng_state = 17;
    fake base[] = {FAKE("mlp", "pass", 1e-3, 0.01, 20)};
    base[0].spike = 50;
    fake cur[] = {FAKE("mlp", "pass", 1.5e-3, 0.01, 20)};
    char a[512], b[512];
    path_of(a, sizeof a, "spike_a.json");
    path_of(b, sizeof b, "spike_b.json");
    write_results(a, "cpu A", base, 1);
    write_results(b, "cpu A", cur, 1);
    // the case the old gate let through: 3 x sqrt(cv_base^2 + cv_cur^2) > 50%
    resfile *fa;
    diag d;
    assert_int_equal(resfile_load(a, &fa, &d), 0);
    double cv = fa->entries[0].stats.cv;
    assert_true(3 * cv > 0.5);
    resfile_free(fa);
    compare_options o;
    compare_options_init(&o);
    char *out;
    int rc = run_compare("spike_a.json", "spike_b.json", &o, &out, NULL);
    print_message("%s", out);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(out, "regression   t/mlp compiled"));
    assert_non_null(strstr(out, "FAIL: 1 regression"));
    free(out);
}

// Writes base and cur as NAME_a.json and NAME_b.json in the test folder.
static void write_pair(const char *name, const fake *base, int nb, const fake *cur, int nc) {
    char a[512], b[512], fa[64], fb[64];
    snprintf(fa, sizeof fa, "%s_a.json", name);
    snprintf(fb, sizeof fb, "%s_b.json", name);
    path_of(a, sizeof a, fa);
    path_of(b, sizeof b, fb);
    write_results(a, "cpu A", base, nb);
    write_results(b, "cpu A", cur, nc);
}

// A current run with 30% dispersion and no shift: noisy, listed apart, a
// pass unless --fail-on-noisy; the steady entry beside it is still called.
static void test_dispersed_is_noisy(void **state) {
    (void)state;
    rng_state = 23;
    fake base[] = {FAKE("mlp", "pass", 1e-3, 0.02, 20), FAKE("gpt2", "pass", 2e-3, 0.02, 20)};
    fake cur[] = {FAKE("mlp", "pass", 1e-3, 0.30, 20), FAKE("gpt2", "pass", 2e-3, 0.02, 20)};
    write_pair("wide", base, 2, cur, 2);
    compare_options o;
    compare_options_init(&o);
    char *out;
    assert_int_equal(run_compare("wide_a.json", "wide_b.json", &o, &out, NULL), 0);
    print_message("%s", out);
    assert_non_null(strstr(out, "same         t/gpt2 compiled"));
    // the noisy entry comes after the called ones, under its own title
    const char *apart = strstr(out, "\nnoisy: 1 entry too noisy to call");
    assert_non_null(apart);
    assert_non_null(strstr(apart, "noisy        t/mlp compiled"));
    assert_null(strstr(apart, "t/gpt2"));
    assert_non_null(strstr(apart, "current noise "));
    assert_non_null(
        strstr(out, "PASS: 0 regressions, 0 improvement, 0 ambiguous, 1 noisy, 1 same"));
    free(out);

    o.fail_on_noisy = true;
    assert_int_equal(run_compare("wide_a.json", "wide_b.json", &o, &out, NULL), 1);
    assert_non_null(strstr(out, "FAIL: 0 regressions, 0 improvement, 0 ambiguous, 1 noisy"));
    assert_non_null(strstr(out, "--fail-on-noisy fails the gate"));
    free(out);

    o.format = CMP_JSON;
    assert_int_equal(run_compare("wide_a.json", "wide_b.json", &o, &out, NULL), 1);
    json_t *doc = json_loads(out, 0, NULL);
    assert_non_null(doc);
    assert_string_equal(json_string_value(json_object_get(doc, "result")), "fail");
    assert_true(json_is_true(json_object_get(doc, "fail_on_noisy")));
    assert_true(fabs(json_real_value(json_object_get(doc, "noise_cap")) - 0.10) < 1e-12);
    json_t *counts = json_object_get(doc, "counts");
    assert_int_equal(json_integer_value(json_object_get(counts, "noisy")), 1);
    assert_int_equal(json_integer_value(json_object_get(counts, "same")), 1);
    json_t *noisy = json_object_get(doc, "noisy");
    assert_int_equal(json_array_size(noisy), 1);
    json_t *n0 = json_array_get(noisy, 0);
    assert_string_equal(json_string_value(json_object_get(n0, "name")), "mlp");
    assert_string_equal(json_string_value(json_object_get(n0, "verdict")), "noisy");
    assert_true(json_real_value(json_object_get(n0, "noise_current")) > 0.10);
    assert_true(json_real_value(json_object_get(n0, "noise_base")) < 0.10);
    assert_true(json_is_null(json_object_get(n0, "q"))); // not tested: out of BH
    json_decref(doc);
    free(out);

    o.format = CMP_JUNIT;
    int cases, failures;
    assert_int_equal(run_compare("wide_a.json", "wide_b.json", &o, &out, NULL), 1);
    assert_true(xml_well_formed(out, &cases, &failures));
    assert_int_equal(failures, 1);
    assert_non_null(strstr(out, "<failure type=\"noisy\" message=\"current noise "));
    free(out);
    o.fail_on_noisy = false;
    assert_int_equal(run_compare("wide_a.json", "wide_b.json", &o, &out, NULL), 0);
    assert_true(xml_well_formed(out, &cases, &failures));
    assert_int_equal(cases, 2);
    assert_int_equal(failures, 0);
    assert_non_null(strstr(out, "skipped=\"1\""));
    assert_non_null(strstr(out, "<skipped message=\"noisy: current noise "));
    free(out);

    o.format = CMP_MD;
    assert_int_equal(run_compare("wide_a.json", "wide_b.json", &o, &out, NULL), 0);
    assert_non_null(strstr(out, "### tcbench compare: PASS: 0 regressions"));
    assert_non_null(strstr(out, "Every entry but the noisy ones is the same within its limit."));
    apart = strstr(out, "**Noisy**: 1 entry too noisy to call");
    assert_non_null(apart);
    assert_non_null(strstr(apart, "| noisy | t/mlp compiled"));
    assert_true(strstr(apart, "| noisy | t/mlp compiled") < strstr(apart, "<details>"));
    free(out);

    // a cap above its noise lets the gate call it: no shift, so the same
    o.format = CMP_TEXT;
    o.noise_cap = 0.9;
    assert_int_equal(run_compare("wide_a.json", "wide_b.json", &o, &out, NULL), 0);
    assert_non_null(strstr(out, "same         t/mlp compiled"));
    assert_non_null(strstr(out, ", 0 noisy, 2 same"));
    free(out);
}

// --processes: the spread of the processes' medians widens a side's noise
// by spread / sqrt(processes). A 12% slowdown with 2% noise is a
// regression from one process; pooled from 3 processes 6% apart it is
// within the limit, and 30% apart it is noisy.
static void test_process_spread(void **state) {
    (void)state;
    const char *want[] = {"regression", "same", "noisy"};
    const double spread[] = {NAN, 0.06, 0.30};
    for (int i = 0; i < 3; i++) {
        rng_state = 41;
        fake base[] = {FAKE("m", "pass", 1e-3, 0.02, 30)};
        fake cur[] = {FAKE("m", "pass", 1.12e-3, 0.02, 30)};
        if (!isnan(spread[i])) {
            base[0].processes = cur[0].processes = 3;
            base[0].spread = cur[0].spread = spread[i];
        }
        write_pair("spread", base, 1, cur, 1);
        compare_options o;
        compare_options_init(&o);
        o.format = CMP_JSON;
        char *out;
        run_compare("spread_a.json", "spread_b.json", &o, &out, NULL);
        json_t *doc = json_loads(out, 0, NULL);
        assert_non_null(doc);
        json_t *e = json_array_get(json_object_get(doc, "entries"), 0);
        assert_string_equal(json_string_value(json_object_get(e, "verdict")), want[i]);
        json_decref(doc);
        free(out);
    }
}

// An entry its run marked unstable is noisy whatever its times, on either
// side; a status change is still called.
static void test_unstable_is_noisy(void **state) {
    (void)state;
    rng_state = 29;
    fake base[] = {FAKE("slow", "pass", 1e-3, 0.02, 20), FAKE("calm", "pass", 1e-3, 0.02, 20),
                   FAKE("broke", "pass", 1e-3, 0.02, 20), FAKE("fixed", "fail_to_run", 0, 0, 0)};
    fake cur[] = {FAKE("slow", "pass", 1.5e-3, 0.02, 20), FAKE("calm", "pass", 1e-3, 0.02, 20),
                  FAKE("broke", "fail_accuracy", 1e-3, 0.02, 20),
                  FAKE("fixed", "pass", 1e-3, 0.02, 20)};
    cur[0].unstable = true;  // 1.5x slower, but the run saw interference
    base[1].unstable = true; // a baseline marked unstable counts the same
    base[2].unstable = true;
    cur[3].unstable = true;
    write_pair("unst", base, 4, cur, 4);
    compare_options o;
    compare_options_init(&o);
    o.format = CMP_JSON;
    char *out;
    assert_int_equal(run_compare("unst_a.json", "unst_b.json", &o, &out, NULL), 1);
    json_t *doc = json_loads(out, 0, NULL);
    assert_non_null(doc);
    json_t *e = json_object_get(doc, "entries");
    const char *want[] = {"noisy", "noisy", "regression", "improvement"};
    for (int i = 0; i < 4; i++)
        assert_string_equal(json_string_value(json_object_get(json_array_get(e, i), "verdict")),
                            want[i]);
    assert_string_equal(json_string_value(json_object_get(json_array_get(e, 0), "reason")),
                        "current marked unstable; interference: 812 involuntary context switches");
    assert_string_equal(json_string_value(json_object_get(json_array_get(e, 1), "reason")),
                        "baseline marked unstable; interference: 812 involuntary context switches");
    assert_int_equal(json_array_size(json_object_get(doc, "noisy")), 2);
    json_decref(doc);
    free(out);
}

// The study's statuses are failures as any other: a pass that became
// model_fail_to_load or eager_fail_to_run is a regression, and back an
// improvement.
static void test_study_statuses(void **state) {
    (void)state;
    rng_state = 37;
    fake base[] = {FAKE("load", "pass", 1e-3, 0.02, 20), FAKE("eager", "pass", 1e-3, 0.02, 20),
                   FAKE("back", "model_fail_to_load", 0, 0, 0)};
    fake cur[] = {FAKE("load", "model_fail_to_load", 0, 0, 0),
                  FAKE("eager", "eager_fail_to_run", 0, 0, 0),
                  FAKE("back", "pass", 1e-3, 0.02, 20)};
    write_pair("study", base, 3, cur, 3);
    compare_options o;
    compare_options_init(&o);
    o.format = CMP_JSON;
    char *out;
    assert_int_equal(run_compare("study_a.json", "study_b.json", &o, &out, NULL), 1);
    json_t *doc = json_loads(out, 0, NULL);
    assert_non_null(doc);
    json_t *e = json_object_get(doc, "entries");
    const char *want[] = {"regression", "regression", "improvement"};
    for (int i = 0; i < 3; i++)
        assert_string_equal(json_string_value(json_object_get(json_array_get(e, i), "verdict")),
                            want[i]);
    assert_non_null(strstr(json_string_value(json_object_get(json_array_get(e, 0), "reason")),
                           "status pass -> model_fail_to_load"));
    json_decref(doc);
    free(out);
}

// A real 1.5x slowdown with 3% dispersion is still called, with and without
// occasional outliers.
static void test_real_regression(void **state) {
    (void)state;
    rng_state = 31;
    fake base[] = {FAKE("plain", "pass", 1e-3, 0.03, 20), FAKE("spiky", "pass", 1e-3, 0.03, 20)};
    fake cur[] = {FAKE("plain", "pass", 1.5e-3, 0.03, 20), FAKE("spiky", "pass", 1.5e-3, 0.03, 20)};
    base[1].outlier_p = cur[1].outlier_p = 0.05;
    write_pair("real", base, 2, cur, 2);
    compare_options o;
    compare_options_init(&o);
    char *out;
    assert_int_equal(run_compare("real_a.json", "real_b.json", &o, &out, NULL), 1);
    assert_non_null(strstr(out, "regression   t/plain compiled"));
    assert_non_null(strstr(out, "regression   t/spiky compiled"));
    assert_non_null(strstr(out, "FAIL: 2 regressions"));
    free(out);
}

// 200 pairs of pure noise, both sides from one distribution (3% dispersion,
// about one sample in 20 multiplied by 5..50): nothing is called a change.
static void test_noise_with_outliers(void **state) {
    (void)state;
    enum { N = 200 };
    static fake f[N];
    static char names[N][16];
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "case%03d", i);
        f[i] = (fake)FAKE(names[i], "pass", 1e-3 * (1 + i % 7), 0.03, 20);
        f[i].outlier_p = 0.05;
    }
    rng_state = 99;
    write_pair("spiky", f, N, f, N);
    char a[512], b[512];
    path_of(a, sizeof a, "spiky_a.json");
    path_of(b, sizeof b, "spiky_b.json");
    resfile *fa, *fb;
    diag d;
    assert_int_equal(resfile_load(a, &fa, &d), 0);
    assert_int_equal(resfile_load(b, &fb, &d), 0);
    int wild = 0; // entries where stddev / mean would have widened the limit past 50%
    for (int i = 0; i < N; i++)
        wild += 3 * fa->entries[i].stats.cv > 0.5 || 3 * fb->entries[i].stats.cv > 0.5;
    compare_options o;
    compare_options_init(&o);
    compare_result r;
    char err[256];
    assert_int_equal(compare_files(fa, fb, &o, &r, err, sizeof err), 0);
    assert_int_equal(r.nrows, N);
    print_message("noise with outliers: %d regressions, %d improvements, %d ambiguous, %d noisy, "
                  "%d same; %d entries with an outlier-wide cv\n",
                  r.count[CMP_REGRESSION], r.count[CMP_IMPROVEMENT], r.count[CMP_AMBIGUOUS],
                  r.count[CMP_NOISY], r.count[CMP_SAME], wild);
    assert_int_equal(r.count[CMP_REGRESSION], 0);
    assert_int_equal(r.count[CMP_IMPROVEMENT], 0);
    assert_int_equal(r.count[CMP_NOISY], 0); // the robust figure still calls them
    assert_true(wild > N / 4);               // the outliers are there, and wild enough to matter
    compare_result_free(&r);
    resfile_free(fa);
    resfile_free(fb);
}

static void test_noise_is_not_a_regression(void **state) {
    (void)state;
    enum { N = 200 };
    static fake f[N];
    static char names[N][16];
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "case%03d", i);
        f[i] = (fake)FAKE(names[i], "pass", 1e-3 * (1 + i % 7), 0.05, 20);
    }
    rng_state = 42;
    char a[512], b[512];
    path_of(a, sizeof a, "noise_a.json");
    path_of(b, sizeof b, "noise_b.json");
    write_results(a, "cpu A", f, N);
    write_results(b, "cpu A", f, N);
    resfile *fa, *fb;
    diag d;
    assert_int_equal(resfile_load(a, &fa, &d), 0);
    assert_int_equal(resfile_load(b, &fb, &d), 0);
    compare_options o;
    compare_options_init(&o);
    compare_result r;
    char err[256];
    assert_int_equal(compare_files(fa, fb, &o, &r, err, sizeof err), 0);
    assert_int_equal(r.nrows, N);
    // fewer than 1% false regressions (and, with BH over 200, usually none)
    assert_true(r.count[CMP_REGRESSION] < 2);
    int raw = 0; // the unadjusted test alone would flag about alpha x N
    for (int i = 0; i < r.nrows; i++)
        raw += r.rows[i].p < o.alpha;
    print_message("noise: %d regressions, %d ambiguous, %d raw p < alpha of %d\n",
                  r.count[CMP_REGRESSION], r.count[CMP_AMBIGUOUS], raw, N);
    compare_result_free(&r);
    resfile_free(fa);
    resfile_free(fb);
}

static void test_different_machine(void **state) {
    (void)state;
    rng_state = 7;
    fake f[] = {FAKE("mlp", "pass", 1e-3, 0.02, 12)};
    char a[512], b[512];
    path_of(a, sizeof a, "m1.json");
    path_of(b, sizeof b, "m2.json");
    write_results(a, "cpu A", f, 1);
    rng_state = 7; // the same samples: only the machine differs
    write_results(b, "cpu B", f, 1);
    compare_options o;
    compare_options_init(&o);
    char *err;
    assert_int_equal(run_compare("m1.json", "m2.json", &o, NULL, &err), 2);
    assert_non_null(strstr(err, "different machines (cpu_model 'cpu A' vs 'cpu B')"));
    assert_non_null(strstr(err, "--force"));
    assert_int_equal((int)(strchr(err, '\n') - err) + 1, (int)strlen(err)); // one line
    free(err);
    o.force = true;
    assert_int_equal(run_compare("m1.json", "m2.json", &o, NULL, &err), 0);
    assert_non_null(strstr(err, "warning: different machines"));
    free(err);
}

// One machine, fewer threads: compared (with a warning), and the slower
// run is a regression, not another machine.
static void test_other_threads(void **state) {
    (void)state;
    rng_state = 9;
    fake fa[] = {FAKE("mlp", "pass", 1e-3, 0.02, 12)}, fb[] = {FAKE("mlp", "pass", 1.6e-3, 0.02, 12)};
    char a[512], b[512];
    path_of(a, sizeof a, "t2.json");
    path_of(b, sizeof b, "t1.json");
    write_results(a, "cpu A", fa, 1);
    write_results(b, "cpu A", fb, 1);
    json_t *doc = json_load_file(b, 0, NULL);
    assert_non_null(doc);
    json_object_set_new(json_object_get(doc, "host"), "threads_used", json_integer(1));
    assert_int_equal(json_dump_file(doc, b, JSON_INDENT(1)), 0);
    json_decref(doc);
    compare_options o;
    compare_options_init(&o);
    char *out, *err;
    assert_int_equal(run_compare("t2.json", "t1.json", &o, &out, &err), 1);
    assert_non_null(strstr(err, "warning: run with other settings (threads_used 2 vs 1)"));
    assert_null(strstr(err, "different machines"));
    assert_non_null(strstr(out, "other settings, compared as they are: threads_used 2 vs 1"));
    assert_non_null(strstr(out, "regression"));
    free(out);
    free(err);
}

static void test_corrupt_json(void **state) {
    (void)state;
    const char *src = getenv("TCBENCH_SOURCE_DIR");
    char corrupt[4096], good[512];
    snprintf(corrupt, sizeof corrupt, "%s/tests/fixtures/corrupt.json", src ? src : ".");
    path_of(good, sizeof good, "good.json");
    rng_state = 3;
    fake f[] = {FAKE("mlp", "pass", 1e-3, 0.02, 12)};
    write_results(good, "cpu A", f, 1);
    compare_options o;
    compare_options_init(&o);
    char *ebuf = NULL;
    size_t en = 0;
    FILE *fe = open_memstream(&ebuf, &en), *fo = fopen("/dev/null", "w");
    assert_non_null(fe);
    assert_non_null(fo);
    assert_int_equal(compare_main(good, corrupt, &o, fo, fe), 2);
    fclose(fe);
    fclose(fo);
    char want[4200];
    // the second comma of line 4, column 23
    snprintf(want, sizeof want, "%s:4:23: ", corrupt);
    assert_true(strncmp(ebuf, want, strlen(want)) == 0);
    assert_int_equal((int)(strchr(ebuf, '\n') - ebuf) + 1, (int)strlen(ebuf)); // one line
    free(ebuf);
}

static void test_status_regression(void **state) {
    (void)state;
    rng_state = 5;
    fake base[] = {FAKE("mlp", "pass", 1e-3, 0.02, 12), FAKE("gpt2", "fail_to_run", 1e-3, 0.02, 0),
                   FAKE("gone", "pass", 1e-3, 0.02, 12), FAKE("few", "pass", 1e-3, 0.02, 5)};
    fake cur[] = {FAKE("mlp", "fail_accuracy", 1e-3, 0.02, 12),
                  FAKE("gpt2", "pass", 1e-3, 0.02, 12), FAKE("few", "pass", 1e-3, 0.02, 5),
                  FAKE("fresh", "pass", 1e-3, 0.02, 12)};
    char a[512], b[512];
    path_of(a, sizeof a, "st_a.json");
    path_of(b, sizeof b, "st_b.json");
    write_results(a, "cpu A", base, 4);
    write_results(b, "cpu A", cur, 4);
    compare_options o;
    compare_options_init(&o);
    o.format = CMP_JSON;
    char *out;
    assert_int_equal(run_compare("st_a.json", "st_b.json", &o, &out, NULL), 1);
    json_t *doc = json_loads(out, 0, NULL);
    assert_non_null(doc);
    assert_string_equal(json_string_value(json_object_get(doc, "result")), "fail");
    json_t *counts = json_object_get(doc, "counts");
    assert_int_equal(json_integer_value(json_object_get(counts, "regression")), 1);
    assert_int_equal(json_integer_value(json_object_get(counts, "improvement")), 1);
    assert_int_equal(json_integer_value(json_object_get(counts, "missing")), 1);
    assert_int_equal(json_integer_value(json_object_get(counts, "new")), 1);
    assert_int_equal(json_integer_value(json_object_get(counts, "insufficient")), 1);
    json_t *first = json_array_get(json_object_get(doc, "entries"), 0);
    assert_string_equal(json_string_value(json_object_get(first, "verdict")), "regression");
    assert_string_equal(json_string_value(json_object_get(first, "reason")),
                        "status pass -> fail_accuracy");
    json_decref(doc);
    free(out);
    o.format = CMP_MD;
    assert_int_equal(run_compare("st_a.json", "st_b.json", &o, &out, NULL), 1);
    assert_non_null(strstr(out, "### tcbench compare: FAIL: 1 regression"));
    assert_non_null(strstr(out, "| **regression** | t/mlp compiled"));
    free(out);
}

// Well-formed XML, as far as our writer can go wrong: every tag closes in
// order, attribute values are quoted, and text holds no raw < or stray &.
static bool xml_well_formed(const char *s, int *testcases, int *failures) {
    const char *stack[64];
    size_t lens[64];
    int depth = 0;
    *testcases = *failures = 0;
    if (strncmp(s, "<?xml ", 6) == 0)
        s = strstr(s, "?>") + 2;
    while (*s) {
        if (*s == '&') {
            const char *semi = strchr(s, ';');
            if (!semi || semi - s > 6)
                return false;
            s = semi + 1;
        } else if (*s == '<') {
            bool closing = s[1] == '/';
            const char *name = s + 1 + closing;
            size_t n = strcspn(name, " />");
            if (n == 0)
                return false;
            const char *p = name + n;
            while (*p && *p != '>' && !(p[0] == '/' && p[1] == '>')) {
                if (*p == '"') {
                    const char *q = strchr(p + 1, '"');
                    if (!q || memchr(p + 1, '<', (size_t)(q - p - 1)))
                        return false;
                    p = q + 1;
                } else if (*p == '<' || *p == '\'')
                    return false;
                else
                    p++;
            }
            if (!*p)
                return false;
            bool empty = *p == '/';
            if (closing) {
                if (depth == 0 || lens[depth - 1] != n || strncmp(stack[depth - 1], name, n))
                    return false;
                depth--;
            } else {
                if (n == 8 && !strncmp(name, "testcase", 8))
                    (*testcases)++;
                if (n == 7 && !strncmp(name, "failure", 7))
                    (*failures)++;
                if (!empty) {
                    if (depth == 64)
                        return false;
                    stack[depth] = name;
                    lens[depth++] = n;
                }
            }
            s = p + (empty ? 2 : 1);
        } else
            s++;
    }
    return depth == 0;
}

static void test_junit(void **state) {
    (void)state;
    rng_state = 11;
    fake base[] = {FAKE("<script>\"x&y", "pass", 1e-3, 0.02, 20),
                   FAKE("gpt2", "pass", 2e-3, 0.02, 20), FAKE("few", "pass", 1e-3, 0.02, 4)};
    fake cur[] = {FAKE("<script>\"x&y", "pass", 1.5e-3, 0.02, 20),
                  FAKE("gpt2", "pass", 2e-3, 0.02, 20), FAKE("few", "pass", 1e-3, 0.02, 4)};
    char a[512], b[512];
    path_of(a, sizeof a, "j_a.json");
    path_of(b, sizeof b, "j_b.json");
    write_results(a, "cpu A", base, 3);
    write_results(b, "cpu A", cur, 3);
    compare_options o;
    compare_options_init(&o);
    o.format = CMP_JUNIT;
    char *out;
    assert_int_equal(run_compare("j_a.json", "j_b.json", &o, &out, NULL), 1);
    int cases, failures;
    assert_true(xml_well_formed(out, &cases, &failures));
    assert_int_equal(cases, 3);
    assert_int_equal(failures, 1);
    assert_non_null(strstr(out, "name=\"&lt;script&gt;&quot;x&amp;y/compiled/fp32/infer/cpu/"
                                "batch:2\""));
    assert_non_null(strstr(out, "<skipped message=\"insufficient: "));
    assert_null(strstr(out, "<script"));
    // the checker itself refuses what is broken
    int c, f;
    assert_false(xml_well_formed("<a><b></a></b>", &c, &f));
    assert_false(xml_well_formed("<a x=\"1\">x < y</a>", &c, &f));
    assert_false(xml_well_formed("<a>&script</a>", &c, &f));
    free(out);
}

// A file of one entry, "mlp" with twelve samples of 1 ms but samples_s[k]
// set to v.
static void write_one_sample(const char *name, int k, double v) {
    json_t *s = json_array();
    for (int i = 0; i < 12; i++)
        json_array_append_new(s, json_real(i == k ? v : 1e-3));
    json_t *c = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:s, s:o}", "suite", "t", "name",
                          "mlp", "mode", "compiled", "precision", "fp32", "workload", "infer",
                          "device", "cpu", "batch", 2, "status", "pass", "samples_s", s);
    json_t *doc = json_pack("{s:i, s:{s:s, s:i, s:i}, s:[o]}", "schema_version", 1, "host",
                            "cpu_model", "cpu A", "cores", 2, "threads_used", 2, "cases", c);
    assert_non_null(doc);
    char path[512];
    path_of(path, sizeof path, name);
    assert_int_equal(json_dump_file(doc, path, JSON_INDENT(1)), 0);
    json_decref(doc);
}

// Every sample at 1e200 s gave `same` and 1e308 s `ambiguous`, exit 0: a
// file holding a sample that is no plausible time is refused, exit 2, one
// line naming the file and the entry, on either side.
static void test_absurd_samples(void **state) {
    (void)state;
    static const double bad[] = {1e200, 1e308, -1, 0};
    static const char *const shown[] = {"1e+200", "1e+308", "-1", "0"};
    write_one_sample("sane.json", -1, 0);
    compare_options o;
    compare_options_init(&o);
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
        write_one_sample("absurd.json", 3, bad[b]);
        for (int side = 0; side < 2; side++) {
            char *err, want[200];
            int rc = side ? run_compare("absurd.json", "sane.json", &o, NULL, &err)
                          : run_compare("sane.json", "absurd.json", &o, NULL, &err);
            assert_int_equal(rc, 2);
            snprintf(want, sizeof want,
                     "/absurd.json: cases[0] (t/mlp compiled fp32 infer cpu batch 2) is invalid: "
                     "samples_s[3] = %s s: not a plausible time",
                     shown[b]);
            assert_non_null(strstr(err, want));
            assert_int_equal((int)(strchr(err, '\n') - err) + 1, (int)strlen(err)); // one line
            free(err);
        }
    }
    char *out;
    assert_int_equal(run_compare("sane.json", "sane.json", &o, &out, NULL), 0);
    free(out);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mann_whitney),
        cmocka_unit_test(test_bh),
        cmocka_unit_test(test_clear_regression),
        cmocka_unit_test(test_outlier_in_baseline),
        cmocka_unit_test(test_noise_is_not_a_regression),
        cmocka_unit_test(test_dispersed_is_noisy),
        cmocka_unit_test(test_unstable_is_noisy),
        cmocka_unit_test(test_study_statuses),
        cmocka_unit_test(test_process_spread),
        cmocka_unit_test(test_real_regression),
        cmocka_unit_test(test_noise_with_outliers),
        cmocka_unit_test(test_different_machine),
        cmocka_unit_test(test_other_threads),
        cmocka_unit_test(test_corrupt_json),
        cmocka_unit_test(test_status_regression),
        cmocka_unit_test(test_junit),
        cmocka_unit_test(test_absurd_samples),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
