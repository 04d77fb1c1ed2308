// The results reader, as `tcbench report`, `compare` and `export` call it:
// resfile_load on any bytes either loads or fails with a located message,
// never crashes, leaks or reads out of bounds.
#include "fuzz_input.h"
#include "reports/resfile.h"

#include <stdlib.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[64];
    int fd = fuzz_input_open(data, size, path, sizeof path);
    resfile *f;
    diag d;
    if (resfile_load(path, &f, &d) == 0)
        resfile_free(f);
    close(fd);
    return 0;
}
