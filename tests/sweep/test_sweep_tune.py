"""Base tuning (--tune), several seeds (--seeds), the plan's time (--estimate) and the GPU preset."""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spectral.sweep.tune import base_configs, candidates, choose, label, mean_cell, parse_tune

torch = pytest.importorskip("torch")

from spectral.sweep.data import stdlib_bytes  # noqa: E402
from spectral.cli.sweep import configs_from_args, configure_sweep  # noqa: E402
from spectral.sweep import RUNS_FILE, PRESETS, SweepConfig, read_runs  # noqa: E402
from spectral.sweep.report import Table, mean_tables  # noqa: E402

# --------------------------------------------------------------------------------------
# parsing and candidates (pure)
# --------------------------------------------------------------------------------------


def test_parse_tune_reads_numbers_by_hand():
    assert parse_tune("output=1,4,16") == ("output", (1.0, 4.0, 16.0))
    assert parse_tune(" Output = 0.5 , 2e1 ") == ("output", (0.5, 20.0))
    assert parse_tune("none") == ("none", ())


@pytest.mark.parametrize("text, message", [
    ("output", "expected KEY=V1,V2"),
    ("=1,2", "expected KEY=V1,V2"),
    ("output=", "'' is not a number"),
    ("output=1,,2", "'' is not a number"),
    ("output=0", "expected numbers > 0"),
    ("output=-1", "expected numbers > 0"),
    ("output=nan", "expected numbers > 0"),
    ("output=inf", "expected numbers > 0"),
    ("output=1,1.0", "is given twice"),
    ("output=__import__('os')", "is not a number"),
])
def test_parse_tune_refuses(text, message):
    with pytest.raises(argparse.ArgumentTypeError, match=message.replace("(", r"\(")):
        parse_tune(text)


def test_candidates_cover_every_combination_in_order():
    tune = [("output", (1.0, 4.0)), ("input", (2.0, 8.0))]
    assert candidates(1.0, tune) == [
        {"output": 1.0, "input": 2.0}, {"output": 1.0, "input": 8.0},
        {"output": 4.0, "input": 2.0}, {"output": 4.0, "input": 8.0},
    ]
    # a number --multiplier becomes the default of every candidate; a dict is kept under it
    assert candidates(0.5, [("output", (3.0,))]) == [{"default": 0.5, "output": 3.0}]
    assert candidates({"hidden": 2.0, "output": 9.0}, [("output", (3.0,))]) == [{"hidden": 2.0, "output": 3.0}]
    with pytest.raises(argparse.ArgumentTypeError, match="given twice"):
        candidates(1.0, [("output", (1.0,)), ("output", (2.0,))])
    assert label({"hidden": 2.0, "output": 16.0}, ["output"]) == "output=16"
    assert label(0.5) == "0.5"


@given(st.lists(st.floats(min_value=0.1, max_value=100.0), min_size=1, max_size=5))
def test_mean_cell_is_the_mean_and_symmetric(values):
    m = mean_cell(values)
    assert min(values) - 1e-12 <= m <= max(values) + 1e-12
    assert mean_cell(list(reversed(values))) == pytest.approx(m)
    assert mean_cell([*values, "div"]) == "div"
    assert mean_cell([*values, None]) is None
    assert mean_cell(["div", None]) is None


# --------------------------------------------------------------------------------------
# the choice, from synthetic runs (pure)
# --------------------------------------------------------------------------------------


def _toy(**kw) -> SweepConfig:
    base = dict(optimizer="adamw", parameterizations=("sp", "mup"), widths=(32, 64), depth=1, depths=(1, 2),
                width=32, base_width=32, base_depth=1, log2_lrs=(-8, -7, -6), steps=3, batch_size=2,
                block_size=8, head_dim=32, eval_batches=1, threads=1)
    base.update(kw)
    return SweepConfig(**base)


def _records(cfg, table: dict[tuple[float, int], list]) -> list[dict]:
    """Base-size records: ``table[(α_out, seed)]`` = losses over ``cfg.log2_lrs``."""
    out = []
    for (alpha, seed), losses in table.items():
        (sc,) = base_configs(cfg, {"output": alpha}, [seed])
        for e, v in zip(cfg.log2_lrs, losses, strict=True):
            out.append({"key": f"{alpha}-{seed}-{e}", "optimizer": cfg.optimizer, "parameterization": "sp",
                        "width": cfg.base_width, "depth": cfg.base_depth, "log2_lr": e,
                        "settings": json.loads(json.dumps(sc.settings())),
                        "val_loss": None if v == "div" else v, "diverged": v == "div"})
    return out


def test_choose_takes_the_lowest_seed_mean_minimum():
    cfg = _toy()
    cands = candidates(1.0, [("output", (1.0, 4.0, 16.0))])
    recs = _records(cfg, {
        (1.0, 0): [3.0, 2.9, 3.1], (1.0, 1): [3.0, 2.7, 3.1],    # mean min 2.8 at -7
        (4.0, 0): [2.6, 2.9, 3.0], (4.0, 1): [3.0, 2.9, 3.0],    # mean min 2.8 at -8
        (16.0, 0): [2.5, "div", 2.0], (16.0, 1): [2.7, 2.0, 2.2],  # -7 diverged in one seed: mean "div"
    })
    ch = choose(recs, cfg, cands, [0, 1], ["output"])
    assert ch.mean[2][1] == "div" and ch.mean[2][2] == pytest.approx(2.1)
    assert ch.winner == 2 and ch.best_col[2] == 2 and ch.chosen == {"output": 16.0}
    assert ch.complete
    assert ch.edges() == [
        "output=16 is the largest value tried; its optimum may lie beyond",
        "the winner's best log2 η (-6) is at the edge of --log2-lrs",
    ]
    data = ch.as_json()
    assert data["winner"] == "output=16" and data["winner_log2_lr"] == -6
    assert data["per_seed_val_loss"][2][0][1] == "div"


def test_choose_ties_go_to_the_first_candidate_and_missing_runs_are_incomplete():
    cfg = _toy()
    cands = candidates(1.0, [("output", (1.0, 4.0))])
    both = {(1.0, 0): [3.0, 2.5, 3.0], (4.0, 0): [2.5, 3.0, 3.0]}
    ch = choose(_records(cfg, both), cfg, cands, [0], ["output"])
    assert ch.winner == 0 and ch.edges() == ["output=1 is the smallest value tried; its optimum may lie beyond"]
    recs = _records(cfg, both)[:-1]
    assert not choose(recs, cfg, cands, [0], ["output"]).complete
    # runs of another optimizer, size or setting do not count
    other = [r | {"optimizer": "muon-kimi+adamw"} for r in _records(cfg, both)]
    assert choose(other, cfg, cands, [0], ["output"]).winner is None


def test_mean_tables_average_each_cell():
    a = Table("adamw", "width", "sp", [32, 64], [-8, -7], [[1.0, 2.0], [3.0, "div"]], 32)
    b = Table("adamw", "width", "sp", [32, 64], [-8, -7], [[3.0, None], [5.0, 1.0]], 32)
    (m,) = mean_tables([[a], [b]])
    assert m.values == [[2.0, None], [4.0, "div"]] and m.sizes == [32, 64] and m.base_size == 32


# --------------------------------------------------------------------------------------
# the command: one call tunes at the base, then transfers the winner, per seed
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def text(tmp_path_factory):
    f = tmp_path_factory.mktemp("data") / "text.txt"
    f.write_bytes(stdlib_bytes(4000))
    return f


def _sweep(out: Path, text: Path, *words: str) -> int:
    from spectral.cli import main

    return main(["sweep", "--device", "cpu", "--no-progress", "--out", str(out), "--data", str(text),
                 "--widths", "32,64", "--depth", "1", "--depths", "1,2", "--width", "32", "--base-width", "32",
                 "--base-depth", "1", "--log2-lrs=-8,-6", "--steps", "3", "--batch-size", "2", "--block-size", "8",
                 "--eval-batches", "1", "--threads", "1", "--param", "sp", "--param", "mup", *words])


@pytest.mark.slow
def test_tune_then_transfer_in_one_command(tmp_path: Path, text: Path, monkeypatch, capsys):
    import spectral.sweep.train as sweep_train

    trained = []
    real = sweep_train.train_run

    def counting(job, cfg, *a, **k):
        trained.append((job, cfg.multiplier, cfg.seed))
        return real(job, cfg, *a, **k)

    monkeypatch.setattr(sweep_train, "train_run", counting)
    out = tmp_path / "o"
    assert _sweep(out, text, "--seeds", "0,1", "--tune", "output=1,4") == 0
    # stage 1: 2 candidates × 2 η × 2 seeds at the base; stage 2: (64, 1) and (32, 2), sp and mup,
    # 2 η, 2 seeds; the base-size runs of stage 2 are the winner's stage-1 runs (nothing twice);
    # stage 3 (SP re-tuned): SP with the other candidate at (64, 1) and (32, 2), 2 η, 2 seeds
    assert len(trained) == 8 + 2 * 2 * 2 * 2 + 2 * 2 * 2
    assert all((j.width, j.depth) == (32, 1) for j, *_ in trained[:8])
    tuning = json.loads((out / "adamw" / "tuning.json").read_text())
    recs = read_runs(out / "adamw" / RUNS_FILE)
    cfg = configs_from_args(_args(out, text, "--seeds", "0,1"))[0]
    ch = choose(recs, cfg, candidates(1.0, [("output", (1.0, 4.0))]), [0, 1], ["output"])
    assert tuning["winner"] == label(ch.chosen, ["output"])
    assert all(m == ch.chosen for _, m, _ in trained[8:24]) and {s for *_, s in trained[8:24]} == {0, 1}
    assert all(m != ch.chosen and j.parameterization == "sp" for j, m, _ in trained[24:])
    drift = json.loads((out / "adamw" / "drift.json").read_text())
    assert all(d["seeds"] == [0, 1] and set(d["per_seed"]) == {"0", "1"} for d in drift)
    summary = (out / "adamw" / "summary.md").read_text()
    assert "(chosen)" in summary and "mean over seeds 0, 1" in summary and "seed gap" in summary
    printed = capsys.readouterr().out
    assert f"tuned at the base size 32 × 1: {tuning['winner']}" in printed
    assert "warning: adamw:" in printed  # with two values and two η, the winner sits on an edge

    # the seed mean in drift.json is the mean of the two seeds' tables
    width_sp = next(d for d in drift if d["axis"] == "width" and d["parameterization"] == "sp")
    by_seed = {s: {(r["log2_lr"]): r["val_loss"] for r in recs
                   if r["settings"].get("multiplier") == ch.chosen and r["settings"]["seed"] == s
                   and r["parameterization"] == "sp" and (r["width"], r["depth"]) == (64, 1)} for s in (0, 1)}
    means = [(by_seed[0][e] + by_seed[1][e]) / 2 for e in (-8, -6)]
    assert width_sp["best_loss"][-1] == pytest.approx(min(means))

    # rerun and --report-only train nothing and find the same winner
    trained.clear()
    assert _sweep(out, text, "--seeds", "0,1", "--tune", "output=1,4") == 0
    assert _sweep(out, text, "--seeds", "0,1", "--tune", "output=1,4", "--report-only") == 0
    assert trained == []
    assert json.loads((out / "adamw" / "tuning.json").read_text())["winner"] == tuning["winner"]


def _args(out: Path, text: Path, *words: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    configure_sweep(p)
    return p.parse_args(["--device", "cpu", "--out", str(out), "--data", str(text), "--widths", "32,64", "--depth", "1",
                         "--depths", "1,2", "--width", "32", "--base-width", "32", "--base-depth", "1",
                         "--log2-lrs=-8,-6", "--steps", "3", "--batch-size", "2", "--block-size", "8",
                         "--eval-batches", "1", "--threads", "1", "--param", "sp", "--param", "mup", *words])


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_report_only_refuses_an_unfinished_tuning(tmp_path: Path, text: Path, capsys):
    out = tmp_path / "o"
    assert _sweep(out, text, "--tune", "output=1", "--widths", "32", "--depths", "1") == 0
    assert _sweep(out, text, "--tune", "output=1,4", "--report-only") == 2
    err = capsys.readouterr().err
    assert "lacks some base-size runs of the η grid" in err and err.count("\n") == 1


@pytest.mark.parametrize("words, message", [
    (("--seed", "1", "--seeds", "0,1"), "error: give --seed or --seeds, not both\n"),
    (("--seeds", "0,0"), "error: --seeds: a seed is given twice in 0,0\n"),
    (("--tune", "ouput=1,2"), "error: --tune: unknown key(s) ouput;"),  # the option typed, not --multiplier
])
def test_bad_seeds_and_tuning_are_one_line_before_any_work(tmp_path: Path, text: Path, capsys, words, message):
    out = tmp_path / "o"
    assert _sweep(out, text, *words) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1
    assert not out.exists()


def test_bad_tune_syntax_is_a_usage_error(tmp_path: Path, text: Path, capsys):
    assert _sweep(tmp_path / "o", text, "--tune", "output=0") == 2
    assert "--tune: output: expected numbers > 0, got '0'" in capsys.readouterr().err


# --------------------------------------------------------------------------------------
# --estimate: the plan's runs, timed; nothing written
# --------------------------------------------------------------------------------------


def _estimate(capsys) -> dict:
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("{")]
    (line,) = lines
    return json.loads(line)["estimate"]


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_estimate_counts_the_runs_the_sweep_would_train(tmp_path: Path, text: Path, capsys):
    out = tmp_path / "o"
    assert _sweep(out, text, "--seeds", "0,1", "--tune", "output=1,4", "--estimate") == 0
    est = _estimate(capsys)
    assert not out.exists()
    # stage 1, stage 2, and stage 3 (SP with the other candidate at the two non-base sizes)
    assert est["runs"] == 8 + 16 + 8 and est["steps"] == 3 * 32
    assert {(r["width"], r["depth"]): r["runs"] for r in est["sizes"]} == {(32, 1): 8, (64, 1): 12, (32, 2): 12}
    assert all(r["ms_per_step"] >= 0 and r["seconds"] >= 0 for r in est["sizes"])
    assert est["seconds"] == pytest.approx(sum(r["seconds"] for r in est["sizes"]) + est["overhead_s"], abs=0.2)
    # runs on disk are not counted again
    assert _sweep(out, text, "--widths", "32", "--depths", "1") == 0
    capsys.readouterr()
    assert _sweep(out, text, "--estimate") == 0
    assert _estimate(capsys)["runs"] == 8  # (64, 1) and (32, 2), sp and mup, 2 η; the base is on disk


# --------------------------------------------------------------------------------------
# presets
# --------------------------------------------------------------------------------------


def test_gpu_preset_names_the_comparison():
    p = argparse.ArgumentParser()
    configure_sweep(p)
    args = p.parse_args(["--out", "x", "--device", "cpu", "--preset", "gpu-8min"])
    (cfg,) = configs_from_args(args)
    g = PRESETS["gpu-8min"]
    assert cfg.optimizer == "muon-kimi+adamw" and cfg.parameterizations == ("sp", "mup")
    assert (cfg.widths, cfg.depths, cfg.steps) == (g["widths"], g["depths"], g["steps"])
    assert max(cfg.widths) >= 4 * max(PRESETS["cpu"]["widths"])  # 4-8x the CPU widths
    from spectral.cli.sweep import _tune

    assert _tune(args) == [("init.hidden_weight", (1.0, 2.0, 4.0))]  # issue 28: σ_hidden at the base
    assert _tune(p.parse_args(["--out", "x", "--preset", "gpu-8min", "--tune", "none"])) == []
    assert _tune(p.parse_args(["--out", "x", "--preset", "gpu-8min", "--tune", "output=2,8"])) == [("output", (2.0, 8.0))]
    # an explicit optimizer or parameterisation wins over the preset's
    args = p.parse_args(["--out", "x", "--device", "cpu", "--preset", "gpu-8min", "-O", "adamw", "--param", "mup"])
    (cfg,) = configs_from_args(args)
    assert cfg.optimizer == "adamw" and cfg.parameterizations == ("mup",)
    assert cfg.log2_lrs == g["log2_lrs"]["adamw"]


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_seed_mean_report_matches_one_seed_report_for_one_seed(tmp_path: Path, text: Path):
    # --seeds 3 is --seed 3: same keys, same tables
    out1, out2 = tmp_path / "a", tmp_path / "b"
    assert _sweep(out1, text, "--seeds", "3", "--widths", "32", "--depths", "1") == 0
    assert _sweep(out2, text, "--seed", "3", "--widths", "32", "--depths", "1") == 0
    r1, r2 = (read_runs(o / "adamw" / RUNS_FILE) for o in (out1, out2))
    assert [r["key"] for r in r1] == [r["key"] for r in r2]
    assert all(math.isfinite(r["val_loss"]) for r in r1)
    assert replace(_toy(), seed=3).settings()["seed"] == 3


# --------------------------------------------------------------------------------------
# per-role learning-rate factors (--lr-scale, --tune lr.ROLE=…)
# --------------------------------------------------------------------------------------


def test_lr_scale_reaches_the_role_and_the_key():
    from spectral.sweep import Job, build_run, recipe

    cfg = _toy(lr_scale={"input_weight": 0.25})
    assert cfg.settings()["lr_scale"] == {"input_weight": 0.25}
    assert "lr_scale" not in _toy().settings()  # unset: old keys still match
    rec = recipe(cfg.optimizer, "mup", cfg)
    model, (opt,) = build_run(Job("mup", 64, 1, -6), cfg, rec, 256, "cpu")
    names = {id(p): n for n, p in model.named_parameters()}
    lrs = {names[id(p)]: g["lr"] for g in opt.param_groups for p in g["params"]}
    plain_model, (plain,) = build_run(Job("mup", 64, 1, -6), _toy(), rec, 256, "cpu")
    plain_lrs = {n: g["lr"] for g in plain.param_groups for p in g["params"] for n, q in plain_model.named_parameters() if q is p}
    emb = [n for n in lrs if rec.module.classify(n, dict(model.named_parameters())[n]) == "input_weight"]
    assert emb
    for n in lrs:
        factor = 0.25 if n in emb else 1.0
        assert lrs[n] == pytest.approx(factor * plain_lrs[n], rel=1e-12), n


def test_tune_splits_lr_keys_from_multiplier_keys():
    from spectral.sweep.tune import apply

    cands = candidates(1.0, [("lr.input_weight", (0.25, 1.0))])
    assert cands == [{"lr.input_weight": 0.25}, {"lr.input_weight": 1.0}]
    cfg = apply(_toy(multiplier={"output": 4.0}), cands[0])
    assert cfg.multiplier == {"output": 4.0} and cfg.lr_scale == {"input_weight": 0.25}
    both = candidates({"output": 4.0}, [("output", (2.0,)), ("lr.output_weight", (0.5,))])
    cfg = apply(_toy(lr_scale={"input_weight": 2.0}), both[0])
    assert cfg.multiplier == {"output": 2.0} and cfg.lr_scale == {"input_weight": 2.0, "output_weight": 0.5}


@pytest.mark.slow
def test_tuning_an_lr_factor_in_one_command(tmp_path: Path, text: Path, capsys):
    out = tmp_path / "o"
    assert _sweep(out, text, "--tune", "lr.input_weight=0.5,2", "--widths", "32,64", "--depths", "1") == 0
    tuning = json.loads((out / "adamw" / "tuning.json").read_text())
    assert tuning["keys"] == ["lr.input_weight"] and tuning["winner"] in ("lr.input_weight=0.5", "lr.input_weight=2")
    factor = float(tuning["winner"].split("=")[1])
    recs = read_runs(out / "adamw" / RUNS_FILE)
    wide = [r for r in recs if r["width"] == 64 and r["parameterization"] != "sp"]
    assert wide and all(r["settings"]["lr_scale"] == {"input_weight": factor} for r in wide)
    # SP is re-tuned at n = 64 over both factors (--sp-retune, on by default)
    sp = {r["settings"]["lr_scale"]["input_weight"] for r in recs if r["width"] == 64 and r["parameterization"] == "sp"}
    assert sp == {0.5, 2.0}
    assert f"base η factors: input_weight={factor:g}" in (out / "adamw" / "summary.md").read_text()


def test_bad_lr_scale_is_one_line_before_any_work(tmp_path: Path, text: Path, capsys):
    out = tmp_path / "o"
    assert _sweep(out, text, "--lr-scale", "embedding=2") == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --lr-scale: unknown key(s) embedding;") and err.count("\n") == 1
    assert _sweep(out, text, "--lr-scale", "0.5") == 2
    assert capsys.readouterr().err == "error: --lr-scale: expected ROLE=FACTOR pairs, e.g. input_weight=0.25\n"
    assert _sweep(out, text, "--tune", "lr.bogus=1,2") == 2
    assert capsys.readouterr().err.startswith("error: --tune: unknown key(s) bogus;")  # the option typed
    assert not out.exists()


def test_an_lr_factor_of_one_is_the_untuned_run():
    # --tune lr.X=…,1,… reuses the runs made without it: same settings, same key
    assert _toy(lr_scale={"hidden_weight": 1.0}).settings() == _toy().settings()
    assert _toy(lr_scale={"hidden_weight": 1.0, "input_weight": 2.0}).settings()["lr_scale"] == {"input_weight": 2.0}
