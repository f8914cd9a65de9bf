"""spectral.sweep.optimum: the base optimum fitted by a per-knob parabola, so that a near-tie on
the grid does not decide the winner; and the edges of a search (a one-point grid is one)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spectral.sweep.optimum import fit_optimum, parabola_vertex
from spectral.sweep.tune import Choice


@settings(max_examples=100, deadline=None)
@given(st.floats(0.1, 5), st.floats(-3, 3), st.floats(-2, 2),
       st.lists(st.integers(-8, 8), min_size=3, max_size=7, unique=True))
def test_vertex_of_an_exact_parabola(a: float, v: float, c: float, half_steps: list[int]):
    xs = [h / 2 for h in half_steps]  # log2 grids: values half a step apart or more
    ys = [a * (x - v) ** 2 + c for x in xs]
    assert parabola_vertex(xs, ys) == pytest.approx(v, abs=1e-6)


def test_no_vertex_without_curvature_or_points():
    assert parabola_vertex([0.0, 1.0, 2.0], [0.0, 1.0, 0.0]) is None  # concave
    assert parabola_vertex([0.0, 1.0, 2.0], [0.0, 1.0, 2.0]) is None  # a line
    assert parabola_vertex([0.0, 0.0, 1.0], [1.0, 1.0, 0.0]) is None  # two distinct x


def _choice(mean_rows, seed_rows, lrs=(-7, -6, -5, -4, -3), keys=(), cands=None):
    cands = cands or [{}]
    best = []
    for r in mean_rows:
        fin = [(v, j) for j, v in enumerate(r) if isinstance(v, float)]
        best.append(min(fin)[1] if fin else None)
    winner = min((mean_rows[i][j], i) for i, j in enumerate(best) if j is not None)[1]
    return Choice(tuple(keys), tuple(cands), tuple(lrs), tuple(range(len(seed_rows[0]))),
                  tuple(tuple(r) for r in mean_rows), tuple(tuple(tuple(s) for s in c) for c in seed_rows),
                  winner, tuple(best))


def test_a_near_tie_is_decided_by_the_fit():
    """The argmin (−5) beats −4 by 0.0002, but the loss around them rises faster on −5's side:
    the parabola's vertex (≈ −4.4) is nearer −4, which wins."""
    mean = [3.000, 2.800, 2.6002 - 0.0004, 2.6000, 2.700]  # −5: 2.5998, −4: 2.6000
    seeds = [[m + d for m in mean] for d in (-0.01, 0.0, 0.01)]
    grid = _choice([mean], [seeds])
    assert grid.best_col[0] == 2  # the argmin, −5
    opt = fit_optimum(grid)
    assert opt is not None and opt.moved and opt.col == 3
    eta = opt.fits[0]
    assert -4.5 < eta.vertex < -4.0 and eta.chosen == -4.0 and eta.argmin == -5.0
    assert eta.interval is not None and eta.interval[0] <= eta.vertex <= eta.interval[1]


def test_choose_rules_from_records():
    """choose(rule='fit') runs the winner at the fitted η; rule='argmin' keeps the grid's argmin."""
    from dataclasses import replace

    mean = [3.000, 2.800, 2.5998, 2.6000, 2.700]
    grid = _choice([mean], [[[m + d for m in mean] for d in (-0.01, 0.0, 0.01)]])
    opt = fit_optimum(grid)
    assert opt is not None
    fitted = replace(grid, col=opt.col, optimum=opt, rule="fit")
    assert fitted.winner_log2_lr == -4 and fitted.moved
    assert fitted.argmin_label() == "base, log2 η -5" and fitted.fitted_label() == "base, log2 η -4"
    kept = replace(grid, optimum=opt, rule="argmin")
    assert kept.winner_log2_lr == -5 and kept.as_json()["rule"] == "argmin"
    assert kept.as_json()["fit"][0].startswith("log2 η: argmin -5, fitted -4.")


def test_argmin_on_the_edge_is_kept_and_named():
    mean = [2.5, 2.6, 2.7, 2.8, 2.9]
    grid = _choice([mean], [[mean, mean]])
    opt = fit_optimum(grid)
    assert opt is not None and not opt.moved
    assert "edge" in opt.fits[0].why
    assert grid.edges() == ["the winner's best log2 η (-7) is at the edge of --log2-lrs"]


def test_one_point_grids_are_edges():
    cands = [{"output": 4.0}]
    grid = _choice([[2.5]], [[[2.5], [2.6]]], lrs=(-6,), keys=("output",), cands=cands)
    opt = fit_optimum(grid)
    assert opt is not None and not opt.moved
    assert [f.why for f in opt.fits] == ["one value tried: an edge", "one value tried: an edge"]
    assert grid.edges() == ["output=4 is the only value tried; not searched, a bound",
                            "log2 η (-6) is the only value of --log2-lrs; not searched, a bound"]


def test_a_tuned_key_is_fitted_in_log2():
    """α ∈ {1, 2, 4, 8, 16} with its minimum between 4 and 8, nearer 8: the fit moves α to 8."""
    alphas = [1.0, 2.0, 4.0, 8.0, 16.0]
    # 0.1 (log2 α − 2.7)² with α = 4 lowered by 0.045: the grid's argmin by 0.005, below seed noise
    base = [0.1 * ((k - 2.7) ** 2) for k in range(5)]
    base[2] -= 0.045
    rows = [[2.0 + b + 0.5, 2.0 + b, 2.0 + b + 0.4] for b in base]  # η −7..−5: −6 best for every α
    seeds = [[[v + d for v in r] for d in (-0.01, 0.01)] for r in rows]
    grid = _choice(rows, seeds, lrs=(-7, -6, -5), keys=("output",), cands=[{"output": a} for a in alphas])
    assert grid.winner == 2
    opt = fit_optimum(grid)
    assert opt is not None
    alpha = opt.fits[1]
    assert alpha.knob == "output" and alpha.argmin == 2.0 and 2.5 < alpha.vertex < 3.0 and alpha.chosen == 3.0
    assert opt.winner == 3 and opt.col == 1


def test_doctests():
    import doctest

    import spectral.sweep.optimum as mod

    failures, tried = doctest.testmod(mod)
    assert failures == 0 and tried >= 2
