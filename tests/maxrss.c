// maxrss: runs a program and writes its peak resident memory, in kB, to a
// file: the figure `/usr/bin/time -f %M` prints, from wait4's rusage (the
// peak of the process across its execs and of the children it waited for).
//
//   maxrss OUT_FILE PROGRAM [ARGS...]
//
// Exits with the program's status (128 + N when signal N ended it), or 125
// when it could not run it, with one line naming the call.
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 3) {
        fputs("usage: maxrss OUT_FILE PROGRAM [ARGS...]\n", stderr);
        return 125;
    }
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "maxrss: fork: %s\n", strerror(errno));
        return 125;
    }
    if (pid == 0) {
        execvp(argv[2], argv + 2);
        fprintf(stderr, "maxrss: execvp %s: %s\n", argv[2], strerror(errno));
        _exit(125);
    }
    int status;
    struct rusage ru;
    while (wait4(pid, &status, 0, &ru) < 0) {
        if (errno != EINTR) {
            fprintf(stderr, "maxrss: wait4: %s\n", strerror(errno));
            return 125;
        }
    }
    FILE *f = fopen(argv[1], "w");
    if (!f) {
        fprintf(stderr, "maxrss: fopen %s: %s\n", argv[1], strerror(errno));
        return 125;
    }
    fprintf(f, "%ld\n", ru.ru_maxrss);
    if (fclose(f) != 0) {
        fprintf(stderr, "maxrss: fclose %s: %s\n", argv[1], strerror(errno));
        return 125;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
