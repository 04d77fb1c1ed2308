// shard: a run's share of its selection (tcbench run --shard K/N), so that
// N machines (a Slurm job array, a CI matrix) measure a suite at once and
// `tcbench merge` puts their results back together (docs/cli.md).
//
//   cfg.shard_index = 2, cfg.shard_count = 4;    // --shard 2/4
//   bench_plan_new(&cfg, &p, &d);                // calls bench_plan_shard
//   ... p->tasks, p->groups: shard 2's alone ...
//   ... p->shard->groups[i].shard, .cost_ms: the whole selection's partition ...
//
// The unit is the group (plan.h): one case under one precision, workload
// and device, with all its modes. Its modes are timed interleaved in one
// child and eager is the compiled modes' baseline, so they never part; the
// groups of one case share nothing but the (cheap) model build, so a case's
// precisions and workloads may go to different shards.
//
// A group's cost is its children's start, its entries' least seconds
// (estimate.h) and, for each compiled-family mode, a compile allowance
// that grows with the graph; at a fixed reference machine, never this
// one's calibration: each shard computes the partition alone, on its own
// node, and a partition that depended on the node would run some groups
// twice and others never. Costs are rounded to whole milliseconds and the
// groups dealt longest first, each to the shard with the least cost so far
// (LPT), ties to the earlier group and the lower shard: integer
// arithmetic, the same on every machine.
#pragma once
#include "plan.h"

#include "base/diag.h"

#include <jansson.h>
#include <stdint.h>

// The reference machine of the costs; what starting a group's child costs
// (fork, the model built and filled), each of its processes; and the
// compile allowance: a cold and a warm compile take about 1 s plus a few
// ms per graph node on two cores (the smoke suite's ~1 s, timm's at --size
// cpu 2-5 s).
#define BENCH_SHARD_REF_FLOPS      100e9
#define BENCH_SHARD_REF_BPS        10e9
#define BENCH_SHARD_START_S        0.1
#define BENCH_SHARD_COMPILE_S      1.0
#define BENCH_SHARD_COMPILE_NODE_S 0.002
#define BENCH_SHARD_MAX            10000 // --shard K/N: N at most

// One group of the whole selection, in plan order.
typedef struct bench_shard_group {
    int case_index;             // into plan->cases
    int axis[BENCH_AXIS_COUNT]; // its precision, workload and device (the mode: its first)
    int modes[BENCH_MODE_COUNT];
    int nmodes;
    int64_t cost_ms;
    int shard; // 1 .. count
} bench_shard_group;

typedef struct bench_shard {
    int index, count; // K and N of --shard K/N
    bench_shard_group *groups;
    int ngroups;
    int ntasks;            // entries of the whole selection
    int64_t cost_ms;       // of the whole selection
    int64_t shard_cost_ms; // of shard index
} bench_shard;

// LPT: shard[i] (1 .. nshards) for each of the n costs, the largest first
// to the least loaded shard, ties to the lower index. -1 when memory runs out.
int bench_shard_assign(const int64_t *cost_ms, int n, int nshards, int *shard);
// A group's estimated cost (above), in whole milliseconds.
int64_t bench_group_cost_ms(const bench_plan *p, int group);
// Partitions p's groups into count shards and cuts p to shard index's
// (p->shard says how). 0, or -1 with d set (an index outside 1 .. count,
// no memory).
int bench_plan_shard(bench_plan *p, int index, int count, diag *d);
void bench_shard_free(struct bench_shard *s);
// config.shard_plan of the results: one object per group of the selection,
// {suite, name, batch, precision, workload, device, modes, cost_s, shard}.
// NULL when memory runs out.
json_t *bench_shard_plan_json(const bench_plan *p);
