#include "kcache.h"

#include "base/files.h"
#include "tcbench_config.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
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

// In a forked child: stdout and stderr into fd, then argv (no shell).
static _Noreturn void exec_into(int fd, char *const *argv) {
    if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        if (fd > 2)
            close(fd);
    }
    execvp(argv[0], argv);
    fprintf(stderr, "cannot run %s: %s", argv[0], strerror(errno));
    _exit(127);
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
        close(fd[0]);
        exec_into(fd[1], argv);
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

// A part below this many bytes of kernels does not repay its prelude.
#define KCACHE_PART_MIN 32768
#define KCACHE_MAX_PARTS 16

// How many compilers to run at once: the CPUs this process may run on,
// capped by $TCBENCH_CC_JOBS.
static int cc_jobs(void) {
    cpu_set_t set;
    int n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
    const char *e = getenv("TCBENCH_CC_JOBS");
    if (e && *e) {
        int j = atoi(e);
        if (j >= 1 && j < n)
            n = j;
    }
    return n < 1 ? 1 : n > KCACHE_MAX_PARTS ? KCACHE_MAX_PARTS : n;
}

// The parts src compiles in (kcache.h): kernel part i is
// src[cut[i], cut[i + 1]), after the prelude src[0, cut[0]); the tail,
// src[cut[np], end), is a part of its own, so that two programs with the
// same kernels and different tails (a training step with and without its
// gradients as outputs) share every kernel part's object: a small source
// too is one kernel part and its tail, compiled side by side. 0: compile src
// whole (one compiler at a time, or no marks).
static int plan_parts(const char *src, int jobs, size_t cut[KCACHE_MAX_PARTS + 1]) {
    const char *first = strstr(src, KCACHE_PART);
    const char *tail = first ? strstr(first, KCACHE_TAIL) : NULL;
    if (!tail || jobs < 2)
        return 0;
    size_t a = (size_t)(first - src), t = (size_t)(tail - src);
    // three parts a compiler: kernels' compile times differ more than their
    // sizes, and a compiler that finishes early takes the next part
    size_t want = (t - a) / KCACHE_PART_MIN, most = 3 * (size_t)jobs;
    if (most > KCACHE_MAX_PARTS)
        most = KCACHE_MAX_PARTS;
    int np = (int)(want < most ? want : most);
    if (np < 1)
        np = 1;
    int k = 0;
    cut[k++] = a;
    for (int i = 1; i < np; i++) {
        size_t target = a + (t - a) * (size_t)i / (size_t)np;
        if (target <= cut[k - 1])
            continue;
        const char *m = strstr(src + target, KCACHE_PART);
        if (!m || (size_t)(m - src) >= t)
            break;
        cut[k++] = (size_t)(m - src);
    }
    cut[k] = t;
    return k;
}

// The compiler's argv: its words, the flags, then extra (NULL-ended);
// words and flags are split into the buffers given.
static void cc_argv(char *argv[KCACHE_MAX_ARGV], char words[256], char flags[256],
                    const char *const *extra) {
    snprintf(words, 256, "%s", compiler_words());
    snprintf(flags, 256, "%s", kcache_flags());
    int argc = split_words(words, argv, KCACHE_MAX_ARGV);
    argc += split_words(flags, argv + argc, KCACHE_MAX_ARGV - argc);
    for (int i = 0; extra[i] && argc < KCACHE_MAX_ARGV - 1; i++)
        argv[argc++] = (char *)extra[i];
    argv[argc] = NULL;
}

static int cc_failed(int rc, char *out, char *err, size_t cap) {
    first_lines(out);
    snprintf(err, cap, "the C compiler '%s' failed (exit %d): %.400s", compiler_words(), rc, out);
    return -1;
}

// src whole into the library tso.
static int build_whole(const char *src, const char *base, const char *tso, char *err, size_t cap) {
    char tsrc[1100];
    snprintf(tsrc, sizeof tsrc, "%s.c", base);
    if (write_file(tsrc, src, err, cap) < 0)
        return -1;
    char words[256], flags[256], *argv[KCACHE_MAX_ARGV];
    cc_argv(argv, words, flags, (const char *const[]){"-o", tso, tsrc, NULL});
    char *out = malloc(16384);
    if (!out) {
        unlink(tsrc);
        snprintf(err, cap, "out of memory");
        return -1;
    }
    int rc = run_capture(argv, out, 16384);
    unlink(tsrc);
    if (rc != 0)
        cc_failed(rc, out, err, cap);
    free(out);
    return rc != 0 ? -1 : 0;
}

// Starts argv with stdout and stderr into the file log; the child's pid,
// or -1 with err.
static pid_t spawn_logged(char *const *argv, const char *log, char *err, size_t cap) {
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, cap, "fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0)
        exec_into(open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600), argv);
    return pid;
}

// The file's first cap - 1 bytes into out (empty when unreadable).
static void read_log(const char *path, char *out, size_t cap) {
    out[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    size_t n = fread(out, 1, cap - 1, f);
    out[n] = 0;
    fclose(f);
}

// The cache's name for text compiled by this compiler, with these flags,
// for this CPU: DIR/<XXH3-128 in hex><suffix>. 0, or -1 with err.
static int key_path(const char *dir, const char *const *text, const size_t *len, int ntext,
                    const char *suffix, char *out, size_t outcap, char *err, size_t cap) {
    XXH3_state_t *st = XXH3_createState();
    if (!st) {
        snprintf(err, cap, "XXH3_createState: out of memory");
        return -1;
    }
    XXH3_128bits_reset(st);
    for (int i = 0; i < ntext; i++)
        XXH3_128bits_update(st, text[i], len[i]);
    XXH3_128bits_update(st, kcache_flags(), strlen(kcache_flags()));
    XXH3_128bits_update(st, version_cache, strlen(version_cache));
    XXH3_128bits_update(st, compiler_words(), strlen(compiler_words()));
    XXH3_128bits_update(st, cpu_signature(), strlen(cpu_signature()));
    XXH128_hash_t h = XXH3_128bits_digest(st);
    XXH3_freeState(st);
    snprintf(out, outcap, "%s/%016llx%016llx%s", dir, (unsigned long long)h.high64,
             (unsigned long long)h.low64, suffix);
    return 0;
}

// src in np kernel parts and its tail (plan_parts) compiled at once, then
// linked into tso. Each part's object is kept in the cache under its own
// text's key (DIR/KEY.o): a part some earlier program had is linked as it
// is, and only the others compile. *reused: how many were.
static int build_parts(const char *src, const size_t *cut, int np, int jobs, const char *dir,
                       const char *base, const char *tso, int *reused, char *err, size_t cap) {
    enum { MAXT = KCACHE_MAX_PARTS + 1 };
    static const char def[] = "#define TC_PARTS 1\n";
    char csrc[MAXT][1100], obj[MAXT][1100], log[MAXT][1100], keep[MAXT][1100];
    pid_t pid[MAXT] = {0};
    bool build[MAXT] = {0};
    int rc = 0, failed = -1, nt = np + 1;
    *reused = 0;
    err[0] = 0;
    // write every part not in the cache, then keep `jobs` compilers busy
    // until all are done
    for (int i = 0; i < nt; i++) {
        snprintf(csrc[i], sizeof csrc[i], "%s-%d.c", base, i);
        snprintf(obj[i], sizeof obj[i], "%s-%d.o", base, i);
        snprintf(log[i], sizeof log[i], "%s-%d.log", base, i);
    }
    for (int i = 0; i < nt && rc == 0; i++) {
        size_t from = cut[i], to = i < np ? cut[i + 1] : strlen(src);
        const char *text[3] = {def, src, src + from};
        size_t len[3] = {sizeof def - 1, cut[0], to - from};
        if ((rc = key_path(dir, text, len, 3, ".o", keep[i], sizeof keep[i], err, cap)) < 0)
            break;
        if (access(keep[i], R_OK) == 0) {
            ++*reused;
            continue;
        }
        build[i] = true;
        char *t = malloc(len[0] + len[1] + len[2] + 1);
        if (!t) {
            snprintf(err, cap, "out of memory");
            rc = -1;
            break;
        }
        memcpy(t, text[0], len[0]);
        memcpy(t + len[0], text[1], len[1]);
        memcpy(t + len[0] + len[1], text[2], len[2]);
        t[len[0] + len[1] + len[2]] = 0;
        rc = write_file(csrc[i], t, err, cap);
        free(t);
    }
    int running = 0, next = 0;
    while (running > 0 || (rc == 0 && next < nt)) {
        if (rc == 0 && next < nt && !build[next]) {
            next++;
            continue;
        }
        if (rc == 0 && next < nt && running < jobs) {
            char words[256], flags[256], *argv[KCACHE_MAX_ARGV];
            cc_argv(argv, words, flags,
                    (const char *const[]){"-c", "-o", obj[next], csrc[next], NULL});
            if ((pid[next] = spawn_logged(argv, log[next], err, cap)) < 0) {
                pid[next] = 0;
                rc = -1;
                continue;
            }
            next++;
            running++;
            continue;
        }
        // one compiler done: poll ours only (another child of this
        // process is its owner's to reap)
        int st = 0, i = -1;
        for (int k = 0; k < next && i < 0; k++) {
            if (pid[k] <= 0)
                continue; // done already, or not compiled
            pid_t w = waitpid(pid[k], &st, WNOHANG);
            bool lost = w < 0 && errno != EINTR;
            if (lost && rc == 0) { // as run_capture says it
                snprintf(err, cap, "waitpid: %s", strerror(errno));
                rc = -1;
            }
            if (w == pid[k] || lost)
                i = k;
        }
        if (i < 0) {
            nanosleep(&(struct timespec){0, 2000000}, NULL);
            continue;
        }
        pid[i] = 0;
        running--;
        int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (rc == 0 && code != 0) {
            failed = i;
            rc = code;
        }
        // into the cache under its key, whole or not at all (a reader
        // never sees half an object)
        if (code == 0 && rename(obj[i], keep[i]) < 0 && rc == 0) {
            snprintf(err, cap, "rename %s: %s", obj[i], strerror(errno));
            rc = -1;
        }
    }
    char *out = malloc(16384);
    if (!out && rc == 0) {
        snprintf(err, cap, "out of memory");
        rc = -1;
    }
    if (failed >= 0 && out) {
        read_log(log[failed], out, 16384);
        cc_failed(rc, out, err, cap);
    } else if (failed >= 0) {
        snprintf(err, cap, "the C compiler '%s' failed (exit %d)", compiler_words(), rc);
    }
    if (rc == 0) { // link
        const char *extra[MAXT + 3];
        int e = 0;
        extra[e++] = "-o";
        extra[e++] = tso;
        for (int i = 0; i < nt; i++)
            extra[e++] = keep[i];
        extra[e] = NULL;
        char words[256], flags[256], *argv[KCACHE_MAX_ARGV];
        cc_argv(argv, words, flags, extra);
        int lrc = run_capture(argv, out, 16384);
        if (lrc != 0) {
            cc_failed(lrc, out, err, cap);
            rc = -1;
            // a kept object that would not link (damaged on disk?) is
            // compiled again next time
            for (int i = 0; i < nt; i++)
                if (!build[i])
                    unlink(keep[i]);
        }
    }
    free(out);
    for (int i = 0; i < nt; i++) {
        if (!build[i])
            continue;
        unlink(csrc[i]);
        unlink(obj[i]);
        unlink(log[i]);
    }
    return rc != 0 ? -1 : 0;
}

int kcache_build(const char *src, const char *cache_dir, kcache_result *r, char *err, size_t cap) {
    memset(r, 0, sizeof *r);
    char dir[900];
    if (kcache_dir(cache_dir, dir, sizeof dir, err, cap) < 0)
        return -1;
    if (compiler_version(err, cap) < 0)
        return -1;
    size_t n = strlen(src);
    if (key_path(dir, (const char *const[]){src}, &n, 1, ".so", r->path, sizeof r->path, err,
                 cap) < 0)
        return -1;
    if (access(r->path, R_OK) == 0) {
        char lerr[512];
        r->handle = load(r->path, lerr, sizeof lerr);
        if (r->handle) {
            r->hit = true;
            return 0;
        }
        unlink(r->path); // corrupt or truncated: build it again
    }
    char base[1024], tso[1100];
    unsigned salt = (unsigned)getpid() ^ (unsigned)time(NULL) ^ (unsigned)(uintptr_t)r;
    snprintf(base, sizeof base, "%s/tmp-%d-%x", dir, (int)getpid(), salt);
    snprintf(tso, sizeof tso, "%s.so", base);
    size_t cut[KCACHE_MAX_PARTS + 1];
    int jobs = cc_jobs();
    int np = plan_parts(src, jobs, cut);
    if ((np == 0 ? build_whole(src, base, tso, err, cap)
                 : build_parts(src, cut, np, jobs, dir, base, tso, &r->reused, err, cap)) < 0) {
        unlink(tso);
        return -1;
    }
    r->parts = np ? np : 1;
    r->whole = np == 0;
    if (rename(tso, r->path) < 0) {
        snprintf(err, cap, "rename %s: %s", tso, strerror(errno));
        unlink(tso);
        return -1;
    }
    r->handle = load(r->path, err, cap);
    return r->handle ? 0 : -1;
}
