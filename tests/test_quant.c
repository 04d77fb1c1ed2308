// Tests for weight-only quantization: the kernels (backend/cpu/cpu_quant.h),
// the model rewrite (model/quantize.h), the compiler's fusion into QLINEAR
// (compile/quant.c), and the CUDA kernels' source compiled by NVRTC for
// sm_80 and sm_90 (skipped without the CUDA backend).
#include "tcbench_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cpu/cpu_quant.h"
#include "compile/compile.h"
#include "eager/eager.h"
#include "model/model_prepare.h"
#include "model/modeldef.h"
#include "model/quantize.h"
#include "ref/ref.h"
#include "test_util.h"

#if TCBENCH_HAVE_CUDA
#include "backend/cuda/cuda_nvrtc.h"
#include "base/sbuf.h"
#include "compile/lower.h"
extern const char cuda_prelude_text[];
extern const char compile_prelude_pointwise[];
extern const char cuda_quant_text[];
#endif

// Deterministic values in [-1, 1), some groups scaled apart.
static void fill(float *w, int64_t n, uint32_t seed) {
    uint32_t s = seed * 2654435761u + 1;
    for (int64_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        w[i] = ((float)(s >> 8) / 16777216.0f * 2 - 1) * (i % 37 < 5 ? 4.0f : 1.0f);
    }
}

static float scale_of(enum dtype sdt, const void *s, int64_t i) {
    return sdt == DT_F16 ? dtype_f16_to_f32(((const uint16_t *)s)[i]) : ((const float *)s)[i];
}

// ---- 1. storage ---------------------------------------------------------------

static void test_pack4_round_trip(void **state) {
    (void)state;
    for (int64_t n = 1; n <= 33; n += 2) { // odd counts: the last byte half used
        int8_t v[33], back[33];
        uint8_t p[17];
        for (int64_t i = 0; i < n; i++)
            v[i] = (int8_t)((i * 5 + n) % 16 - 8); // every value of [-8, 7]
        cpu_quant_pack4(n, v, p);
        cpu_quant_unpack4(n, p, back);
        assert_memory_equal(v, back, (size_t)n);
        assert_int_equal(p[n / 2] >> 4, 8); // the spare nibble holds 0
    }
    // low nibble first, offset by 8
    int8_t two[2] = {-8, 7};
    uint8_t b;
    cpu_quant_pack4(2, two, &b);
    assert_int_equal(b, 0xf0);
}

// Weights that are exact multiples of their group's scale come back bit
// for bit, int8 and int4, odd K.
static void test_exact_round_trip(void **state) {
    (void)state;
    enum { N = 3, K = 45, GRP = 32 };
    for (int bits = 4; bits <= 8; bits += 4) {
        int qmax = bits == 8 ? 127 : 7;
        float w[N * K], back[N * K], sc[N * 2];
        uint8_t q[N * K];
        for (int64_t i = 0; i < N * K; i++)
            w[i] = (float)((i * 7) % (2 * qmax + 1) - qmax) * 0.25f;
        for (int n = 0; n < N; n++) // each group reaches qmax, so its scale is 0.25
            w[n * K] = w[n * K + GRP] = (float)qmax * 0.25f;
        cpu_quant_quantize(bits, GRP, N, K, w, q, DT_F32, sc);
        cpu_quant_dequantize(bits, GRP, N, K, q, DT_F32, sc, back);
        assert_memory_equal(w, back, sizeof w);
        if (bits == 8)
            for (int64_t i = 0; i < N * K; i++)
                assert_int_equal(((int8_t *)q)[i], (int)lrintf(w[i] / 0.25f));
    }
}

// |w - dq(q(w))| <= scale / 2 for every element, the stored scale (f32 or
// f16, rounded up), group tails short (K = 100, group 32), zero groups 0.
static void test_error_bound(void **state) {
    (void)state;
    enum { N = 7, K = 100, GRP = 32, G = 4 };
    float w[N * K], back[N * K];
    fill(w, N * K, 3);
    for (int k = 0; k < GRP; k++)
        w[2 * K + k] = 0; // row 2's first group is all zeros
    for (int bits = 4; bits <= 8; bits += 4)
        for (int h = 0; h < 2; h++) {
            enum dtype sdt = h ? DT_F16 : DT_F32;
            uint8_t q[N * K];
            float sc[N * G];
            cpu_quant_quantize(bits, GRP, N, K, w, q, sdt, sc);
            cpu_quant_dequantize(bits, GRP, N, K, q, sdt, sc, back);
            double worst = 0;
            for (int n = 0; n < N; n++)
                for (int k = 0; k < K; k++) {
                    float s = scale_of(sdt, sc, n * G + k / GRP);
                    double e = fabs((double)w[n * K + k] - back[n * K + k]);
                    if (e > s * 0.5 * (1 + 1e-6) + 1e-7)
                        fail_msg("int%d %s: (%d, %d) error %g above half the scale %g", bits,
                                 dtype_name(sdt), n, k, e, s);
                    worst = fmax(worst, e / s);
                }
            assert_true(worst > 0.3); // the bound is met, not vacuous
            assert_true(scale_of(sdt, sc, 2 * G) == 0.0f);
        }
}

// ---- 2. the fused GEMM against fp64 on the dequantized weights ------------------

// y = x @ dq(q(w))^T (+ b) by the form asked (TCBENCH_QGEMM) for the
// given w (N, K) and x (M, K), against fp64 on the dequantized weights,
// groups of grp; tile: weight rows a tile holds, 0 for the default.
// Tolerance: 1e-5 of sum |x w| for f32's rounding, and for int4 the
// AVX512-VNNI kernel's rounding of x to integers with a scale per lane of
// 8 values (8i .. 8i+7 of the row): at most max|x| over the lane / 65278
// an element, so sum |w| times that (exact products and sums besides).
// NaN fails.
static void check_qgemm_xw(int bits, enum dtype sdt, int64_t M, int64_t N, bool bias,
                           const char *form, int tile, int64_t K, int64_t grp, const float *w,
                           const float *x) {
    int64_t G = (K + grp - 1) / grp;
    float *dq = malloc(sizeof(float) * (size_t)(N * K));
    float *sc = malloc(sizeof(float) * (size_t)(N * G)), *b = malloc(sizeof(float) * (size_t)N);
    float *y = malloc(sizeof(float) * (size_t)(M * N)),
          *lmax = malloc(sizeof(float) * (size_t)(M * K));
    uint8_t *q = malloc((size_t)(N * K));
    assert_true(dq && sc && b && y && lmax && q);
    fill(b, N, 13);
    for (int64_t m = 0; m < M; m++) // lmax: the largest |x| of each value's lane
        for (int64_t k0 = 0; k0 < K; k0 += 8) {
            int64_t k1 = k0 + 8 < K ? k0 + 8 : K;
            float a = 0;
            for (int64_t k = k0; k < k1; k++)
                a = fmaxf(a, fabsf(x[m * K + k]));
            for (int64_t k = k0; k < k1; k++)
                lmax[m * K + k] = a;
        }
    cpu_quant_quantize(bits, grp, N, K, w, q, sdt, sc);
    cpu_quant_dequantize(bits, grp, N, K, q, sdt, sc, dq);
    char rows[16];
    snprintf(rows, sizeof rows, "%d", tile);
    setenv("TCBENCH_QGEMM", form, 1);
    setenv("TCBENCH_QGEMM_TILE", rows, 1);
    cpu_quant_env_reload();
    assert_int_equal(cpu_qgemm(bits, grp, M, N, K, x, q, sdt, sc, bias ? b : NULL, y), 0);
    unsetenv("TCBENCH_QGEMM");
    unsetenv("TCBENCH_QGEMM_TILE");
    cpu_quant_env_reload();
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double r = bias ? b[n] : 0, mag = fabs(r), xq = 0;
            for (int64_t k = 0; k < K; k++) {
                r += (double)x[m * K + k] * dq[n * K + k];
                mag += fabs((double)x[m * K + k] * dq[n * K + k]);
                xq += fabs((double)dq[n * K + k]) * lmax[m * K + k] / 65278;
            }
            double tol = 1e-5 * mag + 1e-6 + (bits == 4 ? xq : 0);
            if (!(fabs(y[m * N + n] - r) <= tol))
                fail_msg("int%d %s group %lld M %lld K %lld %s%s: y(%lld, %lld) %g, fp64 %g, "
                         "tolerance %g",
                         bits, dtype_name(sdt), (long long)grp, (long long)M, (long long)K,
                         bias ? "bias " : "", form, (long long)m, (long long)n, y[m * N + n], r,
                         tol);
        }
    free(dq), free(sc), free(b), free(y), free(lmax), free(q);
}

// check_qgemm_xw on fill's w and x: groups of grp (check_qgemm_k: 32),
// K = 100 (a short last group, past the AVX-512 kernels' multiple of 128
// or 16) or 120 (int8's kernel ends inside a group).
static void check_qgemm_g(int bits, enum dtype sdt, int64_t M, int64_t N, bool bias,
                          const char *form, int tile, int64_t K, int64_t grp) {
    float *w = malloc(sizeof(float) * (size_t)(N * K)),
          *x = malloc(sizeof(float) * (size_t)(M * K));
    assert_true(w && x);
    fill(w, N * K, 11);
    fill(x, M * K, 12);
    check_qgemm_xw(bits, sdt, M, N, bias, form, tile, K, grp, w, x);
    free(w), free(x);
}

static void check_qgemm_k(int bits, enum dtype sdt, int64_t M, int64_t N, bool bias,
                          const char *form, int tile, int64_t K) {
    check_qgemm_g(bits, sdt, M, N, bias, form, tile, K, 32);
}

static void check_qgemm(int bits, enum dtype sdt, int64_t M, int64_t N, bool bias, const char *form,
                        int tile) {
    check_qgemm_k(bits, sdt, M, N, bias, form, tile, 100);
}

static void test_qgemm(void **state) {
    (void)state;
    const int64_t Ms[] = {1, 3, 17};
    for (int bits = 4; bits <= 8; bits += 4)
        for (int h = 0; h < 2; h++)
            for (int mi = 0; mi < 3; mi++)
                for (int bias = 0; bias < 2; bias++) {
                    enum dtype sdt = h ? DT_F16 : DT_F32;
                    check_qgemm(bits, sdt, Ms[mi], 13, bias, "auto", 0);
                    // both forms at every M: GEMV in chunks of rows, tiles at M = 1,
                    // several tiles with a short last one
                    check_qgemm(bits, sdt, Ms[mi], 13, bias, "gemv", 0);
                    check_qgemm(bits, sdt, Ms[mi], 13, bias, "tiles", 0);
                    check_qgemm(bits, sdt, Ms[mi], 13, bias, "tiles", 4);
                }
    // work enough for the tiles to split over the threads
    check_qgemm(4, DT_F32, 64, 83, true, "tiles", 16);
    check_qgemm(8, DT_F16, 64, 83, false, "auto", 0);
    for (int bits = 4; bits <= 8; bits += 4)
        for (int64_t M = 1; M <= 2; M++)
            check_qgemm_k(bits, DT_F16, M, 7, true, "gemv", 0, 120);
    // a last step of two weight rows (N % 4 == 2)
    check_qgemm_k(4, DT_F32, 1, 6, false, "gemv", 0, 128);
    // int4 rows whose last block of 32 is short, of an odd count too (the
    // AVX-512 kernel's masked tail; llama's down projection has K = 688)
    for (int64_t K = 97; K <= 113; K += 16)
        for (int64_t M = 1; M <= 3; M += 2)
            check_qgemm_k(4, DT_F16, M, 9, true, "gemv", 0, K);
    check_qgemm_k(8, DT_F32, 1, 6, false, "gemv", 0, 128);
    // the int4 AVX-512 kernel's blocks of 128 values: several, a short last
    // one, each group size (a block holds 4, 2 or 1 groups; one of 256 spans
    // two blocks), scales in both dtypes, M 1 and 2
    const int64_t groups[] = {32, 64, 128, 256};
    for (int gi = 0; gi < 4; gi++)
        for (int64_t K = 256; K <= 300; K += 44)
            for (int64_t M = 1; M <= 2; M++)
                check_qgemm_g(4, M == 1 ? DT_F16 : DT_F32, M, 11, M == 2, "gemv", 0, K, groups[gi]);
    // x past the kernel's stack buffer (5 rows of 1024 values): a heap one
    check_qgemm_g(4, DT_F32, 5, 9, false, "gemv", 0, 1000, 64);
    // the AVX2 int4 kernel (on an AVX-512 build, the AVX-512 ones are
    // otherwise the only ones run) and the portable loop, at M 1 and 3
    const char *simd[] = {"avx512", "1"};
    for (int v = 0; v < 2; v++) {
        setenv("TCBENCH_DISABLE_QGEMV_SIMD", simd[v], 1);
        for (int64_t M = 1; M <= 3; M += 2) { // check_qgemm_k reloads the switches
            check_qgemm_k(4, DT_F16, M, 13, true, "gemv", 0, 100);
            check_qgemm_k(8, DT_F32, M, 13, false, "gemv", 0, 100);
        }
        unsetenv("TCBENCH_DISABLE_QGEMV_SIMD");
        cpu_quant_env_reload();
    }
}

// x as the int4 VNNI kernel's per-lane scales must take it (a lane: values
// 8i .. 8i+7 of a row, one scale each): tiny values (1e-3) beside a huge
// outlier (1e4) in lane 2, lane 5 and the row's last lane exactly zero,
// row 1 of x all zero. Even weight rows are zero over values 0 .. 31 (the
// outlier's lane among them), so that their sums are the tiny values'
// alone: a scale per block or row would round those to nothing, far past
// the tolerance.
// K = 96 (one short block), 160 (a block and a group), 688 (llama's down
// projection); N = 11 (a step of 8 rows and one of 3); M 1 and 3; f16 and
// f32 scales; groups 32 and 128.
static void test_qgemv4_lanes(void **state) {
    (void)state;
    enum { N = 11, KMAX = 688, MMAX = 3 };
    static float w[N * KMAX], x[MMAX * KMAX];
    const int64_t Ks[] = {96, 160, 688};
    for (int ki = 0; ki < 3; ki++)
        for (int64_t M = 1; M <= MMAX; M += 2)
            for (int64_t grp = 32; grp <= 128; grp += 96) {
                int64_t K = Ks[ki];
                fill(w, N * K, 21);
                fill(x, M * K, 22);
                for (int64_t n = 0; n < N; n += 2)
                    for (int64_t k = 0; k < 32; k++)
                        w[n * K + k] = 0;
                for (int64_t m = 0; m < M; m++) {
                    for (int64_t k = 0; k < K; k++)
                        x[m * K + k] *= m == 1 ? 0.0f : 1e-3f;
                    x[m * K + 19] = m == 1 ? 0.0f : -1e4f * (float)(m + 1);
                    for (int64_t k = 0; k < 8; k++)
                        x[m * K + 40 + k] = x[m * K + K - 8 + k] = 0;
                }
                for (int h = 0; h < 2; h++)
                    check_qgemm_xw(4, h ? DT_F16 : DT_F32, M, N, false, "gemv", 0, K, grp, w, x);
            }
}

// A NaN in x makes its row's every output NaN, as an f32 product's would
// (0 NaN is NaN), in each form and in both widths; the other row stays
// finite. The int4 VNNI kernel must not round the NaN to an integer. So
// does an infinite x its row's outputs inf of the right sign.
static void test_qgemm_nan(void **state) {
    (void)state;
    enum { M = 2, N = 13, K = 256, G = K / 32 };
    static float w[N * K], x[M * K], sc[N * G], y[M * N];
    static uint8_t q[N * K];
    fill(w, N * K, 31);
    const char *forms[] = {"gemv", "tiles"};
    const int64_t at[] = {0, 37, 255};
    for (int bits = 4; bits <= 8; bits += 4)
        for (int f = 0; f < 2; f++)
            for (int a = 0; a < 3; a++) {
                fill(x, M * K, 32);
                x[at[a]] = NAN;
                cpu_quant_quantize(bits, 32, N, K, w, q, DT_F32, sc);
                setenv("TCBENCH_QGEMM", forms[f], 1);
                cpu_quant_env_reload();
                assert_int_equal(cpu_qgemm(bits, 32, M, N, K, x, q, DT_F32, sc, NULL, y), 0);
                unsetenv("TCBENCH_QGEMM");
                cpu_quant_env_reload();
                for (int64_t n = 0; n < N; n++) {
                    if (!isnan(y[n]))
                        fail_msg("int%d %s, NaN at %lld: y(0, %lld) = %g", bits, forms[f],
                                 (long long)at[a], (long long)n, y[n]);
                    assert_true(isfinite(y[N + n]));
                }
                // an infinite x: each output inf of the sign its weight gives
                // it (NaN where that weight is 0, as 0 inf is)
                for (int sgn = -1; sgn <= 1; sgn += 2) {
                    fill(x, M * K, 32);
                    x[at[a]] = (float)sgn * INFINITY;
                    setenv("TCBENCH_QGEMM", forms[f], 1);
                    cpu_quant_env_reload();
                    assert_int_equal(cpu_qgemm(bits, 32, M, N, K, x, q, DT_F32, sc, NULL, y), 0);
                    unsetenv("TCBENCH_QGEMM");
                    cpu_quant_env_reload();
                    float *dq = malloc(sizeof(float) * N * K);
                    assert_non_null(dq);
                    cpu_quant_dequantize(bits, 32, N, K, q, DT_F32, sc, dq);
                    for (int64_t n = 0; n < N; n++) {
                        float wv = dq[n * K + at[a]];
                        bool ok = wv == 0 ? isnan(y[n])
                                          : isinf(y[n]) && (y[n] > 0) == (wv * (float)sgn > 0);
                        if (!ok)
                            fail_msg("int%d %s, %s at %lld: y(0, %lld) = %g, weight %g", bits,
                                     forms[f], sgn > 0 ? "inf" : "-inf", (long long)at[a],
                                     (long long)n, y[n], wv);
                    }
                    free(dq);
                }
            }
}

// ---- 3. the model rewrite, eager, compiled and the fusion -----------------------

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *f) {
    (void)st, (void)f;
    return flag == FTW_DP ? rmdir(path) : unlink(path);
}

// The largest difference from the fp64 values, relative to their largest
// magnitude.
static double max_rel(const tensor *c, const double *r) {
    double diff = 0, mag = 1e-30;
    for (int64_t i = 0; i < tensor_numel(c); i++) {
        diff = fmax(diff, fabs(tensor_get_flat(c, i) - r[i]));
        mag = fmax(mag, fabs(r[i]));
    }
    return diff / mag;
}

// smoke.yaml's llama, quantized as asked, or NULL with err for a refusal.
static model *smoke_llama(const model_prep *mp, modeldef **md, char *err, size_t cap) {
    suite *s = load_smoke_suite();
    const suite_case *sc = NULL;
    for (int i = 0; i < s->ncases; i++)
        if (strcmp(s->cases[i].name, "llama") == 0)
            sc = &s->cases[i];
    assert_non_null(sc);
    diag d;
    if (modeldef_load(sc->model_path, md, &d) < 0)
        fail_msg("%s:%d:%d: %s", sc->model_path, d.line, d.col, d.msg);
    model *m = NULL;
    enum model_prep_step st =
        model_prepare(*md, sc->overrides, sc->noverrides, sc->batch, mp, &m, err, cap);
    suite_free(s);
    return st == MODEL_PREP_DONE ? m : NULL;
}

static int64_t compiled_kernels(const model *m, const char *cache, double *const *ref) {
    compile_opts o = compile_opts_default();
    o.cache_dir = cache;
    compiled *c;
    char err[600];
    if (compile_model(m, &o, &c, err, sizeof err) < 0)
        fail_msg("compile: %s", err);
    tensor *out[8] = {0};
    compiled_stats st;
    if (compiled_run(c, out, &st) < 0)
        fail_msg("compiled run: %s", compiled_error(c));
    for (int i = 0; i < m->g->noutputs; i++) {
        double e = max_rel(out[i], ref[i]);
        if (!(e < 1e-4))
            fail_msg("compiled output %d: error %g of the largest against fp64", i, e);
        tensor_free(out[i]);
    }
    compiled_free(c);
    return st.kernels;
}

static void check_llama(int bits, int64_t group, enum dtype sdt, const char *cache) {
    model_quant_stats qs;
    model_prep mp = {
        .seed = 17, .weight_bits = bits, .weight_group = group, .weight_scales = sdt, .quant = &qs};
    modeldef *md;
    char err[600];
    model *m = smoke_llama(&mp, &md, err, sizeof err);
    if (!m)
        fail_msg("llama int%d: %s", bits, err);
    const graph *g = m->g;
    int dq = 0;
    for (int i = 0; i < g->n; i++) {
        const graph_node *n = &g->nodes[i];
        dq += n->op == OP_DEQUANT;
        if (n->op == OP_LINEAR && g->nodes[n->src[1]].op == OP_PARAM)
            fail_msg("linear %%%d still reads parameter %s", i, g->nodes[n->src[1]].name);
    }
    assert_int_equal(dq, qs.weights);
    assert_true(dq >= 4);
    assert_true(qs.bytes_after * (bits == 8 ? 3 : 6) < qs.bytes_before);
    assert_true(qs.rel_rms > 0 && qs.rel_rms < (bits == 8 ? 0.01 : 0.15));
    print_message("llama int%d group %lld %s: %d weights, rel. RMS error %.4f, %zu -> %zu bytes\n",
                  bits, (long long)group, dtype_name(sdt), qs.weights, qs.rel_rms, qs.bytes_before,
                  qs.bytes_after);
    double *ref[8];
    assert_true(g->noutputs <= 8);
    assert_int_equal(ref_run(m, ref, err, sizeof err), 0);
    eager *e = eager_new(m);
    assert_non_null(e);
    tensor *eo[8] = {0};
    eager_stats est;
    if (eager_run(e, eo, &est) < 0)
        fail_msg("eager: %s", eager_error(e));
    for (int i = 0; i < g->noutputs; i++) {
        double er = max_rel(eo[i], ref[i]);
        if (!(er < 1e-4))
            fail_msg("eager output %d: error %g of the largest against fp64", i, er);
        tensor_free(eo[i]);
    }
    eager_free(e);
    int64_t fused = compiled_kernels(m, cache, ref);
    setenv("TCBENCH_DISABLE_QLINEAR", "1", 1);
    int64_t apart = compiled_kernels(m, cache, ref);
    unsetenv("TCBENCH_DISABLE_QLINEAR");
    print_message("  eager %lld kernels; compiled %lld, %lld without the qlinear pass\n",
                  (long long)est.kernels, (long long)fused, (long long)apart);
    assert_true(fused < apart); // the dequant kernels are gone
    for (int i = 0; i < g->noutputs; i++)
        free(ref[i]);
    model_free(m);
    modeldef_free(md);
}

static void test_llama_quantized(void **state) {
    (void)state;
    const char *t = getenv("TMPDIR");
    char dir[600];
    snprintf(dir, sizeof dir, "%s/tcbench-test-quant-XXXXXX", t && *t ? t : "/tmp");
    assert_non_null(mkdtemp(dir));
    check_llama(4, 32, DT_F32, dir);
    check_llama(8, 128, DT_F16, dir);
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

// Training is refused, naming the way out; so are bad arguments.
static void test_refusals(void **state) {
    (void)state;
    train_opts o = train_opts_default();
    modeldef *md;
    char err[600] = "";
    model *m = smoke_llama(
        &(model_prep){
            .train = &o, .seed = 1, .weight_bits = 4, .weight_group = 32, .weight_scales = DT_F32},
        &md, err, sizeof err);
    assert_null(m);
    assert_non_null(strstr(err, "inference"));
    modeldef_free(md);
    m = smoke_llama(&(model_prep){.seed = 1}, &md, err, sizeof err);
    assert_non_null(m);
    assert_int_equal(model_quantize_weights(m, 3, 32, DT_F32, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "4 and 8"));
    assert_int_equal(model_quantize_weights(m, 4, 32, DT_I32, NULL, err, sizeof err), -1);
    int n0 = m->g->n;
    assert_int_equal(model_quantize_weights(m, 4, 64, DT_F32, NULL, err, sizeof err), 0);
    assert_true(m->g->n > n0);
    model_free(m);
    modeldef_free(md);
}

// ---- 4. the CUDA kernels' source under NVRTC ----------------------------------

static void test_nvrtc_quant(void **state) {
    (void)state;
#if TCBENCH_HAVE_CUDA
    sbuf src = {0};
    lower_put_header(&src, cuda_prelude_text, true);
    lower_put_header(&src, compile_prelude_pointwise, false);
    lower_put_header(&src, cuda_quant_text, true);
    assert_non_null(src.s);
    const int archs[] = {80, 90};
    for (int a = 0; a < 2; a++) {
        cuda_nvrtc_result r;
        char err[600];
        if (cuda_nvrtc_compile(src.s, "tcbench_quant.cu", archs[a], &r, err, sizeof err) < 0)
            fail_msg("sm_%d: %s\n%s", archs[a], err, r.log);
        assert_true(r.cubin_size > 0);
        const char *names[] = {"tq_dequant", "tq_gemv", "tq_gemv4", "tq_tiled"};
        for (int k = 0; k < 4; k++) // every kernel is in the cubin
            assert_non_null(memmem(r.cubin, r.cubin_size, names[k], strlen(names[k])));
        cuda_nvrtc_result_free(&r);
    }
    free(src.s);
#else
    skip();
#endif
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pack4_round_trip), cmocka_unit_test(test_exact_round_trip),
        cmocka_unit_test(test_error_bound),      cmocka_unit_test(test_qgemm),
        cmocka_unit_test(test_qgemv4_lanes),     cmocka_unit_test(test_qgemm_nan),
        cmocka_unit_test(test_llama_quantized),  cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_nvrtc_quant),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
