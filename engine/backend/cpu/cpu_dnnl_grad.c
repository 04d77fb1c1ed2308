// Backward kernels of convolution and pooling for training (cpu_kernels.h).
// Convolution's dx and dW are oneDNN 2.6's backward-data and
// backward-weights primitives, cached beside the forward ones
// (cpu_dnnl_internal.h); oneDNN makes them from a forward primitive
// descriptor of the same shapes, its hint. Pooling's dx is a plain OpenMP
// loop: oneDNN's max-pool backward wants the forward's workspace, which the
// eager forward does not keep, and the loop is a few lines. Tensors are
// plain NCHW / OIHW to the caller, as in cpu_dnnl.c. f16 (AMP: dy and the operand are
// both f16) goes through f32 scratch as the forward convolutions do
// (cpu_f32_in, cpu_kernels.h): oneDNN has no f16 on this CPU, and the pooling
// loop sums in f32.
#include "cpu_dnnl_internal.h"
#include "cpu_iter.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// Key shapes: x (N, C, H, W) the forward input, w (O, C/g, kh, kw), y (N, O,
// OH, OW) the forward output. Grad-input's arguments are dy, w -> dx;
// grad-weight's x, dy -> dw.
static dnnl_entry *conv_grad_new(cpu_ctx *c, const dnnl_key *k) {
    bool data = k->op == OP_CONV2D_GRAD_INPUT;
    dnnl_engine_t eng = cpu_dnnl_engine();
    dnnl_primitive_desc_t hint = NULL, pd = NULL;
    dnnl_entry *e = calloc(1, sizeof *e);
    if (!e) {
        cpu_fail(c, "%s: out of memory for a oneDNN primitive", op_name(k->op));
        return NULL;
    }
    e->key = *k;
    const int64_t *ia = k->ia;
    int64_t g = ia[6], O = k->y[1], C = k->x[1];
    // plain tensors in the caller's layout (md_*), and what the primitive is
    // asked for (pmd_*): the forward's rule, cpu_dnnl_conv_blocked
    dnnl_memory_desc_t md_x, md_w, md_y, pmd_x, pmd_w, pmd_y;
    dnnl_dims_t dx = {k->x[0], k->x[1], k->x[2], k->x[3]};
    dnnl_dims_t dy = {k->y[0], k->y[1], k->y[2], k->y[3]};
    // oneDNN counts dilation from 0
    dnnl_dims_t strides = {ia[0], ia[1]}, pad = {ia[2], ia[3]}, dil = {ia[4] - 1, ia[5] - 1};
    bool blocked = cpu_dnnl_conv_blocked(k);
    dnnl_format_tag_t act = blocked ? dnnl_acdb : dnnl_abcd;
    DNNL_TRY(c->err, sizeof c->err, dnnl_memory_desc_init_by_tag,
             (&md_x, 4, dx, dnnl_f32, k->xcl ? dnnl_acdb : dnnl_abcd));
    DNNL_TRY(c->err, sizeof c->err, dnnl_memory_desc_init_by_tag,
             (&md_y, 4, dy, dnnl_f32, k->ycl ? dnnl_acdb : dnnl_abcd));
    DNNL_TRY(c->err, sizeof c->err, dnnl_memory_desc_init_by_tag, (&pmd_x, 4, dx, dnnl_f32, act));
    DNNL_TRY(c->err, sizeof c->err, dnnl_memory_desc_init_by_tag, (&pmd_y, 4, dy, dnnl_f32, act));
    if (g == 1) {
        dnnl_dims_t dw = {O, C, k->w[2], k->w[3]};
        DNNL_TRY(c->err, sizeof c->err, dnnl_memory_desc_init_by_tag,
                 (&md_w, 4, dw, dnnl_f32, dnnl_oihw));
        DNNL_TRY(c->err, sizeof c->err, dnnl_memory_desc_init_by_tag,
                 (&pmd_w, 4, dw, dnnl_f32, blocked ? dnnl_format_tag_any : dnnl_oihw));
    } else {
        dnnl_dims_t dw = {g, O / g, C / g, k->w[2], k->w[3]};
        DNNL_TRY(c->err, sizeof c->err, dnnl_memory_desc_init_by_tag,
                 (&md_w, 5, dw, dnnl_f32, dnnl_goihw));
        DNNL_TRY(c->err, sizeof c->err, dnnl_memory_desc_init_by_tag,
                 (&pmd_w, 5, dw, dnnl_f32, blocked ? dnnl_format_tag_any : dnnl_goihw));
    }
    dnnl_convolution_desc_t fd, bd;
    DNNL_TRY(c->err, sizeof c->err, dnnl_dilated_convolution_forward_desc_init,
             (&fd, dnnl_forward_training, dnnl_convolution_direct, &pmd_x, &pmd_w, NULL, &pmd_y,
              strides, dil, pad, pad));
    DNNL_TRY(c->err, sizeof c->err, dnnl_primitive_desc_create, (&hint, &fd, NULL, eng, NULL));
    int arg[3];
    const dnnl_memory_desc_t *md[3];
    dnnl_query_t q[3];
    if (data) {
        DNNL_TRY(c->err, sizeof c->err, dnnl_dilated_convolution_backward_data_desc_init,
                 (&bd, dnnl_convolution_direct, &pmd_x, &pmd_w, &pmd_y, strides, dil, pad, pad));
        arg[0] = DNNL_ARG_DIFF_DST, md[0] = &md_y, q[0] = dnnl_query_diff_dst_md;
        arg[1] = DNNL_ARG_WEIGHTS, md[1] = &md_w, q[1] = dnnl_query_weights_md;
        arg[2] = DNNL_ARG_DIFF_SRC, md[2] = &md_x, q[2] = dnnl_query_diff_src_md;
    } else {
        DNNL_TRY(
            c->err, sizeof c->err, dnnl_dilated_convolution_backward_weights_desc_init,
            (&bd, dnnl_convolution_direct, &pmd_x, &pmd_w, NULL, &pmd_y, strides, dil, pad, pad));
        arg[0] = DNNL_ARG_SRC, md[0] = &md_x, q[0] = dnnl_query_src_md;
        arg[1] = DNNL_ARG_DIFF_DST, md[1] = &md_y, q[1] = dnnl_query_diff_dst_md;
        arg[2] = DNNL_ARG_DIFF_WEIGHTS, md[2] = &md_w, q[2] = dnnl_query_diff_weights_md;
    }
    // oneDNN 2.6's jit_1x1 backward-weights kernel writes past a buffer
    // when the 1x1 convolution is strided (its reduce-to-unit-stride copy):
    // heap corruption and wrong dW, more often under load. The next
    // implementation in oneDNN's list takes those shapes.
    bool strided_1x1 = k->w[2] == 1 && k->w[3] == 1 && (ia[0] > 1 || ia[1] > 1);
    if (cpu_dnnl_pd_create(c, &pd, &bd, NULL, hint, !data && strided_1x1 ? "jit_1x1" : NULL) < 0)
        goto fail;
    for (int i = 0; i < 3; i++)
        if (cpu_dnnl_arg(c, e, arg[i], md[i], dnnl_primitive_desc_query_md(pd, q[i], 0), i == 2) <
            0)
            goto fail;
    cpu_dnnl_log_impl(k, pd);
    DNNL_TRY(c->err, sizeof c->err, dnnl_primitive_create, (&e->prim, pd));
    dnnl_primitive_desc_destroy(pd);
    dnnl_primitive_desc_destroy(hint);
    return e;
fail:;
    char why[sizeof c->err];
    memcpy(why, c->err, sizeof why);
    cpu_fail(c, "%s: %s", op_name(k->op), why);
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (hint)
        dnnl_primitive_desc_destroy(hint);
    cpu_dnnl_entry_free(e);
    return NULL;
}

// f32: the activations as they lie, plain or channels-last (the compiled
// mode's layout), the weight or its gradient plain.
static int conv_grad_f32(cpu_ctx *c, const graph_node *n, dnnl_key *k, const tensor *a,
                         const tensor *b, tensor *out) {
    bool data = n->op == OP_CONV2D_GRAD_INPUT;
    int acl = 0, bcl = 0, ocl = 0;
    if (!tensor_is_contiguous(out) && !(ocl = cpu_channels_last(out)))
        return cpu_fail(c, "%s: the output must be contiguous or channels-last", op_name(n->op));
    tensor *ac = cpu_dnnl_operand(c, a, &acl);
    tensor *bc = !ac ? NULL : data ? cpu_contiguous(c, b) : cpu_dnnl_operand(c, b, &bcl);
    int rc = -1;
    if (bc) {
        // data: dy (y-shaped), w -> dx (x-shaped); weights: x, dy -> dw
        k->xcl = data ? ocl : acl;
        k->ycl = data ? acl : bcl;
        dnnl_entry *e = cpu_dnnl_lookup(c, k, conv_grad_new);
        if (e && (rc = cpu_dnnl_execute(
                      c, e, (void *[]){tensor_data(ac), tensor_data(bc), tensor_data(out)})) < 0) {
            char why[sizeof c->err];
            memcpy(why, c->err, sizeof why);
            cpu_fail(c, "%s: %s", op_name(n->op), why);
        }
    }
    tensor_free(ac);
    tensor_free(bc);
    return rc;
}

// x (N, C, H, W), w (O, C/g, kh, kw), y (N, O, OH, OW): the forward's
// shapes, one of them `out`; a and b the inputs in the primitive's order.
static int conv_grad(cpu_ctx *c, const graph_node *n, const tensor *x, const tensor *w,
                     const tensor *y, const tensor *a, const tensor *b, tensor *out) {
    if (cpu_need_same_float(c, op_name(n->op), 3, (const tensor *[]){a, b, out}) < 0)
        return -1;
    if (x->ndim != 4 || w->ndim != 4 || y->ndim != 4)
        return cpu_fail(c, "%s: needs 4-d input, weight and output, got %d, %d and %d dims",
                        op_name(n->op), x->ndim, w->ndim, y->ndim);
    int64_t g = n->ia[6], C = x->shape[1], O = y->shape[1];
    if (g < 1 || C % g || O % g || w->shape[0] != O || w->shape[1] * g != C ||
        x->shape[0] != y->shape[0])
        return cpu_fail(c,
                        "%s: shapes do not fit a conv2d: x (%lld, %lld, ...), weight (%lld, "
                        "%lld, ...), dy (%lld, %lld, ...), groups %lld",
                        op_name(n->op), (long long)x->shape[0], (long long)C,
                        (long long)w->shape[0], (long long)w->shape[1], (long long)y->shape[0],
                        (long long)O, (long long)g);
    dnnl_key k;
    cpu_dnnl_key_init(&k, n, x, w, y);
    if (a->dtype == DT_F32 && b->dtype == DT_F32 && out->dtype == DT_F32)
        return conv_grad_f32(c, n, &k, a, b, out);
    dnnl_entry *e = cpu_dnnl_lookup(c, &k, conv_grad_new);
    if (!e)
        return -1;
    // f16: one kernel, its conversions included (cpu_kernels.h)
    int64_t k0 = c->kernels;
    bool f16 = dtype_is_half(out->dtype);
    tensor *ac = cpu_f32_in(c, op_name(n->op), a);
    tensor *bc = ac ? cpu_f32_in(c, op_name(n->op), b) : NULL;
    tensor *oc = bc ? cpu_f32_out(c, op_name(n->op), out) : NULL;
    int rc = -1;
    if (oc) {
        rc = cpu_dnnl_execute(c, e, (void *[]){tensor_data(ac), tensor_data(bc), tensor_data(oc)});
        if (rc < 0) {
            char why[sizeof c->err];
            memcpy(why, c->err, sizeof why);
            cpu_fail(c, "%s: %s", op_name(n->op), why);
        }
    }
    cpu_f32_done(oc, out, rc);
    tensor_free(ac);
    tensor_free(bc);
    if (f16)
        c->kernels = k0 + (rc == 0);
    return rc;
}

int cpu_conv2d_grad_input(cpu_ctx *c, const graph_node *n, const tensor *dy, const tensor *w,
                          tensor *out) {
    return conv_grad(c, n, out, w, dy, dy, w, out);
}

int cpu_conv2d_grad_weight(cpu_ctx *c, const graph_node *n, const tensor *dy, const tensor *x,
                           tensor *out) {
    return conv_grad(c, n, x, out, dy, x, dy, out);
}

// dy (N, C, OH, OW), x (N, C, H, W) or NULL, out (N, C, H, W). Each (n, c)
// plane is one thread's, so the += never race, and a plane's windows are
// visited in order, so the sums are the same bits at any thread count.
int cpu_pool2d_grad(cpu_ctx *c, const graph_node *n, const tensor *dy, const tensor *x,
                    tensor *out) {
    bool max = n->op == OP_MAX_POOL2D_GRAD;
    if (max && !x)
        return cpu_fail(c, "%s: needs the forward input x", op_name(n->op));
    if (cpu_need_same_float(c, op_name(n->op), 3, (const tensor *[]){dy, out, max ? x : NULL}) < 0)
        return -1;
    if (dy->ndim != 4 || out->ndim != 4 || (max && x->ndim != 4))
        return cpu_fail(c, "%s: needs 4-d (N, C, H, W) tensors", op_name(n->op));
    for (int i = 0; i < 4; i++)
        if ((i < 2 && dy->shape[i] != out->shape[i]) || (max && x->shape[i] != out->shape[i]))
            return cpu_fail(c, "%s: dy, x and dx disagree in dim %d", op_name(n->op), i);
    const int64_t *ia = n->ia;
    int64_t sh = ia[0], sw = ia[1], ph = ia[2], pw = ia[3], kh = ia[4], kw = ia[5];
    if (sh < 1 || sw < 1 || kh < 1 || kw < 1)
        return cpu_fail(c, "%s: stride and kernel must be >= 1, got %lldx%lld and %lldx%lld",
                        op_name(n->op), (long long)sh, (long long)sw, (long long)kh, (long long)kw);
    // f16: one kernel, its conversions included (cpu_kernels.h)
    int64_t k0 = c->kernels;
    const char *what = op_name(n->op);
    tensor *dyc = cpu_f32_in(c, what, dy), *xc = dyc && max ? cpu_f32_in(c, what, x) : NULL;
    tensor *oc = dyc && (!max || xc) ? cpu_f32_out(c, what, out) : NULL;
    if (!oc) {
        tensor_free(dyc);
        tensor_free(xc);
        return -1;
    }
    int64_t P = out->shape[0] * out->shape[1], H = out->shape[2], W = out->shape[3];
    int64_t OH = dy->shape[2], OW = dy->shape[3];
    const float *g = tensor_f32(dyc), *xs = max ? tensor_f32(xc) : NULL;
    float *dx = tensor_f32(oc);
#pragma omp parallel for if (P * H * W >= CPU_PAR_MIN) schedule(static)
    for (int64_t p = 0; p < P; p++) {
        float *d = dx + p * H * W;
        const float *gp = g + p * OH * OW, *xp = max ? xs + p * H * W : NULL;
        memset(d, 0, (size_t)(H * W) * sizeof *d);
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                int64_t h0 = oh * sh - ph, w0 = ow * sw - pw;
                int64_t ha = h0 > 0 ? h0 : 0, hb = h0 + kh < H ? h0 + kh : H;
                int64_t wa = w0 > 0 ? w0 : 0, wb = w0 + kw < W ? w0 + kw : W;
                if (ha >= hb || wa >= wb)
                    continue;
                float v = gp[oh * OW + ow];
                if (max) {
                    // PyTorch's rule: a later value wins only when greater
                    // (or NaN), so ties go to the first in row-major order
                    int64_t best = ha * W + wa;
                    float m = -INFINITY;
                    for (int64_t h = ha; h < hb; h++)
                        for (int64_t w = wa; w < wb; w++) {
                            float xv = xp[h * W + w];
                            if (xv > m || isnan(xv))
                                m = xv, best = h * W + w;
                        }
                    d[best] += v;
                } else {
                    // as PyTorch: dy / the window's cells up to the far
                    // padding, or only those in the input (ia7)
                    int64_t h1 = h0 + kh < H + ph ? h0 + kh : H + ph;
                    int64_t w1 = w0 + kw < W + pw ? w0 + kw : W + pw;
                    int64_t cells = ia[7] ? (hb - ha) * (wb - wa) : (h1 - h0) * (w1 - w0);
                    float s = v / (float)cells;
                    for (int64_t h = ha; h < hb; h++)
                        for (int64_t w = wa; w < wb; w++)
                            d[h * W + w] += s;
                }
            }
    }
    c->kernels = dtype_is_half(out->dtype) ? k0 + 1 : c->kernels + 1;
    cpu_f32_done(oc, out, 0);
    tensor_free(dyc);
    tensor_free(xc);
    return 0;
}
