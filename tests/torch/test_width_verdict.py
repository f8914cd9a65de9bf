"""The verdict across widths with seeds (issue 47, item 3): a group's line states the 95 %
interval of its slope over every member's per-seed slope, and no line is issued where
that interval spans the rule. Synthetic rows: the verdict is pure (slopes in, lines out)."""

from __future__ import annotations

import pytest

from spectral.torch.check.verdict import WidthRow, off_rules

WIDTHS = [64, 128, 256]


def _row(name: str, slopes: list[float]) -> WidthRow:
    """A hidden matrix whose one-step change goes as n^s for each seed's s (init flat)."""
    draws = [[(w / WIDTHS[0]) ** s for s in slopes] for w in WIDTHS]
    return WidthRow(
        name,
        "linear",
        "hidden_weight",
        init=[1.0] * len(WIDTHS),
        step=[sum(d) / len(d) for d in draws],
        total=[1.0] * len(WIDTHS),
        init_predicted=0.0,
        fan_in=WIDTHS,
        fan_out=WIDTHS,
        features=WIDTHS,
        init_draws=[[1.0] * len(slopes) for _ in WIDTHS],
        step_draws=draws,
    )


def test_draws_that_agree_off_the_rule_give_a_line_with_their_interval():
    rows = [_row(f"layers.{i}.up", [-0.40, -0.42, -0.38]) for i in range(2)]
    lines = off_rules(WIDTHS, rows)
    assert len(lines) == 1
    assert lines[0].startswith("layers.N.up (hidden_weight, 2 modules): one-step change ~ n^-0.40")
    assert "(over 6 draws: n^-0.40 [-0.42, -0.38], 95 %)" in lines[0]


def test_draws_that_span_the_rule_give_no_line():
    """The mean is off by more than the tolerance (-0.27), but one seed's slope says
    +0.30 and another's -0.80: the interval holds 0, so no verdict (a router's sign that
    flips between runs at one seed, issue 47)."""
    rows = [_row(f"layers.{i}.router", [0.30, -0.80, -0.30]) for i in range(2)]
    assert off_rules(WIDTHS, rows) == []


def test_one_seed_keeps_the_tolerance_verdict_and_states_no_interval():
    rows = [_row(f"layers.{i}.up", [-0.40]) for i in range(2)]
    lines = off_rules(WIDTHS, rows)
    assert len(lines) == 1 and "draws" not in lines[0]
    assert lines[0].startswith("layers.N.up (hidden_weight, 2 modules): one-step change ~ n^-0.40")


@pytest.mark.parametrize("slopes", [[-0.05, 0.02, 0.0], [0.1, 0.15, 0.12]])
def test_draws_within_the_tolerance_give_no_line(slopes):
    assert off_rules(WIDTHS, [_row("layers.0.up", slopes)]) == []
