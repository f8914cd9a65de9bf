"""The sweep along the horizon and the batch (issue 49): its plan, the rules arm, the fit and
the regret read from records, and the command line's checks (before any folder is made)."""

from __future__ import annotations

import json
import math
import shutil
from fractions import Fraction
from pathlib import Path

import pytest

from spectral.errors import SpecError
from spectral.sweep.along import Along, Laws, grid_configs, optimizer_laws, point_config, rule_config
from spectral.sweep.along_report import axis_result, write_along_report
from spectral.sweep.options import SweepConfig

ROOT = Path(__file__).resolve().parents[2]

CFG = SweepConfig(optimizer="adamw", widths=(32, 64), width=64, depth=4, base_width=32, base_depth=2,
                  log2_lrs=(-8, -7, -6, -5, -4), steps=50, batch_size=16, weight_decay=0.1)
HORIZON = Along("horizon", (25, 50, 100), 50, 16)
BATCH = Along("batch", (8, 16, 32), 50, 16)


def test_points_along_the_horizon_move_the_steps_and_along_the_batch_keep_the_tokens():
    assert [HORIZON.steps_batch(v) for v in HORIZON.values] == [(25, 16), (50, 16), (100, 16)]
    assert [BATCH.steps_batch(v) for v in BATCH.values] == [(100, 8), (50, 16), (25, 32)]
    assert HORIZON.ratios(100) == (Fraction(2), Fraction(1))
    assert BATCH.ratios(32) == (Fraction(1), Fraction(2))  # tokens held: r_D = 1
    assert BATCH.ratio(8) == Fraction(1, 2) and HORIZON.ratio(25) == Fraction(1, 2)
    with pytest.raises(SpecError, match="does not divide"):
        Along("batch", (3, 16), 50, 16).steps_batch(3)


def test_every_point_is_mup_at_the_base_size_whatever_the_sweep_widths():
    c = point_config(CFG, HORIZON, 100, 2)
    assert (c.widths, c.width, c.depth, c.depths) == ((32,), 32, 2, (2,))
    assert c.parameterizations == ("mup",) and (c.steps, c.batch_size, c.seed) == (100, 16, 2)
    grid = grid_configs(CFG, HORIZON, (0, 1))
    assert [(v, s) for v, s, _ in grid] == [(50, 0), (50, 1), (25, 0), (25, 1), (100, 0), (100, 1)]  # base first


def test_the_declared_laws_of_the_sweep_optimizers():
    adamw = optimizer_laws("adamw")
    assert (adamw.horizon, adamw.batch, adamw.assumed) == (Fraction(-8, 25), Fraction(1, 2), ("horizon",))
    hybrid = optimizer_laws("muon-kimi+adamw")  # Muon-Kimi declares its horizon law, its batch law is assumed
    assert (hybrid.horizon, hybrid.batch, hybrid.assumed) == (Fraction(-8, 25), Fraction(1, 2), ("horizon", "batch"))


@pytest.mark.parametrize("r_d, r_b", [(Fraction(4), Fraction(1)), (Fraction(1), Fraction(2)), (Fraction(8), Fraction(1, 4))])
def test_the_rules_arm_holds_the_timescale(r_d, r_b):
    laws = Laws(Fraction(-8, 25), Fraction(1, 2), ())
    f_lr, f_wd = laws.factors(r_d, r_b)
    assert f_lr == pytest.approx(float(r_d) ** -0.32 * float(r_b) ** 0.5, rel=1e-12)
    assert f_lr * f_wd * float(r_d) / float(r_b) == pytest.approx(1.0, rel=1e-12)  # η λ D / B is the base's


def test_the_rules_arm_at_a_point_and_at_the_base():
    laws = optimizer_laws("adamw")
    c = rule_config(CFG, HORIZON, 100, 1, -6, laws)
    assert c.log2_lrs == (-6,) and c.lr_scale == {"default": pytest.approx(2 ** -0.32)}
    assert c.weight_decay == pytest.approx(0.1 * 2 ** -0.68)
    b = rule_config(CFG, BATCH, 32, 1, -6, laws)
    assert b.lr_scale == {"default": pytest.approx(2 ** 0.5)} and b.weight_decay == pytest.approx(0.1 * 2 ** 0.5)
    # at the base point the rules change nothing: the same run (same settings) as the grid's
    assert rule_config(CFG, HORIZON, 50, 0, -6, laws).settings() == point_config(CFG, HORIZON, 50, 0).settings()
    scaled = rule_config(CFG.__class__(**{**CFG.__dict__, "lr_scale": {"input_weight": 4.0}}), BATCH, 8, 0, -6, laws)
    assert scaled.lr_scale == {"input_weight": pytest.approx(4 * 2 ** -0.5), "default": pytest.approx(2 ** -0.5)}


def _records(cfg, along, seeds, laws, base_lr, optimum_of, rules_loss):
    """Synthetic runs: loss = (log2 η − optimum_of(value, seed))² / 4 + 3, and the rules arm's loss."""
    out = []
    for v in along.values:
        for s in seeds:
            c = point_config(cfg, along, v, s)
            for e in cfg.log2_lrs:
                out.append({"optimizer": cfg.optimizer, "width": 32, "depth": 2, "log2_lr": e,
                            "settings": c.settings(), "val_loss": (e - optimum_of(v, s)) ** 2 / 4 + 3})
            r = rule_config(cfg, along, v, s, base_lr, laws)
            out.append({"optimizer": cfg.optimizer, "width": 32, "depth": 2, "log2_lr": base_lr,
                        "settings": r.settings(), "val_loss": rules_loss(v, s)})
    return out


def test_the_fit_recovers_a_known_exponent_and_the_regret_is_paired():
    laws = optimizer_laws("adamw")
    seeds = (0, 1, 2)

    def opt(v, s):  # optimal log2 η = -6.2 - 0.5 log2(v/50), plus a seed offset
        return -6.2 - 0.5 * math.log2(v / 50) + (s - 1) * 0.1

    recs = _records(CFG, HORIZON, seeds, laws, -6, opt, lambda v, s: 3.0 + 0.01 * (s + 1))
    res = axis_result(recs, CFG, HORIZON, seeds, -6, laws)
    assert res.complete and res.slope == pytest.approx(-0.5, abs=1e-9)
    assert res.half_width is not None and 0.05 < res.half_width < 0.1  # the seeds' ±0.1 scatter
    assert res.expected == pytest.approx(-0.32) and res.assumed
    assert res.verdict == "differs"  # -0.32 outside a near-zero-width interval around -0.5
    p100 = next(p for p in res.points if p.value == 100)
    assert p100.optima[1] == (pytest.approx(-6.7), False)
    best = p100.best()
    assert best is not None and res.log2_lrs[best[1]] == -7
    # unchanged arm: the grid run at log2 η -6; the optimum at -6.7 (seed 1) gives (0.7)²/4 + 3
    assert p100.unchanged[1] == pytest.approx(0.7 ** 2 / 4 + 3)
    assert p100.rules == (pytest.approx(3.01), pytest.approx(3.02), pytest.approx(3.03))
    paths = write_along_report(Path(_tmp()), "adamw", [res], settings=point_config(CFG, HORIZON, 50, 0).settings(),
                               command="spectral sweep …", data=None, rule="fit")
    text = paths[0].read_text(encoding="utf-8")
    assert "| horizon | -0.320 (assumed) | -0.500 |" in text and "differs" in text
    assert '[lr_horizon] exponent = "-0.50"' in text
    payload = json.loads(paths[1].read_text(encoding="utf-8"))
    assert payload["axes"][0]["measured"] == pytest.approx(-0.5)


def test_missing_runs_make_the_axis_incomplete_not_wrong():
    laws = optimizer_laws("adamw")
    recs = _records(CFG, BATCH, (0, 1), laws, -6, lambda v, s: -6.0, lambda v, s: 3.0)
    recs = [r for r in recs if not (r["settings"]["batch_size"] == 32 and r["log2_lr"] == -8)]
    res = axis_result(recs, CFG, BATCH, (0, 1), -6, laws)
    assert res.verdict == "incomplete"
    assert next(p for p in res.points if p.value == 32).optima == (None, None)


TOGETHER = Along("together", (50, 100, 200), 50, 16, (32, 64, 128))


def test_together_pairs_each_width_with_its_steps_and_keeps_the_base_ratio_rules():
    assert [TOGETHER.steps_batch(v) for v in TOGETHER.values] == [(50, 16), (100, 16), (200, 16)]
    assert [TOGETHER.width(v, 32) for v in TOGETHER.values] == [32, 64, 128]
    assert HORIZON.width(100, 32) == 32  # the other axes stay at the base width
    assert TOGETHER.ratios(200) == (Fraction(4), Fraction(1)) and TOGETHER.base_value == 50
    c = point_config(CFG, TOGETHER, 200, 1)
    # μP at the paired width, its ratio to --base-width 32 carrying η and λ along the width
    assert (c.widths, c.width, c.depths, c.base_width, c.base_depth) == ((128,), 128, (2,), 32, 2)
    assert (c.steps, c.batch_size, c.seed, c.parameterizations) == (200, 16, 1, ("mup",))
    laws = optimizer_laws("adamw")
    assert laws.expected("together") == laws.horizon  # the grid's base η under μP follows the horizon law
    r = rule_config(CFG, TOGETHER, 200, 1, -6, laws)
    assert r.lr_scale == {"default": pytest.approx(4 ** -0.32)} and r.weight_decay == pytest.approx(0.1 * 4 ** -0.68)
    assert r.width == 128


def test_together_reads_each_points_runs_at_its_own_width(tmp_path):
    laws = optimizer_laws("adamw")
    seeds = (0, 1, 2)

    def opt(v, s):
        return -6.0 - 0.25 * math.log2(v / 50) + (s - 1) * 0.05

    def rules(v, s):  # at the base the rules arm is the grid's run at -6 (the same settings)
        return (-6 - opt(v, s)) ** 2 / 4 + 3 if v == 50 else 3.0 + 0.01 * s

    recs = _records(CFG, TOGETHER, seeds, laws, -6, opt, rules)
    for r in recs:  # each run at its point's width, as the sweep records it
        r["width"] = {50: 32, 100: 64, 200: 128}[r["settings"]["steps"]]
    stray = dict(recs[-1], width=32, val_loss=99.0)  # the same settings at another width: not this point's
    res = axis_result([*recs, stray], CFG, TOGETHER, seeds, -6, laws)
    assert res.complete and res.slope == pytest.approx(-0.25, abs=1e-9) and res.assumed
    p200 = next(p for p in res.points if p.value == 200)
    assert p200.width == 128 and p200.rules == (pytest.approx(3.0), pytest.approx(3.01), pytest.approx(3.02))
    # width-only transfer: the grid run at the base log2 η -6, the optimum at -6.5 + (s-1)·0.05
    assert p200.unchanged[0] == pytest.approx(0.55 ** 2 / 4 + 3)
    paths = write_along_report(tmp_path, "adamw", [res], settings=point_config(CFG, TOGETHER, 50, 0).settings(),
                               command=None, data=None, rule="fit")
    text = paths[0].read_text(encoding="utf-8")
    assert text.startswith("# Width and horizon together: adamw")
    assert "| steps | width | steps × batch | log2 r |" in text
    assert "| 200 | 128 | 200 × 16 | +2 |" in text
    assert '[lr_horizon] exponent = "0.25"' not in text and '[lr_horizon] exponent = "-0.25"' in text
    payload = json.loads(paths[1].read_text(encoding="utf-8"))
    assert [p["width"] for p in payload["axes"][0]["points"]] == [32, 64, 128]
    assert payload["axes"][0]["axis"] == "together"


def _tmp() -> str:
    import tempfile

    return tempfile.mkdtemp(prefix="spectral-along-")


BAD = [
    (["--steps", "25,50", "--base-steps", "40"], "--base-steps 40 is not one of --steps"),
    (["--batch-sizes", "8,32"], "--batch-size 16 (the base) is not one of --batch-sizes"),
    (["--batch-sizes", "3,16"], "does not divide"),
    (["--steps", "25,50", "--widths", "32,64"], "drop --widths"),
    (["--steps", "25,50", "--fit-exponent", "lr.hidden_weight"], "drop --fit-exponent"),
    (["--steps", "25,50", "--tune", "output=1,4"], "drop --tune"),
    (["--steps", "25,50", "--param", "sp"], "drop --param"),
    (["--steps", "25,50", "--log2-lrs=-7,-5"], "at least three consecutive"),
    (["--base-steps", "20"], "give several --steps or --batch-sizes"),
    (["--steps", "25,25"], "given twice"),
    (["--steps", "50", "--base-steps", "20", "--batch-sizes", "8,16"], "one base run"),
    (["--together", "--steps", "50,200", "--widths", "32"], "got 1 widths and 2 steps"),
    (["--together", "--steps", "50"], "at least two pairs"),
    (["--together", "--steps", "50,200", "--widths", "32,128", "--batch-sizes", "8,16"], "on its own"),
    (["--together", "--steps", "50,200", "--widths", "128,32"], "must rise strictly"),
    (["--together", "--steps", "200,50", "--widths", "32,128", "--base-steps", "200"], "must rise strictly"),
    (["--together", "--steps", "50,200", "--widths", "64,128", "--base-width", "32"], "the first pair (64 wide, 50"),
    (["--together", "--steps", "50,200", "--widths", "32,128", "--depths", "2"], "drop --depths"),
    (["--together", "--steps", "50,200", "--widths", "32,128", "--log2-lrs=-7,-5"], "at least three consecutive"),
]


@pytest.mark.parametrize("args, message", BAD)
def test_bad_arguments_are_one_line_before_any_folder(tmp_path, capsys, args, message):
    pytest.importorskip("torch")
    from spectral.cli import main

    out = tmp_path / "out"
    code = main(["sweep", "--device", "cpu", "-O", "adamw", "--batch-size", "16", "--steps", "50",
                 "--log2-lrs=-7,-6,-5", "--out", str(out), *args])
    err = capsys.readouterr().err
    assert code != 0 and message in err and "Traceback" not in err
    assert not out.exists()


AXES = ["--base-steps", "50", "--batch-sizes", "8,16,32", "--batch-size", "16", "--seeds", "0,1,2",
        "--weight-decay", "0.1"]
LLAMA = ["--model", "llama", "-O", "adamw", "--head-dim", "16", "--block-size", "64", "--base-width", "32",
         "--base-depth", "2", "--multiplier", "output=4", "--weight-decay", "0.1", "--batch-size", "16"]
"""The torchtitan-like Llama at 32 x 2 (α_out 4, docs/sweep/ablate/llama-32-256's base)."""
FOLDERS = {  # docs/sweep/horizon/README.md's commands
    "adamw": ["-O", "adamw", "--multiplier", "output=16", "--log2-lrs=-9,-8,-7,-6,-5", "--steps", "25,50,100,200",
              *AXES],
    "muon-kimi+adamw": ["-O", "muon-kimi+adamw", "--log2-lrs=-6,-5,-4,-3,-2", "--steps", "25,50,100,200", *AXES],
    "output-1/adamw": ["-O", "adamw", "--log2-lrs=-8,-7,-6,-5,-4", "--steps", "25,50,100", *AXES],
    "llama/adamw": [*LLAMA, "--steps", "50,100,200,400", "--base-steps", "100", "--batch-sizes", "8,16,32",
                    "--log2-lrs=-7,-6,-5,-4,-3", "--seeds", "0,1,2"],
    "together/adamw": [*LLAMA, "--together", "--widths", "32,64", "--steps", "100,200", "--log2-lrs=-6,-5,-4,-3",
                       "--seeds", "0,1,2,3,4"],
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FOLDERS))
def test_committed_horizon_sweeps_come_from_their_raw_runs(tmp_path, capsys, name):
    """docs/sweep/horizon: ``along.md`` and ``along.json`` re-rendered from ``runs.jsonl``."""
    pytest.importorskip("torch")
    from spectral.cli import main

    src = ROOT / "docs" / "sweep" / "horizon" / name
    dst = tmp_path / "out" / src.name
    dst.mkdir(parents=True)
    for f in ("runs.jsonl", "sweep.json"):
        shutil.copy(src / f, dst / f)
    assert main(["sweep", "--device", "cpu", "--out", str(tmp_path / "out"), *FOLDERS[name], "--report-only"]) == 0
    capsys.readouterr()
    for f in ("along.md", "along.json"):
        assert (dst / f).read_text(encoding="utf-8") == (src / f).read_text(encoding="utf-8"), f
