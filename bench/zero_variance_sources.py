"""Where GRPO's zero-variance groups come from: every group a run draws, by what the sampler knew of it.

    nice .venv/bin/python bench/zero_variance_sources.py run SPEC --out OUT [--set FIELD=VALUE ...]
    .venv/bin/python bench/zero_variance_sources.py table OUT/draws.jsonl [OTHER/draws.jsonl ...]

`run` is `rlvrflow run SPEC --out OUT [--set ...]` in this process, with the curriculum sampler's
`report` wrapped: GRPO calls it once per draw with each group's share of right completions
(training/grpo.py collect_groups, refill rounds included), and the wrapper writes one line per group to
OUT/draws.jsonl: `batch`, the sampler's count of draws so far (each refill round is a draw, so this is
not the GRPO step; under `rollout_mode: async` the trainer draws ahead, so it can run a few draws past
the group's own, and groups later dropped as stale are logged too), the prompt id, its category, its
tier when drawn (before this group re-tiers it) and the share right. A GRPO stage that resumes from a
checkpoint logs only the draws after the resume, and the bench says so. Nothing else in the run changes: the same spec with the
same overrides gives the same groups as a plain `rlvrflow run`. Stages already built under OUT are
reused, as the CLI does, so the earlier stages can be copied in from another run; a reused GRPO stage
draws nothing, and the bench says so. `table` reads one or more such files and prints, for each, the share of its
groups that came back all wrong, mixed and all right:
- by the tier the prompt was drawn from;
- by that tier, whether this was the prompt's first draw in the run, and the third of the run;
- by what the prompt's previous group in the run did (first draw, all wrong, mixed, all right);
- by category;
- by the prompt's offline tiering result (k of n right) and whether this was its first draw, read from
  the tier stage of the run next to the draws.jsonl (OUT/latest.json's report names it); left out
  when that run or its tiers are gone. A first draw's outcome against its offline count shows how far
  the policy has moved from the SFT model the tiers measured.
- with the group size (`--group-size`, or the spec's under `run`), what screening each prompt with m
  completions before the rest of its group would have saved, replayed on the logged groups
  (`screen_replay`).
A group is zero-variance on correctness when it is all wrong or all right; the run's own
`zero_variance_fraction` counts reward ties, so a group all wrong but with mixed format rewards is
mixed there and all wrong here.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

OUTCOMES = ("all wrong", "mixed", "all right")


def outcome(rate: float) -> str:
    return "all wrong" if rate <= 0.0 else ("all right" if rate >= 1.0 else "mixed")


@contextmanager
def record_draws(path: Path):
    """Within the block, every group reported to a curriculum sampler is written to `path` as a line."""
    from rlvrflow.curriculum.adaptive import AdaptiveSampler
    from rlvrflow.curriculum.sampler import StratifiedSampler, UniformSampler

    originals = {cls: cls.report for cls in (StratifiedSampler, AdaptiveSampler, UniformSampler)}
    with open(path, "w") as fh:

        def wrap(original):
            def report(self, ids, success_rates):
                drawn_from = {pid: self.tier.get(pid) for pid in ids}
                moved = original(self, ids, success_rates)
                for pid, rate in zip(ids, success_rates):
                    line = {
                        "batch": self.batches,
                        "id": pid,
                        "category": self.category.get(pid),
                        "tier": drawn_from[pid],
                        "rate": float(rate),
                    }
                    fh.write(json.dumps(line) + "\n")
                fh.flush()
                return moved

            return report

        try:
            for cls, original in originals.items():
                cls.report = wrap(original)
            yield path
        finally:
            for cls, original in originals.items():
                cls.report = original


def read_draws(path: Path) -> list[dict]:
    """The lines of a draws.jsonl; a missing file or a line that is not a draw stops with its file and line."""
    if not Path(path).is_file():
        raise SystemExit(f"{path}: no such file; `run` writes OUT/draws.jsonl")
    rows = []
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            float(row["rate"]), int(row["batch"]), row["id"], row["tier"], row["category"]
        except (ValueError, KeyError, TypeError) as exc:
            raise SystemExit(
                f"{path}:{n}: not a draw line ({exc!r}); each line needs batch, id, category, tier and rate, "
                "as `run` writes them"
            ) from None
        rows.append(row)
    return rows


def offline_counts(draws_path: Path) -> dict[str, tuple[int, int]] | None:
    """Each train prompt's offline tiering result (k right of n samples), the pool GRPO draws from,
    from the tier stage of the run next to `draws_path` (that folder's latest.json names the report,
    the report the tier stage's key); None when the run, its report or the tiers are not there or not
    readable. Rows without counts are left out, as the adaptive sampler leaves them out of its prior."""
    import polars as pl

    out = Path(draws_path).parent
    try:
        report = json.loads(Path(json.loads((out / "latest.json").read_text())["report"]).read_text())
        tiers = pl.read_parquet(out / "stages" / "tier" / report["stages"]["tier"]["key"] / "tiers.parquet")
        if "split" in tiers.columns:
            tiers = tiers.filter(pl.col("split") == "train")
        rows = zip(tiers["id"].to_list(), tiers["n_correct"].to_list(), tiers["n_samples"].to_list())
    except (OSError, ValueError, KeyError, TypeError, pl.exceptions.PolarsError):
        return None
    return {i: (int(k), int(n)) for i, k, n in rows if k is not None and n}


def tables(
    draws: list[dict], offline: dict[str, tuple[int, int]] | None = None, group_size: int | None = None
) -> dict[str, dict[str, dict]]:
    """{table name: {row key: {"groups": n, "all wrong": share, "mixed": share, "all right": share}}}.

    With `offline` (prompt id -> its tiering's (k, n)), also the groups by that count and first draw;
    with `group_size` too, each of those rows gets "mixed if unchanged": the chance that a group of
    that size comes back mixed if the policy were still the model the tiers measured (the
    Beta-binomial predictive under the pool's fitted prior, as the adaptive sampler's starting value).
    """
    last = max((d["batch"] for d in draws), default=0)
    seen: set[str] = set()
    previous: dict[str, str] = {}
    names = ["tier", "tier, draw, third", "previous group", "category"] + (["offline k/n, draw"] if offline else [])
    counts: dict[str, defaultdict[str, Counter]] = {name: defaultdict(Counter) for name in names}
    predicted: dict[str, float] = {}
    if offline and group_size:
        from rlvrflow.curriculum.adaptive import beta_from_counts, mixed_chance

        a, b = beta_from_counts(list(offline.values()))
    for d in draws:
        got = outcome(d["rate"])
        first = d["id"] not in seen
        third = min(2, 3 * d["batch"] // (last + 1))
        counts["tier"][d["tier"]][got] += 1
        counts["tier, draw, third"][f"{d['tier']}, {'first' if first else 'again'}, {third + 1}/3"][got] += 1
        counts["previous group"]["first draw" if first else previous[d["id"]]][got] += 1
        counts["category"][d["category"]][got] += 1
        if offline:
            k_n = offline.get(d["id"])
            key = f"{'?' if k_n is None else f'{k_n[0]}/{k_n[1]}'}, {'first' if first else 'again'}"
            counts["offline k/n, draw"][key][got] += 1
            if group_size and k_n is not None:
                predicted[key] = round(mixed_chance(*k_n, a, b, group_size), 3)
        seen.add(d["id"])
        previous[d["id"]] = got
    result = {
        name: {
            key: {"groups": sum(c.values()), **{o: round(c[o] / sum(c.values()), 3) for o in OUTCOMES}}
            for key, c in sorted(rows.items(), key=lambda kv: str(kv[0]))
        }
        for name, rows in counts.items()
    }
    for key, chance in predicted.items():
        result["offline k/n, draw"][key]["mixed if unchanged"] = chance
    return result


def screen_replay(draws: list[dict], group_size: int) -> dict[str, dict[str, float]]:
    """What screening would have saved on these groups: each prompt first sampled `m` times, and the
    rest of its group only when those m disagree (SPEED-RL's two-phase sampling; DAPO filters after
    the whole group). Replayed on the logged groups: a screen is m of the group's own completions drawn
    without replacement, so a group with k of G right passes with chance 1 - (C(k,m) + C(G-k,m)) / C(G,m),
    and a group that passes is mixed. What it cannot show: that the sampler and the policy would have
    gone on the same way.

    {"no screen" or "m of G": {"groups": prompts drawn, "screened out": share of them, "mixed lost":
    share of the groups mixed over G that the screen throws away, "wasted rollouts": share of the
    rollouts spent on prompts that add nothing to an update, "rollouts per group trained": rollouts per
    mixed group kept}}
    """
    from math import comb

    g = group_size
    ks = [round(d["rate"] * g) for d in draws]
    for d, k in zip(draws, ks):
        if abs(d["rate"] * g - k) > 1e-6:
            raise SystemExit(
                f"a group of prompt {d['id']} (draw {d['batch']}) had {d['rate']:.4f} of its completions right, "
                f"which is not k of {g}: give --group-size the run's training.grpo.num_generations"
            )
    mixed = [0 < k < g for k in ks]
    n = max(1, len(ks))
    out = {
        "no screen": {
            "groups": len(ks),
            "screened out": 0.0,
            "mixed lost": 0.0,
            "wasted rollouts": round(1 - sum(mixed) / n, 3),
            "rollouts per group trained": round(g * len(ks) / sum(mixed), 2) if any(mixed) else float("inf"),
        }
    }
    for m in range(2, g):
        flat = [(comb(k, m) + comb(g - k, m)) / comb(g, m) for k in ks]
        dropped = sum(flat)
        kept = len(ks) - dropped  # every group that passes its screen is mixed
        cost = dropped * m + kept * g
        out[f"{m} of {g}"] = {
            "groups": len(ks),
            "screened out": round(dropped / n, 3),
            "mixed lost": round(sum(f for f, x in zip(flat, mixed) if x) / max(1, sum(mixed)), 3),
            "wasted rollouts": round(dropped * m / cost, 3),
            "rollouts per group trained": round(cost / kept, 2) if any(mixed) else float("inf"),
        }
    return out


def print_tables(path: Path, draws: list[dict], group_size: int | None = None) -> dict:
    result = tables(draws, offline_counts(path), group_size)
    flat = sum(outcome(d["rate"]) != "mixed" for d in draws)
    print(
        f"{path}: {len(draws)} groups, {len({d['id'] for d in draws})} prompts; all wrong or all right: "
        f"{flat / max(1, len(draws)):.1%}"
    )
    for name, rows in result.items():
        extra = any("mixed if unchanged" in r for r in rows.values())
        print(f"  by {name}:")
        print(
            f"    {'':<30}{'groups':>7}"
            + "".join(f"{o:>11}" for o in OUTCOMES)
            + ("   mixed if unchanged" if extra else "")
        )
        for key, r in rows.items():
            chance = r.get("mixed if unchanged")
            print(
                f"    {str(key):<30}{r['groups']:>7}"
                + "".join(f"{r[o]:>11.2f}" for o in OUTCOMES)
                + (f"{chance:>21.2f}" if chance is not None else "")
            )
    if group_size and draws:
        replay = screen_replay(draws, group_size)
        result["screen, replayed"] = replay
        cols = ("screened out", "mixed lost", "wasted rollouts", "rollouts per group trained")
        print("  a screen of m completions before the rest of the group, replayed on these groups:")
        print(f"    {'':<30}" + "".join(f"{c:>28}" for c in cols))
        for key, r in replay.items():
            print(f"    {key:<30}" + "".join(f"{r[c]:>28.2f}" for c in cols))
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run", help="rlvrflow run, writing OUT/draws.jsonl")
    run.add_argument("spec")
    run.add_argument("--out", required=True)
    run.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE")
    table = sub.add_parser("table", help="the tables of one or more draws.jsonl files")
    table.add_argument("draws", nargs="+")
    table.add_argument(
        "--group-size",
        type=int,
        metavar="G",
        help="the run's training.grpo.num_generations: adds, to the offline table, the share of groups "
        "that would come back mixed if the policy were still the tiered model, and the screening replay",
    )
    args = ap.parse_args(argv)
    if args.cmd == "table":
        for p in args.draws:
            print_tables(Path(p), read_draws(Path(p)), args.group_size)
        return 0
    from rlvrflow.flows.cli import main as cli

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with record_draws(out / "draws.jsonl"):
        status = cli(["run", args.spec, "--out", str(out), *[x for s in args.set for x in ("--set", s)]])
    rows = read_draws(out / "draws.jsonl")
    if status != 0:
        print(f"rlvrflow run exited with status {status} (its log: {out}); the tables are not written", file=sys.stderr)
        return status
    if not rows:
        print(
            f"no group was drawn: the GRPO stage under {out} was reused from an earlier run with these settings, "
            "or the spec trains with another algorithm (training.algorithm); use a new --out (or delete its "
            "stages/grpo) so that GRPO runs",
            file=sys.stderr,
        )
        return 1
    if rows[0]["batch"] > 1:
        print(
            f"the log starts at draw {rows[0]['batch']}: GRPO resumed from a checkpoint, so the tables cover only "
            "the draws after the resume",
            file=sys.stderr,
        )
    from rlvrflow.flows.cli import parse_overrides
    from rlvrflow.flows.common import with_overrides
    from rlvrflow.flows.spec import load_spec

    group_size = with_overrides(load_spec(args.spec), parse_overrides(args.set)).training.grpo.num_generations
    tables_of_run = print_tables(out / "draws.jsonl", rows, group_size)
    (out / "draw_tables.json").write_text(json.dumps(tables_of_run, indent=1) + "\n")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
