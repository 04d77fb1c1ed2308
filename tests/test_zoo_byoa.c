// The bottleneck_attention and halo_attention layers against timm's
// BottleneckAttn and HaloAttn written out as plain loops. PosEmbedRel's
// pad / flatten / pad / reshape / slice trick gives query a and key k of
// one axis the table row k - a + win - 1 (checked against timm 1.0.31's
// class); here that row is read directly, the halo windows are indexed in
// the zero-padded map, and every score, softmax and value sum is a loop.
// The fp64 reference runs the layer's graph. Cases: a non-square map, the
// strided bottleneck (2x2 average pool after), halo blocks at stride 1 and
// 2 (queries strided by the 1x1 conv).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h> // after the headers it needs

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/modeldef.h"
#include "ref/ref.h"
#include "test_util.h"

enum { B = 2, C = 6, HEADS = 2, DQK = 3, DV = C / HEADS };

typedef struct byoa_case {
    bool halo;
    int64_t H, W, stride, block, halo_size;
} byoa_case;

// a 1x1 convolution's output channel o at pixel (b, y, x) of x (B, C, H, W)
static double conv1x1(const float *w, const double *x, int64_t H, int64_t W, int64_t b, int o,
                      int64_t y, int64_t xx) {
    double s = 0;
    for (int c = 0; c < C; c++)
        s += (double)w[o * C + c] * x[((b * C + c) * H + y) * W + xx];
    return s;
}

// One query's attention over n keys: out[e] = sum_j softmax(score)_j v[j][e].
static void attend(const double *score, const double *v, int64_t n, double *out) {
    double mx = -INFINITY, sum = 0, *p = malloc((size_t)n * sizeof *p);
    for (int64_t j = 0; j < n; j++)
        mx = fmax(mx, score[j]);
    for (int64_t j = 0; j < n; j++)
        sum += p[j] = exp(score[j] - mx);
    for (int e = 0; e < DV; e++) {
        out[e] = 0;
        for (int64_t j = 0; j < n; j++)
            out[e] += p[j] / sum * v[j * DV + e];
    }
    free(p);
}

static double rel(const float *table, int64_t row, const double *q) {
    double s = 0;
    for (int e = 0; e < DQK; e++)
        s += table[row * DQK + e] * q[e];
    return s;
}

// BottleneckAttn before its pool: (B, C, H, W) -> (B, C, H, W)
static void bottleneck(const model *m, const byoa_case *c, const double *x, double *out) {
    int64_t H = c->H, W = c->W, HW = H * W;
    const float *w = model_param_f32(m, "a.qkv.weight"), *hr = model_param_f32(m, "a.pos_embed.height_rel"),
                *wr = model_param_f32(m, "a.pos_embed.width_rel");
    double *score = malloc((size_t)HW * sizeof *score), *v = malloc((size_t)(HW * DV) * sizeof *v);
    for (int64_t b = 0; b < B; b++)
        for (int h = 0; h < HEADS; h++) {
            for (int64_t j = 0; j < HW; j++)
                for (int e = 0; e < DV; e++)
                    v[j * DV + e] = conv1x1(w, x, H, W, b, 2 * HEADS * DQK + h * DV + e, j / W, j % W);
            for (int64_t i = 0; i < HW; i++) {
                double q[DQK];
                for (int e = 0; e < DQK; e++)
                    q[e] = conv1x1(w, x, H, W, b, h * DQK + e, i / W, i % W);
                for (int64_t j = 0; j < HW; j++) {
                    double qk = 0;
                    for (int e = 0; e < DQK; e++)
                        qk += q[e] * conv1x1(w, x, H, W, b, HEADS * DQK + h * DQK + e, j / W, j % W);
                    score[j] = qk / sqrt(DQK) + rel(hr, j / W - i / W + H - 1, q) +
                               rel(wr, j % W - i % W + W - 1, q);
                }
                double o[DV];
                attend(score, v, HW, o);
                for (int e = 0; e < DV; e++)
                    out[((b * C + h * DV + e) * H + i / W) * W + i % W] = o[e];
            }
        }
    free(score), free(v);
}

// HaloAttn: (B, C, H, W) -> (B, C, H / stride, W / stride), queries strided
static void halo(const model *m, const byoa_case *c, const double *x, double *out) {
    int64_t H = c->H, W = c->W, blk = c->block, hs = c->halo_size, win = blk + 2 * hs;
    int64_t st = c->stride, bs = blk / st, Ho = H / st, Wo = W / st, nwin = win * win;
    const float *wq = model_param_f32(m, "a.q.weight"), *wkv = model_param_f32(m, "a.kv.weight"),
                *hr = model_param_f32(m, "a.pos_embed.height_rel"), *wr = model_param_f32(m, "a.pos_embed.width_rel");
    double *score = malloc((size_t)nwin * sizeof *score),
           *v = malloc((size_t)(nwin * DV) * sizeof *v);
    for (int64_t b = 0; b < B; b++)
        for (int h = 0; h < HEADS; h++)
            for (int64_t by = 0; by < H / blk; by++)
                for (int64_t bx = 0; bx < W / blk; bx++) {
                    // the window's keys and values; rows and columns outside the map are 0
                    double k[256 * DQK];
                    for (int64_t j = 0; j < nwin; j++) {
                        int64_t y = by * blk - hs + j / win, xx = bx * blk - hs + j % win;
                        bool in = y >= 0 && y < H && xx >= 0 && xx < W;
                        for (int r = 0; r < DQK + DV; r++) {
                            double val = in ? conv1x1(wkv, x, H, W, b, h * (DQK + DV) + r, y, xx)
                                            : 0;
                            if (r < DQK)
                                k[j * DQK + r] = val;
                            else
                                v[j * DV + r - DQK] = val;
                        }
                    }
                    for (int64_t a = 0; a < bs * bs; a++) {
                        int64_t qy = by * bs + a / bs, qx = bx * bs + a % bs;
                        double q[DQK];
                        for (int e = 0; e < DQK; e++)
                            q[e] = conv1x1(wq, x, H, W, b, h * DQK + e, qy * st, qx * st);
                        for (int64_t j = 0; j < nwin; j++) {
                            double qk = 0;
                            for (int e = 0; e < DQK; e++)
                                qk += q[e] * k[j * DQK + e];
                            score[j] = qk / sqrt(DQK) + rel(hr, j / win - a / bs + win - 1, q) +
                                       rel(wr, j % win - a % bs + win - 1, q);
                        }
                        double o[DV];
                        attend(score, v, nwin, o);
                        for (int e = 0; e < DV; e++)
                            out[((b * C + h * DV + e) * Ho + qy) * Wo + qx] = o[e];
                    }
                }
    free(score), free(v);
}

static void check_case(const byoa_case *c) {
    char text[600];
    if (c->halo)
        snprintf(text, sizeof text,
                 "name: one\ninputs:\n  x: {shape: [$batch, %d, %lld, %lld]}\nbody:\n"
                 "  - halo_attention: {heads: %d, dim_head: %d, block: %lld, halo: %lld,"
                 " stride: %lld, as: a}\n",
                 C, (long long)c->H, (long long)c->W, HEADS, DQK, (long long)c->block,
                 (long long)c->halo_size, (long long)c->stride);
    else
        snprintf(text, sizeof text,
                 "name: one\ninputs:\n  x: {shape: [$batch, %d, %lld, %lld]}\nbody:\n"
                 "  - bottleneck_attention: {heads: %d, dim_head: %d, stride: %lld, as: a}\n",
                 C, (long long)c->H, (long long)c->W, HEADS, DQK, (long long)c->stride);
    model *m = build_model_text(text, B);
    assert_int_equal(model_init_values(m, 5), 0);
    char err[256];
    double **all = ref_run_all(m, err, sizeof err);
    if (!all)
        fail_msg("ref_run_all: %s", err);
    int64_t Ho = c->H / c->stride, Wo = c->W / c->stride, n = B * C * Ho * Wo;
    double *want = calloc((size_t)(B * C * c->H * c->W), sizeof *want), diff = 0, amax = 0;
    const double *x = all[model_node(m, OP_INPUT, "x")];
    if (c->halo)
        halo(m, c, x, want);
    else {
        bottleneck(m, c, x, want);
        if (c->stride == 2) // AvgPool2d(2, 2), in place: each output reads rows below it
            for (int64_t p = 0; p < n; p++) {
                int64_t bc = p / (Ho * Wo), y = p / Wo % Ho, xx = p % Wo;
                const double *s = want + bc * c->H * c->W + 2 * y * c->W + 2 * xx;
                want[p] = (s[0] + s[1] + s[c->W] + s[c->W + 1]) / 4;
            }
    }
    const double *got = all[m->g->outputs[0]];
    assert_int_equal(graph_node_numel(&m->g->nodes[m->g->outputs[0]]), n);
    for (int64_t i = 0; i < n; i++) {
        diff = fmax(diff, fabs(got[i] - want[i]));
        amax = fmax(amax, fabs(want[i]));
    }
    if (!(amax > 1e-3 && diff < 1e-9 * amax))
        fail_msg("%s %lldx%lld stride %lld: off by %g (largest %g)",
                 c->halo ? "halo" : "bottleneck", (long long)c->H, (long long)c->W,
                 (long long)c->stride, diff, amax);
    for (int i = 0; i < m->g->n; i++)
        free(all[i]);
    free(all);
    free(want);
    model_free(m);
}

static void test_byoa(void **state) {
    (void)state;
    const byoa_case cases[] = {
        {false, 3, 5, 1, 0, 0}, // every position against every position, H != W
        {false, 4, 6, 2, 0, 0}, // then the 2x2 average pool
        {true, 4, 8, 1, 2, 1},  // 2x4 blocks of 2, windows of 4
        {true, 8, 8, 2, 4, 1},  // queries strided: blocks of 2 in a 4x4 map
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        check_case(&cases[i]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_byoa),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
