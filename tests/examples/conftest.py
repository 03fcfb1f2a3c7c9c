"""Fixtures for the retail sample domain tests: the generator's modules and one generated run.

The generator's modules import each other by plain name (it runs as a script), so `retail` puts
examples/retail on sys.path only while a test module uses it and removes the path and the
modules afterwards: generic names like `catalog` must not leak into other packages' tests.
`generated` runs the real CLI once per module (400 rows, seed 0) in a temporary folder.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

RETAIL = Path(__file__).resolve().parents[2] / "examples" / "retail"
MODULES = (
    "catalog",
    "noise",
    "rawfiles",
    "tasks_math",
    "tasks_other",
    "tasks_sql",
    "tasks_tools",
    "tasks_episodes",
    "inject",
    "build_db",
    "generate",
)
ROWS = 400


@pytest.fixture(scope="module")
def retail():
    sys.path.insert(0, str(RETAIL))
    saved = {m: sys.modules.pop(m) for m in MODULES if m in sys.modules}
    try:
        yield SimpleNamespace(**{m: importlib.import_module(m) for m in MODULES})
    finally:
        sys.path.remove(str(RETAIL))
        for m in MODULES:
            sys.modules.pop(m, None)
        sys.modules.update(saved)


def run_generate(
    out: Path, seed: int = 0, rows: int = ROWS, *flags: str, args: tuple[str, ...] = ()
) -> subprocess.CompletedProcess:
    """generate.py into `out`; `flags` go to the interpreter, `args` to the generator."""
    cmd = [
        sys.executable,
        *flags,
        str(RETAIL / "generate.py"),
        "--out",
        str(out),
        "--seed",
        str(seed),
        "--rows",
        str(rows),
        "--db",
        str(out / "shop.db"),
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True)


@pytest.fixture(scope="session")
def generator_cli():
    """Runs `python examples/retail/generate.py` (the real CLI) into a folder."""
    return run_generate


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    out = tmp_path_factory.mktemp("retail_raw")
    run_generate(out)
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    return SimpleNamespace(out=out, manifest=manifest)
