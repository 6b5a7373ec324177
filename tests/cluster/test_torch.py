"""The torch image on the compose cluster, through the knob every image goes through
(HOROVOD_IMAGE_TAG=<tag>-torch; `make cluster-up FRAMEWORK=torch` sets it): horovodrun finds the
workers and trains examples/pytorch_classifier.py across both, the ranks in sync."""

import re

from tests.support.compose import TAG, make_cluster


def test_torch_image_trains_across_the_cluster():
    c = make_cluster(2, env={"HOROVOD_IMAGE_TAG": f"{TAG}-torch"})
    try:
        out, err = c.run_ok(
            "horovodrun python /opt/horovod/examples/pytorch_classifier.py --epochs 3",
            timeout=600,
        )
        rows = re.findall(
            r"^rank (\d+) on (\S+): test accuracy ([0-9.]+), .* weights (\w+)$", out, re.M
        )
        assert sorted(int(r) for r, *_ in rows) == [0, 1, 2, 3], out + err
        assert len({h for _, h, _, _ in rows}) == 2, out
        assert len({w for *_, w in rows}) == 1, f"ranks' weights differ:\n{out}"
        assert float(rows[0][2]) > 0.6, out
    finally:
        c.down()
