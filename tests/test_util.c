// Helpers the cmocka tests share (test_util.h).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>

#include "test_util.h"

suite *load_smoke_suite(void) {
    const char *root = getenv("TCBENCH_SOURCE_DIR");
    assert_non_null(root);
    char path[600];
    snprintf(path, sizeof path, "%s/suites/smoke.yaml", root);
    suite *s;
    diag d;
    if (suite_load(path, NULL, &s, &d) < 0)
        fail_msg("%s:%d:%d: %s", path, d.line, d.col, d.msg);
    return s;
}
