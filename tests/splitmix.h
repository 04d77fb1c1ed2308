// splitmix: splitmix64 as uniform numbers in (0, 1), the same on every
// machine, for the tests' synthetic samples. One test program includes it
// once; set rng_state to seed it.
//
//   rng_state = 1;
//   double u = uniform();
#pragma once
#include <stdint.h>

static uint64_t rng_state;
static inline double uniform(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return ((z >> 11) + 0.5) / 9007199254740992.0;
}
