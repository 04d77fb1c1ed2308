// A group's figures once its samples are final: pooling the processes of
// --processes, then speedups and stability (measure.h: bench_group_pool,
// bench_group_judge).
#include "measure.h"
#include "stability.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Appends n values to *dst (holding *have); -1 when out of memory.
static int append(double **dst, int have, const double *src, int n) {
    double *d = realloc(*dst, (size_t)(have + n) * sizeof *d);
    if (!d)
        return -1;
    memcpy(d + have, src, (size_t)n * sizeof *d);
    *dst = d;
    return 0;
}

void bench_group_pool(bench_result *rs, const bench_result *more, int n, int process) {
    for (int k = 0; k < n; k++) {
        bench_result *r = &rs[k];
        const bench_result *m = &more[k];
        if (!bench_status_good(r->status))
            continue; // process 0 decided: its failure stands
        if (!bench_status_good(m->status)) {
            // a crash, a timeout or a failed step in a later process fails
            // the entry as it would have failed process 0; the samples of
            // the processes before stay in the results
            r->status = m->status;
            snprintf(r->message, sizeof r->message, "process %d: %s", process + 1, m->message);
            continue;
        }
        if (m->nsamples == 0 || r->stab.processes >= BENCH_MAX_PROCESSES)
            continue;
        bool host = r->host_samples && m->host_samples;
        if (append(&r->samples, r->nsamples, m->samples, m->nsamples) < 0 ||
            (host && append(&r->host_samples, r->nsamples, m->host_samples, m->nsamples) < 0)) {
            r->status = BENCH_OOM;
            snprintf(r->message, sizeof r->message,
                     "realloc: out of memory pooling the samples of process %d", process + 1);
            continue;
        }
        if (!host) {
            free(r->host_samples);
            r->host_samples = NULL;
        }
        bench_stability *s = &r->stab;
        const bench_stability *t = &m->stab;
        r->nsamples += m->nsamples;
        s->rounds += t->rounds;
        s->timed_s += t->timed_s;
        s->nivcsw += t->nivcsw;
        s->steal_s += t->steal_s;
        s->run_delay_s += t->run_delay_s;
        s->load_end = t->load_end;
        s->process_samples[s->processes++] = m->nsamples;
    }
}

void bench_group_judge(bench_result *rs, int n, int threads) {
    bench_result *er = &rs[0];
    for (int k = 1; k < n; k++) {
        bench_result *r = &rs[k];
        r->speedup = (bench_speedup){NAN, NAN, NAN};
        if (r->status != BENCH_PASS || er->nsamples == 0 || r->nsamples == 0)
            continue;
        // the modes were timed in the same rounds: the interval draws rounds
        if (er->nsamples == r->nsamples)
            bench_speedup_paired(er->samples, r->samples, r->nsamples, &r->speedup);
        else
            bench_speedup_bootstrap(er->samples, er->nsamples, r->samples, r->nsamples,
                                    &r->speedup);
    }
    for (int k = 0; k < n; k++) {
        bench_stability *s = &rs[k].stab;
        if (s->rounds == 0)
            continue;
        // within each process, and between them (stats.h); samples that
        // came without their processes' counts are one process's
        if (s->processes < 1 ||
            bench_stats_processes(rs[k].samples, rs[k].nsamples, s->process_samples, s->processes,
                                  &s->noise, &s->process_spread, s->process_medians_s) < 0) {
            s->processes = 1;
            s->process_samples[0] = rs[k].nsamples;
            bench_stats_processes(rs[k].samples, rs[k].nsamples, s->process_samples, 1, &s->noise,
                                  &s->process_spread, s->process_medians_s);
        }
        const bench_speedup *sp = &rs[k].speedup;
        s->ci_rel_width =
            k > 0 && isfinite(sp->median) ? (sp->ci95_hi - sp->ci95_lo) / sp->median : NAN;
    }
    // judged after every noise is known: an entry over a noisy eager
    // baseline is unsure too, whatever its own samples say
    for (int k = 0; k < n; k++) {
        bench_stability *s = &rs[k].stab;
        if (s->rounds == 0)
            continue;
        bench_stability_judge(s);
        if (k > 0 && !(er->stab.noise <= BENCH_NOISE_CAP))
            bench_stability_add(s, "eager baseline noise %.1f%% > %.0f%%", 100 * er->stab.noise,
                                100 * BENCH_NOISE_CAP);
        if (er->stats.n > 0)
            bench_thread_stall_judge(s, er->stats.median, er->stab.one_thread_s, threads);
    }
}
