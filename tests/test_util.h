// Helpers the cmocka tests share.
#pragma once
#include "model/model.h"
#include "model/suite.h"

#include <stdint.h>

// suites/smoke.yaml of the source tree (TCBENCH_SOURCE_DIR, set by
// tests/meson.build); a load error fails the test, naming file, line and
// column.
suite *load_smoke_suite(void);

// A model file's text, written under TMPDIR, loaded and built for inference
// at batch (the file removed after); an error fails the test with its line
// and column.
model *build_model_text(const char *text, int64_t batch);

// The node of op named name (a parameter, a buffer), or the test fails.
int model_node(const model *m, enum op op, const char *name);
// Parameter name's f32 values (the model's values drawn).
const float *model_param_f32(const model *m, const char *name);
