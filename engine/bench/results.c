// The results JSON and its journal (runner.h, docs/results-schema.md).
#include "runner.h"

#include "backend/cuda/cuda_device.h"
#include "base/files.h"
#include "../exec.h" // the executor registry (not bench/exec.h)
#include "tcbench_config.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SCHEMA_VERSION 1

// JSON has no NaN or infinity: those figures are written as null.
static json_t *jreal(double v) { return isfinite(v) ? json_real(v) : json_null(); }

// An override as written in the suite: a number when it reads as one.
static json_t *param_value(const char *expr) {
    char *end;
    errno = 0;
    long long i = strtoll(expr, &end, 10);
    if (*expr && !*end && errno == 0)
        return json_integer(i);
    double d = strtod(expr, &end);
    if (*expr && !*end && isfinite(d))
        return json_real(d);
    return json_string(expr);
}

// A figure that exists only when the check ran.
static json_t *checked_real(const bench_accuracy *a, double v) {
    return a->checked ? jreal(v) : json_null();
}

static json_t *accuracy_json(const bench_accuracy *a, bool compiled) {
    json_t *outs = json_array();
    for (int i = 0; i < a->noutputs; i++)
        json_array_append_new(
            outs, json_pack("{s:o, s:o, s:o, s:o}", "rel_l2", jreal(a->outputs[i].rel_l2),
                            "max_abs", jreal(a->outputs[i].max_abs), "rmse",
                            jreal(a->outputs[i].rmse), "cosine", jreal(a->outputs[i].cosine)));
    json_t *j = json_pack("{s:b, s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:b}", "checked", a->checked,
                          "reason", a->reason, "rel_l2", checked_real(a, a->rel_l2), "max_abs",
                          checked_real(a, a->max_abs), "rmse", checked_real(a, a->rmse), "cosine",
                          checked_real(a, a->cosine), "outputs", outs, "tolerance", jreal(a->tol),
                          "cosine_fallback", a->cosine_fallback);
    if (j && a->baseline_fallback && json_object_set_new(j, "baseline_fallback", json_true()) < 0) {
        json_decref(j);
        return NULL;
    }
    if (!j || !compiled)
        return j;
    int rc = 0;
    rc |= json_object_set_new(j, "vs_eager_max_abs", checked_real(a, a->vs_eager_max_abs));
    rc |= json_object_set_new(j, "vs_eager_rel_l2", checked_real(a, a->vs_eager_rel_l2));
    rc |= json_object_set_new(j, "rmse_vs_fp64", checked_real(a, a->rmse));
    rc |= json_object_set_new(j, "eager_rmse_vs_fp64", checked_real(a, a->eager_rmse));
    rc |= json_object_set_new(j, "rule", json_string(a->rule));
    if (rc) {
        json_decref(j);
        return NULL;
    }
    return j;
}

static json_t *compile_json(const bench_result *r) {
    if (!r->compile.done)
        return json_null();
    return json_pack("{s:o, s:o, s:b}", "cold_s", jreal(r->compile.cold_s), "warm_s",
                     jreal(r->compile.warm_s), "cache_hit", r->compile.cache_hit);
}

static json_t *speedup_json(const bench_speedup *s) {
    if (!isfinite(s->median))
        return json_null();
    return json_pack("{s:o, s:o, s:o}", "median", jreal(s->median), "ci95_lo", jreal(s->ci95_lo),
                     "ci95_hi", jreal(s->ci95_hi));
}

static json_t *roofline_json(const bench_case *bc, const bench_result *r,
                             const bench_calibration *calib) {
    if (r->stats.n == 0 || !(r->stats.median > 0))
        return json_null();
    json_t *j = bench_roofline_json(bc->flops, bc->min_bytes, r->stats.median, calib);
    return j ? j : json_null();
}

static json_t *stats_json(const bench_stats *s) {
    if (s->n == 0)
        return json_null();
    return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:i, s:i}", "median_s",
                     jreal(s->median), "q1_s", jreal(s->q1), "q3_s", jreal(s->q3), "min_s",
                     jreal(s->min), "max_s", jreal(s->max), "mean_s", jreal(s->mean), "stddev_s",
                     jreal(s->stddev), "cv", jreal(s->cv), "mad_s", jreal(s->mad), "outliers",
                     s->outliers, "n", s->n);
}

void bench_stability_add(bench_stability *s, const char *fmt, ...) {
    s->unstable = true;
    if (s->nreasons == BENCH_MAX_REASONS)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->reasons[s->nreasons++], sizeof s->reasons[0], fmt, ap);
    va_end(ap);
}

void bench_stability_judge(bench_stability *s) {
    s->unstable = false;
    s->nreasons = 0;
    if (s->rounds == 0)
        return;
    if (!(s->noise <= BENCH_NOISE_CAP)) // NaN or infinite: as noisy as it gets
        bench_stability_add(s, "noise %.1f%% > %.0f%%", 100 * s->noise, 100 * BENCH_NOISE_CAP);
    if (s->ci_rel_width > BENCH_CI_CAP)
        bench_stability_add(s, "95%% interval %.0f%% of the speedup > %.0f%%",
                            100 * s->ci_rel_width, 100 * BENCH_CI_CAP);
    // a thread preempted in the middle of a step makes every other thread
    // wait for it at the next barrier: switches measure that directly
    int threads = s->threads > 0 ? s->threads : 1;
    if (s->timed_s > 0 && (double)s->nivcsw > BENCH_NIVCSW_CAP_PER_S * threads * s->timed_s)
        bench_stability_add(s,
                            "interference: %lld involuntary context switches in %.2f s "
                            "(%.0f/s per thread > %.0f)",
                            (long long)s->nivcsw, s->timed_s,
                            (double)s->nivcsw / s->timed_s / threads, BENCH_NIVCSW_CAP_PER_S);
    // the direct measure: time the threads were ready to run and waited
    if (s->timed_s > 0 && s->run_delay_s > BENCH_RUN_DELAY_CAP * threads * s->timed_s)
        bench_stability_add(s, "interference: waited for a CPU %.0f%% of the time > %.0f%%",
                            100 * s->run_delay_s / (threads * s->timed_s),
                            100 * BENCH_RUN_DELAY_CAP);
    int cpus = s->cpus > 0 ? s->cpus : 1;
    if (s->timed_s > 0 && s->steal_s > BENCH_STEAL_CAP * s->timed_s * cpus)
        bench_stability_add(s, "interference: steal time %.0f%% of the CPUs > %.0f%%",
                            100 * s->steal_s / (s->timed_s * cpus), 100 * BENCH_STEAL_CAP);
}

bool bench_thread_stall_judge(bench_stability *s, double eager_s, double one_thread_s,
                              int threads) {
    double ratio = eager_s / one_thread_s;
    if (threads < 2 || !(ratio > BENCH_THREAD_STALL))
        return false;
    bench_stability_add(s,
                        "eager on %d threads %.2fx slower than on one (%.3g ms against %.3g ms): "
                        "a threading stall",
                        threads, ratio, 1e3 * eager_s, 1e3 * one_thread_s);
    return true;
}

static json_t *stability_json(const bench_stability *s) {
    if (s->rounds == 0)
        return json_null();
    json_t *why = json_array(), *medians = json_array(), *counts = json_array();
    for (int i = 0; i < s->nreasons; i++)
        json_array_append_new(why, json_string(s->reasons[i]));
    for (int i = 0; i < s->processes && i < BENCH_MAX_PROCESSES; i++) {
        json_array_append_new(medians, jreal(s->process_medians_s[i]));
        json_array_append_new(counts, json_integer(s->process_samples[i]));
    }
    json_t *j = json_pack(
        "{s:o, s:o, s:i, s:o, s:I, s:o, s:o, s:o, s:o, s:o, s:b, s:o}", "noise", jreal(s->noise),
        "ci_rel_width", jreal(s->ci_rel_width), "rounds", s->rounds, "timed_s", jreal(s->timed_s),
        "nivcsw", (json_int_t)s->nivcsw, "run_delay_s", jreal(s->run_delay_s), "steal_s",
        jreal(s->steal_s), "load_start", jreal(s->load_start), "load_end", jreal(s->load_end),
        "one_thread_s", jreal(s->one_thread_s), "unstable", s->unstable, "reasons", why);
    int rc = j ? 0 : -1;
    if (j) {
        rc |= json_object_set_new(j, "processes", json_integer(s->processes));
        rc |= json_object_set_new(j, "process_spread", jreal(s->process_spread));
        rc |= json_object_set_new(j, "process_medians_s", medians);
        rc |= json_object_set_new(j, "process_samples", counts);
    } else {
        json_decref(medians);
        json_decref(counts);
    }
    if (rc) {
        json_decref(j);
        return NULL;
    }
    return j;
}

json_t *bench_result_json(const bench_plan *p, const bench_result *r,
                          const bench_calibration *calib) {
    const bench_task *t = &p->tasks[r->task];
    const bench_case *bc = &p->cases[t->case_index];
    const char *model = modeldef_name(bc->md), *family = modeldef_family(bc->md);
    bool compiled = bench_mode_compiled(t->axis[BENCH_AXIS_MODE]);
    bool cuda = t->axis[BENCH_AXIS_DEVICE] == BENCH_DEV_CUDA;
    json_t *c = json_object(), *params = json_object(), *samples = json_array();
    json_t *host = cuda ? json_array() : json_null();
    for (int i = 0; i < bc->c->noverrides; i++)
        json_object_set_new(params, bc->c->overrides[i].key, param_value(bc->c->overrides[i].expr));
    for (int i = 0; i < r->nsamples; i++) {
        json_array_append_new(samples, jreal(r->samples[i]));
        if (cuda && r->host_samples)
            json_array_append_new(host, jreal(r->host_samples[i]));
    }
    // set_new takes the value even when it fails, so nothing leaks on the way
    int rc = 0;
    rc |= json_object_set_new(c, "suite", json_string(bc->s->name ? bc->s->name : ""));
    rc |= json_object_set_new(c, "name", json_string(bc->c->name));
    rc |= json_object_set_new(c, "model", json_string(model ? model : ""));
    rc |= json_object_set_new(c, "family", json_string(family ? family : ""));
    for (int a = 0; a < BENCH_AXIS_COUNT; a++)
        rc |= json_object_set_new(c, bench_axis_name(a),
                                  json_string(bench_axis_value(a, t->axis[a])));
    rc |= json_object_set_new(c, "batch", json_integer(bc->batch));
    rc |= json_object_set_new(c, "suite_batch", json_integer(bc->c->batch));
    rc |= json_object_set_new(c, "params", params);
    rc |= json_object_set_new(c, "status", json_string(bench_status_name(r->status)));
    rc |= json_object_set_new(c, "message", json_string(r->message));
    rc |= json_object_set_new(c, "samples_s", samples);
    rc |= json_object_set_new(c, "clock", json_string(cuda ? "cuda_events" : "host"));
    rc |= json_object_set_new(c, "host_samples_s", host);
    rc |= json_object_set_new(c, "stats", stats_json(&r->stats));
    rc |= json_object_set_new(c, "iterations_per_sample", json_integer(r->iters_per_sample));
    rc |= json_object_set_new(c, "param_count", json_integer(bc->param_count));
    rc |= json_object_set_new(c, "flops", jreal(bc->flops));
    rc |= json_object_set_new(c, "peak_bytes", json_integer(r->peak_bytes));
    rc |= json_object_set_new(c, "kernels", json_integer(r->kernels));
    rc |= json_object_set_new(c, "cast_kernels", json_integer(r->cast_kernels));
    rc |= json_object_set_new(c, "accuracy", accuracy_json(&r->acc, compiled));
    rc |= json_object_set_new(c, "compile", compile_json(r));
    rc |= json_object_set_new(c, "arena_bytes",
                              r->compile.done ? json_integer(r->arena_bytes) : json_null());
    rc |= json_object_set_new(c, "speedup", speedup_json(&r->speedup));
    rc |= json_object_set_new(c, "compression_ratio", jreal(r->compression_ratio));
    rc |= json_object_set_new(c, "min_bytes", jreal(bc->min_bytes));
    rc |= json_object_set_new(c, "roofline", roofline_json(bc, r, calib));
    rc |= json_object_set_new(c, "wall_s", jreal(r->wall_s));
    rc |= json_object_set_new(c, "stability", stability_json(&r->stab));
    if (rc) {
        json_decref(c);
        return NULL;
    }
    return c;
}

static json_t *axis_json(const bench_plan *p, enum bench_axis a) {
    json_t *arr = json_array();
    for (int v = 0; v < bench_axis_size(a); v++)
        if (p->used[a][v])
            json_array_append_new(arr, json_string(bench_axis_value(a, v)));
    return arr;
}

static json_t *strings_json(const char *const *s, int n) {
    json_t *arr = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(arr, json_string(s[i]));
    return arr;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

// "NAME=VALUE" for every TCBENCH_DISABLE_* set in the environment, sorted:
// the kill switches a run's figures were measured under.
static json_t *disabled_json(void) {
    extern char **environ;
    const char *set[256];
    size_t n = 0;
    for (char **e = environ; e && *e && n < sizeof set / sizeof set[0]; e++)
        if (!strncmp(*e, "TCBENCH_DISABLE_", 16))
            set[n++] = *e;
    qsort(set, n, sizeof set[0], cmp_str);
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, json_string(set[i]));
    return arr;
}

static json_t *config_json(const bench_plan *p) {
    const bench_config *c = &p->cfg;
    // one device per run for now: "device" names it, "devices" lists all
    int dev = 0;
    for (int v = BENCH_DEV_COUNT - 1; v >= 0; v--)
        if (p->used[BENCH_AXIS_DEVICE][v])
            dev = v;
    json_t *j = json_object();
    int rc = 0;
    rc |= json_object_set_new(j, "suites", strings_json(c->suites, c->nsuites));
    rc |= json_object_set_new(j, "size", c->size ? json_string(c->size) : json_null());
    rc |= json_object_set_new(j, "seed", json_integer((json_int_t)c->seed));
    rc |= json_object_set_new(j, "batch_size", json_integer(c->batch));
    rc |= json_object_set_new(j, "repeat", json_integer(c->repeat));
    rc |= json_object_set_new(j, "warmup", c->warmup > 0 ? json_integer(c->warmup) : json_null());
    rc |= json_object_set_new(j, "min_time_s", jreal(c->min_time_s));
    rc |= json_object_set_new(j, "max_time_s", jreal(c->max_time_s));
    rc |= json_object_set_new(j, "processes", json_integer(c->processes > 1 ? c->processes : 1));
    rc |= json_object_set_new(j, "pin", json_boolean(c->pin));
    rc |= json_object_set_new(j, "order", json_string("rotate"));
    rc |= json_object_set_new(j, "disabled", disabled_json());
    rc |= json_object_set_new(j, "threads", json_integer(c->threads));
    rc |= json_object_set_new(j, "timeout_s", jreal(c->timeout_s));
    rc |= json_object_set_new(j, "modes", axis_json(p, BENCH_AXIS_MODE));
    rc |= json_object_set_new(j, "precisions", axis_json(p, BENCH_AXIS_PRECISION));
    rc |= json_object_set_new(j, "workloads", axis_json(p, BENCH_AXIS_WORKLOAD));
    rc |= json_object_set_new(j, "devices", axis_json(p, BENCH_AXIS_DEVICE));
    rc |= json_object_set_new(j, "device", json_string(bench_axis_value(BENCH_AXIS_DEVICE, dev)));
    rc |= json_object_set_new(j, "check_accuracy", json_boolean(c->accuracy));
    rc |= json_object_set_new(j, "grad_scaler", json_boolean(c->grad_scaler));
    rc |=
        json_object_set_new(j, "amp_dtype", json_string(c->amp_dtype == DT_BF16 ? "bf16" : "fp16"));
    rc |= json_object_set_new(j, "accuracy_flops_limit", jreal(c->accuracy_flops_limit));
    rc |= json_object_set_new(j, "only", strings_json(c->only, c->nonly));
    rc |= json_object_set_new(j, "filter", c->filter ? json_string(c->filter) : json_null());
    rc |= json_object_set_new(j, "exclude", c->exclude ? json_string(c->exclude) : json_null());
    rc |= json_object_set_new(j, "dump_dir", c->dump_dir ? json_string(c->dump_dir) : json_null());
    rc |= json_object_set_new(j, "tf32", json_boolean(c->tf32));
    rc |= json_object_set_new(j, "flush_l2", json_boolean(c->flush_l2));
    // auto's reason is why not the GPU: empty when it chose cuda
    rc |= json_object_set_new(j, "device_auto",
                              c->device_auto ? json_pack("{s:s, s:s}", "chose",
                                                         c->device_auto[0] ? "cpu" : "cuda",
                                                         "reason", c->device_auto)
                                             : json_null());
    if (rc) {
        json_decref(j);
        return NULL;
    }
    return j;
}

json_t *bench_report_json(const bench_report *r) {
    const bench_plan *p = r->plan;
    json_t *cases = json_array(), *argv = json_array();
    for (int i = 0; i < p->cfg.argc; i++)
        json_array_append_new(argv, json_string(p->cfg.argv[i]));
    for (int i = 0; i < r->nresults; i++)
        json_array_append_new(
            cases, bench_result_json(p, &r->results[i], r->has_calib ? &r->calib : NULL));
    return json_pack("{s:i, s:{s:s, s:s, s:s}, s:s, s:o, s:O, s:o, s:o, s:o}", "schema_version",
                     SCHEMA_VERSION, "tool", "name", "tcbench", "version", TCBENCH_VERSION,
                     "git_commit", TCBENCH_GIT_COMMIT, "timestamp", r->timestamp, "command_line",
                     argv, "host", r->host, "config", config_json(p), "cases", cases, "wall_s",
                     jreal(r->wall_s));
}

// mkdir -p of the directory part of path.
static int make_parent_dirs(const char *path, char *err, size_t cap) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir)
        return 0;
    *slash = '\0';
    return base_mkdir_p(dir, 0777, err, cap);
}

// host.gpus: the GPU the cuda cases run on, described by a forked child
// (this process must hold no CUDA state when it forks the cases' children);
// empty when no case runs on cuda.
static json_t *gpus_json(const bench_plan *p) {
    json_t *arr = json_array();
    if (!arr || !p->used[BENCH_AXIS_DEVICE][BENCH_DEV_CUDA])
        return arr;
    cuda_device_info info = {0};
    char why[512];
#if TCBENCH_HAVE_CUDA
    bool ok = cuda_probe_describe(&info, why, sizeof why) == 0;
    if (!ok)
        info.index = cuda_device_index();
#else
    bool ok = exec_device_probe("cuda", why, sizeof why) == 0; // fails: says why
#endif
    json_array_append_new(arr, bench_gpu_json(&info, ok ? NULL : why));
    return arr;
}

int bench_report_open(const bench_plan *p, bench_report **out, char *err, size_t cap) {
    *out = NULL;
    bench_report *r = calloc(1, sizeof *r);
    if (!r || !(r->results = calloc((size_t)p->ntasks + 1, sizeof *r->results))) {
        free(r);
        snprintf(err, cap, "calloc: out of memory");
        return -1;
    }
    r->plan = p;
    time_t now = time(NULL);
    struct tm tm;
    if (now == (time_t)-1 || !gmtime_r(&now, &tm)) {
        snprintf(err, cap, "time: %s", strerror(errno));
        bench_report_free(r);
        return -1;
    }
    strftime(r->timestamp, sizeof r->timestamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (p->cfg.output && strlen(p->cfg.output) >= sizeof r->output) {
        snprintf(err, cap, "output path longer than %zu bytes", sizeof r->output - 1);
        bench_report_free(r);
        return -1;
    }
    if (p->cfg.output)
        snprintf(r->output, sizeof r->output, "%s", p->cfg.output);
    else
        strftime(r->output, sizeof r->output, "results/tcbench-%Y%m%d-%H%M%S.json", &tm);
    snprintf(r->journal, sizeof r->journal, "%s.jsonl", r->output);
    if (make_parent_dirs(r->output, err, cap) < 0) {
        bench_report_free(r);
        return -1;
    }
    if (!(r->journal_file = fopen(r->journal, "w"))) {
        snprintf(err, cap, "fopen %s: %s", r->journal, strerror(errno));
        bench_report_free(r);
        return -1;
    }
    if (!(r->host = bench_host_json(p->cfg.threads))) {
        snprintf(err, cap, "json_pack: out of memory describing the host");
        bench_report_free(r);
        return -1;
    }
    if (json_object_set_new(r->host, "gpus", gpus_json(p)) < 0) {
        snprintf(err, cap, "json_object_set: out of memory describing the GPU");
        bench_report_free(r);
        return -1;
    }
    r->has_calib = bench_calibration_load(NULL, p->cfg.threads, &r->calib) == 0;
    json_t *cj = r->has_calib ? bench_calibration_json(&r->calib) : json_null();
    if (json_object_set_new(r->host, "calibration", cj ? cj : json_null()) < 0) {
        snprintf(err, cap, "json_object_set: out of memory describing the host");
        bench_report_free(r);
        return -1;
    }
    *out = r;
    return 0;
}

static int write_failed(char *err, size_t cap, const char *call, const char *path, FILE *f,
                        const char *tmp) {
    snprintf(err, cap, "%s %s: %s", call, path, strerror(errno));
    if (f)
        fclose(f);
    unlink(tmp);
    return -1;
}

int bench_report_write(const bench_report *r, char *err, size_t cap) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", r->output, (long)getpid());
    json_t *doc = bench_report_json(r);
    if (!doc) {
        snprintf(err, cap, "json_pack: out of memory building the results");
        return -1;
    }
    FILE *f = fopen(tmp, "w");
    if (!f) {
        json_decref(doc);
        return write_failed(err, cap, "fopen", tmp, NULL, tmp);
    }
    int rc = json_dumpf(doc, f, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
    json_decref(doc);
    if (rc < 0)
        return write_failed(err, cap, "json_dumpf", tmp, f, tmp);
    if (fputc('\n', f) == EOF || fflush(f) != 0)
        return write_failed(err, cap, "fflush", tmp, f, tmp);
    if (fsync(fileno(f)) < 0)
        return write_failed(err, cap, "fsync", tmp, f, tmp);
    if (fclose(f) != 0)
        return write_failed(err, cap, "fclose", tmp, NULL, tmp);
    if (rename(tmp, r->output) < 0)
        return write_failed(err, cap, "rename", r->output, NULL, tmp);
    // the rename itself is durable only once the directory is synced
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", r->output);
    char *slash = strrchr(dir, '/');
    if (slash)
        *(slash == dir ? slash + 1 : slash) = '\0';
    else
        snprintf(dir, sizeof dir, ".");
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0 || fsync(fd) < 0) {
        snprintf(err, cap, "%s %s: %s", fd < 0 ? "open" : "fsync", dir, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    return 0;
}

void bench_report_free(bench_report *r) {
    if (!r)
        return;
    for (int i = 0; i < r->nresults; i++)
        bench_result_free(&r->results[i]);
    free(r->results);
    if (r->journal_file && fclose(r->journal_file) != 0)
        fprintf(stderr, "tcbench: fclose %s: %s\n", r->journal, strerror(errno));
    json_decref(r->host);
    free(r);
}
