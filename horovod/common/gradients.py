"""What every frontend's gradient reduction computes alike, before its own tensors are
involved: the scale factors of Average, Sum and a predivide factor, and the grouping of a
step's gradients into grouped allreduces (`groups` / `num_groups`)."""

from horovod.common.engine_types import Average, Sum


def scale_factors(op, gradient_predivide_factor, size):
    """(op, prescale, postscale): Average with a predivide factor f divides by f before the
    sum and by size/f after it (upstream's semantics, for fp16 range)."""
    if gradient_predivide_factor != 1.0:
        if op != Average:
            raise ValueError("gradient_predivide_factor needs op=Average")
        return Sum, 1.0 / gradient_predivide_factor, gradient_predivide_factor / size
    return op, 1.0, 1.0


def groups_of(variables, groups):
    """Indices of the gradients in each group: one group by default; `groups` is a number of
    groups or a list of lists of variables (the others form one more group). Variables are
    compared by identity."""
    n = len(variables)
    if not groups:
        return [list(range(n))]
    if isinstance(groups, int):
        if groups <= 0:
            raise ValueError(f"groups must be positive, got {groups}")
        k = min(groups, n) or 1
        return [list(range(i * n // k, (i + 1) * n // k)) for i in range(k)]
    position = {id(v): i for i, v in enumerate(variables)}
    out, seen = [], set()
    for group in groups:
        idx = [position[id(v)] for v in group if id(v) in position]
        seen.update(idx)
        if idx:
            out.append(idx)
    rest = [i for i in range(n) if i not in seen]
    return out + ([rest] if rest else [])
