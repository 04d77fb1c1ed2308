// export: results in other tools' formats. Today: Google Benchmark's JSON,
// so tools that read it (google-benchmark's tools/compare.py, CI dashboards)
// read ours.
//
//   resfile *f;  ... resfile_load ...
//   char err[256];
//   if (export_gbench(f, stdout, err, sizeof err) < 0) ...
//
// One benchmark per entry, named
// "suite/name/mode/precision/workload/batch:N" (the device joins after the
// workload when it is not cpu): each sample is a run_type "iteration"
// repetition (iterations = iterations_per_sample, real_time = the sample in
// ms; cpu_time repeats it, as tcbench measures wall time only), followed
// by the aggregates mean, median, stddev (time) and cv (percentage), as
// --benchmark_repetitions writes them. An entry that did not pass keeps
// its samples, each run with error_occurred and error_message ("status:
// message"); one without samples is a single run with iterations 0 and the
// error, as a benchmark that called SkipWithError. An unstable entry's runs
// carry a label ("unstable: noise 31% > 10%"). The context has the run's
// date, host_name, num_cpus, mhz_per_cpu when the CPU's name gives it
// ("@ 2.50GHz"), load_avg (the 1-minute load at the run's start, when
// recorded) and library_build_type (this tcbench's build type).
#pragma once
#include "resfile.h"

#include <stdio.h>

int export_gbench(const resfile *f, FILE *out, char *err, size_t cap);
