// Tests for the safetensors writer and reader (engine/results/safetensors.h):
// a round trip of every dtype, a scalar and an empty tensor, metadata and the
// 8-byte alignment of the header; the writer's refusals; and the reader on
// damaged files, each refused with the path and what is wrong.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "results/safetensors.h"

static char dir[256];

static void path_of(char *buf, size_t cap, const char *name) {
    snprintf(buf, cap, "%s/%s", dir, name);
}

static void put_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

// A file of an 8-byte length, this header and these data bytes.
static void put_raw(const char *path, const char *header, size_t ndata) {
    size_t h = strlen(header);
    unsigned char *b = calloc(8 + h + ndata + 1, 1);
    assert_non_null(b);
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((uint64_t)h >> (8 * i));
    memcpy(b + 8, header, h);
    put_file(path, b, 8 + h + ndata);
    free(b);
}

static void expect_read_error(const char *path, const char *fragment) {
    st_file *f = (st_file *)1;
    char err[600];
    assert_int_equal(safetensors_read(path, &f, err, sizeof err), -1);
    assert_null(f);
    if (!strstr(err, path) || !strstr(err, fragment))
        fail_msg("want '%s' naming %s, got: %s", fragment, path, err);
}

static void test_round_trip(void **state) {
    (void)state;
    float w[6] = {1, -2, 3.5f, 0, 1e-30f, -7};
    int64_t idx[3] = {1, -1, 1LL << 40};
    int32_t lab[2] = {7, -3};
    uint16_t h[2] = {0x3c00, 0xc000};
    unsigned char mask[5] = {1, 0, 1, 1, 0}, u8[1] = {200};
    float scalar = 2.5f;
    st_tensor t[] = {
        {"w", "F32", 2, {2, 3}, w, sizeof w},     {"idx", "I64", 1, {3}, idx, sizeof idx},
        {"lab", "I32", 1, {2}, lab, sizeof lab},  {"h", "F16", 2, {1, 2}, h, sizeof h},
        {"bh", "BF16", 1, {2}, h, sizeof h},      {"mask", "BOOL", 1, {5}, mask, sizeof mask},
        {"u8", "U8", 0, {0}, u8, 1},              {"loss", "F32", 0, {0}, &scalar, 4},
        {"empty", "F32", 2, {0, 4}, NULL, 0},
    };
    const char *meta[] = {"case", "mlp", "seed", "0"};
    char path[320], err[600];
    path_of(path, sizeof path, "a.safetensors");
    assert_int_equal(safetensors_write(path, t, 9, meta, 2, err, sizeof err), 0);
    st_file *f;
    if (safetensors_read(path, &f, err, sizeof err) < 0)
        fail_msg("%s", err);
    assert_int_equal(f->n, 9);
    assert_string_equal(safetensors_meta(f, "case"), "mlp");
    assert_string_equal(safetensors_meta(f, "seed"), "0");
    assert_null(safetensors_meta(f, "nope"));
    for (int i = 0; i < 9; i++) {
        const st_tensor *r = safetensors_find(f, t[i].name);
        assert_non_null(r);
        assert_string_equal(r->dtype, t[i].dtype);
        assert_int_equal(r->ndim, t[i].ndim);
        for (int d = 0; d < r->ndim; d++)
            assert_int_equal(r->shape[d], t[i].shape[d]);
        assert_int_equal(r->bytes, t[i].bytes);
        if (t[i].bytes)
            assert_memory_equal(r->data, t[i].data, t[i].bytes);
    }
    assert_null(safetensors_find(f, "missing"));
    // the header padded to 8 bytes: the data starts aligned in the file
    const unsigned char *b = f->blob;
    uint64_t n = 0;
    for (int i = 0; i < 8; i++)
        n |= (uint64_t)b[i] << (8 * i);
    assert_int_equal(n % 8, 0);
    assert_int_equal(b[8 + n - 1] == ' ' || b[8 + n - 1] == '}', 1);
    assert_int_equal(f->size, 8 + n + sizeof w + sizeof idx + sizeof lab + 2 * sizeof h + 5 + 1 + 4);
    safetensors_free(f);
    // the writer refuses what does not agree, and an unwritable place
    st_tensor badt = {"w", "F32", 2, {2, 3}, w, 20};
    assert_int_equal(safetensors_write(path, &badt, 1, NULL, 0, err, sizeof err), -1);
    assert_non_null(strstr(err, "tensor 'w': dtype F32, 2 dims, 20 bytes do not agree"));
    st_tensor unk = {"w", "F8", 1, {6}, w, 6};
    assert_int_equal(safetensors_write(path, &unk, 1, NULL, 0, err, sizeof err), -1);
    st_tensor twice[2] = {{"w", "F32", 1, {6}, w, 24}, {"w", "F32", 1, {6}, w, 24}};
    assert_int_equal(safetensors_write(path, twice, 2, NULL, 0, err, sizeof err), -1);
    assert_non_null(strstr(err, "tensor 'w' given twice"));
    assert_int_equal(safetensors_write("/nonexistent-dir/x.safetensors", t, 1, NULL, 0, err,
                                       sizeof err),
                     -1);
    assert_non_null(strstr(err, "/nonexistent-dir/x.safetensors"));
    assert_non_null(strstr(err, "fopen"));
}

static void test_damaged(void **state) {
    (void)state;
    char path[320];
    path_of(path, sizeof path, "bad.safetensors");
    expect_read_error("/nonexistent-dir/y.safetensors", "fopen");
    put_file(path, "abc", 3);
    expect_read_error(path, "3 bytes, shorter than the 8-byte header length");
    unsigned char big[16] = {0xff, 0xff, 0, 0, 0, 0, 0, 0};
    put_file(path, big, sizeof big);
    expect_read_error(path, "header length 65535 does not fit the file's 16 bytes");
    // a header and this many data bytes, and what the reader says
    static const struct {
        const char *header;
        size_t ndata;
        const char *fragment;
    } cases[] = {
        {"{\"w\": ", 0, "header: "},
        {"[1, 2]", 0, "not a JSON object"},
        {"{\"w\": {\"dtype\": \"F8\", \"shape\": [1], \"data_offsets\": [0, 1]}}", 1,
         "tensor 'w': unknown dtype 'F8'"},
        {"{\"w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 4]}}", 4,
         "tensor 'w': data_offsets [0, 4] do not hold its 8 bytes"},
        {"{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 8]}}", 4,
         "data_offsets [0, 8]"},
        {"{\"w\": {\"dtype\": \"F32\", \"shape\": [-1], \"data_offsets\": [0, 4]}}", 4,
         "shape entry 0 is not a size"},
        {"{\"w\": {\"dtype\": \"F32\", \"shape\": [1]}}", 4,
         "needs dtype, shape and data_offsets"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]},"
         " \"b\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 12]}}",
         12, "tensor 'b' starts at byte 8, where 4 was expected"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
         " \"b\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}",
         8, "where 8 was expected (tensors overlap or leave a hole)"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 6,
         "2 bytes of data after the last tensor"},
        {"{\"__metadata__\": {\"k\": 1}}", 0, "__metadata__ 'k' is not a string"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        put_raw(path, cases[i].header, cases[i].ndata);
        expect_read_error(path, cases[i].fragment);
    }
    // a valid file without tensors or metadata
    put_raw(path, "{}", 0);
    st_file *f;
    char err[600];
    assert_int_equal(safetensors_read(path, &f, err, sizeof err), 0);
    assert_int_equal(f->n, 0);
    safetensors_free(f);
}

static int setup(void **state) {
    (void)state;
    const char *t = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/tcbench-test-st-XXXXXX", t && *t ? t : "/tmp");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_damaged),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
