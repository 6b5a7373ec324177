"""ray (horovod:<tag>-ray): Ray at its pin, and horovod.ray.RayExecutor running ranks in Ray
actors inside the image, on a Ray head started with `ray start` as compose/compose.ray.yaml
starts it (token authentication)."""

import json

import pytest
import testinfra

# Token mode as on the compose cluster; no usage reports (nothing outside can be reached).
RAY_ENV = {"RAY_AUTH_MODE": "token", "RAY_USAGE_STATS_ENABLED": "0"}
# A Ray head of 2 CPUs in the container; bounded, so a hang fails the check.
START_HEAD = (
    "ray get-auth-token --generate >/dev/null && timeout 120 ray start --head --num-cpus=2 "
    "--object-store-memory=100000000 --include-dashboard=false"
)
# The driver: 2 ranks in 2 actors, an allreduce across them and each rank's view; then
# shutdown() and the actors' processes gone.
DRIVER = """
import json, subprocess, time
import ray
from horovod.ray import RayExecutor

def rank_sum():
    import os
    import numpy as np
    import horovod.numpy as hvd
    hvd.init()
    total = hvd.allreduce(np.full(4, hvd.rank() + 1.0), op=hvd.Sum, name="image.sum")
    return [hvd.rank(), hvd.size(), hvd.local_rank(), total.tolist(), os.getpid()]

ray.init(address="auto", log_to_driver=False)
executor = RayExecutor(RayExecutor.create_settings(timeout_s=60), num_workers=2)
executor.start()
rows = executor.run(rank_sum)
executor.shutdown()
deadline = time.monotonic() + 30
while time.monotonic() < deadline:
    # Anchored: the actors' process title starts so (this script's shell has the text too).
    left = subprocess.run(["pgrep", "-af", "^ray::BaseHorovodWorker"], capture_output=True,
                          text=True).stdout.splitlines()
    if not left:
        break
    time.sleep(0.5)
print("RESULT " + json.dumps({"rows": rows, "left": left}))
"""


@pytest.fixture
def ray_host(containers, ref):
    """A fresh container of the image with a Ray head running in it."""
    c = containers.start(ref, shm_size="256m", environment=RAY_ENV)
    return testinfra.get_host(f"docker://{c.id}")


@pytest.mark.layer("ray")
def test_ray_version_agrees_with_pin(host, inspect, pins, run_ok):
    pin = pins["RAY_VERSION"]
    assert inspect["Labels"].get("io.horovod.ray.version") == pin
    assert inspect["Env"].get("RAY_VERSION") == pin
    assert run_ok(host, "ray --version") == f"ray, version {pin}"
    assert run_ok(host, "python -c 'import ray; print(ray.__version__)'") == pin


@pytest.mark.layer("ray")
def test_parent_pins_kept_and_pip_check(host, pins, run_ok, tf_package):
    """Ray went in without moving what the parent pinned (numpy, TensorFlow, Horovod)."""
    out = run_ok(
        host,
        "python -c 'import importlib.metadata as m; "
        f'print(m.version("numpy"), m.version("{tf_package}"), m.version("horovod"))\'',
    )
    assert out.split() == [
        pins["NUMPY_VERSION"],
        pins["TENSORFLOW_VERSION"],
        pins["HOROVOD_VERSION"],
    ]
    assert "pip check: consistent" in run_ok(host, "pip-check")


@pytest.mark.layer("ray")
def test_labels_name_the_layer(inspect):
    labels = inspect["Labels"]
    assert labels["org.opencontainers.image.base.name"].startswith("horovod:")
    assert "Ray" in labels["org.opencontainers.image.description"]


@pytest.mark.layer("ray")
def test_runs_as_the_other_layers(inspect, user_host, run_ok):
    """The parent's command (the banner), and Ray usable as mpiuser too."""
    assert inspect["Cmd"] == ["horovod-banner"]
    out = run_ok(user_host, "python -c 'import ray, horovod.ray; print(ray.__version__)'")
    assert out.endswith(inspect["Env"]["RAY_VERSION"])


@pytest.mark.layer("ray")
def test_ray_executor_allreduce_in_the_image(ray_host, run_ok):
    """`ray start --head`, then a RayExecutor of 2 workers: ranks 0 and 1 in two actors, their
    allreduce, and no actor process left after shutdown()."""
    run_ok(ray_host, START_HEAD)
    out = run_ok(ray_host, f"timeout 240 python - <<'EOF'\n{DRIVER}\nEOF")
    result = json.loads(out.split("RESULT ", 1)[1])
    rows = result["rows"]
    assert [r[:3] for r in rows] == [[0, 2, 0], [1, 2, 1]], rows
    assert all(r[3] == [3.0] * 4 for r in rows), rows
    assert rows[0][4] != rows[1][4], "two ranks in one process"
    assert result["left"] == [], f"actor processes left after shutdown(): {result['left']}"


@pytest.mark.layer("ray")
def test_check_build_names_ray(host, pins, run_ok):
    """`horovodrun --check-build` says the Ray it has and echoes the image's pin."""
    out = run_ok(host, "horovodrun --check-build")
    rows = {line.split("  ")[0].strip(): line for line in out.splitlines()}
    assert f"ray {pins['RAY_VERSION']} installed" in rows["Ray"], out
    assert f"RAY_VERSION={pins['RAY_VERSION']}" in rows["image pins"], out
