// FFT2_REAL (ops.def) on the GPU through cuFFT: y = Re(fftn(x, dim=(-2, -1)))
// for f32 x (..., S, H), as cpu_fft.c: one batched real-to-complex 2-D
// transform into a half spectrum Z (B, S, H/2 + 1) of scratch, then one
// kernel that writes the real parts of the full spectrum (the missing half by
// Hermitian symmetry). Plans are made once per (device, stream, B, S, H)
// under a lock and kept; cuFFT runs them on the context's stream, so CUDA
// graphs capture them.
#include "cuda_pointwise.cuh"

#include <cufft.h>
#include <pthread.h>

static const char *cufft_reason(cufftResult r) {
    switch (r) {
    case CUFFT_INVALID_PLAN: return "CUFFT_INVALID_PLAN";
    case CUFFT_ALLOC_FAILED: return "CUFFT_ALLOC_FAILED";
    case CUFFT_INVALID_VALUE: return "CUFFT_INVALID_VALUE";
    case CUFFT_INTERNAL_ERROR: return "CUFFT_INTERNAL_ERROR";
    case CUFFT_EXEC_FAILED: return "CUFFT_EXEC_FAILED";
    case CUFFT_SETUP_FAILED: return "CUFFT_SETUP_FAILED";
    case CUFFT_INVALID_SIZE: return "CUFFT_INVALID_SIZE";
    default: return "cuFFT error";
    }
}

#define CUFFT_CTX(c, call)                                                                         \
    do {                                                                                           \
        cufftResult r_ = (call);                                                                   \
        if (r_ != CUFFT_SUCCESS)                                                                   \
            return cuda_fail_at((c)->err, sizeof(c)->err, #call, __FILE__, __LINE__,               \
                                cufft_reason(r_));                                                 \
    } while (0)

#define FFT_PLANS 16

struct fft_entry {
    int device;
    cudaStream_t stream;
    int64_t B, S, H;
    cufftHandle plan;
};
static fft_entry fft_plans[FFT_PLANS];
static int fft_nplans;
static pthread_mutex_t fft_lock = PTHREAD_MUTEX_INITIALIZER;

static int fft_plan_locked(cuda_ctx *c, int64_t B, int64_t S, int64_t H, cufftHandle *out) {
    for (int i = 0; i < fft_nplans; i++) {
        const fft_entry *e = &fft_plans[i];
        if (e->device == c->device && e->stream == c->stream && e->B == B && e->S == S &&
            e->H == H) {
            *out = e->plan;
            return 0;
        }
    }
    if (fft_nplans == FFT_PLANS)
        return cuda_fail_at(c->err, sizeof c->err, "fft2_real", __FILE__, __LINE__,
                            "more than 16 transform shapes in one process");
    int n[2] = {(int)S, (int)H};
    cufftHandle p = 0;
    CUFFT_CTX(c, cufftPlanMany(&p, 2, n, NULL, 1, (int)(S * H), NULL, 1, (int)(S * (H / 2 + 1)),
                               CUFFT_R2C, (int)B));
    cufftResult r = cufftSetStream(p, c->stream);
    if (r != CUFFT_SUCCESS) {
        cufftDestroy(p);
        return cuda_fail_at(c->err, sizeof c->err, "cufftSetStream", __FILE__, __LINE__,
                            cufft_reason(r));
    }
    fft_plans[fft_nplans++] = fft_entry{c->device, c->stream, B, S, H, p};
    *out = p;
    return 0;
}

// y (B, S, H) from the half spectrum z (B, S, W)
struct fft_real_f {
    const cufftComplex *z;
    float *y;
    int64_t S, H, W;
    __device__ void operator()(int64_t i) const {
        int64_t h = i % H, r = i / H, s = r % S, b = r / S;
        const cufftComplex *zb = z + b * S * W;
        y[i] = h < W ? zb[s * W + h].x : zb[((S - s) % S) * W + (H - h)].x;
    }
};

int cuda_fft2_real(cuda_ctx *c, const tensor *x, tensor *out) {
    if (x->dtype != DT_F32 || out->dtype != DT_F32)
        return cuda_fail_at(c->err, sizeof c->err, "fft2_real", __FILE__, __LINE__,
                            "f32 only (autocast runs it in f32)");
    int64_t S = x->shape[x->ndim - 2], H = x->shape[x->ndim - 1], W = H / 2 + 1;
    int64_t B = tensor_numel(x) / (S * H);
    if (S * H > INT32_MAX || B > INT32_MAX)
        return cuda_fail_at(c->err, sizeof c->err, "fft2_real", __FILE__, __LINE__,
                            "sizes beyond cuFFT's int");
    if (pthread_mutex_lock(&fft_lock) != 0)
        return cuda_fail_at(c->err, sizeof c->err, "pthread_mutex_lock", __FILE__, __LINE__,
                            "failed");
    cufftHandle p = 0;
    int rc = fft_plan_locked(c, B, S, H, &p);
    pthread_mutex_unlock(&fft_lock);
    if (rc < 0)
        return -1;
    // x contiguous: itself, else a copy into scratch; z: the half spectrum
    size_t xbytes = tensor_is_contiguous(x) ? 0 : (size_t)tensor_numel(x) * sizeof(float);
    void *scratch = cuda_scratch_get(c, xbytes + (size_t)(B * S * W) * sizeof(cufftComplex));
    if (!scratch)
        return -1;
    float *xs = (float *)tensor_data(x);
    if (xbytes) {
        tensor *xc = cuda_tensor_wrap(c, DT_F32, x->ndim, x->shape, NULL, scratch);
        rc = xc ? cuda_copy(c, x, xc) : -1;
        cuda_tensor_free(c, xc);
        xs = (float *)scratch;
    }
    cufftComplex *z = (cufftComplex *)((char *)scratch + xbytes);
    if (rc == 0) {
        cufftResult r = cufftExecR2C(p, xs, z);
        rc = r == CUFFT_SUCCESS ? 0
                                : cuda_fail_at(c->err, sizeof c->err, "cufftExecR2C", __FILE__,
                                               __LINE__, cufft_reason(r));
        c->kernels += rc == 0;
    }
    if (rc == 0)
        rc = pw_launch(c, tensor_numel(out), fft_real_f{z, (float *)tensor_data(out), S, H, W},
                       "fft_real<<<>>>");
    cuda_scratch_put(c, scratch);
    return rc;
}
