#!/usr/bin/env bash
# Issue 20's host-array benchmarks (parts 2 and 5) on a machine with many cores, such as a lent
# GPU machine's 16, for one or more source trees at once, interleaved so that a noisy moment hits
# each alike:
#   benchmarks/host_rounds.sh [NAME=TREE ...]     (default: now=. ; ROUNDS, default 2)
# Each TREE (a checkout, e.g. `git worktree add .dev/before <rev>`) is built with scripts/
# gpu_check.sh's build (BUILD_ONLY=1: NCCL where the machine has it, no TensorFlow, /usr/bin/c++),
# then every round runs, per tree (its horovod package and engine; the benchmarks are this
# tree's, from benchmarks/): `allreduce.py --latency` and `--fusion`
# at np 2 and 4, `grouped.py` and `grouped.py --model MobileNetV2` at np 2, all with
# `--bind-to none` as horovodrun runs. Lines are prefixed with the tree's name; OUT_FILE (if set)
# gets a copy of everything.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-python3}
ROUNDS=${ROUNDS:-2}
[ $# = 0 ] && set -- "now=$ROOT"
MPI=(mpirun --bind-to none)
[ "$(id -u)" = 0 ] && MPI+=(--allow-run-as-root)
MPI+=(--oversubscribe -x PYTHONPATH)
exec > >(tee -a "${OUT_FILE:-/dev/null}") 2>&1

declare -A SITE
NAMES=()
for spec in "$@"; do
  name=${spec%%=*} tree=$(cd "${spec#*=}" && pwd)
  before=$(ls -d /tmp/hvd-gpu-check.* 2>/dev/null)
  CC=/usr/bin/cc CXX=/usr/bin/c++ KEEP=1 BUILD_ONLY=1 PYTHON=$PYTHON bash "$tree/scripts/gpu_check.sh" |
    sed "s/^/$name: /"
  made=$(comm -13 <(echo "$before") <(ls -d /tmp/hvd-gpu-check.* 2>/dev/null))
  [ -f "$made/site/horovod/libhorovod_core.so" ] || ls "$made"/site/horovod/_core*.so >/dev/null 2>&1 ||
    { echo "$name: FAIL: no engine built (see $made/build.log)"; exit 1; }
  SITE[$name]=$made/site
  NAMES+=("$name")
done

for round in $(seq "$ROUNDS"); do
  for name in "${NAMES[@]}"; do
    echo "== $name round $round"
    export PYTHONPATH="${SITE[$name]}"
    cd "$ROOT/benchmarks" || exit 1
    for np in 2 4; do
      timeout 300 "${MPI[@]}" -np $np "$PYTHON" allreduce.py --latency | sed "s/^/np $np /"
      timeout 300 "${MPI[@]}" -np $np "$PYTHON" allreduce.py --fusion | sed "s/^/np $np /"
    done
    timeout 300 "${MPI[@]}" -np 2 "$PYTHON" grouped.py | sed "s/^/np 2 /"
    timeout 300 "${MPI[@]}" -np 2 "$PYTHON" grouped.py --model MobileNetV2 | sed "s/^/np 2 /"
  done
done
