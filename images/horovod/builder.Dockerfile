# The builder of both horovod layers: our package compiled once per flavour, for TensorFlow and for
# torch, tagged horovod/builder:<version>-<flavour> (make build/horovod-builder); the runtime
# layers (images/horovod/Dockerfile: horovod on tensorflow, horovod-torch on torch) copy their
# framework's tree out of it. Compilers and MPI headers never reach a runtime image.
#
# It starts from the tensorflow layer, so the TensorFlow ops compile against the very TensorFlow
# the runtime has (its headers, C++ ABI and Eigen flags), hence --no-build-isolation and
# HOROVOD_WITH_TENSORFLOW=ON (fail, never skip silently). The torch tree is the same build with
# the ops switched off: one CMake build directory serves both wheels, so the engine compiles once
# (before, the horovod-torch layer had a builder of its own: a second compilers' step, sources'
# COPY and engine compile per flavour; docs/benchmarks.md, issue 39). horovod.torch is Python
# over the engine: nothing is built against torch. The price: the torch images need the
# tensorflow layer built first (the Makefile's build/horovod-builder builds it).
# Steps are few on purpose: with the legacy builder on fuse-overlayfs every step costs 11-16 s on
# the tensorflow parent (docs/benchmarks.md). SHELL (bash -euo pipefail) is inherited from base.
ARG PARENT_IMAGE=horovod/tensorflow
FROM ${PARENT_IMAGE}
# HOROVOD_GPU_OPERATIONS=NCCL (FLAVOUR=gpu; empty: CPU only) makes CMakeLists.txt build the NCCL
# collectives against the nvidia-nccl/nvidia-cuda-runtime wheels of the cuda layer, plus the
# headers of nvidia-cuda-cccl (installed here only: the runtime never needs them).
ARG OPENMPI_DEB_VERSION PYTHON_DEB_VERSION SCIKIT_BUILD_CORE_VERSION PYBIND11_VERSION \
    HOROVOD_GPU_OPERATIONS= CUDA_VERSION CCCL_BUILD_VERSION \
    APT_MIRROR= PIP_NO_INDEX= PIP_FIND_LINKS= PIP_TRUSTED_HOST=
# No LABEL of its own (a step costs 11-16 s here): `make clean/images` finds replaced builders
# by the label they inherit from the tensorflow layer.
# The build backend is installed here once, so the wheels build without isolation (no per-build
# install of scikit-build-core and pybind11).
RUN apt-install g++ cmake ninja-build libopenmpi-dev="${OPENMPI_DEB_VERSION}" \
      python3-dev="${PYTHON_DEB_VERSION}" \
 && pip install "scikit-build-core==${SCIKIT_BUILD_CORE_VERSION}" "pybind11==${PYBIND11_VERSION}" \
 && if [ "${HOROVOD_GPU_OPERATIONS}" = NCCL ]; then \
      pip install "nvidia-cuda-cccl-cu${CUDA_VERSION%%.*}==${CCCL_BUILD_VERSION}"; fi
# Sources last, in one step: the whole (small) build context, which .dockerignore cuts to what
# the images read (the sources, examples/, images/).  So an edit of examples/ or images/ alone
# recompiles too (about 50 s); three COPY steps would cost about 45 s on every build.
COPY . /src/
# Per framework, the wheel installed under /out/<framework>/opt/venv with the venv's layout, the
# examples and the banner beside it, so that the runtime's one COPY puts everything in place.
# The torch wheel reuses the build directory (pyproject.toml's build-dir): only the TensorFlow
# ops' target goes, the engine's objects are up to date.
RUN cd /src; \
    for fw in tensorflow torch; do \
      with_tf=$([ $fw = tensorflow ] && echo ON || echo OFF); \
      HOROVOD_GPU_OPERATIONS="${HOROVOD_GPU_OPERATIONS}" SKBUILD_CMAKE_DEFINE=HOROVOD_WITH_TENSORFLOW=$with_tf \
        pip wheel --no-deps --no-build-isolation --wheel-dir /wheels/$fw . \
      && pip install --no-deps --prefix /out/$fw/opt/venv /wheels/$fw/horovod-*.whl \
      && mkdir -p /out/$fw/opt/horovod /out/$fw/usr/local/bin \
      && cp -r examples /out/$fw/opt/horovod/examples \
      && install -m 0755 images/horovod/banner.sh /out/$fw/usr/local/bin/horovod-banner \
      || exit 1; \
    done; \
    ops=opt/venv/lib/python3.11/site-packages/horovod/tensorflow/mpi_lib.so; \
    test -e /out/tensorflow/$ops; test ! -e /out/torch/$ops
