"""No import cycles among horovod/'s modules, found statically (no import runs, no MPI).

The rule, what counts as "A imports B":
  - every `import B` and `from B import x` in A's file, wherever it is: module level, inside a
    function or class, under try/if. A deferred import is still a dependency, and deferring one
    is how a cycle hides until the day the call order changes;
  - `from P import x` is an import of the module P.x when P/x.py (or P/x/) exists, else of P;
    relative imports are resolved against A's package;
  - importing a module also runs its packages' __init__.py: A imports each package above B that
    is neither A nor a package above A (those are already loading when A runs: nothing added);
  - a module importing itself is not a cycle; compiled modules (horovod._core) are leaves.
A cycle is reported with the file and line of each import in it.
"""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def modules(root, package):
    """{module name: path} of every .py file under root/package."""
    out = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _ancestors(name):
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def imports(name, path, known, package):
    """[(imported module, line, source text, implicit)] of one module under the rule above;
    implicit: a package's __init__.py that the import runs without naming it."""
    is_package = path.name == "__init__.py"
    source = path.read_text()
    targets = []
    for node in ast.walk(ast.parse(source, str(path))):
        if isinstance(node, ast.Import):
            targets += [(a.name, node) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module
            for a in node.names:
                sub = f"{stem}.{a.name}"
                targets.append((sub if sub in known else stem, node))
    out = []
    for target, node in targets:
        if not (target == package or target.startswith(package + ".")):
            continue
        # The module itself if it is a .py file here, else its closest package (compiled).
        while target not in known and "." in target:
            target = target.rsplit(".", 1)[0]
        text = " ".join((ast.get_source_segment(source, node) or "").split())
        for t in sorted(_ancestors(target) - _ancestors(name) - {name}):
            out.append((t, node.lineno, text, True))
        if target != name and target in known:
            out.append((target, node.lineno, text, False))
    return out


def graph(root, package):
    known = modules(root, package)
    return known, {name: imports(name, path, known, package) for name, path in known.items()}


def cycles(root, package):
    """One cycle per strongly connected component of more than one module, as
    [(module, imported module, line, source)] edges."""
    known, edges = graph(root, package)
    succ = {m: sorted({e[0] for e in es}) for m, es in edges.items()}
    # Tarjan's strongly connected components (iterative: no recursion limit to worry about).
    index, low, on_stack, stack, comps, counter = {}, {}, set(), [], [], [0]
    for start in succ:
        if start in index:
            continue
        work = [(start, iter(succ[start]))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(succ[w])))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    comps.append(set(comp))
    found = []
    for comp in comps:
        # The shortest way back to the component's first module, breadth first.
        first = min(comp)
        prev, frontier = {first: None}, [first]
        while frontier and first not in [t for m in frontier for t in succ[m]]:
            nxt = []
            for m in frontier:
                for t in succ[m]:
                    if t in comp and t not in prev:
                        prev[t] = m
                        nxt.append(t)
            frontier = nxt
        last = next(m for m in frontier if first in succ[m])
        path = [last]
        while prev[path[-1]] is not None:
            path.append(prev[path[-1]])
        path.reverse()
        path.append(first)
        cycle = []
        for a, b in zip(path, path[1:]):
            # An import naming b explains the edge best; else the one that runs b's __init__.
            _, line, src, implicit = min((e for e in edges[a] if e[0] == b), key=lambda e: e[3])
            cycle.append((a, b, line, src + (f"  (runs {b}'s __init__.py)" if implicit else "")))
        found.append(cycle)
    return found


def describe(cycle, root, known):
    lines = [" -> ".join([cycle[0][0]] + [b for _, b, _, _ in cycle])]
    for a, _, line, src in cycle:
        lines.append(f"    {known[a].relative_to(root)}:{line}: {src}")
    return "\n".join(lines)


def test_no_import_cycles_in_horovod():
    known = modules(ROOT, "horovod")
    found = cycles(ROOT, "horovod")
    assert not found, "import cycles among horovod's modules:\n" + "\n".join(
        describe(c, ROOT, known) for c in found
    )


# ---- the detector itself, on small packages written for the test -----------------------------


def _package(tmp_path, files):
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return tmp_path


def test_a_function_level_import_closes_a_cycle(tmp_path):
    # The shape that horovod.tensorflow.gradients and horovod.tensorflow.keras had.
    root = _package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/core/__init__.py": "from pkg.core.grads import reduce\n",
            "pkg/core/grads.py": "def wrap():\n    from pkg.core import upper\n    return upper\n",
            "pkg/core/upper/__init__.py": "from pkg.core import grads\n",
        },
    )
    found = cycles(root, "pkg")
    assert len(found) == 1
    text = describe(found[0], root, modules(root, "pkg"))
    assert "pkg.core.grads -> pkg.core.upper -> pkg.core.grads" in text, text
    assert "pkg/core/grads.py:2: from pkg.core import upper" in text, text


def test_a_package_init_runs_on_a_submodule_import(tmp_path):
    # low imports upper.impl, which loads upper/__init__.py, which imports low: a cycle, though
    # no file names the other directly. Submodules of one's own package add nothing.
    root = _package(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg import low\n",
            "pkg/low.py": "from pkg import base\n",
            "pkg/base.py": "",
            "pkg/upper/__init__.py": "from pkg.low import x\nfrom . import impl\n",
            "pkg/upper/impl.py": "from pkg import base\n",
        },
    )
    assert cycles(root, "pkg") == []
    (root / "pkg/low.py").write_text("def f():\n    from pkg.upper.impl import g\n")
    found = cycles(root, "pkg")
    assert [[(a, b) for a, b, _, _ in c] for c in found] == [
        [("pkg.low", "pkg.upper"), ("pkg.upper", "pkg.low")]
    ], found


@pytest.mark.parametrize(
    "text,want",
    [
        ("from . import base\n", ["pkg.base"]),
        ("from .base import x\n", ["pkg.base"]),
        ("import pkg.base as b\n", ["pkg.base"]),
        ("from pkg import base, name\n", ["pkg", "pkg.base"]),
        ("from pkg.sub import leaf\n", ["pkg.sub", "pkg.sub.leaf"]),
        ("import os\nfrom pkg import _compiled\n", ["pkg"]),
    ],
)
def test_import_forms_resolve_to_modules(tmp_path, text, want):
    root = _package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/base.py": "",
            "pkg/user.py": text,
            "pkg/sub/__init__.py": "",
            "pkg/sub/leaf.py": "",
        },
    )
    _, edges = graph(root, "pkg")
    assert sorted({e[0] for e in edges["pkg.user"]}) == want, edges["pkg.user"]


def test_runner_programs_stay_apart():
    # horovod/runner holds three programs: the launcher (horovodrun), what runs on the ranks
    # (task/) and a cluster's entrypoint (cluster/). None imports another's modules.
    _, edges = graph(ROOT, "horovod")

    def side(module):
        for sub in ("horovod.runner.task", "horovod.runner.cluster"):
            if module == sub or module.startswith(sub + "."):
                return sub
        return "horovod.runner" if module.startswith("horovod.runner.") else None

    crossing = [
        f"{m} imports {t} (line {line})"
        for m, es in edges.items()
        if side(m)
        for t, line, _, implicit in es
        if not implicit and side(t) and side(t) != side(m)
    ]
    assert not crossing, "\n".join(crossing)


# The frontends, by framework: horovod.keras is horovod.tensorflow.keras under a second name.
FRONTENDS = {
    "horovod.numpy": "numpy",
    "horovod.tensorflow": "tensorflow",
    "horovod.keras": "tensorflow",
    "horovod.torch": "torch",
}


def frontend_of(module):
    for package, framework in FRONTENDS.items():
        if module == package or module.startswith(package + "."):
            return framework
    return None


def floor_violations(root, package):
    """Imports pointing up a floor: horovod.common importing a frontend, or a frontend
    importing another framework's frontend. Explicit imports only (a package's __init__ that
    an import runs is the same floor as the module named)."""
    _, edges = graph(root, package)
    common = f"{package}.common"
    found = []
    for m, es in sorted(edges.items()):
        for target, line, src, implicit in es:
            if implicit:
                continue
            mine, theirs = frontend_of(m), frontend_of(target)
            if theirs is None:
                continue
            if m == common or m.startswith(common + "."):
                found.append(f"{m}:{line} imports the frontend {target}: {src}")
            elif mine is not None and mine != theirs:
                found.append(f"{m}:{line} ({mine}) imports another frontend, {target}: {src}")
    return found


def test_common_is_below_every_frontend_and_frontends_stay_apart():
    found = floor_violations(ROOT, "horovod")
    assert not found, "imports pointing up a floor or across frontends:\n" + "\n".join(found)


def test_the_floor_check_finds_both_kinds(tmp_path):
    root = _package(
        tmp_path,
        {
            "horovod/__init__.py": "",
            "horovod/common/__init__.py": "",
            "horovod/common/worker.py": "def f():\n    import horovod.numpy as hnp\n",
            "horovod/numpy/__init__.py": "from horovod.common import worker\n",
            "horovod/tensorflow/__init__.py": "from horovod.numpy import allreduce\n",
            "horovod/keras/__init__.py": "import horovod.tensorflow\n",
        },
    )
    found = floor_violations(root, "horovod")
    assert len(found) == 2, found
    assert "horovod.common.worker:2 imports the frontend horovod.numpy" in found[0], found
    assert "horovod.tensorflow:1 (tensorflow) imports another frontend" in found[1], found
