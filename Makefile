# Horovod: engine, images, cluster. `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help
# The venv made by scripts/install-prereqs.sh, if there is one.
PYTHON ?= $(if $(wildcard build/venv/bin/python),$(CURDIR)/build/venv/bin/python,python3)
MPIRUN ?= mpirun --allow-run-as-root --oversubscribe
BUILD_DIR ?= build/dev

# ---------------------------------------------------------------------------------------------
# Engine (csrc/ + horovod/)
# ---------------------------------------------------------------------------------------------
.PHONY: help build test test/unit test/engine test/tf test/gpu test/spark test/ray build/engine-gpu bench plots clean

help: ## list the targets
	@grep -hE '^[a-zA-Z0-9_/%.-]+:.*## ' $(MAKEFILE_LIST) | \
	  awk 'BEGIN{FS=":.*## "}{printf "  %-24s %s\n", $$1, $$2}'

build: ## compile csrc/ in place (libhorovod_core.so + horovod/_core) for tests from the tree
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release \
	  -Dpybind11_DIR=$$($(PYTHON) -m pybind11 --cmakedir) -DPython_EXECUTABLE=$$(command -v $(PYTHON)) >/dev/null
	cmake --build $(BUILD_DIR) -j2

# The C++ tests link the engine of `make build` (the option only adds their targets); the Python
# ones load horovod/_core from the tree (the knob table) or read sources (layers, imports).
test/unit: build ## fast unit tests without MPI (C++ via ctest, and tests/unit/*.py)
	cmake -S . -B $(BUILD_DIR) -DHOROVOD_BUILD_TESTS=ON >/dev/null
	cmake --build $(BUILD_DIR) --target unit_tests -j2
	ctest --test-dir $(BUILD_DIR) --output-on-failure
	PYTHONPATH=$(CURDIR) $(PYTHON) -m pytest -q tests/unit

test/engine: build ## engine tests under real MPI ranks (np 1, 2 and 3)
	PYTHONPATH=$(CURDIR) $(PYTHON) -m pytest -q tests/engine

test/tf: build ## horovod.tensorflow and horovod.keras under real MPI ranks (np 2 and 3)
	PYTHONPATH=$(CURDIR) $(PYTHON) -m pytest -q tests/tensorflow

TORCH_PYTHON ?= $(CURDIR)/build/torch-venv/bin/python
test/torch: build ## horovod.torch under real MPI ranks (np 2 and 3), with build/torch-venv's torch (scripts/install-prereqs.sh)
	PYTHONPATH=$(CURDIR) $(TORCH_PYTHON) -m pytest -q tests/torch

# horovod.spark on Spark's local-cluster mode (2 workers of 2 cores, executors in JVMs of their
# own): pyspark and Java 17 from scripts/install-prereqs.sh; one SparkSession per test module.
test/spark: build ## horovod.spark.run on a real Spark local-cluster (pyspark, Java 17; no docker)
	PYTHONPATH=$(CURDIR) $(PYTHON) -m pytest -q tests/spark

# horovod.ray on a local Ray (ray.init(num_cpus=4)) and on a ray.cluster_utils.Cluster of two
# nodes on this machine: ray from scripts/install-prereqs.sh; one Ray instance per test module.
test/ray: build ## horovod.ray.RayExecutor on a real local Ray (ray[default]; no docker)
	PYTHONPATH=$(CURDIR) $(PYTHON) -m pytest -q tests/ray

bench: build ## allreduce benchmark: engine vs ring vs MPI_Allreduce, np 2 (shared memory and TCP)
	PYTHONPATH=$(CURDIR) $(MPIRUN) -np 2 --bind-to core $(PYTHON) benchmarks/allreduce.py
	PYTHONPATH=$(CURDIR) $(MPIRUN) -np 2 --bind-to core --mca btl tcp,self $(PYTHON) benchmarks/allreduce.py

plots: ## charts of the recorded benchmark outputs: docs/bench/*.txt -> docs/plots/*.png (matplotlib, pinned)
	$(PYTHON) -c "import matplotlib" 2>/dev/null || $(PYTHON) -m pip install -q matplotlib==$(MATPLOTLIB_VERSION)
	$(PYTHON) benchmarks/plot.py

# The GPU engine (HOROVOD_GPU_OPERATIONS=NCCL) compiled against PyPI's CUDA runtime and NCCL
# wheels (scripts/install-prereqs.sh installs them): needs no GPU, so CI builds it every time.
# It goes into a copy of the package under build/gpu/site, so the CPU build in horovod/ stays.
GPU_BUILD_DIR ?= build/gpu
GPU_SITE := $(CURDIR)/$(GPU_BUILD_DIR)/site
# The package is copied afresh each time, but the GPU libraries built last time are kept (mtimes
# too), so an unchanged engine is not linked again: its LTO link is most of test/gpu's time.
build/engine-gpu: ## compile and link the engine with NCCL into build/gpu/site (no GPU needed)
	rm -rf $(GPU_SITE)/horovod.new && mkdir -p $(GPU_SITE) && cp -r horovod $(GPU_SITE)/horovod.new
	find $(GPU_SITE)/horovod.new \( -name '*.so' -o -name mpi_lib.tf_version -o -name __pycache__ \) -prune -exec rm -rf {} +
	[ ! -d $(GPU_SITE)/horovod ] || (cd $(GPU_SITE)/horovod && find . -name '*.so' -exec cp -p --parents {} ../horovod.new/ \;)
	rm -rf $(GPU_SITE)/horovod && mv $(GPU_SITE)/horovod.new $(GPU_SITE)/horovod
	HOROVOD_GPU_OPERATIONS=NCCL cmake -S . -B $(GPU_BUILD_DIR)/cmake -DCMAKE_BUILD_TYPE=Release \
	  -DHOROVOD_DEV_OUTPUT_DIR=$(GPU_SITE)/horovod -DHOROVOD_WITH_TENSORFLOW=ON \
	  -Dpybind11_DIR=$$($(PYTHON) -m pybind11 --cmakedir) -DPython_EXECUTABLE=$$(command -v $(PYTHON)) >/dev/null
	cmake --build $(GPU_BUILD_DIR)/cmake -j2

test/gpu: build/engine-gpu ## GPU engine: links and reports NCCL, refuses GPU work clearly without a GPU; NCCL collectives if one is visible
	cd $(GPU_BUILD_DIR) && HOROVOD_TEST_SITE=$(GPU_SITE) $(PYTHON) -m pytest -q -p no:cacheprovider $(CURDIR)/tests/gpu

# Lint: ruff (format and checks, pyproject.toml) over the Python, clang-format (.clang-format) over
# the C++, and the include rule of the layers (scripts/check_layers.py). Both tools are pinned in
# tests/requirements.txt.
CLANG_FORMAT ?= $(if $(wildcard build/venv/bin/clang-format),$(CURDIR)/build/venv/bin/clang-format,clang-format)
CXX_SOURCES = $(shell find csrc tests/unit/cpp \( -name '*.cc' -o -name '*.h' \) 2>/dev/null | sort)
.PHONY: lint format
lint: ## ruff (Python), clang-format (C++), the include rule of the layers; fails on any finding
	$(PYTHON) -m ruff format --check .
	$(PYTHON) -m ruff check .
	$(CLANG_FORMAT) --dry-run -Werror $(CXX_SOURCES)
	$(PYTHON) scripts/check_layers.py

format: ## format Python (ruff) and C++ (clang-format) in place, and apply ruff's safe fixes
	$(PYTHON) -m ruff format .
	$(PYTHON) -m ruff check --fix .
	$(CLANG_FORMAT) -i $(CXX_SOURCES)

test: test/unit test/engine test/tf test/torch test/gpu test/runner test/spark test/ray test/docker ## everything CI runs

test-fast: test/unit test/engine test/tf test/torch test/runner test/spark test/ray ## the loop while working (12-14 minutes on 2 cores): everything without docker, the GPU build or images; CI runs `make test`

# Compiled outputs only: the tools' venv and the staged wheels (build/venv, build/stage) stay, and
# so do images and containers (`make clean/images`).
clean: ## remove build outputs (not images: make clean/images; not build/venv, build/stage)
	rm -rf $(BUILD_DIR) $(GPU_BUILD_DIR) horovod/_core*.so horovod/libhorovod_core.so \
	  horovod/tensorflow/mpi_lib.so horovod/tensorflow/mpi_lib.tf_version

# ---------------------------------------------------------------------------------------------
# Images: images/<name>/Dockerfile, a chain of layers each FROM the previous (build arg
# PARENT_IMAGE); every version comes from versions.env.  docs/images.md explains the choices.
# ---------------------------------------------------------------------------------------------
include versions.env
VERSION_KEYS := $(shell sed -n 's/^\([A-Z0-9_]*\)=.*/\1/p' versions.env)

DOCKER ?= docker
# This engine has no buildx; the Dockerfiles need nothing beyond the legacy builder.
export DOCKER_BUILDKIT ?= 0
# FLAVOUR=cpu (default) or gpu: the gpu chain slots a `cuda` layer (CUDA runtime, cuDNN, NCCL
# from PyPI's nvidia-* wheels) between base and mpi; the other layers are the same Dockerfiles.
FLAVOUR ?= cpu
IMAGE_TAG ?= $(HOROVOD_VERSION)-$(FLAVOUR)
# The image graph (images/layers): FLAVOUR's layers in build order, each as "layer:parent".
LAYERS_FILE := images/layers
FLAVOURS := $(strip $(shell awk '!/^\#/ && NF {$$1=""; print; exit}' $(LAYERS_FILE)))
_parents := $(shell awk -v f=$(FLAVOUR) '/^\#/ || !NF {next} !c {for (i = 2; i <= NF; i++) if ($$i == f) c = i; next} $$c != "-" {print $$1 ":" $$c}' $(LAYERS_FILE))
IMAGES := $(foreach p,$(_parents),$(firstword $(subst :, ,$(p))))
$(if $(IMAGES),,$(error FLAVOUR=$(FLAVOUR): expected one of $(FLAVOURS) ($(LAYERS_FILE))))
# Layers of other flavours: their targets fail with a hint instead of doing nothing.
ALL_IMAGES := $(shell awk '/^\#/ || !NF {next} !h {h = 1; next} {print $$1}' $(LAYERS_FILE))
OTHER_IMAGES := $(filter-out $(IMAGES),$(ALL_IMAGES))
# The floating tags of the last layers, one per flavour and framework.
LATEST_cpu := horovod:latest
LATEST_gpu := horovod:latest-gpu
LATEST := $(LATEST_$(FLAVOUR))
LATEST_TORCH_cpu := horovod:latest-torch
LATEST_TORCH_gpu := horovod:latest-torch-gpu
LATEST_TORCH := $(LATEST_TORCH_$(FLAVOUR))
# Per-layer build args of a flavour: the GPU TensorFlow wheel (its CUDA libraries come from the
# cuda parent), and the engine's NCCL operations (CMakeLists.txt reads $HOROVOD_GPU_OPERATIONS).
FLAVOUR_ARGS_tensorflow_gpu := --build-arg TENSORFLOW_PACKAGE=tensorflow
FLAVOUR_ARGS_horovod-builder_gpu := --build-arg HOROVOD_GPU_OPERATIONS=NCCL
# The torch layer: the CPU flavour takes TORCH_VERSION with stand-ins for CUDA, the GPU flavour the
# newest CUDA 12 build (versions.env); horovod-torch is built from the horovod Dockerfile on torch.
FLAVOUR_ARGS_torch_gpu := --build-arg TORCH_FLAVOUR=gpu --build-arg TORCH_VERSION=$(TORCH_CUDA12_VERSION) \
  --build-arg TORCHVISION_VERSION=$(TORCHVISION_CUDA12_VERSION)
# One builder per flavour compiles our package for both horovod layers (the engine once;
# images/horovod/builder.Dockerfile): it starts from tensorflow, so the torch images need that
# layer too. It is no layer of the graph (nobody runs it): tagged horovod/builder:<tag>.
BUILDER_REF = horovod/builder:$(IMAGE_TAG)
LAYER_ARGS_horovod = --build-arg BUILDER_IMAGE=$(BUILDER_REF)
LAYER_ARGS_horovod-torch = $(LAYER_ARGS_horovod)
DOCKERFILE_horovod-torch := images/horovod/Dockerfile
# Empty: build the Debian root image from Debian packages (debootstrap), no registry needed.
# Set it (e.g. BASE_IMAGE=debian:bookworm-slim) to use that image, pulled if missing.
BASE_IMAGE ?=
ROOTFS_IMAGE ?= horovod/rootfs:$(DEBIAN_SUITE)
STAGE_DIR ?= build/stage
STAGE_PORT ?= 8765
PIP_SOURCE ?= stage
APT_SOURCE ?= auto
PIP ?= $(PYTHON) -m pip
# --durations: the slowest checks in every log, so a slower CI run says which grew (issue 39).
PYTEST_IMAGES ?= $(PYTHON) -m pytest -q -p no:cacheprovider --durations=12

# The images users run are horovod:<tag> and its siblings horovod:<tag>-<suffix>; the layers under
# them are horovod/<layer>:<tag>.
TAG_SUFFIX_horovod-torch := -torch
TAG_SUFFIX_spark := -spark
TAG_SUFFIX_ray := -ray
image_ref = $(if $(filter horovod,$(1)),horovod:$(IMAGE_TAG),$(if $(TAG_SUFFIX_$(1)),horovod:$(IMAGE_TAG)$(TAG_SUFFIX_$(1)),horovod/$(1):$(IMAGE_TAG)))
parent_of = $(patsubst $(1):%,%,$(filter $(1):%,$(_parents)))
ROOT_REF_FILE := $(STAGE_DIR)/root-image
parent_ref = $(if $(filter rootfs,$(call parent_of,$(1))),$$(cat $(ROOT_REF_FILE)),$(call image_ref,$(call parent_of,$(1))))
reverse = $(if $(1),$(call reverse,$(wordlist 2,$(words $(1)),$(1))) $(firstword $(1)))
EXTRA_TAGS_horovod = -t $(LATEST)
EXTRA_TAGS_horovod-torch = -t $(LATEST_TORCH)
EXTRA_TAGS_spark = -t horovod:latest-spark
EXTRA_TAGS_ray = -t horovod:latest-ray
# The CPU flavour's other floating tags (its spark and ray layers): make clean/images removes them.
LATEST_EXTRA_cpu := horovod:latest-spark horovod:latest-ray
# Labels that change every build go on the last layer only (a parent's new image ID would
# invalidate the cache of every child).
# The git revision goes into the last layers' one LABEL step as a build arg (`docker build
# --label` would cost a step per label; images/horovod/Dockerfile).
LABELS_horovod = --build-arg HOROVOD_REVISION=$$(git rev-parse --short HEAD 2>/dev/null || echo none)
LABELS_horovod-torch = $(LABELS_horovod)

.PHONY: images images-torch check-versions stage build/rootfs build/horovod-builder test/images test/images-gpu test/runner clean/images
.PHONY: $(addprefix build/,$(IMAGES) $(OTHER_IMAGES)) $(addprefix test/,$(IMAGES) $(OTHER_IMAGES))
# Defined before its first use in a rule's target list (the host suites' names are not layers').
HOST_SUITE_LAYERS := torch spark ray

images-torch: build/horovod-torch ## the PyTorch images: mpi -> torch (torch, torchvision) -> horovod-torch (compiled in the builder on tensorflow), tagged horovod:<version>-<flavour>-torch and horovod:latest-torch (FLAVOUR=gpu: torch's newest CUDA 12 build on the cuda layer, horovod:latest-torch-gpu)

images: build/horovod ## build the CPU image chain (horovod:<version>-cpu, horovod:latest); `make images FLAVOUR=gpu`: the GPU chain, base -> cuda (CUDA, cuDNN, NCCL wheels) -> mpi -> tensorflow (CUDA build) -> horovod (+ NCCL ops), tagged horovod:<version>-gpu, horovod:latest-gpu

check-versions: ## fail unless versions.env pins the version in horovod/__init__.py
	@v=$$(sed -n 's/^__version__ = "\(.*\)"/\1/p' horovod/__init__.py); \
	  [ "$$v" = "$(HOROVOD_VERSION)" ] || { echo "versions.env HOROVOD_VERSION=$(HOROVOD_VERSION) but horovod/__init__.py says $$v" >&2; exit 1; }

# The reference is renamed into place: both chains of side_by_side.sh run this at once, and a
# plain `>` let the other chain's `cat` read an empty file (16 of 786 reads in a stress loop).
build/rootfs: ## Debian root image: BASE_IMAGE if given (pulled if missing), else debootstrap
	@mkdir -p $(STAGE_DIR)
	@if [ -n "$(BASE_IMAGE)" ] && { $(DOCKER) image inspect $(BASE_IMAGE) >/dev/null 2>&1 || $(DOCKER) pull $(BASE_IMAGE); }; then \
	  ref=$(BASE_IMAGE); \
	else \
	  [ -z "$(BASE_IMAGE)" ] || echo "$(BASE_IMAGE) unavailable: building $(ROOTFS_IMAGE) with debootstrap" >&2; \
	  $(DOCKER) image inspect $(ROOTFS_IMAGE) >/dev/null 2>&1 || scripts/build-rootfs-image.sh $(ROOTFS_IMAGE) $(DEBIAN_SUITE) || exit; \
	  ref=$(ROOTFS_IMAGE); \
	fi; \
	echo $$ref >$(ROOT_REF_FILE).$$$$ && mv -f $(ROOT_REF_FILE).$$$$ $(ROOT_REF_FILE)

stage: build/rootfs ## download FLAVOUR's wheels (and .debs if containers lack the mirror) into build/stage
	STAGE_DIR=$(STAGE_DIR) STAGE_PORT=$(STAGE_PORT) PIP_SOURCE=$(PIP_SOURCE) APT_SOURCE=$(APT_SOURCE) \
	  FLAVOUR=$(FLAVOUR) PIP="$(PIP)" PYTHON="$(PYTHON)" scripts/stage.sh $$(cat $(ROOT_REF_FILE))

build/base: ## layer 1: Debian, python3 venv (/opt/venv), tini, iproute2, procps, mpiuser
build/cuda: ## FLAVOUR=gpu only, after base: + CUDA runtime, cuDNN, cuBLAS..., NCCL (nvidia-* wheels, ldconfig)
build/mpi: ## layer 2: + Open MPI, mpi4py, numpy, sshd/ssh (keys only, port 2222)
build/tensorflow: ## layer 3: + tensorflow-cpu (FLAVOUR=gpu: tensorflow, the CUDA build), scikit-learn (the examples' data)
build/horovod: check-versions ## layer 4: + our package with its TensorFlow ops (built in a builder stage; gpu: + NCCL), examples/
build/torch: ## beside tensorflow, on mpi: + torch, torchvision (cpu: CUDA stand-ins; gpu: torch's CUDA 12 build on the cuda layer)
build/horovod-torch: check-versions ## on torch: + our package without TensorFlow (horovod.torch), examples/
build/spark: ## CPU only, on horovod: + Debian's Java 17 JRE and pyspark (horovod:<v>-cpu-spark, horovod:latest-spark; make demo-spark)
build/ray: ## CPU only, on horovod: + ray[default] (horovod:<v>-cpu-ray, horovod:latest-ray; make demo-ray)
$(foreach i,$(IMAGES),$(eval build/$(i): $(if $(filter rootfs,$(call parent_of,$(i))),,build/$(call parent_of,$(i)))))
# A layer never rebuilds by itself: docker's cache decides, so re-running is cheap.
# STAGE_SERVED=1: a stage server already runs on STAGE_PORT (images-all's, for both flavours).
# docker build: $(1) the Dockerfile, $(2) the tags, $(3) the parent image, $(4) the build's own
# arguments; every pin and the stage's arguments go to every build.
docker_build = $(if $(STAGE_SERVED),,scripts/with-stage-server.sh $(STAGE_DIR) $(STAGE_PORT)) \
  $(DOCKER) build --force-rm --network host -f $(1) $(2) --build-arg PARENT_IMAGE=$(3) \
    $(foreach k,$(VERSION_KEYS),--build-arg $(k)=$($(k))) $(4) $$(cat $(STAGE_DIR)/build-args) .
$(addprefix build/,$(IMAGES)): build/%: stage
	$(call docker_build,$(or $(DOCKERFILE_$*),images/$*/Dockerfile),-t $(call image_ref,$*) $(EXTRA_TAGS_$*),$(call parent_ref,$*),$(FLAVOUR_ARGS_$*_$(FLAVOUR)) $(LAYER_ARGS_$*) $(LABELS_$*))
build/horovod-builder: build/tensorflow stage ## the one builder of both horovod layers (FLAVOUR's): the engine compiled once, the TF ops with it
	$(call docker_build,images/horovod/builder.Dockerfile,-t $(BUILDER_REF),$(call image_ref,tensorflow),$(FLAVOUR_ARGS_horovod-builder_$(FLAVOUR)))
build/horovod build/horovod-torch: build/horovod-builder
$(addprefix build/,$(OTHER_IMAGES)) $(addprefix test/,$(filter-out $(HOST_SUITE_LAYERS),$(OTHER_IMAGES))):
	@echo "$@: no $(@F) layer in the $(FLAVOUR) images ($(IMAGES)); try another FLAVOUR ($(FLAVOURS))" >&2; exit 2

test/base: ## base checks on the base image
test/mpi: ## base + mpi checks on the mpi image
test/cuda: ## FLAVOUR=gpu only: base + cuda checks on the cuda image
test/tensorflow: ## base + mpi + tensorflow checks on the tensorflow image
test/horovod: ## every check on horovod:<version>-<flavour> (needs the engine for the selftest)
test/torch-image: build/torch ## base + mpi + torch checks on the torch image
	IMAGE_TAG=$(IMAGE_TAG) FLAVOUR=$(FLAVOUR) $(PYTEST_IMAGES) tests/images --image torch
test/horovod-torch: ## every check on horovod:<version>-<flavour>-torch
# test/torch, test/spark and test/ray are the host suites of horovod.torch, horovod.spark and
# horovod.ray; those layers' image checks are test/<layer>-image (HOST_SUITE_LAYERS).
$(addprefix test/,$(filter-out $(HOST_SUITE_LAYERS),$(IMAGES))): test/%: build/%
	IMAGE_TAG=$(IMAGE_TAG) FLAVOUR=$(FLAVOUR) $(PYTEST_IMAGES) tests/images --image $*
.PHONY: test/spark-image test/ray-image
test/spark-image: ## every check on horovod:<v>-cpu-spark (its own and its ancestors')
test/ray-image: ## every check on horovod:<v>-cpu-ray (its own and its ancestors')
test/spark-image test/ray-image: test/%-image: build/%
	IMAGE_TAG=$(IMAGE_TAG) FLAVOUR=$(FLAVOUR) $(PYTEST_IMAGES) tests/images --image $*

# Both flavours' chains at once (scripts/side_by_side.sh: each a line prefix in the log). A build
# is about half idle on 2 cores (a step's diff is fuse-overlayfs walking the image in one
# process; wheels unpack in one pip): two chains side by side keep both cores busy
# (docs/benchmarks.md, issue 39). The wheels are staged first, one flavour after the other (they
# share build/stage), and the shared base layer built once; then one stage server serves both.
# The GPU chain is the longer (its cuda layer, larger wheels): it builds its torch branch beside
# its tensorflow branch (-j2), so the CPU chain's end does not leave it alone on the machine
# (cold, 2026-11-29: the CPU chain ended at 997 s, the GPU chain 378 s later).
.PHONY: images-all test/images-all test/images-k8s test/docker
images-all: ## every image of both flavours (TensorFlow and torch, CPU and GPU), the two flavours' chains built side by side
	$(MAKE) --no-print-directory stage FLAVOUR=gpu
	$(MAKE) --no-print-directory build/base FLAVOUR=cpu
	scripts/with-stage-server.sh $(STAGE_DIR) $(STAGE_PORT) scripts/side_by_side.sh \
	  cpu '$(MAKE) --no-print-directory STAGE_SERVED=1 FLAVOUR=cpu build/horovod build/horovod-torch build/spark build/ray' \
	  gpu '$(MAKE) --no-print-directory -j2 STAGE_SERVED=1 FLAVOUR=gpu build/horovod build/horovod-torch'

# The checks side by side too: each starts containers and waits on them about half the time (48 %
# idle through the CPU checks of a cold run); they share nothing (a session removes only its own
# containers, networks have random names, the registry test only tags and untags).
IMAGE_CHECKS = IMAGE_TAG=$(HOROVOD_VERSION)-$(1) FLAVOUR=$(1) $(PYTEST_IMAGES) tests/images --image all
BOTH_IMAGE_CHECKS = 'cpu checks' '$(call IMAGE_CHECKS,cpu)' 'gpu checks' '$(call IMAGE_CHECKS,gpu)'
K8S_CHECKS = k8s '$(MAKE) --no-print-directory test/k8s FLAVOUR=cpu'
test/images-all: images-all ## test/images and test/images-gpu side by side, after images-all
	scripts/side_by_side.sh $(BOTH_IMAGE_CHECKS)

test/images-k8s: images-all ## test/images-all and test/k8s, all three side by side (what make test runs)
	scripts/side_by_side.sh $(BOTH_IMAGE_CHECKS) $(K8S_CHECKS)

# What `make test` runs on docker: the CPU and GPU image checks, the Kubernetes suite and the
# cluster tests that time nothing, side by side (each waits on containers much of the time); then
# the cluster tests marked `alone` (elastic jobs racing a worker's start, stall and preflight
# bounds, link bandwidth) with nothing beside them. Same tests as test/images-k8s + test/cluster.
CLUSTER_TESTS = IMAGE_TAG=$(IMAGE_TAG) $(PYTEST_IMAGES) tests/cluster
test/docker: images-all ## test/images-k8s and the cluster tests that time nothing side by side, then the timed cluster tests
	scripts/side_by_side.sh $(BOTH_IMAGE_CHECKS) $(K8S_CHECKS) cluster '$(CLUSTER_TESTS) -m "not alone"'
	$(CLUSTER_TESTS) -m alone

test/images: build/horovod build/horovod-torch ## every image (both frameworks) with its own and its ancestors' checks
	IMAGE_TAG=$(IMAGE_TAG) FLAVOUR=$(FLAVOUR) $(PYTEST_IMAGES) tests/images --image all

# CI builds the GPU chain too (about 11 minutes cold, 3.4 GB of wheels; docs/benchmarks.md), so
# its Dockerfiles and NCCL build cannot rot; without a GPU only the checks that need none run.
test/images-gpu: ## the GPU image chain (built if missing), every check that needs no GPU
	$(MAKE) --no-print-directory test/images FLAVOUR=gpu

test/runner: build ## horovodrun unit tests (host, no docker; knob flags are checked by the built engine)
	PYTHONPATH=$(CURDIR) $(PYTHON) -m pytest -q tests/runner

clean/images: ## remove FLAVOUR's images (children first; not the rootfs), test containers, builder stages
	@c=$$($(DOCKER) ps -aq --filter label=io.horovod.test); [ -z "$$c" ] || $(DOCKER) rm -f $$c
	@n=$$($(DOCKER) network ls -q --filter label=io.horovod.test); [ -z "$$n" ] || $(DOCKER) network rm $$n
	@v=$$($(DOCKER) volume ls -q --filter label=io.horovod.test); [ -z "$$v" ] || $(DOCKER) volume rm $$v
	-$(DOCKER) rmi $(LATEST) $(LATEST_TORCH) $(LATEST_EXTRA_$(FLAVOUR)) $(BUILDER_REF) $(foreach i,$(call reverse,$(IMAGES)),$(call image_ref,$(i))) 2>/dev/null
	@# Dangling images carrying the tensorflow layer's label: replaced builders (which inherit
	@# it; a LABEL step of their own costs 12 s) and replaced tensorflow layers.
	-$(DOCKER) image prune -f --filter label=io.horovod.tensorflow.version >/dev/null

# ---------------------------------------------------------------------------------------------
# Local cluster: compose/compose.yaml (Compose v2) with the images above; the launcher finds the
# workers itself and horovodrun reads its hostfile ($HOROVOD_HOSTFILE).
# ---------------------------------------------------------------------------------------------
WORKERS ?= 2
SLOTS ?= 2
CLUSTER ?= horovod
# USER_IMAGE: your image (FROM horovod:latest, examples/user-image) instead of horovod:<tag>;
# WORKSPACE: a host folder mounted at /workspace on every container.
USER_IMAGE ?=
WORKSPACE ?=
# FRAMEWORK=torch: the cluster runs horovod:<tag>-torch (make images-torch), the demo trains
# examples/pytorch_classifier.py instead of the Keras example.
FRAMEWORK ?= tensorflow
IMAGES_FOR_tensorflow := images
IMAGES_FOR_torch := images-torch
CLUSTER_TAG_tensorflow := $(IMAGE_TAG)
CLUSTER_TAG_torch := $(IMAGE_TAG)-torch
$(if $(IMAGES_FOR_$(FRAMEWORK)),,$(error FRAMEWORK=$(FRAMEWORK): expected tensorflow or torch))
# Shaped links (docs/shaped-links.md): LINK_RATE=400mbit limits what every worker sends on the
# cluster network (tc tbf), LINK_RATE_<n>=200mbit worker n's own; LINK_BURST, LINK_LATENCY tune
# tbf. Only with a rate is compose/compose.shaped.yaml added: it grants the workers NET_ADMIN.
LINK_RATE ?=
LINK_BURST ?=
LINK_LATENCY ?=
link_empty :=
link_space := $(link_empty) $(link_empty)
link_comma := ,
LINK_RATES := $(subst $(link_space),$(link_comma),$(strip $(foreach v,$(sort $(filter LINK_RATE_%,\
  $(.VARIABLES))),$(if $($(v)),$(v:LINK_RATE_%=%)=$($(v))))))
LINK_FILE := $(if $(LINK_RATE)$(LINK_RATES),-f compose/compose.shaped.yaml)
COMPOSE = HOROVOD_IMAGE_TAG=$(CLUSTER_TAG_$(FRAMEWORK)) HOROVOD_SLOTS_PER_WORKER=$(SLOTS) \
  HOROVOD_IMAGE=$(USER_IMAGE) HOROVOD_WORKSPACE=$(WORKSPACE) \
  HOROVOD_LINK_RATE=$(LINK_RATE) HOROVOD_LINK_RATES=$(LINK_RATES) \
  HOROVOD_LINK_BURST=$(LINK_BURST) HOROVOD_LINK_LATENCY=$(LINK_LATENCY) \
  $(DOCKER) compose -f compose/compose.yaml $(LINK_FILE) -p $(CLUSTER)
CMD ?= horovodrun python -m horovod.selftest
DEMO_CMD_tensorflow := horovodrun python /opt/horovod/examples/tensorflow2_keras_digits.py --epochs 10
DEMO_CMD_torch := horovodrun python /opt/horovod/examples/pytorch_classifier.py --epochs 10
DEMO_CMD ?= $(DEMO_CMD_$(FRAMEWORK))

.PHONY: demo cluster-up cluster-run cluster-down test/cluster

demo: $(IMAGES_FOR_$(FRAMEWORK)) ## the main job: build what is missing, train the Keras example across a 2-worker cluster, tear it down (FRAMEWORK=torch: a PyTorch model)
	@$(MAKE) --no-print-directory cluster-up WORKERS=2 \
	  && $(MAKE) --no-print-directory cluster-run CMD="$(DEMO_CMD)"; rc=$$?; \
	  $(MAKE) --no-print-directory cluster-down; exit $$rc

cluster-up: $(IMAGES_FOR_$(FRAMEWORK)) ## start a cluster of WORKERS workers (SLOTS ranks each) and a launcher, and wait until it is ready (USER_IMAGE=, WORKSPACE=, LINK_RATE=: docs/shaped-links.md)
	@# Shaped: the workers first, so that a rate tc cannot take fails now, with the workers' reason.
	$(if $(LINK_FILE),HOROVOD_CLUSTER_COMMAND="sleep infinity" $(COMPOSE) up -d --wait --scale worker=$(WORKERS) worker \
	  || { $(COMPOSE) logs --no-log-prefix worker | grep -o 'horovod link: .*' | sort -u >&2; exit 1; })
	HOROVOD_CLUSTER_COMMAND="sleep infinity" $(COMPOSE) up -d --wait --scale worker=$(WORKERS)
	@$(COMPOSE) exec -T launcher sh -c 'echo "cluster $(CLUSTER) is up; hostfile:"; cat $$HOROVOD_HOSTFILE'
	@$(if $(LINK_FILE),scripts/cluster_ps.sh $(CLUSTER))

cluster-run: ## run CMD in the cluster's launcher (default: the selftest on every slot)
	$(COMPOSE) exec -T launcher sh -c '$(CMD)'

cluster-down: ## stop the cluster and delete its key pair
	$(COMPOSE) down -v -t 1

.PHONY: cluster-ps
cluster-ps: ## each worker of the cluster: address, NET_ADMIN, link rate (tc qdisc in it; cluster-up LINK_RATE=400mbit [LINK_RATE_2=..])
	@scripts/cluster_ps.sh $(CLUSTER)

test/cluster: build/horovod build/horovod-torch ## compose clusters of 2 and 3 workers: collectives, training, faults
	IMAGE_TAG=$(IMAGE_TAG) $(PYTEST_IMAGES) tests/cluster
include compose/ray.mk  # the Ray cluster: make ray-up, ray-run, ray-down, demo-ray

include compose/spark.mk

# ---------------------------------------------------------------------------------------------
# Registries and Kubernetes: `make push` puts FLAVOUR's layers into a registry a cluster can pull
# from; charts/horovod (Helm 3/4 chart) and deploy/mpijob.yaml run them there. No cluster runs
# here: test/k8s renders the chart with Helm's Go code, validates it against Kubernetes' schemas
# and runs the rendered pods as containers (docs/kubernetes.md says what that leaves out).
# ---------------------------------------------------------------------------------------------
REGISTRY ?=
REGISTRY_LATEST_cpu := latest
REGISTRY_LATEST_gpu := latest-gpu
latest_ref = $(if $(filter horovod,$(1)),horovod:$(REGISTRY_LATEST_$(FLAVOUR)),$(if $(filter horovod-torch,$(1)),$(LATEST_TORCH),$(if $(TAG_SUFFIX_$(1)),horovod:latest$(TAG_SUFFIX_$(1)),horovod/$(1):$(REGISTRY_LATEST_$(FLAVOUR)))))
K8S_VALUES ?=
K8S_SET ?=

.PHONY: push k8s-render test/k8s test/k8s-render

push: ## push FLAVOUR's built layers to REGISTRY=host:port, as <version>-<flavour> and latest(-gpu): make push REGISTRY=127.0.0.1:5000
	@[ -n "$(REGISTRY)" ] || { echo "make push: set REGISTRY=host:port (e.g. REGISTRY=127.0.0.1:5000)" >&2; exit 2; }
	@set -e; for pair in $(foreach i,$(IMAGES),$(call image_ref,$(i))=$(call latest_ref,$(i))); do \
	  src=$${pair%%=*}; latest=$${pair#*=}; \
	  $(DOCKER) image inspect $$src >/dev/null 2>&1 || { echo "make push: $$src missing: run make images FLAVOUR=$(FLAVOUR)" >&2; exit 1; }; \
	  for dst in $(REGISTRY)/$$src $(REGISTRY)/$$latest; do \
	    $(DOCKER) tag $$src $$dst && $(DOCKER) push -q $$dst; \
	  done; \
	done

k8s-render: ## print the chart's manifests like `helm template` (K8S_VALUES=file.yaml, K8S_SET=workers=4,image.registry=host:port)
	@$(PYTHON) scripts/k8s_render.py $(if $(K8S_VALUES),-f $(K8S_VALUES)) $(if $(K8S_SET),--set $(K8S_SET))

test/k8s-render: ## the chart, the MPIJob and the Kubeflow Trainer runtime rendered, linted and validated offline, the key hook's API client (seconds, no docker)
	PYTHONPATH=$(CURDIR) $(PYTEST_IMAGES) tests/k8s/test_chart.py tests/k8s/test_mpijob.py tests/k8s/test_trainer.py tests/k8s/test_podrun.py tests/k8s/test_keys_client.py

test/k8s: build/horovod ## test/k8s-render, then the rendered pods run as containers, make push to a local registry and back
	PYTHONPATH=$(CURDIR) IMAGE_TAG=$(IMAGE_TAG) FLAVOUR=$(FLAVOUR) $(PYTEST_IMAGES) tests/k8s
