// Test-only faults and noise from the environment (faults.h).
#include "faults.h"

#include <stdlib.h>
#include <string.h>

// The fault a test asked for with TCBENCH_TEST_FAULT=kind:NAME[,kind:NAME...],
// kind one of crash, hang, oom, crash-later (a crash in every process of
// the group but the first: --processes), hang-child (a hang that has
// started a `sleep 300` first, which a kill must reach too).
const char *bench_test_fault(const char *name) {
    const char *p = getenv("TCBENCH_TEST_FAULT");
    size_t nlen = strlen(name);
    while (p && *p) {
        size_t len = strcspn(p, ",");
        const char *colon = memchr(p, ':', len);
        if (colon && len - (size_t)(colon + 1 - p) == nlen && !strncmp(colon + 1, name, nlen)) {
            size_t klen = (size_t)(colon - p);
            if (klen == 5 && !strncmp(p, "crash", 5))
                return "crash";
            if (klen == 11 && !strncmp(p, "crash-later", 11))
                return "crash-later";
            if (klen == 4 && !strncmp(p, "hang", 4))
                return "hang";
            if (klen == 10 && !strncmp(p, "hang-child", 10))
                return "hang-child";
            if (klen == 3 && !strncmp(p, "oom", 3))
                return "oom";
        }
        p += len;
        p += *p == ',';
    }
    return NULL;
}

bool bench_test_noise(const char *name, const char *mode) {
    const char *p = getenv("TCBENCH_TEST_NOISE");
    size_t nlen = strlen(name), mlen = strlen(mode);
    while (p && *p) {
        size_t len = strcspn(p, ",");
        const char *colon = memchr(p, ':', len);
        size_t klen = colon ? (size_t)(colon - p) : len;
        if (klen == nlen && !strncmp(p, name, nlen) &&
            (!colon || (len - klen - 1 == mlen && !strncmp(colon + 1, mode, mlen))))
            return true;
        p += len;
        p += *p == ',';
    }
    return false;
}
