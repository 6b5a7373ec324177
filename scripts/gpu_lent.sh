#!/usr/bin/env bash
# Everything issue 55 asks of a lent GPU machine, in one call, nothing fetched (the machine reaches
# nothing): the NCCL build of the engine, scripts/gpu_check.sh through CuPy and then torch (every
# collective against NumPy, the odd element counts of tests/gpu/odd_counts.py, horovod.torch on
# CUDA tensors, the bench against NCCL's own call through each library), and upstream Horovod's
# test/parallel/test_torch.py (v0.28.1, unchanged) at np 1 on the GPU, then where a GPU op's time
# goes (the profile stage: benchmarks/gpu_latency.py, gpu_torch_profile.py). Every output goes to
# OUT_DIR (default docs/bench/gpu-lent-<date>), with SUMMARY.txt last.
#
#   scripts/gpu_lent.sh [UPSTREAM_TEST_DIR [WHEEL_DIR]]
#
# UPSTREAM_TEST_DIR: upstream's test/ folder (holds parallel/test_torch.py and utils/common.py);
# default build/upstream/test. WHEEL_DIR: the wheels upstream's tests import that the machine may
# lack (`mock`, `cloudpickle`; `pytest` where missing), installed offline into a folder of their
# own on PYTHONPATH, never into the machine's Python; default build/upstream. Both come with the
# working tree (the run tool's carry: build/upstream, 1.5 MB). Prepared with network, e.g.:
#   git -C /tmp clone -b v0.28.1 --depth 1 https://github.com/horovod/horovod &&
#     cp -r /tmp/horovod/test build/upstream/test &&
#     pip download mock cloudpickle --no-deps -d build/upstream
#
# Environment: PYTHON (default python3: the one with torch and CuPy), MPIRUN (mpirun), OUT_DIR,
# STAGES (default "info cupy torch upstream profile"), UPSTREAM_TIMEOUT (seconds, default 420: a hang
# ends there, inside the run tool's 10 minutes), UPSTREAM_K (a pytest -k expression: "not join"), and what
# gpu_check.sh reads (CC, CXX, HOROVOD_CUDA_HOME, HOROVOD_NCCL_HOME, HVD_BENCH_MAX_BYTES). The
# first gpu_check of a call builds the engine into GPU_LENT_DIR (default build/gpu-lent), the
# next reuse it; REUSE_BUILD=1 reuses one a previous call left there.
#
# Through the run tool (one command at most 10 minutes; its $OUT comes back): two calls on the
# warm machine, carry ["build/upstream"], the second reusing the first's build:
#   OUT_DIR=$OUT/gpu-lent STAGES="info cupy" scripts/gpu_lent.sh
#   OUT_DIR=$OUT/gpu-lent-2 STAGES="torch upstream profile" REUSE_BUILD=1 scripts/gpu_lent.sh
# then copy both folders from files_at into docs/bench/.
# Exit status: 0 when every stage that ran passed (upstream's test counts are reported, not
# judged: docs/torch.md's differences table lists the failures expected there).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-python3}
# A relative path to a venv's python must stay valid after the cd's below (not resolved: the
# venv's symlink is what makes it the venv's).
case $PYTHON in */*) PYTHON="$(cd "$(dirname "$PYTHON")" && pwd)/$(basename "$PYTHON")" ;; esac
MPIRUN=${MPIRUN:-mpirun}
UPSTREAM=$(cd "${1:-$ROOT/build/upstream/test}" 2>/dev/null && pwd || echo "${1:-$ROOT/build/upstream/test}")
WHEELS=${2:-$ROOT/build/upstream}
OUT_DIR=${OUT_DIR:-$ROOT/docs/bench/gpu-lent-$(date -u +%Y%m%d-%H%M)}
STAGES=${STAGES:-info cupy torch upstream profile}
GPU_LENT_DIR=${GPU_LENT_DIR:-$ROOT/build/gpu-lent}
mkdir -p "$OUT_DIR" "$GPU_LENT_DIR"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
SUMMARY="$OUT_DIR/SUMMARY.txt"
: >"$SUMMARY"
FAILED=0
say() { echo "gpu_lent: $*" | tee -a "$SUMMARY"; }
has_stage() { case " $STAGES " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
importable() { "$PYTHON" -c "import $1" >/dev/null 2>&1; }
# mpirun's arguments for one rank of the stages below (Open MPI: as root, PYTHONPATH passed on).
ONE_RANK_ARGS=()
if "$MPIRUN" --version 2>&1 | grep -q "Open MPI"; then
  [ "$(id -u)" = 0 ] && ONE_RANK_ARGS+=(--allow-run-as-root)
  ONE_RANK_ARGS+=(-x PYTHONPATH --oversubscribe)
fi

say "$(date -u +%FT%TZ) on $(hostname); stages: $STAGES; output in ${OUT_DIR#"$ROOT"/}"

if has_stage info; then
  {
    nvidia-smi -L 2>&1
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1
    "$PYTHON" -c 'import sys; print("python", sys.version.split()[0])'
    "$PYTHON" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", ".".join(map(str, torch.cuda.nccl.version())))' 2>&1
    "$PYTHON" -c 'import cupy; print("cupy", cupy.__version__)' 2>&1
    "$PYTHON" -c 'import nvidia.nccl, os; print("nvidia-nccl wheel at", list(nvidia.nccl.__path__)[0])' 2>&1
    command -v nvcc && nvcc --version | tail -2
    "$MPIRUN" --version 2>&1 | head -1
  } >"$OUT_DIR/machine.txt" 2>&1
  say "machine: $(head -1 "$OUT_DIR/machine.txt")"
fi

# gpu_check through one library: the first run of this call builds into GPU_LENT_DIR (a build
# left by an earlier call may be of other sources), later ones reuse it.
REUSE_NOW=${REUSE_BUILD:-0}
check() {  # check LIB
  local lib=$1 log="$OUT_DIR/gpu-check-$1.txt"
  if ! importable "$lib"; then
    say "gpu_check $lib: skipped ($PYTHON cannot import $lib)"
    return
  fi
  [ "$REUSE_NOW" = 1 ] || rm -rf "$GPU_LENT_DIR/site" "$GPU_LENT_DIR/cmake"
  HVD_DEVICE_LIB=$lib PYTHON=$PYTHON MPIRUN=$MPIRUN GPU_CHECK_DIR="$GPU_LENT_DIR" REUSE=1 \
    bash "$ROOT/scripts/gpu_check.sh" >"$log" 2>&1
  local rc=$?
  echo "rc=$rc" >>"$log"
  [ $rc = 0 ] || FAILED=1
  grep -q '^gpu_check: no GPU visible' "$log" && FAILED=1  # the point of a lent machine
  [ -f "$GPU_LENT_DIR/site/horovod/libhorovod_core.so" ] && REUSE_NOW=1
  say "gpu_check $lib: rc $rc; $(grep -E '^gpu_check: (SUMMARY|FAIL|no GPU)' "$log" | tail -1)"
  grep -E '^gpu_check: (BENCH|BLOCKING)' "$log" | sed 's/^gpu_check: /    /' | tee -a "$SUMMARY"
}
if has_stage cupy; then check cupy; fi
if has_stage torch; then check torch; fi

# Upstream's test_torch.py at np 1, against the engine just built (its site first on PYTHONPATH),
# with the carried wheels unpacked into a folder of their own.
if has_stage upstream; then
  SITE="$GPU_LENT_DIR/site"
  LOG="$OUT_DIR/upstream-test_torch-np1.txt"
  if [ ! -f "$UPSTREAM/parallel/test_torch.py" ]; then
    FAILED=1
    say "upstream test_torch.py: FAILED (no $UPSTREAM/parallel/test_torch.py: carry upstream's test/ folder)"
  elif [ ! -f "$SITE/horovod/libhorovod_core.so" ]; then
    FAILED=1
    say "upstream test_torch.py: FAILED (no engine in $SITE: run the cupy or torch stage first)"
  else
    DEPS="$GPU_LENT_DIR/upstream-deps"
    rm -rf "$DEPS" && mkdir -p "$DEPS"
    shopt -s nullglob
    wheels=("$WHEELS"/*.whl)
    shopt -u nullglob
    if [ ${#wheels[@]} -gt 0 ]; then
      "$PYTHON" -m pip install --quiet --no-index --no-deps --target "$DEPS" "${wheels[@]}" \
        >"$OUT_DIR/upstream-deps.txt" 2>&1 || say "upstream: pip could not unpack ${wheels[*]} (see upstream-deps.txt)"
    fi
    K_ARGS=()
    [ -z "${UPSTREAM_K:-}" ] || K_ARGS=(-k "$UPSTREAM_K")
    # Upstream's tests import `common` from test/utils themselves; ours must not shadow theirs.
    (cd "$UPSTREAM/parallel" &&
      PYTHONPATH="$SITE:$DEPS${PYTHONPATH:+:$PYTHONPATH}" timeout "${UPSTREAM_TIMEOUT:-420}" \
        "$MPIRUN" "${ONE_RANK_ARGS[@]}" -np 1 "$PYTHON" -m pytest -v --color=no -p no:cacheprovider \
        --junitxml="$OUT_DIR/upstream-test_torch-np1.xml" "${K_ARGS[@]}" test_torch.py) \
      >"$LOG" 2>&1
    rc=$?
    echo "rc=$rc" >>"$LOG"
    # pytest's last line: "== 51 passed, 22 failed, 42 skipped in 80.1s ==".
    COUNTS=$(grep -E '^=+ .*(passed|failed|error).* in [0-9.]+s' "$LOG" | tail -1 | tr -d '=' | sed 's/^ *//')
    say "upstream test_torch.py np 1: rc $rc; ${COUNTS:-no pytest summary (see upstream-test_torch-np1.txt)}"
    grep -E '^(FAILED|ERROR) ' "$LOG" | sed 's/^/    /' | tee -a "$SUMMARY"
    [ -n "$COUNTS" ] || FAILED=1
  fi
fi

# Where a GPU op's time goes (issue 55, part 3), against the engine built above, one rank,
# unbound: the pieces of a 4 KiB op through CuPy (benchmarks/gpu_latency.py --pieces: a device
# array's description, an event, NCCL plus a sync, cProfile of 1000 calls) and the device
# activities of a 1 GiB allreduce through torch beside torch.distributed's
# (benchmarks/gpu_torch_profile.py: an extra copy or fill shows by name). Reported, not judged.
if has_stage profile; then
  SITE="$GPU_LENT_DIR/site"
  if [ ! -f "$SITE/horovod/libhorovod_core.so" ]; then
    FAILED=1
    say "profile: FAILED (no engine in $SITE: run the cupy or torch stage first)"
  else
    PROF_ARGS=("${ONE_RANK_ARGS[@]}")
    [ ${#ONE_RANK_ARGS[@]} -gt 0 ] && PROF_ARGS+=(--bind-to none)  # Open MPI's option
    profile() {  # profile NAME SCRIPT ARGS...: one rank, output to OUT_DIR/NAME.txt
      local name=$1
      shift
      (cd "$ROOT/benchmarks" && PYTHONPATH="$SITE:$ROOT${PYTHONPATH:+:$PYTHONPATH}" \
        timeout 240 "$MPIRUN" "${PROF_ARGS[@]}" -np 1 "$PYTHON" "$@") >"$OUT_DIR/$name.txt" 2>&1
      echo "rc=$?" >>"$OUT_DIR/$name.txt"
    }
    if importable cupy; then
      profile gpu-latency-cupy gpu_latency.py --pieces
      grep -E '^(GPULAT|PROFILE)' "$OUT_DIR/gpu-latency-cupy.txt" | sed 's/^/    /' | tee -a "$SUMMARY"
    fi
    if importable torch; then
      profile gpu-profile-torch gpu_torch_profile.py --trace "$OUT_DIR/torch-traces"
      grep '^PROF' "$OUT_DIR/gpu-profile-torch.txt" | sed 's/^/    /' | tee -a "$SUMMARY"
    fi
    say "profile: $(grep -h '^rc=' "$OUT_DIR"/gpu-latency-cupy.txt "$OUT_DIR"/gpu-profile-torch.txt 2>/dev/null | tr '\n' ' ')"
  fi
fi

say "done: exit $FAILED ($(date -u +%FT%TZ))"
exit $FAILED
