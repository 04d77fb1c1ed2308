// files: file-system helpers shared by the kernel cache, the results writer
// and the reports.
//
//   char err[256];
//   if (base_mkdir_p("out/charts", 0777, err, sizeof err) < 0) { fprintf(stderr, "%s\n", err); }
//   int fd; long holder;
//   if (base_lock_take("x.json.lock", &fd, &holder, err, sizeof err) == 1) ...  // held by holder
//   base_lock_drop("x.json.lock", fd);
#pragma once
#include <stddef.h>
#include <sys/types.h>

// mkdir -p: path and each missing parent created with mode (less the
// umask); an existing directory is fine. -1 with err naming the failed call
// (or a component that exists and is not a directory).
int base_mkdir_p(const char *path, mode_t mode, char *err, size_t cap);
// A new private directory $TMPDIR/NAME-XXXXXX (/tmp without TMPDIR) into
// dir; -1 with err naming the failed call.
int base_mkdtemp(const char *name, char *dir, size_t dcap, char *err, size_t cap);
// Takes the lock file path (created if missing) with flock(LOCK_EX |
// LOCK_NB) on a descriptor that exec does not pass on, and writes this
// process's pid into it. 0: taken (*fd holds it); 1: another process holds
// it (*holder: its pid, 0 when it has not written it yet); -1 with err.
int base_lock_take(const char *path, int *fd, long *holder, char *err, size_t cap);
// Removes the lock file, then lets it go (a process that opened the old
// file meanwhile finds it gone once it has the lock, and opens a new one).
void base_lock_drop(const char *path, int fd);
// Removes PATH.tmp.<digits> beside path whose process is gone (what a
// writer killed between writing and renaming leaves); returns how many.
int base_tmp_sweep(const char *path);
