"""The mapping from the tasks' GPU addresses to each rank's CUDA_VISIBLE_DEVICES
(horovod/spark/gpus.py), without Spark: tests/spark/test_elastic.py checks it on a local
cluster with Spark's GPU scheduling."""

from horovod.spark import gpus
from horovod.spark.task import assign_ranks


def variables(addresses, task_addresses):
    slots = assign_ranks(addresses)
    return [gpus.visible_devices(slots, task_addresses, i) for i in range(len(addresses))]


def test_a_hosts_ranks_share_its_gpus_in_local_rank_order():
    # Two hosts; the tasks' partition order interleaves them.
    got = variables(["a:1", "b:1", "a:2", "b:2"], [["3"], ["0"], ["1"], ["5"]])
    assert [v["CUDA_VISIBLE_DEVICES"] for v in got] == ["3,1", "0,5", "3,1", "0,5"]
    # Device hvd.local_rank() is the task's own address.
    assert [v[gpus.DEVICES_VARIABLE] for v in got] == ["0", "0", "1", "1"]
    assert [v[gpus.ADDRESSES_VARIABLE] for v in got] == ["3", "0", "1", "5"]


def test_several_gpus_per_task_are_the_tasks_consecutive_devices():
    got = variables(["a:1", "a:2"], [["0", "1"], ["2", "3"]])
    assert got[1] == {
        "CUDA_VISIBLE_DEVICES": "0,1,2,3",
        gpus.DEVICES_VARIABLE: "2,3",
        gpus.ADDRESSES_VARIABLE: "2,3",
    }


def test_overlapping_addresses_on_a_host_leave_each_rank_its_own():
    # Two workers of one machine that discovered the same GPU: sharing would give it twice.
    got = variables(["a:1", "a:2"], [["0"], ["0"]])
    assert [v["CUDA_VISIBLE_DEVICES"] for v in got] == ["0", "0"]
    assert [v[gpus.DEVICES_VARIABLE] for v in got] == ["0", "0"]


def test_no_gpus_no_variables(monkeypatch):
    assert variables(["a:1", "a:2"], [[], []]) == [{}, {}]
    monkeypatch.delenv(gpus.DEVICES_VARIABLE, raising=False)
    assert gpus.get_available_devices() == []
    monkeypatch.setenv(gpus.DEVICES_VARIABLE, "2,3")
    assert gpus.get_available_devices() == ["2", "3"]
