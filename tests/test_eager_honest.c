// Guards for an honest eager mode (issue: numbers you can trust):
// - every GEMM with work enough is split over OpenMP's threads, never left
//   to OpenBLAS's own threading (cpu_gemm_par.h), for every shape;
// - every smoke model's eager step, inference and training, gives the same
//   outputs on 1 and 2 threads (column and row blocks included);
// - the caching allocator: size classes, reuse, and no system allocation
//   in a steady eager step, whether or not the fp64 reference (the accuracy
//   check) ran before it in the process.
// Timing is not tested here (machines are noisy): `tcbench run` warns when
// 2-thread eager is more than 1.5x slower than 1-thread eager.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "autodiff/autograd.h"
#include "backend/cpu/cpu_gemm_par.h"
#include "eager/eager.h"
#include "model/model_prepare.h"
#include "model/modeldef.h"
#include "ref/ref.h"
#include "model/suite.h"

// ---- the GEMM split --------------------------------------------------------------

// For every shape and thread count: a GEMM below the work threshold is one
// call; any other with more than one output element is cut into at least
// two blocks, along one side only, each block non-empty.
static void test_gemm_split_plan(void **state) {
    (void)state;
    const int64_t dims[] = {1, 2, 3, 7, 16, 31, 34, 64, 65, 100, 128, 197, 512, 1000, 4096};
    const int nd = (int)(sizeof dims / sizeof dims[0]);
    for (int nt = 1; nt <= 16; nt *= 2)
        for (int i = 0; i < nd; i++)
            for (int j = 0; j < nd; j++)
                for (int k = 0; k < nd; k++) {
                    int64_t M = dims[i], N = dims[j], K = dims[k];
                    cpu_gemm_split s = cpu_gemm_split_plan(M, N, K, nt);
                    assert_true(s.rows >= 1 && s.cols >= 1);
                    assert_true(s.rows == 1 || s.cols == 1);
                    assert_true(s.rows <= nt && s.cols <= nt);
                    assert_true(s.rows <= M && s.cols <= N);
                    bool big = (double)M * N * K >= CPU_GEMM_PAR_WORK;
                    if (nt == 1 || !big)
                        assert_int_equal(s.rows * s.cols, 1);
                    else if (M * N >= 2)
                        assert_true(s.rows * s.cols >= 2);
                }
    // vit's training GEMMs that stalled: 64 rows or fewer, the work in K or N
    cpu_gemm_split s = cpu_gemm_split_plan(64, 64, 544, 2);
    assert_int_equal(s.rows * s.cols, 2);
    s = cpu_gemm_split_plan(34, 256, 64, 2);
    assert_int_equal(s.cols, 2);
}

// cpu_sgemm_par against a plain single-threaded GEMM, in every split, with
// transposed operands, padded leading dimensions, beta 0.5 and beta 0 (C
// NaN, never read); the first
// shapes (M at most CPU_GEMV_ROWS) take the matrix-vector kernels: column
// counts past whole blocks of 64 and 16, K past a multiple of 16, split
// over the threads or not.
static void test_gemm_par_matches(void **state) {
    (void)state;
    const int64_t shapes[][3] = {{1, 300, 400}, {4, 77, 131}, {2, 1000, 33}, {3, 2, 70000},
                                 {1, 5, 7},     {5, 300, 400}, {200, 9, 300}, {40, 40, 900}};
    int threads = omp_get_max_threads();
    omp_set_num_threads(2);
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (int ta = 111; ta <= 112; ta++)
            for (int tb = 111; tb <= 112; tb++)
                for (int64_t pad = 0; pad <= 5; pad += 5) {
                    // beta 0 with C's padding as set and its body NaN: never read
                    float beta = pad ? 0.0f : 0.5f;
                    int64_t M = shapes[si][0], N = shapes[si][1], K = shapes[si][2];
                    int64_t lda = (ta == 112 ? M : K) + pad, ldb = (tb == 112 ? K : N) + pad,
                            ldc = N + pad;
                    float *a = malloc((size_t)((ta == 112 ? K : M) * lda) * sizeof *a);
                    float *b = malloc((size_t)((tb == 112 ? N : K) * ldb) * sizeof *b);
                    float *c = malloc((size_t)(M * ldc) * sizeof *c);
                    double *want = malloc((size_t)(M * N) * sizeof *want);
                    assert_true(a && b && c && want);
                    for (int64_t i = 0; i < (ta == 112 ? K : M) * lda; i++)
                        a[i] = (float)((i * 7 % 13) - 6) / 8;
                    for (int64_t i = 0; i < (tb == 112 ? N : K) * ldb; i++)
                        b[i] = (float)((i * 5 % 11) - 5) / 8;
                    for (int64_t i = 0; i < M * ldc; i++)
                        c[i] = beta == 0 && i % ldc < N ? NAN : 1.0f;
                    for (int64_t m = 0; m < M; m++)
                        for (int64_t n = 0; n < N; n++) {
                            double acc = beta; // beta * c
                            for (int64_t k = 0; k < K; k++)
                                acc += (double)a[ta == 112 ? k * lda + m : m * lda + k] *
                                       b[tb == 112 ? n * ldb + k : k * ldb + n];
                            want[m * N + n] = acc;
                        }
                    cpu_sgemm_par(ta, tb, M, N, K, a, lda, b, ldb, beta, c, ldc);
                    for (int64_t m = 0; m < M; m++)
                        for (int64_t n = 0; n < ldc; n++) {
                            double w = n < N ? want[m * N + n] : 1.0; // padding untouched
                            float got = c[m * ldc + n];
                            if (fabs(got - w) > 1e-5 * (1 + fabs(w)) * sqrt((double)K))
                                fail_msg("M %lld N %lld K %lld ta %d tb %d pad %lld: c(%lld, "
                                         "%lld) = %g, want %g",
                                         (long long)M, (long long)N, (long long)K, ta, tb,
                                         (long long)pad, (long long)m, (long long)n, got, w);
                        }
                    free(a);
                    free(b);
                    free(c);
                    free(want);
                }
    omp_set_num_threads(threads);
}

// ---- the smoke models ------------------------------------------------------------

typedef struct smoke {
    suite *s;
    modeldef *md[32];
} smoke;

static smoke *smoke_load(void) {
    const char *root = getenv("TCBENCH_SOURCE_DIR");
    assert_non_null(root);
    char path[600];
    snprintf(path, sizeof path, "%s/suites/smoke.yaml", root);
    smoke *sm = calloc(1, sizeof *sm);
    assert_non_null(sm);
    diag d;
    if (suite_load(path, NULL, &sm->s, &d) < 0)
        fail_msg("%s:%d:%d: %s", path, d.line, d.col, d.msg);
    assert_true(sm->s->ncases <= 32);
    for (int i = 0; i < sm->s->ncases; i++)
        if (modeldef_load(sm->s->cases[i].model_path, &sm->md[i], &d) < 0)
            fail_msg("%s: %s", sm->s->cases[i].name, d.msg);
    return sm;
}

static void smoke_free(smoke *sm) {
    for (int i = 0; i < sm->s->ncases; i++)
        modeldef_free(sm->md[i]);
    suite_free(sm->s);
    free(sm);
}

static model *smoke_model(smoke *sm, int ci, bool train) {
    const suite_case *sc = &sm->s->cases[ci];
    train_opts o = train_opts_default();
    model *m;
    char err[600];
    enum model_prep_step s =
        model_prepare(sm->md[ci], sc->overrides, sc->noverrides, sc->batch,
                      &(model_prep){.train = train ? &o : NULL, .seed = 5}, &m, err, sizeof err);
    if (s != MODEL_PREP_DONE)
        fail_msg("%s: %s: %s", sc->name, model_prep_step_name(s), err);
    return m;
}

// One eager step of a fresh model on `threads` threads: its outputs, as
// f64 copies (out[i], lengths n[i]; the caller frees them), and their count.
static int eager_outputs(smoke *sm, int ci, bool train, int threads, double **out, int64_t *n) {
    model *m = smoke_model(sm, ci, train);
    int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    eager *e = eager_new(m);
    assert_non_null(e);
    tensor *o[512];
    assert_true(m->g->noutputs <= 512);
    eager_set_step(e, 1);
    if (eager_run(e, o, NULL) < 0)
        fail_msg("%s: eager on %d threads: %s", sm->s->cases[ci].name, threads, eager_error(e));
    for (int i = 0; i < m->g->noutputs; i++) {
        n[i] = tensor_numel(o[i]);
        out[i] = malloc((size_t)(n[i] ? n[i] : 1) * sizeof **out);
        assert_non_null(out[i]);
        for (int64_t j = 0; j < n[i]; j++)
            out[i][j] = tensor_get_flat(o[i], j);
        tensor_free(o[i]);
    }
    int nout = m->g->noutputs;
    eager_free(e);
    omp_set_num_threads(saved);
    model_free(m);
    return nout;
}

// Every smoke model's eager step, inference and training, on 1 and 2
// threads: the same outputs up to summation order (a relative L2
// difference of 1e-4 per output; gradients of a training step included).
static void test_smoke_threads_agree(void **state) {
    (void)state;
    smoke *sm = smoke_load();
    for (int train = 0; train <= 1; train++)
        for (int ci = 0; ci < sm->s->ncases; ci++) {
            double *o1[512], *o2[512];
            int64_t n1[512], n2[512];
            int nout = eager_outputs(sm, ci, train, 1, o1, n1);
            assert_int_equal(eager_outputs(sm, ci, train, 2, o2, n2), nout);
            for (int i = 0; i < nout; i++) {
                assert_int_equal(n1[i], n2[i]);
                double d2 = 0, r2 = 0;
                for (int64_t j = 0; j < n1[i]; j++) {
                    d2 += (o1[i][j] - o2[i][j]) * (o1[i][j] - o2[i][j]);
                    r2 += o1[i][j] * o1[i][j];
                }
                if (!(sqrt(d2) <= 1e-4 * sqrt(r2) + 1e-30))
                    fail_msg("%s %s output %d: 1 and 2 threads differ by %g (relative L2)",
                             sm->s->cases[ci].name, train ? "train" : "infer", i,
                             sqrt(d2 / (r2 > 0 ? r2 : 1)));
                free(o1[i]);
                free(o2[i]);
            }
        }
    smoke_free(sm);
}

// ---- the caching allocator ---------------------------------------------------------

static void test_cache_classes(void **state) {
    (void)state;
    tensor_cache_stats st0 = tensor_cache_get_stats();
    if (!st0.enabled)
        skip(); // TCBENCH_DISABLE_ALLOC_CACHE is set
    // a freed buffer is served again to a request of the same class
    const int64_t sizes[] = {1, 15, 16, 17, 255, 1000, 4097, 100000, 3000000};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        int64_t n = sizes[i];
        tensor *a = tensor_new_empty(DT_F32, 1, &n);
        assert_non_null(a);
        void *p = a->storage->data;
        size_t live = tensor_mem_live();
        assert_int_equal(a->storage->bytes, ((size_t)n * 4 + 63) / 64 * 64);
        tensor_free(a);
        assert_int_equal(tensor_mem_live(), live - ((size_t)n * 4 + 63) / 64 * 64);
        tensor_cache_stats st = tensor_cache_get_stats();
        tensor *b = tensor_new(DT_F32, 1, &n);
        assert_ptr_equal(b->storage->data, p);
        assert_int_equal(tensor_cache_get_stats().hits, st.hits + 1);
        for (int64_t j = 0; j < n; j++)
            assert_true(tensor_f32(b)[j] == 0.0f); // tensor_new still zeroes
        tensor_free(b);
    }
    // a request 25% larger than a cached block's class does not take it
    int64_t n = 1 << 20;
    tensor *a = tensor_new_empty(DT_F32, 1, &n);
    void *p = a->storage->data;
    tensor_free(a);
    int64_t bigger = n + n / 4 + 16;
    tensor *b = tensor_new_empty(DT_F32, 1, &bigger);
    assert_true(b->storage->data != p);
    tensor_free(b);
    tensor_cache_release();
    assert_int_equal(tensor_cache_get_stats().cached_bytes, 0);
}

// Steps 3 and 4 of eager on every smoke model, inference and training,
// allocate nothing from the system: every buffer comes from the cache. The
// same holds after the fp64 reference (the accuracy check) ran first in
// the process, and with the cache emptied first: what ran before does not
// change how a steady step gets its memory.
static void steady_steps(smoke *sm, int ci, bool train, bool reference_first) {
    model *m = smoke_model(sm, ci, train);
    if (reference_first) {
        char err[400];
        double **ref = ref_run_all(m, err, sizeof err);
        if (!ref)
            fail_msg("%s: reference: %s", sm->s->cases[ci].name, err);
        for (int i = 0; i < m->g->n; i++) // every node's values (ref_run_all)
            free(ref[i]);
        free(ref);
    } else {
        tensor_cache_release();
    }
    eager *e = eager_new(m);
    tensor *o[512];
    int64_t misses = 0;
    for (int t = 1; t <= 4; t++) {
        if (t == 3)
            misses = tensor_cache_get_stats().misses;
        eager_set_step(e, (uint64_t)t);
        if (eager_run(e, o, NULL) < 0)
            fail_msg("%s: eager: %s", sm->s->cases[ci].name, eager_error(e));
        for (int i = 0; i < m->g->noutputs; i++)
            tensor_free(o[i]);
    }
    int64_t more = tensor_cache_get_stats().misses - misses;
    if (more != 0)
        fail_msg("%s %s%s: %lld system allocations in steady steps 3 and 4", sm->s->cases[ci].name,
                 train ? "train" : "infer", reference_first ? " after the reference" : "",
                 (long long)more);
    eager_free(e);
    model_free(m);
}

static void test_cache_steady_steps(void **state) {
    (void)state;
    if (!tensor_cache_get_stats().enabled)
        skip();
    smoke *sm = smoke_load();
    for (int train = 0; train <= 1; train++)
        for (int ci = 0; ci < sm->s->ncases; ci++)
            for (int rf = 0; rf <= 1; rf++)
                steady_steps(sm, ci, train, rf);
    smoke_free(sm);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_split_plan),     cmocka_unit_test(test_gemm_par_matches),
        cmocka_unit_test(test_smoke_threads_agree), cmocka_unit_test(test_cache_classes),
        cmocka_unit_test(test_cache_steady_steps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
