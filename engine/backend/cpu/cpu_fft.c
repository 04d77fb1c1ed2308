// FFT2_REAL (ops.def) on the CPU through FFTW: y = Re(fftn(x, dim=(-2, -1))),
// x (..., S, H) real. One real-to-complex 2-D transform per (S, H) slice gives
// the half spectrum Z (S, H/2 + 1); the other half follows from Hermitian
// symmetry, Re Z[s, h] = Re Z[-s mod S, H - h]. Plans are made once per
// (S, H) under a lock (FFTW's planner is not thread-safe) and kept for the
// process; executing a plan on new arrays (fftwf_execute_dft_r2c) is
// thread-safe, so the slices run in parallel. The plans are FFTW_UNALIGNED:
// tensors and views may start anywhere; FFTW_PRESERVE_INPUT: x is read only.
#include "cpu_kernels.h"

#include <fftw3.h>
#include <pthread.h>
#include <stdlib.h>

#define FFT_PLANS 16

typedef struct fft_entry {
    int64_t S, H;
    fftwf_plan plan;
} fft_entry;
static fft_entry fft_plans[FFT_PLANS];
static int fft_nplans;
static pthread_mutex_t fft_lock = PTHREAD_MUTEX_INITIALIZER;

// The plan for one (S, H) slice, made on scratch arrays the first time;
// NULL with c->err set.
static fftwf_plan fft_plan(cpu_ctx *c, int64_t S, int64_t H) {
    fftwf_plan p = NULL;
    if (pthread_mutex_lock(&fft_lock) != 0) {
        cpu_fail(c, "fft2_real: pthread_mutex_lock failed");
        return NULL;
    }
    for (int i = 0; i < fft_nplans && !p; i++)
        if (fft_plans[i].S == S && fft_plans[i].H == H)
            p = fft_plans[i].plan;
    if (!p && fft_nplans == FFT_PLANS)
        cpu_fail(c, "fft2_real: more than %d transform shapes in one process", FFT_PLANS);
    else if (!p) {
        float *in = fftwf_alloc_real((size_t)(S * H));
        fftwf_complex *out = fftwf_alloc_complex((size_t)(S * (H / 2 + 1)));
        if (!in || !out)
            cpu_fail(c, "fft2_real: fftwf_alloc for a (%lld, %lld) plan failed", (long long)S,
                     (long long)H);
        else if (!(p = fftwf_plan_dft_r2c_2d((int)S, (int)H, in, out,
                                             FFTW_ESTIMATE | FFTW_UNALIGNED | FFTW_PRESERVE_INPUT)))
            cpu_fail(c, "fft2_real: fftwf_plan_dft_r2c_2d(%lld, %lld) returned no plan",
                     (long long)S, (long long)H);
        else
            fft_plans[fft_nplans++] = (fft_entry){S, H, p};
        fftwf_free(in);
        fftwf_free(out);
    }
    pthread_mutex_unlock(&fft_lock);
    return p;
}

int cpu_fft2_real(cpu_ctx *c, const tensor *x, tensor *out) {
    int64_t S = x->shape[x->ndim - 2], H = x->shape[x->ndim - 1];
    if (S > (1 << 30) || H > (1 << 30))
        return cpu_fail(c, "fft2_real: (%lld, %lld) is beyond FFTW's int sizes", (long long)S,
                        (long long)H);
    int64_t B = tensor_numel(x) / (S * H), W = H / 2 + 1;
    fftwf_plan p = fft_plan(c, S, H);
    if (!p)
        return -1;
    tensor *xc = cpu_f32_in(c, "fft2_real", x);
    tensor *oc = xc ? cpu_f32_out(c, "fft2_real", out) : NULL;
    fftwf_complex *z = oc ? fftwf_alloc_complex((size_t)(B * S * W)) : NULL;
    if (!z) {
        if (oc)
            cpu_fail(c, "fft2_real: fftwf_alloc_complex of %lld values failed",
                     (long long)(B * S * W));
        tensor_free(xc);
        tensor_free(oc);
        return -1;
    }
    const float *xs = tensor_f32(xc);
    float *ys = tensor_f32(oc);
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < B; b++) {
        fftwf_complex *zb = z + b * S * W;
        fftwf_execute_dft_r2c(p, (float *)(xs + b * S * H), zb);
        float *yb = ys + b * S * H;
        for (int64_t s = 0; s < S; s++) {
            const fftwf_complex *row = zb + s * W, *mirror = zb + ((S - s) % S) * W;
            for (int64_t h = 0; h < W; h++)
                yb[s * H + h] = row[h][0];
            for (int64_t h = W; h < H; h++)
                yb[s * H + h] = mirror[H - h][0];
        }
    }
    fftwf_free(z);
    tensor_free(xc);
    c->kernels++;
    return cpu_f32_done(oc, out, 0);
}
