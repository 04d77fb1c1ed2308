// Judging an entry's stability (stability.h).
#include "stability.h"

#include <stdarg.h>
#include <stdio.h>

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
