# The plumbing the compose-cluster benchmarks share (benchmarks/cluster.sh, benchmarks/shaped.sh):
# the cluster's bring-up, the rate its shaped links run at, and raw TCP between two containers,
# the physical limit printed beside the collectives: iperf3 from the host, run inside the
# containers' network namespaces with nsenter, so the images need no iperf3. Source this file
# from the repository root after versions.env; needs the images (make images), Compose v2, root
# and iperf3 on the host (scripts/install-prereqs.sh).

# bench_compose PROJECT [shaped] [bench]: the compose command of a benchmark's cluster, in the
# array `compose`; shaped adds compose/compose.shaped.yaml (tc tbf in each worker), bench mounts
# benchmarks/ at /bench on every container (the ranks run on the workers). The workers idle
# until the benchmark execs into them.
bench_compose() {
  local project=$1 extra
  shift
  export HOROVOD_IMAGE_TAG=${IMAGE_TAG:-$HOROVOD_VERSION-cpu} HOROVOD_CLUSTER_COMMAND="sleep infinity"
  compose=(docker compose -f compose/compose.yaml)
  for extra in "$@"; do
    case $extra in
      shaped) compose+=(-f compose/compose.shaped.yaml) ;;
      bench) compose+=(-f benchmarks/cluster.compose.yaml) && export HOROVOD_BENCH_SCRIPTS=$PWD/benchmarks ;;
    esac
  done
  compose+=(-p "$project")
}

# cluster_up WORKERS: the cluster of bench_compose, up and healthy.
cluster_up() { "${compose[@]}" up -d --wait --scale worker="$1" >/dev/null 2>&1; }

# cluster_down: the cluster gone, volumes included (quietly: also when it never came up).
cluster_down() { "${compose[@]}" down -v -t 1 >/dev/null 2>&1 || true; }

# without_launch_chatter: horovodrun's preflight lines dropped from a benchmark's output.
without_launch_chatter() { grep -v '^horovodrun: \|^  ok \|^  network:'; }

# shaped_rate_bps CONTAINER: the rate its link is shaped at, as tc holds it, in bytes/s.
shaped_rate_bps() {
  docker exec "$1" tc -j qdisc show dev eth0 |
    python3 -c "import json, sys; print(json.load(sys.stdin)[0]['options']['rate'])"
}

# shaped_header PROJECT WORKERS SLOTS RATE PORT: sets rate_bps (the figure the ratios are taken
# against) and tcp (raw TCP worker-2 -> worker-1 through the same shaper, Mbit/s), and prints
# both with the layout.
shaped_header() {
  local project=$1 workers=$2 slots=$3 rate=$4 port=$5
  rate_bps=$(shaped_rate_bps "$project-worker-1")
  iperf_serve "$project-worker-1" "$port"
  tcp=$(iperf_mbits "$project-worker-2" "$project-worker-1" "$port")
  iperf_stop "$project-worker-1" "$port"
  echo "== $workers workers x $slots slots on $(nproc) cores; links shaped at $rate" \
    "($(python3 -c "print(f'{$rate_bps / 1e9:.4f}')") GB/s); raw TCP worker-2 -> worker-1" \
    "(iperf3, 5 s): $tcp Mbit/s"
}

# iperf_serve CONTAINER PORT: an iperf3 server (daemon) in CONTAINER's network namespace; its pid
# in a file, so that iperf_stop ends exactly it (it outlives the container otherwise).
iperf_serve() {
  local pidfile="${TMPDIR:-/tmp}/iperf3-$1-$2.pid"
  rm -f "$pidfile" # one left by a server ended otherwise (pkill) would stop iperf3 from starting
  nsenter -t "$(docker inspect -f '{{.State.Pid}}' "$1")" -n iperf3 -s -p "$2" -D -I "$pidfile"
  sleep 0.5
}

# iperf_stop CONTAINER PORT: end the server iperf_serve started.
iperf_stop() {
  local pidfile="${TMPDIR:-/tmp}/iperf3-$1-$2.pid"
  [ -s "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null
  rm -f "$pidfile"
}

# iperf_gbs FROM TO PORT [--bidir]: GB/s that TO received from FROM in 5 s over one stream;
# with --bidir one stream each way at once, and the mean of the two directions.
iperf_gbs() { _iperf_bps "$@" | python3 -c "print(f'{float(input()) / 8e9:.2f}')"; }

# iperf_mbits FROM TO PORT [--bidir]: the same in Mbit/s (shaped links: docs/shaped-links.md).
iperf_mbits() { _iperf_bps "$@" | python3 -c "print(f'{float(input()) / 1e6:.1f}')"; }

_iperf_bps() {
  local from=$1 to=$2 port=$3 ip
  shift 3
  ip=$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$to")
  nsenter -t "$(docker inspect -f '{{.State.Pid}}' "$from")" -n \
    iperf3 -c "$ip" -p "$port" -t 5 -J "$@" | python3 -c "
import json, sys
end = json.load(sys.stdin)['end']
bps = end['sum_received']['bits_per_second']
if 'sum_received_bidir_reverse' in end:
    bps = (bps + end['sum_received_bidir_reverse']['bits_per_second']) / 2
print(bps)"
}
