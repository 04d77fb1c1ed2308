// files: file-system helpers shared by the kernel cache, the results writer
// and the reports.
//
//   char err[256];
//   if (base_mkdir_p("out/charts", 0777, err, sizeof err) < 0) { fprintf(stderr, "%s\n", err); }
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
