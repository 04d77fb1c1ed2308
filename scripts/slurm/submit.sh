#!/usr/bin/env bash
# Submits a tcbench run to Slurm (docs/cluster.md): the array of shards
# (scripts/slurm/tcbench-array.sbatch), then the merge, report and gate
# (tcbench-merge.sbatch) with --dependency=afterany on the array, so that it
# runs, and names what is missing, even when a shard failed.
#
#   scripts/slurm/submit.sh SUITE [run options]
#
# Environment (the defaults in brackets):
#   TCBENCH_SHARDS    N, the array's tasks [4]
#   TCBENCH_CPUS      CPUs of each task, and so its --threads [the #SBATCH line: 8]
#   TCBENCH_GPUS      GPUs of each task (--gres=gpu:G); G > 0 makes
#                     TCBENCH_DEVICE default to cuda [none]
#   TCBENCH_DEVICE    --device of every shard [tcbench's: auto]
#   TCBENCH_TIME      each task's time limit [the #SBATCH line: 24:00:00]
#   TCBENCH_MEM       each task's memory (--mem) [the cluster's default]
#   TCBENCH_OUTDIR    the run's directory [results/slurm-YYYYmmdd-HHMMSS]
#   TCBENCH_BASELINE  a results file: the merge job gates against it
#   TCBENCH_SBATCH_ARGS  more sbatch options for the array, split on spaces
#                     (--exclusive --constraint=icelake)
#   TCBENCH           the tcbench program [tcbench on PATH at submission]
# sbatch's own variables (SBATCH_PARTITION, SBATCH_ACCOUNT, ...) apply to
# both jobs. Prints the two job ids and the directory.
set -euo pipefail

me=submit.sh
die() {
    echo "$me: $*" >&2
    exit 2
}
here=$(cd "$(dirname "$0")" && pwd)
[ $# -gt 0 ] || die "usage: scripts/slurm/submit.sh SUITE [run options]"
command -v sbatch >/dev/null || die "no sbatch on PATH: run this on a Slurm login node"

n=${TCBENCH_SHARDS:-4}
[[ $n =~ ^[1-9][0-9]*$ ]] || die "TCBENCH_SHARDS=$n: expected a number of shards, 1 or more"
TCBENCH=${TCBENCH:-$(command -v tcbench || true)}
[ -n "$TCBENCH" ] || die "no tcbench: set TCBENCH to the program (build/cli/tcbench) or put it on PATH"
TCBENCH=$(cd "$(dirname "$TCBENCH")" && pwd)/$(basename "$TCBENCH")
TCBENCH_OUTDIR=${TCBENCH_OUTDIR:-results/slurm-$(date +%Y%m%d-%H%M%S)}
if [ -n "${TCBENCH_GPUS:-}" ] && [ "$TCBENCH_GPUS" != 0 ]; then
    TCBENCH_DEVICE=${TCBENCH_DEVICE:-cuda}
fi
export TCBENCH TCBENCH_OUTDIR TCBENCH_SHARDS=$n
[ -z "${TCBENCH_DEVICE:-}" ] || export TCBENCH_DEVICE

req=(--array="1-$n")
[ -z "${TCBENCH_CPUS:-}" ] || req+=(--cpus-per-task="$TCBENCH_CPUS")
[ -z "${TCBENCH_GPUS:-}" ] || [ "$TCBENCH_GPUS" = 0 ] || req+=(--gres="gpu:$TCBENCH_GPUS")
[ -z "${TCBENCH_TIME:-}" ] || req+=(--time="$TCBENCH_TIME")
[ -z "${TCBENCH_MEM:-}" ] || req+=(--mem="$TCBENCH_MEM")
# shellcheck disable=SC2206 # options split on spaces, as documented
req+=(${TCBENCH_SBATCH_ARGS:-})

mkdir -p "$TCBENCH_OUTDIR"
array=$(sbatch --parsable "${req[@]}" "$here/tcbench-array.sbatch" "$@")
array=${array%%;*}
merge=$(sbatch --parsable --dependency="afterany:$array" "$here/tcbench-merge.sbatch")
merge=${merge%%;*}
echo "array job $array ($n shards), merge job $merge; results in $TCBENCH_OUTDIR"
