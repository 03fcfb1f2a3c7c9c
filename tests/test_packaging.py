"""One import root: the wheel installs `rlvrflow` and nothing else at the top, so it lives beside
PyPI's `verifiers` (an RL environments library) without either shadowing the other. And the vLLM
tests' modules are the ones `make test-vllm` collects."""

import re
import subprocess
import sys
import sysconfig
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FOLDERS = ("cleaning", "verifiers", "engines", "curriculum", "training", "flows")
# an import statement, or one inside a string of code (`python -c "import sys; from X.cli ..."`)
BARE_IMPORT = re.compile(rf"(^\s*|[;\"']\s*)(from|import) ({'|'.join(FOLDERS)})(\.|\s|$)", re.M)
PYPI_VERIFIERS = "verifiers==0.4.0"


def test_the_packages_list_is_the_tree():
    """pyproject lists packages by hand (the folders are mapped into rlvrflow); a new subpackage
    missing from the list would silently be missing from the wheel."""
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    tree = {"rlvrflow"} | {
        "rlvrflow." + ".".join(init.parent.relative_to(REPO).parts)
        for folder in FOLDERS
        for init in (REPO / folder).rglob("__init__.py")
    }
    assert listed == tree


def test_every_vllm_test_module_is_one_make_test_vllm_collects():
    """`make test-vllm` collects tests/*/test_*vllm*.py only (its venv lacks the flows' packages, so a
    module that imports them fails collection there): a vLLM test in another module would never run."""
    vllm = re.compile(r"^(pytestmark = pytest\.mark\.vllm|@pytest\.mark\.vllm)", re.M)
    marked = {p.relative_to(REPO).as_posix() for p in (REPO / "tests").rglob("test_*.py") if vllm.search(p.read_text())}
    collected = {p.relative_to(REPO).as_posix() for p in REPO.glob("tests/*/test_*vllm*.py")}
    assert marked and marked <= collected, sorted(marked - collected)
    assert "$(wildcard tests/*/test_*vllm*.py)" in (REPO / "Makefile").read_text()


def test_nothing_imports_a_folder_by_its_bare_name():
    offenders = []
    for folder in (*FOLDERS, "tests", "bench", "scripts", "examples", "docs", "rlvrflow"):
        for path in (REPO / folder).rglob("*"):
            if path.suffix in {".py", ".md"} and "__pycache__" not in path.parts:
                offenders += [
                    f"{path.relative_to(REPO)}: {m.group(0).strip()}" for m in BARE_IMPORT.finditer(path.read_text())
                ]
    offenders += [f"README.md: {m.group(0).strip()}" for m in BARE_IMPORT.finditer((REPO / "README.md").read_text())]
    assert offenders == [], "import these as rlvrflow.<folder>:\n" + "\n".join(offenders)


PLUGIN = """
from rlvrflow.verifiers import Verdict

def shouting(response, reference, params):
    ok = response.strip() == response.strip().upper() and reference.lower() in response.lower()
    return Verdict(1.0 if ok else 0.0, "correct" if ok else "wrong", response.strip(), "plugin")
"""


@pytest.mark.slow
def test_the_wheel_installs_beside_pypi_verifiers(tmp_path):
    """Build the wheel, install it and PyPI's `verifiers` into a fresh venv, then score with a
    built-in and with a user plugin through the installed `rlvrflow verify`."""
    wheels = tmp_path / "wheels"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", str(REPO), "--no-deps", "-w", str(wheels)], check=True, cwd=tmp_path)
    subprocess.run([*pip, "download", PYPI_VERIFIERS, "--no-deps", "-d", str(wheels)], check=True)
    ours = next(wheels.glob("rlvrflow-*.whl"))
    tops = {name.split("/")[0] for name in zipfile.ZipFile(ours).namelist()}
    assert tops == {"rlvrflow", f"{ours.name.split('-')[0]}-{ours.name.split('-')[1]}.dist-info"}

    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    py = env_dir / "bin" / "python"
    site = Path(
        subprocess.run(
            [py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    # both wheels into the fresh venv (the running pip, targeting that venv's interpreter)
    subprocess.run(
        [*pip, "--python", str(py), "install", "--no-deps", str(ours), *wheels.glob("verifiers-*.whl")], check=True
    )
    # rlvrflow's dependencies come from this environment's site-packages, appended after the fresh
    # venv's own; .pth files there are not processed, so this checkout's editable install stays out
    (site / "zz_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    where = subprocess.run(
        [
            py,
            "-c",
            "import importlib.util as u, importlib.metadata as m, rlvrflow.verifiers as v;"
            "print(v.__file__); print(u.find_spec('verifiers').origin);"
            "print(m.distribution('verifiers').version)",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    ).stdout.split()
    assert where[0] == str(site / "rlvrflow" / "verifiers" / "__init__.py")
    assert where[1] == str(site / "verifiers" / "__init__.py")  # PyPI's, untouched by ours
    assert where[2] == PYPI_VERIFIERS.split("==")[1]

    (tmp_path / "in.jsonl").write_text(
        '{"response": "so the answer is 42", "reference": "42"}\n{"response": "I think 41", "reference": "42"}\n'
    )
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "desk_rules.py").write_text(PLUGIN)
    (tmp_path / "shout.jsonl").write_text(
        '{"response": "REFUND ISSUED", "reference": "refund"}\n{"response": "refund issued", "reference": "refund"}\n'
    )
    run_env = {
        "PATH": f"{env_dir / 'bin'}:/usr/bin:/bin",
        "PYTHONPATH": str(tmp_path / "plugins"),
        "HOME": str(tmp_path),
    }
    rlvrflow = str(env_dir / "bin" / "rlvrflow")
    subprocess.run(
        [rlvrflow, "verify", "--verifier", "math", "in.jsonl", "math.out.jsonl"], check=True, cwd=tmp_path, env=run_env
    )
    subprocess.run(
        [rlvrflow, "verify", "--verifier", "desk_rules:shouting", "shout.jsonl", "shout.out.jsonl"],
        check=True,
        cwd=tmp_path,
        env=run_env,
    )
    import json

    math_scores = [json.loads(line)["score"] for line in (tmp_path / "math.out.jsonl").read_text().splitlines()]
    plugin_scores = [json.loads(line)["score"] for line in (tmp_path / "shout.out.jsonl").read_text().splitlines()]
    assert math_scores == [1.0, 0.0]
    assert plugin_scores == [1.0, 0.0]
