// What machine a result came from (host.h: bench_host_json).
#include "host.h"

#include "backend/cuda/cuda_device.h"
#include "base/clock.h"
#include "timing.h"

#include <cblas.h>
#include <dirent.h>
#include <dnnl.h>
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

// The value of the first "key : value" line of /proc/cpuinfo, or "".
static void cpuinfo_field(const char *key, char *out, size_t cap) {
    out[0] = '\0';
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return; // not Linux, or no /proc: the field reads "unknown"
    char line[8192];
    size_t klen = strlen(key);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, klen) != 0 ||
            (line[klen] != ' ' && line[klen] != '\t' && line[klen] != ':'))
            continue;
        char *colon = strchr(line, ':');
        if (!colon)
            continue;
        char *v = colon + 1 + strspn(colon + 1, " \t");
        v[strcspn(v, "\n")] = '\0';
        snprintf(out, cap, "%s", v);
        break;
    }
    fclose(f);
}

static bool has_flag(const char *flags, const char *flag) {
    size_t n = strlen(flag);
    for (const char *p = flags; (p = strstr(p, flag)); p += n)
        if ((p == flags || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
            return true;
    return false;
}

double bench_loadavg(void) {
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1)
            l = -1;
        fclose(f);
    }
    return l;
}

bool bench_host_busy(int threads, double *load, int *cores) {
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    *cores = (int)(c > 0 ? c : 1);
    *load = bench_loadavg();
    // the run itself adds nothing yet; anything above the cores its threads
    // leave free competes with them (OpenMP barriers then wait for a
    // preempted thread, and timings scatter by orders of magnitude)
    return *load >= 0 && *load > (double)(*cores - threads) + 0.75;
}

// The steal column of /proc/stat's first line (all CPUs), in seconds; NaN
// where it cannot be read (no /proc, a kernel without the column).
static double steal_seconds(void) {
    FILE *f = fopen("/proc/stat", "r");
    if (!f)
        return NAN;
    unsigned long long v[8];
    int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                   &v[4], &v[5], &v[6], &v[7]);
    fclose(f);
    long hz = sysconf(_SC_CLK_TCK);
    return n == 8 && hz > 0 ? (double)v[7] / (double)hz : NAN;
}

// Seconds this process's threads have spent runnable but waiting for a
// CPU, summed: the second field of each /proc/self/task/TID/schedstat
// (the scheduler's run_delay, in ns). NaN where it cannot be read.
static double run_delay_seconds(void) {
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return NAN;
    double sum = 0;
    int read = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char path[300];
        snprintf(path, sizeof path, "/proc/self/task/%s/schedstat", e->d_name);
        FILE *f = fopen(path, "r");
        unsigned long long on_cpu, delay;
        if (f && fscanf(f, "%llu %llu", &on_cpu, &delay) == 2) {
            sum += (double)delay * 1e-9;
            read++;
        }
        if (f)
            fclose(f);
    }
    closedir(d);
    return read ? sum : NAN;
}

void bench_probe_read(bench_probe *p) {
    p->run_delay_s = run_delay_seconds();
    struct rusage ru;
    p->nivcsw = getrusage(RUSAGE_SELF, &ru) == 0 ? (int64_t)ru.ru_nivcsw : 0;
    p->steal_s = steal_seconds();
    p->load = bench_loadavg();
    p->t = base_now();
}

void bench_probe_diff(const bench_probe *a, const bench_probe *b, bench_stability *s) {
    s->timed_s = b->t - a->t;
    s->nivcsw = b->nivcsw - a->nivcsw;
    double steal = b->steal_s - a->steal_s;
    s->steal_s = isfinite(steal) && steal > 0 ? steal : 0;
    double delay = b->run_delay_s - a->run_delay_s;
    s->run_delay_s = isfinite(delay) ? (delay > 0 ? delay : 0) : NAN;
    s->load_start = a->load >= 0 ? a->load : NAN;
    s->load_end = b->load >= 0 ? b->load : NAN;
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    s->cpus = c > 0 ? (int)c : 1;
}

int bench_threads_pin(int threads, char *err, size_t cap) {
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) < 0) {
        snprintf(err, cap, "sched_getaffinity: %s", strerror(errno));
        return -1;
    }
    int cpus[CPU_SETSIZE], ncpu = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &allowed))
            cpus[ncpu++] = c;
    if (ncpu == 0) {
        snprintf(err, cap, "sched_getaffinity: no CPU to run on");
        return -1;
    }
    int failed = 0;
    // The region has the team every later region of this many threads
    // reuses (libgomp keeps its pool), so the pins hold for the steps.
#pragma omp parallel num_threads(threads)
    {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpus[omp_get_thread_num() % ncpu], &one);
        int rc = pthread_setaffinity_np(pthread_self(), sizeof one, &one);
        if (rc != 0) {
#pragma omp atomic write
            failed = rc;
        }
    }
    if (failed) {
        snprintf(err, cap, "pthread_setaffinity_np: %s", strerror(failed));
        return -1;
    }
    return 0;
}

json_t *bench_host_json(int threads_used) {
    char hostname[256] = "unknown", os[400] = "unknown", model[256], flags[8192], dnnl[64];
    if (gethostname(hostname, sizeof hostname) < 0)
        snprintf(hostname, sizeof hostname, "unknown");
    hostname[sizeof hostname - 1] = '\0';
    struct utsname u;
    if (uname(&u) == 0)
        snprintf(os, sizeof os, "%s %s %s", u.sysname, u.release, u.machine);
    cpuinfo_field("model name", model, sizeof model);
    cpuinfo_field("flags", flags, sizeof flags);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    const dnnl_version_t *dv = dnnl_version();
    snprintf(dnnl, sizeof dnnl, "%d.%d.%d", dv->major, dv->minor, dv->patch);
    const char *blas_config = openblas_get_config();
    json_t *j = json_pack(
        "{s:s, s:s, s:s, s:i, s:i, s:{s:s, s:s}, s:{s:s, s:s}, s:{s:b, s:b, s:b, s:b}}", "hostname",
        hostname, "os", os, "cpu_model", model[0] ? model : "unknown", "cores",
        (int)(cores > 0 ? cores : 1), "threads_used", threads_used, "blas", "name", "OpenBLAS",
        "config", blas_config ? blas_config : "", "onednn", "version", dnnl, "hash",
        dv->hash ? dv->hash : "", "cpu_flags", "avx2", has_flag(flags, "avx2"), "avx512f",
        has_flag(flags, "avx512f"), "f16c", has_flag(flags, "f16c"), "fma", has_flag(flags, "fma"));
    double l = bench_loadavg();
    if (j)
        json_object_set_new(j, "loadavg_start", l >= 0 ? json_real(l) : json_null());
    return j;
}

// CUDA's version integers: 12080 is "12.8".
static void cuda_version(int v, char *buf, size_t cap) {
    snprintf(buf, cap, "%d.%d", v / 1000, v % 1000 / 10);
}

json_t *bench_gpu_json(const cuda_device_info *info, const char *why) {
    if (why)
        return json_pack("{s:i, s:s}", "index", info->index, "error", why);
    char cc[16], driver[16], runtime[16];
    snprintf(cc, sizeof cc, "%d.%d", info->cc_major, info->cc_minor);
    cuda_version(info->driver_version, driver, sizeof driver);
    cuda_version(info->runtime_version, runtime, sizeof runtime);
    return json_pack("{s:i, s:s, s:s, s:i, s:I, s:I, s:f, s:f, s:i, s:s, s:s}", "index",
                     info->index, "name", info->name, "compute_capability", cc, "sm_count",
                     info->sm_count, "memory_bytes", (json_int_t)info->memory_bytes, "l2_bytes",
                     (json_int_t)info->l2_bytes, "sm_clock_mhz", info->clock_khz / 1e3,
                     "memory_clock_mhz", info->memory_clock_khz / 1e3, "memory_bus_bits",
                     info->memory_bus_bits, "driver", driver, "runtime", runtime);
}
