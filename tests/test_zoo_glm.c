// The ChatGLM models and the attention features they brought: fused q/k/v
// (both layouts), separate q/k/v and output biases, partial, interleaved
// and 2-D rotary positions, and a head tied to the word embeddings. Each
// feature is checked against the plain layer it must equal, run by the fp64
// reference with weights copied across; the two full-size models are built
// as graphs only and their parameters counted against the hand count below.
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

#include "model/modeldef.h"
#include "ref/ref.h"

static char tmpdir[256];

static int setup(void **state) {
    (void)state;
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/tcbench_glm_XXXXXX", t && *t ? t : "/tmp");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static model *build_path(const char *path, int64_t batch, bool graph_only, diag *d) {
    modeldef *md;
    model *m = NULL;
    memset(d, 0, sizeof *d);
    if (modeldef_load(path, &md, d) < 0)
        return NULL;
    modeldef_build(md, NULL, 0, batch, &(modeldef_opts){.graph_only = graph_only}, &m, d);
    modeldef_free(md);
    return m;
}

// Two attention layers over one input x (B=2, T=6, D=32), named a and b,
// with the keys given; both are outputs, their values drawn.
static model *build_pair(const char *keys_a, const char *keys_b, diag *d) {
    char path[400], text[1024];
    snprintf(path, sizeof path, "%s/pair.yaml", tmpdir);
    snprintf(text, sizeof text,
             "name: pair\n"
             "inputs:\n"
             "  x: {shape: [$batch, 6, 32]}\n"
             "body:\n"
             "  - attention: {heads: 4, causal: true, %s, input: x, as: a}\n"
             "  - attention: {heads: 4, causal: true, %s, input: x, as: b}\n"
             "outputs: [a, b]\n",
             keys_a, keys_b);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_true(fputs(text, f) >= 0);
    assert_int_equal(fclose(f), 0);
    model *m = build_path(path, 2, false, d);
    if (m)
        assert_int_equal(model_init_values(m, 7), 0);
    return m;
}

static model *pair_ok(const char *keys_a, const char *keys_b) {
    diag d;
    model *m = build_pair(keys_a, keys_b, &d);
    if (!m)
        fail_msg("unexpected error: %d:%d: %s", d.line, d.col, d.msg);
    return m;
}

static int param(const model *m, const char *name) {
    for (int i = 0; i < m->g->n; i++)
        if (m->g->nodes[i].op == OP_PARAM && m->g->nodes[i].name &&
            !strcmp(m->g->nodes[i].name, name))
            return i;
    return -1;
}

static float *pdata(const model *m, const char *name) {
    int id = param(m, name);
    if (id < 0)
        fail_msg("no parameter %s", name);
    return tensor_f32(m->values[id]);
}

// dst rows [d0, d0+n) = src rows [s0, s0+n), rows of `cols` floats
static void copy_rows(float *dst, int64_t d0, const float *src, int64_t s0, int64_t n,
                      int64_t cols) {
    memcpy(dst + d0 * cols, src + s0 * cols, (size_t)(n * cols) * sizeof *dst);
}

// The largest |a - b| over the two outputs, and the largest |a|.
static double out_diff(const model *m, double *amax) {
    double *out[8] = {0};
    char err[256];
    if (ref_run(m, out, err, sizeof err) < 0)
        fail_msg("ref_run: %s", err);
    int64_t n = 1;
    const graph_node *o = graph_at(m->g, m->g->outputs[0]);
    for (int i = 0; i < o->ndim; i++)
        n *= o->shape[i];
    double diff = 0;
    *amax = 0;
    for (int64_t i = 0; i < n; i++) {
        diff = fmax(diff, fabs(out[0][i] - out[1][i]));
        *amax = fmax(*amax, fabs(out[0][i]));
    }
    free(out[0]);
    free(out[1]);
    return diff;
}

static void assert_same(const model *m) {
    double amax, d = out_diff(m, &amax);
    if (!(amax > 1e-3 && d < 1e-9 * amax))
        fail_msg("outputs differ by %g (largest %g)", d, amax);
}

static void assert_differ(const model *m) {
    double amax, d = out_diff(m, &amax);
    if (!(d > 1e-4 * amax))
        fail_msg("outputs agree to %g (largest %g); the feature did nothing", d, amax);
}

static void copy_param(const model *m, const char *dst, const char *src, int64_t numel) {
    memcpy(pdata(m, dst), pdata(m, src), (size_t)numel * sizeof(float));
}

// D = 32, 4 heads of 8; b gets a's output projection
static void copy_out(const model *m, bool bias) {
    copy_param(m, "b.o.weight", "a.o.weight", 32 * 32);
    if (bias)
        copy_param(m, "b.o.bias", "a.o.bias", 32);
}

static void test_fused_qkv(void **state) {
    (void)state;
    // [q | k | v] rows, 2 kv heads: q 32 rows, k and v 16 each
    model *m = pair_ok("kv_heads: 2, fused_qkv: true", "kv_heads: 2");
    assert_true(param(m, "a.q.weight") < 0);
    assert_int_equal(graph_at(m->g, param(m, "a.qkv.weight"))->shape[0], 64);
    int linears = 0; // a's: one GEMM for q, k and v, one for the output
    for (int i = 0; i < param(m, "b.q.weight"); i++)
        linears += graph_at(m->g, i)->op == OP_LINEAR;
    assert_int_equal(linears, 2);
    const float *w = pdata(m, "a.qkv.weight"), *bias = pdata(m, "a.qkv.bias");
    copy_rows(pdata(m, "b.q.weight"), 0, w, 0, 32, 32);
    copy_rows(pdata(m, "b.k.weight"), 0, w, 32, 16, 32);
    copy_rows(pdata(m, "b.v.weight"), 0, w, 48, 16, 32);
    copy_rows(pdata(m, "b.q.bias"), 0, bias, 0, 32, 1);
    copy_rows(pdata(m, "b.k.bias"), 0, bias, 32, 16, 1);
    copy_rows(pdata(m, "b.v.bias"), 0, bias, 48, 16, 1);
    copy_out(m, true);
    assert_same(m);
    model_free(m);
    // per head [q_h | k_h | v_h], ChatGLM-6B's rows
    m = pair_ok("fused_qkv: true, qkv_per_head: true", "rotary: false");
    w = pdata(m, "a.qkv.weight"), bias = pdata(m, "a.qkv.bias");
    const char *role[3] = {"q", "k", "v"};
    for (int h = 0; h < 4; h++)
        for (int r = 0; r < 3; r++) {
            char name[32];
            snprintf(name, sizeof name, "b.%s.weight", role[r]);
            copy_rows(pdata(m, name), h * 8, w, h * 24 + r * 8, 8, 32);
            snprintf(name, sizeof name, "b.%s.bias", role[r]);
            copy_rows(pdata(m, name), h * 8, bias, h * 24 + r * 8, 8, 1);
        }
    copy_out(m, true);
    assert_same(m);
    // the [q | k | v] reading of the same rows is another layer
    model_free(m);
    m = pair_ok("fused_qkv: true, qkv_per_head: true", "fused_qkv: true");
    copy_param(m, "b.qkv.weight", "a.qkv.weight", 96 * 32);
    copy_param(m, "b.qkv.bias", "a.qkv.bias", 96);
    copy_out(m, true);
    assert_differ(m);
    model_free(m);
}

static void test_biases(void **state) {
    (void)state;
    // ChatGLM2: biases on q, k, v, none on the output
    model *m = pair_ok("bias: false, qkv_bias: true", "out_bias: false");
    assert_true(param(m, "a.q.bias") >= 0 && param(m, "a.k.bias") >= 0);
    assert_true(param(m, "a.v.bias") >= 0 && param(m, "a.o.bias") < 0);
    assert_true(param(m, "b.q.bias") >= 0 && param(m, "b.o.bias") < 0);
    model_free(m);
    m = pair_ok("qkv_bias: false", "fused_qkv: true, bias: false, qkv_bias: true");
    assert_true(param(m, "a.q.bias") < 0 && param(m, "a.o.bias") >= 0);
    assert_true(param(m, "b.qkv.bias") >= 0 && param(m, "b.o.bias") < 0);
    model_free(m);
}

// Copies a's q, k, v (separate, with biases) into b, permuting the q and k
// rows of each head by perm (8 entries) when perm is not NULL.
static void copy_qkv(const model *m, const int *perm) {
    const char *role[3] = {"q", "k", "v"};
    for (int r = 0; r < 3; r++) {
        char a[32], b[32];
        for (int part = 0; part < 2; part++) {
            const char *what = part ? "bias" : "weight";
            int64_t cols = part ? 1 : 32;
            snprintf(a, sizeof a, "a.%s.%s", role[r], what);
            snprintf(b, sizeof b, "b.%s.%s", role[r], what);
            const float *src = pdata(m, a);
            float *dst = pdata(m, b);
            for (int h = 0; h < 4; h++)
                for (int i = 0; i < 8; i++) {
                    int from = perm && r < 2 ? perm[i] : i;
                    copy_rows(dst, h * 8 + i, src, h * 8 + from, 1, cols);
                }
        }
    }
    copy_out(m, true);
}

static void test_rotary_dims(void **state) {
    (void)state;
    // all of the head's dims is the plain rotary
    model *m = pair_ok("rotary: true, rotary_dims: 8", "rotary: true");
    copy_qkv(m, NULL);
    assert_same(m);
    model_free(m);
    // half of them: another layer than the full rotation and than none
    m = pair_ok("rotary: true, rotary_dims: 4", "rotary: true");
    copy_qkv(m, NULL);
    assert_differ(m);
    model_free(m);
    m = pair_ok("rotary: true, rotary_dims: 4", "rotary: false");
    copy_qkv(m, NULL);
    assert_differ(m);
    // the dims past rotary_dims pass through: with the rotated half's q and k
    // rows zero, only they score, as without rotary
    for (int h = 0; h < 4; h++)
        for (int i = 0; i < 4; i++)
            for (int r = 0; r < 2; r++) {
                const char *w = r ? "a.k.weight" : "a.q.weight";
                const char *b = r ? "a.k.bias" : "a.q.bias";
                memset(pdata(m, w) + (h * 8 + i) * 32, 0, 32 * sizeof(float));
                pdata(m, b)[h * 8 + i] = 0;
            }
    copy_qkv(m, NULL);
    assert_same(m);
    model_free(m);
}

static void test_rotary_interleaved(void **state) {
    (void)state;
    // ChatGLM2's pairs (2i, 2i+1) over the first 4 dims are rotate_half's
    // pairs (i, i+2) once the rows are reordered 0 2 1 3: b's row j is a's
    // row perm[j]
    static const int perm[8] = {0, 2, 1, 3, 4, 5, 6, 7};
    model *m = pair_ok("rotary: true, rotary_dims: 4, rotary_interleaved: true",
                       "rotary: true, rotary_dims: 4");
    copy_qkv(m, perm);
    assert_same(m);
    copy_qkv(m, NULL);
    assert_differ(m);
    model_free(m);
    // over a whole head of 8: 0 2 4 6 1 3 5 7
    static const int full[8] = {0, 2, 4, 6, 1, 3, 5, 7};
    m = pair_ok("rotary: true, rotary_interleaved: true", "rotary: true");
    copy_qkv(m, full);
    assert_same(m);
    model_free(m);
}

static int count_op(const graph *g, enum op op) {
    int n = 0;
    for (int i = 0; i < g->n; i++)
        n += g->nodes[i].op == op;
    return n;
}

static void test_rotary_2d(void **state) {
    (void)state;
    // GLM: the first half by position, the second by block position, 0 in
    // a plain forward: the same values as rotating the first half only, but
    // the second half's rotation is computed as the original computes it
    model *m = pair_ok("rotary: true, rotary_2d: true", "rotary: true, rotary_dims: 4");
    copy_qkv(m, NULL);
    assert_same(m);
    int mul_2d = 0, mul_half = 0, b0 = param(m, "b.q.weight");
    for (int i = 0; i < m->g->n; i++)
        if (graph_at(m->g, i)->op == OP_MUL && i < b0)
            mul_2d++;
        else if (graph_at(m->g, i)->op == OP_MUL)
            mul_half++;
    assert_int_equal(mul_2d, 2 * mul_half);
    model_free(m);
    m = pair_ok("rotary: true, rotary_2d: true", "rotary: true");
    copy_qkv(m, NULL);
    assert_differ(m);
    model_free(m);
}

static void test_tied_head(void **state) {
    (void)state;
    char path[400];
    snprintf(path, sizeof path, "%s/tied.yaml", tmpdir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_true(fputs("name: tied\n"
                      "inputs:\n"
                      "  tokens: {shape: [$batch, 5], dtype: i32, range: [0, 40]}\n"
                      "body:\n"
                      "  - embedding: {num: 40, dim: 16, as: wte}\n"
                      "  - linear: {out: 40, bias: false, tie: wte.weight}\n",
                      f) >= 0);
    assert_int_equal(fclose(f), 0);
    diag d;
    model *m = build_path(path, 2, false, &d);
    if (!m)
        fail_msg("unexpected error: %d:%d: %s", d.line, d.col, d.msg);
    const graph_node *o = graph_at(m->g, m->g->outputs[0]);
    assert_int_equal(o->op, OP_LINEAR);
    assert_int_equal(o->src[1], param(m, "wte.weight"));
    assert_int_equal(count_op(m->g, OP_PARAM), 1);
    assert_int_equal(graph_param_count(m->g), 40 * 16);
    model_free(m);
}

// ChatGLM-6B at full size (L = 28, D = 4096, F = 16384, V = 130528):
//   word_embeddings            V D                   =   534,642,688
//   per layer: 2 LayerNorms    2 * 2 D               =        16,384
//              query_key_value 3 D * D + 3 D         =    50,343,936
//              dense           D * D + D             =    16,781,312
//              dense_h_to_4h   F * D + F             =    67,125,248
//              dense_4h_to_h   D * F + D             =    67,112,960
//              a layer                               =   201,379,840
//   28 layers                                        = 5,638,635,520
//   final_layernorm            2 D                   =         8,192
//   lm_head                    tied to word_embeddings         0
//   total                                            = 6,173,286,400
// (untied it would be 6,707,929,088: transformers ties it, and reports
// 6.17e9.)
// ChatGLM2-6B (L = 28, D = 4096, 32 heads of 128, 2 kv groups, F = 13696,
// V = 65024):
//   embedding                  V D                   =   266,338,304
//   per layer: 2 RMSNorms      2 D                   =         8,192
//              query_key_value (D + 2*2*128) * D + 4608 = 18,878,976
//              dense           D * D                 =    16,777,216
//              dense_h_to_4h   2 F * D               =   112,197,632
//              dense_4h_to_h   D * F                 =    56,098,816
//              a layer                               =   203,960,832
//   28 layers                                        = 5,710,903,296
//   final_layernorm            D                     =         4,096
//   output_layer               V D                   =   266,338,304
//   total                                            = 6,243,584,000
// KV cache per token in fp16: 2 (K, V) * 28 * kv_heads * 128 * 2 bytes:
// 458,752 (32 kv heads) and 28,672 (2).
static void check_glm(const char *file, int64_t params, int64_t kv_bytes) {
    const char *src = getenv("TCBENCH_SOURCE_DIR");
    char path[512];
    snprintf(path, sizeof path, "%s/models/%s", src && *src ? src : ".", file);
    diag d;
    model *m = build_path(path, 1, true, &d);
    if (!m)
        fail_msg("%s: %d:%d: %s", file, d.line, d.col, d.msg);
    const graph *g = m->g;
    assert_int_equal(graph_param_count(g), params);
    // Layers: one fused qkv linear each. Heads: the (B, heads, T, hd)
    // permutes of split_heads and of the per-head slices; the fewest heads
    // among them are the key/value heads.
    int layers = 0;
    int64_t kvh = 0, hd = 0;
    for (int i = 0; i < g->n; i++) {
        const graph_node *n = graph_at(g, i);
        const char *w = n->op == OP_LINEAR ? graph_at(g, n->src[1])->name : NULL;
        size_t len = w ? strlen(w) : 0;
        if (len > 11 && !strcmp(w + len - 11, ".qkv.weight"))
            layers++;
        if (n->op == OP_PERMUTE && n->ndim == 4 && n->ia[1] == 2 && n->ia[2] == 1 &&
            graph_at(g, n->src[0])->ndim == 4 && (!kvh || n->shape[1] < kvh)) {
            kvh = n->shape[1];
            hd = n->shape[3];
        }
    }
    assert_int_equal(layers, 28);
    assert_int_equal(hd, 128);
    assert_int_equal(2 * layers * kvh * hd * 2, kv_bytes);
    model_free(m);
}

static void test_glm_models(void **state) {
    (void)state;
    check_glm("chatglm.yaml", 6173286400LL, 458752);
    check_glm("chatglm2.yaml", 6243584000LL, 28672);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fused_qkv),   cmocka_unit_test(test_biases),
        cmocka_unit_test(test_rotary_dims), cmocka_unit_test(test_rotary_interleaved),
        cmocka_unit_test(test_rotary_2d),   cmocka_unit_test(test_tied_head),
        cmocka_unit_test(test_glm_models),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
