"""SP's re-tuned cell on the edge of its grid is marked a bound in summary.md (issue 35)."""

from __future__ import annotations

from types import SimpleNamespace

from spectral.sweep.report import retuned_edges

ALPHA = SimpleNamespace(
    keys=("output",),
    candidates=tuple({"output": v} for v in (1.0, 4.0, 16.0, 32.0, 64.0)),
    log2_lrs=(-9, -8, -7, -6, -5, -4, -3),
)


def test_a_tuned_value_or_eta_on_the_edge_is_named():
    # docs/sweep/tuned/muon-kimi+adamw at n = 256: α_out 1, the smallest tried
    assert retuned_edges("output=1, log2 η -7", ALPHA) == ["output"]
    assert retuned_edges("output=64, log2 η -3", ALPHA) == ["output", "log2 η"]
    assert retuned_edges("output=4, log2 η -9", ALPHA) == ["log2 η"]
    assert retuned_edges("output=4, log2 η -6", ALPHA) == []  # inside both grids
    assert retuned_edges("", ALPHA) == []


def test_two_keys_and_a_single_value_grid():
    both = SimpleNamespace(
        keys=("output", "init.hidden_weight"),
        candidates=tuple(
            {"output": a, "init.hidden_weight": s} for a in (0.5, 1.0) for s in (1.0, 2.0, 4.0)
        ),
        log2_lrs=(-8,),
    )
    # α_out has two values (both edges); σ's 2 is inside; one η is no grid to be on the edge of
    assert retuned_edges("output=0.5,init.hidden_weight=2, log2 η -8", both) == ["output"]
    assert retuned_edges("output=1,init.hidden_weight=4, log2 η -8", both) == [
        "output",
        "init.hidden_weight",
    ]


def test_the_rendered_table_marks_the_bound():
    from spectral.sweep.report import render_retuned_markdown
    from spectral.sweep.retune import RetunedRow

    choice = SimpleNamespace(**vars(ALPHA), chosen={"output": 4.0})
    row = RetunedRow("width", 256, 2.452, 2.316, "output=1, log2 η -7", (2.325, 2.307), 2.315, True)
    inside = RetunedRow(
        "width", 64, 2.472, 2.472, "output=4, log2 η -6", (2.484, 2.460), 2.451, True
    )
    text = render_retuned_markdown([row, inside], choice, (0, 1))
    assert "| output=1, log2 η -7 (**edge**: output; a bound) | 2.325 / 2.307 |" in text
    assert "| output=4, log2 η -6 | 2.484 / 2.460 |" in text
