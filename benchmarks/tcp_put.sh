#!/usr/bin/env bash
# Open MPI's TCP transport on a shaped link, without containers or images (issue 43): two
# network namespaces joined by a veth pair whose both ends send through `tc tbf` at RATE, one
# rank in each (mpirun starts an orted in each namespace through a one-line rsh agent), and
# benchmarks/tcp_exchange.py under each btl_tcp setting compared in docs/shaped-links.md:
#   default            the TCP transport as Open MPI ships it (emulated RDMA put)
#   no put             btl_tcp_flags without put: what images/mpi sets
#   put in 128 KiB     put kept, its fragments cut to max_send_size
# (btl_tcp_links 4, four connections per pair, hung in connection setup here: not in the list.)
# Needs root (ip netns, tc), iperf3 and the host's Open MPI + build/venv (install-prereqs.sh).
#   benchmarks/tcp_put.sh [RATE]      (default 400mbit; "none": unshaped veth)
set -euo pipefail
cd "$(dirname "$0")/.."
rate=${1:-400mbit}
python=${PYTHON:-$PWD/build/venv/bin/python}
lab=
cleanup() {
  ip netns del hvdlab1 2>/dev/null || true
  ip netns del hvdlab2 2>/dev/null || true
  ip link del hvdlabc1 2>/dev/null || true
  ip link del hvdlabc2 2>/dev/null || true
  [[ -z $lab ]] || rm -rf "$lab"
}
trap cleanup EXIT
cleanup
lab=$(mktemp -d)
# The data link between the two namespaces (shaped), and one unshaped link from each to the
# host for mpirun's own traffic (its daemons call back to it).
ip netns add hvdlab1 && ip netns add hvdlab2
ip link add hvdlabv1 netns hvdlab1 type veth peer name hvdlabv2 netns hvdlab2
for n in 1 2; do
  ip -n hvdlab$n addr add 10.231.0.$n/24 dev hvdlabv$n
  ip -n hvdlab$n link set lo up && ip -n hvdlab$n link set hvdlabv$n up
  if [[ $rate != none ]]; then
    # The bucket: 10 ms at the rate, as compose/shape-link.sh's default.
    bytes=$(python3 -c "import re; m = re.fullmatch(r'(\d+)([kmg])bit', '$rate'); \
      print(int(m[1]) * {'k': 1e3, 'm': 1e6, 'g': 1e9}[m[2]] / 8 // 100)")
    ip netns exec hvdlab$n tc qdisc add dev hvdlabv$n root tbf rate "$rate" burst "$bytes" latency 20ms
  fi
  ip link add hvdlabc$n type veth peer name hvdlabh$n netns hvdlab$n
  ip addr add 10.232.$n.254/24 dev hvdlabc$n && ip link set hvdlabc$n up
  ip -n hvdlab$n addr add 10.232.$n.1/24 dev hvdlabh$n && ip -n hvdlab$n link set hvdlabh$n up
done
printf '#!/bin/bash\nhost=$1; shift; exec ip netns exec "$host" bash -c "$*"\n' >"$lab/agent"
chmod +x "$lab/agent"
ip netns exec hvdlab2 iperf3 -s -1 -D -p 5299 >/dev/null && sleep 0.5
echo "== link shaped at $rate; raw TCP 1 -> 2 (iperf3, 3 s):" \
  "$(ip netns exec hvdlab1 iperf3 -c 10.231.0.2 -p 5299 -t 3 -J |
     python3 -c 'import json, sys; d = json.load(sys.stdin)["end"]["sum_received"]
print("%.4f GB/s" % (d["bits_per_second"] / 8e9))')"
settings=("default|" "no put|--mca btl_tcp_flags send,inplace,need-ack,need-csum,hetero-rdma"
          "put in 128 KiB|--mca btl_tcp_rdma_pipeline_frag_size 131072")
for pattern in "32 1024 2 both" "32 16384 4 both" "32 32768 1 both" "32 1024 2 one"; do
  for s in "${settings[@]}"; do
    label=${s%%|*} args=${s#*|}
    # shellcheck disable=SC2086  # args: several words
    out=$(timeout 60 mpirun --allow-run-as-root -np 2 --host hvdlab1:1,hvdlab2:1 --mca plm_rsh_agent "$lab/agent" \
      --mca plm_rsh_no_tree_spawn 1 --mca btl tcp,self --mca btl_tcp_if_include 10.231.0.0/24 \
      --mca oob_tcp_if_include 10.232.0.0/16 $args \
      "$python" "$PWD/benchmarks/tcp_exchange.py" $pattern 2>&1 | tail -1) ||
      out="$pattern: did not finish within 60 s (Open MPI's connection setup hung at times here)"
    printf '%-15s %s\n' "$label" "$out"
  done
done
