// Which axis values this build runs (axes.h).
#include "axes.h"

#include "../exec.h" // the executor registry (not bench/exec.h)

bool bench_axis_available(enum bench_axis a, int v) {
    if (v < 0 || v >= bench_axis_size(a))
        return false;
    return !(a == BENCH_AXIS_DEVICE && v == BENCH_DEV_CUDA && !exec_device_built("cuda"));
}
