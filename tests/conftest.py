"""Suite-wide test settings: offline by construction, no telemetry, and markers that skip honestly.

`gpu` tests run only where CUDA is available and `vllm` tests only where vllm imports (the
`.venv-vllm` environment of `make test-vllm`); both say why when they skip.
"""
import importlib.util
import os

import pytest

for key, value in {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    "TOKENIZERS_PARALLELISM": "false",
    # as `rlvrflow run` and prefect.yaml set it; Prefect reads it once, when its logging is first set up,
    # which may be in any test that imports it
    "PREFECT_LOGGING_EXTRA_LOGGERS": "rlvrflow",
}.items():
    os.environ.setdefault(key, value)


def _has_cuda() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return torch.cuda.is_available()


def pytest_collection_modifyitems(config, items):
    has_vllm = importlib.util.find_spec("vllm") is not None
    has_cuda = None
    for item in items:
        if "vllm" in item.keywords and not has_vllm:
            item.add_marker(pytest.mark.skip(reason="vllm not importable: run `make test-vllm`"))
        if "gpu" in item.keywords:
            if has_cuda is None:
                has_cuda = _has_cuda()
            if not has_cuda:
                item.add_marker(pytest.mark.skip(reason="no CUDA device"))


@pytest.fixture(scope="session")
def load_bench():
    """Import a script of bench/ by name (bench/ is not a package): `load_bench("tier_drift")`."""
    from pathlib import Path

    def load(name: str):
        path = Path(__file__).resolve().parents[1] / "bench" / f"{name}.py"
        spec = importlib.util.spec_from_file_location(f"{name}_bench", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load
