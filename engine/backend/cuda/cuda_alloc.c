// The caching allocator's bookkeeping (cuda_alloc.h). Pure host logic: the
// device is reached only through the backend's two functions.
#include "cuda_alloc.h"

#include "core/tensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NBINS 64

typedef struct blk {
    uintptr_t ptr;
    size_t size;      // rounded
    size_t requested; // as asked (live blocks)
    const void *stream;
    bool small; // pool
    bool allocated;
    struct blk *prev, *next;   // neighbours in the segment, by address
    struct blk *fprev, *fnext; // free list of its bin
} blk;

struct cuda_alloc {
    cuda_alloc_backend be;
    blk *bins[2][NBINS]; // [small][floor(log2 size)]
    blk **tab;           // live blocks by pointer: open addressing, linear probing
    size_t tabcap, tabn;
    blk **segs; // the first block of every segment
    size_t nsegs, segcap;
    cuda_alloc_stats st;
};

size_t cuda_alloc_round(size_t bytes) {
    if (bytes == 0)
        return CUDA_ALLOC_ROUND;
    return (bytes + CUDA_ALLOC_ROUND - 1) / CUDA_ALLOC_ROUND * CUDA_ALLOC_ROUND;
}

size_t cuda_alloc_segment_size(size_t rounded) {
    if (rounded <= CUDA_ALLOC_SMALL_MAX)
        return CUDA_ALLOC_SMALL_SEG;
    if (rounded < CUDA_ALLOC_LARGE_SEG / 2)
        return CUDA_ALLOC_LARGE_SEG;
    return (rounded + CUDA_ALLOC_LARGE_ROUND - 1) / CUDA_ALLOC_LARGE_ROUND * CUDA_ALLOC_LARGE_ROUND;
}

static int bin_of(size_t size) {
    int b = 0;
    while (b < NBINS - 1 && (size >> (b + 1)) != 0)
        b++;
    return b;
}

// ---- free lists ------------------------------------------------------------

static void bin_insert(cuda_alloc *a, blk *b) {
    blk **head = &a->bins[b->small][bin_of(b->size)];
    b->fprev = NULL;
    b->fnext = *head;
    if (*head)
        (*head)->fprev = b;
    *head = b;
}

static void bin_remove(cuda_alloc *a, blk *b) {
    if (b->fprev)
        b->fprev->fnext = b->fnext;
    else
        a->bins[b->small][bin_of(b->size)] = b->fnext;
    if (b->fnext)
        b->fnext->fprev = b->fprev;
    b->fprev = b->fnext = NULL;
}

// The smallest free block of the pool that holds size for this stream.
static blk *best_fit(cuda_alloc *a, bool small, size_t size, const void *stream) {
    for (int i = bin_of(size); i < NBINS; i++) {
        blk *best = NULL;
        for (blk *b = a->bins[small][i]; b; b = b->fnext)
            if (b->stream == stream && b->size >= size && (!best || b->size < best->size))
                best = b;
        if (best) // every block of a higher bin is larger
            return best;
    }
    return NULL;
}

// ---- live blocks by pointer ------------------------------------------------

static size_t slot_of(const cuda_alloc *a, uintptr_t p) {
    return (size_t)(((uint64_t)p >> 9) * 0x9e3779b97f4a7c15ull) & (a->tabcap - 1);
}

static bool tab_grow(cuda_alloc *a) {
    size_t cap = a->tabcap ? a->tabcap * 2 : 256;
    blk **t = calloc(cap, sizeof *t);
    if (!t)
        return false;
    blk **old = a->tab;
    size_t oldcap = a->tabcap;
    a->tab = t;
    a->tabcap = cap;
    for (size_t i = 0; i < oldcap; i++)
        if (old[i]) {
            size_t s = slot_of(a, old[i]->ptr);
            while (a->tab[s])
                s = (s + 1) & (cap - 1);
            a->tab[s] = old[i];
        }
    free(old);
    return true;
}

static bool tab_put(cuda_alloc *a, blk *b) {
    if ((a->tabn + 1) * 2 > a->tabcap && !tab_grow(a))
        return false;
    size_t s = slot_of(a, b->ptr);
    while (a->tab[s])
        s = (s + 1) & (a->tabcap - 1);
    a->tab[s] = b;
    a->tabn++;
    return true;
}

static blk *tab_take(cuda_alloc *a, uintptr_t p) {
    if (!a->tabcap)
        return NULL;
    size_t mask = a->tabcap - 1, s = slot_of(a, p);
    while (a->tab[s] && a->tab[s]->ptr != p)
        s = (s + 1) & mask;
    blk *b = a->tab[s];
    if (!b)
        return NULL;
    a->tab[s] = NULL;
    a->tabn--;
    // backward-shift the cluster after s so every probe chain stays unbroken
    for (size_t j = (s + 1) & mask; a->tab[j]; j = (j + 1) & mask) {
        size_t home = slot_of(a, a->tab[j]->ptr);
        bool movable = (j > s) ? (home <= s || home > j) : (home <= s && home > j);
        if (movable) {
            a->tab[s] = a->tab[j];
            a->tab[j] = NULL;
            s = j;
        }
    }
    return b;
}

// ---- segments --------------------------------------------------------------

static void seg_remove(cuda_alloc *a, size_t i) {
    blk *h = a->segs[i];
    a->be.raw_free(a->be.ctx, (void *)h->ptr);
    a->st.reserved_bytes -= h->size;
    a->st.segments--;
    a->st.raw_frees++;
    bin_remove(a, h);
    free(h);
    a->segs[i] = a->segs[--a->nsegs];
}

void cuda_alloc_trim(cuda_alloc *a) {
    for (size_t i = a->nsegs; i-- > 0;) {
        blk *h = a->segs[i];
        if (!h->allocated && !h->next) // merging leaves a free segment as one block
            seg_remove(a, i);
    }
}

static blk *seg_new(cuda_alloc *a, size_t size, bool small, const void *stream, char *err,
                    size_t cap) {
    if (a->nsegs == a->segcap) {
        size_t nc = a->segcap ? a->segcap * 2 : 16;
        blk **s = realloc(a->segs, nc * sizeof *s);
        if (!s) {
            snprintf(err, cap, "out of host memory for the allocator's segment list");
            return NULL;
        }
        a->segs = s;
        a->segcap = nc;
    }
    blk *b = calloc(1, sizeof *b);
    if (!b) {
        snprintf(err, cap, "out of host memory for an allocator block");
        return NULL;
    }
    void *p = NULL;
    char why[256] = "";
    int rc = a->be.raw_alloc(a->be.ctx, size, &p, why, sizeof why);
    if (rc < 0) { // what the cache holds may be enough once given back
        cuda_alloc_trim(a);
        rc = a->be.raw_alloc(a->be.ctx, size, &p, why, sizeof why);
    }
    if (rc < 0) {
        snprintf(err, cap,
                 "device out of memory: tried to allocate %zu bytes with %zu bytes live and %zu "
                 "reserved (%s)",
                 size, a->st.live_bytes, a->st.reserved_bytes, why[0] ? why : "no reason given");
        free(b);
        return NULL;
    }
    b->ptr = (uintptr_t)p;
    b->size = size;
    b->small = small;
    b->stream = stream;
    a->segs[a->nsegs++] = b;
    a->st.reserved_bytes += size;
    a->st.segments++;
    a->st.raw_allocs++;
    return b;
}

// ---- the interface ---------------------------------------------------------

cuda_alloc *cuda_alloc_new(cuda_alloc_backend be, char *err, size_t cap) {
    cuda_alloc *a = calloc(1, sizeof *a);
    if (!a) {
        snprintf(err, cap, "out of host memory for the allocator");
        return NULL;
    }
    a->be = be;
    return a;
}

void cuda_alloc_free(cuda_alloc *a) {
    if (!a)
        return;
    for (size_t i = 0; i < a->nsegs; i++) {
        blk *h = a->segs[i];
        a->be.raw_free(a->be.ctx, (void *)h->ptr);
        for (blk *b = h, *nx; b; b = nx) {
            nx = b->next;
            free(b);
        }
    }
    free(a->segs);
    free(a->tab);
    free(a);
}

int cuda_alloc_get(cuda_alloc *a, size_t bytes, const void *stream, void **out, char *err,
                   size_t cap) {
    *out = NULL;
    size_t size = cuda_alloc_round(bytes);
    if (size < bytes) {
        snprintf(err, cap, "a request of %zu bytes is too large", bytes);
        return -1;
    }
    // --memory-limit caps the device's live bytes as it caps the host's
    if (!tensor_mem_admit(a->st.live_bytes, size)) {
        char why[160];
        tensor_mem_refusal(why, sizeof why, size, a->st.live_bytes);
        snprintf(err, cap, "device out of memory: %s (--memory-limit)", why);
        return -1;
    }
    bool small = size <= CUDA_ALLOC_SMALL_MAX;
    a->st.gets++;
    blk *b = best_fit(a, small, size, stream);
    if (b) {
        bin_remove(a, b);
        a->st.hits++;
    } else if (!(b = seg_new(a, cuda_alloc_segment_size(size), small, stream, err, cap))) {
        return -1;
    }
    size_t rest = b->size - size;
    if (small ? rest >= CUDA_ALLOC_ROUND : rest > CUDA_ALLOC_SMALL_MAX) {
        blk *r = calloc(1, sizeof *r);
        if (r) { // without it the block is simply not split
            *r = (blk){.ptr = b->ptr + size, .size = rest, .stream = stream, .small = small};
            r->prev = b;
            r->next = b->next;
            if (b->next)
                b->next->prev = r;
            b->next = r;
            b->size = size;
            bin_insert(a, r);
        }
    }
    if (!tab_put(a, b)) {
        bin_insert(a, b);
        snprintf(err, cap, "out of host memory for the allocator's block table");
        return -1;
    }
    b->allocated = true;
    b->requested = bytes;
    a->st.live_bytes += b->size;
    a->st.requested_bytes += bytes;
    if (a->st.live_bytes > a->st.peak_bytes)
        a->st.peak_bytes = a->st.live_bytes;
    *out = (void *)b->ptr;
    return 0;
}

// b absorbs its free successor n.
static void absorb(cuda_alloc *a, blk *b, blk *n) {
    bin_remove(a, n);
    b->size += n->size;
    b->next = n->next;
    if (n->next)
        n->next->prev = b;
    free(n);
}

void cuda_alloc_put(cuda_alloc *a, void *p) {
    if (!p)
        return;
    blk *b = tab_take(a, (uintptr_t)p);
    if (!b) // not ours: a programmer error, but never worth a crash here
        return;
    b->allocated = false;
    a->st.live_bytes -= b->size;
    a->st.requested_bytes -= b->requested;
    b->requested = 0;
    if (b->next && !b->next->allocated)
        absorb(a, b, b->next);
    if (b->prev && !b->prev->allocated) {
        blk *pv = b->prev;
        bin_remove(a, pv);
        bin_insert(a, b); // absorb() takes b off its bin
        absorb(a, pv, b);
        b = pv;
    }
    bin_insert(a, b);
}

void cuda_alloc_get_stats(const cuda_alloc *a, cuda_alloc_stats *st) { *st = a->st; }

void cuda_alloc_reset_peak(cuda_alloc *a) { a->st.peak_bytes = a->st.live_bytes; }
