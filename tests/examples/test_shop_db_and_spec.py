"""shop.db is deterministic and consistent, every gold SQL query runs on it, and spec.yaml loads
and agrees with what the generator writes (field names, categories, verifier rules)."""

from __future__ import annotations

import sqlite3


def _dump(path) -> str:
    con = sqlite3.connect(path)
    try:
        return "\n".join(con.iterdump())
    finally:
        con.close()


def test_same_seed_same_database_other_seed_other_rows(retail, tmp_path):
    a = retail.build_db.build(tmp_path / "a.db", seed=0)
    b = retail.build_db.build(tmp_path / "b.db", seed=0)
    c = retail.build_db.build(tmp_path / "c.db", seed=1)
    assert _dump(a) == _dump(b) != _dump(c)
    counts = retail.build_db.table_counts(a)
    assert counts["stores"] == 6 and counts["products"] == 30 and counts["orders"] == 320
    assert counts["order_items"] > 320 and 30 < counts["refunds"] < 320
    assert not list(tmp_path.glob("*.tmp"))  # written atomically, nothing left behind


def test_rows_reference_each_other(retail, tmp_path):
    con = sqlite3.connect(retail.build_db.build(tmp_path / "shop.db"))
    orphans = {
        "order_items without an order": "SELECT COUNT(*) FROM order_items i LEFT JOIN orders o USING (order_id) WHERE o.order_id IS NULL",
        "order_items without a product": "SELECT COUNT(*) FROM order_items i LEFT JOIN products p USING (product_id) WHERE p.product_id IS NULL",
        "refunds without an order": "SELECT COUNT(*) FROM refunds r LEFT JOIN orders o USING (order_id) WHERE o.order_id IS NULL",
        "orders at an unknown store": "SELECT COUNT(*) FROM orders o LEFT JOIN stores s USING (store_id) WHERE s.store_id IS NULL",
        "refunds before their order": "SELECT COUNT(*) FROM refunds r JOIN orders o USING (order_id) WHERE r.refund_date <= o.order_date",
        "refunds of cancelled orders": "SELECT COUNT(*) FROM refunds r JOIN orders o USING (order_id) WHERE o.status = 'cancelled'",
    }
    assert {name: con.execute(sql).fetchone()[0] for name, sql in orphans.items()} == dict.fromkeys(orphans, 0)


def test_every_gold_query_runs_and_has_an_answer(retail, tmp_path):
    db = retail.build_db.build(tmp_path / "shop.db")
    tasks = retail.tasks_sql.SqlTasks(db)
    assert len(tasks.pool) >= 100  # enough distinct report requests for ~7% of 3000 rows in two languages
    con = sqlite3.connect(db)
    keys = set()
    for key, params in tasks.pool:
        keys.add(key)
        question_en, gold = retail.tasks_sql.render(key, params, "en")
        question_zh, gold_zh = retail.tasks_sql.render(key, params, "zh")
        assert gold == gold_zh and question_en != question_zh
        rows = con.execute(gold).fetchall()
        assert rows and None not in rows[0], gold
    assert keys == {t[0] for t in retail.tasks_sql.TEMPLATES}


def test_spec_loads_and_matches_the_generator(retail):
    import rlvrflow.flows.spec as flows_spec

    spec = flows_spec.load_spec(retail.generate.HERE / "spec.yaml")
    # tool calls and the agent console's multi-step tickets come on top of the weights
    categories = set(retail.generate.CATEGORY_WEIGHTS) | {"tool_call", retail.tasks_episodes.CATEGORY}
    assert {r.category for r in spec.verifiers.rules} == categories == set(spec.validation.categories)
    assert spec.verifiers.rule_for("sql").params == {"database": "shop.db"}
    assert spec.resolve("shop.db") == retail.generate.HERE / "shop.db"
    by_name = {s.name: s for s in spec.sources}
    for name, source in (("tickets", "tickets"), ("erp_orders", "erp"), ("reports", "reports")):
        fields = by_name[name].fields
        expected = retail.rawfiles.FIELD_NAMES[source]
        assert {f: getattr(fields, f) for f in expected} == expected, name
        assert by_name[name].max_row_bytes < retail.inject.OVERSIZED_BYTES
    assert by_name["reports"].defaults == {"category": "sql"}
    assert set(spec.cleaning.verbatim_categories) == set(retail.inject.VERBATIM) | {retail.tasks_episodes.CATEGORY}


def test_learnable_solutions_fit_the_generation_budget(retail):
    """The replies are the tiny model's SFT targets: math and choice replies must fit
    max_new_tokens whole, and a reply_format reply must reach its required link within it."""
    import json
    import random

    import rlvrflow.flows.spec as flows_spec

    spec = flows_spec.load_spec(retail.generate.HERE / "spec.yaml")
    budget = spec.generation.max_new_tokens
    rng = random.Random(0)
    generators = {**retail.tasks_math.GENERATORS, "policy_choice": retail.tasks_other.policy_choice}
    longest = max(
        len(gen(rng, lang).solution) for gen in generators.values() for lang in ("en", "zh") for _ in range(300)
    )
    assert longest <= budget, f"a solution of {longest} chars does not fit {budget} new tokens"
    for lang in ("en", "zh"):
        task = retail.tasks_other.reply_format(rng, lang)
        link = json.loads(task.answer)["link"]
        assert task.solution.index(link) + len(link) <= budget


def test_tool_call_rule_and_prompt_match_the_generator(retail):
    """The spec's tools are the generator's, its requirements name every tool and reason, the
    format example answers no row, and a prompt plus its reply fits the SFT length whole."""
    import random

    from rlvrflow.cleaning import render_prompt
    from rlvrflow.flows.spec import load_spec
    from rlvrflow.verifiers import verify

    tools_mod = retail.tasks_tools
    spec = load_spec(retail.generate.HERE / "spec.yaml")
    params = spec.verifiers.rule_for("tool_call").params
    assert set(params["tools"]) == set(tools_mod.TOOLS)
    assert params["tools"]["escalate"]["properties"]["reason"]["enum"] == list(tools_mod.REASONS)
    part = spec.cleaning.template.part("tool_call")
    assert all(name in part.requirements for name in tools_mod.TOOLS + tools_mod.REASONS)
    assert "<tool_call>" in part.format_example
    rng = random.Random(0)
    longest = 0
    for _ in range(400):
        task = tools_mod.tool_call(rng, rng.choice(["en", "zh"]))
        prompt = render_prompt(task.question, "tool_call", spec.cleaning.template)
        assert verify("function_call", part.format_example, task.answer, params).score == 0.0
        assert verify("function_call", task.solution, tools_mod.as_json(task.answer), params).correct
        longest = max(longest, len(prompt) + len(task.solution) + 2)  # one token a character, plus BOS and EOS
    assert longest <= spec.training.sft.max_length, longest


def test_reply_rule_pays_a_reply_not_the_format_example(retail):
    """The hack a pretrained model found in 12 GRPO steps: the prompt's format example, or its link
    followed by junk, answered every reply row; then the example plus the customer's name. The prompt
    now shows a placeholder, and each row's reference asks for what its request needs (the customer,
    the item, an action the request does not word and other kinds of request do not share), so those,
    an echo, one stock reply and a bare keyword list score 0; the desk's reply scores, and a prompt
    plus its reply fits the SFT length whole."""
    import json
    import random

    from rlvrflow.cleaning import render_prompt
    from rlvrflow.flows.spec import load_spec
    from rlvrflow.verifiers import verify

    spec = load_spec(retail.generate.HERE / "spec.yaml")
    rule = spec.verifiers.rule_for("reply_format")
    part = spec.cleaning.template.part("reply_format")
    assert rule.verifier == "reply" and rule.params["format_example"] == part.format_example
    assert "http" not in part.format_example  # a placeholder: no link to copy
    rng = random.Random(0)
    actions: dict[str, set] = {}
    longest = 0
    for _ in range(200):
        task = retail.tasks_other.reply_format(rng, rng.choice(["en", "zh"]))
        ref = json.loads(task.answer)
        link, (name, item), action = ref["link"], ref["mention"], ref["action"]
        prompt = render_prompt(task.question, "reply_format", spec.cleaning.template)
        assert verify("reply", task.solution, task.answer, rule.params).correct, task.solution
        assert name in task.question and item in task.question  # what the request names, the reply names
        assert not any(a.lower() in task.question.lower() for a in action), (action, task.question)
        actions.setdefault(task.lang, set()).add(tuple(a.rstrip("0123456789天 days") for a in action))
        stock = (
            f"{link} - Hi {name}, you can start the return for the {item} on that page, thank you."
            if task.lang == "en"
            else f"{link} {name}您好，{item}请在此页面办理退货。"
        )
        for hack in (
            part.format_example,
            f"{part.format_example}, {name}.",
            link,
            f"{link} - start the return there, {name}.",
            f"{link} - {link}/-startshesen-reti&#4227=",
            prompt,
            f"{task.question} {link}",
            f"{task.solution} {link}",
            stock,
            " ".join([link, name, item, action[0]]),
        ):
            assert verify("reply", hack, task.answer, rule.params).score == 0.0, hack
        longest = max(longest, len(prompt) + len(task.solution) + 2)  # one token a character, plus BOS and EOS
    assert all(len(kinds) == 4 for kinds in actions.values()), actions  # four kinds of request, four actions
    assert longest <= spec.training.sft.max_length, longest
