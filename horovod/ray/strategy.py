"""Upstream's `horovod.ray.strategy.create_placement_group`: a placement group of
`num_bundles` bundles of `resources_per_bundle`, once Ray has reserved it. RayExecutor reserves
its own through horovod/ray/placement.py."""

from horovod.ray.placement import _show


def create_placement_group(resources_per_bundle, num_bundles, pg_timeout, pg_strategy):
    """(placement group, bundles); TimeoutError naming the request after pg_timeout seconds
    (the group is removed again). Zero entries are dropped: Ray refuses them."""
    import ray

    bundle = {k: float(v) for k, v in resources_per_bundle.items() if v}
    bundles = [dict(bundle) for _ in range(num_bundles)]
    group = ray.util.placement_group(bundles, strategy=pg_strategy)
    ready, _ = ray.wait([group.ready()], timeout=pg_timeout)
    if not ready:
        ray.util.remove_placement_group(group)
        raise TimeoutError(
            f"horovod.ray: could not place {num_bundles} bundle(s) of {_show(bundle)} "
            f"({pg_strategy}) within {pg_timeout} s; free now: {_show(ray.available_resources())}"
        )
    return group, bundles
