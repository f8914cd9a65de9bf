"""A coordinate search that ends where it should: no knob moves, and no winner sits on an edge.

The committed "every knob" searches (docs/sweep/ablate) were coordinate steps run by hand: α_out
× η, then σ_hidden × η, then the embedding's η, each from the previous winner, and never a
second pass. So α_out was never re-tuned after σ_hidden or the embedding's η moved, and a step
run at one η searched no η at all. :func:`coordinate_search` is the loop those steps should
have been:

* one **round** searches each knob in turn, the others held at the current point;
* a knob's winner on the **edge** of the values tried, or a knob tried at **one value** (a
  one-point grid is an edge), extends that knob's grid by one step past the edge and searches
  again, up to ``max_extend`` times;
* rounds repeat **until a whole round moves no knob** (or ``max_rounds``);
* what could not be closed is returned as **bounds**: a knob still on an edge after its
  extensions, a knob never searched, or a search stopped by ``max_rounds`` while knobs still moved.

Coordinate steps are not a joint search: where knobs are coupled, the search can stop at a point
no single knob improves that is not the joint optimum (``tests/sweep/test_coordinate.py`` has one).

Each knob's values live on a log2 grid (η's is log2 η itself), so an extension is one grid step
(a factor 2 by default). Pure: the caller's ``evaluate`` gives the seed-mean loss of a point
(training it, or reading recorded runs); the search caches each point, so revisits cost nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["Knob", "Search", "Step", "coordinate_search"]


@dataclass(frozen=True)
class Knob:
    """One knob: its name, the log2 values to start from, and the grid step (in log2)."""

    name: str
    """``log2 η``, ``output``, ``init.hidden_weight``, …"""
    start: tuple[float, ...]
    """log2 values of the first grid (one value is allowed: it is an edge and is extended)."""
    step: float = 1.0
    """log2 step of an extension (1: a factor 2)."""


@dataclass(frozen=True)
class Step:
    """One search of one knob at one point."""

    round: int
    knob: str
    tried: tuple[float, ...]
    """log2 values tried, ascending."""
    winner: float
    loss: float
    moved: bool
    """The winner differs from the knob's value before this step."""
    edge: str
    """``""``, or where the winner sits: ``low``, ``high`` or ``one value``."""


@dataclass(frozen=True)
class Search:
    """The end of a coordinate search."""

    point: dict[str, float]
    """log2 value of every knob at the end."""
    loss: float
    steps: tuple[Step, ...]
    bounds: tuple[str, ...]
    """What was not closed (empty: every knob inside its grid and a last round that moved nothing)."""
    evaluated: int
    """Distinct points evaluated (the search's cost in configurations)."""
    converged: bool = field(default=False)
    """A whole round moved no knob."""


def _edge(tried: Sequence[float], winner: float) -> str:
    if len(tried) == 1:
        return "one value"
    if winner == min(tried):
        return "low"
    if winner == max(tried):
        return "high"
    return ""


def coordinate_search(knobs: Sequence[Knob], start: Mapping[str, float], evaluate: Callable[[dict[str, float]], float],
                      *, max_rounds: int = 5, max_extend: int = 3) -> Search:
    """Coordinate search over ``knobs`` from ``start`` (log2 values), minimising ``evaluate``.

    Each step tries the knob's grid around the current value (the start grid in round 1, then
    the current value and one step on each side), extends past an edge up to ``max_extend``
    times, and moves the knob to the lowest loss (ties: the current value, then the lower).
    Stops when a round moves no knob. A non-finite loss (diverged) never wins.
    """
    names = [k.name for k in knobs]
    if len(set(names)) != len(names):
        raise ValueError(f"coordinate_search: a knob is named twice in {names}")
    missing = [n for n in names if n not in start]
    if missing:
        raise ValueError(f"coordinate_search: no start value for {', '.join(missing)}")
    if max_rounds < 1 or max_extend < 0:
        raise ValueError("coordinate_search: max_rounds must be at least 1 and max_extend at least 0")
    cache: dict[tuple[tuple[str, float], ...], float] = {}

    def loss(point: dict[str, float]) -> float:
        key = tuple(sorted(point.items()))
        if key not in cache:
            v = float(evaluate(dict(point)))
            cache[key] = v if math.isfinite(v) else math.inf
        return cache[key]

    point = {n: float(start[n]) for n in names}
    steps: list[Step] = []
    open_edges: dict[str, str] = {}
    converged = False
    for rnd in range(1, max_rounds + 1):
        moved_any = False
        for knob in knobs:
            now = point[knob.name]
            grid = set(knob.start) | {now} if rnd == 1 else {now - knob.step, now, now + knob.step}
            extended = 0
            while True:
                tried = sorted(grid)
                scored = [(loss(point | {knob.name: v}), v != now, v) for v in tried]
                best_loss, _, best = min(scored)
                edge = _edge(tried, best)
                if not edge or not math.isfinite(best_loss) or extended >= max_extend:
                    break
                if edge in ("low", "one value"):
                    grid.add(min(tried) - knob.step)
                if edge in ("high", "one value"):
                    grid.add(max(tried) + knob.step)
                extended += 1
            moved = best != now
            moved_any |= moved
            point[knob.name] = best
            steps.append(Step(rnd, knob.name, tuple(sorted(grid)), best, best_loss, moved, edge))
            if edge:
                open_edges[knob.name] = edge
            else:
                open_edges.pop(knob.name, None)
        if not moved_any:
            converged = True
            break
    bounds = [f"{n}: the winner is on the {e} edge of what was tried after {max_extend} extensions"
              if e != "one value" else f"{n}: tried at one value" for n, e in open_edges.items()]
    if not converged:
        bounds.append(f"stopped after {max_rounds} rounds with knobs still moving")
    return Search(point, loss(point), tuple(steps), tuple(bounds), len(cache), converged)
