// The suite loader (engine/model/suite.h) on any bytes, at the default size
// and at `small`. Bare model names resolve in FUZZ_MODELS_DIR (the source
// tree's models/, set by scripts/fuzz.sh) through TCBENCH_MODELS, so the
// cases of a mutated suite get past the model lookup.
#include "fuzz_input.h"
#include "model/suite.h"

#include <stdlib.h>
#include <unistd.h>

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    if (setenv("TCBENCH_MODELS", FUZZ_MODELS_DIR, 1) != 0)
        abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[64];
    int fd = fuzz_input_open(data, size, path, sizeof path);
    static const char *sizes[] = {NULL, "small"};
    for (int i = 0; i < 2; i++) {
        suite *s;
        diag d;
        if (suite_load(path, sizes[i], &s, &d) == 0)
            suite_free(s);
    }
    close(fd);
    return 0;
}
