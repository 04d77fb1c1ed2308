# shellcheck shell=sh
# Helpers for the shell tests of the command line, sourced after TMP is set
# (a private directory): counters, expected exit codes, patterns in files.
# End a test with `sh_lib_end NAME`. POSIX sh and grep.
#
#   . "$SRC/tests/sh_lib.sh"
#   expect 2 "bad option" "$EXE" run --bogus   # output in $TMP/stdout, $TMP/stderr
#   one_line "unknown option" "bad option"
#   has "$TMP/out.json" '"status": "ok",' "status recorded"

pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() {
    fail=$((fail + 1))
    echo "FAIL: $*" >&2
}

# expect CODE DESC CMD...: run CMD, keep its output in $TMP/stdout and $TMP/stderr
expect() {
    want=$1
    desc=$2
    shift 2
    "$@" >"$TMP/stdout" 2>"$TMP/stderr"
    got=$?
    if [ "$got" -eq "$want" ]; then
        ok
    else
        bad "$desc: exit $got, expected $want"
        sed 's/^/  | /' "$TMP/stderr" >&2
    fi
}

has() { # has FILE PATTERN DESC
    if grep -Eq -- "$2" "$1"; then ok; else bad "$3: no '$2' in $1"; fi
}

one_line() { # one_line PATTERN DESC: stderr is exactly one line matching PATTERN
    if [ "$(wc -l <"$TMP/stderr")" -eq 1 ] && grep -Eq -- "$1" "$TMP/stderr"; then
        ok
    else
        bad "$2: wanted one line matching '$1' on stderr, got:"
        sed 's/^/  | /' "$TMP/stderr" >&2
    fi
}

# every_mode RESULTS N CASE...: after a run of eager and compiled, fp32 and
# AMP, inference and training, each case's eager entries say ok and its
# compiled entries pass (in $TMP/stdout), and RESULTS holds N passes
every_mode() {
    res=$1
    want=$2
    shift 2
    for c in "$@"; do
        for p in fp32 amp; do
            for w in infer train; do
                has "$TMP/stdout" "^$c \[$p $w\] +eager +ok " "$c $p $w eager ok"
                has "$TMP/stdout" "^$c \[$p $w\] +compiled +pass " "$c $p $w compiled pass"
            done
        done
    done
    n=$(grep -c '"status": "pass"' "$res")
    [ "$n" -eq "$want" ] && ok || bad "$want compiled entries pass in the results, found $n"
}

# entries FILE: "suite name mode precision workload device batch", one a
# line, sorted, of the cases of a results file (keys six spaces in)
entries() {
    awk '/^      "suite": /{s = $2; r = 1; next}
        r && /^      "(name|mode|precision|workload|device)": /{s = s " " $2; next}
        r && /^      "batch": /{print s " " $2; r = 0}' "$1" | tr -d '",' | sort
}

sh_lib_end() { # sh_lib_end NAME: the summary, and the exit status
    echo "$1: $pass passed, $fail failed"
    [ "$fail" -eq 0 ]
}
