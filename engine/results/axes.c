// Axis and status tables (axes.h).
#include "axes.h"

#include <assert.h>
#include <string.h>

typedef struct axis_row {
    const char *name;
    const char *values[BENCH_AXIS_MAX];
    int size;
    const char *list;
} axis_row;

static const axis_row axes[] = {
    [BENCH_AXIS_MODE] = {"mode",
                         {"eager", "compiled", "fused", "captured"},
                         BENCH_MODE_COUNT,
                         "eager, compiled, fused, captured"},
    [BENCH_AXIS_PRECISION] =
        {"precision", {"fp32", "amp"}, BENCH_PREC_COUNT, "fp32, amp"},
    [BENCH_AXIS_WORKLOAD] =
        {"workload", {"infer", "train", "generate", "chat"}, BENCH_WL_COUNT,
         "infer, train, generate, chat"},
    [BENCH_AXIS_DEVICE] = {"device", {"cpu", "cuda"}, BENCH_DEV_COUNT, "cpu, cuda"},
};
static_assert(sizeof axes / sizeof axes[0] == BENCH_AXIS_COUNT, "one row per axis");
static_assert(BENCH_MODE_COUNT <= BENCH_AXIS_MAX && BENCH_PREC_COUNT <= BENCH_AXIS_MAX &&
                  BENCH_WL_COUNT <= BENCH_AXIS_MAX && BENCH_DEV_COUNT <= BENCH_AXIS_MAX,
              "BENCH_AXIS_MAX covers every axis");

// Every mode a results file may hold: tcbench's, in the mode axis's
// order, then another harness's (read beside them, never run). baseline:
// what the mode's speedup is over; peer: the other harness's mode that
// does the same thing.
typedef struct mode_row {
    const char *name, *baseline, *peer;
} mode_row;

#define BENCH_FOREIGN_MODES 2
static const mode_row mode_rows[] = {
    [BENCH_MODE_EAGER] = {"eager", NULL, "torch-eager"},
    [BENCH_MODE_COMPILED] = {"compiled", "eager", "torch-compile"},
    [BENCH_MODE_FUSED] = {"fused", "eager", NULL},
    [BENCH_MODE_CAPTURED] = {"captured", "eager", NULL},
    [BENCH_MODE_COUNT] = {"torch-eager", NULL, "eager"},
    [BENCH_MODE_COUNT + 1] = {"torch-compile", "torch-eager", "compiled"},
};
static_assert(sizeof mode_rows / sizeof mode_rows[0] == BENCH_MODE_COUNT + BENCH_FOREIGN_MODES,
              "one row per mode, tcbench's and the other harnesses'");

static const char *const status_names[] = {
    [BENCH_OK] = "ok",
    [BENCH_PASS] = "pass",
    [BENCH_FAIL_ACCURACY] = "fail_accuracy",
    [BENCH_FAIL_TO_RUN] = "fail_to_run",
    [BENCH_MODEL_FAIL_TO_LOAD] = "model_fail_to_load",
    [BENCH_EAGER_FAIL_TO_RUN] = "eager_fail_to_run",
    [BENCH_ERROR] = "error",
    [BENCH_CRASH] = "crash",
    [BENCH_TIMEOUT] = "timeout",
    [BENCH_OOM] = "oom",
    [BENCH_INVALID] = "invalid",
};
static_assert(sizeof status_names / sizeof status_names[0] == BENCH_STATUS_COUNT,
              "one name per status");

const char *bench_axis_name(enum bench_axis a) { return axes[a].name; }
int bench_axis_size(enum bench_axis a) { return axes[a].size; }
const char *bench_axis_value(enum bench_axis a, int v) { return axes[a].values[v]; }
const char *bench_axis_values_list(enum bench_axis a) { return axes[a].list; }

int bench_axis_parse(enum bench_axis a, const char *s) {
    for (int v = 0; v < axes[a].size; v++)
        if (strcmp(axes[a].values[v], s) == 0)
            return v;
    return -1;
}

const char *bench_status_name(enum bench_status s) { return status_names[s]; }
bool bench_status_good(enum bench_status s) { return s == BENCH_OK || s == BENCH_PASS; }
bool bench_mode_compiled(int mode) { return mode != BENCH_MODE_EAGER; }

int bench_status_parse(const char *s) {
    for (int i = 0; i < BENCH_STATUS_COUNT; i++)
        if (strcmp(status_names[i], s) == 0)
            return i;
    return -1;
}

int bench_mode_rank(const char *mode) {
    for (int k = 0; k < (int)(sizeof mode_rows / sizeof mode_rows[0]); k++)
        if (!strcmp(mode_rows[k].name, mode))
            return k;
    return -1;
}

const char *bench_mode_baseline(const char *mode) {
    int k = bench_mode_rank(mode);
    return k < 0 ? NULL : mode_rows[k].baseline;
}

const char *bench_mode_peer(const char *mode) {
    int k = bench_mode_rank(mode);
    return k < 0 ? NULL : mode_rows[k].peer;
}

bool bench_mode_foreign(const char *mode) { return bench_mode_rank(mode) >= BENCH_MODE_COUNT; }
