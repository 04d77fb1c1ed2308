// Shards (engine/bench/shard.h): the LPT partition on made-up costs, and
// the smoke suite's plan split in 4: every group in exactly one shard, the
// same partition from every shard, the estimated costs within 20%.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

// after the four above, which it needs
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/output.h"
#include "bench/shard.h"

static void test_assign_lpt(void **state) {
    (void)state;
    // the largest first, each to the least loaded: 7+3+2 and 5+4+3
    const int64_t cost[] = {3, 7, 2, 5, 3, 4};
    int shard[6];
    assert_int_equal(bench_shard_assign(cost, 6, 2, shard), 0);
    const int want[] = {1, 1, 1, 2, 2, 2};
    assert_memory_equal(shard, want, sizeof want);
    // equal costs: the earlier group to the lower shard; shards past the groups stay empty
    const int64_t same[] = {5, 5, 5};
    int s5[3];
    assert_int_equal(bench_shard_assign(same, 3, 5, s5), 0);
    assert_int_equal(s5[0], 1);
    assert_int_equal(s5[1], 2);
    assert_int_equal(s5[2], 3);
    // one shard takes everything
    assert_int_equal(bench_shard_assign(cost, 6, 1, shard), 0);
    for (int i = 0; i < 6; i++)
        assert_int_equal(shard[i], 1);
}

// Many made-up costs: every group once, the same answer twice, and LPT's
// bound (no shard more than the mean plus the largest group).
static void test_assign_balance(void **state) {
    (void)state;
    enum { N = 300, S = 7 };
    int64_t cost[N], load[S + 1] = {0}, top = 0, total = 0;
    uint32_t x = 12345;
    for (int i = 0; i < N; i++) {
        x = x * 1664525u + 1013904223u; // an LCG: the same costs on every machine
        cost[i] = 1 + (x >> 8) % 5000;
        top = cost[i] > top ? cost[i] : top;
        total += cost[i];
    }
    int a[N], b[N];
    assert_int_equal(bench_shard_assign(cost, N, S, a), 0);
    assert_int_equal(bench_shard_assign(cost, N, S, b), 0);
    assert_memory_equal(a, b, sizeof a);
    for (int i = 0; i < N; i++) {
        assert_in_range(a[i], 1, S);
        load[a[i]] += cost[i];
    }
    for (int s = 1; s <= S; s++)
        assert_true(load[s] * S <= total + S * top);
}

static bench_config smoke_config(void) {
    static char path[1024];
    static const char *suites[1];
    const char *src = getenv("TCBENCH_SOURCE_DIR");
    snprintf(path, sizeof path, "%s/suites/smoke.yaml", src ? src : ".");
    suites[0] = path;
    bench_config cfg;
    bench_config_init(&cfg);
    cfg.suites = suites;
    cfg.nsuites = 1;
    cfg.threads = 1;
    cfg.axis[BENCH_AXIS_DEVICE][0] = BENCH_DEV_CPU;
    cfg.naxis[BENCH_AXIS_DEVICE] = 1;
    return cfg;
}

// "gpt2 fp32 infer cpu b2 compiled": a task's identity, for sets of them.
static void task_key(const bench_plan *p, int t, char *buf, size_t cap) {
    results_case id;
    bench_result_case(p, t, &id);
    snprintf(buf, cap, "%s/%s %s %s %s b%lld %s", id.suite, id.name, id.precision, id.workload,
             id.device, (long long)id.batch, id.mode);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

// The smoke suite's defaults (eager and compiled, fp32 inference) in 4 shards.
static void test_smoke_in_four(void **state) {
    (void)state;
    bench_config cfg = smoke_config();
    bench_plan *whole, *p[4];
    diag d = {0};
    assert_int_equal(bench_plan_new(&cfg, &whole, &d), 0);
    assert_null(whole->shard);
    assert_true(whole->ngroups >= 8);
    int n = whole->ntasks, seen = 0;
    char **want = calloc((size_t)n, sizeof *want), **got = calloc((size_t)n, sizeof *got);
    assert_non_null(want);
    assert_non_null(got);
    for (int t = 0; t < n; t++) {
        want[t] = malloc(200);
        task_key(whole, t, want[t], 200);
    }
    int64_t cost[4] = {0};
    json_t *plan0 = NULL;
    for (int k = 0; k < 4; k++) {
        cfg.shard_index = k + 1;
        cfg.shard_count = 4;
        if (bench_plan_new(&cfg, &p[k], &d) != 0)
            fail_msg("%s", d.msg);
        const bench_shard *s = p[k]->shard;
        assert_non_null(s);
        assert_int_equal(s->ngroups, whole->ngroups);
        assert_int_equal(s->ntasks, n);
        // the whole selection's partition, the same from every shard
        json_t *plan = bench_shard_plan_json(p[k]);
        assert_non_null(plan);
        if (k == 0)
            plan0 = plan;
        else {
            assert_true(json_equal(plan, plan0));
            json_decref(plan);
        }
        // the cut plan holds whole groups, in order, eager first
        for (int g = 0; g < p[k]->ngroups; g++) {
            const bench_group *gr = &p[k]->groups[g];
            assert_int_equal(p[k]->tasks[gr->first].axis[BENCH_AXIS_MODE], BENCH_MODE_EAGER);
            for (int i = 0; i < gr->ntasks; i++)
                assert_int_equal(p[k]->tasks[gr->first + i].group, g);
            cost[k] += bench_group_cost_ms(p[k], g);
        }
        assert_int_equal(cost[k], s->shard_cost_ms);
        for (int t = 0; t < p[k]->ntasks; t++) {
            assert_true(seen < n);
            got[seen] = malloc(200);
            task_key(p[k], t, got[seen++], 200);
        }
    }
    // every entry exactly once across the shards
    assert_int_equal(seen, n);
    qsort(want, (size_t)n, sizeof *want, cmp_str);
    qsort(got, (size_t)n, sizeof *got, cmp_str);
    for (int t = 0; t < n; t++)
        assert_string_equal(got[t], want[t]);
    // balanced: the dearest shard within 20% of the cheapest
    int64_t lo = cost[0], hi = cost[0];
    for (int k = 1; k < 4; k++) {
        lo = cost[k] < lo ? cost[k] : lo;
        hi = cost[k] > hi ? cost[k] : hi;
    }
    if (hi > lo * 12 / 10)
        fail_msg("shard costs %lld %lld %lld %lld ms: more than 20%% apart", (long long)cost[0],
                 (long long)cost[1], (long long)cost[2], (long long)cost[3]);
    for (int t = 0; t < n; t++) {
        free(want[t]);
        free(got[t]);
    }
    free(want);
    free(got);
    json_decref(plan0);
    for (int k = 0; k < 4; k++)
        bench_plan_free(p[k]);
    bench_plan_free(whole);
}

// More shards than groups: the last are empty plans, not errors; a K
// outside 1..N is refused by the planner too.
static void test_empty_and_bad(void **state) {
    (void)state;
    bench_config cfg = smoke_config();
    bench_plan *p;
    diag d = {0};
    cfg.only = (const char *[]){"mlp", "gpt2"};
    cfg.nonly = 2;
    cfg.shard_count = 3;
    int total = 0;
    for (int k = 1; k <= 3; k++) {
        cfg.shard_index = k;
        assert_int_equal(bench_plan_new(&cfg, &p, &d), 0);
        assert_int_equal(p->shard->ngroups, 2);
        assert_int_equal(p->ngroups, k == 3 ? 0 : 1);
        total += p->ntasks;
        bench_plan_free(p);
    }
    assert_int_equal(total, 4);
    cfg.shard_index = 4;
    assert_int_equal(bench_plan_new(&cfg, &p, &d), -1);
    assert_non_null(strstr(d.msg, "--shard 4/3: expected K/N with 1 <= K <= N"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_assign_lpt),
        cmocka_unit_test(test_assign_balance),
        cmocka_unit_test(test_smoke_in_four),
        cmocka_unit_test(test_empty_and_bad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
