#!/usr/bin/env bash
# Figures of a 2-worker compose cluster (one rank per worker, so every byte crosses the compose
# network over TCP), all in one run:
#   1. bring-up: `docker compose up` until the first allreduce across the workers has returned
#   2. allreduce bus bandwidth: engine vs bare ring vs MPI_Allreduce (scripts/bench_allreduce.py)
#   3. the physical limit: raw TCP between the same two containers (iperf3 from the host, run
#      inside each container's network namespace with nsenter; the images need no iperf3)
# Needs the images (make images), Compose v2 and iperf3 (scripts/install-prereqs.sh).
#   scripts/bench_cluster.sh [--quick]
set -euo pipefail
cd "$(dirname "$0")/.."
source versions.env
source scripts/iperf_lib.sh
project=hvdbench
export HOROVOD_IMAGE_TAG=${IMAGE_TAG:-$HOROVOD_VERSION-cpu} HOROVOD_SLOTS_PER_WORKER=1 \
       HOROVOD_CLUSTER_COMMAND="sleep infinity" HOROVOD_BENCH_SCRIPTS=$PWD/scripts
compose=(docker compose -f compose/compose.yaml -f scripts/bench-cluster.compose.yaml -p $project)
cleanup() { "${compose[@]}" down -v -t 1 >/dev/null 2>&1 || true; pkill -f "iperf3 -s -p 5201" || true; }
trap cleanup EXIT
cleanup

now() { date +%s.%N; }
t0=$(now)
"${compose[@]}" up -d --wait --scale worker=2 >/dev/null 2>&1
t_up=$(now)
docker exec $project-launcher-1 horovodrun python -c "import numpy as np, horovod.numpy as hvd
hvd.init(); assert hvd.allreduce(np.ones(4), op=hvd.Sum, name='first')[0] == hvd.size()" >/dev/null 2>&1
t_first=$(now)
python3 -c "print(f'bring-up, 2 workers: compose up {$t_up - $t0:.1f} s; first allreduce across them at {$t_first - $t0:.1f} s')"

iperf_serve $project-worker-1 5201
# GB/s worker-1 receives from worker-2: one stream one way; --bidir: one each way at once.
iperf() { iperf_gbs $project-worker-2 $project-worker-1 5201 "$@"; }
one1=$(iperf); both1=$(iperf --bidir)
echo "== raw TCP between the containers before (iperf3, 5 s): one way $one1 GB/s; both ways at once $both1 GB/s per direction"

echo "== allreduce across the 2 containers (1 rank each, TCP over the compose network)"
out=$(mktemp)
docker exec $project-launcher-1 horovodrun python /bench/bench_allreduce.py "$@" 2>&1 \
  | grep -v '^horovodrun: preflight\|^  ok \|^  network:' | tee "$out"

one2=$(iperf); both2=$(iperf --bidir)
echo "== raw TCP between the containers after (iperf3, 5 s): one way $one2 GB/s; both ways at once $both2 GB/s per direction"
python3 - "$out" "$one1" "$one2" "$both1" "$both2" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
one, both = max(map(float, sys.argv[2:4])), max(map(float, sys.argv[4:6]))
for size in ("16 MiB", "64 MiB", "256 MiB"):
    m = re.search(rf"^ *{size} \| +[0-9.]+ +([0-9.]+) \|", text, re.M)
    if m:
        e = float(m.group(1))
        print(f"engine busbw at {size}: {e:.2f} GB/s = {e / one:.2f} of raw TCP one way ({one:.2f}, "
              f"the better of before/after), {e / both:.2f} of raw TCP per direction both ways ({both:.2f})")
PY
rm -f "$out"
