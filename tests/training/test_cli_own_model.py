"""`rlvrflow make-model` and `rlvrflow export` from the command line: outputs, and errors without tracebacks."""

import json


def test_make_model_then_export_from_the_command_line(tmp_path, capsys):
    # flows is imported here, not at the top: `make test-vllm` collects this file in an env without flows' deps
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rlvrflow.flows.cli import main

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("Copy 7\nAnswer: 7\n" * 20)
    assert (
        main(
            [
                "make-model",
                "--arch",
                "qwen2",
                "--out",
                str(tmp_path / "m"),
                "--corpus",
                str(corpus),
                "--vocab-size",
                "300",
            ]
        )
        == 0
    )
    card = json.loads(capsys.readouterr().out.rsplit("wrote", 1)[0])
    assert card["kind"] == "rlvrflow-test-qwen2" and card["params"] > 0
    assert main(["export", str(tmp_path / "m"), "--out", str(tmp_path / "plain")]) == 0  # full weights: a copy
    assert "(full)" in capsys.readouterr().out
    AutoModelForCausalLM.from_pretrained(tmp_path / "plain")
    assert AutoTokenizer.from_pretrained(tmp_path / "plain").chat_template


def test_bad_arguments_exit_2_with_the_fix(tmp_path, capsys):
    from rlvrflow.flows.cli import main

    assert main(["make-model", "--out", str(tmp_path / "m"), "--corpus", str(tmp_path / "missing.txt")]) == 2
    assert "--corpus" in capsys.readouterr().err
    assert main(["export", str(tmp_path), "--out", str(tmp_path / "x")]) == 2
    assert "not a checkpoint" in capsys.readouterr().err
