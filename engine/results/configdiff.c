// The first setting two configs differ in (configdiff.h).
#include "configdiff.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The option a config key comes from, for the message.
static const char *config_option(const char *key) {
    static const char *const names[][2] = {
        {"suites", "the suites"},
        {"size", "--size"},
        {"seed", "--seed"},
        {"batch_size", "--batch-size"},
        {"repeat", "--repeat"},
        {"warmup", "--warmup"},
        {"min_time_s", "--min-time"},
        {"max_time_s", "--max-time"},
        {"processes", "--processes"},
        {"pin", "--pin"},
        {"threads", "--threads"},
        {"timeout_s", "--timeout"},
        {"modes", "--mode"},
        {"precisions", "--precision"},
        {"workloads", "--workload"},
        {"devices", "--device"},
        {"device", "--device"},
        {"check_accuracy", "accuracy checks (--no-accuracy)"},
        {"grad_scaler", "--grad-scaler"},
        {"amp_dtype", "--amp-dtype"},
        {"weights", "--weights"},
        {"weight_group", "--weight-group"},
        {"prompt_len", "--prompt-len"},
        {"new_tokens", "--new-tokens"},
        {"chat_rounds", "--rounds"},
        {"weight_scales", "--weight-scales"},
        {"attention", "--attention"},
        {"only", "--only"},
        {"filter", "--filter"},
        {"exclude", "--exclude"},
        {"dump_dir", "--dump"},
        {"tf32", "--tf32"},
        {"flush_l2", "--flush-l2"},
        {"memory_limit", "--memory-limit"},
        {"disabled", "TCBENCH_DISABLE_*"},
        {"shard", "--shard"},
        {"shard_plan", "the shard plan"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(names[i][0], key))
            return names[i][1];
    return key;
}

// A config value as the user would write it: strings bare, lists of
// strings comma-separated, null as "(none)", anything else as JSON.
static void value_str(const json_t *v, char *buf, size_t cap) {
    if (!v) {
        snprintf(buf, cap, "(no such setting)");
    } else if (json_is_null(v)) {
        snprintf(buf, cap, "(none)");
    } else if (json_is_string(v)) {
        snprintf(buf, cap, "%s", json_string_value(v));
    } else if (json_is_array(v) && json_array_size(v) > 0 && json_is_string(json_array_get(v, 0))) {
        size_t o = 0;
        buf[0] = '\0';
        for (size_t i = 0; i < json_array_size(v) && o < cap; i++) {
            const char *s = json_string_value(json_array_get(v, i));
            o += (size_t)snprintf(buf + o, cap - o, "%s%s", i ? "," : "", s ? s : "?");
        }
    } else {
        char *t = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(10));
        snprintf(buf, cap, "%s", t ? t : "?");
        free(t);
    }
}

static bool skipped(const char *key, const char *const *skip) {
    for (; skip && *skip; skip++)
        if (!strcmp(*skip, key))
            return true;
    return false;
}

bool results_config_diff_find(const json_t *a, const json_t *b, const char *const *skip,
                              results_config_diff *df) {
    const char *key = NULL;
    const json_t *v;
    json_object_foreach((json_t *)a, key, v) if (!skipped(key, skip) &&
                                                 !json_equal(v, json_object_get(b, key))) break;
    if (!key)
        json_object_foreach((json_t *)b, key,
                            v) if (!skipped(key, skip) && !json_object_get(a, key)) break;
    if (!key)
        return false;
    df->key = key;
    df->option = config_option(key);
    value_str(json_object_get(a, key), df->a, sizeof df->a);
    value_str(json_object_get(b, key), df->b, sizeof df->b);
    return true;
}
