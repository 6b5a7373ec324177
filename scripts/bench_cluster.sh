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

echo "== allreduce across the 2 containers (1 rank each, TCP over the compose network)"
docker exec $project-launcher-1 horovodrun python /bench/bench_allreduce.py "$@" 2>&1 \
  | grep -v '^horovodrun: preflight\|^  ok \|^  network:'

echo "== raw TCP between the same containers (iperf3, 5 s each)"
pid1=$(docker inspect -f '{{.State.Pid}}' $project-worker-1)
pid2=$(docker inspect -f '{{.State.Pid}}' $project-worker-2)
ip1=$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' $project-worker-1)
nsenter -t "$pid1" -n iperf3 -s -p 5201 -D
sleep 0.5
nsenter -t "$pid2" -n iperf3 -c "$ip1" -p 5201 -t 5 -f g | grep -E 'sender|receiver' | sed 's/^/one direction: /'
nsenter -t "$pid2" -n iperf3 -c "$ip1" -p 5201 -t 5 -f g --bidir | grep -E 'sender|receiver' | sed 's/^/both directions: /'
