# A Ray cluster on compose (compose/compose.ray.yaml): a head and RAY_WORKERS Ray workers of
# horovod:<tag>-ray (make build/ray), for horovod.ray.RayExecutor; the driver runs on the head.
# Included by the Makefile (IMAGE_TAG, DOCKER, WORKSPACE come from there). docs/ray.md.
RAY_WORKERS ?= 2
RAY_WORKER_CPUS ?= 2
RAY_CLUSTER ?= hvdray
RAY_DASHBOARD_PORT ?= 8265
RAY_CMD ?= ray status
RAY_DEMO_ARGS ?= --workers 4 --epochs 10
RAY_COMPOSE = HOROVOD_IMAGE_TAG=$(IMAGE_TAG) HOROVOD_RAY_WORKER_CPUS=$(RAY_WORKER_CPUS) \
  HOROVOD_RAY_DASHBOARD_PORT=$(RAY_DASHBOARD_PORT) HOROVOD_WORKSPACE=$(WORKSPACE) \
  $(DOCKER) compose -f compose/compose.ray.yaml -p $(RAY_CLUSTER)
RAY_UP = $(RAY_COMPOSE) up -d --wait --scale ray-worker=$(RAY_WORKERS)
RAY_DOWN = $(RAY_COMPOSE) down -v -t 1

.PHONY: ray-up ray-run ray-down demo-ray

ray-up: build/ray ## a Ray cluster: a head and RAY_WORKERS Ray workers (RAY_WORKER_CPUS each) of horovod:<tag>-ray; returns when every worker joined; dashboard on 127.0.0.1:RAY_DASHBOARD_PORT
	$(RAY_UP)
	@$(RAY_COMPOSE) exec -T ray-head sh -c 'echo "Ray cluster $(RAY_CLUSTER) is up:"; ray status | sed -n "/^Node status/,/^Pending/p"'

ray-run: ## run RAY_CMD on the Ray cluster's head (default: ray status)
	$(RAY_COMPOSE) exec -T ray-head sh -c '$(RAY_CMD)'

ray-down: ## stop the Ray cluster and delete its token
	$(RAY_DOWN)

# The example is this checkout's (read from stdin: RayExecutor ships train() to the actors by
# value), so the demo needs no image rebuilt for an edit of it; the image has it in
# /opt/horovod/examples too.
demo-ray: build/ray ## the Keras digits model on 4 ranks (Ray actors) across a 2-worker Ray cluster: each rank's host, accuracy, weights; torn down also on failure
	@$(RAY_UP) && $(RAY_COMPOSE) exec -T ray-head python - $(RAY_DEMO_ARGS) <examples/ray_keras_digits.py; \
	  rc=$$?; $(RAY_DOWN); exit $$rc
demo-ray: RAY_WORKERS = 2

# tests/cluster/test_ray.py runs on this image.
test/cluster: build/ray
