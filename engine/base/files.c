// File-system helpers (files.h).
#include "files.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int base_mkdir_p(const char *path, mode_t mode, char *err, size_t cap) {
    char dir[4096];
    if (!*path) {
        snprintf(err, cap, "mkdir: empty path");
        return -1;
    }
    if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir) {
        snprintf(err, cap, "mkdir: path longer than %zu bytes", sizeof dir - 1);
        return -1;
    }
    for (char *q = dir + 1;; q++) {
        bool end = *q == '\0';
        if (*q == '/' || end) {
            *q = '\0';
            struct stat st;
            if (mkdir(dir, mode) < 0 && errno != EEXIST) {
                snprintf(err, cap, "mkdir %s: %s", dir, strerror(errno));
                return -1;
            }
            if (stat(dir, &st) < 0) {
                snprintf(err, cap, "stat %s: %s", dir, strerror(errno));
                return -1;
            }
            if (!S_ISDIR(st.st_mode)) {
                snprintf(err, cap, "mkdir %s: exists and is not a directory", dir);
                return -1;
            }
            if (end)
                return 0;
            *q = '/';
        }
    }
}

int base_mkdtemp(const char *name, char *dir, size_t dcap, char *err, size_t cap) {
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, dcap, "%s/%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", name);
    if (mkdtemp(dir))
        return 0;
    snprintf(err, cap, "mkdtemp %.400s: %s", dir, strerror(errno));
    return -1;
}
