#include "calibrate.h"

#include "../compile/kcache.h"
#include "base/clock.h"
#include "timing.h"

#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define TRIAD_N    ((int64_t)1 << 25) // 3 arrays x 128 MiB: far past any cache
#define TRIAD_REPS 5
#define GEMM_N     2048
#define GEMM_REPS  3

void bench_calibration_cpu_model(char *buf, size_t cap) {
    snprintf(buf, cap, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0)
            continue;
        char *v = strchr(line, ':');
        if (v) {
            v += 1 + (v[1] == ' ');
            v[strcspn(v, "\n")] = 0;
            snprintf(buf, cap, "%s", v);
        }
        break;
    }
    fclose(f);
}

int bench_calibrate_measure(int threads, bench_calibration *c) {
    memset(c, 0, sizeof *c);
    c->threads = threads;
    omp_set_num_threads(threads);
    openblas_set_num_threads(threads);
    bench_calibration_cpu_model(c->cpu_model, sizeof c->cpu_model);
    time_t now = time(NULL);
    strftime(c->timestamp, sizeof c->timestamp, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));

    float *a = aligned_alloc(64, TRIAD_N * sizeof(float));
    float *b = aligned_alloc(64, TRIAD_N * sizeof(float));
    float *x = aligned_alloc(64, TRIAD_N * sizeof(float));
    if (!a || !b || !x) {
        free(a), free(b), free(x);
        return -1;
    }
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < TRIAD_N; i++) {
        a[i] = 0;
        b[i] = 1.0f;
        x[i] = 2.0f;
    }
    double best = INFINITY;
    for (int r = 0; r < TRIAD_REPS; r++) {
        double t0 = base_now();
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < TRIAD_N; i++)
            a[i] = b[i] + 3.0f * x[i];
        double t = base_now() - t0;
        best = t < best ? t : best;
    }
    c->bandwidth_Bps = 3.0 * sizeof(float) * (double)TRIAD_N / best;
    volatile float sink = a[TRIAD_N / 2];
    (void)sink;
    free(a), free(b), free(x);

    size_t n2 = (size_t)GEMM_N * GEMM_N;
    float *ma = malloc(n2 * sizeof(float)), *mb = malloc(n2 * sizeof(float));
    float *mc = malloc(n2 * sizeof(float));
    if (!ma || !mb || !mc) {
        free(ma), free(mb), free(mc);
        return -1;
    }
    for (size_t i = 0; i < n2; i++) {
        ma[i] = (float)(i % 7) * 0.125f;
        mb[i] = (float)(i % 5) * 0.25f;
    }
    best = INFINITY;
    for (int r = 0; r < GEMM_REPS; r++) {
        double t0 = base_now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, GEMM_N, GEMM_N, GEMM_N, 1.0f, ma,
                    GEMM_N, mb, GEMM_N, 0.0f, mc, GEMM_N);
        double t = base_now() - t0;
        best = t < best ? t : best;
    }
    c->gemm_flops = 2.0 * GEMM_N * (double)GEMM_N * GEMM_N / best;
    free(ma), free(mb), free(mc);
    return 0;
}

static int default_path(char *out, size_t cap, char *err, size_t ecap) {
    char dir[900];
    if (kcache_dir(NULL, dir, sizeof dir, err, ecap) < 0)
        return -1;
    snprintf(out, cap, "%s/calibration.json", dir);
    return 0;
}

json_t *bench_calibration_json(const bench_calibration *c) {
    return json_pack("{s:f, s:f, s:i, s:s, s:s}", "bandwidth_GBps", c->bandwidth_Bps / 1e9,
                     "gemm_GFLOPs", c->gemm_flops / 1e9, "threads", c->threads, "cpu_model",
                     c->cpu_model, "timestamp", c->timestamp);
}

// One calibration object of the file; false when it is not one.
static bool calibration_read(json_t *j, bench_calibration *c) {
    memset(c, 0, sizeof *c);
    c->bandwidth_Bps = json_number_value(json_object_get(j, "bandwidth_GBps")) * 1e9;
    c->gemm_flops = json_number_value(json_object_get(j, "gemm_GFLOPs")) * 1e9;
    c->threads = (int)json_integer_value(json_object_get(j, "threads"));
    const char *m = json_string_value(json_object_get(j, "cpu_model"));
    const char *t = json_string_value(json_object_get(j, "timestamp"));
    snprintf(c->cpu_model, sizeof c->cpu_model, "%s", m ? m : "");
    snprintf(c->timestamp, sizeof c->timestamp, "%s", t ? t : "");
    return c->threads > 0 && m && c->bandwidth_Bps > 0 && c->gemm_flops > 0;
}

// The calibrations of the file: {"calibrations": [...]}, or the single
// object that tcbench wrote before it kept one per thread count.
static json_t *calibrations_of(json_t *doc) {
    json_t *arr = json_object_get(doc, "calibrations");
    if (json_is_array(arr))
        return json_incref(arr);
    arr = json_array();
    if (arr && json_is_object(doc) && json_object_get(doc, "threads"))
        json_array_append(arr, doc);
    return arr;
}

static int calib_cmp(const void *pa, const void *pb) {
    const bench_calibration *a = pa, *b = pb;
    int c = strcmp(a->cpu_model, b->cpu_model);
    return c ? c : (a->threads > b->threads) - (a->threads < b->threads);
}

int bench_calibration_list(const char *path, bench_calibration *out, int cap) {
    char p[1024], err[256];
    if (!path) {
        if (default_path(p, sizeof p, err, sizeof err) < 0)
            return 0;
        path = p;
    }
    json_t *doc = json_load_file(path, 0, NULL);
    json_t *arr = doc ? calibrations_of(doc) : NULL;
    int n = 0;
    for (size_t i = 0; i < json_array_size(arr) && n < cap; i++)
        n += calibration_read(json_array_get(arr, i), &out[n]);
    json_decref(arr);
    json_decref(doc);
    return n;
}

int bench_calibration_check(const char *path, char *err, size_t cap) {
    char p[1024];
    if (!path) {
        if (default_path(p, sizeof p, err, cap) < 0)
            return -1;
        path = p;
    }
    struct stat st;
    if (stat(path, &st) < 0 && errno == ENOENT)
        return 0;
    json_error_t jerr;
    json_t *doc = json_load_file(path, 0, &jerr);
    if (!doc) {
        snprintf(err, cap, "%s:%d:%d: calibration file unreadable: %s", path, jerr.line,
                 jerr.column, jerr.text);
        return -1;
    }
    json_t *arr = calibrations_of(doc);
    size_t bad = 0, n = json_array_size(arr);
    bench_calibration c;
    while (bad < n && calibration_read(json_array_get(arr, bad), &c))
        bad++;
    json_decref(arr);
    json_decref(doc);
    if (n == 0 || bad < n) {
        snprintf(err, cap,
                 "%s: calibration file unreadable: %s (expected {\"calibrations\": [...]} "
                 "as `tcbench calibrate` writes)",
                 path, n == 0 ? "no calibrations" : "a calibration without its figures");
        return -1;
    }
    return 0;
}

int bench_calibration_save(const bench_calibration *c, const char *path, char *err, size_t cap) {
    char p[1024];
    if (!path) {
        if (default_path(p, sizeof p, err, cap) < 0)
            return -1;
        path = p;
    }
    // keep the others (other thread counts, other CPU models sharing the cache)
    bench_calibration all[BENCH_CALIBRATIONS_MAX];
    int n = bench_calibration_list(path, all, BENCH_CALIBRATIONS_MAX - 1), k = 0;
    for (int i = 0; i < n; i++)
        if (all[i].threads != c->threads || strcmp(all[i].cpu_model, c->cpu_model) != 0)
            all[k++] = all[i];
    all[k++] = *c;
    qsort(all, (size_t)k, sizeof *all, calib_cmp);
    json_t *arr = json_array(), *j = json_pack("{s:o}", "calibrations", arr);
    int rc = j ? 0 : -1;
    for (int i = 0; i < k && rc == 0; i++)
        rc = json_array_append_new(arr, bench_calibration_json(&all[i]));
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (rc == 0)
        rc = json_dump_file(j, tmp, JSON_INDENT(2));
    json_decref(j);
    if (rc < 0 || rename(tmp, path) < 0) {
        snprintf(err, cap, "writing %s failed", path);
        return -1;
    }
    return 0;
}

int bench_calibration_load(const char *path, int threads, bench_calibration *c) {
    bench_calibration all[BENCH_CALIBRATIONS_MAX];
    int n = bench_calibration_list(path, all, BENCH_CALIBRATIONS_MAX);
    char here[128];
    bench_calibration_cpu_model(here, sizeof here);
    for (int i = 0; i < n; i++)
        if (all[i].threads == threads && !strcmp(all[i].cpu_model, here)) {
            *c = all[i];
            return 0;
        }
    return -1;
}

// JSON has no NaN: a figure that cannot be computed is null.
static json_t *num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

json_t *bench_roofline_json(double flops, double min_bytes, double seconds,
                            const bench_calibration *c) {
    double gf = seconds > 0 ? flops / seconds : NAN, bw = seconds > 0 ? min_bytes / seconds : NAN;
    double intensity = min_bytes > 0 ? flops / min_bytes : NAN;
    json_t *j = json_pack("{s:o, s:o, s:o, s:o, s:o}", "flops", num(flops), "min_bytes",
                          num(min_bytes), "intensity", num(intensity), "achieved_GFLOPs",
                          num(gf / 1e9), "achieved_GBps", num(bw / 1e9));
    if (!j || !c)
        return j;
    double roof = fmin(c->gemm_flops, intensity * c->bandwidth_Bps);
    json_object_set_new(j, "roof_GFLOPs", num(roof / 1e9));
    json_object_set_new(
        j, "bound",
        json_string(c->gemm_flops < intensity * c->bandwidth_Bps ? "compute" : "memory"));
    json_object_set_new(j, "fraction_of_roof", num(gf / roof));
    return j;
}
