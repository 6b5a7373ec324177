#!/usr/bin/env bash
# Instructions per tensor of a grouped allreduce (issue 20, part 2), counted by callgrind, so the
# figure repeats on a busy machine where wall-clock time does not:
#   benchmarks/per_tensor_ir.sh [TREE]      (TREE: a checkout with a built engine; default .)
# One rank (no transfers: only the per-tensor work of frontend, binding and engine) runs
# hvd.grouped_allreduce over N (default 300) one-element float32 tensors, 20 times and then 60
# times; the difference of each thread's instruction count, over 40 x N, is printed for the
# caller's thread and for the engine's. Needs valgrind.
set -euo pipefail
TREE=$(cd "${1:-$(dirname "$0")/..}" && pwd)
PYTHON=${PYTHON:-$TREE/build/venv/bin/python}
N=${N:-300}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cat >"$WORK/group.py" <<'PY'
import os
import numpy as np
import horovod.numpy as hvd
hvd.init()
parts = [np.ones(1, np.float32) for _ in range(int(os.environ["N"]))]
for _ in range(int(os.environ["ITERS"])):
    hvd.grouped_allreduce(parts, op=hvd.Sum, name="g")
hvd.shutdown()
PY
ROOT_ARGS=()
[ "$(id -u)" = 0 ] && ROOT_ARGS=(--allow-run-as-root)
count() {  # count ITERS: "<caller's thread> <engine's thread>" instructions
  rm -f "$WORK"/cg.*
  PYTHONPATH=$TREE N=$N ITERS=$1 mpirun "${ROOT_ARGS[@]}" -np 1 valgrind --tool=callgrind \
    --callgrind-out-file="$WORK/cg.%p.out" --separate-threads=yes "$PYTHON" "$WORK/group.py" \
    >"$WORK/run.log" 2>&1
  local main engine f
  main=$(grep -m1 '^summary' "$WORK"/cg.*.out-01 | cut -d' ' -f2)
  engine=0
  for f in "$WORK"/cg.*.out-*; do  # the engine's thread is the one running BackgroundLoop
    if grep -q BackgroundLoop "$f"; then engine=$(grep -m1 '^summary' "$f" | cut -d' ' -f2); fi
  done
  echo "$main $engine"
}
read -r m1 e1 < <(count 20)
read -r m2 e2 < <(count 60)
echo "$TREE: caller's thread $(((m2 - m1) / (40 * N))) Ir/tensor, engine's thread $(((e2 - e1) / (40 * N))) Ir/tensor (N=$N)"
