"""Measured exponents (--fit-exponent) and per-role init std (--init-scale, --tune init.ROLE)."""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spectral.sweep.exponent import (
    FitKey,
    derived_exponent,
    fit_axis,
    fit_configs,
    optimum,
    parse_fit_key,
    with_factor,
)
from spectral.measure.fit import fit_line, t_quantile
from spectral.sweep.options import SweepConfig
from spectral.sweep.tune import apply, candidates

GRID = (-2, -1, 0, 1, 2)
RULES = {"hidden_weight": {"lr": (-1.0, 0.0), "init_var": (-1.0, 0.0), "multiplier": (0.0, -1.0)},
         "output_weight": {"lr": (0.0, 0.0), "init_var": (0.0, 0.0), "multiplier": (-1.0, 0.0)}}

# --------------------------------------------------------------------------------------
# the pieces (pure)
# --------------------------------------------------------------------------------------


def test_parse_fit_key():
    assert parse_fit_key("lr.hidden_weight") == FitKey("lr", "hidden_weight")
    assert parse_fit_key(" Init.Hidden_Weight ") == FitKey("init", "hidden_weight")
    assert parse_fit_key("multiplier.output").role == "output_weight"
    for bad in ("hidden_weight", "lr.", "wd.hidden_weight", "lr.a.b", "lr.x=2", ""):
        with pytest.raises(argparse.ArgumentTypeError, match="expected lr.ROLE"):
            parse_fit_key(bad)


def test_with_factor_multiplies_on_top_of_the_config():
    cfg = SweepConfig(lr_scale={"hidden_weight": 0.5}, multiplier={"output": 4.0})
    assert with_factor(cfg, FitKey("lr", "hidden_weight"), 2.0).lr_scale == {"hidden_weight": 1.0}
    assert with_factor(cfg, FitKey("lr", "input_weight"), 4.0).lr_scale == {"hidden_weight": 0.5, "input_weight": 4.0}
    assert with_factor(cfg, FitKey("init", "hidden_weight"), 2.0).init_scale == {"hidden_weight": 2.0}
    assert with_factor(cfg, FitKey("multiplier", "output"), 0.5).multiplier == {"output": 2.0}
    assert with_factor(SweepConfig(multiplier=3.0), FitKey("multiplier", "output"), 2.0).multiplier == \
        {"default": 3.0, "output": 6.0}


def test_derived_exponent_reads_the_rule_and_halves_a_variance():
    assert derived_exponent(RULES, FitKey("lr", "hidden_weight"), "width") == -1.0
    assert derived_exponent(RULES, FitKey("init", "hidden_weight"), "width") == -0.5
    assert derived_exponent(RULES, FitKey("multiplier", "hidden"), "depth") == -1.0
    assert derived_exponent(RULES, FitKey("multiplier", "output"), "width") == -1.0


@given(st.floats(-1.4, 1.4), st.floats(0.1, 5.0), st.floats(-3.0, 3.0))
def test_optimum_finds_a_parabola_vertex_exactly(x0: float, a: float, c: float):
    losses = [a * (e - x0) ** 2 + c for e in GRID]
    best, edge = optimum(GRID, losses)
    assert not edge
    assert best == pytest.approx(x0, abs=1e-9)


def test_optimum_flags_the_edge_and_skips_diverged_neighbours():
    assert optimum(GRID, [1.0, 2.0, 3.0, 4.0, 5.0]) == (-2.0, True)
    assert optimum(GRID, [5.0, 4.0, 3.0, 2.0, 1.0]) == (2.0, True)
    assert optimum(GRID, [5.0, 4.0, 1.0, math.inf, 1.5]) == (0.0, False)
    assert optimum(GRID, [math.inf] * 5) is None
    # a tie with the right neighbour: the vertex is kept within half a step of the best point
    assert optimum(GRID, [2.0, 1.0, 1.0, 1.0, 2.0]) == (-0.5, False)


@pytest.mark.parametrize("df, q", [(1, 12.706), (2, 4.303), (4, 2.776), (10, 2.228), (30, 2.042)])
def test_t_quantile_matches_the_tables(df: int, q: float):
    assert t_quantile(df) == pytest.approx(q, abs=2e-3)


def test_linear_fit_agrees_with_statistics_and_its_interval_covers():
    xs = [0.0, 0.0, 1.0, 1.0, 2.0, 2.0]
    ys = [0.1, -0.2, 0.9, 1.2, 2.1, 1.8]
    line = fit_line(xs, ys)
    slope, intercept, half = line.slope, line.intercept, line.half_width
    ref = statistics.linear_regression(xs, ys)
    assert slope == pytest.approx(ref.slope)
    assert intercept == pytest.approx(ref.intercept)
    assert half is not None and 0 < half < 1
    exact = fit_line([0.0, 1.0, 2.0], [0.0, 2.0, 4.0])
    assert (exact.slope, exact.intercept, exact.half_width) == pytest.approx((2.0, 0.0, 0.0))
    assert fit_line([0.0, 1.0], [0.0, 1.0]).half_width is None
    with pytest.raises(ValueError, match="two distinct sizes"):
        fit_line([1.0, 1.0], [0.0, 1.0])


# --------------------------------------------------------------------------------------
# fit_axis on synthetic runs: the slope it recovers is the one put in
# --------------------------------------------------------------------------------------


def _records(cfg: SweepConfig, key: FitKey, slope_of, log2_lr: int = -6, seeds=(0, 1), diverge=()):
    """Runs whose loss is a parabola in log2 factor centred at ``slope_of(size, seed)``."""
    out = []
    for e, s, c in fit_configs(cfg, key, GRID, seeds, log2_lr):
        for axis in ("width", "depth"):
            for width, depth in cfg.sizes(axis):
                r = math.log2(width / cfg.base_width) if axis == "width" else math.log2(depth / cfg.base_depth)
                centre = slope_of(r, s)
                bad = (width, depth, e) in diverge
                out.append({"optimizer": cfg.optimizer, "parameterization": "mup", "log2_lr": log2_lr,
                            "width": width, "depth": depth, "settings": c.settings(), "diverged": bad,
                            "val_loss": None if bad else 3.0 + 0.1 * (e - centre) ** 2})
    return out


CFG = SweepConfig(optimizer="adamw", widths=(32, 64, 128, 256), depths=(2, 4, 8), width=32)


@settings(max_examples=25, deadline=None)
@given(st.floats(-0.6, 0.6), st.floats(-0.3, 0.3))
def test_fit_axis_recovers_the_slope(slope: float, offset: float):
    key = FitKey("lr", "hidden_weight")
    recs = _records(CFG, key, lambda r, s: offset + slope * r / 3 + (0.05 if s else -0.05))
    fit = fit_axis(recs, CFG, key, "width", GRID, (0, 1), -6, RULES)
    assert fit.complete
    assert fit.slope == pytest.approx(slope / 3, abs=1e-9)
    assert fit.measured == pytest.approx(-1.0 + slope / 3, abs=1e-9)
    lo, hi = fit.interval
    assert lo < fit.measured < hi
    assert fit.verdict == ("agrees" if lo <= -1.0 <= hi else "differs")


def test_fit_axis_verdicts():
    key = FitKey("lr", "hidden_weight")
    noise = {0: 0.1, 1: -0.1}
    agrees = fit_axis(_records(CFG, key, lambda r, s: noise[s]), CFG, key, "width", GRID, (0, 1), -6, RULES)
    assert agrees.verdict == "agrees" and agrees.slope == pytest.approx(0.0, abs=1e-9)
    differs = fit_axis(_records(CFG, key, lambda r, s: 0.4 * r + noise[s] * 0.1), CFG, key, "width", GRID, (0, 1),
                       -6, RULES)
    assert differs.verdict == "differs" and differs.measured == pytest.approx(-0.6, abs=1e-6)
    edge = fit_axis(_records(CFG, key, lambda r, s: 3.0 * r), CFG, key, "width", GRID, (0, 1), -6, RULES)
    assert edge.verdict == "edge" and "n=256 seed 0" in edge.edges
    some = [r for r in _records(CFG, key, lambda r, s: 0.0) if r["width"] != 64 or r["settings"]["seed"] != 1]
    missing = fit_axis(some, CFG, key, "width", GRID, (0, 1), -6, RULES)
    assert missing.verdict == "incomplete"
    depth = fit_axis(_records(CFG, key, lambda r, s: -0.25 * r + noise[s]), CFG, key, "depth", GRID, (0, 1), -6,
                     RULES)
    assert depth.sizes == (2, 4, 8) and depth.slope == pytest.approx(-0.25, abs=1e-9)


def test_fit_axis_ignores_other_runs():
    """SP runs, another η, another factor's settings or another optimizer never enter the fit."""
    key = FitKey("lr", "hidden_weight")
    recs = _records(CFG, key, lambda r, s: 0.0)
    noise = [dict(r, parameterization="sp", val_loss=0.0) for r in recs]
    noise += [dict(r, log2_lr=-5, val_loss=0.0) for r in recs]
    noise += [dict(r, optimizer="muon-kimi+adamw", val_loss=0.0) for r in recs]
    fit = fit_axis(noise + recs, CFG, key, "width", GRID, (0, 1), -6, RULES)
    assert fit.slope == pytest.approx(0.0, abs=1e-9)


# --------------------------------------------------------------------------------------
# --init-scale and --tune init.ROLE
# --------------------------------------------------------------------------------------


def test_init_scale_is_part_of_the_settings_only_when_it_changes_something():
    assert "init_scale" not in SweepConfig().settings()
    assert "init_scale" not in SweepConfig(init_scale={"hidden_weight": 1.0}).settings()
    cfg = SweepConfig(init_std=0.02, init_scale={"hidden_weight": 2.0})
    assert cfg.settings()["init_scale"] == {"hidden_weight": 2.0}
    assert cfg.init_stds == {"default": 0.02, "hidden_weight": 0.04}
    assert SweepConfig().init_stds == 0.02


def test_tune_init_keys_go_to_init_scale():
    cands = candidates(1.0, [("init.hidden_weight", (0.5, 2.0))])
    assert cands == [{"init.hidden_weight": 0.5}, {"init.hidden_weight": 2.0}]
    cfg = apply(SweepConfig(multiplier={"output": 4.0}), cands[1])
    assert cfg.init_scale == {"hidden_weight": 2.0} and cfg.multiplier == {"output": 4.0}


torch = pytest.importorskip("torch")


def test_init_scale_changes_only_that_roles_std():
    from spectral.sweep import build_run, recipe
    from spectral.sweep.options import Job

    cfg = SweepConfig(optimizer="adamw", widths=(64,), base_width=32)
    rec = recipe("adamw", "mup", cfg)
    stds = {}
    for name, c in (("rule", cfg), ("x2", replace(cfg, init_scale={"hidden_weight": 2.0}))):
        torch.manual_seed(0)
        model, _ = build_run(Job("mup", 64, 2, -6), c, rec, 256, "cpu")
        stds[name] = rec.init_stds(model, 64, 2, c.init_stds)
    for param, std in stds["rule"].items():
        if std and ".h." in param and param.endswith("weight"):
            assert stds["x2"][param] == pytest.approx(2 * std)
        else:
            assert stds["x2"][param] == std, param


# --------------------------------------------------------------------------------------
# the command line, end to end on a tiny model
# --------------------------------------------------------------------------------------

TINY = ["sweep", "--device", "cpu", "-O", "adamw", "--widths", "32,64,96", "--depths", "2", "--steps", "4",
        "--batch-size", "2", "--block-size", "16", "--eval-batches", "1", "--n-bytes", "65536",
        "--log2-lrs=-7", "--fit-exponent", "lr.hidden_weight", "--log2-factors=-1,0,1", "--no-progress",
        "--threads", "1"]


@pytest.mark.slow
def test_fit_exponent_end_to_end_and_report_only_rerenders(tmp_path: Path, capsys):
    from spectral.cli import main

    out = tmp_path / "fit"
    assert main([*TINY, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "exponents.md" in printed
    payload = json.loads((out / "adamw" / "exponents.json").read_text())
    (fit,) = payload["fits"]  # one depth: no depth fit
    assert fit["key"] == "lr.hidden_weight" and fit["axis"] == "width" and fit["sizes"] == [32, 64, 96]
    assert fit["derived"] == -1.0  # AdamW's hidden η ∝ 1/n
    assert fit["verdict"] in ("agrees", "differs", "edge", "not informative")
    assert len(fit["val_loss"]) == 3 and all(len(row) == 3 for seed in fit["val_loss"] for row in seed)
    assert (out / "adamw" / "exponent_lr_hidden_weight_width.png").stat().st_size > 1000
    assert "| adamw" in (out / "exponents.md").read_text() or "[adamw]" in (out / "exponents.md").read_text()
    saved = {n: (out / "adamw" / n).read_text() for n in ("exponents.md", "exponents.json")}
    runs = (out / "adamw" / "runs.jsonl").read_text()
    # the rerun trains nothing (resumes) and --report-only renders the same bytes
    assert main([*TINY, "--out", str(out)]) == 0
    assert (out / "adamw" / "runs.jsonl").read_text() == runs
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    for n in saved:
        (copy / "adamw" / n).unlink()
    assert main([*TINY, "--out", str(copy), "--report-only"]) == 0
    for n, text in saved.items():
        assert (copy / "adamw" / n).read_text() == text, n


@pytest.mark.parametrize("extra, message", [
    (["--log2-factors=0,1,2"], "around 0"),
    (["--log2-factors=-2,0,2"], "consecutive"),
    (["--param", "sp"], "drop --param"),
    (["--fit-exponent", "lr.hidden_weight"], "given twice"),
    (["--fit-exponent", "lr.nonsense_weight"], "error: --fit-exponent lr.nonsense_weight: name a role"),
])
def test_fit_exponent_refuses_bad_arguments_before_any_work(tmp_path: Path, capsys, extra, message):
    from spectral.cli import main

    assert main([*TINY, "--out", str(tmp_path / "x"), *extra]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_fit_exponent_key_syntax_is_an_argparse_error(tmp_path: Path, capsys):
    from spectral.cli import main

    assert main([*TINY, "--out", str(tmp_path / "x"), "--fit-exponent", "hidden_weight"]) == 2
    assert "expected lr.ROLE" in capsys.readouterr().err


def test_gpu_exponent_preset_fits_the_hidden_lr_with_two_seeds():
    from spectral.cli.sweep import _check_fit_args, _log2_factors, _seeds, configs_from_args, configure_sweep

    p = argparse.ArgumentParser()
    configure_sweep(p)
    args = p.parse_args(["--preset", "gpu-exponent", "--out", "x", "--device", "cpu"])
    assert [k.text for k in _check_fit_args(args)] == ["lr.hidden_weight", "lr.output_weight"]
    assert _seeds(args) == (0, 1) and _log2_factors(args) == (-3, -2, -1, 0, 1, 2, 3, 4)
    (cfg,) = configs_from_args(args)
    assert cfg.optimizer == "muon-kimi+adamw" and cfg.widths == (128, 256, 512, 1024) and cfg.depths == (2,)
    # a given --seed or --fit-exponent wins over the preset's
    args = p.parse_args(["--preset", "gpu-exponent", "--out", "x", "--device", "cpu", "--seed", "3",
                         "--fit-exponent", "lr.input_weight"])
    assert _seeds(args) == (3,) and [k.text for k in _check_fit_args(args)] == ["lr.input_weight"]


def test_log2_factors_without_fit_exponent_is_refused(tmp_path: Path, capsys):
    from spectral.cli import main

    args = [a for a in TINY if a not in ("--fit-exponent", "lr.hidden_weight")]
    assert main([*args, "--out", str(tmp_path / "x")]) == 2
    assert "give --fit-exponent" in capsys.readouterr().err


@pytest.mark.parametrize("value, message", [
    ("hidden_weight=-1", "expected a number >= 0"),
    ("bogus_weight=2", "unknown key"),
    ("hidden_weight=nan", ""),
])
def test_init_scale_refuses_bad_values_before_any_work(tmp_path: Path, capsys, value, message):
    from spectral.cli import main

    args = [a for a in TINY if a not in ("--fit-exponent", "lr.hidden_weight", "--log2-factors=-1,0,1")]
    assert main([*args, "--out", str(tmp_path / "x"), "--init-scale", value]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_fit_exponent_estimate_plans_the_grid_and_trains_nothing(tmp_path: Path, capsys):
    from spectral.cli import main

    assert main([*TINY, "--out", str(tmp_path / "x"), "--estimate", "--seeds", "0,1"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    (est,) = [line["estimate"] for line in lines]
    # stage 1: one η × 2 seeds at the base; the grid: 3 factors × 2 seeds × 3 widths, less the
    # 2 base runs at factor 1 that stage 1 already trained (same HPs: reused)
    assert est["runs"] == 2 + 3 * 2 * 3 - 2
    assert not (tmp_path / "x" / "adamw" / "runs.jsonl").exists()
