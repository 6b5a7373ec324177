"""Cost of `state.commit()` for an elastic job (issue 18), against the fixed-world commit in the
same run: the fixed-world commit copies the variables to host memory; the elastic one also
pickles them into the rank's file in /dev/shm and asks (rank 0) / broadcasts whether the hosts
changed. Models: the digits MLP of the elastic example, and a ~25 M-parameter MLP.

    PYTHONPATH=$PWD mpirun --allow-run-as-root -np 2 \
        build/venv/bin/python scripts/bench_elastic_commit.py
"""

import os
import tempfile
import time
import uuid

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402

import horovod.tensorflow.keras as hvd  # noqa: E402
from horovod.common import elastic_worker  # noqa: E402


def model_of(widths):
    layers = [keras.Input((widths[0],))]
    layers += [keras.layers.Dense(w) for w in widths[1:]]
    m = keras.Sequential(layers)
    m.compile(optimizer=keras.optimizers.SGD(momentum=0.9), loss="mse")
    m.optimizer.build(m.trainable_variables)
    return m


def timed(state, n):
    state.commit()  # warm
    start = time.perf_counter()
    for _ in range(n):
        state.commit()
    return (time.perf_counter() - start) / n


def main():
    hvd.init()
    store = tempfile.mkdtemp(dir="/dev/shm")
    job = uuid.uuid4().hex[:8]
    for name, widths, n in [
        ("digits MLP", [64, 64, 10], 50),
        ("25M-parameter MLP", [2048, 4096, 4096], 5),
    ]:
        model = model_of(widths)
        params = model.count_params()
        state = hvd.elastic.KerasState(model, batch=0, epoch=0)
        os.environ.pop("HOROVOD_ELASTIC", None)
        fixed = timed(state, n)
        os.environ.update(
            HOROVOD_ELASTIC="1", HOROVOD_ELASTIC_JOB_ID=job, HOROVOD_ELASTIC_STORE=store
        )
        assert elastic_worker.active()
        elastic = timed(state, n)
        os.environ.pop("HOROVOD_ELASTIC")
        if hvd.rank() == 0:
            print(
                f"{name}: {params:,} parameters (+ momentum): commit fixed world "
                f"{fixed * 1e3:.2f} ms, elastic {elastic * 1e3:.2f} ms "
                f"(x{elastic / fixed:.1f}; +{(elastic - fixed) * 1e3:.2f} ms per commit)",
                flush=True,
            )
    os.system(f"rm -rf {store}")


if __name__ == "__main__":
    main()
