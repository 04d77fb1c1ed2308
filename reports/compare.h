// compare: is CURRENT slower than BASELINE, beyond noise? The CI gate
// (docs/reports.md).
//
//   compare_options o;
//   compare_options_init(&o);            // threshold 0.05, alpha 0.01, noise cap 0.10, text
//   int rc = compare_main("base.json", "new.json", &o, stdout, stderr);
//   // 0 pass, 1 regression (or a noisy entry under o.fail_on_noisy),
//   // 2 bad or incomparable input (one line on stderr)
//
// A side's noise is the robust dispersion of its samples_s,
// bench_stats_noise (1.4826 MAD / median): one wild sample in twenty
// leaves it where it was, where stddev / mean made the limit hundreds of
// percent wide and let a 50% slowdown through. Entries match on suite,
// name, mode, precision, workload, device and batch. Each pair gets one
// verdict; a status change decides first, then too few samples, then
// noise, and only then the times:
//   regression   an entry that was ok or pass and is now anything else
//                (whatever its times); or slower, and all three agree: a
//                two-sided Mann-Whitney U test (normal approximation,
//                tie-corrected, continuity-corrected) whose p-value,
//                adjusted by Benjamini-Hochberg over every tested entry, is
//                below alpha; a change of the median above max(threshold,
//                3 x noise), noise = sqrt(noise_base^2 + noise_cur^2); and
//                the bootstrap 95% interval of the ratio of medians
//                (new / base) entirely beyond that threshold.
//   improvement  the same three, faster; or a failing entry that now passes
//                (a status change, called whatever the noise: the baseline
//                has no time to compare with)
//   insufficient fewer than 10 samples on a side: no test is made
//   noisy        a side's noise above o.noise_cap, or an entry with
//                stability.unstable true in its file: too noisy to call,
//                never same, ambiguous, improvement or regression by its
//                times; not tested (left out of Benjamini-Hochberg), listed
//                apart in every format, a failure only under
//                o.fail_on_noisy
//   ambiguous    the median moved beyond the threshold, but the test or the
//                interval does not confirm it (rerun with more --repeat)
//   same         no change beyond the threshold, or failing on both sides
//   missing      in the baseline only;   new   in the current file only
// Results of different machines (host cpu_model, cores, and the GPUs'
// names and drivers when there are any) are refused unless o.force. Runs
// of one machine with other settings (threads_used) are compared, with a
// warning: a slower run with fewer threads is a regression of that run.
#pragma once
#include "resfile.h"

#include <stdbool.h>
#include <stdio.h>

#define COMPARE_MIN_SAMPLES 10
// Above this noise on a side (bench_stats_noise), a pair is `noisy`.
#define COMPARE_NOISE_CAP 0.10

enum compare_verdict {
    CMP_REGRESSION,
    CMP_IMPROVEMENT,
    CMP_AMBIGUOUS,
    CMP_NOISY,
    CMP_SAME,
    CMP_INSUFFICIENT,
    CMP_MISSING,
    CMP_NEW,
    CMP_VERDICT_COUNT
};

enum compare_format { CMP_TEXT, CMP_MD, CMP_JSON, CMP_JUNIT, CMP_FORMAT_COUNT };

typedef struct compare_options {
    double threshold;   // smallest relative change of the median that counts (0.05)
    double alpha;       // false discovery rate of Benjamini-Hochberg (0.01)
    double noise_cap;   // a side's noise above this makes the pair noisy (COMPARE_NOISE_CAP)
    bool fail_on_noisy; // a noisy entry fails the gate (exit 1), as a regression does
    bool force;         // compare results of different machines anyway
    enum compare_format format;
} compare_options;

void compare_options_init(compare_options *o);

// The longest reason, with its terminating NUL.
#define COMPARE_REASON_MAX 256

typedef struct compare_row {
    const resfile_entry *base, *cur; // NULL for new / missing
    enum compare_verdict verdict;
    const char *reason; // in the result's pool (a million rows share a few reasons)
    bool tested;                  // the U test ran (both sides passed, enough samples)
    double base_ms, cur_ms;       // medians
    double ratio;                 // median cur / median base (above 1: slower)
    double ci_lo, ci_hi;          // bootstrap 95% interval of the ratio
    double noise_base, noise_cur; // bench_stats_noise of each side's samples
    double noise;                 // sqrt(noise_base^2 + noise_cur^2)
    double threshold;             // max(o.threshold, 3 x noise)
    double p, q;                  // U test p-value, and adjusted by Benjamini-Hochberg
} compare_row;

typedef struct compare_result {
    const resfile *base, *cur;
    compare_options opts;
    compare_row *rows; // base's order, then the new entries
    int nrows;
    int count[CMP_VERDICT_COUNT];
    char machines[512]; // how the machines differ ("" when they do not)
    char settings[256]; // how the runs' settings differ ("" when they do not)
    struct resfile_store *pool; // the rows' reasons
} compare_result;

const char *compare_verdict_name(enum compare_verdict v);
// Whether the gate fails: a regression, or a noisy entry under fail_on_noisy.
bool compare_result_failed(const compare_result *r);
int compare_format_parse(const char *s); // -1 when unknown

// The two-sided p-value of the Mann-Whitney U test, normal approximation
// with tie and continuity corrections (scipy's mannwhitneyu with
// method="asymptotic"). 1 when every value ties.
double compare_mann_whitney(const double *a, int na, const double *b, int nb);
// Benjamini-Hochberg adjusted p-values (q[i] for p[i]), monotone, at most 1.
void compare_bh_adjust(const double *p, int n, double *q);
// How the machines of two results differ, into buf ("" when they do not).
void compare_machines(const resfile *a, const resfile *b, char *buf, size_t cap);
// How the settings of two runs of one machine differ (threads_used), into
// buf ("" when they do not).
void compare_settings(const resfile *a, const resfile *b, char *buf, size_t cap);

// 0, or -1 with err (out of memory, the same entry twice in one file).
// Does not look at the machines; compare_main does.
int compare_files(const resfile *base, const resfile *cur, const compare_options *o,
                  compare_result *r, char *err, size_t cap);
void compare_result_free(compare_result *r);
// The verdicts in o.format; -1 when writing failed.
int compare_write(const compare_result *r, FILE *out);
// Loads both, refuses different machines unless forced, compares, writes:
// the exit status (0 pass, 1 compare_result_failed, 2 bad input, one line
// on err).
int compare_main(const char *base_path, const char *cur_path, const compare_options *o, FILE *out,
                 FILE *err);
// The same on files already loaded (a baseline built from the history,
// history.h); their paths name them in messages.
int compare_loaded(const resfile *base, const resfile *cur, const compare_options *o, FILE *out,
                   FILE *err);
