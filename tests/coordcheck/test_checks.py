"""coord-check and probe: slope fitting on synthetic data, JSON shapes on tiny fast runs."""

from __future__ import annotations

import json
import math

import pytest

from spectral.coordcheck import (
    SLOPE_TOLERANCE_COORD,
    aggregate,
    compute_slopes,
    divergence_text,
    diverged,
    judge,
    slope_passes,
)
from spectral.measure.fit import fit_line, log_slope, loggable


@pytest.mark.parametrize("exponent", [-1.0, -0.5, 0.0, 0.25, 1.5])
def test_fit_slope_recovers_power_law(exponent):
    xs = [16, 32, 64, 128, 256]
    ys = [3.0 * x**exponent for x in xs]
    assert log_slope(xs, ys) == pytest.approx(exponent, abs=1e-9)
    c = fit_line([math.log(x) for x in xs], [math.log(y) for y in ys]).intercept
    assert math.exp(c) == pytest.approx(3.0)


def test_fit_slope_with_multiplicative_noise():
    xs = [2**i for i in range(2, 10)]
    wiggle = [1.05, 0.95, 1.02, 0.98, 1.04, 0.96, 1.01, 0.99]
    slope = log_slope(xs, [x**0.5 * w for x, w in zip(xs, wiggle, strict=True)])
    assert slope is not None and abs(slope - 0.5) < 0.03


def test_fit_slope_degenerate_and_divergent_points():
    assert log_slope([4], [1.0]) is None
    assert log_slope([4, 4], [1.0, 2.0]) is None
    # diverged (inf / nan / non-positive) points have no slope; the coordinate check drops them
    assert log_slope([1, 2, 4, 8], [1.0, 2.0, math.inf, 8.0]) is None
    assert log_slope(*loggable([1, 2, 4, 8], [1.0, 2.0, math.inf, 8.0])) == pytest.approx(1.0)
    assert log_slope(*loggable([1, 2], [math.nan, 0.0])) is None


def test_pass_rule():
    tol = SLOPE_TOLERANCE_COORD
    assert slope_passes(0.0) and slope_passes(tol) and slope_passes(-tol)
    assert not slope_passes(tol + 1e-6)
    assert not slope_passes(math.nan)
    assert aggregate([1.0, 3.0]) == 2.0
    assert aggregate([1.0, math.nan]) == math.inf


def _points():
    pts = []
    for param, e in (("sp", 1.0), ("mup", 0.0)):
        for axis in ("width", "depth"):
            for x in (16, 32, 64):
                for seed in (0, 1):
                    for step in (0, 1):
                        w, d = (x, 2) if axis == "width" else (16, x)
                        pts.append(
                            {
                                "parameterization": param,
                                "axis": axis,
                                "width": w,
                                "depth": d,
                                "seed": seed,
                                "step": step,
                                "h": 2.0 * x**e,
                                "delta_h": (x**e) * step,
                            }
                        )
    return pts


def test_compute_slopes_last_step():
    slopes = compute_slopes(_points())
    assert len(slopes) == 2 * 2 * 2
    by = {(s["parameterization"], s["axis"], s["metric"]): s for s in slopes}
    assert by[("sp", "width", "h")]["slope"] == pytest.approx(1.0)
    assert by[("sp", "depth", "delta_h")]["pass"] is False
    assert by[("mup", "depth", "delta_h")]["slope"] == pytest.approx(0.0)
    assert by[("mup", "width", "h")]["pass"] is True
    assert all(s["step"] == 1 for s in slopes)


def _blow(points, param, metric, value):
    """``points`` with ``metric`` set to ``value`` at the last step of width 64, seed 0."""
    return [
        dict(p, **{metric: value})
        if (p["parameterization"], p["axis"], p["width"], p["seed"], p["step"]) == (param, "width", 64, 0, 1)
        else p
        for p in points
    ]


def test_judge_fails_a_diverged_mup_run_and_only_notes_sp():
    """Issue 30: a μP run whose loss or activations went NaN or inf fails the check and is
    named; sp beside μP is the comparison (it blows up at large sizes by design)."""
    clean = judge(_points())
    assert clean["pass"] is True and clean["diverged"] is None
    where = {"axis": "width", "width": 64, "depth": 2, "seed": 0, "step": 1}
    mup = judge(_blow(_points(), "mup", "loss", math.nan))
    assert mup["pass"] is False
    assert mup["diverged"] == {"parameterization": "mup", **where, "metric": "loss", "value": "NaN"}
    assert divergence_text(mup["diverged"]) == "diverged at step 1 (mup, n = 64, L = 2, seed 0): the loss is NaN"
    sp_points = _blow(_points(), "sp", "h", math.inf)
    sp = judge(sp_points)
    assert sp["pass"] is True and sp["diverged"] is None
    assert diverged(sp_points) == {"parameterization": "sp", **where, "metric": "h", "value": "inf"}
    only_sp = judge([p for p in sp_points if p["parameterization"] == "sp"])
    assert only_sp["pass"] is None and only_sp["diverged"]["metric"] == "h"
    # read back from JSON, NaN and inf are both null
    assert diverged(_blow(_points(), "mup", "out", None))["value"] is None


# --------------------------------------------------------------------------------------
# torch runs (tiny)
# --------------------------------------------------------------------------------------

torch = pytest.importorskip("torch")


def _main(argv):
    from spectral.cli import main

    return main(argv)


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_coord_check_json_shape(tmp_path):
    out = tmp_path / "cc.json"
    rc = _main(
        [
            "coord-check",
            "--widths",
            "16,32",
            "--depths",
            "1,2",
            "--steps",
            "2",
            "--seeds",
            "1",
            "--json",
            str(out),
            "--plots",
            str(tmp_path),
            "--quiet",
        ]
    )
    assert rc == 0
    data = json.loads(out.read_text())
    assert data["config"]["model"] == "mlp" and data["config"]["steps"] == 2
    keys = {(s["parameterization"], s["axis"], s["metric"]) for s in data["slopes"]}
    assert keys == {
        (p, a, m)
        for p in ("sp", "mup-k1", "mup")
        for a in ("width", "depth")
        for m in ("h", "delta_h")
    }
    for s in data["slopes"]:
        assert {"parameterization", "axis", "metric", "slope", "pass"} <= set(s)
        assert isinstance(s["pass"], bool)
        assert s["slope"] is None or isinstance(s["slope"], float)
    # every point: 3 parameterizations x (2 widths + 2 depths) x 1 seed x 3 steps (0, 1, 2)
    assert len(data["points"]) == 3 * 4 * 1 * 3
    p0 = data["points"][0]
    assert {
        "parameterization",
        "axis",
        "width",
        "depth",
        "seed",
        "step",
        "h",
        "delta_h",
        "out",
    } <= set(p0)
    assert p0["step"] == 0 and p0["delta_h"] == 0.0
    assert (tmp_path / "mlp-adamw-width.png").stat().st_size > 0
    assert (tmp_path / "mlp-adamw-depth.png").stat().st_size > 0


def test_coord_check_gpt_hybrid_runs(tmp_path):
    out = tmp_path / "gpt.json"
    rc = _main(
        [
            "coord-check",
            "--model",
            "gpt",
            "--optimizer",
            "muon-kimi",
            "--widths",
            "64,128",
            "--depths",
            "1,2",
            "--steps",
            "1",
            "--seeds",
            "1",
            "--seq-len",
            "8",
            "--batch",
            "2",
            "--parameterizations",
            "mup",
            "--json",
            str(out),
            "--quiet",
        ]
    )
    assert rc == 0
    data = json.loads(out.read_text())
    assert data["config"]["others"] == "adamw"
    assert {s["parameterization"] for s in data["slopes"]} == {"mup"}


def test_coord_check_sp_is_base_everywhere():
    """sp: every ratio 1 — base multipliers (α_base on the blocks) and base lr everywhere."""
    from spectral.coordcheck import CoordCheckConfig, build

    cfg = CoordCheckConfig(widths=(16, 64), depths=(1, 4))
    s = build(cfg, "sp", 64, 4, seed=0)
    assert cfg.alpha == 0.5  # the MLP's default α_base
    assert (s.model.alpha_input, s.model.alpha_hidden, s.model.alpha_output) == (1.0, cfg.alpha, 1.0)
    assert {h["lr"] for h in s.hparams.values()} == {cfg.main_lr()}
    m = build(cfg, "mup", 64, 4, seed=0)  # adamw, k=2: α_hidden ∝ 1/r_L, α_out ∝ 1/r_n
    assert m.model.alpha_hidden == pytest.approx(cfg.alpha / 4)
    assert m.model.alpha_output == pytest.approx(1 / 4)
    assert m.hparams["blocks.0.layers.0.weight"]["lr"] == pytest.approx(cfg.main_lr() / 4)


def test_probe_json_shape(tmp_path):
    out = tmp_path / "probe.json"
    rc = _main(["probe", "adamw", "--widths", "64,128", "--json", str(out), "--quiet"])
    data = json.loads(out.read_text())
    assert data["optimizer"] == "adamw"
    roles = [r["role"] for r in data["rows"]]
    assert roles == ["input_weight", "hidden_weight", "output_weight", "input_bias", "hidden_bias"]
    for r in data["rows"]:
        assert {"role", "declared", "measured", "pass"} <= set(r)
        assert isinstance(r["pass"], bool)
    assert rc == 0 and all(r["pass"] for r in data["rows"])


def test_probe_muon_kimi_matches_declaration():
    from spectral.measure.probe import probe

    res = probe("muon-kimi", widths=(64, 128))
    assert [r.role for r in res.rows] == ["input_weight", "hidden_weight", "output_weight"]
    assert res.passed, [(r.role, r.declared, r.measured) for r in res.rows]


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_coord_check_creates_the_plots_folder_and_refuses_empty_paths(tmp_path, capsys):
    pytest.importorskip("torch")
    from spectral.cli import main

    tiny = ["coord-check", "--widths", "32,64", "--depths", "1,2", "--steps", "1", "--seeds", "1",
            "--parameterizations", "mup", "--quiet"]
    plots = tmp_path / "new" / "plots"
    assert main([*tiny, "--plots", str(plots)]) == 0
    assert sorted(p.name for p in plots.iterdir()) == ["mlp-adamw-depth.png", "mlp-adamw-width.png"]
    capsys.readouterr()
    for option in ("--json", "--plots"):
        assert main([*tiny, option, ""]) == 2
        assert capsys.readouterr().err == f"error: {option}: empty path\n"
    blocker = tmp_path / "file"
    blocker.write_text("keep")
    assert main([*tiny, "--plots", str(blocker)]) == 2
    assert "exists and is not a folder" in capsys.readouterr().err
    assert blocker.read_text() == "keep"
    assert main(["probe", "adamw", "--json", ""]) == 2
