#!/usr/bin/env bash
# Scaling on shaped links (issue 43, part 3, first figures): the synthetic benchmark
# (examples/tensorflow2_synthetic_benchmark.py, MobileNetV2, batch 32 of 32x32, one thread per
# rank, as docs/benchmarks.md's overhead figures) on W workers x 1 slot whose links run at each
# RATE, with --compare-no-comm: the same ranks time blocks with and without gradient
# communication, so images/s per rank with it over without is the scaling efficiency against
# one worker's compute on this machine.
# After each run, images/s per rank against one worker alone, and what the link predicts: the
# gradients' bytes (the model's trainable float32 parameters) over a ring of W ranks at the rate
# tc holds, against the compute step measured without communication: the efficiency with no
# overlap of backward and allreduce, and with full overlap. `make plots` draws docs/bench/shaped-scaling*.txt against the link rate.
#   scripts/bench_shaped_scaling.sh [WORKERS [RATE...]]      (default 2, 400mbit 1gbit)
set -euo pipefail
cd "$(dirname "$0")/.."
source versions.env
workers=${1:-2}
shift || true
rates=("$@")
((${#rates[@]} > 0)) || rates=(400mbit 1gbit)
project=hvdshapedscale
export HOROVOD_IMAGE_TAG=${IMAGE_TAG:-$HOROVOD_VERSION-cpu} HOROVOD_SLOTS_PER_WORKER=1 \
       HOROVOD_CLUSTER_COMMAND="sleep infinity" HOROVOD_LINK_RATES=
compose=(docker compose -f compose/compose.yaml -f compose/compose.shaped.yaml -p $project)
out=$(mktemp)
trap '"${compose[@]}" down -v -t 1 >/dev/null 2>&1 || true; rm -f "$out"' EXIT
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
"${compose[@]}" up -d --wait --scale worker=1 >/dev/null 2>&1
alone=$(docker exec $project-launcher-1 "${bench[@]}" 2>&1 |
  sed -n 's/^Img\/sec per CPU: \([0-9.]*\) .*/\1/p')
echo "== 1 worker x 1 slot alone: Img/sec per CPU: ${alone:?no Img/sec line from one worker}"
for rate in "${rates[@]}"; do
  export HOROVOD_LINK_RATE=$rate
  "${compose[@]}" down -v -t 1 >/dev/null 2>&1 || true
  "${compose[@]}" up -d --wait --scale worker="$workers" >/dev/null 2>&1
  rate_bps=$(docker exec $project-worker-1 tc -j qdisc show dev eth0 |
    python3 -c "import json, sys; print(json.load(sys.stdin)[0]['options']['rate'])")
  echo "== $workers workers x 1 slot, links at $rate ($(python3 -c "print(f'{$rate_bps / 1e9:.4f}')") GB/s)"
  docker exec $project-launcher-1 "${bench[@]}" --compare-no-comm 2>&1 |
    grep -v '^horovodrun: \|^  ok \|^  network:\|^\[horovod summary\]\|^WARNING: All log messages\|^I0000 ' |
    tee "$out"
  python3 - "$out" "$rate_bps" "$workers" "$params" "$alone" <<'PY'
import re, sys
text, rate, n, params = open(sys.argv[1]).read(), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
alone = float(sys.argv[5])
m = re.search(r"^Img/sec per CPU: ([0-9.]+) .* ([0-9.]+) \+-[0-9.]+ without$", text, re.M)
eff = re.search(r"scaling efficiency ([0-9.]+) %", text)
if not m or not eff:
    sys.exit("bench_shaped_scaling: no Img/sec or scaling efficiency line in the output")
step = 32 / float(m.group(2))  # seconds per batch of 32 without communication
comm = params * 4 * 2 * (n - 1) / n / rate  # the ring's bytes on each link at the shaped rate
print(f"== predicted from the link: {params * 4 / 1e6:.1f} MB of gradients, ring of {n} at "
      f"{rate / 1e9:.4f} GB/s: allreduce {comm * 1e3:.0f} ms, compute step {step * 1e3:.0f} ms; "
      f"efficiency without overlap {step / (step + comm):.1%}, with full overlap "
      f"{min(1.0, step / comm):.1%}; measured {float(eff.group(1)):.1f} %")
with_comm = float(m.group(1))
print(f"== against one worker alone ({alone:.1f} img/s): {with_comm / alone:.1%} per rank "
      f"(without communication these ranks ran {float(m.group(2)) / alone:.1%} of it)")
PY
done
