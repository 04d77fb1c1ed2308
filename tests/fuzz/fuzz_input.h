// fuzz_input: a libFuzzer input as a file the loaders can open by path, so
// each harness calls only the loader's public, path-taking API.
//
//   char path[64];
//   int fd = fuzz_input_open(data, size, path, sizeof path);
//   if (fd < 0) abort();
//   suite_load(path, NULL, &s, &d);   // path is /proc/self/fd/N
//   close(fd);
//
// The input lives in a memfd: no temporary file to clean up, and nothing
// touches the disk between runs.
#pragma once
#include <stddef.h>
#include <stdint.h>

// Returns the memfd (the caller closes it), or aborts naming the call that
// failed: a harness that cannot set up its input must not pass silently.
int fuzz_input_open(const uint8_t *data, size_t size, char *path, size_t cap);
