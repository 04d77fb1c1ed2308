// Tests of the CPU backward kernels of convolution and pooling
// (cpu_dnnl_grad.c). Each kernel is checked against fp64 loops written here:
// the adjoint of a direct convolution (every term x * w of an output sends
// dy * w to dx and dy * x to dw) and the window walks of max (the first
// maximum takes dy) and avg pooling (padding counted in the divisor). Cases
// cover stride, padding, dilation, groups, depthwise, 1x1, 7x7 and
// permuted (strided) inputs, and check the kernel count; a finite
// difference through the forward cpu_conv2d checks the adjoint once more.
// Batch norm's statistics and gradients over channels-last tensors are
// checked against the plain kernels.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_kernels.h"

// ---- helpers ----------------------------------------------------------------

static uint64_t rng_state;

static double rnd(void) { // uniform in [-1, 1)
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(rng_state >> 11) / (double)(1ULL << 52) - 1.0;
}

// A (N, C, H, W) f32 tensor filled by fill() in memory order; when strided,
// a permuted view of a (N, H, W, C) buffer, or where that view would be
// contiguous (size-1 dims) of a (N, C, W, H) or (C, N, H, W) one, so
// kernels must copy it.
static tensor *new4(const int64_t *s, bool strided, double (*fill)(void)) {
    static const int perms[3][4] = {{0, 3, 1, 2}, {0, 1, 3, 2}, {1, 0, 2, 3}};
    for (int k = 0; k < 3; k++) {
        const int *perm = perms[k];
        int64_t base_shape[4];
        for (int i = 0; i < 4; i++)
            base_shape[perm[i]] = s[i];
        tensor *t = tensor_new_empty(DT_F32, 4, strided ? base_shape : s);
        assert_non_null(t);
        float *p = tensor_f32(t);
        for (int64_t i = 0; i < tensor_numel(t); i++)
            p[i] = (float)fill();
        if (!strided)
            return t;
        tensor *v = tensor_permute(t, perm);
        tensor_free(t);
        assert_non_null(v);
        if (!tensor_is_contiguous(v))
            return v;
        tensor_free(v);
    }
    fail_msg("no permuted view of this shape is strided");
    return NULL;
}

// the tensor's values in logical (row-major) order, as doubles
static double *values(const tensor *t) {
    int64_t n = tensor_numel(t);
    double *v = malloc((size_t)n * sizeof *v);
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++)
        v[i] = tensor_get_flat(t, i);
    return v;
}

static double *zeros(int64_t n) {
    double *v = calloc((size_t)n, sizeof *v);
    assert_non_null(v);
    return v;
}

// |got - want| <= rtol * mag + atol for every element, mag the sum of the
// magnitudes of want's terms (the scale of fp32 rounding in a sum)
static void expect_close(const char *what, const tensor *got, const double *want, const double *mag,
                         double rtol, double atol) {
    assert_true(tensor_is_contiguous(got));
    const float *g = tensor_f32(got);
    for (int64_t i = 0; i < tensor_numel(got); i++) {
        double tol = rtol * (mag ? mag[i] : fabs(want[i])) + atol;
        if (!(fabs(g[i] - want[i]) <= tol))
            fail_msg("%s: element %lld is %.9g, want %.9g (tolerance %.3g)", what, (long long)i,
                     g[i], want[i], tol);
    }
}

static void ctx_init(cpu_ctx *c) {
    memset(c, 0, sizeof *c);
    char err[256];
    if (cpu_dnnl_new(&c->dnnl, err, sizeof err) < 0)
        fail_msg("cpu_dnnl_new: %s", err);
}

#define CHECK_OK(c, call)                                                                          \
    do {                                                                                           \
        if ((call) < 0)                                                                            \
            fail_msg("%s failed: %s", #call, (c)->err);                                            \
    } while (0)

// ---- convolution --------------------------------------------------------------

typedef struct conv_case {
    const char *name;
    int64_t N, C, H, W, O, kh, kw;
    int64_t sh, sw, ph, pw, dh, dw, g;
} conv_case;

static const conv_case conv_cases[] = {
    {"3x3 stride 2 pad 1", 2, 3, 9, 8, 5, 3, 3, 2, 2, 1, 1, 1, 1, 1},
    {"3x3 dilation 2 pad 2", 2, 4, 11, 10, 6, 3, 3, 1, 1, 2, 2, 2, 2, 1},
    {"3x3 groups 2", 2, 6, 8, 9, 4, 3, 3, 1, 1, 1, 1, 1, 1, 2},
    {"depthwise 3x3 stride 2", 2, 5, 10, 9, 5, 3, 3, 2, 2, 1, 1, 1, 1, 5},
    {"depthwise multiplier 2", 1, 4, 7, 7, 8, 3, 3, 1, 1, 1, 1, 1, 1, 4},
    {"1x1", 3, 7, 6, 5, 4, 1, 1, 1, 1, 0, 0, 1, 1, 1},
    {"1x1 stride 2 even", 2, 5, 8, 6, 3, 1, 1, 2, 2, 0, 0, 1, 1, 1},
    {"7x7 stride 2 pad 3", 2, 3, 17, 16, 8, 7, 7, 2, 2, 3, 3, 1, 1, 1},
    {"3x5 mixed stride, pad, dilation, groups", 2, 4, 12, 13, 6, 3, 5, 2, 1, 1, 2, 2, 1, 2},
};

static int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
    return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

static void conv_shapes(const conv_case *cc, int64_t *xs, int64_t *ws, int64_t *ys) {
    int64_t x[4] = {cc->N, cc->C, cc->H, cc->W};
    int64_t w[4] = {cc->O, cc->C / cc->g, cc->kh, cc->kw};
    int64_t y[4] = {cc->N, cc->O, out_size(cc->H, cc->kh, cc->sh, cc->ph, cc->dh),
                    out_size(cc->W, cc->kw, cc->sw, cc->pw, cc->dw)};
    memcpy(xs, x, sizeof x);
    memcpy(ws, w, sizeof w);
    memcpy(ys, y, sizeof y);
}

static graph_node conv_node(const conv_case *cc, enum op op) {
    graph_node n = {.op = op};
    int64_t ia[] = {cc->sh, cc->sw, cc->ph, cc->pw, cc->dh, cc->dw, cc->g};
    memcpy(n.ia, ia, sizeof ia);
    return n;
}

// dx, dw and the magnitudes of their terms, from the direct convolution
static void ref_conv_grads(const conv_case *cc, const double *x, const double *w, const double *dy,
                           double *dx, double *dw, double *dxm, double *dwm) {
    int64_t xs[4], ws[4], ys[4];
    conv_shapes(cc, xs, ws, ys);
    int64_t C = cc->C, H = cc->H, W = cc->W, O = cc->O, Cg = C / cc->g, Og = O / cc->g;
    int64_t OH = ys[2], OW = ys[3];
    for (int64_t n = 0; n < cc->N; n++)
        for (int64_t o = 0; o < O; o++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    double g = dy[((n * O + o) * OH + oh) * OW + ow];
                    for (int64_t ci = 0; ci < Cg; ci++)
                        for (int64_t i = 0; i < cc->kh; i++)
                            for (int64_t j = 0; j < cc->kw; j++) {
                                int64_t ih = oh * cc->sh - cc->ph + i * cc->dh;
                                int64_t iw = ow * cc->sw - cc->pw + j * cc->dw;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W)
                                    continue;
                                int64_t c = o / Og * Cg + ci;
                                int64_t xi = ((n * C + c) * H + ih) * W + iw;
                                int64_t wi = ((o * Cg + ci) * cc->kh + i) * cc->kw + j;
                                dx[xi] += g * w[wi];
                                dw[wi] += g * x[xi];
                                dxm[xi] += fabs(g * w[wi]);
                                dwm[wi] += fabs(g * x[xi]);
                            }
                }
}

static bool quiet_cases; // set while a case repeats

static void run_conv_case(const conv_case *cc, bool strided) {
    if (!quiet_cases)
        print_message("conv2d grads: %s%s\n", cc->name, strided ? " (strided inputs)" : "");
    cpu_ctx c;
    ctx_init(&c);
    int64_t xs[4], ws[4], ys[4];
    conv_shapes(cc, xs, ws, ys);
    rng_state = 42;
    tensor *x = new4(xs, strided, rnd), *w = new4(ws, strided, rnd), *dy = new4(ys, strided, rnd);
    tensor *dx = tensor_new_empty(DT_F32, 4, xs), *dw = tensor_new_empty(DT_F32, 4, ws);

    // a strided weight is copied; strided dy and x too, unless channels-last
    // (the compiled mode's layout), which oneDNN takes as it is
    int cw = strided, cdy = strided && !cpu_channels_last(dy),
        cx = strided && !cpu_channels_last(x);
    graph_node n = conv_node(cc, OP_CONV2D_GRAD_INPUT);
    CHECK_OK(&c, cpu_conv2d_grad_input(&c, &n, dy, w, dx));
    assert_int_equal(c.kernels, 1 + cdy + cw); // the copies, then the primitive
    n.op = OP_CONV2D_GRAD_WEIGHT;
    CHECK_OK(&c, cpu_conv2d_grad_weight(&c, &n, dy, x, dw));
    assert_int_equal(c.kernels, 2 + 2 * cdy + cw + cx);

    double *xv = values(x), *wv = values(w), *dyv = values(dy);
    double *rdx = zeros(tensor_numel(dx)), *rdw = zeros(tensor_numel(dw));
    double *mdx = zeros(tensor_numel(dx)), *mdw = zeros(tensor_numel(dw));
    ref_conv_grads(cc, xv, wv, dyv, rdx, rdw, mdx, mdw);
    expect_close("conv2d_grad_input", dx, rdx, mdx, 2e-5, 1e-6);
    expect_close("conv2d_grad_weight", dw, rdw, mdw, 2e-5, 1e-6);

    // a second step reuses the cached primitives and gives the same bits
    tensor *dx2 = tensor_new_empty(DT_F32, 4, xs), *dw2 = tensor_new_empty(DT_F32, 4, ws);
    CHECK_OK(&c, cpu_conv2d_grad_weight(&c, &n, dy, x, dw2));
    n.op = OP_CONV2D_GRAD_INPUT;
    CHECK_OK(&c, cpu_conv2d_grad_input(&c, &n, dy, w, dx2));
    assert_memory_equal(tensor_data(dx), tensor_data(dx2), tensor_nbytes(dx));
    assert_memory_equal(tensor_data(dw), tensor_data(dw2), tensor_nbytes(dw));

    free(xv), free(wv), free(dyv), free(rdx), free(rdw), free(mdx), free(mdw);
    tensor_free(x), tensor_free(w), tensor_free(dy), tensor_free(dx), tensor_free(dw);
    tensor_free(dx2), tensor_free(dw2);
    cpu_dnnl_free(c.dnnl);
}

static void test_conv_grads(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof conv_cases / sizeof conv_cases[0]; i++)
        run_conv_case(&conv_cases[i], false);
}

static void test_conv_grads_strided(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof conv_cases / sizeof conv_cases[0]; i++)
        run_conv_case(&conv_cases[i], true);
}

// oneDNN 2.6's jit_1x1 backward-weights kernel overflows a buffer on a
// strided 1x1 convolution with channels-last operands (cpu_dnnl_grad.c
// takes another implementation). One thread and a few hundred runs made
// that a heap-corruption abort or a wrong dW every time before the fix.
static void test_conv_grad_1x1_strided_repeat(void **state) {
    (void)state;
    const conv_case *cc = NULL;
    for (size_t i = 0; i < sizeof conv_cases / sizeof conv_cases[0]; i++)
        if (!strcmp(conv_cases[i].name, "1x1 stride 2 even"))
            cc = &conv_cases[i];
    assert_non_null(cc);
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    quiet_cases = true;
    for (int r = 0; r < 300; r++)
        run_conv_case(cc, true);
    quiet_cases = false;
    omp_set_num_threads(threads);
}

// <conv(a, b), dy> in fp64 over the fp32 forward
static double conv_dot(cpu_ctx *c, const conv_case *cc, const tensor *a, const tensor *b,
                       const tensor *dy) {
    graph_node n = conv_node(cc, OP_CONV2D);
    tensor *y = tensor_new_empty(DT_F32, 4, dy->shape);
    CHECK_OK(c, cpu_conv2d(c, &n, a, b, NULL, y));
    double s = 0;
    for (int64_t i = 0; i < tensor_numel(y); i++)
        s += (double)tensor_f32(y)[i] * tensor_f32(dy)[i];
    tensor_free(y);
    return s;
}

// t + s * e, elementwise (all contiguous)
static tensor *axpy(const tensor *t, double s, const tensor *e) {
    tensor *r = tensor_new_empty(DT_F32, 4, t->shape);
    for (int64_t i = 0; i < tensor_numel(t); i++)
        tensor_f32(r)[i] = (float)(tensor_f32(t)[i] + s * tensor_f32(e)[i]);
    return r;
}

// Central differences of f(x, w) = <conv2d(x, w), dy> along random
// directions match <e, dx> and <e, dw>: the backward kernels are the
// adjoints of the forward one.
static void test_conv_adjoint(void **state) {
    (void)state;
    const double eps = 1e-2;
    for (size_t k = 0; k < sizeof conv_cases / sizeof conv_cases[0]; k++) {
        const conv_case *cc = &conv_cases[k];
        cpu_ctx c;
        ctx_init(&c);
        int64_t xs[4], ws[4], ys[4];
        conv_shapes(cc, xs, ws, ys);
        rng_state = 7 + k;
        tensor *x = new4(xs, false, rnd), *w = new4(ws, false, rnd), *dy = new4(ys, false, rnd);
        tensor *ex = new4(xs, false, rnd), *ew = new4(ws, false, rnd);
        tensor *dx = tensor_new_empty(DT_F32, 4, xs), *dw = tensor_new_empty(DT_F32, 4, ws);
        graph_node n = conv_node(cc, OP_CONV2D_GRAD_INPUT);
        CHECK_OK(&c, cpu_conv2d_grad_input(&c, &n, dy, w, dx));
        n.op = OP_CONV2D_GRAD_WEIGHT;
        CHECK_OK(&c, cpu_conv2d_grad_weight(&c, &n, dy, x, dw));

        for (int which = 0; which < 2; which++) {
            const tensor *t = which ? w : x, *e = which ? ew : ex, *grad = which ? dw : dx;
            tensor *tp = axpy(t, eps, e), *tm = axpy(t, -eps, e);
            double fp = which ? conv_dot(&c, cc, x, tp, dy) : conv_dot(&c, cc, tp, w, dy);
            double fm = which ? conv_dot(&c, cc, x, tm, dy) : conv_dot(&c, cc, tm, w, dy);
            double fd = (fp - fm) / (2 * eps), an = 0, mag = 0;
            for (int64_t i = 0; i < tensor_numel(grad); i++) {
                an += (double)tensor_f32(e)[i] * tensor_f32(grad)[i];
                mag += fabs((double)tensor_f32(e)[i] * tensor_f32(grad)[i]);
            }
            if (!(fabs(fd - an) <= 1e-4 * mag))
                fail_msg("%s: d/d%s <conv2d, dy> is %.7g by differences, %.7g by the grad "
                         "kernel (scale %.3g)",
                         cc->name, which ? "w" : "x", fd, an, mag);
            tensor_free(tp), tensor_free(tm);
        }
        tensor_free(x), tensor_free(w), tensor_free(dy), tensor_free(ex), tensor_free(ew);
        tensor_free(dx), tensor_free(dw);
        cpu_dnnl_free(c.dnnl);
    }
}

// ---- pooling --------------------------------------------------------------------

typedef struct pool_case {
    const char *name;
    enum op op;
    int64_t N, C, H, W, kh, kw, sh, sw, ph, pw;
    double (*fill)(void); // of x
} pool_case;

static double small_int(void) { return floor(3 * (rnd() + 1) / 2); } // 0, 1, 2: many ties
static double negative(void) { return rnd() - 2; }                   // zero padding would win

static const pool_case pool_cases[] = {
    {"max 3x3 stride 2 pad 1", OP_MAX_POOL2D_GRAD, 2, 3, 9, 8, 3, 3, 2, 2, 1, 1, rnd},
    {"max 3x3 stride 2 pad 1, ties", OP_MAX_POOL2D_GRAD, 2, 3, 9, 8, 3, 3, 2, 2, 1, 1, small_int},
    {"max 3x3 stride 2 pad 1, all negative", OP_MAX_POOL2D_GRAD, 2, 3, 7, 9, 3, 3, 2, 2, 1, 1,
     negative},
    {"max 2x2 stride 2, odd size", OP_MAX_POOL2D_GRAD, 2, 3, 9, 7, 2, 2, 2, 2, 0, 0, rnd},
    {"max 3x2 stride 1x2 pad 1x0, ties", OP_MAX_POOL2D_GRAD, 1, 2, 6, 7, 3, 2, 1, 2, 1, 0,
     small_int},
    {"max 3x3 stride 2 pad 1, threaded", OP_MAX_POOL2D_GRAD, 2, 16, 40, 41, 3, 3, 2, 2, 1, 1, rnd},
    {"avg 3x3 stride 2 pad 1", OP_AVG_POOL2D_GRAD, 2, 3, 9, 8, 3, 3, 2, 2, 1, 1, rnd},
    {"avg 3x3 stride 1 pad 1", OP_AVG_POOL2D_GRAD, 2, 3, 6, 7, 3, 3, 1, 1, 1, 1, rnd},
    {"avg 2x4 stride 2x3 pad 1x2", OP_AVG_POOL2D_GRAD, 1, 4, 9, 11, 2, 4, 2, 3, 1, 2, rnd},
    {"avg 3x3 stride 2 pad 1, threaded", OP_AVG_POOL2D_GRAD, 2, 16, 40, 41, 3, 3, 2, 2, 1, 1, rnd},
};

static void ref_pool_grad(const pool_case *pc, int64_t OH, int64_t OW, const double *x,
                          const double *dy, double *dx) {
    int64_t H = pc->H, W = pc->W;
    for (int64_t p = 0; p < pc->N * pc->C; p++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                double g = dy[(p * OH + oh) * OW + ow];
                int64_t best = -1;
                for (int64_t i = 0; i < pc->kh; i++)
                    for (int64_t j = 0; j < pc->kw; j++) {
                        int64_t ih = oh * pc->sh - pc->ph + i, iw = ow * pc->sw - pc->pw + j;
                        if (ih < 0 || ih >= H || iw < 0 || iw >= W)
                            continue; // padding: never the max, but in avg's divisor
                        int64_t xi = (p * H + ih) * W + iw;
                        if (pc->op == OP_AVG_POOL2D_GRAD)
                            dx[xi] += g / (double)(pc->kh * pc->kw);
                        else if (best < 0 || x[xi] > x[best])
                            best = xi;
                    }
                if (best >= 0)
                    dx[best] += g;
            }
}

static void run_pool_case(const pool_case *pc, bool strided) {
    print_message("pool2d grad: %s%s\n", pc->name, strided ? " (strided inputs)" : "");
    cpu_ctx c;
    ctx_init(&c);
    bool max = pc->op == OP_MAX_POOL2D_GRAD;
    int64_t xs[4] = {pc->N, pc->C, pc->H, pc->W};
    int64_t ys[4] = {pc->N, pc->C, out_size(pc->H, pc->kh, pc->sh, pc->ph, 1),
                     out_size(pc->W, pc->kw, pc->sw, pc->pw, 1)};
    rng_state = 3;
    tensor *x = max ? new4(xs, strided, pc->fill) : NULL, *dy = new4(ys, strided, rnd);
    tensor *dx = tensor_new_empty(DT_F32, 4, xs);
    graph_node n = {.op = pc->op, .ia = {pc->sh, pc->sw, pc->ph, pc->pw, pc->kh, pc->kw}};
    CHECK_OK(&c, cpu_pool2d_grad(&c, &n, dy, x, dx));
    assert_int_equal(c.kernels, 1 + (strided ? 1 + max : 0));

    double *xv = max ? values(x) : NULL, *dyv = values(dy), *rdx = zeros(tensor_numel(dx));
    ref_pool_grad(pc, ys[2], ys[3], xv, dyv, rdx);
    expect_close(pc->name, dx, rdx, NULL, 1e-6, 1e-6);

    free(xv), free(dyv), free(rdx);
    tensor_free(x), tensor_free(dy), tensor_free(dx);
    cpu_dnnl_free(c.dnnl);
}

static void test_pool_grads(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof pool_cases / sizeof pool_cases[0]; i++) {
        run_pool_case(&pool_cases[i], false);
        run_pool_case(&pool_cases[i], true);
    }
}

// ---- errors ---------------------------------------------------------------------

// ---- batch norm's gradient over channels-last tensors ----------------------------

// cpu_norm_grad with channels-last dy, x and dx (the column sums of
// cpu_grad.c, the compiled mode's layout) against the plain kernel on the
// same values; batch_norm_stats and batch_norm_wgrad likewise.
static void test_bn_nhwc(void **state) {
    (void)state;
    static const int64_t shapes[][4] = {{2, 5, 6, 7}, {4, 24, 10, 10}, {1, 3, 2, 2}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        const int64_t *s = shapes[k];
        cpu_ctx c;
        ctx_init(&c);
        rng_state = 11 + k;
        tensor *x = new4(s, true, rnd), *dy = new4(s, true, rnd);
        assert_true(cpu_channels_last(x) && cpu_channels_last(dy));
        tensor *xp = tensor_contiguous(x), *dyp = tensor_contiguous(dy);
        tensor *w = tensor_new_empty(DT_F32, 1, &s[1]);
        for (int64_t i = 0; i < s[1]; i++)
            tensor_f32(w)[i] = (float)(1 + rnd());
        tensor *dxn = new4(s, true, rnd), *dxp = tensor_new_empty(DT_F32, 4, s);
        graph_node n = {.op = OP_BATCH_NORM_GRAD, .fa = {1e-5}};
        CHECK_OK(&c, cpu_norm_grad(&c, &n, dy, x, w, dxn));
        assert_int_equal(c.kernels, 1); // no copies
        CHECK_OK(&c, cpu_norm_grad(&c, &n, dyp, xp, w, dxp));
        double *ref = values(dxp), *mag = zeros(tensor_numel(dxp));
        for (int64_t i = 0; i < tensor_numel(dxp); i++)
            mag[i] = fabs(ref[i]) + 1;
        tensor *dxc = tensor_contiguous(dxn);
        expect_close("batch_norm_grad (channels-last)", dxc, ref, mag, 1e-5, 1e-6);
        tensor_free(dxc);
        int64_t two[2] = {2, s[1]}, three[2] = {3, s[1]};
        tensor *wn = tensor_new_empty(DT_F32, 2, two), *wp = tensor_new_empty(DT_F32, 2, two);
        tensor *sn = tensor_new_empty(DT_F32, 2, three), *sp = tensor_new_empty(DT_F32, 2, three);
        n.op = OP_BATCH_NORM_WGRAD;
        CHECK_OK(&c, cpu_norm_wgrad(&c, &n, dy, x, wn));
        CHECK_OK(&c, cpu_norm_wgrad(&c, &n, dyp, xp, wp));
        CHECK_OK(&c, cpu_batch_norm_stats(&c, x, 1e-5, sn));
        CHECK_OK(&c, cpu_batch_norm_stats(&c, xp, 1e-5, sp));
        double *rw = values(wp), *rs = values(sp);
        double *mw = zeros(tensor_numel(wp)), *ms = zeros(tensor_numel(sp));
        for (int64_t i = 0; i < tensor_numel(wp); i++)
            mw[i] = fabs(rw[i]) + 1;
        for (int64_t i = 0; i < tensor_numel(sp); i++)
            ms[i] = fabs(rs[i]) + 1;
        expect_close("batch_norm_wgrad (channels-last)", wn, rw, mw, 1e-5, 1e-6);
        expect_close("batch_norm_stats (channels-last)", sn, rs, ms, 1e-5, 1e-6);
        free(ref), free(mag), free(rw), free(rs), free(mw), free(ms);
        tensor_free(x), tensor_free(dy), tensor_free(xp), tensor_free(dyp), tensor_free(w);
        tensor_free(dxn), tensor_free(dxp), tensor_free(wn), tensor_free(wp);
        tensor_free(sn), tensor_free(sp);
        cpu_dnnl_free(c.dnnl);
    }
}

// The compiler's batch norm backward passes the forward's statistics
// (batch_norm_stats) to both kernels instead of their passes over x: the
// same bits as computing them, for dx and for the weight gradients. Wrong
// statistics change the result (the kernels do read them).
static void test_bn_given_stats(void **state) {
    (void)state;
    static const int64_t shapes[][4] = {{2, 5, 6, 7}, {4, 24, 10, 10}, {1, 3, 2, 2}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        const int64_t *s = shapes[k];
        cpu_ctx c;
        ctx_init(&c);
        rng_state = 29 + k;
        tensor *x = new4(s, false, rnd), *dy = new4(s, false, rnd);
        tensor *w = tensor_new_empty(DT_F32, 1, &s[1]);
        for (int64_t i = 0; i < s[1]; i++)
            tensor_f32(w)[i] = (float)(1 + rnd());
        int64_t two[2] = {2, s[1]}, three[2] = {3, s[1]};
        tensor *st = tensor_new_empty(DT_F32, 2, three);
        CHECK_OK(&c, cpu_batch_norm_stats(&c, x, 1e-5, st));
        tensor *d0 = tensor_new_empty(DT_F32, 4, s), *d1 = tensor_new_empty(DT_F32, 4, s);
        tensor *w0 = tensor_new_empty(DT_F32, 2, two), *w1 = tensor_new_empty(DT_F32, 2, two);
        graph_node n = {.op = OP_BATCH_NORM_GRAD, .fa = {1e-5}};
        CHECK_OK(&c, cpu_norm_grad(&c, &n, dy, x, w, d0));
        CHECK_OK(&c, cpu_norm_grad_stats(&c, &n, dy, x, w, st, d1));
        assert_memory_equal(tensor_f32(d0), tensor_f32(d1), (size_t)tensor_nbytes(d0));
        n.op = OP_BATCH_NORM_WGRAD;
        CHECK_OK(&c, cpu_norm_wgrad(&c, &n, dy, x, w0));
        CHECK_OK(&c, cpu_norm_wgrad_stats(&c, &n, dy, x, st, w1));
        assert_memory_equal(tensor_f32(w0), tensor_f32(w1), (size_t)tensor_nbytes(w0));
        tensor_f32(st)[0] += 0.5f; // channel 0's mean, moved
        CHECK_OK(&c, cpu_norm_wgrad_stats(&c, &n, dy, x, st, w1));
        assert_true(tensor_f32(w1)[0] != tensor_f32(w0)[0]);
        tensor_free(x), tensor_free(dy), tensor_free(w), tensor_free(st);
        tensor_free(d0), tensor_free(d1), tensor_free(w0), tensor_free(w1);
        cpu_dnnl_free(c.dnnl);
    }
}

static void test_errors(void **state) {
    (void)state;
    cpu_ctx c;
    ctx_init(&c);
    const conv_case *cc = &conv_cases[0];
    int64_t xs[4], ws[4], ys[4];
    conv_shapes(cc, xs, ws, ys);
    tensor *dy16 = tensor_new(DT_F16, 4, ys), *w = tensor_new(DT_F32, 4, ws);
    tensor *dx = tensor_new(DT_F32, 4, xs);
    graph_node n = conv_node(cc, OP_CONV2D_GRAD_INPUT);
    assert_int_equal(cpu_conv2d_grad_input(&c, &n, dy16, w, dx), -1);
    assert_non_null(strstr(c.err, "conv2d_grad_input: dtype f16 is not supported"));

    // groups that do not divide the channels: a message, not a oneDNN failure
    n.ia[6] = 2;
    tensor *dy = tensor_new(DT_F32, 4, ys);
    assert_int_equal(cpu_conv2d_grad_input(&c, &n, dy, w, dx), -1);
    assert_non_null(strstr(c.err, "shapes do not fit a conv2d"));

    graph_node p = {.op = OP_MAX_POOL2D_GRAD, .ia = {2, 2, 1, 1, 3, 3}};
    int64_t ps[4] = {2, 3, 5, 4};
    tensor *pdy = tensor_new(DT_F32, 4, ps);
    assert_int_equal(cpu_pool2d_grad(&c, &p, pdy, NULL, dx), -1);
    assert_non_null(strstr(c.err, "needs the forward input"));
    assert_int_equal(cpu_pool2d_grad(&c, &p, pdy, dy16, dx), -1);
    assert_non_null(strstr(c.err, "dtype f16"));
    assert_int_equal(c.kernels, 0);

    tensor_free(dy16), tensor_free(w), tensor_free(dx), tensor_free(dy), tensor_free(pdy);
    cpu_dnnl_free(c.dnnl);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_grads),     cmocka_unit_test(test_conv_grads_strided),
        cmocka_unit_test(test_conv_adjoint),   cmocka_unit_test(test_pool_grads),
        cmocka_unit_test(test_errors),         cmocka_unit_test(test_bn_nhwc),
        cmocka_unit_test(test_bn_given_stats), cmocka_unit_test(test_conv_grad_1x1_strided_repeat),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
