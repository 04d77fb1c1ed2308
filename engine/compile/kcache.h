// kcache: builds generated C with the system compiler and keeps the shared
// objects in an on-disk cache, keyed by XXH3-128 of the source, the flags,
// the compiler's version and the CPU (model name and flags: -march=native).
//
//   kcache_result r;
//   if (kcache_build(src, NULL, &r, err, sizeof err) < 0) ...  // err: the compiler's words
//   void *so = r.handle;   // dlopen'ed; r.hit says whether it came from the cache
//   dlclose(so);
//
// The compiler is `cc` or $TCBENCH_CC (words split on spaces), run with
// `-O3 -march=native -fopenmp -fno-math-errno -shared -fPIC` through
// execvp, never a shell. The cache directory is $XDG_CACHE_HOME/tcbench
// (else ~/.cache/tcbench), created 0700; one that other users can write to
// is refused. Entries are written to a temporary file and renamed into
// place, so concurrent runs never see half a file; an entry that fails to
// load is rebuilt.
//
// A source compiles in parts at once, one per CPU this process may run on
// ($TCBENCH_CC_JOBS caps it; 1 compiles whole): when the source marks its
// kernels with KCACHE_PART lines and its closing code with a KCACHE_TAIL
// line, each part is the text before the first mark (the prelude), with
// TC_PARTS defined, followed by a contiguous run of kernels of at least
// 32 KB (one part when the kernels are fewer), and the tail is a part of
// its own; the objects are then linked into one library. Each part's object
// stays in the cache under its own text's key, so a later source that
// shares a part links it without compiling. The source itself must make
// its kernels non-static under TC_PARTS and declare them before the tail
// uses them. The library's key is the same either way.
#pragma once
#include <stdbool.h>
#include <stddef.h>

#define KCACHE_PART "//@tc-part\n"
#define KCACHE_TAIL "//@tc-tail\n"

typedef struct kcache_result {
    void *handle;   // dlopen handle
    bool hit;       // loaded from the cache without compiling
    int parts;      // kernel parts (1 also when compiled whole; 0 on a hit)
    bool whole;     // compiled as one translation unit, not in parts and a tail
    int reused;     // of the parts and the tail, those whose object the cache had
    char path[1024];
} kcache_result;

// cache_dir may be NULL (the default above).
int kcache_build(const char *src, const char *cache_dir, kcache_result *r, char *err, size_t cap);
// The directory kcache would use, created and checked; 0 or -1 with err.
int kcache_dir(const char *cache_dir, char *out, size_t outcap, char *err, size_t cap);
// The compiler flags used for generated code (also part of the key).
const char *kcache_flags(void);
