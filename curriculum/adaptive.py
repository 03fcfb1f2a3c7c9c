"""The adaptive sampler: draw the prompts whose GRPO group is most likely to come back mixed.

    sampler = AdaptiveSampler(tiered_rows, cfg, seed=0, batch_size=8, group_size=8)   # cfg.sampler == "adaptive"
    ids = sampler.next_batch()                    # prompt ids for one GRPO step
    sampler.report(ids, group_success_rates)      # learn which prompts come back mixed
    ckpt["sampler"] = sampler.state_dict()        # JSON-serializable; load_state_dict() resumes exactly

A GRPO group whose completions are all right or all wrong has zero variance and teaches nothing; the
quota sampler (curriculum/sampler.py) aims at the learnable tier, but on a small model the policy moves
fast: prompts that were half right at tiering come back all right a few steps later, and the tier of a
prompt not drawn yet is never revised. This sampler instead keeps one value per arm, an arm being the
prompts of one category with the same offline success count (k of n tiering samples), and draws each
prompt with a weight that grows with its arm's value:

- Prior: a Beta(a, b) fitted to the pool's offline counts by the Beta-binomial's moments; an arm's
  first value is the chance that a new group of `group_size` comes back mixed given k of n correct
  (the Beta-binomial predictive: 1 - E[p^G] - E[(1-p)^G] under Beta(a + k, b + n - k)). On the retail
  pool it gives 0.07 / 0.95 / 0.16 for 0 / 4 / 8 of 8, where a second tiering pass of the same model
  measured 0.07 / 0.97 / 0.26.
- Online: after each batch an arm's value moves `adaptive.step` of the way towards the share of its
  groups that came back mixed (an exponential moving average, as the bandit curricula SEC and DUMP
  keep a learning-value estimate per distribution; arXiv 2505.14970, 2504.09710). Arms the policy has
  outgrown, or fallen behind on, lose weight without being drawn to the end. Unlike SEC's Boltzmann
  draw and DUMP's confidence bonus there is no exploration term: an arm is revised only when drawn,
  so one that lost its value is rarely tried again (its weight never reaches 0, but at sharpness 4 a
  value of 0.07 weighs 1/30,000 of 0.95).
- Draw: weight = category factor x tier weight x value ** `adaptive.sharpness`, sampled without
  replacement. The tier weights multiply each prompt's weight here (they are not batch shares as in
  the quota sampler); the category factor spreads a set `category_weights` entry over the category's
  prompts, so categories keep those shares when their values and tier mixes are alike. A zero
  category or tier weight excludes its prompts. A prompt drawn in the last `dedup_window` batches is
  skipped, and with `adaptive.retire_solved` a prompt whose group came back all correct is not drawn
  again (unless the window is relaxed for it and its group is then not all correct).
- When no eligible prompt is left, `when_exhausted` decides as in the quota sampler: `relax_window`
  draws the least recently drawn prompts from the dedup window (then retired ones), `short_batch`
  returns fewer; each event is counted in `fallback_counts` and kept in `fallback_log`.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections import Counter, deque

import numpy as np

from rlvrflow.curriculum.config import CurriculumConfig
from rlvrflow.curriculum.sampler import LOG_KEEP, RETIER_SUMMARY_EVERY, _train_pool, check_state

log = logging.getLogger("rlvrflow.curriculum")

Arm = tuple[str, int, int]  # (category, offline n_correct, offline n_samples)
STATE_VERSION = 1
VALUE_FLOOR = 1e-4  # a value never reaches 0, so a weighted prompt always keeps some chance


def beta_from_counts(counts: list[tuple[int, int]]) -> tuple[float, float]:
    """The Beta(a, b) prior of the pass rate behind (k correct of n) counts, by the Beta-binomial's moments.

    The spread of k/n is the prior's spread plus binomial noise, Var(k/n) = m(1-m)(1 + (n-1)rho)/n with
    rho = 1/(a+b+1), so rho = (n Var(k/n) / (m(1-m)) - 1) / (n - 1); fitting a Beta to k/n directly
    would count the noise as spread and underrate the all-or-nothing counts. n is the mean sample count."""
    counts = [(k, n) for k, n in counts if n > 0]
    if not counts:
        return 1.0, 1.0
    n = float(np.mean([n for _, n in counts]))
    rates = [k / m for k, m in counts]
    mean = min(max(float(np.mean(rates)), 0.01), 0.99)
    if n <= 1:  # one sample per prompt: the spread is all noise, the prior's width cannot be told
        return mean, 1 - mean
    rho = (n * float(np.var(rates)) / (mean * (1 - mean)) - 1) / (n - 1)
    rho = min(max(rho, 1e-3), 0.95)
    conc = 1 / rho - 1
    return mean * conc, (1 - mean) * conc


def mixed_chance(k: int, n: int, a: float, b: float, group_size: int) -> float:
    """P(a new group of `group_size` is neither all right nor all wrong | k of n right, p ~ Beta(a, b))."""

    def log_beta(x: float, y: float) -> float:
        return math.lgamma(x) + math.lgamma(y) - math.lgamma(x + y)

    a1, b1 = a + k, b + n - k
    base = log_beta(a1, b1)
    all_right = math.exp(log_beta(a1 + group_size, b1) - base)
    all_wrong = math.exp(log_beta(a1, b1 + group_size) - base)
    return max(0.0, 1.0 - all_right - all_wrong)


class AdaptiveSampler:
    """Prompts weighted by the learned chance that their group comes back mixed; see the module doc."""

    def __init__(self, df, cfg: CurriculumConfig, seed: int, batch_size: int = 8, group_size: int = 8) -> None:
        if batch_size < 1:
            raise ValueError(f"AdaptiveSampler: batch_size={batch_size} must be >= 1")
        if group_size < 2:
            raise ValueError(f"AdaptiveSampler: group_size={group_size} must be >= 2 (a group of 1 is never mixed)")
        pool = _train_pool(df, "AdaptiveSampler")
        missing = [c for c in ("n_correct", "n_samples") if c not in pool.columns]
        if missing:
            raise ValueError(
                f"AdaptiveSampler: the frame lacks {missing}; sampler: adaptive needs each prompt's offline "
                "success count: pass the output of tier_rows (tiers.parquet)"
            )
        self.cfg, self.seed, self.batch_size, self.group_size = cfg, seed, batch_size, group_size
        ids = pool["id"].to_list()
        self.category = dict(zip(ids, pool["category"].to_list()))
        self.tier = dict(zip(ids, pool["tier"].to_list()))
        self.arm: dict[str, Arm] = {}
        for pid, k, n in zip(ids, pool["n_correct"].to_list(), pool["n_samples"].to_list()):
            k, n = int(k or 0), int(n or 0)  # not tiered (null): no count, the prior alone
            if not 0 <= k <= n:
                raise ValueError(
                    f"AdaptiveSampler: prompt {pid!r} has n_correct={k} of n_samples={n}; counts must "
                    "satisfy 0 <= n_correct <= n_samples: re-run the tier stage for this pool"
                )
            self.arm[pid] = (self.category[pid], k, n)
        self.ids = sorted(ids)
        self.a, self.b = beta_from_counts([(k, n) for _, k, n in self.arm.values()])
        self.value: dict[Arm, float] = {
            arm: mixed_chance(arm[1], arm[2], self.a, self.b, group_size) for arm in sorted(set(self.arm.values()))
        }
        self.factor = self._factors()
        if not any(self.factor[p] > 0 for p in self.ids):
            raise ValueError(
                "sampler: adaptive: every train prompt has weight 0 (category_weights x tier weights); give at "
                "least one category and one tier with prompts a positive weight"
            )
        self.rng = np.random.Generator(np.random.PCG64(seed))
        self.recent: deque[list[str]] = deque(maxlen=max(cfg.dedup_window, 1))
        self.retired: set[str] = set()
        self.last_drawn: dict[str, int] = {}
        self.batches = 0
        self.fallback_counts: Counter[str] = Counter()
        self.fallback_log: deque[dict] = deque(maxlen=LOG_KEEP)
        self._window = Counter()  # groups reported / mixed since the last INFO summary

    def _factors(self) -> dict[str, float]:
        """Per prompt: its category's weight spread over the category's prompts, times its tier's weight."""
        tier_w = self.cfg.weights.normalized()
        sizes = Counter(self.category.values())
        if self.cfg.category_weights:
            unknown = sorted(set(self.cfg.category_weights) - set(sizes))
            if unknown:
                log.warning("curriculum.category_weights names categories with no train rows: %s", unknown)
            cat = {c: float(self.cfg.category_weights.get(c, 0.0)) / sizes[c] for c in sizes}
        else:
            cat = dict.fromkeys(sizes, 1.0)  # every prompt alike: categories in proportion to their size
        return {p: cat[self.category[p]] * tier_w[self.tier[p]] for p in self.ids}

    def weight(self, pid: str) -> float:
        """The prompt's draw weight now (0 when its category or tier is excluded)."""
        value = max(self.value[self.arm[pid]], VALUE_FLOOR)
        return self.factor[pid] * value**self.cfg.adaptive.sharpness

    # ---- drawing ---------------------------------------------------------------------------------
    def next_batch(self, n: int | None = None) -> list[str]:
        """The prompt ids of the next batch: n of them (default batch_size) unless `short_batch` applies."""
        size = self.batch_size if n is None else n
        if size < 1:
            raise ValueError(f"next_batch: n={n} must be >= 1")
        blocked = {pid for batch in self.recent for pid in batch} if self.cfg.dedup_window else set()
        eligible = [p for p in self.ids if self.factor[p] > 0 and p not in blocked and p not in self.retired]
        taken: list[str] = []
        if eligible:
            w = np.array([self.weight(p) for p in eligible])
            pick = self.rng.choice(len(eligible), size=min(size, len(eligible)), replace=False, p=w / w.sum())
            taken = [eligible[i] for i in pick]
        if len(taken) < size:
            self._exhausted(size - len(taken), taken)
        for pid in taken:
            self.last_drawn[pid] = self.batches
        self.recent.append(list(taken))
        self.batches += 1
        return taken

    def _exhausted(self, missing: int, taken: list[str]) -> None:
        """No eligible prompt left: relax the dedup window, then reuse retired prompts, or stay short."""
        if self.cfg.when_exhausted == "relax_window":
            have = set(taken)
            spare = sorted(
                (p for p in self.ids if self.factor[p] > 0 and p not in have),
                key=lambda p: (p in self.retired, self.last_drawn.get(p, -1), p),
            )[:missing]
            taken.extend(spare)
            self._event(
                "dedup_window_relaxed",
                missing,
                {"recent": sum(p not in self.retired for p in spare), "retired": sum(p in self.retired for p in spare)},
            )
            missing -= len(spare)
        if missing:
            self._event("short_batch", missing, {})

    def _event(self, reason: str, wanted: int, filled: dict[str, int]) -> None:
        first = reason not in self.fallback_counts
        self.fallback_counts[reason] += 1
        self.fallback_log.append(
            {"batch": self.batches, "cell": "*", "reason": reason, "wanted": wanted, "filled_from": filled}
        )
        log.log(
            logging.INFO if first else logging.DEBUG,
            "adaptive sampler batch %d: short by %d (%s); filled from %s",
            self.batches,
            wanted,
            reason,
            filled or "nothing",
        )

    # ---- learning ----------------------------------------------------------------------------------
    def report(self, ids: list[str], success_rates: list[float]) -> dict[str, tuple[str, str]]:
        """Record each drawn prompt's group success rate: arm values move, solved prompts retire.

        Returns {} (no prompt changes tier here; the interface is the quota sampler's)."""
        if len(ids) != len(success_rates):
            raise ValueError(f"report: {len(ids)} ids but {len(success_rates)} success rates; pass one rate per id")
        mixed: dict[Arm, list[bool]] = {}
        for pid, rate in zip(ids, success_rates):
            if pid not in self.arm:
                raise KeyError(f"report: prompt id {pid!r} is not in the sampler's train pool; report only drawn ids")
            if not 0.0 <= float(rate) <= 1.0:
                raise ValueError(
                    f"report: success rate {rate!r} for id {pid!r} must be in [0, 1] (correct / group size)"
                )
            mixed.setdefault(self.arm[pid], []).append(0.0 < float(rate) < 1.0)
            if float(rate) == 1.0 and self.cfg.adaptive.retire_solved:
                self.retired.add(pid)
            else:  # drawn again (the window relaxed) and not solved this time: drawable again
                self.retired.discard(pid)
        step = self.cfg.adaptive.step
        for arm, flags in mixed.items():
            self.value[arm] += step * (sum(flags) / len(flags) - self.value[arm])
        self._window.update(groups=len(ids), mixed=sum(sum(f) for f in mixed.values()))
        if self.batches % RETIER_SUMMARY_EVERY == 0 and self._window["groups"]:
            top = sorted(self.value.items(), key=lambda kv: -kv[1])[:3]
            log.info(
                "adaptive sampler: %d of %d groups mixed in the last %d batches, %d prompts retired; highest values %s",
                self._window["mixed"],
                self._window["groups"],
                RETIER_SUMMARY_EVERY,
                len(self.retired),
                ", ".join(f"{c} {k}/{n}: {v:.2f}" for (c, k, n), v in top),
            )
            self._window.clear()
        return {}

    # ---- checkpointing ---------------------------------------------------------------------------
    def _pool_digest(self) -> str:
        text = "\n".join(f"{p}\t{self.arm[p][0]}\t{self.arm[p][1]}\t{self.arm[p][2]}" for p in self.ids)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def state_dict(self) -> dict:
        """Everything needed to continue exactly where this sampler is; JSON-serializable."""
        return {
            "kind": "adaptive",
            "version": STATE_VERSION,
            "seed": self.seed,
            "batch_size": self.batch_size,
            "pool": self._pool_digest(),
            "batches": self.batches,
            "rng": self.rng.bit_generator.state,
            "value": [[c, k, n, v] for (c, k, n), v in sorted(self.value.items())],
            "retired": sorted(self.retired),
            "recent": [list(b) for b in self.recent],
            "last_drawn": dict(sorted(self.last_drawn.items())),
            "window": dict(self._window),
            "fallback_counts": dict(self.fallback_counts),
            "fallback_log": list(self.fallback_log),
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore a `state_dict()` taken from an adaptive sampler over the same pool and batch size."""
        check_state(state, "adaptive", STATE_VERSION, self._pool_digest())
        self.batches = state["batches"]
        self.rng.bit_generator.state = state["rng"]
        self.value = {(c, int(k), int(n)): float(v) for c, k, n, v in state["value"]}
        self.retired = set(state["retired"])
        self.recent = deque((list(b) for b in state["recent"]), maxlen=self.recent.maxlen)
        self.last_drawn = dict(state["last_drawn"])
        self._window = Counter(state.get("window", {}))
        self.fallback_counts = Counter(state["fallback_counts"])
        self.fallback_log = deque(state["fallback_log"], maxlen=LOG_KEEP)


def make_sampler(df, cfg: CurriculumConfig, seed: int, batch_size: int = 8, group_size: int = 8):
    """The sampler `cfg.sampler` names: StratifiedSampler (quota), AdaptiveSampler (adaptive) or
    UniformSampler (uniform)."""
    if cfg.sampler == "adaptive":
        return AdaptiveSampler(df, cfg, seed, batch_size, group_size)
    from rlvrflow.curriculum.sampler import StratifiedSampler, UniformSampler

    if cfg.sampler == "uniform":
        return UniformSampler(df, seed, batch_size)
    return StratifiedSampler(df, cfg, seed, batch_size)
