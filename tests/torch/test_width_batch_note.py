"""The check across widths names a large example batch behind a hidden role's lines.

Under a sign-like first step (AdamW's ``m̂/sqrt(v̂)`` is ``sign(g)``) a hidden matrix moves
``W x`` by a part aligned with the batch's T tokens, Theta(1), and one that is not,
~ n^-1/2, which dominates while the width is below about (pi/2) T (docs/your-model.md, "Why
the AdamW control is off"). Measuring it takes twins too slow for a test (tests/families/
traced_slopes.py shows it on the Llama control); here the decision is fed values: the note
comes only with a shrinking hidden_weight row, a sign-like optimizer on that role and more
tokens than the narrowest width.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from spectral.torch.check.verdict import WidthRow, batch_note  # noqa: E402
from spectral.torch.check.widths import batch_tokens  # noqa: E402

WIDTHS = [64, 128, 256]
ADAMW = {"hidden_weight": "adamw", "output_weight": "adamw"}
MUON = {"hidden_weight": "muon-kimi", "output_weight": "adamw"}


def row(step_slope: float, role: str = "hidden_weight", fan_in=(64, 128, 256)) -> WidthRow:
    """A weight row whose one-step change has slope ``step_slope``, as off_rules leaves it."""
    return WidthRow(
        "model.layers.0.mlp.up_proj",
        "linear",
        role,
        fan_in=list(fan_in),
        fan_out=[2 * w for w in WIDTHS],
        step_slope=step_slope,
    )


def test_note_for_a_large_batch_under_adamw():
    """The Llama control's 8 x 32 batch at widths 64-256: one line, with its numbers."""
    assert batch_note(256, WIDTHS, [row(-0.26)], ADAMW) == (
        "the example batch has 256 tokens, more than the narrowest width checked (64): role "
        "hidden_weight steps with adamw, whose first step is sign-like, and its part not "
        "aligned with the batch's tokens shrinks the one-step change as n^-1/2 while the "
        "width is below about (pi/2) T = 402: re-run the check with fewer tokens (e.g. the "
        "default 2 x 8) before changing the role of the hidden_weight lines"
    )
    assert "steps with lion," in batch_note(65, WIDTHS, [row(-0.3)], {"hidden_weight": "lion"})


@pytest.mark.parametrize(
    ("tokens", "rows", "optimizers"),
    [
        (8, [row(-0.26)], ADAMW),  # fewer tokens than the narrowest width
        (64, [row(-0.26)], ADAMW),  # as many: not more
        (None, [row(-0.26)], ADAMW),  # no tensor in the example batch
        (256, [row(-0.26)], MUON),  # Muon's step is an isometry on the tokens' inputs
        (256, [row(-0.26)], {"hidden_weight": "radam"}),  # momentum, not sign, at first
        (256, [row(-0.1)], ADAMW),  # within the tolerance: no line to explain
        (256, [row(0.3)], ADAMW),  # growing: not what the batch does
        (256, [row(-0.3, role="output_weight")], ADAMW),  # not a hidden role
        (256, [row(-0.3, fan_in=(8, 8, 8))], ADAMW),  # its own dimensions are the cause
    ],
)
def test_no_note_otherwise(tokens, rows, optimizers):
    assert batch_note(tokens, WIDTHS, rows, optimizers) is None


def test_batch_tokens_are_the_leading_dimensions():
    """Token ids: every dimension; a float input: all but its features; a dict: its
    input_ids first; nothing without a tensor."""
    ids = torch.zeros(8, 32, dtype=torch.long)
    assert batch_tokens(ids) == 256
    assert batch_tokens({"labels": ids[:1], "input_ids": ids}) == 256
    assert batch_tokens({"attention_mask": ids[:2]}) == 64
    assert batch_tokens((torch.zeros(4, 10, 16),)) == 40
    assert batch_tokens(torch.zeros(2, 16)) == 2
    assert batch_tokens(None) is None
    assert batch_tokens({"x": [1, 2]}) is None


def test_check_widths_adds_the_note_after_its_lines(monkeypatch):
    """check_widths passes the user's batch and the role's optimizer to batch_note: the
    twins' rows stand in (a hidden matrix whose one-step change goes as n^-0.3)."""
    from types import SimpleNamespace

    import spectral.torch.check.widths as widths

    def rows(rules, placement, factory, mult, example, base, seeds, progress):
        progress.measured += progress.sizes
        return [
            {
                "up": WidthRow(
                    "up",
                    "linear",
                    "hidden_weight",
                    init=[1.0],
                    step=[w**-0.3],
                    init_predicted=0.0,
                    fan_in=[w],
                    fan_out=[w],
                )
            }
            for w in progress.sizes
        ]

    monkeypatch.setattr(widths, "_measure_widths", rows)
    # what widths_report reads of the rules and the placement besides: nothing to say here
    monkeypatch.setattr(widths, "_checked_values", lambda *args: None)
    monkeypatch.setattr(widths, "fixed_rank_notes", lambda placement: [])
    model, base = torch.nn.Linear(2, 2), {"lr": 1e-2}
    for tokens, optimizer, notes in ((256, "adamw", 1), (8, "adamw", 0), (256, "muon", 0)):
        rules = SimpleNamespace(optimizers={"hidden_weight": optimizer}, absorbed=None)
        ids = torch.zeros(tokens, dtype=torch.long)
        placed = SimpleNamespace(model=model)  # what widths_report reads of a placement
        problems = widths.widths_report(rules, placed, WIDTHS, example_input=ids, base=base).problems
        assert problems[0].startswith("up (hidden_weight): one-step change ~ n^-0.30")
        assert len(problems) == 1 + notes
        assert problems[-1].startswith("the example batch has 256 tokens") == bool(notes)
