"""horovod.torch's public signatures in upstream Horovod 0.28.1: API facts, no upstream code.

Source: github.com/horovod/horovod, tag v0.28.1 (commit 1d217b59949986d025f6db93c49943fb6b6cc78f),
files horovod/torch/{__init__,mpi_ops,functions,optimizer,sync_batch_norm,compression}.py,
horovod/torch/elastic/{__init__,state,sampler}.py and what they take from horovod/common
(basics.py's HorovodBasics, process_sets.py, elastic.py's State and ObjectState).

Extracted with Python's `ast` from `git show v0.28.1:<file>` (upstream was not imported nor
built): every name horovod/torch/__init__.py imports, resolved to its definition. A function's
parameters; a class's constructor (`__init__` less `self`) under the class's name and each
public method (less `self` unless static; inherited ones from upstream's own base classes) as
`Class.method`. `rank = _basics.rank` and upstream's torch `init(*args, **kwargs)` /
`shutdown(*args, **kwargs)`, which forward to HorovodBasics, have HorovodBasics' method's
parameters. `Compression.none` / `Compression.fp16` are NoneCompressor's / FP16Compressor's
static methods. `DistributedOptimizer()` and `DistributedOptimizer(op=Adasum)` name the methods
of the optimizer that DistributedOptimizer returns (upstream's _DistributedOptimizer and
_DistributedAdasumOptimizer); their `load_state_dict(*args, **kwargs)` only forwards to
torch.optim.Optimizer's and is left out. Left out as well: the constants (Average, Sum, Adasum,
Min, Max, Product, global_process_set) and HorovodInternalError (RuntimeError's constructor).

Each entry: public name -> [(parameter name, inspect.Parameter kind name, default as upstream's
source text or None when there is none)], in upstream's order. tests/torch/test_signatures.py
checks horovod.torch against it.
"""

UPSTREAM_SIGNATURES = {
    "elastic.run": [("func", "POSITIONAL_OR_KEYWORD", None)],
    "elastic.TorchState": [
        ("model", "POSITIONAL_OR_KEYWORD", "None"),
        ("optimizer", "POSITIONAL_OR_KEYWORD", "None"),
        ("kwargs", "VAR_KEYWORD", None),
    ],
    "elastic.TorchState.check_host_updates": [],
    "elastic.TorchState.commit": [],
    "elastic.TorchState.on_hosts_updated": [
        ("timestamp", "POSITIONAL_OR_KEYWORD", None),
        ("update_res", "POSITIONAL_OR_KEYWORD", None),
    ],
    "elastic.TorchState.on_reset": [],
    "elastic.TorchState.register_reset_callbacks": [("callbacks", "POSITIONAL_OR_KEYWORD", None)],
    "elastic.TorchState.reset": [],
    "elastic.TorchState.restore": [],
    "elastic.TorchState.save": [],
    "elastic.TorchState.sync": [],
    "elastic.ElasticSampler": [
        ("dataset", "POSITIONAL_OR_KEYWORD", None),
        ("shuffle", "POSITIONAL_OR_KEYWORD", "True"),
        ("seed", "POSITIONAL_OR_KEYWORD", "0"),
    ],
    "elastic.ElasticSampler.load_state_dict": [("state_dict", "POSITIONAL_OR_KEYWORD", None)],
    "elastic.ElasticSampler.record_batch": [
        ("batch_idx", "POSITIONAL_OR_KEYWORD", None),
        ("batch_size", "POSITIONAL_OR_KEYWORD", None),
    ],
    "elastic.ElasticSampler.reset": [],
    "elastic.ElasticSampler.set_epoch": [("epoch", "POSITIONAL_OR_KEYWORD", None)],
    "elastic.ElasticSampler.state_dict": [],
    "Compression.none.compress": [("tensor", "POSITIONAL_OR_KEYWORD", None)],
    "Compression.none.decompress": [
        ("tensor", "POSITIONAL_OR_KEYWORD", None),
        ("ctx", "POSITIONAL_OR_KEYWORD", None),
    ],
    "Compression.fp16.compress": [("tensor", "POSITIONAL_OR_KEYWORD", None)],
    "Compression.fp16.decompress": [
        ("tensor", "POSITIONAL_OR_KEYWORD", None),
        ("ctx", "POSITIONAL_OR_KEYWORD", None),
    ],
    "allgather_object": [
        ("obj", "POSITIONAL_OR_KEYWORD", None),
        ("name", "POSITIONAL_OR_KEYWORD", "None"),
    ],
    "broadcast_object": [
        ("obj", "POSITIONAL_OR_KEYWORD", None),
        ("root_rank", "POSITIONAL_OR_KEYWORD", "0"),
        ("name", "POSITIONAL_OR_KEYWORD", "None"),
        ("process_set", "POSITIONAL_OR_KEYWORD", "global_process_set"),
    ],
    "broadcast_optimizer_state": [
        ("optimizer", "POSITIONAL_OR_KEYWORD", None),
        ("root_rank", "POSITIONAL_OR_KEYWORD", None),
        ("model", "POSITIONAL_OR_KEYWORD", "None"),
    ],
    "broadcast_parameters": [
        ("params", "POSITIONAL_OR_KEYWORD", None),
        ("root_rank", "POSITIONAL_OR_KEYWORD", None),
    ],
    "allreduce": [
        ("tensor", "POSITIONAL_OR_KEYWORD", None),
        ("average", "POSITIONAL_OR_KEYWORD", "None"),
        ("name", "POSITIONAL_OR_KEYWORD", "None"),
        ("compression", "POSITIONAL_OR_KEYWORD", "Compression.none"),
        ("op", "POSITIONAL_OR_KEYWORD", "None"),
        ("prescale_factor", "POSITIONAL_OR_KEYWORD", "1.0"),
        ("postscale_factor", "POSITIONAL_OR_KEYWORD", "1.0"),
        ("process_set", "POSITIONAL_OR_KEYWORD", "global_process_set"),
    ],
    "allreduce_async": [
        ("tensor", "POSITIONAL_OR_KEYWORD", None),
        ("average", "POSITIONAL_OR_KEYWORD", "None"),
        ("name", "POSITIONAL_OR_KEYWORD", "None"),
        ("op", "POSITIONAL_OR_KEYWORD", "None"),
        ("prescale_factor", "POSITIONAL_OR_KEYWORD", "1.0"),
        ("postscale_factor", "POSITIONAL_OR_KEYWORD", "1.0"),
        ("process_set", "POSITIONAL_OR_KEYWORD", "global_process_set"),
    ],
    "allreduce_": [
        ("tensor", "POSITIONAL_OR_KEYWORD", None),
        ("average", "POSITIONAL_OR_KEYWORD", "None"),
        ("name", "POSITIONAL_OR_KEYWORD", "None"),
        ("op", "POSITIONAL_OR_KEYWORD", "None"),
        ("prescale_factor", "POSITIONAL_OR_KEYWORD", "1.0"),
        ("postscale_factor", "POSITIONAL_OR_KEYWORD", "1.0"),
        ("process_set", "POSITIONAL_OR_KEYWORD", "global_process_set"),
    ],
    "allreduce_async_": [
        ("tensor", "POSITIONAL_OR_KEYWORD", None),
        ("average", "POSITIONAL_OR_KEYWORD", "None"),
        ("name", "POSITIONAL_OR_KEYWORD", "None"),
        ("op", "POSITIONAL_OR_KEYWORD", "None"),
        ("prescale_factor", "POSITIONAL_OR_KEYWORD", "1.0"),
        ("postscale_factor", "POSITIONAL_OR_KEYWORD", "1.0"),
        ("process_set", "POSITIONAL_OR_KEYWORD", "global_process_set"),
    ],
    "grouped_allreduce": [
        ("tensors", "POSITIONAL_OR_KEYWORD", None),
        ("average", "POSITIONAL_OR_KEYWORD", "None"),
        ("name", "POSITIONAL_OR_KEYWORD", "None"),
        ("compression", "POSITIONAL_OR_KEYWORD", "Compression.none"),
        ("op", "POSITIONAL_OR_KEYWORD", "None"),
        ("prescale_factor", "POSITIONAL_OR_KEYWORD", "1.0"),
        ("postscale_factor", "POSITIONAL_OR_KEYWORD", "1.0"),
        ("process_set", "POSITIONAL_OR_KEYWORD", "global_process_set"),
    ],
    "grouped_allreduce_async": [
        ("tensors", "POSITIONAL_OR_KEYWORD", None),
        ("average", "POSITIONAL_OR_KEYWORD", "None"),
        ("name", "POSITIONAL_OR_KEYWORD", "None"),
        ("op", "POSITIONAL_OR_KEYWORD", "None"),
        ("prescale_factor", "POSITIONAL_OR_KEYWORD", "1.0"),
        ("postscale_factor", "POSITIONAL_OR_KEYWORD", "1.0"),
        ("process_set", "POSITIONAL_OR_KEYWORD", "global_process_set"),
    ],
    "grouped_allreduce_": [
        ("tensors", "POSITIONAL_OR_KEYWORD", None),
        ("average", "POSITIONAL_OR_KEYWORD", "None"),
        ("name", "POSITIONAL_OR_KEYWORD", "None"),
        ("op", "POSITIONAL_OR_KEYWORD", "None"),
        ("prescale_factor", "POSITIONAL_OR_KEYWORD", "1.0"),
        ("postscale_factor", "POSITIONAL_OR_KEYWORD", "1.0"),
        ("process_set", "POSITIONAL_OR_KEYWORD", "global_process_set"),
    ],
    "grouped_allreduce_async_": [
        ("tensors", "POSITIONAL_OR_KEYWORD", None),
        ("average", "POSITIONAL_OR_KEYWORD", "None"),
        ("name", "POSITIONAL_OR_KEYWORD", "None"),
        ("op", "POSITIONAL_OR_KEYWORD", "None"),
        ("prescale_factor", "POSITIONAL_OR_KEYWORD", "1.0"),
        ("postscale_factor", "POSITIONAL_OR_KEYWORD", "1.0"),
        ("process_set", "POSITIONAL_OR_KEYWORD", "global_process_set"),
    ],
    "sparse_allreduce_async": [
        ("tensor", "POSITIONAL_OR_KEYWORD", None),
        ("name", "POSITIONAL_OR_KEYWORD", None),
        ("op", "POSITIONAL_OR_KEYWORD", None),
        ("process_set", "POSITIONAL_OR_KEYWORD", "global_process_set"),
    ],
    "allgather": [
        ("tensor", "POSITIONAL_OR_KEYWORD", None),
        ("name", "POSITIONAL_OR_KEYWORD", "None"),
        ("process_set", "POSITIONAL_OR_KEYWORD", "global_process_set"),
    ],
    "allgather_async": [
        ("tensor", "POSITIONAL_OR_KEYWORD", None),
        ("name", "POSITIONAL_OR_KEYWORD", "None"),
        ("process_set", "POSITIONAL_OR_KEYWORD", "global_process_set"),
    ],
    "grouped_allgather": [
        ("tensors", "POSITIONAL_OR_KEYWORD", None),
        ("name", "POSITIONAL_OR_KEYWORD", "None"),
        ("process_set", "POSITIONAL_OR_KEYWORD", "global_process_set"),
    ],
    "grouped_allgather_async": [
        ("tensors", "POSITIONAL_OR_KEYWORD", None),
        ("name", "POSITIONAL_OR_KEYWORD", "None"),
        ("process_set", "POSITIONAL_OR_KEYWORD", "global_process_set"),
    ],
    "broadcast": [
        ("tensor", "POSITIONAL_OR_KEYWORD", None),
        ("root_rank", "POSITIONAL_OR_KEYWORD", None),
        ("name", "POSITIONAL_OR_KEYWORD", "None"),
        ("process_set", "POSITIONAL_OR_KEYWORD", "global_process_set"),
    ],
    "broadcast_async": [
        ("tensor", "POSITIONAL_OR_KEYWORD", None),
        ("root_rank", "POSITIONAL_OR_KEYWORD", None),
        ("name", "POSITIONAL_OR_KEYWORD", "None"),
        ("process_set", "POSITIONAL_OR_KEYWORD", "global_process_set"),
    ],
    "broadcast_": [
        ("tensor", "POSITIONAL_OR_KEYWORD", None),
        ("root_rank", "POSITIONAL_OR_KEYWORD", None),
        ("name", "POSITIONAL_OR_KEYWORD", "None"),
        ("process_set", "POSITIONAL_OR_KEYWORD", "global_process_set"),
    ],
    "broadcast_async_": [
        ("tensor", "POSITIONAL_OR_KEYWORD", None),
        ("root_rank", "POSITIONAL_OR_KEYWORD", None),
        ("name", "POSITIONAL_OR_KEYWORD", "None"),
        ("process_set", "POSITIONAL_OR_KEYWORD", "global_process_set"),
    ],
    "alltoall": [
        ("tensor", "POSITIONAL_OR_KEYWORD", None),
        ("splits", "POSITIONAL_OR_KEYWORD", "None"),
        ("name", "POSITIONAL_OR_KEYWORD", "None"),
        ("process_set", "POSITIONAL_OR_KEYWORD", "global_process_set"),
    ],
    "alltoall_async": [
        ("tensor", "POSITIONAL_OR_KEYWORD", None),
        ("splits", "POSITIONAL_OR_KEYWORD", "None"),
        ("name", "POSITIONAL_OR_KEYWORD", "None"),
        ("process_set", "POSITIONAL_OR_KEYWORD", "global_process_set"),
    ],
    "reducescatter": [
        ("tensor", "POSITIONAL_OR_KEYWORD", None),
        ("name", "POSITIONAL_OR_KEYWORD", "None"),
        ("compression", "POSITIONAL_OR_KEYWORD", "Compression.none"),
        ("op", "POSITIONAL_OR_KEYWORD", "Average"),
        ("process_set", "POSITIONAL_OR_KEYWORD", "global_process_set"),
        ("prescale_factor", "POSITIONAL_OR_KEYWORD", "1.0"),
        ("postscale_factor", "POSITIONAL_OR_KEYWORD", "1.0"),
    ],
    "reducescatter_async": [
        ("tensor", "POSITIONAL_OR_KEYWORD", None),
        ("name", "POSITIONAL_OR_KEYWORD", "None"),
        ("op", "POSITIONAL_OR_KEYWORD", "Average"),
        ("process_set", "POSITIONAL_OR_KEYWORD", "global_process_set"),
        ("prescale_factor", "POSITIONAL_OR_KEYWORD", "1.0"),
        ("postscale_factor", "POSITIONAL_OR_KEYWORD", "1.0"),
    ],
    "grouped_reducescatter": [
        ("tensors", "POSITIONAL_OR_KEYWORD", None),
        ("name", "POSITIONAL_OR_KEYWORD", "None"),
        ("compression", "POSITIONAL_OR_KEYWORD", "Compression.none"),
        ("op", "POSITIONAL_OR_KEYWORD", "Average"),
        ("process_set", "POSITIONAL_OR_KEYWORD", "global_process_set"),
        ("prescale_factor", "POSITIONAL_OR_KEYWORD", "1.0"),
        ("postscale_factor", "POSITIONAL_OR_KEYWORD", "1.0"),
    ],
    "grouped_reducescatter_async": [
        ("tensors", "POSITIONAL_OR_KEYWORD", None),
        ("name", "POSITIONAL_OR_KEYWORD", "None"),
        ("op", "POSITIONAL_OR_KEYWORD", "Average"),
        ("process_set", "POSITIONAL_OR_KEYWORD", "global_process_set"),
        ("prescale_factor", "POSITIONAL_OR_KEYWORD", "1.0"),
        ("postscale_factor", "POSITIONAL_OR_KEYWORD", "1.0"),
    ],
    "join": [("device", "POSITIONAL_OR_KEYWORD", "-1")],
    "barrier": [("process_set", "POSITIONAL_OR_KEYWORD", "global_process_set")],
    "poll": [("handle", "POSITIONAL_OR_KEYWORD", None)],
    "synchronize": [("handle", "POSITIONAL_OR_KEYWORD", None)],
    "init": [
        ("comm", "POSITIONAL_OR_KEYWORD", "None"),
        ("process_sets", "POSITIONAL_OR_KEYWORD", "None"),
    ],
    "shutdown": [],
    "is_initialized": [],
    "start_timeline": [
        ("file_path", "POSITIONAL_OR_KEYWORD", None),
        ("mark_cycles", "POSITIONAL_OR_KEYWORD", "False"),
    ],
    "stop_timeline": [],
    "size": [],
    "local_size": [],
    "cross_size": [],
    "rank": [],
    "local_rank": [],
    "cross_rank": [],
    "mpi_threads_supported": [],
    "mpi_enabled": [],
    "mpi_built": [],
    "gloo_enabled": [],
    "gloo_built": [],
    "nccl_built": [],
    "ddl_built": [],
    "ccl_built": [],
    "cuda_built": [],
    "rocm_built": [],
    "ProcessSet": [("ranks_or_comm", "POSITIONAL_OR_KEYWORD", None)],
    "ProcessSet.included": [],
    "ProcessSet.rank": [],
    "ProcessSet.size": [],
    "add_process_set": [("process_set", "POSITIONAL_OR_KEYWORD", None)],
    "remove_process_set": [("process_set", "POSITIONAL_OR_KEYWORD", None)],
    "DistributedOptimizer": [
        ("optimizer", "POSITIONAL_OR_KEYWORD", None),
        ("named_parameters", "POSITIONAL_OR_KEYWORD", "None"),
        ("compression", "POSITIONAL_OR_KEYWORD", "Compression.none"),
        ("backward_passes_per_step", "POSITIONAL_OR_KEYWORD", "1"),
        ("op", "POSITIONAL_OR_KEYWORD", "Average"),
        ("gradient_predivide_factor", "POSITIONAL_OR_KEYWORD", "1.0"),
        ("num_groups", "POSITIONAL_OR_KEYWORD", "0"),
        ("groups", "POSITIONAL_OR_KEYWORD", "None"),
        ("sparse_as_dense", "POSITIONAL_OR_KEYWORD", "False"),
        ("process_set", "POSITIONAL_OR_KEYWORD", "global_process_set"),
    ],
    "DistributedOptimizer().find_duplicates": [("lst", "POSITIONAL_OR_KEYWORD", None)],
    "DistributedOptimizer().set_backward_passes_per_step": [
        ("passes", "POSITIONAL_OR_KEYWORD", None)
    ],
    "DistributedOptimizer().skip_synchronize": [],
    "DistributedOptimizer().step": [("closure", "POSITIONAL_OR_KEYWORD", "None")],
    "DistributedOptimizer().synchronize": [],
    "DistributedOptimizer().zero_grad": [],
    "DistributedOptimizer(op=Adasum).set_backward_passes_per_step": [
        ("passes", "POSITIONAL_OR_KEYWORD", None)
    ],
    "DistributedOptimizer(op=Adasum).skip_synchronize": [],
    "DistributedOptimizer(op=Adasum).step": [("closure", "POSITIONAL_OR_KEYWORD", "None")],
    "DistributedOptimizer(op=Adasum).synchronize": [],
    "DistributedOptimizer(op=Adasum).zero_grad": [],
    "SyncBatchNorm": [
        ("num_features", "POSITIONAL_OR_KEYWORD", None),
        ("eps", "POSITIONAL_OR_KEYWORD", "1e-05"),
        ("momentum", "POSITIONAL_OR_KEYWORD", "0.1"),
        ("affine", "POSITIONAL_OR_KEYWORD", "True"),
        ("track_running_stats", "POSITIONAL_OR_KEYWORD", "True"),
    ],
    "SyncBatchNorm.forward": [("input", "POSITIONAL_OR_KEYWORD", None)],
}
