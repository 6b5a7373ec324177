"""MetricAverageCallback when ranks log different metrics (a subject module of the Keras
scenario program, scenarios_keras.py): its epoch-end hook is called directly with each rank's
logs, as model.fit calls it."""

import tensorflow as tf

import horovod.tensorflow.keras as hvd
from tests.support.scenario import expect_error


def sc_metrics_differ():
    """Ranks logging different metrics get a FailedPreconditionError on every rank naming each
    rank's metrics. Before: metrics were averaged by position in one vector, so two different
    metrics of one count were averaged with each other silently, other counts gave an error
    naming only the vector's lengths, and a rank logging no metric returned alone while the
    others waited. Equal metrics are still averaged; no metric on every rank is no op."""
    r, n = hvd.rank(), hvd.size()
    others = [q for q in range(n) if q != 1]
    others_log = f"ranks {others} log" if len(others) > 1 else f"rank {others[0]} logs"
    cb = hvd.callbacks.MetricAverageCallback()
    cases = [  # (rank 1's logs, the others' logs, needles)
        ({"loss": 1.0, "mae": 0.5}, {"loss": 1.0, "accuracy": 0.5}, ["'accuracy'", "'mae'"]),
        ({"loss": 1.0, "mae": 0.5}, {"loss": 1.0}, [f"{others_log} ['loss']"]),
        ({"note": "text"}, {"loss": 1.0}, ["rank 1 logs []"]),
    ]
    for epoch, (on_1, elsewhere, needles) in enumerate(cases):
        logs = dict(on_1 if r == 1 else elsewhere)
        expect_error(
            lambda logs=logs, epoch=epoch: cb.on_epoch_end(epoch, logs),
            tf.errors.FailedPreconditionError,
            "MetricAverageCallback",
            f"epoch {epoch}",
            f"rank 1 logs {sorted(k for k, v in on_1.items() if isinstance(v, float))}",
            others_log,
            *needles,
        )
    logs = {"loss": float(r), "accuracy": 1.0, "note": "kept"}
    cb.on_epoch_end(len(cases), logs)
    assert logs == {"loss": (n - 1) / 2, "accuracy": 1.0, "note": "kept"}, logs
    logs = {"note": f"rank {r}"}
    cb.on_epoch_end(len(cases) + 1, logs)
    assert logs == {"note": f"rank {r}"}, logs
