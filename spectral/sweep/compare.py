"""Two arms of a transfer experiment compared as μP is meant to be compared: paired by seed,
with a 95 % interval, each arm's tuning compute, and at equal tuning compute.

An *arm* is one way of arriving at a model at the target size, with what it cost to get there:

* **μP transferred**: tuned at the base (every base run), then one run per seed at the target;
* **SP transferred**: the same base tuning (at the base SP and μP are one model), SP's rules
  at the target;
* **SP tuned at the target**: every configuration it tried at the target;
* **μP re-tuned at the target**: the base tuning, then its η grid at the target.

From the raw run records (:mod:`spectral.sweep.records`) this module computes, pure (no
torch, no files):

* each arm's **final loss per seed**: the configuration with the lowest seed-mean loss among
  those it ran at the target (one configuration for a transferred arm);
* the **paired difference** of two arms, seed by seed (the same seeds draw the same init, the
  same batches and the same validation windows in both), its mean and a 95 % t-interval
  (:func:`t_quantile`; with three seeds, three differences of one sign are p = 0.25 under a
  sign test, and only the interval says more);
* each arm's **tuning compute**: distinct runs (records with one fingerprint count once; a
  reused run was not trained twice), Σ parameters × training tokens, and the seconds the
  records give;
* the **compute-matched** comparison: with the transferred arm's compute, the tuned arm
  affords ``k = floor(C_transferred / c_config)`` configurations at the target (``c_config``:
  one configuration over the same seeds); its expected best of ``k`` drawn without replacement
  from its own search set (:func:`expected_min`) is what it gets for the same compute.

:mod:`spectral.sweep.compare_arms` builds the arms of one sweep folder (and of arms spread over
several folders); ``templates/sweep_comparison.md.j2`` renders them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from math import comb
from typing import Any

from .student import t_cdf, t_quantile

__all__ = [
    "Arm",
    "Cost",
    "Pair",
    "arm",
    "compare",
    "config_key",
    "config_label",
    "cost",
    "expected_min",
    "t_cdf",
    "t_quantile",
]


def expected_min(values: Sequence[float], k: int) -> float:
    """E[min of ``k`` values drawn without replacement, uniformly, from ``values``], exactly.

    Sort ``values`` ascending, v₁ ≤ … ≤ v_N. The minimum of a k-subset is v_i (by position)
    when the subset holds position i and k − 1 of the N − i positions after it, so

        E = Σ_{i=1}^{N−k+1} v_i · C(N − i, k − 1) / C(N, k).

    Ties need no care (equal values at different positions). ``k`` ≥ N gives min(values). A
    value of +∞ (a diverged configuration) counts only where its probability is not 0.

    >>> expected_min([1.0, 2.0, 3.0], 2)  # subsets {1,2} {1,3} {2,3}: (1 + 1 + 2) / 3
    1.3333333333333333
    """
    if k < 1:
        raise ValueError(f"expected_min: k must be at least 1, got {k}")
    v = sorted(values)
    n = len(v)
    if n == 0:
        raise ValueError("expected_min: no values")
    k = min(k, n)
    total = comb(n, k)
    out = 0.0
    for i, x in enumerate(v, start=1):
        w = comb(n - i, k - 1)
        if w:
            out += x * w / total
    return out


@dataclass(frozen=True)
class Cost:
    """What an arm spent: distinct runs, Σ parameters × training tokens, and seconds."""

    runs: int
    param_tokens: float
    """Σ over distinct runs of parameters × steps × batch × context (∝ training FLOPs, ≈ 6 ×)."""
    seconds: float | None
    """Σ of the records' ``seconds`` (``None``: a record has none)."""
    devices: tuple[str, ...] = ()


def _tokens(rec: dict[str, Any]) -> float:
    s = rec.get("settings") or {}
    steps = rec.get("steps_done") if isinstance(rec.get("steps_done"), int) else s.get("steps", 0)
    return float(steps) * float(s.get("batch_size", 0)) * float(s.get("block_size", 0))


def cost(records: Iterable[dict[str, Any]]) -> Cost:
    """The compute of ``records``, each fingerprint once (a run reused by another
    parameterisation, or recorded in two folders, was trained once)."""
    seen: dict[str, dict[str, Any]] = {}
    for r in records:
        seen.setdefault(r.get("fingerprint") or r["key"], r)
    runs = list(seen.values())
    secs = [r.get("seconds") for r in runs]
    seconds = None if any(not isinstance(x, (int, float)) for x in secs) else float(sum(secs))  # type: ignore[arg-type]
    return Cost(len(runs), sum(float(r.get("n_params", 0)) * _tokens(r) for r in runs), seconds,
                tuple(sorted({str(r.get("device", "?")) for r in runs})))


_CONFIG_DROP = ("seed",)


def config_key(rec: dict[str, Any]) -> tuple[Any, ...]:
    """One configuration at one size, whatever the seed: the settings but the seed, the
    parameterisation, the size and log2 η."""
    from .tune import freeze

    s = {k: v for k, v in (rec.get("settings") or {}).items() if k not in _CONFIG_DROP}
    return (rec.get("parameterization"), rec.get("width"), rec.get("depth"), rec.get("log2_lr"), freeze(s))


def config_label(rec: dict[str, Any]) -> str:
    """``α output=4, σ hidden_weight×4, η input_weight×16, log2 η −5``: what sets one configuration apart."""
    s = rec.get("settings") or {}
    parts = []
    mult = s.get("multiplier", 1.0)
    if isinstance(mult, dict):
        parts += [f"α {k}={v:g}" for k, v in sorted(mult.items())]
    elif mult != 1.0:
        parts.append(f"α {mult:g}")
    parts += [f"σ {k}×{v:g}" for k, v in sorted((s.get("init_scale") or {}).items())]
    parts += [f"η {k}×{v:g}" for k, v in sorted((s.get("lr_scale") or {}).items())]
    if s.get("ablation"):
        parts.append(f"rule {s['ablation'].get('name', '?')}")
    parts.append(f"log2 η {rec.get('log2_lr')}")
    return ", ".join(parts)


def _loss(rec: dict[str, Any]) -> float:
    if rec.get("diverged") or rec.get("val_loss") is None:
        return math.inf
    return float(rec["val_loss"])


@dataclass(frozen=True)
class Arm:
    """One arm: its final configuration's loss per seed, what it searched at the target, its cost."""

    name: str
    label: str
    """The final configuration (:func:`config_label`)."""
    size: int
    """The target width."""
    per_seed: tuple[tuple[int, float], ...]
    """(seed, loss) of the final configuration; +∞ where a seed diverged."""
    search: tuple[tuple[str, float], ...]
    """(label, seed-mean loss) of every configuration the arm ran at the target with every seed."""
    config_cost: float
    """Parameters × tokens of one target configuration over the arm's seeds."""
    cost: Cost
    bounds: tuple[str, ...] = ()
    """What the arm did not search (each makes its loss a bound, not its optimum)."""

    @property
    def mean(self) -> float:
        return sum(v for _, v in self.per_seed) / len(self.per_seed)

    @property
    def seeds(self) -> tuple[int, ...]:
        return tuple(s for s, _ in self.per_seed)


def arm(name: str, spent: Iterable[dict[str, Any]], target: Iterable[dict[str, Any]], seeds: Sequence[int],
        bounds: Sequence[str] = ()) -> Arm:
    """An arm from its records: ``spent``, every run it trained (its cost; ``target``'s runs are
    added); ``target``, its runs at the target size (one width). The final configuration is the
    one with the lowest seed-mean loss among those run with every one of ``seeds`` (a diverged
    seed makes the mean +∞)."""
    target = list(target)
    groups: dict[tuple[Any, ...], dict[int, dict[str, Any]]] = {}
    for r in target:
        groups.setdefault(config_key(r), {})[int((r.get("settings") or {}).get("seed", 0))] = r
    complete = [(sum(_loss(g[s]) for s in seeds) / len(seeds), i, g)
                for i, g in enumerate(groups.values()) if all(s in g for s in seeds)]
    if not complete:
        raise ValueError(f"{name}: no configuration at the target has a run for every seed {list(seeds)}")
    widths = {r.get("width") for r in target}
    if len(widths) != 1:
        raise ValueError(f"{name}: target runs at several widths {sorted(widths, key=str)}")
    best = min(complete, key=lambda x: (x[0], x[1]))[2]
    first = best[seeds[0]]
    one = sum(float(g[s].get("n_params", 0)) * _tokens(g[s]) for s in seeds for g in [best])
    return Arm(
        name=name, label=config_label(first), size=int(first["width"]),
        per_seed=tuple((s, _loss(best[s])) for s in seeds),
        search=tuple(sorted(((config_label(g[seeds[0]]), m) for m, _, g in complete), key=lambda x: (x[1], x[0]))),
        config_cost=one, cost=cost([*spent, *target]), bounds=tuple(bounds))


@dataclass(frozen=True)
class Pair:
    """Arm ``a`` against arm ``b``: paired by seed, and at ``a``'s compute."""

    a: Arm
    b: Arm
    diffs: tuple[tuple[int, float], ...]
    """(seed, a − b) for each seed both arms ran."""
    mean: float
    half: float | None
    """Half-width of the 95 % t-interval of the mean difference (``None``: fewer than 2 seeds, or a
    diverged seed)."""
    ratio: float
    """b's tuning compute over a's (Σ parameters × tokens)."""
    k: int
    """Configurations at the target b affords with a's compute (floor; 0: not one)."""
    matched: float | None
    """b's expected best of k over its search set (``None``: k = 0, or b searched one configuration)."""

    @property
    def interval(self) -> tuple[float, float] | None:
        return None if self.half is None else (self.mean - self.half, self.mean + self.half)

    @property
    def excludes_zero(self) -> bool:
        iv = self.interval
        return iv is not None and (iv[0] > 0 or iv[1] < 0)

    @property
    def matched_gap(self) -> float | None:
        """a's mean minus b's expected best-of-k (< 0: a ahead at equal compute)."""
        return None if self.matched is None else self.a.mean - self.matched


def compare(a: Arm, b: Arm) -> Pair:
    """``a`` − ``b`` seed by seed over the seeds both ran, with its 95 % t-interval; and ``b``
    restricted to ``a``'s compute (best of k of its search set)."""
    bs = dict(b.per_seed)
    diffs = tuple((s, v - bs[s]) for s, v in a.per_seed if s in bs)
    if not diffs:
        raise ValueError(f"{a.name} and {b.name} share no seed")
    d = [x for _, x in diffs]
    mean = sum(d) / len(d)
    half = None
    if len(d) > 1 and all(math.isfinite(x) for x in d):
        sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (len(d) - 1))
        half = t_quantile(len(d) - 1) * sd / math.sqrt(len(d))
    ratio = b.cost.param_tokens / a.cost.param_tokens if a.cost.param_tokens else math.inf
    # a configuration of b over the seeds both ran costs b.config_cost · |shared| / |b's seeds|
    per = b.config_cost * len(diffs) / len(b.per_seed)
    k = int(a.cost.param_tokens // per) if per > 0 else 0
    matched = expected_min([m for _, m in b.search], k) if k >= 1 and len(b.search) > 1 else None
    return Pair(a, b, diffs, mean, half, ratio, k, matched)
