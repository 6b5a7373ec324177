#!/usr/bin/env bash
# `horovodrun --check-network` on a compose cluster of N workers (default 2; 1 slot each),
# next to iperf3 between the same containers (one stream, one way, 5 s, for every ordered
# pair; then every worker to the next all at once, as a ring keeps the links), the ratio
# doctor / iperf3 for each link, and the engine's 64 MiB allreduce against the slowest link
# alone and at once.  Needs the images, Compose v2, iperf3.
#   scripts/bench_network_check.sh [WORKERS] [extra --check-network flags]
set -euo pipefail
cd "$(dirname "$0")/.."
source versions.env
workers=${1:-2}; shift || true
project=hvdnetcheck
export HOROVOD_IMAGE_TAG=${IMAGE_TAG:-$HOROVOD_VERSION-cpu} HOROVOD_SLOTS_PER_WORKER=1 \
       HOROVOD_CLUSTER_COMMAND="sleep infinity"
compose=(docker compose -f compose/compose.yaml -p $project)
cleanup() { "${compose[@]}" down -v -t 1 >/dev/null 2>&1 || true; pkill -f "iperf3 -s -p 5202" || true; }
trap cleanup EXIT
cleanup
"${compose[@]}" up -d --wait --scale worker="$workers" >/dev/null 2>&1

echo "== horovodrun --check-network, $workers workers, 1 rank each"
report=$(mktemp)
docker exec $project-launcher-1 horovodrun --check-network --check-seconds 2 "$@" 2>&1 | tee "$report"

echo "== iperf3, one stream one way, 5 s"
declare -A pid ip
for i in $(seq 1 "$workers"); do
  w=$project-worker-$i
  pid[$w]=$(docker inspect -f '{{.State.Pid}}' "$w")
  ip[$w]=$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$w")
  nsenter -t "${pid[$w]}" -n iperf3 -s -p 5202 -D
done
sleep 0.5
pairs=$(mktemp)
for i in $(seq 1 "$workers"); do for j in $(seq 1 "$workers"); do
  [ "$i" = "$j" ] && continue
  a=$project-worker-$i; b=$project-worker-$j
  g=$(nsenter -t "${pid[$a]}" -n iperf3 -c "${ip[$b]}" -p 5202 -t 5 -J \
      | python3 -c "import json,sys; print(json.load(sys.stdin)['end']['sum_received']['bits_per_second'] / 8e9)")
  printf '%s %s %.3f\n' "$a" "$b" "$g" | tee -a "$pairs"
done; done
echo "== iperf3 all at once, each worker to the next (the ring's links), one stream each, 5 s"
ring=$(mktemp -d)
for i in $(seq 1 "$workers"); do
  a=$project-worker-$i; b=$project-worker-$(( i % workers + 1 ))
  nsenter -t "${pid[$a]}" -n iperf3 -c "${ip[$b]}" -p 5202 -t 5 -J > "$ring/$i.json" &
done
wait
for i in $(seq 1 "$workers"); do
  a=$project-worker-$i; b=$project-worker-$(( i % workers + 1 ))
  g=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['end']['sum_received']['bits_per_second'] / 8e9)" "$ring/$i.json")
  printf '%s %s %.3f\n' "$a" "$b" "$g" | tee -a "$ring/all"
done
python3 - "$report" "$pairs" "$ring/all" <<'PY'
import re
import sys
lines = open(sys.argv[1]).read().splitlines()
i = next(k for k, l in enumerate(lines) if l.startswith("bandwidth, GB/s"))
cols = lines[i + 1].split()
cells = {}
for l in lines[i + 2:i + 2 + len(cols)]:
    row, *vals = l.split()
    cells.update({(row, c): float(v) for c, v in zip(cols, vals) if v != "-"})
for l in open(sys.argv[2]):
    a, b, g = l.split()
    d = cells.get((a, b))
    print(f"{a} -> {b}: doctor {d:.2f} GB/s, iperf3 {float(g):.2f} GB/s, ratio {d / float(g):.2f}")
alone = min(float(l.split()[2]) for l in open(sys.argv[2]))
at_once = min(float(l.split()[2]) for l in open(sys.argv[3]))
busbw = float(re.search(r"^ +64 MiB: +[0-9.]+ us +([0-9.]+) GB/s$", "\n".join(lines), re.M)[1])
print(f"engine 64 MiB {busbw:.2f} GB/s bus bandwidth: {busbw / alone:.2f} of the slowest link "
      f"alone (iperf3 {alone:.2f} GB/s), {busbw / at_once:.2f} of the slowest at once "
      f"(iperf3 {at_once:.2f} GB/s)")
PY
rm -rf "$report" "$pairs" "$ring"
