#!/usr/bin/env bash
# Shaped links (docs/shaped-links.md): what raw TCP carries between two workers of a compose
# cluster whose links are shaped (tc tbf in each worker), against the rate each was given;
# worker 2 at its own rate. With --check-network, horovodrun --check-network on the same cluster.
# Needs the images (make images), Compose v2 and iperf3 (scripts/install-prereqs.sh).
#   scripts/bench_shaped_links.sh [--check-network] [RATE [RATE_2]]    (400mbit 200mbit)
set -euo pipefail
cd "$(dirname "$0")/.."
source versions.env
source scripts/iperf_lib.sh
check=
[ "${1:-}" = --check-network ] && check=1 && shift
rate=${1:-400mbit} rate2=${2:-200mbit}
project=hvdshaped
export HOROVOD_IMAGE_TAG=${IMAGE_TAG:-$HOROVOD_VERSION-cpu} HOROVOD_CLUSTER_COMMAND="sleep infinity" \
       HOROVOD_LINK_RATE=$rate HOROVOD_LINK_RATES=2=$rate2
compose=(docker compose -f compose/compose.yaml -f compose/compose.shaped.yaml -p $project)
cleanup() {
  iperf_stop $project-worker-1 5203
  iperf_stop $project-worker-2 5203
  "${compose[@]}" down -v -t 1 >/dev/null 2>&1 || true
}
trap cleanup EXIT
cleanup

"${compose[@]}" up -d --wait --scale worker=2 >/dev/null 2>&1
scripts/cluster_ps.sh $project
iperf_serve $project-worker-1 5203
iperf_serve $project-worker-2 5203
for pair in "1 2" "2 1"; do
  read -r src dst <<<"$pair"
  got=$(iperf_mbits $project-worker-$src $project-worker-$dst 5203)
  # The sender's rate as tc holds it (bytes/s in tc's JSON).
  bps=$(docker exec $project-worker-$src tc -j qdisc show dev eth0 |
    python3 -c "import json, sys; print(json.load(sys.stdin)[0]['options']['rate'] * 8)")
  python3 -c "print(f'raw TCP worker-$src -> worker-$dst (iperf3, 5 s): $got Mbit/s of' \
    f' {$bps / 1e6:g} Mbit/s shaped, {$got / ($bps / 1e6):.2f}')"
done
if [ -n "$check" ]; then
  # The bandwidth matrix, the links, the interfaces and the verdict of its report.
  docker exec $project-launcher-1 horovodrun --check-network 2>&1 |
    awk 'BEGIN { n = -1 } /^bandwidth/ { n = 3 } /^interfaces/ { n = 2 } n-- >= 0 || /^links|^verdict/'
fi
