// The monotonic clock (clock.h).
#include "clock.h"

#include <time.h>

double base_now(void) {
    struct timespec ts;
    // CLOCK_MONOTONIC cannot fail on Linux with a valid pointer; a zero
    // clock would show as zero durations, never as a crash.
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
        return 0;
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
