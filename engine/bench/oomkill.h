// oomkill: whether the kernel's OOM killer struck, from the cgroup's own
// counter, so that a SIGKILL is called `oom` only on evidence.
//
//   long long before, after;
//   bool known = bench_oom_kills(&before) == 0;
//   ... the child runs and dies of SIGKILL ...
//   if (known && bench_oom_kills(&after) == 0 && after > before) ... // oom
//
// The counter is the "oom_kill N" line of the memory cgroup this process is
// in: cgroup v2's CGROUP/memory.events (from the "0::PATH" line of
// /proc/self/cgroup), else cgroup v1's memory/PATH/memory.oom_control (the
// "N:memory:PATH" line), else the v1 hierarchy's root file (a container
// sees its own cgroup there). None readable: no evidence either way.
// TCBENCH_CGROUP_ROOT replaces /sys/fs/cgroup (a file system mounted
// elsewhere; the tests' stand-in).
#pragma once
#include <stddef.h>

// The N of the first line that reads exactly "oom_kill N" in text (a
// memory.events or memory.oom_control file); -1 when there is none.
int bench_oom_kills_parse(const char *text, long long *n);
// The files that may hold the counter, most specific first, for the text
// of /proc/self/cgroup (root: where the cgroup file systems are mounted,
// "/sys/fs/cgroup"); returns how many (at most max) were written to paths.
int bench_oom_kills_files(const char *proc_cgroup, const char *root, char (*paths)[512], int max);
// This process's cgroup's OOM kills so far; -1 when no counter is readable.
int bench_oom_kills(long long *n);

// What this process may still allocate, so that a case planned to need more
// ends `oom` before it allocates (measure_prepare.c): /proc/meminfo's
// MemAvailable, or less where this process's cgroup (v2: memory.max less
// memory.current, under TCBENCH_CGROUP_ROOT as above) leaves less. -1 when
// neither is readable.
int bench_mem_available(size_t *bytes);
// The parsers: "MemAvailable: N kB" of a meminfo text, and a cgroup's room
// from its memory.max ("max": none) and memory.current texts; 0 or -1.
int bench_meminfo_available(const char *text, size_t *bytes);
int bench_cgroup_room(const char *max_text, const char *current_text, size_t *bytes);
