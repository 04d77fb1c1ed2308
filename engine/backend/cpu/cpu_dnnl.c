// Convolution, transposed convolution and pooling through oneDNN 2.6's C API
// (cpu_kernels.h). The engine and stream are made once per process; each
// executor keeps its primitives keyed by (op, shapes, attributes), so a
// step after the first only binds pointers and executes, as a framework's
// primitive cache does. Tensors are plain NCHW / OIHW (format tag abcd);
// a convolution reorders them into oneDNN's preferred layouts and back
// inside the call (entry_new, cpu_dnnl_arg).
// TCBENCH_LOG=dnnl prints each primitive's implementation when it is made.
#include "cpu_dnnl_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cpu_dnnl {
    dnnl_entry *head;
    bool bf16; // oneDNN's bf16 kernels run (cpu_dnnl_bf16_on)
    // reordered operands (dnnl_entry.user): one buffer per argument slot,
    // grown to the largest asked for and reused by every call
    void *scratch[CPU_DNNL_MAX_ARGS];
    size_t scratch_cap[CPU_DNNL_MAX_ARGS];
    size_t packed_bytes; // frozen weights kept reordered (dnnl_entry.packs)
    size_t packed_from;  // the bytes of their plain originals
};

size_t cpu_dnnl_packed_bytes(const cpu_dnnl *d, size_t *plain) {
    if (plain)
        *plain = d ? d->packed_from : 0;
    return d ? d->packed_bytes : 0;
}

// Process-wide, as in a framework: made on first use, never torn down (the
// OS reclaims them at exit).
static dnnl_engine_t dnnl_engine;
static dnnl_stream_t dnnl_stream_;

const char *cpu_dnnl_status_str(dnnl_status_t s) {
    switch (s) {
    case dnnl_success: return "success";
    case dnnl_out_of_memory: return "out of memory";
    case dnnl_invalid_arguments: return "invalid arguments";
    case dnnl_unimplemented: return "unimplemented for these shapes";
    case dnnl_iterator_ends: return "iterator ends";
    case dnnl_runtime_error: return "runtime error";
    case dnnl_not_required: return "not required";
    default: return "unknown status";
    }
}

dnnl_engine_t cpu_dnnl_engine(void) { return dnnl_engine; }

int cpu_dnnl_new(cpu_dnnl **out, char *err, size_t errcap) {
    *out = NULL;
    if (!dnnl_engine) {
        DNNL_TRY(err, errcap, dnnl_engine_create, (&dnnl_engine, dnnl_cpu, 0));
        DNNL_TRY(err, errcap, dnnl_stream_create,
                 (&dnnl_stream_, dnnl_engine, dnnl_stream_default_flags));
    }
    *out = calloc(1, sizeof **out);
    if (!*out) {
        snprintf(err, errcap, "out of memory for the oneDNN primitive cache");
        return -1;
    }
    // the CPU's ISA and the switch, read once here rather than on every call
    const char *off = getenv("TCBENCH_DISABLE_DNNL_BF16");
    bool isa = (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core_bf16) ==
               dnnl_cpu_isa_avx512_core_bf16;
    (*out)->bf16 = isa && !(off && *off && strcmp(off, "0") != 0);
    return 0;
fail:
    if (dnnl_engine && !dnnl_stream_) {
        dnnl_engine_destroy(dnnl_engine);
        dnnl_engine = NULL;
    }
    return -1;
}

bool cpu_dnnl_bf16_on(const cpu_dnnl *d) { return d && d->bf16; }

void cpu_dnnl_set_bf16(cpu_dnnl *d, bool on) {
    d->bf16 = on && (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core_bf16) ==
                        dnnl_cpu_isa_avx512_core_bf16;
}

void cpu_dnnl_entry_free(dnnl_entry *e) {
    for (int i = 0; i < CPU_DNNL_MAX_ARGS; i++) {
        if (e->mem[i])
            dnnl_memory_destroy(e->mem[i]);
        if (e->user[i])
            dnnl_memory_destroy(e->user[i]);
        if (e->reo[i])
            dnnl_primitive_destroy(e->reo[i]);
    }
    for (struct dnnl_pack *q = e->packs, *next; q; q = next) {
        next = q->next;
        free(q->buf);
        free(q);
    }
    if (e->prim)
        dnnl_primitive_destroy(e->prim);
    free(e);
}

void cpu_dnnl_free(cpu_dnnl *d) {
    if (!d)
        return;
    for (dnnl_entry *e = d->head, *next; e; e = next) {
        next = e->next;
        cpu_dnnl_entry_free(e);
    }
    for (int i = 0; i < CPU_DNNL_MAX_ARGS; i++)
        free(d->scratch[i]);
    free(d);
}

void cpu_dnnl_log_impl(const dnnl_key *k, const_dnnl_primitive_desc_t pd) {
    const char *want = getenv("TCBENCH_LOG");
    if (!want || !strstr(want, "dnnl"))
        return;
    const char *impl = "?";
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success)
        impl = "(dnnl_primitive_desc_query failed)";
    fprintf(stderr, "dnnl: %s%s x(%lld,%lld,%lld,%lld) w(%lld,%lld,%lld,%lld) -> %s\n",
            k->bf16 ? "bf16 " : "", op_name((enum op)k->op), (long long)k->x[0], (long long)k->x[1],
            (long long)k->x[2], (long long)k->x[3], (long long)k->w[0], (long long)k->w[1],
            (long long)k->w[2], (long long)k->w[3], impl);
}

int cpu_dnnl_pd_create(cpu_ctx *c, dnnl_primitive_desc_t *pd, const_dnnl_op_desc_t d,
                       const_dnnl_primitive_attr_t attr, const_dnnl_primitive_desc_t hint,
                       const char *skip) {
    *pd = NULL;
    if (!skip) {
        DNNL_TRY(c->err, sizeof c->err, dnnl_primitive_desc_create,
                 (pd, d, attr, cpu_dnnl_engine(), hint));
        return 0;
    }
    dnnl_primitive_desc_iterator_t it = NULL;
    DNNL_TRY(c->err, sizeof c->err, dnnl_primitive_desc_iterator_create,
             (&it, d, attr, cpu_dnnl_engine(), hint));
    for (;;) {
        dnnl_primitive_desc_t p = dnnl_primitive_desc_iterator_fetch(it);
        if (!p) {
            snprintf(c->err, sizeof c->err, "dnnl_primitive_desc_iterator_fetch failed");
            goto fail;
        }
        const char *impl = "";
        if (dnnl_primitive_desc_query(p, dnnl_query_impl_info_str, 0, &impl) != dnnl_success ||
            strncmp(impl, skip, strlen(skip))) {
            *pd = p;
            break;
        }
        dnnl_primitive_desc_destroy(p);
        dnnl_status_t st = dnnl_primitive_desc_iterator_next(it);
        if (st != dnnl_success) {
            snprintf(c->err, sizeof c->err,
                     "dnnl_primitive_desc_iterator_next: no implementation but %s (%s)", skip,
                     cpu_dnnl_status_str(st));
            goto fail;
        }
    }
    dnnl_primitive_desc_iterator_destroy(it);
    return 0;
fail:
    if (it)
        dnnl_primitive_desc_iterator_destroy(it);
    return -1;
}

// The post-ops of key k as a primitive attribute (NULL when there are
// none); md[i] receives binary post-op i's operand descriptor.
static int post_attr(cpu_ctx *c, const dnnl_key *k, dnnl_primitive_attr_t *attr,
                     dnnl_memory_desc_t *md, dnnl_format_tag_t full_tag) {
    *attr = NULL;
    if (k->npost == 0)
        return 0;
    dnnl_post_ops_t po = NULL;
    DNNL_TRY(c->err, sizeof c->err, dnnl_post_ops_create, (&po));
    for (int i = 0; i < k->npost; i++) {
        int op = k->post_op[i];
        if (k->post_chan[i] >= 0) {
            dnnl_dims_t d1 = {k->post_chan[i] ? 1 : k->y[0], k->y[1],
                              k->post_chan[i] ? 1 : k->y[2], k->post_chan[i] ? 1 : k->y[3]};
            DNNL_TRY(c->err, sizeof c->err, dnnl_memory_desc_init_by_tag,
                     (&md[i], 4, d1, k->bf16_post[i] ? dnnl_bf16 : dnnl_f32,
                      k->post_chan[i] ? dnnl_abcd : full_tag));
            dnnl_alg_kind_t alg = op == OP_ADD   ? dnnl_binary_add
                                  : op == OP_SUB ? dnnl_binary_sub
                                  : op == OP_MUL ? dnnl_binary_mul
                                  : op == OP_DIV ? dnnl_binary_div
                                                 : dnnl_binary_max;
            DNNL_TRY(c->err, sizeof c->err, dnnl_post_ops_append_binary, (po, alg, &md[i]));
            continue;
        }
        dnnl_alg_kind_t alg;
        float a = 0, b = 0;
        switch (op) {
        case OP_RELU: alg = dnnl_eltwise_relu; break;
        case OP_RELU6: alg = dnnl_eltwise_clip; a = 0, b = 6; break;
        case OP_SIGMOID: alg = dnnl_eltwise_logistic; break;
        case OP_TANH: alg = dnnl_eltwise_tanh; break;
        case OP_GELU: alg = dnnl_eltwise_gelu_erf; break;
        case OP_GELU_TANH: alg = dnnl_eltwise_gelu_tanh; break;
        case OP_SILU: alg = dnnl_eltwise_swish; a = 1; break;
        case OP_HARDSWISH: alg = dnnl_eltwise_hardswish; break;
        case OP_EXP: alg = dnnl_eltwise_exp; break;
        default: alg = dnnl_eltwise_linear; a = k->post_a[i], b = k->post_b[i]; break;
        }
        DNNL_TRY(c->err, sizeof c->err, dnnl_post_ops_append_eltwise, (po, 1.0f, alg, a, b));
    }
    DNNL_TRY(c->err, sizeof c->err, dnnl_primitive_attr_create, (attr));
    DNNL_TRY(c->err, sizeof c->err, dnnl_primitive_attr_set_post_ops, (*attr, po));
    dnnl_post_ops_destroy(po);
    return 0;
fail:
    if (po)
        dnnl_post_ops_destroy(po);
    return -1;
}

// The caller's layout of each post-op operand: plain NCHW, full-size or
// per channel (1, C, 1, 1).
static int post_attr_user(cpu_ctx *c, const dnnl_key *k, dnnl_memory_desc_t *md) {
    for (int i = 0; i < k->npost; i++) {
        if (k->post_chan[i] < 0)
            continue;
        dnnl_dims_t d1 = {k->post_chan[i] ? 1 : k->y[0], k->y[1], k->post_chan[i] ? 1 : k->y[2],
                          k->post_chan[i] ? 1 : k->y[3]};
        DNNL_TRY(c->err, sizeof c->err, dnnl_memory_desc_init_by_tag,
                 (&md[i], 4, d1, k->bf16_post[i] ? dnnl_bf16 : dnnl_f32,
                  k->post_cl[i] ? dnnl_acdb : dnnl_abcd));
    }
    return 0;
fail:
    return -1;
}

// A bf16 convolution oneDNN refuses, or takes only with its reference
// kernel: e kept without a primitive, so the cache remembers the refusal
// and the widening path runs.
static dnnl_entry *bf16_declined(cpu_ctx *c, dnnl_entry *e) {
    dnnl_entry *next = e->next;
    dnnl_key key = e->key;
    cpu_dnnl_entry_free(e);
    if (!(e = calloc(1, sizeof *e))) {
        cpu_fail(c, "out of memory for a oneDNN primitive");
        return NULL;
    }
    e->key = key;
    e->next = next;
    const char *want = getenv("TCBENCH_LOG");
    if (want && strstr(want, "dnnl")) {
        const dnnl_key *k = &e->key;
        fprintf(stderr,
                "dnnl: bf16 %s x(%lld,%lld,%lld,%lld) w(%lld,%lld,%lld,%lld) declined, "
                "widening to f32 instead: %s\n",
                op_name((enum op)k->op), (long long)k->x[0], (long long)k->x[1], (long long)k->x[2],
                (long long)k->x[3], (long long)k->w[0], (long long)k->w[1], (long long)k->w[2],
                (long long)k->w[3], c->err);
    }
    c->err[0] = '\0';
    return e;
}

// The primitive and its arguments for key k. A convolution with a spatial
// window or groups runs in oneDNN's preferred layouts: activations
// channels-last (NHWC, acdb), weights in the blocked layout the primitive
// picks (format any); the caller's plain NCHW / OIHW tensors are reordered
// in and the result back out inside the call (cpu_dnnl_arg), as PyTorch's
// eager convolution does through ideep. On plain NCHW oneDNN 2.6 has only
// im2col + GEMM (x64:gemm:jit) for these, 1.1x to 9x slower on the smoke
// models' shapes, reorders included. A 1x1 convolution without groups is a
// GEMM on NCHW already and runs plain: there the reorders cost more than
// they save (2x to 4x). Pooling stays plain (a jit kernel takes NCHW).
// NULL with c->err set on failure.
bool cpu_dnnl_conv_blocked(const dnnl_key *k) {
    return !(k->w[2] == 1 && k->w[3] == 1 && k->ia[6] == 1) || k->xcl || k->ycl;
}

bool cpu_channels_last(const tensor *t) {
    if (t->ndim != 4)
        return false;
    const int64_t *s = t->shape, *st = t->stride;
    int64_t C = s[1], H = s[2], W = s[3];
    return (C == 1 || st[1] == 1) && (W == 1 || st[3] == C) && (H == 1 || st[2] == W * C) &&
           (s[0] == 1 || st[0] == H * W * C);
}

// x itself (a view) when plain contiguous or channels-last (*cl set), else a
// contiguous copy: the layouts a convolution or pooling takes as they are.
tensor *cpu_dnnl_operand(cpu_ctx *c, const tensor *x, int *cl) {
    *cl = !tensor_is_contiguous(x) && cpu_channels_last(x);
    return *cl ? tensor_view(x) : cpu_contiguous(c, x);
}

static dnnl_entry *entry_new(cpu_ctx *c, const dnnl_key *k) {
    dnnl_entry *e = calloc(1, sizeof *e);
    dnnl_primitive_desc_t pd = NULL;
    if (!e) {
        cpu_fail(c, "out of memory for a oneDNN primitive");
        return NULL;
    }
    e->key = *k;
    const int64_t *ia = k->ia;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_memory_desc_t md_src1[CPU_POST_MAX], user_src1[CPU_POST_MAX];
    dnnl_memory_desc_t md_x, md_w, md_b, md_y;       // the caller's layouts
    dnnl_memory_desc_t pmd_x, pmd_w, pmd_y;          // what the primitive is asked for
    dnnl_dims_t dx = {k->x[0], k->x[1], k->x[2], k->x[3]};
    dnnl_dims_t dy = {k->y[0], k->y[1], k->y[2], k->y[3]};
    dnnl_dims_t strides = {ia[0], ia[1]}, pad_l = {ia[2], ia[3]}, pad_r = {ia[2], ia[3]};
    // bf16 src and weights for a bf16 convolution; its bias stays f32
    dnnl_data_type_t xt = k->bf16 ? dnnl_bf16 : dnnl_f32, yt = k->bf16_y ? dnnl_bf16 : dnnl_f32;
    bool conv = k->op == OP_CONV2D || k->op == OP_CONV_TRANSPOSE2D;
    bool blocked = conv && cpu_dnnl_conv_blocked(k);
    // pooling runs in x's layout
    dnnl_format_tag_t act = blocked || (!conv && k->xcl) ? dnnl_acdb : dnnl_abcd;
    DNNL_TRY(c->err, sizeof c->err, dnnl_memory_desc_init_by_tag,
             (&md_x, 4, dx, xt, k->xcl ? dnnl_acdb : dnnl_abcd));
    DNNL_TRY(c->err, sizeof c->err, dnnl_memory_desc_init_by_tag,
             (&md_y, 4, dy, yt, k->ycl ? dnnl_acdb : dnnl_abcd));
    DNNL_TRY(c->err, sizeof c->err, dnnl_memory_desc_init_by_tag, (&pmd_x, 4, dx, xt, act));
    DNNL_TRY(c->err, sizeof c->err, dnnl_memory_desc_init_by_tag, (&pmd_y, 4, dy, yt, act));
    if (conv) {
        bool tr = k->op == OP_CONV_TRANSPOSE2D;
        int64_t g = ia[6], O = k->y[1], C = k->x[1];
        // oneDNN's weight dims are always (out, in, kh, kw), grouped as
        // (g, out/g, in/g, kh, kw); the tag says how ours lie in memory:
        // conv (O, C/g, kh, kw) is plain, conv_transpose (C, O/g, kh, kw) has
        // in and out swapped (iohw, giohw)
        if (g == 1) {
            dnnl_dims_t dw = {O, C, k->w[2], k->w[3]};
            DNNL_TRY(c->err, sizeof c->err, dnnl_memory_desc_init_by_tag,
                     (&md_w, 4, dw, xt, tr ? dnnl_iohw : dnnl_oihw));
            DNNL_TRY(c->err, sizeof c->err, dnnl_memory_desc_init_by_tag,
                     (&pmd_w, 4, dw, xt, blocked ? dnnl_format_tag_any : tr ? dnnl_iohw : dnnl_oihw));
        } else {
            dnnl_dims_t dw = {g, O / g, C / g, k->w[2], k->w[3]};
            DNNL_TRY(c->err, sizeof c->err, dnnl_memory_desc_init_by_tag,
                     (&md_w, 5, dw, xt, tr ? dnnl_giohw : dnnl_goihw));
            DNNL_TRY(c->err, sizeof c->err, dnnl_memory_desc_init_by_tag,
                     (&pmd_w, 5, dw, xt, blocked ? dnnl_format_tag_any : tr ? dnnl_giohw : dnnl_goihw));
        }
        dnnl_dims_t db = {O};
        DNNL_TRY(c->err, sizeof c->err, dnnl_memory_desc_init_by_tag,
                 (&md_b, 1, db, dnnl_f32, dnnl_a));
        // oneDNN counts dilation from 0
        dnnl_dims_t dil = {ia[4] - 1, ia[5] - 1};
        if (post_attr(c, k, &attr, md_src1, act) < 0 || post_attr_user(c, k, user_src1) < 0)
            goto fail;
        if (tr) {
            // output padding extends the bottom / right edge only
            pad_r[0] = ia[2] - ia[7];
            pad_r[1] = ia[3] - ia[8];
            dnnl_deconvolution_desc_t d;
            DNNL_TRY(c->err, sizeof c->err, dnnl_dilated_deconvolution_forward_desc_init,
                     (&d, dnnl_forward_inference, dnnl_deconvolution_direct, &pmd_x, &pmd_w,
                      k->has_bias ? &md_b : NULL, &pmd_y, strides, dil, pad_l, pad_r));
            DNNL_TRY(c->err, sizeof c->err, dnnl_primitive_desc_create,
                     (&pd, &d, attr, dnnl_engine, NULL));
        } else {
            dnnl_convolution_desc_t d;
            DNNL_TRY(c->err, sizeof c->err, dnnl_dilated_convolution_forward_desc_init,
                     (&d, dnnl_forward_inference, dnnl_convolution_direct, &pmd_x, &pmd_w,
                      k->has_bias ? &md_b : NULL, &pmd_y, strides, dil, pad_l, pad_r));
            DNNL_TRY(c->err, sizeof c->err, dnnl_primitive_desc_create,
                     (&pd, &d, attr, dnnl_engine, NULL));
        }
        if (k->bf16) {
            const char *impl = "?";
            DNNL_TRY(c->err, sizeof c->err, dnnl_primitive_desc_query,
                     (pd, dnnl_query_impl_info_str, 0, &impl));
            if (strncmp(impl, "ref", 3) == 0) {
                snprintf(c->err, sizeof c->err, "only oneDNN's reference kernel (%s) takes it",
                         impl);
                goto fail;
            }
        }
        if (cpu_dnnl_arg(c, e, DNNL_ARG_SRC, &md_x,
                         dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0), false) < 0 ||
            cpu_dnnl_arg(c, e, DNNL_ARG_WEIGHTS, &md_w,
                         dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0), false) < 0 ||
            (k->has_bias && cpu_dnnl_arg(c, e, DNNL_ARG_BIAS, &md_b, &md_b, false) < 0))
            goto fail;
        for (int i = 0; i < k->npost; i++) {
            if (k->post_chan[i] < 0) // an activation: no operand
                continue;
            if (cpu_dnnl_arg(c, e, DNNL_ARG_ATTR_MULTIPLE_POST_OP(i) | DNNL_ARG_SRC_1,
                             &user_src1[i], &md_src1[i], false) < 0)
                goto fail;
        }
        if (cpu_dnnl_arg(c, e, DNNL_ARG_DST, &md_y,
                         dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0), true) < 0)
            goto fail;
    } else {
        dnnl_pooling_v2_desc_t d;
        dnnl_dims_t kernel = {ia[4], ia[5]}, dil = {0, 0};
        // avg pool divides by the whole window, padding included (PyTorch's
        // count_include_pad default), or by its cells in the input (ia7). Ceil
        // mode (ia6) pads the right and bottom to the last window's end.
        dnnl_alg_kind_t alg = k->op == OP_MAX_POOL2D ? dnnl_pooling_max
                              : ia[7]                ? dnnl_pooling_avg_exclude_padding
                                                     : dnnl_pooling_avg_include_padding;
        for (int i = 0; ia[6] && i < 2; i++)
            pad_r[i] = (k->y[2 + i] - 1) * ia[i] + ia[4 + i] - k->x[2 + i] - ia[2 + i];
        DNNL_TRY(
            c->err, sizeof c->err, dnnl_pooling_v2_forward_desc_init,
            (&d, dnnl_forward_inference, alg, &pmd_x, &pmd_y, strides, kernel, dil, pad_l, pad_r));
        DNNL_TRY(c->err, sizeof c->err, dnnl_primitive_desc_create,
                 (&pd, &d, NULL, dnnl_engine, NULL));
        if (cpu_dnnl_arg(c, e, DNNL_ARG_SRC, &md_x, &pmd_x, false) < 0 ||
            cpu_dnnl_arg(c, e, DNNL_ARG_DST, &md_y, &pmd_y, true) < 0)
            goto fail;
    }
    cpu_dnnl_log_impl(k, pd);
    DNNL_TRY(c->err, sizeof c->err, dnnl_primitive_create, (&e->prim, pd));
    dnnl_primitive_desc_destroy(pd);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    return e;
fail:
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    if (k->bf16)
        return bf16_declined(c, e);
    cpu_dnnl_entry_free(e);
    return NULL;
}

dnnl_entry *cpu_dnnl_lookup(cpu_ctx *c, const dnnl_key *k, cpu_dnnl_make_fn make) {
    if (!c->dnnl) {
        cpu_fail(c, "%s: the oneDNN context was not set up (cpu_dnnl_new)", op_name(k->op));
        return NULL;
    }
    for (dnnl_entry *e = c->dnnl->head; e; e = e->next)
        if (memcmp(&e->key, k, sizeof *k) == 0)
            return e;
    dnnl_entry *e = make(c, k);
    if (e) {
        e->next = c->dnnl->head;
        c->dnnl->head = e;
    }
    return e;
}

int cpu_dnnl_arg(cpu_ctx *c, dnnl_entry *e, int arg, const dnnl_memory_desc_t *user_md,
                 const dnnl_memory_desc_t *prim_md, bool output) {
    dnnl_engine_t eng = dnnl_engine;
    dnnl_primitive_desc_t rpd = NULL;
    int i = e->nargs;
    if (i >= CPU_DNNL_MAX_ARGS)
        return cpu_fail(c, "oneDNN primitive with more than %d arguments", CPU_DNNL_MAX_ARGS);
    e->arg[i] = arg;
    e->output[i] = output;
    DNNL_TRY(c->err, sizeof c->err, dnnl_memory_create, (&e->mem[i], prim_md, eng, DNNL_MEMORY_NONE));
    e->nargs++; // from here the entry owns mem[i], whatever follows
    if (dnnl_memory_desc_equal(user_md, prim_md))
        return 0;
    DNNL_TRY(c->err, sizeof c->err, dnnl_memory_create, (&e->user[i], user_md, eng, DNNL_MEMORY_NONE));
    DNNL_TRY(c->err, sizeof c->err, dnnl_reorder_primitive_desc_create,
             (&rpd, output ? prim_md : user_md, eng, output ? user_md : prim_md, eng, NULL));
    DNNL_TRY(c->err, sizeof c->err, dnnl_primitive_create, (&e->reo[i], rpd));
    dnnl_primitive_desc_destroy(rpd);
    e->inner_bytes[i] = dnnl_memory_desc_get_size(prim_md);
    return 0;
fail:
    if (rpd)
        dnnl_primitive_desc_destroy(rpd);
    return -1;
}

// Argument slot i's scratch, at least n bytes (64-byte aligned, kept).
static void *scratch_of(cpu_ctx *c, int i, size_t n) {
    cpu_dnnl *d = c->dnnl;
    if (d->scratch_cap[i] < n) {
        free(d->scratch[i]);
        size_t cap = (n + 63) / 64 * 64;
        d->scratch[i] = aligned_alloc(64, cap);
        d->scratch_cap[i] = d->scratch[i] ? cap : 0;
        if (!d->scratch[i]) {
            cpu_fail(c, "out of memory for %zu bytes of oneDNN reorder scratch", cap);
            return NULL;
        }
    }
    return d->scratch[i];
}

static int run_reorder(cpu_ctx *c, dnnl_entry *e, int i) {
    dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, e->output[i] ? e->mem[i] : e->user[i]},
                            {DNNL_ARG_TO, e->output[i] ? e->user[i] : e->mem[i]}};
    DNNL_TRY(c->err, sizeof c->err, dnnl_primitive_execute, (e->reo[i], dnnl_stream_, 2, a));
    return 0;
fail:
    return -1;
}

// Frozen weights: weight argument i of e at user address w, reordered on
// first sight into a buffer the entry keeps. NULL with c->err set.
static void *packed_weights(cpu_ctx *c, dnnl_entry *e, int i, void *w) {
    for (struct dnnl_pack *q = e->packs; q; q = q->next)
        if (q->user == w)
            return q->buf;
    struct dnnl_pack *q = calloc(1, sizeof *q);
    size_t cap = (e->inner_bytes[i] + 63) / 64 * 64;
    if (!q || !(q->buf = aligned_alloc(64, cap))) {
        free(q);
        cpu_fail(c, "out of memory for %zu bytes of prepacked weights", cap);
        return NULL;
    }
    q->user = w;
    DNNL_TRY(c->err, sizeof c->err, dnnl_memory_set_data_handle, (e->user[i], w));
    DNNL_TRY(c->err, sizeof c->err, dnnl_memory_set_data_handle, (e->mem[i], q->buf));
    if (run_reorder(c, e, i) < 0)
        goto fail;
    DNNL_TRY(c->err, sizeof c->err, dnnl_stream_wait, (dnnl_stream_));
    q->next = e->packs;
    e->packs = q;
    c->dnnl->packed_bytes += cap;
    const dnnl_memory_desc_t *umd = NULL;
    DNNL_TRY(c->err, sizeof c->err, dnnl_memory_get_memory_desc, (e->user[i], &umd));
    c->dnnl->packed_from += dnnl_memory_desc_get_size(umd);
    return q->buf;
fail:
    free(q->buf);
    free(q);
    return NULL;
}

// Binds data pointers (in the entry's argument order) and runs it: the
// inputs' reorders, the primitive, the outputs' reorders.
int cpu_dnnl_execute(cpu_ctx *c, dnnl_entry *e, void *const *data) {
    dnnl_exec_arg_t args[CPU_DNNL_MAX_ARGS];
    bool packed[CPU_DNNL_MAX_ARGS] = {0};
    for (int i = 0; i < e->nargs; i++) {
        void *inner = data[i];
        if (e->reo[i] && c->freeze_weights && e->arg[i] == DNNL_ARG_WEIGHTS) {
            if (!(inner = packed_weights(c, e, i, data[i])))
                return -1;
            packed[i] = true;
        } else if (e->reo[i]) {
            if (!(inner = scratch_of(c, i, e->inner_bytes[i])))
                return -1;
            DNNL_TRY(c->err, sizeof c->err, dnnl_memory_set_data_handle, (e->user[i], data[i]));
        }
        DNNL_TRY(c->err, sizeof c->err, dnnl_memory_set_data_handle, (e->mem[i], inner));
        args[i].arg = e->arg[i];
        args[i].memory = e->mem[i];
    }
    for (int i = 0; i < e->nargs; i++)
        if (e->reo[i] && !e->output[i] && !packed[i] && run_reorder(c, e, i) < 0)
            return -1;
    DNNL_TRY(c->err, sizeof c->err, dnnl_primitive_execute,
             (e->prim, dnnl_stream_, e->nargs, args));
    for (int i = 0; i < e->nargs; i++)
        if (e->reo[i] && e->output[i] && run_reorder(c, e, i) < 0)
            return -1;
    DNNL_TRY(c->err, sizeof c->err, dnnl_stream_wait, (dnnl_stream_));
    c->kernels++;
    return 0;
fail:
    return -1;
}

void cpu_dnnl_key_init(dnnl_key *k, const graph_node *n, const tensor *x, const tensor *w,
                       const tensor *y) {
    memset(k, 0, sizeof *k); // padding bytes too: keys are compared with memcmp
    k->op = n->op;
    for (int i = 0; i < 4; i++) {
        k->x[i] = x->shape[i];
        k->y[i] = y->shape[i];
        k->w[i] = w ? w->shape[i] : 0;
    }
    memcpy(k->ia, n->ia, sizeof k->ia);
}

// ---- f16 and bf16 (AMP): oneDNN 2.6 has no f16 convolution on a CPU without
// AVX512-FP16, so f16 operands go through f32 scratch (cpu_f32_in): the f32
// primitive, the output rounded to f16 once. bf16 x and w on a CPU with
// AVX512-BF16 run oneDNN's bf16 primitive instead (conv_bf16); what it
// declines takes the f16 path. As with the GEMMs, any operand may be f32 or
// 16-bit, and so may the output: the compiled mode fuses a cast to f32 after
// a convolution by asking for the f32 result unrounded.

static void key_post(dnnl_key *k, int npost, const cpu_post *post) {
    k->npost = npost;
    for (int i = 0; i < npost; i++) {
        k->post_op[i] = post[i].op;
        k->post_chan[i] = post[i].src1 ? post[i].per_channel : -1;
        k->post_a[i] = post[i].alpha;
        k->post_b[i] = post[i].beta;
    }
}

// bf16 x and w through oneDNN's bf16 convolution: f32 accumulation, the
// bias in f32, the post-ops on the f32 sums, dst in out's dtype (f32 or
// bf16, rounded once); post-op operands f32 or bf16. 1 when declined:
// TCBENCH_DISABLE_DNNL_BF16, no AVX512-BF16, another dtype, or a primitive
// oneDNN refuses or offers only as its reference kernel (cached, asked once
// per shape).
static int conv_bf16(cpu_ctx *c, const graph_node *n, const tensor *x, const tensor *w,
                     const tensor *bias, int npost, const cpu_post *post, tensor *out) {
    if (!cpu_dnnl_bf16_on(c->dnnl) || x->dtype != DT_BF16 || w->dtype != DT_BF16 ||
        (out->dtype != DT_F32 && out->dtype != DT_BF16) || !tensor_is_contiguous(out) ||
        (bias && bias->dtype != DT_F32 && bias->dtype != DT_BF16))
        return 1;
    for (int i = 0; i < npost; i++)
        if (post[i].src1 && post[i].src1->dtype != DT_F32 && post[i].src1->dtype != DT_BF16)
            return 1;
    dnnl_key k;
    cpu_dnnl_key_init(&k, n, x, w, out);
    k.has_bias = bias != NULL;
    key_post(&k, npost, post);
    k.bf16 = 1;
    k.bf16_y = out->dtype == DT_BF16;
    for (int i = 0; i < npost; i++)
        k.bf16_post[i] = post[i].src1 && post[i].src1->dtype == DT_BF16;
    dnnl_entry *e = cpu_dnnl_lookup(c, &k, entry_new);
    if (!e)
        return -1;
    if (!e->prim)
        return 1;
    const char *what = op_name(n->op);
    int64_t k0 = c->kernels;
    // x, w, the f32 bias, then each post-op operand; contiguous copies at most
    tensor *own[3 + CPU_POST_MAX] = {0};
    bool ok = (own[0] = cpu_contiguous(c, x)) && (own[1] = cpu_contiguous(c, w)) &&
              (!bias || (own[2] = cpu_f32_in(c, what, bias)));
    void *data[CPU_DNNL_MAX_ARGS];
    int a = 0;
    for (int i = 0; ok && i < 3; i++)
        if (own[i])
            data[a++] = tensor_data(own[i]);
    for (int i = 0; ok && i < npost; i++)
        if (post[i].src1 && (ok = (own[3 + i] = cpu_contiguous(c, post[i].src1)) != NULL))
            data[a++] = tensor_data(own[3 + i]);
    data[a] = tensor_data(out);
    int rc = ok ? cpu_dnnl_execute(c, e, data) : -1;
    cpu_free_all(3 + CPU_POST_MAX, own);
    c->kernels = k0 + (rc == 0);
    if (rc == 0)
        c->dnnl_bf16_convs++;
    return rc;
}

static bool any_f16(const tensor *x, const tensor *w, const tensor *bias, int npost,
                    const cpu_post *post, const tensor *out) {
    bool f16 = dtype_is_half(x->dtype) || dtype_is_half(w->dtype) || dtype_is_half(out->dtype) ||
               (bias && dtype_is_half(bias->dtype));
    for (int i = 0; i < npost; i++)
        f16 = f16 || (post[i].src1 && dtype_is_half(post[i].src1->dtype));
    return f16;
}

static int conv_f16(cpu_ctx *c, const graph_node *n, const tensor *x, const tensor *w,
                    const tensor *bias, int npost, const cpu_post *post, tensor *out) {
    const char *what = op_name(n->op);
    int64_t k0 = c->kernels;
    // the widened weight is scratch: its address says nothing of its values
    bool frozen = c->freeze_weights;
    c->freeze_weights = false;
    cpu_post p32[CPU_POST_MAX];
    tensor *own[3 + CPU_POST_MAX] = {0}; // x, w, bias, then each post-op operand
    bool ok = (own[0] = cpu_f32_in(c, what, x)) && (own[1] = cpu_f32_in(c, what, w)) &&
              (!bias || (own[2] = cpu_f32_in(c, what, bias)));
    for (int i = 0; ok && i < npost; i++) {
        p32[i] = post[i];
        if (post[i].src1)
            ok = (p32[i].src1 = own[3 + i] = cpu_f32_in(c, what, post[i].src1)) != NULL;
    }
    tensor *o32 = ok ? cpu_f32_out(c, what, out) : NULL;
    int rc = -1;
    if (o32)
        rc = npost ? cpu_conv2d_post(c, n, own[0], own[1], own[2], npost, p32, o32)
                   : cpu_conv2d(c, n, own[0], own[1], own[2], o32);
    cpu_f32_done(o32, out, rc);
    cpu_free_all(3 + CPU_POST_MAX, own);
    c->kernels = k0 + (rc == 0);
    c->freeze_weights = frozen;
    return rc;
}

int cpu_conv2d(cpu_ctx *c, const graph_node *n, const tensor *x, const tensor *w,
               const tensor *bias, tensor *out) {
    if (any_f16(x, w, bias, 0, NULL, out)) {
        int rc = conv_bf16(c, n, x, w, bias, 0, NULL, out);
        return rc <= 0 ? rc : conv_f16(c, n, x, w, bias, 0, NULL, out);
    }
    if (cpu_need_same_float(c, op_name(n->op), 4, (const tensor *[]){x, w, bias, out}) < 0)
        return -1;
    dnnl_key k;
    cpu_dnnl_key_init(&k, n, x, w, out);
    k.has_bias = bias != NULL;
    if (!tensor_is_contiguous(out) && !(k.ycl = cpu_channels_last(out)))
        return cpu_fail(c, "%s: the output must be contiguous or channels-last", op_name(n->op));
    tensor *xc = cpu_dnnl_operand(c, x, &k.xcl), *wc = xc ? cpu_contiguous(c, w) : NULL;
    tensor *bc = wc && bias ? cpu_contiguous(c, bias) : NULL;
    dnnl_entry *e = bc || (wc && !bias) ? cpu_dnnl_lookup(c, &k, entry_new) : NULL;
    int rc = -1;
    if (e) {
        void *data[CPU_DNNL_MAX_ARGS] = {tensor_data(xc), tensor_data(wc)};
        int i = 2;
        if (bias)
            data[i++] = tensor_data(bc);
        data[i] = tensor_data(out);
        rc = cpu_dnnl_execute(c, e, data);
    }
    tensor_free(xc);
    tensor_free(wc);
    tensor_free(bc);
    return rc;
}

int cpu_conv2d_post(cpu_ctx *c, const graph_node *n, const tensor *x, const tensor *w,
                    const tensor *bias, int npost, const cpu_post *post, tensor *out) {
    if (npost > CPU_POST_MAX)
        return cpu_fail(c, "%s: at most %d post-ops, got %d", op_name(n->op), CPU_POST_MAX, npost);
    if (any_f16(x, w, bias, npost, post, out)) {
        int rc = conv_bf16(c, n, x, w, bias, npost, post, out);
        return rc <= 0 ? rc : conv_f16(c, n, x, w, bias, npost, post, out);
    }
    if (cpu_need_same_float(c, op_name(n->op), 4, (const tensor *[]){x, w, bias, out}) < 0)
        return -1;
    for (int i = 0; i < npost; i++)
        if (post[i].src1 && post[i].src1->dtype != DT_F32)
            return cpu_fail(c, "%s: post-op operand dtype %s is not supported (f32, f16, bf16)",
                            op_name(n->op), dtype_name(post[i].src1->dtype));
    dnnl_key k;
    cpu_dnnl_key_init(&k, n, x, w, out);
    k.has_bias = bias != NULL;
    key_post(&k, npost, post);
    if (!tensor_is_contiguous(out) && !(k.ycl = cpu_channels_last(out)))
        return cpu_fail(c, "%s: the output must be contiguous or channels-last", op_name(n->op));
    for (int i = 0; i < npost; i++)
        if (post[i].src1 && !post[i].per_channel && !tensor_is_contiguous(post[i].src1) &&
            !(k.post_cl[i] = cpu_channels_last(post[i].src1)))
            return cpu_fail(c, "%s: post-op operand %d must be contiguous or channels-last",
                            op_name(n->op), i);
    tensor *xc = cpu_dnnl_operand(c, x, &k.xcl), *wc = xc ? cpu_contiguous(c, w) : NULL;
    dnnl_entry *e = wc ? cpu_dnnl_lookup(c, &k, entry_new) : NULL;
    int rc = -1;
    if (e) {
        void *data[CPU_DNNL_MAX_ARGS] = {tensor_data(xc), tensor_data(wc)};
        int i = 2;
        if (bias)
            data[i++] = tensor_data(bias); // contiguous by contract
        for (int p = 0; p < npost; p++)
            if (post[p].src1)
                data[i++] = tensor_data(post[p].src1); // contiguous by contract
        data[i] = tensor_data(out);
        rc = cpu_dnnl_execute(c, e, data);
    }
    tensor_free(xc);
    tensor_free(wc);
    return rc;
}

// f16 as the convolutions: max pooling of f16 values is exact in f32 and
// rounds back to the same value; avg pooling rounds its f32 mean once.
static int pool_f16(cpu_ctx *c, const graph_node *n, const tensor *x, tensor *out) {
    int64_t k0 = c->kernels;
    tensor *x32 = cpu_f32_in(c, op_name(n->op), x);
    tensor *o32 = x32 ? cpu_f32_out(c, op_name(n->op), out) : NULL;
    int rc = o32 ? cpu_pool2d(c, n, x32, o32) : -1;
    cpu_f32_done(o32, out, rc);
    tensor_free(x32);
    c->kernels = k0 + (rc == 0);
    return rc;
}

int cpu_pool2d(cpu_ctx *c, const graph_node *n, const tensor *x, tensor *out) {
    if (cpu_need_same_float(c, op_name(n->op), 2, (const tensor *[]){x, out}) < 0)
        return -1;
    if (dtype_is_half(x->dtype))
        return pool_f16(c, n, x, out);
    dnnl_key k;
    cpu_dnnl_key_init(&k, n, x, NULL, out);
    if (!tensor_is_contiguous(out) && !(k.ycl = cpu_channels_last(out)))
        return cpu_fail(c, "%s: the output must be contiguous or channels-last", op_name(n->op));
    tensor *xc = cpu_dnnl_operand(c, x, &k.xcl);
    if (!xc)
        return -1;
    dnnl_entry *e = cpu_dnnl_lookup(c, &k, entry_new);
    int rc = e ? cpu_dnnl_execute(c, e, (void *[]){tensor_data(xc), tensor_data(out)}) : -1;
    tensor_free(xc);
    return rc;
}
