// The results schema's one writer and one reader (results.h,
// docs/results-schema.md).
#include "results.h"

#include "tcbench_config.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void bench_result_free(bench_result *r) {
    free(r->samples);
    free(r->host_samples);
    r->samples = NULL;
    r->host_samples = NULL;
    r->nsamples = 0;
}

// ---- writing ---------------------------------------------------------------

json_t *results_real(double v) { return isfinite(v) ? json_real(v) : json_null(); }

// A figure that exists only when the check ran.
static json_t *checked_real(const bench_accuracy *a, double v) {
    return a->checked ? results_real(v) : json_null();
}

static json_t *accuracy_json(const bench_accuracy *a, bool compiled) {
    json_t *outs = json_array();
    for (int i = 0; i < a->noutputs; i++)
        json_array_append_new(outs, json_pack("{s:o, s:o, s:o, s:o}", "rel_l2",
                                              results_real(a->outputs[i].rel_l2), "max_abs",
                                              results_real(a->outputs[i].max_abs), "rmse",
                                              results_real(a->outputs[i].rmse), "cosine",
                                              results_real(a->outputs[i].cosine)));
    json_t *j = json_pack("{s:b, s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:b}", "checked", a->checked,
                          "reason", a->reason, "rel_l2", checked_real(a, a->rel_l2), "max_abs",
                          checked_real(a, a->max_abs), "rmse", checked_real(a, a->rmse), "cosine",
                          checked_real(a, a->cosine), "outputs", outs, "tolerance",
                          results_real(a->tol), "cosine_fallback", a->cosine_fallback);
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

static json_t *gen_json(const bench_gen *g) {
    if (!g->done)
        return json_null();
    json_t *o = json_object();
    int rc = !o;
    rc |= json_object_set_new(o, "prompt_len", json_integer(g->prompt_len));
    rc |= json_object_set_new(o, "new_tokens", json_integer(g->new_tokens));
    rc |= json_object_set_new(o, "ttft_s", results_real(g->ttft_s));
    rc |= json_object_set_new(o, "decode_s", results_real(g->decode_s));
    rc |= json_object_set_new(o, "tokens_per_s", results_real(g->tokens_per_s));
    rc |= json_object_set_new(o, "kv_bytes_per_token", json_integer(g->kv_bytes_per_token));
    rc |= json_object_set_new(o, "prefill_kernels", json_integer(g->prefill_kernels));
    rc |= json_object_set_new(o, "weight_error", results_real(g->weight_error));
    if (g->rounds > 0) {
        json_t *re = json_array(), *an = json_array();
        for (int64_t r = 0; re && an && r < g->rounds && r < BENCH_MAX_CHAT_ROUNDS; r++) {
            rc |= json_array_append_new(re, results_real(g->ttft_reuse_s[r]));
            rc |= json_array_append_new(an, results_real(g->ttft_anew_s[r]));
        }
        rc |= json_object_set_new(o, "rounds", json_integer(g->rounds));
        rc |= json_object_set_new(o, "ttft_reuse_s", re ? re : json_null());
        rc |= json_object_set_new(o, "ttft_anew_s", an ? an : json_null());
    }
    if (rc) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *compile_json(const bench_compile *c) {
    if (!c->done)
        return json_null();
    return json_pack("{s:o, s:o, s:b}", "cold_s", results_real(c->cold_s), "warm_s",
                     results_real(c->warm_s), "cache_hit", c->cache_hit);
}

static json_t *speedup_json(const bench_speedup *s) {
    if (!isfinite(s->median))
        return json_null();
    return json_pack("{s:o, s:o, s:o}", "median", results_real(s->median), "ci95_lo",
                     results_real(s->ci95_lo), "ci95_hi", results_real(s->ci95_hi));
}

static json_t *stats_json(const bench_stats *s) {
    if (s->n == 0)
        return json_null();
    return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:i, s:i}", "median_s",
                     results_real(s->median), "q1_s", results_real(s->q1), "q3_s",
                     results_real(s->q3), "min_s", results_real(s->min), "max_s",
                     results_real(s->max), "mean_s", results_real(s->mean), "stddev_s",
                     results_real(s->stddev), "cv", results_real(s->cv), "mad_s",
                     results_real(s->mad), "outliers", s->outliers, "n", s->n);
}

static json_t *stability_json(const bench_stability *s) {
    if (s->rounds == 0)
        return json_null();
    json_t *why = json_array(), *medians = json_array(), *counts = json_array();
    for (int i = 0; i < s->nreasons; i++)
        json_array_append_new(why, json_string(s->reasons[i]));
    for (int i = 0; i < s->processes && i < BENCH_MAX_PROCESSES; i++) {
        json_array_append_new(medians, results_real(s->process_medians_s[i]));
        json_array_append_new(counts, json_integer(s->process_samples[i]));
    }
    json_t *j = json_pack(
        "{s:o, s:o, s:i, s:o, s:I, s:o, s:o, s:o, s:o, s:o, s:b, s:o}", "noise",
        results_real(s->noise), "ci_rel_width", results_real(s->ci_rel_width), "rounds", s->rounds,
        "timed_s", results_real(s->timed_s), "nivcsw", (json_int_t)s->nivcsw, "run_delay_s",
        results_real(s->run_delay_s), "steal_s", results_real(s->steal_s), "load_start",
        results_real(s->load_start), "load_end", results_real(s->load_end), "one_thread_s",
        results_real(s->one_thread_s), "unstable", s->unstable, "reasons", why);
    int rc = j ? 0 : -1;
    if (j) {
        rc |= json_object_set_new(j, "processes", json_integer(s->processes));
        rc |= json_object_set_new(j, "process_spread", results_real(s->process_spread));
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

static json_t *jstr(const char *s) { return json_string(s ? s : ""); }

json_t *results_entry_json(const results_case *id, const bench_result *r, json_t *params,
                           json_t *roofline) {
    bool compiled = strcmp(id->mode, bench_axis_value(BENCH_AXIS_MODE, BENCH_MODE_EAGER)) != 0;
    bool cuda = !strcmp(id->device, bench_axis_value(BENCH_AXIS_DEVICE, BENCH_DEV_CUDA));
    json_t *c = json_object(), *samples = json_array();
    json_t *host = cuda ? json_array() : json_null();
    for (int i = 0; i < r->nsamples; i++) {
        json_array_append_new(samples, results_real(r->samples[i]));
        if (cuda && r->host_samples)
            json_array_append_new(host, results_real(r->host_samples[i]));
    }
    const char *axes[BENCH_AXIS_COUNT] = {
        [BENCH_AXIS_MODE] = id->mode,
        [BENCH_AXIS_PRECISION] = id->precision,
        [BENCH_AXIS_WORKLOAD] = id->workload,
        [BENCH_AXIS_DEVICE] = id->device,
    };
    // set_new takes the value even when it fails, so nothing leaks on the way
    int rc = 0;
    rc |= json_object_set_new(c, "suite", jstr(id->suite));
    rc |= json_object_set_new(c, "name", jstr(id->name));
    rc |= json_object_set_new(c, "model", jstr(id->model));
    rc |= json_object_set_new(c, "family", jstr(id->family));
    for (int a = 0; a < BENCH_AXIS_COUNT; a++)
        rc |= json_object_set_new(c, bench_axis_name(a), jstr(axes[a]));
    rc |= json_object_set_new(c, "batch", json_integer(id->batch));
    rc |= json_object_set_new(c, "suite_batch", json_integer(id->suite_batch));
    rc |= json_object_set_new(c, "study", json_boolean(id->study));
    rc |= json_object_set_new(c, "params", params ? params : json_object());
    rc |= json_object_set_new(c, "status", json_string(bench_status_name(r->status)));
    rc |= json_object_set_new(c, "message", json_string(r->message));
    rc |= json_object_set_new(c, "samples_s", samples);
    rc |= json_object_set_new(c, "clock", json_string(cuda ? "cuda_events" : "host"));
    rc |= json_object_set_new(c, "host_samples_s", host);
    rc |= json_object_set_new(c, "stats", stats_json(&r->stats));
    rc |= json_object_set_new(c, "iterations_per_sample", json_integer(r->iters_per_sample));
    rc |= json_object_set_new(c, "param_count", json_integer(id->param_count));
    rc |= json_object_set_new(c, "flops", results_real(id->flops));
    rc |= json_object_set_new(c, "peak_bytes", json_integer(r->peak_bytes));
    rc |= json_object_set_new(c, "kernels", json_integer(r->kernels));
    rc |= json_object_set_new(c, "cast_kernels", json_integer(r->cast_kernels));
    rc |= json_object_set_new(c, "accuracy", accuracy_json(&r->acc, compiled));
    rc |= json_object_set_new(c, "compile", compile_json(&r->compile));
    rc |= json_object_set_new(c, "arena_bytes",
                              r->compile.done ? json_integer(r->arena_bytes) : json_null());
    rc |= json_object_set_new(c, "speedup", speedup_json(&r->speedup));
    rc |= json_object_set_new(c, "compression_ratio", results_real(r->compression_ratio));
    rc |= json_object_set_new(c, "min_bytes", results_real(id->min_bytes));
    rc |= json_object_set_new(c, "roofline", roofline ? roofline : json_null());
    rc |= json_object_set_new(c, "wall_s", results_real(r->wall_s));
    rc |= json_object_set_new(c, "stability", stability_json(&r->stab));
    if (r->gen.done)
        rc |= json_object_set_new(c, "generate", gen_json(&r->gen));
    if (rc) {
        json_decref(c);
        return NULL;
    }
    return c;
}

json_t *results_doc_json(const char *timestamp, json_t *command_line, json_t *host, json_t *config,
                         json_t *cases, double wall_s) {
    return json_pack("{s:i, s:{s:s, s:s, s:s}, s:s, s:o, s:O, s:o, s:o, s:o}", "schema_version",
                     RESULTS_SCHEMA_VERSION, "tool", "name", "tcbench", "version", TCBENCH_VERSION,
                     "git_commit", TCBENCH_GIT_COMMIT, "timestamp", timestamp, "command_line",
                     command_line, "host", host, "config", config, "cases", cases, "wall_s",
                     results_real(wall_s));
}

static int write_failed(char *err, size_t cap, const char *call, const char *path, FILE *f,
                        const char *tmp) {
    snprintf(err, cap, "%s %s: %s", call, path, strerror(errno));
    if (f)
        fclose(f);
    unlink(tmp);
    return -1;
}

int results_file_write(const char *path, const json_t *doc, char *err, size_t cap) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f)
        return write_failed(err, cap, "fopen", tmp, NULL, tmp);
    if (json_dumpf(doc, f, JSON_INDENT(2) | JSON_REAL_PRECISION(10)) < 0)
        return write_failed(err, cap, "json_dumpf", tmp, f, tmp);
    if (fputc('\n', f) == EOF || fflush(f) != 0)
        return write_failed(err, cap, "fflush", tmp, f, tmp);
    if (fsync(fileno(f)) < 0)
        return write_failed(err, cap, "fsync", tmp, f, tmp);
    if (fclose(f) != 0)
        return write_failed(err, cap, "fclose", tmp, NULL, tmp);
    if (rename(tmp, path) < 0)
        return write_failed(err, cap, "rename", path, NULL, tmp);
    // the rename itself is durable only once the directory is synced
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
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

// ---- reading ---------------------------------------------------------------

// A number the JSON has, or NAN (null, missing, another type).
static double num(const json_t *o, const char *key) {
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

// An integer the JSON has, or -1.
static int64_t count(const json_t *o, const char *key) {
    const json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : -1;
}

static const char *str(const json_t *o, const char *key, const char *dflt) {
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : dflt;
}

static void copy_str(const json_t *o, const char *key, char *buf, size_t cap) {
    snprintf(buf, cap, "%s", str(o, key, ""));
}

static void accuracy_read(const json_t *j, bench_accuracy *a) {
    a->checked = json_is_true(json_object_get(j, "checked"));
    copy_str(j, "reason", a->reason, sizeof a->reason);
    a->rel_l2 = num(j, "rel_l2");
    a->max_abs = num(j, "max_abs");
    a->rmse = num(j, "rmse");
    a->tol = num(j, "tolerance");
    a->cosine = num(j, "cosine");
    a->cosine_fallback = json_is_true(json_object_get(j, "cosine_fallback"));
    a->baseline_fallback = json_is_true(json_object_get(j, "baseline_fallback"));
    const json_t *outs = json_object_get(j, "outputs");
    for (size_t i = 0; i < json_array_size(outs) && i < BENCH_MAX_OUTPUTS; i++) {
        const json_t *o = json_array_get(outs, i);
        a->outputs[a->noutputs++] = (bench_accuracy_out){num(o, "rel_l2"), num(o, "max_abs"),
                                                         num(o, "rmse"), num(o, "cosine"), NAN};
    }
    a->vs_eager = json_object_get(j, "rule") != NULL;
    a->vs_eager_max_abs = num(j, "vs_eager_max_abs");
    a->vs_eager_rel_l2 = num(j, "vs_eager_rel_l2");
    a->eager_rmse = num(j, "eager_rmse_vs_fp64");
    copy_str(j, "rule", a->rule, sizeof a->rule);
}

// The stability object (null: no samples, every figure zero).
static void stability_read(const json_t *j, bench_stability *s) {
    if (!json_is_object(j))
        return;
    s->noise = num(j, "noise");
    s->ci_rel_width = num(j, "ci_rel_width");
    s->rounds = (int)count(j, "rounds");
    s->timed_s = num(j, "timed_s");
    s->nivcsw = count(j, "nivcsw");
    s->steal_s = num(j, "steal_s");
    s->run_delay_s = num(j, "run_delay_s");
    s->load_start = num(j, "load_start");
    s->load_end = num(j, "load_end");
    s->one_thread_s = num(j, "one_thread_s");
    s->process_spread = num(j, "process_spread");
    const json_t *med = json_object_get(j, "process_medians_s");
    const json_t *cnt = json_object_get(j, "process_samples");
    for (size_t i = 0; i < json_array_size(cnt) && i < BENCH_MAX_PROCESSES; i++) {
        const json_t *m = json_array_get(med, i), *k = json_array_get(cnt, i);
        s->process_medians_s[i] = json_is_number(m) ? json_number_value(m) : NAN;
        s->process_samples[s->processes++] = json_is_integer(k) ? (int)json_integer_value(k) : 0;
    }
    s->unstable = json_is_true(json_object_get(j, "unstable"));
    const json_t *why = json_object_get(j, "reasons");
    for (size_t i = 0; i < json_array_size(why) && s->nreasons < BENCH_MAX_REASONS; i++)
        if (json_is_string(json_array_get(why, i)))
            snprintf(s->reasons[s->nreasons++], sizeof s->reasons[0], "%s",
                     json_string_value(json_array_get(why, i)));
}

static int need_string(const json_t *c, const char *path, int i, const char *key, const char **out,
                       diag *d) {
    const json_t *v = json_object_get(c, key);
    if (!json_is_string(v))
        return diag_set(d, path, 0, 0, "cases[%d]: \"%s\" %s; is this a tcbench results file?", i,
                        key, v ? "must be a string" : "is missing");
    *out = json_string_value(v);
    return 0;
}

// Samples: nulls (figures that were not finite) left out; cuda's host
// samples kept when there is one per sample.
static int samples_read(const json_t *c, const char *path, int i, results_entry *e, diag *d) {
    bench_result *r = &e->r;
    const json_t *samples = json_object_get(c, "samples_s");
    if (!json_is_array(samples))
        return diag_set(d, path, 0, 0, "cases[%d] (%s): \"samples_s\" %s", i, e->id.name,
                        samples ? "must be an array of numbers" : "is missing");
    size_t ns = json_array_size(samples);
    if (ns && !(r->samples = malloc(ns * sizeof *r->samples)))
        return diag_set(d, path, 0, 0, "malloc: out of memory for %zu samples", ns);
    for (size_t k = 0; k < ns; k++) {
        const json_t *v = json_array_get(samples, k);
        if (json_is_null(v))
            continue;
        if (!json_is_number(v))
            return diag_set(d, path, 0, 0, "cases[%d] (%s): samples_s[%zu] must be a number", i,
                            e->id.name, k);
        r->samples[r->nsamples++] = json_number_value(v);
    }
    const json_t *host = json_object_get(c, "host_samples_s");
    if (r->nsamples > 0 && json_array_size(host) == (size_t)r->nsamples) {
        if (!(r->host_samples = malloc((size_t)r->nsamples * sizeof *r->host_samples)))
            return diag_set(d, path, 0, 0, "malloc: out of memory for %d samples", r->nsamples);
        for (int k = 0; k < r->nsamples; k++) {
            const json_t *v = json_array_get(host, (size_t)k);
            r->host_samples[k] = json_is_number(v) ? json_number_value(v) : NAN;
        }
    }
    if (r->nsamples > 0 && bench_stats_compute(r->samples, r->nsamples, &r->stats) < 0)
        return diag_set(d, path, 0, 0, "bench_stats_compute: out of memory");
    return 0;
}

static int entry_read(const json_t *c, const char *path, int i, results_entry *e, diag *d) {
    if (!json_is_object(c))
        return diag_set(d, path, 0, 0, "cases[%d] must be an object", i);
    results_case *id = &e->id;
    static const char *const keys[] = {"suite",    "name",   "mode",  "precision",
                                       "workload", "device", "status"};
    const char **dst[] = {&id->suite,    &id->name,   &id->mode, &id->precision,
                          &id->workload, &id->device, &e->status};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
        if (need_string(c, path, i, keys[k], dst[k], d) < 0)
            return -1;
    const json_t *batch = json_object_get(c, "batch");
    if (!json_is_integer(batch))
        return diag_set(d, path, 0, 0, "cases[%d] (%s): \"batch\" %s", i, id->name,
                        batch ? "must be an integer" : "is missing");
    id->batch = (int64_t)json_integer_value(batch);
    id->suite_batch = count(c, "suite_batch");
    id->study = json_is_true(json_object_get(c, "study"));
    id->model = str(c, "model", id->name);
    id->family = str(c, "family", "");
    id->param_count = count(c, "param_count");
    id->flops = num(c, "flops");
    id->min_bytes = num(c, "min_bytes");

    bench_result *r = &e->r;
    int st = bench_status_parse(e->status);
    e->status_known = st >= 0;
    r->status = st >= 0 ? (enum bench_status)st : BENCH_ERROR;
    e->message = str(c, "message", "");
    snprintf(r->message, sizeof r->message, "%s", e->message);
    if (samples_read(c, path, i, e, d) < 0)
        return -1;
    r->iters_per_sample = count(c, "iterations_per_sample");
    r->kernels = count(c, "kernels");
    r->cast_kernels = count(c, "cast_kernels");
    r->peak_bytes = count(c, "peak_bytes");
    r->arena_bytes = count(c, "arena_bytes");
    r->compression_ratio = num(c, "compression_ratio");
    r->wall_s = num(c, "wall_s");
    const json_t *sp = json_object_get(c, "speedup");
    r->speedup = (bench_speedup){num(sp, "median"), num(sp, "ci95_lo"), num(sp, "ci95_hi")};
    const json_t *cm = json_object_get(c, "compile");
    r->compile = json_is_object(cm)
                     ? (bench_compile){true, num(cm, "cold_s"), num(cm, "warm_s"),
                                       json_is_true(json_object_get(cm, "cache_hit"))}
                     : (bench_compile){false, NAN, NAN, false};
    accuracy_read(json_object_get(c, "accuracy"), &r->acc);
    const json_t *gn = json_object_get(c, "generate");
    if (json_is_object(gn))
        r->gen = (bench_gen){true,
                             count(gn, "prompt_len"),
                             count(gn, "new_tokens"),
                             num(gn, "ttft_s"),
                             num(gn, "decode_s"),
                             num(gn, "tokens_per_s"),
                             count(gn, "kv_bytes_per_token"),
                             count(gn, "prefill_kernels"),
                             num(gn, "weight_error"),
                             0,
                             {0},
                             {0}};
    if (json_is_object(gn) && (r->gen.rounds = count(gn, "rounds")) > 0) {
        const json_t *re = json_object_get(gn, "ttft_reuse_s"), *an = json_object_get(gn, "ttft_anew_s");
        for (int64_t k = 0; k < r->gen.rounds && k < BENCH_MAX_CHAT_ROUNDS; k++) {
            r->gen.ttft_reuse_s[k] = json_number_value(json_array_get(re, (size_t)k));
            r->gen.ttft_anew_s[k] = json_number_value(json_array_get(an, (size_t)k));
        }
    } else {
        r->gen.rounds = 0;
    }
    const json_t *stab = json_object_get(c, "stability");
    e->has_stability = json_is_object(stab);
    stability_read(stab, &r->stab);
    const json_t *roof = json_object_get(c, "roofline");
    e->intensity = num(roof, "intensity");
    e->achieved_GFLOPs = num(roof, "achieved_GFLOPs");
    return 0;
}

int results_entry_read(const json_t *c, const char *path, int index, results_entry *e, diag *d) {
    memset(e, 0, sizeof *e);
    if (entry_read(c, path, index, e, d) < 0) {
        results_entry_free(e);
        return -1;
    }
    return 0;
}

bool results_entry_check_samples(results_entry *e) {
    bench_result *r = &e->r;
    for (int k = 0; k < r->nsamples; k++) {
        double v = r->samples[k];
        if (isfinite(v) && v >= RESULTS_SAMPLE_MIN_S && v <= RESULTS_SAMPLE_MAX_S)
            continue;
        r->status = BENCH_INVALID;
        e->status = bench_status_name(BENCH_INVALID);
        e->status_known = true;
        snprintf(r->message, sizeof r->message, "samples_s[%d] = %g s: not a plausible time", k,
                 v);
        e->message = r->message;
        return false;
    }
    return true;
}

void results_entry_free(results_entry *e) { bench_result_free(&e->r); }

int results_doc_read(const json_t *root, const char *path, results_doc *doc, diag *d) {
    memset(doc, 0, sizeof *doc);
    const json_t *ver = json_object_get(root, "schema_version");
    const json_t *cases = json_object_get(root, "cases");
    if (!json_is_object(root))
        return diag_set(d, path, 0, 0,
                        "the results must be a JSON object (docs/results-schema.md)");
    if (!json_is_integer(ver))
        return diag_set(d, path, 0, 0,
                        "no integer \"schema_version\": not a tcbench results file "
                        "(docs/results-schema.md)");
    if (json_integer_value(ver) > RESULTS_SCHEMA_VERSION || json_integer_value(ver) < 1)
        return diag_set(d, path, 0, 0,
                        "schema_version %lld: this tcbench reads version %d; use the "
                        "tcbench that wrote it",
                        (long long)json_integer_value(ver), RESULTS_SCHEMA_VERSION);
    if (!json_is_array(cases))
        return diag_set(d, path, 0, 0, "\"cases\" %s", cases ? "must be an array" : "is missing");
    doc->cases = cases;
    const json_t *tool = json_object_get(root, "tool"), *host = json_object_get(root, "host");
    const json_t *argv0 = json_array_get(json_object_get(root, "command_line"), 0);
    doc->timestamp = str(root, "timestamp", "");
    doc->tool_version = str(tool, "version", "unknown");
    doc->git_commit = str(tool, "git_commit", "unknown");
    doc->hostname = str(host, "hostname", "unknown");
    doc->os = str(host, "os", "unknown");
    doc->cpu_model = str(host, "cpu_model", "unknown");
    doc->cores = count(host, "cores");
    doc->threads_used = count(host, "threads_used");
    doc->command = json_is_string(argv0) ? json_string_value(argv0) : "tcbench";
    const json_t *cal = json_object_get(host, "calibration");
    doc->calib_GBps = num(cal, "bandwidth_GBps");
    doc->calib_GFLOPs = num(cal, "gemm_GFLOPs");
    json_t *gpus = json_object_get(host, "gpus");
    doc->gpus = json_is_array(gpus) ? gpus : NULL;
    doc->loadavg_start = num(host, "loadavg_start");
    const json_t *dis = json_object_get(json_object_get(root, "config"), "disabled");
    for (size_t k = 0; k < json_array_size(dis) && doc->ndisabled < RESULTS_MAX_DISABLED; k++)
        if (json_is_string(json_array_get(dis, k)))
            doc->disabled[doc->ndisabled++] = json_string_value(json_array_get(dis, k));
    return 0;
}
