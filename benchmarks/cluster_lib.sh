# Raw TCP between two containers, the physical limit the cluster benchmarks (bench_cluster.sh,
# bench_hierarchical.sh) print beside the allreduce: iperf3 from the host, run inside the
# containers' network namespaces with nsenter, so the images need no iperf3. Source this file;
# needs root and iperf3 on the host (scripts/install-prereqs.sh).

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
