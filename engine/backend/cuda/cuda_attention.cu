// Fused attention on the GPU (cuda_rt.h cuda_attention): the host side of
// the kernel in cuda_attention.cuh, which NVRTC also compiles in the tests.
#include "cuda_pointwise.cuh"

#include "cuda_attention.cuh"

void tc_att_strides(const tensor *t, long long *st) {
    for (int i = 0; i < 4; i++)
        st[i] = 0;
    for (int i = 0; i < t->ndim; i++) // right-aligned: a bias may have fewer dims
        st[4 - t->ndim + i] = t->shape[i] == 1 ? 0 : t->stride[i];
}

int tc_att_fill(cuda_ctx *c, const char *what, const graph_node *n, const tensor *q,
                const tensor *k, const tensor *v, const tensor *bias, const tensor *len,
                tc_att_args *a) {
    if (bias && bias->dtype != DT_F32 && bias->dtype != DT_F16) {
        snprintf(c->err, sizeof c->err, "%s: the bias must be f32 or f16, got %s", what,
                 dtype_name(bias->dtype));
        return -1;
    }
    *a = tc_att_args{};
    a->B = q->shape[0], a->H = q->shape[1], a->T = q->shape[2], a->D = q->shape[3];
    a->KVH = k->shape[1], a->S = k->shape[2], a->Dv = v->shape[3];
    if (a->D > TC_ATT_DMAX || a->Dv > TC_ATT_DMAX) {
        snprintf(c->err, sizeof c->err, "%s: head dims %lld, %lld: at most %d on the GPU", what,
                 a->D, a->Dv, TC_ATT_DMAX);
        return -1;
    }
    a->q = tensor_data(q), a->k = tensor_data(k), a->v = tensor_data(v);
    tc_att_strides(q, a->sq);
    tc_att_strides(k, a->sk);
    tc_att_strides(v, a->sv);
    if (bias) {
        a->bias = tensor_data(bias);
        a->bias_f16 = bias->dtype == DT_F16;
        tc_att_strides(bias, a->sb);
    }
    if (len) {
        a->len = tensor_data(len);
        a->len_i64 = len->dtype == DT_I64;
        a->len_stride = len->ndim && len->shape[0] > 1 ? len->stride[0] : 0;
    }
    a->causal = n->ia[0] != 0;
    a->scale = (float)n->fa[0];
    return 0;
}

int cuda_attention(cuda_ctx *c, const graph_node *n, const tensor *q, const tensor *k,
                   const tensor *v, const tensor *bias, const tensor *len, tensor *y) {
    if ((q->dtype != DT_F32 && q->dtype != DT_F16) || k->dtype != q->dtype ||
        v->dtype != q->dtype || y->dtype != q->dtype) {
        snprintf(c->err, sizeof c->err, "attention: q, k, v must be all f32 or all f16, got %s",
                 dtype_name(q->dtype));
        return -1;
    }
    tc_att_args a;
    if (tc_att_fill(c, "attention", n, q, k, v, bias, len, &a) < 0)
        return -1;
    a.y = tensor_data(y);
    // keys per tile: as many as 48 KiB of f32 rows of K and V hold, at most 32
    long long row = (a.D + a.Dv) * (long long)sizeof(float);
    a.tk = 32;
    while (a.tk > 1 && a.tk * row > 48 * 1024)
        a.tk /= 2;
    if (a.B * a.H * a.T == 0)
        return 0;
    dim3 grid((unsigned)((a.T + TC_ATT_ROWS - 1) / TC_ATT_ROWS), (unsigned)(a.B * a.H));
    size_t smem = (size_t)(a.tk * row);
    if (q->dtype == DT_F16)
        tc_attention_f16<<<grid, TC_ATT_ROWS * 32, smem, c->stream>>>(a);
    else
        tc_attention_f32<<<grid, TC_ATT_ROWS * 32, smem, c->stream>>>(a);
    return CUDA_LAUNCHED(c, "attention<<<>>>");
}
