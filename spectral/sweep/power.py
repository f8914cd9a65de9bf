"""How narrow an exponent fit will be, before it is run: the power of ``--fit-exponent``.

A fit regresses the best log2 factor of each (size, seed) on ``x = log2(size / base)``; its
95 % half-width is ``t(N − 2) · σ / sqrt(S · Σ_w (x_w − x̄)²)`` for ``S`` seeds at the sizes
``w`` (``N = S · W`` points), where ``σ`` is the scatter of one optimum about the line. A
pilot (a fit already run with two or more seeds) estimates ``σ`` by the seed-pair scatter:
the pooled within-size variance of the optima, which is pure seed noise (a true exponent
moves every seed of a size alike). Seed noise is what the committed fits' residuals are
(their residual sd is about the seed-pair sd), so this predicts their half-widths.

Pure: numbers in, numbers out. ``spectral sweep --fit-exponent … --estimate`` prints it for
a pilot's ``exponents.json`` (:func:`power_rows`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ..templating import environment
from ..measure.fit import t_quantile

__all__ = ["TARGET", "doubling_sizes", "half_width", "power_rows", "render_power", "seed_sd", "seeds_needed"]

TARGET = 0.25
"""The half-width at which a fit can tell the μP exponents apart (they differ by ½ or 1)."""


def seed_sd(optima: Sequence[Sequence[float | None]]) -> tuple[float, int] | None:
    """The pooled within-size standard deviation of the optima (``optima[size][seed]``,
    ``None`` where missing) and its degrees of freedom; ``None`` without a size that has
    two seeds."""
    ss, df = 0.0, 0
    for row in optima:
        ys = [y for y in row if y is not None]
        if len(ys) < 2:
            continue
        m = sum(ys) / len(ys)
        ss += sum((y - m) ** 2 for y in ys)
        df += len(ys) - 1
    if df == 0:
        return None
    return math.sqrt(ss / df), df


def half_width(sd: float, log2_ratios: Sequence[float], n_seeds: int) -> float | None:
    """The expected 95 % half-width of the fitted slope with ``n_seeds`` seeds at sizes
    ``log2(size / base)``; ``None`` with fewer than three points or one distinct size."""
    n = n_seeds * len(log2_ratios)
    if n < 3 or len(set(log2_ratios)) < 2:
        return None
    mean = sum(log2_ratios) / len(log2_ratios)
    sxx = n_seeds * sum((x - mean) ** 2 for x in log2_ratios)
    return t_quantile(n - 2) * sd / math.sqrt(sxx)


def seeds_needed(sd: float, log2_ratios: Sequence[float], target: float = TARGET, at_most: int = 64) -> int | None:
    """The fewest seeds (≥ 2) whose expected half-width is ≤ ``target``; ``None`` if more
    than ``at_most`` would be needed."""
    for s in range(2, at_most + 1):
        h = half_width(sd, log2_ratios, s)
        if h is not None and h <= target:
            return s
    return None


def doubling_sizes(base: int, largest: int) -> list[int]:
    """``base, 2·base, …`` up to ``largest``."""
    out = [base]
    while out[-1] * 2 <= largest:
        out.append(out[-1] * 2)
    return out


def power_rows(fits: Sequence[Mapping[str, Any]], planned: Mapping[str, tuple[Sequence[int], int]] | None = None,
               largest: Mapping[str, Sequence[int]] | None = None, target: float = TARGET) -> list[dict[str, Any]]:
    """One row per fit of a pilot (``exponents.json``'s ``fits``): its interval now, the
    seed-pair sd, the expected half-width of a planned fit (``planned[axis]`` = its sizes
    and number of seeds), and the seeds needed for ``target`` at the pilot's sizes and at
    each doubling range from the base up to ``largest[axis]`` (e.g. width 512 and 1024)."""
    rows = []
    for f in fits:
        optima = [[None if o is None else float(o) for o in row] for row in f["optimal_log2_factor"]]
        est = seed_sd(optima)
        sd = None if est is None else est[0]
        base, sizes = int(f["base_size"]), [int(s) for s in f["sizes"]]
        ranges = [sizes] + [doubling_sizes(base, n) for n in (largest or {}).get(f["axis"], ()) if n > max(sizes)]
        options = []
        for rng in ranges:
            xs = [math.log2(s / base) for s in rng]
            options.append({
                "sizes": rng,
                "half_width_now_seeds": None if sd is None else half_width(sd, xs, len(f["seeds"])),
                "seeds_needed": None if sd is None else seeds_needed(sd, xs, target),
            })
        plan = (planned or {}).get(f["axis"])
        planned_hw = None
        if plan is not None and sd is not None:
            planned_hw = half_width(sd, [math.log2(s / base) for s in plan[0]], plan[1])
        interval = f.get("interval_95")
        hw = None if not interval else (interval[1] - interval[0]) / 2
        rows.append({
            "key": f["key"],
            "axis": f["axis"],
            "seeds": list(f["seeds"]),
            "interval_95": interval,
            "half_width": hw,
            "seed_sd": sd,
            "seed_sd_df": None if est is None else est[1],
            "informative": hw is not None and hw <= target,
            "planned": None if plan is None else {"sizes": list(plan[0]), "seeds": plan[1], "half_width": planned_hw},
            "options": options,
        })
    return rows


def render_power(optimizer: str, pilot: str, rows: Sequence[Mapping[str, Any]], target: float = TARGET) -> str:
    """:func:`power_rows` as a markdown table (``templates/exponent_power.md.j2``)."""
    def num(v: float | None, fmt: str = "{:.2f}") -> str:
        return "–" if v is None else fmt.format(v)

    headers, items = [], []
    for r in rows:
        for o in r["options"]:
            head = f"{'n' if r['axis'] == 'width' else 'L'} = {o['sizes'][0]}–{o['sizes'][-1]}"
            if head not in headers:
                headers.append(head)
    for r in rows:
        sym = "n" if r["axis"] == "width" else "L"
        cells = {f"{sym} = {o['sizes'][0]}–{o['sizes'][-1]}": o["seeds_needed"] for o in r["options"]}
        iv = r["interval_95"]
        p = r["planned"]
        items.append({
            "key": r["key"], "axis": r["axis"],
            "pilot": f"{','.join(map(str, r['seeds']))}: " + ("–" if not iv else f"[{iv[0]:+.2f}, {iv[1]:+.2f}] (±{r['half_width']:.2f})"),
            "informative": "yes" if r["informative"] else "**not informative**",
            "sd": "–" if r["seed_sd"] is None else f"{r['seed_sd']:.2f} ({r['seed_sd_df']})",
            "planned": "–" if p is None else f"{sym} = {', '.join(map(str, p['sizes']))}; {p['seeds']} → ±{num(p['half_width'])}",
            "needed": ["–" if h not in cells or cells[h] is None else str(cells[h]) for h in headers],
        })
    return environment("text").get_template("exponent_power.md.j2").render(
        optimizer=optimizer, pilot=pilot, rows=items, headers=headers, target=f"{target:g}")
