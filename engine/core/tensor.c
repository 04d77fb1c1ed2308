#include "tensor.h"

#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define CACHE_POISON(p, n)   ASAN_POISON_MEMORY_REGION(p, n)
#define CACHE_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define CACHE_POISON(p, n)   ((void)(p), (void)(n))
#define CACHE_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

// ---- the caching allocator (tensor.h) ---------------------------------------
// Size classes: multiples of 64 bytes up to 1 KiB (16 classes), then four a
// doubling (2^k * 1.25, 1.5, 1.75, 2), so a block is at most 25% larger
// than asked. A freed block goes on its class's list (the list's link lives
// in the block itself) and the next request of that class takes it back.
#define CACHE_SMALL_MAX 1024
#define CACHE_CLASSES   (16 + 4 * 54)

static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
static size_t mem_live, mem_peak;
static void *cache_head[CACHE_CLASSES];
static tensor_cache_stats cache_st;
static int cache_on = -1; // -1: not yet read from the environment

static size_t mem_limit; // 0: no cap
static int64_t mem_refusals;

size_t tensor_mem_live(void) { return mem_live; }
size_t tensor_mem_peak(void) { return mem_peak; }
void tensor_mem_reset_peak(void) { mem_peak = mem_live; }

size_t tensor_mem_round(size_t bytes) { return bytes ? (bytes + 63) & ~(size_t)63 : 64; }

void tensor_mem_set_limit(size_t bytes) {
    pthread_mutex_lock(&mem_lock);
    mem_limit = bytes;
    mem_refusals = 0;
    pthread_mutex_unlock(&mem_lock);
}
size_t tensor_mem_limit(void) { return mem_limit; }
int64_t tensor_mem_refusals(void) { return mem_refusals; }

static bool admit_locked(size_t held, size_t bytes) {
    if (!mem_limit || (held <= mem_limit && bytes <= mem_limit - held))
        return true;
    mem_refusals++;
    return false;
}

// "64.0 MiB": one figure, in the largest unit it reaches
static void bytes_text(char *buf, size_t cap, size_t b) {
    static const char *unit[] = {"KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int u = -1;
    while (v >= 1024 && u < 3)
        v /= 1024, u++;
    if (u < 0)
        snprintf(buf, cap, "%zu bytes", b);
    else
        snprintf(buf, cap, v < 10 ? "%.2f %s" : "%.1f %s", v, unit[u]);
}

void tensor_mem_refusal(char *buf, size_t cap, size_t bytes, size_t held) {
    char need[32], have[32], lim[32];
    bytes_text(need, sizeof need, bytes);
    bytes_text(have, sizeof have, held);
    bytes_text(lim, sizeof lim, mem_limit);
    snprintf(buf, cap, "needs %s with %s of %s live", need, have, lim);
}

bool tensor_mem_admit(size_t held, size_t bytes) {
    pthread_mutex_lock(&mem_lock);
    bool ok = admit_locked(held, bytes);
    pthread_mutex_unlock(&mem_lock);
    return ok;
}

// The class of a request of `bytes` (a multiple of 64, at least 64): its
// index and the block size it is served with.
static int cache_class(size_t bytes, size_t *size) {
    if (bytes <= CACHE_SMALL_MAX) {
        *size = bytes;
        return (int)(bytes / 64) - 1;
    }
    int k = 63 - __builtin_clzll((unsigned long long)(bytes - 1)); // 2^k < bytes <= 2^(k+1)
    size_t base = (size_t)1 << k, step = base / 4;
    size_t m = (bytes - base + step - 1) / step; // 1..4
    *size = base + m * step;
    return 16 + (k - 10) * 4 + (int)(m - 1);
}

static bool cache_enabled(void) {
    if (cache_on < 0) {
        const char *e = getenv("TCBENCH_DISABLE_ALLOC_CACHE");
        cache_on = !(e && *e && strcmp(e, "0") != 0);
    }
    return cache_on;
}

static void cache_release_locked(void);

static void *cache_take(size_t bytes) {
    size_t size;
    int c = cache_class(bytes, &size);
    if (!cache_enabled() || c >= CACHE_CLASSES)
        return aligned_alloc(64, bytes);
    void *p = cache_head[c];
    if (p) {
        // the request's bytes only: the class's tail stays poisoned, so an
        // overflow past the request is still reported under ASan
        CACHE_UNPOISON(p, bytes);
        cache_head[c] = *(void **)p;
        cache_st.cached_bytes -= size;
        cache_st.hits++;
        return p;
    }
    cache_st.misses++;
    p = aligned_alloc(64, size);
    if (!p && cache_st.cached_bytes > 0) {
        // out of memory with blocks held: give them back and try once more
        cache_release_locked();
        p = aligned_alloc(64, size);
    }
    if (p)
        CACHE_POISON((char *)p + bytes, size - bytes);
    return p;
}

static void cache_give(void *p, size_t bytes) {
    size_t size;
    int c = cache_class(bytes, &size);
    if (!cache_enabled() || c >= CACHE_CLASSES) {
        free(p);
        return;
    }
    *(void **)p = cache_head[c];
    cache_head[c] = p;
    // all but the link to the next block: LeakSanitizer reads no pointer
    // in poisoned memory, and a chain of two cached blocks or more at exit
    // was reported as leaked (test_conv_grad's pool cases). A write after
    // free into a block's first 8 bytes is the one ASan no longer reports.
    CACHE_POISON((char *)p + sizeof(void *), size - sizeof(void *));
    cache_st.cached_bytes += size;
    if (cache_st.cached_bytes > cache_st.cached_peak)
        cache_st.cached_peak = cache_st.cached_bytes;
}

// The block size of class c (the inverse of cache_class).
static size_t cache_class_size(int c) {
    if (c < 16)
        return (size_t)(c + 1) * 64;
    int k = 10 + (c - 16) / 4, m = (c - 16) % 4 + 1;
    return ((size_t)1 << k) + (size_t)m * ((size_t)1 << (k - 2));
}

static void cache_release_locked(void) {
    for (int c = 0; c < CACHE_CLASSES; c++) {
        while (cache_head[c]) {
            void *p = cache_head[c];
            CACHE_UNPOISON(p, cache_class_size(c));
            cache_head[c] = *(void **)p;
            free(p);
        }
    }
    cache_st.cached_bytes = 0;
}

void tensor_cache_release(void) {
    pthread_mutex_lock(&mem_lock);
    cache_release_locked();
    pthread_mutex_unlock(&mem_lock);
}

tensor_cache_stats tensor_cache_get_stats(void) {
    pthread_mutex_lock(&mem_lock);
    tensor_cache_stats st = cache_st;
    pthread_mutex_unlock(&mem_lock);
    st.enabled = cache_enabled();
    return st;
}

int64_t shape_numel(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    return n;
}

void tensor_strides_contiguous(int ndim, const int64_t *shape, int64_t *stride) {
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        stride[i] = s;
        s *= shape[i];
    }
}

static tensor_storage *storage_new(size_t bytes, bool zero) {
    tensor_storage *s = malloc(sizeof *s);
    if (!s)
        return NULL;
    size_t padded = tensor_mem_round(bytes);
    pthread_mutex_lock(&mem_lock);
    s->data = admit_locked(mem_live, padded) ? cache_take(padded) : NULL;
    if (s->data) {
        mem_live += padded;
        if (mem_live > mem_peak)
            mem_peak = mem_live;
    }
    pthread_mutex_unlock(&mem_lock);
    if (!s->data) {
        free(s);
        return NULL;
    }
    if (zero)
        memset(s->data, 0, padded);
    s->bytes = padded;
    s->refs = 1;
    s->borrowed = false;
    return s;
}

static tensor *tensor_alloc(enum dtype t, int ndim, const int64_t *shape, bool zero) {
    assert(ndim >= 0 && ndim <= TENSOR_MAX_DIMS);
    tensor *x = calloc(1, sizeof *x);
    if (!x)
        return NULL;
    x->dtype = t;
    x->ndim = ndim;
    for (int i = 0; i < ndim; i++)
        x->shape[i] = shape[i];
    tensor_strides_contiguous(ndim, shape, x->stride);
    x->storage = storage_new((size_t)shape_numel(ndim, shape) * dtype_size(t), zero);
    if (!x->storage) {
        free(x);
        return NULL;
    }
    return x;
}

tensor *tensor_new(enum dtype t, int ndim, const int64_t *shape) {
    return tensor_alloc(t, ndim, shape, true);
}

tensor *tensor_new_empty(enum dtype t, int ndim, const int64_t *shape) {
    return tensor_alloc(t, ndim, shape, false);
}

void tensor_free(tensor *t) {
    if (!t)
        return;
    if (--t->storage->refs == 0) {
        if (!t->storage->borrowed) {
            pthread_mutex_lock(&mem_lock);
            mem_live -= t->storage->bytes;
            cache_give(t->storage->data, t->storage->bytes);
            pthread_mutex_unlock(&mem_lock);
        }
        free(t->storage);
    }
    free(t);
}

tensor *tensor_wrap(enum dtype t, int ndim, const int64_t *shape, void *data) {
    tensor *x = calloc(1, sizeof *x);
    tensor_storage *s = calloc(1, sizeof *s);
    if (!x || !s) {
        free(x);
        free(s);
        return NULL;
    }
    s->data = data;
    s->bytes = (size_t)shape_numel(ndim, shape) * dtype_size(t);
    s->refs = 1;
    s->borrowed = true;
    x->dtype = t;
    x->ndim = ndim;
    for (int i = 0; i < ndim; i++)
        x->shape[i] = shape[i];
    tensor_strides_contiguous(ndim, shape, x->stride);
    x->storage = s;
    return x;
}

int64_t tensor_numel(const tensor *t) { return shape_numel(t->ndim, t->shape); }
size_t tensor_nbytes(const tensor *t) { return (size_t)tensor_numel(t) * dtype_size(t->dtype); }

bool tensor_strides_are_contiguous(int ndim, const int64_t *shape, const int64_t *stride) {
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        if (shape[i] != 1 && stride[i] != s)
            return false;
        s *= shape[i];
    }
    return true;
}

bool tensor_is_contiguous(const tensor *t) {
    return tensor_strides_are_contiguous(t->ndim, t->shape, t->stride);
}

void *tensor_data(const tensor *t) {
    return (char *)t->storage->data + t->offset * (int64_t)dtype_size(t->dtype);
}

tensor *tensor_view(const tensor *t) {
    tensor *v = malloc(sizeof *v);
    if (!v)
        return NULL;
    *v = *t;
    v->storage->refs++;
    return v;
}

tensor *tensor_permute(const tensor *t, const int *perm) {
    tensor *v = tensor_view(t);
    if (!v)
        return NULL;
    for (int i = 0; i < t->ndim; i++) {
        v->shape[i] = t->shape[perm[i]];
        v->stride[i] = t->stride[perm[i]];
    }
    return v;
}

// Same rule as PyTorch's view(): group the old dims into runs that are
// contiguous among themselves and split each run into new dims.
bool tensor_strides_reshape(int ondim, const int64_t *oshape, const int64_t *ostride, int ndim,
                            const int64_t *shape, int64_t *nstride) {
    if (shape_numel(ndim, shape) != shape_numel(ondim, oshape))
        return false;
    int oi = 0, ni = 0;
    while (ni < ndim || oi < ondim) {
        if (ni < ndim && shape[ni] == 1) { // size-1 dims take any stride
            nstride[ni] = 1;
            ni++;
            continue;
        }
        if (oi < ondim && oshape[oi] == 1) {
            oi++;
            continue;
        }
        if (ni >= ndim || oi >= ondim)
            break;
        // old dims [oi, oj) and new dims [ni, nj) with equal products
        int64_t op = oshape[oi], np = shape[ni];
        int oj = oi + 1, nj = ni + 1;
        while (op != np) {
            if (op < np)
                op *= oshape[oj++];
            else
                np *= shape[nj++];
        }
        // the old run must be contiguous within itself (size-1 dims skipped)
        int64_t expect = ostride[oj - 1] * oshape[oj - 1];
        for (int k = oj - 2; k >= oi; k--) {
            if (oshape[k] == 1)
                continue;
            if (ostride[k] != expect)
                return false;
            expect = ostride[k] * oshape[k];
        }
        int64_t st = ostride[oj - 1];
        for (int k = nj - 1; k >= ni; k--) {
            nstride[k] = st;
            st *= shape[k];
        }
        oi = oj;
        ni = nj;
    }
    return true;
}

tensor *tensor_reshape(const tensor *t, int ndim, const int64_t *shape) {
    assert(shape_numel(ndim, shape) == tensor_numel(t));
    int64_t nstride[TENSOR_MAX_DIMS];
    if (!tensor_strides_reshape(t->ndim, t->shape, t->stride, ndim, shape, nstride))
        return NULL;
    tensor *v = tensor_view(t);
    if (!v)
        return NULL;
    v->ndim = ndim;
    for (int i = 0; i < ndim; i++) {
        v->shape[i] = shape[i];
        v->stride[i] = nstride[i];
    }
    return v;
}

tensor *tensor_slice(const tensor *t, int axis, int64_t start, int64_t len) {
    assert(axis >= 0 && axis < t->ndim && start >= 0 && start + len <= t->shape[axis]);
    tensor *v = tensor_view(t);
    if (!v)
        return NULL;
    v->offset += start * t->stride[axis];
    v->shape[axis] = len;
    return v;
}

tensor *tensor_expand(const tensor *t, int ndim, const int64_t *shape) {
    assert(ndim >= t->ndim);
    tensor *v = tensor_view(t);
    if (!v)
        return NULL;
    int pad = ndim - t->ndim;
    v->ndim = ndim;
    for (int i = ndim - 1; i >= 0; i--) {
        int src = i - pad;
        int64_t s = src >= 0 ? t->shape[src] : 1;
        int64_t st = src >= 0 ? t->stride[src] : 0;
        assert(s == shape[i] || s == 1);
        v->shape[i] = shape[i];
        v->stride[i] = (s == shape[i]) ? st : 0;
    }
    return v;
}

static int64_t offset_of(const tensor *t, const int64_t *idx) {
    int64_t o = t->offset;
    for (int i = 0; i < t->ndim; i++)
        o += idx[i] * t->stride[i];
    return o;
}

static double load(enum dtype dt, const void *base, int64_t o) {
    switch (dt) {
    case DT_F32: return ((const float *)base)[o];
    case DT_F16: return dtype_f16_to_f32(((const uint16_t *)base)[o]);
    case DT_BF16: return dtype_bf16_to_f32(((const uint16_t *)base)[o]);
    case DT_I32: return ((const int32_t *)base)[o];
    case DT_I64: return (double)((const int64_t *)base)[o];
    case DT_BOOL: return ((const uint8_t *)base)[o];
    case DT_I8: return ((const int8_t *)base)[o];
    case DT_U8: return ((const uint8_t *)base)[o];
    default: abort();
    }
}

double tensor_get(const tensor *t, const int64_t *idx) {
    return load(t->dtype, t->storage->data, offset_of(t, idx));
}

void tensor_set(tensor *t, const int64_t *idx, double v) {
    int64_t o = offset_of(t, idx);
    void *b = t->storage->data;
    switch (t->dtype) {
    case DT_F32: ((float *)b)[o] = (float)v; break;
    case DT_F16: ((uint16_t *)b)[o] = dtype_f32_to_f16((float)v); break;
    case DT_BF16: ((uint16_t *)b)[o] = dtype_f32_to_bf16((float)v); break;
    case DT_I32: ((int32_t *)b)[o] = (int32_t)v; break;
    case DT_I64: ((int64_t *)b)[o] = (int64_t)v; break;
    case DT_BOOL: ((uint8_t *)b)[o] = v != 0; break;
    case DT_I8: ((int8_t *)b)[o] = (int8_t)v; break;
    case DT_U8: ((uint8_t *)b)[o] = (uint8_t)v; break;
    default: abort();
    }
}

double tensor_get_flat(const tensor *t, int64_t i) {
    int64_t idx[TENSOR_MAX_DIMS];
    for (int d = t->ndim - 1; d >= 0; d--) {
        idx[d] = i % t->shape[d];
        i /= t->shape[d];
    }
    return tensor_get(t, idx);
}

tensor *tensor_contiguous(const tensor *t) {
    tensor *c = tensor_new_empty(t->dtype, t->ndim, t->shape);
    if (!c)
        return NULL;
    int64_t n = tensor_numel(t);
    size_t es = dtype_size(t->dtype);
    if (tensor_is_contiguous(t)) {
        memcpy(tensor_data(c), tensor_data(t), (size_t)n * es);
        return c;
    }
    int64_t idx[TENSOR_MAX_DIMS] = {0};
    char *dst = tensor_data(c);
    const char *src = t->storage->data;
    for (int64_t i = 0; i < n; i++) {
        memcpy(dst + i * (int64_t)es, src + offset_of(t, idx) * (int64_t)es, es);
        for (int d = t->ndim - 1; d >= 0; d--) {
            if (++idx[d] < t->shape[d])
                break;
            idx[d] = 0;
        }
    }
    return c;
}
