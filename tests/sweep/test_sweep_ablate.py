"""``spectral sweep --ablate``: each swapped config is μP but for one role-rule, which is SP's there."""

from __future__ import annotations

import argparse
import math
from dataclasses import replace
from pathlib import Path

import pytest

from spectral.errors import SpecError
from spectral.sweep.ablate import (
    ROLE_RULES,
    Ablation,
    ablation_configs,
    ablation_rows,
    changes,
    check_variant,
    parse_variant,
    sp_swaps,
)

torch = pytest.importorskip("torch")

from spectral.sweep import Job, SweepConfig, build_run, recipe  # noqa: E402
from spectral.sweep.recipe import derived_rules  # noqa: E402

HPS = ("lr", "weight_decay", "eps", "init_std")
_GROUP_KEYS = {"lr": "lr", "weight_decay": "weight_decay", "eps": "eps"}
_HP_OF_RULE = {"lr": "lr", "weight_decay": "weight_decay", "eps": "eps", "init_var": "init_std"}


def _numbers(cfg: SweepConfig, param: str, width: int, folder: Path) -> tuple[dict[str, dict[str, float | None]], dict[str, float]]:
    """Per parameter: its η, weight decay, ε (None: its optimizer has none) and init std; and the
    block multipliers — every number a run of ``cfg`` at ``width`` × the base depth trains with."""
    rec = recipe(cfg.optimizer, param, cfg, folder)
    job = Job(param, width, cfg.base_depth, -5)
    with torch.device("meta"):
        model, opts = build_run(job, cfg, rec, 256, "meta")
    names = {id(p): n for n, p in model.named_parameters()}
    out: dict[str, dict[str, float | None]] = {}
    for opt in opts:
        for g in opt.param_groups:
            for p in g["params"]:
                out[names[id(p)]] = {k: (float(g[k]) if k in g else None) for k in _GROUP_KEYS}
    for name, std in rec.init_stds(model, width, cfg.base_depth, cfg.init_stds).items():
        out[name]["init_std"] = std
    return out, {"input": model.alpha_input, "hidden": model.alpha_hidden, "output": model.alpha_output}


def _roles(cfg: SweepConfig, folder: Path) -> dict[str, str]:
    rec = recipe(cfg.optimizer, "mup", cfg, folder)
    from spectral.models.torch import GPT

    with torch.device("meta"):
        model = GPT(cfg.base_width, cfg.base_depth, vocab_size=256, block_size=cfg.block_size, head_dim=cfg.head_dim)
    return {n: rec.module.classify(n, p) for n, p in model.named_parameters()}


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=1e-12, abs_tol=0.0)


# weight decay and ε set to values the rules scale (λ = 0 would hide the weight-decay swap)
CFG = dict(base_width=16, base_depth=2, head_dim=16, weight_decay=0.1, eps=1e-8, multiplier={"output": 4.0})
TARGET = 128


@pytest.mark.parametrize("optimizer", ["adamw", "muon-kimi+adamw"])
@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_each_swap_is_mup_but_one_rule_which_is_sp(tmp_path: Path, optimizer: str):
    cfg = SweepConfig(optimizer=optimizer, **CFG)
    rules = derived_rules(cfg, tmp_path)
    roles = _roles(cfg, tmp_path)
    mup, mup_alpha = _numbers(cfg, "mup", TARGET, tmp_path)
    sp, sp_alpha = _numbers(cfg, "sp", TARGET, tmp_path)
    swaps = sp_swaps({r: e for r, e in rules.items() if r != "router_weight"})
    assert [s.name for s in swaps] == [r.name for r in ROLE_RULES]
    for ab in swaps:
        got, alpha = _numbers(replace(cfg, ablation=ab.overrides, ablation_name=ab.name), "mup", TARGET, tmp_path)
        swapped = {(role, _HP_OF_RULE[hp]) for role, hp, _ in ab.overrides if hp != "multiplier"}
        for name, values in got.items():
            for hp in HPS:
                want = sp if (roles[name], hp) in swapped else mup
                assert _close(values[hp], want[name][hp]), (ab.name, name, hp, values[hp], want[name][hp])
        layers = {role.split("_")[0] for role, hp, _ in ab.overrides if hp == "multiplier"}
        for layer, a in alpha.items():
            assert _close(a, (sp_alpha if layer in layers else mup_alpha)[layer]), (ab.name, layer)
        # it changes something exactly when μP's width exponent there is not SP's 0
        assert bool(changes(rules, ab)) == any(rules[role][hp][0] != 0 for role, hp, _ in ab.overrides)


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_the_swapped_values_by_number(tmp_path: Path):
    """Muon-Kimi+AdamW at 8× the base: what each swap sets, written out."""
    cfg = SweepConfig(optimizer="muon-kimi+adamw", **CFG)
    hidden, out, emb = "transformer.h.0.mlp.c_fc.weight", "lm_head.weight", "transformer.wte.weight"

    def run(name: str) -> tuple[dict, dict]:
        ab = next(a for a in sp_swaps(derived_rules(cfg, tmp_path)) if a.name == name)
        return _numbers(replace(cfg, ablation=ab.overrides, ablation_name=ab.name), "mup", TARGET, tmp_path)

    mup, alpha = _numbers(cfg, "mup", TARGET, tmp_path)
    assert mup[hidden]["init_std"] == pytest.approx(0.02 / math.sqrt(8))
    assert mup[hidden]["lr"] == pytest.approx(2**-5 / math.sqrt(8))
    assert mup[hidden]["weight_decay"] == pytest.approx(0.1 * math.sqrt(8))
    assert alpha["output"] == pytest.approx(0.5) and mup[emb]["eps"] == pytest.approx(1e-8 / 8)
    assert run("hidden init")[0][hidden]["init_std"] == pytest.approx(0.02)
    assert run("hidden lr")[0][hidden]["lr"] == pytest.approx(2**-5)
    assert run("weight-decay scaling")[0][hidden]["weight_decay"] == pytest.approx(0.1)
    assert run("output multiplier")[1]["output"] == pytest.approx(4.0)
    got = run("ε")[0]
    assert got[emb]["eps"] == pytest.approx(1e-8) and got[out]["eps"] == pytest.approx(1e-8)
    assert got[hidden]["eps"] == mup[hidden]["eps"] == 1e-7  # torch Muon's own, no rule: unchanged
    # rules μP shares with SP: the embedding's and readout's η and init, the norm gains' η
    for name in ("embedding lr", "output lr", "norm-gain lr", "readout init", "embedding init"):
        assert run(name) == (mup, alpha), name


def test_every_width_rule_of_mup_has_a_swap(tmp_path: Path):
    """Completeness: each (role, HP) whose width exponent differs from SP's 0 (the router aside,
    absent from the dense GPT) is in some swap, for both sweep optimizers."""
    for optimizer in ("adamw", "muon-kimi+adamw"):
        rules = derived_rules(SweepConfig(optimizer=optimizer), tmp_path)
        covered = {(role, hp) for ab in sp_swaps(rules) for role, hp, _ in ab.overrides}
        differ = {(role, hp) for role, e in rules.items() for hp, (a, _) in e.items()
                  if a != 0 and role != "router_weight"}
        assert differ <= covered, differ - covered
        assert differ == {("hidden_weight", "init_var"), ("hidden_weight", "lr"), ("hidden_weight", "weight_decay"),
                          ("output_weight", "multiplier"), ("input_weight", "eps"), ("output_weight", "eps"),
                          ("input_bias", "eps"), ("hidden_bias", "eps")} | (
            {("hidden_weight", "eps")} if optimizer == "adamw" else set())


def test_parse_variant():
    v = parse_variant("lr.input_weight=-0.5")
    assert v == Ablation("lr.input_weight ∝ r_n^-0.5", (("input_weight", "lr", -0.5),), variant=True)
    assert parse_variant("init.output=-0.5").overrides == (("output_weight", "init_var", -1.0),)  # std → variance
    assert parse_variant("multiplier.output=-0.5").overrides == (("output_weight", "multiplier", -0.5),)


@pytest.mark.parametrize("text, message", [
    ("lr=-1", "expected KIND.ROLE=EXPONENT"),
    ("speed.input_weight=1", "expected KIND.ROLE=EXPONENT"),
    ("lr.input_weight=x", "'x' is not a number"),
    ("lr.input_weight=nan", "finite"),
])
def test_parse_variant_refuses(text: str, message: str):
    with pytest.raises(argparse.ArgumentTypeError, match=message):
        parse_variant(text)


def test_check_variant_names_what_the_rules_have(tmp_path: Path):
    rules = derived_rules(SweepConfig(optimizer="muon-kimi+adamw"), tmp_path)
    with pytest.raises(SpecError, match="no eps for hidden_weight"):
        check_variant(rules, parse_variant("eps.hidden_weight=-1"))
    check_variant(rules, parse_variant("eps.input_weight=-0.5"))


def test_configs_and_rows_pair_seeds(tmp_path: Path):
    """The plan (μP and SP, then each swap, every seed at one η and one size) and the table's
    arithmetic: the paired Δ, its range and the seeds it lowers."""
    cfg = SweepConfig(optimizer="adamw", widths=(16, 128), base_width=16, head_dim=16)
    swap = Ablation("hidden lr", (("hidden_weight", "lr", 0.0),))
    noop = Ablation("output lr", (("output_weight", "lr", 0.0),))
    cfgs = ablation_configs(cfg, [swap, noop], 128, -6, (0, 1))
    assert [(c.parameterizations, c.ablation_name, c.seed, c.widths, c.depths, c.log2_lrs) for c in cfgs] == [
        (("mup", "sp"), "", 0, (128,), (2,), (-6,)), (("mup", "sp"), "", 1, (128,), (2,), (-6,)),
        (("mup",), "hidden lr", 0, (128,), (2,), (-6,)), (("mup",), "hidden lr", 1, (128,), (2,), (-6,)),
        (("mup",), "output lr", 0, (128,), (2,), (-6,)), (("mup",), "output lr", 1, (128,), (2,), (-6,)),
    ]
    losses = {("mup", ""): (3.0, 3.2), ("sp", ""): (2.9, 3.3), ("mup", "hidden lr"): (2.8, 3.1), ("mup", "output lr"): (3.0, 3.2)}
    records = []
    for c in cfgs:
        for p in c.parameterizations:
            v = losses[(p, c.ablation_name)][c.seed]
            records.append({"optimizer": "adamw", "width": 128, "depth": 2, "log2_lr": -6, "parameterization": p,
                            "settings": c.settings(), "val_loss": v, "diverged": False,
                            **({"reused_from": "k"} if c.ablation_name == "output lr" else {})})
    rules = derived_rules(cfg, tmp_path)
    rows = ablation_rows(records, cfg, [swap, noop], rules, 128, -6, (0, 1))
    assert [r.name for r in rows] == ["μP (derived rules)", "hidden lr", "output lr", "SP (every rule swapped)"]
    mup, hid, out, sp = rows
    assert mup.mean == pytest.approx(3.1) and mup.sd == pytest.approx(math.sqrt(0.02))
    assert hid.delta == pytest.approx(-0.15) and (hid.delta_lo, hid.delta_hi) == pytest.approx((-0.2, -0.1))
    assert hid.lower == 2 and not hid.noop and hid.change == "hidden_weight lr r_n^-1 → r_n^0"
    assert out.noop and out.reused and out.delta == 0.0 and out.change == "none: μP's rule is SP's"
    assert sp.delta == pytest.approx(0.0) and sp.lower == 1 and (sp.delta_lo, sp.delta_hi) == pytest.approx((-0.1, 0.1))


def test_a_missing_seed_leaves_the_row_open(tmp_path: Path):
    cfg = SweepConfig(optimizer="adamw", widths=(16, 128), base_width=16, head_dim=16)
    one = ablation_configs(cfg, [], 128, -6, (0,))[0]
    records = [{"optimizer": "adamw", "width": 128, "depth": 2, "log2_lr": -6, "parameterization": "mup",
                "settings": one.settings(), "val_loss": 3.0, "diverged": False}]
    rows = ablation_rows(records, cfg, [], derived_rules(cfg, tmp_path), 128, -6, (0, 1))
    assert rows[0].per_seed == (3.0, None) and rows[0].mean is None and rows[0].delta is None


def test_settings_keys_stay_without_an_ablation():
    """Runs under the derived rules keep their keys: no 'ablation' in their settings."""
    assert "ablation" not in SweepConfig().settings()
    s = SweepConfig(ablation=(("hidden_weight", "lr", 0.0),), ablation_name="hidden lr").settings()
    assert s["ablation"] == {"name": "hidden lr", "exponents": [["hidden_weight", "lr", 0.0]]}


@pytest.mark.parametrize("argv, message", [
    (["--ablate-variant", "lr.input_weight=-0.5"], "give --ablate too"),
    (["--ablate", "--param", "mup"], "drop --param"),
    (["--ablate", "--fit-exponent", "lr.hidden_weight"], "exclude each other"),
    (["--ablate", "--widths", "32", "--base-width", "32"], "must exceed --base-width 32"),
    (["--ablate", "--variants-only"], "give --ablate and --ablate-variant"),
])
def test_cli_refuses(tmp_path: Path, argv: list[str], message: str, capsys):
    from spectral.cli import main

    assert main(["sweep", "--device", "cpu", "--out", str(tmp_path / "o"), "--steps", "1", "--n-bytes", "65536",
                 "-O", "adamw", *argv]) == 2  # a usage error
    assert message in capsys.readouterr().err
    assert not (tmp_path / "o" / "adamw" / "runs.jsonl").exists()  # refused before any training


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_cli_trains_the_swaps_and_reuses_the_noops(tmp_path: Path, capsys):
    """A tiny run end to end: every swap a row, the no-ops reused, and --report-only renders the
    same ablation.md byte for byte."""
    from spectral.cli import main

    args = ["sweep", "--device", "cpu", "--out", str(tmp_path / "o"), "-O", "adamw", "--widths", "16,32",
            "--depths", "2", "--width", "16", "--base-width", "16", "--head-dim", "16", "--log2-lrs=-6,-5",
            "--steps", "2", "--batch-size", "2", "--block-size", "8", "--eval-batches", "1", "--n-bytes", "65536",
            "--ablate", "--ablate-variant", "lr.input_weight=-0.5", "--no-progress"]
    assert main(args) == 0
    out = capsys.readouterr().out
    folder = tmp_path / "o" / "adamw"
    text = (folder / "ablation.md").read_text(encoding="utf-8")
    for r in ROLE_RULES:
        assert f"| {r.name} |" in text
    assert "| lr.input_weight ∝ r_n^-0.5 (variant) |" in text
    # 5 no-ops (readout/embedding init, embedding/norm-gain/output η) reuse μP's runs; λ = 0 makes the
    # weight-decay swap a sixth
    assert out.count("(reused)") == 6
    assert text.count("no-op (μP's runs)") == 5 and "same numbers as μP (its runs)" in text
    assert main([*args, "--report-only"]) == 0
    assert (folder / "ablation.md").read_text(encoding="utf-8") == text


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_estimate_counts_the_ablation_runs_and_writes_nothing(tmp_path: Path, capsys):
    """--ablate --estimate: the base grid, then at the target width μP, SP and each swap that
    changes a number (λ = 0 and the rules SP shares reuse μP's run), per seed."""
    import json

    from spectral.cli import main

    args = ["sweep", "--device", "cpu", "--out", str(tmp_path / "o"), "-O", "adamw", "--widths", "16,32",
            "--depths", "2", "--width", "16", "--base-width", "16", "--head-dim", "16", "--log2-lrs=-6,-5",
            "--steps", "2", "--batch-size", "2", "--block-size", "8", "--eval-batches", "1", "--n-bytes", "65536",
            "--seeds", "0,1", "--ablate", "--ablate-variant", "lr.input_weight=-0.5", "--estimate"]
    assert main(args) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    sizes = {s["width"]: s["runs"] for s in json.loads(line)["estimate"]["sizes"]}
    # base: 2 η × 2 seeds; target: μP, SP, hidden init, output multiplier, hidden η, ε, the variant
    assert sizes == {16: 4, 32: 7 * 2}
    assert not (tmp_path / "o").exists()


def test_variants_only_plans_and_tables_mup_and_the_variants(tmp_path: Path):
    """--variants-only: μP and each named variant, every seed, no SP run and no SP row; the
    comparison pairs each variant with μP (paired by seed, the same base runs as cost)."""
    from spectral.sweep.compare_arms import ablation_arms, variant_pairs
    from spectral.sweep.tune import base_configs, candidates, choose

    cfg = SweepConfig(optimizer="adamw", widths=(16, 128), base_width=16, head_dim=16, log2_lrs=(-6,))
    emb, sigma = parse_variant("lr.input_weight=-0.5"), parse_variant("init.hidden_weight=0")
    cfgs = ablation_configs(cfg, [emb, sigma], 128, -6, (0, 1, 2), sp=False)
    assert [(c.parameterizations, c.ablation_name, c.seed) for c in cfgs] == [
        (("mup",), "", 0), (("mup",), "", 1), (("mup",), "", 2),
        *[(("mup",), "lr.input_weight ∝ r_n^-0.5", s) for s in (0, 1, 2)],
        *[(("mup",), "init.hidden_weight ∝ r_n^0", s) for s in (0, 1, 2)],
    ]
    loss = {"": (3.0, 3.2, 3.1), emb.name: (3.1, 3.3, 3.3), sigma.name: (2.9, 3.0, 3.05)}
    records = [{"optimizer": "adamw", "width": 128, "depth": 2, "log2_lr": -6, "parameterization": "mup",
                "settings": c.settings(), "val_loss": loss[c.ablation_name][c.seed], "diverged": False,
                "n_params": 1000, "seconds": 1.0, "device": "cpu", "steps_done": 120,
                "fingerprint": f"t{c.ablation_name}{c.seed}"} for c in cfgs]
    base = [{"optimizer": "adamw", "width": 16, "depth": 2, "log2_lr": -6, "parameterization": "mup",
             "settings": c.settings(), "val_loss": 3.5, "diverged": False, "n_params": 100,
             "seconds": 0.5, "device": "cpu", "steps_done": 120, "fingerprint": f"b{c.seed}"}
            for c in base_configs(cfg, cfg.multiplier, (0, 1, 2))]
    rules = derived_rules(cfg, tmp_path)
    rows = ablation_rows(records, cfg, [emb, sigma], rules, 128, -6, (0, 1, 2), sp=False)
    assert [r.name for r in rows] == ["μP (derived rules)", f"{emb.name} (variant)", f"{sigma.name} (variant)"]
    assert rows[1].delta == pytest.approx(0.4 / 3) and rows[2].delta == pytest.approx(-0.35 / 3)
    assert rows[2].change == "hidden_weight init_var r_n^-1 → r_n^0" and rows[2].lower == 3
    choice = choose(base, cfg, candidates(cfg.multiplier, []), (0, 1, 2), ())
    arms = ablation_arms(base + records, cfg, cfg, choice, (0, 1, 2), 128, -6, [emb, sigma])
    assert [a.name for a in arms] == ["μP transferred", f"variant {emb.name}", f"variant {sigma.name}"]
    pairs = variant_pairs(arms)
    assert [(p.a.name, p.b.name) for p in pairs] == [(arms[1].name, arms[0].name), (arms[2].name, arms[0].name)]
    assert [d for _, d in pairs[1].diffs] == pytest.approx([-0.1, -0.2, -0.05])
    lo, hi = pairs[1].interval  # mean -0.117, sd 0.076, t(2) = 4.303: [-0.306, +0.073]
    assert lo == pytest.approx(-0.35 / 3 - 4.302652729911275 * 0.07637626158259733 / math.sqrt(3))
    assert hi == pytest.approx(-0.35 / 3 + 4.302652729911275 * 0.07637626158259733 / math.sqrt(3))
    assert pairs[1].ratio == 1.0  # the same base runs are each arm's cost


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_estimate_with_variants_only_counts_mup_and_the_variants(tmp_path: Path, capsys):
    """--variants-only --estimate: the base grid, then at the target μP and each variant only."""
    import json

    from spectral.cli import main

    args = ["sweep", "--device", "cpu", "--out", str(tmp_path / "o"), "-O", "adamw", "--widths", "16,32",
            "--depths", "2", "--width", "16", "--base-width", "16", "--head-dim", "16", "--log2-lrs=-6,-5",
            "--steps", "2", "--batch-size", "2", "--block-size", "8", "--eval-batches", "1", "--n-bytes", "65536",
            "--seeds", "0,1", "--ablate", "--variants-only", "--ablate-variant", "lr.input_weight=-0.5",
            "--ablate-variant", "init.hidden_weight=0", "--estimate"]
    assert main(args) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    sizes = {s["width"]: s["runs"] for s in json.loads(line)["estimate"]["sizes"]}
    assert sizes == {16: 4, 32: 3 * 2}  # μP and two variants, two seeds
    assert not (tmp_path / "o").exists()
