#!/usr/bin/env bash
# Installs what a fresh Debian bookworm machine (with a running Docker daemon) needs to build and
# test everything here: apt packages, and the Python tools in a venv at build/venv, which the
# Makefile then uses by default. Needs root or sudo; safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/.."
sudo=""; [[ $(id -u) -eq 0 ]] || sudo="sudo"
command -v docker >/dev/null && docker info >/dev/null \
  || { echo "install-prereqs: needs the docker CLI and a running daemon" >&2; exit 1; }

# Engine: compiler, cmake, Open MPI, Python headers, GoogleTest (make test/unit).  Images:
# debootstrap builds the Debian root image without a registry; dpkg-dev indexes staged .debs if
# containers lack the mirror.
export DEBIAN_FRONTEND=noninteractive
apt_pkgs=(ca-certificates git make g++ cmake python3 python3-dev python3-venv
          openmpi-bin libopenmpi-dev libgtest-dev debootstrap dpkg-dev iperf3)
missing=()
for p in "${apt_pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  $sudo apt-get update -q
  $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

source versions.env
# The registry `make push` is tested against (tests/k8s/test_registry.py runs its own instance
# on 127.0.0.1; the packaged service is not needed, and without systemd it does not start).
if [[ $(dpkg-query -W -f='${Version}' docker-registry 2>/dev/null) != "$DOCKER_REGISTRY_DEB_VERSION" ]]; then
  $sudo apt-get update -q
  $sudo apt-get install -y -q --no-install-recommends "docker-registry=$DOCKER_REGISTRY_DEB_VERSION"
  # With systemd the package starts a registry on every interface's port 5000: not wanted.
  if command -v systemctl >/dev/null && systemctl is-active -q docker-registry 2>/dev/null; then
    $sudo systemctl disable --now docker-registry
  fi
fi

# Compose v2 (`docker compose`): bookworm packages only v1.29.  Debian trixie's docker-compose
# package is the v2 CLI plugin as one static binary that runs on bookworm; it is downloaded
# through apt with a throw-away source list (the system's apt sources are not touched) and only
# its binary is installed, where the docker CLI looks for plugins.
if ! docker compose version >/dev/null 2>&1; then
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $COMPOSE_DEB_SUITE main" >"$tmp/sources.list"
  mkdir -p "$tmp/lists/partial" "$tmp/cache"
  apt_tmp=(-o "Dir::Etc::SourceList=$tmp/sources.list" -o Dir::Etc::SourceParts=/dev/null
           -o "Dir::State::Lists=$tmp/lists" -o "Dir::Cache=$tmp/cache" -o APT::Sandbox::User=root)
  $sudo apt-get "${apt_tmp[@]}" update -q >/dev/null
  (cd "$tmp" && $sudo apt-get "${apt_tmp[@]}" download -q "docker-compose=$COMPOSE_DEB_VERSION")
  dpkg-deb -x "$tmp"/docker-compose_*.deb "$tmp/x"
  $sudo install -D -m 0755 "$tmp/x/usr/libexec/docker/cli-plugins/docker-compose" \
    /usr/local/lib/docker/cli-plugins/docker-compose
fi
docker compose version | grep -q "v\?$COMPOSE_VERSION" \
  || { echo "install-prereqs: need Compose $COMPOSE_VERSION, have: $(docker compose version)" >&2; exit 1; }

# Debian's python is externally managed (PEP 668): the tools go into a venv.
venv=build/venv
[[ -x $venv/bin/python ]] || python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check -r tests/requirements.txt
# TensorFlow (the frontend's tests; `make build` compiles its ops when it imports) and the
# examples' data set, at the versions the images pin.
"$venv/bin/pip" install -q --disable-pip-version-check "tensorflow-cpu==$TENSORFLOW_VERSION" \
  "scikit-learn==$SCIKIT_LEARN_VERSION"
# Keras 2 (TF_USE_LEGACY_KERAS=1 runs): without its `tensorflow` requirement, which
# tensorflow-cpu fills under another name (as in images/tensorflow/Dockerfile).
"$venv/bin/pip" install -q --disable-pip-version-check --no-deps "tf-keras==$TF_KERAS_VERSION"
# The CUDA runtime and NCCL headers and libraries (PyPI wheels, no GPU or toolkit needed), so
# `make build/engine-gpu` compiles and links the GPU engine here (370 MB, mostly libnccl).
"$venv/bin/pip" install -q --disable-pip-version-check --no-deps "nvidia-nccl-cu12==$NCCL_VERSION" \
  "nvidia-cuda-runtime-cu12==$NVIDIA_CUDA_RUNTIME_VERSION" "nvidia-cuda-nvcc-cu12==$NVIDIA_CUDA_NVCC_VERSION" \
  "nvidia-cuda-cccl-cu12==$CCCL_BUILD_VERSION"
# horovod.spark's tests (make test/spark): pyspark (a 456 MB sdist of Spark's jars) and the Java
# 17 it runs on, Debian's headless JRE.
if [[ $(dpkg-query -W -f='${Version}' openjdk-17-jre-headless 2>/dev/null) != "$OPENJDK_JRE_DEB_VERSION" ]]; then
  $sudo apt-get update -q
  # Debian's security archive keeps only the newest JRE build: once a newer one replaces the pin,
  # the pin cannot be installed, and that newer build is the one to test on (the pin is then
  # stale: bump it in versions.env).
  $sudo apt-get install -y -q --no-install-recommends "openjdk-17-jre-headless=$OPENJDK_JRE_DEB_VERSION" ||
    { echo "install-prereqs: openjdk-17-jre-headless=$OPENJDK_JRE_DEB_VERSION is gone from the archive; installing its successor (bump versions.env)" >&2
      $sudo apt-get install -y -q --no-install-recommends openjdk-17-jre-headless; }
fi
"$venv/bin/pip" install -q --disable-pip-version-check "pyspark==$PYSPARK_VERSION"
# horovod.ray's tests (make test/ray): Ray with its dashboard's extras (79 MB wheel); its
# requirements add packages to build/venv and change none of those already there.
"$venv/bin/pip" install -q --disable-pip-version-check "ray[default]==$RAY_VERSION"
# horovod.torch's tests (make test/torch): torch in a venv of its own (its requirements must not
# touch build/venv's NCCL), installed as the CPU torch image does (images/torch/Dockerfile):
# without its CUDA wheels (--no-deps: 0.55 GB downloaded instead of 3.5), with its other
# requirements, and stand-in libraries for the CUDA sonames it links, compiled here.
# torch.cuda.is_available() is then False.
tvenv=build/torch-venv
[[ -x $tvenv/bin/python ]] || python3 -m venv "$tvenv"
tsite=$("$tvenv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
if [[ $("$tvenv/bin/python" -c 'import importlib.metadata as m; print(m.version("torch"))' 2>/dev/null) != "$TORCH_VERSION" ]]; then
  "$tvenv/bin/pip" install -q --disable-pip-version-check --no-deps "torch==$TORCH_VERSION" \
    "torchvision==$TORCHVISION_VERSION"
  "$tvenv/bin/pip" install -q --disable-pip-version-check \
    $("$tvenv/bin/python" images/torch/cuda_standins.py requirements torch torchvision) \
    $(grep -E '^(numpy|pytest)==' tests/requirements.txt)
  "$tvenv/bin/python" images/torch/cuda_standins.py build "$tsite" "$tsite/torch/lib"
fi
echo "install-prereqs: done (Python tools in $venv, torch in $tvenv)"
