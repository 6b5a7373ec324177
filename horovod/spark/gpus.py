"""A rank's GPUs from its Spark task's resources (`TaskContext.resources()['gpu']`).

Spark's GPU-aware scheduling (spark.task.resource.gpu.amount, ...) gives each task GPU
addresses. The rank's child process gets `CUDA_VISIBLE_DEVICES` = the addresses of every task
of the job on its host, in local-rank order, so that device `hvd.local_rank()` is the rank's own
GPU (the pinning every Horovod script does: `torch.cuda.set_device(hvd.local_rank())`) and NCCL
sees the host's peers' devices (as horovod.ray does). With more than one GPU per task, the
rank's own devices are `get_available_devices()` (indices inside CUDA_VISIBLE_DEVICES). Where
two tasks of a host were given the same address (two Spark workers of one machine discovering
the same GPUs), sharing would hand one GPU to two ranks: each rank then sees only its own.
"""

import json
import os

# The rank's own GPUs: indices inside CUDA_VISIBLE_DEVICES, and Spark's addresses.
DEVICES_VARIABLE = "HOROVOD_SPARK_GPU_DEVICES"
ADDRESSES_VARIABLE = "HOROVOD_SPARK_GPU_ADDRESSES"


def visible_devices(slots, addresses, index):
    """The GPU variables of the task `index`, given every task's Slot (rank, host, local_rank)
    and GPU addresses (a list of str per task, in partition order). {} without GPUs."""
    mine = list(addresses[index])
    if not mine:
        return {}
    host = slots[index].host
    on_host = sorted(
        (s.local_rank, list(a)) for s, a in zip(slots, addresses) if s.host == host
    )  # fmt: skip
    shared = [a for _, task in on_host for a in task]
    if len(set(shared)) != len(shared):
        shared = mine  # the host's tasks were given overlapping addresses: see the docstring
    first = shared.index(mine[0])
    return {
        "CUDA_VISIBLE_DEVICES": ",".join(shared),
        DEVICES_VARIABLE: ",".join(str(first + i) for i in range(len(mine))),
        ADDRESSES_VARIABLE: ",".join(mine),
    }


def task_gpu_variables(ctx, slots):
    """The GPU variables of this barrier task (ctx: BarrierTaskContext): its addresses are
    exchanged with the stage's other tasks (allGather; every task of a stage has the same
    resource profile, so either all of them do this or none)."""
    gpu = ctx.resources().get("gpu")
    if gpu is None or not gpu.addresses:
        return {}
    everyone = [json.loads(m) for m in ctx.allGather(json.dumps(list(gpu.addresses)))]
    return visible_devices(slots, everyone, ctx.partitionId())


def get_available_devices():
    """Inside fn: the rank's GPUs as device indices of this process (strings, as upstream's
    `horovod.spark.task.get_available_devices()`); [] where the task has none. Under
    CUDA_VISIBLE_DEVICES these are not Spark's addresses (see ADDRESSES_VARIABLE)."""
    value = os.environ.get(DEVICES_VARIABLE, "")
    return value.split(",") if value else []
