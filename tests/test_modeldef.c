// Model files: expressions, the YAML tree, and one test per construct of
// the model format (params, overrides, inputs, repeat, residual, input/as,
// loss, outputs, scopes), checking the graphs they build.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h> // after the headers it needs

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "autodiff/autograd.h"
#include "base/strdist.h"
#include "model/expr.h"
#include "model/modeldef.h"
#include "model/yamldoc.h"
#include "ref/ref.h"

static char tmpdir[256];

static int setup(void **state) {
    (void)state;
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/tcbench_md_XXXXXX", t && *t ? t : "/tmp");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static const char *write_model(const char *name, const char *text) {
    static char path[400];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
    return path;
}

// Loads and builds; returns NULL with d filled on an error.
static model *build(const char *text, const modeldef_override *ov, int nov, int64_t batch,
                    bool training, diag *d) {
    const char *path = write_model("m.yaml", text);
    modeldef *md;
    model *m = NULL;
    memset(d, 0, sizeof *d);
    if (modeldef_load(path, &md, d) < 0)
        return NULL;
    modeldef_build(md, ov, nov, batch, &(modeldef_opts){.training = training}, &m, d);
    modeldef_free(md);
    return m;
}

static model *build_ok(const char *text, const modeldef_override *ov, int nov, int64_t batch,
                       bool training) {
    diag d;
    model *m = build(text, ov, nov, batch, training, &d);
    if (!m)
        fail_msg("unexpected error: %d:%d: %s", d.line, d.col, d.msg);
    return m;
}

static void expect_error(const char *text, int line, int col, const char *fragment) {
    diag d;
    model *m = build(text, NULL, 0, 2, false, &d);
    if (m)
        fail_msg("expected an error containing '%s'", fragment);
    if (d.line != line || d.col != col || !strstr(d.msg, fragment))
        fail_msg("expected %d:%d: ...%s..., got %d:%d: %s", line, col, fragment, d.line, d.col,
                 d.msg);
}

static int find_param(const graph *g, const char *name) {
    for (int i = 0; i < g->n; i++)
        if (g->nodes[i].op == OP_PARAM && g->nodes[i].name && !strcmp(g->nodes[i].name, name))
            return i;
    return -1;
}

static int count_op(const graph *g, enum op op) {
    int n = 0;
    for (int i = 0; i < g->n; i++)
        n += g->nodes[i].op == op;
    return n;
}

static void assert_shape(const graph_node *n, int ndim, const int64_t *shape) {
    assert_int_equal(n->ndim, ndim);
    for (int i = 0; i < ndim; i++)
        assert_int_equal(n->shape[i], shape[i]);
}

static const graph_node *out0(const model *m) { return graph_at(m->g, m->g->outputs[0]); }

// ---------------------------------------------------------------- expressions

static expr_value eval(const char *s) {
    expr *e;
    int off;
    char err[256];
    if (expr_parse(s, &e, &off, err, sizeof err) < 0)
        fail_msg("parse '%s': %s at %d", s, err, off);
    expr_value v;
    if (expr_eval(e, NULL, NULL, &v, &off, err, sizeof err) < 0)
        fail_msg("eval '%s': %s at %d", s, err, off);
    expr_free(e);
    return v;
}

static int eval_error(const char *s, char *err, size_t cap) {
    expr *e;
    int off;
    if (expr_parse(s, &e, &off, err, cap) < 0)
        return off;
    expr_value v;
    int rc = expr_eval(e, NULL, NULL, &v, &off, err, cap);
    expr_free(e);
    assert_int_equal(rc, -1);
    return off;
}

static void test_expr(void **state) {
    (void)state;
    assert_int_equal(eval("2 + 3 * 4").i, 14);
    assert_int_equal(eval("(2 + 3) * 4").i, 20);
    assert_int_equal(eval("-3 - -4").i, 1);
    assert_int_equal(eval("10 - 4 - 3").i, 3); // left to right
    expr_value v = eval("12 / 4");
    assert_false(v.is_float);
    assert_int_equal(v.i, 3);
    v = eval("7 / 2"); // inexact integer division gives a float
    assert_true(v.is_float);
    assert_true(v.f == 3.5);
    v = eval("1e-5");
    assert_true(v.is_float && v.f == 1e-5);
    v = eval("2.5 * 2");
    assert_true(v.is_float && v.f == 5.0);
    assert_true(eval(".5").f == 0.5);
    char err[256];
    assert_int_equal(eval_error("4 / (2 - 2)", err, sizeof err), 2);
    assert_non_null(strstr(err, "division by zero"));
    assert_int_equal(eval_error("4 * ", err, sizeof err), 4);
    assert_int_equal(eval_error("(1 + 2", err, sizeof err), 6);
    assert_non_null(strstr(err, "')'"));
    assert_int_equal(eval_error("1 + $", err, sizeof err), 5);
    assert_int_equal(eval_error("3 )", err, sizeof err), 2);
    assert_int_equal(eval_error("9223372036854775807 + 1", err, sizeof err), 20);
    assert_non_null(strstr(err, "overflow"));
    assert_int_equal(eval_error("2 $x", err, sizeof err), 2);
    assert_int_equal(eval_error("", err, sizeof err), 0);
    assert_true(expr_looks_like("4 * $d"));
    assert_false(expr_looks_like("nearest"));
    expr *e;
    int off;
    assert_int_equal(expr_parse("$layers", &e, &off, err, sizeof err), 0);
    assert_string_equal(expr_single_var(e), "layers");
    expr_free(e);
    expr_value_str(expr_float(0.1), err, sizeof err);
    assert_string_equal(err, "0.1");
}

// ---------------------------------------------------------------- YAML tree

// yd_parse refuses text at line:col with a message holding fragment.
static void parse_fails(const char *text, int line, int col, const char *fragment) {
    yd_doc *doc;
    diag d = {0};
    assert_int_equal(yd_parse(text, strlen(text), "t.yaml", &doc, &d), -1);
    if (d.line != line || d.col != col || !strstr(d.msg, fragment))
        fail_msg("%s: got %d:%d: %s; expected %d:%d: ...%s...", text, d.line, d.col, d.msg, line,
                 col, fragment);
}

static void test_yamldoc(void **state) {
    (void)state;
    const char *text = "a: 1\n"
                       "b: {c: 'q x', d: [1, 2]}\n"
                       "e: &anchor [3]\n"
                       "f: *anchor\n"
                       "g:\n";
    yd_doc *doc;
    diag d = {0};
    assert_int_equal(yd_parse(text, strlen(text), "t.yaml", &doc, &d), 0);
    const yd_node *b = yd_get(doc->root, "b");
    assert_int_equal(b->kind, YD_MAP);
    assert_int_equal(b->line, 2);
    assert_int_equal(b->col, 4);
    const yd_node *c = yd_get(b, "c");
    assert_string_equal(c->str, "q x");
    assert_false(c->plain);
    assert_int_equal(c->col, 8);
    assert_int_equal(c->text_col, 9); // after the quote
    const yd_node *dd = yd_get(b, "d");
    assert_int_equal(dd->kind, YD_SEQ);
    assert_int_equal(dd->n, 2);
    assert_int_equal(dd->vals[1]->col, 22);
    assert_ptr_equal(yd_get(doc->root, "f"), yd_get(doc->root, "e"));
    assert_true(yd_is_null(yd_get(doc->root, "g")));
    assert_null(yd_get(doc->root, "zz"));
    yd_free(doc);

    parse_fails("a: 1\nb: 2\na: 3\n", 3, 1, "duplicate key 'a'");
    parse_fails("a: [1, 2\nb: 3\n", 2, 2, "YAML syntax");
    assert_int_equal(yd_load("/nonexistent/x.yaml", &doc, &d), -1);
    assert_non_null(strstr(d.msg, "open: No such file"));
    assert_int_equal(yd_load(tmpdir, &doc, &d), -1);
    assert_string_equal(d.msg, "is a directory, not a model or suite file");
}

// 0 when the name a: holds passes yd_check_name, else -1 with d set.
static int name_check(const char *text, bool file_name, diag *d) {
    yd_doc *doc;
    assert_int_equal(yd_parse(text, strlen(text), "t.yaml", &doc, d), 0);
    int rc = yd_check_name(doc, yd_get(doc->root, "a"), "the name", file_name, d);
    yd_free(doc);
    return rc;
}

static void test_yamldoc_names(void **state) {
    (void)state;
    diag d = {0};
    char text[300];
    // at most YD_NAME_MAX bytes: 128 pass, 129 do not
    snprintf(text, sizeof text, "a: %0*d\n", YD_NAME_MAX, 7);
    assert_int_equal(name_check(text, true, &d), 0);
    snprintf(text, sizeof text, "a: %0*d\n", YD_NAME_MAX + 1, 7);
    assert_int_equal(name_check(text, true, &d), -1);
    assert_non_null(strstr(d.msg, "the name is 129 bytes long; a name has at most 128"));
    // printable UTF-8 passes; control characters of every kind do not
    assert_int_equal(name_check("a: \"r\u00e9seau-\u4e2d\"\n", true, &d), 0);
    assert_int_equal(name_check("a: \"x\\ty\"\n", false, &d), -1);
    assert_non_null(strstr(d.msg, "the control character U+0009 at its character 2"));
    assert_int_equal(name_check("a: \"\u00e9\\x85\"\n", false, &d), -1);
    assert_non_null(strstr(d.msg, "U+0085 at its character 2"));
    assert_int_equal(name_check("a: \"x\\x7f\"\n", false, &d), -1);
    assert_non_null(strstr(d.msg, "U+007F"));
    assert_int_equal(name_check("a: \"x\\u2028\"\n", false, &d), -1);
    assert_non_null(strstr(d.msg, "U+2028"));
    assert_int_equal(name_check("a: ''\n", false, &d), -1);
    assert_non_null(strstr(d.msg, "the name is empty"));
    // '/', "." and ".." only where the name becomes a file name
    assert_int_equal(name_check("a: x/y\n", false, &d), 0);
    assert_int_equal(name_check("a: x/y\n", true, &d), -1);
    assert_non_null(strstr(d.msg, "'x/y' cannot be a file name"));
    assert_int_equal(name_check("a: ..\n", true, &d), -1);
    assert_int_equal(name_check("a: ...\n", true, &d), 0);
    // every key is a name, checked on load
    parse_fails("a: 1\nb:\n  \"c\\ad\": 2\n", 3, 3, "a key has the control character U+0007");
    // a NUL inside any scalar is refused, not cut short
    parse_fails("a: [1, \"ab\\0c\"]\n", 1, 8, "a NUL byte (\\0) at byte 3");
    // the reader's byte offsets become line:col, columns in characters
    parse_fails("a: 1\nb\xc3\xa9: x\xff\n", 2, 6, "byte 0xFF is not UTF-8");
    parse_fails("a: 1\r\nb: \x01\n", 2, 4, "control character U+0001 in the file");
}

static void test_strdist(void **state) {
    (void)state;
    assert_int_equal(strdist_distance("gtp2", "gpt2"), 1); // a swap is one edit
    assert_int_equal(strdist_distance("gpt2", "gpt2"), 0);
    assert_int_equal(strdist_distance("", "abc"), 3);
    assert_int_equal(strdist_distance("kitten", "sitting"), 3);
    const char *names[] = {"mlp", "gpt2", "bert", "t5", NULL};
    assert_int_equal(strdist_closest("gtp2", names, 3), 1);
    assert_int_equal(strdist_closest("brt", names, 3), 2);
    assert_int_equal(strdist_closest("zzzzzz", names, 3), -1);
    assert_int_equal(strdist_closest("t6", names, 3), 3);
    assert_int_equal(strdist_closest("y", (const char *[]){"x", NULL}, 3), -1); // all rewritten
    assert_int_equal(strdist_closest("gpxxx", names, 3), -1); // 3 edits of 5: too many
}

// ---------------------------------------------------------------- constructs

static void test_params(void **state) {
    (void)state;
    // params may name later ones; $batch is always there; 24 / 4 stays an int
    model *m = build_ok("name: p\n"
                        "params: {ffn: 4 * $d, d: 24, heads: 4, head_dim: $d / $heads,\n"
                        "         unused: $d / 5}\n"
                        "inputs:\n"
                        "  x: {shape: [$batch, $d + 0]}\n"
                        "body:\n"
                        "  - linear: {out: $ffn}\n"
                        "  - linear: {out: $head_dim * 2 - 1}\n",
                        NULL, 0, 3, false);
    assert_string_equal(m->name, "p");
    assert_int_equal(m->batch, 3);
    assert_shape(graph_at(m->g, find_param(m->g, "linear.weight")), 2, (int64_t[]){96, 24});
    assert_shape(out0(m), 2, (int64_t[]){3, 11});
    model_free(m);
}

static void test_overrides(void **state) {
    (void)state;
    const char *text = "name: o\n"
                       "params: {d: 8, ffn: 4 * $d, layers: 1}\n"
                       "inputs:\n"
                       "  x: {shape: [$batch, $d]}\n"
                       "body:\n"
                       "  - repeat: $layers\n"
                       "    body:\n"
                       "      - linear: {out: $ffn}\n"
                       "      - linear: {out: $d}\n";
    // an override replaces the expression before evaluation; others follow it
    modeldef_override ov[] = {{"d", "16", "s.yaml", 3, 10}, {"layers", "$d / 8", "s.yaml", 4, 10}};
    model *m = build_ok(text, ov, 2, 2, false);
    assert_shape(graph_at(m->g, find_param(m->g, "layers.0.linear.weight")), 2,
                 (int64_t[]){64, 16});
    assert_true(find_param(m->g, "layers.1.linear_1.weight") >= 0);
    assert_true(find_param(m->g, "layers.2.linear.weight") < 0);
    model_free(m);

    diag d;
    modeldef_override bad[] = {{"dd", "16", "s.yaml", 7, 12}};
    assert_null(build(text, bad, 1, 2, false, &d));
    assert_string_equal(d.file, "s.yaml");
    assert_int_equal(d.line, 7);
    assert_int_equal(d.col, 12);
    assert_non_null(strstr(d.msg, "unknown parameter 'dd'"));
    // errors inside an override point into its text
    modeldef_override syn[] = {{"d", "2 * (3", "s.yaml", 5, 20}};
    assert_null(build(text, syn, 1, 2, false, &d));
    assert_int_equal(d.line, 5);
    assert_int_equal(d.col, 26);
    modeldef_override cyc[] = {{"d", "$ffn / 4", "s.yaml", 6, 9}};
    assert_null(build(text, cyc, 1, 2, false, &d));
    assert_string_equal(d.file, "s.yaml");
    assert_int_equal(d.col, 9);
    assert_non_null(strstr(d.msg, "parameter cycle: $d -> $ffn -> $d"));
}

static void test_inputs(void **state) {
    (void)state;
    model *m = build_ok("name: i\n"
                        "params: {vocab: 50, seq: 6}\n"
                        "inputs:\n"
                        "  tokens: {shape: [$batch, $seq], dtype: i32, range: [2, $vocab]}\n"
                        "  mask: {shape: [$seq], dtype: bool}\n"
                        "  h: {shape: [$batch, $seq, 4], dtype: f16}\n"
                        "  x: {shape: [$batch, 4]}\n"
                        "body:\n"
                        "  - embedding: {num: $vocab, dim: 4}\n",
                        NULL, 0, 5, false);
    const graph *g = m->g;
    assert_int_equal(count_op(g, OP_INPUT), 4);
    const graph_node *t = graph_at(g, 0);
    assert_string_equal(t->name, "tokens");
    assert_int_equal(t->dtype, DT_I32);
    assert_shape(t, 2, (int64_t[]){5, 6});
    assert_int_equal(t->ia[0], 2);
    assert_int_equal(t->ia[1], 50);
    assert_int_equal(t->ia[2], 1);
    assert_int_equal(graph_at(g, 1)->dtype, DT_BOOL);
    assert_int_equal(graph_at(g, 2)->dtype, DT_F16);
    assert_int_equal(graph_at(g, 3)->dtype, DT_F32);
    assert_int_equal(graph_at(g, 3)->ia[2], 0);
    // the first input feeds the first layer
    assert_shape(out0(m), 3, (int64_t[]){5, 6, 4});
    assert_int_equal(graph_at(g, g->outputs[0])->src[1], 0);
    model_free(m);
}

static void test_repeat(void **state) {
    (void)state;
    model *m = build_ok("name: r\n"
                        "params: {n: 3}\n"
                        "inputs:\n"
                        "  x: {shape: [$batch, 8]}\n"
                        "body:\n"
                        "  - repeat: $n\n"
                        "    body:\n"
                        "      - linear: {out: 8}\n"
                        "      - relu\n"
                        "  - repeat: 2\n"
                        "    body: [{linear: {out: 4, bias: false}}]\n",
                        NULL, 0, 2, false);
    const graph *g = m->g;
    assert_int_equal(count_op(g, OP_LINEAR), 5);
    assert_int_equal(count_op(g, OP_RELU), 3);
    for (int i = 0; i < 3; i++) {
        char name[64];
        snprintf(name, sizeof name, "n.%d.linear.bias", i);
        assert_true(find_param(g, name) >= 0);
    }
    // a count that is not one $name is called "repeat"
    assert_true(find_param(g, "repeat.1.linear.weight") >= 0);
    assert_true(find_param(g, "repeat.1.linear.bias") < 0);
    assert_shape(out0(m), 2, (int64_t[]){2, 4});
    model_free(m);

    // zero repetitions pass the input through
    m = build_ok("name: r0\n"
                 "inputs:\n"
                 "  x: {shape: [$batch, 8]}\n"
                 "body:\n"
                 "  - repeat: 0\n"
                 "    body: [relu]\n",
                 NULL, 0, 2, false);
    assert_int_equal(m->g->n, 1);
    assert_int_equal(m->g->outputs[0], 0);
    model_free(m);
}

static void test_residual(void **state) {
    (void)state;
    model *m = build_ok("name: res\n"
                        "inputs:\n"
                        "  x: {shape: [$batch, 3, 8]}\n"
                        "body:\n"
                        "  - residual:\n"
                        "      - layer_norm: {}\n"
                        "      - linear: {out: 8}\n"
                        "  - residual:\n"
                        "      - relu\n",
                        NULL, 0, 2, false);
    const graph *g = m->g;
    assert_int_equal(count_op(g, OP_ADD), 2);
    const graph_node *o = out0(m);
    assert_int_equal(o->op, OP_ADD);
    assert_int_equal(graph_at(g, o->src[0])->op, OP_RELU);
    const graph_node *first = graph_at(g, o->src[1]); // the block input: the first residual
    assert_int_equal(first->op, OP_ADD);
    assert_int_equal(graph_at(g, first->src[0])->op, OP_LINEAR);
    assert_int_equal(first->src[1], 0);
    assert_true(find_param(g, "residual.layer_norm.weight") >= 0);
    assert_true(find_param(g, "residual.linear.weight") >= 0);
    model_free(m);
    expect_error("name: res\n"
                 "inputs:\n"
                 "  x: {shape: [$batch, 8]}\n"
                 "body:\n"
                 "  - linear: {out: 4}\n"
                 "  - residual: [{linear: {out: 6}}]\n",
                 6, 5, "turns shape (2, 4) into (2, 6)");
}

// The activations with attributes, from YAML: PyTorch's names, the given
// values or PyTorch's defaults in the op's fa.
static void test_activation_attrs(void **state) {
    (void)state;
    model *m = build_ok("name: acts\n"
                        "inputs:\n"
                        "  x: {shape: [$batch, 8]}\n"
                        "body:\n"
                        "  - mish\n"
                        "  - leaky_relu: {negative_slope: 0.2}\n"
                        "  - elu\n"
                        "  - softplus: {beta: 2, threshold: 10}\n"
                        "  - leaky_relu\n"
                        "  - softplus\n",
                        NULL, 0, 2, false);
    const graph *g = m->g;
    const graph_node *n = out0(m); // softplus, defaults
    assert_int_equal(n->op, OP_SOFTPLUS);
    assert_true(n->fa[0] == 1.0 && n->fa[1] == 20.0);
    n = graph_at(g, n->src[0]); // leaky_relu, default slope
    assert_int_equal(n->op, OP_LEAKY_RELU);
    assert_true(n->fa[0] == 0.01);
    n = graph_at(g, n->src[0]);
    assert_int_equal(n->op, OP_SOFTPLUS);
    assert_true(n->fa[0] == 2.0 && n->fa[1] == 10.0);
    n = graph_at(g, n->src[0]);
    assert_int_equal(n->op, OP_ELU);
    assert_true(n->fa[0] == 1.0);
    n = graph_at(g, n->src[0]);
    assert_int_equal(n->op, OP_LEAKY_RELU);
    assert_true(n->fa[0] == 0.2);
    n = graph_at(g, n->src[0]);
    assert_int_equal(n->op, OP_MISH);
    model_free(m);
    expect_error("name: acts\n"
                 "inputs:\n"
                 "  x: {shape: [$batch, 8]}\n"
                 "body:\n"
                 "  - elu: {slope: 1}\n",
                 5, 11, "elu has no key 'slope'; its keys are alpha");
}

static void test_input_as(void **state) {
    (void)state;
    model *m = build_ok("name: io\n"
                        "inputs:\n"
                        "  x: {shape: [$batch, 8]}\n"
                        "  y: {shape: [$batch, 16]}\n"
                        "body:\n"
                        "  - linear: {out: 16, as: h}\n"
                        "  - linear: {out: 16, input: y, as: g}\n"
                        "  - add: {input: [h, .]}\n"
                        "  - mul: {input: [., g], as: out}\n",
                        NULL, 0, 2, false);
    const graph *g = m->g;
    const graph_node *o = out0(m);
    assert_int_equal(o->op, OP_MUL);
    const graph_node *add = graph_at(g, o->src[0]);
    assert_int_equal(add->op, OP_ADD);
    int h = add->src[0], gg = add->src[1];
    assert_int_equal(o->src[1], gg);
    assert_int_equal(graph_at(g, h)->src[0], 0);  // h reads x
    assert_int_equal(graph_at(g, gg)->src[0], 1); // g reads y
    // `as:` names the parameters
    assert_true(find_param(g, "h.weight") >= 0);
    assert_true(find_param(g, "g.weight") >= 0);
    model_free(m);
    expect_error("name: io\n"
                 "inputs:\n"
                 "  x: {shape: [$batch, 8]}\n"
                 "body:\n"
                 "  - add: {input: [., later]}\n"
                 "  - relu: {as: later}\n",
                 5, 22, "used before it exists");
}

static void test_block_input_as(void **state) {
    (void)state;
    // blocks take `input:` and `as:` beside their key, as layers do
    model *m = build_ok("name: blk\n"
                        "inputs:\n"
                        "  x: {shape: [$batch, 8]}\n"
                        "  y: {shape: [$batch, 8]}\n"
                        "body:\n"
                        "  - repeat: 2\n"
                        "    input: y\n"
                        "    as: enc\n"
                        "    body: [{linear: {out: 8}}]\n"
                        "  - residual: [relu]\n"
                        "    input: x\n"
                        "    as: r\n"
                        "  - add: {input: [enc, r]}\n",
                        NULL, 0, 2, false);
    const graph *g = m->g;
    assert_true(find_param(g, "enc.0.linear.weight") >= 0);
    assert_true(find_param(g, "enc.1.linear.weight") >= 0);
    const graph_node *o = out0(m);
    const graph_node *enc = graph_at(g, o->src[0]), *r = graph_at(g, o->src[1]);
    assert_int_equal(enc->op, OP_LINEAR);
    assert_int_equal(enc->src[1], find_param(g, "enc.1.linear.weight"));
    assert_int_equal(graph_at(g, graph_at(g, enc->src[0])->src[0])->op, OP_INPUT);
    assert_int_equal(graph_at(g, enc->src[0])->src[0], 1); // the first repetition reads y
    assert_int_equal(r->op, OP_ADD);
    assert_int_equal(r->src[1], 0); // the residual adds x back
    model_free(m);
}

static void test_loss(void **state) {
    (void)state;
    const char *text = "name: l\n"
                       "inputs:\n"
                       "  x: {shape: [$batch, 8]}\n"
                       "  labels: {shape: [$batch], dtype: i64, range: [0, 5]}\n"
                       "body:\n"
                       "  - linear: {out: 5, as: logits}\n"
                       "  - relu\n"
                       "loss: {cross_entropy: {input: logits, target: labels, ignore_index: -1}}\n";
    model *m = build_ok(text, NULL, 0, 4, true);
    const graph *g = m->g;
    assert_true(g->loss >= 0);
    const graph_node *l = graph_at(g, g->loss);
    assert_int_equal(l->op, OP_CROSS_ENTROPY);
    assert_int_equal(l->ia[0], -1);
    assert_int_equal(l->fa[0], 0); // no label smoothing
    assert_int_equal(l->ndim, 0);
    model_free(m);
    // label smoothing is the loss's fa0, from a literal or an expression
    m = build_ok("name: ls\n"
                 "params: {eps: 0.1}\n"
                 "inputs:\n"
                 "  x: {shape: [$batch, 8]}\n"
                 "  labels: {shape: [$batch], dtype: i64, range: [0, 5]}\n"
                 "body:\n"
                 "  - linear: {out: 5}\n"
                 "loss: {cross_entropy: {target: labels, label_smoothing: $eps * 2}}\n",
                 NULL, 0, 4, true);
    assert_float_equal(graph_at(m->g, m->g->loss)->fa[0], 0.2, 1e-12);
    model_free(m);
    // an expression outside [0, 1] fails where training builds the loss
    diag d;
    m = build("name: ls\n"
              "params: {eps: 0.1}\n"
              "inputs:\n"
              "  x: {shape: [$batch, 8]}\n"
              "  labels: {shape: [$batch], dtype: i64, range: [0, 5]}\n"
              "body:\n"
              "  - linear: {out: 5}\n"
              "loss: {cross_entropy: {target: labels, label_smoothing: $eps * 20}}\n",
              NULL, 0, 4, true, &d);
    assert_null(m);
    assert_int_equal(d.line, 8);
    assert_non_null(strstr(d.msg, "label_smoothing 2 is outside [0, 1]"));
    // inference builds no loss
    m = build_ok(text, NULL, 0, 4, false);
    assert_int_equal(m->g->loss, -1);
    assert_int_equal(count_op(m->g, OP_CROSS_ENTROPY), 0);
    model_free(m);
    // mse on the final output by default
    m = build_ok("name: l2\n"
                 "inputs:\n"
                 "  x: {shape: [$batch, 8]}\n"
                 "  y: {shape: [$batch, 3]}\n"
                 "body:\n"
                 "  - linear: {out: 3}\n"
                 "loss: {mse: {target: y}}\n",
                 NULL, 0, 2, true);
    l = graph_at(m->g, m->g->loss);
    assert_int_equal(l->op, OP_MSE_LOSS);
    assert_int_equal(graph_at(m->g, l->src[0])->op, OP_LINEAR);
    assert_int_equal(l->src[1], 1);
    model_free(m);
    // a bad name in the loss is caught without training too
    expect_error("name: l3\n"
                 "inputs:\n"
                 "  x: {shape: [$batch, 8]}\n"
                 "body:\n"
                 "  - linear: {out: 3}\n"
                 "loss: {mse: {target: why}}\n",
                 6, 22, "no tensor named 'why'");
}

// `mean:` over loss terms: each term built as alone, summed, scaled by 1/n.
static void test_loss_mean(void **state) {
    (void)state;
    const char *text = "name: qa\n"
                       "inputs:\n"
                       "  x: {shape: [$batch, 6, 8]}\n"
                       "  s: {shape: [$batch], dtype: i32, range: [0, 6]}\n"
                       "  e: {shape: [$batch], dtype: i32, range: [0, 6]}\n"
                       "body:\n"
                       "  - linear: {out: 2}\n"
                       "  - split: {chunks: 2, as: [a, b]}\n"
                       "  - reshape: {input: a, shape: [$batch, 6], as: sa}\n"
                       "  - reshape: {input: b, shape: [$batch, 6], as: eb}\n"
                       "loss:\n"
                       "  mean:\n"
                       "    - cross_entropy: {input: sa, target: s, ignore_index: 6}\n"
                       "    - cross_entropy: {input: eb, target: e}\n";
    model *m = build_ok(text, NULL, 0, 3, true);
    const graph *g = m->g;
    const graph_node *l = graph_at(g, g->loss);
    assert_int_equal(l->op, OP_SCALE);
    assert_true(l->fa[0] == 0.5 && l->fa[1] == 0.0);
    const graph_node *sum = graph_at(g, l->src[0]);
    assert_int_equal(sum->op, OP_ADD);
    assert_int_equal(sum->ndim, 0);
    const graph_node *t0 = graph_at(g, sum->src[0]), *t1 = graph_at(g, sum->src[1]);
    assert_int_equal(t0->op, OP_CROSS_ENTROPY);
    assert_int_equal(t1->op, OP_CROSS_ENTROPY);
    assert_int_equal(t0->ia[0], 6);    // each term keeps its own keys
    assert_int_equal(t1->ia[0], -100); // and its defaults
    assert_int_equal(count_op(g, OP_CROSS_ENTROPY), 2);
    model_free(m);
    // inference: no loss, no terms, and still the names checked
    m = build_ok(text, NULL, 0, 3, false);
    assert_int_equal(m->g->loss, -1);
    assert_int_equal(count_op(m->g, OP_CROSS_ENTROPY), 0);
    model_free(m);
    // one term: its loss as it is, no scale
    m = build_ok("name: one\n"
                 "inputs:\n"
                 "  x: {shape: [$batch, 8]}\n"
                 "  y: {shape: [$batch, 3]}\n"
                 "body:\n"
                 "  - linear: {out: 3}\n"
                 "loss: {mean: [{mse: {target: y}}]}\n",
                 NULL, 0, 2, true);
    assert_int_equal(graph_at(m->g, m->g->loss)->op, OP_MSE_LOSS);
    model_free(m);
    expect_error("name: l4\n"
                 "inputs:\n"
                 "  x: {shape: [$batch, 8]}\n"
                 "body:\n"
                 "  - linear: {out: 3}\n"
                 "loss: {mean: [{mse: {target: x}}, {mse: {target: why}}]}\n",
                 6, 50, "no tensor named 'why'");
    expect_error("name: l5\n"
                 "inputs:\n"
                 "  x: {shape: [$batch, 8]}\n"
                 "body:\n"
                 "  - linear: {out: 3}\n"
                 "loss: {mean: []}\n",
                 6, 14, "a list of 1 to 8 losses");
}

// positional_embedding's offset: rows offset .. offset + T of the table.
static void test_positional_offset(void **state) {
    (void)state;
    model *m = build_ok("name: pos\n"
                        "inputs:\n"
                        "  x: {shape: [$batch, 5, 4]}\n"
                        "body:\n"
                        "  - positional_embedding: {max: 9, offset: 2}\n",
                        NULL, 0, 2, false);
    const graph *g = m->g;
    int w = find_param(g, "positional_embedding.weight");
    assert_true(w >= 0);
    assert_int_equal(graph_at(g, w)->shape[0], 9);
    assert_int_equal(count_op(g, OP_SLICE), 1);
    for (int i = 0; i < g->n; i++)
        if (g->nodes[i].op == OP_SLICE) {
            assert_int_equal(g->nodes[i].src[0], w);
            assert_int_equal(g->nodes[i].ia[0], 0); // axis
            assert_int_equal(g->nodes[i].ia[1], 2); // start
            assert_int_equal(g->nodes[i].shape[0], 5);
        }
    model_free(m);
    expect_error("name: pos2\n"
                 "inputs:\n"
                 "  x: {shape: [$batch, 5, 4]}\n"
                 "body:\n"
                 "  - positional_embedding: {max: 6, offset: 6}\n",
                 5, 36, "offset 6 is outside the 6 rows");
}

// sinusoidal_positions: the tables' values against those the classes make
// (transformers' XGLMSinusoidalPositionalEmbedding.get_embedding(7, 9, 1),
// fairseq's form with an odd width and padding row 1, and
// PegasusSinusoidalPositionalEmbedding(5, 7).create_weight(); some rows),
// the table a buffer or a frozen parameter that training leaves alone
static const double xglm_7x9[][9] = {
    [0] = {0, 0, 0, 0, 1, 1, 1, 1, 0},
    [1] = {0, 0, 0, 0, 0, 0, 0, 0, 0},
    [3] = {0.14112000167369843, 0.13879810273647308, 0.006463258992880583, 0.0002999999560415745,
           -0.9899924993515015, 0.9903206825256348, 0.9999791383743286, 0.9999999403953552, 0},
    [6] = {-0.279415488243103, 0.27490928769111633, 0.012926247902214527, 0.000599999853875488,
           0.9601702690124512, 0.9614701867103577, 0.9999164342880249, 0.9999998211860657, 0},
};
static const double pegasus_5x7[][7] = {
    [1] = {0.8414709568023682, 0.07190645486116409, 0.005179451312869787, 0.000372759357560426,
           0.5403022766113281, 0.9974113702774048, 0.9999865889549255},
    [4] = {-0.756802499294281, 0.28391462564468384, 0.020716415718197823, 0.0014910369645804167,
           -0.6536436080932617, 0.9588495492935181, 0.9997853636741638},
};

// BERT-pytorch's PositionalEmbedding(6, max_len=5).pe (the interleaved form)
static const double interleaved_5x6[][6] = {
    [1] = {0.8414709568023682, 0.5403023362159729, 0.046399228274822235, 0.9989229440689087,
           0.0021544331684708595, 0.9999976754188538},
    [4] = {-0.756802499294281, -0.6536436080932617, 0.18459872901439667, 0.9828139543533325,
           0.00861763209104538, 0.9999628663063049},
};

static const float *source_values(const model *m, enum op op, int64_t rows, int64_t cols) {
    for (int i = 0; i < m->g->n; i++) {
        const graph_node *n = &m->g->nodes[i];
        if (n->op == op && n->ndim == 2 && n->shape[0] == rows && n->shape[1] == cols)
            return tensor_data(m->values[i]);
    }
    fail_msg("no %s of (%lld, %lld)", op_name(op), (long long)rows, (long long)cols);
    return NULL;
}

static void test_sinusoidal_positions(void **state) {
    (void)state;
    model *m = build_ok("name: sin\n"
                        "inputs:\n"
                        "  x: {shape: [$batch, 5, 9]}\n"
                        "body:\n"
                        "  - sinusoidal_positions: {max: 7, offset: 2, padding_idx: 1}\n",
                        NULL, 0, 2, false);
    assert_int_equal(model_init_values(m, 1), 0);
    const float *t = source_values(m, OP_BUFFER, 7, 9);
    for (int r = 0; r < 7; r++)
        for (int c = 0; c < 9 && (r < 2 || r == 3 || r == 6); c++)
            assert_float_equal(t[r * 9 + c], xglm_7x9[r][c], 2e-7);
    assert_int_equal(graph_param_count(m->g), 0);
    for (int i = 0; i < m->g->n; i++) // rows 2 .. 6 added
        if (m->g->nodes[i].op == OP_SLICE)
            assert_int_equal(m->g->nodes[i].ia[1], 2);
    model_free(m);
    const char *pegasus = "name: peg\n"
                          "inputs:\n"
                          "  x: {shape: [$batch, 5, 7]}\n"
                          "  y: {shape: [$batch, 5, 2]}\n"
                          "body:\n"
                          "  - sinusoidal_positions: {max: 5, form: pegasus, parameter: true}\n"
                          "  - linear: {out: 2}\n"
                          "loss: {mse: {target: y}}\n";
    m = build_ok(pegasus, NULL, 0, 2, true);
    assert_int_equal(graph_param_count(m->g), 35 + 2 * 7 + 2); // the table counts
    int w = find_param(m->g, "sinusoidal_positions.weight");
    assert_true(w >= 0);
    char err[256];
    train_opts o = train_opts_default();
    assert_int_equal(autograd_build(m->g, &o, true, err, sizeof err), 0);
    assert_int_equal(model_init_values(m, 1), 0);
    t = source_values(m, OP_PARAM, 5, 7);
    for (int c = 0; c < 7; c++) {
        assert_float_equal(t[7 + c], pegasus_5x7[1][c], 2e-7);
        assert_float_equal(t[28 + c], pegasus_5x7[4][c], 2e-7);
    }
    // frozen: no gradient among the outputs, no update reads it for writing
    for (int k = 1; k < m->g->noutputs; k++)
        assert_int_not_equal(autograd_param_of_output(m->g, k), w);
    for (int i = 0; i < m->g->n; i++)
        if (op_kind(m->g->nodes[i].op) == OPK_UPDATE)
            assert_int_not_equal(m->g->nodes[i].src[0], w);
    assert_int_equal(m->g->noutputs, 1 + 2); // the loss, the linear's two
    model_free(m);
    m = build_ok("name: vaswani\n"
                 "inputs:\n"
                 "  x: {shape: [$batch, 5, 6]}\n"
                 "body:\n"
                 "  - sinusoidal_positions: {max: 5, form: interleaved}\n",
                 NULL, 0, 2, false);
    assert_int_equal(model_init_values(m, 1), 0);
    t = source_values(m, OP_BUFFER, 5, 6);
    for (int c = 0; c < 6; c++) {
        assert_float_equal(t[6 + c], interleaved_5x6[1][c], 2e-7);
        assert_float_equal(t[24 + c], interleaved_5x6[4][c], 2e-7);
    }
    model_free(m);
    expect_error("name: bad\n"
                 "inputs:\n"
                 "  x: {shape: [$batch, 5, 8]}\n"
                 "body:\n"
                 "  - sinusoidal_positions: {max: 5, form: xlm}\n",
                 5, 36, "form 'xlm' is not one of fairseq, pegasus, interleaved");
}

// `unused: true`: the layer's parameters are held (a causal LM's
// cross-attention), none of its ops are in the graph, its input passes on;
// attention's `scale` replaces 1/sqrt(head_dim), and 1 makes no kernel
static void test_unused_and_scale(void **state) {
    (void)state;
    const char *text = "name: held\n"
                       "inputs:\n"
                       "  x: {shape: [$batch, 5, 8]}\n"
                       "  y: {shape: [$batch, 5, 4]}\n"
                       "body:\n"
                       "  - attention: {heads: 2, unused: true, as: cross}\n"
                       "  - layer_norm: {unused: true}\n"
                       "  - attention: {heads: 2, scale: 1}\n"
                       "  - attention: {heads: 2}\n"
                       "  - linear: {out: 4, as: out}\n"
                       "loss: {mse: {target: y}}\n";
    for (int training = 0; training < 2; training++) {
        model *m = build_ok(text, NULL, 0, 2, training);
        const graph *g = m->g;
        static const char *held[] = {"cross.q.weight", "cross.q.bias",   "cross.k.weight",
                                     "cross.v.bias",   "cross.o.weight", "layer_norm.weight",
                                     "layer_norm.bias"};
        for (int i = 0; i < 7; i++) {
            int p = find_param(g, held[i]);
            assert_true(p >= 0);
            for (int j = 0; j < g->n; j++) // nothing reads a held parameter
                for (int k = 0; k < g->nodes[j].nsrc; k++)
                    assert_int_not_equal(g->nodes[j].src[k], p);
        }
        assert_int_equal(count_op(g, OP_LAYER_NORM), 0);
        // two attentions run: q, k, v, o linears each, and the head
        assert_int_equal(count_op(g, OP_LINEAR), 9);
        assert_int_equal(count_op(g, OP_SCALE), 1); // the second only
        for (int i = 0; i < g->n; i++)
            if (g->nodes[i].op == OP_SCALE)
                assert_float_equal(g->nodes[i].fa[0], 0.5, 1e-12); // 1/sqrt(4)
        // the first running attention's q projection reads x itself
        int q = -1;
        for (int i = 0; i < g->n && q < 0; i++)
            if (g->nodes[i].op == OP_LINEAR)
                q = i;
        assert_int_equal(graph_at(g, g->nodes[q].src[0])->op, OP_INPUT);
        model_free(m);
    }
    expect_error("name: bad\n"
                 "inputs:\n"
                 "  x: {shape: [$batch, 5, 8]}\n"
                 "body:\n"
                 "  - relu: {unused: true}\n",
                 5, 20, "has no parameters");
}

// ConvBERT's unfold: a grouped conv2d with the one-hot taps of
// INIT_UNFOLD_TAPS gives torch's unfold over a (K, 1) window, channel c's
// tap j at c K + j, rows past the ends zero; and the mixed attention builds
// with conv-bert-base's parameter shapes.
static void test_convbert_unfold(void **state) {
    (void)state;
    enum { C = 3, T = 5, K = 3, P = 1 };
    graph *g = graph_new();
    assert_non_null(g);
    int x = graph_input(g, "x", DT_F32, 4, (int64_t[]){1, C, T, 1});
    int taps = graph_buffer(g, "taps", DT_F32, 4, (int64_t[]){C * K, 1, K, 1}, INIT_UNFOLD_TAPS, 0);
    int u = graph_op(g, OP_CONV2D, 2, (int[]){x, taps}, (int64_t[GRAPH_MAX_IA]){1, 1, P, 0, 1, 1, C},
                     NULL);
    assert_true(u >= 0);
    graph_output(g, u);
    model *m = model_new(g, "unfold", "test", 1);
    assert_non_null(m);
    assert_int_equal(model_init_values(m, 3), 0);
    assert_int_equal(model_init_inputs(m, 3, 0), 0);
    double *out[1] = {NULL};
    char err[256];
    assert_int_equal(ref_run(m, out, err, sizeof err), 0);
    const float *xv = tensor_f32(m->values[x]);
    for (int c = 0; c < C; c++)
        for (int j = 0; j < K; j++)
            for (int t = 0; t < T; t++) {
                int s = t + j - P;
                double want = s >= 0 && s < T ? xv[c * T + s] : 0;
                assert_float_equal(out[0][(c * K + j) * T + t], want, 1e-12);
            }
    free(out[0]);
    model_free(m);
    m = build_ok("name: convbert\n"
                 "inputs:\n"
                 "  x: {shape: [$batch, 16, 768]}\n"
                 "body:\n"
                 "  - convbert_attention: {heads: 6, kernel: 9}\n",
                 NULL, 0, 2, false);
    static const struct {
        const char *name;
        int64_t numel;
    } want[] = {{"convbert_attention.query.weight", 768 * 384},
                {"convbert_attention.key_conv.depthwise.weight", 768 * 9},
                {"convbert_attention.key_conv.pointwise.weight", 384 * 768},
                {"convbert_attention.key_conv.bias", 384},
                {"convbert_attention.conv_kernel.weight", 384 * 54},
                {"convbert_attention.conv_out.weight", 768 * 384}};
    for (int i = 0; i < 6; i++) {
        int p = find_param(m->g, want[i].name);
        assert_true(p >= 0);
        assert_int_equal(graph_node_numel(graph_at(m->g, p)), want[i].numel);
    }
    assert_shape(out0(m), 3, (int64_t[]){2, 16, 768});
    model_free(m);
    expect_error("name: bad\n"
                 "inputs:\n"
                 "  x: {shape: [$batch, 16, 64]}\n"
                 "body:\n"
                 "  - convbert_attention: {heads: 2, kernel: 4}\n",
                 5, 36, "kernel must be odd");
}

// matmul broadcasts its batch dims; parameter is a learned tensor (held
// with `unused: true`); relative_sinusoid's table holds positions T .. -T+1
static void test_matmul_parameter_relative(void **state) {
    (void)state;
    model *m = build_ok("name: rel\n"
                        "inputs:\n"
                        "  x: {shape: [$batch, 3, 4, 8]}\n"
                        "body:\n"
                        "  - parameter: {shape: [3, 8, 5], as: w}\n"
                        "  - parameter: {shape: [7], unused: true, as: held}\n"
                        "  - matmul: {input: [x, w]}\n"
                        "  - relative_sinusoid: {dim: 6}\n",
                        NULL, 0, 2, false);
    const graph *g = m->g;
    int w = find_param(g, "w.weight"), held = find_param(g, "held.weight");
    assert_true(w >= 0 && held >= 0);
    assert_shape(graph_at(g, w), 3, (int64_t[]){3, 8, 5});
    assert_int_equal(count_op(g, OP_MATMUL), 1);
    for (int i = 0; i < g->n; i++) {
        if (g->nodes[i].op == OP_MATMUL)
            assert_shape(&g->nodes[i], 4, (int64_t[]){2, 3, 4, 5});
        for (int k = 0; k < g->nodes[i].nsrc; k++)
            assert_int_not_equal(g->nodes[i].src[k], held);
    }
    // T = 4 rows of the matmul's (2, 3, 4, 5): 8 rows of 6
    const graph_node *t = out0(m);
    assert_int_equal(t->op, OP_BUFFER);
    assert_shape(t, 2, (int64_t[]){8, 6});
    assert_int_equal(model_init_values(m, 1), 0);
    const float *v = m->values[g->outputs[0]]->storage->data;
    for (int r = 0; r < 8; r++)
        for (int c = 0; c < 3; c++) {
            double ang = (4.0 - r) * pow(10000.0, -2.0 * c / 6.0);
            assert_float_equal(v[r * 6 + c], sin(ang), 1e-6);
            assert_float_equal(v[r * 6 + 3 + c], cos(ang), 1e-6);
        }
    model_free(m);
    expect_error("name: bad\n"
                 "inputs:\n"
                 "  x: {shape: [$batch, 4, 8]}\n"
                 "body:\n"
                 "  - parameter: {shape: [8, 2], as: w}\n"
                 "  - matmul: {input: [x, w]}\n"
                 "  - parameter: {shape: [2], std: 0}\n"
                 "  - matmul: {input: [x, x]}\n",
                 8, 5, "inner dimensions differ");
}

static void test_nested_repeat_in_residual(void **state) {
    (void)state;
    model *m = build_ok("name: nest\n"
                        "params: {blocks: 2, inner: 3}\n"
                        "inputs:\n"
                        "  x: {shape: [$batch, 8]}\n"
                        "body:\n"
                        "  - repeat: $blocks\n"
                        "    body:\n"
                        "      - residual:\n"
                        "          - repeat: $inner\n"
                        "            body:\n"
                        "              - linear: {out: 8}\n"
                        "          - relu\n",
                        NULL, 0, 2, false);
    const graph *g = m->g;
    assert_int_equal(count_op(g, OP_LINEAR), 6);
    assert_int_equal(count_op(g, OP_ADD), 2);
    assert_true(find_param(g, "blocks.1.residual.inner.2.linear.weight") >= 0);
    assert_int_equal(graph_param_count(g), 6 * (64 + 8));
    model_free(m);
}

static void test_scope_in_repeat(void **state) {
    (void)state;
    // `h` inside the body is that repetition's h
    model *m = build_ok("name: sc\n"
                        "inputs:\n"
                        "  x: {shape: [$batch, 8]}\n"
                        "body:\n"
                        "  - linear: {out: 8, as: h}\n"
                        "  - repeat: 2\n"
                        "    body:\n"
                        "      - linear: {out: 8, as: h}\n"
                        "      - relu\n"
                        "      - add: {input: [., h]}\n"
                        "  - add: {input: [., h]}\n",
                        NULL, 0, 2, false);
    const graph *g = m->g;
    int adds[3], n = 0;
    for (int i = 0; i < g->n; i++)
        if (g->nodes[i].op == OP_ADD)
            adds[n++] = i;
    assert_int_equal(n, 3);
    for (int r = 0; r < 2; r++) {
        const graph_node *h = graph_at(g, g->nodes[adds[r]].src[1]);
        char name[64];
        snprintf(name, sizeof name, "repeat.%d.h.weight", r);
        assert_int_equal(h->op, OP_LINEAR);
        assert_int_equal(h->src[1], find_param(g, name));
    }
    // after the repeat, h is the outer one again
    const graph_node *h = graph_at(g, g->nodes[adds[2]].src[1]);
    assert_int_equal(h->src[1], find_param(g, "h.weight"));
    model_free(m);
    expect_error("name: sc\n"
                 "inputs:\n"
                 "  x: {shape: [$batch, 8]}\n"
                 "body:\n"
                 "  - repeat: 2\n"
                 "    body: [{linear: {out: 8, as: inner}}]\n"
                 "  - add: {input: [., inner]}\n",
                 7, 22, "not visible here");
}

static void test_split_as(void **state) {
    (void)state;
    model *m = build_ok("name: qkv\n"
                        "inputs:\n"
                        "  x: {shape: [$batch, 4, 8]}\n"
                        "body:\n"
                        "  - linear: {out: 24}\n"
                        "  - split: {chunks: 3, as: [q, k, v]}\n"
                        "  - concat: {input: [v, q], axis: -1}\n",
                        NULL, 0, 2, false);
    const graph *g = m->g;
    const graph_node *o = out0(m);
    assert_int_equal(o->op, OP_CONCAT);
    assert_shape(o, 3, (int64_t[]){2, 4, 16});
    const graph_node *v = graph_at(g, o->src[0]), *q = graph_at(g, o->src[1]);
    assert_int_equal(v->op, OP_SLICE);
    assert_int_equal(q->op, OP_SLICE);
    assert_int_equal(v->ia[1], 16); // v starts after q and k
    assert_int_equal(q->ia[1], 0);
    model_free(m);
}

static void test_outputs(void **state) {
    (void)state;
    model *m = build_ok("name: outs\n"
                        "inputs:\n"
                        "  x: {shape: [$batch, 8]}\n"
                        "body:\n"
                        "  - linear: {out: 6, as: hidden}\n"
                        "  - linear: {out: 2, as: logits}\n"
                        "  - relu\n"
                        "outputs: [logits, hidden]\n",
                        NULL, 0, 2, false);
    const graph *g = m->g;
    assert_int_equal(g->noutputs, 2);
    assert_int_equal(graph_at(g, g->outputs[0])->src[1], find_param(g, "logits.weight"));
    assert_int_equal(graph_at(g, g->outputs[1])->src[1], find_param(g, "hidden.weight"));
    assert_int_equal(count_op(g, OP_RELU), 1); // built, though not an output
    model_free(m);
    // by default, the body's final output
    m = build_ok("name: outs\n"
                 "inputs:\n"
                 "  x: {shape: [$batch, 8]}\n"
                 "body:\n"
                 "  - linear: {out: 6}\n"
                 "  - relu\n",
                 NULL, 0, 2, false);
    assert_int_equal(m->g->noutputs, 1);
    assert_int_equal(out0(m)->op, OP_RELU);
    model_free(m);
}

static void test_values(void **state) {
    (void)state;
    // bools, words, lists of expressions, quoted expressions, floats
    model *m =
        build_ok("name: v\n"
                 "params: {c: 4, eps: 1e-3}\n"
                 "inputs:\n"
                 "  x: {shape: [$batch, $c, 6, 6]}\n"
                 "body:\n"
                 "  - conv2d: {out: 2 * $c, kernel: [3, $c - 1], padding: [1, 0], bias: false}\n"
                 "  - batch_norm: {eps: $eps / 10}\n"
                 "  - upsample: {scale: 2, mode: nearest}\n"
                 "  - linear: {out: \"$c * 3\"}\n",
                 NULL, 0, 2, false);
    const graph *g = m->g;
    assert_shape(graph_at(g, find_param(g, "conv2d.weight")), 4, (int64_t[]){8, 4, 3, 3});
    assert_true(find_param(g, "conv2d.bias") < 0);
    for (int i = 0; i < g->n; i++)
        if (g->nodes[i].op == OP_BATCH_NORM)
            assert_true(g->nodes[i].fa[0] > 0.99e-4 && g->nodes[i].fa[0] < 1.01e-4);
    assert_shape(out0(m), 4, (int64_t[]){2, 8, 12, 12});
    model_free(m);
}

// A block called twice builds what the same layers written out build: the
// same ops and parameter shapes, named under each call's prefix, with the
// call's values (numbers, booleans, words) and the defaults (over the
// model's parameters) in place; a model parameter that names a block
// parameter's name still means the model's.
static void test_blocks(void **state) {
    (void)state;
    model *m = build_ok("name: b\n"
                        "params: {c: 4, out: 3, k: $out}\n"
                        "inputs:\n"
                        "  x: {shape: [$batch, $c, 8, 8]}\n"
                        "blocks:\n"
                        "  unit:\n"
                        "    params: {out: ~, kernel: $c - 3, bias: false, pool: nearest}\n"
                        "    inputs: [y, skip]\n"
                        "    body:\n"
                        "      - conv2d: {out: $out, kernel: $kernel, bias: $bias}\n"
                        "      - upsample: {scale: 1, mode: $pool}\n"
                        "      - conv2d: {out: $k, kernel: 1, input: skip, as: s}\n"
                        "      - add: {input: [., s]}\n"
                        "  pair:\n"
                        "    params: {w: ~}\n"
                        "    body:\n"
                        "      - identity: {as: i}\n"
                        "      - unit: {out: $w, input: [., i], bias: true}\n"
                        "      - unit: {out: $w, input: [., i], as: second}\n"
                        "body:\n"
                        "  - pair: {w: 3}\n",
                        NULL, 0, 2, false);
    const graph *g = m->g;
    assert_shape(graph_at(g, find_param(g, "pair.unit.conv2d.weight")), 4,
                 (int64_t[]){3, 4, 1, 1});
    assert_true(find_param(g, "pair.unit.conv2d.bias") >= 0);   // bias: true given
    assert_true(find_param(g, "pair.second.conv2d.bias") < 0);  // the default, false
    assert_shape(graph_at(g, find_param(g, "pair.second.conv2d.weight")), 4,
                 (int64_t[]){3, 3, 1, 1});
    // $k is the model's (3), though the block's own $out is 3 here too
    assert_shape(graph_at(g, find_param(g, "pair.second.s.weight")), 4, (int64_t[]){3, 4, 1, 1});
    assert_int_equal(count_op(g, OP_CONV2D), 4);
    assert_shape(out0(m), 4, (int64_t[]){2, 3, 8, 8});
    model_free(m);
    // the body sees its own inputs only, not the caller's names
    expect_error("name: e\n"
                 "inputs:\n"
                 "  x: {shape: [$batch, 8]}\n"
                 "blocks:\n"
                 "  lin:\n"
                 "    body:\n"
                 "      - add: {input: [., x]}\n"
                 "body:\n"
                 "  - lin\n",
                 7, 26, "no tensor named 'x' in block 'lin'");
}

// mean over one axis, with and without keepdim; conv2d `share:` makes one
// weight and bias that every layer naming it uses (CoaT's position encodings),
// counted once, and a layer that needs another shape is an error at the key
static void test_mean_and_share(void **state) {
    (void)state;
    model *m =
        build_ok("name: ms\n"
                 "inputs:\n"
                 "  x: {shape: [$batch, 4, 6, 6]}\n"
                 "  t: {shape: [$batch, 5, 8]}\n"
                 "body:\n"
                 "  - conv2d: {out: 4, kernel: 3, padding: 1, groups: 4, share: pe, input: x}\n"
                 "  - conv2d: {out: 4, kernel: 3, padding: 1, groups: 4, share: pe}\n"
                 "  - mean: {axis: 1, keepdim: true, input: t, as: k}\n"
                 "  - mean: {axis: -2, input: t}\n"
                 "outputs: [., k]\n",
                 NULL, 0, 2, false);
    const graph *g = m->g;
    assert_true(find_param(g, "pe.weight") >= 0 && find_param(g, "pe.bias") >= 0);
    assert_int_equal(graph_param_count(g), 4 * 9 + 4);
    assert_int_equal(count_op(g, OP_CONV2D), 2);
    assert_int_equal(count_op(g, OP_MEAN), 2);
    assert_shape(graph_at(g, g->outputs[0]), 2, (int64_t[]){2, 8});
    assert_shape(graph_at(g, g->outputs[1]), 3, (int64_t[]){2, 1, 8});
    model_free(m);
    expect_error("name: bad\n"
                 "inputs:\n"
                 "  x: {shape: [$batch, 4, 6, 6]}\n"
                 "body:\n"
                 "  - conv2d: {out: 4, kernel: 3, padding: 1, groups: 4, share: pe}\n"
                 "  - conv2d: {out: 4, kernel: 5, padding: 2, groups: 4, share: pe}\n",
                 6, 56, "the shared 'pe.weight' is (4, 1, 3, 3)");
    expect_error("name: bad\n"
                 "inputs:\n"
                 "  x: {shape: [$batch, 4, 8]}\n"
                 "body:\n"
                 "  - mean: {axis: 3}\n",
                 5, 12, "mean: axis 3 is outside the input's 3 dimensions");
}

static void test_errors(void **state) {
    (void)state;
    // the column inside a quoted scalar counts from its first character
    expect_error("name: e\n"
                 "inputs:\n"
                 "  x: {shape: [$batch, 8]}\n"
                 "body:\n"
                 "  - linear: {out: \"$wdth\"}\n",
                 5, 20, "unknown parameter $wdth");
    // nn_build's complaint lands on the key it blames
    expect_error("name: e\n"
                 "inputs:\n"
                 "  x: {shape: [$batch, 8]}\n"
                 "body:\n"
                 "  - linear:\n"
                 "      out: 4\n"
                 "      bias: 3\n",
                 7, 7, "'bias' must be true or false");
    expect_error("name: e\n"
                 "inputs: {x: {shape: [$batch, 8]}}\n"
                 "body: [relu]\n"
                 "outputs: [.]\n"
                 "family: [a]\n",
                 5, 9, "family must be a word");
    diag d;
    assert_null(build("name: e\ninputs: {x: {shape: [4]}}\nbody: [relu]\n", NULL, 0, 0, false, &d));
    assert_non_null(strstr(d.msg, "batch must be positive"));
    modeldef *md;
    assert_int_equal(modeldef_load("/nonexistent/m.yaml", &md, &d), -1);
    assert_string_equal(d.file, "/nonexistent/m.yaml");
    const char *path = write_model("empty.yaml", "");
    assert_int_equal(modeldef_load(path, &md, &d), -1);
    assert_non_null(strstr(d.msg, "empty"));
    // names and family come from the file
    path =
        write_model("n.yaml", "name: nm\nfamily: fam\ninputs: {x: {shape: [2]}}\nbody: [relu]\n");
    assert_int_equal(modeldef_load(path, &md, &d), 0);
    assert_string_equal(modeldef_name(md), "nm");
    assert_string_equal(modeldef_family(md), "fam");
    modeldef_free(md);
}

// A layer known but not built yet (nn_layer_unbuilt): the model loads, the
// names it defines are known to the layers after it, and building fails at
// the layer with its reason; a misspelling is still an unknown layer, with
// the unbuilt name as the suggestion.
static void test_unbuilt(void **state) {
    (void)state;
    assert_non_null(nn_layer_unbuilt("lsh_attention"));
    assert_non_null(nn_layer_unbuilt("block_sparse_attention"));
    assert_non_null(nn_layer_unbuilt("isoneutral_mixing"));
    assert_null(nn_layer_unbuilt("sliding_window_attention")); // attention's window now
    assert_null(nn_layer_unbuilt("linear"));
    assert_false(nn_layer_known("lsh_attention"));
    const char *text = "name: u\n"
                       "inputs: {x: {shape: [$batch, 4, 8]}}\n"
                       "body:\n"
                       "  - linear: {out: 8}\n"
                       "  - lsh_attention: {heads: 2, buckets: 4, as: h}\n"
                       "  - block_sparse_attention\n"
                       "  - linear: {out: 8, input: h}\n";
    const char *path = write_model("u.yaml", text);
    modeldef *md;
    diag d = {0};
    if (modeldef_load(path, &md, &d) < 0)
        fail_msg("unexpected error: %d:%d: %s", d.line, d.col, d.msg);
    diag why = {0};
    assert_true(modeldef_unbuilt(md, &why)); // the first one
    assert_int_equal(why.line, 5);
    assert_int_equal(why.col, 5);
    assert_non_null(strstr(why.msg, "layer 'lsh_attention' is not built yet (Reformer's"));
    model *m = NULL;
    assert_int_equal(modeldef_build(md, NULL, 0, 2, &(modeldef_opts){0}, &m, &d), -1);
    assert_null(m);
    assert_string_equal(d.msg, why.msg);
    assert_int_equal(d.line, 5);
    modeldef_free(md);
    // a model without one
    path = write_model("b.yaml",
                       "name: b\ninputs: {x: {shape: [2, 8]}}\nbody: [{linear: {out: 4}}]\n");
    assert_int_equal(modeldef_load(path, &md, &d), 0);
    assert_false(modeldef_unbuilt(md, &why));
    modeldef_free(md);
    expect_error("name: e\ninputs: {x: {shape: [2, 8]}}\nbody:\n  - lsh_atention: {heads: 2}\n", 4,
                 5, "unknown layer 'lsh_atention'; did you mean 'lsh_attention'?");
    expect_error("name: e\ninputs: {x: {shape: [2, 8]}}\nbody:\n  - lienar: {out: 2}\n", 4, 5,
                 "did you mean 'linear'?");
}

// `train_needs:` (modeldef_train_unbuilt): the model loads and builds for
// inference, and its train entries get a located reason naming what is
// missing; a misspelled or non-word value is an error.
static void test_train_needs(void **state) {
    (void)state;
    const char *path = write_model("tn.yaml", "name: tn\n"
                                              "inputs: {x: {shape: [$batch, 8]}}\n"
                                              "body: [{linear: {out: 4}}, tanh]\n"
                                              "train_needs: second_order_gradients\n");
    modeldef *md;
    diag d = {0}, why = {0};
    if (modeldef_load(path, &md, &d) < 0)
        fail_msg("unexpected error: %d:%d: %s", d.line, d.col, d.msg);
    assert_false(modeldef_unbuilt(md, &why));
    assert_true(modeldef_train_unbuilt(md, &why));
    assert_int_equal(why.line, 4);
    assert_int_equal(why.col, 14);
    assert_non_null(strstr(why.msg, "training needs second-order gradients: "));
    model *m = NULL;
    assert_int_equal(modeldef_build(md, NULL, 0, 2, &(modeldef_opts){0}, &m, &d), 0);
    model_free(m);
    modeldef_free(md);
    path = write_model("tp.yaml", "name: tp\n"
                                  "inputs: {x: {shape: [$batch, 8]}}\n"
                                  "body: [{linear: {out: 4}}]\n"
                                  "train_needs: inference_only\n");
    assert_int_equal(modeldef_load(path, &md, &d), 0);
    assert_true(modeldef_train_unbuilt(md, &why));
    assert_non_null(strstr(why.msg, "no training: "));
    modeldef_free(md);
    // a model without it trains as usual
    path = write_model("tq.yaml", "name: tq\ninputs: {x: {shape: [2, 8]}}\nbody: [relu]\n");
    assert_int_equal(modeldef_load(path, &md, &d), 0);
    assert_false(modeldef_train_unbuilt(md, &why));
    modeldef_free(md);
    expect_error("name: e\ninputs: {x: {shape: [2, 8]}}\nbody: [relu]\n"
                 "train_needs: second_order_gradient\n",
                 4, 14,
                 "unknown train_needs 'second_order_gradient'; did you mean "
                 "'second_order_gradients'?");
    expect_error("name: e\ninputs: {x: {shape: [2, 8]}}\nbody: [relu]\ntrain_needs: [a]\n", 4, 14,
                 "train_needs must be a word");
}

// The outputs' mean as the loss (a suite's `loss: output_mean`): each
// floating output's mean over all its elements, averaged; the model's own
// `loss:` is left out, and a model without one trains. The `output_mean`
// loss term is the same mean of one tensor, and takes no target.
static void test_output_mean_loss(void **state) {
    (void)state;
    const char *text = "name: om\n"
                       "inputs: {x: {shape: [$batch, 3, 4]}}\n"
                       "body:\n"
                       "  - linear: {out: 5, as: a}\n"
                       "  - linear: {out: 2, input: x, as: b}\n"
                       "outputs: [a, b]\n";
    const char *path = write_model("om.yaml", text);
    modeldef *md;
    diag d = {0};
    assert_int_equal(modeldef_load(path, &md, &d), 0);
    model *m = NULL;
    assert_int_equal(modeldef_build(md, NULL, 0, 2,
                                    &(modeldef_opts){.training = true, .output_mean_loss = true},
                                    &m, &d),
                     0);
    const graph *g = m->g;
    const graph_node *l = &g->nodes[g->loss];
    assert_int_equal(l->ndim, 0);
    assert_int_equal(l->op, OP_SCALE); // (mean a + mean b) / 2
    assert_true(l->fa[0] == 0.5);
    const graph_node *sum = &g->nodes[l->src[0]];
    assert_int_equal(sum->op, OP_ADD);
    for (int i = 0; i < 2; i++) {
        const graph_node *r = &g->nodes[sum->src[i]]; // the mean reshaped to a scalar
        const graph_node *mean = &g->nodes[r->src[0]];
        assert_int_equal(mean->op, OP_MEAN);
        assert_int_equal(g->nodes[mean->src[0]].ndim, 1); // over every element
        assert_int_equal(g->nodes[mean->src[0]].shape[0], i == 0 ? 2 * 3 * 5 : 2 * 3 * 2);
    }
    model_free(m);
    // without the option the model has no loss: none is built
    assert_int_equal(modeldef_build(md, NULL, 0, 2, &(modeldef_opts){.training = true}, &m, &d), 0);
    assert_int_equal(m->g->loss, -1);
    model_free(m);
    modeldef_free(md);
    // the loss term: one input's mean
    model *t = build_ok("name: t\ninputs: {x: {shape: [$batch, 4]}}\n"
                        "body: [{linear: {out: 3, as: y}}]\n"
                        "loss: {output_mean: {input: y}}\n",
                        NULL, 0, 2, true);
    assert_int_equal(t->g->nodes[t->g->loss].ndim, 0);
    model_free(t);
    expect_error("name: t\ninputs: {x: {shape: [$batch, 4]}}\n"
                 "body: [{linear: {out: 3, as: y}}]\n"
                 "loss: {output_mean: {input: y, target: x}}\n",
                 4, 40, "loss 'output_mean' takes no 'target:'");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_expr),
        cmocka_unit_test(test_yamldoc),
        cmocka_unit_test(test_yamldoc_names),
        cmocka_unit_test(test_strdist),
        cmocka_unit_test(test_params),
        cmocka_unit_test(test_overrides),
        cmocka_unit_test(test_inputs),
        cmocka_unit_test(test_repeat),
        cmocka_unit_test(test_residual),
        cmocka_unit_test(test_activation_attrs),
        cmocka_unit_test(test_input_as),
        cmocka_unit_test(test_block_input_as),
        cmocka_unit_test(test_loss),
        cmocka_unit_test(test_loss_mean),
        cmocka_unit_test(test_positional_offset),
        cmocka_unit_test(test_sinusoidal_positions),
        cmocka_unit_test(test_unused_and_scale),
        cmocka_unit_test(test_convbert_unfold),
        cmocka_unit_test(test_matmul_parameter_relative),
        cmocka_unit_test(test_nested_repeat_in_residual),
        cmocka_unit_test(test_scope_in_repeat),
        cmocka_unit_test(test_split_as),
        cmocka_unit_test(test_outputs),
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_blocks),
        cmocka_unit_test(test_mean_and_share),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_unbuilt),
        cmocka_unit_test(test_train_needs),
        cmocka_unit_test(test_output_mean_loss),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
