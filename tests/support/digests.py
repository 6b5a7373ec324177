"""Cross-rank equality through DIGEST lines, for scenarios whose results only agree across ranks
(trained weights, histories): each rank prints "DIGEST <scenario> rank=<r> <what>=<sha256>"
(report), and the test gathers the lines of a launch (found) and compares them
(assert_equal_on_all_ranks)."""

import hashlib
import re
from collections import defaultdict

import numpy as np

from tests.support import scenario


def digest(arrays):
    """sha256 of the arrays' bytes, in order."""
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(np.asarray(a)).tobytes())
    return h.hexdigest()


def report(name, **whats):
    """Prints this rank's DIGEST line of scenario `name` for each what=digest."""
    for what, value in whats.items():
        print(f"DIGEST {name} rank={scenario.rank()} {what}={value}", flush=True)


def found(batch, prefix):
    """{(scenario, what): {rank: digest}} of a Batch's DIGEST lines whose scenario starts with
    prefix."""
    out = defaultdict(dict)
    # Not anchored to line starts: mpirun may append a line to another rank's unfinished one.
    for name, rank, what, value in re.findall(
        rf"DIGEST ({re.escape(prefix)}\S*) rank=(\d+) (\w+)=([0-9a-f]{{64}})", batch.out
    ):
        out[(name, what)][int(rank)] = value
    return out


def assert_equal_on_all_ranks(batch, prefix, expected_whats):
    """The scenarios starting with prefix printed exactly expected_whats, from every rank, each
    equal on every rank."""
    digests = found(batch, prefix)
    assert {what for _, what in digests} == set(expected_whats), digests
    for key, by_rank in digests.items():
        assert set(by_rank) == set(range(batch.np)), (
            f"{key}: digests from ranks {sorted(by_rank)} only; stdout:\n{batch.out[-6000:]}"
        )
        assert len(set(by_rank.values())) == 1, f"{key} differs across ranks: {by_rank}"
