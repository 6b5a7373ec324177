# A Spark standalone cluster on compose (compose/compose.spark.yaml) of the spark image
# (horovod:<tag>-spark, CPU flavour): `make spark-up`, `make spark-down`, `make demo-spark`.
# Included by the Makefile; docs/spark.md says what runs where.
SPARK_WORKERS ?= 2
SPARK_CORES ?= 2
SPARK_PROJECT ?= hvdspark
SPARK_UI_PORT ?= 8080
SPARK_MASTER_URL := spark://spark-master:7077
SPARK_COMPOSE = HOROVOD_IMAGE_TAG=$(IMAGE_TAG) HOROVOD_SPARK_WORKERS=$(SPARK_WORKERS) \
  HOROVOD_SPARK_CORES=$(SPARK_CORES) HOROVOD_SPARK_UI_PORT=$(SPARK_UI_PORT) \
  $(DOCKER) compose -f compose/compose.spark.yaml -p $(SPARK_PROJECT)
# One rank per task slot (4 on 2 workers of 2): the Keras digits model, its weights compared.
SPARK_RANKS = $(shell expr $(SPARK_WORKERS) \* $(SPARK_CORES))
SPARK_DEMO_CMD ?= python /opt/horovod/examples/spark_keras_digits.py --master $(SPARK_MASTER_URL) \
  --num-proc $(SPARK_RANKS) --epochs 10

.PHONY: spark-up spark-down spark-run demo-spark

spark-up: build/spark ## a Spark standalone cluster: master (UI on 127.0.0.1:SPARK_UI_PORT), SPARK_WORKERS workers of SPARK_CORES slots, a driver container; waits until the workers are registered
	$(SPARK_COMPOSE) up -d --wait --scale spark-worker=$(SPARK_WORKERS)
	@echo "Spark cluster $(SPARK_PROJECT) is up: $(SPARK_WORKERS) workers x $(SPARK_CORES) slots at $(SPARK_MASTER_URL); UI http://127.0.0.1:$(SPARK_UI_PORT)"

spark-run: ## run SPARK_CMD in the Spark cluster's driver container (make spark-run SPARK_CMD="python my_job.py")
	$(SPARK_COMPOSE) exec -T driver sh -c '$(SPARK_CMD)'

spark-down: ## stop the Spark cluster and remove its containers and network
	$(SPARK_COMPOSE) down -t 1

demo-spark: build/spark ## horovod.spark.run trains the Keras digits model on 4 ranks across a 2-worker Spark cluster, then takes the cluster down (also on failure)
	@$(MAKE) --no-print-directory spark-up -o build/spark \
	  && $(MAKE) --no-print-directory spark-run SPARK_CMD="$(SPARK_DEMO_CMD)"; rc=$$?; \
	  $(MAKE) --no-print-directory spark-down; exit $$rc

# tests/cluster/test_spark.py runs on this image (a layer of the CPU flavour only).
ifneq ($(filter spark,$(IMAGES)),)
test/cluster: build/spark
endif
