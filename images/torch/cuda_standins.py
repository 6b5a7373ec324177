#!/usr/bin/env python3
"""Stand-in libraries for the CUDA libraries a PyPI torch links but a CPU machine lacks.

Every Linux x86_64 torch on PyPI is a CUDA build: `libtorch_cpu.so` itself links `libcudart`
and `libcupti`, and `import torch` loads `libtorch_cuda.so` with cuBLAS, cuDNN, NCCL and the rest
(about 3 GB of nvidia-* wheels). Installed without them (`pip install --no-deps`), torch cannot
load. This script reads which of those libraries torch's own libraries need (`readelf`), and
which of their symbols, and compiles one tiny library per missing soname that defines exactly
those symbols (under the same symbol versions) as functions that fail with "no device" (100 is
cudaErrorNoDevice and CUDA_ERROR_NO_DEVICE; error-string functions return a string that says
this is a stand-in). torch then imports, trains on the CPU, runs gloo and `torch.compile`, and
`torch.cuda.is_available()` is False, because cudaGetDeviceCount fails with cudaErrorNoDevice.

Regenerated for each torch version (the symbol lists change). Used by images/torch/Dockerfile
(CPU flavour) and scripts/install-prereqs.sh (build/torch-venv).

usage:
  cuda_standins.py build SITE_PACKAGES OUT_DIR   the stand-ins (OUT_DIR: usually
      SITE_PACKAGES/torch/lib, the last entry of torch's RPATH, so a real nvidia-* wheel
      installed later still takes precedence)
  cuda_standins.py requirements DIST...   the requirements of DISTs (installed names such as
      torch and torchvision, or .whl files) that are not CUDA wheels, one per line, for `pip
      install` after the DISTs went in with --no-deps
  cuda_standins.py accepted DIST...   the lines `pip check` prints for the DISTs' CUDA
      requirements that are missing or at other versions, as the layer declares them to the
      image's pip-check (/etc/pip-check.d)
"""

import glob
import importlib.metadata
import os
import re
import subprocess
import sys
import tempfile

# Libraries the system provides (glibc, the GCC runtime): never stood in for.
SYSTEM = re.compile(r"^(libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+|ld-linux.*)\.so")
# The driver comes with the machine's GPU, never with torch: no stand-in may hide it (only the
# lazily loaded libcaffe2_nvrtc.so links it).
DRIVER = "libcuda.so.1"
# Requirements that are CUDA itself (replaced by stand-ins, or by the GPU chain's own wheels).
CUDA_REQUIREMENT = re.compile(r"^(nvidia-|cuda-|triton$)")
# Functions that return a C string (an error's text) rather than a status code.
STRING_FUNCTIONS = re.compile(r"(Error|Status)(String|Name)$|GetErrorString")


def readelf(*args):
    return subprocess.run(
        ["readelf", "-W", *args], check=True, capture_output=True, text=True
    ).stdout


def needed(path):
    return re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", readelf("-d", path))


def version_files(path):
    """{version name: soname} from the library's version-needs section."""
    out, current = {}, None
    for line in readelf("-V", path).splitlines():
        m = re.search(r"File: (\S+)", line)
        if m:
            current = m.group(1)
            continue
        m = re.search(r"Name: (\S+)", line)
        if m and current:
            out[m.group(1)] = current
    return out


def dynamic_symbols(path):
    """(defined names, [(name, version or None, type, bind)] of undefined symbols)."""
    defined, undefined = set(), []
    for line in readelf("--dyn-syms", path).splitlines():
        f = line.split()
        if len(f) < 8 or not f[0].rstrip(":").isdigit():
            continue
        name, version = f[7], None
        if "@" in name:
            name, version = re.split(r"@+", name, maxsplit=1)
            version = version.split()[0]
        if f[6] == "UND":
            if name:
                undefined.append((name, version, f[3], f[4]))
        else:
            defined.add(name)
    return defined, undefined


def plan(libraries):
    """{missing soname: {symbol: (version or None, type)}} for the given ELF files."""
    present = {os.path.basename(p) for p in libraries}
    info = {p: dynamic_symbols(p) for p in libraries}
    ours = set().union(*(d for d, _ in info.values()), *map(_defined, _system_libraries()))
    wanted = {}
    for path in libraries:
        missing = [
            n
            for n in needed(path)
            if n not in present and n != DRIVER and not SYSTEM.match(n) and not _loadable(n, path)
        ]
        for soname in missing:  # a library needed for its own sake, without symbols
            wanted.setdefault(soname, {})
        files = version_files(path)
        for name, version, kind, bind in info[path][1]:
            if bind == "WEAK" or name in ours:
                continue
            soname = files.get(version) if version else None
            if version and soname is None:
                continue  # a version of a library that exists (GLIBC_2.2.5, GOMP_1.0, ...)
            if soname is not None and soname not in missing:
                continue
            # Unversioned: cuDNN, NCCL, cuSPARSELt and cuFile do not version their symbols, so
            # the owner is unknown; any of this library's missing dependencies may provide it.
            for target in [soname] if soname else missing:
                wanted.setdefault(target, {})[name] = (version, kind)
    return wanted


def _defined(path):
    return dynamic_symbols(path)[0]


def _system_libraries():
    """Paths of the system's C and C++ runtime libraries: torch references some of libstdc++'s
    symbols without a version, and a stand-in must never define those."""
    cache = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    paths = {}
    for soname, path in re.findall(r"^\s*(\S+) \(libc6,x86-64[^)]*\) => (\S+)$", cache, re.M):
        if SYSTEM.match(soname):
            paths.setdefault(soname, path)
    return sorted(paths.values())


def _loadable(soname, path):
    """True if the system or the library's RPATH directories already have `soname`."""
    here = os.path.dirname(os.path.realpath(path))
    rpath = re.findall(
        r"\((?:RPATH|RUNPATH)\)\s+Library r(?:un)?path: \[(.+?)\]", readelf("-d", path)
    )
    dirs = [d.replace("$ORIGIN", here) for r in rpath for d in r.split(":")]
    for d in dirs:
        found = os.path.join(d, soname)
        if os.path.exists(found) and not is_standin(found):
            return True
    cache = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    return f"{soname} (" in cache


def is_standin(path):
    with open(path, "rb") as f:
        return b"is a CPU stand-in" in f.read(1 << 16)


def source(soname, symbols):
    lines = [
        f"/* Stand-in for {soname}: no CUDA device here (images/torch/cuda_standins.py). */",
        f'static const char why[] = "{soname} is a CPU stand-in: no CUDA device";',
    ]
    for name, (_, kind) in sorted(symbols.items()):
        if kind == "OBJECT":
            lines.append(f"char {name}[64];")
        elif STRING_FUNCTIONS.search(name):
            lines.append(f"const char *{name}(void) {{ return why; }}")
        else:
            lines.append(f"long {name}(void) {{ return 100; }}")
    return "\n".join(lines) + "\n"


def version_script(symbols):
    """One version node per symbol version the callers ask for (their names are the callers')."""
    nodes = {}
    for name, (version, _) in symbols.items():
        nodes.setdefault(version, []).append(name)
    if set(nodes) <= {None}:
        return None
    unversioned = nodes.pop(None, [])
    out = []
    for i, (version, names) in enumerate(sorted(nodes.items())):
        names = sorted(names + (unversioned if i == 0 else []))
        body = "".join(f"{n}; " for n in names) + ("local: *; " if i == 0 else "")
        out.append(version + " { global: " + body + "};")
    return "\n".join(out) + "\n"


def build(soname, symbols, out_dir, cc="gcc"):
    with tempfile.TemporaryDirectory() as tmp:
        c = os.path.join(tmp, "standin.c")
        with open(c, "w") as f:
            f.write(source(soname, symbols))
        cmd = [
            cc,
            "-shared",
            "-fPIC",
            "-O1",
            "-fno-builtin",
            "-w",
            "-o",
            os.path.join(out_dir, soname),
            c,
        ]
        cmd.append(f"-Wl,-soname,{soname}")
        script = version_script(symbols)
        if script:
            vs = os.path.join(tmp, "standin.map")
            with open(vs, "w") as f:
                f.write(script)
            cmd.append(f"-Wl,--version-script={vs}")
        subprocess.run(cmd, check=True)


def _distribution(dist):
    """An installed distribution by name, or a wheel file's (read inside the zip)."""
    if dist.endswith(".whl"):
        import zipfile

        info = next(
            n for n in zipfile.ZipFile(dist).namelist() if n.endswith(".dist-info/METADATA")
        )
        return importlib.metadata.PathDistribution(zipfile.Path(dist, info.rsplit("/", 1)[0] + "/"))
    return importlib.metadata.distribution(dist)


def _requirements(dist):
    """[(Requirement, is CUDA)] of a distribution that apply here (markers true)."""
    from pip._vendor.packaging.requirements import Requirement  # pip is in every venv

    out = []
    for line in _distribution(dist).requires or []:
        req = Requirement(line)
        if req.marker is None or req.marker.evaluate({"extra": ""}):
            out.append((req, bool(CUDA_REQUIREMENT.match(req.name))))
    return out


def requirements(dists):
    names = {_distribution(d).metadata["Name"].lower() for d in dists}
    for dist in dists:
        for req, cuda in _requirements(dist):
            if not cuda and req.name.lower() not in names:
                print(str(req).split(";")[0])


def accepted(dists):
    for dist in dists:
        version = importlib.metadata.version(dist)
        for req, cuda in _requirements(dist):
            if not cuda:
                continue
            try:
                have = importlib.metadata.version(req.name)
            except importlib.metadata.PackageNotFoundError:
                print(f"{dist} {version} requires {req.name}, which is not installed.")
                continue
            if not req.specifier.contains(have, prereleases=True):
                print(f"{dist} {version} has requirement {req}, but you have {req.name} {have}.")


def build_all(site, out_dir):
    libraries = sorted(
        glob.glob(os.path.join(site, "torch", "lib", "*.so*"))
        + glob.glob(os.path.join(site, "torch", "_C*.so"))
        + glob.glob(os.path.join(site, "torchvision", "*.so"))
    )
    libraries = [p for p in libraries if not is_standin(p)]  # written by an earlier run
    if not libraries:
        sys.exit(f"cuda_standins: no torch libraries under {site}")
    os.makedirs(out_dir, exist_ok=True)
    for soname, symbols in sorted(plan(libraries).items()):
        build(soname, symbols, out_dir)
        print(f"cuda_standins: {soname}: {len(symbols)} symbols")


def main(argv):
    command, args = (argv[1], argv[2:]) if len(argv) > 1 else (None, [])
    if command == "build" and len(args) == 2:
        build_all(*args)
    elif command == "requirements" and args:
        requirements(args)
    elif command == "accepted" and args:
        accepted(args)
    else:
        sys.exit(__doc__[__doc__.index("usage:") :])


if __name__ == "__main__":
    main(sys.argv)
