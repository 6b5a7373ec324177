#!/usr/bin/env bash
# Flat ring against hierarchical allreduce on a compose cluster of W workers x S slots, in one
# run, next to the network's own figures:
#   1. raw TCP between two workers (iperf3 from the host inside their network namespaces, one
#      stream one way, then one each way at once);
#   2. scripts/bench_allreduce.py --sweep-only with the default (auto: hierarchical on several
#      hosts of several ranks): engine (hierarchical), the bare flat ring and MPI_Allreduce, each
#      size's methods interleaved in the same launch;
#   3. the same with HOROVOD_HIERARCHICAL_ALLREDUCE=0: engine (flat ring) and MPI_Allreduce;
#   4. per size: hierarchical / flat engine bus bandwidth, and each against MPI_Allreduce.
# Needs the images (make images), Compose v2 and iperf3 (scripts/install-prereqs.sh).
#   scripts/bench_hierarchical.sh [WORKERS [SLOTS [SIZES]]]     default 2 2 1M,16M,64M,256M
set -euo pipefail
cd "$(dirname "$0")/.."
source versions.env
source scripts/iperf_lib.sh
workers=${1:-2} slots=${2:-2} sizes=${3:-1M,16M,64M,256M}
project=hvdhier
export HOROVOD_IMAGE_TAG=${IMAGE_TAG:-$HOROVOD_VERSION-cpu} HOROVOD_SLOTS_PER_WORKER=$slots \
       HOROVOD_CLUSTER_COMMAND="sleep infinity" HOROVOD_BENCH_SCRIPTS=$PWD/scripts
compose=(docker compose -f compose/compose.yaml -f scripts/bench-cluster.compose.yaml -p $project)
cleanup() { "${compose[@]}" down -v -t 1 >/dev/null 2>&1 || true; pkill -f "iperf3 -s -p 5202" || true; }
trap cleanup EXIT
cleanup
"${compose[@]}" up -d --wait --scale worker="$workers" >/dev/null 2>&1

iperf_serve $project-worker-1 5202
# GB/s worker-1 receives from worker-2: one stream one way; --bidir: one each way at once.
iperf() { iperf_gbs $project-worker-2 $project-worker-1 5202 "$@"; }
echo "== $workers workers x $slots slots on $(nproc) cores; raw TCP worker-2 -> worker-1 (iperf3, 5 s): one way $(iperf) GB/s; both ways at once $(iperf --bidir) GB/s per direction"

hier=$(mktemp) flat=$(mktemp)
run() {  # $1: output file; the rest: env for the ranks
  local out=$1; shift
  docker exec "$@" $project-launcher-1 horovodrun python /bench/bench_allreduce.py \
    --sweep-only --sizes "$sizes" 2>&1 | grep -v '^horovodrun: \|^  ok \|^  network:' | tee "$out"
}
echo "== hierarchical (auto); the ring column is the bare flat ring"
run "$hier"
echo "== flat (HOROVOD_HIERARCHICAL_ALLREDUCE=0)"
run "$flat" -e HOROVOD_HIERARCHICAL_ALLREDUCE=0
python3 - "$hier" "$flat" <<'PY'
import re, sys
def rows(path):  # size -> (engine GB/s, ring GB/s, mpi GB/s)
    out = {}
    for m in re.finditer(r"^ *(\d+ [KM]iB) \| +[0-9.]+ +([0-9.]+) \| +[0-9.]+ +([0-9.]+) \| "
                         r"+[0-9.]+ +([0-9.]+) \|", open(path).read(), re.M):
        out[m.group(1)] = tuple(map(float, m.groups()[1:]))
    return out
hier, flat = rows(sys.argv[1]), rows(sys.argv[2])
print("== busbw GB/s: hierarchical, flat (engine); hierarchical/flat; each / MPI_Allreduce of its run")
for size in hier:
    if size in flat:
        h, f = hier[size][0], flat[size][0]
        print(f"{size:>8}: hierarchical {h:.2f}, flat {f:.2f}; x{h / f:.2f}; "
              f"vs MPI {h / hier[size][2]:.2f} and {f / flat[size][2]:.2f}")
PY
rm -f "$hier" "$flat"
