#!/usr/bin/env bash
# usage: scripts/side_by_side.sh LABEL COMMAND [LABEL COMMAND ...]
# Runs the commands at once (each with bash -c), every output line prefixed with [LABEL], waits
# for all of them and fails if any failed, saying which and after how long. For steps that each
# leave a core idle about half the time on 2 cores (image builds, whose diffs are fuse-overlayfs
# walking the image in one process; checks that wait on containers): issue 39, docs/benchmarks.md.
set -uo pipefail
[ $# -ge 2 ] && [ $(($# % 2)) -eq 0 ] || { echo "usage: $0 LABEL COMMAND [LABEL COMMAND ...]" >&2; exit 2; }
pids=()
while [ $# -ge 2 ]; do
  label=$1 cmd=$2
  shift 2
  {
    t0=$SECONDS
    bash -c "$cmd" 2>&1 | sed -u "s/^/[$label] /"
    rc=${PIPESTATUS[0]}
    echo "[$label] $([ "$rc" -eq 0 ] && echo done || echo "FAILED (exit $rc)") after $((SECONDS - t0)) s"
    exit "$rc"
  } &
  pids+=($!)
done
rc=0
for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
exit $rc
