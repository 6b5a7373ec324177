#!/usr/bin/env bash
# usage: [FLAVOUR=cpu|gpu] scripts/stage.sh ROOT_IMAGE
# Prepares $STAGE_DIR for the image builds of FLAVOUR and writes $STAGE_DIR/build-args, the extra
# `docker build` flags that point RUN steps at it.  Build containers on this kind of machine reach
# the Debian mirror but not PyPI over TLS (see docs/images.md), so by default:
#   PIP_SOURCE=stage  wheels are `pip download`ed on the host (its pip config, mirrors and CA
#                     apply) and served by scripts/with-stage-server.sh;  =pypi: containers use PyPI.
#   APT_SOURCE=auto   probe once whether a container can `apt-get update`; if not, stage the .debs;
#                     =mirror / =stage force one or the other.
set -euo pipefail
root_image=${1:?ROOT_IMAGE}
cd "$(dirname "$0")/.."
# shellcheck source=../versions.env
source versions.env
stage=${STAGE_DIR:-build/stage}
url=http://127.0.0.1:${STAGE_PORT:-8765}
pip=${PIP:-python3 -m pip}
python=${PYTHON:-python3}  # with pip (images/torch/cuda_standins.py reads requirements with it)
mkdir -p "$stage"
args=()

# ---- wheels -------------------------------------------------------------------------------------
# Wheels for the image's interpreter and glibc (2.36), whatever the host runs; pip does not
# expand --platform to older manylinux tags, so list them all.
arch=$(uname -m) platforms=()
for v in $(seq 36 -1 5); do platforms+=(--platform "manylinux_2_${v}_$arch"); done
platforms+=(--platform "manylinux2014_$arch" --platform "manylinux2010_$arch" --platform "manylinux1_$arch")
flavour=${FLAVOUR:-cpu}
wheels=("mpi4py==$MPI4PY_VERSION" "numpy==$NUMPY_VERSION" "scikit-learn==$SCIKIT_LEARN_VERSION"
        "scikit-build-core==$SCIKIT_BUILD_CORE_VERSION" "pybind11==$PYBIND11_VERSION")
# The torch layer's wheels go in without their CUDA requirements (images/torch/Dockerfile): torch
# and torchvision are downloaded with --no-deps, then their other requirements with theirs.
case $flavour in
  cpu) wheels+=("tensorflow-cpu==$TENSORFLOW_VERSION")
       torch=("torch==$TORCH_VERSION" "torchvision==$TORCHVISION_VERSION") ;;
  gpu)
    # The cuda layer's nvidia-* wheels (2.8 GB; 3.4 GB with tensorflow): NCCL_VERSION and every NVIDIA_<NAME>_VERSION key
    # of versions.env (see there).  Resolved together with tensorflow[and-cuda], so a pin outside
    # TensorFlow's ranges fails here (an nvidia wheel it needs but versions.env lacks would be
    # staged, not installed: tests/images/test_tensorflow.py checks the extra is satisfied).
    # + the CUDA headers the horovod builder stage needs (CCCL_BUILD_VERSION, build-time only).
    cu=cu${CUDA_VERSION%%.*}
    wheels+=("tensorflow[and-cuda]==$TENSORFLOW_VERSION" "nvidia-nccl-$cu==$NCCL_VERSION"
             "nvidia-cuda-cccl-$cu==$CCCL_BUILD_VERSION")
    for key in $(sed -n 's/^NVIDIA_\([A-Z0-9_]*\)_VERSION=.*/\1/p' versions.env); do
      var=NVIDIA_${key}_VERSION
      wheels+=("nvidia-$(tr 'A-Z_' 'a-z-' <<<"$key")-$cu==${!var}")
    done
    torch=("torch==$TORCH_CUDA12_VERSION" "torchvision==$TORCHVISION_CUDA12_VERSION" ${TORCH_GPU_EXTRAS//,/ }) ;;
  *) echo "stage: FLAVOUR=$flavour: expected cpu or gpu" >&2; exit 2 ;;
esac
# Downloaded without their dependencies: tf-keras requires the `tensorflow` distribution, which
# the CPU flavour's tensorflow-cpu provides under another name (images/tensorflow/Dockerfile).
nodeps=("tf-keras==$TF_KERAS_VERSION" "${torch[@]}")
if [[ ${PIP_SOURCE:-stage} == stage ]]; then
  # One stamp per flavour, one shared wheel directory: switching flavours never re-resolves or
  # re-downloads (pip download keeps files already in --dest, and nothing here deletes any), so a
  # CPU stage leaves the GPU wheels in place and a GPU stage re-fetches none of the CPU ones.
  key="${wheels[*]} ${nodeps[*]}"
  if [[ $(cat "$stage/wheels/.stamp-$flavour" 2>/dev/null) != "$key" ]]; then
    echo "stage: pip download ${wheels[*]} ${nodeps[*]}" >&2
    # shellcheck disable=SC2086
    $pip download --quiet --dest "$stage/wheels" --only-binary=:all: \
      --implementation cp --python-version "${PYTHON_VERSION%.*}" "${platforms[@]}" "${wheels[@]}"
    $pip download --quiet --dest "$stage/wheels" --only-binary=:all: \
      --implementation cp --python-version "${PYTHON_VERSION%.*}" "${platforms[@]}" --no-deps "${nodeps[@]}"
    torch_wheels=()
    for spec in "${torch[@]:0:2}"; do
      torch_wheels+=("$(ls "$stage/wheels/${spec%%==*}-${spec#*==}-"*.whl | head -1)")
    done
    mapfile -t torch_reqs < <($python images/torch/cuda_standins.py requirements "${torch_wheels[@]}")
    $pip download --quiet --dest "$stage/wheels" --only-binary=:all: \
      --implementation cp --python-version "${PYTHON_VERSION%.*}" "${platforms[@]}" "${torch_reqs[@]}"
    echo "$key" >"$stage/wheels/.stamp-$flavour"
  fi
  args+=(--build-arg PIP_NO_INDEX=1 --build-arg "PIP_FIND_LINKS=$url/wheels/" --build-arg PIP_TRUSTED_HOST=127.0.0.1)
fi

# ---- the ray layer's wheels (CPU flavour only: images/layers) -----------------------------------
# ray[default] and its requirements, resolved together with the CPU wheels above, so what Ray
# shares with TensorFlow (protobuf, grpcio, numpy, ...) resolves as in the parent image, which
# installs with its own packages as constraints (images/ray/Dockerfile). A stamp of its own.
if [[ ${PIP_SOURCE:-stage} == stage && $flavour == cpu ]]; then
  ray_key="ray[default]==$RAY_VERSION ${wheels[*]}"
  if [[ $(cat "$stage/wheels/.stamp-ray" 2>/dev/null) != "$ray_key" ]]; then
    echo "stage: pip download ray[default]==$RAY_VERSION" >&2
    $pip download --quiet --dest "$stage/wheels" --only-binary=:all: \
      --implementation cp --python-version "${PYTHON_VERSION%.*}" "${platforms[@]}" \
      "ray[default]==$RAY_VERSION" "${wheels[@]}"
    echo "$ray_key" >"$stage/wheels/.stamp-ray"
  fi
fi

# ---- the spark layer's wheels (images/spark) ------------------------------------------------------
# pyspark is an sdist on PyPI (its jars inside, no wheel): built into a wheel here, once (a stamp
# of its own, whatever the flavour), with the host's pip; then its py4j, downloaded as that
# wheel's requirement, so the layer installs from the stage with no index.
if [[ ${PIP_SOURCE:-stage} == stage && $(cat "$stage/wheels/.stamp-spark" 2>/dev/null) != "pyspark==$PYSPARK_VERSION" ]]; then
  echo "stage: pip wheel pyspark==$PYSPARK_VERSION (an sdist on PyPI) and its py4j" >&2
  $pip wheel --quiet --no-deps --wheel-dir "$stage/wheels" "pyspark==$PYSPARK_VERSION"
  $pip download --quiet --dest "$stage/wheels" --only-binary=:all: --implementation cp \
    --python-version "${PYTHON_VERSION%.*}" "$stage/wheels/pyspark-$PYSPARK_VERSION-py2.py3-none-any.whl"
  echo "pyspark==$PYSPARK_VERSION" >"$stage/wheels/.stamp-spark"
fi

# ---- Debian packages ----------------------------------------------------------------------------
apt_source=${APT_SOURCE:-auto}
if [[ $apt_source == auto ]]; then
  if [[ ! -s $stage/apt-probe ]]; then
    if docker run --rm --network host "$root_image" \
         timeout 120 apt-get -q -o Acquire::Retries=0 update >"$stage/apt-probe.log" 2>&1 \
       && ! grep -qE '^(W|E): Failed to fetch' "$stage/apt-probe.log"; then
      echo mirror >"$stage/apt-probe"
    else
      echo stage >"$stage/apt-probe"
    fi
    echo "stage: build containers use the Debian $(cat "$stage/apt-probe") (log: $stage/apt-probe.log)" >&2
  fi
  apt_source=$(cat "$stage/apt-probe")
fi
if [[ $apt_source == stage ]]; then
  # Everything any layer apt-installs (keep in step with images/*/Dockerfile), resolved against
  # the root image's dpkg status so the closure is exactly what the layers will be missing.
  debs=(ca-certificates iproute2 procps tini "python3=$PYTHON_DEB_VERSION" python3-venv
        "openmpi-bin=$OPENMPI_DEB_VERSION" "libopenmpi3=$OPENMPI_DEB_VERSION" openmpi-common
        openssh-server openssh-client g++ cmake ninja-build "libopenmpi-dev=$OPENMPI_DEB_VERSION"
        "python3-dev=$PYTHON_DEB_VERSION" "openjdk-17-jre-headless=$OPENJDK_JRE_DEB_VERSION")
  key="$root_image ${debs[*]}"
  if [[ $(cat "$stage/debs/.stamp" 2>/dev/null) != "$key" ]]; then
    echo "stage: apt-get download of ${#debs[@]} packages and their dependencies" >&2
    mkdir -p "$stage/debs/partial" "$stage/apt-state"
    docker run --rm --entrypoint cat "$root_image" /var/lib/dpkg/status >"$stage/apt-state/status"
    sudo=""; [[ $(id -u) -eq 0 ]] || sudo="sudo"
    $sudo apt-get -q update
    $sudo apt-get -q -y --download-only --no-install-recommends \
      -o Dir::State::status="$PWD/$stage/apt-state/status" \
      -o Dir::Cache::archives="$PWD/$stage/debs" -o Debug::NoLocking=true \
      install "${debs[@]}"
    (cd "$stage/debs" && dpkg-scanpackages --multiversion . >Packages 2>/dev/null)
    echo "$key" >"$stage/debs/.stamp"
  fi
  args+=(--build-arg "APT_MIRROR=$url/debs")
fi

# Replaced in one rename: a build of the other flavour may be reading it right now, or writing
# it (make images-all: the same content), hence a temporary file of this process's own.
printf '%s\n' "${args[@]}" >"$stage/build-args.tmp.$$"
mv "$stage/build-args.tmp.$$" "$stage/build-args"
