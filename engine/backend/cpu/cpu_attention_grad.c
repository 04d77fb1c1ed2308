// Fused attention's backward (ops.def ATTENTION_GRAD), FlashAttention-2's
// way: the probabilities are recomputed a (query tile, key tile) at a time
// from q, k and each row's log-sum-exp, never stored whole. Three passes,
// each one OpenMP loop over independent tiles, so that no two threads write
// the same gradient row and no atomics are needed:
//
//   1. per (batch, head, query tile): each row's log-sum-exp lse (the
//      forward's online max and sum again; the forward keeps only its
//      output) and dd = rowsum(dy * y);
//   2. per (batch, kv head, key tile): for every query tile of the kv
//      group's heads, p = e^(s - lse), dv += p^T dy, dp = dy v^T,
//      ds = p (dp - dd), dk += ds^T q (a kv head sums its query heads);
//   3. per (batch, head, query tile): p, dp and ds again, dq += ds k.
//
// Pass 3 recomputes what pass 2 had, instead of FlashAttention-2's atomic
// adds into dq. Operands are converted to contiguous f32 first (the size of
// q, k, v, y and dy; q pre-scaled, so that dk = ds^T q needs no scale), and
// every tile product runs on the forward's register-blocked kernels
// (cpu_attention.h): s = q kt and dp = dy vt with the key tile transposed,
// dv += p^T dy and dk += ds^T q with p and ds transposed, dq += ds k.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math") // as cpu_attention.c: lets cpu_expf's loops vectorize
#endif
#include "cpu_attention.h"
#include "cpu_math.h"

#include <math.h>
#include <omp.h>

typedef struct ag_job {
    int64_t B, H, KVH, G, T, S, D, Dv;
    float scale;
    bool causal, has_bias;
    at_operand bias;
    const int64_t *len; // (B) valid keys
    // contiguous f32, each followed by AT_R zero rows (the blocked kernels
    // read whole blocks of rows): q * scale (B, H, T, D), k (B, KVH, S, D),
    // v (B, KVH, S, Dv), y and dy (B, H, T, Dv)
    const float *q, *k, *v, *y, *dy;
    float *lse, *dd;     // (B, H, T)
    float *dq, *dk, *dv; // (B, H, T, D), (B, KVH, S, D), (B, KVH, S, Dv)
} ag_job;

// Per-thread scratch.
typedef struct ag_scratch {
    float *kt, *vt;  // (D, AT_TK), (Dv, AT_TK): a key tile and its values, transposed
    float *s, *dp;   // (AT_TQ, AT_TK): scores then probabilities; dp then ds
    float *pt, *dst; // (AT_TK, AT_TK): p and ds transposed (keys by queries)
    float *acc;      // pass 2: (AT_TK, D) dk then (AT_TK, Dv) dv; pass 3: (AT_TQ, D) dq
} ag_scratch;

static float *scratch_new(const ag_job *j, ag_scratch *w) {
    int64_t acc = AT_TK * (j->D + j->Dv);
    size_t n = (size_t)((j->D + j->Dv) * AT_TK + 2 * AT_TQ * AT_TK + 2 * AT_TK * AT_TK + acc);
    float *p = calloc(n, sizeof *p);
    if (!p)
        return NULL;
    w->kt = p;
    w->vt = w->kt + j->D * AT_TK;
    w->s = w->vt + j->Dv * AT_TK;
    w->dp = w->s + AT_TQ * AT_TK;
    w->pt = w->dp + AT_TQ * AT_TK;
    w->dst = w->pt + AT_TK * AT_TK;
    w->acc = w->dst + AT_TK * AT_TK;
    return p;
}

// The keys query t of batch row b may see: [0, end) (cpu_attention.c's rule).
static int64_t key_end(const ag_job *j, int64_t b, int64_t t) {
    int64_t L = j->len[b];
    if (!j->causal)
        return L;
    int64_t e = L - j->T + t + 1;
    return e < 0 ? 0 : e < L ? e : L;
}

// Keys [s0, s0 + nk) of kv head (b, kvh) and their values, transposed;
// columns past nk zero.
static void load_tile(const ag_job *j, ag_scratch *w, int64_t b, int64_t kvh, int64_t s0, int nk) {
    const float *k = j->k + ((b * j->KVH + kvh) * j->S + s0) * j->D;
    const float *v = j->v + ((b * j->KVH + kvh) * j->S + s0) * j->Dv;
    for (int64_t d = 0; d < j->D; d++)
        for (int c = 0; c < AT_TK; c++)
            w->kt[d * AT_TK + c] = c < nk ? k[c * j->D + d] : 0.0f;
    for (int64_t e = 0; e < j->Dv; e++)
        for (int c = 0; c < AT_TK; c++)
            w->vt[e * AT_TK + c] = c < nk ? v[c * j->Dv + e] : 0.0f;
}

static int round_rows(int n) { return (n + AT_R - 1) / AT_R * AT_R; }

// w->s (nq rows of AT_TK): the scaled scores (+ bias) of queries
// [t0, t0 + nq) of (b, h) against the loaded tile's keys from s0, -inf where
// masked or past nk. Rows up to a multiple of AT_R hold whatever the next
// rows of q give (never read as scores).
static void scores(const ag_job *j, ag_scratch *w, int64_t b, int64_t h, int64_t t0, int nq,
                   int64_t s0, int nk) {
    float row[AT_TK];
    at_tile_scores(j->q + ((b * j->H + h) * j->T + t0) * j->D, w->kt, j->D, round_rows(nq), AT_TK,
                   w->s);
    for (int i = 0; i < nq; i++) {
        float *si = w->s + i * AT_TK;
        int64_t vis = key_end(j, b, t0 + i) - s0;
        int v = (int)(vis < 0 ? 0 : vis < nk ? vis : nk);
        if (v && j->has_bias) {
            const at_operand *o = &j->bias;
            at_load_row(o, b * o->st[0] + h * o->st[1] + (t0 + i) * o->st[2] + s0 * o->st[3],
                        o->st[3], v, row);
            for (int c = 0; c < v; c++)
                si[c] += row[c];
        }
        for (int c = v; c < AT_TK; c++)
            si[c] = -INFINITY;
    }
}

// w->s into probabilities e^(s - lse); w->dp into ds = p (dy v^T - dd),
// without the scale (dq takes it at the end; q carries it for dk). Rows
// from nq up to a multiple of AT_R are zeros in both.
static void probs_ds(const ag_job *j, ag_scratch *w, int64_t b, int64_t h, int64_t t0, int nq) {
    int64_t r0 = (b * j->H + h) * j->T + t0;
    at_tile_scores(j->dy + r0 * j->Dv, w->vt, j->Dv, round_rows(nq), AT_TK, w->dp);
    for (int i = 0; i < round_rows(nq); i++) {
        float *si = w->s + i * AT_TK, *dpi = w->dp + i * AT_TK;
        float lse = i < nq ? j->lse[r0 + i] : -INFINITY, dd = i < nq ? j->dd[r0 + i] : 0.0f;
        if (lse == -INFINITY) { // no visible key (the forward's row of zeros), or padding
            memset(si, 0, AT_TK * sizeof *si);
            memset(dpi, 0, AT_TK * sizeof *dpi);
            continue;
        }
#pragma omp simd
        for (int c = 0; c < AT_TK; c++) {
            si[c] = cpu_expf(si[c] - lse);
            // a key no row sees (a cache's unwritten row, NaN) gives 0, not 0 x NaN
            dpi[c] = si[c] != 0 ? si[c] * (dpi[c] - dd) : 0.0f;
        }
    }
}

// Pass 1 for queries [t0, t0 + nq) of (b, h).
static void row_stats(const ag_job *j, ag_scratch *w, int64_t b, int64_t h, int64_t t0, int nq) {
    float m[AT_TQ], l[AT_TQ];
    for (int i = 0; i < nq; i++)
        m[i] = -INFINITY, l[i] = 0;
    int64_t last = key_end(j, b, t0 + nq - 1), kvh = h / j->G;
    for (int64_t s0 = 0; s0 < last; s0 += AT_TK) {
        int nk = (int)(last - s0 < AT_TK ? last - s0 : AT_TK);
        load_tile(j, w, b, kvh, s0, nk);
        scores(j, w, b, h, t0, nq, s0, nk);
        for (int i = 0; i < nq; i++) {
            float *si = w->s + i * AT_TK, mx = m[i], sum = 0;
#pragma omp simd reduction(max : mx)
            for (int c = 0; c < AT_TK; c++)
                mx = si[c] > mx ? si[c] : mx;
            if (mx == -INFINITY)
                continue;
#pragma omp simd reduction(+ : sum)
            for (int c = 0; c < AT_TK; c++)
                sum += cpu_expf(si[c] - mx);
            l[i] = l[i] * cpu_expf(m[i] - mx) + sum;
            m[i] = mx;
        }
    }
    for (int i = 0; i < nq; i++) {
        int64_t r = (b * j->H + h) * j->T + t0 + i;
        const float *yi = j->y + r * j->Dv, *dyi = j->dy + r * j->Dv;
        float dd = 0;
#pragma omp simd reduction(+ : dd)
        for (int64_t e = 0; e < j->Dv; e++)
            dd += dyi[e] * yi[e];
        j->lse[r] = l[i] > 0 ? m[i] + logf(l[i]) : -INFINITY;
        j->dd[r] = dd;
    }
}

// (nq, AT_TK) src into (AT_TK, AT_TK) dst: keys by queries.
static void transpose(const float *src, int nq, float *dst) {
    for (int i = 0; i < nq; i++)
        for (int c = 0; c < AT_TK; c++)
            dst[c * AT_TK + i] = src[i * AT_TK + c];
}

// Pass 2 for keys [s0, s0 + nk) of kv head (b, kvh).
static void key_grads(const ag_job *j, ag_scratch *w, int64_t b, int64_t kvh, int64_t s0, int nk) {
    int64_t D = j->D, Dv = j->Dv;
    float *dk = w->acc, *dv = w->acc + AT_TK * D;
    memset(w->acc, 0, (size_t)(AT_TK * (D + Dv)) * sizeof *w->acc);
    load_tile(j, w, b, kvh, s0, nk);
    for (int64_t h = kvh * j->G; h < (kvh + 1) * j->G; h++)
        for (int64_t t0 = 0; t0 < j->T; t0 += AT_TQ) {
            int nq = (int)(j->T - t0 < AT_TQ ? j->T - t0 : AT_TQ);
            if (key_end(j, b, t0 + nq - 1) <= s0) // causal: later tiles see more
                continue;
            int64_t r0 = (b * j->H + h) * j->T + t0;
            scores(j, w, b, h, t0, nq, s0, nk);
            probs_ds(j, w, b, h, t0, nq);
            transpose(w->s, nq, w->pt);
            transpose(w->dp, nq, w->dst);
            at_tile_pv(w->pt, j->dy + r0 * Dv, Dv, Dv, AT_TK, nq, dv);
            at_tile_pv(w->dst, j->q + r0 * D, D, D, AT_TK, nq, dk);
        }
    int64_t row = (b * j->KVH + kvh) * j->S + s0;
    memcpy(j->dk + row * D, dk, (size_t)(nk * D) * sizeof *dk);
    memcpy(j->dv + row * Dv, dv, (size_t)(nk * Dv) * sizeof *dv);
}

// Pass 3 for queries [t0, t0 + nq) of (b, h).
static void query_grads(const ag_job *j, ag_scratch *w, int64_t b, int64_t h, int64_t t0, int nq) {
    int64_t D = j->D, kvh = h / j->G, last = key_end(j, b, t0 + nq - 1);
    float *dq = w->acc;
    memset(dq, 0, (size_t)(AT_TQ * D) * sizeof *dq);
    for (int64_t s0 = 0; s0 < last; s0 += AT_TK) {
        int nk = (int)(last - s0 < AT_TK ? last - s0 : AT_TK);
        load_tile(j, w, b, kvh, s0, nk);
        scores(j, w, b, h, t0, nq, s0, nk);
        probs_ds(j, w, b, h, t0, nq);
        at_tile_pv(w->dp, j->k + ((b * j->KVH + kvh) * j->S + s0) * D, D, D, round_rows(nq), nk,
                   dq);
    }
    float *out = j->dq + ((b * j->H + h) * j->T + t0) * D;
    for (int64_t i = 0; i < nq * D; i++)
        out[i] = dq[i] * j->scale;
}

typedef void (*ag_tile_fn)(const ag_job *j, ag_scratch *w, int64_t b, int64_t h, int64_t start,
                           int n);

// fn over every (batch, head, tile of `tile` of the len positions), shared
// among the threads of the enclosing parallel region: an orphaned loop,
// whose barrier ends the pass. w NULL (no scratch): nothing is run.
static void each_tile(const ag_job *j, ag_scratch *w, ag_tile_fn fn, int64_t heads, int64_t len,
                      int tile) {
    int64_t nt = (len + tile - 1) / tile;
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < j->B * heads * nt; t++) {
        int64_t bh = t / nt, s0 = t % nt * tile;
        if (w)
            fn(j, w, bh / heads, bh % heads, s0, (int)(len - s0 < tile ? len - s0 : tile));
    }
}

// The three passes in one parallel region.
static int run_passes(const ag_job *j) {
    int bad = 0;
#pragma omp parallel
    {
        ag_scratch w;
        float *mem = scratch_new(j, &w);
        if (!mem) {
#pragma omp atomic write
            bad = 1;
        }
        ag_scratch *wp = mem ? &w : NULL;
        each_tile(j, wp, row_stats, j->H, j->T, AT_TQ);
        each_tile(j, wp, key_grads, j->KVH, j->S, AT_TK);
        each_tile(j, wp, query_grads, j->H, j->T, AT_TQ);
        free(mem);
    }
    return bad ? -1 : 0;
}

// A 4-d operand into contiguous f32 rows, times scale.
static void to_f32(const tensor *t, float scale, float *dst) {
    at_operand o = at_operand_of(t);
    int64_t n3 = t->shape[3];
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < t->shape[0] * t->shape[1] * t->shape[2]; r++) {
        int64_t i2 = r % t->shape[2], i1 = r / t->shape[2] % t->shape[1],
                i0 = r / (t->shape[2] * t->shape[1]);
        float *row = dst + r * n3;
        at_load_row(&o, i0 * o.st[0] + i1 * o.st[1] + i2 * o.st[2], o.st[3], n3, row);
        for (int64_t i = 0; scale != 1.0f && i < n3; i++)
            row[i] *= scale;
    }
}

int cpu_attention_grad(cpu_ctx *c, const graph_node *n, const tensor *dy, const tensor *q,
                       const tensor *k, const tensor *v, const tensor *y, const tensor *bias,
                       const tensor *len, tensor *out) {
    const tensor *in[5] = {dy, q, k, v, y};
    for (int i = 0; i < 5; i++)
        if (in[i]->ndim != 4 || in[i]->dtype != q->dtype || !at_float_dtype(in[i]->dtype))
            return cpu_fail(c, "attention_grad: input %d must be a 4-d float tensor of q's dtype",
                            i);
    if (bias && (!at_float_dtype(bias->dtype) || bias->ndim > 4))
        return cpu_fail(c, "attention_grad: the bias must be a float tensor of at most 4 dims");
    if (out->dtype != q->dtype || !tensor_is_contiguous(out))
        return cpu_fail(c, "attention_grad: the output must be contiguous and of q's dtype");
    ag_job j = {.B = q->shape[0],
                .H = q->shape[1],
                .KVH = k->shape[1],
                .T = q->shape[2],
                .S = k->shape[2],
                .D = q->shape[3],
                .Dv = v->shape[3],
                .scale = (float)n->fa[0],
                .causal = n->ia[0] != 0,
                .has_bias = bias != NULL};
    j.G = j.H / j.KVH;
    if (bias)
        j.bias = at_operand_of(bias);
    int64_t *L = at_lengths(c, "attention_grad", len, j.B, j.S);
    if (!L)
        return -1;
    j.len = L;
    int64_t nq = j.B * j.H * j.T * j.D, nk = j.B * j.KVH * j.S * j.D, nv = j.B * j.KVH * j.S * j.Dv,
            ny = j.B * j.H * j.T * j.Dv, rows = j.B * j.H * j.T;
    bool f32 = out->dtype == DT_F32;
    // inputs in f32 (q and dy with AT_R zero rows after them), lse and dd,
    // then (not f32) the gradients before their conversion
    int64_t pq = AT_R * j.D, pdy = AT_R * j.Dv;
    size_t total =
        (size_t)(nq + pq + nk + nv + 2 * ny + pdy + 2 * rows + (f32 ? 0 : nq + nk + nv) + 1);
    float *mem = calloc(total, sizeof *mem);
    if (!mem) {
        free(L);
        return cpu_fail(c, "attention_grad: out of memory");
    }
    float *p = mem;
    j.q = p, p += nq + pq;
    j.k = p, p += nk;
    j.v = p, p += nv;
    j.y = p, p += ny;
    j.dy = p, p += ny + pdy;
    j.lse = p, p += rows;
    j.dd = p, p += rows;
    float *grads = f32 ? (float *)out->storage->data + out->offset : p;
    j.dq = grads, j.dk = grads + nq, j.dv = grads + nq + nk;
    to_f32(q, j.scale, (float *)j.q);
    to_f32(k, 1.0f, (float *)j.k);
    to_f32(v, 1.0f, (float *)j.v);
    to_f32(y, 1.0f, (float *)j.y);
    to_f32(dy, 1.0f, (float *)j.dy);
    int rc = run_passes(&j);
    if (rc == 0 && !f32)
        cpu_half_store(out->dtype, nq + nk + nv, grads,
                       (uint16_t *)out->storage->data + out->offset, 1);
    free(mem);
    free(L);
    c->kernels++;
    return rc < 0 ? cpu_fail(c, "attention_grad: out of memory") : 0;
}
