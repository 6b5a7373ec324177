#!/usr/bin/env bash
# Scaling on shaped links (issue 43, part 3, first figures): the synthetic benchmark
# (examples/tensorflow2_synthetic_benchmark.py, MobileNetV2, batch 32 of 32x32, one thread per
# rank, as docs/benchmarks.md's overhead figures) on W workers x 1 slot whose links run at each
# RATE, with --compare-no-comm: the same ranks time blocks with and without gradient
# communication, so images/s per rank with it over without is the scaling efficiency against
# one worker's compute on this machine.
#   scripts/bench_shaped_scaling.sh [WORKERS [RATE...]]      (default 2, 400mbit 1gbit)
set -euo pipefail
cd "$(dirname "$0")/.."
source versions.env
workers=${1:-2}
shift || true
rates=("$@")
((${#rates[@]} > 0)) || rates=(400mbit 1gbit)
project=hvdshapedscale
export HOROVOD_IMAGE_TAG=${IMAGE_TAG:-$HOROVOD_VERSION-cpu} HOROVOD_SLOTS_PER_WORKER=1 \
       HOROVOD_CLUSTER_COMMAND="sleep infinity" HOROVOD_LINK_RATES=
compose=(docker compose -f compose/compose.yaml -f compose/compose.shaped.yaml -p $project)
trap '"${compose[@]}" down -v -t 1 >/dev/null 2>&1 || true' EXIT
for rate in "${rates[@]}"; do
  export HOROVOD_LINK_RATE=$rate
  "${compose[@]}" down -v -t 1 >/dev/null 2>&1 || true
  "${compose[@]}" up -d --wait --scale worker="$workers" >/dev/null 2>&1
  echo "== $workers workers x 1 slot, links at $rate"
  docker exec $project-launcher-1 horovodrun python /opt/horovod/examples/tensorflow2_synthetic_benchmark.py \
    --model MobileNetV2 --batch-size 32 --image-size 32 --threads 1 --num-iters 10 \
    --compare-no-comm 2>&1 | grep -v '^horovodrun: \|^  ok \|^  network:\|^\[horovod summary\]'
done
