"""Elastic timings on a compose cluster (issue 18): a worker added with `docker compose up
--scale`, then a worker killed, while the elastic Keras example trains (1 slot per worker).
Prints, from the launcher's output stamped as it arrives: the time from the fault to the driver
starting the next generation, and to its first epoch (training again), plus what was resumed.

    PYTHONPATH=$PWD build/venv/bin/python scripts/bench_elastic_cluster.py
"""

import re
import subprocess
import threading
import time

from tests.support.compose import make_cluster

CMD = (
    "horovodrun --min-np 2 --max-np 3 "
    "--host-discovery-script 'python -m horovod.runner.cluster --discover' "
    "python /opt/horovod/examples/tensorflow2_keras_digits_elastic.py --epochs 30"
)


class Stamped:
    def __init__(self, cmd):
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self.lines = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append((time.monotonic(), line.rstrip()))

    def wait_for(self, pattern, after=0.0, timeout=300):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for t, line in list(self.lines):
                if t >= after and re.search(pattern, line):
                    return t, line
            time.sleep(0.05)
        raise TimeoutError(pattern)


def scenario(c, what, fault):
    job = Stamped(["docker", "exec", c.launcher, "sh", "-c", CMD])
    job.wait_for(r"^Epoch 4/")
    t0 = time.monotonic()
    fault()
    t_gen, _ = job.wait_for(r"elastic: generation 1: ", t0)
    t_resume, resumed = job.wait_for(r"resumed from commit", t0)
    t_epoch, _ = job.wait_for(r"^Epoch 1/", t_resume)
    rc = job.proc.wait(300)
    done = [line for _, line in job.lines if "ELASTIC DONE" in line]
    print(
        f"{what}: next generation started {t_gen - t0:.1f} s after, state resumed at "
        f"{t_resume - t0:.1f} s, training again (first epoch) at {t_epoch - t0:.1f} s; "
        f"rc={rc}; {resumed.split('] ', 1)[-1]}; {len(done)} ranks done, weights "
        f"{'identical' if len({d.split('weights=')[1] for d in done}) == 1 else 'DIFFER'}"
    )


def main():
    c = make_cluster(2, slots=1)
    try:
        scenario(
            c,
            "worker added (2 -> 3)",
            lambda: c.compose("up", "-d", "--wait", "--scale", "worker=3", "--no-recreate"),
        )
        scenario(
            c,
            "worker killed (3 -> 2)",
            lambda: subprocess.run(
                ["docker", "kill", c.worker(3)], check=True, capture_output=True
            ),
        )
    finally:
        c.down()


if __name__ == "__main__":
    main()
