#!/usr/bin/env bash
# Allreduce on shaped links (issue 43, docs/shaped-links.md): a compose cluster of W workers x S
# slots whose links all run at RATE (tc tbf in each worker), in one run:
#   1. raw TCP worker-2 -> worker-1 through the same shaper (iperf3 from the host);
#   2. scripts/bench_allreduce.py --sweep-only, flat (HOROVOD_HIERARCHICAL_ALLREDUCE=0): engine,
#      bare ring and MPI_Allreduce interleaved; with S > 1 also hierarchical (the default, auto);
#   3. per launch, the host's CPU busy share (both cores, /proc/stat) and the bytes each worker's
#      shaper sent (tc -s), so that a figure shows whether the link or the cores were the limit;
#   4. per size: engine bus bandwidth / the shaped rate, / iperf3, and hierarchical / flat.
# Needs the images (make images), Compose v2 and iperf3 (scripts/install-prereqs.sh).
#   scripts/bench_shaped_allreduce.sh WORKERS SLOTS [RATE [SIZES]]    (400mbit, 4K,1M,64M)
# RANK_ENV="VAR=value ...": more environment for the ranks (horovodrun -x), e.g.
# HOROVOD_DATA_WAIT_SPIN_US=100000000 (poll all the time, as before the naps).
# TRIALS: interleaved trials per size (default 3; bench_allreduce.py's own default is 5).
# OP=allgather: scripts/bench_allgather_sweep.py instead (sizes per rank; engine against
# MPI_Allgather), flat = HOROVOD_HIERARCHICAL_ALLGATHER=0 against hierarchical (auto).
set -euo pipefail
cd "$(dirname "$0")/.."
source versions.env
source scripts/iperf_lib.sh
workers=${1:?usage: bench_shaped_allreduce.sh WORKERS SLOTS [RATE [SIZES]]} slots=${2:?}
rate=${3:-400mbit} sizes=${4:-4K,1M,64M}
project=hvdshapedar
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

# The rate as tc holds it, in bytes/s: the figure every ratio below is taken against.
rate_bps=$(docker exec $project-worker-1 tc -j qdisc show dev eth0 |
  python3 -c "import json, sys; print(json.load(sys.stdin)[0]['options']['rate'])")
iperf_serve $project-worker-1 5204
tcp=$(iperf_mbits $project-worker-2 $project-worker-1 5204)
iperf_stop $project-worker-1 5204
echo "== $workers workers x $slots slots on $(nproc) cores; links shaped at $rate" \
  "($(python3 -c "print(f'{$rate_bps / 1e9:.4f}')") GB/s); raw TCP worker-2 -> worker-1" \
  "(iperf3, 5 s): $tcp Mbit/s"

busy() {  # jiffies busy and total, all CPUs
  awk '/^cpu / { t = 0; for (i = 2; i <= NF; i++) t += $i; print t - $5 - $6, t }' /proc/stat
}
sent() {  # bytes every worker's shaper has sent so far
  local total=0 w b
  for w in $(seq 1 "$workers"); do
    b=$(docker exec $project-worker-$w tc -s -j qdisc show dev eth0 |
      python3 -c "import json, sys; print(json.load(sys.stdin)[0]['bytes'])")
    total=$((total + b))
  done
  echo $total
}
run() {  # $1: output file, $2: label; the rest: env for the ranks
  local out=$1 label=$2 b0 t0 b1 t1 s0 s1
  shift 2
  read -r b0 t0 < <(busy)
  s0=$(sent)
  local start=$SECONDS
  local extra=() kv
  for kv in ${RANK_ENV:-}; do extra+=(-e "$kv"); done
  docker exec "$@" "${extra[@]}" $project-launcher-1 horovodrun python "${program[@]}" \
    --sizes "$sizes" --trials "${TRIALS:-3}" 2>&1 | grep -v '^horovodrun: \|^  ok \|^  network:' | tee "$out"
  read -r b1 t1 < <(busy)
  s1=$(sent)
  python3 -c "print(f'== $label: host CPU busy {100 * ($b1 - $b0) / ($t1 - $t0):.0f} % of $(nproc)' \
    f' cores over {$SECONDS - $start} s; the workers\' shapers sent {($s1 - $s0) / 1e6:.0f} MB')"
}
op=${OP:-allreduce}
case $op in
  allreduce) program=(/bench/bench_allreduce.py --sweep-only) knob=HOROVOD_HIERARCHICAL_ALLREDUCE ;;
  allgather) program=(/bench/bench_allgather_sweep.py) knob=HOROVOD_HIERARCHICAL_ALLGATHER ;;
  *) echo "OP=$op: expected allreduce or allgather" >&2; exit 2 ;;
esac
flat=$(mktemp) hier=$(mktemp)
echo "== $op, flat ring ($knob=0)"
run "$flat" flat -e $knob=0
if [ "$slots" -gt 1 ]; then
  echo "== $op, hierarchical (auto: several hosts of several ranks)"
  run "$hier" hierarchical
fi
if [ "$op" = allgather ]; then
  python3 - "$flat" "$hier" "$rate_bps" "$tcp" <<'PY'
import re, sys
def rows(path):  # size label -> (engine GB/s, mpi GB/s, engine CPU/rank)
    pat = r"^ *(\d+ [KM]iB) \| +[0-9.]+ +([0-9.]+) \| +[0-9.]+ +([0-9.]+) \| +[0-9.]+ \| +([0-9.]+) +[0-9.]+$"
    return {m[1]: (float(m[2]), float(m[3]), float(m[4])) for m in re.finditer(pat, open(path).read(), re.M)}
flat, hier = rows(sys.argv[1]), rows(sys.argv[2])
rate, tcp = float(sys.argv[3]) / 1e9, float(sys.argv[4]) / 8e3
print(f"== allgather bus bandwidth (GB/s, per rank's size) against the shaped rate {rate:.4f} and raw TCP {tcp:.4f}")
for size, (e, m, ecpu) in flat.items():
    line = (f"{size:>8}: flat engine {e:.4f} = {e / rate:.2f} of the rate (CPU {ecpu:.2f}/rank);"
            f" MPI_Allgather {m:.4f} ({e / m:.2f}x)")
    if size in hier:
        h, hm, hcpu = hier[size]
        line += f"; hierarchical {h:.4f} = {h / e:.2f}x flat ({h / hm:.2f}x its MPI, CPU {hcpu:.2f}/rank)"
    print(line)
PY
  rm -f "$flat" "$hier"
  exit 0
fi
python3 - "$flat" "$hier" "$rate_bps" "$tcp" "$((workers * slots))" <<'PY'
import re, sys
n = int(sys.argv[5])
def rows(path):  # size -> bus bandwidth GB/s (engine, ring, mpi) from the times, engine's CPU
    pat = (r"^ *(\d+) ([KM])iB \| +([0-9.]+) +[0-9.]+ \| +([0-9.]+) +[0-9.]+ \| +([0-9.]+) "
           r".*\| +([0-9.]+) +[0-9.]+ +([0-9.]+)$")
    out = {}
    for m in re.finditer(pat, open(path).read(), re.M):
        nbytes = int(m.group(1)) << (10 if m.group(2) == "K" else 20)
        out[f"{m.group(1)} {m.group(2)}iB"] = tuple(
            nbytes * 2 * (n - 1) / n / (float(t) * 1e-6) / 1e9 for t in m.groups()[2:5]
        ) + (float(m.group(6)), float(m.group(7)))
    return out
flat, hier = rows(sys.argv[1]), rows(sys.argv[2])
rate, tcp = float(sys.argv[3]) / 1e9, float(sys.argv[4]) / 8e3
print(f"== bus bandwidth (GB/s) against the shaped rate {rate:.4f} and raw TCP {tcp:.4f}")
for size, (e, _, m, ecpu, mcpu) in flat.items():
    line = (f"{size:>8}: flat engine {e:.4f} = {e / rate:.2f} of the rate, {e / tcp:.2f} of TCP"
            f" (CPU {ecpu:.2f}/rank); MPI_Allreduce {m:.4f} ({e / m:.2f}x, CPU {mcpu:.2f}/rank)")
    if size in hier:
        h, hm, hcpu = hier[size][0], hier[size][2], hier[size][3]
        line += f"; hierarchical {h:.4f} = {h / e:.2f}x flat ({h / hm:.2f}x its MPI, CPU {hcpu:.2f}/rank)"
    print(line)
PY
rm -f "$flat" "$hier"
