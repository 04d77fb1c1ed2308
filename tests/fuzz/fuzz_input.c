// A libFuzzer input in a memfd (fuzz_input.h).
#include "fuzz_input.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void die(const char *call) {
    fprintf(stderr, "fuzz_input: %s: %s\n", call, strerror(errno));
    abort();
}

int fuzz_input_open(const uint8_t *data, size_t size, char *path, size_t cap) {
    int fd = memfd_create("fuzz-input", MFD_CLOEXEC);
    if (fd < 0)
        die("memfd_create");
    for (size_t off = 0; off < size;) {
        ssize_t n = write(fd, data + off, size - off);
        if (n < 0 && errno != EINTR)
            die("write");
        off += n > 0 ? (size_t)n : 0;
    }
    if (snprintf(path, cap, "/proc/self/fd/%d", fd) >= (int)cap) {
        errno = ENAMETOOLONG;
        die("snprintf");
    }
    return fd;
}
