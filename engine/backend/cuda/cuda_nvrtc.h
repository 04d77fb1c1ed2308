// cuda_nvrtc: CUDA C to GPU machine code with NVRTC, at run time and with no
// GPU present (how the generated kernels are built, and tested in CI).
//
//   cuda_nvrtc_result r;
//   if (cuda_nvrtc_compile(src, "gpt2.cu", 90, &r, err, sizeof err) < 0)
//       fprintf(stderr, "%s\n%s", err, r.log);     // NVRTC's own log
//   ... r.cubin (r.cubin_size bytes) to cudaLibraryLoadData ...
//   cuda_nvrtc_result_free(&r);
//
// Options: --gpu-architecture=sm_<arch> (a cubin for that architecture; 80
// and 90 are the ones tcbench builds for), --std=c++17, and nothing that
// changes the math (no --use_fast_math: the eager kernels are built without
// it too). The source must be self-contained (cuda_prelude.cuh's text gives
// it the types and helpers it needs); no include paths are passed.
#pragma once
#include <stddef.h>

typedef struct cuda_nvrtc_result {
    char *cubin; // NULL when compilation failed
    size_t cubin_size;
    char *log; // NVRTC's log, "" when it had nothing to say; never NULL after a call
    double seconds;
} cuda_nvrtc_result;

int cuda_nvrtc_compile(const char *src, const char *name, int arch, cuda_nvrtc_result *r, char *err,
                       size_t cap);
void cuda_nvrtc_result_free(cuda_nvrtc_result *r);
