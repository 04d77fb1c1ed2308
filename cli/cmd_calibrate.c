// tcbench calibrate: measure this machine's ceilings for the roofline.
#include "cli.h"

#include "compile/kcache.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char usage[] =
    "usage: tcbench calibrate [--threads N]\n"
    "\n"
    "Measure this machine's ceilings for the roofline of `tcbench run`: memory bandwidth\n"
    "(the best of several STREAM triads over arrays far larger than the caches) and\n"
    "the GEMM rate (the best of several OpenBLAS SGEMMs of 2048^3), with N threads.\n"
    "Takes a few seconds and about 400 MiB. The figures are saved in calibration.json\n"
    "in the kernel cache directory ($XDG_CACHE_HOME/tcbench, else ~/.cache/tcbench),\n"
    "which keeps one calibration per CPU model and thread count: a new one replaces\n"
    "only that of the same threads, and `tcbench run --threads N` uses the one for N.\n"
    "\n"
    "  --threads N          threads (default: online cores; match run's --threads)\n"
    "  -h, --help           this help\n";

enum { OPT_THREADS = 256 };

static const struct option long_opts[] = {
    {"threads", required_argument, NULL, OPT_THREADS},
    {"help", no_argument, NULL, 'h'},
    {0},
};

int cmd_calibrate(int argc, char **argv) {
    const char *cmd = "calibrate";
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = cores > 0 ? (int)cores : 1;
    long long n;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", long_opts, NULL)) != -1) {
        switch (c) {
        case OPT_THREADS:
            if (cli_parse_int(cmd, "--threads", optarg, 1, 4096, &n) < 0)
                return 2;
            threads = (int)n;
            break;
        case 'h': fputs(usage, stdout); return 0;
        default: return cli_bad_option(cmd, c, argv);
        }
    }
    if (optind < argc)
        return cli_fail(cmd, "unexpected argument '%s' (see tcbench calibrate --help)",
                        argv[optind]);
    // where it goes, before seconds of measuring: an unsafe directory is
    // refused, an unreadable file replaced (`run` warns with the same words)
    char dir[1024], err[512];
    if (kcache_dir(NULL, dir, sizeof dir, err, sizeof err) < 0)
        return cli_fail(cmd, "%s", err);
    if (bench_calibration_check(NULL, err, sizeof err) < 0)
        fprintf(stderr, "tcbench calibrate: warning: %s; writing a new one\n", err);
    bench_calibration cal;
    if (bench_calibrate_measure(threads, &cal) < 0)
        return cli_fail(cmd, "out of memory for the measuring arrays (about 400 MiB)");
    if (bench_calibration_save(&cal, NULL, err, sizeof err) < 0)
        return cli_fail(cmd, "%s", err);
    printf("bandwidth %8.1f GB/s     (STREAM triad, %d thread%s)\n", cal.bandwidth_Bps / 1e9,
           threads, threads == 1 ? "" : "s");
    printf("GEMM      %8.1f GFLOP/s  (SGEMM 2048^3, %d thread%s)\n", cal.gemm_flops / 1e9, threads,
           threads == 1 ? "" : "s");
    printf("cpu       %s\n", cal.cpu_model);
    printf("saved to  %s/calibration.json\n", dir);
    static bench_calibration kept[BENCH_CALIBRATIONS_MAX];
    int nkept = bench_calibration_list(NULL, kept, BENCH_CALIBRATIONS_MAX);
    printf("kept      threads");
    for (int i = 0; i < nkept; i++)
        if (!strcmp(kept[i].cpu_model, cal.cpu_model))
            printf(" %d", kept[i].threads);
    printf(" (this CPU; `tcbench run --threads N` uses the one for N)\n");
    return 0;
}
