#include "kcache.h"

#include "base/files.h"
#include "tcbench_config.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#define KCACHE_MAX_ARGV 64

const char *kcache_flags(void) {
#if TCBENCH_NATIVE
    return "-O3 -march=native -fopenmp -fno-math-errno -std=gnu11 -shared -fPIC";
#else
    return "-O3 -fopenmp -fno-math-errno -std=gnu11 -shared -fPIC";
#endif
}

// Split s (modified) on spaces into argv; returns argc.
static int split_words(char *s, char **argv, int max) {
    int n = 0;
    for (char *tok = strtok(s, " \t"); tok && n < max - 1; tok = strtok(NULL, " \t"))
        argv[n++] = tok;
    argv[n] = NULL;
    return n;
}

// Run argv (no shell), stdout and stderr into out; returns the exit status,
// or -1 when it could not be started (out says why).
static int run_capture(char *const *argv, char *out, size_t cap) {
    int fd[2];
    if (pipe(fd) < 0) {
        snprintf(out, cap, "pipe: %s", strerror(errno));
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(out, cap, "fork: %s", strerror(errno));
        close(fd[0]);
        close(fd[1]);
        return -1;
    }
    if (pid == 0) {
        dup2(fd[1], 1);
        dup2(fd[1], 2);
        close(fd[0]);
        close(fd[1]);
        execvp(argv[0], argv);
        fprintf(stderr, "cannot run %s: %s", argv[0], strerror(errno));
        _exit(127);
    }
    close(fd[1]);
    size_t len = 0;
    char buf[4096];
    ssize_t n;
    while ((n = read(fd[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
        if (n <= 0)
            continue;
        size_t take = (size_t)n < cap - 1 - len ? (size_t)n : cap - 1 - len;
        memcpy(out + len, buf, take);
        len += take;
    }
    out[len] = 0;
    close(fd[0]);
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) {
            snprintf(out, cap, "waitpid: %s", strerror(errno));
            return -1;
        }
    if (WIFEXITED(st))
        return WEXITSTATUS(st);
    snprintf(out + len, cap - len, " (killed by signal %d)", WTERMSIG(st));
    return 128 + WTERMSIG(st);
}

// One line for error messages: the compiler's first "error" line if there
// is one, else its first line.
static void first_lines(char *s) {
    char *e = strstr(s, "error");
    if (e) {
        while (e > s && e[-1] != '\n')
            e--;
        memmove(s, e, strlen(e) + 1);
    }
    char *nl = strchr(s, '\n');
    if (nl)
        *nl = 0;
    for (char *p = s; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    size_t n = strlen(s);
    while (n && s[n - 1] == ' ')
        s[--n] = 0;
}

static const char *compiler_words(void) {
    const char *cc = getenv("TCBENCH_CC");
    return cc && *cc ? cc : "cc";
}

static char version_cache[512];
static char version_for[256];

static int compiler_version(char *err, size_t cap) {
    const char *cc = compiler_words();
    if (version_cache[0] && strcmp(version_for, cc) == 0)
        return 0;
    char words[256];
    snprintf(words, sizeof words, "%s", cc);
    char *argv[KCACHE_MAX_ARGV];
    int argc = split_words(words, argv, KCACHE_MAX_ARGV - 2);
    if (argc == 0) {
        snprintf(err, cap, "TCBENCH_CC is empty");
        return -1;
    }
    argv[argc++] = "--version";
    argv[argc] = NULL;
    char out[4096];
    int rc = run_capture(argv, out, sizeof out);
    if (rc != 0) {
        first_lines(out);
        snprintf(err, cap, "the C compiler '%s' failed (exit %d): %.300s", cc, rc, out);
        return -1;
    }
    char *nl = strchr(out, '\n');
    if (nl)
        *nl = 0;
    snprintf(version_cache, sizeof version_cache, "%.500s", out);
    snprintf(version_for, sizeof version_for, "%s", cc);
    return 0;
}

int kcache_dir(const char *cache_dir, char *out, size_t outcap, char *err, size_t cap) {
    if (cache_dir && *cache_dir) {
        snprintf(out, outcap, "%s", cache_dir);
    } else {
        const char *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
        if (x && *x)
            snprintf(out, outcap, "%s/tcbench", x);
        else if (h && *h)
            snprintf(out, outcap, "%s/.cache/tcbench", h);
        else
            snprintf(out, outcap, "/tmp/tcbench-cache-%d", (int)getuid());
    }
    if (base_mkdir_p(out, 0700, err, cap) < 0)
        return -1;
    struct stat st;
    if (stat(out, &st) < 0) {
        snprintf(err, cap, "stat %s: %s", out, strerror(errno));
        return -1;
    }
    // Loading a shared object runs its code: refuse a directory someone
    // else could have written one into.
    if (st.st_uid != getuid() || (st.st_mode & (S_IWGRP | S_IWOTH))) {
        snprintf(err, cap,
                 "kernel cache %s is writable by other users or not ours (mode %03o); "
                 "fix with chmod 700 or set XDG_CACHE_HOME",
                 out, (unsigned)(st.st_mode & 0777));
        return -1;
    }
    return 0;
}

static int write_file(const char *path, const char *text, char *err, size_t cap) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) {
        snprintf(err, cap, "open %s: %s", path, strerror(errno));
        return -1;
    }
    size_t n = strlen(text), off = 0;
    while (off < n) {
        ssize_t w = write(fd, text + off, n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            snprintf(err, cap, "write %s: %s", path, strerror(errno));
            close(fd);
            return -1;
        }
        off += (size_t)w;
    }
    if (close(fd) < 0) {
        snprintf(err, cap, "close %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

static void *load(const char *path, char *err, size_t cap) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        snprintf(err, cap, "dlopen %.300s: %.200s", path, dlerror());
    return h;
}

// Code built with -march=native runs only where the instruction set
// matches: the CPU's model name and flags go into the key, so a cache
// shared between machines (a network home) never loads a foreign object.
static const char *cpu_signature(void) {
    static char sig[4096];
    if (sig[0])
        return sig;
    snprintf(sig, sizeof sig, "unknown cpu");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return sig;
    char line[4096];
    size_t o = 0;
    int found = 0;
    while (found < 2 && fgets(line, sizeof line, f)) {
        if ((strncmp(line, "model name", 10) == 0 || strncmp(line, "flags", 5) == 0) &&
            o < sizeof sig) {
            o += (size_t)snprintf(sig + o, sizeof sig - o, "%s", line);
            found++;
        }
    }
    fclose(f);
    return sig;
}

int kcache_build(const char *src, const char *cache_dir, kcache_result *r, char *err, size_t cap) {
    memset(r, 0, sizeof *r);
    char dir[900];
    if (kcache_dir(cache_dir, dir, sizeof dir, err, cap) < 0)
        return -1;
    if (compiler_version(err, cap) < 0)
        return -1;
    XXH3_state_t *st = XXH3_createState();
    if (!st) {
        snprintf(err, cap, "XXH3_createState: out of memory");
        return -1;
    }
    XXH3_128bits_reset(st);
    XXH3_128bits_update(st, src, strlen(src));
    XXH3_128bits_update(st, kcache_flags(), strlen(kcache_flags()));
    XXH3_128bits_update(st, version_cache, strlen(version_cache));
    XXH3_128bits_update(st, compiler_words(), strlen(compiler_words()));
    XXH3_128bits_update(st, cpu_signature(), strlen(cpu_signature()));
    XXH128_hash_t h = XXH3_128bits_digest(st);
    XXH3_freeState(st);
    snprintf(r->path, sizeof r->path, "%s/%016llx%016llx.so", dir, (unsigned long long)h.high64,
             (unsigned long long)h.low64);
    if (access(r->path, R_OK) == 0) {
        char lerr[512];
        r->handle = load(r->path, lerr, sizeof lerr);
        if (r->handle) {
            r->hit = true;
            return 0;
        }
        unlink(r->path); // corrupt or truncated: build it again
    }
    char tsrc[1024], tso[1024];
    unsigned salt = (unsigned)getpid() ^ (unsigned)time(NULL) ^ (unsigned)(uintptr_t)r;
    snprintf(tsrc, sizeof tsrc, "%s/tmp-%d-%x.c", dir, (int)getpid(), salt);
    snprintf(tso, sizeof tso, "%s/tmp-%d-%x.so", dir, (int)getpid(), salt);
    if (write_file(tsrc, src, err, cap) < 0)
        return -1;
    char words[256], flags[256];
    snprintf(words, sizeof words, "%s", compiler_words());
    snprintf(flags, sizeof flags, "%s", kcache_flags());
    char *argv[KCACHE_MAX_ARGV];
    int argc = split_words(words, argv, KCACHE_MAX_ARGV);
    argc += split_words(flags, argv + argc, KCACHE_MAX_ARGV - argc - 4);
    argv[argc++] = "-o";
    argv[argc++] = tso;
    argv[argc++] = tsrc;
    argv[argc] = NULL;
    char *out = malloc(16384);
    if (!out) {
        unlink(tsrc);
        snprintf(err, cap, "out of memory");
        return -1;
    }
    int rc = run_capture(argv, out, 16384);
    unlink(tsrc);
    if (rc != 0) {
        first_lines(out);
        snprintf(err, cap, "the C compiler '%s' failed (exit %d): %.400s", compiler_words(), rc,
                 out);
        free(out);
        unlink(tso);
        return -1;
    }
    free(out);
    if (rename(tso, r->path) < 0) {
        snprintf(err, cap, "rename %s: %s", tso, strerror(errno));
        unlink(tso);
        return -1;
    }
    r->handle = load(r->path, err, cap);
    return r->handle ? 0 : -1;
}
