// Seeded values for parameters, buffers and inputs (model.h).
#include "model.h"

#include "autodiff/autocast.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

model *model_new(graph *g, const char *name, const char *family, int64_t batch) {
    model *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->g = g;
    m->name = strdup(name ? name : "model");
    m->family = strdup(family ? family : "");
    m->batch = batch;
    return m;
}

void model_free(model *m) {
    if (!m)
        return;
    if (m->values)
        for (int i = 0; i < m->g->n; i++)
            tensor_free(m->values[i]);
    free(m->values);
    graph_free(m->g);
    free(m->name);
    free(m->family);
    free(m);
}

// splitmix64 over a counter: stream (seed, node) element i.
static uint64_t mix(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double uniform01(uint64_t key, uint64_t i) {
    return (double)(mix(key ^ mix(i)) >> 11) * (1.0 / 9007199254740992.0);
}

static double normal(uint64_t key, uint64_t i) {
    double u1 = uniform01(key, 2 * i), u2 = uniform01(key, 2 * i + 1);
    if (u1 < 1e-300)
        u1 = 1e-300;
    return sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
}

static void store(tensor *t, int64_t i, double v) {
    void *b = tensor_data(t); // contiguous, fresh
    switch (t->dtype) {
    case DT_F32: ((float *)b)[i] = (float)v; break;
    case DT_F16: ((uint16_t *)b)[i] = dtype_f32_to_f16((float)v); break;
    case DT_BF16: ((uint16_t *)b)[i] = dtype_f32_to_bf16((float)v); break;
    case DT_I32: ((int32_t *)b)[i] = (int32_t)v; break;
    case DT_I64: ((int64_t *)b)[i] = (int64_t)v; break;
    case DT_BOOL: ((uint8_t *)b)[i] = v != 0; break;
    case DT_I8: ((int8_t *)b)[i] = (int8_t)v; break;
    case DT_U8: ((uint8_t *)b)[i] = (uint8_t)v; break;
    default: abort();
    }
}

// Inputs: integers uniform in [ia0, ia1) when ia2 is set (token ids, labels),
// floats N(0, 1).
static double input_value(const graph_node *n, uint64_t key, int64_t i) {
    if (n->ia[2] && !dtype_is_float(n->dtype)) {
        int64_t lo = n->ia[0], hi = n->ia[1];
        int64_t span = hi > lo ? hi - lo : 1;
        return (double)(lo + (int64_t)(mix(key ^ mix((uint64_t)i)) % (uint64_t)span));
    }
    if (!dtype_is_float(n->dtype))
        return (double)(mix(key ^ mix((uint64_t)i)) % 2);
    return normal(key, (uint64_t)i);
}

// Row p, column c of a (P, D) sinusoidal position table (graph.h), in double.
static double sinusoid(const graph_node *n, int64_t p, int64_t c, int64_t D) {
    if (n->ia[0] == INIT_SINUSOID_INTERLEAVED) {
        double ang = (double)p / pow(10000.0, (double)(c - c % 2) / (double)D);
        return c % 2 ? cos(ang) : sin(ang);
    }
    if (n->ia[0] == INIT_SINUSOID_PEGASUS) {
        int64_t s = (D + 1) / 2, k = c < s ? c : c - s;
        double ang = (double)p / pow(10000.0, 2.0 * (double)k / (double)D);
        return c < s ? sin(ang) : cos(ang);
    }
    int64_t h = D / 2;
    if (c >= 2 * h || (n->fa[0] >= 0 && p == (int64_t)n->fa[0]))
        return 0;
    int64_t k = c < h ? c : c - h;
    double ang = (double)p * exp(-(double)k * log(10000.0) / (double)(h - 1));
    return c < h ? sin(ang) : cos(ang);
}

// INIT_REL_INDEX (graph.h): DeBERTa's relative position of distance d as a
// row of its relative table. v2's log buckets as Hugging Face's
// make_log_bucket_position computes them, in float32.
static double rel_index(const graph_node *n, int64_t m) {
    uint64_t a = (uint64_t)n->fa[0];
    int64_t span = (int64_t)(a >> 1 & 0xffff), buckets = (int64_t)(a >> 17 & 0xffff);
    int64_t max_pos = (int64_t)(a >> 33), T = (n->shape[0] + 1) / 2;
    int64_t d = (a & 1) ? m - (T - 1) : T - 1 - m, b = d;
    int64_t mid = buckets / 2, ad = d < 0 ? -d : d;
    if (buckets > 0 && ad > mid) {
        float base = logf((float)((double)(max_pos - 1) / (double)mid));
        float lp = ceilf(logf((float)ad / (float)mid) / base * (float)(mid - 1)) + (float)mid;
        b = d < 0 ? -(int64_t)lp : (int64_t)lp;
    }
    b += span;
    return (double)(b < 0 ? 0 : b > 2 * span - 1 ? 2 * span - 1 : b);
}

int64_t model_relative_bucket(int64_t rel, int64_t buckets, int64_t max_distance,
                              bool bidirectional) {
    int64_t base = 0;
    if (bidirectional) {
        buckets /= 2;
        base = rel > 0 ? buckets : 0;
        rel = rel < 0 ? -rel : rel;
    } else {
        rel = rel < 0 ? -rel : 0;
    }
    int64_t exact = buckets / 2;
    if (rel < exact)
        return base + rel;
    // float32 as the class computes it; the divisor is a Python double
    // rounded to float by the tensor op
    float f = logf((float)rel / (float)exact) / (float)log((double)max_distance / (double)exact) *
              (float)(buckets - exact);
    int64_t large = exact + (int64_t)f;
    return base + (large < buckets - 1 ? large : buckets - 1);
}

static double cubic_near(double x, double a) { return ((a + 2) * x - (a + 3)) * x * x + 1; }
static double cubic_far(double x, double a) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; }

double model_bicubic_weight(int64_t out, int64_t in, int64_t n_out, int64_t n_in) {
    // torch computes the source position and the coefficients in the
    // tensor's type; float here, as for an f32 image
    float scale = (float)n_in / (float)n_out;
    float src = scale * ((float)out + 0.5f) - 0.5f;
    float x0 = floorf(src), t = src - x0;
    const double a = -0.75;
    double w[4] = {cubic_far((double)t + 1, a), cubic_near((double)t, a),
                   cubic_near(1 - (double)t, a), cubic_far(2 - (double)t, a)};
    double v = 0;
    for (int k = 0; k < 4; k++) {
        int64_t j = (int64_t)x0 - 1 + k;
        j = j < 0 ? 0 : j > n_in - 1 ? n_in - 1 : j;
        if (j == in)
            v += w[k];
    }
    return v;
}

// timm's relative_position_index (INIT_REL_POS_2D, graph.h), element i
static double rel_pos_2d(const graph_node *n, int64_t i) {
    int64_t wh = n->ia[1], ww = n->ia[2], cls = n->ia[3], N = n->shape[1];
    int64_t r = i / N - cls, c = i % N - cls, rows = (2 * wh - 1) * (2 * ww - 1);
    if (r < 0 && c < 0)
        return (double)(rows + 2);
    if (r < 0 || c < 0)
        return (double)(rows + (r < 0 ? 0 : 1));
    return (double)((r / ww - c / ww + wh - 1) * (2 * ww - 1) + r % ww - c % ww + ww - 1);
}

// Swin's shift mask (INIT_SHIFT_MASK, graph.h), element i: the region of a
// position along one axis of size n, window w, shift s (timm's slices
// [0, n - w), [n - w, n - s), [n - s, n))
static int64_t shift_region(int64_t p, int64_t n, int64_t w, int64_t s) {
    return p < n - w ? 0 : p < n - s ? 1 : 2;
}

static double shift_mask(const graph_node *n, int64_t i) {
    int64_t W = n->ia[2], wh = n->ia[3], ww = n->ia[4], N = wh * ww;
    int64_t win = i / (N * N), a = (i / N) % N, b = i % N, per_row = W / ww;
    int64_t reg[2];
    for (int k = 0; k < 2; k++) {
        int64_t t = k ? b : a;
        int64_t h = (win / per_row) * wh + t / ww, w = (win % per_row) * ww + t % ww;
        reg[k] = shift_region(h, n->ia[1], wh, n->ia[5]) * 3 + shift_region(w, W, ww, n->ia[6]);
    }
    return reg[0] == reg[1] ? 0 : -100;
}

// XCiT's Fourier position features (INIT_FOURIER_POS, graph.h), element i
static double fourier_pos(const graph_node *n, int64_t i) {
    int64_t h = n->shape[2], w = n->shape[3], hid = n->shape[1] / 2;
    int64_t c = (i / (h * w)) % (2 * hid), row = (i / w) % h, col = i % w;
    bool y = c < hid;
    int64_t k = y ? c : c - hid;
    double e = (double)((y ? row : col) + 1) / ((double)(y ? h : w) + 1e-6) * 2 * M_PI;
    double t = pow(10000.0, 2.0 * (double)(k / 2) / (double)hid);
    return k % 2 ? cos(e / t) : sin(e / t);
}

static void fill(tensor *t, const graph_node *n, uint64_t key) {
    int64_t count = tensor_numel(t);
    int64_t T = n->ndim >= 2 ? n->shape[n->ndim - 2] : 1;
    int64_t S = n->ndim >= 1 ? n->shape[n->ndim - 1] : 1;
    for (int64_t i = 0; i < count; i++) {
        double v = 0;
        int64_t r = i / S, c = i % S;
        if (n->op == OP_FULL) {
            v = n->fa[0];
        } else if (n->op == OP_INPUT) {
            v = input_value(n, key, i);
        } else {
            switch ((enum init_kind)n->ia[0]) {
            case INIT_NORMAL: v = n->fa[0] * normal(key, (uint64_t)i); break;
            case INIT_UNIFORM: v = n->fa[0] * (2 * uniform01(key, (uint64_t)i) - 1); break;
            case INIT_ZEROS: v = 0; break;
            case INIT_ONES: v = 1; break;
            case INIT_CONSTANT: v = n->fa[0]; break;
            case INIT_RELATIVE_BUCKET:
                v = (double)model_relative_bucket(c - r % T, n->ia[1], (int64_t)n->fa[0],
                                                  n->ia[2] != 0);
                break;
            case INIT_CAUSAL_MASK: v = (c <= (r % T) + (S - T)); break;
            case INIT_LEVIT_OFFSET: {
                int64_t res = n->ia[1], st = n->ia[2], qside = (res - 1) / st + 1;
                int64_t dy = (r / qside) * st - c / res, dx = (r % qside) * st - c % res;
                v = (double)((dy < 0 ? -dy : dy) * res + (dx < 0 ? -dx : dx));
                break;
            }
            case INIT_CONVIT_REL: {
                int64_t side = n->ia[1], N = side * side, q = (r % (N * N)) / N, k = r % N;
                double dx = (double)(k % side - q % side), dy = (double)(k / side - q / side);
                v = c == 0 ? dx : c == 1 ? dy : dx * dx + dy * dy;
                break;
            }
            case INIT_BICUBIC: v = model_bicubic_weight(r % T, c, T, S); break;
            case INIT_PIXEL_GRID: v = n->fa[0] != 0 ? (double)(r % T) : (double)c; break;
            case INIT_UNFOLD_TAPS: {
                int64_t K = n->ndim == 4 ? n->shape[2] : 1;
                v = (i % K) == (i / K) % K;
                break;
            }
            case INIT_SINUSOID:
            case INIT_SINUSOID_PEGASUS:
            case INIT_SINUSOID_INTERLEAVED: v = sinusoid(n, r, c, S); break;
            case INIT_WINDOW_MASK: {
                int64_t back = (r % T) + (S - T) - c;
                v = back >= 0 && (double)back < n->fa[0];
                break;
            }
            case INIT_BAND_MASK: {
                int64_t off = c - (r % T) - (S - T);
                v = (double)(off < 0 ? -off : off) <= n->fa[0];
                break;
            }
            case INIT_REL_INDEX: v = rel_index(n, i); break;
            case INIT_REL_POS_2D: v = rel_pos_2d(n, i); break;
            case INIT_SHIFT_MASK: v = shift_mask(n, i); break;
            case INIT_FOURIER_POS: v = fourier_pos(n, i); break;
            case INIT_ARANGE: v = floor((double)i * n->fa[0]); break;
            case INIT_ROPE_COS:
            case INIT_ROPE_SIN: {
                int64_t half = S / 2 > 0 ? S / 2 : 1, k = c % half;
                double ang = (double)(r % T) * pow(n->fa[0], -2.0 * (double)k / (double)S);
                v = n->ia[0] == INIT_ROPE_COS ? cos(ang) : sin(ang);
                break;
            }
            case INIT_REL_SINUSOID: {
                // T here is the table's 2L rows: row r is position L - r
                int64_t half = S / 2 > 0 ? S / 2 : 1, k = c % half;
                double ang = (double)(T / 2 - r) * pow(n->fa[0], -2.0 * (double)k / (double)S);
                v = c < half ? sin(ang) : cos(ang);
                break;
            }
            }
        }
        store(t, i, v);
    }
}

static uint64_t node_key(uint64_t seed, int id, uint64_t step) {
    return mix(mix(seed) ^ mix(((uint64_t)id << 20) ^ step));
}

// A source's stream is keyed by its node id less the casts autocast
// inserted before it, so that a model draws the same parameters and inputs
// in fp32 and in mixed precision (autocast.h copies the nodes in order,
// adding casts). A cast it cached (autocast_cache_params, autocast_copy)
// counts as the cast it was.
static bool autocast_cast(const graph_node *n) {
    return n->op == OP_CAST ? n->ia[1] != 0 : autocast_copy(n);
}

// from's source named as n, of its shape and dtype, or -1.
static int same_source(const model *from, const graph_node *n) {
    const graph *g = from->g;
    if (!n->name || (n->op != OP_PARAM && n->op != OP_BUFFER))
        return -1;
    for (int i = 0; i < g->n; i++) {
        const graph_node *f = &g->nodes[i];
        if (f->op == n->op && f->name && !strcmp(f->name, n->name) && f->dtype == n->dtype &&
            f->ndim == n->ndim && !memcmp(f->shape, n->shape, (size_t)n->ndim * sizeof *n->shape))
            return from->values && from->values[i] ? i : -1;
    }
    return -1;
}

static int init_values(model *m, uint64_t seed, const model *from) {
    graph *g = m->g;
    if (!m->values) {
        m->values = calloc((size_t)g->n, sizeof *m->values);
        if (!m->values)
            return -1;
    }
    int casts = 0;
    for (int i = 0; i < g->n; i++) {
        const graph_node *n = &g->nodes[i];
        casts += autocast_cast(n);
        if (op_kind(n->op) != OPK_SOURCE)
            continue;
        tensor_free(m->values[i]);
        int j = from ? same_source(from, n) : -1;
        if (j >= 0) {
            if (!(m->values[i] = tensor_view(from->values[j])))
                return -1;
            continue;
        }
        m->values[i] = tensor_new_empty(n->dtype, n->ndim, n->shape);
        if (!m->values[i])
            return -1;
        fill(m->values[i], n, node_key(seed, i - casts, 0));
    }
    return 0;
}

int model_init_values(model *m, uint64_t seed) { return init_values(m, seed, NULL); }

int model_init_values_from(model *m, uint64_t seed, const model *from) {
    return init_values(m, seed, from);
}

int model_init_inputs(model *m, uint64_t seed, uint64_t step) {
    int casts = 0;
    for (int i = 0; i < m->g->n; i++) {
        const graph_node *n = &m->g->nodes[i];
        casts += autocast_cast(n);
        if (n->op != OP_INPUT || !m->values || !m->values[i])
            continue;
        fill(m->values[i], n, node_key(seed, i - casts, step));
    }
    return 0;
}
