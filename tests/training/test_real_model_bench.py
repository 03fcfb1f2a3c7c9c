"""bench/real_model.py's own pieces: which sample rows become the English source and the Chinese set,
and the GRPO measurements read from a run's metrics. If these drift, the bench's figures would be
about other rows or misread the run."""

from __future__ import annotations

import csv
import json

import pytest


@pytest.fixture(scope="module")
def bench(load_bench):
    return load_bench("real_model")


def write_raw(raw, tickets: list, erp: list[dict]) -> None:
    raw.mkdir()
    (raw / "tickets_2026-01.jsonl").write_text(
        "".join((t if isinstance(t, str) else json.dumps(t, ensure_ascii=False)) + "\n" for t in tickets),
        encoding="utf-8",
    )
    with open(raw / "orders_export_gbk.csv", "w", encoding="gb18030", newline="") as fh:
        w = csv.DictWriter(fh, ["单号", "下单日期", "门店", "业务类型", "问题描述", "标准答案", "客服回复"])
        w.writeheader()
        for r in erp:
            w.writerow({"下单日期": "2026-01-02", "门店": "上海店", **r})
    (raw / "manifest.json").write_text(
        json.dumps({"noisy_rows": [{"source": "tickets_2026-01.jsonl:3"}], "rejects": []}), encoding="utf-8"
    )


def ticket(tid, lang, typ, body, answer="6", reply=None):
    return {"ticket_id": tid, "lang": lang, "type": typ, "body": body, "answer": answer, "reply": reply}


def test_english_rows_take_english_numeric_tickets_and_erp_rows(bench, tmp_path):
    raw = tmp_path / "raw"
    write_raw(
        raw,
        [
            ticket("T1", "en", "arithmetic", "2 x 3?", reply="2*3=6\nAnswer: 6"),
            ticket("T2", "zh", "arithmetic", "2乘3等于多少？"),
            ticket("T3", "en", "discount", "10 yuan, 40% off?"),
            ticket("T4", "en", "policy_choice", "Which option?", "B"),
            "{not json",
        ],
        [
            {
                "单号": "ERP1",
                "业务类型": "order_total",
                "问题描述": "2 pens at 3 yuan. Total?",
                "标准答案": "6",
                "客服回复": "",
            },
            {
                "单号": "ERP2",
                "业务类型": "order_total",
                "问题描述": "2支笔，每支3元，共多少元？",
                "标准答案": "6",
                "客服回复": "2×3=6",
            },
        ],
    )
    rows = bench.english_rows(raw)
    assert [r["ticket_id"] for r in rows] == ["T1", "T3", "ERP1"]
    assert rows[0]["reply"] == "2*3=6\nAnswer: 6"
    assert rows[2] == {
        "ticket_id": "ERP1",
        "lang": "en",
        "type": "order_total",
        "body": "2 pens at 3 yuan. Total?",
        "answer": "6",
        "reply": None,
    }


def test_chinese_set_takes_clean_chinese_math_tickets_prompted_as_the_spec(bench, tmp_path):
    raw = tmp_path / "raw"
    write_raw(
        raw,
        [
            ticket("T1", "zh", "arithmetic", "2乘3等于多少？"),
            ticket("T2", "en", "arithmetic", "2 x 3?"),
            ticket("T3", "zh", "arithmetic", "噪声行"),  # listed as noisy in the manifest
            ticket("T4", "zh", "discount", "10元打6折，多少元？"),
        ],
        [],
    )
    rows = bench.chinese_set(raw, 10)
    assert [r["id"] for r in rows] == ["zh-T1", "zh-T4"]
    assert rows[0]["prompt"] == "2乘3等于多少？\nRequirements: show the working\nFormat: Answer: <number>"
    assert rows[0]["reference"] == "6" and rows[0]["category"] == "arithmetic"
    assert len(bench.chinese_set(raw, 1)) == 1


def test_grpo_curve_weighs_truncation_by_completions(bench, tmp_path):
    steps = [
        {
            "step": 1,
            "groups_seen": 4,
            "groups_zero_variance": 4,
            "reward_mean": 0.1,
            "correct_rate": 0.0,
            "zero_variance_fraction": 1.0,
            "completion_tokens_mean": 10.0,
            "completion_tokens": 100,
            "truncated_fraction": 0.5,
            "skipped": 1,
        },
        {
            "step": 2,
            "groups_seen": 4,
            "groups_zero_variance": 1,
            "reward_mean": 0.5,
            "correct_rate": 0.4,
            "zero_variance_fraction": 0.25,
            "completion_tokens_mean": 20.0,
            "completion_tokens": 600,
            "truncated_fraction": 0.0,
        },
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(s) + "\n" for s in steps))
    # the run's group totals, as the stage's summary.json holds them
    summary = {"groups_seen": 8, "groups_zero_variance": 5, "groups_zero_solved": 1}
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    curve = bench.grpo_curve(tmp_path)
    assert curve["zero_variance_share"] == pytest.approx(5 / 8)
    # 10 completions at step 1 (half truncated), 30 at step 2 (none): 5 of 40
    assert curve["truncated_share"] == pytest.approx(5 / 40, abs=1e-3)
    assert curve["steps_without_update"] == 1
    assert curve["reward"] == [0.1, 0.5] and curve["correct"] == [0.0, 0.4]


def test_ceiling_rates_and_changes_count_prompts_as_a_reader_would(bench):
    # four prompts, 4 samples each: (greedy right, right samples)
    sft = {"a": (True, 4), "b": (False, 2), "c": (False, 0), "d": (True, 1)}
    grpo = {"a": (True, 4), "b": (True, 3), "c": (True, 1), "d": (False, 0)}
    rates = bench.pass_rates(sft, 4)
    assert rates["greedy"] == 50.0
    # pass@1 is the mean right share (4/4 + 2/4 + 0 + 1/4) / 4; pass@4 with 4 samples: any sample right
    assert rates["pass_at_1"] == pytest.approx(100 * (1 + 0.5 + 0 + 0.25) / 4, abs=0.05)
    assert rates["pass_at_4"] == 75.0 and "pass_at_8" not in rates
    assert rates["any"] == 75.0
    assert bench.changes(sft, grpo, 4) == {
        "prompts": 4,
        "sft_greedy_wrong_sampled_right": 1,  # b
        "sft_never_right": 1,  # c
        "grpo_fixed": 2,  # b, c
        "grpo_fixed_never_right_before": 1,  # c
        "grpo_broke": 1,  # d
        "by_sft_samples": [
            # c: no SFT sample right, greedy wrong, fixed
            {"sft_samples_right": "none", "sft_greedy_right": 0, "broke": 0, "sft_greedy_wrong": 1, "fixed": 1},
            # d: greedy right on 1 of 4 samples, broken
            {"sft_samples_right": "under half", "sft_greedy_right": 1, "broke": 1, "sft_greedy_wrong": 0, "fixed": 0},
            # a kept; b (2 of 4, half) fixed
            {"sft_samples_right": "half or more", "sft_greedy_right": 1, "broke": 0, "sft_greedy_wrong": 1, "fixed": 1},
        ],
    }


def test_verdict_counts_only_the_seeds_that_ran_the_control_arm(bench):
    def row(seed, over_sft, over_control, seconds=3000.0):
        gains = {"grpo_over_sft": {"points": over_sft}, "grpo_over_control": None}
        if over_control is not None:
            gains["grpo_over_control"] = {"points": over_control}
        return {"seed": seed, "gains": gains, "seconds": seconds}

    lines, ok = bench.verdicts([row(0, 12.0, 6.0), row(1, 11.0, None), row(2, 10.0, 8.0)])
    assert "mean +11.0 points held-out greedy on 3 seed(s)" in lines[0] and lines[0].endswith("PASS")
    # two seeds with a control arm are not three, whatever their mean
    assert "mean +7.0 points held-out greedy on 2 seed(s)" in lines[1] and lines[1].endswith("FAIL")
    assert not ok
    lines, ok = bench.verdicts([row(0, 12.0, None), row(1, 11.0, None), row(2, 10.0, None)])
    assert lines[1] == "[real] target GRPO over control: not measured (no control arm) -> FAIL" and not ok
    with pytest.raises(SystemExit, match="repeat"):
        bench.verdicts([row(0, 12.0, 6.0), row(0, 11.0, 6.0)])


def test_greedy_changes_count_fixes_breaks_and_changed_answers_per_prompt(bench):
    def result(rows):  # (id, greedy right, extracted answer), in any order
        return {
            "by_prompt": {"ids": [r[0] for r in rows], "greedy": [r[1] for r in rows], "answers": [r[2] for r in rows]}
        }

    sft = result([("a", 1, "36"), ("b", 0, "12"), ("c", 0, "7"), ("d", 1, "5")])
    # a kept; b fixed; c wrong with another answer; d broken: the order of the prompts does not matter
    grpo = result([("d", 0, "6"), ("c", 0, "8"), ("b", 1, "13"), ("a", 1, "36")])
    assert bench.greedy_changes(sft, grpo) == {
        "prompts": 4,
        "right_before": 2,
        "right_after": 2,
        "answers_changed": 3,
        "fixed": 1,
        "broke": 1,
    }
    with pytest.raises(SystemExit, match="different held-out prompts"):
        bench.greedy_changes(sft, result([("a", 1, "36")]))
