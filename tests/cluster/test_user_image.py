"""Your own code on the compose cluster: an image built FROM horovod:<tag> with
examples/user-image (HOROVOD_IMAGE), and a host folder mounted as /workspace
(HOROVOD_WORKSPACE) with no image built at all."""

import json
import re
import uuid

import docker
import pytest

from tests.support.compose import TAG, make_cluster
from tests.support.images import TEST_LABEL
from tests.support.paths import EXAMPLES


@pytest.fixture(scope="module")
def user_image():
    """examples/user-image built FROM horovod:<tag>, removed afterwards."""
    client = docker.from_env()
    tag = f"hvdtest-user:{uuid.uuid4().hex[:8]}"
    client.images.build(
        path=str(EXAMPLES / "user-image"),
        tag=tag,
        buildargs={"BASE_IMAGE": f"horovod:{TAG}"},
        labels=TEST_LABEL,
        rm=True,
        forcerm=True,
    )
    yield tag
    client.images.remove(tag, force=True)


def _rows(out):
    return re.findall(
        r"^user-train: rank (\d+)/(\d+) on (\S+): accuracy ([0-9.]+), weights (\w+)$", out, re.M
    )


def test_derived_image_trains_on_the_cluster(user_image):
    c = make_cluster(2, env={"HOROVOD_IMAGE": user_image})
    try:
        image = c.compose("images", "--format", "json").stdout
        assert user_image.split(":")[0] in image, image
        out, err = c.run_ok(
            "horovodrun python /app/train.py --epochs 10 --out /workspace/result.json",
            timeout=600,
        )
        rows = _rows(out)
        assert sorted(int(r) for r, *_ in rows) == [0, 1, 2, 3], out + err
        assert len({w for *_, w in rows}) == 1, f"ranks' weights differ:\n{out}"
        assert len({h for _, _, h, _, _ in rows}) == 2
        assert float(rows[0][3]) > 0.8, out
        # Rank 0 ran on a worker; the launcher sees its file: /workspace is shared.
        result, _ = c.run_ok("cat /workspace/result.json")
        assert json.loads(result)["ranks"] == 4
    finally:
        c.down()


def test_workspace_folder_without_an_image(tmp_path):
    script = tmp_path / "hello.py"
    script.write_text(
        "import horovod.numpy as hvd, numpy as np\n"
        "hvd.init()\n"
        "s = hvd.allreduce(np.ones(3) * hvd.rank(), name='w', op=hvd.Sum)\n"
        "print(f'workspace rank {hvd.rank()} sum {s[0]:.0f}', flush=True)\n"
    )
    c = make_cluster(2, slots=1, env={"HOROVOD_WORKSPACE": str(tmp_path)})
    try:
        out, err = c.run_ok("horovodrun python /workspace/hello.py", timeout=180)
        assert sorted(re.findall(r"^workspace rank (\d) sum 1$", out, re.M)) == ["0", "1"], (
            out + err
        )
    finally:
        c.down()
