// One LSTM layer in one direction (LSTM, LSTM_GRAD in ops.def) as
// cpu_lstm.c runs it, the way PyTorch's fused CUDA cell does: one cuBLAS
// GEMM for every step's input projection, then per step one GEMM of the
// previous h and one cell kernel; the backward per step one cell-backward
// kernel and one GEMM into dh_prev, then the GEMMs for dx, d w_ih, d w_hh and
// one reduction for d b. f32 or f16 operands (autocast's f16 LSTM); the
// cell state and the gate math stay in f32 registers.
#include "cuda_pointwise.cuh"

__device__ __forceinline__ float sigm(float v) { return 1.0f / (1.0f + expf(-v)); }

// One step's cell over (B, H): gates from gx (row b at b T + t) plus gh,
// the biases; c (B, H) f32 carried from step to step.
template <typename E> struct lstm_cell_f {
    const E *gx, *gh, *bi, *bh;
    E *y; // (K, B, T, H)
    float *c;
    int64_t B, T, H, t, K;
    bool first;
    __device__ void operator()(int64_t i) const {
        int64_t b = i / H, j = i % H, G = 4 * H, r = (b * T + t) * H + j, BTH = B * T * H;
        float a[4];
        for (int q = 0; q < 4; q++)
            a[q] = ldf(gx, (b * T + t) * G + q * H + j) + ldf(bi, q * H + j) + ldf(bh, q * H + j) +
                   (first ? 0.0f : ldf(gh, b * G + q * H + j));
        float ig = sigm(a[0]), fg = sigm(a[1]), gg = tanhf(a[2]), og = sigm(a[3]);
        float cv = ig * gg + (first ? 0.0f : fg * c[i]);
        c[i] = cv;
        stf(y, r, og * tanhf(cv));
        if (K == 6) {
            float v[5] = {cv, ig, fg, gg, og};
            for (int q = 0; q < 5; q++)
                stf(y, (q + 1) * BTH + r, v[q]);
        }
    }
};

// One step's cell backward over (B, H): dg (B, T, 4H), dc carried (f32),
// dhr the recurrent dh from the step after, hp the step's h_prev.
template <typename E> struct lstm_cell_back_f {
    const E *dy, *ys, *dhr;
    E *dg, *hp;
    float *dc;
    int64_t B, T, H, t, tp;
    bool first, last;
    __device__ void operator()(int64_t i) const {
        int64_t b = i / H, j = i % H, BTH = B * T * H, r = (b * T + t) * H + j;
        int64_t rp = (b * T + tp) * H + j, G = 4 * H;
        float cv = ldf(ys, BTH + r), ig = ldf(ys, 2 * BTH + r), fg = ldf(ys, 3 * BTH + r);
        float gg = ldf(ys, 4 * BTH + r), og = ldf(ys, 5 * BTH + r), th = tanhf(cv);
        float cp = first ? 0.0f : ldf(ys, BTH + rp);
        float dhv = ldf(dy, r) + (last ? 0.0f : ldf(dhr, i));
        float dcv = dhv * og * (1 - th * th) + (last ? 0.0f : dc[i]);
        E *d = dg + (b * T + t) * G;
        stf(d, j, dcv * gg * ig * (1 - ig));
        stf(d, H + j, dcv * cp * fg * (1 - fg));
        stf(d, 2 * H + j, dcv * ig * (1 - gg * gg));
        stf(d, 3 * H + j, dhv * th * og * (1 - og));
        dc[i] = dcv * fg;
        stf(hp, r, first ? 0.0f : ldf(ys, rp));
    }
};

// d b (4H) = the column sums of dg (R, 4H)
template <typename E> struct lstm_bias_f {
    const E *dg;
    E *db;
    int64_t R, G;
    __device__ void operator()(int64_t j) const {
        float acc = 0;
        for (int64_t r = 0; r < R; r++)
            acc += ldf(dg, r * G + j);
        stf(db, j, acc);
    }
};

static int64_t step_t(int64_t s, int64_t T, bool rev) { return rev ? T - 1 - s : s; }

// The five inputs contiguous (views, or counted copies) of one float dtype.
static int lstm_inputs(cuda_ctx *c, const char *what, const tensor *const *in, tensor **t) {
    for (int k = 0; k < 5; k++) {
        if (in[k]->dtype != in[0]->dtype || (in[0]->dtype != DT_F32 && in[0]->dtype != DT_F16))
            return cuda_pw_fail(c, what, in[k]->dtype);
        if (!(t[k] = cuda_contiguous(c, in[k])))
            return -1;
    }
    return 0;
}

static void lstm_release(cuda_ctx *c, tensor **t) {
    for (int k = 0; k < 5; k++)
        cuda_tensor_free(c, t[k]);
}

template <typename E>
static int lstm_fwd(cuda_ctx *c, const graph_node *n, tensor *const *t, tensor *out) {
    int64_t B = out->shape[1], T = out->shape[2], H = out->shape[3], NI = t[0]->shape[2];
    int64_t G = 4 * H, K = out->shape[0];
    bool rev = n->ia[0] != 0;
    enum dtype dt = t[0]->dtype;
    size_t es = dtype_size(dt);
    char *ws = (char *)cuda_scratch_get(c, (size_t)(B * T * G + B * G) * es + (size_t)(B * H) * 4);
    if (!ws)
        return -1;
    E *gx = (E *)ws, *gh = (E *)(ws + (size_t)(B * T * G) * es);
    float *cst = (float *)(ws + (size_t)(B * T * G + B * G) * es);
    E *y = (E *)tensor_data(out);
    int rc = cuda_gemm(c, dt, false, NI, 0, tensor_data(t[0]), true, NI, 0, tensor_data(t[1]),
                       B * T, G, NI, 0.0f, gx, 0, 1);
    for (int64_t s = 0; rc == 0 && s < T; s++) {
        int64_t tt = step_t(s, T, rev), tp = step_t(s - 1, T, rev);
        if (s > 0)
            rc = cuda_gemm(c, dt, false, T * H, 0, y + tp * H, true, H, 0, tensor_data(t[2]), B, G,
                           H, 0.0f, gh, 0, 1);
        if (rc == 0)
            rc = pw_launch(c, B * H,
                           lstm_cell_f<E>{gx, gh, (const E *)tensor_data(t[3]),
                                          (const E *)tensor_data(t[4]), y, cst, B, T, H, tt, K,
                                          s == 0},
                           "lstm_cell<<<>>>");
    }
    cuda_scratch_put(c, ws);
    return rc;
}

template <typename E>
static int lstm_bwd(cuda_ctx *c, const graph_node *n, tensor *const *t, tensor *out) {
    int64_t B = t[4]->shape[1], T = t[4]->shape[2], H = t[4]->shape[3], NI = t[1]->shape[2];
    int64_t G = 4 * H;
    bool rev = n->ia[0] != 0;
    enum dtype dt = t[0]->dtype;
    size_t es = dtype_size(dt);
    char *ws = (char *)cuda_scratch_get(c, (size_t)(B * T * G + B * T * H + B * H) * es +
                                               (size_t)(B * H) * 4);
    if (!ws)
        return -1;
    E *dg = (E *)ws, *hp = dg + B * T * G, *dhr = hp + B * T * H;
    float *dc = (float *)(ws + (size_t)(B * T * G + B * T * H + B * H) * es);
    E *dx = (E *)tensor_data(out), *dwi = dx + B * T * NI, *dwh = dwi + G * NI, *db = dwh + G * H;
    const E *dy = (const E *)tensor_data(t[0]), *ys = (const E *)tensor_data(t[4]);
    int rc = 0;
    for (int64_t s = T - 1; rc == 0 && s >= 0; s--) {
        int64_t tt = step_t(s, T, rev), tp = step_t(s - 1, T, rev);
        rc = pw_launch(
            c, B * H,
            lstm_cell_back_f<E>{dy, ys, dhr, dg, hp, dc, B, T, H, tt, tp, s == 0, s == T - 1},
            "lstm_cell_back<<<>>>");
        if (rc == 0 && s > 0)
            rc = cuda_gemm(c, dt, false, T * G, 0, dg + tt * G, false, H, 0, tensor_data(t[3]), B,
                           H, G, 0.0f, dhr, 0, 1);
    }
    if (rc == 0)
        rc = cuda_gemm(c, dt, false, G, 0, dg, false, NI, 0, tensor_data(t[2]), B * T, NI, G, 0.0f,
                       dx, 0, 1);
    if (rc == 0)
        rc = cuda_gemm(c, dt, true, G, 0, dg, false, NI, 0, tensor_data(t[1]), G, NI, B * T, 0.0f,
                       dwi, 0, 1);
    if (rc == 0)
        rc = cuda_gemm(c, dt, true, G, 0, dg, false, H, 0, hp, G, H, B * T, 0.0f, dwh, 0, 1);
    if (rc == 0)
        rc = pw_launch(c, G, lstm_bias_f<E>{dg, db, B * T, G}, "lstm_bias<<<>>>");
    cuda_scratch_put(c, ws);
    return rc;
}

// The forward or the backward over its five inputs made contiguous.
static int lstm_run(cuda_ctx *c, const graph_node *n, const tensor *const *in, tensor *out,
                    bool grad) {
    tensor *t[5] = {0};
    bool f16 = in[0]->dtype == DT_F16;
    int rc = lstm_inputs(c, op_name(n->op), in, t);
    if (rc == 0 && grad)
        rc = f16 ? lstm_bwd<uint16_t>(c, n, t, out) : lstm_bwd<float>(c, n, t, out);
    else if (rc == 0)
        rc = f16 ? lstm_fwd<uint16_t>(c, n, t, out) : lstm_fwd<float>(c, n, t, out);
    lstm_release(c, t);
    return rc;
}

int cuda_lstm(cuda_ctx *c, const graph_node *n, const tensor *const *in, tensor *out) {
    return lstm_run(c, n, in, out, false);
}

int cuda_lstm_grad(cuda_ctx *c, const graph_node *n, const tensor *const *in, tensor *out) {
    return lstm_run(c, n, in, out, true);
}
