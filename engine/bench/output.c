// A run's results file and journal (output.h, docs/results-schema.md):
// what the plan and config know, around results.h's case objects.
#include "output.h"

#include "backend/cuda/cuda_device.h"
#include "base/files.h"
#include "host.h"
#include "shard.h"
#include "results/journal.h"
#include "../exec.h" // the executor registry (not bench/exec.h)
#include "tcbench_config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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

static json_t *roofline_json(const bench_case *bc, const bench_result *r,
                             const bench_calibration *calib) {
    if (r->stats.n == 0 || !(r->stats.median > 0))
        return json_null();
    json_t *j = bench_roofline_json(bc->flops, bc->min_bytes, r->stats.median, calib);
    return j ? j : json_null();
}

void bench_result_case(const bench_plan *p, int task, results_case *id) {
    const bench_task *t = &p->tasks[task];
    const bench_case *bc = &p->cases[t->case_index];
    *id = (results_case){
        .suite = bc->s->name ? bc->s->name : "",
        .name = bc->c->name,
        .model = modeldef_name(bc->md),
        .family = modeldef_family(bc->md),
        .mode = bench_axis_value(BENCH_AXIS_MODE, t->axis[BENCH_AXIS_MODE]),
        .precision = bench_axis_value(BENCH_AXIS_PRECISION, t->axis[BENCH_AXIS_PRECISION]),
        .workload = bench_axis_value(BENCH_AXIS_WORKLOAD, t->axis[BENCH_AXIS_WORKLOAD]),
        .device = bench_axis_value(BENCH_AXIS_DEVICE, t->axis[BENCH_AXIS_DEVICE]),
        .batch = bc->batch,
        .suite_batch = bc->c->batch,
        .study = bc->c->study,
        .param_count = bc->param_count,
        .flops = bc->flops,
        .min_bytes = bc->min_bytes,
    };
}

json_t *bench_result_json(const bench_plan *p, const bench_result *r,
                          const bench_calibration *calib) {
    const bench_case *bc = &p->cases[p->tasks[r->task].case_index];
    results_case id;
    bench_result_case(p, r->task, &id);
    json_t *params = json_object();
    for (int i = 0; params && i < bc->c->noverrides; i++)
        json_object_set_new(params, bc->c->overrides[i].key, param_value(bc->c->overrides[i].expr));
    return results_entry_json(&id, r, params, roofline_json(bc, r, calib));
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

json_t *bench_config_json(const bench_plan *p) {
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
    rc |= json_object_set_new(j, "min_time_s", results_real(c->min_time_s));
    rc |= json_object_set_new(j, "max_time_s", results_real(c->max_time_s));
    rc |= json_object_set_new(j, "processes", json_integer(c->processes > 1 ? c->processes : 1));
    rc |= json_object_set_new(j, "pin", json_boolean(c->pin));
    rc |= json_object_set_new(j, "order", json_string("rotate"));
    rc |= json_object_set_new(j, "disabled", disabled_json());
    rc |= json_object_set_new(j, "threads", json_integer(c->threads));
    rc |= json_object_set_new(j, "timeout_s", results_real(c->timeout_s));
    rc |= json_object_set_new(j, "modes", axis_json(p, BENCH_AXIS_MODE));
    rc |= json_object_set_new(j, "precisions", axis_json(p, BENCH_AXIS_PRECISION));
    rc |= json_object_set_new(j, "workloads", axis_json(p, BENCH_AXIS_WORKLOAD));
    rc |= json_object_set_new(j, "devices", axis_json(p, BENCH_AXIS_DEVICE));
    rc |= json_object_set_new(j, "device", json_string(bench_axis_value(BENCH_AXIS_DEVICE, dev)));
    rc |= json_object_set_new(j, "check_accuracy", json_boolean(c->accuracy));
    rc |= json_object_set_new(j, "grad_scaler", json_boolean(c->grad_scaler));
    rc |=
        json_object_set_new(j, "amp_dtype", json_string(c->amp_dtype == DT_BF16 ? "bf16" : "fp16"));
    rc |= json_object_set_new(j, "weights",
                              json_string(c->weight_bits == 8   ? "int8"
                                          : c->weight_bits == 4 ? "int4"
                                                                : "f32"));
    rc |= json_object_set_new(j, "weight_group", json_integer(c->weight_group));
    rc |= json_object_set_new(j, "prompt_len", json_integer(c->prompt_len));
    rc |= json_object_set_new(j, "new_tokens", json_integer(c->new_tokens));
    rc |= json_object_set_new(j, "chat_rounds", json_integer(c->rounds));
    rc |= json_object_set_new(j, "weight_scales", json_string(dtype_name(c->weight_scales)));
    rc |= json_object_set_new(j, "attention", json_string(c->fused_attention ? "sdpa" : "math"));
    rc |= json_object_set_new(j, "accuracy_flops_limit", results_real(c->accuracy_flops_limit));
    rc |= json_object_set_new(j, "only", strings_json(c->only, c->nonly));
    rc |= json_object_set_new(j, "filter", c->filter ? json_string(c->filter) : json_null());
    rc |= json_object_set_new(j, "exclude", c->exclude ? json_string(c->exclude) : json_null());
    rc |= json_object_set_new(j, "dump_dir", c->dump_dir ? json_string(c->dump_dir) : json_null());
    rc |= json_object_set_new(j, "tf32", json_boolean(c->tf32));
    rc |= json_object_set_new(j, "flush_l2", json_boolean(c->flush_l2));
    rc |= json_object_set_new(j, "memory_limit",
                              c->memory_limit ? json_integer((json_int_t)c->memory_limit)
                                              : json_null());
    // auto's reason is why not the GPU: empty when it chose cuda
    rc |= json_object_set_new(j, "device_auto",
                              c->device_auto ? json_pack("{s:s, s:s}", "chose",
                                                         c->device_auto[0] ? "cpu" : "cuda",
                                                         "reason", c->device_auto)
                                             : json_null());
    if (p->shard) { // what `tcbench merge` checks the other shards against
        char k[48];
        snprintf(k, sizeof k, "%d/%d", p->shard->index, p->shard->count);
        rc |= json_object_set_new(j, "shard", json_string(k));
        json_t *plan = bench_shard_plan_json(p);
        rc |= plan ? json_object_set_new(j, "shard_plan", plan) : -1;
    }
    if (rc) {
        json_decref(j);
        return NULL;
    }
    return j;
}

static json_t *argv_json(const bench_plan *p) {
    json_t *argv = json_array();
    for (int i = 0; argv && i < p->cfg.argc; i++)
        json_array_append_new(argv, json_string(p->cfg.argv[i]));
    return argv;
}

json_t *bench_report_json(const bench_report *r) {
    const bench_plan *p = r->plan;
    json_t *cases = json_array();
    for (int i = 0; i < p->ntasks; i++)
        if (r->done[i])
            json_array_append_new(
                cases, bench_result_json(p, &r->results[i], r->has_calib ? &r->calib : NULL));
    json_t *argv = r->command_line ? json_deep_copy(r->command_line) : argv_json(p);
    return results_doc_json(r->timestamp, argv, r->host, bench_config_json(p), cases, r->wall_s);
}

// Once, when the journal stops: what failed, what it holds.
static void journal_lost(const bench_report *r) {
    fprintf(stderr,
            "tcbench run: %s; the journal holds %d of %d entries, the rest are measured for "
            "the results file alone\n",
            r->journal_err, r->journaled, r->plan->ntasks);
}

int bench_report_journal(bench_report *r, int task) {
    if (r->journal_failed)
        return 0;
    const bench_result *res = &r->results[task];
    json_t *j = bench_result_json(r->plan, res, r->has_calib ? &r->calib : NULL);
    int rc = j ? results_journal_append(r->journal_file, r->journal, j, r->journal_err,
                                        sizeof r->journal_err)
               : -1;
    if (!j)
        snprintf(r->journal_err, sizeof r->journal_err, "json_pack: out of memory writing %s",
                 r->journal);
    json_decref(j);
    if (rc < 0) {
        r->journal_failed = true;
        journal_lost(r);
        return -1;
    }
    r->journaled++;
    return 0;
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

// Refuses an output that cannot be written before anything is measured,
// takes OUTPUT.lock for the run and removes what a killed writer left.
static int output_claim(bench_report *r, char *err, size_t cap) {
    struct stat st;
    if (stat(r->output, &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            snprintf(err, cap, "%s: is a directory; -o wants a file name", r->output);
            return -1;
        }
        if (!S_ISREG(st.st_mode)) {
            snprintf(err, cap, "%s: not a regular file", r->output);
            return -1;
        }
        if (access(r->output, W_OK) < 0) {
            snprintf(err, cap, "%s: cannot replace it: %s", r->output, strerror(errno));
            return -1;
        }
    } else if (errno != ENOENT) {
        snprintf(err, cap, "%s: %s", r->output, strerror(errno));
        return -1;
    }
    // creating the lock beside it shows the directory takes new files
    snprintf(r->lock, sizeof r->lock, "%s.lock", r->output);
    long holder;
    char why[600];
    int rc = base_lock_take(r->lock, &r->lock_fd, &holder, why, sizeof why);
    if (rc != 0) {
        if (rc > 0 && holder > 0)
            snprintf(err, cap, "%s is being written by another tcbench run (pid %ld; lock %s)",
                     r->output, holder, r->lock);
        else if (rc > 0)
            snprintf(err, cap, "%s is being written by another tcbench run (lock %s)", r->output,
                     r->lock);
        else
            snprintf(err, cap, "%s: cannot write beside it: %s", r->output, why);
        r->lock[0] = '\0';
        return -1;
    }
    base_tmp_sweep(r->output);
    return 0;
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

int bench_report_new(const bench_plan *p, bench_report **out, char *err, size_t cap) {
    *out = NULL;
    bench_report *r = calloc(1, sizeof *r);
    if (r) {
        r->plan = p;
        r->results = calloc((size_t)p->ntasks + 1, sizeof *r->results);
        r->done = calloc((size_t)p->ntasks + 1, sizeof *r->done);
    }
    if (!r || !r->results || !r->done) {
        bench_report_free(r);
        snprintf(err, cap, "calloc: out of memory");
        return -1;
    }
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
        return -2;
    }
    if (p->cfg.output)
        snprintf(r->output, sizeof r->output, "%s", p->cfg.output);
    else
        strftime(r->output, sizeof r->output, "results/tcbench-%Y%m%d-%H%M%S.json", &tm);
    snprintf(r->journal, sizeof r->journal, "%s.jsonl", r->output);
    if (make_parent_dirs(r->output, err, cap) < 0 || output_claim(r, err, cap) < 0) {
        bench_report_free(r);
        return -2; // refused before anything is measured: bad input
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

int bench_report_open(const bench_plan *p, bench_report **out, char *err, size_t cap) {
    *out = NULL;
    bench_report *r;
    int k = bench_report_new(p, &r, err, cap);
    if (k < 0)
        return k;
    if (!(r->journal_file = fopen(r->journal, "w"))) {
        snprintf(err, cap, "fopen %s: %s", r->journal, strerror(errno));
        bench_report_free(r);
        return -1;
    }
    json_t *config = bench_config_json(p);
    json_t *h = config ? results_journal_header(r->timestamp, argv_json(p), r->host, config) : NULL;
    if (!h) {
        snprintf(err, cap, "json_pack: out of memory building the journal's header");
        bench_report_free(r);
        return -1;
    }
    if (results_journal_append(r->journal_file, r->journal, h, r->journal_err,
                               sizeof r->journal_err) < 0) {
        r->journal_failed = true;
        journal_lost(r);
    }
    json_decref(h);
    *out = r;
    return 0;
}

int bench_report_write(const bench_report *r, char *err, size_t cap) {
    json_t *doc = bench_report_json(r);
    if (!doc) {
        snprintf(err, cap, "json_pack: out of memory building the results");
        return -1;
    }
    int rc = results_file_write(r->output, doc, err, cap);
    json_decref(doc);
    return rc;
}

void bench_report_free(bench_report *r) {
    if (!r)
        return;
    for (int i = 0; r->results && i < r->plan->ntasks; i++)
        bench_result_free(&r->results[i]);
    free(r->results);
    free(r->done);
    json_decref(r->command_line);
    if (r->journal_file && fclose(r->journal_file) != 0)
        fprintf(stderr, "tcbench: fclose %s: %s\n", r->journal, strerror(errno));
    json_decref(r->host);
    if (r->lock[0])
        base_lock_drop(r->lock, r->lock_fd);
    free(r);
}
