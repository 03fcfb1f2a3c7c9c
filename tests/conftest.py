"""Suite-wide test settings: offline by construction, no telemetry, and markers that skip honestly.

`gpu` tests run only where CUDA is available and `vllm` tests only where vllm imports (the
`.venv-vllm` environment of `make test-vllm`); both say why when they skip.
"""

import importlib.util
import os
from pathlib import Path

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

    def load(name: str):
        path = Path(__file__).resolve().parents[1] / "bench" / f"{name}.py"
        spec = importlib.util.spec_from_file_location(f"{name}_bench", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load


# A tiny random-init Llama and a character-level tokenizer, built offline and independent of the
# training package, so the engine and tiering tests pin those layers on their own: the HF engine
# tests use them in memory, the vLLM tests and tiering load the saved directory.
CHARS = "abcdefghijklmnopqrstuvwxyz0123456789 +-*/=?.,:()\n"
SPECIALS = ("<pad>", "<s>", "</s>", "<unk>")


def build_tokenizer():
    """One token per character; `<s>` prepended to every text; left padding."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate(list(SPECIALS) + sorted(set(CHARS)))}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", vocab["<s>"])])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
        padding_side="left",
        clean_up_tokenization_spaces=False,
    )


def build_model(tokenizer, seed: int = 0, hidden: int = 64, layers: int = 2, heads: int = 2, kv_heads: int = 2):
    """A random-init LlamaForCausalLM sized for a few milliseconds per forward pass (kv_heads < heads:
    grouped-query attention)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,  # the defaults' head_dim 32: vLLM-CPU minimum
        max_position_embeddings=256,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(cfg)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.eval()
    return model


def save_tiny(out_dir: str | Path, seed: int = 0) -> Path:
    """Build and save model + tokenizer as a Hugging Face checkpoint directory."""
    tok = build_tokenizer()
    model = build_model(tok, seed)
    out = Path(out_dir)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def tiny_tokenizer():
    return build_tokenizer()


@pytest.fixture(scope="session")
def tiny_model(tiny_tokenizer):
    return build_model(tiny_tokenizer, seed=0)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    return save_tiny(tmp_path_factory.mktemp("tiny_lm"), seed=0)


@pytest.fixture(scope="session")
def one_torch_thread():
    """The tiny models gain nothing from threads, and on a shared box extra threads only spin."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def wait_until_zombie(pid: int, limit_s: float = 10.0) -> None:
    """Wait until child `pid` has exited and is left unreaped (Linux /proc); fail after `limit_s`."""
    import time

    deadline = time.monotonic() + limit_s
    while "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text():
        if time.monotonic() > deadline:
            pytest.fail(f"process {pid} did not exit within {limit_s} s")
        time.sleep(0.05)


@pytest.fixture
def await_zombie():
    """wait_until_zombie, for a test that makes its own exited child."""
    return wait_until_zombie


@pytest.fixture
def zombie():
    """The pid of a child of this process that has exited and is not reaped until the test ends: it
    still answers kill(pid, 0), as a server does whose parent never waits for it."""
    import subprocess

    child = subprocess.Popen(["true"])
    try:
        wait_until_zombie(child.pid)
        os.kill(child.pid, 0)
        yield child.pid
    finally:
        child.wait()
