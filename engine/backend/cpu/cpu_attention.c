// Fused scaled-dot-product attention (ops.def ATTENTION) in one pass, as
// FlashAttention: queries in tiles of AT_TQ rows meet keys in tiles of AT_TK,
// each query row keeps a running max m, a running sum l and an unnormalized
// output acc; a new key tile raises m, rescales l and acc by e^(m_old - m_new)
// and adds its own terms. No (T, S) score matrix exists, only an AT_TQ x AT_TK
// tile per thread. k and v are first packed into f32 (strided views, f16 or
// bf16 converted), each key tile transposed to (D, AT_TK) so that the score
// loop runs along keys and the values by rows, unless they can be read in
// place (below); the queries are loaded per tile, pre-scaled by fa0. Both
// inner loops are unit-stride, blocked 4 rows x 16 columns in registers; a
// tile of one row runs them as matrix-vector products (cpu_gemv).
//
// Work is split over (batch, head, query tile); when that gives the threads
// too little to do (decoding: T = 1, S long) the key range is also split into
// chunks, each producing its rows' (m, l, acc), merged at the end
// (flash-decoding). A tile's rows are a run of the (head, query) rows of
// one batch row: when the query heads that share a key/value head (GQA,
// MQA) have few queries (decoding), one tile holds all of their rows, so
// the register blocks of AT_R rows are full rather than one real row and
// three zeros, and the group's keys are read once. f32 values with
// unit-stride rows are read where they lie (a static cache's rows);
// others are packed. A tile of one query row (multi-head decoding) reads
// f32 keys in place too, a dot product along each key, where a packed tile
// would be a transposed copy that one row reads once.
// bf16 q, k and v on a CPU with AVX512-BF16 (the build's -march=native):
// k and v are packed as bf16 pairs instead, as a bf16 GEMM packs them, and
// both tile products multiply pairs (vdpbf16ps, f32 sums) at twice the
// f32 rate; the queries (scaled) and the probabilities are rounded to bf16
// for them, as autocast's bf16 matmuls round their operands. The online
// softmax stays f32.
//
// gcc 12 if-converts cpu_expf's selects, and so vectorizes the loops that
// call it, only when float compares may not trap: an option that changes no
// result, for this file (cpu_math.h's functions included, so they inline).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include "cpu_attention.h"
#include "cpu_math.h"

#include <cblas.h>

#include "cpu_gemm_par.h" // after cblas.h: cpu_gemv, the one-row products

#include <math.h>
#include <omp.h>
#if (defined(__AVX512BF16__) && defined(__AVX512BW__)) || defined(__AVX512F__)
#include <immintrin.h>
#endif
#if defined(__AVX512BF16__) && defined(__AVX512BW__)
#define AT_BF16 1
#else
#define AT_BF16 0
#endif
#include <stdlib.h>
#include <string.h>

typedef struct at_job {
    int64_t B, H, KVH, T, S, D, Dv;
    float scale;
    bool causal;
    at_operand q, k, v, bias;
    bool has_bias;
    const int64_t *len; // (B) valid keys per batch row
    int64_t nqt;        // query tiles per head (grouped: unused)
    int64_t group;      // query heads per key/value head
    bool grouped;       // a tile: all T * group rows of one key/value head
    int64_t ntile;      // tiles per batch row
    int64_t nsplit;     // key chunks per query tile (1: no split)
    int64_t chunk;      // keys per chunk (a multiple of AT_TK)
    int64_t nkt;        // key tiles
    float *kpack;       // (B, KVH, nkt, D, AT_TK): k packed, each tile transposed, or
                        // NULL: k read in place (one query row a tile, f32)
    float *vpack;       // (B, KVH, S, Dv): v packed, or NULL: v read in place
    // bf16 pairs (AT_BF16, q, k and v bf16): kpack and vpack are NULL
    bool bf16;
    int64_t Dp;      // D rounded up to even
    uint32_t *kpair; // (B, KVH, nkt, Dp / 2, AT_TK): k[c][2i], k[c][2i + 1] in one word
    uint32_t *vpair; // (B, KVH, nkt * AT_TK / 2, Dv): v[2i][e], v[2i + 1][e] likewise
} at_job;

// Per-thread scratch for one query tile.
typedef struct at_scratch {
    float *q;   // (AT_TQ, D), scaled
    float *s;   // (AT_TQ, AT_TK) scores, then probabilities
    float *acc; // (AT_TQ, Dv)
    float m[AT_TQ], l[AT_TQ];
    uint16_t *q16, *p16; // bf16 pairs: q (AT_TQ, Dp) and the probabilities (AT_TQ, AT_TK)
} at_scratch;

static float *scratch_new(const at_job *j, at_scratch *w) {
    size_t n = (size_t)(AT_TQ * j->D + AT_TQ * AT_TK + AT_TQ * j->Dv);
    size_t n16 = j->bf16 ? (size_t)(AT_TQ * j->Dp + AT_TQ * AT_TK) : 0;
    float *p = malloc(n * sizeof *p + n16 * sizeof(uint16_t));
    if (!p)
        return NULL;
    w->q = p;
    w->s = w->q + AT_TQ * j->D;
    w->acc = w->s + AT_TQ * AT_TK;
    w->q16 = (uint16_t *)(w->acc + AT_TQ * j->Dv);
    w->p16 = w->q16 + AT_TQ * j->Dp;
    return p;
}

#if AT_BF16
// The pair of bf16 values at p (p[0] low) broadcast to every 32-bit lane;
// read through memcpy, as the scratch is written as uint16_t.
static inline __m512bh pair_bcast(const uint16_t *p) {
    uint32_t w;
    memcpy(&w, p, sizeof w);
    return (__m512bh)_mm512_set1_epi32((int)w);
}

// s (rows, 16 nb) = q (rows, Dp) . k, both bf16 pairs (kt: (Dp / 2, AT_TK)
// words), rows a multiple of AT_R: AT_R x 16 nb f32 sums in registers; nb
// a constant where it is inlined.
static inline void scores_bf16_blocks(const uint16_t *q, const uint32_t *kt, int64_t np, int rows,
                                      float *s, int nb) {
    for (int i0 = 0; i0 < rows; i0 += AT_R) {
        __m512 acc[AT_R][AT_TK / 16];
        for (int r = 0; r < AT_R; r++)
            for (int c = 0; c < nb; c++)
                acc[r][c] = _mm512_setzero_ps();
        for (int64_t i = 0; i < np; i++) {
            __m512bh kv[AT_TK / 16];
            for (int c = 0; c < nb; c++)
                kv[c] = (__m512bh)_mm512_loadu_si512(kt + i * AT_TK + c * 16);
            for (int r = 0; r < AT_R; r++) {
                __m512bh qb = pair_bcast(q + 2 * ((i0 + r) * np + i));
                for (int c = 0; c < nb; c++)
                    acc[r][c] = _mm512_dpbf16_ps(acc[r][c], qb, kv[c]);
            }
        }
        for (int r = 0; r < AT_R; r++)
            for (int c = 0; c < nb; c++)
                _mm512_storeu_ps(s + (i0 + r) * AT_TK + c * 16, acc[r][c]);
    }
}

// The scores of the tile's first nk keys (columns up to the next multiple
// of 16; a short last tile, T or S just past a multiple of AT_TK, costs
// what it holds).
static void tile_scores_bf16(const uint16_t *q, const uint32_t *kt, int64_t Dp, int rows, int nk,
                             float *s) {
    _Static_assert(AT_TK == 64, "four blocks of 16 keys");
    switch ((nk + 15) / 16) {
    case 1: scores_bf16_blocks(q, kt, Dp / 2, rows, s, 1); break;
    case 2: scores_bf16_blocks(q, kt, Dp / 2, rows, s, 2); break;
    case 3: scores_bf16_blocks(q, kt, Dp / 2, rows, s, 3); break;
    default: scores_bf16_blocks(q, kt, Dp / 2, rows, s, 4); break;
    }
}

// acc (rows, Dv) += p (rows, AT_TK, bf16) . v (the tile's pairs of keys,
// (AT_TK / 2, Dv) words), over the first ceil(nk / 2) pairs: AT_R rows x 64
// columns a block, the last one masked. p is zero past nk, but for an odd
// nk the last pair's second key is a key no row here sees (a static
// cache's unwritten row, NaN or inf): its half of the words is cleared, as
// 0 x NaN would be NaN.
static void tile_pv_bf16(const uint16_t *p, const uint32_t *v, int64_t Dv, int rows, int nk,
                         float *acc) {
    int np = (nk + 1) / 2;
    enum { NB = 4 }; // 16-column vectors a block
    const __m512i low = _mm512_set1_epi32(0xffff);
    for (int64_t e0 = 0; e0 < Dv; e0 += NB * 16) {
        __mmask16 mk[NB];
        for (int b = 0; b < NB; b++) {
            int64_t left = Dv - e0 - b * 16;
            mk[b] = left >= 16  ? (__mmask16)0xffff
                    : left <= 0 ? (__mmask16)0
                                : (__mmask16)((1u << left) - 1);
        }
        for (int i0 = 0; i0 < rows; i0 += AT_R) {
            __m512 o[AT_R][NB];
            for (int r = 0; r < AT_R; r++)
                for (int b = 0; b < NB; b++)
                    o[r][b] = _mm512_maskz_loadu_ps(mk[b], acc + (i0 + r) * Dv + e0 + b * 16);
            for (int c = 0; c < np; c++) {
                __m512bh vv[NB];
                for (int b = 0; b < NB; b++) {
                    __m512i w = _mm512_maskz_loadu_epi32(mk[b], v + c * Dv + e0 + b * 16);
                    if (2 * c + 1 == nk)
                        w = _mm512_and_si512(w, low);
                    vv[b] = (__m512bh)w;
                }
                for (int r = 0; r < AT_R; r++) {
                    __m512bh pb = pair_bcast(p + (i0 + r) * AT_TK + 2 * c);
                    for (int b = 0; b < NB; b++)
                        o[r][b] = _mm512_dpbf16_ps(o[r][b], pb, vv[b]);
                }
            }
            for (int r = 0; r < AT_R; r++)
                for (int b = 0; b < NB; b++)
                    _mm512_mask_storeu_ps(acc + (i0 + r) * Dv + e0 + b * 16, mk[b], o[r][b]);
        }
    }
}
#endif

#if defined(__AVX512F__)
// r[0..15], rows of 16 floats, transposed in place: r[j] lane c = old r[c] lane j.
static inline void at_tr16(__m512 *r) {
    __m512 t[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {
        __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 2]),
                c = _mm512_castps_pd(t[4 * i + 1]), d = _mm512_castps_pd(t[4 * i + 3]);
        r[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
        r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
        r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(c, d));
        r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(c, d));
    }
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++) {
            t[8 * i + j] = _mm512_shuffle_f32x4(r[8 * i + j], r[8 * i + j + 4], 0x88);
            t[8 * i + j + 4] = _mm512_shuffle_f32x4(r[8 * i + j], r[8 * i + j + 4], 0xdd);
        }
    for (int j = 0; j < 8; j++) {
        r[j] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0x88);
        r[j + 8] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0xdd);
    }
}

// s (rows, AT_TK) = q (rows, D) . k_c for keys c < nk, the keys f32 rows
// where they lie (ldk apart), D a multiple of 16: a grouped decoding
// tile's several query rows. Each block of 16 keys by 16 dims is
// transposed in registers, so that a key's score is a lane of a chain of
// FMAs over the query's broadcast dims, not a dot product summed across
// lanes for every (row, key) (cpu_gemv's form, which took a third of a
// decoding call at head dim 32). Lanes past nk hold zeros' products.
static void at_scores_keys(const float *q, int64_t D, int rows, const float *k, int64_t ldk, int nk,
                           float *s) {
    for (int c0 = 0; c0 < nk; c0 += 16) {
        int nc = nk - c0 < 16 ? nk - c0 : 16;
        for (int64_t d0 = 0; d0 < D; d0 += 16) {
            __m512 r[16];
            for (int c = 0; c < 16; c++)
                r[c] = c < nc ? _mm512_loadu_ps(k + (c0 + c) * ldk + d0) : _mm512_setzero_ps();
            at_tr16(r);
            for (int i = 0; i < rows; i++) {
                const float *qi = q + i * D + d0;
                __m512 a = d0 ? _mm512_loadu_ps(s + i * AT_TK + c0) : _mm512_setzero_ps(),
                       b = _mm512_setzero_ps();
                for (int j = 0; j < 16; j += 2) {
                    a = _mm512_fmadd_ps(_mm512_set1_ps(qi[j]), r[j], a);
                    b = _mm512_fmadd_ps(_mm512_set1_ps(qi[j + 1]), r[j + 1], b);
                }
                _mm512_storeu_ps(s + i * AT_TK + c0, _mm512_add_ps(a, b));
            }
        }
    }
}
#endif

// The keys query t of batch row b may see: [0, end).
static int64_t key_end(const at_job *j, int64_t b, int64_t t) {
    int64_t L = j->len[b];
    if (!j->causal)
        return L;
    int64_t e = L - j->T + t + 1;
    return e < 0 ? 0 : e < L ? e : L;
}

// x[i] = e^(x[i] - shift), vectorized (see the pragma at the top).
static void exp_row(float *x, float shift, int64_t n) {
#pragma omp simd
    for (int64_t i = 0; i < n; i++)
        x[i] = cpu_expf(x[i] - shift);
}

// Tile qi of a batch row: its first (head, query) row f0 (h = f0 / T,
// t = f0 % T) and its row count.
static void tile_rows(const at_job *j, int64_t qi, int64_t *f0, int *n) {
    if (j->grouped) {
        *f0 = qi * j->group * j->T;
        *n = (int)(j->group * j->T);
        return;
    }
    int64_t h = qi / j->nqt, t0 = qi % j->nqt * AT_TQ;
    *f0 = h * j->T + t0;
    *n = (int)(j->T - t0 < AT_TQ ? j->T - t0 : AT_TQ);
}

// v's rows of (b, key/value head g) from key s0 and their stride: in
// place, or packed.
static const float *v_rows(const at_job *j, int64_t b, int64_t g, int64_t s0, int64_t *ld) {
    if (j->vpack) {
        *ld = j->Dv;
        return j->vpack + ((b * j->KVH + g) * j->S + s0) * j->Dv;
    }
    *ld = j->v.st[2];
    return (const float *)j->v.data + b * j->v.st[0] + g * j->v.st[1] + s0 * j->v.st[2];
}

// Rows [f0, f0 + nq) of batch row b (row f: head f / T, query f % T; all
// of one key/value head) against keys [k0, k1): fills w->m, w->l and
// w->acc (unnormalized) from scratch. Rows past nq, up to a multiple of
// AT_R, are zeros that the blocked loops carry along.
static void tile_run(const at_job *j, at_scratch *w, int64_t b, int64_t f0, int nq, int64_t k0,
                     int64_t k1) {
    int64_t D = j->D, Dv = j->Dv, T = j->T, kvh = f0 / T / j->group;
    // one f32 row alone (multi-head decoding) takes the one-row products
    int rows = nq == 1 && !j->bf16 ? 1 : (nq + AT_R - 1) / AT_R * AT_R;
    int64_t end[AT_TQ], last = 0; // each row's visible keys, and the most of any
    float row[AT_TK];
    for (int i = 0; i < rows; i++) {
        float *qi = w->q + i * D;
        end[i] = 0;
        if (i < nq) {
            int64_t h = (f0 + i) / T, t = (f0 + i) % T;
            end[i] = key_end(j, b, t);
            last = end[i] > last ? end[i] : last;
            at_load_row(&j->q, b * j->q.st[0] + h * j->q.st[1] + t * j->q.st[2], j->q.st[3], D, qi);
            for (int64_t d = 0; d < D; d++)
                qi[d] *= j->scale;
        } else {
            memset(qi, 0, (size_t)D * sizeof *qi);
        }
        if (j->bf16) { // rounded to bf16 pairs, the odd D's last pair padded
            cpu_bf16_store(D, qi, w->q16 + i * j->Dp, 1);
            if (j->Dp > D)
                w->q16[i * j->Dp + D] = 0;
        }
        w->m[i] = -INFINITY;
        w->l[i] = 0;
    }
    memset(w->acc, 0, (size_t)(rows * Dv) * sizeof *w->acc);
    last = k1 < last ? k1 : last;
    for (int64_t s0 = k0; s0 < last; s0 += AT_TK) {
        int nk = (int)(last - s0 < AT_TK ? last - s0 : AT_TK);
        int64_t bg = b * j->KVH + kvh;
#if AT_BF16
        if (j->bf16)
            tile_scores_bf16(w->q16, j->kpair + (bg * j->nkt + s0 / AT_TK) * (j->Dp / 2) * AT_TK,
                             j->Dp, rows, nk, w->s);
        else
#endif
            if (!j->kpack) { // f32 keys where they lie: dot products along each, in
                             // blocks of up to CPU_GEMV_ROWS query rows
            const float *kr = (const float *)j->k.data + b * j->k.st[0] + kvh * j->k.st[1];
#if defined(__AVX512F__)
            if (rows > 1 && D % 16 == 0) {
                at_scores_keys(w->q, D, rows, kr + s0 * j->k.st[2], j->k.st[2], nk, w->s);
            } else
#endif
                for (int i0 = 0; i0 < rows; i0 += CPU_GEMV_ROWS)
                    cpu_gemv(112, rows - i0 < CPU_GEMV_ROWS ? rows - i0 : CPU_GEMV_ROWS, 0, nk, D,
                             w->q + i0 * D, D, kr + s0 * j->k.st[2], j->k.st[2], 0.0f,
                             w->s + i0 * AT_TK, AT_TK);
        } else {
            const float *kt = j->kpack + (bg * j->nkt + s0 / AT_TK) * D * AT_TK;
            if (rows == 1) // every column: zeros past S, or keys masked below
                cpu_gemv(111, 1, 0, AT_TK, D, w->q, D, kt, AT_TK, 0.0f, w->s, AT_TK);
            else
                at_tile_scores(w->q, kt, D, rows, nk, w->s);
        }
        // each row's new max (masked columns set to -inf); the rescaling
        // factors of all rows at once; then the exponentials, a row at a time
        float mnew[AT_TQ], corr[AT_TQ];
        int vis[AT_TQ];
        for (int i = 0; i < rows; i++) {
            float *si = w->s + i * AT_TK;
            int v = (int)(end[i] - s0 < nk ? end[i] - s0 : nk); // this row's visible keys here
            v = v < 0 ? 0 : v;
            if (v && j->has_bias) {
                const at_operand *o = &j->bias;
                int64_t h = (f0 + i) / T, t = (f0 + i) % T;
                at_load_row(o, b * o->st[0] + h * o->st[1] + t * o->st[2] + s0 * o->st[3], o->st[3],
                            v, row);
                for (int c = 0; c < v; c++)
                    si[c] += row[c];
            }
            float mx = w->m[i];
#pragma omp simd reduction(max : mx)
            for (int c = 0; c < AT_TK; c++) {
                si[c] = c < v ? si[c] : -INFINITY;
                mx = si[c] > mx ? si[c] : mx;
            }
            vis[i] = mx == -INFINITY ? 0 : v; // nothing visible yet (masked, -inf bias): no terms
            mnew[i] = vis[i] ? mx : w->m[i];
        }
#pragma omp simd
        for (int i = 0; i < AT_TQ; i++)
            corr[i] = i < rows && vis[i] ? cpu_expf(w->m[i] - mnew[i]) : 1.0f;
        for (int i = 0; i < rows; i++) {
            float *si = w->s + i * AT_TK, shift = vis[i] ? mnew[i] : 0.0f, sum = 0;
            exp_row(si, shift, AT_TK);
            for (int c = vis[i]; c < AT_TK; c++)
                si[c] = 0;
#pragma omp simd reduction(+ : sum)
            for (int c = 0; c < AT_TK; c++)
                sum += si[c];
            if (j->bf16) // the row as bf16 pairs for tile_pv_bf16, while in cache
                cpu_bf16_store(AT_TK, si, w->p16 + i * AT_TK, 1);
            if (!vis[i])
                continue;
            w->m[i] = mnew[i];
            w->l[i] = w->l[i] * corr[i] + sum;
            if (corr[i] != 1.0f)
                for (int64_t e = 0; e < Dv; e++)
                    w->acc[i * Dv + e] *= corr[i];
        }
#if AT_BF16
        if (j->bf16) {
            tile_pv_bf16(w->p16, j->vpair + (bg * j->nkt * AT_TK + s0) / 2 * Dv, Dv, rows, nk,
                         w->acc);
            continue;
        }
#endif
        int64_t ldv;
        const float *vr = v_rows(j, b, kvh, s0, &ldv);
        if (rows == 1)
            cpu_gemv(111, 1, 0, Dv, nk, w->s, AT_TK, vr, ldv, 1.0f, w->acc, Dv);
        else
            at_tile_pv(w->s, vr, ldv, Dv, rows, nk, w->acc);
    }
}

// rows of acc (stride Dv) divided by their l (zeros where no key was
// visible) into y's contiguous rows from element off
static void store_rows(tensor *y, int64_t off, const float *acc, const float *l, int n,
                       int64_t Dv) {
    float buf[512];
    for (int i = 0; i < n; i++) {
        float inv = l[i] > 0 ? 1.0f / l[i] : 0.0f;
        for (int64_t e0 = 0; e0 < Dv; e0 += 512) {
            int64_t ne = Dv - e0 < 512 ? Dv - e0 : 512, at = y->offset + off + i * Dv + e0;
            for (int64_t e = 0; e < ne; e++)
                buf[e] = acc[i * Dv + e0 + e] * inv;
            if (y->dtype == DT_F32)
                memcpy((float *)y->storage->data + at, buf, (size_t)ne * sizeof *buf);
            else
                cpu_half_store(y->dtype, ne, buf, (uint16_t *)y->storage->data + at, 1);
        }
    }
}

// k and v into f32 once per call, as a GEMM packs its operands: each key
// tile transposed to (D, AT_TK) (its columns past S zero), values by rows;
// either is skipped where the tiles read it in place (kpack, vpack NULL).
// Every query tile and every query head of a kv group then reads the copy
// (GQA's sharing for free); it is the size of k and v in f32.
// Called inside a parallel region: its loop is shared among the threads.
#if AT_BF16
// The bf16 form of pack_kv: a key tile as (Dp / 2, AT_TK) words, each the
// pair of a key's consecutive dims; values as (AT_TK / 2, Dv) words, each
// the pair of consecutive keys' values of one dim. Past S and D: zeros.
static void pack_kv_bf16(const at_job *j) {
    int64_t D = j->D, Dv = j->Dv, np = j->Dp / 2, n = j->B * j->KVH * j->nkt;
    const uint16_t *k = (const uint16_t *)j->k.data, *v = (const uint16_t *)j->v.data;
    const int64_t *ks = j->k.st, *vs = j->v.st;
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        int64_t bg = i / j->nkt, s0 = i % j->nkt * AT_TK, b = bg / j->KVH, g = bg % j->KVH;
        uint32_t *kt = j->kpair + i * np * AT_TK, *vt = j->vpair + i * (AT_TK / 2) * Dv;
        for (int64_t c = 0; c < AT_TK; c++) {
            int64_t s = s0 + c;
            if (s >= j->S) { // past the keys: zeros
                for (int64_t d = 0; d < np; d++)
                    kt[d * AT_TK + c] = 0;
                continue;
            }
            const uint16_t *kr = k + b * ks[0] + g * ks[1] + s * ks[2];
            if (ks[3] == 1 && D % 2 == 0) { // the row's pairs as they lie
                for (int64_t d = 0; d < np; d++) {
                    uint32_t w;
                    memcpy(&w, kr + 2 * d, sizeof w);
                    kt[d * AT_TK + c] = w;
                }
                continue;
            }
            for (int64_t d = 0; d < np; d++) {
                uint32_t lo = kr[2 * d * ks[3]], hi = 2 * d + 1 < D ? kr[(2 * d + 1) * ks[3]] : 0;
                kt[d * AT_TK + c] = lo | hi << 16;
            }
        }
        for (int64_t c = 0; c < AT_TK; c += 2) {
            int64_t s = s0 + c;
            uint32_t *o = vt + c / 2 * Dv;
            if (s >= j->S) { // past the keys: zeros
                memset(o, 0, (size_t)Dv * sizeof *o);
                continue;
            }
            const uint16_t *v0 = v + b * vs[0] + g * vs[1] + s * vs[2];
            if (s + 1 < j->S && vs[3] == 1) {
                const uint16_t *v1 = v0 + vs[2];
#pragma omp simd
                for (int64_t e = 0; e < Dv; e++)
                    o[e] = (uint32_t)v0[e] | (uint32_t)v1[e] << 16;
                continue;
            }
            for (int64_t e = 0; e < Dv; e++)
                o[e] = v0[e * vs[3]] | (uint32_t)(s + 1 < j->S ? v0[vs[2] + e * vs[3]] : 0u) << 16;
        }
    }
}
#endif

static void pack_kv(const at_job *j) {
#if AT_BF16
    if (j->bf16) {
        pack_kv_bf16(j);
        return;
    }
#endif
    int64_t D = j->D, Dv = j->Dv, n = j->B * j->KVH * j->nkt;
    if (!j->kpack && !j->vpack)
        return; // both read in place
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        int64_t bg = i / j->nkt, s0 = i % j->nkt * AT_TK, b = bg / j->KVH, g = bg % j->KVH;
        float *kt = j->kpack ? j->kpack + i * D * AT_TK : NULL, row[256];
        for (int64_t c = 0; c < AT_TK; c++) {
            int64_t s = s0 + c, kb = b * j->k.st[0] + g * j->k.st[1] + s * j->k.st[2];
            for (int64_t d0 = 0; j->kpack && d0 < D; d0 += 256) {
                int64_t nd = D - d0 < 256 ? D - d0 : 256;
                if (s < j->S)
                    at_load_row(&j->k, kb + d0 * j->k.st[3], j->k.st[3], nd, row);
                else
                    memset(row, 0, sizeof row);
                for (int64_t d = 0; d < nd; d++)
                    kt[(d0 + d) * AT_TK + c] = row[d];
            }
            if (s < j->S && j->vpack)
                at_load_row(&j->v, b * j->v.st[0] + g * j->v.st[1] + s * j->v.st[2], j->v.st[3],
                            Dv, j->vpack + (bg * j->S + s) * Dv);
        }
    }
}

// Split-K's second pass: row r's chunks rescaled to their common max and
// summed (flash-decoding's merge), into y; acc holds Dv floats.
static void merge_row(const at_job *j, const float *part, tensor *y, int64_t r, float *acc) {
    int64_t P = j->nsplit, Dv = j->Dv;
    const float *pr = part + r * P * (2 + Dv);
    float mx = -INFINITY, l = 0;
    for (int64_t p = 0; p < P; p++)
        mx = pr[p * (2 + Dv)] > mx ? pr[p * (2 + Dv)] : mx;
    memset(acc, 0, (size_t)Dv * sizeof *acc);
    for (int64_t p = 0; mx != -INFINITY && p < P; p++) {
        const float *c = pr + p * (2 + Dv);
        if (c[1] == 0)
            continue;
        float f = cpu_expf(c[0] - mx);
        l += c[1] * f;
        for (int64_t e = 0; e < Dv; e++)
            acc[e] += c[2 + e] * f;
    }
    store_rows(y, r * Dv, acc, &l, 1, Dv);
}

// k and v packed, then every (b, h, query tile, key chunk), then (split-K)
// the merge, in one parallel region: a decode step's attention is a few
// microseconds, about what another region's start costs. Without a split
// (part NULL) each task writes its rows to y; with one, its rows' m, l and
// acc go to part, (row, chunk) entries of 2 + Dv floats, merged after the
// tasks' barrier.
static int run_tasks(const at_job *j, tensor *y, float *part) {
    int64_t P = j->nsplit, Dv = j->Dv, tasks = j->B * j->ntile * P;
    int64_t rows = j->B * j->H * j->T;
    int bad = 0;
#pragma omp parallel
    {
        at_scratch w;
        float *mem = scratch_new(j, &w);
        if (!mem) {
#pragma omp atomic write
            bad = 1;
        }
        pack_kv(j); // its loop's barrier: packed before any task reads it
#pragma omp for schedule(dynamic, 1)
        for (int64_t task = 0; task < tasks; task++) {
            if (!mem)
                continue;
            int64_t p = task % P, rest = task / P, b = rest / j->ntile, f0;
            int nq;
            tile_rows(j, rest % j->ntile, &f0, &nq);
            int64_t r0 = b * j->H * j->T + f0; // the tile's first row of y
            int64_t k0 = p * j->chunk, k1 = k0 + j->chunk < j->S ? k0 + j->chunk : j->S;
            tile_run(j, &w, b, f0, nq, k0, k1);
            if (!part) {
                store_rows(y, r0 * Dv, w.acc, w.l, nq, Dv);
                continue;
            }
            for (int i = 0; i < nq; i++) {
                float *dst = part + ((r0 + i) * P + p) * (2 + Dv);
                dst[0] = w.m[i];
                dst[1] = w.l[i];
                memcpy(dst + 2, w.acc + i * Dv, (size_t)Dv * sizeof *dst);
            }
        }
        // the loop's barrier: every chunk is in part
        if (part) {
#pragma omp for schedule(static)
            for (int64_t r = 0; r < rows; r++)
                if (mem)
                    merge_row(j, part, y, r, w.acc);
        }
        free(mem);
    }
    return bad ? -1 : 0;
}

int cpu_attention(cpu_ctx *c, const graph_node *n, const tensor *q, const tensor *k,
                  const tensor *v, const tensor *bias, const tensor *len, tensor *y) {
    const tensor *in[3] = {q, k, v};
    for (int i = 0; i < 3; i++)
        if (in[i]->ndim != 4 || !at_float_dtype(in[i]->dtype))
            return cpu_fail(c, "attention: input %d must be a 4-d float tensor", i);
    if (bias && (!at_float_dtype(bias->dtype) || bias->ndim > 4))
        return cpu_fail(c, "attention: the bias must be a float tensor of at most 4 dims");
    if (y->dtype != q->dtype || !tensor_is_contiguous(y))
        return cpu_fail(c, "attention: the output must be contiguous and of q's dtype");
    at_job j = {.B = q->shape[0],
                .H = q->shape[1],
                .KVH = k->shape[1],
                .T = q->shape[2],
                .S = k->shape[2],
                .D = q->shape[3],
                .Dv = v->shape[3],
                .scale = (float)n->fa[0],
                .causal = n->ia[0] != 0,
                .q = at_operand_of(q),
                .k = at_operand_of(k),
                .v = at_operand_of(v),
                .has_bias = bias != NULL};
    if (bias)
        j.bias = at_operand_of(bias);
    if (j.KVH < 1 || j.H % j.KVH)
        return cpu_fail(c, "attention: %lld query heads do not share %lld key/value heads evenly",
                        (long long)j.H, (long long)j.KVH);
    int64_t *L = at_lengths(c, "attention", len, j.B, j.S);
    if (!L)
        return -1;
    j.len = L;
    // no row sees a key at or past the longest valid length: a static
    // cache's unwritten rows are neither packed nor visited
    int64_t visible = 0;
    for (int64_t b = 0; b < j.B; b++)
        visible = L[b] > visible ? L[b] : visible;
    j.S = visible;
    j.nqt = (j.T + AT_TQ - 1) / AT_TQ;
    j.group = j.H / j.KVH;
    j.grouped = j.group > 1 && j.T * j.group <= AT_TQ;
    j.ntile = j.grouped ? j.KVH : j.H * j.nqt;
    j.nsplit = 1;
    j.chunk = j.S;
    int64_t tasks = j.B * j.ntile, want = 4 * (int64_t)omp_get_max_threads();
    if (tasks < want && j.S >= 4 * AT_TK) {
        int64_t P = (want + tasks - 1) / tasks, most = j.S / (2 * AT_TK);
        P = P < most ? P : most;
        j.chunk = ((j.S + P - 1) / P + AT_TK - 1) / AT_TK * AT_TK;
        j.nsplit = (j.S + j.chunk - 1) / j.chunk;
    }
    float *part = NULL; // split-K: per (row, chunk) m, l and acc
    j.nkt = (j.S + AT_TK - 1) / AT_TK;
    j.bf16 = AT_BF16 && q->dtype == DT_BF16 && k->dtype == DT_BF16 && v->dtype == DT_BF16;
    j.Dp = (j.D + 1) / 2 * 2;
    int rc;
    if (j.bf16) {
        size_t kv = (size_t)(j.B * j.KVH * j.nkt) * AT_TK / 2;
        j.kpair = malloc((kv * (size_t)j.Dp + 1) * sizeof *j.kpair);
        j.vpair = malloc((kv * (size_t)j.Dv + 1) * sizeof *j.vpair);
        rc = j.kpair && j.vpair ? 0 : -1;
    } else {
        // one query row a tile (multi-head decoding) reads each key once:
        // its scores are dot products along the key's own row, no tile to
        // transpose it into
        bool k_in_place = (j.T == 1 || j.grouped) && k->dtype == DT_F32 && j.k.st[3] == 1;
        bool v_in_place = v->dtype == DT_F32 && j.v.st[3] == 1;
        if (!k_in_place)
            j.kpack = malloc((size_t)(j.B * j.KVH * j.nkt * j.D * AT_TK + 1) * sizeof *j.kpack);
        if (!v_in_place)
            j.vpack = malloc((size_t)(j.B * j.KVH * j.S * j.Dv + 1) * sizeof *j.vpack);
        rc = (k_in_place || j.kpack) && (v_in_place || j.vpack) ? 0 : -1;
    }
    if (rc == 0 && j.nsplit > 1 &&
        !(part = malloc((size_t)(j.B * j.H * j.T * j.nsplit * (2 + j.Dv)) * sizeof *part)))
        rc = -1;
    if (rc == 0)
        rc = run_tasks(&j, y, part);
    free(part);
    free(j.kpack);
    free(j.vpack);
    free(j.kpair);
    free(j.vpair);
    free(L);
    c->kernels++;
    return rc < 0 ? cpu_fail(c, "attention: out of memory") : 0;
}
