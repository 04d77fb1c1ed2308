// cli: the tcbench command line. main.c dispatches to one cmd_* per
// subcommand; each parses its options (getopt_long), calls the engine and
// reports. Nothing here measures or builds anything itself. Two programs:
// tcbench (main.c: report, compare, export) and tcbench-engine
// (engine_main.c: run, list, check, calibrate, plan, weights), which main.c
// execs.
//
//   int main(int argc, char **argv) -> cmd_run(argc - 1, argv + 1, argc, argv)
//
// Exit status everywhere: 0 success, 1 a case failed (run), 2 bad input or
// bad usage, always with one line on stderr that says what and where.
#pragma once
#include "bench/check.h"
#include "bench/host.h"
#include "bench/runner.h"

#include <stdbool.h>
#include <stdint.h>

// Subcommands: argv[0] is the subcommand's name; orig_argv is the whole
// command line as typed (recorded in results before getopt permutes it).
int cmd_run(int argc, char **argv, int orig_argc, char **orig_argv);
int cmd_list(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_calibrate(int argc, char **argv);
int cmd_weights(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_merge(int argc, char **argv);
int cmd_history(int argc, char **argv);

// "tcbench run: <message>" on stderr; returns 2 for `return cli_fail(...)`.
int cli_fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// A located error as one line: "file:line:col: message", or, for an error
// in the options (no file), "tcbench run: message".
void cli_diag(const char *cmd, const diag *d);
// The message for getopt_long's '?' or ':' (unknown option, missing value); returns 2.
int cli_bad_option(const char *cmd, int c, char **argv);

// Numeric option values; on a bad value: one line naming the option, -1.
int cli_parse_int(const char *cmd, const char *opt, const char *s, long long min, long long max,
                  long long *out);
// A comma list of whole numbers (--batch-sizes 1,4,16) into out[0..*n):
// each in [min, max], none empty, none twice, at most cap of them.
int cli_parse_int_list(const char *cmd, const char *opt, const char *s, long long min,
                       long long max, long long *out, int cap, int *n);
int cli_parse_seconds(const char *cmd, const char *opt, const char *s, double *out);
// The same, 0 allowed (a budget that is off).
int cli_parse_seconds_or_zero(const char *cmd, const char *opt, const char *s, double *out);
// A byte count: a number above 0 (1e9, 1.5) with an optional unit, KiB,
// MiB, GiB, TiB (powers of 1024) or kB, MB, GB, TB (of 1000): 6GiB, 512MiB.
int cli_parse_bytes(const char *cmd, const char *opt, const char *s, size_t *out);
// --shard K/N: shard K (1 .. N) of N; -1 with one line naming the option.
int cli_parse_shard(const char *cmd, const char *s, int *index, int *count);
// The weight-only quantization and attention options run and plan share:
// opt is "--weights" (f32, int8, int4 into *bits), "--weight-group" (32, 64,
// 128 into *group), "--weight-scales" (f32, f16 into *scales) or
// "--attention" (math, sdpa into *fused). 0, or 2 with the message printed.
typedef struct cli_gen_opts {
    int *bits;
    int64_t *group;
    enum dtype *scales;
    bool *fused;
} cli_gen_opts;
int cli_parse_gen_option(const char *cmd, const char *opt, const char *s, const cli_gen_opts *o);
// A comma list of axis values (--mode eager,compiled) into cfg; values this
// build cannot run are refused here, before anything is loaded. --device
// takes `auto` too (bench_device_auto); whether a device is built and
// usable is the plan's check (bench_config_check_devices, bench/plan.h).
int cli_parse_axis(const char *cmd, enum bench_axis a, const char *list, bench_config *cfg);

// A list of strings that grows as options repeat (--only a --only b,c).
typedef struct cli_strings {
    char **v;
    int n;
} cli_strings;
// Appends each comma-separated word of s (copied); -1 on an empty word or no memory.
int cli_strings_add_list(cli_strings *l, const char *cmd, const char *opt, const char *s);
int cli_strings_add(cli_strings *l, const char *s);
void cli_strings_free(cli_strings *l);

// Human-readable counts: 1.2K, 3.4M, 5.6G.
void cli_format_count(double v, char *buf, size_t cap);
