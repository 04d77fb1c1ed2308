// Helpers the cmocka tests share.
#pragma once
#include "model/suite.h"

// suites/smoke.yaml of the source tree (TCBENCH_SOURCE_DIR, set by
// tests/meson.build); a load error fails the test, naming file, line and
// column.
suite *load_smoke_suite(void);
