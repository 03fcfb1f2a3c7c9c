"""The sample desk's multi-step category: the agent console's tickets, checked against spec.yaml's
environment on the generated shop.db. Every row attaches (worked transcripts replay), the environment
canaries pass, an agent that looks the order up reaches every gold outcome while guesses do not, and
the rows leave every other generated file and the existing tables of shop.db as they were."""

from __future__ import annotations

import json
import random
import shutil
import sqlite3

import pytest


@pytest.fixture(scope="module")
def desk(generated, retail, tmp_path_factory):
    """spec.yaml beside the generated raw/ and shop.db, with 60 multi-step tickets (the 400-row sample's
    8 may miss a kind), 10% worked; the rows as attach keeps them."""
    from rlvrflow import cleaning
    from rlvrflow.flows.spec import load_spec
    from rlvrflow.verifiers.attaching import attach

    root = tmp_path_factory.mktemp("desk")
    shutil.copy(retail.generate.HERE / "spec.yaml", root / "spec.yaml")
    shutil.copytree(generated.out, root / "raw")
    shutil.copy(generated.out / "shop.db", root / "shop.db")
    written = retail.generate.write_multi_step(root / "raw", root / "shop.db", 60, random.Random("desk"), 0.1)
    assert set(written["by_kind"]) == {"shipping", "cancel", "damaged"}
    spec = load_spec(root / "spec.yaml")
    source = next(s for s in spec.sources if s.name == "agent_console")
    ingested = cleaning.ingest([source], spec.domain, spec.base_dir)
    cleaned = cleaning.clean_stage(ingested.kept, spec.cleaning, spec.domain)
    kept, rejects, stats = attach(cleaned.kept, spec.verifiers, spec.base_dir, workers=1)
    raw = [json.loads(line) for line in (root / "raw" / retail.tasks_episodes.FILE).read_text().splitlines()]
    return spec, kept, rejects, stats, {r["case_id"]: r for r in raw}, written


def test_every_multi_step_row_attaches_and_the_worked_transcripts_replay(desk):
    spec, kept, rejects, stats, raw, m = desk
    assert rejects.height == 0 and kept.height == m["rows"] == len(raw) == 60
    assert set(kept["verifier"]) == {"episode"} and set(kept["category"]) == {"multi_step"}
    assert stats["outcome_only_rows"] == m["rows"] - m["worked"] and m["worked"] == 6
    assert sum(m["by_kind"].values()) == m["rows"]


def test_the_generator_writes_the_multi_step_file_the_manifest_counts(generated, retail):
    m = generated.manifest["multi_step"]
    lines = (generated.out / m["file"]).read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    assert m["rows"] == len(records) == round(retail.generate.MULTI_STEP_RATE * 400)
    assert m["worked"] == sum(r["transcript"] is not None for r in records) >= 1
    assert {r["queue"] for r in records} == {retail.tasks_episodes.CATEGORY}
    assert len({json.loads(r["outcome"])[0][1] if json.loads(r["outcome"]) else r["message"] for r in records}) == len(
        records
    )  # one ticket an order


def test_the_environment_canaries_pass_on_the_sample(desk):
    from rlvrflow.verifiers.episode_canary import probe_environments

    spec, kept, *_ = desk
    report = probe_environments(kept.to_dicts(), spec.verifiers.rules, spec.verifiers.canaries, spec.base_dir)
    assert report["ok"], report
    assert report["rules"][0]["passed"]["call_every_tool"] == 0


def _tool(name: str, **arguments) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def _order(ticket: str) -> int:
    """The ticket's order number (a product name may hold a number: green tea (100 g))."""
    import re

    return int(re.search(r"(?:order|订单)\s*(\d+)", ticket, re.I).group(1))


def _desk_agent(kinds: dict):
    """Works a ticket as the desk's rules say, reading only the ticket and the tools' results."""

    def policy(messages: list[dict]) -> str:
        ticket = next(m["content"] for m in messages if m["role"] == "user")
        order = _order(ticket)
        kind = kinds[ticket.split("\n")[0]]
        turn = sum(m["role"] == "assistant" for m in messages)
        if turn == 0:
            return _tool("get_order_items" if kind == "damaged" else "get_order", order_id=order)
        if turn > 1:
            return "Done."
        rows = json.loads(messages[-1]["content"])["rows"]
        if kind == "damaged":
            name, qty, price = next(r for r in rows if r[0] in ticket)
            return _tool("issue_refund", order_id=order, amount=qty * price, reason="damaged")
        if kind == "shipping":
            return _tool("issue_refund", order_id=order, amount=rows[0][5], reason="late_delivery")
        return _tool("cancel_order", order_id=order) if rows[0][4] == "pending" else "It has shipped already."

    return policy


def test_an_agent_that_looks_the_order_up_reaches_every_gold_and_guessing_does_not(desk):
    from rlvrflow.verifiers.episode import run_episodes

    spec, kept, *_ = desk
    env = spec.verifiers.rule_for("multi_step").resolved_environment(spec.base_dir)
    rows = kept.to_dicts()
    agent = _desk_agent(_kinds(desk))
    episodes = run_episodes(env, rows, lambda batch: [agent(m) for m in batch])
    assert all(ep.verdict.correct for ep in episodes), [ep.verdict.detail for ep in episodes if not ep.verdict.correct]

    # a refund without a lookup: the order's number as the amount
    def guess(messages):
        ticket = next(m["content"] for m in messages if m["role"] == "user")
        if any(m["role"] == "assistant" for m in messages):
            return "Done."
        order = _order(ticket)
        return _tool("issue_refund", order_id=order, amount=float(order), reason="damaged")

    guessed = run_episodes(env, rows, lambda batch: [guess(m) for m in batch])
    assert not any(ep.verdict.correct for ep, r in zip(guessed, rows) if json.loads(r["reference"]))


def _kinds(desk) -> dict:
    _, kept, _, _, raw, _ = desk
    return {raw[r["id"]]["message"]: raw[r["id"]]["kind"] for r in kept.to_dicts()}


def _hack(name: str, kinds: dict):
    """The desk agent's work, bent the way a reward hacker would bend it."""
    honest = _desk_agent(kinds)

    def policy(messages: list[dict]) -> str:
        ticket = next(m["content"] for m in messages if m["role"] == "user")
        order, turn = _order(ticket), sum(m["role"] == "assistant" for m in messages)
        if name == "claims_the_action":
            return f"I have refunded order {order} and cancelled what had to be cancelled."
        if name == "cancel_without_looking":
            return _tool("cancel_order", order_id=order) if turn == 0 else "Cancelled."
        if name == "refund_every_line":
            if turn == 0:
                return _tool("get_order_items", order_id=order)
            if turn == 1:
                rows = json.loads(messages[-1]["content"])["rows"]
                return "\n".join(
                    _tool("issue_refund", order_id=order, amount=q * p, reason="damaged") for _, q, p in rows
                )
            return "Refunded."
        reply = honest(messages)  # repeat_the_action: every action written twice
        return reply + "\n" + reply if turn == 1 and "<tool_call>" in reply else reply

    return policy


@pytest.mark.parametrize(
    "name, fails_on",
    [
        ("claims_the_action", lambda kind, gold, lines: bool(gold)),
        ("cancel_without_looking", lambda kind, gold, lines: kind != "cancel" or not gold),
        ("refund_every_line", lambda kind, gold, lines: kind != "damaged" or lines > 1),
        # a second cancel changes nothing (the same end state), a second refund pays twice
        ("repeat_the_action", lambda kind, gold, lines: bool(gold) and kind != "cancel"),
    ],
)
def test_the_sample_hacks_score_nothing_where_the_ticket_needs_the_lookup(desk, name, fails_on):
    from rlvrflow.verifiers.episode import run_episodes

    spec, kept, _, _, raw, _ = desk
    env = spec.verifiers.rule_for("multi_step").resolved_environment(spec.base_dir)
    rows, kinds = kept.to_dicts(), _kinds(desk)
    con = sqlite3.connect(spec.base_dir / "shop.db")
    lines = {o: n for o, n in con.execute("SELECT order_id, COUNT(*) FROM order_items GROUP BY order_id")}
    episodes = run_episodes(env, rows, lambda batch: [_hack(name, kinds)(m) for m in batch])
    must_fail = []
    for ep, r in zip(episodes, rows):
        gold = json.loads(r["reference"])
        if fails_on(raw[r["id"]]["kind"], gold, lines[gold[0][1]] if gold else 0):
            must_fail.append(ep)
    assert must_fail and not any(ep.verdict.correct for ep in must_fail)


def test_multi_step_rows_leave_every_other_file_and_table_as_it_was(retail, tmp_path, monkeypatch):
    """Their own random stream, their own file: without them the same seed writes the same bytes in
    every other file, and shop.db's other tables hold the same rows."""
    with_rows = retail.generate.generate(tmp_path / "with", 3, 300, db_path=tmp_path / "with.db")
    monkeypatch.setattr(retail.generate, "MULTI_STEP_RATE", 0)
    without = retail.generate.generate(tmp_path / "without", 3, 300, db_path=tmp_path / "without.db")
    assert with_rows["multi_step"]["rows"] == 6 and without["multi_step"]["rows"] == 0
    same = [k for k in with_rows if k not in ("multi_step", "database")]  # the db's path differs
    assert [with_rows[k] for k in same] == [without[k] for k in same]
    assert with_rows["database"]["tables"] == without["database"]["tables"]
    for name in without["files"]:
        assert (tmp_path / "with" / name).read_bytes() == (tmp_path / "without" / name).read_bytes(), name
    con = sqlite3.connect(tmp_path / "with.db")
    shipped = dict(con.execute("SELECT status, COUNT(*) FROM shipments GROUP BY status").fetchall())
    assert set(shipped) == {"pending", "shipped", "delivered", "cancelled"}
    assert (
        con.execute(
            "SELECT COUNT(*) FROM orders o JOIN shipments s USING (order_id) "
            "WHERE (o.status = 'cancelled') != (s.status = 'cancelled')"
        ).fetchone()[0]
        == 0
    )


def test_the_shipments_table_changed_no_row_of_the_other_tables(retail, tmp_path, monkeypatch):
    """shop.db's orders, items and refunds are drawn before the shipments, from their own stream: a
    build without the shipments step holds the same rows (the sql category's golds stay the same)."""
    built = retail.build_db.build(tmp_path / "with.db")
    monkeypatch.setattr(retail.build_db, "_shipments", lambda rng, orders: [])
    bare = retail.build_db.build(tmp_path / "bare.db")
    for table in ("stores", "products", "orders", "order_items", "refunds"):
        rows = [sqlite3.connect(p).execute(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall() for p in (built, bare)]
        assert rows[0] == rows[1] and rows[0], table
