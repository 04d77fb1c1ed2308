// conv2d's two gradients as plain gathers, for the shapes cuDNN's
// heuristics rank no algorithm for (cuda_dnn.c): strided layouts such as
// channels-last views, some dilated and strided filters. A thread an
// output element sums its terms in f32 in a fixed order, so the result is
// deterministic; operands of any strides, f32 or f16. Slower than cuDNN,
// and only taken where cuDNN has nothing.
#include "cuda_pointwise.cuh"

struct cd_geom {
    int64_t N, C, H, W, O, kh, kw, Ho, Wo;
    int64_t sh, sw, ph, pw, dh, dw, g;
    int64_t sx[4], sk[4], sy[4], so[4]; // strides of x, the weight, dy, the output
};

// dx[n, c, h, w] = sum over the group's o and the taps (i, j) that land on
// (h, w): ho sh = h + ph - i dh, wo sw = w + pw - j dw
template <typename E> struct cd_dx_f {
    cd_geom g;
    const E *dy, *wt;
    E *out;
    __device__ void operator()(int64_t e) const {
        int64_t w = e % g.W, h = (e / g.W) % g.H, c = (e / (g.W * g.H)) % g.C,
                n = e / (g.W * g.H * g.C);
        int64_t cg = g.C / g.g, og = g.O / g.g, grp = c / cg, cl = c % cg;
        float s = 0;
        for (int64_t o = grp * og; o < (grp + 1) * og; o++)
            for (int64_t i = 0; i < g.kh; i++) {
                int64_t th = h + g.ph - i * g.dh;
                if (th < 0 || th % g.sh || th / g.sh >= g.Ho)
                    continue;
                int64_t ho = th / g.sh;
                for (int64_t j = 0; j < g.kw; j++) {
                    int64_t tw = w + g.pw - j * g.dw;
                    if (tw < 0 || tw % g.sw || tw / g.sw >= g.Wo)
                        continue;
                    int64_t wo = tw / g.sw;
                    s += ldf(dy, n * g.sy[0] + o * g.sy[1] + ho * g.sy[2] + wo * g.sy[3]) *
                         ldf(wt, o * g.sk[0] + cl * g.sk[1] + i * g.sk[2] + j * g.sk[3]);
                }
            }
        stf(out, n * g.so[0] + c * g.so[1] + h * g.so[2] + w * g.so[3], s);
    }
};

// dw[o, cl, i, j] = sum over n, ho, wo of dy[n, o, ho, wo] x[n, c, h, w]
// at h = ho sh - ph + i dh, w = wo sw - pw + j dw, c = o's group's cl
template <typename E> struct cd_dw_f {
    cd_geom g;
    const E *dy, *x;
    E *out;
    __device__ void operator()(int64_t e) const {
        int64_t cg = g.C / g.g, og = g.O / g.g;
        int64_t j = e % g.kw, i = (e / g.kw) % g.kh, cl = (e / (g.kw * g.kh)) % cg,
                o = e / (g.kw * g.kh * cg);
        int64_t c = (o / og) * cg + cl;
        float s = 0;
        for (int64_t n = 0; n < g.N; n++)
            for (int64_t ho = 0; ho < g.Ho; ho++) {
                int64_t h = ho * g.sh - g.ph + i * g.dh;
                if (h < 0 || h >= g.H)
                    continue;
                for (int64_t wo = 0; wo < g.Wo; wo++) {
                    int64_t w = wo * g.sw - g.pw + j * g.dw;
                    if (w < 0 || w >= g.W)
                        continue;
                    s += ldf(dy, n * g.sy[0] + o * g.sy[1] + ho * g.sy[2] + wo * g.sy[3]) *
                         ldf(x, n * g.sx[0] + c * g.sx[1] + h * g.sx[2] + w * g.sx[3]);
                }
            }
        stf(out, o * g.so[0] + cl * g.so[1] + i * g.so[2] + j * g.so[3], s);
    }
};

template <typename E>
static int direct_typed(cuda_ctx *c, bool data, const cd_geom &g, const tensor *dy, const tensor *b,
                        tensor *out) {
    const E *pdy = (const E *)tensor_data(dy), *pb = (const E *)tensor_data(b);
    E *po = (E *)tensor_data(out);
    if (data)
        return pw_launch(c, tensor_numel(out), cd_dx_f<E>{g, pdy, pb, po},
                         "conv2d_grad_input_direct<<<>>>");
    return pw_launch(c, tensor_numel(out), cd_dw_f<E>{g, pdy, pb, po},
                     "conv2d_grad_weight_direct<<<>>>");
}

int cuda_conv2d_grad_direct(cuda_ctx *c, const graph_node *n, const tensor *dy, const tensor *b,
                            tensor *out) {
    bool data = n->op == OP_CONV2D_GRAD_INPUT;
    const tensor *x = data ? out : b, *w = data ? b : out;
    cd_geom g;
    memset(&g, 0, sizeof g);
    g.N = x->shape[0], g.C = x->shape[1], g.H = x->shape[2], g.W = x->shape[3];
    g.O = w->shape[0], g.kh = w->shape[2], g.kw = w->shape[3];
    g.Ho = dy->shape[2], g.Wo = dy->shape[3];
    g.sh = n->ia[0], g.sw = n->ia[1], g.ph = n->ia[2], g.pw = n->ia[3];
    g.dh = n->ia[4], g.dw = n->ia[5], g.g = n->ia[6] > 0 ? n->ia[6] : 1;
    if (g.sh < 1 || g.sw < 1 || g.dh < 1 || g.dw < 1) {
        snprintf(c->err, sizeof c->err, "%s: stride and dilation must be positive", op_name(n->op));
        return -1;
    }
    for (int d = 0; d < 4; d++) {
        g.sx[d] = x->stride[d];
        g.sk[d] = w->stride[d];
        g.sy[d] = dy->stride[d];
        g.so[d] = out->stride[d];
    }
    return out->dtype == DT_F32 ? direct_typed<float>(c, data, g, dy, b, out)
                                : direct_typed<uint16_t>(c, data, g, dy, b, out);
}
