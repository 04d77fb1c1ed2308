// The parts of the CUDA backend that need no GPU: the caching allocator's
// bookkeeping (rounding, segments, splitting, merging, stream-ordered reuse,
// live / peak / reserved counts, out-of-memory recovery) on a malloc
// backend, and, on this machine, how a missing or unusable GPU is reported:
// a one-line reason with the driver's words, no crash, in every entry point
// (cuda_probe in a child, cuda_probe_here, eager_cuda_new, the timers, the
// device share; with a GPU the share runs: one weight, inputs sent every
// run, an output passed between executors). In a
// build without the backend those do not exist, and the executor registry
// (exec.h) must say so.
#include "tcbench_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_alloc.h"
#include "backend/cuda/cuda_device.h"
#include "compile/cuda_program.h"
#include "core/graph.h"
#include "eager/eager_cuda.h"
#include "exec.h"
#include "model/model.h"

// ---- a malloc backend that counts and can be told to fail ---------------------

typedef struct fake {
    int allocs, frees;
    size_t live, limit; // limit 0: none
} fake;

static int fake_alloc(void *ctx, size_t bytes, void **out, char *err, size_t cap) {
    fake *f = ctx;
    if (f->limit && f->live + bytes > f->limit) {
        snprintf(err, cap, "fake: out of memory");
        return -1;
    }
    *out = malloc(bytes);
    if (!*out) {
        snprintf(err, cap, "malloc failed");
        return -1;
    }
    f->allocs++;
    f->live += bytes;
    return 0;
}

// the segment sizes are needed to keep `live`; a header would shift the
// pointers, so the test tracks them itself
#define MAXSEG 64
static void *seg_ptr[MAXSEG];
static size_t seg_size[MAXSEG];

static void fake_free(void *ctx, void *p) {
    fake *f = ctx;
    for (int i = 0; i < MAXSEG; i++)
        if (seg_ptr[i] == p) {
            f->live -= seg_size[i];
            seg_ptr[i] = NULL;
        }
    f->frees++;
    free(p);
}

static int tracked_alloc(void *ctx, size_t bytes, void **out, char *err, size_t cap) {
    if (fake_alloc(ctx, bytes, out, err, cap) < 0)
        return -1;
    for (int i = 0; i < MAXSEG; i++)
        if (!seg_ptr[i]) {
            seg_ptr[i] = *out;
            seg_size[i] = bytes;
            break;
        }
    return 0;
}

static cuda_alloc *new_alloc(fake *f) {
    memset(seg_ptr, 0, sizeof seg_ptr);
    char err[256];
    cuda_alloc *a =
        cuda_alloc_new((cuda_alloc_backend){tracked_alloc, fake_free, f}, err, sizeof err);
    assert_non_null(a);
    return a;
}

static void *get(cuda_alloc *a, size_t n, const void *stream) {
    void *p = NULL;
    char err[256];
    if (cuda_alloc_get(a, n, stream, &p, err, sizeof err) < 0)
        fail_msg("cuda_alloc_get(%zu): %s", n, err);
    return p;
}

#define S1 ((const void *)0x1)
#define S2 ((const void *)0x2)

static void test_rounding(void **state) {
    (void)state;
    assert_int_equal(cuda_alloc_round(0), 512);
    assert_int_equal(cuda_alloc_round(1), 512);
    assert_int_equal(cuda_alloc_round(512), 512);
    assert_int_equal(cuda_alloc_round(513), 1024);
    assert_int_equal(cuda_alloc_segment_size(512), 2 << 20);
    assert_int_equal(cuda_alloc_segment_size(1 << 20), 2 << 20);
    assert_int_equal(cuda_alloc_segment_size((1 << 20) + 512), 20 << 20);
    assert_int_equal(cuda_alloc_segment_size(12 << 20), 12 << 20);
    assert_int_equal(cuda_alloc_segment_size((12 << 20) + 512), 14 << 20);
}

// small blocks come out of one 2 MiB segment, in address order, and a freed
// block is handed out again without a new segment
static void test_small_pool_reuse(void **state) {
    (void)state;
    fake f = {0};
    cuda_alloc *a = new_alloc(&f);
    char *p = get(a, 1000, S1), *q = get(a, 100, S1);
    assert_int_equal(f.allocs, 1);
    assert_ptr_equal(q, p + 1024);
    cuda_alloc_stats st;
    cuda_alloc_get_stats(a, &st);
    assert_int_equal(st.live_bytes, 1024 + 512);
    assert_int_equal(st.requested_bytes, 1100);
    assert_int_equal(st.reserved_bytes, 2 << 20);
    assert_int_equal(st.segments, 1);
    cuda_alloc_put(a, p);
    char *r = get(a, 900, S1); // best fit: p's 1024-byte hole
    assert_ptr_equal(r, p);
    assert_int_equal(f.allocs, 1);
    cuda_alloc_get_stats(a, &st);
    assert_int_equal(st.gets, 3);
    assert_int_equal(st.hits, 2); // q and r came from cached memory
    cuda_alloc_put(a, q);
    cuda_alloc_put(a, r);
    cuda_alloc_get_stats(a, &st);
    assert_int_equal(st.live_bytes, 0);
    cuda_alloc_free(a);
    assert_int_equal(f.frees, 1);
    assert_int_equal(f.live, 0);
}

// neighbours merge back into one block: the whole segment serves a request
// as large as it afterwards
static void test_merge(void **state) {
    (void)state;
    fake f = {0};
    cuda_alloc *a = new_alloc(&f);
    void *p[4];
    for (int i = 0; i < 4; i++)
        p[i] = get(a, 256 << 10, S1); // 4 x 256 KiB of one 2 MiB segment
    assert_int_equal(f.allocs, 1);
    cuda_alloc_put(a, p[1]);
    cuda_alloc_put(a, p[3]);
    cuda_alloc_put(a, p[2]); // merges with both neighbours and the tail
    cuda_alloc_put(a, p[0]);
    void *big = get(a, 1 << 20, S1); // the small pool's largest request
    assert_ptr_equal(big, p[0]);
    assert_int_equal(f.allocs, 1);
    cuda_alloc_put(a, big);
    cuda_alloc_trim(a); // the segment is all free: given back
    cuda_alloc_stats st;
    cuda_alloc_get_stats(a, &st);
    assert_int_equal(st.reserved_bytes, 0);
    assert_int_equal(st.segments, 0);
    assert_int_equal(f.frees, 1);
    cuda_alloc_free(a);
}

// a block is reused only for the stream it was made for
static void test_streams(void **state) {
    (void)state;
    fake f = {0};
    cuda_alloc *a = new_alloc(&f);
    void *p = get(a, 4096, S1);
    cuda_alloc_put(a, p);
    void *q = get(a, 4096, S2);
    assert_ptr_not_equal(q, p);
    assert_int_equal(f.allocs, 2);
    void *r = get(a, 4096, S1);
    assert_ptr_equal(r, p);
    cuda_alloc_put(a, q);
    cuda_alloc_put(a, r);
    cuda_alloc_free(a);
}

// large requests: 20 MiB segments below 10 MiB, split when the rest is
// more than 1 MiB; above, segments of the request rounded to 2 MiB
static void test_large_pool(void **state) {
    (void)state;
    fake f = {0};
    cuda_alloc *a = new_alloc(&f);
    char *p = get(a, 3 << 20, S1), *q = get(a, 4 << 20, S1);
    assert_int_equal(f.allocs, 1);
    assert_ptr_equal(q, p + (3 << 20));
    void *big = get(a, (30 << 20) + 1, S1);
    assert_int_equal(f.allocs, 2);
    cuda_alloc_stats st;
    cuda_alloc_get_stats(a, &st);
    assert_int_equal(st.reserved_bytes, (20 << 20) + (32 << 20));
    void *small = get(a, 4096, S1); // never from the large pool
    assert_int_equal(f.allocs, 3);
    cuda_alloc_put(a, p);
    cuda_alloc_put(a, q);
    cuda_alloc_put(a, big);
    cuda_alloc_put(a, small);
    cuda_alloc_free(a);
    assert_int_equal(f.live, 0);
}

static void test_peak(void **state) {
    (void)state;
    fake f = {0};
    cuda_alloc *a = new_alloc(&f);
    void *p = get(a, 1 << 20, S1), *q = get(a, 1 << 20, S1);
    cuda_alloc_put(a, p);
    cuda_alloc_stats st;
    cuda_alloc_get_stats(a, &st);
    assert_int_equal(st.peak_bytes, 2 << 20);
    assert_int_equal(st.live_bytes, 1 << 20);
    cuda_alloc_reset_peak(a);
    cuda_alloc_get_stats(a, &st);
    assert_int_equal(st.peak_bytes, 1 << 20);
    cuda_alloc_put(a, q);
    cuda_alloc_free(a);
}

// Out of memory: cached free segments are released and the request retried;
// when that is not enough the error names the request and the counts.
static void test_out_of_memory(void **state) {
    (void)state;
    fake f = {.limit = 24 << 20};
    cuda_alloc *a = new_alloc(&f);
    void *p = get(a, 4 << 20, S1);  // one 20 MiB segment
    cuda_alloc_put(a, p);           // cached, not returned
    void *q = get(a, 22 << 20, S1); // too big for the cached block; fits once it is released
    assert_non_null(q);
    assert_int_equal(f.frees, 1);
    void *r = NULL;
    char err[256];
    assert_int_equal(cuda_alloc_get(a, 16 << 20, S1, &r, err, sizeof err), -1);
    assert_null(r);
    assert_non_null(strstr(err, "out of memory"));
    assert_non_null(strstr(err, "fake: out of memory")); // the backend's words
    assert_non_null(strstr(err, "16777216"));
    cuda_alloc_put(a, q);
    cuda_alloc_free(a);
}

// Many blocks in and out in a shuffled order: the table of live blocks and
// the free lists stay consistent and everything merges back.
static void test_churn(void **state) {
    (void)state;
    fake f = {0};
    cuda_alloc *a = new_alloc(&f);
    enum { N = 600 };
    void *p[N] = {0};
    uint64_t x = 88172645463325252ull;
    for (int round = 0; round < 20000; round++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int i = (int)(x % N);
        if (p[i]) {
            cuda_alloc_put(a, p[i]);
            p[i] = NULL;
        } else {
            size_t sz =
                (x >> 20) % 3 == 0 ? (size_t)((x >> 24) % (3 << 20)) : (size_t)((x >> 24) % 8192);
            p[i] = get(a, sz, (x >> 40) & 1 ? S1 : S2);
            memset(p[i], 0xab, sz ? 1 : 0);
        }
    }
    for (int i = 0; i < N; i++)
        cuda_alloc_put(a, p[i]);
    cuda_alloc_stats st;
    cuda_alloc_get_stats(a, &st);
    assert_int_equal(st.live_bytes, 0);
    assert_int_equal(st.requested_bytes, 0);
    cuda_alloc_trim(a);
    cuda_alloc_get_stats(a, &st);
    assert_int_equal(st.reserved_bytes, 0);
    assert_int_equal(f.live, 0);
    cuda_alloc_free(a);
}

// ---- no GPU here: every entry point reports it, nothing crashes -----------------

// decided once, before any test touches CUDA in this process: a probe
// forks, and a child of a process with a CUDA context cannot use CUDA
static bool gpu_present;

// y = relu(x), x: (4)
static model *tiny_relu(void) {
    graph *g = graph_new();
    int x = graph_input(g, "x", DT_F32, 1, (int64_t[]){4});
    graph_output(g, graph_unary(g, OP_RELU, x));
    model *m = model_new(g, "tiny", "mlp", 1);
    assert_int_equal(model_init_values(m, 1), 0);
    return m;
}

#if TCBENCH_HAVE_CUDA
static int skip_if_gpu(void) { return gpu_present; }

static void test_probe_reports_reason(void **state) {
    (void)state;
    char why[512] = "";
    if (gpu_present) {
        print_message("a usable GPU is present: nothing to check here\n");
        return;
    }
    int rc = cuda_probe(why, sizeof why);
    if (rc == 0) {
        print_message("a usable GPU is present: nothing to check here\n");
        return;
    }
    assert_int_equal(rc, -1);
    assert_true(strlen(why) > 10);
    assert_null(strchr(why, '\n')); // one line
    // the driver's words come with the call that failed
    assert_true(strstr(why, "cudaGetDeviceCount: ") || strstr(why, "compute capability") ||
                strstr(why, "not usable") || strstr(why, "TCBENCH_CUDA_DEVICE"));
    print_message("cuda_probe: %s\n", why);
    // in this process too, and twice: no state left behind that crashes
    char why2[512] = "";
    assert_int_equal(cuda_probe_here(why2, sizeof why2), -1);
    assert_string_equal(why, why2);
    assert_int_equal(cuda_probe_here(why2, sizeof why2), -1);
    // a tiny buffer is truncated, never overrun
    char tiny[8];
    assert_int_equal(cuda_probe(tiny, sizeof tiny), -1);
    assert_int_equal(strlen(tiny), 7);
}

static void test_bad_device_env(void **state) {
    (void)state;
    setenv("TCBENCH_CUDA_DEVICE", "abc", 1);
    char why[512];
    int rc = cuda_probe_here(why, sizeof why);
    unsetenv("TCBENCH_CUDA_DEVICE");
    assert_int_equal(rc, -1);
    assert_non_null(strstr(why, "TCBENCH_CUDA_DEVICE"));
}

static void test_eager_without_gpu(void **state) {
    (void)state;
    if (skip_if_gpu())
        skip();
    model *m = tiny_relu();
    eager_cuda *e = (eager_cuda *)0x1;
    char err[512] = "";
    assert_int_equal(eager_cuda_new(m, NULL, &e, err, sizeof err), -1);
    assert_null(e);
    assert_true(strlen(err) > 10);
    print_message("eager_cuda_new: %s\n", err);
    eager_cuda_free(NULL);
    // the compiled mode: the passes and the code generation run, then the
    // missing GPU is reported the same way
    cuda_program *cp = (cuda_program *)0x1;
    err[0] = 0;
    compile_opts o = {.fusion = true, .capture = true};
    assert_int_equal(cuda_program_new(m, &o, false, &cp, err, sizeof err), -1);
    assert_null(cp);
    assert_true(strlen(err) > 10);
    print_message("cuda_program_new: %s\n", err);
    model_free(m);
}

static void test_timer_without_gpu(void **state) {
    (void)state;
    if (skip_if_gpu())
        skip();
    cuda_timer *t = NULL;
    char err[512] = "";
    int rc = cuda_timer_new(&t, err, sizeof err);
    if (rc == 0) { // events need a context; creating one must have failed
        cuda_timer_free(t);
        fail_msg("cuda_timer_new succeeded without a GPU");
    }
    assert_true(strlen(err) > 10);
    assert_int_equal(cuda_l2_flush(NULL, err, sizeof err), -1);
    cuda_timer_free(t);
    cuda_device_info info;
    assert_int_equal(cuda_device_query(&info, err, sizeof err), -1);
    // named call, file and line
    assert_non_null(strstr(err, "cudaGetDeviceProperties(&p, dev) failed at cuda_rt.c:"));
}
#endif

// The registry: the executors this build has, each found by its device and
// family; the CPU's run here; a CUDA one without the backend fails naming
// the build option, and without a GPU with the driver's reason.
static void test_registry(void **state) {
    (void)state;
    int n, ncuda = 0;
    char err[512] = "";
    const exec_iface *const *all = exec_list(&n);
    for (int k = 0; k < n; k++) {
        ncuda += strcmp(all[k]->device, "cuda") == 0;
        assert_ptr_equal(exec_find(all[k]->device, all[k]->family, err, sizeof err), all[k]);
    }
    assert_int_equal(ncuda, TCBENCH_HAVE_CUDA ? 2 : 0);
    assert_int_equal(n, 2 + ncuda);
    assert_true(exec_device_built("cpu"));
    assert_int_equal(exec_device_built("cuda"), TCBENCH_HAVE_CUDA);
    assert_int_equal(exec_device_probe("cpu", err, sizeof err), 0);
    assert_null(exec_find("tpu", "eager", err, sizeof err));
    assert_string_equal(err, "unknown device 'tpu'; expected cpu or cuda");
    assert_null(exec_find("cpu", "jit", err, sizeof err));
    assert_string_equal(err, "no jit executor on cpu; expected eager or compiled");

    model *m = tiny_relu();
    exec *x;
    assert_int_equal(exec_new("cpu", "eager", m, NULL, &x, err, sizeof err), 0);
    tensor *out[1];
    exec_stats st;
    exec_set_step(x, 1);
    assert_int_equal(exec_run(x, out, &st), 0);
    assert_int_equal(st.kernels, 1);
    assert_true(tensor_f32(out[0])[0] >= 0);
    tensor_free(out[0]);
    assert_int_equal(exec_run(x, NULL, NULL), 0); // dropped, freed: ASan's to check
    assert_int_equal(exec_sync(x), 0);
    assert_false(exec_has_clock(x));
    assert_int_equal(exec_sample_start(x, false), -1);
    assert_string_equal(exec_error(x), "cpu eager has no device clock; time it on the host");
    assert_int_equal(exec_outputs(x, out), -1);
    assert_string_equal(exec_iface_of(x)->call, "eager_run");
    exec_free(x);

    x = (exec *)0x1;
    err[0] = '\0';
    int rc = exec_new("cuda", "eager", m, NULL, &x, err, sizeof err);
    if (rc == 0) { // a GPU: its steps run, timed by its clock
        assert_true(gpu_present && exec_has_clock(x));
        double s = -1;
        assert_int_equal(exec_sample_start(x, true), 0);
        assert_int_equal(exec_run(x, NULL, &st), 0);
        assert_int_equal(exec_sample_stop(x, &s), 0);
        assert_true(s >= 0);
        exec_free(x);
        model_free(m);
        return;
    }
    assert_null(x);
    print_message("exec_new cuda eager: %s\n", err);
    char why[512] = "";
    assert_int_equal(exec_device_probe("cuda", why, sizeof why), -1);
    if (TCBENCH_HAVE_CUDA) { // the probe's reason, in the executor's call
        char want[600];
        snprintf(want, sizeof want, "eager_cuda_new: %s", why);
        assert_string_equal(err, want);
    } else {
        assert_non_null(strstr(err, "built without the CUDA backend"));
        assert_non_null(strstr(err, "reconfigure with -Dcuda=enabled"));
        assert_string_equal(why, err);
        assert_null(exec_find("cuda", "compiled", err, sizeof err));
        assert_string_equal(err, why);
    }
    model_free(m);
}

// y = relu(x * w), x: (4) an input, w: (4) a parameter named "w"
static model *tiny_scaled(void) {
    graph *g = graph_new();
    int x = graph_input(g, "x", DT_F32, 1, (int64_t[]){4});
    int w = graph_param(g, "w", 1, (int64_t[]){4}, INIT_NORMAL, 1.0);
    graph_output(g, graph_unary(g, OP_RELU, graph_op(g, OP_MUL, 2, (int[]){x, w}, NULL, NULL)));
    model *m = model_new(g, "scaled", "mlp", 1);
    assert_non_null(m);
    return m;
}

// y of tiny_scaled on the host
static void scaled_ref(const model *m, const float *x, float *y) {
    const float *w = tensor_f32(m->values[1]);
    for (int i = 0; i < 4; i++)
        y[i] = x[i] * w[i] > 0 ? x[i] * w[i] : 0;
}

static void assert_close4(const tensor *t, const float *want) {
    for (int i = 0; i < 4; i++)
        assert_float_equal(tensor_f32(t)[i], want[i], 1e-6);
}

// The shares of engine/exec.h: none on the CPU; on CUDA the driver's reason
// without a GPU; with one, two executors of models that share "w" on the
// host share it on the device, each run sends its inputs, and an eager
// output passes to another eager executor's input.
static void test_share(void **state) {
    (void)state;
    char err[512] = "";
    exec_share *s = (exec_share *)0x1;
    assert_int_equal(exec_share_new("cpu", &s, err, sizeof err), -1);
    assert_null(s);
    assert_string_equal(err, "exec_share_new: cpu executors share nothing on a device");
    assert_int_equal(exec_share_new("tpu", &s, err, sizeof err), -1);
    assert_string_equal(err, "unknown device 'tpu'; expected cpu or cuda");
    exec_share_free(NULL);
    model *a = tiny_scaled(), *b = tiny_scaled(), *c = tiny_scaled();
    assert_int_equal(model_init_values(a, 1), 0);
    assert_int_equal(model_init_values_from(b, 2, a), 0); // a's w; its own x
    assert_int_equal(model_init_values_from(c, 3, a), 0);
    exec *x, *y, *z;
    assert_int_equal(exec_new("cpu", "eager", a, NULL, &x, err, sizeof err), 0);
    tensor *out;
    assert_int_equal(exec_output(x, 0, &out), -1);
    assert_int_equal(exec_pass(x, 0, x, 0), -1);
    assert_non_null(strstr(exec_error(x), "cannot take"));
    exec_free(x);
    int rc = exec_share_new("cuda", &s, err, sizeof err);
    if (!gpu_present) {
        assert_int_equal(rc, -1);
        assert_null(s);
        if (TCBENCH_HAVE_CUDA)
            assert_non_null(strstr(err, "cuda_share_new: "));
        else
            assert_non_null(strstr(err, "built without the CUDA backend"));
        print_message("exec_share_new cuda: %s\n", err);
    } else {
        assert_int_equal(rc, 0);
        tensor_free(c->values[0]); // c's x: passed from x's output
        c->values[0] = NULL;
        exec_opts o = {.share = s};
        assert_int_equal(exec_new("cuda", "eager", a, &o, &x, err, sizeof err), 0);
        assert_int_equal(exec_new("cuda", "compiled", b, &o, &y, err, sizeof err), 0);
        assert_int_equal(exec_new("cuda", "eager", c, &o, &z, err, sizeof err), 0);
        float want[4], twice[4], xb[4] = {1, -2, 3, -4};
        scaled_ref(a, tensor_f32(a->values[0]), want);
        assert_int_equal(exec_run(x, NULL, NULL), 0);
        assert_int_equal(exec_output(x, 0, &out), 0);
        assert_close4(out, want);
        tensor_free(out);
        assert_int_equal(exec_output(x, 0, &out), -1); // released once copied
        scaled_ref(a, want, twice);                    // c's x is a's y
        assert_int_equal(exec_run(x, NULL, NULL), 0);
        assert_int_equal(exec_pass(x, 0, z, 0), 0);
        assert_int_equal(exec_output(x, 0, &out), -1); // moved to z
        assert_int_equal(exec_run(x, NULL, NULL), 0);
        assert_int_equal(exec_output(x, 0, NULL), 0); // dropped
        assert_int_equal(exec_output(x, 0, &out), -1);
        assert_int_equal(exec_run(z, NULL, NULL), 0);
        assert_int_equal(exec_output(z, 0, &out), 0);
        assert_close4(out, twice);
        tensor_free(out);
        assert_int_equal(exec_run(z, NULL, NULL), -1); // a passed input serves one run
        assert_non_null(strstr(exec_error(z), "no value on the device"));
        for (int r = 0; r < 2; r++) { // b's inputs sent every run, the graph replayed
            memcpy(tensor_f32(b->values[0]), xb, sizeof xb);
            xb[0] = -xb[0];
            scaled_ref(b, tensor_f32(b->values[0]), want);
            assert_int_equal(exec_run(y, NULL, NULL), 0);
            assert_int_equal(exec_output(y, 0, &out), 0);
            assert_close4(out, want);
            tensor_free(out);
        }
        exec_free(x);
        exec_free(y);
        exec_free(z);
        exec_share_free(s);
    }
    model_free(a);
    model_free(b);
    model_free(c);
}

int main(void) {
    char why[512];
    gpu_present = exec_device_probe("cuda", why, sizeof why) == 0;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rounding),
        cmocka_unit_test(test_small_pool_reuse),
        cmocka_unit_test(test_merge),
        cmocka_unit_test(test_streams),
        cmocka_unit_test(test_large_pool),
        cmocka_unit_test(test_peak),
        cmocka_unit_test(test_out_of_memory),
        cmocka_unit_test(test_churn),
#if TCBENCH_HAVE_CUDA
        cmocka_unit_test(test_probe_reports_reason),
        cmocka_unit_test(test_bad_device_env),
        cmocka_unit_test(test_eager_without_gpu),
        cmocka_unit_test(test_timer_without_gpu),
#endif
        cmocka_unit_test(test_registry),
        cmocka_unit_test(test_share),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
