#!/usr/bin/env bash
# Benchmarks on a compose cluster whose links are shaped (tc tbf in each worker; issue 43,
# docs/shaped-links.md), one subcommand per measurement, each in one run:
#
#   benchmarks/shaped.sh links [--check-network] [RATE [RATE_2]]      (400mbit 200mbit)
# What raw TCP carries between two workers against the rate each was given, worker 2 at its own
# rate; with --check-network, horovodrun --check-network on the same cluster.
#
#   benchmarks/shaped.sh allreduce WORKERS SLOTS [RATE [SIZES]]       (400mbit, 4K,1M,64M)
#   1. raw TCP worker-2 -> worker-1 through the same shaper (iperf3 from the host);
#   2. benchmarks/allreduce.py --sweep-only, flat (HOROVOD_HIERARCHICAL_ALLREDUCE=0): engine,
#      bare ring and MPI_Allreduce interleaved; with S > 1 also hierarchical (the default, auto);
#   3. per launch, the host's CPU busy share (both cores, /proc/stat) and the bytes each worker's
#      shaper sent (tc -s), so that a figure shows whether the link or the cores were the limit;
#   4. per size: engine bus bandwidth / the shaped rate, / iperf3, and hierarchical / flat.
# RANK_ENV="VAR=value ...": more environment for the ranks (horovodrun -x), e.g.
# HOROVOD_DATA_WAIT_SPIN_US=100000000 (poll all the time, as before the naps).
# TRIALS: interleaved trials per size (default 3; allreduce.py's own default is 5).
# OP=allgather: benchmarks/allgather.py --sweep instead (sizes per rank; engine against
# MPI_Allgather), flat = HOROVOD_HIERARCHICAL_ALLGATHER=0 against hierarchical (auto).
#
#   benchmarks/shaped.sh transports WORKERS SLOTS [RATE [SIZES]]      (400mbit, 4K,16M,64M)
# The engine's two transports (issue 56): raw TCP as above, then benchmarks/transports.py in the
# launcher: horovodrun (MPI) and horovodrun --gloo (the engine's TCP transport) interleaved, flat
# and, with S > 1, hierarchical; per size the TCP transport's bus bandwidth / the shaped rate,
# and / MPI's. TRIALS: interleaved trials per variant (default 3).
#
#   benchmarks/shaped.sh scaling [WORKERS [RATE...]]                  (default 2, 400mbit 1gbit)
# The synthetic benchmark (examples/tensorflow2_synthetic_benchmark.py, MobileNetV2, batch 32 of
# 32x32, one thread per rank, as docs/benchmarks.md's overhead figures) on W workers x 1 slot
# whose links run at each RATE, with --compare-no-comm: the same ranks time blocks with and
# without gradient communication, so images/s per rank with it over without is the scaling
# efficiency against one worker's compute on this machine. After each run, images/s per rank
# against one worker alone, and what the link predicts: the gradients' bytes (the model's
# trainable float32 parameters) over a ring of W ranks at the rate tc holds, against the compute
# step measured without communication: the efficiency with no overlap of backward and
# allreduce, and with full overlap. `make plots` draws docs/bench/shaped-scaling*.txt.
#
# Needs the images (make images), Compose v2 and iperf3 (scripts/install-prereqs.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source versions.env
source benchmarks/cluster_lib.sh

links() {
  local check= rate rate2 project=hvdshaped pair src dst got bps
  [ "${1:-}" = --check-network ] && check=1 && shift
  rate=${1:-400mbit} rate2=${2:-200mbit}
  export HOROVOD_LINK_RATE=$rate HOROVOD_LINK_RATES=2=$rate2
  bench_compose $project shaped
  trap "iperf_stop $project-worker-1 5203; iperf_stop $project-worker-2 5203; cluster_down" EXIT
  iperf_stop $project-worker-1 5203
  iperf_stop $project-worker-2 5203
  cluster_down
  cluster_up 2
  scripts/cluster_ps.sh $project
  iperf_serve $project-worker-1 5203
  iperf_serve $project-worker-2 5203
  for pair in "1 2" "2 1"; do
    read -r src dst <<<"$pair"
    got=$(iperf_mbits $project-worker-$src $project-worker-$dst 5203)
    bps=$(($(shaped_rate_bps $project-worker-$src) * 8))
    python3 -c "print(f'raw TCP worker-$src -> worker-$dst (iperf3, 5 s): $got Mbit/s of' \
      f' {$bps / 1e6:g} Mbit/s shaped, {$got / ($bps / 1e6):.2f}')"
  done
  if [ -n "$check" ]; then
    # The bandwidth matrix, the links, the interfaces and the verdict of its report.
    docker exec $project-launcher-1 horovodrun --check-network 2>&1 |
      awk 'BEGIN { n = -1 } /^bandwidth/ { n = 3 } /^interfaces/ { n = 2 } n-- >= 0 || /^links|^verdict/'
  fi
}

# shaped_cluster PROJECT WORKERS SLOTS RATE: the bench cluster at RATE, up, and its header.
shaped_cluster() {
  local project=$1 workers=$2 slots=$3 rate=$4
  export HOROVOD_SLOTS_PER_WORKER=$slots HOROVOD_LINK_RATE=$rate HOROVOD_LINK_RATES=
  bench_compose "$project" shaped bench
  trap "iperf_stop $project-worker-1 5204; cluster_down" EXIT
  iperf_stop "$project-worker-1" 5204
  cluster_down
  cluster_up "$workers"
  shaped_header "$project" "$workers" "$slots" "$rate" 5204
}

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
sweep() {  # $1: output file, $2: label; the rest: env for the ranks
  local out=$1 label=$2 b0 t0 b1 t1 s0 s1
  shift 2
  read -r b0 t0 < <(busy)
  s0=$(sent)
  local start=$SECONDS
  local extra=() kv
  for kv in ${RANK_ENV:-}; do extra+=(-e "$kv"); done
  docker exec "$@" "${extra[@]}" $project-launcher-1 horovodrun python "${program[@]}" \
    --sizes "$sizes" --trials "${TRIALS:-3}" 2>&1 | without_launch_chatter | tee "$out"
  read -r b1 t1 < <(busy)
  s1=$(sent)
  python3 -c "print(f'== $label: host CPU busy {100 * ($b1 - $b0) / ($t1 - $t0):.0f} % of $(nproc)' \
    f' cores over {$SECONDS - $start} s; the workers\' shapers sent {($s1 - $s0) / 1e6:.0f} MB')"
}

allreduce() {
  workers=${1:?usage: shaped.sh allreduce WORKERS SLOTS [RATE [SIZES]]}
  local slots=${2:?} rate=${3:-400mbit} op=${OP:-allreduce} knob flat hier
  sizes=${4:-4K,1M,64M} project=hvdshapedar
  case $op in
    allreduce) program=(/bench/allreduce.py --sweep-only) knob=HOROVOD_HIERARCHICAL_ALLREDUCE ;;
    allgather) program=(/bench/allgather.py --sweep) knob=HOROVOD_HIERARCHICAL_ALLGATHER ;;
    *) echo "OP=$op: expected allreduce or allgather" >&2; exit 2 ;;
  esac
  shaped_cluster $project "$workers" "$slots" "$rate"
  flat=$(mktemp) hier=$(mktemp)
  echo "== $op, flat ring ($knob=0)"
  sweep "$flat" flat -e $knob=0
  if [ "$slots" -gt 1 ]; then
    echo "== $op, hierarchical (auto: several hosts of several ranks)"
    sweep "$hier" hierarchical
  fi
  python3 benchmarks/shaped_report.py "$op" "$flat" "$hier" "$rate_bps" "$tcp" "$((workers * slots))"
  rm -f "$flat" "$hier"
}

transports() {
  local workers=${1:?usage: shaped.sh transports WORKERS SLOTS [RATE [SIZES]]}
  local slots=${2:?} rate=${3:-400mbit} sizes=${4:-4K,16M,64M} project=hvdshapedtr
  shaped_cluster $project "$workers" "$slots" "$rate"
  variant() {  # $1: label; the rest: --env VAR=value for the ranks
    local label=$1
    shift
    echo "== $label"
    docker exec $project-launcher-1 python /bench/transports.py --np $((workers * slots)) \
      --sizes "$sizes" --trials "${TRIALS:-3}" --latency-ops 500 "$@" | tee /tmp/$project-$label.txt
    python3 benchmarks/shaped_report.py transports /tmp/$project-$label.txt "$rate_bps"
  }
  variant flat --env HOROVOD_HIERARCHICAL_ALLREDUCE=0
  if [ "$slots" -gt 1 ]; then variant hierarchical; fi
}

scaling() {
  local workers=${1:-2} rates params alone rate rate_bps project=hvdshapedscale out bench
  shift || true
  rates=("$@")
  ((${#rates[@]} > 0)) || rates=(400mbit 1gbit)
  export HOROVOD_SLOTS_PER_WORKER=1 HOROVOD_LINK_RATES=
  bench_compose $project shaped
  out=$(mktemp)
  trap "cluster_down; rm -f $out" EXIT
  bench=(horovodrun python /opt/horovod/examples/tensorflow2_synthetic_benchmark.py
         --model MobileNetV2 --batch-size 32 --image-size 32 --threads 1 --num-iters 10)
  # The model's trainable parameters, from the image's own Keras (as the benchmark builds it).
  params=$(docker run --rm "horovod:$HOROVOD_IMAGE_TAG" python -c "
import os; os.environ['TF_CPP_MIN_LOG_LEVEL'] = '3'
import keras
m = keras.applications.MobileNetV2(weights=None, input_shape=(32, 32, 3), classes=1000)
print(sum(int(w.shape.num_elements()) for w in m.trainable_weights))" 2>/dev/null | tail -1)
  # One worker alone (no links to cross): the figure issue 43 scales against. On a machine with
  # fewer cores than the workers, the workers' compute also shares the cores, so the comparison
  # with the same ranks without communication (--compare-no-comm) is printed beside it.
  export HOROVOD_LINK_RATE=${rates[0]}
  cluster_up 1
  alone=$(docker exec $project-launcher-1 "${bench[@]}" 2>&1 |
    sed -n 's/^Img\/sec per CPU: \([0-9.]*\) .*/\1/p')
  echo "== 1 worker x 1 slot alone: Img/sec per CPU: ${alone:?no Img/sec line from one worker}"
  for rate in "${rates[@]}"; do
    export HOROVOD_LINK_RATE=$rate
    cluster_down
    cluster_up "$workers"
    rate_bps=$(shaped_rate_bps $project-worker-1)
    echo "== $workers workers x 1 slot, links at $rate ($(python3 -c "print(f'{$rate_bps / 1e9:.4f}')") GB/s)"
    docker exec $project-launcher-1 "${bench[@]}" --compare-no-comm 2>&1 |
      grep -v '^horovodrun: \|^  ok \|^  network:\|^\[horovod summary\]\|^WARNING: All log messages\|^I0000 ' |
      tee "$out"
    python3 benchmarks/shaped_report.py scaling "$out" "$rate_bps" "$workers" "$params" "$alone"
  done
}

case ${1:-} in
  links | allreduce | transports | scaling) "$@" ;;
  *) echo "usage: benchmarks/shaped.sh links|allreduce|transports|scaling ... (see its header)" >&2; exit 2 ;;
esac
