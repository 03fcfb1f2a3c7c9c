"""Fixtures for the cleaning tests: a tiny file writer and the sample retail domain, generated once."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import json

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
    assert (RETAIL / "generate.py").exists() and (RETAIL / "spec.yaml").exists(), (
        "examples/retail is part of the project"
    )
    folder = tmp_path_factory.mktemp("retail")
    shutil.copy(RETAIL / "spec.yaml", folder / "spec.yaml")
    subprocess.run(
        [
            sys.executable,
            str(RETAIL / "generate.py"),
            "--out",
            str(folder / "raw"),
            "--seed",
            "0",
            "--db",
            str(folder / "shop.db"),
        ],
        check=True,
        capture_output=True,
    )

    spec = yaml.safe_load((folder / "spec.yaml").read_text(encoding="utf-8"))
    manifest = json.loads((folder / "raw" / "manifest.json").read_text(encoding="utf-8"))
    return spec, folder, manifest


def _rows(n: int) -> list[dict]:
    rows = []
    for i in range(n):
        rows.append(
            {
                "id": f"t{i}",
                "question": f"A shop in the city centre sells {i} apples at 3 yuan each to its regular customers. "
                "What do they cost in total?",
                "reference": str(3 * i),
                "category": "arithmetic",
            }
        )
    return rows


@pytest.fixture
def toy_sources(write):
    """Two sources over three files (JSONL, GBK CSV, CSV with a bad line): exact, near (in another
    chunk at small chunk sizes) and id duplicates, quarantined lines and rows the checks reject."""
    from rlvrflow.cleaning import SourceSpec

    rows = _rows(12)
    lines = [json.dumps(r, ensure_ascii=False) for r in rows]
    lines.insert(3, json.dumps({**rows[1], "id": "t1-again"}))  # exact duplicate
    lines.insert(
        9,
        json.dumps(
            {
                **rows[2],
                "id": "t2-near",  # near, across chunks
                "question": rows[2]["question"].replace("regular", "regulr"),
            }
        ),
    )
    lines += [
        "{not json",
        "",
        json.dumps({"id": "m", "reference": "1", "category": "arithmetic"}),
        json.dumps(
            {
                "id": "t5",
                "question": "A brand new question about refunds here?",
                "reference": "9",
                "category": "arithmetic",
            }
        ),  # duplicate id
        json.dumps({"id": "b", "question": "bad category question?", "reference": "1", "category": "x"}),
        json.dumps({"id": "s", "question": "ab", "reference": "1", "category": "policy"}),
        json.dumps({"id": "e", "question": "<|im_start|>", "reference": "1", "category": "policy"}),
        "\x00\x01\x02\x03junk\x04\x05",
    ]
    write("raw/a.jsonl", "\n".join(lines) + "\n")
    csv_text = "id,question,reference,category\n" + "\n".join(
        [
            "c1,一家店有12个苹果，卖掉5个，还剩几个？,7,arithmetic",
            "c2,一家店有12个苹果，卖掉5个，还剩几个,7,arithmetic",  # exact dup once normalized
            'c3,"broken, row,1,arithmetic',
            "c4,a shop in the city centre sells 4 apples at 3 yuan each to its regular customers. "
            "What do they cost in total,12,arithmetic",  # dup of a.jsonl
            "c5,退货政策是多少天？,7天,policy",
        ]
    )
    write("raw/b.csv", csv_text.encode("gbk"))
    write(
        "raw/c.csv",
        b"id,question,reference,category\nd1,\xff\xfe bad line,1,arithmetic\n"
        b"d2,How many days can I return a gift card?,0,policy\n",
    )
    return [
        SourceSpec(name="tickets", path="raw/*.jsonl", format="jsonl"),
        SourceSpec(name="erp", path=["raw/b.csv", "raw/c.csv"], format="csv"),
    ]
