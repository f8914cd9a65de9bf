"""Where an implementation's ε acts: ``ε*`` per role and width, and its exponent in ``G``.

``ε*`` is the ε at which ``‖ΔW‖_R`` has halved from its value at a reference ε (default:
the implementation's own default ε). ``spectral infer`` measures ``ε*`` from ``ε → 0``
(``default × 1e-6``) and only for an ε it classifies as a regulariser; for SOAP neither
works: below about ``1e-12 · G`` Adam's ``sign`` normalises the float64 rounding in the
rotated gradient (the step grows ×10), and between ``1e-10`` and ``1e-3`` (at ``G = 1``)
the step does not move at all, so infer's ×1e3 test calls the ε inert-or-growing. This
script takes infer's measurement (its gradients, init, 6 warm-up steps, float64, ranks 1
and 4, seed 0, widths 64..256, ``G = 0.1, 1, 10`` on the hidden role at n = 128; its
exponent fits and rounding) and only moves the reference to the plateau:

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/eps_threshold.py pytorch_optimizer.SOAP \\
        --sweep --json docs/probe/soap-eps.json

and as the control, where the answer is known (ε* ∝ G/sqrt(n_in n_out)):

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/eps_threshold.py torch.optim.AdamW

``--sweep`` adds ``‖ΔW‖_R(ε) / ‖ΔW‖_R(reference)`` on a grid of ε (hidden role, rank 1,
G = 1): where the step departs from the small-ε step.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

import torch

from spectral.infer import (
    D0,
    G_SCALES,
    RANKS,
    WARMUP,
    _exponent,
    _fit_declaration,
    _Meter,
    declaration,
    load_target,
)

ROLES = ("input_weight", "hidden_weight", "output_weight")
HALF = math.log(2.0)


def threshold(meter: _Meter, key: str, ref: float, role: str, width: int, **kw: Any) -> float:
    """The ε above ``ref`` where ``|log(‖ΔW(ε)‖/‖ΔW(ref)‖)|`` reaches log 2: bracketed by
    decades, then bisected in log ε to 0.005 decades."""
    base = meter.measured(role, width, eps=(key, None, ref), **kw)

    def gap(log_eps: float) -> float:
        v = meter.measured(role, width, eps=(key, None, 10.0**log_eps), **kw)
        return abs(math.log(v / base)) - HALF

    lo = hi = math.log10(ref)
    while gap(hi) < 0:
        lo, hi = hi, hi + 1
        if hi > math.log10(ref) + 30:
            return math.nan
    while hi - lo > 0.005:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if gap(mid) < 0 else (lo, mid)
    return 10.0 ** ((lo + hi) / 2)


def fit(meter: _Meter, key: str, ref: float, widths: list[int]) -> dict[str, Any]:
    th: dict[str, list[list[float]]] = {}
    fits, gfits = {}, {}
    for role in ROLES:
        th[role] = [[threshold(meter, key, ref, role, w, rank=r) for w in widths] for r in RANKS]
        fits[role] = _exponent(widths, th[role])
    g_width = widths[1]
    g_curves = [
        [threshold(meter, key, ref * g, "hidden_weight", g_width, g=g, rank=r) for g in G_SCALES]
        for r in RANKS
    ]
    g_fit = _exponent(G_SCALES, g_curves)
    gfits = {role: g_fit for role in ROLES}
    exps, problems = _fit_declaration(fits, gfits, "ε*")
    expr = None if exps is None else declaration(exps["a"], exps["b"], exps["c"], exps["g"])
    return {
        "reference_eps": ref,
        "widths": widths,
        "ranks": list(RANKS),
        "thresholds": {
            r: {
                f"rank {k}": [float(f"{x:.4g}") for x in c]
                for k, c in zip(RANKS, th[r], strict=True)
            }
            for r in ROLES
        },
        "n": {r: fits[r].to_dict() for r in ROLES},
        "G": {
            "width": g_width,
            "G": list(G_SCALES),
            "thresholds": [[float(f"{x:.4g}") for x in c] for c in g_curves],
            "fit": g_fit.to_dict(),
        },
        "expression": expr,
        "problems": problems,
        "_text": {r: fits[r].text() for r in ROLES} | {"G": g_fit.text()},
    }


def sweep(meter: _Meter, key: str, ref: float, widths: list[int]) -> dict[str, Any]:
    grid = [10.0**e for e in range(-14, 3)]
    ratio = {}
    for w in widths:
        base = meter.measured("hidden_weight", w, eps=(key, None, ref))
        ratio[str(w)] = [
            round(meter.measured("hidden_weight", w, eps=(key, None, e)) / base, 6) for e in grid
        ]
    return {"role": "hidden_weight", "rank": 1, "G": 1.0, "eps": grid, "ratio": ratio}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("target", help="MODULE.CLASS, e.g. pytorch_optimizer.SOAP")
    p.add_argument("--eps", default="eps", help="the constructor argument holding ε")
    p.add_argument("--ref", type=float, help="reference ε (default: the constructor's default)")
    p.add_argument("--kwargs", default="{}", help="constructor arguments as JSON")
    p.add_argument("--widths", default="64,128,256")
    p.add_argument("--sweep", action="store_true", help="also the step ratio on an ε grid")
    p.add_argument("--json", help="write the result here")
    args = p.parse_args(argv)
    torch.set_num_threads(1)

    target = load_target(args.target, json.loads(args.kwargs))
    ref = (
        args.ref
        if args.ref is not None
        else float({**target.defaults(), **target.kwargs}[args.eps])
    )
    widths = [int(w) for w in args.widths.split(",")]
    meter = _Meter(target, D0, WARMUP)
    out = {"target": target.label, "eps_key": args.eps, **fit(meter, args.eps, ref, widths)}
    text = out.pop("_text")

    print(f"{target.label}: ε* ({args.eps}) where ‖ΔW‖_R has halved from its value at ε = {ref:g}")
    print(f"{'role':14} {'rank':5}" + "".join(f" n={w:<9}" for w in widths) + " exponent of n")
    for role in ROLES:
        for k, (rank, c) in enumerate(out["thresholds"][role].items()):
            row = "".join(f" {x:<11.4g}" for x in c)
            print(
                f"{role if k == 0 else '':14} {rank[5:]:5}{row}"
                + (f" {text[role]}" if k == 0 else "")
            )
    g = out["G"]
    print(
        f"hidden_weight, n = {g['width']}, G = {', '.join(map(str, g['G']))}: "
        f"ε* = {g['thresholds']} → exponent of G {text['G']}"
    )
    print(
        f"declaration: eps = {out['expression']}"
        + ("" if not out["problems"] else f" ({out['problems']})")
    )
    if args.sweep:
        out["sweep"] = sweep(meter, args.eps, ref, widths)
        print(f"‖ΔW‖_R(ε)/‖ΔW‖_R({ref:g}), hidden_weight, rank 1, G = 1:")
        print("ε     " + "".join(f" n={w:<7}" for w in widths))
        for i, e in enumerate(out["sweep"]["eps"]):
            row = "".join(f" {out['sweep']['ratio'][str(w)][i]:<9.4g}" for w in widths)
            print(f"1e{round(math.log10(e)):+03d} {row}")
    print(f"{meter.runs} optimizer runs", file=sys.stderr)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1, ensure_ascii=False)
            f.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
