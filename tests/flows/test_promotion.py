"""Champion against challenger (flows/promotion.py): the rule, registration with promotion, and two
nights of `rlvrflow run` where the second compares with the first on the same prompts."""

import json
from pathlib import Path

import pytest

from rlvrflow.flows.cli import main
from rlvrflow.flows.config import PromotionConfig
from rlvrflow.flows.models import Registry
from rlvrflow.flows.promotion import decide, register_and_promote


def result(scores: list[float]) -> dict:
    """An eval result on prompts p0..pN with these greedy scores."""
    ids = [f"p{i}" for i in range(len(scores))]
    return {
        "pass_at_1_greedy": sum(scores) / len(scores),
        "by_prompt": {"ids": ids, "greedy": scores, "sampled": scores},
    }


def sets(regression: dict[str, float] | None = None, robustness: float | None = None) -> dict:
    return {
        "regression": {k: {"pass_at_1_greedy": v} for k, v in (regression or {}).items()},
        "robustness": None if robustness is None else {"pass_at_1_greedy": robustness},
    }


CHAMPION = result([1, 0, 0, 0] * 25)  # 25%
BETTER = result([1, 1, 0, 0] * 25)  # 50%, the same prompts
SLIGHTLY = result([1, 0, 0, 0] * 24 + [1, 1, 0, 0])  # one prompt more


def test_a_clear_gain_is_promoted_and_says_why():
    d = decide(BETTER, CHAMPION, sets(), sets(), PromotionConfig(), max_regression=2.0)
    assert d["promote"] and d["gain"]["points"] == 25.0 and d["gain"]["low"] > 0
    assert "+25.0 points" in d["reasons"][0]


def test_a_tie_or_a_loss_keeps_the_champion():
    tie = decide(CHAMPION, CHAMPION, sets(), sets(), PromotionConfig(), max_regression=2.0)
    loss = decide(CHAMPION, BETTER, sets(), sets(), PromotionConfig(), max_regression=2.0)
    assert not tie["promote"] and "more than zero" in tie["reasons"][0]
    assert not loss["promote"] and "-25.0 points" in loss["reasons"][0]


def test_min_gain_and_the_interval_rule():
    small = decide(SLIGHTLY, CHAMPION, sets(), sets(), PromotionConfig(min_gain=5.0), max_regression=2.0)
    assert not small["promote"] and "promotion.min_gain (+5.0)" in small["reasons"][0]
    assert decide(
        SLIGHTLY, CHAMPION, sets(), sets(), PromotionConfig(require_interval_above_zero=False), max_regression=2.0
    )["promote"]
    noisy = decide(SLIGHTLY, CHAMPION, sets(), sets(), PromotionConfig(), max_regression=2.0)
    assert not noisy["promote"] and "does not lie above zero" in noisy["reasons"][0]


def test_the_held_out_episodes_count_as_a_regression_check_apart_from_the_gain():
    episodes = {"champion": result([1, 1, 0, 0] * 25), "worse": result([1, 0, 0, 0] * 25)}
    d = decide(
        {**BETTER, "episodes": episodes["worse"]},
        {**CHAMPION, "episodes": episodes["champion"]},
        sets(),
        sets(),
        PromotionConfig(),
        max_regression=2.0,
    )
    assert not d["promote"] and d["gain"]["points"] == 25.0  # the headline gain is over single replies only
    assert d["regressions"] == {"the held-out episodes": 25.0}
    assert "the held-out episodes: 25.0 points below the champion (more than 2.0; 95% interval" in d["reasons"][0]
    kept = {**CHAMPION, "episodes": episodes["champion"]}
    assert decide({**BETTER, "episodes": episodes["champion"]}, kept, sets(), sets(), PromotionConfig(), 2.0)["promote"]
    # one episode of twenty lost: 5 points, but within noise (the interval reaches zero): no block
    noisy = decide(
        {**BETTER, "episodes": result([1] * 9 + [0] * 11)},
        {**CHAMPION, "episodes": result([1] * 10 + [0] * 10)},
        sets(),
        sets(),
        PromotionConfig(),
        max_regression=2.0,
    )
    assert noisy["promote"] and noisy["regressions"] == {"the held-out episodes": 5.0}
    # ... and the reason says so, not that nothing regressed more than the limit
    assert noisy["reasons"][0].endswith(
        "no set regressed more than 2.0 but the held-out episodes, 5.0 points below the champion, whose 95% "
        "interval -15.0 to +0.0 reaches zero"
    ), noisy["reasons"][0]
    assert kept_reason(episodes).endswith("no set regressed more than 2.0")


def kept_reason(episodes: dict) -> str:
    """The reason of a promotion whose episodes held level with the champion's."""
    kept = {**CHAMPION, "episodes": episodes["champion"]}
    return decide({**BETTER, "episodes": episodes["champion"]}, kept, sets(), sets(), PromotionConfig(), 2.0)[
        "reasons"
    ][0]


def test_a_regression_against_the_champion_blocks_promotion():
    d = decide(
        BETTER,
        CHAMPION,
        sets({"general": 0.70}, robustness=0.9),
        sets({"general": 0.80}, robustness=0.9),
        PromotionConfig(),
        max_regression=2.0,
    )
    assert not d["promote"] and d["regressions"] == {"regression set general": 10.0, "the robustness set": 0.0}
    assert "regression set general: 10.0 points below the champion (more than 2.0)" in d["reasons"]
    # the section's own bound replaces eval.max_regression
    assert decide(
        BETTER,
        CHAMPION,
        sets({"general": 0.70}),
        sets({"general": 0.80}),
        PromotionConfig(max_regression=15.0),
        max_regression=2.0,
    )["promote"]


def measured(folder: Path, champion_path: str, champion: dict, challenger: dict) -> Path:
    """A compare stage's files: the champion (by content) and tonight's best, measured on the same prompts."""
    from rlvrflow.flows.cache import tree_digest

    folder.mkdir(parents=True, exist_ok=True)
    for name, result in (("champion", champion), ("best", challenger)):
        (folder / f"{name}.json").write_text(json.dumps(result))
        (folder / f"{name}.sets.json").write_text(json.dumps(sets()))
    record = {
        "champion": {
            "model": champion_path,
            "digest": tree_digest(Path(champion_path)),
            "result": "champion.json",
            "sets": "champion.sets.json",
        },
        "challenger": {"name": "best", "result": "best.json", "sets": "best.sets.json"},
    }
    (folder / "compare.json").write_text(json.dumps(record))
    return folder / "compare.json"


def test_register_and_promote(fake_run, tmp_path):
    rule = PromotionConfig()
    first = register_and_promote(tmp_path, fake_run(tmp_path, "night1", 0.3), rule, 2.0, None)
    assert first["verdict"] == "promoted" and "first registered model" in first["decision"]["reasons"][0]

    champion_path = Registry(tmp_path).champion()["path"]
    better = measured(tmp_path / "c2", champion_path, CHAMPION, BETTER)
    second = register_and_promote(tmp_path, fake_run(tmp_path, "night2", 0.5), rule, 2.0, better)
    assert second["verdict"] == "promoted" and second["champion"]["id"] == "night2"
    assert "+25.0 points" in second["decision"]["reasons"][0]

    # measurements of a model that is no longer the champion never promote
    third = register_and_promote(tmp_path, fake_run(tmp_path, "night3", 0.6), rule, 2.0, better)
    assert third["verdict"] == "not promoted" and "champion changed to night2" in third["decision"]["reasons"][0]
    # a tie keeps the champion
    tie = measured(tmp_path / "c4", Registry(tmp_path).champion()["path"], BETTER, BETTER)
    kept = register_and_promote(tmp_path, fake_run(tmp_path, "night4", 0.5), rule, 2.0, tie)
    assert kept["verdict"] == "not promoted" and "more than zero" in kept["decision"]["reasons"][0]
    # auto: false registers and explains; the champion stays
    win = measured(tmp_path / "c5", Registry(tmp_path).champion()["path"], CHAMPION, BETTER)
    manual = register_and_promote(tmp_path, fake_run(tmp_path, "night5", 0.7), PromotionConfig(auto=False), 2.0, win)
    assert manual["verdict"] == "not promoted" and "promotion.auto is false" in manual["decision"]["reasons"][-1]
    assert [m["id"] for m in Registry(tmp_path).models() if m["champion"]] == ["night2"]


def test_the_second_night_is_measured_against_the_first_on_the_same_prompts(
    prefect_harness, toy_spec, tmp_path, capsys, read_artifact
):
    out = tmp_path / "out"
    assert main(["run", str(toy_spec), "--out", str(out), "--smoke"]) == 0
    first = capsys.readouterr().out
    registry = Registry(out)
    (night1,) = registry.models()
    assert night1["champion"] and "(promoted: the first registered model" in first
    assert "## " + night1["id"] + ": promoted" in read_artifact("toy-promotion").data

    # the same data and spec again: tonight's best is the champion's weights, so the champion, evaluated
    # anew on tonight's prompts from its exported folder, must score exactly as tonight's best did
    assert main(["run", str(toy_spec), "--out", str(out), "--smoke"]) == 0
    second = capsys.readouterr().out
    assert any(line.startswith("  compare ") and "+0.0 points" in line for line in second.splitlines()), second
    latest = json.loads((out / "latest.json").read_text())
    report = json.loads(Path(latest["report"]).read_text())
    compared = report["champion_comparison"]
    assert compared["champion"]["model"] == night1["path"]
    assert compared["champion"]["pass_at_1_greedy"] == compared["challenger"]["pass_at_1_greedy"]
    assert compared["gain"]["points"] == 0.0
    assert report["promotion"]["verdict"] == "not promoted" and report["promotion"]["champion"] == night1["id"]
    assert "not promoted: gain +0.0 points over the champion" in second
    assert [m["champion"] for m in registry.models()] == [True, False]
    assert ": not promoted" in read_artifact("toy-promotion").data

    # by hand: promote the second night, then roll back to the first
    night2 = registry.models()[1]["id"]
    assert main(["models", "--out", str(out), "promote", night2, "--reason", "reviewed by hand"]) == 0
    assert main(["models", "--out", str(out), "rollback", "--reason", "answers in English"]) == 0
    assert registry.champion()["id"] == night1["id"]


@pytest.mark.parametrize("bad", ["promotion.min_gain=-1", "promotion.auto=maybe", "promotion.nope=1"])
def test_bad_promotion_settings_are_usage_errors(toy_spec, tmp_path, capsys, bad):
    assert main(["run", str(toy_spec), "--out", str(tmp_path / "out"), "--smoke", "--set", bad]) == 2
    assert "promotion." in capsys.readouterr().err
