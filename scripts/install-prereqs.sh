#!/usr/bin/env bash
# Installs what a fresh Debian bookworm machine (with a running Docker daemon) needs to build and
# test everything here: apt packages, and the Python tools in a venv at build/venv, which the
# Makefile then uses by default. Needs root or sudo; safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/.."
sudo=""; [[ $(id -u) -eq 0 ]] || sudo="sudo"
command -v docker >/dev/null && docker info >/dev/null \
  || { echo "install-prereqs: needs the docker CLI and a running daemon" >&2; exit 1; }

# Engine: compiler, cmake, Open MPI, Python headers.  Images: debootstrap builds the Debian root
# image without a registry; dpkg-dev indexes staged .debs if containers lack the mirror.
export DEBIAN_FRONTEND=noninteractive
apt_pkgs=(ca-certificates git make g++ cmake python3 python3-dev python3-venv
          openmpi-bin libopenmpi-dev debootstrap dpkg-dev)
missing=()
for p in "${apt_pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  $sudo apt-get update -q
  $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# Debian's python is externally managed (PEP 668): the tools go into a venv.
venv=build/venv
[[ -x $venv/bin/python ]] || python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check -r tests/requirements.txt
# TensorFlow (the frontend's tests; `make build` compiles its ops when it imports) and the
# examples' data set, at the versions the images pin.
source versions.env
"$venv/bin/pip" install -q --disable-pip-version-check "tensorflow-cpu==$TENSORFLOW_VERSION" \
  "scikit-learn==$SCIKIT_LEARN_VERSION"
echo "install-prereqs: done (Python tools in $venv)"
