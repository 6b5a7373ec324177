#!/usr/bin/env bash
# The engine's two transports on shaped links (issue 56): a compose cluster of W workers x S
# slots whose links all run at RATE (tc tbf in each worker), and in one run per layout:
#   1. raw TCP worker-2 -> worker-1 through the same shaper (iperf3 from the host);
#   2. scripts/bench_transports.py in the launcher: horovodrun (MPI) and horovodrun --gloo (the
#      engine's TCP transport) interleaved, flat (HOROVOD_HIERARCHICAL_ALLREDUCE=0) and, with
#      S > 1, hierarchical (the default, auto);
#   3. per size: the TCP transport's bus bandwidth / the shaped rate, and / MPI's.
# Needs the images (make images), Compose v2 and iperf3 (scripts/install-prereqs.sh).
#   scripts/bench_shaped_transports.sh WORKERS SLOTS [RATE [SIZES]]    (400mbit, 4K,16M,64M)
# TRIALS: interleaved trials per variant (default 3).
set -euo pipefail
cd "$(dirname "$0")/.."
source versions.env
source scripts/iperf_lib.sh
workers=${1:?usage: bench_shaped_transports.sh WORKERS SLOTS [RATE [SIZES]]} slots=${2:?}
rate=${3:-400mbit} sizes=${4:-4K,16M,64M}
project=hvdshapedtr
export HOROVOD_IMAGE_TAG=${IMAGE_TAG:-$HOROVOD_VERSION-cpu} HOROVOD_SLOTS_PER_WORKER=$slots \
       HOROVOD_CLUSTER_COMMAND="sleep infinity" HOROVOD_BENCH_SCRIPTS=$PWD/scripts \
       HOROVOD_LINK_RATE=$rate HOROVOD_LINK_RATES=
compose=(docker compose -f compose/compose.yaml -f compose/compose.shaped.yaml
         -f scripts/bench-cluster.compose.yaml -p $project)
cleanup() {
  iperf_stop $project-worker-1 5204
  "${compose[@]}" down -v -t 1 >/dev/null 2>&1 || true
}
trap cleanup EXIT
cleanup
"${compose[@]}" up -d --wait --scale worker="$workers" >/dev/null 2>&1
rate_bps=$(docker exec $project-worker-1 tc -j qdisc show dev eth0 |
  python3 -c "import json, sys; print(json.load(sys.stdin)[0]['options']['rate'])")
iperf_serve $project-worker-1 5204
tcp=$(iperf_mbits $project-worker-2 $project-worker-1 5204)
iperf_stop $project-worker-1 5204
echo "== $workers workers x $slots slots on $(nproc) cores; links shaped at $rate" \
  "($(python3 -c "print(f'{$rate_bps / 1e9:.4f}')") GB/s); raw TCP worker-2 -> worker-1" \
  "(iperf3, 5 s): $tcp Mbit/s"
run() {  # $1: label; the rest: --env VAR=value for the ranks
  local label=$1
  shift
  echo "== $label"
  docker exec $project-launcher-1 python /bench/bench_transports.py --np $((workers * slots)) \
    --sizes "$sizes" --trials "${TRIALS:-3}" --latency-ops 500 "$@" | tee /tmp/$project-$label.txt
  python3 - /tmp/$project-$label.txt "$rate_bps" <<'PY'
import re, sys
rate = float(sys.argv[2]) / 1e9
for m in re.finditer(r"^ *(\d+) \| +[0-9.]+ +([0-9.]+) +[0-9.]+ +([0-9.]+) \|", open(sys.argv[1]).read(), re.M):
    size, mpi, tcp = int(m[1]), float(m[2]), float(m[3])
    if size >= 1 << 20:
        print(f"{size >> 20} MiB: tcp transport {tcp:.4f} GB/s = {tcp / rate:.2f} of the shaped rate, "
              f"{tcp / mpi:.2f}x MPI's ({mpi / rate:.2f} of the rate)")
PY
}
run flat --env HOROVOD_HIERARCHICAL_ALLREDUCE=0
if [ "$slots" -gt 1 ]; then run hierarchical; fi
