"""The run's console and Prefect tables of the eval: the category table's gain column is the report's
final model's (training.eval_categories.format_categories), and the Prefect eval table carries the
held-out episode success eval_table.json holds (flows/evaluate.eval_rows)."""

from rlvrflow.flows.evaluate import eval_rows
from rlvrflow.training.eval_categories import format_categories


def gain(points: float) -> dict:
    return {"points": points, "low": points - 1.0, "high": points + 1.0}


ROWS = [
    {
        "category": "refunds",
        "kind": "episode",
        "n": 20,
        "pass_at_1_greedy": {"sft": 0.1, "step_000020": 0.5, "step_000040": 0.2},
        "gain_vs_sft": {"step_000020": gain(40.0), "step_000040": gain(10.0)},
    }
]


def test_the_category_gain_column_is_the_final_models_not_the_last():
    table = format_categories(ROWS, ["sft", "step_000020", "step_000040"], "step_000020").splitlines()
    assert table[0].split()[-3:] == ["step_000020", "vs", "sft"]
    assert table[1].split()[-3] == "+40.0"
    assert "vs sft" not in format_categories(ROWS, ["sft", "step_000020"], "sft")  # SFT final: no gain column


def test_the_prefect_eval_table_carries_episode_success():
    table = [
        {"name": "sft", "pass_at_1_greedy": 0.3, "format_rate": 0.9, "episode_success": 0.1},
        {"name": "step_000040", "pass_at_1_greedy": 0.4, "format_rate": 0.9, "episode_success": 0.35},
    ]
    rows = eval_rows(table)
    assert rows[1]["episode_success"] == 0.35 and rows[1]["delta_episode_success"] == 0.25
    plain = eval_rows([{**r, "episode_success": None} for r in table])  # a run without episodes
    assert "episode_success" not in plain[1] and "delta_episode_success" not in plain[1]
