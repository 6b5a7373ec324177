# Built by `docker compose -f compose/compose.ray.yaml` only when the Ray image is missing
# (pull_policy: never, so nothing is pulled). It fails on purpose, and its error is the instruction.
FROM scratch
RUN ["horovod:<tag>-ray image missing: it is built locally, never pulled. Run `make build/ray` in the horovod repository (or `make ray-up` / `make demo-ray`), then retry"]
