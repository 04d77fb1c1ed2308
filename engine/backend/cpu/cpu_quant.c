// Weight-only quantization kernels (cpu_quant.h): quantize, pack, unpack,
// dequantize, and the fused GEMM that never holds the whole f32 weight.
#include "cpu_quant.h"

#include "cpu_iter.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#if (defined(__AVX2__) && defined(__FMA__)) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "cpu_gemm_par.h"
#include <stdlib.h>
#include <string.h>

#define QCHUNK 256 // values of a group unpacked at once (GEMV)
// weight rows a tile holds (tile form): about QTILE_VALUES floats (1 MiB,
// within L2), so that sgemm's packing of x is paid once per many columns
#define QTILE_VALUES (1 << 18)
#define QLANES       16 // partial sums of a dot product (two AVX registers)
// weight rows a step of the AVX-512 qgemv kernels: 8 share each load of x
// and the reduction of their sums (qsum_rows), 1.05x over 4 at K = 256
#define QROWS 8

// The switches (cpu_quant.h), read at the first product and again after
// cpu_quant_env_reload: a decode step makes dozens of products, and each
// getenv walks the whole environment.
typedef struct qenv {
    bool simd, avx512_off; // TCBENCH_DISABLE_QGEMV_SIMD
    int form;              // TCBENCH_QGEMM: 0 by M, 1 gemv, 2 tiles
    int64_t tile;          // TCBENCH_QGEMM_TILE, 0: by K
} qenv;
static qenv qenv_now;
static int qenv_read; // 0: read it at the next product (the same values from any racing thread)

void cpu_quant_env_reload(void) { qenv_read = 0; }

static const qenv *qenv_get(void) {
    if (!qenv_read) {
        const char *off = getenv("TCBENCH_DISABLE_QGEMV_SIMD");
        qenv e = {.avx512_off = off && strcmp(off, "avx512") == 0};
        e.simd = e.avx512_off || !(off && *off && strcmp(off, "0") != 0);
        const char *f = getenv("TCBENCH_QGEMM");
        e.form = f && strcmp(f, "gemv") == 0 ? 1 : f && strcmp(f, "tiles") == 0 ? 2 : 0;
        const char *t = getenv("TCBENCH_QGEMM_TILE"); // rows, for the microbenchmark's sweep
        e.tile = t && atoi(t) > 0 ? atoi(t) : 0;
        qenv_now = e;
        qenv_read = 1;
    }
    return &qenv_now;
}

int64_t cpu_quant_groups(int64_t K, int64_t group) { return (K + group - 1) / group; }

int64_t cpu_quant_row_bytes(int bits, int64_t K) { return bits == 8 ? K : (K + 1) / 2; }

void cpu_quant_pack4(int64_t n, const int8_t *v, uint8_t *out) {
    for (int64_t i = 0; i < n / 2; i++)
        out[i] = (uint8_t)((v[2 * i] + 8) | ((v[2 * i + 1] + 8) << 4));
    if (n & 1) // the unused high nibble holds 0 (stored 8)
        out[n / 2] = (uint8_t)((v[n - 1] + 8) | (8 << 4));
}

void cpu_quant_unpack4(int64_t n, const uint8_t *p, int8_t *out) {
    for (int64_t i = 0; i < n; i++)
        out[i] = (int8_t)(((p[i >> 1] >> ((i & 1) * 4)) & 15) - 8);
}

static float scale_at(enum dtype sdt, const void *s, int64_t i) {
    return sdt == DT_F16 ? dtype_f16_to_f32(((const uint16_t *)s)[i]) : ((const float *)s)[i];
}

// Both values of an int4 byte as floats, the low nibble first: one 8-byte
// copy per byte unpacks a row faster than shifting and converting each.
static float lut4[256][2];
static pthread_once_t lut4_once = PTHREAD_ONCE_INIT;

static void lut4_fill(void) {
    for (int b = 0; b < 256; b++) {
        lut4[b][0] = (float)((b & 15) - 8);
        lut4[b][1] = (float)((b >> 4) - 8);
    }
}

// Values k0 .. k0+len of one quantized row as floats (the integers, unscaled).
static void unpack_range(int bits, const void *row, int64_t k0, int64_t len, float *out) {
    if (bits == 8) {
        const int8_t *r = (const int8_t *)row + k0;
        for (int64_t i = 0; i < len; i++)
            out[i] = (float)r[i];
        return;
    }
    const uint8_t *r = row;
    int64_t i = 0;
    if (k0 & 1)
        out[i++] = lut4[r[k0 >> 1]][1];
    const uint8_t *b = r + ((k0 + i) >> 1);
    int64_t pairs = (len - i) / 2;
    for (int64_t j = 0; j < pairs; j++)
        memcpy(out + i + 2 * j, lut4[b[j]], sizeof lut4[0]);
    i += 2 * pairs;
    if (i < len)
        out[i] = lut4[b[pairs]][0];
}

// The scale a group of largest magnitude amax stores, as f32 (rounded up
// to the next f16 when the scales are f16, so that no value clamps).
static float group_scale(float amax, int qmax, enum dtype sdt, uint16_t *h) {
    float s = amax / (float)qmax;
    if (sdt != DT_F16)
        return s;
    *h = dtype_f32_to_f16(s);
    float r = dtype_f16_to_f32(*h);
    if (r < s) {
        (*h)++;
        r = dtype_f16_to_f32(*h);
    }
    return r;
}

void cpu_quant_quantize(int bits, int64_t group, int64_t N, int64_t K, const float *w, void *q,
                        enum dtype sdt, void *scales) {
    int qmax = bits == 8 ? 127 : 7;
    int64_t G = cpu_quant_groups(K, group), rb = cpu_quant_row_bytes(bits, K);
#pragma omp parallel for if (N * K >= CPU_PAR_MIN) schedule(static)
    for (int64_t n = 0; n < N; n++) {
        const float *wr = w + n * K;
        uint8_t *qr = (uint8_t *)q + n * rb;
        if (bits == 4)
            memset(qr, 0x88, (size_t)rb); // zeros, the odd tail's spare nibble too
        for (int64_t g = 0; g < G; g++) {
            int64_t k0 = g * group, k1 = k0 + group < K ? k0 + group : K;
            float amax = 0;
            for (int64_t k = k0; k < k1; k++)
                amax = fmaxf(amax, fabsf(wr[k]));
            uint16_t h = 0;
            float s = group_scale(amax, qmax, sdt, &h);
            if (sdt == DT_F16)
                ((uint16_t *)scales)[n * G + g] = h;
            else
                ((float *)scales)[n * G + g] = s;
            for (int64_t k = k0; k < k1; k++) {
                float v = s > 0 ? roundf(wr[k] / s) : 0.0f;
                int iv = (int)fmaxf(-(float)qmax, fminf((float)qmax, v));
                if (bits == 8)
                    ((int8_t *)qr)[k] = (int8_t)iv;
                else if (k & 1)
                    qr[k >> 1] = (uint8_t)((qr[k >> 1] & 0x0f) | ((iv + 8) << 4));
                else
                    qr[k >> 1] = (uint8_t)((qr[k >> 1] & 0xf0) | (iv + 8));
            }
        }
    }
}

// Values k0 .. k0+len of one row dequantized (srow: the row's scales).
static void dequant_range(int bits, int64_t group, const void *qr, enum dtype sdt, const void *srow,
                          int64_t k0, int64_t len, float *out) {
    unpack_range(bits, qr, k0, len, out);
    for (int64_t k = k0; k < k0 + len;) {
        int64_t g = k / group, e = (g + 1) * group < k0 + len ? (g + 1) * group : k0 + len;
        float sc = scale_at(sdt, srow, g);
        for (; k < e; k++)
            out[k - k0] *= sc;
    }
}

static const void *scale_row(enum dtype sdt, const void *scales, int64_t n, int64_t G) {
    return (const char *)scales + (size_t)(n * G) * (sdt == DT_F16 ? 2 : 4);
}

// Rows n0 .. n0+rows of the dequantized weight into w (rows, K).
static void dequant_rows(int bits, int64_t group, int64_t n0, int64_t rows, int64_t K,
                         const void *q, enum dtype sdt, const void *scales, float *w) {
    int64_t G = cpu_quant_groups(K, group), rb = cpu_quant_row_bytes(bits, K);
    for (int64_t r = 0; r < rows; r++)
        dequant_range(bits, group, (const uint8_t *)q + (n0 + r) * rb, sdt,
                      scale_row(sdt, scales, n0 + r, G), 0, K, w + r * K);
}

void cpu_quant_dequantize(int bits, int64_t group, int64_t N, int64_t K, const void *q,
                          enum dtype sdt, const void *scales, float *w) {
    pthread_once(&lut4_once, lut4_fill);
#pragma omp parallel for if (N * K >= CPU_PAR_MIN) schedule(static)
    for (int64_t n = 0; n < N; n++)
        dequant_rows(bits, group, n, 1, K, q, sdt, scales, w + n * K);
}

// A call of qgemv: its operands and the form its rows take.
typedef struct qgemv_job {
    int bits;
    bool simd;
    int64_t group, M, N, K, G, rb;
    const float *x, *xs; // xs: x as qgemv4_512 reads it, or NULL
    const void *q, *scales;
    enum dtype sdt;
    float *y;
    int64_t body; // values a row the AVX-512 kernels take (0: none)
} qgemv_job;

#if defined(__AVX2__) && defined(__FMA__)
#define QGEMV4_SIMD 1
// The int4 fast path of qgemv, values [0, K - K % 32) of row qr (group a
// multiple of 32, so no block of 32 straddles two groups): 16 bytes to 32
// nibbles in order (masks, a shift, an interleave), offset as bytes,
// widened to floats and scaled, and one FMA per row of x; the sums into d[0 .. M).
// Returns the first value it left to the portable loop.
// Inlined twice (qgemv4_avx2): with M the constant 1 (decode) the four
// chains of sums live in registers; else in a small array.
static inline __attribute__((always_inline)) int64_t qgemv4_body(int64_t M, int64_t K,
                                                                 int64_t group, const float *x,
                                                                 const uint8_t *qr, enum dtype sdt,
                                                                 const void *srow, float *d) {
    __m256 acc[CPU_QGEMM_GEMV_MAX][4]; // four independent chains a row
    for (int64_t m = 0; m < M; m++)
        for (int e = 0; e < 4; e++)
            acc[m][e] = _mm256_setzero_ps();
    const __m128i low = _mm_set1_epi8(0x0f);
    const __m128i eight = _mm_set1_epi8(8);
    int64_t body = K - K % 32;
    for (int64_t k = 0; k < body; k += 32) {
        __m256 vs = _mm256_set1_ps(scale_at(sdt, srow, k / group));
        __m128i b = _mm_loadu_si128((const __m128i *)(qr + k / 2));
        __m128i lo = _mm_and_si128(b, low), hi = _mm_and_si128(_mm_srli_epi16(b, 4), low);
        __m128i v[2] = {_mm_sub_epi8(_mm_unpacklo_epi8(lo, hi), eight),
                        _mm_sub_epi8(_mm_unpackhi_epi8(lo, hi), eight)};
        for (int e = 0; e < 4; e++) {
            __m128i bytes = e & 1 ? _mm_srli_si128(v[e >> 1], 8) : v[e >> 1];
            __m256 w = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes)), vs);
            for (int64_t m = 0; m < M; m++)
                acc[m][e] = _mm256_fmadd_ps(_mm256_loadu_ps(x + m * K + k + 8 * e), w, acc[m][e]);
        }
    }
    for (int64_t m = 0; m < M; m++) {
        float l[8];
        __m256 t =
            _mm256_add_ps(_mm256_add_ps(acc[m][0], acc[m][1]), _mm256_add_ps(acc[m][2], acc[m][3]));
        _mm256_storeu_ps(l, t);
        d[m] = ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
    }
    return body;
}

static int64_t qgemv4_avx2(int64_t M, int64_t K, int64_t group, const float *x, const uint8_t *qr,
                           enum dtype sdt, const void *srow, float *d) {
    return M == 1 ? qgemv4_body(1, K, group, x, qr, sdt, srow, d)
                  : qgemv4_body(M, K, group, x, qr, sdt, srow, d);
}
#endif

#if defined(__AVX512F__)
#define QGEMV_512 1
// With AVX512BW and VL the int4 kernel also takes a row's last block of
// fewer than 128 values (K % 128: llama's down projection, K = 688), its
// bytes and scales loaded under masks and x zero past K, rather than
// leaving it to the portable loop, which cost that row more than its
// others.
#if defined(__AVX512BW__) && defined(__AVX512VL__)
#define QGEMV4_TAIL 1
#else
#define QGEMV4_TAIL 0
#endif
// The AVX-512 forms of qgemv, values [0, body) of NR weight rows (qr[r],
// their scales srow[r]) against M rows of x, the sums into d[m * ld + r].
// int4: body a multiple of 128 (QB_VALUES), group a multiple of 32 that
// divides 128 or that 128 divides (qgemv4_512_groups). 64 bytes of a row
// are 128 values, 16 lanes of 8 nibbles: lane i holds the values 8i ..
// 8i+7, one group's. Shifted right by 4s bits, each lane's low nibble is
// its value 8i+s, and vpermps, which reads only an index's low 4 bits,
// looks it up in the table of the 16 integers (i - 8): no mask, widening
// or conversion a value. xs is x to match, made once a call: a block's
// 8 vectors, vector s holding x[8i + s] in lane i. The block's sums,
// lane i over its 8 values, are scaled once, lane by lane (sidx: each
// lane's scale among the block's first); the integers' products before it
// are exact, so the sums are an f32 dot product in another order. The
// row's last block may be short (QGEMV4_TAIL: its bytes loaded under a
// mask, xs zero past K).
#define QB_VALUES 128
// With AVX512-VNNI (and the tail's masks) the products are integers
// instead (vpdpbusd: 4 products of u8 and s8 summed into each 32-bit
// lane). The weight's bytes as they are give the
// u8 operands: lo = b & 15 (lane i's bytes: values 8i, 8i+2, 8i+4, 8i+6)
// and hi = (b >> 4) & 15 (8i+1, +3, +5, +7), each u = q + 8. x is
// quantized per lane (its 8 values, one group's): scale sx = max|x| /
// QX_MAX, X = round(x / sx) in [-QX_MAX, QX_MAX] (a zero lane: sx 0, X
// 0), split as X = 256 x1 + x2, x1 = floor((X + 128) / 256) and x2, both
// in [-128, 127] (QX_MAX = 127 * 256 + 127: the largest X both fit). A
// lane's sums a1 = c1 + sum u x1 and a2 = c2 + sum u x2 start from c =
// -8 sum x (the offset 8 of u taken out at no cost), so (a1 << 8) + a2
// is sum q X exactly (|.| < 2^21, exact in f32 too); it is scaled by sx
// and then, as in the other forms, by the lane's weight scale. The one
// error beyond f32's rounding is X's rounding, at most sx / 2 = max|x| /
// 65278 an element: 2^-16 of the largest |x| of its lane, a bound on
// |error| of sum |w| max|x| / 65278 over the row. A scale a lane rather
// than a block keeps an outlier's cost to its own 7 neighbours. Coarser
// than x in two bf16 parts (vdpbf16ps with x_hi = bf16(x) and x_lo =
// bf16(x - x_hi), 2^-18 of each |x|, the form before this one: llama's
// compiled int4 output 3.4e-5 from fp64 against 5.4e-6, tolerance 1e-4),
// but a block is 4 dot instructions and 7 others against 8 and 8 (1.6x
// at K = 4096, 1.25x at K = 256, one thread); every CPU with AVX512-BF16
// has VNNI, so that form is gone. Its xs block: 64 bytes x1 in lo
// order (byte 4i + j: x1 of value 8i + 2j), 64 of x1 in hi order (8i + 2j
// + 1), the same two of x2, then 16 int32 c1, 16 int32 c2 and the 16 f32
// sx (448 of its 512 bytes).
#define QX_MAX 32639
#if defined(__AVX512VNNI__) && QGEMV4_TAIL
#define QGEMV4_VNNI 1
#else
#define QGEMV4_VNNI 0
#endif
// The sums of the lanes of t[0 .. NR) into d[0 .. NR), for a step's rows
// together: pairs of rows halved, quarters, then within the 128-bit
// chunks (3 instructions a row against reduce_add's 8).
static inline __attribute__((always_inline)) void qsum_rows(int NR, const __m512 *t, float *d) {
    __m512 h[4], q[2];
    for (int i = 0; i < 4; i++) { // chunks: a0+a2, a1+a3, b0+b2, b1+b3
        __m512 a = 2 * i < NR ? t[2 * i] : _mm512_setzero_ps();
        __m512 b = 2 * i + 1 < NR ? t[2 * i + 1] : _mm512_setzero_ps();
        h[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xee));
    }
    for (int i = 0; i < 2; i++) // chunk c: row 4i + c's 4 partial sums
        q[i] = _mm512_add_ps(_mm512_shuffle_f32x4(h[2 * i], h[2 * i + 1], 0x88),
                             _mm512_shuffle_f32x4(h[2 * i], h[2 * i + 1], 0xdd));
    __m512 w = _mm512_add_ps(_mm512_unpacklo_ps(q[0], q[1]), _mm512_unpackhi_ps(q[0], q[1]));
    w = _mm512_add_ps(w, _mm512_permute_ps(w, 0x4e)); // chunk c: rows c, 4 + c
    const __m512i order = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 13, 9, 5, 1, 12, 8, 4, 0);
    _mm512_mask_storeu_ps(d, (__mmask16)((1u << NR) - 1), _mm512_permutexvar_ps(order, w));
}

static bool qgemv4_512_groups(int64_t group) {
    return group % 32 == 0 && (group < QB_VALUES ? QB_VALUES % group == 0 : group % QB_VALUES == 0);
}

static inline __attribute__((always_inline)) void
qgemv4_512(int NR, int64_t M, int64_t K, int64_t body, int64_t group, const float *xs,
           const uint8_t *const *qr, enum dtype sdt, const void *const *srow, float *d,
           int64_t ld) {
#if QGEMV4_VNNI
    const __m512i low = _mm512_set1_epi8(0x0f);
#else
    const __m512 tbl =
        _mm512_set_ps(7, 6, 5, 4, 3, 2, 1, 0, -1, -2, -3, -4, -5, -6, -7, -8); // lane i: i - 8
#endif
    int per = group < QB_VALUES ? (int)(QB_VALUES / group) : 1; // scales a block
    __m512i sidx = _mm512_setzero_si512();                      // lane i: scale 8i / group
    if (per > 1)
        sidx = _mm512_srli_epi32(
            _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
            per == 4 ? 2 : 3);
    int64_t G = cpu_quant_groups(K, group);
#if QGEMV4_TAIL
    int64_t rb = cpu_quant_row_bytes(4, K);
#endif
    for (int64_t m = 0; m < M; m++) {
        __m512 tot[QROWS];
        for (int r = 0; r < NR; r++)
            tot[r] = _mm512_setzero_ps();
        for (int64_t k = 0; k < body; k += QB_VALUES) {
            const float *xk = xs + m * body + k;
            int64_t g = k / group;
#if QGEMV4_TAIL
            __mmask8 sm = (__mmask8)((1u << (G - g < per ? G - g : per)) - 1);
            int64_t left = rb - k / 2; // the row's bytes from here
            __mmask64 bm = left >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << left) - 1;
#endif
            for (int r = 0; r < NR; r++) {
#if QGEMV4_TAIL
                __m512i b = _mm512_maskz_loadu_epi8(bm, qr[r] + k / 2);
#else
                __m512i b = _mm512_loadu_si512(qr[r] + k / 2);
#endif
#if QGEMV4_VNNI
                const __m512i *xv = (const __m512i *)xk; // x1 lo, hi; x2 lo, hi; c1, c2
                __m512i lo = _mm512_and_si512(b, low);
                __m512i hi = _mm512_and_si512(_mm512_srli_epi16(b, 4), low);
                __m512i a1 =
                    _mm512_dpbusd_epi32(_mm512_loadu_si512(xv + 4), lo, _mm512_loadu_si512(xv));
                a1 = _mm512_dpbusd_epi32(a1, hi, _mm512_loadu_si512(xv + 1));
                __m512i a2 =
                    _mm512_dpbusd_epi32(_mm512_loadu_si512(xv + 5), lo, _mm512_loadu_si512(xv + 2));
                a2 = _mm512_dpbusd_epi32(a2, hi, _mm512_loadu_si512(xv + 3));
                __m512 p = _mm512_mul_ps(
                    _mm512_cvtepi32_ps(_mm512_add_epi32(_mm512_slli_epi32(a1, 8), a2)),
                    _mm512_loadu_ps(xk + 96));
#else
#define QW(s) _mm512_permutexvar_ps(_mm512_srli_epi32(b, 4 * (s)), tbl)
#define QX(s) _mm512_loadu_ps(xk + 16 * (s))
                __m512 e = _mm512_mul_ps(_mm512_permutexvar_ps(b, tbl), QX(0));
                __m512 o = _mm512_mul_ps(QW(1), QX(1));
                e = _mm512_fmadd_ps(QW(2), QX(2), e);
                o = _mm512_fmadd_ps(QW(3), QX(3), o);
                e = _mm512_fmadd_ps(QW(4), QX(4), e);
                o = _mm512_fmadd_ps(QW(5), QX(5), o);
                e = _mm512_fmadd_ps(QW(6), QX(6), e);
                o = _mm512_fmadd_ps(QW(7), QX(7), o);
                __m512 p = _mm512_add_ps(e, o);
#undef QW
#undef QX
#endif
#if QGEMV4_TAIL
                __m128 s4 =
                    sdt == DT_F16
                        ? _mm_cvtph_ps(_mm_maskz_loadu_epi16(sm, (const uint16_t *)srow[r] + g))
                        : _mm_maskz_loadu_ps(sm, (const float *)srow[r] + g);
#else
                float sc[4] = {0};
                for (int j = 0; j < per && g + j < G; j++)
                    sc[j] = scale_at(sdt, srow[r], g + j);
                __m128 s4 = _mm_loadu_ps(sc);
#endif
                tot[r] = _mm512_fmadd_ps(p, _mm512_permutexvar_ps(sidx, _mm512_castps128_ps512(s4)),
                                         tot[r]);
            }
        }
        qsum_rows(NR, tot, d + m * ld);
    }
}

#if QGEMV4_VNNI
// One xs block of the VNNI form from the 128 values v, 16 (lanes 2t and
// 2t + 1) at a time: each 8's largest |x| by swaps within the vector, and
// the bytes of even values (lo order) and odd ones (hi) as the low and
// high halves of each 64 bits, narrowed as they are stored.
static void qx_vnni(const float *v, uint8_t *o) {
    const __m512i lim = _mm512_set1_epi32(QX_MAX), nlim = _mm512_set1_epi32(-QX_MAX);
    for (int t = 0; t < 8; t++) {
        __m512 x = _mm512_loadu_ps(v + 16 * t), a = _mm512_abs_ps(x);
        a = _mm512_max_ps(a, _mm512_permute_ps(a, 0xb1));
        a = _mm512_max_ps(a, _mm512_permute_ps(a, 0x4e));
        a = _mm512_max_ps(a, _mm512_shuffle_f32x4(a, a, 0xb1));
        __m512 sx = _mm512_div_ps(a, _mm512_set1_ps(QX_MAX));
        // max_ps drops a NaN (it returns its second operand), so a lane
        // holding one gets sx NaN here: its products, every row's, are NaN,
        // as an f32 dot product's would be
        __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
        if (nan)
            sx = _mm512_mask_mov_ps(
                sx, (__mmask16)((nan & 0xff ? 0xff : 0) | (nan & 0xff00 ? 0xff00 : 0)),
                _mm512_set1_ps(NAN));
        // a zero lane's X are 0, not 0 / 0
        __mmask16 nz = _mm512_cmp_ps_mask(a, _mm512_setzero_ps(), _CMP_GT_OQ);
        __m512i X = _mm512_cvtps_epi32(_mm512_maskz_div_ps(nz, x, sx));
        X = _mm512_max_epi32(_mm512_min_epi32(X, lim), nlim); // NaN converts to INT_MIN
        // an infinite x: sx is inf and x / sx NaN; X takes its sign at full
        // scale, so that the sums are inf of the f32 product's sign (0 inf,
        // a zero weight's, NaN as there)
        __mmask16 inf = _mm512_cmp_ps_mask(_mm512_abs_ps(x), _mm512_set1_ps(INFINITY), _CMP_EQ_OQ);
        if (inf) {
            __mmask16 neg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
            X = _mm512_mask_mov_epi32(X, inf & ~neg, lim);
            X = _mm512_mask_mov_epi32(X, inf & neg, nlim);
        }
        __m512i x1 = _mm512_srai_epi32(_mm512_add_epi32(X, _mm512_set1_epi32(128)), 8);
        __m512i x2 = _mm512_sub_epi32(X, _mm512_slli_epi32(x1, 8));
        _mm512_mask_cvtepi64_storeu_epi8(o + 8 * t, 0xff, x1);
        _mm512_mask_cvtepi64_storeu_epi8(o + 64 + 8 * t, 0xff, _mm512_srli_epi64(x1, 32));
        _mm512_mask_cvtepi64_storeu_epi8(o + 128 + 8 * t, 0xff, x2);
        _mm512_mask_cvtepi64_storeu_epi8(o + 192 + 8 * t, 0xff, _mm512_srli_epi64(x2, 32));
        __m128 s2 = _mm_unpacklo_ps(_mm512_castps512_ps128(sx), _mm512_extractf32x4_ps(sx, 2));
        _mm_storel_pi((__m64 *)(o + 384 + 8 * t), s2);
    }
    const __m512i ones = _mm512_set1_epi8(1);
    for (int h = 0; h < 2; h++) { // c = -8 sum x a lane, from its bytes
        __m512i c =
            _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, _mm512_loadu_si512(o + 128 * h));
        c = _mm512_dpbusd_epi32(c, ones, _mm512_loadu_si512(o + 128 * h + 64));
        _mm512_storeu_si512(o + 256 + 64 * h,
                            _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(c, 3)));
    }
}
#endif

// x's M rows as qgemv4_512 reads them (body values a row, zero past K):
// into stack (QX_STACK floats) when they fit, else a new buffer; NULL when
// it cannot be allocated. A whole block is 8 gathers of 16 values (the
// VNNI form: qx_vnni, 8 loads).
#define QX_STACK 4096
static float *qgemv4_512_x(int64_t M, int64_t K, int64_t body, const float *x, float *stack) {
    float *xs = M * body <= QX_STACK ? stack : malloc((size_t)(M * body) * sizeof *xs);
#if !QGEMV4_VNNI
    const __m512i every8 =
        _mm512_set_epi32(120, 112, 104, 96, 88, 80, 72, 64, 56, 48, 40, 32, 24, 16, 8, 0);
#endif
    for (int64_t m = 0; xs && m < M; m++)
        for (int64_t k = 0; k < body; k += QB_VALUES) {
            float *o = xs + m * body + k;
            const float *xk = x + m * K + k;
#if QGEMV4_VNNI
            float pad[QB_VALUES]; // the row's last block, zero past K
            if (k + QB_VALUES > K) {
                memset(pad, 0, sizeof pad);
                memcpy(pad, xk, (size_t)(K - k) * sizeof *pad);
            }
            qx_vnni(k + QB_VALUES > K ? pad : xk, (uint8_t *)o);
#else
            for (int s = 0; s < 8; s++)
                if (k + QB_VALUES <= K)
                    _mm512_storeu_ps(o + 16 * s, _mm512_i32gather_ps(every8, xk + s, 4));
                else
                    for (int i = 0; i < 16; i++)
                        o[16 * s + i] = k + 8 * i + s < K ? xk[8 * i + s] : 0.0f;
#endif
        }
    return xs;
}

// int8: body and group multiples of 16; each group's products summed
// unscaled, then scaled once into the row's total.
static inline __attribute__((always_inline)) void
qgemv8_512(int NR, int64_t M, int64_t K, int64_t body, int64_t group, const float *x,
           const uint8_t *const *qr, enum dtype sdt, const void *const *srow, float *d,
           int64_t ld) {
    for (int64_t m = 0; m < M; m++) {
        __m512 tot[QROWS];
        for (int r = 0; r < NR; r++)
            tot[r] = _mm512_setzero_ps();
        const float *xm = x + m * K;
        for (int64_t g0 = 0; g0 < body; g0 += group) {
            __m512 ga[QROWS];
            for (int r = 0; r < NR; r++)
                ga[r] = _mm512_setzero_ps();
            int64_t g1 = g0 + group < body ? g0 + group : body;
            for (int64_t k = g0; k < g1; k += 16) {
                __m512 xv = _mm512_loadu_ps(xm + k);
                for (int r = 0; r < NR; r++) {
                    __m512 w = _mm512_cvtepi32_ps(
                        _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(qr[r] + k))));
                    ga[r] = _mm512_fmadd_ps(xv, w, ga[r]);
                }
            }
            for (int r = 0; r < NR; r++)
                tot[r] = _mm512_fmadd_ps(ga[r], _mm512_set1_ps(scale_at(sdt, srow[r], g0 / group)),
                                         tot[r]);
        }
        qsum_rows(NR, tot, d + m * ld);
    }
}

// Weight rows n0 .. n0 + nr of the job through the kernel of bits, the
// sums into d[m * ld + r]: QROWS rows a step, in one loop (the kernel's
// setup hoisted out of it: a call a step cost 1.18x at K = 256), then the
// rest; NR a constant in each kernel.
static void qgemv_512(const qgemv_job *j, int64_t n0, int64_t nr, float *d, int64_t ld) {
    const uint8_t *qr[QROWS];
    const void *sr[QROWS];
#define QGEMV_512_STEP(R)                                                                          \
    do {                                                                                           \
        for (int r = 0; r < (R); r++) {                                                            \
            qr[r] = (const uint8_t *)j->q + (n0 + r0 + r) * j->rb;                                 \
            sr[r] = scale_row(j->sdt, j->scales, n0 + r0 + r, j->G);                               \
        }                                                                                          \
        if (j->bits == 4)                                                                          \
            qgemv4_512(R, j->M, j->K, j->body, j->group, j->xs, qr, j->sdt, sr, d + r0, ld);       \
        else                                                                                       \
            qgemv8_512(R, j->M, j->K, j->body, j->group, j->x, qr, j->sdt, sr, d + r0, ld);        \
    } while (0)
    _Static_assert(QROWS == 8, "qgemv_512: a case for each rest");
    int64_t r0 = 0;
    for (; r0 + QROWS <= nr; r0 += QROWS)
        QGEMV_512_STEP(QROWS);
    switch (nr - r0) {
    case 1: QGEMV_512_STEP(1); break;
    case 2: QGEMV_512_STEP(2); break;
    case 3: QGEMV_512_STEP(3); break;
    case 4: QGEMV_512_STEP(4); break;
    case 5: QGEMV_512_STEP(5); break;
    case 6: QGEMV_512_STEP(6); break;
    case 7: QGEMV_512_STEP(7); break;
    default: break;
    }
#undef QGEMV_512_STEP
}
#endif

// Weight rows n0 .. n0 + nr of the job (nr <= QROWS) when the AVX-512
// kernels leave values of each row to the loop here, or take none.
static void qgemv_part(const qgemv_job *j, int64_t n0, int nr) {
    int bits = j->bits;
    bool simd = j->simd;
    (void)simd;
    int64_t group = j->group, M = j->M, N = j->N, K = j->K, G = j->G, rb = j->rb, body = j->body;
    const float *x = j->x;
    const void *q = j->q, *scales = j->scales;
    enum dtype sdt = j->sdt;
    float *y = j->y;
    float head[CPU_QGEMM_GEMV_MAX * QROWS] = {0}; // the kernels' sums, [m * QROWS + r]
#ifdef QGEMV_512
    if (body)
        qgemv_512(j, n0, nr, head, QROWS);
#endif
    for (int r = 0; r < nr; r++) {
        int64_t n = n0 + r;
        const uint8_t *qr = (const uint8_t *)q + n * rb;
        const void *srow = scale_row(sdt, scales, n, G);
        float lane[CPU_QGEMM_GEMV_MAX][QLANES] = {{0}}, tail[CPU_QGEMM_GEMV_MAX] = {0};
        float buf[QCHUNK];
        int64_t start = body;
        for (int64_t m = 0; m < M; m++)
            tail[m] = head[m * QROWS + r];
#ifdef QGEMV4_SIMD
        if (!body && simd && bits == 4 && group % 32 == 0)
            start = qgemv4_avx2(M, K, group, x, qr, sdt, srow, tail);
#endif
        for (int64_t k0 = start; k0 < K; k0 += QCHUNK) {
            int64_t len = K - k0 < QCHUNK ? K - k0 : QCHUNK, lb = len - len % QLANES;
            dequant_range(bits, group, qr, sdt, srow, k0, len, buf);
            for (int64_t m = 0; m < M; m++) {
                const float *xr = x + m * K + k0;
                for (int64_t i = 0; i < lb; i += QLANES)
                    for (int j = 0; j < QLANES; j++)
                        lane[m][j] += xr[i + j] * buf[i + j];
                for (int64_t i = lb; i < len; i++)
                    tail[m] += xr[i] * buf[i];
            }
        }
        for (int64_t m = 0; m < M; m++) {
            float d = tail[m];
            for (int j = 0; j < QLANES; j++)
                d += lane[m][j];
            y[m * N + n] = d;
        }
    }
}

// Weight rows n0 .. n0 + nr of the job: straight into y where the
// AVX-512 kernels take whole rows, else QROWS rows at a time.
static void qgemv_rows(const qgemv_job *j, int64_t n0, int64_t nr) {
#ifdef QGEMV_512
    if (j->body >= j->K) {
        qgemv_512(j, n0, nr, j->y + n0, j->N);
        return;
    }
#endif
    for (int64_t r0 = 0; r0 < nr; r0 += QROWS)
        qgemv_part(j, n0 + r0, (int)(nr - r0 < QROWS ? nr - r0 : QROWS));
}

// Few rows of x (decode): per output column, its row of W dequantized
// QCHUNK values at a time in registers and L1 (never to memory), dotted with
// every row of x in QLANES partial sums (a plain float reduction does not
// vectorize without reassociation; a vector of sums does), OpenMP over N.
// With AVX-512 the kernels above take QROWS weight rows a step (the rows
// of x one after another: a weight's values are unpacked once per row of
// x); else int4 with AVX2 unpacks and multiplies in registers
// (qgemv4_avx2; TCBENCH_DISABLE_QGEMV_SIMD=1 keeps the portable loop,
// =avx512 the AVX2 kernel where the build has AVX-512, for its tests).
// Columns [j0, j1) of y, over the threads when par, else on the calling
// thread (a member of a run of matrix-vector products, codegen_c.c).
static void qgemv(int bits, int64_t group, int64_t M, int64_t N, int64_t K, const float *x,
                  const void *q, enum dtype sdt, const void *scales, float *y, int64_t j0,
                  int64_t j1, bool par) {
    const qenv *e = qenv_get();
    bool simd = e->simd;
    (void)simd;
    int64_t body = 0, step = 1; // the AVX-512 kernels' values a row, and rows a step
    float *xs = NULL;           // int4: x as qgemv4_512 reads it
#ifdef QGEMV_512
    float stack[QX_STACK];
    int64_t unit = bits == 4 ? QB_VALUES : 16;
    if (simd && !e->avx512_off && (bits == 4 ? qgemv4_512_groups(group) : group % unit == 0))
        body = bits == 4 && QGEMV4_TAIL ? (K + unit - 1) / unit * unit : K - K % unit;
    if (body && bits == 4 && !(xs = qgemv4_512_x(M, K, body, x, stack)))
        body = 0; // the AVX2 or portable loop then: the same sums, no buffer
    step = body ? QROWS : 1;
#endif
    qgemv_job j = {.bits = bits,
                   .simd = simd,
                   .group = group,
                   .M = M,
                   .N = N,
                   .K = K,
                   .G = cpu_quant_groups(K, group),
                   .rb = cpu_quant_row_bytes(bits, K),
                   .x = x,
                   .xs = xs,
                   .q = q,
                   .scales = scales,
                   .sdt = sdt,
                   .y = y,
                   .body = body};
    if (par && (j1 - j0) * K >= CPU_PAR_MIN) {
#pragma omp parallel
        { // a share of whole steps a thread, in one call
            int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
            int64_t steps = (j1 - j0 + step - 1) / step;
            int64_t a = j0 + steps * t / nt * step, b = j0 + steps * (t + 1) / nt * step;
            qgemv_rows(&j, a, (b < j1 ? b : j1) - a);
        }
    } else {
        qgemv_rows(&j, j0, j1 - j0);
    }
#ifdef QGEMV_512
    if (xs != stack)
        free(xs);
#endif
}

static int64_t tile_rows(int64_t K) {
    int64_t t = qenv_get()->tile, r = t ? t : QTILE_VALUES / K;
    return r < 16 ? 16 : r;
}

// Tiles t0 .. t1 of tile_rows(K) weight rows: each dequantized into the f32 tile,
// then one sgemm into y's columns. -1 when the tile cannot be allocated.
static int tile_range(int bits, int64_t group, int64_t M, int64_t N, int64_t K, const float *x,
                      const void *q, enum dtype sdt, const void *scales, float *y, int64_t t0,
                      int64_t t1) {
    int64_t T = tile_rows(K);
    float *tile = malloc((size_t)(T * K) * sizeof *tile);
    if (!tile)
        return -1;
    for (int64_t t = t0; t < t1; t++) {
        int64_t n0 = t * T, rows = N - n0 < T ? N - n0 : T;
        dequant_rows(bits, group, n0, rows, K, q, sdt, scales, tile);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)rows, (int)K, 1.0f, x,
                    (int)K, tile, (int)K, 0.0f, y + n0, (int)N);
    }
    free(tile);
    return 0;
}

// More rows (prefill): the tiles split over the threads, each sgemm
// single-threaded inside the active region; a small GEMM runs on the
// calling thread, outside any region (cpu_gemm_par.h: never an inactive one).
static int qgemm_tiles(int bits, int64_t group, int64_t M, int64_t N, int64_t K, const float *x,
                       const void *q, enum dtype sdt, const void *scales, float *y) {
    int64_t tiles = (N + tile_rows(K) - 1) / tile_rows(K);
    int nt = omp_in_parallel() ? 1 : omp_get_max_threads();
    if (nt > tiles)
        nt = (int)tiles;
    if (nt <= 1 || (double)M * (double)N * (double)K < CPU_GEMM_PAR_WORK)
        return tile_range(bits, group, M, N, K, x, q, sdt, scales, y, 0, tiles);
    int oom = 0;
#pragma omp parallel num_threads(nt) reduction(| : oom)
    {
        int t = omp_get_thread_num(), n = omp_get_num_threads();
        oom |= tile_range(bits, group, M, N, K, x, q, sdt, scales, y, tiles * t / n,
                          tiles * (t + 1) / n) < 0;
    }
    return oom ? -1 : 0;
}

static bool qgemm_gemv(int64_t M) {
    int form = qenv_get()->form;
    if (form == 1) // in chunks of CPU_QGEMM_GEMV_MAX rows
        return true;
    if (form == 2)
        return false;
    return M <= CPU_QGEMM_GEMV_MAX;
}

bool cpu_quant_gemv_form(int64_t M) { return M <= CPU_QGEMM_GEMV_MAX && qgemm_gemv(M); }

void cpu_qgemv_cols(int bits, int64_t group, int64_t M, int64_t N, int64_t K, const float *x,
                    const void *q, int half_scales, const void *scales, const float *bias, float *y,
                    int64_t j0, int64_t j1, int par) {
    pthread_once(&lut4_once, lut4_fill);
    enum dtype sdt = half_scales ? DT_F16 : DT_F32;
    for (int64_t m0 = 0; m0 < M; m0 += CPU_QGEMM_GEMV_MAX) {
        int64_t rows = M - m0 < CPU_QGEMM_GEMV_MAX ? M - m0 : CPU_QGEMM_GEMV_MAX;
        qgemv(bits, group, rows, N, K, x + m0 * K, q, sdt, scales, y + m0 * N, j0, j1, par);
    }
    if (bias)
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = j0; n < j1; n++)
                y[m * N + n] += bias[n];
}

int cpu_qgemm(int bits, int64_t group, int64_t M, int64_t N, int64_t K, const float *x,
              const void *q, enum dtype sdt, const void *scales, const float *bias, float *y) {
    if (qgemm_gemv(M)) {
        cpu_qgemv_cols(bits, group, M, N, K, x, q, sdt == DT_F16, scales, bias, y, 0, N, 1);
        return 0;
    }
    pthread_once(&lut4_once, lut4_fill);
    if (qgemm_tiles(bits, group, M, N, K, x, q, sdt, scales, y) < 0)
        return -1;
    if (bias)
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++)
                y[m * N + n] += bias[n];
    return 0;
}

// The quantized weight and its scales as ops.def gives them (ia0 bits, ia1
// group, ia2 K): checked, contiguous.
static int quant_operands(cpu_ctx *c, const char *what, const graph_node *n, const tensor *q,
                          const tensor *s, int *bits, int64_t *group, int64_t *K) {
    *bits = (int)n->ia[0];
    *group = n->ia[1];
    *K = n->ia[2];
    if ((*bits != 4 && *bits != 8) || *group < 1 || *K < 1)
        return cpu_fail(c, "%s: bits %d, group %lld, K %lld: bits must be 4 or 8", what, *bits,
                        (long long)*group, (long long)*K);
    if (q->dtype != (*bits == 8 ? DT_I8 : DT_U8) || (s->dtype != DT_F32 && s->dtype != DT_F16))
        return cpu_fail(c, "%s: weights %s with scales %s: want %s with f32 or f16", what,
                        dtype_name(q->dtype), dtype_name(s->dtype), *bits == 8 ? "i8" : "u8");
    if (!tensor_is_contiguous(q) || !tensor_is_contiguous(s))
        return cpu_fail(c, "%s: the quantized weight and scales must be contiguous", what);
    return 0;
}

int cpu_dequant(cpu_ctx *c, const graph_node *n, const tensor *q, const tensor *s, tensor *out) {
    int bits;
    int64_t group, K;
    if (quant_operands(c, "dequant", n, q, s, &bits, &group, &K) < 0)
        return -1;
    if (out->dtype != DT_F32 || !tensor_is_contiguous(out))
        return cpu_fail(c, "dequant: the output must be contiguous f32, got %s",
                        dtype_name(out->dtype));
    cpu_quant_dequantize(bits, group, q->shape[0], K, tensor_data(q), s->dtype, tensor_data(s),
                         tensor_f32(out));
    c->kernels++;
    return 0;
}

int cpu_qlinear(cpu_ctx *c, const graph_node *n, const tensor *x, const tensor *q, const tensor *s,
                const tensor *bias, tensor *out) {
    int bits;
    int64_t group, K;
    if (quant_operands(c, "qlinear", n, q, s, &bits, &group, &K) < 0)
        return -1;
    int64_t k0 = c->kernels, N = q->shape[0], M = tensor_numel(x) / K;
    tensor *x32 = cpu_f32_in(c, "qlinear", x);
    tensor *b32 = x32 && bias ? cpu_f32_in(c, "qlinear", bias) : NULL;
    tensor *o32 = x32 && (!bias || b32) ? cpu_f32_out(c, "qlinear", out) : NULL;
    int rc = -1;
    if (o32) {
        rc = cpu_qgemm(bits, group, M, N, K, tensor_f32(x32), tensor_data(q), s->dtype,
                       tensor_data(s), b32 ? tensor_f32(b32) : NULL, tensor_f32(o32));
        if (rc < 0)
            cpu_fail(c, "qlinear: out of memory for a %lld x %lld weight tile",
                     (long long)tile_rows(K), (long long)K);
    }
    cpu_f32_done(o32, out, rc);
    tensor_free(x32);
    tensor_free(b32);
    c->kernels = k0 + 1;
    return rc;
}
