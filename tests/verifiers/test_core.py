"""Registry, config validation, the pool (order, timeouts, errors), import weight, reward layers."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pydantic import ValidationError

from rlvrflow import verifiers
from rlvrflow.verifiers import RewardConfig, Verdict, VerifierConfig, get_verifier, reward, score_many, verify
from rlvrflow.verifiers.registry import UnknownVerifier, register


def test_unknown_name_lists_valid_ones():
    with pytest.raises(UnknownVerifier) as exc:
        get_verifier("mathh")
    for name in ("math", "code", "sql", "json", "keyword", "regex", "choice"):
        assert name in str(exc.value)


def test_config_rejects_unknown_verifier_with_the_list():
    with pytest.raises(ValidationError) as exc:
        VerifierConfig.model_validate({"rules": [{"category": "a", "verifier": "nope"}]})
    assert "valid names" in str(exc.value) and "math" in str(exc.value)


def test_config_is_frozen_and_strict():
    cfg = VerifierConfig.model_validate({"rules": [{"category": "a", "verifier": "math"}]})
    with pytest.raises(ValidationError):
        cfg.timeout_s = 3
    with pytest.raises(ValidationError):
        VerifierConfig.model_validate({"rules": [{"category": "a", "verifier": "math"}], "extra": 1})
    with pytest.raises(ValidationError, match="more than one rule"):
        VerifierConfig.model_validate(
            {"rules": [{"category": "a", "verifier": "math"}, {"category": "a", "verifier": "choice"}]}
        )


def test_every_field_has_a_description():
    from rlvrflow.verifiers.config import LengthPenaltyConfig, VerifierRule

    for model in (VerifierConfig, VerifierRule, RewardConfig, LengthPenaltyConfig):
        for name, field in model.model_fields.items():
            assert field.description, f"{model.__name__}.{name}"


USER_MODULE = textwrap.dedent("""
    from rlvrflow.verifiers.verdict import Verdict
    def shout(response, reference, params):
        ok = response.strip() == reference.upper()
        return Verdict(float(ok), "correct" if ok else "wrong", response.strip())
    def check_reference(reference, params):
        return None if reference else "empty"
""")


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    (tmp_path / "my_checks.py").write_text(USER_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "my_checks:shout"


def test_dotted_path_verifier_in_process_and_in_pool(user_module):
    assert verify(user_module, "HI", "hi").correct
    got = score_many([(user_module, "HI", "hi", None), (user_module, "hi", "hi", None)], workers=1)
    assert [v.status for v in got] == ["correct", "wrong"]
    VerifierConfig.model_validate({"rules": [{"category": "t", "verifier": user_module}]})


def test_entry_point_verifier(user_module, monkeypatch):
    from importlib import metadata

    from rlvrflow.verifiers import registry

    ep = metadata.EntryPoint(name="tickets", value=user_module, group=registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(registry, "_entry_points", lambda: {"tickets": ep})
    assert "tickets" in registry.available()
    assert verify("tickets", "OK", "ok").correct


def test_register_decorator():
    @register("always_wrong_test")
    def _fn(response, reference, params):
        return Verdict(0.0, "wrong")

    assert verify("always_wrong_test", "a", "b").status == "wrong"


def test_score_many_keeps_order_and_never_raises():
    items = [("math", f"Answer: {i}", str(i if i % 3 else i + 1), None) for i in range(30)]
    items += [("nope", "x", "y", None), ("math", "x", "1", "{not json"), ("math", None, "1", {})]
    got = score_many(items, workers=2, timeout_s=20)
    assert [v.correct for v in got[:30]] == [bool(i % 3) for i in range(30)]
    assert [v.status for v in got[30:]] == ["error", "error", "unparsed"]
    assert "valid names" in got[30].detail


def test_score_many_times_out_a_stuck_verifier(tmp_path, monkeypatch):
    (tmp_path / "slow_checks.py").write_text(
        "import time\nfrom rlvrflow.verifiers.verdict import Verdict\n"
        "def hang(r, ref, p):\n    time.sleep(60)\n    return Verdict(1.0, 'correct')\n"
        "def crash(r, ref, p):\n    import os; os._exit(3)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    got = score_many(
        [
            ("slow_checks:hang", "", "", None),
            ("math", "Answer: 1", "1", None),
            ("slow_checks:crash", "", "", None),
            ("math", "Answer: 2", "2", None),
        ],
        workers=2,
        timeout_s=2,
    )
    assert [v.status for v in got] == ["timeout", "correct", "error", "correct"]


def test_verifier_exception_becomes_error(tmp_path, monkeypatch):
    (tmp_path / "bad_checks.py").write_text(
        "def boom(r, ref, p):\n    raise RuntimeError('bug')\ndef notverdict(r, ref, p):\n    return 1\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "RuntimeError: bug" in verify("bad_checks:boom", "", "").detail
    assert verify("bad_checks:notverdict", "", "").status == "error"


def test_package_names_stay_functions_once_their_modules_are_imported():
    """`verifiers.attach` and `verifiers.reward` were shadowed by submodules of the same name as soon as
    anything imported them ('module' object is not callable, depending on test order); the modules are
    named for what they do (attaching, shaping), so the package's names stay the functions."""
    code = (
        "import rlvrflow.verifiers.attaching, rlvrflow.verifiers.shaping, inspect\n"
        "from rlvrflow.verifiers import attach, reward\n"
        "print(inspect.isfunction(attach), inspect.isfunction(reward))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True"]
    modules = {p.stem for p in Path(verifiers.__file__).parent.glob("*.py")}
    assert not modules & set(verifiers.__all__), "a module named like a public name shadows it once imported"


def test_import_is_light():
    code = (
        "import sys, rlvrflow, rlvrflow.verifiers, rlvrflow.verifiers.config, rlvrflow.verifiers.registry\n"
        "heavy = [m for m in ('torch', 'sympy', 'prefect', 'great_expectations', 'polars') if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
    assert set(verifiers.__all__) >= {
        "Verdict",
        "get_verifier",
        "verify",
        "score_many",
        "attach",
        "register",
        "RewardConfig",
        "reward",
        "VerifierConfig",
    }


def _cfg(**kw) -> RewardConfig:
    return RewardConfig.model_validate(kw)


def test_reward_layers_hand_computed():
    cfg = _cfg(
        format_weight=0.1,
        correctness_weight=1.0,
        length_penalty={"enabled": True, "target_tokens": 64, "max_penalty": 0.2},
    )
    ok = Verdict(1.0, "correct", "36")
    assert reward(ok, "Answer: 36", 10, cfg).total == pytest.approx(1.1)
    parts = reward(ok, "Answer: 36", 128, cfg)
    assert parts.length_penalty == pytest.approx(0.2 * math.tanh(1.0))
    assert parts.total == pytest.approx(1.1 - 0.2 * math.tanh(1.0))
    assert reward(ok, "", 10**6, cfg).length_penalty <= 0.2
    assert reward(Verdict(0.0, "wrong", "35"), "Answer: 35", 10, cfg).total == pytest.approx(0.1)
    assert reward(Verdict(0.0, "unparsed"), "hm", 10, cfg).total == 0.0
    assert reward(Verdict(0.0, "wrong", "", "several answers", hedged=True), "x", 10, cfg).format == 0.0
    # the flag decides, not the wording of the detail
    assert reward(Verdict(0.0, "wrong", "", "hedged between 2"), "x", 10, cfg).format == 1.0


def test_reward_two_sided_and_process_layer():
    cfg = _cfg(
        length_penalty={
            "enabled": True,
            "target_tokens": 100,
            "max_penalty": 0.5,
            "scale_tokens": 50,
            "two_sided": True,
        },
        process_weight=0.5,
        process_verifier="keyword",
        process_params={"required": ["return policy"]},
    )
    parts = reward(Verdict(1.0, "correct"), "See our return policy.", 50, cfg)
    assert parts.length_penalty == pytest.approx(0.5 * math.tanh(1.0))
    assert parts.process == 1.0
    assert parts.total == pytest.approx(0.1 + 1.0 + 0.5 - 0.5 * math.tanh(1.0))
    assert reward(Verdict(1.0, "correct"), "no link", 100, cfg).process == 0.0


def test_process_weight_needs_a_verifier():
    with pytest.raises(ValidationError, match="process_verifier"):
        _cfg(process_weight=0.3)


def test_score_many_from_several_threads():
    from concurrent.futures import ThreadPoolExecutor

    def batch(k):
        items = [("math", f"Answer: {k * 100 + i}", str(k * 100 + i), None) for i in range(20)]
        return [v.correct for v in score_many(items, workers=2)]

    with ThreadPoolExecutor(4) as ex:
        results = list(ex.map(batch, range(4)))
    assert results == [[True] * 20] * 4
    with ThreadPoolExecutor(4) as ex:
        got = list(ex.map(lambda g: verify("math", "\\boxed{2\\sqrt{2}}", g).correct, ["\\sqrt{8}", "3"] * 4))
    assert got == [True, False] * 4
