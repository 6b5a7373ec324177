#!/usr/bin/env bash
# Benchmarks on a compose cluster (unshaped links), one subcommand per measurement, each in one run:
#
#   benchmarks/cluster.sh allreduce [--quick]
# 2 workers, one rank each, so that every byte crosses the compose network over TCP:
#   1. bring-up: `docker compose up` until the first allreduce across the workers has returned
#   2. allreduce bus bandwidth: engine vs bare ring vs MPI_Allreduce (benchmarks/allreduce.py)
#   3. the physical limit: raw TCP between the same two containers before and after (iperf3)
#
#   benchmarks/cluster.sh hierarchical [WORKERS [SLOTS [SIZES]]]     default 2 2 1M,16M,64M,256M
# Flat ring against hierarchical allreduce on W workers x S slots, next to the network's figures:
#   1. raw TCP between two workers (one stream one way, then one each way at once);
#   2. benchmarks/allreduce.py --sweep-only with the default (auto: hierarchical on several
#      hosts of several ranks): engine (hierarchical), the bare flat ring and MPI_Allreduce, each
#      size's methods interleaved in the same launch;
#   3. the same with HOROVOD_HIERARCHICAL_ALLREDUCE=0: engine (flat ring) and MPI_Allreduce;
#   4. per size: hierarchical / flat engine bus bandwidth, and each against MPI_Allreduce.
#
#   benchmarks/cluster.sh network-check [WORKERS] [extra --check-network flags]     (default 2)
# `horovodrun --check-network` on N workers (1 slot each), next to iperf3 between the same
# containers (one stream, one way, 5 s, for every ordered pair; then every worker to the next
# all at once, as a ring keeps the links), the ratio doctor / iperf3 for each link, and the
# engine's 64 MiB allreduce against the slowest link alone and at once.
#
# Needs the images (make images), Compose v2 and iperf3 (scripts/install-prereqs.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source versions.env
source benchmarks/cluster_lib.sh

now() { date +%s.%N; }

allreduce() {
  local project=hvdbench t0 t_up t_first one1 both1 one2 both2 out
  export HOROVOD_SLOTS_PER_WORKER=1
  bench_compose $project bench
  trap "cluster_down; iperf_stop $project-worker-1 5201" EXIT
  cluster_down
  t0=$(now)
  cluster_up 2
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
  docker exec $project-launcher-1 horovodrun python /bench/allreduce.py "$@" 2>&1 \
    | grep -v '^horovodrun: preflight\|^  ok \|^  network:' | tee "$out"

  one2=$(iperf); both2=$(iperf --bidir)
  echo "== raw TCP between the containers after (iperf3, 5 s): one way $one2 GB/s; both ways at once $both2 GB/s per direction"
  python3 benchmarks/cluster_report.py allreduce "$out" "$one1" "$one2" "$both1" "$both2"
  rm -f "$out"
}

hierarchical() {
  local workers=${1:-2} slots=${2:-2} sizes=${3:-1M,16M,64M,256M} project=hvdhier hier flat
  export HOROVOD_SLOTS_PER_WORKER=$slots
  bench_compose $project bench
  trap "cluster_down; iperf_stop $project-worker-1 5202" EXIT
  cluster_down
  cluster_up "$workers"

  iperf_serve $project-worker-1 5202
  # GB/s worker-1 receives from worker-2: one stream one way; --bidir: one each way at once.
  iperf() { iperf_gbs $project-worker-2 $project-worker-1 5202 "$@"; }
  echo "== $workers workers x $slots slots on $(nproc) cores; raw TCP worker-2 -> worker-1 (iperf3, 5 s): one way $(iperf) GB/s; both ways at once $(iperf --bidir) GB/s per direction"

  hier=$(mktemp) flat=$(mktemp)
  sweep() {  # $1: output file; the rest: env for the ranks
    local out=$1; shift
    docker exec "$@" $project-launcher-1 horovodrun python /bench/allreduce.py \
      --sweep-only --sizes "$sizes" 2>&1 | without_launch_chatter | tee "$out"
  }
  echo "== hierarchical (auto); the ring column is the bare flat ring"
  sweep "$hier"
  echo "== flat (HOROVOD_HIERARCHICAL_ALLREDUCE=0)"
  sweep "$flat" -e HOROVOD_HIERARCHICAL_ALLREDUCE=0
  python3 benchmarks/cluster_report.py hierarchical "$hier" "$flat"
  rm -f "$hier" "$flat"
}

network_check() {
  local workers=${1:-2} project=hvdnetcheck report pairs ring i j a b g
  shift || true
  export HOROVOD_SLOTS_PER_WORKER=1
  bench_compose $project
  trap "cluster_down; for i in \$(seq 1 $workers); do iperf_stop $project-worker-\$i 5202; done" EXIT
  cluster_down
  cluster_up "$workers"

  echo "== horovodrun --check-network, $workers workers, 1 rank each"
  report=$(mktemp)
  docker exec $project-launcher-1 horovodrun --check-network --check-seconds 2 "$@" 2>&1 | tee "$report"

  echo "== iperf3, one stream one way, 5 s"
  for i in $(seq 1 "$workers"); do iperf_serve $project-worker-$i 5202; done
  pairs=$(mktemp)
  for i in $(seq 1 "$workers"); do for j in $(seq 1 "$workers"); do
    [ "$i" = "$j" ] && continue
    a=$project-worker-$i; b=$project-worker-$j
    g=$(_iperf_bps "$a" "$b" 5202 | python3 -c "print(float(input()) / 8e9)")
    printf '%s %s %.3f\n' "$a" "$b" "$g" | tee -a "$pairs"
  done; done
  echo "== iperf3 all at once, each worker to the next (the ring's links), one stream each, 5 s"
  ring=$(mktemp -d)
  for i in $(seq 1 "$workers"); do
    a=$project-worker-$i; b=$project-worker-$(( i % workers + 1 ))
    _iperf_bps "$a" "$b" 5202 > "$ring/$i.bps" &
  done
  wait
  for i in $(seq 1 "$workers"); do
    a=$project-worker-$i; b=$project-worker-$(( i % workers + 1 ))
    g=$(python3 -c "print(float(open('$ring/$i.bps').read()) / 8e9)")
    printf '%s %s %.3f\n' "$a" "$b" "$g" | tee -a "$ring/all"
  done
  python3 benchmarks/cluster_report.py network-check "$report" "$pairs" "$ring/all"
  rm -rf "$report" "$pairs" "$ring"
}

case ${1:-} in
  allreduce | hierarchical) "$@" ;;
  network-check) shift && network_check "$@" ;;
  *) echo "usage: benchmarks/cluster.sh allreduce|hierarchical|network-check ... (see its header)" >&2; exit 2 ;;
esac
