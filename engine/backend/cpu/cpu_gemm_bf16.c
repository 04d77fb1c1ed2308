// bf16 GEMMs through oneDNN 2.6's matmul: bf16 src and weights, f32
// accumulation, an f32 or bf16 dst. On a CPU with AVX512-BF16 oneDNN's
// brgemm kernel multiplies bf16 pairs as they lie (vdpbf16ps) where the
// widening path (cpu_gemm.c) first converts both operands to f32 scratch
// for cblas_sgemm: 3.6x the GFLOP/s on a (512, 1024) @ (1024, 1024)^T
// linear with bias on two cores (bench/gemm_bf16.c, docs/amp.md).
// gemm_f16 asks here first.
//
// Operands go in as the strided views they are (memory descriptors by
// strides): row-major or transposed last two dims, batch dims broadcast by
// size 1 or stride 0, a linear's (N, K) weight as the (K, N) view of its
// transpose. Whatever that cannot express, and any primitive oneDNN makes
// only as its slow reference implementation, is declined (the widening
// path runs); the refusal is cached with the primitives, so it is asked
// once per shape. TCBENCH_DISABLE_DNNL_BF16=1 declines everything;
// TCBENCH_LOG=dnnl prints each primitive's implementation or refusal.
#include "cpu_dnnl_internal.h"

#include <stdlib.h>
#include <string.h>

// The CPU's answer, asked once; the switch at every call, so a test or a
// benchmark can compare both paths in one process.
// An operand (tnd dims of shape and stride, right-aligned) as nd oneDNN
// dims and strides: leading dims of size 1 added, a batch dim broadcast by
// stride 0 made size 1, the stride of every size-1 dim made that of a
// dense layout (oneDNN reads it when it classifies the layout). false when
// brgemm could not take it: a negative stride, or last two dims neither
// row-major nor transposed (the conditions cblas_sgemm has too).
static bool mat_of(int nd, int tnd, const int64_t *shape, const int64_t *stride, int64_t *dims,
                   int64_t *st) {
    for (int d = 0; d < nd; d++) {
        int s = d - (nd - tnd);
        dims[d] = s >= 0 ? shape[s] : 1;
        st[d] = s >= 0 ? stride[s] : 0;
        if (dims[d] == 0 || st[d] < 0)
            return false;
        if (d < nd - 2 && st[d] == 0)
            dims[d] = 1;
    }
    int64_t R = dims[nd - 2], C = dims[nd - 1], *sr = &st[nd - 2], *sc = &st[nd - 1];
    if (R == 1 && C == 1)
        *sr = *sc = 1;
    else if (C == 1)
        *sc = *sr == 1 ? R : 1;
    else if (R == 1)
        *sr = *sc == 1 ? C : 1;
    if (!((*sc == 1 && *sr >= C) || (*sr == 1 && *sc >= R)))
        return false;
    int64_t extent = (R - 1) * *sr + (C - 1) * *sc + 1;
    for (int d = nd - 3; d >= 0; d--) {
        if (dims[d] == 1)
            st[d] = extent;
        else if (st[d] * dims[d] > extent)
            extent = st[d] * dims[d];
    }
    return true;
}

static void log_refusal(const dnnl_key *k, const char *why) {
    const char *want = getenv("TCBENCH_LOG");
    if (want && strstr(want, "dnnl"))
        fprintf(stderr,
                "dnnl: bf16 matmul x(%lld,%lld,%lld,%lld) w(%lld,%lld,%lld,%lld) declined, "
                "widening to f32 instead: %s\n",
                (long long)k->x[0], (long long)k->x[1], (long long)k->x[2], (long long)k->x[3],
                (long long)k->w[0], (long long)k->w[1], (long long)k->w[2], (long long)k->w[3],
                why);
}

// The primitive for key k (ia[0] the rank, ia[1] a bf16 dst), or an entry
// without one when oneDNN refuses or offers only its reference kernel.
static dnnl_entry *matmul_new(cpu_ctx *c, const dnnl_key *k) {
    dnnl_entry *e = calloc(1, sizeof *e);
    if (!e) {
        cpu_fail(c, "matmul: out of memory for a oneDNN primitive");
        return NULL;
    }
    e->key = *k;
    int nd = (int)k->ia[0];
    dnnl_engine_t eng = cpu_dnnl_engine();
    dnnl_primitive_desc_t pd = NULL;
    dnnl_memory_desc_t md_a, md_b, md_bias, md_y;
    dnnl_dims_t da, sa, db, sb, dy, sy, dbias, sbias;
    for (int d = 0; d < nd; d++) {
        da[d] = k->x[d], sa[d] = k->xs[d];
        db[d] = k->w[d], sb[d] = k->ws[d];
        dy[d] = k->y[d], sy[d] = k->ys[d];
        dbias[d] = d == nd - 1 ? k->y[d] : 1;
        sbias[d] = d == nd - 1 ? 1 : k->y[nd - 1];
    }
    DNNL_TRY(c->err, sizeof c->err, dnnl_memory_desc_init_by_strides,
             (&md_a, nd, da, dnnl_bf16, sa));
    DNNL_TRY(c->err, sizeof c->err, dnnl_memory_desc_init_by_strides,
             (&md_b, nd, db, dnnl_bf16, sb));
    DNNL_TRY(c->err, sizeof c->err, dnnl_memory_desc_init_by_strides,
             (&md_y, nd, dy, k->ia[1] ? dnnl_bf16 : dnnl_f32, sy));
    DNNL_TRY(c->err, sizeof c->err, dnnl_memory_desc_init_by_strides,
             (&md_bias, nd, dbias, dnnl_f32, sbias));
    dnnl_matmul_desc_t d;
    DNNL_TRY(c->err, sizeof c->err, dnnl_matmul_desc_init,
             (&d, &md_a, &md_b, k->has_bias ? &md_bias : NULL, &md_y));
    DNNL_TRY(c->err, sizeof c->err, dnnl_primitive_desc_create, (&pd, &d, NULL, eng, NULL));
    const char *impl = "?";
    DNNL_TRY(c->err, sizeof c->err, dnnl_primitive_desc_query,
             (pd, dnnl_query_impl_info_str, 0, &impl));
    if (strncmp(impl, "ref", 3) == 0) {
        snprintf(c->err, sizeof c->err, "only oneDNN's reference kernel (%s) takes it", impl);
        goto fail;
    }
    const dnnl_memory_desc_t *md[4] = {&md_a, &md_b, &md_bias, &md_y};
    const int arg[4] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_BIAS, DNNL_ARG_DST};
    for (int i = 0; i < 4; i++) {
        if (i == 2 && !k->has_bias)
            continue;
        e->arg[e->nargs] = arg[i];
        DNNL_TRY(c->err, sizeof c->err, dnnl_memory_create,
                 (&e->mem[e->nargs++], md[i], eng, DNNL_MEMORY_NONE));
    }
    cpu_dnnl_log_impl(k, pd);
    DNNL_TRY(c->err, sizeof c->err, dnnl_primitive_create, (&e->prim, pd));
    dnnl_primitive_desc_destroy(pd);
    return e;
fail:
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    for (int i = 0; i < e->nargs; i++)
        if (e->mem[i])
            dnnl_memory_destroy(e->mem[i]);
    e->nargs = 0;
    e->prim = NULL;
    log_refusal(k, c->err);
    c->err[0] = '\0';
    return e;
}

int cpu_gemm_bf16(cpu_ctx *c, const tensor *a, const tensor *b, const tensor *bias, bool linear,
                  tensor *out) {
    int nd = out->ndim;
    if (!cpu_dnnl_bf16_on(c->dnnl) || a->dtype != DT_BF16 || b->dtype != DT_BF16 ||
        (out->dtype != DT_F32 && out->dtype != DT_BF16) || nd < 2 || nd > 4 || a->ndim < 2 ||
        a->ndim > nd || b->ndim < 2 || b->ndim > nd || (linear && (a->ndim != nd || b->ndim != 2)))
        return 1;
    if (bias && (bias->ndim != 1 || bias->shape[0] != out->shape[nd - 1] ||
                 (bias->dtype != DT_F32 && bias->dtype != DT_BF16)))
        return 1;
    dnnl_key k;
    memset(&k, 0, sizeof k); // padding bytes too: keys are compared with memcmp
    k.op = OP_MATMUL;
    k.has_bias = bias != NULL;
    k.ia[0] = nd;
    k.ia[1] = out->dtype == DT_BF16;
    // a linear's (N, K) weight is the (K, N) view of its transpose
    const int64_t *bshape = b->shape, *bstride = b->stride;
    int64_t wt_shape[2], wt_stride[2];
    if (linear) {
        wt_shape[0] = b->shape[1], wt_shape[1] = b->shape[0];
        wt_stride[0] = b->stride[1], wt_stride[1] = b->stride[0];
        bshape = wt_shape, bstride = wt_stride;
    }
    if (!mat_of(nd, a->ndim, a->shape, a->stride, k.x, k.xs) ||
        !mat_of(nd, b->ndim, bshape, bstride, k.w, k.ws) ||
        !mat_of(nd, nd, out->shape, out->stride, k.y, k.ys) || k.x[nd - 1] != k.w[nd - 2])
        return 1;
    dnnl_entry *e = cpu_dnnl_lookup(c, &k, matmul_new);
    if (!e)
        return -1;
    if (!e->prim)
        return 1;
    tensor *b32 = bias ? cpu_f32_in(c, linear ? "linear" : "matmul", bias) : NULL;
    if (bias && !b32)
        return -1;
    void *data[CPU_DNNL_MAX_ARGS] = {tensor_data(a), tensor_data(b)};
    int i = 2;
    if (bias)
        data[i++] = tensor_data(b32);
    data[i] = tensor_data(out);
    int rc = cpu_dnnl_execute(c, e, data);
    tensor_free(b32);
    if (rc == 0)
        c->dnnl_gemms++;
    return rc;
}
