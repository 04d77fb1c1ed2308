// strdist: how far apart two short names are, for "did you mean" hints.
//
//   const char *names[] = {"gpt2", "bert", NULL};
//   int i = strdist_closest("gtp2", names, 2);  // 0: one swap away from gpt2
//   if (i >= 0) printf("did you mean %s?\n", names[i]);
#pragma once

// Damerau-Levenshtein distance in its optimal-string-alignment form: the
// fewest insertions, deletions, substitutions and swaps of two neighbours
// (so "gtp2" is 1 from "gpt2"). Bytes, not characters; names longer than
// STRDIST_MAX_LEN bytes are "far" (STRDIST_FAR).
#define STRDIST_MAX_LEN 64
#define STRDIST_FAR     1000
int strdist_distance(const char *a, const char *b);

// The index of the name in the NULL-terminated names nearest to word, or -1
// when none is within max_dist edits or the nearest is a rewrite of much of
// word (more edits than a third of its length, rounded up, or all of it).
// Ties: the first.
int strdist_closest(const char *word, const char *const *names, int max_dist);
