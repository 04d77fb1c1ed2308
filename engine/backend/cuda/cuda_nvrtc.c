// NVRTC compilation to cubin (cuda_nvrtc.h).
#include "cuda_nvrtc.h"

#include "base/clock.h"
#include "cuda_rt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *dup_str(const char *s) {
    char *d = malloc(strlen(s) + 1);
    if (d)
        strcpy(d, s);
    return d;
}

// The program's log into r->log (the empty string when it cannot be read).
static void take_log(nvrtcProgram p, cuda_nvrtc_result *r) {
    size_t n = 0;
    if (nvrtcGetProgramLogSize(p, &n) == NVRTC_SUCCESS && n > 0 && (r->log = malloc(n + 1))) {
        if (nvrtcGetProgramLog(p, r->log) != NVRTC_SUCCESS)
            r->log[0] = 0;
        r->log[n] = 0;
        return;
    }
    r->log = dup_str("");
}

static int compile(nvrtcProgram p, int arch, cuda_nvrtc_result *r, char *err, size_t cap) {
    char gpu[48];
    snprintf(gpu, sizeof gpu, "--gpu-architecture=sm_%d", arch);
    const char *opts[] = {gpu, "--std=c++17", "-DTC_NVRTC=1"};
    nvrtcResult rc = nvrtcCompileProgram(p, (int)(sizeof opts / sizeof opts[0]), opts);
    take_log(p, r);
    if (rc != NVRTC_SUCCESS)
        return cuda_fail_at(err, cap, "nvrtcCompileProgram", __FILE__, __LINE__,
                            nvrtcGetErrorString(rc));
    NVRTC_TRY(err, cap, nvrtcGetCUBINSize(p, &r->cubin_size));
    if (!(r->cubin = malloc(r->cubin_size ? r->cubin_size : 1))) {
        snprintf(err, cap, "out of host memory for a %zu-byte cubin", r->cubin_size);
        return -1;
    }
    NVRTC_TRY(err, cap, nvrtcGetCUBIN(p, r->cubin));
    return 0;
}

int cuda_nvrtc_compile(const char *src, const char *name, int arch, cuda_nvrtc_result *r, char *err,
                       size_t cap) {
    memset(r, 0, sizeof *r);
    double t0 = base_now();
    nvrtcProgram p;
    nvrtcResult cr = nvrtcCreateProgram(&p, src, name, 0, NULL, NULL);
    if (cr != NVRTC_SUCCESS) {
        r->log = dup_str("");
        return cuda_fail_at(err, cap, "nvrtcCreateProgram", __FILE__, __LINE__,
                            nvrtcGetErrorString(cr));
    }
    int rc = compile(p, arch, r, err, cap);
    nvrtcDestroyProgram(&p);
    if (!r->log)
        r->log = dup_str("");
    if (rc < 0) {
        free(r->cubin);
        r->cubin = NULL;
        r->cubin_size = 0;
    }
    r->seconds = base_now() - t0;
    return rc;
}

void cuda_nvrtc_result_free(cuda_nvrtc_result *r) {
    free(r->cubin);
    free(r->log);
    memset(r, 0, sizeof *r);
}
