// clock: the one monotonic clock every timing in tcbench reads.
//
//   double t0 = base_now();
//   work();
//   double secs = base_now() - t0;
#pragma once

// Monotonic seconds (CLOCK_MONOTONIC) since an arbitrary origin.
double base_now(void);
