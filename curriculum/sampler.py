"""The stratified curriculum sampler: batches by quota over (category x tier), no recent repeats.

    sampler = StratifiedSampler(tiered_rows, cfg, seed=0, batch_size=8)
    ids = sampler.next_batch()                    # prompt ids for one GRPO step
    sampler.report(ids, group_success_rates)      # online re-tiering
    ckpt["sampler"] = sampler.state_dict()        # JSON-serializable; load_state_dict() resumes exactly

How a batch is drawn
- Pool: rows with `split == "train"` (all rows when there is no `split` column); needs `id`,
  `category`, `tier`.
- Quotas: cell (c, t) has weight category_weight(c) * tier_weight(t), normalized. Category weights
  come from `cfg.category_weights`, or are proportional to the category's pool size when that is
  empty. Each batch of n prompts adds n * weight to every cell's credit and hands each slot to the
  cell with the most credit left, so over many batches every cell gets its share to within a prompt.
- Within a cell, prompts come from a seeded shuffle of the cell (an epoch); when the epoch is used
  up, a new shuffle starts. A prompt drawn in one of the last `dedup_window` batches, or already in
  this batch, is skipped.
- Fallback when a cell runs dry (no prompts: `cell_empty`; all recently drawn: `cell_in_window`):
  its slots are borrowed from other cells with positive weight, in the order of `cfg.fallback`
  (`category_first`: the same category's other tiers by weight, then the same tier elsewhere, then
  the rest; `tier_first`: the same tier elsewhere first). When re-tiering has emptied every cell with
  a positive weight (e.g. the model mastered all learnable prompts and too_easy has weight 0), the
  zero-weight tiers of the weighted categories are drawn from instead (`weighted_tiers_empty`), so
  training goes on and those prompts can be re-tiered back. If no cell has an eligible prompt left,
  `cfg.when_exhausted` decides: `relax_window` reuses the least recently drawn ids
  (`dedup_window_relaxed`), `short_batch` returns fewer ids (`short_batch`). Every event is counted
  in `fallback_counts` and kept (the last 500) in `fallback_log` with the batch number and reason.

Online re-tiering: each prompt keeps its last `retier_window` success rates (the offline pass@1
counts as the first); after `report`, its tier is the tier of their mean under `cfg.boundaries`, and
a prompt that changed tier moves to the new cell at a random place in that cell's epoch. Moves are
logged at DEBUG per batch and summed up at INFO every `RETIER_SUMMARY_EVERY` batches (with the tier
counts), so a long run's log stays readable.
"""

from __future__ import annotations

import hashlib
import logging
from collections import Counter, deque

import numpy as np

from rlvrflow.curriculum.config import TIERS, CurriculumConfig

log = logging.getLogger("rlvrflow.curriculum")

Cell = tuple[str, str]  # (category, tier)
LOG_KEEP = 500
STATE_VERSION = 1
# re-tiering moves are logged per batch at DEBUG and summed up at INFO every this many batches
RETIER_SUMMARY_EVERY = 50


class StratifiedSampler:
    """Quota batches over (category x tier) with recent-prompt dedup and online re-tiering."""

    def __init__(self, df, cfg: CurriculumConfig, seed: int, batch_size: int = 8) -> None:
        if batch_size < 1:
            raise ValueError(f"StratifiedSampler: batch_size={batch_size} must be >= 1")
        self.cfg, self.seed, self.batch_size = cfg, seed, batch_size
        pool = _train_pool(df)
        self.category = dict(zip(pool["id"].to_list(), pool["category"].to_list()))
        self.tier = dict(zip(pool["id"].to_list(), pool["tier"].to_list()))
        rates = pool["pass_at_1"].to_list() if "pass_at_1" in pool.columns else [None] * pool.height
        self.history = {i: ([] if r is None else [float(r)]) for i, r in zip(pool["id"].to_list(), rates)}
        self.categories = sorted(set(self.category.values()))
        self.weights = self._cell_weights(pool)
        self.cells: list[Cell] = [(c, t) for c in self.categories for t in TIERS]
        self.members: dict[Cell, set[str]] = {cell: set() for cell in self.cells}
        for pid in sorted(self.category):
            self.members[self._cell_of(pid)].add(pid)
        self.rng = np.random.Generator(np.random.PCG64(seed))
        self.queues: dict[Cell, list[str]] = {cell: self._shuffled(self.members[cell]) for cell in self.cells}
        self.credit: dict[Cell, float] = {cell: 0.0 for cell in self.cells}
        self.recent: deque[list[str]] = deque(maxlen=max(cfg.dedup_window, 1))
        self.last_drawn: dict[str, int] = {}
        self.batches = 0
        self.fallback_counts: Counter[str] = Counter()
        self.fallback_log: deque[dict] = deque(maxlen=LOG_KEEP)
        self.moves = 0
        self._moves_summarized = 0
        self._warned: set[tuple[str, str]] = set()

    # ---- construction helpers -------------------------------------------------------------------
    def _cell_weights(self, pool) -> dict[Cell, float]:
        tier_w = self.cfg.weights.normalized()
        if self.cfg.category_weights:
            unknown = sorted(set(self.cfg.category_weights) - set(self.categories))
            if unknown:
                log.warning("curriculum.category_weights names categories with no train rows: %s", unknown)
            cat_w = {c: float(self.cfg.category_weights.get(c, 0.0)) for c in self.categories}
        else:
            sizes = Counter(self.category.values())
            cat_w = {c: float(sizes[c]) for c in self.categories}
        total = sum(cat_w.values())
        self.category_share = {c: (cat_w[c] / total if total > 0 else 0.0) for c in self.categories}
        if total <= 0:
            raise ValueError(
                f"curriculum.category_weights gives every train category ({self.categories}) weight 0; "
                "give at least one of them a positive weight, or leave the map empty for size-proportional"
            )
        return {(c, t): cat_w[c] / total * tier_w[t] for c in self.categories for t in TIERS}

    def _cell_of(self, pid: str) -> Cell:
        return (self.category[pid], self.tier[pid])

    def _shuffled(self, ids) -> list[str]:
        ordered = sorted(ids)  # sets iterate in hash order, which differs between processes
        return [ordered[i] for i in self.rng.permutation(len(ordered))]

    # ---- drawing ---------------------------------------------------------------------------------
    def next_batch(self, n: int | None = None) -> list[str]:
        """The prompt ids of the next batch: n of them (default batch_size) unless `short_batch` applies.

        Each call is one batch for the dedup window, refill draws included.
        """
        size = self.batch_size if n is None else n
        if size < 1:
            raise ValueError(f"next_batch: n={n} must be >= 1")
        blocked = {pid for batch in self.recent for pid in batch} if self.cfg.dedup_window else set()
        taken: list[str] = []
        taken_set: set[str] = set()
        short: list[tuple[Cell, int, str]] = []
        for cell, want in self._allocate(size):
            got = 0
            while got < want and (pid := self._draw(cell, blocked, taken_set)) is not None:
                taken.append(pid)
                taken_set.add(pid)
                got += 1
            if got < want:
                reason = "cell_empty" if not self.members[cell] else "cell_in_window"
                short.append((cell, want - got, reason))
        for cell, missing, reason in short:
            filled = self._borrow(cell, missing, blocked, taken, taken_set)
            self._event(cell, reason, missing, filled)
        if len(taken) < size and not any(self.members[c] for c in self.cells if self.weights[c] > 0):
            self._spare_tiers(size - len(taken), blocked, taken, taken_set)
        if len(taken) < size:
            self._exhausted(size - len(taken), taken, taken_set)
        for pid in taken:
            self.last_drawn[pid] = self.batches
        self.recent.append(list(taken))
        self.batches += 1
        return taken

    def _allocate(self, size: int) -> list[tuple[Cell, int]]:
        """Whole slots per cell: each slot goes to the cell with the most unspent credit (sums to size).

        Credit carries over between batches, so every cell's count stays within about one prompt of its
        share whatever the batch sizes; zero-weight cells never get credit, hence never a slot.
        """
        for cell in self.cells:
            self.credit[cell] += size * self.weights[cell]
        alloc = dict.fromkeys(self.cells, 0)
        for _ in range(size):
            best = max(self.cells, key=lambda c: self.credit[c] - alloc[c])  # first of equals: stable order
            alloc[best] += 1
        for cell in self.cells:
            self.credit[cell] -= alloc[cell]
        return [(cell, alloc[cell]) for cell in self.cells if alloc[cell] > 0]

    def _draw(self, cell: Cell, blocked: set[str], taken: set[str]) -> str | None:
        """Next eligible id of the cell's epoch, starting a new epoch when this one has none left."""
        queue = self.queues[cell]
        for attempt in range(2):
            for idx, pid in enumerate(queue):
                if pid not in blocked and pid not in taken:
                    del queue[idx]
                    return pid
            if attempt == 0:
                used = self.members[cell].difference(queue)
                if not used:
                    return None
                queue.extend(self._shuffled(used))
        return None

    def _borrow_order(self, cell: Cell) -> list[Cell]:
        cat, tier = cell
        by_weight = sorted(
            (c for c in self.cells if c != cell and self.weights[c] > 0),
            key=lambda c: (-self.weights[c], self.cells.index(c)),
        )
        same_cat = [c for c in by_weight if c[0] == cat]
        same_tier = [c for c in by_weight if c[1] == tier]
        first, second = (same_cat, same_tier) if self.cfg.fallback == "category_first" else (same_tier, same_cat)
        rest = [c for c in by_weight if c not in first and c not in second]
        return first + second + rest

    def _borrow(self, cell: Cell, missing: int, blocked, taken: list[str], taken_set: set[str]) -> dict[str, int]:
        filled: Counter[str] = Counter()
        for other in self._borrow_order(cell):
            while missing and (pid := self._draw(other, blocked, taken_set)) is not None:
                taken.append(pid)
                taken_set.add(pid)
                filled[f"{other[0]}/{other[1]}"] += 1
                missing -= 1
            if not missing:
                break
        return dict(filled)

    def _spare_tiers(self, missing: int, blocked, taken: list[str], taken_set: set[str]) -> None:
        """Every weighted cell is empty: draw from the zero-weight tiers of the weighted categories.

        Each slot goes to the category least served so far relative to its share (so the categories
        keep their proportions), from its first tier with an eligible prompt.
        """
        wanted, filled = missing, Counter()
        served: Counter[str] = Counter()
        spare = {
            cat: [c for c in self.cells if c[0] == cat and self.weights[c] == 0]
            for cat in self.categories
            if self.category_share[cat] > 0
        }
        while missing:
            for cat in sorted(spare, key=lambda c: (served[c] / self.category_share[c], -self.category_share[c])):
                cell, pid = next(
                    ((c, p) for c in spare[cat] if (p := self._draw(c, blocked, taken_set)) is not None), (None, None)
                )
                if pid is not None:
                    taken.append(pid)
                    taken_set.add(pid)
                    filled[f"{cell[0]}/{cell[1]}"] += 1
                    served[cat] += 1
                    missing -= 1
                    break
            else:
                break  # no weighted category has an eligible prompt in any tier
        self._event(None, "weighted_tiers_empty", wanted, dict(filled))

    def _exhausted(self, missing: int, taken: list[str], taken_set: set[str]) -> None:
        """No eligible prompt anywhere: relax the dedup window (least recently drawn first) or stay short."""
        if self.cfg.when_exhausted == "relax_window":
            drawable = [p for cell in self.cells if self.weights[cell] > 0 for p in self.members[cell]]
            pool = sorted((p for p in drawable if p not in taken_set), key=lambda p: (self.last_drawn.get(p, -1), p))
            for pid in pool[:missing]:
                queue = self.queues[self._cell_of(pid)]
                if pid in queue:
                    queue.remove(pid)
                taken.append(pid)
                taken_set.add(pid)
            self._event(None, "dedup_window_relaxed", missing, {"recent": min(missing, len(pool))})
            missing -= min(missing, len(pool))
        if missing:
            self._event(None, "short_batch", missing, {})

    def _event(self, cell: Cell | None, reason: str, wanted: int, filled: dict[str, int]) -> None:
        where = "*" if cell is None else f"{cell[0]}/{cell[1]}"
        self.fallback_counts[reason] += 1
        self.fallback_log.append(
            {"batch": self.batches, "cell": where, "reason": reason, "wanted": wanted, "filled_from": filled}
        )
        level = logging.INFO if (where, reason) not in self._warned else logging.DEBUG
        self._warned.add((where, reason))
        log.log(
            level,
            "sampler batch %d: cell %s short by %d (%s); filled from %s",
            self.batches,
            where,
            wanted,
            reason,
            filled or "nothing",
        )

    # ---- online re-tiering -----------------------------------------------------------------------
    def report(self, ids: list[str], success_rates: list[float]) -> dict[str, tuple[str, str]]:
        """Record each prompt's GRPO group success rate; returns {id: (old_tier, new_tier)} for movers."""
        if len(ids) != len(success_rates):
            raise ValueError(f"report: {len(ids)} ids but {len(success_rates)} success rates; pass one rate per id")
        moved: dict[str, tuple[str, str]] = {}
        for pid, rate in zip(ids, success_rates):
            if pid not in self.tier:
                raise KeyError(f"report: prompt id {pid!r} is not in the sampler's train pool; report only drawn ids")
            if not 0.0 <= float(rate) <= 1.0:
                raise ValueError(
                    f"report: success rate {rate!r} for id {pid!r} must be in [0, 1] (correct / group size)"
                )
            hist = self.history[pid]
            hist.append(float(rate))
            del hist[: max(0, len(hist) - self.cfg.retier_window)]
            new = self.cfg.boundaries.tier_of(sum(hist) / len(hist))
            if new != self.tier[pid]:
                moved[pid] = (self.tier[pid], new)
                self._move(pid, new)
        if moved:
            log.debug("re-tiering after batch %d: %d prompt(s) moved", self.batches, len(moved))
        if self.batches % RETIER_SUMMARY_EVERY == 0 and self.moves > self._moves_summarized:
            log.info(
                "re-tiering: %d move(s) in the last %d batches (%d in all); tiers now %s",
                self.moves - self._moves_summarized,
                RETIER_SUMMARY_EVERY,
                self.moves,
                self.tier_counts(),
            )
            self._moves_summarized = self.moves
        return moved

    def _move(self, pid: str, new_tier: str) -> None:
        old = self._cell_of(pid)
        self.members[old].discard(pid)
        if pid in self.queues[old]:
            self.queues[old].remove(pid)
        self.tier[pid] = new_tier
        cell = self._cell_of(pid)
        self.members[cell].add(pid)
        queue = self.queues[cell]
        queue.insert(int(self.rng.integers(0, len(queue) + 1)), pid)
        self.moves += 1

    def tier_counts(self) -> dict[str, int]:
        """Current number of pool prompts per tier."""
        counts = Counter(self.tier.values())
        return {t: counts.get(t, 0) for t in TIERS}

    # ---- checkpointing ---------------------------------------------------------------------------
    def _pool_digest(self) -> str:
        text = "\n".join(f"{p}\t{self.category[p]}" for p in sorted(self.category))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def state_dict(self) -> dict:
        """Everything needed to continue exactly where this sampler is; JSON-serializable."""
        return {
            "version": STATE_VERSION,
            "seed": self.seed,
            "batch_size": self.batch_size,
            "pool": self._pool_digest(),
            "batches": self.batches,
            "moves": self.moves,
            "moves_summarized": self._moves_summarized,
            "rng": self.rng.bit_generator.state,
            "tier": dict(sorted(self.tier.items())),
            "history": {k: list(v) for k, v in sorted(self.history.items())},
            "queues": [[c, t, list(self.queues[(c, t)])] for c, t in self.cells],
            "credit": [[c, t, self.credit[(c, t)]] for c, t in self.cells],
            "recent": [list(b) for b in self.recent],
            "last_drawn": dict(sorted(self.last_drawn.items())),
            "fallback_counts": dict(self.fallback_counts),
            "fallback_log": list(self.fallback_log),
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore a `state_dict()` taken from a sampler over the same pool and batch size."""
        check_state(state, "quota", STATE_VERSION, self._pool_digest())
        self.batches, self.moves = state["batches"], state["moves"]
        self._moves_summarized = state.get("moves_summarized", self.moves)
        self.rng.bit_generator.state = state["rng"]
        self.tier = dict(state["tier"])
        self.history = {k: list(v) for k, v in state["history"].items()}
        self.members = {cell: set() for cell in self.cells}
        for pid in sorted(self.tier):
            self.members[self._cell_of(pid)].add(pid)
        self.queues = {(c, t): list(q) for c, t, q in state["queues"]}
        self.credit = {(c, t): float(v) for c, t, v in state["credit"]}
        self.recent = deque((list(b) for b in state["recent"]), maxlen=self.recent.maxlen)
        self.last_drawn = dict(state["last_drawn"])
        self.fallback_counts = Counter(state["fallback_counts"])
        self.fallback_log = deque(state["fallback_log"], maxlen=LOG_KEEP)


def check_state(state: dict, kind: str, version: int, pool: str) -> None:
    """What every sampler checks before it resumes from `state`: the same kind of sampler (a state with no
    kind is a quota sampler's, as before kinds were recorded), the same release's layout, the same pool."""
    saved = state.get("kind", "quota")
    if saved != kind:
        raise ValueError(
            f"sampler state is the {saved!r} sampler's, not {'an' if kind == 'adaptive' else 'a'} {kind} sampler's; "
            "resume with the curriculum.sampler the run started with"
        )
    if state.get("version") != version:
        raise ValueError(
            f"sampler state version {state.get('version')!r} is not {version}; it comes from another rlvrflow release"
        )
    if state["pool"] != pool:
        raise ValueError(
            f"sampler state was saved for another train pool (digest {state['pool']}, this pool {pool}); resume "
            "with the same tiers.parquet and split"
        )


def _train_pool(df, who: str = "StratifiedSampler"):
    """The rows the sampler draws from: split == train when a split exists; checks the columns."""
    missing = [c for c in ("id", "category", "tier") if c not in df.columns]
    if missing:
        raise ValueError(f"{who}: the frame lacks {missing}; pass the output of tier_rows (tiers.parquet)")
    pool = df.filter(df["split"] == "train") if "split" in df.columns else df
    if pool.height == 0:
        raise ValueError(f"{who}: no train rows to sample from (split == 'train' matched nothing)")
    bad = sorted(set(pool["tier"].to_list()) - set(TIERS))
    if bad:
        raise ValueError(f"{who}: unknown tier value(s) {bad}; tiers are {list(TIERS)}")
    if pool["id"].is_duplicated().any():
        raise ValueError(f"{who}: duplicate ids in the train pool; ids must be unique")
    return pool


class UniformSampler:
    """Uniform epochs over the train pool, no tiers or quotas (`curriculum.sampler: uniform`): what a plain
    shuffled data loader does, and the baseline the curriculum's samplers are measured against.

    Each epoch is a seeded shuffle of every train id; a prompt never repeats within an epoch (nor
    within a batch across the epoch boundary). Tiers, weights, category weights and the recent-prompt
    window are not read; `next_batch` counts the draws (`batches`), `report` moves nothing (there is no
    re-tiering). `tier` and `category` (when the frame has them) are kept as they came in, for logs and
    benches.
    """

    kind = "uniform"

    def __init__(self, df, seed: int, batch_size: int = 8) -> None:
        if batch_size < 1:
            raise ValueError(f"UniformSampler: batch_size={batch_size} must be >= 1")
        if "id" not in df.columns:
            raise ValueError("UniformSampler: the frame lacks 'id'")
        pool = df.filter(df["split"] == "train") if "split" in df.columns else df
        if pool.height == 0:
            raise ValueError("UniformSampler: no train rows to sample from (split == 'train' matched nothing)")
        if pool["id"].is_duplicated().any():
            raise ValueError("UniformSampler: duplicate ids in the train pool; ids must be unique")
        self.ids = sorted(str(i) for i in pool["id"].to_list())
        ids = [str(i) for i in pool["id"].to_list()]
        self.category = dict(zip(ids, pool["category"].to_list())) if "category" in pool.columns else {}
        self.tier = dict(zip(ids, pool["tier"].to_list())) if "tier" in pool.columns else {}
        self.batch_size = batch_size
        self.seed = seed
        self.batches = 0
        self.fallback_counts: Counter[str] = Counter()  # never a fallback: the same interface as the others
        self.rng = np.random.Generator(np.random.PCG64(seed))
        self.queue: list[str] = []

    def next_batch(self, n: int | None = None) -> list[str]:
        """The next n ids (default batch_size; all of them when the pool is smaller). A batch that crosses
        into a new epoch skips that epoch's ids already in the batch and leaves them in the queue, so each
        epoch still draws every prompt once."""
        size = self.batch_size if n is None else n
        if size < 1:
            raise ValueError(f"next_batch: n={n} must be >= 1")
        out: list[str] = []
        taken: set[str] = set()
        while len(out) < min(size, len(self.ids)):
            idx = next((i for i, pid in enumerate(self.queue) if pid not in taken), None)
            if idx is None:  # this epoch is used up (its last ids may be in this batch): the next one
                self.queue.extend(self.ids[i] for i in self.rng.permutation(len(self.ids)))
                continue
            pid = self.queue.pop(idx)
            out.append(pid)
            taken.add(pid)
        self.batches += 1
        return out

    def report(self, ids: list[str], success_rates: list[float]) -> dict[str, tuple[str, str]]:
        """No re-tiering: moves nothing."""
        if len(ids) != len(success_rates):
            raise ValueError(f"report: {len(ids)} ids but {len(success_rates)} success rates")
        return {}

    def _pool_digest(self) -> str:
        return hashlib.sha256("\n".join(self.ids).encode()).hexdigest()[:16]

    def state_dict(self) -> dict:
        return {
            "kind": self.kind,
            "version": STATE_VERSION,
            "pool": self._pool_digest(),
            "batches": self.batches,
            "rng": self.rng.bit_generator.state,
            "queue": list(self.queue),
            "batch_size": self.batch_size,
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore a `state_dict()` taken from a uniform sampler over the same pool."""
        check_state(state, self.kind, STATE_VERSION, self._pool_digest())
        self.batches = int(state["batches"])
        self.rng.bit_generator.state = state["rng"]
        self.queue = list(state["queue"])
