"""Fixtures for the cleaning tests: a tiny file writer and the sample retail domain, generated once."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
RETAIL = ROOT / "examples" / "retail"


@pytest.fixture
def write(tmp_path):
    """write(name, bytes_or_text) -> path inside tmp_path (text is written as UTF-8)."""

    def _write(name: str, content: bytes | str) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
        return path

    return _write


@pytest.fixture(scope="session")
def retail_domain(tmp_path_factory):
    """(spec dict, spec folder, manifest) of the sample domain generated from seed 0 in a temp folder."""
    assert (RETAIL / "generate.py").exists() and (RETAIL / "spec.yaml").exists(), "examples/retail is part of the project"
    folder = tmp_path_factory.mktemp("retail")
    shutil.copy(RETAIL / "spec.yaml", folder / "spec.yaml")
    subprocess.run([sys.executable, str(RETAIL / "generate.py"), "--out", str(folder / "raw"), "--seed", "0",
                    "--db", str(folder / "shop.db")], check=True, capture_output=True)
    import json

    spec = yaml.safe_load((folder / "spec.yaml").read_text(encoding="utf-8"))
    manifest = json.loads((folder / "raw" / "manifest.json").read_text(encoding="utf-8"))
    return spec, folder, manifest
