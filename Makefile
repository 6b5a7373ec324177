# Horovod: engine, images, cluster. `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help
PYTHON ?= python3
MPIRUN ?= mpirun --allow-run-as-root --oversubscribe
BUILD_DIR ?= build/dev

# ---------------------------------------------------------------------------------------------
# Engine (csrc/ + horovod/)
# ---------------------------------------------------------------------------------------------
.PHONY: help build demo test test/engine bench clean

help: ## list the targets
	@grep -hE '^[a-zA-Z0-9_/%.-]+:.*## ' $(MAKEFILE_LIST) | \
	  awk 'BEGIN{FS=":.*## "}{printf "  %-24s %s\n", $$1, $$2}'

build: ## compile csrc/ in place (libhorovod_core.so + horovod/_core) for tests from the tree
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release \
	  -Dpybind11_DIR=$$($(PYTHON) -m pybind11 --cmakedir) -DPython_EXECUTABLE=$$(command -v $(PYTHON)) >/dev/null
	cmake --build $(BUILD_DIR) -j2

demo: build ## train examples/numpy_linear_regression.py on 2 MPI ranks
	PYTHONPATH=$(CURDIR) $(MPIRUN) -np 2 $(PYTHON) examples/numpy_linear_regression.py

test/engine: build ## engine tests under real MPI ranks (np 1, 2 and 3)
	PYTHONPATH=$(CURDIR) $(PYTHON) -m pytest -q tests/engine

bench: build ## allreduce benchmark: engine vs ring vs MPI_Allreduce, np 2 (shared memory and TCP)
	PYTHONPATH=$(CURDIR) $(MPIRUN) -np 2 --bind-to core $(PYTHON) scripts/bench_allreduce.py
	PYTHONPATH=$(CURDIR) $(MPIRUN) -np 2 --bind-to core --mca btl tcp,self $(PYTHON) scripts/bench_allreduce.py

test: test/engine ## everything CI runs

clean: ## remove build outputs
	rm -rf build horovod/_core*.so horovod/libhorovod_core.so
