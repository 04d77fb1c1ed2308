// MATMUL and LINEAR on the GPU (cuda_rt.h), as PyTorch's CUDA eager does:
// cuBLAS GEMMs in f32 (no TF32 unless the context allows it) or f16 with f32
// accumulation, operands passed with their strides when BLAS can read them
// (a permuted view goes in transposed, no copy), batch dims broadcast with
// stride 0 in one strided-batched call per run of evenly strided batches.
// A single GEMM goes through cuBLASLt with a plan cached by shape (a
// linear's bias fused into its epilogue), as PyTorch's addmm does: on the
// H200, cublasGemmEx's f32 default algorithm took about 30 us for the
// smoke mlp's small products that cuBLASLt's heuristic runs in a few.
// Batched products, and shapes the heuristic finds nothing for, take
// cublasGemmEx / cublasGemmStridedBatchedEx. TCBENCH_CUDA_DISABLE_LT=1
// keeps cuBLASLt out entirely (a linear's bias is then copied into the
// output first and the GEMM adds to it, as addmm without cuBLASLt).
//
// Row-major C = A B is column-major C^T = B^T A^T, so every call passes B
// first: a row-major (R, C) operand with leading dimension ld is a
// column-major (C, R) one, CUBLAS_OP_N; a transposed one is CUBLAS_OP_T.
#include "cuda_rt.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LT_WORKSPACE ((size_t)4 << 20)

// A (R, C) matrix with element strides (sr, sc) as BLAS sees it: row-major
// with leading dimension ld, or transposed; false when neither (then the
// caller copies). cpu_gemm.c's rule.
static bool blas_layout(int64_t R, int64_t C, int64_t sr, int64_t sc, bool *trans, int64_t *ld) {
    if ((C == 1 || sc == 1) && (R == 1 || sr >= C)) {
        *trans = false;
        *ld = R == 1 ? C : sr;
        if (*ld < 1)
            *ld = 1;
        return true;
    }
    if ((R == 1 || sr == 1) && (C == 1 || sc >= R)) {
        *trans = true;
        *ld = C == 1 ? R : sc;
        if (*ld < 1)
            *ld = 1;
        return true;
    }
    return false;
}

static int too_big(cuda_ctx *c, const char *what) {
    snprintf(c->err, sizeof c->err, "%s: a dimension exceeds cuBLAS's 32-bit limit", what);
    return -1;
}

static bool fits(int64_t v) { return v >= 0 && v <= INT_MAX; }

typedef struct gemm_op {
    bool t;     // transposed
    int64_t ld; // leading dimension
    int64_t bs; // batch stride (elements)
    const void *p;
} gemm_op;

// C = A B (+ beta C; + bias, a linear's epilogue) through a cuBLASLt plan
// kept by shape: 1 done, 0 no plan for the shape (the caller takes cuBLAS),
// -1 error. Below, with the plans.
static int lt_gemm(cuda_ctx *c, enum dtype t, bool ta, int64_t lda, const void *A, bool tb,
                   int64_t ldb, const void *B, int64_t M, int64_t N, int64_t K, const void *bias,
                   float beta, void *C);

int cuda_gemm(cuda_ctx *c, enum dtype t, bool ta, int64_t lda, int64_t sa, const void *A, bool tb,
              int64_t ldb, int64_t sb, const void *B, int64_t M, int64_t N, int64_t K, float beta,
              void *C, int64_t sc, int64_t count) {
    if (!fits(M) || !fits(N) || !fits(K) || !fits(lda) || !fits(ldb) || !fits(count))
        return too_big(c, "gemm");
    if (t != DT_F32 && t != DT_F16) {
        snprintf(c->err, sizeof c->err, "gemm: dtype %s is not supported", dtype_name(t));
        return -1;
    }
    if (count == 1 && c->use_lt && M > 0 && N > 0 && K > 0) {
        int done = lt_gemm(c, t, ta, lda, A, tb, ldb, B, M, N, K, NULL, beta, C);
        if (done != 0)
            return done < 0 ? -1 : 0;
    }
    cudaDataType dt = t == DT_F16 ? CUDA_R_16F : CUDA_R_32F;
    cublasComputeType_t ct =
        t == DT_F32 && c->allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    float alpha = 1.0f;
    cublasOperation_t ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N, oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (count == 1)
        CUBLAS_CTX(c, cublasGemmEx(c->blas, ob, oa, (int)N, (int)M, (int)K, &alpha, B, dt, (int)ldb,
                                   A, dt, (int)lda, &beta, C, dt, (int)N, ct, CUBLAS_GEMM_DEFAULT));
    else
        CUBLAS_CTX(c,
                   cublasGemmStridedBatchedEx(c->blas, ob, oa, (int)N, (int)M, (int)K, &alpha, B,
                                              dt, (int)ldb, sb, A, dt, (int)lda, sa, &beta, C, dt,
                                              (int)N, sc, (int)count, ct, CUBLAS_GEMM_DEFAULT));
    c->kernels++;
    return 0;
}

static int gemm(cuda_ctx *c, enum dtype t, const gemm_op *A, const gemm_op *B, int64_t M, int64_t N,
                int64_t K, float beta, void *C, int64_t bs_c, int64_t count) {
    return cuda_gemm(c, t, A->t, A->ld, A->bs, A->p, B->t, B->ld, B->bs, B->p, M, N, K, beta, C,
                     bs_c, count);
}

// The operand as BLAS takes it, copied (a counted kernel) when its strides
// do not allow that; *own receives the copy to free, or NULL.
static int operand(cuda_ctx *c, const tensor *t, tensor **own, const tensor **use, bool *trans,
                   int64_t *ld) {
    int nd = t->ndim;
    *own = NULL;
    *use = t;
    if (blas_layout(t->shape[nd - 2], t->shape[nd - 1], t->stride[nd - 2], t->stride[nd - 1], trans,
                    ld))
        return 0;
    if (!(*own = cuda_contiguous(c, t)))
        return -1;
    *use = *own;
    *trans = false;
    *ld = t->shape[nd - 1];
    return 0;
}

static int check_float(cuda_ctx *c, const char *what, const tensor *a, const tensor *b,
                       const tensor *bias) {
    enum dtype t = a->dtype;
    if ((t != DT_F32 && t != DT_F16) || b->dtype != t || (bias && bias->dtype != t)) {
        snprintf(c->err, sizeof c->err,
                 "%s: dtypes %s, %s%s%s are not supported (f32 or f16, all alike)", what,
                 dtype_name(a->dtype), dtype_name(b->dtype), bias ? ", " : "",
                 bias ? dtype_name(bias->dtype) : "");
        return -1;
    }
    return 0;
}

int cuda_matmul(cuda_ctx *c, const tensor *a, const tensor *b, tensor *out) {
    if (check_float(c, "matmul", a, b, NULL) < 0)
        return -1;
    tensor *ownA, *ownB;
    const tensor *A, *B;
    gemm_op oa = {0}, ob = {0};
    if (operand(c, a, &ownA, &A, &oa.t, &oa.ld) < 0)
        return -1;
    if (operand(c, b, &ownB, &B, &ob.t, &ob.ld) < 0) {
        cuda_tensor_free(c, ownA);
        return -1;
    }
    int nd = out->ndim, nb = nd - 2;
    int64_t M = out->shape[nd - 2], N = out->shape[nd - 1], K = a->shape[a->ndim - 1];
    // batch dims of the output with each operand's stride (0: broadcast)
    int64_t bshape[TENSOR_MAX_DIMS], sa[TENSOR_MAX_DIMS], sb[TENSOR_MAX_DIMS], sc[TENSOR_MAX_DIMS];
    int n = 0;
    int64_t batch = 1;
    for (int d = 0; d < nb; d++) {
        if (out->shape[d] == 1)
            continue;
        int da = d - (nd - A->ndim), db = d - (nd - B->ndim);
        bshape[n] = out->shape[d];
        sa[n] = da >= 0 && A->shape[da] == out->shape[d] ? A->stride[da] : 0;
        sb[n] = db >= 0 && B->shape[db] == out->shape[d] ? B->stride[db] : 0;
        n++;
        batch *= out->shape[d];
    }
    for (int d = n - 1; d >= 0; d--) // the output's batch strides, contiguous
        sc[d] = d == n - 1 ? M * N : sc[d + 1] * bshape[d + 1];
    // (..., M, K) @ (K, N) with A's batches and rows evenly strided: one GEMM
    // of (batch * M, K)
    bool b_shared = true, a_folds = !oa.t && n > 0;
    int64_t expect = M * oa.ld;
    for (int d = n - 1; d >= 0; d--) {
        b_shared = b_shared && sb[d] == 0;
        a_folds = a_folds && sa[d] == expect;
        expect *= bshape[d];
    }
    if (a_folds && b_shared) {
        M *= batch;
        n = 0;
    }
    // merge batch dims that every operand steps through evenly
    int m = 0;
    for (int d = 0; d < n; d++) {
        if (m > 0 && sa[m - 1] == sa[d] * bshape[d] && sb[m - 1] == sb[d] * bshape[d] &&
            sc[m - 1] == sc[d] * bshape[d]) {
            bshape[m - 1] *= bshape[d];
            sa[m - 1] = sa[d];
            sb[m - 1] = sb[d];
            sc[m - 1] = sc[d];
        } else {
            bshape[m] = bshape[d];
            sa[m] = sa[d];
            sb[m] = sb[d];
            sc[m] = sc[d];
            m++;
        }
    }
    // the innermost batch dim in each call, a loop over the others
    int64_t inner = m ? bshape[m - 1] : 1, outer = 1;
    for (int d = 0; d < m - 1; d++)
        outer *= bshape[d];
    oa.bs = m ? sa[m - 1] : 0;
    ob.bs = m ? sb[m - 1] : 0;
    size_t es = dtype_size(out->dtype);
    int rc = 0;
    for (int64_t i = 0; i < outer && rc == 0; i++) {
        int64_t offa = 0, offb = 0, offc = 0, rest = i;
        for (int d = m - 2; d >= 0; d--) {
            int64_t k = rest % bshape[d];
            rest /= bshape[d];
            offa += k * sa[d];
            offb += k * sb[d];
            offc += k * sc[d];
        }
        gemm_op xa = oa, xb = ob;
        xa.p = (const char *)tensor_data(A) + offa * (int64_t)es;
        xb.p = (const char *)tensor_data(B) + offb * (int64_t)es;
        rc = gemm(c, out->dtype, &xa, &xb, M, N, K, 0.0f,
                  (char *)tensor_data(out) + offc * (int64_t)es, m ? sc[m - 1] : 0, inner);
    }
    cuda_tensor_free(c, ownA);
    cuda_tensor_free(c, ownB);
    return rc;
}

// ---- cuBLASLt: single GEMMs, a linear with its bias in the epilogue -------------

// A cuBLASLt plan's shape: C (M, N) = A (M, K) B (K, N) row-major, as
// cuda_gemm takes it (a linear: A is x, B the weight transposed). Keys are
// compared bytewise: made with memset first (lt_gemm).
typedef struct lt_key {
    int64_t M, N, K, lda, ldb;
    int ta, tb, dtype;
    int bias;     // the bias epilogue (a linear), else none
    int align[4]; // bytes the pointers are aligned to: B side, A side, out, bias (at most 256)
} lt_key;

static int align_of(const void *p) {
    int a = 1;
    while (a < 256 && ((uintptr_t)p & (uintptr_t)(2 * a - 1)) == 0)
        a *= 2;
    return a;
}

typedef struct lt_plan {
    lt_key key;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc; // la: the first operand (x's weight), lb: x, lc: out
    cublasLtMatmulAlgo_t algo;
    bool ok; // a heuristic found an algorithm
    struct lt_plan *next;
} lt_plan;

struct cuda_lt {
    lt_plan *head;
};

static void plan_free(lt_plan *p) {
    if (p->op)
        cublasLtMatmulDescDestroy(p->op);
    if (p->la)
        cublasLtMatrixLayoutDestroy(p->la);
    if (p->lb)
        cublasLtMatrixLayoutDestroy(p->lb);
    if (p->lc)
        cublasLtMatrixLayoutDestroy(p->lc);
    free(p);
}

void cuda_blas_free(cuda_ctx *c) {
    if (!c->ltc)
        return;
    for (lt_plan *p = c->ltc->head, *nx; p; p = nx) {
        nx = p->next;
        plan_free(p);
    }
    free(c->ltc);
    c->ltc = NULL;
}

static int plan_init(cuda_ctx *c, lt_plan *p) {
    const lt_key *k = &p->key;
    cudaDataType dt = k->dtype == DT_F16 ? CUDA_R_16F : CUDA_R_32F;
    cublasComputeType_t ct =
        k->dtype == DT_F32 && c->allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    cublasOperation_t first = k->tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                      second = k->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtEpilogue_t epi = k->bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    CUBLASLT_CTX(c, cublasLtMatmulDescCreate(&p->op, ct, CUDA_R_32F));
    CUBLASLT_CTX(c, cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &first,
                                                   sizeof first));
    CUBLASLT_CTX(c, cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &second,
                                                   sizeof second));
    CUBLASLT_CTX(
        c, cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    // column-major as stored: the weight side (N, K) or (K, N), x (K, M) or (M, K), out (N, M)
    CUBLASLT_CTX(c, cublasLtMatrixLayoutCreate(&p->la, dt, k->tb ? k->K : k->N, k->tb ? k->N : k->K,
                                               k->ldb));
    CUBLASLT_CTX(c, cublasLtMatrixLayoutCreate(&p->lb, dt, k->ta ? k->M : k->K, k->ta ? k->K : k->M,
                                               k->lda));
    CUBLASLT_CTX(c, cublasLtMatrixLayoutCreate(&p->lc, dt, k->N, k->M, k->N));
    cublasLtMatmulPreference_t pref;
    CUBLASLT_CTX(c, cublasLtMatmulPreferenceCreate(&pref));
    size_t ws = LT_WORKSPACE;
    cublasStatus_t s = cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    // views need not sit on 256-byte boundaries, the heuristic's default
    static const cublasLtMatmulPreferenceAttributes_t al[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES};
    for (int i = 0; i < 4 && s == CUBLAS_STATUS_SUCCESS; i++) {
        uint32_t v = (uint32_t)k->align[i < 3 ? i : 2];
        s = cublasLtMatmulPreferenceSetAttribute(pref, al[i], &v, sizeof v);
    }
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulAlgoGetHeuristic(c->lt, p->op, p->la, p->lb, p->lc, p->lc, pref, 1, &res,
                                           &found);
    cublasLtMatmulPreferenceDestroy(pref);
    // no algorithm for this shape is not an error: cuBLAS takes it instead
    p->ok = s == CUBLAS_STATUS_SUCCESS && found > 0;
    if (p->ok)
        p->algo = res.algo;
    return 0;
}

static lt_plan *plan_get(cuda_ctx *c, const lt_key *k) {
    if (!c->ltc && !(c->ltc = calloc(1, sizeof *c->ltc))) {
        snprintf(c->err, sizeof c->err, "out of host memory for cuBLASLt plans");
        return NULL;
    }
    for (lt_plan *p = c->ltc->head; p; p = p->next)
        if (memcmp(&p->key, k, sizeof *k) == 0)
            return p;
    lt_plan *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(c->err, sizeof c->err, "out of host memory for a cuBLASLt plan");
        return NULL;
    }
    p->key = *k;
    if (plan_init(c, p) < 0) {
        plan_free(p);
        return NULL;
    }
    p->next = c->ltc->head;
    c->ltc->head = p;
    return p;
}

static int lt_gemm(cuda_ctx *c, enum dtype t, bool ta, int64_t lda, const void *A, bool tb,
                   int64_t ldb, const void *B, int64_t M, int64_t N, int64_t K, const void *bias,
                   float beta, void *C) {
    lt_key k;
    memset(&k, 0, sizeof k); // compared bytewise, padding too
    k.M = M, k.N = N, k.K = K, k.lda = lda, k.ldb = ldb;
    k.ta = ta, k.tb = tb, k.dtype = t, k.bias = bias != NULL;
    k.align[0] = align_of(B);
    k.align[1] = align_of(A);
    k.align[2] = align_of(C);
    k.align[3] = bias ? align_of(bias) : 0;
    lt_plan *p = plan_get(c, &k);
    if (!p)
        return -1;
    if (!p->ok)
        return 0;
    void *ws = cuda_workspace(c, LT_WORKSPACE);
    if (!ws)
        return -1;
    float alpha = 1.0f;
    if (bias)
        CUBLASLT_CTX(c, cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                       &bias, sizeof bias));
    CUBLASLT_CTX(c, cublasLtMatmul(c->lt, p->op, &alpha, B, p->la, A, p->lb, &beta, C, p->lc, C,
                                   p->lc, &p->algo, ws, LT_WORKSPACE, c->stream));
    c->kernels++;
    return 1;
}

int cuda_linear(cuda_ctx *c, const tensor *x, const tensor *w, const tensor *bias, tensor *out) {
    if (check_float(c, "linear", x, w, bias) < 0)
        return -1;
    int nd = x->ndim;
    int64_t K = x->shape[nd - 1], N = w->shape[0], M = tensor_numel(x) / K;
    // x as (M, K): the leading dims must collapse into one row stride
    bool rows_ok = K == 1 || x->stride[nd - 1] == 1;
    int64_t lda = K, span = 0;
    for (int d = nd - 2; d >= 0 && rows_ok; d--) {
        if (x->shape[d] == 1)
            continue;
        if (span == 0) {
            lda = x->stride[d];
            span = lda * x->shape[d];
        } else {
            rows_ok = x->stride[d] == span;
            span *= x->shape[d];
        }
    }
    rows_ok = rows_ok && lda >= K;
    tensor *ownX = NULL, *ownW = NULL;
    gemm_op oa = {.ld = rows_ok ? lda : K, .p = tensor_data(x)}, ob = {0};
    if (!rows_ok) {
        if (!(ownX = cuda_contiguous(c, x)))
            return -1;
        oa.p = tensor_data(ownX);
    }
    // B = w^T, (K, N) with strides (w.stride[1], w.stride[0])
    ob.p = tensor_data(w);
    if (!blas_layout(K, N, w->stride[1], w->stride[0], &ob.t, &ob.ld)) {
        if (!(ownW = cuda_contiguous(c, w))) {
            cuda_tensor_free(c, ownX);
            return -1;
        }
        ob.p = tensor_data(ownW);
        ob.t = true;
        ob.ld = K;
    }
    int rc = 0, done = 0;
    if (bias && c->use_lt && tensor_is_contiguous(bias) && M > 0 && N > 0 && K > 0) {
        done = lt_gemm(c, x->dtype, oa.t, oa.ld, oa.p, ob.t, ob.ld, ob.p, M, N, K,
                       tensor_data(bias), 0.0f, tensor_data(out));
        rc = done < 0 ? -1 : 0;
    }
    if (rc == 0 && !done) {
        float beta = 0.0f;
        if (bias) { // addmm: the bias broadcast into the output, then C += A B
            tensor *bv = tensor_expand(bias, out->ndim, out->shape);
            rc = bv ? cuda_copy(c, bv, out) : -1;
            if (!bv)
                snprintf(c->err, sizeof c->err, "out of host memory for a view");
            cuda_tensor_free(c, bv);
            beta = 1.0f;
        }
        if (rc == 0)
            rc = gemm(c, out->dtype, &oa, &ob, M, N, K, beta, tensor_data(out), 0, 1);
    }
    cuda_tensor_free(c, ownX);
    cuda_tensor_free(c, ownW);
    return rc;
}
