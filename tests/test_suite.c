// Suite files: cases, batch, overrides, sizes, defaults and where a case's
// model file is found.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h> // after the headers it needs

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/modeldef.h"
#include "model/suite.h"

static char tmpdir[256];

static const char *tiny_model = "name: tiny\n"
                                "params: {width: 16, depth: 1}\n"
                                "inputs: {x: {shape: [$batch, 8]}}\n"
                                "body:\n"
                                "  - repeat: $depth\n"
                                "    body: [{linear: {out: $width}}]\n";

static void write_file(const char *rel, const char *text) {
    char path[400];
    snprintf(path, sizeof path, "%s/%s", tmpdir, rel);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_true(fputs(text, f) >= 0);
    assert_int_equal(fclose(f), 0);
}

static int setup(void **state) {
    (void)state;
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/tcbench_suite_XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(tmpdir))
        return -1;
    char p[320];
    const char *dirs[] = {"suites", "models", "other", "suites/local"};
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/%s", tmpdir, dirs[i]);
        if (mkdir(p, 0755) != 0)
            return -1;
    }
    write_file("models/tiny.yaml", tiny_model);
    write_file("other/tiny.yaml", tiny_model);
    write_file("suites/local/mine.yaml", tiny_model);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

// Writes suites/s.yaml and loads it with size; NULL with d filled on an error.
static suite *load(const char *text, const char *size, diag *d) {
    write_file("suites/s.yaml", text);
    char path[400];
    snprintf(path, sizeof path, "%s/suites/s.yaml", tmpdir);
    suite *s = NULL;
    memset(d, 0, sizeof *d);
    suite_load(path, size, &s, d);
    return s;
}

static suite *load_ok(const char *text, const char *size) {
    diag d;
    suite *s = load(text, size, &d);
    if (!s)
        fail_msg("unexpected error: %d:%d: %s", d.line, d.col, d.msg);
    return s;
}

static void expect_error(const char *text, const char *size, int line, int col,
                         const char *fragment) {
    diag d;
    suite *s = load(text, size, &d);
    if (s)
        fail_msg("expected an error containing '%s'", fragment);
    if (d.line != line || d.col != col || !strstr(d.msg, fragment))
        fail_msg("expected %d:%d: ...%s..., got %d:%d: %s", line, col, fragment, d.line, d.col,
                 d.msg);
}

static const char * override(const suite_case *c, const char *key) {
    for (int i = 0; i < c->noverrides; i++)
        if (!strcmp(c->overrides[i].key, key))
            return c->overrides[i].expr;
    return NULL;
}

static void test_cases(void **state) {
    (void)state;
    suite *s = load_ok("name: smoke\n"
                       "cases:\n"
                       "  - {name: a, model: tiny, batch: 4}\n"
                       "  - model: tiny\n"
                       "    batch: 2\n"
                       "    params: {width: 32, depth: $width / 16}\n",
                       NULL);
    assert_string_equal(s->name, "smoke");
    assert_int_equal(s->ncases, 2);
    assert_string_equal(s->cases[0].name, "a");
    assert_int_equal(s->cases[0].batch, 4);
    assert_int_equal(s->cases[0].noverrides, 0);
    assert_int_equal(s->cases[0].line, 3);
    assert_int_equal(s->cases[0].col, 5);
    // a case without a name takes its model's
    assert_string_equal(s->cases[1].name, "tiny");
    assert_int_equal(s->cases[1].batch, 2);
    assert_int_equal(s->cases[1].noverrides, 2);
    const modeldef_override *o = &s->cases[1].overrides[1];
    assert_string_equal(o->key, "depth");
    assert_string_equal(o->expr, "$width / 16");
    assert_string_equal(o->file, s->path);
    assert_int_equal(o->line, 6);
    assert_int_equal(o->col, 32);
    // the overrides build the model they name
    modeldef *md;
    model *m;
    diag d;
    assert_int_equal(modeldef_load(s->cases[1].model_path, &md, &d), 0);
    assert_int_equal(modeldef_build(md, s->cases[1].overrides, s->cases[1].noverrides,
                                    s->cases[1].batch, &(modeldef_opts){0}, &m, &d),
                     0);
    assert_int_equal(graph_param_count(m->g), (8 * 32 + 32) + (32 * 32 + 32));
    model_free(m);
    modeldef_free(md);
    suite_free(s);
}

static void test_defaults(void **state) {
    (void)state;
    suite *s = load_ok("cases: [{model: tiny, batch: 1}]\n", NULL);
    assert_string_equal(s->name, "s"); // from the file name
    assert_int_equal(s->nmodes, 2);
    assert_string_equal(s->modes[0], "eager");
    assert_string_equal(s->modes[1], "compiled");
    assert_int_equal(s->nprecisions, 1);
    assert_string_equal(s->precisions[0], "fp32");
    assert_int_equal(s->nworkloads, 1);
    assert_string_equal(s->workloads[0], "infer");
    suite_free(s);
    s = load_ok("defaults: {modes: [eager], precisions: [fp32, amp], workloads: [infer, train]}\n"
                "cases: [{model: tiny, batch: 1}]\n",
                NULL);
    assert_int_equal(s->nmodes, 1);
    assert_string_equal(s->modes[0], "eager");
    assert_int_equal(s->nprecisions, 2);
    assert_string_equal(s->precisions[1], "amp");
    assert_int_equal(s->nworkloads, 2);
    assert_string_equal(s->workloads[1], "train");
    suite_free(s);
    expect_error("defaults: {precisions: [fp64]}\ncases: [{model: tiny, batch: 1}]\n", NULL, 1, 25,
                 "unknown word 'fp64' in precisions");
    // defaults.processes: a big suite's own measuring processes
    s = load_ok("cases: [{model: tiny, batch: 1}]\n", NULL);
    assert_int_equal(s->processes, 0);
    suite_free(s);
    s = load_ok("defaults: {processes: 1}\ncases: [{model: tiny, batch: 1}]\n", NULL);
    assert_int_equal(s->processes, 1);
    suite_free(s);
    expect_error("defaults: {processes: 0}\ncases: [{model: tiny, batch: 1}]\n", NULL, 1, 23,
                 "processes must be a positive integer, got 0");
    expect_error("defaults: {processes: 65}\ncases: [{model: tiny, batch: 1}]\n", NULL, 1, 23,
                 "processes is at most 64, got 65");
}

static const char *sized = "cases:\n"
                           "  - name: a\n"
                           "    model: tiny\n"
                           "    batch: 2\n"
                           "    params: {width: 8, depth: 3}\n"
                           "    sizes:\n"
                           "      small: {batch: 4, params: {width: 16}}\n"
                           "      large: {params: {depth: 5}}\n"
                           "  - name: b\n"
                           "    model: tiny\n"
                           "    batch: 3\n"
                           "    sizes:\n"
                           "      tiny: {batch: 1}\n";

static void test_sizes(void **state) {
    (void)state;
    suite *s = load_ok(sized, NULL);
    assert_int_equal(s->cases[0].batch, 2);
    assert_string_equal(override(&s->cases[0], "width"), "8");
    suite_free(s);
    // a size's values go over the case's own; other cases keep theirs
    s = load_ok(sized, "small");
    assert_int_equal(s->cases[0].batch, 4);
    assert_int_equal(s->cases[0].noverrides, 2);
    assert_string_equal(override(&s->cases[0], "width"), "16");
    assert_string_equal(override(&s->cases[0], "depth"), "3");
    assert_int_equal(s->cases[1].batch, 3);
    suite_free(s);
    s = load_ok(sized, "large");
    assert_int_equal(s->cases[0].batch, 2);
    assert_string_equal(override(&s->cases[0], "depth"), "5");
    suite_free(s);
    s = load_ok(sized, "tiny");
    assert_int_equal(s->cases[0].batch, 2);
    assert_int_equal(s->cases[1].batch, 1);
    suite_free(s);
    diag d;
    assert_null(load(sized, "huge", &d));
    assert_int_equal(d.line, 0);
    assert_non_null(strstr(d.msg, "size 'huge' is defined by no case in"));
    assert_non_null(strstr(d.msg, "sizes here: small, large, tiny"));
    assert_null(load("cases: [{model: tiny, batch: 1}]\n", "small", &d));
    assert_non_null(strstr(d.msg, "this suite defines no sizes"));
}

static void test_size_override_error(void **state) {
    (void)state;
    // a size's override of an unknown parameter is reported in the suite
    suite *s = load_ok("cases:\n"
                       "  - model: tiny\n"
                       "    batch: 2\n"
                       "    sizes:\n"
                       "      big: {params: {widht: 64}}\n",
                       "big");
    modeldef *md;
    model *m;
    diag d;
    assert_int_equal(modeldef_load(s->cases[0].model_path, &md, &d), 0);
    assert_int_equal(modeldef_build(md, s->cases[0].overrides, s->cases[0].noverrides,
                                    s->cases[0].batch, &(modeldef_opts){0}, &m, &d),
                     -1);
    assert_string_equal(d.file, s->path);
    assert_int_equal(d.line, 5);
    assert_int_equal(d.col, 29);
    assert_non_null(strstr(d.msg, "unknown parameter 'widht'"));
    modeldef_free(md);
    suite_free(s);
}

static void test_model_paths(void **state) {
    (void)state;
    char want[400];
    unsetenv("TCBENCH_MODELS");
    // a name: <suite dir>/../models/NAME.yaml
    suite *s = load_ok("cases:\n"
                       "  - {model: tiny, batch: 1}\n"
                       "  - {name: p, model: local/mine.yaml, batch: 1}\n"
                       "  - {name: q, model: ../other/tiny.yaml, batch: 1}\n",
                       NULL);
    snprintf(want, sizeof want, "%s/suites/../models/tiny.yaml", tmpdir);
    assert_string_equal(s->cases[0].model_path, want);
    // a value with '/' or ending in .yaml: relative to the suite file
    snprintf(want, sizeof want, "%s/suites/local/mine.yaml", tmpdir);
    assert_string_equal(s->cases[1].model_path, want);
    assert_string_equal(s->cases[1].name, "p");
    snprintf(want, sizeof want, "%s/suites/../other/tiny.yaml", tmpdir);
    assert_string_equal(s->cases[2].model_path, want);
    suite_free(s);
    // a bare file name is relative to the suite file too: suites/mine.yaml is not there
    diag d;
    assert_null(load("cases:\n  - {model: mine.yaml, batch: 1}\n", NULL, &d));
    assert_int_equal(d.line, 2);
    assert_int_equal(d.col, 13);
    assert_non_null(strstr(d.msg, "mine.yaml"));
    // $TCBENCH_MODELS replaces the models folder for plain names
    char env[320];
    snprintf(env, sizeof env, "%s/other", tmpdir);
    setenv("TCBENCH_MODELS", env, 1);
    s = load_ok("cases: [{model: tiny, batch: 1}, {name: b, model: local/mine.yaml, batch: 1}]\n",
                NULL);
    snprintf(want, sizeof want, "%s/other/tiny.yaml", tmpdir);
    assert_string_equal(s->cases[0].model_path, want);
    snprintf(want, sizeof want, "%s/suites/local/mine.yaml", tmpdir);
    assert_string_equal(s->cases[1].model_path, want);
    suite_free(s);
    unsetenv("TCBENCH_MODELS");
    // an absolute path stays as it is
    char text[600];
    snprintf(text, sizeof text, "cases: [{model: %s/other/tiny.yaml, batch: 1}]\n", tmpdir);
    s = load_ok(text, NULL);
    snprintf(want, sizeof want, "%s/other/tiny.yaml", tmpdir);
    assert_string_equal(s->cases[0].model_path, want);
    suite_free(s);
}

static void test_errors(void **state) {
    (void)state;
    expect_error("cases:\n  - {model: tiny, batch: 1}\n  - {model: tiny, batch: 2}\n", NULL, 3, 13,
                 "duplicate case name 'tiny'");
    expect_error("cases:\n  - {model: tiny, batch: 2.5}\n", NULL, 2, 26,
                 "batch must be a positive integer");
    expect_error("cases:\n  - {model: tiny, batch: \"4\"}\n", NULL, 2, 26,
                 "batch must be a positive integer");
    expect_error("cases:\n  - {model: tiny, batch: 1, params: {width: [1]}}\n", NULL, 2, 45,
                 "must be a number");
    expect_error("cases:\n  - {batch: 1}\n", NULL, 2, 5, "needs 'model:'");
    expect_error("name: x\n", NULL, 1, 1, "needs 'cases:'");
    expect_error("cases: {a: 1}\n", NULL, 1, 8, "cases must be a list");
    expect_error("cases: [{model: tiny, batch: 1, sizes: {s: {batch: 1, extra: 2}}}]\n", NULL, 1,
                 55, "unknown key 'extra' in a size");
    diag d;
    assert_null(load("", NULL, &d));
    assert_non_null(strstr(d.msg, "empty"));
    suite *s;
    assert_int_equal(suite_load("/nonexistent/s.yaml", NULL, &s, &d), -1);
    assert_null(s);
    assert_non_null(strstr(d.msg, "open: No such file"));
}

// `study: true|false` marks the study's own models; absent, false. Anything
// else is a located error.
static void test_study(void **state) {
    (void)state;
    suite *s = load_ok("cases:\n"
                       "  - {name: a, model: tiny, batch: 1, study: true}\n"
                       "  - {name: b, model: tiny, batch: 1, study: false}\n"
                       "  - {name: c, model: tiny, batch: 1}\n",
                       NULL);
    assert_true(s->cases[0].study);
    assert_false(s->cases[1].study);
    assert_false(s->cases[2].study);
    suite_free(s);
    expect_error("cases:\n  - {model: tiny, batch: 1, study: yes}\n", NULL, 2, 36,
                 "study must be true or false");
    expect_error("cases:\n  - {model: tiny, batch: 1, study: [true]}\n", NULL, 2, 36,
                 "study must be true or false");
    expect_error("cases:\n  - {model: tiny, batch: 1, sizes: {cpu: {study: true}}}\n", NULL, 2, 43,
                 "unknown key 'study' in a size");
}

// `tolerance: {infer: X, train: Y}` in defaults and cases: a case's keys
// over the suite's, absent keys 0 (the built-in tolerance); a value outside
// (0, 1), an unknown key or a scalar is a located error.
static void test_tolerance(void **state) {
    (void)state;
    suite *s = load_ok("defaults: {tolerance: {train: 2e-2}}\n"
                       "cases:\n"
                       "  - {name: a, model: tiny, batch: 1}\n"
                       "  - {name: b, model: tiny, batch: 1, tolerance: {infer: 1e-3}}\n"
                       "  - {name: c, model: tiny, batch: 1, tolerance: {train: 0.08}}\n",
                       NULL);
    assert_true(s->tol.train == 2e-2 && s->tol.infer == 0);
    assert_true(s->cases[0].tol.train == 2e-2 && s->cases[0].tol.infer == 0);
    assert_true(s->cases[1].tol.train == 2e-2 && s->cases[1].tol.infer == 1e-3);
    assert_true(s->cases[2].tol.train == 0.08 && s->cases[2].tol.infer == 0);
    suite_free(s);
    s = load_ok("cases:\n  - {model: tiny, batch: 1}\n", NULL);
    assert_true(s->cases[0].tol.train == 0 && s->cases[0].tol.infer == 0);
    suite_free(s);
    expect_error("cases:\n  - {model: tiny, batch: 1, tolerance: {train: 0}}\n", NULL, 2, 48,
                 "a tolerance is above 0 and below 1");
    expect_error("cases:\n  - {model: tiny, batch: 1, tolerance: {train: 1.5}}\n", NULL, 2, 48,
                 "a tolerance is above 0 and below 1");
    expect_error("cases:\n  - {model: tiny, batch: 1, tolerance: {train: x}}\n", NULL, 2, 48,
                 "a tolerance must be a non-negative number");
    expect_error("cases:\n  - {model: tiny, batch: 1, tolerance: {fp32: 1e-3}}\n", NULL, 2, 41,
                 "unknown key 'fp32' in tolerance");
    expect_error("defaults: {tolerance: 1e-2}\ncases:\n  - {model: tiny, batch: 1}\n", NULL, 1,
                 23, "tolerance must be a mapping");
}

// `loss: output_mean | model` in defaults and cases (a case's over the
// suite's); anything else is a located error.
static void test_loss(void **state) {
    (void)state;
    suite *s = load_ok("defaults: {loss: output_mean}\n"
                       "cases:\n"
                       "  - {name: a, model: tiny, batch: 1}\n"
                       "  - {name: b, model: tiny, batch: 1, loss: model}\n",
                       NULL);
    assert_true(s->output_mean_loss);
    assert_true(s->cases[0].output_mean_loss);
    assert_false(s->cases[1].output_mean_loss);
    suite_free(s);
    s = load_ok("cases:\n  - {model: tiny, batch: 1}\n  - {name: b, model: tiny, batch: 1, "
                "loss: output_mean}\n",
                NULL);
    assert_false(s->cases[0].output_mean_loss);
    assert_true(s->cases[1].output_mean_loss);
    suite_free(s);
    expect_error("cases:\n  - {model: tiny, batch: 1, loss: mse}\n", NULL, 2, 35,
                 "loss is model (the model's own) or output_mean, got 'mse'");
}

// dp_sgd: {max_grad_norm, noise_multiplier} on a case, after its optimizer
static void test_dp_sgd(void **state) {
    (void)state;
    suite *s = load_ok("cases:\n"
                       "  - {name: a, model: tiny, batch: 2}\n"
                       "  - {name: b, model: tiny, batch: 2, optimizer: {adamw: {lr: 0.001}},\n"
                       "     dp_sgd: {max_grad_norm: 1.5, noise_multiplier: 0.5}}\n",
                       NULL);
    assert_true(s->cases[0].optim.dp_max_grad_norm == 0);
    assert_true(s->cases[1].optim.dp_max_grad_norm == 1.5);
    assert_true(s->cases[1].optim.dp_noise_multiplier == 0.5);
    assert_true(s->cases[1].optim.lr == 0.001);
    suite_free(s);
    expect_error("cases:\n  - {model: tiny, batch: 1, dp_sgd: {max_grad_norm: 1}}\n", NULL, 2, 37,
                 "dp_sgd needs 'noise_multiplier:'");
    expect_error("cases:\n  - {model: tiny, batch: 1, dp_sgd: {max_grad_norm: 0, "
                 "noise_multiplier: 1}}\n",
                 NULL, 2, 53, "max_grad_norm must be above 0");
    expect_error("cases:\n  - {model: tiny, batch: 1, dp_sgd: {max_grad_norm: 1, "
                 "noise_multiplier: -1}}\n",
                 NULL, 2, 74, "noise_multiplier must be a non-negative number");
    expect_error("cases:\n  - {model: tiny, batch: 1, dp_sgd: {max_norm: 1}}\n", NULL, 2, 38,
                 "max_norm");
    expect_error("cases:\n  - {model: tiny, batch: 1, dp_sgd: 1}\n", NULL, 2, 37, "dp_sgd");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cases),       cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_sizes),       cmocka_unit_test(test_size_override_error),
        cmocka_unit_test(test_model_paths), cmocka_unit_test(test_errors),
        cmocka_unit_test(test_study),       cmocka_unit_test(test_tolerance),
        cmocka_unit_test(test_loss),        cmocka_unit_test(test_dp_sgd),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
