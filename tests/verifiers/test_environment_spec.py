"""An environment named by a category in `verifiers.rules`: loading and bad configs, attach (references
and worked transcripts replayed), the environment canaries at attach, and split keeping episode rows
out of train/eval. The environment and its database are test_environment.py's."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from pydantic import ValidationError

from rlvrflow.verifiers import canary
from rlvrflow.verifiers.attaching import attach
from rlvrflow.verifiers.config import EPISODE, CanaryConfig, VerifierConfig
from rlvrflow.verifiers.episode import run_episode
from rlvrflow.verifiers.episode_canary import environment_summary, probe_environments

from .test_environment import ROWS, SCHEMA, TASKS, _row, _spec, agent


def shop_db(folder: Path) -> Path:
    """test_environment.py's shop in `folder`: order 7's kettle was on promotion, order 9 already has a refund."""
    import sqlite3

    path = folder / "shop.db"
    con = sqlite3.connect(path)
    con.executescript(SCHEMA.read_text(encoding="utf-8") + ROWS)
    con.commit()
    con.close()
    return path


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return shop_db(tmp_path)


def _rules(db: Path, **outcome) -> dict:
    env = _spec(db)
    env["database"] = db.name  # relative to the spec's folder
    if outcome:
        env["outcome"] = outcome
    return {"rules": [{"category": "refunds", "environment": env}, {"category": "arithmetic", "verifier": "math"}]}


def _rows(env, worked: int = 0) -> pl.DataFrame:
    rows = []
    for k in range(12):
        order, product, amount = TASKS[k % 2]
        row = {"id": f"r{k}", "category": "refunds", **_row(order, product, amount), "solution": ""}
        if k < worked:
            ep = run_episode(env, row, agent)
            row["solution"] = json.dumps(ep.messages[2:])  # after the system and user messages
        rows.append(row)
    rows.append({"id": "m1", "category": "arithmetic", "prompt": "2+2?", "reference": "4", "solution": ""})
    return pl.DataFrame(rows)


def test_a_rule_names_an_environment_with_its_database_relative_to_the_spec(db):
    cfg = VerifierConfig.model_validate(_rules(db))
    rule = cfg.rule_for("refunds")
    assert rule.verifier is None and rule.environment.max_turns == 5
    env = rule.resolved_environment(db.parent)
    assert env.database == db.resolve() and [t.name for t in env.tools][-1] == "issue_refund"
    assert cfg.rule_for("arithmetic").environment is None


@pytest.mark.parametrize(
    "change, needle",
    [
        (lambda r: r.update(verifier="math"), "give exactly one of verifier or environment"),
        (lambda r: r.pop("environment"), "give exactly one of verifier or environment"),
        (lambda r: r.update(params={"database": "shop.db"}), "an environment's settings go inside `environment`"),
        (lambda r: r["environment"].update(max_turns=0), "rules.0.environment.max_turns"),
        (
            lambda r: r["environment"]["tools"][0].update(sql="SELECT * FROM orders WHERE order_id = :id"),
            "rules.0.environment.tools.0",
        ),
        (lambda r: r["environment"].pop("outcome"), "rules.0.environment.outcome"),
        (lambda r: r["environment"].update(max_turn=3), "rules.0.environment.max_turn"),
    ],
)
def test_bad_environment_configs_name_the_field(db, change, needle):
    data = _rules(db)
    change(data["rules"][0])
    with pytest.raises(ValidationError) as info:
        VerifierConfig.model_validate(data)
    assert needle in str(info.value)


def test_attach_keeps_environment_rows_with_their_reference_and_replays_worked_transcripts(db):
    cfg = VerifierConfig.model_validate(_rules(db))
    env = cfg.rule_for("refunds").resolved_environment(db.parent)
    kept, rejects, stats = attach(_rows(env, worked=3), cfg, db.parent, workers=1)
    assert stats["rows_kept"] == 13 and stats["rows_rejected"] == 0
    assert stats["outcome_only_rows"] == 10  # 9 refunds rows and the math row have no solution
    episodes = kept.filter(pl.col("category") == "refunds")
    assert set(episodes["verifier"]) == {EPISODE}
    params = json.loads(episodes["verifier_params"][0])
    assert Path(params["database"]) == db.resolve() and params["outcome"] == _spec(db)["outcome"] | {
        "ordered": False,
        "float_tol": 1e-6,
    }
    assert json.loads(episodes["reference"][0]) == [[7, 36.0, "damaged"]]


def test_attach_rejects_bad_references_and_transcripts_that_do_not_replay(db):
    cfg = VerifierConfig.model_validate(_rules(db))
    env = cfg.rule_for("refunds").resolved_environment(db.parent)
    df = _rows(env, worked=4).to_dicts()
    df[0]["reference"] = "36.0 to order 7"
    logged = json.loads(df[1]["solution"])
    logged[1]["content"] = json.dumps({"columns": ["name", "qty", "unit_price"], "rows": []})  # not the db's
    df[1]["solution"] = json.dumps(logged)
    logged = json.loads(df[2]["solution"])
    df[2]["solution"] = json.dumps(logged[:3])  # ends on a tool call: the episode goes on
    df[3]["reference"] = json.dumps([[7, 45.0, "damaged"]])  # the transcript refunds 36
    _, rejects, stats = attach(pl.DataFrame(df), cfg, db.parent, workers=1)
    details = dict(zip(rejects["id"], rejects["detail"]))
    assert set(rejects["reason"]) == {"reference_self_check"} and stats["rows_rejected"] == 4
    assert "the reference is not JSON" in details["r0"]
    assert "the environment now returns" in details["r1"]
    assert "ended after 3 (final_reply): the last message must be the only one without a tool call" in details["r2"]
    assert "does not reach the reference" in details["r3"]


def test_an_environment_whose_sql_does_not_run_stops_attach_naming_the_rule(db):
    data = _rules(db)
    data["rules"][0]["environment"]["tools"][1]["sql"] = "SELECT * FROM order_lines WHERE order_id = :order_id"
    cfg = VerifierConfig.model_validate(data)
    with pytest.raises(ValueError, match=r"verifiers.rules\[refunds\].environment: tool 'get_order_items'"):
        attach(pl.DataFrame([{"id": "a", "category": "refunds", **_row(*TASKS[0])}]), cfg, db.parent, workers=1)


def test_the_reply_canaries_leave_environment_rules_to_the_environment_canaries(db):
    cfg = VerifierConfig.model_validate(_rules(db))
    kept, _, _ = attach(_rows(None), cfg, db.parent, workers=1)
    rows = kept.to_dicts()
    report = canary.probe(rows, cfg.rules, CanaryConfig(sample_rows=5), workers=1)
    assert [r["category"] for r in report["rules"]] == ["arithmetic"] and report["ok"]
    assert canary.prior_probe(rows, cfg.rules, CanaryConfig(sample_rows=5), workers=1) == []
    envs = probe_environments(rows, cfg.rules, cfg.canaries, db.parent)
    assert envs["ok"] and envs["rules"][0]["passed"] == {
        "no_action": 0,
        "call_every_tool": 0,
        "call_every_tool_twice": 0,
    }
    assert "no scripted policy" in environment_summary(envs)


def test_a_weak_outcome_check_is_stopped_at_attach_before_training(db, tmp_path):
    """The outcome reads which orders got a refund, not the amount: calling every tool with guessed
    arguments earns the reward, and the attach stage stops the run with a message naming the rule."""
    from rlvrflow.flows.errors import DataError
    from rlvrflow.flows.runner import Job
    from rlvrflow.flows.spec import spec_data, spec_from_dict
    from rlvrflow.flows.stage_calls import attach_canaries

    weak = _rules(db, query="SELECT DISTINCT order_id FROM refunds WHERE refund_id > 1")
    cfg = VerifierConfig.model_validate(weak)
    rows = _rows(None).with_columns(
        pl.when(pl.col("category") == "refunds")
        .then(
            pl.col("reference").map_elements(
                lambda r: json.dumps([[row[0]] for row in json.loads(r)]), return_dtype=pl.String
            )
        )
        .otherwise(pl.col("reference"))
        .alias("reference")
    )
    kept, _, _ = attach(rows, cfg, db.parent, workers=1)
    report = probe_environments(kept.to_dicts(), cfg.rules, cfg.canaries, db.parent)
    assert not report["ok"] and report["rules"][0]["passed"]["call_every_tool"] == 12

    spec = spec_from_dict(_minimal_spec(weak), base_dir=db.parent)
    out = tmp_path / "attach"
    out.mkdir()
    kept.write_parquet(out / "attach.parquet")
    job = Job("attach", json.dumps(spec_data(spec)), str(db.parent), str(tmp_path), str(out), {})
    with pytest.raises(DataError) as info:
        attach_canaries(job, {})
    message = str(info.value)
    assert "environment canaries stop the run" in message and "rule 'refunds'" in message
    assert "call_every_tool passes 12 of 12 rows" in message and "outcome.query pays guesses" in message
    report = json.loads((tmp_path / "canary_report.json").read_text())
    assert report["environments"]["ok"] is False


def test_a_sound_environment_passes_the_attach_stage_canaries_and_lands_in_its_stats(db, tmp_path):
    from rlvrflow.flows.runner import Job
    from rlvrflow.flows.spec import spec_data, spec_from_dict
    from rlvrflow.flows.stage_calls import attach_canaries

    cfg = _rules(db)
    kept, _, _ = attach(_rows(None), VerifierConfig.model_validate(cfg), db.parent, workers=1)
    out = tmp_path / "attach"
    out.mkdir()
    kept.write_parquet(out / "attach.parquet")
    spec = spec_from_dict(_minimal_spec(cfg), base_dir=db.parent)
    result = attach_canaries(
        Job("attach", json.dumps(spec_data(spec)), str(db.parent), str(tmp_path), str(out), {}), {}
    )
    assert result.stats["canaries"]["environments"] == {
        "refunds": {"no_action": 0, "call_every_tool": 0, "call_every_tool_twice": 0}
    }
    assert json.loads((tmp_path / "canary_report.json").read_text())["environments"]["ok"] is True


def _minimal_spec(verifiers: dict) -> dict:
    return {
        "domain": "desk",
        "sources": [
            {
                "name": "t",
                "path": "raw/*.jsonl",
                "format": "jsonl",
                "fields": {"id": "id", "question": "q", "reference": "a"},
            }
        ],
        "verifiers": verifiers,
    }


def test_split_sets_episode_rows_aside_from_train_and_eval(db, tmp_path):
    """An environment's rows stay out of train.parquet / eval.parquet (single replies): they keep their
    split in episodes.parquet, which the stages that train on episodes read; the tokenizer's corpus holds
    their texts and the environment's instructions unless training.episodes is off."""
    from rlvrflow.flows.runner import Job
    from rlvrflow.flows.spec import spec_data, spec_from_dict
    from rlvrflow.flows.stage_calls import corpus_texts, split

    cfg = _rules(db)
    math = [
        {"id": f"n{k}", "category": "arithmetic", "prompt": f"{k}+1?", "reference": str(k + 1), "solution": ""}
        for k in range(40)
    ]
    rows = pl.concat([_rows(None), pl.DataFrame(math)])
    kept, _, _ = attach(rows, VerifierConfig.model_validate(cfg), db.parent, workers=1)
    kept.write_parquet(tmp_path / "attach.parquet")
    spec = spec_from_dict(_minimal_spec(cfg), base_dir=db.parent)
    out = tmp_path / "split"
    out.mkdir()
    job = Job(
        "split",
        json.dumps(spec_data(spec)),
        str(db.parent),
        str(tmp_path),
        str(out),
        {"attach": {"rows": str(tmp_path / "attach.parquet")}},
    )
    result = split(job)
    train, held_out = pl.read_parquet(out / "train.parquet"), pl.read_parquet(out / "eval.parquet")
    episodes = pl.read_parquet(out / result.files["episodes"])
    assert set(train["category"]) == set(held_out["category"]) == {"arithmetic"}
    assert episodes.height == 12 and set(episodes["verifier"]) == {EPISODE} and "split" in episodes.columns
    assert result.stats["rows_episodes"] == 12 and result.stats["rows_in"] == 53
    assert result.stats["rows_in"] == result.stats["rows_kept"] + result.stats["rows_rejected"]
    texts, without = corpus_texts(kept), corpus_texts(kept, episodes=False)
    assert "4+1?" in texts and any("arrived damaged" in t for t in texts)
    assert "You work the support desk of a shop. Use the tools." in texts
    assert "4+1?" in without and not any("arrived damaged" in t or "support desk" in t for t in without)
