// The optimizers' in-place updates, running statistics and the grad
// scaler's kernels (cuda_rt.h), the GPU side of cpu_update.c with its
// formulas: PyTorch's SGD and AdamW, one grid-stride pass over the
// parameter, its gradient and its state; found_inf over the unscaled
// gradients; the scale's update.
//
// The grad scaler's scale, found_inf and step count stay on the device:
// each update kernel reads them itself (a set found_inf returns at once; t
// is the step count + 1), so a step needs no synchronization, as PyTorch's
// fused optimizers take found_inf as a device tensor.
#include "cuda_grad.cuh"

// A grid-stride update's grid: PW_BLOCK threads, at most 32 blocks a
// multiprocessor.
static unsigned update_grid(const cuda_ctx *c, int64_t n) {
    int64_t blocks = (n + PW_BLOCK - 1) / PW_BLOCK, cap = (int64_t)c->sm_count * 32;
    if (cap < 1)
        cap = 1;
    return (unsigned)(blocks < 1 ? 1 : blocks < cap ? blocks : cap);
}

// The grad scaler's three scalars (graph_scaler_src), or NULLs.
struct scaler_ptrs {
    const float *scale, *found, *step;
};

static int scaler_of(cuda_ctx *c, const char *what, const tensor *const *s, scaler_ptrs *p) {
    memset(p, 0, sizeof *p);
    if (!s)
        return 0;
    for (int i = 0; i < 3; i++)
        if (s[i]->dtype != DT_F32 || tensor_numel(s[i]) != 1) {
            snprintf(c->err, sizeof c->err,
                     "%s: the grad scaler's scale, found_inf and step must be f32 scalars", what);
            return -1;
        }
    p->scale = (const float *)tensor_data(s[0]);
    p->found = (const float *)tensor_data(s[1]);
    p->step = (const float *)tensor_data(s[2]);
    return 0;
}

// The update's view of the grad scaler, as cpu_update.c's scaler_skip:
// false to skip the step; else the gradient's factor (1/scale rounded to
// f32 from double, as PyTorch's unscale_) and t (the step count + 1).
__device__ __forceinline__ bool scaler_go(const scaler_ptrs &s, float *inv, uint64_t *t) {
    if (!s.scale)
        return true;
    if (*s.found != 0)
        return false;
    *inv = (float)(1.0 / (double)*s.scale);
    *t = (uint64_t)*s.step + 1;
    return true;
}

// ---- FOUND_INF ----------------------------------------------------------------------------

#define FI_MAX 7 // tensors a found_inf node checks (GRAPH_MAX_SRCS - 1)

struct fi_args {
    int n;
    const void *p[FI_MAX];
    int64_t count[FI_MAX];
    int f16[FI_MAX];
};

// Per block: whether any element times 1/scale is inf or NaN (a NaN fails
// the compare), or the earlier flag of the chain was set already.
__global__ void __launch_bounds__(256)
    found_inf_k(fi_args a, const float *scale, const float *flag, int *part) {
    int any = flag && *flag != 0;
    if (!any) {
        float inv = (float)(1.0 / (double)*scale);
        int64_t step = (int64_t)gridDim.x * blockDim.x;
        for (int t = 0; t < a.n && !any; t++)
            for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < a.count[t];
                 i += step)
                any |= !(fabsf(ldv(a.p[t], a.f16[t], i) * inv) <= 3.40282347e+38f);
    }
    any = __syncthreads_or(any);
    if (threadIdx.x == 0)
        part[blockIdx.x] = any;
}

__global__ void __launch_bounds__(1024) found_inf_fin_k(const int *part, int nb, float *out) {
    int any = 0;
    for (int i = threadIdx.x; i < nb; i += blockDim.x)
        any |= part[i];
    any = __syncthreads_or(any);
    if (threadIdx.x == 0)
        *out = any ? 1.0f : 0.0f;
}

int cuda_found_inf(cuda_ctx *c, const graph_node *n, const tensor *const *in, tensor *out) {
    if (grad_need_target(c, "found_inf", out) < 0)
        return -1;
    int first = n->ia[0] ? 2 : 1;
    if (in[0]->dtype != DT_F32 || (n->ia[0] && in[1]->dtype != DT_F32) ||
        n->nsrc - first > FI_MAX) {
        snprintf(c->err, sizeof c->err,
                 "found_inf: needs an f32 scale (and flag) and at most %d tensors", FI_MAX);
        return -1;
    }
    fi_args a;
    memset(&a, 0, sizeof a);
    tensor *own[FI_MAX] = {0};
    int64_t most = 0;
    int rc = 0;
    for (int k = first; k < n->nsrc && rc == 0; k++) {
        if (grad_need_float(c, "found_inf", in[k]) < 0 || !(own[a.n] = cuda_contiguous(c, in[k]))) {
            rc = -1;
            break;
        }
        a.p[a.n] = tensor_data(own[a.n]);
        a.count[a.n] = tensor_numel(in[k]);
        a.f16[a.n] = in[k]->dtype == DT_F16;
        most = a.count[a.n] > most ? a.count[a.n] : most;
        a.n++;
    }
    int64_t blocks = (most + 4 * 256 - 1) / (4 * 256), cap = 4 * (int64_t)c->sm_count;
    blocks = blocks < cap ? blocks : cap;
    blocks = blocks < 1 ? 1 : blocks > 1024 ? 1024 : blocks;
    int *part = rc == 0 ? (int *)cuda_scratch_get(c, (size_t)blocks * sizeof(int)) : NULL;
    if (part) {
        const float *flag = n->ia[0] ? (const float *)tensor_data(in[1]) : NULL;
        found_inf_k<<<(unsigned)blocks, 256, 0, c->stream>>>(a, (const float *)tensor_data(in[0]),
                                                             flag, part);
        rc = CUDA_LAUNCHED(c, "found_inf<<<>>>");
        if (rc == 0) {
            found_inf_fin_k<<<1, 1024, 0, c->stream>>>(part, (int)blocks,
                                                       (float *)tensor_data(out));
            rc = CUDA_LAUNCHED(c, "found_inf_fin<<<>>>");
        }
        cuda_scratch_put(c, part);
    } else {
        rc = -1;
    }
    for (int k = 0; k < a.n; k++)
        cuda_tensor_free(c, own[k]);
    return rc;
}

// ---- SCALER_UPDATE --------------------------------------------------------------------------

// PyTorch's _amp_update_scale_: back off on inf / NaN, grow after
// `interval` good steps in a row (unless the grown scale overflows f32)
__global__ void scaler_update_k(float *ps, float *pt, float *pn, const float *found, double growth,
                                double backoff, float interval) {
    if (*found != 0) { // back off; the optimizer did not step
        *ps = (float)(*ps * backoff);
        *pt = 0;
    } else {
        *pn += 1;
        if (*pt + 1 >= interval) {
            float grown = (float)(*ps * growth);
            if (isfinite(grown))
                *ps = grown;
            *pt = 0;
        } else {
            *pt += 1;
        }
    }
}

int cuda_scaler_update(cuda_ctx *c, const graph_node *n, tensor *scale, tensor *tracker,
                       tensor *step, const tensor *found) {
    if (grad_need_target(c, "scaler_update", scale) < 0 ||
        grad_need_target(c, "scaler_update", tracker) < 0 ||
        grad_need_target(c, "scaler_update", step) < 0)
        return -1;
    if (found->dtype != DT_F32) {
        snprintf(c->err, sizeof c->err, "scaler_update: found_inf must be f32, got %s",
                 dtype_name(found->dtype));
        return -1;
    }
    scaler_update_k<<<1, 1, 0, c->stream>>>(
        (float *)tensor_data(scale), (float *)tensor_data(tracker), (float *)tensor_data(step),
        (const float *)tensor_data(found), n->fa[0], n->fa[1], (float)n->ia[0]);
    return CUDA_LAUNCHED(c, "scaler_update<<<>>>");
}

// ---- SGD ------------------------------------------------------------------------------------

// A gradient or statistic: f32 as its parameter or buffer (graph.c), any strides.
static int need_f32(cuda_ctx *c, const char *what, const tensor *t, const tensor *like) {
    if (t->dtype != DT_F32 || tensor_numel(t) != tensor_numel(like)) {
        snprintf(c->err, sizeof c->err,
                 "%s: the %s gradient or state does not match the %lld f32 "
                 "values it updates",
                 what, dtype_name(t->dtype), (long long)tensor_numel(like));
        return -1;
    }
    return 0;
}

struct sgd_args {
    float lr, mom, wd, damp;
    int nesterov;
    uint64_t t; // the run's step (without the scaler)
};

// PyTorch's SGD: d = g + wd p; with momentum buf = d on the first step,
// momentum buf + (1 - dampening) d after, d = nesterov ? d + momentum buf :
// buf; p -= lr d
__global__ void __launch_bounds__(PW_BLOCK)
    sgd_k(float *p, float *buf, const float *g, int64_t n, sgd_args a, scaler_ptrs sc) {
    float inv = 1.0f;
    uint64_t t = a.t;
    if (!scaler_go(sc, &inv, &t))
        return;
    bool first = t == 1;
    float keep = first ? 0.0f : a.mom, take = first ? 1.0f : a.damp;
    float nest = a.nesterov ? a.mom : 0.0f, lr = a.lr, wd = a.wd;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        float pv = p[i], d = g[i] * inv + wd * pv;
        if (a.mom == 0) {
            p[i] = pv - lr * d;
            continue;
        }
        float bv = keep * buf[i] + take * d;
        buf[i] = bv;
        p[i] = pv - lr * (a.nesterov ? d + nest * bv : bv);
    }
}

int cuda_sgd(cuda_ctx *c, const graph_node *n, tensor *p, const tensor *g, tensor *buf,
             const tensor *const *scaler) {
    sgd_args a = {(float)n->fa[0],        (float)n->fa[1], (float)n->fa[2],
                  1.0f - (float)n->fa[3], n->ia[0] != 0,   c->step ? c->step : 1};
    scaler_ptrs sc;
    if (grad_need_target(c, "sgd", p) < 0 || grad_need_target(c, "sgd", buf) < 0 ||
        need_f32(c, "sgd", g, p) < 0 || (buf && need_f32(c, "sgd", buf, p) < 0) ||
        scaler_of(c, "sgd", scaler, &sc) < 0)
        return -1;
    if (a.mom != 0 && !buf) {
        snprintf(c->err, sizeof c->err, "sgd: momentum %g needs a momentum buffer (a third input)",
                 (double)a.mom);
        return -1;
    }
    tensor *gc = cuda_contiguous(c, g);
    if (!gc)
        return -1;
    int64_t count = tensor_numel(p);
    float *pp = (float *)tensor_data(p), *pb = buf ? (float *)tensor_data(buf) : NULL;
    sgd_k<<<update_grid(c, count), PW_BLOCK, 0, c->stream>>>(pp, pb, (const float *)tensor_data(gc),
                                                             count, a, sc);
    int rc = CUDA_LAUNCHED(c, "sgd<<<>>>");
    cuda_tensor_free(c, gc);
    return rc;
}

// ---- ADAMW ---------------------------------------------------------------------------------

struct adamw_args {
    double lr, b1, b2, wd;
    float eps;
    uint64_t t; // the run's step (without the scaler)
};

// PyTorch's AdamW at step t: p *= 1 - lr wd; m, v move toward g, g^2;
// p -= lr / (1 - b1^t) m / (sqrt(v) / sqrt(1 - b2^t) + eps). The factors
// are cpu_adamw's: double, rounded to f32 once.
__global__ void __launch_bounds__(PW_BLOCK)
    adamw_k(float *p, float *m, float *v, const float *g, int64_t n, adamw_args a, scaler_ptrs sc) {
    float inv = 1.0f;
    uint64_t t = a.t;
    if (!scaler_go(sc, &inv, &t))
        return;
    double tt = (double)t;
    float decay = (float)(1 - a.lr * a.wd), eps = a.eps;
    float step = (float)(a.lr / (1 - pow(a.b1, tt)));
    float inv_bc2 = (float)(1 / sqrt(1 - pow(a.b2, tt)));
    float b1 = (float)a.b1, b2 = (float)a.b2, ob1 = (float)(1 - a.b1), ob2 = (float)(1 - a.b2);
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        float gi = g[i] * inv;
        float mi = b1 * m[i] + ob1 * gi, vi = b2 * v[i] + ob2 * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = p[i] * decay - step * mi / (sqrtf(vi) * inv_bc2 + eps);
    }
}

int cuda_adamw(cuda_ctx *c, const graph_node *n, tensor *p, const tensor *g, tensor *m, tensor *v,
               const tensor *const *scaler) {
    scaler_ptrs sc;
    if (grad_need_target(c, "adamw", p) < 0 || grad_need_target(c, "adamw", m) < 0 ||
        grad_need_target(c, "adamw", v) < 0 || need_f32(c, "adamw", g, p) < 0 ||
        need_f32(c, "adamw", m, p) < 0 || need_f32(c, "adamw", v, p) < 0 ||
        scaler_of(c, "adamw", scaler, &sc) < 0)
        return -1;
    adamw_args a = {n->fa[0], n->fa[1], n->fa[2], n->fa[4], (float)n->fa[3], c->step ? c->step : 1};
    tensor *gc = cuda_contiguous(c, g);
    if (!gc)
        return -1;
    int64_t count = tensor_numel(p);
    float *pp = (float *)tensor_data(p), *pm = (float *)tensor_data(m);
    float *pv = (float *)tensor_data(v);
    adamw_k<<<update_grid(c, count), PW_BLOCK, 0, c->stream>>>(
        pp, pm, pv, (const float *)tensor_data(gc), count, a, sc);
    int rc = CUDA_LAUNCHED(c, "adamw<<<>>>");
    cuda_tensor_free(c, gc);
    return rc;
}

// ---- RUNNING_STAT ---------------------------------------------------------------------------

// buf = (1 - momentum) buf + momentum * factor * stat
struct running_stat_f {
    float *buf;
    const float *stat;
    float keep, take;
    __device__ void operator()(int64_t i) const { buf[i] = keep * buf[i] + take * stat[i]; }
};

int cuda_running_stat(cuda_ctx *c, const graph_node *n, tensor *buf, const tensor *stat) {
    if (grad_need_target(c, "running_stat", buf) < 0 || need_f32(c, "running_stat", stat, buf) < 0)
        return -1;
    tensor *sc = cuda_contiguous(c, stat);
    if (!sc)
        return -1;
    float keep = (float)(1 - n->fa[0]), take = (float)(n->fa[0] * n->fa[1]);
    running_stat_f f = {(float *)tensor_data(buf), (const float *)tensor_data(sc), keep, take};
    int rc = pw_launch(c, tensor_numel(buf), f, "running_stat<<<>>>");
    cuda_tensor_free(c, sc);
    return rc;
}
