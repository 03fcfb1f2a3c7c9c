"""What a sandboxed program can see of the host: the bwrap mount list, and nothing else.

The sandbox's root is an empty tmpfs, remounted read-only once the mounts below are in place.
Read-only, at their host paths:
- the system libraries (`/usr/lib`, `/lib*` and their 64/32-bit variants, so `ld.so` and the C
  libraries the interpreter and its extension modules link) and `/etc/ld.so.cache`;
- the interpreter binary and its own runtime: the entries of `sys.path` it reports under `-I -S`
  (stdlib, lib-dynload) and its libpython when it was built shared. For a virtual environment
  this is the *base* interpreter (`sys._base_executable`), so the environment itself, its
  site-packages and the project around it are never mounted; a runtime under a home directory
  is mounted by its own directories, never the home;
- every site-packages / dist-packages directory inside those mounts is covered by an empty
  read-only tmpfs, so no third-party package is importable or readable;
- the packages a verifier names in `params.packages` (import names), each package's directory
  (and the `*.libs` folder of vendored shared libraries its wheel ships) under `/packages`,
  which is put on `sys.path`.
warm.py adds a fresh `/dev` (null, zero, random, urandom, tty), the sandbox's own `/proc` and a
private, size-capped `/tmp` (the working directory). Test sources, the solution and the output
travel over pipes, never as host files.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata

SYSTEM_LIB_DIRS = ("/usr/lib", "/usr/lib64", "/usr/lib32", "/usr/libx32", "/lib", "/lib64", "/lib32", "/libx32")
SYSTEM_FILES = ("/etc/ld.so.cache",)
PACKAGES_DIR = "/packages"

_PROBE = """\
import json, site, sys, sysconfig
var = sysconfig.get_config_var
libpython = ""
if var("Py_ENABLE_SHARED") and var("LIBDIR") and var("INSTSONAME"):
    libpython = var("LIBDIR") + "/" + var("INSTSONAME")
site_dirs = site.getsitepackages() + [sysconfig.get_path(k) for k in ("purelib", "platlib")]
print(json.dumps({"path": sys.path, "version": sys.version_info[:2], "libpython": libpython,
                  "site": site_dirs}))
"""


class PackageUnavailable(ValueError):
    """A package named in params.packages cannot be exposed (not installed, not a regular package)."""


@dataclass(frozen=True)
class Runtime:
    python: str  # real path of the interpreter binary, mounted and run as is
    version: tuple[int, int]
    dirs: tuple[str, ...]  # its stdlib and lib-dynload
    files: tuple[str, ...]  # the binary and its libpython, where no system dir holds them
    hidden: tuple[str, ...]  # site-packages inside the mounts, covered by an empty tmpfs


def probe_runtime(python: str, preexec) -> Runtime | None:
    """Ask `python` (run as the sandbox's user, so its files are known to be usable) for its runtime;
    None when it does not run."""
    python = os.path.realpath(python)
    try:
        out = subprocess.run(
            [python, "-I", "-S", "-c", _PROBE],
            capture_output=True,
            text=True,
            timeout=60,
            preexec_fn=preexec,
            env={},
            cwd="/",
        )
        info = json.loads(out.stdout) if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    if not isinstance(info, dict):
        return None
    system = [d for d in SYSTEM_LIB_DIRS if os.path.isdir(d)]
    dirs = _outermost([p for p in info["path"] if os.path.isdir(p) and not _inside(p, system)])
    files = [f for f in (python, info["libpython"]) if f and os.path.isfile(f) and not _inside(f, system + dirs)]
    hidden = sorted({os.path.normpath(d) for d in info["site"] if d and os.path.isdir(d) and _inside(d, system + dirs)})
    return Runtime(python, tuple(info["version"]), tuple(dirs), tuple(files), tuple(hidden))


def view_args(runtime: Runtime, packages: tuple[tuple[str, str], ...] = ()) -> list[str]:
    """bwrap arguments that mount the system libraries, the runtime and the named packages."""
    args: list[str] = []
    for path in SYSTEM_LIB_DIRS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for path in (*SYSTEM_FILES, *runtime.dirs, *runtime.files):
        if os.path.exists(path):
            args += ["--ro-bind", path, path]
    for path in runtime.hidden:
        args += ["--tmpfs", path, "--remount-ro", path]
    for source, dest in packages:
        args += ["--ro-bind", source, dest]
    return args


@lru_cache(maxsize=64)
def package_mounts(names: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """(host path, sandbox path) for each named package of this environment and its vendored
    `*.libs` folders. Raises PackageUnavailable with the fix when a name cannot be exposed."""
    mounts: dict[str, str] = {}
    for name in names:
        if not isinstance(name, str) or not name.isidentifier():
            raise PackageUnavailable(
                f"params.packages: {name!r} is not an import name; list top-level modules, e.g. [numpy]"
            )
        if name in sys.stdlib_module_names:
            raise PackageUnavailable(
                f"params.packages: {name!r} is part of the standard library, which the sandbox always has; remove it"
            )
        spec = importlib.util.find_spec(name)
        if spec is None:
            raise PackageUnavailable(
                f"params.packages: {name!r} is not installed in this "
                f"environment ({sys.executable} -m pip install {name})"
            )
        if spec.origin in (None, "built-in", "frozen") or not os.path.isfile(spec.origin):
            raise PackageUnavailable(
                f"params.packages: {name!r} is built in or a namespace package; list a regular package or module"
            )
        source = os.path.dirname(spec.origin) if spec.submodule_search_locations else spec.origin
        for path in (source, *_vendored_libs(name, os.path.dirname(source))):
            mounts[path] = f"{PACKAGES_DIR}/{os.path.basename(path)}"
    return tuple(mounts.items())


def _vendored_libs(name: str, site_dir: str) -> list[str]:
    """`<dist>.libs` folders (auditwheel's vendored shared libraries, found by $ORIGIN/../) of the
    distributions that provide `name`."""
    dists = metadata.packages_distributions().get(name, [])
    candidates = {f"{name}.libs"} | {f"{d}.libs" for d in dists} | {f"{d.lower()}.libs" for d in dists}
    return sorted(os.path.join(site_dir, c) for c in candidates if os.path.isdir(os.path.join(site_dir, c)))


def _inside(path: str, roots: list[str]) -> bool:
    real = os.path.realpath(path)
    return any(real == r or real.startswith(r.rstrip("/") + "/") for r in map(os.path.realpath, roots))


def _outermost(paths: list[str]) -> list[str]:
    """Drop paths inside another (lib-dynload inside the stdlib): one mount covers them."""
    keep: list[str] = []
    for p in sorted(set(paths), key=len):
        if not _inside(p, keep):
            keep.append(p)
    return keep
