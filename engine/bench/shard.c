// A run's share of its selection, balanced by estimated cost (shard.h).
#include "shard.h"

#include "estimate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct by_cost {
    int64_t cost;
    int index;
} by_cost;

// the largest first; ties to the earlier
static int cmp_by_cost(const void *a, const void *b) {
    const by_cost *x = a, *y = b;
    if (x->cost != y->cost)
        return x->cost > y->cost ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

int bench_shard_assign(const int64_t *cost_ms, int n, int nshards, int *shard) {
    by_cost *order = malloc(((size_t)n + 1) * sizeof *order);
    int64_t *load = calloc((size_t)nshards + 1, sizeof *load);
    if (!order || !load) {
        free(order);
        free(load);
        return -1;
    }
    for (int i = 0; i < n; i++)
        order[i] = (by_cost){cost_ms[i], i};
    qsort(order, (size_t)n, sizeof *order, cmp_by_cost);
    for (int i = 0; i < n; i++) {
        int least = 0;
        for (int s = 1; s < nshards; s++)
            if (load[s] < load[least])
                least = s;
        load[least] += order[i].cost;
        shard[order[i].index] = least + 1;
    }
    free(order);
    free(load);
    return 0;
}

int64_t bench_group_cost_ms(const bench_plan *p, int group) {
    static const bench_calibration ref = {.gemm_flops = BENCH_SHARD_REF_FLOPS,
                                          .bandwidth_Bps = BENCH_SHARD_REF_BPS};
    const bench_group *g = &p->groups[group];
    double s = (g->processes > 1 ? g->processes : 1) * BENCH_SHARD_START_S;
    for (int i = g->first; i < g->first + g->ntasks; i++) {
        double t = bench_task_seconds(p, i, &ref);
        if (t < 0) // nothing runs: the child ends it at once
            continue;
        const bench_task *task = &p->tasks[i];
        if (bench_mode_compiled(task->axis[BENCH_AXIS_MODE])) {
            // a training graph is about three inference graphs
            double k = task->axis[BENCH_AXIS_WORKLOAD] == BENCH_WL_TRAIN ? 3.0 : 1.0;
            t += BENCH_SHARD_COMPILE_S +
                 k * p->cases[task->case_index].nodes * BENCH_SHARD_COMPILE_NODE_S;
        }
        s += t;
    }
    return llround(s * 1000);
}

void bench_shard_free(bench_shard *s) {
    if (!s)
        return;
    free(s->groups);
    free(s);
}

// The selection's groups as they are (before the cut), with their costs.
static void shard_describe(const bench_plan *p, bench_shard *s, int64_t *cost) {
    for (int g = 0; g < p->ngroups; g++) {
        const bench_group *gr = &p->groups[g];
        bench_shard_group *sg = &s->groups[g];
        sg->case_index = p->tasks[gr->first].case_index;
        memcpy(sg->axis, p->tasks[gr->first].axis, sizeof sg->axis);
        sg->nmodes = gr->ntasks < BENCH_MODE_COUNT ? gr->ntasks : BENCH_MODE_COUNT;
        for (int m = 0; m < sg->nmodes; m++)
            sg->modes[m] = p->tasks[gr->first + m].axis[BENCH_AXIS_MODE];
        sg->cost_ms = cost[g] = bench_group_cost_ms(p, g);
        s->cost_ms += cost[g];
    }
    s->ngroups = p->ngroups;
    s->ntasks = p->ntasks;
}

int bench_plan_shard(bench_plan *p, int index, int count, diag *d) {
    if (count < 1 || count > BENCH_SHARD_MAX || index < 1 || index > count)
        return diag_set(d, NULL, 0, 0, "--shard %d/%d: expected K/N with 1 <= K <= N <= %d", index,
                        count, BENCH_SHARD_MAX);
    bench_shard *s = calloc(1, sizeof *s);
    int64_t *cost = malloc(((size_t)p->ngroups + 1) * sizeof *cost);
    int *shard = malloc(((size_t)p->ngroups + 1) * sizeof *shard);
    if (s)
        s->groups = calloc((size_t)p->ngroups + 1, sizeof *s->groups);
    if (s && s->groups && cost && shard)
        shard_describe(p, s, cost);
    if (!s || !s->groups || !cost || !shard ||
        bench_shard_assign(cost, p->ngroups, count, shard) < 0) {
        bench_shard_free(s);
        free(cost);
        free(shard);
        return diag_set(d, NULL, 0, 0, "--shard %d/%d: out of memory partitioning %d groups", index,
                        count, p->ngroups);
    }
    s->index = index;
    s->count = count;
    // the cut: shard index's groups and tasks move forward, in plan order
    int ng = 0, nt = 0;
    for (int g = 0; g < p->ngroups; g++) {
        s->groups[g].shard = shard[g];
        if (shard[g] != index)
            continue;
        bench_group gr = p->groups[g];
        for (int i = 0; i < gr.ntasks; i++) {
            p->tasks[nt + i] = p->tasks[gr.first + i];
            p->tasks[nt + i].group = ng;
        }
        gr.first = nt;
        p->groups[ng++] = gr;
        nt += gr.ntasks;
        s->shard_cost_ms += cost[g];
    }
    p->ngroups = ng;
    p->ntasks = nt;
    p->shard = s;
    free(cost);
    free(shard);
    return 0;
}

json_t *bench_shard_plan_json(const bench_plan *p) {
    const bench_shard *s = p->shard;
    json_t *arr = json_array();
    for (int g = 0; arr && g < s->ngroups; g++) {
        const bench_shard_group *sg = &s->groups[g];
        const bench_case *bc = &p->cases[sg->case_index];
        json_t *modes = json_array();
        for (int m = 0; modes && m < sg->nmodes; m++)
            json_array_append_new(modes,
                                  json_string(bench_axis_value(BENCH_AXIS_MODE, sg->modes[m])));
        json_t *o = json_pack(
            "{s:s, s:s, s:I, s:s, s:s, s:s, s:o, s:f, s:i}", "suite",
            bc->s->name ? bc->s->name : "", "name", bc->c->name, "batch", (json_int_t)bc->batch,
            "precision", bench_axis_value(BENCH_AXIS_PRECISION, sg->axis[BENCH_AXIS_PRECISION]),
            "workload", bench_axis_value(BENCH_AXIS_WORKLOAD, sg->axis[BENCH_AXIS_WORKLOAD]),
            "device", bench_axis_value(BENCH_AXIS_DEVICE, sg->axis[BENCH_AXIS_DEVICE]), "modes",
            modes, "cost_s", (double)sg->cost_ms / 1000, "shard", sg->shard);
        if (!o || json_array_append_new(arr, o) < 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}
