// The CUDA runtime side of the backend (cuda_rt.h, cuda_device.h): errors,
// the usable-GPU probe, contexts, device tensors, events and the L2 flush.
#include "cuda_rt.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define CUDA_BLAS_WORKSPACE ((size_t)32 << 20) // cuBLAS's recommendation for Hopper

bool cuda_built(void) { return true; }

int cuda_fail_at(char *err, size_t cap, const char *call, const char *file, int line,
                 const char *reason) {
    const char *base = strrchr(file, '/');
    snprintf(err, cap, "%s failed at %s:%d: %s", call, base ? base + 1 : file, line,
             reason ? reason : "unknown error");
    return -1;
}

const char *cuda_cublas_reason(cublasStatus_t s) {
    const char *r = cublasGetStatusString(s);
    return r ? r : "unknown cuBLAS status";
}

static int fail(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
    return -1;
}

// ---- device selection and the probe ---------------------------------------

int cuda_device_index(void) {
    const char *s = getenv("TCBENCH_CUDA_DEVICE");
    if (!s || !*s)
        return 0;
    char *end;
    long v = strtol(s, &end, 10);
    return (*end || v < 0 || v > 1024) ? -1 : (int)v;
}

int cuda_probe_here(char *reason, size_t cap) {
    int dev = cuda_device_index();
    if (dev < 0)
        return fail(reason, cap, "TCBENCH_CUDA_DEVICE='%s' is not a device number",
                    getenv("TCBENCH_CUDA_DEVICE"));
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess)
        return fail(reason, cap, "no usable CUDA GPU: cudaGetDeviceCount: %s",
                    cudaGetErrorString(e));
    if (n == 0)
        return fail(reason, cap, "no usable CUDA GPU: the driver reports no devices");
    if (dev >= n)
        return fail(reason, cap, "TCBENCH_CUDA_DEVICE=%d, but only %d CUDA device%s found", dev, n,
                    n == 1 ? " is" : "s are");
    struct cudaDeviceProp p;
    if ((e = cudaGetDeviceProperties(&p, dev)) != cudaSuccess)
        return fail(reason, cap, "no usable CUDA GPU: cudaGetDeviceProperties: %s",
                    cudaGetErrorString(e));
    if (p.major < 8)
        return fail(reason, cap,
                    "GPU %d (%s) has compute capability %d.%d; tcbench's CUDA kernels need 8.0 "
                    "or newer",
                    dev, p.name, p.major, p.minor);
    if ((e = cudaSetDevice(dev)) != cudaSuccess || (e = cudaFree(NULL)) != cudaSuccess)
        return fail(reason, cap, "GPU %d (%s) is not usable: %s", dev, p.name,
                    cudaGetErrorString(e));
    return 0;
}

int cuda_probe(char *reason, size_t cap) {
    int fd[2];
    if (pipe(fd) < 0)
        return fail(reason, cap, "cannot probe the GPU: pipe: %s", strerror(errno));
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]);
        close(fd[1]);
        return fail(reason, cap, "cannot probe the GPU: fork: %s", strerror(errno));
    }
    if (pid == 0) {
        close(fd[0]);
        char why[512] = "";
        char rc = cuda_probe_here(why, sizeof why) == 0 ? 0 : 1;
        ssize_t w = write(fd[1], &rc, 1);
        if (w == 1 && rc)
            w = write(fd[1], why, strlen(why));
        _exit(w < 0);
    }
    close(fd[1]);
    char buf[512];
    size_t got = 0;
    ssize_t r;
    while (got < sizeof buf - 1 && (r = read(fd[0], buf + got, sizeof buf - 1 - got)) != 0) {
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            break;
        got += (size_t)r;
    }
    buf[got] = 0;
    close(fd[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (got == 0)
        return fail(reason, cap, "no usable CUDA GPU: the probe process died (%s %d)",
                    WIFSIGNALED(status) ? "signal" : "exit status",
                    WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    if (buf[0] == 0)
        return 0;
    snprintf(reason, cap, "%s", buf + 1);
    return -1;
}

int cuda_device_query(cuda_device_info *info, char *err, size_t cap) {
    memset(info, 0, sizeof *info);
    int dev = cuda_device_index();
    if (dev < 0)
        return fail(err, cap, "TCBENCH_CUDA_DEVICE is not a device number");
    struct cudaDeviceProp p;
    CUDA_TRY(err, cap, cudaGetDeviceProperties(&p, dev));
    info->index = dev;
    snprintf(info->name, sizeof info->name, "%s", p.name);
    info->cc_major = p.major;
    info->cc_minor = p.minor;
    info->sm_count = p.multiProcessorCount;
    info->memory_bytes = p.totalGlobalMem;
    info->l2_bytes = (size_t)p.l2CacheSize;
    CUDA_TRY(err, cap, cudaDriverGetVersion(&info->driver_version));
    CUDA_TRY(err, cap, cudaRuntimeGetVersion(&info->runtime_version));
    return 0;
}

// ---- the allocator's device backend ---------------------------------------

static int dev_alloc(void *ctx, size_t bytes, void **out, char *err, size_t cap) {
    (void)ctx;
    cudaError_t e = cudaMalloc(out, bytes);
    if (e != cudaSuccess) {
        cudaGetLastError(); // an allocation failure is not sticky; clear it
        return fail(err, cap, "cudaMalloc(%zu): %s", bytes, cudaGetErrorString(e));
    }
    return 0;
}

static void dev_free(void *ctx, void *p) {
    (void)ctx;
    cudaFree(p);
}

cuda_alloc_backend cuda_alloc_device_backend(void) {
    return (cuda_alloc_backend){dev_alloc, dev_free, NULL};
}

// ---- contexts ---------------------------------------------------------------

int cuda_ctx_init(cuda_ctx *c, int device, bool allow_tf32) {
    memset(c, 0, sizeof *c);
    c->device = device;
    c->allow_tf32 = allow_tf32;
    const char *lt = getenv("TCBENCH_CUDA_DISABLE_LT");
    c->use_lt = !(lt && *lt && strcmp(lt, "0") != 0);
    CUDA_CTX(c, cudaSetDevice(device));
    CUDA_CTX(c, cudaDeviceGetAttribute(&c->sm_count, cudaDevAttrMultiProcessorCount, device));
    CUDA_CTX(c, cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    CUBLAS_CTX(c, cublasCreate(&c->blas));
    CUBLAS_CTX(c, cublasSetStream(c->blas, c->stream));
    // PyTorch's defaults: no TF32 for f32 unless asked (allow_tf32)
    CUBLAS_CTX(c, cublasSetMathMode(c->blas,
                                    allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    // a fixed workspace: the same in every mode, and capturable in a CUDA graph
    CUDA_CTX(c, cudaMalloc(&c->blas_ws, CUDA_BLAS_WORKSPACE));
    CUBLAS_CTX(c, cublasSetWorkspace(c->blas, c->blas_ws, CUDA_BLAS_WORKSPACE));
    CUBLASLT_CTX(c, cublasLtCreate(&c->lt));
    c->alloc = cuda_alloc_new(cuda_alloc_device_backend(), c->err, sizeof c->err);
    if (!c->alloc)
        return -1;
    CUDA_CTX(c, cudaMalloc((void **)&c->deverr, sizeof *c->deverr));
    CUDA_CTX(c, cudaMemsetAsync(c->deverr, 0, sizeof *c->deverr, c->stream));
    return cuda_dnn_new(c);
}

void cuda_ctx_free(cuda_ctx *c) {
    if (c->stream)
        cudaStreamSynchronize(c->stream);
    cuda_dnn_free(c);
    cuda_blas_free(c);
    if (c->lt)
        cublasLtDestroy(c->lt);
    if (c->blas)
        cublasDestroy(c->blas);
    cuda_alloc_free(c->alloc);
    if (c->ws)
        cudaFree(c->ws);
    if (c->blas_ws)
        cudaFree(c->blas_ws);
    if (c->deverr)
        cudaFree(c->deverr);
    if (c->stream)
        cudaStreamDestroy(c->stream);
    memset(c, 0, sizeof *c);
}

int cuda_launched(cuda_ctx *c, const char *kernel, const char *file, int line) {
    c->kernels++;
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return cuda_fail_at(c->err, sizeof c->err, kernel, file, line, cudaGetErrorString(e));
    return 0;
}

int cuda_ctx_sync(cuda_ctx *c) {
    CUDA_CTX(c, cudaStreamSynchronize(c->stream));
    cuda_dev_error de;
    CUDA_CTX(c, cudaMemcpyAsync(&de, c->deverr, sizeof de, cudaMemcpyDeviceToHost, c->stream));
    CUDA_CTX(c, cudaStreamSynchronize(c->stream));
    if (de.code == CUDA_DEVERR_NONE)
        return 0;
    CUDA_CTX(c, cudaMemsetAsync(c->deverr, 0, sizeof *c->deverr, c->stream));
    if (de.code == CUDA_DEVERR_KV_WRITE)
        return fail(c->err, sizeof c->err,
                    "kv_write: position %lld with %lld rows is outside a cache of %lld", de.value,
                    de.pos, de.limit);
    bool emb = de.code == CUDA_DEVERR_EMBEDDING || de.code == CUDA_DEVERR_EMBEDDING_GRAD;
    bool grad = de.code == CUDA_DEVERR_EMBEDDING_GRAD || de.code == CUDA_DEVERR_TARGET_GRAD;
    return fail(c->err, sizeof c->err, "%s%s: %s %lld %s %lld is outside [0, %lld)",
                emb ? "embedding" : "cross_entropy", grad ? "_grad" : "", emb ? "index" : "target",
                de.value, emb ? "at position" : "in row", de.pos, de.limit);
}

// ---- device tensors ---------------------------------------------------------

// The storage of every device tensor: tensor.h's header (views share and
// count it) and whether its memory is the allocator's.
typedef struct cuda_storage {
    tensor_storage s;
    bool owned;
} cuda_storage;

static tensor *wrap_device(cuda_ctx *c, enum dtype t, int ndim, const int64_t *shape, void *data,
                           size_t bytes, bool owned) {
    tensor *x = calloc(1, sizeof *x);
    cuda_storage *s = calloc(1, sizeof *s);
    if (!x || !s) {
        free(x);
        free(s);
        fail(c->err, sizeof c->err, "out of host memory for a tensor header");
        return NULL;
    }
    s->s.data = data;
    s->s.bytes = bytes;
    s->s.refs = 1;
    s->s.borrowed = true; // a stray tensor_free must never free() a device pointer
    s->owned = owned;
    x->dtype = t;
    x->ndim = ndim;
    for (int i = 0; i < ndim; i++)
        x->shape[i] = shape[i];
    tensor_strides_contiguous(ndim, shape, x->stride);
    x->storage = &s->s;
    return x;
}

tensor *cuda_tensor_wrap(cuda_ctx *c, enum dtype t, int ndim, const int64_t *shape,
                         const int64_t *stride, void *data) {
    tensor *x = wrap_device(c, t, ndim, shape, data, 0, false);
    if (x && stride)
        memcpy(x->stride, stride, (size_t)ndim * sizeof *stride);
    return x;
}

tensor *cuda_tensor_new(cuda_ctx *c, enum dtype t, int ndim, const int64_t *shape) {
    size_t bytes = (size_t)shape_numel(ndim, shape) * dtype_size(t);
    void *p;
    if (cuda_alloc_get(c->alloc, bytes, c->stream, &p, c->err, sizeof c->err) < 0)
        return NULL;
    tensor *x = wrap_device(c, t, ndim, shape, p, cuda_alloc_round(bytes), true);
    if (!x)
        cuda_alloc_put(c->alloc, p);
    return x;
}

void cuda_tensor_free(cuda_ctx *c, tensor *t) {
    if (!t)
        return;
    if (--t->storage->refs == 0) {
        cuda_storage *s = (cuda_storage *)t->storage;
        if (s->owned)
            cuda_alloc_put(c->alloc, s->s.data);
        free(s);
    }
    free(t);
}

void *cuda_workspace(cuda_ctx *c, size_t bytes) {
    if (bytes <= c->ws_bytes)
        return c->ws;
    if (c->ws) { // cudaFree waits for the kernels that still use it
        cudaFree(c->ws);
        c->ws = NULL;
        c->ws_bytes = 0;
    }
    cudaError_t e = cudaMalloc(&c->ws, bytes);
    if (e != cudaSuccess) {
        cudaGetLastError();
        c->ws = NULL;
        cuda_fail_at(c->err, sizeof c->err, "cudaMalloc(workspace)", __FILE__, __LINE__,
                     cudaGetErrorString(e));
        return NULL;
    }
    c->ws_bytes = bytes;
    return c->ws;
}

void *cuda_scratch_get(cuda_ctx *c, size_t bytes) {
    void *p;
    return cuda_alloc_get(c->alloc, bytes, c->stream, &p, c->err, sizeof c->err) < 0 ? NULL : p;
}

void cuda_scratch_put(cuda_ctx *c, void *p) { cuda_alloc_put(c->alloc, p); }

int cuda_tensor_copy_in(cuda_ctx *c, tensor *dev, const tensor *host) {
    tensor *h = tensor_is_contiguous(host) ? tensor_view(host) : tensor_contiguous(host);
    if (!h)
        return fail(c->err, sizeof c->err, "out of host memory staging an upload");
    int rc = 0;
    cudaError_t e = cudaMemcpyAsync(tensor_data(dev), tensor_data(h), tensor_nbytes(h),
                                    cudaMemcpyHostToDevice, c->stream);
    // pageable memory: the copy is staged before cudaMemcpyAsync returns,
    // but a synchronization keeps `h` alive for certain
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(c->stream);
    if (e != cudaSuccess)
        rc = cuda_fail_at(c->err, sizeof c->err, "cudaMemcpyAsync(host to device)", __FILE__,
                          __LINE__, cudaGetErrorString(e));
    tensor_free(h);
    return rc;
}

tensor *cuda_tensor_upload(cuda_ctx *c, const tensor *host) {
    tensor *d = cuda_tensor_new(c, host->dtype, host->ndim, host->shape);
    if (d && cuda_tensor_copy_in(c, d, host) < 0) {
        cuda_tensor_free(c, d);
        return NULL;
    }
    return d;
}

tensor *cuda_tensor_download(cuda_ctx *c, const tensor *dev) {
    tensor *d = cuda_contiguous(c, dev);
    if (!d)
        return NULL;
    tensor *h = tensor_new_empty(dev->dtype, dev->ndim, dev->shape);
    if (!h) {
        cuda_tensor_free(c, d);
        fail(c->err, sizeof c->err, "out of host memory for a %zu-byte output", tensor_nbytes(dev));
        return NULL;
    }
    cudaError_t e = cudaMemcpyAsync(tensor_data(h), tensor_data(d), tensor_nbytes(d),
                                    cudaMemcpyDeviceToHost, c->stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(c->stream);
    cuda_tensor_free(c, d);
    if (e != cudaSuccess) {
        cuda_fail_at(c->err, sizeof c->err, "cudaMemcpyAsync(device to host)", __FILE__, __LINE__,
                     cudaGetErrorString(e));
        tensor_free(h);
        return NULL;
    }
    return h;
}

tensor *cuda_contiguous(cuda_ctx *c, const tensor *x) {
    if (tensor_is_contiguous(x)) {
        tensor *v = tensor_view(x);
        if (!v)
            fail(c->err, sizeof c->err, "out of host memory for a view");
        return v;
    }
    tensor *y = cuda_tensor_new(c, x->dtype, x->ndim, x->shape);
    if (y && cuda_copy(c, x, y) < 0) {
        cuda_tensor_free(c, y);
        return NULL;
    }
    return y;
}

// ---- timing -------------------------------------------------------------------

struct cuda_timer {
    cudaEvent_t start, stop;
};

int cuda_timer_new(cuda_timer **out, char *err, size_t cap) {
    *out = calloc(1, sizeof **out);
    if (!*out)
        return fail(err, cap, "out of host memory for a timer");
    CUDA_TRY(err, cap, cudaEventCreate(&(*out)->start));
    CUDA_TRY(err, cap, cudaEventCreate(&(*out)->stop));
    return 0;
}

int cuda_timer_start(cuda_timer *t, void *stream, char *err, size_t cap) {
    CUDA_TRY(err, cap, cudaEventRecord(t->start, (cudaStream_t)stream));
    return 0;
}

int cuda_timer_stop(cuda_timer *t, void *stream, double *seconds, char *err, size_t cap) {
    float ms = 0;
    CUDA_TRY(err, cap, cudaEventRecord(t->stop, (cudaStream_t)stream));
    CUDA_TRY(err, cap, cudaEventSynchronize(t->stop));
    CUDA_TRY(err, cap, cudaEventElapsedTime(&ms, t->start, t->stop));
    *seconds = ms * 1e-3;
    return 0;
}

void cuda_timer_free(cuda_timer *t) {
    if (!t)
        return;
    if (t->start)
        cudaEventDestroy(t->start);
    if (t->stop)
        cudaEventDestroy(t->stop);
    free(t);
}

static void *l2_buf;
static size_t l2_bytes;

int cuda_l2_flush(void *stream, char *err, size_t cap) {
    if (!l2_buf) {
        int dev, l2 = 0;
        CUDA_TRY(err, cap, cudaGetDevice(&dev));
        CUDA_TRY(err, cap, cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
        l2_bytes = 2 * (size_t)(l2 > 0 ? l2 : 64 << 20);
        CUDA_TRY(err, cap, cudaMalloc(&l2_buf, l2_bytes));
    }
    CUDA_TRY(err, cap, cudaMemsetAsync(l2_buf, 0, l2_bytes, (cudaStream_t)stream));
    return 0;
}

// ---- describing the device for the results ---------------------------------

int cuda_device_describe(cuda_device_info *info, char *err, size_t cap) {
    if (cuda_device_query(info, err, cap) < 0)
        return -1;
    int dev = info->index;
    CUDA_TRY(err, cap, cudaDeviceGetAttribute(&info->clock_khz, cudaDevAttrClockRate, dev));
    CUDA_TRY(err, cap,
             cudaDeviceGetAttribute(&info->memory_clock_khz, cudaDevAttrMemoryClockRate, dev));
    CUDA_TRY(err, cap,
             cudaDeviceGetAttribute(&info->memory_bus_bits, cudaDevAttrGlobalMemoryBusWidth, dev));
    return 0;
}

// The child's answer: a status byte, then the facts or the reason.
typedef struct describe_msg {
    int ok;
    cuda_device_info info;
    char reason[512];
} describe_msg;

int cuda_probe_describe(cuda_device_info *info, char *reason, size_t cap) {
    memset(info, 0, sizeof *info);
    int fd[2];
    if (pipe(fd) < 0)
        return fail(reason, cap, "cannot describe the GPU: pipe: %s", strerror(errno));
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]);
        close(fd[1]);
        return fail(reason, cap, "cannot describe the GPU: fork: %s", strerror(errno));
    }
    if (pid == 0) {
        close(fd[0]);
        describe_msg m;
        memset(&m, 0, sizeof m);
        m.ok = cuda_probe_here(m.reason, sizeof m.reason) == 0 &&
               cuda_device_describe(&m.info, m.reason, sizeof m.reason) == 0;
        const char *p = (const char *)&m;
        size_t left = sizeof m;
        while (left > 0) {
            ssize_t w = write(fd[1], p, left);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                _exit(1);
            p += w;
            left -= (size_t)w;
        }
        _exit(0);
    }
    close(fd[1]);
    describe_msg m;
    size_t got = 0;
    while (got < sizeof m) {
        ssize_t r = read(fd[0], (char *)&m + got, sizeof m - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (got < sizeof m)
        return fail(reason, cap, "no usable CUDA GPU: the describing process died (%s %d)",
                    WIFSIGNALED(status) ? "signal" : "exit status",
                    WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    m.reason[sizeof m.reason - 1] = '\0';
    if (!m.ok)
        return fail(reason, cap, "%s", m.reason);
    *info = m.info;
    return 0;
}
