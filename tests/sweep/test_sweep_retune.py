"""Issue 28: SP re-tuned at every size (spectral.sweep.retune), the power of an exponent fit
(spectral.sweep.power) and the MoE GPT the router's fit trains (GPT(experts=E))."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from spectral.measure.fit import fit_line, t_quantile
from spectral.sweep.options import SweepConfig
from spectral.sweep.power import doubling_sizes, half_width, power_rows, render_power, seed_sd, seeds_needed
from spectral.sweep.retune import has_retune_runs, retune_configs, retuned_rows
from spectral.sweep.tune import apply, candidates

# --------------------------------------------------------------------------------------
# SP re-tuned per size (pure, synthetic runs)
# --------------------------------------------------------------------------------------

CFG = SweepConfig(optimizer="adamw", parameterizations=("sp", "mup"), widths=(32, 64), depths=(2,),
                  log2_lrs=(-7, -6))
TUNE = [("init.hidden_weight", (1.0, 2.0))]
CANDS = candidates(CFG.multiplier, TUNE)
KEYS = ("init.hidden_weight",)


def _record(cand, param, width, seed, e, loss):
    cfg = replace(apply(CFG, cand), seed=seed)
    return {"optimizer": "adamw", "parameterization": param, "width": width, "depth": 2, "log2_lr": e,
            "settings": cfg.settings(), "val_loss": loss, "diverged": loss is None}


def _runs(sp64_of_2=(3.0, 2.5), seeds=(0, 1)):
    """Winner = candidate 0 (factor 1). Seed s adds 0.1·s to every loss. At n = 64 SP with
    factor 1 is 3.2 / 3.1 over η (-7, -6), factor 2 is ``sp64_of_2``; μP 2.9 / 3.0."""
    table = {
        (0, "sp", 32): (3.0, 2.8), (1, "sp", 32): (3.1, 2.9),
        (0, "mup", 32): (3.0, 2.8),
        (0, "sp", 64): (3.2, 3.1), (1, "sp", 64): sp64_of_2,
        (0, "mup", 64): (2.9, 3.0),
    }
    out = []
    for (ci, p, n), losses in table.items():
        for s in seeds:
            for e, v in zip((-7, -6), losses, strict=True):
                out.append(_record(CANDS[ci], p, n, s, e, None if v is None else v + 0.1 * s))
    return out


def test_retuned_rows_take_the_best_over_every_candidate_and_eta():
    rows = retuned_rows(_runs(), CFG, CANDS, 0, (0, 1), KEYS)
    assert [(r.axis, r.size) for r in rows] == [("width", 32), ("width", 64), ("depth", 2)]
    n64 = rows[1]
    assert n64.base_values == pytest.approx(3.15)  # factor 1, η -6: (3.1 + 3.2) / 2
    assert n64.retuned == pytest.approx(2.55)  # factor 2, η -6: (2.5 + 2.6) / 2
    assert n64.retuned_label == "init.hidden_weight=2, log2 η -6"
    assert n64.retuned_per_seed == pytest.approx((2.5, 2.6))
    assert n64.mup == pytest.approx(2.95)
    assert n64.mup_minus_retuned == pytest.approx(0.40)
    assert n64.complete
    base = rows[0]  # at the base the winner is SP's best too
    assert base.retuned == pytest.approx(2.85) and base.retuned_label == "init.hidden_weight=1, log2 η -6"


def test_retuned_rows_a_diverged_seed_rules_a_cell_out_and_missing_runs_are_flagged():
    rows = retuned_rows(_runs(sp64_of_2=(3.0, None)), CFG, CANDS, 0, (0, 1), KEYS)
    assert rows[1].retuned == pytest.approx(3.05)  # factor 2 at η -7 (η -6 diverged): (3.0 + 3.1) / 2
    assert rows[1].retuned_label == "init.hidden_weight=2, log2 η -7"
    partial = [r for r in _runs() if not (r["width"] == 64 and r["settings"].get("init_scale") and r["log2_lr"] == -6
                                          and r["settings"]["seed"] == 1)]
    rows = retuned_rows(partial, CFG, CANDS, 0, (0, 1), KEYS)
    assert not rows[1].complete and rows[0].complete
    assert rows[1].retuned == pytest.approx(3.05)  # the missing seed makes factor 2 at η -6 unknown


def test_retune_configs_are_sp_with_every_other_candidate_and_seed():
    cfgs = retune_configs(CFG, CANDS, 0, (0, 1))
    assert [(c.parameterizations, c.init_scale, c.seed) for c in cfgs] == [
        (("sp",), {"hidden_weight": 2.0}, 0), (("sp",), {"hidden_weight": 2.0}, 1)]
    assert retune_configs(replace(CFG, parameterizations=("mup",)), CANDS, 0, (0,)) == []


def test_the_retuned_table_appears_only_when_such_runs_exist():
    runs = _runs()
    assert has_retune_runs(runs, CFG, CANDS, 0)
    old = [r for r in runs if not (r["settings"].get("init_scale") and r["width"] != 32)]
    assert not has_retune_runs(old, CFG, CANDS, 0)  # base-size runs of the tuning only


# --------------------------------------------------------------------------------------
# the power of a fit (pure)
# --------------------------------------------------------------------------------------


def test_seed_sd_is_the_pooled_within_size_sd():
    sd, df = seed_sd([[0.0, 2.0], [1.0, 1.0], [5.0, None], [-1.0, 1.0, 3.0]])
    # within-size sums of squares 2 + 0 + 8 over df 1 + 1 + 2
    assert df == 4 and sd == pytest.approx(math.sqrt(10 / 4))
    assert seed_sd([[1.0], [2.0, None]]) is None


def test_half_width_is_the_fits_own_for_data_with_that_scatter():
    xs = [0.0, 1.0, 2.0, 3.0]
    # two seeds whose residuals are ±d exactly: residual sd = d·sqrt(N/(N−2)) when the line is exact
    d = 0.3
    ys = [0.5 * x + (d if s == 0 else -d) for x in xs for s in (0, 1)]
    x2 = [x for x in xs for _ in (0, 1)]
    h = fit_line(x2, ys).half_width
    resid_sd = math.sqrt(8 * d * d / 6)
    assert half_width(resid_sd, xs, 2) == pytest.approx(h)
    assert half_width(1.0, xs, 2) == pytest.approx(t_quantile(6) / math.sqrt(2 * 5))
    assert half_width(1.0, [0.0], 5) is None


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_seeds_needed_is_the_fewest_that_reach_the_target():
    xs = [0.0, 1.0, 2.0, 3.0]
    s = seeds_needed(0.5, xs, 0.25)
    assert half_width(0.5, xs, s) <= 0.25 < half_width(0.5, xs, s - 1)
    assert seeds_needed(0.01, xs) == 2
    assert seeds_needed(50.0, xs, at_most=8) is None
    wide = [math.log2(n / 32) for n in doubling_sizes(32, 1024)]
    assert seeds_needed(0.5, wide) < s  # more widths, fewer seeds
    assert doubling_sizes(32, 256) == [32, 64, 128, 256] and doubling_sizes(2, 8) == [2, 4, 8]


def test_power_rows_of_a_pilot():
    fit = {"key": "lr.input_weight", "axis": "width", "sizes": [32, 64, 128, 256], "base_size": 32,
           "seeds": [0, 1], "interval_95": [-0.9, 0.5],
           "optimal_log2_factor": [[1.0, 2.0], [1.5, 0.5], [2.0, 2.0], [0.0, 1.0]]}
    (row,) = power_rows([fit], {"width": ([32, 64, 128, 256, 512], 3)}, {"width": [512, 1024]})
    assert row["half_width"] == pytest.approx(0.7) and not row["informative"]
    assert row["seed_sd"] == pytest.approx(math.sqrt((0.5 + 0.5 + 0 + 0.5) / 4))
    assert [o["sizes"][-1] for o in row["options"]] == [256, 512, 1024]
    needed = [o["seeds_needed"] for o in row["options"]]
    assert needed == sorted(needed, reverse=True) and needed[-1] >= 2
    assert row["options"][0]["half_width_now_seeds"] == pytest.approx(
        half_width(row["seed_sd"], [0, 1, 2, 3], 2))
    assert row["planned"]["half_width"] == pytest.approx(half_width(row["seed_sd"], [0, 1, 2, 3, 4], 3))
    text = render_power("adamw", "pilot/exponents.json", [row])
    assert "| `lr.input_weight` | width | 0,1: [-0.90, +0.50] (±0.70) | **not informative** |" in text
    assert "n = 32, 64, 128, 256, 512; 3 → ±" in text


# --------------------------------------------------------------------------------------
# the MoE GPT (torch)
# --------------------------------------------------------------------------------------


def test_moe_gpt_routes_each_token_to_top_k_experts_and_its_router_is_the_router_role():
    torch = pytest.importorskip("torch")
    from spectral.models.torch import GPT
    from spectral.torch import classify

    torch.manual_seed(0)
    m = GPT(64, 2, head_dim=32, block_size=16, experts=4, top_k=2)
    x = torch.randint(0, 256, (2, 16))
    assert m(x).shape == (2, 16, 256)
    moe = m.transformer.h[0].mlp
    h = torch.randn(3, 64)
    logits = moe.gate(h)
    top, index = logits.topk(2, dim=-1)
    gates = torch.softmax(top, dim=-1)
    want = sum(gates[:, j:j + 1] * torch.stack([moe.experts[int(i)](h[r]) for r, i in enumerate(index[:, j])])
               for j in range(2))
    assert torch.allclose(moe(h), want, atol=1e-6)
    roles = {n: classify(n, p) for n, p in m.named_parameters()}
    assert roles["transformer.h.0.mlp.gate.weight"] == "router_weight"
    assert roles["transformer.h.1.mlp.experts.3.c_fc.weight"] == "hidden_weight"
    assert roles["transformer.h.1.mlp.experts.3.c_proj.bias"] == "hidden_bias"
    assert classify("transformer.h.0.mlp.c_fc.weight") == "hidden_weight"  # the dense MLP as before
    with pytest.raises(ValueError, match="top_k"):
        GPT(64, 1, head_dim=32, experts=2, top_k=3)


def test_experts_enter_a_runs_settings_only_when_set():
    assert "experts" not in SweepConfig().settings()
    s = SweepConfig(experts=4, top_k=1).settings()
    assert (s["experts"], s["top_k"]) == (4, 1)


# --------------------------------------------------------------------------------------
# the command line
# --------------------------------------------------------------------------------------


def test_sp_retune_is_on_by_default_and_off_in_gpu_8min():
    import argparse

    from spectral.cli.sweep import _sp_retune, configure_sweep

    p = argparse.ArgumentParser()
    configure_sweep(p)
    base = ["--out", "x", "--device", "cpu"]
    assert _sp_retune(p.parse_args(base))
    assert not _sp_retune(p.parse_args([*base, "--no-sp-retune"]))
    assert not _sp_retune(p.parse_args([*base, "--preset", "gpu-8min"]))
    assert _sp_retune(p.parse_args([*base, "--preset", "gpu-8min", "--sp-retune"]))


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_a_tuned_sweep_retunes_sp_at_every_size_and_reports_it(tmp_path):
    pytest.importorskip("torch")
    import json

    from spectral.cli import main

    args = ["sweep", "--device", "cpu", "-O", "adamw", "--param", "sp", "--param", "mup", "--widths", "32,64",
            "--depths", "2", "--steps", "2", "--eval-batches", "1", "--batch-size", "2", "--block-size", "16",
            "--log2-lrs=-6,-5", "--tune", "init.hidden_weight=1,2", "--n-bytes", "65536", "--threads", "1",
            "--no-progress"]
    assert main([*args, "--out", str(tmp_path / "on")]) == 0
    runs = [json.loads(line) for line in (tmp_path / "on" / "adamw" / "runs.jsonl").read_text().splitlines()]
    at64 = {(r["parameterization"], json.dumps(r["settings"].get("init_scale")), r["log2_lr"])
            for r in runs if r["width"] == 64}
    # SP at n = 64 with both candidates × both η; μP with the winner only
    assert {(p, e) for p, s, e in at64 if p == "sp"} == {("sp", -6), ("sp", -5)}
    assert len({s for p, s, e in at64 if p == "sp"}) == 2 and len({s for p, s, e in at64 if p == "mup"}) == 1
    rows = json.loads((tmp_path / "on" / "adamw" / "retuned.json").read_text())
    assert [(r["axis"], r["size"]) for r in rows] == [("width", 32), ("width", 64), ("depth", 2)]
    assert all(r["complete"] for r in rows) and rows[1]["retuned"] <= rows[1]["base_values"]
    assert "## SP re-tuned at every size" in (tmp_path / "on" / "adamw" / "summary.md").read_text()
    assert main([*args, "--out", str(tmp_path / "off"), "--no-sp-retune"]) == 0
    assert not (tmp_path / "off" / "adamw" / "retuned.json").exists()
    assert "SP re-tuned" not in (tmp_path / "off" / "adamw" / "summary.md").read_text()
