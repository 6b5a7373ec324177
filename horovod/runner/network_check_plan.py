"""The launcher's side of `horovodrun --check-network`: the plan every rank of the check reads
(HOROVOD_NETWORK_CHECK_PLAN; task/network_check.py measures by it), the model size to predict
for, and the bound on the whole check."""

import os

from horovod.runner import probe
from horovod.runner.command import rank_hosts
from horovod.runner.inherited import usable_cpus


def model_bytes(args):
    """Gradient bytes to predict for: --model-bytes, or a keras.applications model's float32
    parameters (built without weights: nothing is downloaded)."""
    if args.model_bytes:
        return args.model_bytes
    if not args.model:
        return None
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        import keras
    except ImportError as e:
        raise ValueError(f"needs Keras, which is not importable ({e})") from None
    build = getattr(keras.applications, args.model, None)
    error = (
        f"keras.applications has no model {args.model!r} (e.g. ResNet50, MobileNetV2, "
        "EfficientNetB0)"
    )
    if not callable(build):  # missing, or a submodule such as 'resnet'
        raise ValueError(error)
    try:
        return int(build(weights=None).count_params()) * 4
    except (TypeError, ValueError):  # a helper such as 'decode_predictions'
        raise ValueError(error) from None


def check_bound(plan):
    """Seconds the whole check may take: every step at its bound, plus start-up."""
    hosts = set(plan["placement"].values())
    pairs = len(hosts) * (len(hosts) + 1) // 2
    steps = 3 * pairs + 3 + len(plan["subnets"]) * len(hosts)
    return 60.0 + steps * (plan["step_timeout"] + 2 * plan["seconds"])


def check_plan(args, hosts, probes, choice):
    """What every rank of --check-network needs: where each rank runs, the subnets to compare."""
    from horovod.runner import network

    hosts = hosts or [("localhost", args.np or usable_cpus())]
    np_ = args.np or sum(s for _, s in hosts)
    placement = rank_hosts(hosts, np_) or {r: "localhost" for r in range(np_)}
    return {
        "placement": {str(r): h for r, h in placement.items()},
        "network": choice.mpi_value() if choice else "this host",
        "interface": "/".join(choice.names()) if choice else "shared memory",
        "subnets": {
            net: {h: list(m) for h, m in members.items()}
            for net, members in network.shared_subnets(probes).items()
        }
        if probes
        else {},
        # The hosts whose /dev/shm is small (probe.SMALL_SHM), a cause the report can name.
        "small_shm": {
            h: p["shm_bytes"]
            for h, p in (probes or {}).items()
            if p.get("shm_bytes") is not None and p["shm_bytes"] < probe.SMALL_SHM
        },
        "seconds": args.check_seconds,
        "step_timeout": args.check_step_timeout,
        "model_bytes": model_bytes(args),
        "step_time_ms": args.step_time_ms,
    }
