"""The --fit-exponent report: exponents.json's verdict is exponents.md's, and a verdict that
rests on one seed says so (the fit again without each seed)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from spectral.measure.fit import fit_line
from spectral.sweep.exponent import AxisFit, FitKey


def _fit(optima_by_seed: list[list[float]], derived: float = -1.0):
    """An AxisFit over n = 32…256 (base 32) whose per-seed optima are given, fitted as fit_axis fits."""
    sizes, seeds = (32, 64, 128, 256), tuple(range(len(optima_by_seed)))
    optima = tuple(tuple((optima_by_seed[s][i], False) for s in seeds) for i in range(len(sizes)))
    xs = [math.log2(n / 32) for n in sizes for _ in seeds]
    line = fit_line(xs, [optima_by_seed[s][i] for i in range(len(sizes)) for s in seeds])
    losses = tuple(tuple((3.0, 3.0, 3.0) for _ in seeds) for _ in sizes)
    return AxisFit(
        FitKey("lr", "hidden_weight"),
        "width",
        sizes,
        32,
        (-1, 0, 1),
        seeds,
        -6,
        losses,
        optima,
        derived,
        line.slope,
        line.intercept,
        line.half_width,
    )


def _report(tmp_path: Path, fit, monkeypatch) -> tuple[dict, str]:
    """exponents.json's record and exponents.md's text (the plot left out: it is not what is tested)."""
    from spectral.sweep import exponent_report

    monkeypatch.setattr(exponent_report, "plot_fit", lambda fit, path, optimizer: path)

    settings = {
        "steps": 10,
        "batch_size": 2,
        "block_size": 8,
        "base_width": 32,
        "base_depth": 2,
        "head_dim": 16,
        "init_std": 0.02,
        "eps": 1e-16,
    }
    base = {"log2_lr": -6, "loss": 3.0, "log2_lrs": [-6], "tuned": None, "winner": None}
    tmp_path.mkdir(exist_ok=True)
    exponent_report.write_exponent_report(
        tmp_path, "adamw", [fit], settings=settings, base_choice=base, command=None, data=None
    )
    (record,) = json.loads((tmp_path / "exponents.json").read_text(encoding="utf-8"))["fits"]
    return record, (tmp_path / "exponents.md").read_text(encoding="utf-8")


def test_report_json_never_says_agrees_where_the_markdown_says_not_informative(
    tmp_path: Path, monkeypatch
):
    # the derived −1 lies in a ±0.5 interval: fit.verdict is "agrees", but that interval holds rules ½ off too
    fit = _fit([[0.0, 0.5, -0.5, 0.2], [0.4, -0.4, 0.6, -0.3]])
    assert fit.verdict == "agrees" and fit.half_width > 0.25
    record, text = _report(tmp_path, fit, monkeypatch)
    assert record["verdict"] == "not informative" and record["informative"] is False
    row = next(line for line in text.splitlines() if line.startswith("| `lr.hidden_weight`"))
    assert "**not informative** | not informative |" in row and "agrees" not in row


def test_report_names_the_seed_a_verdict_rests_on(tmp_path: Path, monkeypatch):
    # seeds 0 and 1 want the derived −1 (slope 0); seed 2 wants −0.6 (slope 0.4): together "agrees"
    # at ±0.22, but without seed 0 or without seed 1 the interval widens past ±0.25
    fit = _fit([[0.0, 0.02, -0.02, 0.0], [0.01, -0.01, 0.0, 0.02], [0.0, 0.4, 0.8, 1.2]])
    record, text = _report(tmp_path, fit, monkeypatch)
    assert record["verdict"] == "agrees" and record["measured"] == pytest.approx(-0.8667, abs=1e-4)
    without = record["without_one_seed"]
    assert [without[s]["verdict"] for s in ("0", "1", "2")] == [
        "not informative",
        "not informative",
        "agrees",
    ]
    assert [without[s]["changed"] for s in ("0", "1", "2")] == [True, True, False]
    assert without["2"]["measured"] == pytest.approx(-1.0, abs=1e-9)
    assert (
        "| agrees | **depends on one seed** (without seed 0: not informative; "
        "without seed 1: not informative) |"
    ) in text
    steady = _fit([[0.0, 0.02, -0.02, 0.0], [0.01, -0.01, 0.0, 0.02], [-0.01, 0.0, 0.01, -0.02]])
    record, text = _report(tmp_path / "steady", steady, monkeypatch)
    assert record["verdict"] == "agrees" and not any(
        w["changed"] for w in record["without_one_seed"].values()
    )
    assert "| agrees | holds |" in text
