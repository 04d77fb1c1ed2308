// T5's relative position buckets (model_relative_bucket, INIT_RELATIVE_BUCKET):
// every relative position in [-1100, 1100] against the buckets Hugging
// Face's T5Attention._relative_position_bucket gives (32 buckets, max
// distance 128, bidirectional and causal), written below as runs (the
// first position of each bucket, in order), computed with the class; and a
// built relative_position_bias layer's index table against the same.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/model.h"
#include "model/modeldef.h"
#include "test_util.h"

typedef struct run {
    int64_t from, bucket; // positions from `from` up to the next run's
} run;

// transformers 5, T5Attention._relative_position_bucket(torch.arange(-1100, 1101),
// bidirectional=..., num_buckets=32, max_distance=128)
static const run bidirectional[] = {
    {-1100, 15}, {-90, 14}, {-63, 13}, {-45, 12}, {-31, 11}, {-22, 10}, {-15, 9}, {-11, 8},
    {-7, 7},     {-6, 6},   {-5, 5},   {-4, 4},   {-3, 3},   {-2, 2},   {-1, 1},  {0, 0},
    {1, 17},     {2, 18},   {3, 19},   {4, 20},   {5, 21},   {6, 22},   {7, 23},  {8, 24},
    {12, 25},    {16, 26},  {23, 27},  {32, 28},  {46, 29},  {64, 30},  {91, 31},
};
static const run causal[] = {
    {-1100, 31}, {-112, 30}, {-98, 29}, {-86, 28}, {-76, 27}, {-66, 26}, {-58, 25}, {-51, 24},
    {-45, 23},   {-39, 22},  {-34, 21}, {-30, 20}, {-26, 19}, {-23, 18}, {-20, 17}, {-18, 16},
    {-15, 15},   {-14, 14},  {-13, 13}, {-12, 12}, {-11, 11}, {-10, 10}, {-9, 9},   {-8, 8},
    {-7, 7},     {-6, 6},    {-5, 5},   {-4, 4},   {-3, 3},   {-2, 2},   {-1, 1},   {0, 0},
};

static int64_t expected(const run *r, int n, int64_t rel) {
    int64_t b = r[0].bucket;
    for (int i = 0; i < n && r[i].from <= rel; i++)
        b = r[i].bucket;
    return b;
}

static void test_buckets(void **state) {
    (void)state;
    for (int64_t rel = -1100; rel <= 1100; rel++) {
        int64_t bi = model_relative_bucket(rel, 32, 128, true);
        int64_t ca = model_relative_bucket(rel, 32, 128, false);
        if (bi != expected(bidirectional, 31, rel) || ca != expected(causal, 32, rel))
            fail_msg("relative position %lld: buckets %lld and %lld, want %lld and %lld",
                     (long long)rel, (long long)bi, (long long)ca,
                     (long long)expected(bidirectional, 31, rel),
                     (long long)expected(causal, 32, rel));
    }
}

// The layer's (T, S) index buffer of a built model holds the bucket of
// key s from query t.
static void test_layer_table(void **state) {
    (void)state;
    const char *text = "name: rpb\n"
                       "inputs:\n"
                       "  x: {shape: [2, 200, 16]}\n"
                       "body:\n"
                       "  - relative_position_bias: {buckets: 32, max_distance: 128, heads: 4,\n"
                       "                             bidirectional: false}\n";
    model *m = build_model_text(text, 2);
    assert_int_equal(model_init_values(m, 1), 0);
    int found = 0;
    for (int i = 0; i < m->g->n; i++) {
        const graph_node *n = &m->g->nodes[i];
        if (n->op != OP_BUFFER || !n->name || strncmp(n->name, "relative_bucket.", 16))
            continue;
        found++;
        assert_int_equal(n->dtype, DT_I32);
        const int32_t *v = tensor_data(m->values[i]);
        for (int64_t t = 0; t < 200; t++)
            for (int64_t s = 0; s < 200; s++)
                assert_int_equal(v[t * 200 + s], expected(causal, 32, s - t));
    }
    assert_int_equal(found, 1);
    model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_buckets),
        cmocka_unit_test(test_layer_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
