#!/usr/bin/env bash
# The NCCL path on whatever CUDA machine this runs on (issue 22), with nothing to install: builds
# the engine with NCCL (no TensorFlow) in a temporary folder from the machine's CUDA (nvcc /
# CUDA_HOME, or HOROVOD_CUDA_HOME) and NCCL (HOROVOD_NCCL_HOME, or the nvidia-nccl wheel the
# Python has), then runs through horovod.numpy's device-array path (CuPy, else torch):
#   1. every NCCL collective against NumPy (tests/gpu/device_checks.py collectives), then every
#      collective and dtype at odd element counts, 1 to 2^20 + 7 (tests/gpu/odd_counts.py), at
#      np = number of GPUs (NCCL wants one GPU per rank; one GPU: np 1);
#   2. the stall check: a 2-rank job where rank 1 never submits gets the named error (>= 2 GPUs);
#   3. two ranks both on GPU 0: each gets the error naming the ranks and the GPU (NCCL's own is
#      "invalid usage");
#   4. horovod.torch on CUDA tensors against the same calls on CPU tensors (where torch sees a GPU;
#      tests/gpu/torch_checks.py);
#   5. allreduce 4 KiB .. 1 GiB against NCCL's own call through the same library, same run;
# and prints one summary line. Without a visible GPU it says so and exits 0.
# Environment: PYTHON (default python3), MPIRUN (mpirun), HVD_DEVICE_LIB (cupy or torch),
# HVD_DEVICE_LIB=numpy: a dry run of the whole flow on host arrays at np DRY_NP (default 2), MPI
# standing in for NCCL in the bench (HVD_BENCH_MAX_BYTES caps its sizes): no GPU involved;
# KEEP=1 keeps the build folder; BUILD_ONLY=1 builds and reports the engine, GPU or not (tests/gpu
# checks the build path so on machines without a GPU); GPU_CHECK_DIR=DIR builds in DIR (kept)
# instead of a temporary folder, and with REUSE=1 takes the engine already built there (a second
# library's run after the first's: scripts/gpu_lent.sh).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-python3}
MPIRUN=${MPIRUN:-mpirun}
say() { echo "gpu_check: $*"; }

# GPUs as this process sees them (CUDA_VISIBLE_DEVICES applies), through the library the checks
# use; nvidia-smi only says whether a driver sees any at all.
read -r NGPU LIB < <("$PYTHON" - <<'EOF' 2>/dev/null || echo "0 none"
import os
order = [os.environ["HVD_DEVICE_LIB"]] if os.environ.get("HVD_DEVICE_LIB") else ["cupy", "torch"]
for name in order:
    try:
        if name == "cupy":
            import cupy
            try:
                n = cupy.cuda.runtime.getDeviceCount()
            except Exception:
                n = 0
        else:
            import torch
            n = torch.cuda.device_count()
        print(n, name)
        break
    except ImportError:
        continue
else:
    print(0, "none")
EOF
)
if [ "${HVD_DEVICE_LIB:-}" = numpy ]; then
  NGPU=${DRY_NP:-2} LIB=numpy
  say "DRY RUN: host arrays at np $NGPU, no GPU involved (HVD_DEVICE_LIB=numpy)"
fi
if [ "${NGPU:-0}" = 0 ] && [ "${BUILD_ONLY:-0}" != 1 ]; then
  smi=$(command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || echo 0)
  if [ "$LIB" = none ] && [ "$smi" != 0 ]; then
    say "the driver lists $smi GPU(s) but $PYTHON imports neither CuPy nor torch: nothing can hand Horovod a device array"
    exit 1
  fi
  say "no GPU visible (${LIB/none/no CuPy or torch}: 0 devices; CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-unset}); nothing to check"
  exit 0
fi
[ "$LIB" = numpy ] || say "$NGPU GPU(s) visible through $LIB"

# --- the build ----------------------------------------------------------------------------------
CUDA_DIR=${HOROVOD_CUDA_HOME:-${CUDA_HOME:-${CUDA_PATH:-}}}
if [ -z "$CUDA_DIR" ] && command -v nvcc >/dev/null; then
  CUDA_DIR=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")
fi
[ -z "$CUDA_DIR" ] && [ -d /usr/local/cuda ] && CUDA_DIR=/usr/local/cuda
NCCL_DIR=${HOROVOD_NCCL_HOME:-}
if [ -z "$NCCL_DIR" ]; then
  NCCL_DIR=$("$PYTHON" -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null || true)
fi
[ -z "$NCCL_DIR" ] && [ -n "$CUDA_DIR" ] && [ -f "$CUDA_DIR/include/nccl.h" ] && NCCL_DIR=$CUDA_DIR
say "CUDA from ${CUDA_DIR:-the nvidia-cuda-runtime wheel}, NCCL from ${NCCL_DIR:-the nvidia-nccl wheel}"

if [ -n "${GPU_CHECK_DIR:-}" ]; then
  mkdir -p "$GPU_CHECK_DIR" && WORK=$(cd "$GPU_CHECK_DIR" && pwd)
else
  WORK=$(mktemp -d /tmp/hvd-gpu-check.XXXXXX)
  [ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$WORK"' EXIT
fi
MPI_ARGS=()
if "$MPIRUN" --version 2>&1 | grep -q "Open MPI"; then
  [ "$(id -u)" = 0 ] && MPI_ARGS+=(--allow-run-as-root)
  # Unbound, as horovodrun starts ranks: bound to one core (mpirun's default at 1-2 ranks), the
  # engine's thread and the caller take turns on it, 8-17 us more per op on an H200 (2026-11-28).
  MPI_ARGS+=(-x PYTHONPATH -x HVD_DEVICE_LIB="$LIB" --oversubscribe --bind-to none)
fi
export PYTHONPATH="$WORK/site:$ROOT${PYTHONPATH:+:$PYTHONPATH}"

build() {  # build CC CXX: the engine with NCCL into $WORK/site (a clean one each time)
  rm -rf "$WORK/site" "$WORK/cmake"
  mkdir -p "$WORK/site"
  cp -r "$ROOT/horovod" "$WORK/site/"
  find "$WORK/site/horovod" \( -name '*.so' -o -name __pycache__ -o -name mpi_lib.tf_version \) -prune -exec rm -rf {} +
  local gen=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  CC=$1 CXX=$2 HOROVOD_GPU_OPERATIONS=NCCL HOROVOD_CUDA_HOME="$CUDA_DIR" HOROVOD_NCCL_HOME="$NCCL_DIR" \
    cmake -S "$ROOT" -B "$WORK/cmake" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DHOROVOD_WITH_TENSORFLOW=OFF -DHOROVOD_DEV_OUTPUT_DIR="$WORK/site/horovod" \
    -Dpybind11_DIR="$("$PYTHON" -m pybind11 --cmakedir)" -DPython_EXECUTABLE="$(command -v "$PYTHON")" \
    >"$WORK/build.log" 2>&1 && cmake --build "$WORK/cmake" -j "$(nproc)" >>"$WORK/build.log" 2>&1
}
smoke() {  # init and shut down one rank, the checks' array library loaded first as they load it
  local first=${LIB/none/numpy}
  (cd "$WORK" && timeout 120 "$MPIRUN" "${MPI_ARGS[@]}" -np 1 "$PYTHON" -c \
    "import $first; import horovod.numpy as hvd; hvd.init(); hvd.shutdown(); print('SMOKE OK')") \
    >"$WORK/smoke.out" 2>&1 && grep -q "SMOKE OK" "$WORK/smoke.out"
}
own_ostream() {  # std::ostream symbols the engine defines itself (0 against the shared libstdc++)
  nm -D --defined-only "$WORK/site/horovod/libhorovod_core.so" 2>/dev/null | grep -c ' _ZNSo'
}
CXX_USED=${CXX:-c++}
REUSED=0
if [ "${REUSE:-0}" = 1 ] && [ -f "$WORK/site/horovod/libhorovod_core.so" ]; then
  REUSED=1
  CXX_USED="(the build already in $WORK/site)"
  say "REUSE=1: the engine already built in $WORK/site"
elif ! build "${CC:-cc}" "$CXX_USED"; then
  tail -30 "$WORK/build.log"
  say "FAIL: the engine did not build with NCCL (log above)"
  exit 1
fi
# A compiler other than the system's can build an engine that crashes in its first std::ostream
# output. Seen on an H100 machine whose CC/CXX named Ubuntu's gcc 13.3 under /opt/gcc: the engine
# then defined libstdc++'s own std::ostream code (libstdc++ linked in statically), next to the
# shared libstdc++ the Python process had loaded: SIGSEGV in Config::AgreedValues on rank 0.
# /usr/bin/c++ of the same version builds one that works. Rebuild once with it, saying why.
# Whether it crashes depends on which library loads libstdc++ first (importing torch first did,
# horovod first did not, on 2026-11-27): the symbols decide, and the smoke run confirms.
if [ "${BUILD_ONLY:-0}" != 1 ] && [ "$REUSED" != 1 ] && { [ "$(own_ostream)" != 0 ] || ! smoke; }; then
  if [ "$(readlink -f "$(command -v "$CXX_USED")")" != "$(readlink -f /usr/bin/c++ 2>/dev/null)" ] &&
    [ -x /usr/bin/c++ ] && [ -x /usr/bin/cc ]; then
    if smoke; then
      say "the engine built with $CXX_USED ($("$CXX_USED" -dumpversion)) started one rank, but:"
    else
      say "the engine built with $CXX_USED ($("$CXX_USED" -dumpversion)) failed to start one rank:"
      grep -m3 -E "Signal|signal|Error|error" "$WORK/smoke.out" | sed 's/^/    /'
    fi
    say "it defines $(own_ostream) std::ostream symbols itself (a build against the shared libstdc++ defines none); rebuilding with /usr/bin/c++ ($(/usr/bin/c++ -dumpversion))"
    CXX_USED=/usr/bin/c++
    if ! build /usr/bin/cc /usr/bin/c++; then
      tail -30 "$WORK/build.log"
      say "FAIL: the engine did not build with NCCL and /usr/bin/c++ either (log above)"
      exit 1
    fi
  fi
  if ! smoke; then
    tail -30 "$WORK/smoke.out"
    say "FAIL: the engine built but one rank cannot init and shut down (output above)"
    exit 1
  fi
fi
BUILT=$(cd "$WORK" && "$PYTHON" -c 'from horovod import _core; i = _core.build_info(); print(i["nccl_built"], i["cuda_runtime_version"])')
say "engine built with $CXX_USED: NCCL $BUILT (NCCL version code, CUDA runtime version)"
if [ "${BUILD_ONLY:-0}" = 1 ]; then
  say "BUILD_ONLY=1: not running anything"
  exit 0
fi

# --- the runs -----------------------------------------------------------------------------------
export HVD_DEVICE_LIB=$LIB
run() {  # run NP NAME [ENV...]: the checks program under mpirun, output to $WORK/NAME.out
  local np=$1 name=$2
  shift 2
  (cd "$WORK" && env "$@" timeout 900 "$MPIRUN" "${MPI_ARGS[@]}" -np "$np" \
    "$PYTHON" "$ROOT/tests/gpu/device_checks.py" "$name") >"$WORK/$name.out" 2>&1
}
FAILED=0
run "$NGPU" collectives
rc=$?
# Ranks share one output: a line may be glued to another rank's, so count matches, not lines.
PASSES=$(grep -o 'PASS ' "$WORK/collectives.out" | wc -l)
OKS=$(grep -o 'OK collectives rank=[0-9]*' "$WORK/collectives.out" | sort -u | wc -l)
if [ $rc != 0 ] || [ "$OKS" != "$NGPU" ]; then
  FAILED=1
  tail -40 "$WORK/collectives.out"
  COLL="FAILED (rc $rc, $PASSES checks passed before; output above)"
else
  COLL="$PASSES checks passed on $NGPU rank(s)"
fi
say "collectives: $COLL"

if [ "$NGPU" -ge 2 ]; then
  run 2 stall HOROVOD_STALL_CHECK_TIME_SECONDS=1 HOROVOD_STALL_SHUTDOWN_TIME_SECONDS=3
  if grep -q "GOT STALL ERROR rank=0" "$WORK/stall.out"; then
    STALL="named error on rank 0"
  else
    FAILED=1
    tail -30 "$WORK/stall.out"
    STALL="FAILED (no named error; output above)"
  fi
else
  STALL="skipped (needs 2 GPUs, one per rank; $NGPU visible)"
fi
say "stall check: $STALL"

# Two ranks on one GPU: the mistake of a script that does not pin its GPU by local rank. Every
# rank must fail with the ranks and the GPU named, not hang in NCCL's init.
if [ "$LIB" != numpy ]; then
  run 2 shared_gpu
  if [ "$(grep -o 'GOT SHARED GPU ERROR rank=[0-9]*' "$WORK/shared_gpu.out" | sort -u | wc -l)" = 2 ]; then
    SHARED="named error on both ranks"
    grep -m1 -o "GOT SHARED GPU ERROR rank=0.*" "$WORK/shared_gpu.out" | cut -c1-400 | sed 's/^/    /'
  else
    FAILED=1
    tail -30 "$WORK/shared_gpu.out"
    SHARED="FAILED (not both ranks named the shared GPU; output above)"
  fi
else
  SHARED="skipped (host arrays)"
fi
say "two ranks on GPU 0: $SHARED"

# horovod.torch itself on CUDA tensors (its in-place forms, autograd, optimizer, SyncBatchNorm),
# wherever torch sees the GPUs: the frontend has no compiled part, so whatever torch the machine
# has is the one tested.
if [ "$LIB" != numpy ] && "$PYTHON" -c 'import sys, torch; sys.exit(not torch.cuda.is_available())' 2>/dev/null; then
  (cd "$WORK" && timeout 600 "$MPIRUN" "${MPI_ARGS[@]}" -np "$NGPU" \
    "$PYTHON" "$ROOT/tests/gpu/torch_checks.py" torch_cuda) >"$WORK/torch.out" 2>&1
  rc=$?
  TPASS=$(grep -o 'PASS torch' "$WORK/torch.out" | wc -l)
  if [ $rc != 0 ] || [ "$(grep -o 'OK torch_cuda rank=[0-9]*' "$WORK/torch.out" | sort -u | wc -l)" != "$NGPU" ]; then
    FAILED=1
    tail -40 "$WORK/torch.out"
    TORCHRES="FAILED (rc $rc, $TPASS checks passed before; output above)"
  else
    TORCHRES="$TPASS checks passed on $NGPU rank(s), torch $("$PYTHON" -c 'import torch; print(torch.__version__)')"
  fi
else
  TORCHRES="skipped (torch does not see a GPU here)"
fi
say "horovod.torch on CUDA tensors: $TORCHRES"

run "$NGPU" bench
# (another rank's line may be glued to a BENCH line: cut after the ratio)
grep -E '^(BENCH|BLOCKING) ' "$WORK/bench.out" | sed -E 's/(ratio [0-9.]+).*/\1/; s/^/gpu_check: /'
BIG=$(grep '^BENCH largest' "$WORK/bench.out" | sed -E 's/^BENCH largest //; s/(ratio [0-9.]+).*/\1/')
if [ -z "$BIG" ]; then
  FAILED=1
  tail -30 "$WORK/bench.out"
  BIG="FAILED (output above)"
fi
say "SUMMARY $LIB np=$NGPU NCCL/CUDA $BUILT: collectives $COLL; stall $STALL; shared GPU $SHARED; horovod.torch $TORCHRES; allreduce $BIG"
exit $FAILED
