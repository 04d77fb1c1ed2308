// One LSTM layer in one direction (LSTM, LSTM_GRAD in ops.def), as a
// framework's fused cell runs it: the input projection of every step in one
// GEMM, then per step one GEMM of the previous h and one cell kernel (the
// gates' sigmoid and tanh, c and h). The backward runs the steps in reverse:
// per step one cell-backward kernel and one GEMM into dh_prev, then one GEMM
// each for dx, d w_ih and d w_hh over all steps. 16-bit operands go through
// f32 scratch (cpu_f32_in), so every kernel counted here is one of the
// f32 path's.
#include "cpu_kernels.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_gemm_par.h" // after cblas.h, which declares cblas_sgemm

static inline float sigm(float v) { return 1.0f / (1.0f + expf(-v)); }

// The step order: s -> the time index it processes.
static inline int64_t step_t(int64_t s, int64_t T, bool rev) { return rev ? T - 1 - s : s; }

// x (B, T, I), w_ih (4H, I), w_hh (4H, H), b_ih, b_hh (4H) -> out (K, B, T, H)
int cpu_lstm(cpu_ctx *c, const graph_node *n, const tensor *const *in, tensor *out) {
    tensor *t[5] = {0};
    if (cpu_inputs_f32(c, "lstm", 5, in, t) < 0)
        return -1;
    tensor *oc = cpu_f32_out(c, "lstm", out);
    int64_t B = out->shape[1], T = out->shape[2], H = out->shape[3], NI = in[0]->shape[2];
    int64_t G = 4 * H, K = out->shape[0];
    bool rev = n->ia[0] != 0;
    float *gx = oc ? malloc((size_t)(B * T * G + B * G + B * H) * sizeof *gx) : NULL;
    if (!gx) {
        if (oc)
            cpu_fail(c, "lstm: out of memory for the (%lld, %lld, %lld) gate scratch", (long long)B,
                     (long long)T, (long long)G);
        cpu_free_all(5, t);
        return cpu_f32_done(oc, out, -1);
    }
    float *gh = gx + B * T * G, *cbuf = gh + B * G; // (B, 4H) one step's h_prev w_hh^T; c
    const float *x = tensor_f32(t[0]), *wi = tensor_f32(t[1]), *wh = tensor_f32(t[2]);
    const float *bi = tensor_f32(t[3]), *bh = tensor_f32(t[4]);
    float *y = tensor_f32(oc), *slab = y + B * T * H; // training: c, i, f, g, o
    // gx (B T, 4H) = x (B T, I) @ w_ih^T
    cpu_sgemm_par(111, 112, B * T, G, NI, x, NI, wi, NI, 0.0f, gx, G);
    for (int64_t s = 0; s < T; s++) {
        int64_t tt = step_t(s, T, rev), tp = step_t(s - 1, T, rev);
        if (s > 0) // gh (B, 4H) = h_prev (B, H; rows T H apart) @ w_hh^T
            cpu_sgemm_par(111, 112, B, G, H, y + tp * H, T * H, wh, H, 0.0f, gh, G);
#pragma omp parallel for if (B * H >= 4096) schedule(static)
        for (int64_t b = 0; b < B; b++) {
            const float *gr = gx + (b * T + tt) * G, *hr = gh + b * G;
            float *cr = cbuf + b * H, *yr = y + (b * T + tt) * H;
            for (int64_t j = 0; j < H; j++) {
                float a[4];
                for (int q = 0; q < 4; q++)
                    a[q] =
                        gr[q * H + j] + bi[q * H + j] + bh[q * H + j] + (s > 0 ? hr[q * H + j] : 0);
                float ig = sigm(a[0]), fg = sigm(a[1]), gg = tanhf(a[2]), og = sigm(a[3]);
                float cv = ig * gg + (s > 0 ? fg * cr[j] : 0.0f);
                cr[j] = cv;
                yr[j] = og * tanhf(cv);
                if (K == 6) {
                    float v[5] = {cv, ig, fg, gg, og};
                    for (int q = 0; q < 5; q++)
                        slab[q * B * T * H + (b * T + tt) * H + j] = v[q];
                }
            }
        }
    }
    free(gx);
    cpu_free_all(5, t);
    c->kernels += 1 + 2 * T - 1; // the first step has no h_prev GEMM
    return cpu_f32_done(oc, out, 0);
}

// dy (6, B, T, H), x, w_ih, w_hh, y (6, B, T, H) -> dx | d w_ih | d w_hh | d b
int cpu_lstm_grad(cpu_ctx *c, const graph_node *n, const tensor *const *in, tensor *out) {
    tensor *t[5] = {0};
    if (cpu_inputs_f32(c, "lstm_grad", 5, in, t) < 0)
        return -1;
    tensor *oc = cpu_f32_out(c, "lstm_grad", out);
    int64_t B = in[4]->shape[1], T = in[4]->shape[2], H = in[4]->shape[3], NI = in[1]->shape[2];
    int64_t G = 4 * H, BTH = B * T * H;
    bool rev = n->ia[0] != 0;
    float *dg = oc ? malloc((size_t)(B * T * G + B * T * H + 2 * B * H) * sizeof *dg) : NULL;
    if (!dg) {
        if (oc)
            cpu_fail(c, "lstm_grad: out of memory for the (%lld, %lld, %lld) gate gradients",
                     (long long)B, (long long)T, (long long)G);
        cpu_free_all(5, t);
        return cpu_f32_done(oc, out, -1);
    }
    // dg (B, T, 4H) every step's gate gradients; hp (B, T, H) each step's h_prev;
    // dc, dhr (B, H) carried to the step before: c's gradient, h's from the recurrence
    float *hp = dg + B * T * G, *dc = hp + B * T * H, *dhr = dc + B * H;
    const float *dy = tensor_f32(t[0]), *x = tensor_f32(t[1]), *wi = tensor_f32(t[2]);
    const float *wh = tensor_f32(t[3]), *ys = tensor_f32(t[4]);
    const float *cs = ys + BTH, *is = cs + BTH, *fs = is + BTH, *gs = fs + BTH, *os = gs + BTH;
    float *dx = tensor_f32(oc), *dwi = dx + B * T * NI, *dwh = dwi + G * NI, *db = dwh + G * H;
    memset(dc, 0, (size_t)(2 * B * H) * sizeof *dc);
    for (int64_t s = T - 1; s >= 0; s--) {
        int64_t tt = step_t(s, T, rev), tp = step_t(s - 1, T, rev);
#pragma omp parallel for if (B * H >= 4096) schedule(static)
        for (int64_t b = 0; b < B; b++) {
            int64_t r = (b * T + tt) * H;
            float *dgr = dg + (b * T + tt) * G;
            for (int64_t j = 0; j < H; j++) {
                float cv = cs[r + j], ig = is[r + j], fg = fs[r + j], gg = gs[r + j],
                      og = os[r + j];
                float cp = s > 0 ? cs[(b * T + tp) * H + j] : 0.0f, th = tanhf(cv);
                float dhv = dy[r + j] + dhr[b * H + j];
                float dcv = dhv * og * (1 - th * th) + dc[b * H + j];
                dgr[j] = dcv * gg * ig * (1 - ig);
                dgr[H + j] = dcv * cp * fg * (1 - fg);
                dgr[2 * H + j] = dcv * ig * (1 - gg * gg);
                dgr[3 * H + j] = dhv * th * og * (1 - og);
                dc[b * H + j] = dcv * fg;
                hp[r + j] = s > 0 ? ys[(b * T + tp) * H + j] : 0.0f;
            }
        }
        if (s > 0) // dhr (B, H) = dg_t (B, 4H; rows T 4H apart) @ w_hh
            cpu_sgemm_par(111, 111, B, H, G, dg + tt * G, T * G, wh, H, 0.0f, dhr, H);
    }
    // dx (B T, I) = dg @ w_ih; d w_ih (4H, I) = dg^T @ x; d w_hh (4H, H) = dg^T @ hp
    cpu_sgemm_par(111, 111, B * T, NI, G, dg, G, wi, NI, 0.0f, dx, NI);
    cpu_sgemm_par(112, 111, G, NI, B * T, dg, G, x, NI, 0.0f, dwi, NI);
    cpu_sgemm_par(112, 111, G, H, B * T, dg, G, hp, H, 0.0f, dwh, H);
#pragma omp parallel for if (B * T * G >= 65536) schedule(static)
    for (int64_t j = 0; j < G; j++) {
        double acc = 0;
        for (int64_t r = 0; r < B * T; r++)
            acc += dg[r * G + j];
        db[j] = (float)acc;
    }
    free(dg);
    cpu_free_all(5, t);
    c->kernels += 2 * T - 1 + 4; // T cells, T - 1 GEMMs, then dx, d w_ih, d w_hh, d b
    return cpu_f32_done(oc, out, 0);
}
