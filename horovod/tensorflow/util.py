"""Upstream's `horovod.tensorflow.util` helpers, which its own tests (and some user code) import:
whether TF runs eagerly, a function traced once per argument tuple, and variables as hashable
references."""

import functools

import tensorflow as tf


def _executing_eagerly():
    """True when ops run eagerly (TF 2's default outside a tf.function)."""
    return tf.executing_eagerly()


def _make_subgraph(f):
    """`f` as a tf.function (upstream's graph-mode helper)."""
    return tf.function(f)


def _cache(f):
    """`f` memoised on its (hashable) positional arguments; under eager execution only, as
    upstream: in graph mode each call builds its own ops."""
    cache = {}

    @functools.wraps(f)
    def wrapper(*args):
        if not _executing_eagerly():
            return f(*args)
        if args not in cache:
            cache[args] = f(*args)
        return cache[args]

    return wrapper


def vars_to_refs(variables):
    """Hashable references of variables (`v.ref()`), e.g. as dict keys or set members."""
    return [v.ref() for v in variables]


def refs_to_vars(refs):
    """The variables behind references from vars_to_refs."""
    return [r.deref() for r in refs]
