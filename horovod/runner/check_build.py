"""`horovodrun --check-build`: what this installation was built with, as a table.

Reads build_info() from the engine (which does not initialize MPI), framework versions from
package metadata (importing TensorFlow would take seconds) and the version pins an image
records in its environment (see versions.env).
"""

import importlib.metadata
import os
import platform

# ENV set by the images (images/*/Dockerfile), shown when present.
IMAGE_PINS = (
    "HOROVOD_VERSION",
    "DEBIAN_VERSION",
    "PYTHON_VERSION",
    "OPENMPI_VERSION",
    "MPI4PY_VERSION",
    "NUMPY_VERSION",
    "TENSORFLOW_VERSION",
    "TORCH_VERSION",
    "TORCHVISION_VERSION",
    "CUDA_VERSION",
    "NCCL_VERSION",
    "PYSPARK_VERSION",
    "RAY_VERSION",
)


def _dist_version(name):
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _build_info():
    """(info dict or None, error string or None)."""
    try:
        from horovod.common.basics import build_info

        return build_info(), None
    except Exception as e:  # engine not compiled, or libmpi missing: still report the rest
        return None, f"{type(e).__name__}: {e}"


def _nccl(code):
    if not code:
        return ""
    return f"{code // 10000}.{code // 100 % 100}.{code % 100}" if code >= 10000 else str(code)


def _nccl_rows(info):
    """The NCCL row: the version of the library this process loaded (ncclGetVersion, which may
    not be the one the build's header named: another package's libnccl.so.2 found first), with a
    warning and one row per known defect of that version (csrc/common/nccl_defects.cc, through
    build_info()["nccl_defects"]); Horovod avoids each, the row says how."""
    code = int(info["nccl_built"])
    defects = list(info.get("nccl_defects") or [])
    detail = _nccl(code)
    if code:
        detail += " (the library loaded at run time)"
    if defects:
        detail += (
            f"; WARNING: {len(defects)} known defect(s) of this NCCL, avoided by Horovod "
            "(below); NCCL >= 2.29.7 has none of them"
        )
    return [("NCCL", bool(code), detail)] + [("  NCCL defect", None, d) for d in defects]


def _cuda(code):
    """cudaRuntimeGetVersion() code: 12090 -> "runtime 12.9"."""
    return f"runtime {code // 1000}.{code % 1000 // 10}" if code else ""


def _tensorflow_row(installed):
    """Built if horovod/tensorflow/mpi_lib.so exists; its stamp says which TF it was built
    against (read, not imported: importing TensorFlow takes seconds)."""
    import horovod

    lib_dir = os.path.join(os.path.dirname(horovod.__file__), "tensorflow")
    stamp = os.path.join(lib_dir, "mpi_lib.tf_version")
    if not os.path.exists(os.path.join(lib_dir, "mpi_lib.so")):
        return (
            "TensorFlow",
            False,
            f"{installed} installed, frontend not built (rebuild horovod "
            "with TensorFlow importable)"
            if installed
            else "not installed",
        )
    built = open(stamp).read().strip() if os.path.exists(stamp) else "unknown"
    detail = f"{installed} (frontend built against {built})"
    if installed and built.split(".")[:2] != installed.split(".")[:2]:
        detail += ": version differs, rebuild horovod"
    return ("TensorFlow", True, detail if installed else f"not installed (built against {built})")


def _torch_row(installed):
    """horovod.torch is Python over the engine: nothing is compiled against torch, so any
    installed torch is usable (tested on 2.10 and 2.14)."""
    if not installed:
        return ("PyTorch", False, "not installed")
    return ("PyTorch", True, f"{installed} (horovod.torch: Python over the engine, no build)")


def _launcher_row(name, package, what):
    """A framework that starts ranks (no build of its own: the ranks use the TCP transport)."""
    installed = _dist_version(package)
    if not installed:
        return (name, None, f"{package} not installed")
    return (name, None, f"{package} {installed} installed ({what}, over the TCP transport)")


def rows(info, error, env=os.environ):
    """The table as (component, built, details) rows; `built` is True, False or None (n/a)."""
    from horovod import __version__

    version = info["horovod_version"] if info else __version__
    tf = _dist_version("tensorflow-cpu") or _dist_version("tensorflow")
    out = [("Horovod", None, f"{version} (python {platform.python_version()})")]
    if info is None:
        out.append(("engine", False, f"not importable: {error}"))
    else:
        out += [
            ("MPI", bool(info["mpi_built"]), info.get("mpi_library", "").strip()),
            (
                "Gloo",
                bool(info["gloo_built"]),
                "our TCP transport in its place (horovodrun --gloo, torchrun, HOROVOD_GLOO_*)"
                if info["gloo_built"]
                else "",
            ),
        ]
        out += _nccl_rows(info)
        out += [
            ("CUDA", bool(info["cuda_built"]), _cuda(int(info.get("cuda_runtime_version", 0)))),
            ("CPU operations", True, info.get("cpu_operations", "")),
        ]
        if info.get("transport"):
            out.append(("Transport", None, f"{info['transport']} (what hvd.init() chooses here)"))
    out.append(_tensorflow_row(tf))
    out.append(_torch_row(_dist_version("torch")))
    out.append(_launcher_row("Spark", "pyspark", "horovod.spark.run, run_elastic"))
    out.append(_launcher_row("Ray", "ray", "horovod.ray.RayExecutor, static and elastic"))
    mpi4py = _dist_version("mpi4py")
    out.append(("mpi4py", None, f"{mpi4py} installed" if mpi4py else "not installed"))
    pins = " ".join(f"{k}={env[k]}" for k in IMAGE_PINS if env.get(k))
    if pins:
        out.append(("image pins", None, pins))
    return out


def format_table(table):
    width = max(len(name) for name, _, _ in table)
    marks = {True: "[X]", False: "[ ]", None: "   "}
    return "\n".join(
        f"{name:<{width}}  {marks[built]}  {details}".rstrip() for name, built, details in table
    )


def check_build():
    """Print the table; exit status 0 if the engine is importable, else 1."""
    info, error = _build_info()
    print(format_table(rows(info, error)))
    return 0 if info is not None else 1
