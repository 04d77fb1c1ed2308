// Fused attention's backward on the GPU (cuda_rt.h cuda_attention_grad): the
// host side of the three kernels in cuda_attention_grad.cuh.
#include "cuda_pointwise.cuh"

#include "cuda_attention_grad.cuh"

int cuda_attention_grad(cuda_ctx *c, const graph_node *n, const tensor *dy, const tensor *q,
                        const tensor *k, const tensor *v, const tensor *y, const tensor *bias,
                        const tensor *len, tensor *out) {
    const tensor *in[6] = {dy, q, k, v, y, out};
    for (int i = 0; i < 6; i++)
        if ((q->dtype != DT_F32 && q->dtype != DT_F16) || in[i]->dtype != q->dtype) {
            snprintf(c->err, sizeof c->err,
                     "attention_grad: dy, q, k, v, y and the output must be all f32 or all f16, "
                     "got %s",
                     dtype_name(in[i]->dtype));
            return -1;
        }
    tc_attg_args g = {};
    tc_att_args &a = g.f;
    if (tc_att_fill(c, "attention_grad", n, q, k, v, bias, len, &a) < 0)
        return -1;
    g.y = tensor_data(y), g.dy = tensor_data(dy);
    tc_att_strides(y, g.sy);
    tc_att_strides(dy, g.sdy);
    long long rows = a.B * a.H * a.T, nq = rows * a.D, nk = a.B * a.KVH * a.S * a.D;
    size_t es = dtype_size(q->dtype);
    g.dq = tensor_data(out);
    g.dk = (char *)g.dq + nq * (long long)es;
    g.dv = (char *)g.dk + nk * (long long)es;
    if (tensor_numel(out) == 0)
        return 0;
    float *ws = (float *)cuda_scratch_get(c, (size_t)(2 * rows + 1) * sizeof(float));
    if (!ws)
        return -1;
    g.lse = ws, g.dd = ws + rows;
    size_t smem = (size_t)(TC_ATT_ROWS * (a.D + a.Dv)) * sizeof(float);
    dim3 qgrid((unsigned)((a.T + TC_ATT_ROWS - 1) / TC_ATT_ROWS), (unsigned)(a.B * a.H));
    dim3 kgrid((unsigned)((a.S + TC_ATT_ROWS - 1) / TC_ATT_ROWS), (unsigned)(a.B * a.KVH));
    // a kernel whose grid is empty is not launched: with T = 0 the key pass
    // alone writes dk and dv (zeros), with S = 0 the query passes alone
    bool f16 = q->dtype == DT_F16, rows_on = rows > 0, keys_on = a.S > 0;
    if (rows_on)
        (f16 ? tc_attg_rows_f16 : tc_attg_rows_f32)<<<qgrid, TC_ATT_ROWS * 32, 0, c->stream>>>(g);
    if (keys_on)
        (f16 ? tc_attg_keys_f16
             : tc_attg_keys_f32)<<<kgrid, TC_ATT_ROWS * 32, smem, c->stream>>>(g);
    if (rows_on)
        (f16 ? tc_attg_queries_f16
             : tc_attg_queries_f32)<<<qgrid, TC_ATT_ROWS * 32, smem, c->stream>>>(g);
    int rc = CUDA_LAUNCHED(c, "attention_grad<<<>>>");
    cuda_scratch_put(c, ws);
    return rc;
}
