// tcbench report on the hand-made fixture (tests/fixtures/report_fixture.json):
// the executive summary's numbers against values computed here from the
// JSON itself (unstable entries and a sweep's other batches left out of the
// geomeans, the headline over the models in both precisions), the CSV's
// columns, blanks and quoting, compile break-even, the pass-rate chart with
// a precision at 0%, failed and unstable entries marked in the per-model
// charts, the kill switches, escaping of a model named <script>"x in HTML
// and in the gnuplot scripts, the run without gnuplot, an older file
// without stability, the Google Benchmark export's errors, and calibrate's
// one calibration per thread count. The reader: a sample that is no
// plausible time makes its entry invalid, a directory or FIFO is refused by
// name, a journal with a re-measured case and a cut line reads, and the
// identity index finds what was put. jscan finds values by key and index
// past strings that hold quotes and braces, and never reads past the text;
// a plan file is told from a results file by its kind.
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
#include <sys/stat.h>
#include <unistd.h>

#include "reports/escape.h"
#include "reports/export.h"
#include "reports/jscan.h"
#include "reports/planfile.h"
#include "reports/report.h"
#include "reports/runtable.h"

static char fixture[4096], outdir[256];

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s)
        s[n] = '\0';
    fclose(f);
    return s;
}

static char *out_file(const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", outdir, name);
    return slurp(path);
}

// The line of `table` that starts with `row` in the section under `heading`.
static void expect_row(const char *doc, const char *heading, const char *row) {
    const char *h = strstr(doc, heading);
    if (!h) {
        print_error("no heading '%s' in summary.md\n", heading);
        fail();
    }
    const char *end = strstr(h + strlen(heading), "\n#");
    const char *r = strstr(h, row);
    if (!r || (end && r > end)) {
        print_error("under '%s' expected the line '%s'\n", heading, row);
        fail();
    }
}

static const char *jstr(json_t *c, const char *key) {
    const char *v = json_string_value(json_object_get(c, key));
    return v ? v : "";
}

// Whether a case counts in the dashboards: at its suite's batch (a sweep's
// other batches do not), as the fixture records suite_batch.
static bool at_suite_batch(json_t *c) {
    return json_integer_value(json_object_get(c, "batch")) ==
           json_integer_value(json_object_get(c, "suite_batch"));
}

static bool unstable(json_t *c) {
    return json_is_true(json_object_get(json_object_get(c, "stability"), "unstable"));
}

// The fixture's own figures for one compiled group, computed from the JSON.
typedef struct expect {
    int passed, total, unstable;
    double geomean, compile;
} expect;

static expect from_json(json_t *doc, const char *suite, const char *prec, const char *wl) {
    expect x = {0};
    double logs = 0, comp = 0;
    int nc = 0, ng = 0;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(doc, "cases"), i, c) {
        if (strcmp(jstr(c, "mode"), "compiled") || (suite && strcmp(jstr(c, "suite"), suite)) ||
            strcmp(jstr(c, "precision"), prec) || strcmp(jstr(c, "workload"), wl) ||
            !at_suite_batch(c))
            continue;
        x.total++;
        if (strcmp(jstr(c, "status"), "pass"))
            continue;
        x.passed++;
        comp += json_number_value(json_object_get(json_object_get(c, "compile"), "cold_s"));
        nc++;
        if (unstable(c)) {
            x.unstable++;
            continue;
        }
        logs += log(json_number_value(json_object_get(json_object_get(c, "speedup"), "median")));
        ng++;
    }
    x.geomean = ng ? exp(logs / ng) : NAN;
    x.compile = nc ? comp / nc : NAN;
    return x;
}

// The headline's figures: fp32 and AMP geomeans over the models in both.
static void headline_json(json_t *doc, const char *wl, double *f, double *a, int *n) {
    double lf = 0, la = 0;
    *n = 0;
    size_t i, k;
    json_t *c, *d;
    json_t *cases = json_object_get(doc, "cases");
    json_array_foreach(cases, i, c) {
        if (strcmp(jstr(c, "mode"), "compiled") || strcmp(jstr(c, "precision"), "fp32") ||
            strcmp(jstr(c, "workload"), wl) || strcmp(jstr(c, "status"), "pass") || unstable(c) ||
            !at_suite_batch(c))
            continue;
        json_array_foreach(cases, k, d) {
            if (strcmp(jstr(d, "mode"), "compiled") || strcmp(jstr(d, "precision"), "amp") ||
                strcmp(jstr(d, "workload"), wl) || strcmp(jstr(d, "suite"), jstr(c, "suite")) ||
                strcmp(jstr(d, "name"), jstr(c, "name")) ||
                json_integer_value(json_object_get(d, "batch")) !=
                    json_integer_value(json_object_get(c, "batch")) ||
                strcmp(jstr(d, "status"), "pass") || unstable(d))
                continue;
            lf += log(json_number_value(json_object_get(json_object_get(c, "speedup"), "median")));
            la += log(json_number_value(json_object_get(json_object_get(d, "speedup"), "median")));
            (*n)++;
        }
    }
    *f = *n ? exp(lf / *n) : NAN;
    *a = *n ? exp(la / *n) : NAN;
}

static json_t *fixture_json(void) {
    char *text = slurp(fixture);
    json_t *doc = text ? json_loads(text, 0, NULL) : NULL;
    free(text);
    return doc;
}

// "1.23x", or blank for NAN, as the tables print it.
static void fmt_x(char *buf, size_t cap, double v) {
    if (isfinite(v))
        snprintf(buf, cap, "%.2fx", v);
    else
        buf[0] = '\0';
}

static int setup(void **state) {
    (void)state;
    const char *src = getenv("TCBENCH_SOURCE_DIR");
    snprintf(fixture, sizeof fixture, "%s/tests/fixtures/report_fixture.json", src ? src : ".");
    const char *t = getenv("TMPDIR");
    snprintf(outdir, sizeof outdir, "%s/tcbench-test-report-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(outdir))
        return -1;
    resfile *f;
    diag d;
    if (resfile_load(fixture, &f, &d) < 0) {
        diag_print(&d, stderr);
        return -1;
    }
    // a gnuplot that is not there: the tables must still be written
    char warn_path[300];
    snprintf(warn_path, sizeof warn_path, "%s/warn.txt", outdir);
    FILE *warn = fopen(warn_path, "w");
    char err[512];
    report_options o = {.outdir = outdir, .gnuplot = "tcbench-no-such-gnuplot", .warn = warn};
    int rc = warn ? report_write(&f, 1, &o, err, sizeof err) : -1;
    if (rc < 0)
        fprintf(stderr, "report_write: %s\n", err);
    if (warn)
        fclose(warn);
    resfile_free(f);
    return rc;
}

static int teardown(void **state) {
    (void)state;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", outdir);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_pass_rate(void **state) {
    (void)state;
    char b[64];
    report_pass_rate(47, 54, b, sizeof b);
    assert_string_equal(b, "87%, 47/54"); // the dashboard's own example
    report_pass_rate(48, 55, b, sizeof b);
    assert_string_equal(b, "87%, 48/55");
    report_pass_rate(34, 44, b, sizeof b);
    assert_string_equal(b, "77%, 34/44");
    report_pass_rate(1, 8, b, sizeof b); // 12.5: Python's round goes to even
    assert_string_equal(b, "12%, 1/8");
    report_pass_rate(3, 8, b, sizeof b); // 37.5 -> 38
    assert_string_equal(b, "38%, 3/8");
    report_pass_rate(0, 0, b, sizeof b);
    assert_string_equal(b, "0%, 0/0");
}

static void test_headline(void **state) {
    (void)state;
    // PyTorch 2.0: 0.75 x 51% + 0.25 x 21% = 43.5%
    assert_true(fabs(report_headline(1.51, 1.21) - 1.435) < 1e-12);
}

static void test_escapes(void **state) {
    (void)state;
    sbuf b = {0};
    esc_html(&b, "<script>\"x&'");
    assert_string_equal(b.s, "&lt;script&gt;&quot;x&amp;&#39;");
    sbuf_reset(&b);
    esc_csv(&b, "plain");
    assert_string_equal(b.s, "plain");
    sbuf_reset(&b);
    esc_csv(&b, "t5, \"large\"");
    assert_string_equal(b.s, "\"t5, \"\"large\"\"\"");
    sbuf_reset(&b);
    esc_csv(&b, "two\nlines");
    assert_string_equal(b.s, "\"two\nlines\"");
    sbuf_reset(&b);
    // single quotes: no backslash escapes, no `backquote` shell substitution
    esc_gnuplot(&b, "it's `rm` \\ \"q\"\n");
    assert_string_equal(b.s, "'it''s `rm` \\ \"q\" '");
    sbuf_reset(&b);
    esc_md(&b, "a|b <i> *c* mobilenet_v2 _x [l](u)");
    assert_string_equal(b.s, "a\\|b &lt;i&gt; \\*c\\* mobilenet_v2 \\_x [l\\](u)");
    free(b.s);
}

static const char *const suites[] = {"huggingface", "timm", "torchbench"};

static void test_summary_numbers(void **state) {
    (void)state;
    char *md = out_file("summary.md");
    assert_non_null(md);
    json_t *doc = fixture_json();
    assert_non_null(doc);
    static const char *const precs[] = {"fp32", "amp"}, *const wls[] = {"infer", "train"},
                             *const words[] = {"inference", "training"};
    for (int p = 0; p < 2; p++)
        for (int w = 0; w < 2; w++) {
            char heading[128], rate[3][32], geo[3][32], row[512];
            snprintf(heading, sizeof heading, "### compiled, %s, %s, cpu", precs[p], words[w]);
            expect x[3];
            for (int k = 0; k < 3; k++) {
                x[k] = from_json(doc, suites[k], precs[p], wls[w]);
                assert_true(x[k].total > 0);
                report_pass_rate(x[k].passed, x[k].total, rate[k], sizeof rate[k]);
                fmt_x(geo[k], sizeof geo[k], x[k].geomean);
            }
            snprintf(row, sizeof row, "| Pass rate | %s | %s | %s |", rate[0], rate[1], rate[2]);
            expect_row(md, heading, row);
            snprintf(row, sizeof row, "| Geomean speedup | %s | %s | %s |", geo[0], geo[1], geo[2]);
            expect_row(md, heading, row);
            snprintf(row, sizeof row, "| Mean compile time (s) | %.2f | %.2f | ", x[0].compile,
                     x[1].compile);
            expect_row(md, heading, row);
            snprintf(row, sizeof row, "| Passed but unstable (not in the geomean) | %d | %d | %d |",
                     x[0].unstable, x[1].unstable, x[2].unstable);
            expect_row(md, heading, row);
        }
    // the fixture's failures are listed, not averaged in
    expect_row(md, "### compiled, fp32, training, cpu",
               "- Not in the geomean: timm/vit_base (fail_to_run)");
    expect_row(md, "### compiled, amp, training, cpu",
               "- Not in the geomean: huggingface/gpt2 (fail_accuracy)");
    // a precision that ran and never passed: 0%, and no geomean
    expect_row(md, "### compiled, amp, inference, cpu",
               "| Pass rate | 100%, 4/4 | 100%, 2/2 | 0%, 0/1 |");
    // the headline over all suites: 0.75 x AMP + 0.25 x fp32 over the models in both
    for (int w = 0; w < 2; w++) {
        double f, a;
        int n;
        headline_json(doc, wls[w], &f, &a, &n);
        assert_true(n > 0);
        double h = 0.75 * a + 0.25 * f;
        char row[256];
        snprintf(row, sizeof row, "| %s | all | %d (fp32 ", words[w], n);
        expect_row(md, "## Headline", row);
        snprintf(row, sizeof row, " | %.2fx | %.2fx | %.2fx (%+.0f%%) |", f, a, h, (h - 1) * 100);
        expect_row(md, "## Headline", row);
    }
    expect_row(md, "## Headline",
               "| inference | torchbench | 0 (fp32 1, AMP 0) |  |  | needs both: no AMP |");
    // every warning the dashboard knows, from the fixture's planted cases
    assert_non_null(strstr(md, "timm/resnet50 (compiled, amp, train, cpu, batch 1): compile "
                               "time 150.0 s &gt; 120 s"));
    assert_non_null(strstr(md, "huggingface/bert (compiled, amp, infer, cpu, batch 4): memory "
                               "compression 0.85x &lt; 0.9x"));
    assert_non_null(strstr(md, "(compiled, fp32, infer, cpu, batch 1): speedup 0.9"));
    assert_non_null(strstr(md, "fail_accuracy, not passing"));
    // ablation and sweep sections exist for the fixture's fused/captured and bert batches
    assert_non_null(strstr(md, "## Ablation: what fusion and what capture buy"));
    assert_non_null(strstr(md, "| huggingface/bert | compiled | 16 |"));
    // the name is escaped for Markdown: no raw tag survives
    assert_null(strstr(md, "<script>"));
    assert_non_null(strstr(md, "&lt;script&gt;\"x"));
    json_decref(doc);
    free(md);
}

// The unstable entry (timm/resnet50 compiled AMP inference, 8.14x [0.99,
// 97.55]) is marked everywhere, named under Warnings, and in no geomean.
static void test_unstable_left_out(void **state) {
    (void)state;
    char *md = out_file("summary.md");
    assert_non_null(md);
    json_t *doc = fixture_json();
    assert_non_null(doc);
    expect t = from_json(doc, "timm", "amp", "infer");
    assert_int_equal(t.unstable, 1);
    assert_int_equal(t.passed, 2);
    char row[256];
    snprintf(row, sizeof row, "| Geomean speedup | %.2fx | %.2fx |",
             from_json(doc, "huggingface", "amp", "infer").geomean, t.geomean);
    expect_row(md, "### compiled, amp, inference, cpu", row);
    // the geomean with it would differ: the test can tell the two apart
    assert_true(fabs(t.geomean - sqrt(t.geomean * 8.14)) > 0.5);
    expect_row(md, "### compiled, amp, inference, cpu",
               "- Not in the geomean: timm/resnet50 (unstable: 95% interval 1186% of the speedup; "
               "interference: 812 involuntary context switches)");
    expect_row(md, "## Warnings",
               "- timm/resnet50 (compiled, amp, infer, cpu, batch 1): unstable (95% interval "
               "1186% of the speedup; interference: 812 involuntary context switches): left out "
               "of every geomean and the headline");
    expect_row(md, "### timm: amp, inference, cpu",
               "| resnet50 | 1 | compiled | pass | \\~8.14x [0.99, 97.55] | ");
    assert_non_null(strstr(md, "% unstable |"));
    char *html = out_file("index.html");
    assert_non_null(html);
    assert_non_null(strstr(html, "~8.14x [0.99, 97.55]"));
    free(html);
    json_decref(doc);
    free(md);
}

// bert runs at batches 1, 4 and 16 in fp32 inference (its suite's batch is
// 4): it counts once, at 4, and the other two are named.
static void test_sweep_counts_once(void **state) {
    (void)state;
    char *md = out_file("summary.md");
    assert_non_null(md);
    json_t *doc = fixture_json();
    assert_non_null(doc);
    expect hf = from_json(doc, "huggingface", "fp32", "infer");
    assert_int_equal(hf.total, 4); // 4 models, not 6 entries
    expect_row(md, "### compiled, fp32, inference, cpu",
               "- Not in the geomean: huggingface/bert b=16 (batch 16 of a sweep: the case "
               "counts at batch 4)");
    assert_non_null(strstr(md, "| huggingface/bert | compiled | 4 |"));
    assert_non_null(strstr(md, "| no: batch 1 of a sweep: the case counts at batch 4 |"));
    json_decref(doc);
    free(md);
}

static void test_kill_switches_shown(void **state) {
    (void)state;
    char *md = out_file("summary.md"), *html = out_file("index.html");
    assert_non_null(md);
    assert_non_null(html);
    // under the title, before the first section
    const char *k = strstr(md, "Kill switches in effect in "), *r = strstr(md, "## Results");
    assert_non_null(k);
    assert_true(k < r);
    assert_non_null(strstr(k, "TCBENCH_DISABLE_LAYOUTS=1"));
    assert_non_null(strstr(md, "| TCBENCH_DISABLE_LAYOUTS=1 |")); // the Results table's column
    k = strstr(html, "TCBENCH_DISABLE_LAYOUTS=1");
    r = strstr(html, ">Results<");
    assert_non_null(k);
    assert_non_null(r);
    assert_true(k < r);
    free(md);
    free(html);
}

static void test_breakeven(void **state) {
    (void)state;
    assert_true(report_breakeven(10, 0.003, 0.002) == 10000);
    assert_true(report_breakeven(1.0001, 0.003, 0.002) == 1001); // rounded up
    assert_true(isinf(report_breakeven(10, 0.002, 0.002)));      // not faster: never
    assert_true(isinf(report_breakeven(10, 0.002, 0.003)));
    assert_true(isnan(report_breakeven(NAN, 0.003, 0.002)));
    assert_true(isnan(report_breakeven(10, NAN, 0.002)));
    assert_true(isnan(report_breakeven(10, 0.003, 0)));
}

// One RFC 4180 record from *p into fields; returns the count.
static int csv_record(const char **p, char fields[][256], int max) {
    int n = 0;
    const char *s = *p;
    for (;;) {
        char *f = fields[n];
        size_t len = 0;
        if (*s == '"') {
            for (s++;; s++) {
                if (*s == '"' && s[1] == '"')
                    f[len++] = *s++;
                else if (*s == '"') {
                    s++;
                    break;
                } else if (!*s)
                    return -1;
                else
                    f[len++] = *s;
            }
        } else {
            while (*s && *s != ',' && *s != '\r' && *s != '\n')
                f[len++] = *s++;
        }
        f[len] = '\0';
        n++;
        if (*s == ',' && n < max) {
            s++;
            continue;
        }
        if (*s == '\r' && s[1] == '\n') {
            *p = s + 2;
            return n;
        }
        return -1; // every record ends with CRLF
    }
}

static void test_csv(void **state) {
    (void)state;
    char *csv = out_file("results.csv");
    assert_non_null(csv);
    static const char *const want[] = {"dev",
                                       "name",
                                       "batch_size",
                                       "speedup",
                                       "abs_latency",
                                       "compilation_latency",
                                       "compression_ratio",
                                       "eager_peak_mem",
                                       "dynamo_peak_mem",
                                       "suite",
                                       "model",
                                       "mode",
                                       "precision",
                                       "workload",
                                       "status",
                                       "ci95_lo",
                                       "ci95_hi",
                                       "kernels",
                                       "eager_latency",
                                       "warm_compilation_latency",
                                       "samples",
                                       "message",
                                       "noise",
                                       "unstable",
                                       "unstable_reasons",
                                       "breakeven_steps",
                                       "in_geomean",
                                       "study"};
    int ncol = (int)(sizeof want / sizeof want[0]);
    static char f[32][256];
    const char *p = csv;
    assert_int_equal(csv_record(&p, f, 32), ncol);
    for (int i = 0; i < ncol; i++)
        assert_string_equal(f[i], want[i]);
    int rows = 0;
    bool script = false, t5 = false, failed = false, noisy = false, swept = false, timed = false;
    while (*p) {
        assert_int_equal(csv_record(&p, f, 32), ncol);
        rows++;
        bool compiled = !strcmp(f[11], "compiled");
        if (!strcmp(f[1], "<script>\"x") && compiled && !strcmp(f[12], "fp32") &&
            !strcmp(f[13], "infer")) {
            script = true;
            assert_string_equal(f[14], "pass");
            assert_true(atof(f[3]) < 0.95);      // the fixture's slow one
            assert_string_equal(f[25], "never"); // slower than eager: never paid back
        }
        if (!strcmp(f[1], "t5, \"large\""))
            t5 = true;
        if (!strcmp(f[1], "vit_base") && !strcmp(f[14], "fail_to_run")) {
            failed = true;
            // nothing measured: blank, never 0
            for (int k = 3; k <= 6; k++)
                assert_string_equal(f[k], "");
            assert_string_equal(f[17], "");  // kernels
            assert_string_equal(f[19], "");  // warm compile
            assert_string_equal(f[20], "0"); // samples: a count, truly 0
            assert_string_equal(f[22], "");  // noise
            assert_string_equal(f[25], "");  // break-even
            assert_string_equal(f[26], "false");
        }
        if (!strcmp(f[1], "resnet50") && compiled && !strcmp(f[12], "amp") &&
            !strcmp(f[13], "infer")) {
            noisy = true;
            assert_string_equal(f[23], "true");
            assert_non_null(strstr(f[24], "95% interval 1186% of the speedup"));
            assert_string_equal(f[26], "false");
        }
        if (!strcmp(f[1], "bert") && compiled && !strcmp(f[12], "fp32") &&
            !strcmp(f[13], "infer")) {
            swept = true;
            assert_string_equal(f[26], atoi(f[2]) == 4 ? "true" : "false");
        }
        if (!strcmp(f[11], "eager")) {
            assert_string_equal(f[3], "");  // eager has no speedup
            assert_string_equal(f[26], ""); // nor a place in a geomean
        }
        if (compiled && !strcmp(f[14], "pass") && strcmp(f[25], "never") != 0 && *f[5]) {
            // break-even from the row's own figures: cold s / (eager ms - ms) x 1000
            double want = ceil(atof(f[5]) / ((atof(f[18]) - atof(f[4])) / 1e3));
            assert_true(fabs(atof(f[25]) - want) <= 1 + 1e-4 * want);
            timed = true;
        }
    }
    assert_true(script && t5 && failed && noisy && swept && timed);
    char *text = slurp(fixture);
    json_t *doc = text ? json_loads(text, 0, NULL) : NULL;
    assert_non_null(doc);
    assert_int_equal(rows, (int)json_array_size(json_object_get(doc, "cases"))); // one per entry
    json_decref(doc);
    free(text);
    assert_non_null(strstr(csv, "\"<script>\"\"x\""));
    assert_non_null(strstr(csv, "\"t5, \"\"large\"\"\""));
    free(csv);
}

static void test_html_escaped(void **state) {
    (void)state;
    char *html = out_file("index.html");
    assert_non_null(html);
    assert_non_null(strstr(html, "&lt;script&gt;&quot;x"));
    assert_null(strstr(html, "<script"));
    assert_null(strstr(html, "\"x<"));
    assert_non_null(strstr(html, "t5, &quot;large&quot;"));
    // charts were not drawn (no gnuplot): the page says so and points at the scripts
    assert_non_null(strstr(html, "not drawn"));
    free(html);
}

static void test_gnuplot_script(void **state) {
    (void)state;
    char *gp = out_file("charts/speedup-compiled-fp32-infer-cpu.gp");
    char *dat = out_file("charts/speedup-compiled-fp32-infer-cpu.dat");
    assert_non_null(gp);
    assert_non_null(dat);
    // single-quoted, the double quote inside left as it is
    assert_non_null(strstr(gp, "'huggingface/<script>\"x'"));
    assert_non_null(strstr(gp, "'huggingface/t5, \"large\"'"));
    assert_null(strstr(gp, "\"huggingface/"));
    assert_non_null(strstr(gp, "noenhanced"));
    // the data holds numbers only
    assert_null(strstr(dat, "script"));
    free(gp);
    free(dat);
    char *geo = out_file("charts/geomean.gp");
    assert_non_null(geo); // the study's chart
    free(geo);
    char *roof = out_file("charts/roofline.dat"); // the fixture has a calibration
    assert_non_null(roof);
    free(roof);
    char *sweep = out_file("charts/sweep-compiled-fp32-infer-cpu.gp");
    assert_non_null(sweep);
    free(sweep);
}

// The .dat row of a chart that starts with "INDEX ": its numbers, as text.
static bool dat_row(const char *dat, int index, char *out, size_t cap) {
    char key[16];
    snprintf(key, sizeof key, "\n%d ", index);
    const char *r = strstr(dat, key);
    if (!r)
        return false;
    r++;
    size_t n = strcspn(r, "\n");
    snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), r);
    return true;
}

// The pass-rate chart: per suite, for each workload x precision, the value
// (the rounded percentage), state, passed and total; torchbench's AMP ran
// and never passed: 0%, 0/1, a label and no bar. The geomean chart keeps
// that slot too, labelled "none passed".
static void test_passrate_chart(void **state) {
    (void)state;
    char *gp = out_file("charts/passrate.gp"), *dat = out_file("charts/passrate.dat");
    char *geo = out_file("charts/geomean.dat");
    assert_non_null(gp);
    assert_non_null(dat);
    assert_non_null(geo);
    json_t *doc = fixture_json();
    assert_non_null(doc);
    static const char *const wls[] = {"infer", "train"}, *const precs[] = {"fp32", "amp"};
    for (int k = 0; k < 3; k++) {
        char row[512], want[512];
        assert_true(dat_row(dat, k, row, sizeof row));
        int n = snprintf(want, sizeof want, "%d", k);
        for (int w = 0; w < 2; w++)
            for (int p = 0; p < 2; p++) {
                expect x = from_json(doc, suites[k], precs[p], wls[w]);
                n += snprintf(want + n, sizeof want - (size_t)n, " %.6g 1 %d %d",
                              rint(100.0 * x.passed / x.total), x.passed, x.total);
            }
        assert_string_equal(row, want);
    }
    char row[512];
    assert_true(dat_row(dat, 2, row, sizeof row));
    assert_non_null(strstr(row, " 0 1 0 1")); // torchbench AMP: 0%, 0/1
    assert_true(dat_row(geo, 2, row, sizeof row));
    assert_non_null(strstr(row, " 0 2 0 1")); // state 2: none passed, 0 of 1
    // bars only above 0%, a label on every measured slot: "87%, 47/54"
    assert_non_null(strstr(gp, "column(2) > 0 ? column(2) : 1/0"));
    assert_non_null(strstr(gp, "sprintf('%d%%, %d/%d'"));
    json_decref(doc);
    free(gp);
    free(dat);
    free(geo);
}

// The per-model charts keep every entry: failed ones as labelled empty
// slots, the unstable one hatched, and the axis clipped at 1.5 x the
// largest stable median, the clipped bar marked and labelled.
static void test_model_charts_mark(void **state) {
    (void)state;
    char *gp = out_file("charts/speedup-compiled-amp-infer-cpu.gp");
    char *dat = out_file("charts/speedup-compiled-amp-infer-cpu.dat");
    char *train = out_file("charts/speedup-compiled-fp32-train-cpu.gp");
    char *be = out_file("charts/breakeven-compiled-fp32-infer-cpu.gp");
    char *comp = out_file("charts/compile-compiled-fp32-train-cpu.gp");
    assert_non_null(gp);
    assert_non_null(dat);
    assert_non_null(train);
    assert_non_null(be);
    assert_non_null(comp);
    assert_non_null(strstr(gp, "'fail_accuracy' at first 6, graph 0.02")); // dlrm, last slot
    assert_non_null(strstr(gp, "(6 of 7 entries have one)"));
    assert_non_null(strstr(gp, "fs pattern 4")); // the unstable bar
    assert_non_null(strstr(gp, "'unstable (not in the geomeans)'"));
    assert_non_null(strstr(gp, "'8.14x [0.99, 97.5]'"));      // the clipped bar's label
    assert_non_null(strstr(train, "'fail_to_run' at first")); // vit_base, no speedup
    assert_non_null(strstr(comp, "'fail_to_run' at first"));  // nor a compile time
    assert_non_null(strstr(be, "'never' at first"));          // <script>"x, slower
    // the axis: 1.5 x the largest stable median (huggingface/bert's), not 8.14 x 1.5
    json_t *doc = fixture_json();
    double med = 0;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(doc, "cases"), i, c) {
        if (!strcmp(jstr(c, "mode"), "compiled") && !strcmp(jstr(c, "precision"), "amp") &&
            !strcmp(jstr(c, "workload"), "infer") && !strcmp(jstr(c, "status"), "pass") &&
            !unstable(c))
            med = fmax(med,
                       json_number_value(json_object_get(json_object_get(c, "speedup"), "median")));
    }
    char want[64];
    snprintf(want, sizeof want, "set yrange [0:%.6g]", 1.5 * med);
    assert_non_null(strstr(gp, want));
    // the unstable bar (slot 5) stops at the axis, with the clip marker there
    char row[256], clip[64];
    assert_true(dat_row(dat, 5, row, sizeof row));
    snprintf(clip, sizeof clip, " %.6g", 1.5 * med);
    assert_non_null(strstr(row, clip));
    assert_null(strstr(row, "8.14"));
    json_decref(doc);
    free(gp);
    free(dat);
    free(train);
    free(be);
    free(comp);
}

// Google Benchmark's JSON: a failed entry is an error with its message, the
// unstable one carries a label, and load_avg comes from the host.
static void test_gbench_errors(void **state) {
    (void)state;
    resfile *f;
    diag d;
    assert_int_equal(resfile_load(fixture, &f, &d), 0);
    char path[400], err[256];
    snprintf(path, sizeof path, "%s/gbench.json", outdir);
    FILE *out = fopen(path, "w");
    assert_non_null(out);
    assert_int_equal(export_gbench(f, out, err, sizeof err), 0);
    fclose(out);
    resfile_free(f);
    json_t *doc = json_load_file(path, 0, NULL);
    assert_non_null(doc);
    json_t *load = json_object_get(json_object_get(doc, "context"), "load_avg");
    assert_int_equal(json_array_size(load), 1);
    assert_true(fabs(json_number_value(json_array_get(load, 0)) - 0.42) < 1e-12);
    bool failed = false, accuracy = false, label = false;
    size_t i;
    json_t *b;
    json_array_foreach(json_object_get(doc, "benchmarks"), i, b) {
        const char *name = jstr(b, "name");
        if (!strcmp(name, "timm/vit_base/compiled/fp32/train/batch:1")) {
            failed = true; // no samples: one run, the error and its message
            assert_true(json_is_true(json_object_get(b, "error_occurred")));
            assert_string_equal(jstr(b, "error_message"),
                                "fail_to_run: the C compiler 'cc' failed (exit 1): fixture");
            assert_int_equal(json_integer_value(json_object_get(b, "iterations")), 0);
        }
        if (strstr(name, "torchbench/dlrm/compiled/amp/infer/batch:1")) {
            accuracy = true; // samples kept, each an error
            assert_true(json_is_true(json_object_get(b, "error_occurred")));
            assert_non_null(strstr(jstr(b, "error_message"), "fail_accuracy: failed: output 0"));
        }
        if (!strcmp(name, "timm/resnet50/compiled/amp/infer/batch:1")) {
            label = true;
            assert_non_null(strstr(jstr(b, "label"), "unstable: 95% interval"));
            assert_null(json_object_get(b, "error_occurred"));
        }
    }
    assert_true(failed && accuracy && label);
    json_decref(doc);
}

// doc (taken) written to NAME under the output directory and loaded back.
static resfile *dump_and_load(json_t *doc, const char *name) {
    char path[400];
    snprintf(path, sizeof path, "%s/%s", outdir, name);
    assert_int_equal(json_dump_file(doc, path, JSON_INDENT(1)), 0);
    json_decref(doc);
    resfile *f;
    diag d;
    assert_int_equal(resfile_load(path, &f, &d), 0);
    return f;
}

// The report of n files into SUB under the output directory, its warning dropped.
static void report_files(resfile *const *f, int n, const char *sub) {
    char dir[400], err[512];
    snprintf(dir, sizeof dir, "%s/%s", outdir, sub);
    FILE *warn = fopen("/dev/null", "w");
    assert_non_null(warn);
    report_options o = {.outdir = dir, .gnuplot = "tcbench-no-such-gnuplot", .warn = warn};
    assert_int_equal(report_write(f, n, &o, err, sizeof err), 0);
    fclose(warn);
}

static void report_quiet(resfile *f, const char *sub) { report_files(&f, 1, sub); }

// A results file of before stability and kill switches were recorded loads
// as stable with none disabled; a sweep without suite_batch counts at its
// smallest batch.
// The study's subset: huggingface's bert, gpt2 and t5 are marked `study`,
// t5 ends model_fail_to_load and <script>"x eager_fail_to_run in every
// entry. Each huggingface cell gives the subset's figure, then all rows';
// both count the failures; the other suites, without study cases, give one.
static void test_study_subset(void **state) {
    (void)state;
    json_t *doc = fixture_json(), *subset = fixture_json();
    assert_non_null(doc);
    assert_non_null(subset);
    json_t *docs[] = {doc, subset};
    for (int k = 0; k < 2; k++) {
        size_t i;
        json_t *c;
        json_array_foreach(json_object_get(docs[k], "cases"), i, c) {
            if (strcmp(jstr(c, "suite"), "huggingface"))
                continue;
            const char *n = jstr(c, "name");
            bool study = !strcmp(n, "bert") || !strcmp(n, "gpt2") || !strcmp(n, "t5, \"large\"");
            json_object_set_new(c, "study", json_boolean(study));
            if (!strncmp(n, "t5", 2))
                json_object_set_new(c, "status", json_string("model_fail_to_load"));
            if (!strncmp(n, "<script>", 8))
                json_object_set_new(c, "status", json_string("eager_fail_to_run"));
        }
    }
    // the subset alone: the other suites' and the unmarked cases left out
    json_t *cases = json_object_get(subset, "cases");
    for (size_t i = json_array_size(cases); i-- > 0;)
        if (!json_is_true(json_object_get(json_array_get(cases, i), "study")))
            json_array_remove(cases, i);
    expect all = from_json(doc, "huggingface", "fp32", "infer");
    expect st = from_json(subset, "huggingface", "fp32", "infer");
    assert_int_equal(all.total, 4);
    assert_int_equal(all.passed, 2);
    assert_int_equal(st.total, 3);
    expect timm = from_json(doc, "timm", "fp32", "infer");
    expect sat = from_json(subset, "huggingface", "amp", "train");
    assert_true(sat.total > 0);
    json_decref(subset);
    resfile *f = dump_and_load(doc, "study.json");
    report_quiet(f, "study");
    resfile_free(f);
    char *md = out_file("study/summary.md");
    assert_non_null(md);
    char a[32], s[32], t[32], row[400], ga[32], gs[32];
    report_pass_rate(all.passed, all.total, a, sizeof a);
    report_pass_rate(st.passed, st.total, s, sizeof s);
    report_pass_rate(timm.passed, timm.total, t, sizeof t);
    snprintf(row, sizeof row, "| Pass rate | %s (study) \u00b7 %s (all) | %s |", s, a, t);
    expect_row(md, "### compiled, fp32, inference, cpu", row);
    assert_string_equal(s, "67%, 2/3");
    fmt_x(ga, sizeof ga, all.geomean);
    fmt_x(gs, sizeof gs, st.geomean);
    snprintf(row, sizeof row, "| Geomean speedup | %s (study) \u00b7 %s (all) |", gs, ga);
    expect_row(md, "### compiled, fp32, inference, cpu", row);
    // the failures are named, not dropped
    expect_row(md, "### compiled, fp32, inference, cpu",
               "- Not in the geomean: huggingface/t5, \"large\" (model_fail_to_load)");
    assert_non_null(strstr(md, "(eager_fail_to_run)"));
    // ours beside the study's A100 figures: only huggingface has study cases
    char sp[32], sg[32];
    report_pass_rate(sat.passed, sat.total, sp, sizeof sp);
    fmt_x(sg, sizeof sg, sat.geomean);
    snprintf(row, sizeof row, "| huggingface | %s | 77%%, 34/44 | %s | 1.60x |", sp,
             *sg ? sg : "none");
    expect_row(md, "### AMP training per suite (cpu)", row);
    const char *per = strstr(md, "### AMP training per suite (cpu)");
    const char *next = per ? strstr(per, "\n## ") : NULL;
    assert_non_null(next);
    const char *timm_row = strstr(per, "| timm |");
    assert_true(!timm_row || timm_row > next); // no study cases: no row
    expect_row(md, "### Training headline (cpu)", "| AMP geomean |");
    expect_row(md, "### Training headline (cpu)",
               "| 0.75 x AMP + 0.25 x fp32 | ");
    assert_non_null(strstr(md, "1.435x (the release: 43% faster)"));
    free(md);
    char *csv = out_file("study/results.csv");
    assert_non_null(csv);
    assert_non_null(strstr(csv, ",in_geomean,study\r\n"));
    free(csv);
}

// --- side by side with PyTorch ------------------------------------------------
// tests/fixtures/side_tcbench.json (eager and compiled: mlp, gpt2, resnet,
// bert) and side_torch.json (torch-eager and torch-compile: the same but
// bert), reported together. The figures are recomputed here from the
// samples of both files.

static double samples_median(json_t *c) {
    json_t *a = json_object_get(c, "samples_s");
    size_t n = json_array_size(a);
    double v[64];
    assert_true(n > 0 && n <= 64);
    for (size_t i = 0; i < n; i++) { // insertion sort
        double x = json_number_value(json_array_get(a, i));
        size_t k = i;
        for (; k > 0 && v[k - 1] > x; k--)
            v[k] = v[k - 1];
        v[k] = x;
    }
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The case of doc with this name and mode, or NULL.
static json_t *case_of(json_t *doc, const char *name, const char *mode) {
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(doc, "cases"), i, c) {
        if (!strcmp(jstr(c, "name"), name) && !strcmp(jstr(c, "mode"), mode))
            return c;
    }
    return NULL;
}

static json_t *side_json(const char *name) {
    char path[4200];
    const char *src = getenv("TCBENCH_SOURCE_DIR");
    snprintf(path, sizeof path, "%s/tests/fixtures/%s", src ? src : ".", name);
    char *text = slurp(path);
    json_t *doc = text ? json_loads(text, 0, NULL) : NULL;
    free(text);
    assert_non_null(doc);
    return doc;
}

// The side-by-side figures from the two files: speedup geomeans (every
// model of each), and over the models of both the time ratios and the mean
// compile times.
typedef struct side_expect {
    double ours, theirs, eager, compiled, cold[2];
    int nours, ntheirs, nboth;
} side_expect;

static side_expect side_from_json(json_t *tc, json_t *th) {
    side_expect x = {0};
    double lo = 0, lt = 0, le = 0, lc = 0;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(tc, "cases"), i, c) {
        if (strcmp(jstr(c, "mode"), "compiled"))
            continue;
        lo += log(json_number_value(json_object_get(json_object_get(c, "speedup"), "median")));
        x.nours++;
        json_t *te = case_of(th, jstr(c, "name"), "torch-eager"),
               *tcm = case_of(th, jstr(c, "name"), "torch-compile"),
               *e = case_of(tc, jstr(c, "name"), "eager");
        if (!te || !tcm)
            continue;
        lt += log(json_number_value(json_object_get(json_object_get(tcm, "speedup"), "median")));
        x.ntheirs++;
        le += log(samples_median(e) / samples_median(te));
        lc += log(samples_median(c) / samples_median(tcm));
        x.cold[0] += json_number_value(json_object_get(json_object_get(c, "compile"), "cold_s"));
        x.cold[1] += json_number_value(json_object_get(json_object_get(tcm, "compile"), "cold_s"));
        x.nboth++;
    }
    x.ours = exp(lo / x.nours);
    x.theirs = exp(lt / x.ntheirs);
    x.eager = exp(le / x.nboth);
    x.compiled = exp(lc / x.nboth);
    x.cold[0] /= x.nboth;
    x.cold[1] /= x.nboth;
    return x;
}

// The two reported together: the summary's section with the figures above
// and the models each covers, torch-compile gated against torch-eager (its
// own executive table and break-even) and torch-eager counted nowhere as
// a compiled mode, results.csv's time_vs_torch, the two charts, and
// index.html. The modes: read, never run.
static void test_side_by_side(void **state) {
    (void)state;
    json_t *tc = side_json("side_tcbench.json"), *th = side_json("side_torch.json");
    side_expect x = side_from_json(tc, th);
    // the hand-picked values, so that a wrong pairing cannot pass unseen
    assert_true(fabs(x.ours - 4) < 1e-9 && fabs(x.theirs - 2) < 1e-9);
    assert_true(fabs(x.eager - 0.5) < 1e-9 && fabs(x.compiled - 0.25) < 1e-9);
    assert_int_equal(x.nours, 4);
    assert_int_equal(x.nboth, 3);
    char path[2][4200];
    resfile *f[2];
    diag d;
    const char *src = getenv("TCBENCH_SOURCE_DIR");
    for (int k = 0; k < 2; k++) {
        snprintf(path[k], sizeof path[k], "%s/tests/fixtures/%s", src ? src : ".",
                 k ? "side_torch.json" : "side_tcbench.json");
        assert_int_equal(resfile_load(path[k], &f[k], &d), 0);
    }
    report_files(f, 2, "side");
    char *md = out_file("side/summary.md");
    assert_non_null(md);
    char row[512];
    snprintf(row, sizeof row,
             "| smoke: fp32, inference, cpu | %.2fx (%d models) | %.2fx (%d models) | %.2fx (%d "
             "models) | %.2fx (%d models) | %.2f (%d models) | %.2f (%d models) |",
             x.ours, x.nours, x.theirs, x.ntheirs, x.eager, x.nboth, x.compiled, x.nboth, x.cold[0],
             x.nboth, x.cold[1], x.nboth);
    expect_row(md, "## Side by side with PyTorch", row);
    expect_row(md, "## Side by side with PyTorch", "(time; lower is better) |");
    expect_row(md, "## Side by side with PyTorch",
               "side_torch.json: PyTorch 2.15.0, torch.compile mode max-autotune-no-cudagraphs, "
               "amp as fp16.");
    // tcbench's executive table counts its own four, PyTorch's its three
    expect_row(md, "### compiled, fp32, inference, cpu", "| Pass rate | 100%, 4/4 |");
    expect_row(md, "### torch-compile, fp32, inference, cpu", "| Pass rate | 100%, 3/3 |");
    assert_null(strstr(md, "### torch-eager"));
    // torch-compile's break-even is over torch-eager: 10 s / (2 ms - 1 ms)
    json_t *mlp = case_of(th, "mlp", "torch-compile");
    double be = ceil(json_number_value(json_object_get(json_object_get(mlp, "compile"), "cold_s")) /
                     (samples_median(case_of(th, "mlp", "torch-eager")) - samples_median(mlp)));
    snprintf(row, sizeof row,
             "| mlp | 2 | torch-compile | pass | 2.00x [1.96, 2.04] | 1.0000 | "
             "0.0%% | 10.00 /  | %.0f |",
             be);
    expect_row(md, "### smoke: fp32, inference, cpu", row);
    free(md);
    // results.csv: the last column, tcbench's time over its peer's
    char *csv = out_file("side/results.csv");
    assert_non_null(csv);
    assert_non_null(strstr(csv, ",in_geomean,study,time_vs_torch\r\n"));
    static const char *const names[] = {"mlp", "gpt2", "resnet"}, *const modes[] = {"eager",
                                                                                    "compiled"};
    for (int n = 0; n < 3; n++)
        for (int m = 0; m < 2; m++) {
            double r = samples_median(case_of(tc, names[n], modes[m])) /
                       samples_median(case_of(th, names[n], m ? "torch-compile" : "torch-eager"));
            snprintf(row, sizeof row, ",smoke,%s,%s,fp32,infer,", names[n], modes[m]);
            const char *at = strstr(csv, row), *end = at ? strstr(at, "\r\n") : NULL;
            assert_non_null(end);
            char want[64];
            snprintf(want, sizeof want, ",%.6g\r\n", r);
            assert_memory_equal(end + 2 - strlen(want), want, strlen(want));
        }
    const char *bert = strstr(csv, ",smoke,bert,compiled,");
    assert_non_null(bert);
    assert_memory_equal(strstr(bert, "\r\n") - 7, ",false,", 7); // no peer: blank
    free(csv);
    // the charts: both speedups and both ratios per model; bert has no PyTorch side
    static const char *const files[][2] = {
        {"torch-speedup-smoke-fp32-infer-cpu.gp", "('bert' 0, 'gpt2' 1, 'mlp' 2, 'resnet' 3)"},
        {"torch-speedup-smoke-fp32-infer-cpu.gp", "'torch.compile / PyTorch eager'"},
        {"torch-speedup-smoke-fp32-infer-cpu.dat", "\n0 4 ?\n1 4 2\n2 2 2\n3 8 2\n"},
        {"torch-time-smoke-fp32-infer-cpu.dat", "\n0 0.5 0.25\n1 0.5 0.5\n2 0.5 0.125\n"},
        {"../index.html", "Side by side with PyTorch"},
        {"../index.html", "torch-time-smoke-fp32-infer-cpu"},
    };
    for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
        snprintf(row, sizeof row, "side/charts/%s", files[k][0]);
        char *text = out_file(row);
        assert_non_null(text);
        assert_non_null(strstr(text, files[k][1]));
        free(text);
    }
    // tcbench's files alone: no such section, column or chart
    md = out_file("summary.md");
    assert_null(strstr(md, "PyTorch's entries"));
    free(md);
    // the modes: tcbench's in the axis, PyTorch's read beside them
    for (int m = 0; m < BENCH_MODE_COUNT; m++)
        assert_int_equal(bench_mode_rank(bench_axis_value(BENCH_AXIS_MODE, m)), m);
    assert_int_equal(bench_axis_parse(BENCH_AXIS_MODE, "torch-eager"), -1);
    assert_string_equal(bench_mode_baseline("torch-compile"), "torch-eager");
    assert_null(bench_mode_baseline("torch-eager"));
    assert_string_equal(bench_mode_peer("compiled"), "torch-compile");
    assert_true(bench_mode_foreign("torch-eager") && !bench_mode_foreign("compiled"));
    // the same files, PyTorch's amp as bf16: warned, and said on its line
    md = out_file("side/summary.md");
    assert_null(strstr(md, "Warning: the files ran amp"));
    free(md);
    json_t *bf = json_deep_copy(th);
    json_object_set_new(json_object_get(bf, "config"), "amp_dtype", json_string("bf16"));
    resfile *two[2] = {f[0], NULL};
    assert_int_equal(resfile_from_json(bf, "torch-bf16", &two[1], &d), 0);
    report_files(two, 2, "side-bf16");
    md = out_file("side-bf16/summary.md");
    expect_row(md, "## Side by side with PyTorch",
               "torch-bf16: PyTorch 2.15.0, torch.compile mode max-autotune-no-cudagraphs, amp as "
               "bf16.");
    expect_row(md, "## Side by side with PyTorch",
               "Warning: the files ran amp in different low dtypes (");
    assert_non_null(strstr(md, "side_tcbench.json fp16, torch-bf16 bf16)"));
    free(md);
    resfile_free(two[1]);
    for (int k = 0; k < 2; k++)
        resfile_free(f[k]);
    json_decref(tc);
    json_decref(th);
}

static void test_older_file(void **state) {
    (void)state;
    json_t *doc = fixture_json();
    assert_non_null(doc);
    json_object_del(json_object_get(doc, "config"), "disabled");
    json_object_del(json_object_get(doc, "host"), "loadavg_start");
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(doc, "cases"), i, c) {
        json_object_del(c, "stability");
        json_object_del(c, "suite_batch");
    }
    resfile *f = dump_and_load(doc, "old.json");
    assert_int_equal(f->ndisabled, 0);
    assert_true(isnan(f->loadavg_start));
    for (int k = 0; k < f->nentries; k++) {
        assert_false(f->entries[k].unstable);
        assert_int_equal(f->entries[k].nreasons, 0);
        // noise comes from the samples, as one process's, whatever the file's age
        if (f->entries[k].nsamples > 1)
            assert_true(f->entries[k].noise == bench_stats_noise(&f->entries[k].stats));
        else
            assert_true(f->entries[k].nsamples == 0 ? isnan(f->entries[k].noise)
                                                    : f->entries[k].noise == 0);
        assert_int_equal(f->entries[k].processes, f->entries[k].nsamples > 0 ? 1 : -1);
        assert_int_equal(f->entries[k].suite_batch, -1);
    }
    report_quiet(f, "old");
    resfile_free(f);
    char *md = out_file("old/summary.md");
    assert_non_null(md);
    const char *k = strstr(md, "Kill switches in effect (TCBENCH");
    assert_non_null(k);
    assert_int_equal(strncmp(strchr(k, ')'), "): none.", 8), 0);
    assert_non_null(strstr(md, "(batch 4 of a sweep: the case counts at batch 1)"));
    free(md);
}

static void test_no_gnuplot_one_warning(void **state) {
    (void)state;
    char *warn = out_file("warn.txt");
    assert_non_null(warn);
    int lines = 0;
    for (const char *p = warn; *p; p++)
        lines += *p == '\n';
    assert_int_equal(lines, 1);
    assert_non_null(strstr(warn, "not found"));
    free(warn);
    char path[400];
    snprintf(path, sizeof path, "%s/charts/geomean.png", outdir);
    assert_int_equal(access(path, F_OK), -1);
}

// `tcbench run`'s table: one summary line per compiled mode x precision x
// workload, the geomean over the stable passing entries, failures by name.
static void test_runtable(void **state) {
    (void)state;
    results_case eager = {
        .mode = "eager", .precision = "fp32", .workload = "infer", .device = "cpu"};
    results_case comp = eager, train = eager;
    comp.mode = "compiled";
    train.mode = "compiled";
    train.workload = "train";
    bench_result r[6] = {{.status = BENCH_OK},
                         {.status = BENCH_PASS, .speedup = {2, 1.9, 2.1}},
                         {.status = BENCH_PASS, .speedup = {8, 7.5, 8.5}},
                         {.status = BENCH_PASS, .speedup = {100, 1, 200}},
                         {.status = BENCH_FAIL_TO_RUN},
                         {.status = BENCH_FAIL_ACCURACY}};
    r[3].stab = (bench_stability){.rounds = 3, .unstable = true, .nreasons = 1};
    snprintf(r[3].stab.reasons[0], sizeof r[3].stab.reasons[0], "noise 30.0%% > 10%%");
    snprintf(r[4].message, sizeof r[4].message, "codegen failed");
    for (int i = 0; i < 6; i++) {
        r[i].compression_ratio = NAN;
        if (r[i].status != BENCH_PASS)
            r[i].speedup = (bench_speedup){NAN, NAN, NAN};
    }
    runtable_row rows[6] = {
        {"a", "a [eager]", &eager, &r[0]},   {"b", "b [compiled]", &comp, &r[1]},
        {"c", "c [compiled]", &comp, &r[2]}, {"d", "d [compiled]", &comp, &r[3]},
        {"e", "e [compiled]", &comp, &r[4]}, {"f", "f [compiled train]", &train, &r[5]},
    };
    runtable t = {rows, 6, false, "", "", "", 12.5, "out.json"};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    runtable_print(f, &t);
    assert_int_equal(fclose(f), 0);
    assert_non_null(strstr(buf, "compiled fp32 infer: pass rate 3/4 (75%), geomean speedup "
                                "4.00x over 2 passing cases (1 unstable left out)\n"));
    assert_non_null(strstr(buf, "compiled fp32 train: pass rate 0/1 (0%), geomean speedup - "
                                "(none passed)\n"));
    assert_null(strstr(buf, "eager fp32 infer: pass rate"));
    assert_non_null(strstr(buf, "e [compiled]: fail_to_run: codegen failed\n"));
    assert_non_null(
        strstr(buf, "warning: d [compiled]: unstable, left out of the geomean: noise 30.0% > 10%"));
    assert_non_null(strstr(buf, "(~: unstable, left out of the geomeans"));
    assert_non_null(strstr(buf, "total wall time 12.5 s; results: out.json\n"));
    free(buf);
    // several devices: the line names it
    t.by_device = true;
    t.n = 2;
    f = open_memstream(&buf, &len);
    assert_non_null(f);
    runtable_summary(f, &t);
    assert_int_equal(fclose(f), 0);
    assert_string_equal(buf, "compiled fp32 infer cpu: pass rate 1/1 (100%), geomean speedup "
                             "2.00x over 1 passing case\n");
    free(buf);
}

// The fixture with its first timed entry's samples_s[1] set to v.
static json_t *fixture_with_sample(double v, size_t *which) {
    json_t *doc = fixture_json();
    assert_non_null(doc);
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(doc, "cases"), i, c) {
        json_t *s = json_object_get(c, "samples_s");
        if (json_array_size(s) > 1) {
            assert_int_equal(json_array_set_new(s, 1, json_real(v)), 0);
            *which = i;
            return doc;
        }
    }
    fail_msg("the fixture has no entry with samples");
    return NULL;
}

// A sample that is no plausible time (0, negative, 1e200 s, 1e308 s) makes
// its entry invalid, named in its message; the report shows it so.
static void test_invalid_samples(void **state) {
    (void)state;
    static const double bad[] = {1e200, 1e308, -1, 0, 1e-12};
    static const char *const shown[] = {"1e+200", "1e+308", "-1", "0", "1e-12"};
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
        size_t k;
        char want[128];
        resfile *f = dump_and_load(fixture_with_sample(bad[b], &k), "absurd.json");
        assert_int_equal(f->ninvalid, 1);
        const resfile_entry *e = &f->entries[k];
        assert_string_equal(e->status, "invalid");
        assert_false(e->good);
        snprintf(want, sizeof want, "samples_s[1] = %s s: not a plausible time", shown[b]);
        assert_string_equal(e->message, want);
        for (int i = 0; i < f->nentries; i++)
            assert_true(i == (int)k || strcmp(f->entries[i].status, "invalid") != 0);
        report_quiet(f, "absurd");
        resfile_free(f);
        char *csv = out_file("absurd/results.csv");
        assert_non_null(csv);
        assert_non_null(strstr(csv, ",invalid"));
        free(csv);
    }
    // the bounds themselves are plausible
    size_t k;
    resfile *f = dump_and_load(fixture_with_sample(RESULTS_SAMPLE_MAX_S, &k), "edge.json");
    assert_int_equal(f->ninvalid, 0);
    resfile_free(f);
}

// A directory, or a FIFO, is refused by name before anything is read.
static void test_not_a_file(void **state) {
    (void)state;
    resfile *f = NULL;
    diag d;
    assert_int_equal(resfile_load(outdir, &f, &d), -1);
    assert_null(f);
    assert_string_equal(d.file, outdir);
    assert_string_equal(d.msg, "is a directory, not a results file");
    char fifo[400];
    snprintf(fifo, sizeof fifo, "%s/fifo", outdir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(resfile_load(fifo, &f, &d), -1); // would block were it opened
    assert_string_equal(d.msg, "is a FIFO, not a results file");
    unlink(fifo);
}

// Appends o to f as one compact line (without the newline when cut).
static void line_write(FILE *f, const json_t *o, bool cut) {
    char *text = json_dumps(o, JSON_COMPACT);
    assert_non_null(text);
    size_t n = strlen(text);
    assert_int_equal(fwrite(text, 1, cut ? n / 2 : n, f), cut ? n / 2 : n);
    if (!cut)
        assert_int_equal(fputc('\n', f), '\n');
    free(text);
}

// The fixture as a run's journal: a header line, one case a line, the
// first case measured again (a resumed run: the later line counts) and a
// cut last line (skipped).
static void test_journal(void **state) {
    (void)state;
    json_t *doc = fixture_json();
    assert_non_null(doc);
    json_t *cases = json_incref(json_object_get(doc, "cases"));
    size_t n = json_array_size(cases);
    assert_true(n > 2);
    json_object_del(doc, "cases");
    json_object_set_new(doc, "journal", json_integer(1));
    char path[400];
    snprintf(path, sizeof path, "%s/run.json.jsonl", outdir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    line_write(f, doc, false);
    size_t i;
    json_t *c;
    json_array_foreach(cases, i, c) line_write(f, c, false);
    json_t *again = json_deep_copy(json_array_get(cases, 0));
    json_object_set_new(again, "status", json_string("fail_accuracy"));
    json_object_set_new(again, "message", json_string("measured again"));
    line_write(f, again, false);
    line_write(f, json_array_get(cases, 1), true);
    assert_int_equal(fclose(f), 0);
    json_decref(again);
    json_decref(cases);
    json_decref(doc);

    resfile *r;
    diag d;
    assert_int_equal(resfile_load(path, &r, &d), 0);
    assert_true(r->journal);
    assert_int_equal(r->cut_lines, 1);
    assert_int_equal(r->nentries, (int)n);
    const resfile_entry *last = &r->entries[n - 1];
    assert_string_equal(last->message, "measured again");
    assert_string_equal(last->status, "fail_accuracy");
    for (int k = 0; k + 1 < r->nentries; k++) {
        assert_false(resfile_entry_same(&r->entries[k], last));
        assert_int_equal(r->entries[k].index, k);
    }
    report_quiet(r, "journal");
    resfile_free(r);
}

// The identity index: a put of an entry already there replaces it, and a
// find sees every axis.
static void test_index(void **state) {
    (void)state;
    enum { N = 5000 };
    static resfile_entry e[N];
    static char names[N][16];
    resfile_index x;
    assert_int_equal(resfile_index_init(&x, N), 0);
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "m%d", i / 2);
        e[i] = (resfile_entry){.suite = "s", .name = names[i], .mode = i % 2 ? "compiled" : "eager",
                               .precision = "fp32", .workload = "infer", .device = "cpu",
                               .batch = 1};
        assert_null(resfile_index_put(&x, &e[i]));
    }
    for (int i = 0; i < N; i++)
        assert_ptr_equal(resfile_index_find(&x, &e[i]), &e[i]);
    resfile_entry key = e[7];
    key.batch = 2;
    assert_null(resfile_index_find(&x, &key));
    key = e[7];
    key.precision = "amp";
    assert_null(resfile_index_find(&x, &key));
    key = e[7];
    assert_ptr_equal(resfile_index_put(&x, &key), &e[7]);
    assert_ptr_equal(resfile_index_find(&x, &e[7]), &key);
    resfile_index_free(&x);
}

// Where a value lies: past keys and strings that hold what looks like
// JSON, and nothing found where the text ends first.
static void test_jscan(void **state) {
    (void)state;
    const char *t = "{\"a\": \"x\\\"}, {\", \"b\": [1, {\"c\": \"]\"}, [2, 3]],\n"
                    " \"rows\": [{\"k\": 1}, {\"k\": 22}]}";
    size_t n = strlen(t), root = jscan_ws(t, n, 0);
    size_t rows = jscan_member(t, n, root, "rows");
    assert_int_not_equal(rows, JSCAN_NOWHERE);
    assert_int_equal(t[rows], '[');
    size_t r1 = jscan_element(t, n, rows, 1);
    assert_int_not_equal(r1, JSCAN_NOWHERE);
    size_t k = jscan_member(t, n, r1, "k");
    assert_int_not_equal(k, JSCAN_NOWHERE);
    assert_memory_equal(t + k, "22", 2);
    int line, col;
    jscan_line_col(t, k, &line, &col);
    assert_int_equal(line, 2);
    assert_int_equal(col, (int)(k - (size_t)(strchr(t, '\n') - t)));
    size_t b = jscan_member(t, n, root, "b");
    assert_int_equal(t[jscan_element(t, n, b, 2)], '[');
    assert_int_equal(jscan_element(t, n, b, 3), JSCAN_NOWHERE);
    assert_int_equal(jscan_member(t, n, root, "c"), JSCAN_NOWHERE); // nested, not a member
    assert_int_equal(jscan_member(t, n, root, "x"), JSCAN_NOWHERE); // a string's text
    // the text cut inside the array: nothing past its end
    size_t cut = (size_t)(strstr(t, "22") - t);
    assert_int_equal(jscan_element(t, cut, rows, 2), JSCAN_NOWHERE);
    assert_int_equal(jscan_member(t, 5, root, "rows"), JSCAN_NOWHERE);
    assert_int_equal(jscan_value(t, n, b, NULL, NULL), (size_t)(strstr(t, "]],") - t) + 2);
}

static void count_commas(void *ctx, size_t at) {
    (void)at;
    (*(size_t *)ctx)++;
}

// jscan_value counts the commas of the value itself, not of those inside it.
static void test_jscan_commas(void **state) {
    (void)state;
    const char *t = "[1, {\"a\": 1, \"b\": [2, 3]}, \",\", 4]";
    size_t n = strlen(t), commas = 0;
    assert_int_equal(jscan_value(t, n, 0, count_commas, &commas), n);
    assert_int_equal(commas, 3);
}

// A plan file is told by its kind; the results fixture is no plan.
static void test_plan_sniff(void **state) {
    (void)state;
    assert_false(planfile_sniff(fixture));
    assert_false(planfile_sniff(outdir)); // a directory
    char path[400];
    snprintf(path, sizeof path, "%s/p.json", outdir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"tool\": {\"kind\": \"x\"}, \"kind\": \"plan\", \"schema_version\": 1}", f);
    fclose(f);
    assert_true(planfile_sniff(path));
    planfile *p = NULL;
    diag d;
    assert_int_equal(planfile_load(path, &p, &d), -1); // no config
    assert_null(p);
    assert_string_equal(d.msg, "\"config\" must be an object");
    unlink(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pass_rate),
        cmocka_unit_test(test_headline),
        cmocka_unit_test(test_escapes),
        cmocka_unit_test(test_summary_numbers),
        cmocka_unit_test(test_unstable_left_out),
        cmocka_unit_test(test_sweep_counts_once),
        cmocka_unit_test(test_kill_switches_shown),
        cmocka_unit_test(test_breakeven),
        cmocka_unit_test(test_csv),
        cmocka_unit_test(test_html_escaped),
        cmocka_unit_test(test_gnuplot_script),
        cmocka_unit_test(test_passrate_chart),
        cmocka_unit_test(test_model_charts_mark),
        cmocka_unit_test(test_gbench_errors),
        cmocka_unit_test(test_runtable),
        cmocka_unit_test(test_older_file),
        cmocka_unit_test(test_study_subset),
        cmocka_unit_test(test_side_by_side),
        cmocka_unit_test(test_no_gnuplot_one_warning),
        cmocka_unit_test(test_invalid_samples),
        cmocka_unit_test(test_not_a_file),
        cmocka_unit_test(test_journal),
        cmocka_unit_test(test_index),
        cmocka_unit_test(test_jscan),
        cmocka_unit_test(test_jscan_commas),
        cmocka_unit_test(test_plan_sniff),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
