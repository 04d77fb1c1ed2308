// DEQUANT and QLINEAR on the GPU (cuda_rt.h): the launches of
// cuda_quant.cuh's kernels, a warp per output column for decode-sized M
// (int4 8 values a lane a load where K and the group allow) and 16x16
// tiles beyond.
#include "cuda_pointwise.cuh"
#include "cuda_quant.cuh"

// The op's attributes (ia0 bits, ia1 group, ia2 K) and operands checked
// into a; -1 with c->err naming the op.
static int quant_args(cuda_ctx *c, const char *what, const graph_node *n, const tensor *q,
                      const tensor *s, tq_args *a) {
    memset(a, 0, sizeof *a);
    a->bits = (int)n->ia[0];
    a->group = n->ia[1];
    a->K = n->ia[2];
    a->N = q->shape[0];
    if ((a->bits != 4 && a->bits != 8) || a->group < 1 || a->K < 1 ||
        q->dtype != (a->bits == 8 ? DT_I8 : DT_U8) || (s->dtype != DT_F32 && s->dtype != DT_F16)) {
        snprintf(c->err, sizeof c->err, "%s: int%d weights %s with scales %s are not supported",
                 what, a->bits, dtype_name(q->dtype), dtype_name(s->dtype));
        return -1;
    }
    if (!tensor_is_contiguous(q) || !tensor_is_contiguous(s)) {
        snprintf(c->err, sizeof c->err, "%s: the quantized weight and scales must be contiguous",
                 what);
        return -1;
    }
    a->q = (const uint8_t *)tensor_data(q);
    a->s = tensor_data(s);
    a->s_half = s->dtype == DT_F16;
    return 0;
}

int cuda_dequant(cuda_ctx *c, const graph_node *n, const tensor *q, const tensor *s, tensor *out) {
    tq_args a;
    if (quant_args(c, "dequant", n, q, s, &a) < 0)
        return -1;
    if (out->dtype != DT_F32 || !tensor_is_contiguous(out)) {
        snprintf(c->err, sizeof c->err, "dequant: the output must be contiguous f32");
        return -1;
    }
    a.y = tensor_data(out);
    int64_t total = a.N * a.K, blocks = (total + 255) / 256;
    int64_t cap = (int64_t)(c->sm_count > 0 ? c->sm_count : 1) * 32;
    tq_dequant<<<(unsigned)(blocks < cap ? blocks : cap), 256, 0, c->stream>>>(a);
    return CUDA_LAUNCHED(c, "tq_dequant<<<>>>");
}

int cuda_qlinear(cuda_ctx *c, const graph_node *n, const tensor *x, const tensor *q,
                 const tensor *s, const tensor *bias, tensor *out) {
    tq_args a;
    if (quant_args(c, "qlinear", n, q, s, &a) < 0)
        return -1;
    bool ok = (x->dtype == DT_F32 || x->dtype == DT_F16) && x->dtype == out->dtype &&
              (!bias || bias->dtype == DT_F32 || bias->dtype == DT_F16) &&
              tensor_is_contiguous(out);
    if (!ok) {
        snprintf(c->err, sizeof c->err,
                 "qlinear: activations %s into %s: want f32 or f16, both the same, contiguous",
                 dtype_name(x->dtype), dtype_name(out->dtype));
        return -1;
    }
    tensor *xc = cuda_contiguous(c, x);
    tensor *bc = xc && bias ? cuda_contiguous(c, bias) : NULL;
    int rc = -1;
    if (xc && (!bias || bc)) {
        a.x = tensor_data(xc);
        a.bias = bc ? tensor_data(bc) : NULL;
        a.y = tensor_data(out);
        a.M = tensor_numel(x) / a.K;
        a.x_half = a.y_half = x->dtype == DT_F16;
        a.b_half = bc && bc->dtype == DT_F16;
        if (a.M <= TQ_GEMV_M && tq_gemv4_fits(a)) {
            tq_gemv4<<<(unsigned)((a.N + 7) / 8), 256, 0, c->stream>>>(a);
            rc = CUDA_LAUNCHED(c, "tq_gemv4<<<>>>");
        } else if (a.M <= TQ_GEMV_M) {
            tq_gemv<<<(unsigned)((a.N + 7) / 8), 256, 0, c->stream>>>(a);
            rc = CUDA_LAUNCHED(c, "tq_gemv<<<>>>");
        } else {
            dim3 grid((unsigned)((a.N + TQ_T - 1) / TQ_T), (unsigned)((a.M + TQ_T - 1) / TQ_T));
            tq_tiled<<<grid, dim3(TQ_T, TQ_T), 0, c->stream>>>(a);
            rc = CUDA_LAUNCHED(c, "tq_tiled<<<>>>");
        }
    }
    cuda_tensor_free(c, xc);
    cuda_tensor_free(c, bc);
    return rc;
}
