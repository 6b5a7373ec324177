# Raw TCP between two containers, the physical limit the cluster benchmarks (bench_cluster.sh,
# bench_hierarchical.sh) print beside the allreduce: iperf3 from the host, run inside the
# containers' network namespaces with nsenter, so the images need no iperf3. Source this file;
# needs root and iperf3 on the host (scripts/install-prereqs.sh).

# iperf_serve CONTAINER PORT: an iperf3 server (daemon) in CONTAINER's network namespace.
iperf_serve() {
  nsenter -t "$(docker inspect -f '{{.State.Pid}}' "$1")" -n iperf3 -s -p "$2" -D
  sleep 0.5
}

# iperf_gbs FROM TO PORT [--bidir]: GB/s that TO received from FROM in 5 s over one stream;
# with --bidir one stream each way at once, and the mean of the two directions.
iperf_gbs() {
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
print(f'{bps / 8e9:.2f}')"
}
