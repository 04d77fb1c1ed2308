// Edit distances for "did you mean" hints (strdist.h).
#include "strdist.h"

#include <string.h>

static int min3(int a, int b, int c) {
    int m = a < b ? a : b;
    return m < c ? m : c;
}

int strdist_distance(const char *a, const char *b) {
    int la = (int)strlen(a), lb = (int)strlen(b);
    if (la > STRDIST_MAX_LEN || lb > STRDIST_MAX_LEN)
        return STRDIST_FAR;
    // d[i][j]: distance of a's first i bytes to b's first j bytes
    int d[STRDIST_MAX_LEN + 1][STRDIST_MAX_LEN + 1];
    for (int i = 0; i <= la; i++)
        d[i][0] = i;
    for (int j = 0; j <= lb; j++)
        d[0][j] = j;
    for (int i = 1; i <= la; i++)
        for (int j = 1; j <= lb; j++) {
            int cost = a[i - 1] != b[j - 1];
            d[i][j] = min3(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < d[i][j])
                d[i][j] = d[i - 2][j - 2] + 1;
        }
    return d[la][lb];
}

int strdist_closest(const char *word, const char *const *names, int max_dist) {
    int len = (int)strlen(word), best = -1, best_d = max_dist + 1;
    for (int i = 0; names[i]; i++) {
        int e = strdist_distance(word, names[i]);
        if (e < best_d) {
            best_d = e;
            best = i;
        }
    }
    if (best >= 0 && (best_d >= len || best_d * 3 > len + 2)) // "x" is not a typo of "y"
        return -1;
    return best;
}
