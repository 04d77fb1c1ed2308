// DeBERTa's disentangled_attention layer against the formulas of Hugging
// Face's DisentangledSelfAttention written out as plain loops: for each
// query i and key j the content score, content-to-position q_i .
// pos_key[idx(i - j)] and position-to-content k_j . pos_query[idx(i - j)],
// with idx read by HF's gather (clamp(bucket(i - j) + span)), then softmax,
// the values and the output projection. The layer builds the same scores
// from a gather per distance, one GEMM and a relative shift (views); the
// fp64 reference runs its graph. Version 1 with the span the sequence and
// clamped below it, version 2 plain and with log buckets.
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

#include "test_util.h"
#include "model/modeldef.h"
#include "ref/ref.h"

enum { B = 2, D = 16, H = 2, HD = 8 };

typedef struct layer_case {
    int version;
    int64_t T, R, buckets;
} layer_case;

// y (out) = W x + b over rows of a (out, in) weight; b may be NULL
static void affine(const float *w, const float *b, const double *x, int out, int in, double *y) {
    for (int o = 0; o < out; o++) {
        double s = b ? b[o] : 0;
        for (int k = 0; k < in; k++)
            s += (double)w[o * in + k] * x[k];
        y[o] = s;
    }
}

// Hugging Face's make_log_bucket_position and the c2p_pos clamp
static int64_t hf_index(const layer_case *c, int64_t span, int64_t d) {
    int64_t b = d, mid = c->buckets / 2, ad = d < 0 ? -d : d;
    if (c->buckets > 0 && ad > mid) {
        float base = logf((float)((double)(c->R - 1) / (double)mid));
        float lp = ceilf(logf((float)ad / (float)mid) / base * (float)(mid - 1)) + (float)mid;
        b = d < 0 ? -(int64_t)lp : (int64_t)lp;
    }
    b += span;
    return b < 0 ? 0 : b > 2 * span - 1 ? 2 * span - 1 : b;
}

// The layer's output (B, T, D) written out as the class computes it.
static void expected(const model *m, const layer_case *c, const double *x, double *out) {
    int64_t T = c->T,
            span = c->version == 1 ? (T < c->R ? T : c->R) : (c->buckets > 0 ? c->buckets : c->R);
    int64_t first = c->version == 1 ? c->R - span : 0; // the table rows read
    double s = 1 / sqrt(HD * 3.0);
    const float *table = model_param_f32(m, "rel.weight");
    double *pk = calloc((size_t)(2 * span * D), sizeof *pk);
    double *pq = calloc((size_t)(2 * span * D), sizeof *pq);
    double *q = calloc((size_t)(T * D), sizeof *q), *k = calloc((size_t)(T * D), sizeof *k);
    double *v = calloc((size_t)(T * D), sizeof *v), *ctx = calloc((size_t)(T * D), sizeof *ctx);
    for (int64_t p = 0; p < 2 * span; p++) {
        double row[D];
        for (int e = 0; e < D; e++)
            row[e] = table[(first + p) * D + e];
        bool v2 = c->version == 2;
        affine(model_param_f32(m, v2 ? "a.pos_key_proj.weight" : "a.pos_proj.weight"),
               v2 ? model_param_f32(m, "a.pos_key_proj.bias") : NULL, row, D, D, pk + p * D);
        affine(model_param_f32(m, v2 ? "a.pos_query_proj.weight" : "a.pos_q_proj.weight"),
               model_param_f32(m, v2 ? "a.pos_query_proj.bias" : "a.pos_q_proj.bias"), row, D, D, pq + p * D);
    }
    for (int b = 0; b < B; b++) {
        for (int64_t t = 0; t < T; t++) {
            const double *xt = x + (b * T + t) * D;
            if (c->version == 1) { // in_proj rows per head: [q_h | k_h | v_h]
                double y[3 * D];
                affine(model_param_f32(m, "a.in_proj.weight"), NULL, xt, 3 * D, D, y);
                for (int h = 0; h < H; h++)
                    for (int e = 0; e < HD; e++) {
                        q[t * D + h * HD + e] = y[h * 3 * HD + e] + model_param_f32(m, "a.q_bias")[h * HD + e];
                        k[t * D + h * HD + e] = y[h * 3 * HD + HD + e];
                        v[t * D + h * HD + e] =
                            y[h * 3 * HD + 2 * HD + e] + model_param_f32(m, "a.v_bias")[h * HD + e];
                    }
            } else {
                affine(model_param_f32(m, "a.q.weight"), model_param_f32(m, "a.q.bias"), xt, D, D, q + t * D);
                affine(model_param_f32(m, "a.k.weight"), model_param_f32(m, "a.k.bias"), xt, D, D, k + t * D);
                affine(model_param_f32(m, "a.v.weight"), model_param_f32(m, "a.v.bias"), xt, D, D, v + t * D);
            }
        }
        for (int h = 0; h < H; h++)
            for (int64_t i = 0; i < T; i++) {
                double sc[64], mx = -INFINITY, sum = 0;
                for (int64_t j = 0; j < T; j++) {
                    int64_t r = hf_index(c, span, i - j);
                    double qk = 0, c2p = 0, p2c = 0;
                    for (int e = 0; e < HD; e++) {
                        int64_t o = h * HD + e;
                        qk += q[i * D + o] * k[j * D + o];
                        c2p += q[i * D + o] * pk[r * D + o];
                        p2c += k[j * D + o] * pq[r * D + o];
                    }
                    sc[j] = (qk + c2p + p2c) * s;
                    mx = fmax(mx, sc[j]);
                }
                for (int64_t j = 0; j < T; j++)
                    sum += sc[j] = exp(sc[j] - mx);
                for (int e = 0; e < HD; e++) {
                    double a = 0;
                    for (int64_t j = 0; j < T; j++)
                        a += sc[j] / sum * v[j * D + h * HD + e];
                    ctx[i * D + h * HD + e] = a;
                }
            }
        for (int64_t t = 0; t < T; t++)
            affine(model_param_f32(m, "a.o.weight"), model_param_f32(m, "a.o.bias"), ctx + t * D, D, D,
                   out + (b * T + t) * D);
    }
    free(pk), free(pq), free(q), free(k), free(v), free(ctx);
}

static void check_case(const layer_case *c) {
    char text[600];
    snprintf(text, sizeof text,
             "name: one\n"
             "inputs:\n"
             "  x: {shape: [$batch, %lld, %d]}\n"
             "body:\n"
             "  - disentangled_attention: {heads: %d, version: %d, rel_table: rel,\n"
             "                             max_relative: %lld, buckets: %lld, as: a}\n",
             (long long)c->T, D, H, c->version, (long long)c->R, (long long)c->buckets);
    model *m = build_model_text(text, B);
    assert_int_equal(model_init_values(m, 11), 0);
    if (c->version == 1) // the class starts them at zero; make them count
        for (const char *const *n = (const char *const[]){"a.q_bias", "a.v_bias", NULL}; *n; n++) {
            float *b = tensor_f32(m->values[model_node(m, OP_PARAM, *n)]);
            for (int i = 0; i < D; i++)
                b[i] = 0.3f * sinf((float)(i + 1) * ((*n)[2] == 'q' ? 1.7f : 0.9f));
        }
    char err[256];
    double **all = ref_run_all(m, err, sizeof err);
    if (!all)
        fail_msg("ref_run_all: %s", err);
    int64_t n = B * c->T * D;
    double *want = calloc((size_t)n, sizeof *want), diff = 0, amax = 0;
    expected(m, c, all[model_node(m, OP_INPUT, "x")], want);
    const double *got = all[m->g->outputs[0]];
    for (int64_t i = 0; i < n; i++) {
        diff = fmax(diff, fabs(got[i] - want[i]));
        amax = fmax(amax, fabs(want[i]));
    }
    if (!(amax > 1e-3 && diff < 1e-9 * amax))
        fail_msg("version %d T %lld R %lld buckets %lld: off by %g (largest %g)", c->version,
                 (long long)c->T, (long long)c->R, (long long)c->buckets, diff, amax);
    for (int i = 0; i < m->g->n; i++)
        free(all[i]);
    free(all);
    free(want);
    model_free(m);
}

static void test_disentangled(void **state) {
    (void)state;
    const layer_case cases[] = {
        {1, 10, 512, 0}, // span = T: every distance its own row
        {1, 10, 3, 0},   // span 3: distances past 3 clamped
        {2, 10, 512, 0}, // the table's first 2 R rows
        {2, 40, 64, 8},  // log buckets past 4
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        check_case(&cases[i]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_disentangled),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
