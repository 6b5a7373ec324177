"""horovod.torch's public signatures against upstream Horovod 0.28.1's (upstream_signatures.py):
the same parameters in the same order, with upstream's names and kinds, so that every call
written for upstream binds the same way here. Ours may add trailing parameters with defaults.
Defaults: a literal one of upstream's (number, string, None, True/False) must be ours too; a
name (Average, Compression.none, global_process_set) must be the same object here. Plain
pytest: no MPI, no hvd.init()."""

import ast
import importlib
import inspect

import pytest

pytest.importorskip("torch", reason="torch is not installed in this Python (see make test/torch)")

import horovod.torch as hvd  # noqa: E402
from tests.torch.upstream_signatures import UPSTREAM_SIGNATURES  # noqa: E402

# The optimizers DistributedOptimizer returns are classes it makes from these at call time.
_OPTIMIZERS = {
    "DistributedOptimizer()": ("horovod.torch.optimizer", "_DistributedOptimizer"),
    "DistributedOptimizer(op=Adasum)": ("horovod.torch.optimizer", "_DistributedAdasumOptimizer"),
}

# Deliberate differences: (public name, the problem check() reports) -> why. Kept small; an
# entry that no longer matches a problem fails test_allowed_entries_are_needed.
ALLOWED = {
    (
        "DistributedOptimizer().find_duplicates",
        "missing",
    ): "upstream's static helper for its constructor's duplicate-name check, an internal "
    "detail (users get its ValueError, which ours raises alike from optimizer._gradient_names)",
    (
        "elastic.TorchState.on_hosts_updated",
        "missing",
    ): "upstream's callback for its in-process driver notification service; our elastic "
    "mode learns of host changes by asking the driver (check_host_updates) and relaunches "
    "the ranks, so nothing calls it",
}

_EMPTY = inspect.Parameter.empty
_VAR = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


def _resolve(public):
    """(our callable, whether its first parameter is self/cls bound at call time)."""
    for prefix, (module, cls_name) in _OPTIMIZERS.items():
        if public.startswith(prefix + "."):
            owner = getattr(importlib.import_module(module), cls_name)
            return _member(owner, public[len(prefix) + 1 :])
    parts = public.split(".")
    owner, obj = None, hvd
    for part in parts:
        owner, obj = obj, getattr(obj, part)
    if inspect.isclass(obj):  # the constructor
        return obj.__init__, True
    if inspect.isclass(owner):
        return _member(owner, parts[-1])
    return obj, False


def _member(cls, name):
    """A method of `cls`: static and class methods take no self at call time (getattr binds a
    class method's cls), plain ones do."""
    raw = inspect.getattr_static(cls, name)  # the class dict's object (raises AttributeError)
    return getattr(cls, name), not isinstance(raw, (staticmethod, classmethod))


def _upstream_default(public, source):
    """(kind, value): ("literal", v), or ("object", hvd's object of that name)."""
    try:
        return "literal", ast.literal_eval(source)
    except ValueError:
        pass
    namespace = {"hvd": hvd, **vars(hvd)}
    try:
        return "object", eval(source, namespace)  # a name such as Compression.none
    except Exception as e:
        raise AssertionError(f"{public}: upstream's default {source!r} names nothing here") from e


def check(public):
    """The problems of our `public` against upstream's signature: a list of short strings."""
    try:
        fn, drop_self = _resolve(public)
    except AttributeError:
        return ["missing"]
    params = list(inspect.signature(fn).parameters.values())  # follows __wrapped__
    if drop_self:
        params = params[1:]
    upstream = UPSTREAM_SIGNATURES[public]
    problems = []
    up_fixed = [u for u in upstream if u[1] not in ("VAR_POSITIONAL", "VAR_KEYWORD")]
    ours_fixed = [p for p in params if p.kind not in _VAR]
    for i, (name, kind, default) in enumerate(up_fixed):
        if i >= len(ours_fixed):
            problems.append(f"parameter {i} {name!r}: missing")
            continue
        p = ours_fixed[i]
        if (p.name, p.kind.name) != (name, kind):
            problems.append(
                f"parameter {i}: ours {p.name!r} {p.kind.name}, upstream {name!r} {kind}"
            )
            continue
        if default is None:
            continue
        if p.default is _EMPTY:
            problems.append(f"parameter {name!r}: no default (upstream's {default})")
            continue
        how, value = _upstream_default(public, default)
        same = (
            type(p.default) is type(value) and p.default == value
            if how == "literal"
            else p.default is value or p.default == value
        )
        if not same:
            problems.append(f"parameter {name!r}: default {p.default!r}, upstream's {default}")
    for p in ours_fixed[len(up_fixed) :]:
        if p.default is _EMPTY:
            problems.append(f"extra parameter {p.name!r} without a default")
    for kind in ("VAR_POSITIONAL", "VAR_KEYWORD"):
        if any(u[1] == kind for u in upstream) and not any(p.kind.name == kind for p in params):
            problems.append(f"no {kind} parameter (upstream has one)")
    return problems


@pytest.mark.parametrize("public", list(UPSTREAM_SIGNATURES))
def test_signature_matches_upstream(public):
    problems = [p for p in check(public) if (public, p) not in ALLOWED]
    assert not problems, f"hvd.{public} differs from upstream 0.28.1's: {problems}"


def test_allowed_entries_are_needed():
    stale = [key for key in ALLOWED if key[1] not in check(key[0])]
    assert not stale, f"ALLOWED entries that no longer match a difference: {stale}"
