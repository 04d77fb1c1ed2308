// Option values shared by the subcommands (cli.h).
#include "cli.h"

#include "bench/plan.h"
#include "bench/shard.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_parse_int(const char *cmd, const char *opt, const char *s, long long min, long long max,
                  long long *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || errno == ERANGE) {
        cli_fail(cmd, "%s %s: expected a whole number", opt, s);
        return -1;
    }
    if (v < min || v > max) {
        cli_fail(cmd, "%s %s: must be between %lld and %lld", opt, s, min, max);
        return -1;
    }
    *out = v;
    return 0;
}

int cli_parse_int_list(const char *cmd, const char *opt, const char *s, long long min,
                       long long max, long long *out, int cap, int *n) {
    *n = 0;
    for (const char *p = s;; p++) {
        size_t len = strcspn(p, ",");
        char word[32];
        if (len == 0 || len >= sizeof word) {
            cli_fail(cmd, "%s %s: %s", opt, s,
                     len ? "a number too long" : "an empty item (two commas, or one at an end)");
            return -1;
        }
        if (*n == cap) {
            cli_fail(cmd, "%s %s: at most %d values", opt, s, cap);
            return -1;
        }
        memcpy(word, p, len);
        word[len] = '\0';
        if (cli_parse_int(cmd, opt, word, min, max, &out[*n]) < 0)
            return -1;
        for (int i = 0; i < *n; i++)
            if (out[i] == out[*n]) {
                cli_fail(cmd, "%s %s: %lld is given twice", opt, s, out[i]);
                return -1;
            }
        ++*n;
        p += len;
        if (!*p)
            return 0;
    }
}

int cli_parse_seconds(const char *cmd, const char *opt, const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno == ERANGE || !isfinite(v) || v <= 0 || v > 1e7) {
        cli_fail(cmd, "%s %s: expected seconds, a number above 0 (at most 1e7)", opt, s);
        return -1;
    }
    *out = v;
    return 0;
}

int cli_parse_seconds_or_zero(const char *cmd, const char *opt, const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno == ERANGE || !isfinite(v) || v < 0 || v > 1e7) {
        cli_fail(cmd, "%s %s: expected seconds, a number from 0 to 1e7", opt, s);
        return -1;
    }
    *out = v;
    return 0;
}

int cli_parse_bytes(const char *cmd, const char *opt, const char *s, size_t *out) {
    static const struct {
        const char *name;
        double scale;
    } units[] = {{"", 1},         {"B", 1},        {"KiB", 0x1p10}, {"MiB", 0x1p20},
                 {"GiB", 0x1p30}, {"TiB", 0x1p40}, {"kB", 1e3},     {"KB", 1e3},
                 {"MB", 1e6},     {"GB", 1e9},     {"TB", 1e12}};
    char *end;
    errno = 0;
    // decimal digits first: strtod would take "inf", "nan" and hex
    double v = *s >= '0' && *s <= '9' && !strpbrk(s, "xX") ? strtod(s, &end) : NAN;
    if (!isnan(v) && errno != ERANGE)
        for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
            if (strcmp(end, units[i].name) == 0) {
                v *= units[i].scale;
                if (v >= 1 && v <= 0x1p60) {
                    *out = (size_t)v;
                    return 0;
                }
            }
    cli_fail(cmd,
             "%s %s: expected bytes, a number from 1 to 2^60 with an optional unit (KiB, MiB, "
             "GiB, TiB, kB, MB, GB, TB): 6GiB, 512MiB, 1e9",
             opt, s);
    return -1;
}

// Decimal digits alone, as a number up to 10^9; -1 otherwise.
static long shard_number(const char *s, const char **end) {
    long v = 0;
    const char *p = s;
    for (; *p >= '0' && *p <= '9' && p - s < 9; p++)
        v = 10 * v + (*p - '0');
    *end = p;
    return p > s ? v : -1;
}

int cli_parse_shard(const char *cmd, const char *s, int *index, int *count) {
    const char *p;
    long k = shard_number(s, &p), n = -1;
    if (k >= 0 && *p == '/')
        n = shard_number(p + 1, &p);
    if (k < 0 || n < 0 || *p) {
        cli_fail(cmd, "--shard %s: expected K/N, shard K of N shards, K from 1 to N (--shard 1/4)",
                 s);
        return -1;
    }
    if (n < 1 || n > BENCH_SHARD_MAX) {
        cli_fail(cmd, "--shard %s: N, the number of shards, must be between 1 and %d", s,
                 BENCH_SHARD_MAX);
        return -1;
    }
    if (k < 1 || k > n) {
        cli_fail(cmd,
                 "--shard %s: K must be between 1 and N (%ld): shards count from 1, as with "
                 "Slurm's --array=1-%ld",
                 s, n, n);
        return -1;
    }
    *index = (int)k;
    *count = (int)n;
    return 0;
}

int cli_parse_axis(const char *cmd, enum bench_axis a, const char *list, bench_config *cfg) {
    cli_strings words = {0};
    char opt[32];
    snprintf(opt, sizeof opt, "--%s", bench_axis_name(a));
    if (cli_strings_add_list(&words, cmd, opt, list) < 0)
        return -1;
    int rc = 0;
    cfg->naxis[a] = 0;
    if (a == BENCH_AXIS_DEVICE)
        cfg->device_auto = NULL;
    for (int i = 0; i < words.n && rc == 0; i++) {
        bool is_auto = a == BENCH_AXIS_DEVICE && strcmp(words.v[i], "auto") == 0;
        int v = is_auto ? bench_device_auto(cfg) : bench_axis_parse(a, words.v[i]);
        if (v < 0) {
            cli_fail(cmd, "%s %s: unknown %s; expected one of %s%s", opt, words.v[i],
                     bench_axis_name(a), bench_axis_values_list(a),
                     a == BENCH_AXIS_DEVICE ? ", auto" : "");
            rc = -1;
        } else if (a != BENCH_AXIS_DEVICE && !bench_axis_available(a, v)) {
            // a device's build and GPU are the plan's checks (bench_config_check_devices)
            cli_fail(cmd, "%s %s: not available in this build yet", opt, words.v[i]);
            rc = -1;
        } else {
            bool dup = false;
            for (int k = 0; k < cfg->naxis[a]; k++)
                dup |= cfg->axis[a][k] == v;
            if (!dup)
                cfg->axis[a][cfg->naxis[a]++] = v;
        }
    }
    cli_strings_free(&words);
    return rc;
}

int cli_strings_add(cli_strings *l, const char *s) {
    char **v = realloc(l->v, (size_t)(l->n + 1) * sizeof *v);
    if (!v)
        return -1;
    l->v = v;
    if (!(l->v[l->n] = strdup(s)))
        return -1;
    l->n++;
    return 0;
}

int cli_strings_add_list(cli_strings *l, const char *cmd, const char *opt, const char *s) {
    for (const char *p = s;;) {
        size_t len = strcspn(p, ",");
        if (len == 0) {
            cli_fail(cmd, "%s '%s': empty name in the list", opt, s);
            return -1;
        }
        char word[512];
        if (len >= sizeof word) {
            cli_fail(cmd, "%s: a name longer than %zu characters", opt, sizeof word - 1);
            return -1;
        }
        memcpy(word, p, len);
        word[len] = '\0';
        if (cli_strings_add(l, word) < 0) {
            cli_fail(cmd, "strdup: out of memory");
            return -1;
        }
        p += len;
        if (!*p)
            return 0;
        p++;
    }
}

void cli_strings_free(cli_strings *l) {
    for (int i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

void cli_format_count(double v, char *buf, size_t cap) {
    const char *units = " KMGTP";
    int u = 0;
    while (fabs(v) >= 1000 && u < 5) {
        v /= 1000;
        u++;
    }
    if (u == 0)
        snprintf(buf, cap, "%.0f", v);
    else
        snprintf(buf, cap, "%.1f%c", v, units[u]);
}

int cli_parse_gen_option(const char *cmd, const char *opt, const char *s, const cli_gen_opts *o) {
    if (!strcmp(opt, "--weights")) {
        if (strcmp(s, "f32") && strcmp(s, "int8") && strcmp(s, "int4"))
            return cli_fail(cmd, "--weights %s: expected f32, int8 or int4", s);
        *o->bits = s[0] == 'f' ? 0 : s[3] == '8' ? 8 : 4;
    } else if (!strcmp(opt, "--weight-group")) {
        if (strcmp(s, "32") && strcmp(s, "64") && strcmp(s, "128"))
            return cli_fail(cmd, "--weight-group %s: expected 32, 64 or 128", s);
        *o->group = atoi(s);
    } else if (!strcmp(opt, "--weight-scales")) {
        if (strcmp(s, "f32") && strcmp(s, "f16"))
            return cli_fail(cmd, "--weight-scales %s: expected f32 or f16", s);
        *o->scales = s[1] == '1' ? DT_F16 : DT_F32;
    } else {
        if (strcmp(s, "math") && strcmp(s, "sdpa"))
            return cli_fail(cmd, "--attention %s: expected math or sdpa", s);
        *o->fused = !strcmp(s, "sdpa");
    }
    return 0;
}
