"""spectral.sweep.coordinate: coordinate steps loop until no knob moves, extend past edges (a
one-point grid is one), and name what they could not close as bounds."""

from __future__ import annotations

import math

import pytest

from spectral.sweep.coordinate import Knob, coordinate_search


def bowl(p: dict[str, float], c: float = 0.8) -> float:
    """A coupled bowl, minimum at (4, −3): coordinate steps need more than one round."""
    x, y = p["a"] - 4, p["y"] + 3
    return x * x + y * y + c * x * y


def test_loops_until_no_knob_moves():
    calls: list[dict[str, float]] = []

    def f(p: dict[str, float]) -> float:
        calls.append(p)
        return bowl(p)

    s = coordinate_search([Knob("a", (-1, 0, 1)), Knob("y", (-1, 0, 1))], {"a": 0, "y": 0}, f)
    assert s.converged and s.point == {"a": 4.0, "y": -3.0} and s.bounds == ()
    assert s.loss == 0.0
    last = max(st.round for st in s.steps)
    assert last >= 3 and not any(st.moved for st in s.steps if st.round == last)
    assert any(st.knob == "a" and st.moved and st.round >= 2 for st in s.steps)  # re-tuned after y moved
    assert s.evaluated == len(calls) == len({tuple(sorted(c.items())) for c in calls})  # each point once


def test_coordinate_steps_are_not_a_joint_search():
    """With strong coupling, steps on a grid stop where no single knob improves, above the joint
    minimum (loss 0). The module's docstring says so; a joint search is the only fix."""
    s = coordinate_search([Knob("a", (-1, 0, 1)), Knob("y", (-1, 0, 1))], {"a": 0, "y": 0},
                          lambda p: bowl(p, 1.2))
    assert s.converged and s.loss > 0.0


def test_an_edge_is_extended_until_inside():
    s = coordinate_search([Knob("log2 η", (-8, -7, -6))], {"log2 η": -7}, lambda p: (p["log2 η"] + 3) ** 2)
    assert s.point == {"log2 η": -3.0} and s.converged and s.bounds == ()
    assert s.steps[0].edge == "high" and s.steps[0].tried == (-8, -7, -6, -5, -4, -3)


def test_what_is_not_closed_is_a_bound():
    s = coordinate_search([Knob("log2 η", (-8, -7, -6))], {"log2 η": -7}, lambda p: (p["log2 η"] + 3) ** 2,
                          max_rounds=1, max_extend=1)
    assert s.point == {"log2 η": -5.0} and not s.converged
    assert s.bounds == ("log2 η: the winner is on the high edge of what was tried after 1 extensions",
                        "stopped after 1 rounds with knobs still moving")


def test_a_one_point_grid_is_an_edge():
    s = coordinate_search([Knob("output", (2,))], {"output": 2}, lambda p: (p["output"] - 2.2) ** 2)
    assert s.steps[0].tried == (1, 2, 3) and s.point == {"output": 2.0} and s.bounds == ()
    s = coordinate_search([Knob("output", (2,))], {"output": 2}, lambda p: 1.0, max_extend=0)
    assert s.bounds[0] == "output: tried at one value"


def test_diverged_points_never_win():
    s = coordinate_search([Knob("log2 η", (-2, -1, 0))], {"log2 η": -1},
                          lambda p: math.nan if p["log2 η"] >= 0 else -p["log2 η"])
    assert s.point == {"log2 η": -1.0} and s.loss == 1.0


@pytest.mark.parametrize("knobs, start, match", [
    ([Knob("a", (0,)), Knob("a", (1,))], {"a": 0}, "named twice"),
    ([Knob("a", (0,))], {}, "no start value for a"),
])
def test_bad_input(knobs, start, match):
    with pytest.raises(ValueError, match=match):
        coordinate_search(knobs, start, lambda p: 0.0)
