// File-system helpers (files.h).
#include "files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

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

int base_lock_take(const char *path, int *fd, long *holder, char *err, size_t cap) {
    *holder = 0;
    // The holder unlinks the file before letting it go: a lock taken on a
    // file no longer at path is worth nothing, so open it again.
    for (int attempt = 0; attempt < 8; attempt++) {
        int f = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (f < 0) {
            snprintf(err, cap, "open %s: %s", path, strerror(errno));
            return -1;
        }
        if (flock(f, LOCK_EX | LOCK_NB) < 0) {
            int e = errno;
            char buf[32] = "";
            ssize_t k = e == EWOULDBLOCK ? pread(f, buf, sizeof buf - 1, 0) : -1;
            close(f);
            if (e != EWOULDBLOCK) {
                snprintf(err, cap, "flock %s: %s", path, strerror(e));
                return -1;
            }
            *holder = k > 0 ? strtol(buf, NULL, 10) : 0;
            return 1;
        }
        struct stat held, now;
        if (fstat(f, &held) < 0) {
            snprintf(err, cap, "fstat %s: %s", path, strerror(errno));
            close(f);
            return -1;
        }
        if (stat(path, &now) < 0 || now.st_ino != held.st_ino || now.st_dev != held.st_dev) {
            close(f);
            continue;
        }
        char pid[32];
        int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
        if (ftruncate(f, 0) < 0 || pwrite(f, pid, (size_t)n, 0) != n) {
            snprintf(err, cap, "writing %s: %s", path, strerror(errno));
            unlink(path);
            close(f);
            return -1;
        }
        *fd = f;
        return 0;
    }
    snprintf(err, cap, "%s: removed and created again by other processes; try again", path);
    return -1;
}

void base_lock_drop(const char *path, int fd) {
    if (unlink(path) < 0 && errno != ENOENT)
        fprintf(stderr, "tcbench: unlink %s: %s\n", path, strerror(errno));
    if (close(fd) < 0)
        fprintf(stderr, "tcbench: close %s: %s\n", path, strerror(errno));
}

// The pid of NAME.tmp.<digits> when entry is that for base; 0 when not.
static long tmp_pid(const char *entry, const char *base) {
    size_t n = strlen(base);
    if (strncmp(entry, base, n) != 0 || strncmp(entry + n, ".tmp.", 5) != 0)
        return 0;
    const char *d = entry + n + 5;
    if (!*d || strspn(d, "0123456789") != strlen(d) || strlen(d) > 9)
        return 0;
    return strtol(d, NULL, 10);
}

int base_tmp_sweep(const char *path) {
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    char dir[4096];
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    DIR *d = opendir(dir);
    if (!d)
        return 0; // nothing of ours can be in a directory we cannot read
    int removed = 0;
    for (struct dirent *e; (e = readdir(d));) {
        long pid = tmp_pid(e->d_name, base);
        if (pid <= 0 || pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        char stale[8200];
        snprintf(stale, sizeof stale, "%s/%s", dir, e->d_name);
        if (unlink(stale) == 0)
            removed++;
        else if (errno != ENOENT)
            fprintf(stderr, "tcbench: unlink %s: %s\n", stale, strerror(errno));
    }
    if (closedir(d) < 0)
        fprintf(stderr, "tcbench: closedir %s: %s\n", dir, strerror(errno));
    return removed;
}
