#!/bin/sh
# The image's default command: a short banner (as NGC images print), then a shell if there is a
# terminal (`docker run -it horovod:latest`), else exit 0 (`docker run --rm horovod:latest`).
# Versions come from the image's ENV, set by the layers from versions.env: no slow imports here.
flavour=cpu
[ -n "${CUDA_VERSION:-}" ] && flavour="gpu, CUDA ${CUDA_VERSION}, NCCL ${NCCL_VERSION:-?}"
framework="TensorFlow ${TENSORFLOW_VERSION:-?}" example=tensorflow2_keras_digits.py
if [ "${HOROVOD_FRAMEWORK:-}" = torch ]; then
  framework="PyTorch ${TORCH_VERSION:-?}, torchvision ${TORCHVISION_VERSION:-?}" example=pytorch_classifier.py
fi
cat <<BANNER
== Horovod ${HOROVOD_VERSION:-?} (${flavour}) ==
${framework}, Open MPI ${OPENMPI_VERSION:-?}, mpi4py ${MPI4PY_VERSION:-?}, Python $(python -c 'import platform; print(platform.python_version())')
selftest:  docker run --rm IMAGE mpirun -np 2 python -m horovod.selftest
build:     docker run --rm IMAGE horovodrun --check-build
examples:  /opt/horovod/examples (horovodrun -np 2 python /opt/horovod/examples/${example})
docs:      README.md and docs/ of the source repository (images.md, kubernetes.md); horovodrun --help
BANNER
if [ -t 0 ] && [ -t 1 ]; then
  exec bash
fi
