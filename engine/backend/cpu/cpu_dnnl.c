// Convolution, transposed convolution and pooling through oneDNN 2.6's C API
// (cpu_kernels.h). The engine and stream are made once per process; each
// executor keeps its primitives keyed by (op, shapes, attributes), so a
// step after the first only binds pointers and executes, as a framework's
// primitive cache does. Tensors stay plain NCHW / OIHW (format tag abcd):
// eager tensors are plain, and oneDNN picks its best kernel for that layout.
// TCBENCH_LOG=dnnl prints each primitive's implementation when it is made.
#include "cpu_dnnl_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cpu_dnnl {
    dnnl_entry *head;
    bool bf16; // oneDNN's bf16 kernels run (cpu_dnnl_bf16_on)
};

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
    for (int i = 0; i < e->nargs; i++)
        if (e->mem[i])
            dnnl_memory_destroy(e->mem[i]);
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

// Builds the primitive and its memory objects for k (descriptors of plain
// f32 tensors). NULL with c->err set on failure.
// The post-ops of key k as a primitive attribute (NULL when there are
// none); md[i] receives binary post-op i's operand descriptor.
static int post_attr(cpu_ctx *c, const dnnl_key *k, dnnl_primitive_attr_t *attr,
                     dnnl_memory_desc_t *md) {
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
                     (&md[i], 4, d1, k->bf16_post[i] ? dnnl_bf16 : dnnl_f32, dnnl_abcd));
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

// A bf16 convolution oneDNN refuses, or takes only with its reference
// kernel: e kept without a primitive, so the cache remembers the refusal
// and the widening path runs.
static dnnl_entry *bf16_declined(cpu_ctx *c, dnnl_entry *e) {
    for (int i = 0; i < e->nargs; i++)
        if (e->mem[i])
            dnnl_memory_destroy(e->mem[i]);
    if (e->prim)
        dnnl_primitive_destroy(e->prim);
    e->nargs = 0;
    e->prim = NULL;
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
    dnnl_memory_desc_t md_src1[CPU_POST_MAX];
    dnnl_memory_desc_t md_x, md_w, md_b, md_y;
    dnnl_dims_t dx = {k->x[0], k->x[1], k->x[2], k->x[3]};
    dnnl_dims_t dy = {k->y[0], k->y[1], k->y[2], k->y[3]};
    dnnl_dims_t strides = {ia[0], ia[1]}, pad_l = {ia[2], ia[3]}, pad_r = {ia[2], ia[3]};
    // bf16 src and weights for a bf16 convolution; its bias stays f32
    dnnl_data_type_t xt = k->bf16 ? dnnl_bf16 : dnnl_f32, yt = k->bf16_y ? dnnl_bf16 : dnnl_f32;
    DNNL_TRY(c->err, sizeof c->err, dnnl_memory_desc_init_by_tag, (&md_x, 4, dx, xt, dnnl_abcd));
    DNNL_TRY(c->err, sizeof c->err, dnnl_memory_desc_init_by_tag, (&md_y, 4, dy, yt, dnnl_abcd));
    if (k->op == OP_CONV2D || k->op == OP_CONV_TRANSPOSE2D) {
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
        } else {
            dnnl_dims_t dw = {g, O / g, C / g, k->w[2], k->w[3]};
            DNNL_TRY(c->err, sizeof c->err, dnnl_memory_desc_init_by_tag,
                     (&md_w, 5, dw, xt, tr ? dnnl_giohw : dnnl_goihw));
        }
        dnnl_dims_t db = {O};
        DNNL_TRY(c->err, sizeof c->err, dnnl_memory_desc_init_by_tag,
                 (&md_b, 1, db, dnnl_f32, dnnl_a));
        // oneDNN counts dilation from 0
        dnnl_dims_t dil = {ia[4] - 1, ia[5] - 1};
        if (tr) {
            // output padding extends the bottom / right edge only
            pad_r[0] = ia[2] - ia[7];
            pad_r[1] = ia[3] - ia[8];
            dnnl_deconvolution_desc_t d;
            DNNL_TRY(c->err, sizeof c->err, dnnl_dilated_deconvolution_forward_desc_init,
                     (&d, dnnl_forward_inference, dnnl_deconvolution_direct, &md_x, &md_w,
                      k->has_bias ? &md_b : NULL, &md_y, strides, dil, pad_l, pad_r));
            if (post_attr(c, k, &attr, md_src1) < 0)
                goto fail;
            DNNL_TRY(c->err, sizeof c->err, dnnl_primitive_desc_create,
                     (&pd, &d, attr, dnnl_engine, NULL));
        } else {
            dnnl_convolution_desc_t d;
            DNNL_TRY(c->err, sizeof c->err, dnnl_dilated_convolution_forward_desc_init,
                     (&d, dnnl_forward_inference, dnnl_convolution_direct, &md_x, &md_w,
                      k->has_bias ? &md_b : NULL, &md_y, strides, dil, pad_l, pad_r));
            if (post_attr(c, k, &attr, md_src1) < 0)
                goto fail;
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
        e->arg[e->nargs] = DNNL_ARG_SRC;
        DNNL_TRY(c->err, sizeof c->err, dnnl_memory_create,
                 (&e->mem[e->nargs++], &md_x, dnnl_engine, DNNL_MEMORY_NONE));
        e->arg[e->nargs] = DNNL_ARG_WEIGHTS;
        DNNL_TRY(c->err, sizeof c->err, dnnl_memory_create,
                 (&e->mem[e->nargs++], &md_w, dnnl_engine, DNNL_MEMORY_NONE));
        if (k->has_bias) {
            e->arg[e->nargs] = DNNL_ARG_BIAS;
            DNNL_TRY(c->err, sizeof c->err, dnnl_memory_create,
                     (&e->mem[e->nargs++], &md_b, dnnl_engine, DNNL_MEMORY_NONE));
        }
        for (int i = 0; i < k->npost; i++) {
            if (k->post_chan[i] < 0) // an activation: no operand
                continue;
            e->arg[e->nargs] = DNNL_ARG_ATTR_MULTIPLE_POST_OP(i) | DNNL_ARG_SRC_1;
            DNNL_TRY(c->err, sizeof c->err, dnnl_memory_create,
                     (&e->mem[e->nargs++], &md_src1[i], dnnl_engine, DNNL_MEMORY_NONE));
        }
    } else {
        dnnl_pooling_v2_desc_t d;
        dnnl_dims_t kernel = {ia[4], ia[5]}, dil = {0, 0};
        // avg pool divides by the whole window, padding included (PyTorch's
        // count_include_pad default)
        dnnl_alg_kind_t alg =
            k->op == OP_MAX_POOL2D ? dnnl_pooling_max : dnnl_pooling_avg_include_padding;
        DNNL_TRY(
            c->err, sizeof c->err, dnnl_pooling_v2_forward_desc_init,
            (&d, dnnl_forward_inference, alg, &md_x, &md_y, strides, kernel, dil, pad_l, pad_r));
        DNNL_TRY(c->err, sizeof c->err, dnnl_primitive_desc_create,
                 (&pd, &d, NULL, dnnl_engine, NULL));
        e->arg[e->nargs] = DNNL_ARG_SRC;
        DNNL_TRY(c->err, sizeof c->err, dnnl_memory_create,
                 (&e->mem[e->nargs++], &md_x, dnnl_engine, DNNL_MEMORY_NONE));
    }
    e->arg[e->nargs] = DNNL_ARG_DST;
    DNNL_TRY(c->err, sizeof c->err, dnnl_memory_create,
             (&e->mem[e->nargs++], &md_y, dnnl_engine, DNNL_MEMORY_NONE));
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

// Binds data pointers (in the entry's argument order) and runs it.
int cpu_dnnl_execute(cpu_ctx *c, dnnl_entry *e, void *const *data) {
    dnnl_exec_arg_t args[CPU_DNNL_MAX_ARGS];
    for (int i = 0; i < e->nargs; i++) {
        DNNL_TRY(c->err, sizeof c->err, dnnl_memory_set_data_handle, (e->mem[i], data[i]));
        args[i].arg = e->arg[i];
        args[i].memory = e->mem[i];
    }
    DNNL_TRY(c->err, sizeof c->err, dnnl_primitive_execute,
             (e->prim, dnnl_stream_, e->nargs, args));
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
    dnnl_entry *e = cpu_dnnl_lookup(c, &k, entry_new);
    if (!e)
        return -1;
    tensor *xc = cpu_contiguous(c, x), *wc = xc ? cpu_contiguous(c, w) : NULL;
    tensor *bc = wc && bias ? cpu_contiguous(c, bias) : NULL;
    int rc = -1;
    if (wc && (!bias || bc)) {
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
    dnnl_entry *e = cpu_dnnl_lookup(c, &k, entry_new);
    if (!e)
        return -1;
    tensor *xc = cpu_contiguous(c, x), *wc = xc ? cpu_contiguous(c, w) : NULL;
    int rc = -1;
    if (wc) {
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
    dnnl_entry *e = cpu_dnnl_lookup(c, &k, entry_new);
    if (!e)
        return -1;
    tensor *xc = cpu_contiguous(c, x);
    if (!xc)
        return -1;
    int rc = cpu_dnnl_execute(c, e, (void *[]){tensor_data(xc), tensor_data(out)});
    tensor_free(xc);
    return rc;
}
