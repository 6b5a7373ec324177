#!/usr/bin/env bash
# benchmarks/ray_executor.py on a compose Ray cluster (compose/compose.ray.yaml: a head and 2 Ray
# workers of 2 CPUs, horovod:<tag>-ray), in one run:
#
#   benchmarks/ray_cluster.sh [ray_executor.py's arguments: --sizes 1M,16M,64M --trials 3 ...]
#
# 1. bring-up: `docker compose up --wait` until both Ray workers joined;
# 2. ssh from the head to the Ray workers (a key pair made here, sshd on port 2222 in each
#    worker; the image's ssh settings), so that horovodrun can start ranks on the same containers;
# 3. python /bench/ray_executor.py on the head: start() and trivial run() times, then allreduce
#    in Ray actors against horovodrun --gloo and horovodrun (mpirun) on the same containers.
# Needs the image (make build/ray) and Compose v2. The cluster is taken down at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
source versions.env
project=hvdraybench
export HOROVOD_IMAGE_TAG=${IMAGE_TAG:-$HOROVOD_VERSION-cpu} HOROVOD_BENCH_SCRIPTS=$PWD/benchmarks
export HOROVOD_RAY_DASHBOARD_PORT=""  # a free port
compose=(docker compose -f compose/compose.ray.yaml -f benchmarks/ray.compose.yaml -p $project)
trap '"${compose[@]}" down -v -t 1 >/dev/null 2>&1 || true' EXIT
"${compose[@]}" down -v -t 1 >/dev/null 2>&1 || true
t0=$(date +%s.%N)
"${compose[@]}" up -d --wait >/dev/null
echo "== bring-up: head + 2 Ray workers joined in $(python3 -c "print(f'{$(date +%s.%N) - $t0:.1f}')") s"

head=$project-ray-head-1
docker exec $head sh -c 'mkdir -p /root/.ssh && ssh-keygen -q -t ed25519 -N "" -f /root/.ssh/id_ed25519'
key=$(docker exec $head cat /root/.ssh/id_ed25519.pub)
for w in $project-ray-worker-1 $project-ray-worker-2; do
  docker exec $w sh -c "mkdir -p /root/.ssh /run/sshd && echo '$key' >/root/.ssh/authorized_keys && ssh-keygen -A >/dev/null && /usr/sbin/sshd"
done
docker exec $head python /bench/ray_executor.py "$@"
